//! The collector's state behind its lock, and the notice of each change to
//! it: what agent sessions write, and what snapshot builds, saves and the
//! throughput planner read.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::watch;

use crate::state::CollectorState;

/// The state and its changes.
#[derive(Debug)]
pub struct Ingest {
    /// A plain lock, never held across an await: with thousands of
    /// sessions, a fair async lock hands itself to a task that is not
    /// running yet while the others queue behind it, and ingest waited
    /// milliseconds for work of microseconds.
    state: Mutex<CollectorState>,
    /// The state's version after each change, for watch streams and the
    /// snapshot builder.
    changes: watch::Sender<u64>,
    /// When the earliest change not yet copied into a snapshot was made.
    first_change: Mutex<Option<Instant>>,
}

impl Ingest {
    /// The shell around `state`.
    pub fn new(state: CollectorState) -> Self {
        Self {
            changes: watch::Sender::new(state.version()),
            state: Mutex::new(state),
            first_change: Mutex::new(None),
        }
    }

    /// The state, locked. A panic that poisoned the lock left it
    /// consistent (every change is checked before it is applied), so it is
    /// used on.
    ///
    /// Never from a background thread (checked in debug builds): every
    /// ingest would wait behind a holder that the scheduler runs last.
    pub fn state(&self) -> MutexGuard<'_, CollectorState> {
        debug_assert!(
            !netaware_runtime::background::on_background_thread(),
            "the state's lock taken on a background thread"
        );
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells watchers and snapshot builds that the state is now at
    /// `version`; call it under the state's lock, so that the change and a
    /// build's copy are in one order.
    pub fn changed(&self, version: u64) {
        self.first_change
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(Instant::now);
        self.changes.send_replace(version);
    }

    /// The state's version as last told.
    pub fn version(&self) -> u64 {
        *self.changes.borrow()
    }

    /// A receiver told of every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// When the earliest change since the last call was made; call it
    /// under the state's lock, as a snapshot build copies the state.
    pub(crate) fn take_first_change(&self) -> Option<Instant> {
        self.first_change
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;

    #[tokio::test]
    #[cfg(debug_assertions)]
    async fn the_lock_is_not_taken_on_a_background_thread() {
        let ingest = std::sync::Arc::new(Ingest::new(CollectorState::new(
            ModelConfig::default(),
            Vec::new(),
        )));
        let version = ingest.state().version();
        let background = std::sync::Arc::clone(&ingest);
        let taken = netaware_runtime::background::run(move || background.state().version());
        assert_eq!(taken.await, None, "refused in a debug build");
        assert_eq!(ingest.state().version(), version, "on the runtime, still");
    }
}
