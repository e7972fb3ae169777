//! The directed pair matrix: for every (src, dst) pair, the recent windows
//! that src measured towards dst, and the last goodput.
//!
//! A window enters only through [`PairWindow::new`], which checks it, so the
//! matrix never holds a NaN, a negative RTT or more replies than probes.
//! [`PairMatrix::summary`] folds the recent windows of a pair into the
//! figures that the score model uses.

use foldhash::HashMap;

use crate::UnixMillis;
use crate::chunked::SharedChunks;
use crate::rings::{Ended, Rings, seven_digits};
use crate::transport::{Transport, TransportSet};

/// Longest RTT the matrix accepts, in milliseconds: anything above is a
/// broken clock or a broken agent, not a network.
pub const MAX_RTT_MS: f64 = 60_000.0;

/// Highest goodput a test may claim (10 Tbit/s).
pub const MAX_GOODPUT_BPS: f64 = 1e13;

/// Most probes one pair may claim in one window.
pub const MAX_PROBES_PER_WINDOW: u32 = 1_000_000;

/// RTT figures of one window, over the replies received, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RttStats {
    /// Fastest reply.
    pub min: f64,
    /// Median reply.
    pub median: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest reply.
    pub max: f64,
    /// Mean absolute difference between consecutive replies.
    pub jitter: f64,
}

impl RttStats {
    /// The figures from an array in their order: min, median, p90, p99,
    /// max, jitter (as windows are saved and kept).
    pub fn from_array([min, median, p90, p99, max, jitter]: [f64; 6]) -> Self {
        Self {
            min,
            median,
            p90,
            p99,
            max,
            jitter,
        }
    }

    /// The figures as an array, in [`RttStats::from_array`]'s order.
    pub fn to_array(&self) -> [f64; 6] {
        [
            self.min,
            self.median,
            self.p90,
            self.p99,
            self.max,
            self.jitter,
        ]
    }
}

/// One window of probes from src to dst, checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairWindow {
    /// When the window ended (agent clock, checked against the collector's).
    pub end: UnixMillis,
    /// Probes sent.
    pub sent: u32,
    /// Replies received in time.
    pub received: u32,
    /// RTT figures; `None` exactly when nothing was received.
    pub rtt: Option<RttStats>,
    /// The transport of the probes.
    pub probe: Transport,
    /// Transports tried towards the peer that got no reply while `probe`
    /// did: filtered on the way.
    pub filtered: TransportSet,
}

/// Why a window was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WindowError {
    /// More replies than probes.
    #[error("received {received} exceeds sent {sent}")]
    ReceivedAboveSent {
        /// Probes sent.
        sent: u32,
        /// Replies claimed.
        received: u32,
    },
    /// An absurd number of probes.
    #[error("sent {0} exceeds the limit of {MAX_PROBES_PER_WINDOW} probes per window")]
    TooManyProbes(u32),
    /// An RTT figure that is NaN, infinite, negative or absurdly large.
    #[error("{field} is {value}, not a finite RTT between 0 and {MAX_RTT_MS} ms")]
    BadRtt {
        /// Which figure.
        field: &'static str,
        /// Its value.
        value: f64,
    },
    /// A goodput that is NaN, infinite, negative or absurdly large.
    #[error("goodput {0} is not between 0 and {MAX_GOODPUT_BPS} bit/s")]
    BadGoodput(f64),
    /// A TCP RTT that is NaN, infinite or negative.
    #[error("tcp_rtt_ms {0} is negative or not a number")]
    BadTcpRtt(f64),
    /// Quantiles out of order (min <= median <= p90 <= p99 <= max).
    #[error(
        "RTT quantiles out of order: min {min}, median {median}, p90 {p90}, p99 {p99}, max {max}"
    )]
    QuantileOrder {
        /// min
        min: f64,
        /// median
        median: f64,
        /// p90
        p90: f64,
        /// p99
        p99: f64,
        /// max
        max: f64,
    },
}

