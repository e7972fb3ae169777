//! Matrices of any size on the wire, pure: pages that stay under every
//! message limit, the delta between two matrices, and the [`Follower`]
//! that rebuilds a matrix from a watch stream's updates.
//!
//! A 5,000-node cluster whose agents probe 64 peers each has 320,000 pairs,
//! about 32 MB as one message: far over gRPC's default limit of 4 MiB. So
//! GetMatrix answers in pages ([`page`]), and WatchMatrix sends a full
//! state in pages and then only what changed ([`full_state`], [`delta`]),
//! each message at most [`MAX_PAGE_BYTES`].

use std::collections::BTreeMap;

use netaware_core::UnixMillis;
use netaware_core::fault_marks::FaultMarks;
use netaware_core::matrix::{PairSummary, Throughput};
use netaware_core::network::Network;
use netaware_core::placement::{PlacementConfig, PlacementOverrides, Placer};
use netaware_core::score::Fallback;
use netaware_core::scored::ScoredMatrix;
use netaware_core::scored_pair::ScoredPair;
use prost::Message;

use crate::compact::{self, CompactError, Ends};
use crate::convert;
use crate::v1 as pb;

/// The most a page's pairs may take on the wire: well under the 4 MiB
/// that gRPC clients accept by default, with room for the nodes of a
/// first page.
pub const MAX_PAGE_BYTES: usize = 3 * 1024 * 1024;
/// The most pairs on one page.
pub const MAX_PAGE_PAIRS: usize = 20_000;
/// The most a watch stream's page takes (its first may hold more, when
/// the nodes alone do): small, so that what a stream holds while its
/// client is slow to read, a page or two, stays small too.
pub const WATCH_PAGE_BYTES: usize = 256 * 1024;

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

/// How a watch stream's pairs go on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairForm {
    /// As [`pb::Pair`]: every figure named and whole, readable alone.
    Full,
    /// As [`pb::CompactPair`] ([`compact`]): the same figures, bit for bit,
    /// in about a third of the bytes, for a follower that holds the nodes.
    Compact,
}

impl PairForm {
    /// The form a watch request asks for.
    pub fn of(request: &pb::WatchRequest) -> Self {
        if request.compact {
            PairForm::Compact
        } else {
            PairForm::Full
        }
    }
}

/// A scored matrix at a state version and instant: what GetMatrix's pages
/// and WatchMatrix's updates are cut from. Pairs go to the wire form as
/// each page is cut, so that the whole matrix is never held twice.
#[derive(Debug, Clone, Copy)]
pub struct Versioned<'a> {
    /// The scored matrix.
    pub scored: &'a ScoredMatrix,
    /// How the collector places on it.
    pub placement: &'a PlacementConfig,
    /// The open faults of its network that placement acts on.
    pub faults: &'a FaultMarks,
    /// The network it is the matrix of.
    pub network: &'a Network,
    /// The state version it was scored at.
    pub version: u64,
    /// When it was scored (Unix ms): ages on the wire count from here.
    pub at: UnixMillis,
}

impl Versioned<'_> {
    fn name(&self, node: usize) -> &str {
        self.scored.nodes()[node].info.name.as_str()
    }

    /// The wire form of pair `index`.
    fn pair(&self, index: usize) -> pb::Pair {
        convert::pair_to_wire(
            &self.scored.pairs()[index],
            self.network,
            |n| self.name(n),
            self.at,
        )
    }

    /// The compact form of pair `index` and its ends, the pair before it
    /// on the page at `before`; `fallback` is what the follower makes of
    /// the update's weights.
    fn compact_pair(
        &self,
        index: usize,
        before: Ends,
        fallback: &Fallback,
    ) -> (pb::CompactPair, Ends) {
        let pair = &self.scored.pairs()[index];
        // Its ends go as numbers: no names to copy.
        let wire = convert::pair_to_wire(pair, self.network, |_| "", self.at);
        let number = |node: usize| u32::try_from(node).unwrap_or(u32::MAX);
        let ends = Ends {
            src: number(pair.src),
            dst: number(pair.dst),
        };
        (compact::pack(&wire, ends, before, fallback), ends)
    }

    fn key(&self, pair: &ScoredPair) -> pb::PairKey {
        pb::PairKey {
            src: self.name(pair.src).to_owned(),
            dst: self.name(pair.dst).to_owned(),
        }
    }

    fn wire_nodes(&self, keep: impl Fn(usize) -> bool) -> Vec<pb::Node> {
        let nodes = self.scored.nodes().iter().enumerate();
        nodes
            .filter(|(i, _)| keep(*i))
            .map(|(_, node)| convert::node_to_wire(node))
            .collect()
    }
}

