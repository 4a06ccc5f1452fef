//! A minimal `/openapi/v3`: the index and one document per group/version listing each
//! resource's operations with `x-kubernetes-group-version-kind` and the `fieldValidation`
//! parameter, so that kubectl detects server-side field validation and does not need schemas.
//! No schemas are published (`components.schemas` is empty).

use serde_json::{Map, Value, json};

use crate::{
    app::App,
    error::{ApiError, ApiResult},
    registry::ResourceInfo,
};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`.
pub fn index(app: &App) -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![(String::new(), "v1".to_string())];
    for (g, vs) in app.registry.groups() {
        for v in vs {
            gvs.push((g.clone(), v));
        }
    }
    let rv = app.store.read(|t| t.rv());
    for (g, v) in gvs {
        let p = gv_path(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={rv:016X}")}),
        );
    }
    json!({ "paths": paths })
}

fn op(r: &ResourceInfo, version: &str, action: &str, with_validation: bool) -> Value {
    let mut params =
        vec![json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}})];
    if with_validation {
        params.push(json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(
            json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
        );
    }
    json!({
        "operationId": format!("{action}{}", r.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": version, "kind": r.kind},
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
    })
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`.
pub fn group_version(app: &App, group: &str, version: &str) -> ApiResult<Value> {
    let rs = app.registry.resources_in(group, version);
    if rs.is_empty() {
        return Err(ApiError::not_found_path());
    }
    let schemas = crd_schemas(&rs, group, version);
    let prefix = format!("/{}", gv_path(group, version));
    let mut paths = Map::new();
    for r in rs {
        let base = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        paths.insert(
            base.clone(),
            json!({"get": op(&r, version, "list", false), "post": op(&r, version, "post", true),
                   "delete": op(&r, version, "deletecollection", false)}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op(&r, version, "get", false), "put": op(&r, version, "put", true),
                   "patch": op(&r, version, "patch", true), "delete": op(&r, version, "delete", false)}),
        );
        if r.status_subresource {
            paths.insert(
                format!("{base}/{{name}}/status"),
                json!({"get": op(&r, version, "get", false), "put": op(&r, version, "put", true),
                       "patch": op(&r, version, "patch", true)}),
            );
        }
    }
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

fn string_prop(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn meta_schemas() -> (Value, Value) {
    let object_meta = json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": string_prop("Name must be unique within a namespace."),
            "generateName": string_prop("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
            "namespace": string_prop("Namespace defines the space within which each name must be unique."),
            "uid": string_prop("UID is the unique in time and space value for this object."),
            "resourceVersion": string_prop("An opaque value that represents the internal version of this object."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state."},
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "CreationTimestamp is a timestamp representing the server time when this object was created."},
            "deletionTimestamp": {"type": "string", "format": "date-time", "description": "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64", "description": "Number of seconds allowed for this object to gracefully terminate before it will be removed from the system."},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": "Map of string keys and values that can be used to organize and categorize objects."},
            "annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": "Annotations is an unstructured key value map stored with a resource."},
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Must be empty before the object is deleted from the registry."},
            "ownerReferences": {"type": "array", "items": {"type": "object"}, "description": "List of objects depended by this object."},
            "managedFields": {"type": "array", "items": {"type": "object"}, "description": "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow."}
        }
    });
    let list_meta = json!({
        "type": "object",
        "description": "ListMeta describes metadata that synthetic resources must have, including lists and various status objects.",
        "properties": {
            "resourceVersion": string_prop("String that identifies the server's internal version of this object."),
            "continue": string_prop("continue may be set if the user set a limit on the number of items returned."),
            "remainingItemCount": {"type": "integer", "format": "int64", "description": "The number of subsequent items in the list which are not included in this list response."}
        }
    });
    (object_meta, list_meta)
}

/// `com.example.v1.Widget` for group `example.com`.
fn schema_name(group: &str, version: &str, kind: &str) -> String {
    let rev: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", rev.join("."))
}

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object.";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents.";

/// Schemas of the custom resources served at `group/version` (the version's
/// `openAPIV3Schema`, with the standard metadata fields), plus their List types.
fn crd_schemas(rs: &[std::sync::Arc<ResourceInfo>], group: &str, version: &str) -> Map<String, Value> {
    let mut schemas = Map::new();
    for r in rs {
        let Some(v) = r.crd_version(version) else { continue };
        let mut s = v.schema.clone().unwrap_or_else(|| json!({"type": "object"}));
        let gvk = json!([{"group": group, "kind": r.kind, "version": version}]);
        if let Some(m) = s.as_object_mut() {
            m.insert("x-kubernetes-group-version-kind".into(), gvk.clone());
            let props = m.entry("properties").or_insert_with(|| json!({}));
            if let Some(p) = props.as_object_mut() {
                p.insert("apiVersion".into(), string_prop(API_VERSION_DOC));
                p.insert("kind".into(), string_prop(KIND_DOC));
                p.insert("metadata".into(), json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "default": {}, "description": "Standard object's metadata."}));
            }
        }
        let name = schema_name(group, version, &r.kind);
        let list_gvk = json!([{"group": group, "kind": format!("{}List", r.kind), "version": version}]);
        schemas.insert(
            format!("{name}List"),
            json!({
                "type": "object",
                "description": format!("{}List is a list of {}", r.kind, r.kind),
                "required": ["items"],
                "properties": {
                    "apiVersion": string_prop(API_VERSION_DOC),
                    "kind": string_prop(KIND_DOC),
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{name}")}},
                    "metadata": {"allOf": [{"$ref": format!("#/components/schemas/{LIST_META}")}], "default": {}}
                },
                "x-kubernetes-group-version-kind": list_gvk,
            }),
        );
        schemas.insert(name, s);
    }
    if !schemas.is_empty() {
        let (om, lm) = meta_schemas();
        schemas.insert(OBJECT_META.into(), om);
        schemas.insert(LIST_META.into(), lm);
    }
    schemas
}
