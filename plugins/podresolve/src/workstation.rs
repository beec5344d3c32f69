//! The workstation's own answer (the system resolver, i.e. libc getaddrinfo via std's
//! `ToSocketAddrs`: /etc/hosts, nsswitch, search list, exactly what `curl` would use) and
//! the verdict comparing it to the pod's answer.

use serde::Serialize;
use std::net::{IpAddr, ToSocketAddrs};

/// Workstation lookup result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkstationAnswer {
    /// Distinct addresses in resolver order (empty on failure).
    pub addresses: Vec<IpAddr>,
    /// The resolver error text on failure.
    pub error: Option<String>,
    /// The hosts file this answer came from (`/etc/hosts`), when the name is an entry there
    /// with exactly these addresses: the workstation's resolver (glibc nsswitch `hosts:
    /// files dns`, musl, macOS) reads it before DNS. Pods never see this file.
    pub from_hosts_file: Option<String>,
}

/// The workstation's hosts file.
pub const HOSTS_FILE: &str = "/etc/hosts";

/// The addresses `/etc/hosts`-format `text` gives `name` (case-insensitive, trailing dot
/// ignored), in file order, deduplicated.
pub fn hosts_file_addresses(text: &str, name: &str) -> Vec<IpAddr> {
    let name = name.trim_end_matches('.');
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut w = line.split_whitespace();
        let Some(ip) = w
            .next()
            .and_then(|a| a.split('%').next()?.parse::<IpAddr>().ok())
        else {
            continue;
        };
        if w.any(|h| h.trim_end_matches('.').eq_ignore_ascii_case(name)) && !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

/// Resolve `host` (as typed, trailing dot kept) with the system resolver and tell whether the
/// answer came from [`HOSTS_FILE`]. Blocking: call from `spawn_blocking` in async code.
pub fn resolve(host: &str) -> WorkstationAnswer {
    let mut a = resolve_only(host);
    let text = std::fs::read_to_string(HOSTS_FILE).unwrap_or_default();
    a.from_hosts_file = came_from_hosts_file(&a.addresses, &text, host).then(|| HOSTS_FILE.into());
    a
}

/// True when the name's entries in the hosts-file `text` are exactly `addresses` (as sets):
/// the resolver answered from the file (a DNS answer that happens to match is
/// indistinguishable, and the file is read first anyway).
pub fn came_from_hosts_file(addresses: &[IpAddr], text: &str, host: &str) -> bool {
    let mut file = hosts_file_addresses(text, host);
    if file.is_empty() || addresses.is_empty() {
        return false;
    }
    let mut got = addresses.to_vec();
    file.sort();
    got.sort();
    got.dedup();
    // getaddrinfo with AI_ADDRCONFIG may drop the file's IPv6 lines on an IPv4-only host.
    got.iter().all(|a| file.contains(a))
}

fn resolve_only(host: &str) -> WorkstationAnswer {
    match (host, 0u16).to_socket_addrs() {
        Ok(it) => {
            let mut addresses = Vec::new();
            for sa in it {
                if !addresses.contains(&sa.ip()) {
                    addresses.push(sa.ip());
                }
            }
            WorkstationAnswer {
                error: addresses
                    .is_empty()
                    .then(|| "resolver returned no address".into()),
                addresses,
                from_hosts_file: None,
            }
        }
        Err(e) => WorkstationAnswer {
            addresses: Vec::new(),
            error: Some(e.to_string()),
            from_hosts_file: None,
        },
    }
}

/// Pod vs workstation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Same address set.
    Same,
    /// Both resolve, to different sets (or only the pod resolves).
    Differs,
    /// The pod gets only loopback addresses (`localhost`, a loopback literal, or a name the
    /// pod resolves to 127.0.0.0/8, ::1, 0.0.0.0, :: or ::ffff:127.x: `cluster_loop::probe::is_own_machine`): the pod itself, never comparable with the
    /// workstation, whose loopback is the workstation (fluxcd/flux2#2754).
    Loopback,
    /// The pod gets no address.
    PodCannotResolve,
}

/// Compare address sets (order ignored).
pub fn verdict(pod: &[IpAddr], workstation: &[IpAddr]) -> Verdict {
    if pod.is_empty() {
        return Verdict::PodCannotResolve;
    }
    if pod
        .iter()
        .all(|ip| cluster_loop::probe::is_own_machine(*ip))
    {
        return Verdict::Loopback;
    }
    let mut a: Vec<IpAddr> = pod.to_vec();
    let mut b: Vec<IpAddr> = workstation.to_vec();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    if a == b {
        Verdict::Same
    } else {
        Verdict::Differs
    }
}

