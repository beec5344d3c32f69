//! Facts: pure readers of the snapshot, one per thing the diagnosis looks at. This module:
//! the source ([`SourceFacts`]), the reconcile request ([`RequestFacts`], [`TokenState`]),
//! the run in progress ([`RunStep`]), the dependsOn dependencies and the controllers
//! ([`Engine::stopped_controllers_for`], [`Engine::holding_workers`]); [`health`]: the
//! health check's wait set and its blocking objects; [`pods`]: pods and image signatures.
//! No reader here sets a class.

use crate::controller::ControllerFacts;
use crate::obj;
use crate::snapshot::Index;
use crate::snapshot::Snapshot;
use cluster_loop::conditions::Condition;
use cluster_loop::duration;
use jiff::SignedDuration;
use jiff::Timestamp;
use regex::Regex;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::LazyLock;

use crate::diagnose::*;

mod health;
mod pods;
mod watch;
pub use health::*;
pub use pods::*;
pub use watch::*;

/// `reconcile.fluxcd.io/requestedAt` (fluxcd/pkg apis/meta `ReconcileRequestAnnotation`).
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// Annotation we set together with `spec.suspend: true` in one patch, so that a run killed
/// before it resumed is recognised (and healed) by the next run. Value: RFC 3339 time of the
/// suspend.
pub const SUSPEND_MARKER: &str = "unstick.cluster-loop.dev/suspended-at";

/// The source a Kustomization reads.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceFacts {
    /// `Kind/namespace/name`.
    pub source: String,
    /// Whether the object exists.
    pub found: bool,
    /// Its Ready condition.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "cluster_loop::conditions::serialize_as_read"
    )]
    pub ready: Option<Condition>,
    /// `status.artifact.revision`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_revision: Option<String>,
    /// The Kustomization's `status.lastAttemptedRevision`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// The Kustomization's `status.lastAppliedRevision`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// Whether the artifact revision differs from the Kustomization's lastAttemptedRevision
    /// (a newer revision is waiting).
    pub newer_revision_available: bool,
    /// `spec.suspend` of the source.
    pub suspended: bool,
    /// A failure condition of the source that is True while its Ready condition is not False:
    /// the first of [`SOURCE_FAILURE_CONDITIONS`]. source-controller v1.9
    /// gitrepository_controller.go keeps `FetchFailed` from the last attempt until a fetch
    /// succeeds, while a source without an artifact marks Ready=Unknown "building artifact"
    /// at the start of every attempt (`reconcileStorage`, `ProgressiveStatus(true, ...)`): a
    /// source that fails every attempt reads "building artifact" for the length of each one.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "cluster_loop::conditions::serialize_as_read"
    )]
    pub failing: Option<Condition>,
}

/// source-controller's negative-polarity condition types (source-controller api v1
/// condition_types.go: `FetchFailed`, `BuildFailed` (HelmChart), `StorageOperationFailed`,
/// `IncludeUnavailable`): True while the failure lasts, removed on success.
pub const SOURCE_FAILURE_CONDITIONS: [&str; 4] = [
    "FetchFailed",
    "BuildFailed",
    "StorageOperationFailed",
    "IncludeUnavailable",
];

impl SourceFacts {
    /// What makes the source fail now: its Ready condition when False, else a True
    /// [`SourceFacts::failing`] condition (a retry of a failing source in progress). `None`
    /// for a source that is ready or working without a recorded failure.
    pub fn failure(&self) -> Option<&Condition> {
        self.ready
            .as_ref()
            .filter(|c| c.is_false())
            .or(self.failing.as_ref())
    }
}

/// State of the reconcile request annotation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestFacts {
    /// `reconcile.fluxcd.io/requestedAt`.
    pub requested_at: String,
    /// `status.lastHandledReconcileAt`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    /// Not yet handled: the controller copies the annotation value into
    /// lastHandledReconcileAt when a run that read it finishes (finalizeStatus).
    pub pending: bool,
    /// Age of the request in seconds when its value is a time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_secs: Option<i64>,
}

/// The Reconciling message of a run in progress: one shape for every step
/// ([`RunStep::parse`]).
static RUN_STEP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([A-Z][a-z]+(?: [a-z]+)*) for revision (\S+) with a timeout of (\S+)").unwrap()
});

