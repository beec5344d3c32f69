//! The REAL `kubectl-gitops-verify` binary against the real control plane and the real Flux
//! controllers (source-controller and kustomize-controller reconcile every object here from
//! the cluster's Git server; pods are run by the node agent as a kubelet would, the images it
//! cannot pull end in ImagePullBackOff). Each test breaks one link and checks that link is the
//! one named, with the right verdict; each has its own fleet, namespace and Git repository, so
//! they run at once on the group's cluster.

use std::process::Command;
use std::time::Duration;

use realcluster::testkit::{condition, eventually};
use realcluster::{Cluster, ClusterCell, ClusterOptions, FLUX_NS, Lease};
use serde_json::Value;

const BIN: &str = crate::bin!("kubectl-gitops-verify");
/// The one image the node pulls.
const GOOD: &str = "registry.example.local:5000/podinfo:6.7.0";
/// An image the node cannot pull (the registry has no such tag).
const MISSING: &str = "registry.example.local:5000/podinfo:0.0.0-missing";
const T: Duration = Duration::from_secs(180);

fn cluster() -> Lease {
    static C: ClusterCell = ClusterCell::new();
    crate::cluster_with(&C, || ClusterOptions {
        images: vec![GOOD.to_owned()],
        ..ClusterOptions::default()
    })
}

/// The binary's exit code, parsed stdout (`-o json` is added) and stderr.
fn verify(kubeconfig: &std::path::Path, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .args(["-o", "json"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn link<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == id)
        .unwrap_or_else(|| panic!("no link {id}: {r:#}"))
}

fn deployment(ns: &str, name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: {name}\n        image: {image}\n"
    )
}

fn namespace(ns: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")
}

/// A fleet `name` (GitRepository + Kustomization `name` in flux-system, namespace `name`,
/// Deployment `web` running `image`), with `spec` lines for the Kustomization.
fn fleet(c: &Cluster, name: &str, image: &str, spec: &str) -> String {
    c.fleet(
        name,
        &[
            ("ns.yaml", &namespace(name)),
            ("web.yaml", &deployment(name, "web", image)),
        ],
        spec,
    )
    .unwrap()
}

fn ready_at(c: &Cluster, name: &str, sha: &str) {
    eventually(T, &format!("Kustomization {name} Ready at {sha}"), || {
        let k = c.kustomization(name);
        (condition(&k, "Ready")["status"] == "True"
            && k["status"]["lastAppliedRevision"]
                .as_str()
                .is_some_and(|r| r.ends_with(sha)))
        .then_some(())
    });
}

/// The chain that holds exits 0: source at the remote's head, the Kustomization Ready at it,
/// the Deployment Current; images and the links this build does not check are
/// not-applicable with their reason, never ok.
#[test]
fn chain_that_holds_exits_0() {
    let c = &cluster();
    let sha = fleet(
        c,
        "gv-ok",
        GOOD,
        "  interval: 1m\n  path: ./\n  prune: true\n  wait: true\n  timeout: 1m\n",
    );
    ready_at(c, "gv-ok", &sha);
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-ok"]);
    assert_eq!(code, 0, "{r:#}\n{err}");
    assert_eq!(r["kind"], "ChainReport");
    assert_eq!(r["firstBroken"], Value::Null, "{r:#}");
    for id in ["source", "kustomizations", "workloads"] {
        assert_eq!(link(&r, id)["verdict"], "ok", "{id}: {r:#}");
    }
    let src = &link(&r, "source")["evidence"][0];
    assert!(src["detail"].as_str().unwrap().contains(&sha), "{src:#}");
    assert_eq!(
        link(&r, "workloads")["evidence"][0]["object"],
        "Deployment/gv-ok/web"
    );
    for id in ["images", "dns", "gateway", "http"] {
        let l = link(&r, id);
        assert_eq!(l["verdict"], "not-applicable", "{id}: {r:#}");
        assert!(!l["summary"].as_str().unwrap().is_empty());
    }
}

