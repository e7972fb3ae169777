//! The greedy selection of the components that explain a network's links
//! (see the [module docs](super)), and its two models: binomial for loss,
//! Gaussian over each class's noise for what [`super::classes`] judges
//! against a class of links (delay, goodput).

use std::collections::HashMap;

use super::input::{FaultInput, FaultLink};
use super::{Component, Evidence, FaultConfig, FaultMetric, Finding, MAX_EVIDENCE, Subject};
use crate::stats::lower_median;

/// How likely the links are with one more component at some level.
pub(super) trait Model {
    /// The best level of a component over `links`, given what the
    /// components chosen so far explain of each link, and the gain in
    /// log-likelihood of adding it at that level.
    fn fit(&self, links: &[usize], explained: &[f64]) -> (f64, f64);
    /// What a link's explained part becomes with `level` added.
    fn add(&self, explained: f64, level: f64) -> f64;
    /// ... and with `level` taken away.
    fn remove(&self, explained: f64, level: f64) -> f64;
}

/// The chosen components: (index into the covers, level, gain given the
/// others).
pub(super) type Chosen = Vec<(usize, f64, f64)>;

/// Refit passes after each change: levels settle within a few.
const REFIT_PASSES: usize = 3;

/// The components that explain the links, by greedy forward selection and
/// backward elimination.
pub(super) fn select(
    model: &impl Model,
    covers: &[(Component, Vec<usize>)],
    link_count: usize,
    threshold: f64,
    min_level: f64,
    max: usize,
) -> Chosen {
    let mut explained = vec![0.0; link_count];
    let mut chosen: Chosen = Vec::new();
    // A component that cannot pass alone will not pass once others explain
    // part of its links: only those that can are candidates.
    let mut candidates: Vec<usize> = (0..covers.len())
        .filter(|&i| {
            let (level, gain) = model.fit(&covers[i].1, &explained);
            level >= min_level && gain >= threshold
        })
        .collect();
    while chosen.len() < max {
        let best = candidates
            .iter()
            .map(|&i| (i, model.fit(&covers[i].1, &explained)))
            .filter(|(_, (level, _))| *level >= min_level)
            .max_by(|a, b| a.1.1.total_cmp(&b.1.1).then(b.0.cmp(&a.0)));
        let Some((i, (level, gain))) = best.filter(|(_, (_, gain))| *gain >= threshold) else {
            break;
        };
        for &link in &covers[i].1 {
            explained[link] = model.add(explained[link], level);
        }
        chosen.push((i, level, gain));
        candidates.retain(|&c| c != i);
        refit(model, covers, &mut explained, &mut chosen);
    }
    // Drop what the others explain without it, one at a time.
    loop {
        let weakest = chosen
            .iter()
            .enumerate()
            .filter(|(_, (_, level, gain))| *gain < threshold || *level < min_level)
            .min_by(|a, b| a.1.2.total_cmp(&b.1.2))
            .map(|(k, _)| k);
        let Some(k) = weakest else { break };
        let (i, level, _) = chosen.remove(k);
        for &link in &covers[i].1 {
            explained[link] = model.remove(explained[link], level);
        }
        refit(model, covers, &mut explained, &mut chosen);
    }
    chosen
}

/// Fits each chosen level again given the others, and its gain.
fn refit(
    model: &impl Model,
    covers: &[(Component, Vec<usize>)],
    explained: &mut [f64],
    chosen: &mut Chosen,
) {
    for _ in 0..REFIT_PASSES {
        for entry in chosen.iter_mut() {
            let (i, level, _) = *entry;
            let links = &covers[i].1;
            for &link in links {
                explained[link] = model.remove(explained[link], level);
            }
            let (level, gain) = model.fit(links, explained);
            for &link in links {
                explained[link] = model.add(explained[link], level);
            }
            *entry = (i, level, gain);
        }
    }
}

