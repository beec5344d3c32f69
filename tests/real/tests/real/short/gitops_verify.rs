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

/// The group's cluster: the real image-reflector-controller (with the real OCI registry) and
/// image-automation-controller run too, for the images link; its Git server has
/// [`crate::git_user`] for a fleet that requires auth.
fn cluster() -> Lease {
    static C: ClusterCell = ClusterCell::new();
    crate::cluster_with(&C, || ClusterOptions {
        images: vec![GOOD.to_owned()],
        image_reflector_controller: true,
        image_automation_controller: true,
        // A Git user whose tokens the row-2 test mints and revokes.
        git_user: Some(crate::git_user()),
        python_image: true,
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

/// The binary with its default (table) output: (exit code, stdout, stderr), for runs that
/// end without a report.
fn verify_table(c: &Cluster, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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

use crate::ready_at;

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
    // The cluster's Git server is on the loopback (source-controller runs on the host, as in
    // ./demo): --probe-source does not call that Ready source broken from a pod whose
    // loopback is itself; it says why the head was read here instead.
    let (code, r, err) = verify(
        c.kubeconfig(),
        &["--source", "gitrepository/gv-ok", "--probe-source"],
    );
    assert_eq!(code, 0, "{r:#}\n{err}");
    let src = &link(&r, "source")["evidence"][0];
    assert_eq!(src["verdict"], "ok", "{src:#}");
    let d = src["detail"].as_str().unwrap();
    assert!(
        d.contains("seen from this workstation, not from a pod")
            && d.contains("is a loopback address")
            && !d.contains("Refused"),
        "{d}"
    );
}

/// Issue 28's sweep, on link 1: a GitRepository that source-controller's
/// `--watch-label-selector` excludes (a `sharding.fluxcd.io/key` shard no controller runs
/// here) gets no status from the real source-controller, while a control on the same URL is
/// fetched. Nothing will fetch it, so link 1 is `broken`, naming the selector, never `waiting`
/// for a fetch; exit 1.
#[test]
fn a_source_no_source_controller_watches_is_broken_not_waiting() {
    let c = &cluster();
    // Its own namespace: an excluded source in flux-system would change what the other
    // tests' runs read there (the controllers' Deployments list, +1 request).
    let ns = "gv-shard";
    let sha = fleet(c, ns, GOOD, "  interval: 10m\n  path: ./\n  prune: true\n");
    ready_at(c, ns, &sha);
    let control = c.get_json(&["-n", FLUX_NS, "get", "gitrepository", ns]);
    let url = control["spec"]["url"].as_str().unwrap().to_owned();
    let secret = match control["spec"]["secretRef"]["name"].as_str() {
        Some(name) => {
            let mut s = c.get_json(&["-n", FLUX_NS, "get", "secret", name]);
            s["metadata"] = serde_json::json!({"name": name, "namespace": ns});
            c.apply_yaml(&s.to_string()).unwrap();
            format!("\n  secretRef: {{name: {name}}}")
        }
        None => String::new(),
    };
    let source = |name: &str, labels: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{labels}}}\nspec:\n  interval: 1m\n  url: {url}\n  ref: {{branch: main}}{secret}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  interval: 10m\n  path: ./\n  prune: false\n  sourceRef: {{kind: GitRepository, name: {name}}}\n"
        )
    };
    let shard = format!("{}: shard1", realcluster::HELD_SHARD_LABEL);
    c.apply_yaml(&source("gv-shard-x", &shard)).unwrap();
    c.apply_yaml(&source("gv-shard-a", "")).unwrap();
    // Observed first: the control on the same URL gets Ready; the shard's source gets no
    // status from the real controller.
    eventually(T, "the control source is fetched", || {
        let g = c.get_json(&["-n", ns, "get", "gitrepository", "gv-shard-a"]);
        (condition(&g, "Ready")["status"] == "True").then_some(())
    });
    let x = c.get_json(&["-n", ns, "get", "gitrepository", "gv-shard-x"]);
    assert!(
        x["status"]["conditions"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "the real source-controller handled an excluded source: {x:#}"
    );
    let (code, r, err) = verify(
        c.kubeconfig(),
        &["--source", "gitrepository/gv-shard-x", "-n", ns],
    );
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(r["firstBroken"], "source", "{r:#}");
    let l = link(&r, "source");
    assert_eq!(l["verdict"], "broken", "{l:#}");
    let d = l["evidence"][0]["detail"].as_str().unwrap();
    assert!(
        d.contains("no running source-controller watches") && d.contains("--watch-label-selector"),
        "{d}"
    );
    // fluxcd/source-controller#2150's state: a Ready source that leaves its shard keeps its
    // Ready status and artifact (masking the misconfiguration), but nothing fetches it again:
    // broken too, not ok.
    c.kubectl(&[
        "-n",
        ns,
        "label",
        "gitrepository",
        "gv-shard-a",
        &shard.replace(": ", "="),
    ])
    .unwrap();
    let g = c.get_json(&["-n", ns, "get", "gitrepository", "gv-shard-a"]);
    assert_eq!(condition(&g, "Ready")["status"], "True", "{g:#}");
    let (code, r, err) = verify(
        c.kubeconfig(),
        &["--source", "gitrepository/gv-shard-a", "-n", ns],
    );
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(link(&r, "source")["verdict"], "broken", "{r:#}");
    // Back to the main shard, so source-controller handles the namespace's deletion (its
    // finalizer).
    let _ = c.kubectl(&[
        "-n",
        ns,
        "label",
        "gitrepository",
        "gv-shard-a",
        "gv-shard-x",
        &format!("{}-", realcluster::HELD_SHARD_LABEL),
    ]);
    let _ = c.kubectl(&[
        "-n",
        ns,
        "delete",
        "kustomization,gitrepository",
        "gv-shard-a",
        "gv-shard-x",
        "--wait=false",
    ]);
}

