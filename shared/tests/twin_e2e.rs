//! The shared crate against the twin cluster (tests/twin: an HTTPS API server modelled on
//! kube-apiserver, with Flux CRDs and RBAC): kubeconfig -> `ClusterArgs::connect`, the typed
//! Flux objects, `wait_for` over its watch (including dropped watches), kstatus on what it
//! serves, and the 403 message built from its (apiserver-shaped) Forbidden status.

use cluster_loop::cli::ClusterArgs;
use cluster_loop::error::KubeResultExt;
use cluster_loop::flux::{FluxObject, Kustomization};
use cluster_loop::kstatus::{self, Status};
use cluster_loop::wait::{Progress, wait_for};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::time::Duration;
use twin::{Rule, Twin, TwinOptions};

const KS: &str = r#"
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
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
async fn typed_flux_objects_wait_and_kstatus_against_the_twin() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    twin.load_yaml(KS).unwrap();
    let conn = conn_for(twin.kubeconfig_path().to_path_buf()).await;
    assert_eq!(
        conn.server.trim_end_matches('/'),
        twin.server_url().trim_end_matches('/')
    );
    let api = kube::Api::<Kustomization>::namespaced(conn.client.clone(), &conn.flux_namespace());

    let k = api.get("apps").await.api_context(|| conn.ctx()).unwrap();
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

    // A writer flips Ready through the status subresource while we wait, and the server drops
    // the watch in between: the wait must resume from its last resourceVersion, not fail or
    // poll. Steps are sequenced by the predicate's calls (no sleeps): call 1 = after the list,
    // call 2 = an event arrived over the watch.
    let (seen_tx, mut seen_rx) = tokio::sync::watch::channel(0usize);
    let writer_api = api.clone();
    let twin_ref = &twin;
    let progress = Progress::hidden();
    let waiter = wait_for(
        &api,
        "apps",
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
                "apps",
                &mp,
                &Patch::Merge(&ready_status(generation, "Unknown")),
            )
            .await
            .unwrap();
        seen_rx.wait_for(|n| *n >= 2).await.unwrap();
        twin_ref.drop_watches();
        writer_api
            .patch_status(
                "apps",
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
    let reqs = twin.requests();
    let lists = reqs
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "kustomizations")
        .count();
    let watches = reqs
        .iter()
        .filter(|r| r.verb == "watch" && r.resource == "kustomizations")
        .count();
    assert_eq!(lists, 1, "one list, no polling");
    assert!(
        watches >= 2,
        "the dropped watch was resumed ({watches} watches)"
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
            twin.server_url().trim_end_matches('/'),
            conn.context
                .as_ref()
                .map(|c| format!(" --context {c}"))
                .unwrap_or_default(),
        )
    );
    assert_eq!(e.exit_code(), 3);
    twin.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_denial_names_verb_resource_namespace() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    twin.load_yaml(KS).unwrap();
    // May read Kustomizations in flux-system, nothing else.
    let token = twin.add_token(
        "ro",
        vec![
            Rule::new(
                &["get", "list", "watch"],
                &["kustomize.toolkit.fluxcd.io"],
                &["kustomizations"],
            )
            .in_namespaces(&["flux-system"]),
        ],
    );
    let kc = twin.kubeconfig_for(&token, "ro").unwrap();
    let conn = conn_for(kc).await;
    let api = kube::Api::<Kustomization>::namespaced(conn.client.clone(), "flux-system");
    assert!(api.get("apps").await.is_ok());
    let e = api
        .patch(
            "apps",
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
                .name("apps")
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
        "apps",
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
    twin.shutdown().await;
}
