//! podexec: resolv.conf/hosts generation (kubelet rules) and probe-image pods run for real
//! against dnsmasq in a private network namespace.
//!
//! The live tests skip (with a message) only when `unshare`/`nsenter`/`dnsmasq`/`busybox` or
//! root are missing: `apt-get install -y dnsmasq busybox bind9-dnsutils`.

use serde_json::{Value, json};
use std::time::Duration;
use twin::podexec::{self, NodeDns, PodExec, PodExecOptions, dns};
use twin::testkit::{skip_without_podexec, start_twin};
use twin::{Store, Twin, WatchEventType};

fn node() -> NodeDns {
    NodeDns {
        cluster_dns: vec!["10.96.0.10".into()],
        cluster_domain: "cluster.local".into(),
        host_nameservers: vec!["172.18.0.1".into()],
        host_searches: vec!["corp.example".into()],
        host_options: vec!["ndots:1".into(), "edns0".into()],
        node_name: "twin-node".into(),
    }
}

fn pod(ns: &str, spec: Value) -> Value {
    json!({"metadata": {"name": "p-1", "namespace": ns, "uid": "u1"}, "spec": spec})
}

#[test]
fn resolv_conf_per_dns_policy() {
    let n = node();
    // ClusterFirst (default): cluster DNS only, cluster search + node search, ndots:5 only.
    assert_eq!(
        dns::pod_resolv_conf(&pod("team", json!({})), &n),
        "search team.svc.cluster.local svc.cluster.local cluster.local corp.example\nnameserver 10.96.0.10\noptions ndots:5\n"
    );
    // Default: the node's file.
    assert_eq!(
        dns::pod_resolv_conf(&pod("team", json!({"dnsPolicy": "Default"})), &n),
        "search corp.example\nnameserver 172.18.0.1\noptions ndots:1 edns0\n"
    );
    // ClusterFirst on hostNetwork falls back to Default; ClusterFirstWithHostNet does not.
    assert_eq!(
        dns::pod_resolv_conf(
            &pod(
                "team",
                json!({"hostNetwork": true, "dnsPolicy": "ClusterFirst"})
            ),
            &n
        ),
        "search corp.example\nnameserver 172.18.0.1\noptions ndots:1 edns0\n"
    );
    assert!(
        dns::pod_resolv_conf(
            &pod(
                "kube-system",
                json!({"hostNetwork": true, "dnsPolicy": "ClusterFirstWithHostNet"})
            ),
            &n
        )
        .starts_with("search kube-system.svc.cluster.local ")
    );
    // None: only dnsConfig.
    assert_eq!(
        dns::pod_resolv_conf(
            &pod(
                "team",
                json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.2.3.4"], "searches": ["a.example"], "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}})
            ),
            &n
        ),
        "search a.example\nnameserver 1.2.3.4\noptions ndots:2 edns0\n"
    );
    // dnsConfig appended to ClusterFirst: duplicates omitted, options merged by name.
    assert_eq!(
        dns::pod_resolv_conf(
            &pod(
                "team",
                json!({"dnsConfig": {"nameservers": ["10.96.0.10", "9.9.9.9"], "searches": ["svc.cluster.local", "x.example"], "options": [{"name": "ndots", "value": "1"}, {"name": "single-request"}]}})
            ),
            &n
        ),
        "search team.svc.cluster.local svc.cluster.local cluster.local corp.example x.example\nnameserver 10.96.0.10\nnameserver 9.9.9.9\noptions ndots:1 single-request\n"
    );
    // Limits: 3 nameservers.
    let c = dns::pod_dns_config(
        &pod(
            "team",
            json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"]}}),
        ),
        &n,
    );
    assert_eq!(c.servers, vec!["1.1.1.1", "2.2.2.2", "3.3.3.3"]);
}

