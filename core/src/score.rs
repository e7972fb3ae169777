//! The score model: how the figures of one directed pair become a quality
//! q(src, dst) in [0, 1].
//!
//! Three terms, each in [0, 1] and each normalised against an explicit,
//! configurable reference (never against whatever else is in the matrix):
//!
//! - delay: `ref / (ref + median + jitter)`: 1 for an instant link, 0.5 when
//!   median RTT plus jitter equals `delay_reference_ms`, towards 0 beyond;
//! - loss: `1 - min(loss / loss_ceiling, 1)`: 1 without loss, 0 at or above
//!   the ceiling;
//! - throughput: `min(goodput / throughput_reference_bps, 1)`.
//!
//! The quality is the weighted sum of the terms (weights normalised to sum 1),
//! except that a pair that answered none of its probes is dead and scores 0
//! whatever else is known. Missing or stale terms are filled in by
//! [`crate::scored`] from the zone pair's average less a penalty, and a
//! pair nobody probes is estimated from its ends ([`crate::node_estimate`])
//! less a share of it: never as good as fresh data.

use crate::UnixMillis;
use crate::matrix::PairSummary;
use crate::rings::seven_digits;

/// Relative weights of the three terms.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Weights {
    /// Weight of the delay term.
    pub delay: f64,
    /// Weight of the loss term.
    pub loss: f64,
    /// Weight of the throughput term.
    pub throughput: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            delay: 0.4,
            loss: 0.3,
            throughput: 0.3,
        }
    }
}

/// Everything the score model can be tuned with.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScoreConfig {
    /// Term weights; normalised to sum 1 by [`ScoreConfig::validated`].
    pub weights: Weights,
    /// RTT (median plus jitter, ms) at which the delay term is 0.5.
    pub delay_reference_ms: f64,
    /// Loss ratio at and above which the loss term is 0.
    pub loss_ceiling: f64,
    /// Goodput (bit/s) at and above which the throughput term is 1.
    pub throughput_reference_bps: f64,
    /// Subtracted from a zone-pair average used in place of missing data.
    pub fallback_penalty: f64,
    /// Goodput older than this no longer counts as fresh.
    pub throughput_max_age_ms: u64,
}

impl Default for ScoreConfig {
    fn default() -> Self {
        Self {
            weights: Weights::default(),
            delay_reference_ms: 1.0,
            loss_ceiling: 0.05,
            throughput_reference_bps: 10e9,
            fallback_penalty: 0.25,
            throughput_max_age_ms: 3_600_000,
        }
    }
}

/// A score configuration that makes no sense.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScoreConfigError {
    /// A weight is negative or not finite.
    #[error("weight {name} must be a finite number >= 0, got {value}")]
    BadWeight {
        /// Which weight.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// All weights are zero.
    #[error("at least one weight must be above 0")]
    AllWeightsZero,
    /// A reference or penalty out of its range.
    #[error("{name} must be {range}, got {value}")]
    OutOfRange {
        /// Which setting.
        name: &'static str,
        /// The allowed range, in words.
        range: &'static str,
        /// Its value.
        value: f64,
    },
}

