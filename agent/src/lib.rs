//! The netaware node agent.
//!
//! One agent runs on every node (a DaemonSet on Kubernetes). It opens a
//! session with the collector, learns which peers to probe, probes each
//! once per interval (spread over the interval, with jitter) by the
//! transport that gets through (ICMP echo, else UDP in the STAMP format,
//! else a TCP handshake: [`transport_choice`]), and sends one window of
//! figures per peer every window length, with the node's load. It answers
//! its peers' UDP probes with its [`reflector`].
//!
//! It also runs a [`throughput`] server, and runs the throughput tests the
//! collector orders.
//!
//! Beside its primary address, it measures each named network it is told
//! of (a rail: [`networks`] finds the node's address on it), from its
//! address there to its peers' ([`probers`]).
//!
//! Layout: pure parts (the probe [`schedule`], ICMP packets and kernel
//! filters in [`icmp_packet`], which reply answers which probe in
//! [`replies`]; the windows themselves are folded by
//! `netaware_core::window`, the same code the simulator runs) beside thin
//! shells ([`icmp`] sockets, the [`measure`] loop, the collector
//! [`session`], [`node_stats`] from sysinfo, [`throughput`] tests).
//! [`Agent`] ties them together; `netaware agent` and the demo both use it.

pub mod cli;
pub mod counters;
pub mod huge_pages;
pub mod icmp;
pub mod icmp_packet;
pub mod inbound;
pub mod kernel_stamps;
pub mod measure;
pub mod metrics;
pub mod networks;
pub mod node_stats;
pub mod outbox;
pub mod pending;
pub mod probers;
pub mod quiet;
pub mod reflector;
pub mod replies;
pub mod schedule;
pub mod session;
pub mod stamp_packet;
pub mod tcp_probe;
pub mod throughput;
pub mod transport_choice;
pub mod udp;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use netaware_core::network::Network;
use netaware_proto::v1::Hello;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use counters::Counters;

/// The throughput server's port unless configured otherwise.
pub const DEFAULT_THROUGHPUT_PORT: u16 = 7471;
/// The metrics port of the agent binary unless configured otherwise.
pub const DEFAULT_METRICS_PORT: u16 = 9471;

/// Why an agent's configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No node name.
    #[error("the node name is empty")]
    NoNode,
    /// No zone.
    #[error("the zone is empty")]
    NoZone,
    /// No address for peers to probe.
    #[error("no address given")]
    NoAddress,
    /// Probing too fast, or windows shorter than the interval.
    #[error("the interval must be at least 10 ms and the window at least one interval")]
    Interval,
    /// A probe timeout of zero or longer than a window.
    #[error("the probe timeout must be above 0 and at most one window")]
    ProbeTimeout,
    /// The collector's URL or the TLS set-up towards it.
    #[error(transparent)]
    Collector(#[from] netaware_runtime::tls::TlsError),
}

