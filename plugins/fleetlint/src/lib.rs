//! fleetlint engine: prove a Flux fleet repository offline, reading it the way Flux would.
//!
//! [`run`] loads the tree ([`tree::Repo`]), finds the overlays ([`fleet::find_overlays`]),
//! renders every directory a Flux Kustomization reaches with real `kubectl kustomize`
//! ([`render::Renderer`]: parallel, cached by input content), applies post-build substitution
//! as kustomize-controller does ([`envsubst`]) and runs the rule families ([`lint`], markers
//! through markercheck's library).
#![forbid(unsafe_code)]

/// Post-build substitution (`cluster_loop::envsubst`, shared with the twin's Flux model).
pub use cluster_loop::envsubst;
pub mod config;
pub mod fleet;
pub mod kustomize_fields;
pub mod lint;
pub mod render;
pub mod report;
pub mod rules;
pub mod run;
pub mod sourceignore;
pub mod tree;
pub mod verdict;

use lint::Finding;
use rules::Severity;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Inputs of a run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The tree to lint (a directory).
    pub path: PathBuf,
    /// Repository root Flux paths are relative to (default: nearest `.git` above `path`, else
    /// `path`).
    pub repo_root: Option<PathBuf>,
    /// Overlay directories (paths as given, resolved against the current directory); empty:
    /// every overlay found.
    pub overlays: Vec<PathBuf>,
    /// Rule options.
    pub options: lint::Options,
    /// `--changed-since REV`.
    pub changed_since: Option<String>,
    /// Parallel renders.
    pub jobs: usize,
    /// On-disk render cache (`None`: in memory only).
    pub cache_dir: Option<PathBuf>,
    /// The kubectl command.
    pub kubectl: String,
    /// Run markercheck's rules.
    pub markers: bool,
    /// Live counters for a progress line (`None`: none kept).
    pub progress: Option<std::sync::Arc<RunProgress>>,
    /// `--placeholder` was given (it wins over `.fleetlint.yaml`'s `placeholder`).
    pub placeholder_given: bool,
    /// Time and memory bounds of each `kubectl kustomize` run (`--render-timeout`,
    /// `--render-memory`).
    pub render_bounds: render::RenderBounds,
}

/// Phases of a run, as [`RunProgress::phase`] holds them.
pub mod phase {
    /// Walking and reading the tree.
    pub const WALK: u8 = 0;
    /// Rendering the overlay candidates ([`crate::fleet::find_overlays`]).
    pub const DISCOVER: u8 = 1;
    /// Building and linting the overlays.
    pub const OVERLAYS: u8 = 2;
    /// Waiting for markercheck's rules.
    pub const MARKERS: u8 = 3;
}

/// Live counters of a run, written by [`run`] and read by a progress line (the binary's, on
/// stderr): phase ([`phase`]), YAML files read by the walk, renders asked and finished (from
/// the cache or by `kubectl kustomize`), overlays found and linted. All counts only grow.
#[derive(Debug, Default)]
pub struct RunProgress {
    /// One of [`phase`].
    pub phase: std::sync::atomic::AtomicU8,
    /// YAML files the walk has read.
    pub files: std::sync::atomic::AtomicUsize,
    /// Renders asked of the renderer (memoised ones not counted).
    pub renders_asked: std::sync::atomic::AtomicUsize,
    /// Renders finished.
    pub renders_done: std::sync::atomic::AtomicUsize,
    /// Overlays to lint.
    pub overlays_total: std::sync::atomic::AtomicUsize,
    /// Overlays linted.
    pub overlays_done: std::sync::atomic::AtomicUsize,
}

impl RunProgress {
    /// One status line, e.g. `walking /tmp: 12345 YAML files read`, `finding overlays:
    /// 3/7 renders`, `overlay 2/3: 9/12 renders`. `coarse`: only what changes seldom (the
    /// phase, the overlay number, the file count in steps of 10000, renders done in quarters of
    /// those asked), for progress printed as one plain line per change.
    pub fn status(&self, path: &str, coarse: bool) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let renders = || {
            let (done, asked) = (
                self.renders_done.load(Relaxed),
                self.renders_asked.load(Relaxed),
            );
            if !coarse {
                return format!(": {done}/{asked} renders");
            }
            // in quarters, so a plain line is printed at most five times per phase
            match (done * 4).checked_div(asked) {
                Some(quarters) => format!(": {} of {asked} renders done", quarters * asked / 4),
                None => String::new(),
            }
        };
        match self.phase.load(Relaxed) {
            phase::WALK => {
                let n = self.files.load(Relaxed);
                if !coarse {
                    format!("walking {path}: {n} YAML files read")
                } else if n >= 10_000 {
                    format!(
                        "walking {path}: over {} YAML files read",
                        n / 10_000 * 10_000
                    )
                } else {
                    format!("walking {path}")
                }
            }
            phase::DISCOVER => format!("finding overlays{}", renders()),
            phase::OVERLAYS => format!(
                "overlay {}/{}{}",
                (self.overlays_done.load(Relaxed) + 1).min(self.overlays_total.load(Relaxed)),
                self.overlays_total.load(Relaxed),
                renders()
            ),
            _ => "marker rules".to_string(),
        }
    }

    fn set_phase(p: &Option<std::sync::Arc<RunProgress>>, ph: u8) {
        if let Some(p) = p {
            p.phase.store(ph, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: ".".into(),
            repo_root: None,
            overlays: vec![],
            options: lint::Options::default(),
            changed_since: None,
            jobs: std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .min(8),
            cache_dir: render::default_cache_dir(),
            kubectl: "kubectl".into(),
            markers: true,
            progress: None,
            placeholder_given: false,
            render_bounds: render::RenderBounds::default(),
        }
    }
}

