//! History, read in cutover's scratch repository ([`cutover::git::Scratch`]: a bare
//! repository borrowing the checkout's objects read-only) after the branch Flux reads was
//! fetched there with Flux's credentials ([`cutover::git::GitRunner::fetch_branch`]): the
//! commits the local branch lacks, which automation made each, the setter lines each changed
//! (markercheck's [`markercheck::changed::changed_setters`]), and, when the two sides
//! diverged, the files both changed since their merge base.

use std::path::Path;

use cutover::git::{GitRunner, Scratch};

use crate::source::Automation;

/// A setter line a commit changed, named as markercheck names a change: file, line (in the
/// commit's version), setter (`ns:policy[:tag|:name|:digest]`), old and new value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetterLine {
    /// Path in the repository.
    pub file: String,
    /// 1-based line of the value in the commit's version of the file.
    pub line: usize,
    /// Setter name, e.g. `flux-system:podinfo:tag`.
    pub setter: String,
    /// Value before the commit.
    pub old: String,
    /// Value after it.
    pub new: String,
}

impl SetterLine {
    /// `apps/web.yaml:11 flux-system:web ghcr.io/org/web:1.0.0 -> ghcr.io/org/web:1.2.3`.
    pub fn describe(&self) -> String {
        format!(
            "{}:{} {} {} -> {}",
            self.file, self.line, self.setter, self.old, self.new
        )
    }
}

/// Why a commit is marked as an automation's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MadeBy {
    /// The ImageUpdateAutomation, `namespace/name`.
    pub automation: String,
    /// Its push branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_branch: Option<String>,
    /// The evidence: `author` (the commit's author is its `spec.git.commit.author`) and/or
    /// `lastPushCommit` (the commit is its `status.lastPushCommit`).
    pub evidence: Vec<&'static str>,
}

/// One commit the local branch lacks.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Commit {
    /// Full SHA.
    pub sha: String,
    /// Author name.
    pub author: String,
    /// Author email.
    pub email: String,
    /// Subject line.
    pub subject: String,
    /// The automation that made it, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub made_by: Option<MadeBy>,
    /// Setter lines it changed against its first parent.
    pub setter_lines: Vec<SetterLine>,
}

/// Runs git in the scratch repository; stdout bytes. Errors: git's last line.
pub fn git_in(runner: &GitRunner, dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = runner
        .command()
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "git {}: {}",
            args.first().copied().unwrap_or(""),
            err.lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
        ))
    }
}

