//! Parsers on real captured probe logs and transcribed upstream outputs (see
//! tests/fixtures/README.md for provenance).

use podresolve::parse::*;
use podresolve::resolvconf::{Libc, ResolvConf};
use std::net::IpAddr;

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

struct Host<'a> {
    getent: GetentResult,
    ns: NslookupResult,
    _log: &'a ProbeLog,
}

fn host<'a>(log: &'a ProbeLog, name: &str) -> Host<'a> {
    let g = log.section("getent", name).expect("getent section");
    let n = log.section("nslookup", name).expect("nslookup section");
    let real = log.tool("nslookup").and_then(|t| t.real_path.as_deref());
    Host {
        getent: parse_getent(&g.body, g.rc),
        ns: parse_nslookup(&n.body, n.rc, real),
        _log: log,
    }
}

#[test]
fn probe_log_structure() {
    let log = ProbeLog::parse(&fixture("probe-glibc-bind.log"));
    assert_eq!(log.version.as_deref(), Some("v1"));
    assert!(log.complete);
    assert_eq!(log.tools.len(), 4);
    assert_eq!(
        log.tool("getent").unwrap().path.as_deref(),
        Some("/usr/bin/getent")
    );
    // resolv.conf + hosts + 10 hosts x (getent, nslookup)
    assert_eq!(log.sections.len(), 22);
    let rc = ResolvConf::parse(&log.section("resolv.conf", "").unwrap().body);
    assert_eq!(rc.nameservers, vec!["127.0.0.77"]);
    assert_eq!(rc.ndots, 5);
    assert_eq!(
        rc.query_order("registry", Libc::Glibc)[0],
        "registry.team.svc.cluster.local."
    );
    assert!(
        log.section("hosts", "")
            .unwrap()
            .body
            .contains("pinned.example.dev")
    );
}

#[test]
fn truncated_log_keeps_open_section_without_rc() {
    let full = fixture("probe-glibc-bind.log");
    let cut: String = full
        .lines()
        .take_while(|l| !l.starts_with("#podresolve end rc=0") || !full.is_empty())
        .take(20)
        .map(|l| format!("{l}\n"))
        .collect();
    let log = ProbeLog::parse(&cut);
    assert!(!log.complete);
    let last = log.sections.last().unwrap();
    assert_eq!(last.rc, None);
}

#[test]
fn glibc_getent_and_bind_nslookup() {
    let log = ProbeLog::parse(&fixture("probe-glibc-bind.log"));
    let h = host(&log, "gitea.example.dev");
    assert_eq!(h.getent.status, LookupStatus::Resolved);
    assert_eq!(h.getent.addresses, vec![ip("192.168.2.20")]);
    assert_eq!(h.getent.flavour, GetentFlavour::Glibc);
    assert_eq!(
        h.getent.canonical_name.as_deref(),
        Some("gitea.example.dev")
    );
    assert_eq!(h.ns.flavour, NslookupFlavour::Bind);
    assert_eq!(h.ns.server.as_deref(), Some("127.0.0.77"));
    assert_eq!(h.ns.status, LookupStatus::Resolved);
    assert_eq!(h.ns.addresses(), vec![ip("192.168.2.20")]);

    let cname = host(&log, "git.example.dev");
    assert_eq!(
        cname.getent.canonical_name.as_deref(),
        Some("gitea.example.dev")
    );
    assert_eq!(
        cname.ns.cnames,
        vec![(
            "git.example.dev".to_string(),
            "gitea.example.dev".to_string()
        )]
    );

    let search = host(&log, "registry");
    assert_eq!(
        search.getent.canonical_name.as_deref(),
        Some("registry.team.svc.cluster.local")
    );
    assert_eq!(search.ns.addresses(), vec![ip("10.96.12.34")]);
    assert_eq!(search.ns.answers[0].0, "registry.team.svc.cluster.local");

    let multi = host(&log, "multi.example.dev");
    assert_eq!(
        multi.getent.addresses,
        vec![ip("192.0.2.10"), ip("2001:db8::10")]
    );
    assert_eq!(
        multi.ns.addresses(),
        vec![ip("192.0.2.10"), ip("2001:db8::10")]
    );

    // /etc/hosts pin: libc path sees it, the DNS wire path does not.
    let pinned = host(&log, "pinned.example.dev");
    assert_eq!(pinned.getent.addresses, vec![ip("10.0.0.5")]);
    assert_eq!(pinned.ns.status, LookupStatus::NotFound);

    let nx = host(&log, "nosuch.example.dev");
    assert_eq!(nx.getent.status, LookupStatus::NotFound);
    assert_eq!(nx.getent.rc, Some(2));
    assert_eq!(nx.ns.status, LookupStatus::NotFound);
    assert_eq!(nx.ns.errors[0].name, "nosuch.example.dev");

    let nodata = host(&log, "txtonly.example.dev");
    assert_eq!(nodata.getent.status, LookupStatus::NotFound);
    assert_eq!(nodata.ns.status, LookupStatus::NoData);

    let refused = host(&log, "nosuch.zzz");
    assert_eq!(refused.ns.status, LookupStatus::Refused);

    let v6 = host(&log, "v6only.example.dev");
    assert_eq!(v6.ns.addresses(), vec![ip("2001:db8::66")]);

    let lit = host(&log, "192.168.2.20");
    assert_eq!(lit.getent.addresses, vec![ip("192.168.2.20")]);
    assert_eq!(lit.ns.ptr_names, vec!["gitea.example.dev"]);
    assert_eq!(lit.ns.status, LookupStatus::Resolved);
}

