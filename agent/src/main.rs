//! `netaware-agent`: the node agent binary. Identity comes from flags or the
//! environment (the DaemonSet passes the node name and host IP from the
//! downward API); stops cleanly on SIGINT or SIGTERM.

use clap::Parser;
use netaware_agent::cli::AgentArgs;

/// Measures RTT and loss to the peers the collector names, and reports them.
#[derive(Debug, Parser)]
#[command(name = "netaware-agent", version)]
struct Cli {
    #[command(flatten)]
    args: AgentArgs,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    netaware_runtime::init_logging("info");
    let args = Cli::parse().args;
    Ok(netaware_agent::run_until_signal(args.config().await?).await?)
}
