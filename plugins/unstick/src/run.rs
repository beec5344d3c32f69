//! The `kubectl unstick` flow: parse-free entry [`run`] over the parsed [`Cli`], one function per mode (`single`, `check`, `cascade`, `fleet`). main.rs only parses and calls it.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use clap::Parser;
use cluster_loop::cli::{ClusterArgs, Connection};
use cluster_loop::error::{EXIT_FINDING, EXIT_OK, Error, Result};
use cluster_loop::output::{OutputArgs, print_machine, write_stdout};
use cluster_loop::refs::{Kind, ResourceRef};
use cluster_loop::wait::Progress;
use jiff::Timestamp;
use serde_json::Value;

use crate::diagnose::{Class, Diagnosis, Engine};
use crate::lever::{self, Lever, Options, Plan};
use crate::live::{self, ControllerRef, Executed, Interrupt, Proof, Reader, Scope};
use crate::obj;
use crate::report::{self, CascadeItem, Report};
use crate::snapshot::Snapshot;

/// Exit code after SIGINT/SIGTERM (128 + 2), once anything we suspended was resumed.
use cluster_loop::signals::EXIT_INTERRUPTED;

const EXAMPLES: &str = "\
Examples:
  # Why is it stuck, and what would free it? (no changes)
  kubectl unstick ks/apps-wave-1 --dry-run

  # Diagnose, ask, pull the lever that works on this controller, wait for proof
  kubectl unstick ks/apps-wave-1

  # Non-interactive, then the Kustomizations waiting on it, wave by wave
  kubectl unstick ks/apps-wave-0 --yes --cascade

  # After pushing a fix to Git: refetch the source first (v1.7 gate, token rotation)
  kubectl unstick ks/apps-wave-1 --with-source --yes

  # Which commit does the remote's branch have? (git ls-remote from a probe pod)
  kubectl unstick ks/apps-wave-1 --dry-run --check-remote

  # The whole fleet in one table (healthy rows too); only the problems, as JSON
  kubectl unstick --all -A
  kubectl unstick --all -A --problems -o json

  # Check later whether a request was handled and the Kustomization recovered
  # (a run in progress is waited for, up to --timeout, never judged mid-run)
  kubectl unstick ks/apps-wave-1 --check --token 2026-11-30T07:30:00.5Z
  kubectl unstick ks/apps-wave-1 --check --timeout 2m

