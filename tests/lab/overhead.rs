//! The emulator's overhead over the same seconds as the reading it
//! corrects: what ping, timed on the wire, reads on the control link
//! (a1 to the control host, which no fault of any lab touches) beyond
//! its configured RTT, pinged throughout the reading.
//!
//! Why throughout and not once: the lab's links are a thread on a
//! virtual machine's two vCPUs, and what that thread adds to a round
//! trip (its wake-up latency, some 0.1 ms on a quiet machine) rises for
//! tens of seconds at a time when the machine under the VM is busy (0.4
//! to 0.7 ms has been read in CI). An overhead read once, before or after
//! the agents' windows, then corrects the agents' medians by the wrong
//! amount; one read over the same seconds moves with them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use netaware::lab_system::LabSystem;
use netaware_lab::lateness::Lateness;
use netaware_lab::topology::CONTROL_HOST;

/// How far apart the control link's pings go: 20 a second, a light load
/// beside the agents' probes.
const INTERVAL: Duration = Duration::from_millis(50);

/// Pings per ping process: one every half second, so that the pinging
/// stops soon after the reading does.
const PER_PING: u32 = 10;

/// The most the emulator may add to a round trip for a reading to be
/// judged against the truth at all (ms): beyond it, the lab's own
/// latency is not small beside the differences the labs are built to
/// show (0.5 ms between a zone's pairs).
pub(crate) const MAX_OVERHEAD_MS: f64 = 0.3;

/// Runs `reading` while pinging the control link from a1, and returns
/// the emulator's overhead over those seconds (ms: ping's median round
/// trip on the wire less the link's configured RTT) beside what
/// `reading` returned.
pub(crate) fn overhead_while<T>(system: &LabSystem, reading: impl FnOnce() -> T) -> (f64, T) {
    let lab = system.lab();
    let (control_rtt, _) = lab.round_trip(CONTROL_PINGER, CONTROL_HOST).unwrap();
    let control = lab.control().spec.address.to_string();
    let capture = lab.capture_pings(CONTROL_PINGER).unwrap();
    let done = AtomicBool::new(false);
    let value = std::thread::scope(|scope| {
        let pinging = scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                lab.ping(CONTROL_PINGER, &control, PER_PING, INTERVAL)
                    .unwrap();
            }
        });
        let value = reading();
        done.store(true, Ordering::Relaxed);
        pinging.join().unwrap();
        value
    });
    let mut rtts = netaware_lab::wire_ping::round_trips(&capture.finish(), &control);
    rtts.sort_by(f64::total_cmp);
    let median = rtts
        .get(rtts.len() / 2)
        .copied()
        .unwrap_or_else(|| panic!("ping a1 -> control got no reply"));
    (median - control_rtt, value)
}

/// The emulator's overhead over the next second: for a reading that is
/// itself that short, such as a few pings.
pub(crate) fn overhead_now(system: &LabSystem) -> f64 {
    overhead_while(system, || std::thread::sleep(Duration::from_secs(1))).0
}

/// What the machine and the emulator did over one round of readings:
/// the lateness of each pair's packets beyond the control link's, the
/// share of the pairs' delayed packets that left late, and the share of
/// the machine's CPU time its hypervisor took.
///
/// The overhead above is read on the control link, lateness included; a
/// pair whose links the emulator served later (a longer delay is slept
/// through, a short one spun) spent that much longer on the wire, and
/// its truth is the configured delay, the overhead and this difference
/// ([`netaware_lab::lateness`]). The steal is why the emulator runs late:
/// this virtual machine's vCPUs are taken from it for tens of seconds at
/// a time (10 to 33% of its time has been read while a lab runs, none
/// when idle), and then the emulator, ping and the agents all wait at
/// random moments of the round trips they time.
pub(crate) struct RoundConditions<'p> {
    pairs: Vec<(&'p str, &'p str)>,
    before: Vec<(Lateness, Lateness)>,
    cpu_before: CpuTimes,
}

/// What one round's conditions were.
#[derive(Debug, Clone)]
pub(crate) struct Conditions {
    /// Each pair's lateness beyond the control link's (ms), in the order
    /// of the pairs.
    pub(crate) beyond_control: Vec<f64>,
    /// The share of the pairs' delayed packets that left at least
    /// [`LATE_MS`] after their due time.
    pub(crate) late_share: f64,
    /// The share of the CPU time that the hypervisor took.
    pub(crate) steal: f64,
}

impl std::fmt::Display for Conditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1}% of the emulator's delayed packets {LATE_MS} ms late or more, {:.1}% of the CPU time stolen",
            self.late_share * 100.0,
            self.steal * 100.0
        )
    }
}

/// How late a packet counts as late (ms): above what waking the
/// emulator's thread costs on a quiet machine.
pub(crate) const LATE_MS: f64 = 0.1;

/// The host the control link's overhead is pinged from.
const CONTROL_PINGER: &str = "a1";

impl<'p> RoundConditions<'p> {
    /// Starts counting for `pairs`.
    pub(crate) fn start(system: &LabSystem, pairs: &[(&'p str, &'p str)]) -> Self {
        let mut pairs = pairs.to_vec();
        pairs.push((CONTROL_PINGER, CONTROL_HOST));
        let before = round_trip_lateness(system, &pairs);
        Self {
            pairs,
            before,
            cpu_before: CpuTimes::now(),
        }
    }

    /// What was counted since the start.
    pub(crate) fn finish(&self, system: &LabSystem) -> Conditions {
        let now = round_trip_lateness(system, &self.pairs);
        let since: Vec<(Lateness, Lateness)> = now
            .iter()
            .zip(&self.before)
            .map(|((out, back), (out_before, back_before))| {
                (out.since(out_before), back.since(back_before))
            })
            .collect();
        let median = |lateness: &Lateness| lateness.median_ms().unwrap_or(0.0);
        let mut round_trips: Vec<f64> = since
            .iter()
            .map(|(out, back)| median(out) + median(back))
            .collect();
        let control = round_trips.pop().unwrap_or(0.0);
        let all = since[..since.len() - 1]
            .iter()
            .fold(Lateness::default(), |all, (out, back)| {
                all.merged(out).merged(back)
            });
        Conditions {
            beyond_control: round_trips.iter().map(|pair| pair - control).collect(),
            late_share: all.share_at_least_ms(LATE_MS),
            steal: CpuTimes::now().steal_since(&self.cpu_before),
        }
    }
}

/// Each pair's two links' lateness as counted so far.
fn round_trip_lateness(system: &LabSystem, pairs: &[(&str, &str)]) -> Vec<(Lateness, Lateness)> {
    let lab = system.lab();
    pairs
        .iter()
        .map(|&(src, dst)| {
            (
                lab.lateness(src, dst).unwrap(),
                lab.lateness(dst, src).unwrap(),
            )
        })
        .collect()
}

/// The machine's CPU time so far, from /proc/stat (in its ticks).
struct CpuTimes {
    steal: u64,
    total: u64,
}

impl CpuTimes {
    fn now() -> Self {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu user nice system idle iowait irq softirq steal guest guest_nice
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

    fn steal_since(&self, before: &CpuTimes) -> f64 {
        let total = self.total.saturating_sub(before.total);
        if total == 0 {
            0.0
        } else {
            self.steal.saturating_sub(before.steal) as f64 / total as f64
        }
    }
}