/// A source revision behind the remote: a commit pushed after the last fetch (the source's
/// interval set to 100h first, so no fetch can race the check) is `waiting` on link 1 with its
/// next fetch as the deadline, the link moving, exit 4; suspended, it is `broken` with the
/// resume command, exit 1.
#[test]
fn source_behind_the_remote_is_named() {
    let c = &cluster();
    let name = "gv-behind";
    let sha = fleet(c, name, GOOD, "  interval: 1m\n  path: ./\n  prune: true\n");
    ready_at(c, name, &sha);
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "gitrepository",
        name,
        "--type=merge",
        "-p",
        r#"{"spec":{"interval":"100h"}}"#,
    ])
    .unwrap();
    eventually(T, "the GitRepository reconciled its new interval", || {
        let g: Value = serde_json::from_str(
            &c.kubectl(&["-n", FLUX_NS, "get", "gitrepository", name, "-o", "json"])
                .ok()?,
        )
        .ok()?;
        (g["status"]["observedGeneration"] == g["metadata"]["generation"]
            && condition(&g, "Ready")["status"] == "True")
            .then_some(())
    });
    let head = c
        .push(name, &[("extra.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: gv-behind\n")], "one more")
        .unwrap();
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-behind"]);
    assert_eq!(code, 4, "{r:#}\n{err}");
    assert_eq!(r["firstBroken"], "source", "{r:#}");
    let l = link(&r, "source");
    assert_eq!(l["verdict"], "waiting", "{l:#}");
    assert_eq!(l["moving"], true, "{l:#}");
    let detail = l["evidence"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("behind the remote") && detail.contains(&head[..12]),
        "{detail}"
    );
    let deadline: jiff::Timestamp = l["deadline"].as_str().unwrap().parse().unwrap();
    let left = deadline.as_second() - jiff::Timestamp::now().as_second();
    assert!(
        (99 * 3600..=100 * 3600 + 120).contains(&left),
        "next fetch within 100h + timeout: {left}s"
    );

    c.kubectl(&[
        "-n",
        FLUX_NS,
        "patch",
        "gitrepository",
        name,
        "--type=merge",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ])
    .unwrap();
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-behind"]);
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(r["firstBroken"], "source", "{r:#}");
    let l = link(&r, "source");
    assert_eq!(l["verdict"], "broken", "{l:#}");
    assert!(
        l["fix"]
            .as_str()
            .unwrap()
            .contains("flux resume source git gv-behind -n flux-system"),
        "{l:#}"
    );
}

/// A held health check: while kustomize-controller waits on a Deployment whose image does not
/// pull, link 2 is `waiting` with the check's own deadline (start + 45s timeout) and link 3 is
/// `broken` naming the pod's pull error (certain: the image being applied); once the real
/// controller fails the check, link 2 is `broken` with kubectl unstick as the fix.
#[test]
fn held_health_check_waits_then_breaks() {
    let c = &cluster();
    let name = "gv-held";
    fleet(
        c,
        name,
        MISSING,
        "  interval: 100h\n  path: ./\n  prune: true\n  wait: true\n  timeout: 45s\n",
    );
    let started = eventually(
        T,
        "the real health check runs and the pod fails to pull",
        || {
            let k = c.kustomization(name);
            let rc = condition(&k, "Reconciling");
            let running = rc["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks"));
            let pods = c.kubectl(&["-n", name, "get", "pods", "-o", "json"]).ok()?;
            (running && (pods.contains("ErrImagePull") || pods.contains("ImagePullBackOff"))).then(
                || {
                    rc["lastTransitionTime"]
                        .as_str()
                        .unwrap()
                        .parse::<jiff::Timestamp>()
                        .unwrap()
                },
            )
        },
    );
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-held"]);
    let ks = link(&r, "kustomizations");
    if ks["verdict"] == "broken" {
        // The check ended between the wait above and the run: only the second half is left.
        assert!(
            condition(&c.kustomization(name), "Ready")["status"] == "False",
            "{r:#}"
        );
    } else {
        assert_eq!(code, 1, "{r:#}\n{err}");
        assert_eq!(ks["verdict"], "waiting", "{r:#}");
        let d: jiff::Timestamp = ks["deadline"].as_str().unwrap().parse().unwrap();
        let off = d.as_second() - started.as_second();
        assert!(
            (45..=50).contains(&off),
            "deadline = start + 45s timeout, got +{off}s: {ks:#}"
        );
        let w = link(&r, "workloads");
        assert_eq!(w["verdict"], "broken", "{r:#}");
        assert_eq!(r["firstBroken"], "workloads", "{r:#}");
        let detail = w["evidence"][0]["detail"].as_str().unwrap();
        assert!(
            detail.contains(MISSING)
                && (detail.contains("ImagePullBackOff") || detail.contains("ErrImagePull")),
            "{detail}"
        );
    }
    eventually(T, "the real controller fails the check", || {
        (condition(&c.kustomization(name), "Ready")["reason"] == "HealthCheckFailed").then_some(())
    });
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-held"]);
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(r["firstBroken"], "kustomizations", "{r:#}");
    let ks = link(&r, "kustomizations");
    assert_eq!(ks["verdict"], "broken", "{ks:#}");
    assert!(
        ks["fix"]
            .as_str()
            .unwrap()
            .contains("kubectl unstick ks/gv-held -n flux-system"),
        "{ks:#}"
    );
}
