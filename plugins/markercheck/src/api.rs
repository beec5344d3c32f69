//! The Flux API groups whose objects markercheck reads from manifests (kept here, not taken
//! from cluster-loop, so the offline library builds without the `cluster` feature).

/// API group of ImagePolicy, ImageRepository, ImageUpdateAutomation
/// (fluxcd/image-reflector-controller and image-automation-controller `api/`).
pub const IMAGE_GROUP: &str = "image.toolkit.fluxcd.io";

/// API group of Kustomization (fluxcd/kustomize-controller `api/`).
pub const KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";