impl PairWindow {
    /// Checks a window. RTT figures are ignored when nothing was received.
    pub fn new(
        end: UnixMillis,
        sent: u32,
        received: u32,
        rtt: RttStats,
    ) -> Result<Self, WindowError> {
        if sent > MAX_PROBES_PER_WINDOW {
            return Err(WindowError::TooManyProbes(sent));
        }
        if received > sent {
            return Err(WindowError::ReceivedAboveSent { sent, received });
        }
        if received == 0 {
            return Ok(Self {
                end,
                sent,
                received,
                rtt: None,
                probe: Transport::Icmp,
                filtered: TransportSet::EMPTY,
            });
        }
        for (field, value) in [
            ("rtt_min_ms", rtt.min),
            ("rtt_median_ms", rtt.median),
            ("rtt_p90_ms", rtt.p90),
            ("rtt_p99_ms", rtt.p99),
            ("rtt_max_ms", rtt.max),
            ("jitter_ms", rtt.jitter),
        ] {
            if !(value.is_finite() && (0.0..=MAX_RTT_MS).contains(&value)) {
                return Err(WindowError::BadRtt { field, value });
            }
        }
        let ordered = rtt.min <= rtt.median
            && rtt.median <= rtt.p90
            && rtt.p90 <= rtt.p99
            && rtt.p99 <= rtt.max;
        if !ordered {
            return Err(WindowError::QuantileOrder {
                min: rtt.min,
                median: rtt.median,
                p90: rtt.p90,
                p99: rtt.p99,
                max: rtt.max,
            });
        }
        Ok(Self {
            end,
            sent,
            received,
            rtt: Some(rtt),
            probe: Transport::Icmp,
            filtered: TransportSet::EMPTY,
        })
    }

    /// The same window, probed by `probe`, with `filtered` tried and
    /// unanswered beside it (a window is ICMP's unless said otherwise).
    pub fn probed_by(self, probe: Transport, filtered: TransportSet) -> Self {
        Self {
            probe,
            filtered,
            ..self
        }
    }
}

/// Echo requests from src that dst saw arrive in one of dst's windows, and
/// how many src's sequence numbers say it sent: the loss from src to dst,
/// one way.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OneWayWindow {
    /// End of dst's window.
    pub end: UnixMillis,
    /// Requests src sent, by its sequence numbers.
    pub expected: u32,
    /// Requests that arrived.
    pub received: u32,
}

impl OneWayWindow {
    /// Checks the counts.
    pub fn new(end: UnixMillis, expected: u32, received: u32) -> Result<Self, WindowError> {
        if expected > MAX_PROBES_PER_WINDOW {
            return Err(WindowError::TooManyProbes(expected));
        }
        if received > expected {
            return Err(WindowError::ReceivedAboveSent {
                sent: expected,
                received,
            });
        }
        Ok(Self {
            end,
            expected,
            received,
        })
    }
}

/// A goodput measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    /// Receiver goodput in bits per second.
    pub bps: f64,
    /// When the test ended.
    pub at: UnixMillis,
    /// Segments the sender retransmitted, when the kernel said.
    pub retransmits: Option<u32>,
    /// The sender's smoothed TCP RTT (ms) at the end, when the kernel said.
    pub tcp_rtt_ms: Option<f64>,
}

impl Throughput {
    /// Checks a measurement.
    pub fn new(
        bps: f64,
        at: UnixMillis,
        retransmits: Option<u32>,
        tcp_rtt_ms: Option<f64>,
    ) -> Result<Self, WindowError> {
        if !(bps.is_finite() && (0.0..=MAX_GOODPUT_BPS).contains(&bps)) {
            return Err(WindowError::BadGoodput(bps));
        }
        if let Some(rtt) = tcp_rtt_ms.filter(|rtt| !(rtt.is_finite() && *rtt >= 0.0)) {
            return Err(WindowError::BadTcpRtt(rtt));
        }
        Ok(Self {
            bps,
            at,
            retransmits,
            tcp_rtt_ms,
        })
    }
}

