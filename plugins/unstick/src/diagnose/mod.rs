//! The diagnosis engine: classify a Kustomization from a [`Snapshot`](crate::snapshot::Snapshot), find the root cause
//! (dependsOn chain, source, blocking objects and their pods) and the controller facts that
//! decide the lever. Pure: no I/O, the clock is `Snapshot::now`.
//!
//! Statuses and messages follow kustomize-controller v1.9 (internal/controller/
//! kustomization_controller.go) and fluxcd/pkg (runtime/conditions, ssa).
//!
//! In three parts, in the order a diagnosis runs: [`facts`] (pure readers of the source, the
//! request, the health check, pods, HelmReleases and the controllers' watch), [`decide`] and
//! [`table`] (the class: one ordered decision table, [`table::RULES`], and the one function
//! that assigns it), [`words`] (what a human reads). [`blind`] (the controller's blind spots,
//! rows of that table) and [`refused`] (the API server's refusals).

use cluster_loop::duration::parse_go_duration;
pub use cluster_loop::duration::short_time;
use cluster_loop::flux::{HELM_CONSEQUENCE, StoppedController};

mod blind;
mod decide;
mod facts;
mod refused;
mod table;
mod words;
pub use blind::{BlindSpot, RemoteHead, apply_remote_head};
pub use decide::*;
pub use facts::*;
pub use refused::{FORCE_ANNOTATION, Refusal, RefusalKind, refusals};
pub use words::*;
