//! Which query answered: derived from the libc result (its canonical name and the query
//! order), never from nslookup's own (different) query logic.
//!
//! Facts this rests on:
//! - musl 1.2 `src/network/lookup_name.c` `name_from_dns_search`: the search-expanded name is
//!   built in `canon[]`, which "provides the desired default canonical name (if the requested
//!   name is not a CNAME record)"; a CNAME in the answer replaces it (`dns_parse_callback`).
//!   `name_from_hosts` sets the first name of the /etc/hosts line.
//! - glibc 2.36 `nss_dns/dns-host.c` `getanswer_r`/`gaih_getanswer`: `h_name` (getaddrinfo's
//!   `ai_canonname` with `AI_CANONNAME`, which `getent ahosts` sets) is the owner name of the
//!   answer: the queried (search-expanded) name, or the CNAME target.
//! - Both try the search domains one after another, in resolv.conf order (musl sends one
//!   name's A and AAAA queries, to every nameserver, at once; not the search domains).
//!   musl continues only past NXDOMAIN: `name_from_dns` returns 0 for rcode 3, but
//!   `EAI_AGAIN` for SERVFAIL or no answer and `EAI_NONAME` for NOERROR without an address,
//!   and any non-zero result ends `name_from_dns_search`'s loop. glibc
//!   `__res_context_search` (resolv/res_query.c) continues past NXDOMAIN, NODATA and SERVFAIL.
//!   So with musl, every query before the answering one got NXDOMAIN.
//! - So a canonical name that is one of the queried FQDNs names the query that answered; one
//!   that is not is a CNAME target (or an /etc/hosts entry) and is mapped back through
//!   nslookup's `canonical name =` lines when they start at a queried FQDN.
//! - BusyBox >= 1.29 `nslookup` does its own queries: 1.29 never applied the search list,
//!   1.30+ `add_query_with_search` applies it only to names WITHOUT a dot (ndots ignored); it
//!   never reads /etc/hosts. BIND 9 nslookup honours search and ndots, not /etc/hosts.
//!   Their answer can therefore differ from what an application in the pod gets.

use crate::parse::{GetentResult, LookupStatus, NslookupFlavour, NslookupResult};
use crate::resolvconf::{Libc, ResolvConf};
use serde::Serialize;

/// The rule of the resolver's query order that made this query the one that answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerRule {
    /// The name is in the pod's /etc/hosts: libc answered before any DNS query.
    EtcHosts,
    /// The name ends with a dot: only the name itself is queried.
    Absolute,
    /// A search-expanded name answered because the name has fewer than `ndots` dots (search
    /// domains are tried first).
    SearchBeforeName,
    /// A search-expanded name answered after the name itself found nothing (glibc, name with
    /// at least `ndots` dots: the name first, then the search list).
    SearchAfterName,
    /// The name itself answered first (at least `ndots` dots).
    NameFirst,
    /// The name itself answered after every search domain found nothing (fewer than
    /// `ndots` dots).
    NameAfterSearch,
}

/// How the answering query was identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerEvidence {
    /// getent's canonical name (`ai_canonname`) is one of the queried FQDNs.
    LibcCanonicalName,
    /// getent's canonical name is a CNAME target; nslookup's `canonical name =` line leads to
    /// it from a queried FQDN.
    LibcCanonicalNameViaCname,
    /// The name is an entry of the pod's /etc/hosts and getent resolved it.
    PodEtcHosts,
    /// getent did not run (not in the image): nslookup's answer name, whose query logic may
    /// differ from libc's.
    NslookupOnly,
}

/// The query that produced the pod's answer (`hosts[].answer` in the JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The FQDN (trailing dot) that answered; `null` for an /etc/hosts answer.
    pub query: Option<String>,
    /// Its 0-based position in `queryOrder`.
    pub index: Option<usize>,
    /// The search domain it was built with, when it is a search-expanded name.
    pub search_domain: Option<String>,
    /// The rule of the query order that chose it.
    pub rule: AnswerRule,
    /// How the query was identified.
    pub evidence: AnswerEvidence,
    /// One sentence for the operator (the text report's headline).
    pub headline: String,
}

