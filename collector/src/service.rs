//! The gRPC services: the agent session stream and the Scores service, as
//! thin shells over [`CollectorState`].

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use netaware_core::UnixMillis;
use netaware_core::placement::{self, JobRequest};
use netaware_proto::v1 as pb;
use netaware_proto::v1::{agent_message, collector_message};
use tokio::sync::{Mutex, mpsc, watch};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::convert;
use crate::state::{CollectorState, Ingested};
use crate::validate::{MAX_NAME_LEN, check_name};

/// Largest job a rank request may ask for.
pub const MAX_JOB_SIZE: u32 = 100_000;
/// Most names in a rank request's placed or candidate lists.
pub const MAX_RANK_NAMES: usize = 100_000;
/// Shortest time between two matrix updates on a watch stream.
pub const MIN_WATCH_INTERVAL: Duration = Duration::from_millis(100);
/// Default time between two matrix updates on a watch stream.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// A watch stream gets a matrix at least this often, so that ages and
/// staleness move on even when nothing new arrives.
pub const WATCH_REFRESH: Duration = Duration::from_secs(5);

/// Unix time now, in milliseconds.
pub fn now_ms() -> UnixMillis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// State shared by every service and session.
pub struct Shared {
    /// The collector's state; a tokio lock because sessions hold it across
    /// no await, but it lives in async code.
    pub state: Mutex<CollectorState>,
    /// Bumped whenever the set of nodes changes, so sessions resend peer sets.
    pub membership: watch::Sender<u64>,
    /// The state's version after each change, for watch streams.
    pub changes: watch::Sender<u64>,
    /// Cancelled on shutdown: sessions and watches end.
    pub shutdown: CancellationToken,
}

impl Shared {
    /// Shared state around `state`.
    pub fn new(state: CollectorState, shutdown: CancellationToken) -> Arc<Self> {
        let version = state.version();
        Arc::new(Self {
            state: Mutex::new(state),
            membership: watch::Sender::new(0),
            changes: watch::Sender::new(version),
            shutdown,
        })
    }

    /// The wire matrix as of now.
    pub async fn matrix(&self) -> pb::Matrix {
        let now = now_ms();
        let state = self.state.lock().await;
        convert::matrix(
            &state.snapshot(now),
            &state.config().score,
            state.version(),
            now,
        )
    }
}

/// The agent session service.
pub struct SessionService(pub Arc<Shared>);

type SessionStream = Pin<Box<dyn Stream<Item = Result<pb::CollectorMessage, Status>> + Send>>;

#[tonic::async_trait]
impl pb::agent_session_server::AgentSession for SessionService {
    type SessionStream = SessionStream;

    async fn session(
        &self,
        request: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut inbound = request.into_inner();
        let hello = match inbound.message().await? {
            Some(pb::AgentMessage {
                body: Some(agent_message::Body::Hello(hello)),
            }) => hello,
            _ => {
                return Err(Status::invalid_argument(
                    "the first message of a session must be a hello",
                ));
            }
        };
        let shared = Arc::clone(&self.0);
        let (node, changed) = {
            let mut state = shared.state.lock().await;
            let result = state
                .hello(&hello, now_ms())
                .map_err(|e| Status::invalid_argument(e.0))?;
            shared.changes.send_replace(state.version());
            result
        };
        if changed {
            shared.membership.send_modify(|v| *v += 1);
        }
        tracing::info!(%node, zone = %hello.zone, "agent session opened");
        let (down, down_rx) = mpsc::channel(256);
        tokio::spawn(serve_session(shared, node, inbound, down));
        Ok(Response::new(Box::pin(ReceiverStream::new(down_rx))))
    }
}

