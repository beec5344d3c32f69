//! The diagnosis engine: classify a Kustomization from a [`Snapshot`], find the root cause
//! (dependsOn chain, source, blocking objects and their pods) and the controller facts that
//! decide the lever. Pure: no I/O, the clock is `Snapshot::now`.
//!
//! Statuses and messages follow kustomize-controller v1.9 (internal/controller/
//! kustomization_controller.go) and fluxcd/pkg (runtime/conditions, ssa).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use jiff::{SignedDuration, Timestamp};
use regex::Regex;
use serde::Serialize;
use serde_json::Value;

use crate::controller::ControllerFacts;
use crate::obj;
use crate::snapshot::{Index, Snapshot};
use cluster_loop::conditions::Condition;
pub use cluster_loop::duration::short_time;
use cluster_loop::duration::{self, parse_go_duration};
use cluster_loop::flux::Kustomization;
use cluster_loop::flux::{HELM_CONSEQUENCE, StoppedController};
use cluster_loop::kstatus::{self, Status as KStatus};

mod blind;
mod refused;
pub use blind::{
    BlindSpot, ConfigRef, RemoteHead, SOURCE_CONTROLLER_KINDS, apply_remote_head, config_refs,
    source_not_watched,
};
pub use refused::{FORCE_ANNOTATION, Refusal, RefusalKind, refusals};

/// `reconcile.fluxcd.io/requestedAt` (fluxcd/pkg apis/meta `ReconcileRequestAnnotation`).
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// Annotation we set together with `spec.suspend: true` in one patch, so that a run killed
/// before it resumed is recognised (and healed) by the next run. Value: RFC 3339 time of the
/// suspend.
pub const SUSPEND_MARKER: &str = "unstick.cluster-loop.dev/suspended-at";

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

/// An in-flight (or just ended) health check.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// Revision under check, from the Reconciling message.
    pub revision: String,
    /// Start of the run: the Reconciling condition's lastTransitionTime (the condition turns
    /// True when the run starts fetching, so the health check itself started at or after it).
    pub started_at: Option<Timestamp>,
    /// Timeout in seconds: from the message (`with a timeout of 5m0s`), else the effective
    /// timeout of the spec.
    pub timeout_secs: f64,
    /// `started_at + timeout`: the latest time the controller ends the check on its own.
    pub deadline: Option<Timestamp>,
    /// Seconds from the snapshot to the deadline (negative: overdue).
    pub time_left_secs: Option<i64>,
    /// When the controller fails the check early (fail-fast, kustomize-controller v1.1+ unless
    /// `DisableFailFastBehavior`: ssa WaitForSet stops as soon as a member is Failed), when
    /// that comes before the deadline: a member already Failed (its next 5s poll), or a
    /// Deployment that turns Failed (`ProgressDeadlineExceeded`) at its Progressing
    /// condition's lastUpdateTime + `spec.progressDeadlineSeconds` (default 600s; kubernetes
    /// pkg/controller/deployment/util `DeploymentTimedOut`) while it is still not Current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_fast_at: Option<Timestamp>,
    /// Why it fails fast then (`Deployment/ns/name passes its progressDeadlineSeconds (600s)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_fast_because: Option<String>,
    /// The earliest predicted end of the check: `fail_fast_at`, else `deadline`.
    pub ends_at: Option<Timestamp>,
    /// Seconds from the snapshot to `ends_at` (negative: overdue).
    pub ends_in_secs: Option<i64>,
    /// The wait set is not empty and every member was read (its kind listed, or its CRD known
    /// missing), so
    /// an empty [`Diagnosis::blocking`] means every one is Current now, not "not read".
    #[serde(skip)]
    pub wait_set_read: bool,
}

/// A health-checked object that is not Current.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingObject {
    /// `Kind/namespace/name`.
    pub object: String,
    /// Where the wait set got it: `inventory` (`spec.wait`), `healthChecks`, or `message`
    /// (only named by the controller's message).
    pub origin: String,
    /// kstatus now as kustomize-controller reads it ([`kstatus::compute_health_at`]):
    /// `NotFound` when its kind was listed and it is absent, `Unknown` when the cluster does
    /// not serve its kind (missing CRD).
    pub kstatus: String,
    /// kstatus message and why it holds the check, or the status quoted by the controller
    /// when the object was not read.
    pub message: String,
    /// What frees it, for its kind and state (resume a suspended Flux object, let a
    /// Terminating object go, fix a healthChecks namespace, install a missing CRD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Pod-level reasons below a workload (for a HelmRelease: below the workloads of its
    /// release, found by helm-controller's origin labels).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodReason>,
    /// Its own controller reports an action in progress within its own timeout and no
    /// failure is visible: waiting, not stuck. A HelmRelease whose install/upgrade runs, none
    /// failed, no pod of its release failing; a Deployment, StatefulSet or DaemonSet rolling
    /// out with no pod reason below it (`Engine::rollout_progressing`: e.g. waiting out
    /// `minReadySeconds`). `false` for every other kind and state.
    pub progressing: bool,
}

/// Why a pod of a blocking workload is not ready.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodReason {
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
    /// `ImagePullBackOff`, `ErrImagePull`, `CrashLoopBackOff`, `Unschedulable`, ...
    pub reason: String,
    /// The image reference the node tried, for image errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Last exit code, for CrashLoopBackOff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_code: Option<i64>,
    /// Last termination reason (`Error`, `OOMKilled`), for CrashLoopBackOff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_reason: Option<String>,
    /// Restart count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts: Option<i64>,
    /// When the last failed run ended (`lastState.terminated.finishedAt`), for
    /// [`RECENT_RESTART`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_at: Option<Timestamp>,
    /// Message of the waiting state or the latest Warning event of the pod.
    pub message: String,
    /// For a CrashLoopBackOff container: a Service link variable whose value its last run's
    /// log shows (failure catalogue row 5, fleetlint FL061 live;
    /// [`cluster_loop::servicelinks::log_collision`]), read from the snapshot's
    /// `workload_logs` and `services`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_link: Option<cluster_loop::servicelinks::LinkCollision>,
}

/// [`PodReason::reason`] of a container running again after a failed run less than
/// [`CRASH_LOOP_RESET`] ago ([`Engine::pod_reasons`]): not a kubelet reason (its status says
/// Running), the crash loop between two restarts.
pub const RECENT_RESTART: &str = "RestartedAfterCrash";

/// How long after a container's failed run the kubelet still counts it in the crash-loop
/// back-off (k8s.io/kubernetes v1.36 pkg/kubelet/kubelet.go: the back-off entry expires when
/// `eventTime.Sub(lastUpdate) > 600*time.Second`): a container that ran this long since its
/// last exit is no longer in a crash loop; before that, Running is a pause between restarts.
pub const CRASH_LOOP_RESET: std::time::Duration = std::time::Duration::from_secs(600);

