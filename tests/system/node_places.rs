//! `--zones-from-nodes` with a real collector over real gRPC, and kube-rs's
//! real client asking for each agent's Node, with the API server's side
//! played over a tower-test mock (`netaware_testkit::mock_api`): a
//! hello whose zone disagrees with its Node's labels is refused, one that
//! agrees opens, and a Node the API cannot give refuses the hello too.

use http::StatusCode;
use netaware_collector::node_places::NodePlaces;
use netaware_collector::{Collector, CollectorConfig};
use netaware_proto::v1 as pb;
use netaware_testkit::Session;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn hello_in(node: &str, zone: &str) -> pb::AgentMessage {
    netaware_testkit::hello_message(pb::Hello {
        zone: zone.into(),
        ..netaware_testkit::hello(node)
    })
}

#[tokio::test]
async fn a_hello_must_name_the_zone_of_its_node() {
    // The API server: gpu-1 in zone-a, gpu-2 in zone-b, no gpu-3.
    let (client, asked) = netaware_testkit::mock_api(|_, path, _| {
        let name = path.rsplit('/').next().unwrap_or_default();
        let zone = match name {
            "gpu-1" => Some("zone-a"),
            "gpu-2" => Some("zone-b"),
            _ => None,
        };
        match zone {
            Some(zone) => (
                StatusCode::OK,
                json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
                    "spec": {}, "status": {}
                }),
            ),
            None => (
                StatusCode::NOT_FOUND,
                json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("nodes \"{name}\" not found"), "reason": "NotFound", "code": 404
                }),
            ),
        }
    });
    let shutdown = CancellationToken::new();
    let config = CollectorConfig {
        node_places: Some(std::sync::Arc::new(NodePlaces::new(client))),
        ..netaware_testkit::collector_config(Vec::new(), None)
    };
    let collector = Collector::start(config, shutdown.clone()).await.unwrap();
    let url = format!("http://{}", collector.grpc_addr);

    let open = |node: &'static str, zone: &'static str| {
        let url = url.clone();
        async move { Session::open(&url, hello_in(node, zone)).await }
    };
    open("gpu-1", "zone-a").await.expect("gpu-1 is in zone-a");
    let claimed = open("gpu-2", "zone-a").await.expect_err("gpu-2 is not");
    assert_eq!(claimed.code(), tonic::Code::PermissionDenied, "{claimed:?}");
    assert!(
        claimed.message().contains("zone-a") && claimed.message().contains("zone-b"),
        "{claimed:?}"
    );
    let unknown = open("gpu-3", "zone-a").await.expect_err("no such Node");
    assert_eq!(unknown.code(), tonic::Code::PermissionDenied, "{unknown:?}");
    assert!(unknown.message().contains("gpu-3"), "{unknown:?}");
    // A reconnect is checked against the Node read before.
    open("gpu-1", "zone-a").await.expect("gpu-1 again");
    assert_eq!(collector.ingest().state().node_count(), 1);

    assert_eq!(
        *asked.lock().unwrap(),
        [
            "/api/v1/nodes/gpu-1",
            "/api/v1/nodes/gpu-2",
            "/api/v1/nodes/gpu-3"
        ],
        "one read per Node"
    );
    shutdown.cancel();
}
