//! `kubectl cutover --verify-in-cluster` on the twin, with nothing faked between the plugin and
//! the answer: the twin's podexec model runs the probe Job's pod FOR REAL (alpine/git: BusyBox
//! and host git) in the twin's pod network namespace, whose resolver is a real dnsmasq standing in
//! for CoreDNS and its upstream; the new Git server (real `git http-backend`, HTTPS with its own
//! CA, basic auth) listens on the pod network link's host address at port 443, so the probe's
//! `git ls-remote https://gitea.prod.example.dev/org/fleet.git` goes through DNS, TCP, TLS and
//! HTTP auth exactly as source-controller's fetch would. The plugin itself runs as a workstation
//! whose /etc/hosts knows the name (a private mount namespace), so split DNS is real too.
//!
//! Every test greps stdout, stderr, and every Job/Pod object and pod log the twin stored for
//! the token strings.
//!
//! The same-head, split-DNS and revoked-token cases run on the real cluster instead
//! (`real_in_cluster.rs`); the cases here are not ported yet (tests/realcluster/README.md).
//!
//! Skips (with a message) only when podexec's prerequisites (root, unshare, nsenter, ip,
//! dnsmasq, busybox) are missing.
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use twin::git::{GitServer, GitServerOptions};
use twin::podexec::{PodExec, PodExecOptions};
use twin::testkit::{PluginRun, interrupt, run_command, skip_without_podexec, start_twin};

const HOST: &str = "gitea.prod.example.dev";

struct Ic {
    w: World,
    pe: PodExec,
    _workloads: Arc<twin::workload::WorkloadController>,
    _storage: tempfile::TempDir,
    /// Every Job and Pod object seen in flux-system (JSON text).
    seen: Arc<Mutex<Vec<String>>>,
    _watch: tokio::task::JoinHandle<()>,
}

impl Ic {
    /// The twin with podexec and the workload model (Job -> Pod), the old server on
    /// 127.0.0.1, the new one on the pod network at `https://gitea.prod.example.dev/`, the
    /// upstream DNS answering that name with the link address.
    async fn start(n: usize) -> Ic {
        let twin = start_twin(&[]).await;
        let store = twin.store();
        let pe = PodExec::start(store.clone(), PodExecOptions::default())
            .await
            .expect("podexec starts");
        let storage = tempfile::tempdir().unwrap();
        let opts = Arc::new(twin::flux::ModelOptions::new(
            0.01,
            storage.path().to_path_buf(),
        ));
        let workloads = twin::workload::WorkloadController::start(
            Arc::new(store.clone()),
            opts,
            twin::workload::Registry::new(&[]),
        );
        let addr = pe.host_address();
        pe.set_upstream(HOST, &[addr.to_string()]).await.unwrap();
        let old = GitServer::start(GitServerOptions::default()).unwrap();
        let new = GitServer::start(GitServerOptions {
            dns_names: vec![HOST.into()],
            listen: addr.into(),
            http_port: 80,
            https_port: 443,
            ..Default::default()
        })
        .unwrap();
        let w = World::build(twin, old, new, n);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut watches = vec![];
        for (g, v, r) in [("", "v1", "pods"), ("batch", "v1", "jobs")] {
            let gvr = store.gvr(g, v, r).unwrap();
            watches.push(store.watch(&gvr, Some("flux-system"), None).unwrap());
        }
        let s2 = seen.clone();
        let watch = tokio::spawn(async move {
            let mut b = watches.pop().unwrap();
            let mut a = watches.pop().unwrap();
            loop {
                let ev = tokio::select! {
                    Some(e) = a.next() => e,
                    Some(e) = b.next() => e,
                    else => return,
                };
                s2.lock().unwrap().push(ev.object.to_string());
            }
        });
        Ic {
            w,
            pe,
            _workloads: workloads,
            _storage: storage,
            seen,
            _watch: watch,
        }
    }

    fn to(&self) -> String {
        self.w.new.url_https_host("org/fleet", HOST)
    }

    fn workstation_hosts(&self) -> Vec<(String, String)> {
        vec![(self.pe.host_address().to_string(), HOST.to_string())]
    }

    /// [`Ic::start`], or `None` after saying why when podexec cannot run here.
    async fn start_unless_skipped(n: usize) -> Option<Ic> {
        if skip_without_podexec() {
            return None;
        }
        Some(Ic::start(n).await)
    }

