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
//!
//! The lock is taken only here, on the runtime, as the snapshot builder
//! takes it; the encoding, writing and syncing run on a background thread
//! at a lower priority ([`netaware_runtime::background`]), fed the slices
//! through a short queue. A thread at that priority that held the lock
//! would hold it for as long as busier threads kept it off the CPU, with
//! every ingest waiting behind it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use netaware_runtime::clock::now_ms;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ingest::Ingest;
use crate::metrics::{SaveKind, WorkMetrics};
use crate::persist::{Files, PersistError};
use crate::saved::{NetworkPairs, PAIRS_PER_RECORD, Record};
use crate::saved_marks::SavedMarks;
use crate::state::{CheckpointCut, CollectorState};

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
        saver = match saver.save().await {
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

/// Slices of a checkpoint queued for its writer: a couple, so that the
/// copy keeps ahead of the writing without holding the matrix twice.
const SLICES_QUEUED: usize = 2;

impl Saver {
    /// One save: a checkpoint when one is due, else an append. `None` if
    /// the writing panicked.
    async fn save(mut self) -> Option<Self> {
        if self.files.wants_checkpoint() {
            let (saver, written) = self.checkpoint().await?;
            self = saver;
            match written {
                Ok(bytes) => {
                    self.work.save_done(SaveKind::Checkpoint, bytes);
                    return Some(self);
                }
                Err(err) => self.failed(&err),
            }
        }
        let journal = self.locked(CollectorState::take_journal);
        background(self, move |saver| match saver.files.append(&journal) {
            Ok(bytes) => {
                saver.saved_marks.saved(marks_of(&journal.marks));
                saver.work.save_done(SaveKind::Journal, bytes);
            }
            // Dropped here, held by the next checkpoint: it copies the
            // state itself.
            Err(PersistError::CheckpointFirst) => {}
            Err(err) => saver.failed(&err),
        })
        .await
        .map(|(saver, ())| saver)
    }

    /// Writes a new checkpoint: the cut and the slices copied here, the
    /// records written by a background writer as they come.
    async fn checkpoint(self) -> Option<(Self, Result<u64, PersistError>)> {
        let begun_at = now_ms();
        let work = Arc::clone(&self.work);
        let cut = self.locked(|state| state.checkpoint_cut(|node| work.accepted(node)));
        let networks = cut.networks.clone();
        let ingest = Arc::clone(&self.ingest);
        let lock_held = self.work.state_save_lock.clone();
        let (slices, mut queued) = mpsc::channel(SLICES_QUEUED);
        let writer = background(self, move |saver| {
            saver.write_checkpoint(cut, begun_at, || queued.blocking_recv())
        });
        let copier = async move {
            for network in &networks {
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
                    let slice = NetworkPairs {
                        network: network.as_str().to_owned(),
                        pairs,
                    };
                    if slices.send(slice).await.is_err() {
                        // The writer stopped: its error says why.
                        return;
                    }
                }
            }
        };
        let (written, ()) = tokio::join!(writer, copier);
        written
    }

    /// Writes the checkpoint begun at `cut` (at `begun_at`) with the slices
    /// `next` gives until it gives none; the bytes it took.
    fn write_checkpoint(
        &mut self,
        cut: CheckpointCut,
        begun_at: netaware_core::UnixMillis,
        mut next: impl FnMut() -> Option<NetworkPairs>,
    ) -> Result<u64, PersistError> {
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
        let mut checkpoint = self.files.checkpoint()?;
        for node in cut.nodes {
            checkpoint.write(&Record::Node(node))?;
        }
        while let Some(slice) = next() {
            checkpoint.write(&Record::Pairs(slice))?;
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

/// Runs `write` with `saver` on a background thread, handing both back;
/// `None` if it panicked.
async fn background<T: Send + 'static>(
    mut saver: Saver,
    write: impl FnOnce(&mut Saver) -> T + Send + 'static,
) -> Option<(Saver, T)> {
    netaware_runtime::background::run(move || {
        let value = write(&mut saver);
        (saver, value)
    })
    .await
}

fn marks_of(marks: &[(String, u64, u64)]) -> impl Iterator<Item = (&str, u64, u64)> {
    marks
        .iter()
        .map(|(node, instance, seq)| (node.as_str(), *instance, *seq))
}
