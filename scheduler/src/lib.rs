//! The netaware kube-scheduler extender.
//!
//! kube-scheduler calls it over HTTP (the extender protocol of
//! k8s.io/kube-scheduler/extender/v1) to filter and score the candidate
//! nodes of each pod. It answers from a local copy of the collector's
//! scores ([`cache`], fed by the Scores watch stream) with the placement
//! policy of `netaware-core`, the same code behind `netaware rank`
//! ([`policy`]). Pods are tied to their training job by the labels of the
//! job controllers ([`job`]). The wire types live in [`wire`], the routes in
//! [`server`].
//!
//! When kube-scheduler sends full node objects, their
//! `topology.kubernetes.io/zone` labels override the zones the agents gave.
//!
//! Not built yet (issue 5): where a job's workers already run (a kube-rs
//! watch of pods, and the bind verb), the deployment manifests and the
//! latency benchmark. Until then every pod is scored against its zone-mates,
//! as if it were the job's first worker.

pub mod cache;
pub mod convert;
pub mod job;
pub mod policy;
pub mod server;
pub mod wire;

pub use netaware_core::placement;
