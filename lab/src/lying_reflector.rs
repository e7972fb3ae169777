//! A STAMP reflector that lies, for the lab's tests: it answers every
//! request at once but claims to have held it longer than it did (its
//! receive timestamp set back by `claimed_extra`), so that a prober that
//! took a reflector's word for its hold would see the host closer than it
//! is. Run in a lab host (`netaware lab-forge --lying-reflector PORT`),
//! behind a redirect of the agents' reflector port to it.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, SystemTime};

use netaware_agent::stamp_packet::{self, NtpTime};

/// How long the socket waits for a request before it looks at `stop`.
const POLL: Duration = Duration::from_millis(50);

/// Answers STAMP requests on `port` (IPv6's unspecified address, which
/// takes IPv4 too; IPv4's where the host has no IPv6), each claiming a
/// hold `claimed_extra` longer than the true one, until `stop` says so;
/// returns how many it answered.
pub fn run(port: u16, claimed_extra: Duration, stop: impl Fn() -> bool) -> std::io::Result<u64> {
    let socket = UdpSocket::bind(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| UdpSocket::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))))?;
    socket.set_read_timeout(Some(POLL))?;
    let mut buffer = [0u8; stamp_packet::MAX_LEN + 1];
    let mut answered = 0u64;
    let mut seq = 0u32;
    while !stop() {
        let Ok((len, from)) = socket.recv_from(&mut buffer) else {
            continue;
        };
        let now = SystemTime::now();
        let claimed_arrival = now.checked_sub(claimed_extra).unwrap_or(now);
        let reply = stamp_packet::reflect(
            &buffer[..len],
            seq,
            NtpTime::from_system(claimed_arrival),
            NtpTime::from_system(now),
        );
        if let Some(reply) = reply {
            seq = seq.wrapping_add(1);
            if socket.send_to(&reply, from).is_ok() {
                answered += 1;
            }
        }
    }
    Ok(answered)
}
