//! The whole run: scan the trees, gather policies/automations, apply the lint rules and
//! simulate what the automation would commit.

use crate::marker::{Field, NotMarker, Parsed, SetterRef};
use crate::objects::{
    FluxKustomization, ImagePolicy, ImageUpdateAutomation, Objects, Origin, merge_policies,
    path_covers,
};
use crate::scan::{self, FileScan, Placement, Problem, ScanResult, Site};
use crate::simulate::{self, Replacement};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Finding severity. `error` makes the run exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational.
    Info,
    /// Probably wrong.
    Warning,
    /// Wrong: the automation will not do what the marker says, or will break something.
    Error,
}

/// A finding: stable rule id, position, message and fix.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Stable rule id (`MC001`...), see [`RULES`].
    pub rule: &'static str,
    /// Short rule name.
    pub name: &'static str,
    /// Severity.
    pub severity: Severity,
    /// File path as given/displayed (relative to the current directory when possible).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

/// Every rule: (id, name, default severity, one-line description).
pub const RULES: &[(&str, &str, Severity, &str)] = &[
    (
        "MC001",
        "marker-unparsable",
        Severity::Error,
        "marker comment Flux cannot parse as JSON {\"$imagepolicy\": \"...\"}",
    ),
    (
        "MC002",
        "marker-bad-setter",
        Severity::Error,
        "setter name is not ns:policy[:tag|:name|:digest]",
    ),
    (
        "MC003",
        "tag-on-full-ref",
        Severity::Error,
        ":tag marker on a field holding a full image reference",
    ),
    (
        "MC004",
        "full-ref-on-tag-field",
        Severity::Error,
        "plain marker on a tag/version field writes name:tag",
    ),
    (
        "MC005",
        "name-on-tagged-value",
        Severity::Error,
        ":name marker on a value that carries a tag or digest",
    ),
    (
        "MC006",
        "digest-without-digest",
        Severity::Error,
        ":digest marker but the policy reflects no digest",
    ),
    (
        "MC007",
        "digest-on-full-ref",
        Severity::Error,
        ":digest marker on a field holding a full image reference (writes a bare sha256:...)",
    ),
    (
        "MC010",
        "policy-unknown",
        Severity::Error,
        "marker names an ImagePolicy that does not exist",
    ),
    (
        "MC011",
        "policy-other-namespace",
        Severity::Error,
        "policy not in the namespace of the automation covering the file",
    ),
    (
        "MC012",
        "policy-not-selected",
        Severity::Error,
        "policy excluded by the automation's policySelector",
    ),
    (
        "MC013",
        "outside-update-path",
        Severity::Error,
        "file outside every ImageUpdateAutomation spec.update.path",
    ),
    (
        "MC020",
        "marker-not-attached",
        Severity::Error,
        "marker comment in a place Flux never reads (head comment above a key, after `key:`...)",
    ),
    (
        "MC021",
        "marker-in-block-scalar",
        Severity::Error,
        "marker text inside a block scalar (string data, not a comment)",
    ),
    (
        "MC022",
        "marker-wrong-file",
        Severity::Error,
        "marker in a file Flux never reads (not .yaml/.yml/Kustomization)",
    ),
    (
        "MC023",
        "marker-problem-file",
        Severity::Error,
        "marker in a file Flux skips (invalid YAML, template, top-level sequence)",
    ),
    (
        "MC024",
        "marker-in-list",
        Severity::Error,
        "marker inside a kind: List item (Flux never updates the List file; it writes every List item to new files)",
    ),
    (
        "MC025",
        "marker-in-value",
        Severity::Warning,
        "marker text inside a quoted or plain value",
    ),
    (
        "MC026",
        "not-yaml",
        Severity::Info,
        "a .yaml/.yml file that is empty or binary: not YAML, nothing to check",
    ),
    (
        "MC030",
        "host-rewrite",
        Severity::Error,
        "automation would rewrite the image host/path, not only the tag",
    ),
    (
        "MC031",
        "imagerepository-tagged",
        Severity::Error,
        "ImageRepository spec.image carries a tag or digest",
    ),
    (
        "MC040",
        "job-pod-template",
        Severity::Error,
        "marker on a Job pod template (immutable: the update will fail)",
    ),
    (
        "MC050",
        "removed-template-field",
        Severity::Error,
        "messageTemplate uses a removed field (.Updated, .Changed.ImageResult)",
    ),
    (
        "MC051",
        "removed-api-version",
        Severity::Error,
        "image.toolkit.fluxcd.io API version removed from Flux",
    ),
    (
        "MC052",
        "unsupported-strategy",
        Severity::Error,
        "ImageUpdateAutomation spec.update.strategy is not Setters",
    ),
    (
        "MC060",
        "invalid-latest-ref",
        Severity::Error,
        "policy latestRef is not a valid image reference (the whole run fails)",
    ),
    (
        "MC061",
        "unreadable-file",
        Severity::Error,
        "file cannot be read (the automation run fails)",
    ),
    (
        "MC062",
        "file-too-large",
        Severity::Warning,
        "file larger than the scan limit was not checked",
    ),
    (
        "MC070",
        "rewrite-reformats",
        Severity::Info,
        "the automation's rewrite changes more than the marked values",
    ),
    (
        "MC071",
        "simulation-approximate",
        Severity::Info,
        "file layout outside what the simulation reproduces byte for byte",
    ),
    (
        "MC072",
        "no-policies",
        Severity::Info,
        "no ImagePolicies known: policy names not checked",
    ),
    (
        "MC080",
        "render-error",
        Severity::Error,
        "kubectl kustomize fails on a directory the change touches",
    ),
    (
        "MC081",
        "rendered-image-change",
        Severity::Info,
        "a rendered container image the automation's commit changes",
    ),
    (
        "MC082",
        "rendered-bare-tag",
        Severity::Error,
        "after the change a container image is a bare tag or digest (no repository)",
    ),
];

/// Build a finding for rule `id` (panics on an unknown id: rule ids are constants).
pub fn finding(
    id: &'static str,
    file: String,
    line: usize,
    column: usize,
    message: String,
    fix: String,
) -> Finding {
    let (rule, name, severity) = rule(id);
    Finding {
        rule,
        name,
        severity,
        file,
        line,
        column,
        message,
        fix,
    }
}

fn rule(id: &'static str) -> (&'static str, &'static str, Severity) {
    let r = RULES.iter().find(|r| r.0 == id).expect("known rule");
    (r.0, r.1, r.2)
}

/// One value change the automation would make.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// 1-based line of the value.
    pub line: usize,
    /// Setter name (`ns:policy[:suffix]`).
    pub setter: String,
    /// Old value.
    pub old: String,
    /// New value.
    pub new: String,
}

/// A file the automation would rewrite.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Display path.
    pub file: String,
    /// Path on disk.
    #[serde(skip)]
    pub abs: PathBuf,
    /// Original contents.
    #[serde(skip)]
    pub old: String,
    /// New contents.
    #[serde(skip)]
    pub new: String,
    /// Value changes.
    pub changes: Vec<Change>,
    /// Byte-exact model.
    pub exact: bool,
    /// Why it may not be byte-exact.
    pub caveats: Vec<String>,
    /// Unified diff (`a/FILE`, `b/FILE`).
    pub diff: String,
}

