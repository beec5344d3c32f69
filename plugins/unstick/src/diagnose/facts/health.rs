//! Facts of the health check: the wait set exactly as kustomize-controller builds it
//! ([`wait_set`]), the in-flight check ([`HealthCheck`]), and each member that is not Current
//! ([`BlockingObject`]) with its kstatus read as the controller reads it, and when the check
//! fails fast.

use crate::obj;
use cluster_loop::kstatus;
use cluster_loop::kstatus::Status as KStatus;
use jiff::Timestamp;
use regex::Regex;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::LazyLock;

use crate::diagnose::*;

/// An in-flight (or just ended) health check.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// Revision under check, from the Reconciling message.
    pub revision: String,
    /// Start of the run: the Reconciling condition's lastTransitionTime (the condition turns
    /// True when the run starts fetching, so the health check itself started at or after it).
    pub started_at: Option<Timestamp>,
    /// Timeout in seconds: from the message (`with a timeout of 5m0s`), else the effective
    /// timeout of the spec.
    pub timeout_secs: f64,
    /// `started_at + timeout`: the latest time the controller ends the check on its own.
    pub deadline: Option<Timestamp>,
    /// Seconds from the snapshot to the deadline (negative: overdue).
    pub time_left_secs: Option<i64>,
    /// When the controller fails the check early (fail-fast, kustomize-controller v1.1+ unless
    /// `DisableFailFastBehavior`: ssa WaitForSet stops as soon as a member is Failed), when
    /// that comes before the deadline: a member already Failed (its next 5s poll), or a
    /// Deployment that turns Failed (`ProgressDeadlineExceeded`) at its Progressing
    /// condition's lastUpdateTime + `spec.progressDeadlineSeconds` (default 600s; kubernetes
    /// pkg/controller/deployment/util `DeploymentTimedOut`) while it is still not Current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_fast_at: Option<Timestamp>,
    /// Why it fails fast then (`Deployment/ns/name passes its progressDeadlineSeconds (600s)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_fast_because: Option<String>,
    /// The earliest predicted end of the check: `fail_fast_at`, else `deadline`.
    pub ends_at: Option<Timestamp>,
    /// Seconds from the snapshot to `ends_at` (negative: overdue).
    pub ends_in_secs: Option<i64>,
    /// The wait set is not empty and every member was read (its kind listed, or its CRD known
    /// missing), so
    /// an empty [`Diagnosis::blocking`] means every one is Current now, not "not read".
    #[serde(skip)]
    pub wait_set_read: bool,
}

/// A health-checked object that is not Current.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingObject {
    /// `Kind/namespace/name`.
    pub object: String,
    /// Where the wait set got it: `inventory` (`spec.wait`), `healthChecks`, or `message`
    /// (only named by the controller's message).
    pub origin: String,
    /// kstatus now as kustomize-controller reads it ([`kstatus::compute_health_at`]):
    /// `NotFound` when its kind was listed and it is absent, `Unknown` when the cluster does
    /// not serve its kind (missing CRD).
    pub kstatus: String,
    /// kstatus message and why it holds the check, or the status quoted by the controller
    /// when the object was not read.
    pub message: String,
    /// What frees it, for its kind and state (resume a suspended Flux object, let a
    /// Terminating object go, fix a healthChecks namespace, install a missing CRD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Pod-level reasons below a workload (for a HelmRelease: below the workloads of its
    /// release, found by helm-controller's origin labels).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodReason>,
    /// Its own controller reports an action in progress within its own timeout and no
    /// failure is visible: waiting, not stuck. A HelmRelease whose install/upgrade runs, none
    /// failed, no pod of its release failing; a Deployment, StatefulSet or DaemonSet rolling
    /// out with no pod reason below it (`Engine::rollout_progressing`: e.g. waiting out
    /// `minReadySeconds`). `false` for every other kind and state.
    pub progressing: bool,
}

