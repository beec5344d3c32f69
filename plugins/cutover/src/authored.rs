//! The authored (committed) value of a GitRepository's `spec.url`: the self-reference trap.
//!
//! The root Kustomization renders the path that contains the GitRepository object itself, so a
//! live patch of `spec.url` is reverted at the root's next reconcile unless the committed value
//! changes too (failure catalogue entry 4). This module renders the root Kustomization's path at
//! the commit the cluster runs, with real `kubectl kustomize` (the same kustomize the
//! controller embeds), finds the GitRepository in the output and the file(s) that author its
//! URL, and prepares the exact change.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

/// Names kustomize accepts for a kustomization file, in kustomize's lookup order
/// (sigs.k8s.io/kustomize/api/konfig `RecognizedKustomizationFileNames`).
pub const KUSTOMIZATION_FILE_NAMES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Where and how a GitRepository's URL is authored.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuthoredUrl {
    /// `spec.url` of the GitRepository in the rendered root path.
    pub url: String,
    /// The root Kustomization's path (as in its spec, e.g. `./clusters/prod`).
    pub root_path: String,
    /// Every place in the tree where that URL literal is written, nearest to the root path
    /// first.
    pub locations: Vec<Location>,
}

/// One occurrence of the URL literal in a file of the tree.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// Path relative to the repository root, with `/` separators.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The line's text.
    pub text: String,
}

/// Errors finding the authored value; each names the path or object and what to do.
#[derive(Debug, thiserror::Error)]
pub enum AuthoredError {
    /// The root path does not exist in the tree at that commit.
    #[error("path {0} does not exist in the repository at the commit the cluster runs")]
    NoSuchPath(String),
    /// `kubectl kustomize` failed.
    #[error("kubectl kustomize {path} failed: {message}")]
    Render {
        /// The directory rendered.
        path: String,
        /// kustomize's message.
        message: String,
    },
    /// The GitRepository is not in the rendered output.
    #[error(
        "GitRepository {namespace}/{name} is not rendered by path {path}: the root \
         Kustomization does not author it there (check its kustomize.toolkit.fluxcd.io labels)"
    )]
    NotRendered {
        /// Namespace searched.
        namespace: String,
        /// Name searched.
        name: String,
        /// Root path.
        path: String,
    },
    /// The URL is not written literally in any file (e.g. built by postBuild substitution).
    #[error(
        "spec.url {0} of the rendered GitRepository is not written literally in any YAML file \
         (postBuild substitution or a generator?): change it by hand"
    )]
    NotLiteral(String),
    /// I/O.
    #[error("{path}: {source}")]
    Io {
        /// File or directory.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// Renders `root_path` (relative to `tree`) and returns the authored URL of GitRepository
/// `namespace/name`.
///
/// A directory without a kustomization file is read the way kustomize-controller's generator
/// does (fluxcd/pkg kustomize `Generator.WriteFile`: every `.yaml`/`.yml` manifest below it);
/// objects without a namespace match (the controller applies them into the namespace the
/// Kustomization targets).
///
/// Errors: see [`AuthoredError`].
pub fn find_authored_url(
    tree: &Path,
    root_path: &str,
    namespace: &str,
    name: &str,
) -> Result<AuthoredUrl, AuthoredError> {
    let rel = root_path.trim_start_matches("./").trim_end_matches('/');
    let dir = if rel.is_empty() || rel == "." {
        tree.to_path_buf()
    } else {
        tree.join(rel)
    };
    if !dir.is_dir() {
        return Err(AuthoredError::NoSuchPath(root_path.to_string()));
    }
    let docs = render_dir(&dir, root_path)?;
    let url = docs
        .iter()
        .find(|d| {
            d.get("kind").and_then(|k| k.as_str()) == Some("GitRepository")
                && d.pointer("/metadata/name").and_then(|n| n.as_str()) == Some(name)
                && d.pointer("/metadata/namespace")
                    .and_then(|n| n.as_str())
                    .is_none_or(|n| n == namespace)
        })
        .and_then(|d| d.pointer("/spec/url").and_then(|u| u.as_str()))
        .map(str::to_string)
        .ok_or_else(|| AuthoredError::NotRendered {
            namespace: namespace.into(),
            name: name.into(),
            path: root_path.into(),
        })?;
    let mut locations = find_literal(tree, &url)?;
    if locations.is_empty() {
        return Err(AuthoredError::NotLiteral(url));
    }
    // Nearest to the root path first: files under it, then the rest (bases it pulls in).
    let prefix = if rel.is_empty() || rel == "." {
        String::new()
    } else {
        format!("{rel}/")
    };
    locations.sort_by_key(|l| (!l.file.starts_with(&prefix), l.file.clone(), l.line));
    Ok(AuthoredUrl {
        url,
        root_path: root_path.to_string(),
        locations,
    })
}

fn render_dir(dir: &Path, root_path: &str) -> Result<Vec<serde_json::Value>, AuthoredError> {
    let has_kustomization = KUSTOMIZATION_FILE_NAMES
        .iter()
        .any(|f| dir.join(f).is_file());
    let text = if has_kustomization {
        let out = Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .output()
            .map_err(|e| AuthoredError::Render {
                path: root_path.into(),
                message: format!("cannot run kubectl: {e}"),
            })?;
        if !out.status.success() {
            return Err(AuthoredError::Render {
                path: root_path.into(),
                // kubectl 1.32 reports through klog: without its header (time, process) and
                // the `"command failed" err=` wrapper, only kustomize's message.
                message: cluster_loop::klog::strip_klog(&String::from_utf8_lossy(&out.stderr)),
            });
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        let mut all = String::new();
        for f in yaml_files(dir)? {
            let t = std::fs::read_to_string(&f).map_err(|source| AuthoredError::Io {
                path: f.display().to_string(),
                source,
            })?;
            all.push_str("\n---\n");
            all.push_str(&t);
        }
        all
    };
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| AuthoredError::Render {
            path: root_path.into(),
            message: format!("rendered output is not YAML: {e}"),
        })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn yaml_files(dir: &Path) -> Result<Vec<PathBuf>, AuthoredError> {
    let mut out = vec![];
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.map_err(|e| AuthoredError::Io {
            path: dir.display().to_string(),
            source: e.into(),
        })?;
        if entry.file_type().is_file() {
            let p = entry.path();
            if matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml") | Some("yml")
            ) && !p.components().any(|c| c.as_os_str() == ".git")
            {
                out.push(p.to_path_buf());
            }
        }
    }
    Ok(out)
}