fn fqdn(s: &str) -> String {
    crate::corefile::normalize_zone(s)
}

/// True when `name` (as typed) is an entry of the /etc/hosts text `hosts`.
pub fn in_hosts_file(hosts: &str, name: &str) -> bool {
    let name = name.trim_end_matches('.');
    hosts.lines().any(|l| {
        let l = l.split('#').next().unwrap_or("");
        let mut w = l.split_whitespace();
        w.next().is_some() && w.any(|h| h.trim_end_matches('.').eq_ignore_ascii_case(name))
    })
}

/// Derive which query answered `name` (as typed). `query_order` is what libc asks
/// ([`ResolvConf::query_order`]); `resolv` the pod's resolv.conf. `None` when nothing
/// answered, or the answer cannot be tied to a query (the caller says so).
pub fn derive(
    name: &str,
    query_order: &[String],
    resolv: Option<&ResolvConf>,
    libc: Libc,
    getent: Option<&GetentResult>,
    nslookup: Option<&NslookupResult>,
    hosts_file: &str,
) -> Option<Answer> {
    let libc_resolved = getent.is_some_and(|g| g.status == LookupStatus::Resolved);
    if libc_resolved && in_hosts_file(hosts_file, name) {
        return Some(etc_hosts_answer(name));
    }
    let (query, evidence) = answered_query(query_order, getent, nslookup)?;
    let index = query_order.iter().position(|q| *q == query)?;
    let Some(resolv) = resolv else {
        return Some(answer_without_resolv_conf(name, query, index, evidence));
    };
    let bare = name.trim_end_matches('.');
    let as_is = format!("{bare}.");
    let search_domain = (query != as_is)
        .then(|| {
            query
                .strip_prefix(&format!("{bare}."))
                .map(|d| d.trim_end_matches('.').to_string())
        })
        .flatten();
    let (rule, headline) = rule_and_headline(
        name,
        &query,
        index,
        search_domain.as_deref(),
        query_order,
        resolv.ndots,
        libc,
    );
    Some(Answer {
        query: Some(query),
        index: Some(index),
        search_domain,
        rule,
        evidence,
        headline,
    })
}

/// The answer when getent resolved `name` and it is an entry of the pod's /etc/hosts.
fn etc_hosts_answer(name: &str) -> Answer {
    Answer {
        query: None,
        index: None,
        search_domain: None,
        rule: AnswerRule::EtcHosts,
        evidence: AnswerEvidence::PodEtcHosts,
        headline: format!(
            "answered by the pod's /etc/hosts (hostAliases or the image's file): libc reads \
             it before any DNS query, so no CoreDNS rule was consulted for {name}"
        ),
    }
}

/// The query of `query_order` that answered, and how it was found: getent's canonical name
/// (directly, or through nslookup's CNAME chain back to a queried name) when libc resolved,
/// nslookup's first alias or answer name when getent did not run. `None` when neither ties
/// the answer to a query.
fn answered_query(
    query_order: &[String],
    getent: Option<&GetentResult>,
    nslookup: Option<&NslookupResult>,
) -> Option<(String, AnswerEvidence)> {
    let libc_resolved = getent.is_some_and(|g| g.status == LookupStatus::Resolved);
    let getent_missing = getent.is_none_or(|g| g.status == LookupStatus::ToolMissing);
    if libc_resolved {
        let canon = getent.and_then(|g| g.canonical_name.as_deref()).map(fqdn)?;
        if query_order.contains(&canon) {
            Some((canon, AnswerEvidence::LibcCanonicalName))
        } else {
            // A CNAME target: walk nslookup's chain back to a queried name.
            let cnames = nslookup.map(|n| n.cnames.as_slice()).unwrap_or_default();
            let mut target = canon.clone();
            let mut found = None;
            for _ in 0..cnames.len() {
                let Some((alias, _)) = cnames.iter().find(|(_, t)| fqdn(t) == target) else {
                    break;
                };
                let a = fqdn(alias);
                if query_order.contains(&a) {
                    found = Some(a);
                    break;
                }
                target = a;
            }
            Some((found?, AnswerEvidence::LibcCanonicalNameViaCname))
        }
    } else if getent_missing {
        let n = nslookup?;
        let q = n
            .cnames
            .first()
            .map(|(alias, _)| fqdn(alias))
            .or_else(|| n.answers.first().map(|(name, _)| fqdn(name)))?;
        if !query_order.contains(&q) {
            return None;
        }
        Some((q, AnswerEvidence::NslookupOnly))
    } else {
        None
    }
}

