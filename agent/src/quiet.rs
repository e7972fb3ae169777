//! Peers not to probe for a while: a throughput test fills the path between
//! its two nodes, and echo requests queued behind its data would report the
//! test's queueing delay as the link's RTT. Both ends of a test pause their
//! probes to each other for its slot; sequence numbers do not advance, so
//! the peer's one-way loss count sees no gap. Time is passed in.

use std::sync::Mutex;

/// Pauses, by peer name.
#[derive(Debug, Default)]
pub struct QuietPeers {
    pauses: Mutex<Vec<Pause>>,
}

#[derive(Debug, Clone)]
struct Pause {
    peer: String,
    from_ms: u64,
    until_ms: u64,
}

impl QuietPeers {
    /// Pauses probes to `peer` from `from_ms` to `until_ms` (Unix ms).
    pub fn pause(&self, peer: &str, from_ms: u64, until_ms: u64) {
        let mut pauses = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        pauses.retain(|p| p.until_ms > from_ms.min(until_ms));
        pauses.push(Pause {
            peer: peer.to_owned(),
            from_ms,
            until_ms,
        });
    }

    /// Whether `peer` may not be probed at `now_ms`.
    pub fn is_quiet(&self, peer: &str, now_ms: u64) -> bool {
        let pauses = self.pauses.lock().unwrap_or_else(|e| e.into_inner());
        pauses
            .iter()
            .any(|p| p.peer == peer && (p.from_ms..p.until_ms).contains(&now_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_one_peer_for_its_time_only() {
        let quiet = QuietPeers::default();
        quiet.pause("b", 1_000, 2_000);
        assert!(!quiet.is_quiet("b", 999));
        assert!(quiet.is_quiet("b", 1_000));
        assert!(quiet.is_quiet("b", 1_999));
        assert!(!quiet.is_quiet("b", 2_000));
        assert!(!quiet.is_quiet("c", 1_500));
        // Old pauses are forgotten when new ones come.
        quiet.pause("c", 5_000, 6_000);
        assert!(!quiet.is_quiet("b", 1_500));
        assert!(quiet.is_quiet("c", 5_500));
    }
}
