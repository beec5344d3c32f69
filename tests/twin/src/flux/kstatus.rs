//! The twin's own kstatus: an independent implementation of kubernetes-sigs/cli-utils
//! `pkg/kstatus/status` (`Compute` in status.go, generic.go, core.go), the rules Flux's
//! health checks (fluxcd/pkg ssa `WaitForSet`) use to decide when an applied object is
//! Current, InProgress or Failed.
//!
//! Order (status.go `Compute`): deletionTimestamp -> Terminating; generation !=
//! status.observedGeneration -> InProgress (`LatestGenerationNotObserved`); condition
//! Reconciling=True -> InProgress; Stalled=True -> Failed; then the kind rules of core.go
//! (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, Pod, Service, PVC, ConfigMap/Secret/
//! CronJob always ready); then a `Ready` condition; otherwise Current (`Resource is current`).
//! A missing object is [`Status::NotFound`] (the poller's reading, not `Compute`'s).
//!
//! Left out: the Pod 15s `ScheduleWindow` for Unschedulable (always Failed here is never
//! reached: the twin never marks pods Unschedulable), CRD and PDB rules.

use serde_json::Value;

/// kstatus status values (cli-utils `status.Status`), printed as upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// `InProgress`
    InProgress,
    /// `Failed`
    Failed,
    /// `Current`
    Current,
    /// `Terminating`
    Terminating,
    /// `NotFound`
    NotFound,
    /// `Unknown`
    Unknown,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::InProgress => "InProgress",
            Status::Failed => "Failed",
            Status::Current => "Current",
            Status::Terminating => "Terminating",
            Status::NotFound => "NotFound",
            Status::Unknown => "Unknown",
        })
    }
}

/// A computed status with its message (cli-utils `Result`, without the conditions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KStatus {
    /// The status.
    pub status: Status,
    /// Reason of the synthesized condition, when InProgress/Failed.
    pub reason: String,
    /// Human message as cli-utils prints it (`Ready: 0/1`, `Deployment is available. Replicas: 1`).
    pub message: String,
}

fn ks(status: Status, reason: &str, message: impl Into<String>) -> KStatus {
    KStatus {
        status,
        reason: reason.into(),
        message: message.into(),
    }
}

fn int(obj: &Value, ptr: &str, default: i64) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(default)
}

fn string<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn conditions(obj: &Value) -> Vec<&Value> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

fn group(obj: &Value) -> &str {
    string(obj, "/apiVersion")
        .split_once('/')
        .map(|(g, _)| g)
        .unwrap_or("")
}

/// Computes the kstatus of an object (cli-utils `status.Compute`).
pub fn compute(obj: &Value) -> KStatus {
    if !string(obj, "/metadata/deletionTimestamp").is_empty() {
        return ks(Status::Terminating, "", "Resource scheduled for deletion");
    }
    if let (Some(generation), Some(observed)) = (
        obj.pointer("/metadata/generation").and_then(Value::as_i64),
        obj.pointer("/status/observedGeneration")
            .and_then(Value::as_i64),
    ) && generation != observed
    {
        return ks(
            Status::InProgress,
            "LatestGenerationNotObserved",
            format!(
                "{} generation is {generation}, but latest observed generation is {observed}",
                string(obj, "/kind")
            ),
        );
    }
    for c in conditions(obj) {
        let (t, s) = (c["type"].as_str(), c["status"].as_str());
        if t == Some("Reconciling") && s == Some("True") {
            return ks(
                Status::InProgress,
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default(),
            );
        }
        if t == Some("Stalled") && s == Some("True") {
            return ks(
                Status::Failed,
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default(),
            );
        }
    }
    let kind = string(obj, "/kind");
    let kind_rule = match (group(obj), kind) {
        ("apps" | "extensions", "Deployment") => Some(deployment(obj)),
        ("apps" | "extensions", "ReplicaSet") => Some(replicaset(obj)),
        ("apps", "StatefulSet") => Some(statefulset(obj)),
        ("apps" | "extensions", "DaemonSet") => Some(daemonset(obj)),
        ("batch", "Job") => Some(job(obj)),
        ("", "Pod") => Some(pod(obj)),
        ("", "Service") => Some(service(obj)),
        ("", "PersistentVolumeClaim") => Some(if string(obj, "/status/phase") == "Bound" {
            ks(Status::Current, "", "PVC is Bound")
        } else {
            ks(
                Status::InProgress,
                "NotBound",
                format!("PVC is not Bound. phase: {}", string(obj, "/status/phase")),
            )
        }),
        ("", "ConfigMap" | "Secret") | ("batch", "CronJob") => {
            Some(ks(Status::Current, "", "Resource is always ready"))
        }
        _ => None,
    };
    if let Some(r) = kind_rule {
        return r;
    }
    for c in conditions(obj) {
        if c["type"].as_str() != Some("Ready") {
            continue;
        }
        match c["status"].as_str() {
            Some("True") => return ks(Status::Current, "", "Resource is Ready"),
            Some("False" | "Unknown") => {
                return ks(
                    Status::InProgress,
                    c["reason"].as_str().unwrap_or_default(),
                    c["message"].as_str().unwrap_or_default(),
                );
            }
            _ => {}
        }
    }
    ks(Status::Current, "", "Resource is current")
}

