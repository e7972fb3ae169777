//! The pod watch against kube-rs's real client, with the API server's side
//! played over a tower-test mock service, the way kube-rs tests its own
//! client: the list, then the watch, with the exact JSON an API server
//! sends. (No live API server runs here; see docs/placement.md.)

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::Body;
use netaware_scheduler::job::job_of;
use netaware_scheduler::placements::Placements;
use netaware_scheduler::pods;
use serde_json::json;
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

fn pod(uid: &str, name: &str, node: &str, phase: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": uid, "resourceVersion": "10",
                     "labels": {"volcano.sh/job-name": "resnet"}},
        "spec": {"nodeName": node, "containers": [{"name": "worker", "image": "pytorch:2"}]},
        "status": {"phase": phase}
    })
}

#[tokio::test]
async fn the_watch_lists_then_follows_bound_pods_of_jobs() {
    let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let placements = Arc::new(RwLock::new(Placements::new()));
    let shutdown = CancellationToken::new();
    let watch = tokio::spawn(pods::follow(
        client,
        Arc::clone(&placements),
        shutdown.clone(),
    ));

    // The initial list: only pods bound to a node, across namespaces.
    let (request, respond) = api.next_request().await.expect("a list request");
    assert_eq!(request.method(), Method::GET);
    let uri = request.uri().to_string();
    assert!(uri.starts_with("/api/v1/pods?"), "{uri}");
    assert!(uri.contains("fieldSelector=spec.nodeName%21%3D"), "{uri}");
    let list = json!({
        "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "100"},
        "items": [pod("u1", "w1", "a1", "Running"), pod("u2", "w2", "a2", "Running"), pod("u9", "old", "c9", "Succeeded")]
    });
    respond.send_response(Response::new(Body::from(
        serde_json::to_vec(&list).unwrap(),
    )));

    // Then the watch from that version: a worker added on b1, one deleted.
    let (request, respond) = api.next_request().await.expect("a watch request");
    let uri = request.uri().to_string();
    assert!(
        uri.contains("watch=true") && uri.contains("resourceVersion=100"),
        "{uri}"
    );
    let events = [
        json!({"type": "ADDED", "object": pod("u3", "w3", "b1", "Running")}),
        json!({"type": "DELETED", "object": pod("u1", "w1", "a1", "Running")}),
    ]
    .iter()
    .map(|e| format!("{e}\n"))
    .collect::<String>();
    respond.send_response(Response::new(Body::from(events.into_bytes())));

    let (key, _) = job_of(
        "ml",
        &[("volcano.sh/job-name".to_string(), "resnet".to_string())].into(),
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let placed = placements.read().await.placed(&key);
        if placed == ["a2", "b1"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "placements stuck at {placed:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    watch.await.unwrap();
}
