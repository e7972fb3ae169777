//! A firewall the agents did not set up, closed one transport at a time
//! in every worker host (iptables in its namespace), the agents on their
//! default flags.
//!
//! An outage first (every probe to one host dropped for 3 s) moves no
//! pair off ICMP and shows in the loss of every pair to that host. With
//! ICMP echo dropped, the agents measure by UDP (STAMP to each
//! other's reflectors): every pair measured, called ICMP-filtered, the
//! lossy a3 kept out of a job and the slow b2 seen slow, and `netaware
//! doctor` passes with a warning that names the filter. With UDP dropped
//! too, by TCP handshakes, the same. With TCP dropped too, no probe gets
//! through: every pair unanswered, and netaware says it cannot measure
//! instead of failing nodes for loss it never saw: the collector's
//! `netaware_cannot_measure` is 1, `rank` answers neutrally, `doctor`
//! fails and says what to open, and the extender's /filter fails no node,
//! counts the neutral answer and tells the pod in an Event.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::measurement::default_with_a3_clearly_lossy;
use netaware::json::{MatrixJson, PairJson};
use netaware::lab_system::{AgentTiming, LabSystem};
use netaware_core::transport::Transport;
use netaware_lab::root_or_skip;
use netaware_testkit::metrics::sample;
use serde_json::json;

const TIMING: AgentTiming = AgentTiming::FAST;

