//! Matrices of any size on the wire, pure: pages that stay under every
//! message limit, the delta between two matrices, and the [`Follower`]
//! that rebuilds a matrix from a watch stream's updates.
//!
//! A 5,000-node cluster whose agents probe 64 peers each has 320,000 pairs,
//! about 32 MB as one message: far over gRPC's default limit of 4 MiB. So
//! GetMatrix answers in pages ([`page`]), and WatchMatrix sends a full
//! state in pages and then only what changed ([`full_state`], [`delta`]),
//! each message at most [`MAX_PAGE_BYTES`].

use std::collections::{BTreeMap, HashMap};

use netaware_core::snapshot::ScoredMatrix;
use prost::Message;

use crate::convert;
use crate::v1 as pb;

/// The most a page's pairs may take on the wire: well under the 4 MiB
/// that gRPC clients accept by default, with room for the nodes of a
/// first page.
pub const MAX_PAGE_BYTES: usize = 3 * 1024 * 1024;
/// The most pairs on one page.
pub const MAX_PAGE_PAIRS: usize = 20_000;

/// Which part of the matrix GetMatrix answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixFilter<'a> {
    /// Every node and pair.
    All,
    /// A zone's nodes and the pairs between them.
    Zone(&'a str),
    /// A node, its peers, and its pairs both ways.
    Node(&'a str),
}

impl<'a> MatrixFilter<'a> {
    /// The filter a request asks for (the node wins over the zone).
    pub fn of(request: &'a pb::MatrixRequest) -> Self {
        match (request.node.as_str(), request.zone.as_str()) {
            ("", "") => MatrixFilter::All,
            ("", zone) => MatrixFilter::Zone(zone),
            (node, _) => MatrixFilter::Node(node),
        }
    }
}

/// The pairs of `matrix` that `filter` keeps, in order.
fn kept_pairs<'m>(matrix: &'m pb::Matrix, filter: MatrixFilter<'_>) -> Vec<&'m pb::Pair> {
    match filter {
        MatrixFilter::All => matrix.pairs.iter().collect(),
        MatrixFilter::Node(node) => matrix
            .pairs
            .iter()
            .filter(|p| p.src == node || p.dst == node)
            .collect(),
        MatrixFilter::Zone(zone) => {
            let inside: std::collections::HashSet<&str> = matrix
                .nodes
                .iter()
                .filter(|n| n.zone == zone)
                .map(|n| n.name.as_str())
                .collect();
            matrix
                .pairs
                .iter()
                .filter(|p| inside.contains(p.src.as_str()) && inside.contains(p.dst.as_str()))
                .collect()
        }
    }
}

/// The nodes `filter` keeps: for a node, it and the other ends of `pairs`.
fn kept_nodes(matrix: &pb::Matrix, filter: MatrixFilter<'_>, pairs: &[&pb::Pair]) -> Vec<pb::Node> {
    match filter {
        MatrixFilter::All => matrix.nodes.clone(),
        MatrixFilter::Zone(zone) => matrix
            .nodes
            .iter()
            .filter(|n| n.zone == zone)
            .cloned()
            .collect(),
        MatrixFilter::Node(node) => {
            let mut names: std::collections::HashSet<&str> = pairs
                .iter()
                .flat_map(|p| [p.src.as_str(), p.dst.as_str()])
                .collect();
            names.insert(node);
            matrix
                .nodes
                .iter()
                .filter(|n| names.contains(n.name.as_str()))
                .cloned()
                .collect()
        }
    }
}

/// How many of `pairs` from `start` fit one page of at most `max_pairs`.
fn page_len(pairs: &[&pb::Pair], start: usize, max_pairs: usize) -> usize {
    let mut bytes = 0;
    let mut len = 0;
    for pair in pairs
        .iter()
        .skip(start)
        .take(max_pairs.clamp(1, MAX_PAGE_PAIRS))
    {
        // A field's tag and length prefix: a few bytes more than the pair.
        let size = pair.encoded_len() + 8;
        if len > 0 && bytes + size > MAX_PAGE_BYTES {
            break;
        }
        bytes += size;
        len += 1;
    }
    len
}

/// The page of `matrix` that `filter` keeps from pair `offset`, at most
/// `page_size` pairs (0: the most a page holds), and the offset of the
/// next page if there is one. Nodes, weights and fallback come with the
/// first page only.
pub fn page(
    matrix: &pb::Matrix,
    filter: MatrixFilter<'_>,
    offset: usize,
    page_size: usize,
) -> (pb::Matrix, Option<usize>) {
    let pairs = kept_pairs(matrix, filter);
    let max_pairs = if page_size == 0 {
        MAX_PAGE_PAIRS
    } else {
        page_size
    };
    let start = offset.min(pairs.len());
    let len = page_len(&pairs, start, max_pairs);
    let end = start + len;
    let first = offset == 0;
    let page = pb::Matrix {
        version: matrix.version,
        generated_unix_ms: matrix.generated_unix_ms,
        nodes: if first {
            kept_nodes(matrix, filter, &pairs)
        } else {
            Vec::new()
        },
        pairs: pairs[start..end].iter().map(|&p| p.clone()).collect(),
        weights: if first { matrix.weights } else { None },
        fallback_penalty: if first { matrix.fallback_penalty } else { 0.0 },
        next_page_token: String::new(),
    };
    (page, (end < pairs.len()).then_some(end))
}

/// Whether two pairs carry the same figures, ages aside: ages move on with
/// the clock, and sending every pair each second for that alone would make
/// every delta the whole matrix.
fn same_figures(a: &pb::Pair, b: &pb::Pair) -> bool {
    // Every field named, none skipped by `..`: a field added to Pair must
    // be thought about here.
    let pb::Pair {
        src: _,
        dst: _,
        rtt_median_ms,
        rtt_p99_ms,
        jitter_ms,
        loss_ratio,
        throughput_bps,
        samples,
        age_s: _,
        quality,
        terms,
        stale,
        one_way_loss_ratio,
        throughput_retransmits,
        throughput_tcp_rtt_ms,
        throughput_age_s: _,
    } = a;
    *rtt_median_ms == b.rtt_median_ms
        && *rtt_p99_ms == b.rtt_p99_ms
        && *jitter_ms == b.jitter_ms
        && *loss_ratio == b.loss_ratio
        && *throughput_bps == b.throughput_bps
        && *samples == b.samples
        && *quality == b.quality
        && *terms == b.terms
        && *stale == b.stale
        && *one_way_loss_ratio == b.one_way_loss_ratio
        && *throughput_retransmits == b.throughput_retransmits
        && *throughput_tcp_rtt_ms == b.throughput_tcp_rtt_ms
}

/// Removed pairs on one page: their keys are small, 50,000 well under
/// the limit.
const MAX_PAGE_REMOVED: usize = 50_000;

/// Cuts an update into pages: the nodes and the estimates' settings on the
/// first, the removed keys and then `pairs` spread over as many as they
/// need.
fn paged(
    head: pb::MatrixUpdate,
    pairs: Vec<&pb::Pair>,
    removed: Vec<pb::PairKey>,
) -> Vec<pb::MatrixUpdate> {
    let mut contents: Vec<(Vec<pb::Pair>, Vec<pb::PairKey>)> = removed
        .chunks(MAX_PAGE_REMOVED)
        .map(|keys| (Vec::new(), keys.to_vec()))
        .collect();
    let mut start = 0;
    while start < pairs.len() {
        let len = page_len(&pairs, start, MAX_PAGE_PAIRS);
        let page = pairs[start..start + len].iter().map(|&p| p.clone());
        contents.push((page.collect(), Vec::new()));
        start += len;
    }
    if contents.is_empty() {
        contents.push((Vec::new(), Vec::new()));
    }
    let last = contents.len() - 1;
    contents
        .into_iter()
        .enumerate()
        .map(|(i, (pairs, removed))| {
            let mut page = head.clone();
            if i > 0 {
                page.nodes = Vec::new();
                page.weights = None;
            }
            page.page = u32::try_from(i).unwrap_or(u32::MAX);
            page.last_page = i == last;
            page.pairs = pairs;
            page.removed = removed;
            page
        })
        .collect()
}

fn head(matrix: &pb::Matrix, base_version: u64, nodes: Option<&[pb::Node]>) -> pb::MatrixUpdate {
    pb::MatrixUpdate {
        version: matrix.version,
        base_version,
        page: 0,
        last_page: false,
        generated_unix_ms: matrix.generated_unix_ms,
        nodes: nodes.map(<[pb::Node]>::to_vec).unwrap_or_default(),
        nodes_changed: nodes.is_some(),
        pairs: Vec::new(),
        removed: Vec::new(),
        weights: matrix.weights,
        fallback_penalty: matrix.fallback_penalty,
    }
}

/// A whole matrix as a watch update: base version 0, in pages.
pub fn full_state(matrix: &pb::Matrix) -> Vec<pb::MatrixUpdate> {
    paged(
        head(matrix, 0, Some(&matrix.nodes)),
        matrix.pairs.iter().collect(),
        Vec::new(),
    )
}

/// What turns `old` into `new` as a watch update, in pages: the pairs that
/// are new or changed, those gone, and the nodes when they changed.
pub fn delta(old: &pb::Matrix, new: &pb::Matrix) -> Vec<pb::MatrixUpdate> {
    let before: HashMap<(&str, &str), &pb::Pair> = old
        .pairs
        .iter()
        .map(|p| ((p.src.as_str(), p.dst.as_str()), p))
        .collect();
    let changed: Vec<&pb::Pair> = new
        .pairs
        .iter()
        .filter(|p| {
            before
                .get(&(p.src.as_str(), p.dst.as_str()))
                .is_none_or(|old| !same_figures(old, p))
        })
        .collect();
    let after: std::collections::HashSet<(&str, &str)> = new
        .pairs
        .iter()
        .map(|p| (p.src.as_str(), p.dst.as_str()))
        .collect();
    let removed: Vec<pb::PairKey> = old
        .pairs
        .iter()
        .filter(|p| !after.contains(&(p.src.as_str(), p.dst.as_str())))
        .map(|p| pb::PairKey {
            src: p.src.clone(),
            dst: p.dst.clone(),
        })
        .collect();
    let nodes = (old.nodes != new.nodes).then_some(new.nodes.as_slice());
    paged(head(new, old.version, nodes), changed, removed)
}

/// Why a follower cannot apply an update: it must start a new watch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FollowError {
    /// A delta for another version than the follower's.
    #[error("an update from version {base} while at version {at}: an update was missed")]
    Gap {
        /// The version the update applies to.
        base: u64,
        /// The follower's version.
        at: u64,
    },
    /// Pages out of order or of two updates mixed.
    #[error("page {got} of version {version} where page {expected} was due")]
    OutOfOrder {
        /// The update's version.
        version: u64,
        /// The page that came.
        got: u32,
        /// The page that was due.
        expected: u32,
    },
}

