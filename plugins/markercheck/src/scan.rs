//! File selection, reading and per-document analysis, following image-automation-controller
//! `internal/update/filereader.go` (`ScreeningLocalReader.Read`) and kyaml v0.21.1
//! `kio/byteio_reader.go` (`ByteReader.Read`, `splitDocuments`, `decode`).

use crate::api::{IMAGE_GROUP, KUSTOMIZE_GROUP};
use crate::marker::{self, Parsed};
use crate::yamltree::{self, Comment, Node, Scalar, Style};
use std::path::{Path, PathBuf};

/// The token `ScreeningLocalReader` looks for: `fmt.Sprintf("%q", "$imagepolicy")`.
pub const TOKEN: &[u8] = b"\"$imagepolicy\"";

/// Files larger than this are not read (reported as a finding instead).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 64 * 1024 * 1024;

/// How upstream selects a file by name (`filereader.go`: `filepath.Ext(p)` is `.yaml` or
/// `.yml`, case-sensitive, or `filepath.Base(p) == "Kustomization"`).
pub fn flux_selects(name: &str) -> bool {
    name == "Kustomization" || ext(name) == Some("yaml") || ext(name) == Some("yml")
}

fn ext(name: &str) -> Option<&str> {
    // Go filepath.Ext: from the last dot of the final element.
    name.rfind('.').map(|i| &name[i + 1..])
}

/// Names worth reading for lint although Flux never reads them (YAML-ish names, templates).
pub fn lint_candidate(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.contains(".yaml")
        || l.contains(".yml")
        || l == "kustomization"
        || matches!(
            ext(&l),
            Some("json" | "tpl" | "tmpl" | "gotmpl" | "j2" | "jinja" | "txt" | "template")
        )
}

/// Why upstream would skip a file that passed the token pre-check ("problem file" in
/// `ScreeningLocalReader.Read`: any error from `kio.ByteReader.Read`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Not UTF-8 (go-yaml v3 rejects invalid UTF-8).
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
    },
    /// `splitDocuments`: a `---` line followed by something other than a comment.
    InvalidSeparator {
        /// 1-based line.
        line: usize,
        /// The separator line.
        text: String,
    },
    /// go-yaml failed to parse a document (`MalformedYAMLError`).
    Syntax {
        /// 1-based line in the file.
        line: usize,
        /// 1-based column.
        col: usize,
        /// Parser message.
        message: String,
    },
    /// The document root is not a mapping (kyaml cannot set its reader annotations): a
    /// top-level sequence (JSON6902 patch files) or scalar.
    NotAMapping {
        /// 1-based line of the document root.
        line: usize,
        /// "sequence" or "scalar".
        what: &'static str,
    },
    /// `metadata` / `metadata.annotations` is not a mapping.
    BadMetadata {
        /// 1-based line.
        line: usize,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::InvalidUtf8 { offset } => write!(f, "not valid UTF-8 (byte {offset})"),
            Problem::InvalidSeparator { line, text } => {
                write!(f, "invalid document separator {text:?} at line {line}")
            }
            Problem::Syntax { line, col, message } => {
                write!(f, "YAML syntax error at {line}:{col}: {message}")
            }
            Problem::NotAMapping { line, what } => {
                write!(
                    f,
                    "document at line {line} is a top-level {what}, not a mapping"
                )
            }
            Problem::BadMetadata { line } => {
                write!(
                    f,
                    "metadata or metadata.annotations at line {line} is not a mapping"
                )
            }
        }
    }
}

impl Problem {
    /// 1-based line of the problem.
    pub fn line(&self) -> usize {
        match self {
            Problem::InvalidUtf8 { .. } => 1,
            Problem::InvalidSeparator { line, .. }
            | Problem::Syntax { line, .. }
            | Problem::NotAMapping { line, .. }
            | Problem::BadMetadata { line } => *line,
        }
    }
}

/// Identity of the object a marker is in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ObjectId {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
}

/// Where a comment mentioning `$imagepolicy` sits, in go-yaml v3 terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Line comment of a scalar value: Flux reads it.
    LineComment,
    /// Head comment of a scalar sequence item with no line comment: Flux reads it.
    ItemHeadComment,
    /// On the line above `key: value`: go-yaml attaches it to the key; never applied.
    AboveKey,
    /// After `key:` whose value is on the following lines (attaches to the key).
    OnKey,
    /// Anywhere else (foot comments, a line comment after a flow collection...).
    Elsewhere,
    /// A head comment shadowed by the scalar's own (non-marker) line comment.
    Shadowed,
    /// Text inside a block scalar (`|`/`>`): string data, never a comment.
    BlockScalarContent,
    /// Inside a quoted or plain scalar value (string data).
    InsideValue,
}

/// One comment (or text) that mentions `$imagepolicy`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Site {
    /// 1-based line in the file.
    pub line: usize,
    /// 1-based column of the `#` (or of the text).
    pub col: usize,
    /// Comment text including `#`.
    pub comment: String,
    /// Placement.
    pub placement: Placement,
    /// How Flux reads the comment (`None` for block content / inside values).
    #[serde(skip)]
    pub parsed: Option<Parsed>,
    /// The setter name if `parsed` is a marker.
    pub setter: Option<String>,
    /// The scalar the comment applies to (for effective placements).
    pub target: Option<Target>,
    /// Object the site is in.
    pub object: ObjectId,
    /// In an item of an unwrapped `kind: List` (Flux writes changes to a generated path).
    pub in_list_item: bool,
}

impl Site {
    /// Flux reads this comment as a marker (correct placement and JSON).
    pub fn effective(&self) -> bool {
        matches!(
            self.placement,
            Placement::LineComment | Placement::ItemHeadComment
        ) && self.setter.is_some()
    }
}

/// The scalar a marker sets.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Target {
    /// Current value.
    pub value: String,
    /// Style.
    pub style: Style,
    /// Byte range in the LF-normalized file text.
    pub start: usize,
    /// End (exclusive).
    pub end: usize,
    /// 1-based line of the value.
    pub line: usize,
    /// 1-based column of the value.
    pub col: usize,
    /// Mapping key holding the value (`None` for a sequence item).
    pub key: Option<String>,
    /// Dotted path of mapping keys, e.g. `.spec.template.spec.containers.image`.
    pub path: String,
    /// A mapping key on the same node path (used by rules), e.g. sibling `name`.
    pub pod_template: bool,
}

/// One YAML document of a file (a chunk of `splitDocuments`).
#[derive(Debug, Clone)]
pub struct Doc {
    /// Byte offset of the chunk in the normalized text.
    pub offset: usize,
    /// Number of lines before the chunk.
    pub line_offset: usize,
    /// Parsed tree (root may be None).
    pub tree: yamltree::Document,
}

