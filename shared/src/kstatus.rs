//! kstatus: the status model Flux health checks use (Current / InProgress / Failed /
//! Terminating / NotFound / Unknown), computed from an object's JSON.
//!
//! Rules and messages follow `pkg/kstatus/status` of **fluxcd/cli-utils** (the fork Flux's
//! kustomize-controller and flux CLI link, via fluxcd/pkg/ssa), which is
//! kubernetes-sigs/cli-utils plus one extra step (the `Ready` condition fallback):
//!
//! 1. generic.go `checkGenericProperties`:
//!    - `metadata.deletionTimestamp` set -> **Terminating** `Resource scheduled for deletion`;
//!    - `metadata.generation` and `status.observedGeneration` both present and different ->
//!      **InProgress** `<Kind> generation is <g>, but latest observed generation is <o>`;
//!    - the first condition (in list order) that is `Reconciling=True` -> **InProgress** with
//!      its message, or `Stalled=True` -> **Failed** with its message.
//! 2. core.go built-in rules, keyed by `group/Kind`: Service, Pod, Secret, ConfigMap,
//!    PersistentVolumeClaim, apps (and extensions) StatefulSet / DaemonSet / Deployment /
//!    ReplicaSet, policy/PodDisruptionBudget, batch/CronJob, batch/Job,
//!    apiextensions.k8s.io/CustomResourceDefinition (messages reproduced verbatim).
//! 3. status.go `checkReadyCondition` (fluxcd fork only): `Ready=True` -> **Current**
//!    `Resource is Ready`; `Ready=False` or `Unknown` -> **InProgress** with its message.
//! 4. otherwise **Current** `Resource is current`.
//!
//! Note what kstatus does *not* do: a Flux object with `Ready=False` and no
//! `Stalled=True` is InProgress, never Failed, and a Deployment only turns Failed on
//! `Progressing` reason `ProgressDeadlineExceeded`. NotFound is produced by callers (the object
//! does not exist); Unknown when the object cannot be evaluated (cli-utils returns an error,
//! which its status readers report as Unknown).

use crate::conditions::Condition;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// kstatus status values (cli-utils `status.Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Status {
    /// Fully reconciled / ready.
    Current,
    /// Still progressing.
    InProgress,
    /// Failed (stalled, progress deadline exceeded, crash looping, job failed...).
    Failed,
    /// Being deleted.
    Terminating,
    /// Does not exist.
    NotFound,
    /// Could not be evaluated.
    Unknown,
}

impl Status {
    /// The cli-utils spelling (`Current`, `InProgress`, ...), as Flux prints it in
    /// `status: 'InProgress'`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Current => "Current",
            Status::InProgress => "InProgress",
            Status::Failed => "Failed",
            Status::Terminating => "Terminating",
            Status::NotFound => "NotFound",
            Status::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Result of [`compute`]: the status, a human message (cli-utils wording) and the reason of
/// the synthesized Reconciling/Stalled condition when there is one (e.g. `LessReady`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusResult {
    /// The status.
    pub status: Status,
    /// Message, e.g. `Ready: 0/1`, `Deployment is available. Replicas: 1`.
    pub message: String,
    /// Reason of the Reconciling (InProgress) or Stalled (Failed) condition kstatus would
    /// add, e.g. `LessReady`, `ProgressDeadlineExceeded`; `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl StatusResult {
    fn new(status: Status, message: impl Into<String>) -> Self {
        StatusResult {
            status,
            message: message.into(),
            reason: None,
        }
    }
    fn in_progress(reason: &str, message: impl Into<String>) -> Self {
        StatusResult {
            status: Status::InProgress,
            message: message.into(),
            reason: Some(reason.to_string()),
        }
    }
    fn failed(reason: &str, message: impl Into<String>) -> Self {
        StatusResult {
            status: Status::Failed,
            message: message.into(),
            reason: Some(reason.to_string()),
        }
    }
    /// A NotFound result (`Resource not found`), for callers whose get answered 404.
    pub fn not_found() -> Self {
        StatusResult::new(Status::NotFound, "Resource not found")
    }
    /// An Unknown result with `message`, for callers that cannot read the object at all (its
    /// kind is not served: a missing CRD).
    pub fn unknown(message: impl Into<String>) -> Self {
        StatusResult::new(Status::Unknown, message)
    }
}

/// Compute the kstatus of an object at the current time. See the module docs for the rules.
pub fn compute(obj: &Value) -> StatusResult {
    compute_at(obj, jiff::Timestamp::now())
}

/// [`compute`] with an explicit "now" (used only by the Pod unschedulable 15s window).
pub fn compute_at(obj: &Value, now: jiff::Timestamp) -> StatusResult {
    if !obj.is_object() {
        return StatusResult::new(Status::Unknown, "object is not a JSON object");
    }
    let conds = match conditions(obj) {
        Ok(c) => c,
        Err(e) => return StatusResult::new(Status::Unknown, e),
    };
    if let Some(r) = generic(obj, &conds) {
        return r;
    }
    let kind = str_field(obj, "/kind").unwrap_or("");
    let group = str_field(obj, "/apiVersion")
        .and_then(|av| av.split_once('/').map(|(g, _)| g))
        .unwrap_or("");
    let r = match (group, kind) {
        ("", "Service") => Some(service(obj)),
        ("", "Pod") => Some(pod(obj, &conds, now)),
        ("", "Secret") | ("", "ConfigMap") | ("batch", "CronJob") => Some(StatusResult::new(
            Status::Current,
            "Resource is always ready",
        )),
        ("", "PersistentVolumeClaim") => Some(pvc(obj)),
        ("apps", "StatefulSet") => Some(statefulset(obj)),
        ("apps" | "extensions", "DaemonSet") => Some(daemonset(obj)),
        ("apps" | "extensions", "Deployment") => Some(deployment(obj, &conds)),
        ("apps" | "extensions", "ReplicaSet") => Some(replicaset(obj, &conds)),
        ("policy", "PodDisruptionBudget") => Some(StatusResult::new(
            Status::Current,
            "AllowedDisruptions has been computed.",
        )),
        ("batch", "Job") => Some(job(obj, &conds)),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Some(crd(&conds)),
        _ => None,
    };
    if let Some(r) = r {
        return r;
    }
    if let Some(r) = ready_condition(&conds) {
        return r;
    }
    StatusResult::new(Status::Current, "Resource is current")
}

