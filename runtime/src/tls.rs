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

use std::path::{Path, PathBuf};

use rustls_pki_types::{CertificateDer, ServerName};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

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

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file holds no PEM block of the kind needed.
    #[error("{path}: no PEM {what} in it")]
    NotPem { path: PathBuf, what: &'static str },
    /// A server needs its own certificate.
    #[error("serving TLS needs --tls-cert and --tls-key")]
    NoIdentity,
    /// The URL or the TLS settings were refused.
    #[error("{0}")]
    Endpoint(String),
}

/// Loaded TLS material.
#[derive(Debug, Clone)]
pub struct Tls {
    ca: Option<Certificate>,
    identity: Option<Identity>,
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
            .map(|path| read_pem(path, "CA certificate").map(Certificate::from_pem))
            .transpose()?;
        let identity = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(Identity::from_pem(
                read_pem(cert, "certificate")?,
                read_pem(key, "private key")?,
            )),
            _ => None,
        };
        Ok(Some(Tls { ca, identity }))
    }
}

impl Tls {
    /// Material from PEM bytes (tests, embedding).
    pub fn from_pem(ca: Option<&[u8]>, identity: Option<(&[u8], &[u8])>) -> Self {
        Self {
            ca: ca.map(Certificate::from_pem),
            identity: identity.map(|(cert, key)| Identity::from_pem(cert, key)),
        }
    }

    /// Whether a server with this material requires client certificates.
    pub fn requires_client_certificates(&self) -> bool {
        self.ca.is_some()
    }

    /// The server side: this certificate, and with a CA, mutual TLS.
    pub fn server(&self) -> Result<ServerTlsConfig, TlsError> {
        let identity = self.identity.clone().ok_or(TlsError::NoIdentity)?;
        let config = ServerTlsConfig::new().identity(identity);
        Ok(match &self.ca {
            Some(ca) => config.client_ca_root(ca.clone()),
            None => config,
        })
    }

    /// The client side: check the server against the CA, present this
    /// certificate when there is one.
    pub fn client(&self) -> ClientTlsConfig {
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &self.ca {
            config = config.ca_certificate(ca.clone());
        }
        if let Some(identity) = &self.identity {
            config = config.identity(identity.clone());
        }
        config
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