/// One entry of the ssa WaitForSet error list: `Deployment/apps/podinfo status: 'InProgress'`
/// (fluxcd/pkg ssa `FmtObjMetadata`: `Kind/namespace/name`, `Kind/name` when cluster-scoped).
static HC_ENTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([A-Za-z0-9]+)/(?:([a-z0-9.-]+)/)?([a-z0-9.:-]+) status: '(\w+)'").unwrap()
});

impl<'a> Engine<'a> {
    /// The earliest time the health check fails fast, with why: a blocking member already
    /// Failed ends it at the next 5s poll; a blocking Deployment turns Failed at its
    /// Progressing condition's lastUpdateTime + `progressDeadlineSeconds`. `None` when nothing
    /// will fail.
    pub(in crate::diagnose) fn fail_fast_at(
        &self,
        blocking: &[BlockingObject],
    ) -> Option<(Timestamp, String)> {
        let now = self.now();
        let mut best: Option<(Timestamp, String)> = None;
        let mut consider = |at: Timestamp, why: String| {
            if best.as_ref().is_none_or(|(b, _)| at < *b) {
                best = Some((at, why));
            }
        };
        for b in blocking {
            if b.kstatus == "Failed" {
                consider(
                    now.checked_add(secs(5.0)).unwrap_or(now),
                    format!(
                        "{} is Failed: the controller's next 5s poll ends the check with \"failed early due to stalled resources\"",
                        b.object
                    ),
                );
                continue;
            }
            let parts: Vec<&str> = b.object.split('/').collect();
            if parts.len() != 3 || parts[0] != "Deployment" {
                continue;
            }
            let Some(d) = self.idx.objects_by_id.get(&(
                parts[0].to_string(),
                parts[1].to_string(),
                parts[2].to_string(),
            )) else {
                continue;
            };
            let pds = obj::i(d, &["spec", "progressDeadlineSeconds"]).unwrap_or(600);
            let Some(p) = obj::arr(d, &["status", "conditions"])
                .iter()
                .find(|c| obj::s(c, &["type"]) == Some("Progressing"))
            else {
                continue;
            };
            if obj::s(p, &["reason"]) == Some("NewReplicaSetAvailable") {
                continue;
            }
            let Some(from) = obj::s(p, &["lastUpdateTime"]).and_then(obj::parse_time) else {
                continue;
            };
            if let Ok(at) = from.checked_add(secs(pds as f64)) {
                consider(
                    at.max(now),
                    format!(
                        "{} passes its progressDeadlineSeconds ({pds}s) then, turns Failed (ProgressDeadlineExceeded) and the check fails fast (\"failed early due to stalled resources\", kustomize-controller v1.1+)",
                        b.object
                    ),
                );
            }
        }
        best
    }

    /// Members of the wait set ([`wait_set`]) that are not Current now, in wait-set order.
    pub(in crate::diagnose) fn blocking_in_flight(&self, ks: &Value) -> Vec<BlockingObject> {
        wait_set(ks)
            .iter()
            .filter_map(|m| self.blocking_object(ks, m, None))
            .collect()
    }

    /// Objects named by a HealthCheckFailed/Canceled message (with the status the controller
    /// quoted), plus the other members of the wait set that are not Current now.
    pub(in crate::diagnose) fn blocking_after_check(
        &self,
        ks: &Value,
        message: &str,
    ) -> Vec<BlockingObject> {
        let set = wait_set(ks);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for c in HC_ENTRY.captures_iter(message) {
            let kind = c[1].to_string();
            let ns = c.get(2).map(|m| m.as_str()).unwrap_or("").to_string();
            let name = c[3].to_string();
            let quoted = c[4].to_string();
            let m = set
                .iter()
                .find(|m| m.kind == kind && m.namespace == ns && m.name == name)
                .cloned()
                .unwrap_or_else(|| WaitMember {
                    group: default_group(&kind).to_string(),
                    version: String::new(),
                    kind: kind.clone(),
                    namespace: ns.clone(),
                    name: name.clone(),
                    origin: Origin::Message,
                });
            seen.insert((kind, ns, name));
            if let Some(b) = self.blocking_object(ks, &m, Some(&quoted)) {
                out.push(b);
            }
        }
        for m in set {
            if seen.contains(&(m.kind.clone(), m.namespace.clone(), m.name.clone())) {
                continue;
            }
            if let Some(b) = self.blocking_object(ks, &m, None) {
                out.push(b);
            }
        }
        out
    }

