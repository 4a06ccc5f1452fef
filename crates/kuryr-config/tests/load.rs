//! Loading upstream-style configuration: the full sample, layering of files and directories,
//! continuation lines, every warning and error kind with exact file:line, upstream defaults,
//! and credential selection.

use kuryr_config::{
    CloudAuth, ConfigError, ConfigSources, Role, Value, WarningKind, from_strs, load, load_for,
    resolve_cloud_auth,
};
use std::path::PathBuf;
use std::time::Duration;

fn no_env(_: &str) -> Option<String> {
    None
}

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/kuryr.conf")
}

#[test]
fn full_sample_loads_for_the_controller() {
    let sources = ConfigSources {
        config_files: vec![sample()],
        config_dirs: vec![],
    };
    // Upstream's full sample (nested-vlan, Services, NetworkPolicy): every value is read as
    // upstream would (tests/supported.rs: the controller starts with it).
    let (c, warnings) = load_for(&sources, Role::Any, &no_env).expect("sample loads");
    // Only the os-vif privsep group and the deprecated-for-nothing options warn.
    let kinds: Vec<_> = warnings.iter().map(|w| (w.kind, w.group.as_str())).collect();
    assert_eq!(
        kinds,
        vec![(WarningKind::IgnoredGroup, "vif_plug_ovs_privileged")],
        "{warnings:#?}"
    );
    assert!(c.default.debug && c.default.use_stderr);
    assert_eq!(
        c.default.default_log_levels,
        vec!["kuryr_kubernetes=DEBUG", "pyroute2=WARN", "urllib3=WARN"]
    );
    assert_eq!(c.binding.link_iface, "ens3");
    assert_eq!(c.cni_daemon.worker_num, 8);
    assert_eq!(c.cni_daemon.vif_annotation_timeout, Duration::from_secs(120));
    assert!(c.cni_daemon.docker_mode);
    assert_eq!(c.cni_daemon.netns_proc_dir.as_deref(), Some("/host_proc"));
    assert_eq!(c.cni_health_server.max_memory_usage, Some(1024));
    assert_eq!(c.kubernetes.api_root, "https://10.0.0.10:6443");
    assert_eq!(c.kubernetes.pod_vif_driver, "nested-vlan");
    assert_eq!(c.kubernetes.enabled_handlers.len(), 11);
    assert_eq!(c.kubernetes.enabled_handlers[10], "kuryrnetworkpolicy");
    assert!(c.kubernetes.controller_ha);
    assert!(!c.kubernetes.use_events);
    assert_eq!(c.kubernetes.watch_reconcile_period, Duration::from_secs(60));
    assert_eq!(
        c.neutron_defaults.pod_security_groups,
        vec![
            "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e",
            "3c4d5e6f-7a8b-4c9d-0e1f-2a3b4c5d6e7f"
        ]
    );
    assert_eq!(c.neutron_defaults.network_device_mtu, 1400);
    assert_eq!(
        c.neutron_defaults.subnet_mapping["sriov"],
        "6f7a8b9c-0d1e-4f2a-3b4c-5d6e7f8a9b0c"
    );
    assert_eq!(
        c.neutron_defaults.resource_tags,
        vec!["kuryr-cluster-a", "env-prod"]
    );
    assert!(!c.node_driver_caching.caching);
    assert_eq!(c.nodes_caching.cache_time, Duration::from_secs(600));
    assert_eq!(c.subnet_caching.cache_time, Duration::from_secs(1800));
    assert_eq!(c.octavia_defaults.member_mode, "L2");
    assert_eq!(
        c.octavia_defaults.timeout_client_data,
        Duration::from_millis(50000)
    );
    assert_eq!(c.pod_vif_nested.rev_update_attempts, 5);
    assert_eq!(c.vif_pool.ports_pool_max, 64);
    assert_eq!(c.vif_pool.vif_pool_mapping["nested-vlan"], "nested");
    assert_eq!(c.nested_dpdk.dpdk_driver, "vfio-pci");
    assert_eq!(c.nested_dpdk.pci_mount_point, "/var/pci_address");
    assert_eq!(c.neutron.timeout, Some(Duration::from_secs_f64(30.5)));
    assert_eq!(c.neutron.endpoint_type, "public");
    // provenance
    let o = c.resolved.get("vif_pool", "ports_pool_min").expect("registered");
    assert_eq!(o.value, Some(Value::Int(8)));
    let origin = o.origin.as_ref().expect("set in file");
    assert!(origin.file.ends_with("tests/data/kuryr.conf"));
    assert_eq!(origin.line, 127);

    match resolve_cloud_auth(&c, &|k| (k == "OS_CLOUD").then(|| "ignored".to_string())) {
        Ok(CloudAuth::Neutron(a)) => {
            assert_eq!(a.auth_type, "password");
            assert_eq!(a.auth_url.as_deref(), Some("http://192.0.2.10/identity"));
            assert_eq!(a.username.as_deref(), Some("kuryr"));
            assert_eq!(a.password.as_deref(), Some("s3cr3t"));
            assert_eq!(a.project_name.as_deref(), Some("service"));
            assert_eq!(a.region_name.as_deref(), Some("RegionOne"));
            assert_eq!(a.cafile.as_deref(), Some("/etc/ssl/certs/openstack-ca.pem"));
            assert!(!format!("{a:?}").contains("s3cr3t"), "password redacted in Debug");
        }
        other => panic!("expected [neutron] auth, got {other:?}"),
    }
}

