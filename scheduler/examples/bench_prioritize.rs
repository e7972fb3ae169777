//! Benchmark: prioritize over 5,000 candidate nodes (NodeNames mode) with
//! 64 workers of the job already placed, over HTTP on loopback and as the
//! pure policy alone. Run with:
//!
//!     cargo run --release -p netaware-scheduler --example bench_prioritize [NODES] [PLACED]
//!
//! The matrix is synthetic: zones of 100 nodes, every directed pair inside
//! a zone measured (what per-zone probe sets give a large cluster).

use std::sync::Arc;
use std::time::{Duration, Instant};

use netaware_core::extender::{JobContext, decide};
use netaware_proto::v1 as pb;
use netaware_scheduler::cache::ScoreCache;
use netaware_scheduler::job::job_of;
use netaware_scheduler::placements::{Placements, PodFacts};
use netaware_scheduler::server::{Extender, router};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::RwLock;

const ZONE_SIZE: usize = 100;
const ROUNDS: usize = 200;

fn matrix(nodes: usize) -> pb::Matrix {
    let name = |i: usize| format!("node-{i:05}");
    let zone = |i: usize| format!("zone-{:03}", i / ZONE_SIZE);
    let mut pairs = Vec::new();
    for src in 0..nodes {
        let first = src / ZONE_SIZE * ZONE_SIZE;
        for dst in first..(first + ZONE_SIZE).min(nodes) {
            if dst == src {
                continue;
            }
            // Deterministic spread of link quality.
            let rtt = 0.1 + ((src * 7 + dst * 13) % 50) as f64 / 100.0;
            let loss = if (src + dst) % 97 == 0 { 0.1 } else { 0.0 };
            pairs.push(pb::Pair {
                src: name(src),
                dst: name(dst),
                rtt_median_ms: Some(rtt),
                rtt_p99_ms: Some(rtt * 2.0),
                jitter_ms: Some(0.01),
                loss_ratio: Some(loss),
                samples: 60,
                age_s: 3.0,
                quality: 0.4 / (1.0 + rtt) + 0.3 * (1.0 - (loss / 0.05).min(1.0)),
                terms: Some(pb::Terms {
                    delay: 1.0 / (1.0 + rtt),
                    loss: 1.0 - (loss / 0.05).min(1.0),
                    delay_source: pb::Source::Measured.into(),
                    loss_source: pb::Source::Measured.into(),
                    throughput_source: pb::Source::Unknown.into(),
                    ..pb::Terms::default()
                }),
                ..pb::Pair::default()
            });
        }
    }
    pb::Matrix {
        nodes: (0..nodes)
            .map(|i| pb::Node {
                name: name(i),
                zone: zone(i),
                kind: pb::NodeKind::Agent.into(),
                ..pb::Node::default()
            })
            .collect(),
        pairs,
        ..pb::Matrix::default()
    }
}

/// The median and the 99th percentile (nearest rank), in ms.
fn quantiles(samples: Vec<Duration>) -> (f64, f64) {
    let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let at = |q| netaware_core::stats::quantile(&ms, q).unwrap_or(f64::NAN);
    (at(0.5), at(0.99))
}

async fn post(addr: std::net::SocketAddr, body: &[u8]) -> usize {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    response.len()
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let nodes = args.first().copied().unwrap_or(5_000);
    let placed = args.get(1).copied().unwrap_or(64).min(ZONE_SIZE);
    let wire = matrix(nodes);
    let cache = ScoreCache::new(Duration::from_secs(3600));
    // Off the request path, once per matrix: decoding it and working out
    // node health.
    let start = Instant::now();
    cache.store(&wire);
    let stored = start.elapsed();
    let placer = cache.fresh().unwrap();
    let scored = placer.matrix();
    let start = Instant::now();
    let health = netaware_core::node_health::of(
        nodes,
        scored.zone_count(),
        |node| scored.zone_index(node),
        |node| scored.links(node),
    );
    let health_took = start.elapsed();
    assert_eq!(health.len(), nodes);

    let labels = [("netaware.io/group".to_string(), "bench".to_string())].into();
    let (job, _) = job_of("ml", &labels).unwrap();
    let placements = Arc::new(RwLock::new(Placements::new()));
    for i in 0..placed {
        let pod = PodFacts {
            uid: format!("uid-{i}"),
            namespace: "ml".into(),
            labels: labels.clone(),
            node: Some(format!("node-{:05}", i)),
            finished: false,
        };
        placements.write().await.apply(&pod);
    }
    let candidates: Vec<String> = wire.nodes.iter().map(|n| n.name.clone()).collect();

    // The pure policy alone.
    let context = JobContext {
        size: placed + 1,
        placed: placements.read().await.placed(&job),
    };
    let mut pure = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let decision = decide(Some(&placer), Some(&context), &candidates);
        pure.push(start.elapsed());
        assert_eq!(decision.scores.len(), nodes);
    }

    // Over HTTP on loopback, the same request as kube-scheduler's.
    let extender = Arc::new(Extender::new(cache, placements, None));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(axum::serve(listener, router(extender)).into_future());
    let body = serde_json::to_vec(&serde_json::json!({
        "Pod": {"metadata": {"name": "w", "namespace": "ml", "uid": "new", "labels": {"netaware.io/group": "bench"}}},
        "NodeNames": candidates,
    }))
    .unwrap();
    let mut http = Vec::new();
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let len = post(addr, &body).await;
        http.push(start.elapsed());
        assert!(len > nodes * 20);
    }
    let (pure50, pure99) = quantiles(pure);
    let (http50, http99) = quantiles(http);
    println!(
        "| nodes | placed | pairs | policy p50 (ms) | policy p99 (ms) | HTTP p50 (ms) | HTTP p99 (ms) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {nodes} | {placed} | {} | {pure50:.2} | {pure99:.2} | {http50:.2} | {http99:.2} |",
        scored.pairs().len()
    );
    println!(
        "\nstoring each new matrix (off the request path): {:.1} ms, of which node health {:.1} ms",
        stored.as_secs_f64() * 1e3,
        health_took.as_secs_f64() * 1e3
    );
}
