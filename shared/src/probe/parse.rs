//! Parsers for the probe log (`src/probe.sh`, protocol v1) and every tool format it may
//! contain.
//!
//! Formats (fixtures in `tests/fixtures/`, captured unless noted):
//! - `getent ahosts`: glibc prints `ADDR STREAM|DGRAM|RAW [CANON]` (`%-15s %-6s %s`, the
//!   canonical name on the first line only, three socket types per address); Alpine's
//!   musl-utils getent (NetBSD-derived getent.c `ahosts_ex`) prints the same columns with
//!   STREAM and DGRAM only and the canonical name on every line. Both exit 2 when not found
//!   (glibc cannot tell a timeout from NXDOMAIN there).
//! - BusyBox <= 1.28 nslookup (getaddrinfo-based, reads /etc/hosts): `Server:    IP`,
//!   `Address 1: IP name`, `Name:      HOST`, `Address N: IP [name]`, or
//!   `nslookup: can't resolve 'HOST'` (transcribed from upstream issues).
//! - BusyBox >= 1.29 nslookup (own queries, never /etc/hosts): `Server:\t\tIP`,
//!   `Address:\tIP:53`, `Name:\tN` / `Address: IP`, `** server can't find N: NXDOMAIN`,
//!   `*** Can't find N: No answer`, `;; connection timed out; no servers could be reached`.
//! - BIND 9 nslookup: `Address:\tIP#53`, `Non-authoritative answer:`, `Name:\tN` /
//!   `Address: IP`, `N\tcanonical name = T.`, `ARPA\tname = N.`, the same `**`/`***`
//!   error lines, `;; communications error to IP#53: timed out`, `;; no servers could be
//!   reached`.

use serde::Serialize;
use std::net::IpAddr;

/// Marker that starts every protocol line of the probe.
pub const MARK: &str = "#podresolve";

/// One `#podresolve section KIND [ARG]` ... `#podresolve end rc=N` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Section {
    /// `resolv.conf`, `hosts`, `getent`, `nslookup`, `tls` or `git`.
    pub kind: String,
    /// The host (or URL) the section is about; empty for file sections.
    pub arg: String,
    /// The tool's combined stdout+stderr.
    pub body: String,
    /// Exit status; None when the log ended inside the section (killed by the deadline).
    pub rc: Option<i32>,
}

/// A `#podresolve tool NAME PATH REALPATH` line (`-` when absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// getent, nslookup, openssl or git.
    pub name: String,
    /// `command -v` result, None when not in the image.
    pub path: Option<String>,
    /// `readlink -f` of it (e.g. `/bin/busybox`).
    pub real_path: Option<String>,
}

/// The whole probe log, split.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeLog {
    /// Protocol version from `#podresolve begin vN`; None when no begin line was seen.
    pub version: Option<String>,
    /// Tools found in the image.
    pub tools: Vec<ToolInfo>,
    /// Sections in log order.
    pub sections: Vec<Section>,
    /// True when the final `#podresolve done` line was seen.
    pub complete: bool,
    /// `#podresolve git-auth SCHEME`: the Authorization the git step sent (`none`, `basic`,
    /// `bearer`, `basic-unavailable-no-base64`). Not serialized.
    #[serde(skip)]
    pub git_auth: Option<String>,
    /// `#podresolve git-ca SOURCE`: which CA bundle git verified with (`image+secret`: the
    /// image's system bundle plus the Secret's `ca.crt`, as go-git adds it to the system pool;
    /// `secret`: the Secret's `ca.crt` alone, the image has no system bundle; `image`: the
    /// image's bundle, no `ca.crt`; `unwritable`: no writable /tmp). Not serialized.
    #[serde(skip)]
    pub git_ca: Option<String>,
    /// `#podresolve libc NAME`: the C library the image's `getent` (else its `/bin/sh`) is
    /// linked against, read from the binary itself (`musl`: it names the `ld-musl-*` loader;
    /// `glibc`: it needs `GLIBC_2.*` symbol versions; `unknown`: static or neither). Depends on
    /// the image only, never on an answer. Not serialized.
    #[serde(skip)]
    pub libc: Option<String>,
}

