//! The watch streams open on the collector (the extenders that follow its
//! scores, and any other follower) and how far each has got: what
//! `netaware doctor` reads to say whether the scheduler follows.
//!
//! A stream registers when it opens and leaves when it ends (its
//! [`Watching`] guard is dropped), so the list never holds a stream that
//! is gone. There are at most [`WatchLimits::max_watchers`] at once, and
//! [`WatchLimits::max_per_client`] from one client address: each may hold
//! a page or two of updates, so their number bounds that memory. A stream
//! cut off as stalled keeps its slot until its client closes it (the
//! collector cannot end an HTTP/2 stream whose client does not read): the
//! cap per client keeps one client from taking every slot.
//!
//! [`WatchLimits::max_watchers`]: crate::WatchLimits::max_watchers
//! [`WatchLimits::max_per_client`]: crate::WatchLimits::max_per_client

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use netaware_core::UnixMillis;

/// One open watch stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watcher {
    /// Who opened it (the peer's address, as the connection says).
    pub peer: String,
    /// The peer's IP address, when the connection says it.
    pub ip: Option<IpAddr>,
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
    limits: crate::WatchLimits,
}

/// Why a stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TooManyWatchers {
    /// The most streams served at once are open.
    #[error("{0} watch streams are open, the most this collector serves at once")]
    InAll(usize),
    /// The most streams from one client address are open from this one.
    #[error("{1} watch streams are open from {0}, the most from one client address")]
    FromClient(IpAddr, usize),
}

impl Watchers {
    /// No stream yet; at most as many at once as `limits` say.
    pub fn new(limits: crate::WatchLimits) -> Self {
        Self {
            open: Mutex::default(),
            next_id: AtomicU64::new(0),
            limits,
        }
    }

    /// Registers a stream from `peer` (at `ip`) opened at `now`, listed
    /// until the guard is dropped; refused past the limits.
    pub fn open(
        self: &Arc<Self>,
        peer: String,
        ip: Option<IpAddr>,
        now: UnixMillis,
    ) -> Result<Watching, TooManyWatchers> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if open.len() >= self.limits.max_watchers {
            return Err(TooManyWatchers::InAll(open.len()));
        }
        if let Some(ip) = ip {
            let from_client = open.values().filter(|w| w.ip == Some(ip)).count();
            if from_client >= self.limits.max_per_client {
                return Err(TooManyWatchers::FromClient(ip, from_client));
            }
        }
        let id = self.next_id.fetch_add(1, Relaxed);
        open.insert(
            id,
            Watcher {
                peer,
                ip,
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
        let watchers = Arc::new(Watchers::new(crate::WatchLimits {
            max_watchers: 2,
            ..Default::default()
        }));
        let first = watchers.open("10.0.0.9:5000".into(), None, 1_000).unwrap();
        let second = watchers.open("10.0.0.8:5000".into(), None, 2_000).unwrap();
        // Two is the most.
        assert_eq!(
            watchers
                .open("10.0.0.7:5000".into(), None, 2_500)
                .unwrap_err(),
            TooManyWatchers::InAll(2)
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
        let third = watchers.open("10.0.0.7:5000".into(), None, 4_000).unwrap();
        drop(third);
        drop(second);
        assert!(watchers.list().is_empty());
    }

    #[test]
    fn one_client_address_gets_its_share_and_no_more() {
        let watchers = Arc::new(Watchers::new(crate::WatchLimits {
            max_watchers: 10,
            max_per_client: 2,
            ..Default::default()
        }));
        let ip = |last: u8| Some(IpAddr::from([10, 0, 0, last]));
        let held: Vec<Watching> = (0..2)
            .map(|port| watchers.open(format!("10.0.0.9:{port}"), ip(9), 0).unwrap())
            .collect();
        assert_eq!(
            watchers.open("10.0.0.9:7".into(), ip(9), 0).unwrap_err(),
            TooManyWatchers::FromClient(IpAddr::from([10, 0, 0, 9]), 2)
        );
        // Another address still gets its streams.
        assert!(watchers.open("10.0.0.8:7".into(), ip(8), 0).is_ok());
        drop(held);
        assert!(watchers.open("10.0.0.9:7".into(), ip(9), 0).is_ok());
    }
}
