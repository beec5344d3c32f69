//! Cluster wiring: read the cluster's DNS configuration and the `--from` pod, attach the
//! ephemeral container; the probe's create/watch/log/delete lifecycle is the shared one
//! ([`cluster_loop::probe::lifecycle`], re-exported here).
//!
//! Requests for a single-host run without `--from`: GET ConfigMap kube-system/coredns, GET
//! ConfigMap kube-system/node-local-dns, LIST Services in kube-system (kube-dns, and the
//! owner of any literal IP node-local-dns forwards to, e.g. kube-dns-upstream), POST the Job,
//! WATCH pods by run label, GET pods/log, DELETE the Job = 7. `--from deploy/X` adds GET
//! Deployment, LIST pods, PATCH pods/ephemeralcontainers (and drops the DELETE when the
//! ephemeral path works) = at most 10.
//!
//! Cleanup is guaranteed on success, failure, timeout, Ctrl-C (SIGINT) and SIGTERM: once a
//! create was answered 201 or sent without an answer (see `run`), a DELETE by name (propagationPolicy Background, so the Job's pod
//! goes too) always follows. SIGKILL is covered by the cluster: activeDeadlineSeconds stops
//! the pod and ttlSecondsAfterFinished removes the Job; `--cleanup` sweeps leftovers by
//! the `app.kubernetes.io/managed-by=kubectl-podresolve` label.

use crate::probe::{Carrier, OWNER, ProbeOptions, SourcePod};
use crate::report::{ClusterDns, ProbeInfo};
use cluster_loop::cli::Connection;
use cluster_loop::error::{Error, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use std::time::Duration;

pub use cluster_loop::probe::lifecycle::{
    FATAL_WAITING, Finished, ProbeWatch, RequestCounter, SweepReport, WatchTarget, api_err,
    create_probe, judge, read_log, watch_probe,
};

/// `kubectl podresolve --cleanup -n NS`: how leftovers are removed.
fn cleanup_hint(namespace: &str) -> String {
    format!("kubectl podresolve --cleanup -n {namespace}")
}

/// DELETE a podresolve probe by name (see
/// [`cluster_loop::probe::lifecycle::delete_probe`]); the timeout error names
/// `kubectl podresolve --cleanup`.
pub async fn delete_probe(
    conn: &Connection,
    namespace: &str,
    name: &str,
    carrier: Carrier,
    within: Duration,
    n: &RequestCounter,
) -> Result<()> {
    cluster_loop::probe::lifecycle::delete_probe(
        conn,
        namespace,
        name,
        carrier,
        within,
        &cleanup_hint(namespace),
        n,
    )
    .await
}

/// `--cleanup`: delete every Job and bare Pod labelled managed-by=kubectl-podresolve in
/// `namespace` (all namespaces when None).
pub async fn sweep(conn: &Connection, namespace: Option<&str>) -> Result<SweepReport> {
    let hint = cleanup_hint(namespace.unwrap_or("NAMESPACE"));
    cluster_loop::probe::lifecycle::sweep(conn, OWNER, namespace, &hint).await
}

/// Read kube-system/coredns (`Corefile`), kube-system/node-local-dns and the Services of
/// kube-system (one LIST: kube-dns's ClusterIPs, and which Services front CoreDNS, i.e. select
/// the same pods as kube-dns, such as NodeLocal DNSCache's kube-dns-upstream).
/// Absent or forbidden objects are not errors: the report says what is missing.
/// `answered` is set to true as soon as one of the three requests has completed (an answer or
/// a transport error): the probe's create waits for it, so a probe is never POSTed to a server
/// that has answered nothing (see `run`).
pub async fn read_cluster_dns(
    conn: &Connection,
    n: &RequestCounter,
    answered: &tokio::sync::watch::Sender<bool>,
) -> ClusterDns {
    let cms: Api<ConfigMap> = Api::namespaced(conn.client.clone(), "kube-system");
    let svcs: Api<Service> = Api::namespaced(conn.client.clone(), "kube-system");
    n.hit();
    n.hit();
    n.hit();
    let (coredns, nodelocal, services) = tokio::join!(
        async {
            let r = cms.get_opt("coredns").await;
            answered.send_replace(true);
            r
        },
        async {
            let r = cms.get_opt("node-local-dns").await;
            answered.send_replace(true);
            // Only with the ConfigMap: is anything running it? (No extra request on clusters
            // without NodeLocal DNSCache.)
            let ds = match &r {
                Ok(Some(_)) => {
                    n.hit();
                    let dss: Api<k8s_openapi::api::apps::v1::DaemonSet> =
                        Api::namespaced(conn.client.clone(), "kube-system");
                    Some(match dss.get_opt("node-local-dns").await {
                        Ok(Some(d)) => Ok(d.status.map(|s| s.number_ready).unwrap_or(0)),
                        Ok(None) => Err("no DaemonSet kube-system/node-local-dns exists".into()),
                        Err(e) => Err(format!(
                            "DaemonSet kube-system/node-local-dns cannot be read ({e})"
                        )),
                    })
                }
                _ => None,
            };
            (r, ds)
        },
        async {
            let r = svcs.list(&ListParams::default()).await;
            answered.send_replace(true);
            r
        }
    );
    let corefile = match coredns {
        Ok(Some(cm)) => cm
            .data
            .and_then(|d| d.get("Corefile").cloned())
            .map(|t| crate::corefile::Corefile::parse(&t).map_err(|e| e.to_string())),
        Ok(None) => None,
        Err(e) => Some(Err(format!(
            "cannot read ConfigMap kube-system/coredns: {e}"
        ))),
    };
    let (nodelocal, nodelocal_daemonset) = nodelocal;
    let nodelocal_corefile = match nodelocal {
        Ok(Some(cm)) => cm.data.and_then(|d| d.get("Corefile").cloned()),
        _ => None,
    };
    let kube_system_services = services.ok().map(|l| dns_services(&l.items));
    let kube_dns_ips = kube_system_services
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|s| s.name == "kube-system/kube-dns")
        .map(|s| s.cluster_ips.clone())
        .unwrap_or_default();
    ClusterDns {
        corefile,
        kube_dns_ips,
        nodelocal_corefile,
        kube_system_services,
        nodelocal_daemonset,
    }
}

