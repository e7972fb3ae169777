//! A dual-stack lab (every host with an IPv4 and an IPv6 address, agents
//! on their default flags): each family is measured and kept apart, as the
//! networks `primary` (IPv4) and `primary-ipv6`, each matching the truth;
//! a firewall that drops ICMPv6 echo into one host moves only that host's
//! IPv6 pairs to UDP; placement goes by the primary network.

use std::path::Path;
use std::time::{Duration, Instant};

use netaware::json::MatrixJson;
use netaware::lab_system::{AgentTiming, IpFamily, LabSystem};
use netaware_core::transport::Transport;
use netaware_lab::{Topology, root_or_skip};

use crate::measurement::{Z_999, in_binomial_interval_at, no_throughput_tests, pair, ping_median};

const NETWORKS: [&str; 2] = ["primary", "primary-ipv6"];

/// Where a pair's median may be from its configured RTT plus the
/// emulator's overhead (ms): far below b1's extra 2 ms, so that a pair
/// filed under the wrong node or family fails.
const PAIR_TOLERANCE_MS: f64 = 1.0;

/// The mean absolute error over a network's pairs may be at most this
/// (ms), the lab accuracy test's tolerance against the truth.
const MEAN_TOLERANCE_MS: f64 = 0.2;

#[test]
fn a_dual_stack_lab_measures_each_family_apart_and_a_filter_on_one_shows_only_there() {
    if !root_or_skip("dual-stack lab") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    let system = LabSystem::start(
        Topology::named("dual").unwrap(),
        exe,
        AgentTiming::FAST,
        &no_throughput_tests(),
    )
    .unwrap();
    // A firewall that drops ICMPv6 echo into b2 and lets IPv4's through.
    system
        .drop_probes_over("b2", Transport::Icmp, IpFamily::V6)
        .unwrap();
    let workers: Vec<String> = system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .collect();
    let pairs = workers.len() * (workers.len() - 1);

    let deadline = Instant::now() + Duration::from_secs(90);
    let matrices: Vec<MatrixJson> = loop {
        let read: Vec<MatrixJson> = NETWORKS
            .iter()
            .filter_map(|n| system.matrix_of_network(n).ok())
            .collect();
        let settled = read.len() == NETWORKS.len()
            && read.iter().all(|m| {
                m.pairs.len() == pairs
                    && m.pairs.iter().all(|p| p.samples >= 100)
                    && !m.nodes.iter().any(|n| n.stale)
            })
            && read[1]
                .pairs
                .iter()
                .filter(|p| p.dst == "b2")
                .all(|p| p.probe.as_deref() == Some("udp"));
        if settled {
            break read;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for six windows of every pair on both networks: {:?}",
            read.iter()
                .map(|m| (m.pairs.len(), m.pairs.iter().map(|p| p.samples).min()))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(500));
    };

    let (control_rtt, _) = system.lab().round_trip("a1", "control").unwrap();
    let overhead = ping_median(&system, "a1", "control", 50) - control_rtt;
    for (network, matrix) in NETWORKS.iter().zip(&matrices) {
        assert!(matrix.pairs.iter().all(|p| p.network == *network));
        let mut errors = Vec::new();
        let (mut probes, mut lost, mut expected) = (0u64, 0.0, 0.0);
        for src in &workers {
            for dst in workers.iter().filter(|d| *d != src) {
                let pair = pair(matrix, src, dst);
                let (rtt, delivered) = system.lab().round_trip(src, dst).unwrap();
                let error = pair.rtt_median_ms.unwrap() - (rtt + overhead);
                assert!(
                    error.abs() <= PAIR_TOLERANCE_MS,
                    "{network} {src} -> {dst}: median {:?}, configured {rtt} ms",
                    pair.rtt_median_ms
                );
                errors.push(error.abs());
                let loss = pair.loss_ratio.unwrap();
                if delivered < 1.0 {
                    probes += pair.samples;
                    lost += loss * pair.samples as f64;
                    expected += (1.0 - delivered) * pair.samples as f64;
                } else {
                    assert!(loss <= 0.01, "{network} {src} -> {dst}: loss {loss}");
                }
                // ICMPv6 is dropped into b2 only; everything else goes by
                // ICMP on both families.
                let by_udp = *network == "primary-ipv6" && dst == "b2";
                assert_eq!(
                    pair.probe.as_deref(),
                    Some(if by_udp { "udp" } else { "icmp" }),
                    "{network} {src} -> {dst}"
                );
                if by_udp {
                    assert!(pair.filtered.iter().any(|t| t == "icmp"), "{pair:?}");
                }
            }
        }
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        assert!(mean <= MEAN_TOLERANCE_MS, "{network}: mean error {mean} ms");
        // The lossy a2, on both families: the pooled loss of its pairs in
        // its 99.9% interval.
        assert!(probes > 0);
        assert!(
            in_binomial_interval_at(
                Z_999,
                lost / probes as f64,
                expected / probes as f64,
                probes
            ),
            "{network}: pooled loss {} over {probes} probes, configured {}",
            lost / probes as f64,
            expected / probes as f64
        );
    }

    // Placement goes by the primary network: a 3-worker job never gets the
    // lossy a2.
    let ranking = system.rank(3, &[]).unwrap();
    let top: Vec<&str> = ranking
        .nodes
        .iter()
        .take(3)
        .map(|n| n.name.as_str())
        .collect();
    assert!(!top.contains(&"a2"), "{top:?}");
    // A network nobody measured is an error that names the ones there are.
    let err = system.matrix_of_network("rail-9").unwrap_err().to_string();
    assert!(err.contains("primary, primary-ipv6"), "{err}");
}

