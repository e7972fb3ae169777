//! When a reading taken on the lab can judge what it reads, and how
//! repeated readings decide.
//!
//! The lab's links are one thread of this process, on a virtual machine
//! whose hypervisor takes 10 to 37% of its CPU time for tens of seconds at
//! a time while a lab runs (none when idle). Over such a stretch the
//! emulator lets many packets go late, and ping, the agents and the
//! emulator all wait at random moments of the round trips they time: a
//! reading then says more about the machine than about what it reads.
//! So a reading counts only when few of the emulator's delayed packets
//! left late over its seconds ([`lab_fit`]), it is taken again while it
//! cannot decide, and a thing is judged on the median of its tries: two
//! tries that agree decide ([`Tries`]).

use crate::lateness::Lateness;

/// How late a delayed packet counts as late (ms): above what waking the
/// emulator's thread costs on a quiet machine (tens of microseconds).
pub const LATE_MS: f64 = 0.1;

/// The largest share of a reading's delayed packets that may leave
/// [`LATE_MS`] late or more for the reading to judge. Read in the
/// accuracy labs: 0 to 10% in rounds where the agents, ping and the truth
/// agreed (0 to 14% of the CPU time stolen), 19 to 33% in rounds where
/// readings strayed from the truth by 0.3 ms or more (24 to 37% stolen).
pub const MAX_LATE_SHARE: f64 = 0.12;

/// The most tries a reading is taken: a bad stretch of the machine lasts
/// tens of seconds, and the tries in it judge nothing.
pub const MAX_TRIES: usize = 8;

/// Whether the emulator kept time well enough over `lateness` (the
/// packets of the links a reading crossed, over its seconds) for the
/// reading to judge.
pub fn lab_fit(lateness: &Lateness) -> bool {
    lateness.share_at_least_ms(LATE_MS) <= MAX_LATE_SHARE
}

/// The tries of one judged thing: for each try that could judge, whether
/// it found the thing off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tries {
    offs: Vec<bool>,
}

/// What the tries so far say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Two tries found it as it should be.
    Holds,
    /// Two tries found it off.
    Off,
    /// Fewer than two tries agree yet.
    Undecided,
}

impl Tries {
    /// Adds a try that judged: `off` when it found the thing off.
    pub fn push(&mut self, off: bool) {
        self.offs.push(off);
    }

    /// The verdict on the median of the tries: off once two found it off,
    /// holding once two found it holding. A try never lifts a verdict:
    /// the first two that agree decide, in the order they came.
    pub fn verdict(&self) -> Verdict {
        let (mut off, mut held) = (0, 0);
        for &try_off in &self.offs {
            if try_off {
                off += 1;
            } else {
                held += 1;
            }
            if off == 2 {
                return Verdict::Off;
            }
            if held == 2 {
                return Verdict::Holds;
            }
        }
        Verdict::Undecided
    }

    /// How many tries judged.
    pub fn len(&self) -> usize {
        self.offs.len()
    }

    /// Whether no try judged.
    pub fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }
}

/// The machine's CPU time so far, from /proc/stat, to tell how much of a
/// stretch the hypervisor took ([`CpuTimes::steal_since`]).
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    steal: u64,
    total: u64,
}

impl CpuTimes {
    /// The counters now (zero where /proc/stat cannot be read).
    pub fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        Self::parse(&stat)
    }

    /// The first line of `stat`: cpu user nice system idle iowait irq
    /// softirq steal (guest time is already inside user time).
    fn parse(stat: &str) -> Self {
        let ticks: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|t| t.parse().unwrap_or(0))
            .collect();
        Self {
            steal: ticks.get(7).copied().unwrap_or(0),
            total: ticks.iter().sum(),
        }
    }

    /// The share of the CPU time since `before` that the hypervisor took.
    pub fn steal_since(&self, before: &CpuTimes) -> f64 {
        let total = self.total.saturating_sub(before.total);
        if total == 0 {
            0.0
        } else {
            self.steal.saturating_sub(before.steal) as f64 / total as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tries(offs: &[bool]) -> Tries {
        let mut tries = Tries::default();
        offs.iter().for_each(|&off| tries.push(off));
        tries
    }

    #[test]
    fn two_agreeing_tries_decide_in_the_order_they_came() {
        assert_eq!(tries(&[]).verdict(), Verdict::Undecided);
        assert_eq!(tries(&[true]).verdict(), Verdict::Undecided);
        assert_eq!(tries(&[true, false]).verdict(), Verdict::Undecided);
        assert_eq!(tries(&[false, false]).verdict(), Verdict::Holds);
        assert_eq!(tries(&[true, true]).verdict(), Verdict::Off);
        assert_eq!(tries(&[true, false, true]).verdict(), Verdict::Off);
        assert_eq!(tries(&[false, true, false]).verdict(), Verdict::Holds);
        // Decided at the third try; a fourth does not change it.
        assert_eq!(tries(&[true, false, false, true]).verdict(), Verdict::Holds);
    }

    #[test]
    fn steal_is_the_hypervisors_share_of_the_cpu_time_between_two_readings() {
        let before = CpuTimes::parse("cpu  100 0 50 800 0 0 0 50 0 0\ncpu0 1 2 3");
        let after = CpuTimes::parse("cpu  150 0 50 1000 0 0 0 100 0 0\n");
        assert!((after.steal_since(&before) - 50.0 / 300.0).abs() < 1e-12);
        assert_eq!(after.steal_since(&after), 0.0);
        assert_eq!(CpuTimes::parse("").steal_since(&before), 0.0);
    }

    #[test]
    fn a_reading_is_fit_while_few_delayed_packets_left_late() {
        let links = crate::lateness::LinkLateness::new(1);
        assert!(lab_fit(&links.of(0)), "no packet, nothing late");
        for _ in 0..88 {
            links.count(0, 20_000);
        }
        for _ in 0..12 {
            links.count(0, 500_000);
        }
        assert!(lab_fit(&links.of(0)), "12% late");
        links.count(0, 500_000);
        assert!(!lab_fit(&links.of(0)), "13 of 101 late");
    }
}
