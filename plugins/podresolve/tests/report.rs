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
        from_hosts_file: None,
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
        kube_system_services: None,
        // The fixtures' NodeLocal DNSCache runs (one ready pod).
        nodelocal_daemonset: nodelocal.map(|_| Ok(1)),
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
        h.notes.iter().any(|n| n.starts_with("getent and nslookup disagree")
            && n.contains("is in the pod's /etc/hosts, which libc reads before DNS and nslookup never reads")),
        "{:?}",
        h.notes
    );
    let a = h.answer.as_ref().unwrap();
    assert_eq!(a.rule, podresolve::answer::AnswerRule::EtcHosts);
    assert_eq!(a.query, None);
    assert!(h.coredns.is_empty(), "libc asked no DNS: {:?}", h.coredns);
}

#[test]
fn nodelocal_bypass_is_flagged() {
    let nl = ".:53 {\n    forward . /etc/resolv.conf\n}\ncluster.local:53 {\n    forward . 10.96.200.1\n}\n";
    let r = run(&["gitea.example.dev"], vec![ws(&[])], None, Some(nl));
    assert!(r.cluster_dns.node_local.detected);
    let h = &r.hosts[0];
    // The pod's answer is the CoreDNS hosts pin (192.168.2.20), so CoreDNS answered it: the
    // Corefile's bypass is named but not claimed (trial item 7; the claimed case, an answer
    // other than the pin, is in nodelocal_literal_ip_of_kube_dns_upstream_is_not_a_bypass).
    assert!(h.coredns.iter().all(|s| !s.bypassed_by_node_local));
    assert!(
        h.notes.iter().any(|n| n.starts_with(
            "node-local-dns's Corefile would forward gitea.example.dev. to /etc/resolv.conf without CoreDNS, but the pod's answer (192.168.2.20) is the CoreDNS hosts pin"
        )),
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
    // An IP literal is not "resolved via" a DNS server: it needs no DNS, and nslookup of it is
    // a reverse (PTR) lookup, shown as such.
    assert!(h.ip_literal);
    let text = render_text(&r);
    assert!(!text.contains("resolved via"), "{text}");
    assert!(
        text.contains("IP literal: used as given, no DNS lookup"),
        "{text}"
    );
    assert!(text.contains("needs no DNS"), "{text}");
    if r.hosts[0].pod.dns.is_some() {
        assert!(text.contains("pod reverse DNS (nslookup PTR"), "{text}");
    }
}

/// The resolver rules follow the pod's libc: the probe's `libc` line (read from the image's
/// own getent binary), else the probe image, else "unknown" (never a glibc default), and never
/// the answers. The log is a real musl capture in which getent printed nothing (DNS timeout).
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
    // One image, one label, whatever the answer: a name that resolves (glibc-shaped getent
    // lines) and one that fails (no getent lines) get the same label. alpine:3.22 used to read
    // "glibc" for the first (the getent output shape) and "musl" for the second (the image).
    for name in ["probe-glibc-bind.log", "probe-musl-busybox-timeout.log"] {
        let text = fixture(name);
        assert_eq!(
            build_with(&ProbeLog::parse(&text), "alpine:3.22").libc,
            Libc::Musl,
            "{name}: no libc line: the image decides"
        );
        for (line, want) in [("glibc", Libc::Glibc), ("musl", Libc::Musl)] {
            let with = text.replacen(
                "#podresolve begin v1\n",
                &format!("#podresolve begin v1\n#podresolve libc {line}\n"),
                1,
            );
            assert_eq!(
                build_with(&ProbeLog::parse(&with), "alpine:3.22").libc,
                want,
                "{name} with libc {line}: the probe's reading of the image wins"
            );
        }
    }
}

// ---- issue 19: an explanation is never wrong -------------------------------------------

/// The Corefile of the search-expansion captures: the search-expanded name is pinned by the
/// `hosts` block, the name itself goes to `forward`.
const WILD_COREFILE: &str = r#".:53 {
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
    }
    hosts {
       192.168.2.99 podinfo.dev.example.local.wild.example
       fallthrough
    }
    forward . /etc/resolv.conf
    cache 30
}
"#;

