//! End to end: the real `kubectl-unstick` binary on a real control plane and the real
//! source- and kustomize-controller v1.9.6 (tests/realcluster), the scenarios that ran on the
//! twin's in-memory API server and Flux models until session 5 (tests/twin/e2e.rs, clock.rs),
//! plus the new-user trial's `--all` findings. All on one cluster of their own
//! ([`e2e_cluster`]: `--concurrent=10`, so the checks held here never make the other scenarios
//! wait for a worker; `--requeue-dependency=5s`, so a dependsOn re-check is seconds away),
//! run at once ([`super::situations::concurrently`]), each in namespaces of its own.
//!
//! States the real controller passes through in milliseconds (a dependency's run in progress,
//! a request no worker has taken yet) are held still with a Kustomization of a shard no
//! controller runs here ([`realcluster::HELD_SHARD_LABEL`]): its status is written as
//! kustomize-controller writes it, and nothing changes it under the plugin. Everything else
//! is the real controllers' own doing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use realcluster::proxy::{Fault, FaultAction, FaultProxy};
use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, ClusterOptions, FLUX_NS, HELD_SHARD_LABEL};
use serde_json::{Value, json};

use super::BIN;
use super::situations::concurrently;

const T: Duration = Duration::from_secs(180);
const MARKER: &str = unstick::diagnose::SUSPEND_MARKER;
/// An image the e2e cluster's registry holds.
const GOOD: &str = "registry.example.local:5000/podinfo:6.7.0";

/// The e2e cluster (see the module doc), leased (started on first use, stopped after its last lease). Panics with the start error.
fn e2e_cluster() -> realcluster::Lease {
    static E2E: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::cluster_with(&E2E, || ClusterOptions {
        images: vec![GOOD.into()],
        kustomize_controller_args: vec!["--concurrent=10".into(), "--requeue-dependency=5s".into()],
        ..ClusterOptions::default()
    })
}

/// One run of the plugin.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", self.stdout, self.stderr))
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn unstick_with(kubeconfig: &Path, args: &[&str]) -> Run {
    let out = std::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_report_shape(args, &run.stdout);
    run
}

fn unstick(c: &Cluster, args: &[&str]) -> Run {
    unstick_with(c.kubeconfig(), args)
}

/// Every `-o json` UnstickReport has the documented key set, a documented `proof` and a
/// `cascade` list, whatever happened.
fn assert_report_shape(args: &[&str], stdout: &str) {
    let Ok(v) = serde_json::from_str::<Value>(stdout) else {
        return;
    };
    if v["kind"] != "UnstickReport" {
        return;
    }
    let mut got: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    got.sort();
    let mut want = unstick::report::REPORT_KEYS.to_vec();
    want.sort();
    assert_eq!(got, want, "{args:?}: {v:#}");
    let proof = v["proof"].as_str().unwrap_or_default();
    assert!(
        unstick::report::PROOF_VALUES.contains(&proof),
        "{args:?}: proof {proof:?}"
    );
    assert!(v["cascade"].is_array(), "{args:?}: {v:#}");
}

fn namespace(c: &Cluster, ns: &str) {
    c.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"
    ))
    .unwrap();
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn ks(c: &Cluster, ns: &str, name: &str) -> Value {
    c.get_json(&["-n", ns, "get", "kustomization", name])
}

fn suspended(o: &Value) -> bool {
    o.pointer("/spec/suspend") == Some(&json!(true))
}

fn marker(o: &Value) -> Option<&str> {
    o["metadata"]["annotations"][MARKER].as_str()
}

fn ready_true(o: &Value) -> bool {
    condition(o, "Ready")["status"] == "True"
}

/// The GitRepository `flux-system/e2e-src` (a fleet with one directory per scenario that the
/// real controllers apply) and its artifact revision once fetched; made once per cluster
/// ([`Cluster::memo`]).
fn source(c: &Cluster) -> String {
    /// The e2e-src revision on this cluster.
    struct E2eSource(String);
    c.memo(|| {
        let cm = |name: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata: {{a: b}}\n"
            )
        };
        let web = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: e2e-intr\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: 0.1.1\n";
        c.fleet(
            "e2e-src",
            &[
                ("src/cm.yaml", &cm("e2e-src")),
                ("heal-a/cm.yaml", &cm("e2e-heal-a")),
                ("heal-b-ours/cm.yaml", &cm("e2e-heal-b-ours")),
                ("heal-b-theirs/cm.yaml", &cm("e2e-heal-b-theirs")),
                ("intr/web.yaml", web),
            ],
            "  interval: 100h\n  path: ./src\n  prune: true\n",
        )
        .unwrap();
        E2eSource(eventually(T, "e2e-src fetched", || {
            let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", "e2e-src"]);
            g["status"]["artifact"]["revision"]
                .as_str()
                .map(str::to_owned)
        }))
    })
    .0
    .clone()
}

/// A Kustomization `ns/name` of the held shard (no controller reconciles it here), reading
/// `flux-system/e2e-src`; `spec` lines at two-space indent are added to its spec.
fn held_ks(c: &Cluster, ns: &str, name: &str, spec: &str, annotations: &str) {
    c.apply_yaml(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{HELD_SHARD_LABEL}: held}}\n  annotations: {{{annotations}}}\nspec:\n  interval: 10m\n  path: ./src\n  prune: true\n  sourceRef: {{kind: GitRepository, name: e2e-src, namespace: {FLUX_NS}}}\n{spec}"
    ))
    .unwrap();
}

/// A Kustomization `ns/name` the real kustomize-controller reconciles, applying `./path` of
/// `flux-system/e2e-src`.
fn real_ks(c: &Cluster, ns: &str, name: &str, path: &str, spec: &str) {
    c.apply_yaml(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  interval: 100h\n  path: ./{path}\n  prune: true\n  sourceRef: {{kind: GitRepository, name: e2e-src, namespace: {FLUX_NS}}}\n{spec}"
    ))
    .unwrap();
}

/// Writes `status` on `ns/name` (merge patch of the status subresource), as the shard's
/// controller would.
fn set_status(c: &Cluster, ns: &str, name: &str, status: Value) {
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "kustomization",
        name,
        "--subresource=status",
        "--type=merge",
        "--field-manager=kustomize-controller",
        "-p",
        &json!({ "status": status }).to_string(),
    ])
    .unwrap();
}

/// `kubectl patch --type=merge` with a field manager.
fn merge_patch(c: &Cluster, ns: &str, kind: &str, name: &str, manager: &str, patch: Value) {
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        kind,
        name,
        "--type=merge",
        &format!("--field-manager={manager}"),
        "-p",
        &patch.to_string(),
    ])
    .unwrap();
}

/// What an interrupted `kubectl unstick` run leaves: `spec.suspend: true` with our marker.
fn leave_suspended_by_us(c: &Cluster, ns: &str, name: &str) {
    merge_patch(
        c,
        ns,
        "kustomization",
        name,
        "kubectl-unstick",
        json!({"metadata": {"annotations": {MARKER: now()}}, "spec": {"suspend": true}}),
    );
}

