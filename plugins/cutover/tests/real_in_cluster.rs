//! `kubectl cutover --verify-in-cluster` on the real cluster (tests/realcluster): the REAL
//! binary against the real kube-apiserver, a GitRepository and Kustomization reconciled by the
//! real source-controller and kustomize-controller from the old Git server (HTTPS with its own
//! CA, basic auth, on 127.0.0.1 where the controllers run as host processes), and the probe
//! Job run by the real job controller whose pod the node agent's pod runtime (the twin's
//! PodExec as a client of this apiserver) runs FOR REAL: alpine/git (BusyBox and host git) in
//! the pod network namespace, whose resolver is dnsmasq built from the real
//! `kube-system/coredns` ConfigMap and upstream records; the new Git server listens on the pod
//! network link's host address at port 443, so the probe's `git ls-remote
//! https://<host>/org/fleet.git` goes through DNS, TCP, TLS and HTTP auth. The probe's log
//! comes back through the real pods/log. The plugin runs as a workstation whose /etc/hosts
//! knows the name (a private mount namespace), so split DNS is real too.
//!
//! The tests share the one link address (the new server binds its port 443), so they run one
//! at a time (a lock). Skips (with a message) when the pod runtime cannot run here.

mod common;

use std::time::Duration;

use common::*;
use realcluster::Cluster;
use realcluster::testkit::{condition, eventually};
use serde_json::{Value, json};
use twin::git::{GitServer, GitServerOptions};
use twin::testkit::{PluginRun, run_command};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn cluster() -> Option<&'static Cluster> {
    let m = twin::podexec::missing_prerequisites();
    if !m.is_empty() {
        eprintln!("SKIPPED: the pod runtime needs {}", m.join(", "));
        return None;
    }
    Some(Cluster::shared().unwrap_or_else(|e| panic!("{e}")))
}

/// One test's world: GitRepository + Kustomization `name` in flux-system, reconciled by the
/// real controllers from `old`; `new` on the pod network as `https://<host>/org/fleet.git`.
struct RealWorld {
    c: &'static Cluster,
    name: String,
    host: String,
    old: GitServer,
    new: GitServer,
    head: String,
    addr: String,
    _work: tempfile::TempDir,
}

impl RealWorld {
    /// `cluster_knows_host`: the node's upstream resolver answers `host` with the link
    /// address (else the name is NXDOMAIN in the cluster, known only to the workstation).
    fn start(c: &'static Cluster, name: &str, host: &str, cluster_knows_host: bool) -> RealWorld {
        let pe = c.podexec().expect("pod runtime");
        let addr = pe.host_address();
        if cluster_knows_host {
            c.set_upstream(host, &[&addr.to_string()]).unwrap();
        } else {
            c.set_upstream(host, &[]).unwrap();
        }
        let old = GitServer::start(GitServerOptions::default()).unwrap();
        let new = GitServer::start(GitServerOptions {
            dns_names: vec![host.into()],
            listen: addr.into(),
            http_port: 80,
            https_port: 443,
            ..Default::default()
        })
        .unwrap();
        for s in [&old, &new] {
            s.create_repo("org/fleet", "main").unwrap();
        }
        old.set_auth("org/fleet", USER, &[TOKEN]).unwrap();
        new.set_auth("org/fleet", USER, &[TOKEN, NEW_TOKEN])
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        git(w, &["init", "-q", "-b", "main"], &[]);
        let sync = format!(
            "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: {name}
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  secretRef:
    name: {name}
  url: {}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {name}
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./clusters/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: {name}
",
            old.url_https("org/fleet")
        );
        std::fs::create_dir_all(w.join("clusters/prod/flux-system")).unwrap();
        std::fs::write(w.join("clusters/prod/flux-system/gotk-sync.yaml"), &sync).unwrap();
        std::fs::write(
            w.join("clusters/prod/flux-system/kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- gotk-sync.yaml\n",
        )
        .unwrap();
        std::fs::write(
            w.join("clusters/prod/kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- flux-system\n- apps.yaml\n",
        )
        .unwrap();
        std::fs::write(
            w.join("clusters/prod/apps.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: release-{name}\n  namespace: flux-system\ndata:\n  n: \"1\"\n"),
        )
        .unwrap();
        git(w, &["add", "-A"], &[]);
        git(w, &["commit", "-q", "-m", "release 1"], &[]);
        let head = git(w, &["rev-parse", "HEAD"], &[]);
        push(w, &old, &old.url_https("org/fleet"), &head, TOKEN);
        push(w, &new, &new.url_https("org/fleet"), &head, TOKEN);
        let world = RealWorld {
            c,
            name: name.into(),
            host: host.into(),
            old,
            new,
            head,
            addr: addr.to_string(),
            _work: work,
        };
        world.secret(name, TOKEN);
        c.apply_yaml(&sync).unwrap();
        // The real controllers fetch and apply it (gotk-sync.yaml applies itself, so the
        // GitRepository carries kustomize-controller's owner labels as after a bootstrap).
        let rev = format!("main@sha1:{}", world.head);
        eventually(
            Duration::from_secs(120),
            "Kustomization applied the head",
            || {
                let k = c.kustomization(name);
                (condition(&k, "Ready")["status"] == "True"
                    && k["status"]["lastAppliedRevision"] == json!(rev))
                .then_some(())
            },
        );
        world
    }

    /// A basic-auth Secret `flux-system/<secret>` with both servers' CAs as `ca.crt`.
    fn secret(&self, secret: &str, token: &str) {
        let ca = format!("{}{}", self.old.ca_pem(), self.new.ca_pem());
        let s = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": "flux-system"},
            "stringData": {"username": USER, "password": token, "ca.crt": ca}});
        self.c.apply_yaml(&s.to_string()).unwrap();
    }

