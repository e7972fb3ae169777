//! Builds the shared snapshot whenever the state changed (or the
//! published one aged past [`MAX_AGE`]), one after another, each gap
//! waited out ([`Patience::Builder`]), until shutdown: a change is
//! published within a second whether anyone reads or not. While builds are
//! fast, readers also build as they ask, and see every change at once
//! ([`crate::snapshots`]).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::ingest::Ingest;
use crate::metrics::WorkMetrics;
use crate::snapshots::{MAX_AGE, Patience, Snapshots};

/// Keeps the snapshot current until `shutdown`.
pub async fn run(
    ingest: Arc<Ingest>,
    snapshots: Arc<Snapshots>,
    work: Arc<WorkMetrics>,
    shutdown: CancellationToken,
) {
    let mut changes = ingest.subscribe();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(MAX_AGE) => {}
        }
        let version = *changes.borrow_and_update();
        snapshots
            .current(
                &ingest,
                version,
                netaware_runtime::clock::now_ms,
                &work,
                Patience::Builder,
            )
            .await;
    }
}
