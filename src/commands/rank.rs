//! `netaware rank`: the candidates for a job, best first, as the collector
//! ranks them, with what the extender answers for each.

use super::{PlacedByArg, Target};
use crate::output::OutputArgs;
use crate::{json, render};

/// The flags of `rank`.
#[derive(Debug, clap::Args)]
pub struct RankArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    network: PlacedByArg,
    /// Workers in the job.
    #[arg(long)]
    size: usize,
    /// A node where a worker already runs (repeat for more).
    #[arg(long = "peer")]
    peers: Vec<String>,
}

/// Prints the ranking.
pub async fn run(args: RankArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.size >= 1, "--size must be at least 1");
    let networks = args.network.networks.map_or_else(
        || vec![netaware_core::network::Network::primary()],
        |list| list.0,
    );
    let ranking = args
        .target
        .connect()
        .await?
        .rank_by(&networks, args.size, &args.peers)
        .await?;
    let answer = json::RankJson::from(&ranking);
    args.output
        .print(&answer, |wide| render::rank(&answer, args.size, wide))
}
