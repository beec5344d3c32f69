//! Issue 15 situations on the real control plane and the real kustomize-controller v1.9.6
//! (tests/realcluster), each of which had fixture tests only: `--check` during a run in
//! progress, a suspended HelmRelease under `wait: true` (the released CRD; helm-controller does
//! not run in this cluster), a Terminating PVC held by the real pvc-protection controller, a missing CRD in
//! the wait set, a dependsOn cycle, a source failing on a missing secret (quoted verbatim), and
//! worker starvation (`--concurrent=1`). Each asserts the class, the named blockers, the lever
//! and, where the controller ends a check, a predicted end within 10 % of the real end.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, ClusterOptions, FLUX_NS};
use serde_json::Value;

use super::{BIN, cluster, unstick_json as unstick};

fn ns_yaml(ns: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")
}

/// Until the real controller runs the Kustomization's health checks.
fn running_checks(c: &Cluster, name: &str) -> Value {
    eventually(
        Duration::from_secs(120),
        "the real health check is running",
        || {
            let k = c.kustomization(name);
            condition(&k, "Reconciling")["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks"))
                .then_some(k)
        },
    )
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

/// Asserts |ended - predicted| <= 10 % of `timeout_secs`.
fn within_ten_percent(predicted: jiff::Timestamp, ended: jiff::Timestamp, timeout_secs: f64) {
    let off = (ended.as_second() - predicted.as_second()).abs();
    assert!(
        off as f64 <= timeout_secs * 0.10,
        "predicted {predicted}, the real controller ended at {ended} ({off}s off, limit {}s)",
        timeout_secs * 0.10
    );
}

fn deployment(ns: &str, name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: {name}\n        image: {image}\n"
    )
}

/// Runs `scenarios` at once, each on a thread named after it, on the shared cluster: they
/// mostly wait on the real controller (a check to its timeout), so overlapping them keeps the
/// binary's wall time near the longest one whatever `--test-threads` is. Fails naming every
/// scenario that panicked (each panic is printed with its thread's name).
pub(crate) fn concurrently(scenarios: &[(&str, fn())]) {
    std::thread::scope(|s| {
        let running: Vec<_> = scenarios
            .iter()
            .map(|(name, f)| {
                let h = std::thread::Builder::new()
                    .name((*name).to_owned())
                    .spawn_scoped(s, *f)
                    .unwrap();
                (*name, h)
            })
            .collect();
        let failed: Vec<&str> = running
            .into_iter()
            .filter_map(|(name, h)| h.join().is_err().then_some(name))
            .collect();
        assert!(
            failed.is_empty(),
            "failed scenarios: {failed:?} (their panics are printed above)"
        );
    });
}

/// Every situation on the shared cluster, at once (see [`concurrently`]): held health checks
/// that end at the real controller's timeout, each asserting the class, the named blocker, the
/// lever and the predicted end within 10 % (a suspended HelmRelease, a Terminating PVC, a
/// missing CRD in the wait set, a healthCheckExprs member); `--check` verdicts (mid-run wait,
/// deadline, SIGINT); a dependsOn cycle; a quoted source message.
#[test]
fn situations_on_the_shared_cluster() {
    concurrently(&[
        (
            "suspended_helmrelease_is_named_with_resume_and_the_end_predicted",
            suspended_helmrelease_is_named_with_resume_and_the_end_predicted,
        ),
        (
            "terminating_pvc_names_the_finalizer_and_the_pod_and_the_end_is_predicted",
            terminating_pvc_names_the_finalizer_and_the_pod_and_the_end_is_predicted,
        ),
        (
            "missing_crd_in_the_wait_set_is_unknown_with_the_fix_and_the_end_predicted",
            missing_crd_in_the_wait_set_is_unknown_with_the_fix_and_the_end_predicted,
        ),
        (
            "health_check_exprs_member_is_named_unknown_and_the_end_predicted",
            health_check_exprs_member_is_named_unknown_and_the_end_predicted,
        ),
        (
            "check_waits_for_the_run_in_progress_and_says_recovered",
            check_waits_for_the_run_in_progress_and_says_recovered,
        ),
        (
            "check_at_its_deadline_is_timed_out_and_sigint_is_130",
            check_at_its_deadline_is_timed_out_and_sigint_is_130,
        ),
        (
            "dependson_cycle_is_break_the_cycle_in_git_only",
            dependson_cycle_is_break_the_cycle_in_git_only,
        ),
        (
            "source_failing_on_a_missing_secret_is_quoted_verbatim",
            source_failing_on_a_missing_secret_is_quoted_verbatim,
        ),
    ]);
}