/// The binomial model of loss: a link's probes are lost independently at
/// `1 - (1 - b)(1 - e)(1 - l)`.
struct LossModel<'a> {
    links: &'a [FaultLink],
    background: f64,
}

/// The most loss a component is fitted at (so that removing it again is
/// always defined).
const MAX_LEVEL: f64 = 0.99;

impl Model for LossModel<'_> {
    fn fit(&self, links: &[usize], explained: &[f64]) -> (f64, f64) {
        let (mut lost, mut expected, mut room, mut sent) = (0.0, 0.0, 0.0, 0.0);
        for &i in links {
            let link = &self.links[i];
            let q0 = self.add(self.background, explained[i]);
            let n = link.sent as f64;
            lost += link.lost as f64;
            sent += n;
            expected += n * q0;
            room += n * (1.0 - q0);
        }
        if room <= 0.0 {
            return (0.0, 0.0);
        }
        let level = ((lost - expected) / room).clamp(0.0, MAX_LEVEL);
        if level == 0.0 {
            return (0.0, 0.0);
        }
        let mut gain = (sent - lost) * (1.0 - level).ln();
        for &i in links {
            let link = &self.links[i];
            if link.lost > 0 {
                let q0 = self.add(self.background, explained[i]);
                let q = self.add(q0, level);
                gain += link.lost as f64 * (q / q0).ln();
            }
        }
        (level, gain)
    }

    fn add(&self, explained: f64, level: f64) -> f64 {
        1.0 - (1.0 - explained) * (1.0 - level)
    }

    fn remove(&self, explained: f64, level: f64) -> f64 {
        (1.0 - (1.0 - explained) / (1.0 - level)).max(0.0)
    }
}

/// Least background loss assumed: a network that lost nothing at all
/// still loses a probe now and then.
const MIN_BACKGROUND: f64 = 1e-4;

/// The network's background loss: the pooled loss of its less lossy half
/// of links (faults may be on most of a small network's links; a clean
/// link shows what the network loses without them).
fn background_loss(links: &[FaultLink]) -> f64 {
    let mut ratios: Vec<(f64, &FaultLink)> = links
        .iter()
        .filter(|l| l.sent > 0)
        .map(|l| (l.lost as f64 / l.sent as f64, l))
        .collect();
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    let kept = &ratios[..ratios.len().div_ceil(2)];
    let (lost, sent) = kept.iter().fold((0u64, 0u64), |(lost, sent), (_, l)| {
        (lost + l.lost, sent + l.sent)
    });
    if sent == 0 {
        return MIN_BACKGROUND;
    }
    (lost as f64 / sent as f64).max(MIN_BACKGROUND)
}

/// The components whose loss explains the links.
pub fn loss_faults(input: &FaultInput, config: &FaultConfig) -> Vec<Finding> {
    let background = background_loss(&input.links);
    let model = LossModel {
        links: &input.links,
        background,
    };
    let covers = input.covers(|l| l.sent > 0);
    let chosen = select(
        &model,
        &covers,
        input.links.len(),
        config.loss_gain,
        config.min_loss,
        config.max_faults,
    );
    let findings = chosen
        .into_iter()
        .map(|(i, level, gain)| {
            let (component, links) = &covers[i];
            let mut evidence: Vec<Evidence> = links
                .iter()
                .map(|&l| {
                    let link = &input.links[l];
                    Evidence {
                        src: link.src,
                        dst: link.dst,
                        value: link.lost as f64 / link.sent as f64,
                        baseline: background,
                    }
                })
                .collect();
            worst_first(&mut evidence, |e| e.value);
            Finding {
                subject: Subject::Component(*component),
                metric: FaultMetric::Loss,
                value: level,
                baseline: background,
                confidence: confidence(gain, config.loss_gain),
                evidence,
            }
        })
        .collect();
    pairs_to_nodes(findings)
}

/// Bad paths at one node that are taken for the node itself.
pub const PAIRS_FOR_A_NODE: usize = 3;

