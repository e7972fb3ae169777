//! A node that lies about its replies, on the lab: b1 runs a forger that
//! answers every prober's next echo request ahead of time, with the
//! payload of its last one. The agents take a reply only with their
//! probe's nonce, so b1 is measured at its true distance, and every agent
//! that probes it counts the forged replies it refused.

use std::path::Path;
use std::time::{Duration, Instant};

use netaware::lab_system::{AgentTiming, LabSystem};
use netaware_lab::{Topology, root_or_skip};

const TIMING: AgentTiming = AgentTiming::FAST;

/// The count of forged replies an agent's /metrics reports.
fn forged(metrics: &str) -> f64 {
    netaware_testkit::metrics::sample(
        metrics,
        "netaware_agent_replies_refused_total{reason=\"forged\"}",
    )
    .unwrap_or(0.0)
}

#[test]
fn a_node_that_answers_ahead_of_the_probes_is_seen_at_its_true_distance() {
    if !root_or_skip("lab: a lying node") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    let flags = vec!["--throughput-budget".to_owned(), "0".to_owned()];
    let system = LabSystem::start(Topology::named("default").unwrap(), exe, TIMING, &flags)
        .expect("the lab system");
    system.start_forger("b1").expect("the forger");
    let probers: Vec<String> = system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .filter(|name| name != "b1")
        .collect();

    // Every pair towards b1 measured over full windows.
    let deadline = Instant::now() + Duration::from_secs(60);
    let matrix = loop {
        let matrix = system.matrix().expect("the matrix");
        let towards_b1 = matrix
            .pairs
            .iter()
            .filter(|p| p.dst == "b1" && p.samples >= 50)
            .count();
        if towards_b1 == probers.len() {
            break matrix;
        }
        assert!(
            Instant::now() < deadline,
            "only {towards_b1} of {} pairs towards b1 measured",
            probers.len()
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    for pair in matrix.pairs.iter().filter(|p| p.dst == "b1") {
        let (truth, delivered) = system.lab().round_trip(&pair.src, "b1").unwrap();
        let rtt = pair.rtt_median_ms.expect("replies");
        // The emulator adds about 0.07 ms to every round trip; a forged
        // reply would have come back in about one way's time, or at once.
        assert!(
            rtt >= truth && rtt <= truth * 1.15 + 0.2,
            "{} -> b1: {rtt:.3} ms, truth {truth:.3} ms",
            pair.src
        );
        // Forged replies cost a path nothing either: where nothing is lost
        // (all but the lossy host's), nothing is counted lost.
        if delivered == 1.0 {
            assert_eq!(pair.loss_ratio, Some(0.0), "{pair:?}");
        }
    }
    // The forger was there, and refused: every prober counts its replies.
    for prober in &probers {
        let metrics = system.agent_metrics(prober).expect("the agent's metrics");
        assert!(
            forged(&metrics) > 0.0,
            "{prober} refused no forged reply: {}",
            metrics
                .lines()
                .filter(|line| line.starts_with("netaware_agent_replies"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}
