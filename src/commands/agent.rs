//! `netaware agent`: the node agent, until SIGINT or SIGTERM.

/// Runs the agent these flags describe.
pub async fn run(args: netaware_agent::cli::AgentArgs) -> anyhow::Result<()> {
    Ok(netaware_agent::run_until_signal(args.config().await?).await?)
}
