//! The collector's measured topology (`netaware_core::measured_topology`):
//! every round (`--topology-interval`, [`ROUND_INTERVAL`] by default) the
//! published snapshot is read into blocks of close nodes, degraded marks
//! and costs between zones, on a background thread; a tracker kept across
//! rounds moves a node only when `--block-confirmations` rounds in a row
//! say so. `GetTopology` serves the last round, shared and never rebuilt
//! per reader; `netaware topology` and its publisher render it for Kueue,
//! Volcano and Diktyo.
//!
//! The tracker lives in memory: after a restart the first round publishes
//! what it sees (block numbers follow the order of the groups' first
//! nodes, so an unchanged network gets its old numbers back).

use std::sync::Arc;
use std::time::Duration;

use netaware_core::UnixMillis;
use netaware_core::measured_topology::{self, BlockTracker, MeasuredTopology};

use crate::latest::Latest;
use crate::shared::Shared;

/// Default time between two rounds: blocks are about racks and switches,
/// which change over hours, and a round over a 5,000-node cluster's zones
/// takes a good part of a second of one core.
pub const ROUND_INTERVAL: Duration = Duration::from_secs(30);

/// The topology of the last round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PublishedTopology {
    /// Blocks, degraded marks and costs.
    pub topology: MeasuredTopology,
    /// When the round ran; 0 before the first.
    pub observed_unix_ms: UnixMillis,
}

/// The topology of the last round, for every reader.
pub type SharedTopology = Latest<PublishedTopology>;

/// Works the topology out every round until shutdown.
pub async fn run(shared: Arc<Shared>) {
    let config = *shared.state().config();
    let mut tracker = BlockTracker::new(&config.blocks);
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            () = tokio::time::sleep(config.topology_interval) => {}
        }
        let snapshot = shared.snapshots.published();
        let started = std::time::Instant::now();
        let round = netaware_runtime::background::run(move || {
            let observation =
                measured_topology::observe(&snapshot.scored, &config.blocks, &config.placement);
            drop(snapshot);
            let topology = tracker.update(&observation);
            (tracker, topology)
        })
        .await;
        let Some((kept, topology)) = round else {
            tracing::error!("a round of the measured topology failed; starting it over");
            tracker = BlockTracker::new(&config.blocks);
            continue;
        };
        tracker = kept;
        shared
            .work
            .topology_round
            .observe(started.elapsed().as_secs_f64());
        shared.topology.publish(PublishedTopology {
            topology,
            observed_unix_ms: netaware_runtime::clock::now_ms(),
        });
    }
}
