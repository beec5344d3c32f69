//! kubectl unstick against the real control plane and the real kustomize-controller
//! (tests/realcluster): the diagnosis names what the real controller waits on, and the
//! predicted deadline matches when the real controller ends the check.

use std::time::Duration;

use realcluster::testkit::{condition, eventually};

use serde_json::Value;

use super::{BIN, cluster, unstick};

/// The catalogue's Job case on the real controller: `wait: true` over a Job whose pod cannot
/// pull its image. kustomize-controller holds the check (its Job status reader: InProgress
/// until Complete); unstick must name the Job as the blocker, with the pod's pull error, and
/// predict the end of the check within 10 % of when the real controller ends it; the `--all`
/// row names the same blocker.
#[test]
fn a_job_that_cannot_pull_is_named_and_the_deadline_matches_the_real_controller() {
    let c = &cluster();
    let ns = "unstick-job";
    c.fleet(
        "unstick-job",
        &[
            ("ns.yaml", &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")),
            (
                "job.yaml",
                &format!(
                    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {ns}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: 0.1.1\n"
                ),
            ),
        ],
        "  interval: 10m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 45s\n",
    )
    .unwrap();
    eventually(
        Duration::from_secs(60),
        "the real health check is running",
        || {
            let k = c.kustomization("unstick-job");
            condition(&k, "Reconciling")["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks"))
                .then_some(())
        },
    );
    // Wait until the pod has failed its pull, as an operator would see it.
    eventually(Duration::from_secs(30), "pod pull error", || {
        let pods = c
            .kubectl(&[
                "-n",
                ns,
                "get",
                "pods",
                "-l",
                "job-name=migrate",
                "-o",
                "json",
            ])
            .ok()?;
        pods.contains("ErrImagePull").then_some(())
    });
    let (code, out, err) = unstick(c, &["ks/unstick-job", "--dry-run", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let text = v.to_string();
    assert!(
        text.contains("health-check-in-flight"),
        "class: {out}\n{err}"
    );
    assert!(
        text.contains(&format!("Job/{ns}/migrate")),
        "the Job is named as blocking: {out}"
    );
    assert!(
        text.contains("ErrImagePull") || text.contains("ImagePullBackOff"),
        "pod reason: {out}"
    );
    assert!(text.contains("0.1.1"), "the image: {out}");
    assert_ne!(code, 0, "a held check is a finding: {out}");
    let job = format!("Job/{ns}/migrate");
    let blocker = |d: &Value| {
        d["blocking"]
            .as_array()
            .and_then(|a| a.iter().find(|b| b["object"] == job.as_str()).cloned())
            .unwrap_or(Value::Null)
    };
    let b = blocker(&v["diagnosis"]);
    assert_eq!(b["kstatus"], "InProgress", "{b:#}");
    assert_eq!(b["origin"], "inventory", "{b:#}");
    // --all, from the same rules: the row names the same blocker (the twin's health.rs,
    // ported).
    let (_, all, err) = unstick(c, &["--all", "--problems", "-o", "json"]);
    let all: Value = serde_json::from_str(&all).unwrap_or_else(|e| panic!("{e}: {all}\n{err}"));
    let row = all["items"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|i| i["kustomization"] == "flux-system/unstick-job")
                .cloned()
        })
        .unwrap_or_else(|| panic!("{all:#}"));
    assert_eq!(row["class"], "health-check-in-flight", "{row:#}");
    assert_eq!(
        blocker(&row["diagnosis"])["kstatus"],
        "InProgress",
        "{row:#}"
    );
    // The predicted end of the check, against when the real controller ends it.
    let predicted = find_deadline(&v).unwrap_or_else(|| panic!("no deadline in {out}"));
    let ready = eventually(Duration::from_secs(90), "the real check ends", || {
        let r = condition(&c.kustomization("unstick-job"), "Ready");
        (r["status"] == "False").then_some(r)
    });
    assert_eq!(ready["reason"], "HealthCheckFailed", "{ready}");
    let predicted: jiff::Timestamp = predicted.parse().unwrap();
    super::assert_end_predicted(predicted, &ready, 45.0);
}

/// The first deadline-like timestamp in unstick's JSON (healthCheck.deadline or eta).
fn find_deadline(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) => {
            for key in ["deadline", "earliestEnd", "eta"] {
                if let Some(s) = m.get(key).and_then(Value::as_str) {
                    return Some(s.to_owned());
                }
            }
            m.values().find_map(find_deadline)
        }
        Value::Array(a) => a.iter().find_map(find_deadline),
        _ => None,
    }
}

/// API faults on the real apiserver (the realcluster fault proxy): a 500 on the
/// Kustomization read is a cluster/API error (exit 3) that names what was asked, and nothing is
/// written; and `unstick --all` stays within its documented read bound (<= 15 requests) against
/// the real apiserver, counted by the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_faults_exit_3_and_all_stays_within_its_request_bound() {
    use realcluster::proxy::{Fault, FaultAction, FaultProxy};
    let c = &cluster();
    c.fleet(
        "unstick-fault",
        &[("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fault\n  namespace: default\ndata: {a: b}\n")],
        "  interval: 10m\n  path: ./\n  prune: true\n",
    )
    .unwrap();
    let proxy = FaultProxy::start(c).await.unwrap();
    let run = |args: Vec<String>| {
        let kc = proxy.kubeconfig().to_path_buf();
        async move {
            let out = tokio::process::Command::new(BIN)
                .arg("--kubeconfig")
                .arg(kc)
                .args(args)
                .env("NO_COLOR", "1")
                .output()
                .await
                .unwrap();
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    proxy.add(Fault {
        method: Some("GET".into()),
        path_contains: "/kustomizations".into(),
        nth: 0,
        action: FaultAction::Status(500),
    });
    let (code, out, err) = run(vec!["ks/unstick-fault".into(), "--yes".into()]).await;
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains("kustomizations") && err.contains("500"),
        "names what was asked and the answer: {err}"
    );
    let writes: Vec<_> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    assert!(
        writes.is_empty(),
        "nothing written after a failed read: {writes:?}"
    );
    proxy.clear();
    proxy.reset_requests();
    let (code, out, err) = run(vec!["--all".into(), "-o".into(), "json".into()]).await;
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let reqs = proxy.requests();
    assert!(
        reqs.len() <= 15,
        "--all made {} requests on the real apiserver: {reqs:#?}",
        reqs.len()
    );
    assert!(out.contains("unstick-fault"), "{out}");
}