fn build_from(
    fixture_name: &str,
    corefile: &str,
    hosts: &[&str],
    workstation: Vec<WorkstationAnswer>,
    cluster: impl FnOnce(&mut ClusterDns),
    node: Option<&str>,
) -> podresolve::report::Report {
    // These captures predate the probe's `#podresolve libc` line; their file names record the
    // libc of the getent they were captured with (the twin's alpine runs the host's glibc
    // getent), which is what the probe reads from the binary and prints today.
    let text = fixture(fixture_name);
    let text = match fixture_name.split('-').nth(1) {
        Some(libc @ ("glibc" | "musl")) if !text.contains("#podresolve libc ") => text.replacen(
            "#podresolve begin v1\n",
            &format!("#podresolve begin v1\n#podresolve libc {libc}\n"),
            1,
        ),
        _ => text,
    };
    let log = ProbeLog::parse(&text);
    let hosts: Vec<_> = hosts.iter().map(|h| parse_host(h).unwrap()).collect();
    let mut c = ClusterDns {
        corefile: Some(Corefile::parse(corefile).map_err(|e| e.to_string())),
        kube_dns_ips: vec!["127.0.0.77".into()],
        nodelocal_corefile: None,
        kube_system_services: None,
        nodelocal_daemonset: None,
    };
    cluster(&mut c);
    build(Inputs {
        log: &log,
        hosts: &hosts,
        cluster: &c,
        workstation,
        expect: None,
        probe: ProbeInfo {
            carrier: "job".into(),
            namespace: "team".into(),
            name: "podresolve-test".into(),
            node: node.map(str::to_string),
            image: "alpine:3.22".into(),
            ..Default::default()
        },
    })
}

/// Item 1, captured with glibc getent + BusyBox 1.35 nslookup against dnsmasq (ndots:5, search
/// ... wild.example; the expanded name pinned to 192.168.2.99, the name itself 172.18.255.200).
#[test]
fn search_domain_answer_is_the_headline_and_marked_in_json() {
    let r = build_from(
        "probe-glibc-busybox-search-wins.log",
        WILD_COREFILE,
        &["podinfo.dev.example.local"],
        vec![ws(&["172.18.255.200"])],
        |_| {},
        Some("twin-node"),
    );
    let h = &r.hosts[0];
    assert_eq!(
        h.pod.addresses,
        vec!["192.168.2.99".parse::<IpAddr>().unwrap()]
    );
    let a = h.answer.as_ref().expect("an answering query");
    assert_eq!(
        a.query.as_deref(),
        Some("podinfo.dev.example.local.wild.example.")
    );
    let answered: Vec<_> = h.coredns.iter().filter(|s| s.answered).collect();
    assert_eq!(answered.len(), 1);
    assert_eq!(
        answered[0].explanation.query,
        "podinfo.dev.example.local.wild.example."
    );
    assert_eq!(
        answered[0].explanation.answered_by.as_deref(),
        Some("hosts")
    );
    assert!(
        h.coredns
            .iter()
            .all(|s| s.explanation.query != "podinfo.dev.example.local."),
        "libc never asked the name as is: {:?}",
        h.coredns
    );
    let v = serde_json::to_value(&r).unwrap();
    let ja = &v["hosts"][0]["answer"];
    assert_eq!(ja["query"], "podinfo.dev.example.local.wild.example.");
    assert_eq!(ja["index"], 3);
    assert_eq!(ja["rule"], "search-before-name");
    assert_eq!(ja["evidence"], "libc-canonical-name");
    assert_eq!(ja["searchDomain"], "wild.example");
    assert_eq!(v["hosts"][0]["coredns"][3]["answered"], true);
    let text = render_text(&r);
    let headline = "  answered by the search domain wild.example (podinfo.dev.example.local.wild.example.) because podinfo.dev.example.local has fewer than ndots:5 dots (3): glibc tries the search domains before the name itself (the 3 earlier queries found nothing)";
    assert!(text.contains(headline), "{text}");
    assert!(
        text.contains("=> podinfo.dev.example.local.wild.example.: hosts (pinned to 192.168.2.99), Corefile line 7"),
        "{text}"
    );
    assert!(
        text.find(headline) < text.find("queried in order"),
        "the headline comes first: {text}"
    );
    let note = h
        .notes
        .iter()
        .find(|n| n.starts_with("getent and nslookup disagree"))
        .unwrap_or_else(|| panic!("{:?}", h.notes));
    assert!(note.contains("getent (libc, what applications get) says 192.168.2.99 but nslookup (DNS wire) says 172.18.255.200"), "{note}");
    assert!(
        note.contains("BusyBox >= 1.29 nslookup queries a name that contains a dot as is only"),
        "{note}"
    );
}

