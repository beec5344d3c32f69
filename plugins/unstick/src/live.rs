//! The cluster side: read a [`Snapshot`] with list calls (never one get per inventory
//! object), run a [`Plan`]'s writes with conflict retries, resume on interrupt, and wait for
//! proof with a watch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cluster_loop::cli::Connection;
use cluster_loop::error::{Error, Result};
use cluster_loop::refs::Kind;
use cluster_loop::wait::Progress;
use jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::Value;
use tokio::sync::Notify;

use crate::diagnose::{self, SUSPEND_MARKER, source_ref, wait_set};
use crate::lever::{FIELD_MANAGER, Plan, Step, resume_patch};
use crate::obj;
use crate::snapshot::{STATUS_KINDS, Snapshot, custom_group};

/// Where the kustomize-controller Deployment lives (`--controller-namespace`,
/// `--controller-name`).
#[derive(Debug, Clone)]
pub struct ControllerRef {
    /// Namespace (default `flux-system`).
    pub namespace: String,
    /// Name (default `kustomize-controller`).
    pub name: String,
}

/// The API resource for a kind we read or write. Flux and core kinds come from
/// `cluster_loop::refs::Kind`; Bucket and HelmRelease, which it does not list, are here.
pub fn api_resource(group: &str, kind: &str) -> Option<ApiResource> {
    if let Some(k) = Kind::from_kind_str(kind)
        && k.info().group == group
    {
        return Some(k.api_resource(k.info().version));
    }
    let (version, plural) = match (group, kind) {
        ("source.toolkit.fluxcd.io", "Bucket") => ("v1", "buckets"),
        ("helm.toolkit.fluxcd.io", "HelmRelease") => ("v2", "helmreleases"),
        ("batch", "CronJob") => ("v1", "cronjobs"),
        ("", "PersistentVolumeClaim") => ("v1", "persistentvolumeclaims"),
        _ => return None,
    };
    Some(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        plural,
    ))
}

/// Marker in a kind's namespace set: list it in all namespaces.
const ALL_NS: &str = "*";

/// The one namespace to list a kind in, or `None` for all namespaces: several namespaces, a
/// cluster-scoped/empty one only, or [`ALL_NS`].
fn one_namespace(nss: &BTreeSet<String>) -> Option<&str> {
    if nss.contains(ALL_NS) {
        return None;
    }
    let v: Vec<&String> = nss.iter().filter(|n| !n.is_empty()).collect();
    (v.len() == 1).then(|| v[0].as_str())
}

/// At most this many ConfigMaps/Secrets are read per snapshot ([`read_configs`]): one GET
/// each, so `--all` stays within its documented read bound whatever the fleet's size.
pub const MAX_CONFIG_READS: usize = 4;

