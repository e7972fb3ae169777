//! `netaware demo` as a user runs it: the real binary, to the end of its
//! duration, printing the zone summary, the matrix and a placement.

mod support;

use std::process::Command;

#[test]
fn demo_prints_zones_matrix_and_a_placement_then_stops() {
    if !support::have_root("demo") {
        return;
    }
    let output = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args([
            "demo",
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