/// Inputs of a run.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Paths to scan (files or directories).
    pub paths: Vec<PathBuf>,
    /// Namespace for manifests without `metadata.namespace`.
    pub default_namespace: String,
    /// Extra objects (cluster, `--policies` files), merged over the tree's.
    pub extra: Objects,
    /// `--set ns:policy=REF` (applied last).
    pub sets: Vec<ImagePolicy>,
    /// Ignore objects found in the tree (`--from-cluster --cluster-only`).
    pub ignore_tree_objects: bool,
    /// Maximum file size to read.
    pub max_file_size: u64,
    /// Repository root for `spec.update.path` (default: nearest `.git` above each path).
    pub repo_root: Option<PathBuf>,
    /// `--normalize`: instead of the automation's value changes, rewrite every file holding a
    /// marker Flux acts on the way kyaml lays it out (kio.ByteWriter + go-yaml v3), with every
    /// value unchanged; files already in that layout are not listed.
    pub normalize: bool,
}

/// Result of a run.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Findings, sorted by file, line, column.
    pub findings: Vec<Finding>,
    /// Files the automation would rewrite.
    pub changes: Vec<FileChange>,
    /// Objects used.
    #[serde(skip)]
    pub objects: Objects,
    /// Counts.
    pub stats: Stats,
    /// Per scanned path: (path as given, files read, files Flux selects by name).
    #[serde(skip)]
    pub scanned: Vec<(PathBuf, usize, usize)>,
    /// Paths naming a file Flux never reads (not `.yaml`/`.yml`/`Kustomization`).
    #[serde(skip)]
    pub not_selected: Vec<PathBuf>,
    /// Entries skipped unopened because they are not regular files: (display path, what it
    /// is, e.g. "a FIFO (named pipe)"). Git cannot store them, so Flux never sees one.
    #[serde(skip)]
    pub skipped_special: Vec<(String, &'static str)>,
    /// Notes about how the run read the tree (printed on stderr), e.g. the repository root used
    /// for `spec.update.path` when there is no `.git`.
    #[serde(skip)]
    pub notes: Vec<String>,
    /// The repository root `spec.update.path` is resolved from, and why, for the summary:
    /// "ROOT (git root of PATH)", "ROOT (--repo-root)" or "ROOT (PATH itself: no .git above
    /// it)"; one entry per distinct root.
    #[serde(skip)]
    pub roots: Vec<String>,
}

/// Counters.
#[derive(Debug, Default, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// Files read: those Flux selects by name plus YAML-ish names read for lint (`.json`,
    /// `.tpl`, `*.yaml.j2`...).
    pub files_scanned: usize,
    /// Files Flux would select by name.
    pub files_selected: usize,
    /// Files holding the `"$imagepolicy"` token.
    pub files_with_token: usize,
    /// Markers Flux reads.
    pub markers: usize,
}

/// A path for messages: relative to the current directory when below it.
pub fn display_path(p: &Path) -> String {
    display(p)
}

fn display(p: &Path) -> String {
    // the working directory, read once per process (one getcwd, not one per file)
    static CWD: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let cwd = CWD.get_or_init(|| std::env::current_dir().ok());
    let rel = cwd
        .as_ref()
        .and_then(|c| p.strip_prefix(c).ok())
        .unwrap_or(p);
    let s = rel.to_string_lossy();
    let mut s = s.as_ref();
    while let Some(r) = s.strip_prefix("./") {
        s = r;
    }
    s.to_string()
}

/// The nearest directory at or above `dir` holding `.git`.
fn git_root_of(dir: &Path) -> Option<PathBuf> {
    let mut cur = Some(dir);
    while let Some(c) = cur {
        if c.join(".git").exists() {
            return Some(c.to_path_buf());
        }
        cur = c.parent();
    }
    None
}

/// The longest common ancestor of canonical directories.
fn common_ancestor(dirs: &[PathBuf]) -> Option<PathBuf> {
    let mut it = dirs.iter();
    let mut acc = it.next()?.clone();
    for d in it {
        while !d.starts_with(&acc) {
            acc = acc.parent()?.to_path_buf();
        }
    }
    Some(acc)
}

/// The Flux version pinned in the tree (`gotk-components.yaml`), as `(major, minor, patch)`.
fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.trim_start_matches('v').split(['.', '-', '+']);
    Some((
        it.next()?.parse().ok()?,
        it.next()?.parse().ok()?,
        it.next().and_then(|p| p.parse().ok()).unwrap_or(0),
    ))
}

fn display_dir(p: &Path) -> String {
    let d = display(p);
    if d.is_empty() { ".".into() } else { d }
}

struct Scanned {
    tree: crate::kustomize::Tree,
    res: ScanResult,
    #[allow(dead_code)]
    root: PathBuf,
    /// Canonical directory the scan's relative paths start from.
    base: PathBuf,
    repo_root: PathBuf,
}

/// The policy table for one file: setter name -> value, and whether automations are known.
struct Setters {
    table: BTreeMap<String, (String, usize)>,
}

/// The policies the automations covering a file apply, with their setter table.
struct Applicable {
    keys: std::collections::HashSet<(String, String)>,
    setters: Setters,
}

/// ImagePolicies by (namespace, name), and by name alone (for namespaces kustomize sets).
struct PolicyIndex {
    by_key: std::collections::HashMap<(String, String), usize>,
}

impl PolicyIndex {
    fn new(policies: &[ImagePolicy]) -> PolicyIndex {
        let mut by_key = std::collections::HashMap::new();
        for (i, p) in policies.iter().enumerate() {
            by_key
                .entry((p.namespace.clone(), p.name.clone()))
                .or_insert(i);
        }
        PolicyIndex { by_key }
    }

    fn get<'a>(&self, all: &'a [ImagePolicy], ns: &str, name: &str) -> Option<&'a ImagePolicy> {
        self.by_key
            .get(&(ns.to_string(), name.to_string()))
            .map(|&i| &all[i])
    }
}

fn setters_for(policies: &[ImagePolicy]) -> Setters {
    let mut table = BTreeMap::new();
    for (i, p) in policies.iter().enumerate() {
        let Some(l) = &p.latest else { continue };
        let base = format!("{}:{}", p.namespace, p.name);
        table.insert(base.clone(), (l.full(), i));
        table.insert(format!("{base}:tag"), (l.tag.clone(), i));
        table.insert(format!("{base}:name"), (l.name.clone(), i));
        table.insert(format!("{base}:digest"), (l.digest.clone(), i));
    }
    Setters { table }
}

/// Policies an automation applies (`getPolicies`: automation namespace + policySelector, with
/// a latestRef).
pub fn automation_policies<'a>(
    a: &ImageUpdateAutomation,
    all: &'a [ImagePolicy],
) -> Vec<&'a ImagePolicy> {
    all.iter()
        .filter(|p| p.namespace == a.namespace)
        .filter(|p| a.selector.as_ref().is_none_or(|s| s.matches(&p.labels)))
        .collect()
}

fn value_name(v: &str) -> &str {
    // strip @digest and :tag (tag = ':' after the last '/')
    let v = v.split('@').next().unwrap_or(v);
    let ls = v.rfind('/').map(|i| i + 1).unwrap_or(0);
    match v[ls..].rfind(':') {
        Some(i) => &v[..ls + i],
        None => v,
    }
}

fn has_tag_or_digest(v: &str) -> bool {
    value_name(v) != v
}

fn normalize_name(n: &str) -> String {
    // docker.io/library/x == x (go-containerregistry defaults), index.docker.io == docker.io
    let n = n
        .strip_prefix("index.docker.io/")
        .map(|r| format!("docker.io/{r}"))
        .unwrap_or(n.to_string());
    let first = n.split('/').next().unwrap_or("");
    let has_host =
        n.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full = if has_host {
        n.clone()
    } else {
        format!("docker.io/{n}")
    };
    match full.strip_prefix("docker.io/") {
        Some(r) if !r.contains('/') => format!("docker.io/library/{r}"),
        _ => full,
    }
}

