//! The `kubectl cutover` flow: [`run`] over the parsed [`Cli`] (preflight, execute, `--finish`). main.rs only parses and calls it.
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use crate::execute::{self, Ending, ExecOptions};
use crate::preflight::{self, CheckResult, Preflight, Request};
use clap::Parser;
use cluster_loop::cli::{ClusterArgs, Connection};
use cluster_loop::error::{EXIT_FINDING, EXIT_OK, Error, Result};
use cluster_loop::flux::GitRepository;
use cluster_loop::output::{OutputArgs, Painter, print_machine};
use cluster_loop::refs::{Kind, ResourceRef};
use cluster_loop::signals::{Signals, exit_on_signal};
use cluster_loop::wait::Progress;

const EXAMPLES: &str = "\
Examples:
  # On ./demo --keep (runs as written in its shell): preflight moving prod's source to the same
  # Git server under another name; the demo's servers listen on this workstation, hence
  # --allow-loopback (a real server needs none)
  kubectl cutover gitrepository/flux-system -n prod --secret prod-creds --allow-loopback \\
      --dry-run --to \"$(kubectl get gitrepository/flux-system -n prod \\
      -o jsonpath='{.spec.url}' | sed 's/127.0.0.1/localhost/')\"

  # On ./demo --keep: verify that the root Kustomization applies the committed spec.url, and
  # remove a --hold-root hold (waits up to --timeout for a root that is mid-run)
  kubectl cutover gitrepository/flux-system -n prod --finish --timeout 5m

  # The examples below need your own Git server: gitea.prod.example.dev stands for it (the
  # demo has no server under a name the cluster resolves).

  # Preflight only: what the cluster runs, what the new server has, where the URL is authored
  kubectl cutover gitrepository/flux-system --to https://gitea.prod.example.dev/org/fleet.git \\
      --dry-run

  # Cut over with a local clone for history, and write the authored change into it
  kubectl cutover gitrepo/flux-system --to https://gitea.prod.example.dev/org/fleet.git \\
      --repo ~/src/fleet --write-patch --hold-root --yes

  # After the authored change has landed through the window: verify and remove the hold
  kubectl cutover gitrepo/flux-system --finish --timeout 5m

  # Also contact the new URL from a pod in flux-system, as source-controller will: its DNS
  # answer, TLS with the secret's ca.crt, the credential, and the branch head it sees
  kubectl cutover gitrepo/flux-system --to https://gitea.prod.example.dev/org/fleet.git \\
      --dry-run --verify-in-cluster

  # The same with your own git-capable probe image (needs sh, getent, base64, mktemp, git)
  kubectl cutover gitrepo/flux-system --to https://gitea.prod.example.dev/org/fleet.git \\
      --dry-run --verify-in-cluster --probe-image registry.example.com/tools/git:2.49

Exit codes:
  0  preflight passed (--dry-run), cutover verified, or --finish verified
  1  refused by preflight (also: --verify-in-cluster found split DNS, TLS, auth or a different
     head from inside the cluster), rolled back (failure or deadline), or --finish
     not verified (also when no root Kustomization applies the GitRepository: there is no
     committed spec.url to compare with) or not judged because the GitRepository or root
     Kustomization was still mid-reconcile at the --timeout deadline (the hold stays), or
     because source-controller or kustomize-controller runs no pod (said at once, with the
     command that starts it; nothing waited for or changed)
  2  usage error (bad reference, bad flag, --repo not a git repository)
  3  cluster or API error (kubeconfig, connection, RBAC, e.g. cannot create jobs for the
     in-cluster probe), the in-cluster probe did not finish before --probe-timeout, or the
     GitRepository does not exist in that namespace on that context (names both)
  130 interrupted (SIGINT/SIGTERM): before the patch (preflight, --finish, the in-cluster
      probe, which is deleted, or the prompt: nothing changed), or after it (the previous
      spec was restored first: rolled back)";

