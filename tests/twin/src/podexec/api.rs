//! The seam between the pod runtime ([`super::PodExec`]) and the API server it serves: what a
//! kubelet needs from the control plane, nothing more. The twin implements it over its
//! in-memory [`Store`] ([`StoreApi`]); `tests/realcluster` implements it over kube-rs against
//! the real kube-apiserver. One runtime, two clients.
//!
//! What the runtime asks for, and how a kubelet gets the same (k8s.io/kubernetes v1.36
//! pkg/kubelet): pods bound to its node (a watch, `config/apiserver.go`), Secrets for
//! `env[].valueFrom.secretKeyRef` (`kubelet_pods.go makeEnvironmentVariables`), its owning Job
//! for `activeDeadlineSeconds`, the `kube-system/coredns` ConfigMap and the Services (here for
//! the DNS model, which a kubelet does not read: CoreDNS does), pod status as a merge patch of
//! `pods/status` (`status/status_manager.go`), Events with source `kubelet`, and container
//! logs (which a kubelet keeps on its node and serves at `/containerLogs`).

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::flux::cluster::{Cluster, ObjKey, record_event, s};
use crate::store::{Store, WatchEventType};

/// A change the runtime reacts to.
#[derive(Debug, Clone)]
pub enum ApiEvent {
    /// A pod of this node was added or modified (also the initial list).
    Pod(Value),
    /// A pod of this node was deleted.
    PodDeleted(Value),
    /// The `kube-system/coredns` ConfigMap or a Service changed: the DNS records are rebuilt.
    DnsSourceChanged,
}

/// What [`super::PodExec`] needs from the API server. Every call is best effort, as a
/// kubelet's are: a failed write is retried by nothing here (the runtime writes a pod's status
/// at each transition), a failed read reads as "absent".
pub trait PodApi: Send + Sync + 'static {
    /// GET one object; `None` when absent or unreadable.
    fn get(&self, key: ObjKey) -> BoxFuture<'static, Option<Value>>;
    /// Every Service in every namespace (for the cluster DNS records).
    fn services(&self) -> BoxFuture<'static, Vec<Value>>;
    /// JSON merge patch of the object's `status` subresource (pods: `pods/status`), field
    /// manager `kubelet`.
    fn patch_status(&self, key: ObjKey, patch: Value) -> BoxFuture<'static, ()>;
    /// Records an Event about `involved` (source component `kubelet`).
    fn event(
        &self,
        involved: Value,
        event_type: &'static str,
        reason: &'static str,
        message: String,
    ) -> BoxFuture<'static, ()>;
    /// The Job controller's half when a probe Job's pod failed (`reason`: `BackoffLimitExceeded`
    /// or `DeadlineExceeded`). The twin has no Job controller for these pods and writes the
    /// Job's Failed condition here; on a real cluster kube-controller-manager's job controller
    /// does it from the pod's status, so that implementation does nothing.
    fn job_failed(
        &self,
        job: Value,
        reason: &'static str,
        message: &'static str,
    ) -> BoxFuture<'static, ()>;
    /// Appends container output to the log `pods/log` serves (`namespace/pod/container`).
    fn append_log(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]);
    /// Marks that log finished (a `follow` reader ends after its last byte).
    fn close_log(&self, namespace: &str, pod: &str, container: &str);
    /// Starts the change stream: first every current pod of the node as [`ApiEvent::Pod`],
    /// then changes. Errors: the watch could not start.
    fn watch(
        &self,
    ) -> BoxFuture<'static, Result<tokio::sync::mpsc::UnboundedReceiver<ApiEvent>, String>>;
    /// Marks (or unmarks) the node as served by the runtime. The twin's workload model reads
    /// the mark ([`super::claims`]); a real cluster's node agent dispatches pods itself.
    fn mark_node(&self, on: bool) {
        let _ = on;
    }
}

/// [`PodApi`] over the twin's in-memory store.
#[derive(Clone)]
pub struct StoreApi {
    store: Store,
}

impl StoreApi {
    /// Wraps `store`.
    pub fn new(store: Store) -> StoreApi {
        StoreApi { store }
    }
}

