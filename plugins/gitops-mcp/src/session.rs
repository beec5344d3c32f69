//! The server's session: what is fixed when it starts (kubeconfig and context, the repository
//! the offline tools read, whether writes are allowed) and the flows it has in flight.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use cluster_loop::error::Error;
use tokio_util::task::TaskTracker;

/// Fixed at start; shared by every tool call.
#[derive(Debug)]
pub struct Session {
    /// The cluster flags every cluster-facing flow gets (`--kubeconfig PATH`, `--context NAME`,
    /// `--request-timeout D`, ...): the context is pinned at start, so a later `kubectl config
    /// use-context` never moves the server to another cluster.
    cluster_args: Mutex<Vec<String>>,
    /// The repository root the offline tools (markercheck, fleetlint) read; tool paths are
    /// relative to it and may not leave it.
    pub repo: PathBuf,
    /// Write tools (`unstick`, `cutover`) are listed and callable.
    pub allow_write: bool,
    /// The `use_context` tool is listed and callable.
    pub allow_context_switch: bool,
    /// Flows in flight (waited for before the server exits, so no undo is cut short).
    pub tracker: TaskTracker,
}

impl Session {
    /// A session over `cluster_args` (already pinned to one context) and `repo`.
    pub fn new(
        cluster_args: Vec<String>,
        repo: PathBuf,
        allow_write: bool,
        allow_context_switch: bool,
    ) -> Self {
        Session {
            cluster_args: Mutex::new(cluster_args),
            repo,
            allow_write,
            allow_context_switch,
            tracker: TaskTracker::new(),
        }
    }

    /// The cluster flags for the next flow.
    pub fn cluster_args(&self) -> Vec<String> {
        self.cluster_args
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The pinned context name, if one is pinned.
    pub fn context(&self) -> Option<String> {
        let args = self.cluster_args();
        args.iter()
            .position(|a| a == "--context")
            .and_then(|i| args.get(i + 1).cloned())
    }

    /// Pin another context (only reachable through `use_context`, listed with
    /// `--allow-context-switch`).
    pub fn set_context(&self, name: &str) {
        let mut args = self.cluster_args.lock().unwrap_or_else(|e| e.into_inner());
        match args.iter().position(|a| a == "--context") {
            Some(i) if i + 1 < args.len() => args[i + 1] = name.to_string(),
            _ => {
                args.push("--context".into());
                args.push(name.to_string());
            }
        }
    }

    /// `rel` (a tool's `path`, relative to the repository; empty for the root) as a path under
    /// the repository. Errors (usage): an absolute path or one with `..`, which could read
    /// outside the repository the server was started on.
    pub fn repo_path(&self, rel: Option<&str>) -> Result<PathBuf, Error> {
        let rel = rel.unwrap_or("").trim();
        if rel.is_empty() || rel == "." {
            return Ok(self.repo.clone());
        }
        let p = Path::new(rel);
        if p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(Error::usage(format!(
                "path {rel:?}: give a path relative to the repository the server was started on ({}), without .. or a leading /",
                self.repo.display()
            )));
        }
        Ok(self.repo.join(p))
    }
}

/// Waits (up to 10 minutes) for the flows of `session` still in flight: they were cancelled
/// when their MCP session ended and may be undoing (resuming what they suspended).
pub async fn wait_for_flows(session: &Session) {
    session.tracker.close();
    if tokio::time::timeout(Duration::from_secs(600), session.tracker.wait())
        .await
        .is_err()
    {
        eprintln!("kubectl gitops mcp: a flow was still undoing after 10 minutes; exiting");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_repository() {
        let s = Session::new(vec![], PathBuf::from("/repo"), false, false);
        assert_eq!(s.repo_path(None).unwrap(), PathBuf::from("/repo"));
        assert_eq!(
            s.repo_path(Some("clusters/dev")).unwrap(),
            PathBuf::from("/repo/clusters/dev")
        );
        for bad in ["../etc", "/etc", "clusters/../../x"] {
            let e = s.repo_path(Some(bad)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.to_string().contains("relative to the repository"), "{e}");
        }
    }

    #[test]
    fn the_context_is_pinned_and_only_moved_on_purpose() {
        let s = Session::new(
            vec![
                "--kubeconfig".into(),
                "/k".into(),
                "--context".into(),
                "a".into(),
            ],
            PathBuf::from("/repo"),
            false,
            true,
        );
        assert_eq!(s.context().as_deref(), Some("a"));
        s.set_context("b");
        assert_eq!(
            s.cluster_args(),
            vec!["--kubeconfig", "/k", "--context", "b"]
        );
    }
}
