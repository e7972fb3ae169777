//! ICMP echo with kernel receive timestamps: one socket per address family,
//! shared by every probe of the agent.
//!
//! Why not surge-ping, which the first version used: it takes the reply's
//! time when its tokio task gets to read the packet, so every RTT carries
//! the time it takes to wake the agent up. On the lab that was +0.05 ms on
//! 0.2 ms links and +0.13 ms on 5 to 30 ms links, measured against iputils
//! ping (BENCHMARKS.md). Here the kernel stamps each reply as it arrives
//! (SO_TIMESTAMPNS, as ping does), and the request is stamped just before
//! it is sent, while the agent is awake anyway.
//!
//! Each request carries a random nonce in its payload, which its reply
//! must carry back: a reply is the probe's only when it comes from the
//! probed address with the probe's sequence number and nonce, stamped
//! after the probe left. Anything else is refused and counted
//! ([`crate::replies`]): a reply nobody can send before it has seen the
//! request, so that no node can answer ahead of the probes and look closer
//! than it is.
//!
//! Raw sockets need CAP_NET_RAW; without it the unprivileged datagram ICMP
//! socket is used, which Linux allows only to the groups in
//! `net.ipv4.ping_group_range` (the kernel then picks the identifier). A
//! raw socket receives every ICMP packet the host gets, so a classic BPF
//! filter in the kernel passes only echo replies carrying this agent's
//! identifier: the agent never wakes up for the rest.

// Unsafe is allowed here only for the kernel interface: recvmsg with control messages (the kernel's receive timestamps) and registering raw sockets with tokio.
#![allow(unsafe_code)]

use std::io::{self, ErrorKind};
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use crate::AgentError;
use crate::counters::Counters;
use crate::icmp_packet::{
    Family, echo_reply_filter, echo_request, ipv4_header_len, parse_echo_reply,
};
use crate::replies::{Outstanding, Verdict};

/// SO_TIMESTAMPNS and its control message type (include/uapi/asm-generic/socket.h).
const SO_TIMESTAMPNS: libc::c_int = 35;

/// What a single probe can end in besides a reply.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No reply within the timeout: counted as loss.
    #[error("no reply within the timeout")]
    Timeout,
    /// The probe could not be sent (counted as loss too).
    #[error("probe failed: {0}")]
    Failed(String),
}

type Pending = Mutex<Outstanding<(IpAddr, u16), oneshot::Sender<SystemTime>>>;

/// One ICMP socket, its receive task and the probes waiting for replies.
#[derive(Debug)]
struct EchoSocket {
    socket: AsyncFd<Socket>,
    family: Family,
    /// Raw sockets see IPv4 headers and need our identifier checked;
    /// datagram ICMP sockets get only their own replies, without header.
    raw: bool,
    pending: Pending,
}

/// The agent's ICMP sockets.
#[derive(Debug)]
pub struct Icmp {
    v4: Arc<EchoSocket>,
    v6: Option<Arc<EchoSocket>>,
    ident: u16,
    receivers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Icmp {
    fn drop(&mut self) {
        for receiver in &self.receivers {
            receiver.abort();
        }
    }
}

impl Icmp {
    /// Opens the sockets, bound to the agent's own addresses when given so
    /// that probes leave from the address peers know the agent by.
    /// Read errors count in `counters`.
    pub fn open(
        bind_v4: Option<Ipv4Addr>,
        bind_v6: Option<Ipv6Addr>,
        counters: Arc<Counters>,
    ) -> Result<Self, AgentError> {
        let ident: u16 = rand::random();
        let v4 = EchoSocket::open(Family::V4, bind_v4.map(IpAddr::V4), ident)
            .map(Arc::new)
            .map_err(AgentError::IcmpSocket)?;
        let v6 = match EchoSocket::open(Family::V6, bind_v6.map(IpAddr::V6), ident) {
            Ok(socket) => Some(Arc::new(socket)),
            Err(err) => {
                tracing::warn!(%err, "no IPv6 ICMP socket; IPv6 peers will count as lost");
                None
            }
        };
        let mut receivers = vec![tokio::spawn(receive(
            Arc::clone(&v4),
            ident,
            Arc::clone(&counters),
        ))];
        if let Some(v6) = &v6 {
            receivers.push(tokio::spawn(receive(Arc::clone(v6), ident, counters)));
        }
        Ok(Self {
            v4,
            v6,
            ident,
            receivers,
        })
    }

