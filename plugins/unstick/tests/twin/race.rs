//! The push-fix-then-`--with-source` race (issue 15): a wave failed its health check on a bad
//! image, a fix is pushed, and `kubectl unstick ks/apps-wave-1 --yes --cascade --with-source`
//! runs at once, while source-controller is still fetching (the GitRepository is Reconciling
//! when the plugin starts). The run the plugin requests starts at the old revision and fails
//! fast (the Deployment is past its progressDeadlineSeconds); a verdict taken then would be
//! a false "not recovered". The proof wait must see the source still moving, wait for the fix
//! revision's run, and end `recovered`, with the cascade.
//!
//! The Git server delays every response (`git::Fault::Delay`) so the fetch is in flight when
//! the plugin starts, whatever the machine's speed. One test run does the cycle
//! `UNSTICK_RACE_RUNS` times (default 2) on one twin: bad commit, failure, fix, plugin
//! (`UNSTICK_RACE_RUNS=20 cargo test -p kubectl-unstick --test twin race::` for the long run).

use std::time::Duration;

use serde_json::{Value, json};
use twin::flux::cluster::s;
use twin::git::{Change, Fault};
use twin::scenario::Scenario;
use twin::testkit::{
    FLUX_SYSTEM, commit, cond, cond_is, gitrepo, ks, run_plugin, start_scaled, wait,
};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");
const T: Duration = Duration::from_secs(240);
const PODINFO: &str = "apps/wave-1/podinfo.yaml";

fn podinfo(image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
  namespace: apps
spec:
  replicas: 1
  progressDeadlineSeconds: 60
  selector:
    matchLabels:
      app: podinfo
  template:
    metadata:
      labels:
        app: podinfo
    spec:
      containers:
        - name: podinfo
          image: {image}
"
    )
}

/// The binary under test: this build's, or `UNSTICK_BIN` (a copy kept for a long run while
/// the tree is rebuilt).
fn bin() -> String {
    std::env::var("UNSTICK_BIN").unwrap_or_else(|_| BIN.to_string())
}

fn runs() -> usize {
    std::env::var("UNSTICK_RACE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn push_fix_then_with_source_while_the_source_is_fetching_never_says_not_recovered() {
    let mut sc = Scenario::shipped("bare-tag-rollout").unwrap();
    sc.controller.version = Some("v1.9.4".into());
    sc.controller.feature_gates.clear();
    // The scenario's own commits are not part of this story: we push ours.
    sc.events.clear();
    // No periodic or retry run of its own during a cycle: every run of apps-wave-1 comes from
    // a new source revision or the plugin's request, so the state the plugin starts from is
    // the one this test sets up (HealthCheckFailed at the bad revision).
    for o in sc.objects.iter_mut() {
        if o["kind"] == "Kustomization" && o["metadata"]["name"] == "apps-wave-1" {
            o["spec"]["interval"] = json!("1h");
            o["spec"]["retryInterval"] = json!("1h");
        }
    }
    let run = start_scaled(sc, 0.05).await;
    let git = run.git["gitea"].clone();
    wait(&run, &ks("apps-wave-2"), T, |o| {
        cond_is(o, "Ready", "True", "ReconciliationSucceeded")
    })
    .await;
    let n = runs();
    let mut verdicts = Vec::new();
    let mut classes = Vec::new();
    for i in 0..n {
        // 1. A bad image: the health check fails fast once the Deployment is past its
        //    progressDeadlineSeconds (60s nominal, 3s here).
        let bad = commit(
            &run,
            "gitea",
            "org/fleet",
            vec![Change::write(PODINFO, podinfo("0.1.1"))],
            &format!("bad image {i}"),
        )
        .await;
        let bad_rev = format!("main@sha1:{bad}");
        let br = bad_rev.clone();
        wait(&run, &ks("apps-wave-1"), T, move |o| {
            cond_is(o, "Ready", "False", "HealthCheckFailed")
                && s(o, "/status/lastAttemptedRevision") == br
        })
        .await;
        // 2. A slow Git server, then the fix: the next fetch is in flight for seconds.
        git.set_fault("org/fleet", Some(Fault::Delay(Duration::from_secs(3))))
            .unwrap();
        let fixed = commit(
            &run,
            "gitea",
            "org/fleet",
            vec![Change::write(
                PODINFO,
                podinfo("localhost:5000/podinfo:6.5.1"),
            )],
            &format!("fix {i}"),
        )
        .await;
        let fix_rev = format!("main@sha1:{fixed}");
        // 3. The source is fetching and still serves the bad revision when the plugin starts.
        let br = bad_rev.clone();
        wait(&run, &gitrepo(FLUX_SYSTEM), T, move |o| {
            cond(o, "Reconciling")
                .is_some_and(|c| c["status"] == "True" && c["reason"] == "Progressing")
                && s(o, "/status/artifact/revision") == br
        })
        .await;
        let o = run_plugin(
            &bin(),
            run.twin.kubeconfig_path(),
            &[
                "ks/apps-wave-1",
                "--yes",
                "--cascade",
                "--with-source",
                "-o",
                "json",
            ],
            T,
        )
        .await;
        let v: Value = o.json();
        let src = run
            .cluster()
            .get(&gitrepo(FLUX_SYSTEM))
            .unwrap()
            .unwrap_or(Value::Null);
        verdicts.push(format!("run {i}: exit {} proof {}", o.code, v["proof"]));
        assert_eq!(
            (o.code, v["proof"].as_str()),
            (0, Some("recovered")),
            "run {i}: a false verdict while the source moved to {fix_rev}: {v:#}\nstderr: {}\nsource: {src:#}",
            o.stderr
        );
        // Usually the failed check; sometimes a run at the bad revision has just started
        // again (the source's status writes re-queue it): both get the source lever.
        let class = v["diagnosis"]["class"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            ["health-check-failed", "reconciling"].contains(&class.as_str()),
            "{v:#}"
        );
        classes.push(class);
        assert_eq!(v["plan"]["lever"], "reconcile-source", "{v:#}");
        assert_eq!(
            v["cascade"],
            json!([{"wave": 1, "kustomization": "flux-system/apps-wave-2", "proof": "recovered"}]),
            "{v:#}"
        );
        // The recovered contract holds on the cluster: Ready at the fix revision.
        let w1 = run
            .cluster()
            .get(&ks("apps-wave-1"))
            .unwrap()
            .unwrap_or(Value::Null);
        assert_eq!(s(&w1, "/status/lastAppliedRevision"), fix_rev, "{w1:#}");
        assert_eq!(s(&w1, "/status/lastAttemptedRevision"), fix_rev, "{w1:#}");
        git.set_fault("org/fleet", None).unwrap();
    }
    eprintln!(
        "{n} runs of the race, no false verdict: {verdicts:?}; classes at start: {classes:?}"
    );
    assert!(
        classes.iter().any(|c| c == "health-check-failed"),
        "the race (a failed check while the source fetches) was never set up: {classes:?}"
    );
}
