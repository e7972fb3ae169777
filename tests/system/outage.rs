//! An agent outlives a collector that is down for hours. Time is tokio's
//! paused clock during the outage (three simulated hours take about a
//! second) and the real one after it; the session code is the agent's own,
//! the collector that comes back is real, over real gRPC on loopback. While the collector is away the agent keeps
//! trying at its capped backoff (neither spinning nor giving up), takes in
//! a window every 10 s, keeps the newest ones up to its bound and counts
//! every one the bound forces out; when the collector is back, the session
//! opens and every window kept is replayed and accepted once.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use netaware_agent::Counters;
use netaware_agent::outbox::Outbox;
use netaware_agent::quiet::QuietPeers;
use netaware_agent::session::{self, Links};
use netaware_agent::throughput::orders::Orders;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

const WINDOW: Duration = Duration::from_secs(10);
const OUTAGE: Duration = Duration::from_secs(3 * 3600);
/// Ten minutes of 10 s windows, the agent's default bound.
const KEPT: usize = 60;

#[tokio::test(start_paused = true)]
async fn an_agent_outlives_a_collector_down_for_three_hours() {
    // A loopback port with nobody on it: every attempt is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let shutdown = CancellationToken::new();
    let counters = Arc::new(Counters::default());
    let (windows_tx, windows) = mpsc::channel(16);
    let (results_tx, results) = mpsc::channel(16);
    let links = Links {
        windows,
        results,
        peers: watch::channel(Vec::new()).0,
        orders: Orders {
            server: None,
            send_buffer: None,
            addresses: Vec::new(),
            networks: Vec::new(),
            quiet: Arc::new(QuietPeers::default()),
            results: results_tx,
            counters: Arc::clone(&counters),
            shutdown: shutdown.clone(),
        },
    };
    let agent = tokio::spawn(session::run(
        session::Collector {
            url,
            tls: None,
            token_file: None,
        },
        netaware_testkit::hello("a"),
        links,
        Outbox::new(KEPT),
        Arc::clone(&counters),
        shutdown.clone(),
    ));

    let windows_in_outage = (OUTAGE.as_secs() / WINDOW.as_secs()) as usize;
    for _ in 0..windows_in_outage {
        tokio::time::sleep(WINDOW).await;
        windows_tx
            .send(netaware_testkit::window(0, Vec::new()))
            .await
            .unwrap();
    }
    tokio::task::yield_now().await;
    assert!(!agent.is_finished(), "the session loop gave up");
    // Backoff capped at 30 s with 50-100% jitter: one attempt every 15 to
    // 30 s, i.e. 360 to 720 in three hours (and not thousands: no spin).
    let reconnects = counters.reconnects.load(Relaxed);
    println!(
        "{reconnects} attempts in {} simulated hours",
        OUTAGE.as_secs() / 3600
    );
    assert!((300..=800).contains(&reconnects), "{reconnects} attempts");
    assert_eq!(counters.windows_buffered.load(Relaxed), KEPT as u64);
    assert_eq!(
        counters.windows_dropped.load(Relaxed),
        (windows_in_outage - KEPT) as u64,
        "every window forced out is counted"
    );
    assert_eq!(counters.windows_acked.load(Relaxed), 0);

    // The collector comes back, on the port the agent dials; from here on
    // the clock is real (hyper's and h2's own timers expect one).
    tokio::time::resume();
    let collector = netaware_testkit::start_collector_on(
        format!("127.0.0.1:{port}").parse().unwrap(),
        &shutdown,
    )
    .await;
    let work = collector.work();
    netaware_testkit::wait_for(
        "the kept windows accepted",
        Duration::from_secs(120),
        || async { (counters.windows_acked.load(Relaxed) >= KEPT as u64).then_some(()) },
    )
    .await;
    assert_eq!(work.accepted("a"), KEPT as u64);
    assert_eq!(
        collector.ingest().state().last_seq("a"),
        Some(windows_in_outage as u64),
        "the newest window is the last one accepted"
    );
    assert_eq!(counters.windows_rejected.load(Relaxed), 0);
    assert_eq!(counters.windows_buffered.load(Relaxed), 0);
    shutdown.cancel();
    agent.await.unwrap();
}