/// core.go `deploymentConditions`.
fn deployment(obj: &Value) -> KStatus {
    let mut progressing = obj.pointer("/spec/progressDeadlineSeconds").is_none()
        || int(obj, "/spec/progressDeadlineSeconds", 0) == i64::from(i32::MAX);
    let mut available = false;
    for c in conditions(obj) {
        match c["type"].as_str() {
            Some("Progressing") => {
                if c["reason"].as_str() == Some("ProgressDeadlineExceeded") {
                    return ks(
                        Status::Failed,
                        "ProgressDeadlineExceeded",
                        "Progress deadline exceeded",
                    );
                }
                if c["status"].as_str() == Some("True")
                    && c["reason"].as_str() == Some("NewReplicaSetAvailable")
                {
                    progressing = true;
                }
            }
            Some("Available") if c["status"].as_str() == Some("True") => available = true,
            _ => {}
        }
    }
    let spec = int(obj, "/spec/replicas", 1);
    let status = int(obj, "/status/replicas", 0);
    let updated = int(obj, "/status/updatedReplicas", 0);
    let ready = int(obj, "/status/readyReplicas", 0);
    let avail = int(obj, "/status/availableReplicas", 0);
    if spec > status {
        return ks(
            Status::InProgress,
            "LessReplicas",
            format!("Replicas: {status}/{spec}"),
        );
    }
    if spec > updated {
        return ks(
            Status::InProgress,
            "LessUpdated",
            format!("Updated: {updated}/{spec}"),
        );
    }
    if status > spec {
        return ks(
            Status::InProgress,
            "ExtraPods",
            format!("Pending termination: {}", status - spec),
        );
    }
    if updated > avail {
        return ks(
            Status::InProgress,
            "LessAvailable",
            format!("Available: {avail}/{updated}"),
        );
    }
    if spec > ready {
        return ks(
            Status::InProgress,
            "LessReady",
            format!("Ready: {ready}/{spec}"),
        );
    }
    if !progressing {
        return ks(
            Status::InProgress,
            "ReplicaSetNotAvailable",
            "ReplicaSet not Available",
        );
    }
    if !available {
        return ks(
            Status::InProgress,
            "DeploymentNotAvailable",
            "Deployment not Available",
        );
    }
    ks(
        Status::Current,
        "",
        format!("Deployment is available. Replicas: {status}"),
    )
}

