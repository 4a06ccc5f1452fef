//! POST (create), PUT (replace, `/status`, `/finalize`) and the pods `binding` subresource, with
//! the shared commit path (metadata preservation, status-subresource rules, finalizer rules,
//! generation, no-op detection) that patches use too.

use std::sync::Arc;

use kube_sandbox_machinery::patch::{PatchType, record_update_subresource};
use serde_json::{Value, json};

use super::Req;
use crate::{
    app::App,
    crd, defaults,
    error::{ApiError, ApiResult, Cause, status_success},
    lifecycle, meta,
    registry::ResourceInfo,
    store::Inner,
};

/// Decodes a JSON (or YAML) request body into an object.
pub fn decode(r: &Req) -> ApiResult<Value> {
    let ct = r.header(http::header::CONTENT_TYPE);
    let mime = ct.split(';').next().unwrap_or("").trim();
    if mime == "application/vnd.kubernetes.protobuf" {
        return crate::protobuf::decode(&r.body).ok_or_else(|| ApiError::unsupported_body(ct));
    }
    if !matches!(mime, "" | "application/json" | "application/yaml" | "*/*") {
        return Err(ApiError::unsupported_body(ct));
    }
    let v: Value = if ct.contains("yaml") {
        serde_yaml::from_slice(&r.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(&r.body)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: expected an object",
        ));
    }
    Ok(v)
}

/// The field manager of a write: `?fieldManager=`, else the User-Agent's program name.
fn manager(r: &Req) -> String {
    if let Some(m) = r.query.get("fieldManager") {
        return m.to_string();
    }
    let ua = r.header(http::header::USER_AGENT);
    match ua.split('/').next().map(str::trim) {
        Some(p) if !p.is_empty() => p.to_string(),
        _ if r.headers.is_empty() => "kube-apiserver".to_string(),
        _ => "unknown".to_string(),
    }
}

/// True for server-side apply requests (machinery records their managedFields itself).
fn is_apply(r: &Req) -> bool {
    r.method == http::Method::PATCH
        && PatchType::from_content_type(r.header(http::header::CONTENT_TYPE)) == Some(PatchType::Apply)
}

/// Checks `apiVersion`/`kind` against the URL and sets them to the storage version.
fn check_type(info: &ResourceInfo, version: &str, obj: &mut Value) -> ApiResult<()> {
    let expected = info.api_version(version);
    if let Some(av) = obj.get("apiVersion").and_then(Value::as_str) {
        if av != expected
            && !(info.crd.is_some()
                && info.serves(av.rsplit('/').next().unwrap_or(""))
                && av.starts_with(&info.group))
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version ({expected})"
            )));
        }
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str) {
        if k != info.kind {
            return Err(ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {}): couldn't get version/kind; kind {k:?}",
                info.kind
            )));
        }
    }
    obj["apiVersion"] = json!(info.api_version(&info.storage_version));
    obj["kind"] = json!(info.kind);
    if crate::events::is_events_v1(info) {
        *obj = crate::events::to_core(obj);
    }
    Ok(())
}

fn namespace_info(app: &App) -> Arc<ResourceInfo> {
    app.registry
        .lookup("", "v1", "namespaces")
        .expect("namespaces is a built-in resource")
}

/// Fails unless namespace `ns` exists and is not terminating.
pub fn check_namespace(app: &App, tx: &Inner, info: &ResourceInfo, ns: &str, name: &str) -> ApiResult<()> {
    let nsi = namespace_info(app);
    let Some(n) = tx.get(&nsi.key(), "", ns) else {
        return Err(ApiError::not_found(&nsi, ns));
    };
    if meta::is_deleting(n) {
        let msg = format!("unable to create new content in namespace {ns} because it is being terminated");
        let mut e = ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: {msg}",
            info.qualified_resource()
        ));
        let mut d = json!({"name": name, "kind": info.plural,
            "causes": [{"reason": "NamespaceTerminating", "message": msg, "field": "metadata.namespace"}]});
        if !info.group.is_empty() {
            d["group"] = json!(info.group);
        }
        e.details = Some(d);
        return Err(e);
    }
    Ok(())
}

