//! Workload model: a stand-in for kube-controller-manager's workload controllers and the
//! kubelet, so applied Deployments, StatefulSets, DaemonSets and Jobs get ReplicaSets, Pods
//! and status the way a real cluster reports them.
//!
//! Read from kubernetes `pkg/controller/deployment` (sync.go `getNewReplicaSet`,
//! `syncDeploymentStatus`, progress.go, util/deployment_util.go condition reasons and
//! messages), `pkg/controller/replicaset`, `pkg/controller/statefulset`,
//! `pkg/controller/daemon`, `pkg/controller/job`, and the kubelet image puller
//! (`pkg/kubelet/images/image_manager.go`: `ErrImagePull`, `ImagePullBackOff`,
//! `Back-off pulling image "X"`). Rules:
//! - Deployment: a ReplicaSet `<name>-<pod-template-hash>` per template (FNV-32a of the
//!   template, encoded like `rand.SafeEncodeString`), the new RS scaled to spec.replicas at once
//!   and old RSs scaled down as new pods become available (maxUnavailable 0 style);
//!   status observedGeneration, replicas, updatedReplicas, readyReplicas, availableReplicas,
//!   unavailableReplicas; conditions Available (`MinimumReplicasAvailable` /
//!   `MinimumReplicasUnavailable`) and Progressing (`NewReplicaSetCreated`,
//!   `ReplicaSetUpdated`, `NewReplicaSetAvailable`, and `ProgressDeadlineExceeded`:
//!   `ReplicaSet "X" has timed out progressing.` after spec.progressDeadlineSeconds (default
//!   600) without progress).
//! - Pods: every container image is checked against the registry list
//!   ([`Registry`]); pullable -> Running and Ready (Job pods: Succeeded); not pullable -> Pending
//!   with the container waiting `ErrImagePull` (`rpc error: code = NotFound desc = failed to
//!   pull and unpack image "docker.io/library/0.1.1:latest": ...`), then after the back-off
//!   `ImagePullBackOff` with `Back-off pulling image "0.1.1"`; kubelet-like Events
//!   (`Pulling`, `Pulled`, `Failed`, `BackOff`, `Created`, `Started`).
//! - StatefulSet: pods `<name>-0..N-1` in order (OrderedReady), currentRevision/updateRevision
//!   `<name>-<hash>`, pods of an old revision replaced from the highest ordinal.
//! - DaemonSet: one node (`twin-node`), one pod; desired/current/updated/ready/available counts.
//! - Job: one pod per run; Succeeded pod -> `Complete` and `SuccessCriteriaMet` conditions,
//!   succeeded/startTime/completionTime; pending pod -> active 1, ready 0.
//!
//! Left out: maxSurge/maxUnavailable arithmetic beyond "new RS at full size, old scaled down by
//! available new pods", minReadySeconds, scheduling and resources (every pod fits on
//! `twin-node`), probes (a running container is ready at once), restarts/CrashLoopBackOff,
//! the ErrImagePull <-> ImagePullBackOff alternation (it stays in ImagePullBackOff), Job
//! parallelism/completions > 1, backoffLimit, CronJobs, garbage collection of orphans. The
//! Job pod-template immutability (422 `field is immutable`) is the apiserver's validation,
//! not modelled here.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::flux::ModelOptions;
use crate::flux::cluster::{ChangeType, ClusterRef, ObjKey, now_rfc3339, record_event, s};
use crate::flux::queue::WorkQueue;

/// Images the nodes can pull. Entries are full references (`host/path:tag`,
/// `host/path@sha256:...`), a repository with `:*` for any tag, or a bare name as written.
#[derive(Clone, Default)]
pub struct Registry {
    images: Arc<Mutex<Vec<String>>>,
}

impl Registry {
    /// A registry with these references.
    pub fn new(images: &[String]) -> Self {
        Registry {
            images: Arc::new(Mutex::new(images.to_vec())),
        }
    }
    /// Adds a pullable reference.
    pub fn add(&self, image: &str) {
        self.images.lock().unwrap().push(image.to_string());
    }
    /// True when `image` (as written in a pod spec) can be pulled.
    pub fn can_pull(&self, image: &str) -> bool {
        let norm = normalize_image(image);
        self.images.lock().unwrap().iter().any(|e| {
            if let Some(repo) = e.strip_suffix(":*") {
                let (r, _) = split_ref(&norm);
                return r == normalize_repo(repo);
            }
            *e == image || normalize_image(e) == norm
        })
    }
}

