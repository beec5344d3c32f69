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

/// The top-level fields of kustomize's `types.Kustomization` (sigs.k8s.io/kustomize/api
/// `types/kustomization.go`, the JSON names): kustomize-controller reads the kustomization of
/// `spec.path` into that struct and writes it back (`GenerateManifest`, a non-strict
/// `yaml.Unmarshal` then `yaml.Marshal`), so a field outside this list is dropped before the
/// build, where `kubectl kustomize` refuses it ("invalid Kustomization: json: unknown field").
pub const KUSTOMIZATION_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "openapi",
    "namePrefix",
    "nameSuffix",
    "namespace",
    "commonLabels",
    "labels",
    "commonAnnotations",
    "patchesStrategicMerge",
    "patchesJson6902",
    "patches",
    "images",
    "imageTags",
    "replacements",
    "replicas",
    "vars",
    "sortOptions",
    "resources",
    "crds",
    "bases",
    "components",
    "configMapGenerator",
    "secretGenerator",
    "helmGlobals",
    "helmCharts",
    "helmChartInflationGenerator",
    "generatorOptions",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "buildMetadata",
];

/// The kustomization kustomize-controller writes into `spec.path` in place of `original` (the
/// text of the directory's own kustomization file) before it builds: fluxcd/pkg
/// `kustomize/kustomize_generator.go` `GenerateManifest` (v1.35, kustomize-controller v1.9):
/// the fields outside [`KUSTOMIZATION_FIELDS`] dropped; `buildMetadata: [originAnnotations]`
/// when it lists no resources; `spec.targetNamespace` as `namespace`; `namePrefix` and
/// `nameSuffix` replaced; `spec.patches` appended to `patches`; `spec.components` appended to
/// `components` (a missing one skipped with `ignoreMissingComponents`; `dir` is the directory
/// on disk they are relative to); `spec.images` merged by name (a given `newName` replaces,
/// a given `newTag` or `digest` replaces both, as kustomize's image transformer does).
/// `spec.commonMetadata` (set by the controller on every object after the build) is written
/// as labels without selectors and annotations, which kustomize sets on the same objects.
///
/// So the directory's own patches, images and namespace reach what the components add, and a
/// Kustomization's namePrefix replaces the directory's.
///
/// Returns `Ok(None)` when the controller builds `original` as written (nothing to change),
/// `Ok(Some(text))` otherwise, and `Err` with the controller's message for a component path
/// that is not local and relative. A text that is not a YAML mapping is left to kustomize
/// (`Ok(None)`): it fails there as in the controller.
pub fn in_place(
    original: &str,
    target_namespace: Option<&str>,
    fields: Option<&str>,
    dir: &std::path::Path,
) -> Result<Option<String>, String> {
    // an empty file (or one of comments) is an empty kustomization to the controller
    let mut k = match serde_saphyr::from_str::<Value>(original) {
        Ok(Value::Object(k)) => k,
        Ok(Value::Null) => serde_json::Map::new(),
        _ if original.trim().is_empty() => serde_json::Map::new(),
        _ => return Ok(None),
    };
    let before = k.clone();
    k.retain(|key, _| KUSTOMIZATION_FIELDS.contains(&key.as_str()));
    if k.get("resources")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        k.insert(
            "buildMetadata".into(),
            serde_json::json!(["originAnnotations"]),
        );
    }
    if let Some(ns) = target_namespace {
        k.insert("namespace".into(), Value::String(ns.to_string()));
    }
    let f = fields.and_then(|j| serde_json::from_str::<KustomizeFields>(j).ok());
    if let Some(f) = &f {
        if let Some(p) = &f.name_prefix {
            k.insert("namePrefix".into(), Value::String(p.clone()));
        }
        if let Some(p) = &f.name_suffix {
            k.insert("nameSuffix".into(), Value::String(p.clone()));
        }
        let patches = f
            .patches
            .iter()
            .map(|p| {
                let mut out = serde_json::Map::new();
                for key in ["patch", "target"] {
                    if let Some(v) = p.get(key).filter(|v| !v.is_null()) {
                        out.insert(key.into(), v.clone());
                    }
                }
                Value::Object(out)
            })
            .collect();
        append(&mut k, "patches", patches);
        let mut comps = Vec::new();
        for c in &f.components {
            if !local_relative(c) {
                return Err(format!("component path '{c}' must be local and relative"));
            }
            if f.ignore_missing_components && !dir.join(c).exists() {
                continue;
            }
            comps.push(Value::String(c.clone()));
        }
        append(&mut k, "components", comps);
        for image in &f.images {
            merge_image(&mut k, image);
        }
        if !f.labels.is_empty() {
            append(
                &mut k,
                "labels",
                vec![serde_json::json!({"pairs": f.labels, "includeSelectors": false})],
            );
        }
        if !f.annotations.is_empty() {
            let a = k
                .entry("commonAnnotations")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Value::Object(m) = a {
                m.extend(f.annotations.clone());
            }
        }
    }
    if k == before && !before.is_empty() {
        return Ok(None);
    }
    Ok(serde_json::to_string_pretty(&Value::Object(k)).ok())
}

