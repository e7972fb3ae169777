//! `netaware-testbed evaluate lab`: real training traffic on the lab. In
//! each round the whole system measures a freshly built lab (agents,
//! collector, throughput tests at `--throughput-budget`); then, with the
//! measuring stopped so that it does not share the links, a k-worker job
//! placed by netaware from that round's matrix runs real iterations
//! (`netaware-testbed workload`, one process per worker, in the workers'
//! hosts), ring all-reduce and parameter server. The first round also runs
//! every draw of the other policies (they read no measurements but
//! Diktyo's zone costs, which come from that round's matrix).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, bail};
use netaware_eval::information::View;
use netaware_eval::policies::Policy;
use netaware_eval::stats;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::plot::{Bar, Panel, bar_chart};
use crate::workload::{Pattern, WorkerReport};
use netaware::lab_system::{AgentTiming, COLLECTOR_PORT, LabSystem};

/// The flags of `netaware-testbed evaluate lab`.
#[derive(Debug, Clone, clap::Args)]
pub struct LabOptions {
    /// Lab topology: a shipped name or a YAML file.
    #[arg(long, default_value = "default")]
    pub topology: String,
    /// Workers of the job.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    /// Traffic patterns to run (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ring,ps")]
    pub patterns: Vec<Pattern>,
    /// Gradient per iteration, MB (ResNet-50: about 100).
    #[arg(long, default_value_t = 100.0)]
    pub gradient_mb: f64,
    /// Compute per iteration.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    pub compute: Duration,
    /// Iterations timed per placement and pattern.
    #[arg(long, default_value_t = 3)]
    pub iterations: u32,
    /// Goodput (bit/s) at which a pair's throughput term reaches 1: the
    /// lab's fabric speed, as an operator sets it to the cluster's.
    #[arg(long, default_value_t = 200e6)]
    pub throughput_reference_bps: f64,
    /// Share of each node's time in throughput tests (the collector's
    /// --throughput-budget). The product's default, 0.02, takes some 12
    /// minutes to test the 18 pairs inside the lab's zones once; 0.5 about
    /// one.
    #[arg(long, default_value_t = 0.5)]
    pub throughput_budget: f64,
    /// Longest wait for the measurements (every pair inside a zone with a
    /// goodput).
    #[arg(long, default_value = "20m", value_parser = humantime::parse_duration)]
    pub measure_timeout: Duration,
    /// Rounds of measuring a fresh lab and placing netaware's job.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub netaware_runs: u32,
    /// Placements drawn for each other policy (they choose at random among
    /// nodes they cannot tell apart).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub draws: u32,
    /// Seed of the first draw (draw d uses seed + d).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    /// Where the results go.
    pub output: super::OutputArgs,
}

/// One policy's placement and what the job did on it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PlacementRun {
    /// The policy that placed the job.
    pub policy: String,
    /// The traffic pattern (ring or ps).
    pub pattern: String,
    /// Which draw of the policy's placements (netaware's: which round of
    /// measuring).
    pub draw: u32,
    /// The hosts of the workers, in rank order.
    pub hosts: Vec<String>,
    /// Zones they span.
    pub zones: usize,
    /// The job's seconds per iteration: the slowest worker's, iteration by
    /// iteration.
    pub iterations_s: Vec<f64>,
    /// Median seconds per iteration.
    pub median_s: f64,
    /// 90th percentile of seconds per iteration.
    pub p90_s: f64,
}

/// What `netaware-testbed evaluate lab` writes to lab.json.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LabReport {
    /// The lab topology.
    pub topology: String,
    /// Workers per job.
    pub workers: usize,
    /// Gradient size (MB).
    pub gradient_mb: f64,
    /// Compute pause per iteration (ms).
    pub compute_ms: u64,
    /// Timed iterations per job.
    pub iterations: u32,
    /// The collector's throughput budget while it measured.
    pub throughput_budget: f64,
    /// Every placement run.
    pub runs: Vec<PlacementRun>,
    /// What netaware measured inside the zones before it placed, round by
    /// round: the figures its placements came from.
    #[serde(default)]
    pub measured: Vec<Vec<MeasuredPair>>,
}