fn split_ref(r: &str) -> (String, String) {
    if let Some((repo, d)) = r.split_once('@') {
        return (repo.to_string(), format!("@{d}"));
    }
    match r.rfind(':') {
        Some(i) if !r[i..].contains('/') => (r[..i].to_string(), r[i..].to_string()),
        _ => (r.to_string(), String::new()),
    }
}

fn normalize_repo(repo: &str) -> String {
    let first = repo.split('/').next().unwrap_or_default();
    let has_host =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_host {
        repo.to_string()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    }
}

/// Docker reference normalisation (`0.1.1` -> `docker.io/library/0.1.1:latest`), as the
/// container runtime reports it.
pub fn normalize_image(image: &str) -> String {
    let (repo, tag) = split_ref(image);
    let tag = if tag.is_empty() {
        ":latest".to_string()
    } else {
        tag
    };
    format!("{}{tag}", normalize_repo(&repo))
}

/// k8s.io/apimachinery `rand.SafeEncodeString` alphabet.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Pod-template hash: FNV-32a of the template's JSON, `SafeEncodeString` of its decimal.
pub fn template_hash(template: &Value) -> String {
    let mut h: u32 = 0x811c9dc5;
    for b in template.to_string().bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x01000193);
    }
    h.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

static SEQ: AtomicU64 = AtomicU64::new(0);

fn suffix() -> String {
    let mut x = SEQ.fetch_add(1, Ordering::Relaxed)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7);
    (0..5)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHANUMS[(x % ALPHANUMS.len() as u64) as usize] as char
        })
        .collect()
}

const MANAGER: &str = "kube-controller-manager";

/// The running workload model.
pub struct WorkloadController {
    cluster: ClusterRef,
    opts: Arc<ModelOptions>,
    registry: Registry,
    queue: WorkQueue<ObjKey>,
    /// When each pod started failing to pull (for the back-off transition).
    pull_failed_at: Mutex<HashMap<ObjKey, Instant>>,
    /// Last progress time per Deployment (for ProgressDeadlineExceeded).
    progress_at: Mutex<HashMap<ObjKey, Instant>>,
}

const KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"),
    ("v1", "Pod"),
];

impl WorkloadController {
    /// Starts the model against `cluster`.
    pub fn start(cluster: ClusterRef, opts: Arc<ModelOptions>, registry: Registry) -> Arc<Self> {
        let ctl = Arc::new(WorkloadController {
            cluster,
            opts,
            registry,
            queue: WorkQueue::new(),
            pull_failed_at: Mutex::new(HashMap::new()),
            progress_at: Mutex::new(HashMap::new()),
        });
        let mut rx = ctl.cluster.watch(KINDS);
        for (api, kind) in KINDS {
            for o in ctl.cluster.list(api, kind, None).unwrap_or_default() {
                ctl.queue.add(ObjKey::of(&o));
            }
        }
        let c = ctl.clone();
        tokio::spawn(async move {
            while let Some(ch) = rx.recv().await {
                let key = ObjKey::of(&ch.object);
                // owners first: a pod or RS change re-syncs its controller
                if let Some(owner) = controller_of(&ch.object) {
                    c.queue.add(owner);
                }
                if ch.event != ChangeType::Deleted {
                    c.queue.add(key);
                } else if key.kind == "Deployment" {
                    c.progress_at.lock().unwrap().remove(&key);
                }
            }
        });
        let c = ctl.clone();
        tokio::spawn(async move {
            while let Some(key) = c.queue.get().await {
                let again = c.sync(&key);
                c.queue.done(&key);
                if let Some(d) = again {
                    c.queue.add_after(key, d);
                }
            }
        });
        ctl
    }

    /// Stops the model.
    pub fn stop(&self) {
        self.queue.shut_down();
    }