/// core.go `replicasetConditions` (ReplicaFailure condition, labelled/available/ready).
fn replicaset(obj: &Value) -> KStatus {
    for c in conditions(obj) {
        if c["type"].as_str() == Some("ReplicaFailure") && c["status"].as_str() == Some("True") {
            return ks(
                Status::InProgress,
                "ReplicaFailure",
                "Replica Failure condition. Check Pods",
            );
        }
    }
    let spec = int(obj, "/spec/replicas", 1);
    let status = int(obj, "/status/replicas", 0);
    let labelled = int(obj, "/status/fullyLabeledReplicas", 0);
    let avail = int(obj, "/status/availableReplicas", 0);
    let ready = int(obj, "/status/readyReplicas", 0);
    if spec > labelled {
        return ks(
            Status::InProgress,
            "LessLabelled",
            format!("Labelled: {labelled}/{spec}"),
        );
    }
    if spec > avail {
        return ks(
            Status::InProgress,
            "LessAvailable",
            format!("Available: {avail}/{spec}"),
        );
    }
    if spec > ready {
        return ks(
            Status::InProgress,
            "LessReady",
            format!("Ready: {ready}/{spec}"),
        );
    }
    if status > spec {
        return ks(
            Status::InProgress,
            "ExtraPods",
            format!("Pending termination: {}", status - spec),
        );
    }
    ks(
        Status::Current,
        "",
        format!("ReplicaSet is available. Replicas: {status}"),
    )
}

/// core.go `stsConditions`.
fn statefulset(obj: &Value) -> KStatus {
    if string(obj, "/spec/updateStrategy/type") == "OnDelete" {
        return ks(
            Status::Current,
            "",
            "StatefulSet is using the ondelete update strategy",
        );
    }
    let spec = int(obj, "/spec/replicas", 1);
    let ready = int(obj, "/status/readyReplicas", 0);
    let current = int(obj, "/status/currentReplicas", 0);
    let updated = int(obj, "/status/updatedReplicas", 0);
    let status = int(obj, "/status/replicas", 0);
    let partition = int(obj, "/spec/updateStrategy/rollingUpdate/partition", -1);
    if spec > status {
        return ks(
            Status::InProgress,
            "LessReplicas",
            format!("Replicas: {status}/{spec}"),
        );
    }
    if spec > ready {
        return ks(
            Status::InProgress,
            "LessReady",
            format!("Ready: {ready}/{spec}"),
        );
    }
    if status > spec {
        return ks(
            Status::InProgress,
            "ExtraPods",
            format!("Pending termination: {}", status - spec),
        );
    }
    if partition != -1 {
        if updated < spec - partition {
            return ks(
                Status::InProgress,
                "PartitionRollout",
                format!("updated: {updated}/{}", spec - partition),
            );
        }
        return ks(
            Status::Current,
            "",
            format!("Partition rollout complete. updated: {updated}"),
        );
    }
    if spec > current {
        return ks(
            Status::InProgress,
            "LessCurrent",
            format!("current: {current}/{spec}"),
        );
    }
    if string(obj, "/status/currentRevision") != string(obj, "/status/updateRevision") {
        return ks(
            Status::InProgress,
            "RevisionMismatch",
            "Waiting for updated revision to match current",
        );
    }
    ks(
        Status::Current,
        "",
        format!("All replicas scheduled as expected. Replicas: {status}"),
    )
}

