//! Emulated node side of kube-sandbox: [`node`] (kubelet + container runtime driving a real CNI
//! plugin on real network namespaces) and [`controllers`] (scheduler and endpoints controller).
//! Both talk to the API server only through the Kubernetes API, like their real counterparts.

pub mod controllers;
pub mod node;
