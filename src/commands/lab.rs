//! `netaware lab`: builds a lab and keeps it up, so that anyone can run
//! programs in its hosts (`ip netns exec NAMESPACE ...`) until Ctrl-C.

use std::time::Duration;

use netaware_lab::{Lab, Topology};
use std::sync::atomic::Ordering::Relaxed;
use tokio_util::sync::CancellationToken;

/// The flags of `lab`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {
    /// A shipped topology (default, small, bench, ipv6, dual) or a YAML file.
    #[arg(long, default_value = "default")]
    topology: String,
    /// Remove the lab after this long; default: at Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

/// Builds the lab of the topology, prints its hosts, and waits for
/// `shutdown` or the duration; then prints what the emulator did and
/// removes the lab.
pub async fn run(args: LabArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let LabArgs { topology, duration } = args;
    let topology = topology.as_str();
    let spec = Topology::load(topology)?;
    println!("== Topology {topology:?}\n{}", spec.describe());
    let lab = tokio::task::block_in_place(|| Lab::start(spec))?;
    println!("{:<10} {:<12} {:<14} NAMESPACE", "HOST", "ZONE", "ADDRESS");
    for host in lab.hosts() {
        println!(
            "{:<10} {:<12} {:<14} {}",
            host.spec.name, host.spec.zone, host.spec.address, host.namespace
        );
    }
    println!("lab up; Ctrl-C removes it");
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        } => {}
    }
    if let Some(stats) = lab.stats() {
        println!(
            "emulator: {} forwarded, {} lost, {} queue drops, {} outside the lab; delayed packets left {:.1} us late on average ({} us at most)",
            stats.forwarded.load(Relaxed),
            stats.dropped_loss.load(Relaxed),
            stats.dropped_queue.load(Relaxed),
            stats.dropped_outside.load(Relaxed),
            stats.mean_lateness_us(),
            stats.late_ns_max.load(Relaxed) / 1_000
        );
    }
    tokio::task::block_in_place(|| drop(lab));
    println!("lab removed");
    Ok(())
}
