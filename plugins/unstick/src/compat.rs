//! Go duration parsing and kstatus, needed before `cluster_loop` exposed them; replaced by
//! the shared crate's versions as they land (see the report).

use serde::Serialize;
use serde_json::Value;

use crate::obj;

/// Parse a Go `time.Duration` string (`5m0s`, `1h`, `300ms`, `1.5s`) into seconds.
pub fn go_duration_secs(s: &str) -> Option<f64> {
    let s = s.trim();
    if s == "0" {
        return Some(0.0);
    }
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    Some(if neg { -total } else { total })
}

/// Effective health-check timeout of a Kustomization in seconds: `spec.timeout`, else
/// `spec.interval - 30s`, with a 30s floor. kustomize-controller api/v1
/// kustomization_types.go `GetTimeout`.
pub fn effective_timeout_secs(ks: &Value) -> f64 {
    let interval = obj::s(ks, &["spec", "interval"])
        .and_then(go_duration_secs)
        .unwrap_or(600.0);
    let d = obj::s(ks, &["spec", "timeout"])
        .and_then(go_duration_secs)
        .unwrap_or(interval - 30.0);
    d.max(30.0)
}

/// kstatus result (cli-utils pkg/kstatus/status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KStatus {
    /// Ready per its kind's rules.
    Current,
    /// Still progressing.
    InProgress,
    /// Failed (Stalled, or Deployment ProgressDeadlineExceeded).
    Failed,
    /// Being deleted.
    Terminating,
    /// Not found.
    NotFound,
    /// Could not be determined.
    Unknown,
}

impl std::fmt::Display for KStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KStatus::Current => "Current",
            KStatus::InProgress => "InProgress",
            KStatus::Failed => "Failed",
            KStatus::Terminating => "Terminating",
            KStatus::NotFound => "NotFound",
            KStatus::Unknown => "Unknown",
        })
    }
}

/// kstatus of one object with a short message; cli-utils pkg/kstatus/status core.go
/// (`deploymentConditions`, `stsConditions`, `daemonsetConditions`, `jobConditions`,
/// `podConditions`, generic `Ready`).
pub fn kstatus(o: &Value) -> (KStatus, String) {
    if obj::at(o, &["metadata", "deletionTimestamp"]).is_some() {
        return (
            KStatus::Terminating,
            "resource scheduled for deletion".into(),
        );
    }
    let generation = obj::i(o, &["metadata", "generation"]);
    let og = obj::i(o, &["status", "observedGeneration"]);
    if let (Some(g), Some(og)) = (generation, og)
        && og != g
    {
        return (
            KStatus::InProgress,
            format!("observed generation {og} != generation {g}"),
        );
    }
    if let Some(c) = obj::condition(o, "Stalled")
        && c.is_true()
    {
        return (KStatus::Failed, c.message);
    }
    if let Some(c) = obj::condition(o, "Reconciling")
        && c.is_true()
    {
        return (KStatus::InProgress, c.message);
    }
    let spec_replicas = obj::i(o, &["spec", "replicas"]).unwrap_or(1);
    let st = |k: &str| obj::i(o, &["status", k]).unwrap_or(0);
    match (obj::group(o), obj::kind(o)) {
        ("apps", "Deployment") => {
            if let Some(c) = obj::condition(o, "Progressing")
                && c.reason == "ProgressDeadlineExceeded"
            {
                return (
                    KStatus::Failed,
                    format!("Progress deadline exceeded: {}", c.message),
                );
            }
            let (updated, ready, avail, total) = (
                st("updatedReplicas"),
                st("readyReplicas"),
                st("availableReplicas"),
                st("replicas"),
            );
            if updated < spec_replicas {
                return (
                    KStatus::InProgress,
                    format!("Updated: {updated}/{spec_replicas}"),
                );
            }
            if total > updated {
                return (
                    KStatus::InProgress,
                    format!("Pending termination: {}", total - updated),
                );
            }
            if avail < updated {
                return (KStatus::InProgress, format!("Available: {avail}/{updated}"));
            }
            if ready < spec_replicas {
                return (
                    KStatus::InProgress,
                    format!("Ready: {ready}/{spec_replicas}"),
                );
            }
            (
                KStatus::Current,
                format!("Deployment is available. Replicas: {total}"),
            )
        }
        ("apps", "StatefulSet") => {
            let ready = st("readyReplicas");
            if ready < spec_replicas {
                return (
                    KStatus::InProgress,
                    format!("Ready: {ready}/{spec_replicas}"),
                );
            }
            (
                KStatus::Current,
                format!("All replicas scheduled as expected. Replicas: {ready}"),
            )
        }
        ("apps", "DaemonSet") => {
            let desired = st("desiredNumberScheduled");
            let ready = st("numberReady");
            if ready < desired {
                return (KStatus::InProgress, format!("Ready: {ready}/{desired}"));
            }
            (
                KStatus::Current,
                format!("All replicas scheduled as expected. Replicas: {desired}"),
            )
        }
        ("batch", "Job") => {
            if let Some(c) = obj::condition(o, "Failed")
                && c.is_true()
            {
                return (
                    KStatus::Failed,
                    format!("Job Failed. failed: {}", st("failed")),
                );
            }
            if let Some(c) = obj::condition(o, "Complete")
                && c.is_true()
            {
                return (KStatus::Current, "Job Completed".into());
            }
            (KStatus::InProgress, "Job in progress".into())
        }
        ("", "Pod") => {
            let phase = obj::s(o, &["status", "phase"]).unwrap_or("");
            match phase {
                "Succeeded" => (KStatus::Current, "Pod has completed successfully".into()),
                "Failed" => (
                    KStatus::Failed,
                    "Pod has completed, but not successfully".into(),
                ),
                "Running" if obj::condition(o, "Ready").is_some_and(|c| c.is_true()) => {
                    (KStatus::Current, "Pod is Ready".into())
                }
                _ => (KStatus::InProgress, format!("Pod phase {phase}")),
            }
        }
        _ => match obj::condition(o, "Ready") {
            Some(c) if c.is_true() => (KStatus::Current, c.message),
            Some(c) if c.is_false() => (KStatus::InProgress, c.message),
            Some(c) => (KStatus::InProgress, c.message),
            None => (KStatus::Current, "Resource is current".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration_secs("5m0s"), Some(300.0));
        assert_eq!(go_duration_secs("9m30s"), Some(570.0));
        assert_eq!(go_duration_secs("1h2m"), Some(3720.0));
        assert!((go_duration_secs("5m0.012s").unwrap() - 300.012).abs() < 1e-9);
        assert_eq!(go_duration_secs("10"), None);
        assert_eq!(go_duration_secs(""), None);
    }

    #[test]
    fn effective_timeout_follows_get_timeout() {
        assert_eq!(
            effective_timeout_secs(&json!({"spec": {"interval": "10m"}})),
            570.0
        );
        assert_eq!(
            effective_timeout_secs(&json!({"spec": {"interval": "10m", "timeout": "15m"}})),
            900.0
        );
        assert_eq!(
            effective_timeout_secs(&json!({"spec": {"interval": "45s"}})),
            30.0
        );
        assert_eq!(
            effective_timeout_secs(&json!({"spec": {"interval": "1m", "timeout": "5s"}})),
            30.0
        );
    }
}
