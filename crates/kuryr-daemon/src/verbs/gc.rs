//! CNI GC: unwires every recorded attachment the runtime no longer lists as valid.

use std::collections::HashSet;

use tracing::{info, warn};

use crate::{
    daemon::{Daemon, OpError, error_chain},
    request::CniCall,
};

impl Daemon {
    /// CNI GC: unwires every attachment not in `call.valid_attachments`; returns how many.
    pub async fn gc(&self, call: &CniCall) -> Result<usize, OpError> {
        let valid: HashSet<(&str, &str)> = call
            .valid_attachments
            .iter()
            .map(|a| (a.container_id.as_str(), a.ifname.as_str()))
            .collect();
        let mut removed = 0;
        for a in self.state.all() {
            if valid.contains(&(a.container_id.as_str(), a.ifname.as_str())) {
                continue;
            }
            let key = crate::registry::pod_key(&a.pod_namespace, &a.pod_name);
            let lock = self.lock_for(&key);
            let _guard = lock.lock().await;
            // Re-read: an ADD may have replaced it meanwhile.
            if self.state.get(&a.container_id).is_none() {
                continue;
            }
            match self.unwire(&a).await {
                Ok(()) => {
                    removed += 1;
                    info!(pod = %key, container = %a.container_id, "garbage-collected");
                }
                Err(e) => {
                    warn!(pod = %key, container = %a.container_id, error = %error_chain(&e), "GC failed")
                }
            }
        }
        Ok(removed)
    }
}
