//! A TCP handshake as a probe, where neither ICMP nor UDP gets through:
//! the round trip from SYN to SYN-ACK towards the peer's throughput port,
//! as the kernel measured it (`TCP_INFO`'s RTT right after the handshake,
//! the sample the SYN-ACK gave), then a reset, so that neither end keeps
//! the connection. A peer whose port refuses answers as quickly: a reset
//! is a round trip too, and counts as one.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::net::TcpSocket;

use crate::pending::ProbeError;
use crate::throughput::tcp_info;

/// One handshake from `local` (the agent's address of the peer's family)
/// to `target`, done by `deadline`.
pub async fn probe(
    local: Option<IpAddr>,
    target: SocketAddr,
    deadline: Instant,
) -> Result<Duration, ProbeError> {
    let failed = |err: std::io::Error| ProbeError::Failed(err.to_string());
    let socket = match target {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(failed)?;
    if let Some(ip) = local {
        socket.bind(SocketAddr::new(ip, 0)).map_err(failed)?;
    }
    let started = Instant::now();
    match tokio::time::timeout_at(deadline.into(), socket.connect(target)).await {
        Err(_) => Err(ProbeError::Timeout),
        Ok(Ok(stream)) => {
            let rtt = tcp_info::read(&stream).map_or_else(
                || started.elapsed(),
                |facts| Duration::from_secs_f64(facts.rtt_ms / 1e3),
            );
            // A reset on close (a linger of zero never blocks): no
            // TIME_WAIT left behind for every probe.
            let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
            Ok(rtt)
        }
        Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            Ok(started.elapsed())
        }
        Ok(Err(err)) => Err(failed(err)),
    }
}