fn lines(b: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(b)
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// The number of commits in `range` (`A..B`).
pub fn count(runner: &GitRunner, scratch: &Scratch, range: &str) -> Result<u64, String> {
    let out = git_in(
        runner,
        scratch.path(),
        &["rev-list", "--count", range, "--"],
    )?;
    String::from_utf8_lossy(&out)
        .trim()
        .parse()
        .map_err(|e| format!("git rev-list --count: {e}"))
}

/// The merge base of `a` and `b`, `None` when they share no history.
pub fn merge_base(runner: &GitRunner, scratch: &Scratch, a: &str, b: &str) -> Option<String> {
    git_in(runner, scratch.path(), &["merge-base", a, b])
        .ok()
        .map(|o| String::from_utf8_lossy(&o).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Paths that differ between commits `a` and `b` (`git diff --name-only --no-renames`).
pub fn changed_files(
    runner: &GitRunner,
    scratch: &Scratch,
    a: &str,
    b: &str,
) -> Result<Vec<String>, String> {
    git_in(
        runner,
        scratch.path(),
        &["diff", "--name-only", "--no-renames", a, b, "--"],
    )
    .map(|o| lines(&o))
}

/// The files both sides changed since their merge base: `git diff --name-only BASE LOCAL`
/// intersected with `git diff --name-only BASE REMOTE`, sorted. With no merge base (unrelated
/// histories), every file either side has.
pub fn both_changed(
    runner: &GitRunner,
    scratch: &Scratch,
    local: &str,
    remote: &str,
) -> Result<Vec<String>, String> {
    let base = merge_base(runner, scratch, local, remote)
        // the empty tree: every file is a change
        .unwrap_or_else(|| "4b825dc642cb6eb9a060e54bf8d69288fbee4904".to_string());
    let ours = changed_files(runner, scratch, &base, local)?;
    let theirs: std::collections::BTreeSet<String> = changed_files(runner, scratch, &base, remote)?
        .into_iter()
        .collect();
    let mut both: Vec<String> = ours.into_iter().filter(|f| theirs.contains(f)).collect();
    both.sort();
    both.dedup();
    Ok(both)
}

/// The bytes of `path` at commit `sha`; `None` when the commit has no such file.
fn blob(runner: &GitRunner, scratch: &Scratch, sha: &str, path: &str) -> Option<Vec<u8>> {
    git_in(
        runner,
        scratch.path(),
        &["cat-file", "blob", &format!("{sha}:{path}")],
    )
    .ok()
}

/// The setter lines commit `sha` changed against its first parent (none for a root commit).
pub fn setter_lines(runner: &GitRunner, scratch: &Scratch, sha: &str) -> Vec<SetterLine> {
    let parent = format!("{sha}^");
    let Ok(files) = changed_files(runner, scratch, &parent, sha) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for file in files {
        let name = file.rsplit('/').next().unwrap_or(&file);
        if !markercheck::scan::flux_selects(name) {
            continue;
        }
        let (Some(old), Some(new)) = (
            blob(runner, scratch, &parent, &file),
            blob(runner, scratch, sha, &file),
        ) else {
            continue;
        };
        out.extend(
            markercheck::changed::changed_setters(Path::new(&file), &old, &new)
                .into_iter()
                .map(|c| SetterLine {
                    file: file.clone(),
                    line: c.line,
                    setter: c.setter,
                    old: c.old,
                    new: c.new,
                }),
        );
    }
    out
}

/// Which automation made the commit by `name <email>` with SHA `sha`: the one whose
/// `status.lastPushCommit` it is, else the first whose commit author it is.
pub fn made_by(automations: &[Automation], sha: &str, name: &str, email: &str) -> Option<MadeBy> {
    let evidence = |a: &Automation| {
        let mut e = Vec::new();
        if a.authored(name, email) {
            e.push("author");
        }
        if a.last_push_commit.as_deref() == Some(sha) {
            e.push("lastPushCommit");
        }
        e
    };
    automations
        .iter()
        .map(|a| (a, evidence(a)))
        .filter(|(_, e)| !e.is_empty())
        .max_by_key(|(_, e)| (e.contains(&"lastPushCommit"), e.len()))
        .map(|(a, e)| MadeBy {
            automation: a.id(),
            push_branch: a.push_branch.clone(),
            evidence: e,
        })
}

/// The commits reachable from `remote` and not from `local` (`git rev-list --reverse
/// --topo-order LOCAL..REMOTE`, oldest first), each marked with the automation that made it
/// and the setter lines it changed. `local` `None` (an unborn branch): every commit of
/// `remote`.
pub fn incoming(
    runner: &GitRunner,
    scratch: &Scratch,
    local: Option<&str>,
    remote: &str,
    automations: &[Automation],
) -> Result<Vec<Commit>, String> {
    let range = match local {
        Some(l) => format!("{l}..{remote}"),
        None => remote.to_string(),
    };
    let out = git_in(
        runner,
        scratch.path(),
        &[
            "log",
            "--reverse",
            "--topo-order",
            "--format=%H%x00%an%x00%ae%x00%s",
            &range,
            "--",
        ],
    )?;
    Ok(lines(&out)
        .into_iter()
        .filter_map(|l| {
            let mut p = l.splitn(4, '\0');
            let (sha, author, email, subject) = (p.next()?, p.next()?, p.next()?, p.next()?);
            Some(Commit {
                sha: sha.to_string(),
                author: author.to_string(),
                email: email.to_string(),
                subject: subject.to_string(),
                made_by: made_by(automations, sha, author, email),
                setter_lines: setter_lines(runner, scratch, sha),
            })
        })
        .collect())
}
