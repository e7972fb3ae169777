//! Agent messages of a bounded size: the collector takes messages of at
//! most [`MAX_AGENT_MESSAGE_BYTES`] from an agent, and a window too large
//! for one message is sent as several ([`window_parts`]).
//!
//! A window is about 5 KiB at 64 peers, but an agent told to probe every
//! node of a large cluster (`--max-peers 0`) on several networks reports
//! thousands of peers a window. Rather than letting every agent send the
//! collector messages of many megabytes (and every client that reaches the
//! port with it), the bound stays small and such a window goes in parts:
//! each part is a window of its own (same start and end, a sequence number
//! of its own, acknowledged on its own), holding some of the peers; the
//! first holds the node's figures and throughput results too.

use prost::Message;
use prost::encoding::{encoded_len_varint, message};

use crate::v1::{AgentMessage, Window, agent_message};

/// Largest agent message (hello or window, encoded) the collector takes.
pub const MAX_AGENT_MESSAGE_BYTES: usize = 1 << 20;
/// Largest message the collector sends an agent: a peer set may name every
/// node of a large cluster with its addresses on every network.
pub const MAX_COLLECTOR_MESSAGE_BYTES: usize = 16 << 20;

/// The tag of [`Window::peers`] in `session.proto`.
const PEERS_FIELD: u32 = 4;

/// `window` as parts that each encode, as an [`AgentMessage`], in at most
/// `max_bytes` (a single peer larger than that goes alone). A window that
/// fits is its one part. Sequence numbers are left for the sender to give.
pub fn window_parts(mut window: Window, max_bytes: usize) -> Vec<Window> {
    if message_len(&window) <= max_bytes {
        return vec![window];
    }
    let peers = std::mem::take(&mut window.peers);
    let mut parts = Vec::new();
    let mut part = window;
    let mut part_len = part.encoded_len();
    for peer in peers {
        let peer_len = message::encoded_len(PEERS_FIELD, &peer);
        let grown = part_len + peer_len;
        if !part.peers.is_empty() && wrapped_len(grown) > max_bytes {
            let next = Window {
                peers: Vec::new(),
                stats: None,
                throughput: Vec::new(),
                ..part.clone()
            };
            part_len = next.encoded_len();
            parts.push(std::mem::replace(&mut part, next));
        }
        part_len += peer_len;
        part.peers.push(peer);
    }
    parts.push(part);
    parts
}

/// What `window` takes encoded as an agent message.
pub fn message_len(window: &Window) -> usize {
    wrapped_len(window.encoded_len())
}

/// An agent message around a window of `window_len` bytes.
fn wrapped_len(window_len: usize) -> usize {
    // The oneof's key (one byte for its small tag) and the window's length.
    1 + encoded_len_varint(window_len as u64) + window_len
}

/// `window` as the agent message that carries it.
pub fn window_message(window: Window) -> AgentMessage {
    AgentMessage {
        body: Some(agent_message::Body::Window(window)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{NodeStats, PeerWindow, ThroughputResult};

    fn window(peers: usize, name_len: usize) -> Window {
        Window {
            seq: 0,
            start_unix_ms: 1_000,
            end_unix_ms: 2_000,
            peers: (0..peers)
                .map(|i| PeerWindow {
                    peer: format!("{i:0name_len$}"),
                    sent: 10,
                    received: 9,
                    rtt_median_ms: 0.5,
                    network: "rail3".into(),
                    ..PeerWindow::default()
                })
                .collect(),
            stats: Some(NodeStats {
                cpu_ratio: 0.5,
                ..NodeStats::default()
            }),
            throughput: vec![ThroughputResult::default()],
        }
    }

    #[test]
    fn a_window_that_fits_is_sent_as_it_is() {
        let small = window(64, 40);
        assert_eq!(
            window_parts(small.clone(), MAX_AGENT_MESSAGE_BYTES),
            [small]
        );
    }

    #[test]
    fn a_large_window_goes_in_parts_that_each_fit_and_lose_nothing() {
        // 10,000 peers with the longest names a node may have: about 2.8 MB.
        let large = window(10_000, 253);
        assert!(message_len(&large) > 2 * MAX_AGENT_MESSAGE_BYTES);
        let parts = window_parts(large.clone(), MAX_AGENT_MESSAGE_BYTES);
        assert!(parts.len() >= 3, "{} parts", parts.len());
        for part in &parts {
            let encoded = window_message(part.clone()).encoded_len();
            assert_eq!(encoded, message_len(part), "the length as predicted");
            assert!(encoded <= MAX_AGENT_MESSAGE_BYTES, "{encoded} bytes");
            assert_eq!((part.start_unix_ms, part.end_unix_ms), (1_000, 2_000));
        }
        // Nearly full: no part but the last is much under the bound.
        for part in &parts[..parts.len() - 1] {
            assert!(message_len(part) > MAX_AGENT_MESSAGE_BYTES - 400);
        }
        let peers: Vec<_> = parts.iter().flat_map(|p| p.peers.clone()).collect();
        assert_eq!(peers, large.peers, "every peer once, in order");
        assert_eq!(parts[0].stats, large.stats);
        assert_eq!(parts[0].throughput, large.throughput);
        assert!(
            parts[1..]
                .iter()
                .all(|p| p.stats.is_none() && p.throughput.is_empty())
        );
    }

    #[test]
    fn a_peer_larger_than_the_bound_goes_alone() {
        let parts = window_parts(window(3, 600), 500);
        assert_eq!(
            parts.iter().map(|p| p.peers.len()).collect::<Vec<_>>(),
            [1, 1, 1]
        );
    }
}
