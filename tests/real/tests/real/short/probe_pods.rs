//! Probe-image pods on the real cluster: the node agent hands them to the twin's pod runtime
//! (PodExec as a client of the real apiserver), which runs them for real in network and mount
//! namespaces against dnsmasq built from the real `kube-system/coredns` ConfigMap and Services;
//! the real job controller completes the Job; `kubectl logs` goes through the real
//! kube-apiserver to the node agent's kubelet endpoint over TLS.
//!
//! The pod runtime's own rules as a kubelet (resolver files, cluster DNS from the ConfigMap and
//! Services, the upstream, exit codes and container states, deadline and deletion, the
//! registry list of pullable images) are proved here too: they were proved on the twin's
//! in-memory store until it was retired (session 6).
//!
//! Skips (with a message) when the pod runtime cannot run here (root, unshare, dnsmasq, busybox).

use std::time::Duration;

use realcluster::Cluster;
use realcluster::testkit::{condition, eventually};

fn cluster() -> Option<realcluster::Lease> {
    let m = twin::podexec::missing_prerequisites();
    if !m.is_empty() {
        eprintln!("SKIPPED: the pod runtime needs {}", m.join(", "));
        return None;
    }
    static PROBES: realcluster::ClusterCell = realcluster::ClusterCell::new();
    Some(crate::group_cluster(&PROBES))
}

fn ns(c: &Cluster, name: &str) {
    let _ = c.kubectl(&["create", "namespace", name]);
}

#[test]
fn a_busybox_job_runs_for_real_and_kubectl_logs_reads_it_through_the_apiserver() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    ns(c, "probe-logs");
    // The pod's resolv.conf is the kubelet's for its namespace, and the ClusterIP of
    // kube-dns (a real Service) answers its name through the cluster DNS.
    c.apply_yaml(
        "apiVersion: batch/v1
kind: Job
metadata: {name: hello, namespace: probe-logs}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: [sh, -c, 'echo line-1; echo line-2; cat /etc/resolv.conf; nslookup kube-dns.kube-system.svc.cluster.local; echo line-last']
",
    )
    .unwrap();
    let job = eventually(Duration::from_secs(60), "Job Complete", || {
        let j = c.get_json(&["-n", "probe-logs", "get", "job", "hello"]);
        (condition(&j, "Complete")["status"] == "True").then_some(j)
    });
    assert_eq!(job["status"]["succeeded"], 1, "{job}");
    let logs = c
        .kubectl(&["-n", "probe-logs", "logs", "job/hello"])
        .unwrap();
    assert!(logs.starts_with("line-1\nline-2\n"), "{logs}");
    assert!(
        logs.contains("search probe-logs.svc.cluster.local svc.cluster.local cluster.local"),
        "{logs}"
    );
    assert!(logs.contains("nameserver 10.96.0.10"), "{logs}");
    assert!(logs.contains("Address: 10.96.0.10"), "{logs}");
    assert!(logs.ends_with("line-last\n"), "{logs}");
    // The query parameters kubectl sends for --tail and --limit-bytes.
    let tail = c
        .kubectl(&["-n", "probe-logs", "logs", "job/hello", "--tail=1"])
        .unwrap();
    assert_eq!(tail, "line-last\n");
    let limited = c
        .kubectl(&["-n", "probe-logs", "logs", "job/hello", "--limit-bytes=4"])
        .unwrap();
    assert_eq!(limited, "line");
    // What the node agent cannot give is refused, never answered differently.
    let err = c
        .kubectl(&["-n", "probe-logs", "logs", "job/hello", "--timestamps"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("timestamps is not supported"), "{err}");
    // The pod status is the runtime's: exit 0, Completed, on our node.
    let pods = c.get_json(&["-n", "probe-logs", "get", "pods", "-l", "job-name=hello"]);
    let pod = &pods["items"][0];
    assert_eq!(pod["spec"]["nodeName"], realcluster::node::NODE_NAME);
    assert_eq!(pod["status"]["phase"], "Succeeded", "{pod}");
    let term = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(term["exitCode"], 0, "{pod}");
    assert_eq!(term["reason"], "Completed", "{pod}");
    let _ = c.kubectl(&["delete", "namespace", "probe-logs", "--wait=false"]);
}

