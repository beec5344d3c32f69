//! The REAL kubelet (v1.36.3) on containerd v2.4.2 and runc v1.5.3 as a second Node of a real
//! cluster (`ClusterOptions::real_kubelet`, tests/realcluster/src/realnode.rs): its Node
//! becomes Ready by the kubelet's own report, a Deployment pinned to it runs a real container
//! from an image containerd pulls from the cluster's OCI registry, the kubelet reports its
//! crash loop, `kubectl gitops verify` names it, and stopping the node leaves nothing behind.
//! One test on a cluster of its own (dropped at its end): every value asserted is one the real
//! kubelet, containerd or the real controllers wrote.

use std::process::Command;
use std::time::Duration;

use realcluster::ClusterOptions;
use realcluster::realnode::{CONTAINERD_VERSION, KUBELET_VERSION, REAL_NODE_NAME};
use realcluster::testkit::eventually;
use serde_json::Value;

const VERIFY: &str = crate::bin!("kubectl-gitops-verify");
/// Bounds for a loaded 2-core machine, not expected durations.
const T: Duration = Duration::from_secs(300);

fn pod_of<'a>(pods: &'a Value, app: &str) -> Option<&'a Value> {
    pods["items"]
        .as_array()?
        .iter()
        .find(|p| p["metadata"]["labels"]["app"] == app)
}

