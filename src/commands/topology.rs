//! `netaware topology`: the collector's measured topology (blocks of
//! close nodes, degraded marks, costs between zones and regions) shown to
//! people, or printed as the Kubernetes objects other schedulers read
//! (`--format`); [`super::publish_topology`] keeps them applied.

use netaware_core::measured_topology::MeasuredTopology;
use netaware_proto::convert::topology_from_wire;
use netaware_proto::v1 as pb;
use netaware_publish::{KueueVersion, RenderOptions};

use super::{NetworkArg, Target};
use crate::client::ScoresConnection;
use crate::output::OutputArgs;
use crate::{json, render};

/// The flags of `topology`.
#[derive(Debug, clap::Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    /// Whose blocks: a rail's are the racks of the backend fabric, which a
    /// job placed by that rail should pack into.
    #[command(flatten)]
    network: NetworkArg,
    /// Print these objects as YAML (for review, or `kubectl apply
    /// --server-side -f -`).
    #[arg(long, value_enum)]
    format: Option<netaware_publish::Format>,
    #[command(flatten)]
    render: RenderArgs,
}

/// Prints the topology, or the objects that carry it.
pub async fn run(args: TopologyArgs) -> anyhow::Result<()> {
    let mut scores = args.target.connect().await?.on(&args.network.network);
    let (topology, observed) = fetch(&mut scores).await?;
    if let Some(format) = args.format {
        let objects = netaware_publish::render(&topology, format, &args.render.options());
        print!("{}", netaware_publish::objects::to_yaml(&objects)?);
        return Ok(());
    }
    let answer = json::TopologyJson::new(&topology, observed);
    args.output
        .print(&answer, |wide| render::topology(&answer, wide))
}

/// Names and places of the objects that are not one per node or block.
#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// The Kueue Topology's name (what a ResourceFlavor's
    /// spec.topologyName names).
    #[arg(long, default_value = "netaware")]
    pub kueue_topology_name: String,
    /// The version of Kueue's API to write the Topology in.
    #[arg(long, value_enum, default_value = "v1beta2")]
    pub kueue_version: KueueVersion,
    /// The Diktyo NetworkTopology's name (the NetworkOverhead plugin's
    /// networkTopologyName).
    #[arg(long, default_value = "netaware")]
    pub diktyo_name: String,
    /// Its namespace (one of the plugin's namespaces).
    #[arg(long, default_value = "default")]
    pub diktyo_namespace: String,
    /// Its spec.configmapName, which the CRD requires (the plugin reads
    /// the costs from spec.weights).
    #[arg(long, default_value = "netaware")]
    pub diktyo_configmap: String,
}

impl RenderArgs {
    /// The render options these flags describe.
    pub fn options(&self) -> RenderOptions {
        RenderOptions {
            kueue_name: self.kueue_topology_name.clone(),
            kueue_version: self.kueue_version,
            diktyo_name: self.diktyo_name.clone(),
            diktyo_namespace: self.diktyo_namespace.clone(),
            diktyo_configmap: self.diktyo_configmap.clone(),
        }
    }
}

/// The collector's topology, or an error that says why there is none yet.
pub async fn fetch(scores: &mut ScoresConnection) -> anyhow::Result<(MeasuredTopology, u64)> {
    let wire: pb::Topology = scores.topology().await?;
    let observed = wire.observed_unix_ms;
    anyhow::ensure!(
        observed > 0,
        "the collector has not worked out the topology yet: its first round comes one \
         --topology-interval (30 s by default) after it starts"
    );
    Ok((topology_from_wire(wire), observed))
}