/// A scanned file.
#[derive(Debug, Clone)]
pub struct FileScan {
    /// Path relative to the scan root (as Flux annotates it).
    pub rel: PathBuf,
    /// Path on disk.
    pub abs: PathBuf,
    /// Flux would select the file by name.
    pub selected: bool,
    /// The file contains the `"$imagepolicy"` token.
    pub has_token: bool,
    /// Original bytes where they differ from [`FileScan::text`] (CRLF line endings, invalid
    /// UTF-8); empty when `text` is the file as read. Read them with [`FileScan::original`].
    pub bytes: Vec<u8>,
    /// Text with CRLF replaced by LF (what kyaml parses), if UTF-8.
    pub text: String,
    /// The file had CRLF line endings.
    pub crlf: bool,
    /// Why Flux would skip it (if it passed the token pre-check).
    pub problem: Option<Problem>,
    /// Parsed documents (empty if problem, or when [`FileScan::trees_dropped`]: read them
    /// with [`FileScan::documents`]).
    pub docs: Vec<Doc>,
    /// The parsed trees were dropped: after the scan when no tree-wide rule reads them (the
    /// file is no kustomization file and holds no `image.toolkit.fluxcd.io` or
    /// `kustomize.toolkit.fluxcd.io` object), and by [`crate::check::run`] for every file once
    /// those rules have read them. [`FileScan::documents`] parses them again for the
    /// simulation. Otherwise about 100 bytes per YAML node of every kept file stay alive until
    /// the simulation ends (fleet-100k peak RSS: 241 MB with them, 183 MB without).
    pub trees_dropped: bool,
    /// The single document was a `kind: List` that kyaml unwraps.
    pub list: bool,
    /// Comments mentioning `$imagepolicy`, classified.
    pub sites: Vec<Site>,
}

impl FileScan {
    /// The parsed documents: [`FileScan::docs`], or parsed again from [`FileScan::text`] when
    /// the scan dropped them ([`FileScan::trees_dropped`]); the same trees either way (the
    /// text parsed without a problem once).
    pub fn documents(&self) -> std::borrow::Cow<'_, [Doc]> {
        if !self.trees_dropped {
            return std::borrow::Cow::Borrowed(&self.docs);
        }
        let text = &self.text;
        let parse = || {
            let idx = yamltree::Lines::new(text);
            let line_of = |_t: &str, off: usize| idx.line(off) + 1;
            let chunks = split_documents(text).unwrap_or_default();
            (0..chunks.len())
                .filter_map(|i| parse_chunk(text, &chunks, i, &line_of).ok())
                .collect::<Vec<Doc>>()
        };
        if maybe_deep(text) {
            // on a large stack, as the scan parsed it ([`scan_bytes_keep`])
            let docs = std::thread::scope(|sc| {
                match std::thread::Builder::new()
                    .stack_size(DEEP_STACK)
                    .spawn_scoped(sc, parse)
                {
                    Ok(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
                    Err(_) => parse(),
                }
            });
            return std::borrow::Cow::Owned(docs);
        }
        std::borrow::Cow::Owned(parse())
    }

    /// Drop the parsed trees (once the tree-wide rules have read them): the simulation
    /// parses a rewritten file again ([`FileScan::documents`]).
    pub fn drop_trees(&mut self) {
        if !self.docs.is_empty() {
            self.docs = Vec::new();
            self.trees_dropped = true;
        }
    }

    /// Drop the parsed trees when nothing after the scan but the simulation reads them (see
    /// [`FileScan::trees_dropped`]): files that are no kustomization file and hold no
    /// Flux `image`/`kustomize` toolkit objects.
    pub fn drop_trees_if_unneeded(&mut self) {
        let name = self.rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // the objects [`crate::objects::Objects::from_files_with_facts`] reads: the roots (and
        // the items of an unwrapped `kind: List`) of a selected file, by API group
        let flux_object = |r: &Node| {
            r.get("apiVersion")
                .and_then(Node::str)
                .and_then(|a| a.split_once('/'))
                .is_some_and(|(g, _)| g == IMAGE_GROUP || g == KUSTOMIZE_GROUP)
        };
        let holds_objects = self.selected
            && self.docs.iter().any(|d| match &d.tree.root {
                Some(root) => match root.get("items") {
                    Some(Node::Seq { items, .. }) if self.list => items.iter().any(flux_object),
                    _ => flux_object(root),
                },
                None => false,
            });
        if self.docs.is_empty() || is_kustomization_file(name) || holds_objects {
            return;
        }
        self.docs = Vec::new();
        self.trees_dropped = true;
    }

    /// The file as read (invalid UTF-8 replaced): the kept bytes, or the text when it is the
    /// file unchanged.
    pub fn original(&self) -> std::borrow::Cow<'_, str> {
        if self.bytes.is_empty() {
            std::borrow::Cow::Borrowed(&self.text)
        } else {
            String::from_utf8_lossy(&self.bytes)
        }
    }
}

/// A file that could not be read.
#[derive(Debug, Clone)]
pub struct ReadError {
    /// Path relative to the scan root.
    pub rel: PathBuf,
    /// OS error.
    pub message: String,
    /// A symlink (Flux ignores unreadable symlinks; any other read error fails the run).
    pub symlink: bool,
}

