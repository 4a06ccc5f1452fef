//! GET of one object and of collections: selectors, `limit`/`continue` pagination, Table output
//! for clients that ask for it, and version rewriting of custom objects.

use std::{borrow::Cow, sync::Arc};

use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use kube_sandbox_machinery::{
    selectors::{FieldSelector, LabelSelector},
    table,
};
use serde_json::{Value, json};

use super::{Query, Req, json_response};
use crate::{
    app::App,
    error::{ApiError, ApiResult},
    meta,
    registry::ResourceInfo,
};

/// Label and field selectors of a list or watch.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    label: Option<LabelSelector>,
    field: Option<FieldSelector>,
    field_view: bool,
    events_v1: bool,
}

impl Filter {
    /// Parses `labelSelector` and `fieldSelector`; unsupported field labels are a 400.
    pub fn from_query(info: &ResourceInfo, q: &Query) -> ApiResult<Self> {
        let label = match q.get("labelSelector") {
            Some(s) => Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
            None => None,
        };
        let mut field_view = false;
        let field = match q.get("fieldSelector") {
            Some(s) => {
                let fs = FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?;
                for f in fs.fields() {
                    if !info.supports_field(f) {
                        return Err(ApiError::bad_request(format!("field label not supported: {f}")));
                    }
                    if f == "spec.unschedulable" || f == "source" {
                        field_view = true;
                    }
                }
                Some(fs)
            }
            None => None,
        };
        Ok(Self {
            label,
            field,
            field_view,
            events_v1: crate::events::is_events_v1(info),
        })
    }

    /// True when nothing is filtered.
    pub fn is_empty(&self) -> bool {
        self.label.is_none() && self.field.is_none()
    }

    /// True when `obj` passes both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        if self.events_v1 && !self.is_empty() {
            return self.matches_view(&crate::events::to_events_v1(obj));
        }
        self.matches_view(obj)
    }

    /// One value of one attribute the selector requires (its first field equality, else its
    /// first single-valued label requirement): the watch topic that carries every event it can
    /// match ([`crate::topics`]). None for selectors read through a view of the object.
    pub fn shard(&self) -> Option<(crate::topics::Attr, String)> {
        use crate::topics::Attr;
        if self.field_view || self.events_v1 {
            return None;
        }
        if let Some(f) = &self.field {
            for path in f.fields() {
                if let Some(v) = f.equals_value(path) {
                    return Some((Attr::Field(path.to_string()), v.to_string()));
                }
            }
        }
        let l = self.label.as_ref()?;
        l.requirements().iter().find_map(|r| match &r.op {
            kube_sandbox_machinery::selectors::LabelOp::In(set) if set.len() == 1 => {
                set.iter().next().map(|v| (Attr::Label(r.key.clone()), v.clone()))
            }
            _ => None,
        })
    }

    fn matches_view(&self, obj: &Value) -> bool {
        if let Some(l) = &self.label {
            if !l.matches(obj) {
                return false;
            }
        }
        if let Some(f) = &self.field {
            let view = if self.field_view {
                Cow::Owned(field_view(obj))
            } else {
                Cow::Borrowed(obj)
            };
            if !f.matches(&view) {
                return false;
            }
        }
        true
    }
}

/// The object as field selectors see it (defaults the real server's field functions apply).
fn field_view(obj: &Value) -> Value {
    let mut v = obj.clone();
    if v.get("kind").and_then(Value::as_str) == Some("Node")
        && v.get("spec").and_then(|s| s.get("unschedulable")).is_none()
    {
        if !v.get("spec").is_some_and(Value::is_object) {
            v["spec"] = json!({});
        }
        v["spec"]["unschedulable"] = json!(false);
    }
    if v.get("kind").and_then(Value::as_str) == Some("Event") {
        let c = v
            .get("source")
            .and_then(|s| s.get("component"))
            .cloned()
            .unwrap_or(json!(""));
        v["source"] = c;
    }
    v
}

/// The object as seen through `version` (custom resources keep storage-version content and
/// only change `apiVersion`, like the `None` conversion strategy).
pub fn versioned<'a>(info: &ResourceInfo, version: &str, obj: &'a Value) -> Cow<'a, Value> {
    if crate::events::is_events_v1(info) {
        if obj.get("apiVersion").and_then(Value::as_str) == Some("v1") {
            return Cow::Owned(crate::events::to_events_v1(obj));
        }
        return Cow::Borrowed(obj);
    }
    if info.crd.is_none() {
        return Cow::Borrowed(obj);
    }
    let want = info.api_version(version);
    if obj.get("apiVersion").and_then(Value::as_str) == Some(want.as_str()) {
        Cow::Borrowed(obj)
    } else {
        let mut o = obj.clone();
        o["apiVersion"] = json!(want);
        Cow::Owned(o)
    }
}

fn wants_table(r: &Req) -> bool {
    table::wants_table(r.header(http::header::ACCEPT))
}

fn wants_metadata(r: &Req) -> bool {
    table::wants_metadata(r.header(http::header::ACCEPT))
}

