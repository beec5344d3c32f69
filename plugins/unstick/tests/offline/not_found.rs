//! A Kustomization the user named that the cluster does not have: exit 3 (the cluster's
//! answer, not a usage error) with a message naming the kind, namespace, name, the context and
//! server asked, and the command that lists what exists. The rule lives in
//! `cluster_loop::error` (`Error::not_found`), shared by every plugin.

use std::time::Duration;

use twin::testkit::{run_plugin, start_twin};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");
const T: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_kustomization_exits_3_naming_it_and_the_context() {
    let twin = start_twin(&["team-a"]).await;
    // One Kustomization that does exist, in another namespace than the one asked.
    twin.load_yaml(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: team-a\nspec:\n  interval: 10m\n  path: ./apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    )
    .unwrap();
    let server = twin.server_url().trim_end_matches('/').to_string();
    for args in [
        vec!["ks/apps"],
        vec!["ks/apps", "--dry-run"],
        vec!["ks/apps", "--check", "-o", "json"],
    ] {
        let out = run_plugin(BIN, twin.kubeconfig_path(), &args, T).await;
        let stderr = out.stderr.as_str();
        assert_eq!(out.code, 3, "{args:?}: {stderr}");
        assert_eq!(
            stderr,
            format!(
                "error: Kustomization \"apps\" not found in namespace \"flux-system\" \
                 (context \"twin\", {server}); list what exists with: kubectl get ks -A --context twin\n"
            ),
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // The same name in the namespace where it lives is found (not a blanket 3).
    let args = ["ks/apps", "--dry-run", "-n", "team-a", "-o", "json"];
    let out = run_plugin(BIN, twin.kubeconfig_path(), &args, T).await;
    assert_ne!(out.code, 3, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["diagnosis"]["kustomization"], "team-a/apps", "{v}");
    twin.shutdown().await;
}

/// `--all -n NS`: a namespace that does not exist is the cluster's answer (exit 3, names it
/// and `kubectl get ns`), never "all 0 Kustomizations are healthy"; an existing namespace
/// without Kustomizations says so (exit 1: nothing was checked); when GET namespaces is
/// forbidden it says it could not check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_view_of_a_missing_or_empty_namespace() {
    use twin::auth::Rule;
    let twin = start_twin(&["team-a", "empty"]).await;
    let server = twin.server_url().trim_end_matches('/').to_string();
    let kc = twin.kubeconfig_path();

    let out = run_plugin(BIN, kc, &["--all", "-n", "nonexistent"], T).await;
    assert_eq!(out.code, 3, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stderr,
        format!(
            "error: Namespace \"nonexistent\" not found (context \"twin\", {server}); \
             list what exists with: kubectl get ns --context twin\n"
        )
    );
    assert!(!out.stdout.contains("healthy"), "{}", out.stdout);
    let out = run_plugin(BIN, kc, &["--all", "-n", "nonexistent", "-o", "json"], T).await;
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);

    let out = run_plugin(BIN, kc, &["--all", "-n", "empty"], T).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("no Kustomizations in namespace empty\n"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("healthy"), "{}", out.stdout);
    let out = run_plugin(BIN, kc, &["--all", "-n", "empty", "-o", "json"], T).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["total"], 0);
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "no Kustomizations in namespace empty"),
        "{v:#}"
    );

    // Allowed to read Flux objects, not namespaces.
    let token = twin.add_token(
        "flux-reader",
        vec![Rule::new(
            &["get", "list", "watch"],
            &[
                "kustomize.toolkit.fluxcd.io",
                "source.toolkit.fluxcd.io",
                "apps",
            ],
            &["*"],
        )],
    );
    let kc2 = twin.kubeconfig_for(&token, "flux-reader").unwrap();
    for ns in ["nonexistent", "empty"] {
        let out = run_plugin(BIN, &kc2, &["--all", "-n", ns], T).await;
        assert_eq!(out.code, 1, "{ns}: {}", out.stderr);
        assert!(
            out.stdout.contains(&format!(
                "no Kustomizations in namespace {ns} (could not check the namespace exists)\n"
            )),
            "{ns}: {}",
            out.stdout
        );
    }
    twin.shutdown().await;
}
