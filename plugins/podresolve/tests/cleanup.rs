//! `kubectl podresolve --cleanup` on the twin: every probe object of ours goes, including a
//! probe pod whose owner Job is already gone (a killed run whose Job was deleted with
//! propagationPolicy=Orphan, or by hand); a pod of a Job swept in the same run is left to the
//! garbage collector; objects that are not our probes stay.

use serde_json::{Value, json};
use std::process::Stdio;
use twin::{Twin, TwinOptions};

const RUN_LABEL: &str = "podresolve.cluster-loop.dev/run";

fn probe_labels(run: &str) -> Value {
    json!({"app.kubernetes.io/managed-by": "kubectl-podresolve", "app.kubernetes.io/name": "podresolve", RUN_LABEL: run})
}

fn pod(name: &str, labels: Value, owner: Option<(&str, &str)>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "labels": labels},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "probe", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 3600"]}]},
    });
    if let Some((job, uid)) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_sweeps_a_probe_pod_whose_job_is_gone() {
    let twin = Twin::start(TwinOptions {
        namespaces: vec!["team".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let store = twin.store();
    let jobs = store.gvr("batch", "v1", "jobs").unwrap();
    let pods = store.gvr("", "v1", "pods").unwrap();
    // A live probe Job with its pod (the Job is swept, its pod follows by GC).
    let job = store
        .create(
            &jobs,
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "podresolve-aaaa", "namespace": "team", "labels": probe_labels("aaaa")},
                "spec": {"template": {"metadata": {"labels": probe_labels("aaaa")}, "spec": {"restartPolicy": "Never", "containers": [{"name": "probe", "image": "busybox:1.36"}]}}},
            }),
        )
        .unwrap();
    let uid = job["metadata"]["uid"].as_str().unwrap().to_string();
    store
        .create(
            &pods,
            pod(
                "podresolve-aaaa-x1",
                probe_labels("aaaa"),
                Some(("podresolve-aaaa", &uid)),
            ),
        )
        .unwrap();
    // The orphan: a probe pod whose Job no longer exists.
    store
        .create(
            &pods,
            pod(
                "podresolve-bbbb-x2",
                probe_labels("bbbb"),
                Some(("podresolve-bbbb", "3f1c2d0e-0000-4000-8000-000000000000")),
            ),
        )
        .unwrap();
    // A bare probe pod (--carrier pod).
    store
        .create(&pods, pod("podresolve-cccc", probe_labels("cccc"), None))
        .unwrap();
    // Not ours: an app pod, and a pod of another Job (no probe labels).
    store
        .create(&pods, pod("web-0", json!({"app": "web"}), None))
        .unwrap();
    store
        .create(
            &pods,
            pod(
                "batch-x3",
                json!({"job-name": "batch"}),
                Some(("batch", "9a9a9a9a-0000-4000-8000-000000000000")),
            ),
        )
        .unwrap();

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(twin.kubeconfig_path())
        .args(["--cleanup", "-n", "team", "-o", "json"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let deleted: Vec<(String, String)> = v["deleted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        deleted,
        [
            ("job".to_string(), "podresolve-aaaa".to_string()),
            ("pod".to_string(), "podresolve-bbbb-x2".to_string()),
            ("pod".to_string(), "podresolve-cccc".to_string()),
        ],
        "{v:#}"
    );
    // No probe object is left (the Job's own pod went with it); the others are untouched.
    let names = |gvr| {
        let mut n: Vec<String> = store
            .list(gvr, Some("team"), None)
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&pods), ["batch-x3", "web-0"]);
    assert!(names(&jobs).is_empty());

    // A second sweep finds nothing.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(twin.kubeconfig_path())
        .args(["--cleanup", "-n", "team"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "no podresolve probe objects in namespace team\n"
    );
    twin.shutdown().await;
}