#[test]
fn defaults_equal_upstream() {
    let (c, w) = from_strs(&[], Role::Any, &no_env).expect("defaults");
    assert!(w.is_empty());
    assert_eq!(c.vif_pool.ports_pool_min, 5);
    assert_eq!(c.vif_pool.ports_pool_max, 0);
    assert_eq!(c.vif_pool.ports_pool_batch, 10);
    assert_eq!(c.vif_pool.ports_pool_update_frequency, Duration::from_secs(20));
    // kuryr-rs differs from upstream (127.0.0.1:5036 over TCP, open to any local process).
    assert_eq!(c.cni_daemon.bind_address, "unix:/run/kuryr/cni.sock");
    assert_eq!(c.cni_daemon.worker_num, 30);
    assert_eq!(c.cni_daemon.vif_annotation_timeout, Duration::from_secs(60));
    assert_eq!(c.cni_daemon.cni_failures_count, 3);
    assert!(!c.cni_daemon.docker_mode);
    assert_eq!(c.kubernetes.api_root, "https://localhost:6443");
    assert_eq!(c.kubernetes.pod_vif_driver, "neutron-vif");
    assert_eq!(c.kubernetes.vif_pool_driver, "noop");
    assert_eq!(c.kubernetes.nodes_subnets_driver, "config");
    assert_eq!(
        c.kubernetes.enabled_handlers,
        vec!["vif", "endpoints", "service", "kuryrloadbalancer", "kuryrport"]
    );
    assert_eq!(c.kubernetes.multi_vif_drivers, vec!["noop"]);
    assert_eq!(c.kubernetes.watch_reconcile_period, Duration::from_secs(120));
    assert_eq!(c.kubernetes.controller_ha_elector_port, 16401);
    assert!(c.kubernetes.use_events);
    assert!(!c.kubernetes.ssl_verify_server_crt);
    assert_eq!(
        c.kubernetes.token_file.as_deref(),
        Some("/var/run/secrets/kubernetes.io/serviceaccount/token")
    );
    assert_eq!(c.neutron_defaults.project, None);
    assert_eq!(c.neutron_defaults.ovs_bridge, None);
    assert_eq!(
        c.neutron_defaults.lbaas_activation_timeout,
        Duration::from_secs(300)
    );
    assert!(c.neutron_defaults.resource_tags.is_empty());
    assert_eq!(c.octavia_defaults.member_mode, "L3");
    assert_eq!(c.octavia_defaults.lb_algorithm, "ROUND_ROBIN");
    assert!(c.octavia_defaults.enforce_sg_rules);
    assert_eq!(c.health_server.port, 8082);
    assert_eq!(c.cni_health_server.port, 8090);
    assert_eq!(c.cni_health_server.max_memory_usage, None);
    assert_eq!(c.prometheus_exporter.controller_exporter_port, 9654);
    assert_eq!(c.prometheus_exporter.cni_exporter_port, 9655);
    assert_eq!(c.pool_manager.sock_file, "/run/kuryr/kuryr_manage.sock");
    assert_eq!(c.pod_vif_nested.rev_update_attempts, 3);
    assert!(c.subnet_caching.caching);
    assert_eq!(c.subnet_caching.cache_time, Duration::from_secs(3600));
    assert_eq!(c.vhostuser.mount_point, "/var/cni/vhostuser");
    assert_eq!(c.neutron.endpoint_type, "public");
    assert_eq!(c.binding.link_iface, "");
    assert_eq!(c, kuryr_config::Config::defaults());
}