/// Which kustomize-controller reads the health check: what changes the reading of a kind
/// from plain kstatus ([`compute_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HealthReader {
    /// kustomize-controller v1.8.0+ (fluxcd/pkg runtime v0.93.0+, Flux 2.8): a Job with
    /// `spec.suspend: true` is Current (`Job is suspended`). Older versions read a suspended
    /// Job by its conditions and start time like any other.
    pub suspended_job_is_current: bool,
}

impl HealthReader {
    /// The reader of kustomize-controller `major.minor` (`None`: version unknown, read as the
    /// newest).
    pub fn for_version(version: Option<(u64, u64)>) -> Self {
        HealthReader {
            suspended_job_is_current: version.is_none_or(|v| v >= (1, 8)),
        }
    }
}

/// The health of an object as kustomize-controller's health check reads it (`spec.wait` /
/// `spec.healthChecks`). Where it differs from plain kstatus ([`compute_at`]), each kind cites
/// its source:
///
/// - **batch/Job**: kustomize-controller registers fluxcd/pkg `runtime/statusreaders`
///   `NewCustomJobStatusReader` ahead of the default readers (internal/controller/
///   kustomization_controller.go `getClientAndPoller`; in main.go since v0.23.0, "add custom
///   statusreader for jobs"). Its `jobConditions`: `spec.suspend: true` -> Current `Job is
///   suspended` (runtime v0.93.0+, kustomize-controller v1.8.0+, see [`HealthReader`]);
///   `Complete=True` -> Current `Job Completed. succeeded: S/C`; `Failed=True` -> Failed
///   `Job Failed. failed: F/C`; no `status.startTime` -> InProgress `Job not started. active:
///   0/P`; otherwise InProgress `Job in progress. success:S, active: A, failed: F`. A started
///   Job is therefore InProgress until it completes (plain kstatus calls it Current), and
///   the reader runs without the generic checks (cli-utils polling/statusreaders
///   `genericStatusReader` calls only the status function), so a Job's deletionTimestamp or
///   Reconciling condition does not change its reading.
/// - **Custom resources with a `Ready` condition** (HelmRelease, Kustomization, ...): the
///   fluxcd/cli-utils fork's `status.Compute` ends with `checkReadyCondition`
///   (pkg/kstatus/status/status.go): Ready=False/Unknown -> InProgress, where upstream
///   kubernetes-sigs/cli-utils says Current. [`compute_at`] already follows the fork.
/// - **A kind the cluster does not serve** (missing CRD): the status poller cannot map it and
///   reports Unknown (cli-utils polling/statusreaders common.go `errIdentifierToResourceStatus`);
///   an absent object is NotFound. Callers produce both ([`StatusResult::not_found`],
///   [`StatusResult::unknown`]): they are never Current, so the check holds until its timeout.
/// - `spec.healthCheckExprs` (CEL, kustomize-controller v1.5+) replaces the reading of the
///   kinds it names; it is not evaluated here (callers say so).
///
/// Everything else is [`compute_at`].
pub fn compute_health_at(obj: &Value, now: jiff::Timestamp, reader: HealthReader) -> StatusResult {
    let kind = str_field(obj, "/kind").unwrap_or("");
    let group = str_field(obj, "/apiVersion")
        .and_then(|av| av.split_once('/').map(|(g, _)| g))
        .unwrap_or("");
    if (group, kind) == ("batch", "Job") {
        return flux_job(obj, reader);
    }
    compute_at(obj, now)
}

/// fluxcd/pkg runtime/statusreaders/job.go `jobConditions` (see [`compute_health_at`]).
fn flux_job(obj: &Value, reader: HealthReader) -> StatusResult {
    if reader.suspended_job_is_current
        && obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
    {
        return StatusResult::new(Status::Current, "Job is suspended");
    }
    let conds = match conditions(obj) {
        Ok(c) => c,
        Err(e) => return StatusResult::new(Status::Unknown, e),
    };
    let parallelism = int_field(obj, "/spec/parallelism", 1);
    let completions = int_field(obj, "/spec/completions", parallelism);
    let active = int_field(obj, "/status/active", 0);
    let succeeded = int_field(obj, "/status/succeeded", 0);
    let failed = int_field(obj, "/status/failed", 0);
    for c in &conds {
        match c.type_.as_str() {
            "Complete" if c.status == "True" => {
                return StatusResult::new(
                    Status::Current,
                    format!("Job Completed. succeeded: {succeeded}/{completions}"),
                );
            }
            "Failed" if c.status == "True" => {
                return StatusResult::failed(
                    "JobFailed",
                    format!("Job Failed. failed: {failed}/{completions}"),
                );
            }
            _ => {}
        }
    }
    if str_field(obj, "/status/startTime").unwrap_or("").is_empty() {
        return StatusResult::in_progress(
            "JobNotStarted",
            format!("Job not started. active: 0/{parallelism}"),
        );
    }
    StatusResult::in_progress(
        "JobInProgress",
        format!("Job in progress. success:{succeeded}, active: {active}, failed: {failed}"),
    )
}

