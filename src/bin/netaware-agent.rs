//! `netaware-agent`: the node agent alone, what the DaemonSet runs on
//! every node. The same agent, flags and environment as `netaware agent`,
//! in a binary of its own: the `netaware` binary also carries the
//! collector, the extender and every tool, and the pages of its code that
//! an agent touches stay resident on every node (BENCHMARKS.md, "The
//! agent's own binary"). It keeps the system's allocator: the services'
//! mimalloc pays for itself on the collector's large snapshots, not on an
//! agent's few kilobytes.

use clap::Parser;
use netaware_agent::cli::AgentCommandLine;

fn main() -> anyhow::Result<()> {
    let cli = AgentCommandLine::parse();
    netaware_runtime::init_logging("info", cli.logs.log_format);
    netaware_agent::runtime()?.block_on(async {
        let config = cli.agent.config().await?;
        Ok(netaware_agent::run_until_signal(config).await?)
    })
}