/// `items` appended to the list `key` of kustomization `k` (made when absent).
fn append(k: &mut serde_json::Map<String, Value>, key: &str, items: Vec<Value>) {
    if items.is_empty() {
        return;
    }
    let list = k.entry(key).or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    if let Value::Array(a) = list {
        a.extend(items);
    }
}

/// One `spec.images` entry merged into the kustomization's `images` by name
/// (`GenerateManifest`: `checkKustomizeImageExists`, then the fields given).
fn merge_image(k: &mut serde_json::Map<String, Value>, image: &Value) {
    let s = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .filter(|x| !x.is_empty())
            .map(str::to_string)
    };
    let name = s(image, "name").unwrap_or_default();
    let list = k
        .entry("images")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Value::Array(images) = list else { return };
    if let Some(Value::Object(e)) = images
        .iter_mut()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name.as_str()))
    {
        if let Some(n) = s(image, "newName") {
            e.insert("newName".into(), Value::String(n));
        }
        let (tag, digest) = (s(image, "newTag"), s(image, "digest"));
        if tag.is_some() || digest.is_some() {
            e.remove("newTag");
            e.remove("digest");
            if let Some(t) = tag {
                e.insert("newTag".into(), Value::String(t));
            }
            if let Some(d) = digest {
                e.insert("digest".into(), Value::String(d));
            }
        }
        return;
    }
    let mut e = serde_json::Map::new();
    e.insert("name".into(), Value::String(name));
    for key in ["newName", "newTag", "digest"] {
        if let Some(v) = s(image, key) {
            e.insert(key.into(), Value::String(v));
        }
    }
    images.push(Value::Object(e));
}

/// fluxcd/pkg `IsLocalRelativePath`: not a Git/HTTP address (`git::`, `gh:`, `ssh://`,
/// `https://`, `http://`, `git@`, `github.com:`, `github.com/`, case-insensitive, the path
/// longer than the prefix) and not absolute (also after a `file://` prefix).
pub fn local_relative(path: &str) -> bool {
    let lower = path.to_lowercase();
    let remote = [
        "git::",
        "gh:",
        "ssh://",
        "https://",
        "http://",
        "git@",
        "github.com:",
        "github.com/",
    ]
    .iter()
    .any(|p| p.len() < path.len() && lower.starts_with(p));
    !remote
        && !path.starts_with('/')
        && !lower
            .strip_prefix("file://")
            .unwrap_or(&lower)
            .starts_with('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn the_controller_writes_components_patches_and_images_into_the_kustomization() {
        let dir = std::path::Path::new("/nonexistent");
        let original = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [cm.yaml]\npatches:\n  - path: p.yaml\nimages:\n  - name: app\n    newName: reg/app\n    digest: sha256:aa\nnamePrefix: dir-\nlabelz: {a: b}\n";
        let f = KustomizeFields {
            components: vec!["../c".into()],
            images: vec![serde_json::json!({"name": "app", "newTag": "2"})],
            patches: vec![serde_json::json!({"patch": "x", "target": {"kind": "ConfigMap"}})],
            name_prefix: Some("ks-".into()),
            ..Default::default()
        };
        let out = in_place(original, Some("ns"), Some(&f.to_json()), dir)
            .unwrap()
            .unwrap();
        let k = v(&out);
        assert_eq!(k["namespace"], "ns");
        assert_eq!(k["namePrefix"], "ks-");
        assert_eq!(k["components"], serde_json::json!(["../c"]));
        assert_eq!(k["patches"][0]["path"], "p.yaml");
        assert_eq!(k["patches"][1]["target"]["kind"], "ConfigMap");
        // merged by name: newName kept, newTag replaces both tag and digest
        assert_eq!(
            k["images"],
            serde_json::json!([{"name": "app", "newName": "reg/app", "newTag": "2"}])
        );
        assert!(k.get("labelz").is_none(), "unknown fields are dropped");
        assert!(k.get("buildMetadata").is_none());
    }

    #[test]
    fn an_empty_kustomization_gets_build_metadata_and_a_plain_one_is_left_alone() {
        let dir = std::path::Path::new("/nonexistent");
        let out = in_place("", None, None, dir).unwrap().unwrap();
        assert_eq!(
            v(&out)["buildMetadata"],
            serde_json::json!(["originAnnotations"])
        );
        assert_eq!(in_place("resources: [a.yaml]\n", None, None, dir), Ok(None));
        let remote = KustomizeFields {
            components: vec!["https://github.com/o/r//c".into()],
            ..Default::default()
        };
        assert!(in_place("resources: [a.yaml]\n", None, Some(&remote.to_json()), dir).is_err());
        assert!(!local_relative("/abs"));
        assert!(!local_relative("file:///abs"));
        assert!(local_relative("../components/x"));
    }
}
