//! The `kubectl gitops pull` flow: [`run`] over the parsed [`Cli`]. main.rs only parses and
//! calls it.
//!
//! Order: usage (the reference, `--repo`, `--remote`: exit 2 before any kubeconfig is read);
//! the checkout's facts; the GitRepository, its credentials and the automations (exit 3 on
//! API errors); the fetch of the branch Flux reads with Flux's credentials into a scratch
//! repository (exit 3 when the server cannot be read from here); history and the decision;
//! without `--dry-run`, the remote-tracking ref stored and, when the decision is a
//! fast-forward, `git merge --ff-only`; then the warnings about the next push, read on the
//! tree the branch has afterwards.

use std::path::{Path, PathBuf};

use clap::Parser;
use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::{EXIT_FINDING, EXIT_OK, Error, Result};
use cluster_loop::output::{OutputArgs, print_machine, write_stdout};
use cluster_loop::refs::{Kind, ResourceRef};
use cluster_loop::signals::ExitOnSignal;
use cutover::git::{GitRunner, Scratch};

use crate::checkout::Checkout;
use crate::history::{self, Commit, SetterLine};
use crate::plan::{self, Action, Facts, PushFacts};
use crate::report::{API_VERSION, CheckoutReport, Fetched, Outcome, PullReport};
use crate::source::{self, Automation, Source};

/// `--help` examples. Those marked `./demo --keep` run as written in the shell the demo
/// prints (its KUBECONFIG and PATH exported): they clone the fleet the demo's GitRepository
/// reads and step back over the real image-automation-controller's commit.
const EXAMPLES: &str = "\
Examples:
  # On ./demo --keep: clone the fleet Flux reads, then step back over the
  # automation's commit and the fix after it (your checkout, behind)
  git clone -q \"$(kubectl get gitrepository/flux-system -n flux-system \\
      -o jsonpath='{.spec.url}')\" fleet && git -C fleet reset -q --hard HEAD~2

  # On ./demo --keep: the plan: which commits the automation made, the setter
  # lines each changed, the fast-forward (changes nothing)
  kubectl gitops pull --repo fleet --dry-run

  # On ./demo --keep: bring them home (a fast-forward of main), then see the
  # same as JSON (up to date now)
  kubectl gitops pull gitrepository/flux-system -n flux-system --repo fleet
  kubectl gitops pull --repo fleet -o json

  # From inside your own checkout of the fleet, for another GitRepository
  kubectl gitops pull gitrepository/apps -n team-a