#[test]
fn hosts_file_and_aliases() {
    let n = node();
    let p = pod(
        "team",
        json!({"hostAliases": [{"ip": "10.0.0.5", "hostnames": ["a.example", "b.example"]}]}),
    );
    let h = dns::pod_hosts_file(&p, "10.244.1.7", &n);
    assert!(h.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
    assert!(h.contains("10.244.1.7\tp-1\n"), "{h}");
    assert!(
        h.ends_with("\n# Entries added by HostAliases.\n10.0.0.5\ta.example\tb.example\n"),
        "{h}"
    );
    let p = pod("team", json!({"hostname": "web", "subdomain": "hl"}));
    assert!(
        dns::pod_hosts_file(&p, "10.244.1.7", &n)
            .contains("10.244.1.7\tweb.hl.team.svc.cluster.local\tweb\n")
    );
}

#[test]
fn corefile_pins_and_service_records() {
    let corefile = ".:53 {\n    errors\n    hosts {\n       192.168.2.20 gitea.prod.example.dev git.\n       # comment\n       fallthrough\n    }\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    hosts /etc/coredns/NodeHosts {\n       ttl 60\n    }\n    forward . /etc/resolv.conf\n}\n";
    assert_eq!(
        dns::corefile_hosts_pins(corefile),
        vec![(
            "192.168.2.20".to_string(),
            vec!["gitea.prod.example.dev".to_string(), "git".to_string()]
        )]
    );
    let svcs = vec![
        json!({"metadata": {"name": "kube-dns", "namespace": "kube-system"}, "spec": {"clusterIP": "10.96.0.10"}}),
        json!({"metadata": {"name": "hl", "namespace": "team"}, "spec": {"clusterIP": "None"}}),
    ];
    let h = dns::cluster_hosts(Some(corefile), &svcs, "cluster.local");
    assert!(h.contains("192.168.2.20 gitea.prod.example.dev git\n"));
    assert!(h.contains("10.96.0.10 kube-dns.kube-system.svc.cluster.local\n"));
    assert!(!h.contains("hl.team"));
}

#[test]
fn probe_images() {
    use podexec::ImageKind::*;
    assert_eq!(podexec::image_kind("alpine:3.22"), Some(Alpine));
    assert_eq!(
        podexec::image_kind("docker.io/library/alpine:3.22@sha256:abcd"),
        Some(Alpine)
    );
    assert_eq!(podexec::image_kind("busybox"), Some(Busybox));
    assert_eq!(podexec::image_kind("alpine/git:v2.49.1"), Some(AlpineGit));
    assert_eq!(
        podexec::image_kind("nicolaka/netshoot:v0.14"),
        Some(Netshoot)
    );
    assert_eq!(podexec::image_kind("ghcr.io/x/alpine:3"), None);
    assert_eq!(podexec::image_kind("nosuch:1"), None);
}

// ---- live ----

const COREFILE: &str = ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    hosts {\n       192.168.2.20 gitea.prod.example.dev\n       fallthrough\n    }\n    forward . /etc/resolv.conf\n}\n";

async fn live() -> (Twin, PodExec) {
    let twin = start_twin(&["team"]).await;
    let store = twin.store();
    let cm = store.gvr("", "v1", "configmaps").unwrap();
    store
        .create(
            &cm,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": "kube-system"}, "data": {"Corefile": COREFILE}}),
        )
        .unwrap();
    let svc = store.gvr("", "v1", "services").unwrap();
    store
        .create(
            &svc,
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system"},
            "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}}),
        )
        .unwrap();
    let mut opts = PodExecOptions::default();
    opts.upstream
        .insert("registry.example.com".into(), vec!["203.0.113.7".into()]);
    opts.upstream
        .insert("gitea.prod.example.dev".into(), vec!["203.0.113.99".into()]);
    let pe = PodExec::start(store, opts).await.expect("podexec starts");
    (twin, pe)
}

fn create_pod(store: &Store, name: &str, spec: Value) {
    let pods = store.gvr("", "v1", "pods").unwrap();
    let mut spec = spec;
    spec["restartPolicy"] = json!("Never");
    store
        .create(
            &pods,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "team"}, "spec": spec}),
        )
        .unwrap();
}

/// Waits by watch until the pod satisfies `pred`; returns it.
async fn wait_pod(store: &Store, name: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let pods = store.gvr("", "v1", "pods").unwrap();
    let mut w = store.watch(&pods, Some("team"), None).unwrap();
    if let Ok(p) = store.get(&pods, Some("team"), name)
        && pred(&p)
    {
        return p;
    }
    tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(ev) = w.next().await {
            if ev.type_ != WatchEventType::Deleted
                && ev.object["metadata"]["name"] == json!(name)
                && pred(&ev.object)
            {
                return ev.object;
            }
        }
        panic!("watch ended")
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "pod {name}: timed out; last: {}",
            store
                .get(&pods, Some("team"), name)
                .map(|p| p["status"].to_string())
                .unwrap_or_default()
        )
    })
}

