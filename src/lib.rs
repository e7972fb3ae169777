//! The `netaware` command line, what an operator runs: `agent`,
//! `collector` and `scheduler` (the services); `demo` runs the whole system
//! on this machine ([`demo`]) and `lab` keeps a lab up ([`lab_command`],
//! [`lab_system`]); `matrix`, `zones` and `rank` ask a running collector;
//! `explain` says what the extender would decide for a job and why
//! ([`explain_command`]); `throughput` runs one test by hand ([`throughput_command`]); `certs`
//! makes the certificates of deploy/tls ([`certs_command`]); `topology`
//! and `publish-topology` carry the measured topology to other schedulers
//! ([`topology_command`]).
//!
//! The evaluation, the load generator and the training workload are not
//! here: they live in the `netaware-testbed` crate and binary, which the
//! production image does not carry.
//!
//! [`client`] talks to the collector, [`json`] holds the `--json` contracts,
//! [`render`] the tables for people, [`heatmap`] the pair matrix as a
//! picture, and [`demo`] the in-process demo.

pub mod certs_command;
pub mod client;
pub mod demo;
pub mod explain_command;
pub mod heatmap;
pub mod json;
pub mod lab_command;
pub mod lab_system;
pub mod render;
pub mod throughput_command;
pub mod topology_command;
