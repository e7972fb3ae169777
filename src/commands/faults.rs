//! `netaware faults`: what the collector's fault localisation found: the
//! nodes, block uplinks, zone links and paths that explain each network's
//! bad pairs, and the nodes whose zone label their links contradict.

use super::{Target, parse_network};
use crate::output::OutputArgs;
use crate::{json, render};

/// The flags of `faults`.
#[derive(Debug, clap::Args)]
pub struct FaultsArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    /// Only this network's faults (default: every network's).
    #[arg(long, value_parser = parse_network)]
    network: Option<netaware_core::network::Network>,
}

/// Prints the open faults.
pub async fn run(args: FaultsArgs) -> anyhow::Result<()> {
    let answer = args
        .target
        .connect()
        .await?
        .faults(args.network.as_ref())
        .await?;
    let faults = json::FaultsJson::from(&answer);
    args.output
        .print(&faults, |wide| render::faults(&faults, wide))
}
