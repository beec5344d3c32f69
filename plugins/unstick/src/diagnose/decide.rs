//! The decision: the class of a Kustomization ([`Class`]) from the facts, and the full
//! [`Diagnosis`] with the dependsOn walk ([`Engine::diagnose`]). The class is given by the
//! decision table ([`super::table::RULES`]); the rows that read the conditions at length
//! (suspended, a health check in flight, a run in progress, Ready not True) and the
//! controller-not-running row live here.

use crate::controller::ControllerFacts;
use crate::obj;
use cluster_loop::conditions::Condition;
use cluster_loop::flux::Kustomization;
use jiff::Timestamp;
use regex::Regex;
use serde::Serialize;
use serde_json::Value;
use std::sync::LazyLock;

use crate::diagnose::*;

/// Health-check timeout (seconds) assumed for a Kustomization whose `spec.timeout` /
/// `spec.interval` cannot be read: `GetTimeout` of the usual 10m interval (10m - 30s = 9m30s).
const FALLBACK_TIMEOUT_SECS: f64 = 570.0;

/// The class of a Kustomization's state, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Ready=True at the source's current revision, nothing pending.
    Healthy,
    /// A run is progressing normally (fetch/build/apply), or a new revision/generation is
    /// about to be picked up.
    Reconciling,
    /// `spec.suspend: true`.
    Suspended,
    /// `reconcile.fluxcd.io/requestedAt` differs from `status.lastHandledReconcileAt` and no
    /// run is in flight.
    RequestPending,
    /// Reconciling=True with `Running health checks for revision R with a timeout of T`.
    HealthCheckInFlight,
    /// Ready=False reason HealthCheckFailed.
    HealthCheckFailed,
    /// Ready=False reason HealthCheckCanceled (CancelHealthCheckOnNewRevision).
    HealthCheckCanceled,
    /// Ready=False reason DependencyNotReady.
    WaitingOnDependencies,
    /// Ready=False reason ArtifactFailed, or the source object is missing or not ready.
    SourceNotReady,
    /// Ready=False reason BuildFailed (kustomize build or post-build substitution).
    BuildFailed,
    /// Ready=False reason ReconciliationFailed / PruneFailed / other.
    ReconcileFailed,
    /// Stalled=True: a terminal error the controller will not retry.
    Stalled,
    /// A controller it needs is not running ([`crate::controller::not_running`]):
    /// kustomize-controller (nothing reconciles) for every Kustomization that is not
    /// suspended, source-controller (nothing fetches) for one whose source it serves
    /// ([`Diagnosis::stopped_controllers`]). Whatever the Kustomization's own conditions say
    /// (Ready=True included: that is what it last applied, and no change in Git reaches it),
    /// nothing changes until the controller runs.
    ControllerNotRunning,
    /// No running kustomize-controller watches it ([`crate::controller::ControllerFacts::excludes`]:
    /// its `--watch-label-selector` or namespace scope leaves it out): no run, no status, no
    /// request handled, whatever its conditions say. Also (`blindSpot.kind:
    /// source-not-watched`) when no running source-controller watches its source
    /// ([`source_not_watched`]): nothing is ever fetched for it.
    NotWatched,
    /// Its source's new revision was dropped: a dependsOn cycle among the Kustomizations of
    /// the same source fails kustomize-controller's sort of the revision event
    /// (`requestsForRevisionChangeOf` -> `sortAndEnqueue`), so none of them is queued; it
    /// applies the revision only at its next interval run.
    SourceEventDropped,
    /// Its source has `spec.suspend: true`: source-controller fetches nothing for it, so no
    /// new commit reaches this Kustomization.
    SourceSuspended,
    /// Ready at its source's revision, but a ConfigMap or Secret it reads
    /// ([`config_refs`]: `postBuild.substituteFrom`, `decryption.secretRef`, `kubeConfig`)
    /// was written after its last run, and kustomize-controller is not told about that object
    /// ([`crate::controller::ControllerFacts::config_unwatched`]): the change applies only at
    /// its next interval run.
    ConfigNotWatched,
}