/// One pair inside a zone as the collector scored it when netaware placed.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MeasuredPair {
    /// Where the probes and the throughput test started.
    pub src: String,
    /// Where they went.
    pub dst: String,
    /// Median RTT (ms), when probes came back.
    pub rtt_median_ms: Option<f64>,
    /// Highest p99 RTT of the windows kept (ms).
    #[serde(default)]
    pub rtt_p99_ms: Option<f64>,
    /// Mean jitter (ms): with the median, what the delay term reads.
    #[serde(default)]
    pub jitter_ms: Option<f64>,
    /// The delay, loss and throughput terms behind the quality.
    #[serde(default)]
    pub terms: [f64; 3],
    /// Loss ratio, 0 to 1, when probes were sent.
    pub loss_ratio: Option<f64>,
    /// Goodput of the latest throughput test (bit/s).
    pub throughput_bps: Option<f64>,
    /// The pair's quality, 0 to 1.
    pub quality: f64,
}

impl LabReport {
    /// The runs of `policy` with `pattern`, one per draw.
    pub fn runs_of(&self, policy: Policy, pattern: Pattern) -> Vec<&PlacementRun> {
        self.runs
            .iter()
            .filter(|r| r.policy == policy.name() && r.pattern == pattern.name())
            .collect()
    }

    /// The mean over the draws of `policy`'s median seconds per iteration
    /// with `pattern`: what a job can expect from that policy.
    pub fn expected_s(&self, policy: Policy, pattern: Pattern) -> Option<f64> {
        let medians: Vec<f64> = self
            .runs_of(policy, pattern)
            .iter()
            .map(|r| r.median_s)
            .collect();
        (!medians.is_empty()).then(|| stats::mean(&medians))
    }
}

const TIMING: AgentTiming = AgentTiming {
    interval: Duration::from_millis(200),
    window: Duration::from_secs(2),
    probe_timeout: Duration::from_millis(500),
};

/// The port every worker listens on, in its own host.
const WORKLOAD_PORT: u16 = 7600;

/// Builds the lab, measures it, and runs the job on every policy's
/// placement; netaware's in each round, from a fresh lab and matrix.
pub async fn measure_and_run(options: &LabOptions) -> anyhow::Result<LabReport> {
    if !netaware_lab::is_root() {
        bail!("the lab needs root (network namespaces, TUN devices)");
    }
    anyhow::ensure!(options.workers >= 2, "--workers must be at least 2");
    anyhow::ensure!(!options.patterns.is_empty(), "no --patterns");
    anyhow::ensure!(
        options.throughput_budget > 0.0 && options.throughput_budget <= 1.0,
        "--throughput-budget must be above 0 and at most 1"
    );
    let mut runs = Vec::new();
    let mut measured = Vec::new();
    for round in 0..options.netaware_runs {
        eprintln!(
            "round {} of {}: measuring a fresh lab",
            round + 1,
            options.netaware_runs
        );
        let policies: Vec<(Policy, u32)> = std::iter::once((Policy::Netaware, round))
            .chain(
                (round == 0)
                    .then(|| {
                        Policy::ALL
                            .into_iter()
                            .filter(|p| *p != Policy::Netaware)
                            .flat_map(|policy| (0..options.draws).map(move |draw| (policy, draw)))
                    })
                    .into_iter()
                    .flatten(),
            )
            .collect();
        let (round_runs, round_measured) = measure_and_place(options, &policies).await?;
        runs.extend(round_runs);
        measured.push(round_measured);
    }
    Ok(LabReport {
        topology: options.topology.clone(),
        workers: options.workers,
        gradient_mb: options.gradient_mb,
        compute_ms: options.compute.as_millis() as u64,
        iterations: options.iterations,
        throughput_budget: options.throughput_budget,
        runs,
        measured,
    })
}

