//! What the labs with more than one network check of each: every pair of
//! every network measured, and each network's pairs held to that
//! network's own truth.

use std::time::{Duration, Instant};

use netaware::json::MatrixJson;
use netaware::lab_system::{AgentTiming, LabSystem};

use crate::measurement::{Z_999, in_binomial_interval_at, pair};
use crate::overhead::{Conditions, LabPair, UdpHolds, watched};
use netaware_lab::fitness::{MAX_TRIES, Tries, Verdict};

/// Where a pair's median may be from its network's configured RTT plus
/// the emulator's overhead (ms): below the 2 ms by which the labs' hosts
/// or networks differ (b1's extra 2 ms on the dual-stack lab, rail-0
/// against the primary on the rails lab), so that a pair filed under the
/// wrong node or network fails.
pub(crate) const PAIR_TOLERANCE_MS: f64 = 1.0;

/// The median signed error over a network's pairs may be at most this far
/// from zero (ms), the lab accuracy test's tolerance against the truth: an
/// offset of a whole network, or of its truth, moves the median. Not a
/// mean of absolute errors: while the hypervisor takes a quarter of the
/// CPU time, the emulator adds less to links short enough to spin through
/// than to links it sleeps through, and a round then finds the pairs some
/// 0.3 ms either side of a truth that takes in one overhead for all, and
/// now and then one host's pairs up to 1 ms high, while the median holds.
/// Each pair's own check ([`PAIR_TOLERANCE_MS`]) bounds the rest; the
/// accuracy tests (`measurement`) hold each family's bias against ping in
/// the rounds the lab was fit for.
pub(crate) const MEDIAN_TOLERANCE_MS: f64 = 0.2;

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
/// what the lab added over the same seconds (the emulator's overhead and
/// lateness, and for a pair probed by UDP what its peer's reflector held
/// the probes beyond the bound): each median within [`PAIR_TOLERANCE_MS`],
/// the median signed error within [`MEDIAN_TOLERANCE_MS`], clean pairs at most 1%
/// loss, and the lossy pairs' pooled loss in its 99.9% interval.
///
/// The RTTs are judged on the median of their tries, since the lab's own
/// latency drifts from one stretch of seconds to the next on a shared
/// machine ([`netaware_lab::fitness`]): rounds, each a matrix of fresh
/// windows read while the control link is pinged, are read until two
/// rounds agree on every pair and network, or [`MAX_TRIES`] rounds are
/// read; a pair or a network fails when two of its tries are off, or when
/// it was never decided. Every round judges: these bounds tell networks
/// and hosts apart (by 2 ms), and hold with the lab's additions taken in
/// even while the hypervisor takes a quarter of the CPU time, when the
/// accuracy tests' bounds (`measurement`) would judge nothing. Loss,
/// which the lab's latency does not move, is pooled over every round.
pub(crate) fn every_network_holds_to_its_truth(system: &LabSystem, networks: &[NetworkTruth<'_>]) {
    let lab = system.lab();
    let workers: Vec<String> = lab.workers().map(|h| h.spec.name.clone()).collect();
    let mut rounds = vec![fresh_round(system, networks)];
    while rounds.len() < MAX_TRIES
        && judge(system, &workers, networks, &rounds)
            .iter()
            .any(|v| v.tries.verdict() == Verdict::Undecided)
    {
        rounds.push(fresh_round(system, networks));
    }
    for round in &rounds {
        eprintln!("a round with {}", round.conditions);
    }
    let judged = judge(system, &workers, networks, &rounds);
    for network in judged.iter().filter(|v| v.what.contains("median signed")) {
        eprintln!("{}", network.what);
    }
    let failures: Vec<String> = judged
        .into_iter()
        .filter(|v| v.tries.verdict() != Verdict::Holds)
        .map(|v| match v.tries.verdict() {
            Verdict::Off => v.what,
            _ => format!("undecided: {}", v.what),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "off on the median of their tries, or not judged in {} rounds:\n{}",
        rounds.len(),
        failures.join("\n")
    );

    for (n, (network, on)) in networks.iter().enumerate() {
        let (mut probes, mut lost, mut expected) = (0u64, 0.0, 0.0);
        for round in &rounds {
            let matrix = &round.matrices[n];
            assert!(matrix.pairs.iter().all(|p| p.network == *network));
            for (src, dst) in ordered_pairs(&workers) {
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

/// Every ordered pair of `workers`.
fn ordered_pairs(workers: &[String]) -> impl Iterator<Item = (&str, &str)> {
    workers.iter().flat_map(move |src| {
        workers
            .iter()
            .filter(move |dst| *dst != src)
            .map(move |dst| (src.as_str(), dst.as_str()))
    })
}

/// Every pair of every one of `networks`, in the order of the networks,
/// then of [`ordered_pairs`]: the links whose lateness a round counts.
fn links<'w>(networks: &[NetworkTruth<'_>], workers: &'w [String]) -> Vec<LabPair<'w>> {
    networks
        .iter()
        .flat_map(|&(_, on)| ordered_pairs(workers).map(move |(src, dst)| (on, src, dst)))
        .collect()
}

/// One round: each network's matrix, every window of it begun after the
/// round did, and what the lab did over the same seconds.
pub(crate) struct Round {
    pub(crate) matrices: Vec<MatrixJson>,
    pub(crate) conditions: Conditions,
    /// What the reflectors left in each worker's UDP probes over the
    /// round, per probe (ms), in the order of the lab's workers.
    pub(crate) udp_holds_ms: Vec<f64>,
}

/// A [`Round`] read now: its matrices once every window of theirs began
/// after this call, its conditions over those seconds.
pub(crate) fn fresh_round(system: &LabSystem, networks: &[NetworkTruth<'_>]) -> Round {
    let workers: Vec<String> = system
        .lab()
        .workers()
        .map(|h| h.spec.name.clone())
        .collect();
    let fresh = AgentTiming::FAST.window * (KEPT_WINDOWS + 1);
    let holds_before = UdpHolds::read(system, &workers);
    let (conditions, matrices) = watched(system, &links(networks, &workers), || {
        std::thread::sleep(fresh);
        networks
            .iter()
            .map(|(network, _)| system.matrix_of_network(network).unwrap())
            .collect()
    });
    let holds = UdpHolds::read(system, &workers);
    Round {
        matrices,
        conditions,
        udp_holds_ms: (0..workers.len())
            .map(|i| holds.per_probe_ms(&holds_before, i))
            .collect(),
    }
}

/// One thing judged in every round, and its tries.
struct Judged {
    what: String,
    tries: Tries,
}

/// The verdicts of `rounds` on each of `networks`: each pair's median
/// against its truth, and the median signed error over each network's pairs.
fn judge(
    system: &LabSystem,
    workers: &[String],
    networks: &[NetworkTruth<'_>],
    rounds: &[Round],
) -> Vec<Judged> {
    let lab = system.lab();
    let pairs = workers.len() * (workers.len() - 1);
    let mut verdicts = Vec::new();
    for (n, &(network, on)) in networks.iter().enumerate() {
        let mut errors = vec![Vec::new(); rounds.len()];
        for (p, (src, dst)) in ordered_pairs(workers).enumerate() {
            let (rtt, _) = lab.round_trip_on(on, src, dst).unwrap();
            let prober = workers.iter().position(|w| w == src).unwrap();
            let (mut tries, mut readings) = (Tries::default(), Vec::new());
            for (r, round) in rounds.iter().enumerate() {
                let measured = pair(&round.matrices[n], src, dst);
                let median = measured.rtt_median_ms.unwrap();
                let held = match measured.probe.as_deref() {
                    Some("udp") => round.udp_holds_ms[prober],
                    _ => 0.0,
                };
                let truth = round.conditions.truth(n * pairs + p, rtt) + held;
                errors[r].push(median - truth);
                tries.push((median - truth).abs() > PAIR_TOLERANCE_MS);
                readings.push(format!("{median:.3} (truth {truth:.3})"));
            }
            verdicts.push(Judged {
                what: format!(
                    "{network} {src} -> {dst}: medians {}, configured {rtt} ms",
                    readings.join(", ")
                ),
                tries,
            });
        }
        let medians: Vec<f64> = errors
            .into_iter()
            .map(|mut errors| {
                errors.sort_by(f64::total_cmp);
                errors[errors.len() / 2]
            })
            .collect();
        let mut tries = Tries::default();
        medians
            .iter()
            .for_each(|median| tries.push(median.abs() > MEDIAN_TOLERANCE_MS));
        verdicts.push(Judged {
            what: format!("{network}: median signed errors by round {medians:+.3?} ms"),
            tries,
        });
    }
    verdicts
}
