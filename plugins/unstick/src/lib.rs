//! kubectl-unstick engine: diagnose a stuck Flux Kustomization from a snapshot of the
//! cluster, choose the lever that really frees it on this controller, and plan the exact
//! patches. Everything here except [`live`] is pure and tested on JSON fixtures.

pub mod cache;
pub mod controller;
pub mod diagnose;
pub mod leader;
pub mod lever;
pub mod live;
pub mod obj;
pub mod proof;
pub mod remote;
pub mod report;
pub mod run;
pub mod snapshot;
pub mod synthetic;
