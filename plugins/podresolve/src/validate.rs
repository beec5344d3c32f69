//! Input validation: every value that reaches the probe container is checked here first.
//!
//! Hosts must be an RFC 1123 host name (RFC 1123 §2.1 relaxes RFC 952 to allow a leading
//! digit; labels 1..=63 octets of `[A-Za-z0-9-]`, not starting or ending with `-`; at most
//! 253 octets without the optional trailing dot, RFC 1035 §2.3.4) or an IPv4/IPv6 literal.
//! Values are passed to the container only as argv elements (see [`crate::probe`]), but we
//! still refuse anything else so that a hostile value (`;`, `$()`, spaces, newlines, a
//! `-flag`) can never be read as an option by `getent`/`nslookup`/`openssl`/`git` either.

use std::fmt;
use std::net::IpAddr;

/// A validated probe target.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum Host {
    /// A host name, as typed (case kept); `absolute` is true when it ended with a dot.
    Name {
        /// The name without its trailing dot.
        name: String,
        /// True when the user wrote a trailing dot (absolute name: no search list).
        absolute: bool,
    },
    /// An IP literal (no DNS lookup; getent/nslookup answer it locally or by PTR).
    Ip(IpAddr),
}

impl Host {
    /// The argv form passed to the probe (trailing dot kept for absolute names).
    pub fn arg(&self) -> String {
        match self {
            Host::Name { name, absolute } => {
                if *absolute {
                    format!("{name}.")
                } else {
                    name.clone()
                }
            }
            Host::Ip(ip) => ip.to_string(),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.arg())
    }
}

/// Why a value was refused. The message quotes the value with Rust escaping (`{:?}`) so a
/// newline or control character is shown, never echoed raw to the terminal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// Empty host argument.
    #[error("host is empty: give a DNS name like gitea.example.dev or an IP address")]
    Empty,
    /// Name longer than 253 octets.
    #[error("host {0:?} is {1} characters long; a DNS name has at most 253 (RFC 1035 §2.3.4)")]
    TooLong(String, usize),
    /// A label outside 1..=63 octets.
    #[error(
        "host {0:?}: label {1:?} is {2} characters long; each dot-separated label must be 1 to 63 (RFC 1035 §2.3.4)"
    )]
    BadLabelLength(String, String, usize),
    /// A character outside `[A-Za-z0-9.-]`.
    #[error(
        "host {0:?} contains {1:?}: only letters, digits, '-' and '.' are allowed in a host name (RFC 1123); it is never passed through a shell, but it is refused anyway"
    )]
    BadChar(String, char),
    /// Starts with `-` (would look like an option to getent/nslookup).
    #[error("host {0:?} starts with '-': a host name cannot, and it would be read as an option")]
    LeadingDash(String),
    /// A label starting or ending with `-`.
    #[error("host {0:?}: label {1:?} starts or ends with '-' (RFC 1123 §2.1)")]
    DashEdge(String, String),
    /// All-numeric last label that is not a valid IP literal (inet_aton would read `10.1` as 10.0.0.1).
    #[error(
        "host {0:?} looks like an IP address but is not a valid one (libc would read forms like '10.1' as 10.0.0.1); write a full IPv4/IPv6 address"
    )]
    NumericTld(String),
    /// Bad TLS port.
    #[error("--tls port {0:?} is not a port number 1-65535")]
    BadPort(String),
    /// Bad git URL.
    #[error("--git {0:?}: {1}")]
    BadGitUrl(String, String),
    /// Credentials in the `--git` URL. Carries the URL with its userinfo removed: the
    /// password or token is never echoed back.
    #[error(
        "--git: the URL carries credentials ({0} with its user:password part removed), which would be written into the probe Job's args and shown by `kubectl get jobs -o yaml`; podresolve takes no Git credentials: pass the URL without them (git ls-remote then still proves DNS, TLS and reachability, and says when authentication is required), or check with credentials from a Secret: kubectl cutover gitrepo/NAME --to URL --secret SECRET --dry-run --verify-in-cluster"
    )]
    GitCredentials(String),
}

