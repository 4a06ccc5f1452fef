//! `meta.k8s.io/v1` Table rendering for clients that ask for it (`kubectl get`).
//!
//! Column sets follow the real server:
//! - built-in printers for pods, namespaces, services, nodes, endpoints, configmaps, secrets,
//!   serviceaccounts, events, leases, endpointslices and networkpolicies (computed cells such as a
//!   pod's `READY 1/1` and `STATUS Terminating` are marked by a `json_path` starting with `@`);
//!   deployments, replicasets, daemonsets, poddisruptionbudgets and (cluster)rolebindings in
//!   `workloads` (roles use the generic pair, as their real printer does);
//! - custom resources: `Name`, then the version's `additionalPrinterColumns` (or `Age` when it
//!   declares none), with `date` cells rendered as ages;
//! - anything else: the generic `Name` + `Created At` (RFC 3339) pair.
//!
//! Ages are rendered the way kubectl renders them (`5s`, `3m2s`, `4h`, `2d`, `3y12d`).
//! Rows carry the object as `PartialObjectMetadata` (kubectl's default `includeObject=Metadata`);
//! [`to_table_with`] also supports `Object` and `None`.

mod cells;
mod columns;
mod workloads;

use cells::cell;
pub use cells::{eval_json_path, human_duration};
pub use columns::columns_for;

use serde_json::{Value, json};

/// One column of a Table.
#[derive(Debug, Clone)]
pub struct Column {
    /// Header.
    pub name: String,
    /// `string`, `integer`, `date`, ...
    pub type_: String,
    /// Where the cell comes from (simple JSONPath, e.g. `.status.phase`), or a built-in computed cell.
    pub json_path: String,
    /// Column priority (0 = always shown).
    pub priority: i32,
    /// OpenAPI format shown in the column definition (`name` for the Name column), may be empty.
    pub format: String,
    /// Column description, may be empty.
    pub description: String,
}

impl Column {
    pub(crate) fn new(name: &str, type_: &str, json_path: &str, priority: i32, description: &str) -> Self {
        Self {
            name: name.into(),
            type_: type_.into(),
            json_path: json_path.into(),
            priority,
            format: if json_path == ".metadata.name" {
                "name".into()
            } else {
                String::new()
            },
            description: description.into(),
        }
    }
}

/// What each row's `object` holds (`includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A `PartialObjectMetadata` with the object's metadata (kubectl's default).
    #[default]
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter (`None`, `Metadata`, `Object`); absent or
    /// unknown values give the default, `Metadata`.
    pub fn from_param(p: Option<&str>) -> Self {
        match p {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// True when the Accept header asks for `as=Table`.
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// Whether an `Accept` header asks for metadata only (`as=PartialObjectMetadata`, also matching
/// `as=PartialObjectMetadataList`): what metadata informers (kube-rs `Api<PartialObjectMeta<K>>`,
/// client-go's metadata client) request. A Table request wins when both are named.
pub fn wants_metadata(accept: &str) -> bool {
    accept.contains("as=PartialObjectMetadata") && !wants_table(accept)
}

/// An object reduced to its metadata, as the API server serves it for metadata-only requests.
pub fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The `object` of a row.
fn row_object(obj: &Value, include: IncludeObject) -> Option<Value> {
    match include {
        IncludeObject::None => None,
        IncludeObject::Object => Some(obj.clone()),
        IncludeObject::Metadata => Some(partial_object_metadata(obj)),
    }
}

/// Renders objects as a Table (list metadata taken from the arguments).
pub fn to_table(
    columns: &[Column],
    objects: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
    to_table_at(
        columns,
        objects,
        resource_version,
        continue_token,
        jiff::Timestamp::now(),
    )
}

/// [`to_table`] with an explicit "now" for ages.
pub fn to_table_at(
    columns: &[Column],
    objects: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now: jiff::Timestamp,
) -> Value {
    to_table_with(
        columns,
        objects,
        resource_version,
        continue_token,
        IncludeObject::Metadata,
        now,
    )
}

/// The full form: choose what each row's `object` holds.
pub fn to_table_with(
    columns: &[Column],
    objects: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
    include: IncludeObject,
    now: jiff::Timestamp,
) -> Value {
    let defs: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let cells: Vec<Value> = columns.iter().map(|c| cell(c, o, now)).collect();
            let mut row = json!({ "cells": cells });
            if let Some(obj) = row_object(o, include) {
                row["object"] = obj;
            }
            row
        })
        .collect();
    let mut meta = json!({ "resourceVersion": resource_version });
    if let Some(c) = continue_token.filter(|c| !c.is_empty()) {
        meta["continue"] = c.into();
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests;
