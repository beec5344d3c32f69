//! The probe's lifecycle: create it, watch it to the end (one WATCH request from
//! resourceVersion "0": no polling), read its log, delete it, and sweep leftovers. One
//! implementation for every plugin that runs a probe; [`run_probe`] is the whole sequence with
//! cleanup guaranteed.
//!
//! Cleanup is guaranteed on success, failure, timeout, Ctrl-C (SIGINT) and SIGTERM: once a
//! create was attempted, a DELETE by name (propagationPolicy Background, so the Job's pod
//! goes too) always follows. SIGKILL is covered by the cluster: activeDeadlineSeconds stops
//! the pod and ttlSecondsAfterFinished removes the Job; a sweep by the
//! `app.kubernetes.io/managed-by=kubectl-<tool>` label removes what is left.

use super::{Carrier, ProbeOptions, ProbeOwner};
use crate::cli::Connection;
use crate::error::{Error, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, LogParams, PostParams, PropagationPolicy, WatchEvent, WatchParams,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Counts API requests made by this run (reported as `probe.apiRequests`).
#[derive(Debug, Default)]
pub struct RequestCounter(AtomicU32);

impl RequestCounter {
    /// Count one request.
    pub fn hit(&self) {
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

/// An API error with the verb, resource URL and name (RBAC denials name the
/// `kubectl auth can-i` line).
pub fn api_err(conn: &Connection, e: kube::Error, verb: &str, url: &str, name: &str) -> Error {
    Error::from_kube(e, conn.ctx().verb(verb).name(name).with_resource_url(url))
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

impl Finished {
    /// How the probe container ended, for messages: `exit code Some(<code>)` (`None` when
    /// the kubelet reported none), then `, <failure>` when the pod failed (e.g.
    /// `exit code None, DeadlineExceeded`).
    pub fn ended(&self) -> String {
        let failure = self
            .failure
            .as_deref()
            .map(|f| format!(", {f}"))
            .unwrap_or_default();
        format!("exit code {:?}{failure}", self.exit_code)
    }
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
    progress: &crate::wait::Progress,
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
    let sched = crate::conditions::pod_not_scheduled(p).and_then(|c| c.message.clone());
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
        field_manager: Some(opts.owner.field_manager()),
        ..Default::default()
    };
    n.hit();
    let (result, url) = match carrier {
        Carrier::Job => create_as(api(conn, &ns), &pp, &opts.job()).await,
        Carrier::Pod => create_as(api(conn, &ns), &pp, &opts.pod()).await,
    };
    result.map_err(|e| match missing_namespace(&e) {
        Some(missing) => namespace_missing_err(conn, e, &url, &missing),
        None => api_err(conn, e, "create", &url, &opts.name()),
    })
}

/// The namespace a create was refused for because it does not exist: the 404 the
/// NamespaceLifecycle admission plugin returns (kubernetes plugin/pkg/admission/namespace/
/// lifecycle/admission.go: `errors.NewNotFound(v1.Resource("namespaces"), namespace)`, so
/// `details.kind` is `namespaces` and `details.name` the namespace).
fn missing_namespace(e: &kube::Error) -> Option<String> {
    match e {
        kube::Error::Api(s) if s.code == 404 => s
            .details
            .as_ref()
            .filter(|d| d.kind == "namespaces" && !d.name.is_empty())
            .map(|d| d.name.clone()),
        _ => None,
    }
}

/// Exit 3 (an API answer, code 404 kept so callers know nothing was created): `namespace "X"
/// does not exist (context "C", SERVER); list namespaces with: kubectl get ns --context C`.
fn namespace_missing_err(conn: &Connection, e: kube::Error, url: &str, ns: &str) -> Error {
    let ctx = conn.ctx().verb("create").with_resource_url(url);
    let (asked, flag) = crate::error::where_asked(
        ctx.kube_context.as_deref().filter(|c| !c.is_empty()),
        ctx.server.trim_end_matches('/'),
    );
    Error::Api {
        message: format!(
            "namespace \"{ns}\" does not exist ({asked}): nothing was created; list namespaces with: kubectl get ns{flag}"
        ),
        code: Some(404),
        context: Box::new(ctx.name(ns)),
        source: Some(Box::new(e)),
    }
}

/// The namespaced API of `K` in `namespace`.
fn api<K>(conn: &Connection, namespace: &str) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(conn.client.clone(), namespace)
}

/// POST `obj` through `api`; the result and the collection URL (for the error).
async fn create_as<K>(
    api: Api<K>,
    pp: &PostParams,
    obj: &K,
) -> (std::result::Result<(), kube::Error>, String)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let r = api.create(pp, obj).await.map(|_| ());
    (r, api.resource_url().to_string())
}

/// DELETE `name` through `api`; the result and the collection URL (for the error).
async fn delete_as<K>(
    api: Api<K>,
    name: &str,
    dp: &DeleteParams,
) -> (std::result::Result<(), kube::Error>, String)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let r = api.delete(name, dp).await.map(|_| ());
    (r, api.resource_url().to_string())
}

