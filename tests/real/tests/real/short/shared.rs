//! The shared crate against the real kube-apiserver with the Flux CRDs (tests/realcluster):
//! kubeconfig -> `ClusterArgs::connect`, the typed Flux objects, `wait_for` over its watch
//! (including a watch the fault proxy drops), kstatus on what it serves, and the 403 message
//! built from the real Forbidden status (real RBAC). The Kustomization is of a shard no
//! controller runs here ([`realcluster::HELD_SHARD_LABEL`]), so only the test writes its status.

use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::KubeResultExt;
use cluster_loop::flux::{FluxObject, Kustomization};
use cluster_loop::kstatus::{self, Status};
use cluster_loop::wait::{Progress, wait_for};
use kube::api::{Patch, PatchParams};
use realcluster::proxy::{Fault, FaultAction, FaultProxy};
use realcluster::{Cluster, FLUX_NS, HELD_SHARD_LABEL};
use serde_json::json;
use std::time::Duration;

const KS: &str = r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: shared-apps
  namespace: flux-system
  labels: {sharding.fluxcd.io/key: held}
spec:
  interval: 10m
  path: ./apps
  prune: true
  wait: true
  dependsOn:
  - name: platform
  sourceRef:
    kind: GitRepository
    name: flux-system
"#;

fn cluster() -> realcluster::Lease {
    static CLUSTER: realcluster::ClusterCell = realcluster::ClusterCell::new();
    let c = crate::group_cluster(&CLUSTER);
    assert!(KS.contains(HELD_SHARD_LABEL));
    c.apply_yaml(KS).unwrap();
    c
}

fn far() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(120)
}

async fn conn_for(kubeconfig: std::path::PathBuf) -> cluster_loop::cli::Connection {
    ClusterArgs {
        kubeconfig: Some(kubeconfig),
        ..Default::default()
    }
    .connect()
    .await
    .unwrap()
}

