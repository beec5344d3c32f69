//! kustomize-controller and source-controller model rules outside the shipped scenarios:
//! controller restart, dependsOn not found, strict vs lax substitution by version, prune.

use std::time::Duration;

use serde_json::{Value, json};
use twin::flux::cluster::{ChangeType, ObjKey, s};
use twin::git::Change;
use twin::scenario::Scenario;
use twin::testkit::{
    checking_new_revision, commit, cond, cond_is, get, inventory_ids, ks, ready_succeeded, start,
    start_scaled, wait,
};

const T: Duration = Duration::from_secs(120);

/// A small world: one repo (the shipped fleet plus `extra` files), a GitRepository and the
/// given Kustomizations.
fn world(version: &str, extra: &str, kustomizations: &str) -> Scenario {
    let yaml = format!(
        r#"
name: flux-models-test
timeScale: 0.01
controller:
  version: {version}
  concurrent: 1
registry: [localhost:5000/podinfo:6.5.0, localhost:5000/frontend:1.0.0]
gitServers:
  - name: gitea
    repos:
      - name: org/fleet
        commits:
          - message: initial
            dir: repos/fleet
            files:
{extra}
objects:
  - apiVersion: source.toolkit.fluxcd.io/v1
    kind: GitRepository
    metadata: {{name: flux-system, namespace: flux-system}}
    spec: {{interval: 1m, url: "{{{{http:gitea/org/fleet}}}}", ref: {{branch: main}}}}
{kustomizations}
"#
    );
    Scenario::from_yaml(&yaml, &Scenario::shipped_dir(), "inline").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_the_controller_pod_cancels_in_flight_runs_and_a_new_pod_takes_over() {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    sc.events.retain(|e| e.name != "fix-commit");
    let run = start(sc).await;
    run.wait_fired("automation-commit", T).await.unwrap();
    let stuck = wait(&run, &ks("apps-wave-1"), T, |o| {
        checking_new_revision(o, s(o, "/status/lastAppliedRevision"))
    })
    .await;
    let bad = s(&stuck, "/status/lastAttemptedRevision").to_string();
    let kc = run.flux.as_ref().unwrap().kustomize.clone();
    let epoch = kc.epoch();
    let store = run.twin.store();
    let pod_gvr = store.gvr_for_kind("v1", "Pod").unwrap();
    let old: Vec<Value> = store
        .list(
            &pod_gvr,
            Some("flux-system"),
            Some("app=kustomize-controller"),
        )
        .unwrap();
    assert_eq!(old.len(), 1, "{old:?}");
    let old_name = s(&old[0], "/metadata/name").to_string();

    // Record every state of apps-wave-1 from now on.
    let mut rx = run
        .cluster()
        .watch(&[("kustomize.toolkit.fluxcd.io/v1", "Kustomization")]);
    store
        .delete(&pod_gvr, Some("flux-system"), &old_name)
        .unwrap();

    // The Deployment's ReplicaSet replaces the pod; the model restarts as a new process.
    let deadline = std::time::Instant::now() + T;
    let mut seen = Vec::new();
    loop {
        let ch = tokio::time::timeout_at(deadline.into(), rx.recv())
            .await
            .expect("no new run after the controller restart")
            .unwrap();
        if ch.event == ChangeType::Deleted || s(&ch.object, "/metadata/name") != "apps-wave-1" {
            continue;
        }
        seen.push(ch.object.clone());
        if cond(&ch.object, "Healthy").is_some_and(|c| c["status"] == "Unknown")
            && kc.epoch() > epoch
            && seen.len() > 1
        {
            break;
        }
    }
    assert!(kc.epoch() > epoch);
    // The canceled run wrote nothing: no failure was recorded for it.
    assert!(
        !seen
            .iter()
            .any(|o| cond_is(o, "Ready", "False", "HealthCheckFailed")),
        "{seen:?}"
    );
    // The new process ran the same revision again from the start.
    assert!(seen.iter().any(|o| cond(o, "Reconciling").is_some_and(|c| {
        c["message"]
            == format!("Fetching manifests for revision {bad} with a timeout of 5m0s").as_str()
    })));
    let new: Vec<Value> = store
        .list(
            &pod_gvr,
            Some("flux-system"),
            Some("app=kustomize-controller"),
        )
        .unwrap();
    assert_eq!(new.len(), 1);
    assert_ne!(s(&new[0], "/metadata/name"), old_name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn depends_on_missing_and_substitution_strictness_follow_the_version() {
    let extra = r#"              apps/strict/cm.yaml: |
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: strict, namespace: default}
                data: {url: "${missing_var}", kept: "$${escaped}", dflt: "${other:=fallback}"}"#;
    let kss = r#"  - apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata: {name: orphan, namespace: flux-system}
    spec:
      interval: 10m
      path: ./apps/wave-2
      dependsOn: [{name: does-not-exist}]
      sourceRef: {kind: GitRepository, name: flux-system}
  - apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata: {name: strict, namespace: flux-system}
    spec:
      interval: 10m
      path: ./apps/strict
      prune: true
      sourceRef: {kind: GitRepository, name: flux-system}
      postBuild:
        substitute: {present: "yes"}"#;
    // v1.9: StrictPostBuildSubstitutions is on by default
    let run = start(world("v1.9.4", extra, kss)).await;
    let o = wait(&run, &ks("orphan"), T, |o| {
        cond_is(o, "Ready", "False", "DependencyNotReady")
    })
    .await;
    assert_eq!(
        cond(&o, "Ready").unwrap()["message"],
        "dependency 'flux-system/does-not-exist' not found: kustomizations.kustomize.toolkit.fluxcd.io \"does-not-exist\" not found"
    );
    let st = wait(&run, &ks("strict"), T, |o| {
        cond_is(o, "Ready", "False", "BuildFailed")
    })
    .await;
    assert_eq!(
        cond(&st, "Ready").unwrap()["message"],
        "post build failed for 'ConfigMap.v1.[noGrp]/strict': envsubst error: variable substitution failed: variable not set (strict mode): \"missing_var\""
    );
    drop(run);

    // v1.8: lax by default: the missing variable becomes "" in the YAML text (kustomize had
    // printed `url: ${missing_var}` unquoted, so the value now reads as YAML null), escapes and
    // defaults apply
    let run = start(world("v1.8.3", extra, kss)).await;
    wait(&run, &ks("strict"), T, ready_succeeded).await;
    let cm = wait(
        &run,
        &ObjKey::new("v1", "ConfigMap", "default", "strict"),
        T,
        |o| !o.is_null(),
    )
    .await;
    assert_eq!(
        cm["data"],
        json!({"url": null, "kept": "${escaped}", "dflt": "fallback"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prune_deletes_objects_that_left_the_inventory() {
    let kss = r#"  - apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata: {name: apps-wave-1, namespace: flux-system}
    spec:
      interval: 10m
      timeout: 5m
      path: ./apps/wave-1
      prune: true
      wait: true
      sourceRef: {kind: GitRepository, name: flux-system}"#;
    let run = start(world("v1.9.4", "              README.md: hi", kss)).await;
    let w1 = wait(&run, &ks("apps-wave-1"), T, ready_succeeded).await;
    let first = s(&w1, "/status/lastAppliedRevision").to_string();
    // Replace the podinfo Deployment by a ConfigMap and break nothing: podinfo is pruned.
    let kust = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - namespace.yaml\n  - cm.yaml\n";
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: apps}\ndata: {a: b}\n";
    let swap = vec![
        Change::write("apps/wave-1/kustomization.yaml", kust),
        Change::write("apps/wave-1/cm.yaml", cm),
    ];
    commit(
        &run,
        "gitea",
        "org/fleet",
        swap,
        "swap podinfo for a ConfigMap",
    )
    .await;
    let w1 = wait(&run, &ks("apps-wave-1"), T, |o| {
        ready_succeeded(o) && s(o, "/status/lastAppliedRevision") != first
    })
    .await;
    assert_eq!(
        inventory_ids(&w1),
        vec!["_apps__Namespace", "apps_settings__ConfigMap"]
    );
    wait(
        &run,
        &ObjKey::new("apps/v1", "Deployment", "apps", "podinfo"),
        T,
        |o| o.is_null(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_one_worker_a_stuck_health_check_holds_every_other_kustomization() {
    let extra = r#"              apps/other/cm.yaml: |
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: other, namespace: default}
                data: {a: b}"#;
    let kss = r#"  - apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata: {name: apps-wave-1, namespace: flux-system}
    spec:
      interval: 10m
      timeout: 5m
      path: ./apps/wave-1
      wait: true
      sourceRef: {kind: GitRepository, name: flux-system}
  - apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata: {name: other, namespace: flux-system}
    spec:
      interval: 10m
      path: ./apps/other
      sourceRef: {kind: GitRepository, name: flux-system}"#;
    let run = start_scaled(world("v1.9.4", extra, kss), 0.02).await;
    assert_eq!(run.flux.as_ref().unwrap().kustomize.config().concurrent, 1);
    let w1 = wait(&run, &ks("apps-wave-1"), T, ready_succeeded).await;
    wait(&run, &ks("other"), T, ready_succeeded).await;
    let first = s(&w1, "/status/lastAppliedRevision").to_string();
    let bad = std::fs::read_to_string(
        Scenario::shipped_dir().join("repos/fleet/apps/wave-1/podinfo.yaml"),
    )
    .unwrap()
    .replace("localhost:5000/podinfo:6.5.0", "0.1.1");
    let change = vec![Change::write("apps/wave-1/podinfo.yaml", bad)];
    commit(
        &run,
        "gitea",
        "org/fleet",
        change,
        "Update from image update automation",
    )
    .await;
    wait(&run, &ks("apps-wave-1"), T, |o| {
        checking_new_revision(o, &first)
    })
    .await;
    run.cluster()
        .merge_patch(
            &ks("other"),
            json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "while-stuck"}}}),
            "test",
        )
        .unwrap();
    // `other` is handled only once the single worker is free again.
    wait(&run, &ks("other"), T, |o| {
        s(o, "/status/lastHandledReconcileAt") == "while-stuck"
    })
    .await;
    let w1 = get(&run, &ks("apps-wave-1")).await;
    assert!(
        cond_is(&w1, "Ready", "False", "HealthCheckFailed"),
        "{:?}",
        w1["status"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suspend_during_a_stuck_run_waits_for_it_and_resume_runs_again() {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    sc.events.retain(|e| e.name != "fix-commit");
    let run = start(sc).await;
    run.wait_fired("automation-commit", T).await.unwrap();
    wait(&run, &ks("apps-wave-1"), T, |o| {
        checking_new_revision(o, s(o, "/status/lastAppliedRevision"))
    })
    .await;
    let c = run.cluster();
    // flux suspend: a merge patch of spec.suspend (generation bump) does not cancel (no gate)
    let suspended = c
        .merge_patch(
            &ks("apps-wave-1"),
            json!({"spec": {"suspend": true}}),
            "flux",
        )
        .unwrap();
    let gen_ = suspended["metadata"]["generation"].as_i64().unwrap();
    let failed = wait(&run, &ks("apps-wave-1"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckFailed")
    })
    .await;
    assert!(
        cond(&failed, "Ready").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("timeout waiting for: [Deployment/apps/podinfo status: 'InProgress']")
    );
    // the suspended generation is never observed: Ready is not True
    assert!(failed["status"]["observedGeneration"].as_i64().unwrap() < gen_);
    // flux resume: removing spec.suspend bumps the generation and a run starts again
    c.merge_patch(
        &ks("apps-wave-1"),
        json!({"spec": {"suspend": null}}),
        "flux",
    )
    .unwrap();
    wait(&run, &ks("apps-wave-1"), T, |o| {
        cond(o, "Reconciling").is_some_and(|c| {
            c["reason"] == "Progressing"
                && c["message"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("Running health checks")
        }) && cond(o, "Reconciling").unwrap()["observedGeneration"].as_i64() > Some(gen_)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_checks_list_waits_on_not_found_until_the_timeout() {
    let kss = r#"  - apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata: {name: checks, namespace: flux-system}
    spec:
      interval: 1m
      timeout: 10s
      path: ./apps/wave-1
      sourceRef: {kind: GitRepository, name: flux-system}
      healthChecks:
        - {apiVersion: apps/v1, kind: Deployment, name: podinfo, namespace: apps}
        - {apiVersion: apps/v1, kind: Deployment, name: missing, namespace: apps}"#;
    let run = start(world("v1.9.4", "              README.md: hi", kss)).await;
    let o = wait(&run, &ks("checks"), T, |o| {
        cond_is(o, "Ready", "False", "HealthCheckFailed")
    })
    .await;
    // spec.timeout below 30s reads as 30s (GetTimeout); NotFound never ends the wait early
    assert!(cond(&o, "Reconciling").is_some_and(|c| {
        c["message"]
            .as_str()
            .unwrap()
            .ends_with("with a timeout of 30s")
    }));
    assert_eq!(
        cond(&o, "Healthy").unwrap()["message"],
        "timeout waiting for: [Deployment/apps/missing status: 'NotFound']"
    );
}
