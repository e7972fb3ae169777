//! Every `netaware` command, one file each: the three services
//! ([`agent`], [`collector`], [`scheduler`]: the one way to start each),
//! the questions an operator asks a running collector ([`matrix`],
//! [`zones`], [`estimate`], [`rank`], [`explain`], [`topology`], [`faults`],
//! [`doctor`]), the
//! tools ([`publish_topology`], [`certs`], [`throughput`], [`completion`]) and, with the
//! `lab` feature (on by default, off in the image), [`demo`] and [`lab`].

pub mod agent;
pub mod certs;
pub mod collector;
pub mod completion;
#[cfg(feature = "lab")]
pub mod demo;
pub mod doctor;
pub mod estimate;
pub mod explain;
pub mod faults;
#[cfg(feature = "lab")]
pub mod lab;
#[cfg(feature = "lab")]
pub mod lab_forge;
pub mod matrix;
pub mod publish_topology;
pub mod rank;
pub mod reflect;
pub mod scheduler;
pub mod throughput;
pub mod topology;
pub mod zones;

use clap::Subcommand;

use crate::client::ScoresConnection;

/// A `netaware` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a node agent (a DaemonSet's pod on every node).
    Agent(netaware_agent::cli::AgentArgs),
    /// Run the collector.
    Collector(netaware_collector::cli::CollectorArgs),
    /// Run the kube-scheduler extender.
    Scheduler(netaware_scheduler::cli::SchedulerArgs),
    /// Run the whole system on this machine: on the lab as root, else on loopback.
    #[cfg(feature = "lab")]
    Demo(demo::DemoOptions),
    /// Build a lab (hosts in network namespaces, emulated links) and keep it up.
    #[cfg(feature = "lab")]
    Lab(lab::LabArgs),
    /// In a lab host: answer ICMP echo requests ahead of time, or STAMP
    /// requests with a false hold (a test helper: a node that lies).
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    LabForge(lab_forge::LabForgeArgs),
    /// Answer UDP probes (STAMP, RFC 8762) on these addresses, as an
    /// agent does: for a host that runs no agent.
    Reflect(reflect::ReflectArgs),
    /// Run one throughput test by hand (server and client, like iperf3).
    #[command(subcommand)]
    Throughput(throughput::ThroughputCommand),
    /// Make a CA and the collector's, extender's and nodes' certificates
    /// for deploy/tls.
    Certs(certs::CertsOptions),
    /// Print the node pair matrix (measured pairs), page by page.
    Matrix(matrix::MatrixArgs),
    /// Print zones and zone-pair aggregates.
    Zones(zones::ZonesArgs),
    /// The RTT of a pair, or of a node to every other: measured where an
    /// agent probes it, else estimated (network coordinates, else zone
    /// averages), each with its basis.
    Estimate(estimate::EstimateArgs),
    /// The measured topology: each zone's blocks of close nodes, the
    /// degraded nodes, the costs between zones and regions; with --format,
    /// the objects that carry it to node labels, Kueue, Volcano or Diktyo,
    /// as YAML.
    Topology(topology::TopologyArgs),
    /// The faults found: the node, block uplink, zone link or path that
    /// explains each network's bad pairs, with its evidence, and the nodes
    /// whose zone label disagrees with what their links measure.
    Faults(faults::FaultsArgs),
    /// Keep the measured topology applied to a cluster as node labels,
    /// Kueue, Volcano or Diktyo objects (server-side apply, field manager
    /// netaware), until SIGINT or SIGTERM.
    PublishTopology(publish_topology::PublishArgs),
    /// What the extender would decide now for a job, and why: the zone,
    /// the next worker's node, each candidate's score and what holds it
    /// back, the nodes that may not take a worker.
    Explain(explain::ExplainArgs),
    /// Rank nodes for a job of K workers, with what the extender answers
    /// for each.
    Rank(rank::RankArgs),
    /// Print the shell completion script (bash, zsh, fish, elvish,
    /// powershell): `source <(netaware completion bash)`.
    Completion(completion::CompletionArgs),
    /// Check the installation, one line each with the fix: agents known,
    /// zone labels, stale nodes, whether probes get through (with --local,
    /// on a node: whether the agent may open an ICMP socket). Exits
    /// non-zero when something blocks placement.
    Doctor(doctor::DoctorArgs),
}

