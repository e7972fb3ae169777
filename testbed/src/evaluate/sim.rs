//! `netaware-testbed evaluate sim`: the cluster simulator. For each seed,
//! one cluster, one trace of jobs and one timeline of what is known
//! (measured by the product's code, or perfect), every policy on the same
//! three; then each figure's mean over the seeds with its 95% bootstrap
//! interval.

use std::time::Duration;

use netaware_core::placement::{PlacementConfig, Placer};
use netaware_eval::cluster::{Cluster, ClusterSpec, score_config};
use netaware_eval::fleet::{Fleet, FleetConfig};
use netaware_eval::information::{Coverage, Information, Timeline, View};
use netaware_eval::perfect;
use netaware_eval::policies::Policy;
use netaware_eval::sim::{PolicySummary, WorkloadSpec, simulate, trace};
use netaware_eval::stats::bootstrap_mean_interval;
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
    /// What netaware knows: `measured` (the product's own measuring on
    /// simulated probes) or `perfect` (every probed pair's truth).
    #[arg(long, default_value = "measured", value_parser = parse_information)]
    pub information: Information,
    /// The collector's --throughput-budget in measured mode.
    #[arg(long, default_value_t = 0.02)]
    pub budget: f64,
    /// How long the fleet has measured before the first job (measured mode).
    #[arg(long, default_value = "2h", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// How often placement sees a newer matrix (and Diktyo newer costs).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub view_every: Duration,
    /// The first seed (of the cluster, the measurements and the trace).
    /// Seeds 1 to 5 are for tuning and tests; reported figures use 101 on.
    #[arg(long, default_value_t = 101)]
    pub seed: u64,
    /// How many seeds, from --seed on.
    #[arg(long, default_value_t = 10)]
    pub seeds: u64,
    #[command(flatten)]
    /// Where the results go.
    pub output: super::OutputArgs,
}

fn parse_information(text: &str) -> Result<Information, String> {
    text.parse()
        .map_err(|e: netaware_eval::information::UnknownInformation| e.to_string())
}

/// One seed's run.
#[derive(Debug, serde::Serialize)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// Views placement went through.
    pub views: usize,
    /// What each view held of the truth.
    pub coverage: Vec<Coverage>,
    /// Every policy's figures, in [`Policy::ALL`]'s order.
    pub policies: Vec<PolicySummary>,
}

/// A figure over the seeds: its mean and 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// Mean over the seeds.
    pub mean: f64,
    /// Low end of the 95% interval.
    pub low: f64,
    /// High end of the 95% interval.
    pub high: f64,
}

impl Estimate {
    /// The mean of `values` and its 95% bootstrap interval.
    pub fn of(values: &[f64], rng: &mut StdRng) -> Self {
        let (low, high) = bootstrap_mean_interval(values, BOOTSTRAP_RESAMPLES, rng);
        Self {
            mean: netaware_eval::stats::mean(values),
            low,
            high,
        }
    }
}

const BOOTSTRAP_RESAMPLES: usize = 10_000;

/// One policy over every seed.
#[derive(Debug, serde::Serialize)]
pub struct PolicyEstimates {
    /// The policy.
    pub policy: Policy,
    /// Mean job completion time (s).
    pub mean_jct_s: Estimate,
    /// Median job completion time (s).
    pub p50_jct_s: Estimate,
    /// 90th percentile of job completion time (s).
    pub p90_jct_s: Estimate,
    /// Mean wait (s).
    pub mean_wait_s: Estimate,
    /// Share of jobs across zones.
    pub multi_zone: Estimate,
    /// Its mean JCT over netaware's, seed by seed.
    pub mean_jct_vs_netaware: Estimate,
    /// Its p90 JCT over netaware's, seed by seed.
    pub p90_jct_vs_netaware: Estimate,
}

/// What `netaware-testbed evaluate sim` writes to sim.json.
#[derive(Debug, serde::Serialize)]
pub struct SimReport {
    /// The simulated cluster.
    pub cluster: ClusterSpec,
    /// The job trace.
    pub workload: WorkloadSpec,
    /// What netaware knew.
    pub information: Information,
    /// How the fleet measured (measured mode).
    pub fleet: Option<FleetConfig>,
    /// Measuring before the first job (s).
    pub warmup_s: f64,
    /// Whether netaware ran with --strict-zone.
    pub strict_zone: bool,
    /// Every seed's run.
    pub runs: Vec<SeedRun>,
    /// Every policy over the seeds, in [`Policy::ALL`]'s order.
    pub policies: Vec<PolicyEstimates>,
}

