//! `netaware lab-forge` (hidden; a test helper): the host it runs in
//! answers ICMP echo requests ahead of time (`netaware_lab::forger`),
//! until SIGINT or SIGTERM. The lab's tests run it to show that a node
//! that lies about its replies is seen as it is.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Forges replies until a signal; prints how many.
pub async fn run(shutdown: tokio_util::sync::CancellationToken) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    tokio::spawn(async move {
        shutdown.cancelled().await;
        flag.store(true, Ordering::Relaxed);
    });
    let forged = tokio::task::spawn_blocking(move || {
        netaware_lab::forger::run(|| stop.load(Ordering::Relaxed))
    })
    .await??;
    println!("forged {forged} echo replies");
    Ok(())
}
