//! kustomize-controller model for `Kustomization` (kustomize.toolkit.fluxcd.io/v1).
//!
//! Read from fluxcd/kustomize-controller v1.6-v1.9 `internal/controller/kustomization_controller.go`
//! (`Reconcile`, `reconcile`, `checkDependencies`, `checkHealth`, `finalizeStatus`, `event`),
//! `kustomization_manager.go` (watches, predicates, `CancelHealthCheckOnRequeue`),
//! `kustomization_indexers.go` (`requestsForRevisionChangeOf`), `api/v1` (`GetTimeout`,
//! `GetRetryInterval`), `internal/features`, fluxcd/pkg `ssa` (`WaitForSetWithContext`,
//! `DryRunErr`, `FmtObjMetadata`) and `runtime/controller` (`QueueEventSource`, interrupt
//! context). The model:
//! - builds `spec.path` of the source checkout with the real `kubectl kustomize` (generating a
//!   kustomization.yaml listing the YAML files when there is none, like upstream's generator),
//!   then post-build substitution ([`super::subst`]);
//! - applies every object with labels `kustomize.toolkit.fluxcd.io/name` and `/namespace`
//!   (Namespaces and CRDs first), records `status.inventory.entries` as
//!   `{id: <ns>_<name>_<group>_<Kind>, v: <version>}` and prunes stale entries when
//!   `spec.prune` (skipping `kustomize.toolkit.fluxcd.io/prune: disabled`);
//! - dependsOn: `dependency 'NS/NAME' not found: ...`, `... is not ready`,
//!   `... revision is not up to date` (same source), Ready=False DependencyNotReady, event
//!   `Dependencies do not meet ready condition, retrying in 30s`, requeue
//!   `--requeue-dependency` (30s);
//! - health checks for `wait: true` (every applied object) or `healthChecks`: twin kstatus every
//!   5s, timeout `GetTimeout` (spec.timeout, else interval - 30s, min 30s), success when all
//!   Current, early end when any is Failed (fail-fast, unless DisableFailFastBehavior) or all
//!   are Current/Failed; messages `Running health checks for revision R with a timeout of T`,
//!   `health check failed after D: timeout waiting for: [Kind/ns/name status: 'InProgress']`
//!   or `failed early due to stalled resources: [...]` (Healthy carries the part after the
//!   prefix), `Health check passed in D`;
//! - conditions Ready/Reconciling/Healthy with upstream reasons and messages (`Fetching
//!   manifests...`, `Building manifests...`, `Detecting drift...`), finalizeStatus
//!   (lastHandledReconcileAt from the annotation read at run start, observedGeneration only
//!   when Ready=True, Reconciling reason ProgressingWithRetry on failure);
//! - a controller-runtime work queue with `--concurrent` workers: one run per object at a
//!   time, events during a run re-queue it after the run;
//! - the `kustomize-controller` Deployment in flux-system sets the version (image tag) and
//!   args: `--concurrent`, `--requeue-dependency`, `--feature-gates`.
//!   `CancelHealthCheckOnNewRevision=true` on v1.7 polls the source during health checks and
//!   cancels on a new revision (`health check failed after D: context canceled`, event
//!   `New revision detected during health check, cancelling`); on v1.8+ any re-queue event
//!   (own generation or requestedAt change, source revision change) cancels: Ready=False
//!   HealthCheckCanceled `New reconciliation triggered by Kind/ns/name`, immediate requeue.
//!   `StrictPostBuildSubstitutions` defaults on from v1.9;
//! - deleting the controller's pod cancels every in-flight run (their final status writes fail
//!   with the canceled context, so nothing more is written) and the model restarts, re-reading
//!   the Deployment, when the next pod exists;
//! - Kubernetes Events with the Ready reason as event reason, as `event()` does;
//! - v1.7+ config watchers: a ConfigMap/Secret labelled `reconcile.fluxcd.io/watch: Enabled`
//!   that a Kustomization uses in postBuild.substituteFrom re-queues it on every change (and,
//!   on v1.8+ with the gate, cancels its health check: `... triggered by ConfigMap/ns/name`),
//!   unless `DisableConfigWatchers=true`.
//!
//! Left out: sources other than GitRepository, SOPS decryption, remote bases, impersonation
//! and kubeConfig, CEL health checks and readyExpr, `status.history`, field-manager takeover,
//! decryption/kubeConfig secret watches, finalizers and deletion policy, server-side apply
//! conflicts (apply is create-or-merge-patch), jitter.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::ModelOptions;
use super::cluster::{ApplyAction, ChangeType, ClusterRef, ObjKey, apply, record_event, s};
use super::conditions::Conditions;
use super::duration::{go_duration, parse_go_duration};
use super::kstatus::{self, Status};
use super::queue::WorkQueue;
use super::source::{REQUESTED_AT, SOURCE_API, checkout_dir, revision_sha};
use super::subst;

/// `kustomize.toolkit.fluxcd.io/v1`.
pub const KS_API: &str = "kustomize.toolkit.fluxcd.io/v1";
const COMPONENT: &str = "kustomize-controller";
/// Namespace of the controller Deployment.
pub const FLUX_NS: &str = "flux-system";

/// When health checks get canceled (feature gate `CancelHealthCheckOnNewRevision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelMode {
    /// Gate off, or a version without the gate: nothing cancels a health check.
    Off,
    /// v1.7 with the gate: a new source revision (polled during the wait).
    NewRevision,
    /// v1.8+ with the gate: any event that re-queues the object.
    Requeue,
}

/// The controller's configuration, read from the `kustomize-controller` Deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerConfig {
    /// `(major, minor)` from the image tag, e.g. `(1, 8)`.
    pub version: (u32, u32),
    /// `--feature-gates` entries.
    pub gates: BTreeMap<String, bool>,
    /// `--concurrent` (default 4).
    pub concurrent: usize,
    /// `--requeue-dependency` (default 30s).
    pub requeue_dependency: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            version: (1, 9),
            gates: BTreeMap::new(),
            concurrent: 4,
            requeue_dependency: Duration::from_secs(30),
        }
    }
}

