//! Nothing accepted silently that does nothing: values whose feature kuryr-rs does not implement
//! yet stop kuryr-controller with an error naming the option, the value and the file:line;
//! options upstream itself ignores without the feature only warn.

use std::path::PathBuf;

use kuryr_config::{ConfigError, ConfigSources, Role, WarningKind, from_strs, load_for};

fn no_env(_: &str) -> Option<String> {
    None
}

/// What a controller needs to start with the default drivers.
const BASE: &str = "[neutron_defaults]\nproject = p\npod_subnet = s\npod_security_groups = sg\n\
                    [kubernetes]\nenabled_handlers = vif,kuryrport\n";

fn refused(extra: &str) -> Vec<ConfigError> {
    let text = format!("{BASE}{extra}");
    from_strs(&[("kuryr.conf", &text)], Role::Controller, &no_env)
        .expect_err("refused")
        .0
        .into_iter()
        .filter(|e| matches!(e, ConfigError::NotImplemented { .. }))
        .collect()
}

fn message(extra: &str) -> String {
    let errs = refused(extra);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    errs[0].to_string()
}

#[test]
fn the_base_configuration_starts() {
    let (_, warnings) = from_strs(&[("kuryr.conf", BASE)], Role::Controller, &no_env).expect("starts");
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[test]
fn vif_drivers_without_an_implementation_are_refused_with_file_and_line() {
    for driver in ["nested-dpdk", "sriov"] {
        let m = message(&format!("pod_vif_driver = {driver}\n"));
        // BASE has 6 lines; the option is on line 7.
        assert!(
            m.starts_with("kuryr.conf:7: [kubernetes] pod_vif_driver = "),
            "{m}"
        );
        assert!(m.contains(driver), "{m}");
        assert!(
            m.contains("kuryr-rs implements: neutron-vif, nested-vlan, nested-macvlan"),
            "{m}"
        );
    }
}

#[test]
fn pool_drivers_without_an_implementation_are_refused() {
    let m = message("vif_pool_driver = multipool\n");
    assert!(m.contains("[kubernetes] vif_pool_driver"), "{m}");
    assert!(m.contains("neutron, noop, nested, multi_pool"), "{m}");
}

#[test]
fn multi_vif_drivers_other_than_noop_are_refused() {
    let m = message("multi_vif_drivers = noop,npwg_multiple_interfaces\n");
    assert!(
        m.contains("[kubernetes] multi_vif_drivers = npwg_multiple_interfaces"),
        "{m}"
    );
}

#[test]
fn the_policy_security_groups_driver_needs_the_policy_handlers_and_back() {
    let m = message("pod_security_groups_driver = policy\n");
    assert!(
        m.contains("[kubernetes] pod_security_groups_driver = policy"),
        "{m}"
    );
    assert!(m.contains("policy, kuryrnetworkpolicy, pod_label"), "{m}");
    let text = BASE.replace("kuryrport\n", "kuryrport,policy\n");
    let errs = from_strs(&[("kuryr.conf", &text)], Role::Controller, &no_env)
        .expect_err("refused")
        .0;
    let m = errs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        m.contains("pod_security_groups_driver = policy (it is default)"),
        "{m}"
    );
    let text = BASE.replace(
        "kuryrport\n",
        "kuryrport,policy,kuryrnetworkpolicy,pod_label\npod_security_groups_driver = policy\n",
    );
    from_strs(&[("kuryr.conf", &text)], Role::Controller, &no_env).expect("NetworkPolicy starts");
}

#[test]
fn handlers_set_in_a_file_must_be_implemented() {
    let text = "[neutron_defaults]\nproject = p\npod_subnet = s\npod_security_groups = sg\nservice_subnet = v\n\
                [kubernetes]\nenabled_handlers = vif,kuryrport,service,endpoints,lbaasspec\n";
    let errs = from_strs(&[("k.conf", text)], Role::Controller, &no_env)
        .expect_err("refused")
        .0;
    let m = errs
        .iter()
        .find(|e| matches!(e, ConfigError::NotImplemented { option, .. } if *option == "enabled_handlers"))
        .map(ToString::to_string)
        .unwrap_or_else(|| panic!("no enabled_handlers error in {errs:#?}"));
    assert!(m.starts_with("k.conf:7: [kubernetes] enabled_handlers"), "{m}");
    assert!(!m.contains("service ("), "Services are implemented: {m}");
    assert!(m.contains("lbaasspec (Services through"), "{m}");
    // A typo is no handler at all.
    let m = message("[kubernetes]\nenabled_handlers = vif,kuryrprot\n");
    assert!(m.contains("kuryrprot") && m.contains("no such handler"), "{m}");
}

#[test]
fn upstreams_default_handler_list_is_implemented() {
    let text =
        "[neutron_defaults]\nproject = p\npod_subnet = s\npod_security_groups = sg\nservice_subnet = v\n";
    let (c, w) = from_strs(&[("d.conf", text)], Role::Controller, &no_env).expect("defaults start");
    let w: Vec<_> = w.iter().filter(|w| w.kind == WarningKind::NotInEffect).collect();
    // Only upstream's default `enforce_sg_rules = true`, which kuryr-rs does not apply yet.
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!(
        (w[0].group.as_str(), w[0].option.as_str()),
        ("octavia_defaults", "enforce_sg_rules")
    );
    let h = &c.groups.kubernetes.enabled_handlers;
    assert!(
        h.iter().any(|h| h == "service") && h.iter().any(|h| h == "kuryrloadbalancer"),
        "{h:?}"
    );
}

#[test]
fn options_upstream_also_ignores_without_their_feature_warn_with_file_and_line() {
    let extra = "[vif_pool]\nvif_pool_mapping = nested-vlan:nested\n\
                 [octavia_defaults]\nmember_mode = L2\nlb_algorithm = SOURCE_IP_PORT\n";
    let text = format!("{BASE}{extra}");
    let (_, w) = from_strs(&[("w.conf", &text)], Role::Controller, &no_env).expect("starts");
    let w: Vec<_> = w.iter().filter(|w| w.kind == WarningKind::NotInEffect).collect();
    // The pool mapping is in effect (the multi pool, as upstream); the Octavia options are not.
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!(w[0].group, "octavia_defaults");
    assert!(
        w[0].message.contains("member_mode") && w[0].message.contains("lb_algorithm"),
        "{}",
        w[0].message
    );
    assert!(w[0].message.contains("no Service handler"), "{}", w[0].message);
}

#[test]
fn the_daemon_and_tools_accept_what_the_controller_refuses() {
    let text = format!("{BASE}pod_vif_driver = nested-dpdk\n");
    assert!(from_strs(&[("n.conf", &text)], Role::Daemon, &no_env).is_ok());
    assert!(from_strs(&[("n.conf", &text)], Role::Any, &no_env).is_ok());
}

#[test]
fn upstreams_full_sample_starts_the_controller() {
    // Nested VLAN pods from `nested` pools, Services, NetworkPolicy: every feature it asks for
    // is implemented; what is not in effect warns with its file and line.
    let sources = ConfigSources {
        config_files: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/kuryr.conf")],
        config_dirs: vec![],
    };
    let (c, warnings) = load_for(&sources, Role::Controller, &no_env).expect("the controller starts");
    assert_eq!(c.groups.kubernetes.pod_vif_driver, "nested-vlan");
    assert_eq!(c.groups.kubernetes.vif_pool_driver, "nested");
    for w in &warnings {
        assert!(w.origin.line > 0 || &*w.origin.file == "(default)", "{w:?}");
    }
}
