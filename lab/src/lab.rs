//! [`Lab`]: builds the hosts and the emulator of a topology, runs programs
//! in the hosts, switches faults, and removes everything again.

// Unsafe is allowed here only for the kernel interface: geteuid and kill on the lab's own processes.
#![allow(unsafe_code)]

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::emulator::{Emulator, Port, Stats};
use crate::lateness::Lateness;
use crate::netns;
use crate::topology::{CONTROL_HOST, Faults, HostSpec, LinkProfile, NetworkSpec, Topology};
use crate::tun;
use crate::wire_ping::{self, WireCapture};

/// Prefix length of the lab's addresses: 198.18.0.0/15.
const PREFIX_LEN: u8 = 15;
/// Prefix length of the lab's IPv6 addresses: 2001:2::/48.
const PREFIX_LEN_V6: u8 = 48;
/// Prefix length of a further network's addresses: 172.(16+k).0.0/16.
const PREFIX_LEN_NETWORK: u8 = 16;

/// Why a lab could not start.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Namespaces and TUN devices need root.
    #[error("the lab needs root (network namespaces and TUN devices)")]
    NeedsRoot,
    /// A step of the set-up failed.
    #[error("lab set-up failed: {0}")]
    Setup(#[from] std::io::Error),
    /// A host name that the lab does not have.
    #[error("the lab has no host {0:?}")]
    UnknownHost(String),
}

/// A host of a running lab.
#[derive(Debug, Clone)]
pub struct LabHost {
    /// Name, zone, region and address.
    pub spec: HostSpec,
    /// Its network namespace.
    pub namespace: String,
}