impl Class {
    /// The kebab-case name used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Healthy => "healthy",
            Class::Reconciling => "reconciling",
            Class::Suspended => "suspended",
            Class::RequestPending => "request-pending",
            Class::HealthCheckInFlight => "health-check-in-flight",
            Class::HealthCheckFailed => "health-check-failed",
            Class::HealthCheckCanceled => "health-check-canceled",
            Class::WaitingOnDependencies => "waiting-on-dependencies",
            Class::SourceNotReady => "source-not-ready",
            Class::BuildFailed => "build-failed",
            Class::ReconcileFailed => "reconcile-failed",
            Class::Stalled => "stalled",
            Class::ControllerNotRunning => "controller-not-running",
            Class::NotWatched => "not-watched",
            Class::SourceEventDropped => "source-event-dropped",
            Class::SourceSuspended => "source-suspended",
            Class::ConfigNotWatched => "config-not-watched",
        }
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a dependsOn chain is blocked.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RootCause {
    /// From the diagnosed Kustomization down to the root, `namespace/name`.
    pub chain: Vec<String>,
    /// `not-ready`, `missing`, `cycle` or `revision-not-up-to-date`.
    pub kind: String,
    /// The root Kustomization (or the missing dependency).
    pub kustomization: String,
    /// Plain explanation.
    pub message: String,
    /// Diagnosis of the root when it exists and is not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Box<Diagnosis>>,
}

/// The full answer for one Kustomization.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    /// `namespace/name`.
    pub kustomization: String,
    /// The class.
    pub class: Class,
    /// One line a human reads first.
    pub summary: String,
    /// The Ready condition as read.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "cluster_loop::conditions::serialize_as_read"
    )]
    pub ready: Option<Condition>,
    /// Effective timeout in seconds (GetTimeout).
    pub timeout_secs: f64,
    /// In-flight health check, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// Expected end of a normal run, when it can be estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta: Option<Timestamp>,
    /// Seconds a run in progress (Reconciling=True, "... with a timeout of T") is past its own
    /// timeout: kustomize-controller v1.9 ends every run at `spec.timeout` (a fetch of the
    /// artifact it keeps retrying, e.g. from a source-controller it cannot reach, is what
    /// outlives it), so such a run is not "reconciling normally". A finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overdue_secs: Option<i64>,
    /// The reconcile request annotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestFacts>,
    /// Root cause of a dependsOn wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<RootCause>,
    /// Health-checked objects that are not Current.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocking: Vec<BlockingObject>,
    /// Catalogue signatures spotted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<Signature>,
    /// The source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceFacts>,
    /// When `spec.suspend` was set by an earlier `kubectl unstick` run that did not resume
    /// (the [`SUSPEND_MARKER`] annotation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended_by_unstick_at: Option<String>,
    /// Kinds the apply failed on because the cluster does not serve them (`no matches for
    /// kind "K" in version "G/V"`: the CRD is missing), as `K (G/V)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_crds: Vec<String>,
    /// Objects the API server refuses the same way on every run ([`refusals`]: an immutable
    /// field, a validation error, an admission policy's denial, RBAC), read from a failed
    /// apply's Ready message, each with the fix for its cause. A rerun changes nothing, so
    /// no lever requests one ([`crate::lever`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refusal>,
    /// When all `--concurrent` workers are held by other runs while work waits here: the
    /// earliest predicted end of those runs (a worker frees then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_free_at: Option<Timestamp>,
    /// Every Flux controller this Kustomization needs that is not running
    /// ([`Engine::stopped_controllers_for`], kustomize-controller first), whatever its class:
    /// a finding in every view ([`is_finding`]), each with the command that starts it. `[]`
    /// (absent in JSON) when all run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stopped_controllers: Vec<StoppedController>,
    /// Where the status suggests a run that the controller will not make ([`BlindSpot`]):
    /// not watched, its source's revision event dropped, its source suspended, a path not
    /// fetched yet. `null` when none.
    pub blind_spot: Option<BlindSpot>,
    /// Further facts and advice, one sentence each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
}

/// The RESTMapper's error for a kind the cluster does not serve, as kustomize-controller's
/// server-side apply reports it (k8s.io/apimachinery meta `NoKindMatchError`: `no matches for
/// kind "ExternalSecret" in version "external-secrets.io/v1beta1"`).
static NO_KIND_MATCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"no matches for kind "([^"]+)" in version "([^"]+)""#).unwrap());