impl Command {
    /// Whether this command runs a service (which logs what it does; the
    /// tools only warn).
    pub fn is_service(&self) -> bool {
        matches!(
            self,
            Command::Agent(_)
                | Command::Reflect(_)
                | Command::Collector(_)
                | Command::Scheduler(_)
                | Command::PublishTopology(_)
        )
    }

    /// Runs the command to its end (a service: until SIGINT or SIGTERM).
    pub async fn run(self) -> anyhow::Result<()> {
        match self {
            Command::Agent(args) => agent::run(args).await,
            Command::Collector(args) => collector::run(args).await,
            Command::Scheduler(args) => scheduler::run(args).await,
            #[cfg(feature = "lab")]
            Command::Demo(options) => {
                demo::run(options, netaware_runtime::shutdown_on_signal()?).await
            }
            #[cfg(feature = "lab")]
            Command::Lab(args) => lab::run(args, netaware_runtime::shutdown_on_signal()?).await,
            #[cfg(feature = "lab")]
            Command::LabForge(args) => {
                lab_forge::run(args, netaware_runtime::shutdown_on_signal()?).await
            }
            Command::Reflect(args) => reflect::run(args).await,
            Command::Throughput(command) => {
                throughput::run(command, netaware_runtime::shutdown_on_signal()?).await
            }
            Command::Certs(options) => certs::print(&options),
            Command::Matrix(args) => matrix::run(args).await,
            Command::Zones(args) => zones::run(args).await,
            Command::Estimate(args) => estimate::run(args).await,
            Command::Topology(args) => topology::run(args).await,
            Command::Faults(args) => faults::run(args).await,
            Command::PublishTopology(args) => {
                publish_topology::run(args, netaware_runtime::shutdown_on_signal()?).await
            }
            Command::Explain(args) => explain::run(args).await,
            Command::Rank(args) => rank::run(args).await,
            Command::Doctor(args) => doctor::run(args).await,
            Command::Completion(args) => completion::print(&args),
        }
    }
}

/// Which network a command asks about.
#[derive(Debug, Clone, clap::Args)]
pub struct NetworkArg {
    /// The network: `primary` (the nodes' first addresses), a dual-stack
    /// cluster's other family (`primary-ipv6`, or `primary-ipv4`), or a
    /// network the agents measure by `--network NAME=...` (a rail).
    #[arg(long, default_value = netaware_core::network::PRIMARY, value_parser = parse_network)]
    pub network: netaware_core::network::Network,
}

pub(crate) fn parse_network(
    name: &str,
) -> Result<netaware_core::network::Network, netaware_core::network::InvalidNetwork> {
    netaware_core::network::Network::parse(name)
}

/// Which networks a job is placed by (`rank`, `explain`).
#[derive(Debug, Clone, clap::Args)]
pub struct PlacedByArg {
    /// The network, as for `matrix`, or a comma list (`rail-0,rail-1`):
    /// each pair then as good as its worst network, as the extender places
    /// pods whose `netaware.io/network` label lists them.
    #[arg(long = "network", value_name = "NETWORK[,NETWORK...]", value_parser = parse_networks)]
    pub networks: Option<NetworkList>,
}

/// Networks named by a comma list.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkList(pub Vec<netaware_core::network::Network>);

impl std::fmt::Display for NetworkList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&netaware_proto::convert::networks_to_wire(&self.0))
    }
}

fn parse_networks(list: &str) -> Result<NetworkList, netaware_core::network::InvalidNetworkList> {
    netaware_core::network::Network::parse_list(list).map(NetworkList)
}

/// Which collector a command asks, and how.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// Collector URL.
    #[arg(
        long,
        env = "NETAWARE_COLLECTOR",
        default_value = "http://127.0.0.1:7470"
    )]
    pub collector: String,
    /// TLS towards the collector.
    #[command(flatten)]
    pub tls: netaware_runtime::tls::TlsArgs,
}

impl Target {
    /// A connection to the collector.
    pub async fn connect(&self) -> anyhow::Result<ScoresConnection> {
        ScoresConnection::connect_with(&self.collector, self.tls.load()?.as_ref()).await
    }
}
