//! The alpha-beta model of a ring all-reduce: each of the 2(k-1) steps,
//! every worker sends a 1/k chunk of the gradient to the next one, all at
//! once, so a step lasts as long as its slowest link (one-way latency plus
//! chunk over that link's goodput). Loss lowers a TCP flow's goodput
//! (Mathis et al. 1997: MSS / RTT * 1.22 / sqrt(p)), never above the
//! link's rate. Jobs do not slow each other down here: links are taken as
//! dedicated to the job (EVALUATION.md says what that leaves out).

/// One direction of a link, as a flow over it sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Round-trip time, ms.
    pub rtt_ms: f64,
    /// Share of packets lost, 0 to 1.
    pub loss: f64,
    /// Line rate, bit/s.
    pub rate_bps: f64,
}

/// TCP's maximum segment size on a 1500-byte MTU, bytes.
const MSS_BYTES: f64 = 1448.0;

impl Link {
    /// A long TCP flow's goodput over this link, bit/s.
    pub fn goodput_bps(&self) -> f64 {
        if self.loss <= 0.0 {
            return self.rate_bps;
        }
        let rtt_s = (self.rtt_ms / 1e3).max(1e-6);
        let mathis = MSS_BYTES * 8.0 / rtt_s * 1.22 / self.loss.sqrt();
        mathis.min(self.rate_bps)
    }
}

/// Seconds one ring all-reduce of `gradient_bytes` takes on `k` workers,
/// with `link(i, j)` the link from worker i to worker j (ring order).
pub fn ring_allreduce_s(k: usize, gradient_bytes: f64, link: impl Fn(usize, usize) -> Link) -> f64 {
    if k < 2 {
        return 0.0;
    }
    let chunk_bits = gradient_bytes * 8.0 / k as f64;
    let step = (0..k)
        .map(|i| {
            let link = link(i, (i + 1) % k);
            link.rtt_ms / 2e3 + chunk_bits / link.goodput_bps().max(1.0)
        })
        .fold(0.0, f64::max);
    2.0 * (k - 1) as f64 * step
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAST: Link = Link {
        rtt_ms: 0.1,
        loss: 0.0,
        rate_bps: 100e9,
    };

    #[test]
    fn a_ring_moves_twice_the_gradient_over_its_slowest_link() {
        // 4 workers, 100 MB, 100 Gbit/s: 6 steps of 25 MB = 1.2 GB over
        // 100 Gbit/s = 12 ms, plus 6 half-RTTs.
        let t = ring_allreduce_s(4, 100e6, |_, _| FAST);
        assert!((t - (0.012 + 6.0 * 0.05e-3)).abs() < 1e-9, "{t}");
        assert_eq!(ring_allreduce_s(1, 100e6, |_, _| FAST), 0.0);
        // One slow link sets every step's pace.
        let slow = Link {
            rate_bps: 10e9,
            ..FAST
        };
        let t_slow = ring_allreduce_s(4, 100e6, |i, _| if i == 2 { slow } else { FAST });
        assert!(t_slow > 9.0 * t, "{t_slow} vs {t}");
    }

    #[test]
    fn loss_lowers_goodput_and_never_raises_it() {
        let lossy = Link { loss: 0.01, ..FAST };
        assert!(lossy.goodput_bps() < FAST.goodput_bps() / 10.0);
        let tiny_loss = Link {
            loss: 1e-12,
            rate_bps: 1e9,
            ..FAST
        };
        assert_eq!(tiny_loss.goodput_bps(), 1e9);
    }
}
