//! `netaware rank`: the candidates for a job, best first, as the collector
//! ranks them, with what the extender answers for each.

use super::{NetworkArg, Target};
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
    network: NetworkArg,
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
    let ranking = args
        .target
        .connect()
        .await?
        .on(&args.network.network)
        .rank(args.size, &args.peers)
        .await?;
    let answer = json::RankJson::from(&ranking);
    args.output
        .print(&answer, |wide| render::rank(&answer, args.size, wide))
}
