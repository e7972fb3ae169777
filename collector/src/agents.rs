//! The agents connected now: the way down each open session (for
//! throughput orders), and the membership their peer sets are chosen from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use netaware_proto::v1 as pb;
use tokio::sync::{mpsc, watch};
use tonic::Status;

use crate::ingest::Ingest;
use crate::members::{MIN_COPY_GAP, Members};

/// The way down an agent's session.
pub type SessionSender = mpsc::Sender<Result<pb::CollectorMessage, Status>>;

/// Open sessions and membership.
#[derive(Debug)]
pub struct Agents {
    /// The open agent sessions, by node (a plain lock: held across no
    /// await).
    sessions: Mutex<HashMap<String, SessionSender>>,
    /// Bumped whenever the set of nodes changes, so sessions resend peer
    /// sets.
    membership: watch::Sender<u64>,
    /// The member list last copied for choosing peer sets.
    members: tokio::sync::Mutex<Arc<Members>>,
}

impl Agents {
    /// No session yet; members as `ingest` holds them now.
    pub fn new(ingest: &Ingest) -> Self {
        Self {
            sessions: Mutex::default(),
            membership: watch::Sender::new(0),
            members: tokio::sync::Mutex::new(Arc::new(ingest.state().members(0))),
        }
    }

    /// The open sessions by node.
    pub fn sessions(&self) -> MutexGuard<'_, HashMap<String, SessionSender>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the set of nodes changed: every session chooses again.
    pub fn membership_changed(&self) {
        self.membership.send_modify(|v| *v += 1);
    }

    /// A receiver told of every membership change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.membership.subscribe()
    }

    /// The membership version as last told.
    pub fn membership(&self) -> u64 {
        *self.membership.borrow()
    }

    /// The member list to choose peer sets from: the one last copied when
    /// it is current or was copied less than [`MIN_COPY_GAP`] ago, else a
    /// new copy from `ingest`. A session whose list is older than the
    /// membership it was told of chooses again at its next turn.
    pub async fn members(&self, ingest: &Ingest) -> Arc<Members> {
        let wanted = self.membership();
        let mut members = self.members.lock().await;
        if members.version < wanted && members.copied.elapsed() >= MIN_COPY_GAP {
            *members = Arc::new(ingest.state().members(wanted));
        }
        Arc::clone(&members)
    }
}
