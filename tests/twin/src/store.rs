//! The in-memory object store: the twin's etcd plus the generic registry's rules.
//!
//! Every HTTP verb is served from here, and controller models call the same methods in-process,
//! so both see identical semantics. Rules and their upstream sources:
//!
//! - One global `resourceVersion` counter (etcd revision); every write bumps it; list metadata
//!   carries the current value (k8s.io/apiserver pkg/storage/etcd3/store.go).
//! - Create: `generateName` + 5 random chars from `bcdfghjklmnpqrstvwxz2456789`
//!   (apiserver pkg/storage/names/generate.go); `uid`, `creationTimestamp`, `resourceVersion`,
//!   `metadata.generation = 1` for CRDs and workload kinds; `status` is dropped on create for kinds
//!   with a status subresource (apiextensions-apiserver pkg/registry/customresource/strategy.go
//!   PrepareForCreate). Namespaced objects need their namespace: 404 `namespaces "x" not found`,
//!   403 while it terminates (apiserver plugin/pkg/admission/namespace/lifecycle/admission.go).
//! - Update: 409 Conflict when `metadata.resourceVersion` is set and stale; an empty one is an
//!   unconditional update (AllowUnconditionalUpdate). With a status subresource the main
//!   resource keeps the old `status` and the status subresource keeps everything but `status`
//!   (customresource/status_strategy.go PrepareForUpdate). `metadata.generation` increments when
//!   anything outside `metadata` and `status` changes (strategy.go PrepareForUpdate). A write
//!   that changes nothing is not persisted (no new resourceVersion, no watch event), as
//!   etcd3 GuaranteedUpdate short-circuits identical bytes.
//! - Delete: with `metadata.finalizers` the object only gets `deletionTimestamp` (and
//!   `deletionGracePeriodSeconds: 0`) and is removed when an update empties the finalizers
//!   (apiserver pkg/registry/generic/registry/store.go updateForGracefulDeletionAndFinalizers);
//!   new finalizers cannot be added once deleting (ValidateObjectMetaUpdate). Dependents whose
//!   every ownerReference is gone are deleted too (background garbage collection).
//! - Watch: bounded event history; a watch from a resourceVersion older than the window gets
//!   410 `too old resource version: N (M)` (cacher/watch_cache.go). Label/field-selector
//!   watches turn MODIFIED into ADDED/DELETED when an object enters/leaves the selection
//!   (cacher.go cacheWatcher.convertToWatchEvent). DELETED carries the deletion's
//!   resourceVersion.

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use tokio::sync::{Notify, mpsc};

use crate::error::StatusError;
use crate::patch::{self, PatchKind};
use crate::registry::{Gvr, Registry, ResourceInfo, crd_to_info};
use crate::selector::{FieldSelector, LabelSelector};

type Key = (String, String);

/// Watch event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEventType {
    /// `ADDED`
    Added,
    /// `MODIFIED`
    Modified,
    /// `DELETED`
    Deleted,
    /// `BOOKMARK` (object carries only kind, apiVersion and metadata.resourceVersion)
    Bookmark,
    /// `ERROR` (object is a `Status`)
    Error,
}

impl WatchEventType {
    /// The wire name, e.g. `ADDED`.
    pub fn as_str(&self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
            WatchEventType::Bookmark => "BOOKMARK",
            WatchEventType::Error => "ERROR",
        }
    }
}

/// One watch event: `{"type": "ADDED", "object": {...}}` on the wire.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchEvent {
    /// Event type.
    pub type_: WatchEventType,
    /// The object at the watched version (or a Status for ERROR).
    pub object: Value,
}

impl WatchEvent {
    /// The wire form.
    pub fn to_json(&self) -> Value {
        json!({"type": self.type_.as_str(), "object": self.object})
    }
}

#[derive(Clone, Debug)]
struct RawEvent {
    rv: u64,
    type_: WatchEventType,
    obj: Arc<Value>,
    old: Option<Arc<Value>>,
}

struct Watcher {
    key: Key,
    ns: Option<String>,
    tx: mpsc::UnboundedSender<RawEvent>,
}

struct HistEvent {
    key: Key,
    ns: String,
    ev: RawEvent,
}

#[derive(Default)]
struct LogBuf {
    data: Vec<u8>,
    closed: bool,
}

struct State {
    registry: Registry,
    rv: u64,
    objects: HashMap<Key, BTreeMap<(String, String), Arc<Value>>>,
    history: VecDeque<HistEvent>,
    history_cap: usize,
    compacted: u64,
    watchers: Vec<Watcher>,
    logs: HashMap<(String, String, String), LogBuf>,
}

struct Shared {
    state: Mutex<State>,
    log_notify: Notify,
}

/// The object store. Cheap to clone (an `Arc` inside); all methods are synchronous except
/// reading a [`WatchStream`] or following a log.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

