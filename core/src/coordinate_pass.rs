//! One pass of the network coordinates over a scored matrix: what the
//! collector runs every `--coordinate-interval`, and what the simulator's
//! fleet runs between its views, so that both move the coordinates the same
//! way.
//!
//! A pass takes the fresh measured medians of the matrix in an order of its
//! own (one order for every pass would favour the pairs that come last),
//! forgets the coordinates of nodes the matrix no longer holds, judges how
//! well the coordinates predicted each median before it moves them (the
//! prediction corrected by the residuals of the measured pairs, as an
//! estimate answers: how well estimates predict the pairs nobody probes),
//! and then moves them by every median.

use std::collections::HashSet;

use crate::coordinates::{Coordinates, End};
use crate::residuals::Residuals;
use crate::scored::ScoredMatrix;

/// How far off the coordinates' corrected predictions of the measured
/// pairs were before a pass moved them: |predicted - measured| / measured,
/// one figure per pair that had a prediction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassErrors {
    /// Pairs inside one zone.
    pub intra_zone: Vec<f64>,
    /// Pairs between two zones.
    pub inter_zone: Vec<f64>,
}

/// A fresh measured median and the pair's ends (node and zone indices of
/// the matrix; names are looked up once per node, not per pair: a pass
/// reads 320,000 pairs at 5,000 nodes).
#[derive(Debug, Clone)]
struct Sample {
    ends: (End, End),
    rtt_ms: f64,
}

/// What a pass reads of a matrix: its fresh measured medians, copied out
/// so that the matrix (a hundred MiB and more at 5,000 nodes) need not be
/// held while passes run, and so that several passes can read one matrix.
#[derive(Debug, Clone, Default)]
pub struct PassInput {
    names: Vec<String>,
    zones: usize,
    samples: Vec<Sample>,
}

impl PassInput {
    /// The fresh measured medians of `scored`.
    pub fn of(scored: &ScoredMatrix) -> Self {
        let samples = scored
            .pairs()
            .iter()
            .filter(|pair| !pair.stale)
            .filter_map(|pair| {
                let rtt_ms = pair.summary.rtt_median_ms?;
                let src = End {
                    node: pair.src,
                    zone: scored.zone_index(pair.src)?,
                };
                let dst = End {
                    node: pair.dst,
                    zone: scored.zone_index(pair.dst)?,
                };
                Some(Sample {
                    ends: (src, dst),
                    rtt_ms,
                })
            })
            .collect();
        Self {
            names: scored
                .nodes()
                .iter()
                .map(|node| node.info.name.clone())
                .collect(),
            zones: scored.zone_count(),
            samples,
        }
    }

    /// Fresh medians given directly: `names` by node index, `zones`
    /// zones, each median with its ends (for callers, such as the
    /// evaluation's fabric, that hold medians rather than a scored matrix).
    pub fn of_medians(names: Vec<String>, zones: usize, medians: &[(End, End, f64)]) -> Self {
        Self {
            names,
            zones,
            samples: medians
                .iter()
                .filter(|(src, dst, _)| src.zone < zones && dst.zone < zones)
                .map(|&(src, dst, rtt_ms)| Sample {
                    ends: (src, dst),
                    rtt_ms,
                })
                .collect(),
        }
    }

    /// The samples in the order of pass number `pass`.
    fn in_order(&self, pass: u64) -> Vec<&Sample> {
        let mut keyed: Vec<(u64, &Sample)> = self
            .samples
            .iter()
            .map(|s| (shuffle_key(pass, s.ends.0.node, s.ends.1.node), s))
            .collect();
        keyed.sort_unstable_by_key(|(key, _)| *key);
        keyed.into_iter().map(|(_, s)| s).collect()
    }
}