/// The answer when the pod's resolv.conf was not read: there is no search list or ndots to
/// explain with.
fn answer_without_resolv_conf(
    name: &str,
    query: String,
    index: usize,
    evidence: AnswerEvidence,
) -> Answer {
    Answer {
        query: Some(query.clone()),
        index: Some(index),
        search_domain: None,
        rule: if name.ends_with('.') {
            AnswerRule::Absolute
        } else {
            AnswerRule::NameFirst
        },
        evidence,
        headline: format!(
            "answered by {query} (the pod's resolv.conf was not read: its search list and \
             ndots are unknown)"
        ),
    }
}

/// The rule of the query order that chose `query` (position `index`, built with
/// `search_domain` when search-expanded) for `name` under `ndots`, and the headline that
/// explains it.
fn rule_and_headline(
    name: &str,
    query: &str,
    index: usize,
    search_domain: Option<&str>,
    query_order: &[String],
    ndots: u32,
    libc: Libc,
) -> (AnswerRule, String) {
    let bare = name.trim_end_matches('.');
    let as_is = format!("{bare}.");
    let dots = bare.matches('.').count() as u32;
    let libc_word = match libc {
        Libc::Musl => "musl",
        Libc::Glibc => "glibc",
        Libc::Unknown => "libc",
    };
    if name.ends_with('.') {
        (
            AnswerRule::Absolute,
            format!("answered by {query} itself: a trailing dot means no search list"),
        )
    } else if let Some(d) = search_domain {
        if dots < ndots {
            (
                AnswerRule::SearchBeforeName,
                format!(
                    "answered by the search domain {d} ({query}) because {bare} has fewer than \
                     ndots:{ndots} dots ({dots}): {libc_word} tries the search domains before \
                     the name itself{}",
                    if index > 0 {
                        format!(
                            " (the {index} earlier {} {})",
                            if index == 1 { "query" } else { "queries" },
                            // musl goes on only past NXDOMAIN (see the module docs).
                            if libc == Libc::Musl {
                                "got NXDOMAIN"
                            } else {
                                "found nothing"
                            }
                        )
                    } else {
                        String::new()
                    }
                ),
            )
        } else {
            (
                AnswerRule::SearchAfterName,
                format!(
                    "answered by the search domain {d} ({query}) after {as_is} found nothing: \
                     {bare} has at least ndots:{ndots} dots ({dots}), so {libc_word} tries the \
                     name first, then the search domains"
                ),
            )
        }
    } else if dots >= ndots || query_order.len() == 1 {
        (
            AnswerRule::NameFirst,
            format!(
                "answered by {query} itself: {bare} has at least ndots:{ndots} dots ({dots}), \
                 so it is asked first"
            ),
        )
    } else {
        (
            AnswerRule::NameAfterSearch,
            format!(
                "answered by {query} itself after every search domain found nothing ({bare} has \
                 fewer than ndots:{ndots} dots: search domains first)"
            ),
        )
    }
}

