//! Which network a pod is placed by, and the score caches of the networks
//! the extender follows (one watch stream each).
//!
//! A pod labelled `netaware.io/network: rail-0` is placed by rail-0's
//! matrix; a pod without the label by the extender's default network
//! (`--default-network`, the primary unless said). A network the
//! extender does not follow is answered neutrally, with an Event that says
//! so, never failed: a measurement the extender lacks never blocks a pod.

use std::collections::BTreeMap;

use netaware_core::network::{InvalidNetwork, Network};

use crate::cache::ScoreCache;

/// Our own label: the network a job's pods are placed by.
pub const NETWORK_LABEL: &str = "netaware.io/network";

/// The networks the extender follows, a cache each, and the default.
#[derive(Debug, Clone)]
pub struct NetworkCaches {
    default: ScoreCache,
    others: Vec<ScoreCache>,
}

/// The default network is not among those followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the default network {0} is not among the networks followed")]
pub struct DefaultNotFollowed(pub Network);

/// The network a pod asks for, as the extender can serve it.
#[derive(Debug)]
pub enum NetworkChoice<'c> {
    /// A followed network's cache.
    Followed(&'c ScoreCache),
    /// A network the extender does not follow.
    NotFollowed(Network),
    /// A label value that names no network.
    Invalid(String),
}

impl NetworkCaches {
    /// One network, the default.
    pub fn single(cache: ScoreCache) -> Self {
        Self {
            default: cache,
            others: Vec::new(),
        }
    }

    /// The caches of `caches`, one per network, placing a pod without the
    /// label by `default`'s.
    pub fn new(default: &Network, caches: Vec<ScoreCache>) -> Result<Self, DefaultNotFollowed> {
        let mut by_network: BTreeMap<Network, ScoreCache> = caches
            .into_iter()
            .map(|cache| (cache.network().clone(), cache))
            .collect();
        let default_cache = by_network
            .remove(default)
            .ok_or_else(|| DefaultNotFollowed(default.clone()))?;
        Ok(Self {
            default: default_cache,
            others: by_network.into_values().collect(),
        })
    }

    /// The default network's cache.
    pub fn default_cache(&self) -> &ScoreCache {
        &self.default
    }

    /// Every cache, the default first.
    pub fn all(&self) -> impl Iterator<Item = &ScoreCache> {
        std::iter::once(&self.default).chain(&self.others)
    }

    /// The cache a pod with `labels` is placed by.
    pub fn for_labels(&self, labels: &BTreeMap<String, String>) -> NetworkChoice<'_> {
        let Some(value) = labels.get(NETWORK_LABEL) else {
            return NetworkChoice::Followed(&self.default);
        };
        match network_named(value) {
            Ok(network) => match self.all().find(|cache| *cache.network() == network) {
                Some(cache) => NetworkChoice::Followed(cache),
                None => NetworkChoice::NotFollowed(network),
            },
            Err(err) => NetworkChoice::Invalid(err.to_string()),
        }
    }
}

/// The network a label value names (surrounding blanks ignored).
fn network_named(value: &str) -> Result<Network, InvalidNetwork> {
    Network::parse(value.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cache(network: &str) -> ScoreCache {
        ScoreCache::new(Duration::from_secs(30)).on_network(Network::parse(network).unwrap())
    }

    fn labels(value: Option<&str>) -> BTreeMap<String, String> {
        value
            .map(|v| (NETWORK_LABEL.to_owned(), v.to_owned()))
            .into_iter()
            .collect()
    }

    fn chosen(caches: &NetworkCaches, value: Option<&str>) -> String {
        match caches.for_labels(&labels(value)) {
            NetworkChoice::Followed(cache) => format!("followed {}", cache.network()),
            NetworkChoice::NotFollowed(network) => format!("not followed {network}"),
            NetworkChoice::Invalid(_) => "invalid".to_owned(),
        }
    }

    #[test]
    fn a_pod_is_placed_by_its_labels_network_else_the_default() {
        let caches = NetworkCaches::new(
            &Network::parse("rail-0").unwrap(),
            vec![cache("primary"), cache("rail-0")],
        )
        .unwrap();
        assert_eq!(chosen(&caches, None), "followed rail-0");
        assert_eq!(chosen(&caches, Some("primary")), "followed primary");
        assert_eq!(chosen(&caches, Some(" rail-0 ")), "followed rail-0");
        assert_eq!(chosen(&caches, Some("rail-1")), "not followed rail-1");
        assert_eq!(chosen(&caches, Some("Rail 0")), "invalid");
        assert_eq!(caches.all().count(), 2);
        assert_eq!(caches.default_cache().network().as_str(), "rail-0");
    }

    #[test]
    fn the_default_must_be_followed() {
        let err = NetworkCaches::new(&Network::parse("rail-0").unwrap(), vec![cache("primary")])
            .unwrap_err();
        assert!(err.to_string().contains("rail-0"), "{err}");
        let single = NetworkCaches::single(cache("primary"));
        assert_eq!(chosen(&single, None), "followed primary");
        assert_eq!(chosen(&single, Some("rail-0")), "not followed rail-0");
    }
}