/// The indices of the pairs `filter` keeps, in order, and whether it keeps
/// each node: for a node, it and the other ends of its pairs.
fn kept(matrix: Versioned<'_>, filter: MatrixFilter<'_>) -> (Vec<usize>, Vec<bool>) {
    let scored = matrix.scored;
    let nodes = scored.nodes();
    let pairs = scored.pairs().iter().enumerate();
    match filter {
        MatrixFilter::All => ((0..scored.pairs().len()).collect(), vec![true; nodes.len()]),
        MatrixFilter::Zone(zone) => {
            let inside: Vec<bool> = nodes.iter().map(|n| n.info.zone == zone).collect();
            let kept = pairs
                .filter(|(_, p)| inside[p.src] && inside[p.dst])
                .map(|(i, _)| i)
                .collect();
            (kept, inside)
        }
        MatrixFilter::Node(node) => {
            let mut ends = vec![false; nodes.len()];
            let Some(me) = scored.index_of(node) else {
                return (Vec::new(), ends);
            };
            ends[me] = true;
            let kept = pairs
                .filter(|(_, p)| p.src == me || p.dst == me)
                .map(|(i, p)| {
                    ends[p.other_end(me)] = true;
                    i
                })
                .collect();
            (kept, ends)
        }
    }
}

/// Wire pairs (of either form) from `pairs` while they fit one page: at
/// most `max_pairs` (within 1 and [`MAX_PAGE_PAIRS`]) and `max_bytes` with
/// `taken` bytes of the page already used (by the nodes of a first page).
fn fill_page<P: Message>(
    pairs: impl Iterator<Item = P>,
    max_pairs: usize,
    max_bytes: usize,
    taken: usize,
) -> Vec<P> {
    let mut bytes = taken;
    let mut page = Vec::new();
    for pair in pairs.take(max_pairs.clamp(1, MAX_PAGE_PAIRS)) {
        // A field's tag and length prefix: a few bytes more than the pair.
        let size = pair.encoded_len() + 8;
        if !page.is_empty() && bytes + size > max_bytes {
            break;
        }
        bytes += size;
        page.push(pair);
    }
    page
}

/// The page of `matrix` that `filter` keeps from pair `offset`, at most
/// `page_size` pairs (0: the most a page holds), and the offset of the
/// next page if there is one. Nodes, weights and fallback come with the
/// first page only.
pub fn page(
    matrix: Versioned<'_>,
    filter: MatrixFilter<'_>,
    offset: usize,
    page_size: usize,
) -> (pb::Matrix, Option<usize>) {
    let (pairs, nodes) = kept(matrix, filter);
    let max_pairs = if page_size == 0 {
        MAX_PAGE_PAIRS
    } else {
        page_size
    };
    let start = offset.min(pairs.len());
    let first = offset == 0;
    let fallback = convert::settings_to_wire(matrix.scored.fallback(), matrix.placement);
    let nodes = if first {
        matrix.wire_nodes(|i| nodes[i])
    } else {
        Vec::new()
    };
    let taken = nodes.iter().map(|n| n.encoded_len() + 8).sum();
    let page_pairs = fill_page(
        pairs[start..].iter().map(|&i| matrix.pair(i)),
        max_pairs,
        MAX_PAGE_BYTES,
        taken,
    );
    let end = start + page_pairs.len();
    let page = pb::Matrix {
        version: matrix.version,
        generated_unix_ms: matrix.at,
        nodes,
        pairs: page_pairs,
        weights: fallback.weights.filter(|_| first),
        fallback_penalty: if first { fallback.penalty } else { 0.0 },
        references: fallback.references.filter(|_| first),
        placement: fallback.placement.filter(|_| first),
        placement_faults: if first {
            convert::fault_marks_to_wire(matrix.faults, matrix.network)
        } else {
            Vec::new()
        },
        next_page_token: String::new(),
        // The collector's to fill in, on the first page.
        collector_version: String::new(),
        followers: Vec::new(),
    };
    (page, (end < pairs.len()).then_some(end))
}

