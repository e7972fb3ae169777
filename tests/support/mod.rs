//! Helpers shared by the end-to-end tests: start a real collector and real
//! agents on loopback, and the root check that CI turns into a hard failure.

#![allow(dead_code)]

pub mod prometheus;

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use netaware_agent::{Agent, AgentConfig};
use netaware_collector::state::ThroughputConfig;
use netaware_collector::{Collector, CollectorConfig, ModelConfig};
use netaware_core::NodeInfo;
use netaware_proto::v1 as pb;
use netaware_proto::v1::agent_session_client::AgentSessionClient;
use netaware_proto::v1::{agent_message, collector_message};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// Whether `program` runs here (`program --version`). Without it a test
/// skips, unless NETAWARE_REQUIRE_ROOT=1 (CI, where scripts/test installs
/// it) makes that a failure.
pub fn have_tool(program: &str) -> bool {
    let runs = std::process::Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    if !runs {
        assert!(
            std::env::var("NETAWARE_REQUIRE_ROOT").as_deref() != Ok("1"),
            "{program} is needed in CI (scripts/test installs it)"
        );
        eprintln!("skipping: no {program}");
    }
    runs
}

/// Whether this test may use root (raw ICMP sockets, the lab). Without
/// root it skips, unless NETAWARE_REQUIRE_ROOT=1 (as in CI) makes it fail.
pub fn have_root(test: &str) -> bool {
    netaware_lab::root_or_skip(test)
}

/// A collector on an ephemeral loopback port. Its throughput tests are
/// short (0.2 s warm-up, 0.5 s measured) and may take all of a node's
/// time, so that a few agents have every pair measured within seconds.
pub async fn start_collector(inventory: Vec<NodeInfo>, shutdown: &CancellationToken) -> Collector {
    start_collector_with(inventory, None, shutdown).await
}

/// [`start_collector`], saving its state as `state` says.
pub async fn start_collector_with(
    inventory: Vec<NodeInfo>,
    state: Option<netaware_collector::StateConfig>,
    shutdown: &CancellationToken,
) -> Collector {
    Collector::start(collector_config(inventory, state), shutdown.clone())
        .await
        .expect("collector starts")
}

/// [`start_collector`] with its gRPC port on `listen`.
pub async fn start_collector_on(
    listen: std::net::SocketAddr,
    shutdown: &CancellationToken,
) -> Collector {
    let config = CollectorConfig {
        listen,
        ..collector_config(Vec::new(), None)
    };
    Collector::start(config, shutdown.clone())
        .await
        .expect("collector starts")
}

/// The configuration of [`start_collector`].
pub fn collector_config(
    inventory: Vec<NodeInfo>,
    state: Option<netaware_collector::StateConfig>,
) -> CollectorConfig {
    CollectorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        inventory,
        model: ModelConfig {
            throughput: Some(ThroughputConfig::new(1.0, 200, 500, 1, false, None).unwrap()),
            ..ModelConfig::default()
        },
        state,
        tls: None,
        http_tls: None,
        node_places: None,
    }
}

/// Runs `promtool check metrics` (Prometheus's own linter) on a /metrics
/// text and panics with its complaints. Without promtool it skips, unless
/// NETAWARE_REQUIRE_ROOT=1 (CI, where scripts/test installs it).
pub fn check_with_promtool(what: &str, text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(err) => {
            assert!(
                std::env::var("NETAWARE_REQUIRE_ROOT").as_deref() != Ok("1"),
                "promtool is needed in CI: {err}"
            );
            eprintln!("skipping promtool check of {what}: {err}");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics on {what}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The port of the test agents' /metrics, on each agent's own address.
pub const AGENT_METRICS_PORT: u16 = 9471;

/// An agent with short windows (1 s) and fast probes (100 ms), serving
/// /metrics on its address and [`AGENT_METRICS_PORT`].
pub fn start_agent(
    name: &str,
    address: &str,
    zone: &str,
    collector: &Collector,
    shutdown: &CancellationToken,
) -> Agent {
    let address: IpAddr = address.parse().unwrap();
    let config = AgentConfig {
        interval: Duration::from_millis(100),
        window: Duration::from_secs(1),
        probe_timeout: Duration::from_millis(500),
        metrics_port: Some(AGENT_METRICS_PORT),
        ..AgentConfig::new(
            name,
            vec![address],
            zone,
            &format!("http://{}", collector.grpc_addr),
        )
    };
    Agent::start(config, shutdown.clone()).expect("agent starts")
}

/// Polls `check` every 200 ms until it returns `Some`, or panics after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls the collector's matrix until `done` holds for it, and returns it.
pub async fn wait_for_matrix(
    url: &str,
    what: &str,
    limit: Duration,
    done: impl Fn(&pb::Matrix) -> bool,
) -> pb::Matrix {
    wait_for(what, limit, || async {
        let matrix = netaware::client::ScoresConnection::connect(url)
            .await
            .ok()?
            .matrix()
            .await
            .ok()?;
        done(&matrix).then_some(matrix)
    })
    .await
}

/// POSTs `body` over a fresh HTTP/1.1 connection; returns (status, body),
/// status 0 when nothing answered.
pub async fn post(addr: std::net::SocketAddr, path: &str, body: &[u8]) -> (u16, String) {
    request(addr, "POST", path, body).await
}

/// GETs `path` over a fresh HTTP/1.1 connection; returns (status, body),
/// status 0 when nothing answered.
pub async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    request(addr, "GET", path, b"").await
}

async fn request(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> (u16, String) {
    // Nobody listening (a server starting or gone): no status.
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // A server may refuse a large body before reading all of it.
    let _ = stream.write_all(body).await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Serves the extender's routes on an ephemeral loopback port until
/// `shutdown`; returns the address.
pub async fn serve_extender(
    extender: std::sync::Arc<netaware_scheduler::server::Extender>,
    shutdown: &CancellationToken,
) -> std::net::SocketAddr {
    serve_extender_on("127.0.0.1:0".parse().unwrap(), extender, shutdown).await
}

/// Serves the extender's routes on `addr` until `shutdown`; returns the
/// address bound.
pub async fn serve_extender_on(
    addr: std::net::SocketAddr,
    extender: std::sync::Arc<netaware_scheduler::server::Extender>,
    shutdown: &CancellationToken,
) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = netaware_scheduler::server::router(extender);
    tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned())
            .into_future(),
    );
    addr
}

