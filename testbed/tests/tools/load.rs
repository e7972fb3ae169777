//! The load generator against a real collector over real gRPC, in small:
//! 50 simulated agents with 10 peers each, a window every 250 ms for 5 s.
//! Every window is accepted, none refused or lost, and the collector's own
//! count agrees with the generator's, while 20 watch streams a second are
//! opened and never read beside it: past the collector's cap they are
//! refused. (The 2,000-agent figures are a benchmark: scripts/bench-load,
//! BENCHMARKS.md.)

use std::time::Duration;

use netaware_testbed::loadgen::{self, LoadOptions};
use tokio_util::sync::CancellationToken;

#[test]
fn every_window_of_a_small_fleet_is_accepted_once() {
    // Heavy: not while this binary's lab test measures.
    netaware_testkit::run_apart_from_labs(small_fleet_async());
}

async fn small_fleet_async() {
    let shutdown = CancellationToken::new();
    let collector = netaware_testkit::start_collector(Vec::new(), &shutdown).await;
    let options = LoadOptions {
        collector: format!("http://{}", collector.grpc_addr),
        agents: 50,
        peers: 10,
        zones: 3,
        window: Duration::from_millis(250),
        duration: Duration::from_secs(5),
        warm_up: Duration::from_secs(1),
        collector_pid: Some(std::process::id()),
        // Hostile followers beside it: more than the collector serves.
        stalled_watchers_per_s: 20.0,
        json: false,
    };
    let report = loadgen::run(&options, shutdown.clone()).await.unwrap();
    println!("{report}");
    assert_eq!(
        (report.rejected, report.lost, report.duplicate),
        (0, 0, 0),
        "{report}"
    );
    // 50 agents x 20 windows, less the last one each may not have sent.
    assert!(report.accepted >= 50 * 18, "{report}");
    assert!(report.accepted <= 50 * 21, "{report}");
    assert!(report.ack_p99_ms.is_some() && report.collector_memory.is_some());
    // Past the collector's cap they were refused; the fleet went on.
    let stalled = report.stalled_watchers.unwrap();
    assert_eq!(stalled.failed, 0, "{report}");
    assert!(
        stalled.opened <= netaware_collector::WatchLimits::DEFAULT_MAX_WATCHERS as u64,
        "{report}"
    );
    assert!(stalled.refused > 0, "{report}");

    // The collector counted the same windows.
    let (_, metrics) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    let counted: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("netaware_collector_windows_accepted_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(counted, report.accepted);
    assert_eq!(collector.ingest().state().node_count(), 50);
    shutdown.cancel();
}
