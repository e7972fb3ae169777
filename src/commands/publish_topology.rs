//! `netaware publish-topology`: keeps the collector's measured topology
//! applied to a cluster as node labels, Kueue, Volcano or Diktyo objects,
//! and acts on its open network faults: an Event on each Node a fault is
//! about, and with `--taint-faults` a NoSchedule taint on a node with a
//! node fault.
//!
//! The publisher is its own process, not a part of the collector: the
//! collector holds every measurement and may only read Nodes (get, for
//! `--zones-from-nodes`); the publisher needs to write Nodes' labels and
//! the consumers' custom resources, and only it gets that right
//! (deploy/components/publish-topology, off by default). It runs as one
//! replica with the Recreate strategy, so two never run at once in a
//! rollout; were two to run, both would apply the same objects, read from
//! the same collector, under one field manager: the writes are idempotent,
//! so it needs no leader election.

use std::collections::BTreeSet;
use std::time::Duration;

use netaware_core::faults::tracker::Fault;
use netaware_proto::convert::fault_from_wire;
use netaware_publish::{Format, Publisher, PublisherOptions};
use tokio_util::sync::CancellationToken;

use super::topology::{RenderArgs, fetch};

/// The flags of `publish-topology`.
#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The collector, and TLS towards it.
    #[command(flatten)]
    pub target: super::Target,
    /// Whose blocks to publish (one network per publisher: the labels
    /// and objects have one name each).
    #[command(flatten)]
    pub network: super::NetworkArg,
    /// What to publish (repeat for more): labels, kueue, volcano, diktyo.
    #[arg(long = "format", value_enum, required = true)]
    pub formats: Vec<Format>,
    /// Time between two reads of the collector's topology.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Least time between two writes to the API server.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
    pub min_write_gap: Duration,
    /// Names and places of the single objects.
    #[command(flatten)]
    pub render: RenderArgs,
    /// Put the NoSchedule taint `netaware.io/network-fault` on each node
    /// with an open node fault, and take it off when the fault clears (so
    /// that every scheduler, and Kueue's node replacement, avoid it).
    /// Without it, netaware's taints come off. Either way each fault that
    /// opens or clears is an Event on the Nodes it is about.
    #[arg(long)]
    pub taint_faults: bool,
}

/// Reads the collector's topology every interval and applies what changed,
/// until `shutdown`.
pub async fn run(args: PublishArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await.map_err(|err| {
        anyhow::anyhow!("no Kubernetes API to publish to (in a pod, or a kubeconfig): {err}")
    })?;
    let options = PublisherOptions {
        formats: args.formats.iter().copied().collect::<BTreeSet<_>>(),
        render: args.render.options(),
        min_write_gap: args.min_write_gap,
        taint_faults: args.taint_faults,
        // A pod's name is its host name.
        instance: std::env::var("HOSTNAME").unwrap_or_else(|_| "netaware-publish-topology".into()),
    };
    let mut publisher = Publisher::start(client, options).await?;
    tracing::info!(formats = ?args.formats, collector = %args.target.collector, network = %args.network.network, "publishing the measured topology");
    let mut last_observed = 0;
    loop {
        let round = async {
            let mut scores = args.target.connect().await?.on(&args.network.network);
            let (topology, observed) = fetch(&mut scores).await?;
            if observed == last_observed {
                return anyhow::Ok(None);
            }
            let open: Vec<Fault> = scores
                .faults(Some(&args.network.network))
                .await?
                .faults
                .iter()
                .filter_map(fault_from_wire)
                .collect();
            let published = publisher.publish(&topology).await;
            let acted = publisher.act_on_faults(&open).await;
            Ok(Some((published, acted, observed)))
        };
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            done = round => match done {
                Ok(Some((report, acted, observed))) => {
                    last_observed = observed;
                    tracing::info!(
                        applied = report.applied,
                        unchanged = report.unchanged,
                        removed = report.removed,
                        failed = report.failed,
                        fault_events = acted.events,
                        tainted = acted.tainted,
                        untainted = acted.untainted,
                        fault_writes_failed = acted.failed,
                        "published"
                    );
                }
                Ok(None) => tracing::debug!("no new round of the topology"),
                Err(err) => tracing::warn!(%err, "no topology this round"),
            },
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(args.interval) => {}
        }
    }
}
