//! Sockets whose packets the kernel stamps as they arrive: turning the
//! stamps on (SO_TIMESTAMPNS, as ping does), registering the socket with
//! tokio, and reading a packet with its source and stamp (recvmsg and its
//! control messages). The ICMP prober, the UDP prober and the UDP
//! reflector all read this way, so that none of their times carries the
//! delay of waking the agent up. Sends are stamped by the kernel too
//! ([`StampedSends`], SO_TIMESTAMPING), so that a probe's time does not
//! carry the delay of a busy node between its stamp and its send either.

// Unsafe is allowed here only for the kernel interface: setsockopt, recvmsg with control messages, and registering raw sockets with tokio.
#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::ControlFlow;
use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use socket2::Socket;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// SO_TIMESTAMPNS and its control message type (include/uapi/asm-generic/socket.h).
const SO_TIMESTAMPNS: libc::c_int = 35;

/// Turns on the kernel's receive stamps, makes the socket non-blocking and
/// registers it with tokio for reading and writing.
pub fn register(socket: Socket) -> io::Result<AsyncFd<Socket>> {
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
    unsafe { AsyncFd::register_with_interest(socket, Interest::READABLE | Interest::WRITABLE) }
        .map_err(io::Error::from)
}

/// recvmsg: the packet, its source, and the kernel's receive timestamp
/// (`None` where the kernel gave none).
pub fn recv(
    socket: &Socket,
    buffer: &mut [u8],
) -> io::Result<(usize, SocketAddr, Option<SystemTime>)> {
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
                SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr))),
                    u16::from_be(v4.sin_port),
                )
            }
            libc::AF_INET6 => {
                let v6: libc::sockaddr_in6 =
                    std::ptr::read_unaligned((&storage as *const libc::sockaddr_storage).cast());
                SocketAddr::new(
                    IpAddr::V6(Ipv6Addr::from(v6.sin6_addr.s6_addr)),
                    u16::from_be(v6.sin6_port),
                )
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

/// SO_TIMESTAMPING, also the type of its control message (SCM_TIMESTAMPING).
const SO_TIMESTAMPING: libc::c_int = 37;
/// Stamp each packet as the kernel hands it to the device
/// (include/uapi/linux/net_tstamp.h).
const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
/// Report software stamps.
const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
/// Queue the stamp alone, without a copy of the packet.
const SOF_TIMESTAMPING_OPT_TSONLY: u32 = 1 << 11;

/// Asks the kernel to stamp every packet `socket` sends as it hands it to
/// the device, and to queue the stamps on the socket's error queue
/// ([`sent_stamps`] reads them).
pub fn stamp_sends(socket: &Socket) -> io::Result<()> {
    set_timestamping(socket, STAMP_SENDS)
}

/// What [`stamp_sends`] asks for.
const STAMP_SENDS: u32 =
    SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY;

fn set_timestamping(socket: &Socket, flags: u32) -> io::Result<()> {
    // SAFETY: setsockopt reads a u32 from a valid pointer for its size.
    let result = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_TIMESTAMPING,
            (&flags as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// How a socket's sends are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stamping {
    /// Each stamp carries the number of its send (SOF_TIMESTAMPING_OPT_ID):
    /// a send's own stamp is known by its number.
    Numbered,
    /// Stamps without numbers: a send's is the last not older than it.
    Unnumbered,
    /// No stamps: a send is timed by the moment before it.
    Off,
}

/// Sends on a socket one at a time, each timed by the kernel's own stamp
/// of the moment it handed the packet to the device. A probe stamped in
/// user space before its send carries every microsecond the agent is kept
/// from running between the stamp and the send (on a busy node, tens to
/// hundreds); the kernel's stamp does not.
///
/// The stamps come back on the socket's error queue, each numbered with
/// its send where the kernel numbers them (SOF_TIMESTAMPING_OPT_ID), so
/// sends hold a lock from the send until its stamp is read: on a device
/// without a queue of its own (veth, TUN, a NIC with an empty queue) the
/// stamp is taken within the send call. A stamp that is not there when the
/// call returns (a packet queued behind others) is replaced by the moment
/// before the send, as without stamps; a stale one is told apart by its
/// number (else by its time), and reading stops at the send's own (else
/// reads the queue empty, a system call more per probe).
#[derive(Debug)]
pub struct StampedSends {
    /// Held for a send and the reading of its stamp; the number the
    /// kernel gives the next send's stamp, as far as is known.
    one_at_a_time: std::sync::Mutex<u32>,
    stamping: Stamping,
}

impl StampedSends {
    /// Asks the kernel to stamp `socket`'s sends; where it refuses, every
    /// send is timed by the moment before it.
    pub fn on(socket: &Socket) -> Self {
        let stamping = if set_timestamping(socket, STAMP_SENDS | libc::SOF_TIMESTAMPING_OPT_ID)
            .is_ok()
        {
            Stamping::Numbered
        } else {
            match stamp_sends(socket) {
                Ok(()) => Stamping::Unnumbered,
                Err(err) => {
                    tracing::warn!(%err, "no send stamps: probes are timed from just before each send");
                    Stamping::Off
                }
            }
        };
        Self {
            // The kernel numbers a socket's sends from 0 once asked to.
            one_at_a_time: std::sync::Mutex::new(0),
            stamping,
        }
    }

    /// Sends `packet` to `to` once `socket` is writable; returns when it
    /// left.
    pub async fn send_to(
        &self,
        socket: &AsyncFd<Socket>,
        packet: &[u8],
        to: &socket2::SockAddr,
    ) -> io::Result<Left> {
        socket
            .async_io(Interest::WRITABLE, |s| {
                let mut next = self.one_at_a_time.lock().unwrap_or_else(|e| e.into_inner());
                let before = SystemTime::now();
                s.send_to(packet, to)?;
                let mut left = Left {
                    at: before,
                    by_kernel: false,
                };
                match self.stamping {
                    // This send's number is the next one at least (a send
                    // that failed may have taken one), and no later send
                    // has been made: the first stamp from it on, and not
                    // older than it, is this send's; the rest are stale.
                    Stamping::Numbered => {
                        let mut own = None;
                        read_stamps(s, |stamp| match stamp.send {
                            Some(send)
                                if send.wrapping_sub(*next) < u32::MAX / 2
                                    && stamp.at >= before =>
                            {
                                own = Some((stamp.at, send));
                                ControlFlow::Break(())
                            }
                            _ => ControlFlow::Continue(()),
                        });
                        *next = match own {
                            Some((at, send)) => {
                                left = Left {
                                    at,
                                    by_kernel: true,
                                };
                                send.wrapping_add(1)
                            }
                            None => next.wrapping_add(1),
                        };
                    }
                    Stamping::Unnumbered => read_stamps(s, |stamp| {
                        if stamp.at >= before {
                            left = Left {
                                at: stamp.at,
                                by_kernel: true,
                            };
                        }
                        ControlFlow::Continue(())
                    }),
                    Stamping::Off => {}
                }
                Ok(left)
            })
            .await
    }
}

/// When a packet left.
#[derive(Debug, Clone, Copy)]
pub struct Left {
    /// The kernel's stamp, or else the moment before the send.
    pub at: SystemTime,
    /// Whether `at` is the kernel's stamp.
    pub by_kernel: bool,
}

/// The send stamps waiting on `socket`'s error queue, oldest first, each
/// handed to `each`; returns without waiting when there are none.
pub fn sent_stamps(socket: &Socket, mut each: impl FnMut(SystemTime)) {
    read_stamps(socket, |stamp| {
        each(stamp.at);
        ControlFlow::Continue(())
    });
}

/// A send's stamp from the error queue.
#[derive(Debug, Clone, Copy)]
struct SendStamp {
    at: SystemTime,
    /// The number of its send, where the kernel numbers them.
    send: Option<u32>,
}

/// The stamps on `socket`'s error queue, oldest first, until `each`
/// breaks or none is left.
fn read_stamps(socket: &Socket, mut each: impl FnMut(SendStamp) -> ControlFlow<()>) {
    loop {
        // Room for the stamps (64 bytes) and the extended error with an
        // IPv6 sender (64).
        let mut control = [0u8; 256];
        let mut data = [0u8; 64];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: an all-zero msghdr is valid; its pointers are set below
        // to buffers that outlive the call.
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = control.len() as _;
        // SAFETY: every buffer in `message` is valid for writing for its length.
        let len = unsafe {
            libc::recvmsg(
                socket.as_raw_fd(),
                &mut message,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if len < 0 {
            return;
        }
        // SAFETY: walking the control messages the kernel wrote into
        // `control`, with the kernel's own CMSG macros; the data of
        // SCM_TIMESTAMPING is three struct timespec, the first the
        // software stamp, and that of IP_RECVERR and IPV6_RECVERR a
        // struct sock_extended_err, both read unaligned.
        let mut at = None;
        let mut send = None;
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&message);
            while !cmsg.is_null() {
                let (level, kind) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
                if level == libc::SOL_SOCKET && kind == SO_TIMESTAMPING {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    if ts.tv_sec > 0 {
                        at = Some(UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                    }
                } else if (level, kind) == (libc::SOL_IP, libc::IP_RECVERR)
                    || (level, kind) == (libc::SOL_IPV6, libc::IPV6_RECVERR)
                {
                    let err: libc::sock_extended_err =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    if err.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                        send = Some(err.ee_data);
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&message, cmsg);
            }
        }
        if let Some(at) = at
            && each(SendStamp { at, send }).is_break()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, SockAddr, Type};

    /// On loopback: each send is stamped once, after the moment before it
    /// and no later than the moment after it.
    #[test]
    fn every_send_is_stamped_as_the_kernel_hands_it_on() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = SockAddr::from(receiver.local_addr().unwrap());
        let sender = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        sender
            .bind(&SockAddr::from(
                "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
            ))
            .unwrap();
        stamp_sends(&sender).unwrap();
        for _ in 0..3 {
            let before = SystemTime::now();
            sender.send_to(b"probe", &to).unwrap();
            let after = SystemTime::now();
            let mut stamps = Vec::new();
            sent_stamps(&sender, |at| stamps.push(at));
            assert_eq!(stamps.len(), 1, "{stamps:?}");
            assert!(
                before <= stamps[0] && stamps[0] <= after,
                "{before:?} {stamps:?} {after:?}"
            );
        }
        // Nothing more waits, and reading an empty queue returns at once.
        let mut more = 0;
        sent_stamps(&sender, |_| more += 1);
        assert_eq!(more, 0);
    }

    /// A stamp of a packet sent around the prober (so that its number is
    /// taken) waits on the queue: the prober's send reads past it to its
    /// own, and leaves nothing behind.
    #[tokio::test]
    async fn a_send_reads_past_a_stale_stamp_to_its_own() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = SockAddr::from(receiver.local_addr().unwrap());
        let sender = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        let sends = StampedSends::on(&sender);
        let sender = register(sender).unwrap();
        sender.get_ref().send_to(b"around", &to).unwrap();
        let before = SystemTime::now();
        let left = sends.send_to(&sender, b"probe", &to).await.unwrap();
        let after = SystemTime::now();
        assert!(left.by_kernel, "{left:?}");
        assert!(
            before <= left.at && left.at <= after,
            "{before:?} {left:?} {after:?}"
        );
        let mut more = 0;
        sent_stamps(sender.get_ref(), |_| more += 1);
        assert_eq!(more, 0);
        // The next send is numbered past the one that went around.
        let before = SystemTime::now();
        let left = sends.send_to(&sender, b"probe", &to).await.unwrap();
        assert!(left.by_kernel && left.at >= before, "{left:?}");
    }

    /// Sends on one socket from many tasks at once: each is timed by its
    /// own kernel stamp, inside its send, and none is left on the queue.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sends_each_get_their_own_stamp() {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = SockAddr::from(receiver.local_addr().unwrap());
        let sender = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        let sends = std::sync::Arc::new(StampedSends::on(&sender));
        let sender = std::sync::Arc::new(register(sender).unwrap());
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (sends, sender, to) = (sends.clone(), sender.clone(), to.clone());
                tokio::spawn(async move {
                    let before = SystemTime::now();
                    let left = sends.send_to(&sender, b"probe", &to).await.unwrap();
                    (before, left, SystemTime::now())
                })
            })
            .collect();
        let mut times = Vec::new();
        for task in tasks {
            let (before, left, after) = task.await.unwrap();
            assert!(left.by_kernel, "{left:?}");
            assert!(
                before <= left.at && left.at <= after,
                "{before:?} {left:?} {after:?}"
            );
            times.push(left.at);
        }
        times.sort();
        times.dedup();
        assert_eq!(times.len(), 32, "two sends with one stamp");
        let mut more = 0;
        sent_stamps(sender.get_ref(), |_| more += 1);
        assert_eq!(more, 0);
    }
}
