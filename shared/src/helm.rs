//! HelmRelease status as helm-controller v1.4 writes it (`helm.toolkit.fluxcd.io/v2`), read
//! from the object's JSON: which action runs, whether it failed and is retried, whether the
//! controller gave up, and what frees it.
//!
//! Sources (fluxcd/helm-controller v1.4.3):
//! - internal/reconcile/atomic_release.go `AtomicRelease.Reconcile`: before each action,
//!   `Reconciling=True` reason `Progressing`, message `Running '<action>' action with timeout
//!   of <d>` (and `Ready=Unknown` with the same message for a release action: install,
//!   upgrade); after a failed action with remediation retries left, `Reconciling=True` reason
//!   `ProgressingWithRetry` with the Ready message and a requeue; once the retries are
//!   exhausted, `Stalled=True` reason `RetriesExceeded`, `Failed to <action> after <n>
//!   attempt(s)` (`MarkStalled` also deletes Reconciling), returned as a terminal error: the
//!   object is not requeued until its spec or a request annotation changes.
//! - internal/reconcile/install.go / upgrade.go `failure`: `Released=False` reason
//!   `InstallFailed` / `UpgradeFailed`, `Helm install failed for release <ns>/<name> with
//!   chart <chart>@<version>: <error>`; `release.go summarize` copies it into Ready.
//! - api/v2 helmrelease_types.go: `status.installFailures` / `upgradeFailures` count failed
//!   attempts; `RetriesExhausted` is `retries >= 0 && failures > retries`
//!   (`spec.install.remediation.retries`, `spec.upgrade.remediation.retries`, default 0).
//! - internal/action/reset.go `MustResetFailures`: the failure count is cleared when the
//!   generation, the chart version or the values digest changed since the last attempt, or on
//!   a reset request (`reconcile.fluxcd.io/resetAt` equal to `reconcile.fluxcd.io/requestedAt`,
//!   api/v2 annotations.go `ShouldHandleResetRequest`); atomic_release.go `actionForState`
//!   runs one install/upgrade despite exhausted retries on a force request
//!   (`reconcile.fluxcd.io/forceAt` equal to `requestedAt`, fluxcd/pkg apis/meta
//!   `ShouldHandleForceRequest`). `flux reconcile helmrelease --force` / `--reset` write them.
//! - internal/postrender/build.go `NewOriginLabels`: every object of the release carries the
//!   labels `helm.toolkit.fluxcd.io/name` and `helm.toolkit.fluxcd.io/namespace` (the
//!   HelmRelease's name and namespace), so its workloads can be found by label.

use serde::Serialize;
use serde_json::Value;

use crate::conditions::Condition;

/// Label helm-controller puts on every object of a release: the HelmRelease's name.
pub const ORIGIN_NAME_LABEL: &str = "helm.toolkit.fluxcd.io/name";
/// Label helm-controller puts on every object of a release: the HelmRelease's namespace.
pub const ORIGIN_NAMESPACE_LABEL: &str = "helm.toolkit.fluxcd.io/namespace";
/// `reconcile.fluxcd.io/forceAt` (fluxcd/pkg apis/meta `ForceRequestAnnotation`).
pub const FORCE_AT: &str = "reconcile.fluxcd.io/forceAt";
/// `reconcile.fluxcd.io/resetAt` (helm-controller api/v2 `ResetRequestAnnotation`).
pub const RESET_AT: &str = "reconcile.fluxcd.io/resetAt";

/// Where a HelmRelease is, as helm-controller last wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "phase")]
pub enum Phase {
    /// `spec.suspend: true`: helm-controller returns before any action.
    Suspended,
    /// An action runs now (`Reconciling=True` `Progressing`, `Running '<action>' action with
    /// timeout of <timeout>`); `since` is the condition's lastTransitionTime (RFC 3339).
    Running {
        /// `install`, `upgrade`, `uninstall`, `rollback`, `test`, `unlock`, ...
        action: String,
        /// The Go duration of the message, e.g. `10s`, `5m0s`.
        timeout: String,
        /// When the condition turned True.
        since: Option<String>,
    },
    /// A release action failed and remediation retries remain: helm-controller requeues
    /// and tries again (`ProgressingWithRetry`).
    Retrying,
    /// The retries are exhausted (`Stalled=True` `RetriesExceeded`) or another terminal
    /// state (`Stalled=True` with another reason): nothing happens until the spec changes or
    /// a force/reset request is made.
    Stalled {
        /// The Stalled reason.
        reason: String,
    },
    /// Ready=False for another reason (a dependency, the source, values): its message says.
    NotReady,
    /// Ready=True.
    Ready,
    /// No conditions yet: helm-controller has not reconciled it.
    Unreconciled,
}

