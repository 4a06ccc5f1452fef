//! CNI DEL: idempotent and bounded by [`DEL_TIMEOUT`]; works from the state files alone (no
//! API server, no KuryrPort): unwires what was recorded for the container, ignores a stale
//! container of a pod that has a newer one, and otherwise at most removes `CNI_IFNAME` from the
//! container's namespace.

use std::path::PathBuf;

use kuryr_types::VifKind;
use tracing::{debug, info};

use crate::{
    daemon::{DEL_TIMEOUT, Daemon, OpError},
    request::CniCall,
    state::Attachment,
};

impl Daemon {
    /// Unwires every VIF of `a` and forgets it (DEL, GC).
    pub(crate) async fn unwire(&self, a: &Attachment) -> Result<(), OpError> {
        let netns = PathBuf::from(&a.netns);
        for w in &a.vifs {
            let err = OpError::binding(&a.container_id, &w.spec.ifname);
            let binding = self
                .bindings
                .for_kind(&VifKind::from_name(&w.class))
                .map_err(&err)?;
            binding.disconnect(&w.spec, &netns).await.map_err(&err)?;
        }
        self.state.remove(&a.container_id).map_err(OpError::State)
    }

    /// CNI DEL: idempotent, bounded by [`DEL_TIMEOUT`].
    pub async fn del(&self, call: &CniCall) -> Result<(), OpError> {
        tokio::time::timeout(DEL_TIMEOUT, self.del_inner(call))
            .await
            .map_err(|_| OpError::DelTimeout(call.container_id.clone()))?
    }

    async fn del_inner(&self, call: &CniCall) -> Result<(), OpError> {
        let key = call.pod_key().unwrap_or_else(|| call.container_id.clone());
        let lock = self.lock_for(&key);
        let _guard = lock.lock().await;
        self.remember_deleted(&call.container_id);
        if let Some(a) = self.state.get(&call.container_id) {
            self.unwire(&a).await?;
            info!(pod = %key, container = %call.container_id, "unwired");
            return Ok(());
        }
        if let (Some(ns), Some(name)) = (&call.pod_namespace, &call.pod_name) {
            let current: Vec<String> = self
                .state
                .of_pod(ns, name)
                .into_iter()
                .map(|a| a.container_id)
                .collect();
            if !current.is_empty() {
                info!(pod = %key, container = %call.container_id, current = ?current, "ignoring DEL of a stale container");
                return Ok(());
            }
        }
        // Nothing recorded: this daemon never wired the container, so nothing of it is ours to
        // remove. (It used to delete the link CNI_IFNAME in CNI_NETNS: a DEL naming the node's
        // own namespace then deleted a host link.) An ADD cut before its record was written
        // left at most links inside the container's namespace, which go with it.
        debug!(pod = %key, container = %call.container_id, "DEL of a container this daemon never wired: nothing to do");
        Ok(())
    }
}
