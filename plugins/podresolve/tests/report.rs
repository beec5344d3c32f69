//! The explanation assembled from a real captured probe log (tests/fixtures) and a Corefile.

use podresolve::corefile::Corefile;
use podresolve::parse::{LookupStatus, ProbeLog};
use podresolve::report::{ClusterDns, Inputs, ProbeInfo, build, render_text};
use podresolve::resolvconf::Libc;
use podresolve::validate::parse_host;
use podresolve::workstation::{Verdict, WorkstationAnswer};
use std::net::IpAddr;

const COREFILE: &str = r#".:53 {
    errors
    health
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 30
    hosts {
       192.168.2.20 gitea.example.dev
       fallthrough
    }
    loop
    reload
}
"#;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

fn ws(a: &[&str]) -> WorkstationAnswer {
    WorkstationAnswer {
        addresses: a.iter().map(|s| s.parse().unwrap()).collect(),
        error: None,
    }
}

fn run(
    hosts: &[&str],
    workstation: Vec<WorkstationAnswer>,
    expect: Option<&str>,
    nodelocal: Option<&str>,
) -> podresolve::report::Report {
    let log = ProbeLog::parse(&fixture("probe-glibc-bind.log"));
    let hosts: Vec<_> = hosts.iter().map(|h| parse_host(h).unwrap()).collect();
    let cluster = ClusterDns {
        corefile: Some(Corefile::parse(COREFILE).map_err(|e| e.to_string())),
        kube_dns_ips: vec!["127.0.0.77".into()],
        nodelocal_corefile: nodelocal.map(str::to_string),
    };
    build(Inputs {
        log: &log,
        hosts: &hosts,
        cluster: &cluster,
        workstation,
        expect: expect.map(|e| podresolve::workstation::parse_expect(e).unwrap()),
        probe: ProbeInfo {
            carrier: "job".into(),
            namespace: "team".into(),
            name: "podresolve-test".into(),
            image: "alpine:3.22".into(),
            ..Default::default()
        },
    })
}