Exit codes:
  0   pulled (a fast-forward) or already up to date, and no warning
  1   refused (diverged, dirty work tree, operation in progress, untracked files in the
      way, detached HEAD, another branch, a source that pins a tag or commit: nothing
      changed), or a warning about the next push (origin is not the server Flux reads, a
      setter line the automation will rewrite, a push branch that is not the checkout's)
  2   usage: a bad reference or flag, --repo not a Git checkout (before any kubeconfig
      is read)
  3   cluster or API error (the GitRepository or its Secret does not exist, RBAC), or
      the server Flux reads cannot be read from this workstation
  130 interrupted (SIGINT/SIGTERM)";

/// Bring image automation's commits home, safely: fetch the branch the GitRepository reads
/// (its spec.url, ref and secretRef credentials) into the local checkout under a remote of
/// its own, list the commits the local branch lacks (marking the ImageUpdateAutomations'
/// commits and the setter lines each changed), fast-forward when possible, refuse a
/// diverged branch or a dirty work tree (changing nothing), and warn before the next push
/// goes astray.
#[derive(Parser, Debug)]
#[command(name = "kubectl-gitops-pull", bin_name = "kubectl gitops pull", version, after_help = EXAMPLES)]
pub struct Cli {
    /// The source: gitrepository/NAME, gitrepo/NAME or NAME (namespace from -n, default
    /// flux-system)
    #[arg(default_value = "flux-system")]
    source: String,

    /// The local checkout (a directory in its work tree)
    #[arg(long, value_name = "PATH", default_value = ".")]
    repo: PathBuf,

    /// The remote that keeps the server Flux reads in the checkout (never origin)
    #[arg(long, value_name = "NAME", default_value = "flux", value_parser = parse_remote)]
    remote: String,

    /// Show the plan: fetch into a scratch repository, store and change nothing
    #[arg(long)]
    dry_run: bool,

    #[command(flatten)]
    /// `-o table|json|yaml` and `--color`.
    pub output: OutputArgs,

    #[command(flatten)]
    cluster: ClusterArgs,
}

/// `--remote`: a remote name git accepts (`git check-ref-format refs/remotes/NAME/x` rules:
/// no `/`, blank, `..`, `:`, `~`, `^`, `?`, `*`, `[`, `\`, not starting with `-` or `.`), and
/// never `origin`, which pull does not rewrite.
fn parse_remote(s: &str) -> std::result::Result<String, String> {
    if s == "origin" {
        return Err(
            "pull keeps the server Flux reads under a remote of its own and never rewrites \
             origin; pick another name (default: flux)"
                .into(),
        );
    }
    let bad = s.is_empty()
        || s.starts_with(['-', '.'])
        || s.ends_with(".lock")
        || s.contains("..")
        || s.chars().any(|c| {
            c.is_whitespace()
                || c.is_control()
                || matches!(c, '/' | ':' | '~' | '^' | '?' | '*' | '[' | '\\')
        });
    if bad {
        return Err(format!(
            "{s:?} is not a remote name git accepts (letters, digits, - and _; e.g. flux)"
        ));
    }
    Ok(s.to_string())
}

/// Everything the Git side found, before the warnings.
struct GitSide {
    fetched: Fetched,
    commits: Vec<Commit>,
    local_only: u64,
    decision: plan::Decision,
    outcome: Outcome,
    /// The tree the warnings read: the work tree, or (`--dry-run` fast-forward) the fetched
    /// head's tree exported to a temporary directory.
    tree: Tree,
}

enum Tree {
    Work(PathBuf),
    Exported(tempfile::TempDir),
}

impl Tree {
    fn path(&self) -> &Path {
        match self {
            Tree::Work(p) => p,
            Tree::Exported(d) => d.path(),
        }
    }
}

fn git_error(url: &str, source: &Source, e: &cutover::git::RemoteFailure) -> Error {
    let secret = source
        .secret
        .as_ref()
        .map(|s| format!("{}/{s}", source.namespace));
    Error::Cluster(format!(
        "cannot read the branch Flux reads: {}",
        e.explain_sent(
            &crate::url::redacted(url),
            secret.as_deref(),
            source.credentials.has_auth()
        )
    ))
}

/// The Git side, blocking: fetch into a scratch repository, history, decision, and (without
/// `dry_run`) the stored ref and the fast-forward.
fn git_side(
    checkout: &Checkout,
    source: &Source,
    branch: &str,
    remote: &str,
    automations: &[Automation],
    dry_run: bool,
) -> Result<GitSide> {
    let runner = GitRunner::new(source.credentials.clone())
        .map_err(|e| Error::Other(format!("cannot prepare git: {e}")))?;
    let scratch = Scratch::new(&runner, Some(&checkout.root)).map_err(Error::Other)?;
    eprintln!(
        "fetching {branch} from {} (GitRepository {}/{})",
        crate::url::redacted(&source.url),
        source.namespace,
        source.name
    );
    runner
        .fetch_branch(scratch.path(), &source.url, branch, remote)
        .map_err(|e| git_error(&source.url, source, &e))?;
    let refname = format!("refs/remotes/{remote}/{branch}");
    let remote_head = String::from_utf8_lossy(
        &history::git_in(
            &runner,
            scratch.path(),
            &["rev-parse", "--verify", &format!("{refname}^{{commit}}")],
        )
        .map_err(Error::Other)?,
    )
    .trim()
    .to_string();
    let local_head = checkout.head();
    let local_branch = checkout.branch();
    let tracking = format!("{remote}/{branch}");
    let (behind, ahead) = match &local_head {
        Some(l) => (
            history::count(&runner, &scratch, &format!("{l}..{remote_head}"))
                .map_err(Error::Other)?,
            history::count(&runner, &scratch, &format!("{remote_head}..{l}"))
                .map_err(Error::Other)?,
        ),
        None => (
            history::count(&runner, &scratch, &remote_head).map_err(Error::Other)?,
            0,
        ),
    };
    let commits = history::incoming(
        &runner,
        &scratch,
        local_head.as_deref(),
        &remote_head,
        automations,
    )
    .map_err(Error::Other)?;
    let both_changed = match (&local_head, ahead > 0 && behind > 0) {
        (Some(l), true) => {
            history::both_changed(&runner, &scratch, l, &remote_head).map_err(Error::Other)?
        }
        _ => Vec::new(),
    };
    let dirty = checkout.dirty().map_err(Error::Other)?;
    let untracked_in_the_way = if behind > 0 {
        let incoming: std::collections::BTreeSet<String> = match &local_head {
            Some(l) => history::changed_files(&runner, &scratch, l, &remote_head),
            None => history::git_in(
                &runner,
                scratch.path(),
                &["ls-tree", "-r", "--name-only", &remote_head],
            )
            .map(|o| {
                String::from_utf8_lossy(&o)
                    .lines()
                    .map(String::from)
                    .collect()
            }),
        }
        .map_err(Error::Other)?
        .into_iter()
        .collect();
        checkout
            .untracked()
            .map_err(Error::Other)?
            .into_iter()
            .filter(|u| incoming.contains(u))
            .collect()
    } else {
        Vec::new()
    };
    let facts = Facts {
        source_branch: Some(branch.to_string()),
        pinned: None,
        local_branch: local_branch.clone(),
        local_head: local_head.clone(),
        remote_head: remote_head.clone(),
        tracking: tracking.clone(),
        behind,
        ahead,
        both_changed,
        dirty,
        in_progress: checkout.in_progress(),
        untracked_in_the_way,
    };
    let mut decision = plan::decide(&facts);
    let mut outcome = Outcome {
        changed: false,
        head_before: local_head.clone(),
        head_after: local_head.clone(),
    };
    let mut fetched = Fetched {
        remote: remote.to_string(),
        refname: refname.clone(),
        head: remote_head.clone(),
        from: crate::url::redacted(&source.url),
        loopback: cutover::incluster::url_loopback_fact(&source.url).map(|fact| {
            format!(
                "{fact}: read from this workstation's loopback; source-controller reads its \
                 own, which is the same server only when it shares this machine's network"
            )
        }),
        stored: false,
        remote_change: None,
    };
    let mut tree = Tree::Work(checkout.root.clone());
    if dry_run {
        if decision.rule == "diverged" {
            decision.message.push_str(&format!(
                " (--dry-run stored nothing: a run without it stores {tracking} for the rebase \
                 and changes nothing else)"
            ));
        }
        if decision.action == Action::FastForward {
            let dir = tempfile::Builder::new()
                .prefix("kubectl-gitops-pull-")
                .tempdir()
                .map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
            scratch
                .export_tree(&runner, &remote_head, dir.path())
                .map_err(Error::Other)?;
            tree = Tree::Exported(dir);
        }
        return Ok(GitSide {
            fetched,
            commits,
            local_only: ahead,
            decision,
            outcome,
            tree,
        });
    }
    // From here on the checkout changes: first the remote-tracking ref (nothing a user
    // works with), then, for a fast-forward only, the branch.
    let change = checkout
        .store_fetched(remote, &source.url, scratch.path(), branch)
        .map_err(|e| Error::Other(format!("{}: {e}", checkout.root.display())))?;
    fetched.stored = true;
    fetched.remote_change = Some(change);
    if decision.action == Action::FastForward {
        eprintln!("{}", decision.message);
        match checkout.fast_forward(&refname) {
            Ok(()) => {
                let after = checkout.head();
                outcome.changed = after != local_head;
                outcome.head_after = after;
                if outcome.head_after.as_deref() != Some(remote_head.as_str()) {
                    return Err(Error::Other(format!(
                        "{}: git merge --ff-only {tracking} left HEAD at {}, not {remote_head}",
                        checkout.root.display(),
                        outcome.head_after.as_deref().unwrap_or("nothing")
                    )));
                }
            }
            Err(e) => {
                decision = plan::Decision {
                    action: Action::Refused,
                    rule: "git-refused",
                    message: format!("git refused the fast-forward ({e})"),
                    files: Vec::new(),
                    command: decision.command,
                };
            }
        }
    }
    Ok(GitSide {
        fetched,
        commits,
        local_only: ahead,
        decision,
        outcome,
        tree,
    })
}

/// The setter lines of `tree` the active automations will rewrite: markercheck's simulation
/// ([`markercheck::check::run`]) with the live ImagePolicies and only these automations (their
/// `spec.update.path` and policy selectors), as image-automation-controller runs it. Paths are
/// relative to `tree`.
fn rewrites(
    tree: &Path,
    automations: &[Automation],
    policies: &[markercheck::objects::ImagePolicy],
    default_ns: &str,
) -> Vec<SetterLine> {
    let active: Vec<markercheck::objects::ImageUpdateAutomation> = automations
        .iter()
        .filter(|a| !a.suspended)
        .map(|a| a.setters.clone())
        .collect();
    if active.is_empty() {
        return Vec::new();
    }
    let cfg = markercheck::check::Config {
        paths: vec![tree.to_path_buf()],
        default_namespace: default_ns.to_string(),
        extra: markercheck::objects::Objects {
            policies: policies.to_vec(),
            automations: active,
            ..Default::default()
        },
        ignore_tree_objects: true,
        max_file_size: markercheck::scan::DEFAULT_MAX_FILE_SIZE,
        repo_root: Some(tree.to_path_buf()),
        ..Default::default()
    };
    let report = markercheck::check::run(&cfg);
    let canonical = tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf());
    report
        .changes
        .iter()
        .flat_map(|fc| {
            let file = fc
                .abs
                .strip_prefix(tree)
                .or_else(|_| fc.abs.strip_prefix(&canonical))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| fc.file.clone());
            fc.changes.iter().map(move |c| SetterLine {
                file: file.clone(),
                line: c.line,
                setter: c.setter.clone(),
                old: c.old.clone(),
                new: c.new.clone(),
            })
        })
        .collect()
}

