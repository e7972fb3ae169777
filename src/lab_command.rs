//! `netaware lab`: builds a lab and keeps it up, so that anyone can run
//! programs in its hosts (`ip netns exec NAMESPACE ...`) until Ctrl-C.

use std::time::Duration;

use netaware_lab::Lab;
use std::sync::atomic::Ordering::Relaxed;
use tokio_util::sync::CancellationToken;

use crate::demo::lab::load_topology;

/// Builds the lab of `topology`, prints its hosts, and waits for `shutdown`
/// or `duration`; then prints what the emulator did and removes the lab.
pub async fn run(
    topology: &str,
    duration: Option<Duration>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let spec = load_topology(topology)?;
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
