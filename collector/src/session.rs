//! The agent session service: one bidirectional stream per agent. Hello
//! first, then windows, each acknowledged with how far the last save
//! reaches ([`crate::saved_marks`]); peer sets go down whenever the set of
//! nodes changes.

use std::sync::Arc;

use netaware_proto::v1 as pb;
use netaware_proto::v1::{agent_message, collector_message};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use netaware_runtime::clock::now_ms;
use tokio_util::sync::CancellationToken;

use crate::ResponseStream;
use crate::agents::{Agents, SessionSender};
use crate::ingest::Ingest;
use crate::metrics::{NodeLabels, Refusal, WorkMetrics};
use crate::node_places::NodePlaces;
use crate::saved_marks::SavedMarks;
use crate::state::Ingested;

/// Far enough to never come before the first peer set is sent.
const NO_STEP_YET: std::time::Duration = std::time::Duration::from_secs(86_400);

/// The agent session service and what it needs.
#[derive(Debug, Clone)]
pub struct SessionService {
    /// Where windows go.
    pub ingest: Arc<Ingest>,
    /// The open sessions and the membership.
    pub agents: Arc<Agents>,
    /// How far the last save reaches, for the acks.
    pub saved_marks: Arc<SavedMarks>,
    /// Counters of the collector's work.
    pub work: Arc<WorkMetrics>,
    /// Whether an agent may report only for the node its client
    /// certificate names (mutual TLS).
    pub node_identity: bool,
    /// Where each agent's zone is read (`--zones-from-nodes`); `None`: the
    /// hello's zone is taken as said.
    pub node_places: Option<Arc<NodePlaces>>,
    /// Where each agent's token is checked (`--agent-tokens`); `None`: no
    /// token is asked for.
    pub agent_tokens: Option<Arc<crate::agent_tokens::AgentTokens>>,
    /// Sessions end at shutdown.
    pub shutdown: CancellationToken,
}

#[tonic::async_trait]
impl pb::agent_session_server::AgentSession for SessionService {
    type SessionStream = ResponseStream<pb::CollectorMessage>;

    async fn session(
        &self,
        request: Request<Streaming<pb::AgentMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        // Under mutual TLS, the client's certificate says which node it is.
        let certificate = request
            .peer_certs()
            .and_then(|certs| certs.first().map(|c| c.to_vec()));
        // With `--agent-tokens`, the pod's service-account token says it.
        let token = crate::agent_tokens::bearer(request.metadata());
        let mut inbound = request.into_inner();
        let first = tokio::time::timeout(crate::HELLO_DEADLINE, inbound.message()).await;
        let hello = match first {
            Ok(Ok(Some(pb::AgentMessage {
                body: Some(agent_message::Body::Hello(hello)),
            }))) => hello,
            Err(_) => {
                self.work.refused(Refusal::NoHello);
                return Err(Status::deadline_exceeded(format!(
                    "no hello within {} s",
                    crate::HELLO_DEADLINE.as_secs()
                )));
            }
            Ok(Err(status)) => {
                if sent_something_bad(&status) {
                    self.work.refused(Refusal::StreamError);
                }
                return Err(status);
            }
            Ok(Ok(_)) => {
                self.work.refused(Refusal::OutOfOrder);
                return Err(Status::invalid_argument(
                    "the first message of a session must be a hello",
                ));
            }
        };
        let shared = self.clone();
        let refuse = |why: String| {
            tracing::warn!(node = %hello.node, %why, "session refused");
            shared.work.refused(Refusal::Identity);
            Status::permission_denied(why)
        };
        if shared.node_identity {
            crate::identity::check(certificate.as_deref(), &hello)
                .map_err(|refused| refuse(refused.to_string()))?;
        }
        if let Some(tokens) = &shared.agent_tokens {
            tokens
                .check(token.as_deref(), &hello)
                .await
                .map_err(|refused| refuse(refused.to_string()))?;
        }
        // The Node's labels, not the agent, say where it is.
        if let Some(places) = &shared.node_places {
            places
                .check(&hello)
                .await
                .map_err(|refused| refuse(refused.to_string()))?;
        }
        let (node, changed) = {
            let mut state = shared.ingest.state();
            let result = state.hello(&hello, now_ms()).map_err(|e| {
                shared.work.refused(Refusal::InvalidHello);
                Status::invalid_argument(e.0)
            })?;
            shared.ingest.changed(state.version());
            result
        };
        if changed {
            shared.agents.membership_changed();
        }
        shared.work.sessions_opened.inc();
        shared.work.node_seen(&node);
        tracing::info!(%node, zone = %hello.zone, "agent session opened");
        let (down, down_rx) = mpsc::channel(256);
        tokio::spawn(serve_session(shared, node, hello.instance, inbound, down));
        Ok(Response::new(Box::pin(
            ReceiverStream::new(down_rx).map(|item| *item),
        )))
    }
}

