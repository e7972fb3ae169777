//! Nothing lost, nothing twice, on the lab's default topology: the
//! collector (saving its state, `--state-dir`) is stopped for 30 s while the
//! agents keep measuring, then started again; later zone-c is cut off for
//! 20 s and healed. And the collector is killed (SIGKILL, no save on the
//! way out) at random moments, some of them in the middle of a save, and
//! started again. Each time the books must balance again for every node:
//! the windows the collector accepted from it, over all of its lifetimes,
//! equal the sequence number of the node's last window (agents number their
//! windows from 1 without gaps, so an agent that dropped one would leave a
//! gap), so every window was taken exactly once; and the windows of the
//! outage arrive. Needs root.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use netaware::lab_system::{AgentTiming, LabSystem, METRICS_PORT};
use netaware_lab::{Faults, Topology, root_or_skip};

/// One lab at a time: two would share two cores and blur the timing.
static ONE_LAB_AT_A_TIME: Mutex<()> = Mutex::new(());

const TIMING: AgentTiming = AgentTiming::FAST;

/// The collector's /metrics, through the side door.
fn scrape(collector: SocketAddr) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (status, body) = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(5),
            netaware_testkit::get(collector, "/metrics"),
        )
        .await
        .unwrap_or((0, String::new()))
    });
    (status == 200).then_some(body)
}

