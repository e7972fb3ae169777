//! `netaware demo` as a user runs it: the real binary, to the end of its
//! duration, printing the zone summary, the matrix and a placement.

mod support;

use std::process::Command;

#[test]
fn loopback_demo_prints_zones_matrix_and_a_placement_then_stops() {
    if !support::have_root("demo") {
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args([
            "demo",
            "--loopback",
            "--duration",
            "6s",
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

#[test]
fn lab_demo_prints_the_topology_and_removes_the_lab() {
    if !support::have_root("lab demo") {
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args(["demo", "--duration", "15s", "--topology", "small"])
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
    assert!((10.0..10.6).contains(&rtt), "{ab}");
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains("nalab-"),
        "namespaces left behind"
    );
}