/// Result of scanning one root.
#[derive(Debug, Default)]
pub struct ScanResult {
    /// Files that mention `$imagepolicy` or hold Flux image objects.
    pub files: Vec<FileScan>,
    /// Read errors.
    pub read_errors: Vec<ReadError>,
    /// Files skipped for size: (relative path, size in bytes).
    pub too_large: Vec<(PathBuf, u64)>,
    /// Number of files Flux would select by name.
    pub selected_files: usize,
    /// Number of files read (selected by name, or YAML-ish names read for lint).
    pub files_read: usize,
    /// The root is a file named explicitly that Flux never selects by name (wrong extension):
    /// it is read anyway, so a marker in it is reported (MC022).
    pub root_not_selected: bool,
    /// Entries that are not regular files (FIFO, socket, device, a symlink to one), never
    /// opened: (relative path, what it is). Git stores only files and symlinks, so Flux's
    /// clone never holds one; opening a FIFO would block forever.
    pub special: Vec<(PathBuf, &'static str)>,
    /// Files Flux selects by name whose content is not YAML text: (relative path, why), e.g.
    /// "empty" (only for a file named explicitly) or "binary (NUL byte at 12)".
    pub not_yaml: Vec<(PathBuf, String)>,
    /// Flux versions pinned in the tree: (relative path of `gotk-components.yaml`, version as
    /// written by `flux bootstrap` in its `# Flux Version: vX.Y.Z` header).
    pub flux_versions: Vec<(PathBuf, String)>,
}

/// What a non-directory walk entry is, from its `lstat` type (and `stat` for a symlink): a
/// regular file to read, or a special file (FIFO, socket, device) never opened.
fn special_kind(ft: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_block_device() {
        Some("a block device")
    } else if ft.is_char_device() {
        Some("a character device")
    } else if ft.is_file() || ft.is_dir() || ft.is_symlink() {
        None
    } else {
        Some("not a regular file")
    }
}

/// The version in `flux bootstrap`'s `gotk-components.yaml` header (`# Flux Version: v2.3.0`),
/// else the first `app.kubernetes.io/version: v...` label of the file.
pub fn flux_version_of(bytes: &[u8]) -> Option<String> {
    let take = |from: usize| -> Option<String> {
        let rest = &bytes[from..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n' || b == b'\r' || b == b' ' || b == b'"')
            .unwrap_or(rest.len());
        let v = std::str::from_utf8(&rest[..end]).ok()?.trim().to_string();
        (v.starts_with('v') && v.len() > 1).then_some(v)
    };
    for pat in [
        &b"# Flux Version: "[..],
        &b"app.kubernetes.io/version: "[..],
    ] {
        if let Some(i) = memchr::memmem::find(bytes, pat)
            && let Some(v) = take(i + pat.len())
        {
            return Some(v);
        }
    }
    None
}

/// A kustomize kustomization file name (`konfig.RecognizedKustomizationFileNames`).
pub fn is_kustomization_file(name: &str) -> bool {
    matches!(
        name,
        "kustomization.yaml" | "kustomization.yml" | "Kustomization"
    )
}

/// Walk `root` like `filepath.Walk` (symlinks not followed into directories), reading every
/// file Flux selects plus YAML-ish lint candidates; results in `filepath.Walk`'s lexical order.
///
/// Walking and reading run together on all cores (up to 8) with `ignore::WalkParallel`
/// (ripgrep's walker: work-stealing over directories, each file read by the thread that found
/// it), with every filter off (hidden files, `.gitignore`: Flux reads them all). Results are
/// then sorted by relative path, component by component (Rust `Path` order), which is the
/// order of a depth-first walk over sorted directory entries, so the output is deterministic.
///
/// Directories named `.git` are skipped: `ScreeningLocalReader` walks them, but in Flux's clone
/// they hold only go-git's object store (no `.yaml` names), while a local `.git` may hold files
/// no clone has.
pub fn scan_root(root: &Path, max_file_size: u64) -> ScanResult {
    scan_root_keeping(root, max_file_size, |_| false).0
}

/// A file's bytes as [`scan_root_keeping`] read them, for a caller that reads the same tree
/// (fleetlint): one walk and one read per file for both.
#[derive(Debug)]
pub struct KeptFile {
    /// Path relative to the scan root.
    pub rel: PathBuf,
    /// Reached through a symlink.
    pub symlink: bool,
    /// The bytes as read.
    pub bytes: Vec<u8>,
}

/// [`scan_root`], also handing back the bytes of every file read whose name `keep` accepts
/// (in the same lexical order as the scan's results).
pub fn scan_root_keeping(
    root: &Path,
    max_file_size: u64,
    keep: impl Fn(&str) -> bool + Sync,
) -> (ScanResult, Vec<KeptFile>) {
    use std::sync::Mutex;
    let root_is_file = !root.is_dir();
    let base = if root_is_file {
        root.parent().unwrap_or(Path::new(".")).to_path_buf()
    } else {
        root.to_path_buf()
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(false)
        .threads(workers)
        .filter_entry(|e| {
            !(e.depth() > 0 && e.file_type().is_some_and(|t| t.is_dir()) && e.file_name() == ".git")
        })
        .build_parallel();
    let counts = WalkCounts::default();
    let found: Mutex<Vec<(PathBuf, Outcome)>> = Mutex::new(Vec::new());
    let kept_all: Mutex<Vec<KeptFile>> = Mutex::new(Vec::new());
    let rel_of = |p: &Path| p.strip_prefix(&base).unwrap_or(p).to_path_buf();
    walker.run(|| {
        let mut batch = Batch {
            out: Vec::new(),
            into: &found,
            kept: Vec::new(),
            kept_into: &kept_all,
        };
        let (counts, rel_of, keep) = (&counts, &rel_of, &keep);
        Box::new(move |entry| {
            visit(entry, &mut batch, counts, rel_of, keep, max_file_size);
            ignore::WalkState::Continue
        })
    });
    let mut found = found.into_inner().unwrap_or_default();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let mut kept = kept_all.into_inner().unwrap_or_default();
    kept.sort_by(|a, b| a.rel.cmp(&b.rel));
    let mut res = ScanResult {
        selected_files: counts.selected_files.into_inner(),
        files_read: counts.files_read.into_inner(),
        root_not_selected: counts.root_not_selected.into_inner(),
        ..Default::default()
    };
    for (_, o) in found {
        add_outcome(&mut res, o);
    }
    (res, kept)
}

/// The counts the walk's threads keep for [`ScanResult`].
#[derive(Default)]
struct WalkCounts {
    selected_files: std::sync::atomic::AtomicUsize,
    files_read: std::sync::atomic::AtomicUsize,
    root_not_selected: std::sync::atomic::AtomicBool,
}

/// One walk thread's results, merged once when the thread's visitor is dropped.
struct Batch<'a> {
    out: Vec<(PathBuf, Outcome)>,
    into: &'a std::sync::Mutex<Vec<(PathBuf, Outcome)>>,
    kept: Vec<KeptFile>,
    kept_into: &'a std::sync::Mutex<Vec<KeptFile>>,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if let Ok(mut v) = self.into.lock() {
            v.append(&mut self.out);
        }
        if let Ok(mut v) = self.kept_into.lock() {
            v.append(&mut self.kept);
        }
    }
}

/// One entry of the walk: a walk error, a special file (never opened), or a file Flux selects
/// (or one named on the command line) read into `batch` ([`read_one`]); directories and files
/// Flux never reads are passed over.
fn visit(
    entry: Result<ignore::DirEntry, ignore::Error>,
    batch: &mut Batch<'_>,
    counts: &WalkCounts,
    rel_of: &dyn Fn(&Path) -> PathBuf,
    keep: &dyn Fn(&str) -> bool,
    max_file_size: u64,
) {
    use std::sync::atomic::Ordering;
    let entry = match entry {
        Ok(e) => e,
        Err(e) => {
            let rel = error_path(&e).map(rel_of).unwrap_or_default();
            let message = e.to_string();
            batch.out.push((
                rel.clone(),
                Outcome::Error(ReadError {
                    rel,
                    message,
                    symlink: false,
                }),
            ));
            return;
        }
    };
    if entry.file_type().is_some_and(|t| t.is_dir()) {
        return;
    }
    // never open a FIFO, socket or device (a FIFO blocks the open forever), also when
    // named on the command line or reached through a symlink
    let kind = match entry.file_type() {
        Some(t) if t.is_symlink() => std::fs::metadata(entry.path())
            .ok()
            .and_then(|m| special_kind(m.file_type())),
        Some(t) => special_kind(t),
        None => None,
    };
    if let Some(kind) = kind {
        batch.out.push((
            rel_of(entry.path()),
            Outcome::Special(rel_of(entry.path()), kind),
        ));
        return;
    }
    let name = entry.file_name().to_string_lossy();
    let selected = flux_selects(&name);
    if entry.depth() == 0 && !selected {
        // a file named on the command line: always read it
        counts.root_not_selected.store(true, Ordering::Relaxed);
    } else if !selected {
        // Flux never reads it, and only a file named explicitly is a finding (MC022)
        return;
    }
    if selected {
        counts.selected_files.fetch_add(1, Ordering::Relaxed);
    }
    counts.files_read.fetch_add(1, Ordering::Relaxed);
    let rel = rel_of(entry.path());
    let job = (
        rel.clone(),
        entry.path().to_path_buf(),
        entry.path_is_symlink(),
        selected,
    );
    let kept = keep(&name).then_some(&mut batch.kept);
    match read_one(&job, max_file_size, entry.depth() == 0, kept) {
        Outcome::Skip => {}
        Outcome::Many(v) => batch.out.extend(v.into_iter().map(|o| (rel.clone(), o))),
        o => batch.out.push((rel, o)),
    }
}

