//! CNI CHECK: verifies the recorded wiring of a container with each VIF's binding driver.

use std::path::Path;

use kuryr_types::VifKind;

use crate::{
    daemon::{Daemon, OpError},
    request::CniCall,
};

impl Daemon {
    /// CNI CHECK: verifies the recorded wiring.
    pub async fn check(&self, call: &CniCall) -> Result<(), OpError> {
        let a = self
            .state
            .get(&call.container_id)
            .ok_or_else(|| OpError::NotWired(call.container_id.clone()))?;
        let mut problems = Vec::new();
        if a.ifname != call.ifname {
            problems.push(format!("wired as {}, CHECK asks for {}", a.ifname, call.ifname));
        }
        for w in &a.vifs {
            let err = OpError::binding(&a.container_id, &w.spec.ifname);
            let binding = self
                .bindings
                .for_kind(&VifKind::from_name(&w.class))
                .map_err(&err)?;
            problems.extend(binding.check(&w.spec, Path::new(&a.netns)).await.map_err(&err)?);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(OpError::CheckFailed {
                container_id: a.container_id,
                problems,
            })
        }
    }
}
