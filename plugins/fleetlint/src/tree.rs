//! The repository as files: every YAML document with its position (for `file:line`), the
//! kustomize directories, and the input closure of a directory (what its render reads).

use markercheck::yamltree::{self, Node};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// File names kustomize recognises as a kustomization (`konfig.RecognizedKustomizationFileNames`).
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// One YAML document of a repository file, with where it is.
///
/// The facts every run needs (kind, name, namespace, `spec.path`, a kustomization's
/// references) are read once per file content and kept in the file-facts cache
/// ([`Repo::load_cached`]); the position-carrying tree ([`RawDoc::root`]) is parsed only when a
/// rule asks for it (a finding's line, a variable's origin).
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
    /// `spec.path`, when it is a string.
    pub spec_path: Option<String>,
    /// For the first document of a kustomization file: its local and remote references, as
    /// written ([`Repo::kustomization_refs`] resolves them).
    refs: Option<Vec<String>>,
    /// The whole file's text and the document's byte range in it.
    text: Arc<str>,
    span: (usize, usize),
    /// The parsed document, on first use.
    tree: OnceLock<Node>,
}

impl RawDoc {
    /// The document's text (its chunk of the file).
    pub fn doc_text(&self) -> &str {
        &self.text[self.span.0..self.span.1]
    }

    /// The document as a JSON value (parsed on each call: for the few kinds read whole, such
    /// as a FluxInstance); `None` when it does not parse.
    pub fn value(&self) -> Option<serde_json::Value> {
        serde_saphyr::from_str(self.doc_text()).ok()
    }

    /// The document's tree, parsed on first use (from text that parsed when its facts were
    /// read: same content, same tree).
    pub fn root(&self) -> &Node {
        self.tree.get_or_init(|| {
            let chunk = &self.text[self.span.0..self.span.1];
            let parse = || yamltree::parse(chunk).ok().and_then(|d| d.root);
            // a long document may nest deeper than the caller's stack allows: parse it on
            // markercheck's deep stack, as the first read did (a short one nests at most as
            // many levels as it has bytes)
            let root = if chunk.len() <= 1024 {
                parse()
            } else {
                std::thread::scope(|s| {
                    std::thread::Builder::new()
                        .stack_size(markercheck::scan::DEEP_STACK)
                        .spawn_scoped(s, parse)
                        .ok()
                        .and_then(|h| h.join().ok())
                        .flatten()
                })
            };
            root.unwrap_or(Node::Map {
                entries: vec![],
                flow: false,
                start: 0,
            })
        })
    }

