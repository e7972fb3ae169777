//! What the labs with more than one network check of each: every pair of
//! every network measured, and each network's pairs held to that
//! network's own truth.

use std::time::{Duration, Instant};

use netaware::json::{MatrixJson, PairJson};
use netaware::lab_system::LabSystem;

use crate::measurement::{Z_999, in_binomial_interval_at, pair};

/// Where a pair's median may be from its network's configured RTT plus
/// the emulator's overhead (ms): below the 2 ms by which the labs' hosts
/// or networks differ (b1's extra 2 ms on the dual-stack lab, rail-0
/// against the primary on the rails lab), so that a pair filed under the
/// wrong node or network fails.
pub(crate) const PAIR_TOLERANCE_MS: f64 = 1.0;

/// The mean absolute error over a network's pairs may be at most this
/// (ms), the lab accuracy test's tolerance against the truth.
pub(crate) const MEAN_TOLERANCE_MS: f64 = 0.2;

/// The shipped topology `name` with agents on the fast timing and no
/// throughput tests (so that RTTs hold to the truth).
pub(crate) fn start_lab(name: &str) -> LabSystem {
    LabSystem::start(
        netaware_lab::Topology::named(name).unwrap(),
        std::path::Path::new(env!("CARGO_BIN_EXE_netaware")),
        netaware::lab_system::AgentTiming::FAST,
        &crate::measurement::no_throughput_tests(),
    )
    .unwrap()
}

/// The matrices of `networks`, in their order, once each has every pair
/// of the lab's workers over six windows (100 probes), no stale node,
/// and `settled` holds of them all (90 s at most).
pub(crate) fn wait_for_every_network(
    system: &LabSystem,
    networks: &[&str],
    settled: impl Fn(&[MatrixJson]) -> bool,
) -> Vec<MatrixJson> {
    let workers = system.lab().workers().count();
    let pairs = workers * (workers - 1);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let read: Vec<MatrixJson> = networks
            .iter()
            .filter_map(|n| system.matrix_of_network(n).ok())
            .collect();
        let whole = read.len() == networks.len()
            && read.iter().all(|m| {
                m.pairs.len() == pairs
                    && m.pairs.iter().all(|p| p.samples >= 100)
                    && !m.nodes.iter().any(|n| n.stale)
            });
        if whole && settled(&read) {
            return read;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for six windows of every pair on {networks:?}: {:?}",
            read.iter()
                .map(|m| (m.pairs.len(), m.pairs.iter().map(|p| p.samples).min()))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Holds every pair of `matrix` (network `network`, whose truth is the
/// lab's further network number `on`, or the primary's) to that truth
/// plus `overhead`: each median within [`PAIR_TOLERANCE_MS`], the mean
/// error within [`MEAN_TOLERANCE_MS`], clean pairs at most 1% loss, and
/// the lossy pairs' pooled loss in its 99.9% interval. `also` sees each
/// pair for the caller's own checks.
pub(crate) fn holds_to_its_truth(
    system: &LabSystem,
    network: &str,
    on: Option<usize>,
    matrix: &MatrixJson,
    overhead: f64,
    mut also: impl FnMut(&str, &str, &PairJson),
) {
    let lab = system.lab();
    let workers: Vec<String> = lab.workers().map(|h| h.spec.name.clone()).collect();
    assert!(matrix.pairs.iter().all(|p| p.network == network));
    let mut errors = Vec::new();
    let (mut probes, mut lost, mut expected) = (0u64, 0.0, 0.0);
    for src in &workers {
        for dst in workers.iter().filter(|d| *d != src) {
            let pair = pair(matrix, src, dst);
            let (rtt, delivered) = lab.round_trip_on(on, src, dst).unwrap();
            let error = pair.rtt_median_ms.unwrap() - (rtt + overhead);
            assert!(
                error.abs() <= PAIR_TOLERANCE_MS,
                "{network} {src} -> {dst}: median {:?}, configured {rtt} ms",
                pair.rtt_median_ms
            );
            errors.push(error.abs());
            let loss = pair.loss_ratio.unwrap();
            if delivered < 1.0 {
                probes += pair.samples;
                lost += loss * pair.samples as f64;
                expected += (1.0 - delivered) * pair.samples as f64;
            } else {
                assert!(loss <= 0.01, "{network} {src} -> {dst}: loss {loss}");
            }
            also(src, dst, pair);
        }
    }
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    assert!(mean <= MEAN_TOLERANCE_MS, "{network}: mean error {mean} ms");
    assert!(probes > 0, "{network}: no lossy pair");
    assert!(
        in_binomial_interval_at(
            Z_999,
            lost / probes as f64,
            expected / probes as f64,
            probes
        ),
        "{network}: pooled loss {} over {probes} probes, configured {}",
        lost / probes as f64,
        expected / probes as f64
    );
}
