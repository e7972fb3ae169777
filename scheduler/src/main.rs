//! `netaware-scheduler`: the kube-scheduler extender, beside kube-scheduler
//! (by default on 127.0.0.1:8888, the sidecar case). Stops cleanly on
//! SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use netaware_scheduler::cache::ScoreCache;
use netaware_scheduler::placements::Placements;
use netaware_scheduler::pods;
use netaware_scheduler::policy::PolicyConfig;
use netaware_scheduler::server::{Extender, observability_router, router};
use tokio::sync::RwLock;

/// Filters and scores nodes for kube-scheduler from netaware's measurements.
#[derive(Debug, Parser)]
#[command(name = "netaware-scheduler", version)]
struct Cli {
    /// Collector URL.
    #[arg(
        long,
        env = "NETAWARE_COLLECTOR",
        default_value = "http://127.0.0.1:7470"
    )]
    collector: String,
    /// HTTP address for kube-scheduler.
    #[arg(long, default_value = "127.0.0.1:8888")]
    listen: SocketAddr,
    /// Also serve /metrics and /healthz (only those) on this address, for
    /// Prometheus, when the extender listens on localhost.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Scores older than this count as missing (answers turn neutral).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    max_score_age: Duration,
    /// Fail nodes outside the job's zone instead of scoring them low.
    #[arg(long)]
    strict_zone: bool,
    /// TLS towards the collector.
    #[command(flatten)]
    tls: netaware_runtime::tls::TlsArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    netaware_runtime::init_logging("info");
    let cli = Cli::parse();
    let shutdown = netaware_runtime::shutdown_on_signal()?;
    let cache = ScoreCache::new(cli.max_score_age);
    let collector = netaware_runtime::tls::endpoint(&cli.collector, cli.tls.load()?.as_ref())?;
    tokio::spawn(cache.clone().follow_endpoint(collector, shutdown.clone()));
    let placements = Arc::new(RwLock::new(Placements::new()));
    let kube = match kube::Client::try_default().await {
        Ok(client) => {
            tokio::spawn(pods::follow(
                client.clone(),
                Arc::clone(&placements),
                shutdown.clone(),
            ));
            Some(client)
        }
        Err(err) => {
            tracing::warn!(%err, "no Kubernetes API: every pod is scored as its job's first worker");
            None
        }
    };
    let config = PolicyConfig {
        strict_zone: cli.strict_zone,
        ..PolicyConfig::default()
    };
    let extender = Arc::new(Extender::new(cache, placements, config, kube));
    let listener = tokio::net::TcpListener::bind(cli.listen).await?;
    tracing::info!(listen = %cli.listen, collector = %cli.collector, "extender listening");
    let metrics = match cli.metrics_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            tracing::info!(listen = %addr, "metrics listening");
            let app = observability_router(Arc::clone(&extender));
            let shutdown = shutdown.clone();
            Some(tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown.cancelled_owned())
                    .await
            }))
        }
        None => None,
    };
    axum::serve(listener, router(extender))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await?;
    if let Some(metrics) = metrics {
        metrics.await??;
    }
    Ok(())
}
