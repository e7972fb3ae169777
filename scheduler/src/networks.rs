//! Which network a pod is placed by, and the score caches of the networks
//! the extender follows (one watch stream each).
//!
//! A pod labelled `netaware.io/network: rail-0` is placed by rail-0's
//! matrix; a pod labelled with a comma list (`rail-0,rail-1`) by the worst
//! of those networks, pair by pair ([`netaware_core::worst_of`]); a pod
//! without the label by the extender's default network
//! (`--default-network`, the primary unless said). A network the
//! extender does not follow is answered neutrally, with an Event that says
//! so, never failed: a measurement the extender lacks never blocks a pod.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use netaware_core::network::Network;
use netaware_core::placement::Placer;
use netaware_core::worst_of::worst_of_placers;

use crate::cache::ScoreCache;

/// The most combinations of networks kept built at once; past it, the
/// oldest are built again when next asked for.
const MAX_COMBINATIONS: usize = 16;

/// Our own label: the network a job's pods are placed by.
pub const NETWORK_LABEL: &str = "netaware.io/network";

/// The networks the extender follows, a cache each, and the default.
#[derive(Debug, Clone)]
pub struct NetworkCaches {
    default: ScoreCache,
    others: Vec<ScoreCache>,
    /// The worst-of placers of the lists pods asked for, each with the
    /// placers it was built from: built once per change of one of them,
    /// shared by every call until then.
    combinations: Arc<Mutex<HashMap<Vec<Network>, Combination>>>,
}

/// A worst-of placer and what it was built from.
#[derive(Debug)]
struct Combination {
    inputs: Vec<Arc<Placer>>,
    placer: Arc<Placer>,
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
    /// Several networks, all followed: placed by the worst of them.
    WorstOf(Vec<&'c ScoreCache>),
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
            combinations: Arc::default(),
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
            combinations: Arc::default(),
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

    /// The cache (or caches) a pod with `labels` is placed by.
    pub fn for_labels(&self, labels: &BTreeMap<String, String>) -> NetworkChoice<'_> {
        let Some(value) = labels.get(NETWORK_LABEL) else {
            return NetworkChoice::Followed(&self.default);
        };
        let networks = match Network::parse_list(value) {
            Ok(networks) => networks,
            Err(err) => return NetworkChoice::Invalid(err.to_string()),
        };
        let mut caches = Vec::with_capacity(networks.len());
        for network in networks {
            match self.all().find(|cache| *cache.network() == network) {
                Some(cache) => caches.push(cache),
                None => return NetworkChoice::NotFollowed(network),
            }
        }
        if caches.len() == 1 {
            NetworkChoice::Followed(caches[0])
        } else {
            NetworkChoice::WorstOf(caches)
        }
    }

    /// The placer of the worst of `caches`' networks, built from their
    /// latest matrices (once, then shared until one of them changes);
    /// `None` while any of them has no fresh matrix. Placed by the first
    /// network's settings.
    pub fn worst_of(&self, caches: &[&ScoreCache]) -> Option<Arc<Placer>> {
        let inputs: Vec<Arc<Placer>> = caches
            .iter()
            .map(|cache| cache.fresh())
            .collect::<Option<_>>()?;
        let key: Vec<Network> = caches.iter().map(|c| c.network().clone()).collect();
        let mut combinations = self
            .combinations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(built) = combinations.get(&key)
            && built.inputs.len() == inputs.len()
            && built
                .inputs
                .iter()
                .zip(&inputs)
                .all(|(a, b)| Arc::ptr_eq(a, b))
        {
            return Some(Arc::clone(&built.placer));
        }
        let placers: Vec<&Placer> = inputs.iter().map(|placer| &**placer).collect();
        let placer = Arc::new(worst_of_placers(&placers)?);
        placer.warm();
        if combinations.len() >= MAX_COMBINATIONS && !combinations.contains_key(&key) {
            combinations.clear();
        }
        combinations.insert(
            key,
            Combination {
                inputs,
                placer: Arc::clone(&placer),
            },
        );
        Some(placer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_core::placement::PlacementConfig;
    use netaware_core::scored::ScoredMatrix;
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
            NetworkChoice::WorstOf(caches) => format!(
                "worst of {}",
                caches
                    .iter()
                    .map(|c| c.network().as_str())
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
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
        assert_eq!(
            chosen(&caches, Some("rail-0, primary")),
            "worst of rail-0 and primary"
        );
        assert_eq!(chosen(&caches, Some("rail-0,rail-0")), "followed rail-0");
        assert_eq!(
            chosen(&caches, Some("rail-0,rail-1")),
            "not followed rail-1"
        );
        assert_eq!(chosen(&caches, Some("rail-0,")), "invalid");
        let many = (0..=netaware_core::network::MAX_LISTED)
            .map(|i| format!("rail-{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(chosen(&caches, Some(&many)), "invalid");
        assert_eq!(caches.all().count(), 2);
        assert_eq!(caches.default_cache().network().as_str(), "rail-0");
    }

    #[test]
    fn a_combination_is_built_once_per_change_of_its_networks() {
        let caches =
            NetworkCaches::new(&Network::primary(), vec![cache("primary"), cache("rail-0")])
                .unwrap();
        let all: Vec<&ScoreCache> = caches.all().collect();
        // Nothing fresh yet on rail-0: no placer, so a neutral answer.
        all[0].store_scored(ScoredMatrix::default(), PlacementConfig::default());
        assert!(caches.worst_of(&all).is_none());
        all[1].store_scored(ScoredMatrix::default(), PlacementConfig::default());
        let first = caches.worst_of(&all).unwrap();
        let again = caches.worst_of(&all).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        all[1].store_scored(ScoredMatrix::default(), PlacementConfig::default());
        let rebuilt = caches.worst_of(&all).unwrap();
        assert!(!Arc::ptr_eq(&first, &rebuilt));
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
