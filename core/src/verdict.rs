//! Why a node must not take a worker of a job, as a typed value.
//!
//! Placement ([`crate::placement`]) decides these; the extender's filter
//! ([`crate::extender`]) acts on their kind ([`Failure::fails_filter`]), and
//! people read their [`Display`](std::fmt::Display) text. Rewording a
//! message can therefore never change what gets filtered, and programs read
//! the stable [`FailureCode`] instead of parsing prose.

use std::fmt;

use crate::fault_marks::NodeFault;

/// Why a node is not feasible for a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The collector does not know the node.
    UnknownNode,
    /// No fresh measurements of the node.
    Stale,
    /// Loss on a link with a placed worker of the job above the threshold.
    LossToWorker {
        /// Probing end of the lossy link.
        src: String,
        /// Probed end.
        dst: String,
        /// Its loss ratio.
        loss: f64,
        /// The threshold it exceeds.
        threshold: f64,
    },
    /// Goodput with a placed worker far below that worker's median.
    GoodputToWorker {
        /// Sending end of the slow link.
        src: String,
        /// Receiving end.
        dst: String,
        /// Its goodput, bits/s.
        goodput_bps: f64,
        /// The placed worker's median goodput over its links, bits/s.
        median_bps: f64,
        /// The share of the median the link must reach.
        fraction: f64,
    },
    /// The node itself is degraded: see [`Degradation`].
    Degraded(Degradation),
    /// Fault localisation names the node itself (its NIC) as faulty on
    /// the job's network ([`crate::faults`]).
    NodeFault(NodeFault),
    /// Strict mode: the node is outside the zone chosen for the job.
    OutsideZone {
        /// The chosen zone.
        zone: String,
    },
    /// Strict mode: no zone could be chosen, so no node is inside one.
    NoZone,
}

/// How a node shows it is degraded on most of its own links inside its zone
/// (see [`crate::node_health`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Degradation {
    /// Loss above the threshold on most of its zone links.
    Loss {
        /// The loss that at least half of its zone links exceed.
        loss: f64,
        /// Zone-mates it has fresh links with.
        peers: usize,
        /// The threshold it exceeds.
        threshold: f64,
    },
    /// Goodput far below its zone's usual on most of its zone links.
    Goodput {
        /// The goodput that at least half of its zone links reach, bits/s.
        goodput_bps: f64,
        /// The zone's usual goodput, bits/s.
        zone_goodput_bps: f64,
        /// The share of the usual it must reach.
        fraction: f64,
    },
}

/// The stable, machine-readable kind of a [`Failure`]: what the JSON and
/// gRPC answers carry beside the reason text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCode {
    /// [`Failure::UnknownNode`].
    UnknownNode,
    /// [`Failure::Stale`].
    Stale,
    /// [`Failure::LossToWorker`].
    LossToWorker,
    /// [`Failure::GoodputToWorker`].
    GoodputToWorker,
    /// [`Degradation::Loss`].
    DegradedLoss,
    /// [`Degradation::Goodput`].
    DegradedGoodput,
    /// [`Failure::NodeFault`].
    NodeFault,
    /// [`Failure::OutsideZone`].
    OutsideZone,
    /// [`Failure::NoZone`].
    NoZone,
}

