//! `--zones-from-nodes`: each agent's zone and region come from its Node's
//! `topology.kubernetes.io` labels, not from what the agent says, so that a
//! node cannot claim a zone and pull jobs its way. A hello that disagrees
//! with the Node (or names a Node that does not exist) is refused.
//!
//! A Node's place is read once and kept for [`KEPT_FOR`], so that a fleet
//! reconnecting after a restart costs the API server one GET per node, not
//! one per reconnect. When the API cannot answer, the hello is refused
//! (the agent retries with backoff): the check fails closed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use netaware_proto::v1::Hello;
use netaware_runtime::node_labels::{self, NodePlaceError, Place};
use tokio::sync::Mutex;

/// How long a Node's place is trusted before it is read again.
pub const KEPT_FOR: Duration = Duration::from_secs(600);

/// Why a hello's place was refused.
#[derive(Debug, thiserror::Error)]
pub enum PlaceRefused {
    /// The Node could not be read (or has no zone label).
    #[error("cannot check the zone of node {node:?}: {source}")]
    Unread {
        /// The node.
        node: String,
        #[source]
        /// The cause.
        source: NodePlaceError,
    },
    /// The hello names another zone or region than the Node's labels.
    #[error(
        "node {node:?} says zone {said_zone:?} region {said_region:?}; its Node is in zone {zone:?} region {region:?}"
    )]
    Disagrees {
        /// The node.
        node: String,
        /// The zone in the hello.
        said_zone: String,
        /// The region in the hello.
        said_region: String,
        /// The zone of the Node.
        zone: String,
        /// The region of the Node.
        region: String,
    },
}

/// Whether `hello` names the place `node` is in. An empty region in the
/// hello agrees with any region of the Node (agents started with `--zone`
/// and no `--region` say none).
pub fn agrees(hello: &Hello, node: &Place) -> Result<(), PlaceRefused> {
    let same_zone = hello.zone == node.zone;
    let same_region = hello.region.is_empty() || hello.region == node.region;
    if same_zone && same_region {
        Ok(())
    } else {
        Err(PlaceRefused::Disagrees {
            node: hello.node.clone(),
            said_zone: hello.zone.clone(),
            said_region: hello.region.clone(),
            zone: node.zone.clone(),
            region: node.region.clone(),
        })
    }
}

/// The Kubernetes API, asked for each agent's Node.
pub struct NodePlaces {
    client: kube::Client,
    read: Mutex<HashMap<String, (Place, Instant)>>,
}

impl std::fmt::Debug for NodePlaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodePlaces(the Kubernetes API)")
    }
}

impl NodePlaces {
    /// Asks the API server behind `client`.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            read: Mutex::default(),
        }
    }

    /// Checks `hello` against its Node.
    pub async fn check(&self, hello: &Hello) -> Result<(), PlaceRefused> {
        let kept = self
            .read
            .lock()
            .await
            .get(&hello.node)
            .filter(|(_, at)| at.elapsed() < KEPT_FOR)
            .map(|(place, _)| place.clone());
        let place = match kept {
            Some(place) => place,
            None => {
                let place = node_labels::read(self.client.clone(), &hello.node)
                    .await
                    .map_err(|source| PlaceRefused::Unread {
                        node: hello.node.clone(),
                        source,
                    })?;
                self.read
                    .lock()
                    .await
                    .insert(hello.node.clone(), (place.clone(), Instant::now()));
                place
            }
        };
        agrees(hello, &place)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(zone: &str, region: &str) -> Hello {
        Hello {
            node: "gpu-7".into(),
            zone: zone.into(),
            region: region.into(),
            ..Hello::default()
        }
    }

    #[test]
    fn a_hello_agrees_only_with_its_nodes_zone_and_region() {
        let node = Place {
            zone: "eu-west-1b".into(),
            region: "eu-west-1".into(),
        };
        assert!(agrees(&hello("eu-west-1b", "eu-west-1"), &node).is_ok());
        assert!(agrees(&hello("eu-west-1b", ""), &node).is_ok());
        let message = agrees(&hello("eu-west-1a", "eu-west-1"), &node)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("eu-west-1a") && message.contains("eu-west-1b"),
            "{message}"
        );
        assert!(agrees(&hello("eu-west-1b", "us-east-1"), &node).is_err());
    }
}
