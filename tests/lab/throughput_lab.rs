//! The agents' throughput test against iperf3 on the lab: links shaped to
//! 50, 200 and 800 Mbit/s, the agent's test (0.5 s warm-up, 2 s measured,
//! at most 3 s in all) and `iperf3 -t 10 -O 2` over the same link in the
//! same run; and the collector's tests on a lab with two networks, each
//! held to its own network's rates. Needs root; runs in CI. The tokens
//! themselves are tested without root in agent/tests/throughput.rs.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use netaware::commands::throughput::ThroughputJson;
use netaware::json::MatrixJson;
use netaware::lab_system::{AgentTiming, LabSystem};
use netaware_lab::{Lab, Topology, root_or_skip};

const TOKEN: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
const RATES: [(&str, f64); 3] = [("c50", 50.0), ("c200", 200.0), ("c800", 800.0)];

/// One zone; each client's path to the server is shaped to its rate, the
/// way back (ACKs) is not. 1 ms each way.
const TOPOLOGY: &str = "
zones:
  - {name: zone-t, hosts: [srv, c50, c200, c800]}
intra_zone: {delay_ms: 1}
pairs:
  - {from: c50, to: srv, rate_mbit: 50}
  - {from: c200, to: srv, rate_mbit: 200}
  - {from: c800, to: srv, rate_mbit: 800}
";

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_netaware"))
}