/// The step a run in progress is at, read from its Reconciling message. kustomize-controller
/// v1.9.6 kustomization_controller.go writes one message per step, each `<step> for revision
/// <R> with a timeout of <T>` (T is `obj.GetTimeout().String()`, a Go duration):
/// `Fetching manifests` (the run starts, `reconcile`), `Building manifests`, `Detecting
/// drift` (before the apply) and `Running health checks` (`checkHealth`). One parser for
/// all of them: the health-check step is the one whose deadline the levers work against;
/// any step's timeout bounds the whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStep<'m> {
    /// `Fetching manifests`, `Building manifests`, `Detecting drift`, `Running health checks`.
    pub step: &'m str,
    /// The source revision the run works on (`main@sha1:...`).
    pub revision: &'m str,
    /// The run's timeout; `None` when the message's duration does not parse.
    pub timeout: Option<std::time::Duration>,
}

impl<'m> RunStep<'m> {
    /// The step named in `message`, or `None` for any other message.
    pub fn parse(message: &'m str) -> Option<Self> {
        let c = RUN_STEP.captures(message)?;
        Some(RunStep {
            step: c.get(1)?.as_str(),
            revision: c.get(2)?.as_str(),
            timeout: parse_go_duration(c.get(3)?.as_str()).ok(),
        })
    }

    /// Whether it is the health check (`Running health checks`, kustomize-controller
    /// `checkHealth`).
    pub fn is_health_check(&self) -> bool {
        self.step == "Running health checks"
    }
}

/// The engine over one snapshot.
pub struct Engine<'a> {
    /// Lookup tables.
    pub idx: Index<'a>,
    /// Controller facts when its Deployment was read.
    pub controller: Option<ControllerFacts>,
    /// Registry hosts of the snapshot's workload templates, computed on first use.
    hosts: std::sync::OnceLock<BTreeMap<String, usize>>,
    /// [`Engine::holding_workers`], computed on first use (once per snapshot, not once per
    /// Kustomization with a pending request).
    holding: std::sync::OnceLock<Vec<String>>,
    /// [`Engine::worker_holders`], computed on first use.
    holders: std::sync::OnceLock<Vec<(String, Option<Timestamp>)>>,
    /// The dependsOn cycle that makes kustomize-controller drop each source's revision event,
    /// by source (Kind, namespace, name), computed on first use ([`blind`]).
    pub(in crate::diagnose) dropped:
        std::sync::OnceLock<HashMap<(String, String, String), Vec<String>>>,
}

impl<'a> Engine<'a> {
    /// Index the snapshot and read the controller facts.
    pub fn new(snap: &'a Snapshot) -> Self {
        Engine {
            idx: Index::new(snap),
            controller: snap.controller.as_ref().map(|d| {
                let mut f =
                    ControllerFacts::with_pods(d, &snap.controller_pods, &snap.controller_logs);
                f.read_leadership(d, &snap.leases, &snap.controller_pods, snap.now);
                f
            }),
            hosts: std::sync::OnceLock::new(),
            holding: std::sync::OnceLock::new(),
            holders: std::sync::OnceLock::new(),
            dropped: std::sync::OnceLock::new(),
        }
    }

    /// The snapshot's clock ([`Snapshot::now`]): every reader's "now".
    pub(in crate::diagnose) fn now(&self) -> Timestamp {
        self.idx.snap.now
    }

