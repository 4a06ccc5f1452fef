//! Cell values: kubectl-style ages, simple JSONPath evaluation, and the computed cells of the
//! built-in printers (pod READY/STATUS/RESTARTS, service ports, node roles, ...).

use serde_json::Value;

use super::Column;

/// kubectl's human-readable duration (`HumanDuration`) for a signed number of seconds.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let sec = seconds % 60;
        return if sec == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{sec}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of an RFC 3339 timestamp relative to `now`, or `<unknown>` when absent/invalid.
fn age_of(ts: Option<&Value>, now: jiff::Timestamp) -> String {
    match ts
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    {
        Some(t) => human_duration(now.as_second() - t.as_second()),
        None => "<unknown>".into(),
    }
}

/// Evaluates a simple JSONPath (`.a.b`, `.a[0].b`, `.a['x.y']`, optional `{}` braces) on `obj`.
pub fn eval_json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let p = path.trim();
    let p = p.strip_prefix('{').and_then(|x| x.strip_suffix('}')).unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut cur = obj;
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            if !key.is_empty() {
                cur = cur.get(key)?;
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            if let Some(q) = inner
                .strip_prefix('\'')
                .and_then(|x| x.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
            {
                cur = cur.get(q)?;
            } else {
                let idx: i64 = inner.parse().ok()?;
                let arr = cur.as_array()?;
                let i = if idx < 0 {
                    usize::try_from(i64::try_from(arr.len()).ok()? + idx).ok()?
                } else {
                    usize::try_from(idx).ok()?
                };
                cur = arr.get(i)?;
            }
            rest = &r[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            cur = cur.get(&rest[..end])?;
            rest = &rest[end..];
        }
    }
    Some(cur)
}

/// Go-like text of a JSON value (what kubectl's JSONPath printer shows).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

fn str_at<'a>(obj: &'a Value, path: &str) -> &'a str {
    eval_json_path(obj, path).and_then(Value::as_str).unwrap_or("")
}

fn or_none(s: String) -> Value {
    if s.is_empty() {
        Value::from("<none>")
    } else {
        Value::from(s)
    }
}

