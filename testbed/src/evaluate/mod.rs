//! `netaware-testbed evaluate`: does netaware's placement make training faster, and
//! by how much? Two experiments, each one command (EVALUATION.md):
//!
//! - [`lab`]: real training traffic (`netaware-testbed workload`) on the lab, a job
//!   placed by each policy in turn, in the same run;
//! - [`sim`]: a cluster of thousands of nodes and a trace of jobs, placed
//!   by each policy, timed by the alpha-beta model;
//! - [`schedulers`]: the same with racks and grey failures, netaware
//!   against Kueue TAS and Volcano driven by labels or by netaware's
//!   measured topology; [`racks`], that question on the lab.
//!
//! Both compare the policies of [`netaware_eval::policies`], print a table,
//! and write JSON and a PNG plot ([`plot`]) into `--out`.

pub mod estimates;
pub mod faults;
pub mod lab;
pub mod plot;
pub mod racks;
pub mod schedulers;
pub mod sim;

use std::path::{Path, PathBuf};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

/// The experiments.
#[derive(Debug, clap::Subcommand)]
pub enum EvaluateCommand {
    /// Real training traffic on the lab (root): a job placed by each policy.
    Lab(lab::LabOptions),
    /// A cluster of thousands of nodes and a trace of competing jobs.
    Sim(sim::SimOptions),
    /// How far off the RTT estimates of never-probed pairs are on a
    /// simulated fabric, with bounded peer sets.
    Estimates(estimates::EstimateOptions),
    /// How well faults planted on a simulated fabric are named, beside
    /// simpler methods.
    Faults(faults::FaultOptions),
    /// netaware against Kueue TAS and Volcano, each driven by labels as
    /// they should be, as clusters have them, and by netaware's topology,
    /// on a cluster with racks and grey failures.
    Schedulers(schedulers::SchedulerOptions),
    /// The same on the lab (root): two racks per zone, a bad rack uplink,
    /// a host labelled in the wrong rack, real all-reduce traffic.
    Racks(lab::LabOptions),
}

/// Where an experiment's results go.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Where the JSON and the plot go.
    #[arg(long, default_value = "evaluation")]
    pub out: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs one experiment until it ends or `shutdown` (SIGINT, SIGTERM),
/// which drops it: the lab, its processes and its namespaces go with it.
pub async fn run(command: EvaluateCommand, shutdown: CancellationToken) -> anyhow::Result<()> {
    let experiment = async {
        match command {
            EvaluateCommand::Lab(options) => lab::run(&options).await,
            EvaluateCommand::Racks(options) => racks::run(&options).await,
            // Pure computation, off the runtime's threads, so that a
            // signal still gets through.
            EvaluateCommand::Sim(options) => {
                tokio::task::spawn_blocking(move || sim::run(&options))
                    .await
                    .context("the simulation panicked")?
            }
            EvaluateCommand::Estimates(options) => {
                tokio::task::spawn_blocking(move || estimates::run(&options))
                    .await
                    .context("the experiment panicked")?
            }
            EvaluateCommand::Faults(options) => {
                tokio::task::spawn_blocking(move || faults::run(&options))
                    .await
                    .context("the experiment panicked")?
            }
            EvaluateCommand::Schedulers(options) => {
                tokio::task::spawn_blocking(move || schedulers::run(&options))
                    .await
                    .context("the simulation panicked")?
            }
        }
    };
    tokio::select! {
        done = experiment => done,
        () = shutdown.cancelled() => anyhow::bail!("interrupted: nothing written"),
    }
}

/// Writes `value` as pretty JSON to `out/name`, creating `out`.
fn write_json(out: &Path, name: &str, value: &impl serde::Serialize) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// A table for people: a header row and rows, columns padded.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut text = line(header.to_vec()) + "\n";
    for row in rows {
        text += &line(row.iter().map(String::as_str).collect());
        text += "\n";
    }
    text
}
