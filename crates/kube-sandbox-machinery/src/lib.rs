//! API machinery of the emulated Kubernetes API server, as pure functions with no I/O (except
//! [`tls`], which writes certificates and the kubeconfig): selectors, patches, CRD schema
//! handling, Table rendering and ClusterIP allocation. Kept apart so it is unit-tested in isolation.

pub mod clusterip;
pub mod patch;
pub mod schema;
pub mod selectors;
pub mod table;
pub mod tls;
