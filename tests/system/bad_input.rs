//! Bad input over real gRPC: every kind of broken report is refused with
//! INVALID_ARGUMENT and leaves the matrix as it was; a peer the collector
//! does not know is left out of a window, counted, and the rest taken. No root needed: these
//! sessions are driven by hand, without ICMP.

use netaware_proto::v1 as pb;
use netaware_proto::v1::agent_message;
use netaware_proto::v1::scores_client::ScoresClient;
use netaware_testkit::{Session, good_peer, hello, now_ms, start_collector, window};
use tokio_util::sync::CancellationToken;
use tonic::Code;

/// The parts of the matrix that a refused window could change.
async fn figures(
    scores: &mut ScoresClient<tonic::transport::Channel>,
) -> Vec<(String, String, u64, Option<f64>, Option<f64>)> {
    let matrix = scores
        .get_matrix(pb::MatrixRequest::default())
        .await
        .unwrap()
        .into_inner();
    matrix
        .pairs
        .into_iter()
        .map(|p| (p.src, p.dst, p.samples, p.rtt_median_ms, p.loss_ratio))
        .collect()
}

#[tokio::test]
async fn broken_reports_are_refused_and_change_nothing() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;
    let mut scores = ScoresClient::connect(url.clone()).await.unwrap();

    let ack = a.send(window(1, vec![good_peer()])).await;
    assert_eq!((ack.code, ack.message.as_str()), (0, ""));
    let before = figures(&mut scores).await;
    assert!(
        before
            .iter()
            .any(|(src, dst, samples, ..)| src == "a" && dst == "b" && *samples == 10)
    );

    let future = pb::Window {
        end_unix_ms: now_ms() + 60_000,
        start_unix_ms: now_ms() + 59_000,
        ..window(2, vec![good_peer()])
    };
    let cases: Vec<(&str, pb::Window)> = vec![
        (
            "an unknown peer's NaN RTT",
            window(
                2,
                vec![
                    good_peer(),
                    pb::PeerWindow {
                        peer: "ghost".into(),
                        rtt_median_ms: f64::NAN,
                        ..good_peer()
                    },
                ],
            ),
        ),
        (
            "NaN RTT",
            window(
                2,
                vec![pb::PeerWindow {
                    rtt_median_ms: f64::NAN,
                    ..good_peer()
                }],
            ),
        ),
        (
            "negative RTT",
            window(
                2,
                vec![pb::PeerWindow {
                    rtt_min_ms: -0.1,
                    ..good_peer()
                }],
            ),
        ),
        (
            "received above sent",
            window(
                2,
                vec![pb::PeerWindow {
                    received: 11,
                    ..good_peer()
                }],
            ),
        ),
        ("window from the future", future),
        ("peer twice", window(2, vec![good_peer(), good_peer()])),
        (
            "towards itself",
            window(
                2,
                vec![pb::PeerWindow {
                    peer: "a".into(),
                    ..good_peer()
                }],
            ),
        ),
    ];
    for (what, case) in cases {
        let ack = a.send(case).await;
        assert_eq!(
            Code::from_i32(ack.code),
            Code::InvalidArgument,
            "{what}: {ack:?}"
        );
        assert!(!ack.message.is_empty(), "{what}: the refusal says why");
        assert_eq!(
            figures(&mut scores).await,
            before,
            "{what} changed the matrix"
        );
    }
    // The session survives refusals, and a replay of window 1 counts once.
    assert_eq!(
        a.send(window(1, vec![good_peer()])).await.message,
        "duplicate"
    );
    assert_eq!(figures(&mut scores).await, before);
    let ack = a
        .send(window(
            2,
            vec![pb::PeerWindow {
                received: 5,
                ..good_peer()
            }],
        ))
        .await;
    assert_eq!(ack.code, 0);
    let after = figures(&mut scores).await;
    let ab = after
        .iter()
        .find(|(src, dst, ..)| src == "a" && dst == "b")
        .unwrap();
    assert_eq!((ab.2, ab.4), (20, Some(0.25)));

    // A peer the collector does not know (forgotten, or not restored after
    // a restart) is left out and counted; the rest of the window is taken.
    let ack = a
        .send(window(
            3,
            vec![
                pb::PeerWindow {
                    peer: "ghost".into(),
                    ..good_peer()
                },
                good_peer(),
            ],
        ))
        .await;
    assert_eq!((ack.code, ack.message.as_str()), (0, ""), "{ack:?}");
    let now = figures(&mut scores).await;
    let ab = now.iter().find(|(src, dst, ..)| src == "a" && dst == "b");
    assert_eq!(ab.map(|f| f.2), Some(30));
    let (_, metrics) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    assert!(
        metrics.contains("netaware_collector_window_peers_unknown_total 1"),
        "{metrics}"
    );

    shutdown.cancel();
    collector.wait().await;
}

