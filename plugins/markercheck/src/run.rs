//! The `kubectl markercheck` flow: [`run`] over the parsed [`Cli`] (lint, simulate, render,
//! `--from-cluster`). main.rs only parses and calls it.

use crate::check::{self, Config, Report, Severity, finding};
use crate::objects::{ImagePolicy, LatestRef, Objects, Origin, from_yaml_file, merge_policies};
use crate::render;
use clap::Parser;
use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::{EXIT_FINDING, EXIT_OK, Error, Result};
use cluster_loop::output::{OutputArgs, OutputFormat, print_machine, write_stdout};
use std::path::PathBuf;

/// Progress and notes on stderr that never panic: a closed stderr (`2>&1 | head -1`) must not
/// turn a finished check into exit 101 (`eprintln!` panics on EPIPE).
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `--help` examples: every line at most 72 columns and long commands continued with `\`, so
/// clap never wraps them (at 80 columns or wider) and each example pastes into a shell as is.
const EXAMPLES: &str = r#"Examples:
  # Lint the checkout in the current directory (policies and automations
  # from the tree)
  kubectl markercheck

  # Show what the automation would commit for a given latest image, as a
  # unified diff
  kubectl markercheck ./clusters --simulate \
    --set flux-system:podinfo=ghcr.io/stefanprodan/podinfo:6.7.1

  # Use the live ImagePolicies' status.latestRef, prove the change with
  # kubectl kustomize
  kubectl markercheck . --from-cluster --simulate --render

  # Apply the simulated commit to the working tree (refused while an
  # error finding concerns a file it would change)
  kubectl markercheck . --policies policies.yaml --write

  # CI: GitHub annotations, or SARIF for code scanning
  kubectl markercheck --format github
  kubectl markercheck --format sarif > markercheck.sarif

Exit codes: 0 no error findings, 1 error findings (or render
failures, or --write refused), 2 usage, 3 cluster/API error.
Rules: MC001..MC082, listed with --list-rules."#;

/// Lint and simulate Flux image-automation setter markers (# {"$imagepolicy": "ns:policy"}),
/// reading the tree exactly like image-automation-controller (internal/update) and kyaml.
#[derive(Parser, Debug)]
#[command(name = "kubectl-markercheck", bin_name = "kubectl markercheck", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Files or directories to scan (default: current directory)
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,

    /// Print the unified diff of what the automation would commit
    #[arg(long)]
    simulate: bool,

    /// Write the simulated commit into the files (implies --simulate)
    #[arg(long)]
    write: bool,

    /// Instead of the automation's value changes, show (or with --write, make) the one-time
    /// layout change kyaml makes to every file holding a marker, with every value unchanged, so
    /// later automation commits touch only values (implies --simulate)
    #[arg(long, conflicts_with = "sets")]
    normalize: bool,

    /// Latest image for a policy, overriding tree and cluster: NAMESPACE:POLICY=NAME:TAG[@DIGEST]
    #[arg(long = "set", value_name = "NS:POLICY=REF")]
    sets: Vec<String>,

    /// YAML file with ImagePolicies (status.latestRef), ImageRepositories, ImageUpdateAutomations
    /// (e.g. `kubectl get imagepolicies -A -o yaml`)
    #[arg(long = "policies", value_name = "FILE")]
    policies: Vec<PathBuf>,

    /// Read ImagePolicies, ImageRepositories and ImageUpdateAutomations from the cluster (all
    /// namespaces, or -n), in addition to the tree. (kubectl's --cluster names a kubeconfig
    /// cluster, hence the name.)
    #[arg(long)]
    from_cluster: bool,

    /// With --from-cluster: ignore image automation objects found in the tree
    #[arg(long, requires = "from_cluster")]
    cluster_only: bool,

    /// Run `kubectl kustomize` before and after on every kustomization directory the change
    /// touches; report render errors and changed container images
    #[arg(long)]
    render: bool,

    /// Findings format: text (the -o output), github (workflow annotations), sarif
    #[arg(long, value_enum, default_value = "text")]
    format: Format,

    /// Namespace for manifests without metadata.namespace
    #[arg(long, default_value = "flux-system", value_name = "NS")]
    default_namespace: String,

    /// Repository root against which spec.update.path is resolved (default: nearest .git)
    #[arg(long, value_name = "DIR")]
    repo_root: Option<PathBuf>,

    /// Skip files larger than this many bytes
    #[arg(long, default_value_t = crate::scan::DEFAULT_MAX_FILE_SIZE, value_name = "BYTES")]
    max_file_size: u64,

    /// List the rules and exit
    #[arg(long)]
    list_rules: bool,

    #[command(flatten)]
    /// `-o table|json|yaml` and `--color`.
    pub output: OutputArgs,

    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Github,
    Sarif,
}

/// Parse one `--set NAMESPACE:POLICY=REF` value. REF is what ImagePolicy status.latestRef
/// spells: `NAME:TAG`, `NAME:TAG@DIGEST` or `NAME@DIGEST`.
///
/// Errors: [`Error::Usage`] (exit 2) naming the flag, the value, what is wrong and the accepted
/// form.
fn parse_set(s: &str) -> Result<ImagePolicy> {
    let bad = |why: &str| {
        Error::usage(format!(
            "--set {s:?}: {why}; expected --set NAMESPACE:POLICY=NAME:TAG[@DIGEST] (or NAME@DIGEST), e.g. --set flux-system:app=ghcr.io/org/app:1.2.3"
        ))
    };
    let Some((k, v)) = s.split_once('=') else {
        return Err(bad("no '=' between the policy and the image reference"));
    };
    let Some((ns, name)) = k.split_once(':') else {
        return Err(bad(&format!(
            "{k:?} is not NAMESPACE:POLICY (no ':' between namespace and policy name)"
        )));
    };
    if ns.is_empty() || name.is_empty() || name.contains(':') {
        return Err(bad(&format!(
            "{k:?} is not NAMESPACE:POLICY (both non-empty, no :tag/:name/:digest suffix: --set gives the policy's latest image, each setter derives from it)"
        )));
    }
    if v.is_empty() {
        return Err(bad("the image reference after '=' is empty"));
    }
    let latest = LatestRef::parse(v).ok_or_else(|| {
        bad(&format!(
            "{v:?} has no tag or digest (the latest image of a policy always has one)"
        ))
    })?;
    latest
        .validate()
        .map_err(|e| bad(&format!("{v:?} is not a valid image reference: {e}")))?;
    Ok(ImagePolicy {
        namespace: ns.into(),
        name: name.into(),
        labels: Default::default(),
        repository: None,
        latest: Some(latest),
        origin: Origin::Flag,
    })
}

/// Runs `kubectl markercheck` for the parsed `cli` (lint, `--simulate`, `--render`,
/// `--write`); returns the exit code (see `--help`). Errors: usage (2) and cluster/API (3)
/// errors, as [`cluster_loop::error::Error`].
pub fn run(cli: Cli) -> Result<i32> {
    if cli.list_rules {
        return list_rules();
    }
    // bad --set values are usage errors before any file or cluster is read
    let sets = cli
        .sets
        .iter()
        .map(|s| parse_set(s))
        .collect::<Result<Vec<_>>>()?;
    let paths = if cli.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        cli.paths.clone()
    };
    for p in &paths {
        if !p.exists() {
            return Err(Error::usage(format!(
                "{}: no such file or directory (PATH is a Git checkout, a directory of manifests or a manifest file)",
                p.display()
            )));
        }
    }
    let extra = extra_objects(&cli)?;
    let cfg = Config {
        paths: paths.clone(),
        default_namespace: cli.default_namespace.clone(),
        extra,
        sets,
        ignore_tree_objects: cli.cluster_only,
        max_file_size: cli.max_file_size,
        repo_root: cli.repo_root.clone(),
        normalize: cli.normalize,
    };
    let mut report: Report = check::run(&cfg);
    stderr_notes(&report);
    let rendered = if cli.render && !report.changes.is_empty() {
        render_findings(&paths, &mut report)?
    } else {
        Vec::new()
    };
    if cli.write {
        write_changes(&cli, &report, &rendered)?;
    }
    let errors = report
        .findings
        .iter()
        .any(|f| f.severity == Severity::Error);
    match cli.format {
        Format::Github => {
            let mut s = crate::report::github(&report.findings);
            if cli.simulate || cli.write || cli.normalize {
                for c in &report.changes {
                    s.push_str(&c.diff);
                }
            }
            write_stdout(&s)?;
        }
        Format::Sarif => {
            print_machine(OutputFormat::Json, &crate::report::sarif(&report.findings))?;
        }
        Format::Text => match cli.output.output {
            OutputFormat::Table => print_table(&cli, &report)?,
            fmt => {
                print_machine(
                    fmt,
                    &crate::report::MachineReport::new(
                        &paths,
                        &report.stats,
                        &report.findings,
                        &report.changes,
                        &rendered,
                    ),
                )?;
            }
        },
    }
    Ok(if errors { EXIT_FINDING } else { EXIT_OK })
}

/// `--list-rules`: every rule, a line each.
fn list_rules() -> Result<i32> {
    let mut s = String::new();
    for (id, name, sev, desc) in check::RULES {
        s.push_str(&format!(
            "{id}  {name:<24} {:<8} {desc}\n",
            format!("{sev:?}").to_lowercase()
        ));
    }
    write_stdout(&s)?;
    Ok(EXIT_OK)
}

/// The objects of `--policies` files and, with `--from-cluster`, of the cluster.
fn extra_objects(cli: &Cli) -> Result<Objects> {
    let mut extra = Objects::default();
    for f in &cli.policies {
        let o = from_yaml_file(f, &cli.default_namespace).map_err(Error::Usage)?;
        merge_policies(&mut extra.policies, o.policies);
        extra.repositories.extend(o.repositories);
        extra.automations.extend(o.automations);
    }
    if cli.from_cluster {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Other(format!("cannot start the async runtime: {e}")))?;
        let o = rt.block_on(async {
            let conn = cli.cluster.connect().await?;
            let ns = cli.cluster.namespace.clone();
            note!("reading image automation objects from {}", conn.server);
            crate::cluster::read(&conn, ns.as_deref()).await
        })?;
        merge_policies(&mut extra.policies, o.policies);
        extra.repositories.extend(o.repositories);
        extra.automations.extend(o.automations);
    }
    Ok(extra)
}

/// Bad-input notes on stderr (stdout keeps its machine shape).
fn stderr_notes(report: &Report) {
    for (p, kind) in &report.skipped_special {
        note!(
            "note: {p}: skipped, {kind} is not a regular file (git stores only files and symlinks, so Flux never sees it)"
        );
    }
    for n in &report.notes {
        note!("note: {n}");
    }
    for p in &report.not_selected {
        note!(
            "note: {}: Flux never reads this file (image-automation-controller reads only *.yaml, *.yml and files named Kustomization); checked anyway, a marker in it is an MC022 error",
            p.display()
        );
    }
    for (p, read, _) in &report.scanned {
        if *read == 0 {
            note!(
                "note: scanned 0 files under {}: no *.yaml, *.yml or Kustomization files, nothing to check",
                p.display()
            );
        }
    }
}

/// `--render`: `kubectl kustomize` before and after the change of every directory it touches
/// (MC080 render errors, MC081 image changes, MC082 bare images); the renders.
fn render_findings(paths: &[PathBuf], report: &mut Report) -> Result<Vec<render::Rendered>> {
    let mut rendered = Vec::new();
    for p in paths {
        let r = render::render(p, &report.changes).map_err(|e| Error::io(p, e))?;
        rendered.extend(r);
    }
    for r in &rendered {
        for (when, e) in [("before", &r.before_error), ("after", &r.after_error)] {
            if let Some(e) = e {
                report.findings.push(finding(
                    "MC080",
                    r.dir.clone(),
                    0,
                    0,
                    format!("kubectl kustomize {} fails {when} the change: {e}", r.dir),
                    "fix the kustomization so it renders".into(),
                ));
            }
        }
        for i in &r.images {
            // a bare tag or digest: by its shape, or because it is exactly what a :tag or
            // :digest setter writes in this change
            let bare = if check::is_digest(&i.after) {
                Some("digest")
            } else if render::looks_like_bare_tag(&i.after)
                || report.changes.iter().any(|c| {
                    c.changes
                        .iter()
                        .any(|v| v.setter.ends_with(":tag") && v.new == i.after)
                })
            {
                Some("tag")
            } else {
                None
            };
            let id = if bare.is_some() { "MC082" } else { "MC081" };
            let before = if i.before.is_empty() {
                "(none)"
            } else {
                &i.before
            };
            report.findings.push(finding(
                id,
                r.dir.clone(),
                0,
                0,
                match bare {
                    Some(what) => format!(
                        "{} container {}: image {before} -> {}, a bare {what} with no repository: the node cannot pull it",
                        i.object, i.container, i.after
                    ),
                    None => format!("{} container {}: image {before} -> {}", i.object, i.container, i.after),
                },
                match bare {
                    Some(what) => format!("the marker writes a bare {what} into an image field: use the plain marker on image: (name:tag[@digest]), :{what} only on a separate {what} field (kustomize images: newTag/digest)"),
                    None => "none needed: this is what the automation's commit deploys".into(),
                },
            ));
        }
    }
    Ok(rendered)
}

/// `--write`: the simulated commit written into the files, unless it would break something.
fn write_changes(cli: &Cli, report: &Report, rendered: &[render::Rendered]) -> Result<()> {
    // Refuse to write a broken commit: an error-severity finding in a file the write
    // changes (MC003 `:tag` on image:, MC007, MC024, MC030...), or a render error/bare
    // image the change itself causes (MC080 after but not before, MC082). No override:
    // fix the findings (or drop the marker) and run again.
    let changed: std::collections::BTreeSet<&str> =
        report.changes.iter().map(|c| c.file.as_str()).collect();
    let caused_by_change = |f: &check::Finding| {
        f.rule == "MC082"
            || (f.rule == "MC080"
                && f.message.contains("fails after the change")
                && rendered
                    .iter()
                    .any(|r| r.dir == f.file && r.before_error.is_none()))
    };
    let blockers: Vec<&check::Finding> = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .filter(|f| changed.contains(f.file.as_str()) || caused_by_change(f))
        .collect();
    if !blockers.is_empty() {
        let ep = cli.output.stderr_painter();
        note!(
            "{}",
            ep.err(&format!(
                "--write refused, nothing written: {} error finding(s) concern what the write would change: {}; fix them and run again",
                blockers.len(),
                blockers
                    .iter()
                    .map(|f| if f.line > 0 {
                        format!("{} {}:{}", f.rule, f.file, f.line)
                    } else {
                        format!("{} {}", f.rule, f.file)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        );
    }
    for c in report.changes.iter().filter(|_| blockers.is_empty()) {
        write_atomic(&c.abs, c.new.as_bytes()).map_err(|e| Error::io(&c.abs, e))?;
        note!("wrote {}", c.file);
    }
    Ok(())
}

/// `-o table`: the findings, the diffs with `--simulate`, and the summary on stderr.
fn print_table(cli: &Cli, report: &Report) -> Result<()> {
    let p = cli.output.stdout_painter();
    let mut s = crate::report::table(&report.findings, &p);
    if cli.simulate || cli.write || cli.normalize {
        for c in &report.changes {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(&c.diff);
            if !c.exact {
                s.push_str(&format!("# approximate: {}\n", c.caveats.join("; ")));
            }
        }
    }
    write_stdout(&s)?;
    let ep = cli.output.stderr_painter();
    let n_err = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let n_warn = report
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    let summary = format!(
        "scanned {}, {} selected by Flux, {} with \"$imagepolicy\", {} Flux reads; {}, {}; {} {}; repository root {}",
        cluster_loop::output::count(report.stats.files_scanned as u64, "file"),
        report.stats.files_selected,
        report.stats.files_with_token,
        cluster_loop::output::count(report.stats.markers as u64, "marker"),
        cluster_loop::output::count(n_err as u64, "error"),
        cluster_loop::output::count(n_warn as u64, "warning"),
        cluster_loop::output::count(report.changes.len() as u64, "file"),
        if cli.normalize {
            "--normalize would lay out anew (values unchanged)"
        } else {
            "the automation would rewrite"
        },
        if report.roots.is_empty() {
            "-".to_string()
        } else {
            report.roots.join(", ")
        }
    );
    note!(
        "{}",
        if n_err > 0 {
            ep.err(&summary)
        } else {
            ep.ok(&summary)
        }
    );
    Ok(())
}

fn write_atomic(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.markercheck-{}", std::process::id()));
    std::fs::write(&tmp, data)?;
    if let Ok(m) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, m.permissions());
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