#[test]
fn busybox_new_nslookup() {
    let log = ProbeLog::parse(&fixture("probe-glibc-busybox.log"));
    let h = host(&log, "gitea.example.dev");
    assert_eq!(h.ns.flavour, NslookupFlavour::Busybox);
    assert_eq!(h.ns.server.as_deref(), Some("127.0.0.77"));
    assert_eq!(h.ns.addresses(), vec![ip("192.168.2.20")]);

    // BusyBox walks every search domain, prints NXDOMAIN for the others and exits 1 even
    // though the name resolved: the address wins.
    let search = host(&log, "registry");
    assert_eq!(search.ns.rc, Some(1));
    assert_eq!(search.ns.status, LookupStatus::Resolved);
    assert_eq!(search.ns.addresses(), vec![ip("10.96.12.34")]);
    assert!(
        search
            .ns
            .errors
            .iter()
            .any(|e| e.name == "registry.svc.cluster.local")
    );
    assert_eq!(
        search.ns.errors.len(),
        2,
        "deduplicated: {:?}",
        search.ns.errors
    );

    let nx = host(&log, "nosuch.example.dev");
    assert_eq!(nx.ns.status, LookupStatus::NotFound);
    let nodata = host(&log, "txtonly.example.dev");
    assert_eq!(nodata.ns.status, LookupStatus::NoData);
    let refused = host(&log, "nosuch.zzz");
    assert_eq!(refused.ns.status, LookupStatus::Refused);
    let pinned = host(&log, "pinned.example.dev");
    assert_eq!(pinned.ns.status, LookupStatus::NotFound);
    assert_eq!(pinned.getent.addresses, vec![ip("10.0.0.5")]);
    let multi = host(&log, "multi.example.dev");
    assert_eq!(
        multi.ns.addresses(),
        vec![ip("192.0.2.10"), ip("2001:db8::10")]
    );
    let cname = host(&log, "git.example.dev");
    assert_eq!(cname.ns.cnames.len(), 1);
}

#[test]
fn musl_getent() {
    let log = ProbeLog::parse(&fixture("probe-musl-busybox.log"));
    let h = host(&log, "gitea.example.dev");
    assert_eq!(h.getent.flavour, GetentFlavour::Musl);
    assert_eq!(h.getent.addresses, vec![ip("192.168.2.20")]);
    let multi = host(&log, "multi.example.dev");
    assert_eq!(multi.getent.flavour, GetentFlavour::Musl);
    assert_eq!(
        multi.getent.addresses,
        vec![ip("192.0.2.10"), ip("2001:db8::10")]
    );
    let search = host(&log, "registry");
    assert_eq!(
        search.getent.canonical_name.as_deref(),
        Some("registry.team.svc.cluster.local")
    );
    let nx = host(&log, "nosuch.example.dev");
    assert_eq!(nx.getent.status, LookupStatus::NotFound);
}

