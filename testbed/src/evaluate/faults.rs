//! `netaware-testbed evaluate faults`: how well faults planted on a
//! simulated fabric are named, by netaware's localisation and by two
//! simpler methods, over held-out seeds (`netaware_eval::faults`).

use std::fmt::Write as _;

use netaware_eval::faults::{self, BenchSpec, RunOutcome, Scores};
use netaware_eval::stats::{bootstrap_mean_interval, quantile};
use rand::SeedableRng;

/// The fabric, the faults and the seeds.
#[derive(Debug, Clone, clap::Args)]
pub struct FaultOptions {
    /// Zones.
    #[arg(long, default_value_t = 8)]
    pub zones: usize,
    /// Nodes in each zone.
    #[arg(long, default_value_t = 250)]
    pub nodes_per_zone: usize,
    /// Nodes under one rack switch.
    #[arg(long, default_value_t = 25)]
    pub nodes_per_rack: usize,
    /// Peers each agent probes (the collector's --max-peers).
    #[arg(long, default_value_t = 64)]
    pub max_peers: usize,
    /// Seconds between two looks (the collector's --topology-interval),
    /// a multiple of the 10 s window.
    #[arg(long, default_value_t = 30)]
    pub look_every_s: u64,
    /// Seconds the faults last before the final look, a multiple of the
    /// 10 s window.
    #[arg(long, default_value_t = 900)]
    pub after_s: u64,
    /// Share of each node's time in throughput tests (the collector's
    /// --throughput-budget).
    #[arg(long, default_value_t = 0.02)]
    pub throughput_budget: f64,
    /// First seed (the method was tuned on seeds below 100).
    #[arg(long, default_value_t = 101)]
    pub first_seed: u64,
    /// Runs, one seed each.
    #[arg(long, default_value_t = 10)]
    pub runs: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the benchmark and prints its report.
pub fn run(options: &FaultOptions) -> anyhow::Result<()> {
    anyhow::ensure!(
        options.zones >= 2 && options.nodes_per_zone >= 4 && options.nodes_per_rack >= 2,
        "the benchmark needs two zones of four nodes and racks of two"
    );
    anyhow::ensure!(
        options.throughput_budget > 0.0 && options.throughput_budget <= 1.0,
        "the throughput budget must be above 0 and at most 1, not {}",
        options.throughput_budget
    );
    let spec = BenchSpec {
        zones: options.zones,
        nodes_per_zone: options.nodes_per_zone,
        nodes_per_rack: options.nodes_per_rack,
        max_peers: options.max_peers,
        look_every: (options.look_every_s / faults::WINDOW_S).max(1) as usize,
        windows_after: (options.after_s / faults::WINDOW_S).max(1) as usize,
        throughput_budget: options.throughput_budget,
        ..BenchSpec::default()
    };
    let mut outcomes = Vec::new();
    for k in 0..options.runs {
        let seed = options.first_seed + k;
        eprintln!(
            "run {}/{} (seed {seed}): {} nodes",
            k + 1,
            options.runs,
            spec.zones * spec.nodes_per_zone
        );
        outcomes.push(faults::run(
            spec,
            &mut rand::rngs::StdRng::seed_from_u64(seed),
        ));
    }
    let methods = [
        ("netaware", faults::score(&outcomes, |o| &o.named)),
        ("voting", faults::score(&outcomes, |o| &o.voting)),
        (
            "per-node threshold",
            faults::score(&outcomes, |o| &o.per_node),
        ),
    ];
    if options.json {
        let report = serde_json::json!({
            "spec": spec,
            "seeds": [options.first_seed, options.first_seed + options.runs - 1],
            "runs": outcomes,
            "methods": methods.iter().map(|(name, s)| serde_json::json!({"method": name, "scores": s})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", table(&spec, &outcomes, &methods));
    }
    Ok(())
}

fn table(spec: &BenchSpec, outcomes: &[RunOutcome], methods: &[(&str, Scores)]) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut out = format!(
        "{} runs, {} nodes ({} zones, racks of {}), at most {} peers an agent, a look every {} s, {} s of faults, throughput budget {}\n\n",
        outcomes.len(),
        spec.zones * spec.nodes_per_zone,
        spec.zones,
        spec.nodes_per_rack,
        spec.max_peers,
        spec.look_every as u64 * faults::WINDOW_S,
        spec.windows_after as u64 * faults::WINDOW_S,
        spec.throughput_budget
    );
    out.push_str("| method | precision (95% interval) | recall, >= 2% loss (95% interval) | localisation accuracy |\n|---|---:|---:|---:|\n");
    for (name, scores) in methods {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (plo, phi) = bootstrap_mean_interval(&scores.precision, 2_000, &mut rng);
        let (rlo, rhi) = bootstrap_mean_interval(&scores.recall_2pct, 2_000, &mut rng);
        let _ = writeln!(
            out,
            "| {name} | {:.1}% ({:.1}-{:.1}) | {:.1}% ({:.1}-{:.1}) | {:.1}% ({} of {}) |",
            mean(&scores.precision) * 100.0,
            plo * 100.0,
            phi * 100.0,
            mean(&scores.recall_2pct) * 100.0,
            rlo * 100.0,
            rhi * 100.0,
            scores.localised as f64 / scores.touched.max(1) as f64 * 100.0,
            scores.localised,
            scores.touched
        );
    }
    out.push_str("\nnetaware's recall by kind and size, and time from a fault's start to its naming:\n\n| fault | size | named | time to name: median, max (s) |\n|---|---:|---:|---:|\n");
    let mut rows: Vec<(String, String, usize, usize, Vec<f64>)> = Vec::new();
    for outcome in outcomes {
        for (planted, after) in outcome.planted.iter().zip(&outcome.named_after_s) {
            let kind = format!("{} ({})", planted.expected.kind, planted.expected.metric);
            let size = match planted.expected.metric {
                "loss" => format!("{:.0}%", planted.size * 100.0),
                "delay" => format!("{} ms", planted.size),
                "goodput" => format!("{:.0}% left", planted.size * 100.0),
                _ => "-".to_owned(),
            };
            let row = match rows.iter_mut().find(|r| r.0 == kind && r.1 == size) {
                Some(row) => row,
                None => {
                    rows.push((kind, size, 0, 0, Vec::new()));
                    rows.last_mut().expect("just pushed")
                }
            };
            row.3 += 1;
            if let Some(after) = after {
                row.2 += 1;
                row.4.push(*after as f64);
            }
        }
    }
    rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    for (kind, size, named, planted, times) in rows {
        let time = if times.is_empty() {
            "-".to_owned()
        } else {
            format!("{:.0}, {:.0}", quantile(&times, 0.5), quantile(&times, 1.0))
        };
        let _ = writeln!(out, "| {kind} | {size} | {named} of {planted} | {time} |");
    }
    let slowest = outcomes
        .iter()
        .map(|o| o.slowest_look_s)
        .fold(0.0, f64::max);
    let _ = writeln!(
        out,
        "\nslowest look (localisation of one network): {slowest:.2} s"
    );
    out
}
