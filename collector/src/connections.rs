//! The gRPC port's connections, bounded: at most so many at once in all
//! and from one client address, and each must send its first bytes (the
//! HTTP/2 preface, or a TLS ClientHello) soon after it is accepted.
//!
//! tonic accepts whatever its listener gives it and holds a connection
//! that never sends a byte for ever; this listener is what it is given
//! instead ([`incoming`]). Connections past a cap are closed at once,
//! unread; a silent one gets an error on its next read, which ends it.
//! Each is counted in `netaware_collector_connections_refused_total{reason}`.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::metrics::{ConnectionRefusal, WorkMetrics};

/// What the gRPC port admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections at once in all (`--max-connections`): one per agent,
    /// and a few for extenders and tools.
    pub max_total: usize,
    /// Connections at once from one client address
    /// (`--max-connections-per-client`): an agent has one.
    pub max_per_client: usize,
    /// How long a new connection may take to send its first
    /// [`FIRST_BYTES`].
    pub first_bytes_within: Duration,
}

/// What a client sends first on any gRPC connection: the HTTP/2 client
/// preface is 24 bytes, a TLS ClientHello longer.
pub const FIRST_BYTES: usize = 24;

impl ConnectionLimits {
    /// Connections at once by default: 20,000 agents with room to spare.
    pub const DEFAULT_MAX_TOTAL: usize = 30_000;
    /// Connections at once from one address by default.
    pub const DEFAULT_MAX_PER_CLIENT: usize = 16;
    /// How long a new connection may stay silent by default.
    pub const DEFAULT_FIRST_BYTES_WITHIN: Duration = Duration::from_secs(10);
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_total: Self::DEFAULT_MAX_TOTAL,
            max_per_client: Self::DEFAULT_MAX_PER_CLIENT,
            first_bytes_within: Self::DEFAULT_FIRST_BYTES_WITHIN,
        }
    }
}

/// The connections open now, in all and by client address.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// The accepted connections, as tonic's `serve_with_incoming` takes them.
pub type Incoming = ReceiverStream<io::Result<Connection>>;

/// The accepted connections after their TLS handshake.
pub type IncomingTls = ReceiverStream<io::Result<tokio_rustls::server::TlsStream<Connection>>>;

/// The connections of `incoming` once their TLS handshake is done, by
/// `config` (its certificate read again when its files change); one
/// whose handshake fails or takes longer than `within` is closed and
/// counted. Handshakes run side by side, so a slow one holds up no other.
/// tonic's own TLS would load its certificate once; doing it here is what
/// lets a renewed certificate be served without a restart, and keeps the
/// client's certificate where tonic reads it (`peer_certs`).
pub fn over_tls(
    mut incoming: Incoming,
    config: Arc<rustls::ServerConfig>,
    within: Duration,
    work: Arc<WorkMetrics>,
) -> IncomingTls {
    use tokio_stream::StreamExt;
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let (secured, stream) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Some(connection) = incoming.next().await {
            let Ok(connection) = connection else {
                continue;
            };
            let (acceptor, secured, work) = (acceptor.clone(), secured.clone(), Arc::clone(&work));
            tokio::spawn(async move {
                match tokio::time::timeout(within, acceptor.accept(connection)).await {
                    Ok(Ok(stream)) => {
                        let _ = secured.send(Ok(stream)).await;
                    }
                    Ok(Err(err)) => {
                        work.connection_refused(ConnectionRefusal::TlsHandshake);
                        tracing::debug!(%err, "gRPC TLS handshake refused");
                    }
                    Err(_) => {
                        work.connection_refused(ConnectionRefusal::TlsHandshake);
                        tracing::debug!("gRPC TLS handshake timed out");
                    }
                }
            });
        }
    });
    ReceiverStream::new(stream)
}

/// Accepts on `listener` until `shutdown` (or until the server drops the
/// stream), admitting what `limits` allow.
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
    work: Arc<WorkMetrics>,
    shutdown: CancellationToken,
) -> Incoming {
    let (admitted, stream) = mpsc::channel(64);
    let open = Arc::new(Mutex::new(Open::default()));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => return,
                () = admitted.closed() => return,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors, mostly: the next accept may
                    // do; a pause keeps the loop from spinning.
                    tracing::warn!(%err, "accepting a gRPC connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(slot) = Slot::take(&open, peer, limits, &work) else {
                drop(stream);
                continue;
            };
            let connection = Connection {
                stream,
                _slot: slot,
                silent_until: Some(Box::pin(tokio::time::sleep(limits.first_bytes_within))),
                first_bytes: 0,
                work: Arc::clone(&work),
            };
            if admitted.send(Ok(connection)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(stream)
}

/// A connection's place in the counts, given back when it closes.
#[derive(Debug)]
struct Slot {
    open: Arc<Mutex<Open>>,
    client: IpAddr,
    /// `netaware_collector_grpc_connections`.
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl Slot {
    /// A place for a connection from `peer`, if the limits leave one.
    fn take(
        open: &Arc<Mutex<Open>>,
        peer: SocketAddr,
        limits: ConnectionLimits,
        work: &WorkMetrics,
    ) -> Option<Self> {
        let client = peer.ip();
        let mut counts = open.lock().unwrap_or_else(PoisonError::into_inner);
        let from_client = counts.by_client.get(&client).copied().unwrap_or(0);
        let refusal = if counts.total >= limits.max_total {
            Some(ConnectionRefusal::TooMany)
        } else if from_client >= limits.max_per_client {
            Some(ConnectionRefusal::TooManyFromClient)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            drop(counts);
            work.connection_refused(refusal);
            tracing::warn!(%peer, reason = refusal.as_str(), "gRPC connection closed at once");
            return None;
        }
        counts.total += 1;
        *counts.by_client.entry(client).or_default() += 1;
        work.grpc_connections.set(counts.total as i64);
        Some(Self {
            open: Arc::clone(open),
            client,
            gauge: work.grpc_connections.clone(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        self.gauge.set(counts.total as i64);
        if let Some(count) = counts.by_client.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                counts.by_client.remove(&self.client);
            }
        }
    }
}

/// An admitted connection: a TCP stream that must say something soon.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    _slot: Slot,
    /// Until the first bytes are in: when the connection counts as silent.
    silent_until: Option<Pin<Box<tokio::time::Sleep>>>,
    first_bytes: usize,
    work: Arc<WorkMetrics>,
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            this.first_bytes += buf.filled().len() - before;
            if this.first_bytes >= FIRST_BYTES {
                this.silent_until = None;
            }
        }
        if read.is_pending()
            && let Some(silent_until) = &mut this.silent_until
            && silent_until.as_mut().poll(cx).is_ready()
        {
            this.silent_until = None;
            this.work.connection_refused(ConnectionRefusal::Silent);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "a new connection sent too little too late",
            )));
        }
        read
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl tonic::transport::server::Connected for Connection {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}
