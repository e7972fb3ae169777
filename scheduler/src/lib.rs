//! The netaware kube-scheduler extender.
//!
//! kube-scheduler calls it over HTTP (the extender protocol of
//! k8s.io/kube-scheduler/extender/v1) to filter and score the candidate
//! nodes of each pod. It answers from a local copy of the collector's
//! scores ([`cache`], fed by the Scores watch stream) with the placement
//! policy of `netaware-core` ([`netaware_core::extender`], on the same
//! placement code as `netaware rank`). Pods are tied to their training job by the labels of the
//! job controllers ([`job`]). The wire types live in [`wire`], the routes in
//! [`server`].
//!
//! When kube-scheduler sends full node objects, their
//! `topology.kubernetes.io/zone` labels override the zones the agents gave.
//!
//! Where a job's workers already run comes from a kube-rs watch of the pods
//! bound to nodes ([`pods`] into [`placements`]).
//!
//! The flags and the process (`netaware-scheduler`, `netaware scheduler`)
//! live in [`cli`].
//!
//! The optional bind verb ([`bind`]) creates the binding and records the
//! place at once, so that workers scheduled back to back see each other.
//!
//! A pod is placed by the network its `netaware.io/network` label names
//! (a rail), else the default network; each network followed has a cache
//! of its own ([`networks`]).

pub mod bind;
pub mod cache;
pub mod cli;
pub mod events;
pub mod job;
pub mod metrics;
pub mod networks;
pub mod placements;
pub mod pods;
pub mod robustness;
pub mod server;
pub mod wire;

pub use netaware_core::placement;