#[test]
fn a_failing_probe_fails_its_job_through_the_real_job_controller_and_follow_ends() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    ns(c, "probe-fail");
    c.apply_yaml(
        "apiVersion: batch/v1
kind: Job
metadata: {name: fails, namespace: probe-fail}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: alpine:3.22
        command: [sh, -c, 'echo before; sleep 5; echo after; exit 3']
",
    )
    .unwrap();
    // `kubectl logs -f` (follow=true) streams until the container ends, then returns (when
    // the poll below sees the pod only after it ended, the log is already closed: the same
    // output, so the test does not depend on catching it Running).
    let pod = eventually(Duration::from_secs(60), "pod started", || {
        let pods = c.get_json(&["-n", "probe-fail", "get", "pods", "-l", "job-name=fails"]);
        let p = pods["items"][0].clone();
        (p["status"]["phase"] == "Running" || p["status"]["phase"] == "Failed")
            .then(|| p["metadata"]["name"].as_str().unwrap().to_owned())
    });
    let followed = c
        .kubectl(&["-n", "probe-fail", "logs", "-f", &pod])
        .unwrap();
    assert_eq!(followed, "before\nafter\n");
    let job = eventually(Duration::from_secs(60), "Job Failed", || {
        let j = c.get_json(&["-n", "probe-fail", "get", "job", "fails"]);
        (condition(&j, "Failed")["status"] == "True").then_some(j)
    });
    // Written by kube-controller-manager's job controller, not by us.
    assert_eq!(
        condition(&job, "Failed")["reason"],
        "BackoffLimitExceeded",
        "{job}"
    );
    let p = c.get_json(&["-n", "probe-fail", "get", "pod", &pod]);
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3,
        "{p}"
    );
    let _ = c.kubectl(&["delete", "namespace", "probe-fail", "--wait=false"]);
}

/// The Flux controllers run as host processes; `kubectl logs` of their pods goes through the
/// real apiserver to the node agent's log endpoint, which serves the process's output file.
#[test]
fn kubectl_logs_of_a_host_process_controller_is_its_output() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let pods = c.get_json(&[
        "-n",
        "flux-system",
        "get",
        "pods",
        "-l",
        "app=source-controller",
    ]);
    let pod = pods["items"][0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let file = std::fs::read_dir(c.dir().join("logs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("flux-system_{pod}-")))
        })
        .unwrap_or_else(|| panic!("no log file of {pod}"));
    let on_disk = std::fs::read(&file).unwrap();
    assert!(on_disk.len() >= 64, "{} is short", file.display());
    let served = c
        .kubectl(&["-n", "flux-system", "logs", &pod, "--limit-bytes=64"])
        .unwrap();
    assert_eq!(served.as_bytes(), &on_disk[..64]);
}

// ---- the pod runtime as a kubelet (ported from the twin's store-backed podexec suite) ----

/// CoreDNS `hosts` pins every test of this group sees (a split-horizon name, as operators
/// pin it in kube-system/coredns).
const PINS: &str = "192.168.2.20 gitea.prod.example.dev";

/// Sets [`PINS`] and the upstream records once per cluster ([`Cluster::memo`]), before any
/// test that reads them: the tests below only add to this, never remove from it.
fn dns(c: &Cluster) {
    /// The pins and records are set on this cluster.
    struct Pinned;
    c.memo(|| {
        c.set_corefile_hosts(PINS).unwrap();
        c.set_upstream("registry.example.com", &["203.0.113.7"])
            .unwrap();
        c.set_upstream("gitea.prod.example.dev", &["203.0.113.99"])
            .unwrap();
        Pinned
    });
}

/// Creates Pod `ns/name` (restartPolicy Never: the runtime never restarts a container) with
/// `spec`.
fn create_pod(c: &Cluster, ns: &str, name: &str, mut spec: serde_json::Value) {
    spec["restartPolicy"] = serde_json::json!("Never");
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns}, "spec": spec});
    c.apply_yaml(&pod.to_string()).unwrap();
}

/// The pod as the apiserver has it once `pred` holds (polled for up to 120 s).
fn wait_pod(
    c: &Cluster,
    ns: &str,
    name: &str,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    eventually(
        Duration::from_secs(120),
        &format!("pod {ns}/{name}: {what}"),
        || {
            let p = c.get_json(&["-n", ns, "get", "pod", name]);
            pred(&p).then_some(p)
        },
    )
}

fn terminal(p: &serde_json::Value) -> bool {
    matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

/// `kubectl logs` (through the real apiserver to the node agent's log endpoint).
fn logs(c: &Cluster, ns: &str, name: &str) -> String {
    c.kubectl(&["-n", ns, "logs", name]).unwrap()
}

/// Bind mounts of /etc/resolv.conf or /etc/hosts in this process's mount namespace (the
/// runtime mounts them in each container's private namespace only).
fn resolv_mounts() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" /etc/resolv.conf ") || l.contains(" /etc/hosts "))
        .count()
}

/// Whether host process `pid` is gone (or a zombie waiting for its parent).
fn process_gone(pid: u32) -> bool {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    st.is_empty() || st.contains("State:\tZ")
}

/// The first line of a log that starts with the container's `$$` (its host pid: the runtime
/// gives containers no PID namespace).
fn pid_line(log: &str) -> u32 {
    log.lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid on the first log line: {log}"))
}

