//! The collector's state as it is saved to disk (`--state-dir`), and back:
//! the agents it knows (with the sequence number of each one's last
//! accepted window, so that windows replayed after a restart are still
//! taken exactly once) and every pair's kept windows and last goodput.
//!
//! Pure, and about the format only: [`SavedState::new`] writes a pair
//! matrix and the nodes down, [`SavedPair::restore_into`] reads a pair back
//! into a matrix, checking everything as if it came from the network (a
//! file is input too). The collector's state uses both
//! (`CollectorState::saved` and `CollectorState::restored`); the file I/O
//! is in [`crate::persist`].

use netaware_core::UnixMillis;
use netaware_core::matrix::{KeptPair, OneWayWindow, PairMatrix, PairWindow, RttStats, Throughput};
use netaware_proto::v1::Hello;
use serde::{Deserialize, Serialize};

use crate::validate::Invalid;

/// The version of the saved format; another version is refused.
pub const FORMAT: u32 = 1;

/// Everything the collector keeps across a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedState {
    /// [`FORMAT`].
    pub format: u32,
    /// When it was saved (Unix ms).
    pub saved_at: UnixMillis,
    /// The agents' nodes.
    pub nodes: Vec<SavedNode>,
    /// Every pair with data.
    pub pairs: Vec<SavedPair>,
}

/// An agent's node as its hello described it, and its last window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedNode {
    /// Node name.
    pub name: String,
    /// The address peers probe.
    pub address: String,
    /// Zone.
    pub zone: String,
    /// Region (may be empty).
    pub region: String,
    /// The agent's window length.
    pub window_ms: u64,
    /// Its throughput server's port (0: none).
    pub throughput_port: u32,
    /// Its STAMP reflector's port (0: none, or saved before it was kept).
    #[serde(default)]
    pub stamp_port: u32,
    /// The agent process's instance, and the sequence number of its last
    /// accepted window.
    pub instance: u64,
    /// Sequence number of the last accepted window.
    pub last_seq: u64,
    /// When its last report arrived.
    pub last_seen: UnixMillis,
    /// Windows accepted from the node over the collector's lifetimes, so
    /// that `netaware_collector_windows_accepted_total` goes on counting
    /// across restarts.
    #[serde(default)]
    pub accepted: u64,
}

/// One pair's kept windows and last goodput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedPair {
    /// Probing node.
    pub src: String,
    /// Probed node.
    pub dst: String,
    /// Kept windows, oldest first.
    pub windows: Vec<SavedWindow>,
    /// Kept one-way windows, oldest first.
    pub one_way: Vec<SavedOneWay>,
    /// Last goodput.
    pub throughput: Option<SavedThroughput>,
}

/// A [`PairWindow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedWindow {
    /// End of the window (Unix ms).
    pub end: UnixMillis,
    /// Probes sent.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// min, median, p90, p99, max, jitter (ms); absent when none came back.
    pub rtt_ms: Option<[f64; 6]>,
}

/// A [`OneWayWindow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedOneWay {
    /// End of the window (Unix ms).
    pub end: UnixMillis,
    /// Requests the sequence numbers say were sent.
    pub expected: u32,
    /// Requests that arrived.
    pub received: u32,
}

/// A [`Throughput`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedThroughput {
    /// Goodput, bits/s.
    pub bps: f64,
    /// When the test ended (Unix ms).
    pub at: UnixMillis,
    /// Segments retransmitted, when the kernel said.
    pub retransmits: Option<u32>,
    /// Smoothed TCP RTT (ms), when the kernel said.
    pub tcp_rtt_ms: Option<f64>,
}

impl SavedWindow {
    fn of(window: &PairWindow) -> Self {
        Self {
            end: window.end,
            sent: window.sent,
            received: window.received,
            rtt_ms: window
                .rtt
                .map(|r| [r.min, r.median, r.p90, r.p99, r.max, r.jitter]),
        }
    }

