//! The `kubectl fleetlint` flow: [`run`] over the parsed [`Cli`] (lint, `--changed-since`, `--explain`, output formats). main.rs only parses and calls it.

use crate::rules::Severity;
use crate::{Config, RunError, report};
use clap::Parser;
use cluster_loop::error::{EXIT_FINDING, EXIT_OK, Error, Result};
use cluster_loop::output::{OutputArgs, OutputFormat, print_machine, write_stdout};
use std::path::PathBuf;

/// `--help` examples: every line at most 72 columns, long commands continued with `\`.
const EXAMPLES: &str = r#"Examples:
  # Lint every overlay of the fleet under clusters/ (render, dependsOn,
  # substitution, placeholders, addresses, service links, images,
  # markers)
  kubectl fleetlint clusters

  # One overlay, with its dependsOn graph and timeout chain
  kubectl fleetlint clusters --overlay clusters/prod --graph

  # Only what a change touches (the Kustomizations whose inputs it
  # changes, and their dependents)
  kubectl fleetlint clusters --changed-since HEAD~1

  # Why a rule exists and how to fix it
  kubectl fleetlint --explain FL031

  # CI: GitHub annotations, or SARIF for code scanning
  kubectl fleetlint clusters --format github
  kubectl fleetlint clusters --format sarif > fleetlint.sarif

Exit codes: 0 no error findings, 1 error findings (an overlay that does
not render is one), 2 usage (bad path or no overlay under it, overlay,
revision or rule ID; kubectl not found), 130 interrupted.
Rules: FL001..FL071 and markercheck's MC rules, listed with
--list-rules. Offline: no kubeconfig is read."#;

/// Lint a Flux fleet repository offline, reading it the way Flux would: renders every
/// directory a Flux Kustomization reaches with kubectl kustomize, walks the dependsOn graph and
/// applies post-build substitution as kustomize-controller does.
#[derive(Parser, Debug)]
#[command(name = "kubectl-fleetlint", bin_name = "kubectl fleetlint", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Directory to lint (default: current directory); Flux paths are relative to the nearest
    /// Git repository root above it
    #[arg(value_name = "PATH")]
    path: Option<PathBuf>,

    /// Lint only this overlay (a cluster directory such as clusters/prod; repeatable).
    /// Default: every overlay found (a directory whose root Kustomization points at itself)
    #[arg(long = "overlay", value_name = "DIR")]
    overlays: Vec<PathBuf>,

    /// Placeholder pattern that must never reach an overlay's output (`*` = any run of
    /// characters other than space, quote, comma)
    /// (default: `placeholder` of .fleetlint.yaml, else TBD-*)
    #[arg(long, value_name = "GLOB")]
    placeholder: Option<String>,

    /// Map a source the tree does not define to a local checkout, so the paths of the
    /// Kustomizations reading it are checked and rendered there: KIND/NAMESPACE/NAME=PATH, or
    /// NAME=PATH for any kind in any namespace (repeatable)
    #[arg(long = "source", value_name = "SOURCE=PATH")]
    sources: Vec<String>,

    /// Lint only what changed since this Git revision (git diff REV plus untracked files):
    /// the Kustomizations whose paths or inputs change (a deleted or renamed-away file or
    /// directory counts for every Kustomization whose path or inputs held it), what they apply
    /// and their dependents
    #[arg(long, value_name = "REV")]
    changed_since: Option<String>,

    /// Repository root Flux paths are relative to (default: nearest .git above PATH)
    #[arg(long, value_name = "DIR")]
    repo_root: Option<PathBuf>,

    /// Print the dependsOn graph of every overlay with its timeout chain (table output)
    #[arg(long)]
    graph: bool,

    /// Skip markercheck's marker rules
    #[arg(long)]
    no_markers: bool,

    /// Renders run at once (default: CPU count, at most 8)
    #[arg(long, short = 'j', value_name = "N")]
    jobs: Option<usize>,

    /// Render cache directory (default: $XDG_CACHE_HOME/cluster-loop/fleetlint)
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,

    /// Do not read or write the render cache
    #[arg(long)]
    no_cache: bool,

    /// kubectl command used for `kubectl kustomize`
    #[arg(long, default_value = "kubectl", value_name = "CMD")]
    kubectl: String,

    /// Wall-clock time one `kubectl kustomize` run may take before it is killed and reported
    /// as FL001 (a Go duration; 0s: no bound)
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = parse_timeout)]
    render_timeout: std::time::Duration,

    /// Memory one `kubectl kustomize` run may use (its data segment) before it dies and is
    /// reported as FL001 (4Gi, 512Mi, bytes; 0: no bound)
    #[arg(long, default_value = "4Gi", value_name = "SIZE", value_parser = crate::render::parse_memory)]
    render_memory: u64,

    /// Print a rule's story (what goes wrong, the fix, its source) and exit
    #[arg(long, value_name = "ID")]
    explain: Option<String>,

    /// List the rules and exit
    #[arg(long)]
    list_rules: bool,

    /// Findings format: text (the -o output), github (workflow annotations), sarif
    #[arg(long, value_enum, default_value = "text")]
    format: Format,

    #[command(flatten)]
    /// `-o table|json|yaml` and `--color`.
    pub output: OutputArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Text,
    Github,
    Sarif,
}

