//! `--render`: run the real `kubectl kustomize` on every kustomization directory a simulated
//! change touches, before and after (on a temporary copy of the tree), and report render
//! errors and each container image that changes.

use crate::check::FileChange;
use crate::scan::split_documents;
use crate::yamltree::{self, Node};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One kustomization directory rendered before and after.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rendered {
    /// Directory (display path).
    pub dir: String,
    /// `kubectl kustomize` error before the change, if any.
    pub before_error: Option<String>,
    /// Error after the change, if any.
    pub after_error: Option<String>,
    /// Container images that change: `Kind/name container`, old, new.
    pub images: Vec<ImageChange>,
}

/// A container image that differs in the rendered output.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageChange {
    /// `Kind/namespace/name` of the rendered object.
    pub object: String,
    /// Container name (`init:` prefix for initContainers).
    pub container: String,
    /// Image before.
    pub before: String,
    /// Image after.
    pub after: String,
}

fn is_kustomization_dir(d: &Path) -> bool {
    ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .any(|n| d.join(n).is_file())
}

/// Nearest directory at or above `file` (within `root`) holding a kustomization file.
pub fn kustomization_dir(file: &Path, root: &Path) -> Option<PathBuf> {
    let mut d = file.parent()?;
    loop {
        if is_kustomization_dir(d) {
            return Some(d.to_path_buf());
        }
        if d == root {
            return None;
        }
        d = d.parent()?;
        if !d.starts_with(root) {
            return None;
        }
    }
}

fn kustomize(dir: &Path) -> Result<String, String> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run kubectl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Container images in rendered YAML: (`Kind/ns/name`, container) -> image.
pub fn images(rendered: &str) -> BTreeMap<(String, String), String> {
    let mut m = BTreeMap::new();
    let Ok(chunks) = split_documents(rendered) else {
        return m;
    };
    for (s, e) in chunks {
        let Ok(doc) = yamltree::parse(&rendered[s..e]) else {
            continue;
        };
        let Some(root) = doc.root else { continue };
        let g = |p: &[&str]| {
            root.path(p)
                .and_then(Node::str)
                .unwrap_or_default()
                .to_string()
        };
        let obj = format!(
            "{}/{}/{}",
            g(&["kind"]),
            g(&["metadata", "namespace"]),
            g(&["metadata", "name"])
        );
        collect(&root, &obj, &mut m);
    }
    m
}

fn collect(n: &Node, obj: &str, m: &mut BTreeMap<(String, String), String>) {
    match n {
        Node::Map { entries, .. } => {
            for (k, v) in entries {
                let key = k.str().unwrap_or("");
                if (key == "containers" || key == "initContainers")
                    && let Node::Seq { items, .. } = v
                {
                    for c in items {
                        if let (Some(name), Some(img)) = (
                            c.get("name").and_then(Node::str),
                            c.get("image").and_then(Node::str),
                        ) {
                            let cname = if key == "initContainers" {
                                format!("init:{name}")
                            } else {
                                name.to_string()
                            };
                            m.insert((obj.to_string(), cname), img.to_string());
                        }
                    }
                } else {
                    collect(v, obj, m);
                }
            }
        }
        Node::Seq { items, .. } => items.iter().for_each(|i| collect(i, obj, m)),
        _ => {}
    }
}

/// Copies the scanned tree for the "after" render, leaving out `.git` and cache directories
/// marked with a `CACHEDIR.TAG` (the Cache Directory Tagging convention: cargo's `target/`,
/// many tools' caches), which kustomize never reads and which can be gigabytes.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let walk = walkdir::WalkDir::new(from)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| {
            !(e.file_type().is_dir()
                && (e.file_name() == ".git" || e.path().join("CACHEDIR.TAG").is_file()))
        });
    for e in walk {
        let e = e.map_err(std::io::Error::other)?;
        let rel = e.path().strip_prefix(from).map_err(std::io::Error::other)?;
        let dst = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst)?;
        } else if e.file_type().is_file() {
            std::fs::copy(e.path(), &dst)?;
        } else if e.path_is_symlink()
            && let Ok(t) = std::fs::read_link(e.path())
        {
            #[cfg(unix)]
            let _ = std::os::unix::fs::symlink(t, &dst);
        }
    }
    Ok(())
}

