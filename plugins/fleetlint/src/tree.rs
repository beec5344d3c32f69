//! The repository as files: every YAML document with its position (for `file:line`), the
//! kustomize directories, and the input closure of a directory (what its render reads).

use markercheck::yamltree::{self, Node};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// File names kustomize recognises as a kustomization (`konfig.RecognizedKustomizationFileNames`).
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// One YAML document of a repository file, with where it is.
#[derive(Debug, Clone)]
pub struct RawDoc {
    /// Path relative to the repository root, `/`-separated.
    pub file: String,
    /// 1-based line of the document's first content line in the file.
    pub line: usize,
    /// Lines before the document's chunk (add to a node's 1-based line for the file line).
    pub line_offset: usize,
    /// `apiVersion` (empty when absent).
    pub api_version: String,
    /// `kind` (empty when absent).
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, if written.
    pub namespace: Option<String>,
    /// The parsed document.
    pub root: Node,
}

impl RawDoc {
    /// File line of the scalar at `keys` below the document root (mapping keys; a numeric key
    /// indexes a sequence), else of the deepest node reached, else the document line.
    pub fn line_of(&self, keys: &[&str]) -> usize {
        let mut n = &self.root;
        let mut best = self.line;
        for k in keys {
            let next = match n {
                Node::Map { entries, .. } => entries.iter().find_map(|(kn, v)| match kn {
                    Node::Scalar(s) if s.value == *k => {
                        best = s.line + self.line_offset;
                        Some(v)
                    }
                    _ => None,
                }),
                Node::Seq { items, .. } => k.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            match next {
                Some(x) => n = x,
                None => return best,
            }
        }
        if let Node::Scalar(s) = n {
            best = s.line + self.line_offset;
        }
        best
    }

    /// File line of the first scalar (key or value) whose text contains `needle`.
    pub fn line_containing(&self, needle: &str) -> Option<usize> {
        fn walk(n: &Node, needle: &str) -> Option<usize> {
            match n {
                Node::Scalar(s) => s.value.contains(needle).then_some(s.line),
                Node::Map { entries, .. } => entries
                    .iter()
                    .find_map(|(k, v)| walk(k, needle).or_else(|| walk(v, needle))),
                Node::Seq { items, .. } => items.iter().find_map(|i| walk(i, needle)),
                Node::Alias { .. } => None,
            }
        }
        walk(&self.root, needle).map(|l| l + self.line_offset)
    }
}

/// A file that is not valid YAML (reported by the render rule when a render reaches it).
#[derive(Debug, Clone)]
pub struct BadFile {
    /// Repository-relative path.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// Parser message.
    pub message: String,
}

/// The repository: every `*.yaml`/`*.yml`/`Kustomization` file parsed once.
#[derive(Debug, Default)]
pub struct Repo {
    /// Absolute, canonical repository root (Flux paths are relative to it).
    pub root: PathBuf,
    /// Every document, in file order.
    pub docs: Vec<RawDoc>,
    /// Index: (kind, name) -> positions in `docs`.
    pub by_kind_name: BTreeMap<(String, String), Vec<usize>>,
    /// Index: file -> position of its first document in `docs`.
    pub first_doc: BTreeMap<String, usize>,
    /// Directories holding a kustomization file (repository-relative, `/`-separated, "" for
    /// the root).
    pub kustomize_dirs: BTreeSet<String>,
    /// File texts by repository-relative path.
    pub texts: BTreeMap<String, String>,
    /// Files that did not parse.
    pub bad: Vec<BadFile>,
    /// The directory that was read (repository-relative; "" for the whole repository).
    pub scope: String,
    /// Memoised [`Repo::closure`] results.
    closures: std::sync::Mutex<BTreeMap<String, BTreeSet<String>>>,
}

/// Repository-relative, `/`-separated form of `p` (below `root`).
pub fn rel(root: &Path, p: &Path) -> String {
    let r = p.strip_prefix(root).unwrap_or(p);
    r.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Lexically normalises `a/b/../c` to `a/c` (no file-system access); `None` when it climbs
/// above the start.
pub fn normalize(p: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            x => out.push(x),
        }
    }
    Some(out.join("/"))
}

