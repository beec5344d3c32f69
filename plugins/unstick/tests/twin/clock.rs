//! Deadlines on the twin's scaled clock: the twin's controller models run every nominal
//! duration × their time scale and say so on the kustomize-controller Deployment
//! (`twin.cluster-loop.dev/time-scale`). unstick must print the wall-clock times the check
//! really ends at (and say the clock is scaled), not the nominal `started + 5m`; and what it
//! did (✓ lines) comes before the verdict in its report.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;
use twin::flux::cluster::s;
use twin::scenario::Scenario;
use twin::testkit::{
    bare_tag_first_rollout, bare_tag_fix_fetched, cond, ks, run_plugin, start_scaled, wait,
};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");
const T: Duration = Duration::from_secs(240);
const SCALE: f64 = 0.05;

async fn unstick(kubeconfig: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let r = run_plugin(BIN, kubeconfig, args, T).await;
    (r.code, r.stdout, r.stderr)
}

fn ts(v: &Value) -> Timestamp {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse()
        .unwrap()
}

#[test]
fn unstick_reads_the_annotation_the_twin_writes() {
    assert_eq!(
        unstick::controller::TIME_SCALE_ANNOTATION,
        twin::scenario::TIME_SCALE_ANNOTATION
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deadlines_are_wall_clock_on_the_twin_clock_and_done_lines_precede_the_verdict() {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    sc.controller.version = Some("v1.9.4".into());
    sc.controller.feature_gates.clear();
    for e in sc.events.iter_mut() {
        if e.name == "fix-commit" {
            e.manual = true;
        }
    }
    let run = start_scaled(sc, SCALE).await;
    let kc = run.twin.kubeconfig_path().to_path_buf();
    let first = bare_tag_first_rollout(&run, T).await;
    let w1 = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond(o, "Reconciling").is_some_and(|c| {
            c["status"] == "True" && s(c, "/message").starts_with("Running health checks")
        }) && s(o, "/status/lastAttemptedRevision") != first
    })
    .await;
    let bad = s(&w1, "/status/lastAttemptedRevision").to_string();

    let (code, stdout, stderr) = unstick(&kc, &["ks/apps-wave-1", "--dry-run", "-o", "json"]).await;
    assert_eq!(code, 1, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let hc = &v["diagnosis"]["healthCheck"];
    assert_eq!(v["diagnosis"]["class"], "health-check-in-flight", "{v:#}");
    assert_eq!(v["controller"]["timeScale"], SCALE, "{v:#}");
    assert_eq!(hc["timeScale"], SCALE, "{v:#}");
    let timeout = hc["timeoutSecs"].as_f64().unwrap();
    assert_eq!(timeout, 300.0, "nominal timeout as the controller wrote it");
    // The deadline is the start plus the timeout on the controller's clock: 15s, not 5m.
    let started = ts(&hc["startedAt"]);
    assert_eq!(
        ts(&hc["deadline"]).duration_since(started).as_secs_f64(),
        timeout * SCALE,
        "{hc:#}"
    );
    let left = hc["timeLeftSecs"].as_i64().unwrap();
    assert!(left <= (timeout * SCALE) as i64, "{hc:#}");
    // Wait budget: what is left, one more run on that clock, and the 30s margin (+1s: the
    // start is a metav1.Time, whole seconds). Nominal would be over 5m30s.
    let wait_secs = v["plan"]["waitSecs"].as_f64().unwrap();
    assert!(
        wait_secs <= 2.0 * timeout * SCALE + 30.0 + 1.0,
        "waitSecs {wait_secs} on a ×{SCALE} clock"
    );

    // Human output says the clock is scaled where it prints the deadline.
    let (_, text, _) = unstick(&kc, &["ks/apps-wave-1", "--dry-run"]).await;
    assert!(
        text.contains("twin clock ×0.05: the 5m0s timeout ends 15s after the start"),
        "{text}"
    );
    assert!(text.contains("clock: twin ×0.05"), "{text}");

    // Pull the lever after the fix: the ✓ lines come before the verdict. (Without
    // --with-source the fix's arrival already queued the run and the lever is `wait`, which
    // writes nothing; --with-source refetches, then suspends and resumes.)
    bare_tag_fix_fetched(&run, &bad, T).await;
    let (code, text, stderr) = unstick(&kc, &["ks/apps-wave-1", "--yes", "--with-source"]).await;
    assert_eq!(code, 0, "{text}\n{stderr}");
    let done = text
        .find("✓ patched Kustomization flux-system/apps-wave-1")
        .unwrap_or_else(|| panic!("{text}"));
    let resumed = text
        .find("✓ resumed Kustomization flux-system/apps-wave-1")
        .unwrap_or_else(|| panic!("{text}"));
    let verdict = text
        .find("recovered: flux-system/apps-wave-1")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(done < resumed && resumed < verdict, "{text}");
    assert!(!stderr.contains('✓'), "{stderr}");
}