/// kube-system Services with their ClusterIPs; `frontsCoredns` for kube-dns and every Service
/// whose non-empty selector equals kube-dns's (kube-dns-upstream in the NodeLocal DNSCache
/// manifest selects `k8s-app: kube-dns`, as kube-dns does).
pub fn dns_services(items: &[Service]) -> Vec<crate::corefile::DnsService> {
    let selector = |s: &Service| s.spec.as_ref().and_then(|sp| sp.selector.clone());
    let kube_dns_selector = items
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("kube-dns"))
        .and_then(selector)
        .filter(|m| !m.is_empty());
    items
        .iter()
        .map(|s| {
            let name = s.metadata.name.clone().unwrap_or_default();
            let spec = s.spec.as_ref();
            let cluster_ips = spec
                .and_then(|sp| sp.cluster_ips.clone())
                .filter(|v| !v.is_empty())
                .or_else(|| spec.and_then(|sp| sp.cluster_ip.clone()).map(|ip| vec![ip]))
                .unwrap_or_default()
                .into_iter()
                .filter(|ip| ip != "None" && !ip.is_empty())
                .collect();
            let fronts_coredns = name == "kube-dns"
                || (kube_dns_selector.is_some() && selector(s) == kube_dns_selector);
            crate::corefile::DnsService {
                name: format!("kube-system/{name}"),
                cluster_ips,
                fronts_coredns,
            }
        })
        .collect()
}

