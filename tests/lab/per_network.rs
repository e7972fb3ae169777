//! What the labs with more than one network check of each: every pair of
//! every network measured, and each network's pairs held to that
//! network's own truth.

use std::time::{Duration, Instant};

use netaware::json::MatrixJson;
use netaware::lab_system::{AgentTiming, LabSystem};

use crate::measurement::{Z_999, in_binomial_interval_at, pair};
use crate::overhead::overhead_while;

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

/// A network of a lab and where its truth is: the lab's further network
/// number, or `None` for the primary's links.
pub(crate) type NetworkTruth<'n> = (&'n str, Option<usize>);

/// How many windows the collector keeps of a pair (its default): a round
/// reads a matrix whose every window began after the round did.
const KEPT_WINDOWS: u32 = 6;

/// Holds every pair of each of `networks` to that network's truth plus
/// the emulator's overhead over the same seconds: each median within
/// [`PAIR_TOLERANCE_MS`], the mean error within [`MEAN_TOLERANCE_MS`],
/// clean pairs at most 1% loss, and the lossy pairs' pooled loss in its
/// 99.9% interval.
///
/// The RTTs are judged on the median of their tries, since the lab's own
/// latency drifts from one stretch of seconds to the next on a shared
/// machine ([`crate::overhead`]): two rounds, each a matrix of fresh
/// windows read while the control link is pinged, and a third where the
/// two disagree on any pair or mean; a pair or a mean fails when two of
/// its tries are off. Loss, which the lab's latency does not move, is
/// pooled over every round.
pub(crate) fn every_network_holds_to_its_truth(system: &LabSystem, networks: &[NetworkTruth<'_>]) {
    let lab = system.lab();
    let workers: Vec<String> = lab.workers().map(|h| h.spec.name.clone()).collect();
    let mut rounds = vec![fresh_round(system, networks), fresh_round(system, networks)];
    let undecided = |tries: &[bool]| {
        let off = tries.iter().filter(|off| **off).count();
        off < 2 && tries.len() - off < 2
    };
    let judge = |rounds: &[Round]| -> Vec<Verdict> {
        networks
            .iter()
            .enumerate()
            .flat_map(|(n, (network, on))| judge_network(system, &workers, network, *on, n, rounds))
            .collect()
    };
    if judge(&rounds).iter().any(|v| undecided(&v.tries)) {
        rounds.push(fresh_round(system, networks));
    }
    for round in &rounds {
        eprintln!(
            "a round with the emulator's overhead at {:.3} ms",
            round.overhead
        );
    }
    let failures: Vec<String> = judge(&rounds)
        .into_iter()
        .filter(|v| v.tries.iter().filter(|off| **off).count() >= 2)
        .map(|v| v.what)
        .collect();
    assert!(
        failures.is_empty(),
        "off on the median of their tries:\n{}",
        failures.join("\n")
    );

    for (n, (network, on)) in networks.iter().enumerate() {
        let (mut probes, mut lost, mut expected) = (0u64, 0.0, 0.0);
        for round in &rounds {
            let matrix = &round.matrices[n];
            assert!(matrix.pairs.iter().all(|p| p.network == *network));
            for src in &workers {
                for dst in workers.iter().filter(|d| *d != src) {
                    let pair = pair(matrix, src, dst);
                    let (_, delivered) = lab.round_trip_on(*on, src, dst).unwrap();
                    let loss = pair.loss_ratio.unwrap();
                    if delivered < 1.0 {
                        probes += pair.samples;
                        lost += loss * pair.samples as f64;
                        expected += (1.0 - delivered) * pair.samples as f64;
                    } else {
                        assert!(loss <= 0.01, "{network} {src} -> {dst}: loss {loss}");
                    }
                }
            }
        }
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
}

/// One round: each network's matrix, every window of it begun after the
/// round did, and the emulator's overhead over the same seconds.
pub(crate) struct Round {
    pub(crate) matrices: Vec<MatrixJson>,
    pub(crate) overhead: f64,
}

/// A [`Round`] read now: its matrices once every window of theirs began
/// after this call, its overhead pinged over those seconds.
pub(crate) fn fresh_round(system: &LabSystem, networks: &[NetworkTruth<'_>]) -> Round {
    let fresh = AgentTiming::FAST.window * (KEPT_WINDOWS + 1);
    let (overhead, matrices) = overhead_while(system, || {
        std::thread::sleep(fresh);
        networks
            .iter()
            .map(|(network, _)| system.matrix_of_network(network).unwrap())
            .collect()
    });
    Round { matrices, overhead }
}

/// One thing judged in every round, and whether each round found it off.
struct Verdict {
    what: String,
    tries: Vec<bool>,
}

/// The verdicts on network number `n` of the rounds: each pair's median,
/// and the mean error over the pairs.
fn judge_network(
    system: &LabSystem,
    workers: &[String],
    network: &str,
    on: Option<usize>,
    n: usize,
    rounds: &[Round],
) -> Vec<Verdict> {
    let lab = system.lab();
    let mut verdicts = Vec::new();
    let mut means = vec![0.0; rounds.len()];
    for src in workers {
        for dst in workers.iter().filter(|d| *d != src) {
            let (rtt, _) = lab.round_trip_on(on, src, dst).unwrap();
            let mut readings = Vec::new();
            let tries = rounds
                .iter()
                .enumerate()
                .map(|(r, round)| {
                    let median = pair(&round.matrices[n], src, dst).rtt_median_ms.unwrap();
                    let error = median - (rtt + round.overhead);
                    means[r] += error.abs();
                    readings.push(format!("{median:.3} (overhead {:.3})", round.overhead));
                    error.abs() > PAIR_TOLERANCE_MS
                })
                .collect();
            verdicts.push(Verdict {
                what: format!(
                    "{network} {src} -> {dst}: medians {}, configured {rtt} ms",
                    readings.join(", ")
                ),
                tries,
            });
        }
    }
    let pairs = (workers.len() * (workers.len() - 1)) as f64;
    let means: Vec<f64> = means.iter().map(|sum| sum / pairs).collect();
    verdicts.push(Verdict {
        what: format!("{network}: mean absolute errors {means:.3?} ms"),
        tries: means.iter().map(|mean| *mean > MEAN_TOLERANCE_MS).collect(),
    });
    verdicts
}
