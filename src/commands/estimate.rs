//! `netaware estimate`: a pair's RTT, or a node's to every other, and what
//! each rests on (measured, coordinates, zone average).

use super::{NetworkArg, Target};
use crate::output::OutputArgs;
use crate::{json, render};

/// The flags of `estimate`.
#[derive(Debug, clap::Args)]
pub struct EstimateArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    network: NetworkArg,
    /// The probing node.
    #[arg(long)]
    src: String,
    /// The probed node; default: every other node.
    #[arg(long)]
    dst: Option<String>,
}

/// Prints the estimates.
pub async fn run(args: EstimateArgs) -> anyhow::Result<()> {
    let estimate = args
        .target
        .connect()
        .await?
        .on(&args.network.network)
        .estimate(&args.src, args.dst.as_deref())
        .await?;
    args.output
        .print(&json::EstimateJson::from(&estimate), |wide| {
            render::estimate(&estimate, wide)
        })
}
