//! The seam between the pod runtime ([`super::PodExec`]) and the API server it serves: what a
//! kubelet needs from the control plane, nothing more. `tests/realcluster` implements it over
//! kube-rs against the real kube-apiserver (`realcluster::kubelet::KubeApi`); until session 6
//! the twin's in-memory store implemented it too.
//!
//! What the runtime asks for, and how a kubelet gets the same (k8s.io/kubernetes v1.36
//! pkg/kubelet): pods bound to its node (a watch, `config/apiserver.go`), Secrets for
//! `env[].valueFrom.secretKeyRef` (`kubelet_pods.go makeEnvironmentVariables`), its owning Job
//! for `activeDeadlineSeconds`, the `kube-system/coredns` ConfigMap and the Services (here for
//! the DNS model, which a kubelet does not read: CoreDNS does), pod status as a merge patch of
//! `pods/status` (`status/status_manager.go`), Events with source `kubelet`, and container
//! logs (which a kubelet keeps on its node and serves at `/containerLogs`).

use futures::future::BoxFuture;
use serde_json::Value;

use crate::flux::cluster::ObjKey;

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
    /// Appends container output to the log `pods/log` serves (`namespace/pod/container`).
    fn append_log(&self, namespace: &str, pod: &str, container: &str, bytes: &[u8]);
    /// Marks that log finished (a `follow` reader ends after its last byte).
    fn close_log(&self, namespace: &str, pod: &str, container: &str);
    /// Starts the change stream: first every current pod of the node as [`ApiEvent::Pod`],
    /// then changes. Errors: the watch could not start.
    fn watch(
        &self,
    ) -> BoxFuture<'static, Result<tokio::sync::mpsc::UnboundedReceiver<ApiEvent>, String>>;
}
