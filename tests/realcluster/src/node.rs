//! Our node agent: the kubelet (and scheduler) half that cannot run here. Everything else in the
//! cluster is real; this is a client of the real kube-apiserver, like a kubelet.
//!
//! What it does, with the upstream behaviour it follows:
//! - Registers Node [`NODE_NAME`] (Ready, 8 CPU / 32 GiB / 110 pods) and renews its Lease in
//!   `kube-node-lease` every 10 s (kubelet `nodelease` controller, 40 s lease duration).
//! - Binds every pod without `spec.nodeName` to the node through `pods/binding` (what
//!   kube-scheduler does; there is one node and no resource accounting), except a pod meant
//!   for another node ([`meant_for_another_node`]: the real kubelet's, when a cluster runs it),
//!   which it neither binds nor runs.
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
//!   A process that exits is reported as the kubelet reports an exited container
//!   (kubelet_pods.go `convertToAPIContainerStatuses` and `getPhase`, kuberuntime_manager.go
//!   `doBackOff`): ready once it has logged [`READY_MARKER`] (the readiness probe's stand-in)
//!   and while it runs; `state.terminated` {exitCode, reason `Error` (non-zero) or `Completed`
//!   (0), startedAt, finishedAt, containerID}; restarted per `restartPolicy` (Always;
//!   OnFailure after a non-zero exit; Never not, the pod then Failed or Succeeded); the first
//!   exit restarts at once, each later one waits in `CrashLoopBackOff` with the kubelet's
//!   message `back-off 10s restarting failed container=NAME pod=POD_NS(UID)` and a `BackOff`
//!   Event, the back-off doubling per restart to 5 min ([`CRASH_LOOP_BACKOFF`],
//!   [`MAX_CRASH_LOOP_BACKOFF`], reset after [`CRASH_LOOP_RESET`]); `restartCount` is the
//!   restarts so far, `lastState.terminated` the run before; the container is not ready and the
//!   pod's Ready and ContainersReady conditions are False (`ContainersNotReady`, `containers
//!   with unready status: [NAME]`), so the real deployment controller counts the replica
//!   unavailable. The exited run's output is its log for `kubectl logs --previous`.
//! - Runs the containers of application images ([`AppImage`]; `python:*` with
//!   `ClusterOptions::python_image`, the host's python3) from their own spec: `command`,
//!   `args`, and only the environment the kubelet gives a container ([`pod_env`]: its `env`
//!   and the Service link variables, `REDIS_PORT=tcp://<ClusterIP>:6379` for a Service `redis`
//!   of the pod's namespace unless `enableServiceLinks: false`; pkg/kubelet/envvars and
//!   kubelet_pods.go `getServiceEnvVarMap`, read from a Service reflector as the kubelet's
//!   informer), with the host-process lifecycle above (exit, CrashLoopBackOff, logs); ready
//!   while running (no readiness probe).
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
//! Where it differs from a kubelet: containers other than the controllers, probe images and
//! app images never run (no processes, no logs, no probes; ready at once, so they never exit
//! or restart);
//! a host process has no liveness or readiness probe (ready while it runs), no OOMKilled (no
//! memory limit), and its restart follows within the agent's 500 ms resync ([`RESYNC`]) of the back-off's end;
//! no resource accounting or scheduling constraints; pod IPs are 10.244.0.N from a counter.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
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
    /// An application image run from the container's own spec ([`AppImage`]); `None` for the
    /// controllers, which run `program` with their image's env (`env`) and the pod's args.
    pub app: Option<AppImage>,
}

/// An application image whose containers run from their own spec, as a kubelet runs them:
/// the container's `command` (or `program` when it has none) and `args`, and only the
/// environment the kubelet gives it ([`pod_env`]): `PATH`, `HOSTNAME` and `HOME` as an image
/// sets them, the container's `env`, and the Service link variables
/// ([`cluster_loop::servicelinks`]). The host's own environment is not passed.
#[derive(Clone, Debug, Default)]
pub struct AppImage {
    /// The image's executables by the names a `command` may use (`python3`, `python`, also
    /// as `/usr/local/bin/python3`): what runs for each. A `command[0]` not here fails the
    /// start with runc's `exec: "X": executable file not found in $PATH` (RunContainerError).
    pub tools: HashMap<String, PathBuf>,
}

