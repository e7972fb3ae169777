//! The publisher against kube-rs's real client, with the API server's side
//! played over a tower-test mock service (as the extender's pod watch is
//! tested): the exact server-side-apply PATCHes it sends, no write when
//! nothing changed, labels taken off a node that left, a HyperNode of a
//! block that is no more deleted, failures tried again, writes paced;
//! a fault's Events and taint.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use kube::client::Body;
use netaware_core::fault_kind::{FaultKind, FaultMetric};
use netaware_core::faults::tracker::Fault;
use netaware_core::measured_topology::{
    Block, BlockNode, LinkCost, MeasuredTopology, NetworkCosts, ZoneBlocks,
};
use netaware_core::network::Network;
use netaware_publish::{
    FaultReport, Format, PublishReport, Publisher, PublisherOptions, RenderOptions,
};
use serde_json::{Value, json};

/// One request as the API server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    /// Path and query.
    uri: String,
    content_type: String,
    body: Value,
}

/// How the fake API server answers a request it is sent.
type Answer = Box<dyn Fn(&Seen) -> (StatusCode, Value) + Send + Sync>;

/// Serves the publisher's requests from `answer`, recording each.
fn api_server(answer: Answer) -> (kube::Client, Arc<Mutex<Vec<Seen>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Some((request, respond)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            let request = Seen {
                method: parts.method,
                uri: parts.uri.to_string(),
                content_type: parts
                    .headers
                    .get("content-type")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (status, reply) = answer(&request);
            record.lock().unwrap().push(request);
            respond.send_response(
                Response::builder()
                    .status(status)
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        }
    });
    (kube::Client::new(service, "default"), seen)
}

fn metadata_list(names: &[&str]) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
        "metadata": {"resourceVersion": "7"},
        "items": names.iter().map(|n| json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": n}
        })).collect::<Vec<_>>()
    })
}

fn status(code: u16, reason: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
           "message": reason, "reason": reason, "code": code})
}

/// An API server where `old-node` carries netaware's labels and the
/// HyperNode `block-zone-a-9` was netaware's; every write succeeds (an
/// apply answers with what it was sent), except those `fail` picks.
fn cluster(fail: impl Fn(&Seen) -> Option<u16> + Send + Sync + 'static) -> Answer {
    Box::new(move |request| {
        if let Some(code) = fail(request) {
            return (
                StatusCode::from_u16(code).unwrap(),
                status(code, "NotFound"),
            );
        }
        match request.method {
            Method::GET if request.uri.starts_with("/api/v1/nodes?") => {
                (StatusCode::OK, metadata_list(&["old-node"]))
            }
            Method::GET => (StatusCode::OK, metadata_list(&["block-zone-a-9"])),
            Method::DELETE => (
                StatusCode::OK,
                json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success"}),
            ),
            _ => (StatusCode::OK, request.body.clone()),
        }
    })
}

fn topology(a2_degraded: bool) -> MeasuredTopology {
    let node = |name: &str, degraded| BlockNode {
        name: name.into(),
        degraded,
        bad_uplink: false,
    };
    MeasuredTopology {
        zones: vec![ZoneBlocks {
            zone: "zone-a".into(),
            region: "region-1".into(),
            blocks: vec![Block {
                number: 1,
                nodes: vec![node("a1", false), node("a2", a2_degraded)],
            }],
        }],
        costs: NetworkCosts {
            zones: vec![LinkCost {
                origin: "zone-a".into(),
                destination: "zone-b".into(),
                rtt_p90_ms: 5.1,
                goodput_bps: None,
                pairs: 4,
            }],
            regions: Vec::new(),
        },
    }
}

fn options(formats: &[Format], gap: Duration) -> PublisherOptions {
    PublisherOptions {
        formats: formats.iter().copied().collect::<BTreeSet<_>>(),
        render: RenderOptions::default(),
        min_write_gap: gap,
        taint_faults: false,
        instance: "publisher-0".into(),
    }
}

fn take(seen: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    std::mem::take(&mut *seen.lock().unwrap())
}

const APPLY: &str = "&force=true&fieldManager=netaware";