/// What the recent windows of one pair add up to.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PairSummary {
    /// Reply-weighted median of the windows' medians (ms).
    pub rtt_median_ms: Option<f64>,
    /// Highest p99 of the windows (ms): conservative on purpose.
    pub rtt_p99_ms: Option<f64>,
    /// Reply-weighted median of the windows' jitters (ms): a link's usual
    /// variation, which a minority of windows caught in a transient (a
    /// throughput test queueing at one end, a stall of the prober) does
    /// not move.
    pub jitter_ms: Option<f64>,
    /// Lost over sent, over all windows.
    pub loss_ratio: Option<f64>,
    /// Probes sent over all windows.
    pub samples: u64,
    /// End of the newest window.
    pub last_end: Option<UnixMillis>,
    /// Last goodput, if any test ran.
    pub throughput: Option<Throughput>,
    /// Loss from src to dst alone, over the one-way windows dst reported.
    pub one_way_loss_ratio: Option<f64>,
    /// The transport of the windows (all of them: one transport's figures
    /// are never averaged with another's); `None` without windows.
    pub probe: Option<Transport>,
    /// What the newest window found filtered on the way.
    pub filtered: TransportSet,
}

/// A probe window as a ring keeps it: [`PairWindow`] in 48 bytes rather
/// than 80.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct KeptWindow {
    end: UnixMillis,
    sent: u32,
    received: u32,
    /// min, median, p90, p99, max, jitter.
    rtt: [f32; 6],
    answered: bool,
    probe: Transport,
    filtered: TransportSet,
}

impl Ended for KeptWindow {
    fn end(&self) -> UnixMillis {
        self.end
    }
}

impl KeptWindow {
    /// The window, its figures rounded to `f32`.
    pub(crate) fn of(window: &PairWindow) -> Self {
        let rtt = window.rtt.unwrap_or_default();
        Self {
            end: window.end,
            sent: window.sent,
            received: window.received,
            rtt: rtt.to_array().map(|v| v as f32),
            answered: window.rtt.is_some(),
            probe: window.probe,
            filtered: window.filtered,
        }
    }

    /// When it ended.
    pub(crate) fn end(&self) -> UnixMillis {
        self.end
    }

    /// Probes sent.
    pub(crate) fn sent(&self) -> u32 {
        self.sent
    }

    /// Replies received.
    pub(crate) fn received(&self) -> u32 {
        self.received
    }

    /// Its transport.
    pub(crate) fn probe(&self) -> Transport {
        self.probe
    }

    /// The window as kept.
    pub(crate) fn window(&self) -> PairWindow {
        PairWindow {
            end: self.end,
            sent: self.sent,
            received: self.received,
            rtt: self
                .answered
                .then(|| RttStats::from_array(self.rtt.map(f64::from))),
            probe: self.probe,
            filtered: self.filtered,
        }
    }
}

impl Ended for OneWayWindow {
    fn end(&self) -> UnixMillis {
        self.end
    }
}

/// Everything kept of one pair: what a saved state holds.
#[derive(Debug, Clone, Copy)]
pub struct KeptPair<'a> {
    /// Source node.
    pub src: &'a str,
    /// Destination node.
    pub dst: &'a str,
    kept_windows: &'a [KeptWindow],
    /// Recent one-way windows, oldest first.
    pub one_way: &'a [OneWayWindow],
    /// Last goodput.
    pub throughput: Option<Throughput>,
}

impl<'a> KeptPair<'a> {
    /// Recent windows, oldest first, as kept (RTT figures within `f32`'s
    /// precision of what was recorded: [`crate::rings`]).
    pub fn windows(&self) -> impl ExactSizeIterator<Item = PairWindow> + 'a {
        self.kept_windows.iter().map(KeptWindow::window)
    }
}

/// A node as the pair matrix numbers it (see [`PairReadings::names`]).
pub type NodeId = u32;

/// A copy of every pair's figures, taken at one instant: what a snapshot
/// is scored from, so that the scoring can run without the matrix.
#[derive(Debug, Clone, Default)]
pub struct PairReadings {
    /// Node names by [`NodeId`].
    pub names: Vec<String>,
    /// Every pair with data: (src, dst, its figures).
    pub pairs: SharedChunks<(NodeId, NodeId, PairSummary)>,
}

/// Directed pairs and their recent windows. Nodes are numbered once, so
/// that a pair is two numbers, not two names.
#[derive(Debug, Clone)]
pub struct PairMatrix {
    ids: HashMap<String, NodeId>,
    names: Vec<String>,
    /// Where each pair sits in `windows`, `one_way`, `throughputs` and
    /// `summaries`.
    slots: HashMap<(NodeId, NodeId), usize>,
    /// Each pair's recent windows, oldest first, all of one transport.
    windows: Rings<KeptWindow>,
    /// Each pair's recent one-way windows (reported by its dst).
    one_way: Rings<OneWayWindow>,
    /// Each pair's last goodput.
    throughputs: Vec<Option<Throughput>>,
    /// Each pair's figures over what is kept, worked out when it changes
    /// and kept apart from the histories in shared chunks: a snapshot
    /// copies them all under the collector's lock, an ingest changes a
    /// few.
    summaries: SharedChunks<(NodeId, NodeId, PairSummary)>,
    removals: u64,
}