/// DELETE the probe by name (Background propagation: the Job's pod goes too). 404 is
/// success. Bounded by `within` so a dead API server cannot hang the exit; the timeout error
/// names `cleanup_hint` (the command that removes leftovers).
pub async fn delete_probe(
    conn: &Connection,
    namespace: &str,
    name: &str,
    carrier: Carrier,
    within: Duration,
    cleanup_hint: &str,
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
            Carrier::Job => delete_as::<Job>(api(conn, namespace), name, &dp).await,
            Carrier::Pod => delete_as::<Pod>(api(conn, namespace), name, &dp).await,
        }
    };
    match tokio::time::timeout(within, fut).await {
        Ok((Ok(()), _)) => Ok(()),
        Ok((Err(e), _)) if is_status(&e, &[404]) => Ok(()),
        Ok((Err(e), url)) => Err(api_err(conn, e, "delete", &url, name)),
        Err(_) => Err(Error::Cluster(format!(
            "could not delete {namespace}/{name} within {}s; it expires by itself (activeDeadlineSeconds, ttlSecondsAfterFinished) or run `{cleanup_hint}`",
            within.as_secs()
        ))),
    }
}

/// A probe object an earlier run left behind (a run killed with SIGKILL cannot delete its
/// probe): found by [`leftovers`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// `job NS/NAME` (a Job's pod) or `pod NS/NAME` (a bare probe pod).
    pub object: String,
    /// The pod's phase (`Pending`, `Running`, `Succeeded`, `Failed`).
    pub phase: String,
    /// RFC 3339 creation time of the pod.
    pub created: String,
}

/// Probe objects of `owner` in `namespace` left by earlier runs: one LIST of pods labelled
/// `app.kubernetes.io/managed-by=kubectl-<tool>,<tool>.cluster-loop.dev/run` (a probe Job's
/// pod carries the labels too, so a leftover Job shows through its pod). A Job's pod is named
/// by its Job (`controller` ownerReference). Call it before creating this run's probe.
///
/// Errors: the LIST failing (the caller may treat it as "unknown" and go on).
pub async fn leftovers(
    conn: &Connection,
    owner: ProbeOwner,
    namespace: &str,
) -> Result<Vec<Leftover>> {
    let sel = format!(
        "app.kubernetes.io/managed-by={},{}",
        owner.managed_by(),
        owner.run_label()
    );
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels(&sel))
        .await
        .map_err(|e| {
            Error::from_kube(
                e,
                conn.ctx()
                    .verb("list")
                    .with_resource_url(pods.resource_url()),
            )
        })?;
    let mut out: Vec<Leftover> = Vec::new();
    for p in list.items {
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let job = p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.kind == "Job" && o.controller == Some(true))
            .map(|o| o.name.clone());
        let object = match job {
            Some(j) => format!("job {ns}/{j}"),
            None => format!("pod {ns}/{}", p.metadata.name.clone().unwrap_or_default()),
        };
        if out.iter().any(|l| l.object == object) {
            continue;
        }
        out.push(Leftover {
            object,
            phase: p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Unknown".into()),
            created: p
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

/// One probe object `--cleanup` deleted.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Swept {
    /// `job` or `pod`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// What [`sweep`] found: `{"deleted": [...], "terminating": [...]}` (each `{kind, namespace,
/// name}`, plus `since` and `finalizers` for a terminating one), the shape of `--cleanup -o
/// json`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SweepReport {
    /// The objects this sweep deleted.
    pub deleted: Vec<Swept>,
    /// The objects already terminating (deleted before, e.g. by a killed run or the TTL
    /// controller), left to finish.
    pub terminating: Vec<Terminating>,
}

/// An object already terminating, with when its deletion was requested.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Terminating {
    /// `job` or `pod`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.deletionTimestamp` (RFC 3339).
    pub since: String,
    /// `metadata.finalizers`: what keeps it (empty: it goes once its grace period ends).
    pub finalizers: Vec<String>,
}

