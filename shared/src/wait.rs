//! Waiting on one object with a watch (never polling) and a deadline, with a progress
//! spinner on stderr.
//!
//! [`wait_for`] lists the object once (`fieldSelector=metadata.name=NAME`), evaluates the
//! predicate, then follows a watch from that list's `resourceVersion` through
//! `kube::runtime::watcher`, which re-lists on `410 Gone` and resumes after dropped
//! connections with backoff. Each event re-evaluates the predicate; the wait ends when it
//! holds, when the deadline passes (returning the last object seen), or on an error the
//! watch cannot recover from (401, 403, 404, or a cluster never reached).

use crate::error::{ApiContext, Error, Result};
use crate::output::OutputArgs;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How a wait ended.
#[derive(Debug, Clone)]
pub struct Outcome<K> {
    /// The last version of the object seen (`None`: it does not exist / was deleted).
    pub object: Option<K>,
    /// True when the predicate held.
    pub satisfied: bool,
    /// True when the deadline passed first.
    pub timed_out: bool,
    /// How long the wait took.
    pub elapsed: Duration,
}

const TEMPLATE: &str = "{spinner} {prefix} {wide_msg} {left}";

/// Progress on stderr, for a terminal only (hidden, all methods no-ops, when stderr is not a
/// terminal or the output is json/yaml):
/// - with colour: a spinner redrawn in place, `⠋ <label>  <status>  (4m12s left)`;
/// - without colour (`--color never`, `NO_COLOR`, `TERM=dumb`): no escape code at all, not even
///   the spinner's erase-line: each new status is printed once as a plain line,
///   `<label>: <status> (4m12s left)`.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Plain mode: the label and the last status printed.
    plain: Option<Arc<Mutex<(String, String)>>>,
    deadline: Arc<Mutex<Option<std::time::Instant>>>,
    /// Inside an [`crate::embed::Embedding`]: its observer gets each new status and line, with
    /// the last status given (to give each change once).
    embedded: Option<(crate::embed::Embedding, Arc<Mutex<String>>)>,
}

fn time_left(deadline: Option<std::time::Instant>) -> Option<String> {
    deadline.map(|dl| {
        let rem = dl.saturating_duration_since(std::time::Instant::now());
        let secs = Duration::from_secs(rem.as_secs());
        format!("({} left)", crate::duration::format_go_duration(secs))
    })
}

fn embedded() -> Option<(crate::embed::Embedding, Arc<Mutex<String>>)> {
    crate::embed::current().map(|e| (e, Arc::new(Mutex::new(String::new()))))
}

impl Progress {
    /// A spinner labelled `label`, shown iff `enabled`.
    pub fn new(label: impl Into<String>, enabled: bool) -> Self {
        Self::with_target(label, enabled.then(ProgressDrawTarget::stderr))
    }

    fn with_target(label: impl Into<String>, target: Option<ProgressDrawTarget>) -> Self {
        let deadline: Arc<Mutex<Option<std::time::Instant>>> = Arc::new(Mutex::new(None));
        let bar = target.map(|target| {
            let d = deadline.clone();
            let left = move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                if let Some(t) = time_left(*d.lock().unwrap_or_else(|e| e.into_inner())) {
                    let _ = w.write_str(&t);
                }
            };
            let style = ProgressStyle::with_template(TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .with_key("left", left);
            // AndClear: dropping the last handle removes the spinner line.
            let pb = ProgressBar::with_draw_target(None, target)
                .with_finish(indicatif::ProgressFinish::AndClear);
            pb.set_style(style);
            pb.set_prefix(label.into());
            pb.enable_steady_tick(Duration::from_millis(120));
            pb
        });
        Progress {
            bar,
            plain: None,
            deadline,
            embedded: embedded(),
        }
    }

    /// Plain-line progress (no escape codes), see the type docs.
    pub fn plain(label: impl Into<String>) -> Self {
        Progress {
            bar: None,
            plain: Some(Arc::new(Mutex::new((label.into(), String::new())))),
            deadline: Arc::new(Mutex::new(None)),
            embedded: embedded(),
        }
    }

