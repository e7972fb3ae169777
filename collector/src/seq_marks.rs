//! Where the duplicate check stands for each node: the last sequence
//! number accepted from each of its agent instances, and which instance
//! speaks for the node now.
//!
//! Sequence numbers are an agent process's own: two agents of one node (a
//! DaemonSet rolling update with surge, a pod stuck terminating) count from
//! different places. A mark per node would let either one's windows make
//! the other's look like duplicates; a mark per instance cannot, and the
//! collector takes windows only from the instance that said hello last
//! (the session layer ends the older session). A node's few latest
//! instances are remembered, so that the older agent coming back (it
//! retries when its session is ended) replays into its own mark, not a
//! fresh one that would take its replays twice.

/// Instances remembered per node beside the current one.
pub const REMEMBERED_INSTANCES: usize = 4;

/// One node's marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMarks {
    /// The instance that said hello last: the only one whose windows count.
    current: u64,
    /// (instance, last sequence accepted), the current one among them,
    /// most recent hello last.
    marks: Vec<(u64, u64)>,
}

impl NodeMarks {
    /// A node first heard from `instance`, with windows through `last_seq`
    /// already accepted (0: none; a restored mark: what the save held).
    pub fn new(instance: u64, last_seq: u64) -> Self {
        Self {
            current: instance,
            marks: vec![(instance, last_seq)],
        }
    }

    /// `instance` said hello: it speaks for the node from now on, keeping
    /// its mark if it had one.
    pub fn hello(&mut self, instance: u64) {
        self.current = instance;
        let mark = match self.marks.iter().position(|(i, _)| *i == instance) {
            Some(at) => self.marks.remove(at),
            None => (instance, 0),
        };
        self.marks.push(mark);
        if self.marks.len() > REMEMBERED_INSTANCES {
            self.marks.remove(0);
        }
    }

    /// The instance whose windows count now.
    pub fn current(&self) -> u64 {
        self.current
    }

    /// The last sequence number accepted from the current instance.
    pub fn last_seq(&self) -> u64 {
        self.marks.last().map_or(0, |(_, seq)| *seq)
    }

    /// A window of the current instance numbered `seq` was accepted.
    pub fn accepted(&mut self, seq: u64) {
        if let Some((_, last)) = self.marks.last_mut() {
            *last = (*last).max(seq);
        }
    }

    /// Sets the current instance's mark (a restore).
    pub fn restore(&mut self, last_seq: u64) {
        if let Some((_, last)) = self.marks.last_mut() {
            *last = last_seq;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_keeps_its_own_mark_across_another_one_s_hello() {
        let mut marks = NodeMarks::new(1, 0);
        marks.accepted(500);
        // A second agent of the node counts from its own start.
        marks.hello(2);
        assert_eq!((marks.current(), marks.last_seq()), (2, 0));
        marks.accepted(3);
        // The first one comes back: its mark is where it left it.
        marks.hello(1);
        assert_eq!((marks.current(), marks.last_seq()), (1, 500));
        marks.hello(2);
        assert_eq!(marks.last_seq(), 3);
    }

    #[test]
    fn only_the_latest_instances_are_remembered() {
        let mut marks = NodeMarks::new(0, 7);
        for instance in 1..=REMEMBERED_INSTANCES as u64 {
            marks.hello(instance);
            marks.accepted(instance * 10);
        }
        // Instance 0 was pushed out: it starts again from nothing.
        marks.hello(0);
        assert_eq!(marks.last_seq(), 0);
        // The newest ones are still there.
        marks.hello(REMEMBERED_INSTANCES as u64);
        assert_eq!(marks.last_seq(), REMEMBERED_INSTANCES as u64 * 10);
    }

    #[test]
    fn a_mark_never_moves_back() {
        let mut marks = NodeMarks::new(1, 0);
        marks.accepted(9);
        marks.accepted(4);
        assert_eq!(marks.last_seq(), 9);
    }
}