/// A 64-bit hash of a peer set's wire form: two sets that differ have the
/// same one with a chance of one in 2^64.
fn fingerprint(peers: &[pb::Peer]) -> u64 {
    use prost::Message;
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    for peer in peers {
        peer.encode_to_vec().hash(&mut hasher);
    }
    hasher.finish()
}

/// Whether a stream's error is the client's message (too large, not
/// protobuf), not the client going away.
fn sent_something_bad(status: &Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::OutOfRange | tonic::Code::Internal
    )
}

async fn serve_session(
    shared: SessionService,
    node: String,
    instance: u64,
    mut inbound: Streaming<pb::AgentMessage>,
    down: SessionSender,
) {
    // A newer session of the same node replaces this one (and this one
    // ends any older).
    let replaced = shared.agents.open(&node, down.clone());
    let mut membership = shared.agents.subscribe();
    // The first peer set at once; later ones at most one per spacing
    // (`Members::peer_set_spacing`), so that a thousand agents joining do
    // not send a thousand sets each, and only when the set changed.
    let mut peer_set_due = true;
    let mut next_peer_set = tokio::time::Instant::now();
    // What the last set sent was, as a fingerprint of its wire form: a
    // copy of the set would cost each session kilobytes (at 5,000
    // sessions, tens of megabytes) to answer "did it change?".
    let mut last_peer_set: Option<u64> = None;
    // Bounded sets rotate: a new set at each step (when the next step
    // begins is known once a set was sent).
    let mut next_epoch = tokio::time::Instant::now() + NO_STEP_YET;
    let by_node = NodeLabels { node: node.clone() };
    let message = |body| Box::new(Ok(pb::CollectorMessage { body: Some(body) }));
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => {
                let _ = down.send(Box::new(Err(Status::unavailable("collector shutting down")))).await;
                break;
            }
            () = replaced.cancelled() => {
                end_replaced(&shared, &node, &down).await;
                break;
            }
            Ok(()) = membership.changed() => peer_set_due = true,
            () = tokio::time::sleep_until(next_epoch) => {
                peer_set_due = true;
                next_epoch = tokio::time::Instant::now() + NO_STEP_YET;
            }
            () = tokio::time::sleep_until(next_peer_set), if peer_set_due => {
                let members = shared.agents.members(&shared.ingest).await;
                peer_set_due = members.version < *membership.borrow();
                next_peer_set = tokio::time::Instant::now() + members.peer_set_spacing();
                let now = now_ms();
                next_epoch = tokio::time::Instant::now() + members.until_next_epoch(&node, now);
                let peers = members.peer_set(&node, members.epoch(&node, now));
                let fingerprint = fingerprint(&peers);
                if last_peer_set == Some(fingerprint) {
                    continue;
                }
                shared.work.peer_set_size.observe(peers.len() as f64);
                last_peer_set = Some(fingerprint);
                if down.send(message(collector_message::Body::PeerSet(pb::PeerSet { peers }))).await.is_err() {
                    break;
                }
            }
            next = inbound.message() => {
                let window = match next {
                    Ok(Some(pb::AgentMessage { body: Some(agent_message::Body::Window(window)) })) => window,
                    Ok(Some(_)) => {
                        shared.work.refused(Refusal::OutOfOrder);
                        let _ = down.send(Box::new(Err(Status::invalid_argument("only windows may follow the hello")))).await;
                        break;
                    }
                    Ok(None) => break,
                    Err(status) if sent_something_bad(&status) => {
                        // Tell the agent why (a message over the size
                        // limit says so).
                        tracing::warn!(%node, %status, "session ended: a message could not be read");
                        shared.work.refused(Refusal::StreamError);
                        let _ = down.send(Box::new(Err(status))).await;
                        break;
                    }
                    Err(status) => {
                        tracing::debug!(%node, %status, "session stream ended");
                        break;
                    }
                };
                let received = std::time::Instant::now();
                let ack = {
                    let mut state = shared.ingest.state();
                    // Checked under the lock that takes the window: a
                    // newer instance's hello may have come in between.
                    if !state.speaks_for(&node, instance) {
                        None
                    } else {
                    let before = state.throughput_counts();
                    let ack = match state.ingest(&node, &window, now_ms()) {
                        Ok(Ingested::Accepted) => {
                            shared.work.windows_accepted.get_or_create(&by_node).inc();
                            pb::Ack { seq: window.seq, code: 0, ..pb::Ack::default() }
                        }
                        Ok(Ingested::Duplicate) => {
                            shared.work.windows_duplicate.get_or_create(&by_node).inc();
                            pb::Ack { seq: window.seq, code: 0, message: "duplicate".into(), ..pb::Ack::default() }
                        }
                        Err(invalid) => {
                            shared.work.windows_rejected.get_or_create(&by_node).inc();
                            tracing::warn!(%node, seq = window.seq, reason = %invalid, "window refused");
                            pb::Ack { seq: window.seq, code: tonic::Code::InvalidArgument.into(), message: invalid.0, ..pb::Ack::default() }
                        }
                    };
                    let after = state.throughput_counts();
                    if after.ignored > before.ignored {
                        tracing::warn!(%node, results = after.ignored - before.ignored, "throughput results for tests this collector did not order (or no longer remembers): not applied");
                    }
                    if after.failed > before.failed {
                        tracing::info!(%node, tests = after.failed - before.failed, "throughput tests failed");
                    }
                    shared.ingest.changed(state.version());
                    Some(ack)
                    }
                };
                let Some(ack) = ack else {
                    end_replaced(&shared, &node, &down).await;
                    break;
                };
                let ack = pb::Ack { saved_through: shared.saved_marks.saved_through(&node, instance), ..ack };
                if down.send(message(collector_message::Body::Ack(ack))).await.is_err() {
                    break;
                }
                shared.work.ingest.observe(received.elapsed().as_secs_f64());
            }
        }
    }
    shared.agents.close(&node, &down);
    tracing::info!(%node, "agent session closed");
}