#[test]
fn k8s_api_environment_is_the_api_root_default() {
    let env = |k: &str| (k == "K8S_API").then(|| "https://api.example:6443".to_string());
    let (c, _) = from_strs(&[], Role::Any, &env).expect("ok");
    assert_eq!(c.kubernetes.api_root, "https://api.example:6443");
    let (c, _) = from_strs(&[("a.conf", "[kubernetes]\napi_root =\n")], Role::Any, &env).expect("ok");
    assert_eq!(c.kubernetes.api_root, "", "empty means in-cluster, as upstream");
}

#[test]
fn layering_files_then_config_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a.conf");
    std::fs::write(
        &a,
        "[vif_pool]\nports_pool_min = 1\nports_pool_max = 10\nports_pool_min = 2\n\
         [kubernetes]\nport_debug = yes\n",
    )
    .expect("write");
    let confd = dir.path().join("conf.d");
    std::fs::create_dir(&confd).expect("mkdir");
    std::fs::write(confd.join("20-late.conf"), "[vif_pool]\nports_pool_min = 4\n").expect("w");
    std::fs::write(
        confd.join("10-early.conf"),
        "[vif_pool]\nports_pool_min = 3\nports_pool_batch = 7\n",
    )
    .expect("w");
    std::fs::write(confd.join("99-ignored.txt"), "[vif_pool]\nports_pool_min = 99\n").expect("w");
    let sources = ConfigSources {
        config_files: vec![a.clone()],
        config_dirs: vec![confd.clone()],
    };
    let (c, w) = load(&sources).expect("loads");
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(c.vif_pool.ports_pool_min, 4, "20-late.conf is read last");
    assert_eq!(c.vif_pool.ports_pool_batch, 7);
    assert_eq!(c.vif_pool.ports_pool_max, 10);
    assert!(c.kubernetes.port_debug);
    let origin = c
        .resolved
        .get("vif_pool", "ports_pool_min")
        .and_then(|o| o.origin.clone())
        .expect("origin");
    assert_eq!(origin.line, 2);
    assert!(origin.file.ends_with("20-late.conf"));
    assert_eq!(c.resolved.files.len(), 3);

    // A missing file and a missing directory are errors naming them.
    let bad = ConfigSources {
        config_files: vec![dir.path().join("nope.conf")],
        config_dirs: vec![],
    };
    let errs = load(&bad).expect_err("missing file");
    assert!(matches!(&errs.0[0], ConfigError::ReadFile { path, .. } if path.ends_with("nope.conf")));
    let bad = ConfigSources {
        config_files: vec![],
        config_dirs: vec![dir.path().join("nodir")],
    };
    let errs = load(&bad).expect_err("missing dir");
    assert!(errs.to_string().contains("nodir"), "{errs}");
}

#[test]
fn continuation_lines_build_lists_and_dicts() {
    let text = "[vif_pool]\nvif_pool_mapping = nested-vlan:nested,\n  neutron-vif:neutron\n\
                [neutron_defaults]\npod_security_groups = sg1,\n\tsg2\n";
    let (c, _) = from_strs(&[("c.conf", text)], Role::Any, &no_env).expect("ok");
    assert_eq!(c.vif_pool.vif_pool_mapping.len(), 2);
    assert_eq!(c.vif_pool.vif_pool_mapping["neutron-vif"], "neutron");
    assert_eq!(c.neutron_defaults.pod_security_groups, vec!["sg1", "sg2"]);
}

