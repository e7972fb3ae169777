//! Blocks: the groups of a zone's nodes that are close to each other
//! (a rack, a leaf switch, a scalable unit), found from measurements alone.
//!
//! The method is average-linkage hierarchical clustering (UPGMA) over the
//! zone's pair distances, cut at a height relative to the zone itself:
//! two groups are one block when the mean distance between them is at most
//! [`BlockConfig::cut_ratio`] times the zone's typical nearest-neighbour
//! distance (the median, over its nodes, of each node's smallest distance to
//! a zone-mate), and never split below [`BlockConfig::cut_floor_ms`]. A zone
//! whose pairs are all alike is one block; a zone of racks whose cross-rack
//! pairs take twice the in-rack time splits by rack. Average linkage, not
//! single linkage: one short pair does not chain two racks together, and the
//! noise of single estimates averages out over a group.
//!
//! The clustering runs in O(n^2) time and n^2/2 `f32` of memory for a zone
//! of n nodes (the nearest-neighbour chain algorithm): 50 MB for a zone of
//! 5,000 nodes, while it runs. Pure: distances in, groups out.

/// How blocks are cut.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockConfig {
    /// Two groups are one block while the mean distance between them is at
    /// most this many times the zone's typical nearest-neighbour distance.
    pub cut_ratio: f64,
    /// Groups closer than this (ms) are always one block: below it, RTT
    /// differences are noise, not topology.
    pub cut_floor_ms: f64,
    /// A pair whose goodput is below this share of its zone's usual counts
    /// as farther apart, by the ratio (at most [`MAX_STRETCH`]).
    pub goodput_fraction: f64,
    /// Rounds in a row that must show a node in another block (or its
    /// degraded mark changed) before it moves: the hysteresis.
    pub confirmations: u32,
}

impl Default for BlockConfig {
    fn default() -> Self {
        Self {
            cut_ratio: 1.5,
            cut_floor_ms: 0.05,
            goodput_fraction: 0.5,
            confirmations: 3,
        }
    }
}

/// The most a low goodput multiplies a pair's distance, and what a path
/// lossier than placement accepts multiplies it by.
pub const MAX_STRETCH: f64 = 4.0;

/// Symmetric distances between `n` items, upper triangle only.
#[derive(Debug, Clone)]
pub struct Distances {
    n: usize,
    upper: Vec<f32>,
}

impl Distances {
    /// Distances from `distance(i, j)` for every `i < j`, asked in the
    /// order (0, 1), (0, 2), ..., (1, 2), ...; a non-finite or negative
    /// value is taken as 0 (the caller's distances are RTTs).
    pub fn new(n: usize, mut distance: impl FnMut(usize, usize) -> f64) -> Self {
        let mut upper = Vec::with_capacity(n * n.saturating_sub(1) / 2);
        for i in 0..n {
            for j in i + 1..n {
                let d = distance(i, j);
                upper.push(if d.is_finite() && d > 0.0 {
                    d as f32
                } else {
                    0.0
                });
            }
        }
        Self { n, upper }
    }