/// Runs the lint on a blocking thread while the main thread watches SIGINT/SIGTERM: on a signal
/// the temporary files of this run are removed and the process exits 130 (nothing outside the
/// render cache is ever written, and the cache only receives complete renders). On a terminal
/// (table output) the main thread also draws the progress line on stderr from the run's
/// counters ([`crate::RunProgress`]): a spinner redrawn every 100 ms with colour, else one
/// plain line per change of phase, overlay or ten thousand files, with no escape codes.
fn run_interruptible(cfg: &Config, output: &OutputArgs) -> Result<crate::Report> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Other(format!("cannot start the async runtime: {e}")))?;
    let progress = cluster_loop::wait::Progress::for_output("fleetlint", output);
    let plain = !output.stderr_painter().enabled();
    let counters = progress
        .is_visible()
        .then(|| std::sync::Arc::new(crate::RunProgress::default()));
    let mut cfg2 = cfg.clone();
    cfg2.progress = counters.clone();
    let shown_path = cfg.path.display().to_string();
    rt.block_on(async move {
        let mut signals = cluster_loop::signals::Signals::install();
        let mut task = tokio::task::spawn_blocking(move || crate::run(&cfg2));
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(if plain {
            500
        } else {
            100
        }));
        loop {
            tokio::select! {
                r = &mut task => {
                    progress.finish();
                    return match r {
                        Ok(Ok(report)) => Ok(report),
                        Ok(Err(RunError::Usage(m))) => Err(Error::Usage(m)),
                        Ok(Err(RunError::Other(m))) => Err(Error::Usage(m)),
                        Err(e) => Err(Error::Other(format!("the lint failed: {e}"))),
                    };
                }
                s = signals.recv() => {
                    progress.finish();
                    crate::render::cleanup_interrupted(cfg.cache_dir.as_deref());
                    let _ = {
                        use std::io::Write as _;
                        writeln!(std::io::stderr(), "interrupted by {s}: nothing changed (the render cache keeps only complete renders)")
                    };
                    std::process::exit(cluster_loop::signals::EXIT_INTERRUPTED)
                }
                _ = tick.tick(), if counters.is_some() => {
                    if let Some(c) = &counters {
                        progress.set_status(c.status(&shown_path, plain));
                    }
                }
            }
        }
    })
}

