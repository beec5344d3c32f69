//! The object API the pod runtime and the store-backed helpers drive: a small trait over the twin's in-process store, so the
//! runtime reads and writes exactly what kubectl and the plugins see over HTTPS.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use crate::error::StatusError;

/// A change to one object, as a watch reports it.
#[derive(Debug, Clone)]
pub struct Change {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub event: ChangeType,
    /// The object after the change (before deletion for `DELETED`).
    pub object: Value,
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was deleted.
    Deleted,
}

/// Identity of an object: `apiVersion`, `kind`, namespace (`""` for cluster scope), name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace, `""` when cluster-scoped.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjKey {
    /// Builds a key.
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        ObjKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
    /// The key of an object value.
    pub fn of(obj: &Value) -> Self {
        ObjKey::new(
            obj["apiVersion"].as_str().unwrap_or_default(),
            obj["kind"].as_str().unwrap_or_default(),
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            obj.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        )
    }
    /// API group (`""` for core).
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }
}

/// The object operations the pod runtime needs, with the apiserver's semantics (resourceVersion,
/// generation, status subresource, 404/409/422 as [`StatusError`]).
pub trait Cluster: Send + Sync + 'static {
    /// Reads one object; `Ok(None)` when it does not exist.
    fn get(&self, key: &ObjKey) -> Result<Option<Value>, StatusError>;
    /// Lists objects of a kind, in one namespace or all (`None`).
    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, StatusError>;
    /// Creates an object (generateName honoured).
    fn create(&self, obj: Value) -> Result<Value, StatusError>;
    /// JSON merge patch (RFC 7386) of the main resource, recorded for `field_manager`.
    fn merge_patch(
        &self,
        key: &ObjKey,
        patch: Value,
        field_manager: &str,
    ) -> Result<Value, StatusError>;
    /// JSON merge patch of the status subresource.
    fn merge_patch_status(
        &self,
        key: &ObjKey,
        patch: Value,
        field_manager: &str,
    ) -> Result<Value, StatusError>;
    /// Deletes an object (404 when absent).
    fn delete(&self, key: &ObjKey) -> Result<(), StatusError>;
    /// A stream of every change to objects of the given kinds, from now on.
    fn watch(&self, kinds: &[(&str, &str)]) -> mpsc::UnboundedReceiver<Change>;
}

/// A shared handle to a [`Cluster`].
pub type ClusterRef = Arc<dyn Cluster>;

/// Creates the object or, when it exists, merge-patches its labels, annotations and every
/// top-level field except `metadata` and `status` (the twin's stand-in for server-side apply).
/// Returns the stored object and whether it was created or changed.
pub fn apply(
    cluster: &dyn Cluster,
    obj: &Value,
    field_manager: &str,
) -> Result<(Value, ApplyAction), StatusError> {
    let key = ObjKey::of(obj);
    match cluster.get(&key)? {
        None if excluded(obj) => Ok((obj.clone(), ApplyAction::Skipped)),
        None => Ok((cluster.create(obj.clone())?, ApplyAction::Created)),
        Some(live) if excluded(obj) || excluded(&live) => Ok((live, ApplyAction::Skipped)),
        Some(live) => {
            let mut patch = serde_json::Map::new();
            let mut meta = serde_json::Map::new();
            for f in ["labels", "annotations"] {
                if let Some(v) = obj.pointer(&format!("/metadata/{f}")) {
                    meta.insert(f.into(), v.clone());
                }
            }
            patch.insert("metadata".into(), Value::Object(meta));
            if let Some(m) = obj.as_object() {
                for (k, v) in m {
                    if !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind") {
                        patch.insert(k.clone(), v.clone());
                    }
                }
            }
            let patch = Value::Object(patch);
            if merge_is_noop(&live, &patch) {
                return Ok((live, ApplyAction::Unchanged));
            }
            Ok((
                cluster.merge_patch(&key, patch, field_manager)?,
                ApplyAction::Configured,
            ))
        }
    }
}

/// The exclusion rule of kustomize-controller's apply: an object whose desired or in-cluster
/// labels or annotations hold `kustomize.toolkit.fluxcd.io/reconcile: disabled` is skipped
/// (fluxcd/pkg ssa manager_apply.go `shouldSkipApply` with `ApplyOptions.ExclusionSelector`,
/// which kustomize-controller sets to that key/value).
pub fn excluded(obj: &Value) -> bool {
    ["labels", "annotations"].iter().any(|f| {
        obj.pointer(&format!(
            "/metadata/{f}/kustomize.toolkit.fluxcd.io~1reconcile"
        ))
        .and_then(Value::as_str)
            == Some("disabled")
    })
}

/// What [`apply`] did (ssa `Action`: created, configured, unchanged, skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyAction {
    /// `created`
    Created,
    /// `configured`
    Configured,
    /// `unchanged`
    Unchanged,
    /// `skipped` (excluded by `kustomize.toolkit.fluxcd.io/reconcile: disabled`)
    Skipped,
}