    /// Progress iff stderr is a terminal and `output` is the table format: the spinner when
    /// stderr gets colour ([`OutputArgs::stderr_painter`]: `--color`, `NO_COLOR`, `TERM`),
    /// else plain lines without escape codes.
    pub fn for_output(label: impl Into<String>, output: &OutputArgs) -> Self {
        let shown = std::io::stderr().is_terminal() && !output.output.is_machine();
        if shown && !output.stderr_painter().enabled() {
            return Self::plain(label);
        }
        Self::new(label, shown)
    }

    /// A spinner that never draws.
    pub fn hidden() -> Self {
        Self::new("", false)
    }

    /// True when progress is shown (spinner or plain lines).
    pub fn is_visible(&self) -> bool {
        self.bar.is_some() || self.plain.is_some()
    }

    /// Show the time left until `deadline`.
    pub fn set_deadline(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = Some(deadline.into_std());
    }

    /// Replace the status text (e.g. the object's current condition message).
    pub fn set_status(&self, status: impl Into<String>) {
        let status = status.into();
        if let Some((e, last)) = &self.embedded {
            let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
            if *last != status {
                e.progress(&status);
                last.clone_from(&status);
            }
        }
        if let Some(b) = &self.bar {
            b.set_message(status);
        } else if let Some(p) = &self.plain {
            let mut last = p.lock().unwrap_or_else(|e| e.into_inner());
            if last.1 != status {
                let left = time_left(*self.deadline.lock().unwrap_or_else(|e| e.into_inner()))
                    .map(|t| format!(" {t}"))
                    .unwrap_or_default();
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "{}: {status}{left}", last.0);
                last.1 = status;
            }
        }
    }

    /// Print a line above the spinner (or to stderr when hidden).
    pub fn println(&self, line: impl AsRef<str>) {
        if let Some((e, _)) = &self.embedded {
            e.progress(line.as_ref());
        }
        match &self.bar {
            Some(b) => b.println(line),
            None => {
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "{}", line.as_ref());
            }
        }
    }

    /// Remove the spinner.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// One line describing an object's state for the spinner: the `Ready` condition
/// (`Ready=False HealthCheckFailed: <message>`), else the kstatus result
/// (`InProgress: Ready: 0/1`).
pub fn status_line(obj: &serde_json::Value) -> String {
    let conds = crate::conditions::from_object(obj);
    if let Some(r) = crate::conditions::find(&conds, crate::conditions::READY) {
        let mut s = format!("Ready={}", r.status);
        if !r.reason().is_empty() {
            s.push(' ');
            s.push_str(r.reason());
        }
        if !r.message().is_empty() {
            s.push_str(": ");
            s.push_str(r.message());
        }
        return s;
    }
    let k = crate::kstatus::compute(obj);
    format!("{}: {}", k.status, k.message)
}

/// Is this watcher error one that retrying cannot fix?
fn fatal_api_error(e: &watcher::Error) -> Option<&kube::Error> {
    let inner = match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => k,
        _ => return None,
    };
    match inner {
        kube::Error::Api(s) if matches!(s.code, 401 | 403 | 404) => Some(inner),
        _ => None,
    }
}

