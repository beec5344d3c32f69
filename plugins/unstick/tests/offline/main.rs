//! kubectl-unstick without a cluster: the engine on JSON fixtures, the wait set, usage errors,
//! missing objects and interrupted runs. One test binary (one link).
mod engine;
mod interrupt_hang;
mod not_found;
mod usage;
mod wait_set;
