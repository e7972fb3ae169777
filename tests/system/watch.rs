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
