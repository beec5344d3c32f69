//! The REAL `kubectl-podresolve` binary against the twin's `split-dns` scenario, where the
//! probe really runs: the twin's podexec model executes the probe's `sh -c SCRIPT` argv with
//! BusyBox/getent in private namespaces whose resolv.conf points at dnsmasq configured from
//! the CoreDNS ConfigMap (hosts pin gitea.prod.example.dev -> 192.168.2.20), the Services and
//! the scenario's upstream records (gitea.prod.example.dev -> 203.0.113.10). Nothing here
//! plays kubelet or supplies a log.
//!
//! Skips (with a message) only when `unshare`/`dnsmasq`/`busybox` or root are missing
//! (`apt-get install -y dnsmasq busybox bind9-dnsutils`).

use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use twin::scenario::{RunOptions, RunningScenario, Scenario};
use twin::{Store, WatchEventType};

fn skip() -> bool {
    let m = twin::podexec::missing_prerequisites();
    if !m.is_empty() {
        eprintln!(
            "SKIPPED: the twin's podexec needs {} (apt-get install -y dnsmasq busybox bind9-dnsutils; run as root)",
            m.join(", ")
        );
        return true;
    }
    false
}

async fn start() -> RunningScenario {
    let sc = RunningScenario::start(
        Scenario::shipped("split-dns").unwrap(),
        RunOptions::default(),
    )
    .await
    .expect("split-dns starts");
    // source-controller's pod is Running (for --from)
    let store = sc.twin.store();
    let pods = store.gvr("", "v1", "pods").unwrap();
    let mut w = store.watch(&pods, Some("flux-system"), None).unwrap();
    let running = |o: &Value| {
        o["metadata"]["labels"]["app"] == "source-controller" && o["status"]["phase"] == "Running"
    };
    if !store
        .list(&pods, Some("flux-system"), None)
        .unwrap()
        .iter()
        .any(running)
    {
        tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(ev) = w.next().await {
                if ev.type_ != WatchEventType::Deleted && running(&ev.object) {
                    return;
                }
            }
        })
        .await
        .expect("source-controller pod Running");
    }
    sc
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