/// Move a Flux GitRepository to a new Git URL without rolling the cluster backwards.
///
/// Preflight (read-only): the commit the cluster runs (status.artifact.revision), the new
/// server's head for the same branch contacted with the credentials Flux will use, how the two
/// relate, the transport (http with credentials is refused), and the file that authors
/// spec.url in the root Kustomization's path (the self-reference: a live patch is reverted
/// unless that file changes). Then a merge patch of spec.url (field manager kubectl-cutover),
/// a reconcile request, and a watch until observedGeneration == generation, Ready=True and the
/// artifact revision is the same branch@sha1 as before. On failure, deadline or Ctrl-C the
/// previous spec is restored.
#[derive(Parser, Debug)]
#[command(name = "kubectl-cutover", bin_name = "kubectl cutover", version, after_help = EXAMPLES)]
pub struct Cli {
    /// The source: gitrepository/NAME, gitrepo/NAME or NAME (namespace from -n, default flux-system)
    source: String,

    /// The new Git URL (https:// recommended)
    #[arg(long, value_name = "URL", required_unless_present = "finish")]
    to: Option<String>,

    /// Secret (in the source's namespace) the source should use at the new URL; default: its
    /// current spec.secretRef. Also used for the preflight's contact with the new server.
    #[arg(long, value_name = "NAME", value_parser = cluster_loop::refs::parse_object_name)]
    secret: Option<String>,

    /// A local clone of the repository: history to compare commits, and the tree --write-patch
    /// changes. Read only unless --write-patch.
    #[arg(long, value_name = "PATH", value_parser = cluster_loop::cli::parse_git_work_tree)]
    repo: Option<PathBuf>,

    /// Allow a new server whose branch is ahead of what the cluster runs (deploys those commits)
    #[arg(long)]
    allow_forward: bool,

    /// Allow http:// with credentials (they travel in clear text; flux bootstrap refuses this)
    #[arg(long)]
    allow_insecure_http: bool,

    /// Allow a --to URL on the loopback (localhost, 127.0.0.0/8, ::1, ::ffff:127.0.0.1, 0.0.0.0,
    /// ::, or a name resolving only to them here). Only right when source-controller shares
    /// this machine's network (hostNetwork on a cluster running on this machine): in an
    /// ordinary pod, localhost is the pod itself
    #[arg(long)]
    allow_loopback: bool,

    /// Also contact the new URL from a pod in the source's namespace (a probe Job, deleted when
    /// done): DNS answer, TLS, credential and branch head as source-controller will see them
    #[arg(long)]
    verify_in_cluster: bool,

    /// Image of the in-cluster probe (needs sh, getent, base64, mktemp and git)
    #[arg(long, value_name = "IMAGE", default_value = cluster_loop::probe::GIT_IMAGE, requires = "verify_in_cluster")]
    probe_image: String,

    /// Deadline of the in-cluster probe (Go duration; also its activeDeadlineSeconds)
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION", requires = "verify_in_cluster")]
    probe_timeout: Duration,

    /// Print the preflight and the exact patches, change nothing
    #[arg(long)]
    dry_run: bool,

    /// Do not ask for confirmation (conflicts with --dry-run, which changes nothing, as in
    /// kubectl unstick)
    #[arg(short = 'y', long, conflicts_with = "dry_run")]
    yes: bool,

    /// Annotate the GitRepository kustomize.toolkit.fluxcd.io/reconcile=disabled so the root
    /// Kustomization cannot revert the new URL until --finish
    #[arg(long)]
    hold_root: bool,

    /// Write the authored spec.url change into --repo's working tree (you commit and push it)
    #[arg(long, requires = "repo")]
    write_patch: bool,

    /// After the authored change has landed: verify the root Kustomization applied it and
    /// remove the hold
    #[arg(long, conflicts_with_all = ["to", "dry_run", "write_patch", "hold_root", "verify_in_cluster"])]
    finish: bool,

    /// How long to wait for proof after the patch; with --finish, how long to wait for a
    /// mid-reconcile GitRepository or root Kustomization to settle before judging (Go duration)
    #[arg(long, default_value = "2m", value_parser = parse_duration, value_name = "DURATION")]
    timeout: Duration,

    #[command(flatten)]
    /// `-o table|json|yaml` and `--color`.
    pub output: OutputArgs,

    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Schema of `-o json|yaml` (camelCase keys; fields are only added within v1).
/// `apiVersion` of every cutover document (report and error).
pub const API_VERSION: &str = "cutover.cluster-loop.dev/v1";
/// Exit code of an interrupted run (nothing changed, or the patch was rolled back first).
use cluster_loop::signals::EXIT_INTERRUPTED;

/// `-o json|yaml` of a cutover run: `apiVersion`, `kind: CutoverReport`, `mode`
/// (`refused`, `dry-run`, `execute`, `nothing-to-do`, `drift`: see docs/cutover.md), the preflight, the forward merge patch (when one was
/// planned) and the execute result. A struct, so the keys keep this order (a
/// `serde_json::Value` map would sort them and push `kind` down).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CutoverReport<'a> {
    api_version: &'static str,
    kind: &'static str,
    mode: &'a str,
    preflight: &'a Preflight,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a execute::ExecReport>,
}

