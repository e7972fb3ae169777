//! `netaware-testbed evaluate racks`: on the lab, the schedulers a platform
//! team runs against netaware's extender, with real all-reduce traffic.
//! Two zones of two racks of three hosts; the uplink of one rack (a4-a6)
//! loses 5% of the packets each way on every path out of it; the rack
//! labels put one host (a4) in the wrong rack, as after a re-cabling
//! nobody relabelled. In each round a fresh lab is measured by the whole
//! system, then a job of four workers runs on the placement of each
//! scheduler: netaware's extender; Kueue TAS and Volcano (hard mode) from
//! those labels, and from the topology netaware publishes from what it
//! measured (its blocks, its degraded nodes out); and Kueue TAS from
//! correct labels, for reference.

use netaware_eval::labels::{LabelSource, NodePlaces};
use netaware_eval::schedulers::{Labelled, Scheduler};
use netaware_eval::sim::Places;
use netaware_eval::stats;
use netaware_eval::volcano::Mode;
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::fmt::Write as _;

use super::lab::{LabOptions, LabReport, Measured};

/// The racks: zone, rack, hosts.
pub const RACKS: [(&str, &str, [&str; 3]); 4] = [
    ("zone-a", "zone-a-rack-1", ["a1", "a2", "a3"]),
    ("zone-a", "zone-a-rack-2", ["a4", "a5", "a6"]),
    ("zone-b", "zone-b-rack-1", ["b1", "b2", "b3"]),
    ("zone-b", "zone-b-rack-2", ["b4", "b5", "b6"]),
];

/// The rack whose uplink loses packets.
const BAD_RACK: usize = 1;
/// The host its labels put in the wrong rack (its zone's other one).
const MISLABELLED: &str = "a4";

/// The schedulers compared on the lab.
pub const SCHEDULERS: [Scheduler; 6] = [
    Scheduler::Netaware,
    Scheduler::KueueTas {
        source: LabelSource::AsClustersHaveThem,
        balanced: false,
    },
    Scheduler::KueueTas {
        source: LabelSource::Netaware,
        balanced: false,
    },
    Scheduler::Volcano {
        source: LabelSource::AsClustersHaveThem,
        mode: Mode::Hard,
    },
    Scheduler::Volcano {
        source: LabelSource::Netaware,
        mode: Mode::Hard,
    },
    Scheduler::KueueTas {
        source: LabelSource::Correct,
        balanced: false,
    },
];

/// The lab: racks 0.2 ms RTT inside, 1.2 ms across a zone's racks, zones
/// 5 ms apart; every path out of the bad rack loses 5% each way.
pub fn topology() -> String {
    let mut yaml = String::from(
        "zones:
  - {name: zone-a, region: r, hosts: [a1, a2, a3, a4, a5, a6]}
  - {name: zone-b, region: r, hosts: [b1, b2, b3, b4, b5, b6]}
intra_zone: {delay_ms: 0.1, jitter_ms: 0.01}
default_inter_zone: {delay_ms: 2.5, jitter_ms: 0.05}
pairs:
",
    );
    let rack_of = |host: &str| RACKS.iter().position(|(_, _, hosts)| hosts.contains(&host));
    let hosts: Vec<&str> = RACKS.iter().flat_map(|(_, _, hosts)| *hosts).collect();
    for &from in &hosts {
        for &to in hosts.iter().filter(|&&to| to != from) {
            let (rf, rt) = (rack_of(from), rack_of(to));
            if rf != rt && RACKS[rf.unwrap_or(0)].0 == RACKS[rt.unwrap_or(0)].0 {
                let _ = writeln!(yaml, "  - {{from: {from}, to: {to}, delay_ms: 0.5}}");
            }
            if (rf == Some(BAD_RACK)) != (rt == Some(BAD_RACK)) {
                let _ = writeln!(yaml, "  - {{from: {from}, to: {to}, loss: 0.05}}");
            }
        }
    }
    yaml
}

/// The rack labels: correct, and as this cluster has them (one host in
/// its zone's other rack).
pub fn labels() -> (NodePlaces, NodePlaces) {
    let entries = |mislabel: bool| {
        RACKS
            .iter()
            .enumerate()
            .flat_map(move |(r, (zone, rack, hosts))| {
                hosts.iter().map(move |host| {
                    let rack = if mislabel && *host == MISLABELLED {
                        RACKS[r - 1].1
                    } else {
                        rack
                    };
                    (*host, *zone, Some(rack), false)
                })
            })
    };
    (
        NodePlaces::from_entries(entries(false)),
        NodePlaces::from_entries(entries(true)),
    )
}

