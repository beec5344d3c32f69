//! Opt-in levers: unstick's own choice ([`unstick::lever::plan`], its default options: never
//! a controller restart, never resuming someone else's suspend), executed and proven by
//! unstick's own code ([`unstick::live::execute`], [`unstick::live::wait_proof`]).
//!
//! The safety contract:
//! - off unless `--enable-levers` (and the chart's write RBAC);
//! - only on a Kustomization annotated `cluster-loop.dev/levers: enabled`
//!   ([`crate::args::LEVERS_ANNOTATION`]) or matching `--levers-label-selector`;
//! - only a lever that writes and that unstick plans on this controller's version and flags
//!   (the plan reads the kustomize-controller Deployment: version, feature gates), first from
//!   the watches' stores, then confirmed by unstick's own full read of the namespace right
//!   before the first write (the stores do not hold the health-checked workloads: a held
//!   check whose blockers each need their own fix is `fix-blockers` there, and nothing is
//!   pulled);
//! - only from a diagnosis at most `--levers-max-diagnosis-age` old (default 5 s), checked
//!   again right before the first write; a suspend carries the resourceVersion it was
//!   planned on (a change in between is a 409, nothing written);
//! - one at a time across the fleet, and at most one per Kustomization per
//!   `--levers-min-interval` (default 10m), whatever its outcome;
//! - only on the replica that holds the Lease;
//! - an Event for the action (`LeverPulled`, or `LeverFailed` when a write is refused) and one
//!   for its proof (`LeverProof`: recovered, failed-again, timed-out, interrupted);
//! - SIGTERM during a lever completes a started suspend+resume before the process ends.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_loop::cli::Connection;
use cluster_loop::wait::Progress;
use kube::Client;
use kube::core::SelectorExt;
use kube::runtime::events::Reporter;
use serde_json::Value;
use unstick::lever::{Inputs, Options, Plan};
use unstick::live::{ControllerRef, Interrupt, Scope};
use unstick::obj;

use crate::args::{Args, LEVERS_ANNOTATION};
use crate::diagnosis::Diagnosed;
use crate::events::publish_lever;
use crate::metrics::Metrics;

struct Inner {
    client: Client,
    conn: Connection,
    reporter: Reporter,
    metrics: Metrics,
    selector: Option<kube::core::Selector>,
    min_interval: Duration,
    max_age: Duration,
    controller: ControllerRef,
    busy: AtomicBool,
    last: Mutex<HashMap<String, Instant>>,
    intr: Interrupt,
}

/// The lever runner (one per process).
pub struct Levers(Arc<Inner>);

/// Whether `ks`'s owners opted in: the annotation is `enabled`, or `selector` matches its
/// labels.
pub fn opted_in(ks: &Value, selector: Option<&kube::core::Selector>) -> bool {
    obj::annotation(ks, LEVERS_ANNOTATION) == Some("enabled")
        || selector.is_some_and(|s| {
            let labels = unstick::controller::labels_of(ks);
            s.matches(&labels)
        })
}

impl Levers {
    /// From the flags; `conn` is the controller's connection. Installs its own SIGTERM/SIGINT
    /// listener (a started suspend+resume completes before the process ends).
    pub fn new(
        args: &Args,
        client: Client,
        conn: &Connection,
        reporter: Reporter,
        metrics: Metrics,
    ) -> Levers {
        let intr = Interrupt::install().unwrap_or_default();
        Levers(Arc::new(Inner {
            client,
            conn: Connection {
                client: conn.client.clone(),
                namespace: conn.namespace.clone(),
                namespace_explicit: conn.namespace_explicit,
                context: conn.context.clone(),
                server: conn.server.clone(),
                request_timeout: conn.request_timeout,
            },
            reporter,
            metrics,
            selector: args
                .levers_label_selector
                .as_deref()
                .and_then(unstick::controller::parse_label_selector),
            min_interval: args.levers_min_interval,
            max_age: args.levers_max_diagnosis_age,
            controller: ControllerRef {
                namespace: args.controller_namespace.clone(),
                name: args.controller_name.clone(),
            },
            busy: AtomicBool::new(false),
            last: Mutex::new(HashMap::new()),
            intr,
        }))
    }

    /// Picks at most one lever to pull from `d` (see the module's contract) and pulls it in a
    /// task of its own (the diagnosis goes on meanwhile).
    pub fn consider(&self, d: &Diagnosed) {
        let me = &self.0;
        if d.instant.elapsed() > me.max_age || me.busy.load(Ordering::SeqCst) {
            return;
        }
        let engine = unstick::diagnose::Engine::new(&d.snapshot);
        let holding = engine.holding_workers();
        let token = obj::rfc3339_nano(jiff::Timestamp::now());
        let by_key: HashMap<String, &Value> = d
            .snapshot
            .kustomizations
            .iter()
            .map(|k| (unstick::diagnose::key_of(k), k))
            .collect();
        let mut last = me.last.lock().unwrap_or_else(|e| e.into_inner());
        for item in &d.report.items {
            if !item.lever.mutates() {
                continue;
            }
            let Some(ks) = by_key.get(&item.kustomization).copied() else {
                continue;
            };
            if !opted_in(ks, me.selector.as_ref()) {
                continue;
            }
            if last
                .get(&item.kustomization)
                .is_some_and(|t| t.elapsed() < me.min_interval)
            {
                continue;
            }
            let inputs = Inputs {
                ks,
                source: engine.source_obj(ks),
                controller: engine.controller.as_ref(),
                holding: &holding,
                now: d.at,
                token: &token,
            };
            let plan = unstick::lever::plan(&item.diagnosis, &inputs, &Options::default());
            if !plan.lever.mutates() || plan.steps.is_empty() {
                continue;
            }
            if me.busy.swap(true, Ordering::SeqCst) {
                return;
            }
            last.insert(item.kustomization.clone(), Instant::now());
            let uid = obj::s(ks, &["metadata", "uid"]).map(String::from);
            let inner = self.0.clone();
            let born = d.instant;
            // A thread with a runtime of its own: unstick's execute and proof wait are written
            // for `block_on` (the plugin's main), not for a spawned task.
            let spawned = std::thread::Builder::new()
                .name("lever".into())
                .spawn(move || {
                    match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt.block_on(pull(&inner, plan, uid, born)),
                        Err(e) => tracing::error!(error = %e, "no runtime for the lever"),
                    }
                    inner.busy.store(false, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "no thread for the lever");
                me.busy.store(false, Ordering::SeqCst);
            }
            return;
        }
    }