#[test]
fn wrong_types_are_reported_all_with_file_line_and_expectation() {
    let text = "[DEFAULT]\ndebug = maybe\n\n[vif_pool]\nports_pool_max = lots\n\
                ports_pool_min = -3\n[kubernetes]\ncontroller_ha_elector_port = 70000\n\
                [neutron]\nendpoint_type = private\npassword = hunter2\ninsecure = sure\n\
                [neutron_defaults]\nsubnet_mapping = novalue\n";
    let errs = from_strs(&[("/etc/kuryr/kuryr.conf", text)], Role::Any, &no_env).expect_err("type errors");
    let msgs: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
    assert_eq!(
        msgs,
        vec![
            "/etc/kuryr/kuryr.conf:2: [DEFAULT] debug = \"maybe\": expected a boolean (true/false, yes/no, on/off, 1/0)",
            "/etc/kuryr/kuryr.conf:5: [vif_pool] ports_pool_max = \"lots\": expected an integer >= 0",
            "/etc/kuryr/kuryr.conf:6: [vif_pool] ports_pool_min = \"-3\": expected an integer >= 0",
            "/etc/kuryr/kuryr.conf:8: [kubernetes] controller_ha_elector_port = \"70000\": expected a port number between 0 and 65535",
            "/etc/kuryr/kuryr.conf:10: [neutron] endpoint_type = \"private\": expected one of public, admin, internal",
            "/etc/kuryr/kuryr.conf:12: [neutron] insecure = \"sure\": expected a boolean (true/false, yes/no, on/off, 1/0)",
            "/etc/kuryr/kuryr.conf:14: [neutron_defaults] subnet_mapping = \"novalue\": expected a comma-separated list of key:value pairs (item \"novalue\" is not key:value)",
        ]
    );
    assert!(!errs.to_string().contains("hunter2"));
}

#[test]
fn secrets_are_not_echoed_in_errors() {
    // A secret set next to a faulty option never shows up in the diagnostics.
    let text = "[neutron]\npassword = hunter2\ntimeout = soon\n";
    let errs = from_strs(&[("n.conf", text)], Role::Any, &no_env).expect_err("timeout");
    assert_eq!(
        errs.0[0].to_string(),
        "n.conf:3: [neutron] timeout = \"soon\": expected a number"
    );
    assert!(!errs.to_string().contains("hunter2"));
}

#[test]
fn syntax_errors_are_errors_with_lines() {
    let text = "debug = true\n[kubernetes\n[vif_pool]\nports_pool_min\n";
    let errs = from_strs(&[("s.conf", text)], Role::Any, &no_env).expect_err("syntax");
    let msgs: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
    assert_eq!(
        msgs,
        vec![
            "s.conf:1: `debug` appears before any [group] header",
            "s.conf:2: group header `[kubernetes` has no closing `]`",
            "s.conf:4: `ports_pool_min` is not `key = value`",
        ]
    );
}