    /// The registry the kubelet pulls from.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn sync(&self, key: &ObjKey) -> Option<Duration> {
        let obj = self.cluster.get(key).ok().flatten()?;
        if !s(&obj, "/metadata/deletionTimestamp").is_empty() {
            return None;
        }
        match key.kind.as_str() {
            "Deployment" => self.sync_deployment(&obj),
            "ReplicaSet" => self.sync_replicas(&obj, key),
            "StatefulSet" => self.sync_statefulset(&obj),
            "DaemonSet" => self.sync_daemonset(&obj),
            "Job" => self.sync_job(&obj),
            "Pod" => self.kubelet(&obj),
            _ => None,
        }
    }

    fn owned_by(&self, api: &str, kind: &str, owner: &Value) -> Vec<Value> {
        let uid = s(owner, "/metadata/uid");
        self.cluster
            .list(api, kind, Some(s(owner, "/metadata/namespace")))
            .unwrap_or_default()
            .into_iter()
            .filter(|o| {
                o.pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|a| a.iter().any(|r| r["uid"] == uid && r["controller"] == true))
            })
            .collect()
    }

    fn new_pod(&self, owner: &Value, name: String, extra_labels: Value) -> Value {
        let tmpl = owner
            .pointer("/spec/template")
            .cloned()
            .unwrap_or(json!({}));
        let mut labels = tmpl
            .pointer("/metadata/labels")
            .cloned()
            .unwrap_or(json!({}));
        if let (Some(l), Some(e)) = (labels.as_object_mut(), extra_labels.as_object()) {
            for (k, v) in e {
                l.insert(k.clone(), v.clone());
            }
        }
        let mut spec = tmpl.get("spec").cloned().unwrap_or(json!({}));
        spec["nodeName"] = json!("twin-node");
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": s(owner, "/metadata/namespace"),
                "labels": labels,
                "annotations": tmpl.pointer("/metadata/annotations").cloned().unwrap_or(json!({})),
                "ownerReferences": [owner_ref(owner)],
            },
            "spec": spec,
        })
    }

    fn set_status(&self, obj: &Value, status: Value) {
        let mut merged = obj.get("status").cloned().unwrap_or(json!({}));
        if !merged.is_object() {
            merged = json!({});
        }
        if let Some(m) = status.as_object() {
            for (k, v) in m {
                merged[k] = v.clone();
            }
        }
        if obj.get("status") == Some(&merged) {
            return;
        }
        let _ =
            self.cluster
                .merge_patch_status(&ObjKey::of(obj), json!({"status": merged}), MANAGER);
    }

    /// Pod counts: (total, ready, available).
    fn pod_counts(pods: &[Value]) -> (i64, i64, i64) {
        let total = pods.len() as i64;
        let ready = pods.iter().filter(|p| pod_ready(p)).count() as i64;
        (total, ready, ready)
    }

    fn sync_replicas(&self, rs: &Value, key: &ObjKey) -> Option<Duration> {
        let want = rs
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let mut pods = self.owned_by("v1", "Pod", rs);
        pods.retain(|p| s(p, "/metadata/deletionTimestamp").is_empty());
        let hash = s(rs, "/metadata/labels/pod-template-hash").to_string();
        while (pods.len() as i64) < want {
            let name = format!("{}-{}", key.name, suffix());
            let p = self.new_pod(rs, name, json!({"pod-template-hash": hash}));
            match self.cluster.create(p) {
                Ok(p) => pods.push(p),
                Err(_) => break,
            }
        }
        if (pods.len() as i64) > want {
            // delete not-ready pods first, then the newest
            pods.sort_by_key(|p| {
                (
                    pod_ready(p),
                    std::cmp::Reverse(s(p, "/metadata/creationTimestamp").to_string()),
                )
            });
            for p in pods
                .drain(..(pods.len() - want as usize))
                .collect::<Vec<_>>()
            {
                let _ = self.cluster.delete(&ObjKey::of(&p));
            }
        }
        let (total, ready, avail) = Self::pod_counts(&pods);
        self.set_status(
            rs,
            json!({
                "replicas": total, "fullyLabeledReplicas": total, "readyReplicas": ready,
                "availableReplicas": avail,
                "observedGeneration": rs.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            }),
        );
        None
    }

    fn sync_deployment(&self, d: &Value) -> Option<Duration> {
        let key = ObjKey::of(d);
        let name = key.name.clone();
        let replicas = d
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
        let hash = template_hash(&template);
        let rs_name = format!("{name}-{hash}");
        let all_rs = self.owned_by("apps/v1", "ReplicaSet", d);
        let mut new_rs = all_rs
            .iter()
            .find(|r| s(r, "/metadata/name") == rs_name)
            .cloned();
        let mut created_rs = false;
        if new_rs.is_none() {
            let mut tmpl = template.clone();
            tmpl["metadata"]["labels"]["pod-template-hash"] = json!(hash);
            let mut sel = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
            sel["matchLabels"]["pod-template-hash"] = json!(hash);
            let rs = json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {
                    "name": rs_name, "namespace": key.namespace,
                    "labels": tmpl["metadata"]["labels"].clone(),
                    "annotations": {"deployment.kubernetes.io/revision": (all_rs.len() + 1).to_string()},
                    "ownerReferences": [owner_ref(d)],
                },
                "spec": {"replicas": replicas, "selector": sel, "template": tmpl},
            });
            new_rs = self.cluster.create(rs).ok();
            created_rs = true;
            self.progress_at
                .lock()
                .unwrap()
                .insert(key.clone(), Instant::now());
            record_event(
                &*self.cluster,
                d,
                "Normal",
                "ScalingReplicaSet",
                &format!("Scaled up replica set {rs_name} from 0 to {replicas}"),
                "deployment-controller",
                None,
            );
        }
        let new_rs = new_rs?;
        if new_rs.pointer("/spec/replicas").and_then(Value::as_i64) != Some(replicas) {
            let _ = self.cluster.merge_patch(
                &ObjKey::of(&new_rs),
                json!({"spec": {"replicas": replicas}}),
                MANAGER,
            );
        }
        let new_pods = self.owned_by("v1", "Pod", &new_rs);
        let (_, new_ready, new_avail) = Self::pod_counts(&new_pods);
        // scale old ReplicaSets down as new pods become available
        let mut old_total = 0;
        let mut old_ready = 0;
        let mut budget = (replicas - new_avail).max(0);
        let mut olds: Vec<&Value> = all_rs
            .iter()
            .filter(|r| s(r, "/metadata/name") != rs_name)
            .collect();
        olds.sort_by_key(|r| std::cmp::Reverse(s(r, "/metadata/creationTimestamp").to_string()));
        for r in olds {
            let cur = r
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let keep = cur.min(budget);
            budget -= keep;
            if keep != cur {
                let _ = self.cluster.merge_patch(
                    &ObjKey::of(r),
                    json!({"spec": {"replicas": keep}}),
                    MANAGER,
                );
            }
            let pods = self.owned_by("v1", "Pod", r);
            let (t, rd, _) = Self::pod_counts(&pods);
            old_total += t;
            old_ready += rd;
        }
        let total = new_pods.len() as i64 + old_total;
        let ready = new_ready + old_ready;
        let available = new_avail + old_ready;
        let updated = new_pods.len() as i64;
        let mut conds: Vec<Value> = d
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let now = now_rfc3339();
        let avail_ok = available >= replicas;
        set_cond(
            &mut conds,
            "Available",
            if avail_ok { "True" } else { "False" },
            if avail_ok {
                "MinimumReplicasAvailable"
            } else {
                "MinimumReplicasUnavailable"
            },
            if avail_ok {
                "Deployment has minimum availability."
            } else {
                "Deployment does not have minimum availability."
            },
            &now,
        );
        let complete = updated == replicas && new_avail == replicas && old_total == 0;
        let deadline = d
            .pointer("/spec/progressDeadlineSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(600);
        let prev_prog = conds.iter().find(|c| c["type"] == "Progressing").cloned();
        let prev_avail = d
            .pointer("/status/availableReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let prev_updated = d
            .pointer("/status/updatedReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        // A rollout to another ReplicaSet (a new template, or back to an old one: a revert)
        // restarts the progress clock; the controller counts progress per new ReplicaSet
        // (kubernetes pkg/controller/deployment/progress.go: the Progressing condition names it).
        let switched = prev_prog
            .as_ref()
            .is_some_and(|c| !s(c, "/message").contains(&rs_name));
        if new_avail > prev_avail || updated > prev_updated || created_rs || switched {
            self.progress_at
                .lock()
                .unwrap()
                .insert(key.clone(), Instant::now());
        }
        let mut again = None;
        if complete {
            set_cond(
                &mut conds,
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                &format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
                &now,
            );
        } else if prev_prog.as_ref().is_some_and(|c| {
            c["reason"] == "ProgressDeadlineExceeded" && s(c, "/message").contains(&rs_name)
        }) {
            // stays exceeded until a new rollout
        } else {
            let since = *self
                .progress_at
                .lock()
                .unwrap()
                .entry(key.clone())
                .or_insert_with(Instant::now);
            let limit = self
                .opts
                .scaled(Duration::from_secs(deadline.max(0) as u64));
            if deadline != i64::from(i32::MAX) && since.elapsed() >= limit {
                set_cond(
                    &mut conds,
                    "Progressing",
                    "False",
                    "ProgressDeadlineExceeded",
                    &format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
                    &now,
                );
            } else {
                let (reason, msg) = if created_rs || prev_prog.is_none() {
                    (
                        "NewReplicaSetCreated",
                        format!("Created new replica set \"{rs_name}\""),
                    )
                } else {
                    (
                        "ReplicaSetUpdated",
                        format!("ReplicaSet \"{rs_name}\" is progressing."),
                    )
                };
                let keep = prev_prog.as_ref().is_some_and(|c| {
                    c["status"] == "True"
                        && s(c, "/message").contains(&rs_name)
                        && c["reason"] != "NewReplicaSetAvailable"
                });
                if !keep {
                    set_cond(&mut conds, "Progressing", "True", reason, &msg, &now);
                }
                again = Some(limit.saturating_sub(since.elapsed()) + Duration::from_millis(5));
            }
        }
        let mut status = json!({
            "observedGeneration": d.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "replicas": total, "updatedReplicas": updated, "readyReplicas": ready,
            "availableReplicas": available, "conditions": conds,
        });
        if replicas - available > 0 {
            status["unavailableReplicas"] = json!(replicas - available);
        } else {
            status["unavailableReplicas"] = Value::Null;
        }
        let mut merged = d.get("status").cloned().unwrap_or(json!({}));
        if !merged.is_object() {
            merged = json!({});
        }
        for (k, v) in status.as_object().into_iter().flatten() {
            if v.is_null() {
                merged.as_object_mut().map(|m| m.remove(k));
            } else {
                merged[k] = v.clone();
            }
        }
        if d.get("status") != Some(&merged) {
            let mut patch = merged.clone();
            if d.pointer("/status/unavailableReplicas").is_some()
                && merged.get("unavailableReplicas").is_none()
            {
                patch["unavailableReplicas"] = Value::Null;
            }
            let _ = self
                .cluster
                .merge_patch_status(&key, json!({"status": patch}), MANAGER);
        }
        again
    }

    fn sync_statefulset(&self, sts: &Value) -> Option<Duration> {
        let key = ObjKey::of(sts);
        let replicas = sts
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let rev = format!("{}-{}", key.name, template_hash(&sts["spec"]["template"]));
        let mut pods: BTreeMap<i64, Value> = BTreeMap::new();
        for p in self.owned_by("v1", "Pod", sts) {
            if let Some(i) = s(&p, "/metadata/name")
                .rsplit_once('-')
                .and_then(|(_, i)| i.parse().ok())
            {
                pods.insert(i, p);
            }
        }
        // OrderedReady: create the lowest missing ordinal when all lower ones are ready
        for i in 0..replicas {
            match pods.get(&i) {
                Some(p) if pod_ready(p) => continue,
                Some(_) => break,
                None => {
                    let p = self.new_pod(
                        sts,
                        format!("{}-{i}", key.name),
                        json!({
                            "controller-revision-hash": rev,
                            "statefulset.kubernetes.io/pod-name": format!("{}-{i}", key.name),
                            "apps.kubernetes.io/pod-index": i.to_string(),
                        }),
                    );
                    if let Ok(p) = self.cluster.create(p) {
                        pods.insert(i, p);
                    }
                    break;
                }
            }
        }
        for (i, p) in pods.iter() {
            if *i >= replicas {
                let _ = self.cluster.delete(&ObjKey::of(p));
            }
        }
        pods.retain(|i, _| *i < replicas);
        // rolling update: replace the highest-ordinal old pod once all pods are ready
        if pods.values().all(pod_ready)
            && let Some((_, old)) = pods
                .iter()
                .rev()
                .find(|(_, p)| s(p, "/metadata/labels/controller-revision-hash") != rev)
        {
            let _ = self.cluster.delete(&ObjKey::of(old));
        }
        let ready = pods.values().filter(|p| pod_ready(p)).count() as i64;
        let updated = pods
            .values()
            .filter(|p| s(p, "/metadata/labels/controller-revision-hash") == rev)
            .count() as i64;
        let current_rev = if updated == replicas {
            rev.clone()
        } else {
            s(sts, "/status/currentRevision").to_string()
        };
        let current_rev = if current_rev.is_empty() {
            rev.clone()
        } else {
            current_rev
        };
        let current = pods
            .values()
            .filter(|p| s(p, "/metadata/labels/controller-revision-hash") == current_rev)
            .count() as i64;
        self.set_status(sts, json!({
            "observedGeneration": sts.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "replicas": pods.len(), "readyReplicas": ready, "availableReplicas": ready,
            "currentReplicas": current, "updatedReplicas": updated,
            "currentRevision": current_rev, "updateRevision": rev,
        }));
        None
    }

    fn sync_daemonset(&self, ds: &Value) -> Option<Duration> {
        let key = ObjKey::of(ds);
        let hash = template_hash(&ds["spec"]["template"]);
        let pods = self.owned_by("v1", "Pod", ds);
        let mut current: Vec<Value> = Vec::new();
        for p in pods {
            if s(&p, "/metadata/labels/controller-revision-hash") == hash {
                current.push(p);
            } else {
                let _ = self.cluster.delete(&ObjKey::of(&p));
            }
        }
        if current.is_empty()
            && let Ok(p) = self.cluster.create(self.new_pod(
                ds,
                format!("{}-{}", key.name, suffix()),
                json!({"controller-revision-hash": hash}),
            ))
        {
            current.push(p);
        }
        let ready = current.iter().filter(|p| pod_ready(p)).count() as i64;
        self.set_status(ds, json!({
            "observedGeneration": ds.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "desiredNumberScheduled": 1, "currentNumberScheduled": current.len(),
            "updatedNumberScheduled": current.len(), "numberReady": ready, "numberAvailable": ready,
            "numberMisscheduled": 0,
        }));
        None
    }

    fn sync_job(&self, job: &Value) -> Option<Duration> {
        let key = ObjKey::of(job);
        if job
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|a| {
                a.iter().any(|c| {
                    (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True"
                })
            })
        {
            return None;
        }
        let uid = s(job, "/metadata/uid").to_string();
        let mut pods = self.owned_by("v1", "Pod", job);
        if pods.is_empty() {
            let p = self.new_pod(job, format!("{}-{}", key.name, suffix()), json!({
                "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": key.name,
                "controller-uid": uid, "job-name": key.name,
            }));
            if let Ok(p) = self.cluster.create(p) {
                // The Job may have been deleted (its pods collected) between our read and
                // this create. kube-controller-manager's garbage collector deletes a dependent
                // whose controller owner's uid no longer exists; do the same at once, so a
                // deleted Job never leaves a pod behind.
                let owner_alive = self
                    .cluster
                    .get(&key)
                    .ok()
                    .flatten()
                    .is_some_and(|j| s(&j, "/metadata/uid") == uid);
                if !owner_alive {
                    let _ = self.cluster.delete(&ObjKey::of(&p));
                    return None;
                }
                pods.push(p);
            }
        }
        let start = match s(job, "/status/startTime") {
            "" => now_rfc3339(),
            t => t.to_string(),
        };
        let succeeded = pods
            .iter()
            .filter(|p| s(p, "/status/phase") == "Succeeded")
            .count() as i64;
        let active = pods.len() as i64 - succeeded;
        let ready = pods.iter().filter(|p| pod_ready(p)).count() as i64;
        let mut status = json!({"startTime": start, "active": active, "ready": ready,
            "uncountedTerminatedPods": {}});
        if succeeded > 0 {
            let now = now_rfc3339();
            status = json!({"startTime": start, "succeeded": succeeded, "ready": 0,
            "completionTime": now, "uncountedTerminatedPods": {}, "terminating": 0,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                 "message": "Reached expected number of succeeded pods", "lastProbeTime": now, "lastTransitionTime": now}
            ]});
            record_event(
                &*self.cluster,
                job,
                "Normal",
                "Completed",
                "Job completed",
                "job-controller",
                None,
            );
        }
        self.set_status(job, status);
        None
    }

    /// The kubelet: pulls images and runs containers.
    fn kubelet(&self, pod: &Value) -> Option<Duration> {
        // Hook (podexec): pods of probe images are run for real by crate::podexec when it
        // serves this cluster; leave them to it.
        if crate::podexec::claims(&*self.cluster, pod) {
            return None;
        }
        let key = ObjKey::of(pod);
        let phase = s(pod, "/status/phase");
        if phase == "Succeeded" || phase == "Failed" {
            return None;
        }
        let containers: Vec<Value> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let is_job = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|r| r["kind"] == "Job"));
        let now = now_rfc3339();
        let start = match s(pod, "/status/startTime") {
            "" => now.clone(),
            t => t.to_string(),
        };
        let failed_since = *self
            .pull_failed_at
            .lock()
            .unwrap()
            .entry(key.clone())
            .or_insert_with(Instant::now);
        let backoff = self.opts.scaled(Duration::from_secs(10));
        let in_backoff = failed_since.elapsed() >= backoff;
        let mut statuses = Vec::new();
        let mut all_ok = true;
        let mut again = None;
        for c in &containers {
            let image = c["image"].as_str().unwrap_or_default();
            let name = c["name"].as_str().unwrap_or_default();
            let prev = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().find(|x| x["name"] == name))
                .cloned();
            if self.registry.can_pull(image) {
                let prev_running = prev
                    .as_ref()
                    .and_then(|p| p.pointer("/state/running"))
                    .is_some();
                if !prev_running && !is_job {
                    record_event(
                        &*self.cluster,
                        pod,
                        "Normal",
                        "Pulled",
                        &format!("Successfully pulled image \"{image}\""),
                        "kubelet",
                        None,
                    );
                    record_event(
                        &*self.cluster,
                        pod,
                        "Normal",
                        "Started",
                        &format!("Started container {name}"),
                        "kubelet",
                        None,
                    );
                }
                let state = if is_job {
                    json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": start, "finishedAt": now}})
                } else {
                    let started = prev
                        .as_ref()
                        .and_then(|p| p.pointer("/state/running/startedAt").cloned())
                        .unwrap_or(json!(now));
                    json!({"running": {"startedAt": started}})
                };
                statuses.push(json!({
                    "name": name, "image": image, "imageID": format!("{}@sha256:{:0>64}", normalize_image(image), template_hash(&json!(image))),
                    "ready": !is_job, "started": !is_job, "restartCount": 0, "state": state,
                }));
            } else {
                all_ok = false;
                let full = normalize_image(image);
                let (reason, message) = if in_backoff {
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
                let prev_reason = prev
                    .as_ref()
                    .map(|p| s(p, "/state/waiting/reason").to_string())
                    .unwrap_or_default();
                if prev_reason != reason {
                    if reason == "ErrImagePull" {
                        record_event(
                            &*self.cluster,
                            pod,
                            "Normal",
                            "Pulling",
                            &format!("Pulling image \"{image}\""),
                            "kubelet",
                            None,
                        );
                        record_event(
                            &*self.cluster,
                            pod,
                            "Warning",
                            "Failed",
                            &format!("Failed to pull image \"{image}\": {message}"),
                            "kubelet",
                            None,
                        );
                        record_event(
                            &*self.cluster,
                            pod,
                            "Warning",
                            "Failed",
                            "Error: ErrImagePull",
                            "kubelet",
                            None,
                        );
                    } else {
                        record_event(
                            &*self.cluster,
                            pod,
                            "Normal",
                            "BackOff",
                            &message,
                            "kubelet",
                            None,
                        );
                        record_event(
                            &*self.cluster,
                            pod,
                            "Warning",
                            "Failed",
                            "Error: ImagePullBackOff",
                            "kubelet",
                            None,
                        );
                    }
                }
                if !in_backoff {
                    again = Some(
                        backoff.saturating_sub(failed_since.elapsed()) + Duration::from_millis(5),
                    );
                }
                statuses.push(json!({
                    "name": name, "image": image, "imageID": "", "ready": false, "started": false,
                    "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}},
                }));
            }
        }
        if all_ok {
            self.pull_failed_at.lock().unwrap().remove(&key);
        }
        let ready = all_ok && !is_job;
        let phase = if all_ok {
            if is_job { "Succeeded" } else { "Running" }
        } else {
            "Pending"
        };
        let tf = |b: bool| if b { "True" } else { "False" };
        let mut conds = vec![
            json!({"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": start}),
            json!({"type": "Initialized", "status": "True", "lastTransitionTime": start}),
            json!({"type": "Ready", "status": tf(ready), "lastTransitionTime": now}),
            json!({"type": "ContainersReady", "status": tf(ready), "lastTransitionTime": now}),
            json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": start}),
        ];
        if !ready && !is_job {
            let not_ready: Vec<&str> = containers
                .iter()
                .filter_map(|c| c["name"].as_str())
                .collect();
            let msg = format!("containers with unready status: [{}]", not_ready.join(" "));
            for c in conds
                .iter_mut()
                .filter(|c| c["type"] == "Ready" || c["type"] == "ContainersReady")
            {
                c["reason"] = json!("ContainersNotReady");
                c["message"] = json!(msg);
            }
        }
        // keep transition times when the status did not change
        if let Some(old) = pod.pointer("/status/conditions").and_then(Value::as_array) {
            for c in conds.iter_mut() {
                if let Some(o) = old
                    .iter()
                    .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
                {
                    c["lastTransitionTime"] = o["lastTransitionTime"].clone();
                }
            }
        }
        let status = json!({
            "phase": phase, "conditions": conds, "containerStatuses": statuses,
            "hostIP": "172.18.0.2", "hostIPs": [{"ip": "172.18.0.2"}],
            "podIP": pod.pointer("/status/podIP").cloned().unwrap_or_else(|| json!(pod_ip(&key))),
            "podIPs": [{"ip": pod.pointer("/status/podIP").cloned().unwrap_or_else(|| json!(pod_ip(&key)))}],
            "qosClass": "BestEffort", "startTime": start,
        });
        if pod.get("status") != Some(&status) {
            let _ = self
                .cluster
                .merge_patch_status(&key, json!({"status": status}), "kubelet");
        }
        again
    }
}

