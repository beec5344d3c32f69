//! Engine of `kubectl cutover`: move a Flux Git source to a new URL without rolling the
//! cluster backwards (failure catalogue entry 4).
//!
//! - [`preflight`]: read-only checks (current state, transport, new remote, history relation,
//!   authored value).
//! - [`execute`]: the patch, the proof (flux2 pkg/bootstrap wait rule), rollback, `--finish`.
//! - [`cluster`]: the field manager and the Flux controllers' liveness, used by both.
//! - [`git`]: real `git` with Flux-equivalent credentials.
//! - [`authored`]: where the GitRepository's URL is committed.
//! - [`incluster`]: `--verify-in-cluster`, the new remote seen from a pod in the source's
//!   namespace (the shared probe machinery, [`cluster_loop::probe`]).
#![warn(missing_docs)]

pub mod authored;
pub mod cluster;
pub mod execute;
pub mod git;
pub mod incluster;
pub mod preflight;
pub mod run;