impl ScoreConfig {
    /// Checks the settings and normalises the weights to sum 1.
    pub fn validated(self) -> Result<Self, ScoreConfigError> {
        let Weights {
            delay,
            loss,
            throughput,
        } = self.weights;
        for (name, value) in [("delay", delay), ("loss", loss), ("throughput", throughput)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(ScoreConfigError::BadWeight { name, value });
            }
        }
        let sum = delay + loss + throughput;
        if sum <= 0.0 {
            return Err(ScoreConfigError::AllWeightsZero);
        }
        let positive = |name, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(ScoreConfigError::OutOfRange {
                    name,
                    range: "a finite number > 0",
                    value,
                })
            }
        };
        positive("delay_reference_ms", self.delay_reference_ms)?;
        positive("loss_ceiling", self.loss_ceiling)?;
        positive("throughput_reference_bps", self.throughput_reference_bps)?;
        if !(0.0..=1.0).contains(&self.fallback_penalty) {
            return Err(ScoreConfigError::OutOfRange {
                name: "fallback_penalty",
                range: "between 0 and 1",
                value: self.fallback_penalty,
            });
        }
        Ok(Self {
            weights: Weights {
                delay: delay / sum,
                loss: loss / sum,
                throughput: throughput / sum,
            },
            ..self
        })
    }

    /// The delay term for a median RTT and jitter in ms.
    pub fn delay_term(&self, median_ms: f64, jitter_ms: f64) -> f64 {
        self.fallback().delay_term(median_ms + jitter_ms)
    }

    /// The loss term for a loss ratio.
    pub fn loss_term(&self, loss_ratio: f64) -> f64 {
        self.fallback().loss_term(loss_ratio)
    }

    /// The throughput term for a goodput in bit/s.
    pub fn throughput_term(&self, bps: f64) -> f64 {
        self.fallback().throughput_term(bps)
    }

    /// The quality of a pair from its three terms.
    pub fn quality(&self, terms: &Terms) -> f64 {
        self.fallback().quality(terms)
    }

    /// What scoring an unmeasured pair needs of this configuration.
    pub fn fallback(&self) -> Fallback {
        Fallback {
            weights: self.weights,
            penalty: self.fallback_penalty,
            delay_reference_ms: self.delay_reference_ms,
            loss_ceiling: self.loss_ceiling,
            throughput_reference_bps: self.throughput_reference_bps,
        }
    }
}

/// The share of [`Fallback::penalty`] that a term estimated from a pair's
/// ends pays (a zone average pays all of it). Such a term rests on what
/// both nodes' own links measured, not on nobody's measure of the pair; at
/// the whole penalty, a measured pair with twice the RTT of a good one
/// would beat every estimate of the good one, and placement would favour
/// whichever pairs the rotating peer sets happen to probe now.
pub const ESTIMATE_PENALTY_SHARE: f64 = 0.5;

/// What a pair is scored with: the terms' references and weights, and the
/// penalty an unmeasured pair's estimated terms pay. Small and on the wire,
/// so that a consumer of the collector's matrix estimates unmeasured pairs
/// exactly as the collector does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fallback {
    /// The weights of the terms.
    pub weights: Weights,
    /// Subtracted from each estimated or zone-average term.
    pub penalty: f64,
    /// RTT (median plus jitter, ms) at which the delay term is 0.5.
    pub delay_reference_ms: f64,
    /// Loss ratio at and above which the loss term is 0.
    pub loss_ceiling: f64,
    /// Goodput (bit/s) at and above which the throughput term is 1.
    pub throughput_reference_bps: f64,
}

impl Default for Fallback {
    fn default() -> Self {
        ScoreConfig::default().fallback()
    }
}

impl Fallback {
    /// The delay term for an RTT (median plus jitter, ms).
    pub fn delay_term(&self, effective_ms: f64) -> f64 {
        let effective = effective_ms.max(0.0);
        self.delay_reference_ms / (self.delay_reference_ms + effective)
    }

    /// The loss term for a loss ratio.
    pub fn loss_term(&self, loss_ratio: f64) -> f64 {
        1.0 - (loss_ratio.max(0.0) / self.loss_ceiling).min(1.0)
    }

    /// The throughput term for a goodput in bit/s.
    pub fn throughput_term(&self, bps: f64) -> f64 {
        (bps.max(0.0) / self.throughput_reference_bps).min(1.0)
    }

    /// An estimated term: what `term` gives less [`ESTIMATE_PENALTY_SHARE`]
    /// of the penalty, so that an estimate never beats a measured pair of
    /// the same figures.
    pub fn estimated(&self, term: f64) -> f64 {
        (term - ESTIMATE_PENALTY_SHARE * self.penalty).max(0.0)
    }

    /// The quality of a pair from its three terms.
    pub fn quality(&self, terms: &Terms) -> f64 {
        if terms.dead {
            return 0.0;
        }
        let w = self.weights;
        let q = w.delay * terms.delay + w.loss * terms.loss + w.throughput * terms.throughput;
        q.clamp(0.0, 1.0)
    }
}