#[test]
fn unknown_and_deprecated_options_are_warnings_with_lines() {
    let text = "[DEFAULT]\nlogfile = /var/log/kuryr.log\n[vif_pool]\nports_pool_minn = 3\n\
                pools_vif_drivers = nested:nested-vlan\n[frobnicator]\nx = 1\ny = 2\n\
                [binding]\ndriver = kuryr.lib.binding.drivers.vlan\n[cache]\nenabled = true\n\
                [cni_daemon]\nworker_num =\n";
    let (c, w) = from_strs(&[("w.conf", text)], Role::Any, &no_env).expect("only warnings");
    let got: Vec<String> = w.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        vec![
            "w.conf:2: [DEFAULT] logfile: deprecated name; use `log_file` instead",
            "w.conf:4: [vif_pool] ports_pool_minn: unknown option, ignored",
            "w.conf:5: [vif_pool] pools_vif_drivers: deprecated for removal upstream",
            "w.conf:6: [frobnicator]: unknown group, its options are ignored",
            "w.conf:10: [binding] driver: deprecated name; use `default_driver` instead",
            "w.conf:11: [cache]: read by an upstream library (os-vif, privsep, oslo.cache …); ignored by kuryr-rs",
            "w.conf:14: [cni_daemon] worker_num: empty value, using the default (30)",
        ]
    );
    assert_eq!(w[1].kind, WarningKind::UnknownOption);
    assert_eq!(w[1].option, "ports_pool_minn");
    assert_eq!(w[1].group, "vif_pool");
    assert_eq!(c.default.log_file.as_deref(), Some("/var/log/kuryr.log"));
    assert_eq!(c.cni_daemon.worker_num, 30);
    assert_eq!(c.vif_pool.pools_vif_drivers["nested"], "nested-vlan");

    // Options upstream moved between groups get a hint.
    let (_, w) = from_strs(
        &[(
            "m.conf",
            "[neutron_defaults]\nports_pool_max = 3\n[DEFAULT]\nnope = 1\n",
        )],
        Role::Any,
        &no_env,
    )
    .expect("ok");
    let got: Vec<String> = w.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        vec![
            "m.conf:2: [neutron_defaults] ports_pool_max: unknown option in this group, ignored \
             (it exists in [vif_pool])",
            "m.conf:4: [DEFAULT] nope: unknown option, ignored",
        ]
    );
}

#[test]
fn deprecated_names_follow_oslo_precedence() {
    // Newest file wins, whatever the name used there.
    let a = "[DEFAULT]\nlog_file = /a.log\n";
    let b = "[DEFAULT]\nlogfile = /b.log\n";
    let (c, _) = from_strs(&[("a.conf", a), ("b.conf", b)], Role::Any, &no_env).expect("ok");
    assert_eq!(c.default.log_file.as_deref(), Some("/b.log"));
    // Within one file, the current name wins.
    let ab = "[DEFAULT]\nlog_file = /a.log\nlogfile = /b.log\n";
    let (c, _) = from_strs(&[("ab.conf", ab)], Role::Any, &no_env).expect("ok");
    assert_eq!(c.default.log_file.as_deref(), Some("/a.log"));
    // `[default]` is not `[DEFAULT]`.
    let (c, w) = from_strs(&[("d.conf", "[default]\ndebug = true\n")], Role::Any, &no_env).expect("ok");
    assert!(!c.default.debug);
    assert_eq!(w[0].kind, WarningKind::UnknownGroup);
}