async fn run_bin(kubeconfig: &std::path::Path, args: &[&str]) -> RunOut {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), out)
        .await
        .expect("binary finishes")
        .unwrap();
    RunOut {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

/// Probe Jobs and pods left (label `app.kubernetes.io/managed-by=kubectl-podresolve`).
fn leftovers(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for (g, r) in [("batch", "jobs"), ("", "pods")] {
        let gvr = store.gvr(g, "v1", r).unwrap();
        for o in store.list(&gvr, None, None).unwrap() {
            if o["metadata"]["labels"]["app.kubernetes.io/managed-by"]
                == json!("kubectl-podresolve")
            {
                out.push(format!(
                    "{r}/{}",
                    o["metadata"]["name"].as_str().unwrap_or("")
                ));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_name_from_the_pod_expect_pass_and_fail() {
    if skip() {
        return;
    }
    let sc = start().await;
    let kc = sc.twin.kubeconfig_path();
    sc.twin.reset_requests();
    let r = run_bin(
        kc,
        &[
            "gitea.prod.example.dev",
            "--expect",
            "192.168.2.20",
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, Some(0), "{}", r.dump());
    if std::env::var_os("PODRESOLVE_SHOW").is_some() {
        eprintln!("{}", r.dump());
    }
    let v = r.json();
    let h = &v["hosts"][0];
    assert_eq!(
        h["pod"]["addresses"],
        json!(["192.168.2.20"]),
        "{}",
        r.dump()
    );
    assert_eq!(h["expectMatch"], true);
    // The workstation side is this machine's own resolver (it knows nothing of the pin).
    let ws = &h["workstation"]["addresses"];
    if ws != &h["pod"]["addresses"] {
        assert_eq!(h["verdict"], "differs", "{}", r.dump());
    }
    let last = h["coredns"].as_array().unwrap().last().unwrap();
    assert_eq!(last["answeredBy"], "hosts", "{}", r.dump());
    assert_eq!(v["clusterDns"]["kubeDnsIps"], json!(["10.96.0.10"]));
    assert_eq!(v["probe"]["carrier"], "job");
    assert_eq!(v["kind"], "PodResolveReport");
    assert!(v.get("exitCode").is_none());
    assert!(
        r.stdout.starts_with(
            "{\n  \"apiVersion\": \"podresolve.cluster-loop.dev/v1\",\n  \"kind\": \"PodResolveReport\","
        ),
        "{}",
        r.dump()
    );
    // the probe really ran: its resolv.conf is the kubelet's for flux-system
    assert!(
        v.to_string().contains("flux-system.svc.cluster.local"),
        "{}",
        r.dump()
    );
    let n = sc.twin.requests().len();
    assert!(n <= 10, "{n} API requests");
    assert_eq!(v["probe"]["apiRequests"].as_u64(), Some(n as u64));
    assert_eq!(leftovers(&sc.twin.store()), Vec::<String>::new());

    // wrong --expect: exit 1, MISMATCH
    let r = run_bin(
        kc,
        &[
            "gitea.prod.example.dev",
            "--expect",
            "203.0.113.10",
            "-n",
            "flux-system",
        ],
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(r.stdout.contains("MISMATCH"), "{}", r.dump());
    assert_eq!(leftovers(&sc.twin.store()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nxdomain_and_ndots_search_expansion() {
    if skip() {
        return;
    }
    let sc = start().await;
    let kc = sc.twin.kubeconfig_path();
    let r = run_bin(
        kc,
        &["nosuch.example.dev", "-n", "flux-system", "-o", "json"],
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.dump());
    let v = r.json();
    assert_eq!(
        v["hosts"][0]["verdict"],
        "pod-cannot-resolve",
        "{}",
        r.dump()
    );
    assert_eq!(v["hosts"][0]["pod"]["addresses"], json!([]), "{}", r.dump());

    // A short name: only the search list (ndots:5) finds the Service record.
    let r = run_bin(
        kc,
        &[
            "source-controller",
            "--expect",
            "10.96.120.5",
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    assert_eq!(
        v["hosts"][0]["pod"]["addresses"],
        json!(["10.96.120.5"]),
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
    assert_eq!(leftovers(&sc.twin.store()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_source_controller_ephemeral_and_403_fallback() {
    if skip() {
        return;
    }
    let sc = start().await;
    let r = run_bin(
        sc.twin.kubeconfig_path(),
        &[
            "gitea.prod.example.dev",
            "--from",
            "deploy/source-controller",
            "-n",
            "flux-system",
            "--expect",
            "192.168.2.20",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    assert_eq!(v["probe"]["carrier"], "ephemeral", "{}", r.dump());
    assert_eq!(
        v["hosts"][0]["pod"]["addresses"],
        json!(["192.168.2.20"]),
        "{}",
        r.dump()
    );
    assert_eq!(sc.twin.request_log().count("create", Some("jobs")), 0);

    // Without pods/ephemeralcontainers: 403, fallback to a copy of the pod's DNS setup.
    let rules = vec![
        twin::Rule::new(
            &["get", "list", "watch"],
            &[""],
            &["pods", "pods/log", "configmaps", "services"],
        ),
        twin::Rule::new(&["get"], &["apps"], &["deployments"]),
        twin::Rule::new(&["create", "delete", "get"], &["batch"], &["jobs"]),
    ];
    let token = sc.twin.add_token("limited", rules);
    let kc = sc.twin.kubeconfig_for(&token, "limited").unwrap();
    let r = run_bin(
        &kc,
        &[
            "gitea.prod.example.dev",
            "--from",
            "deploy/source-controller",
            "-n",
            "flux-system",
            "--expect",
            "192.168.2.20",
            "-o",
            "json",
        ],
    )
    .await;
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
        json!(["192.168.2.20"]),
        "{}",
        r.dump()
    );
    assert_eq!(leftovers(&sc.twin.store()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_refused_and_unknown_image_is_a_pull_error() {
    if skip() {
        return;
    }
    let sc = start().await;
    let kc = sc.twin.kubeconfig_path();
    sc.twin.reset_requests();
    for bad in [
        "gitea.prod.example.dev;id",
        "$(touch /tmp/pwned)",
        "-n",
        "a b",
    ] {
        let r = run_bin(kc, &["-n", "flux-system", "--", bad]).await;
        assert_eq!(r.code, Some(2), "{bad}: {}", r.dump());
    }
    assert_eq!(
        sc.twin.request_log().count("create", Some("jobs")),
        0,
        "refused before touching the cluster"
    );

    let r = run_bin(
        kc,
        &[
            "gitea.prod.example.dev",
            "-n",
            "flux-system",
            "--image",
            "nosuch.example/probe:1",
        ],
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert!(r.stderr.contains("ErrImagePull"), "{}", r.dump());
    assert_eq!(leftovers(&sc.twin.store()), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_after_the_probe_ran_deletes_it() {
    if skip() {
        return;
    }
    let sc = start().await;
    // Hold the log read so the binary is mid-run when interrupted; the probe itself runs.
    sc.twin.faults().add(twin::Fault {
        matcher: twin::FaultMatch {
            resource: Some("pods/log".into()),
            ..Default::default()
        },
        trigger: twin::Trigger::Always,
        action: twin::FaultAction::Latency(Duration::from_secs(600)),
    });
    let store = sc.twin.store();
    let pods = store.gvr("", "v1", "pods").unwrap();
    let mut w = store.watch(&pods, Some("flux-system"), None).unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(sc.twin.kubeconfig_path())
        .args([
            "gitea.prod.example.dev",
            "-n",
            "flux-system",
            "--timeout",
            "5m",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // the probe pod ran for real and succeeded
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(ev) = w.next().await {
            if ev.object["metadata"]["labels"]["app.kubernetes.io/managed-by"]
                == "kubectl-podresolve"
                && ev.object["status"]["phase"] == "Succeeded"
            {
                return;
            }
        }
    })
    .await
    .expect("probe pod Succeeded");
    // The binary is mid-run: its pods/log read is held (or its watch has not delivered yet).
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
    assert_eq!(leftovers(&store), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_from_the_pod_reaches_the_pinned_vip_or_says_why_not() {
    if skip() {
        return;
    }
    let sc = start().await;
    let r = run_bin(
        sc.twin.kubeconfig_path(),
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
    )
    .await;
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
        json!(["192.168.2.20"]),
        "{}",
        r.dump()
    );
    // Without --image, --git (and --tls) pick the tools image, which has git and openssl: the
    // same real git answer, no "not found in image" (issue 17: the default image could not run
    // every check offered).
    let r = run_bin(
        sc.twin.kubeconfig_path(),
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
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.dump());
    let v = r.json();
    assert_eq!(
        v["probe"]["image"],
        "nicolaka/netshoot:v0.14",
        "{}",
        r.dump()
    );
    assert_eq!(v["git"]["rc"], 128, "{}", r.dump());
    let tls = &v["hosts"][0]["tls"];
    assert_ne!(tls["rc"], 127, "openssl ran: {}", r.dump());
    assert!(!r.stdout.contains("not found in image"), "{}", r.dump());
    // alpine, asked for explicitly, has no git: the probe says so (exit 127), as on the real
    // image.
    let r = run_bin(
        sc.twin.kubeconfig_path(),
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
    )
    .await;
    assert_eq!(r.code, Some(1), "{}", r.dump());
    assert_eq!(r.json()["git"]["rc"], 127, "{}", r.dump());
    assert_eq!(leftovers(&sc.twin.store()), Vec::<String>::new());
}

/// Issue 19 item 1 (kubernetes/kubernetes#49113): a pod whose dnsConfig adds the search domain
/// `wild.example`, where CoreDNS pins `podinfo.dev.example.local.wild.example`. With ndots:5
/// the pod's libc tries the search domains before the name itself, so the search-expanded name
/// answers (192.168.2.99), while BusyBox nslookup queries the dotted name as is (the upstream's
/// 172.18.255.200). The report must say which query answered and why, from the libc result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_domain_answer_is_derived_from_libc_and_explained() {
    if skip() {
        return;
    }
    let sc = start().await;
    let store = sc.twin.store();
    let cms = store.gvr("", "v1", "configmaps").unwrap();
    let cm = store.get(&cms, Some("kube-system"), "coredns").unwrap();
    let corefile = cm["data"]["Corefile"].as_str().unwrap().replace(
        "192.168.2.20 gitea.prod.example.dev\n",
        "192.168.2.20 gitea.prod.example.dev\n           192.168.2.99 podinfo.dev.example.local.wild.example\n",
    );
    store
        .patch(
            &cms,
            Some("kube-system"),
            "coredns",
            twin::PatchKind::Merge,
            &json!({"data": {"Corefile": corefile}}),
            "test",
        )
        .unwrap();
    let pe = sc.podexec.as_ref().expect("podexec runs");
    let records = pe.sync_dns().await.unwrap();
    assert!(
        records.contains("podinfo.dev.example.local.wild.example"),
        "{records}"
    );
    pe.set_upstream("podinfo.dev.example.local", &["172.18.255.200".to_string()])
        .await
        .unwrap();
    let pods = store.gvr("", "v1", "pods").unwrap();
    store
        .create(
            &pods,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "web", "namespace": "flux-system"},
                   "spec": {"dnsPolicy": "ClusterFirst",
                            "dnsConfig": {"searches": ["wild.example"]},
                            "containers": [{"name": "web", "image": "busybox:1.36",
                                            "command": ["sleep", "3600"]}]}}),
        )
        .unwrap();
    let mut w = store.watch(&pods, Some("flux-system"), Some("0")).unwrap();
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(ev) = w.next().await {
            if ev.object["metadata"]["name"] == "web" && ev.object["status"]["phase"] == "Running" {
                return;
            }
        }
    })
    .await
    .expect("pod web Running");

    let args = [
        "podinfo.dev.example.local",
        "--from",
        "pod/web",
        "-n",
        "flux-system",
    ];
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let r = run_bin(sc.twin.kubeconfig_path(), &json_args).await;
    assert_eq!(r.code, Some(0), "{}", r.dump());
    let v = r.json();
    let h = &v["hosts"][0];
    assert_eq!(
        h["pod"]["addresses"],
        json!(["192.168.2.99"]),
        "{}",
        r.dump()
    );
    assert_eq!(
        h["pod"]["dns"]["addresses"],
        json!(["172.18.255.200"]),
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
    assert_eq!(last["answered"], true);
    assert_eq!(last["answeredBy"], "hosts");
    assert_eq!(
        steps.iter().filter(|s| s["answered"] == true).count(),
        1,
        "{}",
        r.dump()
    );
    assert!(
        !steps
            .iter()
            .any(|s| s["query"] == "podinfo.dev.example.local."),
        "the name as is was never asked by libc: {}",
        r.dump()
    );
    let notes = h["notes"].to_string();
    assert!(notes.contains("getent and nslookup disagree"), "{notes}");
    assert!(notes.contains("BusyBox >= 1.29 nslookup"), "{notes}");

    let r = run_bin(sc.twin.kubeconfig_path(), &args).await;
    assert_eq!(r.code, Some(0), "{}", r.dump());
    if std::env::var_os("PODRESOLVE_SHOW").is_some() {
        eprintln!("{}", r.dump());
    }
    assert!(
        r.stdout.contains(
            "answered by the search domain wild.example (podinfo.dev.example.local.wild.example.) because podinfo.dev.example.local has fewer than ndots:5 dots (3)"
        ),
        "{}",
        r.dump()
    );
    assert!(
        r.stdout
            .contains("=> podinfo.dev.example.local.wild.example.: hosts (pinned to 192.168.2.99)"),
        "{}",
        r.dump()
    );
    assert_eq!(leftovers(&store), Vec::<String>::new());
}

/// Issue 19 item 3 (kubestellar/kubestellar#1192): the workstation answers from its /etc/hosts
/// (the binary runs in a private mount namespace whose /etc/hosts has the entry), the pod cannot
/// resolve the name: the report says where the workstation's answer came from and the
/// cluster-side fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workstation_answer_from_etc_hosts_is_named_with_the_cluster_fix() {
    if skip() {
        return;
    }
    let sc = start().await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    text.push_str("10.0.0.42\tgitea.lab.example\n");
    std::fs::write(&hosts, text).unwrap();
    let out = tokio::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
        .arg(&hosts)
        .arg(env!("CARGO_BIN_EXE_kubectl-podresolve"))
        .arg("--kubeconfig")
        .arg(sc.twin.kubeconfig_path())
        .args(["gitea.lab.example", "-n", "flux-system", "-o", "json"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), out)
        .await
        .expect("binary finishes")
        .unwrap();
    let r = RunOut {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    };
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
    assert_eq!(leftovers(&sc.twin.store()), Vec::<String>::new());
}
