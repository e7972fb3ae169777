//! Mutual TLS between agents and the collector, with real certificates
//! (made here by rcgen, signed by a CA of the test's own) over real gRPC:
//! an agent may report only for the node its certificate names; a client
//! with another node's certificate, without a certificate, or in plain
//! text is refused; the score readers (CLI, scheduler) connect with their
//! own certificates.

mod support;

use netaware::client::ScoresConnection;
use netaware_collector::{Collector, CollectorConfig, ModelConfig};
use netaware_proto::v1 as pb;
use netaware_proto::v1::agent_message;
use netaware_runtime::tls::{self, Tls};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use support::{Session, good_peer, window};
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
        let key = KeyPair::generate().unwrap();
        let ca_pem = params.self_signed(&key).unwrap().pem();
        Self {
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names` and its key, for a server or a client.
    fn issue(&self, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> (String, String) {
        let (cert, key) = self.issue_der(names, purpose);
        (cert.pem(), key.serialize_pem())
    }

    fn issue_der(
        &self,
        names: &[&str],
        purpose: ExtendedKeyUsagePurpose,
    ) -> (rcgen::Certificate, KeyPair) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert, key)
    }

    /// Client material: this CA, and a certificate for `node`.
    fn client(&self, node: &str) -> Tls {
        let (cert, key) = self.issue(&[node], ExtendedKeyUsagePurpose::ClientAuth);
        Tls::from_pem(
            Some(self.ca_pem.as_bytes()),
            Some((cert.as_bytes(), key.as_bytes())),
        )
    }
}

/// A collector serving mutual TLS on loopback.
async fn collector(pki: &Pki, shutdown: &CancellationToken) -> (Collector, String) {
    let (cert, key) = pki.issue(
        &["localhost", "127.0.0.1"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let config = CollectorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        inventory: Vec::new(),
        model: ModelConfig::default(),
        state: None,
        tls: Some(Tls::from_pem(
            Some(pki.ca_pem.as_bytes()),
            Some((cert.as_bytes(), key.as_bytes())),
        )),
    };
    let collector = Collector::start(config, shutdown.clone()).await.unwrap();
    let url = format!("https://127.0.0.1:{}", collector.grpc_addr.port());
    (collector, url)
}

fn hello_as(node: &str) -> pb::AgentMessage {
    pb::AgentMessage {
        body: Some(agent_message::Body::Hello(support::hello(node))),
    }
}

async fn open(url: &str, tls: Option<&Tls>, node: &str) -> Result<Session, tonic::Status> {
    Session::open_with(tls::endpoint(url, tls).unwrap(), hello_as(node)).await
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
    let impostor = open(&url, Some(&a), "b").await.err().expect("refused");
    assert_eq!(
        impostor.code(),
        tonic::Code::PermissionDenied,
        "{impostor:?}"
    );
    assert!(impostor.message().contains("\"b\""), "{impostor:?}");
    // A certificate from another CA: refused in the handshake.
    let stranger = Pki::new().client("a");
    assert!(open(&url, Some(&stranger), "a").await.is_err());
    assert_eq!(collector.shared().state.lock().await.node_count(), 2);
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
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    let der = cert.der().to_vec();
    assert!(tls::certificate_names(&der, "gpu-7"));
    assert!(tls::certificate_names(&der, "gpu-7.example"));
    assert!(!tls::certificate_names(&der, "gpu-8"));
    assert!(!tls::certificate_names(&der, "not a name"));
    assert!(!tls::certificate_names(b"garbage", "gpu-7"));
}
