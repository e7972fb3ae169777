//! A lab with two networks (the `rails` topology: the primary, and rail-0
//! on a second interface of every host, with faults of its own), agents
//! told of rail-0 by `--network rail-0=172.16.0.0/16` as a DaemonSet would
//! tell them: each network's matrix follows its own truth, and placement
//! by each network follows that network.

use std::time::Duration;

use netaware_lab::fitness::{MAX_TRIES, Tries, Verdict};
use netaware_lab::root_or_skip;

use crate::overhead::watched;
use crate::per_network::{
    PAIR_TOLERANCE_MS, every_network_holds_to_its_truth, start_lab, wait_for_every_network,
};

const NETWORKS: [&str; 2] = ["primary", "rail-0"];

#[test]
fn each_network_follows_its_own_truth_and_placement_by_it_follows_that_network() {
    if !root_or_skip("rails lab") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let system = start_lab("rails");
    let lab = system.lab();
    let rail = lab.topology().network_number("rail-0");
    wait_for_every_network(&system, &NETWORKS, |_| true);

    // Ping itself over rail-0 (the address on net1), timed on the wire,
    // against rail-0's truth plus what the lab added over the same seconds
    // (its overhead and lateness), on the median of its tries: the lab
    // routes the rail apart from the primary network.
    let c2_on_rail = lab.host("c2").unwrap().spec.networks[0].to_string();
    let (rail_rtt, _) = lab.round_trip_on(rail, "a1", "c2").unwrap();
    let (mut tries, mut readings) = (Tries::default(), Vec::new());
    while tries.verdict() == Verdict::Undecided && readings.len() < MAX_TRIES {
        let (conditions, mut pinged) = watched(&system, &[(rail, "a1", "c2")], || {
            lab.ping_on_the_wire("a1", &c2_on_rail, 20, Duration::from_millis(20))
                .unwrap()
        });
        pinged.sort_by(f64::total_cmp);
        let ping = pinged[pinged.len() / 2];
        let truth = conditions.truth(0, rail_rtt);
        tries.push((ping - truth).abs() > PAIR_TOLERANCE_MS);
        readings.push(format!("{ping:.3} ms, truth {truth:.3} ms, {conditions}"));
    }
    assert_eq!(
        tries.verdict(),
        Verdict::Holds,
        "ping a1 -> c2 over rail-0, configured {rail_rtt} ms:\n{}",
        readings.join("\n")
    );

    // Each network's pairs against its own truth, and each network's
    // lossy host (a3 on the primary, b1 on rail-0) in its own pooled loss.
    every_network_holds_to_its_truth(&system, &[("primary", None), ("rail-0", rail)]);

    // Placement by each network: zone-a is whole on rail-0 and broken on
    // the primary (a3), zone-b the other way round (b1).
    let feasible = |network: &str, placed: &str, node: &str| {
        let ranking = system.rank_on(network, 3, &[placed]).unwrap();
        let entry = ranking.nodes.iter().find(|n| n.name == node).unwrap();
        (entry.feasible, entry.reason.clone())
    };
    let (ok, reason) = feasible("primary", "a1", "a3");
    assert!(
        !ok && reason.as_deref().unwrap_or("").contains("loss"),
        "{reason:?}"
    );
    assert!(feasible("rail-0", "a1", "a3").0, "a3 is clean on rail-0");
    let (ok, reason) = feasible("rail-0", "b2", "b1");
    assert!(
        !ok && reason.as_deref().unwrap_or("").contains("loss"),
        "{reason:?}"
    );
    assert!(
        feasible("primary", "b2", "b1").0,
        "b1 is clean on the primary"
    );
    for (network, lossy) in [("primary", "a3"), ("rail-0", "b1")] {
        let ranking = system.rank_on(network, 3, &[]).unwrap();
        let top: Vec<&str> = ranking
            .nodes
            .iter()
            .take(3)
            .map(|n| n.name.as_str())
            .collect();
        let zone = ranking.zone.clone().unwrap();
        assert!(
            ranking
                .nodes
                .iter()
                .take(3)
                .all(|n| n.feasible && n.zone == zone),
            "{network}: {ranking:?}"
        );
        assert!(!top.contains(&lossy), "{network}: {top:?}");
    }
    // A network nobody measured is an error that names the ones there are.
    let err = system.rank_on("rail-9", 3, &[]).unwrap_err().to_string();
    assert!(err.contains("primary, rail-0"), "{err}");
}
