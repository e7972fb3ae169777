//! The collector's plain HTTP endpoint: /healthz, /metrics and the
//! alerts' /runbooks.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::agents::Agents;
use crate::ingest::Ingest;
use crate::metrics::{BlockFacts, FaultFacts, ScrapeFacts, WorkMetrics, exposition_of_networks};
use crate::snapshots::Snapshots;
use crate::tasks::topology::SharedTopology;

/// What the HTTP endpoint reads.
#[derive(Debug, Clone)]
pub struct HttpState {
    /// The state (node count, sequence marks, throughput counts).
    pub ingest: Arc<Ingest>,
    /// The shared snapshot.
    pub snapshots: Arc<Snapshots>,
    /// The open sessions, counted.
    pub agents: Arc<Agents>,
    /// Counters of the collector's work.
    pub work: Arc<WorkMetrics>,
    /// The last round's topology and faults.
    pub topology: Arc<SharedTopology>,
    /// Node pairs exported with series of their own.
    pub pair_series: usize,
}

/// The HTTP routes.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/runbooks", get(runbooks))
        .with_state(state)
}

async fn runbooks() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        crate::runbooks::page(),
    )
}

async fn metrics(State(shared): State<HttpState>) -> impl IntoResponse {
    let snapshot = shared
        .snapshots
        .for_reader(&shared.ingest, &shared.work)
        .await;
    let (throughput, unknown_peers, last_seqs) = {
        let state = shared.ingest.state();
        let last_seqs = state
            .agent_marks()
            .into_iter()
            .map(|(node, _, last_seq)| (node, last_seq))
            .collect();
        (state.throughput_counts(), state.unknown_peers(), last_seqs)
    };
    let placement = snapshot.config.placement;
    let published = shared.topology.get();
    let faults = FaultFacts {
        networks: published.by_network.keys().cloned().collect(),
        open: published
            .faults
            .iter()
            .map(|fault| (fault.network.clone(), fault.kind))
            .collect(),
    };
    let blocks = published
        .by_network
        .iter()
        .flat_map(|(network, topology)| {
            topology.zones.iter().flat_map(move |zone| {
                zone.blocks.iter().map(move |block| BlockFacts {
                    network: network.clone(),
                    zone: zone.zone.clone(),
                    number: block.number,
                    nodes: block.nodes.iter().map(|n| n.name.clone()).collect(),
                })
            })
        })
        .collect();
    let facts = ScrapeFacts {
        open_sessions: shared.agents.open_sessions(),
        throughput,
        unknown_peers,
        pair_series: shared.pair_series,
        blocks,
        last_seqs,
        placement,
        faults,
    };
    // Rendered on a background thread: at 5,000 nodes the text takes tens
    // of milliseconds, which on one of the runtime's threads would hold up
    // the acks queued behind it (BENCHMARKS.md, "What holds the
    // collector's memory").
    let work = Arc::clone(&shared.work);
    let text = netaware_runtime::background::run(move || {
        let others: Vec<_> = snapshot
            .other_networks
            .iter()
            .map(|(network, placer)| (network, placer.matrix()))
            .collect();
        netaware_runtime::prometheus_text(&exposition_of_networks(
            &work,
            snapshot.scored(),
            &others,
            &facts,
        ))
    })
    .await;
    match text {
        Some(text) => (
            StatusCode::OK,
            [(CONTENT_TYPE, netaware_runtime::PROMETHEUS_CONTENT_TYPE)],
            text,
        ),
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            "the metrics could not be rendered (no thread to render them on)\n".to_owned(),
        ),
    }
}

/// 200 while the collector works as it should; 503 while its saves fail
/// (the gRPC health service kubelet asks stays serving: taking the
/// collector out of its Service would stop ingest as well, and agents keep
/// every unsaved window until a save holds it).
async fn healthz(State(shared): State<HttpState>) -> (StatusCode, String) {
    let nodes = shared.ingest.state().node_count();
    match shared.work.save_problem() {
        None => (StatusCode::OK, format!("ok: {nodes} nodes\n")),
        Some(problem) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: saving the state fails: {problem}\n"),
        ),
    }
}
