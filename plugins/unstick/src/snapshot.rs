//! The read-only input of the diagnosis engine: everything one `kubectl unstick` run read
//! from the cluster, as raw API objects. Built by `gather` (live) or loaded from a JSON
//! fixture (tests, benches).

use std::collections::{BTreeSet, HashMap};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::obj;

/// Everything the engine may look at. All object lists hold API objects exactly as the API
/// server returns them (each with `apiVersion`/`kind`; list items get them filled in by the
/// gatherer).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The time of the snapshot; every "time left" is computed against it.
    pub now: Timestamp,
    /// All Kustomizations in scope (the target's namespace, or all namespaces with `-A`, and
    /// the namespaces of the dependencies they name).
    #[serde(default)]
    pub kustomizations: Vec<Value>,
    /// GitRepository / OCIRepository / Bucket / ExternalArtifact objects in scope.
    #[serde(default)]
    pub sources: Vec<Value>,
    /// The kustomize-controller Deployment, when it could be read.
    #[serde(default)]
    pub controller: Option<Value>,
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
        let mut pods: HashMap<String, Vec<&Value>> = HashMap::new();
        for p in &snap.pods {
            pods.entry(obj::namespace(p).into()).or_default().push(p);
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
}

/// The best time of an event: `lastTimestamp`, `eventTime`, `firstTimestamp`.
pub fn event_time(e: &Value) -> Option<Timestamp> {
    ["lastTimestamp", "eventTime", "firstTimestamp"]
        .iter()
        .find_map(|k| obj::s(e, &[k]).and_then(obj::parse_time))
}
