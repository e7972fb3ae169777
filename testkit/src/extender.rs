//! The extender as it runs in its pod, for tests: following a collector's
//! watch stream, served on loopback, with its bindings going to an API
//! server played by a tower-test mock that accepts every one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use netaware_scheduler::cache::ScoreCache;
use netaware_scheduler::placements::Placements;
use netaware_scheduler::server::Extender;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A running extender.
#[derive(Debug)]
pub struct FollowingExtender {
    /// Where it answers.
    pub addr: SocketAddr,
    /// Its copy of the scores.
    pub cache: ScoreCache,
}

impl FollowingExtender {
    /// An extender following the collector at `collector` (a URL), its
    /// scores counting as fresh for `max_age`, until `shutdown`; returns
    /// once the first scores have come (panics after 20 s without).
    pub async fn start(collector: String, max_age: Duration, shutdown: &CancellationToken) -> Self {
        let cache = ScoreCache::new(max_age);
        tokio::spawn(cache.clone().follow(collector, shutdown.clone()));
        let (service, mut api) =
            tower_test::mock::pair::<Request<kube::client::Body>, Response<kube::client::Body>>();
        tokio::spawn(async move {
            while let Some((_, respond)) = api.next_request().await {
                let ok = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Success", "code": 201});
                respond.send_response(
                    Response::builder()
                        .status(201)
                        .body(kube::client::Body::from(ok.to_string().into_bytes()))
                        .expect("a response"),
                );
            }
        });
        let extender = Arc::new(Extender::new(
            cache.clone(),
            Arc::new(tokio::sync::RwLock::new(Placements::new())),
            Some(kube::Client::new(service, "default")),
        ));
        let addr = crate::http::serve_extender(extender, shutdown).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while cache.fresh().is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no scores reached the extender"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self { addr, cache }
    }

    /// POSTs `body` to `path` and reads the JSON answer.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        let (_, answer) = crate::http::post(self.addr, path, body.to_string().as_bytes()).await;
        serde_json::from_str(&answer).expect("the extender answers JSON")
    }
}
