//! [`NetworkGates`]: at most one bulk port creation per network in flight, the others of the
//! same network queued behind it (FIFO).
//!
//! Why: Neutron picks a bulk's addresses at random among a subnet's free ones and commits them
//! in one transaction. Two bulks on the same subnet at once often pick a common address (two
//! batches of 10 among ~180 free addresses: about 4 times in 10); the second then waits on
//! the first's row lock, fails on the duplicate and is retried whole by Neutron — up to 20
//! times, 0.5 s doubling to 10 s apart. Measured on the sandbox (ML2/OVN, Neutron 21, a
//! `/24` pod subnet, pools on two nodes): bulks of 10 ports that take about 5 s one at a time
//! (4.7-5.9 s measured) took 11-60 s, some 208 s ending in `409 Conflict` ("DB exceeded retry
//! limit ... Failed to create a duplicate IPAllocation"), and the controller meanwhile gave up
//! on them and sent more.
//! Pools of different networks still populate in parallel (`ports_pool_max_concurrent_bulk`).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use super::lock;

/// One async mutex per network ID, dropped from the map when nobody holds or waits for it.
#[derive(Default)]
pub struct NetworkGates {
    gates: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

/// The turn of one bulk creation on its network; the next one queued starts when it drops.
pub struct Turn {
    guard: Option<OwnedMutexGuard<()>>,
    network_id: String,
    gates: Arc<NetworkGates>,
}

impl NetworkGates {
    /// Waits for the turn of a bulk creation on `network_id` (at once when none is in flight).
    pub async fn turn(self: &Arc<Self>, network_id: &str) -> Turn {
        let gate = lock(&self.gates)
            .entry(network_id.to_string())
            .or_default()
            .clone();
        let guard = gate.lock_owned().await;
        Turn {
            guard: Some(guard),
            network_id: network_id.to_string(),
            gates: self.clone(),
        }
    }

    /// Networks with a creation in flight or queued.
    pub fn busy(&self) -> usize {
        lock(&self.gates).len()
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut gates = lock(&self.gates.gates);
        // Release first, then forget the gate if no other turn holds or waits for it (the
        // map's own reference is the only one left).
        drop(self.guard.take());
        if gates
            .get(&self.network_id)
            .is_some_and(|g| Arc::strong_count(g) == 1)
        {
            gates.remove(&self.network_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_turn_per_network_others_in_parallel_and_no_gate_left() {
        let gates = Arc::new(NetworkGates::default());
        let a = gates.turn("net-a").await;
        // Another network: at once.
        let b = gates.turn("net-b").await;
        // The same network: waits until the first turn ends.
        let waiter = {
            let gates = gates.clone();
            tokio::spawn(async move {
                let _t = gates.turn("net-a").await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "a second turn on net-a while the first holds it"
        );
        drop(a);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the queued turn runs once the first ends")
            .expect("task");
        drop(b);
        assert_eq!(gates.busy(), 0, "no gate kept for idle networks");
    }
}
