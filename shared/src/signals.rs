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