fn pod_ip(key: &ObjKey) -> String {
    let h = template_hash(&json!(format!("{}/{}", key.namespace, key.name)));
    let n: u32 = h
        .bytes()
        .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.244.{}.{}", (n >> 8) % 250, n % 250 + 2)
}

fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn owner_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": owner["apiVersion"], "kind": owner["kind"],
        "name": s(owner, "/metadata/name"), "uid": s(owner, "/metadata/uid"),
        "controller": true, "blockOwnerDeletion": true,
    })
}

fn controller_of(obj: &Value) -> Option<ObjKey> {
    let ns = s(obj, "/metadata/namespace");
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r["controller"] == true)
        .map(|r| ObjKey::new(s(r, "/apiVersion"), s(r, "/kind"), ns, s(r, "/name")))
}

fn set_cond(conds: &mut Vec<Value>, t: &str, status: &str, reason: &str, msg: &str, now: &str) {
    if let Some(c) = conds.iter_mut().find(|c| c["type"] == t) {
        let changed_status = c["status"] != status;
        let same = c["status"] == status && c["reason"] == reason && c["message"] == msg;
        if same {
            return;
        }
        c["status"] = json!(status);
        c["reason"] = json!(reason);
        c["message"] = json!(msg);
        c["lastUpdateTime"] = json!(now);
        if changed_status {
            c["lastTransitionTime"] = json!(now);
        }
    } else {
        conds.push(
            json!({"type": t, "status": status, "reason": reason, "message": msg,
            "lastUpdateTime": now, "lastTransitionTime": now}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_normalisation_and_registry() {
        assert_eq!(normalize_image("0.1.1"), "docker.io/library/0.1.1:latest");
        assert_eq!(
            normalize_image("nginx:1.25"),
            "docker.io/library/nginx:1.25"
        );
        assert_eq!(
            normalize_image("localhost:5000/app:0.1.1"),
            "localhost:5000/app:0.1.1"
        );
        assert_eq!(normalize_image("ghcr.io/x/y"), "ghcr.io/x/y:latest");
        let r = Registry::new(&[
            "localhost:5000/app:0.1.1".into(),
            "ghcr.io/fluxcd/kustomize-controller:*".into(),
        ]);
        assert!(r.can_pull("localhost:5000/app:0.1.1"));
        assert!(!r.can_pull("0.1.1"));
        assert!(!r.can_pull("localhost:5000/app:0.1.2"));
        assert!(r.can_pull("ghcr.io/fluxcd/kustomize-controller:v1.8.0"));
    }

    #[test]
    fn hash_is_stable_and_safe() {
        let h = template_hash(&json!({"spec": {"containers": [{"image": "a"}]}}));
        assert_eq!(
            h,
            template_hash(&json!({"spec": {"containers": [{"image": "a"}]}}))
        );
        assert!(h.bytes().all(|b| ALPHANUMS.contains(&b)));
    }
}