/// Parse `--expect IP[,IP]`.
///
/// Errors: the first entry that is not an IP literal, quoted.
pub fn parse_expect(s: &str) -> Result<Vec<IpAddr>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let ip = part
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .map_err(|_| format!("--expect: {part:?} is not an IP address (use IP[,IP])"))?;
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    if out.is_empty() {
        return Err("--expect needs at least one IP address".into());
    }
    Ok(out)
}

/// `--expect` rule: the pod's addresses of the families that appear in `expected` must be
/// exactly `expected` (so `--expect 192.168.2.20` passes when the pod also gets an AAAA,
/// and fails when it gets 192.168.2.20 plus another IPv4).
pub fn expect_matches(pod: &[IpAddr], expected: &[IpAddr]) -> bool {
    let want_v4 = expected.iter().any(IpAddr::is_ipv4);
    let want_v6 = expected.iter().any(IpAddr::is_ipv6);
    let mut got: Vec<IpAddr> = pod
        .iter()
        .copied()
        .filter(|a| (a.is_ipv4() && want_v4) || (a.is_ipv6() && want_v6))
        .collect();
    let mut want = expected.to_vec();
    got.sort();
    got.dedup();
    want.sort();
    want.dedup();
    got == want
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(s: &[&str]) -> Vec<IpAddr> {
        s.iter().map(|x| x.parse().unwrap()).collect()
    }

    /// Issue 19 item 3: an answer equal to the name's /etc/hosts entries came from the file.
    #[test]
    fn answer_from_the_hosts_file_is_recognised() {
        let hosts =
            "127.0.0.1 localhost\n10.0.0.42 gitea.lab.example gitea # lab\n::1 ip6-localhost\n";
        assert_eq!(
            hosts_file_addresses(hosts, "GITEA.lab.example."),
            ips(&["10.0.0.42"])
        );
        assert!(came_from_hosts_file(
            &ips(&["10.0.0.42"]),
            hosts,
            "gitea.lab.example"
        ));
        assert!(came_from_hosts_file(&ips(&["10.0.0.42"]), hosts, "gitea"));
        assert!(!came_from_hosts_file(
            &ips(&["10.0.0.43"]),
            hosts,
            "gitea.lab.example"
        ));
        assert!(!came_from_hosts_file(
            &ips(&["10.0.0.42"]),
            hosts,
            "other.example"
        ));
        assert!(!came_from_hosts_file(&[], hosts, "gitea.lab.example"));
        // A commented-out entry is not an entry.
        assert!(!came_from_hosts_file(
            &ips(&["10.0.0.7"]),
            "# 10.0.0.7 old.example\n",
            "old.example"
        ));
    }

    #[test]
    fn verdicts() {
        assert_eq!(
            verdict(
                &ips(&["10.0.0.1", "10.0.0.2"]),
                &ips(&["10.0.0.2", "10.0.0.1"])
            ),
            Verdict::Same
        );
        assert_eq!(
            verdict(&ips(&["192.168.2.20"]), &ips(&["203.0.113.7"])),
            Verdict::Differs
        );
        assert_eq!(verdict(&ips(&["192.168.2.20"]), &[]), Verdict::Differs);
        assert_eq!(
            verdict(&[], &ips(&["203.0.113.7"])),
            Verdict::PodCannotResolve
        );
        // The same loopback address on both sides is still two different machines.
        assert_eq!(
            verdict(&ips(&["127.0.0.1"]), &ips(&["127.0.0.1"])),
            Verdict::Loopback
        );
        assert_eq!(
            verdict(&ips(&["::1", "127.0.0.1"]), &ips(&["127.0.0.1"])),
            Verdict::Loopback
        );
        assert_eq!(
            verdict(&ips(&["127.0.0.1", "10.0.0.1"]), &ips(&["10.0.0.1"])),
            Verdict::Differs
        );
    }

    #[test]
    fn expect_rules() {
        assert_eq!(
            parse_expect("192.168.2.20, 2001:db8::1").unwrap(),
            ips(&["192.168.2.20", "2001:db8::1"])
        );
        assert!(parse_expect("gitea").is_err());
        assert!(parse_expect(",").is_err());
        let pod = ips(&["192.168.2.20", "2001:db8::20"]);
        assert!(expect_matches(&pod, &ips(&["192.168.2.20"])));
        assert!(!expect_matches(&pod, &ips(&["192.168.2.21"])));
        assert!(!expect_matches(
            &ips(&["192.168.2.20", "192.168.2.21"]),
            &ips(&["192.168.2.20"])
        ));
        assert!(!expect_matches(&[], &ips(&["192.168.2.20"])));
    }

    #[test]
    fn resolves_literals_and_localhost_with_the_system_resolver() {
        assert_eq!(resolve("127.0.0.1").addresses, ips(&["127.0.0.1"]));
        let lh = resolve("localhost");
        assert!(lh.addresses.iter().all(|a| a.is_loopback()), "{lh:?}");
    }
}