impl<'a> Engine<'a> {
    /// Diagnose every Kustomization of the snapshot, sorted by namespace/name.
    pub fn diagnose_all(&self) -> Vec<Diagnosis> {
        let mut keys: Vec<(String, String)> = self.idx.ks.keys().cloned().collect();
        keys.sort();
        keys.iter()
            .filter_map(|(ns, n)| self.diagnose(ns, n))
            .collect()
    }

    /// Diagnose one Kustomization; `None` when it is not in the snapshot.
    pub fn diagnose(&self, ns: &str, name: &str) -> Option<Diagnosis> {
        let ks = self.idx.kustomization(ns, name)?;
        let mut d = self.shallow(ks);
        if d.class == Class::WaitingOnDependencies || self.first_unready_dep(ks).is_some() {
            let mut path = vec![key_of(ks)];
            if let Some(rc) = self.find_root(ks, &mut path) {
                if d.class == Class::WaitingOnDependencies {
                    // The root cause itself is said once, by its own field (the `root
                    // cause:` line and the `--all` column, [`crate::report::root_cause_cell`]);
                    // the summary says what the wait means.
                    d.summary = format!(
                        "waiting on dependencies: {}",
                        match (rc.kind.as_str(), rc.diagnosis.as_deref().map(|r| r.class)) {
                            ("cycle", _) => "a dependsOn cycle never ends by itself",
                            ("missing", _) => "a missing dependency never ends by itself",
                            (
                                _,
                                Some(
                                    Class::Healthy
                                    | Class::Reconciling
                                    | Class::RequestPending
                                    | Class::WaitingOnDependencies,
                                ),
                            ) =>
                                "the dependency is progressing (the ordering working, not a fault)",
                            (_, Some(Class::HealthCheckInFlight)) => {
                                "held until the first non-ready dependency's health check ends"
                            }
                            _ => "held until the first non-ready dependency is fixed",
                        }
                    );
                }
                if d.class == Class::WaitingOnDependencies {
                    d.root_cause = Some(rc);
                } else {
                    // Only a Kustomization the controller holds at its dependsOn check
                    // (Ready=False DependencyNotReady) has a dependency as its root cause.
                    // Any other state is its own (a health check in flight names its own
                    // blocking objects), so a dependency's state is a note for its next run.
                    // One rule for `--all` and for `ks/NAME`: both read this field.
                    let what = rc
                        .diagnosis
                        .as_ref()
                        .map(|r| r.class.as_str())
                        .unwrap_or(rc.kind.as_str());
                    d.hints.push(if d.class == Class::Healthy {
                        format!(
                            "dependency {} is {what} (informational: {} is Ready at the source's current revision; its next run waits on it)",
                            rc.kustomization, d.kustomization
                        )
                    } else {
                        format!(
                            "dependency {} is {what} (informational: the state above is {}'s own; its next run waits on that dependency)",
                            rc.kustomization, d.kustomization
                        )
                    });
                }
            } else if d.class == Class::WaitingOnDependencies {
                // Every dependency is Ready now: the DependencyNotReady message names one
                // that was not ready when the controller last checked. Said as such, never
                // as the current state (the controller re-checks every --requeue-dependency).
                if let Some(stale) = d.ready.as_ref().map(|r| r.message().to_string()) {
                    d.hints
                        .push(format!("as last written by kustomize-controller: {stale}"));
                }
                d.summary = "waiting on dependencies: every dependency is Ready now; the controller's next dependsOn check starts its run".to_string();
            }
        }
        Some(d)
    }