    /// File line of the scalar at `keys` below the document root (mapping keys; a numeric key
    /// indexes a sequence), else of the deepest node reached, else the document line.
    pub fn line_of(&self, keys: &[&str]) -> usize {
        let mut n = self.root();
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
        walk(self.root(), needle).map(|l| l + self.line_offset)
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
    /// File texts by repository-relative path (CRLF read as LF).
    pub texts: BTreeMap<String, Arc<str>>,
    /// Hex SHA-256 of each text in `texts`, by path.
    pub hashes: BTreeMap<String, String>,
    /// The directories holding a file of `texts` and their ancestors ("" for the root).
    dirs: BTreeSet<String>,
    /// Files that did not parse.
    pub bad: Vec<BadFile>,
    /// The directory that was read (repository-relative; "" for the whole repository).
    pub scope: String,
    /// Memoised [`Repo::closure`] results.
    closures: std::sync::Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// YAML files left out because source-controller never ships them (its default exclusions
    /// and the `.sourceignore` files: [`crate::sourceignore`]), repository-relative.
    pub excluded: Vec<String>,
    /// The `.sourceignore` files read.
    pub sourceignore_files: Vec<String>,
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

/// True for a name Flux reads as YAML (`*.yaml`, `*.yml`, `Kustomization`;
/// image-automation-controller filereader.go, the same as `markercheck::scan::flux_selects`).
pub fn yaml_name(n: &str) -> bool {
    n.ends_with(".yaml") || n.ends_with(".yml") || n == "Kustomization"
}

/// What a run needs of one document, read from the file's text once per content (the
/// file-facts cache keeps it under the content digest).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct DocFacts {
    start: usize,
    end: usize,
    line: usize,
    line_offset: usize,
    api_version: String,
    kind: String,
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refs: Option<Vec<String>>,
}

/// One file's documents and parse failures (line, message), as [`DocFacts`].
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct FileFacts {
    docs: Vec<DocFacts>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    bad: Vec<(usize, String)>,
}

impl FileFacts {
    /// True when every document's range lies on character boundaries of `text` (a cache
    /// entry is only used when it fits the text it is filed under).
    fn fits(&self, text: &str) -> bool {
        self.docs.iter().all(|d| {
            d.start <= d.end
                && d.end <= text.len()
                && text.is_char_boundary(d.start)
                && text.is_char_boundary(d.end)
        })
    }
}

/// The references of a kustomization document as written, in the order
/// [`Repo::kustomization_refs`] resolves them: `resources`, `bases`, `components`, `crds`,
/// `patches`, `patchesStrategicMerge`, `patchesJson6902`, `transformers`, `generators`,
/// `replacements` (a string item, or a map item's `path`; inline patches skipped), then the
/// `files`/`envs` (the path after `key=`) and `env` of every `configMapGenerator` and
/// `secretGenerator` (kustomize api/types kustomization.go).
fn kustomization_ref_strings(root: &Node) -> Vec<String> {
    let mut out = Vec::new();
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
        for r in strs(root.get(key)) {
            // an inline strategic-merge patch is YAML text, not a path
            if r.contains('\n') {
                continue;
            }
            out.push(r);
        }
    }
    for gen_key in ["configMapGenerator", "secretGenerator"] {
        if let Some(Node::Seq { items, .. }) = root.get(gen_key) {
            for g in items {
                for k in ["files", "envs"] {
                    for f in strs(g.get(k)) {
                        out.push(f.split_once('=').map(|(_, p)| p.to_string()).unwrap_or(f));
                    }
                }
                if let Some(e) = g.get("env").and_then(Node::str) {
                    out.push(e.to_string());
                }
            }
        }
    }
    out
}

