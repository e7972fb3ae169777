//! The collector's background tasks, each given only what it needs and
//! each ending at shutdown:
//!
//! - [`snapshots`]: builds the shared snapshot whenever the state changed;
//! - [`coordinates`]: moves the network coordinates every pass interval;
//! - [`topology`]: works the measured topology out every round;
//! - [`throughput`]: plans throughput tests and sends the orders;
//! - [`persist`]: saves the state every `--state-interval`.
//!
//! The pure work of each lives elsewhere (the core, or
//! [`crate::state`]); these are the loops and their timing.

pub mod coordinates;
pub mod persist;
pub mod snapshots;
pub mod throughput;
pub mod topology;
