//! One network's round of the measured topology and its faults, as the
//! collector runs it every `--topology-interval`: the matrix read into
//! blocks (kept by a [`BlockTracker`], which moves a node only on
//! sustained evidence), the faults localised over those blocks, and a
//! [`FaultTracker`] opening and clearing them. Pure: the caller keeps the
//! trackers from round to round and says when the round is; the
//! collector's task and the evaluation's rounds of noise run this same
//! code.

use crate::blocks::BlockConfig;
use crate::faults::tracker::{Change, Fault, FaultTracker};
use crate::faults::{FaultConfig, FaultInput, localise};
use crate::measured_topology::{BlockTracker, MeasuredTopology, observe};
use crate::network::Network;
use crate::placement::PlacementConfig;
use crate::scored::ScoredMatrix;

/// The settings a round works by.
#[derive(Debug, Clone, Copy)]
pub struct RoundConfig<'a> {
    /// How blocks are cut and confirmed.
    pub blocks: &'a BlockConfig,
    /// The thresholds a node is degraded by, as placement judges it.
    pub placement: &'a PlacementConfig,
    /// How faults are found.
    pub faults: &'a FaultConfig,
}

/// One look at `network`'s `matrix` at `now`: its topology as `blocks`
/// publishes it after this round, and the faults that opened or cleared in
/// `faults`. The topology's bad uplinks are not marked yet: a caller with
/// every network's open faults marks them
/// ([`MeasuredTopology::mark_bad_uplinks`]).
pub fn look(
    matrix: &ScoredMatrix,
    network: &Network,
    blocks: &mut BlockTracker,
    faults: &mut FaultTracker,
    config: RoundConfig<'_>,
    now: crate::UnixMillis,
) -> (MeasuredTopology, Vec<Change>) {
    let observation = observe(matrix, config.blocks, config.placement);
    let topology = blocks.update(&observation);
    let input = FaultInput::from_matrix(matrix, Some(&topology), now);
    let found = localise(&input, config.faults)
        .iter()
        .map(|finding| Fault::named(&input, network, finding, now))
        .collect();
    let changes = faults.update(network, found);
    (topology, changes)
}
