//! The schedulers a platform team runs, against netaware: Kueue's
//! topology-aware scheduling ([`crate::kueue_tas`]) and Volcano's
//! HyperNodes ([`crate::volcano`]), each driven by rack labels as they
//! should be, by labels as clusters have them, and by the topology
//! netaware publishes from what it measured ([`crate::labels`]); and
//! netaware's own extender. Each [`Labelled`] scheduler [`Places`] a job
//! on the simulator's cluster.

use rand::Rng;

use crate::information::View;
use crate::labels::{LabelSource, NodePlaces};
use crate::policies::Policy;
use crate::sim::Places;
use crate::volcano::Mode;
use crate::{kueue_tas, volcano};

/// The highest HyperNode tier a Volcano job allows: its zone (a job
/// never crosses zones, as `highestTierAllowed: 2` says).
pub const VOLCANO_HIGHEST_TIER: u8 = 2;

/// A scheduler under comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// netaware's extender (zone first, best connected nodes).
    Netaware,
    /// Kueue TAS, BestFit, preferred rack; `balanced`: with
    /// `TASBalancedPlacement`.
    KueueTas {
        /// Where its labels come from.
        source: LabelSource,
        /// With `TASBalancedPlacement`.
        balanced: bool,
    },
    /// Volcano's network-topology-aware scheduling up to the zone tier.
    Volcano {
        /// Where its HyperNodes come from.
        source: LabelSource,
        /// Hard or soft.
        mode: Mode,
    },
}

impl Scheduler {
    /// Every scheduler compared, netaware first.
    pub const ALL: [Scheduler; 9] = [
        Scheduler::Netaware,
        Scheduler::KueueTas {
            source: LabelSource::Correct,
            balanced: false,
        },
        Scheduler::KueueTas {
            source: LabelSource::AsClustersHaveThem,
            balanced: false,
        },
        Scheduler::KueueTas {
            source: LabelSource::Netaware,
            balanced: false,
        },
        Scheduler::KueueTas {
            source: LabelSource::Correct,
            balanced: true,
        },
        Scheduler::Volcano {
            source: LabelSource::Correct,
            mode: Mode::Hard,
        },
        Scheduler::Volcano {
            source: LabelSource::AsClustersHaveThem,
            mode: Mode::Hard,
        },
        Scheduler::Volcano {
            source: LabelSource::Netaware,
            mode: Mode::Hard,
        },
        Scheduler::Volcano {
            source: LabelSource::Correct,
            mode: Mode::Soft,
        },
    ];

    /// The name in tables and JSON.
    pub fn name(self) -> String {
        match self {
            Scheduler::Netaware => "netaware".to_owned(),
            Scheduler::KueueTas { source, balanced } => format!(
                "kueue-tas{} ({})",
                if balanced { " balanced" } else { "" },
                source.name()
            ),
            Scheduler::Volcano { source, mode } => format!(
                "volcano {} ({})",
                match mode {
                    Mode::Hard => "hard",
                    Mode::Soft => "soft",
                },
                source.name()
            ),
        }
    }
}

/// A scheduler with the labels of its cluster: the static ones (as they
/// should be, and as clusters have them); netaware's topology comes with
/// each view.
#[derive(Debug, Clone, Copy)]
pub struct Labelled<'a> {
    /// The scheduler.
    pub scheduler: Scheduler,
    /// Rack labels that say where each node is cabled.
    pub correct: &'a NodePlaces,
    /// Rack labels with the errors clusters carry.
    pub stale: &'a NodePlaces,
}

impl Labelled<'_> {
    fn labels<'v>(&'v self, source: LabelSource, view: &'v View) -> &'v NodePlaces {
        match source {
            LabelSource::Correct => self.correct,
            LabelSource::AsClustersHaveThem => self.stale,
            LabelSource::Netaware => &view.published,
        }
    }
}

impl Places for Labelled<'_> {
    fn place<R: Rng>(
        &self,
        view: &View,
        free: &[String],
        size: usize,
        rng: &mut R,
    ) -> Option<Vec<String>> {
        match self.scheduler {
            Scheduler::Netaware => Policy::Netaware.place(view, free, size, rng),
            Scheduler::KueueTas { source, balanced } => {
                kueue_tas::place(self.labels(source, view), free, size, balanced)
            }
            Scheduler::Volcano { source, mode } => volcano::place(
                self.labels(source, view),
                free,
                size,
                mode,
                VOLCANO_HIGHEST_TIER,
                rng,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn every_scheduler_places_distinct_free_nodes_and_names_itself_apart() {
        let mut rng = StdRng::seed_from_u64(5);
        let cluster = crate::fixtures::clean_cluster(2, 16, 4, &mut rng);
        let view = crate::fixtures::perfect_view(&cluster, &mut rng);
        let correct = NodePlaces::correct(&cluster);
        let stale = NodePlaces::as_clusters_have_them(
            &cluster,
            &crate::labels::LabelErrors::default(),
            &mut rng,
        );
        let free: Vec<String> = cluster.names.clone();
        let mut names = std::collections::BTreeSet::new();
        for scheduler in Scheduler::ALL {
            names.insert(scheduler.name());
            let labelled = Labelled {
                scheduler,
                correct: &correct,
                stale: &stale,
            };
            for size in [1, 3, 4, 8] {
                let placed = labelled
                    .place(&view, &free, size, &mut rng)
                    .unwrap_or_else(|| panic!("{scheduler:?} {size}"));
                let mut unique = placed.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(unique.len(), size, "{scheduler:?}: {placed:?}");
            }
        }
        assert_eq!(names.len(), Scheduler::ALL.len());
        // A job of four fits one rack: the label-driven schedulers with
        // true labels keep it in one.
        for scheduler in [Scheduler::ALL[1], Scheduler::ALL[5]] {
            let labelled = Labelled {
                scheduler,
                correct: &correct,
                stale: &stale,
            };
            let placed = labelled.place(&view, &free, 4, &mut rng).unwrap();
            let racks: std::collections::BTreeSet<usize> = placed
                .iter()
                .map(|n| cluster.rack_of(cluster.index_of(n).unwrap()))
                .collect();
            assert_eq!(racks.len(), 1, "{scheduler:?}: {placed:?}");
        }
    }
}
