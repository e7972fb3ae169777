//! TLS for netaware's gRPC connections (rustls, through tonic): the same
//! three flags on every binary, the collector's server side with mutual
//! TLS, every client's side, and node identity: an agent's certificate
//! must name its node (as a DNS subject alternative name), so that it can
//! report for that node only.
//!
//! - `--tls-cert` and `--tls-key`: this process's certificate chain and key
//!   (PEM). On the collector: its serving certificate. On a client: the
//!   certificate it presents.
//! - `--tls-ca`: the CA (PEM) that signs the other side. On the collector
//!   it turns on mutual TLS: every client must present a certificate that
//!   this CA signed. On a client it is what the collector's certificate is
//!   checked against.
//! - `--tls-http-client-certs` (servers only, [`HttpTlsArgs`]): with a
//!   certificate, every HTTP endpoint is served over HTTPS; this flag makes
//!   it require client certificates from the CA as well. It is separate
//!   because kubelet probes and many Prometheus set-ups present none.

use std::path::{Path, PathBuf};

use rustls_pki_types::{CertificateDer, ServerName};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// The TLS flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// CA certificate (PEM) that signs the other side: on the collector,
    /// require client certificates signed by it (mutual TLS).
    #[arg(long, env = "NETAWARE_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// This side's certificate chain (PEM).
    #[arg(long, env = "NETAWARE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// This side's private key (PEM).
    #[arg(long, env = "NETAWARE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// The HTTPS flag of processes that serve HTTP (collector, agent,
/// extender).
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct HttpTlsArgs {
    /// With --tls-cert, HTTP endpoints are HTTPS; this also requires client
    /// certificates signed by --tls-ca on them.
    #[arg(long, env = "NETAWARE_TLS_HTTP_CLIENT_CERTS", requires = "tls_ca")]
    pub tls_http_client_certs: bool,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no PEM block of the kind needed.
    #[error("{path}: no PEM {what} in it")]
    NotPem {
        /// The file.
        path: PathBuf,
        /// The kind of block looked for (certificate, key).
        what: &'static str,
    },
    /// A server needs its own certificate.
    #[error("serving TLS needs --tls-cert and --tls-key")]
    NoIdentity,
    /// Requiring client certificates needs a CA to check them against.
    #[error("requiring client certificates on HTTP needs --tls-ca")]
    NoClientCa,
    /// The certificate, key or CA could not be used.
    #[error("TLS material refused: {0}")]
    Invalid(String),
    /// The URL or the TLS settings were refused.
    #[error("{0}")]
    Endpoint(String),
}

/// Loaded TLS material, as PEM, and the flags that named its files.
#[derive(Debug, Clone)]
pub struct Tls {
    ca: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    source: Option<TlsArgs>,
}

fn read_pem(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    if !text.contains("-----BEGIN") {
        return Err(TlsError::NotPem {
            path: path.to_owned(),
            what,
        });
    }
    Ok(bytes)
}

impl TlsArgs {
    /// The material these flags name; `None` when TLS is off (no flag).
    pub fn load(&self) -> Result<Option<Tls>, TlsError> {
        if self.tls_ca.is_none() && self.tls_cert.is_none() {
            return Ok(None);
        }
        let ca = self
            .tls_ca
            .as_deref()
            .map(|path| read_pem(path, "CA certificate"))
            .transpose()?;
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((
                read_pem(cert, "certificate")?,
                read_pem(key, "private key")?,
            )),
            _ => None,
        };
        Ok(Some(Tls {
            ca,
            identity,
            source: Some(self.clone()),
        }))
    }

    /// The files these flags name.
    pub fn files(&self) -> Vec<PathBuf> {
        [&self.tls_ca, &self.tls_cert, &self.tls_key]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }
}

impl Tls {
    /// Material from PEM bytes (tests, embedding).
    pub fn from_pem(ca: Option<&[u8]>, identity: Option<(&[u8], &[u8])>) -> Self {
        Self {
            ca: ca.map(<[u8]>::to_vec),
            identity: identity.map(|(cert, key)| (cert.to_vec(), key.to_vec())),
            source: None,
        }
    }

    /// The CA (PEM), if any.
    pub fn ca(&self) -> Option<&[u8]> {
        self.ca.as_deref()
    }

    /// This side's certificate chain and key (PEM), if any.
    pub fn identity(&self) -> Option<(&[u8], &[u8])> {
        self.identity
            .as_ref()
            .map(|(cert, key)| (cert.as_slice(), key.as_slice()))
    }

    /// The flags its files were named by; `None` for material given as
    /// bytes.
    pub fn source(&self) -> Option<&TlsArgs> {
        self.source.as_ref()
    }

    /// The material as its files hold it now (a client connecting again
    /// presents a renewed certificate); this material when it came as
    /// bytes, or when the files no longer load (said in a warning).
    pub fn reloaded(&self) -> Tls {
        let Some(source) = &self.source else {
            return self.clone();
        };
        match source.load() {
            Ok(Some(tls)) => tls,
            Ok(None) => self.clone(),
            Err(err) => {
                tracing::warn!(%err, "TLS files do not load: connecting with the previous ones");
                self.clone()
            }
        }
    }

    /// Whether a server with this material requires client certificates.
    pub fn requires_client_certificates(&self) -> bool {
        self.ca.is_some()
    }

    /// The client side: check the server against the CA, present this
    /// certificate when there is one.
    pub fn client(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &self.ca {
            config = config.ca_certificate(Certificate::from_pem(ca));
        }
        if let Ok(identity) = self.tonic_identity() {
            config = config.identity(identity);
        }
        config
    }

    fn tonic_identity(&self) -> Result<Identity, TlsError> {
        let (cert, key) = self.identity.as_ref().ok_or(TlsError::NoIdentity)?;
        Ok(Identity::from_pem(cert, key))
    }
}

/// An endpoint for `url`, over TLS when `tls` is given (the URL must then
/// be https).
pub fn endpoint(url: &str, tls: Option<&Tls>) -> Result<Endpoint, TlsError> {
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|err| TlsError::Endpoint(format!("invalid URL {url:?}: {err}")))?;
    match tls {
        None => Ok(endpoint),
        Some(_) if !url.starts_with("https://") => Err(TlsError::Endpoint(format!(
            "TLS is set up, so the URL must start with https:// (not {url:?})"
        ))),
        Some(tls) => endpoint
            .tls_config(tls.client())
            .map_err(|err| TlsError::Endpoint(err.to_string())),
    }
}

/// Whether the end-entity certificate `der` names `node` (a DNS subject
/// alternative name). A node name that is not a DNS name names nothing.
pub fn certificate_names(der: &[u8], node: &str) -> bool {
    let Ok(name) = ServerName::try_from(node) else {
        return false;
    };
    let cert = CertificateDer::from(der);
    webpki::EndEntityCert::try_from(&cert)
        .is_ok_and(|cert| cert.verify_is_valid_for_subject_name(&name).is_ok())
}
