//! `netaware-testbed evaluate sim`: the cluster simulator, every policy on the same
//! cluster, the same measurements and the same trace of jobs.

use netaware_core::extender::PolicyConfig;
use netaware_eval::cluster::{Cluster, ClusterSpec, score_config};
use netaware_eval::policies::Policy;
use netaware_eval::sim::{PolicySummary, WorkloadSpec, simulate, trace};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::plot::{Bar, Panel, bar_chart};

/// The flags of `netaware-testbed evaluate sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimOptions {
    /// Zones.
    #[arg(long, default_value_t = 16)]
    pub zones: usize,
    /// Nodes per zone.
    #[arg(long, default_value_t = 128)]
    pub nodes_per_zone: usize,
    /// Share of nodes with a degraded NIC (half slow, half lossy).
    #[arg(long, default_value_t = 0.05)]
    pub degraded_nodes: f64,
    /// Share of the pairs inside zones with a lossy path.
    #[arg(long, default_value_t = 0.01)]
    pub degraded_links: f64,
    /// Peers each agent probes (the collector's --max-peers); default: its
    /// zone and two nodes of every other zone.
    #[arg(long)]
    pub max_peers: Option<usize>,
    /// Jobs in the trace.
    #[arg(long, default_value_t = 800)]
    pub jobs: usize,
    /// Offered load (0 to 1) at the best pace the cluster allows.
    #[arg(long, default_value_t = 0.7)]
    pub load: f64,
    /// Gradient per iteration, MB.
    #[arg(long, default_value_t = 100.0)]
    pub gradient_mb: f64,
    /// netaware's --loss-threshold (default: the product's default).
    #[arg(long)]
    pub loss_threshold: Option<f64>,
    /// netaware with the extender's --strict-zone: a job waits for room
    /// in one zone rather than spill over.
    #[arg(long)]
    pub strict_zone: bool,
    /// Seed of the cluster, the measurements and the trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    /// Where the results go.
    pub output: super::OutputArgs,
}

/// What `netaware-testbed evaluate sim` writes to sim.json.
#[derive(Debug, serde::Serialize)]
pub struct SimReport {
    /// The simulated cluster.
    pub cluster: ClusterSpec,
    /// The job trace.
    pub workload: WorkloadSpec,
    /// Seed of the cluster, the measurements and the trace.
    pub seed: u64,
    /// Whether netaware ran with --strict-zone.
    pub strict_zone: bool,
    /// Every policy's figures.
    pub policies: Vec<PolicySummary>,
}

/// The simulation of `options`, every policy.
pub fn simulate_all(options: &SimOptions) -> anyhow::Result<SimReport> {
    for (name, share) in [
        ("--degraded-nodes", options.degraded_nodes),
        ("--degraded-links", options.degraded_links),
        ("--load", options.load),
    ] {
        anyhow::ensure!(
            share.is_finite() && (0.0..=1.0).contains(&share),
            "{name} must be between 0 and 1"
        );
    }
    anyhow::ensure!(
        options.zones >= 1 && options.nodes_per_zone >= 2,
        "at least one zone of two nodes"
    );
    anyhow::ensure!(
        options.gradient_mb.is_finite() && options.gradient_mb > 0.0,
        "--gradient-mb must be above 0"
    );
    let cluster_spec = ClusterSpec {
        zones: options.zones,
        nodes_per_zone: options.nodes_per_zone,
        degraded_nodes: options.degraded_nodes,
        degraded_links: options.degraded_links,
        max_peers: options
            .max_peers
            .unwrap_or(options.nodes_per_zone - 1 + 2 * (options.zones - 1)),
    };
    let workload = WorkloadSpec {
        jobs: options.jobs,
        gradient_bytes: options.gradient_mb * 1e6,
        load: options.load,
        ..WorkloadSpec::default()
    };
    let mut rng = StdRng::seed_from_u64(options.seed);
    let cluster = Cluster::generate(&cluster_spec, &mut rng);
    let matrix = cluster.measured(&score_config(), cluster_spec.max_peers, 0, &mut rng);
    let jobs = trace(&workload, cluster.names.len(), &mut rng);
    let mut config = PolicyConfig::default();
    if let Some(threshold) = options.loss_threshold {
        anyhow::ensure!(
            threshold.is_finite() && (0.0..=1.0).contains(&threshold),
            "--loss-threshold must be between 0 and 1"
        );
        config.placement.loss_threshold = threshold;
    }
    config.strict_zone = options.strict_zone;
    let mut policies = Vec::new();
    for policy in Policy::ALL {
        eprintln!("simulating {} jobs placed by {}", jobs.len(), policy.name());
        // Each policy draws from the same sequence.
        let mut policy_rng = StdRng::seed_from_u64(options.seed ^ 0x5eed);
        let results = simulate(
            &cluster,
            &matrix,
            &jobs,
            &workload,
            policy,
            &config,
            &mut policy_rng,
        );
        policies.push(PolicySummary::of(policy, &results));
    }
    Ok(SimReport {
        cluster: cluster_spec,
        workload,
        seed: options.seed,
        strict_zone: options.strict_zone,
        policies,
    })
}

/// The table for people.
pub fn render(report: &SimReport) -> String {
    let netaware = report.policies[0].mean_jct_s;
    let rows: Vec<Vec<String>> = report
        .policies
        .iter()
        .map(|p| {
            vec![
                p.policy.name().to_owned(),
                format!("{:.0}", p.mean_jct_s),
                format!("{:.0}", p.p90_jct_s),
                format!("{:.0}", p.mean_wait_s),
                format!("{:.3}", p.mean_iteration_s),
                format!("{:.0}%", p.multi_zone * 100.0),
                format!("{:.2}x", p.mean_jct_s / netaware.max(f64::MIN_POSITIVE)),
            ]
        })
        .collect();
    super::table(
        &[
            "POLICY",
            "MEAN JCT s",
            "P90 JCT s",
            "MEAN WAIT s",
            "MEAN ITER s",
            "MULTI-ZONE",
            "VS NETAWARE",
        ],
        &rows,
    )
}

/// Runs the simulator, prints the table, writes sim.json and sim.png.
pub fn run(options: &SimOptions) -> anyhow::Result<()> {
    let report = simulate_all(options)?;
    let json = super::write_json(&options.output.out, "sim.json", &report)?;
    let png = options.output.out.join("sim.png");
    let bars = report
        .policies
        .iter()
        .map(|p| Bar {
            label: p.policy.name().to_owned(),
            value: p.mean_jct_s / 3600.0,
            upper: Some(p.p90_jct_s / 3600.0),
        })
        .collect();
    bar_chart(
        &png,
        &format!(
            "{} jobs on {} nodes in {} zones",
            report.workload.jobs,
            options.zones * options.nodes_per_zone,
            options.zones
        ),
        "job completion time, h (bar: mean, black tick: p90)",
        &[Panel {
            title: "simulated cluster".into(),
            bars,
        }],
    )?;
    if options.output.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
        println!("wrote {} and {}", json.display(), png.display());
    }
    Ok(())
}
