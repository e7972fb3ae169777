//! Ping timed on the wire: iputils ping's echo requests and replies, each
//! stamped by tcpdump as the sending host's kernel hands it to its device
//! and as the reply comes in, so that the round trip is the network's
//! alone.
//!
//! Why not ping's own figure: ping stamps each request in user space before
//! its send, so its RTT carries the sending host's send path (some 50 us on
//! the loopback of a small VM) and, on a busy machine, however long ping
//! was kept from running between the stamp and the send. The agents stamp
//! both ends in the kernel; so does a capture, which makes it the reference
//! that reads the same thing, by tools nobody here wrote. The parser
//! ([`round_trips`]) is pure; [`WireCapture`] runs tcpdump, one per
//! pinging host for as many pings as it likes: it reads the kernel's
//! capture ring a block at a time, which costs a second's wait at the end.

// Unsafe is allowed here only to send tcpdump SIGINT, the signal it flushes on.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The padding byte of the reference's pings (`ping -p`): the agents' echo
/// requests are of the same size (ping's default, so that rate-limited
/// links hold both alike) but pad with a count, so that the capture tells
/// the two apart by the last four bytes.
pub const PATTERN: &str = "a5";

/// The capture's filter: echo packets whose last four bytes (of ping's
/// default 64) are the pattern's.
const FILTER: &str = "(icmp and icmp[60:4] = 0xa5a5a5a5) or (icmp6 and ip6[100:4] = 0xa5a5a5a5)";

/// How long tcpdump may take to say it is capturing.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// One echo packet as a capture line gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Echo<'l> {
    /// Seconds since the epoch.
    at: f64,
    reply: bool,
    /// The other end: a request's destination, a reply's source.
    peer: &'l str,
    id: u32,
    seq: u32,
}

/// Reads one tcpdump line (`-tt -n`, IPv4 or IPv6, any link type): the
/// echo request or reply of the reference's size it shows, if any.
fn parse_line(line: &str) -> Option<Echo<'_>> {
    let at: f64 = line.split_whitespace().next()?.parse().ok()?;
    let reply = if line.contains("echo reply") {
        true
    } else if line.contains("echo request") {
        false
    } else {
        return None;
    };
    // "... IP SRC > DST: ICMP ..."
    let mut words = line.split_whitespace();
    let src = words.by_ref().skip_while(|w| !w.starts_with("IP")).nth(1)?;
    let dst = words.nth(1)?.strip_suffix(':')?;
    let peer = if reply { src } else { dst };
    let field = |name: &str| -> Option<u32> {
        let rest = line.split(name).nth(1)?;
        rest.trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    Some(Echo {
        at,
        reply,
        peer,
        id: field("id")?,
        seq: field("seq")?,
    })
}

/// The round trips (ms) to `peer` in a capture's output, in the order of
/// the requests: each request's first reply from `peer` with the same
/// identifier and sequence number, after it.
pub fn round_trips(capture: &str, peer: &str) -> Vec<f64> {
    let echoes: Vec<Echo<'_>> = capture
        .lines()
        .filter_map(parse_line)
        .filter(|echo| echo.peer == peer)
        .collect();
    let mut replies: HashMap<(u32, u32), f64> = HashMap::new();
    for echo in echoes.iter().filter(|e| e.reply) {
        replies.entry((echo.id, echo.seq)).or_insert(echo.at);
    }
    echoes
        .iter()
        .filter(|e| !e.reply)
        .filter_map(|request| {
            let reply = replies.get(&(request.id, request.seq))?;
            (*reply >= request.at).then(|| (reply - request.at) * 1e3)
        })
        .collect()
}

/// How long after the last packet a capture waits before it stops: tcpdump
/// reads the kernel's ring a block at a time, and hands over a block that
/// is not full after a second (libpcap's timeout as tcpdump sets it).
const FLUSH: Duration = Duration::from_millis(1_200);

