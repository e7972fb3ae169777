//! The collector's measured topology (`netaware_core::measured_topology`),
//! one per network: every round (`--topology-interval`,
//! [`TOPOLOGY_ROUND_INTERVAL`](crate::config::TOPOLOGY_ROUND_INTERVAL) by
//! default) the
//! published snapshot is read into blocks of close nodes, degraded marks
//! and costs between zones, on a background thread; a tracker kept across
//! rounds moves a node only when `--block-confirmations` rounds in a row
//! say so. `GetTopology` serves the last round, shared and never rebuilt
//! per reader; `netaware topology` and its publisher render it for Kueue,
//! Volcano and Diktyo.
//!
//! The same round localises each network's faults from its matrix and
//! the blocks just found (`netaware_core::faults`), and a fault tracker
//! opens and clears them with hysteresis; each that opens or clears is
//! logged, and `GetFaults` serves the open ones. The nodes of an open
//! block uplink fault are marked in the published topology, so that a
//! scheduler reading labels keeps off them.
//!
//! The trackers live in memory: after a restart the first round publishes
//! what it sees (block numbers follow the order of the groups' first
//! nodes, so an unchanged network gets its old numbers back), and faults
//! open again after their looks in a row.

use std::collections::BTreeMap;
use std::sync::Arc;

use netaware_core::UnixMillis;
use netaware_core::faults::round::{self, RoundConfig};
use netaware_core::faults::tracker::{Change, Fault, FaultTracker, TrackerConfig, placement_marks};
use netaware_core::measured_topology::{BlockTracker, MeasuredTopology};
use netaware_core::network::Network;
use netaware_runtime::latest::Latest;
use tokio_util::sync::CancellationToken;

use crate::config::ModelConfig;
use crate::metrics::WorkMetrics;
use crate::snapshots::{FaultsByNetwork, Snapshots};

/// The topology of the last round, of every network measured: a rail's
/// blocks are what a job placed by that rail should pack into.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PublishedTopology {
    /// Blocks, degraded marks and costs, by network.
    pub by_network: BTreeMap<Network, MeasuredTopology>,
    /// When the round ran; 0 before the first.
    pub observed_unix_ms: UnixMillis,
    /// The open faults of every network, by network, kind and name.
    pub faults: Vec<Fault>,
}

impl PublishedTopology {
    /// `network`'s topology; an empty one before the first round, `None`
    /// when the round saw no matrix of that network.
    pub fn of(&self, network: &Network) -> Option<MeasuredTopology> {
        match self.by_network.get(network) {
            Some(topology) => Some(topology.clone()),
            None if self.observed_unix_ms == 0 => Some(MeasuredTopology::default()),
            None => None,
        }
    }
}

/// The topology of the last round, for every reader.
pub type SharedTopology = Latest<PublishedTopology>;

/// Works the topology of every network out every round until `shutdown`,
/// into `published`. Each network has its tracker, kept across rounds; a
/// network that is gone loses its own.
pub async fn run(
    snapshots: Arc<Snapshots>,
    published: Arc<SharedTopology>,
    work: Arc<WorkMetrics>,
    config: ModelConfig,
    shutdown: CancellationToken,
) {
    let mut trackers: BTreeMap<Network, BlockTracker> = BTreeMap::new();
    let mut faults = FaultTracker::new(TrackerConfig::default());
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(config.topology_interval) => {}
        }
        let snapshot = snapshots.published();
        let started = std::time::Instant::now();
        let kept = std::mem::take(&mut trackers);
        let mut fault_tracker = std::mem::take(&mut faults);
        let now = netaware_runtime::clock::now_ms();
        let rtts = work.zone_pair_rtts.clone();
        let round = netaware_runtime::background::run(move || {
            let mut trackers = BTreeMap::new();
            let mut by_network = BTreeMap::new();
            let mut kept = kept;
            let mut changes = Vec::new();
            for network in snapshot.networks() {
                let Some(placer) = snapshot.placer_of(network) else {
                    continue;
                };
                crate::rtt_histograms::observe(&rtts, network, placer.matrix());
                let mut tracker = kept
                    .remove(network)
                    .unwrap_or_else(|| BlockTracker::new(&config.blocks));
                let round_config = RoundConfig {
                    blocks: &config.blocks,
                    placement: &config.placement,
                    faults: &config.faults,
                };
                let (topology, found) = round::look(
                    placer.matrix(),
                    network,
                    &mut tracker,
                    &mut fault_tracker,
                    round_config,
                    now,
                );
                changes.extend(found);
                by_network.insert(network.clone(), topology);
                trackers.insert(network.clone(), tracker);
            }
            // A network no longer measured has its faults clear.
            let gone: Vec<Network> = fault_tracker
                .open()
                .into_iter()
                .map(|fault| fault.network)
                .filter(|network| !by_network.contains_key(network))
                .collect();
            for network in gone {
                changes.extend(fault_tracker.update(&network, Vec::new()));
            }
            drop(snapshot);
            // The blocks published behind a bad uplink say so, for the
            // schedulers that read labels rather than netaware's scores.
            let open = fault_tracker.open();
            let marks = marks_by_network(&open);
            for (network, topology) in &mut by_network {
                if let Some(marks) = marks.get(network) {
                    topology.mark_bad_uplinks(marks);
                }
            }
            (trackers, by_network, fault_tracker, changes, open, marks)
        })
        .await;
        let Some((kept, by_network, fault_tracker, changes, open, marks)) = round else {
            tracing::error!("a round of the measured topology failed; starting it over");
            continue;
        };
        trackers = kept;
        log_changes(&changes);
        faults = fault_tracker;
        snapshots.faults.publish(marks);
        work.topology_round.observe(started.elapsed().as_secs_f64());
        published.publish(PublishedTopology {
            by_network,
            observed_unix_ms: now,
            faults: open,
        });
    }
}

/// What placement acts on among the open faults, by network.
fn marks_by_network(open: &[Fault]) -> FaultsByNetwork {
    let mut by_network: BTreeMap<Network, Vec<&Fault>> = BTreeMap::new();
    for fault in open {
        by_network
            .entry(fault.network.clone())
            .or_default()
            .push(fault);
    }
    by_network
        .into_iter()
        .map(|(network, faults)| (network, placement_marks(faults)))
        .collect()
}

/// Says each fault that opened or cleared.
fn log_changes(changes: &[Change]) {
    for change in changes {
        match change {
            Change::Opened(fault) => tracing::warn!(
                kind = %fault.kind,
                network = %fault.network,
                metric = %fault.metric,
                nodes = ?fault.nodes,
                zones = ?fault.zones,
                value = fault.value,
                baseline = fault.baseline,
                confidence = fault.confidence,
                "network fault found"
            ),
            Change::Cleared(fault) => tracing::info!(
                kind = %fault.kind,
                network = %fault.network,
                metric = %fault.metric,
                nodes = ?fault.nodes,
                zones = ?fault.zones,
                "network fault cleared"
            ),
        }
    }
}