/// Findings with every node that ends [`PAIRS_FOR_A_NODE`] or more pair
/// findings named as the node instead: the fewest components again, where
/// the node's links disagree too much for one level to fit them all (a
/// fault that is starting shows on some of its links' windows first).
pub(super) fn pairs_to_nodes(mut findings: Vec<Finding>) -> Vec<Finding> {
    loop {
        let mut ends: HashMap<usize, Vec<usize>> = HashMap::new();
        for (k, finding) in findings.iter().enumerate() {
            if let Subject::Component(Component::Pair(a, b)) = finding.subject {
                ends.entry(a).or_default().push(k);
                ends.entry(b).or_default().push(k);
            }
        }
        let Some((node, pairs)) = ends
            .into_iter()
            .filter(|(_, pairs)| pairs.len() >= PAIRS_FOR_A_NODE)
            .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(&a.0)))
        else {
            return findings;
        };
        let taken: Vec<Finding> = pairs.iter().map(|&k| findings[k].clone()).collect();
        let mut kept = Vec::with_capacity(findings.len());
        for (k, finding) in findings.into_iter().enumerate() {
            if !pairs.contains(&k) {
                kept.push(finding);
            }
        }
        findings = kept;
        let already = findings
            .iter()
            .any(|f| f.subject == Subject::Component(Component::Node(node)));
        if !already {
            let mut values: Vec<f64> = taken.iter().map(|f| f.value).collect();
            let mut baselines: Vec<f64> = taken.iter().map(|f| f.baseline).collect();
            let mut evidence: Vec<Evidence> =
                taken.iter().flat_map(|f| f.evidence.clone()).collect();
            let metric = taken[0].metric;
            worst_first(&mut evidence, |e| e.value - e.baseline);
            findings.push(Finding {
                subject: Subject::Component(Component::Node(node)),
                metric,
                value: lower_median(&mut values).unwrap_or(0.0),
                baseline: lower_median(&mut baselines).unwrap_or(0.0),
                confidence: taken.iter().map(|f| f.confidence).fold(0.0, f64::max),
                evidence,
            });
        }
    }
}

/// `1 - exp(-gain / threshold)`: 0.63 at the threshold, 0.95 at three times it.
pub(super) fn confidence(gain: f64, threshold: f64) -> f64 {
    (1.0 - (-gain / threshold).exp()).clamp(0.0, 1.0)
}

pub(super) fn worst_first(evidence: &mut Vec<Evidence>, by: impl Fn(&Evidence) -> f64) {
    evidence.sort_by(|a, b| {
        by(b)
            .total_cmp(&by(a))
            .then((a.src, a.dst).cmp(&(b.src, b.dst)))
    });
    evidence.truncate(MAX_EVIDENCE);
}

/// The Gaussian model of a figure judged against its link's class (delay,
/// goodput): a link's figure is its class's plus what its components add,
/// with its class's noise.
pub(super) struct GaussianModel {
    /// Each link's figure beyond its class's, 0 for links left out.
    pub excess: Vec<f64>,
    /// Each link's noise.
    pub noise: Vec<f64>,
}

impl Model for GaussianModel {
    fn fit(&self, links: &[usize], explained: &[f64]) -> (f64, f64) {
        let mut left: Vec<f64> = links
            .iter()
            .map(|&i| self.excess[i] - explained[i])
            .collect();
        let level = lower_median(&mut left).unwrap_or(0.0).max(0.0);
        if level == 0.0 {
            return (0.0, 0.0);
        }
        // Each link's part, with its excess held to twice the level so that
        // one far link does not carry a component on its own.
        let gain = links
            .iter()
            .map(|&i| {
                let x = (self.excess[i] - explained[i]).min(2.0 * level);
                level * (2.0 * x - level) / (2.0 * self.noise[i] * self.noise[i])
            })
            .sum();
        (level, gain)
    }

    fn add(&self, explained: f64, level: f64) -> f64 {
        explained + level
    }

    fn remove(&self, explained: f64, level: f64) -> f64 {
        explained - level
    }
}
