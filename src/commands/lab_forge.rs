//! `netaware lab-forge` (hidden; a test helper): the host it runs in lies
//! about its replies until SIGINT or SIGTERM: it answers ICMP echo
//! requests ahead of time (`netaware_lab::forger`), or, with
//! `--lying-reflector PORT`, STAMP requests with a hold longer than the
//! true one (`netaware_lab::lying_reflector`). The lab's tests run it to
//! show that a node that lies is seen as it is.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The flags of `lab-forge`.
#[derive(Debug, clap::Args)]
pub struct LabForgeArgs {
    /// Answer STAMP requests on this UDP port, claiming holds longer than
    /// the true ones, instead of forging echo replies.
    #[arg(long)]
    lying_reflector: Option<u16>,
    /// How much longer than the true hold the lying reflector claims.
    #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
    claim_extra_hold: Duration,
}

/// Lies until a signal; prints how many replies it sent.
pub async fn run(
    args: LabForgeArgs,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    tokio::spawn(async move {
        shutdown.cancelled().await;
        flag.store(true, Ordering::Relaxed);
    });
    let stopped = move || stop.load(Ordering::Relaxed);
    match args.lying_reflector {
        None => {
            let forged =
                tokio::task::spawn_blocking(move || netaware_lab::forger::run(stopped)).await??;
            println!("forged {forged} echo replies");
        }
        Some(port) => {
            let extra = args.claim_extra_hold;
            let answered = tokio::task::spawn_blocking(move || {
                netaware_lab::lying_reflector::run(port, extra, stopped)
            })
            .await??;
            println!("answered {answered} STAMP requests with holds {extra:?} too long");
        }
    }
    Ok(())
}
