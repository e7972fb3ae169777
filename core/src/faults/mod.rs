//! Fault localisation: which part of the network explains a network's bad
//! pairs (a node's NIC, a block's uplink, the link between two zones, one
//! path), and which node's zone label disagrees with what its links
//! measure. Pure: one network's figures and blocks in, findings out; the
//! collector runs it on every network's matrix and [`tracker`] adds time.
//!
//! # The method
//!
//! Every measured directed pair is a *link* with its probes sent and lost,
//! its median RTT and its last fresh throughput test's goodput. A *component* covers the links whose traffic
//! crosses it: a node covers every link to or from it; a block's uplink the
//! links from its nodes to nodes outside it; a zone link the links between
//! two zones; a pair its two directions. A link's loss is
//! `1 - (1 - b) * prod(1 - l_c)` over the components `c` on it (`b`: the
//! network's background loss), its RTT inflation the sum of theirs, its
//! goodput its class's times the product of what each leaves.
//!
//! [`select`] explains the links by the fewest components, greedily (as
//! a set cover, weighted by likelihood): it adds the component whose level
//! raises the likelihood of what was measured the most (binomial for loss,
//! Gaussian over each class's noise for delay and log goodput), refits
//! every chosen level, and stops when no component gains
//! [`FaultConfig::loss_gain`] (or `delay_gain`, `goodput_gain`) or would be
//! below the smallest fault worth naming; then it
//! drops every chosen component that the others explain without it. A
//! node's bad NIC raises the likelihood more as a node (all its links)
//! than as its block's uplink (which also covers its clean block-mates);
//! a bad uplink more as the uplink than as any one of its nodes (whose
//! links inside the block are clean); one bad path more as that pair than
//! as either end. Voting (every node on a bad pair is suspect) and per-node
//! thresholds cannot tell these apart: EVALUATION.md, "Fault localisation",
//! compares them on a simulated fabric.
//!
//! [`labels`] checks each node's zone label against its links: a node
//! whose RTTs to its labelled zone are those between zones, and whose RTTs
//! to another zone are that zone's own, is named as measuring like it. Its
//! links are left out of the delay pass, where they would read as
//! inflation.
//!
//! Delay and goodput are judged against each class of link (a zone pair,
//! in one block or across blocks; [`classes`]): a zone link's delay is its
//! class's, so a slow zone link cannot be told from a far zone, and is not
//! named for either. Nor is one pair for goodput: it holds one test's
//! figure at a time.

pub mod classes;
pub mod input;
pub mod labels;
pub mod round;
pub mod select;
pub mod tracker;

pub use crate::fault_kind::{FaultKind, FaultMetric};
pub use input::{FaultInput, FaultLink, FaultNode, LinkGoodput};

/// A part of the network, by index into a [`FaultInput`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// A node.
    Node(usize),
    /// A block's uplink, by block index.
    BlockUplink(usize),
    /// The link between two zones, lower index first.
    ZoneLink(usize, usize),
    /// The path between two nodes, both directions, lower index first.
    Pair(usize, usize),
}

impl Component {
    /// Its kind.
    pub fn kind(self) -> FaultKind {
        match self {
            Self::Node(_) => FaultKind::Node,
            Self::BlockUplink(_) => FaultKind::BlockUplink,
            Self::ZoneLink(..) => FaultKind::ZoneLink,
            Self::Pair(..) => FaultKind::Pair,
        }
    }
}

/// One link that shows a fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// The probing node (index).
    pub src: usize,
    /// The probed node (index).
    pub dst: usize,
    /// Its loss ratio, RTT (ms) or goodput (bit/s).
    pub value: f64,
    /// What it would be without the fault: the background loss, or its
    /// class's RTT or goodput.
    pub baseline: f64,
}

/// A fault found in one look.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What it is about.
    pub subject: Subject,
    /// What shows it.
    pub metric: FaultMetric,
    /// How bad: the component's loss ratio, its added delay (ms), the
    /// goodput it leaves (bit/s), or for a zone label the node's median
    /// RTT (ms) to its labelled zone.
    pub value: f64,
    /// What is usual: the background loss, the class's RTT (ms) or goodput
    /// (bit/s), or the labelled zone's own RTT (ms).
    pub baseline: f64,
    /// In [0, 1]: `1 - exp(-gain / threshold)` for loss, delay and goodput (0.63
    /// at the threshold), the share of the node's links that agree for a
    /// zone label.
    pub confidence: f64,
    /// Its worst links, at most [`MAX_EVIDENCE`].
    pub evidence: Vec<Evidence>,
}

/// Who a finding names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    /// A component.
    Component(Component),
    /// A node whose zone label is wrong, and the zone it measures like.
    ZoneLabel {
        /// The node (index).
        node: usize,
        /// The zone its links say it is in (index).
        measures_like: usize,
    },
}

impl Subject {
    /// Its kind.
    pub fn kind(self) -> FaultKind {
        match self {
            Self::Component(component) => component.kind(),
            Self::ZoneLabel { .. } => FaultKind::ZoneLabel,
        }
    }
}

/// Most links kept as a finding's evidence.
pub const MAX_EVIDENCE: usize = 8;

/// How faults are found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultConfig {
    /// The least loss ratio a component is named for.
    pub min_loss: f64,
    /// The least added RTT (ms) a component is named for.
    pub min_delay_ms: f64,
    /// The log-likelihood a loss fault must add to be named.
    pub loss_gain: f64,
    /// The log-likelihood a delay fault must add to be named.
    pub delay_gain: f64,
    /// The least share of its class's goodput a component must take away
    /// to be named for goodput.
    pub min_goodput_drop: f64,
    /// The log-likelihood a goodput fault must add to be named.
    pub goodput_gain: f64,
    /// Throughput tests older than this (ms) are left out: a fault that
    /// starts must outnumber a node's tests from before it, and tests are
    /// minutes apart (at the default budget, one per node every 200 s).
    pub goodput_window_ms: u64,
    /// Fewest tests a component is named for goodput on: one slow test is
    /// as likely a busy link as a bad one.
    pub min_goodput_tests: usize,
    /// Most components named per network and metric.
    pub max_faults: usize,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            min_loss: 0.005,
            min_delay_ms: 0.2,
            loss_gain: 25.0,
            delay_gain: 40.0,
            min_goodput_drop: 0.25,
            goodput_gain: 60.0,
            goodput_window_ms: 15 * 60 * 1_000,
            min_goodput_tests: 3,
            max_faults: 64,
        }
    }
}

/// Every fault `input` shows, zone labels first, then loss, delay and
/// goodput.
pub fn localise(input: &FaultInput, config: &FaultConfig) -> Vec<Finding> {
    let mislabelled = labels::check(input);
    let mut findings: Vec<Finding> = mislabelled.clone();
    let relabelled: Vec<usize> = mislabelled
        .iter()
        .filter_map(|f| match f.subject {
            Subject::ZoneLabel { node, .. } => Some(node),
            Subject::Component(_) => None,
        })
        .collect();
    findings.extend(select::loss_faults(input, config));
    findings.extend(classes::delay_faults(input, config, &relabelled));
    findings.extend(classes::goodput_faults(input, config, &relabelled));
    findings
}

#[cfg(test)]
mod tests;
