//! Heavy work that no request waits for, on a thread of its own at a lower
//! CPU priority: the collector's snapshot builds and watch deltas, the
//! extender's rebuilds of its copy. On a busy node they then take the CPU
//! that ingest and kube-scheduler's calls leave, instead of queueing those
//! behind a few hundred milliseconds of scoring.

use tokio::sync::oneshot;

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

/// Lowers this thread's priority; where that is refused (a sandbox), the
/// work runs at normal priority, which is only slower for others.
fn lower_priority() {
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
        assert_eq!(run(|| 6 * 7).await, Some(42));
        assert_eq!(run(|| -> u8 { panic!("lost") }).await, None);
    }
}