#[test]
fn timeouts() {
    for (f, flavour) in [
        ("probe-glibc-bind-timeout.log", NslookupFlavour::Bind),
        ("probe-glibc-busybox-timeout.log", NslookupFlavour::Busybox),
        ("probe-musl-busybox-timeout.log", NslookupFlavour::Busybox),
    ] {
        let log = ProbeLog::parse(&fixture(f));
        let h = host(&log, "gitea.example.dev");
        assert_eq!(h.ns.status, LookupStatus::Timeout, "{f}");
        assert_eq!(h.ns.flavour, flavour, "{f}");
        assert_eq!(
            h.getent.status,
            LookupStatus::NotFound,
            "{f}: glibc/musl exit 2"
        );
        let rc = ResolvConf::parse(&log.section("resolv.conf", "").unwrap().body);
        assert_eq!((rc.timeout_secs, rc.attempts), (1, 1));
    }
}

#[test]
fn busybox_legacy_transcribed() {
    let ok = parse_nslookup(&fixture("nslookup-busybox-1.28-ok.txt"), Some(0), None);
    assert_eq!(ok.flavour, NslookupFlavour::BusyboxLegacy);
    assert_eq!(ok.server.as_deref(), Some("10.96.0.10"));
    assert_eq!(ok.status, LookupStatus::Resolved);
    assert_eq!(ok.addresses(), vec![ip("10.96.0.1")]);
    assert_eq!(ok.answers[0].0, "kubernetes.default");

    let multi = parse_nslookup(&fixture("nslookup-busybox-1.28-multi.txt"), Some(0), None);
    assert_eq!(
        multi.addresses(),
        vec![ip("2404:6800:4007:802::200e"), ip("172.217.26.206")]
    );
    assert_eq!(multi.server.as_deref(), Some("10.18.0.23"));

    let bad = parse_nslookup(
        &fixture("nslookup-busybox-1.28-cantresolve.txt"),
        Some(1),
        None,
    );
    assert_eq!(bad.flavour, NslookupFlavour::BusyboxLegacy);
    assert_eq!(bad.status, LookupStatus::NotFound);
    assert_eq!(bad.errors[0].name, "kubernetes.default");

    let nx = parse_nslookup(
        &fixture("nslookup-busybox-1.31-nxdomain.txt"),
        Some(1),
        None,
    );
    assert_eq!(nx.flavour, NslookupFlavour::Busybox);
    assert_eq!(
        nx.status,
        LookupStatus::NotFound,
        "NXDOMAIN beats the AAAA 'No answer'"
    );
}

/// A getent that exists but cannot run (captured with the host's glibc getent under
/// `busybox sh -c 'ulimit -v 2000; getent ahosts gitea.example.dev 2>&1'`): exit 127 from the
/// dynamic loader is an error with its text kept, not "not found in image".
#[test]
fn getent_diagnostics_are_kept_and_an_exec_failure_is_not_a_missing_tool() {
    let g = parse_getent(
        "getent: error while loading shared libraries: libc.so.6: failed to map segment from shared object\n",
        Some(127),
    );
    assert_eq!(g.status, LookupStatus::Error);
    assert_eq!(
        g.errors,
        vec![
            "getent: error while loading shared libraries: libc.so.6: failed to map segment from shared object"
        ]
    );
    assert!(g.addresses.is_empty());
    let n = parse_nslookup(
        "/usr/bin/nslookup: error while loading shared libraries: libjemalloc.so.2: failed to map segment from shared object\n",
        Some(127),
        Some("/usr/bin/nslookup"),
    );
    assert_eq!(n.status, LookupStatus::Error);
    assert_eq!(n.errors.len(), 1);
    // Address lines are not errors.
    let g = parse_getent(
        "192.168.2.20    STREAM gitea.example.dev\n192.168.2.20    DGRAM  \n192.168.2.20    RAW    \n",
        Some(0),
    );
    assert!(g.errors.is_empty(), "{:?}", g.errors);
}

