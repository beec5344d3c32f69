//! SIGINT/SIGTERM listeners for commands that must undo something when interrupted.

/// SIGINT/SIGTERM listeners, registered eagerly (before anything is created) so a signal that
/// arrives while a create or patch request is in flight is never lost: from registration on,
/// the default "terminate at once" action is replaced and the signal is queued for us.
pub struct Signals {
    /// The in-process run this was installed in ([`crate::embed`]): its cancellation counts as
    /// a signal.
    embedded: Option<crate::embed::Embedding>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Installs the listeners now. Must run inside a Tokio runtime. Inside an
    /// [`crate::embed::Embedding`], its cancellation also counts as a signal.
    pub fn install() -> Signals {
        Signals {
            embedded: crate::embed::current(),
            ..Self::os_only()
        }
    }

    /// The OS listeners alone: an embedding's cancellation is not a signal here (for
    /// [`ExitOnSignal`], which would end the whole process).
    fn os_only() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                embedded: None,
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Signals { embedded: None }
        }
    }

    /// Like [`Signals::install`], but fails (instead of leaving that signal unwatched) when a
    /// listener cannot be registered. Errors: the OS error from registering the handler.
    pub fn try_install() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                embedded: crate::embed::current(),
                int: Some(signal(SignalKind::interrupt())?),
                term: Some(signal(SignalKind::terminate())?),
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {
                embedded: crate::embed::current(),
            })
        }
    }

    /// Resolves on the first SIGINT or SIGTERM received since [`Signals::install`], with its
    /// name (`"SIGINT"` or `"SIGTERM"`), or with `"cancelled"` once the embedding it was
    /// installed in is cancelled ([`crate::embed::Embedding::cancel`]).
    pub async fn recv(&mut self) -> &'static str {
        match self.embedded.clone() {
            Some(e) => tokio::select! {
                name = self.recv_os() => name,
                _ = e.cancelled() => "cancelled",
            },
            None => self.recv_os().await,
        }
    }

    async fn recv_os(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = next(&mut self.int) => "SIGINT",
                _ = next(&mut self.term) => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

/// Exit code of a run ended by SIGINT/SIGTERM: 128 + SIGINT(2), as shells report Ctrl-C.
pub const EXIT_INTERRUPTED: i32 = 130;

/// The tokio runtime every cluster-facing binary runs on: multi-thread with two workers (a
/// signal watcher or a blocking git call never starves the API calls), I/O and time enabled.
/// Errors: the OS refused the threads or the reactor (`Error::Other`, "cannot start
/// runtime: ..."), which callers report as exit 3.
pub fn runtime() -> Result<tokio::runtime::Runtime, crate::error::Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| crate::error::Error::Other(format!("cannot start runtime: {e}")))
}

/// Runs a read-only phase (`fut`: API reads, connection set-up, git fetches) so that SIGINT or
/// SIGTERM ends it at once even while a request hangs (an API server that accepts and never
/// answers, with no `--request-timeout`) or a blocking call (a `git` child process) holds the
/// thread: on the first signal it prints one line to stderr, `interrupted by SIGINT: NOTE`
/// (`note` says what was left, e.g. `nothing changed`), and exits the process with
/// [`EXIT_INTERRUPTED`] (130).
///
/// Only for phases that change nothing: the process exits without unwinding, so a phase that
/// holds a mutation must keep its own handler and undo it first. The listeners are installed
/// before `fut` first runs and watched by a task of their own, so this needs a multi-thread
/// Tokio runtime (the watcher runs on a worker while `fut` blocks the caller). Tokio delivers
/// a signal to every listener, so this composes with a plugin's own [`Signals`] (or other
/// handlers) installed earlier; install those before the phase if SIGINT must be handled
/// after it too (Tokio keeps its handler once installed: from then on a signal nobody
/// listens for is dropped rather than ending the process).
pub async fn exit_on_signal<F: std::future::Future>(note: &str, fut: F) -> F::Output {
    let _guard = ExitOnSignal::start(note);
    fut.await
}

/// The guard form of [`exit_on_signal`], for a read-only stretch of straight-line code: from
/// [`ExitOnSignal::start`] until the guard is dropped, SIGINT/SIGTERM print
/// `interrupted by SIGNAL: NOTE` to stderr and exit 130. Drop it before a phase that must
/// handle signals itself (a probe that deletes its Job, a patch that is rolled back). Must be
/// created inside a multi-thread Tokio runtime.
pub struct ExitOnSignal {
    watcher: tokio::task::JoinHandle<()>,
}

impl ExitOnSignal {
    /// Installs the listeners now (before the caller's next step runs) and watches them from
    /// a task of its own.
    pub fn start(note: &str) -> ExitOnSignal {
        let mut signals = Signals::os_only();
        let note = note.to_string();
        ExitOnSignal {
            watcher: tokio::spawn(async move {
                let name = signals.recv().await;
                eprintln!("\ninterrupted by {name}: {note}");
                std::process::exit(EXIT_INTERRUPTED)
            }),
        }
    }
}

impl Drop for ExitOnSignal {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}
