//! A node that lies about its replies, on the lab. b1 runs a forger that
//! answers every prober's next echo request ahead of time, with the
//! payload of its last one. The agents take a reply only with their
//! probe's nonce, so b1 is measured at its true distance, and every agent
//! that probes it counts the forged replies it refused. Or b1's STAMP
//! reflector claims holds far longer than the true ones: it gains at most
//! the bound the agents take out, and every agent counts the claims cut.

use std::path::Path;
use std::time::{Duration, Instant};

use netaware::json::MatrixJson;
use netaware::lab_system::{AgentTiming, LabSystem};
use netaware_lab::{Topology, root_or_skip};

use crate::per_network::{Round, fresh_round};

const TIMING: AgentTiming = AgentTiming::FAST;

/// The count of forged replies an agent's /metrics reports.
fn forged(metrics: &str) -> f64 {
    netaware_testkit::metrics::sample(
        metrics,
        "netaware_agent_replies_refused_total{reason=\"forged\"}",
    )
    .unwrap_or(0.0)
}

/// Every host but b1, the ones that probe it.
fn probers_of_b1(system: &LabSystem) -> Vec<String> {
    system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .filter(|name| name != "b1")
        .collect()
}

/// Polls the matrix until every prober's pair towards b1 has 50 samples
/// (by `probe`, when given), for at most a minute.
fn wait_for_pairs_towards_b1(system: &LabSystem, probers: &[String], probe: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let matrix = system.matrix().expect("the matrix");
        let towards_b1 = matrix
            .pairs
            .iter()
            .filter(|p| p.dst == "b1" && p.samples >= 50)
            .filter(|p| probe.is_none_or(|probe| p.probe.as_deref() == Some(probe)))
            .count();
        if towards_b1 == probers.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {towards_b1} of {} pairs towards b1 measured",
            probers.len()
        );
        std::thread::sleep(Duration::from_secs(1));
    }
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
    let probers = probers_of_b1(&system);

    // Every pair towards b1 measured over full windows.
    wait_for_pairs_towards_b1(&system, &probers, None);
    let (overhead, matrix) = fresh_primary_matrix(&system);
    for pair in matrix.pairs.iter().filter(|p| p.dst == "b1") {
        let (truth, delivered) = system.lab().round_trip(&pair.src, "b1").unwrap();
        let rtt = pair.rtt_median_ms.expect("replies");
        // A forged reply would have come back in about one way's time, or
        // at once; the true one takes the round trip and the emulator's
        // overhead, and no more than the accuracy tests allow beyond.
        assert!(
            rtt >= truth && rtt <= truth * 1.15 + overhead.max(0.1) + 0.1,
            "{} -> b1: {rtt:.3} ms, truth {truth:.3} ms, emulator overhead {overhead:.3} ms",
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

/// The primary matrix of fresh windows, and the emulator's own overhead
/// over their seconds, as ping sees it on the control link (neither liar
/// touches it): some 0.1 ms on a quiet machine, more on a loaded one.
fn fresh_primary_matrix(system: &LabSystem) -> (f64, MatrixJson) {
    let Round {
        mut matrices,
        conditions,
        ..
    } = fresh_round(system, &[("primary", None)]);
    (conditions.overhead, matrices.remove(0))
}

/// The count of reflectors' hold claims an agent's /metrics says it cut.
fn holds_cut(metrics: &str) -> f64 {
    netaware_testkit::metrics::sample(metrics, "netaware_agent_udp_holds_cut_total").unwrap_or(0.0)
}

/// b1's STAMP reflector lies: it claims to have held every probe 5 ms
/// longer than it did. The agents, probing by UDP, take a claimed hold out
/// of the round trip only up to its bound, so b1 looks at most that much
/// closer than it is, and every prober counts the claims it cut.
#[test]
fn a_reflector_that_claims_long_holds_gains_at_most_the_bound_and_is_counted() {
    if !root_or_skip("lab: a lying reflector") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    let flags = vec!["--throughput-budget".to_owned(), "0".to_owned()];
    let agent_flags = ["--probe".to_owned(), "udp".to_owned()];
    let system = LabSystem::start_with_agent_flags(
        Topology::named("default").unwrap(),
        exe,
        TIMING,
        &flags,
        &agent_flags,
    )
    .expect("the lab system");
    system
        .start_lying_reflector("b1", Duration::from_millis(5))
        .expect("the lying reflector");
    let probers = probers_of_b1(&system);

    wait_for_pairs_towards_b1(&system, &probers, Some("udp"));
    let bound_ms = netaware_agent::stamp_packet::MAX_HOLD_TAKEN_OUT.as_secs_f64() * 1e3;
    let (overhead, matrix) = fresh_primary_matrix(&system);
    for pair in matrix.pairs.iter().filter(|p| p.dst == "b1") {
        let (truth, _) = system.lab().round_trip(&pair.src, "b1").unwrap();
        let rtt = pair.rtt_median_ms.expect("replies");
        // Believed, the claim would put b1 at no distance at all; cut at
        // its bound, it takes at most that off the true round trip, which
        // reads no higher than the accuracy tests allow (the emulator's
        // overhead included, as above).
        assert!(
            rtt >= truth - bound_ms && rtt <= truth * 1.15 + overhead.max(0.1) + 0.1,
            "{} -> b1: {rtt:.3} ms, truth {truth:.3} ms, bound {bound_ms} ms, emulator overhead {overhead:.3} ms",
            pair.src
        );
    }
    for prober in &probers {
        let metrics = system.agent_metrics(prober).expect("the agent's metrics");
        assert!(
            holds_cut(&metrics) > 0.0,
            "{prober} cut no claimed hold: {}",
            metrics
                .lines()
                .filter(|line| line.starts_with("netaware_agent_udp"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}
