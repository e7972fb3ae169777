//! A dual-stack lab (every host with an IPv4 and an IPv6 address, agents
//! on their default flags): each family is measured and kept apart, as the
//! networks `primary` (IPv4) and `primary-ipv6`, each matching the truth;
//! a firewall that drops ICMPv6 echo into one host moves only that host's
//! IPv6 pairs to UDP; placement goes by the primary network.

use std::path::Path;

use netaware::lab_system::{AgentTiming, IpFamily, LabSystem};
use netaware_core::transport::Transport;
use netaware_lab::{Topology, root_or_skip};

use crate::measurement::no_throughput_tests;
use crate::per_network::{
    Round, every_network_holds_to_its_truth, fresh_round, start_lab, wait_for_every_network,
};

const NETWORKS: [&str; 2] = ["primary", "primary-ipv6"];

#[test]
fn a_dual_stack_lab_measures_each_family_apart_and_a_filter_on_one_shows_only_there() {
    if !root_or_skip("dual-stack lab") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let system = start_lab("dual");
    // A firewall that drops ICMPv6 echo into b2 and lets IPv4's through.
    system
        .drop_probes_over("b2", Transport::Icmp, IpFamily::V6)
        .unwrap();
    // Every IPv6 pair into b2 measured by UDP, ICMPv6 being dropped there.
    let matrices = wait_for_every_network(&system, &NETWORKS, |read| {
        read[1]
            .pairs
            .iter()
            .filter(|p| p.dst == "b2")
            .all(|p| p.probe.as_deref() == Some("udp"))
    });

    // ICMPv6 is dropped into b2 only; everything else goes by ICMP on
    // both families.
    for (network, matrix) in NETWORKS.iter().zip(&matrices) {
        for pair in &matrix.pairs {
            let by_udp = *network == "primary-ipv6" && pair.dst == "b2";
            assert_eq!(
                pair.probe.as_deref(),
                Some(if by_udp { "udp" } else { "icmp" }),
                "{network} {} -> {}",
                pair.src,
                pair.dst
            );
            if by_udp {
                assert!(pair.filtered.iter().any(|t| t == "icmp"), "{pair:?}");
            }
        }
    }
    // Both families cross the same links: one truth (the primary
    // network's) for both, the lossy a2 in each family's pooled loss.
    every_network_holds_to_its_truth(&system, &[(NETWORKS[0], None), (NETWORKS[1], None)]);

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
        wait_for_every_network(&system, &NETWORKS, |_| true);
        let Round {
            matrices,
            conditions,
            ..
        } = fresh_round(&system, &[(NETWORKS[0], None), (NETWORKS[1], None)]);
        for (network, matrix) in NETWORKS.iter().zip(&matrices) {
            let errors: Vec<f64> = matrix
                .pairs
                .iter()
                .map(|p| {
                    let (rtt, _) = system.lab().round_trip(&p.src, &p.dst).unwrap();
                    p.rtt_median_ms.unwrap() - (rtt + conditions.overhead)
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