    /// Every controller `ks` needs that is not running, kustomize-controller first:
    /// kustomize-controller for every Kustomization (it runs them), and source-controller
    /// when `ks` reads a source it serves (GitRepository, OCIRepository, Bucket: their
    /// artifacts are served by source-controller's storage server, so a run cannot even
    /// download its manifests). Both when both are down: starting one leaves the other's
    /// work undone. `[]` when they run or are not read.
    pub fn stopped_controllers_for(&self, ks: &Value) -> Vec<StoppedController> {
        let mut v = Vec::new();
        if let Some(c) = self.controller.as_ref() {
            if let Some(why) = c.not_running.clone() {
                v.push(StoppedController::new(
                    &c.name,
                    &c.namespace,
                    why,
                    "nothing reconciles",
                    c.pod.clone(),
                ));
            } else if let Some(t) = c.leader.clone() {
                v.push(StoppedController::not_leading(
                    &c.name,
                    &c.namespace,
                    "nothing reconciles",
                    t,
                ));
            }
        }
        let (kind, _, _) = source_ref(ks);
        let snap = self.idx.snap;
        if matches!(kind.as_str(), "GitRepository" | "OCIRepository" | "Bucket")
            && let Some(sc) = snap.source_controller.as_ref()
        {
            let mut f =
                ControllerFacts::with_pods(sc, &snap.controller_pods, &snap.controller_logs);
            f.read_leadership(sc, &snap.leases, &snap.controller_pods, snap.now);
            if let Some(why) = f.not_running {
                v.push(StoppedController::new(
                    obj::name(sc),
                    obj::namespace(sc),
                    why,
                    "nothing fetches",
                    f.pod,
                ));
            } else if let Some(t) = f.leader {
                v.push(StoppedController::not_leading(
                    obj::name(sc),
                    obj::namespace(sc),
                    "nothing fetches",
                    t,
                ));
            }
        }
        v.extend(self.helm_controller_stopped(ks));
        v
    }

    /// Kustomizations currently holding a kustomize-controller worker: a run in progress
    /// ([`run_in_progress`]) and not suspended.
    /// `namespace/name`, sorted.
    pub fn holding_workers(&self) -> Vec<String> {
        self.holding
            .get_or_init(|| {
                let mut v: Vec<String> = self
                    .idx
                    .snap
                    .kustomizations
                    .iter()
                    .filter(|k| !obj::b(k, &["spec", "suspend"]) && run_in_progress(k).is_some())
                    .map(key_of)
                    .collect();
                // The workers serve every namespace: runs of other namespaces hold them too.
                for k in self.idx.snap.workers_elsewhere.iter().flatten() {
                    if !v.contains(k) {
                        v.push(k.clone());
                    }
                }
                v.sort();
                v
            })
            .clone()
    }

    /// The Kustomizations holding a worker with the predicted end of their run: a health
    /// check's earliest end (fail-fast or deadline), a normal run's ETA, else unknown.
    pub fn worker_holders(&self) -> Vec<(String, Option<Timestamp>)> {
        self.holders
            .get_or_init(|| {
                self.holding_workers()
                    .into_iter()
                    .map(|k| {
                        let end = k.split_once('/').and_then(|(ns, n)| {
                            let ks = self.idx.kustomization(ns, n)?;
                            let d = self.shallow(ks);
                            d.health_check.as_ref().and_then(|h| h.ends_at).or(d.eta)
                        });
                        (k, end)
                    })
                    .collect()
            })
            .clone()
    }

