//! kuryr-e2e: the end-to-end harness of kuryr-rs, as a user sees the system.
//!
//! It drives `sandbox/cluster` (a whole cluster on the sandbox cloud) through [`cluster`],
//! creates pods and reads back what each got ([`pods`]: Kubernetes, KuryrPort `status.vifs`,
//! the node's sandbox state, Neutron), proves connectivity with real TCP connections from one
//! pod's network namespace to another pod ([`probe`]), scrapes the Prometheus endpoints of the
//! controller and the daemons ([`metrics`]), and renders the demo's table and matrix
//! ([`report`]). The `kuryr-e2e` binary uses it for `sandbox/demo` and `bench/pod-burst`
//! ([`burst`]); the tests under `tests/` use it for the end-to-end list.

pub mod burst;
pub mod chaos;
pub mod cluster;
pub mod compare;
pub mod error;
pub mod metrics;
pub mod netpol;
pub mod netpol_demo;
pub mod neutron;
pub mod outside;
pub mod pods;
pub mod policy_bench;
pub mod probe;
pub mod public_ip;
pub mod report;
pub mod services;
pub mod settle;
pub mod soak;
pub mod svc_burst;
pub mod svc_demo;
pub mod switch;
pub mod truth_table;

pub use error::Error;

/// Installs the process-wide rustls provider kube needs (idempotent).
pub fn init_crypto() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// An error and its causes on one line (`a: b: c`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}
