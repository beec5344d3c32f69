//! The REAL `kubectl-podresolve` binary against the real cluster (tests/realcluster: real
//! kube-apiserver v1.36, kube-controller-manager with the real job, garbage-collector and
//! ttl-after-finished controllers, real RBAC). The probe pod really runs: the node agent hands
//! probe-image pods to the pod runtime (the twin's PodExec as a client of this apiserver),
//! which runs the probe's argv with BusyBox/getent in private namespaces whose resolv.conf
//! points at dnsmasq built from the real `kube-system/coredns` ConfigMap (kubeadm's Corefile
//! with a hosts pin gitea.prod.example.dev -> 192.168.2.20) and the real Services; the
//! upstream says 203.0.113.10. The binary reads the probe's log through the real apiserver's
//! pods/log, which calls the node agent's kubelet endpoint over TLS.
//!
//! Skips (with a message) when the pod runtime cannot run here (root, unshare, dnsmasq,
//! busybox: `apt-get install -y dnsmasq busybox bind9-dnsutils`).

use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use realcluster::Cluster;
use realcluster::testkit::{condition, eventually};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-podresolve");
const PIN: &str = "192.168.2.20";
const UPSTREAM: &str = "203.0.113.10";
const SC_SERVICE_IP: &str = "10.96.120.5";
const SEARCH_PIN: &str = "192.168.2.99";
const SEARCH_UPSTREAM: &str = "172.18.255.200";

/// The shared cluster with the split-horizon DNS of the twin's `split-dns` scenario, set up
/// once per test binary; `None` (test skipped) when the pod runtime cannot run here.
fn cluster() -> Option<&'static Cluster> {
    let m = twin::podexec::missing_prerequisites();
    if !m.is_empty() {
        eprintln!(
            "SKIPPED: the pod runtime needs {} (apt-get install -y dnsmasq busybox bind9-dnsutils; run as root)",
            m.join(", ")
        );
        return None;
    }
    static SETUP: OnceLock<()> = OnceLock::new();
    let c = Cluster::shared().unwrap_or_else(|e| panic!("{e}"));
    SETUP.get_or_init(|| {
        // source-controller's Service, as `flux install` makes it.
        c.apply_yaml(&format!(
            "apiVersion: v1
kind: Service
metadata: {{name: source-controller, namespace: flux-system, labels: {{app.kubernetes.io/component: source-controller}}}}
spec:
  clusterIP: {SC_SERVICE_IP}
  selector: {{app: source-controller}}
  ports: [{{name: http, port: 80, protocol: TCP, targetPort: http}}]
"
        ))
        .unwrap();
        // After the Service: this waits until the cluster DNS serves both.
        c.set_corefile_hosts(&format!(
            "{PIN} gitea.prod.example.dev\n{SEARCH_PIN} podinfo.dev.example.local.wild.example"
        ))
        .unwrap();
        c.set_upstream("gitea.prod.example.dev", &[UPSTREAM])
            .unwrap();
        c.set_upstream("podinfo.dev.example.local", &[SEARCH_UPSTREAM])
            .unwrap();
    });
    Some(c)
}