/// Whether two pairs carry the same figures on the wire, ages aside: ages
/// move on with the clock, and sending every pair each second for that
/// alone would make every delta the whole matrix.
fn same_figures(a: &ScoredPair, b: &ScoredPair) -> bool {
    // Every field named, none skipped by `..`: a field added must be
    // thought about here.
    let ScoredPair {
        src: _,
        dst: _,
        summary,
        age_ms: _,
        stale,
        terms,
        quality,
    } = a;
    let PairSummary {
        rtt_median_ms,
        rtt_p99_ms,
        jitter_ms,
        loss_ratio,
        samples,
        last_end: _,
        throughput,
        one_way_loss_ratio,
        probe,
        filtered,
    } = summary;
    // A goodput's time goes on the wire as an age.
    let timeless = |t: Option<Throughput>| t.map(|t| Throughput { at: 0, ..t });
    let other = &b.summary;
    *rtt_median_ms == other.rtt_median_ms
        && *rtt_p99_ms == other.rtt_p99_ms
        && *jitter_ms == other.jitter_ms
        && *loss_ratio == other.loss_ratio
        && *samples == other.samples
        && timeless(*throughput) == timeless(other.throughput)
        && *one_way_loss_ratio == other.one_way_loss_ratio
        && *probe == other.probe
        && *filtered == other.filtered
        && *stale == b.stale
        && *terms == b.terms
        && *quality == b.quality
}

/// What a removed pair's key takes on a page, about: page sizes in bytes
/// become counts of keys by it.
const REMOVED_KEY_BYTES: usize = 64;

/// Which of a matrix's pairs an update carries.
#[derive(Debug, Clone)]
enum PairList {
    /// All of them (a full state): no list to hold.
    All(usize),
    /// These (a delta's changed pairs).
    Listed(Vec<usize>),
}

impl PairList {
    fn len(&self) -> usize {
        match self {
            Self::All(n) => *n,
            Self::Listed(list) => list.len(),
        }
    }

    fn get(&self, i: usize) -> usize {
        match self {
            Self::All(_) => i,
            Self::Listed(list) => list[i],
        }
    }
}

/// An update cut into pages, each made when it is taken ([`Pages::next`]):
/// what waits to be sent is the list of pairs, never their wire form, so
/// that a stream whose client reads slowly holds a page at a time.
///
/// The nodes and the estimates' settings ride on the first page; removed
/// keys come next, then the pairs, spread over as many pages as they need.
#[derive(Debug, Clone)]
pub struct Pages {
    /// The update's head; its nodes and settings leave with the first page.
    head: pb::MatrixUpdate,
    pairs: PairList,
    removed: Vec<pb::PairKey>,
    next_pair: usize,
    next_removed: usize,
    next_page: u32,
    page_bytes: usize,
    finished: bool,
    /// The form of the pairs, with what a compact pair's quality is
    /// checked against: the weights as the follower will read them.
    form: PairForm,
    fallback: Fallback,
}

impl Pages {
    fn new(
        mut head: pb::MatrixUpdate,
        pairs: PairList,
        removed: Vec<pb::PairKey>,
        page_bytes: usize,
        (form, network): (PairForm, &Network),
    ) -> Self {
        if form == PairForm::Compact {
            head.network = convert::network_to_wire(network);
        }
        let fallback = convert::fallback_from_wire(convert::WireSettings::of_update(&head));
        Self {
            form,
            fallback,
            head,
            pairs,
            removed,
            next_pair: 0,
            next_removed: 0,
            next_page: 0,
            page_bytes,
            finished: false,
        }
    }

    /// The next page, cut from `matrix` (the one the pages were made for);
    /// `None` once the last page was taken.
    pub fn next(&mut self, matrix: Versioned<'_>) -> Option<pb::MatrixUpdate> {
        if self.finished {
            return None;
        }
        let first = self.next_page == 0;
        let mut page = if first {
            // The nodes and settings once, on the first page only.
            let light = light_head(&self.head);
            std::mem::replace(&mut self.head, light)
        } else {
            self.head.clone()
        };
        if self.next_removed < self.removed.len() {
            let keys = (self.page_bytes / REMOVED_KEY_BYTES).max(1);
            let end = (self.next_removed + keys).min(self.removed.len());
            page.removed = self.removed[self.next_removed..end].to_vec();
            self.next_removed = end;
        } else {
            let taken = if first { page.encoded_len() } else { 0 };
            let (pairs, fallback) = (&self.pairs, &self.fallback);
            let indices = (self.next_pair..pairs.len()).map(|i| pairs.get(i));
            self.next_pair += match self.form {
                PairForm::Full => {
                    let wire = indices.map(|i| matrix.pair(i));
                    page.pairs = fill_page(wire, MAX_PAGE_PAIRS, self.page_bytes, taken);
                    page.pairs.len()
                }
                PairForm::Compact => {
                    // Each pair's ends are steps from the one before it on
                    // the page: a pair cut but left for the next page is
                    // never sent on this one, so the steps stay right.
                    let mut before = Ends::default();
                    let wire = indices.map(|i| {
                        let (pair, ends) = matrix.compact_pair(i, before, fallback);
                        before = ends;
                        pair
                    });
                    page.compact_pairs = fill_page(wire, MAX_PAGE_PAIRS, self.page_bytes, taken);
                    page.compact_pairs.len()
                }
            };
        }
        page.page = self.next_page;
        self.next_page = self.next_page.saturating_add(1);
        self.finished =
            self.next_removed >= self.removed.len() && self.next_pair >= self.pairs.len();
        page.last_page = self.finished;
        Some(page)
    }

