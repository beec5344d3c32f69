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
//! Each test has its own namespace (GitRepository, Kustomization, Secrets, probe Job) and Git
//! host name, and its new server its own port on the link address, so the tests run in
//! parallel; the two that change the probe image's CA bundle (one per runtime) hold a lock the
//! others share. Skips (with a message) when the pod runtime cannot run here.

use std::time::Duration;

use super::common::*;
use realcluster::testkit::eventually;
use serde_json::{Value, json};
use twin::git::{GitServer, GitServerOptions};
use twin::testkit::{PluginRun, run_command};

/// Held shared by every test, exclusively by the tests that change the image CA bundle.
static IMAGE_CA: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// This module's cluster, leased (started on first use, stopped after its last lease) with the default options; not
/// [`super::common::execute_cluster`], which [`super::execute`]'s tests use: they stop source-controller
/// (SIGSTOP) and scale kustomize-controller to 0, which the probes here must never meet.
/// `None` (with a message) when the pod runtime cannot run here.
fn cluster() -> Option<realcluster::Lease> {
    static PROBES: realcluster::ClusterCell = realcluster::ClusterCell::new();
    let m = twin::podexec::missing_prerequisites();
    if !m.is_empty() {
        eprintln!("SKIPPED: the pod runtime needs {}", m.join(", "));
        return None;
    }
    Some(crate::group_cluster(&PROBES))
}

/// One test's world: GitRepository + Kustomization `name` in namespace `name`, reconciled by the
/// real controllers from `old`; `new` on the pod network as `https://<host>/org/fleet.git`.
struct RealWorld {
    c: realcluster::Lease,
    name: String,
    host: String,
    old: GitServer,
    new: GitServer,
    head: String,
    addr: String,
    _work: tempfile::TempDir,
    /// `kubectl get -w` of the cutover probe pods and Jobs (every version), for the token
    /// check; killed on drop.
    watches: Vec<(std::process::Child, std::path::PathBuf)>,
}