/// The image `python:*` (any tag, Docker Hub's official image): the host's python3
/// (`/usr/bin/python3`) for `python`, `python3` and `python3.N`, so an app written for it runs
/// for real; `None` when the host has no python3.
pub fn python_app_image() -> Option<HostImage> {
    let py = twin::podexec::host_tool("python3")?;
    let tools = ["python", "python3"]
        .into_iter()
        .map(|n| (n.to_owned(), py.clone()))
        .collect();
    Some(HostImage {
        program: py,
        rewrite: Arc::new(|a: &[String]| a.to_vec()),
        env: Vec::new(),
        app: Some(AppImage { tools }),
    })
}

/// Failure catalogue row 5's app, as the real-cluster test and `./demo` deploy it: Deployment
/// `api` in namespace `ns` on `python:3.12-slim` (run by [`python_app_image`]) whose program
/// reads `REDIS_HOST` and `REDIS_PORT` (default 6379) from the environment as a Python app
/// configured that way does, parses the port as an int, then serves (sleeps). Beside a Service
/// named `redis` in `ns`, the kubelet's `REDIS_PORT=tcp://<ClusterIP>:6379` makes it exit 1
/// with `ValueError: invalid literal for int() with base 10: 'tcp://...'`. `pod_spec`: lines
/// added to the pod spec, 6 spaces deep (e.g. `"      enableServiceLinks: false\n"`).
pub fn redis_client_app(ns: &str, pod_spec: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: {ns}
spec:
  replicas: 1
  progressDeadlineSeconds: 3600
  selector:
    matchLabels: {{app: api}}
  template:
    metadata:
      labels: {{app: api}}
    spec:
{pod_spec}      containers:
      - name: api
        image: python:3.12-slim
        env:
        - {{name: REDIS_HOST, value: redis}}
        command:
        - python3
        - -c
        - |
          import os, time
          host = os.environ.get('REDIS_HOST', 'localhost')
          port = int(os.environ.get('REDIS_PORT', '6379'))
          print(f'connecting to redis at {{host}}:{{port}}', flush=True)
          time.sleep(3600)
"
    )
}

/// A Service `redis` (port 6379, selector `app: redis`) in namespace `ns`: with it, every pod
/// of `ns` gets `REDIS_PORT=tcp://<its ClusterIP>:6379` unless `enableServiceLinks: false`.
pub fn redis_service(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: redis\n  namespace: {ns}\nspec:\n  selector: {{app: redis}}\n  ports:\n  - port: 6379\n"
    )
}

/// True when `pod` is meant for a node other than `node`: bound to it (`spec.nodeName`) or
/// selecting it by `spec.nodeSelector` `kubernetes.io/hostname` (e.g. the real kubelet's,
/// [`crate::realnode::REAL_NODE_NAME`]). The agent neither binds nor runs such a pod: a
/// selected one stays Pending, as with a scheduler that finds no other fitting node.
pub fn meant_for_another_node(pod: &Value, node: &str) -> bool {
    let bound = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    let selected = pod["spec"]["nodeSelector"]["kubernetes.io/hostname"]
        .as_str()
        .unwrap_or_default();
    (!bound.is_empty() && bound != node) || (!selected.is_empty() && selected != node)
}

/// The host image for `image`: by its exact reference, else by `REPOSITORY:*` (any tag, as
/// [`Registry`] entries are written).
pub fn host_image_for<'a>(images: &'a HostImages, image: &str) -> Option<&'a HostImage> {
    images.get(image).or_else(|| {
        let no_digest = image.split('@').next().unwrap_or(image);
        let repo = match no_digest.rfind(':') {
            Some(i) if !no_digest[i..].contains('/') => &no_digest[..i],
            _ => no_digest,
        };
        images.get(&format!("{repo}:*"))
    })
}

