//! What the agent has done, counted: read by logs now and by the agent's
//! metrics endpoint.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use netaware_core::transport::Transport;

use crate::replies::Refusal;

/// Monotonic counters of the agent's work.
#[derive(Debug, Default)]
pub struct Counters {
    /// Echo requests sent.
    pub probes_sent: AtomicU64,
    /// Probes that could not be sent or whose peer address is invalid.
    pub probe_errors: AtomicU64,
    /// Failed reads of ICMP replies or of inbound echo requests.
    pub receive_errors: AtomicU64,
    /// Windows sent to the collector (replays included).
    pub windows_sent: AtomicU64,
    /// Windows the collector acknowledged as accepted.
    pub windows_acked: AtomicU64,
    /// Windows the collector refused (INVALID_ARGUMENT).
    pub windows_rejected: AtomicU64,
    /// Windows pushed out of the full buffer before any ack.
    pub windows_dropped: AtomicU64,
    /// Sessions opened after the first.
    pub reconnects: AtomicU64,
    /// Windows held now until the collector has them safe (a gauge).
    pub windows_buffered: AtomicU64,
    /// Throughput tests run as the client, by outcome.
    pub throughput_tests: AtomicU64,
    /// Of those, tests that failed.
    pub throughput_failures: AtomicU64,
    /// Throughput orders that could not be carried out (bad order, token
    /// book full).
    pub throughput_orders_refused: AtomicU64,
    /// Throughput tests whose server claimed more than it acknowledged, or
    /// whose count could not be checked.
    pub throughput_claims_refused: AtomicU64,
    /// Replies refused, by [`Refusal`] (in the order of [`Refusal::ALL`]).
    pub replies_refused: [AtomicU64; 4],
    /// UDP replies whose reflector claimed to hold the probe longer than
    /// the prober takes out.
    pub holds_cut: AtomicU64,
    /// Of those claims, what was left in the round trips (ns): a loaded
    /// reflector's late wake-ups, or a liar's claim.
    pub hold_left_ns: AtomicU64,
    /// Probes (ICMP and UDP) timed from the moment before their send, the
    /// kernel having given no stamp of it.
    pub sends_unstamped: AtomicU64,
    /// Replies timed when the agent read them, the kernel having given no
    /// stamp of their arrival.
    pub replies_unstamped: AtomicU64,
    /// UDP probes of peers this agent's reflector answered.
    pub reflected: AtomicU64,
    /// Packets to the reflector that were no STAMP request.
    pub reflector_refused: AtomicU64,
    /// Probes the reflector left unanswered, over its rate.
    pub reflector_limited: AtomicU64,
    /// Probes sent, by transport (in the order of [`Transport::ALL`]).
    pub probes_by_transport: [AtomicU64; 3],
}

impl Counters {
    /// When a probe left: the kernel's stamp, else (counted) the moment
    /// before its send.
    pub(crate) fn left_at(&self, left: crate::kernel_stamps::Left) -> std::time::SystemTime {
        if !left.by_kernel {
            self.sends_unstamped.fetch_add(1, Relaxed);
        }
        left.at
    }

    /// When a reply arrived: the kernel's stamp, else (counted) now.
    pub(crate) fn arrived_at(
        &self,
        stamped: Option<std::time::SystemTime>,
    ) -> std::time::SystemTime {
        stamped.unwrap_or_else(|| {
            self.replies_unstamped.fetch_add(1, Relaxed);
            std::time::SystemTime::now()
        })
    }

    pub(crate) fn probe_sent(&self, transport: Transport) {
        self.probes_sent.fetch_add(1, Relaxed);
        self.probes_by_transport[transport as usize].fetch_add(1, Relaxed);
    }

    /// Probes sent by `transport`.
    pub fn sent_by(&self, transport: Transport) -> u64 {
        Self::get(&self.probes_by_transport[transport as usize])
    }

    pub(crate) fn probe_error(&self) {
        self.probe_errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn receive_error(&self) {
        self.receive_errors.fetch_add(1, Relaxed);
    }

    pub(crate) fn reply_refused(&self, reason: Refusal) {
        let index = Refusal::ALL.iter().position(|r| *r == reason).unwrap_or(0);
        self.replies_refused[index].fetch_add(1, Relaxed);
    }

    /// Replies refused for `reason`.
    pub fn refused(&self, reason: Refusal) -> u64 {
        Refusal::ALL
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| Self::get(&self.replies_refused[i]))
    }

    /// The current value of a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Relaxed)
    }

    /// Every counter as `name=value` pairs, for logs.
    pub fn summary(&self) -> String {
        let get = Self::get;
        format!(
            "probes_sent={} probe_errors={} receive_errors={} windows_sent={} windows_acked={} windows_rejected={} windows_dropped={} reconnects={} throughput_tests={} throughput_failures={} throughput_orders_refused={} replies_forged={}",
            get(&self.probes_sent),
            get(&self.probe_errors),
            get(&self.receive_errors),
            get(&self.windows_sent),
            get(&self.windows_acked),
            get(&self.windows_rejected),
            get(&self.windows_dropped),
            get(&self.reconnects),
            get(&self.throughput_tests),
            get(&self.throughput_failures),
            get(&self.throughput_orders_refused),
            self.refused(Refusal::Forged) + self.refused(Refusal::Early)
        )
    }
}
