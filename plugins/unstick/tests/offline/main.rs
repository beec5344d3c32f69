//! kubectl-unstick without a cluster: the engine on JSON fixtures, the wait set, a HelmRelease
//! holding a health check, usage errors,
//! and interrupted runs. One test binary (one link).
mod blind;
mod engine;
mod helm;
mod interrupt_hang;
mod refused;
mod support;
mod usage;
mod views;
mod wait_set;
