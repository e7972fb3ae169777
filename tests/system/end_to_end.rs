//! A real collector and four real agents on loopback addresses, over real
//! gRPC, real ICMP and real TCP: the whole core loop with the throughput
//! tests the collector plans, then an agent killed.

use std::time::Duration;

use netaware::client::ScoresConnection;
use netaware_core::{NodeInfo, NodeKind};
use netaware_proto::v1 as pb;
use netaware_testkit::{have_root, start_agent, start_collector, wait_for_matrix};
use tokio_util::sync::CancellationToken;

const AGENTS: [(&str, &str, &str); 4] = [
    ("e2e-a1", "127.0.0.41", "zone-a"),
    ("e2e-a2", "127.0.0.42", "zone-a"),
    ("e2e-b1", "127.0.0.43", "zone-b"),
    ("e2e-b2", "127.0.0.44", "zone-b"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_measure_the_collector_scores_and_a_killed_agent_goes_stale() {
    if !have_root("end_to_end") {
        return;
    }
    let shutdown = CancellationToken::new();
    let nas = NodeInfo {
        name: "e2e-nas".into(),
        address: "127.0.0.45".into(),
        zone: "zone-a".into(),
        region: "r1".into(),
        kind: NodeKind::Inventory,
    };
    let collector = start_collector(vec![nas], &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let mut agent_stops = Vec::new();
    let mut agents = Vec::new();
    for (name, address, zone) in AGENTS {
        let stop = shutdown.child_token();
        agents.push(start_agent(name, address, zone, &collector, &stop));
        agent_stops.push(stop);
    }
    let mut scores = ScoresConnection::connect(&url).await.unwrap();

    // Every agent measures every other node, the inventory node included.
    let matrix = wait_for_matrix(
        &url,
        "every pair to have a fresh window with replies",
        Duration::from_secs(20),
        |m| {
            m.pairs.len() == 4 * 4
                && m.pairs
                    .iter()
                    .all(|p| !p.stale && p.samples > 0 && p.rtt_median_ms.is_some())
        },
    )
    .await;
    assert_eq!(matrix.nodes.len(), 5);
    for p in &matrix.pairs {
        let rtt = p.rtt_median_ms.unwrap();
        assert!(
            rtt > 0.0 && rtt < 5.0,
            "{} -> {}: loopback RTT {rtt} ms",
            p.src,
            p.dst
        );
        assert_eq!(
            p.loss_ratio,
            Some(0.0),
            "{} -> {} lost probes on loopback",
            p.src,
            p.dst
        );
        assert!(p.rtt_p99_ms.unwrap() >= rtt);
        assert!((0.0..=1.0).contains(&p.quality) && p.quality > 0.3, "{p:?}");
        let terms = p.terms.unwrap();
        assert_eq!(terms.delay_source(), pb::Source::Measured);
    }
    let nas = matrix.nodes.iter().find(|n| n.name == "e2e-nas").unwrap();
    assert_eq!((nas.kind(), nas.stale), (pb::NodeKind::Inventory, false));
    assert!(
        matrix.pairs.iter().all(|p| p.src != "e2e-nas"),
        "inventory nodes do not probe"
    );

    // The collector plans a throughput test for every pair of agents (not
    // the inventory node: it runs no server), one test per node at a time.
    let matrix = wait_for_matrix(
        &url,
        "every pair of agents to have a goodput",
        Duration::from_secs(40),
        |m| {
            m.pairs
                .iter()
                .filter(|p| p.dst != "e2e-nas")
                .all(|p| p.throughput_bps.is_some())
        },
    )
    .await;
    for p in &matrix.pairs {
        let terms = p.terms.unwrap();
        if p.dst == "e2e-nas" {
            assert_eq!(p.throughput_bps, None);
            assert_ne!(terms.throughput_source(), pb::Source::Measured);
            continue;
        }
        let goodput = p.throughput_bps.unwrap();
        assert!(
            goodput > 100e6,
            "{} -> {}: {goodput} bit/s on loopback",
            p.src,
            p.dst
        );
        assert_eq!(terms.throughput_source(), pb::Source::Measured);
        assert!(terms.throughput > 0.0);
        // Linux gives TCP_INFO: the sender's view travels with the goodput.
        assert!(p.throughput_retransmits.is_some(), "{p:?}");
        assert!(
            p.throughput_tcp_rtt_ms.is_some_and(|rtt| rtt >= 0.0),
            "{p:?}"
        );
        assert!(
            p.throughput_age_s
                .is_some_and(|age| (0.0..60.0).contains(&age)),
            "{p:?}"
        );
    }

    // Every endpoint's metrics: the agent's work, the collector's work and
    // the matrix in base units.
    let agent_metrics = format!("{}:{}", AGENTS[1].1, netaware_testkit::AGENT_METRICS_PORT);
    let (status, text) = netaware_testkit::get(agent_metrics.parse().unwrap(), "/metrics").await;
    assert_eq!(status, 200);
    let value = |text: &str, series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    };
    assert!(
        value(
            &text,
            "netaware_agent_probes_sent_total{transport=\"icmp\"}"
        ) > 0.0
    );
    assert!(value(&text, "netaware_agent_windows_acked_total") > 0.0);
    let build = format!(
        "netaware_agent_build_info{{version=\"{}\"}}",
        netaware_runtime::build_info::VERSION
    );
    assert_eq!(value(&text, &build), 1.0);
    assert!(
        value(
            &text,
            "netaware_agent_throughput_tests_total{outcome=\"ok\"}"
        ) > 0.0
    );
    assert_eq!(value(&text, "netaware_agent_windows_dropped_total"), 0.0);
    netaware_testkit::check_with_promtool("the agent's /metrics", &text);
    let (status, text) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(value(&text, "netaware_collector_sessions_open"), 4.0);
    // At least the published snapshot is alive (the gauge is the
    // process's: other tests' collectors may add theirs).
    assert!(value(&text, "netaware_collector_snapshots_live") >= 1.0);
    netaware_testkit::check_with_promtool("the collector's /metrics", &text);
    assert!(
        value(
            &text,
            "netaware_collector_windows_accepted_total{node=\"e2e-a2\"}"
        ) > 0.0
    );
    // Each agent was sent peer sets; those sent once all four had joined
    // hold the other three (the first ones fewer).
    let sets = value(&text, "netaware_collector_peer_set_size_count");
    assert!(sets >= 4.0, "{sets} peer sets");
    assert!(value(&text, "netaware_collector_peer_set_size_bucket{le=\"2.0\"}") < sets);
    let rtt = value(
        &text,
        "netaware_pair_rtt_seconds{src=\"e2e-a1\",dst=\"e2e-a2\",src_zone=\"zone-a\",dst_zone=\"zone-a\",network=\"primary\"}",
    );
    assert!(rtt > 0.0 && rtt < 0.005, "loopback RTT {rtt} s");
    let goodput = value(
        &text,
        "netaware_zone_pair_goodput_bytes_per_second{src_zone=\"zone-a\",dst_zone=\"zone-b\"}",
    );
    assert!(goodput > 100e6 / 8.0, "{goodput} B/s");

    let zones = scores.zones().await.unwrap();
    let names: Vec<&str> = zones.zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(names, ["zone-a", "zone-b"]);
    let ab = zones
        .zone_pairs
        .iter()
        .find(|z| z.src_zone == "zone-a" && z.dst_zone == "zone-b")
        .unwrap();
    assert_eq!((ab.pairs, ab.measured_pairs), (4, 4));
    assert!(ab.throughput_bps.is_some_and(|bps| bps > 100e6), "{ab:?}");

    // With a worker on e2e-b1, its zone-mate ranks first.
    let ranking = scores.rank(2, &["e2e-b1".to_owned()]).await.unwrap();
    assert_eq!(ranking.zone, "zone-b");
    assert_eq!(ranking.nodes[0].name, "e2e-b2");
    assert_eq!(
        ranking.nodes[0].terms.as_ref().unwrap().basis(),
        pb::Basis::Placed
    );
    assert!(
        ranking.nodes[1..]
            .iter()
            .all(|n| n.score < ranking.nodes[0].score)
    );

    // Kill one agent: it goes stale within 3 windows (plus slack for the
    // last window in flight), and placement no longer offers it.
    agent_stops[0].cancel();
    agents.remove(0).wait().await;
    let killed_at = tokio::time::Instant::now();
    wait_for_matrix(
        &url,
        "the killed agent to go stale",
        Duration::from_secs(8),
        |m| m.nodes.iter().any(|n| n.name == "e2e-a1" && n.stale),
    )
    .await;
    assert!(
        killed_at.elapsed() <= Duration::from_secs(5),
        "stale after {:?}",
        killed_at.elapsed()
    );
    let ranking = scores.rank(2, &[]).await.unwrap();
    let a1 = ranking.nodes.iter().find(|n| n.name == "e2e-a1").unwrap();
    assert!(!a1.feasible && a1.reason.contains("stale"), "{a1:?}");

    shutdown.cancel();
    for agent in agents {
        agent.wait().await;
    }
    collector.wait().await;
}
