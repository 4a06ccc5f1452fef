//! `meta.k8s.io/v1` Table rendering for clients that ask for it (`kubectl get`).

use serde_json::Value;

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
}

/// True when the Accept header asks for `as=Table`.
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// The columns for a resource kind; `printer_columns` are a CRD version's
/// `additionalPrinterColumns` when the resource is custom.
pub fn columns_for(kind: &str, printer_columns: Option<&Value>) -> Vec<Column> {
    let _ = (kind, printer_columns);
    vec![Column {
        name: "Name".into(),
        type_: "string".into(),
        json_path: ".metadata.name".into(),
        priority: 0,
    }]
}

/// Renders objects as a Table (list metadata taken from the arguments).
pub fn to_table(
    columns: &[Column],
    objects: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
    let _ = (columns, objects, resource_version, continue_token);
    Value::Null
}