fn render_table(r: &Req, objs: &[Value], rv: &str, cont: Option<&str>) -> Option<Response> {
    let printer = r
        .info
        .crd_version(&r.version)
        .and_then(|v| v.printer_columns.as_ref());
    let cols = table::columns_for(&r.info.kind, printer);
    let t = table::to_table(&cols, objs, rv, cont);
    t.is_object().then(|| json_response(200, &t))
}

/// GET of one object.
pub fn get(app: &App, r: &Req) -> ApiResult<Response> {
    let obj = app
        .store
        .read(|t| t.get(&r.info.key(), r.ns(), r.obj_name()).cloned())
        .ok_or_else(|| ApiError::not_found(&r.info, r.obj_name()))?;
    let obj = versioned(&r.info, &r.version, &obj);
    if wants_table(r) {
        let rv = meta::meta_str(&obj, "resourceVersion").unwrap_or("").to_string();
        if let Some(resp) = render_table(r, std::slice::from_ref(&obj), &rv, None) {
            return Ok(resp);
        }
    }
    if wants_metadata(r) {
        return Ok(json_response(200, &table::partial_object_metadata(&obj)));
    }
    Ok(json_response(200, &obj))
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    let raw = json!({"rv": rv, "ns": ns, "name": name}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(tok: &str) -> ApiResult<(u64, String, String)> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let parts = || -> Option<(u64, String, String)> {
        Some((
            v.get("rv")?.as_u64()?,
            v.get("ns")?.as_str()?.to_string(),
            v.get("name")?.as_str()?.to_string(),
        ))
    };
    parts().ok_or_else(bad)
}

/// One page of a list.
pub struct Page {
    /// Items.
    pub items: Vec<Arc<Value>>,
    /// List resourceVersion.
    pub rv: u64,
    /// Continue token.
    pub cont: Option<String>,
    /// Remaining items (unfiltered lists only).
    pub remaining: Option<usize>,
}

/// Lists objects per the request's selectors and pagination.
pub fn list_page(app: &App, r: &Req) -> ApiResult<Page> {
    let filter = Filter::from_query(&r.info, &r.query)?;
    let limit = match r.query.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        None => 0,
    };
    let cont = r.query.get("continue").map(decode_continue).transpose()?;
    let key = r.info.key();
    Ok(app.store.read(|t| {
        let ns = r.namespace.as_deref();
        let (rv, mut it) = match &cont {
            Some((rv, cns, cname)) => (*rv, t.list_after(&key, ns, (cns.clone(), cname.clone()))),
            None => (t.rv(), t.list(&key, ns)),
        };
        let mut items = Vec::new();
        let mut more = false;
        for o in it.by_ref() {
            if !filter.matches(o) {
                continue;
            }
            if limit > 0 && items.len() == limit {
                more = true;
                break;
            }
            items.push(o.clone());
        }
        let (cont, remaining) = if more {
            let last = items.last().map(|o| (meta::namespace(o), meta::name(o)));
            let (lns, lname) = last.unwrap_or(("", ""));
            let remaining = filter.is_empty().then(|| 1 + it.count());
            (Some(encode_continue(rv, lns, lname)), remaining)
        } else {
            (None, None)
        };
        Page {
            items,
            rv,
            cont,
            remaining,
        }
    }))
}

/// GET of a collection.
pub fn list(app: &App, r: &Req) -> ApiResult<Response> {
    let page = list_page(app, r)?;
    let rv = page.rv.to_string();
    if wants_table(r) {
        let objs: Vec<Value> = page
            .items
            .iter()
            .map(|o| versioned(&r.info, &r.version, o).into_owned())
            .collect();
        if let Some(resp) = render_table(r, &objs, &rv, page.cont.as_deref()) {
            return Ok(resp);
        }
    }
    let mut md = json!({"resourceVersion": rv});
    if let Some(c) = &page.cont {
        md["continue"] = json!(c);
    }
    if let Some(n) = page.remaining {
        md["remainingItemCount"] = json!(n);
    }
    let metadata_only = wants_metadata(r);
    let head = if metadata_only {
        json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": md,
        })
    } else {
        json!({
            "kind": format!("{}List", r.info.kind),
            "apiVersion": r.info.api_version(&r.version),
            "metadata": md,
        })
    };
    let mut out = serde_json::to_vec(&head).unwrap_or_default();
    out.pop(); // the closing brace
    out.extend_from_slice(b",\"items\":[");
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if metadata_only {
            let _ = serde_json::to_writer(&mut out, &table::partial_object_metadata(o));
        } else {
            let _ = serde_json::to_writer(&mut out, &versioned(&r.info, &r.version, o));
        }
    }
    out.extend_from_slice(b"]}");
    Ok((
        http::StatusCode::OK,
        [(http::header::CONTENT_TYPE, "application/json")],
        out,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trip() {
        let t = encode_continue(42, "ns", "a");
        assert_eq!(decode_continue(&t).expect("valid"), (42, "ns".into(), "a".into()));
        assert!(decode_continue("!!").is_err());
    }

    #[test]
    fn field_view_defaults() {
        let n = field_view(&json!({"kind": "Node", "metadata": {"name": "n"}}));
        assert_eq!(n["spec"]["unschedulable"], false);
        let e = field_view(&json!({"kind": "Event", "source": {"component": "kubelet"}}));
        assert_eq!(e["source"], "kubelet");
    }
}