/// Files one outcome of the walk into the scan result.
fn add_outcome(res: &mut ScanResult, o: Outcome) {
    match o {
        Outcome::Skip => {}
        Outcome::File(f) => res.files.push(*f),
        Outcome::TooLarge(rel, size) => res.too_large.push((rel, size)),
        Outcome::Error(e) => res.read_errors.push(e),
        Outcome::Special(rel, kind) => res.special.push((rel, kind)),
        Outcome::NotYaml(rel, why) => res.not_yaml.push((rel, why)),
        Outcome::FluxVersion(rel, v) => res.flux_versions.push((rel, v)),
        Outcome::Many(v) => {
            for o in v {
                match o {
                    Outcome::File(f) => res.files.push(*f),
                    Outcome::FluxVersion(rel, v) => res.flux_versions.push((rel, v)),
                    Outcome::NotYaml(rel, why) => res.not_yaml.push((rel, why)),
                    _ => {}
                }
            }
        }
    }
}

/// The path an `ignore` walk error is about, if it names one.
fn error_path(e: &ignore::Error) -> Option<&Path> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        ignore::Error::Loop { child, .. } => Some(child),
        ignore::Error::Partial(errs) => errs.first().and_then(error_path),
        _ => None,
    }
}

enum Outcome {
    Skip,
    File(Box<FileScan>),
    TooLarge(PathBuf, u64),
    Error(ReadError),
    Special(PathBuf, &'static str),
    NotYaml(PathBuf, String),
    FluxVersion(PathBuf, String),
    Many(Vec<Outcome>),
}

fn read_one(
    job: &(PathBuf, PathBuf, bool, bool),
    max_file_size: u64,
    named: bool,
    kept: Option<&mut Vec<KeptFile>>,
) -> Outcome {
    let (rel, abs, symlink, selected) = job;
    // open + fstat + read: one path lookup, one fstat per file (std's read_to_end would fstat
    // and lseek again for its size hint)
    let read = std::fs::File::open(abs).and_then(|mut fh| {
        let m = fh.metadata()?;
        if !m.is_file() {
            return Ok(None); // symlink to a directory or special file
        }
        if m.len() > max_file_size {
            return Ok(Some(Err(m.len())));
        }
        Ok(Some(Ok(read_sized(&mut fh, m.len() as usize)?)))
    });
    match read {
        Ok(Some(Ok(b))) => {
            if let Some(k) = kept {
                k.push(KeptFile {
                    rel: rel.clone(),
                    symlink: *symlink,
                    bytes: b.clone(),
                });
            }
            let mut extra = Vec::new();
            let name = rel
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if *selected {
                if b.is_empty() || b.iter().all(u8::is_ascii_whitespace) {
                    if named {
                        extra.push(Outcome::NotYaml(rel.clone(), "empty".into()));
                    }
                } else if let Some(i) = memchr::memchr(0, &b) {
                    extra.push(Outcome::NotYaml(
                        rel.clone(),
                        format!("binary (NUL byte at offset {i})"),
                    ));
                }
                if name == "gotk-components.yaml"
                    && let Some(v) = flux_version_of(&b)
                {
                    extra.push(Outcome::FluxVersion(rel.clone(), v));
                }
            }
            let keep = *selected && is_kustomization_file(&name);
            if let Some(mut f) = scan_bytes_keep(rel.clone(), abs.clone(), *selected, b, keep) {
                f.drop_trees_if_unneeded();
                extra.push(Outcome::File(Box::new(f)));
            }
            match extra.len() {
                0 => Outcome::Skip,
                1 => extra.pop().unwrap_or(Outcome::Skip),
                _ => Outcome::Many(extra),
            }
        }
        Ok(Some(Err(size))) => Outcome::TooLarge(rel.clone(), size),
        Ok(None) => Outcome::Skip,
        Err(e) => Outcome::Error(ReadError {
            rel: rel.clone(),
            message: e.to_string(),
            symlink: *symlink,
        }),
    }
}

/// Read a file whose size fstat gave as `size`: into a buffer of that size + 1, so the usual
/// case is one `read` for the data and one returning 0; a file that grew meanwhile is still
/// read to its end.
fn read_sized(fh: &mut std::fs::File, size: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut b = vec![0u8; size + 1];
    let mut n = 0;
    loop {
        if n == b.len() {
            b.resize(b.len() * 2, 0);
        }
        match fh.read(&mut b[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    b.truncate(n);
    Ok(b)
}

/// One pass over the bytes: `$imagepolicy` (any case) after a `$`, or `imagepolicy` (any
/// case) right before a `"` or `'` (a `"imagepolicy"` key without the `$`).
fn mentions_marker_bytes(bytes: &[u8]) -> bool {
    const WORD: &[u8] = b"imagepolicy";
    memchr::memchr3_iter(b'$', b'"', b'\'', bytes).any(|i| {
        if bytes[i] == b'$' {
            bytes
                .get(i + 1..i + 1 + WORD.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(WORD))
        } else {
            i >= WORD.len() && bytes[i - WORD.len()..i].eq_ignore_ascii_case(WORD)
        }
    })
}

/// Analyse one file's bytes. Returns `None` when the file neither mentions `imagepolicy` nor
/// holds `image.toolkit.fluxcd.io` objects (nothing to report).
pub fn scan_bytes(rel: PathBuf, abs: PathBuf, selected: bool, bytes: Vec<u8>) -> Option<FileScan> {
    scan_bytes_keep(rel, abs, selected, bytes, false)
}

/// Whether a selected file holds `image.toolkit.fluxcd.io` or `kustomize.toolkit.fluxcd.io`
/// objects (one pass over the bytes for both groups).
fn has_flux_objects(bytes: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, b".toolkit.fluxcd.io")
        .any(|i| bytes[..i].ends_with(b"image") || bytes[..i].ends_with(b"kustomize"))
}

/// [`scan_bytes`], and with `keep` the file is analysed even when it mentions no marker and
/// holds no Flux objects (kustomization files, read for their `namespace:` and `resources:`).
pub fn scan_bytes_keep(
    rel: PathBuf,
    abs: PathBuf,
    selected: bool,
    bytes: Vec<u8>,
    keep: bool,
) -> Option<FileScan> {
    let has_token = memchr::memmem::find(&bytes, TOKEN).is_some();
    let has_objects = selected && has_flux_objects(&bytes);
    let mentions = has_token || mentions_marker_bytes(&bytes);
    if !has_token && !has_objects && !mentions && !keep {
        return None;
    }
    let mut f = FileScan {
        rel,
        abs,
        selected,
        has_token,
        bytes,
        text: String::new(),
        crlf: false,
        problem: None,
        docs: Vec::new(),
        trees_dropped: false,
        list: false,
        sites: Vec::new(),
    };
    // the bytes become the text without a copy; they are kept beside it only where the text
    // differs from them (CRLF normalised, invalid UTF-8)
    match String::from_utf8(std::mem::take(&mut f.bytes)) {
        Err(e) => {
            f.problem = Some(Problem::InvalidUtf8 {
                offset: e.utf8_error().valid_up_to(),
            });
            f.bytes = e.into_bytes();
            let lossy = String::from_utf8_lossy(&f.bytes).replace("\r\n", "\n");
            lint_only_sites(&mut f, &lossy);
            return Some(f);
        }
        Ok(t) if t.contains("\r\n") => {
            f.crlf = true;
            f.text = t.replace("\r\n", "\n");
            f.bytes = t.into_bytes();
        }
        Ok(t) => f.text = t,
    }
    if maybe_deep(&f.text) {
        // go-yaml reads up to 10,000 levels; the tree walks recurse once per level, so a
        // deeply nested file is analysed on a thread with a large (reserved, not resident)
        // stack
        let done = std::thread::scope(|sc| {
            std::thread::Builder::new()
                .stack_size(DEEP_STACK)
                .spawn_scoped(sc, || {
                    analyse(&mut f);
                    f
                })
                .ok()
                .and_then(|h| h.join().ok())
        });
        return done;
    }
    analyse(&mut f);
    Some(f)
}

/// Stack for analysing (and, in the binary, for the whole run over) deeply nested YAML.
pub const DEEP_STACK: usize = 512 << 20;

/// More than 200 flow openers or a line indented more than 400 columns: possibly deeper than
/// the default 2 MiB thread stack allows the recursive tree walks to go.
fn maybe_deep(text: &str) -> bool {
    let b = text.as_bytes();
    if memchr::memchr2_iter(b'[', b'{', b).nth(200).is_some() {
        return true;
    }
    let mut ls = 0;
    for nl in memchr::memchr_iter(b'\n', b).chain(std::iter::once(b.len())) {
        let line = &b[ls..nl];
        if line.len() > 400 && line.iter().take(401).all(|&c| c == b' ' || c == b'-') {
            return true;
        }
        ls = nl + 1;
    }
    false
}

/// `kio.splitDocuments`: split on the regexp `\n---.*\n`; a separator line whose rest is not
/// blank or a `#` comment is an error. Returns `(start, end)` byte ranges of each chunk (the
/// separator, including both newlines, is excluded) or the offending separator.
pub fn split_documents(s: &str) -> Result<Vec<(usize, usize)>, (usize, String)> {
    let mut docs = Vec::new();
    if s.is_empty() {
        return Ok(docs);
    }
    let b = s.as_bytes();
    let mut prev = 0;
    let mut pos = 0;
    while let Some(i) = memchr::memmem::find(&b[pos..], b"\n---").map(|i| i + pos) {
        // `.` does not match `\n`; the separator needs a closing `\n`.
        let Some(nl) = memchr::memchr(b'\n', &b[i + 1..]).map(|j| j + i + 1) else {
            break;
        };
        let rest = s[i + 4..nl].trim();
        if !rest.is_empty() && !rest.starts_with('#') {
            return Err((i + 1, s[i + 1..nl].to_string()));
        }
        docs.push((prev, i));
        prev = nl + 1;
        pos = nl + 1;
    }
    docs.push((prev, s.len()));
    Ok(docs)
}

fn line_of(text: &str, offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..offset]).count() + 1
}

fn col_of(text: &str, offset: usize) -> usize {
    let ls = text[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
    text[ls..offset].chars().count() + 1
}

/// Parse chunk `i` of `chunks` ([`split_documents`] of `text`) into a [`Doc`], or the
/// [`Problem::Syntax`] Flux would skip the file for.
fn parse_chunk(
    text: &str,
    chunks: &[(usize, usize)],
    i: usize,
    line_of: &dyn Fn(&str, usize) -> usize,
) -> Result<Doc, Problem> {
    let (s, e) = chunks[i];
    // a chunk before a separator keeps its line break (the separator's `\n` at `e`)
    let chunk = if i != chunks.len() - 1 {
        &text[s..e + 1]
    } else {
        &text[s..e]
    };
    let line_offset = line_of(text, s) - 1;
    match yamltree::parse(chunk) {
        Ok(tree) => Ok(Doc {
            offset: s,
            line_offset,
            tree,
        }),
        Err(e) => Err(Problem::Syntax {
            line: e.line + line_offset,
            col: e.col,
            message: e.message,
        }),
    }
}

fn analyse(f: &mut FileScan) {
    // the text is lent to the analysis and put back (no second copy of a large file)
    let text = std::mem::take(&mut f.text);
    analyse_text(f, &text);
    f.text = text;
}

fn analyse_text(f: &mut FileScan, text: &str) {
    let idx = yamltree::Lines::new(text);
    let line_of = |_t: &str, off: usize| idx.line(off) + 1;
    let chunks = match split_documents(text) {
        Ok(c) => c,
        Err((off, sep)) => {
            f.problem = Some(Problem::InvalidSeparator {
                line: line_of(text, off),
                text: sep,
            });
            // still look at the comments for lint, via a lenient pass below
            lint_only_sites(f, text);
            return;
        }
    };
    let n_chunks = chunks.len();
    for i in 0..n_chunks {
        match parse_chunk(text, &chunks, i, &line_of) {
            Ok(d) => f.docs.push(d),
            Err(p) => {
                f.problem.get_or_insert(p);
            }
        }
    }
    if f.problem.is_none() {
        for d in &f.docs {
            let Some(root) = &d.tree.root else { continue };
            if root.is_null() {
                continue;
            }
            let line = line_of(text, d.offset + root.start().min(text.len() - d.offset));
            match root {
                Node::Seq { .. } => {
                    f.problem = Some(Problem::NotAMapping {
                        line,
                        what: "sequence",
                    });
                    break;
                }
                Node::Scalar(_) | Node::Alias { .. } => {
                    f.problem = Some(Problem::NotAMapping {
                        line,
                        what: "scalar",
                    });
                    break;
                }
                Node::Map { .. } => {
                    if let Some(m) = root.get("metadata")
                        && !m.is_null()
                        && (!matches!(m, Node::Map { .. })
                            || m.get("annotations")
                                .is_some_and(|a| !a.is_null() && !matches!(a, Node::Map { .. })))
                    {
                        f.problem = Some(Problem::BadMetadata {
                            line: line_of(text, d.offset + m.start()),
                        });
                        break;
                    }
                }
            }
        }
    }
    if f.problem.is_some() {
        f.docs.clear();
        lint_only_sites(f, text);
        return;
    }
    // kind: List unwrapping: only when the file is one chunk.
    if n_chunks == 1
        && let Some(root) = f.docs.first().and_then(|d| d.tree.root.as_ref())
        && matches!(
            root.get("kind").and_then(Node::str),
            Some("List" | "ResourceList")
        )
        && (root.get("items").is_some() || root.get("functionConfig").is_some())
    {
        f.list = true;
    }
    let mut sites = Vec::new();
    for d in &f.docs {
        collect_sites(text, d, f.list, &mut sites);
    }
    f.sites = sites;
}

/// For files Flux skips: report every comment mentioning the marker as `Elsewhere`, with how
/// its JSON would read, so lint can still explain them.
fn lint_only_sites(f: &mut FileScan, text: &str) {
    let mut sites = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        if !marker::mentions_marker(line) {
            continue;
        }
        let Some(h) = find_comment_start(line) else {
            continue;
        };
        let comment = line[h..].to_string();
        let parsed = marker::parse_comment(&comment);
        sites.push(Site {
            line: i + 1,
            col: line[..h].chars().count() + 1,
            setter: match &parsed {
                Parsed::Marker(s) => Some(s.clone()),
                _ => None,
            },
            parsed: Some(parsed),
            comment,
            placement: Placement::Elsewhere,
            target: None,
            object: ObjectId::default(),
            in_list_item: false,
        });
    }
    f.sites = sites;
}

/// Heuristic `#` start of a comment on a raw line (`#` at line start or after whitespace).
fn find_comment_start(line: &str) -> Option<usize> {
    let b = line.as_bytes();
    (0..b.len()).find(|&i| b[i] == b'#' && (i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t'))
}

fn object_id(root: &Node) -> ObjectId {
    let s = |n: Option<&Node>| n.and_then(Node::str).unwrap_or_default().to_string();
    ObjectId {
        api_version: s(root.get("apiVersion")),
        kind: s(root.get("kind")),
        name: s(root.path(&["metadata", "name"])),
        namespace: s(root.path(&["metadata", "namespace"])),
    }
}

struct Ctx<'a> {
    text: &'a str,
    doc: &'a Doc,
    chunk_comments: &'a [Comment],
    consumed: Vec<bool>,
    out: Vec<Site>,
    object: ObjectId,
    in_list_item: bool,
}

fn collect_sites(text: &str, d: &Doc, list: bool, out: &mut Vec<Site>) {
    let Some(root) = &d.tree.root else { return };
    let mut ctx = Ctx {
        text,
        doc: d,
        chunk_comments: &d.tree.comments,
        consumed: vec![false; d.tree.comments.len()],
        out: Vec::new(),
        object: object_id(root),
        in_list_item: false,
    };
    if list {
        if let Some(Node::Seq { items, .. }) = root.get("items") {
            for it in items {
                ctx.object = object_id(it);
                ctx.in_list_item = true;
                walk(&mut ctx, it, "", false, None);
            }
        }
        ctx.object = object_id(root);
        ctx.in_list_item = false;
    } else {
        walk(&mut ctx, root, "", false, None);
    }
    // every other comment mentioning the marker, classified
    let chunk = chunk_text(text, d);
    for (i, c) in d.tree.comments.iter().enumerate() {
        if ctx.consumed[i] {
            continue;
        }
        let ct = &chunk[c.start..c.end];
        if !marker::mentions_marker(ct) {
            continue;
        }
        let placement = classify_orphan(chunk, c);
        let parsed = marker::parse_comment(ct);
        ctx.out.push(Site {
            line: c.line + d.line_offset,
            col: col_of(chunk, c.start),
            comment: ct.to_string(),
            setter: match &parsed {
                Parsed::Marker(s) => Some(s.clone()),
                _ => None,
            },
            parsed: Some(parsed),
            placement,
            target: None,
            object: ctx.object.clone(),
            in_list_item: false,
        });
    }
    // marker text inside block scalars / values
    find_in_values(&mut ctx, root);
    ctx.out.sort_by_key(|s| (s.line, s.col));
    out.extend(ctx.out);
}

fn chunk_text<'a>(text: &'a str, d: &Doc) -> &'a str {
    // The chunk parsed was text[offset..end] (+ "\n"); comments/scalars never reach past end.
    &text[d.offset..]
}

