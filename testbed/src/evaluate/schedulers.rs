//! `netaware-testbed evaluate schedulers`: netaware against the schedulers
//! a platform team runs (Kueue TAS, Volcano), each driven by rack labels
//! as they should be, as clusters have them, and by the topology netaware
//! publishes; on a simulated cluster with racks behind oversubscribed
//! uplinks and grey failures that come and go. For each seed: one cluster,
//! its labels, one trace of jobs, one schedule of failures and one
//! timeline of what netaware measured; every scheduler on the same;
//! then each figure's mean over the seeds with its 95% bootstrap interval.

use netaware_eval::cluster::Cluster;
use netaware_eval::grey::{self, GreySpec};
use netaware_eval::labels::{LabelErrors, NodePlaces};
use netaware_eval::schedulers::{Labelled, Scheduler};
use netaware_eval::sim::{Summary, simulate, trace};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::sim::{
    Estimate, SimOptions, cluster_spec, placement, timeline, with_interval, workload,
};

/// The flags of `netaware-testbed evaluate schedulers`.
#[derive(Debug, Clone, clap::Args)]
pub struct SchedulerOptions {
    /// The cluster, the jobs, what netaware knows, the seeds (as for
    /// `evaluate sim`).
    #[command(flatten)]
    pub sim: SimOptions,
    /// Nodes under one rack switch.
    #[arg(long, default_value_t = 16)]
    pub nodes_per_rack: usize,
    /// A rack's uplink carries its NICs' rate over this.
    #[arg(long, default_value_t = 4.0)]
    pub rack_oversubscription: f64,
    /// Grey failures of NICs and rack uplinks, as a multiple of the
    /// Llama 3 record's rate (netaware_eval::grey); 0: none.
    #[arg(long, default_value_t = 1.0)]
    pub grey_rate: f64,
    /// Share of nodes without a rack label, in labels as clusters have
    /// them.
    #[arg(long, default_value_t = LabelErrors::default().missing)]
    pub missing_labels: f64,
    /// Share of nodes labelled with another rack of their zone.
    #[arg(long, default_value_t = LabelErrors::default().wrong)]
    pub wrong_labels: f64,
}

/// One seed's run.
#[derive(Debug, serde::Serialize)]
pub struct SeedRun {
    /// The seed.
    pub seed: u64,
    /// Grey failures over the run.
    pub grey_failures: usize,
    /// Every scheduler, in [`Scheduler::ALL`]'s order.
    pub schedulers: Vec<Summary<Scheduler>>,
}

/// One scheduler over every seed.
#[derive(Debug, serde::Serialize)]
pub struct SchedulerEstimates {
    /// Which.
    pub scheduler: Scheduler,
    /// Its name in the table.
    pub name: String,
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
    /// Share of jobs across racks.
    pub multi_rack: Estimate,
    /// Share of jobs that ran over a grey failure.
    pub on_fault: Estimate,
    /// Its mean JCT over netaware's, seed by seed.
    pub mean_jct_vs_netaware: Estimate,
    /// Its p90 JCT over netaware's, seed by seed.
    pub p90_jct_vs_netaware: Estimate,
}

/// What the command writes to schedulers.json.
#[derive(Debug, serde::Serialize)]
pub struct SchedulerReport {
    /// Nodes under one rack switch.
    pub nodes_per_rack: usize,
    /// Rack uplinks' oversubscription.
    pub rack_oversubscription: f64,
    /// The grey failures' rates.
    pub grey: GreySpec,
    /// The errors of labels as clusters have them.
    pub label_errors: LabelErrors,
    /// Every seed's run.
    pub runs: Vec<SeedRun>,
    /// Every scheduler over the seeds, in [`Scheduler::ALL`]'s order.
    pub schedulers: Vec<SchedulerEstimates>,
}