    /// Makes the new server hold each response `secs` seconds (`0`: answer at once).
    fn slow_new_server(&self, secs: u64) {
        let fault = (secs > 0).then_some(twin::git::Fault::Delay(Duration::from_secs(secs)));
        self.w.new.set_fault("org/fleet", fault).unwrap();
    }

    async fn run(&self, args: &[&str]) -> PluginRun {
        self.run_as(self.w.twin.kubeconfig_path(), args).await
    }

    /// `kubectl cutover gitrepository/flux-system --to <new> --dry-run <args>` on the
    /// workstation (see [`workstation_command`]) and the argv after the binary name.
    fn command(
        &self,
        kubeconfig: &std::path::Path,
        args: &[&str],
    ) -> (tokio::process::Command, tempfile::TempDir, String) {
        let to = self.to();
        let mut all = vec!["gitrepository/flux-system", "--to", &to, "--dry-run"];
        all.extend_from_slice(args);
        let (cmd, hosts) = workstation_command(&self.workstation_hosts(), kubeconfig, &all);
        (cmd, hosts, all.join(" "))
    }

    async fn run_as(&self, kubeconfig: &std::path::Path, args: &[&str]) -> PluginRun {
        let (cmd, _hosts, argv) = self.command(kubeconfig, args);
        let r = run_command(cmd, RUN_TIMEOUT).await;
        if std::env::var_os("CUTOVER_SHOW").is_some() {
            eprintln!("$ kubectl cutover {argv}\n{}", r.all());
        }
        r
    }

    /// Pods of cutover probes seen, and their logs.
    fn probe_pods_and_logs(&self) -> (Vec<Value>, String) {
        let store = self.w.twin.store();
        let mut pods = vec![];
        let mut logs = String::new();
        for o in self.seen.lock().unwrap().iter() {
            let v: Value = serde_json::from_str(o).unwrap();
            if v["kind"] == "Pod"
                && v["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl-cutover"
            {
                let name = v["metadata"]["name"].as_str().unwrap().to_string();
                if !pods
                    .iter()
                    .any(|p: &Value| p["metadata"]["name"] == json!(name))
                {
                    logs.push_str(&String::from_utf8_lossy(
                        &store.read_pod_log("flux-system", &name, "probe", 0).0,
                    ));
                }
                pods.push(v);
            }
        }
        (pods, logs)
    }

    /// No token in the output, in any stored Job/Pod version, or in the probe logs; the
    /// probe Job is gone.
    async fn assert_clean(&self, r: &PluginRun) {
        r.assert_no_secrets();
        let (_, logs) = self.probe_pods_and_logs();
        for t in [TOKEN, NEW_TOKEN] {
            for o in self.seen.lock().unwrap().iter() {
                assert!(!o.contains(t), "token in a stored object: {o}");
            }
            assert!(!logs.contains(t), "token in the probe log:\n{logs}");
        }
        let store = self.w.twin.store();
        let jobs = store.gvr("batch", "v1", "jobs").unwrap();
        let left: Vec<Value> = store
            .list(&jobs, Some("flux-system"), None)
            .unwrap()
            .into_iter()
            .filter(|j| {
                j["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl-cutover"
            })
            .collect();
        assert!(left.is_empty(), "probe Job left behind: {left:?}");
        assert!(
            self.pe.wait_idle(Duration::from_secs(60)).await,
            "probe container still running"
        );
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
async fn missing_ca_in_the_cluster_names_the_secret_key() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    ic.w.secret("no-ca", TOKEN, None);
    let r = ic
        .run(&["--verify-in-cluster", "--secret", "no-ca", "-o", "json"])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["dnsStatus"], "resolved");
    assert_eq!(inc["tls"], "failed");
    assert_eq!(inc["caSource"], "image");
    assert_eq!(inc["auth"], "not-reached");
    let c = check(&v, "in-cluster");
    assert_eq!(c["result"], "fail");
    let m = c["message"].as_str().unwrap();
    assert!(m.contains("TLS verification failed in the cluster"), "{m}");
    assert!(
        m.contains("to secret flux-system/no-ca under the key `ca.crt`"),
        "{m}"
    );
    // The Secret's ca.crt is absent, so the pod spec references only the credentials.
    let (pods, _) = ic.probe_pods_and_logs();
    let env = pods.last().unwrap()["spec"]["containers"][0]["env"].to_string();
    assert!(!env.contains("ca.crt"), "{env}");
    ic.assert_clean(&r).await;
}

/// go-git v5 configureTransport ADDS the secret's ca.crt to the system pool. The new server's
/// CA is in the probe image's system bundle (a company base image) and in the workstation's
/// (SSL_CERT_FILE); the secret's ca.crt is an unrelated CA (the old server's). Both checks
/// pass, as Flux would; without the CA in the image the probe is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_ca_adds_to_the_image_bundle_in_the_cluster() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    ic.w.secret("unrelated-ca", TOKEN, Some(ic.w.old.ca_pem()));
    ic.pe
        .set_image_ca_bundle(Some(&format!(
            "{}{}",
            std::fs::read_to_string(twin::podexec::IMAGE_CA_BUNDLE).unwrap_or_default(),
            ic.w.new.ca_pem()
        )))
        .unwrap();
    let (_d, system) = system_bundle_with(ic.w.new.ca_pem());
    let run = |out: &'static str| {
        let (mut cmd, hosts, _) = ic.command(
            ic.w.twin.kubeconfig_path(),
            &["--verify-in-cluster", "--secret", "unrelated-ca", "-o", out],
        );
        cmd.env("SSL_CERT_FILE", &system);
        async move {
            let r = run_command(cmd, RUN_TIMEOUT).await;
            drop(hosts);
            r
        }
    };
    let r = run("json").await;
    assert_eq!(r.code, 0, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(check(&v, "remote")["result"], "ok", "{v:#}");
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["tls"], "ok");
    assert_eq!(inc["caSource"], "image+secret");
    assert_eq!(inc["auth"], "ok");
    assert_eq!(inc["head"], json!(ic.w.head()));
    let m = check(&v, "in-cluster")["message"].as_str().unwrap();
    assert!(
        m.contains(
            "TLS verified (with the image's CA bundle plus secret flux-system/unrelated-ca ca.crt)"
        ),
        "{m}"
    );
    let (_, logs) = ic.probe_pods_and_logs();
    assert!(logs.contains("#podresolve git-ca image+secret"), "{logs}");
    ic.assert_clean(&r).await;