    /// Every page, cut from `matrix`.
    pub fn all(mut self, matrix: Versioned<'_>) -> Vec<pb::MatrixUpdate> {
        std::iter::from_fn(|| self.next(matrix)).collect()
    }
}

/// A head without its large parts, for the pages after the first. Every
/// field named: a field added must be thought about here.
fn light_head(head: &pb::MatrixUpdate) -> pb::MatrixUpdate {
    pb::MatrixUpdate {
        version: head.version,
        base_version: head.base_version,
        page: head.page,
        last_page: head.last_page,
        generated_unix_ms: head.generated_unix_ms,
        nodes_changed: head.nodes_changed,
        nodes: Vec::new(),
        pairs: Vec::new(),
        removed: Vec::new(),
        weights: None,
        fallback_penalty: head.fallback_penalty,
        references: None,
        placement: None,
        placement_faults: Vec::new(),
        compact_pairs: Vec::new(),
        network: head.network.clone(),
    }
}

fn head(
    matrix: Versioned<'_>,
    base_version: u64,
    nodes: Option<Vec<pb::Node>>,
) -> pb::MatrixUpdate {
    let fallback = convert::settings_to_wire(matrix.scored.fallback(), matrix.placement);
    pb::MatrixUpdate {
        version: matrix.version,
        base_version,
        page: 0,
        last_page: false,
        generated_unix_ms: matrix.at,
        nodes_changed: nodes.is_some(),
        nodes: nodes.unwrap_or_default(),
        pairs: Vec::new(),
        removed: Vec::new(),
        weights: fallback.weights,
        fallback_penalty: fallback.penalty,
        references: fallback.references,
        placement: fallback.placement,
        placement_faults: convert::fault_marks_to_wire(matrix.faults, matrix.network),
        compact_pairs: Vec::new(),
        network: String::new(),
    }
}

/// A whole matrix as a watch update: base version 0, in pages of at most
/// `page_bytes` (the first may hold more when its nodes alone do), its
/// pairs in `form`.
pub fn full_state(matrix: Versioned<'_>, page_bytes: usize, form: PairForm) -> Pages {
    Pages::new(
        head(matrix, 0, Some(matrix.wire_nodes(|_| true))),
        PairList::All(matrix.scored.pairs().len()),
        Vec::new(),
        page_bytes,
        (form, matrix.network),
    )
}