/// The lever when every blocker needs a fix of its own: `fix-blockers`, no write (a fresh run
/// of the Kustomization would wait on the same objects), the blocker's fix in `why`.
fn fix_blockers_only(v: &Value) {
    let p = &v["plan"];
    assert_eq!(p["lever"], "fix-blockers", "{p:#}");
    assert_eq!(p["steps"], serde_json::json!([]), "{p:#}");
    let fix = v["diagnosis"]["blocking"][0]["fix"].as_str().unwrap();
    let why: Vec<&str> = p["why"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(why.iter().any(|w| w.contains(fix)), "{p:#}");
}

/// `--check` while the real controller's run is in progress (health checks on a Deployment
/// whose image the node cannot pull yet): it must not judge the run (the old code read the
/// Kustomization once and said failed-again, exit 1, within a second). It says it waits, and
/// once the image becomes pullable the real run ends Ready and the check says recovered.
/// Deterministic: the image is made pullable only after the plugin said it is waiting.
fn check_waits_for_the_run_in_progress_and_says_recovered() {
    let c = &cluster();
    let (name, ns) = ("unstick-chk", "unstick-chk");
    let image = "registry.example.local/unstick-chk:1";
    c.fleet(
        name,
        &[
            ("ns.yaml", &ns_yaml(ns)),
            ("web.yaml", &deployment(ns, "web", image)),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 3m\n",
    )
    .unwrap();
    running_checks(c, name);
    let mut child = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args([
            &format!("ks/{name}"),
            "--check",
            "--timeout",
            "4m",
            "-o",
            "json",
        ])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if line.contains("waiting up to 4m0s (--timeout) for it to end before judging") {
                let _ = tx.send(line.clone());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Either the plugin says it waits, or it exits (stderr closes) without saying so.
    let said = rx.recv_timeout(Duration::from_secs(60));
    if said.is_err() {
        let out = child.wait_with_output().unwrap();
        panic!(
            "--check did not wait for the run in progress: exit {:?}\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            reader.join().unwrap()
        );
    }
    let said = said.unwrap();
    assert!(said.contains("a run is in progress"), "{said}");
    c.registry().add(image);
    let out = child.wait_with_output().unwrap();
    let stderr = reader.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(out.status.code(), Some(0), "{v:#}\n{stderr}");
    assert_eq!(v["action"], "check");
    assert_eq!(v["proof"], "recovered", "{v:#}");
    // What the real controller says now: Ready at the revision, the run ended.
    let k = c.kustomization(name);
    assert_eq!(condition(&k, "Ready")["status"], "True", "{k:#}");
    assert_eq!(v["diagnosis"]["class"], "healthy", "{v:#}");
}

/// A HelmRelease under `wait: true` that is itself suspended (kustomize-controller#1100,
/// #709), on the real HelmRelease CRD (as released with helm-controller v1.6.4). helm-controller
/// does not run in this cluster (opt-in: `ClusterOptions::helm_controller`), so the test leaves
/// the status its run would have left: helm-controller
/// internal/reconcile/atomic_release.go (`AtomicRelease.Reconcile`: before a release action,
/// `conditions.MarkReconciling(obj, meta.ProgressingReason, "Running '%s' action with timeout
/// of %s")` and, for a release action, `MarkUnknown(obj, meta.ReadyCondition, ...)` with the
/// same message, then a patch) leaves `Reconciling=True` / `Ready=Unknown`, reason
/// `Progressing`, "Running 'install' action with timeout of 5m0s" (5m: the HelmRelease default
/// timeout) while an install runs, at observedGeneration 1; `flux suspend hr` then sets
/// spec.suspend (generation 2), and helm-controller returns early on spec.suspend
/// ("reconciliation is suspended for this object") without running an action. The
/// real kustomize-controller reads it InProgress (observedGeneration behind) and holds the
/// check to its timeout; unstick names helm-controller as not running first (nothing
/// reconciles HelmReleases here), then the HelmRelease as suspended, with `flux resume` as its
/// fix.
fn suspended_helmrelease_is_named_with_resume_and_the_end_predicted() {
    let c = &cluster();
    let (name, ns) = ("unstick-hr", "unstick-hr");
    c.apply_yaml(&ns_yaml(ns)).unwrap();
    let hr = format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: redis\n  namespace: {ns}\nspec:\n  interval: 5m\n  chart:\n    spec:\n      chart: redis\n      version: 20.0.0\n      sourceRef:\n        kind: HelmRepository\n        name: bitnami\n        namespace: {FLUX_NS}\n"
    );
    c.apply_yaml(&hr).unwrap();
    let status = serde_json::json!({"status": {
    "observedGeneration": 1,
    "conditions": [
        {"type": "Reconciling", "status": "True", "reason": "Progressing",
         "message": "Running 'install' action with timeout of 5m0s",
         "observedGeneration": 1, "lastTransitionTime": "2026-12-01T00:00:00Z"},
        {"type": "Ready", "status": "Unknown", "reason": "Progressing",
         "message": "Running 'install' action with timeout of 5m0s",
         "observedGeneration": 1, "lastTransitionTime": "2026-12-01T00:00:00Z"}
    ]}});
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "helmrelease",
        "redis",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ])
    .unwrap();
    // What `flux suspend hr redis` writes (field manager flux).
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "helmrelease",
        "redis",
        "--type=merge",
        "--field-manager=flux",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ])
    .unwrap();
    c.fleet(
        name,
        &[("hr.yaml", &hr)],
        "  interval: 10m\n  path: ./\n  prune: false\n  wait: true\n  timeout: 45s\n",
    )
    .unwrap();
    running_checks(c, name);
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    // helm-controller does not run here: named first (issue 28 item 5), before the
    // HelmRelease's own fix, which only helps once it runs.
    assert_eq!(d["class"], "controller-not-running", "{v:#}");
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .starts_with("helm-controller is not running (not installed"),
        "{d:#}"
    );
    let b = &d["blocking"][0];
    assert_eq!(b["object"], format!("HelmRelease/{ns}/redis"), "{v:#}");
    assert_eq!(b["origin"], "inventory", "{b:#}");
    assert_eq!(b["kstatus"], "InProgress", "{b:#}");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .starts_with("suspended (spec.suspend: true)"),
        "{b:#}"
    );
    assert!(
        b["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("flux resume helmrelease redis -n {ns}")),
        "{b:#}"
    );
    assert_eq!(v["plan"]["lever"], "start-controller", "{v:#}");
    assert_eq!(v["plan"]["steps"], serde_json::json!([]), "{v:#}");
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
            .contains(&format!("HelmRelease/{ns}/redis status: 'InProgress'")),
        "{ready}"
    );
    super::assert_end_predicted(predicted, &ready, 45.0);
}

