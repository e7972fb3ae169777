//! Saves the state to `--state-dir` every `--state-interval` and once more
//! on shutdown ([`crate::persist`] writes the files), then tells the acks
//! how far the save reaches ([`crate::saved_marks`]).
//!
//! A save appends what changed since the last one: the state's journal,
//! taken under its lock by a swap. When the journal has grown as large as
//! its checkpoint (or an append failed, or none was written yet), the save
//! writes a new checkpoint instead, copying the matrix a slice at a time
//! under the lock. A failed save is logged, counted, shown by /healthz
//! and `netaware_collector_state_save_failing`; acks keep saying how far
//! the last good save reaches, so the agents keep every later window
//! until a save holds it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netaware_runtime::clock::now_ms;
use tokio_util::sync::CancellationToken;

use crate::ingest::Ingest;
use crate::metrics::{SaveKind, WorkMetrics};
use crate::persist::{Files, PersistError};
use crate::saved::{NetworkPairs, PAIRS_PER_RECORD, Record};
use crate::saved_marks::SavedMarks;
use crate::state::CollectorState;

/// What a save reads, writes and tells.
#[derive(Debug)]
pub struct Saver {
    /// The state saved.
    pub ingest: Arc<Ingest>,
    /// The windows accepted per node, saved beside it.
    pub work: Arc<WorkMetrics>,
    /// Told what each save holds.
    pub saved_marks: Arc<SavedMarks>,
    /// The state directory's files.
    pub files: Files,
    /// The state directory's lock, let go after the last save.
    pub lock: crate::persist::DirLock,
}

/// Saves the state every `every` until shutdown, then once more.
pub async fn run(saver: Saver, every: Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut saver = saver;
    loop {
        let last = tokio::select! {
            _ = tick.tick() => false,
            () = shutdown.cancelled() => true,
        };
        // On a background thread at a lower priority: a save encodes and
        // syncs up to hundreds of MB, and must neither hold up the runtime
        // nor take the CPU that ingest needs.
        saver = match netaware_runtime::background::run(move || {
            saver.save();
            saver
        })
        .await
        {
            Some(saver) => saver,
            None => {
                tracing::error!("the state saver panicked: no more saves");
                return;
            }
        };
        if last {
            return;
        }
    }
}

impl Saver {
    /// One save: a checkpoint when one is due, else an append.
    fn save(&mut self) {
        if self.files.wants_checkpoint() {
            match self.checkpoint() {
                Ok(bytes) => {
                    self.work.save_done(SaveKind::Checkpoint, bytes);
                    return;
                }
                Err(err) => self.failed(&err),
            }
        }
        let journal = self.locked(CollectorState::take_journal);
        match self.files.append(&journal) {
            Ok(bytes) => {
                self.saved_marks.saved(marks_of(&journal.marks));
                self.work.save_done(SaveKind::Journal, bytes);
            }
            // Dropped here, held by the next checkpoint: it copies the
            // state itself.
            Err(PersistError::CheckpointFirst) => {}
            Err(err) => self.failed(&err),
        }
    }

    /// Writes a new checkpoint; the bytes it took.
    fn checkpoint(&mut self) -> Result<u64, PersistError> {
        let begun_at = now_ms();
        let work = Arc::clone(&self.work);
        let cut = self.locked(|state| state.checkpoint_cut(|node| work.accepted(node)));
        // The end of the old journal first: if this checkpoint fails, that
        // journal goes on being the log.
        if let Ok(bytes) = self.files.append(&cut.before) {
            self.saved_marks.saved(marks_of(&cut.before.marks));
            self.work.save_done(SaveKind::Journal, bytes);
        }
        let marks: Vec<(String, u64, u64)> = cut
            .nodes
            .iter()
            .map(|node| (node.name.clone(), node.instance, node.last_seq))
            .collect();
        let ingest = Arc::clone(&self.ingest);
        let lock_held = self.work.state_save_lock.clone();
        let mut checkpoint = self.files.checkpoint()?;
        for node in cut.nodes {
            checkpoint.write(&Record::Node(node))?;
        }
        for network in &cut.networks {
            let mut from = 0;
            let mut removals = None;
            loop {
                let (pairs, now_removals) = {
                    let state = ingest.state();
                    let held = Instant::now();
                    let slice = state.saved_pairs(network, from, PAIRS_PER_RECORD);
                    lock_held.observe(held.elapsed().as_secs_f64());
                    slice
                };
                if removals.is_some_and(|before| before != now_removals) {
                    // Positions moved: read it all again (a pair read
                    // twice is restored once).
                    from = 0;
                }
                removals = Some(now_removals);
                if pairs.is_empty() {
                    break;
                }
                from += pairs.len();
                checkpoint.write(&Record::Pairs(NetworkPairs {
                    network: network.as_str().to_owned(),
                    pairs,
                }))?;
            }
        }
        let bytes = checkpoint.finish(begun_at)?;
        self.saved_marks.saved(marks_of(&marks));
        Ok(bytes)
    }

    /// `read` of the state under its lock, the time held measured.
    fn locked<T>(&self, read: impl FnOnce(&mut CollectorState) -> T) -> T {
        let mut state = self.ingest.state();
        let held = Instant::now();
        let value = read(&mut state);
        self.work
            .state_save_lock
            .observe(held.elapsed().as_secs_f64());
        value
    }

    fn failed(&self, err: &PersistError) {
        tracing::error!(%err, "saving the state");
        self.work.save_failed(err.to_string());
    }
}

fn marks_of(marks: &[(String, u64, u64)]) -> impl Iterator<Item = (&str, u64, u64)> {
    marks
        .iter()
        .map(|(node, instance, seq)| (node.as_str(), *instance, *seq))
}
