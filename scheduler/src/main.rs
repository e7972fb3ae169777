//! `netaware-scheduler`: the kube-scheduler extender, beside kube-scheduler
//! (by default on 127.0.0.1:8888, the sidecar case). Stops cleanly on
//! SIGINT or SIGTERM. The flags and the process live in the library
//! (`netaware_scheduler::cli`), shared with `netaware scheduler`.

use clap::Parser;
use netaware_scheduler::cli::SchedulerArgs;

/// Filters and scores nodes for kube-scheduler from netaware's measurements.
#[derive(Debug, Parser)]
#[command(name = "netaware-scheduler", version)]
struct Cli {
    #[command(flatten)]
    args: SchedulerArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    netaware_runtime::init_logging("info");
    let cli = Cli::parse();
    let shutdown = netaware_runtime::shutdown_on_signal()?;
    netaware_scheduler::cli::run(cli.args, shutdown).await?;
    Ok(())
}
