//! The demo on loopback: a collector and agents on 127.0.0.x addresses in
//! three zones, all in this process, talking over real gRPC and probing with
//! real ICMP. Every link is the same, so the zones differ only by name; the
//! point is to watch the pipeline work end to end.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use netaware_agent::{Agent, AgentConfig, InboundWatch};
use netaware_collector::cli::ModelArgs;
use netaware_collector::{Collector, CollectorConfig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{DemoOptions, DemoSystem, Progress, watch_and_report};
use crate::client::ScoresConnection;
use crate::render;

/// The demo's zones and how many agents each holds.
pub const ZONES: [(&str, usize); 3] = [("zone-a", 4), ("zone-b", 3), ("zone-c", 2)];

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

#[derive(Parser)]
struct CollectorFlags {
    #[command(flatten)]
    model: ModelArgs,
}

/// Runs the demo until the duration ends or `shutdown` is cancelled.
pub async fn run(options: DemoOptions, shutdown: CancellationToken) -> anyhow::Result<()> {
    let deadline = options.duration.map(|d| Instant::now() + d);
    netaware_agent::check_icmp_permission().context("the demo's agents probe with ICMP")?;
    let collector = Collector::start(
        CollectorConfig {
            listen: options.listen,
            metrics_listen: options.metrics_listen,
            inventory: Vec::new(),
            // The same flags the lab's collector gets, read the same way.
            model: CollectorFlags::try_parse_from(
                std::iter::once("demo".to_owned()).chain(options.collector_flags()),
            )?
            .model
            .model()?,
            state: None,
            tls: None,
            http_tls: None,
            node_places: None,
            watch: netaware_collector::WatchLimits::default(),
            connections: netaware_collector::ConnectionLimits::default(),
            agent_tokens: None,
            pair_series: netaware_collector::pair_series::DEFAULT_PAIR_SERIES,
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
    println!("web view: http://{}/ui/", collector.http_addr);

    let agents = demo_agents();
    // Said once here rather than by each of the nine agents in its log.
    let inbound = if netaware_agent::can_watch_inbound() {
        InboundWatch::Watch
    } else {
        println!(
            "note: without CAP_NET_RAW the agents cannot see the echo requests that reach them, \
             so one-way loss is not measured (RTT and round-trip loss are)"
        );
        InboundWatch::Skip
    };
    let mut running = Vec::new();
    for (name, zone, address) in &agents {
        let config = AgentConfig {
            inbound,
            interval: options.interval,
            window: options.window,
            probe_timeout: options.interval.min(Duration::from_secs(1)),
            metrics_port: Some(netaware_agent::DEFAULT_METRICS_PORT),
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

    let mut system = Loopback {
        scores: ScoresConnection::connect(&url).await?,
        agents: agents.len(),
    };
    let job_size = options.job_size.unwrap_or(ZONES[0].1);
    let hint = format!("netaware matrix --collector {url}");
    let throughput = options.throughput_budget > 0.0;
    watch_and_report(
        &mut system,
        job_size,
        throughput,
        deadline,
        &hint,
        &shutdown,
    )
    .await?;
    shutdown.cancel();
    for agent in running {
        agent.wait().await;
    }
    collector.wait().await;
    println!("demo stopped");
    Ok(())
}

struct Loopback {
    scores: ScoresConnection,
    agents: usize,
}

impl DemoSystem for Loopback {
    async fn progress(&mut self) -> anyhow::Result<Progress> {
        let matrix = self.scores.matrix().await?;
        Ok(Progress::of(&(&matrix).into(), self.agents))
    }

    async fn report(&mut self, job_size: usize) -> anyhow::Result<String> {
        let zones = render::zones(&self.scores.zones().await?, false);
        let matrix = render::matrix(&self.scores.matrix().await?, false);
        let ranking = render::rank(
            &crate::json::RankJson::from(&self.scores.rank(job_size, &[]).await?),
            job_size,
            false,
        );
        let topology = super::topology_when_ready(|| {
            let mut scores = self.scores.clone();
            async move {
                let (topology, observed) = crate::commands::topology::fetch(&mut scores).await?;
                Ok(render::topology(
                    &crate::json::TopologyJson::new(&topology, observed),
                    false,
                ))
            }
        })
        .await;
        Ok(format!(
            "\n== Zones\n{zones}\n== Matrix\n{matrix}\n== Placement of a {job_size}-worker job\n{ranking}\n== Measured topology\n{topology}"
        ))
    }

    async fn heat_map(&mut self, path: &std::path::Path) -> anyhow::Result<()> {
        let matrix = self.scores.matrix().await?;
        crate::heatmap::write(
            &matrix,
            crate::heatmap::Metric::Quality,
            crate::heatmap::ImageFormat::Svg,
            "all nodes",
            path,
        )?;
        Ok(())
    }
}