#[test]
fn missing_tools_and_tls_git_sections() {
    let g = parse_getent("getent: not found in image\n", Some(127));
    assert_eq!(g.status, LookupStatus::ToolMissing);
    let n = parse_nslookup("nslookup: not found in image\n", Some(127), None);
    assert_eq!(n.status, LookupStatus::ToolMissing);

    let tls = parse_tls(
        "Verify return code: 20 (unable to get local issuer certificate)\nsubject=CN = gitea.example.dev\nissuer=CN = Example Private CA\nnotAfter=Jan  1 00:00:00 2027 GMT\n",
        Some(0),
    );
    assert!(!tls.verified);
    assert_eq!(
        tls.verify_result.as_deref(),
        Some("unable to get local issuer certificate")
    );
    assert_eq!(tls.subject.as_deref(), Some("CN = gitea.example.dev"));
    assert_eq!(tls.not_after.as_deref(), Some("Jan  1 00:00:00 2027 GMT"));

    let git = parse_git("0123456789abcdef0123456789abcdef01234567\tHEAD\n", Some(0));
    assert!(git.reachable);
    assert_eq!(
        git.head.as_deref(),
        Some("0123456789abcdef0123456789abcdef01234567")
    );
    let bad = parse_git(
        "fatal: unable to access 'https://x/': Could not resolve host: x\n",
        Some(128),
    );
    assert!(!bad.reachable);
    assert!(bad.error.unwrap().contains("Could not resolve host"));
}

#[test]
fn tls_and_git_captured() {
    // openssl 3.0.19 s_client + x509, git 2.47.3, against a local s_server and a dumb-HTTP repo.
    let log = ProbeLog::parse(&fixture("probe-tls-untrusted-git-ok.log"));
    let s = log.section("tls", "tls.example.dev").unwrap();
    let t = parse_tls(&s.body, s.rc);
    assert!(!t.verified);
    assert_eq!(
        t.verify_result.as_deref(),
        Some("self-signed certificate in certificate chain")
    );
    assert_eq!(t.subject.as_deref(), Some("CN = tls.example.dev"));
    assert_eq!(t.issuer.as_deref(), Some("CN = Example Private CA"));
    assert_eq!(t.not_after.as_deref(), Some("Mar  4 07:32:31 2029 GMT"));
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let g = log.sections.iter().find(|s| s.kind == "git").unwrap();
    let g = parse_git(&g.body, g.rc);
    assert!(g.reachable);
    assert_eq!(
        g.head.as_deref(),
        Some("6ba2bd89b2e76f9f90d7dfabf7495086812aaa4a")
    );

    let log = ProbeLog::parse(&fixture("probe-tls-trusted.log"));
    let s = log.section("tls", "tls.example.dev").unwrap();
    let t = parse_tls(&s.body, s.rc);
    assert!(t.verified);
    assert_eq!(t.verify_result.as_deref(), Some("ok"));

    let log = ProbeLog::parse(&fixture("probe-tls-refused-git-refused.log"));
    let s = log.section("tls", "tls.example.dev").unwrap();
    let t = parse_tls(&s.body, s.rc);
    assert!(!t.verified);
    assert_eq!(t.verify_result, None);
    assert_eq!(t.rc, Some(1));
    assert!(
        t.errors.iter().any(|e| e.contains("Connection refused")),
        "{:?}",
        t.errors
    );
    let g = log.sections.iter().find(|s| s.kind == "git").unwrap();
    let g = parse_git(&g.body, g.rc);
    assert!(!g.reachable);
    assert_eq!(g.rc, Some(128));
    assert!(g.error.unwrap().contains("Couldn't connect to server"));
    // /etc/hosts answers the libc path, the DNS wire path does not know the name.
    let ge = log.section("getent", "tls.example.dev").unwrap();
    assert_eq!(
        parse_getent(&ge.body, ge.rc).addresses,
        vec![ip("127.0.0.88")]
    );
}
