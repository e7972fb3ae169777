//! The extender's command-line flags and the process they describe, shared
//! by the `netaware-scheduler` binary and `netaware scheduler`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

use crate::cache::ScoreCache;
use crate::networks::NetworkCaches;
use crate::placements::Placements;
use crate::pods;
use crate::server::{Extender, observability_router, router};
use netaware_core::network::Network;
use netaware_core::placement::{PlacementConfig, PlacementConfigError, PlacementOverrides};

/// The extender's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct SchedulerArgs {
    /// Collector URL.
    #[arg(
        long,
        env = "NETAWARE_COLLECTOR",
        default_value = "http://127.0.0.1:7470"
    )]
    pub collector: String,
    /// HTTP address for kube-scheduler.
    #[arg(long, default_value = "127.0.0.1:8888")]
    pub listen: SocketAddr,
    /// Also serve /metrics and /healthz (only those) on this address, for
    /// Prometheus, when the extender listens on localhost.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Scores older than this count as missing (answers turn neutral).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub max_score_age: Duration,
    /// The extender places by the collector's placement settings, which
    /// travel with the matrix, so that it decides as `netaware rank` and
    /// `netaware explain` say. Each of these flags overrides one of them
    /// (and the extender logs that it does): fail nodes outside the job's
    /// zone instead of scoring them low (`--strict-zone=false` turns the
    /// collector's setting off).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub strict_zone: Option<bool>,
    /// Overrides the collector's --loss-threshold.
    #[arg(long)]
    pub loss_threshold: Option<f64>,
    /// Overrides the collector's --out-of-zone-factor.
    #[arg(long)]
    pub out_of_zone_factor: Option<f64>,
    /// Overrides the collector's --min-goodput-fraction.
    #[arg(long)]
    pub min_goodput_fraction: Option<f64>,
    /// A further network to follow (repeat for more): a pod labelled
    /// `netaware.io/network: NAME` is placed by that network's matrix (a
    /// rail the agents measure with `--network NAME=...`).
    #[arg(long = "network", value_parser = parse_network)]
    pub networks: Vec<Network>,
    /// The network a pod without the `netaware.io/network` label is
    /// placed by (followed whether or not `--network` names it).
    #[arg(long, default_value = netaware_core::network::PRIMARY, value_parser = parse_network)]
    pub default_network: Network,
    /// TLS towards the collector; with --tls-cert, the extender and
    /// metrics are served over HTTPS with that certificate.
    #[command(flatten)]
    pub tls: netaware_runtime::tls::TlsArgs,
    #[command(flatten)]
    /// The HTTPS flags of the extender's own endpoints.
    pub http_tls: netaware_runtime::tls::HttpTlsArgs,
}

/// Why the extender could not run.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The TLS flags name unusable material.
    #[error(transparent)]
    Tls(#[from] netaware_runtime::tls::TlsError),
    /// A placement override outside [0, 1].
    #[error(transparent)]
    Placement(#[from] PlacementConfigError),
    /// A listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        #[source]
        /// The cause.
        source: std::io::Error,
    },
    /// The networks followed leave out the default.
    #[error(transparent)]
    Networks(#[from] crate::networks::DefaultNotFollowed),
    /// The thread that follows the collector could not start.
    #[error("starting the score feed: {0}")]
    Feed(#[source] std::io::Error),
    /// A server stopped with an error.
    #[error("serving HTTP: {0}")]
    Serve(#[from] std::io::Error),
}

impl SchedulerArgs {
    /// The placement overrides these flags set, checked.
    pub fn overrides(&self) -> Result<PlacementOverrides, SchedulerError> {
        let overrides = PlacementOverrides {
            loss_threshold: self.loss_threshold,
            out_of_zone_factor: self.out_of_zone_factor,
            min_goodput_fraction: self.min_goodput_fraction,
            strict_zone: self.strict_zone,
        };
        // Each value set is checked as the collector checks its own.
        overrides.apply(PlacementConfig::default()).checked()?;
        Ok(overrides)
    }
}

fn parse_network(name: &str) -> Result<Network, netaware_core::network::InvalidNetwork> {
    Network::parse(name)
}

impl SchedulerArgs {
    /// Every network followed, the default among them, each once.
    pub fn followed_networks(&self) -> Vec<Network> {
        let mut followed = vec![Network::primary(), self.default_network.clone()];
        followed.extend(self.networks.iter().cloned());
        followed.sort();
        followed.dedup();
        followed
    }
}

async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, SchedulerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| SchedulerError::Bind { addr, source })
}

/// Runs the extender these flags describe until `shutdown`.
pub async fn run(args: SchedulerArgs, shutdown: CancellationToken) -> Result<(), SchedulerError> {
    let overrides = args.overrides()?;
    for (flag, value) in overrides.named() {
        tracing::warn!(
            flag,
            value,
            "overrides the collector's placement setting: the extender may place differently from what `netaware rank` and `netaware explain` say"
        );
    }
    let caches: Vec<ScoreCache> = args
        .followed_networks()
        .into_iter()
        .map(|network| {
            ScoreCache::new(args.max_score_age)
                .overriding(overrides)
                .on_network(network)
        })
        .collect();
    let tls = args.tls.load()?;
    let https = args.http_tls.server(tls.as_ref())?;
    let collector = netaware_runtime::tls::endpoint(&args.collector, tls.as_ref())?;
    // The watch stream carries megabytes a second at thousands of nodes:
    // decoded on a thread of its own per network, behind kube-scheduler's
    // calls.
    let mut feeds = Vec::new();
    for cache in &caches {
        let feed = netaware_runtime::background::spawn_feed(
            "netaware-score-feed",
            cache
                .clone()
                .follow_endpoint(collector.clone(), shutdown.clone()),
        )
        .map_err(SchedulerError::Feed)?;
        feeds.push(feed);
    }
    let networks = NetworkCaches::new(&args.default_network, caches)?;
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
    let extender = Arc::new(
        Extender::new(networks.default_cache().clone(), placements, kube).with_networks(networks),
    );
    let listener = bind(args.listen).await?;
    let scheme = if https.is_some() { "https" } else { "http" };
    tracing::info!(listen = %args.listen, scheme, collector = %args.collector, "extender listening");
    let metrics = match args.metrics_listen {
        Some(addr) => {
            let listener = bind(addr).await?;
            tracing::info!(listen = %addr, scheme, "metrics listening");
            let app = observability_router(Arc::clone(&extender));
            Some(tokio::spawn(netaware_runtime::http::serve(
                listener,
                app,
                https.clone(),
                shutdown.clone(),
            )))
        }
        None => None,
    };
    netaware_runtime::http::serve(listener, router(extender), https, shutdown).await?;
    if let Some(metrics) = metrics {
        // A panicked metrics task has already logged; the extender is down.
        if let Ok(served) = metrics.await {
            served?;
        }
    }
    // The feeds have seen the same shutdown; they end within a moment.
    let _ = tokio::task::spawn_blocking(move || {
        for feed in feeds {
            let _ = feed.join();
        }
    })
    .await;
    Ok(())
}
