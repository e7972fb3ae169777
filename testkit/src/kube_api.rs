//! A Kubernetes API server played over a tower-test mock, as kube-rs tests
//! its own client: the collector's real kube-rs client asks, a test's
//! function answers, and every path asked is logged.

use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::Value;

/// The paths asked of a mock API server, in order.
pub type Asked = Arc<Mutex<Vec<String>>>;

/// A client of a mock API server whose answer to each request (method,
/// path, body read as JSON, `Null` when not JSON) is `answer`'s; with the
/// log of the paths asked. Spawns the server's task on the current runtime.
pub fn mock_api(
    answer: impl Fn(&Method, &str, &Value) -> (StatusCode, Value) + Send + 'static,
) -> (kube::Client, Asked) {
    let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let asked = Asked::default();
    let log = Arc::clone(&asked);
    tokio::spawn(async move {
        while let Some((request, respond)) = api.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = http_body_util::BodyExt::collect(body)
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let (status, reply) = answer(&parts.method, parts.uri.path(), &body);
            log.lock().unwrap().push(parts.uri.path().to_owned());
            respond.send_response(
                Response::builder()
                    .status(status)
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        }
    });
    (kube::Client::new(service, "default"), asked)
}
