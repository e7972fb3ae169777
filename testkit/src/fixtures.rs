//! The messages tests send: one hello, one peer window, one window.
//! Variations are struct updates of these (`Hello { zone: .., ..hello(n) }`).

use netaware_proto::v1 as pb;

use crate::now_ms;

/// A valid hello for `node` in zone-a (1 s windows).
pub fn hello(node: &str) -> pb::Hello {
    pb::Hello {
        node: node.into(),
        addresses: vec!["127.0.0.51".into()],
        zone: "zone-a".into(),
        region: String::new(),
        agent_version: "test".into(),
        window_ms: 1_000,
        probe_interval_ms: 100,
        instance: 42,
        // No throughput server: hand-driven sessions get no test orders.
        throughput_port: 0,
        stamp_port: 0,
        sent_unix_ms: now_ms(),
        networks: Vec::new(),
    }
}

/// `hello` as the first message of a session.
pub fn hello_message(hello: pb::Hello) -> pb::AgentMessage {
    pb::AgentMessage {
        body: Some(pb::agent_message::Body::Hello(hello)),
    }
}

/// A valid window entry towards node "b": 10 probes, all answered.
pub fn good_peer() -> pb::PeerWindow {
    pb::PeerWindow {
        peer: "b".into(),
        sent: 10,
        received: 10,
        rtt_min_ms: 0.1,
        rtt_median_ms: 0.2,
        rtt_p90_ms: 0.3,
        rtt_p99_ms: 0.4,
        rtt_max_ms: 0.5,
        jitter_ms: 0.05,
        ..pb::PeerWindow::default()
    }
}

/// A window ending now.
pub fn window(seq: u64, peers: Vec<pb::PeerWindow>) -> pb::Window {
    let end = now_ms();
    pb::Window {
        seq,
        start_unix_ms: end - 1_000,
        end_unix_ms: end,
        peers,
        stats: None,
        throughput: Vec::new(),
    }
}
