//! `netaware demo`: the whole system on this machine.
//!
//! As root it runs on the lab ([`lab`]): hosts in network namespaces in three
//! zones, joined by emulated links with real delay, loss and rate, the
//! collector in a host of its own and an agent in every other host, each a
//! real `netaware` process. Without root it runs on loopback ([`loopback`]),
//! where every link is the same and the zones differ only by name. Either
//! way it shows progress while the first windows fill, then the zones, the
//! matrix and a placement, and serves until Ctrl-C or the duration ends.
//! Started as a user, it asks sudo to run the lab ([`as_root`]), or says
//! in one line what command would, and runs on loopback.

pub mod as_root;
pub mod forward;
pub mod lab;
pub mod loopback;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Settings of one demo run (the flags of `netaware demo`).
#[derive(Debug, Clone, clap::Args)]
pub struct DemoOptions {
    /// Stop after this long (for example 30s); default: until Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Collector gRPC address (loopback mode).
    #[arg(long, default_value = "127.0.0.1:7470")]
    pub listen: SocketAddr,
    /// Collector HTTP address (loopback mode); on the lab, where the web
    /// view is forwarded to on this machine.
    #[arg(long, default_value = "127.0.0.1:9470")]
    pub metrics_listen: SocketAddr,
    /// Length of the agents' windows.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// Time between two probes to one peer.
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    pub interval: Duration,
    /// Workers of the sample job; by default as many as the largest zone holds.
    #[arg(long)]
    pub job_size: Option<usize>,
    /// Lab topology: a shipped name (default, small, bench, ipv6: IPv6 only,
    /// dual: dual-stack, rails: a second network, rail-0, with faults of
    /// its own) or a YAML file.
    #[arg(long, default_value = "default")]
    pub topology: String,
    /// Run on loopback even as root.
    #[arg(long)]
    pub loopback: bool,
    /// Share of each node's time for throughput tests. Higher than a
    /// cluster's default (0.02) so that every pair has a goodput within a
    /// few minutes; 0 runs no tests.
    #[arg(long, default_value_t = 0.5)]
    pub throughput_budget: f64,
    /// Measured part of each throughput test.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub throughput_duration: Duration,
    /// Warm-up of each throughput test: long enough for TCP to recover
    /// from the loss at the end of its slow start on the lab's deep queues.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub throughput_omit: Duration,
    /// Most throughput tests at once: on the lab every link shares one
    /// emulator thread, and more tests at once would measure it instead.
    #[arg(long, default_value_t = 2)]
    pub throughput_max_concurrent: usize,
}

impl DemoOptions {
    /// The collector's flags for these options: throughput tests, and a
    /// round of the measured topology every 5 s (not 30), so that
    /// `netaware topology` has blocks within the demo's first minute.
    pub fn collector_flags(&self) -> Vec<String> {
        vec![
            "--topology-interval".into(),
            "5s".into(),
            "--throughput-budget".into(),
            self.throughput_budget.to_string(),
            "--throughput-duration".into(),
            format!("{}ms", self.throughput_duration.as_millis()),
            "--throughput-omit".into(),
            format!("{}ms", self.throughput_omit.as_millis()),
            "--throughput-max-concurrent".into(),
            self.throughput_max_concurrent.to_string(),
        ]
    }
}

/// How far the measurements have come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Pairs with a fresh window.
    pub measured: usize,
    /// Directed pairs of agents.
    pub expected: usize,
    /// Pairs with a goodput.
    pub with_goodput: usize,
    /// Agents reporting.
    pub fresh: usize,
    /// Agents started.
    pub agents: usize,
}

impl Progress {
    /// Counts what a matrix shows for `agents` agents.
    pub fn of(matrix: &crate::json::MatrixJson, agents: usize) -> Self {
        Self {
            measured: matrix
                .pairs
                .iter()
                .filter(|p| p.samples > 0 && p.age_s.is_some())
                .count(),
            expected: agents * agents.saturating_sub(1),
            with_goodput: matrix
                .pairs
                .iter()
                .filter(|p| p.throughput_bps.is_some())
                .count(),
            fresh: matrix.nodes.iter().filter(|n| !n.stale).count(),
            agents,
        }
    }
}

/// Runs the demo on the lab when this process is root, else on loopback.
pub async fn run(options: DemoOptions, shutdown: CancellationToken) -> anyhow::Result<()> {
    if options.loopback {
        println!("netaware demo: on loopback, as asked (--loopback)");
        return loopback::run(options, shutdown).await;
    }
    if !netaware_lab::is_root() {
        match as_root::decide_here()? {
            as_root::WithoutRoot::AskSudo(sudo) => {
                println!(
                    "netaware demo: the lab needs root (network namespaces, TUN devices); \
                     asking sudo (--loopback runs without it)"
                );
                if as_root::run_under_sudo(&sudo)? {
                    return Ok(());
                }
                println!("netaware demo: sudo did not run the lab; on loopback instead");
            }
            as_root::WithoutRoot::Loopback { reason, command } => {
                println!("netaware demo: on loopback: {reason}; for the lab run: {command}");
            }
        }
        return loopback::run(options, shutdown).await;
    }
    println!("netaware demo: on the lab (emulated multi-zone links; --loopback to skip it)");
    lab::run(options, shutdown).await
}