/// Runs `kubectl gitops pull` for the parsed `cli`; returns the exit code (see `--help`).
/// Errors: usage (2) and cluster/API/Git server (3) errors.
pub async fn run(cli: Cli) -> Result<i32> {
    // Usage, before any kubeconfig is read.
    let source_ref = ResourceRef::parse_with_default(
        &cli.source,
        &[Kind::GitRepository],
        Some(Kind::GitRepository),
    )?;
    cluster_loop::cli::parse_git_work_tree(&cli.repo.to_string_lossy())
        .map_err(|e| Error::usage(format!("--repo {e}")))?;
    let checkout = Checkout::open(&cli.repo).map_err(|e| Error::usage(format!("--repo {e}")))?;

    let reading = ExitOnSignal::start("nothing changed");
    let conn = cli.cluster.connect().await?;
    let ns = conn.flux_namespace();
    let source = source::read_source(&conn, &ns, &source_ref.name).await?;
    let (automations, policies, mut notes) = source::automations(&conn, &source).await?;
    drop(reading);

    let origin = checkout.remote_url("origin");
    let checkout_report = CheckoutReport {
        path: checkout.root.display().to_string(),
        branch: checkout.branch(),
        head: checkout.head(),
        origin: origin.as_deref().map(crate::url::redacted),
        origin_same_repository: origin
            .as_deref()
            .map(|o| crate::url::same_repository(o, &source.url)),
    };
    if origin.is_none() {
        notes.push(format!(
            "{} has no origin remote: a plain git push has nowhere to go",
            checkout.root.display()
        ));
    }

    let (fetched, commits, local_only, decision, outcome, tree) = match source.branch.clone() {
        None => {
            let d = plan::decide(&Facts {
                pinned: source.pinned.clone(),
                ..Facts::default()
            });
            let head = checkout.head();
            (
                None,
                Vec::new(),
                0,
                d,
                Outcome {
                    changed: false,
                    head_before: head.clone(),
                    head_after: head,
                },
                Tree::Work(checkout.root.clone()),
            )
        }
        Some(branch) => {
            let (c, s, r, a) = (
                checkout.clone(),
                source.clone(),
                cli.remote.clone(),
                automations.clone(),
            );
            let dry_run = cli.dry_run;
            // Reads first (fetch, history): SIGINT ends them at once. The two writes at the
            // end are git's own (a ref update, a fast-forward), each atomic; a signal then
            // reaches git too, which finishes or leaves things as they were.
            let _guard = ExitOnSignal::start(if dry_run {
                "nothing changed"
            } else {
                "check `git status` in the checkout (pull only stores the remote-tracking ref and fast-forwards)"
            });
            let g = tokio::task::spawn_blocking(move || git_side(&c, &s, &branch, &r, &a, dry_run))
                .await
                .map_err(|e| Error::Other(format!("the git task failed: {e}")))??;
            (
                Some(g.fetched),
                g.commits,
                g.local_only,
                g.decision,
                g.outcome,
                g.tree,
            )
        }
    };

    let found = rewrites(tree.path(), &automations, &policies, &source.namespace);
    let warnings = plan::warnings(&PushFacts {
        origin: origin.clone(),
        flux_url: &source.url,
        source: format!("{}/{}", source.namespace, source.name),
        remote: &cli.remote,
        local_branch: checkout_report.branch.as_deref(),
        automations: &automations,
        rewrites: &found,
    });
    drop(tree);
    let exit_code = if decision.action == Action::Refused || !warnings.is_empty() {
        EXIT_FINDING
    } else {
        EXIT_OK
    };
    let report = PullReport {
        api_version: API_VERSION,
        kind: "PullReport",
        dry_run: cli.dry_run,
        source,
        checkout: checkout_report,
        fetched,
        automations,
        commits,
        local_only,
        decision,
        result: outcome,
        warnings,
        notes,
        exit_code,
    };
    if cli.output.output.is_machine() {
        print_machine(cli.output.output, &report)?;
    } else {
        write_stdout(&crate::report::table(&report, &cli.output.stdout_painter()))?;
        for n in &report.notes {
            eprintln!("note: {n}");
        }
    }
    Ok(exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_names() {
        assert_eq!(parse_remote("flux"), Ok("flux".into()));
        assert_eq!(parse_remote("flux-prod_2"), Ok("flux-prod_2".into()));
        for bad in ["origin", "", "a/b", "-x", ".x", "a..b", "a b", "x.lock"] {
            assert!(parse_remote(bad).is_err(), "{bad}");
        }
    }
}
