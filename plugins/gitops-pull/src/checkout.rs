//! The operator's local Git checkout: what it holds (branch, head, dirty paths, an operation
//! in progress, its remotes), and the only changes `kubectl gitops pull` ever makes to it:
//! the remote of its own with its remote-tracking ref ([`Checkout::store_fetched`]) and the
//! fast-forward of the checked-out branch ([`Checkout::fast_forward`]).
//!
//! Commands that read or change the checkout run the user's own `git` with the user's own
//! configuration (their `core.autocrlf`, hooks and filters are how this work tree is checked
//! out), with `LC_ALL=C` so messages parse and `GIT_TERMINAL_PROMPT=0` so nothing waits on a
//! prompt. Network reads never happen here: the server Flux reads is fetched with Flux's
//! credentials into a scratch repository ([`crate::history`]), then copied from there.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A local Git checkout (the work tree `--repo` names, at its top level).
#[derive(Debug, Clone)]
pub struct Checkout {
    /// The work tree's top-level directory (`git rev-parse --show-toplevel`).
    pub root: PathBuf,
}

/// How [`Checkout::store_fetched`] left the remote of pull's own.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "change")]
pub enum RemoteChange {
    /// The remote already pointed at the URL.
    Unchanged,
    /// The remote was added (`git remote add NAME URL`).
    Added,
    /// The remote pointed elsewhere and now points at the URL (`git remote set-url`).
    Moved {
        /// The URL it had (userinfo removed).
        from: String,
    },
}

fn last_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
        .trim_start_matches("fatal: ")
        .trim_start_matches("error: ")
        .to_string()
}

impl Checkout {
    /// The checkout holding `path` (a directory in a Git work tree). Errors: git's words when
    /// `path` is in no work tree (a bare repository, a plain directory).
    pub fn open(path: &Path) -> Result<Checkout, String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(path)
            .args(["rev-parse", "--show-toplevel"])
            .env("LC_ALL", "C")
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{}: not a Git checkout ({})",
                path.display(),
                last_line(&String::from_utf8_lossy(&out.stderr))
            ));
        }
        Ok(Checkout {
            root: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
        })
    }

    /// A `git` command in the checkout with the user's configuration (module docs).
    pub fn command(&self) -> Command {
        let mut c = Command::new("git");
        c.current_dir(&self.root)
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null());
        c
    }

    fn git(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let out = self
            .command()
            .args(args)
            .output()
            .map_err(|e| format!("cannot run git: {e}"))?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(format!(
                "git {}: {}",
                args.first().copied().unwrap_or(""),
                last_line(&String::from_utf8_lossy(&out.stderr))
            ))
        }
    }

    fn text(&self, args: &[&str]) -> Option<String> {
        self.git(args)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// The checked-out branch (`git symbolic-ref --short HEAD`); `None` on a detached HEAD.
    pub fn branch(&self) -> Option<String> {
        self.text(&["symbolic-ref", "--quiet", "--short", "HEAD"])
    }

    /// The commit HEAD names; `None` in a repository with no commit yet.
    pub fn head(&self) -> Option<String> {
        self.text(&["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
    }

    /// The commit a ref names (`refs/remotes/flux/main`), `None` when it does not exist.
    pub fn resolve(&self, refname: &str) -> Option<String> {
        self.text(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{refname}^{{commit}}"),
        ])
    }

    /// Tracked paths with changes, staged or not (`git status --porcelain=v1
    /// --untracked-files=no`), as `XY path`; also unmerged paths. Errors: git's words.
    pub fn dirty(&self) -> Result<Vec<String>, String> {
        let out = self.git(&["status", "--porcelain=v1", "-z", "--untracked-files=no"])?;
        Ok(porcelain_entries(&out))
    }

    /// Untracked files that are not ignored (`git ls-files --others --exclude-standard`).
    pub fn untracked(&self) -> Result<Vec<String>, String> {
        let out = self.git(&["ls-files", "-z", "--others", "--exclude-standard"])?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect())
    }

    /// An operation that holds the work tree (git's own markers in the Git directory:
    /// `MERGE_HEAD`, `rebase-merge`, `rebase-apply`, `CHERRY_PICK_HEAD`, `REVERT_HEAD`,
    /// `BISECT_LOG`), as the command that ends it.
    pub fn in_progress(&self) -> Option<&'static str> {
        let dir = PathBuf::from(self.text(&["rev-parse", "--absolute-git-dir"])?);
        [
            ("MERGE_HEAD", "a merge (git merge --continue or --abort)"),
            (
                "rebase-merge",
                "a rebase (git rebase --continue or --abort)",
            ),
            (
                "rebase-apply",
                "a rebase or am (git rebase --continue or --abort)",
            ),
            (
                "CHERRY_PICK_HEAD",
                "a cherry-pick (git cherry-pick --continue or --abort)",
            ),
            ("REVERT_HEAD", "a revert (git revert --continue or --abort)"),
            ("BISECT_LOG", "a bisect (git bisect reset)"),
        ]
        .into_iter()
        .find(|(f, _)| dir.join(f).exists())
        .map(|(_, what)| what)
    }

    /// The fetch URL of remote `name` (`git remote get-url`), `None` when there is no such
    /// remote.
    pub fn remote_url(&self, name: &str) -> Option<String> {
        self.text(&["remote", "get-url", "--", name])
    }

    /// Records the fetched branch in the checkout: remote `remote` pointed at `url` (added,
    /// or moved when it pointed elsewhere), then `refs/remotes/<remote>/<branch>` and its
    /// objects copied from `scratch` (a local fetch: no network, no credentials). HEAD, the
    /// index, the work tree and every local branch stay as they were.
    ///
    /// Errors: git's words.
    pub fn store_fetched(
        &self,
        remote: &str,
        url: &str,
        scratch: &Path,
        branch: &str,
    ) -> Result<RemoteChange, String> {
        let change = match self.remote_url(remote) {
            Some(u) if u == url => RemoteChange::Unchanged,
            Some(u) => {
                self.git(&["remote", "set-url", "--", remote, url])?;
                RemoteChange::Moved {
                    from: crate::url::redacted(&u),
                }
            }
            None => {
                self.git(&["remote", "add", "--", remote, url])?;
                RemoteChange::Added
            }
        };
        let tracking = format!("refs/remotes/{remote}/{branch}");
        let scratch = scratch.to_string_lossy().into_owned();
        self.git(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
            &scratch,
            &format!("+{tracking}:{tracking}"),
        ])?;
        Ok(change)
    }

    /// Fast-forwards the checked-out branch to `target` (`git merge --ff-only`): git itself
    /// refuses anything but a fast-forward and any change that would overwrite a local one.
    /// Errors: git's words (nothing changed then).
    pub fn fast_forward(&self, target: &str) -> Result<(), String> {
        self.git(&["merge", "--ff-only", "--quiet", target])
            .map(|_| ())
    }
}

