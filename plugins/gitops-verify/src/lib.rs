//! Engine of `kubectl gitops verify`: prove the whole GitOps loop from inside the cluster,
//! link by link, and name the first link that does not hold.
//!
//! The chain, in order ([`links::chain`]): 1 source ([`links::source`]), 2 Kustomizations
//! ([`links::kustomizations`]), 3 workloads ([`links::workloads`]), 4 images
//! ([`links::images`]), 5 DNS, 6 Gateway, 7 HTTP(S). Each link composes a plugin's engine as
//! a library (unstick's diagnosis, markercheck's image naming and policy selection, cutover's
//! remote head and in-cluster preflight, the shared kstatus): nothing is shelled out to and no
//! rule is copied.
//!
//! Modules: [`run`] (the command line and one run), [`round`] (one round: the facts read
//! once, every link checked, the round's report; the interrupt), [`session`] (the session value:
//! connection, options, request counter), [`facts`] (what every link reads, once per round),
//! [`links`] (one module per link and the extension point for new ones), [`chain`] (the
//! verdicts, the `ChainReport` document and the exit codes), [`render`] (table, GitHub
//! annotations, `--wait` lines), [`wait`] (`--wait` on watches with a deadline).
#![warn(missing_docs)]

pub mod chain;
pub mod facts;
pub mod links;
pub mod render;
pub mod round;
pub mod run;
pub mod session;
pub mod wait;
