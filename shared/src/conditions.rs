//! Kubernetes status conditions (`metav1.Condition` and the older core shapes), tolerant.
//!
//! Every field except `type` is optional so that partially-written conditions, core
//! conditions (PodCondition, DeploymentCondition: `lastUpdateTime`, no `observedGeneration`)
//! and Flux conditions all parse. Timestamps stay RFC 3339 strings; use
//! [`Condition::last_transition_time`] to get a [`jiff::Timestamp`].

use serde::{Deserialize, Serialize};

/// Condition type `Ready` (Flux objects, kstatus generic rule).
pub const READY: &str = "Ready";
/// Condition type `Reconciling` (kstatus "abnormal-true": InProgress when True).
pub const RECONCILING: &str = "Reconciling";
/// Condition type `Stalled` (kstatus "abnormal-true": Failed when True).
pub const STALLED: &str = "Stalled";
/// Condition type `Healthy` (kustomize-controller, only with `wait`/`healthChecks`).
pub const HEALTHY: &str = "Healthy";

/// A pod's `PodScheduled=False` condition: the pod has no node, and the scheduler said why
/// (reason `Unschedulable` and its message), or, for `schedulingGates`, the API server did
/// (`SchedulingGated`, Kubernetes >= 1.27). `None` when no such condition is set.
pub fn pod_not_scheduled(
    pod: &k8s_openapi::api::core::v1::Pod,
) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
}

/// One status condition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    /// Condition type, e.g. `Ready`, `Reconciling`, `Stalled`, `Healthy`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown` (as written by the controller).
    pub status: String,
    /// CamelCase reason, e.g. `ReconciliationSucceeded`, `HealthCheckFailed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339 time the status last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// `.metadata.generation` the condition was set for (metav1.Condition only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// True when `status == "True"` (exact, as Kubernetes compares it).
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }

    /// True when `status == "False"`.
    pub fn is_false(&self) -> bool {
        self.status == "False"
    }

    /// Reason, or `""`.
    pub fn reason(&self) -> &str {
        self.reason.as_deref().unwrap_or("")
    }

    /// Message, or `""`.
    pub fn message(&self) -> &str {
        self.message.as_deref().unwrap_or("")
    }

    /// `lastTransitionTime` parsed as RFC 3339; `None` when absent or malformed.
    pub fn last_transition_time(&self) -> Option<jiff::Timestamp> {
        self.last_transition_time.as_deref()?.parse().ok()
    }
}

/// `serialize_with` for an `Option<Condition>` in the shape a diagnosis reports it (unstick's
/// `ready` and `failing`): `type` and `status`, `reason` and `message` always present (`""`
/// when absent), `lastTransitionTime` as [`Condition::last_transition_time`] parses it, written
/// back as RFC 3339 and left out when absent or malformed, `observedGeneration` when set. Pair
/// it with `skip_serializing_if = "Option::is_none"`.
pub fn serialize_as_read<S: serde::Serializer>(
    c: &Option<Condition>,
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct AsRead<'a> {
        #[serde(rename = "type")]
        type_: &'a str,
        status: &'a str,
        reason: &'a str,
        message: &'a str,
        #[serde(rename = "lastTransitionTime", skip_serializing_if = "Option::is_none")]
        last_transition_time: Option<jiff::Timestamp>,
        #[serde(rename = "observedGeneration", skip_serializing_if = "Option::is_none")]
        observed_generation: Option<i64>,
    }
    c.as_ref()
        .map(|c| AsRead {
            type_: &c.type_,
            status: &c.status,
            reason: c.reason(),
            message: c.message(),
            last_transition_time: c.last_transition_time(),
            observed_generation: c.observed_generation,
        })
        .serialize(s)
}

/// The first condition of `type_` in `conditions` (Kubernetes keeps types unique).
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True when the condition `type_` exists and is `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(Condition::is_true)
}

/// Parse `.status.conditions` out of any object JSON; malformed entries are skipped.
pub fn from_object(obj: &serde_json::Value) -> Vec<Condition> {
    obj.pointer("/status/conditions")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|c| serde_json::from_value::<Condition>(c.clone()).ok())
                .filter(|c| !c.type_.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_not_scheduled_is_the_podscheduled_false_condition() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gated"},
            "status": {"phase": "Pending", "conditions": [
                {"type": "Initialized", "status": "False"},
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                 "message": "Scheduling is blocked due to non-empty scheduling gates"}
            ]}
        }))
        .unwrap();
        let c = pod_not_scheduled(&pod).expect("PodScheduled=False");
        assert_eq!(c.reason.as_deref(), Some("SchedulingGated"));
        let scheduled: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(serde_json::json!({
                "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}
            }))
            .unwrap();
        assert!(pod_not_scheduled(&scheduled).is_none());
        assert!(pod_not_scheduled(&Default::default()).is_none());
    }
    use serde_json::json;

    #[test]
    fn parse_and_find() {
        let obj = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "HealthCheckFailed",
             "message": "health check failed after 5m0.012s", "lastTransitionTime": "2026-01-02T03:04:05Z",
             "observedGeneration": 3, "extra": 1},
            {"type": "Reconciling", "status": "True"},
            "garbage",
            {"status": "True"}
        ]}});
        let cs = from_object(&obj);
        assert_eq!(cs.len(), 2);
        let r = find(&cs, READY).unwrap();
        assert!(r.is_false() && !r.is_true());
        assert_eq!(r.reason(), "HealthCheckFailed");
        assert_eq!(r.observed_generation, Some(3));
        assert_eq!(
            r.last_transition_time().unwrap().to_string(),
            "2026-01-02T03:04:05Z"
        );
        assert!(is_true(&cs, RECONCILING));
        assert!(!is_true(&cs, STALLED));
        assert_eq!(find(&cs, RECONCILING).unwrap().message(), "");
    }
}
