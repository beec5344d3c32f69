//! Our node agent: the kubelet (and scheduler) half that cannot run here. Everything else in the
//! cluster is real; this is a client of the real kube-apiserver, like a kubelet.
//!
//! What it does, with the upstream behaviour it follows:
//! - Registers Node [`NODE_NAME`] (Ready, 8 CPU / 32 GiB / 110 pods) and renews its Lease in
//!   `kube-node-lease` every 10 s (kubelet `nodelease` controller, 40 s lease duration).
//! - Binds every pod without `spec.nodeName` to the node through `pods/binding` (what
//!   kube-scheduler does; there is one node and no resource accounting).
//! - Sets pod status as the kubelet does (pkg/kubelet/status, kubelet_pods.go
//!   `generateAPIPodStatus`): an image the scenario's registry holds is pulled, so the pod is
//!   Running and Ready (a Job's pod, restartPolicy Never/OnFailure, runs to Succeeded with exit
//!   0); any other image gives the container `waiting` reason `ErrImagePull` with containerd's
//!   `rpc error: code = NotFound desc = failed to pull and unpack image ...` message, then after
//!   10 s (the kubelet's initial image back-off) `ImagePullBackOff` with `Back-off pulling image
//!   "X"`, and the Events `Pulling`, `Failed` and `BackOff` (pkg/kubelet/images/image_manager.go).
//! - Runs pods of the Flux controllers' images as real host processes (the Go binaries built
//!   by build.sh), with the pod's own args, so a controller's version and feature gates are the
//!   ones in its Deployment, and deleting the pod restarts the controller (see [`HostImages`]).
//! - Hands pods whose containers all use a probe image (alpine, busybox, alpine/git,
//!   nicolaka/netshoot) to the pod runtime when one runs ([`crate::kubelet`]: the twin's
//!   PodExec as a client of this apiserver), which runs them for real in network and mount
//!   namespaces and writes their status, Events and logs; ephemeral containers too. The agent
//!   still binds them and confirms their deletion.
//! - Reports the kubelet endpoint in `status.daemonEndpoints.kubeletEndpoint.Port` (the
//!   container-log server of [`crate::kubelet::LogServer`]) and InternalIP 127.0.0.1.
//! - Confirms graceful deletion: a pod with `deletionTimestamp` is stopped and deleted with
//!   grace period 0, as the kubelet does once its containers have stopped.
//!
//! Where it differs from a kubelet: containers other than the controllers and probe images
//! never run (no processes, no logs, no probes; ready at once); no restarts or CrashLoopBackOff; no resource
//! accounting or scheduling constraints; pod IPs are 10.244.0.N from a counter.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::proc::{Proc, Spec};

/// The one node's name.
pub const NODE_NAME: &str = "realcluster-node";

/// The kubelet's first image-pull back-off (pkg/kubelet/kubelet.go `backOffPeriod` 10 s):
/// how long a failed pull shows `ErrImagePull` before `ImagePullBackOff`.
pub const IMAGE_BACKOFF: Duration = Duration::from_secs(10);

/// Images the node can "pull": entries as in [`twin::workload::Registry`] (full references, a
/// repository with `:*` for any tag).
pub type Registry = twin::workload::Registry;

/// Rewrites a pod's container args for a host process.
pub type ArgRewrite = Arc<dyn Fn(&[String]) -> Vec<String> + Send + Sync>;

/// How a host-process image is run: binary path, args rewritten for this host, extra env.
#[derive(Clone)]
pub struct HostImage {
    /// The binary.
    pub program: PathBuf,
    /// Rewrites the pod's container args for the host (e.g. source-controller's storage
    /// addresses, which in a cluster name a Service).
    pub rewrite: ArgRewrite,
    /// Extra environment (KUBECONFIG, RUNTIME_NAMESPACE).
    pub env: Vec<(String, String)>,
}

/// Image reference (as written in a pod spec) → how to run it as a host process.
pub type HostImages = HashMap<String, HostImage>;

struct PodState {
    pull_failed_at: Option<Instant>,
    last_reason: String,
    written: Option<Value>,
    proc: Option<Proc>,
    ip: String,
}

/// The running agent; dropping it stops the host processes (the watch task ends with the
/// runtime that runs it).
pub struct NodeAgent {
    pods: Arc<Mutex<HashMap<String, PodState>>>,
    task: tokio::task::JoinHandle<()>,
    lease: tokio::task::JoinHandle<()>,
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        self.task.abort();
        self.lease.abort();
        if let Ok(mut pods) = self.pods.lock() {
            pods.clear();
        }
    }
}