/// Errors that stop an agent from starting.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The ICMP socket could not be opened.
    #[error(
        "cannot open an ICMP socket ({0}); run as root, grant CAP_NET_RAW, or allow unprivileged ICMP with sysctl net.ipv4.ping_group_range"
    )]
    IcmpSocket(std::io::Error),
    /// The UDP probe socket could not be opened.
    #[error("cannot open a UDP socket for probes: {0}")]
    UdpSocket(std::io::Error),
    /// The STAMP reflector could not listen.
    #[error(
        "cannot open the UDP reflector on {addr}: {source} (choose another --udp-port, or 0 for none)"
    )]
    Reflector {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The configuration is unusable.
    #[error("invalid agent configuration: {0}")]
    Config(#[from] ConfigError),
    /// SIGINT and SIGTERM handlers could not be installed.
    #[error("cannot listen for shutdown signals: {0}")]
    Signals(std::io::Error),
    /// The metrics endpoint could not listen.
    #[error(
        "cannot serve metrics on {addr}: {source} (choose another --metrics-port, or 0 for none)"
    )]
    Metrics {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The throughput server could not listen.
    #[error(
        "cannot open the throughput server on {addr}: {source} (choose another --throughput-port, or 0 for none)"
    )]
    ThroughputServer {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// Who the agent is and how it measures.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Node name.
    pub node: String,
    /// The node's addresses; the first of each family is the probe source.
    pub addresses: Vec<IpAddr>,
    /// The node's address on each named network it is on (a rail): its
    /// probes to a peer's address on that network leave from it, and its
    /// reflector and throughput server answer on it too.
    pub networks: Vec<(Network, IpAddr)>,
    /// Zone of the node.
    pub zone: String,
    /// Region of the node (may be empty).
    pub region: String,
    /// Collector URL, such as `http://collector:7470`.
    pub collector: String,
    /// Time between two probes to one peer.
    pub interval: Duration,
    /// Length of a window.
    pub window: Duration,
    /// How long a probe waits for its reply.
    pub probe_timeout: Duration,
    /// Most windows kept while waiting for acks.
    pub max_buffered_windows: usize,
    /// Port of the throughput server on the node's addresses; `None` runs
    /// none (the collector then plans no test with this node).
    pub throughput_port: Option<u16>,
    /// SO_SNDBUF and SO_RCVBUF of throughput streams; `None` lets the
    /// kernel tune them.
    pub throughput_buffer: Option<u32>,
    /// Port of /metrics and /healthz on the node's first address; `None`
    /// serves none.
    pub metrics_port: Option<u16>,
    /// TLS towards the collector (`None`: plain text).
    pub tls: Option<netaware_runtime::tls::Tls>,
    /// HTTPS on /metrics and /healthz (`None`: plain HTTP).
    pub metrics_tls: Option<netaware_runtime::http::HttpsConfig>,
    /// Whether to watch the echo requests that reach this node, which is
    /// how one-way loss is measured; it takes a raw socket (CAP_NET_RAW).
    pub inbound: InboundWatch,
    /// Which transports probe the peers.
    pub probe: transport_choice::ProbeMode,
    /// UDP port of the STAMP reflector on the node's addresses; `None`
    /// runs none (peers then probe this node by ICMP or TCP only).
    pub udp_port: Option<u16>,
    /// The pod's service-account token, read at each session and sent as
    /// `authorization: Bearer` (`None`: none sent).
    pub token_file: Option<std::path::PathBuf>,
}

/// Whether an agent watches the echo requests that reach its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboundWatch {
    /// Watch them; without the right to, say so in the log.
    Watch,
    /// Do not try: the caller knows it cannot, and has said so itself
    /// (the loopback demo, once for all its agents).
    Skip,
}

impl AgentConfig {
    /// Defaults for everything but identity: 1 s interval, 10 s windows,
    /// 1 s timeout, 10 minutes of windows buffered.
    pub fn new(node: &str, addresses: Vec<IpAddr>, zone: &str, collector: &str) -> Self {
        Self {
            node: node.to_owned(),
            addresses,
            networks: Vec::new(),
            zone: zone.to_owned(),
            region: String::new(),
            collector: collector.to_owned(),
            interval: Duration::from_secs(1),
            window: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(1),
            max_buffered_windows: 60,
            throughput_port: Some(DEFAULT_THROUGHPUT_PORT),
            throughput_buffer: None,
            metrics_port: None,
            tls: None,
            metrics_tls: None,
            inbound: InboundWatch::Watch,
            probe: transport_choice::ProbeMode::Auto,
            udp_port: Some(reflector::DEFAULT_PORT),
            token_file: None,
        }
    }

    /// Where the reflector and the throughput server answer: the first
    /// address of each family (`v4`, `v6`), then the node's address on
    /// each named network.
    fn listen_addresses(
        &self,
        v4: Option<std::net::Ipv4Addr>,
        v6: Option<std::net::Ipv6Addr>,
    ) -> Vec<IpAddr> {
        let mut addresses: Vec<IpAddr> = [v4.map(IpAddr::V4), v6.map(IpAddr::V6)]
            .into_iter()
            .flatten()
            .collect();
        for (_, address) in &self.networks {
            if !addresses.contains(address) {
                addresses.push(*address);
            }
        }
        addresses
    }

    fn check(&self) -> Result<(), AgentError> {
        let bad = |why: ConfigError| Err(AgentError::Config(why));
        if self.node.is_empty() {
            return bad(ConfigError::NoNode);
        }
        if self.zone.is_empty() {
            return bad(ConfigError::NoZone);
        }
        if self.addresses.is_empty() {
            return bad(ConfigError::NoAddress);
        }
        if self.interval < Duration::from_millis(10) || self.window < self.interval {
            return bad(ConfigError::Interval);
        }
        if self.probe_timeout.is_zero() || self.probe_timeout > self.window {
            return bad(ConfigError::ProbeTimeout);
        }
        Ok(())
    }
}

/// Whether this process may open the raw socket that watches inbound echo
/// requests (one-way loss): it needs CAP_NET_RAW, which ICMP probing
/// alone does not (`net.ipv4.ping_group_range` is enough for that).
pub fn can_watch_inbound() -> bool {
    inbound::can_open()
}