fn str_field<'a>(obj: &'a Value, ptr: &str) -> Option<&'a str> {
    obj.pointer(ptr).and_then(Value::as_str)
}

/// cli-utils `GetIntField`: the value when it is an integer, else `default`.
fn int_field(obj: &Value, ptr: &str, default: i64) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(default)
}

/// cli-utils `GetObjectWithConditions`: `status.conditions` must decode, else an error.
fn conditions(obj: &Value) -> Result<Vec<Condition>, String> {
    match obj.pointer("/status/conditions") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value::<Vec<Condition>>(v.clone())
            .map_err(|e| format!("cannot read status.conditions: {e}")),
    }
}

fn find<'a>(conds: &'a [Condition], t: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == t)
}

fn generic(obj: &Value, conds: &[Condition]) -> Option<StatusResult> {
    if str_field(obj, "/metadata/deletionTimestamp").is_some_and(|s| !s.is_empty()) {
        return Some(StatusResult::new(
            Status::Terminating,
            "Resource scheduled for deletion",
        ));
    }
    if let (Some(g), Some(o)) = (
        obj.pointer("/metadata/generation").and_then(Value::as_i64),
        obj.pointer("/status/observedGeneration")
            .and_then(Value::as_i64),
    ) && g != o
    {
        let kind = str_field(obj, "/kind").unwrap_or("");
        return Some(StatusResult::in_progress(
            "LatestGenerationNotObserved",
            format!("{kind} generation is {g}, but latest observed generation is {o}"),
        ));
    }
    for c in conds {
        if c.type_ == "Reconciling" && c.status == "True" {
            return Some(StatusResult::in_progress(c.reason(), c.message()));
        }
        if c.type_ == "Stalled" && c.status == "True" {
            return Some(StatusResult::failed(c.reason(), c.message()));
        }
    }
    None
}

fn ready_condition(conds: &[Condition]) -> Option<StatusResult> {
    for c in conds.iter().filter(|c| c.type_ == "Ready") {
        match c.status.as_str() {
            "True" => return Some(StatusResult::new(Status::Current, "Resource is Ready")),
            "False" | "Unknown" => return Some(StatusResult::in_progress(c.reason(), c.message())),
            _ => {}
        }
    }
    None
}