/// Wait until `predicate(object)` holds for the object `name` reached through `api`, or
/// `deadline` passes.
///
/// - `predicate` gets `None` while the object does not exist (so "wait for deletion" works).
/// - `progress` shows [`status_line`] of each version seen and the time left.
/// - `ctx` names the server in errors (e.g. [`crate::cli::Connection::ctx`]); the verb
///   (`watch`), name, and, when unset, resource and namespace are filled in from `api`.
///
/// Returns `Ok(Outcome)` with `satisfied` or `timed_out`; errors: [`Error::Api`] for
/// 401/403/404 or when the first list fails (cluster unreachable), [`Error::Cluster`] if
/// the watch stream ends.
pub async fn wait_for<K, P>(
    api: &Api<K>,
    name: &str,
    mut predicate: P,
    deadline: Instant,
    progress: &Progress,
    ctx: ApiContext,
) -> Result<Outcome<K>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    P: FnMut(Option<&K>) -> bool,
{
    let start = Instant::now();
    progress.set_deadline(deadline);
    let ctx = ctx
        .verb("watch")
        .name(name)
        .with_resource_url(api.resource_url());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(api.clone(), config).default_backoff();
    futures::pin_mut!(stream);
    let mut last: Option<K> = None;
    let mut pending: Option<K> = None;
    let mut listed_once = false;
    let mut evaluate = |obj: Option<&K>, progress: &Progress| -> bool {
        match obj {
            Some(o) => {
                if let Ok(v) = serde_json::to_value(o) {
                    progress.set_status(status_line(&v));
                }
            }
            None => progress.set_status("not found"),
        }
        predicate(obj)
    };
    loop {
        let next = match tokio::time::timeout_at(deadline, stream.next()).await {
            Err(_) => {
                return Ok(Outcome {
                    object: last,
                    satisfied: false,
                    timed_out: true,
                    elapsed: start.elapsed(),
                });
            }
            Ok(n) => n,
        };
        let event = match next {
            None => {
                return Err(Error::Cluster(format!(
                    "watch on {} {name} ended unexpectedly",
                    ctx.qualified_resource()
                )));
            }
            Some(Err(e)) => {
                if fatal_api_error(&e).is_some() || !listed_once {
                    let kerr = match e {
                        watcher::Error::InitialListFailed(k)
                        | watcher::Error::WatchStartFailed(k)
                        | watcher::Error::WatchFailed(k) => k,
                        watcher::Error::WatchError(s) => kube::Error::Api(s),
                        watcher::Error::NoResourceVersion => {
                            return Err(Error::Cluster(format!(
                                "{} does not support watch (no resourceVersion)",
                                ctx.qualified_resource()
                            )));
                        }
                    };
                    return Err(Error::from_kube(kerr, ctx));
                }
                progress.set_status(format!("watch interrupted, resuming: {e}"));
                continue;
            }
            Some(Ok(ev)) => ev,
        };
        let changed = match event {
            Event::Init => {
                pending = None;
                false
            }
            Event::InitApply(o) => {
                pending = Some(o);
                false
            }
            Event::InitDone => {
                listed_once = true;
                last = pending.take();
                true
            }
            Event::Apply(o) => {
                last = Some(o);
                true
            }
            Event::Delete(_) => {
                last = None;
                true
            }
        };
        if changed && evaluate(last.as_ref(), progress) {
            return Ok(Outcome {
                object: last,
                satisfied: true,
                timed_out: false,
                elapsed: start.elapsed(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_lines() {
        let v = json!({"kind": "Kustomization", "status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "HealthCheckFailed", "message": "timeout"}]}});
        assert_eq!(status_line(&v), "Ready=False HealthCheckFailed: timeout");
        let v = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1},
                       "status": {"replicas": 1, "updatedReplicas": 1}});
        assert_eq!(status_line(&v), "InProgress: Available: 0/1");
    }

    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<String>>);

    impl indicatif::TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            let mut b = self.0.lock().unwrap();
            b.push_str(s);
            b.push('\n');
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn spinner_shows_status_and_time_left() {
        assert!(ProgressStyle::with_template(TEMPLATE).is_ok());
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let p = Progress::with_target("ks/apps", Some(target));
        assert!(p.is_visible());
        p.set_deadline(Instant::now() + Duration::from_secs(301));
        p.set_status("Ready=Unknown Progressing: Running health checks");
        p.bar.as_ref().unwrap().force_draw();
        let out = screen.0.lock().unwrap().clone();
        assert!(
            out.contains("ks/apps Ready=Unknown Progressing: Running health checks"),
            "{out:?}"
        );
        assert!(
            out.contains("(5m0s left)") || out.contains("(5m1s left)"),
            "{out:?}"
        );
        p.finish();
    }

    #[test]
    fn hidden_progress_is_noop() {
        let p = Progress::hidden();
        assert!(!p.is_visible());
        p.set_status("x");
        p.set_deadline(Instant::now());
        p.finish();
    }
}
