//! How well the estimates of the pairs that bounded peer sets never probe
//! hold: agents probe their rotating sets (the agents' own rule,
//! `netaware_core::peers::choose`) on a [`Fabric`], the collector's own
//! coordinate pass (`netaware_core::coordinate_pass`) moves the
//! coordinates over the pair medians, and the collector's estimate
//! (`netaware_core::residuals::Residuals::estimate`: the coordinates
//! corrected, or the additive model where it fits a zone pair better) of
//! each never-probed pair is compared with what probing it would have
//! measured.

use std::collections::{BTreeMap, HashSet};

use netaware_core::coordinate_pass::{self, PassInput};
use netaware_core::coordinates::Coordinates;
use netaware_core::peers::{self, PeerBound};
use netaware_core::residuals::Residuals;
use rand::Rng;

use crate::fabric::{Fabric, PairClass};

/// The experiment's knobs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct EstimateRun {
    /// The peer bound (the collector's `--max-peers`).
    pub max_peers: usize,
    /// Rotation steps probed before judging.
    pub epochs: u64,
    /// Passes of the coordinates over the measured medians in one step (the
    /// collector makes one every few seconds).
    pub passes_per_epoch: usize,
    /// Never-probed pairs judged per class, drawn at random.
    pub judged_pairs: usize,
}

/// Errors of the estimates of one class of never-probed pairs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClassErrors {
    /// Inside a zone or between zones.
    pub class: PairClass,
    /// Pairs judged.
    pub pairs: usize,
    /// Median of |estimate - expected measurement| / expected measurement.
    pub median_relative: f64,
    /// The same for the coordinates alone, without the zone correction.
    pub median_relative_coordinates_only: f64,
    /// Its 90th percentile.
    pub p90_relative: f64,
    /// Median absolute error (ms).
    pub median_abs_ms: f64,
    /// Share of pairs whose error is within the estimate's own error bound.
    pub within_error_bound: f64,
}

/// What one run found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EstimateReport {
    /// Nodes in the fabric.
    pub nodes: usize,
    /// The knobs.
    pub run: EstimateRun,
    /// Most peers any agent probed in one step.
    pub most_peers_per_agent: usize,
    /// Directed pairs probed in some step, of all n(n-1).
    pub probed_pairs: usize,
    /// The estimates' errors, per class.
    pub classes: Vec<ClassErrors>,
}

/// Runs the experiment on `fabric`.
pub fn run(fabric: &Fabric, run: EstimateRun, rng: &mut impl Rng) -> EstimateReport {
    let candidates: Vec<peers::Candidate<'_>> = fabric
        .names
        .iter()
        .zip(&fabric.zone_names)
        .map(|(name, zone)| (name.as_str(), zone.as_str()))
        .collect();
    let mut probed: HashSet<(usize, usize)> = HashSet::new();
    let mut coordinates = Coordinates::default();
    let mut most_peers = 0;
    let mut last_step = Vec::new();
    let mut pass = 0;
    for epoch in 0..run.epochs {
        let bound = PeerBound {
            max: run.max_peers,
            epoch,
        };
        // This step's pairs and the medians the collector would hold.
        let mut measured: Vec<(usize, usize, f64)> = Vec::new();
        for (a, &(name, zone)) in candidates.iter().enumerate() {
            let set = peers::choose(name, zone, &candidates, bound);
            most_peers = most_peers.max(set.len());
            for b in set {
                probed.insert((a, b));
                measured.push((a, b, fabric.window_median_ms(a, b, rng)));
            }
        }
        let medians: Vec<_> = measured
            .iter()
            .map(|&(a, b, rtt)| (fabric.end(a), fabric.end(b), rtt))
            .collect();
        let input = PassInput::of_medians(fabric.names.clone(), fabric.zone_count(), &medians);
        for _ in 0..run.passes_per_epoch {
            pass += 1;
            coordinate_pass::run(&mut coordinates, &input, pass);
        }
        last_step = measured;
    }
    let mut residuals = Residuals::new(fabric.zone_count());
    for &(a, b, rtt) in &last_step {
        if let Some(predicted) = coordinates.estimate(&fabric.names[a], &fabric.names[b]) {
            residuals.add(fabric.end(a), fabric.end(b), rtt, predicted.rtt_ms);
        }
    }
    let estimator = Estimator {
        fabric,
        coordinates: &coordinates,
        residuals: &residuals,
    };
    let classes = judge(&estimator, &probed, run.judged_pairs, rng);
    EstimateReport {
        nodes: fabric.len(),
        run,
        most_peers_per_agent: most_peers,
        probed_pairs: probed.len(),
        classes,
    }
}

