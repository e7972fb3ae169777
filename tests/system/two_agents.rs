//! Two agents of one node at once (a DaemonSet rolling update with surge,
//! a pod stuck terminating), over real gRPC: the newer one speaks for the
//! node and the older one's session is ended, saying why; neither one's
//! windows are ever taken for the other's duplicates, and each one's
//! replays are still known as its own.

use netaware_proto::v1 as pb;
use netaware_testkit::{Session, good_peer, hello, hello_message, start_collector, window};
use tokio_util::sync::CancellationToken;
use tonic::Code;

async fn agent(url: &str, instance: u64) -> Session {
    let first = hello_message(pb::Hello {
        instance,
        ..hello("a")
    });
    Session::open(url, first).await.expect("hello accepted")
}

/// (code, message) of the ack of `seq`.
async fn ack(session: &mut Session, seq: u64) -> (i32, String) {
    let ack = session.send(window(seq, vec![good_peer()])).await;
    (ack.code, ack.message)
}

async fn sample(collector: &netaware_collector::Collector, series: &str) -> f64 {
    let (_, text) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    netaware_testkit::metrics::sample(&text, series).unwrap_or(0.0)
}

#[tokio::test]
async fn a_newer_agent_of_a_node_replaces_the_older_and_neither_loses_a_window() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let _peer = Session::hello(&url, "b").await;
    let accepted = (0, String::new());
    let duplicate = (0, "duplicate".to_owned());

    // The old agent has counted far (or a client that forged a high
    // number for it).
    let mut old = agent(&url, 1).await;
    assert_eq!(ack(&mut old, u64::MAX - 1).await, accepted);

    // A second agent of the node says hello: the old session is ended.
    let mut new = agent(&url, 2).await;
    let status = old.ended().await;
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert!(status.message().contains("newer agent"), "{status:?}");
    // The new one counts from 1: taken, not a duplicate.
    assert_eq!(ack(&mut new, 1).await, accepted);
    assert_eq!(ack(&mut new, 2).await, accepted);

    // The old one comes back (it retries): its replay is its own
    // duplicate, its next window is taken, and the new session ends.
    let mut old = agent(&url, 1).await;
    assert_eq!(new.ended().await.code(), Code::Aborted);
    assert_eq!(ack(&mut old, u64::MAX - 1).await, duplicate);
    assert_eq!(ack(&mut old, u64::MAX).await, accepted);

    // And the new one again, where it left off.
    let mut new = agent(&url, 2).await;
    assert_eq!(ack(&mut new, 2).await, duplicate);
    assert_eq!(ack(&mut new, 3).await, accepted);
    assert_eq!(old.ended().await.code(), Code::Aborted);

    assert_eq!(
        sample(
            &collector,
            "netaware_collector_sessions_refused_total{reason=\"replaced\"}"
        )
        .await,
        3.0
    );
    assert_eq!(
        sample(
            &collector,
            "netaware_collector_windows_accepted_total{node=\"a\"}"
        )
        .await,
        5.0
    );

    shutdown.cancel();
    collector.wait().await;
}
