//! The Scores watch stream and gRPC reflection, over real connections.

use std::time::Duration;

use netaware_proto::follow::{Follower, Progress};
use netaware_proto::v1 as pb;
use netaware_proto::v1::scores_client::ScoresClient;
use netaware_testkit::{Session, good_peer, start_collector, window};
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

#[tokio::test]
async fn watch_sends_the_matrix_then_every_change() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let mut a = Session::hello(&url, "a").await;
    let _b = Session::hello(&url, "b").await;
    let mut scores = ScoresClient::connect(url).await.unwrap();
    let mut watch = scores
        .watch_matrix(pb::WatchRequest {
            min_interval_ms: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();

    // The full state first, then deltas, each applied by a follower.
    let mut follower = Follower::new();
    let mut next_complete = async |follower: &mut Follower| loop {
        let update = watch.next().await.unwrap().unwrap();
        if follower.apply(update).unwrap() == Progress::Complete {
            return follower.matrix();
        }
    };
    let first = next_complete(&mut follower).await;
    assert_eq!(first.nodes.len(), 2);
    assert!(first.pairs.is_empty(), "nothing measured yet");

    assert_eq!(a.send(window(1, vec![good_peer()])).await.code, 0);
    let updated = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            let matrix = next_complete(&mut follower).await;
            if matrix.pairs.iter().any(|p| p.samples == 10) {
                return matrix;
            }
        }
    })
    .await
    .expect("the change arrives on the watch stream");
    assert!(updated.version > first.version);

    // The stream ends when the collector shuts down.
    shutdown.cancel();
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = watch.next().await {}
    })
    .await;
    assert!(end.is_ok(), "the watch stream ends on shutdown");
    collector.wait().await;
}

/// A watch of a network nothing was measured on is NOT_FOUND, naming the
/// networks there are; a name no network can have is INVALID_ARGUMENT.
#[tokio::test]
async fn watching_a_network_nobody_measures_is_not_found() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let _a = Session::hello(&url, "a").await;
    let mut scores = ScoresClient::connect(url).await.unwrap();
    let watch = |network: &str| pb::WatchRequest {
        network: network.into(),
        ..Default::default()
    };
    let status = scores.watch_matrix(watch("rail-9")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound, "{status:?}");
    assert!(status.message().contains("networks: primary"), "{status:?}");
    let status = scores.watch_matrix(watch("Rail 9")).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(scores.watch_matrix(watch("primary")).await.is_ok());
    shutdown.cancel();
}

#[tokio::test]
async fn reflection_lists_the_services() {
    let shutdown = CancellationToken::new();
    let collector = start_collector(Vec::new(), &shutdown).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", collector.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer: {response:?}");
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "netaware.v1.AgentSession",
            "netaware.v1.Scores"
        ]
    );
    shutdown.cancel();
    collector.wait().await;
}

/// A collector whose watch streams are limited as `watch` says.
async fn collector_with(
    watch: netaware_collector::WatchLimits,
    shutdown: &CancellationToken,
) -> netaware_collector::Collector {
    let config = netaware_collector::CollectorConfig {
        watch,
        // Sixty agents' sessions from one loopback address, where a
        // cluster's come from one address each.
        connections: netaware_collector::ConnectionLimits {
            max_per_client: 100,
            ..Default::default()
        },
        ..netaware_testkit::collector_config(Vec::new(), None)
    };
    netaware_collector::Collector::start(config, shutdown.clone())
        .await
        .unwrap()
}

async fn watch_refused(collector: &netaware_collector::Collector, reason: &str) -> f64 {
    let (_, text) = netaware_testkit::get(collector.http_addr, "/metrics").await;
    let series = format!("netaware_collector_watchers_refused_total{{reason=\"{reason}\"}}");
    netaware_testkit::metrics::sample(&text, &series).unwrap_or(0.0)
}