/// The marked field holds (or is) a container image reference: key `image`, or a value
/// with a registry path, a tag or a digest. A digest-shaped value (`sha256:<hex>`) or a
/// field whose key ends in `digest` (`digest`, `newDigest`) counts only under `image:` or when
/// the value has a `/` or `@`, so a digest field is not taken for an image.
fn image_field(key: &str, value: &str) -> bool {
    if key == "image" {
        return true;
    }
    if value.contains('/') || value.contains('@') {
        return true;
    }
    let digest_field = key.to_ascii_lowercase().ends_with("digest") || is_digest(value);
    !digest_field && has_tag_or_digest(value)
}

/// `ALGORITHM:HEX`, a content digest as a `:digest` setter writes it: a registered OCI
/// image-spec algorithm (`sha256`, `sha384`, `sha512`; image-spec descriptor.md) or `blake3`,
/// then one or more hex characters (any length: test fixtures use short fake digests).
pub fn is_digest(v: &str) -> bool {
    match v.split_once(':') {
        Some((alg, hex)) => {
            matches!(alg, "sha256" | "sha384" | "sha512" | "blake3")
                && !hex.is_empty()
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        }
        None => false,
    }
}

/// How a marked image field's current value reads, for messages: a full reference, a bare
/// digest, a bare tag or a bare name, as it actually is (after a bad `--write`,
/// `image: 0.1.1` is a bare tag, not a reference).
fn describe_image_value(key: &str, value: &str) -> String {
    let field = if key.is_empty() {
        "a sequence item".to_string()
    } else {
        format!("`{key}:`")
    };
    if is_digest(value) {
        format!(
            "{field}, which holds the bare digest {value:?} (already broken: not an image reference)"
        )
    } else if value.contains('/') || value.contains('@') || has_tag_or_digest(value) {
        format!("{field}, which holds the full image reference {value:?}")
    } else if value.is_empty() {
        format!("{field}, which is empty")
    } else if value
        .trim_start_matches('v')
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit())
    {
        format!(
            "{field}, which holds the bare tag {value:?} (already broken: not an image reference)"
        )
    } else {
        format!("{field}, which holds {value:?} (an image name without a tag)")
    }
}

fn tagish_key(k: &str) -> bool {
    let l = k.to_ascii_lowercase();
    l.ends_with("tag") || l == "version" || l == "appversion"
}

/// Run markercheck over `cfg.paths`.
pub fn run(cfg: &Config) -> Report {
    run_scanned(cfg, |p| scan::scan_root(p, cfg.max_file_size))
}