impl FailureCode {
    /// Every code, for tests and documentation.
    pub const ALL: [FailureCode; 9] = [
        FailureCode::UnknownNode,
        FailureCode::Stale,
        FailureCode::LossToWorker,
        FailureCode::GoodputToWorker,
        FailureCode::DegradedLoss,
        FailureCode::DegradedGoodput,
        FailureCode::NodeFault,
        FailureCode::OutsideZone,
        FailureCode::NoZone,
    ];

    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::UnknownNode => "unknown_node",
            FailureCode::Stale => "stale",
            FailureCode::LossToWorker => "loss_to_worker",
            FailureCode::GoodputToWorker => "goodput_to_worker",
            FailureCode::DegradedLoss => "degraded_loss",
            FailureCode::DegradedGoodput => "degraded_goodput",
            FailureCode::NodeFault => "node_fault",
            FailureCode::OutsideZone => "outside_zone",
            FailureCode::NoZone => "no_zone",
        }
    }

    /// Whether a node failing for this reason fails the extender's filter.
    ///
    /// Only what was measured (or strict mode) fails a node: a node without
    /// data (unknown to the collector, or stale) stays schedulable with the
    /// lowest score, so that missing measurements never block scheduling.
    pub fn fails_filter(self) -> bool {
        !matches!(self, FailureCode::UnknownNode | FailureCode::Stale)
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Failure {
    /// Its stable kind.
    pub fn code(&self) -> FailureCode {
        match self {
            Failure::UnknownNode => FailureCode::UnknownNode,
            Failure::Stale => FailureCode::Stale,
            Failure::LossToWorker { .. } => FailureCode::LossToWorker,
            Failure::GoodputToWorker { .. } => FailureCode::GoodputToWorker,
            Failure::Degraded(Degradation::Loss { .. }) => FailureCode::DegradedLoss,
            Failure::Degraded(Degradation::Goodput { .. }) => FailureCode::DegradedGoodput,
            Failure::NodeFault(_) => FailureCode::NodeFault,
            Failure::OutsideZone { .. } => FailureCode::OutsideZone,
            Failure::NoZone => FailureCode::NoZone,
        }
    }

    /// Whether the node fails the extender's filter (see
    /// [`FailureCode::fails_filter`]).
    pub fn fails_filter(&self) -> bool {
        self.code().fails_filter()
    }
}

const GBIT: f64 = 1e9;

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::UnknownNode => f.write_str("unknown to the collector"),
            Failure::Stale => f.write_str("stale: no fresh measurements of this node"),
            Failure::LossToWorker {
                src,
                dst,
                loss,
                threshold,
            } => write!(
                f,
                "loss {:.1}% from {src} to {dst} exceeds {:.1}%",
                loss * 100.0,
                threshold * 100.0
            ),
            Failure::GoodputToWorker {
                src,
                dst,
                goodput_bps,
                median_bps,
                fraction,
            } => write!(
                f,
                "goodput {:.3} Gbit/s from {src} to {dst} is below {:.0}% of the placed worker's median {:.3} Gbit/s",
                goodput_bps / GBIT,
                fraction * 100.0,
                median_bps / GBIT
            ),
            Failure::Degraded(degradation) => write!(f, "degraded: {degradation}"),
            Failure::NodeFault(fault) => write!(
                f,
                "network fault: the node {}",
                fault.metric.judged(fault.value, fault.baseline)
            ),
            Failure::OutsideZone { zone } => write!(f, "outside the chosen zone {zone} (strict)"),
            Failure::NoZone => f.write_str("no zone can be chosen (strict)"),
        }
    }
}

impl fmt::Display for Degradation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Degradation::Loss {
                loss,
                peers,
                threshold,
            } => write!(
                f,
                "loss {:.1}% on most of its links with {peers} zone-mates exceeds {:.1}%",
                loss * 100.0,
                threshold * 100.0
            ),
            Degradation::Goodput {
                goodput_bps,
                zone_goodput_bps,
                fraction,
            } => write!(
                f,
                "goodput {:.3} Gbit/s on most of its zone links is below {:.0}% of its zone's usual {:.3} Gbit/s",
                goodput_bps / GBIT,
                fraction * 100.0,
                zone_goodput_bps / GBIT
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault_kind::FaultMetric;

    fn one_of_each() -> Vec<Failure> {
        vec![
            Failure::UnknownNode,
            Failure::Stale,
            Failure::LossToWorker {
                src: "a1".into(),
                dst: "a3".into(),
                loss: 0.2,
                threshold: 0.05,
            },
            Failure::GoodputToWorker {
                src: "b1".into(),
                dst: "b3".into(),
                goodput_bps: 0.5e9,
                median_bps: 10e9,
                fraction: 0.2,
            },
            Failure::Degraded(Degradation::Loss {
                loss: 0.1,
                peers: 3,
                threshold: 0.05,
            }),
            Failure::Degraded(Degradation::Goodput {
                goodput_bps: 1e9,
                zone_goodput_bps: 10e9,
                fraction: 0.2,
            }),
            Failure::NodeFault(NodeFault {
                metric: FaultMetric::Loss,
                value: 0.03,
                baseline: 0.001,
            }),
            Failure::OutsideZone { zone: "b".into() },
            Failure::NoZone,
        ]
    }

    #[test]
    fn every_code_is_reached_and_only_missing_data_passes_the_filter() {
        let failures = one_of_each();
        let codes: Vec<FailureCode> = failures.iter().map(Failure::code).collect();
        assert_eq!(codes, FailureCode::ALL);
        let passing: Vec<FailureCode> = failures
            .iter()
            .filter(|f| !f.fails_filter())
            .map(Failure::code)
            .collect();
        assert_eq!(passing, [FailureCode::UnknownNode, FailureCode::Stale]);
    }

    #[test]
    fn codes_are_distinct_and_match_their_json() {
        let names: std::collections::BTreeSet<&str> =
            FailureCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), FailureCode::ALL.len());
        for code in FailureCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{code}\""));
        }
    }

    #[test]
    fn reasons_say_what_was_measured() {
        let text: Vec<String> = one_of_each().iter().map(ToString::to_string).collect();
        assert_eq!(text[2], "loss 20.0% from a1 to a3 exceeds 5.0%");
        assert!(text[3].starts_with("goodput 0.500 Gbit/s from b1 to b3"));
        assert!(text[3].ends_with("median 10.000 Gbit/s"));
        assert!(text[4].starts_with("degraded: loss 10.0% on most of its links with 3"));
        assert!(text[5].contains("usual 10.000 Gbit/s"));
        assert_eq!(text[6], "network fault: the node loses 3.00% (usual 0.10%)");
        assert_eq!(text[7], "outside the chosen zone b (strict)");
    }
}