/// The environment the kubelet starts container `c` of `pod` with (kubelet_pods.go
/// `makeEnvironmentVariables`, rule in [`cluster_loop::servicelinks`]): the container's
/// `env` (literal values, `$(VAR)` expanded; `valueFrom` sources are not modelled and are left
/// out), then the Service link variables of the pod's namespace (unless
/// `enableServiceLinks: false`) and of the master Service `default/kubernetes`, each unless
/// declared. `services`: every Service of the cluster.
pub fn pod_env(pod: &Value, c: &Value, services: &[Value]) -> Vec<(String, String)> {
    use cluster_loop::servicelinks as sl;
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let vars = sl::pod_link_vars(ns, sl::enabled(&pod["spec"]), services);
    sl::container_env(c, &vars, &mut |_| None)
}

/// Image reference (as written in a pod spec) → how to run it as a host process.
pub type HostImages = HashMap<String, HostImage>;

struct PodState {
    pull_failed_at: Option<Instant>,
    last_reason: String,
    written: Option<Value>,
    /// Host-process containers by container name.
    host: HashMap<String, HostContainer>,
    /// The Ready condition as last written and when it last changed.
    ready: Option<(bool, String)>,
    ip: String,
}

/// One host-process container of a pod across its restarts, as the kubelet keeps it
/// (the runtime's containers of that name: the latest one and the one before it).
#[derive(Default)]
struct HostContainer {
    /// The running process of the latest container, if it runs.
    proc: Option<Proc>,
    /// `restartCount`: the attempt number of the latest container (0 for the first),
    /// as containerd's attempt annotation gives it to kubelet_pods.go
    /// `convertToAPIContainerStatuses` (`RestartCount: int32(cs.RestartCount)`).
    attempt: u32,
    /// `startedAt` and `containerID` of the latest container.
    started_at: String,
    container_id: String,
    /// The latest container once it has exited and until it is restarted: its
    /// `terminated` state, when it exited and its exit code.
    exited: Option<(Value, Instant, i32)>,
    /// `lastState.terminated` while the latest container runs: the one before it.
    last: Option<Value>,
    /// The crash-loop back-off entry (client-go flowcontrol.Backoff `backoffEntry`):
    /// the current back-off and when it was last moved (`lastUpdate`).
    backoff: Option<(Duration, Instant)>,
    /// The exit (attempt) whose back-off Event was recorded, so each back-off is one Event.
    backoff_event: Option<u32>,
    /// Why the latest start failed (`RunContainerError`), if it did.
    start_error: Option<String>,
    /// The running process has passed its readiness check ([`READY_MARKER`] in its log).
    ready: bool,
}

/// What a Flux controller logs just before `mgr.Start`, which starts the health probe server
/// whose `/readyz` the Deployments' readinessProbe asks (`setupLog.Info("starting manager")`
/// in main.go of kustomize-controller v1.9.6 and v1.7.3, source-controller v1.9.6,
/// image-reflector-controller v1.2.0, image-automation-controller v1.2.0, helm-controller
/// v1.6.4). The agent turns the controllers' health listeners off (they share the host), so
/// this line in the process's output stands in for the probe: a host-process container is
/// ready once it has logged it and while it runs. A controller that exits before it (a flag it
/// refuses) is never ready, as with the real probe; one run with `--log-level=error` never
/// logs it and so never reads ready here.
pub const READY_MARKER: &str = "starting manager";

/// The readiness stand-in of the other controller-runtime managers run here (Envoy Gateway
/// v1.9.1, MetalLB v0.15.2's controller), which do not log [`READY_MARKER`]: controller-runtime's
/// `Starting workers` line (pkg/internal/controller/controller.go), logged once a controller's
/// caches have synced and its workers start.
pub const READY_MARKER_WORKERS: &str = "Starting workers";

/// How often the agent looks at every pod again (host processes' exits and readiness, the
/// end of a back-off, image pull back-off).
pub const RESYNC: Duration = Duration::from_millis(500);

/// The kubelet's first crash-loop back-off (pkg/kubelet/kubelet.go `initialCrashLoopBackOff`
/// 10 s), doubled on each restart (client-go util/flowcontrol/backoff.go `Next`).
pub const CRASH_LOOP_BACKOFF: Duration = Duration::from_secs(10);

/// The cap of the crash-loop back-off (pkg/kubelet/kubelet.go `MaxCrashLoopBackOff` =
/// kubelet config v1beta1 `MaxContainerBackOff`, 300 s).
pub const MAX_CRASH_LOOP_BACKOFF: Duration = Duration::from_secs(300);