/// Checks that this process may open the ICMP socket that probing needs,
/// so that callers can say so before starting anything else.
pub fn check_icmp_permission() -> Result<(), AgentError> {
    icmp::Icmp::open(None, None, Arc::default()).map(drop)
}

/// A running agent.
#[derive(Debug)]
pub struct Agent {
    counters: Arc<Counters>,
    tasks: tokio::task::JoinSet<()>,
}

impl Agent {
    /// Opens the sockets and starts measuring and reporting. Stops when
    /// `shutdown` is cancelled.
    pub fn start(config: AgentConfig, shutdown: CancellationToken) -> Result<Self, AgentError> {
        config.check()?;
        let v4 = config.addresses.iter().find_map(|a| match a {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        });
        let v6 = config.addresses.iter().find_map(|a| match a {
            IpAddr::V6(v6) => Some(*v6),
            IpAddr::V4(_) => None,
        });
        let counters = Arc::new(Counters::default());
        let probers = Arc::new(open_probers(&config, v4, v6, &counters)?);
        let (peers_tx, peers_rx) = watch::channel(Vec::new());
        let (windows_tx, windows_rx) = mpsc::channel(16);
        let hello = Hello {
            node: config.node.clone(),
            addresses: config.addresses.iter().map(ToString::to_string).collect(),
            zone: config.zone.clone(),
            region: config.region.clone(),
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            window_ms: config.window.as_millis().try_into().unwrap_or(u32::MAX),
            probe_interval_ms: config.interval.as_millis().try_into().unwrap_or(u32::MAX),
            instance: rand::random(),
            throughput_port: config.throughput_port.map_or(0, u32::from),
            stamp_port: config.udp_port.map_or(0, u32::from),
            // Stamped as each session sends it.
            sent_unix_ms: 0,
            networks: config
                .networks
                .iter()
                .map(|(network, address)| netaware_proto::v1::NetworkAddress {
                    network: netaware_proto::convert::network_to_wire(network),
                    address: address.to_string(),
                })
                .collect(),
        };
        let timing = measure::MeasureTiming {
            interval: config.interval,
            window: config.window,
            probe_timeout: config.probe_timeout,
        };
        let server = match config.throughput_port {
            Some(port) => Some(throughput_server(
                config.listen_addresses(v4, v6).into_iter(),
                port,
                config.throughput_buffer,
                &shutdown,
            )?),
            None => None,
        };
        let (results_tx, results_rx) = mpsc::channel(64);
        let quiet = Arc::new(quiet::QuietPeers::default());
        let orders = throughput::orders::Orders {
            server,
            send_buffer: config.throughput_buffer,
            addresses: config.addresses.clone(),
            networks: config.networks.clone(),
            quiet: Arc::clone(&quiet),
            results: results_tx,
            counters: Arc::clone(&counters),
            shutdown: shutdown.clone(),
        };
        let mut tasks = tokio::task::JoinSet::new();
        if let Some(port) = config.metrics_port {
            let addr = std::net::SocketAddr::new(config.addresses[0], port);
            let listener =
                metrics::bind(addr).map_err(|source| AgentError::Metrics { addr, source })?;
            tasks.spawn(metrics::serve(
                listener,
                Arc::clone(&counters),
                config.metrics_tls.clone(),
                shutdown.clone(),
            ));
        }
        let (requests_tx, requests_rx) = mpsc::channel(1024);
        let watched = match config.inbound {
            InboundWatch::Watch => v4,
            InboundWatch::Skip => None,
        };
        match watched.map(inbound::open).transpose() {
            Ok(Some((socket, local))) => {
                tasks.spawn(inbound::watch(
                    socket,
                    local,
                    requests_tx,
                    Arc::clone(&counters),
                ));
            }
            Ok(None) if config.inbound == InboundWatch::Skip => {
                tracing::debug!("not watching inbound echo requests, as configured")
            }
            Ok(None) => {
                tracing::info!("no IPv4 address: one-way loss towards this node is not measured")
            }
            Err(err) => {
                tracing::warn!(%err, "cannot watch inbound echo requests: one-way loss is not measured")
            }
        }
        if let Some(port) = config.udp_port {
            for ip in config.listen_addresses(v4, v6) {
                let addr = std::net::SocketAddr::new(ip, port);
                let socket = reflector::bind(addr)
                    .map_err(|source| AgentError::Reflector { addr, source })?;
                tasks.spawn(reflector::serve(
                    socket,
                    Arc::clone(&counters),
                    shutdown.clone(),
                ));
            }
        }
        tasks.spawn(measure::run(
            probers,
            config.probe,
            timing,
            peers_rx,
            requests_rx,
            windows_tx,
            Arc::clone(&quiet),
            Arc::clone(&counters),
            shutdown.clone(),
        ));
        let links = session::Links {
            windows: windows_rx,
            results: results_rx,
            peers: peers_tx,
            orders,
        };
        // Checked once here, so that a bad URL or TLS set-up stops the
        // start; each session builds its own with the files as they are then.
        netaware_runtime::tls::endpoint(&config.collector, config.tls.as_ref())
            .map_err(ConfigError::from)?;
        tasks.spawn(session::run(
            session::Collector {
                url: config.collector.clone(),
                tls: config.tls.clone(),
                token_file: config.token_file.clone(),
            },
            hello,
            links,
            outbox::Outbox::new(config.max_buffered_windows),
            Arc::clone(&counters),
            shutdown,
        ));
        Ok(Self { counters, tasks })
    }