    /// Diagnosis without the dependsOn walk: the facts of `ks` and its source, and the class
    /// from the decision table ([`Engine::decide`]): the state as the conditions tell it,
    /// unless a stopped controller or one of the controller's blind spots, where the status
    /// suggests a run that will not come ([`blind`]), overrides it.
    pub(in crate::diagnose) fn shallow(&self, ks: &Value) -> Diagnosis {
        let now = self.now();
        let mut d = Diagnosis {
            kustomization: key_of(ks),
            class: Class::Healthy,
            summary: String::new(),
            ready: obj::condition(ks, "Ready"),
            timeout_secs: Kustomization::effective_timeout_of(ks)
                .map_or(FALLBACK_TIMEOUT_SECS, |d| d.as_secs_f64()),
            health_check: None,
            eta: None,
            overdue_secs: None,
            request: request_facts(ks, now),
            root_cause: None,
            blocking: Vec::new(),
            signatures: Vec::new(),
            source: self.source_facts(ks),
            suspended_by_unstick_at: None,
            missing_crds: Vec::new(),
            refused: Vec::new(),
            worker_free_at: None,
            stopped_controllers: Vec::new(),
            blind_spot: None,
            hints: Vec::new(),
        };
        self.decide(ks, &mut d);
        d
    }

    /// The facts read once the conditions gave their class and summary, before any override
    /// reads them: the blocking workloads' signatures, the source's hints, a request not
    /// handled yet, a wait for a free worker, the controllers not running and the suspend
    /// marker.
    pub(in crate::diagnose) fn facts_of_written(&self, ks: &Value, d: &mut Diagnosis) {
        // Signatures from blocking workloads.
        for b in &d.blocking {
            d.signatures.extend(self.signatures_for(b));
        }
        d.signatures.dedup();
        self.source_hints(ks, d);
        if let Some(r) = &d.request
            && r.pending
            && d.class != Class::RequestPending
        {
            d.hints.push(format!(
                "reconcile request {} is not handled yet: it is recorded only by the next run that reads it",
                r.requested_at
            ));
        }
        self.worker_starvation(ks, d);
        d.stopped_controllers = self.stopped_controllers_for(ks);
        if obj::b(ks, &["spec", "suspend"]) {
            d.suspended_by_unstick_at = obj::annotation(ks, SUSPEND_MARKER).map(String::from);
        }
    }

    /// `suspended`: ours (an interrupted run's marker) or someone else's.
    pub(in crate::diagnose) fn suspended_class(ks: &Value, d: &mut Diagnosis) -> (Class, String) {
        let marker = obj::annotation(ks, SUSPEND_MARKER).map(String::from);
        let s = match &marker {
            Some(t) => {
                d.hints.push(format!(
                    "suspended by an interrupted `kubectl unstick` run at {t}: run `kubectl unstick ks/{} -n {}` (or `--all`) to resume it",
                    obj::name(ks),
                    obj::namespace(ks)
                ));
                format!("suspended by kubectl unstick at {t} (interrupted run)")
            }
            None => {
                "suspended (spec.suspend: true); not resumed without --force-resume".to_string()
            }
        };
        (Class::Suspended, s)
    }

