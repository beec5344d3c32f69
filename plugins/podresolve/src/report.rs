//! Assemble the explanation from the probe log, the cluster's DNS configuration and the
//! workstation's answer, and render it (table or a stable JSON/YAML schema).
//!
//! Schema `podresolve.cluster-loop.dev/v1` (camelCase keys; fields are never removed within
//! v1; absent data is `null`, never omitted):
//! `{apiVersion, kind: PodResolveReport, probe{carrier,namespace,name,pod,node,image,fromPod,fallbackReason},
//!   resolvConf{nameservers,search,ndots,timeoutSecs,attempts,otherOptions}|null,
//!   libc (glibc|musl|unknown),
//!   clusterDns{kubeDnsIps,corefileFound,corefileError,imports,
//!   nodeLocal{detected,evidence[],toCorednsZones[],otherUpstream,forwards[{zones,to,owner,reachesCoredns}]}},
//!   hosts[{host, queryOrder[], loopback|null,
//!   answer{query,index,searchDomain,rule,evidence,headline}|null,
//!   pod{libc{status,addresses,canonicalName,flavour,errors[],rc},
//!   dns{status,flavour,server,addresses,cnames,errors[],rc}, addresses[]},
//!   coredns[{query,rewritten,serverBlock,answeredBy,detail,line,cached,steps[],
//!   bypassedByNodeLocal,answered}], workstation{addresses,error,fromHostsFile}, verdict, expect[]|null,
//!   expectMatch|null, tls|null, notes[]}], git|null, complete}`;
//! verdict: `same`, `differs`, `loopback` (the pod gets only loopback addresses) or
//! `pod-cannot-resolve`.
//!
//! There is no `exitCode` key (as in the other plugins' reports): the process exit code is
//! the contract, and a report field could only ever say 0 or 1 (exit 3 and 130 print no report).

use crate::answer::{Answer, AnswerRule};
use crate::corefile::{Corefile, Explanation, NodeLocal};
use crate::parse::{
    GetentResult, GitResult, LookupStatus, NslookupResult, ProbeLog, TlsResult, parse_getent,
    parse_git, parse_nslookup, parse_tls,
};
use crate::resolvconf::{Libc, ResolvConf};
use crate::validate::Host;
use crate::workstation::{Verdict, WorkstationAnswer, expect_matches, verdict};
use serde::Serialize;
use std::net::IpAddr;

/// Schema identifier of the machine output.
pub const API_VERSION: &str = "podresolve.cluster-loop.dev/v1";

/// `-o json|yaml` when a run ends without a report (exit 1: the probe container cannot start,
/// e.g. its image cannot be pulled; exit 3: cluster/API error): `{apiVersion, kind:
/// PodResolveError, exitCode, error}`, `error` being the message also printed on stderr.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorReport {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// `PodResolveError`.
    pub kind: &'static str,
    /// The process exit status (1 or 3).
    pub exit_code: i32,
    /// What went wrong and what to do.
    pub error: String,
}

/// The [`ErrorReport`] of a failed run.
pub fn error_report(message: &str, exit_code: i32) -> ErrorReport {
    ErrorReport {
        api_version: API_VERSION,
        kind: "PodResolveError",
        exit_code,
        error: message.to_string(),
    }
}
/// `kind` of the machine output (second key, after `apiVersion`).
pub const KIND: &str = "PodResolveReport";

/// Where the probe ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeInfo {
    /// `job`, `pod` or `ephemeral`.
    pub carrier: String,
    /// Namespace of the probe.
    pub namespace: String,
    /// Job/Pod name, or the ephemeral container's name.
    pub name: String,
    /// The pod that ran the script.
    pub pod: Option<String>,
    /// Node it ran on.
    pub node: Option<String>,
    /// Image.
    pub image: String,
    /// `--from` target pod (`ns/name`).
    pub from_pod: Option<String>,
    /// Why the ephemeral-container path was not used (403/404/422 message).
    pub fallback_reason: Option<String>,
    /// Kubernetes API requests this run made (budget: at most 10 for one host).
    pub api_requests: u32,
}

/// Cluster DNS configuration as read from the API.
#[derive(Debug, Clone, Default)]
pub struct ClusterDns {
    /// kube-system/coredns ConfigMap `Corefile` parse result (None: ConfigMap or key absent).
    pub corefile: Option<Result<Corefile, String>>,
    /// ClusterIPs of kube-system/kube-dns (and kube-dns-upstream when present).
    pub kube_dns_ips: Vec<String>,
    /// kube-system/node-local-dns ConfigMap `Corefile`, when it exists.
    pub nodelocal_corefile: Option<String>,
    /// Every Service in kube-system (one LIST), to name the owner of a literal IP in the
    /// node-local-dns Corefile; `None` when they could not be listed.
    pub kube_system_services: Option<Vec<crate::corefile::DnsService>>,
    /// DaemonSet kube-system/node-local-dns, read only when the node-local-dns ConfigMap
    /// exists: `Ok(status.numberReady)`, or `Err(why)` (absent, unreadable). `None`: not read.
    /// A ConfigMap alone proves nothing runs: NodeLocal DNSCache is judged active only when
    /// this has a ready pod or the pod's resolv.conf names its address.
    pub nodelocal_daemonset: Option<Result<i32, String>>,
}

/// Serialized cluster DNS summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDnsSummary {
    /// kube-dns Service IPs.
    pub kube_dns_ips: Vec<String>,
    /// The Corefile was found and parsed.
    pub corefile_found: bool,
    /// Why it could not be used.
    pub corefile_error: Option<String>,
    /// `import` lines (not followed).
    pub imports: Vec<String>,
    /// NodeLocal DNSCache findings.
    pub node_local: NodeLocal,
}

