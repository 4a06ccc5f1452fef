//! Per-kind defaulting and validation of built-in resources (pods, services, namespaces, secrets;
//! workloads in [`workloads`], RBAC objects in [`rbac`]), and the ClusterIP/NodePort allocations
//! services hold.

mod gofmt;
pub mod rbac;
pub mod workloads;

use std::collections::BTreeSet;

use kube_sandbox_machinery::clusterip::{AllocError, ClusterIpAllocator};
use serde_json::{Value, json};

use crate::{error::Cause, meta, registry::ResourceInfo};

/// Addresses and ports held by Services.
#[derive(Debug)]
pub struct Allocs {
    /// ClusterIPs from the service CIDR.
    pub ips: ClusterIpAllocator,
    /// NodePorts in use.
    pub node_ports: BTreeSet<u16>,
}

const NODE_PORT_MIN: u16 = 30000;
const NODE_PORT_MAX: u16 = 32767;

impl Allocs {
    /// Empty allocations over `cidr`.
    pub fn new(cidr: ipnet::IpNet) -> Self {
        Self {
            ips: ClusterIpAllocator::new(cidr),
            node_ports: BTreeSet::new(),
        }
    }
    fn next_node_port(&mut self) -> Option<u16> {
        let span = (NODE_PORT_MAX - NODE_PORT_MIN + 1) as usize;
        let start = fastrand::usize(..span);
        (0..span)
            .map(|i| NODE_PORT_MIN + ((start + i) % span) as u16)
            .find(|p| self.node_ports.insert(*p))
    }
}

/// Name rule per resource; `None` when valid.
pub fn validate_name(info: &ResourceInfo, name: &str) -> Option<String> {
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "namespaces") => meta::dns1123_label(name),
        ("", "services") => meta::dns1035_label(name),
        _ => meta::dns1123_subdomain(name),
    }
}

fn set_default(obj: &mut Value, field: &str, v: Value) {
    if let Some(m) = obj.as_object_mut() {
        let e = m.entry(field).or_insert(Value::Null);
        if e.is_null() {
            *e = v;
        }
    }
}

fn spec_mut(obj: &mut Value) -> &mut Value {
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    &mut obj["spec"]
}

/// Defaults and validates a new object; allocations happen here for Services.
pub fn prepare_create(info: &ResourceInfo, obj: &mut Value, allocs: &mut Allocs) -> Result<(), Vec<Cause>> {
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => pod_create(obj),
        ("", "services") => service_create(obj, allocs),
        ("", "namespaces") => {
            let name = meta::name(obj).to_string();
            namespace_labels(obj, &name);
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
            Ok(())
        }
        ("", "secrets") => {
            secret_defaults(obj);
            Ok(())
        }
        ("policy", "poddisruptionbudgets") => {
            workloads::pdb_create(obj);
            Ok(())
        }
        _ => prepare_common(info, obj, None),
    }
}

/// Defaulting and validation that creates and updates share (workloads, RBAC).
fn prepare_common(info: &ResourceInfo, obj: &mut Value, old: Option<&Value>) -> Result<(), Vec<Cause>> {
    use workloads::Kind;
    match (info.group.as_str(), info.plural.as_str()) {
        ("apps", "deployments") => workloads::prepare(Kind::Deployment, obj, old),
        ("apps", "replicasets") => workloads::prepare(Kind::ReplicaSet, obj, old),
        ("apps", "daemonsets") => workloads::prepare(Kind::DaemonSet, obj, old),
        ("rbac.authorization.k8s.io", "roles") => rbac::role(obj, true),
        ("rbac.authorization.k8s.io", "clusterroles") => rbac::role(obj, false),
        ("rbac.authorization.k8s.io", "rolebindings") => rbac::binding(obj, old, true),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => rbac::binding(obj, old, false),
        _ => Ok(()),
    }
}

/// Validates an update (`new` already carries the preserved fields of `old`).
pub fn prepare_update(
    info: &ResourceInfo,
    old: &Value,
    new: &mut Value,
    allocs: &mut Allocs,
) -> Result<(), Vec<Cause>> {
    match (info.group.as_str(), info.plural.as_str()) {
        ("", "pods") => pod_update(old, new),
        ("", "services") => service_update(old, new, allocs),
        ("", "namespaces") => {
            let name = meta::name(new).to_string();
            namespace_labels(new, &name);
            if let Some(f) = old.get("spec").and_then(|s| s.get("finalizers")) {
                spec_mut(new)["finalizers"] = f.clone();
            }
            Ok(())
        }
        ("", "secrets") => {
            secret_defaults(new);
            Ok(())
        }
        _ => prepare_common(info, new, Some(old)),
    }
}