/// A probe pod's resolver files are the kubelet's (ClusterFirst search list and ndots:5,
/// hostAliases), names resolve through the cluster DNS built from the real
/// kube-system/coredns ConfigMap and Services (the CoreDNS hosts pin before the upstream's
/// answer, a short Service name through the search list, other names forwarded to the
/// upstream, NXDOMAIN), it runs as the pod's user with the pod's hostname, no mount leaks
/// into the host's namespace and its process is gone when the pod is Succeeded.
#[test]
fn a_probe_pod_resolves_through_the_cluster_dns_as_the_kubelet_set_it_up() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    dns(c);
    ns(c, "probe-dns");
    let mounts_before = resolv_mounts();
    create_pod(
        c,
        "probe-dns",
        "probe",
        serde_json::json!({"containers": [{"name": "c", "image": "alpine:3.22",
            "securityContext": {"runAsUser": 65534, "runAsGroup": 65534},
            "command": ["sh", "-c", "echo $$; id -u; hostname; cat /etc/resolv.conf; cat /etc/hosts; for h in \"$@\"; do echo \"== $h\"; getent ahosts \"$h\"; echo \"rc=$?\"; done; nslookup gitea.prod.example.dev; command -v openssl || echo no-openssl",
                "probe", "gitea.prod.example.dev", "kube-dns.kube-system", "registry.example.com", "nosuch.example.dev", "pinned.example.dev"]}],
            "hostAliases": [{"ip": "10.0.0.5", "hostnames": ["pinned.example.dev"]}]}),
    );
    let p = wait_pod(c, "probe-dns", "probe", "ended", terminal);
    let out = logs(c, "probe-dns", "probe");
    assert_eq!(p["status"]["phase"], "Succeeded", "{out}\n{}", p["status"]);
    let st = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(st["exitCode"], 0, "{p}");
    assert_eq!(st["reason"], "Completed", "{p}");
    let pid = pid_line(&out);
    assert!(process_gone(pid), "container process {pid} still runs");
    let rest = out.split_once('\n').unwrap().1;
    assert!(rest.starts_with("65534\nprobe\n"), "{out}");
    assert!(
        out.contains("search probe-dns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"),
        "{out}"
    );
    assert!(
        out.contains("# Entries added by HostAliases.\n10.0.0.5\tpinned.example.dev\n"),
        "{out}"
    );
    // The CoreDNS hosts pin answers before the upstream (plugin order), though the upstream
    // says 203.0.113.99.
    assert!(
        out.contains("== gitea.prod.example.dev\n192.168.2.20    STREAM gitea.prod.example.dev"),
        "{out}"
    );
    // ndots:5 and the search list: the short name is kube-dns.kube-system.svc.cluster.local,
    // the real Service's ClusterIP.
    assert!(
        out.contains("10.96.0.10      STREAM kube-dns.kube-system.svc.cluster.local"),
        "{out}"
    );
    // Outside the cluster zone: forwarded to the upstream.
    assert!(
        out.contains("203.0.113.7     STREAM registry.example.com"),
        "{out}"
    );
    // NXDOMAIN everywhere: getent exits 2.
    assert!(out.contains("== nosuch.example.dev\nrc=2\n"), "{out}");
    // hostAliases: answered by libc from /etc/hosts.
    assert!(
        out.contains("10.0.0.5        STREAM pinned.example.dev"),
        "{out}"
    );
    // BusyBox nslookup on the wire, to the ClusterIP.
    assert!(out.contains("Server:\t\t10.96.0.10"), "{out}");
    assert!(out.contains("Address: 192.168.2.20"), "{out}");
    // alpine has no openssl: the image's tools, not the host's.
    assert!(out.contains("no-openssl"), "{out}");
    assert_eq!(resolv_mounts(), mounts_before, "no mount in our namespace");
    let _ = c.kubectl(&["delete", "namespace", "probe-dns", "--wait=false"]);
}