/// The pod's libc view (getent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LibcView {
    /// Status.
    pub status: LookupStatus,
    /// Addresses.
    pub addresses: Vec<IpAddr>,
    /// ai_canonname.
    pub canonical_name: Option<String>,
    /// glibc/musl/unknown.
    pub flavour: crate::parse::GetentFlavour,
    /// Every line getent's section printed that is not an address line (its diagnostics,
    /// the step timeout's), verbatim.
    pub errors: Vec<String>,
    /// Exit status.
    pub rc: Option<i32>,
}

/// The pod's DNS wire view (nslookup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsView {
    /// Status.
    pub status: LookupStatus,
    /// Which nslookup.
    pub flavour: crate::parse::NslookupFlavour,
    /// Server asked.
    pub server: Option<String>,
    /// Addresses.
    pub addresses: Vec<IpAddr>,
    /// CNAME chain.
    pub cnames: Vec<(String, String)>,
    /// PTR names, for an IP literal (nslookup of an address is a reverse lookup).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ptr_names: Vec<String>,
    /// Error lines.
    pub errors: Vec<String>,
    /// Exit status.
    pub rc: Option<i32>,
}

/// Both pod views plus the addresses a pod application gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// getent ahosts (None when the section is missing from the log).
    pub libc: Option<LibcView>,
    /// nslookup.
    pub dns: Option<DnsView>,
    /// What an application in the pod gets: the libc addresses when getent ran, else the
    /// nslookup addresses.
    pub addresses: Vec<IpAddr>,
}

/// One CoreDNS explanation line for one queried FQDN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CorednsStep {
    /// The explanation.
    #[serde(flatten)]
    pub explanation: Explanation,
    /// NodeLocal DNSCache sends this name upstream without CoreDNS.
    pub bypassed_by_node_local: bool,
    /// This is the FQDN that produced the pod's answer.
    pub answered: bool,
}

/// One name of the query order and whether the pod's libc asked it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryAsked {
    /// The FQDN.
    pub name: String,
    /// A DNS query for it was made.
    pub asked: bool,
    /// Its answer is the pod's answer.
    pub answered: bool,
}

/// Which names of `order` libc asked, given the answer: none when /etc/hosts answered
/// (`etc_hosts`), those up to and including `answered` (the name that produced the answer),
/// or all of them when no name answered (libc tries every one before giving up).
pub fn queries_asked(order: &[String], answered: Option<&str>, etc_hosts: bool) -> Vec<QueryAsked> {
    let at = answered.and_then(|q| order.iter().position(|o| o == q));
    order
        .iter()
        .enumerate()
        .map(|(i, name)| QueryAsked {
            name: name.clone(),
            asked: !etc_hosts && at.is_none_or(|a| i <= a),
            answered: !etc_hosts && at == Some(i),
        })
        .collect()
}

/// The report for one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostReport {
    /// The host as typed.
    pub host: String,
    /// True for an IP address: no lookup is needed to reach it (getent returns it as given);
    /// nslookup of it is a reverse (PTR) lookup.
    pub ip_literal: bool,
    /// FQDNs the pod's libc would ask, in order (the search-list rule for this name); which of
    /// them it really asked is in [`HostReport::queries`].
    pub query_order: Vec<String>,
    /// [`HostReport::query_order`] with what really happened to each name, as the text's
    /// "queried" line says: none asked when the pod's /etc/hosts answered (libc reads it
    /// before DNS), and none after the one that answered (libc stops at the first answer).
    pub queries: Vec<QueryAsked>,
    /// Set when the name means the pod itself (`localhost`, `*.localhost`, a loopback
    /// literal or a loopback answer): the sentence the report shows first.
    pub loopback: Option<String>,
    /// The query that produced the pod's answer and the rule of the query order that chose
    /// it, derived from the libc result (see [`crate::answer`]); `null` when nothing answered
    /// or the answer cannot be tied to a query (a note says why).
    pub answer: Option<Answer>,
    /// The pod's answers.
    pub pod: PodView,
    /// CoreDNS per FQDN, up to and including the one that answered.
    pub coredns: Vec<CorednsStep>,
    /// Workstation answer.
    pub workstation: WorkstationAnswer,
    /// Pod vs workstation.
    pub verdict: Verdict,
    /// `--expect` addresses.
    pub expect: Option<Vec<IpAddr>>,
    /// `--expect` result.
    pub expect_match: Option<bool>,
    /// `--tls` result.
    pub tls: Option<TlsResult>,
    /// Human explanations.
    pub notes: Vec<String>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// [`API_VERSION`].
    pub api_version: String,
    /// [`KIND`].
    pub kind: String,
    /// Probe placement.
    pub probe: ProbeInfo,
    /// The pod's resolv.conf.
    pub resolv_conf: Option<ResolvConf>,
    /// Search rules applied.
    pub libc: Libc,
    /// Cluster DNS summary.
    pub cluster_dns: ClusterDnsSummary,
    /// Per host.
    pub hosts: Vec<HostReport>,
    /// `--git` result.
    pub git: Option<GitResult>,
    /// The probe log ended with its `done` line.
    pub complete: bool,
    /// The process exit code this report implies: 0 ok, 1 mismatch, cannot resolve, TLS not
    /// verified or git unreachable. Not serialized: the exit status itself is the contract.
    #[serde(skip)]
    pub exit_code: i32,
}

/// Everything [`build`] needs.
pub struct Inputs<'a> {
    /// Parsed probe log.
    pub log: &'a ProbeLog,
    /// Hosts in argument order.
    pub hosts: &'a [Host],
    /// Cluster DNS config.
    pub cluster: &'a ClusterDns,
    /// Workstation answers, one per host.
    pub workstation: Vec<WorkstationAnswer>,
    /// `--expect`.
    pub expect: Option<Vec<IpAddr>>,
    /// Probe placement.
    pub probe: ProbeInfo,
}

