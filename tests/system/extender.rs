//! The scheduler extender over real HTTP, with the JSON kube-scheduler
//! sends (full v1.Pod and v1.NodeList, or node names), fed by a real
//! collector over a real watch stream. No root needed: the collector's
//! windows come from hand-driven sessions.

use std::sync::Arc;
use std::time::Duration;

use netaware_scheduler::cache::ScoreCache;
use netaware_scheduler::placements::{Placements, PodFacts};
use netaware_scheduler::server::Extender;
use netaware_testkit::{Session, good_peer, post, serve_extender, start_collector, window};
use serde_json::{Value, json};
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

fn pod() -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": "resnet-worker-1", "namespace": "ml", "uid": "9f0c",
            "labels": {"training.kubeflow.org/job-name": "resnet", "training.kubeflow.org/replica-type": "worker"}
        },
        "spec": {"containers": [{"name": "pytorch", "image": "pytorch:2", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                 "schedulerName": "netaware-scheduler"},
        "status": {"phase": "Pending"}
    })
}

fn node(name: &str, zone: &str) -> Value {
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "r1"}},
        "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": "8"}}
    })
}

fn peer(name: &str, received: u32) -> netaware_proto::v1::PeerWindow {
    netaware_proto::v1::PeerWindow {
        peer: name.into(),
        received,
        ..good_peer()
    }
}

/// Waits until `cache` holds a matrix with a measured pair.
async fn first_matrix(cache: &ScoreCache) {
    netaware_testkit::wait_for(
        "the extender's first matrix",
        Duration::from_secs(5),
        || async {
            cache
                .fresh()
                .filter(|m| m.matrix().pairs().iter().any(|p| p.summary.samples > 0))
                .map(|_| ())
        },
    )
    .await;
}