/// A runtime whose worker threads serve a fault proxy while the scenario runs.
fn proxy_for(c: &Cluster) -> (tokio::runtime::Runtime, FaultProxy) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let p = rt.block_on(FaultProxy::start(c)).unwrap();
    (rt, p)
}

/// Every e2e scenario at once on the e2e cluster.
#[test]
fn e2e_on_the_real_controllers() {
    let c = &e2e_cluster();
    source(c);
    concurrently(&[
        (
            "depends_on_rollout_is_waiting_and_exits_0_in_both_views",
            depends_on_rollout_is_waiting_and_exits_0_in_both_views,
        ),
        (
            "request_pending_while_no_controller_has_taken_it",
            request_pending_while_no_controller_has_taken_it,
        ),
        (
            "all_heals_ours_only_and_reports_the_state_after_the_repair",
            all_heals_ours_only_and_reports_the_state_after_the_repair,
        ),
        (
            "interrupted_runs_faults_and_rbac_on_a_real_held_check",
            interrupted_runs_faults_and_rbac_on_a_real_held_check,
        ),
        (
            "fleet_view_request_bound_with_cross_namespace_dependencies_and_healing",
            fleet_view_request_bound_with_cross_namespace_dependencies_and_healing,
        ),
        (
            "classes_healthy_build_failed_and_source_not_ready",
            classes_healthy_build_failed_and_source_not_ready,
        ),
        (
            "gate_off_diagnosis_then_the_wait_lever_recovers_with_cascade",
            gate_off_diagnosis_then_the_wait_lever_recovers_with_cascade,
        ),
        (
            "check_token_superseded_by_a_later_request",
            check_token_superseded_by_a_later_request,
        ),
        (
            "missing_kustomization_or_namespace_is_exit_3_and_an_empty_namespace_exit_1",
            missing_kustomization_or_namespace_is_exit_3_and_an_empty_namespace_exit_1,
        ),
        (
            "fleet_view_on_300_kustomizations_uses_at_most_15_requests",
            fleet_view_on_300_kustomizations_uses_at_most_15_requests,
        ),
    ]);
    // Alone, after the others: a controller restart cancels every run in flight.
    restart_controller_waits_while_a_dependency_reconciles();
}

/// New-user trial: a normal dependsOn rollout (a dependent held at its dependsOn check while
/// its dependency's run is in progress) is not stuck: `ks/NAME --dry-run` and `--all` both
/// exit 0 and show it as waiting-on-dependencies; the root cause is said once. Once the
/// dependency fails at the source's revision, both exit 1.
fn depends_on_rollout_is_waiting_and_exits_0_in_both_views() {
    let c = &e2e_cluster();
    let rev = source(c);
    let ns = "e2e-rollout";
    namespace(c, ns);
    held_ks(c, ns, "platform", "  wait: true\n  timeout: 5m\n", "");
    held_ks(
        c,
        ns,
        "apps",
        "  timeout: 5m\n  dependsOn: [{name: platform}]\n",
        "",
    );
    let t = now();
    // kustomize-controller at the start of platform's run (Ready=Unknown, Reconciling=True
    // Progressing), and apps' checkDependencies result.
    set_status(
        c,
        ns,
        "platform",
        json!({"observedGeneration": 1, "lastAttemptedRevision": rev, "conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "Progressing", "observedGeneration": 1,
             "message": "Reconciliation in progress", "lastTransitionTime": t},
            {"type": "Reconciling", "status": "True", "reason": "Progressing", "observedGeneration": 1,
             "message": format!("Building manifests for revision {rev} with a timeout of 5m0s"),
             "lastTransitionTime": t}]}),
    );
    set_status(
        c,
        ns,
        "apps",
        json!({"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": "False", "reason": "DependencyNotReady", "observedGeneration": 1,
             "message": format!("dependency '{ns}/platform' is not ready"), "lastTransitionTime": t}]}),
    );
    let o = unstick(c, &["ks/apps", "-n", ns, "--dry-run", "-o", "json"]);
    assert_eq!(o.code, 0, "{o}");
    let v = o.json();
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "waiting-on-dependencies", "{v:#}");
    assert_eq!(d["rootCause"]["kustomization"], format!("{ns}/platform"));
    assert_eq!(d["rootCause"]["diagnosis"]["class"], "reconciling");
    assert_eq!(v["plan"]["lever"], "wait", "{v:#}");
    assert_eq!(v["plan"]["steps"], json!([]), "{v:#}");
    assert!(v["plan"].get("alternatives").is_none(), "{v:#}");
    // The wait covers platform's run and apps' (5m each) plus the 30s margin.
    let wait_secs = v["plan"]["waitSecs"].as_f64().unwrap();
    assert!((wait_secs - 630.0).abs() < 1.0, "{wait_secs}");
    let h = unstick(c, &["ks/apps", "-n", ns, "--dry-run"]);
    assert_eq!(h.code, 0, "{h}");
    assert!(!h.stdout.contains("first;"), "{h}");
    assert!(h.stdout.contains("Lever: wait"), "{h}");
    assert!(
        h.stdout.contains(
            "waiting on dependencies: the dependency is progressing (the ordering working, not a fault)"
        ),
        "{h}"
    );
    assert_eq!(
        h.stdout.to_lowercase().matches("root cause").count(),
        1,
        "the root cause is said once: {h}"
    );
    assert!(
        h.stdout
            .contains(&format!("  root cause: {ns}/platform (reconciling)\n")),
        "{h}"
    );
    // --all agrees: shown as waiting, not a finding.
    let a = unstick(c, &["--all", "-n", ns, "-o", "json"]);
    assert_eq!(a.code, 0, "{a}");
    let v = a.json();
    assert_eq!(
        (&v["total"], &v["notHealthy"], &v["findings"]),
        (&json!(2), &json!(2), &json!(0)),
        "{v:#}"
    );
    let apps = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kustomization"] == format!("{ns}/apps"))
        .unwrap();
    assert_eq!(apps["class"], "waiting-on-dependencies");
    assert_eq!(apps["rootCause"], format!("{ns}/platform (reconciling)"));
    let t_all = unstick(c, &["--all", "-n", ns]);
    assert_eq!(t_all.code, 0, "{t_all}");
    assert!(
        t_all.stdout.contains(
            "2 of 2 Kustomizations not healthy; none needs attention (reconciling, or waiting at dependsOn on a dependency that is progressing)"
        ),
        "{t_all}"
    );
    // The dependency fails at the source's revision: a finding in both views.
    let t = now();
    set_status(
        c,
        ns,
        "platform",
        json!({"observedGeneration": 1, "lastAttemptedRevision": rev, "conditions": [
            {"type": "Ready", "status": "False", "reason": "HealthCheckFailed", "observedGeneration": 1,
             "message": format!("health check failed after 5m0.01s: timeout waiting for: [Deployment/{ns}/web status: 'NotFound']"),
             "lastTransitionTime": t},
            {"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry", "observedGeneration": 1,
             "message": format!("Running health checks for revision {rev} with a timeout of 5m0s"),
             "lastTransitionTime": t}]}),
    );
    let o = unstick(c, &["ks/apps", "-n", ns, "--dry-run", "-o", "json"]);
    assert_eq!(o.code, 1, "{o}");
    assert_eq!(
        o.json()["diagnosis"]["rootCause"]["diagnosis"]["class"],
        "health-check-failed"
    );
    let a = unstick(c, &["--all", "-n", ns, "-o", "json"]);
    assert_eq!(a.code, 1, "{a}");
    assert_eq!(a.json()["findings"], 2, "{a}");
}

