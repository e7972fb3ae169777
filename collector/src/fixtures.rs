//! Builders of the agents' messages for the collector's unit tests: a
//! hello, a peer's figures and a window, with the fields no test cares
//! about set once here.

use netaware_proto::v1::{Hello, PeerWindow, Window};

/// The hello of `node` in `zone`, on one address (1 s windows).
pub(crate) fn hello(node: &str, zone: &str, address: &str) -> Hello {
    Hello {
        node: node.into(),
        addresses: vec![address.into()],
        zone: zone.into(),
        window_ms: 1_000,
        probe_interval_ms: 100,
        instance: 1,
        ..Hello::default()
    }
}

/// A peer's window: `received` of `sent` replies, every quantile `rtt`.
pub(crate) fn peer(name: &str, rtt: f64, sent: u32, received: u32) -> PeerWindow {
    PeerWindow {
        peer: name.into(),
        sent,
        received,
        rtt_min_ms: rtt,
        rtt_median_ms: rtt,
        rtt_p90_ms: rtt,
        rtt_p99_ms: rtt,
        rtt_max_ms: rtt,
        ..PeerWindow::default()
    }
}

/// The first window of an agent, from 1 s to 2 s, of `peers`.
pub(crate) fn window(peers: Vec<PeerWindow>) -> Window {
    Window {
        seq: 1,
        start_unix_ms: 1_000,
        end_unix_ms: 2_000,
        peers,
        ..Window::default()
    }
}

/// The scored matrix of `nodes` (name, zone), every one said hello, after
/// `prober`'s first window of `peers`.
pub(crate) fn scored_after(
    nodes: &[(&str, &str)],
    prober: &str,
    peers: Vec<PeerWindow>,
) -> netaware_core::scored::ScoredMatrix {
    let mut state =
        crate::state::CollectorState::new(crate::config::ModelConfig::default(), Vec::new());
    for (node, zone) in nodes {
        state.hello(&hello(node, zone, "127.0.0.2"), 1_000).unwrap();
    }
    state.ingest(prober, &window(peers), 2_000).unwrap();
    state.snapshot(2_000)
}
