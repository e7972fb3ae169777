//! The extender as it runs in its pod, for tests: following a collector's
//! watch stream, served on loopback, with its bindings and Events going to
//! an API server played by a tower-test mock that accepts every one and
//! keeps what it was sent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use http_body_util::BodyExt;
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
    /// What it sent the API server: "METHOD path body", in order.
    pub api_calls: Arc<Mutex<Vec<String>>>,
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
        let api_calls = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&api_calls);
        tokio::spawn(async move {
            while let Some((request, respond)) = api.next_request().await {
                let (parts, body) = request.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                kept.lock().expect("not poisoned").push(format!(
                    "{} {} {}",
                    parts.method,
                    parts.uri.path(),
                    String::from_utf8_lossy(&body)
                ));
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
        Self {
            addr,
            cache,
            api_calls,
        }
    }

    /// An extender following the collector of a lab `system`, through a
    /// side door into the lab's control host (as in [`Self::start`]).
    pub async fn following_lab(
        system: &netaware::lab_system::LabSystem,
        max_age: Duration,
        shutdown: &CancellationToken,
    ) -> Self {
        let access = system
            .lab()
            .open_access("control")
            .expect("a side door into the lab");
        let collector = format!("http://{access}:{}", netaware::lab_system::COLLECTOR_PORT);
        Self::start(collector, max_age, shutdown).await
    }

    /// Its /metrics.
    pub async fn metrics(&self) -> String {
        crate::http::get(self.addr, "/metrics").await.1
    }

    /// POSTs `body` to `path` and reads the JSON answer.
    pub async fn post(&self, path: &str, body: Value) -> Value {
        let (_, answer) = crate::http::post(self.addr, path, body.to_string().as_bytes()).await;
        serde_json::from_str(&answer).expect("the extender answers JSON")
    }
}