impl NodeAgent {
    /// Registers the node and starts the agent on the current tokio runtime.
    /// Errors: the API errors of the Node create.
    /// `kubelet_port`: the container-log server's port (0: none). `probe_runtime`: a pod
    /// runtime serves probe-image pods, so the agent leaves their status to it. `logs`: where
    /// the host processes' log files are registered for the log server.
    pub async fn start(
        client: kube::Client,
        registry: Registry,
        host_images: HostImages,
        log_dir: PathBuf,
        kubelet_port: u16,
        probe_runtime: bool,
        logs: crate::kubelet::LogStore,
    ) -> Result<NodeAgent, kube::Error> {
        register_node(&client, kubelet_port).await?;
        let lease = tokio::spawn(renew_lease(client.clone(), kubelet_port));
        let pods: Arc<Mutex<HashMap<String, PodState>>> = Arc::default();
        let agent = Agent {
            client,
            registry,
            host_images: Arc::new(host_images),
            log_dir,
            pods: pods.clone(),
            next_ip: Arc::new(Mutex::new(2)),
            probe_runtime,
            logs,
        };
        let task = tokio::spawn(agent.run());
        Ok(NodeAgent { pods, task, lease })
    }

    /// Pids of the host processes now running, by `namespace/pod`.
    pub fn host_processes(&self) -> Vec<(String, u32)> {
        let pods = self.pods.lock().unwrap();
        let mut v: Vec<(String, u32)> = pods
            .iter()
            .filter_map(|(k, st)| st.proc.as_ref().and_then(Proc::pid).map(|p| (k.clone(), p)))
            .collect();
        v.sort();
        v
    }
}

async fn register_node(client: &kube::Client, kubelet_port: u16) -> Result<(), kube::Error> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE_NAME, "labels": {
            "kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
    });
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(node).map_err(kube::Error::SerdeError)?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e),
    }
    set_node_status(&nodes, kubelet_port).await
}

async fn set_node_status(
    nodes: &Api<k8s_openapi::api::core::v1::Node>,
    kubelet_port: u16,
) -> Result<(), kube::Error> {
    let now = now();
    let cap = json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    let status = json!({"status": {
        "capacity": cap, "allocatable": cap,
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": NODE_NAME}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "kubelet has sufficient memory available", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "kubelet has no disk pressure", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "kubelet has sufficient PID available", "lastHeartbeatTime": now, "lastTransitionTime": now},
        ],
        "nodeInfo": {"kubeletVersion": crate::bins::KUBE_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
            "containerRuntimeVersion": "realcluster-node-agent://0", "osImage": "cluster-loop realcluster", "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
    }});
    nodes
        .patch_status(NODE_NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

async fn renew_lease(client: kube::Client, kubelet_port: u16) {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
    loop {
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": NODE_NAME, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": NODE_NAME, "leaseDurationSeconds": 40, "renewTime": now_micro()}});
        let _ = leases
            .patch(
                NODE_NAME,
                &PatchParams::apply("realcluster-node-agent").force(),
                &Patch::Apply(&lease),
            )
            .await;
        let _ = set_node_status(&nodes, kubelet_port).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

#[derive(Clone)]
struct Agent {
    client: kube::Client,
    registry: Registry,
    host_images: Arc<HostImages>,
    log_dir: PathBuf,
    pods: Arc<Mutex<HashMap<String, PodState>>>,
    next_ip: Arc<Mutex<u32>>,
    probe_runtime: bool,
    logs: crate::kubelet::LogStore,
}

fn key(pod: &Value) -> String {
    format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    )
}

impl Agent {
    /// A new, empty directory for the pod process `name`'s temporary files,
    /// `<cluster dir>/pods/<name>/tmp` (beside the log dir; removed with the cluster).
    fn pod_tmp(&self, name: &str) -> Result<PathBuf, String> {
        let base = self.log_dir.parent().unwrap_or(&self.log_dir);
        let tmp = base.join("pods").join(name).join("tmp");
        std::fs::create_dir_all(&tmp)
            .map(|()| tmp.clone())
            .map_err(|e| format!("pod temp dir {}: {e}", tmp.display()))
    }