/// `metric{node="x"} value` lines, by node.
fn by_node(text: &str, metric: &str) -> BTreeMap<String, u64> {
    let prefix = format!("{metric}{{node=\"");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| {
            let (node, value) = rest.split_once("\"} ")?;
            Some((node.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The windows accepted from each node and the sequence number of its last
/// window, once they agree for all nine nodes and every node is past
/// `past` (or after `limit`, a failure that shows both).
fn balanced_books(
    collector: SocketAddr,
    what: &str,
    limit: Duration,
    past: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    let deadline = Instant::now() + limit;
    loop {
        let text = scrape(collector).unwrap_or_default();
        let accepted = by_node(&text, "netaware_collector_windows_accepted_total");
        let seqs = by_node(&text, "netaware_collector_window_seq");
        let caught_up = seqs.len() == 9
            && past
                .iter()
                .all(|(node, seq)| seqs.get(node).is_some_and(|s| s > seq));
        if caught_up && accepted == seqs {
            let duplicates = by_node(&text, "netaware_collector_windows_duplicate_total");
            println!(
                "{what}: accepted = last seq for every node {seqs:?}; replays acknowledged as duplicates {duplicates:?}"
            );
            return seqs;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: after {limit:?}, accepted {accepted:?} vs last seq {seqs:?} (must pass {past:?})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn nothing_is_lost_when_the_collector_restarts_or_a_zone_is_cut_off() {
    if !root_or_skip("collector restart on the lab") {
        return;
    }
    // Alone: labs and the timing this measures share two cores.
    let _one = netaware_testkit::one_lab_at_a_time();
    let _serial = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let state = tempfile::tempdir().unwrap();
    let (mut system, collector, before) = saving_lab(state.path());

    // The collector away for 30 s: 15 windows per agent wait in its buffer.
    let outage = Duration::from_secs(30);
    system.stop_collector();
    std::thread::sleep(outage);
    system.start_collector().unwrap();
    // The scores are back at once, from the saved state, before any agent
    // has reconnected.
    let started = Instant::now();
    let restored = loop {
        if let Ok(matrix) = system.matrix() {
            break matrix;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "collector back");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        restored.pairs.len(),
        72,
        "every pair back within one window"
    );
    assert!(restored.pairs.iter().all(|p| p.samples > 0));
    let outage_windows = (outage.as_millis() / TIMING.window.as_millis()) as u64;
    let target: BTreeMap<String, u64> = before
        .iter()
        .map(|(node, seq)| (node.clone(), seq + outage_windows - 1))
        .collect();
    let after_restart = balanced_books(
        collector,
        "after the restart",
        Duration::from_secs(90),
        &target,
    );

    // Zone-c cut off from everything (the collector included) for 20 s.
    let mut faults = Faults::default();
    faults.cut_zones.insert("zone-c".into());
    system.lab().set_faults(faults);
    std::thread::sleep(Duration::from_secs(20));
    system.lab().set_faults(Faults::default());
    let target: BTreeMap<String, u64> = after_restart
        .iter()
        .map(|(node, seq)| (node.clone(), seq + 10))
        .collect();
    balanced_books(
        collector,
        "after the cut healed",
        Duration::from_secs(90),
        &target,
    );
}

/// The lab's default topology with a collector that saves its state in
/// `state` every second, once every pair is measured and the books
/// balance: the system, the collector's metrics address, and the books.
fn saving_lab(state: &Path) -> (LabSystem, SocketAddr, BTreeMap<String, u64>) {
    let flags: Vec<String> = vec![
        "--throughput-budget=0".into(),
        format!("--state-dir={}", state.display()),
        "--state-interval=1s".into(),
    ];
    let exe = Path::new(env!("CARGO_BIN_EXE_netaware"));
    let system =
        LabSystem::start(Topology::named("default").unwrap(), exe, TIMING, &flags).unwrap();
    let access = system.lab().open_access("control").unwrap();
    let collector = SocketAddr::new(IpAddr::V4(access), METRICS_PORT);
    every_pair_measured(&system);
    let books = balanced_books(
        collector,
        "running",
        Duration::from_secs(10),
        &BTreeMap::new(),
    );
    (system, collector, books)
}

/// Waits until every one of the 72 pairs has samples.
fn every_pair_measured(system: &LabSystem) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !system
        .matrix()
        .is_ok_and(|m| m.pairs.len() == 72 && m.pairs.iter().all(|p| p.samples > 0))
    {
        assert!(Instant::now() < deadline, "every pair measured");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits, for at most `limit`, until the collector is in the middle of a
/// save: a checkpoint being written (its temporary file exists), or an
/// append under way (a journal grew since the wait began, and its sync
/// may not be done); whether it was.
fn in_a_save(state_dir: &Path, limit: Duration) -> bool {
    let journal_bytes = || -> u64 {
        std::fs::read_dir(state_dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("journal-"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    };
    let checkpointing = || {
        std::fs::read_dir(state_dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
    };
    let before = journal_bytes();
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if checkpointing() || journal_bytes() != before {
            return true;
        }
        std::hint::spin_loop();
    }
    false
}

#[test]
fn nothing_acknowledged_is_lost_when_the_collector_is_killed() {
    if !root_or_skip("collector killed on the lab") {
        return;
    }
    // Alone: labs and the timing this measures share two cores.
    let _one = netaware_testkit::one_lab_at_a_time();
    let _serial = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let state = tempfile::tempdir().unwrap();
    // Saves every second: half of each 2 s window's acks reach past the
    // last save when a kill comes, and saves are frequent enough to kill
    // some in the middle.
    let (mut system, collector, before) = saving_lab(state.path());

    const KILLS: usize = 6;
    let mut books = before;
    let mut during_a_save = 0;
    for kill in 1..=KILLS {
        // Every agent has reported to this collector (its books balance
        // past where they stood), so acks are flowing when the kill comes:
        // within a window's time, so that some acks reach past the last
        // save; every other kill waits for a save to be under way.
        books = balanced_books(
            collector,
            &format!("before kill {kill}"),
            Duration::from_secs(60),
            &books,
        );
        std::thread::sleep(Duration::from_millis(rand::random_range(0..2_000)));
        let mid_save = kill % 2 == 1 && in_a_save(state.path(), Duration::from_secs(3));
        system.kill_collector();
        during_a_save += usize::from(mid_save);
        println!(
            "kill {kill}: {}",
            if mid_save {
                "during a save"
            } else {
                "between saves"
            }
        );
        std::thread::sleep(Duration::from_millis(rand::random_range(200..3_000)));
        system.start_collector().unwrap();
    }
    assert!(
        during_a_save >= 2,
        "{during_a_save} of {KILLS} kills landed in a save"
    );
    balanced_books(
        collector,
        "after the kills",
        Duration::from_secs(90),
        &books,
    );
}
