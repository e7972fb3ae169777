//! ICMP echo packets and the kernel filters that pick them out, pure:
//! building echo requests, reading echo replies (the probes) and echo
//! requests (what peers send this node), and the classic BPF programs that
//! raw sockets attach so that the agent wakes up only for those.
//!
//! [`crate::icmp`] (the probes) and [`crate::inbound`] (one-way loss) are
//! the socket shells around it.

use std::net::Ipv4Addr;

use socket2::SockFilter;

/// Bytes of payload per echo request, as ping(8) sends by default: the
/// probe's nonce first, then a fixed pattern.
const PAYLOAD_LEN: usize = 56;
/// Bytes of the nonce at the start of the payload.
const NONCE_LEN: usize = 8;
/// ICMPv4 echo request and reply types (RFC 792).
const ICMPV4_ECHO_REQUEST: u8 = 8;
const ICMPV4_ECHO_REPLY: u8 = 0;
/// ICMPv6 echo request and reply types (RFC 4443).
const ICMPV6_ECHO_REQUEST: u8 = 128;
const ICMPV6_ECHO_REPLY: u8 = 129;
/// Where an IPv4 header keeps the source and destination addresses.
const IPV4_SOURCE: usize = 12;
const IPV4_DESTINATION: usize = 16;

/// The address family of a socket and its packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4 and ICMPv4.
    V4,
    /// IPv6 and ICMPv6.
    V6,
}

impl Family {
    fn echo_request(self) -> u8 {
        match self {
            Family::V4 => ICMPV4_ECHO_REQUEST,
            Family::V6 => ICMPV6_ECHO_REQUEST,
        }
    }

    fn echo_reply(self) -> u8 {
        match self {
            Family::V4 => ICMPV4_ECHO_REPLY,
            Family::V6 => ICMPV6_ECHO_REPLY,
        }
    }
}

/// The length of the IPv4 header that starts `packet`; `None` when it is
/// not one.
pub fn ipv4_header_len(packet: &[u8]) -> Option<usize> {
    let first = *packet.first()?;
    (first >> 4 == 4).then_some(usize::from(first & 0x0f) * 4)
}

/// What an echo reply carries back of its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoReply {
    /// The identifier.
    pub ident: u16,
    /// The sequence number.
    pub seq: u16,
    /// The request's nonce, when the payload is long enough to hold one.
    pub nonce: Option<u64>,
}

/// The identifier, sequence and nonce of an echo reply; `None` for
/// anything else.
pub fn parse_echo_reply(icmp: &[u8], family: Family) -> Option<EchoReply> {
    if icmp.len() < 8 || icmp[0] != family.echo_reply() || icmp[1] != 0 {
        return None;
    }
    let nonce = icmp
        .get(8..8 + NONCE_LEN)
        .and_then(|bytes| bytes.try_into().ok())
        .map(u64::from_be_bytes);
    Some(EchoReply {
        ident: u16::from_be_bytes([icmp[4], icmp[5]]),
        seq: u16::from_be_bytes([icmp[6], icmp[7]]),
        nonce,
    })
}

/// (source, identifier, sequence) of an IPv4 packet carrying an ICMP echo
/// request addressed to `local`; `None` for anything else.
pub fn parse_echo_request(packet: &[u8], local: Ipv4Addr) -> Option<(Ipv4Addr, u16, u16)> {
    let header = ipv4_header_len(packet)?;
    let icmp = packet.get(header..header + 8)?;
    let address = |at: usize| -> Option<Ipv4Addr> {
        let octets: [u8; 4] = packet.get(at..at + 4)?.try_into().ok()?;
        Some(Ipv4Addr::from(octets))
    };
    if icmp[0] != ICMPV4_ECHO_REQUEST || address(IPV4_DESTINATION)? != local {
        return None;
    }
    Some((
        address(IPV4_SOURCE)?,
        u16::from_be_bytes([icmp[4], icmp[5]]),
        u16::from_be_bytes([icmp[6], icmp[7]]),
    ))
}

/// An echo request carrying `nonce`, which its reply must carry back (a
/// peer echoes the payload): a reply nobody can send before it has seen
/// the request. The IPv4 checksum is ours to compute; for ICMPv6 the
/// kernel fills it in (it covers a pseudo-header only the kernel knows).
pub fn echo_request(family: Family, ident: u16, seq: u16, nonce: u64) -> Vec<u8> {
    let mut packet = vec![0u8; 8 + PAYLOAD_LEN];
    packet[0] = family.echo_request();
    packet[4..6].copy_from_slice(&ident.to_be_bytes());
    packet[6..8].copy_from_slice(&seq.to_be_bytes());
    for (i, byte) in packet[8 + NONCE_LEN..].iter_mut().enumerate() {
        *byte = i as u8;
    }
    packet[8..8 + NONCE_LEN].copy_from_slice(&nonce.to_be_bytes());
    if family == Family::V4 {
        let checksum = internet_checksum(&packet);
        packet[2..4].copy_from_slice(&checksum.to_be_bytes());
    }
    packet
}

/// The RFC 1071 checksum (the one ICMPv4 carries).
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

