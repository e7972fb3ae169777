//! The evaluation of placements, pure: no sockets, no clocks.
//!
//! - [`cluster`]: a synthetic cluster with heterogeneous links (and, when
//!   asked, racks behind oversubscribed uplinks), whose truth only the
//!   simulator knows; [`grey`]: grey failures of NICs and rack uplinks
//!   that come and go over a run.
//! - [`information`]: what a policy knows of it at each moment ([`View`]s
//!   over a run), in measured or perfect mode:
//!   - [`fleet`]: measured, by netaware's own agent, collector, planner and
//!     score code on simulated probes;
//!   - [`perfect`]: the truth, as an upper bound.
//! - [`policies`]: where each policy puts a job's workers: netaware (the
//!   extender's own code), kube-scheduler's defaults, zone-only (topology
//!   labels), Diktyo (NetworkOverhead with zone costs) and random.
//! - [`schedulers`]: netaware against Kueue TAS ([`kueue_tas`]) and
//!   Volcano ([`volcano`]), each driven by rack labels as they should be,
//!   as clusters have them, or by netaware's measured topology
//!   ([`labels`]).
//! - [`model`]: the alpha-beta model of a ring all-reduce on given links.
//! - [`contention`]: max-min fair shares of the links jobs share.
//! - [`sim`]: jobs arriving over time and competing for its nodes,
//!   placed by each policy in turn.
//! - [`stats`]: mean, median, percentiles and bootstrap intervals.
//! - [`estimates`], [`fabric`]: how far off the RTT estimates of pairs
//!   nobody probes are, on a fabric with racks.
//!
//! The lab experiment (real traffic) and the plots live in the
//! `netaware-testbed` crate; they call [`policies`] so that both halves
//! compare the same placements.
//!
//! [`View`]: information::View

pub mod cluster;
pub mod contention;
pub mod estimates;
pub mod fabric;
pub mod faults;
#[cfg(test)]
mod fixtures;
pub mod fleet;
pub mod grey;
pub mod information;
pub mod kueue_tas;
pub mod labels;
pub mod model;
pub mod perfect;
pub mod policies;
pub mod schedulers;
pub mod sim;
pub mod stats;
pub mod volcano;