/// One round: a fresh lab measured by the whole system, then the job on
/// each of `placements` (a policy and its draw); with the runs, the pairs
/// inside zones as measured.
async fn measure_and_place(
    options: &LabOptions,
    placements: &[(Policy, u32)],
) -> anyhow::Result<(Vec<PlacementRun>, Vec<MeasuredPair>)> {
    let topology = netaware_lab::Topology::load(&options.topology)?;
    let round = Measured::on(topology, options).await?;
    let mut runs = Vec::new();
    for &(policy, draw) in placements {
        let mut rng = StdRng::seed_from_u64(options.seed + u64::from(draw));
        let placed = policy
            .place(&round.view, &round.free(), options.workers, &mut rng)
            .with_context(|| {
                format!(
                    "{} could not place {} workers",
                    policy.name(),
                    options.workers
                )
            })?;
        runs.extend(round.run(policy.name(), draw, &placed, options).await?);
    }
    let measured = round.measured.clone();
    round.end();
    Ok((runs, measured))
}

/// A lab the whole system has measured, its measuring stopped so that the
/// jobs placed from what it measured get the links to themselves.
pub struct Measured {
    system: LabSystem,
    exe: std::path::PathBuf,
    /// What placement reads: the matrix and settings the collector served.
    pub view: View,
    /// The pairs inside zones as measured.
    pub measured: Vec<MeasuredPair>,
    /// Every worker host: name, zone, address.
    hosts: Vec<(String, String, String)>,
}

impl std::fmt::Debug for Measured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measured")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Measured {
    /// Builds `topology`'s lab, measures it until every pair inside a zone
    /// has a goodput, and stops the measuring.
    pub async fn on(
        topology: netaware_lab::Topology,
        options: &LabOptions,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("finding the netaware binary")?;
        let flags: Vec<String> = [
            "--throughput-duration=1s",
            "--throughput-omit=1s",
            "--throughput-max-concurrent=2",
            // Placement stays in a zone: the pairs inside zones are what
            // decides, and measuring them alone takes a third of the time.
            "--throughput-same-zone-only",
        ]
        .map(String::from)
        .into_iter()
        .chain([
            format!(
                "--throughput-reference-bps={}",
                options.throughput_reference_bps
            ),
            format!("--throughput-budget={}", options.throughput_budget),
        ])
        .collect();
        let mut system =
            tokio::task::block_in_place(|| LabSystem::start(topology, &exe, TIMING, &flags))?;
        let (placer, measured) = measured_placer(&system, options.measure_timeout).await?;
        let view = View::new(placer);
        // The job gets the links to itself, as it would between two probes.
        let hosts: Vec<(String, String, String)> = system
            .lab()
            .workers()
            .map(|h| {
                (
                    h.spec.name.clone(),
                    h.spec.zone.clone(),
                    h.spec.address.to_string(),
                )
            })
            .collect();
        tokio::task::block_in_place(|| {
            for (name, ..) in &hosts {
                let _ = system.stop_agent(name);
            }
            system.stop_collector();
        });
        Ok(Self {
            system,
            exe,
            view,
            measured,
            hosts,
        })
    }

    /// Every worker host's name: all free for a job.
    pub fn free(&self) -> Vec<String> {
        self.hosts.iter().map(|(name, ..)| name.clone()).collect()
    }

    /// Runs the job on `placed` (placed by `policy`, its `draw`), once per
    /// pattern.
    pub async fn run(
        &self,
        policy: &str,
        draw: u32,
        placed: &[String],
        options: &LabOptions,
    ) -> anyhow::Result<Vec<PlacementRun>> {
        let zones: BTreeSet<&str> = placed
            .iter()
            .filter_map(|p| {
                self.hosts
                    .iter()
                    .find(|(n, ..)| n == p)
                    .map(|(_, z, _)| z.as_str())
            })
            .collect();
        let mut runs = Vec::new();
        for &pattern in &options.patterns {
            eprintln!(
                "running {} placed by {policy} (draw {draw}) on {}: {} zone(s)",
                pattern.name(),
                placed.join(", "),
                zones.len()
            );
            let reports = run_job(
                &self.system,
                &self.exe,
                placed,
                &self.hosts,
                pattern,
                options,
            )
            .await?;
            let iterations_s = slowest_worker(&reports);
            runs.push(PlacementRun {
                policy: policy.to_owned(),
                pattern: pattern.name().to_owned(),
                draw,
                hosts: placed.to_vec(),
                zones: zones.len(),
                median_s: stats::median(&iterations_s),
                p90_s: stats::quantile(&iterations_s, 0.9),
                iterations_s,
            });
        }
        Ok(runs)
    }

    /// Removes the lab.
    pub fn end(self) {
        tokio::task::block_in_place(|| drop(self.system));
    }
}

