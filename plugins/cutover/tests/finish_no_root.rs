//! `--finish` on a GitRepository no root Kustomization applies: there is no committed
//! spec.url to compare the live one with, so it must not claim that verification. It says
//! what it can and cannot verify, removes the hold (it protects nothing without a root) and
//! exits 1 (not verified).
use std::time::Duration;

use twin::testkit::{run_plugin, start_twin};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cutover");
const T: Duration = Duration::from_secs(120);

const REPO: &str = "\
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: fleet
  namespace: flux-system
  annotations:
    kustomize.toolkit.fluxcd.io/reconcile: disabled
spec:
  interval: 1m
  url: https://git.example.test/org/fleet.git
  ref:
    branch: main
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_without_root_is_not_verified() {
    let twin = start_twin(&["flux-system"]).await;
    twin.load_yaml(REPO).unwrap();

    let r = run_plugin(
        BIN,
        twin.kubeconfig_path(),
        &["gitrepo/fleet", "--finish"],
        T,
    )
    .await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("no root Kustomization applies it"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("cannot verify the committed spec.url: no Kustomization applies this object"),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("verified: the committed"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("not verified: see above"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("removed the kustomize.toolkit.fluxcd.io/reconcile hold"),
        "{}",
        r.stdout
    );

    // JSON says the same; a second run has no hold left to remove.
    let r = run_plugin(
        BIN,
        twin.kubeconfig_path(),
        &["gitrepo/fleet", "--finish", "-o", "json"],
        T,
    )
    .await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["holdRemoved"], false);
    assert_eq!(v["liveUrl"], "https://git.example.test/org/fleet.git");
    assert!(v["authoredUrl"].is_null());
    assert!(v["rootRevision"].is_null());
    twin.shutdown().await;
}
