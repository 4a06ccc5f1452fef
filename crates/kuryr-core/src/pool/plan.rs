//! The sizing policy: how many ports a pool should create or trim, as plain arithmetic on a
//! [`PoolStats`] snapshot and the [`PoolConfig`] (the role of AWS VPC CNI's
//! `datastoreTargetState`, but never reaching back into the state).

use super::PoolStats;
use crate::config::PoolConfig;

/// What a pool should do now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolPlan {
    /// Ports to create in one bulk request (0: none).
    pub create: u32,
    /// Available ports to delete (0: none).
    pub trim: u32,
}

/// Most ports a bulk sized by waiting pods asks for (more wait for the next one): one Neutron
/// request of at most this many ports, about a minute on a busy 2-core ML2/OVN.
pub const DEMAND_BULK_MAX: u32 = 100;

/// Sizing of one pool.
///
/// * Supply = available + being created; cooling ports do not count (they are not usable for
///   up to `cooldown`, and counting them would leave pods waiting under churn).
/// * Below `ports_pool_min`, or with pods waiting on an empty pool: create
///   `max(ports_pool_batch, ports_pool_min - supply)` (upstream's formula), never while a
///   population of this pool is in flight, and never beyond `ports_pool_max` pooled ports
///   (available + cooling + being created + deferred) when it is non-zero.
/// * More pods waiting than that would serve (kuryr-rs, not upstream): the bulk is sized to
///   them, `waiting + ports_pool_min - supply`, up to [`DEMAND_BULK_MAX`]. Upstream created
///   one batch per population whatever the queue: with one population per pool at a time
///   and a bulk taking 5-16 s on a busy ML2/OVN, pods arriving faster than a batch per bulk
///   queued without bound (seen on the sandbox: a pod a second per node during a controller
///   upgrade, later pods' CNI ADDs timing out after 60 s). A bulk's cost is mostly per
///   request, so one sized to the queue serves it in about the time of one batch.
/// * Deferred ports (a previous controller's bulk creation, not settled yet) count against
///   the maximum but are no supply; pods waiting on an empty pool are not made to wait for
///   them (the overshoot is trimmed once they settle).
/// * Above `ports_pool_max` (non-zero) pooled ports: trim available ports down to it.
pub fn plan(stats: &PoolStats, cfg: &PoolConfig) -> PoolPlan {
    let supply = stats.available + stats.populating;
    let pooled = stats.available + stats.cooling + stats.populating + stats.deferred;
    let mut create = 0;
    if stats.populating == 0 {
        let starving = stats.available == 0 && stats.waiting > 0;
        if supply < cfg.min {
            create = cfg.batch.max(cfg.min - supply);
        } else if starving {
            create = cfg.batch.max(1);
        }
        if create > 0 {
            let demand = (stats.waiting.saturating_add(cfg.min))
                .saturating_sub(supply)
                .min(DEMAND_BULK_MAX);
            create = create.max(demand);
        }
        if cfg.max != 0 {
            let counted = if starving { pooled - stats.deferred } else { pooled };
            create = create.min(cfg.max.saturating_sub(counted));
        }
    }
    let trim = if cfg.max != 0 && pooled > cfg.max {
        (pooled - cfg.max).min(stats.available)
    } else {
        0
    };
    PoolPlan { create, trim }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(min: u32, max: u32, batch: u32) -> PoolConfig {
        PoolConfig {
            min,
            max,
            batch,
            ..PoolConfig::default()
        }
    }

    fn st(available: u32, cooling: u32, populating: u32, waiting: u32) -> PoolStats {
        PoolStats {
            available,
            in_use: 0,
            cooling,
            populating,
            waiting,
            deferred: 0,
        }
    }

    #[test]
    fn below_min_creates_a_batch_or_the_deficit() {
        assert_eq!(
            plan(&st(0, 0, 0, 0), &cfg(5, 0, 10)),
            PoolPlan { create: 10, trim: 0 }
        );
        assert_eq!(
            plan(&st(4, 0, 0, 0), &cfg(5, 0, 10)),
            PoolPlan { create: 10, trim: 0 }
        );
        assert_eq!(plan(&st(5, 0, 0, 0), &cfg(5, 0, 10)).create, 0);
        // Deficit larger than the batch (only possible with an insane config, kept as upstream).
        assert_eq!(plan(&st(0, 0, 0, 0), &cfg(30, 0, 10)).create, 30);
    }

    #[test]
    fn a_queue_of_waiting_pods_sizes_the_bulk() {
        // One waiting pod, or fewer than a batch: a batch, as upstream.
        assert_eq!(plan(&st(0, 0, 0, 1), &cfg(5, 0, 10)).create, 10);
        assert_eq!(plan(&st(0, 0, 0, 5), &cfg(5, 0, 10)).create, 10);
        // 25 waiting and min 5: all of them served, min left over.
        assert_eq!(plan(&st(0, 0, 0, 25), &cfg(5, 0, 10)).create, 30);
        assert_eq!(plan(&st(0, 0, 0, 25), &cfg(0, 0, 10)).create, 25);
        // Ports just created count as supply (their pods have not taken them yet).
        assert_eq!(plan(&st(3, 0, 0, 25), &cfg(5, 0, 10)).create, 27);
        // Never more than DEMAND_BULK_MAX for the queue, never beyond ports_pool_max.
        assert_eq!(plan(&st(0, 0, 0, 500), &cfg(5, 0, 10)).create, DEMAND_BULK_MAX);
        assert_eq!(plan(&st(0, 4, 0, 25), &cfg(5, 20, 10)).create, 16);
        // Enough supply, or a population in flight: nothing, whatever the queue.
        assert_eq!(plan(&st(30, 0, 0, 25), &cfg(5, 0, 10)).create, 0);
        assert_eq!(plan(&st(0, 0, 10, 25), &cfg(5, 0, 10)).create, 0);
    }

    #[test]
    fn never_two_populations_of_one_pool() {
        assert_eq!(plan(&st(0, 0, 10, 3), &cfg(5, 0, 10)).create, 0);
    }

    #[test]
    fn cooling_ports_do_not_count_as_supply_but_count_against_max() {
        assert_eq!(plan(&st(0, 8, 0, 0), &cfg(5, 0, 10)).create, 10);
        assert_eq!(plan(&st(0, 8, 0, 0), &cfg(5, 12, 10)).create, 4);
        assert_eq!(plan(&st(0, 12, 0, 1), &cfg(5, 12, 10)).create, 0);
    }

    #[test]
    fn waiting_pods_on_an_empty_pool_create_even_with_min_zero() {
        assert_eq!(plan(&st(0, 0, 0, 1), &cfg(0, 0, 10)).create, 10);
        assert_eq!(plan(&st(0, 0, 0, 0), &cfg(0, 0, 10)).create, 0);
    }

    #[test]
    fn above_max_trims_available_ports_only() {
        assert_eq!(
            plan(&st(15, 0, 0, 0), &cfg(5, 12, 10)),
            PoolPlan { create: 0, trim: 3 }
        );
        assert_eq!(
            plan(&st(2, 14, 0, 0), &cfg(5, 12, 10)),
            PoolPlan { create: 0, trim: 2 }
        );
        assert_eq!(plan(&st(200, 0, 0, 0), &cfg(5, 0, 10)).trim, 0);
    }

    #[test]
    fn deferred_ports_count_against_max_but_never_starve_a_waiting_pod() {
        let deferred = |mut s: PoolStats, d| {
            s.deferred = d;
            s
        };
        // 30 available + 10 deferred = max 40: nothing created, nothing trimmed.
        assert_eq!(
            plan(&deferred(st(30, 0, 0, 0), 10), &cfg(5, 40, 10)),
            PoolPlan { create: 0, trim: 0 }
        );
        // 35 + 10 > 40: the available ones are trimmed to make room.
        assert_eq!(plan(&deferred(st(35, 0, 0, 0), 10), &cfg(5, 40, 10)).trim, 5);
        // Below min, the deferred ports still limit the batch.
        assert_eq!(plan(&deferred(st(0, 0, 0, 0), 35), &cfg(5, 40, 10)).create, 5);
        // A pod waits on an empty pool: created as if the deferred ports did not exist.
        assert_eq!(plan(&deferred(st(0, 0, 0, 1), 40), &cfg(0, 40, 10)).create, 10);
    }
}
