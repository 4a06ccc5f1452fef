//! The contract between the `kuryr-cni` plugin executable and `kuryr-daemon`, and the CNI
//! specification types both sides need.
//!
//! * [`version`]: the CNI spec versions we speak (0.3.1, 0.4.0, 1.0.0, 1.1.0).
//! * [`error`]: CNI error codes and the error object printed on stdout / sent by the daemon.
//! * [`args`]: `CNI_ARGS` (`K=V;K=V`) parsing.
//! * [`config`]: the network configuration the runtime gives on stdin.
//! * [`daemon`]: the daemon HTTP API — upstream's `POST /addNetwork`, `POST /delNetwork` and the
//!   kuryr-rs extensions `POST /checkNetwork`, `POST /gcNetworks`, `GET /status`.
//! * [`vif`]: a minimal reader of the os-vif VIF primitive the daemon returns for ADD.
//! * [`result`]: CNI results per spec version and the VIF → result conversion.
//!
//! Dependencies are serde, serde_json and thiserror only, so the plugin stays small.

pub mod args;
pub mod config;
pub mod daemon;
pub mod error;
pub mod result;
pub mod version;
pub mod vif;

pub use args::CniArgs;
pub use config::NetConf;
pub use daemon::{DaemonRequest, Verb};
pub use error::{CniError, ErrorCode};
pub use result::CniResult;
pub use version::CniVersion;
pub use vif::VifInfo;