/// Every scheduler on every seed.
pub fn evaluate(options: &SchedulerOptions) -> anyhow::Result<SchedulerReport> {
    let sim = &options.sim;
    super::sim::check(sim)?;
    anyhow::ensure!(
        options.nodes_per_rack >= 2 && options.nodes_per_rack < sim.nodes_per_zone,
        "--nodes-per-rack must be at least 2 and fewer than a zone's nodes"
    );
    anyhow::ensure!(
        options.rack_oversubscription.is_finite() && options.rack_oversubscription >= 1.0,
        "--rack-oversubscription must be at least 1"
    );
    anyhow::ensure!(
        options.grey_rate.is_finite() && options.grey_rate >= 0.0,
        "--grey-rate must be 0 or more"
    );
    for (name, share) in [
        ("--missing-labels", options.missing_labels),
        ("--wrong-labels", options.wrong_labels),
    ] {
        anyhow::ensure!(
            (0.0..=1.0).contains(&share),
            "{name} must be between 0 and 1"
        );
    }
    let spec = netaware_eval::cluster::ClusterSpec {
        nodes_per_rack: options.nodes_per_rack,
        rack_oversubscription: options.rack_oversubscription,
        ..cluster_spec(sim)
    };
    let workload = workload(sim);
    let config = placement(sim);
    let grey_spec = if options.grey_rate > 0.0 {
        GreySpec::scaled(options.grey_rate)
    } else {
        GreySpec::NONE
    };
    let errors = LabelErrors {
        missing: options.missing_labels,
        wrong: options.wrong_labels,
    };
    let mut runs = Vec::new();
    for seed in sim.seed..sim.seed + sim.seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let cluster = Cluster::generate(&spec, &mut rng);
        let jobs = trace(&workload, cluster.names.len(), &mut rng);
        let span = jobs.last().map_or(0.0, |job| job.arrival_s);
        // Failures over the trace and as long again (jobs run on).
        let faults = grey::draw(
            &grey_spec,
            cluster.names.len(),
            cluster.rack_count(),
            2.0 * span,
            &mut rng,
        );
        let grey_failures = faults.len();
        let cluster = cluster.with_grey(faults);
        let correct = NodePlaces::correct(&cluster);
        let stale = NodePlaces::as_clusters_have_them(&cluster, &errors, &mut rng);
        eprintln!(
            "seed {seed}: {} nodes in {} racks, {} jobs over {:.0} min, {grey_failures} grey failures",
            cluster.names.len(),
            cluster.rack_count(),
            jobs.len(),
            span / 60.0
        );
        let seeded = SimOptions {
            seed,
            ..sim.clone()
        };
        let (timeline, _) = timeline(&seeded, &cluster, &spec, config, span, &mut rng)?;
        let mut schedulers = Vec::new();
        for scheduler in Scheduler::ALL {
            eprintln!(
                "  simulating {} jobs placed by {}",
                jobs.len(),
                scheduler.name()
            );
            let labelled = Labelled {
                scheduler,
                correct: &correct,
                stale: &stale,
            };
            let mut scheduler_rng = StdRng::seed_from_u64(seed ^ 0x5eed);
            let results = simulate(
                &cluster,
                &timeline,
                &jobs,
                &workload,
                &labelled,
                &mut scheduler_rng,
            );
            schedulers.push(Summary::of(scheduler, &results));
        }
        runs.push(SeedRun {
            seed,
            grey_failures,
            schedulers,
        });
    }
    let mut rng = StdRng::seed_from_u64(sim.seed ^ 0xb007);
    let schedulers = Scheduler::ALL
        .iter()
        .enumerate()
        .map(|(i, &scheduler)| {
            let of = |figure: fn(&Summary<Scheduler>) -> f64| -> Vec<f64> {
                runs.iter().map(|run| figure(&run.schedulers[i])).collect()
            };
            let ratio = |figure: fn(&Summary<Scheduler>) -> f64| -> Vec<f64> {
                runs.iter()
                    .map(|run| {
                        figure(&run.schedulers[i])
                            / figure(&run.schedulers[0]).max(f64::MIN_POSITIVE)
                    })
                    .collect()
            };
            SchedulerEstimates {
                scheduler,
                name: scheduler.name(),
                mean_jct_s: Estimate::of(&of(|p| p.mean_jct_s), &mut rng),
                p50_jct_s: Estimate::of(&of(|p| p.p50_jct_s), &mut rng),
                p90_jct_s: Estimate::of(&of(|p| p.p90_jct_s), &mut rng),
                mean_wait_s: Estimate::of(&of(|p| p.mean_wait_s), &mut rng),
                multi_zone: Estimate::of(&of(|p| p.multi_zone), &mut rng),
                multi_rack: Estimate::of(&of(|p| p.multi_rack), &mut rng),
                on_fault: Estimate::of(&of(|p| p.on_fault), &mut rng),
                mean_jct_vs_netaware: Estimate::of(&ratio(|p| p.mean_jct_s), &mut rng),
                p90_jct_vs_netaware: Estimate::of(&ratio(|p| p.p90_jct_s), &mut rng),
            }
        })
        .collect();
    Ok(SchedulerReport {
        nodes_per_rack: options.nodes_per_rack,
        rack_oversubscription: options.rack_oversubscription,
        grey: grey_spec,
        label_errors: errors,
        runs,
        schedulers,
    })
}

/// The table for people.
pub fn render(report: &SchedulerReport) -> String {
    let percent = |e: &Estimate| format!("{:.0}%", e.mean * 100.0);
    let rows: Vec<Vec<String>> = report
        .schedulers
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                with_interval(&s.mean_jct_s, 0),
                with_interval(&s.p50_jct_s, 0),
                with_interval(&s.p90_jct_s, 0),
                with_interval(&s.mean_wait_s, 0),
                percent(&s.multi_zone),
                percent(&s.multi_rack),
                percent(&s.on_fault),
                with_interval(&s.mean_jct_vs_netaware, 2),
                with_interval(&s.p90_jct_vs_netaware, 2),
            ]
        })
        .collect();
    let seeds = report.runs.iter().map(|r| r.seed);
    let (first, last) = (seeds.clone().min().unwrap_or(0), seeds.max().unwrap_or(0));
    let failures: usize = report.runs.iter().map(|r| r.grey_failures).sum();
    format!(
        "{} seeds ({first} to {last}), racks of {} behind {}:1 uplinks, {failures} grey failures in all; mean over seeds [95% interval]\n{}",
        report.runs.len(),
        report.nodes_per_rack,
        report.rack_oversubscription,
        super::table(
            &[
                "SCHEDULER",
                "MEAN JCT s",
                "P50 JCT s",
                "P90 JCT s",
                "MEAN WAIT s",
                "MULTI-ZONE",
                "MULTI-RACK",
                "ON A FAULT",
                "MEAN VS NETAWARE",
                "P90 VS NETAWARE",
            ],
            &rows,
        )
    )
}

/// Runs the comparison, prints the table, writes schedulers.json.
pub fn run(options: &SchedulerOptions) -> anyhow::Result<()> {
    let report = evaluate(options)?;
    let json = super::write_json(&options.sim.output.out, "schedulers.json", &report)?;
    if options.sim.output.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
        println!("wrote {}", json.display());
    }
    Ok(())
}