fn libc_view(g: &GetentResult) -> LibcView {
    LibcView {
        status: g.status,
        addresses: g.addresses.clone(),
        canonical_name: g.canonical_name.clone(),
        flavour: g.flavour,
        errors: g.errors.clone(),
        rc: g.rc,
    }
}

fn dns_view(n: &NslookupResult) -> DnsView {
    DnsView {
        status: n.status,
        flavour: n.flavour,
        server: n.server.clone(),
        addresses: n.addresses(),
        cnames: n.cnames.clone(),
        ptr_names: n.ptr_names.clone(),
        errors: n.errors.iter().map(|e| e.text.clone()).collect(),
        rc: n.rc,
    }
}

/// The "this is the pod itself" sentence for `localhost`, `*.localhost` (RFC 6761 6.3: these
/// names always mean the loopback), a loopback IP literal, or a name whose pod answer is only
/// loopback addresses (127.0.0.0/8, ::1). `None` otherwise.
pub fn loopback_sentence(host: &Host, arg: &str, pod_addresses: &[IpAddr]) -> Option<String> {
    let name = arg.trim_end_matches('.').to_ascii_lowercase();
    let by_name =
        matches!(host, Host::Name { .. }) && (name == "localhost" || name.ends_with(".localhost"));
    let own = |ip: &IpAddr| cluster_loop::probe::is_own_machine(*ip);
    let literal = matches!(host, Host::Ip(ip) if own(ip));
    let answer_loopback = !pod_addresses.is_empty() && pod_addresses.iter().all(own);
    if !(by_name || literal || answer_loopback) {
        return None;
    }
    if by_name && pod_addresses.is_empty() {
        // RFC 6761 6.3 says so, but this pod's resolver did not answer it (musl and CoreDNS
        // send *.localhost to DNS): nothing connects anywhere; say what happened.
        return Some(format!(
            "{arg} is a loopback name (RFC 6761), but the pod's resolver did not answer it \
             (no address): a Flux URL with it fails to resolve in the cluster, and where it \
             resolves it is the pod itself, never the server; use a name the cluster resolves \
             to the server (a Service, or a CoreDNS hosts entry)"
        ));
    }
    let what = if literal {
        format!(
            "{arg} is {}",
            if matches!(host, Host::Ip(ip) if ip.to_canonical().is_unspecified()) {
                "the unspecified address, which Linux connects to the loopback"
            } else {
                "a loopback address"
            }
        )
    } else {
        format!(
            "{arg} resolves to the loopback ({})",
            pod_addresses
                .iter()
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Some(format!(
        "{what}: inside a pod that is the pod itself (its own network namespace), not this \
         workstation, the node or another Service. A Flux URL with it makes source-controller \
         connect to itself; use a name the cluster resolves to the server{}",
        if answer_loopback && !literal && !by_name {
            // The loopback answer may come from a CoreDNS hosts line itself: "add a CoreDNS
            // hosts entry" would be no advice.
            " (a Service, or a CoreDNS hosts/template entry giving the server's address, not a \
             loopback one)"
        } else {
            " (a Service, or a CoreDNS hosts entry)"
        }
    ))
}

fn hosts_arg(host: &Host) -> String {
    host.arg().trim_end_matches('.').to_string()
}

fn fqdn(s: &str) -> String {
    crate::corefile::normalize_zone(s)
}

/// Build the report. Pure: no I/O.
pub fn build(inp: Inputs<'_>) -> Report {
    let log = inp.log;
    let resolv = log
        .section("resolv.conf", "")
        .filter(|s| s.rc == Some(0))
        .map(|s| ResolvConf::parse(&s.body));
    let hosts_file = log
        .section("hosts", "")
        .map(|s| s.body.clone())
        .unwrap_or_default();
    let ns_real = log.tool("nslookup").and_then(|t| t.real_path.clone());

    // Which libc: what the probe read from the image's own getent (or sh) binary, else the
    // probe image's reference ([`Libc::of_image`]), else unknown. Never from the answers: a
    // name that fails prints no getent lines, and the label must not change with the answer.
    let libc = match log.libc.as_deref() {
        Some("musl") => Libc::Musl,
        Some("glibc") => Libc::Glibc,
        _ => Libc::of_image(&inp.probe.image).unwrap_or(Libc::Unknown),
    };

    let mut summary = ClusterDnsSummary {
        kube_dns_ips: inp.cluster.kube_dns_ips.clone(),
        ..Default::default()
    };
    let corefile = corefile_summary(inp.cluster, &mut summary);
    let nodelocal = node_local(inp.cluster, resolv.as_ref());
    summary.node_local = nodelocal.clone();

    let uses_cluster_dns = resolv.as_ref().is_some_and(|rc| {
        rc.effective_nameservers().iter().any(|ns| {
            inp.cluster.kube_dns_ips.contains(ns) || ns == crate::resolvconf::NODELOCAL_DNS_IP
        })
    });

    let ctx = HostCtx {
        log,
        resolv: resolv.as_ref(),
        hosts_file: &hosts_file,
        ns_real: ns_real.as_deref(),
        libc,
        corefile,
        nodelocal: &nodelocal,
        uses_cluster_dns,
        cluster: inp.cluster,
        expect: inp.expect.as_ref(),
    };
    let mut hosts = Vec::new();
    let mut exit_code = 0;
    for (i, host) in inp.hosts.iter().enumerate() {
        let ws = inp
            .workstation
            .get(i)
            .cloned()
            .unwrap_or(WorkstationAnswer {
                addresses: Vec::new(),
                error: Some("not resolved".into()),
                from_hosts_file: None,
            });
        let h = host_report(&ctx, host, ws);
        if h.verdict == Verdict::PodCannotResolve || h.expect_match == Some(false) {
            exit_code = 1;
        }
        hosts.push(h);
    }
    let git = log
        .sections
        .iter()
        .find(|s| s.kind == "git")
        .map(|s| parse_git(&s.body, s.rc));
    if git.as_ref().is_some_and(|g| !g.reachable) {
        exit_code = 1;
    }
    if hosts
        .iter()
        .any(|h| h.tls.as_ref().is_some_and(|t| !t.verified))
    {
        exit_code = 1;
    }
    Report {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        probe: inp.probe,
        resolv_conf: resolv,
        libc,
        cluster_dns: summary,
        hosts,
        git,
        complete: log.complete,
        exit_code,
    }
}

/// The kube-system/coredns Corefile, when it parsed; the summary says why not.
fn corefile_summary<'a>(
    cluster: &'a ClusterDns,
    summary: &mut ClusterDnsSummary,
) -> Option<&'a Corefile> {
    match &cluster.corefile {
        Some(Ok(cf)) => {
            summary.corefile_found = true;
            summary.imports = cf.imports.clone();
            Some(cf)
        }
        Some(Err(e)) => {
            summary.corefile_error = Some(e.clone());
            None
        }
        None => {
            summary.corefile_error =
                Some("ConfigMap kube-system/coredns (key Corefile) not found".into());
            None
        }
    }
}