/// Validate one host argument (RFC 1123 name with optional trailing dot, or IP literal).
///
/// Errors: [`InputError`] naming the value and the rule it breaks.
pub fn parse_host(input: &str) -> Result<Host, InputError> {
    if input.is_empty() {
        return Err(InputError::Empty);
    }
    // Brackets are accepted around IPv6 literals, as users copy them from URLs.
    let unbracketed = input
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(input);
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Ok(Host::Ip(ip));
    }
    if let Some(c) = input
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '.'))
    {
        return Err(InputError::BadChar(input.to_string(), c));
    }
    if input.starts_with('-') {
        return Err(InputError::LeadingDash(input.to_string()));
    }
    let (name, absolute) = match input.strip_suffix('.') {
        Some(n) => (n, true),
        None => (input, false),
    };
    if name.len() > 253 {
        return Err(InputError::TooLong(input.to_string(), name.len()));
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(InputError::BadLabelLength(
                input.to_string(),
                label.to_string(),
                label.len(),
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(InputError::DashEdge(input.to_string(), label.to_string()));
        }
    }
    let last = name.rsplit('.').next().unwrap_or(name);
    if last.chars().all(|c| c.is_ascii_digit()) {
        return Err(InputError::NumericTld(input.to_string()));
    }
    Ok(Host::Name {
        name: name.to_string(),
        absolute,
    })
}

/// Validate a `--tls` port (1..=65535).
pub fn parse_port(input: &str) -> Result<u16, InputError> {
    match input.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(InputError::BadPort(input.to_string())),
    }
}

