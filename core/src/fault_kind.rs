//! The words of fault localisation that placement and the wire share
//! with it: what a fault is about ([`FaultKind`]) and what shows it
//! ([`FaultMetric`]). A leaf, so that placement can read faults without
//! depending on how they are found ([`crate::faults`]).

use std::fmt;

/// What a fault is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// A node: its NIC, its cable, its host (bad on most of its links).
    Node,
    /// The links leaving a block (a rack's uplink): its inside is clean.
    BlockUplink,
    /// The link between two zones.
    ZoneLink,
    /// One path between two nodes.
    Pair,
    /// A node whose zone label disagrees with its links.
    ZoneLabel,
}

impl FaultKind {
    /// The name used in JSON, metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Node => "node",
            Self::BlockUplink => "block_uplink",
            Self::ZoneLink => "zone_link",
            Self::Pair => "pair",
            Self::ZoneLabel => "zone_label",
        }
    }

    /// The kind named `name` (as [`FaultKind::as_str`] gives it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Every kind, in order.
    pub const ALL: [Self; 5] = [
        Self::Node,
        Self::BlockUplink,
        Self::ZoneLink,
        Self::Pair,
        Self::ZoneLabel,
    ];
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a fault is measured by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultMetric {
    /// Probes lost: the level is a loss ratio.
    Loss,
    /// RTT above its class's: the level is added milliseconds.
    Delay,
    /// RTT to the node's labelled zone against its RTT to the zone it
    /// measures like (zone labels).
    Rtt,
}

impl FaultMetric {
    /// The name used in JSON, metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loss => "loss",
            Self::Delay => "delay",
            Self::Rtt => "rtt",
        }
    }

    /// The metric named `name` (as [`FaultMetric::as_str`] gives it).
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Loss, Self::Delay, Self::Rtt]
            .into_iter()
            .find(|metric| metric.as_str() == name)
    }
}

impl fmt::Display for FaultMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