impl ControllerConfig {
    /// Parses the Deployment: container image tag `vX.Y[.Z]` and args
    /// (`--concurrent=N`, `--requeue-dependency=30s`, `--feature-gates=A=true,B=false`).
    pub fn from_deployment(dep: &Value) -> ControllerConfig {
        let mut cfg = ControllerConfig::default();
        let Some(c) = dep
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|c| c["name"] == "manager")
                    .or_else(|| a.first())
            })
        else {
            return cfg;
        };
        let image = c["image"].as_str().unwrap_or_default();
        if let Some((_, tag)) = image.rsplit_once(':') {
            let mut it = tag.trim_start_matches('v').split(['.', '-']);
            if let (Some(a), Some(b)) = (it.next(), it.next())
                && let (Ok(a), Ok(b)) = (a.parse(), b.parse())
            {
                cfg.version = (a, b);
            }
        }
        for a in c["args"].as_array().into_iter().flatten() {
            let a = a.as_str().unwrap_or_default();
            if let Some(v) = a.strip_prefix("--concurrent=") {
                cfg.concurrent = v.parse().unwrap_or(4).max(1);
            } else if let Some(v) = a.strip_prefix("--requeue-dependency=") {
                cfg.requeue_dependency = parse_go_duration(v).unwrap_or(cfg.requeue_dependency);
            } else if let Some(v) = a.strip_prefix("--feature-gates=") {
                for kv in v.split(',') {
                    if let Some((k, v)) = kv.split_once('=') {
                        cfg.gates.insert(k.trim().into(), v.trim() == "true");
                    }
                }
            }
        }
        cfg
    }

    /// The cancel behaviour this version and gate set give.
    pub fn cancel_mode(&self) -> CancelMode {
        if !self
            .gates
            .get("CancelHealthCheckOnNewRevision")
            .copied()
            .unwrap_or(false)
        {
            return CancelMode::Off;
        }
        match self.version {
            (1, m) if m >= 8 => CancelMode::Requeue,
            (1, 7) => CancelMode::NewRevision,
            (v, _) if v > 1 => CancelMode::Requeue,
            _ => CancelMode::Off,
        }
    }

    /// `StrictPostBuildSubstitutions`: explicit gate, else on from v1.9.
    pub fn strict_substitutions(&self) -> bool {
        self.gates
            .get("StrictPostBuildSubstitutions")
            .copied()
            .unwrap_or(self.version >= (1, 9))
    }

    /// Fail-fast unless `DisableFailFastBehavior=true`.
    pub fn fail_fast(&self) -> bool {
        !self
            .gates
            .get("DisableFailFastBehavior")
            .copied()
            .unwrap_or(false)
    }
}

/// fluxcd/pkg runtime/controller `QueueEventSource`: what re-queued an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEventSource {
    /// Kind of the object whose event re-queued it.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Per in-flight run: the interrupt (v1.8 listener) and the pod-shutdown cancel.
#[derive(Default)]
struct RunSignals {
    interrupt: Mutex<Option<QueueEventSource>>,
    shutdown: AtomicBool,
    notify: Notify,
}

struct Instance {
    config: ControllerConfig,
    queue: WorkQueue<ObjKey>,
    running: Arc<Mutex<HashMap<ObjKey, Arc<RunSignals>>>>,
    pod: Option<String>,
    /// The bound pod was deleted and no replacement exists yet.
    down: bool,
    epoch: u64,
}

/// The kustomize-controller model.
pub struct KustomizeController {
    cluster: ClusterRef,
    opts: Arc<ModelOptions>,
    inst: Mutex<Instance>,
    stopped: AtomicBool,
    /// Object keys seen per watch for predicates: (generation, requestedAt) of Kustomizations
    /// and artifact revision of sources.
    seen: Mutex<HashMap<ObjKey, (i64, String)>>,
}

fn gvk_of(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// Inventory id `<ns>_<name>_<group>_<Kind>` (fluxcd/pkg ssa object.ObjMetadata.String()).
pub fn inventory_id(obj: &Value) -> String {
    let (g, _) = gvk_of(obj["apiVersion"].as_str().unwrap_or_default());
    format!(
        "{}_{}_{}_{}",
        s(obj, "/metadata/namespace"),
        s(obj, "/metadata/name"),
        g,
        s(obj, "/kind")
    )
}

/// `Kind/ns/name` (or `Kind/name`), fluxcd/pkg ssa utils `FmtObjMetadata`.
pub fn fmt_obj(kind: &str, ns: &str, name: &str) -> String {
    if ns.is_empty() {
        format!("{kind}/{name}")
    } else {
        format!("{kind}/{ns}/{name}")
    }
}

const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
];

enum Outcome {
    /// Requeue after the duration (None: no requeue).
    Requeue(Option<Duration>),
    /// The pod went away: stop writing.
    Aborted,
}

enum HealthResult {
    Healthy,
    Failed(String),
    Canceled(QueueEventSource),
    Aborted,
}

impl KustomizeController {
    /// Starts the model: reads the controller Deployment, starts `--concurrent` workers,
    /// watches Kustomizations, GitRepositories and the controller's Deployment/Pods.
    pub fn start(cluster: ClusterRef, opts: Arc<ModelOptions>) -> Arc<KustomizeController> {
        let ctl = Arc::new(KustomizeController {
            cluster,
            opts,
            inst: Mutex::new(Instance {
                config: ControllerConfig::default(),
                queue: WorkQueue::new(),
                running: Arc::new(Mutex::new(HashMap::new())),
                pod: None,
                down: false,
                epoch: 0,
            }),
            stopped: AtomicBool::new(false),
            seen: Mutex::new(HashMap::new()),
        });
        let mut rx = ctl.cluster.watch(&[
            (KS_API, "Kustomization"),
            (SOURCE_API, "GitRepository"),
            ("apps/v1", "Deployment"),
            ("v1", "Pod"),
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
        ]);
        ctl.restart();
        let c = ctl.clone();
        tokio::spawn(async move {
            while let Some(ch) = rx.recv().await {
                if c.stopped.load(Ordering::SeqCst) {
                    break;
                }
                c.on_change(ch.event, &ch.object);
            }
        });
        ctl
    }