struct RunOut {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl RunOut {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("{e}\nstdout: {}\nstderr: {}", self.stdout, self.stderr))
    }
    fn dump(&self) -> String {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn run_bin(kubeconfig: &std::path::Path, args: &[&str]) -> RunOut {
    run_cmd(std::process::Command::new(BIN), kubeconfig, args)
}

fn run_cmd(mut cmd: std::process::Command, kubeconfig: &std::path::Path, args: &[&str]) -> RunOut {
    let out = cmd
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    RunOut {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

/// Probe Jobs and pods left in `ns` (label `app.kubernetes.io/managed-by=kubectl-podresolve`),
/// pods being deleted excluded.
fn leftovers(c: &Cluster, ns: &str) -> Vec<String> {
    let v = c.get_json(&[
        "-n",
        ns,
        "get",
        "jobs,pods",
        "-l",
        "app.kubernetes.io/managed-by=kubectl-podresolve",
    ]);
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
        .map(|o| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Leftovers are gone (deletion by the binary is a real delete: the Job, then its pod by the
/// real garbage collector).
fn no_leftovers(c: &Cluster, ns: &str) {
    eventually(Duration::from_secs(60), "no probe objects left", || {
        leftovers(c, ns).is_empty().then_some(())
    });
}

fn namespace(c: &Cluster, ns: &str) {
    let _ = c.kubectl(&["create", "namespace", ns]);
}

#[test]
fn pinned_name_from_the_pod_expect_pass_and_fail() {
    let Some(c) = cluster() else { return };
    let r = run_bin(
        c.kubeconfig(),
        &[
            "gitea.prod.example.dev",
            "--expect",
            PIN,
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    let h = &v["hosts"][0];
    assert_eq!(h["pod"]["addresses"], json!([PIN]), "{}", r.dump());
    assert_eq!(h["expectMatch"], true);
    let last = h["coredns"].as_array().unwrap().last().unwrap();
    assert_eq!(last["answeredBy"], "hosts", "{}", r.dump());
    // kube-dns is the real Service's ClusterIP.
    assert_eq!(v["clusterDns"]["kubeDnsIps"], json!(["10.96.0.10"]));
    assert_eq!(v["probe"]["carrier"], "job");
    // the probe really ran: its resolv.conf is the kubelet's for flux-system
    assert!(
        v.to_string().contains("flux-system.svc.cluster.local"),
        "{}",
        r.dump()
    );
    let n = v["probe"]["apiRequests"].as_u64().unwrap();
    assert!(n <= 10, "{n} API requests");
    no_leftovers(c, "flux-system");

    // wrong --expect: exit 1, MISMATCH
    let r = run_bin(
        c.kubeconfig(),
        &[
            "gitea.prod.example.dev",
            "--expect",
            UPSTREAM,
            "-n",
            "flux-system",
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(r.stdout.contains("MISMATCH"), "{}", r.dump());
    no_leftovers(c, "flux-system");
}

#[test]
fn nxdomain_and_ndots_search_expansion() {
    let Some(c) = cluster() else { return };
    let r = run_bin(
        c.kubeconfig(),
        &["nosuch.example.dev", "-n", "flux-system", "-o", "json"],
    );
    assert_eq!(r.code, Some(1), "{}", r.dump());
    let v = r.json();
    assert_eq!(
        v["hosts"][0]["verdict"],
        "pod-cannot-resolve",
        "{}",
        r.dump()
    );
    assert_eq!(v["hosts"][0]["pod"]["addresses"], json!([]), "{}", r.dump());

    // A short name: only the search list (ndots:5) finds the real Service's record.
    let r = run_bin(
        c.kubeconfig(),
        &[
            "source-controller",
            "--expect",
            SC_SERVICE_IP,
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    assert_eq!(
        v["hosts"][0]["pod"]["addresses"],
        json!([SC_SERVICE_IP]),
        "{}",
        r.dump()
    );
    assert!(
        v["hosts"][0]
            .to_string()
            .contains("source-controller.flux-system.svc.cluster.local"),
        "{}",
        r.dump()
    );
    no_leftovers(c, "flux-system");
}

/// A kubeconfig for ServiceAccount `name` in flux-system bound to ClusterRole `name` with
/// `rules` (YAML), with a token from the real TokenRequest API.
fn service_account_kubeconfig(c: &Cluster, name: &str, rules: &str) -> std::path::PathBuf {
    c.apply_yaml(&format!(
        "apiVersion: v1
kind: ServiceAccount
metadata: {{name: {name}, namespace: flux-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {name}}}
rules:
{rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {name}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {name}}}
subjects: [{{kind: ServiceAccount, name: {name}, namespace: flux-system}}]
"
    ))
    .unwrap();
    let token = c
        .kubectl(&["-n", "flux-system", "create", "token", name])
        .unwrap();
    let path = c.dir().join(format!("{name}.kubeconfig"));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    token: {}\ncontexts:\n- name: c\n  context: {{cluster: c, user: {name}, namespace: flux-system}}\ncurrent-context: c\n",
            c.server(),
            c.dir().join("ca.crt").display(),
            token.trim()
        ),
    )
    .unwrap();
    path
}

#[test]
fn from_source_controller_ephemeral_and_403_fallback() {
    let Some(c) = cluster() else { return };
    let args = [
        "gitea.prod.example.dev",
        "--from",
        "deploy/source-controller",
        "-n",
        "flux-system",
        "--expect",
        PIN,
        "-o",
        "json",
    ];
    // The real source-controller pod (a host process here) gets a real ephemeral container
    // through pods/ephemeralcontainers; the runtime runs it with the pod's DNS setup.
    let r = run_bin(c.kubeconfig(), &args);
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    assert_eq!(v["probe"]["carrier"], "ephemeral", "{}", r.dump());
    assert_eq!(
        v["hosts"][0]["pod"]["addresses"],
        json!([PIN]),
        "{}",
        r.dump()
    );
    let pods = c.get_json(&[
        "-n",
        "flux-system",
        "get",
        "pods",
        "-l",
        "app=source-controller",
    ]);
    let ephemeral: Vec<&Value> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["status"]["ephemeralContainerStatuses"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .collect();
    assert!(
        ephemeral
            .iter()
            .any(|s| s["state"]["terminated"]["exitCode"] == 0),
        "a terminated ephemeral container with exit 0: {ephemeral:?}"
    );

    // Real RBAC without pods/ephemeralcontainers: 403, fallback to a Job with a copy of the
    // pod's DNS setup.
    let kc = service_account_kubeconfig(
        c,
        "podresolve-limited",
        "- {apiGroups: [\"\"], resources: [pods, pods/log, configmaps, services], verbs: [get, list, watch]}
- {apiGroups: [apps], resources: [deployments], verbs: [get]}
- {apiGroups: [batch], resources: [jobs], verbs: [create, delete, get]}",
    );
    let r = run_bin(&kc, &args);
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert!(
        r.stderr.contains("ephemeral container not allowed"),
        "{}",
        r.dump()
    );
    let v = r.json();
    assert_eq!(v["probe"]["carrier"], "job");
    assert!(
        v["probe"]["fallbackReason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("403"),
        "{}",
        r.dump()
    );
    assert_eq!(
        v["hosts"][0]["pod"]["addresses"],
        json!([PIN]),
        "{}",
        r.dump()
    );
    no_leftovers(c, "flux-system");
}

#[test]
fn hostile_input_refused_and_unknown_image_is_the_node_agents_pull_error() {
    let Some(c) = cluster() else { return };
    namespace(c, "podresolve-pull");
    for bad in [
        "gitea.prod.example.dev;id",
        "$(touch /tmp/pwned)",
        "-n",
        "a b",
    ] {
        let r = run_bin(c.kubeconfig(), &["-n", "podresolve-pull", "--", bad]);
        assert_eq!(r.code, Some(2), "{bad}: {}", r.dump());
    }
    let jobs = c.get_json(&["-n", "podresolve-pull", "get", "jobs"]);
    assert_eq!(
        jobs["items"],
        json!([]),
        "refused before touching the cluster"
    );
    let r = run_bin(
        c.kubeconfig(),
        &[
            "gitea.prod.example.dev",
            "-n",
            "podresolve-pull",
            "--image",
            "nosuch.example/probe:1",
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(r.stderr.contains("ErrImagePull"), "{}", r.dump());
    no_leftovers(c, "podresolve-pull");
}

/// Starts the binary through a fault proxy that holds every pods/log read, and returns it
/// once its probe pod has Succeeded (the binary is then mid-run, waiting on the log).
async fn run_held_at_the_log_read(
    c: &Cluster,
    proxy: &realcluster::proxy::FaultProxy,
    ns: &str,
) -> tokio::process::Child {
    use realcluster::proxy::{Fault, FaultAction};
    proxy.add(Fault {
        method: Some("GET".into()),
        path_contains: "/log".into(),
        nth: 0,
        action: FaultAction::Latency(Duration::from_secs(600)),
    });
    let child = tokio::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(proxy.kubeconfig())
        .args(["gitea.prod.example.dev", "-n", ns, "--timeout", "5m"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let pods = c.get_json(&[
            "-n",
            ns,
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/managed-by=kubectl-podresolve",
        ]);
        if pods["items"]
            .as_array()
            .is_some_and(|a| a.iter().any(|p| p["status"]["phase"] == "Succeeded"))
        {
            return child;
        }
        assert!(Instant::now() < until, "probe pod Succeeded: {pods}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_after_the_probe_ran_deletes_it() {
    let Some(c) = cluster() else { return };
    namespace(c, "podresolve-sigint");
    let proxy = realcluster::proxy::FaultProxy::start(c).await.unwrap();
    let child = run_held_at_the_log_read(c, &proxy, "podresolve-sigint").await;
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("deleted"), "{stderr}");
    no_leftovers(c, "podresolve-sigint");
}

/// Issue 17: a probe Job left by a SIGKILLed run is named by the next run (with the
/// `--cleanup` command), and the real ttl-after-finished controller removes it after its
/// ttlSecondsAfterFinished. podresolve sets 300 s (asserted); to observe the real controller
/// within the test, the leftover's TTL is then lowered (the field is mutable) so that it
/// expires 20 s after the patch, and the test checks the Job is still there before that
/// and gone after it (with its pod, by the real garbage collector).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_probe_is_named_by_the_next_run_and_collected_by_the_real_ttl_controller() {
    let Some(c) = cluster() else { return };
    let ns = "podresolve-ttl";
    namespace(c, ns);
    let proxy = realcluster::proxy::FaultProxy::start(c).await.unwrap();
    let mut child = run_held_at_the_log_read(c, &proxy, ns).await;
    child.start_kill().unwrap(); // SIGKILL: no cleanup runs
    let _ = child.wait().await;
    drop(proxy);

    let left = leftovers(c, ns);
    let job_name = left
        .iter()
        .find_map(|l| l.strip_prefix("Job/"))
        .unwrap_or_else(|| panic!("a probe Job left: {left:?}"))
        .to_owned();
    let job = eventually(Duration::from_secs(60), "leftover Job Complete", || {
        let j = c.get_json(&["-n", ns, "get", "job", &job_name]);
        (condition(&j, "Complete")["status"] == "True").then_some(j)
    });
    assert_eq!(
        job["spec"]["ttlSecondsAfterFinished"],
        cluster_loop::probe::TTL_AFTER_FINISHED_SECS,
        "{job}"
    );

    // The next run names the leftover and the command that removes it.
    let r = run_bin(
        c.kubeconfig(),
        &["gitea.prod.example.dev", "-n", ns, "--expect", PIN],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert!(
        r.stderr
            .contains("probe object left by an earlier run (killed before it could delete it)"),
        "{}",
        r.dump()
    );
    assert!(r.stderr.contains(&job_name), "{}", r.dump());
    assert!(
        r.stderr
            .contains(&format!("kubectl podresolve --cleanup -n {ns}")),
        "{}",
        r.dump()
    );
    // Its own probe is gone; the leftover is not (the run only names it).
    assert_eq!(
        leftovers(c, ns)
            .iter()
            .filter(|l| l.starts_with("Job/"))
            .collect::<Vec<_>>(),
        vec![&format!("Job/{job_name}")]
    );

    // The real ttl-after-finished controller: expiry = completion + ttlSecondsAfterFinished
    // (pkg/controller/ttlafterfinished, jobFinishTime = the Complete condition's time).
    let job = c.get_json(&["-n", ns, "get", "job", &job_name]);
    let finished: jiff::Timestamp = condition(&job, "Complete")["lastTransitionTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let since = (jiff::Timestamp::now() - finished)
        .total(jiff::Unit::Second)
        .unwrap()
        .ceil() as i64;
    let ttl = since + 20;
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "job",
        &job_name,
        "--type=merge",
        "-p",
        &format!("{{\"spec\":{{\"ttlSecondsAfterFinished\":{ttl}}}}}"),
    ])
    .unwrap();
    let patched = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !c.get_json(&["-n", ns, "get", "job", &job_name]).is_null(),
        "the Job is kept until completion + {ttl}s"
    );
    eventually(
        Duration::from_secs(90),
        "the TTL controller deletes the Job",
        || {
            c.get_json(&["-n", ns, "get", "job", &job_name])
                .is_null()
                .then_some(())
        },
    );
    let gone_after = patched.elapsed();
    assert!(
        gone_after >= Duration::from_secs(15),
        "deleted {gone_after:?} after the patch, before its expiry (20 s)"
    );
    no_leftovers(c, ns);
    let r = run_bin(
        c.kubeconfig(),
        &["gitea.prod.example.dev", "-n", ns, "--expect", PIN],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert!(!r.stderr.contains("left by an earlier run"), "{}", r.dump());
}

#[test]
fn git_from_the_pod_reaches_the_pinned_vip_or_says_why_not() {
    let Some(c) = cluster() else { return };
    let r = run_bin(
        c.kubeconfig(),
        &[
            "gitea.prod.example.dev",
            "-n",
            "flux-system",
            "--image",
            "alpine/git:v2.49.1",
            "--git",
            "https://gitea.prod.example.dev/flux/fleet.git",
            "-o",
            "json",
        ],
    );
    // Real git in the pod's namespaces: the name resolves to the VIP, nothing answers there.
    assert_eq!(r.code, Some(1), "{}", r.dump());
    let v = r.json();
    assert_eq!(v["git"]["reachable"], false, "{}", r.dump());
    assert_eq!(v["git"]["rc"], 128, "{}", r.dump());
    assert!(
        v["git"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("gitea.prod.example.dev port 443"),
        "{}",
        r.dump()
    );
    assert_eq!(
        v["hosts"][0]["pod"]["addresses"],
        json!([PIN]),
        "{}",
        r.dump()
    );
    // Without --image, --git and --tls pick the tools image (git and openssl).
    let r = run_bin(
        c.kubeconfig(),
        &[
            "gitea.prod.example.dev",
            "-n",
            "flux-system",
            "--git",
            "https://gitea.prod.example.dev/flux/fleet.git",
            "--tls",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.dump());
    let v = r.json();
    assert_eq!(
        v["probe"]["image"],
        "nicolaka/netshoot:v0.14",
        "{}",
        r.dump()
    );
    assert_eq!(v["git"]["rc"], 128, "{}", r.dump());
    assert_ne!(v["hosts"][0]["tls"]["rc"], 127, "openssl ran: {}", r.dump());
    assert!(!r.stdout.contains("not found in image"), "{}", r.dump());
    // alpine, asked for explicitly, has no git: the probe says so (exit 127).
    let r = run_bin(
        c.kubeconfig(),
        &[
            "gitea.prod.example.dev",
            "-n",
            "flux-system",
            "--image",
            "alpine:3.22",
            "--git",
            "https://gitea.prod.example.dev/flux/fleet.git",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert_eq!(r.json()["git"]["rc"], 127, "{}", r.dump());
    no_leftovers(c, "flux-system");
}

/// Issue 19 item 1 (kubernetes/kubernetes#49113): a pod whose dnsConfig adds the search domain
/// `wild.example`, where CoreDNS pins `podinfo.dev.example.local.wild.example`. With ndots:5
/// the pod's libc tries the search domains first, so the search-expanded name answers
/// (192.168.2.99), while BusyBox nslookup queries the dotted name as is (the upstream's
/// 172.18.255.200). The pod is a real pod run by the pod runtime; `--from pod/web` probes
/// with its DNS setup.
#[test]
fn search_domain_answer_is_derived_from_libc_and_explained() {
    let Some(c) = cluster() else { return };
    namespace(c, "podresolve-search");
    c.apply_yaml(
        "apiVersion: v1
kind: Pod
metadata: {name: web, namespace: podresolve-search}
spec:
  dnsPolicy: ClusterFirst
  dnsConfig: {searches: [wild.example]}
  containers: [{name: web, image: 'busybox:1.36', command: [sleep, '3600']}]
",
    )
    .unwrap();
    eventually(Duration::from_secs(60), "pod web Running", || {
        (c.get_json(&["-n", "podresolve-search", "get", "pod", "web"])["status"]["phase"]
            == "Running")
            .then_some(())
    });
    let args = [
        "podinfo.dev.example.local",
        "--from",
        "pod/web",
        "-n",
        "podresolve-search",
    ];
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let r = run_bin(c.kubeconfig(), &json_args);
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    let h = &v["hosts"][0];
    assert_eq!(h["pod"]["addresses"], json!([SEARCH_PIN]), "{}", r.dump());
    assert_eq!(
        h["pod"]["dns"]["addresses"],
        json!([SEARCH_UPSTREAM]),
        "{}",
        r.dump()
    );
    assert_eq!(
        h["answer"]["query"],
        "podinfo.dev.example.local.wild.example.",
        "{}",
        r.dump()
    );
    assert_eq!(h["answer"]["rule"], "search-before-name", "{}", r.dump());
    assert_eq!(h["answer"]["evidence"], "libc-canonical-name");
    assert_eq!(h["answer"]["searchDomain"], "wild.example");
    let steps = h["coredns"].as_array().unwrap();
    let last = steps.last().unwrap();
    assert_eq!(last["query"], "podinfo.dev.example.local.wild.example.");
    assert_eq!(last["answeredBy"], "hosts");
    let notes = h["notes"].to_string();
    assert!(notes.contains("getent and nslookup disagree"), "{notes}");

    let r = run_bin(c.kubeconfig(), &args);
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert!(
        r.stdout.contains(
            "answered by the search domain wild.example (podinfo.dev.example.local.wild.example.) because podinfo.dev.example.local has fewer than ndots:5 dots (3)"
        ),
        "{}",
        r.dump()
    );
    no_leftovers(c, "podresolve-search");
    let _ = c.kubectl(&["delete", "namespace", "podresolve-search", "--wait=false"]);
}

/// Issue 19 item 3: the workstation answers from its /etc/hosts (the binary runs in a private
/// mount namespace whose /etc/hosts has the entry), the pod cannot resolve the name: the
/// report says where the workstation's answer came from and the cluster-side fix.
#[test]
fn workstation_answer_from_etc_hosts_is_named_with_the_cluster_fix() {
    let Some(c) = cluster() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    text.push_str("10.0.0.42\tgitea.lab.example\n");
    std::fs::write(&hosts, text).unwrap();
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
        .arg(&hosts)
        .arg(BIN);
    let r = run_cmd(
        cmd,
        c.kubeconfig(),
        &["gitea.lab.example", "-n", "flux-system", "-o", "json"],
    );
    assert_eq!(r.code, Some(1), "{}", r.dump());
    let v = r.json();
    let h = &v["hosts"][0];
    assert_eq!(h["verdict"], "pod-cannot-resolve", "{}", r.dump());
    assert_eq!(h["workstation"]["addresses"], json!(["10.0.0.42"]));
    assert_eq!(
        h["workstation"]["fromHostsFile"],
        "/etc/hosts",
        "{}",
        r.dump()
    );
    assert!(
        h["notes"].to_string().contains(
            "the workstation's answer came from its /etc/hosts, which pods never see: make the cluster answer gitea.lab.example instead, with a CoreDNS hosts (or template) entry"
        ),
        "{}",
        r.dump()
    );
    no_leftovers(c, "flux-system");
}

/// `--cleanup` on the real cluster: every probe object of ours goes, including a probe pod
/// whose Job was deleted with `--cascade=orphan` (the real garbage collector then strips the
/// pod's ownerReference, so it is a bare probe pod); the pod of a Job swept in the same run is
/// left to the real garbage collector; objects that are not our probes stay.
#[test]
fn cleanup_sweeps_probe_jobs_orphaned_and_bare_probe_pods() {
    let Some(c) = cluster() else { return };
    let ns = "podresolve-cleanup";
    namespace(c, ns);
    let labels = |run: &str| {
        format!(
            "{{app.kubernetes.io/managed-by: kubectl-podresolve, app.kubernetes.io/name: podresolve, podresolve.cluster-loop.dev/run: {run}}}"
        )
    };
    let job = |name: &str, labels: &str| {
        format!(
            "apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: {ns}, labels: {labels}}}
spec:
  template:
    metadata: {{labels: {labels}}}
    spec:
      restartPolicy: Never
      containers: [{{name: probe, image: 'busybox:1.36', command: [sleep, '3600']}}]
"
        )
    };
    let pod = |name: &str, labels: &str| {
        format!(
            "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {ns}, labels: {labels}}}
spec:
  restartPolicy: Never
  containers: [{{name: probe, image: 'busybox:1.36', command: [sleep, '3600']}}]
"
        )
    };
    c.apply_yaml(&format!(
        "{}---\n{}---\n{}---\n{}---\n{}",
        job("podresolve-aaaa", &labels("aaaa")),
        job("podresolve-bbbb", &labels("bbbb")),
        pod("podresolve-cccc", &labels("cccc")),
        pod("web-0", "{app: web}"),
        job("batch", "{team: batch}"),
    ))
    .unwrap();
    let pod_of = |job: &str| {
        eventually(Duration::from_secs(60), "the Job's pod runs", || {
            let pods = c.get_json(&["-n", ns, "get", "pods", "-l", &format!("job-name={job}")]);
            let p = &pods["items"][0];
            (p["status"]["phase"] == "Running")
                .then(|| p["metadata"]["name"].as_str().unwrap().to_owned())
        })
    };
    let (_a, orphan, batch) = (
        pod_of("podresolve-aaaa"),
        pod_of("podresolve-bbbb"),
        pod_of("batch"),
    );
    c.kubectl(&[
        "-n",
        ns,
        "delete",
        "job",
        "podresolve-bbbb",
        "--cascade=orphan",
    ])
    .unwrap();
    eventually(Duration::from_secs(60), "the orphan lost its owner", || {
        c.get_json(&["-n", ns, "get", "pod", &orphan])["metadata"]["ownerReferences"]
            .is_null()
            .then_some(())
    });

    let r = run_bin(c.kubeconfig(), &["--cleanup", "-n", ns, "-o", "json"]);
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    let deleted: Vec<(String, String)> = v["deleted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        deleted,
        [
            ("job".to_string(), "podresolve-aaaa".to_string()),
            ("pod".to_string(), orphan.clone()),
            ("pod".to_string(), "podresolve-cccc".to_string()),
        ],
        "{v:#}"
    );
    // No probe object is left (the Job's own pod went with it, by the real garbage
    // collector); the others are untouched.
    no_leftovers(c, ns);
    let names = |kind: &str| {
        let mut n: Vec<String> = c.get_json(&["-n", ns, "get", kind])["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names("pods"), [batch, "web-0".to_string()]);
    assert_eq!(names("jobs"), ["batch"]);

    // A second sweep finds nothing.
    let r = run_bin(c.kubeconfig(), &["--cleanup", "-n", ns]);
    assert_eq!(r.code, Some(0), "{}", r.dump());
    assert_eq!(
        r.stdout,
        format!("no podresolve probe objects in namespace {ns}\n")
    );
    let _ = c.kubectl(&["delete", "namespace", ns, "--wait=false"]);
}

/// The Job podresolve sends, as the real apiserver stored it, and its request budget counted
/// by the fault proxy's request log: at most 10 requests, one watch of pods, and the count the
/// report gives (`probe.apiRequests`) is the real one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_spec_and_request_budget_on_the_real_apiserver() {
    let Some(c) = cluster() else { return };
    let ns = "podresolve-budget";
    namespace(c, ns);
    let dir = tempfile::tempdir().unwrap();
    let jobs_file = dir.path().join("jobs.json");
    let mut watch = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .args(["-n", ns, "get", "jobs", "-w", "-o", "json"])
        .stdout(std::fs::File::create(&jobs_file).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let proxy = realcluster::proxy::FaultProxy::start(c).await.unwrap();
    let r = run_bin(
        proxy.kubeconfig(),
        &[
            "gitea.prod.example.dev",
            "--expect",
            PIN,
            "-n",
            ns,
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    assert_eq!(v["probe"]["carrier"], "job");
    assert_eq!(
        v["probe"]["node"],
        realcluster::node::NODE_NAME,
        "{}",
        r.dump()
    );
    let reqs = proxy.requests();
    let shown: Vec<String> = reqs
        .iter()
        .map(|q| format!("{} {} {}", q.method, q.path, q.status))
        .collect();
    assert!(reqs.len() <= 10, "{} requests: {shown:#?}", reqs.len());
    let pod_watches = reqs
        .iter()
        .filter(|q| q.method == "GET" && q.path.contains("/pods?") && q.path.contains("watch=true"))
        .count();
    assert_eq!(pod_watches, 1, "{shown:#?}");
    assert_eq!(
        v["probe"]["apiRequests"].as_u64().unwrap() as usize,
        reqs.len(),
        "{shown:#?}"
    );
    // What was sent, as stored by the real apiserver.
    let job_name = v["probe"]["name"].as_str().unwrap().to_owned();
    let job: Value = eventually(Duration::from_secs(10), "the Job was watched", || {
        let text = std::fs::read_to_string(&jobs_file).unwrap_or_default();
        let mut de = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
        de.find_map(|j| j.ok().filter(|j| j["metadata"]["name"] == json!(job_name)))
    });
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(job["spec"]["backoffLimit"], 0, "{job}");
    assert_eq!(
        job["spec"]["ttlSecondsAfterFinished"],
        cluster_loop::probe::TTL_AFTER_FINISHED_SECS
    );
    assert!(
        job["spec"]["activeDeadlineSeconds"].as_i64().unwrap() > 0,
        "{job}"
    );
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false, "{job}");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{job}");
    let argv = pod["containers"][0]["command"].as_array().unwrap();
    assert_eq!(argv[0], "sh");
    assert_eq!(argv.last().unwrap(), "gitea.prod.example.dev");
    no_leftovers(c, ns);
}

/// Real RBAC: a ServiceAccount that may read but not create Jobs: exit 3 naming jobs, and no
/// cleanup noise (nothing was created).
#[test]
fn forbidden_create_exits_3_without_cleanup_noise() {
    let Some(c) = cluster() else { return };
    let kc = service_account_kubeconfig(
        c,
        "podresolve-readonly",
        "- {apiGroups: [\"\"], resources: [pods, pods/log, configmaps, services], verbs: [get, list, watch]}",
    );
    let r = run_bin(&kc, &["gitea.prod.example.dev", "-n", "flux-system"]);
    assert_eq!(r.code, Some(3), "{}", r.dump());
    assert!(r.stderr.contains("jobs"), "{}", r.dump());
    assert!(!r.stderr.contains("cleanup failed"), "{}", r.dump());
    assert!(!r.stderr.contains("deleted"), "{}", r.dump());
}

/// Starts the binary through `proxy`, waits until `ready` (e.g. a fault matched n requests,
/// which reached the proxy and are held), then SIGINTs it; its exit code and stderr.
async fn interrupt_when(
    proxy: &realcluster::proxy::FaultProxy,
    ready: impl Fn() -> bool,
    args: &[&str],
) -> (Option<i32>, String) {
    let child = tokio::process::Command::new(BIN)
        .arg("--kubeconfig")
        .arg(proxy.kubeconfig())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < until, "requests never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("exits promptly after SIGINT")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn hang_everything(proxy: &realcluster::proxy::FaultProxy) -> usize {
    proxy.add(realcluster::proxy::Fault {
        method: None,
        path_contains: String::new(),
        nth: 0,
        action: realcluster::proxy::FaultAction::Latency(Duration::from_secs(3600)),
    })
}

/// An API server that accepts requests and never answers: the create is held back until the
/// server has answered something, so SIGINT finds nothing created, sends no DELETE and does
/// not wait for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_server_sigint_reports_nothing_created_and_sends_no_delete() {
    let Some(c) = cluster() else { return };
    let ns = "podresolve-hung";
    namespace(c, ns);
    let proxy = realcluster::proxy::FaultProxy::start(c).await.unwrap();
    let hang = hang_everything(&proxy);
    let (code, stderr) = interrupt_when(
        &proxy,
        || proxy.matched(hang) >= 3,
        &["gitea.prod.example.dev", "-n", ns, "--timeout", "5m"],
    )
    .await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT: nothing was created\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("NOT deleted"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // Only the three kube-system GETs reached the server: no POST, no DELETE.
    assert_eq!(proxy.matched(hang), 3);
    assert_eq!(leftovers(c, ns), Vec::<String>::new());
}

/// The same hung server without an interrupt: the run ends at --timeout + 15s with exit 3 and
/// says nothing was created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_server_run_is_bounded_by_the_deadline() {
    let Some(c) = cluster() else { return };
    let ns = "podresolve-hung-deadline";
    namespace(c, ns);
    let proxy = realcluster::proxy::FaultProxy::start(c).await.unwrap();
    let hang = hang_everything(&proxy);
    let kc = proxy.kubeconfig().to_path_buf();
    let r = tokio::task::spawn_blocking(move || {
        run_bin(
            &kc,
            &["gitea.prod.example.dev", "-n", ns, "--timeout", "5s"],
        )
    })
    .await
    .unwrap();
    assert_eq!(r.code, Some(3), "{}", r.dump());
    assert!(
        r.stderr.ends_with(&format!(
            "error: the API server {} did not answer within 20s (--timeout + 15s): nothing was created\n",
            proxy.server()
        )),
        "{}",
        r.dump()
    );
    assert!(!r.stderr.contains("deleted"), "{}", r.dump());
    assert_eq!(proxy.matched(hang), 3, "no POST, no DELETE");
}

/// The apiserver commits the create but its answer never reaches the binary: the probe may
/// exist, so one DELETE by name is sent (bounded), and the message says the create had no
/// answer rather than claiming a deletion of something known to exist. The Job really
/// existed and is really gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_create_sigint_sends_one_delete_and_says_so() {
    let Some(c) = cluster() else { return };
    let ns = "podresolve-unanswered";
    namespace(c, ns);
    let proxy = realcluster::proxy::FaultProxy::start(c).await.unwrap();
    proxy.add(realcluster::proxy::Fault {
        method: Some("POST".into()),
        path_contains: format!("/namespaces/{ns}/jobs"),
        nth: 0,
        action: realcluster::proxy::FaultAction::HoldAnswer(Duration::from_secs(3600)),
    });
    let created = || {
        proxy
            .requests()
            .iter()
            .any(|q| q.method == "POST" && q.path.contains("/jobs") && q.status == 201)
    };
    let (code, stderr) = interrupt_when(
        &proxy,
        created,
        &["gitea.prod.example.dev", "-n", ns, "--timeout", "5m"],
    )
    .await;
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "interrupted by SIGINT: the create of job {ns}/podresolve-"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("had no answer yet; its DELETE succeeded (or found nothing)"),
        "{stderr}"
    );
    let deletes = proxy
        .requests()
        .iter()
        .filter(|q| q.method == "DELETE" && q.path.contains("/jobs/"))
        .count();
    assert_eq!(deletes, 1, "{:?}", proxy.requests());
    no_leftovers(c, ns);
}
