//! Engine of `kubectl podresolve`: resolve a name from inside the pod network and explain the
//! answer (pod resolv.conf, CoreDNS Corefile, workstation answer side by side).
//!
//! Modules: [`validate`] (hostile input refused), [`probe`] (the probe Job/Pod/ephemeral
//! container, argv-only), [`parse`] (probe log and tool output parsers), [`resolvconf`]
//! (search/ndots query order), [`corefile`] (which CoreDNS plugin answers), [`workstation`]
//! (the local answer and the verdict), [`report`] (explanation and rendering).
#![warn(missing_docs)]

pub mod answer;
pub mod cluster;
pub mod corefile;
pub mod parse;
pub mod probe;
pub mod report;
pub mod resolvconf;
pub mod run;
pub mod validate;
pub mod workstation;
