//! Label and field selectors: parsing the query-string syntax and matching objects.

use serde_json::Value;

/// A selector could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    /// Bad `labelSelector`.
    #[error("invalid label selector {selector:?}: {reason}")]
    Label {
        /// The selector text.
        selector: String,
        /// What is wrong.
        reason: String,
    },
    /// Bad `fieldSelector`.
    #[error("invalid field selector {selector:?}: {reason}")]
    Field {
        /// The selector text.
        selector: String,
        /// What is wrong.
        reason: String,
    },
}

/// A parsed `labelSelector` (`=`, `==`, `!=`, `in`, `notin`, exists, `!`).
#[derive(Debug, Clone, Default)]
pub struct LabelSelector {}

impl LabelSelector {
    /// Parses the query-string form; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        Err(SelectorError::Label {
            selector: s.into(),
            reason: "not implemented".into(),
        })
    }
    /// True when the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, _obj: &Value) -> bool {
        true
    }
    /// True when it selects everything.
    pub fn is_empty(&self) -> bool {
        true
    }
}

/// A parsed `fieldSelector` (`=`, `==`, `!=` on dotted paths such as `metadata.name`, `spec.nodeName`).
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {}

impl FieldSelector {
    /// Parses the query-string form; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        Err(SelectorError::Field {
            selector: s.into(),
            reason: "not implemented".into(),
        })
    }
    /// True when the object satisfies every requirement.
    pub fn matches(&self, _obj: &Value) -> bool {
        true
    }
    /// The field paths used, so the caller can reject ones the resource does not support.
    pub fn fields(&self) -> Vec<&str> {
        Vec::new()
    }
}
