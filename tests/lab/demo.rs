//! `netaware demo` as a user runs it: the real binary, to the end of its
//! duration or to Ctrl-C, printing the zone summary, the matrix and a
//! placement, and on the lab the goodput of every pair.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn loopback_demo_prints_zones_matrix_and_a_placement_then_stops() {
    if !netaware_testkit::have_root("demo") {
        return;
    }
    // Alone: labs and the timing this measures share two cores.
    let _one = netaware_testkit::one_lab_at_a_time();
    let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args([
            "demo",
            "--loopback",
            "--duration",
            "10s",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("measuring: 72/72 pairs have fresh windows, 9/9 agents reporting"),
        "{stdout}"
    );
    for section in [
        "== Zones",
        "== Matrix",
        "== Placement of a 4-worker job",
        "== Measured topology",
        "zone-a-1",
        "the pairs' quality as a heat map: ",
        "demo stopped",
    ] {
        assert!(stdout.contains(section), "missing {section:?}:\n{stdout}");
    }
    // Only zone-a has 4 nodes, so the 4 workers go there.
    assert!(
        stdout.contains("zone zone-a: has 4 feasible nodes"),
        "{stdout}"
    );
    let picked = stdout
        .lines()
        .filter(|l| l.starts_with('*'))
        .collect::<Vec<_>>();
    assert_eq!(picked.len(), 4, "{stdout}");
    assert!(picked.iter().all(|l| l.contains("zone-a-")), "{picked:?}");
}

/// The README's first command as a user whose cargo came from rustup:
/// not root, cargo on no system path, no terminal. The demo says in one
/// line why it is not on the lab and the command that runs it there (the
/// binary by its absolute path, so that sudo's secure path needs no
/// cargo), then goes on to loopback; here, where this user may not open an
/// ICMP socket (`net.ipv4.ping_group_range` left as this machine has it),
/// that stops with the reason and the ways out.
#[test]
fn as_a_user_the_demo_says_how_to_get_the_lab_in_one_line() {
    if !netaware_testkit::have_root("demo as a user (setpriv to uid 65534)") {
        return;
    }
    // Alone: labs and the timing this measures share two cores.
    let _one = netaware_testkit::one_lab_at_a_time();
    let exe = env!("CARGO_BIN_EXE_netaware");
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args([
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            exe,
            "demo",
            "--duration",
            "5s",
        ])
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("netaware demo: on loopback: the lab needs root"),
        "{stdout}\n{stderr}"
    );
    assert!(
        first.ends_with(&format!(
            "for the lab run: sudo {exe} demo --duration 5s --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0"
        )),
        "{first}"
    );
    let icmp_allowed = std::fs::read_to_string("/proc/sys/net/ipv4/ping_group_range")
        .map(|range| {
            let bounds: Vec<u32> = range
                .split_whitespace()
                .filter_map(|b| b.parse().ok())
                .collect();
            bounds.len() == 2 && bounds[0] <= 65534 && 65534 <= bounds[1]
        })
        .unwrap_or(false);
    if icmp_allowed {
        assert!(output.status.success(), "{stdout}\n{stderr}");
        // Said once, in the demo's words, not by each agent.
        assert_eq!(stdout.matches("without CAP_NET_RAW").count(), 1, "{stdout}");
        assert!(
            !stderr.contains("cannot watch inbound echo requests"),
            "{stderr}"
        );
    } else {
        assert!(!output.status.success());
        assert!(
            stderr.contains("net.ipv4.ping_group_range") && stderr.contains("CAP_NET_RAW"),
            "{stderr}"
        );
    }
}

#[test]
fn lab_demo_prints_the_topology_and_removes_the_lab() {
    if !netaware_testkit::have_root("lab demo") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    // RTTs are checked to a fraction of a millisecond here: no throughput
    // tests (the next test covers those).
    let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args(["demo", "--duration", "15s", "--topology", "small"])
        .args(["--throughput-budget", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "on the lab",
        "zone-a <-> zone-b: RTT 10.0 ms",
        "measuring: 12/12 pairs have fresh windows, 4/4 agents reporting",
        "== Placement of a 2-worker job",
        "demo stopped; lab removed",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?}:\n{stdout}");
    }
    // The zone table shows the configured 10 ms between the zones.
    let ab = stdout
        .lines()
        .find(|l| l.starts_with("zone-a") && l.contains("zone-b") && !l.contains("<->"))
        .unwrap();
    let rtt: f64 = ab.split_whitespace().nth(2).unwrap().parse().unwrap();
    // Never below the configured delay; above it by the emulator's own
    // lateness, which on two loaded cores (CI builds and tests beside it)
    // reached 0.8 ms.
    assert!((10.0..11.0).contains(&rtt), "{ab}");
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("nalab-"),
        "namespaces left behind"
    );
}

/// The goodput column (Mbit/s) of each pair in the last matrix printed.
fn goodputs(report: &str) -> Vec<(String, String, Option<f64>)> {
    let matrix = report.rsplit("== Matrix").next().unwrap_or("");
    matrix
        .lines()
        .skip_while(|l| !l.starts_with("SRC"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            let goodput = cells
                .iter()
                .position(|c| *c == "Mbit/s")
                .and_then(|at| cells[at - 1].parse().ok());
            (cells[0].to_owned(), cells[1].to_owned(), goodput)
        })
        .collect()
}

/// The lowest goodput a healthy pair may read, as a share of its link's
/// rate: above the slow host's 50 Mbit/s on the slowest healthy link.
const HEALTHY_FLOOR: f64 = 0.6;

