//! `netaware collector`: the collector, until SIGINT or SIGTERM.

/// Runs the collector these flags describe.
pub async fn run(args: netaware_collector::cli::CollectorArgs) -> anyhow::Result<()> {
    Ok(netaware_collector::run_until_signal(args.config().await?).await?)
}
