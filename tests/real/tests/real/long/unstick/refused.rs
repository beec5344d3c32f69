//! Issue 40 item 1: applies the real kube-apiserver v1.36.3 refuses the same way on every run,
//! through the real kustomize-controller v1.9.6. Each is a finding with the fix for its cause,
//! never a rerun: `kubectl unstick` plans `fix-in-git` and writes nothing, and `kubectl gitops
//! verify` says the same fix (never "run kubectl unstick"). Catalogue row 7 (a Job's template
//! is immutable) is then fixed the way the fix says, and the real controller recreates the Job.

use std::time::Duration;

use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, FLUX_NS};
use serde_json::Value;

use super::{cluster, unstick_json as unstick};
use crate::ready_at;

const T: Duration = Duration::from_secs(180);
const VERIFY: &str = crate::bin!("kubectl-gitops-verify");

fn ns_yaml(ns: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")
}

/// Until Kustomization `name` failed its apply of `sha` (Ready=False ReconciliationFailed with
/// `needle` in the message); returns the real message.
fn refused_at(c: &Cluster, name: &str, sha: &str, needle: &str) -> String {
    eventually(T, &format!("{name}: the real apply of {sha} fails"), || {
        let k = c.kustomization(name);
        let r = condition(&k, "Ready");
        let m = r["message"].as_str().unwrap_or_default();
        (r["status"] == "False"
            && r["reason"] == "ReconciliationFailed"
            && m.contains(needle)
            && k["status"]["lastAttemptedRevision"]
                .as_str()
                .is_some_and(|a| a.ends_with(sha)))
        .then(|| m.to_string())
    })
}

/// `kubectl unstick ks/NAME` (no --dry-run: it would execute a lever) on a refused apply: a
/// finding (exit 1), the refusal with its fix, lever `fix-in-git` with no step, and no
/// requestedAt written. Returns the report.
fn unstick_plans_no_rerun(c: &Cluster, name: &str) -> Value {
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "-n", FLUX_NS]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "reconcile-failed", "{v:#}");
    let p = &v["plan"];
    assert_eq!(p["lever"], "fix-in-git", "{p:#}");
    assert_eq!(p["steps"], serde_json::json!([]), "{p:#}");
    assert!(
        p["why"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("nothing a rerun does")),
        "{p:#}"
    );
    let k = c.kustomization(name);
    assert!(
        k["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"].is_null(),
        "no request written: {k:#}"
    );
    v
}

