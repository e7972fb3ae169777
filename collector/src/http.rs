//! The collector's plain HTTP endpoint: /healthz and /metrics.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::{DEFAULT_PAIR_NODE_LIMIT, ScrapeFacts, exposition};
use crate::shared::Shared;

/// The HTTP routes.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .with_state(shared)
}

async fn metrics(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let snapshot = shared.snapshot().await;
    let (throughput, last_seqs) = {
        let state = shared.state();
        let last_seqs = state
            .saved_nodes()
            .into_iter()
            .map(|node| (node.name, node.last_seq))
            .collect();
        (state.throughput_counts(), last_seqs)
    };
    let placement = snapshot.config.placement;
    let facts = ScrapeFacts {
        open_sessions: shared.sessions().len(),
        throughput,
        pair_node_limit: DEFAULT_PAIR_NODE_LIMIT,
        last_seqs,
        placement,
    };
    (
        [(CONTENT_TYPE, netaware_runtime::PROMETHEUS_CONTENT_TYPE)],
        netaware_runtime::prometheus_text(&exposition(&shared.work, &snapshot.scored, &facts)),
    )
}

async fn healthz(State(shared): State<Arc<Shared>>) -> String {
    let nodes = shared.state().node_count();
    format!("ok: {nodes} nodes\n")
}
