//! The kustomize structure of a scanned tree: which kustomization files include which
//! manifests, the namespace kustomize gives them, and which Flux Kustomizations apply them.
//!
//! kustomize (api/krusty, `builtins.NamespaceTransformer`) sets `metadata.namespace` of every
//! namespaced resource a kustomization with `namespace:` builds, overriding the manifest's own;
//! a kustomization that includes another (through `resources:`, `bases:` or `components:`)
//! runs its own transformer on the result, so the outermost `namespace:` wins. A manifest
//! included by several kustomizations that resolve to different namespaces has no single
//! namespace: it is reported as unknown rather than guessed.

use crate::scan::FileScan;
use crate::yamltree::Node;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

/// The namespace kustomize gives a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Namespace {
    /// No including kustomization sets one: the manifest's own `metadata.namespace` applies.
    Unset,
    /// Every build that includes the file sets this namespace.
    Set(String),
    /// Builds disagree: the namespaces they give (`""` for a build that sets none).
    Unknown(Vec<String>),
}

#[derive(Debug, Default)]
struct Kust {
    namespace: Option<String>,
    /// Entries while reading (paths relative to the scan base); empty once the tree is built:
    /// the manifest files are then held once, as keys of [`Tree::listed_in`].
    files: Vec<PathBuf>,
    /// Included kustomization directories.
    dirs: Vec<PathBuf>,
}

/// The kustomization files of one scanned tree (paths relative to its scan base).
#[derive(Debug, Default)]
pub struct Tree {
    kusts: HashMap<PathBuf, Kust>,
    /// file -> directories of the kustomizations that list it
    listed_in: HashMap<PathBuf, Vec<PathBuf>>,
    /// kustomization directory -> directories of the kustomizations that include it
    parents: HashMap<PathBuf, Vec<PathBuf>>,
}

/// `a/./b/../c` -> `a/c` without touching the file system; `None` if it leaves the tree.
pub fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out: Vec<&std::ffi::OsStr> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::Normal(s) => out.push(s),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out.iter().collect())
}

