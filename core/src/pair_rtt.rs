//! The RTT of any pair of nodes, and what it rests on: the pair's own
//! fresh median where an agent probes it, else the nodes' network
//! coordinates ([`crate::coordinates`]) corrected by what they got wrong on
//! the measured pairs ([`Residuals`]), else the mean of the fresh
//! medians between their zones. What `netaware estimate` and the `Estimate` call
//! answer.

use foldhash::{HashMap, HashMapExt};

use crate::coordinates::{End, Residuals, RttEstimate};
use crate::estimate::Mean;
use crate::scored::ScoredMatrix;

/// What an RTT rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttBasis {
    /// The pair's own fresh median.
    Measured,
    /// The nodes' coordinates.
    Estimated,
    /// The mean of the fresh medians between the two zones.
    ZoneAverage,
    /// Nothing to go on.
    Unknown,
}

/// A pair's RTT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairRtt {
    /// The probing node (index into the matrix's nodes).
    pub src: usize,
    /// The probed node.
    pub dst: usize,
    /// The RTT (ms); `None` when [`RttBasis::Unknown`].
    pub rtt_ms: Option<f64>,
    /// How far it may be off (ms): a measured pair's jitter, an estimate's
    /// own error bound; `None` for zone averages and unknowns.
    pub error_ms: Option<f64>,
    /// What it rests on.
    pub basis: RttBasis,
}

/// Answers pair RTTs from one matrix and its nodes' coordinates; the zone
/// means and residuals are worked out once, at [`RttLookup::new`].
#[derive(Debug)]
pub struct RttLookup<'a> {
    matrix: &'a ScoredMatrix,
    zone_means: HashMap<(usize, usize), f64>,
    residuals: Residuals,
}

/// What the two nodes' coordinates predict, when both have one.
fn predicted(matrix: &ScoredMatrix, src: usize, dst: usize) -> Option<RttEstimate> {
    let nodes = matrix.nodes();
    let (a, b) = (
        nodes.get(src)?.coordinate.as_ref()?,
        nodes.get(dst)?.coordinate.as_ref()?,
    );
    Some(a.estimate(b))
}

impl<'a> RttLookup<'a> {
    /// A lookup over `matrix`.
    pub fn new(matrix: &'a ScoredMatrix) -> Self {
        let mut means: HashMap<(usize, usize), Mean> = HashMap::new();
        let mut residuals = Residuals::new(matrix.zone_count());
        for pair in matrix.pairs() {
            if let (false, Some(rtt), Some(src), Some(dst)) = (
                pair.stale,
                pair.summary.rtt_median_ms,
                matrix.zone_index(pair.src),
                matrix.zone_index(pair.dst),
            ) {
                means.entry((src, dst)).or_default().add(rtt);
                if let Some(predicted) = predicted(matrix, pair.src, pair.dst) {
                    let ends = (
                        End {
                            node: pair.src,
                            zone: src,
                        },
                        End {
                            node: pair.dst,
                            zone: dst,
                        },
                    );
                    residuals.add(ends.0, ends.1, rtt, predicted.rtt_ms);
                }
            }
        }
        let zone_means = means
            .into_iter()
            .filter_map(|(key, mean)| Some((key, mean.value()?)))
            .collect();
        Self {
            matrix,
            zone_means,
            residuals,
        }
    }

    /// The RTT of src -> dst (indices into the matrix's nodes).
    pub fn pair(&self, src: usize, dst: usize) -> PairRtt {
        let answer = |rtt_ms, error_ms, basis| PairRtt {
            src,
            dst,
            rtt_ms,
            error_ms,
            basis,
        };
        if let Some(pair) = self.matrix.pair(src, dst).filter(|p| !p.stale)
            && let Some(rtt) = pair.summary.rtt_median_ms
        {
            return answer(Some(rtt), pair.summary.jitter_ms, RttBasis::Measured);
        }
        let zones = (self.matrix.zone_index(src), self.matrix.zone_index(dst));
        if let (Some(src_zone), Some(dst_zone)) = zones
            && let Some(estimate) = predicted(self.matrix, src, dst)
        {
            let ends = (
                End {
                    node: src,
                    zone: src_zone,
                },
                End {
                    node: dst,
                    zone: dst_zone,
                },
            );
            let estimate = self.residuals.correct(ends.0, ends.1, estimate);
            return answer(
                Some(estimate.rtt_ms),
                Some(estimate.error_ms),
                RttBasis::Estimated,
            );
        }
        if let (Some(src_zone), Some(dst_zone)) = zones
            && let Some(&mean) = self.zone_means.get(&(src_zone, dst_zone))
        {
            return answer(Some(mean), None, RttBasis::ZoneAverage);
        }
        answer(None, None, RttBasis::Unknown)
    }
}
