//! `netaware demo`: the whole system on this machine.
//!
//! As root it runs on the lab ([`lab`]): hosts in network namespaces in three
//! zones, joined by emulated links with real delay, loss and rate, the
//! collector in a host of its own and an agent in every other host, each a
//! real `netaware` process. Without root it runs on loopback ([`loopback`]),
//! where every link is the same and the zones differ only by name. Either
//! way it shows progress while the first windows fill, then the zones, the
//! matrix and a placement, and serves until Ctrl-C or the duration ends.

pub mod lab;
pub mod loopback;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Settings of one demo run (the flags of `netaware demo`).
#[derive(Debug, Clone, clap::Args)]
pub struct DemoOptions {
    /// Stop after this long (for example 30s); default: until Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Collector gRPC address (loopback mode).
    #[arg(long, default_value = "127.0.0.1:7470")]
    pub listen: SocketAddr,
    /// Collector HTTP address (loopback mode).
    #[arg(long, default_value = "127.0.0.1:9470")]
    pub metrics_listen: SocketAddr,
    /// Length of the agents' windows.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// Time between two probes to one peer.
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Workers of the sample job; by default as many as the largest zone holds.
    #[arg(long)]
    pub job_size: Option<usize>,
    /// Lab topology: a shipped name (default, small) or a YAML file.
    #[arg(long, default_value = "default")]
    pub topology: String,
    /// Run on loopback even as root.
    #[arg(long)]
    pub loopback: bool,
}

/// Runs the demo on the lab when this process is root, else on loopback.
pub async fn run(options: DemoOptions, shutdown: CancellationToken) -> anyhow::Result<()> {
    if options.loopback {
        println!("netaware demo: on loopback, as asked (--loopback)");
        return loopback::run(options, shutdown).await;
    }
    if !netaware_lab::is_root() {
        println!(
            "netaware demo: on loopback, because the lab needs root (network namespaces, TUN devices)"
        );
        return loopback::run(options, shutdown).await;
    }
    println!("netaware demo: on the lab (emulated multi-zone links; --loopback to skip it)");
    lab::run(options, shutdown).await
}

/// What the demo asks of whichever system it runs.
pub(crate) trait DemoSystem {
    /// (pairs with fresh windows, pairs expected, agents reporting, agents).
    async fn progress(&mut self) -> anyhow::Result<(usize, usize, usize, usize)>;
    /// The zone summary, the matrix and a placement for `job_size`, as text.
    async fn report(&mut self, job_size: usize) -> anyhow::Result<String>;
}

/// Shows progress until every pair has a fresh window (or time is up),
/// prints the report, then waits for Ctrl-C or the deadline.
pub(crate) async fn watch_and_report(
    system: &mut impl DemoSystem,
    job_size: usize,
    deadline: Option<Instant>,
    query_hint: &str,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut ready = false;
    while !shutdown.is_cancelled() && deadline.is_none_or(|d| Instant::now() < d) {
        let (measured, expected, fresh, agents) = system.progress().await?;
        println!(
            "measuring: {measured}/{expected} pairs have fresh windows, {fresh}/{agents} agents reporting"
        );
        if measured == expected && expected > 0 {
            ready = true;
            break;
        }
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    if !ready {
        println!("stopped before every pair had a window; showing what there is");
    }
    println!("{}", system.report(job_size).await?);
    if shutdown.is_cancelled() {
        return Ok(());
    }
    match deadline {
        Some(d) => println!(
            "serving until the duration ends ({:.0} s left); Ctrl-C stops sooner",
            d.saturating_duration_since(Instant::now()).as_secs_f64()
        ),
        None => println!("serving until Ctrl-C; try: {query_hint}"),
    }
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        } => {}
    }
    Ok(())
}