/// Whether an update is whole yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More pages of it are due.
    Partial,
    /// Applied: the follower is at its version.
    Complete,
}

/// A matrix rebuilt from a watch stream, update by update.
#[derive(Debug, Clone, Default)]
pub struct Follower {
    version: u64,
    generated_unix_ms: u64,
    nodes: Vec<pb::Node>,
    pairs: BTreeMap<(String, String), pb::Pair>,
    weights: Option<pb::ScoreWeights>,
    fallback_penalty: f64,
    /// The pages of the update coming in.
    pending: Vec<pb::MatrixUpdate>,
}

impl Follower {
    /// A follower with nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The version of the matrix it holds (0: none yet).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Takes one message of the stream; applies the update it completes.
    pub fn apply(&mut self, update: pb::MatrixUpdate) -> Result<Progress, FollowError> {
        let expected = match self.pending.first() {
            None => 0,
            Some(first) if first.version == update.version => {
                u32::try_from(self.pending.len()).unwrap_or(u32::MAX)
            }
            Some(_) => 0,
        };
        if update.page != expected {
            self.pending.clear();
            return Err(FollowError::OutOfOrder {
                version: update.version,
                got: update.page,
                expected,
            });
        }
        if update.page == 0 {
            self.pending.clear();
            if update.base_version != 0 && update.base_version != self.version {
                return Err(FollowError::Gap {
                    base: update.base_version,
                    at: self.version,
                });
            }
        }
        let last = update.last_page;
        self.pending.push(update);
        if !last {
            return Ok(Progress::Partial);
        }
        let pages = std::mem::take(&mut self.pending);
        let first = &pages[0];
        if first.base_version == 0 {
            self.pairs.clear();
            self.nodes.clear();
        }
        if first.nodes_changed {
            self.nodes.clone_from(&first.nodes);
        }
        for key in pages.iter().flat_map(|page| &page.removed) {
            self.pairs.remove(&(key.src.clone(), key.dst.clone()));
        }
        self.version = first.version;
        self.generated_unix_ms = first.generated_unix_ms;
        self.weights = first.weights;
        self.fallback_penalty = first.fallback_penalty;
        // The nodes, settings and removals are read: `first` is no longer
        // borrowed past here.
        for page in pages {
            for pair in page.pairs {
                self.pairs
                    .insert((pair.src.clone(), pair.dst.clone()), pair);
            }
        }
        Ok(Progress::Complete)
    }

