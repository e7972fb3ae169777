//! The publisher against kube-rs's real client over a mock API server
//! ([`publisher`]), and every object it renders against its kind's CRD
//! schema ([`schemas`]).

mod publisher;
mod schemas;
