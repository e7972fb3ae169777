//! A node's zone and region from its Kubernetes Node object's topology
//! labels. The downward API gives a pod its node's name and address but not
//! the node's labels: the agent reads its own Node once at start, and the
//! collector (`--zones-from-nodes`) reads the Node of each agent that says
//! hello, so that a node cannot claim a zone it is not in. RBAC: `get` on
//! nodes, nothing else.
//!
//! The label logic is pure ([`from_labels`]); [`read`] is the one API call.

use std::collections::BTreeMap;

pub use netaware_core::labels::{Place, ZONE_LABEL};

/// Why the node's place (zone and region) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NodePlaceError {
    /// No in-cluster or kubeconfig credentials.
    #[error("no Kubernetes API credentials (is this running in a pod?): {0}")]
    Credentials(#[source] kube::Error),
    /// The API server refused or failed the request.
    #[error("reading Node {node}: {source}")]
    Api {
        /// The node.
        node: String,
        #[source]
        /// The cause.
        source: kube::Error,
    },
    /// The node carries no zone label.
    #[error("Node {node} has no {ZONE_LABEL} label")]
    NoZone {
        /// The node.
        node: String,
    },
}

/// The zone and region that `labels` give to `node` (see
/// [`netaware_core::labels::place_from_labels`]).
pub fn from_labels(node: &str, labels: &BTreeMap<String, String>) -> Result<Place, NodePlaceError> {
    netaware_core::labels::place_from_labels(labels).ok_or_else(|| NodePlaceError::NoZone {
        node: node.to_owned(),
    })
}

/// Reads `node`'s Node object through `client` and returns its topology.
pub async fn read(client: kube::Client, node: &str) -> Result<Place, NodePlaceError> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let object = nodes
        .get(node)
        .await
        .map_err(|source| NodePlaceError::Api {
            node: node.to_owned(),
            source,
        })?;
    from_labels(node, &object.metadata.labels.unwrap_or_default())
}

/// Reads `node`'s topology with the pod's own credentials (or a
/// kubeconfig, outside a cluster).
pub async fn read_in_cluster(node: &str) -> Result<Place, NodePlaceError> {
    let client = kube::Client::try_default()
        .await
        .map_err(NodePlaceError::Credentials)?;
    read(client, node).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_without_a_zone_is_an_error_that_names_it() {
        let labels = BTreeMap::from([(ZONE_LABEL.to_owned(), "  ".to_owned())]);
        let message = from_labels("gpu-1", &labels).unwrap_err().to_string();
        assert!(
            message.contains("gpu-1") && message.contains(ZONE_LABEL),
            "{message}"
        );
    }
}
