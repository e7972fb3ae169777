//! `netaware demo`: the whole system on this machine.
//!
//! A collector on loopback and agents on 127.0.0.x addresses in three zones,
//! all in this process, talking over real gRPC and probing with real ICMP.
//! On loopback every link is the same, so the zones differ only by name;
//! the point is to watch the pipeline work end to end.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use netaware_agent::{Agent, AgentConfig};
use netaware_collector::{Collector, CollectorConfig, ModelConfig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::ScoresConnection;
use crate::render;

/// The demo's zones and how many agents each holds.
pub const ZONES: [(&str, usize); 3] = [("zone-a", 4), ("zone-b", 3), ("zone-c", 2)];

/// Settings of one demo run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Stop after this long; `None` runs until Ctrl-C.
    pub duration: Option<Duration>,
    /// Collector gRPC address.
    pub listen: SocketAddr,
    /// Collector HTTP address.
    pub metrics_listen: SocketAddr,
    /// Agents' window length.
    pub window: Duration,
    /// Agents' probe interval.
    pub interval: Duration,
    /// Workers of the sample job.
    pub job_size: usize,
}

/// The demo's agents: name, zone and loopback address, in zone order.
pub fn demo_agents() -> Vec<(String, &'static str, IpAddr)> {
    let mut agents = Vec::new();
    for (z, (zone, count)) in ZONES.iter().enumerate() {
        for i in 0..*count {
            let address = IpAddr::V4(Ipv4Addr::new(127, 0, 0, (10 * (z + 1) + i + 1) as u8));
            agents.push((format!("{zone}-{}", i + 1), *zone, address));
        }
    }
    agents
}

/// Runs the demo until the duration ends or `shutdown` is cancelled.
pub async fn run(options: DemoOptions, shutdown: CancellationToken) -> anyhow::Result<()> {
    let deadline = options.duration.map(|d| Instant::now() + d);
    netaware_agent::check_icmp_permission().context("the demo's agents probe with ICMP")?;
    println!(
        "netaware demo: on loopback (every link is the same; the lab issue adds emulated zones)"
    );
    let collector = Collector::start(
        CollectorConfig {
            listen: options.listen,
            metrics_listen: options.metrics_listen,
            inventory: Vec::new(),
            model: ModelConfig::default(),
        },
        shutdown.clone(),
    )
    .await
    .context("starting the collector")?;
    let url = format!("http://{}", collector.grpc_addr);
    println!(
        "collector: gRPC {url}, HTTP http://{}/healthz",
        collector.http_addr
    );

    let agents = demo_agents();
    let mut running = Vec::new();
    for (name, zone, address) in &agents {
        let config = AgentConfig {
            interval: options.interval,
            window: options.window,
            probe_timeout: options.interval.min(Duration::from_secs(1)),
            ..AgentConfig::new(name, vec![*address], zone, &url)
        };
        running.push(
            Agent::start(config, shutdown.clone())
                .with_context(|| format!("starting agent {name}"))?,
        );
    }
    println!(
        "agents: {} in {} zones, probing every {:?}, windows of {:?}",
        agents.len(),
        ZONES.len(),
        options.interval,
        options.window
    );

    let mut scores = ScoresConnection::connect(&url).await?;
    let expected = agents.len() * (agents.len() - 1);
    let mut ready = false;
    while !shutdown.is_cancelled() && deadline.is_none_or(|d| Instant::now() < d) {
        let matrix = scores.matrix().await?;
        let measured = matrix
            .pairs
            .iter()
            .filter(|p| p.samples > 0 && !p.stale)
            .count();
        let fresh = matrix.nodes.iter().filter(|n| !n.stale).count();
        println!(
            "measuring: {measured}/{expected} pairs have fresh windows, {fresh}/{} agents reporting",
            agents.len()
        );
        if measured == expected {
            ready = true;
            break;
        }
        sleep_or_stop(Duration::from_secs(1), &shutdown).await;
    }
    if !ready {
        println!("stopped before every pair had a window; showing what there is");
    }
    print_state(&mut scores, options.job_size).await?;
    if !shutdown.is_cancelled() {
        match deadline {
            Some(d) => println!(
                "serving until the duration ends ({:.0} s left); Ctrl-C stops sooner",
                d.saturating_duration_since(Instant::now()).as_secs_f64()
            ),
            None => println!("serving until Ctrl-C; try: netaware matrix --collector {url}"),
        }
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {}
        }
    }
    shutdown.cancel();
    for agent in running {
        agent.wait().await;
    }
    collector.wait().await;
    println!("demo stopped");
    Ok(())
}

async fn print_state(scores: &mut ScoresConnection, job_size: usize) -> anyhow::Result<()> {
    println!("\n== Zones\n{}", render::zones(&scores.zones().await?));
    println!("== Matrix\n{}", render::matrix(&scores.matrix().await?));
    let ranking = scores.rank(job_size, &[]).await?;
    println!(
        "== Placement of a {job_size}-worker job\n{}",
        render::rank(&ranking, job_size)
    );
    Ok(())
}

async fn sleep_or_stop(pause: Duration, shutdown: &CancellationToken) {
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = tokio::time::sleep(pause) => {}
    }
}