/// What the slow host's 50 Mbit/s on the wire carries as TCP payload.
const SLOW_PAYLOAD_MBPS: f64 = 48.3;

/// The median of `values` (the upper one of an even count).
fn median_of(mut values: Vec<f64>) -> f64 {
    assert!(!values.is_empty(), "no values to take the median of");
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The default topology's rate between two healthy hosts (Mbit/s): 200
/// inside a zone, 100 between zones.
fn link_rate(src: &str, dst: &str) -> f64 {
    if src[..1] == dst[..1] { 200.0 } else { 100.0 }
}

#[test]
fn lab_demo_measures_every_pair_goodput_and_shows_the_slow_host() {
    if !netaware_testkit::have_root("lab demo goodput") {
        return;
    }
    let _one = netaware_testkit::one_lab_at_a_time();
    // A whole node's time for tests (two at a time, the demo's default), so
    // that the round over the default topology's 72 pairs fits a test run;
    // then Ctrl-C, as a user would.
    let mut demo = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args(["demo", "--topology", "default", "--throughput-budget", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut lines = BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut output = String::new();
    let mut measured_after = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        output.push_str(&line);
        output.push('\n');
        if line.starts_with("every pair has a goodput after") {
            measured_after = Some(started.elapsed());
        }
        if measured_after.is_some() && line.starts_with("serving until Ctrl-C") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(360),
            "no goodput for every pair in 360 s:\n{output}"
        );
    }
    let interrupted = Command::new("kill")
        .args(["-INT", &demo.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    for line in lines {
        output.push_str(&line.unwrap());
        output.push('\n');
    }
    assert!(demo.wait().unwrap().success(), "{output}");
    assert!(output.contains("demo stopped; lab removed"), "{output}");
    let measured_after = measured_after.expect("every pair measured");

    let pairs = goodputs(&output);
    assert_eq!(pairs.len(), 72, "{output}");
    for (src, dst, goodput) in &pairs {
        let goodput = goodput.unwrap_or_else(|| panic!("{src} -> {dst} has no goodput:\n{output}"));
        let slow = src == "b2" || dst == "b2";
        let lossy = src == "a3" || dst == "a3";
        match (slow, lossy) {
            // The slow host's cap holds for every pair; its floor is held
            // by the slow pairs' median below, as the healthy pairs' is.
            (true, false) => assert!(
                (HEALTHY_FLOOR * SLOW_PAYLOAD_MBPS..=50.0).contains(&goodput),
                "{src} -> {dst}: {goodput} Mbit/s"
            ),
            // 5% loss holds TCP well below the link's rate.
            (true, true) => assert!(goodput <= 50.0, "{src} -> {dst}: {goodput} Mbit/s"),
            (false, true) => assert!(goodput > 0.0, "{src} -> {dst}: {goodput} Mbit/s"),
            // 200 Mbit/s inside a zone, 100 between zones (96.5% payload).
            (false, false) => {
                let rate = link_rate(src, dst);
                assert!(
                    (HEALTHY_FLOOR * rate..=rate).contains(&goodput),
                    "{src} -> {dst}: {goodput} Mbit/s on a {rate} Mbit/s link"
                );
            }
        }
    }
    // Each test is one 2 s transfer through the user-space emulator, and
    // this VM's hypervisor takes 10 to 37% of its CPU for tens of seconds
    // at a time while a lab runs (docs/lab.md): a pair tested then reads
    // low (77 Mbit/s on a 100 Mbit/s link has been seen). So each healthy
    // pair must stand clear of the slow host's 50 Mbit/s, each pair at 60%
    // of its rate or more, and each kind's median close to its rate (a
    // link's shaping is what the medians check): the agents' goodput against
    // iperf3's, pair by pair, is held to 5% in tests/throughput_lab.rs.
    let healthy: Vec<f64> = pairs
        .iter()
        .filter(|(src, dst, _)| ![src, dst].iter().any(|h| *h == "b2" || *h == "a3"))
        .filter_map(|(src, dst, goodput)| Some(goodput.as_ref()? / link_rate(src, dst)))
        .collect();
    let median = median_of(healthy);
    assert!(
        median >= 0.8,
        "healthy pairs' median goodput {:.0}% of their links' rates:\n{output}",
        median * 100.0
    );
    // The same for the slow host's pairs: their median within 15% of the
    // payload its 50 Mbit/s carries (one of them has read 40 Mbit/s while
    // the hypervisor took the CPU).
    let slow: Vec<f64> = pairs
        .iter()
        .filter(|(src, dst, _)| (src == "b2" || dst == "b2") && src != "a3" && dst != "a3")
        .filter_map(|(_, _, goodput)| *goodput)
        .collect();
    let slow_median = median_of(slow);
    assert!(
        slow_median >= 0.85 * SLOW_PAYLOAD_MBPS,
        "the slow host's pairs' median goodput {slow_median:.1} Mbit/s:\n{output}"
    );
    // The report names the lossy NIC planted on a3 as what it is.
    let faults = output
        .rsplit("== Faults\n")
        .next()
        .filter(|_| output.contains("== Faults\n"))
        .unwrap_or_else(|| panic!("no faults section:\n{output}"));
    assert!(
        faults
            .lines()
            .any(|l| l.starts_with("node") && l.contains(" a3 ") && l.contains("loss")),
        "a3's NIC not named:\n{faults}"
    );
    println!("every pair measured after {measured_after:?}");
}
