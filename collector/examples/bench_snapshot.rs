//! Benchmark: the collector's scored snapshot at cluster scale, pure (no
//! gRPC): NODES agents in 10 zones, each reporting on PEERS peers (its
//! zone first, as `--max-peers` chooses), as many windows per pair as
//! the collector keeps (six). Times
//! building the snapshot (the third build, as a collector builds one a
//! second), encoding it for the wire, a rank of an 8-worker job, first
//! and asked again, a Prometheus scrape of it (the default
//! `--pair-series` budget, blocks of 50 nodes), and the web view's heaviest
//! answers (a heat map page of a zone, 160 nodes, by RTT with the
//! estimates of the pairs nobody probes and by loss; the 20 worst pairs),
//! and prints the size of the whole matrix as one message, of the scrape
//! and of a heat map page as JSON. It counts memory too (the resident
//! set's growth): the state's pairs with their kept windows, and what the
//! first snapshot's copy of the figures and its scored matrix add, each per
//! measured pair.
//! Run with:
//!
//!     cargo run --release -p netaware-collector --example bench_snapshot [NODES] [PEERS]

use std::time::Instant;

use netaware_collector::metrics::{BlockFacts, FaultFacts, ScrapeFacts, WorkMetrics, exposition};
use netaware_collector::pair_series::DEFAULT_PAIR_SERIES;
use netaware_collector::state::{Ingested, ThroughputCounts};
use netaware_collector::{CollectorState, ModelConfig};
use netaware_core::coordinates::Coordinates;
use netaware_core::network::Network;
use netaware_core::placement::{JobRequest, Placer};
use netaware_proto::convert::matrix_to_wire;
use netaware_proto::v1::{Hello, PeerWindow, Window};
use prost::Message;

/// The allocator the services run with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The process's resident memory now (bytes), as the kernel counts it
/// (mimalloc's own overhead included).
fn live() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<usize>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

const ZONES: usize = 10;

/// The RTT (ms) node `i` measures to its `k`th peer.
fn rtt_of(i: usize, k: usize) -> f64 {
    0.1 + ((i * 7 + k * 13) % 50) as f64 / 100.0
}
const WINDOW_MS: u64 = 2_000;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let nodes = args.first().copied().unwrap_or(5_000);
    let peers = args.get(1).copied().unwrap_or(64);
    let config = ModelConfig {
        throughput: None,
        max_peers: peers,
        ..ModelConfig::default()
    };
    let mut state = CollectorState::new(config, Vec::new());
    let name = |i: usize| format!("node-{i:05}");
    for i in 0..nodes {
        let hello = Hello {
            node: name(i),
            addresses: vec![format!("10.{}.{}.{}", i / 65_536, (i / 256) % 256, i % 256)],
            zone: format!("zone-{}", i % ZONES),
            window_ms: WINDOW_MS as u32,
            probe_interval_ms: 1_000,
            instance: 1,
            ..Hello::default()
        };
        state.hello(&hello, 0).unwrap();
    }
    let peer_sets: Vec<Vec<String>> = (0..nodes)
        .map(|i| {
            state
                .peer_set(&name(i))
                .into_iter()
                .map(|p| p.name)
                .collect()
        })
        .collect();
    // What the pairs cost: the state's growth from here, its nodes known.
    let empty = live();
    let windows = config.windows_kept as u64;
    let start = Instant::now();
    let mut now = 0;
    for seq in 1..=windows {
        now = seq * WINDOW_MS;
        for (i, peers) in peer_sets.iter().enumerate() {
            let window = Window {
                seq,
                start_unix_ms: now - WINDOW_MS,
                end_unix_ms: now,
                peers: peers
                    .iter()
                    .enumerate()
                    .map(|(k, peer)| {
                        let rtt = rtt_of(i, k);
                        PeerWindow {
                            peer: peer.clone(),
                            sent: 2,
                            received: 2,
                            rtt_min_ms: rtt,
                            rtt_median_ms: rtt,
                            rtt_p90_ms: rtt,
                            rtt_p99_ms: rtt,
                            rtt_max_ms: rtt,
                            jitter_ms: 0.01,
                            ..PeerWindow::default()
                        }
                    })
                    .collect(),
                ..Window::default()
            };
            assert_eq!(state.ingest(&name(i), &window, now), Ok(Ingested::Accepted));
        }
    }
    let ingest = start.elapsed();
    let held_by_state = live().saturating_sub(empty);
    // Every node with a coordinate, as after the collector's first passes,
    // so that placement estimates the pairs nobody probes from them.
    let mut coordinates = Coordinates::default();
    for (i, peers) in peer_sets.iter().enumerate() {
        for (k, peer) in peers.iter().enumerate() {
            coordinates
                .observe(&name(i), peer, rtt_of(i, k))
                .expect("a usable sample");
        }
    }

    // As the collector does it, once a second: the first build touches
    // fresh memory, the later ones reuse what the last one freed. The
    // figures are the last of three.
    let mut snapshot = None;
    let (mut copied, mut built) = Default::default();
    let (mut held_by_copy, mut held_by_scored) = (0, 0);
    for build in 0..3 {
        drop(snapshot.take());
        let before = live();
        let start = Instant::now();
        let inputs = state.snapshot_inputs();
        copied = start.elapsed();
        let after_copy = live();
        snapshot = Some(inputs.score(&coordinates, now));
        built = start.elapsed();
        drop(inputs);
        // The first build's growth: later ones reuse what it freed.
        if build == 0 {
            held_by_copy = after_copy.saturating_sub(before);
            held_by_scored = live().saturating_sub(before);
        }
    }
    let placer = Placer::new(snapshot.expect("built three times"), config.placement);
    let start = Instant::now();
    let wire = matrix_to_wire(&placer, state.version(), now);
    let encoded = wire.encoded_len();
    let to_wire = start.elapsed();
    let start = Instant::now();
    let request = JobRequest {
        size: 8,
        ..JobRequest::default()
    };
    let ranking = placer.rank(&request);
    let ranked = start.elapsed();
    assert_eq!(ranking.nodes.len(), nodes);
    // The same question again, as the extender's filter and prioritize
    // calls for each pod of a job ask it.
    let start = Instant::now();
    let again = placer.rank(&request);
    let ranked_again = start.elapsed();
    assert_eq!(again.zone, ranking.zone);
    let (scraped, scrape) = scrape(&placer, nodes);
    let web = web_view(&placer, now);
    println!(
        "nodes {nodes}, peers {peers}: {} measured pairs; ingest of {} windows {:.0} ms; snapshot {:.0} ms (of which {:.0} ms copying under the lock); to wire {:.0} ms, {:.1} MB as one message; rank (8 workers) {:.0} ms, the same again {:.1} ms; scrape {:.0} ms, {} series, {:.2} MB",
        placer.matrix().pairs().len(),
        windows as usize * nodes,
        ingest.as_secs_f64() * 1e3,
        built.as_secs_f64() * 1e3,
        copied.as_secs_f64() * 1e3,
        to_wire.as_secs_f64() * 1e3,
        encoded as f64 / 1e6,
        ranked.as_secs_f64() * 1e3,
        ranked_again.as_secs_f64() * 1e3,
        scraped.as_secs_f64() * 1e3,
        scrape.lines().filter(|l| !l.starts_with('#')).count(),
        scrape.len() as f64 / 1e6,
    );
    let pairs = placer.matrix().pairs().len().max(1);
    let per_pair = |bytes: usize| bytes as f64 / pairs as f64;
    println!(
        "resident memory: the pairs in the state {:.1} MB ({:.0} B a measured pair, its {windows} windows kept), a snapshot's copy of the figures {:.1} MB ({:.0} B a pair), a scored snapshot {:.1} MB ({:.0} B a pair)",
        held_by_state as f64 / 1e6,
        per_pair(held_by_state),
        held_by_copy as f64 / 1e6,
        per_pair(held_by_copy),
        held_by_scored as f64 / 1e6,
        per_pair(held_by_scored),
    );
    println!(
        "web view: heat map page ({} nodes) by RTT {:.1} ms, by loss {:.1} ms, {:.2} MB as JSON; worst 20 pairs {:.1} ms",
        web.nodes,
        web.by_rtt.as_secs_f64() * 1e3,
        web.by_loss.as_secs_f64() * 1e3,
        web.json_bytes as f64 / 1e6,
        web.worst.as_secs_f64() * 1e3,
    );
}