    fn checked(&self) -> Result<PairWindow, String> {
        let [min, median, p90, p99, max, jitter] = self.rtt_ms.unwrap_or_default();
        let rtt = RttStats {
            min,
            median,
            p90,
            p99,
            max,
            jitter,
        };
        if self.received > 0 && self.rtt_ms.is_none() {
            return Err("a window with replies but no RTT".into());
        }
        PairWindow::new(self.end, self.sent, self.received, rtt).map_err(|e| e.to_string())
    }
}

impl SavedState {
    /// The nodes and every kept pair of `matrix`, as of `now`.
    pub fn new(nodes: Vec<SavedNode>, matrix: &PairMatrix, now: UnixMillis) -> Self {
        Self {
            format: FORMAT,
            saved_at: now,
            nodes,
            pairs: matrix.kept().map(SavedPair::of).collect(),
        }
    }
}

impl SavedPair {
    fn of(pair: KeptPair<'_>) -> Self {
        Self {
            src: pair.src.to_owned(),
            dst: pair.dst.to_owned(),
            windows: pair.windows.iter().map(SavedWindow::of).collect(),
            one_way: pair
                .one_way
                .iter()
                .map(|w| SavedOneWay {
                    end: w.end,
                    expected: w.expected,
                    received: w.received,
                })
                .collect(),
            throughput: pair.throughput.map(|t| SavedThroughput {
                bps: t.bps,
                at: t.at,
                retransmits: t.retransmits,
                tcp_rtt_ms: t.tcp_rtt_ms,
            }),
        }
    }

    /// Records this pair's windows and goodput into `matrix`, every figure
    /// checked; the first bad one refuses the pair.
    pub fn restore_into(&self, matrix: &mut PairMatrix) -> Result<(), Invalid> {
        let refuse = |why: String| Invalid(format!("pair {} -> {}: {why}", self.src, self.dst));
        for window in &self.windows {
            matrix.record(&self.src, &self.dst, window.checked().map_err(refuse)?);
        }
        for window in &self.one_way {
            let checked = OneWayWindow::new(window.end, window.expected, window.received)
                .map_err(|e| refuse(e.to_string()))?;
            matrix.record_one_way(&self.src, &self.dst, checked);
        }
        if let Some(t) = &self.throughput {
            let checked = Throughput::new(t.bps, t.at, t.retransmits, t.tcp_rtt_ms)
                .map_err(|e| refuse(e.to_string()))?;
            matrix.record_throughput(&self.src, &self.dst, checked);
        }
        Ok(())
    }
}

