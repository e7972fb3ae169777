//! Mutual TLS between agents and the collector, with real certificates
//! (made here by rcgen, signed by a CA of the test's own) over real gRPC:
//! an agent may report only for the node its certificate names; a client
//! with another node's certificate, without a certificate, or in plain
//! text is refused; the score readers (CLI, scheduler) connect with their
//! own certificates. The HTTP endpoints (/metrics, /healthz, the
//! extender) serve HTTPS to curl and to a real Prometheus, and refuse plain
//! HTTP and, when told to, clients without a certificate from the CA.

use netaware::client::ScoresConnection;
use netaware_collector::{Collector, CollectorConfig, ModelConfig};
use netaware_proto::v1 as pb;
use netaware_proto::v1::agent_message;
use netaware_runtime::tls::{self, Tls};
use netaware_testkit::prometheus::{self, prometheus_get};
use netaware_testkit::{Session, good_peer, window};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair,
};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A CA and what it signs, all PEM.
struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Distinct subjects, or OpenSSL (curl) takes a leaf for self-signed.
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "netaware test CA");
        let key = KeyPair::generate().unwrap();
        let ca_pem = params.self_signed(&key).unwrap().pem();
        Self {
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names` and its key, for a server, a client or both.
    fn issue(&self, names: &[&str], purposes: &[ExtendedKeyUsagePurpose]) -> (String, String) {
        let (cert, key) = self.issue_der(names, purposes);
        (cert.pem(), key.serialize_pem())
    }

    fn issue_der(
        &self,
        names: &[&str],
        purposes: &[ExtendedKeyUsagePurpose],
    ) -> (rcgen::Certificate, KeyPair) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.extended_key_usages = purposes.to_vec();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert, key)
    }

    /// Client material: this CA, and a certificate for `node` at the
    /// address of [`netaware_testkit::hello`].
    fn client(&self, node: &str) -> Tls {
        let address = netaware_testkit::hello(node).addresses[0].clone();
        let (cert, key) = self.issue(&[node, &address], &[ExtendedKeyUsagePurpose::ClientAuth]);
        Tls::from_pem(
            Some(self.ca_pem.as_bytes()),
            Some((cert.as_bytes(), key.as_bytes())),
        )
    }
}

/// A collector serving mutual TLS on loopback.
async fn collector(pki: &Pki, shutdown: &CancellationToken) -> (Collector, String) {
    collector_with_https(pki, None, shutdown).await
}

/// A collector on loopback serving `tls` on gRPC, and HTTPS on its HTTP
/// port when `https` says whether client certificates are required there.
async fn collector_serving(
    tls: Tls,
    https: Option<bool>,
    shutdown: &CancellationToken,
) -> Collector {
    let config = CollectorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        inventory: Vec::new(),
        model: ModelConfig::default(),
        state: None,
        http_tls: https.map(|client_certificates| tls.http_server(client_certificates).unwrap()),
        tls: Some(tls),
        node_places: None,
        watch: netaware_collector::WatchLimits::default(),
        connections: netaware_collector::ConnectionLimits::default(),
        agent_tokens: None,
        pair_series: netaware_collector::pair_series::DEFAULT_PAIR_SERIES,
    };
    Collector::start(config, shutdown.clone()).await.unwrap()
}

/// A collector serving mutual TLS on loopback, and HTTPS on its HTTP port
/// when `https` says whether client certificates are required there.
async fn collector_with_https(
    pki: &Pki,
    https: Option<bool>,
    shutdown: &CancellationToken,
) -> (Collector, String) {
    let (cert, key) = pki.issue(
        &["localhost", "127.0.0.1"],
        &[ExtendedKeyUsagePurpose::ServerAuth],
    );
    let tls = Tls::from_pem(
        Some(pki.ca_pem.as_bytes()),
        Some((cert.as_bytes(), key.as_bytes())),
    );
    let collector = collector_serving(tls, https, shutdown).await;
    let url = format!("https://127.0.0.1:{}", collector.grpc_addr.port());
    (collector, url)
}

/// The first message of `node`'s session.
fn first_message(node: &str) -> pb::AgentMessage {
    netaware_testkit::hello_message(netaware_testkit::hello(node))
}

async fn open(url: &str, tls: Option<&Tls>, node: &str) -> Result<Session, tonic::Status> {
    Session::open_with(tls::endpoint(url, tls).unwrap(), first_message(node)).await
}

#[tokio::test]
async fn an_agent_reports_only_for_the_node_its_certificate_names() {
    let pki = Pki::new();
    let shutdown = CancellationToken::new();
    let (collector, url) = collector(&pki, &shutdown).await;
    let a = pki.client("a");
    let b = pki.client("b");
    let mut session_a = open(&url, Some(&a), "a").await.expect("a as a");
    let _session_b = open(&url, Some(&b), "b").await.expect("b as b");
    let ack = session_a.send(window(1, vec![good_peer()])).await;
    assert_eq!((ack.code, ack.message.as_str()), (0, ""), "{ack:?}");

    // a's certificate, saying hello as b: refused, and b's state untouched.
    let impostor = open(&url, Some(&a), "b").await.expect_err("refused");
    assert_eq!(
        impostor.code(),
        tonic::Code::PermissionDenied,
        "{impostor:?}"
    );
    assert!(impostor.message().contains("\"b\""), "{impostor:?}");
    // a's certificate, a's name, an address the certificate does not hold:
    // refused, so that no agent is told to probe it.
    let elsewhere = pb::AgentMessage {
        body: Some(agent_message::Body::Hello(pb::Hello {
            addresses: vec!["127.0.0.51".into(), "10.9.9.9".into()],
            ..netaware_testkit::hello("a")
        })),
    };
    let pointed = Session::open_with(tls::endpoint(&url, Some(&a)).unwrap(), elsewhere)
        .await
        .expect_err("refused");
    assert_eq!(pointed.code(), tonic::Code::PermissionDenied, "{pointed:?}");
    assert!(pointed.message().contains("10.9.9.9"), "{pointed:?}");
    // A certificate from another CA: refused in the handshake.
    let stranger = Pki::new().client("a");
    assert!(open(&url, Some(&stranger), "a").await.is_err());
    assert_eq!(collector.ingest().state().node_count(), 2);
    shutdown.cancel();
}

#[tokio::test]
async fn plain_text_and_certificate_less_clients_are_refused() {
    let pki = Pki::new();
    let shutdown = CancellationToken::new();
    let (_collector, url) = collector(&pki, &shutdown).await;
    // Plain text against the TLS port.
    let plain = url.replace("https://", "http://");
    assert!(open(&plain, None, "a").await.is_err());
    assert!(
        ScoresConnection::connect(&plain).await.is_err() || {
            // tonic connects lazily on some paths: the first call must fail.
            let mut scores = ScoresConnection::connect(&plain).await.unwrap();
            scores.matrix().await.is_err()
        }
    );
    // TLS, but no client certificate.
    let anonymous = Tls::from_pem(Some(pki.ca_pem.as_bytes()), None);
    assert!(open(&url, Some(&anonymous), "a").await.is_err());
    // With TLS set up, a plain-text URL is a configuration error.
    assert!(tls::endpoint(&plain, Some(&anonymous)).is_err());
    shutdown.cancel();
}

#[tokio::test]
async fn score_readers_connect_with_their_own_certificates() {
    let pki = Pki::new();
    let shutdown = CancellationToken::new();
    let (_collector, url) = collector(&pki, &shutdown).await;
    let mut session = open(&url, Some(&pki.client("a")), "a").await.unwrap();
    let _b = open(&url, Some(&pki.client("b")), "b").await.unwrap();
    session.send(window(1, vec![good_peer()])).await;
    let scheduler = pki.client("netaware-scheduler");
    let mut scores = ScoresConnection::connect_with(&url, Some(&scheduler))
        .await
        .unwrap();
    let matrix = scores.matrix().await.unwrap();
    assert!(matrix.pairs.iter().any(|p| p.src == "a" && p.dst == "b"));
    shutdown.cancel();
}

#[test]
fn a_certificate_names_its_node_and_no_other() {
    let pki = Pki::new();
    let (cert, _) = pki.issue_der(
        &["gpu-7.example", "gpu-7"],
        &[ExtendedKeyUsagePurpose::ClientAuth],
    );
    let der = cert.der().to_vec();
    assert!(tls::certificate_names(&der, "gpu-7"));
    assert!(tls::certificate_names(&der, "gpu-7.example"));
    assert!(!tls::certificate_names(&der, "gpu-8"));
    assert!(!tls::certificate_names(&der, "not a name"));
    assert!(!tls::certificate_names(b"garbage", "gpu-7"));
}

/// PEM files for the HTTPS tests: the CA, a server certificate for
/// 127.0.0.1, a client certificate from the CA and one from a stranger CA.
struct PemFiles {
    dir: tempfile::TempDir,
}

impl PemFiles {
    fn new(pki: &Pki) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("ca.pem", &pki.ca_pem);
        // The extender's: it serves HTTPS and is a client of the collector.
        let (cert, key) = pki.issue(
            &["127.0.0.1"],
            &[
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        );
        write("server.pem", &cert);
        write("server-key.pem", &key);
        let (cert, key) = pki.issue(&["prometheus"], &[ExtendedKeyUsagePurpose::ClientAuth]);
        write("client.pem", &cert);
        write("client-key.pem", &key);
        let (cert, key) = Pki::new().issue(&["prometheus"], &[ExtendedKeyUsagePurpose::ClientAuth]);
        write("stranger.pem", &cert);
        write("stranger-key.pem", &key);
        Self { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// Which certificate curl presents.
#[derive(Clone, Copy)]
enum ClientCert {
    None,
    FromTheCa,
    FromAStranger,
}

/// GETs `url` with curl, trusting the test CA: the body, or curl's error.
fn curl(url: &str, files: &PemFiles, client: ClientCert) -> Result<String, String> {
    let mut command = std::process::Command::new("curl");
    command.args(["-sS", "--fail", "--max-time", "5", "--cacert"]);
    command.arg(files.path("ca.pem"));
    let pair = match client {
        ClientCert::None => None,
        ClientCert::FromTheCa => Some(("client.pem", "client-key.pem")),
        ClientCert::FromAStranger => Some(("stranger.pem", "stranger-key.pem")),
    };
    if let Some((cert, key)) = pair {
        command.arg("--cert").arg(files.path(cert));
        command.arg("--key").arg(files.path(key));
    }
    let output = command.arg(url).output().expect("curl runs");
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// curl is a real client, but one that CI installs.
fn have_curl() -> bool {
    netaware_testkit::have_tool("curl")
}

/// A collector serving HTTPS (requiring client certificates or not), and
/// the PEM files of its CA for curl.
async fn https_collector(client_certificates: bool) -> (PemFiles, Collector, CancellationToken) {
    let pki = Pki::new();
    let files = PemFiles::new(&pki);
    let shutdown = CancellationToken::new();
    let (collector, _) = collector_with_https(&pki, Some(client_certificates), &shutdown).await;
    (files, collector, shutdown)
}

#[tokio::test(flavor = "multi_thread")]
async fn https_metrics_require_a_client_certificate_from_the_ca_when_told_to() {
    if !have_curl() {
        return;
    }
    let (files, collector, shutdown) = https_collector(true).await;
    let https = format!("https://127.0.0.1:{}", collector.http_addr.port());
    let get = |path: &str, client| {
        let url = format!("{https}{path}");
        let files = &files;
        async move { tokio::task::block_in_place(|| curl(&url, files, client)) }
    };
    let metrics = get("/metrics", ClientCert::FromTheCa)
        .await
        .expect("scraped");
    assert!(
        metrics.contains("netaware_collector_sessions_open"),
        "{metrics}"
    );
    let health = get("/healthz", ClientCert::FromTheCa).await.unwrap();
    assert!(health.starts_with("ok"), "{health}");
    let refused = get("/metrics", ClientCert::None)
        .await
        .expect_err("no certificate");
    println!("without a certificate: {refused}");
    get("/metrics", ClientCert::FromAStranger)
        .await
        .expect_err("a stranger's certificate");
    let plain = https.replace("https://", "http://");
    tokio::task::block_in_place(|| {
        curl(&format!("{plain}/metrics"), &files, ClientCert::FromTheCa)
    })
    .expect_err("plain HTTP on the HTTPS port");
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn https_without_client_certificates_serves_whoever_trusts_the_ca() {
    if !have_curl() {
        return;
    }
    let (files, collector, shutdown) = https_collector(false).await;
    let url = format!("https://127.0.0.1:{}/metrics", collector.http_addr.port());
    let metrics = tokio::task::block_in_place(|| curl(&url, &files, ClientCert::None));
    assert!(
        metrics
            .expect("scraped")
            .contains("netaware_collector_sessions_open")
    );
    let plain = url.replace("https://", "http://");
    tokio::task::block_in_place(|| curl(&plain, &files, ClientCert::None))
        .expect_err("plain HTTP on the HTTPS port");
    shutdown.cancel();
}

/// A free loopback port (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when the test ends, however it ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_scrapes_the_collector_and_the_extender_over_mutual_tls() {
    if !have_curl() || !prometheus::available() {
        return;
    }
    let pki = Pki::new();
    let files = PemFiles::new(&pki);
    let shutdown = CancellationToken::new();
    let (collector, grpc_url) = collector_with_https(&pki, Some(true), &shutdown).await;

    // The extender as it runs in the cluster: `netaware scheduler`, its
    // client certificate towards the collector serving HTTPS too.
    let (extender_port, metrics_port) = (free_port(), free_port());
    let _extender = Child(
        std::process::Command::new(env!("CARGO_BIN_EXE_netaware"))
            .arg("scheduler")
            .args(["--collector", &grpc_url])
            .args(["--listen", &format!("127.0.0.1:{extender_port}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
            .args(["--tls-ca", &files.path("ca.pem")])
            .args(["--tls-cert", &files.path("server.pem")])
            .args(["--tls-key", &files.path("server-key.pem")])
            .arg("--tls-http-client-certs")
            .env("KUBECONFIG", "/nonexistent")
            .spawn()
            .unwrap(),
    );
    let extender = format!("https://127.0.0.1:{extender_port}/healthz");
    let healthy =
        netaware_testkit::wait_for("the extender over HTTPS", Duration::from_secs(20), || {
            let extender = extender.clone();
            let files = &files;
            async move {
                tokio::task::block_in_place(|| curl(&extender, files, ClientCert::FromTheCa)).ok()
            }
        })
        .await;
    assert_eq!(healthy, "ok\n");
    let plain = extender.replace("https://", "http://");
    tokio::task::block_in_place(|| curl(&plain, &files, ClientCert::FromTheCa))
        .expect_err("plain HTTP on the extender");
    tokio::task::block_in_place(|| curl(&extender, &files, ClientCert::None))
        .expect_err("no client certificate on the extender");

    // Prometheus with the scrape configuration docs/install.md gives for TLS.
    let prometheus_port = free_port();
    let tls_config = json!({
        "ca_file": files.path("ca.pem"),
        "cert_file": files.path("client.pem"),
        "key_file": files.path("client-key.pem"),
    });
    let job = |name: &str, port: u16| {
        json!({"job_name": name, "scheme": "https", "tls_config": tls_config,
               "static_configs": [{"targets": [format!("127.0.0.1:{port}")]}]})
    };
    let config = json!({
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
        "scrape_configs": [
            job("netaware-collector", collector.http_addr.port()),
            job("netaware-scheduler", metrics_port),
        ]
    });
    let config_file = files.dir.path().join("prometheus.yml");
    std::fs::write(&config_file, config.to_string()).unwrap();
    let _prometheus = Child(
        std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", files.path("data")))
            .arg(format!("--web.listen-address=127.0.0.1:{prometheus_port}"))
            .arg("--log.level=warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let prometheus: std::net::SocketAddr = ([127, 0, 0, 1], prometheus_port).into();
    let targets =
        netaware_testkit::wait_for("both targets up", Duration::from_secs(60), || async {
            let data = prometheus_get(prometheus, "/api/v1/targets").await.ok()?;
            let active = data["activeTargets"].as_array()?.clone();
            (active.len() == 2 && active.iter().all(|t| t["health"] == "up")).then_some(active)
        })
        .await;
    for target in &targets {
        assert!(
            target["scrapeUrl"]
                .as_str()
                .unwrap()
                .starts_with("https://")
        );
    }
    let series = prometheus::query(prometheus, "netaware_scheduler_requests_total")
        .await
        .unwrap();
    assert!(!series.is_empty(), "the extender's own metrics were read");
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread")]
async fn certificates_from_netaware_certs_give_nodes_their_identity() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pki");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args([
            "certs",
            "--json",
            "--node",
            "a=127.0.0.51",
            "--node",
            "b=127.0.0.51",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let read = |path: &str| std::fs::read(out.join(path)).unwrap();
    let material = |dir: &str| {
        Tls::from_pem(
            Some(&read(&format!("{dir}/ca.crt"))),
            Some((
                &read(&format!("{dir}/tls.crt")),
                &read(&format!("{dir}/tls.key")),
            )),
        )
    };
    let served = material("collector");
    let shutdown = CancellationToken::new();
    let collector = collector_serving(served, Some(false), &shutdown).await;
    // Agents dial the collector's Service name, as in deploy/tls.
    let endpoint = |node_dir: &str| {
        tonic::transport::Endpoint::from_shared(format!(
            "https://127.0.0.1:{}",
            collector.grpc_addr.port()
        ))
        .unwrap()
        .tls_config(
            material(node_dir)
                .client()
                .domain_name("netaware-collector.netaware.svc"),
        )
        .unwrap()
    };
    Session::open_with(endpoint("nodes/a"), first_message("a"))
        .await
        .expect("a as a");
    let impostor = Session::open_with(endpoint("nodes/a"), first_message("b"))
        .await
        .expect_err("a as b refused");
    assert_eq!(impostor.code(), tonic::Code::PermissionDenied);
    Session::open_with(endpoint("nodes/b"), first_message("b"))
        .await
        .expect("b as b");
    if have_curl() {
        let port = collector.http_addr.port();
        let output = std::process::Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "5", "--cacert"])
            .arg(out.join("ca.crt"))
            .arg("--resolve")
            .arg(format!("netaware-collector.netaware.svc:{port}:127.0.0.1"))
            .arg(format!(
                "https://netaware-collector.netaware.svc:{port}/healthz"
            ))
            .output()
            .unwrap();
        let body = String::from_utf8_lossy(&output.stdout);
        assert!(body.starts_with("ok: 2 nodes"), "{body} {output:?}");
    }
    shutdown.cancel();
}

/// Writes `cert`, `key` and `ca` into `dir` the way a Secret volume
/// (cert-manager's) changes them: new files, then a rename each.
fn renew(dir: &std::path::Path, cert: &str, key: &str, ca: &str) {
    for (name, text) in [("tls.crt", cert), ("tls.key", key), ("ca.crt", ca)] {
        let staged = dir.join(format!("..{name}"));
        std::fs::write(&staged, text).unwrap();
        std::fs::rename(&staged, dir.join(name)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renewed_certificate_and_ca_are_served_without_a_restart() {
    if !have_curl() {
        return;
    }
    // The collector's certificate and CA as files, from a first CA.
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (Pki::new(), Pki::new());
    let server = |pki: &Pki| {
        pki.issue(
            &["localhost", "127.0.0.1"],
            &[ExtendedKeyUsagePurpose::ServerAuth],
        )
    };
    let (cert, key) = server(&old);
    renew(dir.path(), &cert, &key, &old.ca_pem);
    let args = tls::TlsArgs {
        tls_ca: Some(dir.path().join("ca.crt")),
        tls_cert: Some(dir.path().join("tls.crt")),
        tls_key: Some(dir.path().join("tls.key")),
    };
    let tls = args.load().unwrap().unwrap();
    let shutdown = CancellationToken::new();
    let collector = collector_serving(tls, Some(false), &shutdown).await;
    let url = format!("https://127.0.0.1:{}", collector.grpc_addr.port());
    let healthz = format!("https://127.0.0.1:{}/healthz", collector.http_addr.port());
    let trusting = |pki: &Pki| {
        let file = dir.path().join("trusted.pem");
        std::fs::write(&file, &pki.ca_pem).unwrap();
        std::process::Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "5", "--cacert"])
            .arg(&file)
            .arg(&healthz)
            .output()
            .unwrap()
            .status
            .success()
    };
    // Before: served by the first CA's certificate; an agent of the new
    // CA neither trusts it nor is trusted.
    assert!(tokio::task::block_in_place(|| trusting(&old)));
    assert!(!tokio::task::block_in_place(|| trusting(&new)));
    let agent = new.client("a");
    assert!(open(&url, Some(&agent), "a").await.is_err());

    // Renewed from the new CA: within the recheck interval, both ports
    // serve the new certificate and gRPC checks clients against the new CA.
    let (cert, key) = server(&new);
    renew(dir.path(), &cert, &key, &new.ca_pem);
    tokio::time::sleep(netaware_runtime::tls_server::RECHECK_INTERVAL + Duration::from_millis(500))
        .await;
    assert!(tokio::task::block_in_place(|| trusting(&new)));
    assert!(!tokio::task::block_in_place(|| trusting(&old)));
    let mut session = open(&url, Some(&agent), "a")
        .await
        .expect("the new CA's agent connects");
    assert_eq!(session.send(window(1, vec![good_peer()])).await.code, 0);
    assert!(open(&url, Some(&old.client("b")), "b").await.is_err());
    shutdown.cancel();
}
