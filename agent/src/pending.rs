//! The probes of one socket that wait for their replies, shared by the
//! socket's probes and its receive task: what the ICMP and UDP probers
//! both do around [`crate::replies::Outstanding`] (wait with a timeout,
//! hand a reply to its probe, count the ones refused).

use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

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

impl<K: Hash + Eq + Clone, T> Pending<K, T> {
    fn lock(&self) -> MutexGuard<'_, Outstanding<K, oneshot::Sender<T>>> {
        // A panic while holding this lock leaves the map usable.
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A probe on `key` carrying `nonce`, about to be sent at `sent_at`.
    /// It waits before it leaves: its reply may come back before the
    /// sending task runs again.
    pub fn expect(&self, key: K, nonce: u64, sent_at: SystemTime) -> Waiter<T> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(key, nonce, sent_at, tx);
        Waiter(rx)
    }

    /// The probe on `key` could not be sent.
    pub fn forget(&self, key: &K) {
        self.lock().forget(key);
    }

    /// Waits up to `timeout` for the reply to the probe on `key`.
    pub async fn wait(
        &self,
        key: &K,
        waiter: Waiter<T>,
        timeout: Duration,
    ) -> Result<T, ProbeError> {
        match tokio::time::timeout(timeout, waiter.0).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(ProbeError::Failed("receiver stopped".into())),
            Err(_) => {
                self.lock().expire(key);
                Err(ProbeError::Timeout)
            }
        }
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
