//! What kuryr-rs implements today, checked at start-up. Upstream accepts these values and acts
//! on them; a kuryr-rs that accepted them and did something else (`nested-vlan` creating bound
//! `neutron-vif` ports for VM host names, Services enabled and never handled) would fail
//! *silently*. So a value whose feature is not implemented yet is a [`ConfigError`] naming the
//! option, the value and the file:line — and where upstream itself ignores the option without
//! the feature (e.g. `[octavia_defaults]` with no service handler), one [`Warning`] says that
//! it has no effect. The lists shrink as features land (Services, NetworkPolicy, nested mode).

use crate::config::Config;
use crate::error::{ConfigError, Origin, Warning, WarningKind};
use crate::required::Role;

/// Handlers kuryr-controller runs (`[kubernetes] enabled_handlers`).
pub const IMPLEMENTED_HANDLERS: &[&str] = &[
    "vif",
    "kuryrport",
    "namespace",
    "kuryrnetwork",
    "kuryrnetwork_population",
    "service",
    "endpoints",
    "kuryrloadbalancer",
    "policy",
    "kuryrnetworkpolicy",
    "pod_label",
];

/// The handlers NetworkPolicy needs, all together with `pod_security_groups_driver = policy`.
pub const POLICY_HANDLERS: &[&str] = &["policy", "kuryrnetworkpolicy", "pod_label"];

/// Handlers of upstream's that kuryr-rs does not run yet, with the feature they belong to.
pub const PENDING_HANDLERS: &[(&str, &str)] = &[
    (
        "lb",
        "Services through upstream's pre-CRD annotations (use service, endpoints, kuryrloadbalancer)",
    ),
    (
        "lbaasspec",
        "Services through upstream's pre-CRD annotations (use service, endpoints, kuryrloadbalancer)",
    ),
    ("ingresslb", "OpenShift routes"),
    ("ocproute", "OpenShift routes"),
    ("machine", "OpenShift machines"),
    ("openshift_machine", "OpenShift machines"),
];

/// The handlers among [`PENDING_HANDLERS`] that need Services.
const SERVICE_HANDLERS: &[&str] = &["service", "endpoints", "kuryrloadbalancer", "lb", "lbaasspec"];

fn origin_of(config: &Config, group: &str, option: &str) -> Option<Origin> {
    config.resolved.get(group, option).and_then(|o| o.origin.clone())
}

fn default_origin() -> Origin {
    Origin {
        file: "(default)".into(),
        line: 0,
    }
}

struct Checker<'a> {
    config: &'a Config,
    errors: Vec<ConfigError>,
    warnings: Vec<Warning>,
}

