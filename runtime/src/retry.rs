//! How long to wait before the next attempt to reach a peer that is away
//! (the agent's session to the collector, the extender's watch of the
//! collector's scores): exponential, capped, and with jitter, so that a
//! thousand clients of one collector that restarts do not all come back
//! in the same instant. The schedule is backon's; each caller keeps its
//! own loop, since what it does while it waits (an agent keeps taking
//! windows in) is its own.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Waits of a backoff: from about `first` (at least `first`, at most
/// twice it) doubling to about `cap`, for ever. A caller starts a new one
/// once it reached its peer again.
pub fn backoff(first: Duration, cap: Duration) -> impl Iterator<Item = Duration> + Send {
    // backon's jitter adds up to the wait itself: from w to 2w.
    ExponentialBuilder::default()
        .with_min_delay(first)
        .with_max_delay(cap)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_to_the_cap_with_jitter_of_at_most_the_wait() {
        let first = Duration::from_millis(100);
        let cap = Duration::from_secs(2);
        let waits: Vec<Duration> = backoff(first, cap).take(12).collect();
        assert_eq!(waits.len(), 12, "never runs out");
        for (i, wait) in waits.iter().enumerate() {
            let base = (first * 2u32.pow(i as u32)).min(cap);
            assert!(
                *wait >= base && *wait <= base * 2,
                "wait {i}: {wait:?} outside {base:?}..{:?}",
                base * 2
            );
        }
        assert!(waits[11] <= cap * 2, "capped");
    }
}