/// A tcpdump capturing the echo packets of a host, started by
/// [`WireCapture::start`].
#[derive(Debug)]
pub struct WireCapture {
    child: Child,
    stdout: std::thread::JoinHandle<String>,
}

impl WireCapture {
    /// Starts `tcpdump` by `command` (in the host's namespace: `ip netns
    /// exec NS tcpdump`) on every interface, with nanosecond stamps;
    /// returns once it captures.
    pub fn start(mut command: Command) -> std::io::Result<Self> {
        let mut child = command
            // Buffered (no --immediate-mode): tcpdump then wakes up once
            // per block of packets, not once per packet, so that it does
            // not compete for the CPU with the packets it times.
            .args(["-i", "any", "-tt", "-n"])
            .args(["--time-stamp-precision=nano", "-Q", "inout"])
            .arg(FILTER)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut stdout = child.stdout.take().expect("piped");
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let stderr = child.stderr.take().expect("piped");
        let (listening, started) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut said = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("listening on") {
                    let _ = listening.send(Ok(()));
                }
                said.push(line);
            }
            let _ = listening.send(Err(said.join("\n")));
        });
        match started.recv_timeout(START_TIMEOUT) {
            Ok(Ok(())) => Ok(Self { child, stdout }),
            Ok(Err(said)) => {
                let _ = child.wait();
                Err(std::io::Error::other(format!(
                    "tcpdump did not start: {said}"
                )))
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(std::io::Error::other("tcpdump did not start in time"))
            }
        }
    }

    /// Waits for the last packets to reach tcpdump, stops it (SIGINT, as a
    /// user would, so that it prints what it has) and returns what it
    /// printed, for [`round_trips`].
    pub fn finish(mut self) -> String {
        std::thread::sleep(FLUSH);
        // SAFETY: kill has no memory effects; the child is ours and not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        self.stdout.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_pair_with_their_replies_and_other_pings_are_left_out() {
        let capture = "\
1796181873.300926141 net1  Out IP 198.18.0.1 > 198.18.1.1: ICMP echo request, id 4107, seq 1, length 64
1796181873.300930000 net1  Out IP 198.18.0.1 > 198.18.1.1: ICMP echo request, id 999, seq 2, length 64
1796181873.301943424 net1  In  IP 198.18.1.1 > 198.18.0.1: ICMP echo reply, id 4107, seq 1, length 64
1796181873.504397315 net1  Out IP 198.18.0.1 > 198.18.1.1: ICMP echo request, id 4107, seq 2, length 64
1796181873.708392331 net1  Out IP6 fd00::1 > fd00::2: ICMP6, echo request, id 7, seq 3, length 64
1796181873.708892331 net1  In  IP6 fd00::2 > fd00::1: ICMP6, echo reply, id 7, seq 3, length 64
1796181873.709 net1  In  IP 198.18.1.1 > 198.18.0.1: ICMP echo reply, id 999, seq 1, length 64
not a line of tcpdump's
";
        let rtts = round_trips(capture, "198.18.1.1");
        // seq 2 had no reply (the one of id 999 is another session's).
        assert_eq!(rtts.len(), 1, "{rtts:?}");
        assert!((rtts[0] - 1.017283).abs() < 1e-3, "{rtts:?}");
        let rtts = round_trips(capture, "fd00::2");
        assert_eq!(rtts.len(), 1, "{rtts:?}");
        assert!((rtts[0] - 0.5).abs() < 1e-3, "{rtts:?}");
        assert!(round_trips(capture, "198.18.0.1").is_empty());
    }

    #[test]
    fn a_reply_before_its_request_is_no_round_trip() {
        let capture = "\
2.0 IP a > b: ICMP echo request, id 1, seq 1, length 64
1.0 IP b > a: ICMP echo reply, id 1, seq 1, length 64
";
        assert!(round_trips(capture, "b").is_empty());
    }
}
