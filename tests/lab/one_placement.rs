//! One placement everywhere, on the lab, with placement settings other
//! than the defaults: the collector's (`--loss-threshold 0.3
//! --out-of-zone-factor 0.5 --strict-zone`) reach the extender with the
//! matrix, and `netaware rank`, `netaware explain` and the extender's own
//! /filter and /prioritize answer the same for the same job: which nodes
//! pass, each one's priority, and where the next worker goes.

use std::path::Path;
use std::time::{Duration, Instant};

use netaware::commands::explain::ExplainJson;
use netaware::json::RankJson;
use netaware::lab_system::{AgentTiming, LabSystem};
use netaware_lab::{Topology, root_or_skip};
use serde_json::{Value, json};

const TIMING: AgentTiming = AgentTiming::FAST;

/// What the extender answered for a job's next worker: the nodes that
/// pass its filter, every candidate's priority, and the one it picks.
#[derive(Debug, PartialEq)]
struct Answer {
    passing: Vec<String>,
    priorities: Vec<(String, i64)>,
    next: Option<String>,
}

impl Answer {
    /// What `rank` says the extender answers, in `candidates`' order.
    fn of_rank(rank: &RankJson, candidates: &[String]) -> Self {
        let node = |name: &String| rank.nodes.iter().find(|n| &n.name == name).unwrap();
        Self {
            passing: candidates
                .iter()
                .filter(|c| node(c).passes_filter)
                .cloned()
                .collect(),
            priorities: candidates
                .iter()
                .map(|c| (c.clone(), node(c).extender_score))
                .collect(),
            next: rank.next.clone(),
        }
    }
}

#[test]
fn rank_explain_and_the_extender_agree_on_settings_other_than_the_defaults() {
    if !root_or_skip("lab: one placement") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    let flags: Vec<String> = [
        "--throughput-budget",
        "0",
        "--loss-threshold",
        "0.3",
        "--out-of-zone-factor",
        "0.5",
        "--strict-zone",
    ]
    .map(String::from)
    .to_vec();
    let system = LabSystem::start(Topology::named("default").unwrap(), exe, TIMING, &flags)
        .expect("the lab system");
    let hosts: Vec<String> = system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !system.matrix().is_ok_and(|m| {
        m.pairs.len() == hosts.len() * (hosts.len() - 1) && m.pairs.iter().all(|p| p.samples >= 50)
    }) {
        assert!(Instant::now() < deadline, "the matrix never filled");
        std::thread::sleep(Duration::from_secs(1));
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // The extender as in its pod, on its default flags: scores from the
        // collector's watch, binds to a mock API server.
        let shutdown = tokio_util::sync::CancellationToken::new();
        let extender = netaware_testkit::extender::FollowingExtender::following_lab(
            &system,
            Duration::from_secs(10),
            &shutdown,
        )
        .await;
        let post = |path: &'static str, body: Value| extender.post(path, body);
        let pod = |worker: usize| {
            json!({"metadata": {"name": format!("w-{worker}"), "namespace": "ml",
                "uid": format!("uid-{worker}"),
                "labels": {"netaware.io/group": "job", "netaware.io/group-size": "3"}}})
        };
        let extender_answer = |worker: usize, candidates: Vec<String>| async move {
            let filtered = post("/filter", json!({"Pod": pod(worker), "NodeNames": candidates})).await;
            let passing: Vec<String> = serde_json::from_value(filtered["NodeNames"].clone()).unwrap();
            let scores = post("/prioritize", json!({"Pod": pod(worker), "NodeNames": candidates})).await;
            let priorities: Vec<(String, i64)> = scores
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h["Host"].as_str().unwrap().to_owned(), h["Score"].as_i64().unwrap()))
                .collect();
            // kube-scheduler with this extender alone: the passing node of
            // the highest score, the first of equals.
            let next = priorities
                .iter()
                .filter(|(host, _)| passing.contains(host))
                .fold(None::<&(String, i64)>, |best, candidate| match best {
                    Some(b) if b.1 >= candidate.1 => Some(b),
                    _ => Some(candidate),
                })
                .map(|(host, _)| host.clone());
            Answer {
                passing,
                priorities,
                next,
            }
        };
        // Worker 0, then worker 1 with worker 0 bound to a1. Rank and
        // explain ask the collector now; the extender answers from its copy
        // a moment behind: asked again until both saw the same figures (a
        // window every 2 s moves them), and the last difference is shown.
        for (worker, placed) in [(0, Vec::<&str>::new()), (1, vec!["a1"])] {
            let candidates: Vec<String> = hosts
                .iter()
                .filter(|h| !placed.contains(&h.as_str()))
                .cloned()
                .collect();
            let deadline = Instant::now() + Duration::from_secs(30);
            let (rank, explain) = loop {
                let rank = tokio::task::block_in_place(|| system.rank(3, &placed)).unwrap();
                let mut args = vec!["explain", "--size", "3", "-o", "json"];
                for peer in &placed {
                    args.extend(["--peer", peer]);
                }
                let explain: ExplainJson =
                    serde_json::from_str(&tokio::task::block_in_place(|| system.ask(&args)).unwrap())
                        .unwrap();
                let said = Answer::of_rank(&rank, &candidates);
                let done = extender_answer(worker, candidates.clone()).await;
                if said == done && explain.next == rank.next {
                    break (rank, explain);
                }
                assert!(
                    Instant::now() < deadline,
                    "worker {worker}: rank says the extender answers {said:?}, it answers {done:?}; explain's next {:?}",
                    explain.next
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            };
            // The collector's settings, not the defaults, decided.
            assert_eq!(rank.placement.loss_threshold, 0.3);
            assert_eq!(rank.placement.out_of_zone_factor, 0.5);
            assert!(rank.placement.strict_zone && explain.placement.strict_zone);
            let zone = rank.zone.clone().expect("a zone");
            for node in &rank.nodes {
                // Strict: outside the chosen zone every node fails the
                // filter (the default would let it through, scored low).
                if node.zone != zone {
                    assert!(!node.passes_filter, "{node:?}");
                }
            }
            if worker == 1 {
                assert_eq!(zone, "zone-a", "the zone of the placed worker");
                // a3 loses about 10% to a1 (5% each way): under the
                // collector's 30%, so it passes; by the default 5% it would
                // fail. The bound sits far from the truth because the
                // figure is pooled over some 50 to 100 probes a direction
                // (one standard deviation about 3 to 4 points) and the
                // worse direction counts: 20% was reached by chance.
                let a3 = rank.nodes.iter().find(|n| n.name == "a3").unwrap();
                assert!(a3.passes_filter && a3.feasible, "{a3:?}");
            }
            let next = rank.next.clone().expect("a node takes the worker");
            let bound = post("/bind", json!({"PodName": format!("w-{worker}"), "PodNamespace": "ml",
                "PodUID": format!("uid-{worker}"), "Node": if worker == 0 { "a1".to_owned() } else { next }}))
            .await;
            assert_eq!(bound["Error"], "", "{bound}");
        }
        shutdown.cancel();
    });
}