/// [`run`], with each path of `cfg.paths` scanned by `scan` (e.g. a [`ScanResult`] made by
/// [`scan::scan_root_keeping`] for a caller that reads the same tree).
pub fn run_scanned(cfg: &Config, mut scan: impl FnMut(&Path) -> ScanResult) -> Report {
    let mut report = Report::default();
    let mut scans = Vec::new();
    for p in &cfg.paths {
        let res = scan(p);
        report
            .scanned
            .push((p.clone(), res.files_read, res.selected_files));
        if res.root_not_selected {
            report.not_selected.push(p.clone());
        }
        let root = std::fs::canonicalize(p).unwrap_or(p.clone());
        // the directory `rel` paths are relative to (a named file's parent)
        let base = if !root.is_dir() {
            root.parent().map(Path::to_path_buf).unwrap_or(root.clone())
        } else {
            root.clone()
        };
        let repo_root = match &cfg.repo_root {
            Some(r) => std::fs::canonicalize(r).unwrap_or(r.clone()),
            None => git_root_of(&base).unwrap_or_default(),
        };
        let tree = crate::kustomize::Tree::from_files(&res.files);
        scans.push(Scanned {
            res,
            root,
            base,
            repo_root,
            tree,
        });
    }
    for s in &scans {
        let why = if cfg.repo_root.is_some() {
            "--repo-root".to_string()
        } else if s.repo_root.as_os_str().is_empty() {
            continue;
        } else {
            format!("git root of {}", display_path(&s.root))
        };
        let r = format!("{} ({why})", display_dir(&s.repo_root));
        if !report.roots.contains(&r) {
            report.roots.push(r);
        }
    }
    // Outside a git checkout, spec.update.path is taken from the tree root: the common
    // ancestor of the paths given (PATH itself for one path), never the current directory
    // (`markercheck DIR` from DIR's parent reads DIR as the repository; `markercheck apps
    // clusters` in a copy of a fleet still resolves `./apps`).
    if scans.iter().any(|s| s.repo_root.as_os_str().is_empty()) {
        let dirs: Vec<PathBuf> = scans
            .iter()
            .filter(|s| s.repo_root.as_os_str().is_empty())
            .map(|s| s.base.clone())
            .collect();
        let top = common_ancestor(&dirs).unwrap_or_default();
        report.roots.push(format!(
            "{} ({}: no .git above it)",
            display_dir(&top),
            if dirs.len() == 1 {
                "PATH itself"
            } else {
                "the common directory of the PATHs"
            }
        ));
        for s in scans
            .iter_mut()
            .filter(|s| s.repo_root.as_os_str().is_empty())
        {
            s.repo_root = top.clone();
        }
        report.notes.push(format!(
            "no .git above {}: spec.update.path and Kustomization spec.path are taken relative to {} (set the repository root with --repo-root)",
            cfg.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            display_dir(&top)
        ));
    }
    // objects
    let mut objects = Objects::default();
    let mut facts = crate::objects::TreeFacts::default();
    if !cfg.ignore_tree_objects {
        for s in &scans {
            let (o, f) = Objects::from_files_in_tree(&s.res.files, &s.tree, &cfg.default_namespace);
            facts.kustomizations.extend(f.kustomizations);
            facts.unknown_namespaces.extend(f.unknown_namespaces);
            merge_policies(&mut objects.policies, o.policies);
            objects.repositories.extend(o.repositories);
            objects.automations.extend(o.automations);
            objects.removed_api.extend(o.removed_api);
        }
    }
    // the trees of the files were read (objects, kustomize structure); from here on only the
    // simulation reads a file's tree, parsed again for the files it rewrites
    for s in &mut scans {
        for f in &mut s.res.files {
            f.drop_trees();
        }
    }
    // Flux versions pinned in the trees (gotk-components.yaml headers)
    let mut flux_versions: Vec<((u32, u32, u32), String, String)> = Vec::new();
    for s in &scans {
        for (rel, v) in &s.res.flux_versions {
            if let Some(pv) = parse_version(v) {
                flux_versions.push((pv, v.clone(), display(&s.base.join(rel))));
            }
        }
    }
    flux_versions.sort();
    merge_policies(&mut objects.policies, cfg.extra.policies.clone());
    objects.repositories.extend(cfg.extra.repositories.clone());
    objects.automations.extend(cfg.extra.automations.clone());
    merge_policies(&mut objects.policies, cfg.sets.clone());

    let mut findings = Vec::new();
    // a severity other than the rule's default for the next finding pushed (MC040, MC050,
    // MC051 depend on the tree: spec.force, the pinned Flux version)
    let sev_next: std::cell::Cell<Option<Severity>> = std::cell::Cell::new(None);
    let mut push = |id: &'static str,
                    file: String,
                    line: usize,
                    column: usize,
                    message: String,
                    fix: String| {
        let (rule, name, severity) = rule(id);
        let severity = sev_next.take().unwrap_or(severity);
        findings.push(Finding {
            rule,
            name,
            severity,
            file,
            line,
            column,
            message,
            fix,
        });
    };

    // object-level rules
    for a in &objects.automations {
        let (file, line) = match &a.origin {
            Origin::File { path, line } => (path.to_string_lossy().into_owned(), *line),
            _ => (format!("cluster:{}/{}", a.namespace, a.name), 0),
        };
        let file = scans
            .iter()
            .find_map(|s| s.res.files.iter().find(|f| f.rel.to_string_lossy() == file))
            .map(|f| display(&f.abs))
            .unwrap_or(file);
        if let Some((t, tl)) = &a.message_template {
            for (field, repl) in [
                (".Updated", ".Changed"),
                (
                    ".Changed.ImageResult",
                    ".Changed.FileChanges or .Changed.Objects",
                ),
            ] {
                let hit = if field == ".Updated" {
                    t.match_indices(".Updated")
                        .any(|(i, _)| !t[i + 8..].starts_with(|c: char| c.is_alphanumeric()))
                } else {
                    t.contains(field)
                };
                if hit {
                    // image-automation-controller v1.0.0 (Flux v2.7.0) removed the field; the
                    // v1 API exists only from that version on, so an automation written as v1
                    // runs on a Flux that rejects the template
                    let stall = format!(
                        "the automation stalls with reason RemovedTemplateField (\"template uses removed '{field}' field\") as soon as there is something to commit"
                    );
                    let v1 = a.api_version.ends_with("/v1");
                    let (sev, msg) = match pinned(&flux_versions, (2, 7, 0)) {
                        Pinned::AllBefore(v) if !v1 => (
                            Severity::Info,
                            format!(
                                "works on the Flux {v} pinned in this repository, but image-automation-controller v1.0.0 (Flux v2.7.0) removed '{field}': after upgrading to Flux v2.7.0 or later {stall}"
                            ),
                        ),
                        Pinned::AllFrom(v) | Pinned::Mixed(_, v) => (
                            Severity::Error,
                            format!(
                                "uses '{field}', removed in image-automation-controller v1.0.0 (Flux v2.7.0); on the Flux {v} pinned in this repository {stall}"
                            ),
                        ),
                        _ if v1 => (
                            Severity::Error,
                            format!(
                                "uses '{field}', removed in image-automation-controller v1.0.0 (Flux v2.7.0), which is the first to serve apiVersion {}: {stall}",
                                a.api_version
                            ),
                        ),
                        _ => (
                            Severity::Warning,
                            format!(
                                "uses '{field}': from Flux v2.7.0 (image-automation-controller v1.0.0) {stall}; no pinned Flux version found in the tree (gotk-components.yaml)"
                            ),
                        ),
                    };
                    sev_next.set(Some(sev));
                    push(
                        "MC050",
                        file.clone(),
                        *tl,
                        1,
                        format!(
                            "ImageUpdateAutomation {}/{}: messageTemplate {msg}",
                            a.namespace, a.name
                        ),
                        format!("use {repl} (image-automation-controller v1.0.0 removed {field})"),
                    );
                }
            }
        }
        if !a.strategy.is_empty() && a.strategy != "Setters" {
            push(
                "MC052",
                file.clone(),
                line,
                1,
                format!(
                    "ImageUpdateAutomation {}/{}: spec.update.strategy {:?} is not supported (only Setters)",
                    a.namespace, a.name, a.strategy
                ),
                "set spec.update.strategy: Setters".into(),
            );
        }
    }
    for (path, line, api, kind) in &objects.removed_api {
        let file = scans
            .iter()
            .find_map(|s| s.res.files.iter().find(|f| &f.rel == path))
            .map(|f| display(&f.abs))
            .unwrap_or(path.to_string_lossy().into_owned());
        // image-reflector-controller (ImagePolicy, ImageRepository) and
        // image-automation-controller (ImageUpdateAutomation) stopped serving v1beta1 in v1.0.0
        // (Flux v2.7.0) and v1beta2 in v1.2.0 (Flux v2.9.0): their CRDs (config/crd/bases) at
        // those tags, and flux2 manifests/crds/kustomization.yaml at v2.7.0 / v2.9.0
        let controller = if kind == "ImageUpdateAutomation" {
            "image-automation-controller"
        } else {
            "image-reflector-controller"
        };
        let (ctl_v, flux_v, from) = if api.ends_with("/v1beta2") {
            ("v1.2.0", "v2.9.0", (2, 9, 0))
        } else {
            ("v1.0.0", "v2.7.0", (2, 7, 0))
        };
        let removed = format!("{controller} {ctl_v} (Flux {flux_v}) no longer serves {api}");
        let (sev, msg) = match pinned(&flux_versions, from) {
            Pinned::AllBefore(v) => (
                Severity::Info,
                format!(
                    "{kind} uses {api}, which the Flux {v} pinned in this repository serves; {removed}, so the apply fails after upgrading to Flux {flux_v} or later"
                ),
            ),
            Pinned::AllFrom(v) => (
                Severity::Error,
                format!(
                    "{kind} uses {api}: {removed}, and this repository pins Flux {v}: the apply fails"
                ),
            ),
            Pinned::Mixed(old, new) => (
                Severity::Error,
                format!(
                    "{kind} uses {api}: {removed}; this repository pins Flux {old} and {new}: the apply fails on the clusters running Flux {flux_v} or later"
                ),
            ),
            Pinned::Unknown => (
                Severity::Warning,
                format!(
                    "{kind} uses {api}: the apply fails from Flux {flux_v} ({removed}); no pinned Flux version found in the tree (gotk-components.yaml)"
                ),
            ),
        };
        sev_next.set(Some(sev));
        push(
            "MC051",
            file,
            *line,
            1,
            msg,
            "use apiVersion image.toolkit.fluxcd.io/v1 (served from Flux v2.7.0)".into(),
        );
    }
    for r in &objects.repositories {
        if has_tag_or_digest(&r.image) {
            let (file, line) = match &r.origin {
                Origin::File { path, .. } => (
                    scans
                        .iter()
                        .find_map(|s| s.res.files.iter().find(|f| &f.rel == path))
                        .map(|f| display(&f.abs))
                        .unwrap_or_default(),
                    r.image_line,
                ),
                _ => (format!("cluster:{}/{}", r.namespace, r.name), 0),
            };
            push(
                "MC031",
                file,
                line,
                1,
                format!(
                    "ImageRepository {}/{}: spec.image {:?} carries a tag or digest (rejected since image-reflector-controller v0.35)",
                    r.namespace, r.name, r.image
                ),
                format!("set spec.image: {}", value_name(&r.image)),
            );
        }
    }
    for p in &objects.policies {
        if let Some(l) = &p.latest
            && let Err(e) = l.validate()
        {
            push(
                "MC060",
                format!("policy {}/{}", p.namespace, p.name),
                0,
                0,
                format!(
                    "ImagePolicy {}/{} latestRef {:?}: {e}; UpdateWithSetters fails the whole run (\"encountered invalid image ref\")",
                    p.namespace,
                    p.name,
                    l.full()
                ),
                "fix the policy's repository or the --set value".into(),
            );
        }
    }
    if objects.policies.is_empty() {
        push("MC072", String::new(), 0, 0,
            "no ImagePolicies found in the tree, --policies, --from-cluster or --set: policy names and values not checked, nothing simulated".into(),
            "add --from-cluster, --policies FILE or --set ns:policy=REF".into());
    }

    // per-file rules
    let all_policies = objects.policies.clone();
    let policy_index = PolicyIndex::new(&objects.policies);
    let mut applicable_cache: std::collections::HashMap<Vec<usize>, std::rc::Rc<Applicable>> =
        std::collections::HashMap::new();
    for s in &scans {
        report.stats.files_selected += s.res.selected_files;
        report.stats.files_scanned += s.res.files_read;
        for e in &s.res.read_errors {
            let id = if e.symlink { "MC062" } else { "MC061" };
            if e.symlink {
                continue; // Flux ignores unreadable symlinks (filereader.go)
            }
            push(
                id,
                display(&s.base.join(&e.rel)),
                0,
                0,
                format!(
                    "cannot read: {} (Flux's ScreeningLocalReader fails the whole run on a read error)",
                    e.message
                ),
                "fix the permissions or remove the file".into(),
            );
        }
        for (rel, kind) in &s.res.special {
            report
                .skipped_special
                .push((display(&s.base.join(rel)), kind));
        }
        for (rel, why) in &s.res.not_yaml {
            push(
                "MC026",
                display(&s.base.join(rel)),
                0,
                0,
                format!("not YAML: the file is {why}; nothing in it to check"),
                "remove the file or give it YAML content".into(),
            );
        }
        for (rel, size) in &s.res.too_large {
            push(
                "MC062",
                display(&s.base.join(rel)),
                0,
                0,
                format!("{size} bytes, above the scan limit: not checked"),
                "raise --max-file-size".into(),
            );
        }
        for f in &s.res.files {
            if f.has_token && f.selected {
                report.stats.files_with_token += 1;
            }
            let file = display(&f.abs);
            // the path as upstream walks it (symlinks not resolved), relative to the repo root:
            // one join per file instead of a canonicalize (a readlink per path component)
            let rel_repo = s
                .base
                .join(&f.rel)
                .strip_prefix(&s.repo_root)
                .map(Path::to_path_buf)
                .unwrap_or(f.rel.clone());
            let covering_ix: Vec<usize> = objects
                .automations
                .iter()
                .enumerate()
                .filter(|(_, a)| path_covers(&a.update_path, &rel_repo))
                .map(|(i, _)| i)
                .collect();
            let covering: Vec<&ImageUpdateAutomation> = covering_ix
                .iter()
                .map(|&i| &objects.automations[i])
                .collect();
            // The policies (and setter table) of a set of covering automations, built once per
            // distinct set: linear in files + policies, not files x policies.
            let app = applicable_cache
                .entry(covering_ix)
                .or_insert_with(|| {
                    let list: Vec<ImagePolicy> = if objects.automations.is_empty() {
                        all_policies.clone()
                    } else {
                        let mut seen = std::collections::HashSet::new();
                        let mut v: Vec<ImagePolicy> = Vec::new();
                        for a in &covering {
                            for p in automation_policies(a, &all_policies) {
                                if seen.insert((p.namespace.clone(), p.name.clone())) {
                                    v.push(p.clone());
                                }
                            }
                        }
                        v
                    };
                    let setters = setters_for(&list);
                    let keys = list
                        .iter()
                        .map(|p| (p.namespace.clone(), p.name.clone()))
                        .collect();
                    std::rc::Rc::new(Applicable { keys, setters })
                })
                .clone();
            let setters = &app.setters;
            // Flux Kustomizations of the tree whose build includes this file (only for files
            // with a Job: MC040)
            let appliers: Vec<&FluxKustomization> =
                if f.sites.iter().any(|x| x.object.kind == "Job") {
                    facts
                        .kustomizations
                        .iter()
                        .filter(|k| {
                            let Some(dir) = crate::kustomize::normalize(Path::new(
                                k.path.trim_start_matches("./"),
                            )) else {
                                return false;
                            };
                            match s.repo_root.join(&dir).strip_prefix(&s.base) {
                                Ok(d) => s.tree.builds(d, &f.rel),
                                Err(_) => rel_repo.starts_with(&dir),
                            }
                        })
                        .collect()
                } else {
                    Vec::new()
                };
            let mut reps = Vec::new();
            let mut changes = Vec::new();
            // unchanged values kyaml re-quotes when the file is rewritten anyway
            let mut requote = Vec::new();
            let mut outside_reported = false;
            // --normalize: a marker Flux would act on, outside a kind: List item
            let mut normalizable = false;
            if let Some(p) = &f.problem
                && f.has_token
                && f.selected
                && f.sites.is_empty()
            {
                push(
                    "MC023",
                    file.clone(),
                    p.line(),
                    1,
                    format!(
                        "the file contains \"$imagepolicy\" but Flux skips it as a \"problem file\" ({p})"
                    ),
                    "make the file valid UTF-8 YAML with a mapping at the top of each document"
                        .into(),
                );
            }
            for site in &f.sites {
                check_site(
                    site,
                    f,
                    &file,
                    &objects,
                    &facts,
                    &policy_index,
                    &covering,
                    &app,
                    &appliers,
                    &sev_next,
                    &mut outside_reported,
                    &mut push,
                );
                if site.effective() && f.has_token && f.selected && f.problem.is_none() {
                    report.stats.markers += 1;
                    normalizable |= site.target.is_some() && !site.in_list_item;
                    let name = site.setter.as_deref().unwrap_or("");
                    if let (Some((v, _)), Some(t)) = (setters.table.get(name), &site.target) {
                        if site.in_list_item {
                            continue;
                        }
                        if *v != t.value {
                            reps.push(Replacement {
                                start: t.start,
                                end: t.end,
                                value: v.clone(),
                                style: t.style,
                            });
                            changes.push(Change {
                                line: t.line,
                                setter: name.to_string(),
                                old: t.value.clone(),
                                new: v.clone(),
                            });
                        } else if t.style == crate::yamltree::Style::Plain
                            && simulate::is_yaml11_non_string(v)
                            && simulate::go_yaml_v3_tag(v) != "null"
                        {
                            // the same value: no change of its own, but when the file is
                            // rewritten for another marker the setter has set this one too
                            // (filter.go `set` runs for every marked field) and
                            // `FormatNonStringStyle` double-quotes a YAML 1.1 non-string
                            // (`yes`, `1.10`); go-yaml drops the kept tag, which the value
                            // still resolves to (markercheck's differential test: `tag: yes`)
                            requote.push(Replacement {
                                start: t.start,
                                end: t.end,
                                value: v.clone(),
                                style: t.style,
                            });
                        }
                    }
                }
            }
            if !reps.is_empty() {
                reps.append(&mut requote);
            }
            if cfg.normalize {
                // the layout kyaml writes, every value as it is: no replacements at all
                reps.clear();
                changes.clear();
            }
            if !reps.is_empty() || (cfg.normalize && normalizable) {
                let rw = simulate::rewrite(f, &reps);
                if reps.is_empty() && rw.text == f.text && !f.crlf {
                    // already laid out as kyaml writes it
                    continue;
                }
                let old = f.original().into_owned();
                // what else changes besides the values: the text with only the values
                // replaced, compared piecewise (a large file is not copied once more)
                let only_values = match values_replaced_equals(&f.text, &reps, &rw.text) {
                    Some(eq) => eq,
                    None => {
                        let mut t = f.text.clone();
                        let mut rs = reps.clone();
                        rs.sort_by_key(|r| std::cmp::Reverse(r.start));
                        for r in &rs {
                            t.replace_range(
                                r.start..r.end,
                                &simulate::render_scalar(&r.value, r.style),
                            );
                        }
                        t == rw.text
                    }
                };
                if !only_values || f.crlf {
                    let mut what = Vec::new();
                    if f.crlf {
                        what.push("CRLF line endings become LF".to_string());
                    }
                    let blank_before = f.text.lines().filter(|l| l.trim().is_empty()).count();
                    let blank_after = rw.text.lines().filter(|l| l.trim().is_empty()).count();
                    if blank_after < blank_before {
                        what.push(format!(
                            "{} blank line(s) removed",
                            blank_before - blank_after
                        ));
                    }
                    if reps.iter().any(|r| {
                        matches!(
                            r.style,
                            crate::yamltree::Style::Literal | crate::yamltree::Style::Folded
                        )
                    }) {
                        what.push("a marked block scalar is written anew (header `|-`/`>-`: the value loses its final newline, so this rewrite happens even when the image is unchanged)".into());
                    }
                    if what.is_empty() {
                        what.push("layout normalized (document separators, spacing)".into());
                    }
                    push("MC070", file.clone(), 1, 1,
                        format!("the automation rewrites the whole file with kyaml: {}", what.join(", ")),
                        "to keep this out of the image commits, normalize the file in a commit of its own: `kubectl markercheck FILE --normalize --write` rewrites it as kyaml does with every value unchanged (--write alone also writes the new image values)".into());
                }
                if !rw.exact {
                    push(
                        "MC071",
                        file.clone(),
                        1,
                        1,
                        format!(
                            "simulated rewrite may differ from Flux's: {}",
                            rw.caveats.join("; ")
                        ),
                        "treat the diff for these lines as approximate".into(),
                    );
                }
                let mut fc = FileChange {
                    file: file.clone(),
                    abs: f.abs.clone(),
                    old,
                    new: rw.text,
                    changes,
                    exact: rw.exact,
                    caveats: rw.caveats,
                    diff: String::new(),
                };
                fc.diff = unified_diff(&fc);
                report.changes.push(fc);
            }
        }
    }
    findings.sort_by(|a, b| {
        (&a.file, a.line, a.column, a.rule).cmp(&(&b.file, b.line, b.column, b.rule))
    });
    report.findings = findings;
    report.objects = objects;
    report
}

