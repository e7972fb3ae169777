//! Every transport on loopback, each agent held to one: real ICMP, real
//! UDP through the peers' STAMP reflectors and real TCP handshakes to
//! their throughput servers, and an inventory node that answers UDP by a
//! reflector of its own (what `netaware reflect` runs). The matrix says
//! which transport measured each pair, and none of them loses a probe on
//! loopback.

use std::time::Duration;

use netaware_agent::transport_choice::ProbeMode;
use netaware_agent::{Counters, reflector};
use netaware_collector::inventory::InventoryNode;
use netaware_collector::{Collector, CollectorConfig};
use netaware_core::transport::Transport;
use netaware_core::{NodeInfo, NodeKind};
use netaware_proto::convert::transport_from_wire;
use netaware_testkit::{collector_config, have_root, start_agent_with, wait_for_matrix};
use tokio_util::sync::CancellationToken;

const AGENTS: [(&str, &str, ProbeMode); 3] = [
    ("tr-icmp", "127.0.0.61", ProbeMode::Auto),
    ("tr-udp", "127.0.0.62", ProbeMode::Only(Transport::Udp)),
    ("tr-tcp", "127.0.0.63", ProbeMode::Only(Transport::Tcp)),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_transport_measures_and_the_matrix_says_which() {
    if !have_root("transports") {
        return;
    }
    let shutdown = CancellationToken::new();
    // A host with no agent: a reflector alone, listed with its port.
    let nas = "127.0.0.64:17472".parse().unwrap();
    let reflected = std::sync::Arc::new(Counters::default());
    let socket = reflector::bind(nas).unwrap();
    tokio::spawn(reflector::serve(
        socket,
        reflected.clone(),
        shutdown.clone(),
    ));
    let config = CollectorConfig {
        inventory: vec![InventoryNode {
            info: NodeInfo {
                name: "tr-nas".into(),
                address: "127.0.0.64".into(),
                zone: "zone-a".into(),
                region: String::new(),
                kind: NodeKind::Inventory,
            },
            stamp_port: Some(17472),
        }],
        ..collector_config(Vec::new(), None)
    };
    let collector = Collector::start(config, shutdown.clone()).await.unwrap();
    let url = format!("http://{}", collector.grpc_addr);
    let agents: Vec<_> = AGENTS
        .iter()
        .map(|(name, address, mode)| {
            start_agent_with(name, address, "zone-a", &collector, &shutdown, |config| {
                netaware_agent::AgentConfig {
                    probe: *mode,
                    ..config
                }
            })
        })
        .collect();
    // Six between the agents, and the inventory node from the two whose
    // transport reaches it (it runs no throughput server).
    let matrix = wait_for_matrix(&url, "every pair measured", Duration::from_secs(20), |m| {
        m.pairs.len() == 8 && m.pairs.iter().all(|p| p.rtt_median_ms.is_some())
    })
    .await;
    for pair in &matrix.pairs {
        let expected = match pair.src.as_str() {
            "tr-icmp" => Transport::Icmp,
            "tr-udp" => Transport::Udp,
            _ => Transport::Tcp,
        };
        let probe = pair.probe.and_then(transport_from_wire);
        assert_eq!(probe, Some(expected), "{} -> {}", pair.src, pair.dst);
        assert!(pair.filtered.is_empty(), "nothing is filtered: {pair:?}");
        let rtt = pair.rtt_median_ms.unwrap();
        assert!(
            rtt > 0.0 && rtt < 5.0,
            "{} -> {}: {rtt} ms {pair:?}",
            pair.src,
            pair.dst
        );
        assert_eq!(pair.loss_ratio, Some(0.0), "{} -> {}", pair.src, pair.dst);
    }
    assert!(
        matrix
            .pairs
            .iter()
            .all(|p| !(p.src == "tr-tcp" && p.dst == "tr-nas")),
        "no TCP probe towards a node without a throughput port"
    );
    assert!(Counters::get(&reflected.reflected) > 0);
    // Each agent sent by its own transport only, and the reflectors of
    // the two that the UDP agent probes answered it.
    for (agent, (name, _, mode)) in agents.iter().zip(AGENTS) {
        let counters = agent.counters();
        for transport in Transport::ALL {
            let sent = counters.sent_by(transport);
            let own = mode == ProbeMode::Only(transport)
                || (mode == ProbeMode::Auto && transport == Transport::Icmp);
            assert_eq!(sent > 0, own, "{name} sent {sent} by {transport}");
        }
        if name != "tr-udp" {
            assert!(
                Counters::get(&counters.reflected) > 0,
                "{name} reflected nothing"
            );
        }
    }
    shutdown.cancel();
}