fn set_namespace(info: &ResourceInfo, r: &Req, obj: &mut Value) -> ApiResult<()> {
    let body_ns = meta::namespace(obj).to_string();
    let m = meta::metadata_mut(obj);
    if info.namespaced {
        if !body_ns.is_empty() && body_ns != r.ns() {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        m.insert("namespace".into(), json!(r.ns()));
    } else {
        m.remove("namespace");
    }
    Ok(())
}

/// POST on a collection.
pub fn create(app: &App, r: &Req) -> ApiResult<(u16, Value)> {
    let obj = decode(r)?;
    app.store.write(|tx| create_in_tx(app, tx, r, obj))
}

/// Creates `obj` inside a store transaction (also used by apply-creates and PUT-creates).
pub fn create_in_tx(app: &App, tx: &mut Inner, r: &Req, mut obj: Value) -> ApiResult<(u16, Value)> {
    let info = &r.info;
    check_type(info, &r.version, &mut obj)?;
    set_namespace(info, r, &mut obj)?;
    let mut name = meta::name(&obj).to_string();
    let generate = meta::meta_str(&obj, "generateName").unwrap_or("").to_string();
    if name.is_empty() {
        if generate.is_empty() {
            return Err(ApiError::invalid(
                info,
                "",
                vec![Cause::new(
                    "metadata.name",
                    "Required value: name or generateName is required",
                )],
            ));
        }
        name = meta::generate_name(&generate);
        for _ in 0..8 {
            if tx.get(&info.key(), r.ns(), &name).is_none() {
                break;
            }
            name = meta::generate_name(&generate);
        }
    }
    if let Some(msg) = defaults::validate_name(info, &name) {
        return Err(ApiError::invalid(
            info,
            &name,
            vec![Cause::new(
                "metadata.name",
                format!("Invalid value: \"{name}\": {msg}"),
            )],
        ));
    }
    if info.namespaced {
        check_namespace(app, tx, info, r.ns(), &name)?;
    }
    if tx.get(&info.key(), r.ns(), &name).is_some() {
        return Err(ApiError::already_exists(info, &name));
    }
    {
        let m = meta::metadata_mut(&mut obj);
        m.insert("name".into(), json!(name));
        m.insert("uid".into(), json!(meta::uid()));
        m.insert("creationTimestamp".into(), json!(meta::now()));
        for f in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            m.remove(f);
        }
        if info.generation || info.crd.is_some() {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
    }
    if info.status_subresource && info.plural != "nodes" {
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
    }
    if info.crd.is_some() {
        crd::strict_check(info, &r.version, &obj, r.query.get("fieldValidation"))?;
        crd::validate_custom(info, &r.version, &mut obj).map_err(|c| ApiError::invalid(info, &name, c))?;
    }
    if crd::is_crd(info) {
        crd::prepare(&mut obj).map_err(|c| ApiError::invalid(info, &name, c))?;
        let mut f = meta::finalizers(&obj);
        if !f.iter().any(|x| x == crd::CLEANUP_FINALIZER) {
            f.push(crd::CLEANUP_FINALIZER.into());
        }
        meta::set_finalizers(&mut obj, &f);
    }
    defaults::prepare_create(info, &mut obj, &mut tx.allocs)
        .map_err(|c| ApiError::invalid(info, &name, c))?;
    if info.group.is_empty() && info.plural == "pods" {
        crate::admission::service_account(tx, r.ns(), &mut obj)?;
    }
    if !is_apply(r) {
        let av = info.api_version(&r.version);
        record_update_subresource(&Value::Null, &mut obj, &manager(r), &av, None);
    }
    if r.query.dry_run() {
        defaults::on_removed(info, &obj, &mut tx.allocs);
        return Ok((201, obj));
    }
    let stored = tx.put(&info.key(), obj);
    if crd::is_crd(info) {
        crd::after_write(app, tx, &info.key(), &stored);
    }
    if info.group.is_empty() && info.plural == "namespaces" {
        // What the ServiceAccount controller does right after a namespace appears.
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": name, "uid": meta::uid(),
                         "creationTimestamp": meta::now()}});
        tx.put(&(String::new(), "serviceaccounts".into()), sa);
        let ca = crate::admission::root_ca_configmap(&name, app.ca_pem.as_deref());
        tx.put(&(String::new(), "configmaps".into()), ca);
    }
    Ok((201, (*stored).clone()))
}

