//! The collector's plain HTTP endpoint: /healthz now, /metrics later.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::get;

use crate::shared::Shared;

/// The HTTP routes.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .with_state(shared)
}

async fn healthz(State(shared): State<Arc<Shared>>) -> String {
    let nodes = shared.state.lock().await.node_count();
    format!("ok: {nodes} nodes\n")
}
