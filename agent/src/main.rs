//! `netaware-agent`: the node agent binary. Identity comes from flags or the
//! environment (the DaemonSet passes NODE_NAME and HOST_IP from the
//! downward API); stops cleanly on SIGINT or SIGTERM.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use netaware_agent::{Agent, AgentConfig};

/// Measures RTT and loss to the peers the collector names, and reports them.
#[derive(Debug, Parser)]
#[command(name = "netaware-agent", version)]
struct Args {
    /// Name of this node.
    #[arg(long, env = "NETAWARE_NODE")]
    node: String,
    /// Address of this node that peers probe (repeat for more).
    #[arg(
        long = "address",
        env = "NETAWARE_ADDRESS",
        value_delimiter = ',',
        required = true
    )]
    addresses: Vec<IpAddr>,
    /// Zone of this node.
    #[arg(long, env = "NETAWARE_ZONE")]
    zone: String,
    /// Region of this node.
    #[arg(long, env = "NETAWARE_REGION", default_value = "")]
    region: String,
    /// Collector URL.
    #[arg(
        long,
        env = "NETAWARE_COLLECTOR",
        default_value = "http://127.0.0.1:7470"
    )]
    collector: String,
    /// Time between two probes to one peer.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Length of a measurement window.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    window: Duration,
    /// How long a probe waits for its reply.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    probe_timeout: Duration,
    /// Most unacknowledged windows kept while the collector is away.
    #[arg(long, default_value_t = 60)]
    max_buffered_windows: usize,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    netaware_runtime::init_logging("info");
    let args = Args::parse();
    let config = AgentConfig {
        region: args.region,
        interval: args.interval,
        window: args.window,
        probe_timeout: args.probe_timeout,
        max_buffered_windows: args.max_buffered_windows,
        ..AgentConfig::new(&args.node, args.addresses, &args.zone, &args.collector)
    };
    let shutdown = netaware_runtime::shutdown_on_signal()?;
    let agent = Agent::start(config, shutdown).context("starting the agent")?;
    let counters = agent.counters();
    agent.wait().await;
    tracing::info!(summary = %counters.summary(), "agent stopped");
    Ok(())
}
