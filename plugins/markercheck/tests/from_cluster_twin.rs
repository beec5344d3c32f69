//! `--from-cluster` against the twin API server: ImagePolicies (with `status.latestRef`),
//! ImageRepositories and ImageUpdateAutomations are read from the cluster, and the simulated
//! commit uses the cluster's latestRef.
use serde_json::json;
use twin::{PatchKind, Twin, TwinOptions};

const DEPLOY: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: apps
spec:
  template:
    spec:
      containers:
        - name: web
          image: ghcr.io/org/app:1.0.0 # {"$imagepolicy": "flux-system:app"}
"#;

async fn seed(twin: &Twin) {
    let store = twin.store();
    let repo = store
        .gvr("image.toolkit.fluxcd.io", "v1", "imagerepositories")
        .unwrap();
    let pol = store
        .gvr("image.toolkit.fluxcd.io", "v1", "imagepolicies")
        .unwrap();
    let iua = store
        .gvr("image.toolkit.fluxcd.io", "v1", "imageupdateautomations")
        .unwrap();
    store
        .create(
            &repo,
            json!({"apiVersion": "image.toolkit.fluxcd.io/v1", "kind": "ImageRepository",
                   "metadata": {"name": "app", "namespace": "flux-system"},
                   "spec": {"image": "ghcr.io/org/app", "interval": "5m"}}),
        )
        .unwrap();
    store
        .create(
            &pol,
            json!({"apiVersion": "image.toolkit.fluxcd.io/v1", "kind": "ImagePolicy",
                   "metadata": {"name": "app", "namespace": "flux-system"},
                   "spec": {"imageRepositoryRef": {"name": "app"},
                            "policy": {"semver": {"range": "1.x"}}}}),
        )
        .unwrap();
    store
        .patch_status(
            &pol,
            Some("flux-system"),
            "app",
            PatchKind::Merge,
            &json!({"status": {"latestRef": {"name": "ghcr.io/org/app", "tag": "1.4.2"}}}),
            "image-reflector-controller",
        )
        .unwrap();
    store
        .create(
            &iua,
            json!({"apiVersion": "image.toolkit.fluxcd.io/v1", "kind": "ImageUpdateAutomation",
                   "metadata": {"name": "fleet", "namespace": "flux-system"},
                   "spec": {"interval": "30m", "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                            "git": {"commit": {"author": {"name": "fluxcdbot", "email": "f@example.com"},
                                               "messageTemplate": "{{range .Changed.Changes}}{{.OldValue}} -> {{.NewValue}}{{end}}"}},
                            "update": {"path": "./apps", "strategy": "Setters"}}}),
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulation_uses_the_clusters_latest_ref() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    seed(&twin).await;
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("apps")).unwrap();
    std::fs::write(d.path().join("apps/web.yaml"), DEPLOY).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-markercheck"))
        .current_dir(d.path())
        .args([".", "--from-cluster", "--simulate", "--kubeconfig"])
        .arg(twin.kubeconfig_path())
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(
            "+          image: ghcr.io/org/app:1.4.2 # {\"$imagepolicy\": \"flux-system:app\"}"
        ),
        "the cluster's status.latestRef drives the simulation:\n{stdout}\n{stderr}"
    );
    // Only reads: list calls on the image API, no writes.
    let writes: Vec<_> = twin
        .requests()
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .filter(|r| !r.resource.is_empty())
        .collect();
    assert!(writes.is_empty(), "markercheck must not write: {writes:?}");
    assert!(
        twin.requests()
            .iter()
            .any(|r| r.verb == "list" && r.resource == "imagepolicies"),
        "{:?}",
        twin.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_denial_names_the_permission() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    seed(&twin).await;
    let token = twin.add_token("system:serviceaccount:ci:markercheck", vec![]);
    let kc = twin.kubeconfig_for(&token, "markercheck").unwrap();
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("apps")).unwrap();
    std::fs::write(d.path().join("apps/web.yaml"), DEPLOY).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-markercheck"))
        .current_dir(d.path())
        .args([".", "--from-cluster", "--kubeconfig"])
        .arg(&kc)
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("list") && stderr.contains("image.toolkit.fluxcd.io"),
        "{stderr}"
    );
}
