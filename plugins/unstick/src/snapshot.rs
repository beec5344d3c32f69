//! The read-only input of the diagnosis engine: everything one `kubectl unstick` run read
//! from the cluster, as raw API objects. Built by `gather` (live) or loaded from a JSON
//! fixture (tests, benches).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::obj;

/// The kinds whose kstatus is not trivially Current, which the live reader ([`crate::live`])
/// lists when a health check names them. Other inventory kinds (ConfigMap, Service, RBAC, ...) are reported "not read".
pub(crate) const STATUS_KINDS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("", "Pod"),
    ("", "PersistentVolumeClaim"),
    ("helm.toolkit.fluxcd.io", "HelmRelease"),
];

/// Whether objects of API group `g` may be of a CustomResourceDefinition that is missing:
/// not a built-in Kubernetes group, not a Flux group this tool reads anyway.
pub(crate) fn custom_group(g: &str) -> bool {
    const BUILT_IN: &[&str] = &[
        "rbac.authorization.k8s.io",
        "networking.k8s.io",
        "storage.k8s.io",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
        "scheduling.k8s.io",
        "coordination.k8s.io",
        "node.k8s.io",
        "discovery.k8s.io",
        "certificates.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "apiregistration.k8s.io",
        "resource.k8s.io",
    ];
    !(g.is_empty()
        || !g.contains('.')
        || BUILT_IN.contains(&g)
        || matches!(
            g,
            "kustomize.toolkit.fluxcd.io"
                | "source.toolkit.fluxcd.io"
                | "helm.toolkit.fluxcd.io"
                | "notification.toolkit.fluxcd.io"
        ))
}

/// Everything the engine may look at. All object lists hold API objects exactly as the API
/// server returns them (each with `apiVersion`/`kind`; list items get them filled in by the
/// gatherer).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The time of the snapshot; every "time left" is computed against it.
    pub now: Timestamp,
    /// The namespace read (`None`: all namespaces). Kustomizations from other namespaces are
    /// there only as dependencies: the fleet view does not list them.
    #[serde(default)]
    pub namespace: Option<String>,
    /// All Kustomizations in scope (the target's namespace, or all namespaces with `-A`, and
    /// the namespaces of the dependencies they name).
    #[serde(default)]
    pub kustomizations: Vec<Value>,
    /// With a single-namespace scope: the Kustomizations (`namespace/name`) of the other
    /// namespaces whose run holds one of kustomize-controller's workers now (its
    /// `--concurrent` workers serve every namespace), from the same one list read across
    /// namespaces. `None` when not read (the cross-namespace list was refused, or a fixture):
    /// then who holds the workers is not known ([`Snapshot::holders_known`]).
    #[serde(default)]
    pub workers_elsewhere: Option<Vec<String>>,
    /// GitRepository / OCIRepository / Bucket / ExternalArtifact objects in scope.
    #[serde(default)]
    pub sources: Vec<Value>,
    /// The kustomize-controller Deployment, when it could be read.
    #[serde(default)]
    pub controller: Option<Value>,
    /// The source-controller Deployment (`source-controller` in the kustomize-controller's
    /// namespace, as `flux install` names it), when it could be read.
    #[serde(default)]
    pub source_controller: Option<Value>,
    /// Every kustomize-controller Deployment in the controller's namespace (the shards of a
    /// sharded install: a Deployment whose manager image is kustomize-controller), read only
    /// when the one read above does not watch some Kustomization, or source-controller some
    /// source (one list). `[]` when not read.
    #[serde(default)]
    pub kustomize_controllers: Vec<Value>,
    /// Every source-controller Deployment in the controller's namespace (the shards: a
    /// Deployment whose manager image is source-controller), read by the same list only when
    /// `source-controller` does not watch some source read. `[]` when not read.
    #[serde(default)]
    pub source_controllers: Vec<Value>,
    /// The helm-controller Deployment (`helm-controller` in the kustomize-controller's
    /// namespace, as `flux install` names it), read only when a health check waits on a
    /// HelmRelease. `None`: not found, or not read ([`Snapshot::helm_controller_read`]).
    #[serde(default)]
    pub helm_controller: Option<Value>,
    /// Whether the helm-controller Deployment was looked for (and found or not found): only
    /// then does its absence mean that nothing reconciles HelmReleases.
    #[serde(default)]
    pub helm_controller_read: bool,
    /// The Leases of the running controllers that run with leader election
    /// ([`crate::leader`]), by `namespace/name`, each read with one GET only when a
    /// Kustomization in scope needs that controller (kustomize-controller: one not suspended;
    /// source-controller: one of its sources). `None`: read, and it does not exist. A Lease
    /// absent here was not read: leadership is not judged.
    #[serde(default)]
    pub leases: BTreeMap<String, Option<Value>>,
    /// The pods of the controller Deployments, read only when one has no ready pod (to say
    /// why: `controller::pod_trouble`) or when its Lease is not held by a pod of it (to name
    /// the ready pod that does not lead: `leader::leader_trouble`).
    #[serde(default)]
    pub controller_pods: Vec<Value>,
    /// The last lines of the log of a controller container's ended run
    /// (`pods/log?previous=true`, or the current log of one not restarted), by
    /// `namespace/pod/container`.
    #[serde(default)]
    pub controller_logs: BTreeMap<String, Vec<String>>,
    /// The last lines of the log of the ended run of each workload container in
    /// CrashLoopBackOff (`pods/log?previous=true`), by `namespace/pod/container`; read for
    /// at most [`crate::live::CRASH_LOGS`] containers, only when a pod crashes.
    #[serde(default)]
    pub workload_logs: BTreeMap<String, Vec<String>>,
    /// The Services of the namespaces of those containers' pods (one list per namespace),
    /// for the Service link variables the kubelet injected into them.
    #[serde(default)]
    pub services: Vec<Value>,
    /// Key names (never values) of the `spec.secretRef` Secrets of sources that report an
    /// authentication failure, by `namespace/name`; read only for those sources.
    #[serde(default)]
    pub secret_keys: BTreeMap<String, Vec<String>>,
    /// Metadata (labels, `managedFields`, `creationTimestamp`; never data) of the ConfigMaps
    /// and Secrets that Ready Kustomizations reference ([`crate::diagnose::config_refs`]), by
    /// `Kind/namespace/name`: read to tell a change kustomize-controller is not told about.
    /// A reference absent here was not read (or does not exist): not judged.
    #[serde(default)]
    pub configs: BTreeMap<String, Value>,
    /// Objects of the inventories that were read (workloads and anything named by a health
    /// check message).
    #[serde(default)]
    pub objects: Vec<Value>,
    /// Pods in the namespaces of those objects.
    #[serde(default)]
    pub pods: Vec<Value>,
    /// Events (core/v1) in scope, any involved object.
    #[serde(default)]
    pub events: Vec<Value>,
    /// The `group/Kind` pairs that were listed in full (`apps/Deployment`, `/ConfigMap`): an
    /// inventory object of a listed kind that is absent from `objects` is NotFound; one of a
    /// kind not listed is reported as "not read", never as missing.
    #[serde(default)]
    pub listed_kinds: BTreeSet<String>,
    /// `group/Kind` pairs named by a health check that this cluster does not serve (their
    /// CustomResourceDefinition is missing): kustomize-controller's status poller reads such
    /// an object as `Unknown`.
    #[serde(default)]
    pub unserved_kinds: BTreeSet<String>,
}