/// A reconcile request on a Kustomization of the held shard, which no running controller
/// watches here: `not-watched` (never `request-pending`: no worker will ever take it), a
/// finding, and the human output names the request.
fn request_pending_while_no_controller_has_taken_it() {
    let c = &e2e_cluster();
    let rev = source(c);
    let ns = "e2e-pending";
    namespace(c, ns);
    let token = jiff::Timestamp::now().to_string();
    held_ks(
        c,
        ns,
        "idle",
        "",
        &format!("reconcile.fluxcd.io/requestedAt: \"{token}\""),
    );
    let t = now();
    set_status(
        c,
        ns,
        "idle",
        json!({"observedGeneration": 1, "lastAttemptedRevision": rev, "lastAppliedRevision": rev,
            "lastHandledReconcileAt": "2026-01-01T00:00:00Z", "conditions": [
            {"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "observedGeneration": 1,
             "message": format!("Applied revision: {rev}"), "lastTransitionTime": t}]}),
    );
    let o = unstick(c, &["ks/idle", "-n", ns, "--dry-run", "-o", "json"]);
    let v = o.json();
    // No running controller watches the held shard here (issue 28): never request-pending.
    assert_eq!(v["diagnosis"]["class"], "not-watched", "{v:#}");
    assert_eq!(o.code, 1, "an object nothing watches is a finding: {o}");
    let h = unstick(c, &["ks/idle", "-n", ns, "--dry-run"]);
    assert!(h.stdout.contains(&token), "{h}");
}

/// New-user trial: `--all` that heals a Kustomization left suspended by an interrupted run
/// prints the row after the repair (not `suspended`) and exits with the code of that state
/// (0 here, it was 1); `healed:` comes before the table. Someone else's suspend is never
/// touched (a finding, exit 1), unless `ks/NAME --force-resume`.
fn all_heals_ours_only_and_reports_the_state_after_the_repair() {
    let c = &e2e_cluster();
    source(c);
    let (a, b) = ("e2e-heal-a", "e2e-heal-b");
    namespace(c, a);
    namespace(c, b);
    real_ks(c, a, "ours", "heal-a", "");
    real_ks(c, b, "ours", "heal-b-ours", "");
    real_ks(c, b, "theirs", "heal-b-theirs", "");
    for (ns, name) in [(a, "ours"), (b, "ours"), (b, "theirs")] {
        eventually(T, &format!("{ns}/{name} Ready"), || {
            ready_true(&ks(c, ns, name)).then_some(())
        });
    }
    leave_suspended_by_us(c, a, "ours");
    let o = unstick(c, &["--all", "-n", a]);
    assert_eq!(
        o.code, 0,
        "the state after the repair is not a finding: {o}"
    );
    let healed = o
        .stdout
        .find(&format!(
            "healed: resumed {a}/ours, left suspended by an interrupted kubectl unstick run"
        ))
        .unwrap_or_else(|| panic!("{o}"));
    let row = o
        .stdout
        .lines()
        .find(|l| l.contains(&format!("{a}/ours")) && !l.starts_with("healed"))
        .unwrap_or_else(|| panic!("{o}"));
    assert!(o.stdout.find(row).unwrap() > healed, "{o}");
    assert!(!row.contains("suspended"), "the row after the repair: {o}");
    assert!(!suspended(&ks(c, a, "ours")));
    // The same in JSON.
    leave_suspended_by_us(c, a, "ours");
    let o = unstick(c, &["--all", "-n", a, "-o", "json"]);
    assert_eq!(o.code, 0, "{o}");
    let v = o.json();
    assert_eq!(v["healed"], json!([format!("{a}/ours")]), "{v:#}");
    assert_ne!(v["items"][0]["class"], "suspended", "{v:#}");
    assert_eq!(v["findings"], 0, "{v:#}");

    // Ours and someone else's side by side.
    leave_suspended_by_us(c, b, "ours");
    merge_patch(
        c,
        b,
        "kustomization",
        "theirs",
        "kubectl",
        json!({"spec": {"suspend": true}}),
    );
    let v = unstick(c, &["ks/ours", "-n", b, "--dry-run", "-o", "json"]).json();
    assert_eq!(v["diagnosis"]["class"], "suspended", "{v:#}");
    assert!(v["diagnosis"]["suspendedByUnstickAt"].is_string(), "{v:#}");
    assert_eq!(v["plan"]["lever"], "resume", "{v:#}");
    let v = unstick(c, &["ks/theirs", "-n", b, "--dry-run", "-o", "json"]).json();
    assert_eq!(v["plan"]["lever"], "none", "{v:#}");
    let o = unstick(c, &["--all", "-n", b, "-o", "json"]);
    assert_eq!(o.code, 1, "someone else's suspend is a finding: {o}");
    let v = o.json();
    assert_eq!(v["healed"], json!([format!("{b}/ours")]), "{v:#}");
    assert!(!suspended(&ks(c, b, "ours")));
    assert!(suspended(&ks(c, b, "theirs")));
    let o = unstick(
        c,
        &["ks/theirs", "-n", b, "--yes", "--force-resume", "--no-wait"],
    );
    assert_eq!(o.code, 0, "{o}");
    assert!(ks(c, b, "theirs").pointer("/spec/suspend").is_none());
}

/// A kubeconfig for a ServiceAccount bound to a ClusterRole of `rules` (YAML list lines).
fn sa_kubeconfig(c: &Cluster, name: &str, rules: &str) -> PathBuf {
    c.apply_yaml(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {name}}}\nrules:\n{rules}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {name}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}\nsubjects: [{{kind: ServiceAccount, name: {name}, namespace: {FLUX_NS}}}]\n"
    ))
    .unwrap();
    c.service_account_kubeconfig(FLUX_NS, name, None).unwrap()
}

/// Starts `ks/web -n e2e-intr --yes` through `proxy` with every GET of the Kustomization held
/// 12 s (the executor's re-read before its resume), and returns once our suspend is on the
/// object: the window between suspend and resume.
fn spawn_in_the_window(c: &Cluster, proxy: &FaultProxy, name: &str) -> std::process::Child {
    proxy.add(Fault {
        method: Some("GET".into()),
        path_contains: format!("/namespaces/e2e-intr/kustomizations/{name}"),
        nth: 0,
        action: FaultAction::Latency(Duration::from_secs(12)),
    });
    let child = std::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(proxy.kubeconfig())
        .args([
            &format!("ks/{name}"),
            "-n",
            "e2e-intr",
            "--yes",
            "-o",
            "json",
        ])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(Duration::from_secs(60), "our suspend", || {
        let k = ks(c, "e2e-intr", name);
        (suspended(&k) && marker(&k).is_some()).then_some(())
    });
    child
}