impl Checker<'_> {
    /// `[group] option` must be one of `implemented`; `what(value)` names what is missing.
    fn one_of(
        &mut self,
        group: &'static str,
        option: &'static str,
        value: &str,
        implemented: &[&str],
        what: impl Fn(&str) -> String,
    ) {
        if implemented.contains(&value) {
            return;
        }
        self.errors.push(ConfigError::NotImplemented {
            origin: origin_of(self.config, group, option),
            group,
            option,
            value: value.into(),
            what: format!(
                "{} (kuryr-rs implements: {})",
                what(value),
                implemented.join(", ")
            ),
        });
    }

    fn not_in_effect(&mut self, group: &'static str, option: &'static str, message: String) {
        self.warnings.push(Warning {
            kind: WarningKind::NotInEffect,
            origin: origin_of(self.config, group, option).unwrap_or_else(default_origin),
            group: group.into(),
            option: option.into(),
            message,
        });
    }

    fn handlers(&mut self) {
        let k = &self.config.groups.kubernetes;
        let from_file = origin_of(self.config, "kubernetes", "enabled_handlers");
        let mut pending = Vec::new();
        let mut unknown = Vec::new();
        for h in &k.enabled_handlers {
            if IMPLEMENTED_HANDLERS.contains(&h.as_str()) {
                continue;
            }
            match PENDING_HANDLERS.iter().find(|(n, _)| n == h) {
                Some((_, feature)) => pending.push(format!("{h} ({feature})")),
                None => unknown.push(h.clone()),
            }
        }
        if !unknown.is_empty() {
            self.errors.push(ConfigError::NotImplemented {
                origin: from_file.clone(),
                group: "kubernetes",
                option: "enabled_handlers",
                value: unknown.join(","),
                what: format!(
                    "no such handler, upstream's or kuryr-rs' (kuryr-rs implements: {})",
                    IMPLEMENTED_HANDLERS.join(", ")
                ),
            });
        }
        if pending.is_empty() {
            return;
        }
        if from_file.is_some() {
            self.errors.push(ConfigError::NotImplemented {
                origin: from_file,
                group: "kubernetes",
                option: "enabled_handlers",
                value: k.enabled_handlers.join(","),
                what: format!(
                    "handlers not implemented by kuryr-rs yet: {}; remove them to run without these features \
                     (kuryr-rs implements: {})",
                    pending.join(", "),
                    IMPLEMENTED_HANDLERS.join(", ")
                ),
            });
        } else {
            // Upstream's default list names the Service handlers; a kuryr.conf that does not set
            // the option should still start kuryr-rs, saying loudly what it does not do.
            self.not_in_effect(
                "kubernetes",
                "enabled_handlers",
                format!(
                    "the default enabled_handlers include handlers kuryr-rs does not implement yet, which are \
                     skipped: {}; set enabled_handlers to silence this",
                    pending.join(", ")
                ),
            );
        }
    }

    /// NetworkPolicy is the policy driver and its three handlers together: either alone would
    /// fail silently (policies translated but never on a port, or pods waiting for groups no
    /// handler makes).
    fn policy_handlers(&mut self, k: &crate::groups::KubernetesConf) {
        let enabled: Vec<&str> = POLICY_HANDLERS
            .iter()
            .copied()
            .filter(|h| k.enabled_handlers.iter().any(|e| e == h))
            .collect();
        let policy_driver = k.pod_security_groups_driver == "policy";
        if policy_driver && enabled.len() < POLICY_HANDLERS.len() {
            let missing: Vec<&str> = POLICY_HANDLERS
                .iter()
                .copied()
                .filter(|h| !enabled.contains(h))
                .collect();
            self.errors.push(ConfigError::NotImplemented {
                origin: origin_of(self.config, "kubernetes", "pod_security_groups_driver"),
                group: "kubernetes",
                option: "pod_security_groups_driver",
                value: k.pod_security_groups_driver.clone(),
                what: format!(
                    "NetworkPolicy also needs these handlers in [kubernetes] enabled_handlers: {}",
                    missing.join(", ")
                ),
            });
        } else if !policy_driver && !enabled.is_empty() {
            self.errors.push(ConfigError::NotImplemented {
                origin: origin_of(self.config, "kubernetes", "enabled_handlers"),
                group: "kubernetes",
                option: "enabled_handlers",
                value: enabled.join(","),
                what: format!(
                    "NetworkPolicy handlers need [kubernetes] pod_security_groups_driver = policy (it is {})",
                    k.pod_security_groups_driver
                ),
            });
        }
    }

    fn controller(&mut self) {
        let k = self.config.groups.kubernetes.clone();
        self.one_of(
            "kubernetes",
            "pod_vif_driver",
            &k.pod_vif_driver,
            &["neutron-vif", "nested-vlan", "nested-macvlan"],
            |v| format!("the {v} VIF driver is not implemented by kuryr-rs yet"),
        );
        self.one_of(
            "kubernetes",
            "vif_pool_driver",
            &k.vif_pool_driver,
            &["neutron", "noop", "nested", "multi_pool"],
            |v| format!("the {v} pool driver is not implemented by kuryr-rs yet"),
        );
        self.one_of(
            "kubernetes",
            "pod_subnets_driver",
            &k.pod_subnets_driver,
            &["default", "namespace"],
            |v| format!("the {v} subnets driver is not implemented by kuryr-rs"),
        );
        self.one_of(
            "kubernetes",
            "pod_security_groups_driver",
            &k.pod_security_groups_driver,
            &["default", "policy"],
            |v| format!("the {v} security groups driver is not implemented by kuryr-rs"),
        );
        self.one_of(
            "kubernetes",
            "service_security_groups_driver",
            &k.service_security_groups_driver,
            &["default", "policy"],
            |v| format!("the {v} security groups driver is not implemented by kuryr-rs"),
        );
        self.policy_handlers(&k);
        for (opt, value) in [
            ("pod_project_driver", &k.pod_project_driver),
            ("namespace_project_driver", &k.namespace_project_driver),
        ] {
            self.one_of("kubernetes", opt, value, &["default", "annotation"], |v| {
                format!("the {v} project driver is not implemented by kuryr-rs")
            });
        }
        let extra: Vec<&String> = k
            .multi_vif_drivers
            .iter()
            .filter(|d| d.as_str() != "noop")
            .collect();
        if !extra.is_empty() {
            self.errors.push(ConfigError::NotImplemented {
                origin: origin_of(self.config, "kubernetes", "multi_vif_drivers"),
                group: "kubernetes",
                option: "multi_vif_drivers",
                value: extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","),
                what: "additional VIFs (NPWG network attachments) are not implemented by kuryr-rs yet \
                       (kuryr-rs implements: noop)"
                    .into(),
            });
        }
        self.handlers();
        // `[vif_pool] vif_pool_mapping` / `pools_vif_drivers` are always read (upstream routes
        // every pod through its multi pool): kuryr-controller validates them with the pools.
        let services = k
            .enabled_handlers
            .iter()
            .any(|h| SERVICE_HANDLERS.contains(&h.as_str()) && IMPLEMENTED_HANDLERS.contains(&h.as_str()));
        let provider = k.endpoints_driver_octavia_provider.as_str();
        if services && self.config.groups.octavia_defaults.enforce_sg_rules && provider != "ovn" {
            self.not_in_effect(
                "octavia_defaults",
                "enforce_sg_rules",
                "has no effect yet: kuryr-rs does not copy the backends' security group rules onto load balancer \
                 VIP ports (that comes with NetworkPolicy); Services stay reachable from everywhere the VIP is"
                    .into(),
            );
        }
        if !services {
            let set: Vec<&'static str> = self
                .config
                .resolved
                .iter()
                .filter(|o| o.spec.group == "octavia_defaults" && o.origin.is_some())
                .map(|o| o.spec.name)
                .collect();
            if let Some(first) = set.first() {
                self.not_in_effect(
                    "octavia_defaults",
                    first,
                    format!(
                        "[octavia_defaults] {} have no effect: no Service handler (service, endpoints, \
                         kuryrloadbalancer) is enabled",
                        set.join(", ")
                    ),
                );
            }
            if k.service_security_groups_driver != "default" {
                self.not_in_effect(
                    "kubernetes",
                    "service_security_groups_driver",
                    "has no effect: no Service handler (service, endpoints, kuryrloadbalancer) is enabled"
                        .into(),
                );
            }
        }
    }
}

/// Values `role` would act on that kuryr-rs does not implement (errors), and options set that
/// have no effect without a missing feature (warnings).
pub fn check_supported(config: &Config, role: Role) -> (Vec<ConfigError>, Vec<Warning>) {
    let mut c = Checker {
        config,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    if role == Role::Controller {
        c.controller();
    }
    (c.errors, c.warnings)
}
