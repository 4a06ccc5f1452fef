//! The one ownership rule every destructive or reusing path applies before it deletes, pools
//! or adopts a Neutron resource: what a resource's tags, project and device owner prove.
//!
//! A resource is **ours** when it carries every tag of this cluster's identity
//! ([`TagPolicy`], never empty in a running controller: `cluster_tag`, `resource_tags`, or
//! the identity derived from the cluster when neither is configured), lies in our project
//! (when the project driver gives one project) and, for ports, has one of our device owners.
//! A resource with no tag at all is **untagged**: made by upstream Kuryr (or an older
//! kuryr-rs) without tags; it is used only when one of our CRs names it by ID (the switch-over),
//! never pooled or deleted on the strength of its device owner alone. Anything else carries
//! somebody else's tags and is **foreign**: never touched.
//!
//! Upstream Kuryr had no such rule: with no tags configured its recovery and cleanup took every
//! `compute:kuryr` port of the network as its own (two clusters in one project deleted or
//! shared each other's ports).

use crate::{
    config::TagPolicy,
    neutron::{DEVICE_OWNER, DEVICE_OWNER_SUBPORT, Port},
};

/// What a resource's tags say about whose it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// It carries every tag of our identity.
    Ours,
    /// It carries no tag at all (upstream's resources, or ours from before tags).
    Untagged,
    /// It carries tags, not all of ours: another cluster's, or a user's.
    Foreign,
}

/// This cluster's identity and project scope, borrowed for one decision.
#[derive(Debug, Clone, Copy)]
pub struct Ownership<'a> {
    /// The identity tags (an empty policy proves nothing: every claim is then `Untagged` or
    /// `Foreign`).
    pub tags: &'a TagPolicy,
    /// The one project our resources are made in, when the project driver has one (`default`);
    /// `None` when pods' projects vary (`annotation`): tags alone then prove ownership.
    pub project: Option<&'a str>,
}

impl<'a> Ownership<'a> {
    /// An ownership test of `tags` in `project`.
    pub fn new(tags: &'a TagPolicy, project: Option<&'a str>) -> Self {
        Ownership { tags, project }
    }

    /// What `tags` say.
    pub fn claim(&self, tags: &[String]) -> Claim {
        if !self.tags.is_empty() && self.tags.matches(tags) {
            Claim::Ours
        } else if tags.is_empty() {
            Claim::Untagged
        } else {
            Claim::Foreign
        }
    }

    /// `project` is ours (always, without a project scope; an empty project is never ours
    /// when a scope is set).
    pub fn in_project(&self, project: &str) -> bool {
        self.project.is_none_or(|p| p == project)
    }

    /// A resource with `tags` in `project` is ours.
    pub fn owns(&self, tags: &[String], project: &str) -> bool {
        self.claim(tags) == Claim::Ours && self.in_project(project)
    }

    /// A port no KuryrPort references that recovery, the janitor or the settle may pool or
    /// delete: ours by tags and project, with our device owner.
    pub fn owns_pool_port(&self, p: &Port) -> bool {
        p.device_owner == DEVICE_OWNER && self.owns(&p.tags, p.project())
    }

    /// Whether a port one of our KuryrPorts references may be used for its pod and released
    /// (pooled or deleted) after it: ours; or untagged with a device owner of ours (a port of
    /// upstream Kuryr's, taken over by the switch). A foreign port, or an untagged one a user
    /// made (any other device owner), is refused whatever the CR says.
    pub fn accepts_referenced(&self, p: &Port) -> Verdict {
        if !self.in_project(p.project()) {
            return Verdict::Refused(Refusal::OtherProject);
        }
        match self.claim(&p.tags) {
            Claim::Ours => Verdict::Ours,
            Claim::Untagged if is_kuryr_owner(&p.device_owner) => Verdict::Adopted,
            Claim::Untagged => Verdict::Refused(Refusal::NotKuryrOwner),
            Claim::Foreign => Verdict::Refused(Refusal::Foreign),
        }
    }
}

/// Whose a resource carrying `resource_tags` is, for a cluster whose identity is the tag list
/// `identity` (what Octavia and network settings hold): [`Ownership::claim`] without a policy.
pub fn claim_of(identity: &[String], resource_tags: &[String]) -> Claim {
    let policy = TagPolicy::new(identity.to_vec(), None).unwrap_or_default();
    Ownership::new(&policy, None).claim(resource_tags)
}

