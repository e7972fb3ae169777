//! STAMP test packets (RFC 8762, unauthenticated mode), pure: the probe an
//! agent sends over UDP, the reply a reflector sends back, and the NTP
//! timestamps both carry.
//!
//! The sender's packet carries a sequence number and a send timestamp;
//! the reflector copies both into its reply beside its own receive and
//! send timestamps. The agent makes both unguessable: the sequence number
//! is random per probe, and the low bits of the timestamp (below a quarter
//! of a microsecond, under the error the packet states) are random too, so
//! a reply is matched by these 42 random bits and the exact send time, and
//! nobody can answer a probe before it has seen it. Any STAMP reflector
//! (a switch's or a router's) answers the same probes; the agent's own
//! reflector is in [`crate::reflector`].
//!
//! The reflector's two timestamps say how long it held the probe; the
//! prober takes that out of the round trip, bounded (see
//! [`MAX_HOLD_TAKEN_OUT`]), since it is the reflector's claim.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bytes of a STAMP test packet without TLVs, sender's and reflector's alike.
pub const BASE_LEN: usize = 44;
/// The longest request a reflector answers: the base packet and RFC 8972
/// TLVs, which the reply carries back (so a reply is never longer than
/// its request).
pub const MAX_LEN: usize = 1_024;
/// The most of a reflector's claimed hold that a probe's RTT is reduced
/// by: an agent's reflector holds a probe for tens of microseconds; one
/// that claims more is either loaded (the rest then stays in its RTT) or
/// lying, and can make itself look at most this much closer.
pub const MAX_HOLD_TAKEN_OUT: Duration = Duration::from_micros(250);
/// Random low bits of the sender's timestamp fraction (2^-32 s each).
const RANDOM_TIMESTAMP_BITS: u32 = 10;
/// Seconds from the NTP epoch (1900) to the Unix epoch (1970).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;
/// Error estimate (RFC 4656 section 4.1.2): not synchronised, NTP format,
/// scale 12 and multiplier 1, about a microsecond.
const ERROR_ESTIMATE: [u8; 2] = [0x0c, 0x01];

/// An NTP timestamp (RFC 5905): seconds since 1900 and a 32-bit fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NtpTime(pub u64);

impl NtpTime {
    /// The NTP form of `at` (times before 1970 count as 1970).
    pub fn from_system(at: SystemTime) -> Self {
        let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        let seconds = since.as_secs() + NTP_UNIX_OFFSET;
        let fraction = (u64::from(since.subsec_nanos()) << 32) / 1_000_000_000;
        Self((seconds << 32) | fraction)
    }

    /// The time from `earlier` to this one; `None` when it is earlier.
    pub fn since(self, earlier: NtpTime) -> Option<Duration> {
        let ticks = self.0.checked_sub(earlier.0)?;
        let nanos = (u128::from(ticks) * 1_000_000_000) >> 32;
        Some(Duration::from_nanos(u64::try_from(nanos).ok()?))
    }

    fn read(bytes: &[u8]) -> Option<Self> {
        Some(Self(u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?)))
    }
}

/// What makes a probe unguessable: its sequence number and the exact
/// timestamp it carried, both of which its reply must carry back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProbeId {
    /// The random sequence number.
    pub seq: u32,
    /// The send timestamp, its low bits random.
    pub sent: NtpTime,
}

/// A sender's test packet sent at `at`, with `seq` and `random` (only the
/// low bits of which are used) making it unguessable; and the id its reply
/// must carry back.
pub fn request(seq: u32, at: SystemTime, random: u32) -> ([u8; BASE_LEN], ProbeId) {
    let mask = (1u64 << RANDOM_TIMESTAMP_BITS) - 1;
    let sent = NtpTime((NtpTime::from_system(at).0 & !mask) | (u64::from(random) & mask));
    let mut packet = [0u8; BASE_LEN];
    packet[0..4].copy_from_slice(&seq.to_be_bytes());
    packet[4..12].copy_from_slice(&sent.0.to_be_bytes());
    packet[12..14].copy_from_slice(&ERROR_ESTIMATE);
    (packet, ProbeId { seq, sent })
}

/// The reflector's reply to `request`, received at `received` and sent at
/// `sending`, numbered `seq` by the reflector; `None` for a packet that is
/// not a STAMP request (too short or too long). RFC 8972 TLVs after the
/// base packet are carried back as they came.
pub fn reflect(request: &[u8], seq: u32, received: NtpTime, sending: NtpTime) -> Option<Vec<u8>> {
    if !(BASE_LEN..=MAX_LEN).contains(&request.len()) {
        return None;
    }
    let mut reply = vec![0u8; request.len()];
    reply[0..4].copy_from_slice(&seq.to_be_bytes());
    reply[4..12].copy_from_slice(&sending.0.to_be_bytes());
    reply[12..14].copy_from_slice(&ERROR_ESTIMATE);
    // The sender's SSID (RFC 8972) goes back in the same place.
    reply[14..16].copy_from_slice(&request[14..16]);
    reply[16..24].copy_from_slice(&received.0.to_be_bytes());
    // The sender's sequence number, timestamp and error estimate.
    reply[24..38].copy_from_slice(&request[0..14]);
    reply[BASE_LEN..].copy_from_slice(&request[BASE_LEN..]);
    Some(reply)
}