#[test]
fn pinned_name_differs_from_workstation_and_names_the_hosts_block() {
    let r = run(
        &["gitea.example.dev"],
        vec![ws(&["203.0.113.7"])],
        None,
        None,
    );
    let h = &r.hosts[0];
    assert_eq!(
        h.pod.addresses,
        vec!["192.168.2.20".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(h.verdict, Verdict::Differs);
    assert_eq!(
        h.query_order,
        vec![
            "gitea.example.dev.team.svc.cluster.local.",
            "gitea.example.dev.svc.cluster.local.",
            "gitea.example.dev.cluster.local.",
            "gitea.example.dev."
        ]
    );
    assert_eq!(h.coredns.len(), 4);
    assert_eq!(
        h.coredns[0].explanation.answered_by.as_deref(),
        Some("kubernetes")
    );
    let last = h.coredns.last().unwrap();
    assert!(last.answered);
    assert_eq!(last.explanation.answered_by.as_deref(), Some("hosts"));
    assert_eq!(last.explanation.line, Some(10));
    assert_eq!(r.exit_code, 0, "differs alone is not a failure");
    let text = render_text(&r);
    assert!(text.contains("DIFFERS from the workstation"), "{text}");
    assert!(
        text.contains("=> gitea.example.dev.: hosts (pinned to 192.168.2.20), Corefile line 10"),
        "{text}"
    );
}

#[test]
fn expect_pass_and_fail() {
    let ok = run(
        &["gitea.example.dev"],
        vec![ws(&["192.168.2.20"])],
        Some("192.168.2.20"),
        None,
    );
    assert_eq!(ok.hosts[0].verdict, Verdict::Same);
    assert_eq!(ok.hosts[0].expect_match, Some(true));
    assert_eq!(ok.exit_code, 0);
    let bad = run(
        &["gitea.example.dev"],
        vec![ws(&["192.168.2.20"])],
        Some("192.168.2.21"),
        None,
    );
    assert_eq!(bad.hosts[0].expect_match, Some(false));
    assert_eq!(bad.exit_code, 1);
    assert!(render_text(&bad).contains("MISMATCH"));
}

#[test]
fn nxdomain_means_pod_cannot_resolve() {
    let r = run(&["nosuch.example.dev"], vec![ws(&[])], None, None);
    let h = &r.hosts[0];
    assert_eq!(h.verdict, Verdict::PodCannotResolve);
    assert_eq!(h.pod.libc.as_ref().unwrap().status, LookupStatus::NotFound);
    assert_eq!(h.pod.dns.as_ref().unwrap().status, LookupStatus::NotFound);
    assert_eq!(h.coredns.len(), 4, "all FQDNs explained, none answered");
    assert!(h.coredns.iter().all(|s| !s.answered));
    assert_eq!(r.exit_code, 1);
}

#[test]
fn search_expansion_answer_is_marked() {
    let r = run(&["registry"], vec![ws(&[])], None, None);
    let h = &r.hosts[0];
    assert_eq!(h.coredns.len(), 1);
    assert!(h.coredns[0].answered);
    assert_eq!(
        h.coredns[0].explanation.query,
        "registry.team.svc.cluster.local."
    );
    assert_eq!(h.verdict, Verdict::Differs);
    assert!(
        h.notes
            .iter()
            .any(|n| n.contains("workstation cannot resolve"))
    );
}

#[test]
fn hosts_file_pin_is_explained() {
    let r = run(&["pinned.example.dev"], vec![ws(&[])], None, None);
    let h = &r.hosts[0];
    assert!(
        h.notes.iter().any(|n| n.contains("/etc/hosts")),
        "{:?}",
        h.notes
    );
    assert!(
        h.notes
            .iter()
            .any(|n| n.contains("libc resolves it but the DNS wire query does not"))
    );
}

#[test]
fn nodelocal_bypass_is_flagged() {
    let nl = ".:53 {\n    forward . /etc/resolv.conf\n}\ncluster.local:53 {\n    forward . 10.96.200.1\n}\n";
    let r = run(&["gitea.example.dev"], vec![ws(&[])], None, Some(nl));
    assert!(r.cluster_dns.node_local.detected);
    let h = &r.hosts[0];
    let last = h.coredns.last().unwrap();
    assert!(last.bypassed_by_node_local);
    assert!(
        !h.coredns[0].bypassed_by_node_local,
        "cluster.local names still reach CoreDNS"
    );
    assert!(
        h.notes
            .iter()
            .any(|n| n.contains("NodeLocal DNSCache forwards gitea.example.dev.")),
        "{:?}",
        h.notes
    );
}

#[test]
fn json_schema_is_stable() {
    let r = run(
        &["gitea.example.dev"],
        vec![ws(&["192.168.2.20"])],
        Some("192.168.2.20"),
        None,
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["apiVersion"], "podresolve.cluster-loop.dev/v1");
    assert_eq!(v["kind"], "PodResolveReport");
    assert!(
        v.get("exitCode").is_none(),
        "the exit status is the contract"
    );
    for key in [
        "probe",
        "resolvConf",
        "libc",
        "clusterDns",
        "hosts",
        "git",
        "complete",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    let h = &v["hosts"][0];
    for key in [
        "host",
        "queryOrder",
        "pod",
        "coredns",
        "workstation",
        "verdict",
        "expect",
        "expectMatch",
        "tls",
        "notes",
    ] {
        assert!(h.get(key).is_some(), "missing hosts[].{key}");
    }
    assert_eq!(h["verdict"], "same");
    assert_eq!(h["pod"]["libc"]["status"], "resolved");
    assert_eq!(h["coredns"][3]["answeredBy"], "hosts");
    assert_eq!(v["resolvConf"]["ndots"], 5);
    let yaml = serde_saphyr::to_string(&r).unwrap();
    assert!(
        yaml.starts_with(
            "apiVersion: podresolve.cluster-loop.dev/v1\nkind: PodResolveReport\nprobe:\n"
        ),
        "{yaml}"
    );
    assert!(!yaml.contains("exitCode"), "{yaml}");
    let json = serde_json::to_string_pretty(&r).unwrap();
    assert!(
        json.starts_with(
            "{\n  \"apiVersion\": \"podresolve.cluster-loop.dev/v1\",\n  \"kind\": \"PodResolveReport\",\n"
        ),
        "{json}"
    );
}

#[test]
fn ip_literal_is_not_flagged_as_a_dns_disagreement() {
    let r = run(&["192.168.2.20"], vec![ws(&["192.168.2.20"])], None, None);
    let h = &r.hosts[0];
    assert_eq!(h.verdict, Verdict::Same);
    assert!(h.query_order.is_empty());
    assert!(h.coredns.is_empty());
    assert!(h.notes.is_empty(), "{:?}", h.notes);
}

/// The resolver rules follow the pod's libc: getent's line shapes when it printed any, else
/// the probe image, else "unknown" (never a glibc default). The log is a real musl capture in
/// which getent printed nothing (DNS timeout).
#[test]
fn libc_label_comes_from_the_pod_or_the_image_never_a_default() {
    let log = ProbeLog::parse(&fixture("probe-musl-busybox-timeout.log"));
    let hosts = vec![parse_host("gitea.example.dev").unwrap()];
    let cluster = ClusterDns::default();
    let build_with = |log: &ProbeLog, image: &str| {
        build(Inputs {
            log,
            hosts: &hosts,
            cluster: &cluster,
            workstation: vec![ws(&[])],
            expect: None,
            probe: ProbeInfo {
                carrier: "job".into(),
                namespace: "team".into(),
                name: "podresolve-test".into(),
                image: image.into(),
                ..Default::default()
            },
        })
    };
    for (image, libc, label) in [
        ("alpine:3.22", Libc::Musl, "(musl rules)"),
        ("nicolaka/netshoot:v0.13", Libc::Musl, "(musl rules)"),
        ("busybox:1.36-musl", Libc::Musl, "(musl rules)"),
        ("busybox:1.36-glibc", Libc::Glibc, "(glibc rules)"),
        (
            "busybox:1.36-uclibc",
            Libc::Unknown,
            "(unknown libc: glibc rules)",
        ),
        (
            "registry.example.com/tools/dns:1",
            Libc::Unknown,
            "(unknown libc: glibc rules)",
        ),
    ] {
        let r = build_with(&log, image);
        assert_eq!(r.libc, libc, "{image}");
        let text = render_text(&r);
        assert!(text.contains(label), "{image}: {text}");
        assert_eq!(
            serde_json::to_value(&r).unwrap()["libc"],
            serde_json::to_value(libc).unwrap()
        );
    }
    // getent evidence wins over the image name: the glibc capture stays glibc whatever the image.
    let glibc = ProbeLog::parse(&fixture("probe-glibc-bind.log"));
    assert_eq!(build_with(&glibc, "alpine:3.22").libc, Libc::Glibc);
    let musl = ProbeLog::parse(&fixture("probe-musl-busybox.log"));
    assert_eq!(
        build_with(&musl, "registry.example.com/tools/dns:1").libc,
        Libc::Musl
    );
}