    /// Sends one echo request and waits for its reply; the RTT runs from
    /// just before the send to the kernel's receive timestamp.
    pub async fn probe(
        &self,
        host: IpAddr,
        seq: u16,
        timeout: Duration,
    ) -> Result<Duration, ProbeError> {
        let socket = match host {
            IpAddr::V4(_) => &self.v4,
            IpAddr::V6(_) => self
                .v6
                .as_ref()
                .ok_or_else(|| ProbeError::Failed("no IPv6 socket".into()))?,
        };
        let (tx, rx) = oneshot::channel();
        let nonce: u64 = rand::random();
        let packet = echo_request(socket.family, self.ident, seq, nonce);
        let target = SockAddr::from(SocketAddr::new(host, 0));
        // The probe waits before it leaves (its reply may come back before
        // this task runs again), stamped for the early check no later
        // than it leaves; the RTT starts after the map, at the send.
        lock(&socket.pending).insert((host, seq), nonce, SystemTime::now(), tx);
        let sent_at = SystemTime::now();
        let sent = socket
            .socket
            .async_io(Interest::WRITABLE, |s| s.send_to(&packet, &target))
            .await;
        if let Err(err) = sent {
            lock(&socket.pending).forget(&(host, seq));
            return Err(ProbeError::Failed(err.to_string()));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(received_at)) => Ok(received_at.duration_since(sent_at).unwrap_or_default()),
            Ok(Err(_)) => Err(ProbeError::Failed("receiver stopped".into())),
            Err(_) => {
                lock(&socket.pending).expire(&(host, seq));
                Err(ProbeError::Timeout)
            }
        }
    }
}

fn lock(
    pending: &Pending,
) -> std::sync::MutexGuard<'_, Outstanding<(IpAddr, u16), oneshot::Sender<SystemTime>>> {
    // A panic while holding this lock leaves the map usable.
    pending
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Which ICMP echo socket this process may open, as the agent opens them:
/// raw (needs CAP_NET_RAW) or else datagram (needs the process's group in
/// `net.ipv4.ping_group_range`).
#[derive(Debug)]
pub enum EchoAccess {
    /// A raw socket.
    Raw,
    /// A datagram socket; the raw one was refused.
    Datagram {
        /// Why the raw socket was refused.
        raw_refused: io::Error,
    },
    /// Neither: the agent cannot probe.
    Neither {
        /// Why the raw socket was refused.
        raw_refused: io::Error,
        /// Why the datagram socket was refused.
        datagram_refused: io::Error,
    },
}

/// What the agent's echo sockets would get for `family`, without keeping one.
pub fn echo_access(family: Family) -> EchoAccess {
    match new_echo_socket(family) {
        Ok((_, None)) => EchoAccess::Raw,
        Ok((_, Some(raw_refused))) => EchoAccess::Datagram { raw_refused },
        Err((raw_refused, datagram_refused)) => EchoAccess::Neither {
            raw_refused,
            datagram_refused,
        },
    }
}

/// A raw ICMP socket (with no error), or else a datagram one (with why the
/// raw one was refused); both errors when neither opens.
fn new_echo_socket(family: Family) -> Result<(Socket, Option<io::Error>), (io::Error, io::Error)> {
    let (domain, protocol) = match family {
        Family::V4 => (Domain::IPV4, Protocol::ICMPV4),
        Family::V6 => (Domain::IPV6, Protocol::ICMPV6),
    };
    match Socket::new(domain, Type::RAW, Some(protocol)) {
        Ok(socket) => Ok((socket, None)),
        Err(raw_err) => match Socket::new(domain, Type::DGRAM, Some(protocol)) {
            Ok(socket) => Ok((socket, Some(raw_err))),
            Err(dgram_err) => Err((raw_err, dgram_err)),
        },
    }
}