/// Whether `text` with every replacement's range rendered anew ([`simulate::render_scalar`])
/// equals `target`, compared piece by piece without building the replaced text. `None` when
/// two ranges overlap or a range is out of bounds (the caller then builds it).
fn values_replaced_equals(
    text: &str,
    reps: &[simulate::Replacement],
    target: &str,
) -> Option<bool> {
    let mut rs: Vec<&simulate::Replacement> = reps.iter().collect();
    rs.sort_by_key(|r| r.start);
    // touching or overlapping ranges: the sequential replacement is what counts
    let mut prev_end: Option<usize> = None;
    for r in &rs {
        if prev_end.is_some_and(|p| r.start <= p)
            || r.end < r.start
            || r.end > text.len()
            || !text.is_char_boundary(r.start)
            || !text.is_char_boundary(r.end)
        {
            return None;
        }
        prev_end = Some(r.end);
    }
    let mut at = 0; // in text
    let mut t = target.as_bytes();
    let eat = |piece: &[u8], t: &mut &[u8]| -> bool {
        match t.strip_prefix(piece) {
            Some(rest) => {
                *t = rest;
                true
            }
            None => false,
        }
    };
    for r in rs {
        let before = text.as_bytes().get(at..r.start)?;
        if !eat(before, &mut t)
            || !eat(
                simulate::render_scalar(&r.value, r.style).as_bytes(),
                &mut t,
            )
        {
            return Some(false);
        }
        at = r.end;
    }
    Some(eat(&text.as_bytes()[at..], &mut t) && t.is_empty())
}

