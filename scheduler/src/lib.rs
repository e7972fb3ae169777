//! The netaware kube-scheduler extender: not built yet (its own issue).
//!
//! It will answer kube-scheduler's filter and prioritize calls with
//! [`netaware_core::placement::rank`], the same policy that the collector's
//! Rank RPC and `netaware rank` use, so the three can never disagree.

pub use netaware_core::placement;