/// On a real in-flight health check (kustomize-controller v1.9.6, gate off: lever
/// suspend-resume): a read-only ServiceAccount gets exit 3 naming the verb and resource, and
/// nothing changes; a 409 on our first PATCH is re-read and retried (the proxy's log: 409,
/// 200, 200) and the done lines come before the verdict; SIGINT between suspend and resume
/// resumes first (exit 130); SIGKILL there leaves our marker, the next `ks/NAME` plans
/// `resume`, and `--all` heals it and shows the state after the repair (the check, still in
/// flight: exit 1).
fn interrupted_runs_faults_and_rbac_on_a_real_held_check() {
    let c = &e2e_cluster();
    source(c);
    let ns = "e2e-intr";
    namespace(c, ns);
    // One Kustomization per write scenario: after a suspend+resume, the resume's generation
    // is queued behind the check in flight, so a second lever on the same check is `wait`
    // (issue 28 item 3), not another suspend+resume.
    for name in ["web", "web-int", "web-kill"] {
        real_ks(c, ns, name, "intr", "  wait: true\n  timeout: 3m\n");
    }
    eventually(T, "the real checks are in flight", || {
        ["web", "web-int", "web-kill"]
            .iter()
            .all(|n| {
                condition(&ks(c, ns, n), "Reconciling")["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Running health checks"))
            })
            .then_some(())
    });
    // RBAC: read-only.
    let ro = sa_kubeconfig(
        c,
        "unstick-e2e-readonly",
        "- {apiGroups: [\"*\"], resources: [\"*\"], verbs: [get, list, watch]}",
    );
    let o = unstick_with(&ro, &["ks/web", "-n", ns, "--yes"]);
    assert_eq!(o.code, 3, "{o}");
    assert!(o.stderr.contains("patch"), "{o}");
    assert!(
        o.stderr
            .contains("kustomizations.kustomize.toolkit.fluxcd.io"),
        "{o}"
    );
    assert!(!suspended(&ks(c, ns, "web")));
    let o = unstick_with(&ro, &["--all", "-n", ns, "-o", "json"]);
    assert_eq!(
        o.code, 1,
        "the read-only view works with read-only rights: {o}"
    );
    assert_eq!(o.json()["items"][0]["class"], "health-check-in-flight");

    let (_rt, proxy) = proxy_for(c);
    // 409 on our first PATCH (the suspend, guarded by resourceVersion): re-read, retried.
    proxy.add(Fault {
        method: Some("PATCH".into()),
        path_contains: "/namespaces/e2e-intr/kustomizations/web".into(),
        nth: 1,
        action: FaultAction::Status(409),
    });
    proxy.reset_requests();
    let o = unstick_with(
        proxy.kubeconfig(),
        &["ks/web", "-n", ns, "--yes", "--no-wait"],
    );
    assert_eq!(o.code, 0, "{o}");
    let patches: Vec<u16> = proxy
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path.contains("/kustomizations/web"))
        .map(|r| r.status)
        .collect();
    assert_eq!(patches, vec![409, 200, 200], "suspend 409, suspend, resume");
    let at = |s: &str| o.stdout.find(s).unwrap_or_else(|| panic!("{s}: {o}"));
    let (suspend, resume, verdict) = (
        at(&format!("✓ patched Kustomization {ns}/web")),
        at(&format!("✓ resumed Kustomization {ns}/web")),
        at("not waiting; check later with:"),
    );
    assert!(suspend < resume && resume < verdict, "{o}");
    assert!(!o.stderr.contains('✓'), "{o}");
    assert!(!suspended(&ks(c, ns, "web")));
    proxy.clear();

    // SIGINT between our suspend and our resume: resumed first, exit 130.
    let child = spawn_in_the_window(c, &proxy, "web-int");
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let k = ks(c, ns, "web-int");
    assert!(!suspended(&k) && marker(&k).is_none(), "{k:#}");
    proxy.clear();

    // SIGKILL in the same window: our marker stays, and the next runs heal it.
    let mut child = spawn_in_the_window(c, &proxy, "web-kill");
    child.kill().unwrap();
    child.wait().unwrap();
    proxy.clear();
    let k = ks(c, ns, "web-kill");
    assert!(suspended(&k) && marker(&k).is_some(), "{k:#}");
    let v = unstick(c, &["ks/web-kill", "-n", ns, "--dry-run", "-o", "json"]).json();
    assert_eq!(v["diagnosis"]["class"], "suspended", "{v:#}");
    assert!(v["diagnosis"]["suspendedByUnstickAt"].is_string(), "{v:#}");
    assert_eq!(v["plan"]["lever"], "resume", "{v:#}");
    let o = unstick(c, &["--all", "-n", ns, "-o", "json"]);
    let v = o.json();
    assert_eq!(v["healed"], json!([format!("{ns}/web-kill")]), "{v:#}");
    // The row after the repair: the real check is still in flight, a finding.
    let row = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kustomization"] == format!("{ns}/web-kill"))
        .cloned()
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(row["class"], "health-check-in-flight", "{v:#}");
    assert_eq!(o.code, 1, "{o}");
    let k = ks(c, ns, "web-kill");
    assert!(!suspended(&k) && marker(&k).is_none(), "{k:#}");
}

