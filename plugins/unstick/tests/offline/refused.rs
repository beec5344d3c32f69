//! Issue 40 item 1 offline: a Kustomization whose apply the API server refuses the same way on
//! every run (the Ready messages of the real kustomize-controller v1.9.6 on kube-apiserver
//! v1.36.3, tests/real `unstick::refused`) is a finding with the fix for its cause: the plan
//! is `fix-in-git` with no write, never request-reconcile or suspend-resume. A failure a rerun
//! may pass keeps the request lever.

use serde_json::{Value, json};
use unstick::diagnose::{Class, RefusalKind};
use unstick::lever::{Lever, Options};
use unstick::report::root_cause_cell;

use crate::support::plan_with;
use crate::wait_set::{REV, TOKEN, diag, plan, snap};

fn failed(name: &str, message: &str) -> Value {
    json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "10m", "path": "./apps", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"observedGeneration": 1, "lastAttemptedRevision": REV, "conditions": [
            {"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry",
             "message": format!("Detecting drift for revision {REV} with a timeout of 9m30s")},
            {"type": "Ready", "status": "False", "reason": "ReconciliationFailed", "message": message}]}})
}

/// Catalogue row 7: the real message for a Job whose pod template changed.
const ROW7: &str = "Job/apps/migrate dry-run failed (Invalid): Job.batch \"migrate\" is invalid: spec.template: Invalid value: core.PodTemplateSpec{ObjectMeta:v1.ObjectMeta{Name:\"\", GenerateName:\"\", Namespace:\"\", Labels:map[string]string{\"batch.kubernetes.io/controller-uid\":\"0c1d\", \"batch.kubernetes.io/job-name\":\"migrate\"}}}: field is immutable";

#[test]
fn an_immutable_job_is_fix_in_git_with_the_catalogue_fix_and_no_write() {
    let s = snap("v1.9.6", vec![failed("apps", ROW7)], vec![], vec![], &[]);
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::ReconcileFailed);
    assert_eq!(d.refused.len(), 1);
    assert_eq!(d.refused[0].kind, RefusalKind::Immutable);
    assert_eq!(d.refused[0].object, "Job/apps/migrate");
    assert_eq!(
        root_cause_cell(&d),
        "Job/apps/migrate spec.template immutable"
    );
    let p = plan(&s, "apps");
    // Before: request-reconcile, "a new run starts as soon as a worker is free".
    assert_eq!(p.lever, Lever::FixInGit, "{p:#?}");
    assert!(p.steps.is_empty(), "{p:#?}");
    assert!(
        p.why.iter().any(|w| w.contains("nothing a rerun does")),
        "{p:#?}"
    );
    assert!(
        p.effect.contains("Migrations belong in an initContainer")
            && p.effect
                .contains("spec.force: true` on Kustomization flux-system/apps")
            && p.effect.contains("it runs again"),
        "{}",
        p.effect
    );
    // --with-source: a fix pushed to Git is fetched, then the run that applies it.
    let w = plan_with(
        &s,
        "apps",
        TOKEN,
        &Options {
            with_source: true,
            ..Options::default()
        },
    );
    assert_eq!(w.lever, Lever::ReconcileSource);
    assert_eq!(w.steps.len(), 2);
}

#[test]
fn an_admission_denial_and_rbac_are_fix_in_git_too() {
    for (m, kind) in [
        (
            "ConfigMap/apps/settings dry-run failed (Invalid): configmaps \"settings\" is forbidden: ValidatingAdmissionPolicy 'no-debug' with binding 'no-debug' denied request: debug mode is not allowed here",
            RefusalKind::AdmissionDenied,
        ),
        (
            "ConfigMap/apps/settings dry-run failed (Forbidden): configmaps \"settings\" is forbidden: User \"system:serviceaccount:flux-system:deployer\" cannot patch resource \"configmaps\" in API group \"\" in the namespace \"apps\"",
            RefusalKind::Forbidden,
        ),
    ] {
        let s = snap("v1.9.6", vec![failed("apps", m)], vec![], vec![], &[]);
        let d = diag(&s, "apps");
        assert_eq!(d.refused[0].kind, kind, "{m}");
        let p = plan(&s, "apps");
        assert_eq!(p.lever, Lever::FixInGit, "{m}: {p:#?}");
        assert!(p.steps.is_empty());
    }
}

/// A webhook that cannot be called may answer the next run: the request lever stays.
#[test]
fn a_webhook_that_cannot_be_called_keeps_the_request() {
    let m = "ConfigMap/apps/settings dry-run failed (InternalError): Internal error occurred: failed calling webhook \"v.example.com\": failed to call webhook: Post \"https://v.apps.svc:443/validate\": dial tcp 10.96.0.12:443: connect: connection refused";
    let s = snap("v1.9.6", vec![failed("apps", m)], vec![], vec![], &[]);
    assert!(diag(&s, "apps").refused.is_empty());
    assert_eq!(plan(&s, "apps").lever, Lever::RequestReconcile);
}
