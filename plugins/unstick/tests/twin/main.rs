//! kubectl-unstick (the real binary and its engine) against the twin's in-memory API server and
//! Flux models: one test binary (one link; wait-bound scenarios of different modules overlap).
mod clock;
mod e2e;