/// Render each kustomization directory touched by `changes` (files under `root`) before and
/// after. Errors: the temporary copy could not be made.
pub fn render(root: &Path, changes: &[FileChange]) -> std::io::Result<Vec<Rendered>> {
    let root = std::fs::canonicalize(root)?;
    let root = if root.is_file() {
        root.parent().unwrap_or(&root).to_path_buf()
    } else {
        root
    };
    let mut dirs: Vec<PathBuf> = changes
        .iter()
        .filter_map(|c| std::fs::canonicalize(&c.abs).ok())
        .filter(|a| a.starts_with(&root))
        .filter_map(|a| kustomization_dir(&a, &root))
        .collect();
    dirs.sort();
    dirs.dedup();
    if dirs.is_empty() {
        return Ok(Vec::new());
    }
    let tmp = tempdir()?;
    copy_tree(&root, tmp.path())?;
    for c in changes {
        if let Ok(a) = std::fs::canonicalize(&c.abs)
            && let Ok(rel) = a.strip_prefix(&root)
        {
            std::fs::write(tmp.path().join(rel), &c.new)?;
        }
    }
    let mut out = Vec::new();
    for d in dirs {
        let rel = d.strip_prefix(&root).unwrap_or(&d);
        let before = kustomize(&d);
        let after = kustomize(&tmp.path().join(rel));
        let mut images = Vec::new();
        if let (Ok(b), Ok(a)) = (&before, &after) {
            let (ib, ia) = (self::images(b), self::images(a));
            for ((obj, cont), img) in &ia {
                let old = ib
                    .get(&(obj.clone(), cont.clone()))
                    .cloned()
                    .unwrap_or_default();
                if &old != img {
                    images.push(ImageChange {
                        object: obj.clone(),
                        container: cont.clone(),
                        before: old,
                        after: img.clone(),
                    });
                }
            }
        }
        out.push(Rendered {
            dir: crate::check::display_path(&d),
            before_error: before.err(),
            after_error: after.err().map(|e| {
                e.replace(
                    &tmp.path().to_string_lossy().into_owned(),
                    &root.to_string_lossy(),
                )
            }),
            images,
        });
    }
    Ok(out)
}

struct TempDir(PathBuf);
impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
fn tempdir() -> std::io::Result<TempDir> {
    let base = std::env::temp_dir();
    for i in 0..1000u32 {
        let p = base.join(format!("markercheck-render-{}-{i}", std::process::id()));
        if std::fs::create_dir(&p).is_ok() {
            return Ok(TempDir(p));
        }
    }
    Err(std::io::Error::other("cannot create a temporary directory"))
}

/// Whether an `image:` value is a bare tag (`0.1.1`, `v1.2.3`, `v2`, `2`, `1.4.0-rc.1`): what
/// a `:tag` setter writes into a whole `image:` field. The one rule of the suite (markercheck,
/// gitops verify's workloads and images links, unstick's pull failures).
///
/// A bare tag has no `/`, `:` or `@` and reads as a version: an optional `v`, digits, more
/// `.digits`, and an optional `-`/`+` suffix. Such a value is still a valid reference by the
/// docker grammar (`docker.io/library/0.1.1:latest`), which is why the node tries, and fails,
/// to pull it. A word (`latest`, `nginx`) is not a bare tag: it is the name of an image as
/// often as a tag, and calling a real image broken would be a wrong verdict.
pub fn looks_like_bare_tag(image: &str) -> bool {
    if image.contains(['/', ':', '@']) {
        return false;
    }
    let v = image.strip_prefix('v').unwrap_or(image);
    let (core, suffix) = match v.find(['-', '+']) {
        Some(i) => (&v[..i], Some(&v[i + 1..])),
        None => (v, None),
    };
    let numeric = !core.is_empty()
        && core
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric
        && suffix.is_none_or(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_from_rendered() {
        let r = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  template:\n    spec:\n      initContainers:\n      - name: m\n        image: x:1\n      containers:\n      - name: c\n        image: y:2\n---\nkind: CronJob\nmetadata:\n  name: b\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n          - name: d\n            image: z\n";
        let m = images(r);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[&("Deployment//a".to_string(), "init:m".to_string())],
            "x:1"
        );
        assert_eq!(m[&("CronJob//b".to_string(), "d".to_string())], "z");
        assert!(looks_like_bare_tag("0.1.1"));
        assert!(!looks_like_bare_tag("nginx"));
        assert!(!looks_like_bare_tag("nginx:1"));
    }

    /// The bare-tag rule's cases (issue 42: unstick called `v2` no bare tag, gitops verify one).
    #[test]
    fn the_bare_tag_rule() {
        for bare in ["v2", "2", "0.1.1", "v1.2.3", "1.4.0-rc.1", "6.7.0+build.5"] {
            assert!(looks_like_bare_tag(bare), "{bare}");
        }
        for not in [
            "latest",
            "nginx",
            "v",
            "",
            "1.",
            ".1",
            "v1..2",
            "2abc",
            "1.2-",
            "ghcr.io/org/app",
            "app:1.2.3",
            "app@sha256:abc",
            "registry:5000/app",
        ] {
            assert!(!looks_like_bare_tag(not), "{not}");
        }
    }
}
