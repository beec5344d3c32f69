//! Release tests in ONE test binary, so the archives are packed once per `cargo test` run
//! ([`common::built`]): krew manifests and install, Flux CLI plugin manifests and install, and
//! the controller's OCI image.

mod common;
mod flux_plugins;
mod image;
mod krew_manifests;
mod real_clients;