/// core.go `daemonsetConditions` (with `checkGenerationSet`).
fn daemonset(obj: &Value) -> KStatus {
    let kind = string(obj, "/kind");
    if obj.pointer("/metadata/generation").is_none() {
        return ks(
            Status::InProgress,
            "NoGeneration",
            format!("{kind} metadata.generation not found"),
        );
    }
    if obj.pointer("/status/observedGeneration").is_none() {
        return ks(
            Status::InProgress,
            "NoObservedGeneration",
            format!("{kind} status.observedGeneration not found"),
        );
    }
    let desired = int(obj, "/status/desiredNumberScheduled", -1);
    let current = int(obj, "/status/currentNumberScheduled", 0);
    let updated = int(obj, "/status/updatedNumberScheduled", 0);
    let avail = int(obj, "/status/numberAvailable", 0);
    let ready = int(obj, "/status/numberReady", 0);
    if desired == -1 {
        return ks(
            Status::InProgress,
            "NoDesiredNumber",
            "Missing .status.desiredNumberScheduled",
        );
    }
    if desired > current {
        return ks(
            Status::InProgress,
            "LessCurrent",
            format!("Current: {current}/{desired}"),
        );
    }
    if desired > updated {
        return ks(
            Status::InProgress,
            "LessUpdated",
            format!("Updated: {updated}/{desired}"),
        );
    }
    if desired > avail {
        return ks(
            Status::InProgress,
            "LessAvailable",
            format!("Available: {avail}/{desired}"),
        );
    }
    if desired > ready {
        return ks(
            Status::InProgress,
            "LessReady",
            format!("Ready: {ready}/{desired}"),
        );
    }
    ks(
        Status::Current,
        "",
        format!("All replicas scheduled as expected. Replicas: {desired}"),
    )
}

/// The health of an object as kustomize-controller `major.minor` reads it in a health check:
/// Jobs through fluxcd/pkg runtime/statusreaders `NewCustomJobStatusReader` (registered by
/// kustomize-controller `getClientAndPoller`, in main.go since v0.23.0): InProgress until
/// `Complete=True`, Failed on `Failed=True`, and from v1.8.0 (fluxcd/pkg runtime v0.93.0)
/// Current when `spec.suspend: true`; no generic checks on Jobs (the custom reader calls only
/// its own status function). Every other kind is [`compute`].
pub fn health(obj: &Value, version: (u32, u32)) -> KStatus {
    if group(obj) == "batch" && string(obj, "/kind") == "Job" {
        return flux_job(obj, version >= (1, 8));
    }
    compute(obj)
}

/// fluxcd/pkg runtime/statusreaders/job.go `jobConditions`.
fn flux_job(obj: &Value, suspend_is_current: bool) -> KStatus {
    if suspend_is_current && obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        return ks(Status::Current, "", "Job is suspended");
    }
    let parallelism = int(obj, "/spec/parallelism", 1);
    let completions = int(obj, "/spec/completions", parallelism);
    let succeeded = int(obj, "/status/succeeded", 0);
    let active = int(obj, "/status/active", 0);
    let failed = int(obj, "/status/failed", 0);
    for c in conditions(obj) {
        let is_true = c["status"].as_str() == Some("True");
        match c["type"].as_str() {
            Some("Complete") if is_true => {
                return ks(
                    Status::Current,
                    "",
                    format!("Job Completed. succeeded: {succeeded}/{completions}"),
                );
            }
            Some("Failed") if is_true => {
                return ks(
                    Status::Failed,
                    "JobFailed",
                    format!("Job Failed. failed: {failed}/{completions}"),
                );
            }
            _ => {}
        }
    }
    if string(obj, "/status/startTime").is_empty() {
        return ks(
            Status::InProgress,
            "JobNotStarted",
            format!("Job not started. active: 0/{parallelism}"),
        );
    }
    ks(
        Status::InProgress,
        "JobInProgress",
        format!("Job in progress. success:{succeeded}, active: {active}, failed: {failed}"),
    )
}

/// core.go `jobConditions`.
fn job(obj: &Value) -> KStatus {
    let parallelism = int(obj, "/spec/parallelism", 1);
    let completions = int(obj, "/spec/completions", parallelism);
    let succeeded = int(obj, "/status/succeeded", 0);
    let active = int(obj, "/status/active", 0);
    let failed = int(obj, "/status/failed", 0);
    let suspended = obj
        .pointer("/spec/suspend")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for c in conditions(obj) {
        let is_true = c["status"].as_str() == Some("True");
        match c["type"].as_str() {
            Some("Complete") if is_true => {
                return ks(
                    Status::Current,
                    "",
                    format!("Job Completed. succeeded: {succeeded}/{completions}"),
                );
            }
            Some("Failed") if is_true => {
                return ks(
                    Status::Failed,
                    "JobFailed",
                    format!("Job Failed. failed: {failed}/{completions}"),
                );
            }
            Some("Suspended") if is_true && suspended => {
                return ks(Status::Current, "", "Job is suspended");
            }
            _ => {}
        }
    }
    if string(obj, "/status/startTime").is_empty() {
        return ks(Status::InProgress, "JobNotStarted", "Job not started");
    }
    ks(
        Status::Current,
        "",
        format!("Job in progress. success:{succeeded}, active: {active}, failed: {failed}"),
    )
}

