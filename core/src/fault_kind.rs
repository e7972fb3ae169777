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
    /// Throughput tests' goodput below its class's: the level is the
    /// goodput (bit/s) the component leaves.
    Goodput,
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
            Self::Goodput => "goodput",
            Self::Rtt => "rtt",
        }
    }

    /// The metric named `name` (as [`FaultMetric::as_str`] gives it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|metric| metric.as_str() == name)
    }

    /// Every metric, in order.
    pub const ALL: [Self; 4] = [Self::Loss, Self::Delay, Self::Goodput, Self::Rtt];

    /// A level or baseline of this metric, for people: `1.50%`,
    /// `0.250 ms`, `2.30 Gbit/s`.
    pub fn figure(self, value: f64) -> String {
        match self {
            Self::Loss => format!("{:.2}%", value * 100.0),
            Self::Delay | Self::Rtt => format!("{value:.3} ms"),
            Self::Goodput if value >= 1e9 => format!("{:.2} Gbit/s", value / 1e9),
            Self::Goodput => format!("{:.0} Mbit/s", value / 1e6),
        }
    }

    /// What a component at `value` does to the traffic over it, for
    /// people: "loses 1.50%", "adds 0.250 ms", "carries only 2.30 Gbit/s".
    pub fn effect(self, value: f64) -> String {
        let figure = self.figure(value);
        match self {
            Self::Loss => format!("loses {figure}"),
            Self::Delay => format!("adds {figure}"),
            Self::Goodput => format!("carries only {figure}"),
            Self::Rtt => format!("measures {figure} to its labelled zone"),
        }
    }

    /// [`FaultMetric::effect`] beside what is usual: "loses 1.50% (usual
    /// 0.05%)".
    pub fn judged(self, value: f64, baseline: f64) -> String {
        let usual = self.figure(baseline);
        match self {
            Self::Rtt => format!("{} (its own {usual})", self.effect(value)),
            _ => format!("{} (usual {usual})", self.effect(value)),
        }
    }
}

impl fmt::Display for FaultMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for kind in FaultKind::ALL {
            assert_eq!(FaultKind::from_name(kind.as_str()), Some(kind));
        }
        for metric in FaultMetric::ALL {
            assert_eq!(FaultMetric::from_name(metric.as_str()), Some(metric));
        }
        assert_eq!(FaultMetric::from_name("jitter"), None);
    }

    #[test]
    fn levels_read_in_their_units() {
        assert_eq!(FaultMetric::Loss.effect(0.015), "loses 1.50%");
        assert_eq!(FaultMetric::Delay.effect(0.25), "adds 0.250 ms");
        assert_eq!(
            FaultMetric::Goodput.effect(2.3e9),
            "carries only 2.30 Gbit/s"
        );
        assert_eq!(FaultMetric::Goodput.figure(450e6), "450 Mbit/s");
        assert_eq!(
            FaultMetric::Delay.judged(0.3, 0.1),
            "adds 0.300 ms (usual 0.100 ms)"
        );
    }
}
