//! A firewall the agents did not set up: once `netaware doctor` has found
//! the healthy lab healthy, every worker host drops ICMP echo requests
//! (iptables in its namespace), so no probe gets through. The matrix shows
//! every pair unanswered, and netaware says it cannot measure instead of
//! failing nodes for loss it never saw: the collector's
//! `netaware_cannot_measure` is 1, `rank` answers neutrally, `doctor`
//! fails and says what to open, and the extender's /filter fails no node,
//! counts the neutral answer and tells the pod in an Event.

use std::path::Path;
use std::time::{Duration, Instant};

use netaware::lab_system::{AgentTiming, LabSystem};
use netaware_lab::{Topology, root_or_skip};
use netaware_testkit::metrics::sample;
use serde_json::json;

const TIMING: AgentTiming = AgentTiming::FAST;

#[test]
fn with_icmp_dropped_everywhere_placement_fails_open_and_says_why() {
    if !root_or_skip("lab: ICMP filtered") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    let flags = vec!["--throughput-budget".to_owned(), "0".to_owned()];
    let system = LabSystem::start(Topology::named("default").unwrap(), exe, TIMING, &flags)
        .expect("the lab system");
    let hosts: Vec<String> = system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .collect();
    let pairs = hosts.len() * (hosts.len() - 1);
    let wait_for_pairs = |what: &str, done: &dyn Fn(&netaware::json::PairJson) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let matrix = system.matrix().expect("the matrix");
            let ready = matrix
                .pairs
                .iter()
                .filter(|p| p.samples >= 50 && done(p))
                .count();
            if ready == pairs {
                return;
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

    // Healthy first: the doctor passes and finds the probes getting through.
    wait_for_pairs("answered", &|p| p.loss_ratio.is_some_and(|l| l < 1.0));
    let (passed, doctor) = system.doctor().expect("doctor");
    assert!(passed, "{doctor}");
    assert_eq!(
        status(&doctor, "probes_get_through").as_deref(),
        Some("ok"),
        "{doctor}"
    );

    for host in &hosts {
        system.drop_echo_requests(host).expect("the firewall");
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