/// BIND nslookup honours search and ndots: the same capture with BIND agrees, no note.
#[test]
fn search_domain_with_bind_nslookup_agrees_and_says_nothing_more() {
    let r = build_from(
        "probe-glibc-bind-search-wins.log",
        WILD_COREFILE,
        &["podinfo.dev.example.local"],
        vec![ws(&["172.18.255.200"])],
        |_| {},
        Some("twin-node"),
    );
    let h = &r.hosts[0];
    assert_eq!(
        h.answer.as_ref().unwrap().query.as_deref(),
        Some("podinfo.dev.example.local.wild.example.")
    );
    assert!(
        !h.notes.iter().any(|n| n.contains("disagree")),
        "{:?}",
        h.notes
    );
}

/// Item 2b, captured: resolv.conf points at 169.254.20.10 with nothing there (no route);
/// BusyBox prints `can't connect to remote host (169.254.20.10): Network is unreachable`.
#[test]
fn nodelocal_unreachable_error_reaches_json_errors() {
    let r = build_from(
        "probe-glibc-busybox-nodelocal-unreachable.log",
        WILD_COREFILE,
        &["gitea.prod.example.dev"],
        vec![ws(&[])],
        |_| {},
        Some("twin-node"),
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v["hosts"][0]["pod"]["dns"]["errors"],
        serde_json::json!([
            "nslookup: can't connect to remote host (169.254.20.10): Network is unreachable"
        ])
    );
    assert_eq!(v["hosts"][0]["pod"]["dns"]["status"], "error");
    let h = &r.hosts[0];
    assert!(
        h.notes.iter().any(|n| n.starts_with(
            "the pod cannot reach its nameserver: nslookup: can't connect to remote host (169.254.20.10): Network is unreachable. 169.254.20.10 is the NodeLocal DNSCache address"
        )),
        "{:?}",
        h.notes
    );
    assert!(r.cluster_dns.node_local.detected);
    // getent's exit 2 is not called NXDOMAIN: no server answered here.
    let text = render_text(&r);
    assert!(
        text.contains("not found (getent exit 2: NXDOMAIN or no server answered)"),
        "{text}"
    );
    assert!(!text.contains("NXDOMAIN / not found"), "{text}");
}

