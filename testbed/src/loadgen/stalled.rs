//! Hostile followers beside the fleet: WatchMatrix streams opened at a
//! steady rate, each on a connection of its own, and never read, as a
//! client that stopped reading (or one that means harm) holds them. What
//! the collector must bound: each such stream would otherwise pin the
//! matrix versions and updates it was handed. Against a collector on
//! loopback, each stream comes from a loopback address of its own
//! (127.0.1.1 to 127.0.1.250, in turn), as from that many clients, so
//! that the collector's cap in all is what holds them, not its cap per
//! client.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use netaware_proto::v1 as pb;
use netaware_proto::v1::scores_client::ScoresClient;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// How the stalled streams fared.
#[derive(Debug, Default)]
pub struct StalledCounts {
    opened: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

/// [`StalledCounts`] at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StalledWatchers {
    /// Streams the collector accepted (and this client never read).
    pub opened: u64,
    /// Streams it refused with RESOURCE_EXHAUSTED (its cap on watchers).
    pub refused: u64,
    /// Streams that failed otherwise (connection errors).
    pub failed: u64,
}

impl StalledCounts {
    /// The counts now.
    pub fn read(&self) -> StalledWatchers {
        StalledWatchers {
            opened: self.opened.load(Relaxed),
            refused: self.refused.load(Relaxed),
            failed: self.failed.load(Relaxed),
        }
    }
}

/// Opens `per_s` stalled streams a second to `url` until `stop`, holding
/// every one open (unread) to the end.
pub async fn open_stalled(
    url: String,
    per_s: f64,
    counts: Arc<StalledCounts>,
    stop: CancellationToken,
) {
    let mut held = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / per_s));
    let loopback = super::is_loopback(&url);
    for i in 0u32.. {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let source = loopback.then(|| IpAddr::from([127, 0, 1, (i % 250 + 1) as u8]));
        match open_one(&url, source).await {
            Ok(stream) => {
                counts.opened.fetch_add(1, Relaxed);
                held.push(stream);
            }
            Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                counts.refused.fetch_add(1, Relaxed);
            }
            Err(status) => {
                counts.failed.fetch_add(1, Relaxed);
                tracing::debug!(%status, "stalled watcher not opened");
            }
        }
    }
}

/// One stream on a connection of its own from `source`, with HTTP/2's
/// default (small) windows: the collector can hand it little before it
/// must wait.
async fn open_one(
    url: &str,
    source: Option<IpAddr>,
) -> Result<tonic::Streaming<pb::MatrixUpdate>, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .map_err(|err| tonic::Status::invalid_argument(err.to_string()))?
        .local_address(source)
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .map_err(|err| tonic::Status::unavailable(err.to_string()))?;
    let stream = ScoresClient::new(channel)
        .watch_matrix(pb::WatchRequest::default())
        .await?
        .into_inner();
    Ok(stream)
}
