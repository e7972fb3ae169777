//! The collector's network coordinates: every pass interval
//! (`--coordinate-interval`,
//! [`COORDINATE_PASS_INTERVAL`](crate::config::COORDINATE_PASS_INTERVAL)
//! by default) one pass of `netaware_core::coordinate_pass` over the fresh
//! measured medians of the published snapshot, on a background thread.
//! What the pass judged before it moved the coordinates (how well
//! estimates predict the pairs nobody probes) goes to
//! `netaware_collector_coordinate_error_ratio`.
//!
//! Readers (the snapshot builds, and through them `Estimate`) take the
//! coordinates of the last pass, shared and never rebuilt per reader.

use std::sync::Arc;
use std::time::Duration;

use netaware_core::coordinate_pass::{self, PassErrors, PassInput};
use netaware_core::coordinates::Coordinates;
use tokio_util::sync::CancellationToken;

use crate::metrics::{PairClass, PairClassLabels, WorkMetrics};
use crate::snapshots::Snapshots;

/// Moves the coordinates every `interval` until `shutdown`.
pub async fn run(
    snapshots: Arc<Snapshots>,
    work: Arc<WorkMetrics>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut working = Coordinates::default();
    let mut pass: u64 = 0;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        pass += 1;
        let snapshot = snapshots.published();
        let moved = netaware_runtime::background::run(move || {
            // Copied out so that the snapshot (a hundred MiB and more at
            // 5,000 nodes) is not kept alive for the pass while newer ones
            // are built.
            let input = PassInput::of(snapshot.scored());
            drop(snapshot);
            let errors = coordinate_pass::run(&mut working, &input, pass);
            (working, errors)
        })
        .await;
        match moved {
            Some((moved, errors)) => {
                record(&work, errors);
                snapshots.coordinates.publish(moved.clone());
                working = moved;
            }
            None => {
                tracing::error!("a pass over the network coordinates failed; starting them over");
                working = Coordinates::default();
            }
        }
    }
}

fn record(work: &WorkMetrics, errors: PassErrors) {
    // One class's histogram at a time: a family's guard held while
    // another label is created would wait on itself.
    for (class, errors) in [
        (PairClass::IntraZone, errors.intra_zone),
        (PairClass::InterZone, errors.inter_zone),
    ] {
        let histogram = work
            .coordinate_error
            .get_or_create(&PairClassLabels { class });
        for error in errors {
            histogram.observe(error);
        }
    }
}