impl PodApi for StoreApi {
    fn get(&self, key: ObjKey) -> BoxFuture<'static, Option<Value>> {
        let v = Cluster::get(&self.store, &key).ok().flatten();
        Box::pin(async move { v })
    }

    fn services(&self) -> BoxFuture<'static, Vec<Value>> {
        let v = Cluster::list(&self.store, "v1", "Service", None).unwrap_or_default();
        Box::pin(async move { v })
    }

    fn patch_status(&self, key: ObjKey, patch: Value) -> BoxFuture<'static, ()> {
        let _ = self.store.merge_patch_status(&key, patch, "kubelet");
        Box::pin(async {})
    }

    fn event(
        &self,
        involved: Value,
        event_type: &'static str,
        reason: &'static str,
        message: String,
    ) -> BoxFuture<'static, ()> {
        record_event(
            &self.store,
            &involved,
            event_type,
            reason,
            &message,
            "kubelet",
            None,
        );
        Box::pin(async {})
    }

    fn job_failed(
        &self,
        job: Value,
        reason: &'static str,
        message: &'static str,
    ) -> BoxFuture<'static, ()> {
        let now = crate::flux::cluster::now_rfc3339();
        let _ = self.store.merge_patch_status(
            &ObjKey::of(&job),
            json!({"status": {"active": 0, "ready": 0, "failed": 1, "terminating": 0,
                "startTime": job.pointer("/status/startTime").cloned().unwrap_or(json!(now)),
                "conditions": [
                    {"type": "FailureTarget", "status": "True", "reason": reason, "message": message, "lastProbeTime": now, "lastTransitionTime": now},
                    {"type": "Failed", "status": "True", "reason": reason, "message": message, "lastProbeTime": now, "lastTransitionTime": now}]}}),
            "job-controller",
        );
        record_event(
            &self.store,
            &job,
            "Warning",
            reason,
            message,
            "job-controller",
            None,
        );
        Box::pin(async {})
    }

    fn append_log(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]) {
        self.store.append_pod_log(namespace, pod, container, bytes);
    }

    fn close_log(&self, namespace: &str, pod: &str, container: &str) {
        self.store.close_pod_log(namespace, pod, container);
    }

    fn watch(
        &self,
    ) -> BoxFuture<'static, Result<tokio::sync::mpsc::UnboundedReceiver<ApiEvent>, String>> {
        let store = self.store.clone();
        Box::pin(async move {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            // pods: watch first, then list (events for already-seen pods are idempotent)
            let pods = store.gvr("", "v1", "pods").map_err(|e| e.message)?;
            let mut w = store.watch(&pods, None, None).map_err(|e| e.message)?;
            for p in store.list(&pods, None, None).unwrap_or_default() {
                let _ = tx.send(ApiEvent::Pod(p));
            }
            let t = tx.clone();
            tokio::spawn(async move {
                loop {
                    // Ends when the runtime drops the receiver (or the store stops).
                    let ev = tokio::select! {
                        ev = w.next() => ev,
                        _ = t.closed() => None,
                    };
                    let Some(ev) = ev else { break };
                    let e = match ev.type_ {
                        WatchEventType::Added | WatchEventType::Modified => {
                            ApiEvent::Pod(ev.object)
                        }
                        WatchEventType::Deleted => ApiEvent::PodDeleted(ev.object),
                        _ => continue,
                    };
                    if t.send(e).is_err() {
                        break;
                    }
                }
            });
            for res in ["configmaps", "services"] {
                let g = store.gvr("", "v1", res).map_err(|e| e.message)?;
                let mut w = store.watch(&g, None, None).map_err(|e| e.message)?;
                let t = tx.clone();
                tokio::spawn(async move {
                    loop {
                        let ev = tokio::select! {
                            ev = w.next() => ev,
                            _ = t.closed() => None,
                        };
                        let Some(ev) = ev else { break };
                        if res == "configmaps"
                            && (s(&ev.object, "/metadata/namespace") != "kube-system"
                                || s(&ev.object, "/metadata/name") != "coredns")
                        {
                            continue;
                        }
                        if t.send(ApiEvent::DnsSourceChanged).is_err() {
                            break;
                        }
                    }
                });
            }
            Ok(rx)
        })
    }

    fn mark_node(&self, on: bool) {
        super::mark_node(&self.store, on);
    }
}
