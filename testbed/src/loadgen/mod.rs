//! `netaware-testbed loadgen`: many simulated agents against one collector, over
//! real gRPC: each has its own connection and session, says hello, then
//! sends a window of `--peers` peer entries every `--window` (time
//! compressed: real agents send one every 10 s) and waits for its ack.
//! Reports windows accepted per second, the ack latency and, given the
//! collector's pid, its memory after warm-up.
//!
//! With `--stalled-watchers-per-s`, hostile followers beside it
//! ([`stalled`]): watch streams that are opened and never read.
//!
//! The fleet and its windows are pure ([`fleet`]), so is the tally
//! ([`report`]); this module is the async shell.

pub mod fleet;
pub mod report;
pub mod stalled;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use netaware_proto::v1 as pb;
use netaware_proto::v1::agent_session_client::AgentSessionClient;
use netaware_proto::v1::{agent_message, collector_message};
use tokio::sync::{Barrier, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use self::fleet::Fleet;
use self::report::{LoadReport, Memory, Outcome, Tally};

/// The flags of `netaware-testbed loadgen`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadOptions {
    /// Collector URL.
    #[arg(long, default_value = "http://127.0.0.1:7470")]
    pub collector: String,
    /// Simulated agents, each with its own connection.
    #[arg(long, default_value_t = 2_000)]
    pub agents: usize,
    /// Peers each agent reports on in every window.
    #[arg(long, default_value_t = 50)]
    pub peers: usize,
    /// Zones the agents are spread over.
    #[arg(long, default_value_t = 10)]
    pub zones: usize,
    /// Window length (real agents: 10 s).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// How long to send, after every agent has connected.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Memory samples before this are left out of the memory figure.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub warm_up: Duration,
    /// The collector's pid, to sample its resident memory (same machine).
    #[arg(long)]
    pub collector_pid: Option<u32>,
    /// WatchMatrix streams opened a second, once the fleet is in, and never
    /// read (a follower that stopped reading); 0: none.
    #[arg(long, default_value_t = 0.0, value_parser = stalled_rate)]
    pub stalled_watchers_per_s: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Most connections opened at once while the fleet connects.
const CONNECTING_AT_ONCE: usize = 64;
/// Time between progress lines and memory samples.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Runs the load test; progress goes to stderr.
pub async fn run(options: &LoadOptions, shutdown: CancellationToken) -> anyhow::Result<LoadReport> {
    anyhow::ensure!(options.agents >= 2, "a load test needs at least 2 agents");
    let window_ms = u32::try_from(options.window.as_millis())
        .ok()
        .filter(|ms| (100..=600_000).contains(ms))
        .context("--window must be between 100 ms and 10 min")?;
    // A connection per simulated agent: each a file.
    let (limit, _) = netaware_runtime::open_files::raise_to_hard_limit();
    anyhow::ensure!(
        limit.allows(options.agents as u64 + 64),
        "{} agents need as many open files, and this process may open {:?}: raise `ulimit -n`",
        options.agents,
        limit.soft
    );
    let fleet = Arc::new(Fleet::new(
        options.agents,
        options.peers,
        options.zones,
        window_ms,
    ));
    let (results_tx, mut results) = mpsc::unbounded_channel::<(Outcome, u32)>();
    // Every agent connects and says hello, then all start together: a
    // window may name any agent as a peer, so all must be known first.
    let connected = Arc::new(Barrier::new(fleet.len() + 1));
    let connecting = Arc::new(Semaphore::new(CONNECTING_AT_ONCE));
    let stop = shutdown.child_token();
    let started = Instant::now();
    eprintln!(
        "connecting {} agents to {} ...",
        fleet.len(),
        options.collector
    );
    let mut agents = tokio::task::JoinSet::new();
    for i in 0..fleet.len() {
        agents.spawn(simulate(
            Arc::clone(&fleet),
            i,
            options.collector.clone(),
            Arc::clone(&connected),
            Arc::clone(&connecting),
            results_tx.clone(),
            stop.clone(),
        ));
    }
    drop(results_tx);
    tokio::select! {
        _ = connected.wait() => {}
        () = shutdown.cancelled() => anyhow::bail!("interrupted while connecting"),
    }
    let connect_s = started.elapsed().as_secs_f64();
    // What one window weighs on the wire (what a write-ahead log would
    // append per window): agent 0's, as the fleet sends them.
    let window_bytes = {
        use prost::Message;
        fleet
            .window(0, &fleet.peers_of(0), 1, netaware_runtime::clock::now_ms())
            .encoded_len()
    };
    eprintln!(
        "all connected in {connect_s:.1} s; sending for {:?}, {window_bytes} bytes a window",
        options.duration
    );

    let stalled = Arc::new(stalled::StalledCounts::default());
    if options.stalled_watchers_per_s > 0.0 {
        tokio::spawn(stalled::open_stalled(
            options.collector.clone(),
            options.stalled_watchers_per_s,
            Arc::clone(&stalled),
            stop.clone(),
        ));
    }
    let sending = Instant::now();
    let deadline = tokio::time::Instant::now() + options.duration;
    let mut total = Tally::default();
    // After warm-up only: what the collector does once the fleet is in.
    let mut steady = Tally::default();
    let mut interval = Tally::default();
    let mut memory = Vec::new();
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.tick().await;
    loop {
        tokio::select! {
            result = results.recv() => match result {
                Some((outcome, latency_us)) => interval.add(outcome, latency_us),
                None => break,
            },
            _ = tick.tick() => {
                let rss = options.collector_pid.and_then(resident_mb);
                if sending.elapsed() >= options.warm_up {
                    memory.extend(rss);
                    steady.merge(&interval);
                }
                progress(sending.elapsed(), &interval, rss);
                total.merge(&interval);
                interval = Tally::default();
            }
            () = tokio::time::sleep_until(deadline), if !stop.is_cancelled() => stop.cancel(),
            () = shutdown.cancelled(), if !stop.is_cancelled() => stop.cancel(),
        }
    }
    total.merge(&interval);
    while agents.join_next().await.is_some() {}
    let duration_s = sending
        .elapsed()
        .as_secs_f64()
        .min(options.duration.as_secs_f64());
    let due = (duration_s * 1_000.0 / f64::from(window_ms)) as u64 * fleet.len() as u64;
    let mut report = LoadReport::new(
        (fleet.len(), options.peers.min(fleet.len() - 1), window_ms),
        connect_s,
        duration_s,
        &total,
        &steady,
        due,
        Memory::of(&memory),
    );
    report.stalled_watchers = (options.stalled_watchers_per_s > 0.0).then(|| stalled.read());
    Ok(report)
}

/// A rate of stalled watchers: 0 to 100 a second.
fn stalled_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text.parse().map_err(|err| format!("{err}"))?;
    if (0.0..=100.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{text} is not between 0 and 100 a second"))
    }
}