/// Checks the flags' values.
pub fn check(options: &SimOptions) -> anyhow::Result<()> {
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
    anyhow::ensure!(
        options.budget.is_finite() && options.budget > 0.0 && options.budget <= 1.0,
        "--budget must be above 0 and at most 1"
    );
    anyhow::ensure!(options.seeds >= 1, "--seeds must be at least 1");
    anyhow::ensure!(
        options.view_every >= Duration::from_secs(10),
        "--view-every must be at least 10s"
    );
    if let Some(threshold) = options.loss_threshold {
        anyhow::ensure!(
            threshold.is_finite() && (0.0..=1.0).contains(&threshold),
            "--loss-threshold must be between 0 and 1"
        );
    }
    Ok(())
}

/// What is known over a run of `jobs_span_s`: a view every `every_s` of
/// the fleet's measuring, or the perfect matrix. The fleet measures from
/// `--warmup` before the first job, the cluster's grey failures timed from
/// the first job on.
pub fn timeline(
    options: &SimOptions,
    cluster: &Cluster,
    cluster_spec: &ClusterSpec,
    placement: PlacementConfig,
    jobs_span_s: f64,
    rng: &mut StdRng,
) -> anyhow::Result<(Timeline, Option<FleetConfig>)> {
    match options.information {
        Information::Perfect => Ok((
            Timeline::fixed(View::new(Placer::new(
                perfect::matrix(cluster, &score_config(), cluster_spec.max_peers, rng),
                placement,
            ))),
            None,
        )),
        Information::Measured => {
            let config = FleetConfig {
                budget: options.budget,
                ..FleetConfig::defaults(cluster_spec.max_peers)
            };
            let warmup_ms = options.warmup.as_millis() as u64;
            let mut fleet = Fleet::new(
                cluster,
                config,
                score_config(),
                placement,
                options.seed ^ 0xf1ee7,
            )?
            .with_trace_start(warmup_ms);
            let every_s = options.view_every.as_secs_f64();
            let count = (jobs_span_s / every_s).ceil() as u64 + 1;
            let views = (0..count)
                .map(|k| {
                    eprintln!("  measuring: view {} of {count}", k + 1);
                    fleet.view_at(warmup_ms + k * options.view_every.as_millis() as u64)
                })
                .collect();
            Ok((Timeline::new(0.0, every_s, views), Some(config)))
        }
    }
}

/// The simulated cluster's shape: the peer bound by default its zone and
/// two nodes of every other zone.
pub fn cluster_spec(options: &SimOptions) -> ClusterSpec {
    ClusterSpec {
        zones: options.zones,
        nodes_per_zone: options.nodes_per_zone,
        degraded_nodes: options.degraded_nodes,
        degraded_links: options.degraded_links,
        max_peers: options
            .max_peers
            .unwrap_or(options.nodes_per_zone - 1 + 2 * (options.zones - 1)),
        ..ClusterSpec::default()
    }
}

/// The jobs' mix.
pub fn workload(options: &SimOptions) -> WorkloadSpec {
    WorkloadSpec {
        jobs: options.jobs,
        gradient_bytes: options.gradient_mb * 1e6,
        load: options.load,
        ..WorkloadSpec::default()
    }
}

/// The settings netaware places by.
pub fn placement(options: &SimOptions) -> PlacementConfig {
    let mut config = PlacementConfig::default();
    if let Some(threshold) = options.loss_threshold {
        config.loss_threshold = threshold;
    }
    config.strict_zone = options.strict_zone;
    config
}