/// Paths of `git status --porcelain=v1 -z` output as `XY path` (a rename's source path is
/// its own entry in -z output and is skipped).
fn porcelain_entries(out: &[u8]) -> Vec<String> {
    let mut entries = Vec::new();
    let mut parts = out.split(|b| *b == 0).filter(|p| !p.is_empty());
    while let Some(e) = parts.next() {
        let e = String::from_utf8_lossy(e).into_owned();
        if e.starts_with('R') || e.starts_with('C') {
            parts.next();
        }
        entries.push(e);
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }

    #[test]
    fn facts_of_a_checkout() {
        let d = tempfile::tempdir().unwrap();
        git(d.path(), &["init", "-q", "-b", "main"]);
        std::fs::create_dir(d.path().join("apps")).unwrap();
        std::fs::write(d.path().join("apps/a.yaml"), "a: 1\n").unwrap();
        git(d.path(), &["add", "."]);
        git(d.path(), &["commit", "-q", "-m", "one"]);
        let c = Checkout::open(&d.path().join("apps")).unwrap();
        assert_eq!(c.root, d.path().canonicalize().unwrap());
        assert_eq!(c.branch().as_deref(), Some("main"));
        assert_eq!(c.head().map(|h| h.len()), Some(40));
        assert!(c.dirty().unwrap().is_empty());
        std::fs::write(d.path().join("apps/a.yaml"), "a: 2\n").unwrap();
        std::fs::write(d.path().join("new.yaml"), "b: 1\n").unwrap();
        assert_eq!(c.dirty().unwrap(), vec![" M apps/a.yaml".to_string()]);
        assert_eq!(c.untracked().unwrap(), vec!["new.yaml".to_string()]);
        assert_eq!(c.in_progress(), None);
        assert_eq!(c.remote_url("origin"), None);
        let plain = tempfile::tempdir().unwrap();
        let e = Checkout::open(plain.path()).unwrap_err();
        assert!(e.contains("not a Git checkout"), "{e}");
    }
}