    /// The matrix it holds, as one wire message (for tests and tools; a
    /// large one is over the wire's limits).
    pub fn matrix(&self) -> pb::Matrix {
        pb::Matrix {
            version: self.version,
            generated_unix_ms: self.generated_unix_ms,
            nodes: self.nodes.clone(),
            pairs: self.pairs.values().cloned().collect(),
            weights: self.weights,
            fallback_penalty: self.fallback_penalty,
            next_page_token: String::new(),
        }
    }

    /// The scored matrix it holds, as the collector scored it.
    pub fn scored(&self) -> ScoredMatrix {
        convert::scored_from_wire(
            &self.nodes,
            self.pairs.values(),
            convert::fallback_from_wire(self.weights, self.fallback_penalty),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pair(src: usize, dst: usize, quality: f64, age: f64) -> pb::Pair {
        pb::Pair {
            src: format!("n{src}"),
            dst: format!("n{dst}"),
            quality,
            age_s: age,
            samples: 10,
            ..pb::Pair::default()
        }
    }

    fn node(i: usize) -> pb::Node {
        pb::Node {
            name: format!("n{i}"),
            zone: format!("z{}", i % 2),
            ..pb::Node::default()
        }
    }

    /// A matrix of `nodes` nodes and the pairs `pairs` gives (src, dst,
    /// quality).
    fn matrix(version: u64, nodes: usize, pairs: &[(usize, usize, u8)]) -> pb::Matrix {
        let mut pairs: Vec<pb::Pair> = pairs
            .iter()
            .filter(|(s, d, _)| s != d && *s < nodes && *d < nodes)
            .map(|&(s, d, q)| pair(s, d, f64::from(q) / 255.0, version as f64))
            .collect();
        pairs.sort_by(|a, b| (&a.src, &a.dst).cmp(&(&b.src, &b.dst)));
        pairs.dedup_by(|a, b| (&a.src, &a.dst) == (&b.src, &b.dst));
        pb::Matrix {
            version,
            nodes: (0..nodes).map(node).collect(),
            pairs,
            ..pb::Matrix::default()
        }
    }

    /// Pairs as a comparable set, ages aside.
    fn figures(matrix: &pb::Matrix) -> Vec<(String, String, u64)> {
        let mut pairs: Vec<_> = matrix
            .pairs
            .iter()
            .map(|p| (p.src.clone(), p.dst.clone(), p.quality.to_bits()))
            .collect();
        pairs.sort();
        pairs
    }

    fn apply_all(
        follower: &mut Follower,
        updates: Vec<pb::MatrixUpdate>,
    ) -> Result<(), FollowError> {
        for update in updates {
            follower.apply(update)?;
        }
        Ok(())
    }

    proptest! {
        /// A follower that misses updates notices, starts over from a full
        /// state, and ends with what a fresh follower gets.
        #[test]
        fn a_follower_that_misses_deltas_resyncs_to_the_same_matrix(
            states in prop::collection::vec(
                (1usize..8, prop::collection::vec((0usize..8, 0usize..8, any::<u8>()), 0..30)),
                1..8,
            ),
            dropped in prop::collection::vec(any::<bool>(), 8),
        ) {
            let matrices: Vec<pb::Matrix> = states
                .iter()
                .enumerate()
                .map(|(i, (nodes, pairs))| matrix(i as u64 + 1, *nodes, pairs))
                .collect();
            let mut follower = Follower::new();
            apply_all(&mut follower, full_state(&matrices[0])).unwrap();
            for (i, window) in matrices.windows(2).enumerate() {
                let updates = delta(&window[0], &window[1]);
                if dropped[i] {
                    continue;
                }
                if apply_all(&mut follower, updates).is_err() {
                    // What a follower does on a gap: a new watch, which
                    // starts with the full state.
                    apply_all(&mut follower, full_state(&window[1])).unwrap();
                }
            }
            let last = matrices.last().unwrap();
            if follower.version() != last.version {
                // The last delta was dropped: nothing told the follower.
                // Its next update (the next delta) would show the gap.
                let next = pb::Matrix { version: last.version + 1, ..last.clone() };
                let gap = apply_all(&mut follower, delta(last, &next));
                prop_assert!(gap.is_err());
                apply_all(&mut follower, full_state(&next)).unwrap();
                prop_assert_eq!(figures(&follower.matrix()), figures(&next));
            } else {
                prop_assert_eq!(figures(&follower.matrix()), figures(last));
                prop_assert_eq!(&follower.matrix().nodes, &last.nodes);
            }
        }

        /// Pages of any filter put together are the filtered matrix.
        #[test]
        fn pages_add_up_to_the_matrix(
            nodes in 1usize..8,
            pairs in prop::collection::vec((0usize..8, 0usize..8, any::<u8>()), 0..40),
            page_size in 0usize..7,
        ) {
            let whole = matrix(3, nodes, &pairs);
            for filter in [MatrixFilter::All, MatrixFilter::Zone("z1"), MatrixFilter::Node("n0")] {
                let mut offset = 0;
                let mut got = Vec::new();
                let mut first_nodes = None;
                loop {
                    let (page, next) = page(&whole, filter, offset, page_size);
                    first_nodes.get_or_insert(page.nodes.clone());
                    got.extend(page.pairs);
                    match next {
                        Some(next) => { prop_assert!(next > offset); offset = next }
                        None => break,
                    }
                }
                let want: Vec<pb::Pair> = kept_pairs(&whole, filter).into_iter().cloned().collect();
                prop_assert_eq!(&got, &want);
                let names: Vec<String> = first_nodes.unwrap().into_iter().map(|n| n.name).collect();
                for p in &got {
                    prop_assert!(names.contains(&p.src) && names.contains(&p.dst));
                }
            }
        }
    }

    #[test]
    fn ages_alone_do_not_make_a_delta_and_pages_stay_under_the_limit() {
        let pairs: Vec<(usize, usize, u8)> = (0..8)
            .flat_map(|s| (0..8).map(move |d| (s, d, 7)))
            .collect();
        let old = matrix(1, 8, &pairs);
        let new = matrix(2, 8, &pairs);
        assert_ne!(old.pairs[0].age_s, new.pairs[0].age_s);
        let updates = delta(&old, &new);
        assert_eq!(updates.len(), 1);
        assert!(updates[0].pairs.is_empty() && updates[0].removed.is_empty());
        assert!(!updates[0].nodes_changed);

        // A large matrix: every page under the limit, and the pages' pairs
        // are all of them.
        let big = pb::Matrix {
            version: 1,
            nodes: (0..1000).map(node).collect(),
            pairs: (0..60_000)
                .map(|i| pb::Pair {
                    src: format!("node-{:05}", i / 60),
                    dst: format!("node-{:05}", i % 60),
                    rtt_median_ms: Some(0.2),
                    rtt_p99_ms: Some(0.4),
                    jitter_ms: Some(0.01),
                    loss_ratio: Some(0.0),
                    terms: Some(pb::Terms::default()),
                    ..pair(0, 1, 0.5, 1.0)
                })
                .collect(),
            ..pb::Matrix::default()
        };
        let pages = full_state(&big);
        assert!(pages.len() >= 3, "{} pages", pages.len());
        assert!(pages.iter().all(|p| p.encoded_len() <= 4 * 1024 * 1024));
        assert_eq!(pages.iter().map(|p| p.pairs.len()).sum::<usize>(), 60_000);
        assert!(pages.last().unwrap().last_page);
        assert!(pages[..pages.len() - 1].iter().all(|p| !p.last_page));
    }
}
