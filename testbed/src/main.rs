//! `netaware-testbed`: the evaluation, the load generator and the training
//! workload (see the crate documentation). Not part of the production
//! image.

use clap::{Parser, Subcommand};
use netaware_testbed::{evaluate, loadgen, workload};

/// The services' allocator (see the workspace manifest for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What proves netaware: evaluation, load generation, training traffic.
#[derive(Debug, Parser)]
#[command(name = "netaware-testbed", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drive many simulated agents against a collector and report its
    /// throughput, ack latency and memory.
    Loadgen(loadgen::LoadOptions),
    /// One worker of a data-parallel training job's traffic (ring
    /// all-reduce or parameter server) over TCP.
    Workload(workload::WorkloadOptions),
    /// Compare placements: real traffic on the lab, or the cluster
    /// simulator (EVALUATION.md).
    #[command(subcommand)]
    Evaluate(evaluate::EvaluateCommand),
    /// The agent, as `netaware agent`: `evaluate lab` starts the system in
    /// the lab's hosts from this very binary.
    #[command(hide = true)]
    Agent(netaware_agent::cli::AgentArgs),
    /// The collector, as `netaware collector` (see `agent`).
    #[command(hide = true)]
    Collector(netaware_collector::cli::CollectorArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let command = Cli::parse().command;
    let level = match command {
        Command::Agent(_) | Command::Collector(_) => "info",
        _ => "warn",
    };
    netaware_runtime::init_logging(level, netaware_runtime::LogFormat::Text);
    let shutdown = netaware_runtime::shutdown_on_signal;
    match command {
        Command::Agent(args) => Ok(netaware_agent::run_until_signal(args.config().await?).await?),
        Command::Collector(args) => {
            Ok(netaware_collector::run_until_signal(args.config().await?).await?)
        }
        Command::Loadgen(options) => {
            let report = loadgen::run(&options, shutdown()?).await?;
            if options.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{report}");
            }
            Ok(())
        }
        Command::Workload(options) => {
            let stop = shutdown()?;
            let report = tokio::select! {
                report = workload::run(&options) => report?,
                () = stop.cancelled() => anyhow::bail!("interrupted"),
            };
            if options.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{report}");
            }
            Ok(())
        }
        Command::Evaluate(command) => evaluate::run(command, shutdown()?).await,
    }
}
