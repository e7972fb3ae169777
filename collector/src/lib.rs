//! The netaware collector.
//!
//! Agents stream their windows here; the collector keeps the node registry
//! and the pair matrix, scores every measured pair, and serves the result: over gRPC
//! (`netaware.v1.Scores`: matrix, zones, rank, watch, estimate, topology) beside the agent
//! session service, gRPC health and reflection, and over HTTP (/healthz,
//! /metrics, and a live web view at /ui/).
//!
//! It also plans throughput tests between agents and sends the orders down
//! their sessions ([`tasks::throughput`]).
//!
//! Layout, each layer reading only those below it:
//!
//! 1. [`config`] (the flags' settings), [`validate`] (every field from an
//!    agent, checked), [`inventory`], [`members`], [`saved`] (the saved
//!    state's records and their framing): leaves.
//! 2. [`state`]: the collector's state and every change to it, pure (time
//!    passed in); [`metrics`] counts the work.
//! 3. [`ingest`] (the state behind its lock, and each change noticed),
//!    [`snapshots`] (the one scored snapshot every reader shares, built
//!    off the lock), [`agents`] (open sessions and membership),
//!    [`saved_marks`] (how far the last save reaches), [`watchers`] (the
//!    watch streams open, and how far each has got).
//! 4. The shells: [`connections`] (the gRPC port's listener, bounded),
//!    [`session`] (agents), [`scores`] (the Scores service), [`http`]
//!    (/metrics, /healthz), [`web`] (the live web view and its JSON API,
//!    answered through the Scores service), [`persist`] (the state
//!    directory's files);
//!    and the background [`tasks`] (snapshot builds, coordinates,
//!    topology, throughput tests, saves). Each is given only the parts it
//!    needs.
//!
//! `netaware_proto::convert` maps core types to wire types.
//! [`Collector::start`] binds and serves; `netaware collector`, the demo
//! and the tests all start it so.

pub mod agent_tokens;
pub mod agents;
pub mod cli;
pub mod config;
pub mod connections;
#[cfg(test)]
mod fixtures;
pub mod http;
pub mod identity;
pub mod ingest;
pub mod inventory;
pub mod members;
pub mod metrics;
pub mod node_places;
pub mod pair_series;
pub mod persist;
pub mod robustness;
pub mod rtt_histograms;
pub mod runbooks;
pub mod saved;
pub mod saved_marks;
pub mod scores;
pub mod seq_marks;
pub mod session;
pub mod snapshots;
pub mod state;
pub mod tasks;
pub mod validate;
pub mod watchers;
pub mod web;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use netaware_proto::parts;
use netaware_proto::v1 as pb;
use netaware_proto::v1::agent_session_server::AgentSessionServer;
use netaware_proto::v1::scores_server::ScoresServer;
use tokio::net::TcpListener;
use tokio_stream::Stream;
use tokio_util::sync::CancellationToken;

use crate::agents::Agents;
pub use crate::config::{ModelConfig, ThroughputConfig};
pub use crate::connections::ConnectionLimits;
use crate::ingest::Ingest;
use crate::metrics::WorkMetrics;
use crate::node_places::NodePlaces;
use crate::saved_marks::SavedMarks;
use crate::scores::ScoresService;
use crate::session::SessionService;
use crate::snapshots::Snapshots;
pub use crate::state::CollectorState;
use crate::tasks::topology::SharedTopology;

/// A server-streaming gRPC answer.
pub type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send>>;

/// Largest request the Scores service decodes (its requests are small).
pub const MAX_SCORES_REQUEST_BYTES: usize = 1 << 20;
/// Largest message the Scores service sends: gRPC's default limit, so that
/// any client reads it (the matrix goes in pages under it).
pub const MAX_SCORES_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// How long a session may take to say hello before it is ended: a stream
/// that never speaks would otherwise hold its task and buffers for ever.
pub const HELLO_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
/// Most streams at once on one HTTP/2 connection: an agent needs one, a
/// follower a few.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 64;
/// How often an idle connection is pinged, and how long its answer may
/// take before the connection is closed: a peer that vanished (a node
/// powered off, a cut link) frees its session within 40 s.
pub const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the WatchMatrix streams may hold: each keeps the matrix version it
/// last sent (shared with every other reader, for the next delta) and a
/// page or two of updates not yet taken, so their number and how long a
/// stream may wait bound the collector's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchLimits {
    /// Streams served at once (`--max-watchers`); more are refused with
    /// RESOURCE_EXHAUSTED.
    pub max_watchers: usize,
    /// Streams served at once to one client address: a client that opens
    /// streams and never reads them takes this many slots, not all.
    pub max_per_client: usize,
    /// Longest an update may wait to be taken by the client's stream before
    /// the stream is cut off as stalled.
    pub send_deadline: std::time::Duration,
}

