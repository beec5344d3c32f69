//! kubectl-cutover (the real binary) against the real control plane and the real Flux
//! controllers (tests/realcluster), in two parts that run at once:
//!
//! - [`execute`]: execute, `--finish`, the preflight's verdicts, on
//!   [`common::execute_cluster`]; some of its tests stop source-controller or scale
//!   kustomize-controller to 0.
//! - [`in_cluster`]: `--verify-in-cluster` with probe Jobs the pod runtime runs for real, on a
//!   cluster of its own, so no probe meets a controller the other group stopped.
pub(crate) mod common;
pub(crate) mod execute;
mod in_cluster;
