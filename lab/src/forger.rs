//! A host that lies, for the lab's tests: it answers ICMP echo requests
//! ahead of time. Run in a lab host (`netaware lab-forge`), it watches the
//! echo requests that reach the host, learns how often each prober sends
//! one, and around the time the next is due sends replies for the next
//! sequence number with the same payload, so that the next probe finds a
//! "reply" waiting the moment it is sent: a prober that matches replies by
//! source and sequence alone would see this host at no distance and
//! without loss. The kernel's own replies still go out as usual.
//!
//! It forges only in a window around each predicted probe, not all the
//! time: a forger that floods would queue the true replies behind its own
//! and make the host look far for a reason that is not the lie under test.

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use netaware_agent::icmp_packet::internet_checksum;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// How far either side of a predicted probe the forged replies go on:
/// wider than the agents' jitter around their slots.
const LEAD: Duration = Duration::from_millis(6);
/// Time between two forged replies to one prober.
const SPACING: Duration = Duration::from_millis(1);

/// What the forger knows of one prober's stream towards this host.
struct Stream {
    next_seq: u16,
    payload: Vec<u8>,
    last_request: Instant,
    /// The gap between its last two requests, once seen.
    gap: Option<Duration>,
}

impl Stream {
    /// Whether `now` is close enough to the next probe to forge for it.
    fn due(&self, now: Instant) -> bool {
        self.gap.is_some_and(|gap| {
            let predicted = self.last_request + gap;
            now + LEAD >= predicted && now <= predicted + LEAD
        })
    }
}

/// Forges replies until `stop` says so; returns how many it sent.
pub fn run(stop: impl Fn() -> bool) -> std::io::Result<u64> {
    let socket = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))?;
    socket.set_read_timeout(Some(SPACING))?;
    let mut streams: HashMap<(Ipv4Addr, u16), Stream> = HashMap::new();
    let mut buffer = [0u8; 2048];
    let mut forged = 0;
    let mut last_sent = Instant::now();
    while !stop() {
        if let Ok(len) = (&socket).read(&mut buffer)
            && let Some((source, ident, seq, payload)) = echo_request(&buffer[..len])
        {
            let now = Instant::now();
            let gap = streams
                .get(&(source, ident))
                .map(|stream| now.duration_since(stream.last_request));
            streams.insert(
                (source, ident),
                Stream {
                    next_seq: seq.wrapping_add(1),
                    payload,
                    last_request: now,
                    gap,
                },
            );
        }
        if last_sent.elapsed() < SPACING {
            continue;
        }
        last_sent = Instant::now();
        for ((prober, ident), stream) in &streams {
            if !stream.due(last_sent) {
                continue;
            }
            let reply = echo_reply(*ident, stream.next_seq, &stream.payload);
            let target = SockAddr::from(SocketAddr::V4(SocketAddrV4::new(*prober, 0)));
            if socket.send_to(&reply, &target).is_ok() {
                forged += 1;
            }
        }
    }
    Ok(forged)
}

/// (source, identifier, sequence, payload) of an IPv4 packet carrying an
/// ICMP echo request.
fn echo_request(packet: &[u8]) -> Option<(Ipv4Addr, u16, u16, Vec<u8>)> {
    let first = *packet.first()?;
    if first >> 4 != 4 {
        return None;
    }
    let header = usize::from(first & 0x0f) * 4;
    let icmp = packet.get(header..)?;
    if icmp.len() < 8 || icmp[0] != 8 {
        return None;
    }
    let source: [u8; 4] = packet.get(12..16)?.try_into().ok()?;
    Some((
        Ipv4Addr::from(source),
        u16::from_be_bytes([icmp[4], icmp[5]]),
        u16::from_be_bytes([icmp[6], icmp[7]]),
        icmp[8..].to_vec(),
    ))
}

/// An echo reply with this identifier, sequence and payload.
fn echo_reply(ident: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
    let mut packet = vec![0u8; 8 + payload.len()];
    packet[4..6].copy_from_slice(&ident.to_be_bytes());
    packet[6..8].copy_from_slice(&seq.to_be_bytes());
    packet[8..].copy_from_slice(payload);
    let checksum = internet_checksum(&packet);
    packet[2..4].copy_from_slice(&checksum.to_be_bytes());
    packet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forged_reply_answers_the_next_sequence_with_the_same_payload() {
        let mut request = vec![0x45u8; 20];
        request[12..16].copy_from_slice(&[198, 18, 1, 1]);
        request.extend_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 7, 0xaa, 0xbb]);
        let (source, ident, seq, payload) = echo_request(&request).unwrap();
        assert_eq!(
            (source, ident, seq, payload.as_slice()),
            (Ipv4Addr::new(198, 18, 1, 1), 0x1234, 7, &[0xaa, 0xbb][..])
        );
        let reply = echo_reply(ident, seq + 1, &payload);
        assert_eq!(&reply[..2], &[0, 0], "an echo reply");
        assert_eq!(&reply[4..8], &[0x12, 0x34, 0, 8]);
        // A packet with its checksum sums to zero.
        let sum: u32 = reply
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        assert_eq!(folded as u16, 0xffff);
        request[20] = 0;
        assert_eq!(echo_request(&request), None, "a reply is not a request");
    }
}
