//! SIGINT/SIGTERM listeners for commands that must undo something when interrupted.

/// SIGINT/SIGTERM listeners, registered eagerly (before anything is created) so a signal that
/// arrives while a create or patch request is in flight is never lost: from registration on,
/// the default "terminate at once" action is replaced and the signal is queued for us.
pub struct Signals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Installs the listeners now. Must run inside a Tokio runtime.
    pub fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Signals {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Signals {}
        }
    }

    /// Resolves on the first SIGINT or SIGTERM received since [`Signals::install`], with its
    /// name (`"SIGINT"` or `"SIGTERM"`).
    pub async fn recv(&mut self) -> &'static str {
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

/// Runs a read-only phase (`fut`: API reads, connection set-up, git fetches) so that SIGINT or
/// SIGTERM ends it at once even while a request hangs (an API server that accepts and never
/// answers, with no `--request-timeout`): on the first signal it prints one line to stderr,
/// `interrupted by SIGINT: NOTE` (`note` says what was left, e.g. `nothing changed`), and
/// exits the process with [`EXIT_INTERRUPTED`] (130).
///
/// Only for phases that change nothing: the process exits without unwinding, so a phase that
/// holds a mutation must keep its own handler and undo it first. Listeners are installed
/// when the returned future is first polled; Tokio delivers a signal to every listener, so
/// this composes with a plugin's own [`Signals`] (or other handlers) installed earlier.
pub async fn exit_on_signal<F: std::future::Future>(note: &str, fut: F) -> F::Output {
    let mut signals = Signals::install();
    tokio::select! {
        out = fut => out,
        name = signals.recv() => {
            eprintln!("\ninterrupted by {name}: {note}");
            std::process::exit(EXIT_INTERRUPTED)
        }
    }
}