/// A collector whose a1, a2 and a3 are in zone-a and b1 in zone-b, a3
/// losing 40% of its probes, and an extender (with `kube` as its API
/// server) following it, served once its first matrix is in.
struct Scored {
    addr: std::net::SocketAddr,
    placements: Arc<RwLock<Placements>>,
    collector: netaware_collector::Collector,
    _sessions: Vec<(&'static str, Session)>,
}

async fn scored_extender(kube: Option<kube::Client>, shutdown: &CancellationToken) -> Scored {
    let collector = start_collector(Vec::new(), shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let mut sessions = Vec::new();
    for (name, zone) in [
        ("a1", "zone-a"),
        ("a2", "zone-a"),
        ("a3", "zone-a"),
        ("b1", "zone-b"),
    ] {
        sessions.push((name, Session::hello_in(&url, name, zone).await));
    }
    for (name, session) in &mut sessions {
        let peers: Vec<_> = ["a1", "a2", "a3", "b1"]
            .into_iter()
            .filter(|p| p != name)
            .map(|p| peer(p, if *name == "a3" || p == "a3" { 6 } else { 10 }))
            .collect();
        assert_eq!(session.send(window(1, peers)).await.code, 0);
    }
    let cache = ScoreCache::new(Duration::from_secs(30));
    tokio::spawn(cache.clone().follow(url.clone(), shutdown.clone()));
    let placements = Arc::new(RwLock::new(Placements::new()));
    let extender = Arc::new(Extender::new(cache.clone(), Arc::clone(&placements), kube));
    let addr = serve_extender(extender, shutdown).await;
    first_matrix(&cache).await;
    Scored {
        addr,
        placements,
        collector,
        _sessions: sessions,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_and_prioritize_in_both_modes_and_neutral_without_scores() {
    let shutdown = CancellationToken::new();
    let Scored {
        addr,
        placements,
        collector,
        _sessions,
    } = scored_extender(None, &shutdown).await;

    // nodeCacheCapable: false, full objects, Go's field names.
    let args = json!({"Pod": pod(), "Nodes": {"kind": "NodeList", "apiVersion": "v1", "metadata": {},
        "items": [node("a1", "zone-a"), node("a2", "zone-a"), node("a3", "zone-a"), node("b1", "zone-b")]}});
    let (status, body) = post(addr, "/filter", args.to_string().as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    let result: Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = result["Nodes"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    // a3 loses on most of its links in its zone: degraded, for any job.
    assert_eq!(names, ["a1", "a2", "b1"]);
    assert_eq!(
        result["Nodes"]["items"][0]["status"]["allocatable"]["nvidia.com/gpu"], "8",
        "nodes come back whole"
    );
    assert!(
        result["FailedNodes"]["a3"]
            .as_str()
            .unwrap()
            .starts_with("degraded: loss 40.0%"),
        "{body}"
    );
    assert_eq!(result["Error"], "");

    let (status, body) = post(addr, "/prioritize", args.to_string().as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    let scores: Vec<(String, i64)> = serde_json::from_str::<Vec<Value>>(&body)
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["Host"].as_str().unwrap().to_owned(),
                h["Score"].as_i64().unwrap(),
            )
        })
        .collect();
    let score = |n: &str| scores.iter().find(|(h, _)| h == n).unwrap().1;
    assert!(
        scores.iter().all(|(_, s)| (0..=10).contains(s)),
        "{scores:?}"
    );
    assert!(
        score("a1") > score("a3") && score("a2") > score("a3"),
        "the lossy node scores lower: {scores:?}"
    );
    assert!(
        score("a1") > score("b1"),
        "the zone with the best-connected nodes wins: {scores:?}"
    );

    // Node labels win over the zones the agents gave: with b1 labelled as
    // zone-a, it joins a1's zone and scores like a zone-mate.
    let relabelled =
        json!({"Pod": pod(), "Nodes": {"items": [node("a1", "zone-a"), node("b1", "zone-a")]}});
    let (_, body) = post(addr, "/prioritize", relabelled.to_string().as_bytes()).await;
    let moved: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert!(
        moved.iter().all(|h| h["Score"].as_i64().unwrap() > 0),
        "b1 scored as a zone-mate of a1: {body}"
    );

    // nodeCacheCapable: true, names only, lower-case keys as Go accepts.
    let args = json!({"pod": pod(), "nodenames": ["a1", "b1", "unknown-node"]});
    let (status, body) = post(addr, "/filter", args.to_string().as_bytes()).await;
    assert_eq!(status, 200, "{body}");
    let result: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        result["NodeNames"],
        json!(["a1", "b1", "unknown-node"]),
        "no data is no reason to fail a node"
    );

    // With a worker of the job on a1 (as the pod watch reports it), a3 loses
    // too much to it and fails, with the reason; a2 comes first.
    placements.write().await.apply(&PodFacts {
        uid: "w0".into(),
        namespace: "ml".into(),
        labels: [(
            "training.kubeflow.org/job-name".to_string(),
            "resnet".to_string(),
        )]
        .into(),
        node: Some("a1".into()),
        finished: false,
    });
    let args = json!({"Pod": pod(), "NodeNames": ["a2", "a3", "b1"]});
    let (_, body) = post(addr, "/filter", args.to_string().as_bytes()).await;
    let result: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(result["NodeNames"], json!(["a2", "b1"]), "{body}");
    assert!(
        result["FailedNodes"]["a3"]
            .as_str()
            .unwrap()
            .contains("loss"),
        "{body}"
    );
    let (_, body) = post(addr, "/prioritize", args.to_string().as_bytes()).await;
    let scores: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert!(
        scores[0]["Score"].as_i64() > scores[2]["Score"].as_i64(),
        "a2 (zone-mate of a1) above b1: {body}"
    );

    // Bad input: a clear error, nothing else.
    let (status, body) = post(addr, "/filter", b"{not json").await;
    assert_eq!(status, 400);
    assert!(body.contains("malformed ExtenderArgs"), "{body}");
    let (status, body) = post(
        addr,
        "/prioritize",
        json!({"NodeNames": ["a1"]}).to_string().as_bytes(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("no Pod"), "{body}");
    let (status, body) = post(
        addr,
        "/filter",
        json!({"Pod": pod(), "NodeNames": []})
            .to_string()
            .as_bytes(),
    )
    .await;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&body).unwrap()["NodeNames"].clone()
        ),
        (200, json!([]))
    );
    let huge = vec![b' '; 10 * 1024 * 1024];
    let (status, _) = post(addr, "/filter", &huge).await;
    assert_eq!(status, 413, "a 10 MB body is refused");

    // The extender's metrics count what it did, neutral answers included
    // (a pod of no known job would get one; here every pod has a job).
    let (status, metrics) = netaware_testkit::get(addr, "/metrics").await;
    assert_eq!(status, 200);
    netaware_testkit::check_with_promtool("the extender's /metrics", &metrics);
    assert!(
        metrics.contains(r#"netaware_scheduler_requests_total{verb="filter",outcome="ok"}"#),
        "{metrics}"
    );
    let build = format!(
        "netaware_scheduler_build_info{{version=\"{}\"}} 1",
        netaware_runtime::build_info::VERSION
    );
    assert!(metrics.contains(&build), "{metrics}");
    assert!(
        metrics.contains(
            r#"netaware_scheduler_requests_total{verb="filter",outcome="bad_request"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("netaware_scheduler_request_duration_seconds_bucket"),
        "{metrics}"
    );

    // Without the collector the answers turn neutral once the scores age.
    let stale = Arc::new(Extender::new(
        ScoreCache::new(Duration::from_secs(30)),
        Arc::new(RwLock::new(Placements::new())),
        None,
    ));
    let neutral_addr = serve_extender(stale, &shutdown).await;
    let args = json!({"Pod": pod(), "NodeNames": ["a1", "a3", "b1"]});
    let started = std::time::Instant::now();
    let (status, body) = post(neutral_addr, "/prioritize", args.to_string().as_bytes()).await;
    assert_eq!(status, 200);
    let scores: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert!(
        scores.iter().all(|h| h["Score"] == 0),
        "equal scores without data: {body}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    let (_, metrics) = netaware_testkit::get(neutral_addr, "/metrics").await;
    assert!(
        metrics.contains(r#"netaware_scheduler_neutral_answers_total{reason="no_scores"} 1"#),
        "{metrics}"
    );

    shutdown.cancel();
    collector.wait().await;
}

#[tokio::test]
async fn bind_creates_the_binding_and_the_next_worker_sees_it() {
    use http::{Method, Request, Response};
    let (service, mut api) =
        tower_test::mock::pair::<Request<kube::client::Body>, Response<kube::client::Body>>();
    let client = kube::Client::new(service, "default");
    let placements = Arc::new(RwLock::new(Placements::new()));
    let extender = Arc::new(Extender::new(
        ScoreCache::new(Duration::from_secs(30)),
        Arc::clone(&placements),
        Some(client),
    ));
    let shutdown = CancellationToken::new();
    let addr = serve_extender(extender, &shutdown).await;

    // kube-scheduler filters first (the extender learns the pod's job)...
    let args = json!({"Pod": pod(), "NodeNames": ["a1", "a2"]});
    assert_eq!(
        post(addr, "/filter", args.to_string().as_bytes()).await.0,
        200
    );
    // ...then hands over the binding.
    let binding =
        json!({"PodName": "resnet-worker-1", "PodNamespace": "ml", "PodUID": "9f0c", "Node": "a2"});
    let call =
        tokio::spawn(async move { post(addr, "/bind", binding.to_string().as_bytes()).await });
    let (request, respond) = api.next_request().await.expect("a binding request");
    assert_eq!(request.method(), Method::POST);
    assert_eq!(
        request.uri().path(),
        "/api/v1/namespaces/ml/pods/resnet-worker-1/binding"
    );
    let body = http_body_util::BodyExt::collect(request.into_body())
        .await
        .unwrap()
        .to_bytes();
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["target"]["kind"], "Node");
    assert_eq!(sent["target"]["name"], "a2");
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    respond.send_response(
        Response::builder()
            .status(201)
            .body(kube::client::Body::from(
                serde_json::to_vec(&status).unwrap(),
            ))
            .unwrap(),
    );
    let (code, body) = call.await.unwrap();
    assert_eq!(
        (
            code,
            serde_json::from_str::<Value>(&body).unwrap()["Error"].clone()
        ),
        (200, json!(""))
    );

    // The next worker of the job sees this one at once.
    let job = netaware_scheduler::job::job_of(
        "ml",
        &[(
            "training.kubeflow.org/job-name".to_string(),
            "resnet".to_string(),
        )]
        .into(),
    )
    .unwrap()
    .0;
    assert_eq!(placements.read().await.placed(&job), ["a2"]);

    // An API server that refuses is reported in Error, and records nothing.
    let refused = json!({"PodName": "other", "PodNamespace": "ml", "PodUID": "zz", "Node": "a1"});
    let call =
        tokio::spawn(async move { post(addr, "/bind", refused.to_string().as_bytes()).await });
    let (_, respond) = api.next_request().await.expect("a binding request");
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "pods \"other\" is forbidden", "reason": "Forbidden", "code": 403});
    respond.send_response(
        Response::builder()
            .status(403)
            .body(kube::client::Body::from(
                serde_json::to_vec(&forbidden).unwrap(),
            ))
            .unwrap(),
    );
    let (code, body) = call.await.unwrap();
    assert_eq!(code, 200);
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["Error"]
            .as_str()
            .unwrap()
            .contains("forbidden"),
        "{body}"
    );
    assert_eq!(placements.read().await.len(), 1);
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_for_a_pod_of_a_job_is_one_event_on_the_pod() {
    use http::{Method, Request, Response};
    let (service, mut api) =
        tower_test::mock::pair::<Request<kube::client::Body>, Response<kube::client::Body>>();
    let shutdown = CancellationToken::new();
    let scored = scored_extender(Some(kube::Client::new(service, "default")), &shutdown).await;
    let addr = scored.addr;
    let args = json!({"Pod": pod(), "NodeNames": ["a1", "a2", "a3", "b1"]});

    // kube-scheduler's filter: one Event on the pod.
    assert_eq!(
        post(addr, "/filter", args.to_string().as_bytes()).await.0,
        200
    );
    let (request, respond) = tokio::time::timeout(Duration::from_secs(5), api.next_request())
        .await
        .expect("an Event within 5 s")
        .expect("a request");
    assert_eq!(request.method(), Method::POST);
    assert_eq!(
        request.uri().path(),
        "/apis/events.k8s.io/v1/namespaces/ml/events"
    );
    let body = http_body_util::BodyExt::collect(request.into_body())
        .await
        .unwrap()
        .to_bytes();
    let event: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["apiVersion"], "events.k8s.io/v1");
    assert_eq!(event["kind"], "Event");
    assert_eq!(event["reason"], "NetawarePlacement");
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["action"], "Scheduling");
    assert_eq!(
        event["reportingController"],
        "netaware.io/scheduler-extender"
    );
    assert_eq!(
        event["regarding"],
        json!({"apiVersion": "v1", "kind": "Pod", "namespace": "ml",
               "name": "resnet-worker-1", "uid": "9f0c"})
    );
    assert_eq!(event["metadata"]["namespace"], "ml");
    assert!(
        event["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("resnet-worker-1.")
    );
    assert!(event["eventTime"].as_str().unwrap().ends_with('Z'));
    // Why here and why not there, in one Event.
    let note = event["note"].as_str().unwrap();
    assert!(
        note.starts_with("job of 1 worker, 0 placed: zone zone-a"),
        "{note}"
    );
    assert!(
        note.contains("best: a1 ") || note.contains("best: a2 "),
        "{note}"
    );
    assert!(
        note.contains("not there: a3: degraded: loss 40.0%"),
        "{note}"
    );
    assert!(note.len() <= 1024);
    respond.send_response(
        Response::builder()
            .status(201)
            .body(kube::client::Body::from(body.to_vec()))
            .unwrap(),
    );

    // prioritize for the same attempt, and filter again: within the gap,
    // nothing more on this pod.
    post(addr, "/prioritize", args.to_string().as_bytes()).await;
    post(addr, "/filter", args.to_string().as_bytes()).await;
    // A pod of no job: no Event.
    let mut loner = pod();
    loner["metadata"]["labels"] = json!({});
    loner["metadata"]["uid"] = json!("77aa");
    let loner_args = json!({"Pod": loner, "NodeNames": ["a1", "a2"]});
    post(addr, "/filter", loner_args.to_string().as_bytes()).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(500), api.next_request())
            .await
            .is_err(),
        "no further Event"
    );
    shutdown.cancel();
    scored.collector.wait().await;
}