    /// How kustomize-controller on this version reads health ([`kstatus::HealthReader`]).
    fn health_reader(&self) -> kstatus::HealthReader {
        kstatus::HealthReader::for_version(
            self.controller
                .as_ref()
                .and_then(|c| c.version)
                .map(|v| (v.major, v.minor)),
        )
    }

    /// One member of the wait set, when it is not Current: its kstatus as kustomize-controller
    /// reads it ([`kstatus::compute_health_at`]), why, and the fix for its kind. `quoted`: the
    /// status the controller's message gave it. `ks`: the Kustomization (its
    /// `spec.healthCheckExprs`).
    fn blocking_object(
        &self,
        ks: &Value,
        m: &WaitMember,
        quoted: Option<&str>,
    ) -> Option<BlockingObject> {
        let (group, kind, ns, name) = (
            m.group.as_str(),
            m.kind.as_str(),
            m.namespace.as_str(),
            m.name.as_str(),
        );
        let id = if ns.is_empty() {
            format!("{kind}/{name}")
        } else {
            format!("{kind}/{ns}/{name}")
        };
        let key = (
            group.to_string(),
            kind.to_string(),
            ns.to_string(),
            name.to_string(),
        );
        let mk = |kstatus: String, message: String, fix: Option<String>, pods: Vec<PodReason>| {
            BlockingObject {
                object: id.clone(),
                origin: m.origin.as_str().to_string(),
                kstatus,
                message,
                fix,
                pods,
                progressing: false,
            }
        };
        let found = self.idx.objects.get(&key).copied().or_else(|| {
            (group == "kustomize.toolkit.fluxcd.io" && kind == "Kustomization")
                .then(|| self.idx.kustomization(ns, name))
                .flatten()
        });
        if let Some(o) = found {
            // ssa shouldSkipApply: objects marked reconcile: disabled are skipped by the
            // apply and left out of the health check (kustomization_controller.go checkHealth,
            // changeSetWithoutSkipped).
            if m.origin == Origin::Inventory && reconcile_disabled(o) {
                return None;
            }
            // A kind with a spec.healthCheckExprs entry is read by the controller with those
            // CEL expressions, which are not evaluated here: say so instead of a generic
            // reading that may not be the controller's (either way).
            if quoted.is_none()
                && let Some(e) = health_check_expr(ks, o)
            {
                let generic = kstatus::compute_health_at(o, self.now(), self.health_reader());
                let field = |f: &str| {
                    obj::s(e, &[f])
                        .filter(|x| !x.is_empty())
                        .map(|x| format!("{f}: `{x}`"))
                };
                let exprs: Vec<String> = ["current", "inProgress", "failed"]
                    .iter()
                    .filter_map(|f| field(f))
                    .collect();
                return Some(mk(
                    KStatus::Unknown.to_string(),
                    format!(
                        "kustomize-controller reads {kind} with spec.healthCheckExprs ({}), CEL that kubectl unstick does not evaluate; without them it would read {} ({}), which may not be the controller's verdict",
                        exprs.join(", "),
                        generic.status,
                        generic.message
                    ),
                    None,
                    self.pod_reasons(o),
                ));
            }
            let r = kstatus::compute_health_at(o, self.now(), self.health_reader());
            if r.status == KStatus::Current {
                return None;
            }
            let mut message = r.message;
            let mut fix = None;
            if r.status == KStatus::Terminating {
                let (m, f) = self.terminating_reading(o, ns, name, &message);
                message = m;
                fix = Some(f);
            } else if group.ends_with(".toolkit.fluxcd.io") && obj::b(o, &["spec", "suspend"]) {
                message = format!(
                    "suspended (spec.suspend: true): its controller does not reconcile it, so it stays {} ({message})",
                    r.status
                );
                fix = Some(format!(
                    "resume it: flux resume {} {name} -n {ns} (or remove spec.suspend in Git); kustomize-controller waits on it until its timeout otherwise (fluxcd/kustomize-controller#1100, #709)",
                    flux_cli_kind(kind)
                ));
            } else if (group, kind) == ("helm.toolkit.fluxcd.io", "HelmRelease") {
                let pods = self.release_pods(o);
                let (message, fix, progressing) = helm_release_reading(o, &message, &pods);
                let mut b = mk(r.status.to_string(), message, fix, pods);
                b.progressing = progressing;
                return Some(b);
            }
            let pods = self.pod_reasons(o);
            // A crashing container that read a Service link variable (catalogue row 5): the
            // fix is in the pod template, and no rerun changes it.
            if fix.is_none()
                && let Some(c) = pods.iter().find_map(|p| p.service_link.as_ref())
            {
                fix = Some(c.fix());
            }
            let progressing = r.status == KStatus::InProgress
                && matches!(
                    (group, kind),
                    ("apps", "Deployment") | ("apps", "StatefulSet") | ("apps", "DaemonSet")
                )
                && pods.is_empty()
                && self.rollout_progressing(o);
            let mut b = mk(r.status.to_string(), message, fix, pods);
            b.progressing = progressing;
            return Some(b);
        }
        if self.idx.unserved(group, kind) {
            return Some(mk(
                KStatus::Unknown.to_string(),
                format!(
                    "the cluster does not serve {kind} ({group}): its CustomResourceDefinition is missing, so kustomize-controller reads it as status: 'Unknown' and the check holds until its timeout"
                ),
                Some(format!(
                    "install the CRD for {kind}.{group} (the operator that owns it), or order this Kustomization after the one that installs it (spec.dependsOn)"
                )),
                Vec::new(),
            ));
        }
        if self.idx.listed(group, kind) {
            let elsewhere: Vec<&str> = self
                .idx
                .namespaces_of
                .get(&(group.to_string(), kind.to_string(), name.to_string()))
                .cloned()
                .unwrap_or_default();
            let (message, fix) = not_found_reading(m.origin, kind, ns, name, &elsewhere);
            return Some(mk(KStatus::NotFound.to_string(), message, fix, Vec::new()));
        }
        quoted.map(|q| {
            mk(
                q.to_string(),
                "status as quoted by the controller (object not read)".into(),
                None,
                Vec::new(),
            )
        })
    }

