//! The whole run: scan the trees, gather policies/automations, apply the lint rules and
//! simulate what the automation would commit.

use crate::objects::{ImagePolicy, ImageUpdateAutomation, Objects, merge_policies};
use crate::scan::{self, ScanResult};
use crate::simulate;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod file_rules;
mod object_rules;
mod site_rules;

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

/// An image reference without its `:tag` and `@digest` (the tag is a `:` after the last
/// `/`): `registry:5000/app:1.2@sha256:..` -> `registry:5000/app`.
pub fn value_name(v: &str) -> &str {
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

/// An image name as go-containerregistry normalises it (`name.ParseReference` defaults):
/// `nginx` and `docker.io/nginx` -> `docker.io/library/nginx`, `index.docker.io/x/y` ->
/// `docker.io/x/y`; a name with a registry host (a first part with `.` or `:`, or
/// `localhost`) is kept.
pub fn normalize_name(n: &str) -> String {
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
pub fn run_scanned(cfg: &Config, scan: impl FnMut(&Path) -> ScanResult) -> Report {
    let mut report = Report::default();
    let mut scans = scan_paths(cfg, scan, &mut report);
    name_roots(cfg, &mut scans, &mut report);
    let (mut objects, facts) = tree_objects(cfg, &scans);
    // the trees of the files were read (objects, kustomize structure); from here on only the
    // simulation reads a file's tree, parsed again for the files it rewrites
    for s in &mut scans {
        for f in &mut s.res.files {
            f.drop_trees();
        }
    }
    let flux_versions = pinned_flux_versions(&scans);
    merge_policies(&mut objects.policies, cfg.extra.policies.clone());
    objects.repositories.extend(cfg.extra.repositories.clone());
    objects.automations.extend(cfg.extra.automations.clone());
    merge_policies(&mut objects.policies, cfg.sets.clone());

    let mut out = Sink::default();
    object_rules::automations(&objects, &scans, &flux_versions, &mut out);
    object_rules::removed_apis(&objects, &scans, &flux_versions, &mut out);
    object_rules::repositories(&objects, &scans, &mut out);
    object_rules::policies(&objects, &mut out);
    file_rules::check_files(cfg, &scans, &objects, &facts, &mut report, &mut out);

    let mut findings = out.findings;
    findings.sort_by(|a, b| {
        (&a.file, a.line, a.column, a.rule).cmp(&(&b.file, b.line, b.column, b.rule))
    });
    report.findings = findings;
    report.objects = objects;
    report
}

/// The findings of a run, in the order the rules push them (the run sorts them at the end).
/// A rule whose severity depends on the tree (MC010, MC040, MC050, MC051: spec.force, the
/// pinned Flux version) sets it with [`Sink::severity`] for the next finding pushed.
#[derive(Default)]
struct Sink {
    findings: Vec<Finding>,
    next: Option<Severity>,
}

impl Sink {
    /// A severity other than the rule's default for the next finding pushed.
    fn severity(&mut self, s: Severity) {
        self.next = Some(s);
    }

    /// Adds a finding of rule `id` ([`RULES`]) at `file:line:column`.
    fn push(
        &mut self,
        id: &'static str,
        file: String,
        line: usize,
        column: usize,
        message: String,
        fix: String,
    ) {
        let mut f = finding(id, file, line, column, message, fix);
        if let Some(s) = self.next.take() {
            f.severity = s;
        }
        self.findings.push(f);
    }
}

/// Scans each path of `cfg.paths` with `scan` and finds the repository root its relative paths
/// resolve against (`--repo-root`, else the git root; empty when there is none).
fn scan_paths(
    cfg: &Config,
    mut scan: impl FnMut(&Path) -> ScanResult,
    report: &mut Report,
) -> Vec<Scanned> {
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
            None => crate::repo::git_root_of(&base).unwrap_or_default(),
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
    scans
}

/// Names the repository roots in `report.roots`; outside a git checkout, sets every scan's
/// root to the tree root (with a note).
fn name_roots(cfg: &Config, scans: &mut [Scanned], report: &mut Report) {
    for s in scans.iter() {
        let why = if cfg.repo_root.is_some() {
            "--repo-root".to_string()
        } else if s.repo_root.as_os_str().is_empty() {
            continue;
        } else {
            format!("git root of {}", display_dir(&s.root))
        };
        let r = format!("{} ({why})", display_dir(&s.repo_root));
        if !report.roots.contains(&r) {
            report.roots.push(r);
        }
    }
    // Outside a git checkout, spec.update.path is taken from the shared rule
    // (crate::repo::root_outside_git, as fleetlint): the common directory of the PATHs, or
    // the current directory above them when more of the tree's own Flux paths resolve from it.
    if !scans.iter().any(|s| s.repo_root.as_os_str().is_empty()) {
        return;
    }
    let dirs: Vec<PathBuf> = scans
        .iter()
        .filter(|s| s.repo_root.as_os_str().is_empty())
        .map(|s| s.base.clone())
        .collect();
    let top = crate::repo::root_outside_git(&dirs).unwrap_or_default();
    let cwd = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .is_ok_and(|c| c == top);
    report.roots.push(format!(
        "{} ({}: no .git above it)",
        display_dir(&top),
        if cwd {
            "the current directory: more of the tree's Flux paths resolve from it"
        } else if dirs.len() == 1 {
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

/// The objects found in the scanned trees (none with `cfg.ignore_tree_objects`).
fn tree_objects(cfg: &Config, scans: &[Scanned]) -> (Objects, crate::objects::TreeFacts) {
    let mut objects = Objects::default();
    let mut facts = crate::objects::TreeFacts::default();
    if !cfg.ignore_tree_objects {
        for s in scans {
            let (o, f) = Objects::from_files_in_tree(&s.res.files, &s.tree, &cfg.default_namespace);
            facts.kustomizations.extend(f.kustomizations);
            facts.unknown_namespaces.extend(f.unknown_namespaces);
            merge_policies(&mut objects.policies, o.policies);
            objects.repositories.extend(o.repositories);
            objects.automations.extend(o.automations);
            objects.removed_api.extend(o.removed_api);
        }
    }
    (objects, facts)
}

/// Flux versions pinned in the trees (gotk-components.yaml headers), oldest first: (parsed,
/// as written, file).
fn pinned_flux_versions(scans: &[Scanned]) -> Vec<((u32, u32, u32), String, String)> {
    let mut flux_versions: Vec<((u32, u32, u32), String, String)> = Vec::new();
    for s in scans {
        for (rel, v) in &s.res.flux_versions {
            if let Some(pv) = parse_version(v) {
                flux_versions.push((pv, v.clone(), display(&s.base.join(rel))));
            }
        }
    }
    flux_versions.sort();
    flux_versions
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
