//! The `-o json|yaml` document (`apiVersion: pull.cluster-loop.dev/v1`, `kind: PullReport`,
//! camelCase keys, fields only added within v1) and the table output.
//!
//! Shape: `{apiVersion, kind, dryRun, source{namespace, name, url, branch, pinned?, secret?,
//! revision?}, checkout{path, branch?, head?, origin?, originSameRepository?},
//! fetched?{remote, ref, head, from, loopback?, stored, remoteChange?},
//! automations[{namespace, name, authorName, authorEmail, checkoutBranch, pushBranch,
//! pushRefspec?, suspended, lastPushCommit?}], commits[{sha, author, email, subject,
//! madeBy?{automation, pushBranch?, evidence[]}, setterLines[{file, line, setter, old, new}]}],
//! localOnly, decision{action, rule, message, files?, command?}, result{changed, headBefore?,
//! headAfter?}, warnings[{kind, message, fix}], notes[], exitCode}`.

use cluster_loop::output::{Painter, Style, render_table};

use crate::checkout::RemoteChange;
use crate::history::Commit;
use crate::plan::{Action, Decision, Warning};
use crate::source::{Automation, Source};

/// `apiVersion` of every pull document (report and error).
pub const API_VERSION: &str = "pull.cluster-loop.dev/v1";

/// The checkout as the report shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutReport {
    /// The work tree's top-level directory.
    pub path: String,
    /// The checked-out branch (`None`: detached HEAD).
    pub branch: Option<String>,
    /// HEAD before the run.
    pub head: Option<String>,
    /// `origin`'s URL, userinfo removed (`None`: no origin).
    pub origin: Option<String>,
    /// Whether `origin` names the repository Flux reads ([`crate::url::same_repository`]).
    pub origin_same_repository: Option<bool>,
}

/// What was fetched from the server Flux reads.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fetched {
    /// The remote pull keeps for it (`flux`).
    pub remote: String,
    /// The remote-tracking ref (`refs/remotes/flux/main`).
    #[serde(rename = "ref")]
    pub refname: String,
    /// The branch head fetched.
    pub head: String,
    /// The URL fetched (`spec.url`, userinfo removed).
    pub from: String,
    /// When `spec.url` is the loopback: the fact, and that this workstation's loopback was
    /// read (cutover's [`cutover::incluster::url_loopback_fact`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loopback: Option<String>,
    /// Whether the ref was stored in the checkout (false with `--dry-run`).
    pub stored: bool,
    /// How the remote was set up (`None` with `--dry-run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_change: Option<RemoteChange>,
}

/// What the run changed.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// True when the checked-out branch moved.
    pub changed: bool,
    /// HEAD before.
    pub head_before: Option<String>,
    /// HEAD after.
    pub head_after: Option<String>,
}

/// The `-o json|yaml` document of a run.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullReport {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// `PullReport`.
    pub kind: &'static str,
    /// `--dry-run`: the plan only, nothing stored or changed.
    pub dry_run: bool,
    /// What Flux reads.
    pub source: Source,
    /// The local checkout.
    pub checkout: CheckoutReport,
    /// The fetch (`None` when nothing was fetched: the source pins no branch).
    pub fetched: Option<Fetched>,
    /// The ImageUpdateAutomations that update the source.
    pub automations: Vec<Automation>,
    /// The commits the local branch lacks, oldest first.
    pub commits: Vec<Commit>,
    /// Local commits the server Flux reads lacks.
    pub local_only: u64,
    /// The decision.
    pub decision: Decision,
    /// What changed.
    pub result: Outcome,
    /// Warnings about the next push (findings).
    pub warnings: Vec<Warning>,
    /// Notes (how things were read).
    pub notes: Vec<String>,
    /// The exit code of the run.
    pub exit_code: i32,
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(7)]
}

