//! A one-entry cache for a value derived from a shared snapshot that
//! callers ask for again and again with the same question: the extender is
//! asked to filter and then to prioritize each pod of a job, every time
//! with the same candidates, and at 5,000 nodes working the answer out
//! walks every link of every candidate.

use std::sync::{Arc, Mutex, PoisonError};

/// The last question asked and its answer.
pub struct LastAnswer<Q, A> {
    last: Mutex<Option<(Q, Arc<A>)>>,
}

impl<Q: PartialEq + Clone, A> LastAnswer<Q, A> {
    /// The answer to `question`: the kept one when the question is the
    /// last one asked, else `work_out()`, kept in its place. The lock is
    /// not held while working out, so two callers may both work.
    pub fn get(&self, question: &Q, work_out: impl FnOnce() -> A) -> Arc<A> {
        let kept = self
            .lock()
            .as_ref()
            .and_then(|(asked, answer)| (asked == question).then(|| Arc::clone(answer)));
        if let Some(answer) = kept {
            return answer;
        }
        let answer = Arc::new(work_out());
        *self.lock() = Some((question.clone(), Arc::clone(&answer)));
        answer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Q, Arc<A>)>> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<Q, A> Default for LastAnswer<Q, A> {
    fn default() -> Self {
        Self {
            last: Mutex::new(None),
        }
    }
}

/// A copy starts empty: what it caches belongs to the original.
impl<Q, A> Clone for LastAnswer<Q, A> {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl<Q, A> std::fmt::Debug for LastAnswer<Q, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LastAnswer")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_question_is_answered_once_another_anew() {
        let memo: LastAnswer<Vec<bool>, usize> = LastAnswer::default();
        let mut work = 0;
        let mut ask = |q: &[bool]| {
            *memo.get(&q.to_vec(), || {
                work += 1;
                q.iter().filter(|b| **b).count()
            })
        };
        assert_eq!(ask(&[true, false, true]), 2);
        assert_eq!(ask(&[true, false, true]), 2);
        assert_eq!(ask(&[true, true, true]), 3);
        assert_eq!(ask(&[true, false, true]), 2);
        assert_eq!(work, 3);
    }
}
