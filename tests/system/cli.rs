//! The `netaware` binary against a real collector: the `--json` contracts
//! of docs/cli.md, field by field, and the tables for people. Windows are
//! fed by hand-driven sessions, so no root is needed.

use std::process::Command;

use netaware_testkit::{Session, good_peer, start_collector, window};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};

fn netaware(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "netaware {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A collector that works the topology out every 100 ms.
async fn collector_with_a_topology_round_every_100ms(
    shutdown: &CancellationToken,
) -> netaware_collector::Collector {
    let mut config = netaware_testkit::collector_config(Vec::new(), None);
    config.model.topology_interval = std::time::Duration::from_millis(100);
    netaware_collector::Collector::start(config, shutdown.clone())
        .await
        .unwrap()
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_contracts_and_tables() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;
    assert_eq!(a.send(window(1, vec![good_peer()])).await.code, 0);

    let url_arg = url.clone();
    let (matrix, zones, rank, table) = tokio::task::spawn_blocking(move || {
        let url = url_arg.as_str();
        (
            netaware(&["matrix", "--collector", url, "--json"]),
            netaware(&["zones", "--collector", url, "--json"]),
            netaware(&[
                "rank",
                "--collector",
                url,
                "--size",
                "2",
                "--peer",
                "a",
                "--json",
            ]),
            netaware(&["matrix", "--collector", url]),
        )
    })
    .await
    .unwrap();

    let matrix: Value = serde_json::from_str(&matrix).unwrap();
    assert_eq!(keys(&matrix), ["nodes", "pairs"]);
    assert_eq!(
        keys(&matrix["nodes"][0]),
        [
            "address",
            "agent_version",
            "clock_offset_ms",
            "name",
            "region",
            "stale",
            "zone"
        ]
    );
    let pairs = matrix["pairs"].as_array().unwrap();
    // Measured pairs only: b -> a was never measured, so it is not listed.
    assert_eq!(pairs.len(), 1);
    assert_eq!(
        keys(&pairs[0]),
        [
            "age_s",
            "dst",
            "filtered",
            "jitter_ms",
            "loss_ratio",
            "network",
            "one_way_loss_ratio",
            "probe",
            "quality",
            "rtt_median_ms",
            "rtt_p99_ms",
            "samples",
            "src",
            "throughput_age_s",
            "throughput_bps",
            "throughput_retransmits",
            "throughput_tcp_rtt_ms"
        ]
    );
    let ab = pairs.iter().find(|p| p["src"] == "a").unwrap();
    assert_eq!(ab["rtt_median_ms"], 0.2);
    assert_eq!(ab["network"], "primary");
    assert_eq!(ab["loss_ratio"], 0.0);
    assert_eq!(ab["samples"], 10);
    assert_eq!(ab["probe"], "icmp", "what the fixture's window says");
    assert_eq!(ab["filtered"], serde_json::json!([]));
    assert!(ab["throughput_bps"].is_null(), "null until measured");
    assert!(pairs.iter().all(|p| p["src"] != "b"), "{pairs:?}");

    let zones: Value = serde_json::from_str(&zones).unwrap();
    assert_eq!(
        keys(&zones),
        ["cannot_measure", "unreached_nodes", "zone_pairs", "zones"]
    );
    // Every pair answered: netaware measures.
    assert_eq!(zones["cannot_measure"], false);
    assert_eq!(zones["unreached_nodes"], 0);
    assert_eq!(zones["zones"][0]["name"], "zone-a");
    assert_eq!(zones["zones"][0]["cannot_measure"], false);
    assert_eq!(zones["zone_pairs"][0]["measured_pairs"], 1);

    let rank: Value = serde_json::from_str(&rank).unwrap();
    assert_eq!(
        keys(&rank),
        ["next", "nodes", "placement", "zone", "zone_reason"]
    );
    assert_eq!(rank["zone"], "zone-a");
    assert_eq!(
        keys(&rank["placement"]),
        [
            "loss_threshold",
            "min_goodput_fraction",
            "out_of_zone_factor",
            "strict_zone"
        ]
    );
    assert_eq!(rank["placement"]["loss_threshold"], 0.05);
    let first = &rank["nodes"][0];
    assert_eq!(first["name"], "b");
    // The only candidate passes the extender's filter, at its best score,
    // and is where the extender puts the next worker.
    assert_eq!(rank["next"], "b");
    assert_eq!(first["extender_score"], 10);
    assert_eq!(first["passes_filter"], true);
    assert_eq!(
        keys(first),
        [
            "extender_score",
            "failure",
            "feasible",
            "name",
            "passes_filter",
            "reason",
            "score",
            "terms",
            "zone"
        ]
    );
    assert!(first["failure"].is_null() && first["reason"].is_null());
    assert_eq!(
        keys(&first["terms"]),
        [
            "basis",
            "delay",
            "fallback_pairs",
            "in_chosen_zone",
            "loss",
            "pairs",
            "quality",
            "throughput"
        ]
    );
    assert_eq!(first["terms"]["basis"], "placed");
    // b -> a was never measured: one of the two pairs is a fallback.
    assert_eq!(first["terms"]["fallback_pairs"], 1);

    assert!(
        table.contains("MEDIAN_MS") && table.contains("0.200"),
        "{table}"
    );

    // The same pairs as a heat map, in each format; a format needs a file.
    let dir = tempfile::tempdir().unwrap();
    let (png, svg) = (dir.path().join("m.png"), dir.path().join("m.svg"));
    let (url_arg, png_arg, svg_arg) = (url.clone(), png.clone(), svg.clone());
    let refused = tokio::task::spawn_blocking(move || {
        let url = url_arg.as_str();
        let png = png_arg.to_str().unwrap();
        let svg = svg_arg.to_str().unwrap();
        netaware(&[
            "matrix",
            "--collector",
            url,
            "--format",
            "png",
            "--metric",
            "loss",
            "--file",
            png,
        ]);
        netaware(&[
            "matrix",
            "--collector",
            url,
            "--zone",
            "zone-a",
            "--format",
            "svg",
            "-f",
            svg,
        ]);
        Command::new(env!("CARGO_BIN_EXE_netaware"))
            .args(["matrix", "--collector", url, "--format", "png"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        std::fs::read(&png)
            .unwrap()
            .starts_with(b"\x89PNG\r\n\x1a\n")
    );
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("zone zone-a"),
        "{svg}"
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--file"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    // gRPC health answers for the services.
    let channel = tonic::transport::Channel::from_shared(url)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    let status = health
        .check(HealthCheckRequest {
            service: "netaware.v1.Scores".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status();
    assert_eq!(status, ServingStatus::Serving);

    shutdown.cancel();
    collector.wait().await;
}

#[test]
fn an_unreachable_collector_is_a_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args(["matrix", "--collector", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot reach the collector at http://127.0.0.1:1"),
        "{stderr}"
    );
}

/// Four nodes measured over the primary network and rail-0, a4 lossy on
/// rail-0 alone: `topology --network rail-0` marks it degraded, the
/// primary's topology does not, and a network nobody measured is an error
/// that names those there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_network_has_a_topology_of_its_own() {
    let shutdown = CancellationToken::new();
    let collector = collector_with_a_topology_round_every_100ms(&shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let nodes = ["a1", "a2", "a3", "a4"];
    let mut sessions = Vec::new();
    for (host, name) in nodes.iter().enumerate() {
        let hello = netaware_proto::v1::Hello {
            networks: vec![netaware_proto::v1::NetworkAddress {
                network: "rail-0".into(),
                address: format!("172.16.1.{}", host + 1),
            }],
            ..netaware_testkit::hello(name)
        };
        let session = Session::open(&url, netaware_testkit::hello_message(hello))
            .await
            .expect("hello accepted");
        sessions.push((*name, session));
    }
    for (name, session) in &mut sessions {
        let mut peers = Vec::new();
        for other in nodes.iter().filter(|n| *n != name) {
            let peer = netaware_proto::v1::PeerWindow {
                peer: (*other).into(),
                ..good_peer()
            };
            let lossy = *name == "a4" || *other == "a4";
            peers.push(netaware_proto::v1::PeerWindow {
                network: "rail-0".into(),
                received: if lossy { 5 } else { 10 },
                ..peer.clone()
            });
            peers.push(peer);
        }
        assert_eq!(session.send(window(1, peers)).await.code, 0);
    }
    let (rail, primary, unknown) = tokio::task::spawn_blocking(move || {
        let url = url.as_str();
        let topology = |network: &str| {
            let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
                .args([
                    "topology",
                    "--collector",
                    url,
                    "--network",
                    network,
                    "-o",
                    "json",
                ])
                .output()
                .unwrap();
            (
                serde_json::from_slice::<Value>(&output.stdout).ok(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        };
        let degraded = |topology: &Value| -> Vec<String> {
            topology["zones"][0]["blocks"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|b| b["degraded"].as_array().cloned().unwrap_or_default())
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let rail = loop {
            if let (Some(rail), _) = topology("rail-0")
                && !degraded(&rail).is_empty()
            {
                break degraded(&rail);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no round marked a node on rail-0: {:?}",
                topology("rail-0")
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let primary = topology("primary").0.expect("the primary's topology");
        let blocks = primary["zones"][0]["blocks"].clone();
        (rail, (degraded(&primary), blocks), topology("rail-9"))
    })
    .await
    .unwrap();
    assert_eq!(rail, ["a4"]);
    assert!(primary.0.is_empty(), "{:?}", primary.1);
    let nodes_in_blocks: usize = primary
        .1
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["nodes"].as_array().unwrap().len())
        .sum();
    assert_eq!(nodes_in_blocks, 4, "{:?}", primary.1);
    assert!(unknown.0.is_none());
    assert!(
        unknown.1.contains("rail-9") && unknown.1.contains("primary, rail-0"),
        "{}",
        unknown.1
    );
    shutdown.cancel();
    collector.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_says_when_it_has_none_yet_then_shows_the_blocks() {
    let shutdown = CancellationToken::new();
    // A collector whose first round of the topology is 30 s away: asked
    // now, the command says so.
    let waiting = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", waiting.grpc_addr);
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_netaware"))
            .args(["topology", "--collector", &url])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("has not worked out the topology yet"),
        "{stderr}"
    );

    // One with a round every 100 ms, two nodes of zone-a measured.
    let collector = collector_with_a_topology_round_every_100ms(&shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;
    assert_eq!(a.send(window(1, vec![good_peer()])).await.code, 0);
    // Asked until a round has seen both nodes (the snapshot that holds
    // the window, then a round after it), for at most 10 s.
    let (json, table, labels) = tokio::task::spawn_blocking(move || {
        let url = url.as_str();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let json = loop {
            let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
                .args(["topology", "--collector", url, "--json"])
                .output()
                .unwrap();
            let json = String::from_utf8(output.stdout).unwrap();
            if json.contains("\"b\"") {
                break json;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no round saw both nodes: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        (
            json,
            netaware(&["topology", "--collector", url]),
            netaware(&["topology", "--collector", url, "--format", "labels"]),
        )
    })
    .await
    .unwrap();
    let topology: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        keys(&topology),
        ["observed_unix_ms", "region_costs", "zone_costs", "zones"]
    );
    let zone = &topology["zones"][0];
    assert_eq!(keys(zone), ["blocks", "name", "region"]);
    assert_eq!(
        zone["blocks"],
        serde_json::json!([{"number": 1, "label": "zone-a-1", "nodes": ["a", "b"], "degraded": [],
            "behind_bad_uplink": []}])
    );
    assert!(
        table.contains("zone-a-1") && table.contains("BLOCK"),
        "{table}"
    );
    assert!(labels.contains("netaware.io/block: zone-a-1"), "{labels}");
    shutdown.cancel();
    waiting.wait().await;
    collector.wait().await;
}

/// `netaware doctor --local` as a process without CAP_NET_RAW, in a
/// network namespace of its own (where `ping_group_range` starts closed):
/// it warns that the agent can probe by UDP and TCP only and says what to
/// grant; once the namespace admits every group to datagram ICMP sockets,
/// the check is ok.
#[test]
fn doctor_local_finds_a_node_where_the_agent_cannot_probe() {
    if !netaware_testkit::have_root("doctor --local") {
        return;
    }
    let namespace = format!("nadoc-{}", std::process::id());
    let ip = |args: &[&str]| {
        let status = Command::new("ip").args(args).status().unwrap();
        assert!(status.success(), "ip {args:?}");
    };
    ip(&["netns", "add", &namespace]);
    let doctor = || {
        let output = Command::new("ip")
            .args(["netns", "exec", &namespace, "runuser", "-u", "nobody", "--"])
            .arg(env!("CARGO_BIN_EXE_netaware"))
            .args(["doctor", "--local", "-o", "json"])
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        (output.status.success(), report)
    };
    let closed = doctor();
    ip(&[
        "netns",
        "exec",
        &namespace,
        "sh",
        "-c",
        "echo 0 2147483647 > /proc/sys/net/ipv4/ping_group_range",
    ]);
    let open = doctor();
    ip(&["netns", "del", &namespace]);

    let (passed, report) = closed;
    assert!(passed, "a warning blocks nothing: {report}");
    assert_eq!(report["findings"][0]["check"], "echo_socket", "{report}");
    assert_eq!(report["findings"][0]["status"], "warn", "{report}");
    assert!(
        report["findings"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("CAP_NET_RAW")
    );
    let (passed, report) = open;
    assert!(passed, "{report}");
    assert_eq!(report["findings"][0]["status"], "ok", "{report}");
}

/// `netaware doctor` against a real collector: an agent on another version
/// than the collector's warns, one whose clock runs 8 s ahead (its windows
/// would be refused) fails the run, each named with what was seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_agents_on_another_version_and_clocks_off() {
    use netaware_testkit::{hello, hello_message, now_ms};
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let agent = |node: &str, version: &str, ahead_ms: u64| netaware_proto::v1::Hello {
        agent_version: version.into(),
        sent_unix_ms: now_ms() + ahead_ms,
        ..hello(node)
    };
    let collector_version = env!("CARGO_PKG_VERSION");
    let _current = Session::open(&url, hello_message(agent("a", collector_version, 0)))
        .await
        .unwrap();
    let _old = Session::open(&url, hello_message(agent("b", "0.0.1", 8_000)))
        .await
        .unwrap();

    let doctor = |url: String| async move {
        let output = tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_netaware"))
                .args(["doctor", "--collector", &url, "-o", "json"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(
            !output.status.success(),
            "a clock 8 s ahead must fail doctor"
        );
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let finding_in = |report: &Value, check: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == check)
            .unwrap_or_else(|| panic!("no {check} in {report}"))
            .clone()
    };
    let report = doctor(url.clone()).await;
    let finding = |check: &str| finding_in(&report, check);
    // Nothing follows yet.
    assert_eq!(finding("extender_follows")["status"], "warn", "{report}");
    let versions = finding("agent_versions");
    assert_eq!(versions["status"], "warn", "{versions}");
    assert!(
        versions["detail"]
            .as_str()
            .unwrap()
            .contains("1 of 2 agents"),
        "{versions}"
    );
    assert!(
        versions["detail"].as_str().unwrap().contains("b (0.0.1)"),
        "{versions}"
    );
    let clocks = finding("clock_skew");
    assert_eq!(clocks["status"], "fail", "{clocks}");
    let detail = clocks["detail"].as_str().unwrap();
    assert!(
        detail.contains("b (+") && !detail.contains("a (+"),
        "{clocks}"
    );

    // A follower's watch stream, as an extender opens it: listed once it
    // has had an update.
    let mut scores = netaware_proto::v1::scores_client::ScoresClient::connect(url.clone())
        .await
        .unwrap();
    let mut stream = scores
        .watch_matrix(netaware_proto::v1::WatchRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    let report = doctor(url.clone()).await;
    let follows = finding_in(&report, "extender_follows");
    assert_eq!(follows["status"], "ok", "{follows}");
    assert!(
        follows["detail"]
            .as_str()
            .unwrap()
            .starts_with("1 followers"),
        "{follows}"
    );
    drop(stream);
    shutdown.cancel();
}