/// The request bound whatever the fleet's shape (issue 15 item 6), counted by the fault
/// proxy on the real apiserver: dependencies in another namespace are read with one list
/// (never a GET each); in three namespaces, still one list; healing costs one PATCH per
/// Kustomization left suspended by us (guarded by the listed resourceVersion). Bound: reads
/// <= 15, plus 1 per write.
fn fleet_view_request_bound_with_cross_namespace_dependencies_and_healing() {
    let c = &e2e_cluster();
    source(c);
    for ns in ["e2e-deps", "e2e-team-a", "e2e-team-b", "e2e-team-c"] {
        namespace(c, ns);
    }
    for i in 0..12 {
        held_ks(c, "e2e-deps", &format!("dep-{i:02}"), "", "");
        let dep = format!("  dependsOn: [{{name: dep-{i:02}, namespace: e2e-deps}}]\n");
        if i < 2 {
            held_ks(
                c,
                "e2e-team-a",
                &format!("app-{i:02}"),
                &format!("{dep}  suspend: true\n"),
                &format!("{MARKER}: \"2026-11-30T07:00:00Z\""),
            );
        } else {
            held_ks(c, "e2e-team-a", &format!("app-{i:02}"), &dep, "");
        }
    }
    for (i, (dns, dn)) in [
        ("e2e-team-a", "app-05"),
        ("e2e-team-c", "nope"),
        ("e2e-deps", "dep-01"),
    ]
    .iter()
    .enumerate()
    {
        held_ks(
            c,
            "e2e-team-b",
            &format!("b-{i}"),
            &format!("  dependsOn: [{{name: {dn}, namespace: {dns}}}]\n"),
            "",
        );
    }
    let (_rt, proxy) = proxy_for(c);
    let count = |p: &FaultProxy| {
        let reqs = p.requests();
        let writes = reqs.iter().filter(|r| r.method == "PATCH").count();
        let all: Vec<String> = reqs
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        (reqs.len() - writes, writes, all)
    };
    let kc = proxy.kubeconfig().to_path_buf();
    // --dry-run: no healing, reads only; 12 dependencies in one other namespace, one list.
    proxy.reset_requests();
    let o = unstick_with(
        &kc,
        &["--all", "-n", "e2e-team-a", "--dry-run", "-o", "json"],
    );
    let (reads, writes, all) = count(&proxy);
    assert_eq!(writes, 0, "{all:#?}");
    assert!(reads <= 15, "{reads} reads: {all:#?}");
    assert!(
        !all.iter()
            .any(|r| r.starts_with("GET ") && r.contains("/kustomizations/")),
        "one list, not a GET per dependency: {all:#?}"
    );
    assert_eq!(o.json()["total"], 12, "{o}");
    // Dependencies in three namespaces: the one list across namespaces holds them (it is
    // read across namespaces anyway: the controller's workers are shared by all of them).
    proxy.reset_requests();
    let o = unstick_with(&kc, &["--all", "-n", "e2e-team-b", "-o", "json"]);
    let (reads, writes, all) = count(&proxy);
    assert_eq!(writes, 0, "{all:#?}");
    assert!(reads <= 15, "{reads} reads: {all:#?}");
    assert_eq!(
        all.iter().filter(|r| r.contains("kustomizations")).count(),
        1,
        "{all:#?}"
    );
    let v = o.json();
    let b1 = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kustomization"] == "e2e-team-b/b-1")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert!(
        b1["diagnosis"]["hints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h
                .as_str()
                .unwrap()
                .contains("dependency e2e-team-c/nope is missing")),
        "{b1:#}"
    );
    // Healing: one PATCH per Kustomization left suspended by us; rows after the repair.
    proxy.reset_requests();
    let o = unstick_with(&kc, &["--all", "-n", "e2e-team-a", "-o", "json"]);
    let (reads, writes, all) = count(&proxy);
    let v = o.json();
    assert_eq!(
        v["healed"],
        json!(["e2e-team-a/app-00", "e2e-team-a/app-01"]),
        "{v:#}"
    );
    assert_eq!(writes, 2, "{all:#?}");
    assert!(reads <= 15, "{reads} reads + {writes} writes: {all:#?}");
    eprintln!(
        "--all -n e2e-team-a with 12 cross-namespace dependencies and 2 heals: {reads} reads + {writes} writes: {all:?}"
    );
    for i in 0..2 {
        let k = ks(c, "e2e-team-a", &format!("app-{i:02}"));
        assert!(!suspended(&k) && marker(&k).is_none(), "{k:#}");
        assert_ne!(v["items"][i]["class"], "suspended", "{v:#}");
    }
}

/// Healthy (exit 0, no lever), then a broken build in Git (build-failed, fix-in-git, exit 1),
/// then the source pointed at a repository that does not exist (the source's failure is in
/// the diagnosis): each from the real controllers.
fn classes_healthy_build_failed_and_source_not_ready() {
    let c = &e2e_cluster();
    let name = "e2e-classes";
    let sha = c
        .fleet(
            name,
            &[
                (
                    "app/kustomization.yaml",
                    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cm.yaml\n",
                ),
                (
                    "app/cm.yaml",
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-classes\n  namespace: default\ndata: {a: b}\n",
                ),
            ],
            "  interval: 100h\n  path: ./app\n  prune: true\n",
        )
        .unwrap();
    // Ready with its generation observed: fluxcd/pkg runtime/patch writes the conditions and
    // status.observedGeneration in separate requests, so a reader can see Ready=True with
    // observedGeneration -1 for a moment (seen in .ci/run), which unstick rightly reads as
    // still reconciling.
    eventually(T, "e2e-classes Ready", || {
        let k = c.kustomization(name);
        (ready_true(&k)
            && condition(&k, "Reconciling").is_null()
            && k["status"]["observedGeneration"] == k["metadata"]["generation"])
            .then_some(())
    });
    let o = unstick(c, &["ks/e2e-classes", "--dry-run", "-o", "json"]);
    assert_eq!(o.code, 0, "{o}");
    let v = o.json();
    assert_eq!(v["diagnosis"]["class"], "healthy", "{v:#}");
    assert_eq!(v["plan"]["lever"], "none");
    assert_eq!(
        v["diagnosis"]["source"]["lastAppliedRevision"],
        format!("main@sha1:{sha}")
    );
    // Break the build in Git; fetch it now.
    c.push(
        name,
        &[(
            "app/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - missing.yaml\n",
        )],
        "break the build",
    )
    .unwrap();
    merge_patch(
        c,
        FLUX_NS,
        "gitrepository",
        name,
        "flux",
        json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now()}}}),
    );
    eventually(T, "BuildFailed", || {
        (condition(&c.kustomization(name), "Ready")["reason"] == "BuildFailed").then_some(())
    });
    let o = unstick(c, &["ks/e2e-classes", "--dry-run", "-o", "json"]);
    assert_eq!(o.code, 1, "{o}");
    let v = o.json();
    assert_eq!(v["diagnosis"]["class"], "build-failed", "{v:#}");
    assert_eq!(v["plan"]["lever"], "fix-in-git");
    // A source that cannot be fetched.
    merge_patch(
        c,
        FLUX_NS,
        "gitrepository",
        name,
        "kubectl",
        json!({"spec": {"url": "http://127.0.0.1:9/org/none.git"}}),
    );
    eventually(T, "source Ready=False", || {
        let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", name]);
        (condition(&g, "Ready")["status"] == "False").then_some(())
    });
    let o = unstick(c, &["ks/e2e-classes", "--dry-run", "-o", "json"]);
    assert_eq!(o.code, 1, "{o}");
    let v = o.json();
    let d = &v["diagnosis"];
    assert_eq!(d["source"]["ready"]["status"], "False", "{v:#}");
    assert!(
        d["class"] == "build-failed" || d["class"] == "source-not-ready",
        "{v:#}"
    );
}

