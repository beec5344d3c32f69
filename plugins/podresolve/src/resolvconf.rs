//! `/etc/resolv.conf` parsing and the exact order of FQDNs a stub resolver queries.
//!
//! Rules (glibc 2.36 `resolv/res_init.c` and `resolv/res_query.c` `__res_context_search`;
//! musl 1.2 `src/network/resolvconf.c` and `lookup_name.c` `name_from_dns_search`):
//! - `nameserver` lines: at most 3 used (MAXNS). `search`/`domain`: the last one wins;
//!   `domain X` means `search X`. Options `ndots:N` (default 1, capped at 15),
//!   `timeout:N` (default 5 s; glibc caps at 30), `attempts:N` (default 2; glibc caps at 5).
//! - glibc: a name with a trailing dot is queried as is, only. Otherwise, when it has at
//!   least `ndots` dots it is tried as is first, then with each search domain; with fewer
//!   dots each search domain first, then as is last. The search walk goes on past NXDOMAIN,
//!   NODATA and SERVFAIL and stops on the first answer or on a timeout/other error.
//! - musl: a name with a trailing dot or at least `ndots` dots is queried as is, only (no
//!   search afterwards); otherwise each search domain, then as is.

use serde::Serialize;

/// A parsed resolv.conf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvConf {
    /// Name servers in file order (the first 3 are used by glibc and musl).
    pub nameservers: Vec<String>,
    /// Search list in order (empty when none).
    pub search: Vec<String>,
    /// `options ndots:N` (default 1, capped at 15).
    pub ndots: u32,
    /// `options timeout:N` in seconds (default 5).
    pub timeout_secs: u32,
    /// `options attempts:N` (default 2).
    pub attempts: u32,
    /// Other options, verbatim (e.g. `edns0`, `single-request-reopen`, `use-vc`).
    pub other_options: Vec<String>,
}

impl Default for ResolvConf {
    fn default() -> Self {
        ResolvConf {
            nameservers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout_secs: 5,
            attempts: 2,
            other_options: Vec::new(),
        }
    }
}

/// Which C library's search rules to apply (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Libc {
    /// glibc (Debian/Ubuntu/RHEL/distroless base images).
    Glibc,
    /// musl (Alpine).
    Musl,
    /// Not known (no getent evidence and an image we do not recognise, or uClibc, whose
    /// resolver is not modelled): the glibc order is shown, which is a superset of musl's
    /// (musl asks only the first name when the name has at least `ndots` dots).
    Unknown,
}

