//! Who an agent may say it is under mutual TLS: the node its client
//! certificate names, at addresses the certificate holds. A node that
//! could name any address in its hello could point every other agent's
//! probes and throughput tests at a host of its choosing; one that could
//! name another node could report for it.

use netaware_proto::v1::Hello;
use netaware_runtime::tls::certificate_names;

/// Why a hello does not match the client's certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The client presented no certificate.
    #[error("no client certificate: node {0:?} cannot be identified")]
    NoCertificate(String),
    /// The certificate names another node.
    #[error("the client certificate is not for node {0:?}")]
    NotThisNode(String),
    /// The hello names an address that the certificate does not hold.
    #[error(
        "the client certificate of node {node:?} does not hold address {address} (each address in a hello must be an IP subject alternative name of the certificate)"
    )]
    AddressNotCertified {
        /// The node.
        node: String,
        /// The address it named.
        address: String,
    },
}

/// Checks a hello against the client's certificate (DER, the end-entity
/// one): the node's name is a DNS name of it, and every address an IP
/// address of it.
pub fn check(certificate: Option<&[u8]>, hello: &Hello) -> Result<(), Refused> {
    let Some(der) = certificate else {
        return Err(Refused::NoCertificate(hello.node.clone()));
    };
    if !certificate_names(der, &hello.node) {
        return Err(Refused::NotThisNode(hello.node.clone()));
    }
    match hello
        .addresses
        .iter()
        .find(|address| !certificate_names(der, address))
    {
        Some(address) => Err(Refused::AddressNotCertified {
            node: hello.node.clone(),
            address: address.clone(),
        }),
        None => Ok(()),
    }
}