impl PairMatrix {
    /// A matrix that keeps the last `windows_kept` windows of every pair
    /// (at least one).
    pub fn new(windows_kept: usize) -> Self {
        Self {
            ids: HashMap::default(),
            names: Vec::new(),
            slots: HashMap::default(),
            windows: Rings::new(windows_kept),
            one_way: Rings::new(windows_kept),
            throughputs: Vec::new(),
            summaries: SharedChunks::default(),
            removals: 0,
        }
    }

    /// The number of `name`, given it on first sight.
    fn id(&mut self, name: &str) -> NodeId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = NodeId::try_from(self.names.len()).unwrap_or(NodeId::MAX);
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }

    /// Where src -> dst sits, made on first use.
    fn slot(&mut self, src: &str, dst: &str) -> usize {
        let (src, dst) = (self.id(src), self.id(dst));
        *self.slots.entry((src, dst)).or_insert_with(|| {
            self.windows.push_empty();
            self.one_way.push_empty();
            self.throughputs.push(None);
            self.summaries.push((src, dst, PairSummary::default()));
            self.throughputs.len() - 1
        })
    }

    /// Works out the figures of the pair at `slot` again, after a change.
    fn summarize(&mut self, slot: usize) {
        let summary = summarize(
            self.windows.get(slot),
            self.one_way.get(slot),
            self.throughputs.get(slot).copied().flatten(),
        );
        if let Some(figures) = self.summaries.get_mut(slot) {
            figures.2 = summary;
        }
    }

    /// Adds a window to the pair src -> dst. Windows are kept in order of
    /// their end, so a late one lands in its place. The windows kept are
    /// all of one transport: a newer window of another starts the history
    /// again, an older one of another is dropped.
    pub fn record(&mut self, src: &str, dst: &str, window: PairWindow) {
        let slot = self.slot(src, dst);
        if let Some(newest) = self.windows.get(slot).last()
            && newest.probe() != window.probe
        {
            if window.end < newest.end() {
                return;
            }
            self.windows.clear(slot);
        }
        self.windows.insert(slot, KeptWindow::of(&window));
        self.summarize(slot);
    }

    /// Adds a one-way window (reported by dst) to the pair src -> dst.
    pub fn record_one_way(&mut self, src: &str, dst: &str, window: OneWayWindow) {
        let slot = self.slot(src, dst);
        self.one_way.insert(slot, window);
        self.summarize(slot);
    }

    /// Records a goodput measurement for src -> dst, keeping the newest.
    pub fn record_throughput(&mut self, src: &str, dst: &str, throughput: Throughput) {
        let slot = self.slot(src, dst);
        let kept = &mut self.throughputs[slot];
        if kept.is_none_or(|old| old.at <= throughput.at) {
            *kept = Some(throughput);
        }
        self.summarize(slot);
    }

    /// Forgets every pair that involves `node`.
    pub fn remove_node(&mut self, node: &str) {
        let Some(&id) = self.ids.get(node) else {
            return;
        };
        self.removals += 1;
        let kept: Vec<bool> = self
            .summaries
            .iter()
            .map(|&(src, dst, _)| src != id && dst != id)
            .collect();
        self.windows.retain(&kept);
        self.one_way.retain(&kept);
        let mut keep = kept.iter();
        self.throughputs
            .retain(|_| keep.next().copied().unwrap_or(true));
        let mut keep = kept.iter();
        self.summaries
            .retain(|_| keep.next().copied().unwrap_or(true));
        self.slots = self
            .summaries
            .iter()
            .enumerate()
            .map(|(slot, &(src, dst, _))| ((src, dst), slot))
            .collect();
    }

    /// The figures of src -> dst over its recent windows (all `None` when the
    /// pair was never measured).
    pub fn summary(&self, src: &str, dst: &str) -> PairSummary {
        let (Some(&src), Some(&dst)) = (self.ids.get(src), self.ids.get(dst)) else {
            return PairSummary::default();
        };
        self.slots
            .get(&(src, dst))
            .and_then(|&slot| self.summaries.get(slot))
            .map(|figures| figures.2)
            .unwrap_or_default()
    }

    /// Everything kept, pair by pair (for saving the state).
    pub fn kept(&self) -> impl Iterator<Item = KeptPair<'_>> {
        self.kept_slice(0, usize::MAX)
    }

    /// What [`kept`](Self::kept) gives from position `from`, at most
    /// `count` pairs: a save copies the matrix a slice at a time, so that
    /// no copy of all of it is ever made under the collector's lock.
    /// Positions hold until [`removals`](Self::removals) changes; new pairs
    /// come at the end.
    pub fn kept_slice(&self, from: usize, count: usize) -> impl Iterator<Item = KeptPair<'_>> {
        self.summaries
            .iter()
            .zip(&self.throughputs)
            .enumerate()
            .skip(from)
            .take(count)
            .map(|(slot, (&(src, dst, _), &throughput))| KeptPair {
                src: &self.names[src as usize],
                dst: &self.names[dst as usize],
                kept_windows: self.windows.get(slot),
                one_way: self.one_way.get(slot),
                throughput,
            })
    }

    /// The number of pairs with data.
    pub fn pair_count(&self) -> usize {
        self.throughputs.len()
    }

    /// How many times pairs were removed (each moves the later pairs'
    /// positions in [`kept_slice`](Self::kept_slice)).
    pub fn removals(&self) -> u64 {
        self.removals
    }

    /// Every pair that has any data, with its summary.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str, PairSummary)> {
        self.summaries.iter().map(|&(src, dst, summary)| {
            (
                self.names[src as usize].as_str(),
                self.names[dst as usize].as_str(),
                summary,
            )
        })
    }

    /// A copy of every pair's figures, for scoring without the matrix.
    pub fn readings(&self) -> PairReadings {
        PairReadings {
            names: self.names.clone(),
            pairs: self.summaries.clone(),
        }
    }
}