impl SavedNode {
    /// The hello that registered this node.
    pub(crate) fn hello(&self) -> Hello {
        Hello {
            node: self.name.clone(),
            addresses: vec![self.address.clone()],
            zone: self.zone.clone(),
            region: self.region.clone(),
            window_ms: u32::try_from(self.window_ms).unwrap_or(u32::MAX),
            // Not kept, and not used past the hello's check.
            probe_interval_ms: u32::try_from(self.window_ms).unwrap_or(u32::MAX),
            instance: self.instance,
            throughput_port: self.throughput_port,
            stamp_port: self.stamp_port,
            ..Hello::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::state::{CollectorState, Ingested};
    use netaware_proto::v1::{PeerWindow, Window};

    /// The testkit's hello in zone a of region r, with a throughput server.
    fn hello(node: &str, instance: u64) -> Hello {
        Hello {
            zone: "a".into(),
            region: "r".into(),
            instance,
            throughput_port: 7471,
            ..netaware_testkit::hello(node)
        }
    }

    fn window(seq: u64, end: u64, peer: &str, received: u32) -> Window {
        Window {
            seq,
            start_unix_ms: end - 1_000,
            end_unix_ms: end,
            peers: vec![PeerWindow {
                peer: peer.into(),
                sent: 10,
                received,
                rtt_min_ms: 1.0,
                rtt_median_ms: 2.0,
                rtt_p90_ms: 3.0,
                rtt_p99_ms: 4.0,
                rtt_max_ms: 5.0,
                jitter_ms: 0.5,
                ..PeerWindow::default()
            }],
            ..Window::default()
        }
    }

    /// Two agents, a few windows each way, one of them lossless.
    fn busy_state() -> CollectorState {
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        state.hello(&hello("n1", 7), 1_000).unwrap();
        state.hello(&hello("n2", 8), 1_000).unwrap();
        for seq in 1..=3 {
            let end = 1_000 + seq * 1_000;
            state.ingest("n1", &window(seq, end, "n2", 9), end).unwrap();
            state
                .ingest("n2", &window(seq, end, "n1", 10), end)
                .unwrap();
        }
        state
    }

    fn through_json(saved: &SavedState) -> SavedState {
        serde_json::from_str(&serde_json::to_string(saved).unwrap()).unwrap()
    }

    #[test]
    fn a_restored_state_scores_the_same_and_still_knows_what_it_took() {
        let state = busy_state();
        let saved = through_json(&state.saved(5_000));
        let mut restored =
            CollectorState::restored(ModelConfig::default(), Vec::new(), &saved).unwrap();
        let summaries = |s: &CollectorState| {
            let mut pairs: Vec<_> = s
                .matrix()
                .pairs()
                .map(|(a, b, summary)| (a.to_owned(), b.to_owned(), summary))
                .collect();
            pairs.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
            pairs
        };
        assert_eq!(summaries(&restored), summaries(&state));
        assert_eq!(restored.snapshot(5_000).pairs().len(), 2);
        assert_eq!(restored.last_seq("n1"), Some(3));
        // The agent's replay of a window taken before the restart is a
        // duplicate; its next one is new.
        restored.hello(&hello("n1", 7), 5_000).unwrap();
        assert_eq!(
            restored.ingest("n1", &window(3, 4_000, "n2", 0), 5_000),
            Ok(Ingested::Duplicate)
        );
        assert_eq!(
            restored.ingest("n1", &window(4, 5_000, "n2", 0), 5_000),
            Ok(Ingested::Accepted)
        );
    }

    #[test]
    fn a_damaged_state_is_refused_whole() {
        let good = busy_state().saved(5_000);
        let restore = |saved: &SavedState| {
            CollectorState::restored(ModelConfig::default(), Vec::new(), saved)
        };
        assert!(restore(&good).is_ok());

        let mut other_format = good.clone();
        other_format.format = FORMAT + 1;
        assert!(restore(&other_format).unwrap_err().0.contains("format"));

        let mut negative_rtt = good.clone();
        negative_rtt.pairs[0].windows[0].rtt_ms = Some([-1.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
        assert!(restore(&negative_rtt).unwrap_err().0.contains("rtt_min_ms"));

        let mut more_received_than_sent = good.clone();
        more_received_than_sent.pairs[0].windows[0].received = 11;
        assert!(restore(&more_received_than_sent).is_err());

        let mut replies_without_rtt = good.clone();
        replies_without_rtt.pairs[0].windows[0].rtt_ms = None;
        assert!(restore(&replies_without_rtt).is_err());

        let mut bad_goodput = good.clone();
        bad_goodput.pairs[0].throughput = Some(SavedThroughput {
            bps: -5.0,
            at: 1,
            retransmits: None,
            tcp_rtt_ms: None,
        });
        assert!(restore(&bad_goodput).unwrap_err().0.contains("goodput"));

        let mut bad_node = good.clone();
        bad_node.nodes[0].address = "not an address".into();
        assert!(restore(&bad_node).unwrap_err().0.contains("address"));

        // NaN cannot even be written: JSON has no NaN, and a null where a
        // number belongs does not parse.
        let text = serde_json::to_string(&good)
            .unwrap()
            .replacen("2.0", "null", 1);
        assert!(serde_json::from_str::<SavedState>(&text).is_err());
    }

    #[test]
    fn pairs_of_unknown_nodes_are_left_out() {
        let mut saved = busy_state().saved(5_000);
        saved.nodes.retain(|n| n.name == "n1");
        let restored =
            CollectorState::restored(ModelConfig::default(), Vec::new(), &saved).unwrap();
        assert_eq!(restored.matrix().kept().count(), 0);
        assert_eq!(restored.node_count(), 1);
    }
}
