//! Active/passive HA (`[kubernetes] controller_ha = true`): a `coordination.k8s.io/v1` Lease
//! taken with kube-lease-manager replaces upstream's leader-elector sidecar (and so
//! `controller_ha_elector_port`). Only the holder runs handlers; a replica waiting for the
//! Lease serves `/alive` but not `/ready` (its watchers never sync), as upstream; a leader
//! that loses the Lease stops (the process exits and its supervisor restarts it as a
//! candidate), and a leader shutting down releases the Lease so a standby takes over at once.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::{sync::watch, task::JoinHandle};
use tracing::{info, warn};

/// Default name of the Lease.
pub const LEASE_NAME: &str = "kuryr-controller";

/// Why leader election failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Lease could not be read or created.
    #[error("setting up the leader election Lease {namespace}/{name}")]
    Setup {
        /// Namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Cause.
        #[source]
        source: LeaseManagerError,
    },
    /// The election task ended before this replica became leader.
    #[error("leader election stopped before this replica became leader")]
    Stopped,
}

/// Where and as whom to take the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// Lease name.
    pub lease_name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (the pod name in a Deployment).
    pub identity: String,
    /// Lease duration: a dead leader is replaced after at most this long.
    pub duration: Duration,
    /// Renewal happens this long before expiry.
    pub grace: Duration,
}

impl LeaderSettings {
    /// Settings with `identity` defaulting to `<host name>_<pid>` (unique per process).
    pub fn new(namespace: impl Into<String>, identity: Option<String>, duration: Duration) -> Self {
        let identity = identity
            .filter(|s| !s.is_empty())
            .unwrap_or_else(default_identity);
        Self {
            lease_name: LEASE_NAME.into(),
            namespace: namespace.into(),
            identity,
            grace: grace_for(duration),
            duration,
        }
    }
}

/// Renewal margin: a third of the duration, at least one second, leaving at least one.
pub fn grace_for(duration: Duration) -> Duration {
    let d = duration.as_secs().max(2);
    Duration::from_secs((d / 3).clamp(1, d - 1))
}

/// `<host name>_<pid>`.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "kuryr-controller".into());
    format!("{host}_{}", std::process::id())
}

/// This replica holds the Lease.
pub struct Leadership {
    rx: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
    identity: String,
}

/// Waits until this replica holds the Lease of `settings`.
pub async fn acquire(client: Client, settings: &LeaderSettings) -> Result<Leadership, Error> {
    let manager = LeaseManagerBuilder::new(client, settings.lease_name.clone())
        .with_namespace(settings.namespace.clone())
        .with_identity(settings.identity.clone())
        .with_duration(settings.duration.as_secs().max(2))
        .with_grace(settings.grace.as_secs().max(1))
        .build()
        .await
        .map_err(|source| Error::Setup {
            namespace: settings.namespace.clone(),
            name: settings.lease_name.clone(),
            source,
        })?;
    let (mut rx, task) = manager.watch().await;
    info!(identity = %settings.identity, lease = %settings.lease_name, namespace = %settings.namespace,
        "waiting for leadership");
    loop {
        if *rx.borrow_and_update() {
            break;
        }
        if rx.changed().await.is_err() {
            return Err(Error::Stopped);
        }
    }
    info!(identity = %settings.identity, "became leader");
    Ok(Leadership {
        rx,
        task,
        identity: settings.identity.clone(),
    })
}

impl Leadership {
    /// Resolves when the Lease is lost (or the election task ended).
    pub async fn lost(&mut self) {
        loop {
            if !*self.rx.borrow_and_update() {
                break;
            }
            if self.rx.changed().await.is_err() {
                break;
            }
        }
        warn!(identity = %self.identity, "lost leadership");
    }

    /// Gives the Lease up (so a standby takes over without waiting for expiry).
    pub async fn release(self) {
        let Leadership { rx, task, identity } = self;
        // Closing the channel makes the election task release the Lease and end.
        drop(rx);
        match tokio::time::timeout(Duration::from_secs(5), task).await {
            Ok(Ok(Ok(_))) => info!(%identity, "leadership released"),
            Ok(Ok(Err(e))) => warn!(%identity, error = %e, "releasing the Lease failed"),
            Ok(Err(e)) => warn!(%identity, error = %e, "election task failed"),
            Err(_) => warn!(%identity, "releasing the Lease timed out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_grace() {
        assert_eq!(grace_for(Duration::from_secs(15)), Duration::from_secs(5));
        assert_eq!(grace_for(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(grace_for(Duration::from_secs(0)), Duration::from_secs(1));
        let s = LeaderSettings::new("kube-system", None, Duration::from_secs(15));
        assert!(s.identity.ends_with(&format!("_{}", std::process::id())));
        assert_eq!(s.lease_name, LEASE_NAME);
        let s = LeaderSettings::new("ns", Some("pod-a".into()), Duration::from_secs(6));
        assert_eq!(s.identity, "pod-a");
        assert_eq!(s.grace, Duration::from_secs(2));
    }
}