/// Whether `owner` is a device owner kuryr sets (`compute:kuryr`; `trunk:subport` for
/// nested-vlan ports on a trunk).
pub fn is_kuryr_owner(owner: &str) -> bool {
    owner == DEVICE_OWNER || owner == DEVICE_OWNER_SUBPORT
}

/// [`Ownership::accepts_referenced`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Ours by tags.
    Ours,
    /// Untagged with our device owner, named by our CR: taken over (upstream's switch-over).
    Adopted,
    /// Not ours: neither used nor released.
    Refused(Refusal),
}

impl Verdict {
    /// Ours or adopted.
    pub fn accepted(self) -> bool {
        !matches!(self, Verdict::Refused(_))
    }
}

/// Why a referenced port is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It carries another identity's tags.
    Foreign,
    /// Untagged, with a device owner kuryr never sets (a user's port).
    NotKuryrOwner,
    /// In a project that is not ours.
    OtherProject,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Foreign => "it carries another cluster's tags, not this cluster's",
            Refusal::NotKuryrOwner => "it is untagged and its device owner is not kuryr's",
            Refusal::OtherProject => "it is in another project than [neutron_defaults] project",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(owner: &str, tags: &[&str], project: &str) -> Port {
        Port {
            id: "p".into(),
            device_owner: owner.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            project_id: project.into(),
            ..Port::default()
        }
    }

    fn ours() -> TagPolicy {
        TagPolicy::new(vec![], Some("kuryr-cluster=a".into())).expect("tags")
    }

    #[test]
    fn claims() {
        let t = ours();
        let o = Ownership::new(&t, None);
        assert_eq!(o.claim(&["kuryr-cluster=a".into(), "x".into()]), Claim::Ours);
        assert_eq!(o.claim(&[]), Claim::Untagged);
        assert_eq!(o.claim(&["kuryr-cluster=b".into()]), Claim::Foreign);
        // No identity proves nothing: never "ours", even for untagged resources.
        let none = TagPolicy::default();
        let o = Ownership::new(&none, None);
        assert_eq!(o.claim(&[]), Claim::Untagged);
        assert_eq!(o.claim(&["kuryr-cluster=b".into()]), Claim::Foreign);
        assert_eq!(claim_of(&["a".into()], &["a".into()]), Claim::Ours);
        assert_eq!(claim_of(&[], &["a".into()]), Claim::Foreign);
    }

    #[test]
    fn pool_ports_need_tags_project_and_owner() {
        let t = ours();
        let o = Ownership::new(&t, Some("proj"));
        assert!(o.owns_pool_port(&port(DEVICE_OWNER, &["kuryr-cluster=a"], "proj")));
        assert!(!o.owns_pool_port(&port(DEVICE_OWNER, &["kuryr-cluster=a"], "other")));
        assert!(!o.owns_pool_port(&port(DEVICE_OWNER, &[], "proj")));
        assert!(!o.owns_pool_port(&port(DEVICE_OWNER, &["kuryr-cluster=b"], "proj")));
        assert!(!o.owns_pool_port(&port("", &["kuryr-cluster=a"], "proj")));
        let o = Ownership::new(&t, None);
        assert!(o.owns_pool_port(&port(DEVICE_OWNER, &["kuryr-cluster=a"], "any")));
    }

    #[test]
    fn referenced_ports() {
        let t = ours();
        let o = Ownership::new(&t, Some("proj"));
        assert_eq!(
            o.accepts_referenced(&port(DEVICE_OWNER, &["kuryr-cluster=a"], "proj")),
            Verdict::Ours
        );
        assert_eq!(
            o.accepts_referenced(&port(DEVICE_OWNER, &[], "proj")),
            Verdict::Adopted
        );
        assert_eq!(
            o.accepts_referenced(&port(DEVICE_OWNER_SUBPORT, &[], "proj")),
            Verdict::Adopted
        );
        assert_eq!(
            o.accepts_referenced(&port("", &[], "proj")),
            Verdict::Refused(Refusal::NotKuryrOwner)
        );
        assert_eq!(
            o.accepts_referenced(&port("compute:nova", &[], "proj")),
            Verdict::Refused(Refusal::NotKuryrOwner)
        );
        assert_eq!(
            o.accepts_referenced(&port(DEVICE_OWNER, &["kuryr-cluster=b"], "proj")),
            Verdict::Refused(Refusal::Foreign)
        );
        assert_eq!(
            o.accepts_referenced(&port(DEVICE_OWNER, &["kuryr-cluster=a"], "other")),
            Verdict::Refused(Refusal::OtherProject)
        );
    }
}
