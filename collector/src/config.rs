//! How the collector is configured: the score model, placement, peer
//! sets, throughput tests, coordinates and measured topology, as its flags
//! set them. A leaf: everything else reads it, it reads nothing of the
//! collector's.

use std::time::Duration;

use netaware_core::blocks::BlockConfig;
use netaware_core::faults::FaultConfig;
use netaware_core::placement::PlacementConfig;
use netaware_core::score::ScoreConfig;
use netaware_core::throughput_plan::{PlanConfig, PlanError};

/// Default time between two passes of the network coordinates: medians
/// change over windows (seconds), and a pass over a 5,000-node cluster's
/// 320,000 pairs costs tens of milliseconds.
pub const COORDINATE_PASS_INTERVAL: Duration = Duration::from_secs(10);

/// Default time between two rounds of the measured topology: blocks are
/// about racks and switches, which change over hours, and a round over a
/// 5,000-node cluster's zones takes a good part of a second of one core.
pub const TOPOLOGY_ROUND_INTERVAL: Duration = Duration::from_secs(30);

/// How the collector scores and places.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelConfig {
    /// The score model.
    pub score: ScoreConfig,
    /// The placement policy.
    pub placement: PlacementConfig,
    /// Windows kept per pair.
    pub windows_kept: usize,
    /// Throughput tests; `None` plans none.
    pub throughput: Option<ThroughputConfig>,
    /// Most peers an agent probes (0: every other node); see
    /// [`netaware_core::peers`].
    pub max_peers: usize,
    /// How long each rotation step of bounded peer sets lasts.
    pub peer_rotation: Duration,
    /// Time between two passes of the network coordinates over the
    /// measured medians (`crate::tasks::coordinates`).
    pub coordinate_interval: Duration,
    /// How blocks are cut and how long a node takes to move
    /// (`crate::tasks::topology`).
    pub blocks: BlockConfig,
    /// Time between two rounds of the measured topology (and of fault
    /// localisation, which reads its blocks).
    pub topology_interval: Duration,
    /// How faults are found (`netaware_core::faults`).
    pub faults: FaultConfig,
}

/// Most peers an agent probes by default: a cluster of up to 65 nodes is a
/// full mesh, a larger one bounded (`netaware_core::peers`).
pub const DEFAULT_MAX_PEERS: usize = 64;

/// How long a rotation step of bounded peer sets lasts by default: long
/// enough for a pair's windows to fill (six 2 s windows take 12 s), short
/// enough that a zone of 500 nodes is covered in about an hour.
pub const DEFAULT_PEER_ROTATION: Duration = Duration::from_secs(300);

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            score: ScoreConfig::default(),
            placement: PlacementConfig::default(),
            windows_kept: 6,
            throughput: Some(ThroughputConfig::default()),
            max_peers: DEFAULT_MAX_PEERS,
            peer_rotation: DEFAULT_PEER_ROTATION,
            coordinate_interval: COORDINATE_PASS_INTERVAL,
            blocks: BlockConfig::default(),
            topology_interval: TOPOLOGY_ROUND_INTERVAL,
            faults: FaultConfig::default(),
        }
    }
}

/// How throughput tests are planned and run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThroughputConfig {
    /// The planner's rationing.
    pub plan: PlanConfig,
    /// Warm-up left out of each result.
    pub omit_ms: u32,
    /// Measured part of each test.
    pub duration_ms: u32,
    /// Parallel TCP streams per test.
    pub streams: u32,
}

impl ThroughputConfig {
    /// Tests of `omit_ms + duration_ms` within `budget` of each node's time,
    /// at most `max_concurrent` at once in the cluster.
    pub fn new(
        budget: f64,
        omit_ms: u32,
        duration_ms: u32,
        streams: u32,
        same_zone_only: bool,
        max_concurrent: Option<usize>,
    ) -> Result<Self, PlanError> {
        let plan =
            PlanConfig::for_tests(budget, omit_ms, duration_ms, same_zone_only, max_concurrent)?;
        Ok(Self {
            plan,
            omit_ms,
            duration_ms,
            streams,
        })
    }
}

impl Default for ThroughputConfig {
    /// 2% of each node's time; 0.5 s warm-up, 2 s measured, one stream.
    fn default() -> Self {
        Self::new(0.02, 500, 2_000, 1, false, None).expect("the defaults are valid")
    }
}