/// NodeLocal DNSCache as the cluster and the pod's resolv.conf show it: running (a ready
/// DaemonSet pod, or the pod's nameserver is its address), and what it forwards past CoreDNS.
fn node_local(cluster: &ClusterDns, resolv: Option<&ResolvConf>) -> NodeLocal {
    let mut nodelocal = match &cluster.nodelocal_corefile {
        Some(text) => {
            // Without the Service list, kube-dns's own IPs are still known to be CoreDNS.
            let services = cluster.kube_system_services.clone().unwrap_or_else(|| {
                vec![crate::corefile::DnsService {
                    name: "kube-system/kube-dns".into(),
                    cluster_ips: cluster.kube_dns_ips.clone(),
                    fronts_coredns: true,
                }]
            });
            let complete = cluster.kube_system_services.is_some();
            NodeLocal::from_corefile(text, &services, complete).unwrap_or_else(|e| NodeLocal {
                detected: true,
                evidence: vec![format!("node-local-dns ConfigMap unreadable: {e}")],
                ..Default::default()
            })
        }
        None => NodeLocal::default(),
    };
    let pod_uses_nodelocal = resolv.is_some_and(|rc| rc.uses_nodelocal());
    if cluster.nodelocal_corefile.is_some() && !pod_uses_nodelocal {
        // The ConfigMap outlives an uninstalled or never-started DaemonSet: only running pods
        // answer (and can bypass CoreDNS).
        match &cluster.nodelocal_daemonset {
            Some(Ok(n)) if *n > 0 => nodelocal.evidence.push(format!(
                "DaemonSet kube-system/node-local-dns has {n} ready pod{}",
                if *n == 1 { "" } else { "s" }
            )),
            other => {
                nodelocal.detected = false;
                nodelocal.evidence.push(format!(
                    "the node-local-dns ConfigMap exists, but {}, and the pod's nameserver is \
                     not {}: NodeLocal DNSCache is not judged active and no bypass is claimed",
                    match other {
                        Some(Ok(_)) =>
                            "DaemonSet kube-system/node-local-dns has no ready pod".to_string(),
                        Some(Err(e)) => e.clone(),
                        None => "its DaemonSet was not read".to_string(),
                    },
                    crate::resolvconf::NODELOCAL_DNS_IP
                ));
            }
        }
    }
    if let Some(rc) = &resolv
        && rc.uses_nodelocal()
    {
        nodelocal.detected = true;
        nodelocal.evidence.push(format!(
            "pod resolv.conf nameserver is {}",
            crate::resolvconf::NODELOCAL_DNS_IP
        ));
        if nodelocal.other_upstream.is_none() && cluster.nodelocal_corefile.is_none() {
            nodelocal
                .evidence
                .push("node-local-dns ConfigMap not readable: bypass cannot be judged".into());
        }
    }
    nodelocal
}

/// What every host's report reads: the probe log and the cluster's DNS, read once.
struct HostCtx<'a> {
    log: &'a ProbeLog,
    resolv: Option<&'a ResolvConf>,
    /// The pod's /etc/hosts.
    hosts_file: &'a str,
    /// The real path of the probe's nslookup (busybox applet or bind-tools).
    ns_real: Option<&'a str>,
    libc: Libc,
    corefile: Option<&'a Corefile>,
    nodelocal: &'a NodeLocal,
    /// The pod's nameserver is kube-dns (or NodeLocal DNSCache).
    uses_cluster_dns: bool,
    cluster: &'a ClusterDns,
    expect: Option<&'a Vec<IpAddr>>,
}