/// What turns `old` into `new` as a watch update, in pages of at most
/// `page_bytes` cut from `new`: the pairs that are new or changed (in
/// `form`), those gone, and the nodes when they changed.
pub fn delta(old: Versioned<'_>, new: Versioned<'_>, page_bytes: usize, form: PairForm) -> Pages {
    let (before, after) = (old.scored, new.scored);
    // Two snapshots number their nodes differently once nodes come or go.
    let in_before: Vec<Option<usize>> = after
        .nodes()
        .iter()
        .map(|n| before.index_of(&n.info.name))
        .collect();
    let in_after: Vec<Option<usize>> = before
        .nodes()
        .iter()
        .map(|n| after.index_of(&n.info.name))
        .collect();
    let changed: Vec<usize> = after
        .pairs()
        .iter()
        .enumerate()
        .filter(|(_, pair)| {
            in_before[pair.src]
                .zip(in_before[pair.dst])
                .and_then(|(src, dst)| before.pair(src, dst))
                .is_none_or(|was| !same_figures(was, pair))
        })
        .map(|(i, _)| i)
        .collect();
    let removed: Vec<pb::PairKey> = before
        .pairs()
        .iter()
        .filter(|pair| {
            in_after[pair.src]
                .zip(in_after[pair.dst])
                .and_then(|(src, dst)| after.pair(src, dst))
                .is_none()
        })
        .map(|pair| old.key(pair))
        .collect();
    let nodes = new.wire_nodes(|_| true);
    let nodes = (old.wire_nodes(|_| true) != nodes).then_some(nodes);
    Pages::new(
        head(new, old.version, nodes),
        PairList::Listed(changed),
        removed,
        page_bytes,
        (form, new.network),
    )
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
    /// A compact pair that does not unpack.
    #[error(transparent)]
    Compact(#[from] CompactError),
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
    settings: convert::WireSettings,
    /// The faults placement acts on, as the last update carried them.
    faults: Vec<pb::Fault>,
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
        self.settings = convert::WireSettings::of_update(first);
        self.faults.clone_from(&first.placement_faults);
        let network = first.network.clone();
        // The nodes, settings and removals are read: `first` is no longer
        // borrowed past here.
        let fallback = convert::fallback_from_wire(self.settings);
        for page in pages {
            for pair in page.pairs {
                self.pairs
                    .insert((pair.src.clone(), pair.dst.clone()), pair);
            }
            let mut before = Ends::default();
            for compact in &page.compact_pairs {
                let unpacked = compact::unpack(compact, before, &self.nodes, &network, &fallback);
                let pair = match unpacked {
                    Ok((pair, ends)) => {
                        before = ends;
                        pair
                    }
                    Err(err) => {
                        // Half an update is no matrix: hold none, and start
                        // over from the full state of a new watch.
                        *self = Self::default();
                        return Err(err.into());
                    }
                };
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
            weights: self.settings.weights,
            fallback_penalty: self.settings.penalty,
            references: self.settings.references,
            placement: self.settings.placement,
            placement_faults: self.faults.clone(),
            collector_version: String::new(),
            followers: Vec::new(),
            next_page_token: String::new(),
        }
    }

    /// The scored matrix it holds, as the collector scored it.
    pub fn scored(&self) -> ScoredMatrix {
        convert::scored_from_wire(
            &self.nodes,
            self.pairs.values(),
            convert::fallback_from_wire(self.settings),
        )
    }

    /// How the collector places on it (the defaults until it said).
    pub fn placement(&self) -> PlacementConfig {
        convert::placement_from_wire(self.settings.placement)
    }

    /// The faults the collector places by on it (none until it said).
    pub fn faults(&self) -> FaultMarks {
        convert::fault_marks_from_wire(&self.faults)
    }

    /// What places on it as the collector does: its matrix, settings and
    /// faults, with `overrides` applied to the settings.
    pub fn placer(&self, overrides: &PlacementOverrides) -> Placer {
        Placer::new(self.scored(), overrides.apply(self.placement())).with_faults(self.faults())
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

    /// The collector's form of a wire matrix, to cut updates and pages from.
    fn scored(matrix: &pb::Matrix) -> ScoredMatrix {
        convert::matrix_from_wire(matrix)
    }

    /// Settings other than the defaults: a follower must read them from
    /// the first page.
    const PLACEMENT: PlacementConfig = PlacementConfig {
        loss_threshold: 0.2,
        out_of_zone_factor: 0.5,
        min_goodput_fraction: 0.0,
        strict_zone: true,
    };

    static PRIMARY: std::sync::LazyLock<Network> = std::sync::LazyLock::new(Network::primary);
    static NO_FAULTS: FaultMarks = FaultMarks { marks: Vec::new() };

    fn versioned<'a>(matrix: &pb::Matrix, scored: &'a ScoredMatrix) -> Versioned<'a> {
        Versioned {
            scored,
            placement: &PLACEMENT,
            faults: &NO_FAULTS,
            network: &PRIMARY,
            version: matrix.version,
            at: matrix.generated_unix_ms,
        }
    }

    /// The pairs `filter` keeps of a wire matrix, worked out on the wire
    /// form: what the pages must add up to.
    fn kept_on_the_wire(
        matrix: &pb::Matrix,
        filter: MatrixFilter<'_>,
    ) -> Vec<(String, String, u64)> {
        let zone_of = |name: &str| {
            matrix
                .nodes
                .iter()
                .find(|n| n.name == name)
                .map(|n| n.zone.as_str())
        };
        let keep = |p: &pb::Pair| match filter {
            MatrixFilter::All => true,
            MatrixFilter::Node(node) => p.src == node || p.dst == node,
            MatrixFilter::Zone(zone) => {
                zone_of(&p.src) == Some(zone) && zone_of(&p.dst) == Some(zone)
            }
        };
        let kept = pb::Matrix {
            pairs: matrix.pairs.iter().filter(|p| keep(p)).cloned().collect(),
            ..pb::Matrix::default()
        };
        figures(&kept)
    }

    /// A full state's pages of the usual size, all at once.
    fn full_state(matrix: Versioned<'_>) -> Vec<pb::MatrixUpdate> {
        full_state_in(matrix, PairForm::Full)
    }

    fn full_state_in(matrix: Versioned<'_>, form: PairForm) -> Vec<pb::MatrixUpdate> {
        super::full_state(matrix, MAX_PAGE_BYTES, form).all(matrix)
    }

    /// A delta's pages of the usual size, all at once.
    fn delta(old: Versioned<'_>, new: Versioned<'_>) -> Vec<pb::MatrixUpdate> {
        delta_in(old, new, PairForm::Full)
    }

    fn delta_in(old: Versioned<'_>, new: Versioned<'_>, form: PairForm) -> Vec<pb::MatrixUpdate> {
        super::delta(old, new, MAX_PAGE_BYTES, form).all(new)
    }

    /// The pairs of a wire matrix in their bytes, in order: what two reads
    /// of the same matrix share bit for bit.
    fn pair_bytes(pairs: &[pb::Pair]) -> Vec<Vec<u8>> {
        let mut pairs: Vec<&pb::Pair> = pairs.iter().collect();
        pairs.sort_by(|a, b| (&a.src, &a.dst).cmp(&(&b.src, &b.dst)));
        pairs.iter().map(|pair| pair.encode_to_vec()).collect()
    }

    /// A matrix's node count and pairs (src, dst, quality), as generated.
    type State = (usize, Vec<(usize, usize, u8)>);

    /// Matrices of versions 1, 2, ... from what each holds (its nodes and
    /// pairs), with their scored forms.
    fn versions(states: &[State]) -> (Vec<pb::Matrix>, Vec<ScoredMatrix>) {
        let matrices: Vec<pb::Matrix> = states
            .iter()
            .enumerate()
            .map(|(i, (nodes, pairs))| matrix(i as u64 + 1, *nodes, pairs))
            .collect();
        let scored = matrices.iter().map(scored).collect();
        (matrices, scored)
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
            compact in any::<bool>(),
        ) {
            let form = if compact { PairForm::Compact } else { PairForm::Full };
            let full_state = |at| full_state_in(at, form);
            let delta = |old, new| delta_in(old, new, form);
            let (matrices, scored) = versions(&states);
            let at = |i: usize| versioned(&matrices[i], &scored[i]);
            let mut follower = Follower::new();
            apply_all(&mut follower, full_state(at(0))).unwrap();
            for i in 1..matrices.len() {
                let updates = delta(at(i - 1), at(i));
                if dropped[i - 1] {
                    continue;
                }
                if apply_all(&mut follower, updates).is_err() {
                    // What a follower does on a gap: a new watch, which
                    // starts with the full state.
                    apply_all(&mut follower, full_state(at(i))).unwrap();
                }
            }
            let last = matrices.len() - 1;
            let want = &matrices[last];
            if follower.version() != want.version {
                // The last delta was dropped: nothing told the follower.
                // Its next update (the next delta) would show the gap.
                let next = Versioned { version: want.version + 1, ..at(last) };
                let gap = apply_all(&mut follower, delta(at(last), next));
                prop_assert!(gap.is_err());
                apply_all(&mut follower, full_state(next)).unwrap();
                prop_assert_eq!(follower.version(), want.version + 1);
            }
            prop_assert_eq!(figures(&follower.matrix()), figures(want));
            let names = |nodes: &[pb::Node]| nodes.iter().map(|n| (n.name.clone(), n.zone.clone())).collect::<Vec<_>>();
            prop_assert_eq!(names(&follower.matrix().nodes), names(&want.nodes));
            prop_assert_eq!(follower.placement(), PLACEMENT);
        }

        /// A follower of a compact watch holds, pair for pair and bit for
        /// bit, what a fresh read of the same version gives.
        #[test]
        fn a_compact_follower_holds_what_a_fresh_read_gives(
            states in prop::collection::vec(
                (1usize..8, prop::collection::vec((0usize..8, 0usize..8, any::<u8>()), 0..30)),
                1..5,
            ),
        ) {
            let (matrices, scored) = versions(&states);
            let at = |i: usize| versioned(&matrices[i], &scored[i]);
            let mut follower = Follower::new();
            apply_all(&mut follower, full_state_in(at(0), PairForm::Compact)).unwrap();
            for i in 1..matrices.len() {
                apply_all(&mut follower, delta_in(at(i - 1), at(i), PairForm::Compact)).unwrap();
                // Ages move on in a fresh read; a delta leaves a pair whose
                // figures did not change at the age it was sent with.
                let fresh = full_state(at(i));
                let mut reader = Follower::new();
                apply_all(&mut reader, fresh).unwrap();
                let ageless = |pairs: Vec<pb::Pair>| pairs.into_iter().map(|p| pb::Pair { age_s: 0.0, ..p }).collect::<Vec<_>>();
                prop_assert_eq!(
                    pair_bytes(&ageless(follower.matrix().pairs)),
                    pair_bytes(&ageless(reader.matrix().pairs))
                );
            }
            // A full state of the last version: every figure, ages included.
            let last = matrices.len() - 1;
            let mut compact = Follower::new();
            apply_all(&mut compact, full_state_in(at(last), PairForm::Compact)).unwrap();
            let (fresh, _) = page(at(last), MatrixFilter::All, 0, 0);
            prop_assert_eq!(pair_bytes(&compact.matrix().pairs), pair_bytes(&fresh.pairs));
            let rebuilt = compact.scored();
            prop_assert_eq!(rebuilt.pairs(), scored[last].pairs());
        }

        /// Pages of any filter put together are the filtered matrix.
        #[test]
        fn pages_add_up_to_the_matrix(
            nodes in 1usize..8,
            pairs in prop::collection::vec((0usize..8, 0usize..8, any::<u8>()), 0..40),
            page_size in 0usize..7,
        ) {
            let whole = matrix(3, nodes, &pairs);
            let scored = scored(&whole);
            for filter in [MatrixFilter::All, MatrixFilter::Zone("z1"), MatrixFilter::Node("n0")] {
                let mut offset = 0;
                let mut got = Vec::new();
                let mut first_nodes = None;
                loop {
                    let (page, next) = page(versioned(&whole, &scored), filter, offset, page_size);
                    first_nodes.get_or_insert(page.nodes.clone());
                    got.extend(page.pairs);
                    match next {
                        Some(next) => { prop_assert!(next > offset); offset = next }
                        None => break,
                    }
                }
                let got_all = pb::Matrix { pairs: got.clone(), ..pb::Matrix::default() };
                prop_assert_eq!(figures(&got_all), kept_on_the_wire(&whole, filter));
                let names: Vec<String> = first_nodes.unwrap().into_iter().map(|n| n.name).collect();
                for p in &got {
                    prop_assert!(names.contains(&p.src) && names.contains(&p.dst));
                }
            }
        }
    }

    #[test]
    fn a_follower_places_by_the_faults_each_update_carries_and_drops_those_gone() {
        use netaware_core::fault_kind::FaultMetric;
        use netaware_core::fault_marks::FaultMark;
        let pairs: Vec<(usize, usize, u8)> = (0..4)
            .flat_map(|s| (0..4).map(move |d| (s, d, 200)))
            .collect();
        let (one, two) = (matrix(1, 4, &pairs), matrix(2, 4, &pairs));
        let (one_scored, two_scored) = (scored(&one), scored(&two));
        let faults = FaultMarks {
            marks: vec![FaultMark::Node {
                node: node(2).name,
                metric: FaultMetric::Loss,
                value: 0.02,
                baseline: 0.0,
            }],
        };
        let with_faults = Versioned {
            faults: &faults,
            ..versioned(&one, &one_scored)
        };
        let mut follower = Follower::new();
        apply_all(&mut follower, full_state(with_faults)).unwrap();
        assert_eq!(follower.faults(), faults);
        assert_eq!(
            follower.placer(&PlacementOverrides::default()).faults(),
            &faults
        );
        assert_eq!(follower.matrix().placement_faults.len(), 1);
        // The page a reader gets carries them as well.
        let (first, _) = page(with_faults, MatrixFilter::All, 0, 0);
        assert_eq!(
            convert::fault_marks_from_wire(&first.placement_faults),
            faults
        );
        // The fault cleared: the next delta carries none, and the follower
        // holds none.
        let cleared = delta(with_faults, versioned(&two, &two_scored));
        apply_all(&mut follower, cleared).unwrap();
        assert_eq!(follower.faults(), FaultMarks::default());
    }

    /// A node gone from the middle of the list renumbers those after it:
    /// a delta from what was sent still names the pairs gone by their old
    /// ends and sends only the pair whose figures changed.
    #[test]
    fn a_delta_after_a_node_leaves_names_the_pairs_gone_and_the_one_changed() {
        let all = |q02: u8| -> Vec<(usize, usize, u8)> {
            (0..3)
                .flat_map(|s| (0..3).map(move |d| (s, d, if (s, d) == (0, 2) { q02 } else { 9 })))
                .collect()
        };
        let old = matrix(1, 3, &all(9));
        // n1 gone: n2 is now the second node.
        let mut new = matrix(1, 3, &all(200));
        new.version = 2;
        new.nodes.remove(1);
        new.pairs.retain(|p| p.src != "n1" && p.dst != "n1");
        let (old_scored, new_scored) = (scored(&old), scored(&new));
        assert_eq!(new_scored.index_of("n2"), Some(1));
        let updates = delta(versioned(&old, &old_scored), versioned(&new, &new_scored));
        let changed: Vec<(&str, &str)> = updates
            .iter()
            .flat_map(|u| &u.pairs)
            .map(|p| (p.src.as_str(), p.dst.as_str()))
            .collect();
        assert_eq!(changed, [("n0", "n2")]);
        let mut removed: Vec<(&str, &str)> = updates
            .iter()
            .flat_map(|u| &u.removed)
            .map(|k| (k.src.as_str(), k.dst.as_str()))
            .collect();
        removed.sort_unstable();
        assert_eq!(
            removed,
            [("n0", "n1"), ("n1", "n0"), ("n1", "n2"), ("n2", "n1")]
        );
        assert!(updates[0].nodes_changed);
    }

    #[test]
    fn ages_alone_do_not_make_a_delta_and_pages_stay_under_the_limit() {
        let pairs: Vec<(usize, usize, u8)> = (0..8)
            .flat_map(|s| (0..8).map(move |d| (s, d, 7)))
            .collect();
        let old = matrix(1, 8, &pairs);
        let new = matrix(2, 8, &pairs);
        assert_ne!(old.pairs[0].age_s, new.pairs[0].age_s);
        let (old_scored, new_scored) = (scored(&old), scored(&new));
        let updates = delta(versioned(&old, &old_scored), versioned(&new, &new_scored));
        assert_eq!(updates.len(), 1);
        assert!(updates[0].pairs.is_empty() && updates[0].removed.is_empty());
        assert!(!updates[0].nodes_changed);

        // A large matrix: every page under the limit (the first with 5,000
        // nodes and their coordinates), and the pages' pairs are all of them.
        let big = pb::Matrix {
            version: 1,
            nodes: (0..5000)
                .map(|i| pb::Node {
                    name: format!("node-{i:05}"),
                    coordinate: Some(pb::Coordinate {
                        vec: vec![12.345_678_9 + i as f64; 8],
                        error: 0.3,
                        height: 0.05,
                        adjustment: -0.01,
                    }),
                    ..node(i)
                })
                .collect(),
            pairs: (0..60_000)
                .map(|i| pb::Pair {
                    src: format!("node-{:05}", i / 60),
                    dst: format!("node-{:05}", (i / 60 + 1 + i % 60) % 1000),
                    rtt_median_ms: Some(0.2),
                    rtt_p99_ms: Some(0.4),
                    jitter_ms: Some(0.01),
                    loss_ratio: Some(0.001),
                    one_way_loss_ratio: Some(0.001),
                    throughput_bps: Some(9.123e9),
                    throughput_retransmits: Some(12),
                    throughput_tcp_rtt_ms: Some(0.25),
                    throughput_age_s: Some(1234.5),
                    terms: Some(pb::Terms {
                        delay: 0.8,
                        loss: 0.9,
                        throughput: 0.7,
                        delay_source: 1,
                        loss_source: 1,
                        throughput_source: 1,
                        dead: false,
                    }),
                    ..pair(0, 1, 0.5, 1.0)
                })
                .collect(),
            ..pb::Matrix::default()
        };
        let big_scored = scored(&big);
        let pages = full_state(versioned(&big, &big_scored));
        assert!(pages.len() >= 3, "{} pages", pages.len());
        let sizes: Vec<usize> = pages.iter().map(Message::encoded_len).collect();
        assert!(
            sizes.iter().all(|&size| size <= MAX_PAGE_BYTES),
            "{sizes:?}"
        );
        assert_eq!(pages.iter().map(|p| p.pairs.len()).sum::<usize>(), 60_000);
        assert!(pages.last().unwrap().last_page);
        assert!(pages[..pages.len() - 1].iter().all(|p| !p.last_page));

        // A watch stream's pages: the same pairs, every page after the
        // first under the smaller size, numbered in order.
        let at = versioned(&big, &big_scored);
        let small = super::full_state(at, WATCH_PAGE_BYTES, PairForm::Full).all(at);
        assert!(small.len() > 4 * pages.len(), "{} pages", small.len());
        assert!(
            small[1..]
                .iter()
                .all(|p| p.encoded_len() <= WATCH_PAGE_BYTES && p.nodes.is_empty()),
            "later pages small, without the nodes"
        );
        assert_eq!(small[0].nodes.len(), 5000);
        assert_eq!(small.iter().map(|p| p.pairs.len()).sum::<usize>(), 60_000);
        assert!(small.iter().enumerate().all(|(i, p)| p.page as usize == i));
        let mut follower = Follower::new();
        apply_all(&mut follower, small).unwrap();
        assert_eq!(follower.matrix().pairs.len(), 60_000);
    }
}