/// Releases what a removed object held.
pub fn on_removed(info: &ResourceInfo, obj: &Value, allocs: &mut Allocs) {
    if info.group.is_empty() && info.plural == "services" {
        release_service(obj, allocs);
    }
}

fn namespace_labels(obj: &mut Value, name: &str) {
    let m = meta::metadata_mut(obj);
    let labels = m.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels["kubernetes.io/metadata.name"] = json!(name);
}

fn secret_defaults(obj: &mut Value) {
    use base64::Engine as _;
    set_default(obj, "type", json!("Opaque"));
    if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
        if !obj.get("data").is_some_and(Value::is_object) {
            obj["data"] = json!({});
        }
        for (k, v) in sd {
            let s = v.as_str().unwrap_or_default();
            obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
    }
}

fn container_defaults(c: &mut Value, path: &str, errs: &mut Vec<Cause>) {
    match c.get("name").and_then(Value::as_str) {
        None | Some("") => errs.push(Cause::new(format!("{path}.name"), "Required value")),
        Some(n) => {
            if let Some(m) = meta::dns1123_label(n) {
                errs.push(Cause::new(
                    format!("{path}.name"),
                    format!("Invalid value: \"{n}\": {m}"),
                ));
            }
        }
    }
    let image = c.get("image").and_then(Value::as_str).unwrap_or("").to_string();
    if image.is_empty() {
        errs.push(Cause::new(format!("{path}.image"), "Required value"));
    }
    let last = image.rsplit('/').next().unwrap_or("");
    let policy = if !last.contains(':') || last.ends_with(":latest") {
        "Always"
    } else {
        "IfNotPresent"
    };
    set_default(c, "imagePullPolicy", json!(policy));
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
        }
    }
}

/// Defaults and validates a PodSpec the way pods and pod templates share (`SetDefaults_PodSpec`
/// and the container defaults of the real server; the pod-only defaults — service links, service
/// account, priority — are in [`pod_create`]). `path` locates the spec in error fields
/// (`spec`, `spec.template.spec`).
pub(crate) fn pod_spec_defaults(spec: &mut Value, path: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    match spec.get_mut("containers").and_then(Value::as_array_mut) {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter_mut().enumerate() {
                container_defaults(c, &format!("{path}.containers[{i}]"), &mut errs);
            }
        }
        _ => errs.push(Cause::new(format!("{path}.containers"), "Required value")),
    }
    if let Some(cs) = spec.get_mut("initContainers").and_then(Value::as_array_mut) {
        for (i, c) in cs.iter_mut().enumerate() {
            container_defaults(c, &format!("{path}.initContainers[{i}]"), &mut errs);
        }
    }
    if !errs.is_empty() {
        return errs;
    }
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    errs
}

fn pod_create(obj: &mut Value) -> Result<(), Vec<Cause>> {
    let spec = spec_mut(obj);
    let errs = pod_spec_defaults(spec, "spec");
    if !errs.is_empty() {
        return Err(errs);
    }
    // What only pods get: SetDefaults_Pod (service links) and the admission plugins
    // (ServiceAccount, Priority); pod templates keep these unset, as on the real server.
    set_default(spec, "enableServiceLinks", json!(true));
    set_default(spec, "serviceAccountName", json!("default"));
    let sa = spec["serviceAccountName"].clone();
    set_default(spec, "serviceAccount", sa);
    set_default(spec, "priority", json!(0));
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    let has_resources = spec["containers"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| {
            c.get("resources")
                .and_then(Value::as_object)
                .is_some_and(|r| !r.is_empty())
        })
    });
    let qos = if has_resources { "Burstable" } else { "BestEffort" };
    obj["status"] = json!({"phase": "Pending", "qosClass": qos});
    Ok(())
}

fn blank_mutable_pod_spec(spec: &Value) -> Value {
    let mut s = spec.clone();
    for field in ["containers", "initContainers"] {
        if let Some(cs) = s.get_mut(field).and_then(Value::as_array_mut) {
            for c in cs {
                if let Some(m) = c.as_object_mut() {
                    m.remove("image");
                }
            }
        }
    }
    if let Some(m) = s.as_object_mut() {
        m.remove("activeDeadlineSeconds");
        m.remove("tolerations");
        m.remove("terminationGracePeriodSeconds");
        m.remove("schedulingGates");
    }
    s
}