fn strings(n: Option<&Node>) -> Vec<String> {
    match n {
        Some(Node::Seq { items, .. }) => items
            .iter()
            .filter_map(|i| i.str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

impl Tree {
    /// Read every kustomization file among `files` (`kustomization.yaml`, `.yml`,
    /// `Kustomization`): `namespace`, and `resources` / `bases` / `components` entries that are
    /// local paths (remote URLs are skipped).
    pub fn from_files(files: &[FileScan]) -> Tree {
        let mut t = Tree::default();
        for f in files {
            let name = f.rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !crate::scan::is_kustomization_file(name) {
                continue;
            }
            let Some(root) = f.docs.first().and_then(|d| d.tree.root.as_ref()) else {
                continue;
            };
            let dir = f.rel.parent().map(Path::to_path_buf).unwrap_or_default();
            let ns = root
                .get("namespace")
                .and_then(Node::str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            let mut entries = strings(root.get("resources"));
            entries.extend(strings(root.get("bases")));
            entries.extend(strings(root.get("components")));
            let mut k = Kust {
                namespace: ns,
                ..Default::default()
            };
            for e in entries {
                if e.contains("://") || e.starts_with("github.com/") || e.starts_with("git@") {
                    continue;
                }
                if let Some(p) = normalize(&dir.join(&e)) {
                    // a directory entry or a file entry: decided once every kustomization is
                    // known (a directory is included through its own kustomization file)
                    k.files.push(p);
                }
            }
            t.kusts.insert(dir, k);
        }
        let dirs: HashSet<PathBuf> = t.kusts.keys().cloned().collect();
        let mut listed_in: HashMap<PathBuf, Vec<PathBuf>> = HashMap::new();
        let mut parents: HashMap<PathBuf, Vec<PathBuf>> = HashMap::new();
        for (dir, k) in t.kusts.iter_mut() {
            let entries = std::mem::take(&mut k.files);
            for p in entries {
                if dirs.contains(&p) {
                    parents.entry(p.clone()).or_default().push(dir.clone());
                    k.dirs.push(p);
                } else {
                    listed_in.entry(p).or_default().push(dir.clone());
                }
            }
        }
        t.listed_in = listed_in;
        t.parents = parents;
        t
    }

    /// The namespaces the builds of the kustomization in `dir` can give its output (`None`:
    /// no `namespace:` on the way out).
    fn outcomes(&self, dir: &Path, seen: &mut Vec<PathBuf>) -> BTreeSet<Option<String>> {
        let own = self.kusts.get(dir).and_then(|k| k.namespace.clone());
        let mut out = BTreeSet::new();
        if seen.iter().any(|s| s == dir) {
            out.insert(own);
            return out; // a cycle: kustomize fails on it anyway
        }
        let ps = self.parents.get(dir).cloned().unwrap_or_default();
        if ps.is_empty() {
            out.insert(own);
            return out;
        }
        seen.push(dir.to_path_buf());
        for p in ps {
            for r in self.outcomes(&p, seen) {
                out.insert(r.or_else(|| own.clone()));
            }
        }
        seen.pop();
        out
    }

    /// The namespace kustomize gives the manifest at `file` (relative to the scan base).
    pub fn namespace_of(&self, file: &Path) -> Namespace {
        let Some(dirs) = self.listed_in.get(file) else {
            return Namespace::Unset;
        };
        let mut all = BTreeSet::new();
        for d in dirs {
            all.extend(self.outcomes(d, &mut Vec::new()));
        }
        if all.iter().all(Option::is_none) {
            return Namespace::Unset;
        }
        if all.len() == 1 {
            if let Some(Some(ns)) = all.into_iter().next() {
                return Namespace::Set(ns);
            }
            return Namespace::Unset;
        }
        Namespace::Unknown(all.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// Does a `kustomize build` of `dir` (relative to the scan base) include `file`? When `dir`
    /// has no kustomization file, kustomize-controller generates one that takes every manifest
    /// under it, so any file below `dir` is included.
    pub fn builds(&self, dir: &Path, file: &Path) -> bool {
        if !self.kusts.contains_key(dir) {
            return file.starts_with(dir);
        }
        let Some(listers) = self.listed_in.get(file) else {
            return false;
        };
        let mut stack = vec![dir.to_path_buf()];
        let mut seen = HashSet::new();
        while let Some(d) = stack.pop() {
            if !seen.insert(d.clone()) {
                continue;
            }
            if let Some(k) = self.kusts.get(&d) {
                if listers.contains(&d) {
                    return true;
                }
                stack.extend(k.dirs.iter().cloned());
            }
        }
        false
    }

    /// Whether any kustomization file was read.
    pub fn is_empty(&self) -> bool {
        self.kusts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(rel: &str, text: &str) -> FileScan {
        crate::scan::scan_bytes_keep(rel.into(), rel.into(), true, text.as_bytes().to_vec(), true)
            .unwrap()
    }

    #[test]
    fn outermost_namespace_wins() {
        let files = vec![
            f(
                "apps/kustomization.yaml",
                "namespace: apps\nresources:\n- base\n",
            ),
            f(
                "apps/base/kustomization.yaml",
                "namespace: inner\nresources:\n- policy.yaml\n- ./deploy.yaml\n",
            ),
            f("lone/kustomization.yaml", "resources:\n- x.yaml\n"),
        ];
        let t = Tree::from_files(&files);
        assert_eq!(
            t.namespace_of(Path::new("apps/base/policy.yaml")),
            Namespace::Set("apps".into())
        );
        assert_eq!(t.namespace_of(Path::new("lone/x.yaml")), Namespace::Unset);
        assert_eq!(t.namespace_of(Path::new("other.yaml")), Namespace::Unset);
        assert!(t.builds(Path::new("apps"), Path::new("apps/base/deploy.yaml")));
        assert!(!t.builds(Path::new("lone"), Path::new("apps/base/deploy.yaml")));
        assert!(t.builds(Path::new("nokust"), Path::new("nokust/a/b.yaml")));
    }

    #[test]
    fn disagreeing_builds_are_unknown() {
        let files = vec![
            f(
                "a/kustomization.yaml",
                "namespace: one\nresources:\n- ../p.yaml\n",
            ),
            f(
                "b/kustomization.yaml",
                "namespace: two\nresources:\n- ../p.yaml\n",
            ),
        ];
        let t = Tree::from_files(&files);
        assert_eq!(
            t.namespace_of(Path::new("p.yaml")),
            Namespace::Unknown(vec!["one".into(), "two".into()])
        );
    }
}
