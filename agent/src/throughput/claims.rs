//! Whose count a throughput test reports, pure: the client's own. The
//! server says how many bytes it received, but a server that wants to look
//! well connected could say anything; the client knows how many of its own
//! bytes the server's kernel acknowledged (`TCP_INFO`'s `bytes_acked`),
//! and no server can acknowledge bytes it never received. So the goodput
//! is the acknowledged bytes over the client's own clock, and a server
//! whose claim is higher than that allows is refused
//! (`netaware_agent_throughput_claims_refused_total`).

use std::time::Duration;

use super::wire::Counted;

/// How far above the client's own figure a server's claim may be and still
/// be taken as the same measurement: the two count over windows that
/// differ by a one-way trip and the client's sampling of `TCP_INFO`
/// between writes.
pub const CLAIM_TOLERANCE: f64 = 0.25;

/// What the client saw the server acknowledge on one stream over the
/// measured part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Acked {
    /// Bytes acknowledged between the start and the end of the part.
    pub bytes: u64,
    /// The time between the two readings.
    pub over: Duration,
}

/// The goodput the client measured itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OwnCount {
    /// bit/s, summed over the streams.
    pub goodput_bps: f64,
    /// Bytes acknowledged, summed over the streams.
    pub bytes: u64,
    /// The longest of the streams' measured parts.
    pub measured: Duration,
}

/// Why a test's count was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClaimError {
    /// The server claims more than its kernel acknowledged.
    #[error(
        "the server claims {claimed_bps:.0} bit/s, but acknowledged {acked_bps:.0} bit/s: refused"
    )]
    Overclaimed {
        /// What the server said.
        claimed_bps: f64,
        /// What the client counted.
        acked_bps: f64,
    },
    /// A stream has no acknowledged count of its own (a kernel before 4.1
    /// gives none): the server's word cannot be checked, so it is not taken.
    #[error("the kernel gives no acknowledged byte count (TCP_INFO bytes_acked)")]
    Unverifiable,
}

/// The client's own count, once the server's claim is checked against it.
pub fn check(claim: &Counted, streams: &[Option<Acked>]) -> Result<OwnCount, ClaimError> {
    let mut own = OwnCount {
        goodput_bps: 0.0,
        bytes: 0,
        measured: Duration::ZERO,
    };
    if streams.is_empty() {
        return Err(ClaimError::Unverifiable);
    }
    for stream in streams {
        let stream = stream.ok_or(ClaimError::Unverifiable)?;
        if !stream.over.is_zero() {
            own.goodput_bps += stream.bytes as f64 * 8.0 / stream.over.as_secs_f64();
        }
        own.bytes = own.bytes.saturating_add(stream.bytes);
        own.measured = own.measured.max(stream.over);
    }
    let claimed_bps = claim.goodput_bps();
    if claimed_bps > own.goodput_bps * (1.0 + CLAIM_TOLERANCE) {
        return Err(ClaimError::Overclaimed {
            claimed_bps,
            acked_bps: own.goodput_bps,
        });
    }
    Ok(own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn acked(bytes: u64, ms: u64) -> Option<Acked> {
        Some(Acked {
            bytes,
            over: Duration::from_millis(ms),
        })
    }

    fn claim(bytes: u64, ms: u64) -> Counted {
        Counted {
            bytes,
            measured: Duration::from_millis(ms),
        }
    }

    #[test]
    fn the_goodput_is_the_clients_own_count() {
        // Two streams of 50 MB each over a second: 800 Mbit/s.
        let own = check(&claim(95_000_000, 1_000), &[acked(50_000_000, 1_000); 2]).unwrap();
        assert_eq!(own.goodput_bps, 800e6);
        assert_eq!(own.bytes, 100_000_000);
        assert_eq!(own.measured, Duration::from_secs(1));
        // A server that counts less makes no difference to the figure.
        let modest = check(&claim(10_000_000, 1_000), &[acked(50_000_000, 1_000); 2]).unwrap();
        assert_eq!(modest, own);
    }

    #[test]
    fn a_claim_above_what_was_acknowledged_is_refused() {
        let ten_times = check(&claim(1_000_000_000, 1_000), &[acked(100_000_000, 1_000)]);
        assert_eq!(
            ten_times,
            Err(ClaimError::Overclaimed {
                claimed_bps: 8e9,
                acked_bps: 8e8
            })
        );
        // Within the tolerance: the same measurement.
        assert!(check(&claim(120_000_000, 1_000), &[acked(100_000_000, 1_000)]).is_ok());
        assert!(check(&claim(130_000_000, 1_000), &[acked(100_000_000, 1_000)]).is_err());
    }

    #[test]
    fn without_the_kernels_count_nothing_is_taken() {
        assert_eq!(
            check(&claim(1, 1_000), &[acked(1, 1_000), None]),
            Err(ClaimError::Unverifiable)
        );
        assert_eq!(check(&claim(1, 1_000), &[]), Err(ClaimError::Unverifiable));
    }

    proptest! {
        /// Whatever the server claims, the figure taken is never above what
        /// its kernel acknowledged, and is never NaN or negative.
        #[test]
        fn no_claim_raises_the_figure(
            claimed in any::<u64>(),
            claimed_ms in any::<u32>(),
            streams in prop::collection::vec((any::<u32>(), 0u64..10_000), 1..16),
        ) {
            let streams: Vec<_> = streams.iter().map(|(b, ms)| acked(u64::from(*b), *ms)).collect();
            let ceiling: f64 = streams
                .iter()
                .flatten()
                .filter(|s| !s.over.is_zero())
                .map(|s| s.bytes as f64 * 8.0 / s.over.as_secs_f64())
                .sum();
            if let Ok(own) = check(&claim(claimed, u64::from(claimed_ms)), &streams) {
                prop_assert!(own.goodput_bps.is_finite() && own.goodput_bps >= 0.0);
                prop_assert!(own.goodput_bps <= ceiling * (1.0 + 1e-12));
            }
        }
    }
}
