//! The controller's flow: connect, serve the endpoints, watch, elect, then diagnose on each
//! change and at each deadline until SIGTERM/SIGINT.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use kube::runtime::events::Reporter;
use unstick::live::ControllerRef;

use crate::args::{Args, socket_addr};
use crate::diagnosis::{self, next_deadline};
use crate::events::{self, Changes, REPORTING_CONTROLLER};
use crate::http::{self, State};
use crate::leader::{self, Leadership};
use crate::levers::Levers;
use crate::metrics::{Metrics, rows};
use crate::watch;

/// Usage error (a flag's value), before any kubeconfig is read.
pub const EXIT_USAGE: i32 = 2;
/// The cluster or the API refused the start (kubeconfig, RBAC, unreachable), or a listen
/// address could not be bound.
pub const EXIT_START: i32 = 3;

/// Fires once, on SIGTERM or SIGINT; cheap to clone.
#[derive(Clone)]
pub struct Shutdown(tokio::sync::watch::Receiver<bool>);

impl Shutdown {
    /// Resolves once shutdown began.
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|v| *v).await;
    }
}

/// A shutdown that fires on SIGTERM or SIGINT.
fn on_signals() -> std::io::Result<Shutdown> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = tokio::sync::watch::channel(false);
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
        let _ = tx.send(true);
    });
    Ok(Shutdown(rx))
}

/// Structured logs on stderr: JSON lines (`--log-encoding=json`, the Flux controllers'
/// default) or console, at `--log-level` (RUST_LOG, when set, wins).
pub fn init_logs(args: &Args) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "warn,cluster_loop_controller={l},kube_lease_manager=warn",
            l = args.log_level
        ))
    });
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if args.log_encoding == "json" {
        b.json().flatten_event(true).with_current_span(false).init();
    } else {
        b.init();
    }
}

