//! End-to-end: the real `kubectl-unstick` binary against the twin cluster running the
//! bare-tag-rollout scenario (kustomize-controller model with the work queue and the
//! CancelHealthCheckOnNewRevision behaviours, workload model with ImagePullBackOff).
//!
//! Time: the scenarios run at time scale 0.05 (a nominal 5m health-check timeout lasts 15
//! real seconds); waits are watch-driven with generous real-time deadlines.

use std::time::Duration;

use serde_json::{Value, json};
use twin::auth::Rule;
use twin::faults::{Fault, FaultAction, Trigger};
use twin::flux::cluster::{ObjKey, s};
use twin::git::Change;
use twin::scenario::{EventSpec, RunningScenario, Scenario};
use twin::testkit::{
    FLUX_SYSTEM, PluginRun, bare_tag_first_rollout, bare_tag_fix_fetched, commit, cond, cond_is,
    cond_status, events_about, fail_health_check, get, gitrepo, ks, plugin_command,
    ready_succeeded, run_plugin, start_scaled, start_shipped, wait,
};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");
const T: Duration = Duration::from_secs(240);
const MARKER: &str = "unstick.cluster-loop.dev/suspended-at";

/// The shipped bare-tag-rollout world with the given controller; the fix commit only when
/// the test fires it.
async fn start(version: &str, gate: bool, extra_events: Vec<Value>) -> RunningScenario {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    sc.controller.version = Some(version.to_string());
    sc.controller.feature_gates.clear();
    if gate {
        sc.controller
            .feature_gates
            .insert("CancelHealthCheckOnNewRevision".into(), true);
    }
    for e in sc.events.iter_mut() {
        if e.name == "fix-commit" {
            e.manual = true;
        }
    }
    for e in extra_events {
        sc.events
            .push(serde_json::from_value::<EventSpec>(e).unwrap());
    }
    start_scaled(sc, 0.05).await
}

/// Waits for the automation commit's health check on apps-wave-1 to be in flight; returns
/// (first revision, bad revision).
async fn in_flight(run: &RunningScenario) -> (String, String) {
    let first = bare_tag_first_rollout(run, T).await;
    let w1 = wait(run, &ks("apps-wave-1"), T, |o| {
        cond(o, "Reconciling").is_some_and(|c| {
            c["status"] == "True"
                && c["reason"] == "Progressing"
                && s(c, "/message").starts_with("Running health checks")
        }) && s(o, "/status/lastAttemptedRevision") != first
    })
    .await;
    // The pod shows why.
    wait(
        run,
        &ObjKey::new("apps/v1", "Deployment", "apps", "podinfo"),
        T,
        |d| d.pointer("/spec/template/spec/containers/0/image") == Some(&json!("0.1.1")),
    )
    .await;
    let bad = s(&w1, "/status/lastAttemptedRevision").to_string();
    (first, bad)
}

fn cmd(
    run: &RunningScenario,
    kubeconfig: Option<&std::path::Path>,
    args: &[&str],
) -> tokio::process::Command {
    plugin_command(BIN, kubeconfig.unwrap_or(run.twin.kubeconfig_path()), args)
}

async fn unstick(run: &RunningScenario, args: &[&str]) -> PluginRun {
    unstick_as(run, None, args).await
}

async fn unstick_as(
    run: &RunningScenario,
    kc: Option<&std::path::Path>,
    args: &[&str],
) -> PluginRun {
    let out = run_plugin(BIN, kc.unwrap_or(run.twin.kubeconfig_path()), args, T).await;
    assert_report_shape(args, &out.stdout);
    out
}

/// Every `-o json` UnstickReport the binary writes in these runs has the documented key set
/// (no key missing whatever happened), a documented `proof` and a `cascade` list.
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

fn not_suspended_by_us(o: &Value) -> bool {
    o.pointer("/spec/suspend")
        .is_none_or(|v| v == &json!(false))
        && o.pointer(&format!(
            "/metadata/annotations/{}",
            MARKER.replace('/', "~1")
        ))
        .is_none()
}

/// True when no run is in progress on this Kustomization, as kustomize-controller v1 writes
/// its conditions: no `Ready=Unknown` (the start of a run), and no `Reconciling=True` unless
/// `Ready=False` (a failed run keeps Reconciling with reason ProgressingWithRetry).
fn settled(o: &Value) -> bool {
    !cond_status(o, "Ready", "Unknown")
        && (!cond_status(o, "Reconciling", "True") || cond_status(o, "Ready", "False"))
}

/// The Kustomization `name` once no run is in progress: a periodic run (10m: 30 real seconds
/// on the ×0.05 clock) may have started since the plugin proved its state, and a version read
/// mid-run says Ready=Unknown whatever the run will conclude.
async fn settled_ks(run: &RunningScenario, name: &str) -> Value {
    wait(run, &ks(name), T, settled).await
}