/// What the demo asks of whichever system it runs.
pub(crate) trait DemoSystem {
    /// How far the measurements have come.
    async fn progress(&mut self) -> anyhow::Result<Progress>;
    /// The zone summary, the matrix and a placement for `job_size`, as text.
    async fn report(&mut self, job_size: usize) -> anyhow::Result<String>;
    /// Draws the pairs' quality as an SVG heat map at `path`.
    async fn heat_map(&mut self, path: &std::path::Path) -> anyhow::Result<()>;
}

/// How long a report waits for the collector's first round of the
/// measured topology (the demo's collector has one every 5 s).
pub(crate) const TOPOLOGY_WAIT: Duration = Duration::from_secs(10);

/// Asks `topology` until it answers or [`TOPOLOGY_WAIT`] has passed; the
/// answer, or the first line of the last error.
pub(crate) async fn topology_when_ready<F, Fut>(topology: F) -> String
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    answer_when(topology, |_| true, TOPOLOGY_WAIT).await
}

/// How long a report waits for the first faults to open: they open after
/// two rounds of the topology in a row name them.
pub(crate) const FAULTS_WAIT: Duration = Duration::from_secs(20);

/// Asks `ask` until it answers with text that `done` accepts or `wait`
/// has passed; the last answer, or the first line of the last error.
pub(crate) async fn answer_when<F, Fut>(
    mut ask: F,
    done: impl Fn(&str) -> bool,
    wait: Duration,
) -> String
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<String>>,
{
    let deadline = Instant::now() + wait;
    loop {
        let last = match ask().await {
            Ok(text) if done(&text) => return text,
            Ok(text) => text,
            Err(err) => format!("{}\n", err.to_string().lines().next().unwrap_or_default()),
        };
        if Instant::now() >= deadline {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Where the demo draws its heat map.
pub fn heat_map_path() -> std::path::PathBuf {
    std::env::temp_dir().join("netaware-demo-quality.svg")
}

/// Prints the report and draws the heat map beside it.
async fn report_and_draw(system: &mut impl DemoSystem, job_size: usize) -> anyhow::Result<()> {
    println!("{}", system.report(job_size).await?);
    let path = heat_map_path();
    match system.heat_map(&path).await {
        Ok(()) => println!("the pairs' quality as a heat map: {}\n", path.display()),
        Err(err) => println!("no heat map ({err:#})\n"),
    }
    Ok(())
}

/// Shows progress until every pair has a fresh window (or time is up) and
/// prints the report; then, with throughput tests on, until every pair has
/// a goodput too, and prints it again; then waits for Ctrl-C or the
/// deadline.
pub(crate) async fn watch_and_report(
    system: &mut impl DemoSystem,
    job_size: usize,
    throughput: bool,
    deadline: Option<Instant>,
    query_hint: &str,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let ready = wait_until(system, deadline, shutdown, Duration::from_secs(1), |p| {
        println!(
            "measuring: {}/{} pairs have fresh windows, {}/{} agents reporting",
            p.measured, p.expected, p.fresh, p.agents
        );
        p.measured == p.expected && p.expected > 0
    })
    .await?;
    if !ready {
        println!("stopped before every pair had a window; showing what there is");
    }
    report_and_draw(system, job_size).await?;
    if throughput && ready {
        println!("throughput tests run one per node at a time, within the budget");
        let measured = wait_until(system, deadline, shutdown, Duration::from_secs(5), |p| {
            println!(
                "goodput: {}/{} pairs measured ({:.0} s)",
                p.with_goodput,
                p.expected,
                started.elapsed().as_secs_f64()
            );
            p.with_goodput >= p.expected
        })
        .await?;
        if measured {
            println!(
                "every pair has a goodput after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            report_and_draw(system, job_size).await?;
        }
    }
    if shutdown.is_cancelled() {
        return Ok(());
    }
    match deadline {
        Some(d) => println!(
            "serving until the duration ends ({:.0} s left); Ctrl-C stops sooner",
            d.saturating_duration_since(Instant::now()).as_secs_f64()
        ),
        None => println!("serving until Ctrl-C; try: {query_hint}"),
    }
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        } => {}
    }
    Ok(())
}

/// Polls `progress` every `every` until `done` holds (true), or the deadline
/// or shutdown comes first (false).
async fn wait_until(
    system: &mut impl DemoSystem,
    deadline: Option<Instant>,
    shutdown: &CancellationToken,
    every: Duration,
    mut done: impl FnMut(&Progress) -> bool,
) -> anyhow::Result<bool> {
    while !shutdown.is_cancelled() && deadline.is_none_or(|d| Instant::now() < d) {
        if done(&system.progress().await?) {
            return Ok(true);
        }
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = tokio::time::sleep(every) => {}
        }
    }
    Ok(false)
}
