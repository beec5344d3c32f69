//! A Kustomization whose health check (`wait: true`) is held by a HelmRelease, on snapshots
//! shaped as helm-controller v1.4.3 writes the HelmRelease (internal/reconcile/
//! atomic_release.go, install.go) and kustomize-controller v1.9.6 reads it (generic kstatus:
//! Reconciling=True InProgress, Stalled=True Failed, Ready=False/Unknown InProgress):
//! - installing with no failure seen: waiting, not stuck (exit 0, lever `wait`, no write);
//! - installing while the release's pod cannot pull its image: a finding naming the pod and
//!   the image, the fix in Git, no write to the Kustomization;
//! - a failed install being retried: the attempts counted against the retries;
//! - retries exhausted (Stalled RetriesExceeded) after the check failed early: the HelmRelease
//!   is named with its last failure, the Git fix and the force request; no write to the
//!   Kustomization unless `--with-source` (after a fix was pushed);
//! - an upgrade out of retries after its rollback: the upgrade counters and the failed
//!   upgrade's message, not the rollback's.

use serde_json::{Value, json};
use unstick::diagnose::{Class, is_finding};
use unstick::lever::{self, Lever, Options};
use unstick::snapshot::Snapshot;

use crate::support::plan_with;
use crate::wait_set::{REV, TOKEN, diag, in_flight, plan, snap};

const HR_ID: &str = "apps_web_helm.toolkit.fluxcd.io_HelmRelease";
const FAILED: &str =
    "Helm install failed for release apps/web with chart web@0.1.0: context deadline exceeded";

fn hr(conditions: Value, status: Value) -> Value {
    let mut h = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "apps", "generation": 1, "uid": "hr-1"},
        "spec": {"interval": "1m", "timeout": "10s",
            "install": {"remediation": {"retries": 1}},
            "chart": {"spec": {"chart": "./charts/web",
                "sourceRef": {"kind": "GitRepository", "name": "fleet", "namespace": "flux-system"}}}},
        "status": status});
    h["status"]["observedGeneration"] = json!(1);
    h["status"]["conditions"] = conditions;
    h
}

fn installing() -> Value {
    hr(
        json!([{"type": "Reconciling", "status": "True", "reason": "Progressing",
            "message": "Running 'install' action with timeout of 10s",
            "lastTransitionTime": "2026-11-30T07:20:55Z"},
            {"type": "Ready", "status": "Unknown", "reason": "Progressing",
            "message": "Running 'install' action with timeout of 10s",
            "lastTransitionTime": "2026-11-30T07:20:55Z"}]),
        json!({"lastAttemptedReleaseAction": "install"}),
    )
}

/// The chart's Deployment (origin labels as helm-controller's post-renderer writes them) and
/// its pod waiting on an image pull that failed.
fn release_deployment_and_pod() -> (Value, Value) {
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps", "uid": "d-1",
            "labels": {"helm.toolkit.fluxcd.io/name": "web",
                "helm.toolkit.fluxcd.io/namespace": "apps",
                "app.kubernetes.io/managed-by": "Helm"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example.local/web:missing"}]}}},
        "status": {"observedGeneration": 1, "replicas": 1, "unavailableReplicas": 1}});
    let p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-7d9f-x2", "namespace": "apps", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "registry.example.local/web:missing"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "web", "ready": false,
            "image": "registry.example.local/web:missing",
            "state": {"waiting": {"reason": "ErrImagePull",
                "message": "rpc error: code = NotFound desc = failed to pull and unpack image \"registry.example.local/web:missing\""}}}]}});
    (d, p)
}

fn with_source(s: &Snapshot, name: &str) -> lever::Plan {
    plan_with(
        s,
        name,
        TOKEN,
        &Options {
            with_source: true,
            ..Options::default()
        },
    )
}

