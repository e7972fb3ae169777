//! The agent's command-line flags, shared by the `netaware-agent` binary and
//! `netaware agent`.

use std::net::IpAddr;
use std::time::Duration;

use crate::AgentConfig;
use netaware_runtime::node_labels::{self, NodePlaceError, Place};

/// Why the flags do not make a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The node's zone could not be read.
    #[error("{0} (or give the zone with --zone)")]
    Topology(#[from] NodePlaceError),
    /// The TLS files could not be read.
    #[error(transparent)]
    Tls(#[from] netaware_runtime::tls::TlsError),
}

/// The `netaware-agent` binary's command line: the agent's flags, and how
/// it logs.
#[derive(Debug, clap::Parser)]
#[command(
    name = "netaware-agent",
    version,
    about = "The netaware node agent: probes its peers and streams windows of figures to the collector, until SIGINT or SIGTERM"
)]
pub struct AgentCommandLine {
    /// The agent's flags.
    #[command(flatten)]
    pub agent: AgentArgs,
    /// How it logs.
    #[command(flatten)]
    pub logs: netaware_runtime::LogArgs,
}

/// The agent's command-line flags (each also read from the environment
/// where noted, for the DaemonSet's downward API).
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// Name of this node.
    #[arg(long, env = "NETAWARE_NODE")]
    pub node: String,
    /// Address of this node that peers probe (repeat for more).
    #[arg(
        long = "address",
        env = "NETAWARE_ADDRESS",
        value_delimiter = ',',
        required = true
    )]
    pub addresses: Vec<IpAddr>,
    /// A network to measure beside the primary address (repeat for more):
    /// `NAME=CIDR` (the node's address inside the block) or
    /// `NAME=iface:IFNAME` (the interface's address), the same on every
    /// node; a node with no address on it takes no part in it.
    #[arg(long = "network", value_name = "NAME=CIDR|NAME=iface:IFNAME")]
    pub networks: Vec<netaware_core::network_address::NetworkRule>,
    /// Zone of this node.
    #[arg(
        long,
        env = "NETAWARE_ZONE",
        required_unless_present = "zone_from_node"
    )]
    pub zone: Option<String>,
    /// Region of this node.
    #[arg(long, env = "NETAWARE_REGION")]
    pub region: Option<String>,
    /// Read the zone and region from this node's Kubernetes Node labels
    /// (topology.kubernetes.io/zone and /region), as a DaemonSet does.
    #[arg(long, env = "NETAWARE_ZONE_FROM_NODE", conflicts_with = "zone")]
    pub zone_from_node: bool,
    /// Collector URL.
    #[arg(
        long,
        env = "NETAWARE_COLLECTOR",
        default_value = "http://127.0.0.1:7470"
    )]
    pub collector: String,
    /// Time between two probes to one peer.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Length of a measurement window.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// How long a probe waits for its reply.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub probe_timeout: Duration,
    /// Most unacknowledged windows kept while the collector is away.
    #[arg(long, default_value_t = 60)]
    pub max_buffered_windows: usize,
    /// TCP port of the throughput server on this node's addresses (0: run
    /// none, and take part in no throughput test).
    #[arg(long, env = "NETAWARE_THROUGHPUT_PORT", default_value_t = crate::DEFAULT_THROUGHPUT_PORT)]
    pub throughput_port: u16,
    /// Socket buffer size (bytes) of throughput streams; 0 lets the kernel
    /// tune it.
    #[arg(long, default_value_t = 0)]
    pub throughput_buffer: u32,
    /// TLS towards the collector (mutual with --tls-cert and --tls-key).
    #[command(flatten)]
    pub tls: netaware_runtime::tls::TlsArgs,
    /// HTTPS on /metrics and /healthz (with --tls-cert).
    #[command(flatten)]
    pub http_tls: netaware_runtime::tls::HttpTlsArgs,
    /// Which transports probe the peers: `auto` (ICMP where it gets
    /// through, else UDP, else a TCP handshake, per peer), or one of
    /// `icmp`, `udp`, `tcp` alone.
    #[arg(long, env = "NETAWARE_PROBE", default_value = "auto", value_parser = parse_probe_mode)]
    pub probe: crate::transport_choice::ProbeMode,
    /// UDP port of the STAMP reflector that answers peers' UDP probes on
    /// this node's addresses (0: run none).
    #[arg(long, env = "NETAWARE_UDP_PORT", default_value_t = crate::reflector::DEFAULT_PORT)]
    pub udp_port: u16,
    /// Port of /metrics and /healthz on this node's first address (0: none).
    #[arg(long, env = "NETAWARE_METRICS_PORT", default_value_t = crate::DEFAULT_METRICS_PORT)]
    pub metrics_port: u16,
    /// The pod's projected service-account token (audience netaware), sent
    /// to the collector as `authorization: Bearer` on every session, read
    /// again at each (kubelet rotates it): what a collector with
    /// `--agent-tokens` checks this node's identity by.
    #[arg(long, env = "NETAWARE_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

impl AgentArgs {
    /// The configuration these flags describe; with `--zone-from-node`, asks
    /// the Kubernetes API for the node's zone and region.
    pub async fn config(self) -> Result<AgentConfig, ConfigError> {
        let topology = match self.zone.clone() {
            Some(zone) => Place {
                zone,
                region: String::new(),
            },
            None => node_labels::read_in_cluster(&self.node).await?,
        };
        // An explicit --region wins over the label.
        let region = self.region.clone().unwrap_or(topology.region);
        let tls = self.tls.load()?;
        let metrics_tls = self.http_tls.server(tls.as_ref())?;
        Ok(AgentConfig {
            tls,
            metrics_tls,
            ..self.config_in(&topology.zone, region)
        })
    }

    fn config_in(self, zone: &str, region: String) -> AgentConfig {
        AgentConfig {
            region,
            interval: self.interval,
            window: self.window,
            probe_timeout: self.probe_timeout,
            max_buffered_windows: self.max_buffered_windows,
            throughput_port: (self.throughput_port != 0).then_some(self.throughput_port),
            throughput_buffer: (self.throughput_buffer != 0).then_some(self.throughput_buffer),
            metrics_port: (self.metrics_port != 0).then_some(self.metrics_port),
            probe: self.probe,
            udp_port: (self.udp_port != 0).then_some(self.udp_port),
            networks: crate::networks::find(&self.networks),
            token_file: self.token_file,
            ..AgentConfig::new(&self.node, self.addresses, zone, &self.collector)
        }
    }
}

fn parse_probe_mode(name: &str) -> Result<crate::transport_choice::ProbeMode, String> {
    crate::transport_choice::ProbeMode::from_name(name)
        .ok_or_else(|| format!("{name:?} is none of auto, icmp, udp, tcp"))
}
