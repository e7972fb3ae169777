//! Heavy work that no request waits for, on a thread of its own at a lower
//! CPU priority: the collector's snapshot builds and watch deltas, the
//! extender's rebuilds of its copy. On a busy node they then take the CPU
//! that ingest and kube-scheduler's calls leave, instead of queueing those
//! behind a few hundred milliseconds of scoring.
//!
//! [`run`] is for one piece of work; [`spawn_feed`] for a long-running
//! stream (the extender's watch of the collector) whose decoding would
//! otherwise take the request runtime's threads.

use std::cell::Cell;

use tokio::sync::oneshot;

thread_local! {
    /// Whether this thread runs background work.
    static BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is a background thread (at
/// [`BACKGROUND_NICE`], or meant to be). A lock that requests wait on must
/// not be taken on one: the thread holds it for as long as busier threads
/// keep it off the CPU, and the requests wait with it.
pub fn on_background_thread() -> bool {
    BACKGROUND.with(Cell::get)
}

/// The nice value of background threads: ten steps below normal, so that
/// a normal thread gets about nine times their share of a contended core.
pub const BACKGROUND_NICE: i32 = 10;

/// Runs `work` on a new thread at [`BACKGROUND_NICE`] and waits for its
/// result; `None` if the work panicked. (A thread per call: these run
/// about once a second, and a thread that lowered its priority cannot
/// raise it again without privilege, so pooled threads must not.)
pub async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (done, result) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("netaware-background".into())
        .spawn(move || {
            lower_priority();
            let _ = done.send(work());
        });
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start a background thread");
        return None;
    }
    result.await.ok()
}

/// Drives `feed` to its end on a thread of its own at [`BACKGROUND_NICE`],
/// under a single-threaded runtime of its own. The feed ends itself (on
/// its shutdown token); the handle says when it has.
pub fn spawn_feed(
    name: &str,
    feed: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            lower_priority();
            runtime.block_on(feed);
        })
}

/// Lowers this thread's priority; where that is refused (a sandbox), the
/// work runs at normal priority, which is only slower for others.
fn lower_priority() {
    BACKGROUND.with(|background| background.set(true));
    let thread = rustix::thread::gettid();
    if let Err(err) = rustix::process::setpriority_process(Some(thread), BACKGROUND_NICE) {
        tracing::debug!(%err, "cannot lower a background thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_at_a_lower_priority_and_returns_the_result() {
        let nice = run(|| rustix::process::getpriority_process(Some(rustix::thread::gettid())))
            .await
            .expect("the work ran")
            .expect("getpriority");
        assert_eq!(nice, BACKGROUND_NICE);
        assert_eq!(run(on_background_thread).await, Some(true));
        assert!(!on_background_thread());
        assert_eq!(run(|| 6 * 7).await, Some(42));
        assert_eq!(run(|| -> u8 { panic!("lost") }).await, None);
    }

    #[test]
    fn a_feed_runs_to_its_end_at_a_lower_priority() {
        let (sent, received) = std::sync::mpsc::channel();
        let feed = spawn_feed("test-feed", async move {
            // A timer, so that the feed's runtime must drive time.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            let nice = rustix::process::getpriority_process(Some(rustix::thread::gettid()));
            sent.send(nice.expect("getpriority")).expect("send");
        })
        .expect("a thread");
        feed.join().expect("the feed ended");
        assert_eq!(received.recv().expect("a value"), BACKGROUND_NICE);
    }
}
