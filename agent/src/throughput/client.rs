//! The throughput client: opens the streams with the token, sends for the
//! warm-up and the measured part, reads on each stream how many bytes the
//! server acknowledged over the measured part, and checks the server's
//! count against that ([`super::claims`]).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, timeout, timeout_at};

use super::claims::{self, Acked};
use super::wire::{Counted, Header, RESULT_LEN, Status, Token};
use super::{CHUNK_BYTES, Outcome, ThroughputError, tcp_info};

/// Longest wait for a connection or the server's status.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Sending goes on this long past the measured part, so the server's last
/// count falls while data still flows.
const TAIL: Duration = Duration::from_millis(200);

/// One test to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The server's throughput port.
    pub server: SocketAddr,
    /// Local address to send from (the node's own address, which the
    /// server checks); `None` lets the kernel choose.
    pub source: Option<std::net::IpAddr>,
    /// The token the collector issued.
    pub token: Token,
    /// Parallel streams, 1 to [`super::MAX_STREAMS`].
    pub streams: u8,
    /// Warm-up left out.
    pub omit: Duration,
    /// Measured part.
    pub duration: Duration,
    /// SO_SNDBUF for each stream; `None` lets the kernel tune it.
    pub send_buffer: Option<u32>,
}

/// Runs one test.
pub async fn run(plan: &Plan) -> Result<Outcome, ThroughputError> {
    let header = |stream| Header {
        token: plan.token,
        stream,
        streams: plan.streams.max(1),
        omit: plan.omit,
        duration: plan.duration,
    };
    // Stream 0 first: it opens the test on the server.
    let mut streams = vec![open(plan, header(0)).await?];
    for index in 1..plan.streams.max(1) {
        streams.push(open(plan, header(index)).await?);
    }
    let measure_from = Instant::now() + plan.omit;
    let measure_to = measure_from + plan.duration;
    let end = measure_to + TAIL;
    let mut senders = tokio::task::JoinSet::new();
    let mut first = None;
    for (index, stream) in streams.into_iter().enumerate() {
        let (reader, mut writer) = stream.into_split();
        if index == 0 {
            first = Some(reader);
        }
        senders.spawn(async move {
            let chunk = vec![0u8; CHUNK_BYTES];
            let mut acked = AckedReadings::default();
            loop {
                let now = Instant::now();
                acked.read_if_due(writer.as_ref(), now, measure_from, measure_to);
                if now >= end {
                    break;
                }
                match timeout_at(end, writer.write(&chunk)).await {
                    Ok(Ok(_)) | Err(_) => {}
                    Ok(Err(err)) => return Err(ThroughputError::io("sending")(err)),
                }
            }
            let facts = tcp_info::read(writer.as_ref());
            let _ = writer.shutdown().await;
            Ok((facts, acked.over_the_part()))
        });
    }
    let mut facts = Vec::new();
    let mut acked = Vec::new();
    while let Some(joined) = senders.join_next().await {
        let sent = joined.map_err(|e| ThroughputError::Protocol(format!("sender: {e}")))?;
        let (stream_facts, stream_acked) = sent?;
        facts.extend(stream_facts);
        acked.push(stream_acked);
    }
    let mut raw = [0u8; RESULT_LEN];
    let mut reader = first.expect("stream 0 exists");
    match timeout(CONNECT_TIMEOUT, reader.read_exact(&mut raw)).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => return Err(ThroughputError::io("reading the result")(err)),
        Err(_) => {
            return Err(ThroughputError::Protocol(
                "no result from the server".into(),
            ));
        }
    }
    let own = claims::check(&Counted::decode(&raw), &acked)?;
    let known = !facts.is_empty();
    Ok(Outcome {
        goodput_bps: own.goodput_bps,
        bytes: own.bytes,
        measured: own.measured,
        retransmits: known.then(|| facts.iter().map(|f| f.total_retransmits).sum()),
        tcp_rtt_ms: known.then(|| facts.iter().map(|f| f.rtt_ms).sum::<f64>() / facts.len() as f64),
        streams: plan.streams.max(1),
    })
}

/// One stream's acknowledged bytes at the start and the end of the measured
/// part, read between writes.
#[derive(Debug, Default)]
struct AckedReadings {
    start: Option<(u64, Instant)>,
    end: Option<(u64, Instant)>,
    /// The kernel gave no count at one of the readings.
    missing: bool,
}

impl AckedReadings {
    fn read_if_due(
        &mut self,
        socket: &impl std::os::fd::AsRawFd,
        now: Instant,
        from: Instant,
        to: Instant,
    ) {
        let due = if self.start.is_none() {
            now >= from
        } else {
            self.end.is_none() && now >= to
        };
        if !due || self.missing {
            return;
        }
        match tcp_info::read(socket).and_then(|facts| facts.bytes_acked) {
            Some(bytes) if self.start.is_none() => self.start = Some((bytes, now)),
            Some(bytes) => self.end = Some((bytes, now)),
            None => self.missing = true,
        }
    }

    /// The measured part's acknowledged bytes; `None` where the kernel
    /// gave no count (or the part never ended, which a write's timeout at
    /// the end rules out).
    fn over_the_part(&self) -> Option<Acked> {
        let ((first, from), (last, to)) = (self.start?, self.end?);
        Some(Acked {
            bytes: last.saturating_sub(first),
            over: to.duration_since(from),
        })
    }
}

async fn open(plan: &Plan, header: Header) -> Result<TcpStream, ThroughputError> {
    let socket = match plan.server {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(ThroughputError::io("socket"))?;
    if let Some(source) = plan.source {
        socket
            .bind(SocketAddr::new(source, 0))
            .map_err(ThroughputError::io("binding the source address"))?;
    }
    if let Some(bytes) = plan.send_buffer {
        socket
            .set_send_buffer_size(bytes)
            .map_err(ThroughputError::io("SO_SNDBUF"))?;
    }
    let mut stream = match timeout(CONNECT_TIMEOUT, socket.connect(plan.server)).await {
        Ok(connected) => connected.map_err(ThroughputError::io("connect"))?,
        Err(_) => {
            return Err(ThroughputError::Protocol(format!(
                "connect to {} timed out",
                plan.server
            )));
        }
    };
    stream
        .write_all(&header.encode())
        .await
        .map_err(ThroughputError::io("sending the header"))?;
    let mut status = [0u8; 1];
    match timeout(CONNECT_TIMEOUT, stream.read_exact(&mut status)).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => return Err(ThroughputError::io("reading the status")(err)),
        Err(_) => {
            return Err(ThroughputError::Protocol(
                "no status from the server".into(),
            ));
        }
    }
    match Status::from_byte(status[0]) {
        Some(Status::Accepted) => Ok(stream),
        Some(refused) => Err(ThroughputError::Refused(refused)),
        None => Err(ThroughputError::Protocol(format!(
            "unknown status {}",
            status[0]
        ))),
    }
}