/// One host's report: the pod's answers, the query that answered, CoreDNS's path, the
/// workstation's answer `ws` and the notes that explain them.
fn host_report(c: &HostCtx<'_>, host: &Host, ws: WorkstationAnswer) -> HostReport {
    let (log, resolv, libc, hosts_file, ns_real) =
        (c.log, c.resolv, c.libc, c.hosts_file, c.ns_real);
    let arg = host.arg();
    let g = log
        .section("getent", &arg)
        .map(|s| parse_getent(&s.body, s.rc));
    let n = log
        .section("nslookup", &arg)
        .map(|s| parse_nslookup(&s.body, s.rc, ns_real));
    let tls = log.section("tls", &arg).map(|s| parse_tls(&s.body, s.rc));
    let mut notes = Vec::new();
    let pod_addresses = match (&g, &n) {
        (Some(g), _) if g.status != LookupStatus::ToolMissing => g.addresses.clone(),
        (_, Some(n)) => n.addresses(),
        _ => Vec::new(),
    };
    if g.is_none() && n.is_none() {
        notes.push("the probe log has no result for this host (probe killed by its deadline or log truncated)".into());
    }

    let query_order = match (host, &resolv) {
        (Host::Name { .. }, Some(rc)) => rc.query_order(&arg, libc),
        (Host::Name { .. }, None) => vec![fqdn(&arg)],
        (Host::Ip(_), _) => Vec::new(),
    };

    // Which FQDN answered: from the libc result (canonical name + query order), never
    // from nslookup, whose own query logic differs (see crate::answer).
    let answer = match host {
        Host::Name { .. } => crate::answer::derive(
            &arg,
            &query_order,
            resolv,
            libc,
            g.as_ref(),
            n.as_ref(),
            hosts_file,
        ),
        Host::Ip(_) => None,
    };
    let loopback = loopback_sentence(host, &arg, &pod_addresses);
    if let (Host::Name { .. }, Some(g), None) = (host, &g, &answer)
        && g.status == LookupStatus::Resolved
    {
        notes.push(format!(
            "which query answered cannot be told: libc's canonical name {} is not one of the \
             queried names and no nslookup CNAME line leads to it",
            g.canonical_name.as_deref().unwrap_or("(none printed)")
        ));
    }
    if let (Host::Name { .. }, Some(g), Some(n)) = (host, &g, &n)
        && let Some(d) =
            crate::answer::disagreement(&arg, resolv, g, n, hosts_file, answer.as_ref())
    {
        notes.push(d);
    }

    let from_etc_hosts = answer
        .as_ref()
        .is_some_and(|a| a.rule == AnswerRule::EtcHosts);
    let coredns = match (c.corefile, host, from_etc_hosts) {
        (Some(cf), Host::Name { .. }, false) => coredns_steps(
            c,
            cf,
            &query_order,
            answer.as_ref(),
            &pod_addresses,
            &mut notes,
        ),
        _ => Vec::new(),
    };
    nameserver_notes(c, n.as_ref(), &mut notes);
    let v = verdict(&pod_addresses, &ws.addresses);
    if let Some(note) = workstation_note(host, &ws, v, loopback.is_some(), from_etc_hosts) {
        notes.push(note);
    }
    if v == Verdict::Differs && ws.addresses.is_empty() {
        notes.push("the workstation cannot resolve it; only the pod can".into());
    }
    let expect_match = c.expect.map(|e| expect_matches(&pod_addresses, e));
    let queries = queries_asked(
        &query_order,
        answer.as_ref().and_then(|a| a.query.as_deref()),
        answer
            .as_ref()
            .is_some_and(|a| a.rule == AnswerRule::EtcHosts),
    );
    HostReport {
        ip_literal: matches!(host, Host::Ip(_)),
        host: arg,
        query_order,
        queries,
        loopback,
        answer,
        pod: PodView {
            libc: g.as_ref().map(libc_view),
            dns: n.as_ref().map(dns_view),
            addresses: pod_addresses,
        },
        coredns,
        workstation: ws,
        verdict: v,
        expect: c.expect.cloned(),
        expect_match,
        tls,
        notes,
    }
}