/// helm-controller runs the install within its own timeout and nothing failed: waiting, not
/// stuck. Not a finding, the lever writes nothing and says when the install ends at the latest
/// (07:20:55 + 10s).
#[test]
fn an_installing_helmrelease_is_waiting_not_stuck() {
    let s = snap(
        "v1.9.6",
        vec![in_flight("web", json!({"wait": true}), &[HR_ID])],
        vec![installing()],
        vec![],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    let d = diag(&s, "web");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    let b = &d.blocking[0];
    assert_eq!(b.object, "HelmRelease/apps/web");
    assert_eq!(b.kstatus, "InProgress");
    assert!(b.progressing, "{b:?}");
    assert!(b.fix.is_none(), "{b:?}");
    assert!(
        b.message.starts_with(
            "helm-controller is running 'install' (timeout 10s) since 2026-11-30T07:20:55Z: in progress, no failure seen, not stuck; it ends by 07:21:05"
        ),
        "{}",
        b.message
    );
    assert!(!is_finding(&d), "{d:?}");
    let p = plan(&s, "web");
    assert_eq!(p.lever, Lever::Wait, "{p:?}");
    assert!(p.steps.is_empty(), "{:?}", p.steps);
    assert!(p.recommend_gate_arg.is_none());
}

/// The same install while the release's pod cannot pull its image: the install will fail at
/// its timeout, so this is a finding; the pod and the image are named, the fix says to make
/// the image pullable or change the values in Git, and no write to the Kustomization is planned.
#[test]
fn an_install_whose_pod_cannot_pull_names_the_pod_and_the_image() {
    let (dep, pod) = release_deployment_and_pod();
    let s = snap(
        "v1.9.6",
        vec![in_flight("web", json!({"wait": true}), &[HR_ID])],
        vec![installing(), dep],
        vec![pod],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    let d = diag(&s, "web");
    let b = &d.blocking[0];
    assert!(!b.progressing, "{b:?}");
    assert_eq!(b.pods.len(), 1, "{b:?}");
    assert_eq!(b.pods[0].reason, "ErrImagePull");
    assert_eq!(
        b.pods[0].image.as_deref(),
        Some("registry.example.local/web:missing")
    );
    assert_eq!(
        b.message,
        "helm-controller is running 'install' (timeout 10s), but the release's pods are failing; pod apps/web-7d9f-x2 ErrImagePull (registry.example.local/web:missing): the install fails at its timeout unless that changes; helm-controller then retries (spec.install.remediation.retries: 1) and stalls when the retries run out"
    );
    let fix = b.fix.as_deref().unwrap();
    assert!(
        fix.starts_with(
            "the release's pods cannot pull registry.example.local/web:missing (ErrImagePull)"
        ),
        "{fix}"
    );
    assert!(fix.contains("fix the chart or its values in Git"), "{fix}");
    assert!(is_finding(&d));
    let p = plan(&s, "web");
    assert_eq!(p.lever, Lever::FixBlockers, "{p:?}");
    assert!(p.steps.is_empty(), "{:?}", p.steps);
}

/// A failed install with a retry left: helm-controller retries (ProgressingWithRetry); the
/// failure and the count are said, never "in progress".
#[test]
fn a_retried_install_counts_its_attempts() {
    let h = hr(
        json!([{"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry",
            "message": FAILED},
            {"type": "Ready", "status": "False", "reason": "InstallFailed", "message": FAILED},
            {"type": "Released", "status": "False", "reason": "InstallFailed", "message": FAILED}]),
        json!({"installFailures": 1, "failures": 1, "lastAttemptedReleaseAction": "install"}),
    );
    let s = snap(
        "v1.9.6",
        vec![in_flight("web", json!({"wait": true}), &[HR_ID])],
        vec![h],
        vec![],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    let d = diag(&s, "web");
    let b = &d.blocking[0];
    assert!(!b.progressing);
    assert_eq!(
        b.message,
        format!(
            "install failed and helm-controller retries (Reconciling ProgressingWithRetry): 1 of 2 attempt(s) failed (spec.install.remediation.retries: 1): {FAILED}; each attempt fails the same way until the cause is fixed, then it stalls (RetriesExceeded)"
        )
    );
    assert!(is_finding(&d));
}

/// Retries exhausted: helm-controller marks Stalled=True RetriesExceeded, kustomize-controller
/// reads it Failed and the check fails early. The HelmRelease is named with its last failure
/// and pod; the fix names Git and the force request; a request on the Kustomization is not
/// offered (it re-applies the same HelmRelease), but `--with-source` after a push is.
#[test]
fn retries_exhausted_is_named_with_the_git_fix_and_the_force_request() {
    let h = hr(
        json!([{"type": "Stalled", "status": "True", "reason": "RetriesExceeded",
            "message": "Failed to install after 2 attempt(s)"},
            {"type": "Ready", "status": "False", "reason": "InstallFailed", "message": FAILED},
            {"type": "Released", "status": "False", "reason": "InstallFailed", "message": FAILED}]),
        json!({"installFailures": 2, "failures": 2, "lastAttemptedReleaseAction": "install",
            "history": [{"name": "web", "namespace": "apps", "version": 1, "status": "failed",
                "chartName": "web", "chartVersion": "0.1.0"}]}),
    );
    let (dep, pod) = release_deployment_and_pod();
    let mut k = in_flight("web", json!({"wait": true}), &[HR_ID]);
    k["status"]["lastAppliedRevision"] = json!(REV);
    k["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "reason": "HealthCheckFailed", "lastTransitionTime": "2026-11-30T07:20:40Z",
        "message": "health check failed after 3.01s: failed early due to stalled resources: [HelmRelease/apps/web status: 'Failed']"}]);
    let s = snap(
        "v1.9.6",
        vec![k],
        vec![h, dep],
        vec![pod],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    let d = diag(&s, "web");
    assert_eq!(d.class, Class::HealthCheckFailed);
    let b = &d.blocking[0];
    assert_eq!(b.object, "HelmRelease/apps/web");
    assert_eq!(b.kstatus, "Failed");
    assert!(
        b.message.starts_with(&format!(
            "helm-controller gave up (Stalled RetriesExceeded: Failed to install after 2 attempt(s)): {FAILED}; pod apps/web-7d9f-x2 ErrImagePull (registry.example.local/web:missing)"
        )),
        "{}",
        b.message
    );
    let fix = b.fix.as_deref().unwrap();
    assert!(fix.contains("fix the chart or its values in Git"), "{fix}");
    assert!(
        fix.contains("flux reconcile helmrelease web -n apps --force"),
        "{fix}"
    );
    assert!(
        fix.contains("reconcile.fluxcd.io/requestedAt=$T reconcile.fluxcd.io/forceAt=$T"),
        "{fix}"
    );
    assert!(is_finding(&d));
    let p = plan(&s, "web");
    assert_eq!(p.lever, Lever::FixBlockers, "{p:?}");
    assert!(p.steps.is_empty(), "{:?}", p.steps);
    assert!(
        p.why
            .iter()
            .any(|w| w.starts_with("HelmRelease/apps/web is Failed: ")),
        "{:?}",
        p.why
    );
    let p = with_source(&s, "web");
    assert_eq!(p.lever, Lever::ReconcileSource, "{p:?}");
    assert_eq!(p.steps.len(), 2, "{:?}", p.steps);
}

/// An upgrade out of retries after its rollback remediation (helm-controller v1.4:
/// `spec.upgrade.remediation.retries: 2`, remediateLastFailure defaults to true with retries,
/// so the last failure is rolled back, then `Stalled RetriesExceeded`): the upgrade counters
/// and retries are the ones read, the quoted failure is the Released condition's (the upgrade
/// that failed), not Ready's summary of the rollback.
#[test]
fn an_upgrade_out_of_retries_reads_the_upgrade_counters() {
    const UPGRADE_FAILED: &str =
        "Helm upgrade failed for release apps/web with chart web@0.2.0: context deadline exceeded";
    let mut h = hr(
        json!([{"type": "Stalled", "status": "True", "reason": "RetriesExceeded",
            "message": "Failed to upgrade after 3 attempt(s)"},
            {"type": "Ready", "status": "False", "reason": "RollbackSucceeded",
            "message": "Helm rollback to previous release apps/web.v1 with chart web@0.1.0 succeeded"},
            {"type": "Released", "status": "False", "reason": "UpgradeFailed", "message": UPGRADE_FAILED},
            {"type": "Remediated", "status": "True", "reason": "RollbackSucceeded",
            "message": "Helm rollback to previous release apps/web.v1 with chart web@0.1.0 succeeded"}]),
        json!({"installFailures": 0, "upgradeFailures": 3, "failures": 3,
            "lastAttemptedReleaseAction": "upgrade"}),
    );
    h["spec"]["upgrade"] = json!({"remediation": {"retries": 2}});
    let s = snap(
        "v1.9.6",
        vec![in_flight("web", json!({"wait": true}), &[HR_ID])],
        vec![h],
        vec![],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    let d = diag(&s, "web");
    let b = &d.blocking[0];
    assert_eq!(b.kstatus, "Failed");
    assert_eq!(
        b.message,
        format!(
            "helm-controller gave up (Stalled RetriesExceeded: Failed to upgrade after 3 attempt(s)): {UPGRADE_FAILED}; it does not try again until the HelmRelease's spec, chart or values change or a force/reset request is made, and kustomize-controller reads it as Failed, ending every health check on it early"
        )
    );
    assert!(
        b.fix
            .as_deref()
            .unwrap()
            .contains("runs one Helm release action (install, or upgrade of the failed release)"),
        "{:?}",
        b.fix
    );
}
