//! The web view's page and JSON API on a real collector over real HTTP:
//! each answer is the document `netaware ... -o json` prints for the same
//! question, errors are JSON with the status their cause calls for, and
//! the page's files are served with a policy that runs no script but
//! theirs. The page itself is driven in a real browser by the lab test
//! (tests/lab/web_view.rs).

use netaware_testkit::{Session, get, good_peer, start_collector, window};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

async fn json(addr: std::net::SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = get(addr, path).await;
    let value = serde_json::from_str(&body)
        .unwrap_or_else(|err| panic!("{path}: not JSON ({err}): {body}"));
    (status, value)
}

/// The response's head (status line and headers), lower-cased.
async fn head(addr: std::net::SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response).to_lowercase();
    text.split("\r\n\r\n").next().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_as_the_cli_does_and_the_page_is_served() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let http = collector.http_addr;
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;
    assert_eq!(a.send(window(1, vec![good_peer()])).await.code, 0);

    // The page and its files.
    let page = head(http, "/ui/").await;
    assert!(page.starts_with("http/1.1 200"), "{page}");
    assert!(page.contains("content-type: text/html"), "{page}");
    assert!(
        page.contains("content-security-policy: default-src 'self'"),
        "{page}"
    );
    let (status, html) = get(http, "/ui/").await;
    assert_eq!(status, 200);
    for file in ["app.js", "errors.js", "app.css"] {
        assert!(html.contains(file), "the page loads {file}");
        let (status, body) = get(http, &format!("/ui/{file}")).await;
        assert_eq!(status, 200, "/ui/{file}");
        assert!(!body.is_empty());
        let served = head(http, &format!("/ui/{file}")).await;
        assert!(
            served.contains("content-security-policy: default-src 'self'"),
            "{served}"
        );
        assert!(
            served.contains("x-content-type-options: nosniff"),
            "{served}"
        );
    }
    assert!(head(http, "/").await.contains("location: /ui/"));

    // The API: the networks, then each answer as the CLI's JSON.
    let (status, networks) = json(http, "/api/v1/networks").await;
    assert_eq!(status, 200);
    assert_eq!(networks["networks"], serde_json::json!(["primary"]));
    assert_eq!(networks["nodes"], 2);

    let cli = |args: &[&str]| -> Value {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_netaware"))
            .args(args)
            .args(["--collector", &url, "-o", "json"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let (status, zones) = json(http, "/api/v1/zones").await;
    assert_eq!(status, 200);
    let by_cli = tokio::task::block_in_place(|| cli(&["zones"]));
    assert_eq!(zones, by_cli);

    let (status, explained) = json(http, "/api/v1/explain?size=2&placed=a").await;
    assert_eq!(status, 200);
    let by_cli = tokio::task::block_in_place(|| cli(&["explain", "--size", "2", "--peer", "a"]));
    assert_eq!(explained, by_cli);
    assert!(
        explained["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["why"].as_str().is_some_and(|why| !why.is_empty()))
    );

    let (status, worst) = json(http, "/api/v1/worst?limit=5").await;
    assert_eq!(status, 200);
    let pairs = worst["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1);
    assert_eq!(
        (&pairs[0]["src"], &pairs[0]["dst"]),
        (&"a".into(), &"b".into())
    );

    // The heat map of the zone both nodes are in: a -> b measured, b -> a
    // estimated (by RTT), each node and itself.
    let zone = zones["zones"][0]["name"].as_str().unwrap().to_owned();
    let (status, map) = json(http, &format!("/api/v1/heatmap?zone={zone}&metric=rtt")).await;
    assert_eq!(status, 200, "{map}");
    assert_eq!(map["map"]["nodes"], serde_json::json!(["a", "b"]));
    assert_eq!(map["map"]["cells"][0][1][1], "measured");
    assert_eq!(map["map"]["cells"][0][0][1], "itself");
    assert_eq!(map["total"], 2);
    let (status, pair) = json(http, "/api/v1/pair?src=a&dst=b").await;
    assert_eq!(status, 200);
    assert_eq!(pair["pair"]["rtt_median_ms"], 0.2);
    assert_eq!(pair["rtt"]["basis"], "measured");
    let (_, unprobed) = json(http, "/api/v1/pair?src=b&dst=a").await;
    assert_eq!(unprobed["pair"], Value::Null);

    for path in ["/api/v1/faults", "/api/v1/topology"] {
        let (status, _) = json(http, path).await;
        assert_eq!(status, 200, "{path}");
    }

    // Errors say why, as JSON, with the status of their cause.
    for (path, status, says) in [
        (
            "/api/v1/zones?network=rail-9",
            404,
            "nothing measured on network rail-9",
        ),
        ("/api/v1/zones?network=Rail%209", 400, "network"),
        (
            &*format!("/api/v1/heatmap?zone={zone}&metric=colour"),
            400,
            "no metric colour",
        ),
        ("/api/v1/pair?src=a&dst=nobody", 404, "no node nobody"),
        ("/api/v1/explain?size=0", 400, "at least one worker"),
    ] {
        let (got, body) = json(http, path).await;
        assert_eq!(got, status, "{path}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{path}: {error}");
    }
    shutdown.cancel();
}