    /// A Terminating object in the wait set: (message, fix) naming the finalizers it waits
    /// on (a PVC held by pvc-protection names the pods that mount it).
    fn terminating_reading(
        &self,
        o: &Value,
        ns: &str,
        name: &str,
        message: &str,
    ) -> (String, String) {
        let fins: Vec<&str> = obj::arr(o, &["metadata", "finalizers"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let since = obj::s(o, &["metadata", "deletionTimestamp"]).unwrap_or("?");
        let message = format!(
            "{message} at {since}; deletion waits on finalizers [{}]: the health check holds until its timeout while it is Terminating",
            fins.join(", ")
        );
        let fix = if fins.contains(&"kubernetes.io/pvc-protection") {
            let users: Vec<String> = self
                .idx
                .pods_by_claim
                .get(&(ns.to_string(), name.to_string()))
                .map(|v| {
                    v.iter()
                        .map(|p| format!("pod {ns}/{}", obj::name(p)))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "kubernetes.io/pvc-protection keeps a PVC while a pod mounts it{}: stop those pods (scale their workload down) so the deletion completes; the next run then recreates the PVC",
                if users.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", users.join(", "))
                }
            )
        } else if fins.is_empty() {
            "the deletion should complete shortly (no finalizers left); the next run recreates the object".to_string()
        } else {
            format!(
                "the controller that owns {} must finish and remove it (check its logs); the next run recreates the object once it is gone",
                fins.join(", ")
            )
        };
        (message, fix)
    }

    /// Whether a workload that kstatus reads InProgress, with no pod reason below it
    /// ([`Self::pod_reasons`]: no image pull error, crash loop, config error or unschedulable
    /// pod), is a rollout still moving rather than held: not when a ReplicaSet cannot create
    /// its pods (Deployment condition `ReplicaFailure=True`, kubernetes
    /// pkg/controller/deployment/sync.go), and not when one of its pods has a kubelet
    /// `Unhealthy` Warning event (pkg/kubelet/prober/prober.go: "Readiness probe failed"),
    /// and not while any pod of it is not ready, or none was read. A rollout waiting out `minReadySeconds`, or pods
    /// being created, is moving: kstatus turns it Current, or the Deployment's
    /// `progressDeadlineSeconds` turns it Failed (kstatus Failed: not progressing).
    fn rollout_progressing(&self, w: &Value) -> bool {
        if obj::condition(w, "ReplicaFailure").is_some_and(|c| c.is_true()) {
            return false;
        }
        let pods = self.workload_pods(w);
        // No pod read: nothing shows it moving (its pods may not exist yet, or were not
        // read); the fail-fast prediction at its progressDeadlineSeconds stands. A pod not
        // ready yet (still pulling, starting, or failing its readiness probe: kubelet
        // `Unhealthy`) is no evidence of progress either: only pods all of whose containers
        // are ready (a rollout waiting out minReadySeconds) are.
        !pods.is_empty()
            && pods.into_iter().all(|p| {
                let statuses = obj::arr(p, &["status", "containerStatuses"]);
                !statuses.is_empty() && statuses.iter().all(|cs| obj::b(cs, &["ready"]))
            })
    }
}

/// `kustomize.toolkit.fluxcd.io/reconcile: disabled` as a label or annotation (fluxcd/pkg ssa
/// `shouldSkipApply`): kustomize-controller skips the object and its health.
fn reconcile_disabled(o: &Value) -> bool {
    const K: &str = "kustomize.toolkit.fluxcd.io/reconcile";
    obj::annotation(o, K) == Some("disabled")
        || obj::s(o, &["metadata", "labels", K]) == Some("disabled")
}

/// Where a member of the wait set comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `status.inventory` (with `spec.wait: true`).
    Inventory,
    /// `spec.healthChecks` (without `spec.wait`).
    HealthChecks,
    /// Only named by the controller's health-check message.
    Message,
}

impl Origin {
    /// `inventory`, `healthChecks`, `message` (JSON `blocking[].origin`).
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Inventory => "inventory",
            Origin::HealthChecks => "healthChecks",
            Origin::Message => "message",
        }
    }
}

