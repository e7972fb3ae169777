//! The whole system on the lab: the collector in the lab's control host and
//! an agent in every other host, each a real `netaware` process in its own
//! network namespace, talking over the emulated links.
//!
//! The process that owns the lab stays in the root namespace, which has no
//! route into the lab; it asks the collector by running `netaware` commands
//! inside the control host. The demo and the lab tests both start the
//! system here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use netaware_core::transport::Transport;
use netaware_lab::{Lab, Topology};

use crate::json::{EstimateJson, MatrixJson, RankJson, TopologyJson, ZonesJson};

/// The collector's gRPC port in the control host.
pub const COLLECTOR_PORT: u16 = 7470;
/// The collector's HTTP port (/metrics, /healthz) in the control host.
pub const METRICS_PORT: u16 = 9470;
/// Each agent's /metrics port, on its host's address.
pub const AGENT_METRICS_PORT: u16 = 9471;

/// How the agents measure.
#[derive(Debug, Clone, Copy)]
pub struct AgentTiming {
    /// Time between two probes to one peer.
    pub interval: Duration,
    /// Window length.
    pub window: Duration,
    /// Probe timeout.
    pub probe_timeout: Duration,
}

impl AgentTiming {
    /// What the lab's tests run: a probe to each peer every 100 ms, 2 s
    /// windows, so that a test sees full windows within seconds.
    pub const FAST: AgentTiming = AgentTiming {
        interval: Duration::from_millis(100),
        window: Duration::from_secs(2),
        probe_timeout: Duration::from_millis(500),
    };
}

/// A running system on a lab.
#[derive(Debug)]
pub struct LabSystem {
    lab: Lab,
    collector: Option<u32>,
    collector_flags: Vec<String>,
    exe: PathBuf,
    url: String,
    agents: BTreeMap<String, u32>,
}

/// An address family, for the firewall rules a test sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// IPv4 (iptables).
    V4,
    /// IPv6 (ip6tables).
    V6,
}

/// The `--network` flags that tell an agent of the topology's further
/// networks: the same on every host, as a DaemonSet's arguments are.
fn network_flags(topology: &netaware_lab::topology::Topology) -> Vec<String> {
    topology
        .networks
        .iter()
        .enumerate()
        .flat_map(|(k, network)| {
            [
                "--network".to_owned(),
                format!(
                    "{}={}",
                    network.name,
                    netaware_lab::topology::NetworkSpec::block(k)
                ),
            ]
        })
        .collect()
}

