//! What a load test measured, pure: counts, ack latency percentiles and the
//! collector's memory after warm-up; printed for people or as `--json`.

use serde::Serialize;

/// What became of one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Acked and taken into the matrix.
    Accepted,
    /// Acked as a replay.
    Duplicate,
    /// Refused (INVALID_ARGUMENT): a bug in the generator or the collector.
    Rejected,
    /// No ack: the session broke.
    Lost,
}

/// The tally of a run (or of one progress interval).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Ack latencies of accepted windows, in microseconds.
    latencies_us: Vec<u32>,
    /// Windows the collector accepted.
    pub accepted: u64,
    /// Windows it acknowledged as duplicates.
    pub duplicate: u64,
    /// Windows it refused.
    pub rejected: u64,
    /// Windows sent and never acknowledged.
    pub lost: u64,
}

impl Tally {
    /// Counts one window.
    pub fn add(&mut self, outcome: Outcome, latency_us: u32) {
        match outcome {
            Outcome::Accepted => {
                self.accepted += 1;
                self.latencies_us.push(latency_us);
            }
            Outcome::Duplicate => self.duplicate += 1,
            Outcome::Rejected => self.rejected += 1,
            Outcome::Lost => self.lost += 1,
        }
    }

    /// Adds another tally to this one.
    pub fn merge(&mut self, other: &Tally) {
        self.latencies_us.extend_from_slice(&other.latencies_us);
        self.accepted += other.accepted;
        self.duplicate += other.duplicate;
        self.rejected += other.rejected;
        self.lost += other.lost;
    }

    /// The `q` quantile (0 to 1) of the ack latency, in ms.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        netaware_core::stats::quantile_u32(&self.latencies_us, q).map(|us| f64::from(us) / 1e3)
    }
}

/// The collector's resident memory over the run, after warm-up.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Memory {
    /// Lowest RSS sample (MB).
    pub min_mb: f64,
    /// Highest RSS sample (MB).
    pub max_mb: f64,
    /// (max - min) / min: the goal is under 0.10.
    pub spread: f64,
}

impl Memory {
    /// From RSS samples in MB; `None` without samples.
    pub fn of(samples_mb: &[f64]) -> Option<Self> {
        let min = samples_mb.iter().copied().reduce(f64::min)?;
        let max = samples_mb.iter().copied().reduce(f64::max)?;
        Some(Self {
            min_mb: min,
            max_mb: max,
            spread: if min > 0.0 { (max - min) / min } else { 0.0 },
        })
    }
}

/// The whole run, for people and for `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    /// Simulated agents.
    pub agents: usize,
    /// Peers each agent reports on.
    pub peers: usize,
    /// Window length (ms).
    pub window_ms: u32,
    /// Seconds to connect every agent and say hello.
    pub connect_s: f64,
    /// Seconds of sending.
    pub duration_s: f64,
    /// Windows the collector accepted.
    pub accepted: u64,
    /// Windows it acknowledged as duplicates.
    pub duplicate: u64,
    /// Windows it refused.
    pub rejected: u64,
    /// Windows sent and never acknowledged.
    pub lost: u64,
    /// Windows the agents were due to send (one per window per agent).
    pub due: u64,
    /// Accepted windows per second.
    pub accepted_per_s: f64,
    /// Median ack latency (ms).
    pub ack_p50_ms: Option<f64>,
    /// 99th percentile of ack latency (ms).
    pub ack_p99_ms: Option<f64>,
    /// Longest ack latency (ms).
    pub ack_max_ms: Option<f64>,
    /// The ack latency after warm-up (the goal: p99 under 100 ms).
    pub steady_ack_p50_ms: Option<f64>,
    /// 99th percentile of ack latency after warm-up (ms).
    pub steady_ack_p99_ms: Option<f64>,
    /// Peer entries (pair windows) accepted per second.
    pub pair_windows_per_s: f64,
    /// The collector's memory after warm-up, when its pid was given.
    pub collector_memory: Option<Memory>,
    /// The stalled watch streams beside the fleet, when there were any.
    pub stalled_watchers: Option<super::stalled::StalledWatchers>,
}

