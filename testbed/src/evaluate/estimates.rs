//! `netaware-testbed evaluate estimates`: how far off the RTT estimates of
//! pairs that bounded peer sets never probe are, on a simulated fabric of
//! thousands of nodes (`netaware_eval::fabric`, `netaware_eval::estimates`).

use std::fmt::Write as _;

use netaware_eval::estimates::{self, EstimateReport, EstimateRun};
use netaware_eval::fabric::{Fabric, FabricSpec, PairClass};
use rand::SeedableRng;

/// The fabric and the probing.
#[derive(Debug, Clone, clap::Args)]
pub struct EstimateOptions {
    /// Zones.
    #[arg(long, default_value_t = 10)]
    pub zones: usize,
    /// Nodes in each zone.
    #[arg(long, default_value_t = 500)]
    pub nodes_per_zone: usize,
    /// Nodes under one top-of-rack switch.
    #[arg(long, default_value_t = 32)]
    pub nodes_per_rack: usize,
    /// Share of slow nodes.
    #[arg(long, default_value_t = 0.01)]
    pub slow_nodes: f64,
    /// Peers each agent probes (the collector's --max-peers).
    #[arg(long, default_value_t = 64)]
    pub max_peers: usize,
    /// Rotation steps probed before judging.
    #[arg(long, default_value_t = 6)]
    pub epochs: u64,
    /// Passes of the coordinates over the medians in one step.
    #[arg(long, default_value_t = 30)]
    pub passes: usize,
    /// Never-probed pairs judged per class.
    #[arg(long, default_value_t = 20_000)]
    pub judged: usize,
    /// Seed of the fabric, the probe noise and the order of samples.
    #[arg(long, default_value_t = 101)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the experiment and prints its report.
pub fn run(options: &EstimateOptions) -> anyhow::Result<()> {
    anyhow::ensure!(
        options.zones > 0 && options.nodes_per_zone > 1 && options.nodes_per_rack > 0,
        "a fabric needs a zone of two nodes and racks of one"
    );
    let spec = FabricSpec {
        zones: options.zones,
        nodes_per_zone: options.nodes_per_zone,
        nodes_per_rack: options.nodes_per_rack,
        slow_nodes: options.slow_nodes,
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed);
    eprintln!(
        "drawing a fabric of {} nodes",
        spec.zones * spec.nodes_per_zone
    );
    let fabric = Fabric::generate(&spec, &mut rng);
    eprintln!(
        "probing {} rotation steps of at most {} peers each, {} passes a step",
        options.epochs, options.max_peers, options.passes
    );
    let run = EstimateRun {
        max_peers: options.max_peers,
        epochs: options.epochs,
        passes_per_epoch: options.passes,
        judged_pairs: options.judged,
    };
    let report = estimates::run(&fabric, run, &mut rng);
    if options.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", table(&report));
    }
    Ok(())
}

fn table(report: &EstimateReport) -> String {
    let n = report.nodes as f64;
    let mut out = format!(
        "{} nodes, at most {} peers an agent, {} of {} directed pairs probed ({:.1}%)\n",
        report.nodes,
        report.most_peers_per_agent,
        report.probed_pairs,
        report.nodes * (report.nodes - 1),
        report.probed_pairs as f64 / (n * (n - 1.0)) * 100.0
    );
    out.push_str(
        "pairs never probed   judged  median error  p90 error  median |error|  within own bound  coordinates alone\n",
    );
    for class in &report.classes {
        let name = match class.class {
            PairClass::IntraZone => "inside a zone",
            PairClass::InterZone => "between zones",
            PairClass::SameRack => "inside a rack (of those inside a zone)",
        };
        let _ = writeln!(
            out,
            "{name:<20} {:>7}  {:>11.1}%  {:>8.1}%  {:>11.3} ms  {:>15.0}%  {:>16.1}%",
            class.pairs,
            class.median_relative * 100.0,
            class.p90_relative * 100.0,
            class.median_abs_ms,
            class.within_error_bound * 100.0,
            class.median_relative_coordinates_only * 100.0
        );
    }
    out
}