/// Exit codes and the kubelet's container states: a failing command (Failed, Error, the log
/// tail as message under FallbackToLogsOnError), a command missing from the image
/// (StartError, 128), runAsNonRoot over an image that runs as root (Pending,
/// CreateContainerConfigError with the kubelet's message), and dnsPolicy Default (the
/// node's resolver: the upstream's answer, not the CoreDNS pin).
#[test]
fn exit_codes_start_error_run_as_non_root_and_dns_policy_default() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    dns(c);
    let n = "probe-exit";
    ns(c, n);
    create_pod(
        c,
        n,
        "fails",
        serde_json::json!({"containers": [{"name": "c", "image": "busybox:1.36", "terminationMessagePolicy": "FallbackToLogsOnError",
            "command": ["sh", "-c", "echo boom >&2; exit 3"]}]}),
    );
    create_pod(
        c,
        n,
        "nocmd",
        serde_json::json!({"containers": [{"name": "c", "image": "alpine:3.22", "command": ["openssl", "version"]}]}),
    );
    create_pod(
        c,
        n,
        "default",
        serde_json::json!({"dnsPolicy": "Default", "containers": [{"name": "c", "image": "alpine:3.22",
            "command": ["sh", "-c", "cat /etc/resolv.conf; getent ahosts gitea.prod.example.dev"]}]}),
    );
    create_pod(
        c,
        n,
        "asroot",
        serde_json::json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "c", "image": "alpine:3.22", "command": ["true"]}]}),
    );
    let p = wait_pod(c, n, "asroot", "CreateContainerConfigError", |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            == "CreateContainerConfigError"
    });
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    let uid = p["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        format!(
            "container has runAsNonRoot and image will run as root (pod: \"asroot_{n}({uid})\", container: c)"
        ),
        "{p}"
    );

    let p = wait_pod(c, n, "fails", "ended", terminal);
    assert_eq!(p["status"]["phase"], "Failed", "{p}");
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(t["exitCode"], 3, "{p}");
    assert_eq!(t["reason"], "Error", "{p}");
    assert_eq!(t["message"], "boom", "{p}");
    assert_eq!(logs(c, n, "fails"), "boom\n");

    let p = wait_pod(c, n, "nocmd", "ended", terminal);
    assert_eq!(p["status"]["phase"], "Failed", "{p}");
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(t["exitCode"], 128, "{p}");
    assert_eq!(t["reason"], "StartError", "{p}");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("exec: \"openssl\": executable file not found in $PATH"),
        "{p}"
    );

    let p = wait_pod(c, n, "default", "ended", terminal);
    let out = logs(c, n, "default");
    assert_eq!(p["status"]["phase"], "Succeeded", "{out}\n{p}");
    assert!(out.starts_with("nameserver 172.18.0.1\n"), "{out}");
    assert!(
        out.contains("203.0.113.99    STREAM gitea.prod.example.dev"),
        "{out}"
    );
    let _ = c.kubectl(&["delete", "namespace", n, "--wait=false"]);
}

/// The cluster DNS follows the API: a new CoreDNS hosts pin in the real kube-system/coredns
/// ConfigMap and a new Service (its ClusterIP allocated by the real apiserver) answer in a
/// pod started after the reload; before, the pinned name was NXDOMAIN.
#[test]
fn a_corefile_pin_and_a_new_service_answer_after_the_reload() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    dns(c);
    let n = "probe-reload";
    ns(c, n);
    let script = "getent ahosts new.example.dev; echo \"rc=$?\"; getent ahosts web; echo \"rc=$?\"";
    create_pod(
        c,
        n,
        "before",
        serde_json::json!({"containers": [{"name": "c", "image": "alpine:3.22", "command": ["sh", "-c", script]}]}),
    );
    let p = wait_pod(c, n, "before", "ended", terminal);
    let out = logs(c, n, "before");
    assert_eq!(p["status"]["phase"], "Succeeded", "{out}");
    assert_eq!(out, "rc=2\nrc=2\n");

    c.apply_yaml(&format!(
        "apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {n}}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, protocol: TCP}}]
"
    ))
    .unwrap();
    let ip = c.get_json(&["-n", n, "get", "service", "web"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(ip.starts_with("10.96."), "{ip}");
    // Rewrites the ConfigMap and waits until dnsmasq re-read the records (the Service's too).
    c.set_corefile_hosts(&format!("{PINS}\n192.168.2.30 new.example.dev"))
        .unwrap();
    create_pod(
        c,
        n,
        "after",
        serde_json::json!({"containers": [{"name": "c", "image": "alpine:3.22", "command": ["sh", "-c", script]}]}),
    );
    let p = wait_pod(c, n, "after", "ended", terminal);
    let out = logs(c, n, "after");
    assert_eq!(p["status"]["phase"], "Succeeded", "{out}");
    assert!(
        out.starts_with("192.168.2.30    STREAM new.example.dev\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!("{ip:<15} STREAM web.{n}.svc.cluster.local\n")),
        "{out}"
    );
    assert!(!out.contains("rc=2"), "{out}");
    let _ = c.kubectl(&["delete", "namespace", n, "--wait=false"]);
}

/// activeDeadlineSeconds SIGKILLs the container (Failed, DeadlineExceeded, exit 137, the log
/// up to then and no process left); deleting a running pod kills its process, and the node agent confirms the
/// deletion so the pod is gone from the apiserver.
#[test]
fn the_deadline_and_a_deletion_kill_the_process() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let n = "probe-kill";
    ns(c, n);
    create_pod(
        c,
        n,
        "slow",
        serde_json::json!({"activeDeadlineSeconds": 2, "containers": [{"name": "c", "image": "busybox:1.36",
            "command": ["sh", "-c", "echo $$; echo started; sleep 600"]}]}),
    );
    create_pod(
        c,
        n,
        "doomed",
        serde_json::json!({"containers": [{"name": "c", "image": "busybox:1.36",
            "command": ["sh", "-c", "echo $$; exec sleep 600"]}]}),
    );
    let p = wait_pod(c, n, "slow", "ended", terminal);
    assert_eq!(p["status"]["phase"], "Failed", "{p}");
    assert_eq!(p["status"]["reason"], "DeadlineExceeded", "{p}");
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137,
        "{p}"
    );
    // The deadline counts from the pod's start, so on a loaded machine the kill may come
    // before the shell printed anything: the log is some prefix of "<pid>\nstarted\n", and
    // when the pid is there, that process is gone.
    let out = logs(c, n, "slow");
    let mut lines = out.lines();
    if let Some(pid) = lines.next() {
        let pid: u32 = pid.parse().unwrap_or_else(|_| panic!("{out}"));
        assert!(process_gone(pid), "{pid} survived the deadline");
        assert!(matches!(lines.next(), None | Some("started")), "{out}");
        assert_eq!(lines.next(), None, "{out}");
    }

    wait_pod(c, n, "doomed", "Running", |p| {
        p["status"]["phase"] == "Running"
    });
    let pid = eventually(Duration::from_secs(60), "doomed's pid in its log", || {
        c.kubectl(&["-n", n, "logs", "doomed"])
            .ok()
            .and_then(|l| l.lines().next().and_then(|l| l.trim().parse::<u32>().ok()))
    });
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert_eq!(
        cmdline, b"sleep\x00600\x00",
        "pid {pid} is the container's sleep"
    );
    c.kubectl(&["-n", n, "delete", "pod", "doomed", "--wait=false"])
        .unwrap();
    eventually(Duration::from_secs(60), "doomed's process killed", || {
        process_gone(pid).then_some(())
    });
    eventually(Duration::from_secs(60), "doomed deleted", || {
        c.kubectl(&["-n", n, "get", "pod", "doomed"])
            .is_err()
            .then_some(())
    });
    let _ = c.kubectl(&["delete", "namespace", n, "--wait=false"]);
}

