//! Property tests over untrusted input, in CI: the same harnesses the fuzz
//! targets (fuzz/) drive, fed arbitrary bytes and mutations of valid input.
//! Each harness panics if the code under it panics, lets a NaN or negative
//! figure into the matrix, changes the matrix on a refusal, or answers an
//! extender call with a server error.

use netaware_collector::robustness::{
    NOW_MS, agent_message_bytes, inventory_bytes, mutated_state_file, seeded_state,
    state_file_bytes,
};
use netaware_proto::v1::{AgentMessage, PeerWindow, Window, agent_message};
use netaware_scheduler::robustness::request_bytes;
use proptest::prelude::*;
use prost::Message;

/// Windows from agent a with figures drawn from everywhere, sane or not.
fn any_window() -> impl Strategy<Value = Window> {
    let figure = prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(-1.0),
        Just(0.0),
        0.0..100.0f64,
        Just(1e300),
    ];
    let peer = (
        prop_oneof![Just("a"), Just("b"), Just("c"), Just("nobody"), Just("")],
        0u32..20,
        0u32..20,
        prop::collection::vec(figure, 6),
    )
        .prop_map(|(name, sent, received, f)| PeerWindow {
            peer: name.into(),
            sent,
            received,
            rtt_min_ms: f[0],
            rtt_median_ms: f[1],
            rtt_p90_ms: f[2],
            rtt_p99_ms: f[3],
            rtt_max_ms: f[4],
            jitter_ms: f[5],
            ..PeerWindow::default()
        });
    (
        0u64..5,
        prop_oneof![
            Just(NOW_MS),
            Just(NOW_MS + 60_000),
            Just(0u64),
            any::<u64>()
        ],
        0u64..2_000_000,
        prop::collection::vec(peer, 0..4),
    )
        .prop_map(|(seq, end, length, peers)| Window {
            seq,
            start_unix_ms: end.saturating_sub(length),
            end_unix_ms: end,
            peers,
            ..Window::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_from_an_agent(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        agent_message_bytes(&bytes);
    }

    #[test]
    fn windows_with_any_figures(window in any_window()) {
        let message = AgentMessage { body: Some(agent_message::Body::Window(window)) };
        agent_message_bytes(&message.encode_to_vec());
    }

    #[test]
    fn arbitrary_bytes_as_a_state_file(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        state_file_bytes(&bytes);
    }

    #[test]
    fn mutated_state_files(at in 0usize..4_000, byte in any::<u8>()) {
        state_file_bytes(&mutated_state_file(at, byte));
    }

    #[test]
    fn arbitrary_inventories(text in "\\PC{0,200}") {
        inventory_bytes(text.as_bytes());
    }

    #[test]
    fn arbitrary_extender_requests(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        request_bytes(&bytes);
    }

    #[test]
    fn extender_requests_with_odd_fields(
        names in prop::collection::vec(prop_oneof![Just("a"), Just("b"), Just("zz"), Just("")], 0..5),
        group in prop_oneof![Just("train".to_owned()), Just(String::new()), Just("x".repeat(300))],
        size in prop_oneof![Just("2"), Just("-1"), Just("NaN"), Just("99999999999999999999")],
    ) {
        let body = serde_json::json!({
            "Pod": {"metadata": {"name": "p", "namespace": "ml", "uid": "u",
                "labels": {"netaware.io/group": group, "netaware.io/group-size": size}}},
            "NodeNames": names,
            "PodName": "p", "PodNamespace": "ml", "PodUID": "u", "Node": names.first().copied().unwrap_or(""),
        });
        request_bytes(body.to_string().as_bytes());
    }
}

#[test]
fn a_seeded_state_is_sane_and_a_good_window_is_taken() {
    let state = seeded_state();
    let matrix = state.snapshot(NOW_MS);
    assert_eq!(
        matrix
            .pairs()
            .iter()
            .filter(|p| p.summary.samples > 0)
            .count(),
        1
    );
    netaware_collector::robustness::assert_sane(&matrix);
}
