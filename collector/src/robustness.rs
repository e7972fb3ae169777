//! Harnesses for untrusted input, shared by the fuzz targets (fuzz/, run by
//! cargo-fuzz) and the property tests that run in CI (tests/robustness.rs):
//! each takes raw bytes as an attacker or a damaged disk would hand them
//! over, feeds them to the real code path, and panics if an invariant
//! breaks. Returning at all means no panic, no NaN and no negative figure.
//! Not for production use.

use netaware_core::scored::ScoredMatrix;
use netaware_proto::v1::{AgentMessage, Hello, PeerWindow, Window, agent_message};
use prost::Message;

use crate::config::ModelConfig;
use crate::saved::RecordReader;
use crate::state::CollectorState;
use crate::state::Restored;

/// Now, for the harnesses: a fixed clock, so that runs repeat.
pub const NOW_MS: u64 = 1_800_000_000_000;

fn hello(node: &str) -> Hello {
    Hello {
        node: node.into(),
        addresses: vec!["10.0.0.1".into()],
        zone: "z".into(),
        window_ms: 1_000,
        probe_interval_ms: 100,
        instance: 1,
        ..Hello::default()
    }
}

/// A state with agents a, b and c, and one good window from a.
pub fn seeded_state() -> CollectorState {
    let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
    state.start_journal();
    for node in ["a", "b", "c"] {
        state.hello(&hello(node), NOW_MS).expect("a valid hello");
    }
    let good = Window {
        seq: 1,
        start_unix_ms: NOW_MS - 1_000,
        end_unix_ms: NOW_MS,
        peers: vec![PeerWindow {
            peer: "b".into(),
            sent: 10,
            received: 9,
            rtt_min_ms: 1.0,
            rtt_median_ms: 1.5,
            rtt_p90_ms: 2.0,
            rtt_p99_ms: 2.5,
            rtt_max_ms: 3.0,
            jitter_ms: 0.1,
            ..PeerWindow::default()
        }],
        ..Window::default()
    };
    state.ingest("a", &good, NOW_MS).expect("a valid window");
    state
}

/// Panics unless every figure of the matrix is finite and not negative,
/// and every ratio and quality within 0..=1.
pub fn assert_sane(matrix: &ScoredMatrix) {
    let finite = |what: &str, value: Option<f64>| {
        if let Some(v) = value {
            assert!(v.is_finite() && v >= 0.0, "{what} = {v}");
        }
    };
    for pair in matrix.pairs() {
        let s = &pair.summary;
        finite("rtt_median_ms", s.rtt_median_ms);
        finite("rtt_p99_ms", s.rtt_p99_ms);
        finite("jitter_ms", s.jitter_ms);
        finite("loss_ratio", s.loss_ratio);
        finite("one_way_loss_ratio", s.one_way_loss_ratio);
        finite("goodput", s.throughput.map(|t| t.bps));
        assert!(s.loss_ratio.is_none_or(|l| l <= 1.0), "loss {s:?}");
        assert!(
            (0.0..=1.0).contains(&pair.quality),
            "quality {}",
            pair.quality
        );
    }
}

/// Bytes as an agent's message: applied to a seeded state as agent a's
/// next message (a window, or anything else that must be refused). A
/// refused window must leave the matrix exactly as it was.
pub fn agent_message_bytes(bytes: &[u8]) {
    let Ok(message) = AgentMessage::decode(bytes) else {
        return;
    };
    let mut state = seeded_state();
    let before = state.snapshot(NOW_MS);
    match message.body {
        Some(agent_message::Body::Window(window)) => {
            let ingested = state.ingest("a", &window, NOW_MS);
            let after = state.snapshot(NOW_MS);
            if ingested.is_err() {
                assert_eq!(
                    format!("{:?}", before.pairs()),
                    format!("{:?}", after.pairs()),
                    "a refused window changed the matrix"
                );
            }
            assert_sane(&after);
        }
        Some(agent_message::Body::Hello(hello)) => {
            // Refused or taken; either way the state stays sane.
            let _ = state.hello(&hello, NOW_MS);
            assert_sane(&state.snapshot(NOW_MS));
        }
        None => {}
    }
}

/// Bytes as a saved state file: each good record restored, the rest
/// refused, never a panic, and the restored state is sane.
pub fn state_file_bytes(bytes: &[u8]) {
    let mut restored = Restored::new(ModelConfig::default(), Vec::new());
    if let Ok(reader) = RecordReader::new(bytes) {
        for record in reader.map_while(Result::ok) {
            restored.apply(&record);
        }
    }
    assert_sane(&restored.state.snapshot(NOW_MS));
}

/// The saved file of [`seeded_state`]'s journal, with byte `at` (modulo
/// their length) of the records' contents set to `byte` and each frame's
/// checksum made to match: what reaches the checks behind the checksum.
pub fn mutated_state_file(at: usize, byte: u8) -> Vec<u8> {
    let journal = seeded_state().take_journal().to_bytes();
    // Each frame: length (4), checksum (4), contents.
    let mut frames = Vec::new();
    let mut offset = 0;
    while offset + 8 <= journal.len() {
        let length = u32::from_le_bytes(journal[offset..offset + 4].try_into().unwrap_or_default());
        frames.push((offset, length as usize));
        offset += 8 + length as usize;
    }
    let total: usize = frames.iter().map(|(_, length)| length).sum();
    let mut file = crate::saved::header().to_vec();
    let mut mutated = journal.clone();
    let mut left = at % total.max(1);
    let hit = frames.into_iter().find(|&(_, length)| {
        let inside = left < length;
        if !inside {
            left -= length;
        }
        inside
    });
    if let Some((start, length)) = hit {
        mutated[start + 8 + left] = byte;
        let checksum = crc32fast::hash(&mutated[start + 8..start + 8 + length]);
        mutated[start + 4..start + 8].copy_from_slice(&checksum.to_le_bytes());
    }
    file.extend_from_slice(&mutated);
    file
}

/// Bytes as an inventory file.
pub fn inventory_bytes(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    if let Ok(nodes) = crate::inventory::parse(text) {
        for node in nodes {
            let info = &node.info;
            assert!(!info.name.is_empty() && info.address.parse::<std::net::IpAddr>().is_ok());
        }
    }
}