/// True when applying `patch` as a JSON merge patch to `live` would change nothing.
pub fn merge_is_noop(live: &Value, patch: &Value) -> bool {
    match patch {
        Value::Object(p) => p.iter().all(|(k, v)| match (live.get(k), v) {
            (None, Value::Null) => true,
            (Some(l), Value::Object(_)) if l.is_object() => merge_is_noop(l, v),
            (Some(l), v) => l == v,
            (None, _) => false,
        }),
        other => live == other,
    }
}

/// Reads a string at a JSON pointer, `""` when absent.
pub fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The current time as RFC 3339 with seconds precision (`metav1.Time`).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Records a core/v1 Event about `involved` like client-go's recorder does
/// (`<name>.<hex>` names, `involvedObject`, `source.component`, counts and timestamps).
pub fn record_event(
    cluster: &dyn Cluster,
    involved: &Value,
    event_type: &str,
    reason: &str,
    message: &str,
    component: &str,
    annotations: Option<Value>,
) {
    let ns = s(involved, "/metadata/namespace");
    let ns = if ns.is_empty() { "default" } else { ns };
    let now = now_rfc3339();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut ev = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{}.{:x}", s(involved, "/metadata/name"), nanos),
            "namespace": ns,
        },
        "involvedObject": {
            "apiVersion": involved["apiVersion"],
            "kind": involved["kind"],
            "name": s(involved, "/metadata/name"),
            "namespace": s(involved, "/metadata/namespace"),
            "uid": s(involved, "/metadata/uid"),
            "resourceVersion": s(involved, "/metadata/resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    if let Some(a) = annotations {
        ev["metadata"]["annotations"] = a;
    }
    let _ = cluster.create(ev);
}

/// The twin's in-process store as a [`Cluster`]: the same validation, resourceVersions,
/// generation rules and watch events as the HTTPS API.
impl Cluster for crate::store::Store {
    fn get(&self, key: &ObjKey) -> Result<Option<Value>, StatusError> {
        let gvr = self.gvr_for_kind(&key.api_version, &key.kind)?;
        match crate::store::Store::get(self, &gvr, Some(&key.namespace), &key.name) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, StatusError> {
        let gvr = self.gvr_for_kind(api_version, kind)?;
        crate::store::Store::list(self, &gvr, namespace, None)
    }

    fn create(&self, obj: Value) -> Result<Value, StatusError> {
        let gvr = self.gvr_of(&obj)?;
        crate::store::Store::create(self, &gvr, obj)
    }

    fn merge_patch(
        &self,
        key: &ObjKey,
        patch: Value,
        field_manager: &str,
    ) -> Result<Value, StatusError> {
        let gvr = self.gvr_for_kind(&key.api_version, &key.kind)?;
        crate::store::Store::patch(
            self,
            &gvr,
            Some(&key.namespace),
            &key.name,
            crate::patch::PatchKind::Merge,
            &patch,
            field_manager,
        )
    }

    fn merge_patch_status(
        &self,
        key: &ObjKey,
        patch: Value,
        field_manager: &str,
    ) -> Result<Value, StatusError> {
        let gvr = self.gvr_for_kind(&key.api_version, &key.kind)?;
        crate::store::Store::patch_status(
            self,
            &gvr,
            Some(&key.namespace),
            &key.name,
            crate::patch::PatchKind::Merge,
            &patch,
            field_manager,
        )
    }

    fn delete(&self, key: &ObjKey) -> Result<(), StatusError> {
        let gvr = self.gvr_for_kind(&key.api_version, &key.kind)?;
        crate::store::Store::delete(self, &gvr, Some(&key.namespace), &key.name).map(|_| ())
    }

    fn watch(&self, kinds: &[(&str, &str)]) -> mpsc::UnboundedReceiver<Change> {
        let (tx, rx) = mpsc::unbounded_channel();
        for (api_version, kind) in kinds {
            let Ok(gvr) = self.gvr_for_kind(api_version, kind) else {
                continue;
            };
            let store = self.clone();
            let tx = tx.clone();
            let mut since = self.resource_version().to_string();
            // Start the stream synchronously so no change after this call is missed.
            let mut stream = store.watch(&gvr, None, Some(&since)).ok();
            tokio::spawn(async move {
                loop {
                    let Some(st) = stream.as_mut() else {
                        // re-watch like an informer after the server closed the watch
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        stream = match store.watch(&gvr, None, Some(&since)) {
                            Ok(s) => Some(s),
                            Err(_) => {
                                since = store.resource_version().to_string();
                                store.watch(&gvr, None, Some(&since)).ok()
                            }
                        };
                        continue;
                    };
                    match st.next().await {
                        Some(ev) => {
                            since = st.last_resource_version().to_string();
                            let event = match ev.type_ {
                                crate::store::WatchEventType::Added => ChangeType::Added,
                                crate::store::WatchEventType::Modified => ChangeType::Modified,
                                crate::store::WatchEventType::Deleted => ChangeType::Deleted,
                                _ => continue,
                            };
                            if tx
                                .send(Change {
                                    event,
                                    object: ev.object,
                                })
                                .is_err()
                            {
                                return;
                            }
                        }
                        None => {
                            if tx.is_closed() {
                                return;
                            }
                            stream = None;
                        }
                    }
                }
            });
        }
        rx
    }
}
