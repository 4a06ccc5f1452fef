//! [`Creates`]: port creations requested at the same time, sent together. The noop driver
//! creates one port per pod when the pod needs it (upstream made one `POST /v2.0/ports` per
//! pod, one after another under a burst); here whoever sends next takes every body queued
//! meanwhile into ONE bulk request (group commit): the first pod of a burst waits for its own
//! request only, the others for one more. Neutron's bulk creation is all or nothing: when a
//! bulk of several fails, each body is sent again on its own, so one bad body (a full subnet)
//! fails only its own pod.

use std::sync::Mutex;

use kuryr_openstack::{Neutron, Port, PortCreate};
use tokio::sync::oneshot;
use tracing::{debug, warn};

use super::lock;

/// What a queued creation gets back: its port, or its own error when it was sent alone, or
/// `Err(None)` when the bulk it was in failed (it is then sent again on its own).
type Answer = Result<Port, Option<kuryr_openstack::Error>>;

/// See the module documentation.
#[derive(Default)]
pub struct Creates {
    pending: Mutex<Vec<(PortCreate, oneshot::Sender<Answer>)>>,
    writer: tokio::sync::Mutex<()>,
}

impl Creates {
    /// Creates the port of `body` (alone or in a bulk with others queued meanwhile).
    pub async fn create(
        &self,
        neutron: &dyn Neutron,
        body: PortCreate,
    ) -> Result<Port, kuryr_openstack::Error> {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).push((body.clone(), tx));
        {
            let _writer = self.writer.lock().await;
            let batch = std::mem::take(&mut *lock(&self.pending));
            if !batch.is_empty() {
                send(neutron, batch).await;
            }
        }
        match rx.await {
            Ok(Ok(port)) => Ok(port),
            Ok(Err(Some(e))) => Err(e),
            // In a bulk that failed, or abandoned by a cancelled sender: on its own.
            Ok(Err(None)) | Err(_) => one(neutron, &body).await,
        }
    }
}

async fn one(neutron: &dyn Neutron, body: &PortCreate) -> Result<Port, kuryr_openstack::Error> {
    let created = neutron.create_ports_bulk(std::slice::from_ref(body)).await?;
    created
        .into_iter()
        .next()
        .ok_or_else(|| kuryr_openstack::Error::Decode {
            op: kuryr_openstack::ops::PORT_BULK_CREATE,
            message: "Neutron answered a port creation with no port".into(),
        })
}

async fn send(neutron: &dyn Neutron, batch: Vec<(PortCreate, oneshot::Sender<Answer>)>) {
    let bodies: Vec<PortCreate> = batch.iter().map(|(b, _)| b.clone()).collect();
    let result = neutron.create_ports_bulk(&bodies).await;
    debug!(
        ports = bodies.len(),
        ok = result.is_ok(),
        "coalesced port creation"
    );
    match result {
        Ok(ports) if ports.len() == batch.len() => {
            // Neutron answers a bulk in the order of its bodies.
            for ((_, tx), port) in batch.into_iter().zip(ports) {
                let _ = tx.send(Ok(port));
            }
        }
        Err(e) if batch.len() == 1 => {
            if let Some((_, tx)) = batch.into_iter().next() {
                let _ = tx.send(Err(Some(e)));
            }
        }
        other => {
            if let Err(e) = &other {
                warn!(ports = bodies.len(), error = %e, "a coalesced port creation failed: each is sent on its own");
            }
            for (_, tx) in batch {
                let _ = tx.send(Err(None));
            }
        }
    }
}