/// The registry list decides what the node agent "pulls" (references normalised as the
/// container runtime reports them: `nginx:1.25` is `docker.io/library/nginx:1.25`, a
/// repository entry with `:*` takes any tag): a listed image runs, an unlisted one shows
/// ErrImagePull with containerd's message and then ImagePullBackOff, as the kubelet does.
#[test]
fn the_registry_list_decides_what_the_node_pulls() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let n = "probe-pull";
    ns(c, n);
    c.registry().add("docker.io/library/nginx:1.25");
    c.registry().add("ghcr.io/stefanprodan/podinfo:*");
    for (name, image) in [
        ("short", "nginx:1.25"),
        ("any-tag", "ghcr.io/stefanprodan/podinfo:6.9.2"),
        ("other-tag", "nginx:1.26"),
    ] {
        create_pod(
            c,
            n,
            name,
            serde_json::json!({"containers": [{"name": "c", "image": image}]}),
        );
    }
    for name in ["short", "any-tag"] {
        let p = wait_pod(c, n, name, "Running", |p| p["status"]["phase"] == "Running");
        assert_eq!(p["status"]["containerStatuses"][0]["ready"], true, "{p}");
    }
    let p = wait_pod(c, n, "other-tag", "ErrImagePull or later", |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"].is_string()
    });
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    let p = wait_pod(c, n, "other-tag", "ImagePullBackOff", |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    });
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["waiting"]["message"],
        "Back-off pulling image \"nginx:1.26\"",
        "{p}"
    );
    let events = c.get_json(&[
        "-n",
        n,
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=other-tag",
    ]);
    let messages: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(
        messages.contains(&"Failed to pull image \"nginx:1.26\": rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nginx:1.26\": failed to resolve reference \"docker.io/library/nginx:1.26\": docker.io/library/nginx:1.26: not found"),
        "{messages:?}"
    );
    let _ = c.kubectl(&["delete", "namespace", n, "--wait=false"]);
}