impl ProbeLog {
    /// Split a probe log. Lines outside sections that are not protocol lines are ignored.
    pub fn parse(log: &str) -> ProbeLog {
        let mut out = ProbeLog::default();
        let mut current: Option<Section> = None;
        for line in log.lines() {
            let proto = line.strip_prefix(MARK).and_then(|r| r.strip_prefix(' '));
            match proto {
                Some(rest) if rest.starts_with("end rc=") => {
                    if let Some(mut s) = current.take() {
                        s.rc = rest["end rc=".len()..].trim().parse().ok();
                        out.sections.push(s);
                    }
                }
                Some(rest) if rest.starts_with("section ") => {
                    if let Some(s) = current.take() {
                        out.sections.push(s);
                    }
                    let mut parts = rest["section ".len()..].splitn(2, ' ');
                    current = Some(Section {
                        kind: parts.next().unwrap_or("").to_string(),
                        arg: parts.next().unwrap_or("").to_string(),
                        body: String::new(),
                        rc: None,
                    });
                }
                Some(rest) if rest.starts_with("begin ") => {
                    out.version = Some(rest["begin ".len()..].trim().to_string());
                }
                Some(rest) if rest.starts_with("tool ") => {
                    let w: Vec<&str> = rest["tool ".len()..].split(' ').collect();
                    let opt = |i: usize| {
                        w.get(i)
                            .filter(|v| **v != "-" && !v.is_empty())
                            .map(|v| v.to_string())
                    };
                    out.tools.push(ToolInfo {
                        name: w.first().unwrap_or(&"").to_string(),
                        path: opt(1),
                        real_path: opt(2),
                    });
                }
                Some(rest) if rest.starts_with("git-auth ") => {
                    out.git_auth = Some(rest["git-auth ".len()..].trim().to_string());
                }
                Some(rest) if rest.starts_with("git-ca ") => {
                    out.git_ca = Some(rest["git-ca ".len()..].trim().to_string());
                }
                Some(rest) if current.is_none() && rest.starts_with("libc ") => {
                    out.libc = Some(rest["libc ".len()..].trim().to_string());
                }
                Some("done") => out.complete = true,
                _ => {
                    if let Some(s) = current.as_mut() {
                        s.body.push_str(line);
                        s.body.push('\n');
                    }
                }
            }
        }
        if let Some(s) = current.take() {
            out.sections.push(s);
        }
        out
    }

    /// The first section of `kind` about `arg` ("" for file sections).
    pub fn section(&self, kind: &str, arg: &str) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.kind == kind && s.arg == arg)
    }

    /// Tool info by name.
    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// How a lookup ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LookupStatus {
    /// At least one address.
    Resolved,
    /// NXDOMAIN (or getent exit 2 / old busybox "can't resolve" with no better detail).
    NotFound,
    /// The name exists but has no A/AAAA record (NODATA, "No answer").
    NoData,
    /// No server answered in time.
    Timeout,
    /// SERVFAIL.
    ServFail,
    /// REFUSED.
    Refused,
    /// The tool is not in the image (exit 127).
    ToolMissing,
    /// Anything else (the raw text is kept).
    Error,
}

/// Which `getent` printed the lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GetentFlavour {
    /// glibc (RAW lines present).
    Glibc,
    /// musl-utils (Alpine): STREAM/DGRAM only, canonical name on every line.
    Musl,
    /// No lines to tell.
    Unknown,
}

/// Result of `getent ahosts HOST`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetentResult {
    /// Resolved, NotFound (exit 2), ToolMissing (127) or Error.
    pub status: LookupStatus,
    /// Distinct addresses in getaddrinfo order (the order a client tries them).
    pub addresses: Vec<IpAddr>,
    /// `ai_canonname` (the CNAME target or the search-expanded FQDN that answered).
    pub canonical_name: Option<String>,
    /// glibc or musl, from the line shapes.
    pub flavour: GetentFlavour,
    /// Every other non-empty line of the section (getent's own diagnostics, the shell's or
    /// the step timeout's: the probe runs `getent ahosts HOST 2>&1`), in order,
    /// deduplicated: never dropped.
    pub errors: Vec<String>,
    /// Exit status.
    pub rc: Option<i32>,
}

