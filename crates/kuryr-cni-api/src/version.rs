//! CNI specification versions supported by kuryr-rs and version negotiation.

use std::fmt;

/// A CNI spec version we can speak. Older versions (0.1.0, 0.2.0, 0.3.0) are refused with
/// error code 1, as upstream kuryr never supported them either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CniVersion {
    /// 0.3.1: upstream kuryr's only version. Result `ips[]` carry `version`.
    V0_3_1,
    /// 0.4.0: adds CHECK and `prevResult` on DEL.
    V0_4_0,
    /// 1.0.0: `ips[].version` removed.
    V1_0_0,
    /// 1.1.0: adds GC, STATUS and `cniVersions` in conflists.
    V1_1_0,
}

/// Every version this plugin accepts, oldest first, as printed by the VERSION verb.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["0.3.1", "0.4.0", "1.0.0", "1.1.0"];

impl CniVersion {
    /// The newest version we speak.
    pub const LATEST: CniVersion = CniVersion::V1_1_0;

    /// Parses a supported version string; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "0.3.1" => Some(Self::V0_3_1),
            "0.4.0" => Some(Self::V0_4_0),
            "1.0.0" => Some(Self::V1_0_0),
            "1.1.0" => Some(Self::V1_1_0),
            _ => None,
        }
    }

    /// The version as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_3_1 => "0.3.1",
            Self::V0_4_0 => "0.4.0",
            Self::V1_0_0 => "1.0.0",
            Self::V1_1_0 => "1.1.0",
        }
    }

    /// Whether result `ips[]` entries carry the `version` field (removed in 1.0.0).
    pub fn ips_have_version(self) -> bool {
        self < Self::V1_0_0
    }

    /// Whether the CHECK verb exists in this version (added in 0.4.0).
    pub fn has_check(self) -> bool {
        self >= Self::V0_4_0
    }

    /// Whether GC and STATUS exist in this version (added in 1.1.0).
    pub fn has_gc_and_status(self) -> bool {
        self >= Self::V1_1_0
    }
}

impl fmt::Display for CniVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_roundtrip_and_order() {
        for s in SUPPORTED_VERSIONS {
            assert_eq!(CniVersion::parse(s).map(|v| v.as_str()), Some(s));
        }
        assert_eq!(CniVersion::parse("0.3.0"), None);
        assert_eq!(CniVersion::parse(""), None);
        assert!(CniVersion::V0_3_1.ips_have_version());
        assert!(!CniVersion::V1_0_0.ips_have_version());
        assert!(!CniVersion::V0_3_1.has_check());
        assert!(CniVersion::V1_1_0.has_gc_and_status());
        assert!(!CniVersion::V1_0_0.has_gc_and_status());
    }
}
