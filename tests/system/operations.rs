//! What operators expect of every binary: logs as text (no colour codes
//! when stderr is not a terminal) or as one JSON object a line; shell
//! completions; and the binary as a kubectl plugin.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Starts `netaware collector` on loopback with `flags`, stops it with
/// SIGTERM once it says it listens, and returns what it logged.
fn collector_log(flags: &[&str]) -> Vec<String> {
    collector_log_while(flags, |_| {})
}

/// [`collector_log`], calling `while_up` with the collector's process id
/// once it listens, before it is stopped.
fn collector_log_while(flags: &[&str], while_up: impl FnOnce(u32)) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_netaware"))
        .args(flags)
        .args([
            "collector",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (lines_tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut logged = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(20)) {
        let listening = line.contains("collector listening");
        logged.push(line);
        if listening {
            break;
        }
    }
    assert!(
        logged.iter().any(|l| l.contains("collector listening")),
        "the collector never said it listens: {logged:?}"
    );
    while_up(child.id());
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert!(
        child.wait().unwrap().success(),
        "stopped cleanly on SIGTERM"
    );
    logged.extend(lines.try_iter());
    logged
}

#[test]
fn logs_are_json_objects_or_text_without_colour_codes() {
    let json = collector_log(&["--log-format", "json"]);
    let objects: Vec<serde_json::Value> = json
        .iter()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"))
        })
        .collect();
    let listening = objects
        .iter()
        .find(|o| o["message"] == "collector listening")
        .expect("the listening line");
    assert_eq!(listening["level"], "INFO");
    assert!(listening["grpc_addr"].as_str().is_some(), "{listening}");
    assert!(listening["timestamp"].as_str().is_some(), "{listening}");
    let text = collector_log(&[]);
    assert!(text.iter().all(|line| !line.contains('\u{1b}')), "{text:?}");
    assert!(
        text.iter()
            .all(|line| serde_json::from_str::<serde_json::Value>(line).is_err())
    );
}

fn run(program: &std::path::Path, args: &[&str], path: Option<&std::path::Path>) -> String {
    let mut command = Command::new(program);
    command.args(args);
    if let Some(dir) = path {
        let old = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![dir.to_owned()];
        dirs.extend(std::env::split_paths(&old));
        command.env("PATH", std::env::join_paths(dirs).unwrap());
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{} {args:?}: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn completions_name_every_command_for_each_shell() {
    let netaware = std::path::Path::new(env!("CARGO_BIN_EXE_netaware"));
    for (shell, marker) in [
        ("bash", "_netaware()"),
        ("zsh", "#compdef netaware"),
        ("fish", "complete -c netaware"),
    ] {
        let script = run(netaware, &["completion", shell], None);
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        for command in [
            "matrix",
            "explain",
            "faults",
            "publish-topology",
            "log-format",
        ] {
            assert!(script.contains(command), "{shell}: {command} missing");
        }
    }
}

#[test]
fn installed_as_kubectl_netaware_it_is_a_kubectl_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join(netaware::KUBECTL_PLUGIN);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_netaware"), &plugin).unwrap();
    let help = run(&plugin, &["--help"], None);
    assert!(help.contains("Usage: kubectl netaware"), "{help}");
    // kubectl itself finds it on the PATH and runs it with the rest of
    // the command line (scripts/test installs kubectl; no cluster needed).
    if netaware_testkit::have_tool("kubectl") {
        let kubectl = std::path::Path::new("kubectl");
        let out = run(
            kubectl,
            &["netaware", "completion", "bash"],
            Some(dir.path()),
        );
        assert!(out.contains("_netaware()"), "{out}");
        let listed = run(kubectl, &["plugin", "list"], Some(dir.path()));
        assert!(listed.contains(netaware::KUBECTL_PLUGIN), "{listed}");
    }
}

/// The collector runs in small pages: with transparent huge pages it held
/// up to 260 MB more at 5,000 agents (BENCHMARKS.md). The kernel says so
/// of every process in its status (`THP_enabled`).
#[test]
fn the_collector_turns_transparent_huge_pages_off() {
    let mut thp_enabled = None;
    collector_log_while(&[], |pid| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        thp_enabled = status
            .lines()
            .find_map(|line| line.strip_prefix("THP_enabled:"))
            .map(|value| value.trim().to_owned());
    });
    assert_eq!(
        thp_enabled.as_deref(),
        Some("0"),
        "the collector's THP_enabled in /proc/PID/status"
    );
}
