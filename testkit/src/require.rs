//! Whether a test may run here: root (raw ICMP sockets, the lab) and the
//! tools it compares against. Without them a test skips, unless
//! `NETAWARE_REQUIRE_ROOT=1` (CI, where scripts/test installs them) makes
//! that a failure. And the lock that keeps labs one at a time.

use std::sync::{Mutex, MutexGuard};

/// Whether `program` runs here (`program --version`). Without it a test
/// skips, unless NETAWARE_REQUIRE_ROOT=1 (CI, where scripts/test installs
/// it) makes that a failure.
pub fn have_tool(program: &str) -> bool {
    let runs = std::process::Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    if !runs {
        assert!(
            std::env::var("NETAWARE_REQUIRE_ROOT").as_deref() != Ok("1"),
            "{program} is needed in CI (scripts/test installs it)"
        );
        eprintln!("skipping: no {program}");
    }
    runs
}

/// Whether this test may use root (raw ICMP sockets, the lab). Without
/// root it skips, unless NETAWARE_REQUIRE_ROOT=1 (as in CI) makes it fail.
pub fn have_root(test: &str) -> bool {
    netaware_lab::root_or_skip(test)
}

/// Labs of one test process, one at a time: each builds namespaces and an
/// emulator, and two at once would measure each other's load.
static ONE_LAB_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Holds the lab lock until dropped (a test that panicked holding it left
/// nothing behind that the next one minds). A heavy test in a process that
/// also runs a lab takes it too: the lab would measure its load.
pub fn one_lab_at_a_time() -> MutexGuard<'static, ()> {
    ONE_LAB_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs a heavy async test on a runtime of its own (two workers, as the
/// machine has cores), holding the lab lock: never while a lab measures.
pub fn run_apart_from_labs<F: std::future::Future>(test: F) -> F::Output {
    let _lab = one_lab_at_a_time();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a test runtime")
        .block_on(test)
}