/// A source revision behind the remote: a commit pushed after the last fetch (the source's
/// interval set to 100h first, so no fetch can race the check) is `waiting` on link 1 with its
/// next fetch as the deadline, the link moving, exit 4; `--wait` on it waits and SIGINT ends
/// it with 130; suspended, it is `broken` with the resume command, exit 1.
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

    // `--wait` on that state waits (its deadline is the 100h fetch + margin); SIGINT ends it at
    // once with 130.
    let mut child = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["--source", "gitrepository/gv-behind", "--wait"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0 {
        seen.push_str(&line);
        if line.starts_with("waiting until") {
            break;
        }
        line.clear();
    }
    assert!(
        seen.contains("waiting until") && seen.contains("GitRepository/flux-system/gv-behind"),
        "{seen}"
    );
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(st.code(), Some(130), "{seen}{rest}");
    assert!(rest.contains("interrupted"), "{rest}");

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

/// The demo's break, in two waves: Kustomization `gv-waves` (health-checked) and
/// `gv-waves-2` (dependsOn it) read one source. A new revision sets a bare tag (`image:
/// 0.1.1`, what a `:tag` marker on an `image:` field writes) in wave 1. While the real
/// kustomize-controller runs wave 1's health check on that revision, wave 2 waits for it:
/// wave 2 moves, but wave 1's objects are already applied, so the pull failure of the image
/// being applied is final (links 3 and 4 `broken`, not "still moving"). Once the check
/// fails, wave 2 is held by a failed dependency and nothing moves: links 3 and 4 stay
/// `broken`, and link 2's fix points to Git first (markercheck), then unstick.
#[test]
fn a_pull_failure_of_the_revision_being_applied_is_final_while_a_dependent_waits() {
    let c = &cluster();
    let name = "gv-waves";
    let held = "  interval: 100h\n  prune: true\n  wait: true\n  timeout: 45s\n";
    let first = c
        .fleet(
            name,
            &[
                ("w1/ns.yaml", &namespace(name)),
                ("w1/web.yaml", &deployment(name, "web", GOOD)),
                ("w2/api.yaml", &deployment(name, "api", GOOD)),
            ],
            &format!("  path: ./w1\n{held}"),
        )
        .unwrap();
    c.apply_yaml(&format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}-2, namespace: {FLUX_NS}}}\nspec:\n  sourceRef: {{kind: GitRepository, name: {name}}}\n  dependsOn: [{{name: {name}}}]\n  path: ./w2\n{held}"
    ))
    .unwrap();
    ready_at(c, name, &first);
    ready_at(c, &format!("{name}-2"), &first);
    let second = c
        .push(
            name,
            &[("w1/web.yaml", &deployment(name, "web", "0.1.1"))],
            "podinfo 0.1.1 (the marker wrote a bare tag)",
        )
        .unwrap();
    crate::fetch_source_now(c, name);
    let short = &second[..7];
    eventually(
        T,
        "wave 1's health check runs on the new revision and its pod fails to pull",
        || {
            let rc = condition(&c.kustomization(name), "Reconciling");
            let running = rc["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks") && m.contains(short));
            let pods = c.kubectl(&["-n", name, "get", "pods", "-o", "json"]).ok()?;
            (running && pods.contains("\"0.1.1\"") && pods.contains("ErrImagePull")
                || running && pods.contains("ImagePullBackOff"))
            .then_some(())
        },
    );
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-waves"]);
    if link(&r, "kustomizations")["verdict"] == "waiting" {
        assert_eq!(code, 1, "{r:#}\n{err}");
        assert_eq!(r["firstBroken"], "workloads", "{r:#}");
        for id in ["workloads", "images"] {
            let l = link(&r, id);
            assert_eq!(l["verdict"], "broken", "{id}: {r:#}");
            let e = &l["evidence"][0];
            assert_eq!(e["verdict"], "broken", "{id}: {l:#}");
            assert!(
                e["object"]
                    .as_str()
                    .unwrap()
                    .starts_with("Deployment/gv-waves/web"),
                "{id}: {l:#}"
            );
            assert!(
                !e["detail"].as_str().unwrap().contains("not final"),
                "{id}: {l:#}"
            );
        }
        // Wave 2 is the one that moves: its own Deployment's verdict would be held.
        assert_eq!(link(&r, "kustomizations")["moving"], true, "{r:#}");
    }
    eventually(T, "the real controller fails wave 1's check", || {
        (condition(&c.kustomization(name), "Ready")["reason"] == "HealthCheckFailed").then_some(())
    });
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-waves"]);
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(r["firstBroken"], "kustomizations", "{r:#}");
    let ks = link(&r, "kustomizations");
    assert_eq!(ks["verdict"], "broken", "{ks:#}");
    assert!(ks.get("moving").is_none(), "nothing moves now: {ks:#}");
    let fix = ks["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("fix it in Git first") && fix.contains("markercheck"),
        "{fix}"
    );
    for id in ["workloads", "images"] {
        let l = link(&r, id);
        assert_eq!(l["verdict"], "broken", "{id}: {r:#}");
        assert!(
            !l["evidence"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("not final"),
            "{id}: {l:#}"
        );
    }
    // The pod's reason leads (kstatus's "Pending termination" follows it).
    let w = link(&r, "workloads")["evidence"][0]["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        w.starts_with("pod web-") && w.contains("; kstatus InProgress"),
        "{w}"
    );
}