/// Validate a `--git` URL for `git ls-remote`: `https://`, `http://`, `ssh://`, `git://` or
/// scp-like `user@host:path`, no whitespace or control characters, never starting with `-`
/// (git would read it as an option; cf. CVE-2017-1000117 `ssh://-oProxyCommand=...`), and
/// no `ext::`/`fd::` transports (remote helpers that run commands), and no credentials: any
/// userinfo in an `https://`/`http://`/`git://` URL (a lone user part is often a token) and a
/// `user:password@` in an `ssh://` URL are refused with [`InputError::GitCredentials`], because
/// the URL becomes an argv element of the probe Job, readable by anyone who can get Jobs.
/// An ssh user name alone (`ssh://git@host/...`, `git@host:path`) is not a secret and passes.
pub fn parse_git_url(input: &str) -> Result<String, InputError> {
    let bad = |why: &str| Err(InputError::BadGitUrl(input.to_string(), why.to_string()));
    if input.is_empty() {
        return bad("empty URL");
    }
    if input.starts_with('-') {
        return bad("starts with '-' and would be read as an option");
    }
    if let Some(c) = input
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '`' | '$' | ';' | '\\'))
    {
        return bad(&format!("contains {c:?}, which no Git URL needs"));
    }
    let lower = input.to_ascii_lowercase();
    let host_part = if let Some((scheme, rest)) = ["https://", "http://", "ssh://", "git://"]
        .iter()
        .find_map(|p| lower.strip_prefix(p).map(|_| (*p, &input[p.len()..])))
    {
        // RFC 3986 §3.2: the authority ends at the first '/', '?' or '#'.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if let Some((userinfo, host)) = authority.rsplit_once('@')
            && (scheme != "ssh://" || userinfo.contains(':'))
        {
            return Err(InputError::GitCredentials(format!(
                "{scheme}{host}{}",
                &rest[end..]
            )));
        }
        authority.rsplit('@').next().unwrap_or("").to_string()
    } else if lower.contains("::") {
        return bad("remote-helper URLs (ext::, fd::, ...) are refused; use https:// or ssh://");
    } else if let Some((userhost, _path)) = input.split_once(':') {
        userhost.rsplit('@').next().unwrap_or("").to_string()
    } else {
        return bad("expected https://HOST/PATH, ssh://[USER@]HOST/PATH or USER@HOST:PATH");
    };
    if host_part.is_empty() || host_part.starts_with('-') {
        return bad("the host part is empty or starts with '-'");
    }
    Ok(input.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_names_and_ips() {
        assert_eq!(
            parse_host("gitea.prod.example.dev").unwrap(),
            Host::Name {
                name: "gitea.prod.example.dev".into(),
                absolute: false
            }
        );
        let abs = parse_host("kubernetes.default.svc.cluster.local.").unwrap();
        assert_eq!(abs.arg(), "kubernetes.default.svc.cluster.local.");
        assert!(matches!(abs, Host::Name { absolute: true, .. }));
        assert_eq!(parse_host("registry").unwrap().arg(), "registry");
        assert_eq!(parse_host("3com.example").unwrap().arg(), "3com.example");
        assert_eq!(
            parse_host("192.168.2.20").unwrap(),
            Host::Ip("192.168.2.20".parse().unwrap())
        );
        assert_eq!(parse_host("[2001:db8::1]").unwrap().arg(), "2001:db8::1");
        let label63 = "a".repeat(63);
        assert!(parse_host(&format!("{label63}.example")).is_ok());
    }

    #[test]
    fn refuses_hostile_input() {
        for bad in [
            "gitea.example.dev; rm -rf /",
            "$(id)",
            "`id`",
            "a b",
            "host\nnslookup evil",
            "host\r",
            "-oProxyCommand=x",
            "--help",
            "a|b",
            "a&b",
            "a>b",
            "name'quote",
            "name\"dq",
            "x\0y",
            "under_score.example",
            "ünicode.example",
            "",
            ".",
            "a..b",
            "-lead.example",
            "trail-.example",
            "10.1",
            "1.2.3",
            "999.1.1.1",
        ] {
            let err = parse_host(bad).expect_err(bad);
            let msg = err.to_string();
            assert!(
                !msg.contains('\n'),
                "message must not echo raw newlines: {msg}"
            );
        }
        let long_label = format!("{}.example", "a".repeat(64));
        assert!(matches!(
            parse_host(&long_label),
            Err(InputError::BadLabelLength(_, _, 64))
        ));
        let long_name = vec!["abcdefghi"; 30].join(".");
        assert!(matches!(
            parse_host(&long_name),
            Err(InputError::TooLong(_, 299))
        ));
        assert!(matches!(
            parse_host("$(reboot)"),
            Err(InputError::BadChar(_, '$'))
        ));
        assert!(matches!(
            parse_host("-flag"),
            Err(InputError::LeadingDash(_))
        ));
        let msg = parse_host("a\nb").unwrap_err().to_string();
        assert!(msg.contains("\\n"), "{msg}");
    }

    #[test]
    fn ports_and_git_urls() {
        assert_eq!(parse_port("443").unwrap(), 443);
        assert!(parse_port("0").is_err());
        assert!(parse_port("65536").is_err());
        assert!(parse_port("44 3").is_err());
        for ok in [
            "https://gitea.example.dev/flux/fleet.git",
            "ssh://git@gitea.example.dev:2222/flux/fleet.git",
            "git@github.com:org/repo.git",
        ] {
            assert_eq!(parse_git_url(ok).unwrap(), ok);
        }
        for bad in [
            "-u evil",
            "--upload-pack=touch /tmp/x",
            "ssh://-oProxyCommand=touch/x",
            "ext::sh -c touch% /tmp/pwned",
            "https://host/a b",
            "https://host/$(id)",
            "plainword",
            "",
        ] {
            assert!(parse_git_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn git_urls_with_credentials_are_refused_without_echoing_them() {
        for (bad, redacted) in [
            ("http://user:PASS@host/x.git", "http://host/x.git"),
            (
                "https://PASS@gitea.example.dev/flux/fleet.git",
                "https://gitea.example.dev/flux/fleet.git",
            ),
            (
                "HTTPS://u:PASS@gitea.example.dev:3000?x=1",
                "https://gitea.example.dev:3000?x=1",
            ),
            ("git://u:PASS@host/r", "git://host/r"),
            ("ssh://git:PASS@host/r.git", "ssh://host/r.git"),
            ("https://u:P@SS@host/r", "https://host/r"),
        ] {
            let err = parse_git_url(bad).unwrap_err();
            assert_eq!(err, InputError::GitCredentials(redacted.into()), "{bad}");
            let msg = err.to_string();
            assert!(!msg.contains("PASS") && !msg.contains("SS@"), "{msg}");
            assert!(msg.contains(redacted), "{msg}");
            assert!(msg.contains("kubectl cutover"), "{msg}");
        }
        // An ssh user name alone is not a secret.
        assert!(parse_git_url("ssh://git@host/r.git").is_ok());
        assert!(parse_git_url("git@host:r.git").is_ok());
        // '@' after the authority is part of the path, not userinfo.
        assert!(parse_git_url("https://host/team/@scope/r.git").is_ok());
    }
}
