//! The collector's measured topology (`netaware_core::measured_topology`):
//! every round (`--topology-interval`,
//! [`TOPOLOGY_ROUND_INTERVAL`](crate::config::TOPOLOGY_ROUND_INTERVAL) by
//! default) the
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

use netaware_core::UnixMillis;
use netaware_core::measured_topology::{self, BlockTracker, MeasuredTopology};
use netaware_runtime::latest::Latest;
use tokio_util::sync::CancellationToken;

use crate::config::ModelConfig;
use crate::metrics::WorkMetrics;
use crate::snapshots::Snapshots;

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

/// Works the topology out every round until `shutdown`, into `published`.
pub async fn run(
    snapshots: Arc<Snapshots>,
    published: Arc<SharedTopology>,
    work: Arc<WorkMetrics>,
    config: ModelConfig,
    shutdown: CancellationToken,
) {
    let mut tracker = BlockTracker::new(&config.blocks);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(config.topology_interval) => {}
        }
        let snapshot = snapshots.published();
        let started = std::time::Instant::now();
        let round = netaware_runtime::background::run(move || {
            let observation =
                measured_topology::observe(snapshot.scored(), &config.blocks, &config.placement);
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
        work.topology_round.observe(started.elapsed().as_secs_f64());
        published.publish(PublishedTopology {
            topology,
            observed_unix_ms: netaware_runtime::clock::now_ms(),
        });
    }
}
