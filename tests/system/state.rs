//! `--state-dir` with real collectors over real gRPC: what one collector
//! took survives its shutdown into the next (scores at once, and replays
//! still counted once), a damaged newest save falls back to the previous
//! one and is kept aside, and a state directory that cannot be written
//! stops the start.

use std::path::Path;
use std::time::Duration;

use netaware_collector::StateConfig;
use netaware_collector::persist::{checkpoint_file, checkpoints};
use netaware_testkit::{Session, good_peer, window};
use tokio_util::sync::CancellationToken;

fn saving(dir: &Path) -> Option<StateConfig> {
    Some(StateConfig {
        dir: dir.to_owned(),
        // Longer than the test: only the save on shutdown counts.
        every: Duration::from_secs(3_600),
    })
}

/// The pairs the collector's matrix holds.
async fn pairs(collector: &netaware_collector::Collector) -> Vec<(String, String)> {
    let matrix = collector.matrix().await;
    matrix
        .pairs
        .iter()
        .map(|p| (p.src.clone(), p.dst.clone()))
        .collect()
}

/// A collector saving to `dir`, and the sessions of agents a and b.
async fn saving_collector_with_a_and_b(
    dir: &Path,
    shutdown: &CancellationToken,
) -> (netaware_collector::Collector, Session, Session) {
    let collector = netaware_testkit::start_collector_with(Vec::new(), saving(dir), shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let a = Session::hello(&url, "a").await;
    let b = Session::hello(&url, "b").await;
    (collector, a, b)
}

#[tokio::test]
async fn scores_and_exactly_once_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let (first, mut a, _b) = saving_collector_with_a_and_b(dir.path(), &shutdown).await;
    for seq in 1..=3 {
        let ack = a.send(window(seq, vec![good_peer()])).await;
        assert_eq!((ack.code, ack.message.as_str()), (0, ""), "{ack:?}");
    }
    let before = pairs(&first).await;
    assert!(
        before.contains(&("a".to_owned(), "b".to_owned())),
        "{before:?}"
    );
    let figures_before = first.matrix().await.pairs;
    shutdown.cancel();
    first.wait().await;
    assert_eq!(checkpoints(dir.path()).unwrap(), [1], "saved on shutdown");

    let shutdown = CancellationToken::new();
    let second =
        netaware_testkit::start_collector_with(Vec::new(), saving(dir.path()), &shutdown).await;
    // The scores are back before any agent reconnects, figure for figure.
    assert_eq!(pairs(&second).await, before);
    let figures_after = second.matrix().await.pairs;
    for (old, new) in figures_before.iter().zip(&figures_after) {
        assert_eq!(
            (old.rtt_median_ms, old.loss_ratio, old.samples, old.quality),
            (new.rtt_median_ms, new.loss_ratio, new.samples, new.quality),
        );
    }
    // And the count of windows taken goes on from where it was.
    let (_, metrics) = netaware_testkit::get(second.http_addr, "/metrics").await;
    for line in [
        r#"netaware_collector_windows_accepted_total{node="a"} 3"#,
        r#"netaware_collector_window_seq{node="a"} 3"#,
    ] {
        assert!(metrics.contains(line), "{line} not in:\n{metrics}");
    }
    let url = format!("http://{}", second.grpc_addr);
    let mut a = Session::hello(&url, "a").await;
    // The agent replays a window the first collector took: a duplicate.
    assert_eq!(
        a.send(window(3, vec![good_peer()])).await.message,
        "duplicate"
    );
    let ack = a.send(window(4, vec![good_peer()])).await;
    assert_eq!((ack.code, ack.message.as_str()), (0, ""), "{ack:?}");
    shutdown.cancel();
    second.wait().await;
}

#[tokio::test]
async fn a_damaged_newest_save_falls_back_to_the_previous_one_and_is_kept_aside() {
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let (first, mut a, _b) = saving_collector_with_a_and_b(dir.path(), &shutdown).await;
    a.send(window(1, vec![good_peer()])).await;
    let before = pairs(&first).await;
    shutdown.cancel();
    first.wait().await;
    assert_eq!(checkpoints(dir.path()).unwrap(), [1]);

    // A newer checkpoint that is cut short, not a checkpoint at all, of
    // another format, or whole but for one flipped bit.
    let good = std::fs::read(checkpoint_file(dir.path(), 1)).unwrap();
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x04;
    let mut other_format = good.clone();
    other_format[8] = 1;
    for damage in [
        good[..good.len() - 3].to_vec(),
        b"{\"format\": 1, \"nodes\": []}".to_vec(),
        other_format,
        flipped,
    ] {
        let newest = checkpoint_file(dir.path(), 5);
        std::fs::write(&newest, &damage).unwrap();
        let shutdown = CancellationToken::new();
        let collector =
            netaware_testkit::start_collector_with(Vec::new(), saving(dir.path()), &shutdown).await;
        assert_eq!(pairs(&collector).await, before, "the previous save");
        assert_eq!(collector.ingest().state().node_count(), 2);
        let aside = newest.with_extension("bin.damaged");
        assert_eq!(std::fs::read(&aside).unwrap(), damage, "kept for a look");
        shutdown.cancel();
        collector.wait().await;
    }

    // With no whole checkpoint left, the collector starts empty.
    std::fs::write(checkpoint_file(dir.path(), 1), &good[..20]).unwrap();
    let shutdown = CancellationToken::new();
    let collector =
        netaware_testkit::start_collector_with(Vec::new(), saving(dir.path()), &shutdown).await;
    assert!(pairs(&collector).await.is_empty());
    assert_eq!(collector.ingest().state().node_count(), 0);
    shutdown.cancel();
    collector.wait().await;
}

#[tokio::test]
async fn a_state_dir_that_cannot_be_written_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"").unwrap();
    let config = netaware_collector::CollectorConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        inventory: Vec::new(),
        model: netaware_collector::ModelConfig::default(),
        state: saving(&not_a_dir),
        tls: None,
        http_tls: None,
        node_places: None,
        watch: netaware_collector::WatchLimits::default(),
        connections: netaware_collector::ConnectionLimits::default(),
        agent_tokens: None,
        pair_series: netaware_collector::pair_series::DEFAULT_PAIR_SERIES,
    };
    let err = netaware_collector::Collector::start(config, CancellationToken::new())
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("file"), "{err}");
}

#[tokio::test]
async fn a_second_collector_on_the_same_state_dir_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let first =
        netaware_testkit::start_collector_with(Vec::new(), saving(dir.path()), &shutdown).await;
    let config = netaware_testkit::collector_config(Vec::new(), saving(dir.path()));
    let err = netaware_collector::Collector::start(config.clone(), CancellationToken::new())
        .await
        .expect_err("the directory is the first one's");
    assert!(
        err.to_string()
            .contains("another collector uses this state directory"),
        "{err}"
    );
    // Once the first has stopped (its last save made), the next one starts.
    shutdown.cancel();
    first.wait().await;
    let shutdown = CancellationToken::new();
    let next = netaware_collector::Collector::start(config, shutdown.clone())
        .await
        .expect("free again");
    shutdown.cancel();
    next.wait().await;
}