/// Why a run could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// Bad input (exit 2): a path that does not exist, an overlay outside the tree, an
    /// unknown revision.
    Usage(String),
    /// Anything else (exit 1 with the message).
    Other(String),
}

/// One Kustomization in the report's graph.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphNode {
    /// `namespace/name`.
    pub id: String,
    /// Defining file and line.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// `spec.path` as written.
    pub path: Option<String>,
    /// `Kind/namespace/name` of the sourceRef.
    pub source_ref: String,
    /// dependsOn as `namespace/name`.
    pub depends_on: Vec<String>,
    /// `spec.wait`.
    pub wait: bool,
    /// `GetTimeout()` as a Go duration.
    pub timeout: String,
    /// Worst case until Ready (its timeout plus the longest dependency chain), Go duration.
    pub timeout_chain: String,
    /// `spec.targetNamespace`.
    pub target_namespace: Option<String>,
    /// `postBuild` present.
    pub post_build: bool,
    /// Variables available to its substitution.
    pub variables: Vec<String>,
    /// Its path is in this repository and was rendered.
    pub followed: bool,
    /// The Kustomization whose render applies it.
    pub applied_by: Option<String>,
    /// Affected by `--changed-since` (always true without it).
    pub affected: bool,
    /// fleetlint's verdict on its build ([`verdict::decide`]).
    pub build: verdict::BuildVerdict,
    /// `spec` as its parent applies it ([`fleet::FluxKs::spec`]; library only).
    #[serde(skip)]
    pub spec: std::sync::Arc<serde_json::Value>,
    /// The repository directory fleetlint built for it ([`fleet::FluxKs::dir`]: `spec.path`
    /// of the root source, or the directory an ArtifactGenerator packs; library only).
    #[serde(skip)]
    pub dir: Option<String>,
    /// Its `postBuild.substituteFrom` inputs and the objects the overlay applies for them
    /// (library only).
    #[serde(skip)]
    pub inputs: Vec<verdict::SubstituteInput>,
}

/// One overlay in the report.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverlayReport {
    /// Repository-relative directory.
    pub dir: String,
    /// The root Kustomization (`namespace/name`).
    pub root: Option<String>,
    /// Every Kustomization, discovery order.
    pub kustomizations: Vec<GraphNode>,
    /// Objects applied (after rendering).
    pub objects: usize,
    /// False when the overlay's own directory does not render (FL001): nothing of it was
    /// linted.
    pub rendered: bool,
}

/// Counters.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// YAML files read.
    pub files: usize,
    /// Directories with a kustomization file.
    pub kustomize_dirs: usize,
    /// `kubectl kustomize` processes run (the rest came from the cache).
    pub renders_run: usize,
    /// Flux Kustomizations across overlays.
    pub kustomizations: usize,
    /// Of those, the ones whose findings are reported: all of them without `--changed-since`,
    /// with it the Kustomizations the change affects.
    pub affected: usize,
    /// Overlay candidates rendered during discovery (0 with `--overlay`).
    pub candidates: usize,
    /// Findings suppressed by `.fleetlint.yaml` or an inline `# fleetlint:ignore` (listed in
    /// [`Report::suppressed`]).
    pub suppressed: usize,
    /// YAML files source-controller leaves out of the artifact (its default exclusions and
    /// `.sourceignore`), not read.
    pub excluded_files: usize,
}

/// Result of a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Repository root.
    pub root: PathBuf,
    /// Overlays.
    pub overlays: Vec<OverlayReport>,
    /// Findings, sorted by file, line, rule.
    pub findings: Vec<Finding>,
    /// Counters.
    pub stats: Stats,
    /// With `--changed-since`: the changed files (repository-relative).
    pub changed_files: Option<Vec<String>>,
    /// Notes for the reader (e.g. which directory was taken as the repository root).
    pub notes: Vec<String>,
    /// Findings suppressed by the configuration or inline comments, with what suppressed
    /// each.
    pub suppressed: Vec<config::Suppressed>,
    /// Sources read and not applied by an overlay, per overlay directory.
    pub external_sources: Vec<(String, fleet::ExternalSource)>,
}