impl SweepReport {
    /// Nothing found.
    pub fn is_empty(&self) -> bool {
        self.deleted.is_empty() && self.terminating.is_empty()
    }

    /// One line per object, sorted by namespace and name: `deleted job ns/name`, or `pod
    /// ns/name was already terminating (deletion requested at T): left to finish` (or `held by
    /// finalizer F: ...` when finalizers keep it).
    pub fn lines(&self) -> String {
        let mut rows: Vec<(&str, &str, String)> = self
            .deleted
            .iter()
            .map(|o| {
                let line = format!("deleted {} {}/{}\n", o.kind, o.namespace, o.name);
                (o.namespace.as_str(), o.name.as_str(), line)
            })
            .chain(self.terminating.iter().map(|o| {
                let held = match o.finalizers.as_slice() {
                    [] => "left to finish".to_owned(),
                    f => format!(
                        "held by finalizer{} {}: --cleanup leaves finalizers to whoever set them",
                        if f.len() > 1 { "s" } else { "" },
                        f.join(", ")
                    ),
                };
                let line = format!(
                    "{} {}/{} was already terminating (deletion requested at {}): {held}\n",
                    o.kind, o.namespace, o.name, o.since
                );
                (o.namespace.as_str(), o.name.as_str(), line)
            }))
            .collect();
        rows.sort();
        rows.into_iter().map(|r| r.2).collect()
    }
}