#[tokio::test]
async fn it_applies_what_changed_and_only_that() {
    let (client, seen) = api_server(cluster(|_| None));
    let formats = [
        Format::Labels,
        Format::Kueue,
        Format::Volcano,
        Format::Diktyo,
    ];
    let mut publisher = Publisher::start(client, options(&formats, Duration::ZERO))
        .await
        .unwrap();

    // At start: what netaware wrote before, by label.
    let listed = take(&seen);
    let uris: Vec<&str> = listed.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "/api/v1/nodes?&labelSelector=netaware.io%2Fblock",
            "/apis/topology.volcano.sh/v1alpha1/hypernodes?&labelSelector=volcano.sh%2Fnetwork-topology-source%3Dnetaware",
        ]
    );

    let report = publisher.publish(&topology(false)).await;
    assert_eq!(
        report,
        PublishReport {
            applied: 6,
            unchanged: 0,
            removed: 2,
            failed: 0
        }
    );
    let writes = take(&seen);
    let summary: Vec<String> = writes
        .iter()
        .map(|s| format!("{} {}", s.method, s.uri))
        .collect();
    let apply = |path: &str| format!("PATCH {path}?{APPLY}");
    assert_eq!(
        summary,
        [
            apply("/api/v1/nodes/a1"),
            apply("/api/v1/nodes/a2"),
            apply("/apis/kueue.x-k8s.io/v1beta2/topologies/netaware"),
            apply("/apis/topology.volcano.sh/v1alpha1/hypernodes/block-zone-a-1"),
            apply("/apis/topology.volcano.sh/v1alpha1/hypernodes/zone-zone-a"),
            apply(
                "/apis/networktopology.diktyo.x-k8s.io/v1alpha1/namespaces/default/networktopologies/netaware"
            ),
            // old-node left the topology: applied with no labels, which
            // takes netaware's off; the old block's HyperNode deleted.
            apply("/api/v1/nodes/old-node"),
            "DELETE /apis/topology.volcano.sh/v1alpha1/hypernodes/block-zone-a-9?".into(),
        ]
    );
    assert!(
        writes[..7]
            .iter()
            .all(|s| s.content_type == "application/apply-patch+yaml")
    );
    assert_eq!(
        writes[0].body,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a1", "labels": {
            "netaware.io/block": "zone-a-1", "netaware.io/degraded": "false",
            "netaware.io/bad-uplink": "false"}}})
    );
    assert_eq!(
        writes[6].body,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "old-node"}})
    );

    // Nothing changed: nothing written.
    let report = publisher.publish(&topology(false)).await;
    assert_eq!(
        (report.applied, report.unchanged, report.removed),
        (0, 6, 0)
    );
    assert!(take(&seen).is_empty());

    // a2 degraded: its labels, and only they, written again.
    let report = publisher.publish(&topology(true)).await;
    assert_eq!((report.applied, report.unchanged), (1, 5));
    let writes = take(&seen);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].uri, format!("/api/v1/nodes/a2?{APPLY}"));
    assert_eq!(
        writes[0].body["metadata"]["labels"]["netaware.io/degraded"],
        "true"
    );
}

#[tokio::test]
async fn a_failed_write_is_tried_again_and_a_deleted_node_is_let_go() {
    let failures = Arc::new(Mutex::new(1));
    let remaining = Arc::clone(&failures);
    // a1's first apply fails with a 500; old-node was deleted: applying
    // to it is refused (the publisher may not create Nodes), and reading
    // it finds nothing.
    let (client, seen) = api_server(cluster(move |request| {
        if request.uri.starts_with("/api/v1/nodes/old-node") {
            return Some(if request.method == Method::GET {
                404
            } else {
                403
            });
        }
        let mut left = remaining.lock().unwrap();
        (request.uri.starts_with("/api/v1/nodes/a1") && *left > 0).then(|| {
            *left -= 1;
            500
        })
    }));
    let mut publisher = Publisher::start(client, options(&[Format::Labels], Duration::ZERO))
        .await
        .unwrap();
    take(&seen);
    let report = publisher.publish(&topology(false)).await;
    assert_eq!((report.applied, report.failed, report.removed), (1, 1, 1));
    let asked: Vec<String> = take(&seen)
        .iter()
        .map(|s| format!("{} {}", s.method, s.uri))
        .collect();
    assert_eq!(
        asked[2..],
        [
            format!("PATCH /api/v1/nodes/old-node?{APPLY}"),
            "GET /api/v1/nodes/old-node".to_owned()
        ]
    );
    let report = publisher.publish(&topology(false)).await;
    assert_eq!((report.applied, report.unchanged, report.failed), (1, 1, 0));
    let writes = take(&seen);
    let uris: Vec<&str> = writes.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(uris, [format!("/api/v1/nodes/a1?{APPLY}")]);
}