/// `kubectl gitops verify --source gitrepository/NAME`: link 2 broken (exit 1), its fix the
/// refusal's own (unstick's), not `kubectl unstick`.
fn verify_says_the_fix(c: &Cluster, name: &str, fix: &str) {
    let out = std::process::Command::new(VERIFY)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["--source", &format!("gitrepository/{name}"), "-o", "json"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(1), "{r:#}");
    let l = r["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == "kustomizations")
        .unwrap();
    assert_eq!(l["verdict"], "broken", "{l:#}");
    let f = l["fix"].as_str().unwrap();
    assert_eq!(f, fix, "verify's fix is unstick's: {l:#}");
    assert!(!f.contains("kubectl unstick"), "{f}");
}

/// Catalogue row 7 for real: a Job's pod template changed in Git. The real API server refuses
/// it (`field is immutable`) on every apply; unstick names the Job, the field and the
/// catalogue's fix (an initContainer, or recreate with force and what that means), plans no
/// request and writes nothing; verify's fix is the same words. Then the fix it names, the
/// per-object force annotation pushed to Git: the real kustomize-controller deletes and
/// recreates the Job (a new uid) and is Ready at that revision.
#[test]
fn an_immutable_job_template_is_a_fix_not_a_rerun() {
    let c = &cluster();
    let name = "unstick-immutable-job";
    let job = |tag: &str, annotations: &str| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {name}\n{annotations}spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: registry.example.local:5000/db-migrate:{tag}\n"
        )
    };
    let first = c
        .fleet(
            name,
            &[("ns.yaml", &ns_yaml(name)), ("job.yaml", &job("1.0", ""))],
            "  interval: 10m\n  retryInterval: 20s\n  path: ./\n  prune: true\n",
        )
        .unwrap();
    ready_at(c, name, &first);
    let uid = c.get_json(&["-n", name, "get", "job", "migrate"])["metadata"]["uid"].clone();
    let second = c
        .push(name, &[("job.yaml", &job("1.1", ""))], "next migration")
        .unwrap();
    crate::fetch_source_now(c, name);
    let message = refused_at(c, name, &second, "field is immutable");
    eprintln!("row 7, the real Ready message: {message}");
    assert!(
        message.starts_with(&format!("Job/{name}/migrate dry-run failed (Invalid): Job.batch \"migrate\" is invalid: spec.template: Invalid value: ")),
        "{message}"
    );

    let v = unstick_plans_no_rerun(c, name);
    let r = &v["diagnosis"]["refused"];
    assert_eq!(r.as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(r[0]["kind"], "immutable", "{r:#}");
    assert_eq!(r[0]["object"], format!("Job/{name}/migrate"), "{r:#}");
    assert_eq!(
        r[0]["fields"],
        serde_json::json!(["spec.template"]),
        "{r:#}"
    );
    let fix = r[0]["fix"].as_str().unwrap();
    for needle in [
        "Migrations belong in an initContainer",
        "kustomize.toolkit.fluxcd.io/force: enabled",
        &format!("spec.force: true` on Kustomization {FLUX_NS}/{name}"),
        "it runs again",
    ] {
        assert!(fix.contains(needle), "{needle}: {fix}");
    }
    assert_eq!(v["plan"]["effect"], fix, "{v:#}");
    verify_says_the_fix(c, name, fix);

    // The fix, as it says: the per-object force annotation in Git.
    let third = c
        .push(
            name,
            &[(
                "job.yaml",
                &job(
                    "1.1",
                    "  annotations:\n    kustomize.toolkit.fluxcd.io/force: enabled\n",
                ),
            )],
            "recreate the migrate Job",
        )
        .unwrap();
    crate::fetch_source_now(c, name);
    ready_at(c, name, &third);
    let after = c.get_json(&["-n", name, "get", "job", "migrate"]);
    assert_ne!(after["metadata"]["uid"], uid, "recreated: {after:#}");
    assert_eq!(
        after["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.local:5000/db-migrate:1.1"
    );
}

/// A ValidatingAdmissionPolicy (built into the real API server, CEL: a real denial, no webhook
/// server) denies a ConfigMap the fleet applies: unstick names the policy, its binding and its
/// message, and plans no rerun; verify says the same fix.
#[test]
fn an_admission_policy_denial_is_a_fix_not_a_rerun() {
    let c = &cluster();
    let name = "unstick-vap-denied";
    c.apply_yaml(&format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"\"]\n      apiVersions: [v1]\n      operations: [CREATE, UPDATE]\n      resources: [configmaps]\n  validations:\n  - expression: \"!has(object.data) || !('mode' in object.data) || object.data['mode'] != 'debug'\"\n    message: debug mode is not allowed here\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: {name}}}\nspec:\n  policyName: {name}\n  validationActions: [Deny]\n  matchResources:\n    namespaceSelector:\n      matchLabels: {{kubernetes.io/metadata.name: {name}}}\n"
    ))
    .unwrap();
    let cm = |mode: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {name}\ndata:\n  mode: {mode}\n"
        )
    };
    let sha = c
        .fleet(
            name,
            &[("ns.yaml", &ns_yaml(name)), ("cm.yaml", &cm("debug"))],
            "  interval: 10m\n  retryInterval: 20s\n  path: ./\n  prune: true\n",
        )
        .unwrap();
    let message = refused_at(c, name, &sha, "denied request");
    eprintln!("admission denial, the real Ready message: {message}");
    let v = unstick_plans_no_rerun(c, name);
    let r = &v["diagnosis"]["refused"][0];
    assert_eq!(r["kind"], "admission-denied", "{v:#}");
    assert_eq!(r["object"], format!("ConfigMap/{name}/settings"), "{r:#}");
    assert_eq!(
        r["by"],
        format!("ValidatingAdmissionPolicy {name} (binding {name})"),
        "{r:#}"
    );
    let fix = r["fix"].as_str().unwrap();
    assert!(fix.contains("debug mode is not allowed here"), "{fix}");
    verify_says_the_fix(c, name, fix);
    // The fix it names: the ConfigMap changed in Git to pass the policy.
    let ok = c
        .push(name, &[("cm.yaml", &cm("normal"))], "pass the policy")
        .unwrap();
    crate::fetch_source_now(c, name);
    ready_at(c, name, &ok);
}

/// RBAC: a Kustomization with `spec.serviceAccountName` that may not write what it applies.
/// kustomize-controller impersonates that ServiceAccount and the real API server refuses
/// (Forbidden): unstick names the ServiceAccount, the verb and the resource, and plans no
/// rerun; verify says the same fix.
#[test]
fn a_forbidden_apply_is_a_fix_not_a_rerun() {
    let c = &cluster();
    let name = "unstick-forbidden";
    // The namespace exists (an admin made it); the ServiceAccount may not write in it.
    c.apply_yaml(&ns_yaml(name)).unwrap();
    let sha = c
        .fleet(
            name,
            &[(
                "cm.yaml",
                &format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {name}\ndata:\n  mode: normal\n"
                ),
            )],
            "  interval: 10m\n  retryInterval: 20s\n  path: ./\n  prune: true\n  serviceAccountName: deployer\n",
        )
        .unwrap();
    let message = refused_at(c, name, &sha, "forbidden");
    eprintln!("RBAC, the real Ready message: {message}");
    let v = unstick_plans_no_rerun(c, name);
    let r = &v["diagnosis"]["refused"][0];
    assert_eq!(r["kind"], "forbidden", "{v:#}");
    assert_eq!(
        r["by"], "system:serviceaccount:flux-system:deployer",
        "{r:#}"
    );
    let fix = r["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(&format!(
            "ServiceAccount flux-system/deployer (spec.serviceAccountName of Kustomization {FLUX_NS}/{name}"
        )) && fix.contains("configmaps"),
        "{fix}"
    );
    verify_says_the_fix(c, name, fix);
}