    /// The agent's counters.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// Waits until the agent has stopped.
    pub async fn wait(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Opens the probers that `config.probe` may use. Without the right to an
/// ICMP socket an agent that may use UDP and TCP goes on with those, and
/// says so; one told to probe by ICMP alone stops.
fn open_probers(
    config: &AgentConfig,
    v4: Option<std::net::Ipv4Addr>,
    v6: Option<std::net::Ipv6Addr>,
    counters: &Arc<Counters>,
) -> Result<probers::Probers, AgentError> {
    use netaware_core::transport::Transport;
    use transport_choice::ProbeMode;
    let wants =
        |t: Transport| config.probe == ProbeMode::Auto || config.probe == ProbeMode::Only(t);
    let icmp = |open: &dyn Fn() -> Result<icmp::Icmp, AgentError>| {
        if !wants(Transport::Icmp) {
            return Ok(None);
        }
        match open() {
            Ok(icmp) => Ok(Some(icmp)),
            Err(err) if config.probe == ProbeMode::Auto => {
                tracing::warn!(%err, "probing by UDP and TCP only");
                Ok(None)
            }
            Err(err) => Err(err),
        }
    };
    let udp = |addresses: &[IpAddr]| {
        wants(Transport::Udp)
            .then(|| udp::Udp::open(addresses, Arc::clone(counters)))
            .transpose()
            .map_err(AgentError::UdpSocket)
    };
    let primary = probers::Source {
        icmp: icmp(&|| icmp::Icmp::open(v4, v6, Arc::clone(counters)))?,
        udp: udp(&config.addresses)?,
        local: config.addresses.clone(),
    };
    let mut named = Vec::new();
    for (network, address) in &config.networks {
        let address = *address;
        let source = probers::Source {
            icmp: icmp(&|| icmp::Icmp::open_on(address, Arc::clone(counters)))?,
            udp: udp(&[address])?,
            local: vec![address],
        };
        named.push((network.clone(), source));
    }
    Ok(probers::Probers { primary, named })
}

/// Opens the throughput server on each of `addresses` (one per family).
fn throughput_server(
    addresses: impl Iterator<Item = IpAddr>,
    port: u16,
    buffer: Option<u32>,
    shutdown: &CancellationToken,
) -> Result<throughput::server::ServerHandle, AgentError> {
    let server = throughput::server::ServerHandle::new();
    for ip in addresses {
        let addr = std::net::SocketAddr::new(ip, port);
        let listener = throughput::server::bind(addr, buffer.map(|b| b as usize))
            .map_err(|source| AgentError::ThroughputServer { addr, source })?;
        server.serve(listener, shutdown.clone());
    }
    Ok(server)
}

/// The runtime an agent runs on: one thread. The agent is a probe loop
/// and a session; a thread per core would only add wake-ups between them.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Runs an agent until SIGINT or SIGTERM, then logs what it did: the body
/// of `netaware-agent` and `netaware agent`.
pub async fn run_until_signal(config: AgentConfig) -> Result<(), AgentError> {
    huge_pages::turn_off();
    let shutdown = netaware_runtime::shutdown_on_signal().map_err(AgentError::Signals)?;
    let agent = Agent::start(config, shutdown)?;
    let counters = agent.counters();
    agent.wait().await;
    tracing::info!(summary = %counters.summary(), "agent stopped");
    Ok(())
}