/// A Job's own activeDeadlineSeconds (none on its pod template) is the real job controller's:
/// it fails the Job `DeadlineExceeded` and deletes the running pod, and the deletion kills
/// the container; the node never marks the pod Failed for it (a kubelet enforces only the
/// pod's own deadline, pkg/kubelet active_deadline.go).
#[test]
fn a_jobs_deadline_is_the_job_controllers_and_its_deletion_kills_the_pod() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let n = "probe-jobdeadline";
    ns(c, n);
    c.apply_yaml(&format!(
        "apiVersion: batch/v1
kind: Job
metadata: {{name: slow, namespace: {n}}}
spec:
  backoffLimit: 0
  activeDeadlineSeconds: 3
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
        command: [sh, -c, 'echo $$; exec sleep 600']
"
    ))
    .unwrap();
    // The pod as the runtime sees it while it runs (its pid on the first log line, when the
    // shell got that far before the deadline).
    let pod = eventually(Duration::from_secs(60), "the Job's pod", || {
        let pods = c.get_json(&["-n", n, "get", "pods", "-l", "job-name=slow"]);
        pods["items"][0]["metadata"]["name"]
            .as_str()
            .map(str::to_owned)
    });
    let pid = c
        .kubectl(&["-n", n, "logs", &pod])
        .ok()
        .and_then(|l| l.lines().next().and_then(|l| l.trim().parse::<u32>().ok()));
    let job = eventually(Duration::from_secs(90), "Job Failed", || {
        let j = c.get_json(&["-n", n, "get", "job", "slow"]);
        (condition(&j, "Failed")["status"] == "True").then_some(j)
    });
    assert_eq!(
        condition(&job, "Failed")["reason"],
        "DeadlineExceeded",
        "{job}"
    );
    // Deleted by the job controller, never Failed by the node.
    let mut seen = Vec::new();
    eventually(Duration::from_secs(60), "the pod deleted", || {
        let p = c.get_json(&["-n", n, "get", "pod", &pod]);
        if p.is_null() {
            return Some(());
        }
        seen.push(p["status"]["phase"].as_str().unwrap_or_default().to_owned());
        None
    });
    assert!(!seen.iter().any(|s| s == "Failed"), "{seen:?}");
    if let Some(pid) = pid {
        eventually(
            Duration::from_secs(30),
            "the container's process killed",
            || process_gone(pid).then_some(()),
        );
    }
    let _ = c.kubectl(&["delete", "namespace", n, "--wait=false"]);
}

/// `kubectl logs` of a Running container that has printed nothing yet is empty, as from a
/// kubelet (not "waiting to start"), and `-f` then streams what it prints. The container waits
/// for a file this test creates (the runtime gives containers the host's filesystem), so
/// "not printed yet" holds however slow the machine is.
#[test]
fn kubectl_logs_of_a_running_container_that_has_not_printed_is_empty() {
    let Some(lease) = cluster() else { return };
    let c = &lease;
    let n = "probe-quiet";
    ns(c, n);
    let go = c.dir().join("probe-quiet-go");
    let _ = std::fs::remove_file(&go);
    create_pod(
        c,
        n,
        "quiet",
        serde_json::json!({"containers": [{"name": "c", "image": "busybox:1.36",
            "command": ["sh", "-c", format!("while [ ! -e {} ]; do sleep 0.2; done; echo late", go.display())]}]}),
    );
    wait_pod(c, n, "quiet", "Running", |p| {
        p["status"]["phase"] == "Running"
    });
    assert_eq!(logs(c, n, "quiet"), "");
    std::fs::write(&go, b"").unwrap();
    let followed = c.kubectl(&["-n", n, "logs", "-f", "quiet"]).unwrap();
    assert_eq!(followed, "late\n");
    let p = wait_pod(c, n, "quiet", "ended", terminal);
    assert_eq!(p["status"]["phase"], "Succeeded", "{p}");
    let _ = c.kubectl(&["delete", "namespace", n, "--wait=false"]);
}

// ---- the shared probe's HTTP(S) step (cluster_loop::probe::http) ----

/// What the test process's own curl gets for `url`, connecting to `addr` and trusting `ca`
/// (None: `-k`): the status code, the truth the probe's answer is checked against.
fn curl_truth(url: &str, addr: std::net::IpAddr, ca: Option<&std::path::Path>) -> String {
    let mut cmd = std::process::Command::new("curl");
    cmd.args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "20",
    ])
    .arg("--connect-to")
    .arg(format!("::{addr}:"));
    match ca {
        Some(ca) => cmd.arg("--cacert").arg(ca),
        None => cmd.arg("-k"),
    };
    let out = cmd.arg(url).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The probe's `--http` step from a real probe pod (nicolaka/netshoot: the pod runtime runs
