//! `CNI_ARGS` parsing: `K=V;K=V` pairs, with the Kubernetes keys kubelet/CRI runtimes pass.

use std::collections::BTreeMap;

/// Error parsing `CNI_ARGS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// A pair without `=`.
    #[error("CNI_ARGS pair {0:?} has no '='")]
    PairWithoutEquals(String),
    /// A pair with an empty key.
    #[error("CNI_ARGS pair {0:?} has an empty key")]
    EmptyKey(String),
}

/// Parsed `CNI_ARGS`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniArgs {
    /// Every pair, last one wins.
    pub pairs: BTreeMap<String, String>,
}

impl CniArgs {
    /// Parses `K=V;K=V`. Empty segments (`a=b;;c=d`, trailing `;`) are skipped; values may contain
    /// `=`. A segment without `=` is an error (error code 4 for the plugin).
    pub fn parse(s: &str) -> Result<Self, ArgsError> {
        let mut pairs = BTreeMap::new();
        for seg in s.split(';') {
            if seg.is_empty() {
                continue;
            }
            let (k, v) = seg
                .split_once('=')
                .ok_or_else(|| ArgsError::PairWithoutEquals(seg.to_owned()))?;
            if k.is_empty() {
                return Err(ArgsError::EmptyKey(seg.to_owned()));
            }
            pairs.insert(k.to_owned(), v.to_owned());
        }
        Ok(Self { pairs })
    }

    /// A value by key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.get(key).map(String::as_str)
    }

    /// `IgnoreUnknown` (`1`/`true`, case-insensitive).
    pub fn ignore_unknown(&self) -> bool {
        self.get("IgnoreUnknown")
            .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    }

    /// `K8S_POD_NAMESPACE`.
    pub fn pod_namespace(&self) -> Option<&str> {
        self.get("K8S_POD_NAMESPACE")
    }

    /// `K8S_POD_NAME`.
    pub fn pod_name(&self) -> Option<&str> {
        self.get("K8S_POD_NAME")
    }

    /// `K8S_POD_UID`.
    pub fn pod_uid(&self) -> Option<&str> {
        self.get("K8S_POD_UID")
    }

    /// `K8S_POD_INFRA_CONTAINER_ID`.
    pub fn infra_container_id(&self) -> Option<&str> {
        self.get("K8S_POD_INFRA_CONTAINER_ID")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubelet_args() {
        let a = CniArgs::parse(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=demo-x;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1",
        )
        .unwrap();
        assert!(a.ignore_unknown());
        assert_eq!(a.pod_namespace(), Some("default"));
        assert_eq!(a.pod_name(), Some("demo-x"));
        assert_eq!(a.pod_uid(), Some("u-1"));
        assert_eq!(a.infra_container_id(), Some("abc"));
    }

    #[test]
    fn tolerant_and_strict_parts() {
        assert_eq!(CniArgs::parse("").unwrap(), CniArgs::default());
        let a = CniArgs::parse("a=b=c;;x=;").unwrap();
        assert_eq!(a.get("a"), Some("b=c"));
        assert_eq!(a.get("x"), Some(""));
        assert!(!a.ignore_unknown());
        assert_eq!(
            CniArgs::parse("a=b;junk"),
            Err(ArgsError::PairWithoutEquals("junk".into()))
        );
        assert!(matches!(CniArgs::parse("=v"), Err(ArgsError::EmptyKey(_))));
        assert!(CniArgs::parse("IgnoreUnknown=TRUE").unwrap().ignore_unknown());
    }
}
