//! The netaware collector.
//!
//! Agents stream their windows here; the collector keeps the node registry
//! and the pair matrix, scores every measured pair, and serves the result: over gRPC
//! (`netaware.v1.Scores`: matrix, zones, rank, watch, estimate, topology) beside the agent
//! session service, gRPC health and reflection, and over HTTP (/healthz).
//!
//! It also plans throughput tests between agents and sends the orders down
//! their sessions ([`throughput`]).
//!
//! Layout: [`validate`] and [`state`] are pure (checks and changes, time
//! passed in); [`session`], [`scores`], [`throughput`] and [`http`] are the
//! thin async shells around the [`shared`] state ([`topology`] and
//! [`coordinates`] work on it in the background), whose readers share one
//! scored snapshot ([`snapshots`]); `netaware_proto::convert` maps core
//! types to wire types; [`inventory`] reads the file of agent-less nodes. [`Collector::start`] binds and serves; the binary, the
//! demo and the tests all start it the same way.

pub mod cli;
pub mod coordinates;
pub mod http;
pub mod identity;
pub mod inventory;
pub mod latest;
pub mod members;
pub mod metrics;
pub mod node_places;
pub mod persist;
pub mod robustness;
pub mod saved;
pub mod saved_marks;
pub mod scores;
pub mod session;
pub mod shared;
pub mod snapshots;
pub mod state;
pub mod throughput;
pub mod topology;
pub mod validate;

use std::net::SocketAddr;
use std::sync::Arc;

use netaware_core::NodeInfo;
use netaware_proto::v1::agent_session_server::AgentSessionServer;
use netaware_proto::v1::scores_server::ScoresServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tokio_util::sync::CancellationToken;

use crate::node_places::NodePlaces;
use crate::scores::ScoresService;
use crate::session::SessionService;
use crate::shared::Shared;
pub use crate::state::{CollectorState, ModelConfig};

/// Largest gRPC message the collector decodes or encodes on an agent's
/// session.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Largest message the Scores service sends: gRPC's default limit, so that
/// any client reads it (the matrix goes in pages under it).
pub const MAX_SCORES_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// Why a configuration is unusable, by what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The score model's flags.
    #[error(transparent)]
    Score(#[from] netaware_core::score::ScoreConfigError),
    /// A placement flag outside [0, 1].
    #[error(
        "--loss-threshold, --out-of-zone-factor and --min-goodput-fraction must be between 0 and 1"
    )]
    PlacementOutOfRange,
    /// Blocks cut at a ratio that makes no sense.
    #[error("--block-cut-ratio must be between 1 and 100")]
    BlockCutRatio,
    /// No window would be kept.
    #[error("--windows-kept must be at least 1")]
    NoWindowsKept,
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
    /// gRPC refused the TLS configuration.
    #[error("TLS: {0}")]
    GrpcTls(#[source] tonic::transport::Error),
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
    pub inventory: Vec<NodeInfo>,
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
}

/// `--state-dir` and `--state-interval`.
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// The directory of `state.json`.
    pub dir: std::path::PathBuf,
    /// Time between saves (and one more on shutdown).
    pub every: std::time::Duration,
}

/// A running collector.
pub struct Collector {
    /// The bound gRPC address (useful with port 0).
    pub grpc_addr: SocketAddr,
    /// The bound HTTP address.
    pub http_addr: SocketAddr,
    shared: Arc<Shared>,
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

