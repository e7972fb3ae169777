//! `netaware-collector`: the collector binary. Stops cleanly on SIGINT or
//! SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use netaware_collector::{Collector, CollectorConfig, ModelConfig, inventory};
use netaware_core::placement::PlacementConfig;
use netaware_core::score::{ScoreConfig, Weights};

/// Collects agents' measurements, scores node pairs and serves the scores.
#[derive(Debug, Parser)]
#[command(name = "netaware-collector", version)]
struct Args {
    /// gRPC address (agent sessions, Scores, health, reflection).
    #[arg(long, default_value = "0.0.0.0:7470")]
    listen: SocketAddr,
    /// HTTP address (/healthz).
    #[arg(long, default_value = "0.0.0.0:9470")]
    metrics_listen: SocketAddr,
    /// YAML list of nodes that run no agent: [{name, address, zone, region}].
    #[arg(long)]
    inventory: Option<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
}

/// Score model and placement settings (see the README's score model).
#[derive(Debug, clap::Args)]
struct ModelArgs {
    /// Weight of the delay term.
    #[arg(long, default_value_t = 0.4)]
    weight_delay: f64,
    /// Weight of the loss term.
    #[arg(long, default_value_t = 0.3)]
    weight_loss: f64,
    /// Weight of the throughput term.
    #[arg(long, default_value_t = 0.3)]
    weight_throughput: f64,
    /// Median RTT plus jitter (ms) at which the delay term is 0.5.
    #[arg(long, default_value_t = 1.0)]
    delay_reference_ms: f64,
    /// Loss ratio at which the loss term reaches 0.
    #[arg(long, default_value_t = 0.05)]
    loss_ceiling: f64,
    /// Goodput (bit/s) at which the throughput term reaches 1.
    #[arg(long, default_value_t = 10e9)]
    throughput_reference_bps: f64,
    /// Subtracted from zone averages that stand in for missing data.
    #[arg(long, default_value_t = 0.25)]
    fallback_penalty: f64,
    /// Windows kept per pair.
    #[arg(long, default_value_t = 6)]
    windows_kept: usize,
    /// Loss to a placed worker above which placement fails a node.
    #[arg(long, default_value_t = 0.05)]
    loss_threshold: f64,
    /// Factor on the scores of nodes outside the chosen zone.
    #[arg(long, default_value_t = 0.1)]
    out_of_zone_factor: f64,
}

impl ModelArgs {
    fn model(&self) -> anyhow::Result<ModelConfig> {
        let score = ScoreConfig {
            weights: Weights {
                delay: self.weight_delay,
                loss: self.weight_loss,
                throughput: self.weight_throughput,
            },
            delay_reference_ms: self.delay_reference_ms,
            loss_ceiling: self.loss_ceiling,
            throughput_reference_bps: self.throughput_reference_bps,
            fallback_penalty: self.fallback_penalty,
            ..ScoreConfig::default()
        }
        .validated()?;
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.loss_threshold)
                && (0.0..=1.0).contains(&self.out_of_zone_factor),
            "--loss-threshold and --out-of-zone-factor must be between 0 and 1"
        );
        anyhow::ensure!(self.windows_kept >= 1, "--windows-kept must be at least 1");
        Ok(ModelConfig {
            score,
            placement: PlacementConfig {
                loss_threshold: self.loss_threshold,
                out_of_zone_factor: self.out_of_zone_factor,
            },
            windows_kept: self.windows_kept,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    netaware_runtime::init_logging("info");
    let args = Args::parse();
    let inventory = match &args.inventory {
        Some(path) => inventory::load(path)?,
        None => Vec::new(),
    };
    let config = CollectorConfig {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        inventory,
        model: args.model.model().context("invalid score settings")?,
    };
    let shutdown = netaware_runtime::shutdown_on_signal()?;
    let collector = Collector::start(config, shutdown).await?;
    collector.wait().await;
    Ok(())
}
