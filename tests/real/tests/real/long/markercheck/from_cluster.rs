//! `--from-cluster` on the real control plane (tests/realcluster) with the ImageRepository,
//! ImagePolicy and ImageUpdateAutomation CRDs as released with image-reflector-controller v1.2.0
//! and image-automation-controller v1.2.0 (see tests/realcluster/README.md).
//! image-reflector-controller does not run in this cluster (opt-in:
//! `ClusterOptions::image_reflector_controller`), so the test writes `status.latestRef` through
//! the status subresource as that controller does.

use std::process::Command;

use realcluster::proxy::FaultProxy;
use realcluster::{Cluster, FLUX_NS};

const BIN: &str = crate::bin!("kubectl-markercheck");

fn cluster() -> realcluster::Lease {
    static CLUSTER: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::group_cluster(&CLUSTER)
}

fn deploy(policy: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: ghcr.io/org/app:1.0.0 # {{\"$imagepolicy\": \"{FLUX_NS}:{policy}\"}}\n"
    )
}

/// An ImageRepository, an ImagePolicy `name` (semver 1.x) whose status says `tag` is the
/// latest, and an ImageUpdateAutomation, all in flux-system.
fn seed(c: &Cluster, name: &str, tag: &str) {
    c.apply_yaml(&format!(
        r#"apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageRepository
metadata: {{name: {name}, namespace: {FLUX_NS}}}
spec: {{image: ghcr.io/org/app, interval: 5m}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata: {{name: {name}, namespace: {FLUX_NS}}}
spec:
  imageRepositoryRef: {{name: {name}}}
  policy: {{semver: {{range: 1.x}}}}
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImageUpdateAutomation
metadata: {{name: {name}, namespace: {FLUX_NS}}}
spec:
  interval: 30m
  sourceRef: {{kind: GitRepository, name: {name}}}
  git:
    commit:
      author: {{name: fluxcdbot, email: f@example.com}}
      messageTemplate: '{{{{range .Changed.Changes}}}}{{{{.OldValue}}}} -> {{{{.NewValue}}}}{{{{end}}}}'
  update: {{path: ./apps, strategy: Setters}}
"#
    ))
    .unwrap();
    // What image-reflector-controller writes once its policy selected a tag
    // (internal/controller/imagepolicy_controller.go, ImagePolicyReconciler.reconcile:
    // `obj.Status.LatestImage = repo.Spec.Image + ":" + latest`,
    // `obj.Status.LatestRef = &ImageRef{Name: repo.Spec.Image, Tag: latest}`, the digest only
    // with a digest reflection policy, and the Ready condition deleted for the summary), through
    // the status subresource.
    let status = serde_json::json!({"status": {
        "observedGeneration": 1,
        "latestImage": format!("ghcr.io/org/app:{tag}"),
        "latestRef": {"name": "ghcr.io/org/app", "tag": tag}}});
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "imagepolicy",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ])
    .unwrap();
}

fn tree(policy: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("apps")).unwrap();
    std::fs::write(d.path().join("apps/web.yaml"), deploy(policy)).unwrap();
    d
}

/// The simulated commit uses the real cluster's `status.latestRef`, and markercheck only reads
/// (counted by the fault proxy's request log: no write, a list of imagepolicies).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulation_uses_the_real_clusters_latest_ref_and_only_reads() {
    let c = &cluster();
    seed(c, "mc-app", "1.4.2");
    let proxy = FaultProxy::start(c).await.unwrap();
    let d = tree("mc-app");
    let out = tokio::process::Command::new(BIN)
        .current_dir(d.path())
        .args([".", "--from-cluster", "--simulate", "--kubeconfig"])
        .arg(proxy.kubeconfig())
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(
            "+          image: ghcr.io/org/app:1.4.2 # {{\"$imagepolicy\": \"{FLUX_NS}:mc-app\"}}"
        )),
        "the cluster's status.latestRef drives the simulation:\n{stdout}\n{stderr}"
    );
    let reqs = proxy.requests();
    let writes: Vec<_> = reqs.iter().filter(|r| r.method != "GET").collect();
    assert!(writes.is_empty(), "markercheck must not write: {writes:?}");
    assert!(
        reqs.iter()
            .any(|r| r.path.contains("/apis/image.toolkit.fluxcd.io/v1/")
                && r.path.contains("imagepolicies")),
        "{reqs:#?}"
    );
}

/// A ServiceAccount without any role (a real token from the TokenRequest API, denied by the
/// real RBAC authorizer): exit 3 naming the list permission on image.toolkit.fluxcd.io.
#[test]
fn rbac_denial_on_the_real_apiserver_names_the_permission() {
    let c = &cluster();
    seed(c, "mc-rbac", "1.4.2");
    c.apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mc-ci\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: markercheck\n  namespace: mc-ci\n")
        .unwrap();
    let token = c
        .kubectl(&["-n", "mc-ci", "create", "token", "markercheck"])
        .unwrap();
    let d = tree("mc-rbac");
    let kc = d.path().join("sa.kubeconfig");
    std::fs::copy(c.kubeconfig(), &kc).unwrap();
    let kubectl = |args: &[&str]| {
        let st = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kc)
            .args(args)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
    };
    kubectl(&[
        "config",
        "set-credentials",
        "markercheck",
        &format!("--token={}", token.trim()),
    ]);
    kubectl(&["config", "set-context", "--current", "--user=markercheck"]);
    let out = Command::new(BIN)
        .current_dir(d.path())
        .args([".", "--from-cluster", "--kubeconfig"])
        .arg(&kc)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // The real apiserver's Forbidden, with the identity it denied, and the check to run.
    assert!(
        stderr.contains(
            "RBAC denied: cannot list imagepolicies.image.toolkit.fluxcd.io at the cluster scope"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            r#"User "system:serviceaccount:mc-ci:markercheck" cannot list resource "imagepolicies""#
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("kubectl auth can-i list imagepolicies.image.toolkit.fluxcd.io"),
        "{stderr}"
    );
}