impl Libc {
    /// The libc of a probe image known by its reference, `None` when not recognised.
    ///
    /// `alpine`, `alpine/*` (alpine/git, ...) and `nicolaka/netshoot` (built FROM alpine) are
    /// musl; Docker Official `busybox:*-musl` is musl, `busybox:*-glibc` glibc,
    /// `busybox:*-uclibc` [`Libc::Unknown`]; a plain `busybox:TAG` is not recognised (which
    /// variant the default tags alias changed between releases). A registry host and
    /// `library/` are ignored; the tag and digest are read only for busybox.
    pub fn of_image(image: &str) -> Option<Libc> {
        let no_digest = image.split('@').next().unwrap_or(image);
        let (path, tag) = match no_digest.rsplit_once(':') {
            Some((p, t)) if !t.contains('/') => (p, t),
            _ => (no_digest, ""),
        };
        let mut parts: Vec<&str> = path.split('/').collect();
        if parts.len() > 1
            && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost")
        {
            parts.remove(0);
        }
        if parts.first() == Some(&"library") {
            parts.remove(0);
        }
        let repo = parts.join("/").to_ascii_lowercase();
        let tag = tag.to_ascii_lowercase();
        match repo.as_str() {
            "alpine" => Some(Libc::Musl),
            r if r.starts_with("alpine/") => Some(Libc::Musl),
            "nicolaka/netshoot" => Some(Libc::Musl),
            "busybox" => {
                if tag == "musl" || tag.ends_with("-musl") {
                    Some(Libc::Musl)
                } else if tag == "glibc" || tag.ends_with("-glibc") {
                    Some(Libc::Glibc)
                } else if tag == "uclibc" || tag.ends_with("-uclibc") {
                    Some(Libc::Unknown)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// The label in the text report: `glibc`, `musl` or `unknown`.
    pub fn label(self) -> &'static str {
        match self {
            Libc::Glibc => "glibc",
            Libc::Musl => "musl",
            Libc::Unknown => "unknown",
        }
    }
}

/// The NodeLocal DNSCache link-local address (kubernetes/dns nodelocaldns default,
/// `__PILLAR__LOCAL__DNS__` = 169.254.20.10 in the upstream manifest).
pub const NODELOCAL_DNS_IP: &str = "169.254.20.10";

impl ResolvConf {
    /// Parse resolv.conf text. Never fails: unknown lines are ignored like libc does.
    pub fn parse(text: &str) -> ResolvConf {
        let mut rc = ResolvConf::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let mut words = line.split_whitespace();
            let Some(key) = words.next() else { continue };
            match key {
                "nameserver" => {
                    if let Some(ns) = words.next() {
                        rc.nameservers.push(ns.to_string());
                    }
                }
                "search" => {
                    rc.search = words.map(|w| w.trim_end_matches('.').to_string()).collect();
                }
                "domain" => {
                    rc.search = words
                        .next()
                        .map(|w| vec![w.trim_end_matches('.').to_string()])
                        .unwrap_or_default();
                }
                "options" => {
                    for opt in words {
                        let num = |p: &str| opt.strip_prefix(p).and_then(|v| v.parse::<u32>().ok());
                        if let Some(n) = num("ndots:") {
                            rc.ndots = n.min(15);
                        } else if let Some(n) = num("timeout:") {
                            rc.timeout_secs = n.min(30);
                        } else if let Some(n) = num("attempts:") {
                            rc.attempts = n.min(5);
                        } else {
                            rc.other_options.push(opt.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        rc
    }

    /// The name servers the resolver really uses (first 3, MAXNS).
    pub fn effective_nameservers(&self) -> &[String] {
        &self.nameservers[..self.nameservers.len().min(3)]
    }

    /// True when the first name server is the NodeLocal DNSCache address.
    pub fn uses_nodelocal(&self) -> bool {
        self.nameservers.first().map(String::as_str) == Some(NODELOCAL_DNS_IP)
    }

    /// The FQDNs (with trailing dot) queried for `name`, in order, by a libc resolver
    /// (`getent ahosts`, i.e. getaddrinfo; /etc/hosts is consulted before DNS, with the name
    /// as given). Each FQDN is asked for A and AAAA.
    pub fn query_order(&self, name: &str, libc: Libc) -> Vec<String> {
        let absolute = name.ends_with('.');
        let bare = name.trim_end_matches('.');
        let as_is = format!("{bare}.");
        if absolute {
            return vec![as_is];
        }
        let dots = bare.matches('.').count() as u32;
        let searched: Vec<String> = self
            .search
            .iter()
            .filter(|d| !d.is_empty())
            .map(|d| format!("{bare}.{d}."))
            .collect();
        let mut out = Vec::new();
        if dots >= self.ndots {
            out.push(as_is.clone());
            if libc == Libc::Musl {
                return out;
            }
            out.extend(searched);
        } else {
            out.extend(searched);
            out.push(as_is);
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|n| seen.insert(n.clone()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_of_known_images() {
        for (image, want) in [
            ("alpine:3.22", Some(Libc::Musl)),
            ("docker.io/library/alpine:3.22@sha256:abc", Some(Libc::Musl)),
            ("alpine", Some(Libc::Musl)),
            ("alpine/git:v2.49.1", Some(Libc::Musl)),
            ("nicolaka/netshoot:v0.13", Some(Libc::Musl)),
            ("docker.io/nicolaka/netshoot", Some(Libc::Musl)),
            ("busybox:1.36-musl", Some(Libc::Musl)),
            ("busybox:musl", Some(Libc::Musl)),
            ("busybox:1.36.1-glibc", Some(Libc::Glibc)),
            ("busybox:1.36-uclibc", Some(Libc::Unknown)),
            ("busybox:1.36", None),
            ("registry.example.com:5000/tools/dns:1", None),
            ("debian:12", None),
            ("myorg/alpine-tools:1", None),
        ] {
            assert_eq!(Libc::of_image(image), want, "{image}");
        }
    }

    const CLUSTER_FIRST: &str = "search team.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n";

    #[test]
    fn parses_cluster_first() {
        let rc = ResolvConf::parse(CLUSTER_FIRST);
        assert_eq!(rc.nameservers, vec!["10.96.0.10"]);
        assert_eq!(
            rc.search,
            vec![
                "team.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local"
            ]
        );
        assert_eq!(rc.ndots, 5);
        assert_eq!(rc.timeout_secs, 5);
        assert_eq!(rc.attempts, 2);
        assert!(!rc.uses_nodelocal());
    }

    #[test]
    fn parses_options_domain_and_limits() {
        let rc = ResolvConf::parse(
            "# comment\n; other\nnameserver 169.254.20.10\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\nsearch a.example b.example\ndomain corp.example.\noptions ndots:20 timeout:2 attempts:9 edns0 single-request-reopen\n",
        );
        assert_eq!(rc.effective_nameservers().len(), 3);
        assert!(rc.uses_nodelocal());
        assert_eq!(rc.search, vec!["corp.example"]);
        assert_eq!((rc.ndots, rc.timeout_secs, rc.attempts), (15, 2, 5));
        assert_eq!(rc.other_options, vec!["edns0", "single-request-reopen"]);
        let empty = ResolvConf::parse("");
        assert_eq!(empty.ndots, 1);
    }

    #[test]
    fn ndots5_external_name_goes_through_search_first() {
        let rc = ResolvConf::parse(CLUSTER_FIRST);
        assert_eq!(
            rc.query_order("gitea.prod.example.dev", Libc::Glibc),
            vec![
                "gitea.prod.example.dev.team.svc.cluster.local.",
                "gitea.prod.example.dev.svc.cluster.local.",
                "gitea.prod.example.dev.cluster.local.",
                "gitea.prod.example.dev.",
            ]
        );
        assert_eq!(
            rc.query_order("registry", Libc::Musl),
            vec![
                "registry.team.svc.cluster.local.",
                "registry.svc.cluster.local.",
                "registry.cluster.local.",
                "registry.",
            ]
        );
    }

    #[test]
    fn trailing_dot_is_absolute() {
        let rc = ResolvConf::parse(CLUSTER_FIRST);
        assert_eq!(
            rc.query_order("gitea.prod.example.dev.", Libc::Glibc),
            vec!["gitea.prod.example.dev."]
        );
    }

    #[test]
    fn enough_dots_tries_as_is_first_glibc_then_search_musl_not() {
        let rc = ResolvConf::parse(CLUSTER_FIRST);
        let name = "a.b.c.d.e.example";
        let glibc = rc.query_order(name, Libc::Glibc);
        assert_eq!(glibc[0], "a.b.c.d.e.example.");
        assert_eq!(glibc.len(), 4);
        assert_eq!(glibc[1], "a.b.c.d.e.example.team.svc.cluster.local.");
        assert_eq!(rc.query_order(name, Libc::Musl), vec!["a.b.c.d.e.example."]);
        let rc1 = ResolvConf::parse("search corp.example\noptions ndots:1\n");
        assert_eq!(
            rc1.query_order("gitea.example.dev", Libc::Glibc),
            vec!["gitea.example.dev.", "gitea.example.dev.corp.example."]
        );
        assert_eq!(
            rc1.query_order("gitea", Libc::Glibc),
            vec!["gitea.corp.example.", "gitea."]
        );
    }
}
