//! Network namespaces and their interfaces, through iproute2's `ip`.
//!
//! Every namespace a lab makes is named `nalab-<pid>-<host>`: the prefix
//! marks it as the lab's, the pid says which process owns it, so that a
//! later start can remove what a crashed process left behind.

// Unsafe is allowed here only for the kernel interface: kill on the namespace holders this lab started.
#![allow(unsafe_code)]

use std::io;
use std::process::{Command, Stdio};

/// Prefix of every namespace the lab makes.
pub const PREFIX: &str = "nalab-";

/// Runs `ip` with these arguments and fails with its stderr.
pub fn ip(args: &[&str]) -> io::Result<()> {
    let output = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// The namespace name of `host` in the lab of process `pid`.
pub fn name(pid: u32, host: &str) -> String {
    format!("{PREFIX}{pid}-{host}")
}

/// Creates a namespace with its loopback up.
pub fn create(namespace: &str) -> io::Result<()> {
    ip(&["netns", "add", namespace])?;
    ip(&["-n", namespace, "link", "set", "lo", "up"])
}

/// Moves `device` into `namespace`, gives it `addresses` (each
/// `address/prefix`, IPv4 or IPv6), brings it up and routes everything of
/// each family through it, so that whatever a host sends beyond itself
/// reaches the emulator (which drops what is not for the lab).
pub fn attach(namespace: &str, device: &str, addresses: &[String]) -> io::Result<()> {
    ip(&["link", "set", "dev", device, "netns", namespace])?;
    for address in addresses {
        if address.contains(':') {
            // No duplicate address detection: nothing else on a lab link
            // can hold the address, and DAD would hold it back ~1 s.
            ip(&[
                "-n", namespace, "addr", "add", address, "dev", device, "nodad",
            ])?;
        } else {
            ip(&["-n", namespace, "addr", "add", address, "dev", device])?;
        }
    }
    ip(&["-n", namespace, "link", "set", device, "up"])?;
    for address in addresses {
        let family = if address.contains(':') { "-6" } else { "-4" };
        ip(&[
            "-n", namespace, family, "route", "add", "default", "dev", device,
        ])?;
    }
    Ok(())
}

/// Moves `device` into `namespace`, gives it `address/prefix` and brings it
/// up, with no other route: a side door, not the host's way out.
pub fn attach_plain(namespace: &str, device: &str, address: &str) -> io::Result<()> {
    ip(&["link", "set", "dev", device, "netns", namespace])?;
    ip(&["-n", namespace, "addr", "add", address, "dev", device])?;
    ip(&["-n", namespace, "link", "set", device, "up"])
}

/// Moves `device` into `namespace` under the name `name`, gives it
/// `address/prefix` and brings it up, with no other route than its own
/// block's: a host's further network (a rail), which only the traffic for
/// that block takes.
pub fn attach_secondary(
    namespace: &str,
    device: &str,
    name: &str,
    address: &str,
) -> io::Result<()> {
    ip(&["link", "set", "dev", device, "netns", namespace])?;
    ip(&["-n", namespace, "link", "set", "dev", device, "name", name])?;
    ip(&["-n", namespace, "addr", "add", address, "dev", name])?;
    ip(&["-n", namespace, "link", "set", name, "up"])
}

/// Kills what still runs in `namespace`, then removes it.
pub fn remove(namespace: &str) -> io::Result<()> {
    if let Ok(output) = Command::new("ip")
        .args(["netns", "pids", namespace])
        .output()
    {
        for pid in String::from_utf8_lossy(&output.stdout).split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                // SAFETY: kill has no memory effects; a stale pid fails harmlessly.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
    match ip(&["netns", "delete", namespace]) {
        // Another lab starting at the same time may have removed it first.
        Err(err) if err.to_string().contains("No such file") => Ok(()),
        result => result,
    }
}

/// Every lab namespace on this machine.
pub fn list() -> io::Result<Vec<String>> {
    let output = Command::new("ip").args(["netns", "list"]).output()?;
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(PREFIX))
        .map(str::to_owned)
        .collect())
}

/// Removes the lab namespaces whose owning process is gone; returns them.
pub fn remove_orphans() -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for namespace in list()? {
        let owner = namespace[PREFIX.len()..]
            .split('-')
            .next()
            .and_then(|pid| pid.parse::<u32>().ok());
        let alive = owner.is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            remove(&namespace)?;
            removed.push(namespace);
        }
    }
    Ok(removed)
}