/// Parse a `getent ahosts` section body and exit status.
pub fn parse_getent(body: &str, rc: Option<i32>) -> GetentResult {
    let mut addresses: Vec<IpAddr> = Vec::new();
    let mut canonical_name = None;
    let mut saw_raw = false;
    let mut lines = 0;
    let mut canon_every_line = true;
    let mut errors: Vec<String> = Vec::new();
    for line in body.lines() {
        let mut w = line.split_whitespace();
        let address_line = match (w.next(), w.next()) {
            (Some(addr), Some(sock))
                if matches!(sock, "STREAM" | "DGRAM" | "RAW" | "SEQPACKET" | "RDM") =>
            {
                addr.parse::<IpAddr>().ok().map(|ip| (ip, sock))
            }
            _ => None,
        };
        let Some((ip, sock)) = address_line else {
            let text = line.trim();
            if !text.is_empty() && !errors.iter().any(|e| e == text) {
                errors.push(text.to_string());
            }
            continue;
        };
        lines += 1;
        saw_raw |= sock == "RAW";
        let canon = w.next();
        if canon.is_none() {
            canon_every_line = false;
        }
        if canonical_name.is_none() {
            canonical_name = canon.map(str::to_string);
        }
        if !addresses.contains(&ip) {
            addresses.push(ip);
        }
    }
    let flavour = if lines == 0 {
        GetentFlavour::Unknown
    } else if saw_raw {
        GetentFlavour::Glibc
    } else if canon_every_line {
        GetentFlavour::Musl
    } else {
        GetentFlavour::Unknown
    };
    let status = match rc {
        // The probe prints `getent: not found in image` (rc 127) when the image has none; a
        // 127 from getent itself is an exec failure (e.g. `error while loading shared
        // libraries`), kept in `errors`, not a missing tool.
        Some(127) if body.contains(": not found in image") => LookupStatus::ToolMissing,
        // killed by the probe's step timeout (coreutils 124, BusyBox SIGTERM 143)
        Some(124) | Some(143) if addresses.is_empty() => LookupStatus::Timeout,
        _ if !addresses.is_empty() => LookupStatus::Resolved,
        Some(2) => LookupStatus::NotFound,
        _ => LookupStatus::Error,
    };
    GetentResult {
        status,
        addresses,
        canonical_name,
        flavour,
        errors,
        rc,
    }
}

/// Which nslookup printed the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NslookupFlavour {
    /// BusyBox <= 1.28 (getaddrinfo; reads /etc/hosts and the search list).
    BusyboxLegacy,
    /// BusyBox >= 1.29 (own DNS queries; never /etc/hosts; search only for dot-less names
    /// since 1.30, ndots ignored).
    Busybox,
    /// ISC BIND 9 (honours search and ndots, not /etc/hosts).
    Bind,
    /// Could not tell.
    Unknown,
}

/// One error line of nslookup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NslookupError {
    /// The name the error is about (may be a search-expanded FQDN); empty when not given.
    pub name: String,
    /// The classified error.
    pub status: LookupStatus,
    /// The line as printed.
    pub text: String,
}

/// Result of `nslookup HOST`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NslookupResult {
    /// Which nslookup.
    pub flavour: NslookupFlavour,
    /// Overall status (Resolved when any address was printed).
    pub status: LookupStatus,
    /// The server it asked (`IP`, port stripped), when printed.
    pub server: Option<String>,
    /// `(name, address)` pairs in printed order, deduplicated.
    pub answers: Vec<(String, IpAddr)>,
    /// `(alias, target)` CNAME lines.
    pub cnames: Vec<(String, String)>,
    /// PTR names for a reverse lookup of an IP literal.
    pub ptr_names: Vec<String>,
    /// Error lines, deduplicated.
    pub errors: Vec<NslookupError>,
    /// Exit status.
    pub rc: Option<i32>,
}

impl NslookupResult {
    /// Distinct answer addresses in order.
    pub fn addresses(&self) -> Vec<IpAddr> {
        let mut out = Vec::new();
        for (_, a) in &self.answers {
            if !out.contains(a) {
                out.push(*a);
            }
        }
        out
    }
}