/// The table output (stdout).
pub fn table(r: &PullReport, p: &Painter) -> String {
    let mut out = String::new();
    let s = &r.source;
    out.push_str(&format!(
        "{} {}/{}: {} {}{}\n",
        p.bold("GitRepository"),
        s.namespace,
        s.name,
        crate::url::redacted(&s.url),
        match (&s.branch, &s.pinned) {
            (Some(b), _) => format!("branch {b}"),
            (None, Some(pin)) => pin.clone(),
            _ => String::new(),
        },
        match &s.secret {
            Some(sec) => format!(", credentials from secret {}/{sec}", s.namespace),
            None => String::new(),
        }
    ));
    if let Some(rev) = &s.revision {
        out.push_str(&format!("  the cluster runs {rev}\n"));
    }
    let c = &r.checkout;
    out.push_str(&format!(
        "{} {} on {} at {}\n",
        p.bold("checkout"),
        c.path,
        c.branch.as_deref().unwrap_or("(detached HEAD)"),
        c.head.as_deref().map(short).unwrap_or("(no commit)")
    ));
    match (&c.origin, c.origin_same_repository) {
        (Some(o), Some(true)) => {
            out.push_str(&format!("  origin {o}: the repository Flux reads\n"))
        }
        (Some(o), _) => out.push_str(&format!(
            "  origin {o}: {}\n",
            p.warn("NOT the repository Flux reads")
        )),
        (None, _) => out.push_str("  no origin remote\n"),
    }
    if let Some(f) = &r.fetched {
        out.push_str(&format!(
            "{} {} into {} at {}{}\n",
            p.bold("fetched"),
            s.branch.as_deref().unwrap_or(""),
            f.refname,
            short(&f.head),
            match (&f.remote_change, f.stored) {
                (_, false) => " (--dry-run: read in a scratch repository, nothing stored)".into(),
                (Some(RemoteChange::Added), _) => format!(" (remote {} added)", f.remote),
                (Some(RemoteChange::Moved { from }), _) =>
                    format!(" (remote {} moved from {from})", f.remote),
                _ => String::new(),
            }
        ));
        if let Some(l) = &f.loopback {
            out.push_str(&format!("  {}\n", p.dim(l)));
        }
    }
    for a in &r.automations {
        out.push_str(&format!(
            "{} {}: author {} <{}>, pushes to {}{}\n",
            p.bold("ImageUpdateAutomation"),
            a.id(),
            a.author_name,
            a.author_email,
            a.push_branch.as_deref().unwrap_or("?"),
            if a.suspended { " (suspended)" } else { "" }
        ));
    }
    let local = c.branch.as_deref().unwrap_or("HEAD");
    if !r.commits.is_empty() {
        out.push_str(&format!(
            "\n{} {local} lacks:\n",
            p.bold(&match r.commits.len() {
                1 => "1 commit".to_string(),
                n => format!("{n} commits"),
            })
        ));
        let mut t = p.table(&["commit", "author", "made by", "subject / setter lines"]);
        for cm in &r.commits {
            let mut text = cm.subject.clone();
            for l in &cm.setter_lines {
                text.push('\n');
                text.push_str(&l.describe());
            }
            t.add_row(vec![
                p.cell(Style::Plain, short(&cm.sha)),
                p.cell(Style::Plain, format!("{} <{}>", cm.author, cm.email)),
                match &cm.made_by {
                    Some(m) => p.cell(Style::Ok, &m.automation),
                    None => p.cell(Style::Dim, "-"),
                },
                p.cell(Style::Plain, text),
            ]);
        }
        for line in render_table(&t).lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push('\n');
    let d = &r.decision;
    let verdict = match (d.action, r.dry_run, r.result.changed) {
        (Action::FastForward, false, true) => p.ok(&format!("pulled: {}", d.message)),
        (Action::FastForward, true, _) => {
            p.ok(&format!("plan (--dry-run, nothing changed): {}", d.message))
        }
        (Action::FastForward, false, false) => p.err(&format!("not pulled: {}", d.message)),
        (Action::UpToDate, ..) => p.ok(&format!("up to date: {}", d.message)),
        (Action::Refused, ..) => p.err(&format!("refused, nothing changed: {}", d.message)),
    };
    out.push_str(&verdict);
    out.push('\n');
    for f in &d.files {
        out.push_str(&format!("  {f}\n"));
    }
    if let Some(cmd) = &d.command
        && !(d.action == Action::FastForward && r.result.changed)
    {
        out.push_str(&format!(
            "  {}: {cmd}\n",
            if d.action == Action::FastForward {
                "the fast-forward"
            } else {
                "next"
            }
        ));
    }
    if !r.warnings.is_empty() {
        out.push_str(&format!("\n{}\n", p.warn("before the next push:")));
        for w in &r.warnings {
            out.push_str(&format!(
                "  {} {}\n    fix: {}\n",
                p.warn("!"),
                w.message,
                w.fix
            ));
        }
    }
    out
}
