//! What is wrong with a NetworkPolicy, named by the field's path.

/// A NetworkPolicy field the translator cannot accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct PolicyError {
    /// Where, as a JSON path from the object (`spec.ingress[0].ports[1].endPort`).
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

impl PolicyError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
