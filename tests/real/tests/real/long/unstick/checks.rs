//! Issue 15 items 7 and 8 on the real control plane and the real kustomize-controller
//! (tests/realcluster): a healthChecks entry in the wrong namespace, a missing CRD on apply,
//! and a check that fails fast at a Deployment's progressDeadlineSeconds, each asserting the
//! class, the named blocker, the lever, and (for held checks) a predicted end within 10 % of
//! when the real controller ended the check.

use std::time::Duration;

use realcluster::testkit::{condition, eventually};

use realcluster::Cluster;
use serde_json::Value;

use super::{cluster, unstick_json};

fn running_checks(c: &Cluster, name: &str) {
    eventually(
        Duration::from_secs(90),
        "the real health check is running",
        || {
            condition(&c.kustomization(name), "Reconciling")["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks"))
                .then_some(())
        },
    );
}

/// Waits for the real controller to end the check; returns (Ready condition, its time).
fn check_ended(c: &Cluster, name: &str, within: Duration) -> (Value, jiff::Timestamp) {
    let r = eventually(within, "the real check ends", || {
        let r = condition(&c.kustomization(name), "Ready");
        (r["status"] == "False").then_some(r)
    });
    let at = r["lastTransitionTime"].as_str().unwrap().parse().unwrap();
    (r, at)
}

/// A `spec.healthChecks` entry naming a namespace where the object does not exist: the real
/// controller holds the check to its timeout (`status: 'NotFound'`); unstick names the entry
/// as a healthChecks entry (never "in the inventory"), NotFound, and predicts the end.
#[test]
fn wrong_namespace_health_check_is_named_and_its_end_predicted() {
    let c = &cluster();
    let name = "unstick-hc-ns";
    c.fleet(
        name,
        &[(
            "web.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  replicas: 0\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: registry.example.local/web:1\n",
        )],
        "  interval: 10m\n  path: ./\n  prune: true\n  timeout: 40s\n  healthChecks:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: web\n    namespace: nowhere\n",
    )
    .unwrap();
    running_checks(c, name);
    let (code, v, err) = unstick_json(c, &[&format!("ks/{name}"), "--dry-run"]);
    assert_ne!(code, 0, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    let b = &d["blocking"][0];
    assert_eq!(b["object"], "Deployment/nowhere/web", "{v:#}");
    assert_eq!(b["origin"], "healthChecks", "{b:#}");
    assert_eq!(b["kstatus"], "NotFound", "{b:#}");
    let m = b["message"].as_str().unwrap();
    assert!(!m.contains("inventory"), "{m}");
    assert!(m.contains("spec.healthChecks"), "{m}");
    // Other tests on the shared cluster may have a Deployment `web` too.
    assert!(m.contains("(a Deployment web exists in namespace "), "{m}");
    assert!(m.contains("default"), "{m}");
    assert!(b["fix"].as_str().unwrap().contains("namespace: "), "{b:#}");
    let predicted: jiff::Timestamp = d["healthCheck"]["endsAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (ready, _) = check_ended(c, name, Duration::from_secs(120));
    assert_eq!(ready["reason"], "HealthCheckFailed", "{ready}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("Deployment/nowhere/web status: 'NotFound'"),
        "{ready}"
    );
    super::assert_end_predicted(predicted, &ready, 40.0);
}

/// A kind whose CRD is missing, on apply: the real controller fails the run with `no matches
/// for kind`; unstick says the CRD is missing and sends no request (fix-in-git).
#[test]
fn missing_crd_on_apply_is_said_and_no_request_is_sent() {
    let c = &cluster();
    let name = "unstick-nocrd";
    c.fleet(
        name,
        &[(
            "es.yaml",
            "apiVersion: external-secrets.io/v1beta1\nkind: ExternalSecret\nmetadata:\n  name: db-creds\n  namespace: default\nspec: {}\n",
        )],
        "  interval: 10m\n  path: ./\n  prune: true\n  timeout: 40s\n",
    )
    .unwrap();
    // The first Ready=False can be "Source artifact not found, retrying in 30s" (the
    // Kustomization ran before source-controller stored the first artifact): wait for the
    // apply's own failure.
    let ready = eventually(Duration::from_secs(120), "the apply fails", || {
        let r = condition(&c.kustomization(name), "Ready");
        (r["status"] == "False" && r["reason"] == "ReconciliationFailed").then_some(r)
    });
    let (code, v, err) = unstick_json(c, &[&format!("ks/{name}"), "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "reconcile-failed", "{ready}\n{v:#}");
    assert!(
        d["missingCrds"][0]
            .as_str()
            .is_some_and(|m| m.starts_with("ExternalSecret (external-secrets.io/v1beta1)")),
        "{ready}\n{v:#}"
    );
    assert_eq!(v["plan"]["lever"], "fix-in-git", "{v:#}");
    assert_eq!(v["plan"]["steps"], serde_json::json!([]), "{v:#}");
}

/// Fail-fast: a Deployment that cannot pull, with progressDeadlineSeconds 20 under a 2m
/// timeout; the real deployment controller marks it ProgressDeadlineExceeded and the real
/// kustomize-controller ends the check then. unstick predicts that end (not the 2m deadline)
/// within 10 % of the timeout, and names the Deployment with its pod's pull error.
#[test]
fn deadline_predicts_fail_fast_on_the_real_controller() {
    let c = &cluster();
    let name = "unstick-ff";
    let ns = "unstick-ff";
    c.fleet(
        name,
        &[
            ("ns.yaml", &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")),
            (
                "web.yaml",
                &format!(
                    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 20\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: 0.1.1\n"
                ),
            ),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 2m\n",
    )
    .unwrap();
    running_checks(c, name);
    // The Deployment's Progressing condition carries its lastUpdateTime once it rolled out.
    eventually(Duration::from_secs(30), "Progressing condition", || {
        let d = c
            .kubectl(&["-n", ns, "get", "deploy", "web", "-o", "json"])
            .ok()?;
        d.contains("lastUpdateTime").then_some(())
    });
    let (_, v, err) = unstick_json(c, &[&format!("ks/{name}"), "--dry-run"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}\n{err}");
    let hc = &d["healthCheck"];
    assert!(hc["failFastAt"].is_string(), "{hc:#}");
    assert!(
        hc["failFastBecause"].as_str().unwrap().contains(&format!(
            "Deployment/{ns}/web passes its progressDeadlineSeconds (20s)"
        )),
        "{hc:#}"
    );
    assert_eq!(d["blocking"][0]["object"], format!("Deployment/{ns}/web"));
    let predicted: jiff::Timestamp = hc["endsAt"].as_str().unwrap().parse().unwrap();
    let (ready, ended) = check_ended(c, name, Duration::from_secs(150));
    assert_eq!(ready["reason"], "HealthCheckFailed", "{ready}");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("failed early due to stalled resources"),
        "{ready}"
    );
    let off = (ended.as_second() - predicted.as_second()).abs();
    assert!(
        off as f64 <= 120.0 * 0.10,
        "predicted {predicted}, the real controller ended at {ended} ({off}s off)"
    );
}