/// Item 2a (kubernetes/dns#592): node-local-dns's `.:53` forwards to a literal IP owned by the
/// kube-dns-upstream Service, which fronts CoreDNS: no "hosts rule bypassed" note. The same IP
/// owned by nothing CoreDNS-like is a bypass.
#[test]
fn nodelocal_literal_ip_of_kube_dns_upstream_is_not_a_bypass() {
    use podresolve::corefile::DnsService;
    let nl = "cluster.local:53 {\n    forward . 10.96.200.1 {\n        force_tcp\n    }\n}\n.:53 {\n    forward . 10.96.200.1\n}\n";
    let svc = |name: &str, ip: &str, fronts: bool| DnsService {
        name: format!("kube-system/{name}"),
        cluster_ips: vec![ip.into()],
        fronts_coredns: fronts,
    };
    let r = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["gitea.example.dev"],
        vec![ws(&[])],
        |c| {
            c.nodelocal_corefile = Some(nl.into());
            c.kube_system_services = Some(vec![
                svc("kube-dns", "127.0.0.77", true),
                svc("kube-dns-upstream", "10.96.200.1", true),
            ]);
        },
        Some("twin-node"),
    );
    let h = &r.hosts[0];
    assert!(h.coredns.iter().all(|s| !s.bypassed_by_node_local));
    assert!(
        !h.notes.iter().any(|n| n.contains("bypassed")),
        "{:?}",
        h.notes
    );
    assert!(
        r.cluster_dns
            .node_local
            .evidence
            .iter()
            .any(|e| e.contains("is Service kube-system/kube-dns-upstream, which fronts CoreDNS")),
        "{:?}",
        r.cluster_dns.node_local.evidence
    );
    // The pod's answer (192.168.2.20) is not the CoreDNS pin (10.9.9.9): the bypass is what
    // the answer shows.
    let pinned_elsewhere = COREFILE.replace(
        "192.168.2.20 gitea.example.dev",
        "10.9.9.9 gitea.example.dev",
    );
    let r = build_from(
        "probe-glibc-bind.log",
        &pinned_elsewhere,
        &["gitea.example.dev"],
        vec![ws(&[])],
        |c| {
            c.nodelocal_corefile = Some(nl.into());
            c.kube_system_services = Some(vec![svc("kube-dns", "127.0.0.77", true)]);
            c.nodelocal_daemonset = Some(Ok(1));
        },
        Some("twin-node"),
    );
    assert!(
        r.hosts[0].notes.iter().any(|n| n.contains(
            "NodeLocal DNSCache forwards gitea.example.dev. to 10.96.200.1 without CoreDNS"
        )),
        "{:?}",
        r.hosts[0].notes
    );
    // Trial item 7: the pod got exactly the CoreDNS hosts pin: CoreDNS answered, whatever the
    // node-local-dns Corefile says; no bypass is claimed, and the note says why.
    let r = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["gitea.example.dev"],
        vec![ws(&[])],
        |c| {
            c.nodelocal_corefile = Some(nl.into());
            c.kube_system_services = Some(vec![svc("kube-dns", "127.0.0.77", true)]);
            c.nodelocal_daemonset = Some(Ok(1));
        },
        Some("twin-node"),
    );
    assert!(r.hosts[0].coredns.iter().all(|s| !s.bypassed_by_node_local));
    assert!(
        r.hosts[0].notes.iter().any(|n| n.starts_with(
            "node-local-dns's Corefile would forward gitea.example.dev. to 10.96.200.1 without CoreDNS, but the pod's answer (192.168.2.20) is the CoreDNS hosts pin (Corefile line "
        )),
        "{:?}",
        r.hosts[0].notes
    );
    assert!(
        !r.hosts[0].notes.iter().any(|n| n.contains("is bypassed")),
        "{:?}",
        r.hosts[0].notes
    );
    // Trial item 7: the same ConfigMap with no ready node-local-dns pod (and the pod's
    // nameserver the kube-dns Service): nothing runs it, so no bypass is claimed.
    for ds in [
        Ok(0),
        Err("no DaemonSet kube-system/node-local-dns exists".to_string()),
    ] {
        let r = build_from(
            "probe-glibc-bind.log",
            COREFILE,
            &["gitea.example.dev"],
            vec![ws(&[])],
            |c| {
                c.nodelocal_corefile = Some(nl.into());
                c.kube_system_services = Some(vec![svc("kube-dns", "127.0.0.77", true)]);
                c.nodelocal_daemonset = Some(ds.clone());
            },
            Some("twin-node"),
        );
        assert!(!r.cluster_dns.node_local.detected);
        assert!(r.hosts[0].coredns.iter().all(|s| !s.bypassed_by_node_local));
        assert!(
            !r.hosts[0].notes.iter().any(|n| n.contains("bypass")),
            "{:?}",
            r.hosts[0].notes
        );
        assert!(
            r.cluster_dns.node_local.evidence.last().is_some_and(|e| e.ends_with(
                "and the pod's nameserver is not 169.254.20.10: NodeLocal DNSCache is not judged active and no bypass is claimed"
            )),
            "{:?}",
            r.cluster_dns.node_local.evidence
        );
    }
}

