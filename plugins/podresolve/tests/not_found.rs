//! `--from` naming a pod or Deployment the cluster does not have: exit 3 (the cluster's
//! answer, not a usage error) with a message naming the kind, namespace, name, the context and
//! server asked, and the command that lists what exists. The rule lives in
//! `cluster_loop::error` (a 404 on a named object), shared by every plugin. Nothing is created.

use std::process::Stdio;
use twin::{Twin, TwinOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_from_object_exits_3_naming_it_and_the_context() {
    let twin = Twin::start(TwinOptions {
        namespaces: vec!["team".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let server = twin.server_url().trim_end_matches('/').to_string();
    for (from, kind, short) in [
        ("pod/web-0", "Pod", "po"),
        ("deploy/web", "Deployment", "deploy"),
    ] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
            .arg("--kubeconfig")
            .arg(twin.kubeconfig_path())
            .args(["gitea.example.dev.", "--from", from, "-n", "team"])
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{from}: {stderr}");
        let name = from.split_once('/').unwrap().1;
        let want = format!(
            "error: {kind} \"{name}\" not found in namespace \"team\" (context \"twin\", {server}); \
             list what exists with: kubectl get {short} -A --context twin\n"
        );
        assert!(stderr.ends_with(&want), "{from}: {stderr}");
        assert!(out.stdout.is_empty(), "{from}");
    }
    // A Deployment that exists but has no Running pod: also the cluster's answer (3).
    twin.load_yaml(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: idle\n  namespace: team\nspec:\n  replicas: 0\n  selector:\n    matchLabels: {app: idle}\n  template:\n    metadata:\n      labels: {app: idle}\n    spec:\n      containers: [{name: c, image: busybox:1.36}]\n",
    )
    .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(twin.kubeconfig_path())
        .args(["gitea.example.dev.", "--from", "deploy/idle", "-n", "team"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.ends_with(
            "error: deploy/idle in team has no Running pod (selector app=idle): nothing to resolve from\n"
        ),
        "{stderr}"
    );
    // Nothing was created for the probe.
    let store = twin.store();
    for (g, r) in [("", "pods"), ("batch", "jobs")] {
        let gvr = store.gvr(g, "v1", r).unwrap();
        assert!(
            store.list(&gvr, None, None).unwrap().is_empty(),
            "{r} left behind"
        );
    }
    twin.shutdown().await;
}

/// `-n` naming a namespace the cluster does not have: the Job create's 404 is about the
/// namespace (NamespaceLifecycle admission), not the Job; exit 3 with the `kubectl get ns`
/// hint, no DELETE sent and nothing created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_namespace_exits_3_naming_the_namespace() {
    let twin = Twin::start(TwinOptions {
        namespaces: vec!["team".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let server = twin.server_url().trim_end_matches('/').to_string();
    twin.reset_requests();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(twin.kubeconfig_path())
        .args(["gitea.example.dev.", "-n", "nonexistent-ns"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let want = format!(
        "error: namespace \"nonexistent-ns\" does not exist (context \"twin\", {server}): \
         nothing was created; list namespaces with: kubectl get ns --context twin\n"
    );
    assert!(stderr.ends_with(&want), "{stderr}");
    assert!(!stderr.contains("Job"), "{stderr}");
    assert!(out.stdout.is_empty());
    let reqs = twin.requests();
    assert!(
        !reqs.iter().any(|r| r.method == "DELETE"),
        "no DELETE for a probe never created: {reqs:?}"
    );
    let store = twin.store();
    let gvr = store.gvr("batch", "v1", "jobs").unwrap();
    assert!(store.list(&gvr, None, None).unwrap().is_empty());
    twin.shutdown().await;
}
