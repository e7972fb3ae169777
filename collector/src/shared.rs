//! What the gRPC services share: the collector state behind a lock, the
//! change notifications, and the shutdown signal.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, MutexGuard, PoisonError};

use netaware_proto::v1 as pb;
use tokio::sync::{Mutex, mpsc, watch};
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::members::{MIN_COPY_GAP, Members};
use crate::metrics::WorkMetrics;
use crate::node_places::NodePlaces;
use crate::saved_marks::SavedMarks;
use crate::snapshots::{MAX_AGE, Patience, Snapshot, Snapshots};
use crate::state::{CollectorState, lock};
use crate::topology::SharedTopology;
use netaware_proto::convert;

/// A server-streaming gRPC answer.
pub type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The way down an agent's session.
pub type SessionSender = mpsc::Sender<Result<pb::CollectorMessage, Status>>;

/// State shared by every service and session.
pub struct Shared {
    /// The collector's state, behind a plain lock held across no await
    /// ([`Shared::state`]).
    state: std::sync::Mutex<CollectorState>,
    /// Bumped whenever the set of nodes changes, so sessions resend peer sets.
    pub membership: watch::Sender<u64>,
    /// The member list last copied for choosing peer sets.
    members: Mutex<Arc<Members>>,
    /// The state's version after each change, for watch streams.
    pub changes: watch::Sender<u64>,
    /// Cancelled on shutdown: sessions and watches end.
    pub shutdown: CancellationToken,
    /// The open agent sessions, by node, for throughput orders.
    sessions: std::sync::Mutex<HashMap<String, SessionSender>>,
    /// Counters of the collector's work, for /metrics.
    pub work: WorkMetrics,
    /// Whether an agent may report only for the node its client
    /// certificate names (mutual TLS).
    pub node_identity: bool,
    /// The scored snapshot every reader shares.
    pub snapshots: Snapshots,
    /// How far the last save reaches, for the acks.
    pub saved_marks: SavedMarks,
    /// The measured topology of the last round (`crate::topology`).
    pub topology: SharedTopology,
    /// Where each agent's zone is read (`--zones-from-nodes`); `None`:
    /// the hello's zone is taken as said.
    pub node_places: Option<Arc<NodePlaces>>,
}

impl Shared {
    /// Shared state around `state`.
    pub fn new(
        state: CollectorState,
        shutdown: CancellationToken,
        node_identity: bool,
        node_places: Option<Arc<NodePlaces>>,
    ) -> Arc<Self> {
        let version = state.version();
        let snapshots = Snapshots::new(&state, netaware_runtime::clock::now_ms());
        Arc::new(Self {
            snapshots,
            members: Mutex::new(Arc::new(state.members(0))),
            state: std::sync::Mutex::new(state),
            membership: watch::Sender::new(0),
            changes: watch::Sender::new(version),
            shutdown,
            sessions: std::sync::Mutex::default(),
            work: WorkMetrics::default(),
            node_identity,
            saved_marks: SavedMarks::default(),
            topology: SharedTopology::default(),
            node_places,
        })
    }

    /// The member list to choose peer sets from: the one last copied when
    /// it is current or was copied less than [`MIN_COPY_GAP`] ago, else a
    /// new copy. A session whose list is older than the membership it was
    /// told of chooses again at its next turn.
    pub async fn members(&self) -> Arc<Members> {
        let wanted = *self.membership.borrow();
        let mut members = self.members.lock().await;
        if members.version < wanted && members.copied.elapsed() >= MIN_COPY_GAP {
            *members = Arc::new(self.state().members(wanted));
        }
        Arc::clone(&members)
    }

    /// Tells watchers and the snapshot builds that the state is now at
    /// `version`; call it under the state's lock.
    pub fn changed(&self, version: u64) {
        self.snapshots.note_change();
        self.changes.send_replace(version);
    }

    /// The collector's state, locked. A plain lock, never held across an
    /// await: with thousands of sessions, a fair async lock hands itself to
    /// a task that is not running yet while the others queue behind it,
    /// and ingest waited milliseconds for work of microseconds.
    pub fn state(&self) -> MutexGuard<'_, CollectorState> {
        lock(&self.state)
    }

    /// The open sessions by node (a plain lock: held across no await).
    pub fn sessions(&self) -> MutexGuard<'_, HashMap<String, SessionSender>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shared snapshot, as fresh as [`Snapshots::current`] gives; when
    /// builds are slow (a large cluster), the published one at once: the
    /// builder ([`Shared::keep_snapshot_current`]) keeps it current.
    pub async fn snapshot(self: &Arc<Self>) -> Arc<Snapshot> {
        if self.snapshots.builds_are_slow() {
            return self.snapshots.published();
        }
        let version = *self.changes.borrow();
        self.build_snapshot(version, Patience::Reader).await
    }

    /// Builds a snapshot whenever the state changed (or the published one
    /// aged past [`MAX_AGE`]), one after another, each gap waited out
    /// (`Patience::Builder`), until shutdown: a change is published within
    /// a second whether anyone reads or not. While builds are fast, readers
    /// also build as they ask, and see every change at once.
    pub async fn keep_snapshot_current(self: Arc<Self>) {
        let mut changes = self.changes.subscribe();
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(MAX_AGE) => {}
            }
            let version = *changes.borrow_and_update();
            self.build_snapshot(version, Patience::Builder).await;
        }
    }

    async fn build_snapshot(&self, version: u64, patience: Patience) -> Arc<Snapshot> {
        self.snapshots
            .current(
                &self.state,
                version,
                netaware_runtime::clock::now_ms,
                &self.work,
                patience,
            )
            .await
    }

    /// The wire matrix of the shared snapshot.
    pub async fn matrix(self: &Arc<Self>) -> pb::Matrix {
        let snapshot = self.snapshot().await;
        convert::matrix_to_wire(&snapshot.scored, snapshot.version, snapshot.at)
    }
}