/// What a pair's kept windows, one-way windows and goodput add up to.
fn summarize(
    windows: &[KeptWindow],
    one_way: &[OneWayWindow],
    throughput: Option<Throughput>,
) -> PairSummary {
    let samples: u64 = windows.iter().map(|w| u64::from(w.sent())).sum();
    let received: u64 = windows.iter().map(|w| u64::from(w.received())).sum();
    let loss_ratio = (samples > 0).then(|| (samples - received) as f64 / samples as f64);
    // The windows with replies, each weighted by its replies. Read twice
    // rather than collected: the collector summarises every kept pair for
    // each snapshot, and an allocation per pair costs more than the sums.
    let answered = || {
        windows
            .iter()
            .map(KeptWindow::window)
            .filter_map(|w| w.rtt.map(|rtt| (f64::from(w.received), rtt)))
    };
    let rtt_median_ms =
        weighted_median(answered().map(|(w, rtt)| (w, rtt.median))).map(seven_digits);
    let rtt_p99_ms = answered()
        .map(|(_, rtt)| rtt.p99)
        .reduce(f64::max)
        .map(seven_digits);
    // A median, as for the RTT: the delay term adds the jitter to the
    // median RTT, and a mean would let one window's 50 ms outlier outweigh
    // every quiet window of the pair (seen in the lab while throughput
    // tests queue at a node). The worst window stays in the p99.
    let jitter_ms = weighted_median(answered().map(|(w, rtt)| (w, rtt.jitter))).map(seven_digits);
    let expected: u64 = one_way.iter().map(|w| u64::from(w.expected)).sum();
    let arrived: u64 = one_way.iter().map(|w| u64::from(w.received)).sum();
    let newest = windows.last().map(KeptWindow::window);
    PairSummary {
        rtt_median_ms,
        rtt_p99_ms,
        jitter_ms,
        loss_ratio,
        samples,
        last_end: newest.map(|w| w.end),
        throughput,
        one_way_loss_ratio: (expected > 0).then(|| (expected - arrived) as f64 / expected as f64),
        probe: newest.map(|w| w.probe),
        filtered: newest.map_or(TransportSet::EMPTY, |w| w.filtered),
    }
}

