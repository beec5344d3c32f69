//! Engine of `kubectl gitops pull`: bring image automation's commits home from the server Flux
//! reads, safely (failure catalogue: the loop's last step, the operator's checkout).
//!
//! - [`source`]: what Flux reads (the GitRepository's `spec.url`, ref and `secretRef`
//!   credentials) and the ImageUpdateAutomations that push to it, with their ImagePolicies.
//! - [`checkout`]: the local Git checkout (branch, head, dirty paths, remotes) and the only
//!   two changes pull ever makes to it (the remote-tracking ref, the fast-forward).
//! - [`history`]: the commits the local branch lacks, which automation made each, the setter
//!   lines each changed, and the files both sides changed when they diverged.
//! - [`plan`]: the decision, one ordered table of rules (facts, then decision, then words),
//!   and the warnings about the next push.
//! - [`report`]: the `-o table|json|yaml` document.
//! - [`run`]: the command line and the flow.
#![warn(missing_docs)]

pub mod checkout;
pub mod history;
pub mod plan;
pub mod report;
pub mod run;
pub mod source;
pub mod url;
