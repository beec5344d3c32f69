//! Probe-image pods on the real cluster: the node agent hands them to the twin's pod runtime
//! (PodExec as a client of the real apiserver), which runs them for real in network and mount
//! namespaces against dnsmasq built from the real `kube-system/coredns` ConfigMap and Services;
//! the real job controller completes the Job; `kubectl logs` goes through the real
//! kube-apiserver to the node agent's kubelet endpoint over TLS.
//!
//! Skips (with a message) when the pod runtime cannot run here (root, unshare, dnsmasq, busybox).

use std::time::Duration;

use realcluster::Cluster;
use realcluster::testkit::{condition, eventually};

fn cluster() -> Option<&'static Cluster> {
    let m = twin::podexec::missing_prerequisites();
    if !m.is_empty() {
        eprintln!("SKIPPED: the pod runtime needs {}", m.join(", "));
        return None;
    }
    Some(Cluster::shared().unwrap_or_else(|e| panic!("{e}")))
}

fn ns(c: &Cluster, name: &str) {
    let _ = c.kubectl(&["create", "namespace", name]);
}

#[test]
fn a_busybox_job_runs_for_real_and_kubectl_logs_reads_it_through_the_apiserver() {
    let Some(c) = cluster() else { return };
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
    let Some(c) = cluster() else { return };
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
    let Some(c) = cluster() else { return };
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
