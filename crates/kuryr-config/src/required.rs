//! Values a process cannot work without, depending on its role and the drivers selected.
//! Upstream registers none of its options as required; it raises `RequiredOptError` later, when
//! a driver first needs the value (often minutes after start, on the first pod). kuryr-rs checks
//! the same conditions at start-up so a broken configuration stops the process before it touches
//! anything.

use crate::config::Config;
use crate::error::ConfigError;
use crate::value::Value;

/// Which process the configuration is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// kuryr-controller: needs project, subnets and security groups for the selected drivers.
    Controller,
    /// kuryr-daemon: no OpenStack values required.
    Daemon,
    /// kuryrctl and other tools: nothing required.
    Any,
}

fn missing(config: &Config, group: &str, option: &str, reason: String) -> Option<ConfigError> {
    let opt = config.resolved.get(group, option)?;
    let empty = match &opt.value {
        None => true,
        Some(Value::Str(s)) => s.trim().is_empty(),
        Some(Value::List(l)) => l.is_empty(),
        Some(_) => false,
    };
    empty.then(|| ConfigError::MissingRequired {
        group: group.to_string(),
        option: option.to_string(),
        reason,
        origin: opt.origin.clone(),
        files: config.resolved.files.clone(),
    })
}

/// Every requirement `role` has that the configuration does not meet.
pub fn check_required(config: &Config, role: Role) -> Vec<ConfigError> {
    if role != Role::Controller {
        return Vec::new();
    }
    let k = &config.groups.kubernetes;
    let handlers = |h: &str| k.enabled_handlers.iter().any(|x| x == h);
    let mut out = Vec::new();
    let mut need = |group: &str, option: &str, reason: String| {
        if let Some(e) = missing(config, group, option, reason) {
            out.push(e);
        }
    };
    need(
        "neutron_defaults",
        "project",
        "by kuryr-controller (project drivers: default, annotation fallback)".into(),
    );
    if k.pod_subnets_driver == "default" {
        need(
            "neutron_defaults",
            "pod_subnet",
            "by kuryr-controller when [kubernetes] pod_subnets_driver = default".into(),
        );
    }
    if k.pod_subnets_driver == "namespace" {
        for opt in ["pod_router", "pod_subnet_pool"] {
            need(
                "namespace_subnet",
                opt,
                "by kuryr-controller when [kubernetes] pod_subnets_driver = namespace".into(),
            );
        }
    }
    if k.service_subnets_driver == "default" && (handlers("service") || handlers("endpoints")) {
        need(
            "neutron_defaults",
            "service_subnet",
            "by kuryr-controller when the service handler is enabled and \
             [kubernetes] service_subnets_driver = default"
                .into(),
        );
    }
    if handlers("vif") || handlers("kuryrport") {
        need(
            "neutron_defaults",
            "pod_security_groups",
            format!(
                "by kuryr-controller when [kubernetes] pod_security_groups_driver = {} (pods \
                 that match no policy get these groups)",
                k.pod_security_groups_driver
            ),
        );
    }
    if k.pod_vif_driver.starts_with("nested-") && k.nodes_subnets_driver == "config" {
        need(
            "pod_vif_nested",
            "worker_nodes_subnets",
            format!(
                "by kuryr-controller when [kubernetes] pod_vif_driver = {} and \
                 nodes_subnets_driver = config",
                k.pod_vif_driver
            ),
        );
    }
    out
}
