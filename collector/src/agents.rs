//! The agents connected now: the way down each open session (for
//! throughput orders), and the membership their peer sets are chosen from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use netaware_proto::v1 as pb;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::ingest::Ingest;
use crate::members::{MIN_COPY_GAP, Members};

/// What goes down an agent's session, boxed: a channel's queue is blocks
/// of 32 slots, allocated whole, and a slot of the message itself is some
/// 140 bytes, 4.5 KB a session before a message is sent (90 MB at 20,000
/// sessions).
pub type SessionItem = Box<Result<pb::CollectorMessage, Status>>;

/// The way down an agent's session.
pub type SessionSender = mpsc::Sender<SessionItem>;

/// One open session: the way down, and the token that ends it when a newer
/// session of the same node opens.
#[derive(Debug)]
struct OpenSession {
    down: SessionSender,
    replaced: CancellationToken,
}

/// Open sessions and membership.
#[derive(Debug)]
pub struct Agents {
    /// The open agent sessions, by node (a plain lock: held across no
    /// await).
    sessions: Mutex<HashMap<String, OpenSession>>,
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

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, OpenSession>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `node`'s new session, whose way down is `down`, and ends
    /// the one it replaces (two agents of one node, as in a rolling update
    /// with surge: the newer speaks for the node). The token returned is
    /// cancelled when a newer session replaces this one.
    pub fn open(&self, node: &str, down: SessionSender) -> CancellationToken {
        let replaced = CancellationToken::new();
        let session = OpenSession {
            down,
            replaced: replaced.clone(),
        };
        if let Some(older) = self.sessions().insert(node.to_owned(), session) {
            older.replaced.cancel();
        }
        replaced
    }

    /// `node`'s session with way down `down` ended; a newer one of the
    /// node stays registered.
    pub fn close(&self, node: &str, down: &SessionSender) {
        let mut sessions = self.sessions();
        if sessions
            .get(node)
            .is_some_and(|s| s.down.same_channel(down))
        {
            sessions.remove(node);
        }
    }

    /// How many sessions are open.
    pub fn open_sessions(&self) -> usize {
        self.sessions().len()
    }

    /// Hands `message` to `node`'s session without waiting; false when the
    /// node has no session or its queue is full.
    pub fn try_send(&self, node: &str, message: pb::CollectorMessage) -> bool {
        self.sessions()
            .get(node)
            .is_some_and(|session| session.down.try_send(Box::new(Ok(message))).is_ok())
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