/// PUT on an object (or its `status`/`finalize` subresource).
pub fn update(app: &App, r: &Req) -> ApiResult<(u16, Value)> {
    let new = decode(r)?;
    let body_name = meta::name(&new);
    if !body_name.is_empty() && body_name != r.obj_name() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            r.obj_name()
        )));
    }
    app.store.write(|tx| {
        let Some(cur) = tx.get(&r.info.key(), r.ns(), r.obj_name()).cloned() else {
            if r.info.create_on_update && r.sub.is_none() {
                let mut new = new;
                meta::metadata_mut(&mut new).insert("name".into(), json!(r.obj_name()));
                return create_in_tx(app, tx, r, new);
            }
            return Err(ApiError::not_found(&r.info, r.obj_name()));
        };
        match meta::meta_str(&new, "resourceVersion") {
            Some(rv) if Some(rv) != meta::meta_str(&cur, "resourceVersion") => {
                return Err(ApiError::conflict(&r.info, r.obj_name()));
            }
            None if !r.info.unconditional_update => {
                return Err(ApiError::invalid(
                    &r.info,
                    r.obj_name(),
                    vec![Cause::new(
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )],
                ));
            }
            _ => {}
        }
        commit_update(app, tx, r, &cur, new)
    })
}

/// Validates and stores `new` as the next state of `cur` (PUT and PATCH).
pub fn commit_update(
    app: &App,
    tx: &mut Inner,
    r: &Req,
    cur: &Arc<Value>,
    mut new: Value,
) -> ApiResult<(u16, Value)> {
    let info = &r.info;
    let name = meta::name(cur).to_string();
    check_type(info, &r.version, &mut new)?;
    {
        let cm = cur.get("metadata").cloned().unwrap_or(json!({}));
        let nm = meta::metadata_mut(&mut new);
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "name",
            "namespace",
            "generation",
        ] {
            match cm.get(f) {
                Some(v) => nm.insert(f.into(), v.clone()),
                None => nm.remove(f),
            };
        }
        if !nm.contains_key("managedFields") {
            if let Some(v) = cm.get("managedFields") {
                nm.insert("managedFields".into(), v.clone());
            }
        }
        nm.remove("resourceVersion");
        nm.remove("selfLink");
    }
    let mut base = (**cur).clone();
    if let Some(m) = base.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    match r.sub.as_deref() {
        Some("status") => {
            let status = new.get("status").cloned();
            let mut o = base.clone();
            // Server-side apply on /status records its ownership too.
            if let Some(mf) = new.get("metadata").and_then(|m| m.get("managedFields")) {
                meta::metadata_mut(&mut o).insert("managedFields".into(), mf.clone());
            }
            match status {
                Some(s) => o["status"] = s,
                None => {
                    if let Some(m) = o.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            new = o;
        }
        Some("finalize") => {
            let f = new
                .get("spec")
                .and_then(|s| s.get("finalizers"))
                .cloned()
                .unwrap_or(json!([]));
            let mut o = base.clone();
            o["spec"]["finalizers"] = f;
            new = o;
        }
        _ => {
            if info.status_subresource {
                match cur.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
        }
    }
    if meta::is_deleting(cur) {
        let old_f = meta::finalizers(cur);
        let added: Vec<String> = meta::finalizers(&new)
            .into_iter()
            .filter(|f| !old_f.contains(f))
            .map(|f| format!("\"{f}\""))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                info,
                &name,
                vec![Cause::new(
                    "metadata.finalizers",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        added.join(", ")
                    ),
                )],
            ));
        }
    }
    if info.crd.is_some() {
        crd::strict_check(info, &r.version, &new, r.query.get("fieldValidation"))?;
        crd::validate_custom(info, &r.version, &mut new).map_err(|c| ApiError::invalid(info, &name, c))?;
    }
    if r.sub.is_none() {
        if crd::is_crd(info) {
            crd::prepare(&mut new).map_err(|c| ApiError::invalid(info, &name, c))?;
        }
        defaults::prepare_update(info, cur, &mut new, &mut tx.allocs)
            .map_err(|c| ApiError::invalid(info, &name, c))?;
    }
    if info.generation || info.crd.is_some() {
        let g = cur
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let g = if meta::spec_part(cur) != meta::spec_part(&new) {
            g + 1
        } else {
            g
        };
        meta::metadata_mut(&mut new).insert("generation".into(), json!(g));
    }
    if same_ignoring_managed_times(&new, &base) {
        return Ok((200, (**cur).clone()));
    }
    if !is_apply(r) {
        let av = info.api_version(&r.version);
        record_update_subresource(cur, &mut new, &manager(r), &av, r.sub.as_deref());
    }
    if r.query.dry_run() {
        // Nothing is stored: the response carries the current resourceVersion.
        if let Some(rv) = meta::meta_str(cur, "resourceVersion") {
            let rv = rv.to_string();
            meta::metadata_mut(&mut new).insert("resourceVersion".into(), json!(rv));
        }
        return Ok((200, new));
    }
    let grace_zero = new
        .get("metadata")
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        == Some(0);
    if meta::is_deleting(&new) && meta::finalizers(&new).is_empty() && grace_zero {
        let key = info.key();
        tx.put(&key, new);
        let gone = lifecycle::remove_object(app, tx, info, r.ns(), &name);
        return Ok((200, gone.map(|g| (*g).clone()).unwrap_or(Value::Null)));
    }
    let stored = tx.put(&info.key(), new);
    if crd::is_crd(info) {
        crd::after_write(app, tx, &info.key(), &stored);
    }
    if meta::is_deleting(&stored) {
        app.kick();
    }
    Ok((200, (*stored).clone()))
}