impl EchoSocket {
    fn open(family: Family, bind: Option<IpAddr>, ident: u16) -> io::Result<Self> {
        let (socket, raw_refused) = new_echo_socket(family).map_err(|(raw_err, _)| raw_err)?;
        let raw = raw_refused.is_none();
        if let Some(ip) = bind {
            socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
        }
        if raw {
            socket.attach_filter(&echo_reply_filter(family, ident))?;
        }
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads an int from a valid pointer for its size.
        let result = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        socket.set_nonblocking(true)?;
        // SAFETY: the socket owns its descriptor, which stays open and the
        // same for as long as the AsyncFd that owns the socket.
        let socket = unsafe {
            AsyncFd::register_with_interest(socket, Interest::READABLE | Interest::WRITABLE)
        }
        .map_err(io::Error::from)?;
        Ok(Self {
            socket,
            family,
            raw,
            pending: Mutex::new(Outstanding::default()),
        })
    }
}

/// Reads replies and hands each, with its kernel timestamp, to its probe.
async fn receive(socket: Arc<EchoSocket>, ident: u16, counters: Arc<Counters>) {
    let mut buffer = [0u8; 2048];
    loop {
        let received = socket
            .socket
            .async_io(Interest::READABLE, |s| recv_with_timestamp(s, &mut buffer))
            .await;
        let (len, from, stamped) = match received {
            Ok(received) => received,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => {
                counters.receive_error();
                tracing::warn!(%err, "reading ICMP replies");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let header = if socket.raw && socket.family == Family::V4 {
            ipv4_header_len(&buffer[..len])
        } else {
            Some(0)
        };
        let Some(reply) = header.and_then(|h| buffer.get(h..len)) else {
            continue;
        };
        let Some(reply) = parse_echo_reply(reply, socket.family) else {
            continue;
        };
        // Datagram sockets only ever see their own replies, under the
        // identifier the kernel picked.
        if socket.raw && reply.ident != ident {
            continue;
        }
        let received_at = stamped.unwrap_or_else(SystemTime::now);
        let verdict = lock(&socket.pending).answer(&(from, reply.seq), reply.nonce, received_at);
        match verdict {
            Verdict::Answered(waiter) => {
                let _ = waiter.send(received_at);
            }
            Verdict::Refused(reason) => counters.reply_refused(reason),
        }
    }
}

/// recvmsg: the packet, its source, and the kernel's receive timestamp.
fn recv_with_timestamp(
    socket: &Socket,
    buffer: &mut [u8],
) -> io::Result<(usize, IpAddr, Option<SystemTime>)> {
    let mut name = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut control = [0u8; 128];
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: an all-zero msghdr is valid; its pointers are set below to
    // buffers that outlive the call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_name = name.as_mut_ptr().cast();
    message.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = control.len() as _;
    // SAFETY: every buffer in `message` is valid for writing for its length.
    let len = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, 0) };
    if len < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the storage was zeroed and the kernel wrote a sockaddr of the
    // family it names into it; each family's struct fits in the storage.
    let from = unsafe {
        let storage = name.assume_init();
        match libc::c_int::from(storage.ss_family) {
            libc::AF_INET => {
                let v4: libc::sockaddr_in =
                    std::ptr::read_unaligned((&storage as *const libc::sockaddr_storage).cast());
                IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                let v6: libc::sockaddr_in6 =
                    std::ptr::read_unaligned((&storage as *const libc::sockaddr_storage).cast());
                IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr))
            }
            _ => return Err(io::Error::other("reply from an address that is not IP")),
        }
    };
    let mut stamped = None;
    // SAFETY: walking the control messages the kernel wrote into `control`,
    // with the kernel's own CMSG macros; the data of SCM_TIMESTAMPNS is a
    // struct timespec, read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&message);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                stamped = Some(UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            cmsg = libc::CMSG_NXTHDR(&message, cmsg);
        }
    }
    Ok((len as usize, from, stamped))
}