/// Ends a session that a newer agent instance of its node replaced: its
/// windows are no longer taken (they stay unacked with the agent, which
/// says hello again to send them under its own mark).
async fn end_replaced(shared: &SessionService, node: &str, down: &SessionSender) {
    tracing::warn!(%node, "agent session replaced by a newer agent instance of the node");
    shared.work.refused(Refusal::Replaced);
    let _ = down
        .send(Box::new(Err(Status::aborted(format!(
            "replaced by a newer agent instance of node {node}"
        )))))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, address: &str) -> pb::Peer {
        pb::Peer {
            name: name.into(),
            address: address.into(),
            ..pb::Peer::default()
        }
    }

    #[test]
    fn a_peer_set_that_changed_in_any_way_has_another_fingerprint() {
        let set = [peer("a", "10.0.0.1"), peer("b", "10.0.0.2")];
        assert_eq!(fingerprint(&set), fingerprint(&set.clone()));
        let moved = [peer("a", "10.0.0.1"), peer("b", "10.0.0.3")];
        let reordered = [peer("b", "10.0.0.2"), peer("a", "10.0.0.1")];
        let fewer = [peer("a", "10.0.0.1")];
        // Field boundaries count: "ab" + "" is not "a" + "b".
        let shifted = [peer("a", "10.0.0.1b"), peer("", "10.0.0.2")];
        for other in [&moved[..], &reordered, &fewer, &shifted, &[]] {
            assert_ne!(fingerprint(&set), fingerprint(other), "{other:?}");
        }
    }
}