fn events_with_reason(run: &RunningScenario, name: &str, reason: &str) -> usize {
    let events = events_about(run, FLUX_SYSTEM, name);
    events.iter().filter(|(r, _)| r == reason).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gate_off_diagnosis_then_suspend_resume_recovers_with_cascade() {
    let run = start("v1.9.4", false, vec![]).await;

    // Healthy before the automation commit lands? Wave 2 was Ready at the first revision.
    let (_first, bad) = in_flight(&run).await;

    let o = unstick(&run, &["ks/apps-wave-1", "--dry-run", "-o", "json"]).await;
    assert_eq!(o.code, 1, "{}", o.stderr);
    let v = o.json();
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    assert_eq!(d["healthCheck"]["revision"], bad.as_str());
    assert_eq!(d["healthCheck"]["timeoutSecs"], 300.0);
    assert_eq!(d["blocking"][0]["object"], "Deployment/apps/podinfo");
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
    // Nothing changed.
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert!(not_suspended_by_us(&w1));

    // Wave 2 waits on wave 1: the walk names the root and calls the message ordering.
    wait(&run, &ks("apps-wave-2"), T, |o| {
        cond_is(o, "Ready", "False", "DependencyNotReady")
    })
    .await;
    let v = unstick(&run, &["ks/apps-wave-2", "--dry-run", "-o", "json"])
        .await
        .json();
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "waiting-on-dependencies");
    assert_eq!(d["rootCause"]["kustomization"], "flux-system/apps-wave-1");
    assert_eq!(
        d["rootCause"]["diagnosis"]["class"],
        "health-check-in-flight"
    );
    assert_eq!(v["plan"]["lever"], "fix-dependency");

    // Human output names the lever and the signature.
    let o = unstick(&run, &["ks/apps-wave-1", "--dry-run"]).await;
    assert!(o.stdout.contains("Lever: suspend-resume"), "{}", o.stdout);
    assert!(o.stdout.contains("run kubectl markercheck"), "{}", o.stdout);

    // Push the fix; with the gate off it waits behind the run. Pull the lever and cascade.
    let fix_rev = bare_tag_fix_fetched(&run, &bad, T).await;
    let o = unstick(
        &run,
        &["ks/apps-wave-1", "--yes", "--cascade", "-o", "json"],
    )
    .await;
    let v = o.json();
    assert_eq!(o.code, 0, "{v:#}\n{}", o.stderr);
    // The fix's arrival already queued the fresh run behind the in-flight check: no write
    // makes it sooner, so none is made (the `wait` lever), and the wait proves it.
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
        json!([{"wave": 1, "kustomization": "flux-system/apps-wave-2", "proof": "recovered"}]),
        "{v:#}"
    );
    let w1 = settled_ks(&run, "apps-wave-1").await;
    assert!(not_suspended_by_us(&w1), "{w1:#}");
    assert_eq!(s(&w1, "/status/lastAppliedRevision"), fix_rev);
    assert!(cond_is(&w1, "Ready", "True", "ReconciliationSucceeded"));
    // Our writes carry our field manager.
    let mf = w1["metadata"]["managedFields"].to_string();
    assert!(mf.contains("kubectl-unstick") || mf == "null", "{mf}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gate_on_v18_requested_at_cancels_now_and_failure_is_reported() {
    let run = start("v1.8.3", true, vec![]).await;
    let (_first, _bad) = in_flight(&run).await;
    let v = unstick(&run, &["ks/apps-wave-1", "--dry-run", "-o", "json"])
        .await
        .json();
    assert_eq!(v["controller"]["cancelMode"], "any-requeue");
    assert_eq!(v["plan"]["lever"], "request-reconcile");
    assert!(v["plan"].get("recommendGateArg").is_none());
    // No fix in Git: the request cancels the check now, the fresh run fails again -> exit 1
    // with the new diagnosis; --cascade does not go on, and says so with `cascade: []`.
    let o = unstick(
        &run,
        &["ks/apps-wave-1", "--yes", "--cascade", "-o", "json"],
    )
    .await;
    let v = o.json();
    assert_eq!(o.code, 1, "{v:#}\n{}", o.stderr);
    assert_eq!(v["proof"], "failed-again");
    assert_eq!(v["cascade"], json!([]), "{v:#}");
    let token = v["plan"]["requestToken"].as_str().unwrap().to_string();
    assert!(events_with_reason(&run, "apps-wave-1", "HealthCheckCanceled") >= 1);
    assert_eq!(v["after"]["class"], "health-check-failed", "{v:#}");
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert_eq!(s(&w1, "/status/lastHandledReconcileAt"), token);
    assert_eq!(
        s(
            &w1,
            "/metadata/annotations/reconcile.fluxcd.io~1requestedAt"
        ),
        token
    );
    // --check with the token: handled, but not Ready -> 1.
    let o = unstick(&run, &["ks/apps-wave-1", "--check", "--token", &token]).await;
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gate_on_v17_needs_a_new_revision() {
    let run = start("v1.7.2", true, vec![]).await;
    let (_first, bad) = in_flight(&run).await;
    let v = unstick(&run, &["ks/apps-wave-1", "--dry-run", "-o", "json"])
        .await
        .json();
    assert_eq!(v["controller"]["cancelMode"], "new-revision-only");
    assert_eq!(v["plan"]["lever"], "suspend-resume", "{v:#}");
    assert!(
        v["plan"]["why"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("no newer revision"))
    );
    let v = unstick(
        &run,
        &["ks/apps-wave-1", "--dry-run", "--with-source", "-o", "json"],
    )
    .await
    .json();
    assert_eq!(v["plan"]["lever"], "reconcile-source");
    assert_eq!(v["plan"]["steps"][0]["kind"], "GitRepository");
    // Push the fix and pull the source lever: the new revision cancels the check.
    run.fire("fix-commit");
    run.wait_fired("fix-commit", T).await.unwrap();
    let o = unstick(
        &run,
        &["ks/apps-wave-1", "--yes", "--with-source", "-o", "json"],
    )
    .await;
    let v = o.json();
    assert_eq!(o.code, 0, "{v:#}\n{}", o.stderr);
    assert_eq!(v["proof"], "recovered");
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert_ne!(s(&w1, "/status/lastAppliedRevision"), bad);
}

/// Installs a 20s latency on the first GET of a Kustomization: the executor's re-read just
/// before its resume, i.e. right after the suspend. Returns the spawned child.
async fn spawn_with_window(run: &RunningScenario) -> tokio::process::Child {
    run.twin.faults().add(Fault::on_verb(
        "get",
        Some("kustomizations"),
        Trigger::Nth(1),
        FaultAction::Latency(Duration::from_secs(20)),
    ));
    let child = cmd(run, None, &["ks/apps-wave-1", "--yes", "-o", "json"])
        .spawn()
        .unwrap();
    wait(run, &ks("apps-wave-1"), T, |o| {
        o.pointer("/spec/suspend") == Some(&json!(true))
    })
    .await;
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigint_after_suspend_resumes_before_exit() {
    let run = start("v1.9.4", false, vec![]).await;
    in_flight(&run).await;
    let child = spawn_with_window(&run).await;
    let pid = child.id().unwrap().to_string();
    let st = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(st.success());
    let o = tokio::time::timeout(T, child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert!(not_suspended_by_us(&w1), "{w1:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_after_suspend_is_healed_by_rerun_and_all() {
    let run = start("v1.9.4", false, vec![]).await;
    in_flight(&run).await;
    let mut child = spawn_with_window(&run).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    run.twin.faults().clear();
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert_eq!(w1.pointer("/spec/suspend"), Some(&json!(true)));
    assert!(
        !s(
            &w1,
            &format!("/metadata/annotations/{}", MARKER.replace('/', "~1"))
        )
        .is_empty()
    );
    // Someone else's suspend on wave 2 is never touched.
    run.cluster()
        .merge_patch(
            &ks("apps-wave-2"),
            json!({"spec": {"suspend": true}}),
            "kubectl",
        )
        .unwrap();

    // The next run sees our marker and plans a resume.
    let v = unstick(&run, &["ks/apps-wave-1", "--dry-run", "-o", "json"])
        .await
        .json();
    assert_eq!(v["diagnosis"]["class"], "suspended");
    assert!(v["diagnosis"]["suspendedByUnstickAt"].is_string());
    assert_eq!(v["plan"]["lever"], "resume");
    let v = unstick(&run, &["ks/apps-wave-2", "--dry-run", "-o", "json"])
        .await
        .json();
    assert_eq!(v["plan"]["lever"], "none");

    // --all heals ours and only ours.
    let o = unstick(&run, &["--all", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(v["healed"], json!(["flux-system/apps-wave-1"]), "{v:#}");
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert!(not_suspended_by_us(&w1));
    let w2 = get(&run, &ks("apps-wave-2")).await;
    assert_eq!(w2.pointer("/spec/suspend"), Some(&json!(true)));
    // ... unless asked.
    let o = unstick(
        &run,
        &["ks/apps-wave-2", "--yes", "--force-resume", "--no-wait"],
    )
    .await;
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let w2 = get(&run, &ks("apps-wave-2")).await;
    assert!(w2.pointer("/spec/suspend").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forbidden_patch_names_the_permission_and_changes_nothing() {
    let run = start("v1.9.4", false, vec![]).await;
    in_flight(&run).await;
    let token = run.twin.add_token(
        "viewer",
        vec![Rule::new(&["get", "list", "watch"], &["*"], &["*"])],
    );
    let kc = run.twin.kubeconfig_for(&token, "viewer").unwrap();
    let o = unstick_as(&run, Some(&kc), &["ks/apps-wave-1", "--yes"]).await;
    assert_eq!(o.code, 3, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("patch"), "{}", o.stderr);
    assert!(
        o.stderr
            .contains("kustomizations.kustomize.toolkit.fluxcd.io"),
        "{}",
        o.stderr
    );
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert!(not_suspended_by_us(&w1));
    // The read-only view works with read-only rights.
    let o = unstick_as(&run, Some(&kc), &["--all", "-o", "json"]).await;
    assert_eq!(o.code, 1, "{}", o.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn api_faults_conflict_retried_server_error_exit_3() {
    let run = start("v1.9.4", false, vec![]).await;
    in_flight(&run).await;
    // 500 on listing Kustomizations: exit 3, nothing changed.
    let id = run.twin.faults().add(Fault::on_verb(
        "list",
        Some("kustomizations"),
        Trigger::Always,
        FaultAction::Status(500),
    ));
    let o = unstick(&run, &["ks/apps-wave-1", "--yes"]).await;
    assert_eq!(o.code, 3, "{}{}", o.stdout, o.stderr);
    run.twin.faults().remove(id);
    // 409 on the first PATCH (our suspend, guarded by resourceVersion): re-read and retried.
    run.twin.reset_requests();
    run.twin.faults().add(Fault::on_verb(
        "patch",
        Some("kustomizations"),
        Trigger::Nth(1),
        FaultAction::Status(409),
    ));
    let o = unstick(
        &run,
        &["ks/apps-wave-1", "--yes", "--no-wait", "-o", "json"],
    )
    .await;
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let patches: Vec<u16> = run
        .twin
        .requests()
        .iter()
        .filter(|r| r.verb == "patch" && r.resource == "kustomizations")
        .map(|r| r.status)
        .collect();
    assert_eq!(patches, vec![409, 200, 200], "suspend 409, suspend, resume");
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert!(not_suspended_by_us(&w1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn classes_healthy_build_failed_and_source_not_ready() {
    let run = start("v1.9.4", false, vec![]).await;
    let w2 = wait(&run, &ks("apps-wave-2"), T, ready_succeeded).await;
    // Healthy, read-only: exit 0, no plan steps. (Read wave 2 at the revision it applied;
    // the automation commit may already be on its way, so accept the normal successor.)
    let o = unstick(&run, &["ks/apps-wave-2", "--dry-run", "-o", "json"]).await;
    let v = o.json();
    let class = v["diagnosis"]["class"].as_str().unwrap().to_string();
    assert!(
        ["healthy", "reconciling", "waiting-on-dependencies"].contains(&class.as_str()),
        "{v:#}"
    );
    if class == "healthy" {
        assert_eq!(o.code, 0);
        assert_eq!(v["plan"]["lever"], "none");
        assert_eq!(
            v["diagnosis"]["source"]["lastAppliedRevision"],
            s(&w2, "/status/lastAppliedRevision")
        );
    }
    // Break the build of wave 2 in Git (after the automation commit, which would race the
    // push): build-failed, the lever is a fix in Git.
    run.wait_fired("automation-commit", T).await.unwrap();
    let broken = Change::write(
        "apps/wave-1/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - missing.yaml\n",
    );
    commit(&run, "gitea", "org/fleet", vec![broken], "break the build").await;
    // Wave 1 first finishes its (failing) health check of the automation commit, then
    // retries with the broken revision.
    wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "BuildFailed")
    })
    .await;
    let o = unstick(&run, &["ks/apps-wave-1", "--dry-run", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(o.code, 1);
    assert_eq!(v["diagnosis"]["class"], "build-failed", "{v:#}");
    assert_eq!(v["plan"]["lever"], "fix-in-git");
    // Point the source at a repository that does not exist: source-not-ready.
    run.cluster()
        .merge_patch(
            &gitrepo("flux-system"),
            json!({"spec": {"url": "http://127.0.0.1:9/org/none.git"}}),
            "kubectl",
        )
        .unwrap();
    wait(&run, &gitrepo("flux-system"), T, |o| {
        cond_status(o, "Ready", "False")
    })
    .await;
    let v = unstick(&run, &["--all", "-o", "json"]).await.json();
    let items = v["items"].as_array().unwrap();
    let src = items
        .iter()
        .find(|i| i["diagnosis"]["source"]["ready"]["status"] == "False")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert!(
        src["rootCause"]
            .as_str()
            .unwrap()
            .contains("GitRepository/flux-system/flux-system")
            || src["class"] == "build-failed",
        "{src:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_controller_cancels_every_in_flight_run() {
    let run = start("v1.9.4", false, vec![]).await;
    let (_first, bad) = in_flight(&run).await;
    let v = unstick(
        &run,
        &[
            "ks/apps-wave-1",
            "--restart-controller",
            "--dry-run",
            "-o",
            "json",
        ],
    )
    .await
    .json();
    assert_eq!(v["plan"]["lever"], "restart-controller");
    assert_eq!(v["plan"]["steps"][0]["action"], "deleteControllerPods");
    assert_eq!(
        v["plan"]["steps"][0]["selector"],
        "app=kustomize-controller"
    );
    bare_tag_fix_fetched(&run, &bad, T).await;
    run.twin.reset_requests();
    let o = unstick(
        &run,
        &[
            "ks/apps-wave-1",
            "--restart-controller",
            "--yes",
            "-o",
            "json",
        ],
    )
    .await;
    let v = o.json();
    assert_eq!(o.code, 0, "{v:#}\n{}", o.stderr);
    assert_eq!(v["proof"], "recovered");
    assert!(
        run.twin
            .requests()
            .iter()
            .any(|r| r.verb == "delete" && r.resource == "pods" && r.namespace == "flux-system")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fleet_view_on_300_kustomizations_uses_at_most_15_requests() {
    // 300 Kustomizations in 10 waves, 10,000 inventory objects, no models.
    let run = start_shipped("healthy-fleet-300").await;
    // One failed health check naming a Deployment, so the workload/pod/event lists run too.
    fail_health_check(&run, "wave-3-007", "Deployment/fleet-3/web");
    run.twin.reset_requests();
    let o = unstick(&run, &["--all", "-A", "--problems", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(v["total"], 300);
    assert_eq!(v["notHealthy"], 1);
    assert_eq!(v["items"].as_array().unwrap().len(), 1, "{:#}", v["items"]);
    assert_eq!(v["items"][0]["class"], "health-check-failed");
    assert_eq!(
        v["items"][0]["diagnosis"]["blocking"][0]["kstatus"],
        "NotFound"
    );
    let reqs: Vec<String> = run
        .twin
        .requests()
        .iter()
        .filter(|r| !r.resource.is_empty())
        .map(|r| format!("{} {} {}", r.verb, r.resource, r.namespace))
        .collect();
    assert!(reqs.len() <= 15, "{} requests: {reqs:#?}", reqs.len());
    eprintln!(
        "--all on 300 Kustomizations: {} API requests: {reqs:?}",
        reqs.len()
    );
    // Without --problems: the whole fleet in one table (README), healthy rows included, and
    // the same count line.
    let o = unstick(&run, &["--all", "-A"]).await;
    assert_eq!(o.code, 1, "{}", o.stderr);
    let rows = o
        .stdout
        .lines()
        .filter(|l| l.contains("healthy") && l.contains("wave-"))
        .count();
    assert!(rows >= 299, "{rows} healthy rows:\n{}", o.stdout);
    assert!(
        o.stdout.contains("1 of 300 Kustomizations not healthy"),
        "{}",
        o.stdout
    );
    let o = unstick(&run, &["--all", "-A", "--problems"]).await;
    assert_eq!(
        o.stdout.lines().filter(|l| l.contains("wave-")).count(),
        1,
        "{}",
        o.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_pending_while_the_controller_has_not_handled_it() {
    // A quiet world: no scenario event fires (the automation commit would start new runs).
    // Holding the model can catch a run that just started (dependents are re-queued when a
    // dependency turns Ready); such an attempt is discarded and the world started again.
    let mut attempt = 0;
    let run = loop {
        attempt += 1;
        let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
        for e in sc.events.iter_mut() {
            e.manual = true;
        }
        let run = start_scaled(sc, 0.05).await;
        // Settled: Ready and no run in progress (the model marks Reconciling at a run's start).
        wait(&run, &ks("apps-wave-2"), T, |o| {
            ready_succeeded(o) && cond(o, "Reconciling").is_none()
        })
        .await;
        // Hold the kustomize-controller model (as a controller whose workers are all busy
        // would).
        run.flux.as_ref().unwrap().kustomize.stop();
        let held = get(&run, &ks("apps-wave-2")).await;
        if cond(&held, "Reconciling").is_none() {
            break run;
        }
        assert!(
            attempt < 8,
            "a run was in flight at every attempt: {held:#}"
        );
    };
    // Request a reconcile the way `flux reconcile ks` does: the annotation is newer than
    // status.lastHandledReconcileAt and nothing handles it.
    let now = "2099-01-01T00:00:00.000000001Z";
    run.cluster()
        .merge_patch(
            &ks("apps-wave-2"),
            json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}}),
            "flux",
        )
        .unwrap();
    let o = unstick(&run, &["ks/apps-wave-2", "--dry-run", "-o", "json"]).await;
    let v = o.json();
    assert_eq!(v["diagnosis"]["class"], "request-pending", "{v:#}");
    assert_eq!(o.code, 1, "a pending request is a finding: {v:#}");
    // Human output says what is pending.
    let h = unstick(&run, &["ks/apps-wave-2", "--dry-run"]).await;
    assert!(h.stdout.contains(now), "{}", h.stdout);
}

/// The bare-tag world with a `platform` Kustomization (a ConfigMap and a Deployment, checked
/// with `wait: true`) that apps-wave-1 dependsOn, as in ./demo's fleet.
/// `quiet`: no scenario event fires by itself (else only the fix commit waits for the test).
async fn start_with_platform(quiet: bool) -> RunningScenario {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    for e in sc.events.iter_mut() {
        if quiet || e.name == "fix-commit" {
            e.manual = true;
        }
    }
    let files = &mut sc.git_servers[0].repos[0].commits[0].files;
    files.insert(
        "platform/kustomization.yaml".into(),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - platform.yaml\n".into(),
    );
    files.insert(
        "platform/platform.yaml".into(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: platform-settings\n  namespace: flux-system\ndata:\n  tier: platform\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ingress\n  namespace: flux-system\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: ingress}\n  template:\n    metadata:\n      labels: {app: ingress}\n    spec:\n      containers:\n        - name: ingress\n          image: localhost:5000/podinfo:6.5.0\n".into(),
    );
    sc.objects.push(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "platform", "namespace": FLUX_SYSTEM},
        "spec": {
            "interval": "10m", "timeout": "5m", "path": "./platform", "prune": true,
            "wait": true,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"}
        }
    }));
    for o in sc.objects.iter_mut() {
        if o["kind"] == "Kustomization" && o["metadata"]["name"] == "apps-wave-1" {
            o["spec"]["dependsOn"] = json!([{"name": "platform"}]);
        }
    }
    start_scaled(sc, 0.05).await
}

/// Fresh-user trial, HIGH: with the fix pushed, `--restart-controller --yes` re-runs every
/// Kustomization, so apps-wave-1's first run after the restart finds platform reconciling
/// (DependencyNotReady). That is progress, not failure: the wait goes on until apps-wave-1 is
/// Ready at the fix revision, and the cascade follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_controller_waits_while_a_dependency_reconciles() {
    let run = start_with_platform(false).await;
    let (_first, bad) = in_flight(&run).await;
    let fix_rev = bare_tag_fix_fetched(&run, &bad, T).await;
    let before = events_with_reason(&run, "apps-wave-1", "DependencyNotReady");
    let o = unstick(
        &run,
        &[
            "ks/apps-wave-1",
            "--restart-controller",
            "--yes",
            "--cascade",
            "-o",
            "json",
        ],
    )
    .await;
    let v = o.json();
    assert_eq!(o.code, 0, "{v:#}\n{}", o.stderr);
    assert_eq!(v["proof"], "recovered", "{v:#}");
    assert!(v["lastSeen"].is_null(), "{v:#}");
    assert_eq!(
        v["cascade"],
        json!([{"wave": 1, "kustomization": "flux-system/apps-wave-2", "proof": "recovered"}]),
        "{v:#}"
    );
    let w1 = settled_ks(&run, "apps-wave-1").await;
    assert_eq!(s(&w1, "/status/lastAppliedRevision"), fix_rev);
    assert!(
        cond_is(&w1, "Ready", "True", "ReconciliationSucceeded"),
        "{w1:#}"
    );
    let after = events_with_reason(&run, "apps-wave-1", "DependencyNotReady");
    eprintln!(
        "DependencyNotReady events on apps-wave-1 during the wait: {}",
        after - before
    );
}

/// Fresh-user trial, HIGH (second form): just after a push, apps-wave-1 waits on platform,
/// which is only reconciling. That is not stuck: the plan requests a run (a token to prove)
/// and waits through DependencyNotReady, covering platform's run and its own, instead of
/// exiting 1 with "unstick flux-system/platform first". The wait itself is exercised by
/// restart_controller_waits_while_a_dependency_reconciles; here the state is held still
/// (kustomize-controller model stopped, platform showing a run in progress) so the plan is
/// judged on exactly that state.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dependent_of_a_reconciling_dependency_is_not_stuck() {
    let mut attempt = 0;
    let run = loop {
        attempt += 1;
        let run = start_with_platform(true).await;
        wait(&run, &ks("apps-wave-2"), T, |o| {
            ready_succeeded(o) && cond(o, "Reconciling").is_none()
        })
        .await;
        run.flux.as_ref().unwrap().kustomize.stop();
        let w1 = get(&run, &ks("apps-wave-1")).await;
        let p = get(&run, &ks("platform")).await;
        if cond(&w1, "Reconciling").is_none() && cond(&p, "Reconciling").is_none() {
            break run;
        }
        assert!(attempt < 8, "a run was in flight at every attempt: {w1:#}");
    };
    // What the controller writes at the start of platform's run, and apps-wave-1's
    // checkDependencies result.
    run.cluster()
        .merge_patch_status(
            &ks("platform"),
            json!({"status": {"conditions": [
                {"type": "Ready", "status": "Unknown", "reason": "Progressing",
                 "message": "Reconciliation in progress", "lastTransitionTime": "2026-11-30T07:00:00Z"},
                {"type": "Reconciling", "status": "True", "reason": "Progressing",
                 "message": "Building manifests for revision main@sha1:0123 with a timeout of 5m0s",
                 "lastTransitionTime": "2026-11-30T07:00:00Z"}
            ]}}),
            "kustomize-controller",
        )
        .unwrap();
    run.cluster()
        .merge_patch_status(
            &ks("apps-wave-1"),
            json!({"status": {"conditions": [
                {"type": "Ready", "status": "False", "reason": "DependencyNotReady",
                 "message": "dependency 'flux-system/platform' is not ready",
                 "lastTransitionTime": "2026-11-30T07:00:00Z"}
            ]}}),
            "kustomize-controller",
        )
        .unwrap();
    let o = unstick(&run, &["ks/apps-wave-1", "--dry-run", "-o", "json"]).await;
    // Nothing is stuck, and the exit code says so (it was 1 beside "nothing to unstick").
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v = o.json();
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "waiting-on-dependencies", "{v:#}");
    assert_eq!(d["rootCause"]["kustomization"], "flux-system/platform");
    assert_eq!(d["rootCause"]["diagnosis"]["class"], "reconciling");
    assert_eq!(v["plan"]["lever"], "request-reconcile", "{v:#}");
    assert!(v["plan"].get("alternatives").is_none(), "{v:#}");
    // The wait covers platform's run and apps-wave-1's (both 5m, on the twin's 0.05 clock:
    // 15s each) plus the 30s margin.
    let wait_secs = v["plan"]["waitSecs"].as_f64().unwrap();
    assert!((wait_secs - 60.0).abs() < 0.5, "{wait_secs}");
    // Human output: not "unstick flux-system/platform first".
    let h = unstick(&run, &["ks/apps-wave-1", "--dry-run"]).await;
    assert!(!h.stdout.contains("first;"), "{}", h.stdout);
    assert!(
        h.stdout.contains("Lever: request-reconcile"),
        "{}",
        h.stdout
    );
}

/// `--check --token OLD` once a later requestedAt exists: it says the token was superseded
/// and whether the later request was handled (a handled later request covers the old one);
/// an invalid token is a usage error (exit 2) decided before asking the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn check_token_superseded_by_a_later_request() {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    for e in sc.events.iter_mut() {
        e.manual = true;
    }
    // Runs only when the test requests them: --check reads the Kustomization once, and a
    // periodic run (10m: 30 real seconds on the ×0.05 clock) starting between a settled wait
    // below and that read would show Ready=Unknown whatever the run concludes.
    for o in sc.objects.iter_mut() {
        if o["kind"] == "Kustomization" {
            o["spec"]["interval"] = json!("100h");
        }
    }
    let run = start_scaled(sc, 0.05).await;
    wait(&run, &ks("apps-wave-2"), T, |o| {
        ready_succeeded(o) && cond(o, "Reconciling").is_none()
    })
    .await;
    let request = |t: &str| {
        run.cluster()
            .merge_patch(
                &ks("apps-wave-2"),
                json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": t}}}),
                "flux",
            )
            .unwrap();
    };
    let settled = |t: &'static str| {
        move |o: &Value| {
            s(o, "/status/lastHandledReconcileAt") == t
                && ready_succeeded(o)
                && cond(o, "Reconciling").is_none()
        }
    };
    let (t1, t2, t3) = (
        "2026-11-30T07:30:00.1Z",
        "2026-11-30T07:31:00.2Z",
        "2026-11-30T07:32:00.3Z",
    );
    request(t1);
    wait(&run, &ks("apps-wave-2"), T, settled(t1)).await;
    request(t2);
    wait(&run, &ks("apps-wave-2"), T, settled(t2)).await;

    let o = unstick(&run, &["ks/apps-wave-2", "--check", "--token", t1]).await;
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains(&format!(
            "request {t1} was superseded by a later request {t2}, which was handled; recovered"
        )),
        "{}",
        o.stdout
    );
    let v = unstick(
        &run,
        &["ks/apps-wave-2", "--check", "--token", t1, "-o", "json"],
    )
    .await
    .json();
    assert_eq!(
        v["token"],
        json!({"token": t1, "state": "superseded", "supersededBy": t2, "supersededByHandled": true})
    );
    assert_eq!(v["proof"], "recovered");

    // A later request nobody handles (controller held): the old token is superseded by a
    // pending request -> exit 1 saying so; the handled one is still "handled".
    run.flux.as_ref().unwrap().kustomize.stop();
    request(t3);
    let o = unstick(&run, &["ks/apps-wave-2", "--check", "--token", t1]).await;
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains(&format!(
            "request {t1} was superseded by a later request {t3}, which is not handled yet"
        )),
        "{}",
        o.stdout
    );
    let v = unstick(
        &run,
        &["ks/apps-wave-2", "--check", "--token", t2, "-o", "json"],
    )
    .await
    .json();
    assert_eq!(v["token"]["state"], "handled", "{v:#}");

    // Invalid token: usage error, nothing asked of the cluster.
    run.twin.reset_requests();
    let o = unstick(&run, &["ks/apps-wave-2", "--check", "--token", "yesterday"]).await;
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr
            .contains("--token \"yesterday\" is not a reconcile.fluxcd.io/requestedAt value"),
        "{}",
        o.stderr
    );
    assert!(o.stdout.is_empty());
    assert!(
        run.twin.requests().iter().all(|r| r.resource.is_empty()),
        "{:?}",
        run.twin.requests()
    );
}

/// The request bound, whatever the fleet's shape (issue 15 item 6): dependencies in other
/// namespaces are read with one list (not one GET each), and healing Kustomizations left
/// suspended by an interrupted run costs one request per write (the PATCH, guarded by the
/// listed resourceVersion). Bound: reads <= 15, plus 1 per write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fleet_view_request_bound_with_cross_namespace_dependencies_and_healing() {
    let run = start_shipped("healthy-fleet-300").await;
    let store = run.twin.store();
    let ks_gvr = store
        .gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
        .unwrap();
    let ns_gvr = store.gvr("", "v1", "namespaces").unwrap();
    for ns in ["team-a", "team-b", "team-c"] {
        store
            .create(
                &ns_gvr,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .unwrap();
    }
    // team-a: 12 Kustomizations, each dependsOn a distinct one in flux-system; two of them
    // carry our suspend marker (an interrupted run). team-b depends on team-a and team-c.
    for i in 0..12 {
        let mut meta = json!({"name": format!("app-{i:02}"), "namespace": "team-a"});
        let mut spec = json!({"interval": "10m", "path": "./x",
            "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"},
            "dependsOn": [{"name": format!("wave-{}-{:03}", i % 10, i), "namespace": "flux-system"}]});
        if i < 2 {
            meta["annotations"] = json!({MARKER: "2026-11-30T07:00:00Z"});
            spec["suspend"] = json!(true);
        }
        store
            .create(
                &ks_gvr,
                json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                    "metadata": meta, "spec": spec}),
            )
            .unwrap();
    }
    for (i, (dns, dn)) in [
        ("team-a", "app-05"),
        ("team-c", "nope"),
        ("flux-system", "wave-1-001"),
    ]
    .iter()
    .enumerate()
    {
        store
            .create(
                &ks_gvr,
                json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                    "metadata": {"name": format!("b-{i}"), "namespace": "team-b"},
                    "spec": {"interval": "10m", "path": "./x",
                        "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"},
                        "dependsOn": [{"name": dn, "namespace": dns}]}}),
            )
            .unwrap();
    }
    let count = |run: &RunningScenario| -> (usize, usize, Vec<String>) {
        let reqs = run.twin.requests();
        let rs: Vec<&twin::RequestRecord> =
            reqs.iter().filter(|r| !r.resource.is_empty()).collect();
        let writes = rs.iter().filter(|r| r.verb == "patch").count();
        (
            rs.len() - writes,
            writes,
            rs.iter()
                .map(|r| format!("{} {} {}", r.verb, r.resource, r.namespace))
                .collect(),
        )
    };
    // --dry-run: no healing, reads only; 12 cross-namespace dependencies, one list.
    run.twin.reset_requests();
    let o = unstick(&run, &["--all", "-n", "team-a", "--dry-run", "-o", "json"]).await;
    let (reads, writes, all) = count(&run);
    assert_eq!(writes, 0, "{all:#?}");
    assert!(reads <= 15, "{reads} reads: {all:#?}");
    assert_eq!(
        all.iter()
            .filter(|r| r.starts_with("get kustomizations"))
            .count(),
        0,
        "one list, not a GET per dependency: {all:#?}"
    );
    let v = o.json();
    assert_eq!(v["total"], 12, "{v:#}");
    // Dependencies in three namespaces: still one list (all namespaces).
    run.twin.reset_requests();
    let o = unstick(&run, &["--all", "-n", "team-b", "-o", "json"]).await;
    let (reads, writes, all) = count(&run);
    assert_eq!(writes, 0, "{all:#?}");
    assert!(reads <= 15, "{reads} reads: {all:#?}");
    assert_eq!(
        all.iter().filter(|r| r.contains("kustomizations")).count(),
        2,
        "{all:#?}"
    );
    let v = o.json();
    let b1 = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kustomization"] == "team-b/b-1")
        .unwrap();
    // Never reconciled (no models here): its own state; the missing dependency is named.
    assert!(
        b1["diagnosis"]["hints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h
                .as_str()
                .unwrap()
                .contains("dependency team-c/nope is missing")),
        "{b1:#}"
    );
    // Healing: one PATCH per Kustomization left suspended by us.
    run.twin.reset_requests();
    let o = unstick(&run, &["--all", "-n", "team-a", "-o", "json"]).await;
    let (reads, writes, all) = count(&run);
    let v = o.json();
    assert_eq!(v["healed"].as_array().unwrap().len(), 2, "{v:#}");
    assert_eq!(writes, 2, "{all:#?}");
    assert!(reads <= 15, "{reads} reads + {writes} writes: {all:#?}");
    eprintln!(
        "--all -n team-a with 12 cross-namespace dependencies and 2 heals: {reads} reads + {writes} writes: {all:?}"
    );
    for i in 0..2 {
        let k = get(
            &run,
            &ObjKey::new(
                "kustomize.toolkit.fluxcd.io/v1",
                "Kustomization",
                "team-a",
                &format!("app-{i:02}"),
            ),
        )
        .await;
        assert!(not_suspended_by_us(&k), "{k:#}");
    }
}