/// Joins a repository-relative directory and a relative reference.
pub fn join(dir: &str, r: &str) -> Option<String> {
    if dir.is_empty() {
        normalize(r)
    } else {
        normalize(&format!("{dir}/{r}"))
    }
}

fn yaml_name(n: &str) -> bool {
    n.ends_with(".yaml") || n.ends_with(".yml") || n == "Kustomization"
}

/// Parses one file's documents: (documents, parse failures).
fn parse_file(file: &str, text: &str) -> (Vec<RawDoc>, Vec<BadFile>) {
    let mut docs = Vec::new();
    let mut bad = Vec::new();
    let chunks = match markercheck::scan::split_documents(text) {
        Ok(c) => c,
        Err((off, sep)) => {
            bad.push(BadFile {
                file: file.into(),
                line: text[..off].matches('\n').count() + 1,
                message: format!("invalid document separator {sep:?}"),
            });
            return (docs, bad);
        }
    };
    for (s, e) in chunks {
        let chunk = &text[s..e];
        let line_offset = text[..s].matches('\n').count();
        let doc = match yamltree::parse(chunk) {
            Ok(d) => d,
            Err(err) => {
                bad.push(BadFile {
                    file: file.into(),
                    line: err.line + line_offset,
                    message: err.message,
                });
                continue;
            }
        };
        let Some(root) = doc.root else { continue };
        let get = |k: &[&str]| root.path(k).and_then(Node::str).unwrap_or("").to_string();
        let line = match &root {
            Node::Map { entries, .. } => entries
                .first()
                .map(|(k, _)| match k {
                    Node::Scalar(s) => s.line,
                    _ => 1,
                })
                .unwrap_or(1),
            _ => 1,
        } + line_offset;
        let d = RawDoc {
            file: file.into(),
            line,
            line_offset,
            api_version: get(&["apiVersion"]),
            kind: get(&["kind"]),
            name: get(&["metadata", "name"]),
            namespace: root
                .path(&["metadata", "namespace"])
                .and_then(Node::str)
                .map(str::to_string),
            root,
        };
        docs.push(d);
    }
    (docs, bad)
}