fn progress(elapsed: Duration, interval: &Tally, rss_mb: Option<f64>) {
    let per_s = interval.accepted as f64 / PROGRESS_EVERY.as_secs_f64();
    let p99 = interval
        .latency_ms(0.99)
        .map_or("-".into(), |ms| format!("{ms:.1} ms"));
    let rss = rss_mb.map_or(String::new(), |mb| format!(", collector {mb:.0} MB"));
    eprintln!(
        "{:>5.0} s: {per_s:.0} windows/s accepted, ack p99 {p99}, {} rejected, {} lost{rss}",
        elapsed.as_secs_f64(),
        interval.rejected,
        interval.lost
    );
}

/// The resident memory of `pid`, in MB (Linux).
fn resident_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1_024.0)
}

/// One simulated agent: connect, hello, wait for the others, then a window
/// per tick until `stop`, each awaited for its ack.
async fn simulate(
    fleet: Arc<Fleet>,
    i: usize,
    url: String,
    connected: Arc<Barrier>,
    connecting: Arc<Semaphore>,
    results: mpsc::UnboundedSender<(Outcome, u32)>,
    stop: CancellationToken,
) {
    let session = {
        let _permit = connecting.acquire().await;
        open(&fleet, i, &url).await
    };
    connected.wait().await;
    let (up, mut down) = match session {
        Ok(session) => session,
        Err(err) => {
            tracing::warn!(agent = i, %err, "could not connect");
            return;
        }
    };
    let peers = fleet.peers_of(i);
    let period = Duration::from_millis(u64::from(fleet.window_ms));
    // Spread the agents over the window, as real ones are.
    let phase = period.mul_f64(rand::random::<f64>());
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + phase, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for seq in 1.. {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let window = fleet.window(i, &peers, seq, netaware_runtime::clock::now_ms());
        let sent = Instant::now();
        let message = pb::AgentMessage {
            body: Some(agent_message::Body::Window(window)),
        };
        let outcome = if up.send(message).await.is_err() {
            Outcome::Lost
        } else {
            ack(&mut down, seq).await
        };
        let latency_us = u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX);
        if results.send((outcome, latency_us)).is_err() || outcome == Outcome::Lost {
            return;
        }
    }
}

type Session = (
    mpsc::Sender<pb::AgentMessage>,
    tonic::Streaming<pb::CollectorMessage>,
);

/// Whether `url` names a loopback address.
pub(crate) fn is_loopback(url: &str) -> bool {
    url.parse::<tonic::transport::Uri>()
        .ok()
        .and_then(|uri| uri.host()?.parse::<IpAddr>().ok())
        .is_some_and(|ip| ip.is_loopback())
}

/// The loopback address agent `i` connects from, as each real agent comes
/// from its node's (127.1.0.1 on, 250 to a /24): the collector's cap on
/// connections per client holds each agent, as in a cluster.
fn agent_source(i: usize) -> IpAddr {
    IpAddr::from([
        127,
        1 + (i / 62_500) as u8,
        (i / 250 % 250) as u8,
        (i % 250 + 1) as u8,
    ])
}

async fn open(fleet: &Fleet, i: usize, url: &str) -> anyhow::Result<Session> {
    let (up, rx) = mpsc::channel(4);
    let hello = pb::AgentMessage {
        body: Some(agent_message::Body::Hello(fleet.hello(i, rand::random()))),
    };
    up.send(hello).await?;
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())?
        .local_address(is_loopback(url).then(|| agent_source(i)))
        .connect()
        .await?;
    let mut client = AgentSessionClient::new(channel)
        .max_decoding_message_size(netaware_proto::parts::MAX_COLLECTOR_MESSAGE_BYTES);
    let down = client.session(ReceiverStream::new(rx)).await?.into_inner();
    Ok((up, down))
}

/// Reads down the session (peer sets go by) until the ack of `seq`.
async fn ack(down: &mut tonic::Streaming<pb::CollectorMessage>, seq: u64) -> Outcome {
    loop {
        match down.message().await {
            Ok(Some(pb::CollectorMessage {
                body: Some(collector_message::Body::Ack(ack)),
            })) if ack.seq == seq => {
                return match (ack.code, ack.message.as_str()) {
                    (0, "duplicate") => Outcome::Duplicate,
                    (0, _) => Outcome::Accepted,
                    _ => Outcome::Rejected,
                };
            }
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return Outcome::Lost,
        }
    }
}