/// `--source` naming a source the cluster does not have is exit 3 with the command that
/// lists what exists, as every plugin treats a named object that is missing.
#[test]
fn a_named_source_that_does_not_exist_is_exit_3() {
    let c = &cluster();
    let (code, out, err) = verify_table(c, &["--source", "gitrepository/gv-nope"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("\"gv-nope\" not found") && err.contains("kubectl get"),
        "{err}"
    );
    assert!(out.is_empty(), "nothing on stdout");
}

/// Trial3: `-n` with a typo (a namespace with no Kustomization) checks nothing, so it is not
/// "the chain holds" (exit 0 would let a CI gate pass on the typo): exit 3 with the command
/// that lists where Kustomizations are.
#[test]
fn a_namespace_with_nothing_to_verify_is_exit_3_not_a_pass() {
    let c = &cluster();
    let (code, out, err) = verify_table(c, &["-n", "flux-sytem"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("no Kustomization in namespace \"flux-sytem\"")
            && err.contains("kubectl get kustomizations -A"),
        "{err}"
    );
    assert!(!out.contains("the chain holds"), "{out}");
}

/// The request budget, counted by the fault proxy between the binary and the real apiserver:
/// a one-shot run on one fleet makes exactly the requests its report says (`apiRequests`),
/// all reads (lists, and the two controller Deployments by name), within the bound docs/gitops-verify.md gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_budget_is_what_the_proxy_counts() {
    use realcluster::proxy::FaultProxy;
    let c = &cluster();
    let sha = fleet(
        c,
        "gv-budget",
        GOOD,
        "  interval: 1m\n  path: ./\n  prune: true\n",
    );
    ready_at(c, "gv-budget", &sha);
    // No `wait: true` here: Ready says applied, not rolled out. The budget is counted on a
    // chain that holds, so the Deployment must be available first (seen: exit 4 under load).
    eventually(T, "Deployment gv-budget/web available", || {
        let d = c.get_json(&["-n", "gv-budget", "get", "deployment", "web"]);
        (d["status"]["availableReplicas"] == 1).then_some(())
    });
    let proxy = FaultProxy::start(c).await.unwrap();
    let kc = proxy.kubeconfig().to_path_buf();
    let (code, r, err) =
        tokio::task::spawn_blocking(move || verify(&kc, &["--source", "gitrepository/gv-budget"]))
            .await
            .unwrap();
    assert_eq!(code, 0, "{r:#}\n{err}");
    let reqs = proxy.requests();
    assert!(
        reqs.iter().all(|q| q.method == "GET"),
        "read-only: {reqs:#?}"
    );
    assert_eq!(
        r["apiRequests"].as_u64().unwrap() as usize,
        reqs.len(),
        "the report's count is the proxy's: {reqs:#?}"
    );
    assert!(
        reqs.len() <= 12,
        "docs/gitops-verify.md bound: {} requests: {reqs:#?}",
        reqs.len()
    );
    eprintln!(
        "gitops verify one fleet: {} requests: {:?}",
        reqs.len(),
        reqs.iter().map(|q| &q.path).collect::<Vec<_>>()
    );
}

/// A bare-tag image from a misplaced marker, for real: the real image-reflector-controller
/// scans tags pushed to the real OCI registry, its ImagePolicy selects 1.1.0, and the real
/// image-automation-controller applies a `:tag` marker that sits on the `image:` field, writing
/// `image: 1.1.0`; kustomize-controller applies it and the node cannot pull it. Link 4 is
/// `broken` naming the bare tag and the policy whose latestRef it is (link 3 names the pull
/// error). Then the marker is fixed in Git and `--wait` runs: each link's change is printed
/// with the watch event that triggered its round, and it exits 0 within its deadline.
#[test]
fn bare_tag_from_a_misplaced_marker_then_wait_after_the_fix() {
    let c = &cluster();
    let name = "gv-bare";
    let oci = c
        .oci()
        .expect("the OCI registry runs with image-reflector-controller");
    oci.push("gv/app", &["1.0.0", "1.1.0"]).unwrap();
    let image = format!("{}/gv/app", oci.host());
    let app = |line: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: {name}\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: app}}\n  template:\n    metadata:\n      labels: {{app: app}}\n    spec:\n      containers:\n        - name: app\n          {line}\n"
        )
    };
    // The misplaced marker: ':tag' on the image field.
    let bad = app(&format!(
        "image: {image}:1.0.0 # {{\"$imagepolicy\": \"{FLUX_NS}:{name}:tag\"}}"
    ));
    c.registry().add(&format!("{image}:*"));
    let first = c
        .fleet(
            name,
            &[("ns.yaml", &namespace(name)), ("deploy/app.yaml", &bad)],
            "  interval: 1m\n  path: ./\n  prune: true\n",
        )
        .unwrap();
    ready_at(c, name, &first);
    c.apply_yaml(&format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec: {{image: \"{image}\", interval: 1m, insecure: true}}\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec:\n  imageRepositoryRef: {{name: {name}}}\n  policy: {{semver: {{range: \">=1.0.0\"}}}}\n"
    ))
    .unwrap();
    eventually(T, "the real ImagePolicy selects 1.1.0", || {
        let p = c.get_json(&["-n", FLUX_NS, "get", "imagepolicy", name]);
        (p["status"]["latestRef"]["tag"] == "1.1.0").then_some(())
    });
    c.apply_yaml(&format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec:\n  interval: 1m\n  sourceRef: {{kind: GitRepository, name: {name}}}\n  git:\n    checkout: {{ref: {{branch: main}}}}\n    commit:\n      author: {{name: fluxcdbot, email: fluxcdbot@users.noreply.github.com}}\n    push: {{branch: main}}\n  update: {{path: ./deploy, strategy: Setters}}\n"
    ))
    .unwrap();
    let repo = format!("org/{name}");
    let pushed = eventually(T, "the real automation pushes the bare tag", || {
        let head = c.git().head(&repo, "main").ok()?;
        (head != first).then_some(head)
    });
    let text = String::from_utf8(
        c.git()
            .read_file(&repo, &pushed, "deploy/app.yaml")
            .unwrap(),
    )
    .unwrap();
    assert!(
        text.contains("image: 1.1.0 #"),
        "the controller wrote the bare tag: {text}"
    );
    crate::fetch_source_now(c, name);
    ready_at(c, name, &pushed);
    eventually(T, "the pod fails to pull 1.1.0", || {
        let pods = c.kubectl(&["-n", name, "get", "pods", "-o", "json"]).ok()?;
        (pods.contains("\"1.1.0\"")
            && (pods.contains("ErrImagePull") || pods.contains("ImagePullBackOff")))
        .then_some(())
    });
    let (code, r, err) = verify(c.kubeconfig(), &["--source", "gitrepository/gv-bare"]);
    assert_eq!(code, 1, "{r:#}\n{err}");
    let img = link(&r, "images");
    assert_eq!(img["verdict"], "broken", "{r:#}");
    let bare = img["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["object"] == "Deployment/gv-bare/app container app")
        .unwrap_or_else(|| panic!("{img:#}"));
    assert_eq!(bare["verdict"], "broken");
    let d = bare["detail"].as_str().unwrap();
    assert!(
        d.contains("\"1.1.0\", a bare tag")
            && d.contains("ImagePolicy flux-system/gv-bare's latestRef tag"),
        "{d}"
    );
    assert!(
        img["fix"].as_str().unwrap().contains("markercheck"),
        "{img:#}"
    );
    let w = link(&r, "workloads");
    assert_eq!(w["verdict"], "broken", "{r:#}");
    assert!(
        w["evidence"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("image 1.1.0"),
        "{w:#}"
    );
    for id in ["source", "kustomizations"] {
        assert_eq!(link(&r, id)["verdict"], "ok", "{id}: {r:#}");
    }

    // The fix: the plain marker on the image field, at the policy's latest.
    let good = app(&format!(
        "image: {image}:1.1.0 # {{\"$imagepolicy\": \"{FLUX_NS}:{name}\"}}"
    ));
    let fixed = c
        .push(name, &[("deploy/app.yaml", &good)], "plain marker")
        .unwrap();
    let mut child = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["--source", "gitrepository/gv-bare", "--wait", "-o", "json"])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let the first check run on the old state, then have source-controller fetch now.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0 {
        lines.push(std::mem::take(&mut line));
        if lines.last().unwrap().starts_with("waiting until") {
            break;
        }
    }
    crate::fetch_source_now(c, name);
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).unwrap();
        s
    });
    let out = child.wait_with_output().unwrap();
    let err = lines.concat() + &rest.join().unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(out.status.code(), Some(0), "{r:#}\n{err}");
    assert_eq!(r["wait"]["expired"], false, "{r:#}");
    assert!(
        r["wait"]["why"]
            .as_str()
            .unwrap()
            .starts_with("largest own timeout"),
        "{r:#}"
    );
    assert!(
        link(&r, "source")["evidence"][0]["detail"]
            .as_str()
            .unwrap()
            .contains(&fixed),
        "{r:#}"
    );
    // The first check saw the source behind the remote.
    assert!(
        err.contains("link 1 source: waiting: ") && err.contains("[first check]"),
        "{err}"
    );
    // Every later change names the watch event that triggered its round: the source turns ok
    // in the round of the GitRepository's own event, the links below follow theirs.
    let changes: Vec<&str> = err.lines().filter(|l| l.contains(" -> ")).collect();
    assert!(changes.iter().all(|l| l.contains("watch event")), "{err}");
    let src_ok = changes
        .iter()
        .find(|l| l.starts_with("link 1 source: waiting -> ok"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        src_ok.contains("GitRepository/flux-system/gv-bare"),
        "{src_ok}"
    );
    for id in ["workloads", "images"] {
        assert!(
            changes
                .iter()
                .any(|l| l.contains(&format!(" {id}: ")) && l.contains("-> ok")),
            "{id} turns ok: {err}"
        );
    }
}

