//! One direction of one emulated link: decides, for each packet, whether it
//! is dropped and when it comes out.
//!
//! Pure: time (ns on any monotonic clock) and random numbers are passed in.
//! A packet first waits for the link to be free and to be serialised at the
//! link's rate (a token bucket of one packet, with a bounded queue: past
//! [`MAX_QUEUE_NS`] of backlog it is dropped, like a router's tail drop),
//! then travels for the delay plus a uniform jitter. Packets of one
//! direction never overtake each other, as on a real wire.

use crate::topology::LinkProfile;

/// Longest backlog a rate-limited link holds before it drops (100 ms).
pub const MAX_QUEUE_NS: u64 = 100_000_000;

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    /// The link's loss ratio.
    Loss,
    /// The queue in front of a rate limit was full.
    QueueFull,
}

/// What happens to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Delivered at this time (ns).
    Deliver(u64),
    /// Dropped.
    Dropped(Drop),
}

/// The state of one direction of a link.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    delay_ns: f64,
    jitter_ns: f64,
    loss: f64,
    ns_per_byte: Option<f64>,
    free_at: u64,
    last_delivery: u64,
}

impl Link {
    /// A link with this profile, idle.
    pub fn new(profile: &LinkProfile) -> Self {
        let mut link = Self {
            delay_ns: 0.0,
            jitter_ns: 0.0,
            loss: 0.0,
            ns_per_byte: None,
            free_at: 0,
            last_delivery: 0,
        };
        link.set_profile(profile);
        link
    }

    /// Changes the profile; packets already on their way are not affected.
    pub fn set_profile(&mut self, profile: &LinkProfile) {
        self.delay_ns = profile.delay_ms * 1e6;
        self.jitter_ns = profile.jitter_ms * 1e6;
        self.loss = profile.loss;
        self.ns_per_byte = profile.rate_mbit.map(|mbit| 8.0 * 1e3 / mbit);
    }

    /// The fate of a packet of `bytes` arriving at `now`. `loss_draw` and
    /// `jitter_draw` are uniform random numbers in [0, 1).
    pub fn admit(&mut self, now: u64, bytes: usize, loss_draw: f64, jitter_draw: f64) -> Verdict {
        if self.loss > 0.0 && loss_draw < self.loss {
            return Verdict::Dropped(Drop::Loss);
        }
        let sent = match self.ns_per_byte {
            None => now,
            Some(ns_per_byte) => {
                let start = self.free_at.max(now);
                if start - now > MAX_QUEUE_NS {
                    return Verdict::Dropped(Drop::QueueFull);
                }
                self.free_at = start + (bytes as f64 * ns_per_byte) as u64;
                self.free_at
            }
        };
        let jitter = (jitter_draw * 2.0 - 1.0) * self.jitter_ns;
        let arrival = sent + (self.delay_ns + jitter).max(0.0) as u64;
        self.last_delivery = self.last_delivery.max(arrival);
        Verdict::Deliver(self.last_delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn profile(delay_ms: f64, jitter_ms: f64, loss: f64, rate_mbit: Option<f64>) -> LinkProfile {
        LinkProfile {
            delay_ms,
            jitter_ms,
            loss,
            rate_mbit,
        }
    }

    #[test]
    fn delay_and_loss() {
        let mut link = Link::new(&profile(2.0, 0.0, 0.25, None));
        assert_eq!(
            link.admit(1_000, 100, 0.5, 0.5),
            Verdict::Deliver(2_001_000)
        );
        assert_eq!(
            link.admit(1_000, 100, 0.2, 0.5),
            Verdict::Dropped(Drop::Loss)
        );
    }

    #[test]
    fn rate_serialises_back_to_back_packets() {
        // 8 Mbit/s: 1000 bytes take 1 ms on the wire.
        let mut link = Link::new(&profile(0.0, 0.0, 0.0, Some(8.0)));
        assert_eq!(link.admit(0, 1_000, 0.9, 0.5), Verdict::Deliver(1_000_000));
        assert_eq!(link.admit(0, 1_000, 0.9, 0.5), Verdict::Deliver(2_000_000));
        // An idle link starts afresh.
        assert_eq!(
            link.admit(10_000_000, 1_000, 0.9, 0.5),
            Verdict::Deliver(11_000_000)
        );
        // A backlog above 100 ms drops.
        for _ in 0..=100 {
            assert!(matches!(
                link.admit(20_000_000, 1_000, 0.9, 0.5),
                Verdict::Deliver(_)
            ));
        }
        assert_eq!(
            link.admit(20_000_000, 1_000, 0.9, 0.5),
            Verdict::Dropped(Drop::QueueFull)
        );
    }

    proptest! {
        #[test]
        fn packets_never_overtake_and_jitter_stays_in_bounds(
            draws in prop::collection::vec((0u64..1_000_000, 0.0f64..1.0), 1..200),
        ) {
            let mut link = Link::new(&profile(1.0, 0.5, 0.0, None));
            let mut now = 0;
            let mut last = 0;
            for (gap, jitter) in draws {
                now += gap;
                let Verdict::Deliver(at) = link.admit(now, 100, 0.9, jitter) else { panic!("no loss configured") };
                prop_assert!(at >= last);
                prop_assert!(at >= now + 500_000);
                last = at;
            }
        }

        #[test]
        fn loss_follows_the_draws(loss in 0.0f64..1.0, draw in 0.0f64..1.0) {
            let mut link = Link::new(&profile(0.0, 0.0, loss, None));
            let dropped = matches!(link.admit(0, 64, draw, 0.5), Verdict::Dropped(Drop::Loss));
            prop_assert_eq!(dropped, draw < loss);
        }
    }
}
