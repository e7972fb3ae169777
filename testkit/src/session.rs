//! A hand-driven agent session: hello, then windows, reading the acks.

use netaware_proto::v1 as pb;
use netaware_proto::v1::agent_session_client::AgentSessionClient;
use netaware_proto::v1::{agent_message, collector_message};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::fixtures::{hello, hello_message};

/// A hand-driven agent session.
#[derive(Debug)]
pub struct Session {
    up: mpsc::Sender<pb::AgentMessage>,
    down: tonic::Streaming<pb::CollectorMessage>,
}

impl Session {
    /// A session to `url` opened with `first`.
    pub async fn open(url: &str, first: pb::AgentMessage) -> Result<Self, tonic::Status> {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned()).unwrap();
        Self::open_with(endpoint, first).await
    }

    /// A session over `endpoint` (TLS or not) opened with `first`.
    pub async fn open_with(
        endpoint: tonic::transport::Endpoint,
        first: pb::AgentMessage,
    ) -> Result<Self, tonic::Status> {
        Self::open_presenting(endpoint, first, None).await
    }

    /// A session to `url` opened with `first`, presenting `token` as
    /// `authorization: Bearer`, as an agent with `--token-file` does.
    pub async fn open_with_token(
        url: &str,
        first: pb::AgentMessage,
        token: &str,
    ) -> Result<Self, tonic::Status> {
        let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned()).unwrap();
        Self::open_presenting(endpoint, first, Some(token)).await
    }

    async fn open_presenting(
        endpoint: tonic::transport::Endpoint,
        first: pb::AgentMessage,
        token: Option<&str>,
    ) -> Result<Self, tonic::Status> {
        let (up, rx) = mpsc::channel(16);
        up.send(first).await.unwrap();
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("{e:?}")))?;
        let mut client = AgentSessionClient::new(channel);
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().unwrap();
            request.metadata_mut().insert("authorization", value);
        }
        let down = client.session(request).await?.into_inner();
        Ok(Self { up, down })
    }

    /// A session for `node` in zone-a.
    pub async fn hello(url: &str, node: &str) -> Self {
        Self::hello_in(url, node, "zone-a").await
    }

    /// A session for `node` in `zone`.
    pub async fn hello_in(url: &str, node: &str, zone: &str) -> Self {
        let first = hello_message(pb::Hello {
            zone: zone.into(),
            ..hello(node)
        });
        Self::open(url, first).await.expect("hello accepted")
    }

    /// Sends a window and returns its ack, skipping peer sets.
    pub async fn send(&mut self, window: pb::Window) -> pb::Ack {
        let seq = window.seq;
        self.send_unanswered(window).await;
        loop {
            let message = self.down.message().await.unwrap().expect("stream open");
            if let Some(collector_message::Body::Ack(ack)) = message.body {
                assert_eq!(ack.seq, seq);
                return ack;
            }
        }
    }

    /// Sends a window and reads nothing.
    pub async fn send_unanswered(&mut self, window: pb::Window) {
        self.up
            .send(pb::AgentMessage {
                body: Some(agent_message::Body::Window(window)),
            })
            .await
            .unwrap();
    }

    /// Reads on until the collector ends the session; the status it ended
    /// with (OK when the stream just closed).
    pub async fn ended(&mut self) -> tonic::Status {
        loop {
            match self.down.message().await {
                Ok(Some(_)) => {}
                Ok(None) => return tonic::Status::ok("stream closed"),
                Err(status) => return status,
            }
        }
    }
}