impl Snapshot {
    /// Whether every Kustomization holding a worker is known: the scope is all namespaces, or
    /// [`Snapshot::workers_elsewhere`] was read.
    pub fn holders_known(&self) -> bool {
        self.namespace.is_none() || self.workers_elsewhere.is_some()
    }
}

/// `namespace/name`.
pub type Key = (String, String);

/// Lookup tables over a [`Snapshot`], built once per diagnosis run.
pub struct Index<'a> {
    /// The snapshot.
    pub snap: &'a Snapshot,
    /// Kustomizations by namespace/name.
    pub ks: HashMap<Key, &'a Value>,
    /// Sources by (Kind, namespace, name).
    pub sources: HashMap<(String, String, String), &'a Value>,
    /// Objects by (group, Kind, namespace, name).
    pub objects: HashMap<(String, String, String, String), &'a Value>,
    /// Pods by namespace.
    pub pods: HashMap<String, Vec<&'a Value>>,
    /// Events by (involved Kind, namespace, name), newest last.
    pub events: HashMap<(String, String, String), Vec<&'a Value>>,
    /// Objects by (Kind, namespace, name).
    pub objects_by_id: HashMap<(String, String, String), &'a Value>,
    /// Namespaces holding an object of (group, Kind, name): for a health check that names
    /// the wrong namespace.
    pub namespaces_of: HashMap<(String, String, String), Vec<&'a str>>,
    /// Pods by (namespace, owner Kind, owner name) from `metadata.ownerReferences`.
    pub pods_by_owner: HashMap<(String, String, String), Vec<&'a Value>>,
    /// Pods by (namespace, label key, label value).
    pub pods_by_label: HashMap<(String, String, String), Vec<&'a Value>>,
    /// Pods by (namespace, PersistentVolumeClaim name) they mount.
    pub pods_by_claim: HashMap<(String, String), Vec<&'a Value>>,
}

