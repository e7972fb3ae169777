//! The probes of one socket that wait for their replies, shared by the
//! socket's probes and its receive task: what the ICMP and UDP probers
//! both do around [`crate::replies::Outstanding`] (wait until a deadline,
//! hand a reply to its probe, count the ones refused).
//!
//! A probe's deadline is not a timer of its own: whoever owns the probers
//! sweeps them ([`Pending::expire_due`]), so that a thousand probes in
//! flight cost one timer, not a thousand (arming a timer earlier than the
//! runtime's next wake-up is a system call, once per probe).

use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use tokio::sync::oneshot;

use crate::counters::Counters;
use crate::replies::{Outstanding, Verdict};

/// What a single probe can end in besides a reply.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No reply within the timeout: counted as loss.
    #[error("no reply within the timeout")]
    Timeout,
    /// The probe could not be sent (counted as loss too).
    #[error("probe failed: {0}")]
    Failed(String),
}

/// Probes waiting on keys `K`, each for a reply that hands it a `T`.
#[derive(Debug)]
pub struct Pending<K, T> {
    map: Mutex<Outstanding<K, oneshot::Sender<T>>>,
}

impl<K, T> Default for Pending<K, T> {
    fn default() -> Self {
        Self {
            map: Mutex::new(Outstanding::default()),
        }
    }
}

/// A probe waiting for its reply.
#[derive(Debug)]
pub struct Waiter<T>(oneshot::Receiver<T>);

impl<T> Waiter<T> {
    /// The reply, or a timeout once a sweep past the probe's deadline
    /// has dropped its sender.
    pub async fn reply(self) -> Result<T, ProbeError> {
        self.0.await.map_err(|_| ProbeError::Timeout)
    }
}

impl<K: Hash + Eq + Clone, T> Pending<K, T> {
    fn lock(&self) -> MutexGuard<'_, Outstanding<K, oneshot::Sender<T>>> {
        // A panic while holding this lock leaves the map usable.
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A probe on `key` carrying `nonce`, about to be sent at `sent_at`,
    /// that waits until `deadline` at most. It waits before it leaves:
    /// its reply may come back before the sending task runs again.
    pub fn expect(&self, key: K, nonce: u64, sent_at: SystemTime, deadline: Instant) -> Waiter<T> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(key, nonce, sent_at, deadline, tx);
        Waiter(rx)
    }

    /// The probe on `key` could not be sent.
    pub fn forget(&self, key: &K) {
        self.lock().forget(key);
    }

    /// Times out every probe whose deadline is `now` or earlier; the
    /// earliest deadline of those that still wait.
    pub fn expire_due(&self, now: Instant) -> Option<Instant> {
        let (expired, next) = self.lock().expire_due(now);
        // Dropped outside the lock: each wakes its probe.
        drop(expired);
        next
    }

    /// A reply on `key` with `nonce`, stamped `received_at`: handed to its
    /// probe as `reply`, or refused and counted.
    pub fn answer(
        &self,
        key: &K,
        nonce: Option<u64>,
        received_at: SystemTime,
        reply: T,
        counters: &Counters,
    ) {
        let verdict = self.lock().answer(key, nonce, received_at);
        match verdict {
            Verdict::Answered(waiter) => {
                let _ = waiter.send(reply);
            }
            Verdict::Refused(reason) => counters.reply_refused(reason),
        }
    }
}

/// Times out the due probes of each of `pendings` (a prober's sockets);
/// the earliest deadline of those that still wait.
pub fn expire_due_in<'a, K, T>(
    pendings: impl IntoIterator<Item = &'a Pending<K, T>>,
    now: Instant,
) -> Option<Instant>
where
    K: Hash + Eq + Clone + 'a,
    T: 'a,
{
    pendings
        .into_iter()
        .filter_map(|pending| pending.expire_due(now))
        .min()
}
