//! The collector's command-line flags, shared by the `netaware-collector`
//! binary and `netaware collector`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use netaware_core::blocks::BlockConfig;
use netaware_core::faults::FaultConfig;
use netaware_core::placement::PlacementConfig;
use netaware_core::score::{ScoreConfig, Weights};

use crate::config::ThroughputConfig;
use crate::node_places::NodePlaces;
use crate::{CollectorConfig, CollectorError, ConfigError, ModelConfig, StateConfig, inventory};

/// The collector's command-line flags.
#[derive(Debug, Clone, clap::Args)]
pub struct CollectorArgs {
    /// gRPC address (agent sessions, Scores, health, reflection).
    #[arg(long, default_value = "0.0.0.0:7470")]
    pub listen: SocketAddr,
    /// HTTP address (/healthz).
    #[arg(long, default_value = "0.0.0.0:9470")]
    pub metrics_listen: SocketAddr,
    /// YAML list of nodes that run no agent: [{name, address, zone, region}].
    #[arg(long)]
    pub inventory: Option<PathBuf>,
    /// Save the state (scores, exactly-once marks) in this directory and
    /// restore it at start.
    #[arg(long, env = "NETAWARE_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// TLS on the gRPC port (and HTTPS on the HTTP port).
    #[command(flatten)]
    pub tls: netaware_runtime::tls::TlsArgs,
    #[command(flatten)]
    /// The HTTPS flags of the collector's HTTP endpoints.
    pub http_tls: netaware_runtime::tls::HttpTlsArgs,
    /// Time between two saves of the state (one more on shutdown).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub state_interval: Duration,
    /// WatchMatrix streams served at once (extenders follow with one each);
    /// more are refused with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = crate::WatchLimits::DEFAULT_MAX_WATCHERS as u32,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_watchers: u32,
    /// gRPC connections served at once (one per agent, a few for
    /// extenders and tools); more are closed at once.
    #[arg(long, default_value_t = crate::ConnectionLimits::DEFAULT_MAX_TOTAL as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// gRPC connections served at once from one client address (an agent
    /// has one); more are closed at once.
    #[arg(long, default_value_t = crate::ConnectionLimits::DEFAULT_MAX_PER_CLIENT as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_client: u32,
    /// Take each agent's zone and region from its Node's
    /// topology.kubernetes.io labels (RBAC: get on nodes) and refuse a
    /// hello that says otherwise.
    #[arg(long)]
    pub zones_from_nodes: bool,
    /// Check each agent's pod service-account token (audience netaware)
    /// with a TokenReview (RBAC: create tokenreviews, get nodes): the
    /// token's node must be the hello's, and the hello's addresses the
    /// Node's. A hello without a valid token is refused.
    #[arg(long)]
    pub agent_tokens: bool,
    /// The service account whose tokens speak for nodes.
    #[arg(long, default_value = crate::agent_tokens::DEFAULT_AGENT_ACCOUNT)]
    pub agent_service_account: String,
    /// Node pairs exported on /metrics with series of their own (five
    /// figures each, over every network): all of them while they fit,
    /// else the worst by quality, loss and RTT inflation. Every pair stays
    /// in the zone pair and block aggregates.
    #[arg(long, default_value_t = crate::pair_series::DEFAULT_PAIR_SERIES)]
    pub pair_series: usize,
    #[command(flatten)]
    /// The score, placement and throughput flags.
    pub model: ModelArgs,
}