    /// `health-check-in-flight`: the check's revision, timeout, deadline, fail-fast end and
    /// the objects it waits on.
    pub(in crate::diagnose) fn in_flight_class(
        &self,
        ks: &Value,
        c: &Condition,
        step: &RunStep<'_>,
        d: &mut Diagnosis,
    ) -> (Class, String) {
        let now = self.now();
        let revision = step.revision.to_string();
        let t = step.timeout.map_or(d.timeout_secs, |d| d.as_secs_f64());
        let started = c.last_transition_time();
        let deadline = started.and_then(|s| s.checked_add(secs(t)).ok());
        let left = deadline.map(|d| d.duration_since(now).as_secs());
        d.blocking = self.blocking_in_flight(ks);
        let fail_fast = self
            .controller
            .as_ref()
            .is_none_or(ControllerFacts::fail_fast)
            .then(|| self.fail_fast_at(&d.blocking))
            .flatten()
            .filter(|(at, _)| deadline.is_none_or(|d| *at < d));
        let ends_at = fail_fast.as_ref().map(|(at, _)| *at).or(deadline);
        let members = wait_set(ks);
        let wait_set_read = !members.is_empty()
            && members.iter().all(|m| {
                self.idx.listed(&m.group, &m.kind)
                    || self.idx.unserved(&m.group, &m.kind)
                    // A built-in kind whose kstatus is trivially Current (Service,
                    // ConfigMap, RBAC, ...): the live reader does not list it.
                    || !(crate::snapshot::custom_group(&m.group)
                        || crate::snapshot::STATUS_KINDS
                            .contains(&(m.group.as_str(), m.kind.as_str())))
            });
        let hc = HealthCheck {
            wait_set_read,
            revision: revision.clone(),
            started_at: started,
            timeout_secs: t,
            deadline,
            time_left_secs: left,
            fail_fast_at: fail_fast.as_ref().map(|(at, _)| *at),
            fail_fast_because: fail_fast.as_ref().map(|(_, w)| w.clone()),
            ends_at,
            ends_in_secs: ends_at.map(|e| e.duration_since(now).as_secs()),
        };
        let when = match (deadline, left) {
            (Some(dl), Some(l)) if l >= 0 => {
                format!("deadline {} ({} left)", short_time(dl), obj::human_secs(l))
            }
            (Some(dl), Some(l)) => {
                d.hints.push(format!(
                    "the deadline passed {} ago: the controller should end the check at its next 5s poll; if it does not, it may be hung (kustomize-controller before v1.8.3 could hang after a cancel)",
                    obj::human_secs(-l)
                ));
                format!(
                    "deadline {} (overdue by {})",
                    short_time(dl),
                    obj::human_secs(-l)
                )
            }
            _ => "start time unknown".to_string(),
        };
        let when = match &hc.fail_fast_because {
            Some(w) => format!(
                "{when}; ends earlier, at {} ({} from now): {w}",
                hc.fail_fast_at.map(short_time).unwrap_or_default(),
                obj::human_secs(hc.ends_in_secs.unwrap_or(0).max(0))
            ),
            None => when,
        };
        d.health_check = Some(hc);
        (
            Class::HealthCheckInFlight,
            format!(
                "health check for revision {revision} in flight (timeout {}); {when}",
                obj::human_secs(t.round() as i64)
            ),
        )
    }

