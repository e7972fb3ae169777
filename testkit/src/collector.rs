//! A real collector on loopback, configured for tests.

use netaware_collector::{Collector, CollectorConfig, ModelConfig, ThroughputConfig};
use netaware_core::NodeInfo;
use tokio_util::sync::CancellationToken;

/// A collector on an ephemeral loopback port. Its throughput tests are
/// short (0.2 s warm-up, 0.5 s measured) and may take all of a node's
/// time, so that a few agents have every pair measured within seconds.
pub async fn start_collector(inventory: Vec<NodeInfo>, shutdown: &CancellationToken) -> Collector {
    start_collector_with(inventory, None, shutdown).await
}

/// [`start_collector`], saving its state as `state` says.
pub async fn start_collector_with(
    inventory: Vec<NodeInfo>,
    state: Option<netaware_collector::StateConfig>,
    shutdown: &CancellationToken,
) -> Collector {
    Collector::start(collector_config(inventory, state), shutdown.clone())
        .await
        .expect("collector starts")
}

/// [`start_collector`] with its gRPC port on `listen`.
pub async fn start_collector_on(
    listen: std::net::SocketAddr,
    shutdown: &CancellationToken,
) -> Collector {
    let config = CollectorConfig {
        listen,
        ..collector_config(Vec::new(), None)
    };
    Collector::start(config, shutdown.clone())
        .await
        .expect("collector starts")
}

/// The configuration of [`start_collector`].
pub fn collector_config(
    inventory: Vec<NodeInfo>,
    state: Option<netaware_collector::StateConfig>,
) -> CollectorConfig {
    CollectorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        inventory: inventory.into_iter().map(Into::into).collect(),
        model: ModelConfig {
            throughput: Some(ThroughputConfig::new(1.0, 200, 500, 1, false, None).unwrap()),
            ..ModelConfig::default()
        },
        state,
        tls: None,
        http_tls: None,
        node_places: None,
        watch: netaware_collector::WatchLimits::default(),
        connections: netaware_collector::ConnectionLimits::default(),
        agent_tokens: None,
        pair_series: netaware_collector::pair_series::DEFAULT_PAIR_SERIES,
    }
}
