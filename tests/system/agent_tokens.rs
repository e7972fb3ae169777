//! `--agent-tokens` with a real collector over real gRPC, and kube-rs's
//! real client asking the API server for each token's review and each
//! Node's addresses, with the API server's side played over a tower-test
//! mock: only a valid token of the agents' service account, bound to a pod
//! on the node the hello names, with the Node's own addresses, opens a
//! session; a token of node A saying hello as B is refused, and B's real
//! session is unaffected.

use http::{Method, StatusCode};
use netaware_collector::agent_tokens::{AgentTokens, DEFAULT_AGENT_ACCOUNT, NODE_NAME_CLAIM};
use netaware_collector::{Collector, CollectorConfig};
use netaware_proto::v1 as pb;
use netaware_testkit::{Session, good_peer, window};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tonic::Code;

fn hello(node: &str, address: &str) -> pb::AgentMessage {
    netaware_testkit::hello_message(pb::Hello {
        addresses: vec![address.into()],
        ..netaware_testkit::hello(node)
    })
}

/// What the API server says of `token`: (authenticated, account, node).
fn review_of(token: &str) -> (bool, &'static str, Option<&'static str>) {
    match token {
        "token-of-gpu-1" => (true, DEFAULT_AGENT_ACCOUNT, Some("gpu-1")),
        "token-of-gpu-2" => (true, DEFAULT_AGENT_ACCOUNT, Some("gpu-2")),
        // A web pod on gpu-2 that asked for a token of this audience.
        "token-of-a-web-pod" => (true, "system:serviceaccount:default:web", Some("gpu-2")),
        _ => (false, "", None),
    }
}

/// The mock API server's answer to `request` (its body read as JSON).
fn answer(method: &Method, path: &str, body: &Value) -> (StatusCode, Value) {
    if method == Method::POST && path == "/apis/authentication.k8s.io/v1/tokenreviews" {
        let token = body["spec"]["token"].as_str().unwrap_or_default();
        assert_eq!(body["spec"]["audiences"], json!(["netaware"]));
        let (authenticated, user, node) = review_of(token);
        let status = if authenticated {
            json!({
                "authenticated": true,
                "audiences": ["netaware"],
                "user": {"username": user, "extra": {NODE_NAME_CLAIM: [node]}}
            })
        } else {
            json!({"authenticated": false, "error": "invalid bearer token"})
        };
        let review = json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "metadata": {}, "spec": body["spec"], "status": status
        });
        return (StatusCode::CREATED, review);
    }
    let address = match path {
        "/api/v1/nodes/gpu-1" => "127.0.0.61",
        "/api/v1/nodes/gpu-2" => "127.0.0.62",
        _ => {
            return (
                StatusCode::NOT_FOUND,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                       "reason": "NotFound", "code": 404}),
            );
        }
    };
    let name = path.rsplit('/').next().unwrap();
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {},
        "status": {"addresses": [
            {"type": "InternalIP", "address": address},
            {"type": "Hostname", "address": name}
        ]}
    });
    (StatusCode::OK, node)
}

#[tokio::test]
async fn only_a_node_s_own_agent_token_speaks_for_it() {
    let (client, asked) = netaware_testkit::mock_api(answer);
    let shutdown = CancellationToken::new();
    let config = CollectorConfig {
        agent_tokens: Some(std::sync::Arc::new(AgentTokens::new(
            client,
            DEFAULT_AGENT_ACCOUNT,
        ))),
        ..netaware_testkit::collector_config(Vec::new(), None)
    };
    let collector = Collector::start(config, shutdown.clone()).await.unwrap();
    let url = format!("http://{}", collector.grpc_addr);
    let open = |node: &'static str, address: &'static str, token: Option<&'static str>| {
        let url = url.clone();
        async move {
            match token {
                Some(token) => Session::open_with_token(&url, hello(node, address), token).await,
                None => Session::open(&url, hello(node, address)).await,
            }
        }
    };
    let refused = |result: Result<Session, tonic::Status>, why: &str| {
        let status = result.expect_err(why);
        assert_eq!(status.code(), Code::PermissionDenied, "{why}: {status:?}");
        status.message().to_owned()
    };

    // The real agents of gpu-1 and gpu-2.
    let mut gpu_2 = open("gpu-2", "127.0.0.62", Some("token-of-gpu-2"))
        .await
        .expect("gpu-2's own token");
    let _gpu_1 = open("gpu-1", "127.0.0.61", Some("token-of-gpu-1"))
        .await
        .expect("gpu-1's own token");

    // gpu-1's token saying hello as gpu-2: refused, naming both.
    let message = refused(
        open("gpu-2", "127.0.0.62", Some("token-of-gpu-1")).await,
        "another node's token",
    );
    assert!(
        message.contains("gpu-1") && message.contains("gpu-2"),
        "{message}"
    );
    // Its own node at an address that is not the Node's.
    let message = refused(
        open("gpu-1", "127.0.0.99", Some("token-of-gpu-1")).await,
        "an address not on the Node",
    );
    assert!(message.contains("127.0.0.99"), "{message}");
    // No token, a token the API server rejects, another account's token.
    let message = refused(open("gpu-2", "127.0.0.62", None).await, "no token");
    assert!(message.contains("token"), "{message}");
    refused(
        open("gpu-2", "127.0.0.62", Some("forged")).await,
        "an invalid token",
    );
    let message = refused(
        open("gpu-2", "127.0.0.62", Some("token-of-a-web-pod")).await,
        "a web pod's token",
    );
    assert!(message.contains("default:web"), "{message}");

    // None of that reached the real gpu-2: its session is open and its
    // windows are taken.
    let peer = pb::PeerWindow {
        peer: "gpu-1".into(),
        ..good_peer()
    };
    let ack = gpu_2.send(window(1, vec![peer])).await;
    assert_eq!((ack.code, ack.message.as_str()), (0, ""), "{ack:?}");
    assert_eq!(collector.ingest().state().node_count(), 2);

    // A reconnect with a token reviewed before asks the API server nothing.
    let before = asked.lock().unwrap().len();
    drop(gpu_2);
    open("gpu-2", "127.0.0.62", Some("token-of-gpu-2"))
        .await
        .expect("gpu-2 again");
    assert_eq!(asked.lock().unwrap().len(), before, "kept: {asked:?}");
    shutdown.cancel();
}
