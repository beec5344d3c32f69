//! The real binary against the twin API server (tests/twin): request construction, the single
//! watch, pods/log, cleanup (success, failure, SIGINT), --from with and without ephemeral
//! container permission, and the API request budget.
//!
//! Here each test plays the Job controller and the kubelet itself (`FakeKubelet`), so that the
//! probe's answer is a fixed, REAL captured log (tests/fixtures/probe-glibc-bind.log, captured
//! against dnsmasq with BIND nslookup) whatever the host has installed: when the probe Job (or
//! ephemeral container) appears it creates the pod, appends that log to pods/log and marks the
//! container terminated. What is tested is podresolve's side: the objects it sends, the
//! requests it makes, and what it does with the answers. tests/real_cluster.rs runs the same
//! binary against the real cluster, where the probe really resolves.

use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio::sync::mpsc;
use twin::{PatchKind, Store, Twin, TwinOptions};

const COREFILE: &str = ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    hosts {\n       192.168.2.20 gitea.example.dev\n       fallthrough\n    }\n}\n";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

async fn start_twin() -> Twin {
    let twin = Twin::start(TwinOptions {
        install_flux_crds: true,
        namespaces: vec!["team".into()],
        ..Default::default()
    })
    .await
    .expect("twin starts");
    twin.load_yaml(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\n  namespace: kube-system\ndata:\n  Corefile: |\n{}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: kube-dns\n  namespace: kube-system\nspec:\n  clusterIP: 127.0.0.77\n  clusterIPs: [127.0.0.77]\n  ports:\n  - name: dns\n    port: 53\n    protocol: UDP\n",
        COREFILE
            .lines()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    ))
    .expect("load coredns");
    twin
}

#[derive(Clone, Copy, PartialEq)]
enum Behaviour {
    /// Run: pod created, log appended, container terminated with exit 0.
    Run,
    /// The image cannot be pulled: container waiting ErrImagePull.
    BadImage,
    /// Never start a pod (for the SIGINT test).
    Nothing,
}

