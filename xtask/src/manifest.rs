//! krew Plugin manifests: rendering from the template, parsing, and the sha256 sum files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::platform::{Platform, RELEASE_PLATFORMS};
use crate::plugins::Plugin;

/// GitHub repository the release archives are downloaded from.
pub const REPOSITORY: &str = "https://github.com/cluster-loop/cluster-loop";

const TEMPLATE: &str = include_str!("../templates/krew-plugin.yaml");
const PLATFORM_TEMPLATE: &str = include_str!("../templates/krew-platform.yaml");

/// krew Plugin manifest (krew pkg/index/types.go `Plugin`), as far as validation needs it.
/// Unknown fields are ignored, as krew's decoder does.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    /// Must be `krew.googlecontainertools.github.com/v1alpha2`.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    /// Must be `Plugin`.
    #[serde(default)]
    pub kind: String,
    /// `metadata.name`.
    #[serde(default)]
    pub metadata: Metadata,
    /// `spec`.
    #[serde(default)]
    pub spec: Spec,
}

/// `metadata` of a manifest.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Metadata {
    /// The plugin name: the file name without `.yaml`.
    #[serde(default)]
    pub name: String,
}

/// `spec` of a manifest (krew `PluginSpec`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// `v`-prefixed semantic version.
    #[serde(default)]
    pub version: String,
    /// One line tagline.
    #[serde(default)]
    pub short_description: String,
    /// What the plugin does.
    #[serde(default)]
    pub description: String,
    /// Shown after install.
    #[serde(default)]
    pub caveats: String,
    /// Project page.
    #[serde(default)]
    pub homepage: String,
    /// One entry per installable platform.
    #[serde(default)]
    pub platforms: Vec<PlatformSpec>,
}

/// One `spec.platforms[]` entry (krew `Platform`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PlatformSpec {
    /// Download URL of the archive.
    #[serde(default)]
    pub uri: String,
    /// Lowercase hex sha256 of the archive.
    #[serde(default)]
    pub sha256: String,
    /// Label selector on `os`/`arch`; `None` when absent.
    pub selector: Option<Selector>,
    /// File operations; `None` when absent (krew then applies `{from: "*", to: "."}`).
    pub files: Option<Vec<FileOperation>>,
    /// Path of the executable relative to the install directory.
    #[serde(default)]
    pub bin: String,
}

/// A Kubernetes label selector (metav1.LabelSelector).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Selector {
    /// Exact label matches; `Some(empty)` is an error for krew.
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Set-based requirements; `Some(empty)` is an error for krew.
    pub match_expressions: Option<Vec<Requirement>>,
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Requirement {
    /// Label key.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(default)]
    pub operator: String,
    /// Values for `In`/`NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// A `files[]` operation: copy what the glob `from` matches in the archive to `to`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct FileOperation {
    /// Glob relative to the archive root (Go `filepath.Glob` syntax).
    #[serde(default)]
    pub from: String,
    /// Destination relative to the install directory.
    #[serde(default)]
    pub to: String,
}

impl Selector {
    /// Whether the selector matches the labels `{os, arch}`, with Kubernetes label-selector
    /// semantics (apimachinery `LabelSelectorAsSelector` + `Matches`): every matchLabel and every
    /// requirement must hold. An unknown operator never matches.
    pub fn matches(&self, os: &str, arch: &str) -> bool {
        let get = |k: &str| match k {
            "os" => Some(os),
            "arch" => Some(arch),
            _ => None,
        };
        let labels_ok = self
            .match_labels
            .iter()
            .flatten()
            .all(|(k, v)| get(k) == Some(v.as_str()));
        let exprs_ok = self
            .match_expressions
            .iter()
            .flatten()
            .all(|r| match r.operator.as_str() {
                "In" => get(&r.key).is_some_and(|v| r.values.iter().any(|x| x == v)),
                "NotIn" => get(&r.key).is_none_or(|v| r.values.iter().all(|x| x != v)),
                "Exists" => get(&r.key).is_some(),
                "DoesNotExist" => get(&r.key).is_none(),
                _ => false,
            });
        labels_ok && exprs_ok
    }
}

/// Parses a manifest file.
///
/// Errors: a message naming the file and the YAML error.
pub fn parse(path: &Path) -> Result<Manifest, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_saphyr::from_str(&text)
        .map_err(|e| format!("{}: invalid manifest YAML: {e}", path.display()))
}

/// The archive file name of a plugin build: `<package>_<version>_<os>_<arch>.<tar.gz|zip>`,
/// e.g. `kubectl-unstick_v0.1.0_linux_amd64.tar.gz`.
pub fn archive_name(plugin: &Plugin, version: &str, platform: &Platform) -> String {
    format!(
        "{}_{}_{}_{}.{}",
        plugin.package,
        version,
        platform.os,
        platform.arch,
        platform.archive_ext()
    )
}

/// The GitHub release download URL of an archive:
/// `<REPOSITORY>/releases/download/<version>/<archive>`.
pub fn archive_uri(archive: &str, version: &str) -> String {
    format!("{REPOSITORY}/releases/download/{version}/{archive}")
}

/// Known archive checksums: archive file name -> lowercase hex sha256.
pub type Sums = BTreeMap<String, String>;