/// Values sorted in place on the stack up to this many; more (a long
/// `--windows-kept`) go to the heap.
const ON_STACK: usize = 16;

/// The value at which the cumulative weight first reaches half the total.
fn weighted_median(values: impl Iterator<Item = (f64, f64)>) -> Option<f64> {
    let mut stack = [(0.0, 0.0); ON_STACK];
    let mut heap = Vec::new();
    let mut len = 0;
    for value in values.filter(|(weight, _)| *weight > 0.0) {
        if len < ON_STACK {
            stack[len] = value;
        } else {
            if heap.is_empty() {
                heap.extend_from_slice(&stack);
            }
            heap.push(value);
        }
        len += 1;
    }
    let values: &mut [(f64, f64)] = if len > ON_STACK {
        &mut heap
    } else {
        &mut stack[..len]
    };
    if values.is_empty() {
        return None;
    }
    values.sort_unstable_by(|a, b| a.1.total_cmp(&b.1));
    let half = values.iter().map(|(weight, _)| weight).sum::<f64>() / 2.0;
    let mut cumulative = 0.0;
    for (weight, value) in values.iter() {
        cumulative += weight;
        if cumulative >= half {
            return Some(*value);
        }
    }
    values.last().map(|(_, value)| *value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rings::is_kept_as;
    use proptest::prelude::*;

    fn rtt(median: f64) -> RttStats {
        RttStats {
            min: median,
            median,
            p90: median,
            p99: median,
            max: median,
            jitter: 0.0,
        }
    }

    #[test]
    fn one_transports_figures_are_never_averaged_with_anothers() {
        let mut m = PairMatrix::new(10);
        let icmp = |end, median| PairWindow::new(end, 10, 10, rtt(median)).unwrap();
        let udp = |end, median| icmp(end, median).probed_by(Transport::Udp, TransportSet::EMPTY);
        m.record("a", "b", icmp(1_000, 1.0));
        m.record("a", "b", icmp(2_000, 1.0));
        m.record("a", "b", udp(3_000, 5.0));
        let s = m.summary("a", "b");
        assert_eq!(
            (s.probe, s.rtt_median_ms, s.samples),
            (Some(Transport::Udp), Some(5.0), 10)
        );
        // A late ICMP window, older than the UDP one, is dropped; a newer
        // one starts again.
        m.record("a", "b", icmp(2_500, 1.0));
        assert_eq!(m.summary("a", "b").rtt_median_ms, Some(5.0));
        let filtered = TransportSet::of([Transport::Udp]);
        m.record(
            "a",
            "b",
            icmp(4_000, 2.0).probed_by(Transport::Icmp, filtered),
        );
        let s = m.summary("a", "b");
        assert_eq!(
            (s.probe, s.rtt_median_ms, s.filtered),
            (Some(Transport::Icmp), Some(2.0), filtered)
        );
        assert_eq!(PairMatrix::new(1).summary("a", "b").probe, None);
    }

    #[test]
    fn a_window_recorded_twice_counts_once() {
        let mut m = PairMatrix::new(10);
        let window = |end, received| PairWindow::new(end, 10, received, rtt(1.0)).unwrap();
        m.record("a", "b", window(1_000, 10));
        m.record("a", "b", window(2_000, 5));
        m.record("a", "b", window(1_000, 10));
        m.record_one_way("b", "a", OneWayWindow::new(1_000, 10, 9).unwrap());
        m.record_one_way("b", "a", OneWayWindow::new(1_000, 10, 9).unwrap());
        let s = m.summary("a", "b");
        assert_eq!((s.samples, s.loss_ratio), (20, Some(0.25)));
        let kept: Vec<usize> = m
            .kept()
            .map(|p| p.windows().len() + p.one_way.len())
            .collect();
        assert_eq!(kept, vec![2, 1]);
        assert_eq!(m.kept_slice(1, 5).count(), 1);
        assert_eq!(m.pair_count(), 2);
    }

    #[test]
    fn refuses_impossible_windows() {
        assert!(matches!(
            PairWindow::new(1, 5, 6, rtt(1.0)),
            Err(WindowError::ReceivedAboveSent { .. })
        ));
        assert!(matches!(
            PairWindow::new(1, 5, 5, rtt(f64::NAN)),
            Err(WindowError::BadRtt { .. })
        ));
        assert!(matches!(
            PairWindow::new(1, 5, 5, rtt(-0.5)),
            Err(WindowError::BadRtt { .. })
        ));
        let unordered = RttStats {
            min: 2.0,
            ..rtt(1.0)
        };
        assert!(matches!(
            PairWindow::new(1, 5, 5, unordered),
            Err(WindowError::QuantileOrder { .. })
        ));
        // With no reply, the RTT figures carry nothing and are not checked.
        assert_eq!(PairWindow::new(1, 5, 0, rtt(f64::NAN)).unwrap().rtt, None);
    }

    #[test]
    fn summary_folds_windows() {
        let mut matrix = PairMatrix::new(3);
        matrix.record("a", "b", PairWindow::new(10, 10, 10, rtt(1.0)).unwrap());
        matrix.record("a", "b", PairWindow::new(20, 10, 5, rtt(3.0)).unwrap());
        matrix.record("a", "b", PairWindow::new(30, 10, 10, rtt(2.0)).unwrap());
        let summary = matrix.summary("a", "b");
        assert_eq!(summary.samples, 30);
        assert_eq!(summary.loss_ratio, Some(5.0 / 30.0));
        assert_eq!(summary.rtt_median_ms, Some(2.0));
        assert_eq!(summary.last_end, Some(30));
        // The oldest window falls out once a fourth arrives.
        matrix.record("a", "b", PairWindow::new(40, 10, 0, rtt(0.0)).unwrap());
        let summary = matrix.summary("a", "b");
        assert_eq!(summary.samples, 30);
        assert_eq!(summary.loss_ratio, Some(15.0 / 30.0));
        assert_eq!(summary.rtt_median_ms, Some(2.0));
    }

    #[test]
    fn one_windows_transient_does_not_move_the_jitter_but_a_jittery_link_does() {
        let jittery = |median: f64, jitter: f64| RttStats {
            jitter,
            max: median + 50.0,
            p99: median + 50.0,
            ..rtt(median)
        };
        // Six quiet windows but one, which caught a 50 ms queue: the pair's
        // jitter is the quiet windows', and its p99 still shows the queue.
        let mut matrix = PairMatrix::new(6);
        for end in 1..=6 {
            let jitter = if end == 3 { 6.3 } else { 0.03 };
            matrix.record(
                "a",
                "b",
                PairWindow::new(end * 10, 10, 10, jittery(0.25, jitter)).unwrap(),
            );
        }
        let summary = matrix.summary("a", "b");
        assert!(is_kept_as(summary.jitter_ms.unwrap(), 0.03));
        assert_eq!(summary.rtt_p99_ms, Some(50.25));
        // Jittery in most windows: that is the link.
        for end in 7..=10 {
            matrix.record(
                "a",
                "b",
                PairWindow::new(end * 10, 10, 10, jittery(0.25, 2.0)).unwrap(),
            );
        }
        assert_eq!(matrix.summary("a", "b").jitter_ms, Some(2.0));
    }

    #[test]
    fn late_windows_land_in_order() {
        let mut matrix = PairMatrix::new(2);
        matrix.record("a", "b", PairWindow::new(30, 1, 1, rtt(3.0)).unwrap());
        matrix.record("a", "b", PairWindow::new(10, 1, 1, rtt(1.0)).unwrap());
        matrix.record("a", "b", PairWindow::new(20, 1, 1, rtt(2.0)).unwrap());
        let summary = matrix.summary("a", "b");
        assert_eq!(summary.last_end, Some(30));
        assert_eq!(summary.rtt_median_ms, Some(2.0));
    }

    #[test]
    fn one_way_loss_is_kept_apart_from_round_trip_loss() {
        let mut matrix = PairMatrix::new(2);
        assert!(OneWayWindow::new(1, 5, 6).is_err());
        matrix.record_one_way("a", "b", OneWayWindow::new(10, 10, 7).unwrap());
        matrix.record_one_way("a", "b", OneWayWindow::new(20, 10, 9).unwrap());
        matrix.record_one_way("a", "b", OneWayWindow::new(30, 10, 10).unwrap());
        let summary = matrix.summary("a", "b");
        assert_eq!(summary.one_way_loss_ratio, Some(1.0 / 20.0));
        assert_eq!(summary.loss_ratio, None);
        assert_eq!(matrix.summary("b", "a").one_way_loss_ratio, None);
    }

    #[test]
    fn unknown_pair_has_no_figures() {
        let matrix = PairMatrix::new(3);
        assert_eq!(matrix.summary("x", "y"), PairSummary::default());
    }

    proptest! {
        #[test]
        fn a_kept_window_is_the_window_within_f32s_precision(
            median in 0.0f64..60_000.0,
            spread in 0.0f64..1.0,
            jitter in 0.0f64..100.0,
            sent in 1u32..1_000,
            received in 0u32..1_000,
        ) {
            let received = received.min(sent);
            let rtt = RttStats {
                min: median * (1.0 - spread),
                median,
                p90: median + spread,
                p99: median + 2.0 * spread,
                max: median + 3.0 * spread,
                jitter,
            };
            let Ok(window) = PairWindow::new(1_000, sent, received, rtt) else {
                return Ok(());
            };
            let back = KeptWindow::of(&window).window();
            prop_assert_eq!((back.end, back.sent, back.received), (1_000, sent, received));
            prop_assert_eq!(back.rtt.is_some(), window.rtt.is_some());
            if let (Some(kept), Some(sent_rtt)) = (back.rtt, window.rtt) {
                for (kept, sent) in [
                    (kept.min, sent_rtt.min), (kept.median, sent_rtt.median), (kept.p90, sent_rtt.p90),
                    (kept.p99, sent_rtt.p99), (kept.max, sent_rtt.max), (kept.jitter, sent_rtt.jitter),
                ] {
                    prop_assert!(is_kept_as(kept, sent), "{} kept as {}", sent, kept);
                }
                prop_assert!(kept.min <= kept.median && kept.median <= kept.p90);
                prop_assert!(kept.p90 <= kept.p99 && kept.p99 <= kept.max);
            }
            // Kept again, it is the same: saves and restores are stable.
            prop_assert_eq!(KeptWindow::of(&back), KeptWindow::of(&window));
        }

        #[test]
        fn summary_is_never_nan_or_out_of_range(
            windows in prop::collection::vec((0u32..50, 0u32..50, 0.0f64..500.0, 0.0f64..50.0), 1..12)
        ) {
            let mut matrix = PairMatrix::new(6);
            for (i, (sent, received, median, jitter)) in windows.into_iter().enumerate() {
                let received = received.min(sent);
                let stats = RttStats { min: median / 2.0, median, p90: median, p99: median * 2.0, max: median * 2.0, jitter };
                matrix.record("a", "b", PairWindow::new(i as u64, sent, received, stats).unwrap());
            }
            let summary = matrix.summary("a", "b");
            if let Some(loss) = summary.loss_ratio {
                prop_assert!((0.0..=1.0).contains(&loss));
            }
            for value in [summary.rtt_median_ms, summary.rtt_p99_ms, summary.jitter_ms].into_iter().flatten() {
                prop_assert!(value.is_finite() && value >= 0.0);
            }
            if let (Some(median), Some(p99)) = (summary.rtt_median_ms, summary.rtt_p99_ms) {
                prop_assert!(median <= p99);
            }
        }

        #[test]
        fn the_weighted_median_halves_the_weight(
            values in prop::collection::vec((0.0f64..10.0, 0.0f64..100.0), 0..40)
        ) {
            let median = weighted_median(values.iter().copied());
            let positive: Vec<(f64, f64)> = values.iter().copied().filter(|(w, _)| *w > 0.0).collect();
            prop_assert_eq!(median.is_some(), !positive.is_empty());
            if let Some(median) = median {
                // At most half the weight lies strictly below it, and at
                // most half strictly above.
                let total: f64 = positive.iter().map(|(w, _)| w).sum();
                let below: f64 = positive.iter().filter(|(_, v)| *v < median).map(|(w, _)| w).sum();
                let above: f64 = positive.iter().filter(|(_, v)| *v > median).map(|(w, _)| w).sum();
                prop_assert!(below <= total / 2.0 + 1e-9 && above <= total / 2.0 + 1e-9);
                prop_assert!(positive.iter().any(|(_, v)| *v == median));
            }
        }
    }
}