/// The catalogue's case on the real controller, gate off: a bare-tag image (`0.1.1`) holds
/// wave 1's health check; the diagnosis names the Deployment, the pod's pull error and the
/// signature, with the deadline = start + timeout on the wall clock; wave 2 waits on it
/// (fix-dependency). The fix is pushed and fetched: no write frees the check sooner (the
/// `wait` lever), the wait proves the recovery and the cascade frees wave 2.
fn gate_off_diagnosis_then_the_wait_lever_recovers_with_cascade() {
    let c = &e2e_cluster();
    let web = |image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n  namespace: e2e-wave\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: podinfo}}\n  template:\n    metadata:\n      labels: {{app: podinfo}}\n    spec:\n      containers:\n      - name: podinfo\n        image: {image}\n"
        )
    };
    c.fleet(
        "e2e-wave-1",
        &[
            (
                "ns.yaml",
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: e2e-wave\n",
            ),
            ("web.yaml", &web("0.1.1")),
        ],
        "  interval: 100h\n  path: ./\n  prune: true\n  wait: true\n  timeout: 45s\n",
    )
    .unwrap();
    c.fleet(
        "e2e-wave-2",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-wave-2\n  namespace: default\ndata: {a: b}\n",
        )],
        "  interval: 100h\n  path: ./\n  prune: true\n  dependsOn: [{name: e2e-wave-1}]\n",
    )
    .unwrap();
    eventually(
        T,
        "wave 1's check in flight, its pod failing to pull",
        || {
            let k = c.kustomization("e2e-wave-1");
            let running = condition(&k, "Reconciling")["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks"));
            let pods = c
                .kubectl(&["-n", "e2e-wave", "get", "pods", "-o", "json"])
                .ok()?;
            (running && (pods.contains("ErrImagePull") || pods.contains("ImagePullBackOff")))
                .then_some(())
        },
    );
    eventually(T, "wave 2 DependencyNotReady", || {
        (condition(&c.kustomization("e2e-wave-2"), "Ready")["reason"] == "DependencyNotReady")
            .then_some(())
    });
    let o = unstick(c, &["ks/e2e-wave-1", "--dry-run", "-o", "json"]);
    assert_eq!(o.code, 1, "{o}");
    let v = o.json();
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    let hc = &d["healthCheck"];
    assert_eq!(hc["timeoutSecs"], 45.0, "{hc:#}");
    // The deadline is the start plus the timeout, on the wall clock.
    let ts = |k: &str| -> jiff::Timestamp { hc[k].as_str().unwrap().parse().unwrap() };
    assert_eq!(
        ts("deadline").duration_since(ts("startedAt")).as_secs_f64(),
        45.0,
        "{hc:#}"
    );
    assert_eq!(d["blocking"][0]["object"], "Deployment/e2e-wave/podinfo");
    assert_eq!(d["blocking"][0]["kstatus"], "InProgress");
    let pod = &d["blocking"][0]["pods"][0];
    assert!(
        ["ImagePullBackOff", "ErrImagePull"].contains(&pod["reason"].as_str().unwrap()),
        "{v:#}"
    );
    assert_eq!(pod["image"], "0.1.1");
    assert_eq!(d["signatures"][0]["id"], "bare-tag-image");
    assert_eq!(v["controller"]["cancelMode"], "never");
    assert_eq!(v["controller"]["version"]["minor"], 9);
    assert_eq!(v["plan"]["lever"], "suspend-resume");
    assert_eq!(
        v["plan"]["recommendGateArg"],
        "--feature-gates=CancelHealthCheckOnNewRevision=true"
    );
    assert_eq!(v["plan"]["steps"][0]["patch"]["spec"]["suspend"], true);
    assert_eq!(v["action"], "dry-run");
    assert!(!suspended(&c.kustomization("e2e-wave-1")));
    let v = unstick(c, &["ks/e2e-wave-2", "--dry-run", "-o", "json"]).json();
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "waiting-on-dependencies", "{v:#}");
    assert_eq!(d["rootCause"]["kustomization"], "flux-system/e2e-wave-1");
    assert_eq!(
        d["rootCause"]["diagnosis"]["class"],
        "health-check-in-flight"
    );
    assert_eq!(v["plan"]["lever"], "fix-dependency");
    let h = unstick(c, &["ks/e2e-wave-1", "--dry-run"]);
    assert!(h.stdout.contains("Lever: suspend-resume"), "{h}");
    assert!(h.stdout.contains("run kubectl markercheck"), "{h}");

    // The fix, fetched while the check is still in flight.
    let fix = c
        .push(
            "e2e-wave-1",
            &[("web.yaml", &web(GOOD))],
            "fix: full image reference",
        )
        .unwrap();
    let fix_rev = format!("main@sha1:{fix}");
    merge_patch(
        c,
        FLUX_NS,
        "gitrepository",
        "e2e-wave-1",
        "flux",
        json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now()}}}),
    );
    eventually(T, "the fix fetched", || {
        let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", "e2e-wave-1"]);
        (g["status"]["artifact"]["revision"] == fix_rev.as_str()).then_some(())
    });
    let o = unstick(c, &["ks/e2e-wave-1", "--yes", "--cascade", "-o", "json"]);
    let v = o.json();
    assert_eq!(o.code, 0, "{o}");
    assert_eq!(v["plan"]["lever"], "wait", "{v:#}");
    assert_eq!(v["action"], "waited");
    assert_eq!(v["done"], json!([]));
    assert!(
        v["plan"]["alternatives"][0]
            .as_str()
            .unwrap()
            .starts_with("--restart-controller"),
        "{v:#}"
    );
    assert_eq!(v["proof"], "recovered");
    assert_eq!(
        v["cascade"],
        json!([{"wave": 1, "kustomization": "flux-system/e2e-wave-2", "proof": "recovered"}]),
        "{v:#}"
    );
    let k = c.kustomization("e2e-wave-1");
    assert!(!suspended(&k), "{k:#}");
    assert_eq!(k["status"]["lastAppliedRevision"], fix_rev.as_str());
    assert!(ready_true(&k), "{k:#}");
}

/// `--check --token OLD` once a later requestedAt exists (the real controller handles both):
/// superseded by a handled request covers the old one (recovered); once the object moves to a
/// shard no controller runs here, a later request stays unhandled and the old token is
/// superseded by a pending one (exit 1); an invalid token is a usage error decided before any
/// kubeconfig is read.
fn check_token_superseded_by_a_later_request() {
    let c = &e2e_cluster();
    let name = "e2e-token";
    c.fleet(
        name,
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-token\n  namespace: default\ndata: {a: b}\n",
        )],
        "  interval: 100h\n  path: ./\n  prune: true\n",
    )
    .unwrap();
    let settled = |t: &str| {
        eventually(T, &format!("request {t} handled"), || {
            let k = c.kustomization(name);
            (k["status"]["lastHandledReconcileAt"] == t
                && ready_true(&k)
                && condition(&k, "Reconciling").is_null())
            .then_some(())
        })
    };
    let request = |t: &str| {
        merge_patch(
            c,
            FLUX_NS,
            "kustomization",
            name,
            "flux",
            json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": t}}}),
        )
    };
    let (t1, t2, t3) = (
        "2026-11-30T07:30:00.1Z",
        "2026-11-30T07:31:00.2Z",
        "2026-11-30T07:32:00.3Z",
    );
    request(t1);
    settled(t1);
    request(t2);
    settled(t2);
    let o = unstick(c, &["ks/e2e-token", "--check", "--token", t1]);
    assert_eq!(o.code, 0, "{o}");
    assert!(
        o.stdout.contains(&format!(
            "request {t1} was superseded by a later request {t2}, which was handled; recovered"
        )),
        "{o}"
    );
    let v = unstick(c, &["ks/e2e-token", "--check", "--token", t1, "-o", "json"]).json();
    assert_eq!(
        v["token"],
        json!({"token": t1, "state": "superseded", "supersededBy": t2, "supersededByHandled": true})
    );
    assert_eq!(v["proof"], "recovered");
    // No controller takes it any more: a later request stays pending.
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "label",
        "kustomization",
        name,
        &format!("{HELD_SHARD_LABEL}=held"),
    ])
    .unwrap();
    request(t3);
    let o = unstick(c, &["ks/e2e-token", "--check", "--token", t1]);
    assert_eq!(o.code, 1, "{o}");
    assert!(
        o.stdout.contains(&format!(
            "request {t1} was superseded by a later request {t3}, which is not handled yet"
        )),
        "{o}"
    );
    let v = unstick(c, &["ks/e2e-token", "--check", "--token", t2, "-o", "json"]).json();
    assert_eq!(v["token"]["state"], "handled", "{v:#}");
    // Invalid token: usage, decided before any kubeconfig is read.
    let o = unstick_with(
        Path::new("/nonexistent/kubeconfig"),
        &["ks/e2e-token", "--check", "--token", "yesterday"],
    );
    assert_eq!(o.code, 2, "{o}");
    assert!(
        o.stderr
            .contains("--token \"yesterday\" is not a reconcile.fluxcd.io/requestedAt value"),
        "{o}"
    );
    assert!(o.stdout.is_empty(), "{o}");
}