/// Score model and placement settings (docs/score-model.md).
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Weight of the delay term.
    #[arg(long, default_value_t = 0.4)]
    pub weight_delay: f64,
    /// Weight of the loss term.
    #[arg(long, default_value_t = 0.3)]
    pub weight_loss: f64,
    /// Weight of the throughput term.
    #[arg(long, default_value_t = 0.3)]
    pub weight_throughput: f64,
    /// Median RTT plus jitter (ms) at which the delay term is 0.5.
    #[arg(long, default_value_t = 1.0)]
    pub delay_reference_ms: f64,
    /// Loss ratio at which the loss term reaches 0.
    #[arg(long, default_value_t = 0.05)]
    pub loss_ceiling: f64,
    /// Goodput (bit/s) at which the throughput term reaches 1.
    #[arg(long, default_value_t = 10e9)]
    pub throughput_reference_bps: f64,
    /// Subtracted from zone averages that stand in for missing data.
    #[arg(long, default_value_t = 0.25)]
    pub fallback_penalty: f64,
    /// Windows kept per pair.
    #[arg(long, default_value_t = 6)]
    pub windows_kept: usize,
    /// Most peers each agent probes: a few nodes of every other zone, and
    /// its own zone whole while it fits, else a sample that rotates (0:
    /// everyone probes everyone, at any size).
    #[arg(long, default_value_t = crate::config::DEFAULT_MAX_PEERS)]
    pub max_peers: usize,
    /// How long each rotation step of bounded peer sets lasts: a zone of
    /// m nodes is probed pair by pair within ceil((m - 1) / sample) steps.
    #[arg(long, default_value = "5m", value_parser = parse_rotation)]
    pub peer_rotation: Duration,
    /// Time between two passes of the network coordinates over the
    /// measured RTT medians.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub coordinate_interval: Duration,
    /// Time between two rounds of the measured topology (blocks of close
    /// nodes, degraded marks, costs between zones; `GetTopology`).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub topology_interval: Duration,
    /// Two groups of a zone's nodes are one block while the mean RTT
    /// between them is at most this many times the zone's typical
    /// nearest-neighbour RTT.
    #[arg(long, default_value_t = 1.5)]
    pub block_cut_ratio: f64,
    /// Rounds in a row that must show a node in another block, or its
    /// degraded mark changed, before the published topology moves it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub block_confirmations: u32,
    /// The least loss ratio a fault (a node, a block's uplink, a zone link,
    /// a path) is named for (`netaware faults`).
    #[arg(long, default_value_t = 0.005)]
    pub fault_min_loss: f64,
    /// The least RTT a fault must add (ms) to be named.
    #[arg(long, default_value_t = 0.2)]
    pub fault_min_delay: f64,
    /// The least share of its class's goodput a fault (a node, a block's
    /// uplink) must take away to be named, from throughput tests of the
    /// last 15 minutes.
    #[arg(long, default_value_t = 0.25)]
    pub fault_min_goodput_drop: f64,
    /// Loss to a placed worker above which placement fails a node.
    #[arg(long, default_value_t = 0.05)]
    pub loss_threshold: f64,
    /// Factor on the scores of nodes outside the chosen zone.
    #[arg(long, default_value_t = 0.1)]
    pub out_of_zone_factor: f64,
    /// Share of a placed worker's median goodput below which a node's
    /// goodput with it fails the node (0: never).
    #[arg(long, default_value_t = 0.2)]
    pub min_goodput_fraction: f64,
    /// Fail nodes outside a job's zone instead of scoring them low. Like
    /// the other placement flags, it travels with the matrix: the extender
    /// places by it.
    #[arg(long)]
    pub strict_zone: bool,
    /// Share of each node's time that throughput tests may take on each
    /// network (0 plans none). One round over n nodes takes about 2 (n - 1) x (test + 1.5 s)
    /// / budget.
    #[arg(long, default_value_t = 0.02)]
    pub throughput_budget: f64,
    /// Measured part of each throughput test.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub throughput_duration: Duration,
    /// Warm-up of each throughput test, left out of the result.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    pub throughput_omit: Duration,
    /// Parallel TCP streams per throughput test.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub throughput_streams: u32,
    /// Test throughput only between nodes of the same zone (large clusters).
    #[arg(long)]
    pub throughput_same_zone_only: bool,
    /// Most throughput tests at once in the whole cluster, on each network
    /// (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub throughput_max_concurrent: usize,
}