fn report_json<'a>(
    mode: &'a str,
    pre: &'a Preflight,
    patch: Option<&'a serde_json::Value>,
    result: Option<&'a execute::ExecReport>,
) -> CutoverReport<'a> {
    CutoverReport {
        api_version: API_VERSION,
        kind: "CutoverReport",
        mode,
        preflight: pre,
        patch,
        result,
    }
}

/// `-o json|yaml` of `--finish`: `apiVersion`, `kind: CutoverFinishReport`, then the
/// [`execute::FinishReport`] fields, in this order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct FinishOutput<'a> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    report: &'a execute::FinishReport,
}

fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    cluster_loop::duration::parse_go_duration(s).map_err(|e| e.to_string())
}

/// `-o json|yaml` of a run that ends with an error instead of a report (exit 1, e.g. a
/// GitRepository with no artifact yet; exit 3, a cluster/API error such as a GitRepository
/// that does not exist): the shared [`cluster_loop::output::ErrorDocument`] with `kind:
/// CutoverError` on stdout (none for usage errors), then `error: MESSAGE` on stderr.
pub fn exit_with_document(format: cluster_loop::output::OutputFormat, e: &Error) -> ! {
    cluster_loop::output::exit_with_document(format, API_VERSION, "CutoverError", e)
}

/// Runs `kubectl cutover` for the parsed `cli` (preflight, the move with its proof and
/// rollback, or `--finish`); returns the exit code (docs/cutover.md).
/// Errors: usage (2) and cluster/API (3) errors, as [`cluster_loop::error::Error`].
pub async fn run(cli: Cli) -> Result<i32> {
    let source = ResourceRef::parse_with_default(
        &cli.source,
        &[Kind::GitRepository],
        Some(Kind::GitRepository),
    )?;
    usage_checks(&cli)?;
    let conn = exit_on_signal("nothing changed", cli.cluster.connect()).await?;
    let ns = conn.flux_namespace();
    let out = cli.output.stdout_painter();

    if cli.finish {
        return finish_mode(&cli, &conn, &ns, &source, &out).await;
    }

    let to = cli.to.clone().unwrap_or_default();
    let req = request(&cli, &ns, &source, &to);
    let err_painter = cli.output.stderr_painter();
    // Installed before the preflight: from here on SIGINT no longer kills the process by
    // default, so every phase answers it itself (the preflight's read-only steps exit 130,
    // the in-cluster probe deletes its Job first, the confirmation prompt aborts).
    let mut signals = Some(Signals::install());
    let (before, pre) = {
        let progress = Progress::for_output("cutover preflight", &cli.output);
        let r = match signals.as_mut() {
            // The in-cluster probe deletes its Job on a signal itself (exit 130 below); the
            // reads before it exit 130 at once (preflight::preflight).
            Some(sig) if cli.verify_in_cluster => {
                preflight::preflight(&conn, &req, &progress, Some(sig)).await
            }
            // Read-only: SIGINT/SIGTERM end it at once, even while a request hangs.
            _ => {
                exit_on_signal(
                    "preflight stopped, nothing changed",
                    preflight::preflight(&conn, &req, &progress, None),
                )
                .await
            }
        };
        progress.finish();
        r?
    };
    if pre.interrupted {
        return Ok(EXIT_INTERRUPTED);
    }
    if pre.nothing_to_do {
        return nothing_to_do_mode(&cli, &pre, &ns, &source, &to, &out);
    }

    let before = resumed(before, &pre);

    let forward = execute::forward_patch(&pre, cli.hold_root, "<now>");
    let machine = cli.output.output.is_machine();
    if !machine {
        print_preflight(&pre, &out);
        println!(
            "\nplan: kubectl patch gitrepository -n {ns} {} --type merge --field-manager {} -p '{}'",
            source.name,
            crate::cluster::FIELD_MANAGER,
            forward
        );
    }

    write_authored(&cli, &pre)?;

    if !pre.go {
        if machine {
            print_machine(cli.output.output, &report_json("refused", &pre, None, None))?;
        } else {
            println!("\n{}", out.err("refused: see the failed checks above"));
        }
        return Ok(EXIT_FINDING);
    }
    if cli.dry_run {
        if machine {
            print_machine(
                cli.output.output,
                &report_json("dry-run", &pre, Some(&forward), None),
            )?;
        } else {
            println!(
                "\n{}",
                out.ok("preflight passed (--dry-run: nothing changed)")
            );
        }
        return Ok(EXIT_OK);
    }
    if !cli.yes
        && let Some(code) = confirm(&mut signals, &ns, &source, &to, &err_painter).await?
    {
        return Ok(code);
    }
    let progress = Progress::for_output(format!("gitrepository/{}", source.name), &cli.output);
    let report = execute::execute(
        &conn,
        &before,
        &pre,
        &ExecOptions {
            hold_root: cli.hold_root,
            timeout: cli.timeout,
        },
        &progress,
    )
    .await?;
    if machine {
        print_machine(
            cli.output.output,
            &report_json("execute", &pre, Some(&forward), Some(&report)),
        )?;
    } else {
        print_execute(&cli, &pre, &report, &ns, &source, &out);
    }
    Ok(match report.ending {
        Ending::CutOver => EXIT_OK,
        Ending::RolledBack => EXIT_FINDING,
        // 130 like every other interrupted run: the previous spec was restored first.
        Ending::Interrupted => EXIT_INTERRUPTED,
    })
}

