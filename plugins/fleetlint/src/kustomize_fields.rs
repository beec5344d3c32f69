//! A Flux Kustomization's own kustomize fields (`spec.components`, `spec.patches`,
//! `spec.images`, `spec.namePrefix`/`nameSuffix`, `spec.commonMetadata`): read from the spec
//! ([`crate::fleet`]) and written into the wrapper kustomization a render builds
//! ([`crate::render`]).

use crate::tree;
use serde_json::Value;

/// A Flux Kustomization's own kustomize fields, which kustomize-controller writes into the
/// kustomization of `spec.path` before building (fluxcd/pkg `kustomize/kustomize_generator.go`
/// `GenerateManifest`: namePrefix, nameSuffix, patches appended, components appended (local
/// relative paths from `spec.path`; `ignoreMissingComponents` skips missing ones), images
/// merged), and `spec.commonMetadata` (labels and annotations set on every object after the
/// build, before substitution; selectors untouched).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KustomizeFields {
    /// `spec.components` (relative to `spec.path`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
    /// `spec.ignoreMissingComponents`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_missing_components: bool,
    /// `spec.images` (kustomize `images:` entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Value>,
    /// `spec.patches` (`patch` and `target`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<Value>,
    /// `spec.namePrefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_prefix: Option<String>,
    /// `spec.nameSuffix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_suffix: Option<String>,
    /// `spec.commonMetadata.labels`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub labels: serde_json::Map<String, Value>,
    /// `spec.commonMetadata.annotations`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub annotations: serde_json::Map<String, Value>,
}

impl KustomizeFields {
    /// The fields of a Flux Kustomization `spec` (`None` when it sets none of them).
    pub fn read(spec: &Value) -> Option<KustomizeFields> {
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
        let map = |v: &Value| v.as_object().cloned().unwrap_or_default();
        let f = KustomizeFields {
            components: strings(&spec["components"]),
            ignore_missing_components: spec["ignoreMissingComponents"].as_bool() == Some(true),
            images: list(&spec["images"]),
            patches: list(&spec["patches"]),
            name_prefix: spec["namePrefix"]
                .as_str()
                .map(str::to_string)
                .filter(|p| !p.is_empty()),
            name_suffix: spec["nameSuffix"]
                .as_str()
                .map(str::to_string)
                .filter(|p| !p.is_empty()),
            labels: map(&spec["commonMetadata"]["labels"]),
            annotations: map(&spec["commonMetadata"]["annotations"]),
        };
        (f != KustomizeFields::default()).then_some(f)
    }

    /// The canonical JSON of [`crate::render::Unit::kustomize`].
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The component directories, repository-relative, from `spec.path`'s directory `dir`.
    pub fn component_dirs(&self, dir: &str) -> Vec<String> {
        self.components
            .iter()
            .filter_map(|c| tree::join(dir, c))
            .collect()
    }

    /// The lines of the kustomization that wraps `abs` (the directory of `spec.path`) with these
    /// fields; `relative` turns an absolute path into one the wrapper can reach.
    pub fn wrapper_lines(
        json: &str,
        abs: &std::path::Path,
        relative: &dyn Fn(&std::path::Path) -> String,
    ) -> String {
        let Ok(f) = serde_json::from_str::<KustomizeFields>(json) else {
            return String::new();
        };
        let q = |v: &Value| v.to_string();
        let mut k = String::new();
        let comps: Vec<String> = f
            .components
            .iter()
            .filter(|c| !f.ignore_missing_components || abs.join(c).exists())
            .map(|c| relative(&abs.join(c)))
            .collect();
        if !comps.is_empty() {
            k.push_str("components:\n");
            for c in comps {
                k.push_str(&format!("  - {}\n", q(&Value::String(c))));
            }
        }
        if !f.images.is_empty() {
            k.push_str(&format!("images: {}\n", q(&Value::Array(f.images.clone()))));
        }
        if !f.patches.is_empty() {
            k.push_str(&format!(
                "patches: {}\n",
                q(&Value::Array(f.patches.clone()))
            ));
        }
        if let Some(p) = &f.name_prefix {
            k.push_str(&format!("namePrefix: {}\n", q(&Value::String(p.clone()))));
        }
        if let Some(p) = &f.name_suffix {
            k.push_str(&format!("nameSuffix: {}\n", q(&Value::String(p.clone()))));
        }
        if !f.labels.is_empty() {
            k.push_str(&format!(
                "labels: [{{\"pairs\": {}, \"includeSelectors\": false}}]\n",
                q(&Value::Object(f.labels.clone()))
            ));
        }
        if !f.annotations.is_empty() {
            k.push_str(&format!(
                "commonAnnotations: {}\n",
                q(&Value::Object(f.annotations.clone()))
            ));
        }
        k
    }
}