/// A PVC under `wait: true` deleted while a pod mounts it: the real pvc-protection controller
/// (kube-controller-manager) keeps it Terminating on `kubernetes.io/pvc-protection`; the real
/// kustomize-controller's next run holds the check on it (`status: 'Terminating'`). unstick
/// names the finalizer and the pod that holds it, and predicts the end.
fn terminating_pvc_names_the_finalizer_and_the_pod_and_the_end_is_predicted() {
    let c = &cluster();
    let (name, ns) = ("unstick-pvc", "unstick-pvc");
    let image = "registry.example.local/unstick-pvc-db:1";
    c.registry().add(image);
    let pv = "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: unstick-pvc-pv\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  storageClassName: manual\n  hostPath: {path: /tmp/unstick-pvc-pv}\n".to_string();
    let pvc = format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: {ns}\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: manual\n  volumeName: unstick-pvc-pv\n  resources:\n    requests: {{storage: 1Gi}}\n"
    );
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: db-0\n  namespace: {ns}\nspec:\n  containers:\n  - name: db\n    image: {image}\n    volumeMounts:\n    - {{name: data, mountPath: /data}}\n  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: data}}\n"
    );
    c.fleet(
        name,
        &[
            ("ns.yaml", &ns_yaml(ns)),
            ("pv.yaml", &pv),
            ("pvc.yaml", &pvc),
            ("pod.yaml", &pod),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 40s\n",
    )
    .unwrap();
    eventually(Duration::from_secs(120), "the fleet is Ready", || {
        (condition(&c.kustomization(name), "Ready")["status"] == "True").then_some(())
    });
    c.kubectl(&["-n", ns, "delete", "pvc", "data", "--wait=false"])
        .unwrap();
    let held = c.get_json(&["-n", ns, "get", "pvc", "data"]);
    assert!(
        held["metadata"]["deletionTimestamp"].is_string(),
        "{held:#}"
    );
    assert_eq!(
        held["metadata"]["finalizers"],
        serde_json::json!(["kubernetes.io/pvc-protection"]),
        "{held:#}"
    );
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "annotate",
        "--overwrite",
        "kustomization",
        name,
        "reconcile.fluxcd.io/requestedAt=pvc-1",
    ])
    .unwrap();
    running_checks(c, name);
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    let b = d["blocking"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["object"] == format!("PersistentVolumeClaim/{ns}/data"))
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(b["kstatus"], "Terminating", "{b:#}");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("kubernetes.io/pvc-protection"),
        "{b:#}"
    );
    assert!(
        b["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("pod {ns}/db-0")),
        "{b:#}"
    );
    fix_blockers_only(&v);
    let predicted: jiff::Timestamp = d["healthCheck"]["endsAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (ready, _) = check_ended(c, name, Duration::from_secs(120));
    assert!(
        ready["message"].as_str().unwrap().contains(&format!(
            "PersistentVolumeClaim/{ns}/data status: 'Terminating'"
        )),
        "{ready}"
    );
    super::assert_end_predicted(predicted, &ready, 40.0);
}

/// A `spec.healthChecks` entry of a kind whose CRD is missing (an ExternalSecret after an
/// upgrade): the real controller holds the check to its timeout (`status: 'Unknown'`);
/// unstick names it Unknown with "install the CRD", and predicts the end.
fn missing_crd_in_the_wait_set_is_unknown_with_the_fix_and_the_end_predicted() {
    let c = &cluster();
    let (name, ns) = ("unstick-hc-crd", "unstick-hc-crd");
    c.fleet(
        name,
        &[
            ("ns.yaml", &ns_yaml(ns)),
            (
                "cm.yaml",
                &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\ndata: {{a: b}}\n"),
            ),
        ],
        &format!("  interval: 10m\n  path: ./\n  prune: true\n  timeout: 40s\n  healthChecks:\n  - apiVersion: external-secrets.io/v1beta1\n    kind: ExternalSecret\n    name: db-creds\n    namespace: {ns}\n"),
    )
    .unwrap();
    running_checks(c, name);
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    let b = &d["blocking"][0];
    assert_eq!(
        b["object"],
        format!("ExternalSecret/{ns}/db-creds"),
        "{v:#}"
    );
    assert_eq!(b["origin"], "healthChecks", "{b:#}");
    assert_eq!(b["kstatus"], "Unknown", "{b:#}");
    assert!(
        b["message"]
            .as_str()
            .unwrap()
            .contains("CustomResourceDefinition is missing"),
        "{b:#}"
    );
    assert!(
        b["fix"].as_str().unwrap().contains("install the CRD"),
        "{b:#}"
    );
    fix_blockers_only(&v);
    let predicted: jiff::Timestamp = d["healthCheck"]["endsAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (ready, _) = check_ended(c, name, Duration::from_secs(120));
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains(&format!("ExternalSecret/{ns}/db-creds status: 'Unknown'")),
        "{ready}"
    );
    super::assert_end_predicted(predicted, &ready, 40.0);
}

/// A dependsOn cycle on the real controller (each says `dependency '...' is not ready` and
/// retries forever): unstick names the cycle and the only lever is "break the cycle in Git".
fn dependson_cycle_is_break_the_cycle_in_git_only() {
    let c = &cluster();
    c.fleet(
        "unstick-cyc-a",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cyc\n  namespace: default\ndata: {a: b}\n",
        )],
        "  interval: 10m\n  path: ./\n  prune: true\n  dependsOn:\n  - name: unstick-cyc-b\n",
    )
    .unwrap();
    c.apply_yaml(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: unstick-cyc-b, namespace: {FLUX_NS}}}\nspec:\n  interval: 10m\n  path: ./\n  prune: true\n  sourceRef: {{kind: GitRepository, name: unstick-cyc-a}}\n  dependsOn:\n  - name: unstick-cyc-a\n"
    ))
    .unwrap();
    for (me, dep) in [
        ("unstick-cyc-a", "unstick-cyc-b"),
        ("unstick-cyc-b", "unstick-cyc-a"),
    ] {
        eventually(
            Duration::from_secs(90),
            "the real controller holds both",
            || {
                let r = condition(&c.kustomization(me), "Ready");
                (r["reason"] == "DependencyNotReady"
                    && r["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&format!("'{FLUX_NS}/{dep}'"))))
                .then_some(())
            },
        );
    }
    let (code, v, err) = unstick(c, &["ks/unstick-cyc-a", "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "waiting-on-dependencies", "{v:#}");
    assert_eq!(d["rootCause"]["kind"], "cycle", "{v:#}");
    let p = &v["plan"];
    assert_eq!(p["lever"], "fix-in-git", "{p:#}");
    assert_eq!(p["effect"], "break the cycle in Git", "{p:#}");
    assert!(
        p["alternatives"].is_null() || p["alternatives"] == serde_json::json!([]),
        "{p:#}"
    );
    assert_eq!(p["steps"], serde_json::json!([]), "{p:#}");
    let why = p["why"].to_string();
    assert!(!why.contains("ends by itself"), "{why}");
}

/// A GitRepository failing on a missing secret (the real source-controller's message):
/// unstick quotes only what the object says, never "authentication required".
fn source_failing_on_a_missing_secret_is_quoted_verbatim() {
    let c = &cluster();
    let name = "unstick-nosecret";
    // The GitRepository names the missing secret from its creation, so it never has an
    // artifact (deterministic: no earlier successful fetch to race with).
    let repo = format!("org/{name}");
    c.git().create_repo(&repo, "main").unwrap();
    c.git()
        .commit(
            &repo,
            &[twin::git::Change::write(
                "cm.yaml",
                b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nosecret\n  namespace: default\ndata: {a: b}\n".to_vec(),
            )],
            "fleet",
        )
        .unwrap();
    let url = c.git().url_http(&repo);
    c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec: {{interval: 1m, url: \"{url}\", ref: {{branch: main}}, secretRef: {{name: unstick-git-creds}}}}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec:\n  interval: 10m\n  path: ./\n  prune: true\n  sourceRef: {{kind: GitRepository, name: {name}}}\n"
    ))
    .unwrap();
    let src_ready = eventually(Duration::from_secs(90), "the real source fails", || {
        let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", name]);
        let r = condition(&g, "Ready");
        (r["status"] == "False"
            && r["message"]
                .as_str()
                .is_some_and(|m| m.contains("unstick-git-creds")))
        .then_some(r)
    });
    let quoted = src_ready["message"].as_str().unwrap().to_owned();
    // The real kustomize-controller has run on it (no artifact to apply).
    eventually(
        Duration::from_secs(60),
        "the Kustomization is not ready",
        || (condition(&c.kustomization(name), "Ready")["status"] == "False").then_some(()),
    );
    let (_, v, err) = unstick(c, &[&format!("ks/{name}"), "--dry-run"]);
    let all = serde_json::to_string(&v).unwrap();
    assert!(
        all.contains(
            &serde_json::to_string(&quoted)
                .unwrap()
                .trim_matches('"')
                .to_owned()
        ),
        "the source's own message {quoted:?} is not quoted:\n{v:#}\n{err}"
    );
    assert!(!all.contains("authentication required"), "{v:#}");
    assert_eq!(v["diagnosis"]["class"], "source-not-ready", "{v:#}");
    assert_eq!(v["plan"]["lever"], "fix-in-git", "{v:#}");
}

/// Worker starvation (fluxcd/flux2#5622) on a real kustomize-controller run with
/// `--concurrent=1`: a Kustomization holds the only worker with a health check; a new one
/// waits. unstick names the holder with its end, estimates when the worker frees, and the new
/// Kustomization's real run starts within 10 % (of the holder's timeout) of that estimate.
#[test]
fn worker_starvation_names_the_holder_and_predicts_when_the_worker_frees() {
    let c = crate::start_cluster(ClusterOptions {
        kustomize_controller_args: vec!["--concurrent=1".into()],
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let ns = "starve";
    c.fleet(
        "hold",
        &[
            ("ns.yaml", &ns_yaml(ns)),
            (
                "web.yaml",
                &deployment(ns, "web", "registry.example.local/starve-web:1"),
            ),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 60s\n",
    )
    .unwrap();
    running_checks(&c, "hold");
    c.fleet(
        "new",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: starve-new\n  namespace: default\ndata: {a: b}\n",
        )],
        "  interval: 10m\n  path: ./\n  prune: true\n  timeout: 30s\n",
    )
    .unwrap();
    // The new Kustomization's source is ready, and the Kustomization has not started.
    eventually(Duration::from_secs(60), "the new source is ready", || {
        let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", "new"]);
        (condition(&g, "Ready")["status"] == "True").then_some(())
    });
    let k = c.kustomization("new");
    assert!(
        k["status"]["conditions"].is_null() || condition(&k, "Reconciling").is_null(),
        "{k:#}"
    );
    let (_, v, err) = unstick(&c, &["ks/new", "--dry-run"]);
    let d = &v["diagnosis"];
    let hints = d["hints"].to_string();
    assert!(
        hints.contains("waiting for a free kustomize-controller worker"),
        "{v:#}\n{err}"
    );
    assert!(hints.contains("flux-system/hold (until "), "{hints}");
    assert!(
        v["holdingWorkers"].to_string().contains("flux-system/hold"),
        "{v:#}"
    );
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .contains("the first frees at "),
        "{v:#}"
    );
    let predicted: jiff::Timestamp = d["workerFreeAt"].as_str().unwrap().parse().unwrap();
    // After a push, with proof: the proof wait is sized from the queue (until the worker
    // frees) plus the run, so it does not give up while the request waits for the worker
    // (flux2#5622: a request-reconcile gave up after 39 s, the request was handled ~80 s later).
    let kc = c.kubeconfig().to_path_buf();
    let asked = jiff::Timestamp::now();
    let proof = std::thread::spawn(move || {
        let out = Command::new(BIN)
            .arg("--kubeconfig")
            .arg(&kc)
            .args([
                "ks/new",
                "--with-source",
                "--yes",
                "--margin",
                "0s",
                "-o",
                "json",
            ])
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    });
    // When the real worker picked up the new Kustomization: its first condition.
    let started: jiff::Timestamp =
        eventually(Duration::from_secs(150), "the new run starts", || {
            let k = c.kustomization("new");
            let conds = k["status"]["conditions"].as_array()?;
            conds
                .iter()
                .filter_map(|c| c["lastTransitionTime"].as_str())
                .filter_map(|t| t.parse::<jiff::Timestamp>().ok())
                .min()
        });
    // The worker frees when the real controller ends hold's check; how late its timer fired
    // under load (its own "health check failed after D" beyond the 60s timeout, see
    // super::assert_end_predicted) delays the new run by as much, and is not the prediction's.
    let hold = condition(&c.kustomization("hold"), "Ready");
    let late_ms = hold["message"]
        .as_str()
        .and_then(|m| m.strip_prefix("health check failed after "))
        .and_then(|m| m.split_once(": "))
        .and_then(|(d, _)| super::go_duration_secs(d))
        .map(|d| ((d - 60.0).max(0.0) * 1000.0) as i64)
        .unwrap_or_else(|| panic!("hold's check did not end at its timeout: {hold}"));
    let started_on_time =
        jiff::Timestamp::from_millisecond(started.as_millisecond() - late_ms).unwrap();
    within_ten_percent(predicted, started_on_time, 60.0);
    let (code, stdout, stderr) = proof.join().unwrap();
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(code, Some(0), "{v:#}\n{stderr}");
    assert_eq!(v["plan"]["lever"], "reconcile-source", "{v:#}");
    assert_eq!(v["proof"], "recovered", "{v:#}");
    // The queue left when it was asked (its snapshot is read a moment later: 5 s of slack)
    // plus the new Kustomization's 30s timeout (--margin 0s: without the queue the wait
    // would be 60s, the timeout and one more for the refetch).
    let queue_left = (predicted.as_second() - asked.as_second()).max(0) as f64;
    let wait = v["plan"]["waitSecs"].as_f64().unwrap();
    assert!(
        wait >= queue_left - 5.0 + 30.0,
        "the proof wait ({wait}s) covers the queue ({queue_left}s) and the run (30s): {v:#}"
    );
}

/// `spec.healthCheckExprs` (kustomize-controller v1.5+) on the real controller: a custom
/// resource without conditions (plain kstatus: Current). The real controller reads it with the
/// CEL expressions instead; the `status` written in Git is not applied, so `failed` errors on the
/// missing attribute and the object is `status: 'Unknown'` until the timeout (observed here, the
/// message quotes the CEL error). unstick does not evaluate CEL: it names the object as Unknown
/// with the expressions, never "nothing blocks" (the generic reading), and predicts the end.
fn health_check_exprs_member_is_named_unknown_and_the_end_predicted() {
    let c = &cluster();
    let (name, ns) = ("unstick-cel", "unstick-cel");
    c.apply_yaml(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: databases.example.com\nspec:\n  group: example.com\n  names: {kind: Database, plural: databases, singular: database, listKind: DatabaseList}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n",
    )
    .unwrap();
    c.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/databases.example.com",
        "--timeout=60s",
    ])
    .unwrap();
    c.fleet(
        name,
        &[
            ("ns.yaml", &ns_yaml(ns)),
            (
                "db.yaml",
                &format!("apiVersion: example.com/v1\nkind: Database\nmetadata:\n  name: db\n  namespace: {ns}\nspec:\n  size: small\nstatus:\n  phase: Provisioning\n"),
            ),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 40s\n  healthCheckExprs:\n  - apiVersion: example.com/v1\n    kind: Database\n    current: status.phase == 'Ready'\n    failed: status.phase == 'Failed'\n",
    )
    .unwrap();
    running_checks(c, name);
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    let b = &d["blocking"][0];
    assert_eq!(b["object"], format!("Database/{ns}/db"), "{v:#}");
    assert_eq!(b["kstatus"], "Unknown", "{b:#}");
    let m = b["message"].as_str().unwrap();
    assert!(
        m.contains("current: `status.phase == 'Ready'`, failed: `status.phase == 'Failed'`"),
        "{m}"
    );
    assert!(m.contains("does not evaluate"), "{m}");
    let predicted: jiff::Timestamp = d["healthCheck"]["endsAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (ready, _) = check_ended(c, name, Duration::from_secs(120));
    assert!(
        ready["message"].as_str().unwrap().contains(&format!(
            "Database/{ns}/db status: 'Unknown': failed to evaluate the CEL expression"
        )),
        "{ready}"
    );
    super::assert_end_predicted(predicted, &ready, 40.0);
}

/// `--check` during a run in progress that outlives `--timeout`: `timed-out` (exit 1) saying
/// what it waited on, never failed-again; and a SIGINT while it waits ends it with exit 130 and
/// proof `interrupted`, at once (it only reads: nothing to undo).
fn check_at_its_deadline_is_timed_out_and_sigint_is_130() {
    let c = &cluster();
    let (name, ns) = ("unstick-chk-to", "unstick-chk-to");
    c.fleet(
        name,
        &[
            ("ns.yaml", &ns_yaml(ns)),
            (
                "web.yaml",
                &deployment(ns, "web", "registry.example.local/unstick-chk-to:1"),
            ),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 3m\n",
    )
    .unwrap();
    running_checks(c, name);
    let started = std::time::Instant::now();
    let (code, v, err) = unstick(c, &[&format!("ks/{name}"), "--check", "--timeout", "5s"]);
    let took = started.elapsed();
    assert_eq!(code, 1, "{v:#}\n{err}");
    assert_eq!(v["proof"], "timed-out", "{v:#}");
    assert!(
        v["lastSeen"]
            .as_str()
            .is_some_and(|s| s.starts_with("a run is in progress: Running health checks")),
        "{v:#}"
    );
    assert!(took >= Duration::from_secs(5), "{took:?}");
    assert!(
        err.contains("waiting up to 5s (--timeout) for it to end before judging"),
        "{err}"
    );

    let mut child = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args([&format!("ks/{name}"), "--check", "-o", "json"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if line.contains("for it to end before judging") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("--check says it waits for the run in progress");
    let sent = std::time::Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = reader.join().unwrap();
    // Answered, not waited out: the held check has 3m to run, so an exit within 30 s is the
    // SIGINT handler's. 30 s, not less: at load 50-80 on this 2-core machine (other helpers'
    // clusters and builds) the exit took 16.4 s in session 6, and 10.1 s at load 28-41 with 8
    // test threads in session 7 (spawning `kill`, then the debug binary leaving its wait loop,
    // printing the document and tearing down, each waiting for CPU).
    assert!(
        sent.elapsed() < Duration::from_secs(30),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["proof"], "interrupted", "{v:#}");
    assert_eq!(v["action"], "check", "{v:#}");
}