Proof (what \"recovered\" means): Ready=True, observedGeneration == generation,
  lastAttemptedRevision == lastAppliedRevision == the source's artifact revision, and
  lastHandledReconcileAt == our requestedAt (after a resume: the new generation observed).
  \"Not recovered\" only for a state that does not end by itself at the revision the source
  serves now, once nothing upstream moves (the source handled our request and is not
  fetching, the Kustomization attempted the source's revision, dependencies settled);
  otherwise it keeps waiting, and at the deadline says timed-out and what it waited on.
  When the plan waits for a fresh run after an in-flight one (\"fresh run expected at\"),
  only that run's end (status.history) is judged, never the in-flight run's.

-o json|yaml (kind UnstickReport): every key is always present (null or [] when empty):
  apiVersion kind diagnosis controller holdingWorkers plan action done proof after
  lastSeen token cascade notes
  proof: recovered | failed-again | timed-out | interrupted | not-waited (--no-wait) |
         not-handled (--check: token not handled yet) | not-attempted (nothing written:
         --dry-run, no lever needed, or declined)
  cascade: [] unless --cascade ran after the target recovered

Exit codes:
  0  recovery observed (or, read-only: healthy; --no-wait: writes done)
  1  not recovered / not healthy: the new diagnosis is printed; --all: a row needs
     attention (not healthy, not reconciling, not only waiting at dependsOn on a
     dependency that is progressing; after healing; kustomize- or source-controller not
     running: 0 replicas or no ready pod), or there are no Kustomizations in
     the namespace (nothing was checked; it says \"no Kustomizations in namespace X\")
  2  usage error (bad flags or arguments, e.g. ks/ or ks/Bad_Name, -n Bad_NS, -A or
     --problems without --all; decided before any kubeconfig is read)
  3  cluster or API error: unreachable, 403 (names the missing permission), or the
     Kustomization does not exist in that namespace on that context (names both);
     --all -n NS: namespace NS does not exist (list them with kubectl get ns);
     with -o json|yaml also {apiVersion, kind: UnstickError, exitCode, error} on stdout
  130 interrupted (anything we suspended was resumed first)";

/// Diagnose a stuck Flux Kustomization and pull the lever that really frees it.
///
/// Reads the Kustomization, its dependsOn chain, its source, the inventory objects and their
/// pods, and the kustomize-controller Deployment (version, --feature-gates, --concurrent);
/// classifies it; chooses the lever that cancels an in-flight health check on this
/// controller; applies it with JSON merge patches (field manager kubectl-unstick); and
/// watches until the controller handled it and the Kustomization is Ready at the source's
/// current revision.
#[derive(Parser, Debug)]
#[command(
    name = "kubectl-unstick",
    bin_name = "kubectl unstick",
    version,
    after_help = EXAMPLES
)]
pub struct Cli {
    /// The Kustomization: ks/NAME, kustomization/NAME or NAME
    #[arg(value_name = "KS")]
    target: Option<String>,

    /// Fleet view: every Kustomization in one table, healthy ones included (namespace from
    /// -n, or -A; --problems for only the ones that are not healthy)
    #[arg(long, conflicts_with = "target")]
    all: bool,
    /// With --all: all namespaces
    #[arg(short = 'A', long, requires = "all")]
    all_namespaces: bool,
    /// With --all: list only the Kustomizations that are not healthy (default: every one)
    #[arg(long, requires = "all")]
    problems: bool,

    /// Print the diagnosis, the plan and the exact patches; change nothing
    #[arg(long)]
    dry_run: bool,
    /// Read-only: exit 0 when Ready=True at the source's revision (and, with --token, the
    /// request was handled), else 1
    #[arg(long, conflicts_with_all = ["dry_run", "all"])]
    check: bool,
    /// With --check: the requestedAt value to expect in status.lastHandledReconcileAt
    #[arg(long, requires = "check", value_name = "REQUESTED_AT")]
    token: Option<String>,
    /// With --check: how long to wait for a run in progress (or a source still fetching) to
    /// end before judging; at the deadline: timed-out, never a verdict on a running run
    /// (default: the Kustomization's spec.timeout plus --margin)
    #[arg(long, requires = "check", value_parser = parse_duration, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// Pull the lever without asking. Without it, unstick asks on a terminal and writes
    /// nothing when stdin is not one (conflicts with --dry-run, which changes nothing)
    #[arg(short = 'y', long, conflicts_with = "dry_run")]
    yes: bool,

    /// Also request a reconcile of the source (GitRepository/OCIRepository) first
    #[arg(long)]
    with_source: bool,
    /// Allow deleting the kustomize-controller pod: cancels EVERY in-flight run (listed
    /// before acting)
    #[arg(long)]
    restart_controller: bool,
    /// Resume a Kustomization suspended by someone else
    #[arg(long)]
    force_resume: bool,

    /// Read the source's branch head with git ls-remote from a probe pod in the source's
    /// namespace (the credentials Flux holds) and say which newer commit a suspended or
    /// lagging GitRepository holds back; creates one short-lived Job
    #[arg(long, conflicts_with_all = ["all", "check"])]
    check_remote: bool,
    /// With --check-remote: the probe image (sh, getent and git)
    #[arg(long, requires = "check_remote", default_value = cluster_loop::probe::GIT_IMAGE, value_name = "IMAGE")]
    probe_image: String,

    /// Extra time on top of the Kustomization's own timeout when waiting for proof
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    margin: Duration,
    /// Return right after the writes and print the command that checks later
    #[arg(long, conflicts_with = "cascade")]
    no_wait: bool,
    /// After recovery, do the same for the Kustomizations waiting on it, in dependsOn order
    #[arg(long)]
    cascade: bool,

    /// Namespace of the kustomize-controller Deployment
    #[arg(long, default_value = "flux-system", value_name = "NAMESPACE", value_parser = cluster_loop::refs::parse_namespace)]
    controller_namespace: String,
    /// Name of the kustomize-controller Deployment
    #[arg(long, default_value = "kustomize-controller", value_name = "NAME", value_parser = cluster_loop::refs::parse_object_name)]
    controller_name: String,

    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    /// `-o table|json|yaml` and `--color`.
    pub output: OutputArgs,
}

fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    cluster_loop::duration::parse_go_duration(s).map_err(|e| e.to_string())
}

/// Runs `kubectl unstick` for the parsed `cli` (one Kustomization, `--check`, `--cascade` or
/// `--all`); returns the exit code (see `--help`). Errors: usage (2) and cluster/API (3)
/// errors, as [`cluster_loop::error::Error`].
pub async fn run(cli: Cli) -> Result<i32> {
    // clap's `requires = "all"` is not enforced: `--all` is a flag whose default `false`
    // clap counts as present. Without --all, -A and --problems were silently ignored (the
    // trial: `ks/flux-system -A` looked in flux-system only): a usage error.
    for (given, flag) in [
        (cli.all_namespaces, "-A/--all-namespaces"),
        (cli.problems, "--problems"),
    ] {
        if given && !cli.all {
            return Err(Error::usage(format!(
                "{flag} only works with --all (the fleet view); a Kustomization is named in one namespace: ks/NAME -n NAMESPACE"
            )));
        }
    }
    if cli.target.is_none() && !cli.all {
        return Err(Error::usage(
            "name a Kustomization (ks/NAME) or use --all; see --help",
        ));
    }
    if let Some(t) = &cli.token
        && crate::diagnose::request_time(t).is_none()
    {
        return Err(Error::usage(format!(
            "--token {t:?} is not a reconcile.fluxcd.io/requestedAt value: expected an RFC 3339 time as kubectl unstick and flux reconcile write it (e.g. 2026-11-30T07:30:00.5Z) or Unix time (seconds, milliseconds, microseconds or nanoseconds as `date +%s%N` writes it); copy it from the --no-wait output or the annotation"
        )));
    }
    if cli.check_remote {
        cluster_loop::probe::validate_image(&cli.probe_image).map_err(|e| {
            Error::usage(format!(
                "--probe-image {:?} is not an image reference: {e}",
                cli.probe_image
            ))
        })?;
    }
    // Usage is decided before any kubeconfig is read (exit 2 even without a cluster).
    let target = match &cli.target {
        Some(t) if !cli.all => Some(ResourceRef::parse_with_default(
            t,
            &[Kind::Kustomization],
            Some(Kind::Kustomization),
        )?),
        _ => None,
    };
    // Handlers first: from here on a Ctrl-C never kills us between a suspend and its resume.
    let intr = Interrupt::install()?;
    let conn = cli.cluster.connect().await?;
    let ctrl = ControllerRef {
        namespace: cli.controller_namespace.clone(),
        name: cli.controller_name.clone(),
    };
    if cli.all {
        return fleet(&cli, &conn, ctrl).await;
    }
    let Some(r) = target else {
        return Err(Error::usage(
            "name a Kustomization (ks/NAME) or use --all; see --help",
        ));
    };
    single(&cli, &conn, ctrl, &intr, &r.name).await
}

fn opts(cli: &Cli) -> Options {
    Options {
        with_source: cli.with_source,
        restart_controller: cli.restart_controller,
        force_resume: cli.force_resume,
        margin_secs: cli.margin.as_secs_f64(),
    }
}

fn find<'a>(snap: &'a Snapshot, ns: &str, name: &str) -> Option<&'a Value> {
    snap.kustomizations
        .iter()
        .find(|k| obj::namespace(k) == ns && obj::name(k) == name)
}