/// Every round: a fresh lab measured, then each scheduler's placement.
pub async fn measure_and_run(options: &LabOptions) -> anyhow::Result<LabReport> {
    anyhow::ensure!(
        netaware_lab::is_root(),
        "the lab needs root (network namespaces, TUN devices)"
    );
    let (correct, stale) = labels();
    let mut runs = Vec::new();
    let mut measured = Vec::new();
    for round in 0..options.netaware_runs {
        eprintln!(
            "round {} of {}: measuring a fresh lab",
            round + 1,
            options.netaware_runs
        );
        let lab = Measured::on(netaware_lab::Topology::parse(&topology())?, options).await?;
        for scheduler in SCHEDULERS {
            let labelled = Labelled {
                scheduler,
                correct: &correct,
                stale: &stale,
            };
            let mut rng = StdRng::seed_from_u64(options.seed + u64::from(round));
            let Some(placed) = labelled.place(&lab.view, &lab.free(), options.workers, &mut rng)
            else {
                anyhow::bail!(
                    "{} could not place {} workers",
                    scheduler.name(),
                    options.workers
                );
            };
            runs.extend(lab.run(&scheduler.name(), round, &placed, options).await?);
        }
        measured.push(lab.measured.clone());
        lab.end();
    }
    Ok(LabReport {
        topology: "racks".into(),
        workers: options.workers,
        gradient_mb: options.gradient_mb,
        compute_ms: options.compute.as_millis() as u64,
        iterations: options.iterations,
        throughput_budget: options.throughput_budget,
        runs,
        measured,
    })
}

/// Each scheduler over the rounds, per pattern: its placements, the mean
/// of its rounds' medians and their range, and that over netaware's.
pub fn render(report: &LabReport) -> String {
    let mut rows = Vec::new();
    let patterns: std::collections::BTreeSet<&str> =
        report.runs.iter().map(|r| r.pattern.as_str()).collect();
    for pattern in patterns {
        let mean_of = |name: &str| {
            let medians: Vec<f64> = report
                .runs
                .iter()
                .filter(|r| r.pattern == pattern && r.policy == name)
                .map(|r| r.median_s)
                .collect();
            (!medians.is_empty()).then(|| (stats::mean(&medians), medians))
        };
        let Some((netaware, _)) = mean_of(&Scheduler::Netaware.name()) else {
            continue;
        };
        for scheduler in SCHEDULERS {
            let name = scheduler.name();
            let Some((mean, medians)) = mean_of(&name) else {
                continue;
            };
            let placements: Vec<String> = report
                .runs
                .iter()
                .filter(|r| r.pattern == pattern && r.policy == name)
                .map(|r| r.hosts.join(","))
                .collect();
            rows.push(vec![
                pattern.to_owned(),
                name,
                placements.join(" / "),
                format!("{mean:.2}"),
                format!(
                    "{:.2} to {:.2}",
                    medians.iter().copied().fold(f64::INFINITY, f64::min),
                    medians.iter().copied().fold(0.0, f64::max)
                ),
                format!("{:.2}x", mean / netaware),
            ]);
        }
    }
    super::table(
        &[
            "PATTERN",
            "SCHEDULER",
            "PLACEMENTS BY ROUND",
            "MEAN s/ITER",
            "RANGE OF MEDIANS",
            "VS NETAWARE",
        ],
        &rows,
    )
}

/// Runs the experiment, prints the table, writes racks.json.
pub async fn run(options: &LabOptions) -> anyhow::Result<()> {
    let report = measure_and_run(options).await?;
    let json = super::write_json(&options.output.out, "racks.json", &report)?;
    if options.output.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
        println!("wrote {}", json.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_labels_put_a4_in_the_wrong_rack_and_the_lab_parses() {
        let (correct, stale) = labels();
        assert_eq!(
            correct.get("a4").unwrap().rack.as_deref(),
            Some("zone-a-rack-2")
        );
        assert_eq!(
            stale.get("a4").unwrap().rack.as_deref(),
            Some("zone-a-rack-1")
        );
        assert_eq!(stale.get("a5"), correct.get("a5"));
        let topology = netaware_lab::Topology::parse(&topology()).unwrap();
        assert_eq!(topology.zones.len(), 2);
        // Every path out of the bad rack is lossy, both ways; none inside.
        let lossy = |from: &str, to: &str| {
            topology
                .pairs
                .iter()
                .any(|p| p.from == from && p.to == to && p.profile.loss > 0.0)
        };
        assert!(lossy("a4", "a1") && lossy("a1", "a4") && lossy("b2", "a6"));
        assert!(!lossy("a4", "a5") && !lossy("a1", "a2") && !lossy("b1", "b4"));
        // With the stale labels, Kueue TAS takes a1-a4 for four workers:
        // across the bad uplink.
        let free: Vec<String> = RACKS
            .iter()
            .flat_map(|(_, _, h)| *h)
            .map(String::from)
            .collect();
        let placed = netaware_eval::kueue_tas::place(&stale, &free, 4, false).unwrap();
        assert_eq!(placed, ["a1", "a2", "a3", "a4"]);
    }
}