/// A Kustomization the user named that the cluster does not have: exit 3 (the cluster's
/// answer, not a usage error) naming the kind, namespace, name, context and server, and the
/// command that lists what exists (`cluster_loop::error::Error::not_found`); the same name in
/// the namespace where it lives is found. `--all -n NS`: a namespace that does not exist is
/// exit 3 naming it and `kubectl get ns`; an existing one without Kustomizations says so
/// (exit 1: nothing was checked); when GET namespaces is forbidden (real RBAC) it says it
/// could not check.
fn missing_kustomization_or_namespace_is_exit_3_and_an_empty_namespace_exit_1() {
    let c = &e2e_cluster();
    source(c);
    namespace(c, "e2e-nf");
    namespace(c, "e2e-empty");
    held_ks(c, "e2e-nf", "apps", "", "");
    let server = c.server().trim_end_matches('/').to_owned();
    for args in [
        vec!["ks/apps"],
        vec!["ks/apps", "--dry-run"],
        vec!["ks/apps", "--check", "-o", "json"],
    ] {
        let o = unstick(c, &args);
        assert_eq!(o.code, 3, "{args:?}: {o}");
        assert_eq!(
            o.stderr,
            format!(
                "error: Kustomization \"apps\" not found in namespace \"flux-system\" \
                 (context \"realcluster\", {server}); list what exists with: kubectl get ks -A --context realcluster\n"
            ),
            "{args:?}"
        );
        if args.contains(&"json") {
            // -o json: the shared error document on stdout (s6 trial: nothing was printed).
            let v = o.json();
            assert_eq!(v["kind"], "UnstickError", "{args:?}: {o}");
            assert_eq!(v["exitCode"], 3, "{args:?}: {o}");
            assert_eq!(
                format!("error: {}\n", v["error"].as_str().unwrap()),
                o.stderr,
                "{args:?}"
            );
        } else {
            assert!(o.stdout.is_empty(), "{args:?}: {o}");
        }
    }
    let o = unstick(c, &["ks/apps", "--dry-run", "-n", "e2e-nf", "-o", "json"]);
    assert_ne!(o.code, 3, "{o}");
    assert_eq!(o.json()["diagnosis"]["kustomization"], "e2e-nf/apps", "{o}");

    let o = unstick(c, &["--all", "-n", "e2e-nonexistent"]);
    assert_eq!(o.code, 3, "{o}");
    assert_eq!(
        o.stderr,
        format!(
            "error: Namespace \"e2e-nonexistent\" not found (context \"realcluster\", {server}); \
             list what exists with: kubectl get ns --context realcluster\n"
        )
    );
    assert!(!o.stdout.contains("healthy"), "{o}");
    let o = unstick(c, &["--all", "-n", "e2e-nonexistent", "-o", "json"]);
    assert_eq!(o.code, 3, "{o}");
    let v = o.json();
    assert_eq!(
        (v["kind"].as_str(), v["exitCode"].as_i64()),
        (Some("UnstickError"), Some(3)),
        "{o}"
    );
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("Namespace \"e2e-nonexistent\" not found"),
        "{o}"
    );
    let o = unstick(c, &["--all", "-n", "e2e-empty"]);
    assert_eq!(o.code, 1, "{o}");
    assert!(
        o.stdout
            .contains("no Kustomizations in namespace e2e-empty\n"),
        "{o}"
    );
    assert!(!o.stdout.contains("healthy"), "{o}");
    let o = unstick(c, &["--all", "-n", "e2e-empty", "-o", "json"]);
    assert_eq!(o.code, 1, "{o}");
    let v = o.json();
    assert_eq!(v["total"], 0);
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "no Kustomizations in namespace e2e-empty"),
        "{v:#}"
    );
    // Allowed to read Flux objects and Deployments, not namespaces.
    let kc = sa_kubeconfig(
        c,
        "unstick-e2e-flux-reader",
        "- {apiGroups: [kustomize.toolkit.fluxcd.io, source.toolkit.fluxcd.io, apps], resources: [\"*\"], verbs: [get, list, watch]}",
    );
    for ns in ["e2e-nonexistent", "e2e-empty"] {
        let o = unstick_with(&kc, &["--all", "-n", ns]);
        assert_eq!(o.code, 1, "{ns}: {o}");
        assert!(
            o.stdout.contains(&format!(
                "no Kustomizations in namespace {ns} (could not check the namespace exists)\n"
            )),
            "{ns}: {o}"
        );
    }
}

