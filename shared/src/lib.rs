//! cluster-loop shared library: what every kubectl plugin of the suite needs.
//!
//! - [`cli`]: kubectl's cluster flags (`--kubeconfig --context --cluster --user -n
//!   --request-timeout`) and kubeconfig resolution exactly like kubectl.
//! - [`output`]: `-o table|json|yaml`, `--color`, kubectl-like tables, styling.
//! - [`error`]: one error type, exit codes 0/1/2/3, actionable API error messages.
//! - [`kind`]: the kinds the suite names and their API coordinates (one table).
//! - [`refs`]: `ks/NAME`-style references.
//! - [`flux`]: typed Flux objects (Kustomization, GitRepository, OCIRepository, image
//!   automation) and their rules (effective timeout, inventory ids).
//! - [`gitauth`]: a Git source's HTTP credential as source-controller sends it (which Secret
//!   key), and the finding and fix when the Git server refuses it.
//! - [`klog`]: kubectl's error text without klog's line header.
//! - [`conditions`], [`kstatus`]: status conditions and kstatus evaluation.
//! - [`helm`]: HelmRelease status as helm-controller v1.4 writes it (phase, failures, levers).
//! - [`wait`]: watch-based waiting with a deadline and a progress spinner.
//! - [`duration`]: Go duration parse/format.
//! - [`embed`]: a plugin's flow run in process (the MCP server): captured stdout, progress
//!   observer, cancellation that undoes as Ctrl-C does.
//! - [`servicelinks`]: the Service link variables the kubelet injects (catalogue row 5).
//! - [`probe`]: the probe pod that looks at the cluster from inside the pod network (spec,
//!   lifecycle with guaranteed cleanup, log parsers).
#![warn(missing_docs)]

pub mod cli;
pub mod completion;
pub mod conditions;
pub mod duration;
pub mod embed;
pub mod envsubst;
pub mod error;
pub mod flux;
pub mod gitauth;
pub mod helm;
pub mod kind;
pub mod klog;
pub mod kstatus;
pub mod net;
pub mod output;
pub mod probe;
pub mod refs;
pub mod repo;
pub mod servicelinks;
pub mod signals;
pub mod wait;

pub use error::{Error, Result, exit_with};