/// The simulation of `options`, every seed and every policy.
pub fn simulate_all(options: &SimOptions) -> anyhow::Result<SimReport> {
    check(options)?;
    let cluster_spec = cluster_spec(options);
    let workload = workload(options);
    let config = placement(options);
    let mut runs = Vec::new();
    let mut fleet = None;
    for seed in options.seed..options.seed + options.seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let cluster = Cluster::generate(&cluster_spec, &mut rng);
        let jobs = trace(&workload, cluster.names.len(), &mut rng);
        let span = jobs.last().map_or(0.0, |job| job.arrival_s);
        eprintln!(
            "seed {seed}: {} nodes, {} jobs over {:.0} min, netaware's information {}",
            cluster.names.len(),
            jobs.len(),
            span / 60.0,
            options.information.name()
        );
        let seeded = SimOptions {
            seed,
            ..options.clone()
        };
        let (timeline, fleet_config) =
            timeline(&seeded, &cluster, &cluster_spec, config, span, &mut rng)?;
        fleet = fleet_config;
        let mut policies = Vec::new();
        for policy in Policy::ALL {
            eprintln!(
                "  simulating {} jobs placed by {}",
                jobs.len(),
                policy.name()
            );
            // Each policy draws from the same sequence.
            let mut policy_rng = StdRng::seed_from_u64(seed ^ 0x5eed);
            let results = simulate(
                &cluster,
                &timeline,
                &jobs,
                &workload,
                &policy,
                &mut policy_rng,
            );
            policies.push(PolicySummary::of(policy, &results));
        }
        let coverage: Vec<Coverage> = timeline
            .views()
            .map(|view| Coverage::of(view, &cluster))
            .collect();
        if let Some(first) = coverage.first() {
            eprintln!(
                "  first view: goodput for {:.1}% of the pairs inside zones; degraded nodes failed {} of {}, healthy nodes failed {}",
                first.goodput_share * 100.0,
                first.degraded_caught,
                first.degraded_caught + first.degraded_missed,
                first.healthy_failed
            );
        }
        runs.push(SeedRun {
            seed,
            views: timeline.len(),
            coverage,
            policies,
        });
    }
    let mut rng = StdRng::seed_from_u64(options.seed ^ 0xb007);
    let policies = Policy::ALL
        .iter()
        .enumerate()
        .map(|(i, &policy)| {
            let of = |figure: fn(&PolicySummary) -> f64| -> Vec<f64> {
                runs.iter().map(|run| figure(&run.policies[i])).collect()
            };
            let ratio = |figure: fn(&PolicySummary) -> f64| -> Vec<f64> {
                runs.iter()
                    .map(|run| {
                        figure(&run.policies[i]) / figure(&run.policies[0]).max(f64::MIN_POSITIVE)
                    })
                    .collect()
            };
            PolicyEstimates {
                policy,
                mean_jct_s: Estimate::of(&of(|p| p.mean_jct_s), &mut rng),
                p50_jct_s: Estimate::of(&of(|p| p.p50_jct_s), &mut rng),
                p90_jct_s: Estimate::of(&of(|p| p.p90_jct_s), &mut rng),
                mean_wait_s: Estimate::of(&of(|p| p.mean_wait_s), &mut rng),
                multi_zone: Estimate::of(&of(|p| p.multi_zone), &mut rng),
                mean_jct_vs_netaware: Estimate::of(&ratio(|p| p.mean_jct_s), &mut rng),
                p90_jct_vs_netaware: Estimate::of(&ratio(|p| p.p90_jct_s), &mut rng),
            }
        })
        .collect();
    Ok(SimReport {
        cluster: cluster_spec,
        workload,
        information: options.information,
        fleet,
        warmup_s: options.warmup.as_secs_f64(),
        strict_zone: options.strict_zone,
        runs,
        policies,
    })
}

/// An estimate for people: its mean and interval.
pub fn with_interval(estimate: &Estimate, digits: usize) -> String {
    format!(
        "{:.digits$} [{:.digits$}, {:.digits$}]",
        estimate.mean, estimate.low, estimate.high
    )
}

/// The table for people: means over the seeds with 95% intervals.
pub fn render(report: &SimReport) -> String {
    let rows: Vec<Vec<String>> = report
        .policies
        .iter()
        .map(|p| {
            vec![
                p.policy.name().to_owned(),
                with_interval(&p.mean_jct_s, 0),
                with_interval(&p.p50_jct_s, 0),
                with_interval(&p.p90_jct_s, 0),
                with_interval(&p.mean_wait_s, 0),
                format!("{:.0}%", p.multi_zone.mean * 100.0),
                with_interval(&p.mean_jct_vs_netaware, 2),
                with_interval(&p.p90_jct_vs_netaware, 2),
            ]
        })
        .collect();
    let seeds = report.runs.iter().map(|r| r.seed);
    let (first, last) = (seeds.clone().min().unwrap_or(0), seeds.max().unwrap_or(0));
    format!(
        "{} seeds ({first} to {last}), netaware's information: {}; mean over seeds [95% interval]\n{}",
        report.runs.len(),
        report.information.name(),
        super::table(
            &[
                "POLICY",
                "MEAN JCT s",
                "P50 JCT s",
                "P90 JCT s",
                "MEAN WAIT s",
                "MULTI-ZONE",
                "MEAN VS NETAWARE",
                "P90 VS NETAWARE",
            ],
            &rows,
        )
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
            value: p.p50_jct_s.mean / 60.0,
            upper: Some(p.p90_jct_s.mean / 60.0),
        })
        .collect();
    bar_chart(
        &png,
        &format!(
            "{} jobs on {} nodes in {} zones, {} seeds, {} information",
            report.workload.jobs,
            options.zones * options.nodes_per_zone,
            options.zones,
            report.runs.len(),
            report.information.name()
        ),
        "job completion time, min (bar: p50, black tick: p90; means over seeds)",
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