fn out(s: &str) -> Result<()> {
    write_stdout(s)
}

async fn single(
    cli: &Cli,
    conn: &Connection,
    ctrl: ControllerRef,
    intr: &Interrupt,
    name: &str,
) -> Result<i32> {
    let ns = conn.flux_namespace();
    let name = name.to_string();
    let scope = Scope {
        namespace: Some(ns.clone()),
        controller: ctrl,
    };
    let reader = Reader::default();
    let (snap, notes) = cluster_loop::signals::exit_on_signal(
        "nothing changed",
        live::gather(conn, &scope, &reader),
    )
    .await?;
    let engine = Engine::new(&snap);
    let Some(mut d) = engine.diagnose(&ns, &name) else {
        return Err(Error::not_found(
            conn.ctx()
                .verb("get")
                .resource_of::<cluster_loop::flux::Kustomization>()
                .namespace(Some(ns.as_str()))
                .name(name.as_str()),
        ));
    };
    let mut notes = notes;
    if cli.check_remote {
        let ks = find(&snap, &ns, &name).unwrap();
        let note = crate::remote::check(
            conn,
            engine.source_obj(ks),
            &mut d,
            &cli.probe_image,
            Duration::from_secs(60),
            !cli.output.output.is_machine(),
        )
        .await?;
        notes.extend(note);
    }
    let holding = engine.holding_workers();
    let painter = cli.output.stdout_painter();
    let machine = cli.output.output.is_machine();

    if cli.check {
        return check(cli, conn, &scope, &ns, &name, &snap, notes, intr).await;
    }

    let ks = find(&snap, &ns, &name).unwrap();
    let token = obj::rfc3339_nano(Timestamp::now());
    let o = opts(cli);
    let inputs = engine.lever_inputs(ks, &holding, snap.now, &token);
    let plan = lever::plan(&d, &inputs, &o);

    let mut rep = Report::new(
        &d,
        engine.controller.as_ref(),
        &holding,
        Some(&plan),
        notes.clone(),
    );
    if !machine {
        out(&report::single_text(
            &painter,
            &d,
            engine.controller.as_ref(),
            &holding,
            &notes,
            &plan,
        ))?;
    }
    let read_only_code = report::read_only_exit(&d, &plan);
    let waits = plan.lever == Lever::Wait;
    if cli.dry_run || (!waits && (!plan.lever.mutates() || plan.steps.is_empty())) {
        rep.action = if cli.dry_run { "dry-run" } else { "not-needed" }.into();
        if machine {
            print_machine(cli.output.output, &rep)?;
        } else if cli.dry_run && plan.lever.mutates() {
            out("dry run: nothing changed\n")?;
        }
        return Ok(read_only_code);
    }
    if let Some(code) = confirm(cli, &plan, &d, &mut rep, read_only_code, intr).await? {
        return Ok(code);
    }
    execute_and_prove(cli, conn, &scope, &ns, &name, &plan, &d, rep, intr).await
}

