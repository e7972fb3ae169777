//! The passes that judge a link's figure against its class of links: delay
//! (RTT above the class's) and goodput (throughput tests below the
//! class's). A class is a zone pair, in one block or across blocks: what
//! links of that class measure without a fault is what most of them
//! measure.
//!
//! Both passes fit on a scale where faults add up: delay in ms; goodput as
//! `-ln(goodput)`, so that a component that halves the goodput adds
//! `ln 2` to every link over it (a slow NIC caps a flow, and one cap per
//! path is the common case; two caps on one path read as their product,
//! not their minimum).

use std::collections::HashMap;

use super::input::{FaultInput, FaultLink};
use super::select::{GaussianModel, confidence, pairs_to_nodes, select};
use super::{Component, Evidence, FaultConfig, FaultMetric, Finding, MAX_EVIDENCE, Subject};
use crate::stats::{lower_median, nearest_rank};

/// Least delay noise a class is taken to have (ms): below it, RTT medians
/// differ by the hosts' own delays, not by noise.
const MIN_NOISE_MS: f64 = 0.01;
/// Least delay noise as a share of the class's RTT.
const MIN_NOISE_SHARE: f64 = 0.02;
/// Least goodput noise, on the log scale (about 10%): one throughput test
/// shares its link with whatever else runs there, so two tests of one
/// clean link differ by more than two RTT medians.
pub const MIN_GOODPUT_NOISE: f64 = 0.1;
/// Scales a median absolute deviation to a Gaussian's standard deviation.
const MAD_TO_SIGMA: f64 = 1.4826;

/// Which class a link belongs to: its zone pair, and whether both ends sit
/// in one block.
type LinkClass = (usize, usize, bool);

/// A link's figure on a pass's scale, if it has one that counts.
type LinkFigure = Box<dyn Fn(&FaultLink) -> Option<f64>>;

/// A figure judged against its class.
struct ClassMetric {
    metric: FaultMetric,
    /// The link's figure on the scale where faults add, if it has one that
    /// counts.
    scaled: LinkFigure,
    /// Back from that scale to the figure people read.
    unscaled: fn(f64) -> f64,
    /// Least noise of a class, given its baseline on the scale.
    min_noise: fn(f64) -> f64,
    /// How a class's baseline and noise are read from its figures.
    baseline: ClassBaseline,
    /// Whether a component may be named for it.
    candidate: fn(Component) -> bool,
    /// Fewest links with a figure a component is named on.
    min_links: usize,
    /// The log-likelihood a fault must add.
    gain: f64,
    /// The least level named, on the scale.
    min_level: f64,
    /// The finding's value from its level and its baseline's scaled value.
    value: fn(level: f64, scaled_baseline: f64) -> f64,
}

/// How a class's baseline and noise are read from its figures (on the
/// scale where faults add, higher is worse).
#[derive(Clone, Copy)]
enum ClassBaseline {
    /// The median, and the median absolute deviation around it: probes
    /// measure every link of a class, and a fault holds few of them.
    Median,
    /// The best quarter's edge (the lower quartile), and the spread of the
    /// better half around it, of the class's figures without one block's:
    /// the block whose leaving out reads best. Throughput tests are few,
    /// and a slow uplink holds most of a small zone's tests across blocks
    /// (two thirds with three blocks, and by chance more than three
    /// quarters), so that the quartile of them all would be the fault's
    /// own figure; without the slow uplink's block, none of them is.
    BestQuarterLeavingOutABlock,
}

/// Fewest figures a class keeps when one block is left out of it; with
/// fewer, the whole class is read.
const MIN_FIGURES_LEFT: usize = 3;

/// A link's figure on a pass's scale and the blocks of its two ends.
#[derive(Clone, Copy)]
struct ClassFigure {
    value: f64,
    blocks: [Option<usize>; 2],
}

