//! How far the last save reaches, for each agent: every ack carries it
//! (`saved_through`), so that an agent keeps each window that a collector
//! killed before its next save would lose, and sends it again to the
//! collector that restarts from that save.
//!
//! A collector without a state directory saves nothing and says nothing:
//! its acks carry no mark, and agents forget a window once it is
//! acknowledged, as nothing more durable is to come.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

/// The sequence number of each agent's last window in the last save, by
/// node, with the agent instance it belongs to.
#[derive(Debug, Default)]
pub struct SavedMarks {
    /// `None` while the collector saves nothing.
    marks: Mutex<Option<HashMap<String, Mark>>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Mark {
    instance: u64,
    last_seq: u64,
}

impl SavedMarks {
    /// Notes what a save that is now on disk holds, as (node, instance,
    /// last_seq) in the order saved: a node's mark moves up, or to the
    /// instance that said hello since (the first call also says that this
    /// collector saves: acks carry marks from then on).
    pub fn saved<'a>(&self, marks: impl IntoIterator<Item = (&'a str, u64, u64)>) {
        let mut held = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let held = held.get_or_insert_with(HashMap::new);
        for (node, instance, last_seq) in marks {
            match held.get_mut(node) {
                Some(mark) if mark.instance == instance => {
                    mark.last_seq = mark.last_seq.max(last_seq);
                }
                _ => {
                    held.insert(node.to_owned(), Mark { instance, last_seq });
                }
            }
        }
    }

    /// What an ack to `node`'s agent `instance` says is saved: `None`
    /// when the collector saves nothing; 0 when no save holds a window of
    /// this instance yet.
    pub fn saved_through(&self, node: &str, instance: u64) -> Option<u64> {
        let marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        let marks = marks.as_ref()?;
        Some(
            marks
                .get(node)
                .filter(|mark| mark.instance == instance)
                .map_or(0, |mark| mark.last_seq),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_belong_to_one_agent_instance_and_only_a_saving_collector_sends_them() {
        let marks = SavedMarks::default();
        assert_eq!(marks.saved_through("n1", 7), None, "saves nothing");
        marks.saved([]);
        assert_eq!(marks.saved_through("n1", 7), Some(0), "saves, nothing yet");
        marks.saved([("n1", 7, 12)]);
        assert_eq!(marks.saved_through("n1", 7), Some(12));
        assert_eq!(
            marks.saved_through("n1", 8),
            Some(0),
            "a restarted agent numbers from 1 again: nothing of it is saved"
        );
        assert_eq!(marks.saved_through("n2", 1), Some(0), "not in the save");
        marks.saved([("n1", 7, 15), ("n1", 7, 14)]);
        assert_eq!(marks.saved_through("n1", 7), Some(15), "never back");
        marks.saved([("n1", 8, 2)]);
        assert_eq!(marks.saved_through("n1", 8), Some(2), "the new instance's");
        assert_eq!(marks.saved_through("n1", 7), Some(0));
    }
}