impl Report {
    /// True when a finding has severity error.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Files changed since `rev` in the repository at `root`: `git diff --name-only REV --`
/// (committed and uncommitted changes) plus untracked files.
///
/// Errors: [`RunError::Usage`] when git fails (not a repository, unknown revision).
pub fn changed_files(root: &Path, rev: &str) -> Result<BTreeSet<String>, RunError> {
    if rev.starts_with('-') {
        return Err(RunError::Usage(format!(
            "--changed-since {rev:?}: a revision cannot start with '-'"
        )));
    }
    // both git commands at once (each is a process start and an index read)
    let start = |args: &'static [&'static str]| -> Result<_, RunError> {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .args(if args[0] == "diff" {
                vec![rev, "--"]
            } else {
                vec![]
            })
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map(|c| (args, c))
            .map_err(|e| RunError::Other(format!("cannot run git: {e}")))
    };
    let finish = |(args, child): (&[&str], std::process::Child)| -> Result<String, RunError> {
        let o = child
            .wait_with_output()
            .map_err(|e| RunError::Other(format!("cannot run git: {e}")))?;
        if !o.status.success() {
            let shown: Vec<&str> = if args[0] == "diff" {
                args.iter().copied().chain([rev, "--"]).collect()
            } else {
                args.to_vec()
            };
            return Err(RunError::Usage(format!(
                "--changed-since {rev}: git {} failed in {}: {}",
                shown.join(" "),
                root.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let diff = start(&["diff", "--name-only", "--no-renames"])?;
    let untracked = start(&["ls-files", "--others", "--exclude-standard"]);
    let diff = finish(diff);
    let untracked = untracked.and_then(finish);
    let mut out: BTreeSet<String> = diff?.lines().map(str::to_string).collect();
    out.extend(untracked?.lines().map(str::to_string));
    Ok(out)
}

/// Runs fleetlint.
///
/// Errors: [`RunError::Usage`] for a path/overlay/revision that cannot be used.
pub fn run(cfg: &Config) -> Result<Report, RunError> {
    if let Some(problem) = cluster_loop::repo::directory_problem(&cfg.path) {
        return Err(RunError::Usage(format!(
            "{problem} (PATH is a Git checkout or a directory of a fleet repository)"
        )));
    }
    let mut notes = Vec::new();
    let root = repo_root(cfg, &mut notes);
    let root = std::fs::canonicalize(&root)
        .map_err(|e| RunError::Usage(format!("{}: {e}", root.display())))?;
    let scope = std::fs::canonicalize(&cfg.path)
        .map_err(|e| RunError::Usage(format!("{}: {e}", cfg.path.display())))?;
    if !scope.starts_with(&root) {
        return Err(RunError::Usage(format!(
            "{} is not inside the repository root {}",
            cfg.path.display(),
            root.display()
        )));
    }
    let file_config = config::FileConfig::load(&root).map_err(RunError::Usage)?;
    let mut options = cfg.options.clone();
    if !cfg.placeholder_given
        && let Some(p) = &file_config.placeholder
    {
        lint::placeholder_regex(p)
            .map_err(|e| RunError::Usage(format!("{}: placeholder: {e}", config::FILE)))?;
        options.placeholder = p.clone();
    }
    // `git diff` runs beside the walk of the tree (its errors still come first)
    let git = cfg.changed_since.clone().map(|rev| {
        let root = root.clone();
        std::thread::spawn(move || changed_files(&root, &rev))
    });
    type ChangedFiles = Result<BTreeSet<String>, RunError>;
    let git_result = |git: Option<std::thread::JoinHandle<ChangedFiles>>| match git {
        Some(h) => h
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            .map(Some),
        None => Ok(None),
    };
    // usage errors first (before any thread starts)
    let overlay_dirs = match overlay_args(cfg, &root) {
        Ok(dirs) => dirs,
        Err(e) => {
            git_result(git)?;
            return Err(e);
        }
    };
    // markercheck's rules run on their own thread beside the overlays; its stack is
    // markercheck's deep one, as in its own binary
    let mc_cfg = cfg.markers.then(|| markercheck::check::Config {
        paths: vec![scope.clone()],
        default_namespace: "flux-system".into(),
        max_file_size: markercheck::scan::DEFAULT_MAX_FILE_SIZE,
        repo_root: Some(root.clone()),
        ..Default::default()
    });
    let load_error = |e: std::io::Error| RunError::Usage(format!("{}: {e}", cfg.path.display()));
    std::thread::scope(|s| {
        let (markers, repo, changed) = match &mc_cfg {
            Some(c) => {
                // one walk and one read of every file for both: markercheck's parallel scan
                // hands back the bytes of the YAML files it read
                let counted = |n: &str| {
                    let yaml = tree::yaml_name(n);
                    if yaml && let Some(p) = &cfg.progress {
                        p.files.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    yaml
                };
                let (scan, kept) =
                    markercheck::scan::scan_root_keeping(&scope, c.max_file_size, counted);
                let changed = git_result(git)?;
                let (files, unreadable) = shared_files(&root, &scope, &scan, kept);
                let mut scan = Some(scan);
                let markers = std::thread::Builder::new()
                    .stack_size(markercheck::scan::DEEP_STACK)
                    .spawn_scoped(s, move || {
                        markercheck::check::run_scanned(c, |_| scan.take().unwrap_or_default())
                    })
                    .map_err(|e| RunError::Other(format!("cannot start a thread: {e}")))?;
                let repo = tree::Repo::from_files(
                    &root,
                    &scope,
                    files,
                    &unreadable,
                    cfg.cache_dir.as_deref(),
                )
                .map_err(load_error)?;
                (Some(markers), repo, changed)
            }
            None => {
                let repo = tree::Repo::load_counted(
                    &root,
                    &scope,
                    cfg.cache_dir.as_deref(),
                    cfg.progress.as_deref().map(|p| &p.files),
                )
                .map_err(load_error)?;
                (None, repo, git_result(git)?)
            }
        };
        let renderer = render::Renderer::new(&cfg.kubectl, cfg.cache_dir.clone())
            .with_bounds(cfg.render_bounds)
            .with_progress(cfg.progress.clone());
        let mut report = Report {
            root: root.clone(),
            notes,
            ..Default::default()
        };
        let (repo, overlay_dirs, unrendered) =
            overlays_to_lint(cfg, repo, &renderer, overlay_dirs, &mut report)
                .map_err(load_error)?;
        let mut built = build_overlays(cfg, &repo, &renderer, &overlay_dirs, &unrendered);
        let checkout_runs = render_checkouts(cfg, &mut built)?;
        for ov in &built {
            overlay_report(&repo, ov, &options, changed.as_ref(), &mut report);
        }
        if let Some(mc) = markers {
            RunProgress::set_phase(&cfg.progress, phase::MARKERS);
            let mc = mc
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            marker_findings(mc, &root, changed.as_ref(), &mut report);
        }
        report.findings.sort();
        report.findings.dedup();
        report.suppressed = file_config.apply(&root, &mut report.findings, |f| {
            repo.texts.get(f).map(|t| &**t)
        });
        report.stats.suppressed = report.suppressed.len();
        report.stats.excluded_files = repo.excluded.len();
        for ov in &built {
            for e in &ov.external {
                report.external_sources.push((ov.dir.clone(), e.clone()));
            }
        }
        report.stats.files = repo.texts.len();
        report.stats.kustomize_dirs = repo.kustomize_dirs.len();
        report.stats.renders_run =
            renderer.runs.load(std::sync::atomic::Ordering::Relaxed) + checkout_runs;
        renderer.save_pack();
        report.changed_files = changed.map(|c| c.into_iter().collect());
        Ok(report)
    })
}

/// The overlays to lint: `overlay_dirs` (`--overlay`), else the ones found in `repo`, and the
/// candidates that did not render; with the repository read whole when one of them reads files
/// outside PATH. Errors: reading the repository.
fn overlays_to_lint(
    cfg: &Config,
    repo: tree::Repo,
    renderer: &render::Renderer,
    mut overlay_dirs: Vec<String>,
    report: &mut Report,
) -> std::io::Result<(tree::Repo, Vec<String>, Vec<String>)> {
    let root = &report.root;
    let mut unrendered = Vec::new();
    if overlay_dirs.is_empty() {
        RunProgress::set_phase(&cfg.progress, phase::DISCOVER);
        let found = fleet::find_overlays(&repo, renderer, cfg.jobs);
        overlay_dirs = found.overlays;
        unrendered = found.unrendered;
        report.stats.candidates = found.candidates;
    }
    // an overlay below PATH that reads files outside it (`fleetlint clusters/dev`, its
    // base in clusters/base): its rules need those files parsed (positions, raw
    // documents, the inputs of every Kustomization it applies), so the repository is read
    // whole for them; markercheck's rules still cover PATH only
    let repo = if !repo.scope.is_empty()
        && overlay_dirs
            .iter()
            .chain(&unrendered)
            .any(|d| repo.closure(d).iter().any(|f| !repo.in_scope(f)))
    {
        report.notes.push(format!(
            "the overlays under {} read files outside it: the repository {} is read for their rules (marker rules cover {} only)",
            cfg.path.display(),
            root.display(),
            cfg.path.display()
        ));
        RunProgress::set_phase(&cfg.progress, phase::WALK);
        tree::Repo::load_counted(
            root,
            root,
            cfg.cache_dir.as_deref(),
            cfg.progress.as_deref().map(|p| &p.files),
        )?
    } else {
        repo
    };
    Ok((repo, overlay_dirs, unrendered))
}

/// The repository root: `--repo-root`, the Git root above PATH, else (outside a Git checkout)
/// the current directory when PATH is below it, or PATH itself, said in a note.
fn repo_root(cfg: &Config, notes: &mut Vec<String>) -> PathBuf {
    match &cfg.repo_root {
        Some(r) => r.clone(),
        None => match markercheck::repo::git_root_of(&cfg.path) {
            Some(r) => r,
            None => {
                // Outside a Git checkout (a CI export, a tarball): the shared rule (the current
                // directory when PATH is below it, else PATH itself); and say so, since every
                // spec.path is resolved from it.
                let r = markercheck::repo::root_outside_git(std::slice::from_ref(&cfg.path))
                    .unwrap_or_else(|| cfg.path.clone());
                notes.push(format!(
                "no .git above {}: Kustomization spec.path and spec.update.path are taken relative to {} (set the repository root with --repo-root)",
                cfg.path.display(),
                r.display()
            ));
                r
            }
        },
    }
}

/// The `--overlay` directories, repository-relative; the first that is not a directory inside
/// the repository `root` is a usage error.
fn overlay_args(cfg: &Config, root: &Path) -> Result<Vec<String>, RunError> {
    let mut overlay_dirs = Vec::new();
    for o in &cfg.overlays {
        let checked = std::fs::canonicalize(o)
            .map_err(|e| {
                RunError::Usage(format!(
                    "--overlay {}: {e} (an overlay is a cluster directory such as clusters/prod)",
                    o.display()
                ))
            })
            .and_then(|abs| {
                if !abs.starts_with(root) || !abs.is_dir() {
                    Err(RunError::Usage(format!(
                        "--overlay {}: not a directory inside the repository {}",
                        o.display(),
                        root.display()
                    )))
                } else {
                    Ok(abs)
                }
            });
        overlay_dirs.push(tree::rel(root, &checked?));
    }
    Ok(overlay_dirs)
}

/// The overlays found, then every candidate that did not render and that no overlay reaches
/// (an overlay that reaches it reports its render error under its Kustomization): linted as
/// an overlay, which reports the failure (FL001). Sorted by directory.
fn build_overlays(
    cfg: &Config,
    repo: &tree::Repo,
    renderer: &render::Renderer,
    overlay_dirs: &[String],
    unrendered: &[String],
) -> Vec<fleet::Overlay> {
    RunProgress::set_phase(&cfg.progress, phase::OVERLAYS);
    if let Some(p) = &cfg.progress {
        p.overlays_total.store(
            overlay_dirs.len() + unrendered.len(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    let mut built: Vec<fleet::Overlay> = overlay_dirs
        .iter()
        .map(|dir| {
            let ov = fleet::build_overlay(repo, renderer, dir, cfg.jobs);
            if let Some(p) = &cfg.progress {
                p.overlays_done
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            ov
        })
        .collect();
    for dir in fleet::unrendered_to_report(repo, unrendered, &built) {
        let mut ov = fleet::build_overlay(repo, renderer, &dir, cfg.jobs);
        ov.unconfirmed = true;
        built.push(ov);
    }
    if let Some(p) = &cfg.progress {
        p.overlays_done
            .fetch_add(unrendered.len(), std::sync::atomic::Ordering::Relaxed);
    }
    built.sort_by(|a, b| a.dir.cmp(&b.dir));
    built
}

/// `--source KIND/NS/NAME=PATH`: each Kustomization reading a mapped external source has its
/// `spec.path` rendered in the checkout, as kustomize-controller builds it from that source's
/// artifact: the checkout read with source-controller's ignore rules (the default excludes and
/// `.sourceignore`), the Kustomization's own kustomize fields and `spec.targetNamespace`
/// applied. A failed render goes to [`fleet::Overlay::checkout_errors`] (FL001); a path the
/// checkout lacks is FL002 (`lint::mapped_paths`), not rendered. What the render applies is
/// not linted further (its own Flux Kustomizations are not followed). A checkout that cannot
/// be read is a render error naming it. Returns the `kubectl kustomize` runs it made.
///
/// Errors: usage (exit 2) for a `--source` that no linted Kustomization reads as an external
/// source (trial4: a typo, a wrong kind or a source the tree defines was ignored, "0 errors").
fn render_checkouts(cfg: &Config, built: &mut [fleet::Overlay]) -> Result<usize, RunError> {
    type Checkout = std::result::Result<(tree::Repo, render::Renderer), String>;
    let mut loaded: std::collections::BTreeMap<PathBuf, Checkout> = Default::default();
    unmatched_sources(cfg, built)?;
    for ov in built.iter_mut() {
        let mut errors = Vec::new();
        for e in &ov.external {
            let Some(co) = cfg.options.checkout(&e.id) else {
                continue;
            };
            let entry = loaded.entry(co.to_path_buf()).or_insert_with(|| {
                tree::Repo::load_counted(co, co, cfg.cache_dir.as_deref(), None)
                    .map(|r| {
                        let renderer = render::Renderer::new(&cfg.kubectl, cfg.cache_dir.clone())
                            .with_bounds(cfg.render_bounds);
                        (r, renderer)
                    })
                    .map_err(|err| {
                        format!(
                            "the --source checkout {} cannot be read: {err}",
                            co.display()
                        )
                    })
            });
            for &i in &e.readers {
                let k = &ov.ks[i];
                let Some(dir) = tree::normalize(k.path.as_deref().unwrap_or("./")) else {
                    continue;
                };
                if !co.join(&dir).is_dir() {
                    continue;
                }
                let unit = render::Unit {
                    dir,
                    target_namespace: k.target_namespace.clone(),
                    kustomize: k
                        .kustomize
                        .as_ref()
                        .map(kustomize_fields::KustomizeFields::to_json),
                };
                let message = match entry {
                    Err(m) => Some(m.clone()),
                    // A listed file the artifact leaves out fails the controller's build,
                    // whatever the working tree renders (trial4).
                    Ok((repo, _)) if let Some(f) = left_out_input(repo, &unit) => Some(format!(
                        "its kustomization lists {f}, which source-controller leaves out of the artifact (its default excludes or a .sourceignore), so kustomize-controller's build fails"
                    )),
                    Ok((repo, renderer)) => renderer
                        .render_all(repo, std::slice::from_ref(&unit), 1)
                        .get(&unit)
                        .and_then(|r| r.result.as_ref().err().cloned()),
                };
                if let Some(message) = message {
                    errors.push(fleet::RenderError {
                        unit,
                        ks: Some(i),
                        message,
                    });
                }
            }
        }
        ov.checkout_errors = errors;
    }
    Ok(loaded
        .values()
        .filter_map(|c| c.as_ref().ok())
        .map(|(_, r)| r.runs.load(std::sync::atomic::Ordering::Relaxed))
        .sum())
}

/// A file a render of `u` reads that source-controller leaves out of the artifact
/// ([`tree::Repo::excluded`]), when there is one.
fn left_out_input(repo: &tree::Repo, u: &render::Unit) -> Option<String> {
    let excluded: std::collections::BTreeSet<&str> =
        repo.excluded.iter().map(String::as_str).collect();
    render::unit_inputs(repo, u)
        .into_iter()
        .find(|f| excluded.contains(f.as_str()))
}

/// Each `--source` must name a source some linted Kustomization reads and the tree does not
/// make (matched as [`lint::Options::checkout`] matches). Errors: usage, naming the mapping and
/// the external sources there are.
fn unmatched_sources(cfg: &Config, built: &[fleet::Overlay]) -> Result<(), RunError> {
    let external: Vec<&str> = built
        .iter()
        .flat_map(|ov| ov.external.iter().map(|e| e.id.as_str()))
        .collect();
    for (src, path) in &cfg.options.sources {
        let hit = external.iter().any(|id| lint::source_matches(src, id));
        if !hit {
            let mut known: Vec<&str> = external.clone();
            known.sort();
            known.dedup();
            return Err(RunError::Usage(format!(
                "--source {src}={}: no linted Kustomization reads a source of that name made outside this tree ({}); a source the tree defines is rendered from the tree",
                path.display(),
                if known.is_empty() {
                    "none is read".to_string()
                } else {
                    format!("the external sources: {}", known.join(", "))
                }
            )));
        }
    }
    Ok(())
}

/// The findings of one overlay (only those `changed` affects, with `--changed-since`) and its
/// Kustomization graph, into `report`.
fn overlay_report(
    repo: &tree::Repo,
    ov: &fleet::Overlay,
    options: &lint::Options,
    changed: Option<&BTreeSet<String>>,
    report: &mut Report,
) {
    let dir = &ov.dir;
    let mut findings = lint::lint_overlay(repo, ov, options);
    let chains = lint::timeout_chains(ov);
    // --changed-since: the Kustomizations whose inputs changed, their descendants and
    // their dependents
    let affected: BTreeSet<String> = match &changed {
        None => ov.ks.iter().map(fleet::FluxKs::id).collect(),
        Some(ch) => affected_ks(repo, ov, ch),
    };
    // an overlay whose own directory does not render is reported whatever changed:
    // none of it could be linted, so nothing shows the change is safe
    let unrendered_root = |f: &Finding| f.rule == "FL001" && f.kustomizations.is_empty();
    // the build verdicts read every finding of the overlay, before the filter
    let kustomizations = graph_nodes(ov, &chains, &affected, &findings);
    if let Some(ch) = &changed {
        findings.retain(|f| {
            f.kustomizations.iter().any(|k| affected.contains(k))
                || ch.contains(&f.file)
                || unrendered_root(f)
        });
    }
    report.stats.kustomizations += ov.ks.len();
    report.stats.affected += affected.len();
    report.overlays.push(OverlayReport {
        dir: dir.clone(),
        root: ov.root.map(|r| ov.ks[r].id()),
        kustomizations,
        objects: ov.objects.len(),
        rendered: !ov.render_errors.iter().any(|e| e.ks.is_none()),
    });
    report.findings.extend(findings);
}

/// The overlay's Kustomizations in graph order, as the report shows them.
fn graph_nodes(
    ov: &fleet::Overlay,
    chains: &[std::time::Duration],
    affected: &BTreeSet<String>,
    findings: &[Finding],
) -> Vec<GraphNode> {
    graph_order(ov)
        .into_iter()
        .map(|i| (i, &ov.ks[i]))
        .map(|(i, k)| GraphNode {
            id: k.id(),
            file: k.file.clone(),
            line: k.line,
            path: k.path.clone(),
            source_ref: format!("{}/{}/{}", k.source.0, k.source.1, k.source.2),
            depends_on: k
                .depends_on
                .iter()
                .map(|(n, m)| format!("{n}/{m}"))
                .collect(),
            wait: k.wait,
            timeout: cluster_loop::duration::format_go_duration(k.timeout),
            timeout_chain: cluster_loop::duration::format_go_duration(chains[i]),
            target_namespace: k.target_namespace.clone(),
            post_build: k.post_build.is_some(),
            variables: k.vars.keys().cloned().collect(),
            followed: k.followed,
            applied_by: k.parent.map(|p| ov.ks[p].id()),
            affected: affected.contains(&k.id()),
            build: verdict::decide(k, ov.root == Some(i), findings, encrypted(ov, i)),
            spec: k.spec.clone(),
            dir: k.dir.clone(),
            inputs: substitute_inputs(ov, i),
        })
        .collect()
}

/// Why Kustomization `i`'s build depends on keys offline lacks: the first SOPS-encrypted
/// object it applies when it decrypts (`spec.decryption`), or else the first of its
/// `postBuild.substituteFrom` inputs the overlay applies SOPS-encrypted (its values are
/// ciphertext here; the cluster substitutes the decrypted ones).
fn encrypted(ov: &fleet::Overlay, i: usize) -> Option<String> {
    let decrypts = ov.ks[i]
        .spec
        .get("decryption")
        .is_some_and(|d| !d.is_null());
    let applied = decrypts
        .then(|| {
            ov.objects
                .iter()
                .find(|o| o.owner == Some(i) && verdict::sops_encrypted(&o.doc.value))
                .map(|o| format!("it applies SOPS-encrypted {}", o.describe()))
        })
        .flatten();
    applied.or_else(|| {
        substitute_inputs(ov, i).into_iter().find_map(|x| {
            x.object.filter(|o| verdict::sops_encrypted(o)).map(|_| {
                format!(
                    "its substituteFrom input {} {} is SOPS-encrypted",
                    x.reference.kind, x.reference.name
                )
            })
        })
    })
}

/// Kustomization `i`'s `postBuild.substituteFrom` inputs with the objects the overlay applies
/// for them (kind, name, the Kustomization's namespace; as `fleet::load_vars` finds them).
fn substitute_inputs(ov: &fleet::Overlay, i: usize) -> Vec<verdict::SubstituteInput> {
    let k = &ov.ks[i];
    let Some(pb) = &k.post_build else {
        return Vec::new();
    };
    pb.substitute_from
        .iter()
        .map(|r| verdict::SubstituteInput {
            reference: r.clone(),
            object: ov
                .objects
                .iter()
                .find(|o| {
                    o.value["kind"] == r.kind.as_str()
                        && o.value["metadata"]["name"] == r.name.as_str()
                        && o.namespace == k.namespace
                })
                .map(|o| o.value.clone()),
        })
        .collect()
}

/// markercheck's errors and warnings, with repository-relative paths (only in changed files,
/// with `--changed-since`); its info findings are about its simulation (MC070-MC072), which
/// fleetlint does not run.
fn marker_findings(
    mc: markercheck::check::Report,
    root: &Path,
    changed: Option<&BTreeSet<String>>,
    report: &mut Report,
) {
    let cwd = std::env::current_dir().unwrap_or_default();
    // markercheck's errors and warnings; its info findings are about its simulation
    // (MC070-MC072), which fleetlint does not run
    for f in mc
        .findings
        .into_iter()
        .filter(|f| f.severity != Severity::Info)
    {
        let abs = cwd.join(&f.file);
        let file = if f.file.is_empty() {
            String::new()
        } else {
            tree::rel(root, &std::fs::canonicalize(&abs).unwrap_or(abs))
        };
        if let Some(ch) = &changed
            && !ch.contains(&file)
        {
            continue;
        }
        report.findings.push(Finding {
            file,
            line: f.line,
            rule: f.rule.into(),
            name: f.name.into(),
            severity: f.severity,
            overlay: None,
            message: f.message,
            fix: f.fix,
            kustomizations: vec![],
        });
    }
}

/// The YAML files of markercheck's scan of `scope` for [`tree::Repo::from_files`]:
/// (repository-relative path, bytes) of every one that is not a symlink (fleetlint reads the
/// tree without following symlinks), files over markercheck's size limit read here, and the
/// repository-relative paths of the files that could not be read.
fn shared_files(
    root: &Path,
    scope: &Path,
    scan: &markercheck::scan::ScanResult,
    kept: Vec<markercheck::scan::KeptFile>,
) -> (Vec<(String, Vec<u8>)>, Vec<String>) {
    let yaml = |p: &Path| {
        p.file_name()
            .is_some_and(|n| tree::yaml_name(&n.to_string_lossy()))
    };
    let plain_file = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
    let mut files: Vec<(PathBuf, Vec<u8>)> = kept
        .into_iter()
        .filter(|k| !k.symlink)
        .map(|k| (k.rel, k.bytes))
        .collect();
    let mut unreadable = Vec::new();
    for (r, _) in &scan.too_large {
        let abs = scope.join(r);
        if yaml(r) && plain_file(&abs) {
            match std::fs::read(&abs) {
                Ok(b) => files.push((r.clone(), b)),
                Err(_) => unreadable.push(tree::rel(root, &abs)),
            }
        }
    }
    for e in &scan.read_errors {
        if !e.symlink && yaml(&e.rel) {
            unreadable.push(tree::rel(root, &scope.join(&e.rel)));
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let files = files
        .into_iter()
        .map(|(r, b)| (tree::rel(root, &scope.join(r)), b))
        .collect();
    (files, unreadable)
}

/// Kustomization indices in dependency order: the root first, then each Kustomization after
/// everything it dependsOn (ties by name; members of a cycle at the end, by name).
fn graph_order(ov: &fleet::Overlay) -> Vec<usize> {
    let deps: Vec<Vec<(&str, &str)>> = ov
        .ks
        .iter()
        .map(|k| {
            k.depends_on
                .iter()
                .map(|(n, m)| (n.as_str(), m.as_str()))
                .collect()
        })
        .collect();
    let ids: Vec<(&str, &str)> = ov
        .ks
        .iter()
        .map(|k| (k.namespace.as_str(), k.name.as_str()))
        .collect();
    let names: Vec<String> = ov.ks.iter().map(fleet::FluxKs::id).collect();
    order_by_dependencies(ov.root, &ids, &names, &deps)
}

/// The order of [`graph_order`]: `root` first; then, repeatedly, the first (by `names`) of the
/// nodes left whose every dependency (an entry of `deps` naming an id in `ids`) is no longer
/// left, or when none is, the first node left. Kahn's algorithm over the nodes sorted by name:
/// O((n + e) log n).
fn order_by_dependencies(
    root: Option<usize>,
    ids: &[(&str, &str)],
    names: &[String],
    deps: &[Vec<(&str, &str)>],
) -> Vec<usize> {
    let n = ids.len();
    let mut done: Vec<usize> = root.into_iter().collect();
    let mut sorted: Vec<usize> = (0..n).filter(|i| Some(*i) != root).collect();
    sorted.sort_by(|a, b| names[*a].cmp(&names[*b]));
    // rank of each node in name order (ties keep index order, as the stable sort did)
    let mut rank = vec![usize::MAX; n];
    for (r, &i) in sorted.iter().enumerate() {
        rank[i] = r;
    }
    let index: std::collections::BTreeMap<(&str, &str), usize> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != root)
        .map(|(i, id)| (*id, i))
        .collect();
    // waiting[i]: dependency entries of i naming a node still left; dependents[j]: the entries
    // naming j
    let mut waiting = vec![0usize; n];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for d in ds {
            if let Some(&j) = index.get(d) {
                waiting[i] += 1;
                dependents[j].push(i);
            }
        }
    }
    let mut left: BTreeSet<usize> = (0..sorted.len()).collect();
    let mut ready: BTreeSet<usize> = sorted
        .iter()
        .filter(|&&i| waiting[i] == 0)
        .map(|&i| rank[i])
        .collect();
    while let Some(r) = ready.first().copied().or_else(|| left.first().copied()) {
        ready.remove(&r);
        left.remove(&r);
        let i = sorted[r];
        done.push(i);
        for &k in &dependents[i] {
            waiting[k] -= 1;
            if waiting[k] == 0 && left.contains(&rank[k]) {
                ready.insert(rank[k]);
            }
        }
    }
    done
}

/// The Kustomizations of `ov` a change to `changed` (repository-relative paths) affects, as
/// `namespace/name`: those defined in a changed file; those whose render reads a changed file
/// ([`tree::Repo::closure`]); for a changed path that is gone from disk (deleted, renamed
/// away, a whole directory removed), those whose render read it or whose `spec.path` held it
/// ([`tree::Repo::render_reads`]); after any such deletion, those whose `dependsOn` names a
/// Kustomization the overlay no longer has (the deleted file may have defined it; the test
/// cannot tell which name the file held, so it takes every dangling entry); then, transitively,
/// what an affected Kustomization applies and what depends on it.
fn affected_ks(
    repo: &tree::Repo,
    ov: &fleet::Overlay,
    changed: &BTreeSet<String>,
) -> BTreeSet<String> {
    let gone: Vec<&String> = changed
        .iter()
        .filter(|p| {
            !repo.texts.contains_key(*p) && std::fs::symlink_metadata(repo.root.join(p)).is_err()
        })
        .collect();
    let mut hit: BTreeSet<usize> = BTreeSet::new();
    for (i, k) in ov.ks.iter().enumerate() {
        let inputs = fleet::ks_inputs(repo, k);
        if changed.contains(&k.file)
            || inputs.iter().any(|f| changed.contains(f))
            || k.dir
                .as_ref()
                .is_some_and(|d| gone.iter().any(|p| repo.render_reads(d, p)))
        {
            hit.insert(i);
        }
    }
    // descendants (applied by an affected Kustomization) and dependents, transitively: a
    // walk over the "applied by" and "depended on by" edges from every hit
    let index: std::collections::BTreeMap<(&str, &str), usize> = ov
        .ks
        .iter()
        .enumerate()
        .map(|(i, k)| ((k.namespace.as_str(), k.name.as_str()), i))
        .collect();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); ov.ks.len()];
    for (i, k) in ov.ks.iter().enumerate() {
        if let Some(p) = k.parent {
            next[p].push(i);
        }
        for d in &k.depends_on {
            match index.get(&(d.0.as_str(), d.1.as_str())) {
                Some(&j) => next[j].push(i),
                None if !gone.is_empty() => {
                    hit.insert(i);
                }
                None => {}
            }
        }
    }
    let mut todo: Vec<usize> = hit.iter().copied().collect();
    while let Some(i) = todo.pop() {
        for &j in &next[i] {
            if hit.insert(j) {
                todo.push(j);
            }
        }
    }
    hit.into_iter().map(|i| ov.ks[i].id()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order as first written (a quadratic scan), kept as the oracle.
    fn order_by_scan(
        root: Option<usize>,
        ids: &[(&str, &str)],
        names: &[String],
        deps: &[Vec<(&str, &str)>],
    ) -> Vec<usize> {
        let mut done: Vec<usize> = root.into_iter().collect();
        let mut left: Vec<usize> = (0..ids.len()).filter(|i| Some(*i) != root).collect();
        left.sort_by(|a, b| names[*a].cmp(&names[*b]));
        while !left.is_empty() {
            let ready = left
                .iter()
                .position(|&i| deps[i].iter().all(|d| !left.iter().any(|&j| ids[j] == *d)));
            let i = left.remove(ready.unwrap_or(0));
            done.push(i);
        }
        done
    }

    /// Graphs with chains, cycles, self-dependencies, duplicate entries, missing targets and
    /// dependencies on the root, from a fixed-seed generator: the indexed order equals the scan.
    #[test]
    fn dependency_order_equals_the_scan() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..300 {
            let n = 1 + next(30) as usize;
            let names: Vec<String> = (0..n)
                .map(|i| format!("ns/k{}", next(40) * 100 + i as u64))
                .collect();
            let ids: Vec<(&str, &str)> = names.iter().map(|s| s.split_once('/').unwrap()).collect();
            let missing = ("ns", "missing");
            let deps: Vec<Vec<(&str, &str)>> = (0..n)
                .map(|_| {
                    (0..next(4))
                        .map(|_| {
                            if next(10) == 0 {
                                missing
                            } else {
                                ids[next(n as u64) as usize]
                            }
                        })
                        .collect()
                })
                .collect();
            let root = (next(2) == 0).then(|| next(n as u64) as usize);
            assert_eq!(
                order_by_dependencies(root, &ids, &names, &deps),
                order_by_scan(root, &ids, &names, &deps),
                "{names:?} {deps:?} root {root:?}"
            );
        }
    }
}