impl ClassBaseline {
    /// (baseline, spread) of `figures`, which are not empty.
    fn read(self, figures: &[ClassFigure]) -> (f64, f64) {
        let sorted = |keep: &dyn Fn(&ClassFigure) -> bool| -> Vec<f64> {
            let mut kept: Vec<f64> = figures
                .iter()
                .filter(|f| keep(f))
                .map(|f| f.value)
                .collect();
            kept.sort_by(f64::total_cmp);
            kept
        };
        match self {
            Self::Median => {
                let all = sorted(&|_| true);
                let base = nearest_rank(&all, 0.5);
                (base, spread_around(base, &all))
            }
            Self::BestQuarterLeavingOutABlock => {
                let mut blocks: Vec<usize> =
                    figures.iter().flat_map(|f| f.blocks).flatten().collect();
                blocks.sort_unstable();
                blocks.dedup();
                let best_quarter = |kept: &[f64]| {
                    let base = nearest_rank(kept, 0.25);
                    (base, spread_around(base, &kept[..kept.len().div_ceil(2)]))
                };
                blocks
                    .iter()
                    .map(|&left_out| sorted(&|f| !f.blocks.contains(&Some(left_out))))
                    .filter(|kept| kept.len() >= MIN_FIGURES_LEFT)
                    .map(|kept| best_quarter(&kept))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .unwrap_or_else(|| best_quarter(&sorted(&|_| true)))
            }
        }
    }
}

/// The median absolute deviation of `near` around `base`, as a Gaussian's
/// standard deviation.
fn spread_around(base: f64, near: &[f64]) -> f64 {
    let mut deviations: Vec<f64> = near.iter().map(|x| (x - base).abs()).collect();
    MAD_TO_SIGMA * lower_median(&mut deviations).unwrap_or(0.0)
}

/// RTT (ms) above the class's. A zone link's delay is its class's (a slow
/// zone link cannot be told from a far zone): it is not a candidate.
fn delay(config: &FaultConfig) -> ClassMetric {
    ClassMetric {
        metric: FaultMetric::Delay,
        scaled: Box::new(|link: &FaultLink| link.rtt_ms),
        unscaled: |rtt| rtt,
        min_noise: |median| MIN_NOISE_MS.max(MIN_NOISE_SHARE * median),
        baseline: ClassBaseline::Median,
        candidate: |component| !matches!(component, Component::ZoneLink(..)),
        min_links: 1,
        gain: config.delay_gain,
        min_level: config.min_delay_ms,
        value: |level, _| level,
    }
}

/// Goodput below the class's, as `-ln(bit/s)`. Zone links are left out as
/// for delay (and tests run inside zones by default); so are single pairs:
/// a pair holds one test's figure, and one slow test is as likely a busy
/// link as a bad one.
fn goodput(config: &FaultConfig) -> ClassMetric {
    let window_ms = config.goodput_window_ms;
    ClassMetric {
        metric: FaultMetric::Goodput,
        scaled: Box::new(move |link: &FaultLink| {
            link.goodput
                .filter(|g| g.bps > 0.0 && g.age_ms <= window_ms)
                .map(|g| -g.bps.ln())
        }),
        unscaled: |scaled| (-scaled).exp(),
        min_noise: |_| MIN_GOODPUT_NOISE,
        baseline: ClassBaseline::BestQuarterLeavingOutABlock,
        candidate: |component| matches!(component, Component::Node(_) | Component::BlockUplink(_)),
        min_links: config.min_goodput_tests,
        gain: config.goodput_gain,
        min_level: -(1.0 - config.min_goodput_drop.clamp(0.0, 0.99)).ln(),
        value: |level, scaled_baseline| (-(scaled_baseline + level)).exp(),
    }
}

/// Each node's block for classes: its own if it has a block-mate, else the
/// block of its zone it is nearest to by RTT (a slow node is a block of its
/// own in the measured topology, and would otherwise be its own baseline).
fn class_blocks(input: &FaultInput, left_out: &[bool]) -> Vec<Option<usize>> {
    let sizes = input.block_sizes();
    let mut near: HashMap<(usize, usize), Vec<f64>> = HashMap::new();
    for link in input
        .links
        .iter()
        .filter(|l| !left_out[l.src] && !left_out[l.dst])
    {
        let Some(rtt) = link.rtt_ms else { continue };
        for (me, other) in [(link.src, link.dst), (link.dst, link.src)] {
            let (a, b) = (&input.nodes[me], &input.nodes[other]);
            if let Some(block) = b.block.filter(|&k| a.zone == b.zone && sizes[k] >= 2) {
                near.entry((me, block)).or_default().push(rtt);
            }
        }
    }
    let mut nearest: HashMap<usize, (f64, usize)> = HashMap::new();
    for ((node, block), mut rtts) in near {
        let median = lower_median(&mut rtts).unwrap_or(f64::INFINITY);
        let best = nearest.entry(node).or_insert((median, block));
        if (median, block) < *best {
            *best = (median, block);
        }
    }
    input
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| match node.block {
            Some(block) if sizes[block] >= 2 => Some(block),
            _ => nearest.get(&i).map(|&(_, block)| block),
        })
        .collect()
}