/// A pod labelled `netaware.io/network: rail-0` is placed by rail-0's
/// matrix, one without by the primary's: on the primary a3 is lossy, on
/// rail-0 a2 is. A network the extender does not follow is answered
/// neutrally, never failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_placed_by_the_network_its_label_names() {
    use netaware_core::network::Network;
    use netaware_scheduler::networks::NetworkCaches;
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let nodes = [("a1", 1), ("a2", 2), ("a3", 3)];
    let mut sessions = Vec::new();
    for (name, host) in nodes {
        let hello = netaware_proto::v1::Hello {
            networks: vec![netaware_proto::v1::NetworkAddress {
                network: "rail-0".into(),
                address: format!("172.16.1.{host}"),
            }],
            ..netaware_testkit::hello(name)
        };
        let session = netaware_testkit::Session::open(&url, netaware_testkit::hello_message(hello))
            .await
            .expect("hello accepted");
        sessions.push((name, session));
    }
    for (name, session) in &mut sessions {
        let mut peers = Vec::new();
        for (other, _) in nodes.iter().filter(|(n, _)| n != name) {
            let lossy = |bad: &str| *name == bad || *other == bad;
            peers.push(peer(other, if lossy("a3") { 6 } else { 10 }));
            peers.push(netaware_proto::v1::PeerWindow {
                network: "rail-0".into(),
                ..peer(other, if lossy("a2") { 6 } else { 10 })
            });
        }
        assert_eq!(session.send(window(1, peers)).await.code, 0);
    }
    let followed = |network: &str| {
        ScoreCache::new(Duration::from_secs(30)).on_network(Network::parse(network).unwrap())
    };
    let caches = vec![followed("primary"), followed("rail-0")];
    for cache in &caches {
        tokio::spawn(cache.clone().follow(url.clone(), shutdown.clone()));
    }
    for cache in &caches {
        first_matrix(cache).await;
    }
    let networks = NetworkCaches::new(&Network::primary(), caches).unwrap();
    let extender = Arc::new(
        Extender::new(
            networks.default_cache().clone(),
            Arc::new(RwLock::new(Placements::new())),
            None,
        )
        .with_networks(networks),
    );
    let addr = serve_extender(extender, &shutdown).await;

    let failed_on = |label: Option<&str>| {
        let mut pod = pod();
        if let Some(network) = label {
            pod["metadata"]["labels"]["netaware.io/network"] = json!(network);
        }
        let args = json!({"Pod": pod, "NodeNames": ["a1", "a2", "a3"]});
        async move {
            let (status, body) = post(addr, "/filter", args.to_string().as_bytes()).await;
            assert_eq!(status, 200, "{body}");
            let result: Value = serde_json::from_str(&body).unwrap();
            let mut failed: Vec<String> = result["FailedNodes"]
                .as_object()
                .map(|f| f.keys().cloned().collect())
                .unwrap_or_default();
            failed.sort();
            failed
        }
    };
    assert_eq!(
        failed_on(None).await,
        ["a3"],
        "the primary network: a3 is lossy"
    );
    assert_eq!(failed_on(Some("primary")).await, ["a3"]);
    assert_eq!(
        failed_on(Some("rail-0")).await,
        ["a2"],
        "rail-0: a2 is lossy"
    );
    // Both: each pair as good as its worst network, and every pair is
    // lossy on one of them (a2's on rail-0, a3's on the primary), so no
    // node may take a worker. By the best of the two, none would fail.
    assert_eq!(failed_on(Some("rail-0, primary")).await, ["a1", "a2", "a3"]);
    // Not followed, or not a network's name: neutral, nobody failed.
    assert!(failed_on(Some("rail-7")).await.is_empty());
    assert!(failed_on(Some("rail-0,rail-1")).await.is_empty());
    assert!(failed_on(Some("rail-0,,primary")).await.is_empty());

    // The collector's Rank places a job over both networks as the
    // extender does.
    let mut scores = netaware_proto::v1::scores_client::ScoresClient::connect(url.clone())
        .await
        .unwrap();
    let feasible = |network: &str| {
        let request = netaware_proto::v1::RankRequest {
            size: 1,
            network: network.into(),
            ..Default::default()
        };
        let mut scores = scores.clone();
        async move {
            let ranking = scores.rank(request).await.unwrap().into_inner();
            let mut feasible: Vec<String> = ranking
                .nodes
                .into_iter()
                .filter(|n| n.feasible)
                .map(|n| n.name)
                .collect();
            feasible.sort();
            feasible
        }
    };
    assert_eq!(feasible("rail-0").await, ["a1", "a3"]);
    assert!(feasible("rail-0,primary").await.is_empty());
    let unmeasured = scores
        .rank(netaware_proto::v1::RankRequest {
            size: 1,
            network: "rail-0,rail-9".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unmeasured.code(), tonic::Code::NotFound, "{unmeasured:?}");
    shutdown.cancel();
    drop(collector);
}