fn classify_error(line: &str) -> Option<(String, LookupStatus)> {
    let l = line.trim();
    if let Some(rest) = l.strip_prefix("** server can't find ") {
        let (name, what) = rest.rsplit_once(": ").unwrap_or((rest, ""));
        let status = match what.trim() {
            "NXDOMAIN" => LookupStatus::NotFound,
            "SERVFAIL" => LookupStatus::ServFail,
            "REFUSED" => LookupStatus::Refused,
            "NODATA" | "No answer" => LookupStatus::NoData,
            _ => LookupStatus::Error,
        };
        return Some((name.trim_end_matches('.').to_string(), status));
    }
    if let Some(rest) = l.strip_prefix("*** Can't find ") {
        let (name, what) = rest.rsplit_once(": ").unwrap_or((rest, ""));
        let status = if what.contains("No answer") {
            LookupStatus::NoData
        } else {
            LookupStatus::Error
        };
        return Some((name.trim_end_matches('.').to_string(), status));
    }
    if let Some(rest) = l.strip_prefix("nslookup: can't resolve '") {
        let name = rest.split('\'').next().unwrap_or("");
        return Some((name.to_string(), LookupStatus::NotFound));
    }
    if l.contains("timed out") || l.contains("no servers could be reached") {
        return Some((String::new(), LookupStatus::Timeout));
    }
    if l.starts_with(";; ") && (l.contains("refused") || l.contains("unreachable")) {
        return Some((String::new(), LookupStatus::Error));
    }
    // Every other diagnostic the tool printed is kept, never dropped: BusyBox's libbb
    // xconnect() dies with `nslookup: can't connect to remote host (IP): <strerror>` (captured:
    // `Network is unreachable` for a NodeLocal address with nothing listening and no route),
    // and any other `nslookup: ...` / `;; ...` line.
    if l.starts_with("nslookup: ") || l.starts_with(";; ") {
        return Some((String::new(), LookupStatus::Error));
    }
    None
}

/// Strip `#53` (BIND) or `:53` (BusyBox, IPv4 or `[v6]:53`) from a server address.
fn strip_port(addr: &str) -> String {
    if let Some((a, _)) = addr.split_once('#') {
        return a.to_string();
    }
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    if addr.matches(':').count() == 1 {
        return addr.split(':').next().unwrap_or(addr).to_string();
    }
    addr.to_string()
}

/// Parse an nslookup section. `tool_real_path` (from the probe's tool line) breaks ties
/// when the text alone does not tell the flavour (e.g. a timeout).
pub fn parse_nslookup(body: &str, rc: Option<i32>, tool_real_path: Option<&str>) -> NslookupResult {
    let mut scan = NslookupScan {
        flavour: NslookupFlavour::Unknown,
        server: None,
        answers: Vec::new(),
        cnames: Vec::new(),
        ptr_names: Vec::new(),
        errors: Vec::new(),
        in_header: false,
        in_authority: false,
        current_name: String::new(),
    };
    for raw in body.lines() {
        scan.line(raw.trim_end());
    }
    let NslookupScan {
        mut flavour,
        server,
        answers,
        cnames,
        ptr_names,
        errors,
        ..
    } = scan;
    if flavour == NslookupFlavour::Unknown {
        flavour = match tool_real_path {
            Some(p) if p.ends_with("/busybox") || p.contains("busybox") => NslookupFlavour::Busybox,
            Some(p) if p.ends_with("/nslookup") => NslookupFlavour::Bind,
            _ => NslookupFlavour::Unknown,
        };
    }
    let status = nslookup_status(body, rc, &answers, &ptr_names, &errors);
    NslookupResult {
        flavour,
        status,
        server: server.map(|s| strip_port(&s)),
        answers,
        cnames,
        ptr_names,
        errors,
        rc,
    }
}

/// What [`parse_nslookup`] has read so far, one line at a time.
struct NslookupScan {
    flavour: NslookupFlavour,
    server: Option<String>,
    answers: Vec<(String, IpAddr)>,
    cnames: Vec<(String, String)>,
    ptr_names: Vec<String>,
    errors: Vec<NslookupError>,
    /// Inside the `Server:` header block (its `Address` is the server's, not an answer).
    in_header: bool,
    /// Inside BIND's "Authoritative answers can be found from:" section (the zone's SOA or NS
    /// lines), which runs to the next blank line: information, not an error.
    in_authority: bool,
    /// The name of the last `Name:` line: the owner of the addresses that follow.
    current_name: String,
}

