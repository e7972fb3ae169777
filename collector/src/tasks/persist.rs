//! Saves the state to `--state-dir` every `--state-interval` and once more
//! on shutdown ([`crate::persist`] writes the file), then tells the acks
//! how far the save reaches ([`crate::saved_marks`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use netaware_runtime::clock::now_ms;
use tokio_util::sync::CancellationToken;

use crate::ingest::Ingest;
use crate::metrics::WorkMetrics;
use crate::saved_marks::SavedMarks;

/// What a save reads and tells.
#[derive(Debug)]
pub struct Saver {
    /// The state saved.
    pub ingest: Arc<Ingest>,
    /// The windows accepted per node, saved beside it.
    pub work: Arc<WorkMetrics>,
    /// Told what each save holds.
    pub saved_marks: Arc<SavedMarks>,
    /// The state directory's lock, let go after the last save.
    pub lock: crate::persist::DirLock,
}

/// Saves the state every `every` until shutdown, then once more.
pub async fn run(saver: Saver, dir: PathBuf, every: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        let last = tokio::select! {
            _ = tick.tick() => false,
            () = shutdown.cancelled() => true,
        };
        save(&saver, &dir).await;
        if last {
            return;
        }
    }
}

async fn save(saver: &Saver, dir: &Path) {
    let saved = {
        // The accepted counts under the same lock as the sequence marks:
        // windows are counted under it, so the two agree in the file.
        let state = saver.ingest.state();
        let mut saved = state.saved(now_ms());
        for node in &mut saved.nodes {
            node.accepted = saver.work.accepted(&node.name);
        }
        saved
    };
    let dir = dir.to_owned();
    let written =
        tokio::task::spawn_blocking(move || crate::persist::write(&dir, &saved).map(|()| saved))
            .await;
    let failure = match written {
        Ok(Ok(saved)) => {
            // On disk now: agents may forget what it holds.
            saver.saved_marks.saved(&saved.nodes);
            None
        }
        Ok(Err(err)) => Some(err.to_string()),
        Err(err) => Some(err.to_string()),
    };
    match failure {
        None => saver.work.state_saves.inc(),
        Some(err) => {
            tracing::error!(%err, "saving the state");
            saver.work.state_save_errors.inc()
        }
    };
}
