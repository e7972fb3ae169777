//! A Node's topology read against kube-rs's real client, with the API
//! server's side played over a tower-test mock (as kube-rs tests its own
//! client): the request it makes and the answers it takes.

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use netaware_runtime::node_labels::{self, NodePlaceError};
use serde_json::json;

fn node(labels: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "gpu-7", "resourceVersion": "5", "labels": labels},
        "spec": {}, "status": {}
    }))
    .unwrap()
}

/// Runs `read` for gpu-7 against an API server that answers `status` and
/// `body`; returns the path asked for and what `read` made of the answer.
async fn read_with_answer(
    status: StatusCode,
    body: Vec<u8>,
) -> (String, Result<node_labels::Place, NodePlaceError>) {
    let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let reading = tokio::spawn(async move { node_labels::read(client, "gpu-7").await });
    let (request, respond) = api.next_request().await.expect("a request");
    assert_eq!(request.method(), Method::GET);
    let path = request.uri().path().to_owned();
    respond.send_response(
        Response::builder()
            .status(status)
            .body(Body::from(body))
            .unwrap(),
    );
    (path, reading.await.unwrap())
}

#[tokio::test]
async fn reads_its_own_node_and_takes_the_topology_labels() {
    let (path, topology) = read_with_answer(
        StatusCode::OK,
        node(json!({
            "topology.kubernetes.io/zone": "eu-west-1b",
            "topology.kubernetes.io/region": "eu-west-1",
            "nvidia.com/gpu.present": "true"
        })),
    )
    .await;
    assert_eq!(path, "/api/v1/nodes/gpu-7");
    let topology = topology.unwrap();
    assert_eq!(topology.zone, "eu-west-1b");
    assert_eq!(topology.region, "eu-west-1");
}

#[tokio::test]
async fn a_node_without_zone_label_and_a_refusal_are_clear_errors() {
    let (_, unlabelled) = read_with_answer(StatusCode::OK, node(json!({}))).await;
    assert!(matches!(unlabelled, Err(NodePlaceError::NoZone { .. })));

    let forbidden = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "nodes \"gpu-7\" is forbidden: User \"system:serviceaccount:netaware:netaware-agent\" cannot get resource \"nodes\"",
        "reason": "Forbidden", "code": 403
    });
    let (_, refused) = read_with_answer(
        StatusCode::FORBIDDEN,
        serde_json::to_vec(&forbidden).unwrap(),
    )
    .await;
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("gpu-7") && message.contains("forbidden"),
        "{message}"
    );
}
