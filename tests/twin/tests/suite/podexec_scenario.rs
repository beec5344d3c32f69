//! podexec in the `split-dns` scenario: probe-image Jobs run for real through the workload
//! model (Job -> pod), Job status on success and failure, ephemeral containers run in the
//! target pod's resolver setup, unknown images still fail to pull.
//!
//! Skips (with a message) only when `unshare`/`dnsmasq`/`busybox` or root are missing.

use serde_json::{Value, json};
use std::time::Duration;
use twin::scenario::{RunOptions, RunningScenario, Scenario};
use twin::testkit::skip_without_podexec;
use twin::{PatchKind, Store, Subresource, WatchEventType, WriteOptions};

async fn start() -> RunningScenario {
    RunningScenario::start(
        Scenario::shipped("split-dns").unwrap(),
        RunOptions::default(),
    )
    .await
    .expect("split-dns starts")
}

/// Waits by watch until `ns/name` of `resource` satisfies `pred`.
async fn wait(
    store: &Store,
    group: &str,
    resource: &str,
    ns: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let gvr = store.gvr(group, "v1", resource).unwrap();
    let mut w = store.watch(&gvr, Some(ns), None).unwrap();
    if let Some(o) = store
        .list(&gvr, Some(ns), None)
        .unwrap()
        .into_iter()
        .find(|o| pred(o))
    {
        return o;
    }
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(ev) = w.next().await {
            if ev.type_ != WatchEventType::Deleted && pred(&ev.object) {
                return ev.object;
            }
        }
        panic!("watch ended")
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {resource} in {ns}"))
}

fn job(name: &str, image: &str, cmd: &[&str]) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 60, "template": {"metadata": {"labels": {"probe": name}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "probe", "image": image, "command": cmd}]}}}})
}

fn cond(o: &Value, t: &str) -> Option<String> {
    o["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t && c["status"] == "True")
        .map(|c| c["reason"].as_str().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_ephemeral_containers_and_unknown_images() {
    if skip_without_podexec() {
        return;
    }
    let sc = start().await;
    let store = sc.twin.store();
    let jobs = store.gvr("batch", "v1", "jobs").unwrap();
    store
        .create(
            &jobs,
            job(
                "ok",
                "alpine:3.22",
                &["getent", "ahosts", "gitea.prod.example.dev"],
            ),
        )
        .unwrap();
    store
        .create(
            &jobs,
            job("bad", "busybox:1.36", &["nslookup", "nosuch.example.dev"]),
        )
        .unwrap();
    store
        .create(&jobs, job("pull", "nosuch:1", &["true"]))
        .unwrap();

    let j = wait(&store, "batch", "jobs", "flux-system", |o| {
        o["metadata"]["name"] == "ok" && cond(o, "Complete").is_some()
    })
    .await;
    assert_eq!(j["status"]["succeeded"], 1);
    let p = wait(&store, "", "pods", "flux-system", |o| {
        o["metadata"]["labels"]["job-name"] == "ok" && o["status"]["phase"] == "Succeeded"
    })
    .await;
    let log = String::from_utf8_lossy(
        &store
            .read_pod_log(
                "flux-system",
                p["metadata"]["name"].as_str().unwrap(),
                "probe",
                0,
            )
            .0,
    )
    .into_owned();
    assert!(
        log.starts_with("192.168.2.20    STREAM gitea.prod.example.dev"),
        "{log}"
    );

    let j = wait(&store, "batch", "jobs", "flux-system", |o| {
        o["metadata"]["name"] == "bad" && cond(o, "Failed").is_some()
    })
    .await;
    assert_eq!(cond(&j, "Failed").as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(j["status"]["failed"], 1);
    let p = wait(&store, "", "pods", "flux-system", |o| {
        o["metadata"]["labels"]["job-name"] == "bad" && o["status"]["phase"] == "Failed"
    })
    .await;
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        1
    );

    // unknown image: the workload kubelet's pull error, as before. ErrImagePull turns into
    // ImagePullBackOff after the model's back-off (10 s), which can pass before this line on a
    // loaded machine: either reason is the pull error.
    wait(&store, "", "pods", "flux-system", |o| {
        o["metadata"]["labels"]["job-name"] == "pull"
            && ["ErrImagePull", "ImagePullBackOff"].contains(
                &o["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                    .as_str()
                    .unwrap_or_default(),
            )
    })
    .await;

    // ephemeral container in source-controller's pod: its resolv.conf (flux-system search)
    let sc_pod = wait(&store, "", "pods", "flux-system", |o| {
        o["metadata"]["labels"]["app"] == "source-controller" && o["status"]["phase"] == "Running"
    })
    .await;
    let name = sc_pod["metadata"]["name"].as_str().unwrap().to_string();
    let pods = store.gvr("", "v1", "pods").unwrap();
    store
        .patch_with(
            &pods,
            Some("flux-system"),
            &name,
            PatchKind::Strategic,
            &json!({"spec": {"ephemeralContainers": [
                {"name": "dbg", "image": "nicolaka/netshoot:v0.14", "command": ["sh", "-c", "cat /etc/resolv.conf; getent ahosts source-controller"]},
                {"name": "nopull", "image": "nosuch:1"}]}}),
            Subresource::EphemeralContainers,
            &WriteOptions::default(),
        )
        .unwrap();
    let p = wait(&store, "", "pods", "flux-system", |o| {
        o["metadata"]["name"] == json!(name)
            && o["status"]["ephemeralContainerStatuses"]
                .as_array()
                .is_some_and(|a| {
                    a.iter()
                        .any(|c| c["name"] == "dbg" && c["state"]["terminated"].is_object())
                        && a.iter().any(|c| c["name"] == "nopull")
                })
    })
    .await;
    let ecs = p["status"]["ephemeralContainerStatuses"]
        .as_array()
        .unwrap();
    let dbg = ecs.iter().find(|c| c["name"] == "dbg").unwrap();
    assert_eq!(dbg["state"]["terminated"]["exitCode"], 0);
    let nopull = ecs.iter().find(|c| c["name"] == "nopull").unwrap();
    assert_eq!(nopull["state"]["waiting"]["reason"], "ErrImagePull");
    assert_eq!(p["status"]["phase"], "Running", "the pod keeps running");
    let log =
        String::from_utf8_lossy(&store.read_pod_log("flux-system", &name, "dbg", 0).0).into_owned();
    assert!(
        log.starts_with(
            "search flux-system.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
        ),
        "{log}"
    );
    assert!(
        log.contains("10.96.120.5     STREAM source-controller.flux-system.svc.cluster.local"),
        "{log}"
    );
}