/// The usage errors, decided before any kubeconfig is read (exit 2 on any machine).
fn usage_checks(cli: &Cli) -> Result<()> {
    if let Some(repo) = &cli.repo
        && !repo.is_dir()
    {
        return Err(Error::usage(format!(
            "--repo {}: not a directory (pass a local clone of the Git repository)",
            repo.display()
        )));
    }
    // Usage errors are decided before any kubeconfig is read (exit 2 on any machine).
    if !cli.finish {
        validate_to(cli.to.as_deref().unwrap_or_default())?;
        if cli.probe_timeout < Duration::from_secs(5) {
            return Err(Error::usage(format!(
                "--probe-timeout {:?} is too short: a probe pod needs at least 5s to be scheduled and run",
                cli.probe_timeout
            )));
        }
        if !cli.yes && !cli.dry_run && !std::io::stdin().is_terminal() {
            return Err(Error::usage(
                "refusing to change the cluster without confirmation: stdin is not a terminal; \
                 pass --yes (or --dry-run to only see the plan)",
            ));
        }
        cluster_loop::probe::validate_image(&cli.probe_image).map_err(|e| {
            Error::usage(format!(
                "--probe-image {:?} is not an image reference: {e}",
                cli.probe_image
            ))
        })?;
    }
    Ok(())
}

/// `--finish`: prove the root applies the committed spec.url, remove the hold; the exit code.
async fn finish_mode(
    cli: &Cli,
    conn: &Connection,
    ns: &str,
    source: &ResourceRef,
    out: &Painter,
) -> Result<i32> {
    // Interruptible as a whole: its only write (removing the hold) is one merge patch that
    // either landed or did not, and a second --finish completes it.
    let progress = Progress::for_output(format!("gitrepository/{}", source.name), &cli.output);
    let report = exit_on_signal(
        "--finish stopped; the hold removal (one patch) may or may not have landed: run --finish again",
        execute::finish(conn, ns, &source.name, cli.timeout, &progress)).await;
    progress.finish();
    let report = report?;
    if cli.output.output.is_machine() {
        print_machine(
            cli.output.output,
            &FinishOutput {
                api_version: API_VERSION,
                kind: "CutoverFinishReport",
                report: &report,
            },
        )?;
    } else {
        for n in &report.notes {
            println!("{}", n);
        }
        if report.hold_removed {
            println!("removed the kustomize.toolkit.fluxcd.io/reconcile hold");
        }
        println!(
            "{}",
            if report.verified {
                out.ok("verified: the committed and live spec.url agree")
            } else if report.reverted_cutover.is_some() {
                out.err("not verified: the cutover was reverted (see above)")
            } else if !report.stopped_controllers.is_empty() {
                out.err("not judged: a Flux controller is not running (see above); nothing changed")
            } else if report.in_progress_at_deadline.is_some() {
                out.warn("not judged: still mid-reconcile at the --timeout deadline (see above)")
            } else {
                out.err("not verified: see above")
            }
        );
    }
    Ok(if report.verified {
        EXIT_OK
    } else {
        EXIT_FINDING
    })
}

