//! The forwarding thread: reads every packet a host sends into its TUN
//! device, and writes it into the receiving host's device when the pair's
//! [`Link`] says it arrives, or drops it.
//!
//! One OS thread, not a tokio task: it waits with `ppoll` and a nanosecond
//! timeout (with the thread's timer slack set to 1 ns), and spins for the
//! last [`SPIN`] before a packet is due, because a sleeping thread wakes up
//! late. So packets leave within microseconds
//! of their due time; [`Stats`] keeps how late they were. It runs at a
//! real-time priority, ahead of the hosts' processes, as a real link
//! would not wait for their CPU.

// Unsafe is allowed here only for the kernel interface: ppoll over the TUN devices and the timer slack of the forwarding thread.
#![allow(unsafe_code)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::lateness::LinkLateness;
use crate::link::{Drop, Link, Verdict};
use crate::topology::LinkProfile;

/// Longest the thread sleeps before it looks at its control channel.
const IDLE_WAIT: Duration = Duration::from_millis(5);
/// How long before a packet is due the thread stops sleeping and spins: a
/// sleeping thread wakes up some 100 us late on a busy machine, and a
/// virtual machine's vCPU wakes up late even at real-time priority (a
/// 40 us spin left an idle lab's packets 0.3 ms late).
pub const SPIN: Duration = Duration::from_micros(200);
/// Largest packet read from a TUN device.
const MAX_PACKET: usize = 65_536;
/// The forwarding thread's real-time priority: above any host's process
/// (all at normal priority), below the kernel's own threads.
const PRIORITY: libc::c_int = 10;

/// What the emulator has done, counted.
#[derive(Debug)]
pub struct Stats {
    /// Packets delivered.
    pub forwarded: AtomicU64,
    /// Packets dropped by a link's loss.
    pub dropped_loss: AtomicU64,
    /// Packets dropped by a full queue in front of a rate limit.
    pub dropped_queue: AtomicU64,
    /// Packets addressed outside the lab, or neither IPv4 nor IPv6.
    pub dropped_outside: AtomicU64,
    /// Packets that could not be written to their receiver.
    pub write_errors: AtomicU64,
    /// Packets held for a delay, and the sum and maximum of how late they
    /// left after their due time (ns).
    pub delayed: AtomicU64,
    /// Sum of the lateness of delayed packets (ns).
    pub late_ns_total: AtomicU64,
    /// Largest lateness of a delayed packet (ns).
    pub late_ns_max: AtomicU64,
    /// The lateness of each link's delayed packets, link by link.
    pub links: LinkLateness,
}

impl Stats {
    /// Counters for `links` links, all zero.
    fn new(links: usize) -> Self {
        Self {
            forwarded: AtomicU64::new(0),
            dropped_loss: AtomicU64::new(0),
            dropped_queue: AtomicU64::new(0),
            dropped_outside: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            late_ns_total: AtomicU64::new(0),
            late_ns_max: AtomicU64::new(0),
            links: LinkLateness::new(links),
        }
    }

    /// Mean lateness of delayed packets, in microseconds.
    pub fn mean_lateness_us(&self) -> f64 {
        let delayed = self.delayed.load(Relaxed);
        if delayed == 0 {
            0.0
        } else {
            self.late_ns_total.load(Relaxed) as f64 / delayed as f64 / 1e3
        }
    }
}

/// One host's end of the emulator.
#[derive(Debug)]
pub struct Port {
    /// The host's TUN device.
    pub device: File,
    /// The host's addresses (one per family it has).
    pub addresses: Vec<IpAddr>,
}

enum Control {
    Links(Vec<LinkProfile>),
    Stop,
}

/// A running emulator thread.
#[derive(Debug)]
pub struct Emulator {
    control: Sender<Control>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
}

impl Emulator {
    /// Starts forwarding between `ports`; `links[src * n + dst]` is the
    /// profile from port src to port dst.
    pub fn start(ports: Vec<Port>, links: Vec<LinkProfile>) -> std::io::Result<Self> {
        let (control, commands) = mpsc::channel();
        let stats = Arc::new(Stats::new(links.len()));
        let thread_stats = Arc::clone(&stats);
        let thread = std::thread::Builder::new()
            .name("lab-emulator".into())
            .spawn(move || Forwarder::new(ports, &links, thread_stats).run(commands))?;
        Ok(Self {
            control,
            thread: Some(thread),
            stats,
        })
    }

