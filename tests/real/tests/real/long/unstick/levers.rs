//! unstick's lever matrix on the real kustomize-controller generations (tests/realcluster):
//! v1.9.6 with CancelHealthCheckOnNewRevision off and on, and v1.7.3 with it on. Each case holds
//! a real in-flight health check on a Deployment whose image cannot be pulled, pushes the fix,
//! then runs `kubectl unstick --yes --with-source`: the lever it picks for that generation must
//! really free the check, proven by Ready=True at the fix revision well before the held check's
//! own deadline (which is what waiting would cost).

use std::time::{Duration, Instant};

use realcluster::testkit::eventually;
use realcluster::{ClusterOptions, bins};
use serde_json::Value;

use super::BIN;
const GOOD: &str = "registry.example.local:5000/podinfo:6.7.0";
/// The held check's timeout: long enough that "waiting it out" is clearly distinguishable.
const TIMEOUT_SECS: u64 = 240;

fn deployment(image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: levers\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: {image}\n"
    )
}

/// Holds a real check, pushes the fix, runs unstick; returns (lever, unstick JSON).
fn hold_fix_and_unstick(opts: ClusterOptions, extra: &[&str]) -> (String, Value, Duration) {
    let c = crate::start_cluster(ClusterOptions {
        images: vec![GOOD.to_owned()],
        ..opts
    })
    .unwrap_or_else(|e| panic!("{e}"));
    c.fleet(
        "levers",
        &[
            (
                "ns.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: levers\n",
            ),
            ("web.yaml", &deployment("0.1.1")),
        ],
        &format!(
            "  interval: 60m\n  path: ./\n  prune: true\n  wait: true\n  timeout: {TIMEOUT_SECS}s\n"
        ),
    )
    .unwrap();
    let held_since = eventually(Duration::from_secs(90), "the real check is held", || {
        let k = c.kustomization("levers");
        let r = k["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|x| x["type"] == "Reconciling")?
            .clone();
        r["message"]
            .as_str()?
            .starts_with("Running health checks")
            .then(Instant::now)
    });
    let fix = c
        .push(
            "levers",
            &[("web.yaml", &deployment(GOOD))],
            "web: pullable image",
        )
        .unwrap();
    let mut args = vec!["ks/levers", "--yes", "--with-source", "-o", "json"];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(&args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("unstick {}:\n{stderr}", args.join(" "));
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "not recovered: {stdout}\n{stderr}"
    );
    // Proof on the cluster itself, not only the plugin's word.
    let k = c.kustomization("levers");
    let ready = k["status"]["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["type"] == "Ready").cloned())
        .unwrap();
    assert_eq!(ready["status"], "True", "{k}");
    assert_eq!(
        k["status"]["lastAppliedRevision"],
        format!("main@sha1:{fix}"),
        "{}",
        k["status"]
    );
    let took = held_since.elapsed();
    assert!(
        took < Duration::from_secs(TIMEOUT_SECS - 60),
        "freed only after {took:?}: no sooner than waiting out the {TIMEOUT_SECS}s check"
    );
    let lever = find_str(&v, "lever").unwrap_or_default();
    (lever, v, took)
}

fn find_str(v: &Value, key: &str) -> Option<String> {
    match v {
        Value::Object(m) => m
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| m.values().find_map(|x| find_str(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_str(x, key)),
        _ => None,
    }
}

/// v1.9.6, gate off: nothing at the API cancels the running check (a requestedAt or a new
/// revision only queues behind it). Restarting the controller cancels every in-flight run; the
/// fresh run applies the fix.
#[test]
fn current_gate_off_restart_controller_frees_the_real_check() {
    let (lever, v, took) =
        hold_fix_and_unstick(ClusterOptions::default(), &["--restart-controller"]);
    assert_eq!(lever, "restart-controller", "{v}");
    eprintln!(
        "{} gate off: {lever} freed the check {took:?} after it started",
        bins::KC_CURRENT
    );
}

/// v1.9.6, gate on: any re-queue event (the new revision, a requestedAt) cancels the check
/// (Ready=False HealthCheckCanceled) and the fresh run applies the fix.
#[test]
fn current_gate_on_request_reconcile_frees_the_real_check() {
    let (lever, v, took) = hold_fix_and_unstick(
        ClusterOptions {
            kustomize_controller_args: vec![
                "--feature-gates=CancelHealthCheckOnNewRevision=true".into(),
            ],
            ..ClusterOptions::default()
        },
        &[],
    );
    assert!(
        lever == "request-reconcile" || lever == "reconcile-source",
        "{lever}: {v}"
    );
    eprintln!(
        "{} gate on: {lever} freed the check {took:?} after it started",
        bins::KC_CURRENT
    );
}

/// v1.7.3, gate on: the v1.7 generation cancels only on a new source revision, so fetching the
/// fix (reconcile-source) is what frees the check.
#[test]
fn v17_gate_on_new_revision_frees_the_real_check() {
    let (lever, v, took) = hold_fix_and_unstick(
        ClusterOptions {
            kustomize_controller: bins::KC_V17.into(),
            kustomize_controller_args: vec![
                "--feature-gates=CancelHealthCheckOnNewRevision=true".into(),
            ],
            ..ClusterOptions::default()
        },
        &[],
    );
    assert!(
        lever == "request-reconcile" || lever == "reconcile-source",
        "{lever}: {v}"
    );
    eprintln!(
        "{} gate on: {lever} freed the check {took:?} after it started",
        bins::KC_V17
    );
}