/// The preflight's request for the parsed `cli`: `source` in `ns` to `to`.
fn request(cli: &Cli, ns: &str, source: &ResourceRef, to: &str) -> Request {
    Request {
        namespace: ns.to_string(),
        name: source.name.clone(),
        to: to.to_string(),
        secret: cli.secret.clone(),
        repo: cli.repo.clone(),
        allow_forward: cli.allow_forward,
        allow_insecure_http: cli.allow_insecure_http,
        allow_loopback: cli.allow_loopback,
        verify_in_cluster: cli.verify_in_cluster.then(|| preflight::InClusterOptions {
            image: cli.probe_image.clone(),
            timeout: cli.probe_timeout,
        }),
    }
}

/// `--to` the live spec.url: nothing to do, or drift (the committed one differs, so the root
/// puts the committed value back: a finding); the exit code.
fn nothing_to_do_mode(
    cli: &Cli,
    pre: &Preflight,
    ns: &str,
    source: &ResourceRef,
    to: &str,
    out: &Painter,
) -> Result<i32> {
    let drift = pre.checks.iter().any(|c| c.id == "drift");
    if cli.output.output.is_machine() {
        print_machine(
            cli.output.output,
            &report_json(
                if drift { "drift" } else { "nothing-to-do" },
                pre,
                None,
                None,
            ),
        )?;
    } else if drift {
        print_preflight(pre, out);
        println!(
            "\n{}",
            out.warn(&format!(
                "gitrepository {ns}/{} already runs {to} live, but Git does not: {} unless \
                 the commit changes. Commit spec.url {to} in the file named above and push \
                 it, then run kubectl cutover gitrepository/{} -n {ns} --finish",
                source.name,
                if pre.current.held {
                    "the hold keeps it only until it is removed; then the root reverts it"
                } else if pre.current.root.as_ref().is_some_and(|r| r.suspended) {
                    "the root reverts it at its first apply after it is resumed"
                } else {
                    "the root Kustomization reverts it at its next apply"
                },
                source.name
            ))
        );
    } else {
        for c in pre.checks.iter().filter(|c| c.result != CheckResult::Ok) {
            println!("{} {:<9} {}", check_tag(c.result, out), c.id, c.message);
        }
        println!(
            "gitrepository {ns}/{} already points there ({to}); nothing to do{}",
            source.name,
            if pre.current.held {
                " but remove the hold (see above)"
            } else {
                ""
            }
        );
    }
    Ok(if drift { EXIT_FINDING } else { EXIT_OK })
}

/// The spec a failure restores: `before`, or, finishing a run a SIGKILL interrupted (--to the
/// URL it patched in), the spec before that run, not the half-done state.
fn resumed(before: GitRepository, pre: &Preflight) -> GitRepository {
    match &pre.interrupted_run {
        Some(m) if m.to == pre.to && !m.from.is_empty() => {
            let mut b = before;
            b.spec.url = m.from.clone();
            if let Some(old) = &m.from_secret_ref {
                b.spec.secret_ref = old
                    .clone()
                    .map(|name| cluster_loop::flux::LocalRef { name });
            }
            b
        }
        _ => before,
    }
}

