//! The collector, the API and the extender at a size far over one message:
//! 1,500 simulated agents (`loadgen`) with 64 peers each, about 96,000
//! measured pairs, 10 MB as one matrix. Every client here keeps gRPC's
//! default 4 MiB message limit: the extender follows the watch stream's
//! pages and deltas and answers an 8-worker job with real scores (not
//! neutrally), and the paged matrix reads whole. (The 5,000-agent figures
//! are a benchmark: scripts/bench-scale, BENCHMARKS.md.)

use std::sync::Arc;
use std::time::Duration;

use netaware::client::{MAX_RESPONSE_BYTES, ScoresConnection};
use netaware_scheduler::cache::{MAX_UPDATE_BYTES, ScoreCache};
use netaware_scheduler::placements::Placements;
use netaware_scheduler::server::Extender;
use netaware_testbed::loadgen::{self, LoadOptions};
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

const AGENTS: usize = 1_500;
const PEERS: usize = 64;

#[test]
fn a_fleet_over_any_message_limit_is_served_in_pages_and_placed() {
    // Heavy: not while this binary's lab test measures.
    netaware_testkit::run_apart_from_labs(large_fleet_async());
}

async fn large_fleet_async() {
    assert_eq!((MAX_RESPONSE_BYTES, MAX_UPDATE_BYTES), (4 << 20, 4 << 20));
    let shutdown = CancellationToken::new();
    let collector = netaware_testkit::start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);

    // The extender follows the collector from the start.
    let cache = ScoreCache::new(Duration::from_secs(30));
    tokio::spawn(cache.clone().follow(url.clone(), shutdown.clone()));
    let extender = Arc::new(Extender::new(
        cache.clone(),
        Arc::new(RwLock::new(Placements::new())),
        None,
    ));
    let extender_addr = netaware_testkit::serve_extender(extender, &shutdown).await;

    let options = LoadOptions {
        collector: url.clone(),
        agents: AGENTS,
        peers: PEERS,
        zones: 10,
        window: Duration::from_secs(5),
        duration: Duration::from_secs(30),
        warm_up: Duration::from_secs(5),
        collector_pid: None,
        stalled_watchers_per_s: 0.0,
        json: false,
    };
    let fleet = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { loadgen::run(&options, shutdown).await })
    };

    // Every agent's pairs reach the extender through the watch stream.
    netaware_testkit::wait_for(
        "the extender's copy of the whole fleet",
        Duration::from_secs(120),
        || {
            let cache = cache.clone();
            async move {
                let matrix = cache.fresh()?;
                (matrix.matrix().nodes().len() == AGENTS
                    && matrix.matrix().pairs().len() >= AGENTS * PEERS / 2)
                    .then_some(())
            }
        },
    )
    .await;

    // kube-scheduler's call for the first worker of an 8-worker job, every
    // node a candidate: real scores, the best the whole range.
    let names: Vec<String> = (0..AGENTS).map(|i| format!("sim-{i:05}")).collect();
    let known = cache.fresh().unwrap();
    assert!(
        names.iter().all(|n| known.matrix().index_of(n).is_some()),
        "fleet names"
    );
    let body = serde_json::json!({
        "Pod": {"metadata": {"name": "w0", "namespace": "ml", "uid": "u0",
                "labels": {"netaware.io/group": "big", "netaware.io/group-size": "8"}}},
        "NodeNames": names,
    });
    let (status, answer) = netaware_testkit::post(
        extender_addr,
        "/prioritize",
        &serde_json::to_vec(&body).unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let scores: Vec<serde_json::Value> = serde_json::from_str(&answer).unwrap();
    assert_eq!(scores.len(), AGENTS);
    let score = |s: &serde_json::Value| s["Score"].as_i64().unwrap();
    assert_eq!(scores.iter().map(score).max(), Some(10), "not neutral");
    assert!(
        scores.iter().any(|s| score(s) < 10),
        "scores tell nodes apart"
    );

    // The whole matrix through pages of at most 4 MiB, as `netaware matrix`
    // reads it, and a zone of it.
    let mut scores_client = ScoresConnection::connect(&url).await.unwrap();
    let matrix = scores_client.matrix().await.unwrap();
    assert_eq!(matrix.nodes.len(), AGENTS);
    assert!(
        matrix.pairs.len() >= AGENTS * PEERS / 2,
        "{}",
        matrix.pairs.len()
    );
    let zone = &matrix.nodes[0].zone;
    let request = netaware_proto::v1::MatrixRequest {
        zone: zone.clone(),
        ..Default::default()
    };
    let part = scores_client.matrix_of(&request).await.unwrap();
    assert!(part.nodes.iter().all(|n| &n.zone == zone) && !part.nodes.is_empty());
    assert!(!part.pairs.is_empty() && part.pairs.len() < matrix.pairs.len());

    // Stopped mid-run: windows in flight then count as lost, which the
    // small fleet's test (load.rs) checks to the window; here, only that
    // nothing was refused.
    shutdown.cancel();
    let report = fleet.await.unwrap().unwrap();
    assert_eq!(report.rejected, 0, "{report}");
    assert!(report.accepted > 0, "{report}");
    collector.wait().await;
}