/// After this long between the last back-off step and a new exit the back-off starts again
/// at [`CRASH_LOOP_BACKOFF`] (pkg/kubelet/kubelet.go: `crashLoopBackOff.HasExpiredFunc`,
/// `eventTime.Sub(lastUpdate) > 600*time.Second`).
pub const CRASH_LOOP_RESET: Duration = Duration::from_secs(600);

/// A Go `time.Duration` as `%s` prints it for whole seconds (`10s`, `1m20s`, `5m0s`): the
/// back-off in kubelet's `back-off 20s restarting failed container=...` message.
pub fn go_seconds(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, sec) => format!("{h}h{m}m{sec}s"),
    }
}

/// The next back-off after an exit at `exited_at` (client-go flowcontrol.Backoff `Next` with
/// the kubelet's settings): the first, or the first after [`CRASH_LOOP_RESET`] without a
/// step, is [`CRASH_LOOP_BACKOFF`]; each later one doubles, capped at
/// [`MAX_CRASH_LOOP_BACKOFF`]. No jitter (the kubelet's back-off has none).
fn next_backoff(entry: Option<(Duration, Instant)>, exited_at: Instant) -> Duration {
    match entry {
        Some((b, last)) if exited_at.saturating_duration_since(last) <= CRASH_LOOP_RESET => {
            (b * 2).min(MAX_CRASH_LOOP_BACKOFF)
        }
        _ => CRASH_LOOP_BACKOFF,
    }
}

/// Whether a container that exited at `exited_at` is still in its back-off (client-go
/// flowcontrol.Backoff `IsInBackOffSince(key, finishedAt)`, which kuberuntime_manager.go
/// `doBackOff` asks before every restart).
fn in_backoff(entry: Option<(Duration, Instant)>, exited_at: Instant) -> Option<Duration> {
    let (b, last) = entry?;
    if exited_at.saturating_duration_since(last) > CRASH_LOOP_RESET {
        return None;
    }
    (exited_at.elapsed() < b).then_some(b)
}

/// Whether a container that exited with `code` is restarted under the pod's `restartPolicy`
/// (pkg/kubelet/container/helpers.go `ShouldContainerBeRestarted`: Always; OnFailure after a
/// non-zero exit; Never not).
fn restarts(policy: &str, code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => code != 0,
        _ => true,
    }
}

/// The `terminated` state of a container that exited with `status` (CRI via containerd:
/// reason `Completed` for exit code 0, `Error` otherwise; a signal `N` is exit code 128+N).
fn terminated(
    status: std::process::ExitStatus,
    started_at: &str,
    container_id: &str,
) -> (Value, i32) {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(9));
    let reason = if code == 0 { "Completed" } else { "Error" };
    (
        json!({"exitCode": code, "reason": reason, "startedAt": started_at,
            "finishedAt": now(), "containerID": container_id}),
        code,
    )
}