impl LoadReport {
    /// The report of `tally` over `duration_s`.
    pub fn new(
        fleet: (usize, usize, u32),
        connect_s: f64,
        duration_s: f64,
        tally: &Tally,
        steady: &Tally,
        due: u64,
        memory: Option<Memory>,
    ) -> Self {
        let (agents, peers, window_ms) = fleet;
        let per_s = |n: u64| {
            if duration_s > 0.0 {
                n as f64 / duration_s
            } else {
                0.0
            }
        };
        Self {
            agents,
            peers,
            window_ms,
            connect_s,
            duration_s,
            accepted: tally.accepted,
            duplicate: tally.duplicate,
            rejected: tally.rejected,
            lost: tally.lost,
            due,
            accepted_per_s: per_s(tally.accepted),
            ack_p50_ms: tally.latency_ms(0.5),
            ack_p99_ms: tally.latency_ms(0.99),
            ack_max_ms: tally.latency_ms(1.0),
            steady_ack_p50_ms: steady.latency_ms(0.5),
            steady_ack_p99_ms: steady.latency_ms(0.99),
            pair_windows_per_s: per_s(tally.accepted * peers as u64),
            collector_memory: memory,
            stalled_watchers: None,
        }
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
        writeln!(
            f,
            "{} agents x {} peers, {} ms windows, {:.0} s (connected in {:.1} s)",
            self.agents, self.peers, self.window_ms, self.duration_s, self.connect_s
        )?;
        writeln!(
            f,
            "windows: {} accepted of {} due ({:.0}/s, {:.0} pair windows/s); {} duplicate, {} rejected, {} lost",
            self.accepted,
            self.due,
            self.accepted_per_s,
            self.pair_windows_per_s,
            self.duplicate,
            self.rejected,
            self.lost
        )?;
        writeln!(
            f,
            "ack latency: p50 {}, p99 {}, max {}; after warm-up p50 {}, p99 {}",
            ms(self.ack_p50_ms),
            ms(self.ack_p99_ms),
            ms(self.ack_max_ms),
            ms(self.steady_ack_p50_ms),
            ms(self.steady_ack_p99_ms)
        )?;
        if let Some(m) = self.collector_memory {
            writeln!(
                f,
                "collector memory after warm-up: {:.1} to {:.1} MB ({:.1}% spread)",
                m.min_mb,
                m.max_mb,
                m.spread * 100.0
            )?;
        }
        if let Some(w) = self.stalled_watchers {
            writeln!(
                f,
                "stalled watchers: {} opened and never read, {} refused, {} failed",
                w.opened, w.refused, w.failed
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_counts() {
        let mut tally = Tally::default();
        for us in 1..=100 {
            tally.add(Outcome::Accepted, us * 1_000);
        }
        tally.add(Outcome::Rejected, 0);
        tally.add(Outcome::Lost, 0);
        // Nearest rank: the 50th of 100.
        assert_eq!(tally.latency_ms(0.5), Some(50.0));
        assert_eq!(tally.latency_ms(0.99), Some(99.0));
        assert_eq!(tally.latency_ms(1.0), Some(100.0));
        let report = LoadReport::new((10, 5, 1_000), 0.5, 10.0, &tally, &tally, 100, None);
        assert_eq!(report.accepted_per_s, 10.0);
        assert_eq!(report.pair_windows_per_s, 50.0);
        assert_eq!((report.rejected, report.lost), (1, 1));
        assert!(Tally::default().latency_ms(0.5).is_none());
    }

    #[test]
    fn memory_spread() {
        let m = Memory::of(&[100.0, 105.0, 110.0]).unwrap();
        assert!((m.spread - 0.1).abs() < 1e-9);
        assert!(Memory::of(&[]).is_none());
    }
}