impl WatchLimits {
    /// Streams served at once by default: an extender follows with one,
    /// tools with a few.
    pub const DEFAULT_MAX_WATCHERS: usize = 64;
    /// Streams served at once to one address by default.
    pub const DEFAULT_MAX_PER_CLIENT: usize = 8;
    /// How long an update may wait by default.
    pub const DEFAULT_SEND_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);
    /// Full states and deltas built at once, whatever the number of
    /// streams: each is a pass over the matrix, hundreds of milliseconds
    /// and tens of megabytes for a large cluster.
    pub const BUILDS_AT_ONCE: usize = 2;
}

impl Default for WatchLimits {
    fn default() -> Self {
        Self {
            max_watchers: Self::DEFAULT_MAX_WATCHERS,
            max_per_client: Self::DEFAULT_MAX_PER_CLIENT,
            send_deadline: Self::DEFAULT_SEND_DEADLINE,
        }
    }
}

/// Why a configuration is unusable, by what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The score model's flags.
    #[error(transparent)]
    Score(#[from] netaware_core::score::ScoreConfigError),
    /// A placement flag outside [0, 1].
    #[error(transparent)]
    Placement(#[from] netaware_core::placement::PlacementConfigError),
    /// Blocks cut at a ratio that makes no sense.
    #[error("--block-cut-ratio must be between 1 and 100")]
    BlockCutRatio,
    /// No window would be kept.
    #[error("--windows-kept must be at least 1")]
    NoWindowsKept,
    /// The least fault worth naming makes no sense.
    #[error(
        "--fault-min-loss and --fault-min-goodput-drop must be above 0 and below 1, --fault-min-delay above 0 ms"
    )]
    FaultSize,
    /// A throughput test of no length, or longer than a minute.
    #[error("--throughput-duration must be above 0 and, with --throughput-omit, at most 60 s")]
    ThroughputDuration,
    /// The throughput planner's flags.
    #[error(transparent)]
    ThroughputPlan(#[from] netaware_core::throughput_plan::PlanError),
    /// The inventory file.
    #[error(transparent)]
    Inventory(#[from] inventory::InventoryError),
    /// The TLS flags or files.
    #[error(transparent)]
    Tls(#[from] netaware_runtime::tls::TlsError),
    /// The state directory cannot be used.
    #[error(transparent)]
    StateDir(#[from] persist::PersistError),
    /// `--zones-from-nodes` without access to a Kubernetes API.
    #[error(
        "--zones-from-nodes: no Kubernetes API credentials (is the collector running in a pod?): {0}"
    )]
    Kube(#[source] kube::Error),
}

/// Errors that stop the collector.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The configuration is unusable.
    #[error("invalid collector configuration: {0}")]
    Config(#[from] ConfigError),
    /// SIGINT and SIGTERM handlers could not be installed.
    #[error("cannot listen for shutdown signals: {0}")]
    Signals(std::io::Error),
    /// The reflection service could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(String),
}

/// Where the collector listens and how it scores.
#[derive(Debug, Clone)]
pub struct CollectorConfig {
    /// gRPC address.
    pub listen: SocketAddr,
    /// HTTP address (/healthz).
    pub metrics_listen: SocketAddr,
    /// Nodes without agents.
    pub inventory: Vec<inventory::InventoryNode>,
    /// Score model and placement.
    pub model: ModelConfig,
    /// Where the state is saved, and how often (`None`: nowhere).
    pub state: Option<StateConfig>,
    /// TLS on the gRPC port (`None`: plain text); with a client CA, mutual
    /// TLS and node identity.
    pub tls: Option<netaware_runtime::tls::Tls>,
    /// HTTPS on the HTTP port (`None`: plain HTTP).
    pub http_tls: Option<netaware_runtime::http::HttpsConfig>,
    /// The Kubernetes API that agents' zones are read from
    /// (`--zones-from-nodes`); `None`: each hello's zone is taken as said.
    pub node_places: Option<Arc<NodePlaces>>,
    /// What watch streams may hold.
    pub watch: WatchLimits,
    /// What the gRPC port admits.
    pub connections: ConnectionLimits,
    /// The Kubernetes API that agents' tokens are checked with
    /// (`--agent-tokens`); `None`: a hello's node is taken as said (or as
    /// its certificate names it, under mutual TLS).
    pub agent_tokens: Option<Arc<agent_tokens::AgentTokens>>,
    /// Node pairs exported with Prometheus series of their own
    /// (`--pair-series`; see [`pair_series`]).
    pub pair_series: usize,
}

/// `--state-dir` and `--state-interval`.
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// The directory of the saved state (see [`persist`]).
    pub dir: std::path::PathBuf,
    /// Time between saves (and one more on shutdown).
    pub every: std::time::Duration,
}

/// A running collector.
#[derive(Debug)]
pub struct Collector {
    /// The bound gRPC address (useful with port 0).
    pub grpc_addr: SocketAddr,
    /// The bound HTTP address.
    pub http_addr: SocketAddr,
    ingest: Arc<Ingest>,
    snapshots: Arc<Snapshots>,
    work: Arc<WorkMetrics>,
    tasks: tokio::task::JoinSet<()>,
}

impl Collector {
    /// Binds both listeners and starts serving until `shutdown`.
    pub async fn start(
        config: CollectorConfig,
        shutdown: CancellationToken,
    ) -> Result<Self, CollectorError> {
        let bind = |addr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| CollectorError::Bind { addr, source })
        };
        let grpc = bind(config.listen).await?;
        let http = bind(config.metrics_listen).await?;
        let grpc_addr = grpc.local_addr().map_err(|source| CollectorError::Bind {
            addr: config.listen,
            source,
        })?;
        let http_addr = http.local_addr().map_err(|source| CollectorError::Bind {
            addr: config.metrics_listen,
            source,
        })?;

        limit_open_files(&config.connections);

        // Taken before the state is read, held by the saver to its last save.
        let state_lock = match &config.state {
            Some(saving) => Some(persist::prepare(&saving.dir).map_err(ConfigError::from)?),
            None => None,
        };
        let (mut state, accepted, files) = match &config.state {
            Some(saving) => {
                let initial = initial_state(&config, saving)?;
                (initial.state, initial.accepted, Some(initial.files))
            }
            None => (
                CollectorState::new(config.model, config.inventory.clone()),
                Vec::new(),
                None,
            ),
        };
        if files.is_some() {
            state.start_journal();
        }
        let node_identity = config
            .tls
            .as_ref()
            .is_some_and(netaware_runtime::tls::Tls::requires_client_certificates);
        let model = *state.config();
        let snapshots = Arc::new(Snapshots::new(&state, netaware_runtime::clock::now_ms()));
        let ingest = Arc::new(Ingest::new(state));
        let agents = Arc::new(Agents::new(&ingest));
        let work = Arc::new(WorkMetrics::default());
        let saved_marks = Arc::new(SavedMarks::default());
        let topology = Arc::new(SharedTopology::default());
        if config.state.is_some() {
            // What was restored is on disk: acks say so from the start.
            let restored = ingest.state().agent_marks();
            saved_marks.saved(
                restored
                    .iter()
                    .map(|(node, instance, seq)| (node.as_str(), *instance, *seq)),
            );
        }
        for (node, count) in accepted {
            work.node_seen(&node);
            work.windows_accepted
                .get_or_create(&metrics::NodeLabels { node })
                .inc_by(count);
        }
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(tasks::snapshots::run(
            Arc::clone(&ingest),
            Arc::clone(&snapshots),
            Arc::clone(&work),
            shutdown.clone(),
        ));
        let sessions = SessionService {
            ingest: Arc::clone(&ingest),
            agents: Arc::clone(&agents),
            saved_marks: Arc::clone(&saved_marks),
            work: Arc::clone(&work),
            node_identity,
            node_places: config.node_places.clone(),
            agent_tokens: config.agent_tokens.clone(),
            shutdown: shutdown.clone(),
        };
        let scores = ScoresService {
            ingest: Arc::clone(&ingest),
            snapshots: Arc::clone(&snapshots),
            topology: Arc::clone(&topology),
            work: Arc::clone(&work),
            confirmations: model.blocks.confirmations,
            watchers: Arc::new(watchers::Watchers::new(config.watch)),
            send_deadline: config.watch.send_deadline,
            builds: Arc::new(tokio::sync::Semaphore::new(WatchLimits::BUILDS_AT_ONCE)),
            shutdown: shutdown.clone(),
        };
        let (health_reporter, health) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<ScoresServer<ScoresService>>()
            .await;
        health_reporter
            .set_serving::<AgentSessionServer<SessionService>>()
            .await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(netaware_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| CollectorError::Reflection(e.to_string()))?;
        let mut server = tonic::transport::Server::builder()
            .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT));
        let grpc_tls = match &config.tls {
            Some(tls) => Some(tls.grpc_server().map_err(ConfigError::from)?),
            None => None,
        };
        let router = server
            .add_service(health)
            .add_service(reflection)
            .add_service(
                AgentSessionServer::new(sessions)
                    .max_decoding_message_size(parts::MAX_AGENT_MESSAGE_BYTES)
                    .max_encoding_message_size(parts::MAX_COLLECTOR_MESSAGE_BYTES),
            )
            .add_service(
                ScoresServer::new(scores.clone())
                    .max_decoding_message_size(MAX_SCORES_REQUEST_BYTES)
                    .max_encoding_message_size(MAX_SCORES_MESSAGE_BYTES),
            );
        let grpc_shutdown = shutdown.clone();
        let incoming = connections::incoming(
            grpc,
            config.connections,
            Arc::clone(&work),
            shutdown.clone(),
        );
        let within = config.connections.first_bytes_within;
        let tls_work = Arc::clone(&work);
        tasks.spawn(async move {
            let stopped = grpc_shutdown.cancelled_owned();
            let served = match grpc_tls {
                None => router.serve_with_incoming_shutdown(incoming, stopped).await,
                Some(tls) => {
                    let incoming = connections::over_tls(incoming, tls, within, tls_work);
                    router.serve_with_incoming_shutdown(incoming, stopped).await
                }
            };
            if let Err(err) = served {
                tracing::error!(%err, "gRPC server failed");
            }
        });
        tasks.spawn(tasks::throughput::run(
            Arc::clone(&ingest),
            Arc::clone(&agents),
            shutdown.clone(),
        ));
        tasks.spawn(tasks::coordinates::run(
            Arc::clone(&snapshots),
            Arc::clone(&work),
            model.coordinate_interval,
            shutdown.clone(),
        ));
        tasks.spawn(tasks::topology::run(
            Arc::clone(&snapshots),
            Arc::clone(&topology),
            Arc::clone(&work),
            model,
            shutdown.clone(),
        ));
        if let (Some(saving), Some(lock), Some(files)) = (&config.state, state_lock, files) {
            let saver = tasks::persist::Saver {
                ingest: Arc::clone(&ingest),
                work: Arc::clone(&work),
                saved_marks,
                files,
                lock,
            };
            tasks.spawn(tasks::persist::run(saver, saving.every, shutdown.clone()));
        }
        let app = http::router(http::HttpState {
            ingest: Arc::clone(&ingest),
            snapshots: Arc::clone(&snapshots),
            agents,
            work: Arc::clone(&work),
            topology: Arc::clone(&topology),
            pair_series: config.pair_series,
        })
        .merge(web::router(scores));
        tasks.spawn(async move {
            let served = netaware_runtime::http::serve(http, app, config.http_tls, shutdown).await;
            if let Err(err) = served {
                tracing::error!(%err, "HTTP server failed");
            }
        });
        tracing::info!(%grpc_addr, %http_addr, "collector listening");
        Ok(Self {
            grpc_addr,
            http_addr,
            ingest,
            snapshots,
            work,
            tasks,
        })
    }

    /// The state, for in-process callers (the demo, tests).
    pub fn ingest(&self) -> &Ingest {
        &self.ingest
    }

    /// The counters of the collector's work, for in-process callers.
    pub fn work(&self) -> &WorkMetrics {
        &self.work
    }

    /// The wire matrix of a snapshot as fresh as a reader gets.
    pub async fn matrix(&self) -> pb::Matrix {
        let snapshot = self.snapshots.for_reader(&self.ingest, &self.work).await;
        netaware_proto::convert::matrix_to_wire(&snapshot.placer, snapshot.version, snapshot.at)
    }

    /// Waits until both servers have stopped.
    pub async fn wait(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Descriptors the collector holds besides its agents' connections: HTTP
/// connections (at most 512), watchers, the state's files.
const OTHER_FILES: u64 = 1024;

/// Raises the limit on open files as far as it goes, and warns when it
/// still holds fewer connections than `--max-connections`: past it, accepts
/// fail with "too many open files" and the state's saves with them.
fn limit_open_files(connections: &ConnectionLimits) {
    let (limit, error) = netaware_runtime::open_files::raise_to_hard_limit();
    if let Some(err) = error {
        tracing::warn!(%err, "raising the limit on open files");
    }
    let needed = connections.max_total as u64 + OTHER_FILES;
    if !limit.allows(needed) {
        let soft = limit.soft.unwrap_or(u64::MAX);
        tracing::warn!(
            open_files = soft,
            max_connections = connections.max_total,
            agents_at_most = soft.saturating_sub(OTHER_FILES),
            "the limit on open files holds fewer connections than --max-connections: raise the container's nofile limit"
        );
    }
}

/// What a collector starts from with `--state-dir`.
struct InitialState {
    state: CollectorState,
    /// Windows accepted from each node over the collector's lifetimes.
    accepted: Vec<(String, u64)>,
    /// The directory's files, for the saver.
    files: persist::Files,
}

/// The state saved in `--state-dir` and the windows accepted from each
/// node so far, or an empty state when there is none or none can be used
/// (then the log says why, and damaged files are kept aside).
fn initial_state(
    config: &CollectorConfig,
    saving: &StateConfig,
) -> Result<InitialState, CollectorError> {
    let fresh = || state::Restored::new(config.model, config.inventory.clone());
    let loaded = persist::load(&saving.dir, fresh).map_err(ConfigError::from)?;
    for problem in &loaded.problems {
        tracing::error!(problem, "reading the saved state");
    }
    let files = persist::Files::open(&saving.dir, &loaded).map_err(ConfigError::from)?;
    let Some(restored) = loaded.restored else {
        if loaded.newest > 0 {
            tracing::error!("no saved state can be used: starting empty");
        }
        return Ok(InitialState {
            state: CollectorState::new(config.model, config.inventory.clone()),
            accepted: Vec::new(),
            files,
        });
    };
    let skipped = restored.skipped;
    if skipped != state::Skipped::default() {
        tracing::warn!(
            nodes = skipped.nodes,
            pairs = skipped.pairs,
            windows = skipped.windows,
            "saved records left out: they fail the checks a live report must pass"
        );
    }
    tracing::info!(
        nodes = restored.state.node_count(),
        pairs = restored.state.matrix().pair_count(),
        records = restored.records,
        generation = loaded.generation,
        "state restored"
    );
    Ok(InitialState {
        state: restored.state,
        accepted: restored.accepted.into_iter().collect(),
        files,
    })
}

/// Runs a collector until SIGINT or SIGTERM: the body of
/// `netaware-collector` and `netaware collector`.
pub async fn run_until_signal(config: CollectorConfig) -> Result<(), CollectorError> {
    let shutdown = netaware_runtime::shutdown_on_signal().map_err(CollectorError::Signals)?;
    Collector::start(config, shutdown).await?.wait().await;
    Ok(())
}
