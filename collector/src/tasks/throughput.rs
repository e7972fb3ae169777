//! The shell around the throughput planner: four times a second it asks the
//! state for the tests due (the plan itself is pure, in
//! [`CollectorState::plan_tests`](crate::state::CollectorState::plan_tests))
//! and sends each order down its node's session. An order that cannot be delivered is logged; its
//! test then fails and the pair comes round again in the next cycle.

use std::sync::Arc;
use std::time::Duration;

use netaware_proto::v1 as pb;
use netaware_proto::v1::collector_message;

use netaware_runtime::clock::now_ms;
use tokio_util::sync::CancellationToken;

use crate::agents::Agents;
use crate::ingest::Ingest;

/// Time between two planning rounds.
const PLAN_EVERY: Duration = Duration::from_millis(netaware_core::throughput_plan::PLAN_EVERY_MS);

/// Plans and orders tests until `shutdown`.
pub async fn run(ingest: Arc<Ingest>, agents: Arc<Agents>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(PLAN_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let orders = ingest.state().plan_tests(now_ms(), rand::random);
        if orders.is_empty() {
            continue;
        }
        for (node, order) in orders {
            let test_id = order.test_id;
            let message = pb::CollectorMessage {
                body: Some(collector_message::Body::ThroughputOrder(order)),
            };
            let delivered = agents.try_send(&node, message);
            if delivered {
                tracing::debug!(%node, test_id, "throughput order sent");
            } else {
                tracing::warn!(%node, test_id, "throughput order not delivered: no open session");
            }
        }
    }
}
