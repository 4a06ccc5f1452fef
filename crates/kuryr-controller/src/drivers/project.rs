//! Project drivers (`[kubernetes] pod_project_driver`, `namespace_project_driver`): `default` —
//! `[neutron_defaults] project` for everything; `annotation` — the namespace's
//! `openstack.org/kuryr-project` annotation, else `[neutron_defaults] project`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::ResourceExt;
use kuryr_types::constants::ANNOTATION_PROJECT;

use super::{DriverError, cache::Reflected};

/// The selected project driver.
pub enum ProjectDriver {
    /// Every pod in `[neutron_defaults] project`.
    Default {
        /// The project ID.
        project_id: String,
    },
    /// The project named by the pod's namespace annotation `openstack.org/kuryr-project`,
    /// else `[neutron_defaults] project`.
    Annotation {
        /// `[neutron_defaults] project`, the fallback.
        default_project: Option<String>,
        /// Namespaces, read from a watch-fed cache.
        namespaces: Reflected<Namespace>,
    },
}

impl std::fmt::Debug for ProjectDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default { project_id } => {
                f.debug_struct("Default").field("project_id", project_id).finish()
            }
            Self::Annotation { default_project, .. } => f
                .debug_struct("Annotation")
                .field("default_project", default_project)
                .finish_non_exhaustive(),
        }
    }
}

/// The project an object of a namespace with `annotations` belongs to: the
/// `openstack.org/kuryr-project` annotation when set and not blank, else `default`.
pub fn project_from_annotations(
    annotations: &BTreeMap<String, String>,
    default: Option<&str>,
) -> Option<String> {
    annotations
        .get(ANNOTATION_PROJECT)
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .or(default)
        .map(str::to_owned)
}

fn missing_default(driver: &'static str) -> DriverError {
    DriverError::MissingOption {
        group: "neutron_defaults",
        option: "project",
        driver,
    }
}

/// Checks a `[kubernetes] *_project_driver` value.
fn check_name(option: &'static str, value: &str) -> Result<(), DriverError> {
    match value {
        "default" | "annotation" => Ok(()),
        other => Err(DriverError::UnknownDriver {
            option,
            value: other.to_string(),
            expected: "default, annotation",
        }),
    }
}

impl ProjectDriver {
    /// From `[kubernetes] pod_project_driver`. `annotation` starts a watch of Namespaces
    /// (needs a Tokio runtime).
    pub fn from_config(config: &kuryr_config::Config, client: kube::Client) -> Result<Self, DriverError> {
        let name = config.kubernetes.pod_project_driver.as_str();
        check_name("pod_project_driver", name)?;
        let default_project = config.neutron_defaults.project.clone();
        if name == "annotation" {
            return Ok(Self::Annotation {
                default_project,
                namespaces: Reflected::spawn(client, "namespaces")?,
            });
        }
        let project_id = default_project.ok_or_else(|| missing_default("default project"))?;
        Ok(Self::Default { project_id })
    }

    /// The project of `pod`'s port.
    pub async fn pod_project(&self, pod: &Pod) -> Result<String, DriverError> {
        match self {
            Self::Default { project_id } => Ok(project_id.clone()),
            Self::Annotation {
                default_project,
                namespaces,
            } => {
                let ns_name = pod.namespace().unwrap_or_default();
                let Some(ns) = namespaces.get(None, &ns_name) else {
                    return Err(DriverError::NotReady(format!(
                        "namespace {ns_name} not in the cache yet"
                    )));
                };
                project_from_annotations(ns.annotations(), default_project.as_deref())
                    .ok_or_else(|| missing_default("annotation project"))
            }
        }
    }
}

/// `[kubernetes] namespace_project_driver`: the project of a namespace's network
/// (KuryrNetwork `spec.projectId`). Needs no cache: the namespace object is at hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceProjectDriver {
    /// `[neutron_defaults] project`.
    Default(String),
    /// The namespace's annotation, else `[neutron_defaults] project`.
    Annotation(Option<String>),
}

impl NamespaceProjectDriver {
    /// From `[kubernetes] namespace_project_driver`.
    pub fn from_config(config: &kuryr_config::Config) -> Result<Self, DriverError> {
        let name = config.kubernetes.namespace_project_driver.as_str();
        check_name("namespace_project_driver", name)?;
        let default_project = config.neutron_defaults.project.clone();
        if name == "annotation" {
            return Ok(Self::Annotation(default_project));
        }
        default_project
            .map(Self::Default)
            .ok_or_else(|| missing_default("default namespace project"))
    }

    /// The project of `ns`'s network.
    pub fn namespace_project(&self, ns: &Namespace) -> Result<String, DriverError> {
        match self {
            Self::Default(p) => Ok(p.clone()),
            Self::Annotation(default) => project_from_annotations(ns.annotations(), default.as_deref())
                .ok_or_else(|| missing_default("annotation namespace project")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(v: Option<&str>) -> BTreeMap<String, String> {
        v.map(|v| BTreeMap::from([(ANNOTATION_PROJECT.to_owned(), v.to_owned())]))
            .unwrap_or_default()
    }

    #[test]
    fn annotation_wins_then_default() {
        assert_eq!(
            project_from_annotations(&ann(Some("p1")), Some("d")).as_deref(),
            Some("p1")
        );
        assert_eq!(
            project_from_annotations(&ann(Some("  ")), Some("d")).as_deref(),
            Some("d")
        );
        assert_eq!(
            project_from_annotations(&ann(None), Some("d")).as_deref(),
            Some("d")
        );
        assert_eq!(project_from_annotations(&ann(None), None), None);
    }

    #[test]
    fn namespace_driver_selection() {
        let mut c = kuryr_config::Config::defaults();
        assert!(matches!(
            NamespaceProjectDriver::from_config(&c),
            Err(DriverError::MissingOption { .. })
        ));
        c.groups.neutron_defaults.project = Some("d".into());
        assert_eq!(
            NamespaceProjectDriver::from_config(&c).unwrap(),
            NamespaceProjectDriver::Default("d".into())
        );
        c.groups.kubernetes.namespace_project_driver = "annotation".into();
        let d = NamespaceProjectDriver::from_config(&c).unwrap();
        let mut ns = Namespace::default();
        assert_eq!(d.namespace_project(&ns).unwrap(), "d");
        ns.metadata.annotations = Some(ann(Some("p9")));
        assert_eq!(d.namespace_project(&ns).unwrap(), "p9");
        c.groups.kubernetes.namespace_project_driver = "bogus".into();
        assert!(matches!(
            NamespaceProjectDriver::from_config(&c),
            Err(DriverError::UnknownDriver { .. })
        ));
    }
}