/// Delete every probe Job and Pod (labelled `app.kubernetes.io/managed-by=kubectl-<tool>` and
/// carrying the run label `<tool>.cluster-loop.dev/run`) in `namespace` (all namespaces when
/// None). A pod whose owner Job is swept here is left to the garbage collector (Background
/// propagation), and reported only if already terminating; every other probe pod is deleted,
/// including one whose owner Job is already gone (the GC would remove it in time, but
/// `--cleanup` means now). Pods are listed before
/// Jobs, so a pod's Job, if it exists, was created before the Job list and is in it. An object
/// already terminating (`metadata.deletionTimestamp` set) is not deleted again (that changes
/// nothing) but reported as terminating, so the report never claims a deletion it did not make.
pub async fn sweep(
    conn: &Connection,
    owner: ProbeOwner,
    namespace: Option<&str>,
    cleanup_hint: &str,
) -> Result<SweepReport> {
    let sel = format!(
        "app.kubernetes.io/managed-by={},{}",
        owner.managed_by(),
        owner.run_label()
    );
    let lp = ListParams::default().labels(&sel);
    let (jobs, pods): (Api<Job>, Api<Pod>) = match namespace {
        Some(ns) => (
            Api::namespaced(conn.client.clone(), ns),
            Api::namespaced(conn.client.clone(), ns),
        ),
        None => (Api::all(conn.client.clone()), Api::all(conn.client.clone())),
    };
    let ctx = |url: &str| conn.ctx().verb("list").with_resource_url(url);
    let pod_list = pods
        .list(&lp)
        .await
        .map_err(|e| Error::from_kube(e, ctx(pods.resource_url())))?;
    let job_list = jobs
        .list(&lp)
        .await
        .map_err(|e| Error::from_kube(e, ctx(jobs.resource_url())))?;
    let swept_jobs: std::collections::HashSet<String> = job_list
        .items
        .iter()
        .filter_map(|j| j.metadata.uid.clone())
        .collect();
    let n = RequestCounter::default();
    let mut out = SweepReport::default();
    let mut work = Vec::new();
    let mut found =
        |c: Carrier, meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            let (namespace, name) = (
                meta.namespace.unwrap_or_default(),
                meta.name.unwrap_or_default(),
            );
            match meta.deletion_timestamp {
                Some(t) => out.terminating.push(Terminating {
                    kind: c.kind().into(),
                    namespace,
                    name,
                    since: t.0.to_string(),
                    finalizers: meta.finalizers.unwrap_or_default(),
                }),
                None => work.push((c, namespace, name)),
            }
        };
    for j in job_list.items {
        found(Carrier::Job, j.metadata);
    }
    for p in pod_list.items {
        let job_swept_here = p.metadata.owner_references.as_ref().is_some_and(|o| {
            o.iter()
                .any(|r| r.kind == "Job" && swept_jobs.contains(&r.uid))
        });
        // A terminating pod is reported whoever deletes it: left to the garbage collector
        // with its Job, it would go unmentioned while a finalizer keeps it.
        if !job_swept_here || p.metadata.deletion_timestamp.is_some() {
            found(Carrier::Pod, p.metadata);
        }
    }
    let results = futures::stream::iter(work.into_iter().map(|(c, ns, name)| {
        let n = &n;
        async move {
            let r = delete_probe(
                conn,
                &ns,
                &name,
                c,
                Duration::from_secs(30),
                cleanup_hint,
                n,
            )
            .await;
            (c, ns, name, r)
        }
    }))
    .buffer_unordered(8)
    .collect::<Vec<_>>()
    .await;
    for (c, ns, name, r) in results {
        r?;
        out.deleted.push(Swept {
            kind: c.kind().into(),
            namespace: ns,
            name,
        });
    }
    out.deleted
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out.terminating
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}

/// How [`run_probe`] ended.
#[derive(Debug)]
pub enum ProbeEnd {
    /// The probe container terminated (any exit code); its log (at most 1 MiB).
    Finished {
        /// Pod, node, exit code.
        finished: Finished,
        /// The container's log.
        log: String,
    },
    /// A signal arrived first; the probe was deleted (`cleanup` says whether that worked).
    Interrupted {
        /// `SIGINT` or `SIGTERM`.
        signal: &'static str,
        /// The DELETE's result (Ok when nothing had been created).
        cleanup: Result<()>,
    },
}