/// A running lab. Dropping it stops the programs started in it, the
/// emulator, and removes the namespaces.
pub struct Lab {
    number: u32,
    topology: Topology,
    hosts: Vec<LabHost>,
    faults: Mutex<Faults>,
    emulator: Option<Emulator>,
    children: Mutex<Vec<Child>>,
    /// Root-namespace ends of the side doors opened by `open_access`.
    access: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("number", &self.number)
            .field("hosts", &self.hosts.len())
            .finish_non_exhaustive()
    }
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl Lab {
    /// Builds every host of `topology` and starts the emulator.
    pub fn start(topology: Topology) -> Result<Self, LabError> {
        static LABS: AtomicU32 = AtomicU32::new(0);
        if !is_root() {
            return Err(LabError::NeedsRoot);
        }
        for orphan in netns::remove_orphans()? {
            tracing::info!(namespace = %orphan, "removed a namespace left by an earlier lab");
        }
        let number = LABS.fetch_add(1, Ordering::Relaxed);
        let mut lab = Self {
            number,
            hosts: Vec::new(),
            faults: Mutex::new(Faults::default()),
            emulator: None,
            children: Mutex::new(Vec::new()),
            access: Mutex::new(Vec::new()),
            topology,
        };
        let mut ports = Vec::new();
        for spec in lab.topology.hosts() {
            let namespace = netns::name(std::process::id(), &format!("{number}-{}", spec.name));
            netns::create(&namespace)?;
            lab.hosts.push(LabHost {
                spec: spec.clone(),
                namespace: namespace.clone(),
            });
            let device = tun::open("nalab%d")?;
            let addresses: Vec<String> = spec
                .addresses
                .iter()
                .map(|address| match address {
                    std::net::IpAddr::V4(_) => format!("{address}/{PREFIX_LEN}"),
                    std::net::IpAddr::V6(_) => format!("{address}/{PREFIX_LEN_V6}"),
                })
                .collect();
            netns::attach(&namespace, &device.name, &addresses)?;
            ports.push(Port {
                device: device.file,
                addresses: spec.addresses.clone(),
            });
        }
        // Then each further network's ports, host by host: no default
        // route, so that only traffic for the network's block takes it.
        for k in 0..lab.topology.networks.len() {
            for host in lab.hosts.iter().filter(|h| h.spec.name != CONTROL_HOST) {
                // Not the primary devices' prefix: the kernel would name it
                // as the primary device the host already holds.
                let device = tun::open("nalabn%d")?;
                let address = host.spec.networks[k];
                netns::attach_secondary(
                    &host.namespace,
                    &device.name,
                    &NetworkSpec::interface(k),
                    &format!("{address}/{PREFIX_LEN_NETWORK}"),
                )?;
                ports.push(Port {
                    device: device.file,
                    addresses: vec![address],
                });
            }
        }
        lab.emulator = Some(Emulator::start(ports, lab.links(&Faults::default()))?);
        Ok(lab)
    }

    /// Every host, zone by zone, then the control host.
    pub fn hosts(&self) -> &[LabHost] {
        &self.hosts
    }

    /// The hosts that are not the control host.
    pub fn workers(&self) -> impl Iterator<Item = &LabHost> {
        self.hosts.iter().filter(|h| h.spec.name != CONTROL_HOST)
    }

    /// A host by name.
    pub fn host(&self, name: &str) -> Result<&LabHost, LabError> {
        self.hosts
            .iter()
            .find(|h| h.spec.name == name)
            .ok_or_else(|| LabError::UnknownHost(name.to_owned()))
    }

    /// The host kept for the collector.
    pub fn control(&self) -> &LabHost {
        self.hosts
            .iter()
            .find(|h| h.spec.name == CONTROL_HOST)
            .expect("every lab has a control host")
    }

    /// Opens a direct link from this process's namespace to `host` (a veth
    /// pair outside the emulator) and returns the address `host` has on it,
    /// so that a test can reach a service in the lab, such as the
    /// collector, without joining the lab. Removed with the lab.
    pub fn open_access(&self, host: &str) -> Result<std::net::Ipv4Addr, LabError> {
        let namespace = self.host(host)?.namespace.clone();
        // 198.19.254.0/24 in /30 steps: one per lab of this process.
        let slot = (self.number % 64) as u8 * 4;
        let outside = format!("nalab{}x{}", std::process::id() % 100_000, self.number % 64);
        let inside = format!("{outside}i");
        netns::ip(&[
            "link", "add", &outside, "type", "veth", "peer", "name", &inside,
        ])?;
        netns::ip(&[
            "addr",
            "add",
            &format!("198.19.254.{}/30", slot + 1),
            "dev",
            &outside,
        ])?;
        self.access
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(outside.clone());
        netns::ip(&["link", "set", &outside, "up"])?;
        netns::attach_plain(&namespace, &inside, &format!("198.19.254.{}/30", slot + 2))?;
        Ok(std::net::Ipv4Addr::new(198, 19, 254, slot + 2))
    }

    /// The topology the lab was built from.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// A command that runs `program` inside `host`.
    pub fn command(&self, host: &str, program: &str) -> Result<Command, LabError> {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.host(host)?.namespace, program]);
        Ok(command)
    }

    /// Runs iputils ping (the reference the agents are held to) in `host`
    /// towards `address`: `count` echo requests `interval` apart; returns the
    /// RTT of every reply, in ms, in order. The requests pad with
    /// [`wire_ping::PATTERN`], which the agents' never do, so that a
    /// capture ([`Lab::capture_pings`]) tells them apart.
    pub fn ping(
        &self,
        host: &str,
        address: &str,
        count: u32,
        interval: Duration,
    ) -> Result<Vec<f64>, LabError> {
        let output = self
            .command(host, "ping")?
            .args(["-n", "-c", &count.to_string(), "-W", "1"])
            .args(["-p", wire_ping::PATTERN])
            .args(["-i", &format!("{:.3}", interval.as_secs_f64()), address])
            .output()?;
        Ok(String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split("time=").nth(1))
            .filter_map(|time| time.split_whitespace().next()?.parse().ok())
            .collect())
    }

    /// Starts capturing the echo packets of [`Lab::ping`] in `host`, timed by the kernel ([`crate::wire_ping`]).
    pub fn capture_pings(&self, host: &str) -> Result<WireCapture, LabError> {
        Ok(WireCapture::start(self.command(host, "tcpdump")?)?)
    }

    /// [`Lab::ping`] under a capture: the round trip of every reply as the
    /// wire saw it, in ms, in order.
    pub fn ping_on_the_wire(
        &self,
        host: &str,
        address: &str,
        count: u32,
        interval: Duration,
    ) -> Result<Vec<f64>, LabError> {
        let capture = self.capture_pings(host)?;
        let pinged = self.ping(host, address, count, interval);
        let rtts = wire_ping::round_trips(&capture.finish(), address);
        pinged?;
        Ok(rtts)
    }

    /// Starts `command` (from [`Lab::command`]) and keeps it, so that it is
    /// stopped with the lab. Returns its pid.
    pub fn spawn(&self, mut command: Command) -> Result<u32, LabError> {
        let child = command.stdin(Stdio::null()).spawn()?;
        let pid = child.id();
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child);
        Ok(pid)
    }

    /// Stops a program started with [`Lab::spawn`]: SIGTERM, then SIGKILL
    /// after `grace`.
    pub fn stop(&self, pid: u32, grace: Duration) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = children.iter().position(|c| c.id() == pid) {
            let child = children.remove(at);
            drop(children);
            stop_child(child, grace);
        }
    }

    /// Kills a child at once (SIGKILL), as the kernel's OOM killer or a
    /// forced pod deletion would: it gets no chance to save or say goodbye.
    pub fn kill(&self, pid: u32) {
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = children.iter().position(|c| c.id() == pid) {
            let mut child = children.remove(at);
            drop(children);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Switches faults on or off (replacing the previous set).
    pub fn set_faults(&self, faults: Faults) {
        let links = self.links(&faults);
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = faults;
        if let Some(emulator) = &self.emulator {
            emulator.set_links(links);
        }
    }

    /// The configured RTT (ms) and delivery ratio of a probe from `src` to
    /// `dst`, under the current faults.
    pub fn round_trip(&self, src: &str, dst: &str) -> Result<(f64, f64), LabError> {
        self.round_trip_on(None, src, dst)
    }

    /// The same on the primary network (`None`) or on the topology's
    /// further network number `k`.
    pub fn round_trip_on(
        &self,
        network: Option<usize>,
        src: &str,
        dst: &str,
    ) -> Result<(f64, f64), LabError> {
        let faults = self
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        Ok(self.topology.round_trip_on(
            network,
            &self.host(src)?.spec,
            &self.host(dst)?.spec,
            &faults,
        ))
    }

    /// The emulator's counters.
    pub fn stats(&self) -> Option<&Stats> {
        self.emulator.as_ref().map(Emulator::stats)
    }

    /// How late the emulator has let the delayed packets from `src` to
    /// `dst` go on the primary network (empty without an emulator): read
    /// twice and take [`Lateness::since`] for a stretch of time.
    pub fn lateness(&self, src: &str, dst: &str) -> Result<Lateness, LabError> {
        self.lateness_on(None, src, dst)
    }

    /// The same on the primary network (`None`) or on the topology's
    /// further network number `k` (empty where `src` or `dst` has no port
    /// on it).
    pub fn lateness_on(
        &self,
        on: Option<usize>,
        src: &str,
        dst: &str,
    ) -> Result<Lateness, LabError> {
        let ports = self.ports();
        let port = |name: &str| {
            self.host(name)?;
            Ok::<_, LabError>(
                ports
                    .iter()
                    .position(|(network, host)| *network == on && host.name == name),
            )
        };
        let (src, dst) = (port(src)?, port(dst)?);
        Ok(match (self.stats(), src, dst) {
            (Some(stats), Some(src), Some(dst)) => stats.links.of(src * ports.len() + dst),
            _ => Lateness::default(),
        })
    }

    /// Every port's network and host, in the emulator's order: every
    /// host on the primary network, then each further network's workers.
    fn ports(&self) -> Vec<(Option<usize>, &HostSpec)> {
        let primary = self.hosts.iter().map(|h| (None, &h.spec));
        let further = (0..self.topology.networks.len())
            .flat_map(move |k| self.workers().map(move |h| (Some(k), &h.spec)));
        primary.chain(further).collect()
    }

    fn links(&self, faults: &Faults) -> Vec<LinkProfile> {
        let ports = self.ports();
        // Between two networks nothing passes (the emulator never routes
        // so: each port's addresses are of its own network).
        let apart = LinkProfile {
            loss: 1.0,
            ..LinkProfile::default()
        };
        ports
            .iter()
            .flat_map(|src| ports.iter().map(move |dst| (*src, *dst)))
            .map(|((net_src, src), (net_dst, dst))| {
                if net_src == net_dst {
                    self.topology.path_on(net_src, src, dst, faults)
                } else {
                    apart
                }
            })
            .collect()
    }
}

fn stop_child(mut child: Child, grace: Duration) {
    // SAFETY: kill has no memory effects; the child is ours and not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Lab {
    fn drop(&mut self) {
        let children =
            std::mem::take(&mut *self.children.lock().unwrap_or_else(|e| e.into_inner()));
        for child in children {
            stop_child(child, Duration::from_secs(2));
        }
        self.emulator = None;
        for link in self
            .access
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = netns::ip(&["link", "delete", &link]);
        }
        for host in &self.hosts {
            if let Err(err) = netns::remove(&host.namespace) {
                tracing::warn!(namespace = %host.namespace, %err, "could not remove a lab namespace");
            }
        }
    }
}

/// For tests that need root: whether to go on. Without root the test
/// skips (returns false), unless NETAWARE_REQUIRE_ROOT=1 (as in CI), where
/// it fails instead.
pub fn root_or_skip(test: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var("NETAWARE_REQUIRE_ROOT").as_deref() != Ok("1"),
        "{test} needs root and NETAWARE_REQUIRE_ROOT=1 is set"
    );
    eprintln!("skipping {test}: needs root (NETAWARE_REQUIRE_ROOT=1 makes this a failure)");
    false
}
