//! Shared links: the flows of the jobs that cross zones (or racks) share
//! each zone's (rack's) uplink (flows leaving it) and downlink (flows
//! entering it) max-min fairly, as long TCP flows roughly do; each flow
//! also stops at its own cap (its path's goodput). Pure: capacities and
//! flows in, rates out.

/// One flow: the shared resources it crosses and its own cap.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    /// Indices into the capacities: the uplinks it leaves by and the
    /// downlinks it enters by.
    pub resources: Vec<usize>,
    /// The most it could carry alone, bit/s.
    pub cap_bps: f64,
}

/// Each flow's max-min fair rate (progressive filling): every flow grows
/// at the same pace until it reaches its cap or one of its resources is
/// full; then the others go on.
pub fn max_min_fair(flows: &[Flow], capacities: &[f64]) -> Vec<f64> {
    let mut rates = vec![0.0; flows.len()];
    let mut left: Vec<f64> = capacities.iter().map(|c| c.max(0.0)).collect();
    let mut growing: Vec<bool> = flows.iter().map(|f| f.cap_bps > 0.0).collect();
    // Each round freezes at least one flow or fills at least one resource.
    for _ in 0..=flows.len() + capacities.len() {
        let mut users = vec![0_usize; capacities.len()];
        for (flow, _) in flows.iter().zip(&growing).filter(|(_, g)| **g) {
            for &r in &flow.resources {
                users[r] += 1;
            }
        }
        let by_resource = users
            .iter()
            .zip(&left)
            .filter(|(users, _)| **users > 0)
            .map(|(users, left)| left / *users as f64)
            .fold(f64::INFINITY, f64::min);
        let by_cap = flows
            .iter()
            .zip(&rates)
            .zip(&growing)
            .filter(|(_, g)| **g)
            .map(|((flow, rate), _)| flow.cap_bps - rate)
            .fold(f64::INFINITY, f64::min);
        let step = by_resource.min(by_cap);
        if !step.is_finite() {
            break;
        }
        for (i, flow) in flows.iter().enumerate() {
            if growing[i] {
                rates[i] += step;
                for &r in &flow.resources {
                    left[r] -= step;
                }
            }
        }
        let full: Vec<bool> = left
            .iter()
            .zip(capacities)
            .map(|(left, cap)| *left <= cap * 1e-12)
            .collect();
        for (i, flow) in flows.iter().enumerate() {
            if rates[i] >= flow.cap_bps * (1.0 - 1e-12) || flow.resources.iter().any(|&r| full[r]) {
                growing[i] = false;
            }
        }
        if !growing.iter().any(|g| *g) {
            break;
        }
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn flows_share_a_full_link_and_a_capped_flow_leaves_room() {
        // Three flows out of resource 0 (capacity 30) into 1, 2, 3.
        let flows = [
            Flow {
                resources: vec![0, 1],
                cap_bps: 100.0,
            },
            Flow {
                resources: vec![0, 2],
                cap_bps: 100.0,
            },
            Flow {
                resources: vec![0, 3],
                cap_bps: 4.0,
            },
        ];
        let rates = max_min_fair(&flows, &[30.0, 100.0, 100.0, 100.0]);
        assert_eq!(rates, vec![13.0, 13.0, 4.0]);
        // Alone, a flow gets its cap.
        assert_eq!(max_min_fair(&flows[..1], &[30.0, 100.0]), vec![30.0]);
        assert_eq!(
            max_min_fair(&flows[2..], &[30.0, 100.0, 100.0, 100.0]),
            vec![4.0]
        );
    }

    proptest! {
        #[test]
        fn no_resource_overflows_and_no_flow_passes_its_cap(
            flows in prop::collection::vec((0_usize..4, 0_usize..4, 0.0_f64..50.0), 0..20),
            capacities in prop::collection::vec(0.0_f64..100.0, 4),
        ) {
            let flows: Vec<Flow> = flows
                .into_iter()
                .map(|(a, b, cap)| Flow { resources: vec![a, b], cap_bps: cap })
                .collect();
            let rates = max_min_fair(&flows, &capacities);
            for (r, capacity) in capacities.iter().enumerate() {
                let used: f64 = flows
                    .iter()
                    .zip(&rates)
                    .map(|(f, rate)| rate * f.resources.iter().filter(|&&x| x == r).count() as f64)
                    .sum();
                prop_assert!(used <= capacity * (1.0 + 1e-9) + 1e-9, "{used} > {capacity}");
            }
            for (flow, rate) in flows.iter().zip(&rates) {
                prop_assert!(*rate >= 0.0 && *rate <= flow.cap_bps * (1.0 + 1e-9) + 1e-9);
                // Max-min: a flow below its cap sits on a full resource.
                if *rate < flow.cap_bps * (1.0 - 1e-6) {
                    let full = flow.resources.iter().any(|&r| {
                        let used: f64 = flows
                            .iter()
                            .zip(&rates)
                            .map(|(f, rate)| rate * f.resources.iter().filter(|&&x| x == r).count() as f64)
                            .sum();
                        used >= capacities[r] * (1.0 - 1e-6)
                    });
                    prop_assert!(full, "{flow:?} at {rate} on no full resource");
                }
            }
        }
    }
}