    /// `reconciling`: a run in progress, with its ETA from the last run's duration, or past
    /// its timeout.
    pub(in crate::diagnose) fn run_class(
        &self,
        ks: &Value,
        c: &Condition,
        d: &mut Diagnosis,
    ) -> (Class, String) {
        let now = self.now();
        let started = c.last_transition_time();
        let expected = last_duration_secs(ks);
        // An estimate already in the past is no estimate (a run longer than the last).
        d.eta = match (started, expected) {
            (Some(s), Some(e)) => s.checked_add(secs(e)).ok(),
            _ => None,
        }
        .filter(|t| *t > now);
        let run_timeout = RunStep::parse(c.message()).and_then(|s| s.timeout);
        // This run's start: Reconciling keeps its lastTransitionTime across failed runs
        // (True/ProgressingWithRetry, then True/Progressing again), while every run marks
        // Ready Unknown "Reconciliation in progress" as it starts (kustomization_controller.go
        // v1.9.6 line 331), a transition from the last run's True or False. Judged only
        // while Ready is Unknown/Progressing.
        let run_started = d
            .ready
            .as_ref()
            .filter(|r| r.status == "Unknown" && r.reason() == "Progressing")
            .and_then(|r| match (started, r.last_transition_time()) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            });
        d.overdue_secs = match (run_started, run_timeout) {
            (Some(s), Some(t)) => s
                .checked_add(secs(t.as_secs_f64()))
                .ok()
                .map(|end| end.duration_since(now).as_secs())
                .filter(|left| *left < 0)
                .map(|left| -left),
            _ => None,
        };
        match d.overdue_secs {
            Some(o) => {
                d.eta = None;
                let cns = self
                    .controller
                    .as_ref()
                    .map_or("flux-system", |c| c.namespace.as_str());
                d.hints.push(format!(
                    "a run ends at its timeout; this one is {} past it: kustomize-controller is stuck in it (often retrying the artifact download from source-controller). Its log says why: kubectl -n {cns} logs deploy/kustomize-controller --since=5m",
                    obj::human_secs(o)
                ));
                (
                    Class::Reconciling,
                    format!(
                        "run in progress past its timeout (by {}): {}",
                        obj::human_secs(o),
                        c.message()
                    ),
                )
            }
            None => {
                let e = d
                    .eta
                    .map(|t| format!("; ETA {}", short_time(t)))
                    .unwrap_or_default();
                (
                    Class::Reconciling,
                    format!("reconciling normally: {}{e}", c.message()),
                )
            }
        }
    }

    /// Ready not True: the class from its reason, with the blocking objects of a failed or
    /// canceled check, the missing CRDs and the hints each reason needs.
    pub(in crate::diagnose) fn not_ready_class(
        &self,
        ks: &Value,
        r: &Condition,
        d: &mut Diagnosis,
    ) -> (Class, String) {
        let class = match r.reason() {
            "DependencyNotReady" => Class::WaitingOnDependencies,
            // kustomize-controller reports a missing spec.path with reason ArtifactFailed
            // ("kustomization path not found: ..."): the source is fine, the path is not.
            "ArtifactFailed" if r.message().contains("kustomization path not found") => {
                Class::BuildFailed
            }
            // "Source artifact not found, retrying in 30s" / "Source is not ready,
            // artifact not found": the run found no artifact. If the source has one now
            // (or is still fetching its first), nothing is stuck: kustomize-controller
            // requeues after spec.retryInterval and is also enqueued at once when the
            // source's artifact revision changes (kustomize-controller v1.x
            // kustomization_controller.go `requestsForRevisionChangeOf`). Only a source
            // that failed, is missing or is suspended keeps it failing.
            // A download that failed at the revision the source still has (source-controller
            // restarted, its storage address moved): the same revision brings no event, and
            // the error requeues only after spec.retryInterval (default spec.interval), unless
            // requested. The trial: `reconciling: nothing is stuck` for ten minutes.
            "ArtifactFailed" if retried_only_at_interval(r, d.source.as_ref()) => {
                Class::ReconcileFailed
            }
            "ArtifactFailed" if source_moving_or_ready(d.source.as_ref()) => Class::Reconciling,
            "ArtifactFailed" => Class::SourceNotReady,
            "BuildFailed" => Class::BuildFailed,
            "HealthCheckFailed" => Class::HealthCheckFailed,
            "HealthCheckCanceled" => Class::HealthCheckCanceled,
            "Progressing" | "ProgressingWithRetry" => Class::Reconciling,
            _ if r.status == "Unknown" => Class::Reconciling,
            _ => Class::ReconcileFailed,
        };
        if matches!(class, Class::HealthCheckFailed | Class::HealthCheckCanceled) {
            d.blocking = self.blocking_after_check(ks, r.message());
        }
        if class == Class::BuildFailed && r.message().contains("kustomization path not found") {
            d.hints.push(format!(
                "spec.path {} does not exist in the source's artifact: fix spec.path, or the repository layout at that revision",
                crate::obj::s(ks, &["spec", "path"]).unwrap_or("(unset)")
            ));
        }
        if class == Class::BuildFailed && r.message().contains("substitut") {
            d.hints.push("post-build variable substitution failed: check spec.postBuild.substitute/substituteFrom and that every referenced ConfigMap/Secret exists".into());
        }
        for c in NO_KIND_MATCH.captures_iter(r.message()) {
            let k = format!("{} ({})", &c[1], &c[2]);
            if !d.missing_crds.contains(&k) {
                d.missing_crds.push(k);
            }
        }
        if class == Class::ReconcileFailed && r.reason() != "ArtifactFailed" {
            d.refused = refusals(r.message(), &key_of(ks));
        }
        if !d.missing_crds.is_empty() {
            d.hints.push(format!(
                "the cluster does not serve {}: the CustomResourceDefinition is missing (not installed yet, or removed by an upgrade). Every run fails the same way until it exists: install the CRD, or make this Kustomization dependsOn the one that installs it",
                d.missing_crds.join(", ")
            ));
        }
        if class == Class::Reconciling
            && r.reason() == "ArtifactFailed"
            && let Some(sf) = d.source.as_ref()
        {
            d.hints.push(match sf.artifact_revision.as_deref() {
                Some(rev) => format!(
                    "the last run found no source artifact; {} has one now ({rev}): the controller runs again by itself (on the artifact change, at the latest after spec.retryInterval)",
                    sf.source
                ),
                None => format!(
                    "the last run found no source artifact; {} is still fetching its first: the Kustomization runs when it has one",
                    sf.source
                ),
            });
        }
        if class == Class::ReconcileFailed
            && r.reason() == "ArtifactFailed"
            && let Some(sf) = d.source.as_ref()
        {
            d.hints.push(format!(
                "the last run could not get the artifact of {} (source-controller restarted, or its storage address changed); {} has that revision now, so no revision change enqueues a run: the next comes after spec.retryInterval (default spec.interval) unless requested",
                sf.last_attempted_revision.as_deref().unwrap_or("?"),
                sf.source
            ));
        }
        if class == Class::HealthCheckCanceled {
            d.hints.push("the controller canceled the health check because a new reconciliation was triggered; the next run starts right away".into());
        }
        (
            class,
            format!("{} ({}): {}", class, r.reason(), r.message()),
        )
    }

    /// Worker starvation (fluxcd/flux2#5622): work is pending here, no run of it is in
    /// progress, and every --concurrent worker is held by other Kustomizations' runs; sets
    /// [`Diagnosis::worker_free_at`] and says so in the summary.
    fn worker_starvation(&self, ks: &Value, d: &mut Diagnosis) {
        let now = self.now();
        let suspended = obj::b(ks, &["spec", "suspend"]);
        let reconciling = run_in_progress(ks);
        let generation = obj::i(ks, &["metadata", "generation"]);
        let observed = obj::i(ks, &["status", "observedGeneration"]);
        // Worker starvation (fluxcd/flux2#5622): work is pending here, no run of it is in
        // progress, and every --concurrent worker is held by other Kustomizations' runs.
        let pending_work = !suspended
            && reconciling.is_none()
            && (d.class == Class::RequestPending
                || d.ready.is_none()
                || generation != observed
                || d.request.as_ref().is_some_and(|r| r.pending)
                || d.source
                    .as_ref()
                    .is_some_and(|s| s.newer_revision_available));
        if pending_work && let Some(c) = &self.controller {
            let holders = self.worker_holders();
            if self.all_workers_held_by_others(ks) {
                d.worker_free_at = holders.iter().filter_map(|(_, t)| *t).min();
                let list: Vec<String> = holders
                    .iter()
                    .map(|(k, t)| match t {
                        Some(t) => format!("{k} (until {})", short_time(*t)),
                        None => format!("{k} (end unknown)"),
                    })
                    .collect();
                let frees = match d.worker_free_at {
                    Some(t) => format!(
                        "the first frees at {} ({} from now)",
                        short_time(t),
                        obj::human_secs(t.duration_since(now).as_secs().max(0))
                    ),
                    None => "when one frees cannot be estimated".to_string(),
                };
                d.hints.push(format!(
                    "waiting for a free kustomize-controller worker: all {} (--concurrent) are held by: {}; {frees}. nothing runs here before a worker frees, and that wait ends by itself; --restart-controller frees them all at once (and cancels those runs)",
                    c.concurrent,
                    list.join(", ")
                ));
                d.summary = format!("{}; waiting for a free worker ({frees})", d.summary);
            }
        }
    }

    /// `controller-not-running`: a controller that is not running
    /// ([`Diagnosis::stopped_controllers`]) decides everything else (see the comment inside).
    pub(in crate::diagnose) fn controller_not_running(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A controller that is not running decides everything else: the conditions above are
        // what it last wrote, and nothing moves (no run, no fetch, no ETA) until it runs. A
        // Kustomization Ready as last written is not healthy then: nothing in Git reaches it
        // (the trial: rows classed `healthy` beside "need attention"). Only a suspended one
        // stays `suspended`: it would not run anyway.
        if d.stopped_controllers.is_empty() {
            return None;
        }
        let line = d
            .stopped_controllers
            .iter()
            .map(StoppedController::line)
            .collect::<Vec<_>>()
            .join("; ");
        if d.class == Class::Suspended {
            d.hints.push(format!(
                "{line}; {} stays as it is until it runs",
                obj::name(ks)
            ));
            return None;
        }
        // Without its ETA: nothing runs, so no run ends then (unless only
        // helm-controller is down: kustomize-controller still ends its check).
        let last = d.summary.split("; ETA ").next().unwrap_or(&d.summary);
        let last = format!("as last written by the controllers: {last}");
        d.hints.insert(0, last);
        d.summary = line;
        if !d
            .stopped_controllers
            .iter()
            .all(StoppedController::only_helm)
        {
            d.health_check = None;
            d.eta = None;
            d.worker_free_at = None;
        }
        Some(Class::ControllerNotRunning)
    }

    /// Walk the dependsOn chain from `ks` down to the first blocking Kustomization that is
    /// not itself only waiting on another one. `path` holds the chain so far.
    fn find_root(&self, ks: &Value, path: &mut Vec<String>) -> Option<RootCause> {
        let (dep_key, kind, msg) = self.first_unready_dep(ks)?;
        if let Some(pos) = path.iter().position(|p| *p == dep_key) {
            let mut cycle: Vec<String> = path[pos..].to_vec();
            cycle.push(dep_key.clone());
            return Some(RootCause {
                chain: path.clone(),
                kind: "cycle".into(),
                kustomization: dep_key,
                message: format!(
                    "dependsOn cycle: {}; none of them can ever become ready, break the cycle in Git",
                    cycle.join(" -> ")
                ),
                diagnosis: None,
            });
        }
        path.push(dep_key.clone());
        if kind == "missing" {
            return Some(RootCause {
                chain: path.clone(),
                kind,
                kustomization: dep_key.clone(),
                message: format!(
                    "{msg}: the Kustomization {dep_key} does not exist; create it or fix spec.dependsOn of {}",
                    path[path.len() - 2]
                ),
                diagnosis: None,
            });
        }
        let (dns, dname) = dep_key.split_once('/').unwrap();
        let dep = self.idx.kustomization(dns, dname).unwrap();
        // Go deeper when the dependency itself waits on one of its own dependencies.
        if self.first_unready_dep(dep).is_some()
            && let Some(rc) = self.find_root(dep, path)
        {
            return Some(rc);
        }
        let d = self.shallow(dep);
        let upstream: Vec<&String> = path[..path.len() - 1].iter().collect();
        let ordering = if upstream.is_empty() {
            String::new()
        } else {
            format!(
                "; \"dependency ... is not ready\" on {} is the dependsOn ordering working, not a fault",
                upstream
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let message = if kind == "revision-not-up-to-date" {
            format!(
                "{msg}: {dep_key} has not applied the source's current revision yet ({}){ordering}",
                d.summary
            )
        } else {
            format!(
                "{dep_key} is the first non-ready dependency: {}{ordering}",
                d.summary
            )
        };
        Some(RootCause {
            chain: path.clone(),
            kind,
            kustomization: dep_key,
            message,
            diagnosis: Some(Box::new(d)),
        })
    }
}

/// Whether a Kustomization's source has an artifact now (Ready=True with
/// `status.artifact`), or is still working towards its first one (Ready Unknown, not
/// suspended): either way a run that found no artifact is not stuck on the source.
fn source_moving_or_ready(source: Option<&SourceFacts>) -> bool {
    let Some(s) = source else { return false };
    if !s.found || s.suspended || s.failing.is_some() {
        return false;
    }
    match s.ready.as_ref() {
        Some(c) if c.is_true() => s.artifact_revision.is_some(),
        Some(c) if c.is_false() => false,
        _ => true,
    }
}

/// Whether a run that failed on the artifact (`Ready=False ArtifactFailed`) is retried only at
/// `spec.retryInterval`: the source is Ready with an artifact at the revision this
/// Kustomization last attempted (no revision change will enqueue it), and the failure is not
/// kustomize-controller's own short retry for an artifact not there yet (its message
/// `retrying in 30s`, the `--requeue-dependency` interval).
fn retried_only_at_interval(r: &Condition, source: Option<&SourceFacts>) -> bool {
    let Some(s) = source else { return false };
    !r.message().contains("retrying in")
        && s.found
        && !s.suspended
        && s.ready.as_ref().is_some_and(Condition::is_true)
        && s.artifact_revision.is_some()
        && same_revision(
            s.artifact_revision.as_deref(),
            s.last_attempted_revision.as_deref(),
        )
}
