//! Completion of cluster names against the twin cluster (an HTTPS API server on 127.0.0.1):
//! real kubectl runs the installed `kubectl_complete-cltest` helper, which lists namespaces and
//! Kustomizations with kube through the twin's kubeconfig.
#![cfg(unix)]

use std::fs;
use std::path::PathBuf;
use std::process::Command;

const PLUGIN: &str = env!("CARGO_BIN_EXE_cltest-plugin");

const STATE: &str = "\
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: infra-controllers
  namespace: flux-system
spec:
  interval: 1h
  path: ./infra
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: team-a-apps
  namespace: team-a
spec:
  interval: 5m
  path: ./team-a
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
    namespace: flux-system
";

fn kubectl() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl must be on PATH")
}

#[test]
fn kustomization_and_namespace_names_come_from_the_cluster() {
    // The twin serves from this runtime's worker threads while the test blocks on kubectl.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let twin = rt
        .block_on(twin::Twin::start(twin::TwinOptions {
            default_namespace: "flux-system".into(),
            ..Default::default()
        }))
        .unwrap();
    twin.load_yaml(STATE).unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(PLUGIN, bin.join("kubectl-cltest")).unwrap();
    let run = |program: PathBuf, args: &[&str]| {
        let out = Command::new(program)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .env("HOME", tmp.path())
            .env("KUBECONFIG", twin.kubeconfig_path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    run(bin.join("kubectl-cltest"), &["completion", "install"]);
    let complete = |args: &[&str]| {
        let mut all = vec!["__complete", "cltest"];
        all.extend_from_slice(args);
        run(kubectl(), &all)
    };

    // The context's namespace (flux-system): every Kustomization there, as ks/NAME.
    assert_eq!(
        complete(&[""]),
        "ks/apps\tKustomization\nks/infra-controllers\tKustomization\n:4\n"
    );
    assert_eq!(
        complete(&["ks/in"]),
        "ks/infra-controllers\tKustomization\n:4\n"
    );
    assert_eq!(
        complete(&["kustomization/a"]),
        "kustomization/apps\tKustomization\n:4\n"
    );
    // -n switches the namespace listed.
    assert_eq!(
        complete(&["-n", "team-a", ""]),
        "ks/team-a-apps\tKustomization\n:4\n"
    );
    // Namespaces from the cluster.
    let ns = complete(&["-n", ""]);
    for want in ["default\n", "flux-system\n", "team-a\n", "kube-system\n"] {
        assert!(ns.contains(want), "{want:?} missing:\n{ns}");
    }
    assert!(ns.ends_with(":4\n"), "{ns}");
    assert_eq!(complete(&["--namespace=te"]), "team-a\n:4\n");

    // Each answer came from a LIST on the twin, in the namespace asked for.
    let lists: Vec<String> = twin
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "kustomizations")
        .map(|r| r.namespace.clone())
        .collect();
    assert_eq!(
        lists,
        ["flux-system", "flux-system", "flux-system", "team-a"]
    );
    drop(twin);
    drop(rt);
}

/// The plugins default Flux objects to flux-system whatever the context's namespace is (as the
/// flux CLI does), so completion lists flux-system too: with the context's namespace
/// `default`, `kubectl unstick ks/<TAB>` used to offer nothing while `kubectl unstick ks/apps`
/// worked.
#[test]
fn flux_objects_complete_from_flux_system_whatever_the_context_namespace() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let twin = rt
        .block_on(twin::Twin::start(twin::TwinOptions {
            default_namespace: "default".into(),
            ..Default::default()
        }))
        .unwrap();
    twin.load_yaml(STATE).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(PLUGIN, bin.join("kubectl-cltest")).unwrap();
    let run = |program: PathBuf, args: &[&str]| {
        let out = Command::new(program)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .env("HOME", tmp.path())
            .env("KUBECONFIG", twin.kubeconfig_path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    run(bin.join("kubectl-cltest"), &["completion", "install"]);
    let complete = |args: &[&str]| {
        let mut all = vec!["__complete", "cltest"];
        all.extend_from_slice(args);
        run(kubectl(), &all)
    };
    let contexts = run(
        kubectl(),
        &["config", "view", "--minify", "-o", "jsonpath={..namespace}"],
    );
    assert_eq!(contexts, "default", "the context's namespace is default");
    assert_eq!(
        complete(&["ks/"]),
        "ks/apps\tKustomization\nks/infra-controllers\tKustomization\n:4\n"
    );
    // -n still wins, also -n default (nothing there).
    assert_eq!(
        complete(&["-n", "team-a", "ks/"]),
        "ks/team-a-apps\tKustomization\n:4\n"
    );
    assert_eq!(complete(&["-n", "default", "ks/"]), ":4\n");
    let lists: Vec<String> = twin
        .requests()
        .iter()
        .filter(|r| r.verb == "list" && r.resource == "kustomizations")
        .map(|r| r.namespace.clone())
        .collect();
    assert_eq!(lists, ["flux-system", "team-a", "default"]);
    drop(twin);
    drop(rt);
}