/// CoreDNS's path for each query up to the one that answered, with what NodeLocal DNSCache
/// bypasses (never contradicting the observed answer); its notes go to `notes`.
fn coredns_steps(
    c: &HostCtx<'_>,
    cf: &Corefile,
    query_order: &[String],
    answer: Option<&Answer>,
    pod_addresses: &[IpAddr],
    notes: &mut Vec<String>,
) -> Vec<CorednsStep> {
    let nodelocal = c.nodelocal;
    let mut coredns = Vec::new();
    let answered_fqdn = answer.as_ref().and_then(|a| a.query.clone());
    for q in query_order {
        let e = cf.explain(q, 53);
        let bypass = nodelocal.bypasses_coredns(q);
        let answered = answered_fqdn.as_deref() == Some(q.as_str());
        coredns.push(CorednsStep {
            explanation: e,
            bypassed_by_node_local: bypass,
            answered,
        });
        if answered {
            break;
        }
    }
    // Never contradict the observed answer: a pod that got exactly the CoreDNS hosts
    // pin was answered by CoreDNS, whatever node-local-dns's Corefile says.
    let mut intercepted = true;
    for step in coredns.iter_mut().filter(|s| s.bypassed_by_node_local) {
        let e = &step.explanation;
        let pins: Vec<IpAddr> = match (
            e.answered_by.as_deref(),
            e.detail.strip_prefix("pinned to "),
        ) {
            (Some("hosts"), Some(list)) => {
                list.split(", ").filter_map(|a| a.parse().ok()).collect()
            }
            _ => continue,
        };
        if !pod_addresses.is_empty() && pod_addresses.iter().all(|a| pins.contains(a)) {
            step.bypassed_by_node_local = false;
            intercepted = false;
            notes.push(format!(
                "node-local-dns's Corefile would forward {} to {} without CoreDNS, but the \
                     pod's answer ({}) is the CoreDNS hosts pin (Corefile line {}): this query \
                     reached CoreDNS, so no bypass is claimed (node-local-dns does not \
                     intercept this pod's queries)",
                e.query,
                nodelocal
                    .bypass_upstream(&e.query)
                    .unwrap_or("its upstream"),
                pod_addresses
                    .iter()
                    .map(IpAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                e.line.map(|l| l.to_string()).unwrap_or_else(|| "?".into()),
            ));
        }
    }
    // That answer shows node-local-dns does not intercept this pod's queries (the
    // note says so): no other query of the same pod is claimed to skip CoreDNS either.
    if !intercepted {
        for step in coredns.iter_mut() {
            step.bypassed_by_node_local = false;
        }
    }
    for step in &coredns {
        let coredns_rule = matches!(
            step.explanation.answered_by.as_deref(),
            Some("hosts" | "template")
        ) || step.explanation.rewritten != step.explanation.query;
        if step.bypassed_by_node_local && coredns_rule {
            notes.push(format!(
                    "NodeLocal DNSCache forwards {} to {} without CoreDNS: the CoreDNS {} rule (Corefile line {}) is bypassed",
                    step.explanation.query,
                    nodelocal.bypass_upstream(&step.explanation.query).unwrap_or("its upstream"),
                    step.explanation.answered_by.as_deref().unwrap_or("rewrite"),
                    step.explanation.line.map(|l| l.to_string()).unwrap_or_else(|| "?".into()),
                ));
        }
    }
    coredns
}

/// Notes on the pod's nameserver: not kube-dns, unreachable, or no answer at all.
fn nameserver_notes(c: &HostCtx<'_>, n: Option<&NslookupResult>, notes: &mut Vec<String>) {
    let (resolv, cluster, uses_cluster_dns) = (c.resolv, c.cluster, c.uses_cluster_dns);
    if !uses_cluster_dns && resolv.is_some() && !cluster.kube_dns_ips.is_empty() {
        notes.push(format!(
                "the pod's nameserver ({}) is not the kube-dns Service ({}): CoreDNS explanations may not apply (dnsPolicy Default/None?)",
                resolv.map(|r| r.effective_nameservers().join(", ")).unwrap_or_default(),
                cluster.kube_dns_ips.join(", ")
            ));
    }
    if let Some(n) = &n
        && let Some(e) = n.errors.iter().find(|e| {
            e.text.contains("can't connect to remote host")
                || e.text.contains("unreachable")
                || e.text.contains("Connection refused")
        })
    {
        let nodelocal_ns = resolv.is_some_and(|r| r.uses_nodelocal());
        notes.push(format!(
            "the pod cannot reach its nameserver: {}{}",
            e.text,
            if nodelocal_ns {
                format!(
                    ". {} is the NodeLocal DNSCache address: no node-local-dns pod answers \
                         on this node (kubectl get pods -n kube-system -l k8s-app=node-local-dns \
                         -o wide); pods whose kubelet points them at it resolve nothing until \
                         it runs",
                    crate::resolvconf::NODELOCAL_DNS_IP
                )
            } else {
                String::new()
            }
        ));
    }
    if let Some(n) = &n
        && n.status == LookupStatus::Timeout
    {
        notes.push(format!(
                "no DNS server answered (nameserver {}): check the kube-dns Service endpoints and NetworkPolicies allowing UDP/TCP 53 egress",
                n.server.clone().unwrap_or_else(|| resolv.map(|r| r.effective_nameservers().join(", ")).unwrap_or_default())
            ));
    }
}

/// The note on a workstation answer that came from its own hosts file (none for a loopback
/// name, `loopback`, which is the machine itself on both sides).
fn workstation_note(
    host: &Host,
    ws: &WorkstationAnswer,
    v: Verdict,
    loopback: bool,
    from_etc_hosts: bool,
) -> Option<String> {
    // A loopback name is the machine itself on both sides (the loopback sentence says so):
    // no cluster-side fix applies. A pod that answered from its own /etc/hosts
    // (hostAliases) needs no cluster DNS entry either.
    let file = ws.from_hosts_file.as_ref().filter(|_| !loopback)?;
    {
        let ws_own = !ws.addresses.is_empty()
            && ws
                .addresses
                .iter()
                .all(|ip| cluster_loop::probe::is_own_machine(*ip));
        Some(if ws_own {
            // A hosts line pointing a name at this workstation's loopback (a port-forward,
            // a local tunnel or VM): it says nothing about where the server is, and the
            // same address in the cluster would be each pod itself.
            format!(
                "the workstation's answer ({}) came from its {file} and is this workstation \
                     itself (its loopback: a port-forward or local tunnel?): it says nothing \
                     about where the server is, and the same address in the cluster would be \
                     the pod itself; make the cluster answer {arg} with the server's real \
                     address (a CoreDNS hosts entry, or a Service)",
                ws.addresses
                    .iter()
                    .map(IpAddr::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                arg = hosts_arg(host),
            )
        } else if v == Verdict::Same {
            format!(
                "the workstation's answer came from its {file}, which pods never see; the \
                     pod happens to get the same addresses from the cluster's DNS"
            )
        } else if from_etc_hosts {
            format!(
                "the workstation's answer came from its {file}, which pods never see; the \
                     pod answered from its own /etc/hosts (hostAliases or the image's file)"
            )
        } else {
            format!(
                "the workstation's answer came from its {file}, which pods never see: make \
                     the cluster answer {arg} instead, with a CoreDNS hosts (or template) entry \
                     in ConfigMap kube-system/coredns, or a Service (ExternalName, or a Service \
                     without selector plus an EndpointSlice) and its cluster DNS name",
                arg = hosts_arg(host),
            )
        })
    }
}

fn addrs(a: &[IpAddr]) -> String {
    if a.is_empty() {
        "-".into()
    } else {
        a.iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn status_word(s: LookupStatus) -> &'static str {
    match s {
        LookupStatus::Resolved => "resolved",
        LookupStatus::NotFound => "NXDOMAIN / not found",
        LookupStatus::NoData => "no A/AAAA (NODATA)",
        LookupStatus::Timeout => "timeout",
        LookupStatus::ServFail => "SERVFAIL",
        LookupStatus::Refused => "REFUSED",
        LookupStatus::ToolMissing => "tool not in image",
        LookupStatus::Error => "error",
    }
}

/// Human rendering (plain text; the caller adds colour). One block per host.
pub fn render_text(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    render_setup(r, &mut out);
    for h in &r.hosts {
        let _ = writeln!(out);
        if let Some(l) = &h.loopback {
            let _ = writeln!(out, "{}: {l}", h.host);
        }
        let _ = writeln!(out, "{}", answer_table(h));
        render_host(h, &mut out);
    }
    if let Some(g) = &r.git {
        let _ = writeln!(
            out,
            "\ngit ls-remote: {}",
            if g.reachable {
                format!("reachable, HEAD {}", g.head.as_deref().unwrap_or("?"))
            } else {
                format!("NOT reachable: {}", g.error.as_deref().unwrap_or("?"))
            }
        );
    }
    if !r.complete {
        let _ = writeln!(
            out,
            "\nwarning: the probe log is incomplete (deadline reached?)"
        );
    }
    out
}

/// The probe, the pod's resolv.conf and the cluster's DNS, a line each.
fn render_setup(r: &Report, out: &mut String) {
    use std::fmt::Write;
    let p = &r.probe;
    let _ = writeln!(
        out,
        "probe: {} {}/{}{} (image {}){}",
        p.carrier,
        p.namespace,
        p.name,
        // No nodeName: a probe that printed nothing was never scheduled; one that ran (its
        // resolv.conf is in the log) did run somewhere we were not told: say nothing.
        match (p.node.as_deref(), r.resolv_conf.is_some()) {
            (Some(n), _) => format!(" on node {n}"),
            (None, false) => " (not scheduled)".to_string(),
            (None, true) => String::new(),
        },
        p.image,
        p.from_pod
            .as_deref()
            .map(|f| if p.fallback_reason.is_some() {
                // A probe of its own beside that pod: only the DNS settings are the pod's.
                format!(", DNS settings copied from {f}")
            } else {
                format!(", network of {f}")
            })
            .unwrap_or_default()
    );
    if let Some(reason) = &p.fallback_reason {
        let _ = writeln!(out, "note: ephemeral container not used: {reason}");
    }
    match &r.resolv_conf {
        Some(rc) => {
            let _ = writeln!(
                out,
                "resolv.conf: nameserver {} | search {} | ndots:{} timeout:{} attempts:{} ({} rules)",
                rc.effective_nameservers().join(" "),
                if rc.search.is_empty() {
                    "-".into()
                } else {
                    rc.search.join(" ")
                },
                rc.ndots,
                rc.timeout_secs,
                rc.attempts,
                match r.libc {
                    Libc::Unknown => "unknown libc: glibc",
                    l => l.label(),
                }
            );
        }
        None => {
            let _ = writeln!(out, "resolv.conf: not read from the pod");
        }
    }
    let c = &r.cluster_dns;
    let _ = writeln!(
        out,
        "CoreDNS: {}{}",
        if c.corefile_found {
            "Corefile read from kube-system/coredns".to_string()
        } else {
            c.corefile_error.clone().unwrap_or_default()
        },
        if c.node_local.detected {
            format!(
                " | NodeLocal DNSCache: {}",
                c.node_local.evidence.join("; ")
            )
        } else {
            String::new()
        }
    );
}

/// One host's answers, a row each: the pod's libc, the pod's DNS, the workstation.
fn answer_table(h: &HostReport) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    t.set_header(vec![h.host.as_str(), "answer", "detail"]);
    if let Some(l) = &h.pod.libc
        && h.ip_literal
    {
        t.add_row(vec![
            "pod libc (getent ahosts)".to_string(),
            addrs(&l.addresses),
            "IP literal: used as given, no DNS lookup".to_string(),
        ]);
    } else if let Some(l) = &h.pod.libc {
        t.add_row(vec![
            "pod libc (getent ahosts)".to_string(),
            addrs(&l.addresses),
            format!(
                "{}{}",
                // getent exits 2 for NXDOMAIN and for "no server reachable" alike (glibc
                // and musl-utils): never call that NXDOMAIN.
                if l.status == LookupStatus::NotFound {
                    "not found (getent exit 2: NXDOMAIN or no server answered)"
                } else {
                    status_word(l.status)
                },
                l.canonical_name
                    .as_deref()
                    .map(|c| format!(", canonical {c}"))
                    .unwrap_or_default()
            ),
        ]);
    }
    if let Some(d) = &h.pod.dns
        && h.ip_literal
    {
        let via = d
            .server
            .as_deref()
            .map(|s| format!(" (asked {s})"))
            .unwrap_or_default();
        t.add_row(vec![
            format!(
                "pod reverse DNS (nslookup PTR, {})",
                serde_json::to_value(d.flavour)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            if d.ptr_names.is_empty() {
                "-".to_string()
            } else {
                d.ptr_names.join(", ")
            },
            match (d.status, d.ptr_names.is_empty()) {
                (LookupStatus::ToolMissing, _) => status_word(d.status).to_string(),
                (_, false) => format!("PTR record found{via}"),
                (LookupStatus::Timeout, _) => format!("no answer{via}"),
                _ => format!("no PTR record{via}"),
            },
        ]);
    } else if let Some(d) = &h.pod.dns {
        t.add_row(vec![
            format!(
                "pod DNS (nslookup, {})",
                serde_json::to_value(d.flavour)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            addrs(&d.addresses),
            format!(
                "{}{}",
                status_word(d.status),
                d.server
                    .as_deref()
                    .map(|s| format!(" via {s}"))
                    .unwrap_or_default()
            ),
        ]);
    }
    t.add_row(vec![
        "workstation".to_string(),
        addrs(&h.workstation.addresses),
        h.workstation
            .error
            .clone()
            .unwrap_or_else(|| match &h.workstation.from_hosts_file {
                Some(f) => format!("system resolver ({f})"),
                None => "system resolver".into(),
            }),
    ]);
    t
}

/// Below a host's table: the answer, the queries, CoreDNS's path, TLS, the tools'
/// diagnostics, the notes and the verdict.
fn render_host(h: &HostReport, out: &mut String) {
    use std::fmt::Write;
    if let Some(a) = &h.answer {
        let _ = writeln!(out, "  {}", a.headline);
    }
    if h.ip_literal {
        let _ = writeln!(
            out,
            "  {} is an IP literal: reaching it needs no DNS (the PTR row is the reverse \
             lookup, for information only)",
            h.host
        );
    }
    render_queries(h, out);
    render_coredns(h, out);
    if let Some(tls) = &h.tls {
        let _ = writeln!(
            out,
            "  TLS: {} | subject {} | issuer {} | expires {}{}",
            if tls.verified {
                "verified".to_string()
            } else {
                format!(
                    "NOT verified: {}",
                    tls.verify_result
                        .clone()
                        .unwrap_or_else(|| "no handshake".into())
                )
            },
            tls.subject.as_deref().unwrap_or("-"),
            tls.issuer.as_deref().unwrap_or("-"),
            tls.not_after.as_deref().unwrap_or("-"),
            if tls.errors.is_empty() {
                String::new()
            } else {
                format!(" | {}", tls.errors.join("; "))
            }
        );
    }
    // The tools' own diagnostics that no row or note already carries (JSON has them all):
    // getent's (other than "not found in image"), and nslookup's when its status is a
    // bare "error" that nothing else explains.
    let said = |e: &str| h.notes.iter().any(|n| n.contains(e));
    if let Some(l) = &h.pod.libc
        && l.status != LookupStatus::ToolMissing
    {
        for e in l.errors.iter().filter(|e| !said(e)) {
            let _ = writeln!(out, "  getent said: {e}");
        }
    }
    if let Some(d) = &h.pod.dns
        && d.status == LookupStatus::Error
    {
        for e in d.errors.iter().filter(|e| !said(e)) {
            let _ = writeln!(out, "  nslookup said: {e}");
        }
    }
    for n in &h.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    let verdict = match h.verdict {
        Verdict::Same => "same as the workstation",
        Verdict::Differs => "DIFFERS from the workstation",
        Verdict::PodCannotResolve => "the POD CANNOT RESOLVE it",
        Verdict::Loopback => "LOOPBACK: the pod itself, whatever the workstation answers",
    };
    let expect = match (h.expect_match, &h.expect) {
        (Some(true), Some(e)) => format!("; expected {}: ok", addrs(e)),
        (Some(false), Some(e)) => format!("; expected {}: MISMATCH", addrs(e)),
        _ => String::new(),
    };
    let _ = writeln!(out, "  verdict: {verdict}{expect}");
}

/// The queries libc made.
fn render_queries(h: &HostReport, out: &mut String) {
    use std::fmt::Write;
    // Only the queries libc made: none when /etc/hosts answered (it is read before DNS),
    // and none after the one that answered (libc stops at the first answer).
    // The same facts as the JSON's `queries` (one source for both).
    let names = |asked: bool| {
        h.queries
            .iter()
            .filter(|q| q.asked == asked)
            .map(|q| q.name.as_str())
            .collect::<Vec<_>>()
    };
    let (asked, not_asked) = (names(true), names(false));
    if h.answer
        .as_ref()
        .is_some_and(|a| a.rule == AnswerRule::EtcHosts)
    {
        let _ = writeln!(
            out,
            "  queried: no DNS query (the pod's /etc/hosts answered first)"
        );
    } else if !not_asked.is_empty() && !asked.is_empty() {
        let _ = writeln!(
            out,
            "  queried in order: {} (answered; not asked: {})",
            asked.join(" -> "),
            not_asked.join(", ")
        );
    } else if !asked.is_empty() {
        let _ = writeln!(out, "  queried in order: {}", asked.join(" -> "));
    }
}

/// CoreDNS's path for each query, `=>` on the one that answered.
fn render_coredns(h: &HostReport, out: &mut String) {
    use std::fmt::Write;
    for s in &h.coredns {
        let e = &s.explanation;
        let _ = writeln!(
            out,
            "  {} {}: {}{}{}{}",
            if s.answered { "=>" } else { "  " },
            e.query,
            e.answered_by.as_deref().unwrap_or("no plugin"),
            if e.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", e.detail)
            },
            e.line
                .map(|l| format!(", Corefile line {l}"))
                .unwrap_or_default(),
            if s.bypassed_by_node_local {
                " [bypassed by NodeLocal DNSCache]"
            } else {
                ""
            },
        );
        if e.rewritten != e.query {
            let _ = writeln!(out, "       rewritten to {}", e.rewritten);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Session 6 trial: JSON `queries` says which names were asked, as the text does.
    #[test]
    fn queries_asked_follow_the_answer() {
        let order: Vec<String> = ["a.ns.svc.cluster.local.", "a.svc.cluster.local.", "a."]
            .map(String::from)
            .to_vec();
        let flags = |q: &[QueryAsked]| q.iter().map(|q| (q.asked, q.answered)).collect::<Vec<_>>();
        assert_eq!(
            flags(&queries_asked(&order, Some("a.svc.cluster.local."), false)),
            [(true, false), (true, true), (false, false)]
        );
        assert_eq!(
            flags(&queries_asked(&order, None, false)),
            [(true, false), (true, false), (true, false)]
        );
        assert_eq!(
            flags(&queries_asked(&order, None, true)),
            [(false, false), (false, false), (false, false)]
        );
    }
}
