//! The server side of TLS: the configurations every TLS server of a
//! process serves with ([`Tls::grpc_server`], [`Tls::http_server`], and
//! [`HttpTlsArgs::server`], which the HTTP endpoints' flag asks for), built
//! on material that follows its files: a certificate, key or CA that
//! cert-manager (or anyone) renews on disk is served from the next
//! handshake on, without a restart.
//!
//! A process serves all its TLS ports (the collector's gRPC port and its
//! HTTPS endpoint, an agent's metrics, the extender) from one
//! [`ServerTls`]. Each handshake asks it for the certificate (and, where
//! client certificates are required, for the CA to check them against);
//! at most every [`RECHECK_INTERVAL`] that asking looks at the files'
//! size, time and inode (a Kubernetes Secret volume swaps a symlink, which
//! changes all three), and only when one changed reads them again. New
//! material that does not load (a half-written file, a key that is not the
//! certificate's) is logged and the old one kept, so that a bad renewal
//! never takes a server's TLS down. Connections already open keep the
//! material they were made with, as TLS does.
//!
//! No task and no clock of its own: the check runs inside the handshake,
//! and costs three `stat` calls at most every ten seconds.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use crate::tls::{HttpTlsArgs, Tls, TlsArgs, TlsError};

/// How often, at most, a handshake looks whether the files changed.
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(10);

impl Tls {
    /// The gRPC server side (rustls, HTTP/2): this certificate, and with a
    /// CA, mutual TLS; both read again when their files change.
    pub fn grpc_server(&self) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        ServerTls::new(self, RECHECK_INTERVAL)?
            .config(self.requires_client_certificates(), &[b"h2"])
    }

    /// The rustls server side of the HTTP endpoints (/metrics, /healthz,
    /// the extender): this certificate, and when `client_certificates` is
    /// true, only clients with a certificate that the CA signed; both read
    /// again when their files change.
    pub fn http_server(
        &self,
        client_certificates: bool,
    ) -> Result<crate::http::HttpsConfig, TlsError> {
        ServerTls::new(self, RECHECK_INTERVAL)?.config(client_certificates, &[b"http/1.1"])
    }
}

impl HttpTlsArgs {
    /// The HTTPS set-up for this process's HTTP endpoints: `None` (plain
    /// HTTP) without a certificate.
    pub fn server(&self, tls: Option<&Tls>) -> Result<Option<crate::http::HttpsConfig>, TlsError> {
        match tls {
            Some(tls) if tls.identity().is_some() => {
                tls.http_server(self.tls_http_client_certs).map(Some)
            }
            _ if self.tls_http_client_certs => Err(TlsError::NoIdentity),
            _ => Ok(None),
        }
    }
}

/// What a server presents and checks, as loaded from one version of the
/// files.
#[derive(Debug)]
struct Material {
    key: Arc<CertifiedKey>,
    /// Checks client certificates against the CA; `None` without one.
    clients: Option<Arc<dyn ClientCertVerifier>>,
}

/// The size, modification time and inode of each file, to notice a
/// change without reading it.
type Stamp = Vec<Option<(u64, SystemTime, u64)>>;

/// A server's TLS material, read again from its files when they change.
#[derive(Debug)]
pub struct ServerTls {
    /// The flags it was loaded by (`None`: given as bytes).
    source: Option<TlsArgs>,
    files: Vec<PathBuf>,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<Material>,
    recheck: Duration,
    /// When the files were last looked at, and what they were then.
    looked: Mutex<(Instant, Stamp)>,
}

impl ServerTls {
    /// The server side of `tls` (which must hold a certificate), looking
    /// at its files again at most every `recheck` when it was loaded from
    /// files (material given as bytes never changes).
    pub fn new(tls: &Tls, recheck: Duration) -> Result<Arc<Self>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let material = material(tls, &provider)?;
        let source = tls.source().cloned();
        let files = source.as_ref().map(TlsArgs::files).unwrap_or_default();
        Ok(Arc::new(Self {
            looked: Mutex::new((Instant::now(), stamp(&files))),
            source,
            files,
            provider,
            current: ArcSwap::from_pointee(material),
            recheck,
        }))
    }

    /// A rustls server configuration that presents this certificate and,
    /// with `client_certificates`, requires clients to present one the CA
    /// signed; it speaks the application protocols `alpn`.
    pub fn config(
        self: &Arc<Self>,
        client_certificates: bool,
        alpn: &[&[u8]],
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&self.provider))
            .with_safe_default_protocol_versions()
            .map_err(|err| TlsError::Invalid(err.to_string()))?;
        let builder = if client_certificates {
            if self.current.load().clients.is_none() {
                return Err(TlsError::NoClientCa);
            }
            builder.with_client_cert_verifier(Arc::new(Clients(Arc::clone(self))))
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder.with_cert_resolver(Arc::new(Certificate(Arc::clone(self))));
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// The material of this handshake: the files read again first if the
    /// time to look has come and they changed.
    fn material(&self) -> Arc<Material> {
        if !self.files.is_empty() {
            self.look_at_the_files();
        }
        self.current.load_full()
    }

    fn look_at_the_files(&self) {
        let mut looked = self.looked.lock().unwrap_or_else(PoisonError::into_inner);
        if looked.0.elapsed() < self.recheck {
            return;
        }
        looked.0 = Instant::now();
        let now = stamp(&self.files);
        if now == looked.1 {
            return;
        }
        looked.1 = now;
        let Some(source) = &self.source else {
            return;
        };
        let reloaded = source
            .load()
            .and_then(|tls| tls.ok_or(TlsError::NoIdentity))
            .and_then(|tls| material(&tls, &self.provider));
        match reloaded {
            Ok(material) => {
                self.current.store(Arc::new(material));
                tracing::info!(files = ?self.files, "TLS certificate, key and CA read again: their files changed");
            }
            Err(err) => {
                tracing::error!(%err, files = ?self.files, "TLS files changed but do not load: serving the previous ones");
            }
        }
    }
}