#[tokio::test]
async fn a_refused_list_at_start_is_a_clear_error() {
    let (client, _) = api_server(Box::new(|_| {
        (StatusCode::FORBIDDEN, status(403, "Forbidden"))
    }));
    let Err(err) = Publisher::start(client, options(&[Format::Labels], Duration::ZERO)).await
    else {
        panic!("a publisher without the right to list nodes");
    };
    assert!(err.to_string().contains("Nodes"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn writes_are_paced() {
    let (client, _) = api_server(cluster(|_| None));
    let gap = Duration::from_millis(50);
    let mut publisher = Publisher::start(client, options(&[Format::Volcano], gap))
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    // Two HyperNodes applied, one deleted: three writes, two gaps.
    let report = publisher.publish(&topology(false)).await;
    assert_eq!((report.applied, report.removed), (2, 1));
    let took = started.elapsed();
    assert!(took >= 2 * gap && took < 3 * gap, "{took:?}");
}

/// A Node as the API server gives it: `taints` its own, at
/// resourceVersion 41.
fn node_with_taints(name: &str, taints: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "resourceVersion": "41"},
           "spec": {"taints": taints}})
}

fn node_fault(node: &str) -> Fault {
    Fault {
        kind: FaultKind::Node,
        network: Network::primary(),
        metric: FaultMetric::Loss,
        nodes: vec![node.to_owned()],
        zones: vec!["zone-a".into()],
        block: None,
        measures_like: None,
        value: 0.04,
        baseline: 0.001,
        confidence: 0.95,
        evidence: Vec::new(),
        since_unix_ms: 1,
    }
}

#[tokio::test]
async fn a_node_fault_is_an_event_and_a_taint_that_comes_off_when_it_clears() {
    let unreachable = json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"});
    let ours = json!({"key": "netaware.io/network-fault", "value": "node", "effect": "NoSchedule"});
    // old-node still carries a taint from an earlier run; a1 has another
    // controller's taint.
    let state = Arc::new(Mutex::new((vec![unreachable.clone()], vec![ours.clone()])));
    let server = Arc::clone(&state);
    let (client, seen) = api_server(Box::new(move |request| {
        let mut state = server.lock().unwrap();
        let uri = request.uri.as_str();
        match (&request.method, uri) {
            (&Method::GET, u) if u.starts_with("/api/v1/nodes?") => (
                StatusCode::OK,
                json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                       "items": [node_with_taints("a1", json!(state.0)),
                                 node_with_taints("old-node", json!(state.1))]}),
            ),
            (&Method::GET, "/api/v1/nodes/a1") => {
                (StatusCode::OK, node_with_taints("a1", json!(state.0)))
            }
            (&Method::GET, "/api/v1/nodes/old-node") => {
                (StatusCode::OK, node_with_taints("old-node", json!(state.1)))
            }
            (&Method::PATCH, u) => {
                let taints = request.body["spec"]["taints"].as_array().cloned().unwrap();
                if u.starts_with("/api/v1/nodes/a1") {
                    state.0 = taints;
                } else {
                    state.1 = taints;
                }
                (StatusCode::OK, request.body.clone())
            }
            _ => (StatusCode::CREATED, request.body.clone()),
        }
    }));
    let mut options = options(&[], Duration::ZERO);
    options.taint_faults = true;
    let mut publisher = Publisher::start(client, options).await.unwrap();
    take(&seen);

    let report = publisher.act_on_faults(&[node_fault("a1")]).await;
    assert_eq!(
        report,
        FaultReport {
            events: 1,
            tainted: 1,
            untainted: 1,
            failed: 0
        }
    );
    let asked = take(&seen);
    let event = &asked[0];
    assert_eq!(event.method, Method::POST);
    assert_eq!(
        event.uri,
        "/apis/events.k8s.io/v1/namespaces/default/events?"
    );
    assert_eq!(event.body["regarding"]["name"], "a1");
    assert_eq!(event.body["type"], "Warning");
    assert_eq!(event.body["reportingInstance"], "publisher-0");
    // a1 keeps the other controller's taint and gets netaware's, under
    // the resourceVersion it was read at; old-node's comes off.
    let patches: Vec<&Seen> = asked.iter().filter(|s| s.method == Method::PATCH).collect();
    assert_eq!(patches.len(), 2);
    assert_eq!(patches[0].content_type, "application/merge-patch+json");
    assert_eq!(patches[0].body["metadata"]["resourceVersion"], "41");
    let (a1, old) = state.lock().unwrap().clone();
    assert_eq!(a1, [unreachable.clone(), ours.clone()]);
    assert!(old.is_empty());

    // Unchanged: nothing said, nothing written.
    let report = publisher.act_on_faults(&[node_fault("a1")]).await;
    assert_eq!(report, FaultReport::default());
    assert!(take(&seen).is_empty());

    // Cleared: an Event saying so, and the taint off, the other kept.
    let report = publisher.act_on_faults(&[]).await;
    assert_eq!((report.events, report.untainted), (1, 1));
    let asked = take(&seen);
    assert_eq!(asked[0].body["reason"], "NetworkFaultCleared");
    assert_eq!(state.lock().unwrap().0, [unreachable]);
}
