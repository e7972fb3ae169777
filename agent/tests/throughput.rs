//! The throughput server and client over real TCP on loopback (IPv4 and
//! IPv6): a test with a valid token measures, and a wrong, expired or
//! replayed token, or a stranger, gets nothing; a server that claims more
//! bytes than it received is refused.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use netaware_agent::throughput::ThroughputError;
use netaware_agent::throughput::claims::ClaimError;
use netaware_agent::throughput::client::{self, Plan};
use netaware_agent::throughput::server::{ServerHandle, bind};
use netaware_agent::throughput::tokens::Expected;
use netaware_agent::throughput::wire::{Counted, HEADER_LEN, Status};
use netaware_runtime::clock::now_ms;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

fn server(addr: &str, shutdown: &CancellationToken) -> (ServerHandle, SocketAddr) {
    let listener = bind(addr.parse().unwrap(), None).unwrap();
    let local = listener.local_addr().unwrap();
    let server = ServerHandle::new();
    server.serve(listener, shutdown.clone());
    (server, local)
}

fn expect(server: &ServerHandle, token: u8, client: &str, valid_ms: u64) {
    let now = now_ms();
    server
        .expect(Expected {
            token: [token; 16],
            client: Some(client.parse().unwrap()),
            not_before: now.saturating_sub(1_000),
            expires: now + valid_ms,
        })
        .unwrap();
}

fn plan(server: SocketAddr, token: u8, streams: u8) -> Plan {
    Plan {
        server,
        source: None,
        token: [token; 16],
        streams,
        omit: Duration::from_millis(200),
        duration: Duration::from_millis(500),
        send_buffer: None,
    }
}

async fn refused_with(plan: &Plan) -> Status {
    match client::run(plan).await {
        Err(ThroughputError::Refused(status)) => status,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn measures_over_ipv4_and_ipv6_with_parallel_streams() {
    let shutdown = CancellationToken::new();
    for (listen, client_ip) in [("127.0.0.1:0", "127.0.0.1"), ("[::1]:0", "::1")] {
        let (server, addr) = server(listen, &shutdown);
        expect(&server, 1, client_ip, 10_000);
        let outcome = client::run(&plan(addr, 1, 3)).await.unwrap();
        assert_eq!(outcome.streams, 3);
        // Loopback moves gigabits; anything under 100 Mbit/s is a bug.
        assert!(outcome.goodput_bps > 100e6, "{outcome:?}");
        let measured = outcome.measured.as_secs_f64();
        assert!((0.45..0.6).contains(&measured), "measured {measured} s");
        // Each stream is timed by its own readings, a write apart.
        let expected_bytes = outcome.goodput_bps * measured / 8.0;
        assert!(
            (outcome.bytes as f64 - expected_bytes).abs() < expected_bytes * 0.05,
            "{outcome:?}"
        );
        assert!(outcome.retransmits.is_some() && outcome.tcp_rtt_ms.is_some());
        // The same token again is a replay.
        assert_eq!(refused_with(&plan(addr, 1, 3)).await, Status::Replayed);
    }
    shutdown.cancel();
}

#[tokio::test]
async fn wrong_expired_and_misaddressed_tokens_are_refused() {
    let shutdown = CancellationToken::new();
    let (server, addr) = server("127.0.0.1:0", &shutdown);
    expect(&server, 1, "127.0.0.1", 10_000);
    assert_eq!(refused_with(&plan(addr, 9, 1)).await, Status::UnknownToken);
    let now = now_ms();
    server
        .expect(Expected {
            token: [2; 16],
            client: Some("127.0.0.1".parse().unwrap()),
            not_before: now - 20_000,
            expires: now - 10_000,
        })
        .unwrap();
    assert_eq!(refused_with(&plan(addr, 2, 1)).await, Status::Expired);
    expect(&server, 3, "10.9.9.9", 10_000);
    assert_eq!(refused_with(&plan(addr, 3, 1)).await, Status::WrongPeer);
    // The valid token still works after all that.
    assert!(client::run(&plan(addr, 1, 1)).await.is_ok());
    shutdown.cancel();
}

#[tokio::test]
async fn strangers_get_at_most_a_status_byte_and_are_closed_within_a_second() {
    let shutdown = CancellationToken::new();
    let (server, addr) = server("127.0.0.1:0", &shutdown);
    expect(&server, 1, "127.0.0.1", 10_000);

    // Silent: closed after the header timeout, nothing sent.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let mut received = Vec::new();
    silent.read_to_end(&mut received).await.unwrap();
    assert!(received.is_empty());
    assert!(
        started.elapsed() < Duration::from_millis(1_500),
        "{:?}",
        started.elapsed()
    );

    // Garbage: one "malformed" byte, then closed, while the stranger keeps
    // the connection open.
    let mut noisy = tokio::net::TcpStream::connect(addr).await.unwrap();
    noisy.write_all(&[0xAB; 64]).await.unwrap();
    let started = Instant::now();
    let mut received = Vec::new();
    let _ = noisy.read_to_end(&mut received).await;
    assert_eq!(received, [Status::Malformed.to_byte()]);
    assert!(started.elapsed() < Duration::from_secs(1));
    shutdown.cancel();
}

#[tokio::test]
async fn connections_past_the_cap_are_closed_at_once() {
    use netaware_agent::throughput::MAX_CONNECTIONS;
    let shutdown = CancellationToken::new();
    let (_server, addr) = server("127.0.0.1:0", &shutdown);
    // Fill every slot with a silent stranger (each held up to the header
    // timeout).
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // One more: closed at once, unread.
    let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let mut received = Vec::new();
    let _ = extra.read_to_end(&mut received).await;
    assert!(received.is_empty());
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "closed after {:?}",
        started.elapsed()
    );
    // Once the silent ones time out, there is room again: a new
    // connection is held, not closed at once.
    drop(held);
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let mut later = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = Instant::now();
    let _ = later.read_to_end(&mut Vec::new()).await;
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "a free slot holds the connection until its header timeout"
    );
    shutdown.cancel();
}

/// A server that takes any stream, reads all it is sent, and claims ten
/// times what it read.
async fn boasting_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut header = [0u8; HEADER_LEN];
        stream.read_exact(&mut header).await.unwrap();
        stream
            .write_all(&[Status::Accepted.to_byte()])
            .await
            .unwrap();
        let started = Instant::now();
        let mut read = 0u64;
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n as u64,
            }
        }
        let claim = Counted {
            bytes: read * 10,
            measured: started.elapsed(),
        };
        let _ = stream.write_all(&claim.encode()).await;
    });
    addr
}

#[tokio::test]
async fn a_server_that_claims_ten_times_the_bytes_is_refused() {
    let addr = boasting_server().await;
    match client::run(&plan(addr, 1, 1)).await {
        Err(ThroughputError::Claim(ClaimError::Overclaimed {
            claimed_bps,
            acked_bps,
        })) => {
            // Over its whole connection the server read about what it
            // acknowledged in the measured part, at the same rate: its
            // claim is some ten times the client's own count.
            let ratio = claimed_bps / acked_bps;
            assert!((5.0..15.0).contains(&ratio), "claimed {ratio:.1} times");
        }
        other => panic!("expected the claim refused, got {other:?}"),
    }
}