/// Runs the controller; returns the exit code ([`EXIT_USAGE`], [`EXIT_START`], 0 after a
/// graceful shutdown).
pub async fn run(args: Args) -> i32 {
    let fail = |code: i32, what: String| {
        tracing::error!(error = %what, "cannot start");
        code
    };
    let (maddr, haddr) = match (
        socket_addr(&args.metrics_addr),
        socket_addr(&args.health_addr),
    ) {
        (Ok(m), Ok(h)) => (m, h),
        (Err(e), _) => return fail(EXIT_USAGE, format!("--metrics-addr: {e}")),
        (_, Err(e)) => return fail(EXIT_USAGE, format!("--health-addr: {e}")),
    };
    for (flag, sel) in [
        ("--watch-label-selector", &args.watch_label_selector),
        ("--levers-label-selector", &args.levers_label_selector),
    ] {
        if let Some(s) = sel
            && unstick::controller::parse_label_selector(s).is_none()
        {
            return fail(EXIT_USAGE, format!("{flag} {s:?} is not a label selector"));
        }
    }
    let shutdown = match on_signals() {
        Ok(s) => s,
        Err(e) => return fail(EXIT_START, format!("cannot handle signals: {e}")),
    };
    let conn = match args.cluster.connect().await {
        Ok(c) => c,
        Err(e) => return fail(EXIT_START, e.to_string()),
    };
    let client = conn.client.clone();
    let runtime_ns = args
        .runtime_namespace
        .clone()
        .unwrap_or_else(|| conn.namespace.clone());
    let metrics = Metrics::new();
    let state = State {
        metrics: metrics.clone(),
        diagnoses: Arc::new(RwLock::new(Bytes::new())),
        ready: Arc::new(AtomicBool::new(false)),
    };
    let bound = match (
        http::serve(maddr, state.clone(), true, shutdown.clone()).await,
        http::serve(haddr, state.clone(), false, shutdown.clone()).await,
    ) {
        (Ok(m), Ok(h)) => (m, h),
        (Err(e), _) | (_, Err(e)) => return fail(EXIT_START, e),
    };
    tracing::info!(metrics = %bound.0, health = %bound.1, "serving /metrics, /diagnoses, /healthz, /readyz");
    let scope = watch::Scope {
        namespace: (!args.watch_all_namespaces).then(|| runtime_ns.clone()),
        label_selector: args.watch_label_selector.clone(),
        controller_namespace: args.controller_namespace.clone(),
    };
    let watches = match watch::start(&client, &scope, &metrics).await {
        Ok(w) => w,
        Err(e) => return fail(EXIT_START, e),
    };
    let mut leadership = if args.enable_leader_election {
        match Leadership::elect(
            client.clone(),
            &runtime_ns,
            args.leader_election_lease_duration,
        )
        .await
        {
            Ok(l) => l,
            Err(e) => return fail(EXIT_START, e),
        }
    } else {
        Leadership::always()
    };
    let ctrl = ControllerRef {
        namespace: args.controller_namespace.clone(),
        name: args.controller_name.clone(),
    };
    let reporter = Reporter {
        controller: REPORTING_CONTROLLER.into(),
        instance: Some(leader::identity()),
    };
    let levers = args.enable_levers.then(|| {
        Levers::new(
            &args,
            client.clone(),
            &conn,
            reporter.clone(),
            metrics.clone(),
        )
    });
    tracing::info!(
        namespace = scope.namespace.as_deref().unwrap_or("(all)"),
        leader_election = args.enable_leader_election,
        levers = args.enable_levers,
        "watching"
    );
    let mut changes = Changes::default();
    let mut due: Option<jiff::Timestamp> = None;
    loop {
        let wait = due.map(|t| {
            let ms = t.duration_since(jiff::Timestamp::now()).as_millis().max(0) as u64;
            Duration::from_millis(ms + 500)
        });
        tokio::select! {
            _ = watches.changed.notified() => {}
            _ = async {
                match wait {
                    Some(w) => tokio::time::sleep(w).await,
                    None => std::future::pending::<()>().await,
                }
            } => {}
            r = leadership.leads.changed() => {
                if r.is_err() { break; }
                let leads = *leadership.leads.borrow();
                metrics.set_leader(leads);
                tracing::info!(leads, "leadership changed");
            }
            _ = shutdown.wait() => break,
        }
        if !watches.ready() {
            continue;
        }
        // A burst of watch events (a re-list, a fleet applied at once) is one diagnosis.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let d = tokio::task::block_in_place(|| {
            diagnosis::run(&watches, scope.namespace.as_deref(), &ctrl)
        });
        metrics.diagnosed(d.secs, rows(&d.report, d.at));
        match serde_json::to_vec(&d.report) {
            Ok(doc) => {
                if let Ok(mut w) = state.diagnoses.write() {
                    *w = Bytes::from(doc);
                }
            }
            Err(e) => tracing::error!(error = %e, "diagnosis document not serialized"),
        }
        state.ready.store(true, Ordering::Relaxed);
        let leads = *leadership.leads.borrow();
        metrics.set_leader(leads);
        let changed = changes.changed(&d.report.items);
        tracing::debug!(
            kustomizations = d.report.items.len(),
            changed = changed.len(),
            secs = d.secs,
            "diagnosed"
        );
        if leads && !changed.is_empty() {
            let uids: HashMap<String, String> = d
                .snapshot
                .kustomizations
                .iter()
                .filter_map(|k| {
                    let uid = unstick::obj::s(k, &["metadata", "uid"])?;
                    Some((unstick::diagnose::key_of(k), uid.to_string()))
                })
                .collect();
            futures::stream::iter(changed)
                .for_each_concurrent(8, |item| {
                    let (client, reporter, metrics) = (&client, &reporter, &metrics);
                    let uid = uids.get(&item.kustomization).cloned();
                    async move {
                        let reason = events::reason(item.class);
                        match events::publish(client, reporter, item, uid).await {
                            Ok(()) => {
                                metrics.event(&reason, true);
                                tracing::info!(kustomization = %item.kustomization, class = %item.class, lever = %item.lever, "class changed: Event published");
                            }
                            Err(e) => {
                                metrics.event(&reason, false);
                                tracing::warn!(kustomization = %item.kustomization, class = %item.class, error = %e, "Event refused");
                            }
                        }
                    }
                })
                .await;
        }
        if leads && let Some(l) = &levers {
            l.consider(&d);
        }
        due = next_deadline(&d.report, d.at);
    }
    tracing::info!("stopping");
    if let Some(l) = levers {
        l.stop().await;
    }
    leadership.release().await;
    0
}