async fn serve_session(
    shared: Arc<Shared>,
    node: String,
    mut inbound: Streaming<pb::AgentMessage>,
    down: mpsc::Sender<Result<pb::CollectorMessage, Status>>,
) {
    let mut membership = shared.membership.subscribe();
    membership.mark_changed();
    let message = |body| Ok(pb::CollectorMessage { body: Some(body) });
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => {
                let _ = down.send(Err(Status::unavailable("collector shutting down"))).await;
                break;
            }
            Ok(()) = membership.changed() => {
                let peers = shared.state.lock().await.peer_set(&node);
                if down.send(message(collector_message::Body::PeerSet(pb::PeerSet { peers }))).await.is_err() {
                    break;
                }
            }
            next = inbound.message() => {
                let window = match next {
                    Ok(Some(pb::AgentMessage { body: Some(agent_message::Body::Window(window)) })) => window,
                    Ok(Some(_)) => {
                        let _ = down.send(Err(Status::invalid_argument("only windows may follow the hello"))).await;
                        break;
                    }
                    Ok(None) => break,
                    Err(status) => {
                        tracing::debug!(%node, %status, "session stream error");
                        break;
                    }
                };
                let ack = {
                    let mut state = shared.state.lock().await;
                    let ack = match state.ingest(&node, &window, now_ms()) {
                        Ok(Ingested::Accepted) => pb::Ack { seq: window.seq, code: 0, message: String::new() },
                        Ok(Ingested::Duplicate) => pb::Ack { seq: window.seq, code: 0, message: "duplicate".into() },
                        Err(invalid) => {
                            tracing::warn!(%node, seq = window.seq, reason = %invalid, "window refused");
                            pb::Ack { seq: window.seq, code: tonic::Code::InvalidArgument.into(), message: invalid.0 }
                        }
                    };
                    shared.changes.send_replace(state.version());
                    ack
                };
                if down.send(message(collector_message::Body::Ack(ack))).await.is_err() {
                    break;
                }
            }
        }
    }
    tracing::info!(%node, "agent session closed");
}

/// The Scores service.
pub struct ScoresService(pub Arc<Shared>);

type WatchStream = Pin<Box<dyn Stream<Item = Result<pb::Matrix, Status>> + Send>>;

#[tonic::async_trait]
impl pb::scores_server::Scores for ScoresService {
    type WatchMatrixStream = WatchStream;

    async fn get_matrix(
        &self,
        _: Request<pb::MatrixRequest>,
    ) -> Result<Response<pb::Matrix>, Status> {
        Ok(Response::new(self.0.matrix().await))
    }

    async fn get_zones(
        &self,
        _: Request<pb::ZonesRequest>,
    ) -> Result<Response<pb::ZoneSummary>, Status> {
        let state = self.0.state.lock().await;
        Ok(Response::new(convert::zones(
            &state.snapshot(now_ms()).zones(),
        )))
    }

    async fn rank(
        &self,
        request: Request<pb::RankRequest>,
    ) -> Result<Response<pb::RankResponse>, Status> {
        let request = request.into_inner();
        let job = job_request(request)?;
        let state = self.0.state.lock().await;
        let ranking = placement::rank(&state.snapshot(now_ms()), &job, &state.config().placement);
        Ok(Response::new(convert::ranking(&ranking)))
    }

    async fn watch_matrix(
        &self,
        request: Request<pb::WatchRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let interval = match request.into_inner().min_interval_ms {
            0 => DEFAULT_WATCH_INTERVAL,
            ms => Duration::from_millis(u64::from(ms)).max(MIN_WATCH_INTERVAL),
        };
        let shared = Arc::clone(&self.0);
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            let mut changes = shared.changes.subscribe();
            loop {
                if tx.send(Ok(shared.matrix().await)).await.is_err() {
                    return;
                }
                tokio::select! {
                    () = shared.shutdown.cancelled() => return,
                    () = tx.closed() => return,
                    _ = tokio::time::sleep(WATCH_REFRESH) => {}
                    changed = changes.changed() => if changed.is_err() { return },
                }
                tokio::select! {
                    () = shared.shutdown.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// A rank request, checked.
fn job_request(request: pb::RankRequest) -> Result<JobRequest, Status> {
    if request.size == 0 || request.size > MAX_JOB_SIZE {
        return Err(Status::invalid_argument(format!(
            "size must be between 1 and {MAX_JOB_SIZE}"
        )));
    }
    if request.placed.len() > MAX_RANK_NAMES || request.candidates.len() > MAX_RANK_NAMES {
        return Err(Status::invalid_argument(format!(
            "at most {MAX_RANK_NAMES} placed or candidate names"
        )));
    }
    for name in request.placed.iter().chain(&request.candidates) {
        check_name("node", name, false).map_err(|e| {
            Status::invalid_argument(format!("{} (names are at most {MAX_NAME_LEN} bytes)", e.0))
        })?;
    }
    Ok(JobRequest {
        size: request.size as usize,
        placed: request.placed,
        candidates: (!request.candidates.is_empty()).then_some(request.candidates),
        strict_zone: request.strict_zone,
    })
}
