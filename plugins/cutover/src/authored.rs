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

/// Whether a path's build would hold GitRepository `namespace/name`, read without building it
/// (for a path whose `kubectl kustomize` fails: a missing file, a bad patch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathReach {
    /// A manifest the path reaches defines it: `file` relative to the tree, `/` separators.
    Defines {
        /// The file holding the GitRepository manifest.
        file: String,
    },
    /// Every file the path reaches was read and none defines it.
    DoesNot,
    /// It cannot be ruled out: `why` names what could not be read (a listed entry missing
    /// from the tree, a remote base, a file that is not YAML).
    Unknown {
        /// What could not be read, `; `-separated.
        why: String,
    },
}

/// Follows what `root_path` (relative to `tree`) would build, the way kustomize loads it
/// (sigs.k8s.io/kustomize/api: a directory with a kustomization file loads its `resources`,
/// `bases` and `components`, each a file or another directory such as `../base`; a directory
/// without one is read as kustomize-controller's generator does, every `.yaml`/`.yml` below
/// it), and looks for GitRepository `namespace/name` in every manifest reached. Objects
/// without a namespace match, and so does any namespace when a kustomization on the way sets
/// `namespace:` to `namespace`. Patches and generators are not followed (neither creates a
/// GitRepository).
///
/// Used when the build itself fails: a failing build proves nothing about what the path
/// defines, so a manifest reached is [`PathReach::Defines`], and an entry that cannot be read
/// makes the answer [`PathReach::Unknown`] unless a manifest was found anyway.
pub fn path_reaches(tree: &Path, root_path: &str, namespace: &str, name: &str) -> PathReach {
    let rel = root_path.trim_start_matches("./").trim_end_matches('/');
    let dir = if rel.is_empty() || rel == "." {
        tree.to_path_buf()
    } else {
        tree.join(rel)
    };
    let mut walk = Walk {
        tree: tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf()),
        namespace,
        name,
        seen: vec![],
        found: None,
        gaps: vec![],
    };
    if !dir.is_dir() {
        return PathReach::Unknown {
            why: format!("path {root_path} does not exist in the tree"),
        };
    }
    walk.dir(&dir, false);
    match walk.found {
        Some(file) => PathReach::Defines { file },
        None if walk.gaps.is_empty() => PathReach::DoesNot,
        None => PathReach::Unknown {
            why: walk.gaps.join("; "),
        },
    }
}

struct Walk<'a> {
    tree: PathBuf,
    namespace: &'a str,
    name: &'a str,
    seen: Vec<PathBuf>,
    found: Option<String>,
    gaps: Vec<String>,
}

impl Walk<'_> {
    fn rel(&self, p: &Path) -> String {
        let c = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        c.strip_prefix(&self.tree)
            .unwrap_or(&c)
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    fn dir(&mut self, dir: &Path, any_ns: bool) {
        if self.found.is_some() {
            return;
        }
        let Ok(canon) = dir.canonicalize() else {
            self.gaps.push(format!("{} cannot be read", dir.display()));
            return;
        };
        if !canon.starts_with(&self.tree) {
            self.gaps
                .push(format!("{} is outside the repository", dir.display()));
            return;
        }
        if self.seen.contains(&canon) {
            return;
        }
        self.seen.push(canon.clone());
        let Some(kfile) = KUSTOMIZATION_FILE_NAMES
            .iter()
            .map(|f| canon.join(f))
            .find(|p| p.is_file())
        else {
            match yaml_files(&canon) {
                Ok(files) => {
                    for f in files {
                        self.file(&f, any_ns);
                    }
                }
                Err(e) => self.gaps.push(e.to_string()),
            }
            return;
        };
        let k: serde_json::Value = match std::fs::read_to_string(&kfile)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_saphyr::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                self.gaps
                    .push(format!("{} cannot be read: {e}", self.rel(&kfile)));
                return;
            }
        };
        let any_ns = any_ns || k.get("namespace").and_then(|n| n.as_str()) == Some(self.namespace);
        for key in ["resources", "bases", "components"] {
            let entries = k.get(key).and_then(|r| r.as_array()).cloned();
            for e in entries.into_iter().flatten() {
                let Some(e) = e.as_str() else { continue };
                if e.contains("://") || e.starts_with("git@") || e.starts_with("github.com/") {
                    self.gaps.push(format!(
                        "{} lists the remote {e} (not read here)",
                        self.rel(&kfile)
                    ));
                    continue;
                }
                let target = canon.join(e);
                if target.is_dir() {
                    self.dir(&target, any_ns);
                } else if target.is_file() {
                    self.file(&target, any_ns);
                } else {
                    self.gaps.push(format!(
                        "{} lists {e}, which is not in the tree",
                        self.rel(&kfile)
                    ));
                }
            }
        }
    }

    fn file(&mut self, f: &Path, any_ns: bool) {
        if self.found.is_some() {
            return;
        }
        let docs: Vec<serde_json::Value> = match std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_saphyr::from_multiple(&t).map_err(|e| e.to_string()))
        {
            Ok(d) => d,
            Err(e) => {
                self.gaps.push(format!("{} is not YAML: {e}", self.rel(f)));
                return;
            }
        };
        let defines = docs.iter().any(|d| {
            d.get("kind").and_then(|k| k.as_str()) == Some("GitRepository")
                && d.pointer("/metadata/name").and_then(|n| n.as_str()) == Some(self.name)
                && (any_ns
                    || d.pointer("/metadata/namespace")
                        .and_then(|n| n.as_str())
                        .is_none_or(|n| n == self.namespace))
        });
        if defines {
            self.found = Some(self.rel(f));
        }
    }
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
    fn a_path_that_does_not_build_is_followed_into_its_bases() {
        // Trial 8, B: clusters/prod lists a missing file and reaches the GitRepository only
        // through ../base.
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "base/flux-system/gotk-sync.yaml", SYNC);
        write(
            t.path(),
            "base/flux-system/kustomization.yaml",
            "resources:\n- gotk-sync.yaml\n",
        );
        write(
            t.path(),
            "clusters/prod/kustomization.yaml",
            "resources:\n- ../../base/flux-system\n- missing.yaml\n",
        );
        assert!(matches!(
            find_authored_url(t.path(), "./clusters/prod", "flux-system", "flux-system"),
            Err(AuthoredError::Render { .. })
        ));
        assert_eq!(
            path_reaches(t.path(), "./clusters/prod", "flux-system", "flux-system"),
            PathReach::Defines {
                file: "base/flux-system/gotk-sync.yaml".into()
            }
        );
        // Without the base: the missing file could be the one that defines it.
        write(
            t.path(),
            "clusters/dev/kustomization.yaml",
            "resources:\n- missing.yaml\n- apps.yaml\n",
        );
        write(
            t.path(),
            "clusters/dev/apps.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
        );
        match path_reaches(t.path(), "clusters/dev", "flux-system", "flux-system") {
            PathReach::Unknown { why } => assert_eq!(
                why,
                "clusters/dev/kustomization.yaml lists missing.yaml, which is not in the tree"
            ),
            other => panic!("{other:?}"),
        }
        // Everything read, nothing defines it.
        write(
            t.path(),
            "clusters/dev/kustomization.yaml",
            "resources:\n- apps.yaml\n",
        );
        assert_eq!(
            path_reaches(t.path(), "clusters/dev", "flux-system", "flux-system"),
            PathReach::DoesNot
        );
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
