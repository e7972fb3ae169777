//! Polling until something holds, with a deadline that says what it
//! waited for.

use std::future::Future;
use std::time::Duration;

use netaware_proto::v1 as pb;

/// Polls `check` every 200 ms until it returns `Some`, or panics after `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls the collector's matrix until `done` holds for it, and returns it.
pub async fn wait_for_matrix(
    url: &str,
    what: &str,
    limit: Duration,
    done: impl Fn(&pb::Matrix) -> bool,
) -> pb::Matrix {
    wait_for(what, limit, || async {
        let matrix = netaware::client::ScoresConnection::connect(url)
            .await
            .ok()?
            .matrix()
            .await
            .ok()?;
        done(&matrix).then_some(matrix)
    })
    .await
}
