//! Serving an HTTP router, over plain HTTP or over HTTPS, until shutdown:
//! the one way every netaware endpoint that is not gRPC (/metrics,
//! /healthz, the scheduler extender's verbs) is served, so that TLS and
//! draining behave the same on all of them.
//!
//! Every connection, plain or TLS, is held to the same limits: a client
//! has [`HANDSHAKE_TIMEOUT`] to finish its TLS handshake and to send a
//! request's headers, so one that connects and says nothing holds no task
//! for long; and at most [`MAX_CONNECTIONS`] are served at once, beyond
//! which new ones are closed at once (with a warning), so that a
//! flood of idle connections cannot take the descriptors that scrapes and
//! kube-scheduler's calls need. axum's own `serve` has neither limit.
//! Every connection a limit closes is counted by reason in the process's
//! `…_http_connections_refused_total` ([`register_refusals`]).

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The HTTPS set-up of an HTTP endpoint (see [`crate::tls::HttpTlsArgs`]).
pub type HttpsConfig = Arc<rustls::ServerConfig>;

/// How long a client has to finish the TLS handshake, and to send a
/// request's headers.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Most connections served at once on one endpoint (a Prometheus or two,
/// kube-scheduler's calls and a few people: far fewer).
pub const MAX_CONNECTIONS: usize = 512;

/// Why a limit closed an HTTP connection.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum Refusal {
    /// [`ConnectionLimits::max_connections`] were open.
    TooMany,
    /// Its TLS handshake did not end within the header timeout.
    TlsHandshake,
    /// Its request's headers did not come within the header timeout.
    HeaderTimeout,
}

impl Refusal {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooMany => "too_many",
            Self::TlsHandshake => "tls_handshake",
            Self::HeaderTimeout => "header_timeout",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    reason: &'static str,
}

/// Connections closed by a limit, by reason, over every endpoint of the
/// process (one process serves one or two).
static REFUSED: LazyLock<Family<RefusalLabels, Counter>> = LazyLock::new(Family::default);

/// How many connections the limits closed for `reason` so far.
pub fn refused(reason: Refusal) -> u64 {
    REFUSED
        .get_or_create(&RefusalLabels {
            reason: reason.as_str(),
        })
        .get()
}

fn count(reason: Refusal) {
    REFUSED
        .get_or_create(&RefusalLabels {
            reason: reason.as_str(),
        })
        .inc();
}

/// Registers the count of connections the limits closed, as
/// `http_connections_refused_total{reason}` under `registry`'s prefix.
pub fn register_refusals(registry: &mut Registry) {
    registry.register(
        "http_connections_refused",
        "HTTP connections closed by the endpoints' limits, by reason: too_many (past the cap of connections at once), tls_handshake and header_timeout (not done within 10 s)",
        REFUSED.clone(),
    );
}

/// How long open connections get to finish after shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What one client may hold of an endpoint.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Most connections served at once.
    pub max_connections: usize,
    /// How long a client has to finish its TLS handshake, and to send a
    /// request's headers.
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: MAX_CONNECTIONS,
            header_timeout: HANDSHAKE_TIMEOUT,
        }
    }
}

/// Serves `app` on `listener` until `shutdown`: over HTTPS with `tls`,
/// else plain HTTP, within the default [`ConnectionLimits`].
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<HttpsConfig>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve_within(listener, app, tls, shutdown, ConnectionLimits::default()).await
}

/// [`serve`] within `limits`.
pub async fn serve_within(
    listener: TcpListener,
    app: axum::Router,
    tls: Option<HttpsConfig>,
    shutdown: CancellationToken,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors and the like: wait rather than spin.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = limits.max_connections, "too many HTTP connections: closed a new one");
            count(Refusal::TooMany);
            continue;
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let _slot = slot;
            let Some(acceptor) = acceptor else {
                serve_connection(stream, app, watcher, peer, limits).await;
                return;
            };
            match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => serve_connection(stream, app, watcher, peer, limits).await,
                Ok(Err(err)) => tracing::debug!(%peer, %err, "TLS handshake refused"),
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    count(Refusal::TlsHandshake);
                }
            }
        });
    }
    // Connections in flight finish their request; idle keep-alive ones
    // close. One that will not is cut off after the drain timeout.
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
    Ok(())
}

/// Serves HTTP/1.1 on one connection, plain or TLS, until it closes or
/// shutdown drains it.
async fn serve_connection<S>(
    stream: S,
    app: axum::Router,
    watcher: Watcher,
    peer: SocketAddr,
    limits: ConnectionLimits,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    if let Err(err) = watcher.watch(connection).await {
        if err.is_timeout() {
            count(Refusal::HeaderTimeout);
        }
        tracing::debug!(%peer, %err, "HTTP connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// A short header timeout, for the test that waits for it.
    const SHORT: ConnectionLimits = ConnectionLimits {
        max_connections: 3,
        header_timeout: Duration::from_millis(300),
    };
    /// A long one, so that held connections never reach it on a busy
    /// machine.
    const LONG: ConnectionLimits = ConnectionLimits {
        max_connections: 3,
        header_timeout: Duration::from_secs(60),
    };

    async fn endpoint(limits: ConnectionLimits) -> (SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
        let shutdown = CancellationToken::new();
        tokio::spawn(serve_within(listener, app, None, shutdown.clone(), limits));
        (addr, shutdown)
    }

    /// Reads until the server closes; the bytes read.
    async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
        let mut read = Vec::new();
        let wait = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut read));
        wait.await.expect("the server closes").unwrap();
        read
    }

    async fn get(addr: SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
        stream.write_all(request).await.unwrap();
        String::from_utf8_lossy(&read_to_close(&mut stream).await).into_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_connection_is_closed_after_the_header_timeout() {
        let (addr, _shutdown) = endpoint(SHORT).await;
        let before = refused(Refusal::HeaderTimeout);
        // Before the connect: the server's clock starts at its accept,
        // which may come before this task runs again after connecting.
        let started = std::time::Instant::now();
        let mut silent = TcpStream::connect(addr).await.unwrap();
        read_to_close(&mut silent).await;
        assert!(
            started.elapsed() >= SHORT.header_timeout,
            "{:?}",
            started.elapsed()
        );
        assert!(get(addr).await.ends_with("ok"));
        // Counted (other tests of this process may count theirs too).
        assert!(refused(Refusal::HeaderTimeout) > before);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_beyond_the_cap_are_closed_and_the_held_ones_are_served() {
        let (addr, _shutdown) = endpoint(LONG).await;
        let before = refused(Refusal::TooMany);
        let mut held = Vec::new();
        for _ in 0..LONG.max_connections {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            // A request's first bytes: the connection is taken, not idle.
            stream.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
            held.push(stream);
        }
        // The server has accepted them all before the next one: each
        // answered once the request is whole.
        let mut extra = TcpStream::connect(addr).await.unwrap();
        let read = read_to_close(&mut extra).await;
        assert!(read.is_empty(), "{}", String::from_utf8_lossy(&read));
        assert!(refused(Refusal::TooMany) > before);
        for mut stream in held {
            stream
                .write_all(b"host: x\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let answer = read_to_close(&mut stream).await;
            assert!(String::from_utf8_lossy(&answer).ends_with("ok"));
        }
        // Their slots are free again.
        assert!(get(addr).await.ends_with("ok"));
    }
}