/// the host's curl and openssl in the pod network) against real servers on the pod network's
/// link: git's HTTP server (the twin's front, HTTPS with its own CA) and a second one whose CA
/// no client trusts. Every status code is checked against what this process's own curl gets
/// from the same server; the TLS verdicts are the client's: trusted, wrong name, unknown CA;
/// an address the pod network has no route to answers nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_probe_reports_status_tls_verdict_and_time_from_a_pod() {
    use cluster_loop::probe::http::{HttpOutcome, HttpRequest, TlsProblem, results};
    use cluster_loop::probe::{Carrier, ProbeOptions, ProbeOwner, TOOLS_IMAGE, lifecycle};
    let Some(lease) = cluster() else { return };
    let c = &lease;
    if which_curl().is_none() {
        eprintln!("SKIPPED: no curl on this host for the netshoot image");
        return;
    }
    ns(c, "probe-http");
    let pe = c.podexec().unwrap();
    let addr = std::net::IpAddr::V4(pe.host_address());
    let host = "web.probe-http.example.dev";
    c.set_upstream(host, &[&addr.to_string()]).unwrap();
    let opts = |names: Vec<String>| twin::git::GitServerOptions {
        dns_names: names,
        listen: addr,
        ..Default::default()
    };
    let trusted = twin::git::GitServer::start(opts(vec![host.into()])).unwrap();
    let unknown_ca = twin::git::GitServer::start(opts(vec![host.into()])).unwrap();
    let system = std::fs::read_to_string(twin::podexec::IMAGE_CA_BUNDLE).unwrap_or_default();
    pe.set_image_ca_bundle(Some(&format!("{system}{}", trusted.ca_pem())))
        .unwrap();
    let path = "/org/none.git/info/refs?service=git-upload-pack";
    let ok_url = format!("https://{host}:{}{path}", trusted.https_addr().port());
    let wrong_name = format!(
        "https://other.probe-http.example.dev:{}/",
        trusted.https_addr().port()
    );
    let untrusted = format!("https://{host}:{}/", unknown_ca.https_addr().port());
    let plain = format!("http://{host}:{}{path}", trusted.http_addr().port());
    let unroutable = "http://app.probe-http.example.dev/".to_string();
    let asked = vec![
        HttpRequest::new(&ok_url, None).unwrap(),
        HttpRequest::new(&wrong_name, Some(addr)).unwrap(),
        HttpRequest::new(&untrusted, None).unwrap(),
        HttpRequest::new(&plain, None).unwrap(),
        // TEST-NET-1 (RFC 5737): the pod network has connected routes only, so the connect
        // fails inside the namespace and no packet leaves it.
        HttpRequest::new(&unroutable, Some("192.0.2.10".parse().unwrap())).unwrap(),
    ];
    let conn = cluster_loop::cli::ClusterArgs {
        kubeconfig: Some(c.kubeconfig().to_path_buf()),
        namespace: Some("probe-http".into()),
        ..Default::default()
    }
    .connect()
    .await
    .unwrap();
    let probe = ProbeOptions {
        owner: ProbeOwner::PODRESOLVE,
        namespace: "probe-http".into(),
        image: TOOLS_IMAGE.into(),
        hosts: vec![],
        tls_port: None,
        git_url: None,
        git_ref: None,
        git_secret: None,
        deadline_secs: 60,
        node: None,
        run_id: cluster_loop::probe::new_run_id(),
        source: None,
        http: asked.clone(),
    };
    let end = lifecycle::run_probe(
        &conn,
        &probe,
        Carrier::Job,
        tokio::time::Instant::now() + Duration::from_secs(90),
        "kubectl delete jobs -n probe-http -l app.kubernetes.io/managed-by=kubectl-podresolve",
        &cluster_loop::wait::Progress::hidden(),
        &lifecycle::RequestCounter::default(),
        std::future::pending(),
    )
    .await;
    pe.set_image_ca_bundle(None).unwrap();
    let log = match end.unwrap() {
        lifecycle::ProbeEnd::Finished { log, .. } => log,
        other => panic!("{other:?}"),
    };
    let r = results(
        &cluster_loop::probe::parse::ProbeLog::parse(&log),
        &asked,
        jiff::Timestamp::now(),
    );
    let truth = |url: &str, ca: Option<&std::path::Path>| curl_truth(url, addr, ca);
    // Trusted: the status the server gives this process too, the certificate's names, a time.
    assert_eq!(r[0].outcome, HttpOutcome::Answered, "{log}");
    assert_eq!(
        r[0].code.map(|c| c.to_string()),
        Some(truth(&ok_url, Some(trusted.ca_file()))),
        "{log}"
    );
    let cert = r[0].certificate.as_ref().unwrap();
    assert!(cert.names.iter().any(|n| n == host), "{cert:?}");
    assert!(cert.days_left.unwrap() >= 0, "{cert:?}");
    assert!(
        r[0].total_ms.unwrap() > 0.0 && r[0].tls_ms.is_some(),
        "{:?}",
        r[0]
    );
    assert_eq!(
        r[0].remote,
        Some(format!("{addr}:{}", trusted.https_addr().port()))
    );
    // The name the URL asks for is not in the certificate: refused, and what is behind it.
    assert_eq!(r[1].outcome, HttpOutcome::TlsRefused, "{log}");
    assert_eq!(r[1].tls_problem, Some(TlsProblem::NameMismatch), "{log}");
    assert_eq!(
        r[1].insecure_code.map(|c| c.to_string()),
        Some(truth(&wrong_name, None))
    );
    // A CA the image does not hold.
    assert_eq!(r[2].outcome, HttpOutcome::TlsRefused, "{log}");
    assert_eq!(r[2].tls_problem, Some(TlsProblem::UntrustedChain), "{log}");
    // Plain HTTP: no TLS, the same status as this process gets.
    assert_eq!(
        r[3].code.map(|c| c.to_string()),
        Some(truth(&plain, None)),
        "{log}"
    );
    assert_eq!(r[3].certificate, None);
    // Nothing to reach: no answer, never a status.
    assert_eq!(r[4].outcome, HttpOutcome::NoAnswer, "{log}");
    assert_eq!(r[4].code, None);
    assert_eq!(r[4].rc, Some(7), "{log}");
}