/// When getent (what applications get) and nslookup (DNS wire) disagree, one note with the
/// reason; `None` when they agree or one of them did not run.
pub fn disagreement(
    name: &str,
    resolv: Option<&ResolvConf>,
    getent: &GetentResult,
    nslookup: &NslookupResult,
    hosts_file: &str,
    answer: Option<&Answer>,
) -> Option<String> {
    if getent.status == LookupStatus::ToolMissing || nslookup.status == LookupStatus::ToolMissing {
        return None;
    }
    let mut g = getent.addresses.clone();
    let mut n = nslookup.addresses();
    g.sort();
    n.sort();
    let both_fail =
        getent.status != LookupStatus::Resolved && nslookup.status != LookupStatus::Resolved;
    if g == n || both_fail {
        return None;
    }
    let show = |a: &[std::net::IpAddr], s: LookupStatus| {
        if a.is_empty() {
            format!("{s:?}").to_lowercase()
        } else {
            a.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let what = format!(
        "getent (libc, what applications get) says {} but nslookup (DNS wire) says {}",
        show(&getent.addresses, getent.status),
        show(&nslookup.addresses(), nslookup.status)
    );
    let bare = name.trim_end_matches('.');
    let has_search = resolv.is_some_and(|r| !r.search.is_empty());
    let reason = if getent.status == LookupStatus::Resolved && in_hosts_file(hosts_file, name) {
        format!(
            "{bare} is in the pod's /etc/hosts, which libc reads before DNS and nslookup never reads"
        )
    } else if nslookup.flavour == NslookupFlavour::Busybox
        && bare.contains('.')
        && !name.ends_with('.')
        && has_search
    {
        format!(
            "BusyBox >= 1.29 nslookup queries a name that contains a dot as is only (it ignores \
             ndots; 1.30+ applies the search list only to names without a dot), while libc {}",
            match answer {
                Some(a) if a.search_domain.is_some() => format!(
                    "applied the search list (answered by {})",
                    a.query.as_deref().unwrap_or("?")
                ),
                _ => "applies the search list and ndots".into(),
            }
        )
    } else if nslookup.status != LookupStatus::Resolved {
        "the DNS wire query failed where libc succeeded (a search-expanded name nslookup did not \
         ask, or /etc/hosts)"
            .into()
    } else {
        "the two tools asked different names or a different server (compare the query order \
         with nslookup's Name: lines)"
            .into()
    };
    Some(format!(
        "getent and nslookup disagree: {what}. Reason: {reason}. Applications get the getent answer"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_getent, parse_nslookup};

    fn rc() -> ResolvConf {
        ResolvConf::parse(
            "search team.svc.cluster.local svc.cluster.local cluster.local wild.example\nnameserver 10.96.0.10\noptions ndots:5\n",
        )
    }

    #[test]
    fn search_expanded_canonical_name_wins_over_nslookup() {
        let r = rc();
        let order = r.query_order("podinfo.dev.example.local", Libc::Glibc);
        let g = parse_getent(
            "192.168.2.99    STREAM podinfo.dev.example.local.wild.example\n192.168.2.99    DGRAM  \n192.168.2.99    RAW    \n",
            Some(0),
        );
        let n = parse_nslookup(
            "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10:53\n\nName:\tpodinfo.dev.example.local\nAddress: 172.18.255.200\n",
            Some(0),
            Some("/bin/busybox"),
        );
        let a = derive(
            "podinfo.dev.example.local",
            &order,
            Some(&r),
            Libc::Glibc,
            Some(&g),
            Some(&n),
            "",
        )
        .unwrap();
        assert_eq!(
            a.query.as_deref(),
            Some("podinfo.dev.example.local.wild.example.")
        );
        assert_eq!(a.index, Some(3));
        assert_eq!(a.rule, AnswerRule::SearchBeforeName);
        assert_eq!(a.search_domain.as_deref(), Some("wild.example"));
        assert!(
            a.headline.starts_with(
                "answered by the search domain wild.example (podinfo.dev.example.local.wild.example.) because podinfo.dev.example.local has fewer than ndots:5 dots (3)"
            ),
            "{}",
            a.headline
        );
        let d = disagreement("podinfo.dev.example.local", Some(&r), &g, &n, "", Some(&a)).unwrap();
        assert!(d.contains("BusyBox >= 1.29 nslookup"), "{d}");
        assert!(d.contains("172.18.255.200"), "{d}");
    }

    /// musl goes on past NXDOMAIN only: the headline says what the earlier queries got.
    #[test]
    fn musl_headline_says_the_earlier_queries_got_nxdomain() {
        let r = rc();
        let order = r.query_order("podinfo.dev.example.local", Libc::Musl);
        let g = parse_getent(
            "192.168.2.99    STREAM podinfo.dev.example.local.wild.example\n192.168.2.99    DGRAM  podinfo.dev.example.local.wild.example\n",
            Some(0),
        );
        let a = derive(
            "podinfo.dev.example.local",
            &order,
            Some(&r),
            Libc::Musl,
            Some(&g),
            None,
            "",
        )
        .unwrap();
        assert_eq!(a.index, Some(3));
        assert!(
            a.headline.ends_with(
                "musl tries the search domains before the name itself (the 3 earlier queries got NXDOMAIN)"
            ),
            "{}",
            a.headline
        );
    }

    #[test]
    fn cname_target_maps_back_through_nslookup() {
        let r = rc();
        let order = r.query_order("git.example.dev.", Libc::Glibc);
        let g = parse_getent("192.168.2.20    STREAM gitea.example.dev\n", Some(0));
        let n = parse_nslookup(
            "Server:\t\t10.96.0.10\nAddress:\t10.96.0.10#53\n\ngit.example.dev\tcanonical name = gitea.example.dev.\nName:\tgitea.example.dev\nAddress: 192.168.2.20\n",
            Some(0),
            None,
        );
        let a = derive(
            "git.example.dev.",
            &order,
            Some(&r),
            Libc::Glibc,
            Some(&g),
            Some(&n),
            "",
        )
        .unwrap();
        assert_eq!(a.query.as_deref(), Some("git.example.dev."));
        assert_eq!(a.rule, AnswerRule::Absolute);
        assert_eq!(a.evidence, AnswerEvidence::LibcCanonicalNameViaCname);
    }

    #[test]
    fn glibc_name_first_then_search() {
        let r = ResolvConf::parse("search corp.example\noptions ndots:1\n");
        let order = r.query_order("gitea.example.dev", Libc::Glibc);
        let g = parse_getent("10.0.0.1 STREAM gitea.example.dev.corp.example\n", Some(0));
        let a = derive(
            "gitea.example.dev",
            &order,
            Some(&r),
            Libc::Glibc,
            Some(&g),
            None,
            "",
        )
        .unwrap();
        assert_eq!(a.rule, AnswerRule::SearchAfterName);
        assert!(
            a.headline
                .contains("after gitea.example.dev. found nothing")
        );
        let g = parse_getent("10.0.0.1 STREAM gitea.example.dev\n", Some(0));
        let a = derive(
            "gitea.example.dev",
            &order,
            Some(&r),
            Libc::Glibc,
            Some(&g),
            None,
            "",
        )
        .unwrap();
        assert_eq!(a.rule, AnswerRule::NameFirst);
    }

    #[test]
    fn etc_hosts_answer_has_no_query() {
        let r = rc();
        let order = r.query_order("pinned.example.dev", Libc::Glibc);
        let g = parse_getent("10.0.0.5 STREAM pinned.example.dev\n", Some(0));
        let a = derive(
            "pinned.example.dev",
            &order,
            Some(&r),
            Libc::Glibc,
            Some(&g),
            None,
            "10.0.0.5 pinned.example.dev\n",
        )
        .unwrap();
        assert_eq!(a.rule, AnswerRule::EtcHosts);
        assert_eq!(a.query, None);
    }

    #[test]
    fn without_resolv_conf_no_search_rule_is_claimed() {
        let g = parse_getent("10.0.0.1 STREAM gitea.example.dev\n", Some(0));
        let a = derive(
            "gitea.example.dev",
            &["gitea.example.dev.".to_string()],
            None,
            Libc::Unknown,
            Some(&g),
            None,
            "",
        )
        .unwrap();
        assert!(!a.headline.contains("ndots:"), "{}", a.headline);
        assert!(a.headline.contains("resolv.conf was not read"));
    }

    #[test]
    fn nothing_answered_is_none() {
        let r = rc();
        let order = r.query_order("nosuch.example.dev", Libc::Glibc);
        let g = parse_getent("", Some(2));
        assert_eq!(
            derive(
                "nosuch.example.dev",
                &order,
                Some(&r),
                Libc::Glibc,
                Some(&g),
                None,
                ""
            ),
            None
        );
    }
}