fn stamp(files: &[PathBuf]) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.len(), meta.modified().ok()?, meta.ino()))
        })
        .collect()
}

/// The certificate and key of `tls`, and a verifier for its CA.
fn material(tls: &Tls, provider: &Arc<CryptoProvider>) -> Result<Material, TlsError> {
    let (cert, key) = tls.identity().ok_or(TlsError::NoIdentity)?;
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| TlsError::Invalid(format!("certificate: {err}")))?;
    if chain.is_empty() {
        return Err(TlsError::Invalid(
            "certificate: no certificate in it".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key)
        .map_err(|err| TlsError::Invalid(format!("private key: {err}")))?;
    let key = CertifiedKey::from_der(chain, key, provider)
        .map_err(|err| TlsError::Invalid(format!("certificate and key: {err}")))?;
    let clients = match tls.ca() {
        None => None,
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca) {
                let cert = cert.map_err(|err| TlsError::Invalid(format!("CA: {err}")))?;
                roots
                    .add(cert)
                    .map_err(|err| TlsError::Invalid(format!("CA: {err}")))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                roots.into(),
                Arc::clone(provider),
            )
            .build()
            .map_err(|err| TlsError::Invalid(format!("CA: {err}")))?;
            Some(verifier)
        }
    };
    Ok(Material {
        key: Arc::new(key),
        clients,
    })
}

/// The certificate each handshake presents.
#[derive(Debug)]
struct Certificate(Arc<ServerTls>);

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0.material().key))
    }
}

/// Client certificates checked against the CA of the moment.
#[derive(Debug)]
struct Clients(Arc<ServerTls>);

impl Clients {
    fn verifier(&self) -> Result<Arc<dyn ClientCertVerifier>, rustls::Error> {
        self.0
            .material()
            .clients
            .clone()
            .ok_or_else(|| rustls::Error::General("no CA to check client certificates".into()))
    }
}

impl ClientCertVerifier for Clients {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The CA may change under a handshake; clients with one
        // certificate (every netaware client) need no hint.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verifier()?
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier()
            .map(|v| v.supported_verify_schemes())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA and a server certificate for `name` signed by it, as PEM.
    fn issued(name: &str) -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.clone().self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        (ca.pem(), cert.pem(), key.serialize_pem())
    }

    fn write(dir: &std::path::Path, (ca, cert, key): &(String, String, String)) {
        // As a Secret volume does: new files, then one rename.
        for (name, text) in [("ca.crt", ca), ("tls.crt", cert), ("tls.key", key)] {
            let staged = dir.join(format!(".{name}"));
            std::fs::write(&staged, text).unwrap();
            std::fs::rename(&staged, dir.join(name)).unwrap();
        }
    }

    fn served(server: &ServerTls) -> Vec<u8> {
        server.material().key.cert[0].to_vec()
    }

    #[test]
    fn renewed_files_are_served_from_the_next_look_and_bad_ones_never() {
        let dir = tempfile::tempdir().unwrap();
        let first = issued("collector-a");
        write(dir.path(), &first);
        let args = crate::tls::TlsArgs {
            tls_ca: Some(dir.path().join("ca.crt")),
            tls_cert: Some(dir.path().join("tls.crt")),
            tls_key: Some(dir.path().join("tls.key")),
        };
        let tls = args.load().unwrap().unwrap();
        let server = ServerTls::new(&tls, Duration::ZERO).unwrap();
        let before = served(&server);
        assert!(server.config(true, &[b"h2"]).is_ok());

        let second = issued("collector-b");
        write(dir.path(), &second);
        let after = served(&server);
        assert_ne!(after, before, "the renewed certificate is served");
        assert!(server.material().clients.is_some());

        // A renewal cut short: the certificate of one key, the key of
        // another. Logged, and the last good pair kept.
        let third = issued("collector-c");
        std::fs::write(dir.path().join("tls.key"), &third.2).unwrap();
        assert_eq!(served(&server), after);

        // Material given as bytes never changes, and a long recheck
        // interval does not look at the files.
        let slow = ServerTls::new(&tls, Duration::from_secs(3600)).unwrap();
        write(dir.path(), &issued("collector-d"));
        assert_eq!(served(&slow), before);
    }

    #[test]
    fn client_certificates_need_a_ca() {
        let (_, cert, key) = issued("collector");
        let tls = Tls::from_pem(None, Some((cert.as_bytes(), key.as_bytes())));
        let server = ServerTls::new(&tls, RECHECK_INTERVAL).unwrap();
        assert!(server.config(false, &[b"http/1.1"]).is_ok());
        assert!(matches!(
            server.config(true, &[b"h2"]),
            Err(TlsError::NoClientCa)
        ));
    }
}