/// Asks before a lever that writes, unless `--yes`: `Some(exit code)` when the run stops here
/// (no terminal to ask on: `not-confirmed`; declined; interrupted while asking), with the
/// report printed for `-o json|yaml`; `None` to go on.
async fn confirm(
    cli: &Cli,
    plan: &Plan,
    d: &Diagnosis,
    rep: &mut Report<'_>,
    read_only_code: i32,
    intr: &Interrupt,
) -> Result<Option<i32>> {
    let machine = cli.output.output.is_machine();
    let waits = plan.lever == Lever::Wait;
    // No terminal to ask on and no --yes: nothing is written (a script never pulls a lever
    // by accident; the fresh-user trial saw `unstick ks/X </dev/null` suspend and resume
    // without asking). The diagnosis and plan above stand, with their read-only exit code.
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !waits && !cli.yes && !terminal {
        rep.action = "not-confirmed".into();
        if machine {
            print_machine(cli.output.output, &rep)?;
        }
        eprintln!(
            "nothing changed: stdin is not a terminal to confirm lever {} on {}; pass --yes to pull it without asking (or --dry-run to only diagnose)",
            plan.lever, d.kustomization
        );
        return Ok(Some(read_only_code));
    }
    if !waits && !cli.yes {
        eprint!("Pull lever {} on {}? [y/N] ", plan.lever, d.kustomization);
        let _ = std::io::stderr().flush();
        let answer = tokio::select! {
            a = tokio::task::spawn_blocking(|| {
                let mut s = String::new();
                let _ = std::io::stdin().lock().read_line(&mut s);
                s
            }) => a.unwrap_or_default(),
            _ = intr.wait() => return Ok(Some(EXIT_INTERRUPTED)),
        };
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            rep.action = "declined".into();
            if machine {
                print_machine(cli.output.output, &rep)?;
            }
            eprintln!("nothing changed");
            return Ok(Some(read_only_code));
        }
    }

    Ok(None)
}

/// Pulls the lever (or, for `wait`, only watches the queued run), then proves the result
/// ([`prove`]), with the diagnosis after a failure and the cascade with `--cascade`. Returns
/// the exit code; prints the report.
#[allow(clippy::too_many_arguments)]
async fn execute_and_prove(
    cli: &Cli,
    conn: &Connection,
    scope: &Scope,
    ns: &str,
    name: &str,
    plan: &Plan,
    d: &Diagnosis,
    mut rep: Report<'_>,
    intr: &Interrupt,
) -> Result<i32> {
    let machine = cli.output.output.is_machine();
    let painter = cli.output.stdout_painter();
    let waits = plan.lever == Lever::Wait;
    // The wait lever writes nothing: it only watches the run the controller already queued.
    let ex = if waits {
        Executed {
            started_at: Some(Timestamp::now()),
            ..Executed::default()
        }
    } else {
        live::execute(conn, plan, intr, cli.force_resume).await?
    };
    rep.action = if waits { "waited" } else { "executed" }.into();
    rep.done = ex.done.clone();
    // What was done is part of the report (stdout, before the proof and the verdict; in
    // -o json|yaml it is `done`), so it reads in order even when stdout and stderr are
    // captured apart.
    if !machine {
        for l in &ex.done {
            out(&format!("✓ {l}\n"))?;
        }
    }
    let progress = Progress::for_output(format!("ks/{name}"), &cli.output);
    if machine {
        for l in &ex.done {
            progress.println(format!("✓ {l}"));
        }
    }
    if ex.interrupted || intr.fired() {
        rep.proof = "interrupted".into();
        if machine {
            print_machine(cli.output.output, &rep)?;
        }
        eprintln!("interrupted after the writes completed; nothing is left suspended by us");
        return Ok(EXIT_INTERRUPTED);
    }
    if cli.no_wait {
        rep.proof = "not-waited".into();
        let check = check_command(ns, name, plan, &ex);
        if machine {
            print_machine(cli.output.output, &rep)?;
        } else {
            out(&format!("not waiting; check later with:\n  {check}\n"))?;
        }
        return Ok(EXIT_OK);
    }
    let (proof, code, last_seen) = prove(conn, scope, ns, name, plan, &ex, &progress, intr).await?;
    rep.proof = proof_str(proof).into();
    rep.last_seen = last_seen.clone();
    if proof == Proof::Interrupted {
        eprintln!("{}", explain(proof, plan, last_seen.as_deref()));
        if machine {
            print_machine(cli.output.output, &rep)?;
        }
        return Ok(code);
    }
    if proof != Proof::Recovered {
        let after = rediagnose(conn, scope, ns, name).await.ok().flatten();
        if !machine {
            out(&format!("{}\n", explain(proof, plan, last_seen.as_deref())))?;
            if let Some(a) = &after {
                out(&report::diagnosis_text(&painter, a, ""))?;
            }
        }
        rep.after = after;
        if machine {
            print_machine(cli.output.output, &rep)?;
        }
        return Ok(code);
    }
    if !machine {
        out(&format!(
            "{}\n",
            painter.ok(&format!(
                "recovered: {} is Ready at the source's current revision",
                d.kustomization
            ))
        ))?;
    }
    if cli.cascade {
        let (waves, code) = cascade(cli, conn, scope, ns, name, intr).await?;
        rep.cascade = waves;
        if machine {
            print_machine(cli.output.output, &rep)?;
        }
        return Ok(code);
    }
    if machine {
        print_machine(cli.output.output, &rep)?;
    }
    Ok(EXIT_OK)
}

