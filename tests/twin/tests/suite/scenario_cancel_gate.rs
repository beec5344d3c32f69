//! Scenario (2): the bare-tag rollout with `CancelHealthCheckOnNewRevision=true` on
//! kustomize-controller v1.8 (any re-queue event cancels: HealthCheckCanceled) and v1.7 (only
//! a new source revision, found by polling: `context canceled`).

use std::time::Duration;

use regex::Regex;
use serde_json::Value;
use twin::flux::cluster::{ObjKey, s};
use twin::scenario::{RunningScenario, Scenario};
use twin::testkit::{
    bare_tag_first_rollout, checking_new_revision, cond, cond_is, events_about, get, ks,
    ready_succeeded, start, start_shipped, wait,
};

const T: Duration = Duration::from_secs(120);

/// Waits for the initial rollout, then for the health check of the automation revision.
async fn stuck(run: &RunningScenario) -> (String, String) {
    let first = bare_tag_first_rollout(run, T).await;
    let w1 = wait(run, &ks("apps-wave-1"), T, |o| {
        checking_new_revision(o, &first)
    })
    .await;
    (first, s(&w1, "/status/lastAttemptedRevision").to_string())
}

/// Waits for apps-wave-1 Ready at a revision that is neither `first` nor `bad` (the fix).
async fn fixed(run: &RunningScenario, first: &str, bad: &str) -> Value {
    wait(run, &ks("apps-wave-1"), T, |o| {
        ready_succeeded(o) && ![first, bad].contains(&s(o, "/status/lastAppliedRevision"))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v18_gate_cancels_on_new_source_revision() {
    let run = start_shipped("bare-tag-rollout-cancel-v1.8").await;
    assert_eq!(
        run.flux.as_ref().unwrap().kustomize.config().version,
        (1, 8)
    );
    let (first, bad) = stuck(&run).await;
    run.wait_fired("fix-commit", T).await.unwrap();
    let canceled = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckCanceled")
    })
    .await;
    assert_eq!(
        cond(&canceled, "Ready").unwrap()["message"],
        "New reconciliation triggered by GitRepository/flux-system/flux-system"
    );
    // the canceled run leaves Healthy as it was during the wait and Reconciling for retry
    assert_eq!(s(&canceled, "/status/lastAttemptedRevision"), bad);
    assert_eq!(s(&canceled, "/status/lastAppliedRevision"), first);
    let fixed = fixed(&run, &first, &bad).await;
    assert!(cond(&fixed, "Reconciling").is_none());
    let evs = events_about(&run, "flux-system", "apps-wave-1");
    assert!(
        evs.contains(&(
            "HealthCheckCanceled".into(),
            "Health checks canceled due to new reconciliation triggered by GitRepository/flux-system/flux-system".into()
        )),
        "{evs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v18_gate_cancels_on_requested_at_and_records_it_only_on_the_next_run() {
    let mut sc = Scenario::shipped("bare-tag-rollout-cancel-v1.8").unwrap();
    sc.events.retain(|e| e.name != "fix-commit");
    let run = start(sc).await;
    let (_, bad) = stuck(&run).await;
    run.fire("request-reconcile");
    run.wait_fired("request-reconcile", T).await.unwrap();
    let obj = get(&run, &ks("apps-wave-1")).await;
    let token = s(
        &obj,
        "/metadata/annotations/reconcile.fluxcd.io~1requestedAt",
    )
    .to_string();
    assert!(!token.is_empty());
    let canceled = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckCanceled")
    })
    .await;
    assert_eq!(
        cond(&canceled, "Ready").unwrap()["message"],
        "New reconciliation triggered by Kustomization/flux-system/apps-wave-1"
    );
    // The canceled run read the object before the request: it does not record the token.
    assert_ne!(s(&canceled, "/status/lastHandledReconcileAt"), token);
    // The next run starts at once, still on the bad revision, and records the token when it ends.
    let next = wait(&run, &ks("apps-wave-1"), T, |o| {
        s(o, "/status/lastHandledReconcileAt") == token
    })
    .await;
    assert!(
        cond_is(&next, "Ready", "False", "HealthCheckFailed"),
        "{:?}",
        next["status"]
    );
    assert_eq!(s(&next, "/status/lastAttemptedRevision"), bad);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v17_gate_cancels_only_on_new_revision_with_context_canceled() {
    let run = start_shipped("bare-tag-rollout-cancel-v1.7").await;
    assert_eq!(
        run.flux.as_ref().unwrap().kustomize.config().version,
        (1, 7)
    );
    let (first, bad) = stuck(&run).await;
    run.wait_fired("fix-commit", T).await.unwrap();
    let failed = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckFailed")
    })
    .await;
    let msg = cond(&failed, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        Regex::new(
            r"^health check failed after \d+(\.\d+)?(ms|s|m\d+(\.\d+)?s): context canceled$"
        )
        .unwrap()
        .is_match(&msg),
        "{msg}"
    );
    assert_eq!(
        cond(&failed, "Healthy").unwrap()["message"],
        "context canceled"
    );
    assert_eq!(s(&failed, "/status/lastAttemptedRevision"), bad);
    fixed(&run, &first, &bad).await;
    let evs = events_about(&run, "flux-system", "apps-wave-1");
    assert!(
        evs.iter()
            .any(|(_, m)| m == "New revision detected during health check, cancelling"),
        "{evs:?}"
    );
    assert!(
        !evs.iter().any(|(r, _)| r == "HealthCheckCanceled"),
        "{evs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v17_gate_does_not_cancel_on_requested_at() {
    let mut sc = Scenario::shipped("bare-tag-rollout-cancel-v1.7").unwrap();
    sc.events.retain(|e| e.name != "fix-commit");
    let run = start(sc).await;
    stuck(&run).await;
    run.fire("request-reconcile");
    run.wait_fired("request-reconcile", T).await.unwrap();
    let failed = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckFailed")
    })
    .await;
    let msg = cond(&failed, "Ready").unwrap()["message"].as_str().unwrap();
    assert!(
        msg.ends_with("timeout waiting for: [Deployment/apps/podinfo status: 'InProgress']"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v18_gate_cancels_on_a_watched_configmap_change() {
    let mut sc = Scenario::shipped("bare-tag-rollout-cancel-v1.8").unwrap();
    sc.events.retain(|e| e.name != "fix-commit");
    for o in sc.objects.iter_mut() {
        if o["kind"] == "ConfigMap" && o["metadata"]["name"] == "cluster-vars" {
            o["metadata"]["labels"] = serde_json::json!({"reconcile.fluxcd.io/watch": "Enabled"});
        }
    }
    let run = start(sc).await;
    stuck(&run).await;
    run.cluster()
        .merge_patch(
            &ObjKey::new("v1", "ConfigMap", "flux-system", "cluster-vars"),
            serde_json::json!({"data": {"cluster_name": "dev-2"}}),
            "test",
        )
        .unwrap();
    let canceled = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckCanceled")
    })
    .await;
    assert_eq!(
        cond(&canceled, "Ready").unwrap()["message"],
        "New reconciliation triggered by ConfigMap/flux-system/cluster-vars"
    );
}