fn output(mut command: Command) -> String {
    let output = command.output().expect("the command runs");
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// The agent's test from `client` to the server host.
fn agent_test(lab: &Lab, client: &str, server: &str) -> ThroughputJson {
    let listen = format!("{server}:7471");
    let mut serve = lab.command("srv", exe().to_str().unwrap()).unwrap();
    serve.args(["throughput", "serve", "--listen", &listen, "--token", TOKEN]);
    serve.args(["--valid", "30s"]);
    let pid = lab.spawn(serve).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let source = lab.host(client).unwrap().spec.address.to_string();
    let mut run = lab.command(client, exe().to_str().unwrap()).unwrap();
    run.args(["throughput", "run", "--server", &listen, "--token", TOKEN]);
    run.args([
        "--duration",
        "2s",
        "--omit",
        "500ms",
        "--json",
        "--source",
        &source,
    ]);
    let report = serde_json::from_str(&output(run)).expect("throughput --json");
    lab.stop(pid, Duration::from_secs(1));
    report
}

/// `iperf3 -c -t 10 -O 2` from `client`: the receiver's goodput, bit/s.
fn iperf3(lab: &Lab, client: &str, server: &str) -> f64 {
    let mut serve = lab.command("srv", "iperf3").unwrap();
    serve.args(["-s", "-1", "-B", server, "-p", "5201"]);
    serve.stdout(std::process::Stdio::null());
    let pid = lab.spawn(serve).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut run = lab.command(client, "iperf3").unwrap();
    run.args(["-c", server, "-p", "5201", "-t", "10", "-O", "2", "-J"]);
    let report: serde_json::Value = serde_json::from_str(&output(run)).expect("iperf3 -J");
    lab.stop(pid, Duration::from_secs(1));
    report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .expect("iperf3 reports sum_received")
}

#[test]
fn agent_goodput_matches_iperf3_on_shaped_links() {
    if !root_or_skip("throughput_lab") {
        return;
    }
    // Alone: labs and the timing this measures share two cores.
    let _one = netaware_testkit::one_lab_at_a_time();
    let lab = Lab::start(Topology::parse(TOPOLOGY).unwrap()).unwrap();
    let server = lab.host("srv").unwrap().spec.address.to_string();
    println!("| link (Mbit/s) | agent (Mbit/s) | agent test (s) | iperf3 (Mbit/s) | ratio |");
    println!("|---:|---:|---:|---:|---:|");
    let mut failures = Vec::new();
    for (client, rate) in RATES {
        let measure = || {
            let agent = agent_test(&lab, client, &server);
            let reference = iperf3(&lab, client, &server);
            (agent.goodput_bps / reference, agent, reference)
        };
        // On a loaded two-core machine either tool can have a bad run (the
        // emulator shares the cores, and at 800 Mbit/s it is what both
        // measure): a pair off by more than 5% is measured again, both
        // tools, up to three times in all, before it counts. A CI run saw
        // 1.063 then 0.941 at 800 Mbit/s; an agent really off is off in
        // every run.
        let (mut ratio, mut agent, mut reference) = measure();
        for _ in 1..3 {
            if (ratio - 1.0).abs() <= 0.05 {
                break;
            }
            println!("| {rate} | (again: agent/iperf3 was {ratio:.3}) | | | |");
            (ratio, agent, reference) = measure();
        }
        println!(
            "| {rate} | {:.1} | {:.2} | {:.1} | {ratio:.3} |",
            agent.goodput_bps / 1e6,
            agent.elapsed_s,
            reference / 1e6
        );
        if (ratio - 1.0).abs() > 0.05 {
            failures.push(format!("{rate} Mbit/s: agent/iperf3 = {ratio:.3}"));
        }
        if agent.elapsed_s > 3.0 {
            failures.push(format!(
                "{rate} Mbit/s: agent test took {:.2} s",
                agent.elapsed_s
            ));
        }
        // Both see the shaped rate (less headers), not something else; at
        // 800 Mbit/s the emulator itself may not carry the whole rate on two
        // shared cores, and then iperf3 falls short with the agent.
        let share = agent.goodput_bps / (rate * 1e6);
        let least = 0.85_f64.min(0.95 * reference / (rate * 1e6));
        if !(least..=1.0).contains(&share) {
            failures.push(format!(
                "{rate} Mbit/s: agent measured {share:.3} of the rate"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Two networks over the same three hosts, each with a slow host of its
/// own: t2 on the primary, t3 on rail-0. A test on rail-0 that crossed
/// the primary's links instead would see t2 slow and t3 fast.
const TWO_NETWORKS: &str = "
zones:
  - {name: zone-t, hosts: [t1, t2, t3]}
intra_zone: {delay_ms: 1, rate_mbit: 100}
hosts:
  t2: {rate_mbit: 25}
networks:
  - name: rail-0
    intra_zone: {delay_ms: 1, rate_mbit: 100}
    hosts:
      t3: {rate_mbit: 25}
";

/// The goodput (Mbit/s) of every directed pair of `network`, once each
/// pair has one (120 s at most).
fn goodputs_on(system: &LabSystem, network: &str) -> Vec<(String, String, f64)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let matrix: Option<MatrixJson> = system.matrix_of_network(network).ok();
        let measured: Vec<(String, String, f64)> = matrix
            .iter()
            .flat_map(|m| &m.pairs)
            .filter_map(|p| Some((p.src.clone(), p.dst.clone(), p.throughput_bps? / 1e6)))
            .collect();
        if measured.len() == 6 {
            return measured;
        }
        assert!(
            Instant::now() < deadline,
            "{network}: goodput for {} of 6 pairs after 120 s: {measured:?}",
            measured.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn throughput_tests_on_a_second_network_measure_its_links() {
    if !root_or_skip("throughput on two networks") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    let flags: Vec<String> = [
        "--throughput-budget",
        "1",
        "--throughput-duration",
        "1500ms",
        "--throughput-omit",
        "500ms",
    ]
    .map(String::from)
    .to_vec();
    let system = LabSystem::start(
        Topology::parse(TWO_NETWORKS).unwrap(),
        exe(),
        AgentTiming::FAST,
        &flags,
    )
    .unwrap();
    let mut failures = Vec::new();
    for (network, slow) in [("primary", "t2"), ("rail-0", "t3")] {
        for (src, dst, goodput) in goodputs_on(&system, network) {
            let rate = if src == slow || dst == slow {
                25.0
            } else {
                100.0
            };
            // TCP payload is 96.5% of the rate on the wire; the rest is
            // the test's ramp and the emulator's share of two cores.
            if !(0.8 * rate..=rate).contains(&goodput) {
                failures.push(format!(
                    "{network} {src} -> {dst}: {goodput:.1} Mbit/s, link {rate} Mbit/s"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