fn ready_status(generation: i64, ready: &str) -> serde_json::Value {
    json!({"status": {"observedGeneration": generation, "conditions": [
        {"type": "Ready", "status": ready, "reason": if ready == "True" { "ReconciliationSucceeded" } else { "Progressing" },
         "message": if ready == "True" { "Applied revision: main@sha1:0123" } else { "Reconciliation in progress" },
         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_flux_objects_wait_and_kstatus_on_the_real_apiserver() {
    let c = &cluster();
    let proxy = FaultProxy::start(c).await.unwrap();
    // The first watch ends at once (a dropped watch): the wait must resume from the list's
    // resourceVersion, not fail, re-list or poll.
    proxy.add(Fault {
        method: Some("GET".into()),
        path_contains: "watch=true".into(),
        nth: 1,
        action: FaultAction::DropAfter(Duration::ZERO),
    });
    let conn = conn_for(proxy.kubeconfig().to_path_buf()).await;
    assert_eq!(conn.server.trim_end_matches('/'), proxy.server());
    let api = kube::Api::<Kustomization>::namespaced(conn.client.clone(), &conn.flux_namespace());

    let k = api
        .get("shared-apps")
        .await
        .api_context(|| conn.ctx())
        .unwrap();
    assert!(k.spec.wait && k.spec.prune);
    assert_eq!(
        k.dependencies(),
        vec![("flux-system".into(), "platform".into())]
    );
    assert_eq!(
        cluster_loop::duration::format_go_duration(k.effective_timeout().unwrap()),
        "9m30s"
    );
    let generation = k.metadata.generation.unwrap_or(1);

    // A writer flips Ready through the status subresource while we wait (its first watch
    // dropped, above). Steps are sequenced by the predicate's calls (no sleeps): call 1 =
    // after the list, call 2 = an event arrived over the (resumed) watch.
    let (seen_tx, mut seen_rx) = tokio::sync::watch::channel(0usize);
    let writer_api = api.clone();
    let progress = Progress::hidden();
    let waiter = wait_for(
        &api,
        "shared-apps",
        |k: Option<&Kustomization>| {
            seen_tx.send_modify(|n| *n += 1);
            k.is_some_and(|k| k.generation_observed() && k.ready().is_some_and(|c| c.is_true()))
        },
        far(),
        &progress,
        conn.ctx(),
    );
    let writer = async move {
        let mp = PatchParams::default();
        seen_rx.wait_for(|n| *n >= 1).await.unwrap();
        writer_api
            .patch_status(
                "shared-apps",
                &mp,
                &Patch::Merge(&ready_status(generation, "Unknown")),
            )
            .await
            .unwrap();
        seen_rx.wait_for(|n| *n >= 2).await.unwrap();
        writer_api
            .patch_status(
                "shared-apps",
                &mp,
                &Patch::Merge(&ready_status(generation, "True")),
            )
            .await
            .unwrap();
    };
    let (out, ()) = tokio::join!(waiter, writer);
    let out = out.unwrap();
    assert!(out.satisfied, "{out:?}");
    let k = out.object.unwrap();
    assert_eq!(k.ready().unwrap().reason(), "ReconciliationSucceeded");
    let reqs = proxy.requests();
    let on =
        |r: &realcluster::proxy::Logged| r.method == "GET" && r.path.contains("/kustomizations?");
    let lists = reqs
        .iter()
        .filter(|r| on(r) && !r.path.contains("watch=true"))
        .count();
    let watches = reqs
        .iter()
        .filter(|r| on(r) && r.path.contains("watch=true"))
        .count();
    assert_eq!(lists, 1, "one list, no polling: {reqs:#?}");
    assert!(
        watches >= 2,
        "the dropped watch was resumed ({watches} watches): {reqs:#?}"
    );

    // kstatus on the object as served.
    let v = serde_json::to_value(&k).unwrap();
    let r = kstatus::compute(&v);
    assert_eq!(
        (r.status, r.message.as_str()),
        (Status::Current, "Resource is Ready")
    );

    // A missing object: 404 with the object named, not "CRD not installed".
    let e = api
        .get("nope")
        .await
        .api_context(|| {
            conn.ctx()
                .verb("get")
                .resource_of::<Kustomization>()
                .namespace(Some("flux-system"))
                .name("nope")
        })
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "Kustomization \"nope\" not found in namespace \"flux-system\" ({}{}); \
             list what exists with: kubectl get ks -A{}",
            conn.context
                .as_ref()
                .map(|c| format!("context \"{c}\", "))
                .unwrap_or_default(),
            proxy.server(),
            conn.context
                .as_ref()
                .map(|c| format!(" --context {c}"))
                .unwrap_or_default(),
        )
    );
    assert_eq!(e.exit_code(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_denial_names_verb_resource_namespace() {
    let c = &cluster();
    // May read Kustomizations in flux-system, nothing else (real RBAC: a Role and its binding).
    let kc = read_kustomizations_in_flux_system(c, "shared-ro");
    let conn = conn_for(kc).await;
    let api = kube::Api::<Kustomization>::namespaced(conn.client.clone(), "flux-system");
    assert!(api.get("shared-apps").await.is_ok());
    let e = api
        .patch(
            "shared-apps",
            &PatchParams {
                field_manager: Some("cluster-loop-test".into()),
                ..Default::default()
            },
            &Patch::Merge(&json!({"spec": {"suspend": true}})),
        )
        .await
        .api_context(|| {
            conn.ctx()
                .verb("patch")
                .resource_of::<Kustomization>()
                .namespace(Some("flux-system"))
                .name("shared-apps")
        })
        .unwrap_err();
    let m = e.to_string();
    assert!(
        m.starts_with("RBAC denied: cannot patch kustomizations.kustomize.toolkit.fluxcd.io in namespace \"flux-system\""),
        "{m}"
    );
    assert!(
        m.ends_with("check with: kubectl auth can-i patch kustomizations.kustomize.toolkit.fluxcd.io -n flux-system"),
        "{m}"
    );
    assert_eq!(e.exit_code(), 3);
    // Waiting in a namespace the token cannot watch fails fast with the RBAC message.
    let other = kube::Api::<Kustomization>::namespaced(conn.client.clone(), "apps");
    let e = wait_for(
        &other,
        "shared-apps",
        |k| k.is_some(),
        far(),
        &Progress::hidden(),
        conn.ctx(),
    )
    .await
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("kubectl auth can-i list kustomizations.kustomize.toolkit.fluxcd.io -n apps"),
        "{e}"
    );
}

/// A kubeconfig for ServiceAccount `name` that may get, list and watch Kustomizations in
/// flux-system only (a Role and a RoleBinding there).
fn read_kustomizations_in_flux_system(c: &Cluster, name: &str) -> std::path::PathBuf {
    c.apply_yaml(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nrules:\n- {{apiGroups: [kustomize.toolkit.fluxcd.io], resources: [kustomizations], verbs: [get, list, watch]}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\nsubjects: [{{kind: ServiceAccount, name: {name}, namespace: {FLUX_NS}}}]\n"
    ))
    .unwrap();
    c.service_account_kubeconfig(FLUX_NS, name, Some(FLUX_NS))
        .unwrap()
}
