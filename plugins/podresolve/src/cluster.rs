//! Cluster wiring: read the cluster's DNS configuration, create the probe, watch it to the
//! end (one WATCH request from resourceVersion "0": no polling), read its log, delete it.
//!
//! Requests for a single-host run without `--from`: GET ConfigMap kube-system/coredns, GET
//! ConfigMap kube-system/node-local-dns, GET Service kube-system/kube-dns, POST the Job,
//! WATCH pods by run label, GET pods/log, DELETE the Job = 7. `--from deploy/X` adds GET
//! Deployment, LIST pods, PATCH pods/ephemeralcontainers (and drops the DELETE when the
//! ephemeral path works) = at most 10.
//!
//! Cleanup is guaranteed on success, failure, timeout, Ctrl-C (SIGINT) and SIGTERM: once a
//! create was attempted, a DELETE by name (propagationPolicy Background, so the Job's pod
//! goes too) always follows. SIGKILL is covered by the cluster: activeDeadlineSeconds stops
//! the pod and ttlSecondsAfterFinished removes the Job; `--cleanup` sweeps leftovers by
//! the `app.kubernetes.io/managed-by=kubectl-podresolve` label.

use crate::probe::{Carrier, MANAGED_BY, ProbeOptions, SourcePod};
use crate::report::{ClusterDns, ProbeInfo};
use cluster_loop::cli::Connection;
use cluster_loop::error::{Error, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, ContainerStatus, Pod, Service};
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams, PropagationPolicy,
    WatchEvent, WatchParams,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Counts API requests made by this run (reported as `probe.apiRequests`).
#[derive(Debug, Default)]
pub struct RequestCounter(AtomicU32);

impl RequestCounter {
    fn hit(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// Requests so far.
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

fn is_status(e: &kube::Error, codes: &[u16]) -> bool {
    matches!(e, kube::Error::Api(s) if codes.contains(&s.code))
}

fn api_err(conn: &Connection, e: kube::Error, verb: &str, url: &str, name: &str) -> Error {
    Error::from_kube(e, conn.ctx().verb(verb).name(name).with_resource_url(url))
}

/// Read kube-system/coredns (`Corefile`), kube-system/node-local-dns and the kube-dns
/// Service. Absent or forbidden objects are not errors: the report says what is missing.
pub async fn read_cluster_dns(conn: &Connection, n: &RequestCounter) -> ClusterDns {
    let cms: Api<ConfigMap> = Api::namespaced(conn.client.clone(), "kube-system");
    let svcs: Api<Service> = Api::namespaced(conn.client.clone(), "kube-system");
    n.hit();
    n.hit();
    n.hit();
    let (coredns, nodelocal, kubedns) = tokio::join!(
        cms.get_opt("coredns"),
        cms.get_opt("node-local-dns"),
        svcs.get_opt("kube-dns")
    );
    let corefile = match coredns {
        Ok(Some(cm)) => cm
            .data
            .and_then(|d| d.get("Corefile").cloned())
            .map(|t| crate::corefile::Corefile::parse(&t).map_err(|e| e.to_string())),
        Ok(None) => None,
        Err(e) => Some(Err(format!(
            "cannot read ConfigMap kube-system/coredns: {e}"
        ))),
    };
    let nodelocal_corefile = match nodelocal {
        Ok(Some(cm)) => cm.data.and_then(|d| d.get("Corefile").cloned()),
        _ => None,
    };
    let mut kube_dns_ips = Vec::new();
    if let Ok(Some(svc)) = kubedns
        && let Some(spec) = svc.spec
    {
        if let Some(ips) = spec.cluster_ips {
            kube_dns_ips.extend(ips);
        } else if let Some(ip) = spec.cluster_ip {
            kube_dns_ips.push(ip);
        }
    }
    ClusterDns {
        corefile,
        kube_dns_ips,
        nodelocal_corefile,
    }
}

/// Resolve `--from pod/X|deploy/X` to one running pod.
///
/// Errors: usage error when the Deployment has no running pod; API errors as exit 3.
pub async fn resolve_from(
    conn: &Connection,
    target: &cluster_loop::refs::ResourceRef,
    namespace: &str,
    n: &RequestCounter,
) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), namespace);
    match target.kind {
        cluster_loop::refs::Kind::Deployment => {
            let deps: Api<Deployment> = Api::namespaced(conn.client.clone(), namespace);
            n.hit();
            let d = deps
                .get(&target.name)
                .await
                .map_err(|e| api_err(conn, e, "get", deps.resource_url(), &target.name))?;
            let sel = d
                .spec
                .and_then(|s| s.selector.match_labels)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            if sel.is_empty() {
                return Err(Error::usage(format!(
                    "deploy/{} in {namespace} has no matchLabels selector: use --from pod/NAME",
                    target.name
                )));
            }
            n.hit();
            let list = pods
                .list(&ListParams::default().labels(&sel))
                .await
                .map_err(|e| api_err(conn, e, "list", pods.resource_url(), ""))?;
            let mut running: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .collect();
            running.sort_by_key(|p| p.metadata.name.clone());
            running.into_iter().next().ok_or_else(|| {
                Error::usage(format!(
                    "deploy/{} in {namespace} has no Running pod (selector {sel}): nothing to resolve from",
                    target.name
                ))
            })
        }
        _ => {
            n.hit();
            pods.get(&target.name)
                .await
                .map_err(|e| api_err(conn, e, "get", pods.resource_url(), &target.name))
        }
    }
}

