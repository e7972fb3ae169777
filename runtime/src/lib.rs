//! Process plumbing that every netaware binary shares, so that each one
//! logs the same way and stops the same way.
//!
//! - [`init_logging`]: tracing to stderr, filtered by `RUST_LOG`.
//! - [`shutdown_on_signal`]: a [`CancellationToken`] cancelled on SIGINT or
//!   SIGTERM (what Kubernetes sends before it kills a pod), which every
//!   server and task watches to drain and stop.

use tokio_util::sync::CancellationToken;

/// Logs to stderr at `default_level` unless `RUST_LOG` says otherwise.
pub fn init_logging(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_level.into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// A token that is cancelled on the first SIGINT or SIGTERM.
pub fn shutdown_on_signal() -> std::io::Result<CancellationToken> {
    let token = CancellationToken::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("signal received: shutting down");
        cancel.cancel();
    });
    Ok(token)
}