    /// The source object named by `spec.sourceRef`.
    pub fn source_obj(&self, ks: &Value) -> Option<&'a Value> {
        let (kind, ns, name) = source_ref(ks);
        self.idx.sources.get(&(kind, ns, name)).copied()
    }

    /// The lever planner's inputs ([`crate::lever::plan`]) for `ks` on this engine's
    /// snapshot: its source and the controller's facts from here; `holding`
    /// ([`Engine::holding_workers`]), the snapshot's `now` and the requestedAt `token` from the
    /// caller. One shape for `ks/NAME`, `--all` and the in-cluster controller.
    pub fn lever_inputs<'b>(
        &'b self,
        ks: &'b Value,
        holding: &'b [String],
        now: Timestamp,
        token: &'b str,
    ) -> crate::lever::Inputs<'b> {
        crate::lever::Inputs {
            ks,
            source: self.source_obj(ks),
            controller: self.controller.as_ref(),
            holding,
            now,
            token,
        }
    }

    /// The facts of `ks`'s source ([`SourceFacts`]); `None` when `spec.sourceRef` has no name.
    pub(in crate::diagnose) fn source_facts(&self, ks: &Value) -> Option<SourceFacts> {
        let (kind, ns, name) = source_ref(ks);
        if name.is_empty() {
            return None;
        }
        let src = self.source_obj(ks);
        let artifact_revision = src
            .and_then(|s| obj::s(s, &["status", "artifact", "revision"]))
            .map(String::from);
        let last_attempted = obj::s(ks, &["status", "lastAttemptedRevision"]).map(String::from);
        let newer = artifact_revision.is_some()
            && !same_revision(artifact_revision.as_deref(), last_attempted.as_deref());
        Some(SourceFacts {
            source: format!("{kind}/{ns}/{name}"),
            found: src.is_some(),
            ready: src.and_then(|s| obj::condition(s, "Ready")),
            artifact_revision,
            last_attempted_revision: last_attempted,
            last_applied_revision: obj::s(ks, &["status", "lastAppliedRevision"]).map(String::from),
            newer_revision_available: newer,
            suspended: src.is_some_and(|s| obj::b(s, &["spec", "suspend"])),
            failing: src
                .filter(|s| obj::condition(s, "Ready").is_none_or(|c| !c.is_true()))
                .and_then(|s| {
                    SOURCE_FAILURE_CONDITIONS
                        .iter()
                        .filter_map(|t| obj::condition(s, t))
                        .find(Condition::is_true)
                }),
        })
    }

    /// Whether `dep` satisfies kustomize-controller `checkDependencies` for `of`:
    /// conditions present, generation == observedGeneration, Ready=True, and when both use
    /// the same source, dep.lastAppliedRevision == the source artifact revision.
    /// Returns the controller's message when not.
    fn dep_problem(&self, of: &Value, dep: &Value) -> Option<(String, String)> {
        let key = key_of(dep);
        let ready = obj::condition(dep, "Ready");
        let gen_ok = obj::i(dep, &["metadata", "generation"])
            == obj::i(dep, &["status", "observedGeneration"]);
        if ready.is_none() || !gen_ok || !ready.unwrap().is_true() {
            return Some((
                "not-ready".into(),
                format!("dependency '{key}' is not ready"),
            ));
        }
        if source_ref(of) == source_ref(dep)
            && let Some(src) = self.source_obj(of)
            && let Some(rev) = obj::s(src, &["status", "artifact", "revision"])
            && !same_revision(Some(rev), obj::s(dep, &["status", "lastAppliedRevision"]))
        {
            return Some((
                "revision-not-up-to-date".into(),
                format!("dependency '{key}' revision is not up to date"),
            ));
        }
        None
    }

    /// The first dependency (in spec order, like the controller) that blocks `ks`:
    /// (namespace/name, problem kind, controller message).
    pub(in crate::diagnose) fn first_unready_dep(
        &self,
        ks: &Value,
    ) -> Option<(String, String, String)> {
        for d in obj::arr(ks, &["spec", "dependsOn"]) {
            let name = obj::s(d, &["name"]).unwrap_or("");
            let ns = obj::s(d, &["namespace"])
                .filter(|n| !n.is_empty())
                .unwrap_or(obj::namespace(ks));
            let key = format!("{ns}/{name}");
            match self.idx.kustomization(ns, name) {
                None => {
                    return Some((
                        key.clone(),
                        "missing".into(),
                        format!("dependency '{key}' not found"),
                    ));
                }
                Some(dep) => {
                    if let Some((k, m)) = self.dep_problem(ks, dep) {
                        return Some((key, k, m));
                    }
                }
            }
        }
        None
    }
}

/// The Reconciling condition of a run in progress: Reconciling=True with a reason other than
/// `ProgressingWithRetry`. kustomize-controller sets Reconciling=True/Progressing when a run
/// starts, deletes it when the run ends Ready, and leaves it True with reason
/// ProgressingWithRetry (and the last message) when the run failed (kustomization_controller.go
/// `finalizeStatus`), so a failed health check still shows `Running health checks ...`.
pub fn run_in_progress(ks: &Value) -> Option<Condition> {
    obj::condition(ks, "Reconciling")
        .filter(|c| c.is_true() && c.reason() != "ProgressingWithRetry")
}

/// `namespace/name` of an object.
pub fn key_of(v: &Value) -> String {
    format!("{}/{}", obj::namespace(v), obj::name(v))
}