    /// How many items.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn slot(&self, i: usize, j: usize) -> usize {
        let (i, j) = if i < j { (i, j) } else { (j, i) };
        // Rows 0..i hold n-1, n-2, ... entries.
        i * (2 * self.n - i - 1) / 2 + (j - i - 1)
    }

    /// The distance between `i` and `j` (0 for an item and itself).
    pub fn get(&self, i: usize, j: usize) -> f64 {
        if i == j {
            0.0
        } else {
            f64::from(self.upper[self.slot(i, j)])
        }
    }

    fn set(&mut self, i: usize, j: usize, value: f64) {
        let slot = self.slot(i, j);
        self.upper[slot] = value as f32;
    }

    /// The median over items of each one's nearest other item; `None` for
    /// fewer than two items.
    pub fn typical_nearest(&self) -> Option<f64> {
        if self.n < 2 {
            return None;
        }
        let mut nearest: Vec<f64> = (0..self.n)
            .map(|i| {
                (0..self.n)
                    .filter(|&j| j != i)
                    .map(|j| self.get(i, j))
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        crate::stats::lower_median(&mut nearest)
    }
}

/// The height at which a zone with these distances is cut into blocks.
pub fn cut_height(distances: &Distances, config: &BlockConfig) -> f64 {
    let typical = distances.typical_nearest().unwrap_or(0.0);
    (config.cut_ratio * typical).max(config.cut_floor_ms)
}

/// The items grouped into blocks: average-linkage clusters whose merges
/// all lie at or below `cut`. Every item is in exactly one group; groups
/// are sorted, and ordered by their first item.
pub fn cluster(distances: &Distances, cut: f64) -> Vec<Vec<usize>> {
    let n = distances.len();
    let merges = average_linkage(distances.clone());
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    // Average linkage never merges below an earlier merge of the same
    // group, so the merges at or below the cut are exactly the groups cut
    // there, whatever order the chain found them in.
    for merge in merges.iter().filter(|m| m.height <= cut) {
        let (a, b) = (root(&mut parent, merge.a), root(&mut parent, merge.b));
        parent[a.max(b)] = a.min(b);
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of_root = vec![usize::MAX; n];
    for i in 0..n {
        let r = root(&mut parent, i);
        if group_of_root[r] == usize::MAX {
            group_of_root[r] = groups.len();
            groups.push(Vec::new());
        }
        groups[group_of_root[r]].push(i);
    }
    groups
}

/// One merge of two clusters, each named by the item whose slot holds it.
#[derive(Debug, Clone, Copy)]
struct Merge {
    a: usize,
    b: usize,
    height: f64,
}

/// Every merge of average-linkage clustering, by the nearest-neighbour
/// chain: follow nearest neighbours until two are each other's nearest,
/// merge them (the merged cluster takes the lower slot), and go on from
/// the rest of the chain.
fn average_linkage(mut distances: Distances) -> Vec<Merge> {
    let n = distances.len();
    let mut size = vec![1usize; n];
    let mut active = vec![true; n];
    let mut remaining = n;
    let mut chain: Vec<usize> = Vec::with_capacity(n);
    let mut merges = Vec::with_capacity(n.saturating_sub(1));
    while remaining > 1 {
        if chain.is_empty() {
            chain.push(active.iter().position(|&a| a).expect("an active cluster"));
        }
        let top = *chain.last().expect("a chain");
        let previous = chain.len().checked_sub(2).map(|i| chain[i]);
        // The nearest active cluster to `top`; on a tie the previous link
        // of the chain wins, which keeps the chain from cycling.
        let mut nearest = previous;
        let mut nearest_distance = previous.map_or(f64::INFINITY, |p| distances.get(top, p));
        for other in (0..n).filter(|&o| active[o] && o != top) {
            let d = distances.get(top, other);
            if d < nearest_distance {
                nearest = Some(other);
                nearest_distance = d;
            }
        }
        let nearest = nearest.expect("another active cluster");
        if Some(nearest) != previous {
            chain.push(nearest);
            continue;
        }
        chain.truncate(chain.len() - 2);
        let (keep, gone) = (top.min(nearest), top.max(nearest));
        merges.push(Merge {
            a: keep,
            b: gone,
            height: nearest_distance,
        });
        let (size_keep, size_gone) = (size[keep] as f64, size[gone] as f64);
        for other in (0..n).filter(|&o| active[o] && o != keep && o != gone) {
            let merged = (size_keep * distances.get(keep, other)
                + size_gone * distances.get(gone, other))
                / (size_keep + size_gone);
            distances.set(keep, other, merged);
        }
        size[keep] += size[gone];
        active[gone] = false;
        remaining -= 1;
    }
    merges
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Distances of items in `groups` (sizes): `inside` within a group,
    /// `between` across, each times (1 + noise(i, j)).
    fn grouped(
        sizes: &[usize],
        inside: f64,
        between: f64,
        noise: impl Fn(usize, usize) -> f64,
    ) -> (Distances, Vec<usize>) {
        let group_of: Vec<usize> = sizes
            .iter()
            .enumerate()
            .flat_map(|(g, &size)| std::iter::repeat_n(g, size))
            .collect();
        let distances = Distances::new(group_of.len(), |i, j| {
            let base = if group_of[i] == group_of[j] {
                inside
            } else {
                between
            };
            base * (1.0 + noise(i, j))
        });
        (distances, group_of)
    }

    fn groups_of(clusters: &[Vec<usize>], n: usize) -> Vec<usize> {
        let mut of = vec![usize::MAX; n];
        for (g, members) in clusters.iter().enumerate() {
            for &m in members {
                of[m] = g;
            }
        }
        of
    }

    #[test]
    fn the_condensed_layout_holds_every_pair_once() {
        let distances = Distances::new(5, |i, j| (10 * i + j) as f64);
        for i in 0..5 {
            for j in 0..5 {
                let expected = if i == j {
                    0.0
                } else {
                    (10 * i.min(j) + i.max(j)) as f64
                };
                assert_eq!(distances.get(i, j), expected, "({i}, {j})");
            }
        }
    }

    #[test]
    fn two_racks_split_and_an_even_zone_stays_whole() {
        let config = BlockConfig::default();
        let (racks, truth) = grouped(&[4, 3], 0.03, 0.08, |_, _| 0.0);
        let blocks = cluster(&racks, cut_height(&racks, &config));
        assert_eq!(blocks, vec![vec![0, 1, 2, 3], vec![4, 5, 6]]);
        assert_eq!(groups_of(&blocks, 7), truth);

        let (even, _) = grouped(&[9], 0.2, 0.2, |i, j| 0.1 * ((i * 7 + j * 3) % 5) as f64);
        assert_eq!(cluster(&even, cut_height(&even, &config)).len(), 1);
    }

    #[test]
    fn differences_below_the_floor_do_not_split_a_zone() {
        // 20 us against 40 us: twice as far, but both below 0.05 ms.
        let (close, _) = grouped(&[3, 3], 0.02, 0.04, |_, _| 0.0);
        let config = BlockConfig::default();
        assert_eq!(cluster(&close, cut_height(&close, &config)).len(), 1);
    }

    #[test]
    fn one_short_pair_does_not_chain_two_racks_together() {
        // Single linkage would join the racks through the pair (0, 4).
        let (mut distances, _) = grouped(&[4, 4], 0.1, 0.5, |_, _| 0.0);
        distances.set(0, 4, 0.1);
        let blocks = cluster(&distances, cut_height(&distances, &BlockConfig::default()));
        assert_eq!(blocks, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    }

    #[test]
    fn tiny_zones_are_one_block_each() {
        let none = Distances::new(0, |_, _| 0.0);
        assert!(cluster(&none, 1.0).is_empty());
        let one = Distances::new(1, |_, _| 0.0);
        assert_eq!(
            cluster(&one, cut_height(&one, &BlockConfig::default())),
            vec![vec![0]]
        );
    }

    proptest! {
        /// Groups whose pairs between take at least 3 times as long as
        /// their pairs inside, with up to 15% noise on each pair, are found
        /// exactly; and every item is in one block whatever the input.
        #[test]
        fn separated_groups_are_found_exactly(
            sizes in prop::collection::vec(2usize..7, 1..5),
            inside in 0.1f64..2.0,
            gap in 3.0f64..10.0,
            seed in any::<u64>(),
        ) {
            let noise = |i: usize, j: usize| {
                let h = (i as u64 * 31 + j as u64 * 17) ^ seed;
                let h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                (h as f64 / (1u64 << 24) as f64 - 0.5) * 0.3
            };
            let (distances, truth) = grouped(&sizes, inside, inside * gap, noise);
            let blocks = cluster(&distances, cut_height(&distances, &BlockConfig::default()));
            let found = groups_of(&blocks, truth.len());
            prop_assert!(found.iter().all(|&g| g != usize::MAX));
            prop_assert_eq!(blocks.len(), sizes.len());
            for i in 0..truth.len() {
                for j in 0..truth.len() {
                    prop_assert_eq!(found[i] == found[j], truth[i] == truth[j]);
                }
            }
        }

        #[test]
        fn any_distances_give_a_partition(
            n in 0usize..30,
            values in prop::collection::vec(-1.0f64..5.0, 435),
            cut in 0.0f64..3.0,
        ) {
            let distances = Distances::new(n, |i, j| values[(i * 29 + j) % values.len()]);
            let blocks = cluster(&distances, cut);
            let mut seen: Vec<usize> = blocks.iter().flatten().copied().collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }
}