/// Where a term's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Fresh measurements of the pair itself.
    Measured,
    /// Estimated from what is known of each end (its network coordinates,
    /// its own links' loss and goodput) less the penalty: nobody probes the
    /// pair, or its data went stale.
    Estimated,
    /// The zone pair's average less the penalty: the pair had no fresh data.
    ZoneAverage,
    /// Nothing to go on: the term is 0.
    Unknown,
}

/// The three terms of a pair and their sources.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Terms {
    /// Delay term in [0, 1].
    pub delay: f64,
    /// Loss term in [0, 1].
    pub loss: f64,
    /// Throughput term in [0, 1].
    pub throughput: f64,
    /// Source of the delay term.
    pub delay_source: Source,
    /// Source of the loss term.
    pub loss_source: Source,
    /// Source of the throughput term.
    pub throughput_source: Source,
    /// The pair answered none of its fresh probes.
    pub dead: bool,
}

impl Terms {
    /// Terms from each one's value and source, each kept to seven
    /// significant digits (as the figures are): a score is not known finer,
    /// and a term so kept goes on a watch stream in 4 bytes rather than 9.
    // Inlined on purpose: a decision builds terms for every estimate it
    // reads, and left to the compiler, whether it is inlined moved with
    // unrelated changes elsewhere in the crate (2% of a decision's
    // instructions, counted by callgrind).
    #[inline]
    pub fn of(
        (delay, delay_source): (f64, Source),
        (loss, loss_source): (f64, Source),
        (throughput, throughput_source): (f64, Source),
        dead: bool,
    ) -> Self {
        Self {
            delay: seven_digits(delay),
            loss: seven_digits(loss),
            throughput: seven_digits(throughput),
            delay_source,
            loss_source,
            throughput_source,
            dead,
        }
    }
}

/// The terms that a pair's own fresh figures give; `None` where there are
/// none. `rtt_fresh` says whether the pair's windows are recent enough.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MeasuredTerms {
    /// Delay term, from fresh windows with replies.
    pub delay: Option<f64>,
    /// Loss term, from fresh windows with probes.
    pub loss: Option<f64>,
    /// Throughput term, from a goodput younger than the maximum age.
    pub throughput: Option<f64>,
    /// Fresh probes were sent and none came back.
    pub dead: bool,
}