/// Its own cluster with the real image-reflector-controller (and the OCI registry), so
/// stopping the controller does not disturb the group's other tests.
fn reflector_cluster() -> Lease {
    static C: ClusterCell = ClusterCell::new();
    crate::cluster_with(&C, || ClusterOptions {
        image_reflector_controller: true,
        ..ClusterOptions::default()
    })
}

/// Controller liveness decides link 4 first: with the real image-reflector-controller scaled
/// to 0 before its ImagePolicy is created, the policy has no latestRef and never will; the
/// link is `broken` (not `waiting`) naming the Deployment, why (0 replicas) and the scale
/// lever. Scaled back to 1, the real controller selects the tag and the link is `ok`.
#[test]
fn images_link_is_broken_while_image_reflector_controller_is_scaled_to_zero() {
    let c = &reflector_cluster();
    let name = "gv-irc-stop";
    let oci = c
        .oci()
        .expect("the OCI registry runs with image-reflector-controller");
    oci.push("gv/irc", &["1.0.0"]).unwrap();
    let image = format!("{}/gv/irc", oci.host());
    c.registry().add(&format!("{image}:*"));
    let first = c
        .fleet(
            name,
            &[
                ("ns.yaml", &namespace(name)),
                (
                    "app.yaml",
                    &deployment(name, "app", &format!("{image}:1.0.0")),
                ),
            ],
            "  interval: 1m\n  path: ./\n  prune: true\n",
        )
        .unwrap();
    ready_at(c, name, &first);
    let scale = |n: &str| {
        c.kubectl(&[
            "-n",
            FLUX_NS,
            "scale",
            "deployment",
            "image-reflector-controller",
            &format!("--replicas={n}"),
        ])
        .unwrap();
    };
    scale("0");
    eventually(T, "image-reflector-controller has 0 replicas", || {
        let d = c.get_json(&[
            "-n",
            FLUX_NS,
            "get",
            "deployment",
            "image-reflector-controller",
        ]);
        (d["status"]["replicas"].as_i64().unwrap_or(0) == 0).then_some(())
    });
    c.apply_yaml(&format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec: {{image: \"{image}\", interval: 1m, insecure: true}}\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec:\n  imageRepositoryRef: {{name: {name}}}\n  policy: {{semver: {{range: \">=1.0.0\"}}}}\n"
    ))
    .unwrap();
    let source = format!("gitrepository/{name}");
    let (code, r, err) = verify(c.kubeconfig(), &["--source", &source]);
    let img = link(&r, "images");
    assert_eq!(img["verdict"], "broken", "{r:#}\n{err}");
    assert_eq!(code, 1, "{r:#}\n{err}");
    let ev = img["evidence"].as_array().unwrap();
    let dep = ev
        .iter()
        .find(|e| e["object"] == "Deployment/flux-system/image-reflector-controller")
        .unwrap_or_else(|| panic!("{img:#}"));
    assert_eq!(dep["verdict"], "broken");
    assert!(
        dep["detail"]
            .as_str()
            .unwrap()
            .contains("image-reflector-controller is not running (0 replicas)"),
        "{dep:#}"
    );
    let pol = ev
        .iter()
        .find(|e| e["object"] == format!("ImagePolicy/{FLUX_NS}/{name}"))
        .unwrap_or_else(|| panic!("{img:#}"));
    assert_eq!(pol["verdict"], "broken", "{img:#}");
    assert!(
        img["fix"]
            .as_str()
            .unwrap()
            .contains("scale deployment/image-reflector-controller --replicas=1"),
        "{img:#}"
    );
    scale("1");
    eventually(T, "the real ImagePolicy selects 1.0.0", || {
        let p = c.get_json(&["-n", FLUX_NS, "get", "imagepolicy", name]);
        (p["status"]["latestRef"]["tag"] == "1.0.0").then_some(())
    });
    let (code, r, err) = verify(c.kubeconfig(), &["--source", &source]);
    let img = link(&r, "images");
    assert_eq!(img["verdict"], "ok", "{r:#}\n{err}");
    assert!(
        !img["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["object"] == "Deployment/flux-system/image-reflector-controller"),
        "{img:#}"
    );
    assert_eq!(code, 0, "{r:#}\n{err}");
}

/// The ImageUpdateAutomation `name` of fleet `name` (flux-system, pushing to main, Setters
/// over ./deploy) with commit `template`.
fn automation_yaml(name: &str, template: &str) -> String {
    format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec:\n  interval: 1m\n  sourceRef: {{kind: GitRepository, name: {name}}}\n  git:\n    checkout: {{ref: {{branch: main}}}}\n    commit:\n      author: {{name: fluxcdbot, email: fluxcdbot@users.noreply.github.com}}\n      messageTemplate: '{template}'\n    push: {{branch: main}}\n  update: {{path: ./deploy, strategy: Setters}}\n"
    )
}

/// Catalogue row 6 for real (issue 40 item 2): a commit template using the removed `.Updated`
/// field. The real image-automation-controller v1.2.0 refuses it (Stalled and Ready=False
/// RemovedTemplateField, `template uses removed '.Updated' field`) as soon as it has a new
/// tag to commit. Link 4 is `broken` naming the ImageUpdateAutomation with the controller's
/// message and the fix (`.Changed`, `kubectl markercheck`), and the container behind its
/// latestRef is `broken` too (nothing will commit it), not waiting; exit 1. Before the
/// automation exists the link is ok (the workload runs what the policy selected then), and
/// with `.Changed` the real controller commits and its member is `ok`.
#[test]
fn a_removed_template_field_breaks_the_images_link_with_the_fix() {
    let c = &cluster();
    let name = "gv-updated";
    let oci = c
        .oci()
        .expect("the OCI registry runs with image-reflector-controller");
    oci.push("gv/tmpl", &["1.0.0"]).unwrap();
    let image = format!("{}/gv/tmpl", oci.host());
    c.registry().add(&format!("{image}:*"));
    let app = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n  namespace: {name}\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: app}}\n  template:\n    metadata:\n      labels: {{app: app}}\n    spec:\n      containers:\n        - name: app\n          image: {image}:1.0.0 # {{\"$imagepolicy\": \"{FLUX_NS}:{name}\"}}\n"
    );
    let first = c
        .fleet(
            name,
            &[("ns.yaml", &namespace(name)), ("deploy/app.yaml", &app)],
            "  interval: 1m\n  path: ./\n  prune: true\n",
        )
        .unwrap();
    ready_at(c, name, &first);
    c.apply_yaml(&format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec: {{image: \"{image}\", interval: 1m, insecure: true}}\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec:\n  imageRepositoryRef: {{name: {name}}}\n  policy: {{semver: {{range: \">=1.0.0\"}}}}\n"
    ))
    .unwrap();
    eventually(T, "the real ImagePolicy selects 1.0.0", || {
        let p = c.get_json(&["-n", FLUX_NS, "get", "imagepolicy", name]);
        (p["status"]["latestRef"]["tag"] == "1.0.0").then_some(())
    });
    // A new tag, then the automation with the removed field.
    oci.push("gv/tmpl", &["1.1.0"]).unwrap();
    c.kubectl(&[
        "-n",
        FLUX_NS,
        "annotate",
        "--overwrite",
        "imagerepository",
        name,
        &format!("reconcile.fluxcd.io/requestedAt={}", jiff::Timestamp::now()),
    ])
    .unwrap();
    eventually(T, "the real ImagePolicy selects 1.1.0", || {
        let p = c.get_json(&["-n", FLUX_NS, "get", "imagepolicy", name]);
        (p["status"]["latestRef"]["tag"] == "1.1.0").then_some(())
    });
    c.apply_yaml(&automation_yaml(
        name,
        "{{ range .Updated.Images }}{{ println . }}{{ end }}",
    ))
    .unwrap();
    let message = eventually(T, "the real automation refuses the template", || {
        let a = c.get_json(&["-n", FLUX_NS, "get", "imageupdateautomation", name]);
        let r = condition(&a, "Ready");
        (r["status"] == "False").then(|| r["message"].as_str().unwrap_or_default().to_string())
    });
    eprintln!("row 6, the real Ready message: {message}");
    assert!(
        message.starts_with("template uses removed '.Updated' field"),
        "{message}"
    );
    assert_eq!(
        c.git().head(&format!("org/{name}"), "main").unwrap(),
        first,
        "nothing was pushed"
    );
    let source = format!("gitrepository/{name}");
    let (code, r, err) = verify(c.kubeconfig(), &["--source", &source]);
    assert_eq!(code, 1, "{r:#}\n{err}");
    let img = link(&r, "images");
    assert_eq!(img["verdict"], "broken", "{r:#}");
    let ev = img["evidence"].as_array().unwrap();
    let aut = ev
        .iter()
        .find(|e| e["object"] == format!("ImageUpdateAutomation/{FLUX_NS}/{name}"))
        .unwrap_or_else(|| panic!("{img:#}"));
    assert_eq!(aut["verdict"], "broken", "{aut:#}");
    assert!(
        aut["detail"].as_str().unwrap().contains(&message),
        "{aut:#}"
    );
    let fix = aut["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("use .Changed") && fix.contains("kubectl markercheck"),
        "{fix}"
    );
    let behind = ev
        .iter()
        .find(|e| {
            e["object"]
                == format!("ImagePolicy/{FLUX_NS}/{name} Deployment/{name}/app container app")
        })
        .unwrap_or_else(|| panic!("{img:#}"));
    assert_eq!(behind["verdict"], "broken", "{behind:#}");
    assert!(
        behind["detail"]
            .as_str()
            .unwrap()
            .contains("the automation will not commit it"),
        "{behind:#}"
    );
    let repo = ev
        .iter()
        .find(|e| e["object"] == format!("ImageRepository/{FLUX_NS}/{name}"))
        .unwrap_or_else(|| panic!("{img:#}"));
    assert_eq!(repo["verdict"], "ok", "{repo:#}");
    assert!(
        repo["detail"].as_str().unwrap().contains("2 tags"),
        "{repo:#}"
    );

    // The fix it names: .Changed. The real controller commits 1.1.0.
    c.apply_yaml(&automation_yaml(
        name,
        "{{ range .Changed.Changes }}{{ println .NewValue }}{{ end }}",
    ))
    .unwrap();
    let pushed = eventually(T, "the real automation pushes with .Changed", || {
        let head = c.git().head(&format!("org/{name}"), "main").ok()?;
        (head != first).then_some(head)
    });
    eventually(T, "link 4 no longer names the automation broken", || {
        let (_, r, _) = verify(c.kubeconfig(), &["--source", &source]);
        let img = link(&r, "images");
        let aut = img["evidence"]
            .as_array()?
            .iter()
            .find(|e| e["object"] == format!("ImageUpdateAutomation/{FLUX_NS}/{name}"))?
            .clone();
        (aut["verdict"] == "ok").then_some(())
    });
    eprintln!("row 6 fixed: the automation pushed {pushed}");
}

