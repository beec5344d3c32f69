//! The groups of many shorter tests; they start after [`super::long`]'s (name order) and fill
//! the test threads as those end.
pub mod completion;
pub mod cutover;
pub mod fleetdiff;
pub mod gatewaycheck;
pub mod gitops_mcp;
pub mod gitops_pull;
pub mod gitops_verify;
pub mod harness;
pub mod kubelet;
pub mod podresolve;
pub mod probe_pods;
pub mod shared;