impl Repo {
    /// Reads every YAML file below `scope` (skipping `.git`), parsing each document once;
    /// paths are relative to `root`, the repository root Flux paths start from (`scope` is
    /// `root` or a directory below it).
    ///
    /// Errors: `root` or `scope` cannot be read.
    pub fn load(root: &Path, scope: &Path) -> std::io::Result<Repo> {
        let root = std::fs::canonicalize(root)?;
        let scope = std::fs::canonicalize(scope)?;
        let mut repo = Repo {
            root: root.clone(),
            scope: rel(&root, &scope),
            ..Default::default()
        };
        let mut files: Vec<(String, String)> = Vec::new();
        let walker = walkdir::WalkDir::new(&scope)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| e.file_name() != ".git");
        for e in walker {
            let Ok(e) = e else { continue };
            if !e.file_type().is_file() {
                continue;
            }
            let name = e.file_name().to_string_lossy();
            if !yaml_name(&name) {
                continue;
            }
            let r = rel(&root, e.path());
            if KUSTOMIZATION_FILES.contains(&name.as_ref()) {
                let d = r
                    .rsplit_once('/')
                    .map(|(d, _)| d.to_string())
                    .unwrap_or_default();
                repo.kustomize_dirs.insert(d);
            }
            let Ok(bytes) = std::fs::read(e.path()) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes).replace("\r\n", "\n");
            files.push((r, text));
        }
        // parse on every core (each file on its own), then index in file order; the threads
        // get markercheck's deep stack (the tree walk recurses once per nesting level)
        let threads = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(1, 8);
        let chunk = files.len().div_ceil(threads).max(1);
        let parsed: Vec<(Vec<RawDoc>, Vec<BadFile>)> = std::thread::scope(|s| {
            let handles: Vec<_> = files
                .chunks(chunk)
                .map(|c| {
                    std::thread::Builder::new()
                        .stack_size(markercheck::scan::DEEP_STACK)
                        .spawn_scoped(s, move || {
                            c.iter().map(|(f, t)| parse_file(f, t)).collect::<Vec<_>>()
                        })
                })
                .collect::<std::io::Result<_>>()?;
            let mut out = Vec::with_capacity(files.len());
            for h in handles {
                out.extend(
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                );
            }
            Ok::<_, std::io::Error>(out)
        })?;
        for ((r, text), (docs, bad)) in files.into_iter().zip(parsed) {
            repo.bad.extend(bad);
            for d in docs {
                let i = repo.docs.len();
                repo.first_doc.entry(d.file.clone()).or_insert(i);
                repo.by_kind_name
                    .entry((d.kind.clone(), d.name.clone()))
                    .or_default()
                    .push(i);
                repo.docs.push(d);
            }
            repo.texts.insert(r, text);
        }
        Ok(repo)
    }

    /// The raw document most likely to be the source of a rendered object: same kind and name,
    /// preferring one among `files` (the render's inputs), then one with the same namespace.
    pub fn find(
        &self,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
        files: Option<&BTreeSet<String>>,
    ) -> Option<&RawDoc> {
        let cands = self
            .by_kind_name
            .get(&(kind.to_string(), name.to_string()))?;
        let score = |d: &RawDoc| {
            let mut s = 0;
            if files.is_some_and(|f| f.contains(&d.file)) {
                s += 2;
            }
            if namespace.is_some() && d.namespace.as_deref() == namespace {
                s += 1;
            }
            s
        };
        cands
            .iter()
            .map(|&i| &self.docs[i])
            .max_by_key(|d| score(d))
    }

    /// The kustomization file of a directory, if any.
    pub fn kustomization_file(&self, dir: &str) -> Option<String> {
        KUSTOMIZATION_FILES.iter().find_map(|f| {
            let p = if dir.is_empty() {
                f.to_string()
            } else {
                format!("{dir}/{f}")
            };
            self.texts.contains_key(&p).then_some(p)
        })
    }

    /// True when `dir` (repository-relative) exists as a directory.
    pub fn is_dir(&self, dir: &str) -> bool {
        self.root.join(dir).is_dir()
    }

    /// Local references of a kustomization file: (resources + components that are
    /// directories, files it reads). Remote URLs are skipped.
    pub fn kustomization_refs(&self, dir: &str) -> (Vec<String>, Vec<String>) {
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        let Some(kf) = self.kustomization_file(dir) else {
            return (dirs, files);
        };
        let Some(doc) = self.first_doc.get(&kf).map(|&i| &self.docs[i]) else {
            return (dirs, files);
        };
        let mut push = |r: &str| {
            if r.contains("://") || r.starts_with("github.com/") || r.starts_with("git@") {
                return;
            }
            let Some(p) = join(dir, r) else { return };
            if self.is_dir(&p) {
                dirs.push(p);
            } else {
                files.push(p);
            }
        };
        let strs = |n: Option<&Node>| -> Vec<String> {
            match n {
                Some(Node::Seq { items, .. }) => items
                    .iter()
                    .filter_map(|i| match i {
                        Node::Scalar(s) => Some(s.value.clone()),
                        Node::Map { .. } => i.get("path").and_then(Node::str).map(str::to_string),
                        _ => None,
                    })
                    .collect(),
                _ => vec![],
            }
        };
        for key in [
            "resources",
            "bases",
            "components",
            "crds",
            "patches",
            "patchesStrategicMerge",
            "patchesJson6902",
            "transformers",
            "generators",
            "replacements",
        ] {
            for r in strs(doc.root.get(key)) {
                // an inline strategic-merge patch is YAML text, not a path
                if r.contains('\n') {
                    continue;
                }
                push(&r);
            }
        }
        for gen_key in ["configMapGenerator", "secretGenerator"] {
            if let Some(Node::Seq { items, .. }) = doc.root.get(gen_key) {
                for g in items {
                    for k in ["files", "envs"] {
                        for f in strs(g.get(k)) {
                            let f = f.split_once('=').map(|(_, p)| p.to_string()).unwrap_or(f);
                            push(&f);
                        }
                    }
                    if let Some(e) = g.get("env").and_then(Node::str) {
                        push(e);
                    }
                }
            }
        }
        (dirs, files)
    }

    /// Every file a render of `dir` reads: the directory's files, recursively through
    /// referenced directories; for a directory without a kustomization file, every YAML file
    /// below it (kustomize-controller's generated kustomization, fluxcd/pkg/kustomize
    /// `scanManifests`), descending into sub-directories that hold a kustomization.
    pub fn closure(&self, dir: &str) -> BTreeSet<String> {
        if let Some(c) = self.closures.lock().ok().and_then(|m| m.get(dir).cloned()) {
            return c;
        }
        let mut out = BTreeSet::new();
        let mut seen = BTreeSet::new();
        self.closure_into(dir, &mut out, &mut seen);
        if let Ok(mut m) = self.closures.lock() {
            m.insert(dir.to_string(), out.clone());
        }
        out
    }

    /// Files whose repository-relative path starts with `prefix` (a range of the sorted map).
    fn files_under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a String> + 'a {
        self.texts
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .map(|(k, _)| k)
            .take_while(move |k| k.starts_with(prefix))
    }

    fn closure_into(&self, dir: &str, out: &mut BTreeSet<String>, seen: &mut BTreeSet<String>) {
        if !seen.insert(dir.to_string()) {
            return;
        }
        let in_scope = self.scope.is_empty()
            || dir == self.scope
            || dir.starts_with(&format!("{}/", self.scope));
        if !in_scope {
            // a directory outside PATH (e.g. a base above it): every file below it, read from
            // disk by whoever needs the content
            for e in walkdir::WalkDir::new(self.root.join(dir))
                .into_iter()
                .filter_entry(|e| e.file_name() != ".git")
                .flatten()
                .filter(|e| e.file_type().is_file())
            {
                out.insert(rel(&self.root, e.path()));
            }
            return;
        }
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        if self.kustomization_file(dir).is_some() {
            // the directory's own files (the kustomization and what sits next to it)
            for f in self
                .files_under(&prefix)
                .filter(|f| !f[prefix.len()..].contains('/'))
            {
                out.insert(f.clone());
            }
            let (dirs, files) = self.kustomization_refs(dir);
            for f in files {
                if self.root.join(&f).is_file() {
                    out.insert(f);
                }
            }
            for d in dirs {
                self.closure_into(&d, out, seen);
            }
        } else {
            let mut sub_kdirs = BTreeSet::new();
            for d in &self.kustomize_dirs {
                if d.starts_with(&prefix) && d.len() > prefix.len() {
                    sub_kdirs.insert(d.clone());
                }
            }
            // top-most kustomize sub-directories only
            let tops: Vec<String> = sub_kdirs
                .iter()
                .filter(|d| {
                    !sub_kdirs
                        .iter()
                        .any(|o| o != *d && d.starts_with(&format!("{o}/")))
                })
                .cloned()
                .collect();
            for f in self.files_under(&prefix) {
                if tops.iter().any(|t| f.starts_with(&format!("{t}/"))) {
                    continue;
                }
                if f.ends_with(".yaml") || f.ends_with(".yml") {
                    out.insert(f.clone());
                }
            }
            for t in tops {
                self.closure_into(&t, out, seen);
            }
        }
    }

    /// For a directory without a kustomization file: the resources kustomize-controller's
    /// generated kustomization lists (YAML files and top-most kustomize sub-directories),
    /// repository-relative, in walk order.
    pub fn generated_resources(&self, dir: &str) -> Vec<String> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let sub: Vec<&String> = self
            .kustomize_dirs
            .iter()
            .filter(|d| d.starts_with(&prefix) && d.len() > prefix.len())
            .collect();
        let tops: Vec<&String> = sub
            .iter()
            .filter(|d| {
                !sub.iter()
                    .any(|o| o != *d && d.starts_with(&format!("{o}/")))
            })
            .copied()
            .collect();
        let mut out: Vec<String> = tops.iter().map(|s| s.to_string()).collect();
        for f in self.texts.keys().filter(|f| f.starts_with(&prefix)) {
            if tops.iter().any(|t| f.starts_with(&format!("{t}/"))) {
                continue;
            }
            if f.ends_with(".yaml") || f.ends_with(".yml") {
                out.push(f.clone());
            }
        }
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_paths() {
        assert_eq!(normalize("./clusters/dev").as_deref(), Some("clusters/dev"));
        assert_eq!(
            join("clusters/dev", "../base").as_deref(),
            Some("clusters/base")
        );
        assert_eq!(normalize("../x"), None);
    }
}
