//! Parsers for the probe log and every tool format it may contain: the shared
//! [`cluster_loop::probe::parse`].

pub use cluster_loop::probe::parse::*;
