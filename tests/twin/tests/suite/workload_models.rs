//! The workload model on a bare twin: Deployments, StatefulSets, DaemonSets and Jobs get pods
//! and status like the real controllers; unpullable images fail like the kubelet reports them.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use twin::Twin;
use twin::flux::ModelOptions;
use twin::flux::cluster::{ClusterRef, ObjKey, s};
use twin::flux::kstatus::{self, Status};
use twin::scenario::wait_for;
use twin::testkit::start_twin;
use twin::workload::{Registry, WorkloadController};

const T: Duration = Duration::from_secs(60);

async fn setup() -> (Twin, ClusterRef, Arc<WorkloadController>, tempfile::TempDir) {
    let twin = start_twin(&["apps"]).await;
    let dir = tempfile::tempdir().unwrap();
    let cluster: ClusterRef = Arc::new(twin.store());
    let w = WorkloadController::start(
        cluster.clone(),
        Arc::new(ModelOptions::new(0.01, dir.path().to_path_buf())),
        Registry::new(&["localhost:5000/app:1.0.0".into(), "busybox:1.36".into()]),
    );
    (twin, cluster, w, dir)
}

fn deployment(name: &str, image: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 60,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_becomes_available_then_a_bad_tag_exceeds_its_progress_deadline() {
    let (_twin, c, _w, _d) = setup().await;
    c.create(deployment("web", "localhost:5000/app:1.0.0", 2))
        .unwrap();
    let key = ObjKey::new("apps/v1", "Deployment", "apps", "web");
    let d = wait_for(&*c, &key, T, |o| {
        kstatus::compute(o).status == Status::Current
    })
    .await
    .unwrap();
    assert_eq!(d["status"]["readyReplicas"], 2);
    assert_eq!(d["status"]["availableReplicas"], 2);
    assert_eq!(d["status"]["observedGeneration"], 1);
    let prog = d["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap()
        .clone();
    assert_eq!(prog["reason"], "NewReplicaSetAvailable");
    assert_eq!(
        kstatus::compute(&d).message,
        "Deployment is available. Replicas: 2"
    );

    // automation writes a bare tag
    c.merge_patch(
        &key,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "0.1.1"}]}}}}),
        "test",
    )
    .unwrap();
    let d = wait_for(&*c, &key, T, |o| {
        kstatus::compute(o).status == Status::Failed
    })
    .await
    .unwrap();
    let prog = d["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .unwrap()
        .clone();
    assert_eq!(prog["status"], "False");
    assert_eq!(prog["reason"], "ProgressDeadlineExceeded");
    let msg = prog["message"].as_str().unwrap();
    assert!(
        msg.starts_with("ReplicaSet \"web-") && msg.ends_with("\" has timed out progressing."),
        "{msg}"
    );
    // old pods keep serving while the new one cannot pull
    assert_eq!(d["status"]["availableReplicas"], 2);
    assert_eq!(d["status"]["updatedReplicas"], 2);
    let pods = c.list("v1", "Pod", Some("apps")).unwrap();
    let bad: Vec<&Value> = pods
        .iter()
        .filter(|p| s(p, "/spec/containers/0/image") == "0.1.1")
        .collect();
    assert!(!bad.is_empty());
    for p in bad {
        let p = wait_for(&*c, &ObjKey::of(p), T, |o| {
            s(o, "/status/containerStatuses/0/state/waiting/reason") == "ImagePullBackOff"
        })
        .await
        .unwrap();
        assert_eq!(
            s(&p, "/status/containerStatuses/0/state/waiting/message"),
            "Back-off pulling image \"0.1.1\""
        );
        assert_eq!(s(&p, "/status/phase"), "Pending");
    }
    // kubelet events name the image
    let evs = c.list("v1", "Event", Some("apps")).unwrap();
    assert!(evs.iter().any(|e| s(e, "/reason") == "Failed"
        && s(e, "/message").starts_with("Failed to pull image \"0.1.1\": rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/0.1.1:latest\"")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_daemonset_and_job_reach_current() {
    let (_twin, c, _w, _d) = setup().await;
    let tmpl = json!({"metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}});
    c.create(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "apps"},
        "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "x"}}, "template": tmpl}}))
        .unwrap();
    c.create(json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "apps"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": tmpl}}))
        .unwrap();
    c.create(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "apps"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}))
        .unwrap();
    for (api, kind, name) in [
        ("apps/v1", "StatefulSet", "db"),
        ("apps/v1", "DaemonSet", "agent"),
        ("batch/v1", "Job", "migrate"),
    ] {
        let o = wait_for(&*c, &ObjKey::new(api, kind, "apps", name), T, |o| {
            kstatus::compute(o).status == Status::Current
                && o.get("status").is_some_and(|s| !s.is_null())
                && (kind != "Job" || o.pointer("/status/succeeded").is_some())
        })
        .await
        .unwrap();
        if kind == "StatefulSet" {
            assert_eq!(o["status"]["readyReplicas"], 2);
            assert_eq!(
                o["status"]["currentRevision"],
                o["status"]["updateRevision"]
            );
        }
        if kind == "Job" {
            assert_eq!(
                kstatus::compute(&o).message,
                "Job Completed. succeeded: 1/1"
            );
        }
    }
    let pods = c.list("v1", "Pod", Some("apps")).unwrap();
    let names: Vec<&str> = pods.iter().map(|p| s(p, "/metadata/name")).collect();
    assert!(
        names.contains(&"db-0") && names.contains(&"db-1"),
        "{names:?}"
    );

    // The apiserver keeps a Job's pod template immutable (what image automation hits).
    let err = c
        .merge_patch(
            &ObjKey::new("batch/v1", "Job", "apps", "migrate"),
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}}),
            "test",
        )
        .unwrap_err();
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("field is immutable"),
        "{}",
        err.message
    );
}