    /// Waits (up to 60 s) for a lever in progress to end: a started suspend+resume completes,
    /// a proof wait ends at once as interrupted.
    pub async fn stop(self) {
        let until = Instant::now() + Duration::from_secs(60);
        while self.0.busy.load(Ordering::SeqCst) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn pull(me: &Inner, plan: Plan, uid: Option<String>, born: Instant) {
    let key = plan.kustomization.clone();
    let lever = plan.lever.as_str();
    let Some((ns, name)) = key.split_once('/') else {
        return;
    };
    let event = |warning: bool, reason: &'static str, note: String| {
        lever_event(me, &key, uid.clone(), warning, reason, note)
    };
    if born.elapsed() > me.max_age {
        tracing::info!(kustomization = %key, lever, "diagnosis too old by the time of the write: not pulled");
        me.metrics.lever(lever, "stale");
        return;
    }
    // unstick's own full read of the namespace (the health-checked workloads, their pods and
    // events, which the watches do not hold) decides: the lever is pulled only when it plans
    // the same lever that writes. A held check whose blockers each need a fix of their own is
    // fix-blockers there, whatever the stores alone suggest.
    let scope = Scope {
        namespace: Some(ns.to_string()),
        controller: me.controller.clone(),
    };
    let plan = match confirm(me, &scope, ns, name).await {
        Ok(Some(p)) if p.lever == plan.lever && p.lever.mutates() && !p.steps.is_empty() => p,
        Ok(p) => {
            let chose = p.map(|p| p.lever.as_str()).unwrap_or("nothing");
            tracing::info!(kustomization = %key, lever, chose, "unstick's full read plans another lever: not pulled");
            me.metrics.lever(lever, "not-confirmed");
            return;
        }
        Err(e) => {
            me.metrics.lever(lever, "error");
            event(
                true,
                "LeverFailed",
                format!("lever {lever}: not read again: {e}"),
            )
            .await;
            return;
        }
    };
    tracing::info!(kustomization = %key, lever, "pulling lever");
    let ex = match unstick::live::execute(&me.conn, &plan, &me.intr, false).await {
        Ok(ex) => ex,
        Err(e) => {
            me.metrics.lever(lever, "error");
            event(true, "LeverFailed", format!("lever {lever}: {e}")).await;
            return;
        }
    };
    event(
        false,
        "LeverPulled",
        format!(
            "lever {lever}: {}; why: {}",
            ex.done.join("; "),
            plan.why.join(" ")
        ),
    )
    .await;
    let expect = unstick::run::expect(&plan, &ex);
    let waited = unstick::live::wait_proof(
        &me.conn,
        &scope,
        ns,
        name,
        &expect,
        Duration::from_secs_f64(plan.wait_secs.max(1.0)),
        &Progress::hidden(),
        &me.intr,
    )
    .await;
    match waited {
        Ok(w) => {
            let proof = unstick::run::proof_str(w.proof);
            me.metrics.lever(lever, proof);
            let seen = w.last_seen.map(|s| format!(": {s}")).unwrap_or_default();
            tracing::info!(kustomization = %key, lever, proof, "lever proof");
            event(
                w.proof != unstick::live::Proof::Recovered,
                "LeverProof",
                format!("lever {lever}: {proof}{seen}"),
            )
            .await;
        }
        Err(e) => {
            me.metrics.lever(lever, "error");
            event(
                true,
                "LeverProof",
                format!("lever {lever}: proof not read: {e}"),
            )
            .await;
        }
    }
}

async fn lever_event(
    me: &Inner,
    key: &str,
    uid: Option<String>,
    warning: bool,
    reason: &'static str,
    note: String,
) {
    let r = publish_lever(&me.client, &me.reporter, key, uid, warning, reason, note).await;
    me.metrics.event(reason, r.is_ok());
    if let Err(e) = r {
        tracing::warn!(kustomization = %key, reason, error = %e, "Event refused");
    }
}

/// unstick's plan for `ns/name` from its own full read ([`unstick::live::gather`] of the
/// namespace), as `kubectl unstick ks/NAME` plans it; `None` when the Kustomization is gone.
async fn confirm(
    me: &Inner,
    scope: &Scope,
    ns: &str,
    name: &str,
) -> cluster_loop::error::Result<Option<Plan>> {
    let (snap, _) =
        unstick::live::gather(&me.conn, scope, &unstick::live::Reader::default()).await?;
    let engine = unstick::diagnose::Engine::new(&snap);
    let Some(d) = engine.diagnose(ns, name) else {
        return Ok(None);
    };
    let Some(ks) = snap
        .kustomizations
        .iter()
        .find(|k| obj::namespace(k) == ns && obj::name(k) == name)
    else {
        return Ok(None);
    };
    let holding = engine.holding_workers();
    let token = obj::rfc3339_nano(jiff::Timestamp::now());
    let inputs = engine.lever_inputs(ks, &holding, snap.now, &token);
    Ok(Some(unstick::lever::plan(&d, &inputs, &Options::default())))
}
