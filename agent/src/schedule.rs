//! When to probe each peer within one probe interval.
//!
//! Probes are spread evenly over the interval, never sent to all peers at
//! once: with n peers, peer k goes at `k * interval / n`, moved by a random
//! jitter of up to a fraction of its slot so that agents started together do
//! not fall into step. The prober wakes once for all the probes due within
//! [`PROBE_BATCH`]. Pure: the random numbers come from the caller.

use std::time::Duration;

/// Probes due within this much of the one that wakes the prober go out
/// with it: a wake-up per probe (the timer armed again, the loop polled)
/// cost the agent more than the probe itself, and a probe sent a few
/// milliseconds early to another peer changes nothing it measures (each
/// peer is still probed once per interval, its RTT stamped by the kernel).
pub const PROBE_BATCH: Duration = Duration::from_millis(20);

/// Share of a slot by which a probe may move either way.
pub const JITTER_FRACTION: f64 = 0.25;

/// The offset of every peer's probe from the start of the interval, in peer
/// order. `unit_randoms` yields numbers in [0, 1), one per peer.
pub fn probe_offsets(
    peers: usize,
    interval: Duration,
    mut unit_randoms: impl FnMut() -> f64,
) -> Vec<Duration> {
    if peers == 0 {
        return Vec::new();
    }
    let slot = interval.as_secs_f64() / peers as f64;
    (0..peers)
        .map(|k| {
            let shift = (unit_randoms().clamp(0.0, 1.0) * 2.0 - 1.0) * JITTER_FRACTION * slot;
            let at = (k as f64 * slot + slot / 2.0 + shift).clamp(0.0, interval.as_secs_f64());
            Duration::from_secs_f64(at)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn without_jitter_probes_sit_in_the_middle_of_their_slots() {
        let offsets = probe_offsets(4, Duration::from_secs(1), || 0.5);
        let ms: Vec<u128> = offsets.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [125, 375, 625, 875]);
    }

    proptest! {
        #[test]
        fn probes_stay_in_their_slot_and_in_order(
            peers in 1usize..500, interval_ms in 10u64..10_000,
            randoms in prop::collection::vec(0.0f64..1.0, 500),
        ) {
            let interval = Duration::from_millis(interval_ms);
            let mut randoms = randoms.into_iter();
            let offsets = probe_offsets(peers, interval, || randoms.next().unwrap());
            prop_assert_eq!(offsets.len(), peers);
            let slot = interval.as_secs_f64() / peers as f64;
            for (k, offset) in offsets.iter().enumerate() {
                let at = offset.as_secs_f64();
                prop_assert!(at >= k as f64 * slot - 1e-9 && at <= (k + 1) as f64 * slot + 1e-9);
            }
            prop_assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