/// True when `a` and `b` differ at most in `managedFields` timestamps (a re-apply of the same
/// manifest is a no-op on the real server: same resourceVersion, no event).
fn same_ignoring_managed_times(a: &Value, b: &Value) -> bool {
    if a == b {
        return true;
    }
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(mf) = v
            .pointer_mut("/metadata/managedFields")
            .and_then(Value::as_array_mut)
        {
            for e in mf {
                if let Some(m) = e.as_object_mut() {
                    m.remove("time");
                }
            }
        }
        v
    };
    strip(a) == strip(b)
}

/// POST `pods/{name}/binding`.
pub fn binding(app: &App, r: &Req) -> ApiResult<(u16, Value)> {
    let b = decode(r)?;
    let target = b
        .get("target")
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if target.is_empty() {
        return Err(ApiError::invalid(
            &r.info,
            r.obj_name(),
            vec![Cause::new("target.name", "Required value")],
        ));
    }
    app.store.write(|tx| {
        let key = r.info.key();
        let cur = tx
            .get(&key, r.ns(), r.obj_name())
            .cloned()
            .ok_or_else(|| ApiError::not_found(&r.info, r.obj_name()))?;
        let on_node = cur
            .get("spec")
            .and_then(|s| s.get("nodeName"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let conflict = |msg: String| {
            let mut e = ApiError::conflict_msg(&r.info, r.obj_name(), &msg);
            e.message = format!(
                "Operation cannot be fulfilled on pods/binding \"{}\": {msg}",
                r.obj_name()
            );
            e
        };
        if meta::is_deleting(&cur) {
            return Err(conflict(format!(
                "pod {} is being deleted, cannot be assigned to a host",
                r.obj_name()
            )));
        }
        if !on_node.is_empty() {
            return Err(conflict(format!(
                "pod {} is already assigned to node \"{on_node}\"",
                r.obj_name()
            )));
        }
        if r.query.dry_run() {
            return Ok((201, status_success(201, None)));
        }
        let mut p = (*cur).clone();
        p["spec"]["nodeName"] = json!(target);
        if !p.get("status").is_some_and(Value::is_object) {
            p["status"] = json!({});
        }
        let cond = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
            "lastTransitionTime": meta::now()});
        match p["status"].get_mut("conditions").and_then(Value::as_array_mut) {
            Some(cs) => {
                cs.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                cs.push(cond);
            }
            None => p["status"]["conditions"] = json!([cond]),
        }
        tx.put(&key, p);
        Ok((201, status_success(201, None)))
    })
}