#[test]
fn missing_required_values_name_the_option() {
    let errs = from_strs(&[("min.conf", "[kubernetes]\n")], Role::Controller, &no_env)
        .expect_err("controller needs values");
    let msgs: Vec<String> = errs.0.iter().map(ToString::to_string).collect();
    assert_eq!(msgs.len(), 4, "{msgs:#?}");
    assert_eq!(
        msgs[0],
        "[neutron_defaults] project is required by kuryr-controller (project drivers: default, \
         annotation fallback), but no configuration file sets it (read: min.conf)"
    );
    assert!(msgs[1].starts_with("[neutron_defaults] pod_subnet is required"));
    assert!(msgs[2].starts_with("[neutron_defaults] service_subnet is required"));
    assert!(msgs[3].starts_with("[neutron_defaults] pod_security_groups is required"));

    // Set to an empty value: the error points at the line.
    let text = "[neutron_defaults]\nproject =\npod_subnet = s\nservice_subnet = s\n\
                pod_security_groups = sg\n";
    let errs = from_strs(&[("e.conf", text)], Role::Controller, &no_env).expect_err("empty");
    assert_eq!(errs.0.len(), 1);
    assert!(
        errs.0[0]
            .to_string()
            .starts_with("e.conf:2: [neutron_defaults] project is required by kuryr-controller"),
        "{}",
        errs.0[0]
    );
    assert!(errs.0[0].to_string().ends_with("but it is set to an empty value"));

    // Nested and namespace drivers need their own values; the daemon needs none of them.
    let text = "[kubernetes]\npod_vif_driver = nested-vlan\npod_subnets_driver = namespace\n";
    let errs = from_strs(&[("n.conf", text)], Role::Controller, &no_env).expect_err("nested");
    let opts: Vec<String> = errs
        .0
        .iter()
        .filter_map(|e| match e {
            ConfigError::MissingRequired { group, option, .. } => Some(format!("{group}.{option}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        opts,
        vec![
            "neutron_defaults.project",
            "namespace_subnet.pod_router",
            "namespace_subnet.pod_subnet_pool",
            "neutron_defaults.service_subnet",
            "neutron_defaults.pod_security_groups",
            "pod_vif_nested.worker_nodes_subnets",
        ]
    );
    assert!(from_strs(&[("n.conf", text)], Role::Daemon, &no_env).is_ok());
}

#[test]
fn cloud_auth_selection() {
    let (c, _) = from_strs(&[], Role::Any, &no_env).expect("ok");
    let env = |k: &str| (k == "OS_CLOUD").then(|| "devstack-admin".to_string());
    assert_eq!(
        resolve_cloud_auth(&c, &env).expect("clouds.yaml"),
        CloudAuth::CloudsYaml {
            cloud: "devstack-admin".into(),
            region_name: None
        }
    );
    let env = |k: &str| match k {
        "OS_AUTH_URL" => Some("http://ks/v3".to_string()),
        "OS_USERNAME" => Some("admin".to_string()),
        "OS_PASSWORD" => Some("pw".to_string()),
        "OS_PROJECT_NAME" => Some("admin".to_string()),
        _ => None,
    };
    match resolve_cloud_auth(&c, &env).expect("env") {
        CloudAuth::Environment(a) => {
            assert_eq!(a.auth_type, "password");
            assert_eq!(a.username.as_deref(), Some("admin"));
            assert_eq!(a.interface, "public");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        resolve_cloud_auth(&c, &no_env),
        Err(ConfigError::NoCredentials(_))
    ));

    // auth_section moves the plugin options to another group (keystoneauth behaviour).
    let text = "[neutron]\nauth_section = keystone_authtoken_kuryr\nregion_name = R2\n\
                [keystone_authtoken_kuryr]\nauth_type = v3applicationcredential\n\
                auth_url = http://ks/v3\napplication_credential_id = abc\n\
                application_credential_secret = xyz\nbogus = 1\n";
    let (c, w) = from_strs(&[("s.conf", text)], Role::Any, &no_env).expect("ok");
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].option, "bogus");
    match resolve_cloud_auth(&c, &no_env).expect("section") {
        CloudAuth::Neutron(a) => {
            assert_eq!(a.auth_type, "v3applicationcredential");
            assert_eq!(a.application_credential_id.as_deref(), Some("abc"));
            assert_eq!(a.region_name.as_deref(), Some("R2"));
        }
        other => panic!("{other:?}"),
    }

    // Keystone options without auth_type: an error, as upstream would fail to authenticate.
    let (c, _) = from_strs(&[("x.conf", "[neutron]\nusername = u\n")], Role::Any, &no_env).expect("ok");
    let e = resolve_cloud_auth(&c, &no_env).expect_err("no auth_type");
    assert!(e.to_string().contains("[neutron] auth_type is required"), "{e}");
}

#[test]
fn garbage_never_panics() {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let pieces = [
        "[",
        "]",
        "DEFAULT",
        "vif_pool",
        "neutron",
        "kubernetes",
        "=",
        ":",
        " ",
        "\t",
        "\n",
        "#",
        ";",
        "ports_pool_min",
        "auth_section",
        "true",
        "-1",
        "99999999999999999999",
        "a:b",
        ",",
        "\"",
        "'",
        "1e400",
        "é",
        "\r\n",
        "enabled_handlers",
        "timeout",
    ];
    for _ in 0..3000 {
        let mut text = String::new();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        for _ in 0..(state % 60) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(pieces[(state % pieces.len() as u64) as usize]);
        }
        for role in [Role::Any, Role::Controller] {
            if let Ok((c, _)) = from_strs(&[("g.conf", &text)], role, &no_env) {
                let _ = resolve_cloud_auth(&c, &no_env);
            }
        }
    }
}