fn terminal(p: &Value) -> bool {
    matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

fn log(store: &Store, name: &str, c: &str) -> String {
    String::from_utf8_lossy(&store.read_pod_log("team", name, c, 0).0).into_owned()
}

fn resolv_mounts() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" /etc/resolv.conf ") || l.contains(" /etc/hosts "))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_pod_resolves_through_cluster_dns() {
    if skip_without_podexec() {
        return;
    }
    let mounts_before = resolv_mounts();
    let (twin, pe) = live().await;
    let store = twin.store();
    create_pod(
        &store,
        "probe",
        json!({"containers": [{"name": "c", "image": "alpine:3.22",
            "securityContext": {"runAsUser": 65534, "runAsGroup": 65534},
            "command": ["sh", "-c", "id -u; hostname; cat /etc/resolv.conf; cat /etc/hosts; for h in \"$@\"; do echo \"== $h\"; getent ahosts \"$h\"; echo \"rc=$?\"; done; nslookup gitea.prod.example.dev; command -v openssl || echo no-openssl",
                "probe", "gitea.prod.example.dev", "kube-dns.kube-system", "registry.example.com", "nosuch.example.dev", "pinned.example.dev"]}],
            "hostAliases": [{"ip": "10.0.0.5", "hostnames": ["pinned.example.dev"]}]}),
    );
    let p = wait_pod(&store, "probe", terminal).await;
    let out = log(&store, "probe", "c");
    assert_eq!(p["status"]["phase"], "Succeeded", "{out}\n{}", p["status"]);
    let st = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(st["exitCode"], 0);
    assert_eq!(st["reason"], "Completed");
    assert!(out.starts_with("65534\nprobe\n"), "{out}");
    assert!(
        out.contains("search team.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"),
        "{out}"
    );
    assert!(
        out.contains("# Entries added by HostAliases.\n10.0.0.5\tpinned.example.dev\n"),
        "{out}"
    );
    // hosts pin wins over the upstream answer (CoreDNS plugin order)
    assert!(
        out.contains("== gitea.prod.example.dev\n192.168.2.20    STREAM gitea.prod.example.dev"),
        "{out}"
    );
    // ndots:5 + search list: the short name is found as kube-dns.kube-system.svc.cluster.local
    assert!(
        out.contains("10.96.0.10      STREAM kube-dns.kube-system.svc.cluster.local"),
        "{out}"
    );
    // forwarded to the upstream
    assert!(
        out.contains("203.0.113.7     STREAM registry.example.com"),
        "{out}"
    );
    // NXDOMAIN: getent exit 2
    assert!(out.contains("== nosuch.example.dev\nrc=2\n"), "{out}");
    // hostAliases: libc path
    assert!(
        out.contains("10.0.0.5        STREAM pinned.example.dev"),
        "{out}"
    );
    // BusyBox nslookup, wire path, against the ClusterIP
    assert!(out.contains("Server:\t\t10.96.0.10"), "{out}");
    assert!(out.contains("Address: 192.168.2.20"), "{out}");
    assert!(out.contains("no-openssl"), "{out}");
    assert!(pe.wait_idle(Duration::from_secs(30)).await);
    assert_eq!(resolv_mounts(), mounts_before, "no mount in our namespace");
    let pids = pe.pids();
    drop(pe);
    for pid in pids {
        let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        assert!(
            st.is_empty() || st.contains("State:\tZ"),
            "pid {pid} still running"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_start_error_default_policy_and_reload() {
    if skip_without_podexec() {
        return;
    }
    let (twin, pe) = live().await;
    let store = twin.store();
    create_pod(
        &store,
        "fails",
        json!({"containers": [{"name": "c", "image": "busybox:1.36", "terminationMessagePolicy": "FallbackToLogsOnError",
            "command": ["sh", "-c", "echo boom >&2; exit 3"]}]}),
    );
    create_pod(
        &store,
        "nocmd",
        json!({"containers": [{"name": "c", "image": "alpine:3.22", "command": ["openssl", "version"]}]}),
    );
    create_pod(
        &store,
        "default",
        json!({"dnsPolicy": "Default", "containers": [{"name": "c", "image": "alpine:3.22",
            "command": ["sh", "-c", "cat /etc/resolv.conf; getent ahosts gitea.prod.example.dev"]}]}),
    );
    create_pod(
        &store,
        "asroot",
        json!({"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "c", "image": "alpine:3.22", "command": ["true"]}]}),
    );
    let p = wait_pod(&store, "asroot", |p| {
        p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
            == "CreateContainerConfigError"
    })
    .await;
    assert_eq!(p["status"]["phase"], "Pending");
    assert!(
        p["status"]["containerStatuses"][0]["state"]["waiting"]["message"]
            .as_str()
            .unwrap()
            .starts_with(
                "container has runAsNonRoot and image will run as root (pod: \"asroot_team("
            )
    );
    let p = wait_pod(&store, "fails", terminal).await;
    assert_eq!(p["status"]["phase"], "Failed");
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(t["exitCode"], 3);
    assert_eq!(t["reason"], "Error");
    assert_eq!(t["message"], "boom");
    assert_eq!(log(&store, "fails", "c"), "boom\n");
    let p = wait_pod(&store, "nocmd", terminal).await;
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(t["exitCode"], 128);
    assert_eq!(t["reason"], "StartError");
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("exec: \"openssl\": executable file not found in $PATH")
    );
    // dnsPolicy Default: the node's resolver, which does not know the CoreDNS hosts pin.
    let p = wait_pod(&store, "default", terminal).await;
    let out = log(&store, "default", "c");
    assert_eq!(p["status"]["phase"], "Succeeded", "{out}");
    assert!(out.starts_with("nameserver 172.18.0.1\n"), "{out}");
    assert!(
        out.contains("203.0.113.99    STREAM gitea.prod.example.dev"),
        "{out}"
    );

    // CoreDNS ConfigMap change: dnsmasq reloads.
    let cm = store.gvr("", "v1", "configmaps").unwrap();
    store
        .patch(
            &cm,
            Some("kube-system"),
            "coredns",
            twin::PatchKind::Merge,
            &json!({"data": {"Corefile": COREFILE.replace("192.168.2.20 gitea.prod.example.dev", "192.168.2.20 gitea.prod.example.dev\n       192.168.2.30 new.example.dev")}}),
            "test",
        )
        .unwrap();
    let recs = pe.sync_dns().await.unwrap();
    assert!(recs.contains("192.168.2.30 new.example.dev"), "{recs}");
    create_pod(
        &store,
        "after-reload",
        json!({"containers": [{"name": "c", "image": "alpine:3.22", "command": ["getent", "ahosts", "new.example.dev"]}]}),
    );
    let p = wait_pod(&store, "after-reload", terminal).await;
    let out = log(&store, "after-reload", "c");
    assert_eq!(p["status"]["phase"], "Succeeded", "{out}");
    assert!(out.starts_with("192.168.2.30 "), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadline_and_delete_kill_the_process() {
    if skip_without_podexec() {
        return;
    }
    let (twin, pe) = live().await;
    let store = twin.store();
    create_pod(
        &store,
        "slow",
        json!({"activeDeadlineSeconds": 2, "containers": [{"name": "c", "image": "busybox:1.36",
            "command": ["sh", "-c", "echo started; sleep 600"]}]}),
    );
    create_pod(
        &store,
        "doomed",
        json!({"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "600"]}]}),
    );
    let p = wait_pod(&store, "slow", terminal).await;
    assert_eq!(p["status"]["phase"], "Failed");
    assert_eq!(p["status"]["reason"], "DeadlineExceeded");
    assert_eq!(
        p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        137
    );
    assert_eq!(log(&store, "slow", "c"), "started\n");
    wait_pod(&store, "doomed", |p| p["status"]["phase"] == "Running").await;
    assert_eq!(pe.running(), 1);
    let pods = store.gvr("", "v1", "pods").unwrap();
    store.delete(&pods, Some("team"), "doomed").unwrap();
    assert!(
        pe.wait_idle(Duration::from_secs(60)).await,
        "process killed on delete"
    );
}