/// A benchmark, not a check (`--ignored`; BENCHMARKS.md): the dual-stack
/// lab probed by one transport at a time, each family's mean signed error
/// against the truth (the configured RTT plus the emulator's overhead)
/// over the same pairs and seconds.
#[test]
#[ignore = "a benchmark: BENCHMARKS.md runs it"]
fn dual_stack_accuracy_by_family_and_transport() {
    if !root_or_skip("dual-stack accuracy") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    for transport in ["icmp", "udp"] {
        let flags = ["--probe".to_owned(), transport.to_owned()];
        let system = LabSystem::start_with_agent_flags(
            Topology::named("dual").unwrap(),
            exe,
            AgentTiming::FAST,
            &no_throughput_tests(),
            &flags,
        )
        .unwrap();
        let pairs = {
            let n = system.lab().workers().count();
            n * (n - 1)
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        let matrices: Vec<MatrixJson> = loop {
            let read: Vec<MatrixJson> = NETWORKS
                .iter()
                .filter_map(|n| system.matrix_of_network(n).ok())
                .filter(|m| m.pairs.len() == pairs && m.pairs.iter().all(|p| p.samples >= 100))
                .collect();
            if read.len() == NETWORKS.len() {
                break read;
            }
            assert!(Instant::now() < deadline, "timed out by {transport}");
            std::thread::sleep(Duration::from_millis(500));
        };
        let (control_rtt, _) = system.lab().round_trip("a1", "control").unwrap();
        let overhead = ping_median(&system, "a1", "control", 50) - control_rtt;
        for (network, matrix) in NETWORKS.iter().zip(&matrices) {
            let errors: Vec<f64> = matrix
                .pairs
                .iter()
                .map(|p| {
                    let (rtt, _) = system.lab().round_trip(&p.src, &p.dst).unwrap();
                    p.rtt_median_ms.unwrap() - (rtt + overhead)
                })
                .collect();
            eprintln!(
                "by {transport} over {network}: mean signed RTT error over {} pairs {:+.4} ms against the truth",
                errors.len(),
                errors.iter().sum::<f64>() / errors.len() as f64
            );
        }
    }
}