/// Reads `sha256sum`-format lines (`<64 hex>  <file name>`, `*` binary marker allowed) from a
/// file into `sums`. Directory parts of names are dropped.
///
/// Errors: unreadable file, or a line that is not `<64 lowercase hex> <name>` (named by line).
pub fn read_sums(path: &Path, sums: &mut Sums) -> Result<(), String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (sha, name) = line
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("{}:{}: expected `<sha256>  <file>`", path.display(), i + 1))?;
        let name = name.trim().trim_start_matches('*');
        let name = name.rsplit(['/', '\\']).next().unwrap_or(name);
        if !is_sha256(sha) {
            return Err(format!(
                "{}:{}: {sha:?} is not a lowercase hex sha256",
                path.display(),
                i + 1
            ));
        }
        sums.insert(name.to_owned(), sha.to_owned());
    }
    Ok(())
}

/// `true` for 64 lowercase hex digits (krew validation.go `^[a-f0-9]{64}$`).
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Renders the manifest of `plugin` at `version` with one platform entry per release platform
/// whose archive has a checksum in `sums`, in [`RELEASE_PLATFORMS`] order. Platforms without a
/// known checksum are left out, never given a placeholder.
///
/// Returns the YAML text and the platforms it lists. Errors when no platform has a checksum.
pub fn render(
    plugin: &Plugin,
    version: &str,
    sums: &Sums,
) -> Result<(String, Vec<Platform>), String> {
    let mut blocks = String::new();
    let mut listed = Vec::new();
    for platform in RELEASE_PLATFORMS {
        let archive = archive_name(plugin, version, &platform);
        let Some(sha) = sums.get(&archive) else {
            continue;
        };
        let exe = platform.exe_name(plugin.package);
        blocks.push_str(
            &PLATFORM_TEMPLATE
                .replace("{{os}}", platform.os)
                .replace("{{arch}}", platform.arch)
                .replace("{{uri}}", &archive_uri(&archive, version))
                .replace("{{sha256}}", sha)
                .replace("{{exe}}", &exe),
        );
        listed.push(platform);
    }
    if listed.is_empty() {
        return Err(format!(
            "{}: no archive checksum known for version {version} on any platform",
            plugin.name
        ));
    }
    let description: String = plugin
        .description
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let completes: String = plugin
        .completes
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let text = TEMPLATE
        .replace("{{completes}}\n", &completes)
        .replace("{{name}}", plugin.name)
        .replace("{{version}}", version)
        .replace("{{short_description}}", plugin.short_description)
        .replace("{{description}}\n", &description)
        .replace("{{platforms}}\n", &blocks);
    Ok((text, listed))
}

/// Path of the manifest of a plugin in a manifests directory: `<dir>/<name>.yaml`.
pub fn manifest_path(dir: &Path, plugin: &Plugin) -> PathBuf {
    dir.join(format!("{}.yaml", plugin.name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::PLUGINS;

    fn committed(p: &Plugin) -> (String, Manifest) {
        let path = manifest_path(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../krew-manifests"),
            p,
        );
        let text = std::fs::read_to_string(&path).expect("committed manifest");
        (text, parse(&path).expect("parses"))
    }

    /// The committed krew-manifests/<name>.yaml are exactly what the template renders with
    /// their own checksums: a text changed in xtask reaches the manifests (and the other way
    /// round) only by regenerating them (`cargo run -p xtask -- manifests`).
    #[test]
    fn committed_manifests_are_the_template_rendered() {
        for p in PLUGINS {
            let (text, m) = committed(&p);
            let mut sums = Sums::new();
            for pl in &m.spec.platforms {
                let archive = pl.uri.rsplit('/').next().unwrap().to_string();
                sums.insert(archive, pl.sha256.clone());
            }
            let (rendered, _) = render(&p, &m.spec.version, &sums).expect("renders");
            assert_eq!(rendered, text, "{} is not the rendered template", p.name);
        }
    }

    /// The completion caveat says what each plugin's completion really offers: fleetlint is
    /// offline, so its caveat claims no names from a cluster; the cluster plugins name the
    /// kinds they complete.
    #[test]
    fn completion_caveats_are_true_per_plugin() {
        for p in PLUGINS {
            let (_, m) = committed(&p);
            let caveats = m.spec.caveats.replace('\n', " ");
            match p.name {
                "fleetlint" => {
                    assert!(
                        !caveats.contains("from the cluster") && !caveats.contains("namespaces"),
                        "fleetlint completes nothing from a cluster: {caveats}"
                    );
                    assert!(caveats.contains("never contacts a cluster"), "{caveats}");
                }
                "unstick" => assert!(caveats.contains("Kustomization names"), "{caveats}"),
                "cutover" | "gitops-pull" => {
                    assert!(caveats.contains("GitRepository names"), "{caveats}")
                }
                "podresolve" | "markercheck" => {
                    assert!(
                        caveats.contains("namespaces (from the cluster"),
                        "{caveats}"
                    );
                    assert!(!caveats.contains("object names"), "{caveats}");
                }
                "gatewaycheck" | "gitops-verify" => {
                    assert!(
                        caveats.contains("namespaces (from the cluster"),
                        "{caveats}"
                    );
                    assert!(!caveats.contains("object names"), "{caveats}");
                }
                "gitops-mcp" => {
                    assert!(
                        !caveats.contains("namespaces")
                            && caveats.contains("takes no object names"),
                        "the server completes no cluster names: {caveats}"
                    );
                }
                other => panic!("no caveat expectation for {other}"),
            }
        }
    }
}