#[test]
fn with_each_transport_filtered_in_turn_netaware_measures_by_the_next_then_fails_open() {
    if !root_or_skip("lab: ICMP filtered") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    let flags = vec!["--throughput-budget".to_owned(), "0".to_owned()];
    // The default lab with a clearly lossy a3 and a slow host: b2's own
    // stack adds 2 ms to each of its round trips (ten times what its
    // zone-mates' pairs take).
    let mut topology = default_with_a3_clearly_lossy();
    topology
        .hosts
        .get_mut("b2")
        .expect("the default lab's b2")
        .delay_ms = 1.0;
    let system = LabSystem::start(topology, exe, TIMING, &flags).expect("the lab system");
    let hosts: Vec<String> = system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .collect();
    let pairs = hosts.len() * (hosts.len() - 1);
    let wait_for_pairs = |what: &str, done: &dyn Fn(&PairJson) -> bool| -> MatrixJson {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let matrix = system.matrix().expect("the matrix");
            let ready = matrix
                .pairs
                .iter()
                .filter(|p| p.samples >= 50 && done(p))
                .count();
            if ready == pairs {
                return matrix;
            }
            assert!(
                Instant::now() < deadline,
                "only {ready} of {pairs} pairs {what}"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    };
    let status = |doctor: &serde_json::Value, check: &str| {
        doctor["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == check)
            .map(|f| f["status"].as_str().unwrap().to_owned())
    };

    // Healthy first: the doctor passes and finds the probes getting
    // through, by ICMP.
    wait_for_pairs("answered by ICMP", &|p| {
        p.loss_ratio.is_some_and(|l| l < 1.0) && p.probe.as_deref() == Some("icmp")
    });
    let (passed, doctor) = system.doctor().expect("doctor");
    assert!(passed, "{doctor}");
    assert_eq!(
        status(&doctor, "probes_get_through").as_deref(),
        Some("ok"),
        "{doctor}"
    );
    assert_eq!(
        status(&doctor, "filtered_probes").as_deref(),
        Some("ok"),
        "{doctor}"
    );

    // An outage, not a filter: every probe to b3 dropped for 3 s (30 of
    // each prober's, far past the losses in a row that try the next
    // transport). Nothing else got through either, so every pair to b3
    // stays on ICMP and keeps its history, the outage counted in its loss,
    // rather than starting again on a fallback and again on ICMP without
    // it.
    wait_for_pairs("with six windows", &|p| p.samples >= 100);
    system.drop_every_probe("b3").expect("the firewall");
    std::thread::sleep(Duration::from_secs(3));
    system.open_firewall("b3").expect("the firewall");
    std::thread::sleep(Duration::from_secs(4));
    let matrix = system.matrix().expect("the matrix");
    let to_b3: Vec<&PairJson> = matrix.pairs.iter().filter(|p| p.dst == "b3").collect();
    assert_eq!(to_b3.len(), hosts.len() - 1);
    for pair in to_b3 {
        assert!(
            pair.probe.as_deref() == Some("icmp")
                && pair.samples >= 100
                && pair.loss_ratio.is_some_and(|l| l >= 0.1),
            "the outage is not in {} -> b3's figures: {pair:?}",
            pair.src
        );
    }

    // Each transport dropped in turn: the next one measures every pair,
    // says what it found filtered, and sees the lossy and the slow host.
    for (dropped, next) in [(Transport::Icmp, "udp"), (Transport::Udp, "tcp")] {
        for host in &hosts {
            system.drop_probes(host, dropped).expect("the firewall");
        }
        let filtered: Vec<String> = Transport::ALL
            .iter()
            .filter(|t| **t <= dropped)
            .map(|t| t.as_str().to_owned())
            .collect();
        let what = format!("measured by {next}, {filtered:?} filtered");
        let matrix = wait_for_pairs(&what, &|p| {
            p.probe.as_deref() == Some(next)
                && p.filtered == filtered
                && p.loss_ratio.is_some_and(|l| l < 1.0)
        });
        let rtt = |src: &str, dst: &str| {
            let pair = matrix
                .pairs
                .iter()
                .find(|p| p.src == src && p.dst == dst)
                .unwrap();
            pair.rtt_median_ms.unwrap()
        };
        for (src, dst) in [("b1", "b3"), ("b3", "b1"), ("a1", "a2"), ("c2", "c3")] {
            assert!(
                rtt(src, dst) < 1.0,
                "{next}: {src} -> {dst} {} ms",
                rtt(src, dst)
            );
        }
        for (src, dst) in [("b1", "b2"), ("b2", "b1"), ("b3", "b2"), ("b2", "b3")] {
            let slow = rtt(src, dst);
            assert!(
                (1.5..4.0).contains(&slow),
                "{next}: {src} -> {dst} {slow} ms"
            );
        }
        eprintln!(
            "by {next}: b1->b3 {:.3} ms, b1->b2 {:.3} ms (slow), a1->b1 {:.3} ms",
            rtt("b1", "b3"),
            rtt("b1", "b2"),
            rtt("a1", "b1")
        );
        // The lab's a-b links take 5 ms a round trip.
        let between = rtt("a1", "b1");
        assert!(
            (4.5..7.0).contains(&between),
            "{next}: a1 -> b1 {between} ms"
        );
        let zones = system.zones().expect("zones");
        assert!(!zones.cannot_measure, "{zones:?}");
        let rank = system.rank(3, &[]).expect("rank");
        assert_eq!(rank.neutral, None);
        let a3 = rank.nodes.iter().find(|n| n.name == "a3").unwrap();
        assert!(
            !a3.feasible && a3.reason.as_deref().unwrap_or("").contains("loss"),
            "{next}: {a3:?}"
        );
        let (passed, doctor) = system.doctor().expect("doctor");
        assert!(
            passed,
            "a filter that a fallback gets round blocks nothing: {doctor}"
        );
        assert_eq!(
            status(&doctor, "filtered_probes").as_deref(),
            Some("warn"),
            "{doctor}"
        );
    }

    // TCP dropped too: no probe gets through.
    for host in &hosts {
        system
            .drop_probes(host, Transport::Tcp)
            .expect("the firewall");
    }
    // Every pair probed over full windows, and nothing answered.
    wait_for_pairs("unanswered", &|p| p.loss_ratio == Some(1.0));
    let (passed, doctor) = system.doctor().expect("doctor");
    assert!(!passed, "{doctor}");
    assert_eq!(
        status(&doctor, "probes_get_through").as_deref(),
        Some("fail"),
        "{doctor}"
    );
    let zones = system.zones().expect("zones");
    assert!(
        zones.cannot_measure && zones.zones.iter().all(|z| z.cannot_measure),
        "{zones:?}"
    );
    let collector = system.collector_metrics().expect("the collector's metrics");
    assert_eq!(
        sample(&collector, "netaware_cannot_measure"),
        Some(1.0),
        "{collector}"
    );
    let unreached = sample(&collector, "netaware_nodes_unreached");
    assert_eq!(unreached, Some(hosts.len() as f64));
    let rank = system.rank(3, &[]).expect("rank");
    assert_eq!(rank.neutral.as_deref(), Some("cannot_measure"));
    assert!(
        rank.nodes.iter().all(|n| n.passes_filter),
        "rank says the extender fails a node: {:?}",
        rank.nodes
    );

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let extender = netaware_testkit::extender::FollowingExtender::following_lab(
            &system,
            Duration::from_secs(10),
            &shutdown,
        )
        .await;
        let pod = json!({"metadata": {"name": "w-0", "namespace": "ml", "uid": "uid-0",
            "labels": {"netaware.io/group": "job", "netaware.io/group-size": "3"}}});
        let filtered = extender
            .post("/filter", json!({"Pod": pod, "NodeNames": hosts}))
            .await;
        let passing: Vec<String> = serde_json::from_value(filtered["NodeNames"].clone()).unwrap();
        assert_eq!(passing, hosts, "{filtered}");
        let failed = &filtered["FailedNodes"];
        assert!(
            failed.is_null() || failed.as_object().is_some_and(|f| f.is_empty()),
            "{filtered}"
        );
        let metrics = extender.metrics().await;
        let neutral = sample(
            &metrics,
            "netaware_scheduler_neutral_answers_total{reason=\"cannot_measure\"}",
        );
        assert!(neutral.is_some_and(|n| n >= 1.0), "{metrics}");
        // The Event is posted on a task of its own.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let told = extender
                .api_calls
                .lock()
                .unwrap()
                .iter()
                .any(|call| call.contains("/events") && call.contains("cannot measure"));
            if told {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no Event: {:?}",
                extender.api_calls.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        shutdown.cancel();
    });
}
