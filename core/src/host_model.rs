//! An additive model of the measured RTTs: a pair's RTT is its zone
//! pair's base plus each end's own delay (its host's stack, its NIC, its
//! link to the fabric), fitted by least squares to the fresh medians
//! (conjugate gradients: one walk over the pairs an iteration).
//!
//! It holds no geometry, so it cannot tell racks apart inside a zone, but
//! neither does it need the triangle inequality, which RTTs between zones
//! often break (fibre that detours): where a few nodes probe few peers each,
//! network coordinates wander as the peer sets rotate while this model
//! stays put, and it still sees a slow host, which is slow on every pair
//! it is in. [`crate::residuals::Residuals`] uses it for the pairs of a
//! zone pair where it predicts that zone pair's measured pairs better than
//! the coordinates do.

use foldhash::{HashMap, HashMapExt};

use crate::coordinates::End;

/// Most iterations of the fit (conjugate gradients on the least-squares
/// problem): each costs one walk over the pairs, and the fit has one
/// unknown per node and per zone pair, reached well within this on the lab
/// and on a simulated fabric of 5,000 nodes.
const MAX_ITERATIONS: usize = 100;

/// The fit stops once its gradient is this small against where it began.
const TOLERANCE: f64 = 1e-12;

/// A fitted model.
#[derive(Debug, Clone, Default)]
pub struct HostModel {
    zones: usize,
    /// By zone pair, either way (`min * zones + max`).
    bases: Vec<Option<f64>>,
    /// By node index; absent for a node in no measured pair.
    delays: HashMap<usize, f64>,
    /// By zone pair: the measured pairs and the mean square of what the
    /// model misses on them.
    misses: Vec<(u32, f64)>,
}

/// The index of the zone pair {a, b}, whichever way.
fn undirected(zones: usize, a: usize, b: usize) -> usize {
    a.min(b) * zones + a.max(b)
}