/// Resolve `--from pod/X|deploy/X` to one running pod.
///
/// Errors (all exit 3: the cluster's answer, see `cluster_loop::error`): the pod or
/// Deployment does not exist (named, with the context), the Deployment has no matchLabels
/// selector or no Running pod, and other API errors.
pub async fn resolve_from(
    conn: &Connection,
    target: &cluster_loop::refs::ResourceRef,
    namespace: &str,
    n: &RequestCounter,
) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), namespace);
    match target.kind {
        cluster_loop::refs::Kind::Deployment => {
            let deps: Api<Deployment> = Api::namespaced(conn.client.clone(), namespace);
            n.hit();
            let d = deps
                .get(&target.name)
                .await
                .map_err(|e| api_err(conn, e, "get", deps.resource_url(), &target.name))?;
            let sel = d
                .spec
                .and_then(|s| s.selector.match_labels)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            if sel.is_empty() {
                return Err(Error::Cluster(format!(
                    "deploy/{} in {namespace} has no matchLabels selector: use --from pod/NAME",
                    target.name
                )));
            }
            n.hit();
            let list = pods
                .list(&ListParams::default().labels(&sel))
                .await
                .map_err(|e| api_err(conn, e, "list", pods.resource_url(), ""))?;
            let mut running: Vec<Pod> = list
                .items
                .into_iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .collect();
            running.sort_by_key(|p| p.metadata.name.clone());
            running.into_iter().next().ok_or_else(|| {
                Error::Cluster(format!(
                    "deploy/{} in {namespace} has no Running pod (selector {sel}): nothing to resolve from",
                    target.name
                ))
            })
        }
        _ => {
            n.hit();
            pods.get(&target.name)
                .await
                .map_err(|e| api_err(conn, e, "get", pods.resource_url(), &target.name))
        }
    }
}

/// `--node NAME`: GET the Node before anything is created. A 404 is an error naming the node
/// and the context (exit 3): a pod bound to a node that does not exist is never started and
/// the node lifecycle controller's pod GC deletes it (kube-controller-manager podgc
/// `gcOrphaned`), which looked like "the probe pod was deleted before it finished". Any other
/// answer (403 without `get nodes`, a transport error) is no verdict: the run goes on and the
/// create or the watch reports what happens.
pub async fn check_node(conn: &Connection, node: &str, n: &RequestCounter) -> Result<()> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(conn.client.clone());
    n.hit();
    match nodes.get(node).await {
        Err(kube::Error::Api(ae)) if ae.code == 404 => Err(Error::Cluster(format!(
            "--node {node}: no such node on context {} (kubectl get nodes lists them): nothing \
             was created",
            conn.context.as_deref().unwrap_or("in-cluster")
        ))),
        _ => Ok(()),
    }
}

/// Outcome of trying the ephemeral-container path.
pub enum Ephemeral {
    /// Attached: container name in pod.
    Attached,
    /// Not allowed (403), not supported (404) or refused (422): the reason, for the
    /// fallback message.
    Refused(String),
}

/// PATCH pods/ephemeralcontainers (strategic merge) adding the probe.
pub async fn attach_ephemeral(
    conn: &Connection,
    pod: &Pod,
    opts: &ProbeOptions,
    n: &RequestCounter,
) -> Result<Ephemeral> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(conn.client.clone(), &ns);
    let pp = PatchParams {
        field_manager: Some(crate::probe::FIELD_MANAGER.into()),
        ..Default::default()
    };
    n.hit();
    match pods
        .patch_ephemeral_containers(&name, &pp, &Patch::Strategic(opts.ephemeral_patch()))
        .await
    {
        Ok(_) => Ok(Ephemeral::Attached),
        Err(kube::Error::Api(s)) if [403, 404, 405, 422].contains(&s.code) => Ok(
            Ephemeral::Refused(format!("{} {}: {}", s.code, s.reason, s.message)),
        ),
        Err(e) => Err(api_err(
            conn,
            e,
            "patch",
            &format!("{}/{name}/ephemeralcontainers", pods.resource_url()),
            &name,
        )),
    }
}

/// Fill [`ProbeInfo`] for the report.
pub fn probe_info(
    opts: &ProbeOptions,
    carrier: &str,
    finished: Option<&Finished>,
    from: Option<&SourcePod>,
    fallback_reason: Option<String>,
) -> ProbeInfo {
    ProbeInfo {
        carrier: carrier.into(),
        namespace: opts.target_namespace().to_string(),
        name: opts.name(),
        pod: finished.map(|f| f.pod.clone()),
        node: finished.and_then(|f| f.node.clone()),
        image: opts.image.clone(),
        from_pod: from.map(|s| format!("{}/{}", s.namespace, s.name)),
        fallback_reason,
        api_requests: 0,
    }
}