/// Stands in for the Job controller and the kubelet. Sends every Job it sees on `seen`.
fn fake_kubelet(
    store: Store,
    ns: &str,
    log: String,
    b: Behaviour,
    seen: mpsc::UnboundedSender<Value>,
) {
    let ns = ns.to_string();
    tokio::spawn(async move {
        let jobs = store.gvr("batch", "v1", "jobs").unwrap();
        let pods = store.gvr("", "v1", "pods").unwrap();
        let mut w = store.watch(&jobs, Some(&ns), None).unwrap();
        while let Some(ev) = w.next().await {
            if !matches!(ev.type_, twin::WatchEventType::Added) {
                continue;
            }
            let job = ev.object;
            let _ = seen.send(job.clone());
            if b == Behaviour::Nothing {
                continue;
            }
            let name = job["metadata"]["name"].as_str().unwrap().to_string();
            let pod_name = format!("{name}-x7k2p");
            let mut labels = job["spec"]["template"]["metadata"]["labels"].clone();
            labels["batch.kubernetes.io/job-name"] = json!(name);
            let mut spec = job["spec"]["template"]["spec"].clone();
            spec["nodeName"] = json!("twin-node");
            store
                .create(
                    &pods,
                    json!({
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": pod_name, "namespace": ns, "labels": labels,
                          "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                            "uid": job["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
                        "spec": spec,
                    }),
                )
                .unwrap();
            let image = job["spec"]["template"]["spec"]["containers"][0]["image"].clone();
            let status = if b == Behaviour::BadImage {
                json!({"status": {"phase": "Pending", "containerStatuses": [{"name": "probe", "image": image,
                    "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "ErrImagePull", "message": "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nosuch:1\""}}}]}})
            } else {
                store.append_pod_log(&ns, &pod_name, "probe", log.as_bytes());
                store.close_pod_log(&ns, &pod_name, "probe");
                json!({"status": {"phase": "Succeeded", "containerStatuses": [{"name": "probe", "image": image,
                    "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}})
            };
            store
                .patch_status(
                    &pods,
                    Some(&ns),
                    &pod_name,
                    PatchKind::Merge,
                    &status,
                    "kubelet",
                )
                .unwrap();
        }
    });
}

/// Plays the kubelet for ephemeral containers added to `pod`.
fn fake_ephemeral_kubelet(store: Store, ns: &str, pod: &str, log: String) {
    let (ns, pod) = (ns.to_string(), pod.to_string());
    tokio::spawn(async move {
        let pods = store.gvr("", "v1", "pods").unwrap();
        let mut w = store.watch(&pods, Some(&ns), None).unwrap();
        while let Some(ev) = w.next().await {
            let o = ev.object;
            if o["metadata"]["name"] != json!(pod) {
                continue;
            }
            let Some(ecs) = o["spec"]["ephemeralContainers"].as_array() else {
                continue;
            };
            let done = o["status"]["ephemeralContainerStatuses"]
                .as_array()
                .map(|a| a.len())
                .unwrap_or(0);
            if ecs.len() <= done {
                continue;
            }
            let ec = ecs.last().unwrap().clone();
            let cname = ec["name"].as_str().unwrap().to_string();
            store.append_pod_log(&ns, &pod, &cname, log.as_bytes());
            store.close_pod_log(&ns, &pod, &cname);
            let status = json!({"status": {"ephemeralContainerStatuses": [{"name": cname, "image": ec["image"],
                "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
            store
                .patch_status(&pods, Some(&ns), &pod, PatchKind::Merge, &status, "kubelet")
                .unwrap();
        }
    });
}

fn source_pod(store: &Store) {
    let pods = store.gvr("", "v1", "pods").unwrap();
    let p = store
        .create(
            &pods,
            json!({"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "source-controller-7d9f-abcde", "namespace": "flux-system",
                "labels": {"app": "source-controller"}},
              "spec": {"nodeName": "twin-node", "dnsPolicy": "None",
                "dnsConfig": {"nameservers": ["127.0.0.77"], "searches": ["flux-system.svc.cluster.local"], "options": [{"name": "ndots", "value": "5"}]},
                "hostAliases": [{"ip": "10.0.0.5", "hostnames": ["pinned.example.dev"]}],
                "containers": [{"name": "manager", "image": "ghcr.io/fluxcd/source-controller:v1.7.4"}]}}),
        )
        .unwrap();
    let _ = p;
    store
        .patch_status(
            &pods,
            Some("flux-system"),
            "source-controller-7d9f-abcde",
            PatchKind::Merge,
            &json!({"status": {"phase": "Running"}}),
            "kubelet",
        )
        .unwrap();
}

struct RunOut {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run_bin(kubeconfig: &std::path::Path, args: &[&str]) -> RunOut {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("binary finishes")
        .unwrap();
    RunOut {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

fn leftovers(store: &Store) -> usize {
    let jobs = store.gvr("batch", "v1", "jobs").unwrap();
    let pods = store.gvr("", "v1", "pods").unwrap();
    let count = |g| {
        store
            .list(g, None, None)
            .unwrap()
            .iter()
            .filter(|o| {
                o["metadata"]["labels"]["app.kubernetes.io/managed-by"]
                    == json!("kubectl-podresolve")
            })
            .count()
    };
    count(&jobs) + count(&pods)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_name_expect_pass_job_spec_budget_and_cleanup() {
    let twin = start_twin().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    fake_kubelet(
        twin.store(),
        "team",
        fixture("probe-glibc-bind.log"),
        Behaviour::Run,
        tx,
    );
    twin.reset_requests();
    let r = run_bin(
        twin.kubeconfig_path(),
        &[
            "gitea.example.dev",
            "--expect",
            "192.168.2.20",
            "-n",
            "team",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(
        r.code,
        Some(0),
        "stderr: {}\nstdout: {}",
        r.stderr,
        r.stdout
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let h = &v["hosts"][0];
    assert_eq!(h["pod"]["addresses"], json!(["192.168.2.20"]));
    assert_eq!(h["expectMatch"], true);
    let last = h["coredns"].as_array().unwrap().last().unwrap();
    assert_eq!(last["answeredBy"], "hosts");
    assert_eq!(last["answered"], true);
    assert_eq!(v["clusterDns"]["kubeDnsIps"], json!(["127.0.0.77"]));
    assert_eq!(v["probe"]["carrier"], "job");

    // What was sent.
    let job = rx.recv().await.unwrap();
    let job_name = job["metadata"]["name"].as_str().unwrap();
    assert_eq!(v["probe"]["pod"], json!(format!("{job_name}-x7k2p")));
    assert_eq!(v["probe"]["name"], json!(job_name));
    assert_eq!(v["probe"]["node"], "twin-node");
    assert_eq!(job["spec"]["backoffLimit"], 0);
    assert_eq!(job["spec"]["activeDeadlineSeconds"], 60);
    assert_eq!(job["spec"]["ttlSecondsAfterFinished"], 300);
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let argv = pod["containers"][0]["command"].as_array().unwrap();
    assert_eq!(argv[0], "sh");
    assert_eq!(argv.last().unwrap(), "gitea.example.dev");

    // Budget and no polling: one watch, at most 10 requests.
    let reqs = twin.requests();
    assert!(
        reqs.len() <= 10,
        "{} requests: {:?}",
        reqs.len(),
        reqs.iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
    assert_eq!(twin.request_log().count("watch", Some("pods")), 1);
    assert_eq!(
        v["probe"]["apiRequests"].as_u64().unwrap() as usize,
        reqs.len()
    );
    assert_eq!(leftovers(&twin.store()), 0, "probe Job and pod deleted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_mismatch_and_nxdomain_exit_1() {
    let twin = start_twin().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    fake_kubelet(
        twin.store(),
        "team",
        fixture("probe-glibc-bind.log"),
        Behaviour::Run,
        tx,
    );
    let r = run_bin(
        twin.kubeconfig_path(),
        &[
            "gitea.example.dev",
            "--expect",
            "192.168.2.21",
            "-n",
            "team",
        ],
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stdout.contains("MISMATCH"), "{}", r.stdout);
    let r = run_bin(
        twin.kubeconfig_path(),
        &["nosuch.example.dev", "-n", "team", "-o", "yaml"],
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stdout.contains("verdict: pod-cannot-resolve"),
        "{}",
        r.stdout
    );
    assert_eq!(leftovers(&twin.store()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_image_fails_fast_and_cleans_up() {
    let twin = start_twin().await;
    let (tx, _rx) = mpsc::unbounded_channel();
    fake_kubelet(twin.store(), "team", String::new(), Behaviour::BadImage, tx);
    let r = run_bin(
        twin.kubeconfig_path(),
        &["gitea.example.dev", "-n", "team", "--image", "nosuch:1"],
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("ErrImagePull"), "{}", r.stderr);
    assert_eq!(leftovers(&twin.store()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_deletes_the_probe() {
    let twin = start_twin().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    fake_kubelet(twin.store(), "team", String::new(), Behaviour::Nothing, tx);
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(twin.kubeconfig_path())
        .args(["gitea.example.dev", "-n", "team", "--timeout", "5m"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The Job exists: the run is waiting on its watch.
    let job = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        job["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("podresolve-")
    );
    let pid = child.id().unwrap().to_string();
    let st = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(st.success());
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    assert!(stderr.contains("deleted"), "{stderr}");
    assert_eq!(leftovers(&twin.store()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_pod_with_ephemeral_permission() {
    let twin = start_twin().await;
    source_pod(&twin.store());
    fake_ephemeral_kubelet(
        twin.store(),
        "flux-system",
        "source-controller-7d9f-abcde",
        fixture("probe-glibc-bind.log"),
    );
    twin.reset_requests();
    let r = run_bin(
        twin.kubeconfig_path(),
        &[
            "gitea.example.dev",
            "--from",
            "pod/source-controller-7d9f-abcde",
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["probe"]["carrier"], "ephemeral");
    assert_eq!(
        v["probe"]["fromPod"],
        "flux-system/source-controller-7d9f-abcde"
    );
    assert!(
        r.stderr.contains("cannot remove ephemeral containers"),
        "{}",
        r.stderr
    );
    assert_eq!(twin.request_log().count("create", Some("jobs")), 0);
    assert!(twin.requests().len() <= 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_pod_without_ephemeral_permission_falls_back_to_a_copy() {
    let twin = start_twin().await;
    source_pod(&twin.store());
    let (tx, mut rx) = mpsc::unbounded_channel();
    fake_kubelet(
        twin.store(),
        "flux-system",
        fixture("probe-glibc-bind.log"),
        Behaviour::Run,
        tx,
    );
    let rules = vec![
        twin::Rule::new(
            &["get", "list", "watch"],
            &[""],
            &["pods", "pods/log", "configmaps", "services"],
        ),
        twin::Rule::new(&["get"], &["apps"], &["deployments"]),
        twin::Rule::new(&["create", "delete", "get"], &["batch"], &["jobs"]),
    ];
    twin.load_yaml(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: source-controller\n  namespace: flux-system\nspec:\n  selector:\n    matchLabels:\n      app: source-controller\n  template:\n    metadata:\n      labels:\n        app: source-controller\n    spec:\n      containers:\n      - name: manager\n        image: ghcr.io/fluxcd/source-controller:v1.7.4\n",
    )
    .unwrap();
    let token = twin.add_token("limited", rules);
    let kc = twin.kubeconfig_for(&token, "limited").unwrap();
    twin.reset_requests();
    let r = run_bin(
        &kc,
        &[
            "gitea.example.dev",
            "--from",
            "deploy/source-controller",
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("ephemeral container not allowed"),
        "{}",
        r.stderr
    );
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["probe"]["carrier"], "job");
    assert!(
        v["probe"]["fallbackReason"]
            .as_str()
            .unwrap()
            .starts_with("403")
    );
    let job = rx.recv().await.unwrap();
    assert_eq!(job["metadata"]["namespace"], "flux-system");
    let spec = &job["spec"]["template"]["spec"];
    assert_eq!(spec["nodeName"], "twin-node");
    assert_eq!(spec["dnsPolicy"], "None");
    assert_eq!(spec["dnsConfig"]["nameservers"], json!(["127.0.0.77"]));
    assert_eq!(spec["hostAliases"][0]["ip"], "10.0.0.5");
    assert_eq!(leftovers(&twin.store()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_create_exits_3_without_cleanup_noise() {
    let twin = start_twin().await;
    let rules = vec![twin::Rule::new(
        &["get", "list", "watch"],
        &[""],
        &["pods", "pods/log", "configmaps", "services"],
    )];
    let token = twin.add_token("readonly", rules);
    let kc = twin.kubeconfig_for(&token, "readonly").unwrap();
    let r = run_bin(&kc, &["gitea.example.dev", "-n", "team"]).await;
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(r.stderr.contains("jobs"), "{}", r.stderr);
    assert!(!r.stderr.contains("cleanup failed"), "{}", r.stderr);
    assert_eq!(twin.request_log().count("delete", Some("jobs")), 0);
}

/// Start the binary, wait until fault `id` has fired `n` times (the requests reached the
/// server and are being held), then SIGINT it; its exit code and stderr.
async fn interrupt_when_fired(
    twin: &Twin,
    id: twin::FaultId,
    n: u64,
    args: &[&str],
) -> (Option<i32>, String) {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(twin.kubeconfig_path())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = tokio::time::Instant::now() + Duration::from_secs(60);
    while twin.faults().fired(id) < n {
        assert!(
            tokio::time::Instant::now() < until,
            "requests never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("exits promptly after SIGINT")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// An API server that accepts requests and never answers: the create is held back until the
/// server has answered something, so SIGINT finds nothing created, sends no DELETE and does
/// not wait for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_server_sigint_reports_nothing_created_and_sends_no_delete() {
    let twin = start_twin().await;
    let hang = twin.faults().add(twin::Fault {
        matcher: Default::default(),
        trigger: twin::Trigger::Always,
        action: twin::FaultAction::Latency(Duration::from_secs(3600)),
    });
    let (code, stderr) = interrupt_when_fired(
        &twin,
        hang,
        3,
        &["gitea.example.dev", "-n", "team", "--timeout", "5m"],
    )
    .await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT: nothing was created\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("NOT deleted"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // Only the three kube-system GETs reached the server: no POST, no DELETE.
    assert_eq!(twin.faults().fired(hang), 3);
}

/// The same hung server without an interrupt: the run ends at --timeout + 15s with exit 3 and
/// says nothing was created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_server_run_is_bounded_by_the_deadline() {
    let twin = start_twin().await;
    let hang = twin.faults().add(twin::Fault {
        matcher: Default::default(),
        trigger: twin::Trigger::Always,
        action: twin::FaultAction::Latency(Duration::from_secs(3600)),
    });
    let r = run_bin(
        twin.kubeconfig_path(),
        &["gitea.example.dev", "-n", "team", "--timeout", "5s"],
    )
    .await;
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let server = twin.server_url().trim_end_matches('/').to_string();
    assert!(
        r.stderr.ends_with(&format!(
            "error: the API server {server} did not answer within 20s (--timeout + 15s): nothing was created\n"
        )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("deleted"), "{}", r.stderr);
    assert_eq!(twin.faults().fired(hang), 3, "no POST, no DELETE");
}

/// The server answers, but not the create: the probe may exist, so one DELETE by name is
/// sent (bounded), and the message says the create had no answer rather than claiming a
/// deletion of something known to exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_create_sigint_sends_one_delete_and_says_so() {
    let twin = start_twin().await;
    let hang = twin.faults().add(twin::Fault::on_verb(
        "create",
        Some("jobs"),
        twin::Trigger::Always,
        twin::FaultAction::Latency(Duration::from_secs(3600)),
    ));
    let (code, stderr) = interrupt_when_fired(
        &twin,
        hang,
        1,
        &["gitea.example.dev", "-n", "team", "--timeout", "5m"],
    )
    .await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT: the create of job team/podresolve-"),
        "{stderr}"
    );
    assert!(
        stderr.contains("had no answer yet; its DELETE succeeded (or found nothing); should the create still land, it stops at its activeDeadlineSeconds (300s) and ttlSecondsAfterFinished (300s) removes it, or run `kubectl podresolve --cleanup -n team`"),
        "{stderr}"
    );
    assert_eq!(twin.request_log().count("delete", Some("jobs")), 1);
}