/// One object kustomize-controller's health check waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitMember {
    /// API group (`apps`, `` for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace as given (empty: cluster-scoped, or a healthChecks entry without one).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// API version (inventory entry `v`, or the healthChecks entry's apiVersion); may be
    /// empty for old inventories.
    pub version: String,
    /// Where it comes from.
    pub origin: Origin,
}

/// The wait set exactly as kustomize-controller builds it (internal/controller/
/// kustomization_controller.go `checkHealth`): with `spec.wait: true`, the objects applied by
/// the run (its change set, which `status.inventory` holds while the check runs:
/// `<ns>_<name>_<group>_<Kind>` ids, fluxcd/pkg ssa `ObjMetadata` string form), and
/// `spec.healthChecks` is then not used; without `spec.wait`, `spec.healthChecks`
/// (`inventory.ReferenceToObjMetadataSet`: apiVersion defaults to `apps/v1`, the namespace is
/// taken as given, an empty one stays empty). The Kustomization itself is left out (the
/// controller's guard against waiting on itself); objects marked
/// `kustomize.toolkit.fluxcd.io/reconcile: disabled` are skipped by the caller once read.
pub fn wait_set(ks: &Value) -> Vec<WaitMember> {
    let mut out = Vec::new();
    let is_self = |kind: &str, ns: &str, name: &str| {
        kind == "Kustomization" && ns == obj::namespace(ks) && name == obj::name(ks)
    };
    if obj::b(ks, &["spec", "wait"]) {
        for e in obj::arr(ks, &["status", "inventory", "entries"]) {
            if let Some((group, kind, namespace, name)) =
                obj::s(e, &["id"]).and_then(parse_inventory_id)
                && !is_self(&kind, &namespace, &name)
            {
                out.push(WaitMember {
                    group,
                    kind,
                    namespace,
                    name,
                    version: obj::s(e, &["v"]).unwrap_or("").to_string(),
                    origin: Origin::Inventory,
                });
            }
        }
        return out;
    }
    for h in obj::arr(ks, &["spec", "healthChecks"]) {
        let av = obj::s(h, &["apiVersion"])
            .filter(|a| !a.is_empty())
            .unwrap_or("apps/v1");
        let (group, version) = av.split_once('/').unwrap_or(("", av));
        let m = WaitMember {
            group: group.to_string(),
            version: version.to_string(),
            kind: obj::s(h, &["kind"]).unwrap_or("").to_string(),
            namespace: obj::s(h, &["namespace"]).unwrap_or("").to_string(),
            name: obj::s(h, &["name"]).unwrap_or("").to_string(),
            origin: Origin::HealthChecks,
        };
        if !is_self(&m.kind, &m.namespace, &m.name) && !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// The `spec.healthCheckExprs` entry of `ks` for `o`'s apiVersion and kind (kustomize-controller
/// v1.5+, api/v1 `HealthCheckExprs []kustomize.CustomHealthCheck{APIVersion, Kind, Current,
/// InProgress, Failed}`: the controller reads objects of that apiVersion and kind with those CEL
/// expressions instead of kstatus).
pub fn health_check_expr<'k>(ks: &'k Value, o: &Value) -> Option<&'k Value> {
    let (av, kind) = (obj::s(o, &["apiVersion"])?, obj::kind(o));
    obj::arr(ks, &["spec", "healthCheckExprs"])
        .iter()
        .find(|e| obj::s(e, &["apiVersion"]) == Some(av) && obj::s(e, &["kind"]) == Some(kind))
}

