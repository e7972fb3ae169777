//! A harness for untrusted extender requests, shared by the fuzz target
//! (fuzz/) and the property tests in CI (tests/robustness.rs): bytes as the
//! body of every verb, through the real router, with scores for nodes a, b
//! and c in the cache. Panics if an answer is a server error or is not
//! JSON. Not for production use.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use netaware_proto::v1 as pb;
use tokio::sync::RwLock;
use tower::ServiceExt;

use crate::cache::ScoreCache;
use crate::placements::Placements;
use crate::server::{Extender, router};

fn matrix() -> pb::Matrix {
    let node = |name: &str, zone: &str| pb::Node {
        name: name.into(),
        zone: zone.into(),
        kind: pb::NodeKind::Agent.into(),
        ..pb::Node::default()
    };
    let pair = |src: &str, dst: &str, quality: f64| pb::Pair {
        src: src.into(),
        dst: dst.into(),
        rtt_median_ms: Some(0.3),
        loss_ratio: Some(0.0),
        samples: 100,
        quality,
        ..pb::Pair::default()
    };
    pb::Matrix {
        version: 1,
        generated_unix_ms: 1,
        nodes: vec![node("a", "z1"), node("b", "z1"), node("c", "z2")],
        pairs: vec![
            pair("a", "b", 0.9),
            pair("b", "a", 0.9),
            pair("a", "c", 0.2),
            pair("c", "a", 0.2),
        ],
        ..pb::Matrix::default()
    }
}

/// Bytes as the body of POST /filter, /prioritize and /bind.
pub fn request_bytes(bytes: &[u8]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let cache = ScoreCache::new(Duration::from_secs(3_600));
        cache.store(&matrix());
        let extender = Arc::new(Extender::new(
            cache,
            Arc::new(RwLock::new(Placements::new())),
            None,
        ));
        for verb in ["/filter", "/prioritize", "/bind"] {
            let request = Request::post(verb)
                .header("content-type", "application/json")
                .body(Body::from(bytes.to_vec()))
                .expect("a request");
            let response = router(Arc::clone(&extender))
                .oneshot(request)
                .await
                .expect("the router answers");
            let status = response.status();
            assert!(
                [
                    StatusCode::OK,
                    StatusCode::BAD_REQUEST,
                    StatusCode::PAYLOAD_TOO_LARGE
                ]
                .contains(&status),
                "{verb}: {status}"
            );
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("a body");
            if status != StatusCode::PAYLOAD_TOO_LARGE {
                assert!(
                    serde_json::from_slice::<serde_json::Value>(&body).is_ok(),
                    "{verb}: the answer is not JSON"
                );
            }
        }
    });
}