/// Outcome of trying the ephemeral-container path.
pub enum Ephemeral {
    /// Attached: container name in pod.
    Attached,
    /// Not allowed (403), not supported (404) or refused (422): the reason, for the
    /// fallback message.
    Refused(String),
}

/// PATCH pods/ephemeralcontainers (strategic merge) adding the probe.
pub async fn attach_ephemeral(
    conn: &Connection,
    pod: &Pod,
    opts: &ProbeOptions,
    n: &RequestCounter,
) -> Result<Ephemeral> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), &ns);
    let pp = PatchParams {
        field_manager: Some(crate::probe::FIELD_MANAGER.into()),
        ..Default::default()
    };
    n.hit();
    match pods
        .patch_ephemeral_containers(&name, &pp, &Patch::Strategic(opts.ephemeral_patch()))
        .await
    {
        Ok(_) => Ok(Ephemeral::Attached),
        Err(kube::Error::Api(s)) if [403, 404, 405, 422].contains(&s.code) => Ok(
            Ephemeral::Refused(format!("{} {}: {}", s.code, s.reason, s.message)),
        ),
        Err(e) => Err(api_err(
            conn,
            e,
            "patch",
            &format!("{}/{name}/ephemeralcontainers", pods.resource_url()),
            &name,
        )),
    }
}

/// How the watched probe ended.
#[derive(Debug)]
pub struct Finished {
    /// The pod that ran the probe.
    pub pod: String,
    /// Its node.
    pub node: Option<String>,
    /// Container exit code when known.
    pub exit_code: Option<i32>,
    /// Pod phase / reason when it failed (e.g. DeadlineExceeded).
    pub failure: Option<String>,
}

fn container_state<'a>(
    pod: &'a Pod,
    container: &str,
    ephemeral: bool,
) -> Option<&'a ContainerStatus> {
    let st = pod.status.as_ref()?;
    let list = if ephemeral {
        st.ephemeral_container_statuses.as_ref()
    } else {
        st.container_statuses.as_ref()
    }?;
    list.iter().find(|c| c.name == container)
}

/// Kubelet waiting reasons that mean the probe will never start (kubelet
/// pkg/kubelet/images: ErrImagePull, ImagePullBackOff, InvalidImageName, ErrImageNeverPull;
/// kuberuntime: CreateContainerConfigError, CreateContainerError).
pub const FATAL_WAITING: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// Judge one pod version: Some(Ok) finished, Some(Err) will never finish, None keep waiting.
pub fn judge(
    pod: &Pod,
    container: &str,
    ephemeral: bool,
) -> Option<std::result::Result<Finished, String>> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    if let Some(cs) = container_state(pod, container, ephemeral)
        && let Some(state) = &cs.state
    {
        if let Some(t) = &state.terminated {
            return Some(Ok(Finished {
                pod: name,
                node,
                exit_code: Some(t.exit_code),
                failure: t.reason.clone().filter(|_| t.exit_code != 0),
            }));
        }
        if let Some(w) = &state.waiting
            && let Some(reason) = w.reason.as_deref()
            && FATAL_WAITING.contains(&reason)
        {
            return Some(Err(format!(
                "the probe container cannot start: {reason}{} (image {})",
                w.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default(),
                cs.image
            )));
        }
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if !ephemeral && matches!(phase, Some("Succeeded") | Some("Failed")) {
        let reason = pod.status.as_ref().and_then(|s| s.reason.clone());
        return Some(Ok(Finished {
            pod: name,
            node,
            exit_code: None,
            failure: (phase == Some("Failed")).then(|| reason.unwrap_or_else(|| "Failed".into())),
        }));
    }
    None
}

/// What to watch: where, which pods, which container.
pub struct ProbeWatch {
    /// Namespace of the probe pod.
    pub namespace: String,
    /// Pods of the run, or one pod by name.
    pub target: WatchTarget,
    /// Container to judge (`probe`, or the ephemeral container's name).
    pub container: String,
    /// Judge `ephemeralContainerStatuses` instead of `containerStatuses`.
    pub ephemeral: bool,
}