/// The failure catalogue's row 2 on link 1, with a bearer token (source-controller's
/// `bearerToken` key): the token the Secret holds is revoked on the Git server while Flux
/// holds it; the real source-controller v1.9.6 fails the fetch with "authentication
/// required", and link 1 is broken naming the Secret, its key and the rotation (a new,
/// uniquely named token in that key; never revoke the one in use), not "kubectl describe; flux
/// reconcile", a refetch that fails the same way. Then the fix as it says: the chain holds.
#[test]
fn a_revoked_bearer_token_names_the_secret_key_and_the_rotation() {
    let c = &cluster();
    // Its own namespace: its failing source (and the Secret read for it) is in no other
    // test's run (the request budget's).
    let (ns, name) = ("gv-revoked", "gv-revoked");
    let user = crate::git_user().name;
    let f = c
        .auth_fleet(
            ns,
            name,
            &[("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gv-revoked\n  namespace: gv-revoked\ndata: {a: b}\n")],
            "  interval: 10m\n  path: ./\n  prune: true\n",
            realcluster::GitAuth::Bearer,
        )
        .unwrap();
    crate::ready_at_in(c, ns, name, &f.sha);
    assert!(c.git().revoke_named_token(&user, &f.token_name));
    crate::fetch_source_now_in(c, ns, name);
    let ready = eventually(
        T,
        "the real source-controller refuses the revoked token",
        || {
            let g = c.get_json(&["-n", ns, "get", "gitrepository", name]);
            let r = condition(&g, "Ready");
            (r["status"] == "False"
                && r["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("authentication required")))
            .then_some(r)
        },
    );
    let message = ready["message"].as_str().unwrap().to_owned();
    let want = format!(
        "failed to checkout and determine revision: unable to list remote for '{}': authentication required",
        f.url
    );
    assert!(
        message.starts_with(&want),
        "{message:?}\nwant prefix {want:?}"
    );
    assert!(
        c.git()
            .requests()
            .iter()
            .any(|q| q.repo.as_deref() == Some("org/gv-revoked")
                && q.status == 401
                && q.authorization.as_deref() == Some("Bearer")),
        "source-controller sent the bearer token and got 401"
    );

    let (code, r, err) = verify(
        c.kubeconfig(),
        &["--source", &format!("gitrepository/{name}"), "-n", ns],
    );
    assert_eq!(code, 1, "{r:#}\n{err}");
    assert_eq!(r["firstBroken"], "source", "{r:#}");
    let e = &link(&r, "source")["evidence"][0];
    assert_eq!(e["verdict"], "broken", "{e:#}");
    let detail = e["detail"].as_str().unwrap();
    let fix = e["fix"].as_str().unwrap();
    assert!(
        detail.contains(&message),
        "the real message is quoted: {detail}"
    );
    assert!(
        detail.contains(&format!(
            "the Git server refused the token in Secret {ns}/{} key `bearerToken` (sent as `Authorization: Bearer`)",
            f.secret
        )),
        "{detail}"
    );
    assert!(fix.contains("mint a new, uniquely named token"), "{fix}");
    assert!(fix.contains("do not revoke the one in use first"), "{fix}");
    assert!(
        fix.contains(&format!(
            "kubectl -n {ns} patch secret {} --type merge -p '{{\"stringData\":{{\"bearerToken\":\"<new token>\"}}}}'",
            f.secret
        )),
        "{fix}"
    );
    assert!(
        fix.contains(&format!("then flux reconcile source git {name} -n {ns};")),
        "{fix}"
    );
    assert!(!r.to_string().contains(&f.token), "no token value is shown");

    // The fix as it says: a new token in bearerToken, then the refetch.
    let new = c.git().mint_token(&user, &format!("{name}-2")).unwrap();
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "secret",
        &f.secret,
        "--type",
        "merge",
        "-p",
        &format!("{{\"stringData\":{{\"bearerToken\":\"{new}\"}}}}"),
    ])
    .unwrap();
    crate::fetch_source_now_in(c, ns, name);
    eventually(T, "the source is Ready with the new token", || {
        let g = c.get_json(&["-n", ns, "get", "gitrepository", name]);
        (condition(&g, "Ready")["status"] == "True").then_some(())
    });
    let (code, r, err) = verify(
        c.kubeconfig(),
        &["--source", &format!("gitrepository/{name}"), "-n", ns],
    );
    assert_eq!(link(&r, "source")["verdict"], "ok", "{r:#}\n{err}");
    assert_eq!(code, 0, "{r:#}\n{err}");
}

