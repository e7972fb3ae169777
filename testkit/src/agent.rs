//! A real agent on loopback, probing fast.

use std::net::IpAddr;
use std::time::Duration;

use netaware_agent::{Agent, AgentConfig};
use netaware_collector::Collector;
use tokio_util::sync::CancellationToken;

/// The port of the test agents' /metrics, on each agent's own address.
pub const AGENT_METRICS_PORT: u16 = 9471;

/// An agent with short windows (1 s) and fast probes (100 ms), serving
/// /metrics on its address and [`AGENT_METRICS_PORT`].
pub fn start_agent(
    name: &str,
    address: &str,
    zone: &str,
    collector: &Collector,
    shutdown: &CancellationToken,
) -> Agent {
    start_agent_with(name, address, zone, collector, shutdown, |config| config)
}

/// [`start_agent`], its configuration changed by `change` first.
pub fn start_agent_with(
    name: &str,
    address: &str,
    zone: &str,
    collector: &Collector,
    shutdown: &CancellationToken,
    change: impl FnOnce(AgentConfig) -> AgentConfig,
) -> Agent {
    let address: IpAddr = address.parse().unwrap();
    let config = AgentConfig {
        interval: Duration::from_millis(100),
        window: Duration::from_secs(1),
        probe_timeout: Duration::from_millis(500),
        metrics_port: Some(AGENT_METRICS_PORT),
        ..AgentConfig::new(
            name,
            vec![address],
            zone,
            &format!("http://{}", collector.grpc_addr),
        )
    };
    Agent::start(change(config), shutdown.clone()).expect("agent starts")
}