/// `--write-patch`: the authored change written into `--repo`.
fn write_authored(cli: &Cli, pre: &Preflight) -> Result<()> {
    if cli.write_patch && !pre.authored_patch.is_empty() {
        let repo = cli
            .repo
            .as_ref()
            .expect("clap: --write-patch requires --repo");
        for p in &pre.authored_patch {
            let path = repo.join(&p.file);
            std::fs::write(&path, &p.new_text).map_err(|e| Error::io(&path, e))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Asks before patching (stdin is a terminal here: checked with the usage errors, before the
/// kubeconfig). `Some(exit code)` when the answer is no or a signal came.
async fn confirm(
    signals: &mut Option<Signals>,
    ns: &str,
    source: &ResourceRef,
    to: &str,
    err_painter: &Painter,
) -> Result<Option<i32>> {
    eprint!(
        "{} ",
        err_painter.bold(&format!(
            "Patch gitrepository {ns}/{} to {to}? [y/N]",
            source.name
        ))
    );
    let _ = std::io::stderr().flush();
    let read = tokio::task::spawn_blocking(|| {
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).map(|_| answer)
    });
    let answer = match signals.as_mut() {
        Some(sig) => tokio::select! {
            a = read => a,
            s = sig.recv() => {
                eprintln!("\naborted by {s}: nothing changed");
                return Ok(Some(EXIT_INTERRUPTED));
            }
        },
        None => read.await,
    }
    .map_err(|e| Error::Other(format!("cannot read the answer: {e}")))?
    .map_err(|e| Error::Other(format!("cannot read the answer: {e}")))?;
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        eprintln!("aborted: nothing changed");
        return Ok(Some(EXIT_FINDING));
    }
    Ok(None)
}

/// The text of an executed cutover: what was proven or rolled back, and what to do next.
fn print_execute(
    cli: &Cli,
    pre: &Preflight,
    report: &execute::ExecReport,
    ns: &str,
    source: &ResourceRef,
    out: &Painter,
) {
    match report.ending {
        Ending::CutOver => {
            println!("\n{} {}", out.ok("cut over:"), report.message);
            if pre.authored_patch.is_empty() && pre.authored.is_some() && cli.hold_root {
                // The hold (kustomize.toolkit.fluxcd.io/reconcile: disabled) stays until
                // --finish has seen the root apply the committed spec.url.
                println!(
                    "the committed spec.url already agrees; the root is still held \
                     (kustomize.toolkit.fluxcd.io/reconcile: disabled): run kubectl cutover \
                     gitrepository/{} -n {ns} --finish to prove the root applies it and \
                     remove the hold",
                    source.name
                );
            } else if pre.authored_patch.is_empty() && pre.authored.is_some() && pre.current.held {
                // A hold this run did not add (a killed --hold-root run's) is still there.
                println!(
                    "the committed spec.url already agrees, but the GitRepository still \
                     carries the hold {}: disabled, so the root applies nothing to it: run \
                     kubectl cutover gitrepository/{} -n {ns} --finish to prove the root \
                     applies it and remove the hold",
                    preflight::RECONCILE_ANNOTATION,
                    source.name
                );
            } else if pre.authored_patch.is_empty() && pre.authored.is_some() {
                println!("the committed spec.url already agrees; nothing more to do");
            } else if pre.authored_patch.is_empty() {
                println!(
                    "no committed spec.url was compared (see the authored check above): if \
                     this GitRepository is defined in Git, change its spec.url there too"
                );
            } else {
                println!(
                    "next: commit the authored change{} and push it through the new URL; \
                     then run: kubectl cutover gitrepository/{} -n {ns} --finish",
                    if cli.write_patch {
                        " written to --repo"
                    } else {
                        " shown above"
                    },
                    source.name
                );
            }
            // --finish reads the root's applied revision; a suspended root applies none.
            if let Some(root) = pre.current.root.as_ref().filter(|r| r.suspended) {
                println!(
                    "{}",
                    out.warn(&preflight::suspended_root_message(&root.name))
                );
            }
        }
        Ending::RolledBack | Ending::Interrupted => {
            println!("\n{} {}", out.err("rolled back:"), report.message);
            if let Some(p) = &report.rollback_patch {
                println!("restored with merge patch {p}");
            }
            if let Some(origin) = &pre.current.hold_origin {
                // The hold was there before this run, so the rollback kept it.
                println!(
                    "{}",
                    out.warn(&preflight::hold_message(ns, &source.name, origin))
                );
            }
        }
    }
}

/// `--to` must be a URL source-controller accepts (api/v1 GitRepositorySpec.URL
/// `^(http|https|ssh)://.*$`) with a host, and must not carry credentials: they would be stored
/// in spec.url in clear text and printed by every `kubectl get -o yaml`. Checked before the
/// cluster is contacted; errors are usage errors (exit 2).
fn validate_to(to: &str) -> Result<()> {
    let parsed = url::Url::parse(to).map_err(|e| {
        Error::usage(format!(
            "--to {to:?} is not a URL ({e}): pass https://HOST/ORG/REPO.git"
        ))
    })?;
    match parsed.scheme() {
        "https" | "http" => {}
        "ssh" => {
            return Err(Error::usage(format!(
                "--to {to}: ssh:// sources are not supported by kubectl cutover yet; use https://"
            )));
        }
        other => {
            return Err(Error::usage(format!(
                "--to {to}: scheme {other}:// is not one source-controller accepts (http, https, ssh)"
            )));
        }
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Error::usage(format!("--to {to}: the URL has no host")));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        let mut redacted = parsed.clone();
        let _ = redacted.set_username("");
        let _ = redacted.set_password(None);
        return Err(Error::usage(format!(
            "--to: the URL carries credentials, which would be stored in spec.url and shown by \
             every `kubectl get`; pass {redacted} and put the credentials in the source Secret \
             (--secret NAME with username/password or bearerToken)"
        )));
    }
    Ok(())
}

/// A check's tag as every text line shows it: `ok  `, `warn`, `FAIL` (the JSON `result`).
fn check_tag(r: CheckResult, out: &Painter) -> String {
    match r {
        CheckResult::Ok => out.ok("ok  "),
        CheckResult::Warn => out.warn("warn"),
        CheckResult::Fail => out.err("FAIL"),
    }
}

fn print_preflight(pre: &Preflight, out: &Painter) {
    println!("{} {} -> {}", out.bold("cutover"), pre.source, pre.to);
    println!("  runs {} from {}", pre.current.revision, pre.current.url);
    if let Some(root) = &pre.current.root {
        println!(
            "  {} root Kustomization {} (path {}){}{}",
            if pre.current.root_found_by.as_deref() == Some("path") {
                "defined (not applied yet) in the path of"
            } else {
                "applied by"
            },
            root.name,
            root.path,
            if root.same_source {
                ": the self-reference"
            } else {
                ""
            },
            root.last_failure
                .as_deref()
                .map(|f| format!("; its last run failed: {f}"))
                .unwrap_or_default()
        );
    }
    for c in &pre.current.consumers {
        println!(
            "  consumer {} at {}",
            c.name,
            c.last_applied_revision
                .as_deref()
                .unwrap_or("(never applied)")
        );
    }
    println!();
    for c in &pre.checks {
        println!("{} {:<9} {}", check_tag(c.result, out), c.id, c.message);
    }
    if let Some(ic) = &pre.in_cluster {
        print_in_cluster(ic);
    }
    for p in &pre.authored_patch {
        println!("\nauthored change ({}):\n{}", p.file, p.diff.trim_end());
    }
}

fn print_in_cluster(ic: &crate::incluster::InCluster) {
    let ips = |v: &[std::net::IpAddr]| {
        v.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    use crate::incluster::Step;
    // A step's result, with its detail (CA source, auth scheme) only when the probe reached it.
    let step = |s: Step, detail: Option<String>| {
        let word = match s {
            Step::Ok => "ok",
            Step::Failed => "FAILED",
            Step::NotReached => "not reached",
            Step::NotApplicable => "n/a",
        };
        let detail = detail.filter(|_| s != Step::NotReached).unwrap_or_default();
        format!("{word}{detail}")
    };
    println!(
        "\nin-cluster probe {} (image {}{}; deleted):",
        ic.probe,
        ic.image,
        ic.pod
            .as_deref()
            .map(|p| format!(", pod {p}"))
            .unwrap_or_default()
    );
    let dns = if ic.addresses.is_empty() {
        serde_json::to_value(ic.dns_status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    } else {
        ips(&ic.addresses)
    };
    let ws = if ic.workstation_addresses.is_empty() {
        "does not resolve".to_string()
    } else {
        ips(&ic.workstation_addresses)
    };
    println!(
        "  dns   {} -> {dns} in the cluster; workstation: {ws}",
        ic.host
    );
    let ca = ic.ca_source.as_deref().map(|c| {
        format!(
            " ({})",
            match c {
                "image+secret" => "the image's CA bundle plus the secret's ca.crt",
                "secret" => "the secret's ca.crt only: no CA bundle in the image",
                "image" => "the image's CA bundle",
                "unwritable" => "the image's CA bundle: /tmp not writable for ca.crt",
                other => other,
            }
        )
    });
    println!("  tls   {}", step(ic.tls, ca));
    let scheme = ic.auth_scheme.as_deref().map(|a| format!(" ({a})"));
    println!("  auth  {}", step(ic.auth, scheme));
    println!(
        "  head  {}",
        match (&ic.head, ic.matches_cluster) {
            (Some(h), Some(true)) => format!("{h} (== the commit the cluster runs)"),
            (Some(h), _) => format!("{h} (differs from the commit the cluster runs)"),
            (None, _) => "not seen".into(),
        }
    );
}