/// What the collector would answer for a pair.
struct Estimator<'a> {
    fabric: &'a Fabric,
    coordinates: &'a Coordinates,
    residuals: &'a Residuals,
}

/// Draws up to `per_class` never-probed pairs of each class and judges
/// their estimates.
fn judge(
    estimator: &Estimator<'_>,
    probed: &HashSet<(usize, usize)>,
    per_class: usize,
    rng: &mut impl Rng,
) -> Vec<ClassErrors> {
    let fabric = estimator.fabric;
    let n = fabric.len();
    // Per class: relative error, absolute error, within its own bound, and
    // the relative error of the coordinates alone.
    let mut errors: BTreeMap<PairClass, Vec<(f64, f64, bool, f64)>> = BTreeMap::new();
    let mut attempts = 0;
    // Same-rack pairs are judged among the intra-zone ones, and again on
    // their own as they come; the draws stop once the two main classes
    // are full.
    let main = |errors: &BTreeMap<PairClass, Vec<_>>| {
        [PairClass::IntraZone, PairClass::InterZone]
            .iter()
            .map(|c| errors.get(c).map_or(0, Vec::len))
            .sum::<usize>()
    };
    while attempts < per_class * 200 && main(&errors) < 2 * per_class {
        attempts += 1;
        let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
        let class = fabric.class(a, b);
        let judged = errors.entry(class).or_default();
        if a == b || probed.contains(&(a, b)) || judged.len() >= per_class {
            continue;
        }
        let names = (&fabric.names[a], &fabric.names[b]);
        let Some(plain) = estimator.coordinates.estimate(names.0, names.1) else {
            continue;
        };
        let (estimate, _) = estimator
            .residuals
            .estimate(fabric.end(a), fabric.end(b), plain);
        let expected = fabric.expected_median_ms(a, b);
        let error = (estimate.rtt_ms - expected).abs();
        let plain_error = (plain.rtt_ms - expected).abs() / expected;
        let judgement = (
            error / expected,
            error,
            error <= estimate.error_ms,
            plain_error,
        );
        judged.push(judgement);
        if fabric.same_rack(a, b) {
            let rack = errors.entry(PairClass::SameRack).or_default();
            if rack.len() < per_class {
                rack.push(judgement);
            }
        }
    }
    errors
        .into_iter()
        .filter(|(_, judged)| !judged.is_empty())
        .map(|(class, mut judged)| {
            judged.sort_by(|x, y| x.0.total_cmp(&y.0));
            let relative: Vec<f64> = judged.iter().map(|j| j.0).collect();
            let mut absolute: Vec<f64> = judged.iter().map(|j| j.1).collect();
            absolute.sort_by(f64::total_cmp);
            let within = judged.iter().filter(|j| j.2).count();
            let mut plain: Vec<f64> = judged.iter().map(|j| j.3).collect();
            plain.sort_by(f64::total_cmp);
            ClassErrors {
                class,
                pairs: judged.len(),
                median_relative: quantile(&relative, 0.5),
                median_relative_coordinates_only: quantile(&plain, 0.5),
                p90_relative: quantile(&relative, 0.9),
                median_abs_ms: quantile(&absolute, 0.5),
                within_error_bound: within as f64 / judged.len() as f64,
            }
        })
        .collect()
}

/// The nearest-rank q-quantile of sorted, non-empty values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    netaware_core::stats::nearest_rank(sorted, q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::FabricSpec;
    use rand::SeedableRng;

    #[test]
    fn coordinates_estimate_never_probed_pairs_of_a_small_fabric() {
        let spec = FabricSpec {
            zones: 4,
            nodes_per_zone: 100,
            nodes_per_rack: 20,
            slow_nodes: 0.02,
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let fabric = Fabric::generate(&spec, &mut rng);
        let report = run(
            &fabric,
            EstimateRun {
                max_peers: 24,
                epochs: 2,
                passes_per_epoch: 20,
                judged_pairs: 2_000,
            },
            &mut rng,
        );
        assert_eq!(report.most_peers_per_agent, 24);
        assert!(
            report.probed_pairs < 400 * 399 / 4,
            "most pairs never probed"
        );
        let class = |c| {
            report
                .classes
                .iter()
                .find(|e| e.class == c)
                .expect("judged")
                .clone()
        };
        let intra = class(PairClass::IntraZone);
        let inter = class(PairClass::InterZone);
        assert!(intra.median_relative < 0.25, "{intra:?}");
        assert!(inter.median_relative < 0.10, "{inter:?}");
    }
}