/// A known failure signature from the catalogue.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Signature {
    /// Stable id: `bare-tag-image` or `image-without-registry`.
    pub id: String,
    /// The object carrying it.
    pub object: String,
    /// The offending image reference.
    pub image: String,
    /// What it means and what to run.
    pub message: String,
}

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
/// One entry of the ssa WaitForSet error list: `Deployment/apps/podinfo status: 'InProgress'`
/// (fluxcd/pkg ssa `FmtObjMetadata`: `Kind/namespace/name`, `Kind/name` when cluster-scoped).
static HC_ENTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([A-Za-z0-9]+)/(?:([a-z0-9.-]+)/)?([a-z0-9.:-]+) status: '(\w+)'").unwrap()
});
/// The RESTMapper's error for a kind the cluster does not serve, as kustomize-controller's
/// server-side apply reports it (k8s.io/apimachinery meta `NoKindMatchError`: `no matches for
/// kind "ExternalSecret" in version "external-secrets.io/v1beta1"`).
static NO_KIND_MATCH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"no matches for kind "([^"]+)" in version "([^"]+)""#).unwrap());
/// An operating-system error on a path inside kustomize-controller's own per-run temp dir:
/// each run extracts the artifact into `MkdirTempAbs("", TempDirPrefix)` (the OS temp dir,
/// `/tmp`, prefix `kustomization-`, kustomize-controller v1.x internal/controller/tmpdir.go
/// and kustomization_controller.go `reconcile`) and removes it when the run ends. Go's
/// `*PathError` text is `op path: errno`, e.g. `lstat /tmp/kustomization-2167172500: no such
/// file or directory`. Only the temp dir itself: a path below it (`lstat
/// /tmp/kustomization-1/apps/missing.yaml: no such file or directory`) is a file the
/// repository's kustomization.yaml names and the revision does not have.
static CONTROLLER_TMP_IO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\S*/kustomization-\d+/?: (no such file or directory|permission denied|no space left on device|read-only file system|too many open files|input/output error)").unwrap()
});
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
    dropped: std::sync::OnceLock<HashMap<(String, String, String), Vec<String>>>,
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

    fn now(&self) -> Timestamp {
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

    /// Diagnosis without the dependsOn walk: the state as the conditions tell it
    /// ([`Engine::shallow_own`]), then the controller's blind spots, where the status suggests
    /// a run that will not come ([`blind`]).
    fn shallow(&self, ks: &Value) -> Diagnosis {
        let mut d = self.shallow_own(ks);
        self.blind_spots(ks, &mut d);
        d
    }

    /// The state as the Kustomization's conditions and its source tell it.
    fn shallow_own(&self, ks: &Value) -> Diagnosis {
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
        (d.class, d.summary) = self.classify(ks, &mut d);
        // Signatures from blocking workloads.
        for b in &d.blocking {
            d.signatures.extend(self.signatures_for(b));
        }
        d.signatures.dedup();
        self.source_hints(ks, &mut d);
        if let Some(r) = &d.request
            && r.pending
            && d.class != Class::RequestPending
        {
            d.hints.push(format!(
                "reconcile request {} is not handled yet: it is recorded only by the next run that reads it",
                r.requested_at
            ));
        }
        self.worker_starvation(ks, &mut d);
        self.stopped_controllers_decide(ks, &mut d);
        if obj::b(ks, &["spec", "suspend"]) {
            d.suspended_by_unstick_at = obj::annotation(ks, SUSPEND_MARKER).map(String::from);
        }
        d
    }

    /// The class and summary from the conditions, in order: suspended, stalled, a health
    /// check in flight, a run in progress, Ready not True, a pending request, no Ready yet, a
    /// generation not observed, a failing or missing source, a newer source revision, else
    /// healthy. Fills the facts each case reads (health check, ETA, blocking objects, hints).
    fn classify(&self, ks: &Value, d: &mut Diagnosis) -> (Class, String) {
        let reconciling = run_in_progress(ks);
        let stalled = obj::condition(ks, "Stalled").filter(Condition::is_true);
        let generation = obj::i(ks, &["metadata", "generation"]);
        let observed = obj::i(ks, &["status", "observedGeneration"]);
        if obj::b(ks, &["spec", "suspend"]) {
            Self::suspended_class(ks, d)
        } else if let Some(c) = &stalled {
            (
                Class::Stalled,
                format!("stalled ({}): {}", c.reason(), c.message()),
            )
        } else if let Some((c, step)) = reconciling.as_ref().and_then(|c| {
            RunStep::parse(c.message())
                .filter(RunStep::is_health_check)
                .map(|s| (c, s))
        }) {
            self.in_flight_class(ks, c, &step, d)
        } else if let Some(c) = reconciling.as_ref() {
            self.run_class(ks, c, d)
        } else if let Some(r) = d.ready.clone().filter(|r| !r.is_true()) {
            self.not_ready_class(ks, &r, d)
        } else if d.request.as_ref().is_some_and(|r| r.pending) {
            let r = d.request.as_ref().unwrap();
            let age = r
                .age_secs
                .map(|a| format!(" {} ago", obj::human_secs(a)))
                .unwrap_or_default();
            (
                Class::RequestPending,
                format!(
                    "reconcile requested{age} ({}) but not handled yet (lastHandledReconcileAt {})",
                    r.requested_at,
                    r.last_handled_reconcile_at.as_deref().unwrap_or("never")
                ),
            )
        } else if d.ready.is_none() {
            (
                Class::Reconciling,
                "not reconciled yet (no Ready condition)".to_string(),
            )
        } else if let (Some(g), Some(o)) = (generation, observed)
            && g != o
        {
            (
                Class::Reconciling,
                format!("generation {g} not observed yet (observedGeneration {o})"),
            )
        } else if d
            .source
            .as_ref()
            .is_some_and(|s| s.failure().is_some() || !s.found)
        {
            let s = d.source.as_ref().unwrap();
            (
                Class::SourceNotReady,
                format!(
                    "Ready at {} but source {} is {}",
                    s.last_applied_revision.as_deref().unwrap_or("?"),
                    s.source,
                    if s.found {
                        format!(
                            "not ready: {}",
                            s.failure().map(|c| c.message()).unwrap_or("")
                        )
                    } else {
                        "missing".to_string()
                    }
                ),
            )
        } else if let Some(s) = d.source.as_ref().filter(|s| {
            s.artifact_revision.is_some()
                && !same_revision(
                    s.artifact_revision.as_deref(),
                    s.last_applied_revision.as_deref(),
                )
        }) {
            (
                Class::Reconciling,
                format!(
                    "Ready at {}; source has {}, the next run applies it",
                    s.last_applied_revision.as_deref().unwrap_or("?"),
                    s.artifact_revision.as_deref().unwrap_or("?")
                ),
            )
        } else {
            (
                Class::Healthy,
                format!(
                    "Ready: {}",
                    d.ready.as_ref().map(|r| r.message()).unwrap_or("")
                ),
            )
        }
    }

    /// `suspended`: ours (an interrupted run's marker) or someone else's.
    fn suspended_class(ks: &Value, d: &mut Diagnosis) -> (Class, String) {
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
    fn in_flight_class(
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
    fn run_class(&self, ks: &Value, c: &Condition, d: &mut Diagnosis) -> (Class, String) {
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
    fn not_ready_class(&self, ks: &Value, r: &Condition, d: &mut Diagnosis) -> (Class, String) {
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

    /// Hints from the source: a missing secret, a refused or absent Git credential, a retry
    /// that still holds the last failure, a newer revision, a suspended source.
    fn source_hints(&self, ks: &Value, d: &mut Diagnosis) {
        // Source d.hints.
        if let Some(s) = &d.source {
            if let Some(c) = s.failure().or(s.ready.as_ref()) {
                let m = c.message().to_ascii_lowercase();
                let secret_ref = self
                    .source_obj(ks)
                    .and_then(|o| obj::s(o, &["spec", "secretRef", "name"]))
                    .map(|n| {
                        (
                            s.source.split('/').nth(1).unwrap_or("").to_string(),
                            n.to_string(),
                        )
                    });
                let secret = secret_ref
                    .as_ref()
                    .map(|(ns, n)| format!("secret {ns}/{n}"))
                    .unwrap_or_else(|| "its secret".into());
                // The Secret's key names, when read (never the values).
                let keys = secret_ref
                    .as_ref()
                    .filter(|_| s.source.starts_with("GitRepository/"))
                    .and_then(|(ns, n)| self.idx.snap.secret_keys.get(&format!("{ns}/{n}")));
                let rerun = format!(
                    "kubectl unstick ks/{} -n {} --with-source",
                    obj::name(ks),
                    obj::namespace(ks)
                );
                // Quote only what the object says: its reason and message, verbatim.
                if m.contains("secret") && m.contains("not found") {
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": the referenced {secret} does not exist; create it (in the source's namespace), then run `{rerun}`",
                        s.source, c.reason(), c.message(),
                    ));
                } else if s.source.starts_with("GitRepository/")
                    && cluster_loop::gitauth::is_auth_refused(c.message())
                {
                    // The Git server's 401: which Secret and key, and the rotation that
                    // fixes it (the one rule, shared with gitops verify's link 1).
                    let r = cluster_loop::gitauth::refused(
                        secret_ref.as_ref().map(|(ns, n)| (ns.as_str(), n.as_str())),
                        keys.map(Vec::as_slice),
                        &format!("run `{rerun}`"),
                    );
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": {}. Fix: {}",
                        s.source,
                        c.reason(),
                        c.message(),
                        r.why,
                        r.fix
                    ));
                } else if cluster_loop::gitauth::is_auth_refused(c.message()) {
                    // Another kind's server (a registry, a Helm repository) answered 401: the
                    // credential in the Secret was refused.
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": the server refused the credential in {secret} (a token rotation that revoked the token Flux holds does this). Mint a new, uniquely named token, put it in {secret}, then run `{rerun}`; never revoke the token in use before the secret has the new one",
                        s.source, c.reason(), c.message(),
                    ));
                } else if c.reason() == "AuthenticationFailed" {
                    // source-controller v1.9.6 sets this reason when it cannot build the
                    // credentials (the Secret unreadable, fluxcd/pkg/git NewAuthOptions
                    // refusing its keys, a proxy or provider credential): no token was refused.
                    let keys_rule = if s.source.starts_with("GitRepository/") {
                        " (a Git source's Secret holds bearerToken, or username and password; ca.crt for the CA)"
                    } else {
                        ""
                    };
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": source-controller could not build the credentials it names; fix what the message says{keys_rule}, then run `{rerun}`",
                        s.source, c.reason(), c.message(),
                    ));
                }
            }
            if let (Some(f), Some(r)) = (&s.failing, &s.ready)
                && !r.is_false()
            {
                d.hints.push(format!(
                    "{} is retrying now (Ready {}: \"{}\"), and its {} condition still holds the last attempt's failure: \"{}\"; each attempt fails the same way until that is fixed",
                    s.source, r.status, r.message(), f.type_, f.message()
                ));
            }
            if s.newer_revision_available {
                d.hints.push(format!(
                    "source has {} but the Kustomization last attempted {}",
                    s.artifact_revision.as_deref().unwrap_or("?"),
                    s.last_attempted_revision.as_deref().unwrap_or("nothing")
                ));
            }
            if s.suspended {
                d.hints.push(format!("source {} is suspended", s.source));
            }
        }
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

    /// A controller that is not running decides everything else (see the comment inside).
    fn stopped_controllers_decide(&self, ks: &Value, d: &mut Diagnosis) {
        // A controller that is not running decides everything else: the conditions above are
        // what it last wrote, and nothing moves (no run, no fetch, no ETA) until it runs. A
        // Kustomization Ready as last written is not healthy then: nothing in Git reaches it
        // (the trial: rows classed `healthy` beside "need attention"). Only a suspended one
        // stays `suspended`: it would not run anyway.
        let stopped_controllers = self.stopped_controllers_for(ks);
        if !stopped_controllers.is_empty() {
            let line = stopped_controllers
                .iter()
                .map(StoppedController::line)
                .collect::<Vec<_>>()
                .join("; ");
            if d.class == Class::Suspended {
                d.hints.push(format!(
                    "{line}; {} stays as it is until it runs",
                    obj::name(ks)
                ));
            } else {
                // Without its ETA: nothing runs, so no run ends then (unless only
                // helm-controller is down: kustomize-controller still ends its check).
                let last = d.summary.split("; ETA ").next().unwrap_or(&d.summary);
                let last = format!("as last written by the controllers: {last}");
                d.hints.insert(0, last);
                d.summary = line;
                d.class = Class::ControllerNotRunning;
                if !stopped_controllers.iter().all(StoppedController::only_helm) {
                    d.health_check = None;
                    d.eta = None;
                    d.worker_free_at = None;
                }
            }
        }
        d.stopped_controllers = stopped_controllers;
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

    fn source_facts(&self, ks: &Value) -> Option<SourceFacts> {
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
    fn first_unready_dep(&self, ks: &Value) -> Option<(String, String, String)> {
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

    /// The earliest time the health check fails fast, with why: a blocking member already
    /// Failed ends it at the next 5s poll; a blocking Deployment turns Failed at its
    /// Progressing condition's lastUpdateTime + `progressDeadlineSeconds`. `None` when nothing
    /// will fail.
    fn fail_fast_at(&self, blocking: &[BlockingObject]) -> Option<(Timestamp, String)> {
        let now = self.now();
        let mut best: Option<(Timestamp, String)> = None;
        let mut consider = |at: Timestamp, why: String| {
            if best.as_ref().is_none_or(|(b, _)| at < *b) {
                best = Some((at, why));
            }
        };
        for b in blocking {
            if b.kstatus == "Failed" {
                consider(
                    now.checked_add(secs(5.0)).unwrap_or(now),
                    format!(
                        "{} is Failed: the controller's next 5s poll ends the check with \"failed early due to stalled resources\"",
                        b.object
                    ),
                );
                continue;
            }
            let parts: Vec<&str> = b.object.split('/').collect();
            if parts.len() != 3 || parts[0] != "Deployment" {
                continue;
            }
            let Some(d) = self.idx.objects_by_id.get(&(
                parts[0].to_string(),
                parts[1].to_string(),
                parts[2].to_string(),
            )) else {
                continue;
            };
            let pds = obj::i(d, &["spec", "progressDeadlineSeconds"]).unwrap_or(600);
            let Some(p) = obj::arr(d, &["status", "conditions"])
                .iter()
                .find(|c| obj::s(c, &["type"]) == Some("Progressing"))
            else {
                continue;
            };
            if obj::s(p, &["reason"]) == Some("NewReplicaSetAvailable") {
                continue;
            }
            let Some(from) = obj::s(p, &["lastUpdateTime"]).and_then(obj::parse_time) else {
                continue;
            };
            if let Ok(at) = from.checked_add(secs(pds as f64)) {
                consider(
                    at.max(now),
                    format!(
                        "{} passes its progressDeadlineSeconds ({pds}s) then, turns Failed (ProgressDeadlineExceeded) and the check fails fast (\"failed early due to stalled resources\", kustomize-controller v1.1+)",
                        b.object
                    ),
                );
            }
        }
        best
    }

    /// Members of the wait set ([`wait_set`]) that are not Current now, in wait-set order.
    fn blocking_in_flight(&self, ks: &Value) -> Vec<BlockingObject> {
        wait_set(ks)
            .iter()
            .filter_map(|m| self.blocking_object(ks, m, None))
            .collect()
    }

    /// Objects named by a HealthCheckFailed/Canceled message (with the status the controller
    /// quoted), plus the other members of the wait set that are not Current now.
    fn blocking_after_check(&self, ks: &Value, message: &str) -> Vec<BlockingObject> {
        let set = wait_set(ks);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for c in HC_ENTRY.captures_iter(message) {
            let kind = c[1].to_string();
            let ns = c.get(2).map(|m| m.as_str()).unwrap_or("").to_string();
            let name = c[3].to_string();
            let quoted = c[4].to_string();
            let m = set
                .iter()
                .find(|m| m.kind == kind && m.namespace == ns && m.name == name)
                .cloned()
                .unwrap_or_else(|| WaitMember {
                    group: default_group(&kind).to_string(),
                    version: String::new(),
                    kind: kind.clone(),
                    namespace: ns.clone(),
                    name: name.clone(),
                    origin: Origin::Message,
                });
            seen.insert((kind, ns, name));
            if let Some(b) = self.blocking_object(ks, &m, Some(&quoted)) {
                out.push(b);
            }
        }
        for m in set {
            if seen.contains(&(m.kind.clone(), m.namespace.clone(), m.name.clone())) {
                continue;
            }
            if let Some(b) = self.blocking_object(ks, &m, None) {
                out.push(b);
            }
        }
        out
    }

    /// How kustomize-controller on this version reads health ([`kstatus::HealthReader`]).
    fn health_reader(&self) -> kstatus::HealthReader {
        kstatus::HealthReader::for_version(
            self.controller
                .as_ref()
                .and_then(|c| c.version)
                .map(|v| (v.major, v.minor)),
        )
    }

    /// One member of the wait set, when it is not Current: its kstatus as kustomize-controller
    /// reads it ([`kstatus::compute_health_at`]), why, and the fix for its kind. `quoted`: the
    /// status the controller's message gave it. `ks`: the Kustomization (its
    /// `spec.healthCheckExprs`).
    fn blocking_object(
        &self,
        ks: &Value,
        m: &WaitMember,
        quoted: Option<&str>,
    ) -> Option<BlockingObject> {
        let (group, kind, ns, name) = (
            m.group.as_str(),
            m.kind.as_str(),
            m.namespace.as_str(),
            m.name.as_str(),
        );
        let id = if ns.is_empty() {
            format!("{kind}/{name}")
        } else {
            format!("{kind}/{ns}/{name}")
        };
        let key = (
            group.to_string(),
            kind.to_string(),
            ns.to_string(),
            name.to_string(),
        );
        let mk = |kstatus: String, message: String, fix: Option<String>, pods: Vec<PodReason>| {
            BlockingObject {
                object: id.clone(),
                origin: m.origin.as_str().to_string(),
                kstatus,
                message,
                fix,
                pods,
                progressing: false,
            }
        };
        let found = self.idx.objects.get(&key).copied().or_else(|| {
            (group == "kustomize.toolkit.fluxcd.io" && kind == "Kustomization")
                .then(|| self.idx.kustomization(ns, name))
                .flatten()
        });
        if let Some(o) = found {
            // ssa shouldSkipApply: objects marked reconcile: disabled are skipped by the
            // apply and left out of the health check (kustomization_controller.go checkHealth,
            // changeSetWithoutSkipped).
            if m.origin == Origin::Inventory && reconcile_disabled(o) {
                return None;
            }
            // A kind with a spec.healthCheckExprs entry is read by the controller with those
            // CEL expressions, which are not evaluated here: say so instead of a generic
            // reading that may not be the controller's (either way).
            if quoted.is_none()
                && let Some(e) = health_check_expr(ks, o)
            {
                let generic = kstatus::compute_health_at(o, self.now(), self.health_reader());
                let field = |f: &str| {
                    obj::s(e, &[f])
                        .filter(|x| !x.is_empty())
                        .map(|x| format!("{f}: `{x}`"))
                };
                let exprs: Vec<String> = ["current", "inProgress", "failed"]
                    .iter()
                    .filter_map(|f| field(f))
                    .collect();
                return Some(mk(
                    KStatus::Unknown.to_string(),
                    format!(
                        "kustomize-controller reads {kind} with spec.healthCheckExprs ({}), CEL that kubectl unstick does not evaluate; without them it would read {} ({}), which may not be the controller's verdict",
                        exprs.join(", "),
                        generic.status,
                        generic.message
                    ),
                    None,
                    self.pod_reasons(o),
                ));
            }
            let r = kstatus::compute_health_at(o, self.now(), self.health_reader());
            if r.status == KStatus::Current {
                return None;
            }
            let mut message = r.message;
            let mut fix = None;
            if r.status == KStatus::Terminating {
                let (m, f) = self.terminating_reading(o, ns, name, &message);
                message = m;
                fix = Some(f);
            } else if group.ends_with(".toolkit.fluxcd.io") && obj::b(o, &["spec", "suspend"]) {
                message = format!(
                    "suspended (spec.suspend: true): its controller does not reconcile it, so it stays {} ({message})",
                    r.status
                );
                fix = Some(format!(
                    "resume it: flux resume {} {name} -n {ns} (or remove spec.suspend in Git); kustomize-controller waits on it until its timeout otherwise (fluxcd/kustomize-controller#1100, #709)",
                    flux_cli_kind(kind)
                ));
            } else if (group, kind) == ("helm.toolkit.fluxcd.io", "HelmRelease") {
                let pods = self.release_pods(o);
                let (message, fix, progressing) = helm_release_reading(o, &message, &pods);
                let mut b = mk(r.status.to_string(), message, fix, pods);
                b.progressing = progressing;
                return Some(b);
            }
            let pods = self.pod_reasons(o);
            // A crashing container that read a Service link variable (catalogue row 5): the
            // fix is in the pod template, and no rerun changes it.
            if fix.is_none()
                && let Some(c) = pods.iter().find_map(|p| p.service_link.as_ref())
            {
                fix = Some(c.fix());
            }
            let progressing = r.status == KStatus::InProgress
                && matches!(
                    (group, kind),
                    ("apps", "Deployment") | ("apps", "StatefulSet") | ("apps", "DaemonSet")
                )
                && pods.is_empty()
                && self.rollout_progressing(o);
            let mut b = mk(r.status.to_string(), message, fix, pods);
            b.progressing = progressing;
            return Some(b);
        }
        if self.idx.unserved(group, kind) {
            return Some(mk(
                KStatus::Unknown.to_string(),
                format!(
                    "the cluster does not serve {kind} ({group}): its CustomResourceDefinition is missing, so kustomize-controller reads it as status: 'Unknown' and the check holds until its timeout"
                ),
                Some(format!(
                    "install the CRD for {kind}.{group} (the operator that owns it), or order this Kustomization after the one that installs it (spec.dependsOn)"
                )),
                Vec::new(),
            ));
        }
        if self.idx.listed(group, kind) {
            let elsewhere: Vec<&str> = self
                .idx
                .namespaces_of
                .get(&(group.to_string(), kind.to_string(), name.to_string()))
                .cloned()
                .unwrap_or_default();
            let (message, fix) = not_found_reading(m.origin, kind, ns, name, &elsewhere);
            return Some(mk(KStatus::NotFound.to_string(), message, fix, Vec::new()));
        }
        quoted.map(|q| {
            mk(
                q.to_string(),
                "status as quoted by the controller (object not read)".into(),
                None,
                Vec::new(),
            )
        })
    }

    /// A Terminating object in the wait set: (message, fix) naming the finalizers it waits
    /// on (a PVC held by pvc-protection names the pods that mount it).
    fn terminating_reading(
        &self,
        o: &Value,
        ns: &str,
        name: &str,
        message: &str,
    ) -> (String, String) {
        let fins: Vec<&str> = obj::arr(o, &["metadata", "finalizers"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let since = obj::s(o, &["metadata", "deletionTimestamp"]).unwrap_or("?");
        let message = format!(
            "{message} at {since}; deletion waits on finalizers [{}]: the health check holds until its timeout while it is Terminating",
            fins.join(", ")
        );
        let fix = if fins.contains(&"kubernetes.io/pvc-protection") {
            let users: Vec<String> = self
                .idx
                .pods_by_claim
                .get(&(ns.to_string(), name.to_string()))
                .map(|v| {
                    v.iter()
                        .map(|p| format!("pod {ns}/{}", obj::name(p)))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "kubernetes.io/pvc-protection keeps a PVC while a pod mounts it{}: stop those pods (scale their workload down) so the deletion completes; the next run then recreates the PVC",
                if users.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", users.join(", "))
                }
            )
        } else if fins.is_empty() {
            "the deletion should complete shortly (no finalizers left); the next run recreates the object".to_string()
        } else {
            format!(
                "the controller that owns {} must finish and remove it (check its logs); the next run recreates the object once it is gone",
                fins.join(", ")
            )
        };
        (message, fix)
    }

    /// Whether a workload that kstatus reads InProgress, with no pod reason below it
    /// ([`Self::pod_reasons`]: no image pull error, crash loop, config error or unschedulable
    /// pod), is a rollout still moving rather than held: not when a ReplicaSet cannot create
    /// its pods (Deployment condition `ReplicaFailure=True`, kubernetes
    /// pkg/controller/deployment/sync.go), and not when one of its pods has a kubelet
    /// `Unhealthy` Warning event (pkg/kubelet/prober/prober.go: "Readiness probe failed"),
    /// and not while any pod of it is not ready, or none was read. A rollout waiting out `minReadySeconds`, or pods
    /// being created, is moving: kstatus turns it Current, or the Deployment's
    /// `progressDeadlineSeconds` turns it Failed (kstatus Failed: not progressing).
    fn rollout_progressing(&self, w: &Value) -> bool {
        if obj::condition(w, "ReplicaFailure").is_some_and(|c| c.is_true()) {
            return false;
        }
        let pods = self.workload_pods(w);
        // No pod read: nothing shows it moving (its pods may not exist yet, or were not
        // read); the fail-fast prediction at its progressDeadlineSeconds stands. A pod not
        // ready yet (still pulling, starting, or failing its readiness probe: kubelet
        // `Unhealthy`) is no evidence of progress either: only pods all of whose containers
        // are ready (a rollout waiting out minReadySeconds) are.
        !pods.is_empty()
            && pods.into_iter().all(|p| {
                let statuses = obj::arr(p, &["status", "containerStatuses"]);
                !statuses.is_empty() && statuses.iter().all(|cs| obj::b(cs, &["ready"]))
            })
    }

    /// Pod-level reasons for a workload: its pods by owner (a Job's pods carry an
    /// ownerReference to it) or by `spec.selector.matchLabels` (Deployments, StatefulSets,
    /// DaemonSets, ReplicaSets). Reads the snapshot's `pods` and `events` (a Warning event's
    /// message when the waiting state has none); `[]` when no pod of it is in the snapshot.
    pub fn pod_reasons(&self, w: &Value) -> Vec<PodReason> {
        self.workload_pods(w)
            .into_iter()
            .flat_map(|p| self.reasons_of_pod(p))
            .collect()
    }

    /// The pods of a workload: by owner (a Job's pods carry an ownerReference to it), else by
    /// `spec.selector.matchLabels` (Deployments, StatefulSets, DaemonSets, ReplicaSets).
    fn workload_pods(&self, w: &Value) -> Vec<&Value> {
        let ns = obj::namespace(w);
        if let Some(pods) = self.idx.pods_by_owner.get(&(
            ns.to_string(),
            obj::kind(w).to_string(),
            obj::name(w).to_string(),
        )) {
            return pods.to_vec();
        }
        let Some(sel) = obj::at(w, &["spec", "selector", "matchLabels"]).and_then(Value::as_object)
        else {
            return Vec::new();
        };
        let Some((k0, v0)) = sel.iter().next() else {
            return Vec::new();
        };
        self.idx
            .pods_by_label
            .get(&(
                ns.to_string(),
                k0.clone(),
                v0.as_str().unwrap_or("").to_string(),
            ))
            .map(Vec::as_slice)
            .unwrap_or(&[])
            .iter()
            .copied()
            .filter(|p| {
                let labels = obj::at(p, &["metadata", "labels"]).and_then(Value::as_object);
                labels.is_some_and(|l| sel.iter().all(|(k, v)| l.get(k) == Some(v)))
            })
            .collect()
    }

    /// Pod-level reasons below the workloads of a HelmRelease's release: the Deployments,
    /// StatefulSets, DaemonSets and Jobs of the snapshot that carry helm-controller's origin
    /// labels for it ([`cluster_loop::helm::ORIGIN_NAME_LABEL`], helm-controller v1.4
    /// internal/postrender/build.go `NewOriginLabels`).
    fn release_pods(&self, hr: &Value) -> Vec<PodReason> {
        let (name, ns) = (obj::name(hr), obj::namespace(hr));
        let mut out = Vec::new();
        for o in &self.idx.snap.objects {
            let labels = obj::at(o, &["metadata", "labels"]);
            let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
            if label(cluster_loop::helm::ORIGIN_NAME_LABEL) != Some(name)
                || label(cluster_loop::helm::ORIGIN_NAMESPACE_LABEL) != Some(ns)
                || !matches!(
                    obj::kind(o),
                    "Deployment" | "StatefulSet" | "DaemonSet" | "Job"
                )
            {
                continue;
            }
            for p in self.pod_reasons(o) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The Service link variable a crashing container read, when its last run's log
    /// (`workload_logs`) shows one of the values the kubelet injected into it from the
    /// Services read (`services`).
    fn service_link(
        &self,
        p: &Value,
        container: &str,
    ) -> Option<cluster_loop::servicelinks::LinkCollision> {
        let key = format!("{}/{}/{container}", obj::namespace(p), obj::name(p));
        let log = self.idx.snap.workload_logs.get(&key)?;
        cluster_loop::servicelinks::log_collision(p, container, &self.idx.snap.services, log)
    }

    fn reasons_of_pod(&self, p: &Value) -> Vec<PodReason> {
        let pod = obj::name(p).to_string();
        let warning = self
            .idx
            .events
            .get(&(
                "Pod".to_string(),
                obj::namespace(p).to_string(),
                pod.clone(),
            ))
            .and_then(|evs| {
                evs.iter()
                    .rev()
                    .find(|e| obj::s(e, &["type"]) == Some("Warning"))
            })
            .and_then(|e| obj::s(e, &["message"]))
            .map(String::from);
        let mut out = Vec::new();
        for list in ["initContainerStatuses", "containerStatuses"] {
            for cs in obj::arr(p, &["status", list]) {
                if let Some(r) = self.recent_restart(&pod, cs) {
                    out.push(r);
                    continue;
                }
                let Some(w) = obj::at(cs, &["state", "waiting"]) else {
                    continue;
                };
                let reason = obj::s(w, &["reason"]).unwrap_or("").to_string();
                if reason.is_empty() || reason == "ContainerCreating" || reason == "PodInitializing"
                {
                    continue;
                }
                let container = obj::s(cs, &["name"]).unwrap_or("").to_string();
                let image_err = matches!(
                    reason.as_str(),
                    "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName" | "ErrImageNeverPull"
                );
                let image = if image_err {
                    // The spec image is what the node tried; status.image echoes it while waiting.
                    spec_image(p, &container).or_else(|| obj::s(cs, &["image"]).map(String::from))
                } else {
                    None
                };
                let term = obj::at(cs, &["lastState", "terminated"]);
                let crash = reason == "CrashLoopBackOff";
                let mut message = obj::s(w, &["message"]).unwrap_or("").to_string();
                if let Some(wm) = &warning
                    && (message.is_empty() || image_err)
                {
                    message = wm.clone();
                }
                let service_link = if crash {
                    self.service_link(p, &container)
                } else {
                    None
                };
                out.push(PodReason {
                    pod: pod.clone(),
                    container,
                    reason,
                    image,
                    last_exit_code: if crash {
                        term.and_then(|t| obj::i(t, &["exitCode"]))
                    } else {
                        None
                    },
                    last_exit_reason: if crash {
                        term.and_then(|t| obj::s(t, &["reason"])).map(String::from)
                    } else {
                        None
                    },
                    restarts: obj::i(cs, &["restartCount"]).filter(|_| crash),
                    last_exit_at: None,
                    service_link,
                    message,
                });
            }
        }
        if out.is_empty()
            && let Some(c) = obj::condition(p, "PodScheduled")
            && c.is_false()
        {
            out.push(PodReason {
                pod,
                container: String::new(),
                reason: if c.reason().is_empty() {
                    "Unschedulable".into()
                } else {
                    c.reason().to_string()
                },
                image: None,
                last_exit_code: None,
                last_exit_reason: None,
                restarts: None,
                last_exit_at: None,
                message: c.message().to_string(),
                service_link: None,
            });
        }
        out
    }

    /// A container running again after a failed run that ended less than
    /// [`CRASH_LOOP_RESET`] ago (`state.running` with `lastState.terminated.exitCode` != 0,
    /// its `finishedAt` within the window): a crash loop caught between two restarts, when
    /// the kubelet's status says Running and ready and kstatus reads the workload Current.
    /// Reason [`RECENT_RESTART`], with the last exit code and reason, the restart count, and
    /// a message saying how long it has run and when the last run ended (what
    /// `kubectl get pod` shows as `RESTARTS 3 (40s ago)`). `None` for any other container.
    fn recent_restart(&self, pod: &str, cs: &Value) -> Option<PodReason> {
        let started = obj::parse_time(obj::s(cs, &["state", "running", "startedAt"])?)?;
        let term = obj::at(cs, &["lastState", "terminated"])?;
        let code = obj::i(term, &["exitCode"]).filter(|c| *c != 0)?;
        let finished = obj::parse_time(obj::s(term, &["finishedAt"])?)?;
        let now = self.now();
        let ago = now.duration_since(finished);
        if ago > SignedDuration::try_from(CRASH_LOOP_RESET).ok()? {
            return None;
        }
        let restarts = obj::i(cs, &["restartCount"]);
        let secs = |d: SignedDuration| d.as_secs().max(0);
        Some(PodReason {
            pod: pod.to_string(),
            container: obj::s(cs, &["name"]).unwrap_or("").to_string(),
            reason: RECENT_RESTART.to_string(),
            image: None,
            last_exit_code: Some(code),
            last_exit_reason: obj::s(term, &["reason"]).map(String::from),
            restarts,
            last_exit_at: Some(finished),
            message: format!(
                "running for {}s, restarted {} time(s), the last run exited {code} ({}) {}s ago; the kubelet forgets a crash after {} min without one",
                secs(now.duration_since(started)),
                restarts.unwrap_or(0),
                obj::s(term, &["reason"]).unwrap_or("Error"),
                secs(ago),
                CRASH_LOOP_RESET.as_secs() / 60,
            ),
            service_link: None,
        })
    }

    /// Catalogue signature: an image reference that is a bare tag, or that has no registry
    /// host while the other images of the fleet use one (image-automation `:tag` marker on an
    /// `image:` field, failure catalogue section 2).
    fn signatures_for(&self, b: &BlockingObject) -> Vec<Signature> {
        let mut images: Vec<String> = b.pods.iter().filter_map(|p| p.image.clone()).collect();
        // Also the workload's own template (works without pods, e.g. a Deployment whose
        // ReplicaSet cannot create pods yet).
        let parts: Vec<&str> = b.object.split('/').collect();
        if parts.len() == 3
            && let Some(o) = self.idx.objects_by_id.get(&(
                parts[0].to_string(),
                parts[1].to_string(),
                parts[2].to_string(),
            ))
        {
            for c in template_containers(o) {
                if let Some(i) = obj::s(c, &["image"]) {
                    images.push(i.to_string());
                }
            }
        }
        images.sort();
        images.dedup();
        let hosts = self
            .hosts
            .get_or_init(|| registry_hosts(&self.idx.snap.objects));
        let mut out = Vec::new();
        for img in images {
            let id;
            let why;
            if markercheck::render::looks_like_bare_tag(&img) {
                id = "bare-tag-image";
                why = format!("image reference `{img}` is a bare tag");
            } else if registry_host(&img).is_none()
                && let Some((host, _)) = hosts.iter().max_by_key(|(_, n)| **n)
            {
                id = "image-without-registry";
                why = format!(
                    "image reference `{img}` has no registry host while the other images use `{host}`"
                );
            } else {
                continue;
            }
            out.push(Signature {
                id: id.into(),
                object: b.object.clone(),
                image: img,
                message: format!(
                    "{why}: looks like an image-automation `:tag` marker on an `image:` field; run kubectl markercheck"
                ),
            });
        }
        out
    }
}

/// What a HelmRelease in the wait set says, read as helm-controller v1.4 writes it
/// ([`cluster_loop::helm`]): (message, fix, progressing). `kstatus_message`: the message of
/// its kstatus as kustomize-controller reads it (the generic reader: a HelmRelease has no custom status
/// reader in kustomize-controller v1.9, so `Reconciling=True` is InProgress, `Stalled=True`
/// is Failed, which ends the health check early, and Ready=False/Unknown is InProgress).
/// `pods`: the failing pods of its release ([`Engine::release_pods`]).
///
/// - An action running with no failure on record and no failing pod: in progress, not stuck
///   (`progressing`); it ends by its own timeout at the latest.
/// - A running action whose pods fail, a failed attempt being retried
///   (`ProgressingWithRetry`), or retries exhausted (`Stalled=True` `RetriesExceeded`): the
///   failure quoted, its pods, and the fix. A reconcile of the Kustomization re-applies the
///   same HelmRelease and does not move it (helm-controller reacts to a new generation or a
///   request annotation on the HelmRelease itself, and a stalled one returned a terminal
///   error); what does: a change of its spec or chart in Git (a new generation, chart version
///   or values digest clears the failure count, internal/action/reset.go
///   `MustResetFailures`), or, when the cause went away outside Git (the image exists now),
///   a force request (`flux reconcile helmrelease --force`).
fn helm_release_reading(
    hr: &Value,
    kstatus_message: &str,
    pods: &[PodReason],
) -> (String, Option<String>, bool) {
    use cluster_loop::helm::{self, Phase};
    let f = helm::facts(hr);
    let (name, ns) = (obj::name(hr), obj::namespace(hr));
    let action = f.last_action.clone().unwrap_or_else(|| "install".into());
    let pod_line = pods
        .iter()
        .map(|p| match &p.image {
            Some(i) => format!("pod {}/{} {} ({i})", f.release_namespace, p.pod, p.reason),
            None => format!("pod {}/{} {}", f.release_namespace, p.pod, p.reason),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let image_fix = pods.iter().find_map(|p| {
        p.image.as_ref().map(|i| {
            format!(
                "the release's pods cannot pull {i} ({}): make that image pullable, or ",
                p.reason
            )
        })
    });
    let retries_left = if f.retries < 0 {
        "unlimited retries (spec.{action}.remediation.retries: -1)".to_string()
    } else {
        format!(
            "{} of {} attempt(s) failed (spec.{action}.remediation.retries: {})",
            f.failures,
            f.retries + 1,
            f.retries
        )
    };
    let git_fix = format!(
        "{}fix the chart or its values in Git{}: a change to HelmRelease {ns}/{name}'s spec (values, chart version) gives it a new generation, which clears the failure count, and helm-controller tries again as soon as the Kustomization applies it (helm-controller v1.4 MustResetFailures; a chart read from a GitRepository needs a new Chart.yaml version, HelmChart reconcileStrategy ChartVersion). A reconcile of the Kustomization alone re-applies the same HelmRelease and changes nothing",
        image_fix.clone().unwrap_or_default(),
        if image_fix.is_some() {
            " to use one that is"
        } else {
            ""
        }
    );
    let force = format!(
        "if the cause went away without a Git change: {} runs one Helm release action (install, or upgrade of the failed release) despite the exhausted retries ({} with the same token as reconcile.fluxcd.io/requestedAt; `--reset` writes {} and clears the failure count instead)",
        helm::HelmReleaseFacts::force_commands(name, ns),
        helm::FORCE_AT,
        helm::RESET_AT
    );
    let failure = f
        .failure_message()
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    let pods_said = if pod_line.is_empty() {
        String::new()
    } else {
        format!("; {pod_line}")
    };
    match &f.phase {
        Phase::Running {
            action: a,
            timeout,
            since,
        } if !f.has_failed() && pods.is_empty() => {
            let ends = since
                .as_deref()
                .and_then(obj::parse_time)
                .zip(parse_go_duration(timeout).ok())
                .and_then(|(s, d)| s.checked_add(secs(d.as_secs_f64())).ok());
            let what = if a.is_empty() {
                "helm-controller is reconciling it".to_string()
            } else {
                format!("helm-controller is running '{a}' (timeout {timeout})")
            };
            (
                format!(
                    "{what}{}: in progress, no failure seen, not stuck{}",
                    since
                        .as_deref()
                        .map(|s| format!(" since {s}"))
                        .unwrap_or_default(),
                    ends.map(|e| format!(
                        "; it ends by {} at the latest, and the health check passes if it succeeds",
                        short_time(e)
                    ))
                    .unwrap_or_default()
                ),
                None,
                true,
            )
        }
        Phase::Running {
            action: a, timeout, ..
        } if f.has_failed() => (
            format!(
                "helm-controller is running '{a}' (timeout {timeout}) after a failed {action}: {retries_left}{failure}{pods_said}; each new attempt fails the same way until the cause is fixed, then it stalls (RetriesExceeded)"
            ),
            Some(git_fix),
            false,
        ),
        Phase::Running {
            action: a, timeout, ..
        } => (
            format!(
                "helm-controller is running '{a}' (timeout {timeout}), but the release's pods are failing{pods_said}: the {a} fails at its timeout unless that changes{}",
                if f.retries == 0 {
                    String::new()
                } else {
                    format!(
                        "; helm-controller then retries (spec.{action}.remediation.retries: {}) and stalls when the retries run out",
                        f.retries
                    )
                }
            ),
            Some(git_fix),
            false,
        ),
        Phase::Retrying => (
            format!(
                "{action} failed and helm-controller retries (Reconciling ProgressingWithRetry): {retries_left}{failure}{pods_said}; each attempt fails the same way until the cause is fixed, then it stalls (RetriesExceeded)"
            ),
            Some(git_fix),
            false,
        ),
        Phase::Stalled { reason } if reason == "RetriesExceeded" => (
            format!(
                "helm-controller gave up (Stalled RetriesExceeded: {}){failure}{pods_said}; it does not try again until the HelmRelease's spec, chart or values change or a force/reset request is made, and kustomize-controller reads it as Failed, ending every health check on it early",
                f.stalled.as_ref().map(|c| c.message()).unwrap_or_default()
            ),
            Some(format!("{git_fix}; {force}")),
            false,
        ),
        Phase::Stalled { reason } => (
            format!(
                "Stalled ({reason}): {}{pods_said}",
                f.stalled.as_ref().map(|c| c.message()).unwrap_or_default()
            ),
            Some(format!(
                "fix what it says in Git (HelmRelease {ns}/{name}); helm-controller does not retry a stalled HelmRelease until its spec changes"
            )),
            false,
        ),
        _ => (format!("{kstatus_message}{pods_said}"), None, false),
    }
}

/// Registry hosts used by workload templates in `objects`, with counts (computed once per
/// [`Engine`]).
fn registry_hosts(objects: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for o in objects {
        for c in template_containers(o) {
            if let Some(h) = obj::s(c, &["image"]).and_then(registry_host) {
                *m.entry(h.to_string()).or_insert(0) += 1;
            }
        }
    }
    m
}

/// `kustomize.toolkit.fluxcd.io/reconcile: disabled` as a label or annotation (fluxcd/pkg ssa
/// `shouldSkipApply`): kustomize-controller skips the object and its health.
fn reconcile_disabled(o: &Value) -> bool {
    const K: &str = "kustomize.toolkit.fluxcd.io/reconcile";
    obj::annotation(o, K) == Some("disabled")
        || obj::s(o, &["metadata", "labels", K]) == Some("disabled")
}

/// The `flux resume` word for a Flux kind (flux2 cmd/flux resume_*.go).
fn flux_cli_kind(kind: &str) -> &'static str {
    match kind {
        "HelmRelease" => "helmrelease",
        "Kustomization" => "kustomization",
        "GitRepository" => "source git",
        "OCIRepository" => "source oci",
        "HelmRepository" => "source helm",
        "HelmChart" => "source chart",
        "Bucket" => "source bucket",
        "ImageRepository" => "image repository",
        "ImageUpdateAutomation" => "image update",
        "Receiver" => "receiver",
        "Alert" => "alert",
        _ => "<kind>",
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

/// Where a member of the wait set comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `status.inventory` (with `spec.wait: true`).
    Inventory,
    /// `spec.healthChecks` (without `spec.wait`).
    HealthChecks,
    /// Only named by the controller's health-check message.
    Message,
}

impl Origin {
    /// `inventory`, `healthChecks`, `message` (JSON `blocking[].origin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Inventory => "inventory",
            Origin::HealthChecks => "healthChecks",
            Origin::Message => "message",
        }
    }
}

/// One object kustomize-controller's health check waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitMember {
    /// API group (`apps`, `` for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace as given (empty: cluster-scoped, or a healthChecks entry without one).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// API version (inventory entry `v`, or the healthChecks entry's apiVersion); may be
    /// empty for old inventories.
    pub version: String,
    /// Where it comes from.
    pub origin: Origin,
}

/// The wait set exactly as kustomize-controller builds it (internal/controller/
/// kustomization_controller.go `checkHealth`): with `spec.wait: true`, the objects applied by
/// the run (its change set, which `status.inventory` holds while the check runs:
/// `<ns>_<name>_<group>_<Kind>` ids, fluxcd/pkg ssa `ObjMetadata` string form), and
/// `spec.healthChecks` is then not used; without `spec.wait`, `spec.healthChecks`
/// (`inventory.ReferenceToObjMetadataSet`: apiVersion defaults to `apps/v1`, the namespace is
/// taken as given, an empty one stays empty). The Kustomization itself is left out (the
/// controller's guard against waiting on itself); objects marked
/// `kustomize.toolkit.fluxcd.io/reconcile: disabled` are skipped by the caller once read.
pub fn wait_set(ks: &Value) -> Vec<WaitMember> {
    let mut out = Vec::new();
    let is_self = |kind: &str, ns: &str, name: &str| {
        kind == "Kustomization" && ns == obj::namespace(ks) && name == obj::name(ks)
    };
    if obj::b(ks, &["spec", "wait"]) {
        for e in obj::arr(ks, &["status", "inventory", "entries"]) {
            if let Some((group, kind, namespace, name)) =
                obj::s(e, &["id"]).and_then(parse_inventory_id)
                && !is_self(&kind, &namespace, &name)
            {
                out.push(WaitMember {
                    group,
                    kind,
                    namespace,
                    name,
                    version: obj::s(e, &["v"]).unwrap_or("").to_string(),
                    origin: Origin::Inventory,
                });
            }
        }
        return out;
    }
    for h in obj::arr(ks, &["spec", "healthChecks"]) {
        let av = obj::s(h, &["apiVersion"])
            .filter(|a| !a.is_empty())
            .unwrap_or("apps/v1");
        let (group, version) = av.split_once('/').unwrap_or(("", av));
        let m = WaitMember {
            group: group.to_string(),
            version: version.to_string(),
            kind: obj::s(h, &["kind"]).unwrap_or("").to_string(),
            namespace: obj::s(h, &["namespace"]).unwrap_or("").to_string(),
            name: obj::s(h, &["name"]).unwrap_or("").to_string(),
            origin: Origin::HealthChecks,
        };
        if !is_self(&m.kind, &m.namespace, &m.name) && !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// The `spec.healthCheckExprs` entry of `ks` for `o`'s apiVersion and kind (kustomize-controller
/// v1.5+, api/v1 `HealthCheckExprs []kustomize.CustomHealthCheck{APIVersion, Kind, Current,
/// InProgress, Failed}`: the controller reads objects of that apiVersion and kind with those CEL
/// expressions instead of kstatus).
pub fn health_check_expr<'k>(ks: &'k Value, o: &Value) -> Option<&'k Value> {
    let (av, kind) = (obj::s(o, &["apiVersion"])?, obj::kind(o));
    obj::arr(ks, &["spec", "healthCheckExprs"])
        .iter()
        .find(|e| obj::s(e, &["apiVersion"]) == Some(av) && obj::s(e, &["kind"]) == Some(kind))
}

/// [`wait_set`] as `(group, Kind, namespace, name)` tuples.
pub fn health_checked(ks: &Value) -> Vec<(String, String, String, String)> {
    wait_set(ks)
        .into_iter()
        .map(|m| (m.group, m.kind, m.namespace, m.name))
        .collect()
}

/// An inventory id `<namespace>_<name>_<group>_<Kind>` as (group, Kind, ns, name), by the
/// suite's one parser, [`cluster_loop::flux::ObjMetadata::parse`] (cli-utils'
/// `ParseObjMetadata`: `__` in the name stands for `:`, as RBAC names have it; this split on
/// every `_` before, and dropped `system:controller:x` objects from health checks and
/// inventories). `None` for an id cli-utils refuses.
pub fn parse_inventory_id(id: &str) -> Option<(String, String, String, String)> {
    let m = cluster_loop::flux::ObjMetadata::parse(id).ok()?;
    Some((m.group, m.kind, m.namespace, m.name))
}

fn default_group(kind: &str) -> &'static str {
    match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => "apps",
        "Job" | "CronJob" => "batch",
        "Kustomization" => "kustomize.toolkit.fluxcd.io",
        "HelmRelease" => "helm.toolkit.fluxcd.io",
        _ => "",
    }
}

fn request_facts(ks: &Value, now: Timestamp) -> Option<RequestFacts> {
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
fn last_duration_secs(ks: &Value) -> Option<f64> {
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

fn template_containers(o: &Value) -> Vec<&Value> {
    let mut v = Vec::new();
    let base: &[&str] = if obj::kind(o) == "CronJob" {
        &["spec", "jobTemplate", "spec", "template", "spec"]
    } else if obj::kind(o) == "Pod" {
        &["spec"]
    } else {
        &["spec", "template", "spec"]
    };
    for k in ["initContainers", "containers"] {
        let mut p: Vec<&str> = base.to_vec();
        p.push(k);
        v.extend(obj::arr(o, &p));
    }
    v
}

fn spec_image(p: &Value, container: &str) -> Option<String> {
    template_containers(p)
        .into_iter()
        .find(|c| obj::s(c, &["name"]) == Some(container))
        .and_then(|c| obj::s(c, &["image"]))
        .map(String::from)
}

/// The registry host of an image reference, following the docker reference grammar: the
/// first path component when it has a `.` or `:` or is `localhost`.
pub fn registry_host(image: &str) -> Option<&str> {
    let (first, _) = image.split_once('/')?;
    (first.contains('.') || first.contains(':') || first == "localhost").then_some(first)
}

fn secs(s: f64) -> SignedDuration {
    SignedDuration::from_secs_f64(s)
}

/// Where a Kustomization that is not yet Ready at its source's revision is heading, judged
/// from its diagnosis (with the dependsOn walk): the proof wait keeps waiting on
/// [`Heading::Moving`] and stops on [`Heading::Terminal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heading {
    /// Still moving toward Ready: a run in progress, a pending request, or
    /// `DependencyNotReady` while the blocking dependency is itself reconciling, ready at an
    /// older revision, or failed at an older revision than its source now has (kustomize-controller
    /// re-queues a dependent every `--requeue-dependency`, 30s by default, and re-runs a
    /// Kustomization when its source's artifact revision changes). The text says what it
    /// waits on.
    Moving(String),
    /// A state that does not end by itself: the target or a blocking dependency failed at
    /// the source's current revision, is stalled or suspended, is missing, or the dependsOn
    /// chain is a cycle. The text says which and why.
    Terminal(String),
}

fn failed_class(c: Class) -> bool {
    matches!(
        c,
        Class::HealthCheckFailed
            | Class::HealthCheckCanceled
            | Class::BuildFailed
            | Class::SourceNotReady
            | Class::ReconcileFailed
            | Class::Stalled
            | Class::Suspended
    )
}

/// A failure that the controller will retry by itself because the source moved on since the
/// failed attempt (not for stalled or suspended objects, which are never retried).
fn retried_on_new_revision(d: &Diagnosis) -> bool {
    !matches!(d.class, Class::Stalled | Class::Suspended)
        && d.source
            .as_ref()
            .is_some_and(|s| s.newer_revision_available)
}

/// A failed health check whose objects are all Current now: the check read a status they no
/// longer have, so the controller's next run (on a request, or by itself after
/// `spec.retryInterval`) passes. Seen on the real kube-controller-manager v1.36 and
/// kustomize-controller v1.9.6: a revert to an earlier Deployment template reuses the old
/// ReplicaSet, and the Deployment is written with its new `observedGeneration` and the old
/// `Progressing=False ProgressDeadlineExceeded` (deployment controller `syncRolloutStatus`:
/// `DeploymentTimedOut` keeps a timed-out condition while the old pods are scaled down), which
/// kstatus reads as Failed; the fail-fast health check (fluxcd/pkg ssa `WaitForSetWithContext`,
/// kustomize-controller v1.1+) ends at once with `failed early due to stalled resources`.
pub fn passes_on_retry(d: &Diagnosis) -> bool {
    d.class == Class::HealthCheckFailed && d.blocking.is_empty()
}

/// Judge `d` (a diagnosis from [`Engine::diagnose`]) for the proof wait. The caller checks
/// "Ready at the source's revision" first; this only tells moving from terminal.
pub fn heading(d: &Diagnosis) -> Heading {
    match d.class {
        Class::Healthy
        | Class::Reconciling
        | Class::RequestPending
        | Class::HealthCheckInFlight => Heading::Moving(d.summary.clone()),
        // kustomize-controller v1.8+ (CancelHealthCheckOnNewRevision): a canceled check is
        // requeued at once for the reconciliation that canceled it (kustomization_controller.go,
        // HealthCheckCanceled branch: `ctrl.Result{Requeue: true}`), so it never ends here.
        Class::HealthCheckCanceled => Heading::Moving(format!(
            "{}; the run that canceled it starts right away",
            d.summary
        )),
        // A controller scaled to 0 stays so until someone scales it up; one with replicas but
        // no ready pod yet (a restart, `--restart-controller`'s own) may come back by itself;
        // a pod whose process exits (CrashLoopBackOff) or whose image does not pull does not.
        // Moving only while every stopped one may come back. A ready pod that does not lead
        // comes back only when its Lease wait has an end (the holder is gone); another holder
        // that keeps renewing holds it for good (trial4: verify read it as a 5-minute wait).
        Class::ControllerNotRunning
            if d.stopped_controllers.iter().all(|s| match &s.leader {
                Some(_) => s.leader_wait(),
                None => {
                    !s.scaled_to_zero()
                        && s.pod
                            .as_ref()
                            .is_none_or(cluster_loop::flux::PodTrouble::may_come_back)
                }
            }) =>
        {
            Heading::Moving(format!("{}; waiting for it to be back", d.summary))
        }
        Class::WaitingOnDependencies => match &d.root_cause {
            None => {
                Heading::Moving("DependencyNotReady, but its dependencies are ready now".into())
            }
            Some(rc) => match rc.diagnosis.as_deref() {
                None => Heading::Terminal(rc.message.clone()),
                Some(dd)
                    if failed_class(dd.class)
                        && !retried_on_new_revision(dd)
                        && !passes_on_retry(dd) =>
                {
                    Heading::Terminal(format!(
                        "dependency {} is {}: {}",
                        rc.kustomization, dd.class, dd.summary
                    ))
                }
                Some(dd) => Heading::Moving(format!(
                    "waiting-on-dependencies: {} is {} ({})",
                    rc.kustomization, dd.class, dd.summary
                )),
            },
        },
        _ if passes_on_retry(d) => Heading::Moving(format!(
            "{}; every object the check waits on is Current now (it read a status they no longer have), so the next run passes: on a request, or by itself after spec.retryInterval",
            d.summary
        )),
        c if failed_class(c) && retried_on_new_revision(d) => Heading::Moving(format!(
            "{}; the source has a newer revision, which the controller runs next",
            d.summary
        )),
        _ => Heading::Terminal(format!("{}: {}", d.class, d.summary)),
    }
}

/// Whether `d` (class [`Class::WaitingOnDependencies`]) waits on a dependency that is merely
/// reconciling normally, has a reconcile request pending, or is ready but has not applied
/// the source's current revision yet (or on none any more): nothing to unstick, the wait ends
/// by itself. A dependency whose health check is in flight is not "merely reconciling": that
/// is the stuck case this tool exists for, and the plan names it (`fix-dependency`).
pub fn dependency_progressing(d: &Diagnosis) -> bool {
    d.class == Class::WaitingOnDependencies
        && match &d.root_cause {
            None => true,
            Some(rc) => rc.diagnosis.as_deref().is_some_and(dependency_moving),
        }
}

/// Whether a root cause's own diagnosis (the end of [`Engine::diagnose`]'s dependsOn walk)
/// is on its way to Ready by itself: reconciling, a request pending, ready at an older
/// revision, or itself still marked `DependencyNotReady` although its own dependencies are
/// ready now (the walk stops at the first Kustomization whose dependsOn is satisfied, so a
/// root in that class carries a stale verdict: kustomize-controller re-checks it every
/// `--requeue-dependency`, 30s by default, kustomization_controller.go `checkDependencies`
/// with `RequeueAfter: r.requeueDependency`). This makes the rule transitive: a chain
/// `apps -> platform-config -> platform` with platform Ready at the new revision is a
/// rollout in progress at every level.
fn dependency_moving(dd: &Diagnosis) -> bool {
    matches!(
        dd.class,
        Class::Healthy | Class::Reconciling | Class::RequestPending | Class::WaitingOnDependencies
    ) || waits_on_progress_only(dd)
}

/// Whether a failed run's message (`Ready` condition) is an I/O error of
/// kustomize-controller on its own per-run temp dir ([`CONTROLLER_TMP_IO`]), not a problem
/// of the repository's content: the next run makes a new temp dir, so a reconcile request,
/// not a Git fix, is what helps (seen on the fresh-user trial: `BuildFailed ... lstat
/// /tmp/kustomization-2167172500: no such file or directory`, Ready 12 s after a request).
pub fn controller_io_error(d: &Diagnosis) -> Option<String> {
    let m = d.ready.as_ref()?.message();
    CONTROLLER_TMP_IO.find(m).map(|x| x.as_str().to_string())
}

/// Whether `d` is a finding: a state a read-only `kubectl unstick ks/NAME` and `kubectl
/// unstick --all` report with exit 1. Not a finding (exit 0): healthy, reconciling, or held
/// at dependsOn by a dependency that is only progressing ([`dependency_progressing`]): the
/// failure catalogue (section 1) calls `dependency 'ns/x' is not ready` mid-rollout "the
/// dependsOn ordering working, not a fault". One rule for both views, so `--all` and
/// `ks/NAME` never disagree on the same snapshot. A Flux controller it needs that is not
/// running ([`Diagnosis::stopped_controllers`]) is a finding whatever the class
/// ([`Class::ControllerNotRunning`], or `suspended`): what it last applied stays, no change
/// in Git reaches it, and no lever works until the controller runs (`--help`: exit 1 when
/// kustomize- or source-controller is not running).
pub fn is_finding(d: &Diagnosis) -> bool {
    if !d.stopped_controllers.is_empty()
        && d.stopped_controllers
            .iter()
            .all(StoppedController::leader_wait)
    {
        // A pod that takes its Lease by a known time: a wait, not a finding.
        return false;
    }
    !d.stopped_controllers.is_empty()
        || d.overdue_secs.is_some()
        || !(matches!(d.class, Class::Healthy | Class::Reconciling)
            || dependency_progressing(d)
            || waits_on_progress_only(d))
}

/// Whether `d` is a health check in flight whose every blocking object is
/// [`BlockingObject::progressing`]: its own controller reports an action running within its
/// own timeout and no failure is visible (a HelmRelease installing: helm-controller v1.4
/// `Running 'install' action with timeout of 5m0s`; a Deployment rolling out), or with no
/// blocking object at all while every member of its wait set was read
/// ([`HealthCheck::wait_set_read`]): all Current, so the controller's next poll (every 5s,
/// fluxcd/pkg ssa `WaitForSetWithContext`) passes it. Waiting, not stuck: not a finding, and
/// the plan writes nothing ([`crate::lever::Lever::Wait`]).
pub fn waits_on_progress_only(d: &Diagnosis) -> bool {
    d.class == Class::HealthCheckInFlight
        && d.blocking.iter().all(|b| b.progressing)
        && (!d.blocking.is_empty() || d.health_check.as_ref().is_some_and(|h| h.wait_set_read))
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

/// A wait-set object that does not exist, its kind listed: (message, fix). A
/// `spec.healthChecks` entry names where an object of that name exists (`elsewhere`); an
/// inventory entry was deleted out of band.
fn not_found_reading(
    origin: Origin,
    kind: &str,
    ns: &str,
    name: &str,
    elsewhere: &[&str],
) -> (String, Option<String>) {
    match origin {
        Origin::HealthChecks => (
            format!(
                "spec.healthChecks names {kind} {}/{name}, which does not exist{}; kustomize-controller reads it as NotFound and the check holds until its timeout",
                if ns.is_empty() { "(no namespace)" } else { ns },
                if elsewhere.is_empty() {
                    String::new()
                } else {
                    format!(" (a {kind} {name} exists in namespace {})", elsewhere.join(", "))
                }
            ),
            Some(if elsewhere.is_empty() {
                "fix the entry in spec.healthChecks (Git), or create the object".to_string()
            } else {
                format!(
                    "set namespace: {} on this spec.healthChecks entry (Git)",
                    elsewhere[0]
                )
            }),
        ),
        _ => (
            format!(
                "{kind} {ns}/{name} is in the inventory but does not exist (deleted out of band?); the health check never ends for a missing object"
            ),
            Some("the next run applies it again: request a reconcile once the in-flight check has ended".to_string()),
        ),
    }
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