fn pod_update(old: &Value, new: &mut Value) -> Result<(), Vec<Cause>> {
    let os = old.get("spec").cloned().unwrap_or(json!({}));
    let ns = new.get("spec").cloned().unwrap_or(json!({}));
    if blank_mutable_pod_spec(&os) != blank_mutable_pod_spec(&ns) {
        return Err(vec![Cause::new(
            "spec",
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        )]);
    }
    Ok(())
}

fn needs_node_ports(spec: &Value) -> bool {
    matches!(
        spec.get("type").and_then(Value::as_str),
        Some("NodePort" | "LoadBalancer")
    )
}

fn validate_service_ports(spec: &mut Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return errs;
    };
    let many = ports.len() > 1;
    for (i, p) in ports.iter_mut().enumerate() {
        set_default(p, "protocol", json!("TCP"));
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&port) {
            errs.push(Cause::new(
                format!("spec.ports[{i}].port"),
                format!("Invalid value: {port}: must be between 1 and 65535, inclusive"),
            ));
        }
        if many && p.get("name").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(Cause::new(format!("spec.ports[{i}].name"), "Required value"));
        }
        set_default(p, "targetPort", json!(port));
    }
    errs
}

fn service_defaults(spec: &mut Value) {
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if needs_node_ports(spec) {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
}

fn alloc_error(ip: &str, e: AllocError) -> Cause {
    let msg = match e {
        AllocError::OutOfRange { cidr, .. } => format!(
            "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {cidr}"
        ),
        AllocError::Taken(_) => format!(
            "Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated"
        ),
        AllocError::Exhausted(_) => {
            format!("Invalid value: []string{{\"{ip}\"}}: failed to allocate IP: range is full")
        }
    };
    Cause::new("spec.clusterIPs", msg)
}

fn allocate_node_ports(spec: &mut Value, allocs: &mut Allocs) -> Vec<Cause> {
    let mut errs = Vec::new();
    if !needs_node_ports(spec) {
        return errs;
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for (i, p) in ports.iter_mut().enumerate() {
            match p.get("nodePort").and_then(Value::as_u64) {
                Some(np) => {
                    let np = np as u16;
                    if !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&np) {
                        errs.push(Cause::new(format!("spec.ports[{i}].nodePort"), format!("Invalid value: {np}: provided port is not in the valid range. The range of valid ports is 30000-32767")));
                    } else if !allocs.node_ports.insert(np) {
                        errs.push(Cause::new(
                            format!("spec.ports[{i}].nodePort"),
                            format!("Invalid value: {np}: provided port is already allocated"),
                        ));
                    }
                }
                None => match allocs.next_node_port() {
                    Some(np) => p["nodePort"] = json!(np),
                    None => errs.push(Cause::new(
                        format!("spec.ports[{i}].nodePort"),
                        "Internal error: range is full",
                    )),
                },
            }
        }
    }
    errs
}

fn service_create(obj: &mut Value, allocs: &mut Allocs) -> Result<(), Vec<Cause>> {
    let spec = spec_mut(obj);
    service_defaults(spec);
    let errs = validate_service_ports(spec);
    if !errs.is_empty() {
        return Err(errs);
    }
    if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
        let requested = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .or_else(|| {
                spec.get("clusterIPs")
                    .and_then(|a| a.get(0))
                    .and_then(Value::as_str)
            })
            .unwrap_or("")
            .to_string();
        let ip = match requested.as_str() {
            "" => allocs
                .ips
                .allocate()
                .map_err(|e| vec![alloc_error("", e)])?
                .to_string(),
            "None" => "None".to_string(),
            s => {
                let ip: std::net::IpAddr = s.parse().map_err(|_| {
                    vec![Cause::new(
                        "spec.clusterIPs[0]",
                        format!("Invalid value: \"{s}\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
                    )]
                })?;
                allocs.ips.reserve(ip).map_err(|e| vec![alloc_error(s, e)])?;
                s.to_string()
            }
        };
        spec["clusterIP"] = json!(ip);
        spec["clusterIPs"] = json!([ip]);
    }
    let errs = allocate_node_ports(spec, allocs);
    if !errs.is_empty() {
        release_service(obj, allocs);
        return Err(errs);
    }
    obj["status"] = json!({"loadBalancer": {}});
    Ok(())
}