/// What a reflector's reply says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// The probe it answers, as the reply carries it back.
    pub id: ProbeId,
    /// How long the reflector says it held the probe; `None` when its send
    /// time is before its receive time.
    pub hold: Option<Duration>,
}

/// A reflector's reply; `None` for anything too short to be one.
pub fn parse_reply(reply: &[u8]) -> Option<Reply> {
    if reply.len() < BASE_LEN {
        return None;
    }
    let sending = NtpTime::read(&reply[4..12])?;
    let received = NtpTime::read(&reply[16..24])?;
    let seq = u32::from_be_bytes(reply[24..28].try_into().ok()?);
    let sent = NtpTime::read(&reply[28..36])?;
    Some(Reply {
        id: ProbeId { seq, sent },
        hold: sending.since(received),
    })
}

/// The round trip of a probe sent at `sent` whose reply arrived at
/// `arrived`, less the hold the reflector claims, taken out up to
/// [`MAX_HOLD_TAKEN_OUT`] and never past the raw round trip; and how much
/// of the claim was left in it (zero when it was taken out whole).
pub fn round_trip(
    sent: SystemTime,
    arrived: SystemTime,
    hold: Option<Duration>,
) -> (Duration, Duration) {
    let raw = arrived.duration_since(sent).unwrap_or_default();
    let claimed = hold.unwrap_or_default();
    let taken = claimed.min(MAX_HOLD_TAKEN_OUT).min(raw);
    (raw - taken, claimed - taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(nanos: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(nanos)
    }

    #[test]
    fn ntp_time_counts_from_1900_and_differences_are_exact_to_a_nanosecond() {
        let t = NtpTime::from_system(at(0));
        assert_eq!(t.0 >> 32, NTP_UNIX_OFFSET);
        let later = NtpTime::from_system(at(1_500_000_123));
        let d = later.since(t).unwrap();
        assert!(d.as_nanos().abs_diff(1_500_000_123) <= 1, "{d:?}");
        assert_eq!(t.since(later), None);
    }

    #[test]
    fn a_reply_carries_the_probe_back_with_the_reflectors_hold() {
        let sent = at(1_700_000_000_000_000_000);
        let (request, id) = request(0xdead_beef, sent, 0x3ff);
        assert_eq!(id.sent.0 & 0x3ff, 0x3ff);
        assert!(id.sent.since(NtpTime::from_system(sent)).unwrap() < Duration::from_nanos(300));
        let received = NtpTime::from_system(at(1_700_000_000_000_100_000));
        let sending = NtpTime::from_system(at(1_700_000_000_000_130_000));
        let reply = reflect(&request, 7, received, sending).unwrap();
        assert_eq!(reply.len(), BASE_LEN);
        let parsed = parse_reply(&reply).unwrap();
        assert_eq!(parsed.id, id);
        let hold = parsed.hold.unwrap();
        assert!(hold.as_nanos().abs_diff(30_000) <= 1, "{hold:?}");
        // Too short or too long is no request; TLVs come back as they went.
        assert_eq!(reflect(&request[..40], 1, received, sending), None);
        assert_eq!(reflect(&[0; MAX_LEN + 1], 1, received, sending), None);
        let mut with_tlv = request.to_vec();
        with_tlv.extend_from_slice(&[1, 0, 0, 4, 9, 9, 9, 9]);
        let reply = reflect(&with_tlv, 1, received, sending).unwrap();
        assert_eq!(&reply[BASE_LEN..], &with_tlv[BASE_LEN..]);
        assert_eq!(parse_reply(&reply[..43]), None);
    }

    #[test]
    fn a_claimed_hold_is_taken_out_only_up_to_its_bound() {
        let (sent, back) = (at(1_000_000), at(1_000_000 + 400_000));
        let us = Duration::from_micros;
        assert_eq!(round_trip(sent, back, Some(us(30))), (us(370), us(0)));
        assert_eq!(round_trip(sent, back, None), (us(400), us(0)));
        // A liar's hold of the whole round trip shaves off the bound only.
        assert_eq!(round_trip(sent, back, Some(us(400))), (us(150), us(150)));
        // Never below zero (a hold longer than the round trip is cut), and
        // a reply before its probe counts as zero.
        assert_eq!(
            round_trip(sent, at(1_100_000), Some(us(200))),
            (us(0), us(100))
        );
        assert_eq!(round_trip(back, sent, None), (us(0), us(0)));
    }

    proptest! {
        /// No bytes from the network make the parser or the reflector panic,
        /// and a reply is never longer than its request.
        #[test]
        fn any_bytes_are_safe(bytes in prop::collection::vec(any::<u8>(), 0..1_100)) {
            let _ = parse_reply(&bytes);
            if let Some(reply) = reflect(&bytes, 1, NtpTime(1), NtpTime(2)) {
                prop_assert_eq!(reply.len(), bytes.len());
            }
        }
    }
}
