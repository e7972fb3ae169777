//! Grey failures that start and clear during a run: a NIC that drops or
//! slows its traffic (bad optics, a port renegotiated to a lower speed),
//! a rack's uplink that does (a bad cable or port between the rack switch
//! and the spine). Nothing goes down: traffic still flows, worse, which
//! is what a scheduler that reads only NotReady and taints never sees.
//!
//! Rates come from one published record, taken as the base and scaled:
//! Meta's Llama 3 405B run on 16,384 H100 GPUs (2,048 eight-GPU nodes)
//! logged 35 "network switch and cable" interruptions in 54 days (8.4% of
//! 419; datacenterdynamics.com's report of the paper's table), about
//! 3.2e-4 per node and day. Those were failures that stopped the job; grey
//! ones are at least as common and last "for hours" (NVIDIA NVSentinel's
//! documentation), so the default mean duration is four hours. At that
//! base rate a simulated trace of a few hours on 2,048 nodes sees almost
//! none, and the evaluation says so; [`GreySpec::scaled`] runs the same
//! kinds at a multiple of it.
//!
//! Pure: a schedule is drawn once per seed and read at any time.

use rand::Rng;

/// Grey failures of one kind's component per component and day, from the
/// Llama 3 record above (35 per 2,048 nodes per 54 days).
pub const BASE_PER_NODE_DAY: f64 = 35.0 / 2_048.0 / 54.0;

/// What fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Component {
    /// A node's NIC (node index).
    Nic(usize),
    /// A rack's uplink to the spine, both ways (rack index).
    RackUplink(usize),
}

/// What a failure does to the traffic over its component.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Effect {
    /// Loses this share of the packets.
    Loss(f64),
    /// Carries only this share of its rate.
    Slow(f64),
}

/// One grey failure.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GreyFault {
    /// What failed.
    pub component: Component,
    /// What it does.
    pub effect: Effect,
    /// When it starts (s from the trace's start).
    pub start_s: f64,
    /// When it clears.
    pub end_s: f64,
}

impl GreyFault {
    /// Whether it holds at `t_s`.
    pub fn active_at(&self, t_s: f64) -> bool {
        self.start_s <= t_s && t_s < self.end_s
    }
}

/// How often each kind fails.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GreySpec {
    /// NIC failures per node and day.
    pub nic_per_node_day: f64,
    /// Uplink failures per rack and day.
    pub uplink_per_rack_day: f64,
    /// Mean duration (s), exponential.
    pub mean_duration_s: f64,
}

impl GreySpec {
    /// No failures.
    pub const NONE: GreySpec = GreySpec {
        nic_per_node_day: 0.0,
        uplink_per_rack_day: 0.0,
        mean_duration_s: 4.0 * 3_600.0,
    };

    /// The base rate times `factor`: NICs at the record's rate per node,
    /// a rack's uplink at the same rate per rack (a rack switch's uplinks
    /// are as many cables and ports as a few nodes' NICs).
    pub fn scaled(factor: f64) -> Self {
        Self {
            nic_per_node_day: BASE_PER_NODE_DAY * factor,
            uplink_per_rack_day: BASE_PER_NODE_DAY * factor,
            ..Self::NONE
        }
    }
}

/// Draws the failures of `nodes` NICs and `racks` uplinks over `span_s`
/// (Poisson arrivals, exponential durations). Half of each kind lose 2%
/// of their packets, half carry a quarter of their rate.
pub fn draw(
    spec: &GreySpec,
    nodes: usize,
    racks: usize,
    span_s: f64,
    rng: &mut impl Rng,
) -> Vec<GreyFault> {
    let mut faults = Vec::new();
    let kinds = [
        (
            nodes,
            spec.nic_per_node_day,
            Component::Nic as fn(usize) -> Component,
        ),
        (racks, spec.uplink_per_rack_day, Component::RackUplink),
    ];
    for (count, per_day, component) in kinds {
        let rate_per_s = per_day * count as f64 / 86_400.0;
        if rate_per_s <= 0.0 || count == 0 {
            continue;
        }
        let mut t = 0.0;
        loop {
            t += exponential(rng, 1.0 / rate_per_s);
            if t >= span_s {
                break;
            }
            let effect = if rng.random_bool(0.5) {
                Effect::Loss(0.02)
            } else {
                Effect::Slow(0.25)
            };
            faults.push(GreyFault {
                component: component(rng.random_range(0..count)),
                effect,
                start_s: t,
                end_s: t + exponential(rng, spec.mean_duration_s),
            });
        }
    }
    faults.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    faults
}

fn exponential(rng: &mut impl Rng, mean: f64) -> f64 {
    -(1.0 - rng.random::<f64>()).ln() * mean
}

/// The moments at which any of `faults` starts or clears, in order.
pub fn changes(faults: &[GreyFault]) -> Vec<f64> {
    let mut times: Vec<f64> = faults.iter().flat_map(|f| [f.start_s, f.end_s]).collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    times
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn failures_come_at_their_rate_and_last_their_mean() {
        let mut rng = StdRng::seed_from_u64(7);
        // 1,000 nodes at 0.1 a day for 100 days: about 10,000 NIC faults.
        let spec = GreySpec {
            nic_per_node_day: 0.1,
            uplink_per_rack_day: 0.0,
            mean_duration_s: 3_600.0,
        };
        let faults = draw(&spec, 1_000, 50, 100.0 * 86_400.0, &mut rng);
        assert!((9_500..10_500).contains(&faults.len()), "{}", faults.len());
        assert!(
            faults
                .iter()
                .all(|f| matches!(f.component, Component::Nic(n) if n < 1_000))
        );
        let mean = faults.iter().map(|f| f.end_s - f.start_s).sum::<f64>() / faults.len() as f64;
        assert!((3_400.0..3_800.0).contains(&mean), "{mean}");
        let lossy = faults
            .iter()
            .filter(|f| matches!(f.effect, Effect::Loss(_)))
            .count();
        assert!((4_500..5_500).contains(&lossy), "{lossy}");
        assert!(faults.windows(2).all(|w| w[0].start_s <= w[1].start_s));
        assert!(draw(&GreySpec::NONE, 1_000, 50, 86_400.0, &mut rng).is_empty());
    }

    #[test]
    fn the_base_rate_is_the_records() {
        // 35 per 2,048 nodes per 54 days.
        assert!((BASE_PER_NODE_DAY * 2_048.0 * 54.0 - 35.0).abs() < 1e-9);
        let fault = GreyFault {
            component: Component::RackUplink(3),
            effect: Effect::Slow(0.25),
            start_s: 10.0,
            end_s: 20.0,
        };
        assert!(!fault.active_at(9.9) && fault.active_at(10.0) && !fault.active_at(20.0));
        assert_eq!(changes(&[fault, fault]), [10.0, 20.0]);
    }
}