/// Where the Flux versions pinned in the tree stand against the version that changed a rule.
enum Pinned {
    /// No `gotk-components.yaml` with a version.
    Unknown,
    /// Every pinned version is older (the highest shown).
    AllBefore(String),
    /// Every pinned version is at or after it (the lowest shown).
    AllFrom(String),
    /// Some before (first), some from (second).
    Mixed(String, String),
}

fn pinned(versions: &[((u32, u32, u32), String, String)], from: (u32, u32, u32)) -> Pinned {
    let (Some(lo), Some(hi)) = (versions.first(), versions.last()) else {
        return Pinned::Unknown;
    };
    if hi.0 < from {
        Pinned::AllBefore(hi.1.clone())
    } else if lo.0 >= from {
        Pinned::AllFrom(lo.1.clone())
    } else {
        Pinned::Mixed(lo.1.clone(), hi.1.clone())
    }
}

/// kyaml `kioutil.CreatePathAnnotationValue("", meta)`: `namespace/kind_name.yaml` (Go
/// `path.Join`, so no leading `/` when the namespace is empty), kind lower-cased.
pub fn list_item_path(o: &crate::scan::ObjectId) -> String {
    let file = format!("{}_{}.yaml", o.kind.to_lowercase(), o.name);
    if o.namespace.is_empty() {
        file
    } else {
        format!("{}/{file}", o.namespace)
    }
}