/// core.go `podConditions` (CrashLoopBackOff waiting containers make it Failed).
fn pod(obj: &Value) -> KStatus {
    match string(obj, "/status/phase") {
        "Succeeded" => ks(Status::Current, "", "Pod has completed successfully"),
        "Failed" => ks(
            Status::Current,
            "",
            "Pod has completed, but not successfully",
        ),
        "Running" => {
            if conditions(obj).iter().any(|c| {
                c["type"].as_str() == Some("Ready") && c["status"].as_str() == Some("True")
            }) {
                return ks(Status::Current, "", "Pod is Ready");
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
                        .filter_map(|cs| cs["name"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            if !crashing.is_empty() {
                return ks(
                    Status::Failed,
                    "ContainerCrashLooping",
                    format!("Containers in CrashLoop state: {}", crashing.join(",")),
                );
            }
            ks(
                Status::InProgress,
                "PodRunningNotReady",
                "Pod is running but is not Ready",
            )
        }
        "Pending" => ks(
            Status::InProgress,
            "PodPending",
            "Pod is in the Pending phase",
        ),
        "" => ks(
            Status::InProgress,
            "PodNotObserved",
            "Pod phase not available",
        ),
        other => ks(Status::Unknown, "", format!("unknown phase {other}")),
    }
}

/// core.go `serviceConditions`: a LoadBalancer needs an ingress IP.
fn service(obj: &Value) -> KStatus {
    if string(obj, "/spec/type") == "LoadBalancer"
        && obj
            .pointer("/status/loadBalancer/ingress")
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty())
    {
        return ks(
            Status::InProgress,
            "NoIPAssigned",
            "Pending external IP assignment",
        );
    }
    ks(Status::Current, "", "Service is ready")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_rules() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"generation": 2}, "spec": {"replicas": 1, "progressDeadlineSeconds": 600},
            "status": {"observedGeneration": 1}});
        assert_eq!(compute(&d).status, Status::InProgress);
        assert_eq!(
            compute(&d).message,
            "Deployment generation is 2, but latest observed generation is 1"
        );
        d["status"] = json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1});
        assert_eq!(compute(&d).message, "Pending termination: 1");
        d["status"]["conditions"] = json!([{"type": "Progressing", "status": "False",
            "reason": "ProgressDeadlineExceeded"}]);
        assert_eq!(compute(&d).status, Status::Failed);
        d["status"] = json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1, "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]});
        assert_eq!(
            compute(&d),
            ks(Status::Current, "", "Deployment is available. Replicas: 1")
        );
    }

    #[test]
    fn job_pod_generic() {
        let j = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {},
            "status": {"conditions": [{"type": "Failed", "status": "True"}], "failed": 1}});
        assert_eq!(compute(&j).status, Status::Failed);
        let p = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Pending"}});
        assert_eq!(compute(&p).message, "Pod is in the Pending phase");
        let k = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"generation": 1}, "status": {"observedGeneration": 1,
            "conditions": [{"type": "Ready", "status": "False", "reason": "DependencyNotReady", "message": "m"}]}});
        assert_eq!(compute(&k).status, Status::InProgress);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(compute(&cm).status, Status::Current);
        let s = json!({"apiVersion": "x/v1", "kind": "Thing", "status": {"conditions": [
            {"type": "Stalled", "status": "True", "reason": "R", "message": "stuck"}]}});
        assert_eq!(compute(&s).status, Status::Failed);
    }
}
