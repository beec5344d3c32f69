//! Completion of cluster names against the real control plane (tests/realcluster: real
//! kube-apiserver v1.36, the Kustomization CRD as released with kustomize-controller): real
//! kubectl runs the installed `kubectl_complete-cltest` helper, which lists namespaces and
//! Kustomizations with kube, through the fault proxy whose request log shows each LIST.
#![cfg(unix)]

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use realcluster::proxy::FaultProxy;

const PLUGIN: &str = crate::bin!("cltest-plugin");

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

/// The shared real cluster with [`STATE`] applied (idempotent: server-side apply), and a fault
/// proxy with a kubeconfig of its own whose context namespace is `namespace`.
fn setup(rt: &tokio::runtime::Runtime, namespace: &str) -> (FaultProxy, tempfile::TempDir) {
    static CLUSTER: realcluster::ClusterCell = realcluster::ClusterCell::new();
    // Its own cluster: the completions below are every Kustomization of flux-system.
    let c = crate::group_cluster(&CLUSTER);
    c.apply_yaml(STATE).unwrap();
    let proxy = rt.block_on(FaultProxy::start(&c)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let kc = tmp.path().join("kubeconfig");
    fs::copy(proxy.kubeconfig(), &kc).unwrap();
    let out = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&kc)
        .args([
            "config",
            "set-context",
            "--current",
            &format!("--namespace={namespace}"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    (proxy, tmp)
}

/// Namespaces of the Kustomization LISTs the proxy forwarded, in order.
fn kustomization_lists(proxy: &FaultProxy) -> Vec<String> {
    proxy
        .requests()
        .iter()
        .filter(|r| r.method == "GET")
        .filter_map(|r| {
            let path = r.path.split('?').next().unwrap_or_default();
            let rest = path.strip_prefix("/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/")?;
            let (ns, res) = rest.split_once('/')?;
            (res == "kustomizations").then(|| ns.to_owned())
        })
        .collect()
}

fn completer(tmp: &tempfile::TempDir) -> impl Fn(PathBuf, &[&str]) -> String + '_ {
    let bin = tmp.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(PLUGIN, bin.join("kubectl-cltest")).unwrap();
    move |program: PathBuf, args: &[&str]| {
        let out = Command::new(program)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
            )
            .env("HOME", tmp.path())
            .env("KUBECONFIG", tmp.path().join("kubeconfig"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
fn kustomization_and_namespace_names_come_from_the_cluster() {
    // The proxy serves from this runtime's worker threads while the test blocks on kubectl.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (proxy, tmp) = setup(&rt, "flux-system");
    let run = completer(&tmp);
    run(
        tmp.path().join("bin/kubectl-cltest"),
        &["completion", "install"],
    );
    let complete = |args: &[&str]| {
        let mut all = vec!["__complete", "cltest"];
        all.extend_from_slice(args);
        run(kubectl(), &all)
    };
    proxy.reset_requests();

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
    // Namespaces from the cluster (the real apiserver's own: default, kube-system, ...).
    let ns = complete(&["-n", ""]);
    for want in [
        "default\n",
        "flux-system\n",
        "team-a\n",
        "kube-system\n",
        "kube-public\n",
        "kube-node-lease\n",
    ] {
        assert!(ns.contains(want), "{want:?} missing:\n{ns}");
    }
    assert!(ns.ends_with(":4\n"), "{ns}");
    assert_eq!(complete(&["--namespace=te"]), "team-a\n:4\n");

    // Each answer came from a LIST on the real apiserver, in the namespace asked for.
    assert_eq!(
        kustomization_lists(&proxy),
        ["flux-system", "flux-system", "flux-system", "team-a"]
    );
    drop(proxy);
    drop(rt);
}

/// The plugins default Flux objects to flux-system whatever the context's namespace is (as the
/// flux CLI does), so completion lists flux-system too: with the context's namespace
/// `default`, `kubectl unstick ks/<TAB>` used to offer nothing while `kubectl unstick ks/apps`
/// worked.
#[test]
fn flux_objects_complete_from_flux_system_whatever_the_context_namespace() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (proxy, tmp) = setup(&rt, "default");
    let run = completer(&tmp);
    run(
        tmp.path().join("bin/kubectl-cltest"),
        &["completion", "install"],
    );
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
    proxy.reset_requests();
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
    assert_eq!(
        kustomization_lists(&proxy),
        ["flux-system", "team-a", "default"]
    );
    drop(proxy);
    drop(rt);
}
