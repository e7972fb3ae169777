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
    let (control_rtt, _) = lab.round_trip("a1", "control").unwrap();
    let control = lab.control().spec.address.to_string();
    let capture = lab.capture_pings("a1").unwrap();
    let done = AtomicBool::new(false);
    let value = std::thread::scope(|scope| {
        let pinging = scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                lab.ping("a1", &control, PER_PING, INTERVAL).unwrap();
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
