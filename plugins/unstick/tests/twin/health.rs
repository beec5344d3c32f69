//! Health as kustomize-controller reads it, end to end on the twin (its kustomize model reads
//! Jobs with fluxcd/pkg runtime/statusreaders' custom Job reader, as the real controller
//! does): a Job under `wait: true` whose pod cannot pull its image holds the health check,
//! and `kubectl unstick` names the Job (InProgress) with its pod's pull error, in the
//! single-object diagnosis and in the `--all` row, from the same rule.

use std::time::Duration;

use serde_json::json;
use twin::flux::cluster::s;
use twin::git::Change;
use twin::scenario::Scenario;
use twin::testkit::{commit, cond, cond_is, ks, run_plugin, start_scaled, wait};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");
const T: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn job_with_a_pull_error_holds_the_check_and_is_named_with_its_pod() {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    sc.controller.version = Some("v1.9.4".into());
    sc.controller.feature_gates.clear();
    sc.events.clear();
    let run = start_scaled(sc, 0.05).await;
    wait(&run, &ks("apps-wave-2"), T, |o| {
        cond_is(o, "Ready", "True", "ReconciliationSucceeded")
    })
    .await;
    let job = "apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  namespace: apps
spec:
  backoffLimit: 6
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: localhost:5000/db-migrate:9.9.9
";
    let kust = "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - namespace.yaml
  - podinfo.yaml
  - migrate.yaml
";
    let sha = commit(
        &run,
        "gitea",
        "org/fleet",
        vec![
            Change::write("apps/wave-1/migrate.yaml", job),
            Change::write("apps/wave-1/kustomization.yaml", kust),
        ],
        "add a migration Job",
    )
    .await;
    let rev = format!("main@sha1:{sha}");
    let r = rev.clone();
    wait(&run, &ks("apps-wave-1"), T, move |o| {
        s(o, "/status/lastAttemptedRevision") == r
            && cond(o, "Reconciling").is_some_and(|c| {
                c["status"] == "True" && s(c, "/message").starts_with("Running health checks")
            })
    })
    .await;
    // The pod shows the pull error before we look.
    wait(
        &run,
        &twin::flux::cluster::ObjKey::new("batch/v1", "Job", "apps", "migrate"),
        T,
        |j| j.pointer("/status/startTime").is_some(),
    )
    .await;
    let mut pod_seen = false;
    for _ in 0..60 {
        let pods = run.cluster().list("v1", "Pod", Some("apps")).unwrap();
        pod_seen = pods.iter().any(|p| {
            s(p, "/metadata/name").starts_with("migrate-")
                && ["ErrImagePull", "ImagePullBackOff"]
                    .contains(&s(p, "/status/containerStatuses/0/state/waiting/reason"))
        });
        if pod_seen {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(pod_seen, "the Job's pod never showed a pull error");
    let o = run_plugin(
        BIN,
        run.twin.kubeconfig_path(),
        &["ks/apps-wave-1", "--dry-run", "-o", "json"],
        T,
    )
    .await;
    let v = o.json();
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "health-check-in-flight", "{v:#}");
    let b = d["blocking"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["object"] == "Job/apps/migrate")
        .unwrap_or_else(|| panic!("no Job in the blocking list: {v:#}"));
    assert_eq!(b["kstatus"], "InProgress", "{b:#}");
    assert_eq!(b["origin"], "inventory");
    let pod = &b["pods"][0];
    assert!(
        ["ErrImagePull", "ImagePullBackOff"].contains(&pod["reason"].as_str().unwrap_or("")),
        "{b:#}"
    );
    assert_eq!(
        pod["image"],
        json!("localhost:5000/db-migrate:9.9.9"),
        "{b:#}"
    );
    // --all, same snapshot rules: the wave-1 row names the same blocker.
    let all = run_plugin(
        BIN,
        run.twin.kubeconfig_path(),
        &["--all", "--problems", "-o", "json"],
        T,
    )
    .await
    .json();
    let row = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kustomization"] == "flux-system/apps-wave-1")
        .unwrap_or_else(|| panic!("{all:#}"));
    assert_eq!(row["class"], "health-check-in-flight", "{row:#}");
    assert!(
        row["diagnosis"]["blocking"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["object"] == "Job/apps/migrate" && b["kstatus"] == "InProgress"),
        "{row:#}"
    );
}