/// `(Kind, namespace, name)` of `spec.sourceRef` (namespace defaults to the Kustomization's).
pub fn source_ref(ks: &Value) -> (String, String, String) {
    let kind = obj::s(ks, &["spec", "sourceRef", "kind"])
        .unwrap_or("GitRepository")
        .to_string();
    let ns = obj::s(ks, &["spec", "sourceRef", "namespace"])
        .filter(|n| !n.is_empty())
        .unwrap_or(obj::namespace(ks))
        .to_string();
    let name = obj::s(ks, &["spec", "sourceRef", "name"])
        .unwrap_or("")
        .to_string();
    (kind, ns, name)
}

/// The reconcile request of `ks` ([`REQUESTED_AT`] against `status.lastHandledReconcileAt`),
/// its age from `now`; `None` when the annotation is absent.
pub(in crate::diagnose) fn request_facts(ks: &Value, now: Timestamp) -> Option<RequestFacts> {
    let req = obj::annotation(ks, REQUESTED_AT)?;
    let handled = obj::s(ks, &["status", "lastHandledReconcileAt"]).map(String::from);
    Some(RequestFacts {
        requested_at: req.to_string(),
        pending: handled.as_deref() != Some(req),
        last_handled_reconcile_at: handled,
        age_secs: obj::parse_time(req).map(|t| now.duration_since(t).as_secs()),
    })
}

/// Duration of the last run from `status.history[0].lastReconciledDuration` (fluxcd/pkg
/// apis/meta History), seconds.
pub(in crate::diagnose) fn last_duration_secs(ks: &Value) -> Option<f64> {
    let h = obj::arr(ks, &["status", "history"]).first()?;
    duration::from_json(h.get("lastReconciledDuration")?).map(|d| d.as_secs_f64())
}

/// Whether two revisions name the same artifact: equal, or equal digests
/// (`main@sha1:abc` vs legacy `main/abc`), like source-controller `Artifact.HasRevision`.
pub fn same_revision(a: Option<&str>, b: Option<&str>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            if a == b {
                return true;
            }
            let digest = |r: &str| -> String {
                if let Some((_, d)) = r.rsplit_once('@') {
                    d.split_once(':').map(|(_, h)| h).unwrap_or(d).to_string()
                } else if let Some((_, d)) = r.rsplit_once('/') {
                    d.to_string()
                } else {
                    r.split_once(':').map(|(_, h)| h).unwrap_or(r).to_string()
                }
            };
            digest(a) == digest(b)
        }
        _ => false,
    }
}

/// `s` seconds as a signed duration.
pub(in crate::diagnose) fn secs(s: f64) -> SignedDuration {
    SignedDuration::from_secs_f64(s)
}

/// A `reconcile.fluxcd.io/requestedAt` value as a point in time: RFC 3339 (what `flux
/// reconcile` and kubectl unstick write, `time.Now().Format(time.RFC3339Nano)`, flux2
/// cmd/flux/reconcile.go) or Unix time (the `$(date +%s)` of Flux's docs for `kubectl
/// annotate`, or milliseconds to nanoseconds as `date +%s%N` writes it). `None` for anything else. The controller itself only compares for equality
/// (fluxcd/pkg runtime/predicates ReconcileRequestedPredicate).
pub fn request_time(v: &str) -> Option<Timestamp> {
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Unix time in seconds, milliseconds, microseconds or nanoseconds (`date +%s%N`, as
        // scripts write it): the first unit that gives a time within jiff's range (years up
        // to 9999) is the one meant, since a value in a finer unit is far out of range read
        // in a coarser one.
        let n = v.parse::<i128>().ok()?;
        return [1_000_000_000i128, 1_000_000, 1_000, 1]
            .iter()
            .find_map(|ns_per_unit| {
                n.checked_mul(*ns_per_unit)
                    .and_then(|ns| Timestamp::from_nanosecond(ns).ok())
            });
    }
    v.parse::<Timestamp>().ok()
}

/// What became of a requestedAt token (`--check --token`), from the Kustomization's
/// annotation and `status.lastHandledReconcileAt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenState {
    /// The token asked about.
    pub token: String,
    /// `handled` (lastHandledReconcileAt == token), `pending` (the annotation is the token,
    /// not handled yet), `superseded` (a later requestedAt replaced it), or `not-found` (the
    /// annotation is absent or older: the token was never written to this Kustomization).
    pub state: &'static str,
    /// The later request, when superseded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<String>,
    /// Whether that later request was handled (a run that started after the token, so it
    /// covers the token's request too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by_handled: Option<bool>,
}

