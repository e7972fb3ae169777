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
use netaware_lab::fitness::{CpuTimes, LATE_MS, lab_fit};
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

/// A link pair of a lab: the network (`None` for the primary, or the
/// topology's further network number) and the two hosts.
pub(crate) type LabPair<'p> = (Option<usize>, &'p str, &'p str);

/// What the machine and the emulator did over one round of readings:
/// the emulator's overhead on the control link, the lateness of each
/// pair's packets beyond the control link's, the share of the pairs'
/// delayed packets that left late, and the share of the machine's CPU
/// time its hypervisor took.
///
/// The overhead is read on the control link, lateness included; a pair
/// whose links the emulator served later (a longer delay is slept
/// through, a short one spun) spent that much longer on the wire, and its
/// truth is the configured delay, the overhead and this difference
/// ([`netaware_lab::lateness`]). The steal is why the emulator runs late
/// ([`netaware_lab::fitness`]).
#[derive(Debug, Clone)]
pub(crate) struct Conditions {
    /// The emulator's overhead over the round (ms), from [`overhead_while`].
    pub(crate) overhead: f64,
    /// Each pair's lateness beyond the control link's (ms), in the order
    /// of the pairs.
    pub(crate) beyond_control: Vec<f64>,
    /// The share of the pairs' delayed packets that left at least
    /// [`LATE_MS`] after their due time.
    pub(crate) late_share: f64,
    /// The share of the CPU time that the hypervisor took.
    pub(crate) steal: f64,
    /// Whether the emulator kept time well enough over the round
    /// ([`netaware_lab::fitness::lab_fit`]).
    pub(crate) emulator_fit: bool,
}

impl Conditions {
    /// Whether the lab was fit to judge anything in this round: the
    /// emulator's overhead within [`MAX_OVERHEAD_MS`] and few of its
    /// packets late ([`netaware_lab::fitness::MAX_LATE_SHARE`]).
    pub(crate) fn fit(&self) -> bool {
        (0.0..MAX_OVERHEAD_MS).contains(&self.overhead) && self.emulator_fit
    }

    /// The truth of pair number `i` of the round, configured `rtt` (ms):
    /// that, the overhead, and the pair's lateness beyond the control
    /// link's.
    pub(crate) fn truth(&self, i: usize, rtt: f64) -> f64 {
        rtt + self.overhead + self.beyond_control.get(i).copied().unwrap_or(0.0)
    }
}

impl std::fmt::Display for Conditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the emulator's overhead {:.3} ms, {:.1}% of its delayed packets {LATE_MS} ms late or more, {:.1}% of the CPU time stolen",
            self.overhead,
            self.late_share * 100.0,
            self.steal * 100.0,
        )
    }
}

/// The host the control link's overhead is pinged from.
const CONTROL_PINGER: &str = "a1";

/// Runs `reading` while pinging the control link and counting the
/// emulator's lateness on `pairs`: what `reading` returned, and the
/// round's [`Conditions`].
pub(crate) fn watched<T>(
    system: &LabSystem,
    pairs: &[LabPair<'_>],
    reading: impl FnOnce() -> T,
) -> (Conditions, T) {
    let mut links = pairs.to_vec();
    links.push((None, CONTROL_PINGER, CONTROL_HOST));
    let (before, cpu_before) = (round_trip_lateness(system, &links), CpuTimes::now());
    let (overhead, value) = overhead_while(system, reading);
    let since: Vec<(Lateness, Lateness)> = round_trip_lateness(system, &links)
        .iter()
        .zip(&before)
        .map(|((out, back), (out_before, back_before))| {
            (out.since(out_before), back.since(back_before))
        })
        .collect();
    let mut round_trips: Vec<f64> = since
        .iter()
        .map(|(out, back)| out.round_trip_median_ms(back).unwrap_or(0.0))
        .collect();
    let control = round_trips.pop().unwrap_or(0.0);
    let all = since[..since.len() - 1]
        .iter()
        .fold(Lateness::default(), |all, (out, back)| {
            all.merged(out).merged(back)
        });
    let conditions = Conditions {
        overhead,
        beyond_control: round_trips.iter().map(|pair| pair - control).collect(),
        late_share: all.share_at_least_ms(LATE_MS),
        steal: CpuTimes::now().steal_since(&cpu_before),
        emulator_fit: lab_fit(&all),
    };
    (conditions, value)
}

/// Each pair's two links' lateness as counted so far.
fn round_trip_lateness(system: &LabSystem, pairs: &[LabPair<'_>]) -> Vec<(Lateness, Lateness)> {
    let lab = system.lab();
    pairs
        .iter()
        .map(|&(on, src, dst)| {
            (
                lab.lateness_on(on, src, dst).unwrap(),
                lab.lateness_on(on, dst, src).unwrap(),
            )
        })
        .collect()
}

/// What each agent's UDP probes have had left in their round trips by
/// the peers' STAMP reflectors so far, beyond the hold a prober takes out
/// (`MAX_HOLD_TAKEN_OUT`), as the agents count it: seconds left and UDP
/// probes sent, per worker. A reflector is an agent, and on a loaded
/// machine it answers late; the round trip keeps what lies beyond the
/// bound by design (a claim beyond it may be a lie), so a UDP pair's
/// truth takes it in.
pub(crate) struct UdpHolds(Vec<(f64, f64)>);

impl UdpHolds {
    /// The counters of `workers`, in their order.
    pub(crate) fn read(system: &LabSystem, workers: &[String]) -> Self {
        Self(
            workers
                .iter()
                .map(|worker| {
                    let metrics = system.agent_metrics(worker).expect("the agent's metrics");
                    let sample = |name: &str| netaware_testkit::metrics::sample(&metrics, name);
                    (
                        sample("netaware_agent_udp_hold_left_seconds_total").expect("hold left"),
                        sample("netaware_agent_probes_sent_total{transport=\"udp\"}")
                            .expect("UDP probes sent"),
                    )
                })
                .collect(),
        )
    }

    /// Nothing counted, for `workers` workers.
    pub(crate) fn none(workers: usize) -> Self {
        Self(vec![(0.0, 0.0); workers])
    }

    /// What worker number `i`'s UDP probes since `before` had left in
    /// them, per probe (ms); 0 without a UDP probe.
    pub(crate) fn per_probe_ms(&self, before: &UdpHolds, i: usize) -> f64 {
        let ((left, probes), (left_before, probes_before)) = (self.0[i], before.0[i]);
        let probes = probes - probes_before;
        if probes > 0.0 {
            (left - left_before) * 1e3 / probes
        } else {
            0.0
        }
    }

    /// The same over every worker's UDP probes together.
    pub(crate) fn pooled_ms(&self, before: &UdpHolds) -> f64 {
        let (mut left, mut probes) = (0.0, 0.0);
        for ((now_left, now_probes), (left_before, probes_before)) in self.0.iter().zip(&before.0) {
            left += now_left - left_before;
            probes += now_probes - probes_before;
        }
        left * 1e3 / probes.max(1.0)
    }
}