fn classify_orphan(chunk: &str, c: &Comment) -> Placement {
    let ls = chunk[..c.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let before = &chunk[ls..c.start];
    if before.trim().is_empty() {
        // own-line comment: look at the next non-comment line
        let mut rest = &chunk[c.end..];
        loop {
            let Some(nl) = rest.find('\n') else {
                return Placement::Elsewhere;
            };
            rest = &rest[nl + 1..];
            let line = rest.split('\n').next().unwrap_or("");
            let t = line.trim();
            if t.is_empty() {
                return Placement::Elsewhere;
            }
            if t.starts_with('#') {
                continue;
            }
            let t = t.trim_start_matches("- ").trim_start();
            return if looks_like_key_line(t) {
                Placement::AboveKey
            } else {
                Placement::Elsewhere
            };
        }
    }
    let b = before.trim_end();
    if b.ends_with(':') {
        Placement::OnKey
    } else {
        Placement::Elsewhere
    }
}

fn looks_like_key_line(t: &str) -> bool {
    // `key:` or `key: value` (not inside quotes: good enough for classification)
    t.find(':')
        .is_some_and(|i| t[i + 1..].is_empty() || t[i + 1..].starts_with(' '))
}

fn walk(ctx: &mut Ctx<'_>, n: &Node, path: &str, in_pod_template: bool, key: Option<&str>) {
    match n {
        Node::Map { entries, .. } => {
            // kyaml RNode.VisitFields: for each key name (duplicates included), the FIRST field
            // with that name. A duplicate key visits the first value again, where the setter
            // finds the value it just wrote (no change, no callback): visit each name once.
            // A set of the names seen so far keeps this linear in the mapping's size.
            let mut seen: std::collections::HashSet<&str> =
                std::collections::HashSet::with_capacity(entries.len());
            for (k, v) in entries {
                let kname = k.str().unwrap_or("");
                if seen.insert(kname) {
                    let p = format!("{path}.{kname}");
                    let pt = in_pod_template || kname == "template";
                    walk(ctx, v, &p, pt, Some(kname));
                }
            }
        }
        Node::Seq { items, flow, .. } => {
            for it in items {
                if let Node::Scalar(s) = it {
                    visit_scalar(ctx, s, path, in_pod_template, None, !flow);
                } else {
                    walk(ctx, it, path, in_pod_template, None);
                }
            }
        }
        Node::Scalar(s) => visit_scalar(ctx, s, path, in_pod_template, key, false),
        Node::Alias { .. } => {}
    }
}

fn visit_scalar(
    ctx: &mut Ctx<'_>,
    s: &Scalar,
    path: &str,
    pod_template: bool,
    key: Option<&str>,
    block_item: bool,
) {
    let chunk = chunk_text(ctx.text, ctx.doc);
    // line comment: a comment on the scalar's last line, after it, only blanks between.
    let line_end = chunk[s.end..]
        .find('\n')
        .map(|i| i + s.end)
        .unwrap_or(chunk.len());
    let mut line_comment = None;
    let search_from = if matches!(s.style, Style::Literal | Style::Folded) {
        // block scalar: the header line carries the comment
        let hl = chunk[s.start..]
            .find('\n')
            .map(|i| i + s.start)
            .unwrap_or(chunk.len());
        (s.start, hl)
    } else if s.start == s.end {
        (usize::MAX, 0) // empty scalar: comment belongs to the key
    } else {
        (s.end, line_end)
    };
    let first_c = ctx
        .chunk_comments
        .partition_point(|c| c.start < search_from.0);
    if let Some(c) = ctx.chunk_comments.get(first_c)
        && c.start < search_from.1
    {
        let between = &chunk[search_from.0..c.start];
        if matches!(s.style, Style::Literal | Style::Folded) || between.trim().is_empty() {
            line_comment = Some(first_c);
        }
    }

    let mut head_comment = None;
    if line_comment.is_none() && block_item {
        // head comment of a block sequence item: the single comment line directly above `- `.
        let ls = chunk[..s.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let prefix = &chunk[ls..s.start];
        if prefix.trim_start().starts_with('-') && ls > 0 {
            let prev_ls = chunk[..ls - 1].rfind('\n').map(|i| i + 1).unwrap_or(0);
            let from = ctx.chunk_comments.partition_point(|c| c.start < prev_ls);
            if let Some((i, _)) = ctx
                .chunk_comments
                .iter()
                .enumerate()
                .skip(from)
                .take_while(|(_, c)| c.start < ls)
                .find(|(_, c)| c.end < ls && chunk[prev_ls..c.start].trim().is_empty())
            {
                // must be a single-line head comment for the JSON to parse; a multi-line
                // block joins with "\n#" and fails, which parse_comment shows naturally.
                let mut first = i;
                while first > 0 {
                    let c = &ctx.chunk_comments[first - 1];
                    let pls = chunk[..c.start].rfind('\n').map(|j| j + 1).unwrap_or(0);
                    let own = chunk[pls..c.start].trim().is_empty();
                    if own && c.line + 1 == ctx.chunk_comments[first].line {
                        first -= 1;
                    } else {
                        break;
                    }
                }
                head_comment = Some((first, i));
            }
        }
    }
    let (ci, text, placement) = if let Some(i) = line_comment {
        let c = &ctx.chunk_comments[i];
        (
            vec![i],
            chunk[c.start..c.end].to_string(),
            Placement::LineComment,
        )
    } else if let Some((a, b)) = head_comment {
        let t = (a..=b)
            .map(|j| {
                let c = &ctx.chunk_comments[j];
                &chunk[c.start..c.end]
            })
            .collect::<Vec<_>>()
            .join("\n");
        ((a..=b).collect(), t, Placement::ItemHeadComment)
    } else {
        return;
    };
    let parsed = marker::parse_comment(&text);
    let is_marker = matches!(parsed, Parsed::Marker(_));
    if !is_marker && !marker::mentions_marker(&text) {
        // a non-marker line comment shadows a head comment: mark head as shadowed
        if placement == Placement::LineComment && block_item {
            shadow_head(ctx, s, chunk);
        }
        return;
    }
    for i in &ci {
        ctx.consumed[*i] = true;
    }
    let first = &ctx.chunk_comments[ci[0]];
    ctx.out.push(Site {
        line: first.line + ctx.doc.line_offset,
        col: col_of(chunk, first.start),
        comment: text,
        setter: match &parsed {
            Parsed::Marker(n) => Some(n.clone()),
            _ => None,
        },
        parsed: Some(parsed),
        placement,
        target: Some(Target {
            value: s.value.clone(),
            style: s.style,
            start: ctx.doc.offset + s.start,
            end: ctx.doc.offset + s.end,
            line: s.line + ctx.doc.line_offset,
            col: s.col + 1,
            key: key.map(str::to_string),
            path: path.to_string(),
            pod_template,
        }),
        object: ctx.object.clone(),
        in_list_item: ctx.in_list_item,
    });
}

fn shadow_head(ctx: &mut Ctx<'_>, s: &Scalar, chunk: &str) {
    let ls = chunk[..s.start].rfind('\n').map(|i| i + 1).unwrap_or(0);
    if ls == 0 {
        return;
    }
    let prev_ls = chunk[..ls - 1].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let from = ctx.chunk_comments.partition_point(|c| c.start < prev_ls);
    for (i, c) in ctx.chunk_comments.iter().enumerate().skip(from) {
        if c.start >= ls {
            break;
        }
        if c.end < ls && chunk[prev_ls..c.start].trim().is_empty() {
            let t = &chunk[c.start..c.end];
            if marker::mentions_marker(t) {
                ctx.consumed[i] = true;
                let parsed = marker::parse_comment(t);
                ctx.out.push(Site {
                    line: c.line + ctx.doc.line_offset,
                    col: col_of(chunk, c.start),
                    comment: t.to_string(),
                    setter: match &parsed {
                        Parsed::Marker(n) => Some(n.clone()),
                        _ => None,
                    },
                    parsed: Some(parsed),
                    placement: Placement::Shadowed,
                    target: None,
                    object: ctx.object.clone(),
                    in_list_item: ctx.in_list_item,
                });
            }
        }
    }
}

fn find_in_values(ctx: &mut Ctx<'_>, n: &Node) {
    match n {
        Node::Map { entries, .. } => {
            for (_, v) in entries {
                find_in_values(ctx, v);
            }
        }
        Node::Seq { items, .. } => {
            for v in items {
                find_in_values(ctx, v);
            }
        }
        Node::Scalar(s) => {
            if !marker::mentions_marker(&s.value) {
                return;
            }
            let chunk = chunk_text(ctx.text, ctx.doc);
            let raw = &chunk[s.start..s.end];
            let lower = raw.to_ascii_lowercase();
            let off = lower.find("imagepolicy").unwrap_or(0);
            // report at the start of the line holding the text
            let abs = s.start + off;
            let ls = chunk[..abs].rfind('\n').map(|i| i + 1).unwrap_or(0);
            let le = chunk[abs..]
                .find('\n')
                .map(|i| i + abs)
                .unwrap_or(chunk.len());
            let line_text = chunk[ls..le].trim().to_string();
            let block = matches!(s.style, Style::Literal | Style::Folded);
            ctx.out.push(Site {
                line: line_of(chunk, abs) + ctx.doc.line_offset,
                col: chunk[ls..abs].chars().count() + 1,
                comment: line_text,
                parsed: None,
                setter: None,
                placement: if block {
                    Placement::BlockScalarContent
                } else {
                    Placement::InsideValue
                },
                target: None,
                object: ctx.object.clone(),
                in_list_item: ctx.in_list_item,
            });
        }
        Node::Alias { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(t: &str) -> FileScan {
        scan_bytes(
            "f.yaml".into(),
            "f.yaml".into(),
            true,
            t.as_bytes().to_vec(),
        )
        .unwrap()
    }

    /// A file is held once: an LF UTF-8 file's bytes become its text (no copy kept), a CRLF
    /// file keeps its original bytes beside the normalised text; `original()` is the file as
    /// read either way, and the documents of a multi-document file parse from slices of it.
    #[test]
    fn a_file_is_held_once_and_its_original_stays_readable() {
        let lf = "image: a:1 # {\"$imagepolicy\": \"ns:p\"}\n---\nb: 2\n";
        let f = scan(lf);
        assert!(f.bytes.is_empty() && !f.crlf);
        assert_eq!(f.text, lf);
        assert_eq!(f.original(), lf);
        assert_eq!(f.docs.len(), 2);
        assert_eq!(
            f.docs[1]
                .tree
                .root
                .as_ref()
                .unwrap()
                .path(&["b"])
                .unwrap()
                .str(),
            Some("2")
        );
        let crlf = lf.replace('\n', "\r\n");
        let f = scan(&crlf);
        assert!(f.crlf);
        assert_eq!(f.text, lf);
        assert_eq!(f.original(), crlf);
    }

    #[test]
    fn split_like_kyaml() {
        let s = "a: 1\n---\nb: 2\n--- # c\nc: 3";
        assert_eq!(split_documents(s).unwrap(), vec![(0, 4), (9, 13), (22, 26)]);
        assert!(split_documents("a: 1\n--- x: 1\n").is_err());
        assert_eq!(split_documents("---\na: 1\n").unwrap(), vec![(0, 9)]);
    }

    #[test]
    fn line_comment_marker() {
        let f = scan("spec:\n  image: foo:v1 # {\"$imagepolicy\": \"ns:p\"}\n");
        assert!(f.problem.is_none());
        assert_eq!(f.sites.len(), 1);
        let s = &f.sites[0];
        assert!(s.effective());
        let t = s.target.as_ref().unwrap();
        assert_eq!(t.value, "foo:v1");
        assert_eq!(t.key.as_deref(), Some("image"));
        assert_eq!((s.line, t.line, t.col), (2, 2, 10));
    }

    #[test]
    fn walk_order_is_filepath_walk_order() {
        let d = tempfile::tempdir().unwrap();
        for p in [
            "b.yaml",
            "a/x.yaml",
            "a.yaml",
            "a-b/y.yaml",
            "a/z/w.yaml",
            ".git/c.yaml",
            ".hidden/h.yaml",
        ] {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x: 1 # {\"$imagepolicy\": \"ns:p\"}\n").unwrap();
        }
        // filepath.Walk: sorted entries, depth first (`a` < `a-b` < `a.yaml`); `.git` skipped,
        // hidden files read (no .gitignore-style filtering); the same order on every run
        let want = [
            ".hidden/h.yaml",
            "a/x.yaml",
            "a/z/w.yaml",
            "a-b/y.yaml",
            "a.yaml",
            "b.yaml",
        ];
        for _ in 0..5 {
            let r = scan_root(d.path(), DEFAULT_MAX_FILE_SIZE);
            let got: Vec<_> = r
                .files
                .iter()
                .map(|f| f.rel.to_string_lossy().into_owned())
                .collect();
            assert_eq!(got, want);
            assert_eq!((r.files_read, r.selected_files), (6, 6));
        }
    }

    #[test]
    fn duplicate_key_is_one_site() {
        // kyaml visits the first `image` twice; the second visit finds its own new value
        let f = scan("image: a:1 # {\"$imagepolicy\": \"ns:p\"}\nimage: b:2\n");
        assert_eq!(f.sites.len(), 1);
        assert_eq!(f.sites[0].target.as_ref().unwrap().value, "a:1");
    }

    #[test]
    fn head_comment_above_key_is_not_applied() {
        let f = scan("spec:\n  # {\"$imagepolicy\": \"ns:p\"}\n  image: foo:v1\n");
        assert_eq!(f.sites.len(), 1);
        assert_eq!(f.sites[0].placement, Placement::AboveKey);
        assert!(!f.sites[0].effective());
    }

    #[test]
    fn item_head_comment_applies() {
        let f = scan("args:\n  - a\n  # {\"$imagepolicy\": \"ns:p\"}\n  - foo:v1\n");
        assert_eq!(f.sites[0].placement, Placement::ItemHeadComment);
        assert_eq!(f.sites[0].target.as_ref().unwrap().value, "foo:v1");
    }

    #[test]
    fn block_scalar_content() {
        let f = scan("values: |\n  image: foo # {\"$imagepolicy\": \"ns:p\"}\n");
        assert_eq!(f.sites.len(), 1);
        assert_eq!(f.sites[0].placement, Placement::BlockScalarContent);
        assert_eq!(f.sites[0].line, 2);
    }

    #[test]
    fn problems() {
        assert!(matches!(
            scan("- a # \"$imagepolicy\"\n").problem,
            Some(Problem::NotAMapping { .. })
        ));
        assert!(matches!(
            scan("a: [ # \"$imagepolicy\"\n").problem,
            Some(Problem::Syntax { .. })
        ));
        let f = scan_bytes(
            "f.yaml".into(),
            "f.yaml".into(),
            true,
            b"a: \xff \"$imagepolicy\"".to_vec(),
        )
        .unwrap();
        assert!(matches!(f.problem, Some(Problem::InvalidUtf8 { .. })));
    }

    /// The trees of a file with no Flux object are dropped after the scan and parsed again
    /// the same (offsets, lines, nodes, comments); a file with an ImagePolicy (also inside an
    /// unwrapped `kind: List`) or a kustomization file keeps them for the tree-wide rules.
    #[test]
    fn dropped_trees_parse_again_the_same() {
        let marker = "a: 1\n---\n# c\nkind: Deployment\nspec:\n  image: x:1 # {\"$imagepolicy\": \"ns:p\"}\n---\nb: [1, 2]\n";
        let mut f = scan(marker);
        let before = format!("{:?}", f.docs);
        assert_eq!(f.docs.len(), 3);
        f.drop_trees_if_unneeded();
        assert!(f.trees_dropped);
        assert!(f.docs.is_empty());
        assert_eq!(format!("{:?}", f.documents()), before);

        for keep in [
            "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: p # {\"$imagepolicy\": \"ns:p\"}\n",
            "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: kustomize.toolkit.fluxcd.io/v1\n    kind: Kustomization\n",
        ] {
            let mut f = scan(keep);
            f.drop_trees_if_unneeded();
            assert!(!f.trees_dropped, "{keep}");
            assert!(!f.docs.is_empty());
        }
        let mut k = scan_bytes_keep(
            "kustomization.yaml".into(),
            "kustomization.yaml".into(),
            true,
            b"namespace: apps\nresources: [a.yaml]\n".to_vec(),
            true,
        )
        .unwrap();
        k.drop_trees_if_unneeded();
        assert!(!k.trees_dropped);
    }

    /// Every input of the fuzz corpus kept in the repository (`fuzz/corpus/{scan,simulate}`)
    /// that parses: the trees [`FileScan::documents`] parses again after
    /// [`FileScan::drop_trees`] are the trees of the scan (run on a large stack: the corpus
    /// holds deeply nested inputs).
    #[test]
    fn dropped_trees_parse_again_the_same_on_the_fuzz_corpus() {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        let checked = std::thread::Builder::new()
            .stack_size(DEEP_STACK)
            .spawn(move || {
                let mut n = 0;
                for target in ["scan", "simulate"] {
                    let Ok(rd) = std::fs::read_dir(base.join(target)) else {
                        continue;
                    };
                    for e in rd {
                        let p = e.unwrap().path();
                        let data = std::fs::read(&p).unwrap();
                        let Some(mut f) = scan_bytes("f.yaml".into(), "f.yaml".into(), true, data)
                        else {
                            continue;
                        };
                        if f.docs.is_empty() {
                            continue;
                        }
                        let before = format!("{:?}", f.docs);
                        f.drop_trees();
                        assert_eq!(format!("{:?}", f.documents()), before, "{}", p.display());
                        n += 1;
                    }
                }
                n
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(checked > 100, "only {checked} corpus inputs parsed");
    }
}