impl Drop for RealWorld {
    fn drop(&mut self) {
        for (child, _) in &mut self.watches {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl RealWorld {
    /// `cluster_knows_host`: the node's upstream resolver answers `host` with the link
    /// address (else the name is NXDOMAIN in the cluster, known only to the workstation).
    fn start(c: realcluster::Lease, name: &str, host: &str, cluster_knows_host: bool) -> RealWorld {
        let listen = c.podexec().expect("pod runtime").host_address();
        RealWorld::start_listening(c.clone(), name, host, cluster_knows_host, listen.into())
    }

    /// [`RealWorld::start`] with the new server bound to `listen` (e.g. `0.0.0.0`: also on this
    /// machine's loopback, as a `kubectl port-forward` would serve it); the cluster's DNS still
    /// answers `host` with the pod-network address.
    fn start_listening(
        c: realcluster::Lease,
        name: &str,
        host: &str,
        cluster_knows_host: bool,
        listen: std::net::IpAddr,
    ) -> RealWorld {
        let pe = c.podexec().expect("pod runtime");
        let addr = pe.host_address();
        if cluster_knows_host {
            c.set_upstream(host, &[&addr.to_string()]).unwrap();
        } else {
            c.set_upstream(host, &[]).unwrap();
        }
        let (old, new) = fleet_servers(GitServerOptions {
            dns_names: vec![host.into()],
            listen,
            ..Default::default()
        });
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        git(w, &["init", "-q", "-b", "main"], &[]);
        let sync = Sync {
            name,
            url: &old.url_https("org/fleet"),
            source_interval: "1m0s",
            root_path: "./clusters/prod",
            retry_interval: None,
        }
        .yaml();
        write_bootstrap_layout(w, &sync);
        std::fs::write(
            w.join("clusters/prod/apps.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: release-{name}\n  namespace: {name}\ndata:\n  n: \"1\"\n"),
        )
        .unwrap();
        git(w, &["add", "-A"], &[]);
        git(w, &["commit", "-q", "-m", "release 1"], &[]);
        let head = git(w, &["rev-parse", "HEAD"], &[]);
        push(w, &old, &old.url_https("org/fleet"), &head, TOKEN);
        push(w, &new, &new.url_https("org/fleet"), &head, TOKEN);
        let world = RealWorld {
            c: c.clone(),
            name: name.into(),
            host: host.into(),
            old,
            new,
            head,
            addr: addr.to_string(),
            _work: work,
            watches: Vec::new(),
        };
        let _ = c.kubectl(&["create", "namespace", name]);
        world.secret(name, TOKEN);
        let mut world = world;
        for kind in ["pods", "jobs"] {
            let file = world._work.path().join(format!("{kind}.watch.json"));
            let out = std::fs::File::create(&file).unwrap();
            let child = std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(c.kubeconfig())
                .args([
                    "-n",
                    name,
                    "get",
                    kind,
                    "-l",
                    "app.kubernetes.io/managed-by=kubectl-cutover",
                    "-w",
                    "-o",
                    "json",
                ])
                .stdout(out)
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            world.watches.push((child, file));
        }
        c.apply_yaml(&sync).unwrap();
        // The real controllers fetch and apply it (gotk-sync.yaml applies itself, so the
        // GitRepository carries kustomize-controller's owner labels as after a bootstrap).
        wait_root_applied(
            &c,
            name,
            &format!("main@sha1:{}", world.head),
            Duration::from_secs(120),
        );
        world
    }

    /// A basic-auth Secret `<namespace>/<secret>` with both servers' CAs as `ca.crt`.
    fn secret(&self, secret: &str, token: &str) {
        let ca = format!("{}{}", self.old.ca_pem(), self.new.ca_pem());
        self.secret_with(secret, token, Some(&ca));
    }

    /// A basic-auth Secret `<namespace>/<secret>` with `ca` as `ca.crt` (none: no such key).
    fn secret_with(&self, secret: &str, token: &str, ca: Option<&str>) {
        basic_auth_secret(&self.c, &self.name, secret, token, ca);
    }

    /// Makes the new server hold each response `secs` seconds (`0`: answer at once).
    fn slow_new_server(&self, secs: u64) {
        let fault = (secs > 0).then_some(twin::git::Fault::Delay(Duration::from_secs(secs)));
        self.new.set_fault("org/fleet", fault).unwrap();
    }

    /// The command for `kubectl cutover gitrepository/<name> --to <new> --dry-run <args>` on
    /// the workstation, with `kubeconfig`; keep the directory until it ended.
    fn command(
        &self,
        kubeconfig: &std::path::Path,
        args: &[&str],
    ) -> (tokio::process::Command, tempfile::TempDir) {
        let to = self.to();
        let target = format!("gitrepository/{}", self.name);
        let mut all = vec![target.as_str(), "-n", &self.name, "--to", &to, "--dry-run"];
        all.extend_from_slice(args);
        let hosts = vec![(self.addr.clone(), self.host.clone())];
        workstation_command(&hosts, kubeconfig, &all)
    }

    fn to(&self) -> String {
        self.new.url_https_host("org/fleet", &self.host)
    }

    async fn run(&self, args: &[&str]) -> PluginRun {
        self.run_as(self.c.kubeconfig(), args).await
    }

    async fn run_as(&self, kubeconfig: &std::path::Path, args: &[&str]) -> PluginRun {
        let (cmd, _hosts) = self.command(kubeconfig, args);
        let r = run_command(cmd, RUN_TIMEOUT).await;
        if std::env::var_os("CUTOVER_SHOW").is_some() {
            eprintln!("$ kubectl cutover {args:?}\n{}", r.all());
        }
        r
    }

    /// No token in the output or in any version of a probe pod or Job the apiserver served;
    /// no cutover probe Job or pod left (the binary deletes the Job, the real garbage
    /// collector its pod).
    fn assert_clean(&self, r: &PluginRun) {
        r.assert_no_secrets();
        for (_, file) in &self.watches {
            let seen = std::fs::read_to_string(file).unwrap_or_default();
            for t in [TOKEN, NEW_TOKEN] {
                assert!(
                    !seen.contains(t),
                    "token in a probe object: {}",
                    file.display()
                );
            }
        }
        eventually(Duration::from_secs(60), "no cutover probe left", || {
            let v = self.c.get_json(&[
                "-n",
                &self.name,
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
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(c.clone(), "fleet-same-head", "gitea.prod.example.dev", true);
    let _ca = IMAGE_CA.read().await;
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
    // The pod got the credentials only by reference (secretKeyRef), as the apiserver served it.
    let seen = std::fs::read_to_string(&w.watches[0].1).unwrap();
    assert!(
        seen.contains("\"secretKeyRef\"") && seen.contains("PROBE_GIT_"),
        "the probe pod as watched: {seen}"
    );
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
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let _ca = IMAGE_CA.read().await;
    // The cluster's upstream does not know the name; the workstation does.
    let w = RealWorld::start(
        c.clone(),
        "fleet-split",
        "git-split.prod.example.dev",
        false,
    );
    let r = w.run(&["--verify-in-cluster"]).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let want = format!(
        "split DNS: {} resolves on this workstation ({}) but not from a pod in {} (NXDOMAIN)",
        w.host, w.addr, w.name
    );
    assert!(r.stdout.contains(&want), "want {want:?} in\n{}", r.all());
    assert!(r.stdout.contains("ok   remote"), "{}", r.stdout);
    assert!(r.stdout.contains("FAIL in-cluster"), "{}", r.stdout);
    w.assert_clean(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_token_is_rejected_inside_the_real_cluster() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(
        c.clone(),
        "fleet-revoked",
        "git-revoked.prod.example.dev",
        true,
    );
    let _ca = IMAGE_CA.read().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_ca_in_the_cluster_names_the_secret_key() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(c.clone(), "fleet-no-ca", "git-no-ca.prod.example.dev", true);
    let _ca = IMAGE_CA.read().await;
    w.secret_with("fleet-no-ca-noca", TOKEN, None);
    let r = w
        .run(&[
            "--verify-in-cluster",
            "--secret",
            "fleet-no-ca-noca",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["dnsStatus"], "resolved");
    assert_eq!(inc["tls"], "failed");
    assert_eq!(inc["caSource"], "image");
    assert_eq!(inc["auth"], "not-reached");
    let ch = check(&v, "in-cluster");
    assert_eq!(ch["result"], "fail");
    let m = ch["message"].as_str().unwrap();
    assert!(m.contains("TLS verification failed in the cluster"), "{m}");
    assert!(
        m.contains("to secret fleet-no-ca/fleet-no-ca-noca under the key `ca.crt`"),
        "{m}"
    );
    w.assert_clean(&r);
}

/// go-git v5 configureTransport ADDS the secret's ca.crt to the system pool. The new server's
/// CA is in the probe image's system bundle (the pod runtime's image CA bundle, as a company
/// base image would carry it) and in the workstation's (SSL_CERT_FILE); the secret's ca.crt
/// is an unrelated CA (the old server's). Both checks pass; without the CA in the image the
/// probe is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_ca_adds_to_the_image_bundle_in_the_cluster() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(
        c.clone(),
        "fleet-image-ca",
        "git-image-ca.prod.example.dev",
        true,
    );
    let _ca = IMAGE_CA.write().await;
    w.secret_with("fleet-image-ca-unrelated", TOKEN, Some(w.old.ca_pem()));
    let pe = c.podexec().unwrap();
    pe.set_image_ca_bundle(Some(&format!(
        "{}{}",
        std::fs::read_to_string(twin::podexec::IMAGE_CA_BUNDLE).unwrap_or_default(),
        w.new.ca_pem()
    )))
    .unwrap();
    let (_d, system) = system_bundle_with(w.new.ca_pem());
    let args = [
        "--verify-in-cluster",
        "--secret",
        "fleet-image-ca-unrelated",
        "-o",
        "json",
    ];
    let (mut cmd, hosts) = w.command(c.kubeconfig(), &args);
    cmd.env("SSL_CERT_FILE", &system);
    let r = run_command(cmd, RUN_TIMEOUT).await;
    drop(hosts);
    pe.set_image_ca_bundle(None).unwrap();
    assert_eq!(r.code, 0, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(check(&v, "remote")["result"], "ok", "{v:#}");
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["tls"], "ok");
    assert_eq!(inc["caSource"], "image+secret");
    assert_eq!(inc["auth"], "ok");
    assert_eq!(inc["head"], json!(w.head));
    let m = check(&v, "in-cluster")["message"].as_str().unwrap();
    assert!(
        m.contains(
            "TLS verified (with the image's CA bundle plus secret fleet-image-ca/fleet-image-ca-unrelated ca.crt)"
        ),
        "{m}"
    );
    w.assert_clean(&r);

    // Control: an image whose bundle lacks the CA refuses the same secret in the cluster.
    let (mut cmd, hosts) = w.command(c.kubeconfig(), &args);
    cmd.env("SSL_CERT_FILE", &system);
    let r = run_command(cmd, RUN_TIMEOUT).await;
    drop(hosts);
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(check(&v, "remote")["result"], "ok", "{v:#}");
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["tls"], "failed");
    let m = check(&v, "in-cluster")["message"].as_str().unwrap();
    assert!(
        m.contains("neither the image's CA bundle nor the secret's ca.crt verifies this server"),
        "{m}"
    );
    w.assert_clean(&r);
}

/// Real RBAC: a ServiceAccount that may read but not create Jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cannot_create_jobs_exits_3_with_the_can_i_line() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(c.clone(), "fleet-rbac", "git-rbac.prod.example.dev", true);
    let _ca = IMAGE_CA.read().await;
    c.apply_yaml(
        "apiVersion: v1
kind: ServiceAccount
metadata: {name: cutover-readonly, namespace: flux-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cutover-readonly}
rules:
- {apiGroups: [\"\"], resources: [secrets, pods, pods/log], verbs: [get, list, watch]}
- {apiGroups: [source.toolkit.fluxcd.io, kustomize.toolkit.fluxcd.io], resources: [gitrepositories, kustomizations], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: cutover-readonly}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cutover-readonly}
subjects: [{kind: ServiceAccount, name: cutover-readonly, namespace: flux-system}]
",
    )
    .unwrap();
    let kc = c
        .service_account_kubeconfig("flux-system", "cutover-readonly", Some("flux-system"))
        .unwrap();
    let r = w.run_as(&kc, &["--verify-in-cluster"]).await;
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(
        r.stderr.contains("kubectl auth can-i create jobs"),
        "{}",
        r.stderr
    );
    w.assert_clean(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_image_without_git_is_refused() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(c.clone(), "fleet-nogit", "git-nogit.prod.example.dev", true);
    let _ca = IMAGE_CA.read().await;
    let r = w
        .run(&["--verify-in-cluster", "--probe-image", "alpine:3.22"])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout
            .contains("the probe image alpine:3.22 has no git: pass --probe-image"),
        "{}",
        r.stdout
    );
    w.assert_clean(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_during_the_probe_deletes_it_and_changes_nothing() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(
        c.clone(),
        "fleet-sigint",
        "git-sigint.prod.example.dev",
        true,
    );
    let _ca = IMAGE_CA.read().await;
    // A slow server: the probe's git ls-remote (two requests) takes at least 16 s, so the
    // SIGINT sent when its pod is Running always lands while it runs.
    w.slow_new_server(8);
    let (mut cmd, _hosts) = w.command(c.kubeconfig(), &["--verify-in-cluster"]);
    let child = cmd.spawn().unwrap();
    eventually(Duration::from_secs(120), "the probe pod runs", || {
        let pods = c.get_json(&[
            "-n",
            &w.name,
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/managed-by=kubectl-cutover",
        ]);
        pods["items"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p["status"]["phase"] == "Running"))
            .then_some(())
    });
    let r = twin::testkit::interrupt(child, RUN_TIMEOUT).await;
    w.slow_new_server(0);
    assert_eq!(r.code, 130, "{}", r.all());
    assert!(
        r.stderr
            .contains("interrupted by SIGINT: probe job fleet-sigint/cutover-"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("deleted; nothing was changed"),
        "{}",
        r.stderr
    );
    let gr = c.get_json(&["-n", &w.name, "get", "gitrepository", &w.name]);
    assert_eq!(gr["spec"]["url"], json!(w.old.url_https("org/fleet")));
    w.assert_clean(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_too_slow_for_the_probe_is_refused_not_hung() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(c.clone(), "fleet-slow", "git-slow.prod.example.dev", true);
    let _ca = IMAGE_CA.read().await;
    // Each response held 6 s: the workstation (no step bound) gets its answer; the probe's
    // git is bound to a third of --probe-timeout 15s = 5 s and is killed.
    w.slow_new_server(6);
    let r = w
        .run(&[
            "--verify-in-cluster",
            "--probe-timeout",
            "15s",
            "-o",
            "json",
        ])
        .await;
    w.slow_new_server(0);
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(check(&v, "remote")["result"], "ok");
    let m = check(&v, "in-cluster")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("git ls-remote did not finish within the probe's step timeout (5s)"),
        "{m}"
    );
    w.assert_clean(&r);
}

/// Issue 19 item 6: the cluster resolves the new host to the loopback while this workstation
/// reaches the real server: the in-cluster failure says the pod connected to itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_the_pod_resolves_to_loopback_is_the_pod_itself() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(
        c.clone(),
        "fleet-loopback",
        "git-loopback.prod.example.dev",
        true,
    );
    let _ca = IMAGE_CA.read().await;
    c.set_upstream(&w.host, &["127.0.0.1"]).unwrap();
    let r = w.run(&["--verify-in-cluster"]).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("ok   remote"), "{}", r.stdout);
    assert!(r.stdout.contains("FAIL in-cluster"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "but git could not fetch from it: {} resolves in the pod to the loopback (127.0.0.1): in a pod, localhost is the pod itself",
            w.host
        )),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("firewalls"), "{}", r.stdout);
    w.assert_clean(&r);
}

/// Issue 19 item 8, from inside the cluster: the GitRepository has no secretRef and no
/// --secret is given; the server requires credentials. Both the workstation check and the
/// in-cluster check say "pass --secret", never "the credential in secret <none> was rejected".
/// (The real source-controller then fails its next fetch from the old server; the artifact it
/// stored stays, which is what a dry run compares.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_ref_in_the_cluster_says_pass_secret() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(
        c.clone(),
        "fleet-no-ref",
        "git-no-ref.prod.example.dev",
        true,
    );
    let _ca = IMAGE_CA.write().await;
    c.kubectl(&[
        "-n",
        &w.name,
        "patch",
        "gitrepository",
        &w.name,
        "--type=merge",
        "-p",
        "{\"spec\":{\"secretRef\":null}}",
    ])
    .unwrap();
    let pe = c.podexec().unwrap();
    pe.set_image_ca_bundle(Some(&format!(
        "{}{}",
        std::fs::read_to_string(twin::podexec::IMAGE_CA_BUNDLE).unwrap_or_default(),
        w.new.ca_pem()
    )))
    .unwrap();
    let (_d, system) = system_bundle_with(w.new.ca_pem());
    let (mut cmd, hosts) = w.command(c.kubeconfig(), &["--verify-in-cluster", "-o", "json"]);
    cmd.env("SSL_CERT_FILE", &system);
    let r = run_command(cmd, RUN_TIMEOUT).await;
    drop(hosts);
    // --secret naming a Secret that holds only ca.crt: nothing is sent either, and the Secret
    // is named (never "the credential in secret ... was rejected").
    let s = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "ca-only", "namespace": w.name},
        "stringData": {"ca.crt": w.new.ca_pem()}});
    c.apply_yaml(&s.to_string()).unwrap();
    let (mut cmd, hosts) = w.command(
        c.kubeconfig(),
        &["--secret", "ca-only", "--verify-in-cluster", "-o", "json"],
    );
    cmd.env("SSL_CERT_FILE", &system);
    let ca_only = run_command(cmd, RUN_TIMEOUT).await;
    drop(hosts);
    pe.set_image_ca_bundle(None).unwrap();
    assert_eq!(ca_only.code, 1, "{}", ca_only.all());
    let v: Value = serde_json::from_str(&ca_only.stdout).unwrap();
    let none_sent = format!(
        "the server requires credentials, but secret {}/ca-only has no username/password or \
         bearerToken",
        w.name
    );
    let remote = check(&v, "remote")["message"].as_str().unwrap();
    assert!(remote.contains(&none_sent), "{remote}");
    let m = check(&v, "in-cluster")["message"].as_str().unwrap();
    assert!(m.contains(&none_sent), "{m}");
    assert!(m.contains("sent none"), "{m}");
    assert!(
        !ca_only.stdout.contains("was rejected"),
        "{}",
        ca_only.stdout
    );
    assert_eq!(v["preflight"]["inCluster"]["auth"], "failed");
    assert_eq!(v["preflight"]["inCluster"]["authScheme"], "none");
    w.assert_clean(&ca_only);

    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let remote = check(&v, "remote")["message"].as_str().unwrap();
    assert!(
        remote.contains(
            "the server requires credentials and the GitRepository has no secretRef; pass --secret"
        ),
        "{remote}"
    );
    let m = check(&v, "in-cluster")["message"].as_str().unwrap();
    assert!(
        m.contains(
            "the server requires credentials and the GitRepository has no secretRef; pass --secret"
        ),
        "{m}"
    );
    assert!(!r.stdout.contains("<none>"), "{}", r.stdout);
    assert_eq!(v["preflight"]["inCluster"]["auth"], "failed");
    w.assert_clean(&r);

    // The image's bundle does not know the server's CA and there is no secretRef: the pod's
    // TLS failure says so and how to add a CA, never "add it to secret <none>".
    let (mut cmd, hosts) = w.command(c.kubeconfig(), &["--verify-in-cluster", "-o", "json"]);
    cmd.env("SSL_CERT_FILE", &system);
    let r = run_command(cmd, RUN_TIMEOUT).await;
    drop(hosts);
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let m = check(&v, "in-cluster")["message"].as_str().unwrap();
    assert!(
        m.contains(
            "the GitRepository has no secretRef, so only the image's CA bundle was trusted. If \
             the server uses a private CA, put the CA certificate (PEM) in a Secret under the \
             key `ca.crt` and pass it with --secret"
        ),
        "{m}"
    );
    assert!(!r.stdout.contains("<none>"), "{}", r.stdout);
    assert_eq!(v["preflight"]["inCluster"]["tls"], "failed");
    w.assert_clean(&r);
}

