//! Opening a TUN device: an IP-level interface whose packets this process
//! reads and writes through a file descriptor.

// Unsafe is allowed here only for the kernel interface: the TUNSETIFF ioctl that makes a TUN device.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// The part of `struct ifreq` that TUNSETIFF reads and writes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An open TUN device.
#[derive(Debug)]
pub struct Tun {
    /// The device; reads and writes are whole IP packets.
    pub file: File,
    /// The name the kernel gave it.
    pub name: String,
}

/// Creates a TUN device named after `pattern` (such as `nalab%d`, where the
/// kernel fills in a free number). The descriptor is non-blocking.
pub fn open(pattern: &str) -> io::Result<Tun> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    let mut request = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    let bytes = pattern.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    request.name[..bytes.len()].copy_from_slice(bytes);
    // SAFETY: TUNSETIFF reads and writes an ifreq, which `request` lays out;
    // the descriptor is open for as long as the call.
    let result = unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut request as *mut IfReq) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    let end = request
        .name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(libc::IFNAMSIZ);
    let name = String::from_utf8_lossy(&request.name[..end]).into_owned();
    Ok(Tun { file, name })
}