    fn to(&self) -> String {
        self.new.url_https_host("org/fleet", &self.host)
    }

    async fn run(&self, args: &[&str]) -> PluginRun {
        let to = self.to();
        let target = format!("gitrepository/{}", self.name);
        let mut all = vec![target.as_str(), "--to", &to, "--dry-run"];
        all.extend_from_slice(args);
        let hosts = vec![(self.addr.clone(), self.host.clone())];
        let (cmd, _hosts) = workstation_command(&hosts, self.c.kubeconfig(), &all);
        let r = run_command(cmd, RUN_TIMEOUT).await;
        if std::env::var_os("CUTOVER_SHOW").is_some() {
            eprintln!("$ kubectl cutover {}\n{}", all.join(" "), r.all());
        }
        r
    }

    /// No token in the output; no cutover probe Job or pod left (the binary deletes the Job,
    /// the real garbage collector its pod).
    fn assert_clean(&self, r: &PluginRun) {
        r.assert_no_secrets();
        eventually(Duration::from_secs(60), "no cutover probe left", || {
            let v = self.c.get_json(&[
                "-n",
                "flux-system",
                "get",
                "jobs,pods",
                "-l",
                "app.kubernetes.io/managed-by=kubectl-cutover",
            ]);
            let left: Vec<&Value> = v["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
                .collect();
            left.is_empty().then_some(())
        });
    }
}

fn check<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} check in {v:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_head_seen_from_inside_the_real_cluster() {
    let Some(c) = cluster() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let w = RealWorld::start(c, "fleet-same-head", "gitea.prod.example.dev", true);
    let r = w.run(&["--verify-in-cluster", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["kind"], "CutoverReport");
    assert_eq!(v["mode"], "dry-run");
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["host"], w.host);
    assert_eq!(inc["dnsStatus"], "resolved");
    assert_eq!(inc["addresses"], json!([w.addr]));
    assert_eq!(inc["workstationAddresses"], json!([w.addr]));
    assert_eq!(inc["dnsDiffers"], false);
    assert_eq!(inc["tls"], "ok");
    assert_eq!(inc["caSource"], "image+secret");
    assert_eq!(inc["auth"], "ok");
    assert_eq!(inc["authScheme"], "basic");
    // The head the probe saw equals the revision the REAL source-controller fetched.
    assert_eq!(inc["head"], json!(w.head));
    assert_eq!(inc["matchesCluster"], true);
    assert_eq!(check(&v, "in-cluster")["result"], "ok");
    // The request really reached the new server from the pod network, with basic auth.
    let from_pod =
        w.new.requests().into_iter().any(|q| {
            q.user.as_deref() == Some(USER) && q.authorization.as_deref() == Some("Basic")
        });
    assert!(from_pod, "{:?}", w.new.requests());
    w.assert_clean(&r);

    // The table shows the same.
    let t = w.run(&["--verify-in-cluster"]).await;
    assert_eq!(t.code, 0, "{}", t.all());
    assert!(
        t.stdout.contains(&format!(
            "{} -> {} in the cluster; workstation: {}",
            w.host, w.addr, w.addr
        )),
        "{}",
        t.stdout
    );
    assert!(
        t.stdout.contains(&format!(
            "head  {} (== the commit the cluster runs)",
            w.head
        )),
        "{}",
        t.stdout
    );
    w.assert_clean(&t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_dns_is_refused_with_both_answers() {
    let Some(c) = cluster() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    // The cluster's upstream does not know the name; the workstation does.
    let w = RealWorld::start(c, "fleet-split", "git-split.prod.example.dev", false);
    let r = w.run(&["--verify-in-cluster"]).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let want = format!(
        "split DNS: {} resolves on this workstation ({}) but not from a pod in flux-system (NXDOMAIN)",
        w.host, w.addr
    );
    assert!(r.stdout.contains(&want), "want {want:?} in\n{}", r.all());
    assert!(r.stdout.contains("ok   remote"), "{}", r.stdout);
    assert!(r.stdout.contains("FAIL in-cluster"), "{}", r.stdout);
    w.assert_clean(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_token_is_rejected_inside_the_real_cluster() {
    let Some(c) = cluster() else { return };
    let _one = ONE_AT_A_TIME.lock().await;
    let w = RealWorld::start(c, "fleet-revoked", "git-revoked.prod.example.dev", true);
    assert!(w.new.revoke_token("org/fleet", TOKEN));
    let r = w.run(&["--verify-in-cluster", "-o", "json"]).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["tls"], "ok");
    assert_eq!(inc["auth"], "failed");
    assert_eq!(inc["authScheme"], "basic");
    assert!(inc["head"].is_null());
    let m = check(&v, "in-cluster")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(m.contains("authentication required"), "{m}");
    assert!(
        w.new
            .requests()
            .iter()
            .any(|q| q.status == 401 && q.authorization.as_deref() == Some("Basic")),
        "{:?}",
        w.new.requests()
    );
    w.assert_clean(&r);

    // A rotated token in a new Secret passes from inside too.
    w.secret("fleet-revoked-rotated", NEW_TOKEN);
    let r = w
        .run(&["--verify-in-cluster", "--secret", "fleet-revoked-rotated"])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("ok   in-cluster"), "{}", r.stdout);
    w.assert_clean(&r);
}