/// Adds `x` to `v` unless it is there already (nslookup repeats lines per query type).
fn push_unique<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}

impl NslookupScan {
    /// One line (trailing space trimmed).
    fn line(&mut self, line: &str) {
        if line.trim().is_empty() {
            self.in_header = false;
            self.in_authority = false;
            return;
        }
        if self.in_authority {
            return;
        }
        if line.trim() == "Authoritative answers can be found from:" {
            self.in_authority = true;
            return;
        }
        if line.trim() == "Non-authoritative answer:" {
            return;
        }
        if let Some(v) = line.strip_prefix("Server:") {
            self.in_header = true;
            self.server = Some(v.trim().to_string());
            return;
        }
        if let Some(v) = line.strip_prefix("Name:") {
            self.in_header = false;
            self.current_name = v.trim().trim_end_matches('.').to_string();
            return;
        }
        if let Some(rest) = line.strip_prefix("Address") {
            self.address(rest);
            return;
        }
        if let Some((alias, target)) = line.split_once("canonical name = ") {
            let pair = (
                alias.trim().trim_end_matches('.').to_string(),
                target.trim().trim_end_matches('.').to_string(),
            );
            push_unique(&mut self.cnames, pair);
            return;
        }
        if let Some((_, name)) = line
            .split_once("name = ")
            .filter(|_| line.contains(".arpa"))
        {
            let n = name.trim().trim_end_matches('.').to_string();
            push_unique(&mut self.ptr_names, n);
            return;
        }
        self.error(line);
    }

    /// `Address: X`, `Address:\tX#53`, `Address 1: X name`, `Addresses:` (`rest` follows
    /// `Address`): the server in the header block, else an answer of the current name. Tells
    /// the flavour: numbered is BusyBox's legacy applet, `#port` BIND, plain BusyBox.
    fn address(&mut self, rest: &str) {
        let (numbered, v) = match rest.split_once(':') {
            Some((n, v)) => (!n.trim().is_empty(), v.trim()),
            None => return,
        };
        if numbered {
            self.flavour = NslookupFlavour::BusyboxLegacy;
        }
        let addr_word = v.split_whitespace().next().unwrap_or("");
        if self.in_header {
            if addr_word.contains('#') {
                self.flavour = NslookupFlavour::Bind;
            } else if !numbered {
                self.flavour = NslookupFlavour::Busybox;
            }
            self.server = Some(strip_port(addr_word));
            return;
        }
        if let Ok(ip) = addr_word.parse::<IpAddr>() {
            push_unique(&mut self.answers, (self.current_name.clone(), ip));
        }
    }

    /// A line of no other shape: an error nslookup printed ([`classify_error`]), or a line of
    /// no known shape (e.g. the dynamic loader's `error while loading shared libraries`): kept
    /// as an error, never dropped.
    fn error(&mut self, line: &str) {
        let e = match classify_error(line) {
            Some((name, status)) => {
                if line.starts_with(";; communications error") {
                    self.flavour = NslookupFlavour::Bind;
                }
                NslookupError {
                    name,
                    status,
                    text: line.trim().to_string(),
                }
            }
            None => NslookupError {
                name: String::new(),
                status: LookupStatus::Error,
                text: line.trim().to_string(),
            },
        };
        push_unique(&mut self.errors, e);
    }
}

/// The lookup's status from nslookup's exit code `rc`, its answers and its errors: the tool
/// missing (127), a timeout (124/143 without answers), resolved, no data (BusyBox >= 1.29
/// exits 0 with no A/AAAA record), else the most telling error.
fn nslookup_status(
    body: &str,
    rc: Option<i32>,
    answers: &[(String, IpAddr)],
    ptr_names: &[String],
    errors: &[NslookupError],
) -> LookupStatus {
    if rc == Some(127) && body.contains(": not found in image") {
        LookupStatus::ToolMissing
    } else if matches!(rc, Some(124) | Some(143)) && answers.is_empty() {
        LookupStatus::Timeout
    } else if !answers.is_empty() || !ptr_names.is_empty() {
        LookupStatus::Resolved
    } else if errors.is_empty() && rc == Some(0) {
        // BusyBox >= 1.29 prints only "Non-authoritative answer:" and exits 0 when the name
        // exists without A/AAAA records (captured: probe-glibc-busybox.log txtonly).
        LookupStatus::NoData
    } else {
        // The most telling error wins: timeout > servfail > refused > nodata > nxdomain.
        let rank = |s: LookupStatus| match s {
            LookupStatus::Timeout => 6,
            LookupStatus::ServFail => 5,
            LookupStatus::Refused => 4,
            LookupStatus::NoData => 3,
            LookupStatus::NotFound => 2,
            _ => 1,
        };
        // "No answer" after an NXDOMAIN for the same name is BusyBox's second (AAAA) line,
        // not a NODATA: prefer NXDOMAIN then.
        let nx: Vec<&str> = errors
            .iter()
            .filter(|e| e.status == LookupStatus::NotFound)
            .map(|e| e.name.as_str())
            .collect();
        errors
            .iter()
            .filter(|e| !(e.status == LookupStatus::NoData && nx.contains(&e.name.as_str())))
            .map(|e| e.status)
            .max_by_key(|s| rank(*s))
            .unwrap_or(LookupStatus::Error)
    }
}

