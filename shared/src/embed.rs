//! Running a plugin's own flow inside another process (the MCP server, `kubectl gitops mcp`)
//! with the same guarantees as on the command line.
//!
//! A plugin writes its report through [`crate::output::write_stdout`], shows progress through
//! [`crate::wait::Progress`] and undoes its writes when [`crate::signals::Signals`] fires.
//! Inside an [`Embedding`] each of these goes to the embedder instead:
//!
//! - stdout: appended to the embedding's buffer ([`Embedding::stdout`]), never to the process's
//!   fd 1 (which the MCP stdio transport owns);
//! - progress: every status and line is also given to the embedding's observer
//!   ([`Embedding::on_progress`]), e.g. as MCP `notifications/progress`;
//! - cancellation: [`Embedding::cancel`] makes every [`crate::signals::Signals`] installed
//!   inside the embedding resolve as if SIGINT had arrived (name `"cancelled"`), so a plugin
//!   undoes exactly as on Ctrl-C (unstick resumes what it suspended, cutover rolls back, a probe
//!   Job is deleted). Read-only stretches guarded by [`crate::signals::ExitOnSignal`] ignore it
//!   (they would exit the whole process); the embedder drops a read-only flow's future instead.
//!
//! The embedding is carried by a Tokio task-local for async flows ([`Embedding::scope`]) and
//! by a thread-local for flows that run on a thread of their own ([`Embedding::scope_sync`]).
//! Tasks a flow spawns do not inherit it; what they need (a [`crate::signals::Signals`], a
//! [`crate::wait::Progress`]) captures it when created in the flow's own task.

use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Observer of a flow's progress lines (the spinner's status and the lines printed above it).
pub type ProgressObserver = Arc<dyn Fn(&str) + Send + Sync>;

/// One in-process run of a plugin flow: its captured stdout, its progress observer and its
/// cancellation. Cheap to clone (shared state).
#[derive(Clone, Default)]
pub struct Embedding {
    stdout: Arc<Mutex<Vec<u8>>>,
    progress: Option<ProgressObserver>,
    cancel: Arc<Cancel>,
}

#[derive(Default)]
struct Cancel {
    fired: AtomicBool,
    notify: Notify,
}

impl fmt::Debug for Embedding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Embedding")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

tokio::task_local! {
    static TASK: Embedding;
}

thread_local! {
    static THREAD: RefCell<Option<Embedding>> = const { RefCell::new(None) };
}

impl Embedding {
    /// A new embedding: empty stdout, no observer, not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also give every progress status and line to `f`.
    pub fn on_progress(mut self, f: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Runs the async flow `fut` inside this embedding (the current task only).
    pub async fn scope<F: std::future::Future>(&self, fut: F) -> F::Output {
        TASK.scope(self.clone(), fut).await
    }

    /// Runs the blocking flow `f` inside this embedding (the current thread only).
    pub fn scope_sync<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Reset(Option<Embedding>);
        impl Drop for Reset {
            fn drop(&mut self) {
                let prev = self.0.take();
                THREAD.with(|t| *t.borrow_mut() = prev);
            }
        }
        let prev = THREAD.with(|t| t.borrow_mut().replace(self.clone()));
        let _reset = Reset(prev);
        f()
    }

    /// Everything the flow wrote to stdout so far.
    pub fn stdout(&self) -> Vec<u8> {
        self.stdout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Cancel the flow: every [`crate::signals::Signals`] of this embedding resolves now (or at
    /// once when installed later). Idempotent.
    pub fn cancel(&self) {
        self.cancel.fired.store(true, Ordering::SeqCst);
        self.cancel.notify.notify_waiters();
    }

    /// Whether [`Embedding::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.fired.load(Ordering::SeqCst)
    }

    /// Resolves once [`Embedding::cancel`] has been called (at once if it already was).
    pub async fn cancelled(&self) {
        loop {
            let n = self.cancel.notify.notified();
            if self.is_cancelled() {
                return;
            }
            n.await;
        }
    }

    pub(crate) fn write(&self, s: &str) {
        self.stdout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(s.as_bytes());
    }

    pub(crate) fn progress(&self, line: &str) {
        if let Some(f) = &self.progress {
            f(line);
        }
    }
}

/// The embedding the current task (first) or thread runs in, if any.
pub fn current() -> Option<Embedding> {
    TASK.try_with(|e| e.clone())
        .ok()
        .or_else(|| THREAD.with(|t| t.borrow().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stdout_of_a_flow_is_captured_and_the_process_stdout_left_alone() {
        let e = Embedding::new();
        e.scope(async {
            crate::output::write_stdout("{\"a\":1}\n").unwrap();
        })
        .await;
        assert_eq!(e.stdout(), b"{\"a\":1}\n");
        assert!(current().is_none(), "the embedding ends with its scope");
    }

    #[test]
    fn a_thread_scope_is_restored_after_the_flow() {
        let outer = Embedding::new();
        let inner = Embedding::new();
        outer.scope_sync(|| {
            inner.scope_sync(|| crate::output::write_stdout("inner").unwrap());
            crate::output::write_stdout("outer").unwrap();
        });
        assert_eq!(inner.stdout(), b"inner");
        assert_eq!(outer.stdout(), b"outer");
        assert!(current().is_none());
    }

    #[tokio::test]
    async fn cancel_fires_signals_installed_before_and_after_it() {
        let e = Embedding::new();
        let (before, after) = e
            .scope(async {
                let mut before = crate::signals::Signals::install();
                let h = tokio::spawn({
                    let e = e.clone();
                    async move { e.cancel() }
                });
                let name = before.recv().await;
                h.await.unwrap();
                let mut after = crate::signals::Signals::install();
                (name, after.recv().await)
            })
            .await;
        assert_eq!((before, after), ("cancelled", "cancelled"));
    }

    #[tokio::test]
    async fn progress_lines_reach_the_observer() {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let s = seen.clone();
        let e = Embedding::new().on_progress(move |l| s.lock().unwrap().push(l.to_string()));
        e.scope(async {
            let p = crate::wait::Progress::hidden();
            p.set_status("Ready=False Progressing");
            p.set_status("Ready=False Progressing");
            p.println("✓ resumed");
        })
        .await;
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                "Ready=False Progressing".to_string(),
                "✓ resumed".to_string()
            ]
        );
    }
}