    /// Stops the model.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let inst = self.inst.lock().unwrap();
        inst.queue.shut_down();
        for r in inst.running.lock().unwrap().values() {
            r.shutdown.store(true, Ordering::SeqCst);
            r.notify.notify_waiters();
        }
    }

    /// The configuration the current controller instance runs with.
    pub fn config(&self) -> ControllerConfig {
        self.inst.lock().unwrap().config.clone()
    }

    /// How many times the controller has (re)started.
    pub fn epoch(&self) -> u64 {
        self.inst.lock().unwrap().epoch
    }

    fn controller_pods(&self) -> Vec<Value> {
        self.cluster
            .list("v1", "Pod", Some(FLUX_NS))
            .unwrap_or_default()
            .into_iter()
            .filter(|p| s(p, "/metadata/labels/app") == COMPONENT)
            .filter(|p| s(p, "/metadata/deletionTimestamp").is_empty())
            .collect()
    }

    /// A new controller process: cancels in-flight runs, re-reads the Deployment, starts
    /// workers and enqueues every Kustomization (the informer's initial list).
    fn restart(self: &Arc<Self>) {
        if std::env::var("TWIN_DEBUG").is_ok() {
            eprintln!("ks-ctl: restart");
        }
        let dep = self
            .cluster
            .get(&ObjKey::new("apps/v1", "Deployment", FLUX_NS, COMPONENT))
            .ok()
            .flatten();
        let config = dep
            .as_ref()
            .map(ControllerConfig::from_deployment)
            .unwrap_or_default();
        let pod = self
            .controller_pods()
            .first()
            .map(|p| s(p, "/metadata/name").to_string());
        let queue = WorkQueue::new();
        let running = Arc::new(Mutex::new(HashMap::new()));
        {
            let mut inst = self.inst.lock().unwrap();
            inst.queue.shut_down();
            for r in inst.running.lock().unwrap().values() {
                r.shutdown.store(true, Ordering::SeqCst);
                r.notify.notify_waiters();
            }
            inst.epoch += 1;
            inst.config = config.clone();
            inst.queue = queue.clone();
            inst.running = running.clone();
            inst.pod = pod;
            inst.down = false;
        }
        for o in self
            .cluster
            .list(KS_API, "Kustomization", None)
            .unwrap_or_default()
        {
            self.remember(&o);
            queue.add(ObjKey::of(&o));
        }
        for o in self
            .cluster
            .list(SOURCE_API, "GitRepository", None)
            .unwrap_or_default()
        {
            self.remember(&o);
        }
        for _ in 0..config.concurrent {
            let c = self.clone();
            let q = queue.clone();
            let running = running.clone();
            let config = config.clone();
            tokio::spawn(async move {
                while let Some(key) = q.get().await {
                    let sig = Arc::new(RunSignals::default());
                    running.lock().unwrap().insert(key.clone(), sig.clone());
                    let out = c.reconcile(&key, &config, &sig).await;
                    running.lock().unwrap().remove(&key);
                    q.done(&key);
                    if let Outcome::Requeue(Some(d)) = out {
                        q.add_after(key, c.opts.scaled(d));
                    }
                }
            });
        }
    }

    fn remember(&self, o: &Value) -> Option<(i64, String)> {
        let key = ObjKey::of(o);
        let v = if key.kind == "Kustomization" {
            (
                o.pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
                o.pointer("/metadata/annotations")
                    .and_then(|a| a.get(REQUESTED_AT))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )
        } else {
            (0, s(o, "/status/artifact/revision").to_string())
        };
        self.seen.lock().unwrap().insert(key, v)
    }

    /// Enqueues `key`; in v1.8 cancel mode also dispatches to its in-flight run's listener.
    fn enqueue(&self, key: ObjKey, source: QueueEventSource) {
        if std::env::var("TWIN_DEBUG").is_ok() {
            eprintln!("ks-ctl: enqueue {} by {source:?}", key.name);
        }
        let inst = self.inst.lock().unwrap();
        if inst.config.cancel_mode() == CancelMode::Requeue
            && let Some(sig) = inst.running.lock().unwrap().get(&key)
        {
            let mut i = sig.interrupt.lock().unwrap();
            if i.is_none() {
                *i = Some(source);
                sig.notify.notify_waiters();
            }
        }
        inst.queue.add(key);
    }

    fn on_change(self: &Arc<Self>, event: ChangeType, o: &Value) {
        let key = ObjKey::of(o);
        let src = QueueEventSource {
            kind: key.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
        match key.kind.as_str() {
            "Kustomization" => {
                if event == ChangeType::Deleted {
                    self.seen.lock().unwrap().remove(&key);
                    return;
                }
                let prev = self.remember(o);
                let now = self.seen.lock().unwrap().get(&key).cloned();
                // GenerationChangedPredicate || ReconcileRequestedPredicate (create: always)
                if event == ChangeType::Added || prev != now {
                    self.enqueue(key, src);
                }
            }
            "GitRepository" => {
                if event == ChangeType::Deleted {
                    return;
                }
                let prev = self.remember(o).map(|p| p.1).unwrap_or_default();
                let rev = s(o, "/status/artifact/revision").to_string();
                // SourceRevisionChangePredicate
                if std::env::var("TWIN_DEBUG").is_ok() {
                    eprintln!("ks-ctl: source {} rev {rev} prev {prev}", key.name);
                }
                if rev.is_empty() || rev == prev {
                    return;
                }
                for k in self
                    .cluster
                    .list(KS_API, "Kustomization", None)
                    .unwrap_or_default()
                {
                    let ref_ns = match s(&k, "/spec/sourceRef/namespace") {
                        "" => s(&k, "/metadata/namespace"),
                        n => n,
                    };
                    if s(&k, "/spec/sourceRef/kind") != "GitRepository"
                        || s(&k, "/spec/sourceRef/name") != key.name
                        || ref_ns != key.namespace
                    {
                        continue;
                    }
                    let c = Conditions::of(&k);
                    if (c.is_true("Ready") || c.is_true("Reconciling"))
                        && s(&k, "/status/lastAttemptedRevision") == rev
                    {
                        continue;
                    }
                    self.enqueue(ObjKey::of(&k), src.clone());
                }
            }
            "ConfigMap" | "Secret" => {
                // v1.7+ config watchers: `reconcile.fluxcd.io/watch: Enabled` objects re-queue
                // the Kustomizations that use them in postBuild.substituteFrom
                // (kustomization_indexers.go requestsForConfigDependency).
                let cfg = self.config();
                if cfg.version < (1, 7)
                    || cfg
                        .gates
                        .get("DisableConfigWatchers")
                        .copied()
                        .unwrap_or(false)
                    || s(o, "/metadata/labels/reconcile.fluxcd.io~1watch") != "Enabled"
                {
                    return;
                }
                for k in self
                    .cluster
                    .list(KS_API, "Kustomization", Some(&key.namespace))
                    .unwrap_or_default()
                {
                    let uses = subst::substitute_from(&k)
                        .iter()
                        .any(|r| r.kind == key.kind && r.name == key.name);
                    if uses {
                        self.enqueue(ObjKey::of(&k), src.clone());
                    }
                }
            }
            "Pod" => {
                if key.namespace != FLUX_NS || s(o, "/metadata/labels/app") != COMPONENT {
                    return;
                }
                let (bound, down) = {
                    let inst = self.inst.lock().unwrap();
                    (inst.pod.clone(), inst.down)
                };
                let gone =
                    event == ChangeType::Deleted || !s(o, "/metadata/deletionTimestamp").is_empty();
                if gone && bound.as_deref() == Some(key.name.as_str()) {
                    // The process is gone: every in-flight run is canceled.
                    self.cancel_all();
                    let others = !self.controller_pods().is_empty();
                    {
                        let mut inst = self.inst.lock().unwrap();
                        inst.pod = None;
                        inst.down = !others;
                    }
                    if others {
                        self.restart();
                    }
                } else if !gone && bound.is_none() {
                    if down {
                        // a replacement pod: a fresh process
                        self.restart();
                    } else {
                        self.inst.lock().unwrap().pod = Some(key.name.clone());
                    }
                }
            }
            _ => {}
        }
    }

    fn cancel_all(&self) {
        let inst = self.inst.lock().unwrap();
        inst.queue.shut_down();
        for r in inst.running.lock().unwrap().values() {
            r.shutdown.store(true, Ordering::SeqCst);
            r.notify.notify_waiters();
        }
    }

    fn patch_status(&self, sig: &RunSignals, obj: &Value, status: &Value) -> bool {
        if sig.shutdown.load(Ordering::SeqCst) {
            return false;
        }
        let mut st = status.clone();
        if let (Some(old), Some(new)) = (obj["status"].as_object(), st.as_object_mut()) {
            for k in old.keys() {
                new.entry(k.clone()).or_insert(Value::Null);
            }
        }
        if std::env::var("TWIN_DEBUG").is_ok() {
            let c: Vec<String> = st["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{}={}/{}: {}",
                        s(c, "/type"),
                        s(c, "/status"),
                        s(c, "/reason"),
                        s(c, "/message")
                    )
                })
                .collect();
            eprintln!(
                "{:?} ks {} {:?}",
                std::time::SystemTime::now(),
                s(obj, "/metadata/name"),
                c
            );
        }
        self.cluster
            .merge_patch_status(&ObjKey::of(obj), json!({"status": st}), COMPONENT)
            .is_ok()
    }

    /// `event()`: reason = the Ready condition's reason (else the severity), Warning for errors.
    fn event(
        &self,
        sig: &RunSignals,
        obj: &Value,
        conds: &Conditions,
        error: bool,
        revision: &str,
        msg: &str,
    ) {
        if sig.shutdown.load(Ordering::SeqCst) {
            return;
        }
        let reason = conds
            .get("Ready")
            .and_then(|c| c["reason"].as_str())
            .unwrap_or(if error { "error" } else { "info" })
            .to_string();
        let ann = (!revision.is_empty())
            .then(|| json!({"kustomize.toolkit.fluxcd.io/revision": revision}));
        record_event(
            &*self.cluster,
            obj,
            if error { "Warning" } else { "Normal" },
            &reason,
            msg,
            COMPONENT,
            ann,
        );
    }

    async fn reconcile(&self, key: &ObjKey, cfg: &ControllerConfig, sig: &RunSignals) -> Outcome {
        let start = Instant::now();
        let Some(obj) = self.cluster.get(key).ok().flatten() else {
            return Outcome::Requeue(None);
        };
        let requested = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(REQUESTED_AT))
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut status = obj.get("status").cloned().unwrap_or_else(|| json!({}));
        if !status.is_object() {
            status = json!({});
        }
        let mut conds = Conditions::of(&obj);
        let interval =
            parse_go_duration(s(&obj, "/spec/interval")).unwrap_or(Duration::from_secs(600));
        let retry = obj
            .pointer("/spec/retryInterval")
            .and_then(Value::as_str)
            .and_then(|r| parse_go_duration(r).ok())
            .unwrap_or(interval);
        let suspended = obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);

        let out = if suspended {
            Outcome::Requeue(None)
        } else {
            self.run(&obj, cfg, sig, &mut conds, &mut status, interval, retry)
                .await
        };
        if matches!(out, Outcome::Aborted) || sig.shutdown.load(Ordering::SeqCst) {
            return Outcome::Aborted;
        }
        // finalizeStatus
        if let Some(r) = &requested {
            status["lastHandledReconcileAt"] = json!(r);
        }
        if conds.is_true("Ready") {
            conds.delete("Reconciling");
            status["observedGeneration"] = json!(conds.generation);
        }
        if conds.is_false("Ready") && conds.get("Reconciling").is_some() {
            conds.set_reason("Reconciling", "ProgressingWithRetry");
        }
        status["conditions"] = json!(conds.list);
        self.patch_status(sig, &obj, &status);
        if !suspended && conds.is_true("Ready") {
            let msg = format!(
                "Reconciliation finished in {}, next run in {}",
                go_duration(self.opts.unscaled(start.elapsed())),
                go_duration(interval)
            );
            self.event(
                sig,
                &obj,
                &conds,
                false,
                s(&status, "/lastAppliedRevision"),
                &msg,
            );
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        obj: &Value,
        cfg: &ControllerConfig,
        sig: &RunSignals,
        conds: &mut Conditions,
        status: &mut Value,
        interval: Duration,
        retry: Duration,
    ) -> Outcome {
        let ns = s(obj, "/metadata/namespace").to_string();
        let dep_requeue = cfg.requeue_dependency;
        let dep_str = go_duration(dep_requeue);
        // Source
        let src_kind = s(obj, "/spec/sourceRef/kind").to_string();
        let src_name = s(obj, "/spec/sourceRef/name").to_string();
        let src_ns = match s(obj, "/spec/sourceRef/namespace") {
            "" => ns.clone(),
            n => n.to_string(),
        };
        if src_kind != "GitRepository" {
            let msg = format!("source `{src_ns}/{src_name}` kind '{src_kind}' not supported");
            conds.mark_false("Ready", "ArtifactFailed", &msg);
            return Outcome::Requeue(Some(retry));
        }
        let source = match self.cluster.get(&ObjKey::new(
            SOURCE_API,
            "GitRepository",
            &src_ns,
            &src_name,
        )) {
            Ok(Some(s)) => s,
            Ok(None) => {
                conds.mark_false(
                    "Ready",
                    "ArtifactFailed",
                    &format!(
                        "unable to get source '{src_ns}/{src_name}': gitrepositories.source.toolkit.fluxcd.io \"{src_name}\" not found"
                    ),
                );
                return Outcome::Requeue(Some(retry));
            }
            Err(e) => {
                conds.mark_false(
                    "Ready",
                    "ArtifactFailed",
                    &format!("unable to get source '{src_ns}/{src_name}': {}", e.message),
                );
                return Outcome::Requeue(Some(retry));
            }
        };
        let revision = s(&source, "/status/artifact/revision").to_string();
        if revision.is_empty() {
            let msg = format!("Source artifact not found, retrying in {dep_str}");
            conds.mark_false("Ready", "ArtifactFailed", &msg);
            return Outcome::Requeue(Some(dep_requeue));
        }
        // dependsOn
        if let Err(e) = self.check_dependencies(obj, &revision) {
            conds.mark_false("Ready", "DependencyNotReady", &e);
            let msg = format!("Dependencies do not meet ready condition, retrying in {dep_str}");
            self.event(sig, obj, conds, false, &revision, &msg);
            return Outcome::Requeue(Some(dep_requeue));
        }
        let timeout = get_timeout(obj);
        let t = go_duration(timeout);
        conds.mark_unknown("Ready", "Progressing", "Reconciliation in progress");
        conds.mark_true(
            "Reconciling",
            "Progressing",
            &format!("Fetching manifests for revision {revision} with a timeout of {t}"),
        );
        status["conditions"] = json!(conds.list);
        if !self.patch_status(sig, obj, status) && sig.shutdown.load(Ordering::SeqCst) {
            return Outcome::Aborted;
        }
        let checkout = checkout_dir(
            &self.opts.storage_dir,
            &src_ns,
            &src_name,
            revision_sha(&revision),
        );
        if !checkout.exists() {
            let msg = format!("Source is not ready, artifact not found, retrying in {dep_str}");
            conds.mark_false("Ready", "ArtifactFailed", &msg);
            return Outcome::Requeue(Some(dep_requeue));
        }
        let tmp = match tempfile::Builder::new().prefix("kustomization-").tempdir() {
            Ok(t) => t,
            Err(e) => {
                conds.mark_false("Ready", "DirCreationFailed", &format!("tmp dir error: {e}"));
                return Outcome::Requeue(Some(retry));
            }
        };
        if let Err(e) = copy_dir(&checkout, tmp.path()) {
            conds.mark_false("Ready", "ArtifactFailed", &e);
            return Outcome::Requeue(Some(retry));
        }
        let rel = s(obj, "/spec/path")
            .trim_start_matches("./")
            .trim_start_matches('/')
            .to_string();
        let dir = tmp.path().join(&rel);
        if !dir.exists() {
            let msg = format!(
                "kustomization path not found: stat {}: no such file or directory",
                dir.display()
            );
            conds.mark_false("Ready", "ArtifactFailed", &msg);
            return Outcome::Requeue(Some(retry));
        }
        status["lastAttemptedRevision"] = json!(revision);
        conds.mark_true(
            "Reconciling",
            "Progressing",
            &format!("Building manifests for revision {revision} with a timeout of {t}"),
        );
        status["conditions"] = json!(conds.list);
        self.patch_status(sig, obj, status);
        let objects = match self.build(obj, &dir, cfg).await {
            Ok(o) => o,
            Err(e) => {
                conds.mark_false("Ready", "BuildFailed", &e);
                self.event(sig, obj, conds, true, &revision, &e);
                return Outcome::Requeue(Some(retry));
            }
        };
        conds.mark_true(
            "Reconciling",
            "Progressing",
            &format!("Detecting drift for revision {revision} with a timeout of {t}"),
        );
        status["conditions"] = json!(conds.list);
        self.patch_status(sig, obj, status);
        if sig.shutdown.load(Ordering::SeqCst) {
            return Outcome::Aborted;
        }
        // Apply: Namespaces and CRDs first (ssa ApplyAllStaged).
        let mut applied = Vec::new();
        let mut changes = Vec::new();
        let mut ordered = objects;
        ordered.sort_by_key(|o| match s(o, "/kind") {
            "CustomResourceDefinition" => 0,
            "Namespace" => 1,
            _ => 2,
        });
        for o in &ordered {
            match apply(&*self.cluster, o, COMPONENT) {
                Ok((live, action)) => {
                    let subject = fmt_obj(
                        s(o, "/kind"),
                        s(o, "/metadata/namespace"),
                        s(o, "/metadata/name"),
                    );
                    match action {
                        ApplyAction::Created => changes.push(format!("{subject} created")),
                        ApplyAction::Configured => changes.push(format!("{subject} configured")),
                        ApplyAction::Unchanged | ApplyAction::Skipped => {}
                    }
                    applied.push(live);
                }
                Err(e) => {
                    let subject = fmt_obj(
                        s(o, "/kind"),
                        s(o, "/metadata/namespace"),
                        s(o, "/metadata/name"),
                    );
                    let msg = if e.code == 404 {
                        format!("{subject} not found: {}", e.message)
                    } else {
                        format!("{subject} dry-run failed ({}): {}", e.reason, e.message)
                    };
                    conds.mark_false("Ready", "ReconciliationFailed", &msg);
                    self.event(sig, obj, conds, true, &revision, &msg);
                    return Outcome::Requeue(Some(retry));
                }
            }
        }
        if !changes.is_empty() {
            self.event(sig, obj, conds, false, &revision, &changes.join("\n"));
        }
        // Inventory + prune
        let old_ids: Vec<(String, String)> = status
            .pointer("/inventory/entries")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|e| (s(e, "/id").to_string(), s(e, "/v").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let mut entries: Vec<(String, String)> = applied
            .iter()
            .map(|o| {
                let (_, v) = gvk_of(o["apiVersion"].as_str().unwrap_or_default());
                (inventory_id(o), v.to_string())
            })
            .collect();
        entries.sort();
        entries.dedup();
        let new_set: HashSet<&String> = entries.iter().map(|(i, _)| i).collect();
        status["inventory"] = json!({"entries": entries.iter().map(|(i, v)| json!({"id": i, "v": v})).collect::<Vec<_>>()});
        if obj.pointer("/spec/prune").and_then(Value::as_bool) == Some(true) {
            let mut pruned = Vec::new();
            for (id, v) in old_ids.iter().rev() {
                if new_set.contains(id) {
                    continue;
                }
                let parts: Vec<&str> = id.splitn(4, '_').collect();
                if parts.len() != 4 {
                    continue;
                }
                let api = if parts[2].is_empty() {
                    v.clone()
                } else {
                    format!("{}/{v}", parts[2])
                };
                let k = ObjKey::new(&api, parts[3], parts[0], parts[1]);
                if let Ok(Some(live)) = self.cluster.get(&k) {
                    let disabled = s(
                        &live,
                        "/metadata/annotations/kustomize.toolkit.fluxcd.io~1prune",
                    ) == "disabled";
                    let ours = s(&live, "/metadata/labels/kustomize.toolkit.fluxcd.io~1name")
                        == s(obj, "/metadata/name");
                    if !disabled && ours && self.cluster.delete(&k).is_ok() {
                        pruned.push(format!("{} deleted", fmt_obj(parts[3], parts[0], parts[1])));
                    }
                }
            }
            if !pruned.is_empty() {
                self.event(sig, obj, conds, false, &revision, &pruned.join("\n"));
            }
        }
        // Health checks
        let wait = obj.pointer("/spec/wait").and_then(Value::as_bool) == Some(true);
        let checks: Vec<ObjKey> = if wait {
            applied.iter().map(ObjKey::of).collect()
        } else {
            obj.pointer("/spec/healthChecks")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|h| {
                            let hns = match s(h, "/namespace") {
                                "" => ns.as_str(),
                                n => n,
                            };
                            ObjKey::new(s(h, "/apiVersion"), s(h, "/kind"), hns, s(h, "/name"))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let checks: Vec<ObjKey> = checks
            .into_iter()
            .filter(|k| {
                !(k.kind == "Kustomization" && k.name == key_name(obj) && k.namespace == ns)
            })
            .collect();
        if checks.is_empty() {
            conds.delete("Healthy");
        } else {
            let was_healthy = conds.is_true("Healthy");
            let msg =
                format!("Running health checks for revision {revision} with a timeout of {t}");
            conds.mark_true("Reconciling", "Progressing", &msg);
            conds.mark_unknown("Healthy", "Progressing", &msg);
            status["conditions"] = json!(conds.list);
            self.patch_status(sig, obj, status);
            let check_start = Instant::now();
            let res = self
                .wait_for_set(
                    &checks,
                    timeout,
                    cfg,
                    sig,
                    (&src_ns, &src_name, &revision),
                    obj,
                    conds,
                )
                .await;
            let elapsed = go_duration(self.opts.unscaled(check_start.elapsed()));
            match res {
                HealthResult::Aborted => return Outcome::Aborted,
                HealthResult::Canceled(q) => {
                    conds.mark_false(
                        "Ready",
                        "HealthCheckCanceled",
                        &format!(
                            "New reconciliation triggered by {}/{}/{}",
                            q.kind, q.namespace, q.name
                        ),
                    );
                    self.event(
                        sig,
                        obj,
                        conds,
                        false,
                        &revision,
                        &format!(
                            "Health checks canceled due to new reconciliation triggered by {}/{}/{}",
                            q.kind, q.namespace, q.name
                        ),
                    );
                    return Outcome::Requeue(Some(Duration::ZERO));
                }
                HealthResult::Failed(inner) => {
                    conds.mark_false("Healthy", "HealthCheckFailed", &inner);
                    let msg = format!("health check failed after {elapsed}: {inner}");
                    conds.mark_false("Ready", "HealthCheckFailed", &msg);
                    self.event(sig, obj, conds, true, &revision, &msg);
                    return Outcome::Requeue(Some(retry));
                }
                HealthResult::Healthy => {
                    let msg = format!("Health check passed in {elapsed}");
                    let new_rev = s(status, "/lastAppliedRevision") != revision;
                    if !was_healthy || (new_rev && !changes.is_empty()) {
                        self.event(sig, obj, conds, false, &revision, &msg);
                    }
                    conds.mark_true("Healthy", "Succeeded", &msg);
                    status["conditions"] = json!(conds.list);
                    self.patch_status(sig, obj, status);
                }
            }
        }
        status["lastAppliedRevision"] = json!(revision);
        conds.mark_true(
            "Ready",
            "ReconciliationSucceeded",
            &format!("Applied revision: {revision}"),
        );
        Outcome::Requeue(Some(interval))
    }

    /// `checkDependencies`.
    fn check_dependencies(&self, obj: &Value, revision: &str) -> Result<(), String> {
        let ns = s(obj, "/metadata/namespace");
        for d in obj
            .pointer("/spec/dependsOn")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let dns = match s(d, "/namespace") {
                "" => ns,
                n => n,
            };
            let dname = s(d, "/name");
            let dep_name = format!("{dns}/{dname}");
            let dep = match self
                .cluster
                .get(&ObjKey::new(KS_API, "Kustomization", dns, dname))
            {
                Ok(Some(d)) => d,
                Ok(None) => {
                    return Err(format!(
                        "dependency '{dep_name}' not found: kustomizations.kustomize.toolkit.fluxcd.io \"{dname}\" not found"
                    ));
                }
                Err(e) => return Err(format!("dependency '{dep_name}' not found: {}", e.message)),
            };
            let dc = Conditions::of(&dep);
            let observed = dep
                .pointer("/status/observedGeneration")
                .and_then(Value::as_i64)
                .unwrap_or(-1);
            if dc.list.is_empty() || dc.generation != observed || !dc.is_true("Ready") {
                return Err(format!("dependency '{dep_name}' is not ready"));
            }
            let dsns = match s(&dep, "/spec/sourceRef/namespace") {
                "" => s(&dep, "/metadata/namespace"),
                n => n,
            };
            let osns = match s(obj, "/spec/sourceRef/namespace") {
                "" => ns,
                n => n,
            };
            if s(&dep, "/spec/sourceRef/name") == s(obj, "/spec/sourceRef/name")
                && dsns == osns
                && s(&dep, "/spec/sourceRef/kind") == s(obj, "/spec/sourceRef/kind")
                && s(&dep, "/status/lastAppliedRevision") != revision
            {
                return Err(format!(
                    "dependency '{dep_name}' revision is not up to date"
                ));
            }
        }
        Ok(())
    }

    /// `kubectl kustomize` of `dir`, then post-build substitution; objects as JSON.
    async fn build(
        &self,
        ks: &Value,
        dir: &Path,
        cfg: &ControllerConfig,
    ) -> Result<Vec<Value>, String> {
        let has_kustomization = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
            .iter()
            .any(|f| dir.join(f).exists());
        if !has_kustomization {
            let mut files = Vec::new();
            for e in walkdir(dir) {
                let rel = e
                    .strip_prefix(dir)
                    .unwrap_or(&e)
                    .to_string_lossy()
                    .into_owned();
                if rel.ends_with(".yaml") || rel.ends_with(".yml") {
                    files.push(rel);
                }
            }
            files.sort();
            let body = format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}",
                files.iter().map(|f| format!("- {f}\n")).collect::<String>()
            );
            std::fs::write(dir.join("kustomization.yaml"), body).map_err(|e| e.to_string())?;
        }
        if let Some(tn) = ks.pointer("/spec/targetNamespace").and_then(Value::as_str) {
            // upstream's generator sets the kustomization namespace
            let k = dir.join("kustomization.yaml");
            if let Ok(mut body) = std::fs::read_to_string(&k) {
                body.push_str(&format!("\nnamespace: {tn}\n"));
                let _ = std::fs::write(&k, body);
            }
        }
        let out = tokio::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(dir)
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("kustomize build failed: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "kustomize build failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .trim()
                    .trim_start_matches("error: ")
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let vars = if ks.pointer("/spec/postBuild").is_some() {
            let ns = s(ks, "/metadata/namespace").to_string();
            let cluster = self.cluster.clone();
            let get = move |kind: &str, name: &str| -> Result<Option<Value>, String> {
                cluster
                    .get(&ObjKey::new("v1", kind, &ns, name))
                    .map_err(|e| e.message)
            };
            Some(subst::load_variables(ks, &get)?)
        } else {
            None
        };
        let always = s(ks, "/spec/postBuild/substituteStrategy") == "Always";
        let mut objects = Vec::new();
        for doc in split_docs(&text) {
            let mut v: Value =
                serde_saphyr::from_str(&doc).map_err(|e| format!("kustomize build failed: {e}"))?;
            if v.is_null() {
                continue;
            }
            if s(&v, "/kind").is_empty()
                || s(&v, "/apiVersion").is_empty()
                || s(&v, "/metadata/name").is_empty()
            {
                return Err(format!(
                    "failed to decode Kubernetes apiVersion, kind and name from: {}",
                    doc.trim()
                ));
            }
            if let Some(vars) = &vars
                && let Some(out) =
                    subst::substitute_resource(&doc, &v, vars, cfg.strict_substitutions(), always)?
            {
                v = serde_saphyr::from_str(&out).map_err(|e| format!("YAMLToJSON: {e}"))?;
            }
            let kind = s(&v, "/kind").to_string();
            if s(&v, "/metadata/namespace").is_empty() && !CLUSTER_SCOPED.contains(&kind.as_str()) {
                return Err(format!(
                    "{} namespace not specified: the server could not find the requested resource",
                    fmt_obj(&kind, "", s(&v, "/metadata/name"))
                ));
            }
            let labels = &mut v["metadata"]["labels"];
            if !labels.is_object() {
                *labels = json!({});
            }
            labels["kustomize.toolkit.fluxcd.io/name"] = json!(s(ks, "/metadata/name"));
            labels["kustomize.toolkit.fluxcd.io/namespace"] = json!(s(ks, "/metadata/namespace"));
            objects.push(v);
        }
        Ok(objects)
    }

    /// fluxcd/pkg ssa `WaitForSetWithContext` over the twin kstatus.
    #[allow(clippy::too_many_arguments)]
    async fn wait_for_set(
        &self,
        set: &[ObjKey],
        timeout: Duration,
        cfg: &ControllerConfig,
        sig: &RunSignals,
        source: (&str, &str, &str),
        obj: &Value,
        conds: &Conditions,
    ) -> HealthResult {
        let deadline = Instant::now() + self.opts.scaled(timeout);
        let poll = self.opts.scaled(self.opts.health_poll);
        let mode = cfg.cancel_mode();
        let mut last: Vec<Status> = vec![Status::Unknown; set.len()];
        loop {
            if sig.shutdown.load(Ordering::SeqCst) {
                return HealthResult::Aborted;
            }
            if mode == CancelMode::Requeue
                && let Some(q) = sig.interrupt.lock().unwrap().clone()
            {
                return HealthResult::Canceled(q);
            }
            for (i, k) in set.iter().enumerate() {
                last[i] = match self.cluster.get(k) {
                    Ok(Some(o)) => kstatus::health(&o, cfg.version).status,
                    Ok(None) => Status::NotFound,
                    Err(_) => Status::Unknown,
                };
            }
            let all_current = last.iter().all(|s| *s == Status::Current);
            let any_failed = last.contains(&Status::Failed);
            let terminal = last
                .iter()
                .all(|s| matches!(s, Status::Current | Status::Failed));
            if all_current {
                return HealthResult::Healthy;
            }
            if (cfg.fail_fast() && any_failed) || terminal {
                let errs: Vec<String> = set
                    .iter()
                    .zip(&last)
                    .filter(|(_, s)| **s == Status::Failed)
                    .map(|(k, s)| {
                        format!("{} status: '{s}'", fmt_obj(&k.kind, &k.namespace, &k.name))
                    })
                    .collect();
                return HealthResult::Failed(format!(
                    "failed early due to stalled resources: [{}]",
                    errs.join(", ")
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                let errs: Vec<String> = set
                    .iter()
                    .zip(&last)
                    .filter(|(_, s)| **s != Status::Current)
                    .map(|(k, s)| {
                        format!("{} status: '{s}'", fmt_obj(&k.kind, &k.namespace, &k.name))
                    })
                    .collect();
                return HealthResult::Failed(format!("timeout waiting for: [{}]", errs.join(", ")));
            }
            let wake = (now + poll).min(deadline);
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = sig.notify.notified() => {}
            }
            if mode == CancelMode::NewRevision && Instant::now() < deadline {
                // v1.7: a ticker every 5s re-reads the source; a new revision cancels the wait.
                let latest = self
                    .cluster
                    .get(&ObjKey::new(
                        SOURCE_API,
                        "GitRepository",
                        source.0,
                        source.1,
                    ))
                    .ok()
                    .flatten()
                    .map(|o| s(&o, "/status/artifact/revision").to_string())
                    .unwrap_or_default();
                if !latest.is_empty() && latest != source.2 {
                    self.event(
                        sig,
                        obj,
                        conds,
                        false,
                        source.2,
                        "New revision detected during health check, cancelling",
                    );
                    return HealthResult::Failed("context canceled".into());
                }
            }
        }
    }
}

fn key_name(obj: &Value) -> &str {
    s(obj, "/metadata/name")
}

/// api/v1 `GetTimeout`: spec.timeout, else spec.interval - 30s, never below 30s.
pub fn get_timeout(obj: &Value) -> Duration {
    let interval = parse_go_duration(s(obj, "/spec/interval")).unwrap_or(Duration::from_secs(600));
    let d = match obj.pointer("/spec/timeout").and_then(Value::as_str) {
        Some(t) => parse_go_duration(t).unwrap_or(Duration::ZERO),
        None => interval.saturating_sub(Duration::from_secs(30)),
    };
    d.max(Duration::from_secs(30))
}

/// Splits multi-document YAML on `---` lines, dropping empty documents.
pub fn split_docs(text: &str) -> Vec<String> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if line == "---" || line.starts_with("--- ") {
            if !cur.trim().is_empty() {
                docs.push(std::mem::take(&mut cur));
            }
            cur.clear();
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    if !cur.trim().is_empty() {
        docs.push(cur);
    }
    docs
}

fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    for f in walkdir(from) {
        let rel = f.strip_prefix(from).map_err(|e| e.to_string())?;
        let dest = to.join(rel);
        if let Some(p) = dest.parent() {
            std::fs::create_dir_all(p).map_err(|e| e.to_string())?;
        }
        std::fs::copy(&f, &dest).map_err(|e| format!("copy {}: {e}", f.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_rules() {
        let o = json!({"spec": {"interval": "10m"}});
        assert_eq!(go_duration(get_timeout(&o)), "9m30s");
        let o = json!({"spec": {"interval": "30s"}});
        assert_eq!(go_duration(get_timeout(&o)), "30s");
        let o = json!({"spec": {"interval": "10m", "timeout": "5m"}});
        assert_eq!(go_duration(get_timeout(&o)), "5m0s");
        let o = json!({"spec": {"interval": "10m", "timeout": "10s"}});
        assert_eq!(go_duration(get_timeout(&o)), "30s");
    }

    #[test]
    fn config_from_deployment() {
        let d = json!({"spec": {"template": {"spec": {"containers": [{"name": "manager",
            "image": "ghcr.io/fluxcd/kustomize-controller:v1.8.3",
            "args": ["--concurrent=2", "--feature-gates=CancelHealthCheckOnNewRevision=true", "--requeue-dependency=5s"]}]}}}});
        let c = ControllerConfig::from_deployment(&d);
        assert_eq!(c.version, (1, 8));
        assert_eq!(c.concurrent, 2);
        assert_eq!(c.requeue_dependency, Duration::from_secs(5));
        assert_eq!(c.cancel_mode(), CancelMode::Requeue);
        assert!(!c.strict_substitutions());
        let mut c7 = c.clone();
        c7.version = (1, 7);
        assert_eq!(c7.cancel_mode(), CancelMode::NewRevision);
        c7.gates.clear();
        assert_eq!(c7.cancel_mode(), CancelMode::Off);
        assert!(ControllerConfig::default().strict_substitutions());
    }

    #[test]
    fn ids_and_docs() {
        let o = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "apps"}});
        assert_eq!(inventory_id(&o), "apps_web_apps_Deployment");
        let o = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}});
        assert_eq!(inventory_id(&o), "_apps__Namespace");
        assert_eq!(split_docs("a: 1\n---\n\n---\nb: 2\n").len(), 2);
        assert_eq!(fmt_obj("Deployment", "apps", "web"), "Deployment/apps/web");
    }
}
