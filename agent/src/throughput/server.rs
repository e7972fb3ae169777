//! The throughput server: admits test streams that carry a valid token,
//! counts what they send, and reports the count of the measured part back
//! on stream 0. It never sends bulk data.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;

use super::tokens::{BookFull, Expected, TokenBook};
use super::wire::{Counted, HEADER_LEN, Header, Status, Token};
use super::{CHUNK_BYTES, HEADER_TIMEOUT, MAX_CONNECTIONS, tcp_info};
use netaware_runtime::clock::now_ms;

/// How long after its measured part a stream may keep sending before the
/// server closes it.
const DRAIN: Duration = Duration::from_secs(2);

/// Bytes that wake the reader of a test stream.
const RECEIVE_LOW_WATER: u32 = 32 * 1024;

/// Tests in progress: the byte counter of each, by token.
type Running = Mutex<HashMap<Token, Arc<AtomicU64>>>;

/// The throughput server's token book, shared by its listeners (one per
/// address family); clone it to add expected tests.
#[derive(Clone, Debug)]
pub struct ServerHandle {
    book: Arc<Mutex<TokenBook>>,
    /// Connection slots, shared by the listeners.
    slots: Arc<Semaphore>,
}

impl Default for ServerHandle {
    fn default() -> Self {
        Self {
            book: Arc::default(),
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        }
    }
}

impl ServerHandle {
    /// A server that expects no test yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Expects a test.
    pub fn expect(&self, expected: Expected) -> Result<(), BookFull> {
        lock(&self.book).expect(expected, now_ms())
    }

    /// Serves `listener` with this book until `shutdown`.
    pub fn serve(&self, listener: TcpListener, shutdown: CancellationToken) {
        let book = Arc::clone(&self.book);
        let slots = Arc::clone(&self.slots);
        tokio::spawn(async move {
            let running: Arc<Running> = Arc::default();
            loop {
                let (stream, peer) = tokio::select! {
                    () = shutdown.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(accepted) => accepted,
                        Err(err) => {
                            tracing::warn!(%err, "throughput server: accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            continue;
                        }
                    },
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    tracing::debug!(%peer, "throughput server full: connection closed");
                    continue;
                };
                let (book, running) = (Arc::clone(&book), Arc::clone(&running));
                tokio::spawn(async move {
                    let _slot = slot;
                    if let Err(reason) = stream_session(stream, peer.ip(), &book, &running).await {
                        tracing::debug!(%peer, %reason, "throughput stream closed");
                    }
                });
            }
        });
    }
}

/// Binds a listener on `addr`. An unspecified IPv6 address also accepts
/// IPv4; `receive_buffer` sets SO_RCVBUF (else the kernel tunes it).
pub fn bind(addr: SocketAddr, receive_buffer: Option<usize>) -> std::io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        socket.set_only_v6(false)?;
    }
    if let Some(bytes) = receive_buffer {
        socket.set_recv_buffer_size(bytes)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

/// Why a throughput stream ended early.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("no header: {0}")]
    NoHeader(std::io::Error),
    #[error("no header within a second")]
    HeaderTimeout,
    #[error("malformed header")]
    Malformed,
    #[error("refused: {0}")]
    Refused(Status),
    #[error("stream joined a test that is over")]
    TestOver,
    #[error("still sending after the test")]
    StillSending,
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
}

async fn stream_session(
    mut stream: TcpStream,
    client: IpAddr,
    book: &Mutex<TokenBook>,
    running: &Running,
) -> Result<(), StreamError> {
    let mut raw = [0u8; HEADER_LEN];
    match timeout(HEADER_TIMEOUT, stream.read_exact(&mut raw)).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => return Err(StreamError::NoHeader(err)),
        Err(_) => return Err(StreamError::HeaderTimeout),
    }
    let Some(header) = Header::decode(&raw) else {
        refuse(&mut stream, Status::Malformed).await;
        return Err(StreamError::Malformed);
    };
    let status = lock(book).admit(&header, client, now_ms());
    if status != Status::Accepted {
        refuse(&mut stream, status).await;
        tracing::warn!(%client, %status, "throughput stream refused");
        return Err(StreamError::Refused(status));
    }
    stream
        .write_all(&[Status::Accepted.to_byte()])
        .await
        .map_err(|source| StreamError::Io {
            what: "accepting",
            source,
        })?;
    // Bulk data from here on: read it in batches. What waits unread at a
    // count is at most this much, at both ends of the measured part.
    tcp_info::set_receive_low_water(&stream, RECEIVE_LOW_WATER);
    let end = Instant::now() + header.omit + header.duration;
    if header.stream != 0 {
        let counter = lock(running).get(&header.token).cloned();
        let Some(counter) = counter else {
            return Err(StreamError::TestOver);
        };
        return count(&mut stream, &counter, end + DRAIN).await;
    }
    let counter = Arc::new(AtomicU64::new(0));
    lock(running).insert(header.token, Arc::clone(&counter));
    let (mut reader, mut writer) = stream.into_split();
    let reading = {
        let counter = Arc::clone(&counter);
        tokio::spawn(async move { count(&mut reader, &counter, end + DRAIN).await })
    };
    sleep_until(end - header.duration).await;
    let (before, from) = (counter.load(Relaxed), Instant::now());
    sleep_until(end).await;
    let counted = Counted {
        bytes: counter.load(Relaxed) - before,
        measured: from.elapsed(),
    };
    lock(running).remove(&header.token);
    writer
        .write_all(&counted.encode())
        .await
        .map_err(|source| StreamError::Io {
            what: "sending the result",
            source,
        })?;
    let _ = reading.await;
    Ok(())
}

/// Reads and counts until the sender stops or `deadline`.
async fn count(
    stream: &mut (impl AsyncReadExt + Unpin),
    counter: &AtomicU64,
    deadline: Instant,
) -> Result<(), StreamError> {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    loop {
        match timeout_at(deadline, stream.read(&mut buffer)).await {
            Ok(Ok(0)) => return Ok(()),
            Ok(Ok(n)) => {
                counter.fetch_add(n as u64, Relaxed);
            }
            Ok(Err(source)) => {
                return Err(StreamError::Io {
                    what: "reading",
                    source,
                });
            }
            Err(_) => return Err(StreamError::StillSending),
        }
    }
}

async fn refuse(stream: &mut TcpStream, status: Status) {
    let _ = stream.write_all(&[status.to_byte()]).await;
    let _ = stream.shutdown().await;
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these locks leaves nothing half-changed.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
