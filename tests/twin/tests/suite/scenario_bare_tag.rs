//! Scenario (1): the bare-tag rollout on kustomize-controller v1.9 without the cancel gate.
//! Asserts the exact conditions upstream produces and the work-queue rule that a fix pushed
//! during the health check waits behind the running reconcile.

use std::time::Duration;

use regex::Regex;
use serde_json::Value;
use twin::flux::cluster::{ObjKey, s};
use twin::testkit::{
    checking_new_revision, cond, cond_is, get, inventory_ids, ks, ready_succeeded, start_shipped,
    wait,
};

const T: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bare_tag_rollout_holds_timeout_and_queues_the_fix() {
    let run = start_shipped("bare-tag-rollout").await;

    // Initial rollout: both waves become Ready at the first revision.
    let w2 = wait(&run, &ks("apps-wave-2"), T, ready_succeeded).await;
    let first_rev = s(&w2, "/status/lastAppliedRevision").to_string();
    assert!(
        Regex::new("^main@sha1:[0-9a-f]{40}$")
            .unwrap()
            .is_match(&first_rev),
        "{first_rev}"
    );
    let w1 = wait(&run, &ks("apps-wave-1"), T, ready_succeeded).await;
    assert_eq!(
        cond(&w1, "Ready").unwrap()["message"],
        format!("Applied revision: {first_rev}")
    );
    assert_eq!(cond(&w1, "Healthy").unwrap()["reason"], "Succeeded");
    assert_eq!(
        inventory_ids(&w1),
        vec!["_apps__Namespace", "apps_podinfo_apps_Deployment"]
    );
    // postBuild substitution from the cluster-vars ConfigMap reached the Deployment
    let dep = get(
        &run,
        &ObjKey::new("apps/v1", "Deployment", "apps", "podinfo"),
    )
    .await;
    assert_eq!(
        dep.pointer("/spec/template/spec/containers/0/env/0/value"),
        Some(&Value::from("dev"))
    );
    assert_eq!(
        s(&dep, "/metadata/labels/kustomize.toolkit.fluxcd.io~1name"),
        "apps-wave-1"
    );

    // The automation commit lands: the health check for the bad revision starts.
    run.wait_fired("automation-commit", T).await.unwrap();
    let running = wait(&run, &ks("apps-wave-1"), T, |o| {
        checking_new_revision(o, &first_rev)
    })
    .await;
    let bad_rev = s(&running, "/status/lastAttemptedRevision").to_string();
    assert_eq!(
        cond(&running, "Reconciling").unwrap()["message"],
        format!("Running health checks for revision {bad_rev} with a timeout of 5m0s")
    );
    assert!(cond_is(&running, "Ready", "Unknown", "Progressing"));
    assert_eq!(
        cond(&running, "Ready").unwrap()["message"],
        "Reconciliation in progress"
    );

    // The pod cannot pull "0.1.1".
    let mut pod_events = run.cluster().watch(&[("v1", "Pod")]);
    let pod_key = {
        let deadline = std::time::Instant::now() + T;
        let is_stuck = |p: &Value| {
            p.pointer("/spec/containers/0/image") == Some(&Value::from("0.1.1"))
                && s(p, "/status/containerStatuses/0/state/waiting/reason") == "ImagePullBackOff"
        };
        let existing = run.cluster().list("v1", "Pod", Some("apps")).unwrap();
        match existing.iter().find(|p| is_stuck(p)) {
            Some(p) => ObjKey::of(p),
            None => loop {
                let ch = tokio::time::timeout_at(deadline.into(), pod_events.recv())
                    .await
                    .expect("no ImagePullBackOff pod")
                    .unwrap();
                if is_stuck(&ch.object) {
                    break ObjKey::of(&ch.object);
                }
            },
        }
    };
    let pod = get(&run, &pod_key).await;
    assert_eq!(
        s(&pod, "/status/containerStatuses/0/state/waiting/message"),
        "Back-off pulling image \"0.1.1\""
    );

    // apps-wave-2 follows the new revision and waits on wave 1. kustomize-controller's
    // checkDependencies says "revision is not up to date" while wave 1 is still Ready at the
    // old revision, and "is not ready" once wave 1's run for the new one has begun: which one a
    // dependent shows first depends on which controller ran first, so wait for the second.
    let w2 = wait(&run, &ks("apps-wave-2"), T, |o| {
        cond_is(o, "Ready", "False", "DependencyNotReady")
            && cond(o, "Ready").is_some_and(|c| {
                c["message"] == "dependency 'flux-system/apps-wave-1' is not ready"
            })
    })
    .await;
    assert_eq!(
        cond(&w2, "Ready").unwrap()["message"],
        "dependency 'flux-system/apps-wave-1' is not ready"
    );

    // The fix is pushed during the health check (scenario event) but the run holds its timeout.
    run.wait_fired("fix-commit", T).await.unwrap();
    let failed = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckFailed")
    })
    .await;
    let msg = cond(&failed, "Ready").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    let re = Regex::new(
        r"^health check failed after 5m\d+(\.\d+)?s: timeout waiting for: \[Deployment/apps/podinfo status: 'InProgress'\]$",
    )
    .unwrap();
    assert!(re.is_match(&msg), "{msg}");
    assert_eq!(
        cond(&failed, "Healthy").unwrap()["message"],
        "timeout waiting for: [Deployment/apps/podinfo status: 'InProgress']"
    );
    assert_eq!(
        cond(&failed, "Reconciling").unwrap()["reason"],
        "ProgressingWithRetry"
    );
    assert_eq!(s(&failed, "/status/lastAttemptedRevision"), bad_rev);
    assert_eq!(s(&failed, "/status/lastAppliedRevision"), first_rev);

    // Only after the stuck run ended does the queued run apply the fix.
    let fixed = wait(&run, &ks("apps-wave-1"), T, |o| {
        ready_succeeded(o) && s(o, "/status/lastAppliedRevision") != first_rev
    })
    .await;
    let fix_rev = s(&fixed, "/status/lastAppliedRevision").to_string();
    assert_ne!(fix_rev, bad_rev);
    assert!(cond(&fixed, "Reconciling").is_none());
    wait(&run, &ks("apps-wave-2"), T, |o| {
        ready_succeeded(o) && s(o, "/status/lastAppliedRevision") == fix_rev
    })
    .await;
}
