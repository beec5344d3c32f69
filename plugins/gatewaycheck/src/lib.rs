//! Engine of `kubectl gatewaycheck`: is a Gateway (or HTTPRoute) really served, whatever its
//! status says. It reads the Gateway API objects, the implementation's Services, pods,
//! Deployments and Lease, and the load-balancer pools, then checks the status against them one
//! rule at a time.
//!
//! Modules: [`run`] (the command line and one run), [`snapshot`] (every object a run reads, in
//! one session value), [`rules`] (one function per rule, each returning [`rules::Finding`]s),
//! [`net`] (IP addresses against pool ranges), [`impls`] (what is known of each
//! implementation: controllerName, images, labels, the way out of AddressNotAssigned),
//! [`report`] (table, JSON, YAML), [`probe`] (`--probe`: HTTP(S) requests and hostname lookups
//! from a probe pod).
#![warn(missing_docs)]

pub mod impls;
/// The CIDR and range parser, from the shared library (one home).
pub use cluster_loop::net;
pub mod probe;
pub mod report;
pub mod rules;
pub mod run;
pub mod snapshot;
