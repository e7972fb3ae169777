//! `netaware-testbed workload`: one worker of a data-parallel training job's
//! traffic, over real TCP. Each iteration is a compute pause (the GPU's
//! forward and backward pass) and then the gradient exchange, in one of the
//! two patterns of data-parallel training:
//!
//! - [`Pattern::Ring`]: ring all-reduce (NCCL's, Horovod's): 2(k-1) steps,
//!   in each of which every worker sends a 1/k chunk of the gradient to the
//!   next worker while it receives one from the previous ([`ring`]);
//! - [`Pattern::ParameterServer`]: the workers send their whole gradient to
//!   worker 0, which sends the whole update back to each ([`ps`]).
//!
//! Only the bytes move: the reduction's arithmetic is compute, not network,
//! and is left out. Each worker times its iterations; the job's time per
//! iteration is the slowest worker's, which the evaluation takes
//! (`netaware-testbed evaluate lab`).

pub mod ps;
pub mod ring;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::net::{TcpListener, TcpStream};

/// The gradient exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Ring all-reduce.
    Ring,
    /// A parameter server on worker 0.
    #[value(name = "ps")]
    ParameterServer,
}

impl Pattern {
    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Ring => "ring",
            Pattern::ParameterServer => "ps",
        }
    }
}

/// The flags of `netaware-testbed workload`.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadOptions {
    /// This worker's rank: its place in --workers, from 0.
    #[arg(long)]
    pub rank: usize,
    /// Every worker's address and port, in rank order (comma-separated).
    #[arg(long, value_delimiter = ',', required = true)]
    pub workers: Vec<SocketAddr>,
    /// How the gradient is exchanged.
    #[arg(long, value_enum, default_value = "ring")]
    pub pattern: Pattern,
    /// Gradient per iteration, MB (ResNet-50's is about 100).
    #[arg(long, default_value_t = 100.0)]
    pub gradient_mb: f64,
    /// Compute per iteration.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    pub compute: Duration,
    /// Iterations timed.
    #[arg(long, default_value_t = 5)]
    pub iterations: u32,
    /// Iterations run first and left out (TCP's slow start, buffers).
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Give up when the other workers cannot be reached for this long.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub connect_timeout: Duration,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Most gradient a worker moves per iteration: 16 GiB.
const MAX_GRADIENT_MB: f64 = 16_384.0;

/// What one worker measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerReport {
    /// This worker's rank.
    pub rank: usize,
    /// Workers in the job.
    pub workers: usize,
    /// The traffic pattern.
    pub pattern: String,
    /// Bytes of the gradient.
    pub gradient_bytes: u64,
    /// Seconds of each timed iteration, compute included.
    pub iterations_s: Vec<f64>,
}

impl std::fmt::Display for WorkerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let median = netaware_eval::stats::median(&self.iterations_s);
        let p90 = netaware_eval::stats::quantile(&self.iterations_s, 0.9);
        writeln!(
            f,
            "worker {} of {}: {} of {:.0} MB, {} iterations: median {median:.3} s, p90 {p90:.3} s",
            self.rank,
            self.workers,
            self.pattern,
            self.gradient_bytes as f64 / 1e6,
            self.iterations_s.len()
        )
    }
}

impl WorkloadOptions {
    fn check(&self) -> anyhow::Result<u64> {
        if self.rank >= self.workers.len() {
            bail!(
                "--rank {} is not a place in --workers ({} workers)",
                self.rank,
                self.workers.len()
            );
        }
        if !(self.gradient_mb.is_finite()
            && self.gradient_mb > 0.0
            && self.gradient_mb <= MAX_GRADIENT_MB)
        {
            bail!("--gradient-mb must be above 0 and at most {MAX_GRADIENT_MB}");
        }
        if self.iterations == 0 {
            bail!("--iterations must be at least 1");
        }
        Ok((self.gradient_mb * 1e6) as u64)
    }
}

/// Runs one worker to the end.
pub async fn run(options: &WorkloadOptions) -> anyhow::Result<WorkerReport> {
    let gradient_bytes = options.check()?;
    let own = options.workers[options.rank];
    let listener = TcpListener::bind(own)
        .await
        .with_context(|| format!("listening on {own}"))?;
    let mut exchange = match options.pattern {
        Pattern::Ring => {
            Exchange::Ring(ring::Ring::connect(options, listener, gradient_bytes).await?)
        }
        Pattern::ParameterServer => Exchange::ParameterServer(
            ps::ParameterServer::connect(options, listener, gradient_bytes).await?,
        ),
    };
    let mut iterations_s = Vec::with_capacity(options.iterations as usize);
    for iteration in 0..options.warmup + options.iterations {
        let start = Instant::now();
        tokio::time::sleep(options.compute).await;
        exchange
            .run_once()
            .await
            .with_context(|| format!("iteration {iteration}"))?;
        if iteration >= options.warmup {
            iterations_s.push(start.elapsed().as_secs_f64());
        }
    }
    Ok(WorkerReport {
        rank: options.rank,
        workers: options.workers.len(),
        pattern: options.pattern.name().to_owned(),
        gradient_bytes,
        iterations_s,
    })
}

/// A worker's connections, set up for one pattern.
enum Exchange {
    Ring(ring::Ring),
    ParameterServer(ps::ParameterServer),
}

impl Exchange {
    /// Moves one iteration's bytes.
    async fn run_once(&mut self) -> std::io::Result<()> {
        match self {
            Exchange::Ring(ring) => ring.exchange().await,
            Exchange::ParameterServer(ps) => ps.exchange().await,
        }
    }
}

/// Connects to `addr`, retrying until `timeout` (the other worker may not
/// listen yet).
pub async fn connect(addr: SocketAddr, timeout: Duration) -> anyhow::Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    loop {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(stream);
            }
            Err(err) if Instant::now() >= deadline => {
                return Err(err).with_context(|| format!("connecting to worker {addr}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Accepts `count` connections within `timeout`.
pub async fn accept(
    listener: &TcpListener,
    count: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<TcpStream>> {
    let mut streams = Vec::with_capacity(count);
    let accepting = async {
        while streams.len() < count {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            streams.push(stream);
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(timeout, accepting)
        .await
        .context("waiting for the other workers to connect")??;
    Ok(streams)
}
