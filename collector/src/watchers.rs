//! The watch streams open on the collector (the extenders that follow its
//! scores, and any other follower) and how far each has got: what
//! `netaware doctor` reads to say whether the scheduler follows.
//!
//! A stream registers when it opens and leaves when it ends (its
//! [`Watching`] guard is dropped), so the list never holds a stream that
//! is gone. There are at most [`Watchers::max`] at once: each may hold a
//! matrix version and its updates, so their number bounds that memory.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use netaware_core::UnixMillis;

/// One open watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watcher {
    /// Who opened it (the peer's address, as the connection says).
    pub peer: String,
    /// When it opened.
    pub opened: UnixMillis,
    /// The matrix version of its last update, 0 before the first.
    pub version: u64,
    /// When its last update was handed to the stream; `opened` before.
    pub last_update: UnixMillis,
}

/// The open watch streams.
#[derive(Debug)]
pub struct Watchers {
    open: Mutex<BTreeMap<u64, Watcher>>,
    next_id: AtomicU64,
    max: usize,
}

/// A stream refused: [`Watchers::max`] are open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} watch streams are open, the most this collector serves at once")]
pub struct TooManyWatchers(pub usize);

impl Watchers {
    /// No stream yet; at most `max` at once.
    pub fn new(max: usize) -> Self {
        Self {
            open: Mutex::default(),
            next_id: AtomicU64::new(0),
            max,
        }
    }

    /// The most streams served at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Registers a stream from `peer` opened at `now`, listed until the
    /// guard is dropped; refused when [`Watchers::max`] are open.
    pub fn open(
        self: &Arc<Self>,
        peer: String,
        now: UnixMillis,
    ) -> Result<Watching, TooManyWatchers> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.len() >= self.max {
            return Err(TooManyWatchers(open.len()));
        }
        let id = self.next_id.fetch_add(1, Relaxed);
        open.insert(
            id,
            Watcher {
                peer,
                opened: now,
                version: 0,
                last_update: now,
            },
        );
        Ok(Watching {
            id,
            watchers: Arc::clone(self),
        })
    }

    /// Every stream listed, oldest first.
    pub fn list(&self) -> Vec<Watcher> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.values().cloned().collect()
    }
}

/// A registered stream; dropping it takes the stream off the list.
#[derive(Debug)]
pub struct Watching {
    id: u64,
    watchers: Arc<Watchers>,
}

impl Watching {
    /// The stream was handed the update of matrix `version` at `now`.
    pub fn updated(&self, version: u64, now: UnixMillis) {
        let mut open = self
            .watchers
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(watcher) = open.get_mut(&self.id) {
            watcher.version = version;
            watcher.last_update = now;
        }
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut open = self
            .watchers
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_listed_while_open_with_its_last_update() {
        let watchers = Arc::new(Watchers::new(2));
        let first = watchers.open("10.0.0.9:5000".into(), 1_000).unwrap();
        let second = watchers.open("10.0.0.8:5000".into(), 2_000).unwrap();
        // Two is the most.
        assert_eq!(
            watchers.open("10.0.0.7:5000".into(), 2_500).unwrap_err(),
            TooManyWatchers(2)
        );
        first.updated(7, 3_000);
        let listed = watchers.list();
        assert_eq!(listed.len(), 2);
        assert_eq!((listed[0].version, listed[0].last_update), (7, 3_000));
        assert_eq!((listed[1].version, listed[1].last_update), (0, 2_000));
        drop(first);
        let listed = watchers.list();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].peer, "10.0.0.8:5000");
        // A slot is free again.
        let third = watchers.open("10.0.0.7:5000".into(), 4_000).unwrap();
        drop(third);
        drop(second);
        assert!(watchers.list().is_empty());
    }
}