/// Options for list calls (the query parameters of a list request).
#[derive(Clone, Debug, Default)]
pub struct ListParams {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector` (`metadata.name`, `metadata.namespace`; any field path for built-ins).
    pub field_selector: Option<String>,
    /// `limit` (0 = no limit).
    pub limit: usize,
    /// `continue` token from a previous page.
    pub continue_: Option<String>,
}

/// Options for watch calls.
#[derive(Clone, Debug, Default)]
pub struct WatchParams {
    /// `resourceVersion`: `None`/`""`/`"0"` = start with ADDED events for all current objects;
    /// `"N"` = every change after N (410 if N has been compacted away).
    pub resource_version: Option<String>,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `sendInitialEvents=true` (watch-list): initial ADDED events then a BOOKMARK annotated
    /// `k8s.io/initial-events-end: "true"`.
    pub send_initial_events: bool,
}

/// Options for writes.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and return the result without persisting.
    pub dry_run: bool,
    /// `fieldManager` (accepted, not recorded: no managedFields).
    pub field_manager: Option<String>,
}

/// Options for deletes (the `DeleteOptions` body).
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `propagationPolicy`: `Orphan` keeps dependents; anything else deletes them (background).
    pub propagation_policy: Option<String>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// Which part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// The main resource.
    Main,
    /// `/status`.
    Status,
    /// `pods/ephemeralcontainers`.
    EphemeralContainers,
}

/// Result of a delete: the object as returned, and whether it is gone (false = it only got a
/// `deletionTimestamp` because of finalizers).
#[derive(Clone, Debug)]
pub struct Deleted {
    /// The object (after marking, or as it was when removed).
    pub object: Value,
    /// Removed from the store.
    pub gone: bool,
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn new_uid() -> String {
    let mut b = fastrand::u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn random_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHA[fastrand::usize(..ALPHA.len())] as char)
        .collect()
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

fn meta_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().unwrap()
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Object without metadata (and without status when `drop_status`), for generation rules.
fn spec_part(obj: &Value, drop_status: bool) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("apiVersion");
        m.remove("kind");
        if drop_status {
            m.remove("status");
        }
    }
    o
}

/// Secret `stringData` is write-only: merged into `data` (base64) on every write, as the
/// apiserver's v1 Secret conversion does (k8s.io/kubernetes pkg/apis/core/v1/conversion.go);
/// an empty `type` defaults to `Opaque`.
fn normalize_secret(info: &ResourceInfo, obj: &mut Value) {
    use base64::Engine;
    if !(info.group.is_empty() && info.kind == "Secret") {
        return;
    }
    // SetDefaults_Secret (pkg/apis/core/v1/defaults.go): empty type is Opaque.
    if obj
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        obj["type"] = json!("Opaque");
    }
    let Some(sd) = obj.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    if let Some(sd) = sd.as_object() {
        if !obj.get("data").is_some_and(Value::is_object) {
            obj["data"] = json!({});
        }
        for (k, v) in sd {
            let enc =
                base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default());
            obj["data"][k] = json!(enc);
        }
    }
}

fn with_version(obj: &Value, gvr: &Gvr) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.insert("apiVersion".into(), json!(gvr.api_version()));
        m.insert("kind".into(), json!(gvr.kind));
    }
    o
}

fn parse_rv(s: &str) -> Result<u64, StatusError> {
    s.parse::<u64>()
        .map_err(|_| StatusError::bad_request(format!("invalid resource version: {s:?}")))
}

impl State {
    fn info(&self, gvr: &Gvr) -> Result<ResourceInfo, StatusError> {
        self.registry
            .by_resource(&gvr.group, &gvr.resource)
            .cloned()
            .ok_or_else(StatusError::path_not_found)
    }

    fn get_obj(&self, key: &Key, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(key)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Records a change: assigns the next resourceVersion to `obj` (unless `keep_rv`), stores or
    /// removes it, appends history and notifies watchers. Returns the stored object.
    fn commit(
        &mut self,
        info: &ResourceInfo,
        type_: WatchEventType,
        mut obj: Value,
        old: Option<Arc<Value>>,
    ) -> Value {
        self.rv += 1;
        let rv = self.rv;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let key: Key = (info.group.clone(), info.resource.clone());
        let ns = meta_str(&obj, "namespace").unwrap_or("").to_string();
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let arc = Arc::new(obj);
        let map = self.objects.entry(key.clone()).or_default();
        if type_ == WatchEventType::Deleted {
            map.remove(&(ns.clone(), name));
        } else {
            map.insert((ns.clone(), name), arc.clone());
        }
        let ev = RawEvent {
            rv,
            type_,
            obj: arc.clone(),
            old,
        };
        self.watchers.retain(|w| {
            if w.key != key || w.ns.as_ref().is_some_and(|n| *n != ns) {
                return !w.tx.is_closed();
            }
            w.tx.send(ev.clone()).is_ok()
        });
        self.history.push_back(HistEvent { key, ns, ev });
        while self.history.len() > self.history_cap {
            if let Some(h) = self.history.pop_front() {
                self.compacted = h.ev.rv;
            }
        }
        (*arc).clone()
    }

    fn namespace_check(&self, ns: &str) -> Result<(), StatusError> {
        match self.get_obj(&(String::new(), "namespaces".into()), "", ns) {
            None => Err(StatusError::not_found("", "namespaces", ns)),
            Some(n) if n.pointer("/metadata/deletionTimestamp").is_some() => {
                let mut e = StatusError::new(
                    403,
                    "Forbidden",
                    format!(
                        "unable to create new content in namespace {ns} because it is being terminated"
                    ),
                );
                e.details = Some(json!({"name": ns, "kind": "namespaces"}));
                Err(e)
            }
            Some(_) => Ok(()),
        }
    }
}

impl Default for Store {
    fn default() -> Self {
        Store::new(10_000)
    }
}

impl Store {
    /// An empty store with the built-in kinds and the namespaces `default`, `kube-system`,
    /// `kube-public`, `kube-node-lease`; `history_cap` = watch history window in events.
    pub fn new(history_cap: usize) -> Self {
        let st = State {
            registry: Registry::new(),
            rv: 0,
            objects: HashMap::new(),
            history: VecDeque::new(),
            history_cap: history_cap.max(1),
            compacted: 0,
            watchers: Vec::new(),
            logs: HashMap::new(),
        };
        let s = Store {
            shared: Arc::new(Shared {
                state: Mutex::new(st),
                log_notify: Notify::new(),
            }),
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            s.ensure_namespace(ns);
        }
        s
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates namespace `ns` if missing (no error if it exists).
    pub fn ensure_namespace(&self, ns: &str) {
        let gvr = self.gvr("", "v1", "namespaces").unwrap();
        if self.get(&gvr, None, ns).is_err() {
            let _ = self.create(
                &gvr,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            );
        }
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// A snapshot of the registry (for discovery).
    pub fn registry(&self) -> Registry {
        self.lock().registry.clone()
    }

    /// The Gvr of `group`/`version`/`resource` (plural), 404 if not served.
    pub fn gvr(&self, group: &str, version: &str, resource: &str) -> Result<Gvr, StatusError> {
        self.lock()
            .registry
            .find(group, version, resource)
            .map(|i| i.gvr(version))
            .ok_or_else(StatusError::path_not_found)
    }

    /// The Gvr for an object's `apiVersion` and `kind`, 404 (`no matches for kind`) if unknown.
    pub fn gvr_for_kind(&self, api_version: &str, kind: &str) -> Result<Gvr, StatusError> {
        self.lock()
            .registry
            .by_kind(api_version, kind)
            .ok_or_else(|| {
                StatusError::new(
                    404,
                    "NotFound",
                    format!("no matches for kind {kind:?} in version {api_version:?}"),
                )
            })
    }

    /// The Gvr for an object (its apiVersion and kind).
    pub fn gvr_of(&self, obj: &Value) -> Result<Gvr, StatusError> {
        self.gvr_for_kind(
            obj.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
            obj.get("kind").and_then(Value::as_str).unwrap_or(""),
        )
    }

    /// Registry metadata of a resource type.
    pub fn info(&self, gvr: &Gvr) -> Result<ResourceInfo, StatusError> {
        self.lock().info(gvr)
    }

    /// GET one object. `ns` is ignored for cluster-scoped kinds. 404 with the upstream message.
    pub fn get(&self, gvr: &Gvr, ns: Option<&str>, name: &str) -> Result<Value, StatusError> {
        let st = self.lock();
        let info = st.info(gvr)?;
        let ns = if info.namespaced {
            ns.unwrap_or("")
        } else {
            ""
        };
        st.get_obj(&(info.group.clone(), info.resource.clone()), ns, name)
            .map(|o| with_version(&o, gvr))
            .ok_or_else(|| StatusError::not_found(&gvr.group, &gvr.resource, name))
    }

    /// LIST objects as a `Vec` (namespace `None` = all namespaces), filtered by a label
    /// selector string (e.g. `app=web,tier!=db`); sorted by namespace then name.
    pub fn list(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<Value>, StatusError> {
        let l = self.list_with(
            gvr,
            ns,
            &ListParams {
                label_selector: label_selector.map(str::to_string),
                ..Default::default()
            },
        )?;
        Ok(match l {
            Value::Object(mut m) => match m.remove("items") {
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            },
            _ => Vec::new(),
        })
    }

    /// LIST as the API returns it: `{"kind": "<Kind>List", "metadata": {"resourceVersion",
    /// "continue"?, "remainingItemCount"?}, "items": [...]}`. The continue token encodes the
    /// last key; pages are served from the current state (no snapshot).
    pub fn list_with(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        p: &ListParams,
    ) -> Result<Value, StatusError> {
        let ls = LabelSelector::parse(p.label_selector.as_deref().unwrap_or(""))?;
        let st = self.lock();
        let info = st.info(gvr)?;
        let fs = FieldSelector::parse(p.field_selector.as_deref().unwrap_or(""), info.builtin)?;
        let start = match &p.continue_ {
            Some(c) if !c.is_empty() => Some(decode_continue(c)?),
            _ => None,
        };
        let key = (info.group.clone(), info.resource.clone());
        let ns = if info.namespaced { ns } else { None };
        let mut items = Vec::new();
        let mut next = None;
        let mut remaining = 0usize;
        if let Some(map) = st.objects.get(&key) {
            let iter = map
                .iter()
                .filter(|((ons, _), _)| ns.is_none_or(|n| n == ons));
            for ((ons, oname), obj) in iter {
                if let Some((sns, sname)) = &start
                    && (ons, oname) <= (sns, sname)
                {
                    continue;
                }
                if !ls.matches(obj) || !fs.matches(obj) {
                    continue;
                }
                if p.limit > 0 && items.len() >= p.limit {
                    if next.is_none() {
                        let last: &Value = items.last().unwrap();
                        next = Some(encode_continue(
                            meta_str(last, "namespace").unwrap_or(""),
                            meta_str(last, "name").unwrap_or(""),
                            st.rv,
                        ));
                    }
                    remaining += 1;
                    continue;
                }
                items.push(with_version(obj, gvr));
            }
        }
        let mut meta = json!({"resourceVersion": st.rv.to_string()});
        if let Some(n) = next {
            meta["continue"] = json!(n);
            if ls.is_empty() && fs == FieldSelector::default() {
                meta["remainingItemCount"] = json!(remaining);
            }
        }
        Ok(json!({
            "apiVersion": gvr.api_version(),
            "kind": info.list_kind,
            "metadata": meta,
            "items": items,
        }))
    }

    /// CREATE. The namespace comes from `obj.metadata.namespace` for namespaced kinds.
    pub fn create(&self, gvr: &Gvr, obj: Value) -> Result<Value, StatusError> {
        self.create_with(gvr, None, obj, &WriteOptions::default())
    }

    /// CREATE with the URL namespace `ns` (must agree with the object's, 400 otherwise).
    pub fn create_with(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, StatusError> {
        let mut st = self.lock();
        Self::create_locked(&mut st, gvr, ns, obj, opts, false).map(|o| with_version(&o, gvr))
    }

    fn create_locked(
        st: &mut State,
        gvr: &Gvr,
        ns: Option<&str>,
        mut obj: Value,
        opts: &WriteOptions,
        restore: bool,
    ) -> Result<Value, StatusError> {
        let info = st.info(gvr)?;
        if !obj.is_object() {
            return Err(StatusError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        let obj_ns = meta_str(&obj, "namespace").map(str::to_string);
        let ns = if info.namespaced {
            let n = match (ns, obj_ns.as_deref()) {
                (Some(u), Some(o)) if !o.is_empty() && u != o => {
                    return Err(StatusError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                (Some(u), _) => u.to_string(),
                (None, Some(o)) if !o.is_empty() => o.to_string(),
                _ => {
                    return Err(StatusError::bad_request(format!(
                        "{} must have metadata.namespace",
                        info.kind
                    )));
                }
            };
            st.namespace_check(&n)?;
            n
        } else {
            String::new()
        };
        let mut name = meta_str(&obj, "name").unwrap_or("").to_string();
        if name.is_empty() {
            match meta_str(&obj, "generateName") {
                Some(g) if !g.is_empty() => {
                    let key = (info.group.clone(), info.resource.clone());
                    loop {
                        let cand = format!("{g}{}", random_suffix());
                        if st.get_obj(&key, &ns, &cand).is_none() {
                            name = cand;
                            break;
                        }
                    }
                }
                _ => {
                    return Err(StatusError::invalid(
                        &info.group,
                        &info.kind,
                        "",
                        &[(
                            "metadata.name",
                            "FieldValueRequired",
                            "Required value: name or generateName is required",
                        )],
                    ));
                }
            }
        }
        let key = (info.group.clone(), info.resource.clone());
        if st.get_obj(&key, &ns, &name).is_some() {
            return Err(StatusError::already_exists(
                &info.group,
                &info.resource,
                &name,
            ));
        }
        obj["apiVersion"] = json!(if info.group.is_empty() {
            info.storage_version.clone()
        } else {
            format!("{}/{}", info.group, info.storage_version)
        });
        obj["kind"] = json!(info.kind);
        normalize_secret(&info, &mut obj);
        {
            let m = meta_mut(&mut obj);
            m.insert("name".into(), json!(name));
            if info.namespaced {
                m.insert("namespace".into(), json!(ns));
            } else {
                m.remove("namespace");
            }
            if !restore || !m.contains_key("uid") {
                m.insert("uid".into(), json!(new_uid()));
            }
            if !restore || !m.contains_key("creationTimestamp") {
                m.insert("creationTimestamp".into(), json!(now()));
            }
            if !restore {
                m.remove("deletionTimestamp");
                m.remove("deletionGracePeriodSeconds");
            }
            m.remove("resourceVersion");
            m.remove("selfLink");
            if info.tracks_generation && (!restore || !m.contains_key("generation")) {
                m.insert("generation".into(), json!(1));
            } else if !info.tracks_generation && !restore {
                m.remove("generation");
            }
        }
        if !restore && info.has_status() {
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
            match info.kind.as_str() {
                "Pod" => obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"}),
                "Namespace" => obj["status"] = json!({"phase": "Active"}),
                _ => {}
            }
        }
        if info.kind == "Namespace"
            && info.group.is_empty()
            && obj.pointer("/spec/finalizers").is_none()
        {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
        let crd = if info.group == "apiextensions.k8s.io"
            && info.resource == "customresourcedefinitions"
        {
            let ci = crd_to_info(&obj)?;
            if let Some(existing) = st.registry.by_resource(&ci.group, &ci.resource)
                && existing.builtin
            {
                return Err(StatusError::invalid(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    &name,
                    &[(
                        "spec.group",
                        "FieldValueInvalid",
                        "Invalid value: built-in group",
                    )],
                ));
            }
            obj["status"] = json!({
                "acceptedNames": obj.pointer("/spec/names").cloned().unwrap_or(json!({})),
                "storedVersions": [ci.storage_version.clone()],
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": now()},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": now()},
                ],
            });
            Some(ci)
        } else {
            None
        };
        if opts.dry_run {
            return Ok(obj);
        }
        if let Some(ci) = crd {
            st.registry.upsert(ci);
        }
        Ok(st.commit(&info, WatchEventType::Added, obj, None))
    }

    /// UPDATE (PUT) the main resource. 409 on a stale `metadata.resourceVersion`.
    pub fn update(&self, gvr: &Gvr, obj: Value) -> Result<Value, StatusError> {
        let ns = meta_str(&obj, "namespace").map(str::to_string);
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        self.update_with(
            gvr,
            ns.as_deref(),
            &name,
            obj,
            Subresource::Main,
            &WriteOptions::default(),
        )
    }

    /// UPDATE (PUT) the status subresource: only `status` is taken from `obj`.
    pub fn update_status(&self, gvr: &Gvr, obj: Value) -> Result<Value, StatusError> {
        let ns = meta_str(&obj, "namespace").map(str::to_string);
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        self.update_with(
            gvr,
            ns.as_deref(),
            &name,
            obj,
            Subresource::Status,
            &WriteOptions::default(),
        )
    }

    /// UPDATE with explicit URL namespace/name and subresource (the HTTP PUT path).
    pub fn update_with(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Value, StatusError> {
        let mut st = self.lock();
        let r = Self::update_locked(&mut st, gvr, ns, name, obj, sub, opts)?;
        Ok(with_version(&r, gvr))
    }

    fn update_locked(
        st: &mut State,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Value, StatusError> {
        let info = st.info(gvr)?;
        if !obj.is_object() {
            return Err(StatusError::bad_request(format!(
                "the body of the request must be a JSON object, got: {obj}"
            )));
        }
        let ns = if info.namespaced {
            ns.unwrap_or("")
        } else {
            ""
        };
        let key = (info.group.clone(), info.resource.clone());
        if let Some(n) = meta_str(&obj, "name")
            && n != name
        {
            return Err(StatusError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        if info.namespaced
            && let Some(n) = meta_str(&obj, "namespace")
            && !n.is_empty()
            && n != ns
        {
            return Err(StatusError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let Some(cur) = st.get_obj(&key, ns, name) else {
            return Err(StatusError::not_found(&info.group, &info.resource, name));
        };
        if let Some(rv) = meta_str(&obj, "resourceVersion")
            && !rv.is_empty()
            && rv != meta_str(&cur, "resourceVersion").unwrap_or("")
        {
            return Err(StatusError::conflict(&info.group, &info.resource, name));
        }
        let mut new = match sub {
            Subresource::Main => {
                let mut n = obj.clone();
                if info.has_status() {
                    match cur.get("status") {
                        Some(s) => n["status"] = s.clone(),
                        None => {
                            if let Some(m) = n.as_object_mut() {
                                m.remove("status");
                            }
                        }
                    }
                }
                if info.kind == "Pod" {
                    // ephemeralContainers only change through their subresource.
                    let ec = cur.pointer("/spec/ephemeralContainers").cloned();
                    if let Some(spec) = n.get_mut("spec").and_then(Value::as_object_mut) {
                        match ec {
                            Some(e) => {
                                spec.insert("ephemeralContainers".into(), e);
                            }
                            None => {
                                spec.remove("ephemeralContainers");
                            }
                        }
                    }
                }
                n
            }
            Subresource::Status => {
                let mut n = (*cur).clone();
                match obj.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(m) = n.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                n
            }
            Subresource::EphemeralContainers => {
                let old_ec = cur
                    .pointer("/spec/ephemeralContainers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let new_ec = obj
                    .pointer("/spec/ephemeralContainers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for (i, c) in new_ec.iter().enumerate() {
                    for f in ["name", "image"] {
                        if c.get(f).and_then(Value::as_str).unwrap_or("").is_empty() {
                            return Err(StatusError::invalid(
                                "",
                                "Pod",
                                name,
                                &[(
                                    &format!("spec.ephemeralContainers[{i}].{f}"),
                                    "FieldValueRequired",
                                    "Required value",
                                )],
                            ));
                        }
                    }
                }
                for oc in &old_ec {
                    let oname = oc.get("name").and_then(Value::as_str).unwrap_or("");
                    let same = new_ec
                        .iter()
                        .find(|c| c.get("name").and_then(Value::as_str) == Some(oname));
                    if same != Some(oc) {
                        return Err(StatusError::invalid(
                            "",
                            "Pod",
                            name,
                            &[(
                                "spec.ephemeralContainers",
                                "FieldValueForbidden",
                                &format!(
                                    "Forbidden: existing ephemeral containers {oname:?} may not be removed or changed"
                                ),
                            )],
                        ));
                    }
                }
                let mut n = (*cur).clone();
                n["spec"]["ephemeralContainers"] = Value::Array(new_ec);
                n
            }
        };
        // System metadata is owned by the server.
        {
            let curm = cur.get("metadata").cloned().unwrap_or(json!({}));
            let m = meta_mut(&mut new);
            for f in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "name",
            ] {
                match curm.get(f) {
                    Some(v) => {
                        m.insert(f.into(), v.clone());
                    }
                    None => {
                        m.remove(f);
                    }
                }
            }
            m.insert("resourceVersion".into(), curm["resourceVersion"].clone());
            m.remove("selfLink");
            m.remove("managedFields");
            if let Some(mf) = curm.get("managedFields") {
                m.insert("managedFields".into(), mf.clone());
            }
        }
        new["apiVersion"] = cur["apiVersion"].clone();
        new["kind"] = cur["kind"].clone();
        if sub == Subresource::Main {
            normalize_secret(&info, &mut new);
            immutable_fields(&info, name, &cur, &new)?;
        }
        if cur.pointer("/metadata/deletionTimestamp").is_some() {
            let old_f = finalizers(&cur);
            let added: Vec<String> = finalizers(&new)
                .into_iter()
                .filter(|f| !old_f.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(StatusError::invalid(
                    &info.group,
                    &info.kind,
                    name,
                    &[(
                        "metadata.finalizers",
                        "FieldValueForbidden",
                        &format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            added
                                .iter()
                                .map(|f| format!("{f:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )],
                ));
            }
        }
        if info.tracks_generation
            && sub == Subresource::Main
            && spec_part(&new, info.has_status()) != spec_part(&cur, info.has_status())
        {
            let g = cur
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        if new == *cur {
            return Ok((*cur).clone());
        }
        if opts.dry_run {
            return Ok(new);
        }
        if cur.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&new).is_empty() {
            let out = st.commit(&info, WatchEventType::Deleted, new, Some(cur));
            Self::after_delete(st, &info, &out);
            return Ok(out);
        }
        Ok(st.commit(&info, WatchEventType::Modified, new, Some(cur)))
    }

    /// PATCH the main resource (see [`Store::patch_with`]).
    pub fn patch(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &Value,
        field_manager: &str,
    ) -> Result<Value, StatusError> {
        self.patch_with(
            gvr,
            ns,
            name,
            kind,
            body,
            Subresource::Main,
            &WriteOptions {
                dry_run: false,
                field_manager: Some(field_manager.to_string()),
            },
        )
    }

    /// PATCH the status subresource.
    pub fn patch_status(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &Value,
        field_manager: &str,
    ) -> Result<Value, StatusError> {
        self.patch_with(
            gvr,
            ns,
            name,
            kind,
            body,
            Subresource::Status,
            &WriteOptions {
                dry_run: false,
                field_manager: Some(field_manager.to_string()),
            },
        )
    }

    /// PATCH: applies `body` to the current object and then follows the update rules of `sub`.
    /// A `metadata.resourceVersion` in the patch acts as a precondition (409 if stale).
    /// Strategic merge on a CRD is 415; `Apply` creates the object when missing.
    #[allow(clippy::too_many_arguments)]
    pub fn patch_with(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        body: &Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Value, StatusError> {
        let mut st = self.lock();
        let info = st.info(gvr)?;
        if kind == PatchKind::Strategic && !info.builtin {
            return Err(patch::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
        let nsv = if info.namespaced {
            ns.unwrap_or("")
        } else {
            ""
        };
        let key = (info.group.clone(), info.resource.clone());
        let Some(cur) = st.get_obj(&key, nsv, name) else {
            if kind == PatchKind::Apply && sub == Subresource::Main {
                let mut obj = body.clone();
                meta_mut(&mut obj).insert("name".into(), json!(name));
                let r = Self::create_locked(&mut st, gvr, ns, obj, opts, false)?;
                return Ok(with_version(&r, gvr));
            }
            return Err(StatusError::not_found(&info.group, &info.resource, name));
        };
        let doc = with_version(&cur, gvr);
        let patched = patch::apply(&doc, kind, body)?;
        let r = Self::update_locked(&mut st, gvr, ns, name, patched, sub, opts)?;
        Ok(with_version(&r, gvr))
    }

    /// DELETE with default options. Returns the object (with `deletionTimestamp` if finalizers
    /// hold it).
    pub fn delete(&self, gvr: &Gvr, ns: Option<&str>, name: &str) -> Result<Deleted, StatusError> {
        self.delete_with(gvr, ns, name, &DeleteOptions::default())
    }

    /// DELETE with options (preconditions: 409 `Precondition failed: UID in precondition: ...`).
    pub fn delete_with(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, StatusError> {
        let mut st = self.lock();
        let mut d = Self::delete_locked(&mut st, gvr, ns, name, opts)?;
        d.object = with_version(&d.object, gvr);
        Ok(d)
    }

    fn delete_locked(
        st: &mut State,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, StatusError> {
        let info = st.info(gvr)?;
        let nsv = if info.namespaced {
            ns.unwrap_or("")
        } else {
            ""
        };
        let key = (info.group.clone(), info.resource.clone());
        let Some(cur) = st.get_obj(&key, nsv, name) else {
            return Err(StatusError::not_found(&info.group, &info.resource, name));
        };
        if let Some(u) = &opts.precondition_uid {
            let have = meta_str(&cur, "uid").unwrap_or("");
            if u != have {
                return Err(StatusError::conflict_msg(
                    &info.group,
                    &info.resource,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {u}, UID in object meta: {have}"
                    ),
                ));
            }
        }
        if let Some(r) = &opts.precondition_resource_version {
            let have = meta_str(&cur, "resourceVersion").unwrap_or("");
            if r != have {
                return Err(StatusError::conflict_msg(
                    &info.group,
                    &info.resource,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {r}, ResourceVersion in object meta: {have}"
                    ),
                ));
            }
        }
        let is_ns = info.group.is_empty() && info.resource == "namespaces";
        if opts.dry_run {
            return Ok(Deleted {
                object: (*cur).clone(),
                gone: finalizers(&cur).is_empty() && !is_ns,
            });
        }
        if is_ns {
            if cur.pointer("/metadata/deletionTimestamp").is_none() {
                let mut n = (*cur).clone();
                meta_mut(&mut n).insert("deletionTimestamp".into(), json!(now()));
                meta_mut(&mut n).insert("deletionGracePeriodSeconds".into(), json!(0));
                n["status"] = json!({"phase": "Terminating"});
                st.commit(&info, WatchEventType::Modified, n, Some(cur.clone()));
            }
            // The namespace controller: delete everything inside, then the namespace.
            let inside: Vec<(Gvr, String)> = st
                .registry
                .infos
                .iter()
                .filter(|i| i.namespaced)
                .flat_map(|i| {
                    let key = (i.group.clone(), i.resource.clone());
                    let g = i.gvr(&i.storage_version);
                    st.objects
                        .get(&key)
                        .map(|m| {
                            m.keys()
                                .filter(|(ons, _)| ons == name)
                                .map(|(_, n)| (g.clone(), n.clone()))
                                .collect::<Vec<_>>()
                        })
                        .unwrap_or_default()
                })
                .collect();
            for (g, n) in inside {
                let _ = Self::delete_locked(st, &g, Some(name), &n, &DeleteOptions::default());
            }
            Self::maybe_finalize_namespace(st, name);
            let now_obj = st.get_obj(&key, "", name);
            return Ok(match now_obj {
                Some(o) => Deleted {
                    object: (*o).clone(),
                    gone: false,
                },
                None => Deleted {
                    object: (*cur).clone(),
                    gone: true,
                },
            });
        }
        if !finalizers(&cur).is_empty() {
            if cur.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Deleted {
                    object: (*cur).clone(),
                    gone: false,
                });
            }
            let mut n = (*cur).clone();
            meta_mut(&mut n).insert("deletionTimestamp".into(), json!(now()));
            meta_mut(&mut n).insert("deletionGracePeriodSeconds".into(), json!(0));
            let out = st.commit(&info, WatchEventType::Modified, n, Some(cur));
            return Ok(Deleted {
                object: out,
                gone: false,
            });
        }
        let out = st.commit(&info, WatchEventType::Deleted, (*cur).clone(), Some(cur));
        if opts.propagation_policy.as_deref() != Some("Orphan") {
            Self::after_delete(st, &info, &out);
        } else {
            Self::after_delete_no_gc(st, &info, &out);
        }
        Ok(Deleted {
            object: out,
            gone: true,
        })
    }

    fn after_delete_no_gc(st: &mut State, info: &ResourceInfo, obj: &Value) {
        if info.group == "apiextensions.k8s.io"
            && info.resource == "customresourcedefinitions"
            && let Ok(ci) = crd_to_info(obj)
        {
            st.objects.remove(&(ci.group.clone(), ci.resource.clone()));
            st.registry.remove(&ci.group, &ci.resource);
        }
        if info.kind == "Pod" {
            let ns = meta_str(obj, "namespace").unwrap_or("").to_string();
            let name = meta_str(obj, "name").unwrap_or("").to_string();
            for ((lns, lpod, _), buf) in st.logs.iter_mut() {
                if *lns == ns && *lpod == name {
                    buf.closed = true;
                }
            }
        }
        if info.namespaced
            && let Some(ns) = meta_str(obj, "namespace")
        {
            let ns = ns.to_string();
            Self::maybe_finalize_namespace(st, &ns);
        }
    }

    /// Post-delete work: CRD removal, namespace finalization, garbage collection of dependents
    /// whose owners are all gone.
    fn after_delete(st: &mut State, info: &ResourceInfo, obj: &Value) {
        Self::after_delete_no_gc(st, info, obj);
        let Some(uid) = meta_str(obj, "uid").map(str::to_string) else {
            return;
        };
        let mut all_uids = std::collections::HashSet::new();
        let mut dependents = Vec::new();
        for (key, m) in &st.objects {
            for o in m.values() {
                if let Some(u) = meta_str(o, "uid") {
                    all_uids.insert(u.to_string());
                }
            }
            let _ = key;
        }
        for i in &st.registry.infos {
            let key = (i.group.clone(), i.resource.clone());
            if let Some(m) = st.objects.get(&key) {
                for ((ons, oname), o) in m {
                    let refs = o
                        .pointer("/metadata/ownerReferences")
                        .and_then(Value::as_array);
                    if let Some(refs) = refs
                        && refs
                            .iter()
                            .any(|r| r.get("uid").and_then(Value::as_str) == Some(&uid))
                        && refs.iter().all(|r| {
                            !all_uids.contains(r.get("uid").and_then(Value::as_str).unwrap_or(""))
                        })
                    {
                        dependents.push((i.gvr(&i.storage_version), ons.clone(), oname.clone()));
                    }
                }
            }
        }
        for (g, ns, n) in dependents {
            let _ = Self::delete_locked(st, &g, Some(&ns), &n, &DeleteOptions::default());
        }
    }

    fn maybe_finalize_namespace(st: &mut State, ns: &str) {
        let nskey = (String::new(), "namespaces".to_string());
        let Some(nsobj) = st.get_obj(&nskey, "", ns) else {
            return;
        };
        if nsobj.pointer("/metadata/deletionTimestamp").is_none() {
            return;
        }
        let empty = st
            .objects
            .iter()
            .filter(|(k, _)| **k != nskey)
            .all(|(_, m)| !m.keys().any(|(ons, _)| ons == ns));
        if empty {
            let info = st.registry.by_resource("", "namespaces").cloned().unwrap();
            st.commit(
                &info,
                WatchEventType::Deleted,
                (*nsobj).clone(),
                Some(nsobj),
            );
        }
    }

    /// Puts an object as-is (create or replace), keeping its status, uid, creationTimestamp,
    /// generation and finalizers: the state-loading path (like restoring etcd). The namespace
    /// must exist. Returns the stored object.
    pub fn restore(&self, obj: Value) -> Result<Value, StatusError> {
        let gvr = self.gvr_of(&obj)?;
        let mut st = self.lock();
        let info = st.info(&gvr)?;
        let ns = meta_str(&obj, "namespace").map(str::to_string);
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        let key = (info.group.clone(), info.resource.clone());
        let nsv = if info.namespaced {
            ns.clone().unwrap_or_default()
        } else {
            String::new()
        };
        if let Some(cur) = st.get_obj(&key, &nsv, &name) {
            let mut n = obj.clone();
            n["apiVersion"] = cur["apiVersion"].clone();
            n["kind"] = cur["kind"].clone();
            let m = meta_mut(&mut n);
            if info.namespaced {
                m.insert("namespace".into(), json!(nsv));
            }
            for f in ["uid", "creationTimestamp"] {
                if !m.contains_key(f)
                    && let Some(v) = cur.pointer(&format!("/metadata/{f}"))
                {
                    m.insert(f.into(), v.clone());
                }
            }
            if info.tracks_generation && !m.contains_key("generation") {
                m.insert("generation".into(), cur["metadata"]["generation"].clone());
            }
            return Ok(st.commit(&info, WatchEventType::Modified, n, Some(cur)));
        }
        Self::create_locked(
            &mut st,
            &gvr,
            ns.as_deref(),
            obj,
            &WriteOptions::default(),
            true,
        )
    }

    /// Removes every object, watcher history and log; keeps the registry (CRDs stay) and
    /// recreates the four default namespaces. Open watches end.
    pub fn reset(&self) {
        {
            let mut st = self.lock();
            st.objects.retain(|k, _| k.0 == "apiextensions.k8s.io");
            st.history.clear();
            st.compacted = st.rv;
            st.watchers.clear();
            st.logs.clear();
        }
        self.shared.log_notify.notify_waiters();
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            self.ensure_namespace(ns);
        }
    }

    /// Every stored object, at storage versions, namespaces first, then by group, resource,
    /// namespace, name.
    pub fn dump(&self) -> Vec<Value> {
        let st = self.lock();
        let mut out = Vec::new();
        for i in &st.registry.infos {
            if let Some(m) = st.objects.get(&(i.group.clone(), i.resource.clone())) {
                out.extend(m.values().map(|o| (**o).clone()));
            }
        }
        out
    }

    /// WATCH from `since_rv` (`None` = ADDED for every current object, then changes).
    pub fn watch(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        since_rv: Option<&str>,
    ) -> Result<WatchStream, StatusError> {
        self.watch_with(
            gvr,
            ns,
            &WatchParams {
                resource_version: since_rv.map(str::to_string),
                ..Default::default()
            },
        )
    }

    /// WATCH with selectors and watch-list options. 410 Expired when the requested
    /// resourceVersion is older than the history window.
    pub fn watch_with(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        p: &WatchParams,
    ) -> Result<WatchStream, StatusError> {
        let ls = LabelSelector::parse(p.label_selector.as_deref().unwrap_or(""))?;
        let mut st = self.lock();
        let info = st.info(gvr)?;
        let fs = FieldSelector::parse(p.field_selector.as_deref().unwrap_or(""), info.builtin)?;
        let key = (info.group.clone(), info.resource.clone());
        let ns = if info.namespaced {
            ns.map(str::to_string)
        } else {
            None
        };
        let mut stream = WatchStream {
            gvr: gvr.clone(),
            labels: ls,
            fields: fs,
            pending: VecDeque::new(),
            rx: None,
            store: self.clone(),
            last_rv: st.rv,
        };
        let rv = p.resource_version.as_deref().unwrap_or("");
        if rv.is_empty() || rv == "0" || p.send_initial_events {
            if let Some(m) = st.objects.get(&key) {
                for ((ons, _), o) in m {
                    if ns.as_ref().is_some_and(|n| n != ons) {
                        continue;
                    }
                    if stream.labels.matches(o) && stream.fields.matches(o) {
                        stream.pending.push_back(WatchEvent {
                            type_: WatchEventType::Added,
                            object: with_version(o, gvr),
                        });
                    }
                }
            }
            if p.send_initial_events {
                stream.pending.push_back(WatchEvent {
                    type_: WatchEventType::Bookmark,
                    object: json!({
                        "apiVersion": gvr.api_version(),
                        "kind": gvr.kind,
                        "metadata": {
                            "resourceVersion": st.rv.to_string(),
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    }),
                });
            }
        } else {
            let since = parse_rv(rv)?;
            if since < st.compacted {
                return Err(StatusError::gone(since, st.compacted));
            }
            let evs: Vec<RawEvent> = st
                .history
                .iter()
                .filter(|h| {
                    h.ev.rv > since && h.key == key && ns.as_ref().is_none_or(|n| *n == h.ns)
                })
                .map(|h| h.ev.clone())
                .collect();
            for ev in evs {
                if let Some(e) = stream.convert(&ev) {
                    stream.pending.push_back(e);
                }
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        st.watchers.push(Watcher { key, ns, tx });
        stream.rx = Some(rx);
        Ok(stream)
    }

    /// Appends `bytes` to the log of `container` in pod `ns/pod` (followers wake up).
    pub fn append_pod_log(&self, ns: &str, pod: &str, container: &str, bytes: &[u8]) {
        {
            let mut st = self.lock();
            let b = st
                .logs
                .entry((ns.into(), pod.into(), container.into()))
                .or_default();
            b.data.extend_from_slice(bytes);
        }
        self.shared.log_notify.notify_waiters();
    }

    /// Marks a container log finished: `follow` readers end after the last byte.
    pub fn close_pod_log(&self, ns: &str, pod: &str, container: &str) {
        {
            let mut st = self.lock();
            st.logs
                .entry((ns.into(), pod.into(), container.into()))
                .or_default()
                .closed = true;
        }
        self.shared.log_notify.notify_waiters();
    }

    /// The log bytes from `offset`, and whether the log is closed (or the pod gone).
    pub fn read_pod_log(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        offset: usize,
    ) -> (Vec<u8>, bool) {
        let st = self.lock();
        let pod_gone = st
            .get_obj(&(String::new(), "pods".into()), ns, pod)
            .is_none();
        match st.logs.get(&(ns.into(), pod.into(), container.into())) {
            Some(b) => (
                b.data.get(offset..).map(<[u8]>::to_vec).unwrap_or_default(),
                b.closed || pod_gone,
            ),
            None => (Vec::new(), pod_gone),
        }
    }

    /// Wakes log followers (HTTP `follow=true`); they re-read with [`Store::read_pod_log`].
    pub(crate) fn log_notify(&self) -> &Notify {
        &self.shared.log_notify
    }

    /// Ends all open watches (their streams return `None`): used by fault injection.
    pub fn drop_watches(&self) {
        self.lock().watchers.clear();
    }

    /// Number of open watchers (closed ones are pruned on the next write).
    pub fn watcher_count(&self) -> usize {
        let mut st = self.lock();
        st.watchers.retain(|w| !w.tx.is_closed());
        st.watchers.len()
    }
}

/// The apiserver's immutability rules that matter for our workloads:
/// - Job `spec.template` and `spec.selector` (k8s.io/kubernetes pkg/apis/batch/validation
///   ValidateJobSpecUpdate; the mutable-scheduling-directives exception for suspended Jobs is
///   not modelled);
/// - Deployment/ReplicaSet/StatefulSet/DaemonSet `spec.selector` (apps/validation).
///
/// 422 `Job.batch "x" is invalid: spec.template: Invalid value: <JSON>: field is immutable`
/// (upstream prints the Go struct instead of JSON).
fn immutable_fields(
    info: &ResourceInfo,
    name: &str,
    cur: &Value,
    new: &Value,
) -> Result<(), StatusError> {
    let fields: &[&str] = match (info.group.as_str(), info.kind.as_str()) {
        ("batch", "Job") => &["selector", "template"],
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => &["selector"],
        _ => return Ok(()),
    };
    for f in fields {
        let ptr = format!("/spec/{f}");
        let (o, n) = (cur.pointer(&ptr), new.pointer(&ptr));
        if o != n {
            let shown = n.map(Value::to_string).unwrap_or_else(|| "null".into());
            return Err(StatusError::invalid(
                &info.group,
                &info.kind,
                name,
                &[(
                    &format!("spec.{f}"),
                    "FieldValueInvalid",
                    &format!("Invalid value: {shown}: field is immutable"),
                )],
            ));
        }
    }
    Ok(())
}

fn encode_continue(ns: &str, name: &str, rv: u64) -> String {
    use base64::Engine;
    let j = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{ns}/{name}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(j.to_string())
}

fn decode_continue(tok: &str) -> Result<(String, String), StatusError> {
    use base64::Engine;
    let bad = || StatusError::bad_request(format!("continue key is not valid: {tok}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok)
        .map_err(|_| bad())?;
    let j: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let start = j.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((ns.to_string(), name.to_string()))
}

/// A running watch: yields events in resourceVersion order. Ends (`None`) when the store drops
/// the watch (reset, fault injection).
pub struct WatchStream {
    gvr: Gvr,
    labels: LabelSelector,
    fields: FieldSelector,
    pending: VecDeque<WatchEvent>,
    rx: Option<mpsc::UnboundedReceiver<RawEvent>>,
    store: Store,
    last_rv: u64,
}

impl WatchStream {
    fn convert(&mut self, ev: &RawEvent) -> Option<WatchEvent> {
        self.last_rv = self.last_rv.max(ev.rv);
        let m = |o: &Value| self.labels.matches(o) && self.fields.matches(o);
        let now_m = m(&ev.obj);
        let old_m = ev.old.as_ref().is_some_and(|o| m(o));
        let t = match ev.type_ {
            WatchEventType::Added if now_m => WatchEventType::Added,
            WatchEventType::Deleted if old_m || now_m => WatchEventType::Deleted,
            WatchEventType::Modified => match (old_m, now_m) {
                (true, true) => WatchEventType::Modified,
                (false, true) => WatchEventType::Added,
                (true, false) => WatchEventType::Deleted,
                (false, false) => return None,
            },
            _ => return None,
        };
        Some(WatchEvent {
            type_: t,
            object: with_version(&ev.obj, &self.gvr),
        })
    }

    /// The next event, or `None` when the watch was closed by the server side.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            let ev = self.rx.as_mut()?.recv().await?;
            if let Some(e) = self.convert(&ev) {
                return Some(e);
            }
        }
    }

    /// Queues a BOOKMARK carrying a resourceVersion no older than any event already queued: all
    /// events committed so far are moved into the queue first, so resuming from the bookmark
    /// loses nothing.
    pub fn queue_bookmark(&mut self) {
        let rv = {
            let st = self.store.lock();
            let mut raw = Vec::new();
            if let Some(rx) = self.rx.as_mut() {
                while let Ok(ev) = rx.try_recv() {
                    raw.push(ev);
                }
            }
            let rv = st.rv;
            drop(st);
            for ev in raw {
                if let Some(e) = self.convert(&ev) {
                    self.pending.push_back(e);
                }
            }
            rv
        };
        self.pending.push_back(WatchEvent {
            type_: WatchEventType::Bookmark,
            object: json!({
                "apiVersion": self.gvr.api_version(),
                "kind": self.gvr.kind,
                "metadata": {"resourceVersion": rv.to_string()},
            }),
        });
    }

    /// The highest resourceVersion this stream has seen.
    pub fn last_resource_version(&self) -> u64 {
        self.last_rv
    }
}

impl futures::Stream for WatchStream {
    type Item = WatchEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<WatchEvent>> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Poll::Ready(Some(e));
            }
            let Some(rx) = self.rx.as_mut() else {
                return Poll::Ready(None);
            };
            match rx.poll_recv(cx) {
                Poll::Ready(Some(ev)) => {
                    if let Some(e) = self.convert(&ev) {
                        return Poll::Ready(Some(e));
                    }
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ks(store: &Store) -> Gvr {
        let crd: Value = serde_saphyr::from_str(include_str!(
            "../crds/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
        ))
        .unwrap();
        let g = store
            .gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        store.create(&g, crd).unwrap();
        store.ensure_namespace("flux-system");
        store
            .gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
            .unwrap()
    }

    fn obj(name: &str) -> Value {
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
               "metadata": {"name": name, "namespace": "flux-system"},
               "spec": {"interval": "1m", "path": "./"}, "status": {"x": 1}})
    }

    #[test]
    fn generation_and_status_rules() {
        let s = Store::default();
        let g = ks(&s);
        let o = s.create(&g, obj("a")).unwrap();
        assert_eq!(o["metadata"]["generation"], 1);
        assert!(o.get("status").is_none(), "create drops status");
        let mut o2 = o.clone();
        o2["metadata"]["labels"] = json!({"x": "y"});
        let o3 = s.update(&g, o2).unwrap();
        assert_eq!(
            o3["metadata"]["generation"], 1,
            "metadata change keeps generation"
        );
        assert_ne!(
            o3["metadata"]["resourceVersion"],
            o["metadata"]["resourceVersion"]
        );
        // stale RV -> 409
        let err = s.update(&g, o.clone()).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on kustomizations.kustomize.toolkit.fluxcd.io \"a\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let o4 = s
            .patch(
                &g,
                Some("flux-system"),
                "a",
                PatchKind::Merge,
                &json!({"spec": {"suspend": true}}),
                "t",
            )
            .unwrap();
        assert_eq!(o4["metadata"]["generation"], 2);
        let o5 = s
            .patch_status(
                &g,
                Some("flux-system"),
                "a",
                PatchKind::Merge,
                &json!({"status": {"observedGeneration": 2}, "spec": {"suspend": false}}),
                "t",
            )
            .unwrap();
        assert_eq!(o5["metadata"]["generation"], 2);
        assert_eq!(o5["spec"]["suspend"], true, "status update ignores spec");
        assert_eq!(o5["status"]["observedGeneration"], 2);
        // main update ignores status
        let o6 = s
            .patch(
                &g,
                Some("flux-system"),
                "a",
                PatchKind::Merge,
                &json!({"status": {"observedGeneration": 9}}),
                "t",
            )
            .unwrap();
        assert_eq!(o6["status"]["observedGeneration"], 2);
        assert_eq!(
            o6["metadata"]["resourceVersion"], o5["metadata"]["resourceVersion"],
            "no-op write"
        );
    }

    #[test]
    fn non_object_bodies_are_rejected_not_panicking() {
        let s = Store::default();
        let g = ks(&s);
        s.create(&g, obj("p")).unwrap();
        let e = s
            .patch(
                &g,
                Some("flux-system"),
                "p",
                PatchKind::Json,
                &json!([{"op": "replace", "path": "", "value": [1]}]),
                "t",
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        let e = s
            .update_with(
                &g,
                Some("flux-system"),
                "p",
                json!("x"),
                Subresource::Main,
                &WriteOptions::default(),
            )
            .unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(s.create(&g, json!([1])).unwrap_err().code, 400);
    }

    #[test]
    fn finalizers_hold_deletion() {
        let s = Store::default();
        let g = ks(&s);
        let mut o = obj("f");
        o["metadata"]["finalizers"] = json!(["finalizers.fluxcd.io"]);
        s.create(&g, o).unwrap();
        let d = s.delete(&g, Some("flux-system"), "f").unwrap();
        assert!(!d.gone);
        assert!(d.object["metadata"]["deletionTimestamp"].is_string());
        let err = s
            .patch(
                &g,
                Some("flux-system"),
                "f",
                PatchKind::Merge,
                &json!({"metadata": {"finalizers": ["finalizers.fluxcd.io", "x"]}}),
                "t",
            )
            .unwrap_err();
        assert_eq!(err.code, 422);
        s.patch(
            &g,
            Some("flux-system"),
            "f",
            PatchKind::Merge,
            &json!({"metadata": {"finalizers": null}}),
            "t",
        )
        .unwrap();
        assert_eq!(s.get(&g, Some("flux-system"), "f").unwrap_err().code, 404);
    }

    #[test]
    fn job_template_is_immutable() {
        let s = Store::default();
        let g = s.gvr("batch", "v1", "jobs").unwrap();
        s.create(
            &g,
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate", "namespace": "default"},
                   "spec": {"template": {"spec": {"containers": [{"name": "m", "image": "m:1"}], "restartPolicy": "Never"}}}}),
        )
        .unwrap();
        let e = s
            .patch(&g, Some("default"), "migrate", PatchKind::Strategic,
                &json!({"spec": {"template": {"spec": {"containers": [{"name": "m", "image": "m:2"}]}}}}), "t")
            .unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message
                .starts_with("Job.batch \"migrate\" is invalid: spec.template: Invalid value: "),
            "{}",
            e.message
        );
        assert!(e.message.ends_with(": field is immutable"), "{}", e.message);
    }

    #[tokio::test]
    async fn watch_history_and_gone() {
        let s = Store::new(3);
        let g = ks(&s);
        let first = s.create(&g, obj("w0")).unwrap();
        let rv0 = first["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        for i in 1..6 {
            s.create(&g, obj(&format!("w{i}"))).unwrap();
        }
        let e = s.watch(&g, Some("flux-system"), Some(&rv0)).err().unwrap();
        assert_eq!(e.code, 410);
        assert!(
            e.message
                .starts_with(&format!("too old resource version: {rv0} ("))
        );
        let rv = s.resource_version().to_string();
        let mut w = s.watch(&g, Some("flux-system"), Some(&rv)).unwrap();
        s.create(&g, obj("later")).unwrap();
        let ev = w.next().await.unwrap();
        assert_eq!(ev.type_, WatchEventType::Added);
        assert_eq!(ev.object["metadata"]["name"], "later");
    }
}