#[tokio::test]
async fn sessions_without_a_valid_hello_are_refused() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);

    // A report from a node that never said hello.
    let first = pb::AgentMessage {
        body: Some(agent_message::Body::Window(window(1, vec![good_peer()]))),
    };
    let status = Session::open(&url, first).await.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);

    for broken in [
        pb::Hello {
            node: String::new(),
            ..hello("x")
        },
        pb::Hello {
            addresses: vec!["256.1.1.1".into()],
            ..hello("x")
        },
        pb::Hello {
            window_ms: 0,
            ..hello("x")
        },
    ] {
        let first = pb::AgentMessage {
            body: Some(agent_message::Body::Hello(broken.clone())),
        };
        let status = Session::open(&url, first).await.expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{broken:?}");
    }
    let mut scores = ScoresClient::connect(url).await.unwrap();
    let matrix = scores
        .get_matrix(pb::MatrixRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        matrix.nodes.is_empty(),
        "refused hellos registered nodes: {:?}",
        matrix.nodes
    );

    // Rank requests are checked too.
    let status = scores
        .rank(pb::RankRequest {
            size: 0,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);

    shutdown.cancel();
    collector.wait().await;
}

#[tokio::test]
async fn a_window_past_the_message_bound_is_refused_and_its_parts_taken() {
    use netaware_proto::parts::{MAX_AGENT_MESSAGE_BYTES, message_len, window_parts};
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let _b = Session::hello(&url, "b").await;
    // A window of every node of a large cluster, names as long as they
    // may be: b, and 5,000 the collector does not know.
    let mut peers = vec![good_peer()];
    peers.extend((0..5_000).map(|i| pb::PeerWindow {
        peer: format!("{i:0>253}"),
        ..good_peer()
    }));
    let large = window(1, peers);
    assert!(message_len(&large) > MAX_AGENT_MESSAGE_BYTES);

    let mut whole = Session::hello(&url, "a").await;
    whole.send_unanswered(large.clone()).await;
    let status = whole.ended().await;
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert_eq!(refused(&collector, "stream_error").await, 1, "counted");

    // In parts, as an agent sends it: every part taken.
    let mut agent = Session::hello(&url, "a").await;
    let parts = window_parts(large, MAX_AGENT_MESSAGE_BYTES);
    assert!(parts.len() >= 2);
    for (seq, part) in (1..).zip(parts) {
        let ack = agent.send(pb::Window { seq, ..part }).await;
        assert_eq!(ack.code, 0, "{ack:?}");
    }
    let (_, text) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    assert!(
        text.lines()
            .any(|l| l == "netaware_collector_window_peers_unknown_total 5000"),
        "every unknown peer of every part counted"
    );
    let mut scores = ScoresClient::connect(url).await.unwrap();
    assert!(
        figures(&mut scores)
            .await
            .iter()
            .any(|(src, dst, samples, ..)| src == "a" && dst == "b" && *samples == 10)
    );

    shutdown.cancel();
    collector.wait().await;
}

/// The collector's count of sessions it refused for `reason`.
async fn refused(collector: &netaware_collector::Collector, reason: &str) -> u64 {
    let (_, text) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    let series = format!("netaware_collector_sessions_refused_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_session_that_never_says_hello_is_ended_and_counted() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let channel = tonic::transport::Endpoint::from_shared(url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    // A stream that stays open and silent: its sender is held to the end.
    let (_silent, rx) = tokio::sync::mpsc::channel::<pb::AgentMessage>(1);
    let mut client = netaware_proto::v1::agent_session_client::AgentSessionClient::new(channel);
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(
        netaware_collector::HELLO_DEADLINE * 3,
        client.session(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
    .await
    .expect("the collector ends a silent session instead of holding it");
    let status = answer.expect_err("no session without a hello");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        started.elapsed() >= netaware_collector::HELLO_DEADLINE,
        "ended before its deadline: {:?}",
        started.elapsed()
    );
    assert_eq!(refused(&collector, "no_hello").await, 1);

    // A window first is refused and counted too; a real agent's session
    // on the same collector is unaffected.
    let first = pb::AgentMessage {
        body: Some(agent_message::Body::Window(window(1, vec![good_peer()]))),
    };
    let status = Session::open(&url, first).await.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(refused(&collector, "out_of_order").await, 1);
    let _b = Session::hello(&url, "b").await;
    let mut agent = Session::hello(&url, "a").await;
    let ack = agent.send(window(1, vec![good_peer()])).await;
    assert_eq!(ack.code, 0, "{ack:?}");

    shutdown.cancel();
    collector.wait().await;
}
