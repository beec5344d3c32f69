//! What a new user hit (issue 17): a no-op cutover, a GitRepository without the
//! kustomize-controller owner label, and a run killed with SIGKILL after its live patch.
mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use twin::PatchKind;

fn patch_repo(w: &World, body: serde_json::Value) {
    let store = w.twin.store();
    let gr = store
        .gvr("source.toolkit.fluxcd.io", "v1", "gitrepositories")
        .unwrap();
    store
        .patch(
            &gr,
            Some("flux-system"),
            "flux-system",
            PatchKind::Merge,
            &body,
            "test",
        )
        .unwrap();
}

/// `--to` the URL the source already has: nothing to do, exit 0, no patch planned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn to_the_current_url_is_nothing_to_do() {
    let w = World::new(1).await;
    let url = w.old.url_https("org/fleet");
    let r = w
        .cutover(&["gitrepository/flux-system", "--to", &url, "--yes"])
        .await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("already points there") && r.stdout.contains("nothing to do"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("plan:"), "{}", r.stdout);
    let live = w.git_repository();
    assert!(
        live["metadata"]["annotations"]
            .get("reconcile.fluxcd.io/requestedAt")
            .is_none(),
        "nothing was patched: {live}"
    );
    let r = w
        .cutover(&["gitrepository/flux-system", "--to", &url, "-o", "json"])
        .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["mode"], "nothing-to-do");
}

/// Without the kustomize.toolkit.fluxcd.io/name label no committed spec.url used to be
/// compared, and a run still ended "the committed spec.url already agrees". Now the root is
/// found through the Kustomizations' inventories, or the tree is searched and the authoring
/// file shown, or the check says plainly that nothing was compared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_owner_label_the_authoring_file_is_still_found() {
    let w = World::new(1).await;
    w.secret("new-creds", NEW_TOKEN, Some(&w.both_cas()));
    patch_repo(
        &w,
        json!({"metadata": {"labels": {
            "kustomize.toolkit.fluxcd.io/name": null,
            "kustomize.toolkit.fluxcd.io/namespace": null}}}),
    );
    let to = w.new.url_https("org/fleet");
    let args = [
        "gitrepository/flux-system",
        "--to",
        &to,
        "--secret",
        "new-creds",
        "--dry-run",
    ];
    // No label, in no inventory: the tree at the commit the cluster runs defines it.
    let r = w.cutover(&args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("no Kustomization applies GitRepository flux-system/flux-system"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("the repository defines it at clusters/prod/flux-system/gotk-sync.yaml"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(&format!("+  url: {to}")), "{}", r.stdout);

    // In the root Kustomization's inventory: found as the root, the authored value compared.
    let store = w.twin.store();
    let ks = store
        .gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
        .unwrap();
    store
        .patch_status(
            &ks,
            Some("flux-system"),
            "flux-system",
            PatchKind::Merge,
            &json!({"status": {"inventory": {"entries": [
                {"id": "flux-system_flux-system_source.toolkit.fluxcd.io_GitRepository", "v": "v1"},
                {"id": "flux-system_release__ConfigMap", "v": "v1"}]}}}),
            "kustomize-controller",
        )
        .unwrap();
    let r = w.cutover(&args).await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("applied by root Kustomization flux-system/flux-system"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("root Kustomization flux-system/flux-system will revert"),
        "{}",
        r.stdout
    );
    let j = w
        .cutover(&[&args[..], &["-o", "json"]].concat())
        .await
        .json();
    assert_eq!(j["preflight"]["current"]["rootFoundBy"], "inventory");
}

/// A cutover killed with SIGKILL after its live patch leaves the in-flight mark; the next run
/// and `--finish` say what it left and how to finish or roll back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_patch_leaves_a_mark_the_next_run_reads() {
    let w = World::new(1).await;
    w.secret("new-creds", NEW_TOKEN, Some(&w.both_cas()));
    let old = w.old.url_https("org/fleet");
    let to = w.new.url_https("org/fleet");
    // No source-controller runs here: after the patch the plugin waits for proof.
    let mut child = twin::testkit::plugin_command(
        BIN,
        w.twin.kubeconfig_path(),
        &[
            "gitrepository/flux-system",
            "--to",
            &to,
            "--secret",
            "new-creds",
            "--yes",
            "--timeout",
            "5m",
            "--allow-loopback",
        ],
    )
    .spawn()
    .unwrap();
    let start = Instant::now();
    while w.git_repository()["spec"]["url"] != json!(to) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the cutover never patched"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.start_kill().unwrap();
    let _ = child.wait().await;
    let live = w.git_repository();
    let mark = live["metadata"]["annotations"]["cutover.cluster-loop.dev/in-flight"]
        .as_str()
        .unwrap_or_else(|| panic!("no in-flight mark: {live}"));
    let mark: serde_json::Value = serde_json::from_str(mark).unwrap();
    assert_eq!(mark["from"], json!(old));
    assert_eq!(mark["to"], json!(to));
    assert_eq!(mark["fromSecretRef"], "flux-system");

    let want = "an interrupted cutover".to_string();
    let left = format!("left spec.url at {to} (was {old}): finish or roll back");
    let finish = format!("kubectl cutover gitrepository/flux-system -n flux-system --to {to}");
    let back = format!("kubectl cutover gitrepository/flux-system -n flux-system --to {old}");
    // Another target is refused until the interrupted run is finished or rolled back.
    let third = "https://git.example.test/org/fleet.git";
    let r = w
        .cutover(&["gitrepository/flux-system", "--to", third, "--dry-run"])
        .await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    for s in [&want, &left, &finish, &back] {
        assert!(r.stdout.contains(s.as_str()), "{s:?} not in:\n{}", r.stdout);
    }
    let r = w.cutover(&["gitrepository/flux-system", "--finish"]).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    for s in [&want, &left, &finish, &back] {
        assert!(r.stdout.contains(s.as_str()), "{s:?} not in:\n{}", r.stdout);
    }
    // Finishing (--to the URL it patched in) is offered: the preflight runs, warns, passes.
    let r = w
        .cutover(&[
            "gitrepository/flux-system",
            "--to",
            &to,
            "--secret",
            "new-creds",
            "--dry-run",
        ])
        .await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(&left), "{}", r.stdout);
    assert!(!r.stdout.contains("nothing to do"), "{}", r.stdout);
}
