//! `netaware reflect`: the agent's STAMP reflector alone, on the given
//! addresses, until SIGINT or SIGTERM. For a host that runs no agent but
//! that the agents should probe by UDP (an inventory node listed with its
//! `stamp_port`), and for benchmarks of the UDP prober.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use netaware_agent::{Counters, reflector};

/// The flags of `reflect`.
#[derive(Debug, clap::Args)]
pub struct ReflectArgs {
    /// Address and UDP port to answer probes on (repeat for more). Bind
    /// each address the probers know the host by: a reply leaves from the
    /// address its probe came to, which the prober checks.
    #[arg(long = "listen", required = true, value_delimiter = ',')]
    listen: Vec<SocketAddr>,
}

/// Answers probes until a signal; says how many.
pub async fn run(args: ReflectArgs) -> anyhow::Result<()> {
    let shutdown = netaware_runtime::shutdown_on_signal()?;
    let counters = Arc::new(Counters::default());
    let mut tasks = tokio::task::JoinSet::new();
    for addr in &args.listen {
        let socket =
            reflector::bind(*addr).with_context(|| format!("cannot listen on UDP {addr}"))?;
        tasks.spawn(reflector::serve(
            socket,
            Arc::clone(&counters),
            shutdown.clone(),
        ));
    }
    tracing::info!(addresses = args.listen.len(), "answering STAMP probes");
    while tasks.join_next().await.is_some() {}
    println!("answered {} probes", Counters::get(&counters.reflected));
    Ok(())
}
