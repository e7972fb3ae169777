//! The collector's network coordinates (`netaware_core::coordinates`):
//! every pass interval (`--coordinate-interval`, [`PASS_INTERVAL`] by
//! default) the fresh measured medians of the shared
//! snapshot move the coordinates, one pass over them in an order that
//! changes from pass to pass, on a background thread. Before the medians
//! move them, the estimate of each measured pair (the coordinates'
//! prediction corrected by the residuals of the measured pairs, as
//! `Estimate` answers) is compared with its median: that error, inside zones and
//! between them, is how well estimates predict the pairs nobody probes
//! (`netaware_collector_coordinate_error_ratio`).
//!
//! Readers (the `Estimate` call) take the coordinates of the last pass,
//! shared and never rebuilt per reader.

use std::sync::Arc;
use std::time::Duration;

use netaware_core::coordinates::{Coordinates, End, Residuals};
use netaware_core::snapshot::ScoredMatrix;

use crate::latest::Latest;
use crate::metrics::{PairClass, PairClassLabels, WorkMetrics};
use crate::shared::Shared;

/// Default time between two passes: medians change over windows (seconds), and a
/// pass over a 5,000-node cluster's 320,000 pairs costs tens of
/// milliseconds.
pub const PASS_INTERVAL: Duration = Duration::from_secs(10);

/// The coordinates of the last pass, for every reader.
pub type SharedCoordinates = Latest<Coordinates>;

/// A fresh measured median and the pair's ends (node and zone indices of
/// the snapshot; the names are copied once per node, not per pair: a pass
/// reads 320,000 pairs at 5,000 nodes).
struct Sample {
    ends: (End, End),
    rtt_ms: f64,
}

impl Sample {
    fn class(&self) -> PairClass {
        if self.ends.0.zone == self.ends.1.zone {
            PairClass::IntraZone
        } else {
            PairClass::InterZone
        }
    }
}

/// Moves the coordinates every pass interval until shutdown.
pub async fn run(shared: Arc<Shared>) {
    let interval = shared.state().config().coordinate_interval;
    let mut working = Coordinates::default();
    let mut pass: u64 = 0;
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        pass += 1;
        let snapshot = shared.snapshots.published();
        let shared_for_pass = Arc::clone(&shared);
        let moved = netaware_runtime::background::run(move || {
            // What the pass needs, copied out so that the snapshot (a
            // hundred MiB and more at 5,000 nodes) is not kept alive for
            // the pass while newer ones are built.
            let samples = samples(&snapshot.scored, pass);
            let names: Vec<String> = snapshot
                .scored
                .nodes()
                .iter()
                .map(|node| node.info.name.clone())
                .collect();
            let zones = snapshot.scored.zone_count();
            drop(snapshot);
            forget_departed(&mut working, &names);
            apply(&mut working, &names, zones, &samples, &shared_for_pass.work);
            working
        })
        .await;
        match moved {
            Some(moved) => {
                shared.snapshots.coordinates.publish(moved.clone());
                working = moved;
            }
            None => {
                tracing::error!("a pass over the network coordinates failed; starting them over");
                working = Coordinates::default();
            }
        }
    }
}

/// The fresh measured medians of `scored`, in an order of `pass`'s own.
fn samples(scored: &ScoredMatrix, pass: u64) -> Vec<Sample> {
    let mut samples: Vec<(u64, Sample)> = scored
        .pairs()
        .iter()
        .filter(|pair| !pair.stale)
        .filter_map(|pair| {
            let rtt_ms = pair.summary.rtt_median_ms?;
            let ends = (
                End {
                    node: pair.src,
                    zone: scored.zone_index(pair.src)?,
                },
                End {
                    node: pair.dst,
                    zone: scored.zone_index(pair.dst)?,
                },
            );
            let order = shuffle_key(pass, pair.src, pair.dst);
            Some((order, Sample { ends, rtt_ms }))
        })
        .collect();
    // One order for every pass would favour the pairs that come last.
    samples.sort_unstable_by_key(|(order, _)| *order);
    samples.into_iter().map(|(_, sample)| sample).collect()
}

/// Drops the coordinates of nodes the collector no longer knows.
fn forget_departed(coordinates: &mut Coordinates, names: &[String]) {
    let known: std::collections::HashSet<&str> = names.iter().map(String::as_str).collect();
    coordinates.retain(|name| known.contains(name));
}

/// Judges, then applies, each sample.
/// `nodes` names the snapshot's node indices; `zones` counts its zones.
fn apply(
    coordinates: &mut Coordinates,
    nodes: &[String],
    zones: usize,
    samples: &[Sample],
    work: &WorkMetrics,
) {
    let names = |sample: &Sample| {
        (
            nodes[sample.ends.0.node].as_str(),
            nodes[sample.ends.1.node].as_str(),
        )
    };
    let predicted: Vec<_> = samples
        .iter()
        .map(|s| {
            let (src, dst) = names(s);
            coordinates.estimate(src, dst)
        })
        .collect();
    let mut residuals = Residuals::new(zones);
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
    let mut intra = Vec::new();
    let mut inter = Vec::new();
    for (sample, predicted) in samples.iter().zip(predicted) {
        if let Some(predicted) = predicted {
            let estimate = residuals.correct(sample.ends.0, sample.ends.1, predicted);
            let error = (estimate.rtt_ms - sample.rtt_ms).abs() / sample.rtt_ms;
            match sample.class() {
                PairClass::IntraZone => intra.push(error),
                PairClass::InterZone => inter.push(error),
            }
        }
    }
    for sample in samples {
        let (src, dst) = names(sample);
        if let Err(err) = coordinates.observe(src, dst, sample.rtt_ms) {
            tracing::debug!(%src, %dst, %err, "a median the coordinates cannot use");
        }
    }
    // One class's histogram at a time: a family's guard held while
    // another label is created would wait on itself.
    for (class, errors) in [(PairClass::IntraZone, intra), (PairClass::InterZone, inter)] {
        let histogram = work
            .coordinate_error
            .get_or_create(&PairClassLabels { class });
        for error in errors {
            histogram.observe(error);
        }
    }
}

/// A well-spread key per (pass, src, dst) (splitmix64).
fn shuffle_key(pass: u64, src: usize, dst: usize) -> u64 {
    let mut z = pass
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add((src as u64) << 32 | dst as u64);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
