//! The evaluation of placements, pure: no sockets, no clocks.
//!
//! - [`policies`]: where each policy puts a job's workers: netaware (the
//!   extender's own code), kube-scheduler's default spreading, zone-only
//!   (topology labels, no measurements) and random.
//! - [`model`]: the alpha-beta model of a ring all-reduce on given links.
//! - [`cluster`]: a synthetic cluster with heterogeneous links, and what
//!   netaware's agents would have measured on it.
//! - [`sim`]: jobs arriving over time and competing for its nodes, placed
//!   by each policy in turn.
//! - [`stats`]: mean, median and percentiles.
//!
//! The lab experiment (real traffic) and the plots live in the `netaware`
//! crate; they call [`policies`] so that both halves compare the same
//! placements.

pub mod cluster;
pub mod estimates;
pub mod fabric;
pub mod model;
pub mod policies;
pub mod sim;
pub mod stats;