/// What the watch is keyed on.
pub enum WatchTarget {
    /// Pods of this run (`RUN_LABEL=id`): Job or bare Pod carriers.
    RunLabel(String),
    /// One pod by name (ephemeral container).
    PodName(String),
}

/// Watch until the probe terminates, `deadline` passes, or a fatal state is seen.
/// One WATCH request with resourceVersion "0" (the server first replays the current
/// objects as ADDED events).
pub async fn watch_probe(
    conn: &Connection,
    w: &ProbeWatch,
    deadline: tokio::time::Instant,
    progress: &cluster_loop::wait::Progress,
    n: &RequestCounter,
) -> Result<Finished> {
    let (target, container, ephemeral) = (&w.target, w.container.as_str(), w.ephemeral);
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), &w.namespace);
    let secs = deadline
        .saturating_duration_since(tokio::time::Instant::now())
        .as_secs()
        .clamp(1, 290) as u32;
    let wp = match target {
        WatchTarget::RunLabel(sel) => WatchParams::default().labels(sel).timeout(secs),
        WatchTarget::PodName(name) => WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(secs),
    };
    let ctx = conn
        .ctx()
        .verb("watch")
        .with_resource_url(pods.resource_url());
    n.hit();
    let stream = pods
        .watch(&wp, "0")
        .await
        .map_err(|e| Error::from_kube(e, ctx.clone()))?;
    futures::pin_mut!(stream);
    let mut last_state = String::from("no pod yet");
    loop {
        let ev = match tokio::time::timeout_at(deadline, stream.try_next()).await {
            Err(_) => {
                return Err(Error::Cluster(format!(
                    "the probe did not finish before the deadline (last seen: {last_state})"
                )));
            }
            Ok(Err(e)) => return Err(Error::from_kube(e, ctx.clone())),
            Ok(Ok(None)) => {
                return Err(Error::Cluster(format!(
                    "the watch on the probe pod ended before it finished (last seen: {last_state})"
                )));
            }
            Ok(Ok(Some(ev))) => ev,
        };
        match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                last_state = describe(&p, container, ephemeral);
                progress.set_status(last_state.clone());
                match judge(&p, container, ephemeral) {
                    Some(Ok(f)) => return Ok(f),
                    Some(Err(msg)) => return Err(Error::Finding(msg)),
                    None => {}
                }
            }
            WatchEvent::Deleted(p) => {
                return Err(Error::Cluster(format!(
                    "probe pod {} was deleted before it finished",
                    p.metadata.name.unwrap_or_default()
                )));
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => {
                return Err(Error::Cluster(format!(
                    "watch error {}: {}",
                    e.code, e.message
                )));
            }
        }
    }
}

fn describe(p: &Pod, container: &str, ephemeral: bool) -> String {
    let name = p.metadata.name.clone().unwrap_or_default();
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into());
    let waiting = container_state(p, container, ephemeral)
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.clone());
    let sched = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
        .and_then(|c| c.message.clone());
    let mut s = format!("pod/{name} {phase}");
    if let Some(w) = waiting {
        s.push_str(&format!(" ({w})"));
    }
    if let Some(m) = sched {
        s.push_str(&format!(" unschedulable: {m}"));
    }
    s
}

/// GET pods/log of the probe container.
pub async fn read_log(
    conn: &Connection,
    namespace: &str,
    pod: &str,
    container: &str,
    n: &RequestCounter,
) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), namespace);
    n.hit();
    pods.logs(
        pod,
        &LogParams {
            container: Some(container.to_string()),
            limit_bytes: Some(1 << 20),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| {
        api_err(
            conn,
            e,
            "get",
            &format!("{}/{pod}/log", pods.resource_url()),
            pod,
        )
    })
}

/// POST the probe (Job or Pod).
pub async fn create_probe(
    conn: &Connection,
    opts: &ProbeOptions,
    carrier: Carrier,
    n: &RequestCounter,
) -> Result<()> {
    let ns = opts.target_namespace().to_string();
    let pp = PostParams {
        field_manager: Some(crate::probe::FIELD_MANAGER.into()),
        ..Default::default()
    };
    n.hit();
    match carrier {
        Carrier::Job => {
            let jobs: Api<Job> = Api::namespaced(conn.client.clone(), &ns);
            jobs.create(&pp, &opts.job())
                .await
                .map(|_| ())
                .map_err(|e| api_err(conn, e, "create", jobs.resource_url(), &opts.name()))
        }
        Carrier::Pod => {
            let pods: Api<Pod> = Api::namespaced(conn.client.clone(), &ns);
            pods.create(&pp, &opts.pod())
                .await
                .map(|_| ())
                .map_err(|e| api_err(conn, e, "create", pods.resource_url(), &opts.name()))
        }
    }
}

