//! `netaware scheduler`: the kube-scheduler extender, until SIGINT or
//! SIGTERM.

/// Runs the extender these flags describe.
pub async fn run(args: netaware_scheduler::cli::SchedulerArgs) -> anyhow::Result<()> {
    let shutdown = netaware_runtime::shutdown_on_signal()?;
    Ok(netaware_scheduler::cli::run(args, shutdown).await?)
}
