//! `netaware-collector`: the collector binary. Stops cleanly on SIGINT or
//! SIGTERM.

use clap::Parser;
use netaware_collector::cli::CollectorArgs;

/// Collects agents' measurements, scores node pairs and serves the scores.
#[derive(Debug, Parser)]
#[command(name = "netaware-collector", version)]
struct Cli {
    #[command(flatten)]
    args: CollectorArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    netaware_runtime::init_logging("info");
    let args = Cli::parse().args;
    Ok(netaware_collector::run_until_signal(args.config().await?).await?)
}
