//! How late the emulator let each link's delayed packets go, kept as a
//! histogram per link.
//!
//! The emulator sleeps until shortly before a packet is due and spins the
//! rest, but on a busy virtual machine its thread still wakes up late at
//! times (tens of microseconds on a quiet machine, some hundreds for
//! minutes when the machine under it is busy), and only on links with
//! a delay long enough to sleep through. A packet that leaves late spends
//! that much longer on its link: it is part of what the emulated network
//! did. A test that judges a prober against the configured delay alone
//! would blame the prober for the emulator's lateness; with these
//! histograms it can take, for each link, the lateness over the same
//! seconds as the reading it judges.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Width of a histogram bucket (ns).
pub const BUCKET_NS: u64 = 10_000;
/// Buckets per link: 0 to 2 ms in steps of [`BUCKET_NS`]; the last one
/// also holds every packet later than that.
pub const BUCKETS: usize = 200;

/// The counters of every link, `src * ports + dst`, written by the
/// forwarding thread and read by anyone.
#[derive(Debug, Default)]
pub struct LinkLateness {
    counts: Vec<AtomicU64>,
}

impl LinkLateness {
    /// Counters for `links` links.
    pub fn new(links: usize) -> Self {
        Self {
            counts: (0..links * BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Counts one packet of `link` that left `late_ns` after its due time.
    pub fn count(&self, link: usize, late_ns: u64) {
        let bucket = ((late_ns / BUCKET_NS) as usize).min(BUCKETS - 1);
        if let Some(counter) = self.counts.get(link * BUCKETS + bucket) {
            counter.fetch_add(1, Relaxed);
        }
    }

    /// What `link` has counted so far (empty for a link it does not have).
    pub fn of(&self, link: usize) -> Lateness {
        let counts = self
            .counts
            .get(link * BUCKETS..(link + 1) * BUCKETS)
            .map(|buckets| buckets.iter().map(|c| c.load(Relaxed)).collect())
            .unwrap_or_default();
        Lateness { counts }
    }
}

/// One link's lateness histogram at some moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lateness {
    counts: Vec<u64>,
}

impl Lateness {
    /// What was counted after `earlier` (a reading of the same link).
    pub fn since(&self, earlier: &Lateness) -> Lateness {
        let counts = self
            .counts
            .iter()
            .enumerate()
            .map(|(i, &now)| now.saturating_sub(earlier.counts.get(i).copied().unwrap_or(0)))
            .collect();
        Lateness { counts }
    }

    /// Packets counted.
    pub fn packets(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Both histograms' packets together.
    pub fn merged(&self, other: &Lateness) -> Lateness {
        let len = self.counts.len().max(other.counts.len());
        let at = |counts: &[u64], i: usize| counts.get(i).copied().unwrap_or(0);
        let counts = (0..len)
            .map(|i| at(&self.counts, i) + at(&other.counts, i))
            .collect();
        Lateness { counts }
    }

    /// The share of packets at least `ms` late (to the bucket: a packet
    /// is counted in the bucket that holds `ms` or a later one); 0 without
    /// a packet.
    pub fn share_at_least_ms(&self, ms: f64) -> f64 {
        let packets = self.packets();
        if packets == 0 {
            return 0.0;
        }
        let first = ((ms * 1e6 / BUCKET_NS as f64) as usize).min(BUCKETS - 1);
        let late: u64 = self.counts.iter().skip(first).sum();
        late as f64 / packets as f64
    }

    /// The median lateness (ms, the middle of its bucket); `None` without
    /// a packet. A median, because a stall of the machine leaves a few
    /// packets milliseconds late, which a round trip's median does not
    /// carry either.
    pub fn median_ms(&self) -> Option<f64> {
        let packets = self.packets();
        if packets == 0 {
            return None;
        }
        let middle = packets.div_ceil(2);
        let mut seen = 0;
        let bucket = self.counts.iter().position(|&count| {
            seen += count;
            seen >= middle
        })?;
        Some((bucket as f64 + 0.5) * BUCKET_NS as f64 / 1e6)
    }

    /// The median of a round trip's lateness (ms, bucket middles summed):
    /// one packet of this link out and one of `back`'s in return, drawn
    /// independently; `None` when either has no packet. Not the sum of
    /// the two medians: when a quarter of each link's packets leave late,
    /// close to half of the round trips hold a late packet, and their
    /// median is in the tail that neither link's median shows.
    pub fn round_trip_median_ms(&self, back: &Lateness) -> Option<f64> {
        let (out_packets, back_packets) = (self.packets(), back.packets());
        if out_packets == 0 || back_packets == 0 {
            return None;
        }
        let mut sums = vec![0u128; self.counts.len() + back.counts.len()];
        for (i, &out) in self.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            for (j, &back) in back.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
                sums[i + j] += u128::from(out) * u128::from(back);
            }
        }
        let middle = (u128::from(out_packets) * u128::from(back_packets)).div_ceil(2);
        let mut seen = 0;
        let buckets = sums.iter().position(|&count| {
            seen += count;
            seen >= middle
        })?;
        // Each of the two packets sits in the middle of its bucket.
        Some((buckets as f64 + 1.0) * BUCKET_NS as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_links_median_is_taken_over_what_came_since() {
        let links = LinkLateness::new(4);
        for late_us in [5, 15, 15] {
            links.count(1, late_us * 1_000);
        }
        let before = links.of(1);
        assert_eq!(before.median_ms(), Some(0.015));
        for late_us in [300, 300, 310, 5_000_000] {
            links.count(1, late_us * 1_000);
        }
        let since = links.of(1).since(&before);
        assert_eq!(since.packets(), 4);
        // 300, 300 | 310, the last bucket: the median is the second.
        assert_eq!(since.median_ms(), Some(0.305));
        assert_eq!(since.share_at_least_ms(0.31), 0.5);
        assert_eq!(since.share_at_least_ms(3.0), 0.25);
        assert_eq!(since.share_at_least_ms(0.0), 1.0);
        let both = since.merged(&before);
        assert_eq!(both.packets(), 7);
        assert_eq!(both.median_ms(), Some(0.305));
        assert_eq!(both.share_at_least_ms(0.1), 4.0 / 7.0);
        // Other links are untouched; links it does not have read empty.
        assert_eq!(links.of(0).packets(), 0);
        assert_eq!(links.of(0).median_ms(), None);
        assert_eq!(links.of(9).packets(), 0);
        links.count(9, 1);
        assert_eq!(links.of(3).packets(), 0);
    }

    #[test]
    fn a_round_trips_median_lies_in_the_tail_when_many_packets_of_each_way_are_late() {
        let links = LinkLateness::new(2);
        // Each way: 7 packets on time (5 us), 3 late by 500 us.
        for link in [0, 1] {
            (0..7).for_each(|_| links.count(link, 5_000));
            (0..3).for_each(|_| links.count(link, 500_000));
        }
        let (out, back) = (links.of(0), links.of(1));
        assert_eq!(out.median_ms(), Some(0.005));
        // 49% of the round trips have both packets on time, 51% one or
        // two late: the median round trip carries one late packet.
        assert_eq!(out.round_trip_median_ms(&back), Some(0.51));
        // With one late packet in ten each way, the median is on time.
        let quiet = LinkLateness::new(1);
        (0..9).for_each(|_| quiet.count(0, 5_000));
        quiet.count(0, 500_000);
        assert_eq!(quiet.of(0).round_trip_median_ms(&quiet.of(0)), Some(0.01));
        assert_eq!(out.round_trip_median_ms(&Lateness::default()), None);
    }

    #[test]
    fn a_stall_past_the_last_bucket_is_counted_in_it() {
        let links = LinkLateness::new(1);
        links.count(0, u64::MAX);
        let lateness = links.of(0);
        assert_eq!(lateness.packets(), 1);
        let last = (BUCKETS as f64 - 0.5) * BUCKET_NS as f64 / 1e6;
        assert_eq!(lateness.median_ms(), Some(last));
    }
}