/// Issue 19 item 6, the way out the refusal names: this workstation resolves the new host to
/// the loopback (a port-forward's /etc/hosts entry; the server also listens there) while the
/// cluster's DNS answers it with the real server. The default preflight refuses it, naming
/// --verify-in-cluster --allow-loopback; with them the pod's own answer is checked and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_only_this_workstation_resolves_to_loopback_is_checked_from_the_pod() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let any = std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
    let w = RealWorld::start_listening(
        c.clone(),
        "fleet-portfwd",
        "git-portfwd.prod.example.dev",
        true,
        any,
    );
    let _ca = IMAGE_CA.read().await;
    let to = w.to();
    let target = format!("gitrepository/{}", w.name);
    let run = |extra: &[&str]| {
        let mut args = vec![target.as_str(), "-n", &w.name, "--to", &to, "--dry-run"];
        args.extend_from_slice(extra);
        let hosts = vec![("127.0.0.1".to_string(), w.host.clone())];
        let (cmd, dir) = workstation_command(&hosts, c.kubeconfig(), &args);
        async move {
            let r = run_command(cmd, RUN_TIMEOUT).await;
            drop(dir);
            r
        }
    };
    let r = run(&["-o", "json"]).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let lo = check(&v, "loopback");
    assert_eq!(lo["result"], "fail");
    let m = lo["message"].as_str().unwrap();
    assert!(
        m.starts_with(&format!(
            "{} resolves on this workstation to the loopback (127.0.0.1)",
            w.host
        )),
        "{m}"
    );
    assert!(
        m.ends_with("check that with --verify-in-cluster --allow-loopback"),
        "{m}"
    );
    assert!(v["preflight"].get("inCluster").is_none(), "{}", r.stdout);

    let r = run(&["--verify-in-cluster", "--allow-loopback", "-o", "json"]).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(check(&v, "loopback")["result"], "warn");
    assert!(
        check(&v, "loopback")["message"]
            .as_str()
            .unwrap()
            .contains("or when the cluster's DNS answers the name with the real server"),
        "{}",
        r.stdout
    );
    assert_eq!(check(&v, "remote")["result"], "ok");
    assert_eq!(check(&v, "in-cluster")["result"], "ok", "{}", r.stdout);
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["addresses"], json!([w.addr]));
    assert_eq!(inc["workstationAddresses"], json!(["127.0.0.1"]));
    assert_eq!(inc["dnsDiffers"], true);
    assert_eq!(inc["matchesCluster"], true);
    w.assert_clean(&r);
}

