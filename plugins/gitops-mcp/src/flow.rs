//! Running one plugin flow in process, exactly as its command line runs it.
//!
//! Each tool builds the argument vector its plugin's CLI would get (`-o json` always, the
//! server's fixed cluster flags for cluster-facing flows), parses it with the plugin's own clap
//! [`clap::Parser`] and calls the plugin library's `run` inside a
//! [`cluster_loop::embed::Embedding`]: stdout is captured, progress goes to the observer,
//! and cancelling the embedding undoes as Ctrl-C does. The tool result is therefore the
//! plugin's own `-o json` document, byte for byte, never a second rendering of it.
//!
//! Flows run on threads of their own, tracked by the session's
//! [`tokio_util::task::TaskTracker`], so a client that goes away never drops a flow between a
//! write and its undo: the server waits for them before it exits.

use std::future::Future;

use clap::Parser;
use cluster_loop::embed::Embedding;
use cluster_loop::error::{EXIT_USAGE, Error};
use cluster_loop::output::ErrorDocument;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What a flow ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The plugin's exit code (0 ok, 1 finding, 2 usage, 3 cluster or API error, 130
    /// interrupted), as its command line would exit.
    pub exit_code: i32,
    /// The plugin's `-o json` document: its report, or its error document
    /// (`{apiVersion, kind: <Plugin>Error, exitCode, error}`) when the run ended with an error.
    pub document: Value,
}

/// Which plugin a flow belongs to: the schema and error kind of its error document.
#[derive(Debug, Clone, Copy)]
pub struct Plugin {
    /// Its binary, the first element of every argument vector (e.g. `kubectl-unstick`).
    pub bin: &'static str,
    /// `apiVersion` of its documents, e.g. `unstick.cluster-loop.dev/v1`.
    pub api_version: &'static str,
    /// Kind of its error document: its report kind with `Error` for `Report` (`UnstickError`
    /// beside `UnstickReport`, `MarkerCheckError` beside `MarkerCheckReport`).
    pub error_kind: &'static str,
}

/// kubectl unstick.
pub const UNSTICK: Plugin = Plugin {
    bin: "kubectl-unstick",
    api_version: unstick::report::SCHEMA,
    error_kind: "UnstickError",
};
/// kubectl podresolve.
pub const PODRESOLVE: Plugin = Plugin {
    bin: "kubectl-podresolve",
    api_version: podresolve::report::API_VERSION,
    error_kind: "PodResolveError",
};
/// kubectl markercheck.
pub const MARKERCHECK: Plugin = Plugin {
    bin: "kubectl-markercheck",
    api_version: markercheck::report::SCHEMA,
    error_kind: "MarkerCheckError",
};
/// kubectl fleetlint.
pub const FLEETLINT: Plugin = Plugin {
    bin: "kubectl-fleetlint",
    api_version: fleetlint::report::SCHEMA,
    error_kind: "FleetLintError",
};
/// kubectl gatewaycheck.
pub const GATEWAYCHECK: Plugin = Plugin {
    bin: "kubectl-gatewaycheck",
    api_version: gatewaycheck::report::API_VERSION,
    error_kind: "GatewayCheckError",
};
/// kubectl gitops verify.
pub const VERIFY: Plugin = Plugin {
    bin: "kubectl-gitops-verify",
    api_version: gitops_verify::chain::API_VERSION,
    error_kind: "ChainError",
};
/// kubectl cutover.
pub const CUTOVER: Plugin = Plugin {
    bin: "kubectl-cutover",
    api_version: cutover::run::API_VERSION,
    error_kind: "CutoverError",
};

impl Plugin {
    /// The outcome of a run that ended with `exit_code` and `error` instead of a report: the
    /// shared [`ErrorDocument`] with this plugin's `apiVersion` and error kind.
    pub fn failed(self, exit_code: i32, error: String) -> Outcome {
        let doc = ErrorDocument {
            api_version: self.api_version,
            kind: self.error_kind,
            exit_code,
            error,
        };
        Outcome {
            exit_code,
            document: serde_json::to_value(doc).unwrap_or(Value::Null),
        }
    }

    /// [`Plugin::failed`] for `err`, with its exit code and message.
    pub fn error(self, err: &Error) -> Outcome {
        self.failed(err.exit_code(), err.to_string())
    }
}

/// How a cancellation from the client is honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCancel {
    /// The flow only reads: it is dropped at once.
    Drop,
    /// The flow may hold something it must undo (a suspended Kustomization, a patched source,
    /// a probe Job): its embedding is cancelled, which it sees as SIGINT, and the call waits
    /// for its undo and its report (exit 130).
    Undo,
}

