//! markercheck engine: an offline emulation of Flux image-automation-controller's setters
//! (`internal/update`, kyaml `fieldmeta`/`kio`), plus lint rules on top.
#![forbid(unsafe_code)]

pub mod marker;
pub mod scan;
pub mod yamltree;