/// Runs pass number `pass` over `input`: forgets departed nodes, judges,
/// then moves `coordinates` by every median, in an order of the pass's
/// own. Returns the errors judged.
pub fn run(coordinates: &mut Coordinates, input: &PassInput, pass: u64) -> PassErrors {
    let known: HashSet<&str> = input.names.iter().map(String::as_str).collect();
    coordinates.retain(|name| known.contains(name));
    let samples = input.in_order(pass);
    let names = |sample: &Sample| {
        (
            input.names[sample.ends.0.node].as_str(),
            input.names[sample.ends.1.node].as_str(),
        )
    };
    let predicted: Vec<_> = samples
        .iter()
        .map(|sample| {
            let (src, dst) = names(sample);
            coordinates.estimate(src, dst)
        })
        .collect();
    let mut residuals = Residuals::new(input.zones);
    for (sample, predicted) in samples.iter().zip(&predicted) {
        if let Some(predicted) = predicted {
            residuals.add(
                sample.ends.0,
                sample.ends.1,
                sample.rtt_ms,
                predicted.rtt_ms,
            );
        }
    }
    let mut errors = PassErrors::default();
    for (sample, predicted) in samples.iter().zip(predicted) {
        if let Some(predicted) = predicted {
            let (estimate, _) = residuals.estimate(sample.ends.0, sample.ends.1, predicted);
            let error = (estimate.rtt_ms - sample.rtt_ms).abs() / sample.rtt_ms;
            if sample.ends.0.zone == sample.ends.1.zone {
                errors.intra_zone.push(error);
            } else {
                errors.inter_zone.push(error);
            }
        }
    }
    for sample in &samples {
        let (src, dst) = names(sample);
        // A median the coordinates cannot use (zero, absurd) is left out:
        // the matrix's checks already refused what a network cannot give.
        let _ = coordinates.observe(src, dst, sample.rtt_ms);
    }
    errors
}

/// A well-spread key per (pass, src, dst) (splitmix64).
fn shuffle_key(pass: u64, src: usize, dst: usize) -> u64 {
    let mut z = pass
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(((src as u64) << 32) | dst as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scored::tests::scored;

    /// Two zones 10 ms apart, 0.2 ms inside each.
    fn two_zones() -> ScoredMatrix {
        let nodes = [
            ("a1", "a"),
            ("a2", "a"),
            ("a3", "a"),
            ("b1", "b"),
            ("b2", "b"),
        ];
        let mut measured = Vec::new();
        for (src, sz) in nodes {
            for (dst, dz) in nodes {
                if src != dst {
                    measured.push((src, dst, if sz == dz { 0.2 } else { 10.0 }, 0.0));
                }
            }
        }
        scored(&nodes, &measured, 10_000)
    }

    #[test]
    fn passes_learn_the_medians_and_judge_before_they_move() {
        let matrix = two_zones();
        let mut coordinates = Coordinates::default();
        let first = run(&mut coordinates, &PassInput::of(&matrix), 1);
        assert_eq!(
            (first.intra_zone.len(), first.inter_zone.len()),
            (0, 0),
            "nothing to predict with before the first pass"
        );
        let mut last = PassErrors::default();
        for pass in 2..60 {
            last = run(&mut coordinates, &PassInput::of(&matrix), pass);
        }
        assert_eq!((last.intra_zone.len(), last.inter_zone.len()), (8, 12));
        let worst = last.inter_zone.iter().copied().fold(0.0, f64::max);
        assert!(worst < 0.1, "between zones off by {worst}");
        let estimate = coordinates.estimate("a1", "b2").unwrap();
        assert!((estimate.rtt_ms - 10.0).abs() < 1.0, "{estimate:?}");
    }

    #[test]
    fn departed_nodes_are_forgotten_and_orders_differ_by_pass() {
        let matrix = two_zones();
        let mut coordinates = Coordinates::default();
        coordinates.observe("gone", "a1", 3.0).unwrap();
        run(&mut coordinates, &PassInput::of(&matrix), 1);
        assert!(coordinates.coordinate("gone").is_none());
        assert!(coordinates.coordinate("a1").is_some());
        let input = PassInput::of(&matrix);
        let order = |pass| {
            input
                .in_order(pass)
                .iter()
                .map(|s| (s.ends.0.node, s.ends.1.node))
                .collect::<Vec<_>>()
        };
        assert_ne!(order(1), order(2));
        assert_eq!(order(3), order(3));
    }
}