/// Fresh-user trial, HIGH: with the fix pushed, `--restart-controller --yes --cascade` makes
/// the real controller run every Kustomization again, so wave 1's first run after the
/// restart can find its dependency `e2e-platform` (`wait: true`) reconciling
/// (DependencyNotReady). That is progress, not failure: the wait goes on until wave 1 is
/// Ready at the fix revision, and the cascade follows.
fn restart_controller_waits_while_a_dependency_reconciles() {
    let c = &e2e_cluster();
    let deploy = |name: &str, image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  replicas: 2\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: {name}\n        image: {image}\n"
        )
    };
    c.fleet(
        "e2e-platform",
        &[("ingress.yaml", &deploy("e2e-ingress", GOOD))],
        "  interval: 100h\n  path: ./\n  prune: true\n  wait: true\n  timeout: 1m\n",
    )
    .unwrap();
    c.fleet(
        "e2e-rs-1",
        &[("web.yaml", &deploy("e2e-rs-web", "0.1.1"))],
        "  interval: 100h\n  path: ./\n  prune: true\n  wait: true\n  timeout: 2m\n  dependsOn: [{name: e2e-platform}]\n",
    )
    .unwrap();
    c.fleet(
        "e2e-rs-2",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-rs-2\n  namespace: default\ndata: {a: b}\n",
        )],
        "  interval: 100h\n  path: ./\n  prune: true\n  dependsOn: [{name: e2e-rs-1}]\n",
    )
    .unwrap();
    eventually(T, "wave 1's check in flight", || {
        condition(&c.kustomization("e2e-rs-1"), "Reconciling")["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Running health checks"))
            .then_some(())
    });
    let fix = c
        .push(
            "e2e-rs-1",
            &[("web.yaml", &deploy("e2e-rs-web", GOOD))],
            "fix",
        )
        .unwrap();
    let fix_rev = format!("main@sha1:{fix}");
    merge_patch(
        c,
        FLUX_NS,
        "gitrepository",
        "e2e-rs-1",
        "flux",
        json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now()}}}),
    );
    eventually(T, "the fix fetched", || {
        let g = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", "e2e-rs-1"]);
        (g["status"]["artifact"]["revision"] == fix_rev.as_str()).then_some(())
    });
    let o = unstick(
        c,
        &[
            "ks/e2e-rs-1",
            "--restart-controller",
            "--yes",
            "--cascade",
            "-o",
            "json",
        ],
    );
    let v = o.json();
    assert_eq!(o.code, 0, "{o}");
    assert_eq!(v["plan"]["lever"], "restart-controller", "{v:#}");
    assert_eq!(v["proof"], "recovered", "{v:#}");
    assert!(v["lastSeen"].is_null(), "{v:#}");
    assert_eq!(
        v["cascade"],
        json!([{"wave": 1, "kustomization": "flux-system/e2e-rs-2", "proof": "recovered"}]),
        "{v:#}"
    );
    let k = c.kustomization("e2e-rs-1");
    assert_eq!(
        k["status"]["lastAppliedRevision"],
        fix_rev.as_str(),
        "{k:#}"
    );
    assert!(ready_true(&k), "{k:#}");
    let events = c
        .kubectl(&[
            "-n",
            FLUX_NS,
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=e2e-rs-1,reason=DependencyNotReady",
            "-o",
            "name",
        ])
        .unwrap_or_default();
    eprintln!(
        "DependencyNotReady events on e2e-rs-1: {}",
        events.lines().count()
    );
}

/// `--all` on 300 Kustomizations in 10 waves (each dependsOn the previous wave's first) with
/// 10,000 inventory entries, healthy but for one failed health check naming a Deployment (so
/// the workload, pod and event lists are read too), held by a shard no controller runs: at
/// most 15 API requests on the real apiserver (counted by the fault proxy); `--problems`
/// keeps the one row; the table shows every healthy row and the count line.
fn fleet_view_on_300_kustomizations_uses_at_most_15_requests() {
    use futures::StreamExt;
    use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
    let c = &e2e_cluster();
    let rev = source(c).to_owned();
    let ns = "e2e-300";
    namespace(c, ns);
    let (rt, proxy) = proxy_for(c);
    let now = now();
    rt.block_on(async {
        let client = c.client().await.unwrap();
        let ar = ApiResource {
            group: "kustomize.toolkit.fluxcd.io".into(),
            version: "v1".into(),
            api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
            kind: "Kustomization".into(),
            plural: "kustomizations".into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client, ns, &ar);
        futures::stream::iter(0..300usize)
            .for_each_concurrent(16, |i| {
                let api = api.clone();
                let (rev, now) = (rev.clone(), now.clone());
                async move {
                    let (wave, n) = (i / 30, i % 30);
                    let name = format!("wave-{wave}-{n:03}");
                    let entries: Vec<Value> = (0..10_000 / 300 + usize::from(i < 10_000 % 300))
                        .map(|j| json!({"id": format!("{ns}_{name}-cm-{j:03}__ConfigMap"), "v": "v1"}))
                        .collect();
                    let mut spec = json!({"interval": "10m", "path": format!("./apps/{name}"), "prune": true,
                        "sourceRef": {"kind": "GitRepository", "name": "e2e-src", "namespace": FLUX_NS}});
                    if wave > 0 {
                        spec["dependsOn"] = json!([{"name": format!("wave-{}-000", wave - 1)}]);
                    }
                    let o: DynamicObject = serde_json::from_value(json!({
                        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                        "metadata": {"name": name, "namespace": ns, "labels": {HELD_SHARD_LABEL: "held"}},
                        "spec": spec}))
                    .unwrap();
                    api.create(&PostParams::default(), &o).await.unwrap();
                    let ready = if name == "wave-3-007" {
                        json!({"type": "Ready", "status": "False", "reason": "HealthCheckFailed",
                            "observedGeneration": 1, "lastTransitionTime": now,
                            "message": format!("health check failed after 5m0.01s: timeout waiting for: [Deployment/{ns}/web status: 'InProgress']")})
                    } else {
                        json!({"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                            "observedGeneration": 1, "lastTransitionTime": now,
                            "message": format!("Applied revision: {rev}")})
                    };
                    api.patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"status": {"observedGeneration": 1,
                            "lastAppliedRevision": rev, "lastAttemptedRevision": rev,
                            "conditions": [ready], "inventory": {"entries": entries}}})),
                    )
                    .await
                    .unwrap();
                }
            })
            .await;
    });
    proxy.reset_requests();
    let o = unstick_with(
        proxy.kubeconfig(),
        &["--all", "-n", ns, "--problems", "-o", "json"],
    );
    let reqs: Vec<String> = proxy
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(o.code, 1, "{o}");
    let v = o.json();
    assert_eq!(
        (&v["total"], &v["notHealthy"], &v["findings"]),
        (&json!(300), &json!(1), &json!(1)),
        "{v:#}"
    );
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{:#}", v["items"]);
    assert_eq!(v["items"][0]["class"], "health-check-failed");
    assert_eq!(
        v["items"][0]["diagnosis"]["blocking"][0]["kstatus"],
        "NotFound"
    );
    assert!(reqs.len() <= 15, "{} requests: {reqs:#?}", reqs.len());
    eprintln!(
        "--all -n {ns} on 300 Kustomizations: {} API requests: {reqs:?}",
        reqs.len()
    );
    // The whole fleet in one table, healthy rows included, and the count line.
    let o = unstick(c, &["--all", "-n", ns]);
    assert_eq!(o.code, 1, "{o}");
    let rows = o
        .stdout
        .lines()
        .filter(|l| l.contains("healthy") && l.contains("wave-"))
        .count();
    assert!(rows >= 299, "{rows} healthy rows: {o}");
    assert!(
        o.stdout
            .contains("1 of 300 Kustomizations not healthy; 1 needs attention"),
        "{o}"
    );
    // Rows of this namespace only: the header names worker holders of every namespace
    // (other tests' runs on this cluster), and the workers are shared.
    let o = unstick(c, &["--all", "-n", ns, "--problems"]);
    assert_eq!(
        o.stdout
            .lines()
            .filter(|l| l.starts_with(&format!("{ns}/wave-")))
            .count(),
        1,
        "{o}"
    );
}
