//! The gRPC port's connection caps against a real collector on loopback:
//! connections that never send a byte are closed after the silence limit,
//! connections past the cap per client address and past the cap in all
//! are closed at once, each counted by reason, and a real agent's windows
//! are acknowledged throughout.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use netaware_collector::ConnectionLimits;
use netaware_testkit::{Session, good_peer, window};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

/// The HTTP/2 client preface: what a gRPC client sends first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

async fn connect_from(source: [u8; 4], to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(IpAddr::from(source), 0))
        .unwrap();
    socket.connect(to).await.unwrap()
}

/// Whether the collector closes `stream` within `limit` (whatever it
/// sends first, such as its HTTP/2 settings).
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

async fn held(source: [u8; 4], to: SocketAddr) -> TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut stream = connect_from(source, to).await;
    stream.write_all(PREFACE).await.unwrap();
    stream
}

#[tokio::test]
async fn silent_and_surplus_connections_are_closed_and_agents_go_on() {
    let shutdown = CancellationToken::new();
    let config = netaware_collector::CollectorConfig {
        connections: ConnectionLimits {
            max_total: 6,
            max_per_client: 3,
            first_bytes_within: Duration::from_secs(1),
        },
        ..netaware_testkit::collector_config(Vec::new(), None)
    };
    let collector = netaware_collector::Collector::start(config, shutdown.clone())
        .await
        .unwrap();
    let grpc = collector.grpc_addr;
    let url = format!("http://{grpc}");
    // Two agents: two connections from 127.0.0.1.
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;

    // Silent connections are closed after the limit; one that sent its
    // preface is not.
    let mut silent = connect_from([127, 0, 0, 5], grpc).await;
    let mut spoke = held([127, 0, 0, 5], grpc).await;
    assert!(closed_within(&mut silent, Duration::from_secs(5)).await);
    assert!(!closed_within(&mut spoke, Duration::from_secs(1)).await);
    drop(spoke);

    // Three from 127.0.0.2 are held; a fourth from it is closed at once.
    let mut from_two = Vec::new();
    for _ in 0..3 {
        from_two.push(held([127, 0, 0, 2], grpc).await);
    }
    let mut fourth = held([127, 0, 0, 2], grpc).await;
    assert!(closed_within(&mut fourth, Duration::from_millis(500)).await);
    // One more from 127.0.0.3 makes six in all; a seventh is closed.
    let _sixth = held([127, 0, 0, 3], grpc).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut seventh = held([127, 0, 0, 4], grpc).await;
    assert!(closed_within(&mut seventh, Duration::from_millis(500)).await);
    for stream in &mut from_two {
        assert!(!closed_within(stream, Duration::from_millis(100)).await);
    }

    // The agents already connected are served all along.
    let ack = a.send(window(1, vec![good_peer()])).await;
    assert_eq!((ack.code, ack.message.as_str()), (0, ""), "{ack:?}");

    let (_, metrics) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    for line in [
        r#"netaware_collector_connections_refused_total{reason="silent"} 1"#,
        r#"netaware_collector_connections_refused_total{reason="too_many_from_client"} 1"#,
        r#"netaware_collector_connections_refused_total{reason="too_many"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} not in:\n{metrics}");
    }
    // Closed ones give their places back.
    drop(from_two);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut later = Vec::new();
    for _ in 0..3 {
        later.push(held([127, 0, 0, 2], grpc).await);
    }
    for stream in &mut later {
        assert!(!closed_within(stream, Duration::from_millis(200)).await);
    }
    // Connections that never make a request would hold the graceful
    // shutdown until keepalive gives up on them.
    drop((later, _sixth, fourth, seventh, silent));
    shutdown.cancel();
    collector.wait().await;
}