#[allow(clippy::too_many_arguments)]
fn check_site(
    site: &Site,
    f: &FileScan,
    file: &str,
    objects: &Objects,
    facts: &crate::objects::TreeFacts,
    index: &PolicyIndex,
    covering: &[&ImageUpdateAutomation],
    app: &Applicable,
    appliers: &[&FluxKustomization],
    sev_next: &std::cell::Cell<Option<Severity>>,
    outside_reported: &mut bool,
    push: &mut impl FnMut(&'static str, String, usize, usize, String, String),
) {
    let file = file.to_string();
    let (line, col) = (site.line, site.col);
    let correct = |s: &str| -> String {
        let name = SetterRef::parse(s)
            .map(|r| r.policy_key())
            .unwrap_or_else(|| "NAMESPACE:POLICY".into());
        format!("write it as: # {{\"$imagepolicy\": \"{name}\"}}")
    };
    // file-level reasons Flux never sees the marker
    if !f.selected {
        push(
            "MC022",
            file,
            line,
            col,
            format!(
                "marker in a file Flux never reads: only *.yaml, *.yml and files named Kustomization are scanned (filereader.go), not {:?}",
                f.rel
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            "rename the file to .yaml/.yml, or move the value into a scanned manifest".into(),
        );
        return;
    }
    if let Some(p) = &f.problem
        && f.has_token
    {
        {
            let hint = match p {
                Problem::NotAMapping {
                    what: "sequence", ..
                } => " (e.g. a JSON6902 patch file)",
                Problem::Syntax { .. } if f.text.contains("{{") => {
                    " (looks like a Helm/Go template)"
                }
                _ => "",
            };
            push("MC023", file, line, col,
                format!("Flux skips this file as a \"problem file\" ({p}{hint}): the marker is never applied"),
                "make the file a valid YAML mapping document, or move the marker to a manifest Flux can parse".into());
            return;
        }
    }
    match site.placement {
        Placement::BlockScalarContent => {
            push("MC021", file, line, col,
                "marker text inside a block scalar (`|`/`>`): it is string data (e.g. Helm values), not a YAML comment, so Flux never applies it".into(),
                "move the value into structured YAML (HelmRelease spec.values as a mapping) and put the marker as the line comment of the image/tag value".into());
            return;
        }
        Placement::InsideValue => {
            push(
                "MC025",
                file,
                line,
                col,
                "marker text inside a quoted or plain value: not a comment".into(),
                "make it a line comment: value # {\"$imagepolicy\": \"ns:policy\"}".into(),
            );
            return;
        }
        _ => {}
    }
    let parsed = site
        .parsed
        .clone()
        .unwrap_or(Parsed::NotMarker(NotMarker::Empty));
    let setter = match &parsed {
        Parsed::Marker(s) => s.clone(),
        Parsed::NotMarker(why) => {
            let never = if f.has_token {
                ""
            } else {
                "; the file does not even contain the bytes \"$imagepolicy\" so Flux never parses it"
            };
            push(
                "MC001",
                file,
                line,
                col,
                format!("Flux cannot read this marker: {why}{never}"),
                correct(&extract_setter_guess(&site.comment)),
            );
            return;
        }
    };
    if !f.has_token {
        return;
    }
    match site.placement {
        Placement::AboveKey | Placement::OnKey | Placement::Elsewhere | Placement::Shadowed => {
            let why = match site.placement {
                Placement::AboveKey => {
                    "a comment on the line above `key: value` belongs to the key (go-yaml head comment), and Flux only reads the value's comment"
                }
                Placement::OnKey => {
                    "a comment after `key:` belongs to the key, not to the value on the next line"
                }
                Placement::Shadowed => {
                    "the item's own line comment hides this head comment (fieldmeta reads the line comment first)"
                }
                _ => "it is not the line comment of a scalar value",
            };
            push("MC020", file, line, col,
                format!("marker {setter:?} is never applied: {why}"),
                "put the marker at the end of the value's line: `image: repo:tag # {\"$imagepolicy\": \"ns:policy\"}`".into());
            return;
        }
        _ => {}
    }
    let Some(t) = &site.target else { return };
    let Some(sr) = SetterRef::parse(&setter) else {
        let guess = setter.replace('/', ":");
        let fix = if SetterRef::parse(&guess).is_some() {
            format!("use ':' between namespace and name: {guess:?}")
        } else {
            "use \"NAMESPACE:POLICY\" with an optional :tag, :name or :digest suffix".into()
        };
        push(
            "MC002",
            file,
            line,
            col,
            format!(
                "setter {setter:?} is not NAMESPACE:POLICY[:tag|:name|:digest]: no setter has this name, Flux silently ignores the marker"
            ),
            fix,
        );
        return;
    };
    if site.in_list_item {
        push(
            "MC024",
            file.clone(),
            line,
            col,
            format!(
                "marker inside an item of a kind: List: Flux never updates this file. kyaml's ByteReader unwraps the List and puts the file's path annotation on the List, not on its items; when a marker changes a value, the setters filter keeps every node without a path (every item of every List under spec.update.path) and kio.LocalPackageWriter writes each to a new file <spec.update.path>/<namespace>/<kind>_<name>.yaml (this item: {}), replacing any file of that name, while this file keeps the old value (kyaml v0.21.1 byteio_reader.go, kioutil.DefaultPathAndIndexAnnotation)",
                list_item_path(&site.object)
            ),
            "split the List into plain multi-document YAML (---), which Flux rewrites in place"
                .into(),
        );
    }
    let key = t.key.clone().unwrap_or_default();
    let policy = index.get(&objects.policies, &sr.namespace, &sr.name);
    let latest = policy.and_then(|p| p.latest.as_ref());
    let would_write = |v: &str| -> String {
        let val = simulate::render_scalar(v, t.style);
        if key.is_empty() {
            format!("- {val}")
        } else {
            format!("{key}: {val}")
        }
    };
    match sr.field {
        Field::Tag => {
            if image_field(&key, &t.value) {
                let tag = latest
                    .map(|l| l.tag.clone())
                    .unwrap_or_else(|| "<tag>".into());
                push(
                    "MC003",
                    file.clone(),
                    line,
                    col,
                    format!(
                        "':tag' marker on {}: the automation replaces the whole value with the bare tag and writes `{}`, an image the node cannot pull",
                        describe_image_value(&key, &t.value),
                        would_write(&tag)
                    ),
                    format!(
                        "use the plain marker here: # {{\"$imagepolicy\": \"{}\"}} (or put :tag on a newTag/tag field)",
                        sr.policy_key()
                    ),
                );
            }
        }
        Field::Full => {
            if tagish_key(&key) {
                let full = latest
                    .map(LatestRefExt::full_ref)
                    .unwrap_or_else(|| "<name>:<tag>".into());
                push(
                    "MC004",
                    file.clone(),
                    line,
                    col,
                    format!(
                        "plain marker on `{key}:` writes the full reference `{}` into a tag field",
                        would_write(&full)
                    ),
                    format!("use # {{\"$imagepolicy\": \"{}:tag\"}}", sr.policy_key()),
                );
            }
        }
        Field::Name => {
            if has_tag_or_digest(&t.value) {
                push(
                    "MC005",
                    file.clone(),
                    line,
                    col,
                    format!(
                        "':name' marker on {:?}, which carries a tag or digest: the automation writes only the name and the tag is lost",
                        t.value
                    ),
                    format!(
                        "use the plain marker # {{\"$imagepolicy\": \"{}\"}}, or split name and tag (kustomize images: newName/newTag)",
                        sr.policy_key()
                    ),
                );
            }
        }
        Field::Digest => {
            if image_field(&key, &t.value) {
                // image-automation-controller d36e2ea internal/update/setters.go: the
                // `ns:p:digest` setter's value is status.latestRef.digest alone, and the
                // kyaml setter replaces the whole scalar with it
                let digest = latest
                    .map(|l| l.digest.clone())
                    .filter(|d| !d.is_empty())
                    .unwrap_or_else(|| "<digest>".into());
                push(
                    "MC007",
                    file.clone(),
                    line,
                    col,
                    format!(
                        "':digest' marker on {}: the automation replaces the whole value with the bare digest and writes `{}`, an image the node cannot pull",
                        describe_image_value(&key, &t.value),
                        would_write(&digest)
                    ),
                    format!(
                        "use the plain marker here: # {{\"$imagepolicy\": \"{}\"}} (it writes name:tag@digest when the ImagePolicy reflects digests), or split the fields and put :digest only on a digest field (kustomize images: newName + digest)",
                        sr.policy_key()
                    ),
                );
            }
            if let Some(l) = latest
                && l.digest.is_empty()
            {
                push(
                    "MC006",
                    file.clone(),
                    line,
                    col,
                    format!(
                        "':digest' marker but ImagePolicy {} reflects no digest: the automation writes `{}`",
                        sr.policy_key(),
                        would_write("")
                    ),
                    "enable spec.digestReflectionPolicy on the ImagePolicy, or use the :tag marker"
                        .into(),
                );
            }
        }
    }
    // Job pod template: immutable, so the apply of the change fails, unless the Flux
    // Kustomization applying it has spec.force: true (kustomize-controller then deletes and
    // recreates the Job: api/v1 KustomizationSpec.Force, "recreate resources on immutable field
    // changes")
    if site.object.kind == "Job" && t.pod_template {
        let name = |k: &&FluxKustomization| format!("{}/{}", k.namespace, k.name);
        let unforced: Vec<String> = appliers.iter().filter(|k| !k.force).map(name).collect();
        let (sev, msg) = if appliers.is_empty() {
            (
                Severity::Warning,
                format!(
                    "marker on the pod template of Job {}, which is immutable; no Flux Kustomization in this tree applies this file, so the outcome depends on the one that does: with spec.force: true Flux recreates the Job with the new image, otherwise applying the automation's commit fails with \"field is immutable\"",
                    site.object.name
                ),
            )
        } else if unforced.is_empty() {
            (
                Severity::Info,
                format!(
                    "marker on the pod template of Job {}: the template is immutable, but Kustomization {} applies it with spec.force: true, so Flux deletes and recreates the Job, which runs again with the new image",
                    site.object.name,
                    appliers.iter().map(name).collect::<Vec<_>>().join(", ")
                ),
            )
        } else {
            (
                Severity::Error,
                format!(
                    "marker on the pod template of Job {}: a Job's template is immutable, and Kustomization {} applies it without spec.force, so applying the automation's commit fails with \"field is immutable\"",
                    site.object.name,
                    unforced.join(", ")
                ),
            )
        };
        sev_next.set(Some(sev));
        push(
            "MC040",
            file.clone(),
            line,
            col,
            msg,
            "run the migration as an initContainer of the Deployment, use a CronJob, or set spec.force: true on the Flux Kustomization that applies it".into(),
        );
    }
    // policy existence / namespace / selector / path
    if objects.policies.is_empty() {
        return;
    }
    {
        if let Some(((_, n), nss)) = facts.unknown_namespaces.iter().find(|((ans, n), nss)| {
            *n == sr.name && (*ans == sr.namespace || nss.contains(&sr.namespace))
        }) {
            sev_next.set(Some(Severity::Info));
            push(
                "MC010",
                file.clone(),
                line,
                col,
                format!(
                    "ImagePolicy {n} gets its namespace from kustomize, and the kustomizations that include it give different ones ({}): whether {}/{n} exists depends on the build, not checked",
                    nss.iter()
                        .map(|x| if x.is_empty() { "none" } else { x.as_str() })
                        .collect::<Vec<_>>()
                        .join(", "),
                    sr.namespace
                ),
                "include the ImagePolicy from one kustomization, or set its namespace in one place"
                    .into(),
            );
            return;
        }
    }
    let Some(p) = policy else {
        push(
            "MC010",
            file.clone(),
            line,
            col,
            format!(
                "no ImagePolicy {}/{} found (tree, --policies, --from-cluster, --set): Flux silently ignores the marker",
                sr.namespace, sr.name
            ),
            "fix the policy name or namespace in the marker".into(),
        );
        return;
    };
    if !objects.automations.is_empty() {
        if covering.is_empty() {
            if !*outside_reported {
                *outside_reported = true;
                let paths: Vec<String> = objects
                    .automations
                    .iter()
                    .map(|a| {
                        format!(
                            "{}/{}: {:?}",
                            a.namespace,
                            a.name,
                            if a.update_path.is_empty() {
                                "."
                            } else {
                                &a.update_path
                            }
                        )
                    })
                    .collect();
                push(
                    "MC013",
                    file.clone(),
                    line,
                    col,
                    format!(
                        "file is outside every ImageUpdateAutomation spec.update.path ({}): no automation reads it",
                        paths.join(", ")
                    ),
                    "move the file under an automation's spec.update.path or widen the path".into(),
                );
            }
            return;
        }
        if !covering.iter().any(|a| a.namespace == p.namespace) {
            let nss: Vec<String> = covering
                .iter()
                .map(|a| format!("{}/{}", a.namespace, a.name))
                .collect();
            push("MC011", file.clone(), line, col,
                format!("ImagePolicy {}/{} is not in the namespace of the automation(s) covering this file ({}): automations only use policies of their own namespace", p.namespace, p.name, nss.join(", ")),
                "create the ImagePolicy in the automation's namespace, or an automation in the policy's namespace".into());
            return;
        }
        if !app.keys.contains(&(p.namespace.clone(), p.name.clone())) {
            push(
                "MC012",
                file.clone(),
                line,
                col,
                format!(
                    "ImagePolicy {}/{} is excluded by the policySelector of every automation covering this file",
                    p.namespace, p.name
                ),
                "add the selector's labels to the ImagePolicy".into(),
            );
            return;
        }
    }
    // host rewrite
    if sr.field == Field::Full {
        let repo_image = p
            .repository
            .as_ref()
            .and_then(|(ns, n)| {
                objects
                    .repositories
                    .iter()
                    .find(|r| &r.namespace == ns && &r.name == n)
            })
            .map(|r| value_name(&r.image).to_string())
            .or_else(|| latest.map(|l| l.name.clone()));
        if let Some(img) = repo_image {
            let cur = value_name(&t.value);
            // same image spelled differently (nginx vs docker.io/library/nginx): harmless
            if !cur.is_empty() && cur != img && normalize_name(cur) != normalize_name(&img) {
                let same = false;
                push("MC030", file.clone(), line, col,
                    if same {
                        format!("manifest spells the image {cur:?} but the ImageRepository is {img:?}: the automation rewrites the name to {img:?} (same image, different text)")
                    } else {
                        format!("manifest image {cur:?} differs from ImageRepository spec.image {img:?}: the automation rewrites the host/path to {img:?} (automation may rewrite tags, never hosts)")
                    },
                    "make the manifest's image name equal to ImageRepository spec.image, or use the :tag marker on a separate tag field".into());
            }
        }
    }
}

trait LatestRefExt {
    fn full_ref(&self) -> String;
}
impl LatestRefExt for crate::objects::LatestRef {
    fn full_ref(&self) -> String {
        self.full()
    }
}

fn extract_setter_guess(comment: &str) -> String {
    // the first quoted (single or double) string after the key, if any
    let l = comment.to_ascii_lowercase();
    let Some(i) = l.find("imagepolicy") else {
        return String::new();
    };
    let rest = &comment[i + "imagepolicy".len()..];
    let rest = rest.trim_start_matches(['"', '\'', ' ', ':']);
    rest.split(['"', '\'', '}', ' '])
        .next()
        .unwrap_or("")
        .to_string()
}

/// Render a unified diff (similar crate) of a file change, paths `a/FILE` and `b/FILE`, from
/// the file's bytes as they are to the bytes the automation commits, so that `git apply` and
/// `patch -p1` apply it to the checkout. A CRLF file becomes LF (kyaml `ByteReader`): every
/// line is in the diff, under a note line that says so (patch tools skip it as leading text).
pub fn unified_diff(c: &FileChange) -> String {
    let d = similar::TextDiff::from_lines(&c.old, &c.new);
    let mut out = String::new();
    if c.old.contains("\r\n") {
        out.push_str(&format!("# {}: CRLF line endings become LF\n", c.file));
    }
    let (a, b) = diff_header_paths(&c.file);
    out.push_str(
        &d.unified_diff()
            .context_radius(3)
            .header(&a, &b)
            .to_string(),
    );
    out
}

/// The `--- a/PATH` / `+++ b/PATH` names of a diff, so that `git apply` and `patch -p1` both
/// apply it: an absolute path is written relative to `/` (`a/tmp/x.yaml`, apply from `/`),
/// not `a//tmp/x.yaml`; a name with a blank ends in a TAB, as git's own diff writes it
/// (diff.c, "for GNU patch"), so that GNU patch reads the whole name.
pub fn diff_header_paths(file: &str) -> (String, String) {
    let rel = file.trim_start_matches('/');
    let tab = if rel.contains([' ', '\t']) { "\t" } else { "" };
    (format!("a/{rel}{tab}"), format!("b/{rel}{tab}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yamltree::Style;

    fn rep(start: usize, end: usize, value: &str, style: Style) -> simulate::Replacement {
        simulate::Replacement {
            start,
            end,
            value: value.into(),
            style,
        }
    }

    /// The piecewise comparison agrees with building the replaced text (the way it was
    /// computed before), and leaves touching ranges to the caller.
    #[test]
    fn values_replaced_equals_agrees_with_the_built_text() {
        let text = "a: x:1\nb: 'y:2'\nc: z\n";
        let reps = vec![
            rep(10, 15, "y:3", Style::SingleQuoted),
            rep(3, 6, "x:2", Style::Plain),
        ];
        let built = {
            let mut t = text.to_string();
            let mut rs = reps.clone();
            rs.sort_by_key(|r| std::cmp::Reverse(r.start));
            for r in &rs {
                t.replace_range(r.start..r.end, &simulate::render_scalar(&r.value, r.style));
            }
            t
        };
        assert_eq!(built, "a: x:2\nb: 'y:3'\nc: z\n");
        assert_eq!(values_replaced_equals(text, &reps, &built), Some(true));
        for other in [
            "a: x:2\nb: 'y:3'\nc: z",
            "a: x:2\nb: 'y:3'\nc: z\n\n",
            "a: x:2\nb: y:3\nc: z\n",
            "",
        ] {
            assert_eq!(
                values_replaced_equals(text, &reps, other),
                Some(false),
                "{other:?}"
            );
        }
        assert_eq!(values_replaced_equals(text, &[], text), Some(true));
        let touching = vec![rep(3, 6, "1", Style::Plain), rep(6, 7, "2", Style::Plain)];
        assert_eq!(values_replaced_equals(text, &touching, text), None);
    }
}
