//! cluster-loop release tooling (`cargo run -p xtask -- ...`): reproducible plugin archives,
//! krew manifests and Flux CLI plugin manifests with real checksums, krew's validation rules, and a krew-like installer used
//! by the install test.
#![warn(missing_docs)]

pub mod archive;
pub mod dist;
pub mod flux;
pub mod install;
pub mod manifest;
pub mod platform;
pub mod plugins;
pub mod validate;