/// The whole lifecycle of a Job or Pod probe: POST it, watch its pod until the container
/// terminates, a fatal waiting state is seen or `deadline` passes, GET its log, and DELETE it.
/// The DELETE always follows an attempted create: on success, on any error and when
/// `interrupt` resolves first (pass [`crate::signals::Signals::recv`]). Requests: POST, WATCH,
/// GET log, DELETE = 4 (counted in `n`).
///
/// Errors: the API error of the create (RBAC denials name `kubectl auth can-i create jobs`),
/// the watch or the log read; [`Error::Finding`] when the container can never start (image
/// pull, CreateContainerConfigError, e.g. a Secret key that is missing); [`Error::Cluster`]
/// when the deadline passes. A failed cleanup after success is reported through `progress`.
#[allow(clippy::too_many_arguments)]
pub async fn run_probe(
    conn: &Connection,
    opts: &ProbeOptions,
    carrier: Carrier,
    deadline: tokio::time::Instant,
    cleanup_hint: &str,
    progress: &crate::wait::Progress,
    n: &RequestCounter,
    interrupt: impl std::future::Future<Output = &'static str>,
) -> Result<ProbeEnd> {
    let ns = opts.target_namespace().to_string();
    let attempted = std::sync::atomic::AtomicBool::new(false);
    let work = async {
        attempted.store(true, Ordering::SeqCst);
        progress.set_status(format!("creating probe {}/{}", ns, opts.name()));
        if let Err(e) = create_probe(conn, opts, carrier, n).await {
            // The server answered with an error status: nothing was created. Transport errors
            // keep the delete (the object may exist).
            if e.status_code().is_some() {
                attempted.store(false, Ordering::SeqCst);
            }
            return Err(e);
        }
        let watch = ProbeWatch {
            namespace: ns.clone(),
            target: WatchTarget::RunLabel(opts.run_selector()),
            container: "probe".into(),
            ephemeral: false,
        };
        let finished = watch_probe(conn, &watch, deadline, progress, n).await?;
        let log = read_log(conn, &ns, &finished.pod, "probe", n).await?;
        Ok((finished, log))
    };
    let outcome = tokio::select! {
        r = work => Ok(r),
        s = interrupt => Err(s),
    };
    let cleanup = if attempted.load(Ordering::SeqCst) {
        delete_probe(
            conn,
            &ns,
            &opts.name(),
            carrier,
            Duration::from_secs(20),
            cleanup_hint,
            n,
        )
        .await
    } else {
        Ok(())
    };
    match outcome {
        Err(signal) => Ok(ProbeEnd::Interrupted { signal, cleanup }),
        Ok(r) => {
            if let Err(e) = &cleanup {
                progress.println(format!("warning: probe cleanup failed: {e}"));
            }
            let (finished, log) = r?;
            Ok(ProbeEnd::Finished { finished, log })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Finished, SweepReport, Swept, Terminating};

    #[test]
    fn a_sweep_report_says_deleted_only_for_what_it_deleted() {
        let r = SweepReport {
            deleted: vec![Swept {
                kind: "job".into(),
                namespace: "a".into(),
                name: "podresolve-2".into(),
            }],
            terminating: vec![Terminating {
                kind: "pod".into(),
                namespace: "a".into(),
                name: "podresolve-1".into(),
                since: "2026-12-02T07:00:00Z".into(),
                finalizers: vec![],
            }],
        };
        assert!(!r.is_empty() && SweepReport::default().is_empty());
        assert_eq!(
            r.lines(),
            "pod a/podresolve-1 was already terminating (deletion requested at 2026-12-02T07:00:00Z): left to finish\n\
             deleted job a/podresolve-2\n"
        );
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({
                "deleted": [{"kind": "job", "namespace": "a", "name": "podresolve-2"}],
                "terminating": [{"kind": "pod", "namespace": "a", "name": "podresolve-1",
                    "since": "2026-12-02T07:00:00Z", "finalizers": []}],
            })
        );
        let held = SweepReport {
            deleted: vec![],
            terminating: vec![Terminating {
                finalizers: vec!["example.com/hold".into()],
                ..r.terminating[0].clone()
            }],
        };
        assert_eq!(
            held.lines(),
            "pod a/podresolve-1 was already terminating (deletion requested at \
             2026-12-02T07:00:00Z): held by finalizer example.com/hold: --cleanup leaves \
             finalizers to whoever set them\n"
        );
    }

    #[test]
    fn ended_names_the_exit_code_and_the_failure() {
        let mut f = Finished {
            pod: "p".into(),
            node: None,
            exit_code: Some(127),
            failure: None,
        };
        assert_eq!(f.ended(), "exit code Some(127)");
        f.exit_code = None;
        f.failure = Some("DeadlineExceeded".into());
        assert_eq!(f.ended(), "exit code None, DeadlineExceeded");
    }
}