/// The running agent; dropping it stops the host processes (the watch task ends with the
/// runtime that runs it).
pub struct NodeAgent {
    pods: Arc<Mutex<HashMap<String, PodState>>>,
    task: tokio::task::JoinHandle<()>,
    lease: tokio::task::JoinHandle<()>,
    svc_task: tokio::task::JoinHandle<()>,
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        self.task.abort();
        self.lease.abort();
        self.svc_task.abort();
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
        // The kubelet's Service informer (pkg/kubelet/kubelet.go `serviceLister`): the
        // Service link variables come from it. Waited for before any container starts, as
        // the kubelet waits for its service informer to sync before it runs pods
        // (kubelet.go `serviceHasSynced`).
        let (services, writer) = kube::runtime::reflector::store::<Service>();
        let svc_stream = kube::runtime::reflector::reflector(
            writer,
            watcher(
                Api::<Service>::all(client.clone()),
                watcher::Config::default(),
            ),
        );
        let svc_task = tokio::spawn(svc_stream.for_each(|_| std::future::ready(())));
        let _ = tokio::time::timeout(Duration::from_secs(60), services.wait_until_ready()).await;
        let agent = Agent {
            client,
            registry,
            host_images: Arc::new(host_images),
            log_dir,
            pods: pods.clone(),
            next_ip: Arc::new(Mutex::new(2)),
            probe_runtime,
            logs,
            services,
        };
        let task = tokio::spawn(agent.run());
        Ok(NodeAgent {
            pods,
            task,
            lease,
            svc_task,
        })
    }

    /// Pids of the host processes now running, by `namespace/pod`.
    pub fn host_processes(&self) -> Vec<(String, u32)> {
        let pods = self.pods.lock().unwrap();
        let mut v: Vec<(String, u32)> = pods
            .iter()
            .flat_map(|(k, st)| {
                st.host
                    .values()
                    .filter_map(|h| h.proc.as_ref().and_then(Proc::pid))
                    .map(|p| (k.clone(), p))
            })
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
    /// Every Service of the cluster (a reflector, as the kubelet's service informer), for
    /// the Service link variables.
    services: kube::runtime::reflector::Store<Service>,
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
        // The resync: exits, back-off ends and readiness are seen within this.
        let mut tick = tokio::time::interval(RESYNC);
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
        if meant_for_another_node(pod, NODE_NAME) {
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
        let (pns, pname) = k.split_once('/').unwrap_or_default();
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
                host: HashMap::new(),
                ready: None,
                ip: format!("10.244.{}.{}", *n / 250, *n % 250 + 2),
            }
        });
        let is_job = pod["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|a| a.iter().any(|r| r["kind"] == "Job"));
        // The pod's restartPolicy (Always for a Deployment's pods, the apiserver's default).
        let policy = pod["spec"]["restartPolicy"].as_str().unwrap_or("Always");
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
        let mut pulls_ok = true;
        let mut reason_now = String::from("ok");
        // kubelet_pods.go getPhase counters.
        let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
        let mut unready: Vec<&str> = Vec::new();
        for c in &containers {
            let image = c["image"].as_str().unwrap_or_default();
            let cname = c["name"].as_str().unwrap_or_default();
            if let Some(host) = host_image_for(&self.host_images, image) {
                let hc = st.host.entry(cname.to_owned()).or_default();
                // The latest container's process ended (what the kubelet's PLEG reports as
                // ContainerDied): it is `terminated` until restarted.
                if let Some(p) = hc.proc.as_mut()
                    && let Some(status) = p.exited()
                {
                    let (term, code) = terminated(status, &hc.started_at, &hc.container_id);
                    hc.proc = None;
                    hc.exited = Some((term, Instant::now(), code));
                    // A container that will be restarted shows this one as lastState (its
                    // log is then `--previous`); one that will not stays `terminated`.
                    self.logs
                        .container_exited(pns, pname, cname, restarts(policy, code));
                }
                // kuberuntime_manager.go computePodActions/doBackOff: a container that is not
                // running is started (the first time), or restarted per restartPolicy
                // (kubecontainer.ShouldContainerBeRestarted: Always; OnFailure after a non-zero
                // exit; Never not), unless it is in its crash-loop back-off.
                let mut wait: Option<(&'static str, String)> = None;
                if hc.proc.is_none() {
                    let restart = hc
                        .exited
                        .as_ref()
                        .is_none_or(|(_, _, code)| restarts(policy, *code));
                    let backoff = hc
                        .exited
                        .as_ref()
                        .and_then(|(_, at, _)| in_backoff(hc.backoff, *at));
                    if restart && let Some(b) = backoff {
                        // doBackOff: the waiting reason is kubecontainer.ErrCrashLoopBackOff,
                        // the message its error, and a BackOff Event (one per back-off here;
                        // the kubelet records one per sync, which the recorder aggregates).
                        let pod_desc = format!("{pname}_{pns}({uid})");
                        wait = Some((
                            "CrashLoopBackOff",
                            format!(
                                "back-off {} restarting failed container={cname} pod={pod_desc}",
                                go_seconds(b)
                            ),
                        ));
                        if hc.backoff_event != Some(hc.attempt) {
                            hc.backoff_event = Some(hc.attempt);
                            events.push((
                                "Warning",
                                "BackOff",
                                format!(
                                    "Back-off restarting failed container {cname} in pod {pod_desc}"
                                ),
                            ));
                        }
                    } else if restart {
                        let base = format!("{}-{}", k.replace('/', "_"), &uid[..uid.len().min(8)]);
                        match self.start_host(
                            host,
                            pod,
                            c,
                            &base,
                            hc.attempt + u32::from(hc.exited.is_some()),
                        ) {
                            Ok(p) => {
                                if let Some((term, at, _)) = hc.exited.take() {
                                    // doBackOff's `backOff.Next(key, finishedAt)` before the
                                    // restart; the exited container becomes lastState.
                                    hc.backoff =
                                        Some((next_backoff(hc.backoff, at), Instant::now()));
                                    hc.last = Some(term);
                                    hc.attempt += 1;
                                }
                                hc.started_at = now();
                                hc.container_id = format!(
                                    "containerd://{:064x}",
                                    std::time::SystemTime::now()
                                        .duration_since(std::time::UNIX_EPOCH)
                                        .unwrap_or_default()
                                        .as_nanos()
                                );
                                self.logs.register_file(pns, pname, cname, p.log_path());
                                hc.proc = Some(p);
                                hc.start_error = None;
                                hc.ready = false;
                                // kuberuntime_container.go startContainer and
                                // images/image_manager.go (v1.36 wording).
                                events.push((
                                    "Normal",
                                    "Pulled",
                                    format!(
                                        "Container image \"{image}\" already present on machine"
                                    ),
                                ));
                                events.push(("Normal", "Created", "Container created".to_owned()));
                                events.push(("Normal", "Started", "Container started".to_owned()));
                            }
                            Err(e) => {
                                let e = e.to_string();
                                if hc.start_error.as_deref() != Some(e.as_str()) {
                                    eprintln!("realcluster node agent: {e}");
                                }
                                hc.start_error = Some(e);
                            }
                        }
                    }
                    if hc.proc.is_none()
                        && wait.is_none()
                        && let Some(e) = &hc.start_error
                    {
                        wait = Some(("RunContainerError", e.clone()));
                    }
                }
                let term_state = |t: &Option<Value>| match t {
                    Some(t) => json!({"terminated": t}),
                    None => json!({}),
                };
                let (state, last) = if hc.proc.is_some() {
                    (
                        json!({"running": {"startedAt": hc.started_at}}),
                        term_state(&hc.last),
                    )
                } else if let Some((reason, message)) = wait {
                    // kubelet_pods.go convertToAPIContainerStatuses: a container to be
                    // restarted is Waiting with the start failure's reason, and its
                    // terminated state moves to lastState.
                    let last = match &hc.exited {
                        Some((t, _, _)) => json!({"terminated": t}),
                        None => term_state(&hc.last),
                    };
                    (
                        json!({"waiting": {"reason": reason, "message": message}}),
                        last,
                    )
                } else if let Some((t, _, _)) = &hc.exited {
                    (json!({"terminated": t}), term_state(&hc.last))
                } else {
                    (
                        json!({"waiting": {"reason": "ContainerCreating"}}),
                        json!({}),
                    )
                };
                let is_running = hc.proc.is_some();
                if host.app.is_some() {
                    // An application container has no readiness probe here: ready while it
                    // runs (kubelet prober: no readinessProbe means ready once started).
                    hc.ready = hc.proc.is_some();
                } else if let Some(p) = hc.proc.as_ref().filter(|_| !hc.ready) {
                    hc.ready = std::fs::read(p.log_path()).is_ok_and(|log| {
                        [READY_MARKER, READY_MARKER_WORKERS]
                            .iter()
                            .any(|m| log.windows(m.len()).any(|w| w == m.as_bytes()))
                    });
                }
                let is_ready = is_running && hc.ready;
                match (&state["terminated"], &last["terminated"]) {
                    (t, _) if t.is_object() => {
                        stopped += 1;
                        if t["exitCode"] == 0 {
                            succeeded += 1;
                        }
                    }
                    _ if is_running => running += 1,
                    (_, l) if l.is_object() => stopped += 1,
                    _ => waiting += 1,
                }
                if !is_ready {
                    unready.push(cname);
                }
                let mut cs = json!({"name": cname, "image": image,
                    "imageID": format!("{image}@sha256:{:0>64}", 0),
                    "ready": is_ready, "started": is_running, "restartCount": hc.attempt,
                    "state": state, "lastState": last});
                if !hc.container_id.is_empty() {
                    cs["containerID"] = json!(hc.container_id);
                }
                statuses.push(cs);
                continue;
            }
            if self.registry.can_pull(image) {
                let state = if is_job {
                    stopped += 1;
                    succeeded += 1;
                    unready.push(cname);
                    json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": start, "finishedAt": start}})
                } else {
                    running += 1;
                    json!({"running": {"startedAt": start}})
                };
                statuses.push(json!({"name": cname, "image": image,
                    "imageID": format!("{}@sha256:{:0>64}", twin::workload::normalize_image(image), 0),
                    "ready": !is_job, "started": !is_job, "restartCount": 0, "state": state}));
            } else {
                pulls_ok = false;
                waiting += 1;
                unready.push(cname);
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
        if pulls_ok {
            st.pull_failed_at = None;
        }
        // kubelet_pods.go getPhase (regular containers, no init containers here).
        let phase = if waiting > 0 {
            "Pending"
        } else if running > 0 {
            "Running"
        } else if stopped > 0 {
            match policy {
                "Always" => "Running",
                _ if stopped == succeeded => "Succeeded",
                "Never" => "Failed",
                _ => "Running",
            }
        } else {
            "Pending"
        };
        let terminal = phase == "Succeeded" || phase == "Failed";
        // pkg/kubelet/status/generate.go GenerateContainersReadyCondition /
        // GeneratePodReadyCondition: not ready while any container is not ready, naming them
        // ("containers with unready status: [manager]"); a pod that has completed reads
        // PodCompleted.
        let ready = unready.is_empty() && !terminal;
        let changed_at = match &st.ready {
            Some((r, at)) if *r == ready => at.clone(),
            _ => {
                let at = if st.ready.is_none() {
                    start.clone()
                } else {
                    now()
                };
                st.ready = Some((ready, at.clone()));
                at
            }
        };
        let tf = |b: bool| if b { "True" } else { "False" };
        let mut ready_cond =
            json!({"type": "Ready", "status": tf(ready), "lastTransitionTime": changed_at});
        let mut cr_cond = json!({"type": "ContainersReady", "status": tf(ready), "lastTransitionTime": changed_at});
        if terminal && phase == "Succeeded" {
            for c in [&mut ready_cond, &mut cr_cond] {
                c["reason"] = json!("PodCompleted");
            }
        } else if !ready {
            let msg = format!("containers with unready status: [{}]", unready.join(" "));
            for c in [&mut ready_cond, &mut cr_cond] {
                c["reason"] = json!("ContainersNotReady");
                c["message"] = json!(msg);
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

    /// Starts the host process of container `c` (image `host`) of pod `pod` (its name; in the
    /// process's env as `REALCLUSTER_POD_NAME`), whose processes are
    /// named `base`, for its `attempt`-th run (log file `<base>.log`, then `<base>-<attempt>.log`,
    /// so the previous run's log stays for `kubectl logs --previous`).
    fn start_host(
        &self,
        host: &HostImage,
        pod_obj: &Value,
        c: &Value,
        base: &str,
        attempt: u32,
    ) -> Result<Proc, crate::Error> {
        let pod = pod_obj["metadata"]["name"].as_str().unwrap_or_default();
        let name = if attempt == 0 {
            base.to_owned()
        } else {
            format!("{base}-{attempt}")
        };
        if let Some(app) = &host.app {
            let spec = self.app_spec(app, host, pod_obj, c, name)?;
            return Proc::start(&spec, &self.log_dir);
        }
        let args: Vec<String> = c["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let mut env: Vec<(OsString, OsString)> = host
            .env
            .iter()
            .map(|(a, b)| (OsString::from(a), OsString::from(b)))
            .collect();
        // The pod's own /tmp, as the Flux Deployments mount an emptyDir there
        // (kustomize-controller and source-controller config/manager/deployment.yaml, volume
        // `temp`/`tmp`): Go's os.TempDir() reads TMPDIR. An emptyDir lives as long as the pod,
        // so a restarted container gets the same one. Never the host's shared /tmp:
        // kustomize-controller v1.9.6 main.go purgeStaleTempDirs removes every
        // `kustomization-*` directory in os.TempDir() when it starts, so one controller
        // starting (another cluster, a restarted pod) deleted the artifact directories of runs
        // in flight in every other cluster on the machine ("kustomize build failed: ... lstat
        // /tmp/kustomization-N: no such file or directory"), and with a long interval the
        // failed run was never retried.
        // The pod's name, for a wrapper that makes it the host name (a pod's host name is its
        // name: controller-runtime's leader-election identity starts with it).
        env.push(("REALCLUSTER_POD_NAME".into(), pod.into()));
        match self.pod_tmp(base) {
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
        Proc::start(&spec, &self.log_dir)
    }

    /// The process of an application container ([`AppImage`]): `env -i` with the kubelet's
    /// environment ([`pod_env`] and the image's `PATH`, `HOSTNAME`, `HOME`), then the program
    /// its `command[0]` names (the image's default, `host.program`, without a command) with
    /// the rest of `command` and `args`. Errors: a `command[0]` the image does not have, with
    /// the runtime's message (the kubelet's RunContainerError).
    fn app_spec(
        &self,
        app: &AppImage,
        host: &HostImage,
        pod: &Value,
        c: &Value,
        name: String,
    ) -> Result<Spec, crate::Error> {
        let strs = |k: &str| -> Vec<String> {
            c[k].as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        };
        let (command, args) = (strs("command"), strs("args"));
        let (program, mut argv) = match command.split_first() {
            None => (host.program.clone(), Vec::new()),
            Some((first, rest)) => {
                let base = first.rsplit('/').next().unwrap_or(first);
                let tool = app.tools.get(base).or_else(|| {
                    // python3.N names the same interpreter.
                    base.strip_prefix("python3.")
                        .filter(|v| v.chars().all(|ch| ch.is_ascii_digit()))
                        .and_then(|_| app.tools.get("python3"))
                });
                let Some(tool) = tool else {
                    return Err(crate::Error::Setup(format!(
                        "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: exec: \"{first}\": executable file not found in $PATH: unknown"
                    )));
                };
                (tool.clone(), rest.to_vec())
            }
        };
        argv.extend(args);
        let services: Vec<Value> = self
            .services
            .state()
            .iter()
            .filter_map(|s| serde_json::to_value(s.as_ref()).ok())
            .collect();
        let mut env = vec![
            (
                "PATH".to_owned(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            ),
            (
                "HOSTNAME".to_owned(),
                pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            ("HOME".to_owned(), "/root".to_owned()),
        ];
        for (k, v) in pod_env(pod, c, &services) {
            env.retain(|(n, _)| *n != k);
            env.push((k, v));
        }
        // env(1): `-i --`, then the NAME=VALUE assignments, then the program (a path without
        // `=`) and its arguments.
        let mut all: Vec<OsString> = vec!["-i".into(), "--".into()];
        all.extend(
            env.into_iter()
                .map(|(k, v)| OsString::from(format!("{k}={v}"))),
        );
        all.push(program.into_os_string());
        all.extend(argv.into_iter().map(OsString::from));
        Ok(Spec {
            name,
            program: PathBuf::from("env"),
            args: all,
            env: Vec::new(),
        })
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_pod_bound_to_or_selecting_another_node_is_not_the_agents() {
        let other = crate::realnode::REAL_NODE_NAME;
        let agent = super::NODE_NAME;
        let pod = |spec: serde_json::Value| json!({"spec": spec});
        assert!(super::meant_for_another_node(
            &pod(json!({"nodeName": other})),
            agent
        ));
        assert!(super::meant_for_another_node(
            &pod(json!({"nodeSelector": {"kubernetes.io/hostname": other}})),
            agent
        ));
        assert!(!super::meant_for_another_node(&pod(json!({})), agent));
        assert!(!super::meant_for_another_node(
            &pod(json!({"nodeName": agent})),
            agent
        ));
        assert!(!super::meant_for_another_node(
            &pod(json!({"nodeSelector": {"kubernetes.io/hostname": agent, "disk": "ssd"}})),
            agent
        ));
    }
}