    async fn run(self) {
        let api: Api<Pod> = Api::all(self.client.clone());
        let mut cache: HashMap<String, Value> = HashMap::new();
        let stream = watcher(api, watcher::Config::default());
        futures::pin_mut!(stream);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                ev = stream.next() => {
                    let Some(ev) = ev else { break };
                    let Ok(ev) = ev else { tokio::time::sleep(Duration::from_millis(200)).await; continue };
                    match ev {
                        watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                            let v = serde_json::to_value(&p).unwrap_or_default();
                            let k = key(&v);
                            cache.insert(k, v.clone());
                            self.handle(&v).await;
                        }
                        watcher::Event::Delete(p) => {
                            let v = serde_json::to_value(&p).unwrap_or_default();
                            let k = key(&v);
                            cache.remove(&k);
                            // Stop its host process, if any; its log is gone with the pod.
                            self.pods.lock().unwrap().remove(&k);
                            self.logs.forget_pod(
                                v["metadata"]["namespace"].as_str().unwrap_or_default(),
                                v["metadata"]["name"].as_str().unwrap_or_default(),
                            );
                        }
                        watcher::Event::Init | watcher::Event::InitDone => {}
                    }
                }
                _ = tick.tick() => {
                    let all: Vec<Value> = cache.values().cloned().collect();
                    for v in all {
                        self.handle(&v).await;
                    }
                }
            }
        }
    }

    async fn handle(&self, pod: &Value) {
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        if pod["metadata"]["deletionTimestamp"].is_string() {
            self.pods.lock().unwrap().remove(&key(pod));
            let _ = api
                .delete(
                    name,
                    &DeleteParams {
                        grace_period_seconds: Some(0),
                        ..DeleteParams::default()
                    },
                )
                .await;
            return;
        }
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if node.is_empty() {
            let binding = json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME}});
            let _ = api
                .create_subresource::<Value, Value>(
                    "binding",
                    name,
                    &PostParams::default(),
                    &binding,
                )
                .await;
            return;
        }
        if node != NODE_NAME {
            return;
        }
        if self.probe_runtime && twin::podexec::is_probe_pod(pod) {
            return;
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return;
        }
        let (status, events) = self.kubelet_status(pod);
        let Some(status) = status else { return };
        if let Err(e) = api
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": status})),
            )
            .await
            && std::env::var_os("REALCLUSTER_DEBUG").is_some()
        {
            eprintln!("realcluster node agent: status of {ns}/{name}: {e}");
        }
        for (type_, reason, message) in events {
            self.event(pod, type_, reason, &message).await;
        }
    }

    /// The status to write (None when unchanged) and the events to record.
    fn kubelet_status(
        &self,
        pod: &Value,
    ) -> (Option<Value>, Vec<(&'static str, &'static str, String)>) {
        let k = key(pod);
        let uid = pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut pods = self.pods.lock().unwrap();
        let st = pods.entry(k.clone()).or_insert_with(|| {
            let mut n = self.next_ip.lock().unwrap();
            *n += 1;
            PodState {
                pull_failed_at: None,
                last_reason: String::new(),
                written: None,
                proc: None,
                ip: format!("10.244.{}.{}", *n / 250, *n % 250 + 2),
            }
        });
        let is_job = pod["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|a| a.iter().any(|r| r["kind"] == "Job"));
        let containers = pod["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let start = pod["status"]["startTime"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(now);
        let mut events = Vec::new();
        let mut statuses = Vec::new();
        let mut all_ok = true;
        let mut reason_now = String::from("ok");
        for c in &containers {
            let image = c["image"].as_str().unwrap_or_default();
            let cname = c["name"].as_str().unwrap_or_default();
            if let Some(host) = self.host_images.get(image) {
                if st.proc.as_mut().is_some_and(|p| p.exited().is_some()) {
                    st.proc = None;
                }
                if st.proc.is_none() {
                    let args: Vec<String> = c["args"]
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|x| x.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    let name = format!("{}-{}", k.replace('/', "_"), &uid[..uid.len().min(8)]);
                    let mut env: Vec<(OsString, OsString)> = host
                        .env
                        .iter()
                        .map(|(a, b)| (OsString::from(a), OsString::from(b)))
                        .collect();
                    // The pod's own /tmp, as the Flux Deployments mount an emptyDir there
                    // (kustomize-controller and source-controller config/manager/
                    // deployment.yaml, volume `temp`/`tmp`): Go's os.TempDir() reads TMPDIR.
                    // Never the host's shared /tmp: kustomize-controller v1.9.6 main.go
                    // purgeStaleTempDirs removes every `kustomization-*` directory in
                    // os.TempDir() when it starts, so one controller starting (another
                    // cluster, a restarted pod) deleted the artifact directories of runs in
                    // flight in every other cluster on the machine ("kustomize build failed:
                    // ... lstat /tmp/kustomization-N: no such file or directory"), and with a
                    // long interval the failed run was never retried.
                    match self.pod_tmp(&name) {
                        Ok(tmp) => env.push(("TMPDIR".into(), tmp.into_os_string())),
                        Err(e) => eprintln!("realcluster node agent: {e}"),
                    }
                    let spec = Spec {
                        name,
                        program: host.program.clone(),
                        args: (host.rewrite)(&args)
                            .into_iter()
                            .map(OsString::from)
                            .collect(),
                        env,
                    };
                    match Proc::start(&spec, &self.log_dir) {
                        Ok(p) => {
                            let (ns, pod) = k.split_once('/').unwrap_or_default();
                            self.logs.register_file(ns, pod, cname, p.log_path());
                            st.proc = Some(p);
                        }
                        Err(e) => eprintln!("realcluster node agent: {e}"),
                    }
                }
                statuses.push(json!({"name": cname, "image": image, "imageID": format!("{image}@sha256:{:0>64}", 0),
                    "ready": st.proc.is_some(), "started": st.proc.is_some(), "restartCount": 0,
                    "state": {"running": {"startedAt": start}}}));
                all_ok &= st.proc.is_some();
                continue;
            }
            if self.registry.can_pull(image) {
                let state = if is_job {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": start, "finishedAt": start}})
                } else {
                    json!({"running": {"startedAt": start}})
                };
                statuses.push(json!({"name": cname, "image": image,
                    "imageID": format!("{}@sha256:{:0>64}", twin::workload::normalize_image(image), 0),
                    "ready": !is_job, "started": !is_job, "restartCount": 0, "state": state}));
            } else {
                all_ok = false;
                let failed_at = *st.pull_failed_at.get_or_insert_with(Instant::now);
                let full = twin::workload::normalize_image(image);
                let (reason, message) = if failed_at.elapsed() >= IMAGE_BACKOFF {
                    (
                        "ImagePullBackOff",
                        format!("Back-off pulling image \"{image}\""),
                    )
                } else {
                    (
                        "ErrImagePull",
                        format!(
                            "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found"
                        ),
                    )
                };
                if st.last_reason != reason {
                    if reason == "ErrImagePull" {
                        events.push(("Normal", "Pulling", format!("Pulling image \"{image}\"")));
                        events.push((
                            "Warning",
                            "Failed",
                            format!("Failed to pull image \"{image}\": {message}"),
                        ));
                        events.push(("Warning", "Failed", "Error: ErrImagePull".to_owned()));
                    } else {
                        events.push(("Normal", "BackOff", message.clone()));
                        events.push(("Warning", "Failed", "Error: ImagePullBackOff".to_owned()));
                    }
                }
                reason_now = reason.to_owned();
                statuses.push(json!({"name": cname, "image": image, "imageID": "", "ready": false, "started": false,
                    "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}}}));
            }
        }
        st.last_reason = reason_now;
        if all_ok {
            st.pull_failed_at = None;
        }
        let ready = all_ok && !is_job;
        let phase = match (all_ok, is_job) {
            (true, true) => "Succeeded",
            (true, false) => "Running",
            _ => "Pending",
        };
        let tf = |b: bool| if b { "True" } else { "False" };
        let mut ready_cond =
            json!({"type": "Ready", "status": tf(ready), "lastTransitionTime": start});
        let mut cr_cond =
            json!({"type": "ContainersReady", "status": tf(ready), "lastTransitionTime": start});
        if !ready && !is_job {
            let names: Vec<&str> = containers
                .iter()
                .filter_map(|c| c["name"].as_str())
                .collect();
            let msg = format!("containers with unready status: [{}]", names.join(" "));
            for c in [&mut ready_cond, &mut cr_cond] {
                c["reason"] = json!("ContainersNotReady");
                c["message"] = json!(msg);
            }
        }
        if is_job && all_ok {
            for c in [&mut ready_cond, &mut cr_cond] {
                c["reason"] = json!("PodCompleted");
            }
        }
        let status = json!({
            "phase": phase,
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": st.ip, "podIPs": [{"ip": st.ip}],
            "startTime": start,
            // Set by the apiserver at create and immutable since (v1.36 validation).
            "qosClass": pod["status"]["qosClass"].as_str().unwrap_or("BestEffort"),
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": start},
                {"type": "Initialized", "status": "True", "lastTransitionTime": start},
                ready_cond, cr_cond,
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": start},
            ],
            "containerStatuses": statuses,
        });
        if st.written.as_ref() == Some(&status) {
            return (None, events);
        }
        st.written = Some(status.clone());
        (Some(status), events)
    }

    async fn event(&self, pod: &Value, type_: &str, reason: &str, message: &str) {
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), ns);
        let ev = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{}.", pod["metadata"]["name"].as_str().unwrap_or_default()), "namespace": ns},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns,
                "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"],
                "fieldPath": "spec.containers{*}"},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": "kubelet", "host": NODE_NAME},
            "firstTimestamp": now(), "lastTimestamp": now(), "count": 1,
            "reportingComponent": "kubelet", "reportingInstance": NODE_NAME,
        });
        if let Ok(ev) = serde_json::from_value(ev) {
            let _ = events.create(&PostParams::default(), &ev).await;
        }
    }
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn now_micro() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}