#[tokio::test]
async fn watch_streams_past_the_cap_are_refused_and_a_closed_one_frees_its_slot() {
    let shutdown = CancellationToken::new();
    let limits = netaware_collector::WatchLimits {
        max_watchers: 2,
        ..Default::default()
    };
    let collector = collector_with(limits, &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let _a = Session::hello(&url, "a").await;
    let mut scores = ScoresClient::connect(url).await.unwrap();
    let first = scores.watch_matrix(pb::WatchRequest::default()).await;
    let second = scores.watch_matrix(pb::WatchRequest::default()).await;
    assert!(first.is_ok() && second.is_ok());
    let status = scores
        .watch_matrix(pb::WatchRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("2 watch streams"), "{status:?}");
    assert_eq!(watch_refused(&collector, "too_many").await, 1.0);

    // The client lets one go: its slot is free once the collector notices.
    drop(first);
    let reopened = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if scores
                .watch_matrix(pb::WatchRequest::default())
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(reopened.is_ok(), "a closed stream's slot is reused");
    shutdown.cancel();
    collector.wait().await;
}

/// Windows from `nodes` agents, each towards every other with figures
/// that change every time, so that every delta carries every pair.
async fn feed(sessions: &mut [(String, Session)], names: &[String], seq: u64) {
    for (name, session) in sessions.iter_mut() {
        let peers = names
            .iter()
            .filter(|peer| *peer != name)
            .map(|peer| pb::PeerWindow {
                peer: peer.clone(),
                rtt_median_ms: 0.2 + seq as f64 * 1e-3,
                ..good_peer()
            })
            .collect();
        assert_eq!(session.send(window(seq, peers)).await.code, 0);
    }
}

/// 60 agents' sessions, each window towards all the others, one window
/// each sent: (their names, their sessions).
async fn fleet(url: &str) -> (Vec<String>, Vec<(String, Session)>) {
    let names: Vec<String> = (0..60).map(|i| format!("node-{i:02}")).collect();
    let mut sessions = Vec::new();
    for name in &names {
        sessions.push((name.clone(), Session::hello(url, name).await));
    }
    feed(&mut sessions, &names, 1).await;
    (names, sessions)
}

/// A watch's stream and the follower of it: the bytes of its first
/// update (a full state) and the follower once that update is applied.
async fn followed(
    url: &str,
    compact: bool,
) -> (tonic::Streaming<pb::MatrixUpdate>, Follower, usize) {
    let mut watch = ScoresClient::connect(url.to_owned())
        .await
        .unwrap()
        .watch_matrix(pb::WatchRequest {
            min_interval_ms: 100,
            compact,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut follower = Follower::new();
    let mut bytes = 0;
    loop {
        let update = watch.next().await.unwrap().unwrap();
        bytes += prost::Message::encoded_len(&update);
        let other_form = if compact {
            &update.pairs.len()
        } else {
            &update.compact_pairs.len()
        };
        assert_eq!(*other_form, 0, "pairs in the form asked for only");
        if follower.apply(update).unwrap() == Progress::Complete {
            return (watch, follower, bytes);
        }
    }
}

/// Takes updates until the follower is at `version`.
async fn follow_to(
    watch: &mut tonic::Streaming<pb::MatrixUpdate>,
    follower: &mut Follower,
    version: u64,
) {
    while follower.version() < version {
        let update = watch.next().await.unwrap().unwrap();
        follower.apply(update).unwrap();
    }
}

/// A compact watch and a full one of the same collector carry the same
/// matrix, bit for bit, the compact one in well under half the bytes.
#[tokio::test]
async fn a_compact_watch_carries_the_same_matrix_in_fewer_bytes() {
    let shutdown = CancellationToken::new();
    let collector = collector_with(Default::default(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let (_names, _sessions) = fleet(&url).await;
    let mut scores = ScoresClient::connect(url.clone()).await.unwrap();
    let measured = 60 * 59;
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let matrix = scores
                .get_matrix(pb::MatrixRequest::default())
                .await
                .unwrap()
                .into_inner();
            if matrix.pairs.len() == measured {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("every pair scored");
    let (mut full_watch, mut full, full_bytes) = followed(&url, false).await;
    let (mut compact_watch, mut compact, compact_bytes) = followed(&url, true).await;
    assert!(
        compact_bytes * 2 < full_bytes,
        "compact {compact_bytes} bytes, full {full_bytes}"
    );
    // The two may have started a version apart: both at the later one.
    let version = full.version().max(compact.version());
    tokio::time::timeout(Duration::from_secs(10), async {
        follow_to(&mut full_watch, &mut full, version).await;
        follow_to(&mut compact_watch, &mut compact, version).await;
    })
    .await
    .expect("both followers at the same version");
    // A pair left alone by a delta keeps the age it was sent with.
    let figures = |follower: &Follower| {
        let mut pairs: Vec<Vec<u8>> = follower
            .matrix()
            .pairs
            .into_iter()
            .map(|pair| prost::Message::encode_to_vec(&pb::Pair { age_s: 0.0, ..pair }))
            .collect();
        pairs.sort();
        pairs
    };
    assert_eq!(full.version(), compact.version());
    assert_eq!(figures(&full).len(), measured);
    assert_eq!(figures(&compact), figures(&full));
    assert_eq!(compact.scored().pairs(), full.scored().pairs());
    shutdown.cancel();
    collector.wait().await;
}

/// A watch stream on a connection of its own with HTTP/2's smallest
/// default windows: the collector can hand it little before it must wait.
async fn small_window_watch(url: &str) -> tonic::Streaming<pb::MatrixUpdate> {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap();
    ScoresClient::new(channel)
        .watch_matrix(pb::WatchRequest {
            min_interval_ms: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn a_watcher_that_stops_reading_is_cut_off_and_the_others_go_on() {
    let shutdown = CancellationToken::new();
    let limits = netaware_collector::WatchLimits {
        send_deadline: Duration::from_secs(1),
        ..Default::default()
    };
    let collector = collector_with(limits, &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let (names, mut sessions) = fleet(&url).await;

    // A client that opens a stream and never reads it.
    let mut stalled = small_window_watch(&url).await;
    // And one that reads.
    let mut reading = ScoresClient::connect(url.clone())
        .await
        .unwrap()
        .watch_matrix(pb::WatchRequest {
            min_interval_ms: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let reader = tokio::spawn(async move {
        let mut updates = 0u64;
        while let Some(Ok(_)) = reading.next().await {
            updates += 1;
        }
        updates
    });

    // Every pair changes at every window: megabytes of deltas, which the
    // stalled stream cannot take.
    let mut seq = 2;
    let cut_off = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            feed(&mut sessions, &names, seq).await;
            seq += 1;
            if watch_refused(&collector, "stalled").await >= 1.0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(cut_off.is_ok(), "the stalled watcher is cut off");
    assert_eq!(watch_refused(&collector, "stalled").await, 1.0, "only it");
    // What it had been sent is still there to read, then its stream ends.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(Ok(_)) = stalled.next().await {}
    })
    .await;
    assert!(ended.is_ok(), "the stalled stream ends");
    // The reading watcher kept up all along, and goes on.
    feed(&mut sessions, &names, seq).await;
    shutdown.cancel();
    let updates = reader.await.unwrap();
    assert!(updates > seq / 2, "{updates} updates for {seq} windows");
    collector.wait().await;
}

/// A follower that stops reading for a while (longer than the collector
/// keeps a matrix version for it) and then reads on: its stream goes on,
/// every update it gets applies, and it catches up with the matrix.
#[tokio::test]
async fn a_follower_that_pauses_catches_up_on_the_same_stream() {
    let shutdown = CancellationToken::new();
    let collector = collector_with(Default::default(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let (names, mut sessions) = fleet(&url).await;
    let mut watch = small_window_watch(&url).await;
    // Not read for 3 s while every pair changes.
    let pause = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut seq = 2;
    while tokio::time::Instant::now() < pause {
        feed(&mut sessions, &names, seq).await;
        seq += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What the matrix is now, by another client.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let latest = ScoresClient::connect(url.clone())
        .await
        .unwrap()
        .get_matrix(pb::MatrixRequest::default())
        .await
        .unwrap()
        .into_inner();
    // Then read on: everything applies, and the follower gets there.
    let mut follower = Follower::new();
    let caught_up = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let update = watch.next().await.expect("stream open").expect("no error");
            if follower.apply(update).expect("every update applies") == Progress::Complete
                && follower.version() >= latest.version
            {
                return follower.matrix();
            }
        }
    })
    .await;
    let matrix = caught_up.expect("the follower caught up");
    assert_eq!(matrix.pairs.len(), 60 * 59);
    let figures = |m: &pb::Matrix| {
        let mut f: Vec<(String, String, u64, Option<f64>)> = m
            .pairs
            .iter()
            .map(|p| (p.src.clone(), p.dst.clone(), p.samples, p.rtt_median_ms))
            .collect();
        f.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        f
    };
    assert_eq!(figures(&matrix), figures(&latest));
    assert_eq!(watch_refused(&collector, "stalled").await, 0.0);
    shutdown.cancel();
    collector.wait().await;
}

/// A reader paging through the matrix while it changes gets every page of
/// the version it started on (the collector keeps that snapshot for it),
/// and a token to a version nobody kept is refused with a clear status.
#[tokio::test]
async fn a_reader_pages_through_one_version_while_the_matrix_changes() {
    let shutdown = CancellationToken::new();
    let collector = collector_with(Default::default(), &shutdown).await;
    let url = format!("http://{}", collector.grpc_addr);
    let (names, mut sessions) = fleet(&url).await;
    let mut client = ScoresClient::connect(url.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut request = pb::MatrixRequest {
        page_size: 500,
        ..Default::default()
    };
    let first = client
        .get_matrix(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(
        !first.next_page_token.is_empty(),
        "3,540 pairs in pages of 500"
    );
    let mut pairs = first.pairs.len();
    let mut token = first.next_page_token.clone();
    let mut seq = 2;
    while !token.is_empty() {
        // Every pair changes, and new snapshots are published, between
        // two pages.
        feed(&mut sessions, &names, seq).await;
        seq += 1;
        tokio::time::sleep(Duration::from_millis(600)).await;
        request.page_token = token;
        let page = client
            .get_matrix(request.clone())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.version, first.version, "every page of one version");
        pairs += page.pairs.len();
        token = page.next_page_token;
    }
    assert_eq!(pairs, 60 * 59);
    assert!(seq > 5, "the matrix changed {} times while paged", seq - 2);
    let now = client
        .get_matrix(pb::MatrixRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(now.version > first.version);
    // A version nobody is paging through is not kept.
    request.page_token = format!("{}:500", now.version + 1_000);
    let status = client.get_matrix(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Aborted, "{status:?}");
    shutdown.cancel();
    collector.wait().await;
}