impl TokenState {
    /// Whether a run that read this token, or a later request, was handled.
    pub fn covered(&self) -> bool {
        self.state == "handled" || self.superseded_by_handled == Some(true)
    }

    /// One line for humans.
    pub fn describe(&self) -> String {
        let t = &self.token;
        match (self.state, &self.superseded_by) {
            ("handled", _) => format!("request {t} was handled"),
            ("pending", _) => format!("request {t} not handled yet"),
            ("superseded", Some(l)) if self.superseded_by_handled == Some(true) => {
                format!("request {t} was superseded by a later request {l}, which was handled")
            }
            ("superseded", Some(l)) => format!(
                "request {t} was superseded by a later request {l}, which is not handled yet"
            ),
            _ => format!(
                "request {t} is not on this Kustomization (its {REQUESTED_AT} is absent or older): it was never written here"
            ),
        }
    }
}

/// Judge `token` (already validated by [`request_time`]) against `ks`.
pub fn token_state(ks: &Value, token: &str) -> TokenState {
    let handled = obj::s(ks, &["status", "lastHandledReconcileAt"]);
    let ann = obj::annotation(ks, REQUESTED_AT);
    let mut st = TokenState {
        token: token.to_string(),
        state: "not-found",
        superseded_by: None,
        superseded_by_handled: None,
    };
    if handled == Some(token) {
        st.state = "handled";
    } else if ann == Some(token) {
        st.state = "pending";
    } else if let Some(a) = ann {
        let later = match (request_time(a), request_time(token)) {
            (Some(x), Some(y)) => x > y,
            // An annotation we cannot read as a time replaced the token: a later write.
            _ => true,
        };
        if later {
            st.state = "superseded";
            st.superseded_by = Some(a.to_string());
            st.superseded_by_handled = Some(handled == Some(a));
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::RunStep;
    use std::time::Duration;

    /// Inventory ids as cli-utils reads them: `__` is `:` in an RBAC name (the old split on
    /// every `_` returned nothing for it), a cluster-scoped id has an empty namespace, and an
    /// id with a stray `_` in the name is refused.
    #[test]
    fn inventory_ids_follow_cli_utils() {
        let p = super::parse_inventory_id;
        assert_eq!(
            p("apps_web_apps_Deployment"),
            Some((
                "apps".into(),
                "Deployment".into(),
                "apps".into(),
                "web".into()
            ))
        );
        assert_eq!(
            p("_system__controller__x_rbac.authorization.k8s.io_ClusterRole"),
            Some((
                "rbac.authorization.k8s.io".into(),
                "ClusterRole".into(),
                String::new(),
                "system:controller:x".into()
            ))
        );
        assert_eq!(p("ns_a_b_c_Kind"), None);
    }

    /// Every step message of kustomize-controller v1.9.6 kustomization_controller.go reads
    /// the same way; only `Running health checks` is the health check; other messages (the
    /// retry's `ProgressingWithRetry` text, helm-controller's `with timeout of`) are none.
    #[test]
    fn every_run_step_message_is_read_by_one_parser() {
        let rev = "main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
        for (step, hc) in [
            ("Fetching manifests", false),
            ("Building manifests", false),
            ("Detecting drift", false),
            ("Running health checks", true),
        ] {
            let m = format!("{step} for revision {rev} with a timeout of 1m30s");
            let s = RunStep::parse(&m).unwrap_or_else(|| panic!("{m}"));
            assert_eq!(
                s,
                RunStep {
                    step,
                    revision: rev,
                    timeout: Some(Duration::from_secs(90)),
                }
            );
            assert_eq!(s.is_health_check(), hc, "{m}");
        }
        let odd = format!("Running health checks for revision {rev} with a timeout of soon");
        assert_eq!(RunStep::parse(&odd).unwrap().timeout, None);
        for other in [
            "Reconciliation in progress",
            "Running 'install' action with timeout of 5m0s",
            "Detecting drift for revision",
        ] {
            assert_eq!(RunStep::parse(other), None, "{other}");
        }
    }
}