/// `--check`: read-only. A token not handled yet is `not-handled` at once (a true statement,
/// not a verdict on recovery). Otherwise the proof judge ([`crate::proof::judge`]) decides:
/// recovered, or failed-again only for a state that does not end by itself; while a run is in
/// progress (or the source is still fetching, a revision not attempted yet, a dependency
/// moving) it waits, watching, up to `--timeout` (default: the Kustomization's timeout plus
/// `--margin`, the longest a run in progress can take), and at that deadline says timed-out
/// with what it waited on: never a verdict on a run that has not ended.
#[allow(clippy::too_many_arguments)]
async fn check(
    cli: &Cli,
    conn: &Connection,
    scope: &Scope,
    ns: &str,
    name: &str,
    snap: &Snapshot,
    notes: Vec<String>,
    intr: &Interrupt,
) -> Result<i32> {
    use crate::proof::{Expect, Verdict, judge};
    let painter = cli.output.stdout_painter();
    let machine = cli.output.output.is_machine();
    let engine = Engine::new(snap);
    let Some(first) = engine.diagnose(ns, name) else {
        return Err(Error::Other(format!("Kustomization {ns}/{name} vanished")));
    };
    let ks = find(snap, ns, name).unwrap();
    let token_state = cli
        .token
        .as_deref()
        .map(|t| crate::diagnose::token_state(ks, t));
    let handled = token_state.as_ref().is_none_or(|t| t.covered());
    let expect = Expect {
        token: cli.token.as_deref(),
        ..Expect::default()
    };
    let timeout = cli
        .timeout
        .unwrap_or_else(|| Duration::from_secs_f64(first.timeout_secs + cli.margin.as_secs_f64()));
    // (proof, what was seen last, the diagnosis to print, the token state at the end)
    // A stopped controller (0 replicas, or no ready pod) makes the status read the last one
    // it wrote: Ready=True then proves nothing about now, and waiting for a run is useless
    // (nothing reconciles or fetches). Never `recovered` then (README, exit codes: a stopped
    // controller is a finding in every view).
    let (proof, last_seen, d, token_state) = if !first.stopped_controllers.is_empty() {
        let seen = first
            .stopped_controllers
            .iter()
            .map(|s| s.line())
            .collect::<Vec<_>>()
            .join("; ");
        ("controller-not-running", Some(seen), first, token_state)
    } else if !handled {
        ("not-handled", None, first, token_state)
    } else {
        match judge(&engine, ns, name, &expect) {
            Verdict::Recovered => ("recovered", None, first, token_state),
            Verdict::Terminal(m) => ("failed-again", Some(m), first, token_state),
            Verdict::Moving(m) => {
                // Said on stderr (also without a terminal): the verdict waits for the run.
                eprintln!(
                    "ks/{name}: {m}: waiting up to {} (--timeout) for it to end before judging",
                    cluster_loop::duration::format_go_duration(timeout)
                );
                let progress = Progress::for_output(format!("ks/{name}"), &cli.output);
                let w = live::wait_proof(conn, scope, ns, name, &expect, timeout, &progress, intr)
                    .await?;
                progress.finish();
                let after = rediagnose(conn, scope, ns, name).await?.unwrap_or(first);
                let ts = w.last.as_ref().and_then(|k| {
                    cli.token
                        .as_deref()
                        .map(|t| crate::diagnose::token_state(k, t))
                });
                (proof_str(w.proof), w.last_seen, after, ts.or(token_state))
            }
        }
    };
    let holding = engine.holding_workers();
    let mut rep = Report::new(&d, engine.controller.as_ref(), &holding, None, notes);
    rep.action = "check".into();
    rep.proof = proof.into();
    rep.last_seen = last_seen.clone();
    rep.token = token_state.clone();
    if machine {
        print_machine(cli.output.output, &rep)?;
    } else {
        out(&report::diagnosis_text(&painter, &d, ""))?;
        let tok = |sep: &str| {
            token_state
                .as_ref()
                .map(|t| format!("{}{sep}", t.describe()))
                .unwrap_or_default()
        };
        let seen = last_seen
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        out(&format!(
            "check: {}\n",
            match proof {
                "recovered" => format!(
                    "{}recovered: Ready=True at the source's revision",
                    tok("; ")
                ),
                "not-handled" => token_state
                    .as_ref()
                    .map(|t| t.describe())
                    .unwrap_or_default(),
                "timed-out" => format!(
                    "{}no verdict within {} (--timeout): still waiting on: {}",
                    tok("; "),
                    cluster_loop::duration::format_go_duration(timeout),
                    last_seen.as_deref().unwrap_or("the run in progress")
                ),
                "interrupted" => "interrupted while waiting for the run in progress".into(),
                "controller-not-running" => format!(
                    "not proven: {}: the conditions read are the last ones written before it stopped, and nothing changes them until it runs again; start it and check again",
                    last_seen
                        .as_deref()
                        .unwrap_or("a controller is not running")
                ),
                _ => format!("{}not Ready at the source's revision{seen}", tok(", but ")),
            }
        ))?;
    }
    Ok(match proof {
        "recovered" => EXIT_OK,
        "interrupted" => EXIT_INTERRUPTED,
        _ => EXIT_FINDING,
    })
}