fn parse<C: Parser>(argv: &[String]) -> Result<C, Outcome> {
    C::try_parse_from(argv).map_err(|e| Outcome {
        exit_code: EXIT_USAGE,
        document: serde_json::json!({
            "exitCode": EXIT_USAGE,
            "error": e.render().to_string().trim_end(),
        }),
    })
}

fn finish(plugin: Plugin, emb: &Embedding, result: Result<i32, Error>) -> Outcome {
    match result {
        Ok(code) => {
            let out = emb.stdout();
            match serde_json::from_slice::<Value>(&out) {
                Ok(document) => Outcome {
                    exit_code: code,
                    document,
                },
                Err(e) => plugin.error(&Error::Other(format!(
                    "{}: the run wrote no JSON document ({e}); this is a bug of the server, please report it",
                    plugin.error_kind.trim_end_matches("Error")
                ))),
            }
        }
        Err(e) => plugin.error(&e),
    }
}

/// Runs an async plugin flow: `argv` parsed as `C`, then `run(cli)` inside `emb`, on a thread
/// of its own with a runtime of its own (as the plugin's binary runs it: two workers), tracked
/// by `tracker`. `ct` is the client's cancellation of this call, honoured as `on_cancel` says;
/// a dropped call ends with exit 130 and an error document saying so.
pub async fn run_async<C, F, Fut>(
    plugin: Plugin,
    argv: Vec<String>,
    emb: Embedding,
    tracker: &TaskTracker,
    ct: CancellationToken,
    on_cancel: OnCancel,
    run: F,
) -> Outcome
where
    C: Parser + Send + 'static,
    F: FnOnce(C) -> Fut + Send + 'static,
    Fut: Future<Output = Result<i32, Error>> + 'static,
{
    let cli: C = match parse(&argv) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let e = emb.clone();
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    let flow = move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|err| Error::Other(format!("cannot start a runtime for the run: {err}")))?;
        let r = rt.block_on(e.scope(async move {
            tokio::select! {
                r = run(cli) => r,
                _ = stopped.cancelled() => Ok(cluster_loop::signals::EXIT_INTERRUPTED),
            }
        }));
        rt.shutdown_timeout(std::time::Duration::from_millis(100));
        r
    };
    wait(plugin, emb, tracker, 2 << 20, flow, stop, ct, on_cancel).await
}

/// Runs a blocking plugin flow (markercheck, fleetlint) the same way, on a thread of its own
/// with `stack` bytes of stack (markercheck's YAML walks recurse once per nesting level).
/// Cancelling drops the call at once (these flows only read; the thread ends by itself).
pub async fn run_blocking<C, F>(
    plugin: Plugin,
    argv: Vec<String>,
    emb: Embedding,
    tracker: &TaskTracker,
    ct: CancellationToken,
    stack: usize,
    run: F,
) -> Outcome
where
    C: Parser + Send + 'static,
    F: FnOnce(C) -> Result<i32, Error> + Send + 'static,
{
    let cli: C = match parse(&argv) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let e = emb.clone();
    let flow = move || e.scope_sync(|| run(cli));
    let stop = CancellationToken::new();
    wait(plugin, emb, tracker, stack, flow, stop, ct, OnCancel::Drop).await
}

#[allow(clippy::too_many_arguments)]
async fn wait(
    plugin: Plugin,
    emb: Embedding,
    tracker: &TaskTracker,
    stack: usize,
    flow: impl FnOnce() -> Result<i32, Error> + Send + 'static,
    stop: CancellationToken,
    ct: CancellationToken,
    on_cancel: OnCancel,
) -> Outcome {
    let (tx, rx) = tokio::sync::oneshot::channel();
    // Held by the thread: the server's exit waits for it (an undo is never cut short).
    let held = tracker.token();
    let spawned = std::thread::Builder::new()
        .name("gitops-mcp-flow".into())
        .stack_size(stack)
        .spawn(move || {
            let _held = held;
            let _ = tx.send(flow());
        });
    if let Err(err) = spawned {
        return finish(
            plugin,
            &emb,
            Err(Error::Other(format!(
                "cannot start a thread for the run: {err}"
            ))),
        );
    }
    let mut rx = rx;
    let joined = tokio::select! {
        r = &mut rx => r,
        _ = ct.cancelled() => {
            emb.cancel();
            match on_cancel {
                OnCancel::Undo => rx.await,
                OnCancel::Drop => {
                    stop.cancel();
                    return cancelled(plugin);
                }
            }
        }
    };
    let result = joined.unwrap_or_else(|_| {
        Err(Error::Other(
            "the run ended without a result (it panicked); this is a bug, please report it".into(),
        ))
    });
    finish(plugin, &emb, result)
}

fn cancelled(plugin: Plugin) -> Outcome {
    plugin.failed(
        cluster_loop::signals::EXIT_INTERRUPTED,
        "cancelled by the client: this read-only call was stopped; nothing was changed".into(),
    )
}
