//! One directed pair of the scored matrix: its figures, the terms behind
//! its quality, and the quality itself. Its own module because both the
//! snapshot that holds pairs and the node health worked out from them read
//! it.

use crate::matrix::PairSummary;
use crate::score::{Source, Terms};

/// A directed pair, scored.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredPair {
    /// Index of the probing node in [`crate::scored::ScoredMatrix::nodes`].
    pub src: usize,
    /// Index of the probed node.
    pub dst: usize,
    /// The figures over the recent windows.
    pub summary: PairSummary,
    /// Time since the newest window; `None` when never measured.
    pub age_ms: Option<u64>,
    /// No fresh window (or the probing agent is stale).
    pub stale: bool,
    /// The terms behind the quality.
    pub terms: Terms,
    /// q(src, dst) in [0, 1].
    pub quality: f64,
}

impl ScoredPair {
    /// Whether the probed terms (delay or loss) had to fall back. Throughput
    /// is left out: it is measured far more rarely, and its own source says
    /// when it is missing.
    pub fn is_fallback(&self) -> bool {
        self.terms.delay_source != Source::Measured || self.terms.loss_source != Source::Measured
    }

    /// The node at the other end of this pair from `node`.
    pub fn other_end(&self, node: usize) -> usize {
        if self.src == node { self.dst } else { self.src }
    }

    /// Its goodput (bits/s), when measured and fresh.
    pub fn fresh_goodput(&self) -> Option<f64> {
        (self.terms.throughput_source == Source::Measured)
            .then_some(self.summary.throughput.as_ref()?.bps)
    }
}