pub use netaware_runtime::clock::now_ms;

/// A valid hello for `node` in zone-a (1 s windows).
pub fn hello(node: &str) -> pb::Hello {
    pb::Hello {
        node: node.into(),
        addresses: vec!["127.0.0.51".into()],
        zone: "zone-a".into(),
        region: String::new(),
        agent_version: "test".into(),
        window_ms: 1_000,
        probe_interval_ms: 100,
        instance: 42,
        // No throughput server: hand-driven sessions get no test orders.
        throughput_port: 0,
    }
}

/// A valid window entry towards node "b": 10 probes, all answered.
pub fn good_peer() -> pb::PeerWindow {
    pb::PeerWindow {
        peer: "b".into(),
        sent: 10,
        received: 10,
        rtt_min_ms: 0.1,
        rtt_median_ms: 0.2,
        rtt_p90_ms: 0.3,
        rtt_p99_ms: 0.4,
        rtt_max_ms: 0.5,
        jitter_ms: 0.05,
        ..pb::PeerWindow::default()
    }
}

/// A window ending now.
pub fn window(seq: u64, peers: Vec<pb::PeerWindow>) -> pb::Window {
    let end = now_ms();
    pb::Window {
        seq,
        start_unix_ms: end - 1_000,
        end_unix_ms: end,
        peers,
        stats: None,
        throughput: Vec::new(),
    }
}

/// A hand-driven agent session.
pub struct Session {
    up: mpsc::Sender<pb::AgentMessage>,
    down: tonic::Streaming<pb::CollectorMessage>,
}

impl Session {
    pub async fn open(url: &str, first: pb::AgentMessage) -> Result<Self, tonic::Status> {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned()).unwrap();
        Self::open_with(endpoint, first).await
    }

    /// A session over `endpoint` (TLS or not) opened with `first`.
    pub async fn open_with(
        endpoint: tonic::transport::Endpoint,
        first: pb::AgentMessage,
    ) -> Result<Self, tonic::Status> {
        let (up, rx) = mpsc::channel(16);
        up.send(first).await.unwrap();
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("{e:?}")))?;
        let mut client = AgentSessionClient::new(channel);
        let down = client.session(ReceiverStream::new(rx)).await?.into_inner();
        Ok(Self { up, down })
    }

    pub async fn hello(url: &str, node: &str) -> Self {
        Self::hello_in(url, node, "zone-a").await
    }

    /// A session for `node` in `zone`.
    pub async fn hello_in(url: &str, node: &str, zone: &str) -> Self {
        let first = pb::AgentMessage {
            body: Some(agent_message::Body::Hello(pb::Hello {
                zone: zone.into(),
                ..hello(node)
            })),
        };
        Self::open(url, first).await.expect("hello accepted")
    }

    /// Sends a window and returns its ack, skipping peer sets.
    pub async fn send(&mut self, window: pb::Window) -> pb::Ack {
        let seq = window.seq;
        self.up
            .send(pb::AgentMessage {
                body: Some(agent_message::Body::Window(window)),
            })
            .await
            .unwrap();
        loop {
            let message = self.down.message().await.unwrap().expect("stream open");
            if let Some(collector_message::Body::Ack(ack)) = message.body {
                assert_eq!(ack.seq, seq);
                return ack;
            }
        }
    }
}