fn kubectl_found(cmd: &str) -> bool {
    if cmd.contains('/') {
        return std::path::Path::new(cmd).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// Runs `kubectl fleetlint` for the parsed `cli`; returns the exit code (see `--help`).
/// Errors: usage (2) errors, as [`cluster_loop::error::Error`].
pub fn run(cli: Cli) -> Result<i32> {
    if cli.list_rules {
        write_stdout(&rules_list())?;
        return Ok(EXIT_OK);
    }
    if let Some(id) = &cli.explain {
        return explain(id);
    }
    if let Some(p) = &cli.placeholder {
        crate::lint::placeholder_regex(p).map_err(Error::usage)?;
    }
    let sources = parse_sources(&cli.sources)?;
    if cli.jobs == Some(0) {
        return Err(Error::usage("--jobs 0: at least one render must run"));
    }
    if !kubectl_found(&cli.kubectl) {
        return Err(Error::usage(format!(
            "{}: not found (fleetlint renders with `kubectl kustomize`); install kubectl or pass --kubectl",
            cli.kubectl
        )));
    }
    let cfg = config(&cli, sources);
    let started = std::time::Instant::now();
    let report = run_interruptible(&cfg, &cli.output)?;
    let elapsed = started.elapsed();
    if report.overlays.is_empty() {
        // nothing was linted: not a pass (exit 0 would let a CI gate on a mistyped or too
        // narrow path pass every fleet), and not a finding about the fleet (exit 1 says the
        // fleet has an error): the path given is the mistake, as for a path that does not exist
        return Err(Error::usage(nothing_to_lint(&cfg, &report)));
    }
    print_report(&cli, &report)?;
    print_summary(&cli, &cfg, &report, elapsed);
    Ok(if report.has_errors() {
        EXIT_FINDING
    } else {
        EXIT_OK
    })
}

/// `--list-rules`: one line per rule, fleetlint's then markercheck's.
fn rules_list() -> String {
    let mut s = String::new();
    for r in crate::rules::RULES {
        s.push_str(&format!(
            "{}  {:<28} {:<8} {:<14} {}\n",
            r.id,
            r.name,
            format!("{:?}", r.severity).to_lowercase(),
            r.family,
            r.summary
        ));
    }
    for (id, name, sev, desc) in markercheck::check::RULES {
        s.push_str(&format!(
            "{id}  {name:<28} {:<8} {:<14} {desc}\n",
            format!("{sev:?}").to_lowercase(),
            "markers"
        ));
    }
    s
}

/// `--explain ID`. Errors: an unknown rule (usage).
fn explain(id: &str) -> Result<i32> {
    match crate::rules::explain(id) {
        Some(t) => {
            write_stdout(&t)?;
            Ok(EXIT_OK)
        }
        None => Err(Error::usage(format!(
            "--explain {id}: no such rule (FL001..FL071 or a markercheck MC rule; see --list-rules)"
        ))),
    }
}

/// `--source KIND/NAMESPACE/NAME=PATH` (or `NAME=PATH`) values: the checkout of each source.
/// Errors: a malformed value or a PATH that is not a directory (usage).
fn parse_sources(given: &[String]) -> Result<Vec<(String, PathBuf)>> {
    let mut sources = Vec::new();
    for m in given {
        let Some((id, path)) = m
            .split_once('=')
            .filter(|(i, p)| !i.is_empty() && !p.is_empty())
        else {
            return Err(Error::usage(format!(
                "--source {m}: expected KIND/NAMESPACE/NAME=PATH or NAME=PATH"
            )));
        };
        if id.split('/').count() != 1 && id.split('/').count() != 3 {
            return Err(Error::usage(format!(
                "--source {m}: the source is KIND/NAMESPACE/NAME or NAME"
            )));
        }
        if let Some(problem) = cluster_loop::repo::directory_problem(std::path::Path::new(path)) {
            return Err(Error::usage(format!(
                "--source {m}: {problem} (a local checkout of the source)"
            )));
        }
        sources.push((id.to_string(), PathBuf::from(path)));
    }
    Ok(sources)
}

fn parse_timeout(s: &str) -> std::result::Result<std::time::Duration, String> {
    cluster_loop::duration::parse_go_duration(s)
        .map_err(|e| format!("{e} (e.g. 5m, 90s, 0s for no bound)"))
}

/// The run's configuration from the flags.
fn config(cli: &Cli, sources: Vec<(String, PathBuf)>) -> Config {
    let defaults = Config::default();
    Config {
        path: cli.path.clone().unwrap_or_else(|| PathBuf::from(".")),
        repo_root: cli.repo_root.clone(),
        overlays: cli.overlays.clone(),
        options: crate::lint::Options {
            placeholder: cli
                .placeholder
                .clone()
                .unwrap_or_else(|| crate::lint::Options::default().placeholder),
            sources,
        },
        placeholder_given: cli.placeholder.is_some(),
        changed_since: cli.changed_since.clone(),
        jobs: cli.jobs.unwrap_or(defaults.jobs),
        cache_dir: if cli.no_cache {
            None
        } else {
            cli.cache_dir.clone().or(defaults.cache_dir)
        },
        kubectl: cli.kubectl.clone(),
        markers: !cli.no_markers,
        progress: None,
        render_bounds: crate::render::RenderBounds {
            timeout: cli.render_timeout,
            memory: cli.render_memory,
        },
    }
}

/// The report on stdout in the format asked for.
fn print_report(cli: &Cli, report: &crate::Report) -> Result<()> {
    match cli.format {
        Format::Github => write_stdout(&report::github(&report.findings))?,
        Format::Sarif => print_machine(OutputFormat::Json, &report::sarif(&report.findings))?,
        Format::Text => match cli.output.output {
            OutputFormat::Table => {
                let p = cli.output.stdout_painter();
                let mut s = String::new();
                if cli.graph {
                    s.push_str(&report::graph(&report.overlays, &p));
                }
                s.push_str(&report::table(&report.findings, &p));
                write_stdout(&s)?;
            }
            fmt => print_machine(fmt, &report::MachineReport::new(report))?,
        },
    }
    Ok(())
}

/// The notes and the one-line summary on stderr (red with errors, green without).
fn print_summary(cli: &Cli, cfg: &Config, report: &crate::Report, elapsed: std::time::Duration) {
    let count = |s: Severity| report.findings.iter().filter(|f| f.severity == s).count();
    let (e, w) = (count(Severity::Error), count(Severity::Warning));
    let ep = cli.output.stderr_painter();
    let overlays: Vec<String> = report
        .overlays
        .iter()
        .map(|o| {
            let dir = crate::render::display_dir(&o.dir);
            if o.rendered {
                dir
            } else {
                format!("{dir}: does not render")
            }
        })
        .collect();
    let summary = format!(
        "{} overlay(s) ({}), {}, {} files{}; {} kubectl kustomize run(s){}{}; {}, {}{} in {:.2}s",
        overlays.len(),
        overlays.join(", "),
        if report.changed_files.is_some() {
            format!(
                "{} of {} Kustomizations affected by the change (only their findings reported)",
                report.stats.affected, report.stats.kustomizations
            )
        } else {
            format!("{} Kustomizations", report.stats.kustomizations)
        },
        report.stats.files,
        if report.stats.excluded_files > 0 {
            format!(
                " ({} left out: source-controller never ships them)",
                report.stats.excluded_files
            )
        } else {
            String::new()
        },
        report.stats.renders_run,
        if cfg.cache_dir.is_some() {
            ", the rest from the cache"
        } else {
            ", no cache"
        },
        match &report.changed_files {
            Some(c) => format!("; --changed-since: {} changed file(s)", c.len()),
            None => String::new(),
        },
        cluster_loop::output::count(e as u64, "error"),
        cluster_loop::output::count(w as u64, "warning"),
        if report.stats.suppressed > 0 {
            format!(
                ", {} suppressed (.fleetlint.yaml or # fleetlint:ignore; -o json lists them)",
                report.stats.suppressed
            )
        } else {
            String::new()
        },
        elapsed.as_secs_f64()
    );
    for n in &report.notes {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "note: {n}");
    }
    let _ = {
        use std::io::Write as _;
        writeln!(
            std::io::stderr(),
            "{}",
            if e > 0 {
                ep.err(&summary)
            } else {
                ep.ok(&summary)
            }
        )
    };
}

/// The usage error of a run that found no overlay: what was read and what to pass instead.
fn nothing_to_lint(cfg: &Config, report: &crate::Report) -> String {
    let s = &report.stats;
    format!(
        "nothing to lint under {}: no overlay found ({} YAML files, {} kustomize directories, {} overlay candidate(s) rendered; an overlay is a directory whose render holds the Flux Kustomization whose spec.path is that directory, the root `flux bootstrap` writes). \
Pass the directory that holds the cluster directories or the repository root (e.g. `kubectl fleetlint clusters`), or name one with --overlay DIR",
        cfg.path.display(),
        s.files,
        s.kustomize_dirs,
        s.candidates
    )
}