fn which_curl() -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("curl"))
            .find(|f| f.is_file())
    })
}

/// A real backend behind a Service, requested by name from a probe pod: BusyBox httpd (the
/// host's BusyBox applet, run by the pod runtime as the busybox image's) in a pod a Service
/// selects; the runtime puts the Service's ClusterIP on the pod network's loopback
/// (twin::podexec::vips, standing in for kube-proxy), the cluster DNS answers the Service's
/// name. The probe's HTTP step gets the file the pod wrote (200), a path it did not (404), and,
/// once the pod is deleted, no answer at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_probe_reaches_a_real_backend_through_its_service() {
    use cluster_loop::probe::http::{HttpOutcome, HttpRequest, results};
    use cluster_loop::probe::{Carrier, ProbeOptions, ProbeOwner, TOOLS_IMAGE, lifecycle};
    let Some(lease) = cluster() else { return };
    let c = &lease;
    if which_curl().is_none() {
        eprintln!("SKIPPED: no curl on this host for the netshoot image");
        return;
    }
    let ns = "probe-svc";
    crate::httpd_behind_a_service(c, ns, "httpd-probe", 18080, "served-by-httpd");
    let conn = cluster_loop::cli::ClusterArgs {
        kubeconfig: Some(c.kubeconfig().to_path_buf()),
        namespace: Some(ns.into()),
        ..Default::default()
    }
    .connect()
    .await
    .unwrap();
    let base = format!("http://httpd.{ns}.svc.cluster.local:18080");
    let asked = vec![
        HttpRequest::new(&format!("{base}/index.html"), None).unwrap(),
        HttpRequest::new(&format!("{base}/missing"), None).unwrap(),
    ];
    let probe = |asked: Vec<HttpRequest>| ProbeOptions {
        owner: ProbeOwner::PODRESOLVE,
        namespace: ns.into(),
        image: TOOLS_IMAGE.into(),
        hosts: vec![],
        tls_port: None,
        git_url: None,
        git_ref: None,
        git_secret: None,
        deadline_secs: 60,
        node: None,
        run_id: cluster_loop::probe::new_run_id(),
        source: None,
        http: asked,
    };
    let run = |o: ProbeOptions| {
        let conn = &conn;
        async move {
            let end = lifecycle::run_probe(
                conn,
                &o,
                Carrier::Job,
                tokio::time::Instant::now() + Duration::from_secs(90),
                "kubectl delete jobs -n probe-svc -l app.kubernetes.io/managed-by=kubectl-podresolve",
                &cluster_loop::wait::Progress::hidden(),
                &lifecycle::RequestCounter::default(),
                std::future::pending(),
            )
            .await
            .unwrap();
            match end {
                lifecycle::ProbeEnd::Finished { log, .. } => log,
                other => panic!("{other:?}"),
            }
        }
    };
    // The Service's address is on the pod network once the runtime saw the pod and the
    // Service: retried until then (the probe is real each time).
    let (log, r) = {
        let mut tries = 0;
        loop {
            let log = run(probe(asked.clone())).await;
            let r = results(
                &cluster_loop::probe::parse::ProbeLog::parse(&log),
                &asked,
                jiff::Timestamp::now(),
            );
            tries += 1;
            if r[0].outcome == HttpOutcome::Answered || tries == 5 {
                break (log, r);
            }
        }
    };
    let pod = c.get_json(&["-n", ns, "get", "pod", "httpd"]);
    let logs = c.kubectl(&["-n", ns, "logs", "httpd"]).unwrap_or_default();
    assert_eq!(
        r[0].outcome,
        HttpOutcome::Answered,
        "{log}\nhttpd: {}\n{logs}",
        pod["status"]
    );
    assert_eq!(r[0].code, Some(200), "{log}");
    assert_eq!(r[1].code, Some(404), "{log}");
    let svc_ip = c.get_json(&["-n", ns, "get", "service", "httpd"])["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(r[0].remote, Some(format!("{svc_ip}:18080")), "{log}");
    let logs = c.kubectl(&["-n", ns, "logs", "httpd"]).unwrap_or_default();
    // BusyBox httpd -v logs one `ADDR:PORT: response:CODE` line per request it served.
    assert!(logs.contains("response:200"), "httpd's own log: {logs}");
    // The backend gone: nothing answers at the Service's address any more.
    c.kubectl(&["-n", ns, "delete", "pod", "httpd", "--wait=true"])
        .unwrap();
    let log = run(probe(asked[..1].to_vec())).await;
    let r = results(
        &cluster_loop::probe::parse::ProbeLog::parse(&log),
        &asked[..1],
        jiff::Timestamp::now(),
    );
    assert_eq!(r[0].outcome, HttpOutcome::NoAnswer, "{log}");
    let _ = c.kubectl(&["delete", "namespace", ns, "--wait=false"]);
}
