//! cluster-loop release tooling (`cargo run -p xtask -- ...`): reproducible plugin archives,
//! krew manifests and Flux CLI plugin manifests with real checksums, and krew's validation rules
//! (with ours, stricter). Installs are tested with the real krew and flux CLI
//! (tests/release/real_clients.rs), never with a copy of them.
#![warn(missing_docs)]

pub mod archive;
pub mod dist;
pub mod flux;
pub mod image;
pub mod manifest;
pub mod platform;
pub mod plugins;
pub mod validate;