impl ScoreConfig {
    /// The terms that the pair's own data supports.
    pub fn measured_terms(
        &self,
        summary: &PairSummary,
        rtt_fresh: bool,
        now: UnixMillis,
    ) -> MeasuredTerms {
        let mut terms = MeasuredTerms::default();
        if rtt_fresh {
            terms.loss = summary.loss_ratio.map(|loss| self.loss_term(loss));
            terms.dead = summary.loss_ratio == Some(1.0);
            terms.delay = if terms.dead {
                Some(0.0)
            } else {
                summary
                    .rtt_median_ms
                    .map(|median| self.delay_term(median, summary.jitter_ms.unwrap_or(0.0)))
            };
        }
        terms.throughput = summary
            .throughput
            .filter(|tp| now.saturating_sub(tp.at) <= self.throughput_max_age_ms)
            .map(|tp| self.throughput_term(tp.bps));
        terms
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn measured(config: &ScoreConfig, median: f64, loss: f64) -> f64 {
        let summary = PairSummary {
            rtt_median_ms: Some(median),
            jitter_ms: Some(0.0),
            loss_ratio: Some(loss),
            samples: 10,
            ..PairSummary::default()
        };
        let m = config.measured_terms(&summary, true, 0);
        config.quality(&Terms {
            delay: m.delay.unwrap(),
            loss: m.loss.unwrap(),
            throughput: 0.0,
            delay_source: Source::Measured,
            loss_source: Source::Measured,
            throughput_source: Source::Unknown,
            dead: m.dead,
        })
    }

    #[test]
    fn terms_are_kept_to_seven_digits() {
        let third = (1.0 / 3.0, Source::Measured);
        let terms = Terms::of(third, (0.25, Source::Measured), third, false);
        assert_eq!(terms.delay, 0.333_333_3);
        assert_eq!(terms.loss, 0.25);
    }

    #[test]
    fn terms_hit_their_documented_points() {
        let config = ScoreConfig::default();
        assert_eq!(config.delay_term(0.0, 0.0), 1.0);
        assert_eq!(config.delay_term(0.5, 0.5), 0.5);
        assert_eq!(config.loss_term(0.0), 1.0);
        assert!((config.loss_term(0.025) - 0.5).abs() < 1e-12);
        assert_eq!(config.loss_term(0.5), 0.0);
        assert_eq!(config.throughput_term(5e9), 0.5);
        assert_eq!(config.throughput_term(50e9), 1.0);
    }

    #[test]
    fn a_dead_pair_scores_zero() {
        let config = ScoreConfig::default();
        assert_eq!(measured(&config, 0.1, 1.0), 0.0);
    }

    #[test]
    fn weights_are_checked_and_normalised() {
        let config = ScoreConfig {
            weights: Weights {
                delay: 2.0,
                loss: 1.0,
                throughput: 1.0,
            },
            ..ScoreConfig::default()
        }
        .validated()
        .unwrap();
        assert_eq!(
            config.weights,
            Weights {
                delay: 0.5,
                loss: 0.25,
                throughput: 0.25
            }
        );
        let zero = Weights {
            delay: 0.0,
            loss: 0.0,
            throughput: 0.0,
        };
        assert_eq!(
            ScoreConfig {
                weights: zero,
                ..ScoreConfig::default()
            }
            .validated(),
            Err(ScoreConfigError::AllWeightsZero)
        );
        let nan = Weights {
            delay: f64::NAN,
            ..Weights::default()
        };
        assert!(
            ScoreConfig {
                weights: nan,
                ..ScoreConfig::default()
            }
            .validated()
            .is_err()
        );
        let penalty = ScoreConfig {
            fallback_penalty: 1.5,
            ..ScoreConfig::default()
        };
        assert!(penalty.validated().is_err());
    }

    #[test]
    fn weights_change_the_order_as_documented() {
        // Pair A: fast but lossy. Pair B: slow but clean.
        let (a, b) = ((0.1, 0.02), (5.0, 0.0));
        let delay_first = ScoreConfig {
            weights: Weights {
                delay: 0.9,
                loss: 0.1,
                throughput: 0.0,
            },
            ..ScoreConfig::default()
        }
        .validated()
        .unwrap();
        let loss_first = ScoreConfig {
            weights: Weights {
                delay: 0.1,
                loss: 0.9,
                throughput: 0.0,
            },
            ..ScoreConfig::default()
        }
        .validated()
        .unwrap();
        assert!(measured(&delay_first, a.0, a.1) > measured(&delay_first, b.0, b.1));
        assert!(measured(&loss_first, a.0, a.1) < measured(&loss_first, b.0, b.1));
    }

    #[test]
    fn stale_windows_give_no_measured_terms() {
        let config = ScoreConfig::default();
        let summary = PairSummary {
            rtt_median_ms: Some(0.1),
            loss_ratio: Some(0.0),
            samples: 10,
            ..PairSummary::default()
        };
        let terms = config.measured_terms(&summary, false, 0);
        assert_eq!(terms.delay, None);
        assert_eq!(terms.loss, None);
    }

    proptest! {
        #[test]
        fn more_delay_or_loss_never_raises_quality(
            median in 0.0f64..1000.0, extra_delay in 0.0f64..1000.0,
            loss in 0.0f64..0.99, extra_loss in 0.0f64..1.0,
            delay_w in 0.0f64..1.0, loss_w in 0.0f64..1.0, tp_w in 0.01f64..1.0,
        ) {
            let config = ScoreConfig {
                weights: Weights { delay: delay_w, loss: loss_w, throughput: tp_w },
                ..ScoreConfig::default()
            }.validated().unwrap();
            let base = measured(&config, median, loss);
            let slower = measured(&config, median + extra_delay, loss);
            let lossier = measured(&config, median, (loss + extra_loss).min(1.0));
            prop_assert!(slower <= base);
            prop_assert!(lossier <= base);
            prop_assert!((0.0..=1.0).contains(&base));
        }
    }
}