    // Control: an image whose bundle lacks the CA refuses the same secret in the cluster.
    ic.pe.set_image_ca_bundle(None).unwrap();
    let r = run("json").await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(check(&v, "remote")["result"], "ok", "{v:#}");
    let inc = &v["preflight"]["inCluster"];
    assert_eq!(inc["tls"], "failed");
    assert_eq!(inc["caSource"], "image+secret");
    let m = check(&v, "in-cluster")["message"].as_str().unwrap();
    assert!(
        m.contains("neither the image's CA bundle nor the secret's ca.crt verifies this server"),
        "{m}"
    );
    ic.assert_clean(&r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cannot_create_jobs_exits_3_with_the_can_i_line() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    let rules = vec![
        twin::Rule::new(
            &["get", "list", "watch"],
            &[""],
            &["secrets", "pods", "pods/log"],
        ),
        twin::Rule::new(
            &["get", "list", "watch"],
            &["source.toolkit.fluxcd.io", "kustomize.toolkit.fluxcd.io"],
            &["gitrepositories", "kustomizations"],
        ),
    ];
    let token = ic.w.twin.add_token("readonly", rules);
    let kc = ic.w.twin.kubeconfig_for(&token, "readonly").unwrap();
    let r = ic.run_as(&kc, &["--verify-in-cluster"]).await;
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(
        r.stderr.contains("kubectl auth can-i create jobs"),
        "{}",
        r.stderr
    );
    assert_eq!(ic.w.twin.request_log().count("delete", Some("jobs")), 0);
    ic.assert_clean(&r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_image_without_git_is_refused() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    let r = ic
        .run(&["--verify-in-cluster", "--probe-image", "alpine:3.22"])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout
            .contains("the probe image alpine:3.22 has no git: pass --probe-image"),
        "{}",
        r.stdout
    );
    ic.assert_clean(&r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_during_the_probe_deletes_it_and_changes_nothing() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    // A slow server: the probe's git ls-remote (two requests) takes at least 16 s, so the
    // SIGINT sent when its pod is Running always lands while it runs.
    ic.slow_new_server(8);
    let store = ic.w.twin.store();
    let pods = store.gvr("", "v1", "pods").unwrap();
    let mut w = store.watch(&pods, Some("flux-system"), None).unwrap();
    let (mut cmd, _hosts, _) = ic.command(ic.w.twin.kubeconfig_path(), &["--verify-in-cluster"]);
    let child = cmd.spawn().unwrap();
    tokio::time::timeout(Duration::from_secs(180), async {
        while let Some(ev) = w.next().await {
            let o = &ev.object;
            if o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl-cutover"
                && o["status"]["phase"] == "Running"
            {
                return;
            }
        }
        panic!("pod watch ended");
    })
    .await
    .expect("the probe pod runs");
    let r = interrupt(child, RUN_TIMEOUT).await;
    assert_eq!(r.code, 130, "{}", r.all());
    assert!(
        r.stderr
            .contains("interrupted by SIGINT: probe job flux-system/cutover-"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("deleted; nothing was changed"),
        "{}",
        r.stderr
    );
    assert_eq!(
        ic.w.git_repository()["spec"]["url"],
        json!(ic.w.old.url_https("org/fleet"))
    );
    ic.slow_new_server(0);
    ic.assert_clean(&r).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_too_slow_for_the_probe_is_refused_not_hung() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    // Each response held 6 s: the workstation (no step bound) gets its answer; the probe's
    // git is bound to a third of --probe-timeout 15s = 5 s and is killed.
    ic.slow_new_server(6);
    let r = ic
        .run(&[
            "--verify-in-cluster",
            "--probe-timeout",
            "15s",
            "-o",
            "json",
        ])
        .await;
    ic.slow_new_server(0);
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
    assert_eq!(v["preflight"]["inCluster"]["stepTimeoutSecs"], 5);
    ic.assert_clean(&r).await;
}

/// Issue 19 item 6: the cluster resolves the new host to the loopback (a pin to 127.0.0.1)
/// while this workstation reaches the real server: the in-cluster failure says the pod
/// connected to itself, never "check firewalls".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_the_pod_resolves_to_loopback_is_the_pod_itself() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    ic.pe
        .set_upstream(HOST, &["127.0.0.1".to_string()])
        .await
        .unwrap();
    let r = ic.run(&["--verify-in-cluster"]).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("ok   remote"), "{}", r.stdout);
    assert!(r.stdout.contains("FAIL in-cluster"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "but git could not fetch from it: {HOST} resolves in the pod to the loopback (127.0.0.1): in a pod, localhost is the pod itself"
        )),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("firewalls"), "{}", r.stdout);
    ic.assert_clean(&r).await;
}

