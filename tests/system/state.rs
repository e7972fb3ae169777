//! `--state-dir` with real collectors over real gRPC: what one collector
//! took survives its shutdown into the next (scores at once, and replays
//! still counted once), a damaged file means an empty start and is kept
//! aside, and a state directory that cannot be written stops the start.

use std::path::Path;
use std::time::Duration;

use netaware_collector::StateConfig;
use netaware_collector::persist::FILE_NAME;
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

#[tokio::test]
async fn scores_and_exactly_once_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let first =
        netaware_testkit::start_collector_with(Vec::new(), saving(dir.path()), &shutdown).await;
    let url = format!("http://{}", first.grpc_addr);
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;
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
    assert!(dir.path().join(FILE_NAME).exists(), "saved on shutdown");

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
async fn a_damaged_state_file_means_an_empty_start_and_is_kept_aside() {
    let dir = tempfile::tempdir().unwrap();
    for damage in [
        &b"{\"format\": 1, \"saved_at\": 5, \"nodes\": ["[..],
        b"\x00\x01\x02 not json at all",
        // Well-formed, but a negative RTT.
        br#"{"format":1,"saved_at":1,"nodes":[
            {"name":"a","address":"10.0.0.1","zone":"z","region":"","window_ms":1000,"throughput_port":0,"instance":1,"last_seq":1,"last_seen":1},
            {"name":"b","address":"10.0.0.2","zone":"z","region":"","window_ms":1000,"throughput_port":0,"instance":1,"last_seq":1,"last_seen":1}],
            "pairs":[{"src":"a","dst":"b","windows":[{"end":1,"sent":1,"received":1,"rtt_ms":[-1,1,1,1,1,0]}],"one_way":[],"throughput":null}]}"#,
    ] {
        std::fs::write(dir.path().join(FILE_NAME), damage).unwrap();
        let shutdown = CancellationToken::new();
        let collector =
            netaware_testkit::start_collector_with(Vec::new(), saving(dir.path()), &shutdown).await;
        assert!(pairs(&collector).await.is_empty());
        assert_eq!(collector.ingest().state().node_count(), 0);
        let aside = dir.path().join(format!("{FILE_NAME}.damaged"));
        assert_eq!(std::fs::read(&aside).unwrap(), damage, "kept for a look");
        shutdown.cancel();
        collector.wait().await;
        // The next save is a good file again.
        let saved = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert!(saved.starts_with("{\"format\":1"), "{saved}");
    }
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
        agent_tokens: None,
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
