//! Schema helpers for fields whose upstream schema is a bare object: with
//! `x-kubernetes-preserve-unknown-fields` (`status.vifs`, `nsLabels`, `podSelector`) or without
//! it (KLB endpoint `topology`, which upstream declares as a plain `type: object`).

use schemars::{Schema, SchemaGenerator, json_schema};

/// `{type: object, x-kubernetes-preserve-unknown-fields: true}`.
pub fn preserve_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// `{type: object}` (upstream's KLB `topology`: no properties, nothing preserved).
pub fn plain_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object"
    })
}