fn arr<'a>(obj: &'a Value, path: &str) -> &'a [Value] {
    eval_json_path(obj, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A pod's STATUS cell (phase, refined by container states, `Terminating` when deleting).
fn pod_status(obj: &Value) -> String {
    let mut reason = str_at(obj, ".status.phase").to_string();
    let r = str_at(obj, ".status.reason");
    if !r.is_empty() {
        reason = r.to_string();
    }
    let init_statuses = arr(obj, ".status.initContainerStatuses");
    let n_init = arr(obj, ".spec.initContainers").len();
    let mut initializing = false;
    for (i, cs) in init_statuses.iter().enumerate() {
        let term = cs.pointer("/state/terminated");
        if let Some(t) = term
            && t.get("exitCode").and_then(Value::as_i64) == Some(0)
        {
            continue;
        }
        initializing = true;
        if let Some(t) = term {
            let tr = t.get("reason").and_then(Value::as_str).unwrap_or("");
            reason = if !tr.is_empty() {
                format!("Init:{tr}")
            } else if let Some(sig) = t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
                format!("Init:Signal:{sig}")
            } else {
                format!(
                    "Init:ExitCode:{}",
                    t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                )
            };
        } else if let Some(w) = cs
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
            .filter(|w| !w.is_empty() && *w != "PodInitializing")
        {
            reason = format!("Init:{w}");
        } else {
            reason = format!("Init:{i}/{n_init}");
        }
        break;
    }
    if !initializing {
        let mut has_running = false;
        for cs in arr(obj, ".status.containerStatuses").iter().rev() {
            if let Some(w) = cs
                .pointer("/state/waiting/reason")
                .and_then(Value::as_str)
                .filter(|w| !w.is_empty())
            {
                reason = w.to_string();
            } else if let Some(t) = cs.pointer("/state/terminated") {
                let tr = t.get("reason").and_then(Value::as_str).unwrap_or("");
                reason = if !tr.is_empty() {
                    tr.to_string()
                } else if let Some(sig) = t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
                    format!("Signal:{sig}")
                } else {
                    format!(
                        "ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    )
                };
            } else if cs.get("ready").and_then(Value::as_bool) == Some(true)
                && cs.pointer("/state/running").is_some()
            {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            let ready = arr(obj, ".status.conditions").iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            });
            reason = if ready { "Running" } else { "NotReady" }.into();
        }
    }
    if obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        reason = if str_at(obj, ".status.reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}

fn pod_ready(obj: &Value) -> String {
    let total = arr(obj, ".spec.containers").len();
    let ready = arr(obj, ".status.containerStatuses")
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    format!("{ready}/{total}")
}

fn pod_restarts(obj: &Value, now: jiff::Timestamp) -> String {
    let mut restarts = 0;
    let mut last: Option<jiff::Timestamp> = None;
    for cs in arr(obj, ".status.containerStatuses") {
        restarts += cs.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        if let Some(t) = cs
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            && last.is_none_or(|l| t > l)
        {
            last = Some(t);
        }
    }
    match last {
        Some(t) if restarts > 0 => format!(
            "{restarts} ({} ago)",
            human_duration(now.as_second() - t.as_second())
        ),
        _ => restarts.to_string(),
    }
}

fn svc_external_ip(obj: &Value) -> String {
    let ext: Vec<String> = arr(obj, ".spec.externalIPs").iter().map(text_of).collect();
    match str_at(obj, ".spec.type") {
        "LoadBalancer" => {
            let mut ips: Vec<String> = arr(obj, ".status.loadBalancer.ingress")
                .iter()
                .filter_map(|i| {
                    i.get("ip")
                        .or_else(|| i.get("hostname"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect();
            ips.extend(ext);
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => str_at(obj, ".spec.externalName").to_string(),
        _ => {
            if ext.is_empty() {
                "<none>".into()
            } else {
                ext.join(",")
            }
        }
    }
}

fn svc_ports(obj: &Value) -> String {
    let ports: Vec<String> = arr(obj, ".spec.ports")
        .iter()
        .map(|p| {
            let port = p.get("port").map(text_of).unwrap_or_default();
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
            match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                Some(np) => format!("{port}:{np}/{proto}"),
                None => format!("{port}/{proto}"),
            }
        })
        .collect();
    or_none_str(ports.join(","))
}

fn or_none_str(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

fn selector_text(m: Option<&Value>) -> String {
    let mut parts: Vec<String> = m
        .and_then(Value::as_object)
        .map(|o| o.iter().map(|(k, v)| format!("{k}={}", text_of(v))).collect())
        .unwrap_or_default();
    parts.sort();
    parts.join(",")
}

fn node_status(obj: &Value) -> String {
    let mut status = "Unknown".to_string();
    for c in arr(obj, ".status.conditions") {
        if c.get("type").and_then(Value::as_str) == Some("Ready") {
            status = if c.get("status").and_then(Value::as_str) == Some("True") {
                "Ready".into()
            } else {
                "NotReady".into()
            };
        }
    }
    if eval_json_path(obj, ".spec.unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn node_roles(obj: &Value) -> String {
    let mut roles = std::collections::BTreeSet::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                if !r.is_empty() {
                    roles.insert(r.to_string());
                }
            } else if k == "kubernetes.io/role"
                && let Some(r) = v.as_str().filter(|r| !r.is_empty())
            {
                roles.insert(r.to_string());
            }
        }
    }
    or_none_str(roles.into_iter().collect::<Vec<_>>().join(","))
}

fn node_address(obj: &Value, ty: &str) -> String {
    or_none_str(
        arr(obj, ".status.addresses")
            .iter()
            .filter(|a| a.get("type").and_then(Value::as_str) == Some(ty))
            .filter_map(|a| a.get("address").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `ip:port` list, at most three then ` + N more...`.
fn format_endpoint_list(items: Vec<String>) -> String {
    if items.is_empty() {
        return "<none>".into();
    }
    let n = items.len();
    let mut out = items.into_iter().take(3).collect::<Vec<_>>().join(",");
    if n > 3 {
        out.push_str(&format!(" + {} more...", n - 3));
    }
    out
}

fn endpoints_cell(obj: &Value) -> String {
    let mut items = Vec::new();
    for subset in arr(obj, ".subsets") {
        let addrs = subset.get("addresses").and_then(Value::as_array);
        let ports = subset.get("ports").and_then(Value::as_array);
        for a in addrs.map(Vec::as_slice).unwrap_or_default() {
            let ip = a.get("ip").and_then(Value::as_str).unwrap_or("");
            match ports.filter(|p| !p.is_empty()) {
                Some(ps) => {
                    for p in ps {
                        items.push(format!("{ip}:{}", p.get("port").map(text_of).unwrap_or_default()));
                    }
                }
                None => items.push(ip.to_string()),
            }
        }
    }
    format_endpoint_list(items)
}

fn involved_object(obj: &Value) -> String {
    let kind = str_at(obj, ".involvedObject.kind").to_ascii_lowercase();
    let name = str_at(obj, ".involvedObject.name");
    format!("{kind}/{name}")
}

fn event_time(obj: &Value, field: &str, now: jiff::Timestamp) -> String {
    let v = eval_json_path(obj, field)
        .filter(|v| !v.is_null())
        .or_else(|| eval_json_path(obj, ".eventTime").filter(|v| !v.is_null()))
        .or_else(|| eval_json_path(obj, ".metadata.creationTimestamp"));
    age_of(v, now)
}

/// The cell for one column.
pub(super) fn cell(col: &Column, obj: &Value, now: jiff::Timestamp) -> Value {
    let p = col.json_path.as_str();
    match p {
        "@age" => Value::from(age_of(obj.pointer("/metadata/creationTimestamp"), now)),
        "@createdat" => obj
            .pointer("/metadata/creationTimestamp")
            .cloned()
            .unwrap_or(Value::Null),
        "@pod.ready" => pod_ready(obj).into(),
        "@pod.status" => pod_status(obj).into(),
        "@pod.restarts" => pod_restarts(obj, now).into(),
        "@pod.ip" => or_none(str_at(obj, ".status.podIP").into()),
        "@pod.node" => or_none(str_at(obj, ".spec.nodeName").into()),
        "@pod.nominated" => or_none(str_at(obj, ".status.nominatedNodeName").into()),
        "@pod.gates" => {
            let gates = arr(obj, ".spec.readinessGates");
            if gates.is_empty() {
                "<none>".into()
            } else {
                let ok = gates
                    .iter()
                    .filter(|g| {
                        let t = g.get("conditionType").and_then(Value::as_str);
                        arr(obj, ".status.conditions").iter().any(|c| {
                            c.get("type").and_then(Value::as_str) == t
                                && c.get("status").and_then(Value::as_str) == Some("True")
                        })
                    })
                    .count();
                format!("{ok}/{}", gates.len()).into()
            }
        }
        "@ns.status" => str_at(obj, ".status.phase").into(),
        "@svc.type" => str_at(obj, ".spec.type").into(),
        "@svc.clusterip" => or_none(str_at(obj, ".spec.clusterIP").into()),
        "@svc.externalip" => svc_external_ip(obj).into(),
        "@svc.ports" => svc_ports(obj).into(),
        "@svc.selector" => or_none(selector_text(obj.pointer("/spec/selector"))),
        "@node.status" => node_status(obj).into(),
        "@node.roles" => node_roles(obj).into(),
        "@node.version" => str_at(obj, ".status.nodeInfo.kubeletVersion").into(),
        "@node.internalip" => node_address(obj, "InternalIP").into(),
        "@node.externalip" => node_address(obj, "ExternalIP").into(),
        "@node.osimage" => or_none(str_at(obj, ".status.nodeInfo.osImage").into()),
        "@node.kernel" => or_none(str_at(obj, ".status.nodeInfo.kernelVersion").into()),
        "@node.runtime" => or_none(str_at(obj, ".status.nodeInfo.containerRuntimeVersion").into()),
        "@ep.endpoints" => endpoints_cell(obj).into(),
        "@eps.ports" => {
            let ports: Vec<String> = arr(obj, ".ports")
                .iter()
                .filter_map(|p| p.get("port").map(text_of))
                .collect();
            if ports.is_empty() {
                "<unset>".into()
            } else {
                ports.join(",").into()
            }
        }
        "@eps.endpoints" => {
            let addrs: Vec<String> = arr(obj, ".endpoints")
                .iter()
                .flat_map(|e| {
                    e.get("addresses")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().map(text_of).collect::<Vec<_>>())
                        .unwrap_or_default()
                })
                .collect();
            if addrs.is_empty() {
                "<unset>".into()
            } else {
                format_endpoint_list(addrs).into()
            }
        }
        "@data.count" => {
            let n = |k: &str| {
                obj.get(k)
                    .and_then(Value::as_object)
                    .map_or(0, serde_json::Map::len)
            };
            (n("data") + n("binaryData")).into()
        }
        "@sa.secrets" => arr(obj, ".secrets").len().into(),
        "@ev.lastseen" => event_time(obj, ".lastTimestamp", now).into(),
        "@ev.firstseen" => event_time(obj, ".firstTimestamp", now).into(),
        "@ev.object" => involved_object(obj).into(),
        "@ev.source" => {
            let comp = str_at(obj, ".source.component");
            let comp = if comp.is_empty() {
                str_at(obj, ".reportingComponent")
            } else {
                comp
            };
            let host = str_at(obj, ".source.host");
            if host.is_empty() {
                comp.to_string().into()
            } else {
                format!("{comp}, {host}").into()
            }
        }
        "@ev.count" => eval_json_path(obj, ".count")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .into(),
        "@lease.holder" => str_at(obj, ".spec.holderIdentity").into(),
        "@np.podselector" => {
            let sel = selector_text(obj.pointer("/spec/podSelector/matchLabels"));
            if sel.is_empty() {
                "<none>".into()
            } else {
                sel.into()
            }
        }
        path if path.starts_with("@wl.") => super::workloads::cell(path, obj),
        path => match eval_json_path(obj, path) {
            None | Some(Value::Null) => Value::Null,
            Some(v) => match col.type_.as_str() {
                "date" => Value::from(age_of(Some(v), now)),
                "integer" | "number" | "boolean" => v.clone(),
                _ => Value::from(text_of(v)),
            },
        },
    }
}