/// The least-squares solution of `rows` · x = `rtts`, where each row sums
/// its three unknowns (a base and two delays): conjugate gradients on the
/// normal equations (CGLS) from zero, which reach the solution of least
/// norm, so that what the pairs cannot tell apart (a zone's delays one way,
/// its bases the other) is split evenly rather than at random.
fn least_squares(rows: &[[usize; 3]], rtts: &[f64], unknowns: usize) -> Vec<f64> {
    let times = |x: &[f64]| -> Vec<f64> {
        rows.iter()
            .map(|row| row.iter().map(|&i| x[i]).sum())
            .collect()
    };
    let transposed_times = |y: &[f64]| -> Vec<f64> {
        let mut out = vec![0.0; unknowns];
        for (row, value) in rows.iter().zip(y) {
            for &i in row {
                out[i] += value;
            }
        }
        out
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut x = vec![0.0; unknowns];
    let mut residual = rtts.to_vec();
    let mut gradient = transposed_times(&residual);
    let mut direction = gradient.clone();
    let start = dot(&gradient, &gradient);
    let mut gamma = start;
    for _ in 0..MAX_ITERATIONS {
        if gamma <= TOLERANCE * start || gamma == 0.0 {
            break;
        }
        let q = times(&direction);
        let qq = dot(&q, &q);
        if qq == 0.0 {
            break;
        }
        let alpha = gamma / qq;
        for (xi, di) in x.iter_mut().zip(&direction) {
            *xi += alpha * di;
        }
        for (ri, qi) in residual.iter_mut().zip(&q) {
            *ri -= alpha * qi;
        }
        gradient = transposed_times(&residual);
        let next = dot(&gradient, &gradient);
        let beta = next / gamma;
        for (di, gi) in direction.iter_mut().zip(&gradient) {
            *di = gi + beta * *di;
        }
        gamma = next;
    }
    x
}

impl HostModel {
    /// The model of these measured pairs (ends and median RTT in ms) over
    /// `zones` zones. Pairs naming a zone out of range or an RTT that is
    /// not a finite positive figure are left out.
    pub fn fit(zones: usize, pairs: &[(End, End, f64)]) -> Self {
        let pairs: Vec<(End, End, f64)> = pairs
            .iter()
            .copied()
            .filter(|(a, b, rtt)| {
                a.zone < zones
                    && b.zone < zones
                    && a.node != b.node
                    && rtt.is_finite()
                    && *rtt > 0.0
            })
            .collect();
        // Unknowns: a base per zone pair seen, then a delay per node seen.
        let mut slots: HashMap<usize, usize> = HashMap::new();
        let mut nodes: HashMap<usize, usize> = HashMap::with_capacity(pairs.len());
        let rows: Vec<[usize; 3]> = pairs
            .iter()
            .map(|(a, b, _)| {
                let next = slots.len();
                let base = *slots
                    .entry(undirected(zones, a.zone, b.zone))
                    .or_insert(next);
                let mut node = |n: usize| {
                    let next = nodes.len();
                    *nodes.entry(n).or_insert(next)
                };
                [base, node(a.node), node(b.node)]
            })
            .collect();
        let bases_count = slots.len();
        let rows: Vec<[usize; 3]> = rows
            .into_iter()
            .map(|[base, a, b]| [base, bases_count + a, bases_count + b])
            .collect();
        let rtts: Vec<f64> = pairs.iter().map(|p| p.2).collect();
        let solution = least_squares(&rows, &rtts, bases_count + nodes.len());
        let mut bases = vec![None; zones * zones];
        for (slot, index) in &slots {
            bases[*slot] = Some(solution[*index]);
        }
        let delays: HashMap<usize, f64> = nodes
            .iter()
            .map(|(node, index)| (*node, solution[bases_count + index]))
            .collect();
        let mut misses = vec![(0u32, 0.0); zones * zones];
        let mut model = Self {
            zones,
            bases,
            delays,
            misses: Vec::new(),
        };
        for (a, b, rtt) in &pairs {
            if let Some(predicted) = model.predict(*a, *b) {
                let slot = &mut misses[undirected(zones, a.zone, b.zone)];
                slot.0 += 1;
                slot.1 += (rtt - predicted).powi(2);
            }
        }
        for slot in &mut misses {
            if slot.0 > 0 {
                slot.1 /= f64::from(slot.0);
            }
        }
        model.misses = misses;
        model
    }

    /// The RTT between `a` and `b` (ms): their zone pair's base plus each
    /// one's delay (0 for a node in no measured pair); `None` where their
    /// zone pair has no measured pair.
    pub fn predict(&self, a: End, b: End) -> Option<f64> {
        if a.zone >= self.zones || b.zone >= self.zones {
            return None;
        }
        let base = self.bases[undirected(self.zones, a.zone, b.zone)]?;
        let delay = |node: usize| self.delays.get(&node).copied().unwrap_or(0.0);
        let rtt = base + delay(a.node) + delay(b.node);
        // A model of a few pairs can go below what any of them measured.
        Some(rtt.max(base / 10.0).max(f64::MIN_POSITIVE))
    }

    /// A node's own delay (ms); `None` for a node in no measured pair.
    pub fn delay(&self, node: usize) -> Option<f64> {
        self.delays.get(&node).copied()
    }

    /// The measured pairs of zone pair {a, b} and the mean square of what
    /// the model misses on them (ms²).
    pub fn misses(&self, a: usize, b: usize) -> Option<(u32, f64)> {
        (a < self.zones && b < self.zones)
            .then(|| self.misses[undirected(self.zones, a, b)])
            .filter(|(count, _)| *count > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(node: usize, zone: usize) -> End {
        End { node, zone }
    }

    #[test]
    fn bases_and_delays_are_found_from_sparse_pairs() {
        // Two zones 5 ms apart, 0.2 ms inside; node 4 (zone 1) is slow by
        // 1 ms on every pair. Each node in two or three pairs.
        let delay = |n: usize| if n == 4 { 1.0 } else { 0.05 };
        let zone = |n: usize| n / 3;
        let truth =
            |a: usize, b: usize| (if zone(a) == zone(b) { 0.1 } else { 4.9 }) + delay(a) + delay(b);
        let measured = [
            (0, 1),
            (1, 2),
            (2, 0),
            (3, 4),
            (4, 5),
            (0, 3),
            (1, 4),
            (2, 5),
        ];
        let pairs: Vec<(End, End, f64)> = measured
            .iter()
            .map(|&(a, b)| (end(a, zone(a)), end(b, zone(b)), truth(a, b)))
            .collect();
        let model = HostModel::fit(2, &pairs);
        // Pairs nobody measured: the slow node's and another.
        for (a, b) in [(0, 4), (2, 4), (1, 5), (3, 5)] {
            let predicted = model.predict(end(a, zone(a)), end(b, zone(b))).unwrap();
            assert!(
                (predicted - truth(a, b)).abs() < 0.02,
                "{a} -> {b}: {predicted} vs {}",
                truth(a, b)
            );
        }
        let (count, miss) = model.misses(0, 1).unwrap();
        assert_eq!(count, 3);
        assert!(miss < 1e-4, "{miss}");
        assert_eq!(model.predict(end(0, 0), end(9, 7)), None);
        assert_eq!(model.misses(1, 7), None);
    }

    #[test]
    fn nonsense_is_left_out() {
        let pairs = [
            (end(0, 0), end(1, 0), f64::NAN),
            (end(0, 0), end(1, 5), 1.0),
            (end(0, 0), end(0, 0), 1.0),
            (end(0, 0), end(1, 0), -2.0),
        ];
        let model = HostModel::fit(1, &pairs);
        assert_eq!(model.predict(end(0, 0), end(1, 0)), None);
    }
}