impl<'a> Index<'a> {
    /// Build the lookup tables.
    pub fn new(snap: &'a Snapshot) -> Self {
        let ks = snap
            .kustomizations
            .iter()
            .map(|k| ((obj::namespace(k).into(), obj::name(k).into()), k))
            .collect();
        let sources = snap
            .sources
            .iter()
            .map(|s| {
                (
                    (
                        obj::kind(s).into(),
                        obj::namespace(s).into(),
                        obj::name(s).into(),
                    ),
                    s,
                )
            })
            .collect();
        let objects = snap
            .objects
            .iter()
            .map(|o| {
                (
                    (
                        obj::group(o).into(),
                        obj::kind(o).into(),
                        obj::namespace(o).into(),
                        obj::name(o).into(),
                    ),
                    o,
                )
            })
            .collect();
        let mut objects_by_id = HashMap::new();
        let mut namespaces_of: HashMap<(String, String, String), Vec<&str>> = HashMap::new();
        for o in &snap.objects {
            objects_by_id.insert(
                (
                    obj::kind(o).to_string(),
                    obj::namespace(o).to_string(),
                    obj::name(o).to_string(),
                ),
                o,
            );
            namespaces_of
                .entry((
                    obj::group(o).to_string(),
                    obj::kind(o).to_string(),
                    obj::name(o).to_string(),
                ))
                .or_default()
                .push(obj::namespace(o));
        }
        let mut pods: HashMap<String, Vec<&Value>> = HashMap::new();
        let mut pods_by_owner: HashMap<(String, String, String), Vec<&Value>> = HashMap::new();
        let mut pods_by_label: HashMap<(String, String, String), Vec<&Value>> = HashMap::new();
        let mut pods_by_claim: HashMap<(String, String), Vec<&Value>> = HashMap::new();
        for p in &snap.pods {
            let ns = obj::namespace(p);
            pods.entry(ns.into()).or_default().push(p);
            for r in obj::arr(p, &["metadata", "ownerReferences"]) {
                pods_by_owner
                    .entry((
                        ns.into(),
                        obj::s(r, &["kind"]).unwrap_or("").into(),
                        obj::s(r, &["name"]).unwrap_or("").into(),
                    ))
                    .or_default()
                    .push(p);
            }
            if let Some(l) = obj::at(p, &["metadata", "labels"]).and_then(Value::as_object) {
                for (k, v) in l {
                    pods_by_label
                        .entry((ns.into(), k.clone(), v.as_str().unwrap_or("").into()))
                        .or_default()
                        .push(p);
                }
            }
            for v in obj::arr(p, &["spec", "volumes"]) {
                if let Some(c) = obj::s(v, &["persistentVolumeClaim", "claimName"]) {
                    pods_by_claim
                        .entry((ns.into(), c.into()))
                        .or_default()
                        .push(p);
                }
            }
        }
        let mut events: HashMap<(String, String, String), Vec<&Value>> = HashMap::new();
        for e in &snap.events {
            let k = (
                obj::s(e, &["involvedObject", "kind"]).unwrap_or("").into(),
                obj::s(e, &["involvedObject", "namespace"])
                    .unwrap_or(obj::namespace(e))
                    .into(),
                obj::s(e, &["involvedObject", "name"]).unwrap_or("").into(),
            );
            events.entry(k).or_default().push(e);
        }
        for v in events.values_mut() {
            v.sort_by_key(|e| event_time(e));
        }
        Index {
            snap,
            ks,
            sources,
            objects,
            pods,
            events,
            objects_by_id,
            namespaces_of,
            pods_by_owner,
            pods_by_label,
            pods_by_claim,
        }
    }

    /// A Kustomization by namespace and name.
    pub fn kustomization(&self, ns: &str, name: &str) -> Option<&'a Value> {
        self.ks.get(&(ns.to_string(), name.to_string())).copied()
    }

    /// Whether objects of `group/kind` were listed.
    pub fn listed(&self, group: &str, kind: &str) -> bool {
        self.snap.listed_kinds.contains(&format!("{group}/{kind}"))
    }

    /// Whether the cluster does not serve `group/kind` (its CRD is missing).
    pub fn unserved(&self, group: &str, kind: &str) -> bool {
        self.snap
            .unserved_kinds
            .contains(&format!("{group}/{kind}"))
    }
}

/// The best time of an event: `lastTimestamp`, `eventTime`, `firstTimestamp`.
pub fn event_time(e: &Value) -> Option<Timestamp> {
    ["lastTimestamp", "eventTime", "firstTimestamp"]
        .iter()
        .find_map(|k| obj::s(e, &[k]).and_then(obj::parse_time))
}
