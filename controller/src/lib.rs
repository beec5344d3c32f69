//! cluster-loop-controller: `kubectl unstick --all`'s diagnosis as an in-cluster controller.
//!
//! It watches what `kubectl unstick --all` reads ([`watch`]: Kustomizations, GitRepositories,
//! OCIRepositories, Buckets, HelmReleases, and the Flux controllers' Deployments and Leases)
//! into kube-runtime reflector stores, and diagnoses the fleet again ([`diagnosis`]) on each
//! change and at the earliest deadline a diagnosis names (a held health check's end), never on
//! a polling interval. The diagnosis is unstick's own ([`unstick::cache::snapshot`] then
//! [`unstick::report::fleet_report`]): no rule lives here.
//!
//! It writes to the cluster's channels: an Event on a Kustomization when its class changes
//! ([`events`]), Prometheus metrics and the live `unstick --all -o json` document
//! ([`metrics`], [`http`]), and, opt-in only, unstick's lever on the Kustomizations whose
//! owners annotated them ([`levers`]). It runs like a Flux controller: leader election on a
//! Lease ([`leader`]), /healthz and /readyz, SIGTERM ends it gracefully, JSON logs.

pub mod args;
pub mod diagnosis;
pub mod events;
pub mod http;
pub mod leader;
pub mod levers;
pub mod metrics;
pub mod run;
pub mod watch;
