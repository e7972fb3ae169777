//! The agent's session with the collector: one bidirectional gRPC stream.
//!
//! Hello goes first, then every window not yet acknowledged (in order), then
//! each new window as it closes, carrying the throughput results finished
//! since the last one (in parts when it is too large for one message:
//! [`window_parts`]). The collector sends peer sets, which go to the
//! measuring loop, acks, which free the windows once they are safe
//! ([`Outbox`]), and throughput orders, which go to [`Orders`]. Windows
//! wait in a bounded outbox while the collector is away; when the bound
//! forces one out it is counted and logged, never dropped silently.
//! Reconnects back off exponentially (capped) with jitter.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use netaware_proto::parts::{
    MAX_AGENT_MESSAGE_BYTES, MAX_COLLECTOR_MESSAGE_BYTES, window_message, window_parts,
};
use netaware_proto::v1::agent_session_client::AgentSessionClient;
use netaware_proto::v1::{
    AgentMessage, Hello, Peer, ThroughputResult, Window, agent_message, collector_message,
};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::counters::Counters;
use crate::outbox::Outbox;
use crate::throughput::orders::Orders;

/// First and longest pause between two connection attempts, before the
/// jitter: a wait lasts 100 to 200 ms at first and 15 to 30 s at most.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(15);

/// Why a session ended.
enum Ended {
    Shutdown,
    /// Never opened: back off further.
    Failed(String),
    /// Was open, then broke: start again from the shortest pause.
    Lost(String),
    /// Ended by the collector because another agent of this node said
    /// hello after this one (a rolling update with surge, a pod stuck
    /// terminating): the longest pause, so that the two do not take the
    /// node from each other at every reconnect.
    Replaced(String),
}

/// The collector to hold a session with, and what the agent proves its
/// node with.
#[derive(Debug, Clone)]
pub struct Collector {
    /// Its URL (https with TLS).
    pub url: String,
    /// The CA to check it against and the certificate to present, read
    /// again from their files at each connection, so that a renewed
    /// certificate is presented without a restart.
    pub tls: Option<netaware_runtime::tls::Tls>,
    /// The pod's service-account token, read again at each session.
    pub token_file: Option<std::path::PathBuf>,
}

impl Collector {
    /// Where to connect, with the TLS material as its files hold it now.
    fn endpoint(&self) -> Result<tonic::transport::Endpoint, String> {
        let tls = self.tls.as_ref().map(netaware_runtime::tls::Tls::reloaded);
        netaware_runtime::tls::endpoint(&self.url, tls.as_ref()).map_err(|err| err.to_string())
    }