impl ModelArgs {
    /// The model these flags describe, checked.
    pub fn model(&self) -> Result<ModelConfig, CollectorError> {
        let score = ScoreConfig {
            weights: Weights {
                delay: self.weight_delay,
                loss: self.weight_loss,
                throughput: self.weight_throughput,
            },
            delay_reference_ms: self.delay_reference_ms,
            loss_ceiling: self.loss_ceiling,
            throughput_reference_bps: self.throughput_reference_bps,
            fallback_penalty: self.fallback_penalty,
            ..ScoreConfig::default()
        }
        .validated()
        .map_err(ConfigError::from)?;
        let placement = PlacementConfig {
            loss_threshold: self.loss_threshold,
            out_of_zone_factor: self.out_of_zone_factor,
            min_goodput_fraction: self.min_goodput_fraction,
            strict_zone: self.strict_zone,
        }
        .checked()
        .map_err(ConfigError::from)?;
        if !(self.block_cut_ratio.is_finite() && (1.0..=100.0).contains(&self.block_cut_ratio)) {
            return Err(ConfigError::BlockCutRatio.into());
        }
        if self.windows_kept == 0 {
            return Err(ConfigError::NoWindowsKept.into());
        }
        let fault_sizes_ok = self.fault_min_loss > 0.0
            && self.fault_min_loss < 1.0
            && self.fault_min_delay.is_finite()
            && self.fault_min_delay > 0.0
            && self.fault_min_goodput_drop > 0.0
            && self.fault_min_goodput_drop < 1.0;
        if !fault_sizes_ok {
            return Err(ConfigError::FaultSize.into());
        }
        let millis = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let throughput = if self.throughput_budget == 0.0 {
            None
        } else {
            if self.throughput_duration.is_zero()
                || self.throughput_duration + self.throughput_omit > Duration::from_secs(60)
            {
                return Err(ConfigError::ThroughputDuration.into());
            }
            Some(
                ThroughputConfig::new(
                    self.throughput_budget,
                    millis(self.throughput_omit),
                    millis(self.throughput_duration),
                    self.throughput_streams,
                    self.throughput_same_zone_only,
                    (self.throughput_max_concurrent > 0).then_some(self.throughput_max_concurrent),
                )
                .map_err(ConfigError::from)?,
            )
        };
        Ok(ModelConfig {
            throughput,
            score,
            placement,
            windows_kept: self.windows_kept,
            max_peers: self.max_peers,
            peer_rotation: self.peer_rotation,
            coordinate_interval: self.coordinate_interval.max(Duration::from_millis(100)),
            blocks: BlockConfig {
                cut_ratio: self.block_cut_ratio,
                confirmations: self.block_confirmations,
                ..BlockConfig::default()
            },
            topology_interval: self.topology_interval.max(Duration::from_millis(100)),
            faults: FaultConfig {
                min_loss: self.fault_min_loss,
                min_delay_ms: self.fault_min_delay,
                min_goodput_drop: self.fault_min_goodput_drop,
                ..FaultConfig::default()
            },
        })
    }
}

impl CollectorArgs {
    /// The configuration these flags describe, with the inventory read
    /// and, with `--zones-from-nodes` or `--agent-tokens`, a client of the
    /// Kubernetes API.
    pub async fn config(&self) -> Result<CollectorConfig, CollectorError> {
        let client = if self.zones_from_nodes || self.agent_tokens {
            Some(
                kube::Client::try_default()
                    .await
                    .map_err(ConfigError::Kube)?,
            )
        } else {
            None
        };
        let node_places = client
            .clone()
            .filter(|_| self.zones_from_nodes)
            .map(|client| std::sync::Arc::new(NodePlaces::new(client)));
        let agent_tokens = client.filter(|_| self.agent_tokens).map(|client| {
            std::sync::Arc::new(crate::agent_tokens::AgentTokens::new(
                client,
                &self.agent_service_account,
            ))
        });
        let inventory = match &self.inventory {
            Some(path) => inventory::load(path).map_err(ConfigError::from)?,
            None => Vec::new(),
        };
        let tls = self.tls.load().map_err(ConfigError::from)?;
        Ok(CollectorConfig {
            listen: self.listen,
            metrics_listen: self.metrics_listen,
            inventory,
            model: self.model.model()?,
            http_tls: self
                .http_tls
                .server(tls.as_ref())
                .map_err(ConfigError::from)?,
            tls,
            state: self.state_dir.clone().map(|dir| StateConfig {
                dir,
                every: self.state_interval.max(Duration::from_millis(100)),
            }),
            node_places,
            watch: crate::WatchLimits {
                max_watchers: self.max_watchers as usize,
                ..crate::WatchLimits::default()
            },
            connections: crate::ConnectionLimits {
                max_total: self.max_connections as usize,
                max_per_client: self.max_connections_per_client as usize,
                ..crate::ConnectionLimits::default()
            },
            agent_tokens,
            pair_series: self.pair_series,
        })
    }
}

/// A rotation step: at least a few windows' time, so that a pair's figures
/// fill before its probing moves on.
fn parse_rotation(text: &str) -> Result<Duration, String> {
    let step = humantime::parse_duration(text).map_err(|err| err.to_string())?;
    if step < Duration::from_secs(30) {
        return Err(format!(
            "{text} is shorter than 30s: a pair's windows would not fill"
        ));
    }
    Ok(step)
}