fn service_update(old: &Value, new: &mut Value, allocs: &mut Allocs) -> Result<(), Vec<Cause>> {
    let ospec = old.get("spec").cloned().unwrap_or(json!({}));
    let spec = spec_mut(new);
    service_defaults(spec);
    let errs = validate_service_ports(spec);
    if !errs.is_empty() {
        return Err(errs);
    }
    let old_ip = ospec.get("clusterIP").cloned().unwrap_or(Value::Null);
    let new_ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
    if new_ip.is_null() || new_ip == json!("") {
        spec["clusterIP"] = old_ip.clone();
        spec["clusterIPs"] = ospec.get("clusterIPs").cloned().unwrap_or(Value::Null);
    } else if new_ip != old_ip {
        return Err(vec![Cause::new(
            "spec.clusterIPs[0]",
            format!("Invalid value: {new_ip}: may not change once set"),
        )]);
    } else if spec.get("clusterIPs").is_none_or(Value::is_null) {
        spec["clusterIPs"] = ospec.get("clusterIPs").cloned().unwrap_or(Value::Null);
    }
    // Keep allocated node ports for ports that stay.
    let old_nps: Vec<(i64, String, u64)> = ospec
        .get("ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .filter_map(|p| {
                    Some((
                        p.get("port")?.as_i64()?,
                        p.get("protocol")
                            .and_then(Value::as_str)
                            .unwrap_or("TCP")
                            .to_string(),
                        p.get("nodePort")?.as_u64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let keep = needs_node_ports(spec);
    let mut kept = BTreeSet::new();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            if !keep {
                if let Some(m) = p.as_object_mut() {
                    m.remove("nodePort");
                }
                continue;
            }
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = p
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP")
                .to_string();
            match p.get("nodePort").and_then(Value::as_u64) {
                Some(np) if old_nps.iter().any(|o| o.2 == np) => {
                    kept.insert(np as u16);
                }
                Some(_) => {}
                None => {
                    if let Some(o) = old_nps.iter().find(|o| o.0 == port && o.1 == proto) {
                        p["nodePort"] = json!(o.2);
                        kept.insert(o.2 as u16);
                    }
                }
            }
        }
    }
    for (_, _, np) in &old_nps {
        let np = *np as u16;
        if !kept.contains(&np) {
            allocs.node_ports.remove(&np);
        }
    }
    // Ports kept are already held; allocate only new ones.
    for np in &kept {
        allocs.node_ports.remove(np);
    }
    let errs = allocate_node_ports(spec, allocs);
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(())
}

/// Holds again what a stored Service holds (its ClusterIP, its NodePorts): after a restart from
/// a data dir, before any write.
pub fn hold_service(obj: &Value, allocs: &mut Allocs) {
    let Some(spec) = obj.get("spec") else { return };
    if let Some(ip) = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
    {
        let _ = allocs.ips.reserve(ip);
    }
    for p in spec.get("ports").and_then(Value::as_array).into_iter().flatten() {
        if let Some(np) = p.get("nodePort").and_then(Value::as_u64) {
            allocs.node_ports.insert(np as u16);
        }
    }
}

fn release_service(obj: &Value, allocs: &mut Allocs) {
    let Some(spec) = obj.get("spec") else { return };
    if let Some(ip) = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
    {
        allocs.ips.release(ip);
    }
    if let Some(ports) = spec.get("ports").and_then(Value::as_array) {
        for p in ports {
            if let Some(np) = p.get("nodePort").and_then(Value::as_u64) {
                allocs.node_ports.remove(&(np as u16));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_defaults_and_required_fields() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}});
        pod_create(&mut p).expect("valid");
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(p["status"]["phase"], "Pending");
        let mut bad = json!({"spec": {"containers": [{"name": "c"}]}});
        let e = pod_create(&mut bad).expect_err("no image");
        assert_eq!(e[0].field, "spec.containers[0].image");
        let mut new = p.clone();
        new["spec"]["containers"][0]["image"] = json!("busybox:2");
        assert!(pod_update(&p, &mut new).is_ok());
        new["spec"]["nodeName"] = json!("n1");
        assert!(pod_update(&p, &mut new).is_err());
    }

    #[test]
    fn service_ports_defaults() {
        let mut spec = json!({"ports": [{"port": 80}, {"port": 0, "name": "b"}]});
        let errs = validate_service_ports(&mut spec);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(spec["ports"][0]["targetPort"], 80);
        assert_eq!(spec["ports"][0]["protocol"], "TCP");
    }
}
