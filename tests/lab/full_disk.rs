//! A state directory that fills up: the collector's saves fail, /healthz
//! says not ready and why, the failing gauge says 1, acks go on saying how
//! far the last good save reaches (so an agent keeps every later window);
//! once there is room again, one save holds everything, and a restarted
//! collector has every window. The directory is a small tmpfs the test
//! mounts (root), the collector and agent sessions real gRPC on loopback.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use netaware_collector::StateConfig;
use netaware_lab::root_or_skip;
use netaware_testkit::{Session, good_peer, window};
use tokio_util::sync::CancellationToken;

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount runs");
        assert!(status.success(), "mount a tmpfs: {status}");
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills what room is left; the filler file.
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let filler = self.path().join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 4096];
        while file
            .write_all(&chunk)
            .and_then(|()| file.sync_all())
            .is_ok()
        {}
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn saving(dir: &Path) -> Option<StateConfig> {
    Some(StateConfig {
        dir: dir.to_owned(),
        every: Duration::from_millis(200),
    })
}

/// Sends windows numbered from `*seq` until an ack says `test` holds, at
/// most for 10 s; that ack's `saved_through`.
async fn send_until(
    agent: &mut Session,
    seq: &mut u64,
    what: &str,
    test: impl Fn(u64) -> bool,
) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        *seq += 1;
        let ack = agent.send(window(*seq, vec![good_peer()])).await;
        assert_eq!(ack.code, 0, "{ack:?}");
        let saved = ack.saved_through.expect("a saving collector says");
        if test(saved) {
            return saved;
        }
        assert!(Instant::now() < deadline, "{what}: saved through {saved}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_turns_healthz_not_ready_and_loses_no_acked_window() {
    if !root_or_skip("a_full_disk_turns_healthz_not_ready_and_loses_no_acked_window") {
        return;
    }
    let disk = SmallDisk::mount("512k");
    let shutdown = CancellationToken::new();
    let collector =
        netaware_testkit::start_collector_with(Vec::new(), saving(disk.path()), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;
    let mut seq = 0;
    send_until(&mut a, &mut seq, "a first save", |saved| saved >= 2).await;
    let (status, _) = netaware_testkit::get(collector.http_addr, "/healthz").await;
    assert_eq!(status, 200);

    // No room left: the saves fail, and the acks stop moving.
    let filler = disk.fill();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (status, body) = loop {
        seq += 1;
        a.send(window(seq, vec![good_peer()])).await;
        let (status, body) = netaware_testkit::get(collector.http_addr, "/healthz").await;
        if status != 200 {
            break (status, body);
        }
        assert!(Instant::now() < deadline, "healthz still ok on a full disk");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("No space left on device"), "{body}");
    let (_, metrics) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    assert!(
        metrics.contains("netaware_collector_state_save_failing 1"),
        "{metrics}"
    );
    let stuck_at = {
        seq += 1;
        let ack = a.send(window(seq, vec![good_peer()])).await;
        ack.saved_through.unwrap()
    };
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        seq += 1;
        let ack = a.send(window(seq, vec![good_peer()])).await;
        assert_eq!(ack.code, 0, "windows are still taken");
        assert_eq!(
            ack.saved_through,
            Some(stuck_at),
            "an ack says only what is on disk"
        );
    }
    assert!(stuck_at < seq);

    // Room again: one save holds every window taken meanwhile.
    std::fs::remove_file(filler).unwrap();
    let through = seq;
    send_until(&mut a, &mut seq, "saved again", |saved| saved >= through).await;
    let (status, body) = netaware_testkit::get(collector.http_addr, "/healthz").await;
    assert_eq!(status, 200, "{body}");
    let (_, metrics) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    assert!(
        metrics.contains("netaware_collector_state_save_failing 0"),
        "{metrics}"
    );
    shutdown.cancel();
    collector.wait().await;

    // A collector started on the directory has every window of a.
    let shutdown = CancellationToken::new();
    let again =
        netaware_testkit::start_collector_with(Vec::new(), saving(disk.path()), &shutdown).await;
    let (_, metrics) = netaware_testkit::get(again.http_addr, "/metrics").await;
    let accepted = format!(r#"netaware_collector_windows_accepted_total{{node="a"}} {seq}"#);
    assert!(metrics.contains(&accepted), "{accepted} not in:\n{metrics}");
    shutdown.cancel();
    again.wait().await;
}