/// [`wait_set`] as `(group, Kind, namespace, name)` tuples.
pub fn health_checked(ks: &Value) -> Vec<(String, String, String, String)> {
    wait_set(ks)
        .into_iter()
        .map(|m| (m.group, m.kind, m.namespace, m.name))
        .collect()
}

/// An inventory id `<namespace>_<name>_<group>_<Kind>` as (group, Kind, ns, name), by the
/// suite's one parser, [`cluster_loop::flux::ObjMetadata::parse`] (cli-utils'
/// `ParseObjMetadata`: `__` in the name stands for `:`, as RBAC names have it; this split on
/// every `_` before, and dropped `system:controller:x` objects from health checks and
/// inventories). `None` for an id cli-utils refuses.
pub fn parse_inventory_id(id: &str) -> Option<(String, String, String, String)> {
    let m = cluster_loop::flux::ObjMetadata::parse(id).ok()?;
    Some((m.group, m.kind, m.namespace, m.name))
}

/// The API group of a kind named only by a health-check message (`Kind/ns/name`), for the
/// kinds whose group is known; `` otherwise.
fn default_group(kind: &str) -> &'static str {
    match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => "apps",
        "Job" | "CronJob" => "batch",
        "Kustomization" => "kustomize.toolkit.fluxcd.io",
        "HelmRelease" => "helm.toolkit.fluxcd.io",
        _ => "",
    }
}