#[test]
fn a_crash_loop_on_the_real_kubelet_is_reported_by_it_and_named_by_gitops_verify() {
    let c = crate::start_cluster(ClusterOptions {
        real_kubelet: true,
        ..ClusterOptions::default()
    })
    .unwrap_or_else(|e| panic!("the real kubelet's cluster did not start: {e}"));

    // The Node is Ready by the real kubelet's own report (its reason and version strings).
    let node = eventually(T, "the real kubelet's Node is Ready", || {
        let n = c.get_json(&["get", "node", REAL_NODE_NAME]);
        let ready = n["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        (ready["status"] == "True").then_some((n, ready))
    });
    let (node, ready) = node;
    assert_eq!(ready["reason"], "KubeletReady", "{ready:#}");
    let info = &node["status"]["nodeInfo"];
    assert_eq!(info["kubeletVersion"], KUBELET_VERSION, "{info:#}");
    assert_eq!(
        info["containerRuntimeVersion"],
        format!(
            "containerd://{}",
            CONTAINERD_VERSION.trim_start_matches('v')
        ),
        "{info:#}"
    );
    // The agent's Node is still there beside it.
    c.get_json(&["get", "node", realcluster::node::NODE_NAME]);

    // A Deployment pinned to the real node whose container exits 3 after 5 s, from the BusyBox
    // image containerd pulls from the cluster's registry.
    let image = c.real_node(|n| n.expect("real node").busybox_image().to_owned());
    let name = "kl-crash";
    let deploy = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: crasher\n  namespace: {name}\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3600\n  selector:\n    matchLabels: {{app: crasher}}\n  template:\n    metadata:\n      labels: {{app: crasher}}\n    spec:\n      nodeName: {REAL_NODE_NAME}\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: crasher\n        image: {image}\n        command: [sh, -c, 'sleep 5; exit 3']\n"
    );
    let ns = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n");
    c.fleet(
        name,
        &[("ns.yaml", &ns), ("crasher.yaml", &deploy)],
        "  interval: 100h\n  path: ./\n  prune: true\n  wait: true\n  timeout: 1m\n",
    )
    .unwrap();

    // The kubelet's report, polled: CrashLoopBackOff at some point, and a status with at
    // least two restarts whose last run ended with exit code 3.
    let mut saw_backoff = None;
    let status = eventually(
        T,
        "restartCount >= 2, exit 3 and CrashLoopBackOff seen",
        || {
            let pods = c.get_json(&["-n", name, "get", "pods"]);
            let p = pod_of(&pods, "crasher")?;
            assert_eq!(p["spec"]["nodeName"], REAL_NODE_NAME, "{p:#}");
            let cs = p["status"]["containerStatuses"][0].clone();
            if cs["state"]["waiting"]["reason"] == "CrashLoopBackOff" {
                saw_backoff = Some(cs.clone());
            }
            (saw_backoff.is_some()
                && cs["restartCount"].as_i64() >= Some(2)
                && cs["lastState"]["terminated"]["exitCode"] == 3)
                .then_some(cs)
        },
    );
    let backoff = saw_backoff.unwrap();
    assert!(
        backoff["state"]["waiting"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("restarting failed container=crasher")),
        "{backoff:#}"
    );
    assert_eq!(
        status["lastState"]["terminated"]["reason"], "Error",
        "{status:#}"
    );
    assert!(
        status["containerID"]
            .as_str()
            .is_some_and(|id| id.starts_with("containerd://")),
        "{status:#}"
    );
    assert!(
        status["imageID"]
            .as_str()
            .is_some_and(|id| id.contains("@sha256:")),
        "{status:#}"
    );

    // kubectl gitops verify names the workload broken, with the kubelet's reason (polled: the
    // container is Running between its crashes).
    let (w, report) = eventually(T, "gitops verify names CrashLoopBackOff", || {
        let out = Command::new(VERIFY)
            .arg("--kubeconfig")
            .arg(c.kubeconfig())
            .args(["--source", &format!("gitrepository/{name}"), "-o", "json"])
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let w = r["links"]
            .as_array()?
            .iter()
            .find(|l| l["id"] == "workloads")?
            .clone();
        eprintln!(
            "kubelet test: gitops verify exit {:?}, workloads {}: {}",
            out.status.code(),
            w["verdict"],
            w["evidence"]
        );
        (out.status.code() == Some(1)
            && w["verdict"] == "broken"
            && w.to_string().contains("CrashLoopBackOff"))
        .then_some((w, r))
    });
    assert!(w.to_string().contains("crasher"), "{report:#}");

    // Teardown of the node alone: no process, mount, cgroup or bridge of it is left.
    let (pid, node_dir, cgroup, bridge) = c.real_node(|n| {
        let n = n.expect("real node");
        (
            n.pid().expect("running"),
            n.dir().to_owned(),
            n.cgroup_name().to_owned(),
            n.bridge().to_owned(),
        )
    });
    let dir = node_dir.to_string_lossy().into_owned();
    // Before: the node's processes (containerd, its shims, the kubelet) name the dir.
    let node_procs = || -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(&dir))
            .collect()
    };
    assert!(
        node_procs().iter().any(|p| p.contains("containerd-shim")),
        "no shim runs: {:?}",
        node_procs()
    );
    let cgroup_dirs = || -> Vec<String> {
        std::fs::read_dir("/sys/fs/cgroup")
            .unwrap()
            .flatten()
            .map(|h| h.path().join(&cgroup))
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .collect()
    };
    assert!(!cgroup_dirs().is_empty(), "no cgroup {cgroup}");
    c.stop_real_node();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "unshare {pid} still runs"
    );
    let left = eventually(
        Duration::from_secs(30),
        "the node's processes are gone",
        || {
            let left = node_procs();
            left.is_empty().then_some(left)
        },
    );
    assert!(left.is_empty());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.lines().any(|l| l.contains(&dir)),
        "mounts left under {dir}"
    );
    assert_eq!(cgroup_dirs(), Vec::<String>::new(), "cgroups left");
    let link = Command::new("ip")
        .args(["link", "show", &bridge])
        .output()
        .unwrap();
    assert!(!link.status.success(), "bridge {bridge} left");
    assert!(
        !Command::new("pgrep")
            .args(["-f", &dir])
            .status()
            .unwrap()
            .success(),
        "pgrep -f {dir} finds a process"
    );
}