/// The verdict's word in reports and Events: `recovered`, `failed-again`, `timed-out`,
/// `interrupted`.
pub fn proof_str(p: Proof) -> &'static str {
    match p {
        Proof::Recovered => "recovered",
        Proof::FailedAgain => "failed-again",
        Proof::TimedOut => "timed-out",
        Proof::Interrupted => "interrupted",
    }
}

fn explain(p: Proof, plan: &Plan, last_seen: Option<&str>) -> String {
    let seen = last_seen.map(|s| format!(" ({s})")).unwrap_or_default();
    match p {
        Proof::Recovered => "recovered".into(),
        Proof::FailedAgain => format!(
            "not recovered: the Kustomization is not Ready at the source's revision and will not get there by itself{seen}: new diagnosis below"
        ),
        Proof::TimedOut => format!(
            "no proof within {}{}: new diagnosis below",
            obj::human_secs(plan.wait_secs.round() as i64),
            last_seen
                .map(|s| format!("; last seen: {s}"))
                .unwrap_or_default()
        ),
        Proof::Interrupted => "interrupted while waiting (nothing is left suspended by us)".into(),
    }
}

fn check_command(ns: &str, name: &str, plan: &Plan, ex: &Executed) -> String {
    match (&plan.request_token, plan.wait_for_request_token) {
        (Some(t), true) => format!(
            "kubectl unstick ks/{name} -n {ns} --check --token {t}\n  (or: kubectl wait kustomization/{name} -n {ns} --for=jsonpath='{{.status.lastHandledReconcileAt}}'={t} --timeout={}s)",
            plan.wait_secs.round() as i64
        ),
        _ => format!(
            "kubectl unstick ks/{name} -n {ns} --check\n  (or: kubectl wait kustomization/{name} -n {ns} --for=jsonpath='{{.status.observedGeneration}}'={} --timeout={}s)",
            ex.generation_after.unwrap_or(0),
            plan.wait_secs.round() as i64
        ),
    }
}

/// What the proof wait judges against: our requestedAt on the Kustomization (or, after a
/// resume, the generation), and our requestedAt on its source when the plan wrote one.
/// What the proof wait expects after `plan`'s writes `ex` (our request token, else the
/// generation after our resume; the source's token; a fresh run after the writes began):
/// the one reading for `kubectl unstick` and cluster-loop-controller's levers.
pub fn expect<'a>(plan: &'a Plan, ex: &Executed) -> crate::proof::Expect<'a> {
    crate::proof::Expect {
        token: plan
            .request_token
            .as_deref()
            .filter(|_| plan.wait_for_request_token),
        generation: ex.generation_after.filter(|_| !plan.wait_for_request_token),
        source_token: plan.source_request(),
        // A plan whose fresh run starts after an in-flight one: judge only that fresh run.
        fresh_run_after: plan.fresh_run_at.and(ex.started_at),
    }
}