/// The components whose added delay explains the links, leaving out the
/// links of `left_out_nodes` (mislabelled nodes, whose links would read
/// as inflation).
pub fn delay_faults(
    input: &FaultInput,
    config: &FaultConfig,
    left_out_nodes: &[usize],
) -> Vec<Finding> {
    class_faults(input, &delay(config), config.max_faults, left_out_nodes)
}

/// The components whose low goodput explains the throughput tests,
/// leaving out the links of `left_out_nodes` (mislabelled nodes: their
/// class would be wrong).
pub fn goodput_faults(
    input: &FaultInput,
    config: &FaultConfig,
    left_out_nodes: &[usize],
) -> Vec<Finding> {
    class_faults(input, &goodput(config), config.max_faults, left_out_nodes)
}

fn class_faults(
    input: &FaultInput,
    metric: &ClassMetric,
    max_faults: usize,
    left_out_nodes: &[usize],
) -> Vec<Finding> {
    let mut left_out = vec![false; input.nodes.len()];
    for &node in left_out_nodes {
        left_out[node] = true;
    }
    let blocks = class_blocks(input, &left_out);
    let class_of = |link: &FaultLink| -> LinkClass {
        let (a, b) = (&input.nodes[link.src], &input.nodes[link.dst]);
        let same_block = blocks[link.src].is_some() && blocks[link.src] == blocks[link.dst];
        (a.zone.min(b.zone), a.zone.max(b.zone), same_block)
    };
    let scaled = |link: &FaultLink| {
        (metric.scaled)(link)
            .filter(|x| x.is_finite() && !left_out[link.src] && !left_out[link.dst])
    };
    let mut by_class: HashMap<LinkClass, Vec<ClassFigure>> = HashMap::new();
    for link in &input.links {
        if let Some(value) = scaled(link) {
            by_class
                .entry(class_of(link))
                .or_default()
                .push(ClassFigure {
                    value,
                    blocks: [blocks[link.src], blocks[link.dst]],
                });
        }
    }
    let classes: HashMap<LinkClass, (f64, f64)> = by_class
        .into_iter()
        .map(|(class, figures)| {
            let (base, spread) = metric.baseline.read(&figures);
            (class, (base, spread.max((metric.min_noise)(base.abs()))))
        })
        .collect();
    let baseline = |link: &FaultLink| classes.get(&class_of(link)).copied();
    let (excess, noise): (Vec<f64>, Vec<f64>) = input
        .links
        .iter()
        .map(|link| match (scaled(link), baseline(link)) {
            (Some(x), Some((median, noise))) => (x - median, noise),
            _ => (0.0, 1.0),
        })
        .unzip();
    let model = GaussianModel { excess, noise };
    let covers: Vec<(Component, Vec<usize>)> = input
        .covers(|l| scaled(l).is_some())
        .into_iter()
        .filter(|(component, links)| {
            (metric.candidate)(*component) && links.len() >= metric.min_links
        })
        .collect();
    let chosen = select(
        &model,
        &covers,
        input.links.len(),
        metric.gain,
        metric.min_level,
        max_faults,
    );
    let findings = chosen
        .into_iter()
        .map(|(i, level, gain)| {
            let (component, links) = &covers[i];
            let mut scaled_bases = Vec::with_capacity(links.len());
            // (how far beyond its class on the scale, the evidence)
            let mut shown: Vec<(f64, Evidence)> = links
                .iter()
                .filter_map(|&l| {
                    let link = &input.links[l];
                    let x = scaled(link)?;
                    let (base, _) = baseline(link)?;
                    scaled_bases.push(base);
                    let evidence = Evidence {
                        src: link.src,
                        dst: link.dst,
                        value: (metric.unscaled)(x),
                        baseline: (metric.unscaled)(base),
                    };
                    Some((x - base, evidence))
                })
                .collect();
            let scaled_base = lower_median(&mut scaled_bases).unwrap_or(0.0);
            shown.sort_by(|a, b| {
                b.0.total_cmp(&a.0)
                    .then((a.1.src, a.1.dst).cmp(&(b.1.src, b.1.dst)))
            });
            let evidence = shown
                .into_iter()
                .take(MAX_EVIDENCE)
                .map(|(_, evidence)| evidence)
                .collect();
            Finding {
                subject: Subject::Component(*component),
                metric: metric.metric,
                value: (metric.value)(level, scaled_base),
                baseline: (metric.unscaled)(scaled_base),
                confidence: confidence(gain, metric.gain),
                evidence,
            }
        })
        .collect();
    pairs_to_nodes(findings)
}
