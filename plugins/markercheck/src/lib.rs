//! markercheck engine: an offline emulation of Flux image-automation-controller's setters
//! (`internal/update`, kyaml `fieldmeta`/`kio`), plus lint rules on top.
#![forbid(unsafe_code)]

pub mod api;
pub mod changed;
pub mod check;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod fuzzing;
pub mod kustomize;
pub mod marker;
pub mod objects;
pub mod render;
pub mod repo;
#[cfg(feature = "cluster")]
pub mod report;
#[cfg(feature = "cluster")]
pub mod run;
pub mod scan;
pub mod simulate;
pub mod yamltree;