/// Item 3 (kubestellar/kubestellar#1192): the workstation answered from /etc/hosts.
#[test]
fn workstation_answer_from_etc_hosts_says_so_and_suggests_the_cluster_fix() {
    let mut w = ws(&["10.0.0.42"]);
    w.from_hosts_file = Some("/etc/hosts".into());
    let r = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["nosuch.example.dev"],
        vec![w],
        |_| {},
        Some("twin-node"),
    );
    let h = &r.hosts[0];
    assert!(
        h.notes.iter().any(|n| n
            == "the workstation's answer came from its /etc/hosts, which pods never see: make the cluster answer nosuch.example.dev instead, with a CoreDNS hosts (or template) entry in ConfigMap kube-system/coredns, or a Service (ExternalName, or a Service without selector plus an EndpointSlice) and its cluster DNS name"),
        "{:?}",
        h.notes
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["hosts"][0]["workstation"]["fromHostsFile"], "/etc/hosts");
}

/// Item 4 (fluxcd/flux2#2754): `localhost` means the pod itself, said first.
#[test]
fn localhost_is_the_pod_itself_and_said_first() {
    let r = build_from(
        "probe-glibc-busybox-nodelocal-unreachable.log",
        WILD_COREFILE,
        &["localhost"],
        vec![ws(&["127.0.0.1", "::1"])],
        |_| {},
        Some("twin-node"),
    );
    let h = &r.hosts[0];
    let l = h.loopback.as_deref().expect("loopback sentence");
    assert!(
        l.starts_with("localhost resolves to the loopback (::1, 127.0.0.1): inside a pod that is the pod itself"),
        "{l}"
    );
    let text = render_text(&r);
    let block = text.split("\n\n").nth(1).unwrap();
    assert!(
        block.starts_with("localhost: localhost resolves to the loopback"),
        "{text}"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert!(
        v["hosts"][0]["loopback"]
            .as_str()
            .unwrap()
            .contains("the pod itself")
    );
    // A loopback literal too; an ordinary name not.
    let r = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["127.0.0.1", "gitea.example.dev"],
        vec![ws(&["127.0.0.1"]), ws(&[])],
        |_| {},
        None,
    );
    assert!(r.hosts[0].loopback.is_some());
    assert!(r.hosts[1].loopback.is_none());
    // The workstation's localhost from its /etc/hosts is the workstation itself: no "pods
    // never see /etc/hosts, add a CoreDNS entry" advice (the loopback sentence says it all).
    let mut w = ws(&["127.0.0.1"]);
    w.from_hosts_file = Some("/etc/hosts".into());
    let r = build_from(
        "probe-glibc-busybox-nodelocal-unreachable.log",
        WILD_COREFILE,
        &["localhost"],
        vec![w],
        |_| {},
        Some("twin-node"),
    );
    assert!(r.hosts[0].loopback.is_some());
    assert!(
        !r.hosts[0].notes.iter().any(|n| n.contains("never see")),
        "{:?}",
        r.hosts[0].notes
    );
    assert!(
        render_text(&r).contains("system resolver (/etc/hosts)"),
        "{}",
        render_text(&r)
    );
}

