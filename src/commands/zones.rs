//! `netaware zones`: each zone and its freshness, and the aggregates of
//! every zone pair.

use super::{NetworkArg, Target};
use crate::output::OutputArgs;
use crate::{json, render};

/// The flags of `zones`.
#[derive(Debug, clap::Args)]
pub struct ZonesArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    network: NetworkArg,
}

/// Prints the collector's zone summary.
pub async fn run(args: ZonesArgs) -> anyhow::Result<()> {
    let zones = args
        .target
        .connect()
        .await?
        .on(&args.network.network)
        .zones()
        .await?;
    args.output.print(&json::ZonesJson::from(&zones), |wide| {
        render::zones(&zones, wide)
    })
}
