//! The pure core of netaware: what the collector and the scheduler decide,
//! with no sockets and no clocks of their own.
//!
//! Everything here is plain data and functions; the current time is always
//! passed in as [`UnixMillis`]. That keeps every decision deterministic and
//! testable by unit and property tests, and lets the async shells (the gRPC
//! collector, the HTTP extender, the CLI) stay thin.
//!
//! - [`registry`]: the nodes the collector knows, and their liveness.
//! - [`matrix`]: the directed pair matrix over recent measurement windows.
//! - [`score`]: the score model that turns a pair's figures into a quality.
//! - [`scored`]: the scored matrix, a self-contained view of the pair
//!   matrix at one instant, estimates of the pairs nobody probes included.
//! - [`scored_pair`]: one directed pair of the scored matrix.
//! - [`estimate`]: what a pair nobody measured is taken to be.
//! - [`node_estimate`]: a pair nobody probes, from what is known of its ends.
//! - [`node_health`]: whether a node itself is degraded, from its zone links.
//! - [`placement`]: where the workers of a job should go, and why.
//! - [`verdict`]: why a node must not take a worker, as typed values.
//! - [`extender`]: the kube-scheduler extender's filter and scores.
//! - [`peers`]: which nodes each agent probes, and how the sets rotate.
//! - [`coordinates`]: network coordinates, for the RTT of pairs nobody probes.
//! - [`coordinate_pass`]: one pass of the coordinates over a scored matrix.
//! - [`residuals`]: what the coordinates get wrong on the measured pairs,
//!   and the estimate of a pair nobody measured.
//! - [`host_model`]: an additive model of the measured RTTs (a base per zone
//!   pair, a delay per node), where the coordinates cannot follow.
//! - [`pair_rtt`]: any pair's RTT, measured or estimated, and on what basis.
//! - [`window`]: an agent's probes folded into the windows it reports.
//! - [`network`]: the networks a pair is measured over (the primary, a
//!   dual-stack node's other family, the rails an operator names), each
//!   with a matrix of its own; [`network_address`]: how a node finds its
//!   address on a named network; [`worst_of`]: the matrix of a job that
//!   uses several networks at once, each pair its worst network's.
//! - [`stats`]: quantiles, medians and means, one definition for all.
//! - [`transport`]: how a pair was probed (ICMP, UDP, TCP), and what was
//!   found filtered on the way.
//! - [`throughput_plan`]: which throughput tests run when, within a budget.
//! - [`labels`]: a node's zone and region from its Kubernetes labels.
//! - [`blocks`]: groups of a zone's nodes close to each other, by clustering.
//! - [`measured_topology`]: the blocks, degraded nodes and zone costs that
//!   netaware publishes, moved only on sustained evidence.
//! - [`chunked`], [`memo`]: storage the matrix and placement share (copy-on-
//!   write chunks, a one-entry cache of the last answer).

pub mod blocks;
pub mod chunked;
pub mod coordinate_pass;
pub mod coordinates;
pub mod estimate;
pub mod extender;
pub mod fault_kind;
pub mod fault_marks;
pub mod faults;
pub mod host_model;
pub mod labels;
pub mod matrix;
pub mod measured_topology;
pub mod memo;
pub mod network;
pub mod network_address;
pub mod node_estimate;
pub mod node_health;
pub mod pair_rtt;
pub mod peers;
pub mod placement;
pub mod reachability;
pub mod registry;
pub mod residuals;
pub mod rings;
pub mod score;
pub mod scored;
pub mod scored_pair;
pub mod stats;
pub mod throughput_plan;
pub mod transport;
pub mod verdict;
pub mod window;
pub mod worst_of;

/// Milliseconds since the Unix epoch. All times in the core are this type,
/// passed in by the caller.
pub type UnixMillis = u64;

/// Whether a node runs an agent of its own or is only probed by others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// Runs an agent that reports windows.
    Agent,
    /// Listed in the collector's inventory; probed by every agent.
    Inventory,
}

impl NodeKind {
    /// The lowercase name used on the wire and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Agent => "agent",
            NodeKind::Inventory => "inventory",
        }
    }
}

/// Who a node is and where it sits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeInfo {
    /// Unique node name (the Kubernetes node name on a cluster).
    pub name: String,
    /// The address peers probe.
    pub address: String,
    /// Failure domain that placement keeps a job inside.
    pub zone: String,
    /// Region holding the zone; may be empty.
    pub region: String,
    /// Agent or inventory node.
    pub kind: NodeKind,
}
