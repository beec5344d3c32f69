//! A GitRepository the user named that the cluster does not have: exit 3 (the cluster's
//! answer, not a usage error) with a message naming the kind, namespace, name, the context and
//! server asked, and the command that lists what exists. The rule lives in
//! `cluster_loop::error` (a 404 on a named object), shared by every plugin.

use std::time::Duration;

use twin::testkit::{not_found_line, run_plugin, start_twin};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cutover");
const T: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_gitrepository_exits_3_naming_it_and_the_context() {
    let twin = start_twin(&[]).await;
    let want = not_found_line(&twin, "GitRepository", "fleet", "flux-system", "gitrepo");
    for args in [
        &[
            "gitrepository/fleet",
            "--to",
            "https://git.example.dev/org/fleet.git",
            "--dry-run",
        ][..],
        &["gitrepo/fleet", "--finish"][..],
    ] {
        let out = run_plugin(BIN, twin.kubeconfig_path(), args, T).await;
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr, want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    twin.shutdown().await;
}
