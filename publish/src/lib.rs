//! Publishes netaware's measured topology (`netaware_core::measured_topology`:
//! blocks of close nodes, degraded marks, costs between zones and regions)
//! in the forms other schedulers already read, so that a cluster that keeps
//! its scheduler still gets netaware's measurements:
//!
//! - node labels `netaware.io/block` and `netaware.io/degraded`, for
//!   Kueue's Topology levels, Volcano's label-based HyperNode discovery and
//!   any node-label topology constraint;
//! - a Kueue `Topology` whose levels are zone, block and host;
//! - Volcano `HyperNode`s: one per block (tier 1) and one per zone holding
//!   its blocks (tier 2);
//! - a Diktyo (scheduler-plugins NetworkOverhead) `NetworkTopology` with
//!   costs from the measured p90 RTT between zones and regions.
//!
//! It also acts on the collector's open network faults ([`faults`]): an
//! Event on each Node a fault is about when it opens and clears, and,
//! opt-in, a NoSchedule taint on a node with a node fault.
//!
//! [`objects`] renders them (pure: a topology in, objects out; what
//! `netaware topology --format` prints), [`names`] makes names and label
//! values Kubernetes takes, and [`publisher`] applies them with server-side
//! apply, writing only what changed.

pub mod faults;
pub mod names;
pub mod objects;
pub mod publisher;

pub use faults::FaultReport;
pub use objects::{Format, KueueVersion, Object, RenderOptions, render};
pub use publisher::{PublishError, PublishReport, Publisher, PublisherOptions};
