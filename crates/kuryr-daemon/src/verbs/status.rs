//! STATUS: whether ADD can be served now (the watchers have synced, the datapath answers and
//! the integration bridge exists).

use kuryr_cni_api::{CniError, ErrorCode};

use crate::daemon::Daemon;

impl Daemon {
    /// STATUS: `Ok` when ADD can be served (watchers synced, bridge present).
    pub async fn status(&self) -> Result<(), CniError> {
        if !self.registry.synced() {
            return Err(CniError::new(
                ErrorCode::PluginNotAvailable,
                "kuryr-daemon watchers have not synced yet",
            ));
        }
        self.bindings
            .datapath_ready(self.settings.default_bridge.as_deref())
            .await
            .map_err(|why| CniError::new(ErrorCode::PluginNotAvailable, why))
    }
}