fn duration_arg(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

impl LabSystem {
    /// Builds the lab and starts the collector (with `collector_flags` added
    /// to its command line) and the agents, using the `netaware` binary at
    /// `exe`.
    pub fn start(
        topology: Topology,
        exe: &Path,
        timing: AgentTiming,
        collector_flags: &[String],
    ) -> anyhow::Result<Self> {
        Self::start_with_agent_flags(topology, exe, timing, collector_flags, &[])
    }

    /// [`LabSystem::start`], with `agent_flags` added to every agent's
    /// command line.
    pub fn start_with_agent_flags(
        topology: Topology,
        exe: &Path,
        timing: AgentTiming,
        collector_flags: &[String],
        agent_flags: &[String],
    ) -> anyhow::Result<Self> {
        let lab = Lab::start(topology).context("building the lab")?;
        let control = lab.control().spec.address;
        let url = format!(
            "http://{}",
            std::net::SocketAddr::new(control, COLLECTOR_PORT)
        );
        let exe_str = exe
            .to_str()
            .context("the netaware binary's path is not UTF-8")?;
        let mut system = Self {
            collector: None,
            collector_flags: collector_flags.to_vec(),
            lab,
            exe: exe.to_owned(),
            url,
            agents: BTreeMap::new(),
        };
        system.start_collector()?;
        let workers: Vec<_> = system.lab.workers().map(|h| h.spec.clone()).collect();
        for host in workers {
            let addresses: Vec<String> = host.addresses.iter().map(ToString::to_string).collect();
            let mut agent = system.lab.command(&host.name, exe_str)?;
            agent
                .args([
                    "agent",
                    "--node",
                    &host.name,
                    "--address",
                    &addresses.join(","),
                ])
                .args([
                    "--zone",
                    system.lab.topology().zone_label(&host),
                    "--region",
                    &host.region,
                    "--collector",
                    &system.url,
                ])
                .args([
                    "--interval",
                    &duration_arg(timing.interval),
                    "--window",
                    &duration_arg(timing.window),
                ])
                .args(["--probe-timeout", &duration_arg(timing.probe_timeout)])
                .args(["--metrics-port", &AGENT_METRICS_PORT.to_string()])
                .args(network_flags(system.lab.topology()))
                .args(agent_flags)
                .env("RUST_LOG", "error")
                .stdout(Stdio::null());
            let pid = system.lab.spawn(agent)?;
            system.agents.insert(host.name.clone(), pid);
        }
        Ok(system)
    }

    /// Starts `netaware lab-forge` in `host`: it answers echo requests
    /// ahead of time until stopped (with the lab). Returns its pid.
    pub fn start_forger(&self, host: &str) -> anyhow::Result<u32> {
        let exe = self
            .exe
            .to_str()
            .context("the netaware binary's path is not UTF-8")?;
        let mut forger = self.lab.command(host, exe)?;
        forger.arg("lab-forge").stdout(Stdio::null());
        Ok(self.lab.spawn(forger)?)
    }

    /// Puts a lying STAMP reflector in `host` in place of its agent's: UDP
    /// to the agents' reflector port is redirected (iptables, both
    /// families) to `netaware lab-forge --lying-reflector`, which claims
    /// to have held every probe `claim_extra_hold` longer than it did.
    /// Returns its pid.
    pub fn start_lying_reflector(
        &self,
        host: &str,
        claim_extra_hold: Duration,
    ) -> anyhow::Result<u32> {
        const LIAR_PORT: u16 = 7473;
        let exe = self
            .exe
            .to_str()
            .context("the netaware binary's path is not UTF-8")?;
        let mut liar = self.lab.command(host, exe)?;
        liar.args(["lab-forge", "--lying-reflector", &LIAR_PORT.to_string()])
            .args(["--claim-extra-hold", &duration_arg(claim_extra_hold)])
            .stdout(Stdio::null());
        let pid = self.lab.spawn(liar)?;
        let reflector = netaware_agent::reflector::DEFAULT_PORT.to_string();
        for family in [IpFamily::V4, IpFamily::V6] {
            self.iptables(
                host,
                family,
                &[
                    "-t",
                    "nat",
                    "-A",
                    "PREROUTING",
                    "-p",
                    "udp",
                    "--dport",
                    &reflector,
                    "-j",
                    "REDIRECT",
                    "--to-ports",
                    &LIAR_PORT.to_string(),
                ],
            )?;
        }
        Ok(pid)
    }

    /// The text of `host`'s agent's /metrics, read from inside its host.
    pub fn agent_metrics(&self, host: &str) -> anyhow::Result<String> {
        self.metrics_of(host, AGENT_METRICS_PORT)
    }

    /// The text of the collector's /metrics, read from the control host.
    pub fn collector_metrics(&self) -> anyhow::Result<String> {
        self.metrics_of(&self.lab.control().spec.name, METRICS_PORT)
    }

    fn metrics_of(&self, host: &str, port: u16) -> anyhow::Result<String> {
        let address = self.lab.host(host)?.spec.address;
        let output = self
            .lab
            .command(host, "curl")?
            .args([
                "-s",
                &format!(
                    "http://{}/metrics",
                    std::net::SocketAddr::new(address, port)
                ),
            ])
            .output()?;
        if !output.status.success() {
            bail!(
                "reading /metrics in {host}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8(output.stdout)?)
    }

    /// Drops every probe of `transport` that reaches `host`, as a host
    /// firewall or a cloud security group that lets it in would: ICMP echo
    /// requests, UDP to the agents' reflector port, or TCP to their
    /// throughput port (the handshakes).
    pub fn drop_probes(&self, host: &str, transport: Transport) -> anyhow::Result<()> {
        let families: Vec<IpFamily> = self
            .lab
            .host(host)?
            .spec
            .addresses
            .iter()
            .map(|a| {
                if a.is_ipv4() {
                    IpFamily::V4
                } else {
                    IpFamily::V6
                }
            })
            .collect();
        families
            .into_iter()
            .try_for_each(|family| self.drop_probes_over(host, transport, family))
    }

    /// [`LabSystem::drop_probes`] over one address family only (iptables
    /// or ip6tables), as a firewall that forgot the other would.
    pub fn drop_probes_over(
        &self,
        host: &str,
        transport: Transport,
        family: IpFamily,
    ) -> anyhow::Result<()> {
        let udp_port = netaware_agent::reflector::DEFAULT_PORT.to_string();
        let tcp_port = netaware_agent::DEFAULT_THROUGHPUT_PORT.to_string();
        let matches: Vec<&str> = match (transport, family) {
            (Transport::Icmp, IpFamily::V4) => vec!["-p", "icmp", "--icmp-type", "echo-request"],
            (Transport::Icmp, IpFamily::V6) => {
                vec!["-p", "ipv6-icmp", "--icmpv6-type", "echo-request"]
            }
            (Transport::Udp, _) => vec!["-p", "udp", "--dport", &udp_port],
            (Transport::Tcp, _) => vec!["-p", "tcp", "--dport", &tcp_port],
        };
        let mut args = vec!["-A", "INPUT"];
        args.extend(matches);
        args.extend(["-j", "DROP"]);
        self.iptables(host, family, &args)
    }

    /// Drops every probe of every transport that reaches `host`.
    pub fn drop_every_probe(&self, host: &str) -> anyhow::Result<()> {
        Transport::ALL
            .into_iter()
            .try_for_each(|transport| self.drop_probes(host, transport))
    }

    /// Takes away every firewall rule of `host`.
    pub fn open_firewall(&self, host: &str) -> anyhow::Result<()> {
        self.iptables(host, IpFamily::V4, &["-F", "INPUT"])?;
        self.iptables(host, IpFamily::V6, &["-F", "INPUT"])
    }

    /// Runs `iptables` with `args` in `host`: a firewall the agents did
    /// not set up.
    fn iptables(&self, host: &str, family: IpFamily, args: &[&str]) -> anyhow::Result<()> {
        let program = match family {
            IpFamily::V4 => "iptables",
            IpFamily::V6 => "ip6tables",
        };
        let output = self.lab.command(host, program)?.args(args).output()?;
        if !output.status.success() {
            bail!(
                "{program} {} in {host}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }

    /// The lab underneath.
    pub fn lab(&self) -> &Lab {
        &self.lab
    }

    /// The collector's URL, valid inside the lab's hosts.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Starts the collector in the control host (again, after
    /// [`LabSystem::stop_collector`]), with the flags the system started
    /// with.
    pub fn start_collector(&mut self) -> anyhow::Result<()> {
        if self.collector.is_some() {
            bail!("the collector runs already");
        }
        let exe = self
            .exe
            .to_str()
            .context("the netaware binary's path is not UTF-8")?;
        let control = &self.lab.control().spec;
        // Every address of the control host: the lab's, and a side door a
        // test may open (Lab::open_access, IPv4, which an IPv6 socket takes
        // as well).
        let any: std::net::IpAddr = match control.address {
            std::net::IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
        };
        let mut collector = self.lab.command(&control.name, exe)?;
        collector
            .args([
                "collector",
                "--listen",
                &std::net::SocketAddr::new(any, COLLECTOR_PORT).to_string(),
            ])
            .args([
                "--metrics-listen",
                &std::net::SocketAddr::new(any, METRICS_PORT).to_string(),
            ])
            .args(&self.collector_flags)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null());
        self.collector = Some(self.lab.spawn(collector)?);
        self.wait_for_collector()
    }

    /// Waits until the collector's gRPC port answers HTTP/2 (asked by
    /// curl from the control host, whatever binary the system runs), so
    /// that a test's first question does not race its start.
    fn wait_for_collector(&self) -> anyhow::Result<()> {
        let control = &self.lab.control().spec;
        let url = format!(
            "http://{}/",
            std::net::SocketAddr::new(control.address, COLLECTOR_PORT)
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let answered = self
                .lab
                .command(&control.name, "curl")?
                .args([
                    "-s",
                    "-o",
                    "/dev/null",
                    "--http2-prior-knowledge",
                    "--max-time",
                    "1",
                    &url,
                ])
                .status()?
                .success();
            if answered {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                bail!("the collector never answered on {url}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the collector (SIGTERM).
    pub fn stop_collector(&mut self) {
        if let Some(pid) = self.collector.take() {
            self.lab.stop(pid, Duration::from_secs(2));
        }
    }

    /// Kills the collector (SIGKILL): nothing saved on the way out.
    pub fn kill_collector(&mut self) {
        if let Some(pid) = self.collector.take() {
            self.lab.kill(pid);
        }
    }

    /// Stops the agent of `host` (SIGTERM, as Kubernetes would).
    pub fn stop_agent(&mut self, host: &str) -> anyhow::Result<()> {
        let pid = self
            .agents
            .remove(host)
            .with_context(|| format!("no agent runs in {host}"))?;
        self.lab.stop(pid, Duration::from_secs(2));
        Ok(())
    }

    /// Runs `netaware ARGS --collector URL` in the control host and returns
    /// what it printed.
    pub fn ask(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.run_cli(args)?;
        if !output.status.success() {
            bail!(
                "netaware {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8(output.stdout)?)
    }

    /// `netaware doctor -o json` against the collector: whether it passed,
    /// and what it printed.
    pub fn doctor(&self) -> anyhow::Result<(bool, serde_json::Value)> {
        let output = self.run_cli(&["doctor", "-o", "json"])?;
        Ok((
            output.status.success(),
            serde_json::from_slice(&output.stdout)?,
        ))
    }

    /// Runs the CLI in the control host against the collector.
    fn run_cli(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        let exe = self
            .exe
            .to_str()
            .context("the netaware binary's path is not UTF-8")?;
        Ok(self
            .lab
            .command(&self.lab.control().spec.name, exe)?
            .args(args)
            .args(["--collector", &self.url])
            .output()?)
    }

    /// The matrix.
    pub fn matrix(&self) -> anyhow::Result<MatrixJson> {
        Ok(serde_json::from_str(&self.ask(&["matrix", "--json"])?)?)
    }

    /// The measured pairs of `network`.
    pub fn matrix_of_network(&self, network: &str) -> anyhow::Result<MatrixJson> {
        Ok(serde_json::from_str(&self.ask(&[
            "matrix",
            "--json",
            "--network",
            network,
        ])?)?)
    }

    /// The zone summary.
    pub fn zones(&self) -> anyhow::Result<ZonesJson> {
        Ok(serde_json::from_str(&self.ask(&["zones", "--json"])?)?)
    }

    /// The RTT of `src` to every other node, measured or estimated.
    pub fn estimate(&self, src: &str) -> anyhow::Result<EstimateJson> {
        Ok(serde_json::from_str(
            &self.ask(&["estimate", "--json", "--src", src])?,
        )?)
    }

    /// The measured topology.
    pub fn topology(&self) -> anyhow::Result<TopologyJson> {
        Ok(serde_json::from_str(&self.ask(&["topology", "--json"])?)?)
    }

    /// A ranking for `size` workers with workers already on `placed`.
    pub fn rank(&self, size: usize, placed: &[&str]) -> anyhow::Result<RankJson> {
        self.rank_on(netaware_core::network::PRIMARY, size, placed)
    }

    /// The same, placed by `network`'s matrix.
    pub fn rank_on(&self, network: &str, size: usize, placed: &[&str]) -> anyhow::Result<RankJson> {
        let size = size.to_string();
        let mut args = vec!["rank", "--json", "--network", network, "--size", &size];
        for peer in placed {
            args.extend(["--peer", peer]);
        }
        Ok(serde_json::from_str(&self.ask(&args)?)?)
    }
}
