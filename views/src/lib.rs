//! How netaware's answers look to people and programs, in one place for
//! every front end: the operator CLI (`netaware matrix -o json`, the heat
//! map it draws) and the collector's web view (its JSON API and its heat
//! map cells) read the same wire answers through the same code, so that a
//! figure says the same thing wherever it is read.
//!
//! - [`json`]: the JSON contracts of `-o json` (docs/cli.md), from the
//!   wire's answers; the web view's API answers with the same documents.
//! - [`explain`]: a ranking explained (the term that holds each candidate
//!   back), as `netaware explain` and the web view's job form give it.
//! - [`heatmap`]: a set of nodes' pairs as coloured cells (measured,
//!   estimated, missing), drawn as SVG or PNG, or sent to the web view.
//! - [`text`]: short phrases for people (a fault's effect).
//!
//! Pure: wire messages in, documents and bytes out; no sockets, no clocks.

pub mod explain;
pub mod heatmap;
pub mod json;
pub mod text;
