//! A GitRepository the user named that the cluster does not have: exit 3 (the cluster's
//! answer, not a usage error) with a message naming the kind, namespace, name, the context and
//! server asked, and the command that lists what exists. The rule lives in
//! `cluster_loop::error` (a 404 on a named object), shared by every plugin.

use std::process::Stdio;
use twin::{Twin, TwinOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_gitrepository_exits_3_naming_it_and_the_context() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let server = twin.server_url().trim_end_matches('/').to_string();
    for args in [
        &[
            "gitrepository/fleet",
            "--to",
            "https://git.example.dev/org/fleet.git",
            "--dry-run",
        ][..],
        &["gitrepo/fleet", "--finish"][..],
    ] {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cutover"))
            .arg("--kubeconfig")
            .arg(twin.kubeconfig_path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert_eq!(
            stderr,
            format!(
                "error: GitRepository \"fleet\" not found in namespace \"flux-system\" \
                 (context \"twin\", {server}); list what exists with: kubectl get gitrepo -A --context twin\n"
            ),
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    twin.shutdown().await;
}