fn statefulset(obj: &Value) -> StatusResult {
    if str_field(obj, "/spec/updateStrategy/type") == Some("OnDelete") {
        return StatusResult::new(
            Status::Current,
            "StatefulSet is using the ondelete update strategy",
        );
    }
    let spec = int_field(obj, "/spec/replicas", 1);
    let ready = int_field(obj, "/status/readyReplicas", 0);
    let current = int_field(obj, "/status/currentReplicas", 0);
    let updated = int_field(obj, "/status/updatedReplicas", 0);
    let status = int_field(obj, "/status/replicas", 0);
    let partition = int_field(obj, "/spec/updateStrategy/rollingUpdate/partition", -1);
    if spec > status {
        return StatusResult::in_progress("LessReplicas", format!("Replicas: {status}/{spec}"));
    }
    if spec > ready {
        return StatusResult::in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if status > spec {
        return StatusResult::in_progress(
            "ExtraPods",
            format!("Pending termination: {}", status - spec),
        );
    }
    if partition != -1 {
        if updated < spec - partition {
            return StatusResult::in_progress(
                "PartitionRollout",
                format!("updated: {updated}/{}", spec - partition),
            );
        }
        return StatusResult::new(
            Status::Current,
            format!("Partition rollout complete. updated: {updated}"),
        );
    }
    if spec > current {
        return StatusResult::in_progress("LessCurrent", format!("current: {current}/{spec}"));
    }
    if str_field(obj, "/status/currentRevision").unwrap_or("")
        != str_field(obj, "/status/updateRevision").unwrap_or("")
    {
        return StatusResult::in_progress(
            "RevisionMismatch",
            "Waiting for updated revision to match current",
        );
    }
    StatusResult::new(
        Status::Current,
        format!("All replicas scheduled as expected. Replicas: {status}"),
    )
}

fn deployment(obj: &Value, conds: &[Condition]) -> StatusResult {
    const MAX_INT32: i64 = i32::MAX as i64;
    let mut progressing = int_field(obj, "/spec/progressDeadlineSeconds", MAX_INT32) == MAX_INT32;
    let mut available = false;
    for c in conds {
        match c.type_.as_str() {
            "Progressing" => {
                if c.reason() == "ProgressDeadlineExceeded" {
                    return StatusResult {
                        status: Status::Failed,
                        message: "Progress deadline exceeded".into(),
                        reason: Some(c.reason().to_string()),
                    };
                }
                if c.status == "True" && c.reason() == "NewReplicaSetAvailable" {
                    progressing = true;
                }
            }
            "Available" if c.status == "True" => available = true,
            _ => {}
        }
    }
    let spec = int_field(obj, "/spec/replicas", 1);
    let status = int_field(obj, "/status/replicas", 0);
    let updated = int_field(obj, "/status/updatedReplicas", 0);
    let ready = int_field(obj, "/status/readyReplicas", 0);
    let avail = int_field(obj, "/status/availableReplicas", 0);
    if spec > status {
        return StatusResult::in_progress("LessReplicas", format!("Replicas: {status}/{spec}"));
    }
    if spec > updated {
        return StatusResult::in_progress("LessUpdated", format!("Updated: {updated}/{spec}"));
    }
    if status > spec {
        return StatusResult::in_progress(
            "ExtraPods",
            format!("Pending termination: {}", status - spec),
        );
    }
    if updated > avail {
        return StatusResult::in_progress("LessAvailable", format!("Available: {avail}/{updated}"));
    }
    if spec > ready {
        return StatusResult::in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if !progressing {
        return StatusResult::in_progress("ReplicaSetNotAvailable", "ReplicaSet not Available");
    }
    if !available {
        return StatusResult::in_progress("DeploymentNotAvailable", "Deployment not Available");
    }
    StatusResult::new(
        Status::Current,
        format!("Deployment is available. Replicas: {status}"),
    )
}

fn replicaset(obj: &Value, conds: &[Condition]) -> StatusResult {
    if conds
        .iter()
        .any(|c| c.type_ == "ReplicaFailure" && c.status == "True")
    {
        return StatusResult::in_progress(
            "ReplicaFailure",
            "Replica Failure condition. Check Pods",
        );
    }
    let spec = int_field(obj, "/spec/replicas", 1);
    let status = int_field(obj, "/status/replicas", 0);
    let ready = int_field(obj, "/status/readyReplicas", 0);
    let avail = int_field(obj, "/status/availableReplicas", 0);
    let labelled = int_field(obj, "/status/fullyLabeledReplicas", 0);
    if spec > labelled {
        return StatusResult::in_progress("LessLabelled", format!("Labelled: {labelled}/{spec}"));
    }
    if spec > avail {
        return StatusResult::in_progress("LessAvailable", format!("Available: {avail}/{spec}"));
    }
    if spec > ready {
        return StatusResult::in_progress("LessReady", format!("Ready: {ready}/{spec}"));
    }
    if status > spec {
        return StatusResult::in_progress(
            "ExtraPods",
            format!("Pending termination: {}", status - spec),
        );
    }
    StatusResult::new(
        Status::Current,
        format!("ReplicaSet is available. Replicas: {status}"),
    )
}

fn daemonset(obj: &Value) -> StatusResult {
    let kind = str_field(obj, "/kind").unwrap_or("");
    // checkGenerationSet
    if obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .is_none()
    {
        return StatusResult::in_progress(
            "NoGeneration",
            format!("{kind} metadata.generation not found"),
        );
    }
    if obj
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .is_none()
    {
        return StatusResult::in_progress(
            "NoObservedGeneration",
            format!("{kind} status.observedGeneration not found"),
        );
    }
    let desired = int_field(obj, "/status/desiredNumberScheduled", -1);
    let current = int_field(obj, "/status/currentNumberScheduled", 0);
    let updated = int_field(obj, "/status/updatedNumberScheduled", 0);
    let avail = int_field(obj, "/status/numberAvailable", 0);
    let ready = int_field(obj, "/status/numberReady", 0);
    if desired == -1 {
        return StatusResult::in_progress(
            "NoDesiredNumber",
            "Missing .status.desiredNumberScheduled",
        );
    }
    if desired > current {
        return StatusResult::in_progress("LessCurrent", format!("Current: {current}/{desired}"));
    }
    if desired > updated {
        return StatusResult::in_progress("LessUpdated", format!("Updated: {updated}/{desired}"));
    }
    if desired > avail {
        return StatusResult::in_progress("LessAvailable", format!("Available: {avail}/{desired}"));
    }
    if desired > ready {
        return StatusResult::in_progress("LessReady", format!("Ready: {ready}/{desired}"));
    }
    StatusResult::new(
        Status::Current,
        format!("All replicas scheduled as expected. Replicas: {desired}"),
    )
}

fn pvc(obj: &Value) -> StatusResult {
    let phase = str_field(obj, "/status/phase").unwrap_or("unknown");
    if phase != "Bound" {
        return StatusResult::in_progress("NotBound", format!("PVC is not Bound. phase: {phase}"));
    }
    StatusResult::new(Status::Current, "PVC is Bound")
}

/// cli-utils `ScheduleWindow`: how long a Pod may be Unschedulable before it counts as Failed.
pub const SCHEDULE_WINDOW: std::time::Duration = std::time::Duration::from_secs(15);

fn pod(obj: &Value, conds: &[Condition], now: jiff::Timestamp) -> StatusResult {
    match str_field(obj, "/status/phase").unwrap_or("") {
        "Succeeded" => StatusResult::new(Status::Current, "Pod has completed successfully"),
        "Failed" => StatusResult::new(Status::Current, "Pod has completed, but not successfully"),
        "Running" => {
            if find(conds, "Ready").is_some_and(|c| c.status == "True") {
                return StatusResult::new(Status::Current, "Pod is Ready");
            }
            let crashing: Vec<&str> = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|cs| {
                            cs.pointer("/state/waiting/reason").and_then(Value::as_str)
                                == Some("CrashLoopBackOff")
                        })
                        .filter_map(|cs| cs.get("name").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            if !crashing.is_empty() {
                return StatusResult::failed(
                    "ContainerCrashLooping",
                    format!("Containers in CrashLoop state: {}", crashing.join(",")),
                );
            }
            StatusResult::in_progress("PodRunningNotReady", "Pod is running but is not Ready")
        }
        "Pending" => {
            let unschedulable = conds.iter().any(|c| {
                c.type_ == "PodScheduled" && c.status == "False" && c.reason() == "Unschedulable"
            });
            if unschedulable {
                let created: Option<jiff::Timestamp> =
                    str_field(obj, "/metadata/creationTimestamp").and_then(|s| s.parse().ok());
                // Go: time.Now().Add(-ScheduleWindow).Before(creationTimestamp); a missing
                // timestamp is the zero time, i.e. long ago.
                let recent = created.is_some_and(|c| {
                    now.checked_sub(jiff::SignedDuration::from_secs(15))
                        .is_ok_and(|t| t < c)
                });
                if recent {
                    return StatusResult::in_progress(
                        "PodNotScheduled",
                        "Pod has not been scheduled",
                    );
                }
                return StatusResult::failed("PodUnschedulable", "Pod could not be scheduled");
            }
            StatusResult::in_progress("PodPending", "Pod is in the Pending phase")
        }
        "" => StatusResult::in_progress("PodNotObserved", "Pod phase not available"),
        other => StatusResult::new(Status::Unknown, format!("unknown phase {other}")),
    }
}

fn job(obj: &Value, conds: &[Condition]) -> StatusResult {
    let parallelism = int_field(obj, "/spec/parallelism", 1);
    let completions = int_field(obj, "/spec/completions", parallelism);
    let succeeded = int_field(obj, "/status/succeeded", 0);
    let active = int_field(obj, "/status/active", 0);
    let failed = int_field(obj, "/status/failed", 0);
    for c in conds {
        match c.type_.as_str() {
            "Complete" if c.status == "True" => {
                return StatusResult::new(
                    Status::Current,
                    format!("Job Completed. succeeded: {succeeded}/{completions}"),
                );
            }
            "Failed" if c.status == "True" => {
                return StatusResult::failed(
                    "JobFailed",
                    format!("Job Failed. failed: {failed}/{completions}"),
                );
            }
            "Suspended" if c.status == "True" => {
                return StatusResult::new(Status::Current, "Job is suspended");
            }
            _ => {}
        }
    }
    if str_field(obj, "/status/startTime").unwrap_or("").is_empty() {
        return StatusResult::in_progress("JobNotStarted", "Job not started");
    }
    StatusResult::new(
        Status::Current,
        format!("Job in progress. success:{succeeded}, active: {active}, failed: {failed}"),
    )
}

fn service(obj: &Value) -> StatusResult {
    let ty = str_field(obj, "/spec/type").unwrap_or("ClusterIP");
    let cluster_ip = str_field(obj, "/spec/clusterIP").unwrap_or("");
    if ty == "LoadBalancer" && cluster_ip.is_empty() {
        return StatusResult::in_progress(
            "NoIPAssigned",
            "ClusterIP not set. Service type: LoadBalancer",
        );
    }
    StatusResult::new(Status::Current, "Service is ready")
}

fn crd(conds: &[Condition]) -> StatusResult {
    for c in conds {
        if c.type_ == "NamesAccepted" && c.status == "False" {
            return StatusResult::failed(c.reason(), c.message());
        }
        if c.type_ == "Established" {
            if c.status == "False" && c.reason() != "Installing" {
                return StatusResult::failed(c.reason(), c.message());
            }
            if c.status == "True" {
                return StatusResult::new(Status::Current, "CRD is established");
            }
        }
    }
    StatusResult::in_progress("Installing", "Install in progress")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn st(v: Value) -> (Status, String) {
        let r = compute(&v);
        (r.status, r.message)
    }

    fn s(status: Status, m: &str) -> (Status, String) {
        (status, m.to_string())
    }

    #[test]
    fn generic_rules() {
        assert_eq!(
            st(
                json!({"kind": "Kustomization", "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
            ),
            s(Status::Terminating, "Resource scheduled for deletion")
        );
        assert_eq!(
            st(
                json!({"kind": "Kustomization", "metadata": {"generation": 3}, "status": {"observedGeneration": 2}})
            ),
            s(
                Status::InProgress,
                "Kustomization generation is 3, but latest observed generation is 2"
            )
        );
        // CRD default observedGeneration -1 also differs.
        assert_eq!(
            compute(&json!({"kind": "GitRepository", "metadata": {"generation": 1}, "status": {"observedGeneration": -1}})).status,
            Status::InProgress
        );
        // No observedGeneration: the check is skipped.
        assert_eq!(
            st(json!({"kind": "Foo", "apiVersion": "x.io/v1", "metadata": {"generation": 3}})),
            s(Status::Current, "Resource is current")
        );
        let reconciling = json!({"kind": "Kustomization", "status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress"},
            {"type": "Reconciling", "status": "True", "reason": "Progressing",
             "message": "Running health checks for revision main@sha1:abc with a timeout of 5m0s"}]}});
        let r = compute(&reconciling);
        assert_eq!(r.status, Status::InProgress);
        assert_eq!(
            r.message,
            "Running health checks for revision main@sha1:abc with a timeout of 5m0s"
        );
        assert_eq!(r.reason.as_deref(), Some("Progressing"));
        let stalled = json!({"kind": "ImageUpdateAutomation", "status": {"conditions": [
            {"type": "Stalled", "status": "True", "reason": "RemovedTemplateField",
             "message": "template uses removed '.Updated' field. Please use '.Changed' instead."}]}});
        let r = compute(&stalled);
        assert_eq!(r.status, Status::Failed);
        assert_eq!(r.reason.as_deref(), Some("RemovedTemplateField"));
    }

    #[test]
    fn ready_condition_fallback() {
        let ready = |status: &str| {
            json!({"kind": "Kustomization", "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                   "status": {"conditions": [{"type": "Ready", "status": status,
                   "reason": "HealthCheckFailed", "message": "health check failed after 5m0.012s"}]}})
        };
        assert_eq!(st(ready("True")), s(Status::Current, "Resource is Ready"));
        assert_eq!(
            st(ready("False")),
            s(Status::InProgress, "health check failed after 5m0.012s")
        );
        assert_eq!(compute(&ready("Unknown")).status, Status::InProgress);
        assert_eq!(
            st(ready("Maybe")),
            s(Status::Current, "Resource is current")
        );
    }

    fn deploy(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"generation": 1},
               "spec": spec, "status": status})
    }

    #[test]
    fn deployment_rules() {
        let ok_conds = json!([
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]);
        let full = |extra: Value| {
            let mut st = json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                                "readyReplicas": 2, "availableReplicas": 2, "conditions": ok_conds.clone()});
            for (k, v) in extra.as_object().unwrap() {
                st[k] = v.clone();
            }
            deploy(json!({"replicas": 2, "progressDeadlineSeconds": 600}), st)
        };
        assert_eq!(
            st(full(json!({}))),
            s(Status::Current, "Deployment is available. Replicas: 2")
        );
        assert_eq!(
            st(full(json!({"replicas": 1}))),
            s(Status::InProgress, "Replicas: 1/2")
        );
        assert_eq!(
            st(full(json!({"updatedReplicas": 1}))),
            s(Status::InProgress, "Updated: 1/2")
        );
        assert_eq!(
            st(full(json!({"replicas": 3}))),
            s(Status::InProgress, "Pending termination: 1")
        );
        assert_eq!(
            st(full(json!({"availableReplicas": 1}))),
            s(Status::InProgress, "Available: 1/2")
        );
        assert_eq!(
            st(full(json!({"readyReplicas": 1}))),
            s(Status::InProgress, "Ready: 1/2")
        );
        assert_eq!(
            st(full(
                json!({"conditions": [{"type": "Available", "status": "True"}]})
            )),
            s(Status::InProgress, "ReplicaSet not Available")
        );
        assert_eq!(
            st(full(
                json!({"conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]})
            )),
            s(Status::InProgress, "Deployment not Available")
        );
        let r = compute(&full(json!({"readyReplicas": 0, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": "ReplicaSet \"podinfo-1\" has timed out progressing."}]})));
        assert_eq!(
            (r.status, r.message.as_str()),
            (Status::Failed, "Progress deadline exceeded")
        );
        assert_eq!(r.reason.as_deref(), Some("ProgressDeadlineExceeded"));
        // Without progressDeadlineSeconds the controller sets no Progressing: counts as progressing.
        let d = deploy(
            json!({}),
            json!({"replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
            "availableReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]}),
        );
        assert_eq!(compute(&d).status, Status::Current);
        // generation not observed wins over everything kind-specific
        let mut d2 = full(json!({}));
        d2["metadata"]["generation"] = json!(2);
        assert_eq!(compute(&d2).status, Status::InProgress);
    }

    #[test]
    fn statefulset_rules() {
        let sts = |spec: Value, status: Value| json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": spec, "status": status});
        let good = json!({"replicas": 3, "readyReplicas": 3, "currentReplicas": 3, "updatedReplicas": 3,
                          "currentRevision": "r1", "updateRevision": "r1"});
        assert_eq!(
            st(sts(json!({"replicas": 3}), good.clone())),
            s(
                Status::Current,
                "All replicas scheduled as expected. Replicas: 3"
            )
        );
        assert_eq!(
            st(sts(
                json!({"updateStrategy": {"type": "OnDelete"}}),
                json!({})
            )),
            s(
                Status::Current,
                "StatefulSet is using the ondelete update strategy"
            )
        );
        assert_eq!(
            st(sts(json!({"replicas": 3}), json!({"replicas": 2}))),
            s(Status::InProgress, "Replicas: 2/3")
        );
        assert_eq!(
            st(sts(
                json!({"replicas": 3}),
                json!({"replicas": 3, "readyReplicas": 1})
            )),
            s(Status::InProgress, "Ready: 1/3")
        );
        assert_eq!(
            st(sts(
                json!({"replicas": 1}),
                json!({"replicas": 3, "readyReplicas": 3})
            )),
            s(Status::InProgress, "Pending termination: 2")
        );
        assert_eq!(
            st(sts(
                json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 1}}}),
                json!({"replicas": 3, "readyReplicas": 3, "updatedReplicas": 1})
            )),
            s(Status::InProgress, "updated: 1/2")
        );
        assert_eq!(
            st(sts(
                json!({"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 1}}}),
                json!({"replicas": 3, "readyReplicas": 3, "updatedReplicas": 2})
            )),
            s(Status::Current, "Partition rollout complete. updated: 2")
        );
        assert_eq!(
            st(sts(
                json!({"replicas": 3}),
                json!({"replicas": 3, "readyReplicas": 3, "currentReplicas": 2})
            )),
            s(Status::InProgress, "current: 2/3")
        );
        let mut rev = good.clone();
        rev["updateRevision"] = json!("r2");
        assert_eq!(
            st(sts(json!({"replicas": 3}), rev)),
            s(
                Status::InProgress,
                "Waiting for updated revision to match current"
            )
        );
    }

    #[test]
    fn daemonset_rules() {
        let ds = |meta: Value, status: Value| json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "status": status});
        assert_eq!(
            st(ds(json!({}), json!({}))),
            s(
                Status::InProgress,
                "DaemonSet metadata.generation not found"
            )
        );
        assert_eq!(
            st(ds(json!({"generation": 1}), json!({}))),
            s(
                Status::InProgress,
                "DaemonSet status.observedGeneration not found"
            )
        );
        let g = json!({"generation": 1});
        let base = |extra: Value| {
            let mut v = json!({"observedGeneration": 1, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
                               "updatedNumberScheduled": 2, "numberAvailable": 2, "numberReady": 2});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        assert_eq!(
            st(ds(g.clone(), json!({"observedGeneration": 1}))),
            s(Status::InProgress, "Missing .status.desiredNumberScheduled")
        );
        assert_eq!(
            st(ds(g.clone(), base(json!({"currentNumberScheduled": 1})))),
            s(Status::InProgress, "Current: 1/2")
        );
        assert_eq!(
            st(ds(g.clone(), base(json!({"updatedNumberScheduled": 1})))),
            s(Status::InProgress, "Updated: 1/2")
        );
        assert_eq!(
            st(ds(g.clone(), base(json!({"numberAvailable": 1})))),
            s(Status::InProgress, "Available: 1/2")
        );
        assert_eq!(
            st(ds(g.clone(), base(json!({"numberReady": 1})))),
            s(Status::InProgress, "Ready: 1/2")
        );
        assert_eq!(
            st(ds(g, base(json!({})))),
            s(
                Status::Current,
                "All replicas scheduled as expected. Replicas: 2"
            )
        );
    }

    #[test]
    fn replicaset_rules() {
        let rs = |status: Value| json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "spec": {"replicas": 2}, "status": status});
        assert_eq!(
            st(rs(
                json!({"conditions": [{"type": "ReplicaFailure", "status": "True"}]})
            )),
            s(Status::InProgress, "Replica Failure condition. Check Pods")
        );
        assert_eq!(
            st(rs(json!({"fullyLabeledReplicas": 1}))),
            s(Status::InProgress, "Labelled: 1/2")
        );
        assert_eq!(
            st(rs(
                json!({"fullyLabeledReplicas": 2, "availableReplicas": 1})
            )),
            s(Status::InProgress, "Available: 1/2")
        );
        assert_eq!(
            st(rs(
                json!({"fullyLabeledReplicas": 2, "availableReplicas": 2, "readyReplicas": 1})
            )),
            s(Status::InProgress, "Ready: 1/2")
        );
        assert_eq!(
            st(rs(
                json!({"fullyLabeledReplicas": 2, "availableReplicas": 2, "readyReplicas": 2, "replicas": 3})
            )),
            s(Status::InProgress, "Pending termination: 1")
        );
        assert_eq!(
            st(rs(
                json!({"fullyLabeledReplicas": 2, "availableReplicas": 2, "readyReplicas": 2, "replicas": 2})
            )),
            s(Status::Current, "ReplicaSet is available. Replicas: 2")
        );
    }

    #[test]
    fn pod_rules() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let pod = |created: &str, status: Value| {
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"creationTimestamp": created}, "status": status})
        };
        let at = |v: Value| {
            let r = compute_at(&v, now);
            (r.status, r.message)
        };
        let old = "2026-01-01T00:00:00Z";
        assert_eq!(
            at(pod(old, json!({"phase": "Succeeded"}))),
            s(Status::Current, "Pod has completed successfully")
        );
        assert_eq!(
            at(pod(old, json!({"phase": "Failed"}))),
            s(Status::Current, "Pod has completed, but not successfully")
        );
        assert_eq!(
            at(pod(
                old,
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
            )),
            s(Status::Current, "Pod is Ready")
        );
        assert_eq!(
            at(pod(
                old,
                json!({"phase": "Running", "containerStatuses": [
                {"name": "app", "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                {"name": "side", "state": {"running": {}}}]})
            )),
            s(Status::Failed, "Containers in CrashLoop state: app")
        );
        assert_eq!(
            at(pod(old, json!({"phase": "Running"}))),
            s(Status::InProgress, "Pod is running but is not Ready")
        );
        let unsched = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]});
        assert_eq!(
            at(pod(old, unsched.clone())),
            s(Status::Failed, "Pod could not be scheduled")
        );
        assert_eq!(
            at(pod("2026-01-01T00:00:50Z", unsched)),
            s(Status::InProgress, "Pod has not been scheduled")
        );
        assert_eq!(
            at(pod(old, json!({"phase": "Pending"}))),
            s(Status::InProgress, "Pod is in the Pending phase")
        );
        assert_eq!(
            at(pod(old, json!({}))),
            s(Status::InProgress, "Pod phase not available")
        );
        assert_eq!(
            at(pod(old, json!({"phase": "Weird"}))),
            s(Status::Unknown, "unknown phase Weird")
        );
    }

    #[test]
    fn job_as_kustomize_controller_reads_it() {
        let now = jiff::Timestamp::now();
        let job = |spec: Value, status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "spec": spec, "status": status});
        let h = |o: &Value, r: HealthReader| {
            let x = compute_health_at(o, now, r);
            (x.status, x.message)
        };
        let v18 = HealthReader::for_version(Some((1, 9)));
        let v17 = HealthReader::for_version(Some((1, 7)));
        // Started, pod not running (e.g. ImagePullBackOff): plain kstatus says Current, the
        // controller's custom reader InProgress until Complete.
        let started = job(
            json!({}),
            json!({"startTime": "2026-01-01T00:00:00Z", "active": 1}),
        );
        assert_eq!(compute_at(&started, now).status, Status::Current);
        assert_eq!(
            h(&started, v18),
            s(
                Status::InProgress,
                "Job in progress. success:0, active: 1, failed: 0"
            )
        );
        let done = job(
            json!({"completions": 1}),
            json!({"startTime": "x", "succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}),
        );
        assert_eq!(
            h(&done, v18),
            s(Status::Current, "Job Completed. succeeded: 1/1")
        );
        let failed = job(
            json!({}),
            json!({"startTime": "x", "failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}),
        );
        assert_eq!(
            h(&failed, v18),
            s(Status::Failed, "Job Failed. failed: 1/1")
        );
        let not_started = job(json!({"parallelism": 2}), json!({}));
        assert_eq!(
            h(&not_started, v18),
            s(Status::InProgress, "Job not started. active: 0/2")
        );
        // Suspended: Current on v1.8+ (fluxcd/pkg runtime v0.93.0), read by its state before.
        let suspended = job(json!({"suspend": true}), json!({}));
        assert_eq!(h(&suspended, v18), s(Status::Current, "Job is suspended"));
        assert_eq!(
            h(&suspended, v17),
            s(Status::InProgress, "Job not started. active: 0/1")
        );
        // No generic checks on the custom reader: a deletionTimestamp does not make it
        // Terminating.
        let mut deleting = started.clone();
        deleting["metadata"] = json!({"deletionTimestamp": "2026-01-01T00:00:00Z"});
        assert_eq!(h(&deleting, v18).0, Status::InProgress);
        // Other kinds are plain kstatus.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(h(&cm, v18), s(Status::Current, "Resource is always ready"));
    }

    #[test]
    fn job_rules() {
        let job = |spec: Value, status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "spec": spec, "status": status});
        assert_eq!(
            st(job(
                json!({"completions": 3}),
                json!({"succeeded": 3, "conditions": [{"type": "Complete", "status": "True"}]})
            )),
            s(Status::Current, "Job Completed. succeeded: 3/3")
        );
        let r = compute(&job(
            json!({}),
            json!({"failed": 2, "conditions": [{"type": "Failed", "status": "True"}]}),
        ));
        assert_eq!(
            (r.status, r.message.as_str()),
            (Status::Failed, "Job Failed. failed: 2/1")
        );
        assert_eq!(
            st(job(
                json!({}),
                json!({"conditions": [{"type": "Suspended", "status": "True"}]})
            )),
            s(Status::Current, "Job is suspended")
        );
        assert_eq!(
            st(job(json!({}), json!({}))),
            s(Status::InProgress, "Job not started")
        );
        assert_eq!(
            st(job(
                json!({"parallelism": 2}),
                json!({"startTime": "2026-01-01T00:00:00Z", "active": 2})
            )),
            s(
                Status::Current,
                "Job in progress. success:0, active: 2, failed: 0"
            )
        );
    }

    #[test]
    fn pvc_service_crd_and_always_ready() {
        assert_eq!(
            st(
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}})
            ),
            s(Status::InProgress, "PVC is not Bound. phase: Pending")
        );
        assert_eq!(
            st(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim"})),
            s(Status::InProgress, "PVC is not Bound. phase: unknown")
        );
        assert_eq!(
            st(
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Bound"}})
            ),
            s(Status::Current, "PVC is Bound")
        );
        assert_eq!(
            st(json!({"apiVersion": "v1", "kind": "Service", "spec": {"type": "LoadBalancer"}})),
            s(
                Status::InProgress,
                "ClusterIP not set. Service type: LoadBalancer"
            )
        );
        assert_eq!(
            st(json!({"apiVersion": "v1", "kind": "Service", "spec": {"clusterIP": "10.0.0.1"}})),
            s(Status::Current, "Service is ready")
        );
        for (av, k) in [
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("batch/v1", "CronJob"),
        ] {
            assert_eq!(
                st(json!({"apiVersion": av, "kind": k})),
                s(Status::Current, "Resource is always ready")
            );
        }
        assert_eq!(
            st(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"})),
            s(Status::Current, "AllowedDisruptions has been computed.")
        );
        let crd = |c: Value| json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "status": {"conditions": c}});
        assert_eq!(
            st(crd(json!([{"type": "Established", "status": "True"}]))),
            s(Status::Current, "CRD is established")
        );
        assert_eq!(
            st(crd(
                json!([{"type": "NamesAccepted", "status": "False", "reason": "NameConflict", "message": "conflict"}])
            )),
            s(Status::Failed, "conflict")
        );
        assert_eq!(
            st(crd(
                json!([{"type": "Established", "status": "False", "reason": "Installing"}])
            )),
            s(Status::InProgress, "Install in progress")
        );
        assert_eq!(
            st(crd(
                json!([{"type": "Established", "status": "False", "reason": "Bad", "message": "bad"}])
            )),
            s(Status::Failed, "bad")
        );
    }

    #[test]
    fn malformed_is_unknown_not_panic() {
        assert_eq!(compute(&json!("x")).status, Status::Unknown);
        assert_eq!(
            compute(&json!({"status": {"conditions": "nope"}})).status,
            Status::Unknown
        );
        assert_eq!(
            compute(&json!({"kind": "Pod", "apiVersion": "v1", "status": {"phase": 3}})).status,
            Status::InProgress
        );
        assert_eq!(StatusResult::not_found().status, Status::NotFound);
        assert_eq!(Status::InProgress.to_string(), "InProgress");
    }
}