/// Parses one file's documents: their facts and trees (`kustomization`: the file is a
/// kustomization file, whose first document's references are kept).
fn parse_file(text: &str, kustomization: bool) -> (FileFacts, Vec<Node>) {
    let mut facts = FileFacts::default();
    let mut trees = Vec::new();
    let chunks = match markercheck::scan::split_documents(text) {
        Ok(c) => c,
        Err((off, sep)) => {
            facts.bad.push((
                text[..off].matches('\n').count() + 1,
                format!("invalid document separator {sep:?}"),
            ));
            return (facts, trees);
        }
    };
    // Lines before each document, counted on from the previous one: counting from the start
    // of the file for every document made a file of many documents quadratic (a fresh-user
    // trial: 10,000 ConfigMaps in one file took 16 s, 200,000 never ended).
    let (mut counted_to, mut line_offset) = (0usize, 0usize);
    for (s, e) in chunks {
        let chunk = &text[s..e];
        line_offset += text[counted_to..s].matches('\n').count();
        counted_to = s;
        let doc = match yamltree::parse(chunk) {
            Ok(d) => d,
            Err(err) => {
                facts.bad.push((err.line + line_offset, err.message));
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
        let first = facts.docs.is_empty();
        facts.docs.push(DocFacts {
            start: s,
            end: e,
            line,
            line_offset,
            api_version: get(&["apiVersion"]),
            kind: get(&["kind"]),
            name: get(&["metadata", "name"]),
            namespace: root
                .path(&["metadata", "namespace"])
                .and_then(Node::str)
                .map(str::to_string),
            spec_path: root
                .path(&["spec", "path"])
                .and_then(Node::str)
                .map(str::to_string),
            refs: (kustomization && first).then(|| kustomization_ref_strings(&root)),
        });
        trees.push(root);
    }
    (facts, trees)
}

/// Hex SHA-256 of a file's text (the file-facts cache key).
fn digest(text: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a cache of `held` entries that differs from what a run used by `differ` entries
/// (used but missing, held but unused) is rewritten: when it is damaged or empty, or differs by
/// more than an eighth. A small difference is left: its entries are read or made again by the
/// next run, which is cheaper than rewriting the whole file after every change.
pub fn rewrite_needed(differ: usize, held: usize) -> bool {
    differ > 0 && (held == 0 || differ * 8 > held)
}

/// Version of the file-facts cache format and of what [`parse_file`] extracts: a cache written
/// by another version is ignored (and rewritten).
const FACTS_FORMAT: &str = concat!("fleetlint-file-facts/1/", env!("CARGO_PKG_VERSION"));

/// The file-facts cache of one repository root and scope: content digest -> facts.
///
/// On disk: `files-<digest of root and scope>.json` in the cache directory, a first line with
/// the SHA-256 of the rest, then `{"format": .., "files": {digest: facts}}`. A file that is
/// unreadable, fails its checksum, has another format or an entry that does not fit its text
/// is ignored: those files are parsed again and the cache is rewritten (each write goes to a
/// temporary name and is renamed, so readers never see half a file).
struct FactsCache {
    file: Option<PathBuf>,
    entries: BTreeMap<String, FileFacts>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct FactsBody {
    format: String,
    files: BTreeMap<String, FileFacts>,
}

impl FactsCache {
    fn open(cache_dir: Option<&Path>, root: &Path, scope: &Path) -> FactsCache {
        let Some(dir) = cache_dir else {
            return FactsCache {
                file: None,
                entries: BTreeMap::new(),
            };
        };
        let id = digest(&format!("{}\0{}", root.display(), scope.display()));
        let file = dir.join(format!("files-{}.json", &id[..32]));
        let entries = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| {
                let (sum, body) = s.split_once('\n')?;
                (digest(body) == sum).then_some(())?;
                let b: FactsBody = serde_json::from_str(body).ok()?;
                (b.format == FACTS_FORMAT).then_some(b.files)
            })
            .unwrap_or_default();
        FactsCache {
            file: Some(file),
            entries,
        }
    }

    /// Writes `used` (the facts of this run's files) as the cache, unless the cache read
    /// differs from it by at most an eighth of its entries (a one-file change: the next run
    /// parses that file again, which costs less than rewriting the cache every time).
    fn store(self, used: BTreeMap<String, FileFacts>) {
        let Some(file) = self.file else { return };
        let missed = used
            .keys()
            .filter(|k| !self.entries.contains_key(*k))
            .count();
        let unused = self.entries.len() + missed - used.len();
        if !rewrite_needed(missed + unused, self.entries.len()) {
            return;
        }
        let Ok(body) = serde_json::to_string(&FactsBody {
            format: FACTS_FORMAT.into(),
            files: used,
        }) else {
            return;
        };
        if let Some(d) = file.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, format!("{}\n{body}", digest(&body))).is_ok() {
            let _ = std::fs::rename(&tmp, &file);
        }
    }
}

/// One file's digest, facts, and its documents' trees when it was parsed now (`None` when
/// the facts came from the cache).
type Parsed = (String, FileFacts, Option<Vec<Node>>);

/// Digests every file (path, text, is a kustomization file), looks its facts up in the cache
/// `entries` and parses it on a miss, on every core (at most 8 threads), in file order. The
/// threads get markercheck's deep stack (the tree walk recurses once per nesting level).
///
/// Errors: no thread can be started.
fn parse_all(
    files: &[(String, Arc<str>, bool)],
    entries: &BTreeMap<String, FileFacts>,
) -> std::io::Result<Vec<Parsed>> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let chunk = files.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|c| {
                std::thread::Builder::new()
                    .stack_size(markercheck::scan::DEEP_STACK)
                    .spawn_scoped(s, move || {
                        c.iter()
                            .map(|(_, t, k)| {
                                let d = digest(t);
                                match entries.get(&d).filter(|f| f.fits(t)) {
                                    Some(f) => (d, f.clone(), None),
                                    None => {
                                        let (f, trees) = parse_file(t, *k);
                                        (d, f, Some(trees))
                                    }
                                }
                            })
                            .collect::<Vec<_>>()
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
    })
}

impl Repo {
    /// Reads every YAML file below `scope` (skipping `.git`), parsing each document once;
    /// paths are relative to `root`, the repository root Flux paths start from (`scope` is
    /// `root` or a directory below it). No file-facts cache: see [`Repo::load_cached`].
    ///
    /// Errors: `root` or `scope` cannot be read.
    pub fn load(root: &Path, scope: &Path) -> std::io::Result<Repo> {
        Repo::load_cached(root, scope, None)
    }

    /// [`Repo::load`], with the facts of each file content (documents, kinds, names, line
    /// numbers, kustomization references, parse errors) kept in `cache_dir`: a file whose
    /// content digest is in the cache is read but not parsed; its trees are parsed when a rule
    /// first asks for one ([`RawDoc::root`]). An edited file has a new digest, so it is always
    /// parsed again; a damaged cache is ignored and rewritten.
    ///
    /// Errors: `root` or `scope` cannot be read.
    pub fn load_cached(
        root: &Path,
        scope: &Path,
        cache_dir: Option<&Path>,
    ) -> std::io::Result<Repo> {
        Repo::load_counted(root, scope, cache_dir, None)
    }

    /// [`Repo::load_cached`], adding one to `read` for every YAML file read (the progress
    /// line's count).
    ///
    /// Errors: `root` or `scope` cannot be read.
    pub fn load_counted(
        root: &Path,
        scope: &Path,
        cache_dir: Option<&Path>,
        read: Option<&std::sync::atomic::AtomicUsize>,
    ) -> std::io::Result<Repo> {
        let root = std::fs::canonicalize(root)?;
        let scope = std::fs::canonicalize(scope)?;
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        let mut unreadable = Vec::new();
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
            if let Some(n) = read {
                n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            match std::fs::read(e.path()) {
                Ok(b) => files.push((r, b)),
                Err(_) => unreadable.push(r),
            }
        }
        Repo::from_files(&root, &scope, files, &unreadable, cache_dir)
    }

    /// The repository from files already read: `files` are (repository-relative path, bytes)
    /// of every YAML file below `scope` except symlinks, in lexical path order (the order of a
    /// depth-first walk over sorted directory entries); `unreadable` the YAML files that could
    /// not be read (a kustomization file among them still makes its directory a kustomize
    /// directory). `root` and `scope` are canonical. The file-facts cache is used as in
    /// [`Repo::load_cached`].
    ///
    /// Errors: no thread can be started.
    pub fn from_files(
        root: &Path,
        scope: &Path,
        files: Vec<(String, Vec<u8>)>,
        unreadable: &[String],
        cache_dir: Option<&Path>,
    ) -> std::io::Result<Repo> {
        let mut repo = Repo {
            root: root.to_path_buf(),
            scope: rel(root, scope),
            ..Default::default()
        };
        let (files, unreadable) = repo.drop_sourceignored(root, files, unreadable);
        let unreadable = &unreadable[..];
        let cache = FactsCache::open(cache_dir, root, scope);
        let kustomization_file = |r: &str| {
            let name = r.rsplit_once('/').map_or(r, |(_, n)| n);
            KUSTOMIZATION_FILES.contains(&name)
        };
        for r in files.iter().map(|(r, _)| r).chain(unreadable) {
            if kustomization_file(r) {
                let d = r
                    .rsplit_once('/')
                    .map(|(d, _)| d.to_string())
                    .unwrap_or_default();
                repo.kustomize_dirs.insert(d);
            }
        }
        let files: Vec<(String, Arc<str>, bool)> = files
            .into_iter()
            .map(|(r, bytes)| {
                let text = match String::from_utf8(bytes) {
                    Ok(t) if !t.contains('\r') => t,
                    Ok(t) => t.replace("\r\n", "\n"),
                    Err(e) => String::from_utf8_lossy(e.as_bytes()).replace("\r\n", "\n"),
                };
                let k = kustomization_file(&r);
                (r, Arc::from(text), k)
            })
            .collect();
        let parsed = parse_all(&files, &cache.entries)?;
        let mut used = BTreeMap::new();
        for ((r, text, _), (d, facts, trees)) in files.into_iter().zip(parsed) {
            repo.index_file(r, text, &d, &facts, trees);
            used.insert(d, facts);
        }
        cache.store(used);
        Ok(repo)
    }

    /// Leaves out what source-controller leaves out of the artifact (fluxcd/pkg
    /// sourceignore): a CI workflow or a SOPS configuration is no manifest of the fleet. Records
    /// the `.sourceignore` files read and the files left out; returns the files and the
    /// unreadable paths that stay.
    fn drop_sourceignored(
        &mut self,
        root: &Path,
        files: Vec<(String, Vec<u8>)>,
        unreadable: &[String],
    ) -> (Vec<(String, Vec<u8>)>, Vec<String>) {
        let mut dirs: BTreeSet<&str> = BTreeSet::new();
        for r in files.iter().map(|(r, _)| r).chain(unreadable) {
            let mut d = r.as_str();
            while let Some((parent, _)) = d.rsplit_once('/') {
                if !dirs.insert(parent) {
                    break;
                }
                d = parent;
            }
        }
        let ignore = crate::sourceignore::SourceIgnore::load(root, dirs);
        self.sourceignore_files = ignore.files.clone();
        let (files, dropped): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|(r, _)| !ignore.excluded(root, r));
        self.excluded = dropped.into_iter().map(|(r, _)| r).collect();
        let unreadable: Vec<String> = unreadable
            .iter()
            .filter(|r| !ignore.excluded(root, r))
            .cloned()
            .collect();
        (files, unreadable)
    }

    /// Indexes one file's facts (repository-relative path `r`, its text and digest `d`):
    /// its parse errors, its documents (with their trees when they were parsed now), its
    /// directories and its digest and text.
    fn index_file(
        &mut self,
        r: String,
        text: Arc<str>,
        d: &str,
        facts: &FileFacts,
        trees: Option<Vec<Node>>,
    ) {
        for (line, message) in &facts.bad {
            self.bad.push(BadFile {
                file: r.clone(),
                line: *line,
                message: message.clone(),
            });
        }
        let mut trees = trees.map(Vec::into_iter);
        for f in &facts.docs {
            let tree = OnceLock::new();
            if let Some(t) = trees.as_mut().and_then(Iterator::next) {
                let _ = tree.set(t);
            }
            let i = self.docs.len();
            self.first_doc.entry(r.clone()).or_insert(i);
            self.by_kind_name
                .entry((f.kind.clone(), f.name.clone()))
                .or_default()
                .push(i);
            self.docs.push(RawDoc {
                file: r.clone(),
                line: f.line,
                line_offset: f.line_offset,
                api_version: f.api_version.clone(),
                kind: f.kind.clone(),
                name: f.name.clone(),
                namespace: f.namespace.clone(),
                spec_path: f.spec_path.clone(),
                refs: f.refs.clone(),
                text: text.clone(),
                span: (f.start, f.end),
                tree,
            });
        }
        let mut dir = r.as_str();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if !self.dirs.insert(parent.to_string()) {
                break;
            }
            dir = parent;
        }
        self.dirs.insert(String::new());
        self.hashes.insert(r.clone(), d.to_string());
        self.texts.insert(r, text);
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
            // A directory outside PATH (a Kustomization's spec.path beside it, e.g.
            // `fleetlint clusters` and `./apps/staging`) was not walked: its kustomization
            // file is asked of the file system, or it would render as if it had none (empty).
            let here =
                self.texts.contains_key(&p) || (!self.in_scope(&p) && self.root.join(&p).is_file());
            here.then_some(p)
        })
    }

    /// True when the repository-relative path `p` is at or below the directory that was walked
    /// ([`Repo::scope`]); a file outside it was not read or parsed here.
    pub fn in_scope(&self, p: &str) -> bool {
        self.scope.is_empty()
            || p == self.scope
            || p.strip_prefix(self.scope.as_str())
                .is_some_and(|r| r.starts_with('/'))
    }

    /// True when `dir` (repository-relative) exists as a directory.
    pub fn is_dir(&self, dir: &str) -> bool {
        // a directory holding a file the walk read is one; a file the walk read is not; the
        // rest (a symlink, a path outside PATH or never walked) is asked of the file system
        if self.dirs.contains(dir) {
            return true;
        }
        if self.texts.contains_key(dir) {
            return false;
        }
        self.root.join(dir).is_dir()
    }

    /// True when `f` (repository-relative) is a file: one the walk read, else as the file
    /// system says.
    pub fn is_file(&self, f: &str) -> bool {
        self.texts.contains_key(f) || self.root.join(f).is_file()
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
        match &doc.refs {
            Some(refs) => refs.iter().for_each(|r| push(r)),
            None => kustomization_ref_strings(doc.root())
                .iter()
                .for_each(|r| push(r)),
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
                if self.is_file(&f) {
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

    /// True when a render of `dir` would read `path` had it existed, or did read it before it
    /// was deleted: the test `--changed-since` applies to a changed path that is no longer on
    /// disk (a deleted or renamed-away file or directory), which [`Repo::closure`] (the files
    /// that exist now) cannot hold.
    ///
    /// The same walk as the closure, over places instead of files: `path` is `dir` or below it
    /// when `dir` has no kustomization file (kustomize-controller's generated kustomization
    /// takes every YAML file below it, fluxcd/pkg/kustomize `scanManifests`) or does not exist
    /// (a deleted `spec.path`); it sits directly in a directory with a kustomization file
    /// (kustomize reads the kustomization next to its files, and a deleted kustomization file
    /// changes how the directory renders); or it is, or is below, a local `resources`,
    /// `components` or file reference of a kustomization file the walk reaches (kustomize
    /// api/krusty: a reference is a file or a directory, read whole). Remote references are
    /// skipped as in [`Repo::kustomization_refs`].
    pub fn render_reads(&self, dir: &str, path: &str) -> bool {
        let mut seen = BTreeSet::new();
        self.reads_into(dir, path, &mut seen)
    }

    fn reads_into(&self, dir: &str, path: &str, seen: &mut BTreeSet<String>) -> bool {
        if !seen.insert(dir.to_string()) {
            return false;
        }
        let at_or_below = |d: &str| d.is_empty() || path == d || path.starts_with(&format!("{d}/"));
        if self.kustomization_file(dir).is_none() {
            // no kustomization file (or no directory at all any more): everything below
            return at_or_below(dir);
        }
        // a kustomization file: its own directory's files, and its references (which can climb
        // out of `dir`, `../base`)
        let parent = path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
        if parent == dir {
            return true;
        }
        let (dirs, files) = self.kustomization_refs(dir);
        if files.iter().any(|f| at_or_below(f)) {
            return true;
        }
        dirs.iter().any(|d| self.reads_into(d, path, seen))
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
        // A directory outside PATH was not walked: its files and kustomize sub-directories
        // are read from the file system (the same listing, not the walk's).
        let (walked_dirs, walked_files);
        let (kustomize_dirs, files): (Vec<&String>, Vec<&String>) = if self.in_scope(dir) {
            (
                self.kustomize_dirs.iter().collect(),
                self.texts.keys().collect(),
            )
        } else {
            (walked_dirs, walked_files) = self.list_outside(dir);
            (walked_dirs.iter().collect(), walked_files.iter().collect())
        };
        let sub: Vec<&String> = kustomize_dirs
            .into_iter()
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
        for f in files.into_iter().filter(|f| f.starts_with(&prefix)) {
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

    /// Below `dir` (repository-relative, outside PATH), from the file system: the directories
    /// holding a kustomization file and the YAML files, repository-relative (hidden entries
    /// skipped, 32 levels at most, as the walk).
    fn list_outside(&self, dir: &str) -> (Vec<String>, Vec<String>) {
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        let mut stack = vec![(dir.to_string(), 0usize)];
        while let Some((d, depth)) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(self.root.join(&d)) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                let rel = if d.is_empty() {
                    name.clone()
                } else {
                    format!("{d}/{name}")
                };
                match e.file_type() {
                    Ok(t) if t.is_dir() && depth < 32 => stack.push((rel, depth + 1)),
                    Ok(t) if t.is_file() => {
                        if KUSTOMIZATION_FILES.contains(&name.as_str()) {
                            dirs.push(d.clone());
                        }
                        if name.ends_with(".yaml") || name.ends_with(".yml") {
                            files.push(rel);
                        }
                    }
                    _ => {}
                }
            }
        }
        (dirs, files)
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