/// Failure catalogue row 5, live: a Python app that reads `REDIS_PORT` as a port number,
/// beside a Service named `redis` in its namespace. The node agent starts the container from
/// its own spec with the Service link variables the kubelet injects (pkg/kubelet/envvars:
/// `REDIS_PORT=tcp://<ClusterIP>:6379`), so the host's real python3 fails with
/// `ValueError: invalid literal for int() with base 10: 'tcp://...'`; the kubelet's
/// CrashLoopBackOff follows, and the real kustomize-controller's health check holds on it.
/// `kubectl gitops verify` and `kubectl unstick` name the variable, its Service and
/// `enableServiceLinks: false` as the fix; pushing that fix makes the real controller's check
/// pass (the fix is proven, not just named).
#[test]
fn service_link_collision_is_named_with_its_fix() {
    let c = &cluster();
    let name = "gv-svclink";
    let svc = realcluster::node::redis_service(name);
    let app = |links: &str| realcluster::node::redis_client_app(name, links);
    let spec = "  interval: 100h\n  path: ./\n  prune: true\n  wait: true\n  timeout: 1m\n";
    c.fleet(
        name,
        &[
            ("ns.yaml", &namespace(name)),
            ("redis.yaml", &svc),
            ("api.yaml", &app("")),
        ],
        spec,
    )
    .unwrap();
    // The kubelet's view of the crash: CrashLoopBackOff after an exit 1, restarts counted.
    let pod = eventually(T, "the api container crash-loops", || {
        let pods = c.get_json(&["-n", name, "get", "pods"]);
        pods["items"].as_array()?.iter().find_map(|p| {
            let cs = &p["status"]["containerStatuses"][0];
            (cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
                && cs["lastState"]["terminated"]["exitCode"] == 1
                && cs["restartCount"].as_i64() >= Some(1))
            .then(|| p["metadata"]["name"].as_str().unwrap().to_owned())
        })
    });
    let ip = c.get_json(&["-n", name, "get", "service", "redis"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_owned();
    // The real python3's message, with the value the kubelet's rule gives REDIS_PORT.
    let log = c
        .kubectl(&["-n", name, "logs", &pod, "--previous"])
        .unwrap();
    let want = format!("ValueError: invalid literal for int() with base 10: 'tcp://{ip}:6379'");
    assert!(log.contains(&want), "{log}");

    let (code, r, err) = verify(
        c.kubeconfig(),
        &["--source", &format!("gitrepository/{name}")],
    );
    assert_eq!(code, 1, "{r:#}\n{err}");
    let w = link(&r, "workloads");
    assert_eq!(w["verdict"], "broken", "{r:#}");
    let ev = &w["evidence"][0];
    let detail = ev["detail"].as_str().unwrap();
    assert!(
        detail.contains("CrashLoopBackOff")
            && detail.contains(&format!("REDIS_PORT = tcp://{ip}:6379"))
            && detail.contains(&format!("Service {name}/redis")),
        "{ev:#}"
    );
    assert!(
        ev["fix"]
            .as_str()
            .unwrap()
            .starts_with("set spec.enableServiceLinks: false"),
        "{ev:#}"
    );

    let out = Command::new(crate::bin!("kubectl-unstick"))
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .arg(format!("ks/{name}"))
        .args(["-n", FLUX_NS, "-o", "json"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let u: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let text = u.to_string();
    assert!(
        text.contains("\"serviceLink\"")
            && text.contains("\"variable\":\"REDIS_PORT\"")
            && text.contains(&format!("\"service\":\"{name}/redis\"")),
        "{u:#}"
    );
    assert!(text.contains("set spec.enableServiceLinks: false"), "{u:#}");

    // The fix, in Git: the real health check passes at that revision.
    let sha = c
        .push(
            name,
            &[("api.yaml", &app("      enableServiceLinks: false\n"))],
            "api: enableServiceLinks: false",
        )
        .unwrap();
    crate::fetch_source_now(c, name);
    ready_at(c, name, &sha);
}

/// A crash loop caught between two restarts: a Python app that serves for 20 s, then exits 1
/// ("lost its connection"). Between its back-offs the kubelet's status says Running and ready,
/// the real deployment controller counts the replica available, and kstatus reads the
/// Deployment Current, which is what the real kustomize-controller's health check passes on.
/// `kubectl gitops verify` must not say `ok` then: the container ran again after a failed
/// run less than the kubelet's crash-loop window ago (600 s), with two restarts or more, so
/// the workloads link is `broken`, naming the last exit and `kubectl logs --previous`.
#[test]
fn a_crash_loop_caught_running_between_restarts_is_broken_not_ok() {
    let c = &cluster();
    let name = "gv-restarts";
    let app = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
  namespace: {name}
spec:
  replicas: 1
  progressDeadlineSeconds: 3600
  selector:
    matchLabels: {{app: worker}}
  template:
    metadata:
      labels: {{app: worker}}
    spec:
      containers:
      - name: worker
        image: python:3.12-slim
        command:
        - python3
        - -c
        - |
          import sys, time
          print('serving', flush=True)
          time.sleep(20)
          print('lost the connection to the queue', flush=True)
          sys.exit(1)
"
    );
    let spec = "  interval: 100h\n  path: ./\n  prune: true\n  wait: true\n  timeout: 1m\n";
    c.fleet(
        name,
        &[("ns.yaml", &namespace(name)), ("worker.yaml", &app)],
        spec,
    )
    .unwrap();
    // The kubelet's status of one container: (restartCount, running now, last exit code).
    let container = || -> Option<(i64, bool, Option<i64>)> {
        let pods = c.get_json(&["-n", name, "get", "pods"]);
        let cs = &pods["items"].as_array()?.first()?["status"]["containerStatuses"][0];
        Some((
            cs["restartCount"].as_i64()?,
            cs["state"]["running"].is_object() && cs["ready"] == true,
            cs["lastState"]["terminated"]["exitCode"].as_i64(),
        ))
    };
    // Up to three running windows: the verdict is read while the container runs between
    // restarts (the same run before and after, so the window held during the read).
    let mut seen_running = None;
    for _ in 0..3 {
        let before = eventually(T, "the worker runs again after its second exit", || {
            container().filter(|(n, running, code)| *n >= 2 && *running && *code == Some(1))
        });
        // What the health check reads: the real deployment controller counts it available.
        let d = c.get_json(&["-n", name, "get", "deployment", "worker"]);
        let available = d["status"]["availableReplicas"].as_i64() == Some(1);
        let (code, r, err) = verify(
            c.kubeconfig(),
            &["--source", &format!("gitrepository/{name}")],
        );
        let after = container();
        if available && after == Some(before) {
            seen_running = Some((code, r, err, before.0));
            break;
        }
    }
    let (code, r, err, restarts) =
        seen_running.expect("verify never ran inside a running window of the worker");
    assert_eq!(code, 1, "{r:#}\n{err}");
    let w = link(&r, "workloads");
    assert_eq!(w["verdict"], "broken", "{r:#}");
    let ev = &w["evidence"][0];
    let detail = ev["detail"].as_str().unwrap();
    assert!(
        detail.contains("a crash loop between two restarts")
            && detail.contains(unstick::diagnose::RECENT_RESTART)
            && detail.contains(&format!(
                "restarted {restarts} time(s), the last run exited 1 (Error)"
            )),
        "{ev:#}"
    );
    assert!(
        ev["fix"].as_str().unwrap().contains("-c worker --previous"),
        "{ev:#}"
    );
}