    /// The session request: `messages`, with the token when there is one.
    fn request<T>(&self, messages: T) -> Result<tonic::Request<T>, String> {
        let mut request = tonic::Request::new(messages);
        if let Some(path) = &self.token_file {
            let token = std::fs::read_to_string(path)
                .map_err(|err| format!("reading the token {}: {err}", path.display()))?;
            let value = format!("Bearer {}", token.trim())
                .parse()
                .map_err(|_| format!("the token {} is not a header value", path.display()))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

/// What the session exchanges with the rest of the agent.
#[derive(Debug)]
pub struct Links {
    /// Windows from the measuring loop.
    pub windows: mpsc::Receiver<Window>,
    /// Finished throughput tests, for the next window.
    pub results: mpsc::Receiver<ThroughputResult>,
    /// Peer sets, to the measuring loop.
    pub peers: watch::Sender<Vec<Peer>>,
    /// Carries out throughput orders.
    pub orders: Orders,
}

/// Keeps a session with the collector open until `shutdown`.
pub async fn run(
    collector: Collector,
    hello: Hello,
    mut links: Links,
    mut outbox: Outbox,
    counters: Arc<Counters>,
    shutdown: CancellationToken,
) {
    let mut backoff = netaware_runtime::retry::backoff(BACKOFF_MIN, BACKOFF_MAX);
    let mut attempts = 0u64;
    loop {
        if attempts > 0 {
            counters.reconnects.fetch_add(1, Relaxed);
        }
        attempts += 1;
        let ended = tokio::select! {
            () = shutdown.cancelled() => Ended::Shutdown,
            ended = session(&collector, &hello, &mut links, &mut outbox, &counters, &shutdown) => ended,
        };
        let mut pause = backoff.next().unwrap_or(BACKOFF_MAX);
        match ended {
            Ended::Shutdown => return,
            Ended::Replaced(reason) => {
                pause = BACKOFF_MAX;
                tracing::warn!(collector = %collector.url, %reason, buffered = outbox.len(), pause_s = pause.as_secs(), "another agent of this node speaks for it; saying hello again later");
            }
            Ended::Failed(reason) => {
                tracing::warn!(collector = %collector.url, %reason, buffered = outbox.len(), "no session; retrying");
            }
            Ended::Lost(reason) => {
                // It was reached: the next waits start short again.
                backoff = netaware_runtime::retry::backoff(BACKOFF_MIN, BACKOFF_MAX);
                pause = backoff.next().unwrap_or(BACKOFF_MAX);
                tracing::warn!(collector = %collector.url, %reason, buffered = outbox.len(), "session lost; reconnecting");
            }
        }
        // Wait before the next attempt, still taking in windows meanwhile.
        let deadline = tokio::time::Instant::now() + pause;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(deadline) => break,
                Some(window) = links.windows.recv() => { keep(&mut outbox, window, &mut links.results, &counters); }
            }
        }
    }
}

/// Keeps a closed window in the outbox, with the throughput results
/// finished since the last, as one part or, when it is too large for one
/// message, several ([`window_parts`]); returns the numbered parts.
fn keep(
    outbox: &mut Outbox,
    mut window: Window,
    results: &mut mpsc::Receiver<ThroughputResult>,
    counters: &Counters,
) -> Vec<Window> {
    while let Ok(result) = results.try_recv() {
        window.throughput.push(result);
    }
    let parts = window_parts(window, MAX_AGENT_MESSAGE_BYTES);
    if parts.len() > 1 {
        tracing::debug!(parts = parts.len(), "window sent in parts");
    }
    let mut numbered = Vec::with_capacity(parts.len());
    for part in parts {
        let (part, evicted) = outbox.push(part);
        numbered.push(part);
        if let Some(old) = evicted {
            counters.windows_dropped.fetch_add(1, Relaxed);
            tracing::warn!(
                seq = old.seq,
                "outbox full: oldest unacknowledged window dropped"
            );
        }
    }
    counters
        .windows_buffered
        .store(outbox.len() as u64, Relaxed);
    numbered
}

async fn session(
    collector: &Collector,
    hello: &Hello,
    links: &mut Links,
    outbox: &mut Outbox,
    counters: &Counters,
    shutdown: &CancellationToken,
) -> Ended {
    let endpoint = match collector.endpoint() {
        Ok(endpoint) => endpoint,
        Err(err) => return Ended::Failed(format!("connect: {err}")),
    };
    let mut client = match endpoint.connect().await {
        Ok(channel) => AgentSessionClient::new(channel)
            .max_encoding_message_size(MAX_AGENT_MESSAGE_BYTES)
            .max_decoding_message_size(MAX_COLLECTOR_MESSAGE_BYTES),
        Err(err) => return Ended::Failed(format!("connect: {err:?}")),
    };
    let (up, up_rx) = mpsc::channel::<AgentMessage>(1024);
    // The collector answers only once it has read the hello, so the hello
    // must be in the stream before the call is made.
    let hello_msg = AgentMessage {
        body: Some(agent_message::Body::Hello(Hello {
            sent_unix_ms: netaware_runtime::clock::now_ms(),
            ..hello.clone()
        })),
    };
    if up.send(hello_msg).await.is_err() {
        return Ended::Failed("stream closed before hello".into());
    }
    let request = match collector.request(ReceiverStream::new(up_rx)) {
        Ok(request) => request,
        Err(reason) => return Ended::Failed(reason),
    };
    let mut inbound = match client.session(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return Ended::Failed(format!("session refused: {status}")),
    };
    let replay: Vec<Window> = outbox.pending().cloned().collect();
    if !replay.is_empty() {
        tracing::info!(windows = replay.len(), "replaying unacknowledged windows");
    }
    for window in replay {
        counters.windows_sent.fetch_add(1, Relaxed);
        if up.send(window_message(window)).await.is_err() {
            return Ended::Lost("stream closed during replay".into());
        }
    }
    tracing::info!(collector = %collector.url, "session open");
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ended::Shutdown,
            Some(window) = links.windows.recv() => {
                for part in keep(outbox, window, &mut links.results, counters) {
                    counters.windows_sent.fetch_add(1, Relaxed);
                    if up.send(window_message(part)).await.is_err() {
                        return Ended::Lost("stream closed".into());
                    }
                }
            }
            message = inbound.message() => match message {
                Ok(Some(message)) => match message.body {
                    Some(collector_message::Body::PeerSet(set)) => {
                        tracing::info!(peers = set.peers.len(), "peer set received");
                        links.peers.send_replace(set.peers);
                    }
                    Some(collector_message::Body::ThroughputOrder(order)) => {
                        links.orders.handle(order);
                    }
                    Some(collector_message::Body::Ack(ack)) => {
                        outbox.ack(&ack);
                        counters.windows_buffered.store(outbox.len() as u64, Relaxed);
                        if ack.code == 0 {
                            counters.windows_acked.fetch_add(1, Relaxed);
                        } else if crate::outbox::refused_for_now(ack.code) {
                            tracing::warn!(seq = ack.seq, code = ack.code, message = %ack.message, "window refused for now: kept, to be sent again after a reconnect");
                        } else {
                            counters.windows_rejected.fetch_add(1, Relaxed);
                            tracing::warn!(seq = ack.seq, code = ack.code, message = %ack.message, "window refused by the collector: dropped");
                        }
                    }
                    None => {}
                },
                Ok(None) => return Ended::Lost("collector closed the stream".into()),
                Err(status) if status.code() == tonic::Code::Aborted => {
                    return Ended::Replaced(status.message().to_owned());
                }
                Err(status) => return Ended::Lost(status.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_read_from_its_file_at_each_session() {
        let path = std::env::temp_dir().join(format!("netaware-token-{}", std::process::id()));
        let collector = Collector {
            url: "http://127.0.0.1:1".into(),
            tls: None,
            token_file: Some(path.clone()),
        };
        let header = |collector: &Collector| {
            let request = collector.request(()).unwrap();
            request
                .metadata()
                .get("authorization")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        std::fs::write(&path, "first.token\n").unwrap();
        assert_eq!(header(&collector), "Bearer first.token");
        // kubelet rotated it.
        std::fs::write(&path, "second.token").unwrap();
        assert_eq!(header(&collector), "Bearer second.token");
        std::fs::remove_file(&path).unwrap();
        let err = collector.request(()).unwrap_err();
        assert!(err.contains(&path.display().to_string()), "{err}");
        // Without a token file, no header.
        let plain = Collector {
            token_file: None,
            ..collector
        };
        assert!(
            plain
                .request(())
                .unwrap()
                .metadata()
                .get("authorization")
                .is_none()
        );
    }
}