    /// Replaces every link profile (packets on their way keep theirs).
    pub fn set_links(&self, links: Vec<LinkProfile>) {
        let _ = self.control.send(Control::Links(links));
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl std::ops::Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct InFlight {
    due: u64,
    order: u64,
    /// Its link, `src * ports + dst`.
    link: usize,
    port: usize,
    packet: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

struct Forwarder {
    ports: Vec<Port>,
    by_address: HashMap<IpAddr, usize>,
    links: Vec<Link>,
    queue: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    epoch: Instant,
    stats: Arc<Stats>,
}

impl Forwarder {
    fn new(ports: Vec<Port>, profiles: &[LinkProfile], stats: Arc<Stats>) -> Self {
        let by_address = ports
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.addresses.iter().map(move |a| (*a, i)))
            .collect();
        Self {
            links: profiles.iter().map(Link::new).collect(),
            ports,
            by_address,
            queue: BinaryHeap::new(),
            order: 0,
            epoch: Instant::now(),
            stats,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn run(mut self, commands: Receiver<Control>) {
        // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        run_before_the_hosts();
        let mut buffer = vec![0u8; MAX_PACKET];
        let mut polls: Vec<libc::pollfd> = self
            .ports
            .iter()
            .map(|p| libc::pollfd {
                fd: p.device.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        loop {
            loop {
                match commands.try_recv() {
                    Ok(Control::Links(profiles)) => {
                        for (link, profile) in self.links.iter_mut().zip(&profiles) {
                            link.set_profile(profile);
                        }
                    }
                    Ok(Control::Stop) | Err(TryRecvError::Disconnected) => return,
                    Err(TryRecvError::Empty) => break,
                }
            }
            self.deliver_due();
            let wait = self.queue.peek().map_or(IDLE_WAIT, |Reverse(next)| {
                let until_due = Duration::from_nanos(next.due.saturating_sub(self.now()));
                until_due.saturating_sub(SPIN).min(IDLE_WAIT)
            });
            let timeout = libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `polls` is a valid array of pollfd for its length.
            let ready = unsafe {
                libc::ppoll(
                    polls.as_mut_ptr(),
                    polls.len() as libc::nfds_t,
                    &timeout,
                    std::ptr::null(),
                )
            };
            if ready <= 0 {
                continue;
            }
            let readable: Vec<usize> = polls
                .iter()
                .enumerate()
                .filter(|(_, p)| p.revents & libc::POLLIN != 0)
                .map(|(i, _)| i)
                .collect();
            for src in readable {
                self.read_all(src, &mut buffer);
            }
        }
    }

    fn read_all(&mut self, src: usize, buffer: &mut [u8]) {
        loop {
            match self.ports[src].device.read(buffer) {
                Ok(0) => return,
                Ok(len) => self.route(src, &buffer[..len]),
                Err(err) if err.kind() == ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => {
                    tracing::warn!(%err, "reading a lab TUN device");
                    return;
                }
            }
        }
    }

    fn route(&mut self, src: usize, packet: &[u8]) {
        let Some(dst) = destination(packet).and_then(|a| self.by_address.get(&a).copied()) else {
            self.stats.dropped_outside.fetch_add(1, Relaxed);
            return;
        };
        let n = self.ports.len();
        let now = self.now();
        let verdict =
            self.links[src * n + dst].admit(now, packet.len(), rand::random(), rand::random());
        match verdict {
            Verdict::Dropped(Drop::Loss) => {
                self.stats.dropped_loss.fetch_add(1, Relaxed);
            }
            Verdict::Dropped(Drop::QueueFull) => {
                self.stats.dropped_queue.fetch_add(1, Relaxed);
            }
            Verdict::Deliver(due) if due <= now => self.write(dst, packet),
            Verdict::Deliver(due) => {
                self.order += 1;
                self.queue.push(Reverse(InFlight {
                    due,
                    order: self.order,
                    link: src * n + dst,
                    port: dst,
                    packet: packet.to_vec(),
                }));
            }
        }
    }

    fn deliver_due(&mut self) {
        let now = self.now();
        while self
            .queue
            .peek()
            .is_some_and(|Reverse(next)| next.due <= now)
        {
            let Some(Reverse(next)) = self.queue.pop() else {
                break;
            };
            self.count_lateness(next.link, now - next.due);
            self.write(next.port, &next.packet);
        }
    }

    fn count_lateness(&self, link: usize, late_ns: u64) {
        self.stats.links.count(link, late_ns);
        self.stats.delayed.fetch_add(1, Relaxed);
        self.stats.late_ns_total.fetch_add(late_ns, Relaxed);
        self.stats.late_ns_max.fetch_max(late_ns, Relaxed);
    }

    fn write(&mut self, dst: usize, packet: &[u8]) {
        // A TUN device takes a whole packet per write, or nothing.
        match self.ports[dst].device.write_all(packet) {
            Ok(()) => self.stats.forwarded.fetch_add(1, Relaxed),
            Err(_) => self.stats.write_errors.fetch_add(1, Relaxed),
        };
    }
}

/// The destination of an IPv4 or IPv6 packet; `None` for anything else.
/// Puts the forwarding thread ahead of every process the hosts run
/// (SCHED_FIFO at [`PRIORITY`]): a real link does not wait for a CPU, and on
/// two cores shared with a dozen agents, a collector and tcpdump a thread
/// of normal priority is woken up and run up to milliseconds late, which
/// every probe then carries. The kernel still keeps 5% of each core for
/// the rest (`sched_rt_runtime_us`), so a forwarder that spins cannot lock
/// the machine. Without the right (not root), it forwards at normal
/// priority, and says so.
fn run_before_the_hosts() {
    let param = libc::sched_param {
        sched_priority: PRIORITY,
    };
    // SAFETY: sched_setscheduler(0, ..) changes only the calling thread's
    // policy, reading `param` from a valid pointer.
    let result = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if result != 0 {
        eprintln!(
            "lab: the link emulator runs at normal priority ({}): round trips carry the hosts' load",
            std::io::Error::last_os_error()
        );
    }
}

fn destination(packet: &[u8]) -> Option<IpAddr> {
    match packet.first()? >> 4 {
        4 => {
            let octets: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
            Some(IpAddr::V4(Ipv4Addr::from(octets)))
        }
        6 => {
            let octets: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(octets)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ipv4_and_ipv6_destinations_only() {
        let mut packet = [0u8; 40];
        packet[0] = 0x45;
        packet[16..20].copy_from_slice(&[198, 18, 1, 2]);
        assert_eq!(
            destination(&packet),
            Some(IpAddr::V4(Ipv4Addr::new(198, 18, 1, 2)))
        );
        assert_eq!(destination(&packet[..19]), None);
        packet[0] = 0x60;
        let v6 = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2);
        packet[24..40].copy_from_slice(&v6.octets());
        assert_eq!(destination(&packet), Some(IpAddr::V6(v6)));
        assert_eq!(destination(&packet[..39]), None);
        packet[0] = 0x50;
        assert_eq!(destination(&packet), None);
        assert_eq!(destination(&[]), None);
    }
}