/// Every line of a `.yaml`/`.yml`/`Kustomization` file under `tree` that holds `url` as a whole
/// YAML scalar value (`url: X`, `url: "X"`, `value: X` in a patch).
fn find_literal(tree: &Path, url: &str) -> Result<Vec<Location>, AuthoredError> {
    let mut found = vec![];
    for f in yaml_files(tree)? {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if value_of_line(line).is_some_and(|v| v == url) {
                let rel = f
                    .strip_prefix(tree)
                    .unwrap_or(&f)
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                found.push(Location {
                    file: rel,
                    line: i + 1,
                    text: line.to_string(),
                });
            }
        }
    }
    Ok(found)
}

/// The scalar value of a `key: value` (or `- key: value`) line, unquoted, without a trailing
/// comment; `None` for other lines.
fn value_of_line(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once(": ")?;
    let rest = rest.trim();
    let rest = match rest.find(" #") {
        Some(i) => rest[..i].trim_end(),
        None => rest,
    };
    let unquoted = rest
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(rest);
    Some(unquoted)
}

/// The change that makes the authored value `new_url`: for each location, the file's new text.
///
/// Shape: `(relative file, old text, new text)`, only files that change. The value is
/// replaced on the located lines only, keeping quoting, indentation, comments and line endings.
///
/// Errors: I/O reading a file.
pub fn authored_change(
    tree: &Path,
    authored: &AuthoredUrl,
    new_url: &str,
) -> Result<Vec<(String, String, String)>, AuthoredError> {
    let mut by_file: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for l in &authored.locations {
        by_file.entry(&l.file).or_default().push(l.line);
    }
    let mut changes = vec![];
    for (file, lines) in by_file {
        let path = tree.join(file);
        let old = std::fs::read_to_string(&path).map_err(|source| AuthoredError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut new = String::with_capacity(old.len());
        for (i, line) in old.split_inclusive('\n').enumerate() {
            if lines.contains(&(i + 1)) {
                new.push_str(&replace_value(line, &authored.url, new_url));
            } else {
                new.push_str(line);
            }
        }
        if new != old {
            changes.push((file.to_string(), old, new));
        }
    }
    Ok(changes)
}

fn replace_value(line: &str, old: &str, new: &str) -> String {
    match line.split_once(": ") {
        Some((key, rest)) => format!("{key}: {}", rest.replacen(old, new, 1)),
        None => line.to_string(),
    }
}

/// A unified diff of one file change (`--- a/F` / `+++ b/F`), via the `similar` crate.
pub fn unified_diff(file: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{file}"), &format!("b/{file}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const SYNC: &str = "---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m0s\n  ref:\n    branch: main\n  secretRef:\n    name: flux-system\n  url: https://laptop.example.local/org/fleet.git # old server\n";

    #[test]
    fn finds_gotk_sync_and_prepares_change() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "clusters/prod/flux-system/gotk-sync.yaml", SYNC);
        write(
            t.path(),
            "clusters/prod/flux-system/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- gotk-sync.yaml\n",
        );
        write(
            t.path(),
            "clusters/prod/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- flux-system\n",
        );
        let a =
            find_authored_url(t.path(), "./clusters/prod", "flux-system", "flux-system").unwrap();
        assert_eq!(a.url, "https://laptop.example.local/org/fleet.git");
        assert_eq!(a.locations.len(), 1);
        assert_eq!(
            a.locations[0].file,
            "clusters/prod/flux-system/gotk-sync.yaml"
        );
        assert_eq!(a.locations[0].line, 13);
        let changes =
            authored_change(t.path(), &a, "https://gitea.prod.example.dev/org/fleet.git").unwrap();
        assert_eq!(changes.len(), 1);
        assert!(
            changes[0]
                .2
                .contains("  url: https://gitea.prod.example.dev/org/fleet.git # old server\n")
        );
        let d = unified_diff(&changes[0].0, &changes[0].1, &changes[0].2);
        assert!(d.contains("-  url: https://laptop.example.local/org/fleet.git # old server"));
        assert!(d.contains("+  url: https://gitea.prod.example.dev/org/fleet.git # old server"));
    }

    #[test]
    fn overlay_patch_wins_and_is_listed_first() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "base/gotk-sync.yaml", SYNC);
        write(
            t.path(),
            "base/kustomization.yaml",
            "resources:\n- gotk-sync.yaml\n",
        );
        write(
            t.path(),
            "clusters/prod/kustomization.yaml",
            "resources:\n- ../../base\npatches:\n- target:\n    kind: GitRepository\n    name: flux-system\n  patch: |\n    - op: replace\n      path: /spec/url\n      value: \"https://gitea.prod.example.dev/org/fleet.git\"\n",
        );
        let a = find_authored_url(t.path(), "clusters/prod", "flux-system", "flux-system").unwrap();
        assert_eq!(a.url, "https://gitea.prod.example.dev/org/fleet.git");
        assert_eq!(a.locations[0].file, "clusters/prod/kustomization.yaml");
    }

    #[test]
    fn missing_path_and_missing_object_are_clear_errors() {
        let t = tempfile::tempdir().unwrap();
        write(
            t.path(),
            "clusters/prod/x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
        );
        let e = find_authored_url(t.path(), "./clusters/dev", "flux-system", "flux-system")
            .unwrap_err();
        assert!(e.to_string().contains("./clusters/dev does not exist"));
        let e = find_authored_url(t.path(), "./clusters/prod", "flux-system", "flux-system")
            .unwrap_err();
        assert!(e.to_string().contains("is not rendered by path"));
    }

    #[test]
    fn render_errors_carry_kustomize_message() {
        let t = tempfile::tempdir().unwrap();
        write(
            t.path(),
            "clusters/prod/kustomization.yaml",
            "resources:\n- missing.yaml\n",
        );
        let e =
            find_authored_url(t.path(), "clusters/prod", "flux-system", "flux-system").unwrap_err();
        assert!(matches!(e, AuthoredError::Render { .. }), "{e}");
        // kustomize's own message, without klog's header or its structured wrapper (session 6
        // trial: `E1201 23:01:02.123456  1234 run.go:72] "command failed" err="..."`).
        let m = e.to_string();
        assert!(
            m.starts_with("kubectl kustomize clusters/prod failed: accumulating resources: "),
            "{m}"
        );
        assert!(m.contains("missing.yaml"), "{m}");
        assert!(!m.contains("run.go:"), "{m}");
        assert!(!m.contains("command failed"), "{m}");
    }
}