/// DELETE the probe by name (Background propagation: the Job's pod goes too). 404 is
/// success. Bounded by `within` so a dead API server cannot hang the exit.
pub async fn delete_probe(
    conn: &Connection,
    namespace: &str,
    name: &str,
    carrier: Carrier,
    within: Duration,
    n: &RequestCounter,
) -> Result<()> {
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    n.hit();
    let fut = async {
        match carrier {
            Carrier::Job => {
                let api: Api<Job> = Api::namespaced(conn.client.clone(), namespace);
                let url = api.resource_url().to_string();
                api.delete(name, &dp)
                    .await
                    .map(|_| ())
                    .map_err(move |e| (e, url))
            }
            Carrier::Pod => {
                let api: Api<Pod> = Api::namespaced(conn.client.clone(), namespace);
                let url = api.resource_url().to_string();
                api.delete(name, &dp)
                    .await
                    .map(|_| ())
                    .map_err(move |e| (e, url))
            }
        }
    };
    match tokio::time::timeout(within, fut).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err((e, _))) if is_status(&e, &[404]) => Ok(()),
        Ok(Err((e, url))) => Err(api_err(conn, e, "delete", &url, name)),
        Err(_) => Err(Error::Cluster(format!(
            "could not delete {namespace}/{name} within {}s; it expires by itself (activeDeadlineSeconds, ttlSecondsAfterFinished) or run `kubectl podresolve --cleanup -n {namespace}`",
            within.as_secs()
        ))),
    }
}

/// One object removed by `--cleanup`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Swept {
    /// `job` or `pod`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// `--cleanup`: delete every Job and bare Pod labelled managed-by=kubectl-podresolve in
/// `namespace` (all namespaces when None). Pods owned by a swept Job are left to the garbage
/// collector (Background propagation).
pub async fn sweep(conn: &Connection, namespace: Option<&str>) -> Result<Vec<Swept>> {
    let sel = format!("app.kubernetes.io/managed-by={MANAGED_BY}");
    let lp = ListParams::default().labels(&sel);
    let (jobs, pods): (Api<Job>, Api<Pod>) = match namespace {
        Some(ns) => (
            Api::namespaced(conn.client.clone(), ns),
            Api::namespaced(conn.client.clone(), ns),
        ),
        None => (Api::all(conn.client.clone()), Api::all(conn.client.clone())),
    };
    let ctx = |url: &str| conn.ctx().verb("list").with_resource_url(url);
    let job_list = jobs
        .list(&lp)
        .await
        .map_err(|e| Error::from_kube(e, ctx(jobs.resource_url())))?;
    let pod_list = pods
        .list(&lp)
        .await
        .map_err(|e| Error::from_kube(e, ctx(pods.resource_url())))?;
    let n = RequestCounter::default();
    let mut out = Vec::new();
    let mut work = Vec::new();
    for j in job_list.items {
        work.push((
            Carrier::Job,
            j.metadata.namespace.unwrap_or_default(),
            j.metadata.name.unwrap_or_default(),
        ));
    }
    for p in pod_list.items {
        let owned_by_job = p
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.iter().any(|r| r.kind == "Job"));
        if !owned_by_job {
            work.push((
                Carrier::Pod,
                p.metadata.namespace.unwrap_or_default(),
                p.metadata.name.unwrap_or_default(),
            ));
        }
    }
    let results = futures::stream::iter(work.into_iter().map(|(c, ns, name)| {
        let n = &n;
        async move {
            let r = delete_probe(conn, &ns, &name, c, Duration::from_secs(30), n).await;
            (c, ns, name, r)
        }
    }))
    .buffer_unordered(8)
    .collect::<Vec<_>>()
    .await;
    for (c, ns, name, r) in results {
        r?;
        out.push(Swept {
            kind: match c {
                Carrier::Job => "job".into(),
                Carrier::Pod => "pod".into(),
            },
            namespace: ns,
            name,
        });
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}

/// Fill [`ProbeInfo`] for the report.
pub fn probe_info(
    opts: &ProbeOptions,
    carrier: &str,
    finished: Option<&Finished>,
    from: Option<&SourcePod>,
    fallback_reason: Option<String>,
) -> ProbeInfo {
    ProbeInfo {
        carrier: carrier.into(),
        namespace: opts.target_namespace().to_string(),
        name: opts.name(),
        pod: finished.map(|f| f.pod.clone()),
        node: finished.and_then(|f| f.node.clone()),
        image: opts.image.clone(),
        from_pod: from.map(|s| format!("{}/{}", s.namespace, s.name)),
        fallback_reason,
        api_requests: 0,
    }
}