/// How long the web view's heaviest answers take.
struct WebTimes {
    nodes: usize,
    by_rtt: std::time::Duration,
    by_loss: std::time::Duration,
    json_bytes: usize,
    worst: std::time::Duration,
}

/// A heat map page of zone-0 by RTT (with estimates) and by loss, and the
/// worst pairs, as the web view's API builds them.
fn web_view(placer: &Placer, now: u64) -> WebTimes {
    use netaware_collector::web::view;
    use netaware_views::heatmap::Metric;
    let scored = placer.matrix();
    let network = Network::primary();
    let topology = netaware_core::measured_topology::MeasuredTopology::default();
    let shown = view::map_nodes(
        scored,
        &topology,
        Some("zone-0"),
        None,
        0,
        view::MAX_MAP_NODES,
    );
    let timed = |metric| {
        let start = Instant::now();
        let map = view::heat_map(scored, &network, placer.faults(), now, &shown, metric);
        (start.elapsed(), map)
    };
    let (by_rtt, map) = timed(Metric::Rtt);
    let json_bytes = serde_json::to_vec(&map).expect("a map encodes").len();
    let (by_loss, _) = timed(Metric::Loss);
    let start = Instant::now();
    let worst = view::worst_pairs(scored, &network, now, 20);
    assert_eq!(worst.len(), 20);
    WebTimes {
        nodes: shown.nodes.len(),
        by_rtt,
        by_loss,
        json_bytes,
        worst: start.elapsed(),
    }
}

/// One scrape of the collector's metrics of `placer`'s matrix, with each
/// zone cut into blocks of 50 nodes, and how long it took.
fn scrape(placer: &Placer, nodes: usize) -> (std::time::Duration, String) {
    const BLOCK: usize = 50;
    let blocks = (0..ZONES)
        .flat_map(|zone| {
            let members: Vec<usize> = (zone..nodes).step_by(ZONES).collect();
            members
                .chunks(BLOCK)
                .enumerate()
                .map(|(number, chunk)| BlockFacts {
                    network: Network::primary(),
                    zone: format!("zone-{zone}"),
                    number: number as u32 + 1,
                    nodes: chunk
                        .iter()
                        .map(|&i| placer.matrix().nodes()[i].info.name.clone())
                        .collect(),
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let facts = ScrapeFacts {
        open_sessions: nodes,
        throughput: ThroughputCounts::default(),
        unknown_peers: 0,
        pair_series: DEFAULT_PAIR_SERIES,
        blocks,
        last_seqs: Vec::new(),
        placement: *placer.config(),
        faults: FaultFacts::default(),
    };
    let start = Instant::now();
    let text = exposition(&WorkMetrics::default(), placer.matrix(), &facts);
    (start.elapsed(), text)
}
