//! podexec: resolv.conf/hosts generation (kubelet rules), the cluster DNS records, the probe
//! images, and the runtime's own processes (dnsmasq, the namespace holder, the veth link)
//! ending when it drops.
//!
//! Probe pods running for real (the runtime as a kubelet: exit codes, deadlines, deletion,
//! DNS through dnsmasq, reloads) are tested on the real cluster, where the runtime serves the
//! real kube-apiserver: `cargo test --workspace --tests -- probe_pods::`. The live test here
//! skips (with a message) only when `unshare`/`nsenter`/`dnsmasq`/`busybox` or root are
//! missing: `apt-get install -y dnsmasq busybox bind9-dnsutils`.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use twin::flux::cluster::ObjKey;
use twin::podexec::{self, ApiEvent, NodeDns, PodApi, PodExec, PodExecOptions, dns};
use twin::testkit::skip_without_podexec;

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

/// An API server with no pods, Services or ConfigMaps, whose watch stays open: what the
/// runtime sees on a cluster with nothing for it to run. Enough to start and drop it.
struct NoPods(std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<ApiEvent>>>);

impl PodApi for NoPods {
    fn get(&self, _key: ObjKey) -> BoxFuture<'static, Option<Value>> {
        Box::pin(async { None })
    }
    fn services(&self) -> BoxFuture<'static, Vec<Value>> {
        Box::pin(async { Vec::new() })
    }
    fn patch_status(&self, _key: ObjKey, _patch: Value) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn event(
        &self,
        _involved: Value,
        _event_type: &'static str,
        _reason: &'static str,
        _message: String,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
    fn append_log(&self, _namespace: &str, _pod: &str, _container: &str, _bytes: &[u8]) {}
    fn close_log(&self, _namespace: &str, _pod: &str, _container: &str) {}
    fn watch(
        &self,
    ) -> BoxFuture<'static, Result<tokio::sync::mpsc::UnboundedReceiver<ApiEvent>, String>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        *self.0.lock().unwrap() = Some(tx);
        Box::pin(async move { Ok(rx) })
    }
}

fn running(pid: u32) -> bool {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    !st.is_empty() && !st.contains("State:\tZ")
}

fn link_exists(name: &str) -> bool {
    std::process::Command::new("ip")
        .args(["link", "show", name])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Dropping the runtime ends both dnsmasq processes and the network namespace holder and
/// deletes its veth link; without a kube-dns Service it serves the kubeadm default ClusterIP;
/// the upstream records set at start and with `set_upstream` are what it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_runtime_ends_its_processes_and_link() {
    if skip_without_podexec() {
        return;
    }
    let mut opts = PodExecOptions::default();
    opts.upstream
        .insert("registry.example.com".into(), vec!["203.0.113.7".into()]);
    let pe = PodExec::start_with(Arc::new(NoPods(Default::default())), opts)
        .await
        .expect("the runtime starts");
    assert_eq!(
        pe.node_dns().cluster_dns,
        vec![podexec::DEFAULT_CLUSTER_DNS]
    );
    let records = pe
        .set_upstream("Gitea.Prod.Example.Dev.", &["203.0.113.99".into()])
        .await
        .unwrap();
    assert_eq!(
        records.into_iter().collect::<Vec<_>>(),
        vec![
            (
                "gitea.prod.example.dev".to_string(),
                vec!["203.0.113.99".to_string()]
            ),
            (
                "registry.example.com".to_string(),
                vec!["203.0.113.7".to_string()]
            ),
        ]
    );
    let records = pe.set_upstream("registry.example.com", &[]).await.unwrap();
    assert_eq!(records.len(), 1);
    // Asked in the pod network: the upstream directly, and the cluster DNS forwarding to it
    // (a name outside the cluster zone); a removed record is NXDOMAIN again.
    let ask = |name: &str, server: &str| {
        let out = std::process::Command::new("nsenter")
            .args([
                &format!("--net={}", pe.netns()),
                "busybox",
                "nslookup",
                name,
                server,
            ])
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    for server in [podexec::NODE_RESOLVER, podexec::DEFAULT_CLUSTER_DNS] {
        let out = ask("gitea.prod.example.dev", server);
        assert!(out.contains("Address: 203.0.113.99"), "{server}: {out}");
        let out = ask("registry.example.com", server);
        assert!(out.contains("NXDOMAIN"), "{server}: {out}");
        assert!(!out.contains("203.0.113.7"), "{server}: {out}");
    }
    let pids = pe.pids();
    assert_eq!(pids.len(), 3, "two dnsmasq and the holder: {pids:?}");
    assert!(pids.iter().all(|p| running(*p)), "{pids:?}");
    let link = pe.link_interface().to_owned();
    assert!(link_exists(&link), "{link}");
    assert_eq!(pe.running(), 0);
    drop(pe);
    for pid in pids {
        assert!(!running(pid), "pid {pid} still running after drop");
    }
    assert!(!link_exists(&link), "{link} left behind");
}