/// Waits until every pair inside a zone has a goodput, then reads the
/// matrix over gRPC (through the lab's side door to the control host):
/// the placer it gives and the pairs inside zones.
async fn measured_placer(
    system: &LabSystem,
    timeout: Duration,
) -> anyhow::Result<(netaware_core::placement::Placer, Vec<MeasuredPair>)> {
    let access = system.lab().open_access("control")?;
    let url = format!("http://{access}:{COLLECTOR_PORT}");
    let zone_of = |name: &str| {
        system
            .lab()
            .workers()
            .find(|h| h.spec.name == name)
            .map(|h| h.spec.zone.clone())
    };
    let hosts: Vec<String> = system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .collect();
    let expected = hosts
        .iter()
        .flat_map(|a| hosts.iter().map(move |b| (a, b)))
        .filter(|(a, b)| a != b && zone_of(a) == zone_of(b))
        .count();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let matrix = match netaware::client::ScoresConnection::connect(&url).await {
            Ok(mut scores) => scores.matrix().await.ok(),
            Err(_) => None,
        };
        let with_goodput = matrix.as_ref().map_or(0, |m| {
            m.pairs
                .iter()
                .filter(|p| p.throughput_bps.is_some() && zone_of(&p.src) == zone_of(&p.dst))
                .count()
        });
        eprintln!("measuring: {with_goodput} of {expected} pairs inside zones have a goodput");
        if let Some(matrix) = matrix.filter(|_| with_goodput >= expected) {
            let inside_zones = matrix
                .pairs
                .iter()
                .filter(|p| zone_of(&p.src) == zone_of(&p.dst))
                .map(|p| MeasuredPair {
                    src: p.src.clone(),
                    dst: p.dst.clone(),
                    rtt_median_ms: p.rtt_median_ms,
                    rtt_p99_ms: p.rtt_p99_ms,
                    jitter_ms: p.jitter_ms,
                    terms: p
                        .terms
                        .map_or([0.0; 3], |t| [t.delay, t.loss, t.throughput]),
                    loss_ratio: p.loss_ratio,
                    throughput_bps: p.throughput_bps,
                    quality: p.quality,
                })
                .collect();
            // Placed by the settings the collector sent with it.
            return Ok((
                netaware_proto::convert::placer_from_wire(&matrix),
                inside_zones,
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("only {with_goodput} of {expected} pairs measured after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// Runs one job: a `netaware-testbed workload` per worker, in its host.
async fn run_job(
    system: &LabSystem,
    exe: &std::path::Path,
    placed: &[String],
    hosts: &[(String, String, String)],
    pattern: Pattern,
    options: &LabOptions,
) -> anyhow::Result<Vec<WorkerReport>> {
    let address = |name: &str| {
        hosts
            .iter()
            .find(|(n, ..)| n == name)
            .map(|(.., a)| format!("{a}:{WORKLOAD_PORT}"))
            .expect("a lab host")
    };
    let workers = placed
        .iter()
        .map(|p| address(p))
        .collect::<Vec<_>>()
        .join(",");
    let exe = exe.to_str().context("the binary's path is not UTF-8")?;
    let mut runs = Vec::new();
    for (rank, host) in placed.iter().enumerate() {
        let mut command = system.lab().command(host, exe)?;
        command
            .arg("workload")
            .args(["--rank", &rank.to_string()])
            .args(["--workers", &workers])
            .args(["--pattern", pattern.name()])
            .args(["--gradient-mb", &options.gradient_mb.to_string()])
            .args(["--compute", &format!("{}ms", options.compute.as_millis())])
            .args(["--iterations", &options.iterations.to_string()])
            .arg("--json");
        runs.push(
            tokio::process::Command::from(command)
                .kill_on_drop(true)
                .output(),
        );
    }
    let mut reports = Vec::new();
    for (output, host) in futures::future::join_all(runs)
        .await
        .into_iter()
        .zip(placed)
    {
        let output = output.with_context(|| format!("starting the worker in {host}"))?;
        if !output.status.success() {
            bail!(
                "the worker in {host} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        reports.push(
            serde_json::from_slice(&output.stdout)
                .with_context(|| format!("the report of the worker in {host}"))?,
        );
    }
    Ok(reports)
}

/// The job's time per iteration: the slowest worker's, iteration by
/// iteration.
pub fn slowest_worker(reports: &[WorkerReport]) -> Vec<f64> {
    let iterations = reports
        .iter()
        .map(|r| r.iterations_s.len())
        .min()
        .unwrap_or(0);
    (0..iterations)
        .map(|i| {
            reports
                .iter()
                .map(|r| r.iterations_s[i])
                .fold(0.0, f64::max)
        })
        .collect()
}

/// The tables for people: every run, then each policy's expectation.
pub fn render(report: &LabReport, patterns: &[Pattern]) -> String {
    let netaware = |pattern: &str| {
        patterns
            .iter()
            .find(|p| p.name() == pattern)
            .and_then(|&p| report.expected_s(Policy::Netaware, p))
            .unwrap_or(f64::NAN)
    };
    let rows: Vec<Vec<String>> = report
        .runs
        .iter()
        .map(|run| {
            vec![
                run.pattern.clone(),
                run.policy.clone(),
                run.draw.to_string(),
                run.hosts.join(","),
                run.zones.to_string(),
                format!("{:.2}", run.median_s),
                format!("{:.2}", run.p90_s),
                format!("{:.2}x", run.median_s / netaware(&run.pattern)),
            ]
        })
        .collect();
    let mut text = super::table(
        &[
            "PATTERN",
            "POLICY",
            "DRAW",
            "HOSTS",
            "ZONES",
            "MEDIAN s/ITER",
            "P90 s/ITER",
            "VS NETAWARE",
        ],
        &rows,
    );
    let expected: Vec<Vec<String>> = patterns
        .iter()
        .flat_map(|&pattern| {
            Policy::ALL.into_iter().filter_map(move |policy| {
                let expected = report.expected_s(policy, pattern)?;
                let runs = report.runs_of(policy, pattern);
                let medians = runs.iter().map(|r| r.median_s);
                let lowest = medians.clone().fold(f64::INFINITY, f64::min);
                let highest = medians.fold(0.0, f64::max);
                Some(vec![
                    pattern.name().to_owned(),
                    policy.name().to_owned(),
                    runs.len().to_string(),
                    format!("{expected:.2}"),
                    format!("{lowest:.2} to {highest:.2}"),
                    format!("{:.2}x", expected / netaware(pattern.name())),
                ])
            })
        })
        .collect();
    text.push('\n');
    text += &super::table(
        &[
            "PATTERN",
            "POLICY",
            "RUNS",
            "EXPECTED s/ITER",
            "RANGE OF MEDIANS",
            "VS NETAWARE",
        ],
        &expected,
    );
    text
}

/// Runs the experiment, prints the table, writes lab.json and lab.png.
pub async fn run(options: &LabOptions) -> anyhow::Result<()> {
    let report = measure_and_run(options).await?;
    let json = super::write_json(&options.output.out, "lab.json", &report)?;
    let png = options.output.out.join("lab.png");
    let panels: Vec<Panel> = options
        .patterns
        .iter()
        .map(|pattern| Panel {
            title: format!("{} ({} MB)", pattern.name(), report.gradient_mb),
            bars: Policy::ALL
                .into_iter()
                .filter_map(|policy| {
                    let runs = report.runs_of(policy, *pattern);
                    Some(Bar {
                        label: policy.name().to_owned(),
                        value: report.expected_s(policy, *pattern)?,
                        upper: runs.iter().map(|r| r.p90_s).reduce(f64::max),
                    })
                })
                .collect(),
        })
        .collect();
    bar_chart(
        &png,
        &format!(
            "{} workers on the {} lab, throughput budget {}",
            report.workers, report.topology, report.throughput_budget
        ),
        "s per iteration (bar: mean of draws' medians, tick: worst p90)",
        &panels,
    )?;
    if options.output.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report, &options.patterns));
        println!("wrote {} and {}", json.display(), png.display());
    }
    Ok(())
}