/// The facts of one HelmRelease.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HelmReleaseFacts {
    /// `namespace/name` of the HelmRelease.
    pub key: String,
    /// The phase.
    pub phase: Phase,
    /// The Ready condition's reason and message (`InstallFailed`, `Helm install failed ...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<Condition>,
    /// The Released condition (the last release action's outcome).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released: Option<Condition>,
    /// The Stalled condition when True.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalled: Option<Condition>,
    /// `status.lastAttemptedReleaseAction`: `install` or `upgrade`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_action: Option<String>,
    /// Failed attempts of the last release action (`status.installFailures` or
    /// `status.upgradeFailures`).
    pub failures: i64,
    /// `spec.<install|upgrade>.remediation.retries` of that action (default 0; -1 is
    /// unlimited).
    pub retries: i64,
    /// Namespace of the release's objects: `spec.targetNamespace`, else the HelmRelease's.
    pub release_namespace: String,
    /// `chart@version` and Helm status of the newest `status.history` entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_release: Option<String>,
}

fn conditions(hr: &Value) -> Vec<Condition> {
    hr.pointer("/status/conditions")
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// Splits `Running 'install' action with timeout of 10s` into (`install`, `10s`)
/// (atomic_release.go `reconcilingMsg`).
pub fn running_action(message: &str) -> Option<(String, String)> {
    let rest = message.strip_prefix("Running '")?;
    let (action, rest) = rest.split_once('\'')?;
    let timeout = rest.strip_prefix(" action with timeout of ")?;
    Some((action.to_string(), timeout.trim().to_string()))
}

/// Reads a HelmRelease (`helm.toolkit.fluxcd.io/v2` JSON). Tolerant: missing fields are
/// absent facts, never an error.
pub fn facts(hr: &Value) -> HelmReleaseFacts {
    let conds = conditions(hr);
    let find = |t: &str| conds.iter().find(|c| c.type_ == t).cloned();
    let ready = find("Ready");
    let released = find("Released");
    let stalled = find("Stalled").filter(Condition::is_true);
    let reconciling = find("Reconciling").filter(Condition::is_true);
    let ns = str_at(hr, "/metadata/namespace").unwrap_or("");
    let name = str_at(hr, "/metadata/name").unwrap_or("");
    let last_action = str_at(hr, "/status/lastAttemptedReleaseAction").map(String::from);
    let upgrade = last_action.as_deref() == Some("upgrade");
    let failures = hr
        .pointer(if upgrade {
            "/status/upgradeFailures"
        } else {
            "/status/installFailures"
        })
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let retries = hr
        .pointer(if upgrade {
            "/spec/upgrade/remediation/retries"
        } else {
            "/spec/install/remediation/retries"
        })
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let suspended = hr.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let phase = if suspended {
        Phase::Suspended
    } else if let Some(s) = &stalled {
        Phase::Stalled {
            reason: s.reason().to_string(),
        }
    } else if let Some(r) = &reconciling {
        match (r.reason(), running_action(r.message())) {
            ("Progressing", Some((action, timeout))) => Phase::Running {
                action,
                timeout,
                since: r.last_transition_time.clone(),
            },
            ("ProgressingWithRetry", _) => Phase::Retrying,
            // "Fulfilling prerequisites" and the like: a run that has not reached an action.
            _ => Phase::Running {
                action: String::new(),
                timeout: String::new(),
                since: r.last_transition_time.clone(),
            },
        }
    } else {
        match &ready {
            Some(r) if r.is_true() => Phase::Ready,
            Some(_) => Phase::NotReady,
            None => Phase::Unreconciled,
        }
    };
    let latest_release = hr.pointer("/status/history/0").map(|h| {
        format!(
            "{}@{} ({})",
            str_at(h, "/chartName").unwrap_or("?"),
            str_at(h, "/chartVersion").unwrap_or("?"),
            str_at(h, "/status").unwrap_or("?")
        )
    });
    HelmReleaseFacts {
        key: format!("{ns}/{name}"),
        phase,
        ready,
        released,
        stalled,
        last_action,
        failures,
        retries,
        release_namespace: str_at(hr, "/spec/targetNamespace")
            .filter(|s| !s.is_empty())
            .unwrap_or(ns)
            .to_string(),
        latest_release,
    }
}

impl HelmReleaseFacts {
    /// Whether a failure is on record for the current attempt series: a failed attempt
    /// counted, `Released=False`, or Ready=False with `InstallFailed` / `UpgradeFailed`.
    pub fn has_failed(&self) -> bool {
        self.failures > 0
            || self.released.as_ref().is_some_and(Condition::is_false)
            || self
                .ready
                .as_ref()
                .is_some_and(|r| matches!(r.reason(), "InstallFailed" | "UpgradeFailed"))
    }

    /// The last failure's text: the Released condition's message when False, else Ready's.
    pub fn failure_message(&self) -> Option<&str> {
        self.released
            .as_ref()
            .filter(|c| c.is_false())
            .or(self.ready.as_ref().filter(|c| !c.is_true()))
            .map(Condition::message)
            .filter(|m| !m.is_empty())
    }

    /// The `flux` command that makes helm-controller act on a HelmRelease whose retries are
    /// exhausted without a spec change, and its kubectl equivalent (both annotations with one
    /// token, as flux2 `reconcile helmrelease --force` writes them; the shell sets `T`):
    /// `--force` runs one install/upgrade now. Only useful once the cause is gone outside Git.
    pub fn force_commands(name: &str, ns: &str) -> String {
        format!(
            "flux reconcile helmrelease {name} -n {ns} --force (or: T=$(date +%s); kubectl -n {ns} annotate --overwrite helmrelease/{name} reconcile.fluxcd.io/requestedAt=$T {FORCE_AT}=$T)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn phases_follow_atomic_release() {
        let hr = |conds: Value, status: Value| {
            let mut v = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "web", "namespace": "apps"}, "spec": {"install": {"remediation": {"retries": 1}}},
                "status": status});
            v["status"]["conditions"] = conds;
            v
        };
        let running = facts(&hr(
            json!([{"type": "Reconciling", "status": "True", "reason": "Progressing",
                "message": "Running 'install' action with timeout of 10s",
                "lastTransitionTime": "2026-12-01T21:00:00Z"},
                {"type": "Ready", "status": "Unknown", "reason": "Progressing",
                "message": "Running 'install' action with timeout of 10s"}]),
            json!({}),
        ));
        assert_eq!(
            running.phase,
            Phase::Running {
                action: "install".into(),
                timeout: "10s".into(),
                since: Some("2026-12-01T21:00:00Z".into())
            }
        );
        assert!(!running.has_failed());
        let retrying = facts(&hr(
            json!([{"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry",
                "message": "Helm install failed for release apps/web with chart web@0.1.0: context deadline exceeded"},
                {"type": "Ready", "status": "False", "reason": "InstallFailed",
                "message": "Helm install failed for release apps/web with chart web@0.1.0: context deadline exceeded"},
                {"type": "Released", "status": "False", "reason": "InstallFailed",
                "message": "Helm install failed for release apps/web with chart web@0.1.0: context deadline exceeded"}]),
            json!({"installFailures": 1, "lastAttemptedReleaseAction": "install"}),
        ));
        assert_eq!(retrying.phase, Phase::Retrying);
        assert!(retrying.has_failed());
        assert_eq!((retrying.failures, retrying.retries), (1, 1));
        let stalled = facts(&hr(
            json!([{"type": "Stalled", "status": "True", "reason": "RetriesExceeded",
                "message": "Failed to install after 2 attempt(s)"},
                {"type": "Ready", "status": "False", "reason": "InstallFailed",
                "message": "Helm install failed for release apps/web with chart web@0.1.0: context deadline exceeded"}]),
            json!({"installFailures": 2, "lastAttemptedReleaseAction": "install",
                "history": [{"chartName": "web", "chartVersion": "0.1.0", "status": "failed"}]}),
        ));
        assert_eq!(
            stalled.phase,
            Phase::Stalled {
                reason: "RetriesExceeded".into()
            }
        );
        assert_eq!(
            stalled.latest_release.as_deref(),
            Some("web@0.1.0 (failed)")
        );
        assert_eq!(
            stalled.failure_message(),
            Some(
                "Helm install failed for release apps/web with chart web@0.1.0: context deadline exceeded"
            )
        );
    }

    #[test]
    fn running_action_parses_the_reconciling_message() {
        assert_eq!(
            running_action("Running 'upgrade' action with timeout of 5m0s"),
            Some(("upgrade".into(), "5m0s".into()))
        );
        assert_eq!(running_action("Fulfilling prerequisites"), None);
    }
}