        let (state, accepted) = match &config.state {
            Some(saving) => initial_state(&config, saving)?,
            None => (
                CollectorState::new(config.model, config.inventory.clone()),
                Vec::new(),
            ),
        };
        let node_identity = config
            .tls
            .as_ref()
            .is_some_and(netaware_runtime::tls::Tls::requires_client_certificates);
        let shared = Shared::new(
            state,
            shutdown.clone(),
            node_identity,
            config.node_places.clone(),
        );
        if config.state.is_some() {
            // What was restored is on disk: acks say so from the start.
            let restored = shared.state().saved_nodes();
            shared.saved_marks.saved(&restored);
        }
        tokio::spawn(Arc::clone(&shared).keep_snapshot_current());
        for (node, count) in accepted {
            shared.work.node_seen(&node);
            shared
                .work
                .windows_accepted
                .get_or_create(&metrics::NodeLabels { node })
                .inc_by(count);
        }
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
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = &config.tls {
            let tls = tls.server().map_err(ConfigError::from)?;
            server = server.tls_config(tls).map_err(ConfigError::GrpcTls)?;
        }
        let router = server
            .add_service(health)
            .add_service(reflection)
            .add_service(
                AgentSessionServer::new(SessionService(Arc::clone(&shared)))
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES),
            )
            .add_service(
                ScoresServer::new(ScoresService(Arc::clone(&shared)))
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_SCORES_MESSAGE_BYTES),
            );
        let mut tasks = tokio::task::JoinSet::new();
        let grpc_shutdown = shutdown.clone();
        tasks.spawn(async move {
            let incoming = TcpListenerStream::new(grpc);
            if let Err(err) = router
                .serve_with_incoming_shutdown(incoming, grpc_shutdown.cancelled_owned())
                .await
            {
                tracing::error!(%err, "gRPC server failed");
            }
        });
        tasks.spawn(throughput::run(Arc::clone(&shared)));
        tasks.spawn(coordinates::run(Arc::clone(&shared)));
        tasks.spawn(topology::run(Arc::clone(&shared)));
        if let Some(saving) = &config.state {
            tasks.spawn(persist::run(
                Arc::clone(&shared),
                saving.dir.clone(),
                saving.every,
            ));
        }
        let app = http::router(Arc::clone(&shared));
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
            shared,
            tasks,
        })
    }

    /// The shared state, for in-process callers (the demo, tests).
    pub fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }

    /// Waits until both servers have stopped.
    pub async fn wait(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// The state saved in `--state-dir` and the windows accepted from each
/// node so far, or an empty state when there is none or it cannot be used
/// (then the file is set aside and the log says why).
fn initial_state(
    config: &CollectorConfig,
    saving: &StateConfig,
) -> Result<(CollectorState, Vec<(String, u64)>), CollectorError> {
    let empty = || {
        (
            CollectorState::new(config.model, config.inventory.clone()),
            Vec::new(),
        )
    };
    persist::prepare(&saving.dir).map_err(ConfigError::from)?;
    let problem = match persist::load(&saving.dir) {
        Ok(None) => return Ok(empty()),
        Ok(Some(saved)) => {
            match CollectorState::restored(config.model, config.inventory.clone(), &saved) {
                Ok(state) => {
                    tracing::info!(
                        nodes = saved.nodes.len(),
                        pairs = saved.pairs.len(),
                        saved_at = saved.saved_at,
                        "state restored"
                    );
                    let accepted = saved
                        .nodes
                        .into_iter()
                        .map(|n| (n.name, n.accepted))
                        .collect();
                    return Ok((state, accepted));
                }
                Err(invalid) => invalid.0,
            }
        }
        Err(err) => err.to_string(),
    };
    match persist::set_aside(&saving.dir) {
        Ok(aside) => tracing::error!(
            problem,
            aside = %aside.display(),
            "the saved state cannot be used: starting empty"
        ),
        Err(err) => {
            tracing::error!(problem, %err, "the saved state cannot be used: starting empty")
        }
    }
    Ok(empty())
}

/// Runs a collector until SIGINT or SIGTERM: the body of
/// `netaware-collector` and `netaware collector`.
pub async fn run_until_signal(config: CollectorConfig) -> Result<(), CollectorError> {
    let shutdown = netaware_runtime::shutdown_on_signal().map_err(CollectorError::Signals)?;
    Collector::start(config, shutdown).await?.wait().await;
    Ok(())
}