/// Trial item 10: the loopback wording. 0.0.0.0 and ::ffff:127.0.0.1 are the pod itself (the
/// rule cutover refuses them by, `cluster_loop::probe::is_own_machine`); a `.localhost` name
/// the pod got no address for is not said to "connect to itself"; a workstation /etc/hosts
/// answer that is its own loopback is not copied into cluster advice.
#[test]
fn loopback_wording_follows_the_shared_rule_and_the_observed_answer() {
    let r = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["0.0.0.0", "::ffff:127.0.0.1", "foo.localhost"],
        vec![ws(&["0.0.0.0"]), ws(&["::ffff:127.0.0.1"]), ws(&[])],
        |_| {},
        None,
    );
    let l0 = r.hosts[0]
        .loopback
        .as_deref()
        .expect("0.0.0.0 is the pod itself");
    assert!(
        l0.starts_with("0.0.0.0 is the unspecified address, which Linux connects to the loopback: inside a pod that is the pod itself"),
        "{l0}"
    );
    let l1 = r.hosts[1]
        .loopback
        .as_deref()
        .expect("::ffff:127.0.0.1 too");
    assert!(
        l1.starts_with("::ffff:127.0.0.1 is a loopback address: inside a pod"),
        "{l1}"
    );
    let ips = |v: &[&str]| {
        v.iter()
            .map(|a| a.parse::<IpAddr>().unwrap())
            .collect::<Vec<_>>()
    };
    for a in ["0.0.0.0", "::ffff:127.0.0.1", "::"] {
        assert_eq!(
            podresolve::workstation::verdict(&ips(&[a]), &ips(&[a])),
            Verdict::Loopback,
            "{a}"
        );
    }
    let l2 = r.hosts[2].loopback.as_deref().expect("foo.localhost");
    assert!(
        l2.starts_with("foo.localhost is a loopback name (RFC 6761), but the pod's resolver did not answer it (no address)"),
        "{l2}"
    );
    assert!(!l2.contains("connect to itself"), "{l2}");
    // `vm` in the workstation's /etc/hosts as 127.0.0.1, unknown to the cluster.
    let mut w = ws(&["127.0.0.1"]);
    w.from_hosts_file = Some("/etc/hosts".into());
    let r = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["vm"],
        vec![w],
        |_| {},
        None,
    );
    let notes = &r.hosts[0].notes;
    assert!(
        notes.iter().any(|n| n
            == "the workstation's answer (127.0.0.1) came from its /etc/hosts and is this workstation itself (its loopback: a port-forward or local tunnel?): it says nothing about where the server is, and the same address in the cluster would be the pod itself; make the cluster answer vm with the server's real address (a CoreDNS hosts entry, or a Service)"),
        "{notes:?}"
    );
    assert!(
        !notes
            .iter()
            .any(|n| n.contains("make the cluster answer vm instead")),
        "{notes:?}"
    );
}

/// Item 5: a probe without a node never prints `node ?`: "not scheduled" when it printed
/// nothing (never ran), nothing when it ran (its resolv.conf is in the log).
#[test]
fn unscheduled_probe_says_not_scheduled() {
    let ran = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["gitea.example.dev"],
        vec![ws(&[])],
        |_| {},
        None,
    );
    let text = render_text(&ran);
    assert_eq!(
        text.lines().next().unwrap(),
        "probe: job team/podresolve-test (image alpine:3.22)"
    );
    assert!(!text.contains("node ?"), "{text}");
    let log = ProbeLog::parse("");
    let hosts = vec![parse_host("gitea.example.dev").unwrap()];
    let never = build(Inputs {
        log: &log,
        hosts: &hosts,
        cluster: &ClusterDns::default(),
        workstation: vec![ws(&[])],
        expect: None,
        probe: ProbeInfo {
            carrier: "job".into(),
            namespace: "team".into(),
            name: "podresolve-test".into(),
            image: "alpine:3.22".into(),
            ..Default::default()
        },
    });
    assert_eq!(
        render_text(&never).lines().next().unwrap(),
        "probe: job team/podresolve-test (not scheduled) (image alpine:3.22)"
    );
    let r = build_from(
        "probe-glibc-bind.log",
        COREFILE,
        &["gitea.example.dev"],
        vec![ws(&[])],
        |_| {},
        Some("twin-node"),
    );
    assert!(
        render_text(&r)
            .starts_with("probe: job team/podresolve-test on node twin-node (image alpine:3.22)")
    );
}