// Classic BPF opcodes (linux/filter.h).
const BPF_LD_W_ABS: u16 = 0x20; // A = P[k], four bytes, network order
const BPF_LDX_B_MSH: u16 = 0xb1; // X = 4 * (P[k] & 0xf): the IPv4 header length
const BPF_LDX_IMM: u16 = 0x01; // X = k
const BPF_LD_B_IND: u16 = 0x50; // A = P[X + k], one byte
const BPF_LD_H_IND: u16 = 0x48; // A = P[X + k], two bytes, network order
const BPF_JEQ_K: u16 = 0x15; // if A == k skip jt else skip jf
const BPF_RET_K: u16 = 0x06; // accept k bytes (0 drops)

/// A filter that passes only echo replies with identifier `ident`.
/// IPv4 raw sockets see the IP header first; IPv6 ones start at ICMPv6.
pub fn echo_reply_filter(family: Family, ident: u16) -> Vec<SockFilter> {
    let header = match family {
        Family::V4 => SockFilter::new(BPF_LDX_B_MSH, 0, 0, 0),
        Family::V6 => SockFilter::new(BPF_LDX_IMM, 0, 0, 0),
    };
    vec![
        header,
        SockFilter::new(BPF_LD_B_IND, 0, 0, 0),
        SockFilter::new(BPF_JEQ_K, 0, 3, u32::from(family.echo_reply())),
        SockFilter::new(BPF_LD_H_IND, 0, 0, 4),
        SockFilter::new(BPF_JEQ_K, 0, 1, u32::from(ident)),
        SockFilter::new(BPF_RET_K, 0, 0, 0xffff),
        SockFilter::new(BPF_RET_K, 0, 0, 0),
    ]
}

/// A filter that passes only ICMP echo requests addressed to `local`, so
/// that the agent does not wake up for requests to other addresses of the
/// host (on loopback, every other agent's). IPv4 raw sockets see the IP
/// header first.
pub fn echo_request_filter(local: Ipv4Addr) -> Vec<SockFilter> {
    vec![
        SockFilter::new(BPF_LD_W_ABS, 0, 0, IPV4_DESTINATION as u32),
        SockFilter::new(BPF_JEQ_K, 0, 4, u32::from(local)),
        SockFilter::new(BPF_LDX_B_MSH, 0, 0, 0),
        SockFilter::new(BPF_LD_B_IND, 0, 0, 0),
        SockFilter::new(BPF_JEQ_K, 0, 1, u32::from(ICMPV4_ECHO_REQUEST)),
        SockFilter::new(BPF_RET_K, 0, 0, 0xffff),
        SockFilter::new(BPF_RET_K, 0, 0, 0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_requests_carry_a_valid_checksum() {
        let packet = echo_request(Family::V4, 0xbeef, 7, 0x0102_0304_0506_0708);
        assert_eq!(&packet[..2], &[8, 0]);
        assert_eq!(
            internet_checksum(&packet),
            0,
            "a packet with its checksum sums to zero"
        );
        assert_eq!(
            parse_echo_reply(&packet, Family::V4),
            None,
            "a request is not a reply"
        );
        let mut reply = packet.clone();
        reply[0] = 0;
        assert_eq!(
            parse_echo_reply(&reply, Family::V4),
            Some(EchoReply {
                ident: 0xbeef,
                seq: 7,
                nonce: Some(0x0102_0304_0506_0708)
            })
        );
        // A reply that carries no payload carries no nonce.
        assert_eq!(
            parse_echo_reply(&reply[..8], Family::V4).map(|r| r.nonce),
            Some(None)
        );
        assert_eq!(echo_request(Family::V6, 1, 2, 3)[0], 128);
    }

    #[test]
    fn checksum_of_known_data() {
        // RFC 1071's example bytes.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(internet_checksum(&data), !0xddf2);
        assert_eq!(internet_checksum(&[0xff]), !0xff00);
    }

    #[test]
    fn ipv4_header_lengths() {
        assert_eq!(ipv4_header_len(&[0x45]), Some(20));
        assert_eq!(ipv4_header_len(&[0x46]), Some(24));
        assert_eq!(ipv4_header_len(&[0x60]), None);
        assert_eq!(ipv4_header_len(&[]), None);
    }

    #[test]
    fn parses_requests_to_this_node_only() {
        let local = Ipv4Addr::new(198, 18, 1, 2);
        let mut packet = vec![0u8; 28];
        packet[0] = 0x45;
        packet[12..16].copy_from_slice(&[198, 18, 2, 1]);
        packet[16..20].copy_from_slice(&local.octets());
        packet[20] = 8;
        packet[24..26].copy_from_slice(&0x1234u16.to_be_bytes());
        packet[26..28].copy_from_slice(&5u16.to_be_bytes());
        assert_eq!(
            parse_echo_request(&packet, local),
            Some((Ipv4Addr::new(198, 18, 2, 1), 0x1234, 5))
        );
        assert_eq!(
            parse_echo_request(&packet, Ipv4Addr::new(198, 18, 1, 3)),
            None
        );
        packet[20] = 0;
        assert_eq!(parse_echo_request(&packet, local), None);
        assert_eq!(parse_echo_request(&packet[..22], local), None);
    }
}