/// Issue 28 (`kubectl unstick --check-remote`, which reads the head through cutover's
/// in-cluster preflight): the world's GitRepository suspended and pointed at the server on the
/// pod network, which then gets a newer commit. unstick says `source-suspended` and names the
/// head the probe pod read (`blindSpot.remoteHead`: the new commit, newer than the artifact);
/// without `--check-remote` it says the remote is not known. The probe Job is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstick_check_remote_names_the_commit_a_suspended_source_holds_back() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let w = RealWorld::start(
        c.clone(),
        "unstick-remote",
        "gitea.remote.example.dev",
        true,
    );
    let _ca = IMAGE_CA.read().await;
    // Suspended first, so source-controller never fetches the URL it cannot resolve.
    c.kubectl(&[
        "-n",
        &w.name,
        "patch",
        "gitrepository",
        &w.name,
        "--type=merge",
        "-p",
        &json!({"spec": {"suspend": true, "url": w.to()}}).to_string(),
    ])
    .unwrap();
    let work = w._work.path();
    std::fs::write(
        work.join("clusters/prod/apps.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: release-{0}\n  namespace: {0}\ndata:\n  n: \"2\"\n",
            w.name
        ),
    )
    .unwrap();
    git(work, &["commit", "-q", "-am", "release 2"], &[]);
    let newer = git(work, &["rev-parse", "HEAD"], &[]);
    push(work, &w.new, &w.new.url_https("org/fleet"), &newer, TOKEN);
    let unstick = |extra: &[&str]| {
        let mut args = vec![
            format!("ks/{}", w.name),
            "-n".into(),
            w.name.clone(),
            "--dry-run".into(),
            "-o".into(),
            "json".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = std::process::Command::new(crate::bin!("kubectl-unstick"))
            .arg("--kubeconfig")
            .arg(c.kubeconfig())
            .args(&args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (
            out.status.code(),
            v,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, v, err) = unstick(&[]);
    assert_eq!(v["diagnosis"]["class"], "source-suspended", "{v:#}\n{err}");
    assert_eq!(code, Some(1));
    assert!(
        v["diagnosis"]["summary"]
            .as_str()
            .unwrap()
            .contains("not known from the cluster"),
        "{v:#}"
    );
    let (code, v, err) = unstick(&["--check-remote"]);
    let d = &v["diagnosis"];
    assert_eq!(d["class"], "source-suspended", "{v:#}\n{err}");
    assert_eq!(code, Some(1));
    let head = &d["blindSpot"]["remoteHead"];
    assert_eq!(head["commit"], json!(newer), "{v:#}\n{err}");
    assert_eq!(head["artifactCommit"], json!(w.head), "{v:#}");
    assert_eq!(head["newer"], true);
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("the remote's main is at {}", &newer[..12]))
            && !summary.contains("not known from the cluster"),
        "{summary}"
    );
    eventually(Duration::from_secs(60), "no unstick probe left", || {
        let v = c.get_json(&[
            "-n",
            &w.name,
            "get",
            "jobs,pods",
            "-l",
            "app.kubernetes.io/managed-by=kubectl-unstick",
        ]);
        v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|o| !o["metadata"]["deletionTimestamp"].is_null())
            .then_some(())
    });
}