/// Issue 19 item 2 ("never drop a probe error"), getent's side, captured: a getent that cannot
/// start (the loader's diagnostic, exit 127) is an error with its text in
/// `pod.libc.errors` and in the text report, never "not found in image"; BusyBox's
/// unreachable nameserver stays in `pod.dns.errors` and its note (said once).
#[test]
fn getent_exec_failure_is_kept_and_not_called_a_missing_tool() {
    let r = build_from(
        "probe-glibc-busybox-getent-exec-failure.log",
        WILD_COREFILE,
        &["gitea.example.dev"],
        vec![ws(&[])],
        |_| {},
        Some("twin-node"),
    );
    let v = serde_json::to_value(&r).unwrap();
    let pod = &v["hosts"][0]["pod"];
    assert_eq!(pod["libc"]["status"], "error");
    assert_eq!(pod["libc"]["rc"], 127);
    let loader = "/usr/bin/getent: error while loading shared libraries: libc.so.6: failed to map segment from shared object";
    assert_eq!(pod["libc"]["errors"], serde_json::json!([loader]));
    let unreachable = "nslookup: can't connect to remote host (127.0.0.77): Network is unreachable";
    assert_eq!(pod["dns"]["errors"], serde_json::json!([unreachable]));
    let text = render_text(&r);
    assert!(text.contains(&format!("  getent said: {loader}")), "{text}");
    assert!(!text.contains("not found in image"), "{text}");
    assert_eq!(text.matches(unreachable).count(), 1, "{text}");
}

/// Issue 19 item 2, nslookup's side, captured: a BIND nslookup that cannot start (the loader's
/// diagnostic, exit 127) keeps its text in `pod.dns.errors` and the text report, and is not
/// "not found in image".
#[test]
fn nslookup_exec_failure_is_kept_and_not_called_a_missing_tool() {
    let r = build_from(
        "probe-glibc-bind-nslookup-exec-failure.log",
        WILD_COREFILE,
        &["gitea.example.dev"],
        vec![ws(&[])],
        |_| {},
        Some("twin-node"),
    );
    let v = serde_json::to_value(&r).unwrap();
    let dns = &v["hosts"][0]["pod"]["dns"];
    let loader = "/usr/bin/nslookup: error while loading shared libraries: libjemalloc.so.2: failed to map segment from shared object";
    assert_eq!(dns["status"], "error");
    assert_eq!(dns["errors"], serde_json::json!([loader]));
    let text = render_text(&r);
    assert!(
        text.contains(&format!("  nslookup said: {loader}")),
        "{text}"
    );
    assert!(!text.contains("not found in image"), "{text}");
}

/// Trial item 10: a loopback answer that comes from a CoreDNS hosts line is not told to "use a
/// CoreDNS hosts entry" as the fix: the advice asks for the server's real address there.
#[test]
fn loopback_from_a_coredns_hosts_line_asks_for_the_real_address() {
    let text = fixture("probe-glibc-bind.log")
        .replace("192.168.2.20", "127.0.0.2")
        .replacen(
            "#podresolve begin v1\n",
            "#podresolve begin v1\n#podresolve libc glibc\n",
            1,
        );
    let log = ProbeLog::parse(&text);
    let corefile = COREFILE.replace(
        "192.168.2.20 gitea.example.dev",
        "127.0.0.2 gitea.example.dev",
    );
    let hosts = vec![parse_host("gitea.example.dev").unwrap()];
    let c = ClusterDns {
        corefile: Some(Corefile::parse(&corefile).map_err(|e| e.to_string())),
        kube_dns_ips: vec!["127.0.0.77".into()],
        nodelocal_corefile: None,
        kube_system_services: None,
        nodelocal_daemonset: None,
    };
    let r = build(Inputs {
        log: &log,
        hosts: &hosts,
        cluster: &c,
        workstation: vec![ws(&[])],
        expect: None,
        probe: ProbeInfo {
            carrier: "job".into(),
            namespace: "team".into(),
            name: "podresolve-test".into(),
            image: "alpine:3.22".into(),
            ..Default::default()
        },
    });
    let h = &r.hosts[0];
    let l = h.loopback.as_deref().expect("a loopback answer");
    assert!(
        l.starts_with("gitea.example.dev resolves to the loopback (127.0.0.2): inside a pod that is the pod itself"),
        "{l}"
    );
    assert!(
        l.ends_with("use a name the cluster resolves to the server (a Service, or a CoreDNS hosts/template entry giving the server's address, not a loopback one)"),
        "{l}"
    );
    assert_eq!(h.verdict, Verdict::Loopback);
    assert!(
        h.coredns.iter().any(|s| s.answered
            && s.explanation.answered_by.as_deref() == Some("hosts")
            && s.explanation.detail == "pinned to 127.0.0.2"),
        "{:?}",
        h.coredns
    );
}