/// Result of the `--tls` step (`openssl s_client` with the image's CA bundle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsResult {
    /// `Verify return code: 0 (ok)` seen.
    pub verified: bool,
    /// The verify result text (`ok`, `unable to get local issuer certificate`, ...).
    pub verify_result: Option<String>,
    /// Leaf subject (`CN = ...`).
    pub subject: Option<String>,
    /// Leaf issuer.
    pub issuer: Option<String>,
    /// `notAfter=` as printed by openssl (`Jan  1 00:00:00 2027 GMT`).
    pub not_after: Option<String>,
    /// Connection or tool errors.
    pub errors: Vec<String>,
    /// openssl exit status (127 = no openssl in the image).
    pub rc: Option<i32>,
}

/// Parse a `tls` section.
pub fn parse_tls(body: &str, rc: Option<i32>) -> TlsResult {
    let mut r = TlsResult {
        verified: false,
        verify_result: None,
        subject: None,
        issuer: None,
        not_after: None,
        errors: Vec::new(),
        rc,
    };
    for line in body.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Verify return code:") {
            let v = v.trim();
            r.verified = v.starts_with("0 ");
            r.verify_result = Some(
                v.split_once('(')
                    .map(|(_, t)| t.trim_end_matches(')').to_string())
                    .unwrap_or_else(|| v.to_string()),
            );
        } else if let Some(v) = line.strip_prefix("subject=") {
            r.subject = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("issuer=") {
            r.issuer = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("notAfter=") {
            r.not_after = Some(v.trim().to_string());
        } else if !line.is_empty()
            && !line.starts_with("Verification")
            && (line.contains("error") || line.contains("not found") || line.contains("errno"))
            && !r.errors.iter().any(|e| e == line)
        {
            r.errors.push(line.to_string());
        }
    }
    r
}

/// Result of the `--git` step (`git ls-remote -- URL REF`, REF = `HEAD` unless `--git-ref`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GitResult {
    /// Exit 0 and a HEAD line.
    pub reachable: bool,
    /// The commit HEAD points to, when printed.
    pub head: Option<String>,
    /// Every `SHA<TAB>REF` line git printed, in order (not serialized).
    #[serde(skip)]
    pub refs: Vec<(String, String)>,
    /// git's error lines (`fatal: ...`, `error: ...`) when not reachable.
    pub error: Option<String>,
    /// Exit status (127 = no git in the image).
    pub rc: Option<i32>,
}

/// Parse a `git` section.
pub fn parse_git(body: &str, rc: Option<i32>) -> GitResult {
    let refs: Vec<(String, String)> = body
        .lines()
        .filter_map(|l| {
            let (sha, r) = l.split_once('\t')?;
            (sha.len() >= 40 && sha.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| (sha.to_string(), r.trim().to_string()))
        })
        .collect();
    let head = refs
        .iter()
        .find(|(_, r)| r == "HEAD")
        .map(|(sha, _)| sha.clone());
    let reachable = rc == Some(0);
    let error = (!reachable).then(|| {
        let lines: Vec<&str> = body
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            format!("git exited with {rc:?} and printed nothing")
        } else {
            lines.join("; ")
        }
    });
    GitResult {
        reachable,
        head,
        refs,
        error,
        rc,
    }
}