/// Issue 19 item 8, from inside the cluster: the GitRepository has no secretRef and no
/// --secret is given; the server requires credentials. Both the workstation check and the
/// in-cluster check say "pass --secret", never "the credential in secret <none> was rejected".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_ref_in_the_cluster_says_pass_secret() {
    let Some(ic) = Ic::start_unless_skipped(2).await else {
        return;
    };
    let store = ic.w.twin.store();
    let gr = store
        .gvr("source.toolkit.fluxcd.io", "v1", "gitrepositories")
        .unwrap();
    store
        .patch(
            &gr,
            Some("flux-system"),
            "flux-system",
            twin::PatchKind::Merge,
            &json!({"spec": {"secretRef": null}}),
            "test",
        )
        .unwrap();
    ic.pe
        .set_image_ca_bundle(Some(&format!(
            "{}{}",
            std::fs::read_to_string(twin::podexec::IMAGE_CA_BUNDLE).unwrap_or_default(),
            ic.w.new.ca_pem()
        )))
        .unwrap();
    let (_d, system) = system_bundle_with(ic.w.new.ca_pem());
    let (mut cmd, hosts, _) = ic.command(
        ic.w.twin.kubeconfig_path(),
        &["--verify-in-cluster", "-o", "json"],
    );
    cmd.env("SSL_CERT_FILE", &system);
    let r = run_command(cmd, RUN_TIMEOUT).await;
    drop(hosts);
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
    ic.assert_clean(&r).await;
}