#[allow(clippy::too_many_arguments)]
async fn prove(
    conn: &Connection,
    scope: &Scope,
    ns: &str,
    name: &str,
    plan: &Plan,
    ex: &Executed,
    progress: &Progress,
    intr: &Interrupt,
) -> Result<(Proof, i32, Option<String>)> {
    let w = live::wait_proof(
        conn,
        scope,
        ns,
        name,
        &expect(plan, ex),
        Duration::from_secs_f64(plan.wait_secs.max(1.0)),
        progress,
        intr,
    )
    .await?;
    progress.finish();
    let code = match w.proof {
        Proof::Recovered => EXIT_OK,
        Proof::Interrupted => EXIT_INTERRUPTED,
        _ => EXIT_FINDING,
    };
    Ok((w.proof, code, w.last_seen))
}

async fn rediagnose(
    conn: &Connection,
    scope: &Scope,
    ns: &str,
    name: &str,
) -> Result<Option<Diagnosis>> {
    let (snap, _) = live::gather(conn, scope, &Reader::default()).await?;
    Ok(Engine::new(&snap).diagnose(ns, name))
}

/// Dependents of `root` (transitively, within the snapshot), grouped in waves by longest
/// dependsOn distance from `root`.
fn waves(snap: &Snapshot, root: &str) -> Vec<Vec<String>> {
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for k in &snap.kustomizations {
        let key = crate::diagnose::key_of(k);
        let ds = obj::arr(k, &["spec", "dependsOn"])
            .iter()
            .map(|d| {
                format!(
                    "{}/{}",
                    obj::s(d, &["namespace"])
                        .filter(|n| !n.is_empty())
                        .unwrap_or(obj::namespace(k)),
                    obj::s(d, &["name"]).unwrap_or("")
                )
            })
            .collect();
        deps.insert(key, ds);
    }
    // depth[k] = longest path from root through dependents; iterate to a fixpoint
    // (bounded by the number of nodes, so cycles cannot loop forever).
    let mut depth: BTreeMap<String, usize> = BTreeMap::new();
    depth.insert(root.to_string(), 0);
    for _ in 0..deps.len() {
        let mut changed = false;
        for (k, ds) in &deps {
            for d in ds {
                if let Some(&dd) = depth.get(d) {
                    let nd = dd + 1;
                    if nd <= deps.len() && depth.get(k).is_none_or(|&c| c < nd) && k != root {
                        depth.insert(k.clone(), nd);
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let max = depth.values().copied().max().unwrap_or(0);
    (1..=max)
        .map(|w| {
            depth
                .iter()
                .filter(|(_, d)| **d == w)
                .map(|(k, _)| k.clone())
                .collect()
        })
        .filter(|v: &Vec<String>| !v.is_empty())
        .collect()
}

async fn cascade(
    cli: &Cli,
    conn: &Connection,
    scope: &Scope,
    ns: &str,
    name: &str,
    intr: &Interrupt,
) -> Result<(Vec<CascadeItem>, i32)> {
    let (snap, _) = live::gather(conn, scope, &Reader::default()).await?;
    let ws = waves(&snap, &format!("{ns}/{name}"));
    let machine = cli.output.output.is_machine();
    let mut result = Vec::new();
    for (i, wave) in ws.iter().enumerate() {
        if !machine {
            out(&format!("cascade wave {}: {}\n", i + 1, wave.join(", ")))?;
        }
        let (snap, _) = live::gather(conn, scope, &Reader::default()).await?;
        let engine = Engine::new(&snap);
        let holding = engine.holding_workers();
        let mut started = Vec::new();
        for key in wave {
            let (kns, kname) = key.split_once('/').unwrap();
            let Some(d) = engine.diagnose(kns, kname) else {
                continue;
            };
            if d.class == Class::Healthy {
                started.push((key.clone(), None));
                continue;
            }
            let ks = find(&snap, kns, kname).unwrap();
            let token = obj::rfc3339_nano(Timestamp::now());
            let inputs = engine.lever_inputs(ks, &holding, snap.now, &token);
            let o = opts(cli);
            let plan = lever::cascade_plan(&d, &inputs, &o);
            if !plan.lever.mutates() || plan.lever == Lever::None {
                if !machine {
                    out(&format!("  {key}: not unstuck: {}\n", d.summary))?;
                }
                result.push(CascadeItem {
                    wave: i + 1,
                    kustomization: key.clone(),
                    proof: "not-unstuck".into(),
                    last_seen: Some(d.summary.clone()),
                });
                return Ok((result, EXIT_FINDING));
            }
            let ex = live::execute(conn, &plan, intr, false).await?;
            if intr.fired() {
                return Ok((result, EXIT_INTERRUPTED));
            }
            started.push((key.clone(), Some((plan, ex))));
        }
        let futs = started.iter().map(|(key, p)| async move {
            let Some((plan, ex)) = p else {
                return Ok::<_, Error>((key.clone(), Proof::Recovered, None));
            };
            let (kns, kname) = key.split_once('/').unwrap();
            let w = live::wait_proof(
                conn,
                scope,
                kns,
                kname,
                &expect(plan, ex),
                Duration::from_secs_f64(plan.wait_secs.max(1.0)),
                &Progress::for_output(format!("ks/{kname}"), &cli.output),
                intr,
            )
            .await?;
            Ok((key.clone(), w.proof, w.last_seen))
        });
        let outcomes = futures::future::join_all(futs).await;
        let mut failed = false;
        for o in outcomes {
            let (k, p, seen) = o?;
            if !machine {
                let why = seen
                    .as_deref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default();
                out(&format!("  {k}: {}{why}\n", proof_str(p)))?;
            }
            failed |= p != Proof::Recovered;
            result.push(CascadeItem {
                wave: i + 1,
                kustomization: k,
                proof: proof_str(p).to_string(),
                last_seen: seen.filter(|_| p != Proof::Recovered),
            });
        }
        if failed {
            return Ok((
                result,
                if intr.fired() {
                    EXIT_INTERRUPTED
                } else {
                    EXIT_FINDING
                },
            ));
        }
    }
    Ok((result, EXIT_OK))
}

async fn fleet(cli: &Cli, conn: &Connection, ctrl: ControllerRef) -> Result<i32> {
    let scope = Scope {
        namespace: if cli.all_namespaces {
            None
        } else {
            Some(conn.flux_namespace())
        },
        controller: ctrl,
    };
    let reader = Reader::default();
    let (mut snap, notes) = cluster_loop::signals::exit_on_signal(
        "nothing changed",
        live::gather(conn, &scope, &reader),
    )
    .await?;
    let (mut report, mut findings) = report::fleet_report(&snap, notes.clone(), &opts(cli));
    // Heal what an interrupted run left suspended, then report the fleet as it is after the
    // repair: each healed Kustomization is replaced in the snapshot by the object the resume
    // PATCH returned (no further read), and every row and the exit code are computed again.
    if !cli.dry_run {
        let targets: Vec<String> = report
            .items
            .iter()
            .filter(|i| i.diagnosis.suspended_by_unstick_at.is_some())
            .map(|i| i.kustomization.clone())
            .collect();
        let mut healed = Vec::new();
        for k in targets {
            let (kns, kname) = k.split_once('/').unwrap();
            if let Some(after) =
                live::resume_ours_from(conn, kns, kname, None, false, find(&snap, kns, kname))
                    .await?
            {
                if let Some(slot) = snap
                    .kustomizations
                    .iter_mut()
                    .find(|o| crate::diagnose::key_of(o) == k)
                {
                    *slot = after;
                }
                healed.push(k);
            }
        }
        if !healed.is_empty() {
            (report, findings) = report::fleet_report(&snap, notes, &opts(cli));
            report.healed = healed;
        }
    }
    if cli.problems {
        // Not healthy, or healthy as last written while a controller it needs is down.
        report
            .items
            .retain(|i| i.class != Class::Healthy || crate::diagnose::is_finding(&i.diagnosis));
    }
    let mut code = if findings { EXIT_FINDING } else { EXIT_OK };
    // No Kustomizations: a namespace that does not exist is the cluster's answer (exit 3);
    // an existing one without Kustomizations is said as such (exit 1: nothing was checked).
    let empty = if report.total == 0 {
        code = EXIT_FINDING;
        Some(match &scope.namespace {
            Some(ns) => {
                if conn.namespace_exists(ns).await? {
                    format!("no Kustomizations in namespace {ns}")
                } else {
                    format!(
                        "no Kustomizations in namespace {ns} (could not check the namespace exists)"
                    )
                }
            }
            None => "no Kustomizations in any namespace".to_string(),
        })
    } else {
        None
    };
    if let Some(e) = &empty {
        report.notes.push(e.clone());
    }
    if cli.output.output.is_machine() {
        print_machine(cli.output.output, &report)?;
    } else {
        let p = cli.output.stdout_painter();
        out(&report::controller_text(
            report.controller.as_ref(),
            &report.holding_workers,
        ))?;
        // What was repaired comes first: the rows below are the state after it.
        for h in &report.healed {
            out(&format!(
                "healed: resumed {h}, left suspended by an interrupted kubectl unstick run\n"
            ))?;
        }
        if let Some(e) = &empty {
            out(&format!("{e}\n"))?;
        } else {
            if !report.items.is_empty() {
                out(&report::fleet_table(&p, &report.items))?;
            }
            // A stopped controller is said with its lever, and the summary never calls
            // the fleet healthy while one is down: the rows show what it last wrote.
            out(&report::stopped_text(&p, &report.stopped_controllers))?;
            out(&report::fleet_summary(&report))?;
        }
        for n in report.notes.iter().filter(|n| Some(*n) != empty.as_ref()) {
            out(&format!("note: {n}\n"))?;
        }
    }
    Ok(code)
}