/// The metadata of the ConfigMaps and Secrets referenced by Kustomizations that are Ready with
/// no run in progress ([`diagnose::config_refs`]; only those can hide an unseen change), one
/// metadata-only GET each (never their data), the first [`MAX_CONFIG_READS`] distinct ones in
/// name order. Missing (404) or forbidden (403, a note): not judged.
async fn read_configs(
    conn: &Connection,
    r: &Reader,
    kustomizations: &[Value],
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, Value>> {
    let wanted: BTreeSet<(String, String, String)> = kustomizations
        .iter()
        .filter(|k| {
            obj::condition(k, "Ready").is_some_and(|c| c.is_true())
                && diagnose::run_in_progress(k).is_none()
                && !obj::b(k, &["spec", "suspend"])
        })
        .flat_map(diagnose::config_refs)
        .map(|c| (c.kind, c.namespace, c.name))
        .collect();
    if wanted.len() > MAX_CONFIG_READS {
        notes.push(format!(
            "{} ConfigMaps/Secrets are referenced; only the first {MAX_CONFIG_READS} were read for unseen changes",
            wanted.len()
        ));
    }
    let mut out = BTreeMap::new();
    for (kind, ns, name) in wanted.into_iter().take(MAX_CONFIG_READS) {
        let ar = if kind == "Secret" {
            Kind::Secret.api_resource("v1")
        } else {
            Kind::ConfigMap.api_resource("v1")
        };
        match r.get_metadata(conn, &ar, &ns, &name).await {
            Ok(Some(v)) => {
                out.insert(format!("{kind}/{ns}/{name}"), v);
            }
            Ok(None) => {}
            Err(e) if e.status_code() == Some(403) => {
                notes.push(format!("{kind} {ns}/{name} not read: {e}"));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Reads objects and counts the API requests it made (the real cluster's fault proxy checks the
/// same number from the server side in tests and the bench).
#[derive(Debug, Default)]
pub struct Reader {
    /// Requests made.
    pub requests: std::sync::atomic::AtomicUsize,
}

fn to_value(o: DynamicObject, ar: &ApiResource) -> Value {
    let mut v = serde_json::to_value(&o).unwrap_or(Value::Null);
    if v.get("apiVersion")
        .is_none_or(|a| a.as_str().unwrap_or("").is_empty())
    {
        v["apiVersion"] = Value::String(ar.api_version.clone());
    }
    if v.get("kind")
        .is_none_or(|a| a.as_str().unwrap_or("").is_empty())
    {
        v["kind"] = Value::String(ar.kind.clone());
    }
    v
}

impl Reader {
    fn count(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// List `ar` in `ns` (`None`: all namespaces). `lp` adds selectors.
    pub async fn list(
        &self,
        conn: &Connection,
        ar: &ApiResource,
        ns: Option<&str>,
        lp: &ListParams,
    ) -> Result<Vec<Value>> {
        self.count();
        let api: Api<DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(conn.client.clone(), ns, ar),
            None => Api::all_with(conn.client.clone(), ar),
        };
        let ctx = conn.ctx().verb("list").api_resource(ar).namespace(ns);
        let list = api.list(lp).await.map_err(|e| Error::from_kube(e, ctx))?;
        Ok(list.items.into_iter().map(|o| to_value(o, ar)).collect())
    }

    /// Get one object; `Ok(None)` on 404.
    pub async fn get(
        &self,
        conn: &Connection,
        ar: &ApiResource,
        ns: &str,
        name: &str,
    ) -> Result<Option<Value>> {
        let (api, ctx) = self.one(conn, ar, ns, name);
        match api.get_opt(name).await {
            Ok(o) => Ok(o.map(|o| to_value(o, ar))),
            Err(e) => Err(Error::from_kube(e, ctx)),
        }
    }

    /// The counted request's API and error context for a GET of `ns/name`.
    fn one(
        &self,
        conn: &Connection,
        ar: &ApiResource,
        ns: &str,
        name: &str,
    ) -> (Api<DynamicObject>, cluster_loop::error::ApiContext) {
        self.count();
        let api = Api::namespaced_with(conn.client.clone(), ns, ar);
        let ctx = conn
            .ctx()
            .verb("get")
            .api_resource(ar)
            .namespace(Some(ns))
            .name(name);
        (api, ctx)
    }
}

impl Reader {
    /// Get one object's metadata only (`PartialObjectMetadata`: no data, no spec);
    /// `Ok(None)` on 404. The value has `kind`, `apiVersion` and `metadata`.
    pub async fn get_metadata(
        &self,
        conn: &Connection,
        ar: &ApiResource,
        ns: &str,
        name: &str,
    ) -> Result<Option<Value>> {
        let (api, ctx) = self.one(conn, ar, ns, name);
        match api.get_metadata_opt(name).await {
            Ok(o) => Ok(o.map(|o| {
                let mut v = serde_json::json!({"metadata": serde_json::to_value(&o.metadata).unwrap_or(Value::Null)});
                v["apiVersion"] = Value::String(ar.api_version.clone());
                v["kind"] = Value::String(ar.kind.clone());
                v
            })),
            Err(e) => Err(Error::from_kube(e, ctx)),
        }
    }

    /// The last `lines` lines of container `container` of pod `ns/name`, at most 8 KiB
    /// (`pods/log` with `tailLines` and `limitBytes`; `previous`: the run before the current
    /// one, what `kubectl logs --previous` shows). Errors: the API's (400 when there is no
    /// such log, e.g. `previous terminated container "manager" in pod "X" not found`).
    pub async fn pod_log_tail(
        &self,
        conn: &Connection,
        ns: &str,
        name: &str,
        container: &str,
        previous: bool,
        lines: i64,
    ) -> Result<Vec<String>> {
        self.count();
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(conn.client.clone(), ns);
        let ctx = conn
            .ctx()
            .verb("get")
            .resource("", "pods/log")
            .namespace(Some(ns))
            .name(name);
        let text = api
            .logs(
                name,
                &kube::api::LogParams {
                    container: Some(container.to_string()),
                    previous,
                    tail_lines: Some(lines),
                    limit_bytes: Some(8192),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| Error::from_kube(e, ctx))?;
        Ok(text.lines().map(String::from).collect())
    }
}

fn ks_ar() -> ApiResource {
    Kind::Kustomization.api_resource("v1")
}

/// What to read.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Namespace of the Kustomizations (`None`: all namespaces, `-A`).
    pub namespace: Option<String>,
    /// The controller Deployment.
    pub controller: ControllerRef,
}

/// The controllers read only when a Kustomization needs them, each with one request: every
/// kustomize-controller and source-controller Deployment of the controller's namespace (one
/// list) when the kustomize-controller read does not watch some Kustomization, or the
/// source-controller read some source (a sharded install: which shard would), and the
/// helm-controller Deployment (one GET) when a health check waits on a HelmRelease. A 403
/// leaves them unread (a note).
async fn other_controllers(
    conn: &Connection,
    r: &Reader,
    scope: &Scope,
    c: &mut Controllers,
    kustomizations: &[Value],
    sources: &[Value],
    notes: &mut Vec<String>,
) -> Result<()> {
    use crate::controller::ControllerFacts;
    let dep_ar = Kind::Deployment.api_resource("v1");
    let ns = scope.controller.namespace.as_str();
    let excludes = |d: Option<&Value>, objs: Vec<&Value>| {
        d.map(ControllerFacts::from_deployment)
            .is_some_and(|f| objs.iter().any(|o| f.excludes(o).is_some()))
    };
    let ks_out = excludes(c.controller.as_ref(), kustomizations.iter().collect());
    let src_out = excludes(
        c.source_controller.as_ref(),
        sources
            .iter()
            .filter(|s| crate::diagnose::SOURCE_CONTROLLER_KINDS.contains(&obj::kind(s)))
            .collect(),
    );
    if ks_out || src_out {
        match r
            .list(conn, &dep_ar, Some(ns), &ListParams::default())
            .await
        {
            Ok(v) => {
                for d in v {
                    let image = ControllerFacts::from_deployment(&d).image;
                    if image.contains("kustomize-controller") {
                        c.kustomize_controllers.push(d);
                    } else if image.contains("source-controller") {
                        c.source_controllers.push(d);
                    }
                }
            }
            Err(e) if e.status_code() == Some(403) => {
                notes.push(format!("controller shards not read: {e}"))
            }
            Err(e) => return Err(e),
        }
    }
    let wants_helm = kustomizations.iter().any(|k| {
        wait_set(k)
            .iter()
            .any(|m| m.kind == "HelmRelease" && m.group == "helm.toolkit.fluxcd.io")
    });
    if !wants_helm {
        return Ok(());
    }
    match r.get(conn, &dep_ar, ns, "helm-controller").await {
        Ok(v) => {
            c.helm_controller = v;
            c.helm_controller_read = true;
        }
        Err(e) if e.status_code() == Some(403) => {
            notes.push(format!("helm-controller not read: {e}"));
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// Read everything the engine needs, with list calls only:
/// Kustomizations (1; plus 1 for the dependencies named in other namespaces, whatever their
/// number), each referenced source kind (1 each), the controller Deployment (1), one
/// discovery request per API group of a custom kind named by a health check (plus 1 list per
/// kind it serves),
/// each status-bearing kind named by a health check of a non-healthy Kustomization (1 each,
/// across namespaces when several are involved), for HelmReleases among them that are not Ready
/// the workloads of their releases (4: Deployments, StatefulSets, DaemonSets, Jobs with
/// helm-controller's origin label), Pods (1) and Warning Events (1); for a controller
/// Deployment with replicas but no ready pod, its pods (1) and the last log lines of its
/// exited container (1); the kustomize- and source-controller shards and helm-controller when needed
/// (`other_controllers`, 1 each).
/// Permission errors on the optional reads (controller, pods, events, workloads) degrade to
/// "not read" and are returned as notes; on the Kustomizations they are errors.
pub async fn gather(
    conn: &Connection,
    scope: &Scope,
    r: &Reader,
) -> Result<(Snapshot, Vec<String>)> {
    let mut notes = Vec::new();
    let now = Timestamp::now();
    let ks_ns = scope.namespace.as_deref();
    let (kustomizations, workers_elsewhere) =
        read_kustomizations(conn, r, ks_ns, &mut notes).await?;
    let sources = read_sources(conn, r, ks_ns, &kustomizations, &mut notes).await?;
    let c = read_controllers(conn, r, scope, &kustomizations, &sources, &mut notes).await?;
    let leases = read_leases(conn, r, &c, &kustomizations, &mut notes).await?;
    let (controller_pods, controller_logs) =
        read_controller_pods(conn, r, scope, &c, &leases, now, &mut notes).await?;
    let secret_keys = read_secret_keys(conn, r, &sources, &mut notes).await?;
    let configs = read_configs(conn, r, &kustomizations, &mut notes).await?;
    let mut snap = Snapshot {
        now,
        namespace: ks_ns.map(String::from),
        configs,
        kustomizations,
        workers_elsewhere,
        sources,
        controller: c.controller,
        source_controller: c.source_controller,
        kustomize_controllers: c.kustomize_controllers,
        source_controllers: c.source_controllers,
        helm_controller: c.helm_controller,
        helm_controller_read: c.helm_controller_read,
        controller_pods,
        controller_logs,
        leases,
        secret_keys,
        ..Default::default()
    };
    let (wanted, custom) = wanted_kinds(&snap.kustomizations);
    read_custom_kinds(conn, r, &custom, &mut snap, &mut notes).await?;
    let mut workload_ns = read_status_kinds(conn, r, &wanted, &mut snap, &mut notes).await?;
    read_release_workloads(conn, r, &mut snap, &mut workload_ns, &mut notes).await?;
    read_pods_and_events(conn, r, &workload_ns, &mut snap, &mut notes).await?;
    read_crash_evidence(conn, r, &mut snap, &mut notes).await?;
    Ok((snap, notes))
}

/// At most this many crashing containers' logs are read per round.
pub const CRASH_LOGS: usize = 4;

/// Lines of a crashing container's last run read (`tailLines`).
const CRASH_LOG_LINES: i64 = 20;

/// For the workload containers in CrashLoopBackOff (at most [`CRASH_LOGS`]): the last lines
/// of their ended run (`pods/log?previous=true`, 1 request each) and the Services of their
/// pods' namespaces (1 list each, and the master Service `default/kubernetes`, 1 GET), so the
/// diagnosis can tell a Service link variable the app read (catalogue row 5). Nothing is read
/// when no container crashes. Refused reads (403) and a log that is gone (400, 404) are notes.
async fn read_crash_evidence(
    conn: &Connection,
    r: &Reader,
    snap: &mut Snapshot,
    notes: &mut Vec<String>,
) -> Result<()> {
    let mut crashing: Vec<(String, String, String)> = Vec::new();
    for p in &snap.pods {
        for cs in obj::arr(p, &["status", "initContainerStatuses"])
            .iter()
            .chain(obj::arr(p, &["status", "containerStatuses"]).iter())
        {
            if obj::s(cs, &["state", "waiting", "reason"]) == Some("CrashLoopBackOff") {
                crashing.push((
                    obj::namespace(p).to_string(),
                    obj::name(p).to_string(),
                    obj::s(cs, &["name"]).unwrap_or_default().to_string(),
                ));
            }
        }
    }
    crashing.truncate(CRASH_LOGS);
    if crashing.is_empty() {
        return Ok(());
    }
    for (ns, pod, container) in &crashing {
        match r
            .pod_log_tail(conn, ns, pod, container, true, CRASH_LOG_LINES)
            .await
        {
            Ok(lines) => {
                snap.workload_logs
                    .insert(format!("{ns}/{pod}/{container}"), lines);
            }
            Err(e) if matches!(e.status_code(), Some(400) | Some(403) | Some(404)) => notes.push(
                format!("log of {ns}/{pod} container {container} not read: {e}"),
            ),
            Err(e) => return Err(e),
        }
    }
    let svc_ar = Kind::Service.api_resource("v1");
    let nss: BTreeSet<&str> = crashing.iter().map(|(ns, _, _)| ns.as_str()).collect();
    for ns in nss {
        match r
            .list(conn, &svc_ar, Some(ns), &ListParams::default())
            .await
        {
            Ok(v) => snap.services.extend(v),
            Err(e) if e.status_code() == Some(403) => {
                notes.push(format!("Services of {ns} not read: {e}"))
            }
            Err(e) => return Err(e),
        }
    }
    if !crashing.iter().any(|(ns, _, _)| ns == "default") {
        match r.get(conn, &svc_ar, "default", "kubernetes").await {
            Ok(Some(v)) => snap.services.push(v),
            Ok(None) => {}
            Err(e) if e.status_code() == Some(403) => {
                notes.push(format!("Service default/kubernetes not read: {e}"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The Kustomizations in scope (1 list), plus those named as dependencies in other
/// namespaces (single-namespace scope only: 1 list whatever their number; without list
/// permission there, 1 per namespace, a namespace not readable a note).
///
/// A single-namespace scope lists every namespace in that one request when allowed: the
/// controller's workers are shared by all namespaces, so the Kustomizations of other
/// namespaces whose run holds one are returned as well (trial4: four runs in `prod` held every
/// worker, and a queued run in `flux-system` read as a dropped revision event), and the
/// dependencies are taken from it. Refused (403): the namespace's list, and who holds the
/// workers elsewhere is not known (`None`).
async fn read_kustomizations(
    conn: &Connection,
    r: &Reader,
    ks_ns: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<(Vec<Value>, Option<Vec<String>>)> {
    let Some(ns) = ks_ns else {
        let all = r.list(conn, &ks_ar(), None, &ListParams::default()).await?;
        return Ok((all, None));
    };
    match r.list(conn, &ks_ar(), None, &ListParams::default()).await {
        Ok(all) => {
            let (mut mine, other): (Vec<Value>, Vec<Value>) =
                all.into_iter().partition(|k| obj::namespace(k) == ns);
            let held = other
                .iter()
                .filter(|k| {
                    !obj::b(k, &["spec", "suspend"]) && diagnose::run_in_progress(k).is_some()
                })
                .map(diagnose::key_of)
                .collect();
            let named: BTreeSet<(String, String)> = dependencies_elsewhere(&mine, ns);
            mine.extend(other.into_iter().filter(|v| {
                named.contains(&(obj::namespace(v).to_string(), obj::name(v).to_string()))
            }));
            Ok((mine, Some(held)))
        }
        Err(e) if e.status_code() == Some(403) => {
            let mine = namespace_and_dependencies(conn, r, ns, notes).await?;
            Ok((mine, None))
        }
        Err(e) => Err(e),
    }
}

/// The dependencies (`spec.dependsOn`) of `kustomizations` that live in another namespace
/// than `ns`, as `(namespace, name)`.
fn dependencies_elsewhere(kustomizations: &[Value], ns: &str) -> BTreeSet<(String, String)> {
    let mut extra = BTreeSet::new();
    for k in kustomizations {
        for d in obj::arr(k, &["spec", "dependsOn"]) {
            if let Some(dns) = obj::s(d, &["namespace"]).filter(|d| !d.is_empty() && *d != ns) {
                extra.insert((dns.to_string(), obj::s(d, &["name"]).unwrap_or("").into()));
            }
        }
    }
    extra
}

/// Without list permission across namespaces: the namespace's Kustomizations (1 list), plus
/// the dependencies they name in other namespaces (see [`read_kustomizations`]).
async fn namespace_and_dependencies(
    conn: &Connection,
    r: &Reader,
    ns: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<Value>> {
    let mut kustomizations = r
        .list(conn, &ks_ar(), Some(ns), &ListParams::default())
        .await?;
    {
        let extra = dependencies_elsewhere(&kustomizations, ns);
        // One list whatever the number of such dependencies: the namespace's when they all
        // live in one, else all namespaces (filtered to the ones named). Without list
        // permission there, one list per namespace; a namespace we may not read leaves its
        // dependencies out (they read as missing, with a note).
        if !extra.is_empty() {
            let nss: BTreeSet<&str> = extra.iter().map(|(n, _)| n.as_str()).collect();
            let keep = |v: &Value| {
                extra.contains(&(obj::namespace(v).to_string(), obj::name(v).to_string()))
            };
            let one = (nss.len() == 1).then(|| *nss.iter().next().unwrap());
            match r.list(conn, &ks_ar(), one, &ListParams::default()).await {
                Ok(v) => kustomizations.extend(v.into_iter().filter(keep)),
                Err(e) if e.status_code() == Some(403) && one.is_none() => {
                    for dns in nss {
                        match r
                            .list(conn, &ks_ar(), Some(dns), &ListParams::default())
                            .await
                        {
                            Ok(v) => kustomizations.extend(v.into_iter().filter(keep)),
                            Err(e) if e.status_code() == Some(403) => {
                                notes.push(format!("dependencies in namespace {dns} not read: {e}"))
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
                Err(e) if e.status_code() == Some(403) => notes.push(format!(
                    "dependencies in namespace {} not read: {e}",
                    one.unwrap_or("")
                )),
                Err(e) => return Err(e),
            }
        }
    }
    Ok(kustomizations)
}

/// The sources the Kustomizations read: one list per referenced kind, in one namespace or
/// all; a kind not served or not readable is a note.
async fn read_sources(
    conn: &Connection,
    r: &Reader,
    ks_ns: Option<&str>,
    kustomizations: &[Value],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>> {
    // Sources: one list per referenced kind, in one namespace or all.
    let mut src_kinds: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for k in kustomizations {
        let (kind, ns, _) = source_ref(k);
        src_kinds.entry(kind).or_default().insert(ns);
    }
    let mut sources = Vec::new();
    for (kind, nss) in &src_kinds {
        let Some(ar) = api_resource("source.toolkit.fluxcd.io", kind) else {
            notes.push(format!("source kind {kind} is not read by kubectl unstick"));
            continue;
        };
        let lists: Vec<Option<&str>> = if nss.len() == 1 && ks_ns.is_some() {
            vec![nss.iter().next().map(String::as_str)]
        } else {
            vec![None]
        };
        for ns in lists {
            match r.list(conn, &ar, ns, &ListParams::default()).await {
                Ok(v) => sources.extend(v),
                Err(e) if e.status_code() == Some(404) => {
                    notes.push(format!("{kind} is not served by this cluster ({e})"))
                }
                Err(e) if e.status_code() == Some(403) => {
                    notes.push(format!("sources not read: {e}"))
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(sources)
}

/// The controller Deployments read by [`read_controllers`].
struct Controllers {
    controller: Option<Value>,
    source_controller: Option<Value>,
    kustomize_controllers: Vec<Value>,
    source_controllers: Vec<Value>,
    helm_controller: Option<Value>,
    helm_controller_read: bool,
}

/// kustomize-controller (the scope's), source-controller beside it, and the shards and
/// helm-controller when needed ([`other_controllers`]).
async fn read_controllers(
    conn: &Connection,
    r: &Reader,
    scope: &Scope,
    kustomizations: &[Value],
    sources: &[Value],
    notes: &mut Vec<String>,
) -> Result<Controllers> {
    // Controller.
    let dep_ar = Kind::Deployment.api_resource("v1");
    let controller = match r
        .get(
            conn,
            &dep_ar,
            &scope.controller.namespace,
            &scope.controller.name,
        )
        .await
    {
        Ok(Some(v)) => Some(v),
        Ok(None) => {
            notes.push(format!(
                "kustomize-controller Deployment {}/{} not found (use --controller-namespace/--controller-name)",
                scope.controller.namespace, scope.controller.name
            ));
            None
        }
        Err(e) if e.status_code() == Some(403) => {
            notes.push(format!("controller not read: {e}"));
            None
        }
        Err(e) => return Err(e),
    };
    // source-controller, by the name `flux install` gives it beside kustomize-controller
    // (flux2 manifests/bases/source-controller): whether anything fetches. Absent or not
    // readable: not judged.
    let source_controller = match r
        .get(
            conn,
            &dep_ar,
            &scope.controller.namespace,
            "source-controller",
        )
        .await
    {
        Ok(v) => v,
        Err(e) if e.status_code() == Some(403) => None,
        Err(e) => return Err(e),
    };
    let mut c = Controllers {
        controller,
        source_controller,
        kustomize_controllers: Vec::new(),
        source_controllers: Vec::new(),
        helm_controller: None,
        helm_controller_read: false,
    };
    other_controllers(conn, r, scope, &mut c, kustomizations, sources, notes).await?;
    Ok(c)
}

/// The Leases (`(namespace, name, the Deployment's name)`) whose holder decides whether a controller leads: of
/// kustomize-controller (`controller`) and of source-controller (`source_controller`), only
/// for one that runs (a ready pod), runs with leader election ([`crate::leader`]) and is
/// needed: kustomize-controller by any Kustomization not suspended, source-controller by one
/// reading a GitRepository, OCIRepository or Bucket. Pure: the one selection of
/// [`gather`] (one GET each) and of a cache of watched Leases
/// ([`crate::cache::snapshot`]).
pub fn leases_wanted(
    controller: Option<&Value>,
    source_controller: Option<&Value>,
    kustomizations: &[Value],
) -> Vec<(String, String, String)> {
    let active: Vec<&Value> = kustomizations
        .iter()
        .filter(|k| !obj::b(k, &["spec", "suspend"]))
        .collect();
    let needs_source = active
        .iter()
        .any(|k| crate::diagnose::SOURCE_CONTROLLER_KINDS.contains(&source_ref(k).0.as_str()));
    let mut wanted = Vec::new();
    for (d, needed) in [
        (controller, !active.is_empty()),
        (source_controller, needs_source),
    ] {
        let Some(d) = d.filter(|_| needed) else {
            continue;
        };
        if crate::controller::not_running(d).is_some() {
            continue;
        }
        let f = crate::controller::ControllerFacts::from_deployment(d);
        if let Some(le) = f.leader_election {
            wanted.push((f.namespace, le.lease, f.name));
        }
    }
    wanted
}

/// The Leases of [`leases_wanted`], one GET each. `None` in the map: it does not exist; a
/// 403 leaves it unread (a note: leadership not judged).
async fn read_leases(
    conn: &Connection,
    r: &Reader,
    c: &Controllers,
    kustomizations: &[Value],
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, Option<Value>>> {
    let lease_ar = ApiResource {
        group: "coordination.k8s.io".into(),
        version: "v1".into(),
        api_version: "coordination.k8s.io/v1".into(),
        kind: "Lease".into(),
        plural: "leases".into(),
    };
    let mut leases = BTreeMap::new();
    for (ns, lease, name) in leases_wanted(
        c.controller.as_ref(),
        c.source_controller.as_ref(),
        kustomizations,
    ) {
        match r.get(conn, &lease_ar, &ns, &lease).await {
            Ok(v) => {
                leases.insert(format!("{ns}/{lease}"), v);
            }
            Err(e) if e.status_code() == Some(403) => notes.push(format!(
                "Lease {ns}/{lease} of {name} not read (leadership not judged): {e}"
            )),
            Err(e) => return Err(e),
        }
    }
    Ok(leases)
}

/// For each controller Deployment with replicas but no ready pod: its pods and the last log
/// lines of an exited container (see the comment inside).
async fn read_controller_pods(
    conn: &Connection,
    r: &Reader,
    scope: &Scope,
    c: &Controllers,
    leases: &BTreeMap<String, Option<Value>>,
    now: Timestamp,
    notes: &mut Vec<String>,
) -> Result<(Vec<Value>, BTreeMap<String, Vec<String>>)> {
    // A controller Deployment with replicas but no ready pod: its pods say why (the kubelet's
    // waiting reason, restart count, last exit), and a container that has exited its last
    // log lines (one list per such Deployment, one log read per exited container). Not
    // readable: the reason stays the Deployment's own (`no ready pod, 0 of N ready`).
    let mut controller_pods = Vec::new();
    let mut controller_logs = BTreeMap::new();
    let pod_ar = Kind::Pod.api_resource("v1");
    for d in [c.controller.as_ref(), c.source_controller.as_ref()]
        .into_iter()
        .flatten()
        .chain(c.helm_controller.iter())
        .chain(
            c.kustomize_controllers
                .iter()
                .filter(|d| obj::name(d) != scope.controller.name),
        )
        .chain(
            c.source_controllers
                .iter()
                .filter(|d| obj::name(d) != "source-controller"),
        )
    {
        // A running one whose Lease no pod of it seems to hold: its pods name the one that
        // does not lead.
        let leads_not = {
            let mut f = crate::controller::ControllerFacts::from_deployment(d);
            f.read_leadership(d, leases, &[], now);
            f.leader.is_some()
        };
        if !leads_not && crate::controller::not_running(d).is_none_or(|w| w == "0 replicas") {
            continue;
        }
        let Some(sel) = obj::at(d, &["spec", "selector", "matchLabels"])
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
        else {
            continue;
        };
        let sel: Vec<String> = sel
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        let dns = obj::namespace(d);
        let pods = match r
            .list(
                conn,
                &pod_ar,
                Some(dns),
                &ListParams::default().labels(&sel.join(",")),
            )
            .await
        {
            Ok(p) => p,
            Err(e) if e.status_code() == Some(403) => {
                notes.push(format!("pods of {dns}/{} not read: {e}", obj::name(d)));
                continue;
            }
            Err(e) => return Err(e),
        };
        if let Some(t) = crate::controller::pod_trouble(d, &pods, &BTreeMap::new())
            && t.last_exit_code.is_some()
        {
            // The ended run: `--previous` while the container restarts, its current log
            // when it is not restarted (`state.terminated`).
            let previous = t.reason != "Terminated";
            match r
                .pod_log_tail(conn, dns, &t.pod, &t.container, previous, 5)
                .await
            {
                Ok(lines) => {
                    controller_logs.insert(format!("{dns}/{}/{}", t.pod, t.container), lines);
                }
                Err(e) => notes.push(format!("log of {dns}/{} not read: {e}", t.pod)),
            }
        }
        controller_pods.extend(pods);
    }
    Ok((controller_pods, controller_logs))
}

/// The key names (never the values) of the Secret of each source that reports an
/// authentication failure.
async fn read_secret_keys(
    conn: &Connection,
    r: &Reader,
    sources: &[Value],
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, Vec<String>>> {
    // The key names of the Secret of a source that reports an authentication failure, to
    // tell a refused credential from none at all (one GET per such source; values are not
    // kept). Not readable: not judged.
    let mut secret_keys = BTreeMap::new();
    let secret_ar = Kind::Secret.api_resource("v1");
    for src in sources {
        // Ready=False, or FetchFailed=True while a retry runs (Ready=Unknown then).
        let Some(failed) = obj::condition(src, "Ready")
            .filter(|c| c.is_false())
            .or_else(|| obj::condition(src, "FetchFailed").filter(|c| c.is_true()))
        else {
            continue;
        };
        let auth = failed.reason() == "AuthenticationFailed"
            || cluster_loop::gitauth::is_auth_refused(failed.message());
        let Some(sname) = obj::s(src, &["spec", "secretRef", "name"]).filter(|_| auth) else {
            continue;
        };
        let sns = obj::namespace(src);
        match r.get(conn, &secret_ar, sns, sname).await {
            Ok(Some(sec)) => {
                let mut keys: Vec<String> = ["data", "stringData"]
                    .iter()
                    .filter_map(|f| sec.get(*f).and_then(Value::as_object))
                    .flat_map(|m| m.keys().cloned())
                    .collect();
                keys.sort();
                keys.dedup();
                secret_keys.insert(format!("{sns}/{sname}"), keys);
            }
            Ok(None) => {}
            Err(e) if e.status_code() == Some(403) => {
                notes.push(format!("secret {sns}/{sname} not read: {e}"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(secret_keys)
}

/// Status kinds wanted: (group, Kind) -> namespaces.
type Wanted = BTreeMap<(String, String), BTreeSet<String>>;
/// Custom kinds wanted: (group, version) -> Kind -> namespaces.
type CustomWanted = BTreeMap<(String, String), BTreeMap<String, BTreeSet<String>>>;

/// Which health-checked objects matter: those of Kustomizations whose check is in flight or
/// ended badly (a cheap pass over the conditions), as status kinds and custom kinds.
fn wanted_kinds(kustomizations: &[Value]) -> (Wanted, CustomWanted) {
    // Which health-checked objects matter: those of Kustomizations whose check is in flight
    // or ended badly (cheap shallow pass over the conditions).
    let mut wanted: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    // Kinds of other API groups (CRDs): (group, version) -> Kind -> namespaces.
    let mut custom: BTreeMap<(String, String), BTreeMap<String, BTreeSet<String>>> =
        BTreeMap::new();
    for k in kustomizations {
        let ready = obj::condition(k, "Ready");
        let rec = obj::condition(k, "Reconciling");
        let interesting = rec
            .is_some_and(|c| c.is_true() && c.message().starts_with("Running health checks"))
            || ready
                .is_some_and(|c| matches!(c.reason(), "HealthCheckFailed" | "HealthCheckCanceled"));
        if !interesting {
            continue;
        }
        for m in wait_set(k) {
            // A healthChecks entry may name the wrong namespace: its kind is listed in all
            // namespaces (ALL_NS), so the diagnosis can say where an object of that name is.
            let hc = m.origin == diagnose::Origin::HealthChecks;
            if STATUS_KINDS.contains(&(m.group.as_str(), m.kind.as_str())) {
                let e = wanted.entry((m.group, m.kind)).or_default();
                e.insert(m.namespace);
                if hc {
                    e.insert(ALL_NS.into());
                }
            } else if custom_group(&m.group) {
                let e = custom
                    .entry((m.group, m.version))
                    .or_default()
                    .entry(m.kind)
                    .or_default();
                e.insert(m.namespace);
                if hc {
                    e.insert(ALL_NS.into());
                }
            }
        }
        // Kinds quoted by the controller's message.
        if let Some(c) = obj::condition(k, "Ready") {
            for w in ["Deployment", "StatefulSet", "DaemonSet", "Job"] {
                if c.message().contains(&format!("{w}/")) {
                    let g = if w == "Job" { "batch" } else { "apps" };
                    wanted
                        .entry((g.into(), w.into()))
                        .or_default()
                        .insert(String::new());
                }
            }
        }
    }
    (wanted, custom)
}

/// The custom kinds: one discovery request per (group, version), then a list per served kind.
async fn read_custom_kinds(
    conn: &Connection,
    r: &Reader,
    custom: &CustomWanted,
    snap: &mut Snapshot,
    notes: &mut Vec<String>,
) -> Result<()> {
    // One discovery request per (group, version): a 404, or a kind it does not list, is a
    // missing CRD (kustomize-controller reads such objects as `Unknown`); a served kind is
    // listed like the status kinds (its generic kstatus: Ready condition, Reconciling, ...).
    for ((g, v), kinds) in custom {
        r.count();
        let gv = kube::core::GroupVersion::gv(g, if v.is_empty() { "v1" } else { v });
        match kube::discovery::oneshot::pinned_group(&conn.client, &gv).await {
            Ok(api_group) => {
                for (kind, nss) in kinds {
                    match api_group.recommended_kind(kind) {
                        Some((ar, _)) => {
                            let ns = one_namespace(nss);
                            match r.list(conn, &ar, ns, &ListParams::default()).await {
                                Ok(v) => {
                                    snap.objects.extend(v);
                                    snap.listed_kinds.insert(format!("{g}/{kind}"));
                                }
                                Err(e) if matches!(e.status_code(), Some(403) | Some(404)) => {
                                    notes.push(format!("{kind} not read: {e}"))
                                }
                                Err(e) => return Err(e),
                            }
                        }
                        None => {
                            snap.unserved_kinds.insert(format!("{g}/{kind}"));
                        }
                    }
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {
                for kind in kinds.keys() {
                    snap.unserved_kinds.insert(format!("{g}/{kind}"));
                }
            }
            Err(e) => notes.push(format!("API group {g}/{v} not read: {e}")),
        }
    }
    Ok(())
}

/// The status kinds: one list each. Returns the namespaces of the objects read.
async fn read_status_kinds(
    conn: &Connection,
    r: &Reader,
    wanted: &Wanted,
    snap: &mut Snapshot,
    notes: &mut Vec<String>,
) -> Result<BTreeSet<String>> {
    let mut workload_ns: BTreeSet<String> = BTreeSet::new();
    for ((g, kind), nss) in wanted {
        let Some(ar) = api_resource(g, kind) else {
            continue;
        };
        let ns = one_namespace(nss);
        let nss: Vec<&String> = nss
            .iter()
            .filter(|n| !n.is_empty() && n.as_str() != ALL_NS)
            .collect();
        match r.list(conn, &ar, ns, &ListParams::default()).await {
            Ok(v) => {
                snap.objects.extend(v);
                snap.listed_kinds.insert(format!("{g}/{kind}"));
                workload_ns.extend(nss.iter().map(|s| s.to_string()));
            }
            Err(e) if matches!(e.status_code(), Some(403) | Some(404)) => {
                notes.push(format!("{kind} not read: {e}"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(workload_ns)
}

/// The workloads of the releases of HelmReleases that are not Ready (see the comment
/// inside); adds their namespaces to `workload_ns`.
async fn read_release_workloads(
    conn: &Connection,
    r: &Reader,
    snap: &mut Snapshot,
    workload_ns: &mut BTreeSet<String>,
    notes: &mut Vec<String>,
) -> Result<()> {
    // The workloads of the releases of HelmReleases that are not Ready: helm-controller labels
    // every object of a release with the HelmRelease's name and namespace (v1.4
    // internal/postrender/build.go `NewOriginLabels`), so one list per workload kind with
    // that label, in the release namespace, finds the pods an install or upgrade waits on.
    let release_ns: BTreeSet<String> = snap
        .objects
        .iter()
        .filter(|o| {
            obj::group(o) == "helm.toolkit.fluxcd.io"
                && obj::kind(o) == "HelmRelease"
                && !obj::condition(o, "Ready").is_some_and(|c| c.is_true())
        })
        .map(|o| cluster_loop::helm::facts(o).release_namespace)
        .collect();
    if !release_ns.is_empty() {
        let ns = one_namespace(&release_ns);
        let lp = ListParams::default().labels(cluster_loop::helm::ORIGIN_NAME_LABEL);
        let seen: BTreeSet<String> = snap
            .objects
            .iter()
            .filter_map(|o| obj::s(o, &["metadata", "uid"]).map(String::from))
            .collect();
        for (g, kind) in [
            ("apps", "Deployment"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
        ] {
            let Some(ar) = api_resource(g, kind) else {
                continue;
            };
            match r.list(conn, &ar, ns, &lp).await {
                Ok(v) => {
                    snap.objects.extend(v.into_iter().filter(|o| {
                        obj::s(o, &["metadata", "uid"]).is_none_or(|u| !seen.contains(u))
                            && release_ns.contains(obj::namespace(o))
                    }));
                }
                Err(e) if matches!(e.status_code(), Some(403) | Some(404)) => {
                    notes.push(format!("{kind} of HelmRelease releases not read: {e}"))
                }
                Err(e) => return Err(e),
            }
        }
        workload_ns.extend(release_ns.iter().cloned());
    }
    Ok(())
}

/// Pods and Warning Events of the workloads' namespace (one list each), when any object was
/// read.
async fn read_pods_and_events(
    conn: &Connection,
    r: &Reader,
    workload_ns: &BTreeSet<String>,
    snap: &mut Snapshot,
    notes: &mut Vec<String>,
) -> Result<()> {
    if !snap.objects.is_empty() {
        let pod_ar = Kind::Pod.api_resource("v1");
        let ns = (workload_ns.len() == 1).then(|| workload_ns.iter().next().unwrap().as_str());
        match r.list(conn, &pod_ar, ns, &ListParams::default()).await {
            Ok(v) => snap.pods = v,
            Err(e) if e.status_code() == Some(403) => notes.push(format!("pods not read: {e}")),
            Err(e) => return Err(e),
        }
        let ev_ar =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Event"), "events");
        match r
            .list(
                conn,
                &ev_ar,
                ns,
                &ListParams::default().fields("type=Warning"),
            )
            .await
        {
            Ok(v) => snap.events = v,
            Err(e) if matches!(e.status_code(), Some(403) | Some(400)) => {
                notes.push(format!("events not read: {e}"))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Set by SIGINT/SIGTERM. The executor finishes a started suspend+resume before honouring
/// it; waits end at once.
#[derive(Clone, Default)]
pub struct Interrupt {
    flag: Arc<AtomicBool>,
    notify: Arc<Notify>,
}

impl Interrupt {
    /// Install handlers for SIGINT and SIGTERM (replacing the default "die now" action, so a
    /// Ctrl-C can never land between our suspend and our resume).
    pub fn install() -> Result<Interrupt> {
        let me = Interrupt::default();
        let mut signals = cluster_loop::signals::Signals::try_install()
            .map_err(|e| Error::Other(format!("cannot install SIGINT/SIGTERM handlers: {e}")))?;
        let m = me.clone();
        tokio::spawn(async move {
            signals.recv().await;
            m.flag.store(true, Ordering::SeqCst);
            m.notify.notify_waiters();
        });
        Ok(me)
    }

    /// Whether a signal arrived.
    pub fn fired(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Resolves when a signal arrives.
    pub async fn wait(&self) {
        loop {
            let n = self.notify.notified();
            if self.fired() {
                return;
            }
            n.await;
        }
    }
}

fn pp() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

fn step_ar(api_version: &str, kind: &str) -> Result<ApiResource> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let mut ar = api_resource(group, kind)
        .ok_or_else(|| Error::Other(format!("cannot write {kind} ({api_version})")))?;
    ar.version = version.to_string();
    ar.api_version = api_version.to_string();
    Ok(ar)
}

/// Send a merge patch; on 409 (the resourceVersion in the patch is stale) call `refresh`
/// to rebuild the patch from a fresh read, up to 5 attempts. `refresh` returns `Ok(None)`
/// to stop (the write is no longer wanted).
async fn patch_with_retry(
    conn: &Connection,
    ar: &ApiResource,
    ns: &str,
    name: &str,
    mut patch: Value,
    refresh: impl AsyncFn(&Value) -> Result<Option<Value>>,
) -> Result<Option<Value>> {
    let api: Api<DynamicObject> = Api::namespaced_with(conn.client.clone(), ns, ar);
    let ctx = conn
        .ctx()
        .verb("patch")
        .api_resource(ar)
        .namespace(Some(ns))
        .name(name);
    for attempt in 0..5 {
        match api.patch(name, &pp(), &Patch::Merge(&patch)).await {
            Ok(o) => return Ok(Some(to_value(o, ar))),
            Err(e) => {
                let err = Error::from_kube(e, ctx.clone());
                if err.is_conflict() && attempt < 4 {
                    match refresh(&patch).await? {
                        Some(p) => {
                            patch = p;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
                return Err(err);
            }
        }
    }
    unreachable!()
}

/// What the executor did.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Executed {
    /// One line per write done.
    pub done: Vec<String>,
    /// resourceVersion/generation of the Kustomization after our last write.
    pub generation_after: Option<i64>,
    /// True when a signal arrived during the writes (they were completed, including the
    /// resume).
    pub interrupted: bool,
    /// When the writes began (after the diagnosis the plan came from): a run that started
    /// later is a fresh run, not the one that was in flight.
    pub started_at: Option<Timestamp>,
}

/// Resume a Kustomization we suspended (its marker equals `marker`, or any marker when
/// `marker` is `None`, i.e. healing an interrupted run). Never touches one without our
/// marker unless `force`. Returns the object after the write, or `None` when nothing was
/// done (already resumed, or suspended by someone else). The patch carries the
/// resourceVersion it decided on, so a change in between is a 409 that re-reads and decides
/// again.
pub async fn resume_ours(
    conn: &Connection,
    ns: &str,
    name: &str,
    marker: Option<&str>,
    force: bool,
) -> Result<Option<Value>> {
    resume_ours_from(conn, ns, name, marker, force, None).await
}

/// [`resume_ours`] deciding on `known` (the object as just listed) instead of a fresh GET:
/// one request per resume (the PATCH) when nothing changed since the list, which keeps
/// `--all`'s healing at one write per Kustomization.
pub async fn resume_ours_from(
    conn: &Connection,
    ns: &str,
    name: &str,
    marker: Option<&str>,
    force: bool,
    known: Option<&Value>,
) -> Result<Option<Value>> {
    let ar = ks_ar();
    let r = Reader::default();
    let decide = |cur: &Value| -> Option<Value> {
        let ours = match (obj::annotation(cur, SUSPEND_MARKER), marker) {
            (Some(m), Some(want)) => m == want,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let suspended = obj::b(cur, &["spec", "suspend"]);
        if !(ours || force && suspended) {
            return None;
        }
        Some(resume_patch(obj::s(cur, &["metadata", "resourceVersion"])))
    };
    let cur = match known {
        Some(k) => k.clone(),
        None => match r.get(conn, &ar, ns, name).await? {
            Some(c) => c,
            None => return Ok(None),
        },
    };
    let Some(patch) = decide(&cur) else {
        return Ok(None);
    };
    patch_with_retry(conn, &ar, ns, name, patch, async |_| {
        let Some(cur) = r.get(conn, &ar, ns, name).await? else {
            return Ok(None);
        };
        Ok(decide(&cur))
    })
    .await
}

/// Run the plan's writes in order. A suspend is always followed by its resume, even when a
/// signal arrives in between (the signal is noted and honoured by the caller afterwards).
/// If the resume itself fails, the error names the object and the marker left on it.
/// `force_resume`: a resume step may resume a Kustomization without our marker.
pub async fn execute(
    conn: &Connection,
    plan: &Plan,
    intr: &Interrupt,
    force_resume: bool,
) -> Result<Executed> {
    let mut run = Execution {
        conn,
        intr,
        force_resume,
        ex: Executed {
            started_at: Some(Timestamp::now()),
            ..Executed::default()
        },
        r: Reader::default(),
        suspended: None,
        source_requested: None,
    };
    for step in &plan.steps {
        match step {
            Step::Patch {
                api_version,
                kind,
                namespace,
                name,
                patch,
                why,
            } => {
                let ar = step_ar(api_version, kind)?;
                let is_resume = patch.pointer("/spec/suspend") == Some(&Value::Null);
                if is_resume {
                    run.resume(kind, namespace, name, why).await?;
                } else {
                    run.patch(&ar, kind, namespace, name, patch, why).await?;
                }
            }
            Step::DeleteControllerPods {
                namespace,
                selector,
                why,
            } => {
                run.delete_controller_pods(namespace, selector, why).await?;
            }
        }
    }
    run.ex.interrupted = intr.fired();
    Ok(run.ex)
}

/// What [`execute`] carries from one step of the plan to the next: the connection, the
/// interrupt handle and `--force-resume`, and what the steps did so far.
struct Execution<'a> {
    conn: &'a Connection,
    intr: &'a Interrupt,
    /// A resume step may resume a Kustomization without our marker.
    force_resume: bool,
    /// What was done so far.
    ex: Executed,
    r: Reader,
    /// The marker value of the suspend we did, until its resume is done.
    suspended: Option<String>,
    /// A source we asked to reconcile (api resource, namespace, name, requestedAt), until a
    /// controller restart has waited for it.
    source_requested: Option<(ApiResource, String, String, String)>,
}

impl Execution<'_> {
    /// A resume step: resumes the Kustomization if it still carries the marker of our suspend
    /// ([`resume_ours`]). A failed resume is an error naming the marker left on it.
    async fn resume(&mut self, kind: &str, namespace: &str, name: &str, why: &str) -> Result<()> {
        let marker = self.suspended.clone();
        let res = resume_ours(
            self.conn,
            namespace,
            name,
            marker.as_deref(),
            self.force_resume,
        )
        .await;
        match res {
            Ok(Some(o)) => {
                self.ex.generation_after = obj::i(&o, &["metadata", "generation"]);
                self.ex
                    .done
                    .push(format!("resumed {kind} {namespace}/{name}: {why}"));
            }
            Ok(None) => self.ex.done.push(format!(
                "{kind} {namespace}/{name} was not resumed: it no longer carries our marker (someone else changed it)"
            )),
            Err(e) => {
                return Err(Error::Other(format!(
                    "{e}\n{kind} {namespace}/{name} may still be suspended with annotation {SUSPEND_MARKER}; run `kubectl unstick ks/{name} -n {namespace}` again to resume it"
                )));
            }
        }
        self.suspended = None;
        Ok(())
    }

    /// Any other patch step (a suspend re-reads the object and stops when someone else
    /// suspended it meanwhile: a finding). A reconcile request on a source is remembered for
    /// the next controller restart.
    async fn patch(
        &mut self,
        ar: &ApiResource,
        kind: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
        why: &str,
    ) -> Result<()> {
        let (conn, r) = (self.conn, &self.r);
        let is_suspend = patch.pointer("/spec/suspend") == Some(&Value::Bool(true));
        let marker = patch
            .pointer(&format!(
                "/metadata/annotations/{}",
                SUSPEND_MARKER.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .map(String::from);
        let base = patch.clone();
        let res = patch_with_retry(conn, ar, namespace, name, patch.clone(), async |_| {
            if !is_suspend {
                return Ok(Some(base.clone()));
            }
            // Re-read: if someone else suspended it meanwhile, stop.
            let Some(cur) = r.get(conn, ar, namespace, name).await? else {
                return Ok(None);
            };
            if obj::b(&cur, &["spec", "suspend"]) {
                return Ok(None);
            }
            let mut p = base.clone();
            p["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
            Ok(Some(p))
        })
        .await?;
        if kind != "Kustomization"
            && let Some(token) = patch
                .pointer("/metadata/annotations/reconcile.fluxcd.io~1requestedAt")
                .and_then(Value::as_str)
        {
            self.source_requested = Some((
                ar.clone(),
                namespace.to_string(),
                name.to_string(),
                token.to_owned(),
            ));
        }
        match res {
            Some(o) => {
                self.ex.generation_after = obj::i(&o, &["metadata", "generation"]);
                self.ex
                    .done
                    .push(format!("patched {kind} {namespace}/{name}: {why}"));
                if is_suspend {
                    self.suspended = marker;
                }
                Ok(())
            }
            None => Err(Error::Finding(format!(
                "{kind} {namespace}/{name} was suspended by someone else while we prepared; not touching it"
            ))),
        }
    }

    /// A controller restart: waits first for the source we asked to reconcile
    /// ([`wait_source_handled`]), then deletes the controller's pods (`selector` in
    /// `namespace`).
    async fn delete_controller_pods(
        &mut self,
        namespace: &str,
        selector: &str,
        why: &str,
    ) -> Result<()> {
        let (conn, intr) = (self.conn, self.intr);
        if let Some((sar, sns, sname, token)) = self.source_requested.take() {
            // source-controller records the request in lastHandledReconcileAt when
            // the fetch is done (fluxcd/pkg runtime reconcile.ReturnWithSummary);
            // bounded by its default timeout (60s) plus a margin.
            let handled = wait_source_handled(conn, &sar, &sns, &sname, &token, intr).await?;
            self.ex.done.push(if handled {
                format!("{} {sns}/{sname} fetched the latest revision", sar.kind)
            } else {
                format!(
                    "{} {sns}/{sname} did not handle the request within 90s; restarting anyway (the fresh run may use its previous artifact)",
                    sar.kind
                )
            });
        }
        let ar = Kind::Pod.api_resource("v1");
        let pods = self
            .r
            .list(
                conn,
                &ar,
                Some(namespace),
                &ListParams::default().labels(selector),
            )
            .await?;
        let api: Api<DynamicObject> = Api::namespaced_with(conn.client.clone(), namespace, &ar);
        for p in pods {
            let n = obj::name(&p).to_string();
            let ctx = conn
                .ctx()
                .verb("delete")
                .api_resource(&ar)
                .namespace(Some(namespace.to_string()))
                .name(n.clone());
            api.delete(&n, &DeleteParams::default())
                .await
                .map_err(|e| Error::from_kube(e, ctx))?;
            self.ex
                .done
                .push(format!("deleted pod {namespace}/{n}: {why}"));
        }
        Ok(())
    }
}

/// Waits until the source's `status.lastHandledReconcileAt == token` (true), 90 s pass or a
/// signal arrives (false): one shared watch + deadline wait ([`cluster_loop::wait::wait_for`]:
/// a list then a watch from its resourceVersion, re-listing on 410 Gone), never polling.
/// Errors: the API errors `wait_for` returns (401/403/404, the first list failing).
async fn wait_source_handled(
    conn: &Connection,
    ar: &ApiResource,
    ns: &str,
    name: &str,
    token: &str,
    intr: &Interrupt,
) -> Result<bool> {
    let api: Api<DynamicObject> = Api::namespaced_with(conn.client.clone(), ns, ar);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let progress = Progress::hidden();
    let wait = cluster_loop::wait::wait_for(
        &api,
        name,
        |o: Option<&DynamicObject>| {
            o.and_then(|o| o.data.pointer("/status/lastHandledReconcileAt"))
                .and_then(Value::as_str)
                == Some(token)
        },
        deadline,
        &progress,
        conn.ctx().api_resource(ar).namespace(Some(ns.to_string())),
    );
    tokio::select! {
        out = wait => Ok(out?.satisfied),
        _ = intr.wait() => Ok(false),
    }
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Proof {
    /// Our request was handled (or the new generation observed) and Ready=True at the
    /// source's current revision.
    Recovered,
    /// The run we triggered ended not Ready.
    FailedAgain,
    /// The deadline passed first.
    TimedOut,
    /// Interrupted by a signal.
    Interrupted,
}

/// Whether `ks` is Ready=True at `revision` with nothing in flight (a successful run
/// deletes the Reconciling condition and sets observedGeneration).
pub fn ready_at(ks: &Value, revision: Option<&str>) -> bool {
    let ready = obj::condition(ks, "Ready").is_some_and(|c| c.is_true());
    let reconciling = obj::condition(ks, "Reconciling").is_some_and(|c| c.is_true());
    let gen_ok =
        obj::i(ks, &["metadata", "generation"]) == obj::i(ks, &["status", "observedGeneration"]);
    ready
        && !reconciling
        && gen_ok
        && (revision.is_none()
            || diagnose::same_revision(revision, obj::s(ks, &["status", "lastAppliedRevision"])))
}

/// Our trigger was processed and no run is in progress: lastHandledReconcileAt == token
/// (finalizeStatus copies the requestedAt value the run read), or (no token, after a resume)
/// a run observed `generation`: status.observedGeneration (set only on success) or the Ready
/// condition's observedGeneration (set on every outcome, fluxcd/pkg runtime/conditions) —
/// the flux2 `resume` wait reads the same.
pub fn handled(ks: &Value, token: Option<&str>, generation: Option<i64>) -> bool {
    let idle = diagnose::run_in_progress(ks).is_none();
    match token {
        Some(t) => obj::s(ks, &["status", "lastHandledReconcileAt"]) == Some(t) && idle,
        None => {
            let want = generation.unwrap_or(i64::MAX);
            let og = obj::i(ks, &["status", "observedGeneration"]).unwrap_or(-1);
            let rog = obj::condition(ks, "Ready")
                .and_then(|c| c.observed_generation)
                .unwrap_or(-1);
            (og >= want || rog >= want) && idle
        }
    }
}

/// How a proof wait ended, with what it saw last.
#[derive(Debug, Clone)]
pub struct Waited {
    /// The verdict.
    pub proof: Proof,
    /// The Kustomization as last read (`None` when never read or deleted).
    pub last: Option<Value>,
    /// One line: what the wait saw last (what it was still waiting on at the deadline, or
    /// the terminal state that ended it).
    pub last_seen: Option<String>,
}

/// Longest pause between two judgements while the Kustomization waits on something that
/// neither watch shows (a dependency in another namespace).
const RECHECK: Duration = Duration::from_secs(10);

/// Watch until [`crate::proof::judge`] gives a verdict or the deadline passes. Each judgement
/// reads a fresh [`Snapshot`] of the Kustomization's namespace with [`gather`]; judgements
/// run at every change of a Kustomization in that namespace, of the Kustomization's source
/// object, and at least every 10s. [`crate::proof::Verdict::Recovered`] is
/// [`Proof::Recovered`]; [`crate::proof::Verdict::Terminal`] (only when nothing upstream is
/// still moving: our request handled, the source idle and done with our request, the source's
/// revision attempted, dependencies settled) is [`Proof::FailedAgain`];
/// [`crate::proof::Verdict::Moving`] keeps waiting, and at the deadline is
/// [`Proof::TimedOut`] with what it was still waiting on.
#[allow(clippy::too_many_arguments)]
pub async fn wait_proof(
    conn: &Connection,
    scope: &Scope,
    ns: &str,
    name: &str,
    expect: &crate::proof::Expect<'_>,
    deadline: Duration,
    progress: &Progress,
    intr: &Interrupt,
) -> Result<Waited> {
    use crate::proof::{Verdict, judge};
    use futures::{FutureExt, StreamExt};
    use kube::runtime::{WatchStreamExt, watcher};

    let ar = ks_ar();
    let api: Api<DynamicObject> = Api::namespaced_with(conn.client.clone(), ns, &ar);
    let until = tokio::time::Instant::now() + deadline;
    let scope = Scope {
        namespace: Some(ns.to_string()),
        controller: scope.controller.clone(),
    };
    let changes = watcher(api.clone(), watcher::Config::default()).default_backoff();
    let mut changes = std::pin::pin!(changes);
    let mut watching = true;
    // The source's watch starts once the first snapshot named it.
    let mut source_changes: Option<std::pin::Pin<Box<dyn futures::Stream<Item = ()> + Send>>> =
        None;
    let mut last = None;
    loop {
        let (snap, _) = gather(conn, &scope, &Reader::default()).await?;
        let engine = diagnose::Engine::new(&snap);
        let ks = snap
            .kustomizations
            .iter()
            .find(|k| obj::namespace(k) == ns && obj::name(k) == name);
        last = ks.cloned().or(last);
        if source_changes.is_none()
            && let Some(src) = ks.and_then(|k| engine.source_obj(k))
            && let Some(sar) = api_resource(obj::group(src), obj::kind(src))
        {
            let sapi: Api<DynamicObject> =
                Api::namespaced_with(conn.client.clone(), obj::namespace(src), &sar);
            let cfg =
                watcher::Config::default().fields(&format!("metadata.name={}", obj::name(src)));
            source_changes = Some(Box::pin(watcher(sapi, cfg).default_backoff().map(|_| ())));
        }
        let last_seen = match judge(&engine, ns, name, expect) {
            Verdict::Recovered => {
                return Ok(Waited {
                    proof: Proof::Recovered,
                    last,
                    last_seen: None,
                });
            }
            Verdict::Terminal(m) => {
                return Ok(Waited {
                    proof: Proof::FailedAgain,
                    last,
                    last_seen: Some(m),
                });
            }
            Verdict::Moving(m) => {
                progress.set_status(m.clone());
                Some(m)
            }
        };
        let source_next = async {
            match source_changes.as_mut() {
                Some(s) => {
                    s.next().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            ev = changes.next(), if watching => {
                watching = ev.is_some();
            }
            _ = source_next => {}
            _ = tokio::time::sleep(RECHECK) => {}
            _ = tokio::time::sleep_until(until) => {
                return Ok(Waited { proof: Proof::TimedOut, last, last_seen });
            }
            _ = intr.wait() => {
                return Ok(Waited { proof: Proof::Interrupted, last, last_seen });
            }
        }
        // Coalesce a burst of events into one judgement.
        while let Some(Some(_)) = changes.next().now_or_never() {}
        if let Some(s) = source_changes.as_mut() {
            while let Some(Some(_)) = s.next().now_or_never() {}
        }
    }
}
