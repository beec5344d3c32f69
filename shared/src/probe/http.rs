//! HTTP(S) requests from inside the pod network: the `--http` step of the probe script
//! (`src/probe/probe.sh`), what it is asked ([`HttpRequest`]) and what it answered
//! ([`HttpResult`], [`parse_http`]). One home for `kubectl gatewaycheck --probe` and the HTTP(S)
//! link of `kubectl gitops verify`.
//!
//! The request is `curl` in the probe image (nicolaka/netshoot, [`super::TOOLS_IMAGE`]; Alpine
//! and BusyBox images have none, which the probe reports as exit 127): no redirect followed
//! (the first answer is the verdict), `--proto =http,https`, `--max-time` one second under the
//! step timeout, and, when the request must reach a given address (a Gateway's
//! `status.addresses`), `--connect-to ::ADDR:` so the Host header and the TLS server name
//! stay the URL's host, as a client that resolved the name to ADDR sends them (curl
//! docs/cmdline-opts/connect-to.md: empty HOST1 and PORT1 match any host and port, an empty
//! PORT2 keeps the port).
//!
//! The TLS verdict is curl's own, against the image's CA bundle, which is the CA a client in
//! that pod would use: chain, name and dates. curl reports a refused certificate as exit 60
//! (CURLE_PEER_FAILED_VERIFICATION; 51 in releases before 7.62) with OpenSSL's reason in its
//! message (`SSL certificate problem: certificate has expired`, `... self-signed certificate`,
//! `... unable to get local issuer certificate`, `SSL: no alternative certificate subject name
//! matches target host name 'H'`), read by [`TlsProblem::classify`]. The certificate's facts
//! (subject, issuer, notAfter, subjectAltName) come from `openssl s_client` in a
//! `http-tls` section. When curl refuses the certificate the script asks once more with `-k`,
//! so the report can say what the server would have answered behind it
//! ([`HttpResult::insecure_code`]). Exit codes (curl include/curl/curl.h `CURLcode`,
//! libcurl-errors.md): 6 resolve, 7 connect (refused, no route), 28 timeout, 35 TLS
//! handshake, 52 empty reply, 56 receive error, 60 certificate refused.

use super::parse::{Section, TlsResult, parse_tls};
use serde::Serialize;
use std::net::IpAddr;

/// One request the probe makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRequest {
    /// The URL, `http://` or `https://`, as the client would request it.
    pub url: String,
    /// The address the request is sent to instead of the URL host's DNS answer (a Gateway's
    /// address); None: the probe pod resolves the host as any client does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect: Option<IpAddr>,
}

/// The parts of an URL the probe needs: scheme, host (no brackets), port (explicit or the
/// scheme's default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts {
    /// `http` or `https`.
    pub scheme: String,
    /// The host as written (IPv6 without brackets).
    pub host: String,
    /// The port: explicit, else 80 or 443.
    pub port: u16,
}

/// Splits and checks an URL for the probe: `http://` or `https://`, a host, an optional port
/// (1-65535), no whitespace or control character, at most 2048 bytes. Errors: a message
/// naming what is wrong (callers make it a usage error, exit 2).
pub fn url_parts(url: &str) -> Result<UrlParts, String> {
    if url.len() > 2048 {
        return Err(format!("URL is {} bytes (at most 2048)", url.len()));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "URL {url:?} contains whitespace or a control character"
        ));
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{url:?} is not an URL (expected http://HOST/ or https://HOST/)"))?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(format!("{url:?}: only http:// and https:// are requested")),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("{url:?}: unclosed [IPv6] host"))?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (hostport.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(format!("{url:?} has no host"));
    }
    let port = match port {
        None | Some("") => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{url:?}: port {p:?} is not 1-65535"))?,
    };
    Ok(UrlParts { scheme, host, port })
}

fn bracket(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

impl HttpRequest {
    /// A checked request (see [`url_parts`]). Errors: the URL's problem, for a usage error.
    pub fn new(url: &str, connect: Option<IpAddr>) -> Result<Self, String> {
        url_parts(url)?;
        Ok(HttpRequest {
            url: url.to_string(),
            connect,
        })
    }

    /// The script's five argv elements: `--http URL VIA TARGET SNI` (see probe.sh): VIA is
    /// `-` or curl's `--connect-to ::ADDR:`; TARGET is `-` for `http://`, else the `ADDR:PORT`
    /// openssl connects to (the connect address, else the URL's host); SNI the URL's host
    /// (`-` when it is an IP address: no server name is sent for one, RFC 6066 section 3).
    pub fn argv(&self) -> Vec<String> {
        let p = url_parts(&self.url).expect("checked by HttpRequest::new");
        let via = self
            .connect
            .map_or_else(|| "-".to_string(), |ip| format!("::{}:", bracket(ip)));
        let host_is_ip = p.host.parse::<IpAddr>().is_ok();
        let target = match (p.scheme.as_str(), self.connect) {
            ("http", _) => "-".to_string(),
            (_, Some(ip)) => format!("{}:{}", bracket(ip), p.port),
            (_, None) if host_is_ip => format!(
                "{}:{}",
                p.host.parse::<IpAddr>().map(bracket).unwrap_or_default(),
                p.port
            ),
            (_, None) => format!("{}:{}", p.host, p.port),
        };
        let sni = if host_is_ip { "-".into() } else { p.host };
        vec!["--http".into(), self.url.clone(), via, target, sni]
    }
}

/// Why the client refused the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsProblem {
    /// notAfter is past (OpenSSL X509_V_ERR_CERT_HAS_EXPIRED).
    Expired,
    /// notBefore is in the future.
    NotYetValid,
    /// No subjectAltName (or CN) matches the URL's host.
    NameMismatch,
    /// The chain does not end at a CA the image trusts (self-signed, unknown issuer, missing
    /// intermediate).
    UntrustedChain,
    /// The handshake itself failed (no certificate judged: protocol or alert).
    Handshake,
    /// Another refusal (the message says which).
    Other,
}

impl TlsProblem {
    /// Reads curl's exit code and error message (the OpenSSL verify reason it quotes).
    /// None when the exit code is not a TLS failure.
    pub fn classify(rc: i32, message: &str) -> Option<TlsProblem> {
        let m = message.to_ascii_lowercase();
        match rc {
            35 => Some(TlsProblem::Handshake),
            51 | 60 | 83 | 90 | 91 => Some(if m.contains("expired") {
                TlsProblem::Expired
            } else if m.contains("not yet valid") {
                TlsProblem::NotYetValid
            } else if m.contains("subject name") || m.contains("host name") || rc == 51 {
                TlsProblem::NameMismatch
            } else if m.contains("self-signed")
                || m.contains("self signed")
                || m.contains("issuer")
                || m.contains("unable to verify")
                || m.contains("chain")
            {
                TlsProblem::UntrustedChain
            } else {
                TlsProblem::Other
            }),
            _ => None,
        }
    }
}

/// How the request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpOutcome {
    /// An HTTP answer came back (any status code, [`HttpResult::code`]).
    Answered,
    /// The client refused the server's certificate ([`HttpResult::tls_problem`]); no request
    /// was sent over it.
    TlsRefused,
    /// No answer: not resolved, refused, unreachable, timed out, reset ([`HttpResult::error`]).
    NoAnswer,
    /// The image has no curl (exit 127): nothing was asked.
    ToolMissing,
    /// The probe ended before the request finished (deadline).
    Unfinished,
}

/// What one request answered, from the `http` (and `http-tls`) sections of the probe log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpResult {
    /// The URL requested.
    pub url: String,
    /// How it ended.
    pub outcome: HttpOutcome,
    /// The HTTP status code (None unless answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// `1.1`, `2`, ... (curl's `http_version`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_version: Option<String>,
    /// The address and port the connection went to (curl's `remote_ip:remote_port`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// Milliseconds from the start to the last byte (curl's `time_total`), also on failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_ms: Option<f64>,
    /// Milliseconds to the TCP connect (`time_connect`; None when it never connected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_ms: Option<f64>,
    /// Milliseconds to the end of the TLS handshake (`time_appconnect`; None for HTTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ms: Option<f64>,
    /// Why the client refused the certificate (outcome TlsRefused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_problem: Option<TlsProblem>,
    /// The status code the server gave when asked again without verification (`-k`): what
    /// it serves behind the certificate clients refuse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_code: Option<u16>,
    /// curl's error (`curl: (N) MESSAGE` without the prefix), or the tool's absence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The certificate the server presented (HTTPS only), from openssl.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<Certificate>,
    /// curl's exit status (None: the log ended inside the section).
    pub rc: Option<i32>,
}

/// The leaf certificate's facts, as openssl printed them for the URL's server name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Certificate {
    /// Leaf subject.
    pub subject: Option<String>,
    /// Leaf issuer.
    pub issuer: Option<String>,
    /// notAfter as RFC 3339 (UTC), when openssl printed one.
    pub not_after: Option<String>,
    /// Whole days from the probe's log read to notAfter (negative: expired).
    pub days_left: Option<i64>,
    /// subjectAltName DNS names and IP addresses.
    pub names: Vec<String>,
    /// openssl's verify result with the name check (`ok`, `hostname mismatch`, ...).
    pub verify_result: Option<String>,
}

fn write_out_line(body: &str, prefix: &str) -> Option<Vec<(String, String)>> {
    let line = body
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(prefix))?;
    Some(
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn get<'a>(kv: &'a [(String, String)], k: &str) -> Option<&'a str> {
    kv.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
}

fn ms(kv: &[(String, String)], k: &str) -> Option<f64> {
    get(kv, k)
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .map(|s| (s * 10_000.0).round() / 10.0)
}

fn status(kv: &[(String, String)]) -> Option<u16> {
    get(kv, "code")
        .and_then(|c| c.parse::<u16>().ok())
        .filter(|c| *c > 0)
}

/// Parses openssl's `notAfter=Dec  4 17:39:21 2026 GMT` (ASN1_TIME_print's form) to a UTC
/// timestamp.
pub fn parse_not_after(text: &str) -> Option<jiff::Timestamp> {
    let t = text.trim().trim_end_matches("GMT").trim();
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    jiff::civil::DateTime::strptime("%b %d %H:%M:%S %Y", &t)
        .ok()?
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

/// The certificate facts of an `http-tls` section, days counted from `now`.
pub fn certificate(tls: &Section, now: jiff::Timestamp) -> Option<Certificate> {
    let r: TlsResult = parse_tls(&tls.body, tls.rc);
    if r.subject.is_none() && r.verify_result.is_none() {
        return None;
    }
    let not_after = r.not_after.as_deref().and_then(parse_not_after);
    let mut names = Vec::new();
    let mut in_san = false;
    for line in tls.body.lines() {
        if line.starts_with("X509v3 Subject Alternative Name") {
            in_san = true;
            continue;
        }
        if in_san && line.starts_with(' ') {
            for n in line.split(',') {
                let n = n.trim();
                if let Some(v) = n
                    .strip_prefix("DNS:")
                    .or_else(|| n.strip_prefix("IP Address:"))
                {
                    names.push(v.to_string());
                }
            }
        } else {
            in_san = false;
        }
    }
    Some(Certificate {
        subject: r.subject,
        issuer: r.issuer,
        not_after: not_after.map(|t| t.to_string()),
        days_left: not_after.map(|t| (t.as_second() - now.as_second()).div_euclid(86_400)),
        names,
        verify_result: r.verify_result,
    })
}

/// Parses one request's `http` section (and its `http-tls` section, if any); days to
/// notAfter are counted from `now`.
pub fn parse_http(http: &Section, tls: Option<&Section>, now: jiff::Timestamp) -> HttpResult {
    let kv = write_out_line(&http.body, "#http ").unwrap_or_default();
    let insecure = write_out_line(&http.body, "#http-insecure ");
    let error = http.body.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("curl: (")
            .and_then(|r| r.split_once(") "))
            .map(|(_, msg)| msg.to_string())
            .or_else(|| l.ends_with("not found in image").then(|| l.to_string()))
    });
    let code = status(&kv);
    let tls_problem = http
        .rc
        .and_then(|rc| TlsProblem::classify(rc, error.as_deref().unwrap_or_default()));
    let outcome = match http.rc {
        None => HttpOutcome::Unfinished,
        Some(127) => HttpOutcome::ToolMissing,
        Some(0) if code.is_some() => HttpOutcome::Answered,
        Some(_) if tls_problem.is_some() => HttpOutcome::TlsRefused,
        Some(_) => HttpOutcome::NoAnswer,
    };
    let remote = get(&kv, "remote").filter(|r| !r.is_empty()).map(|r| {
        match (r.parse::<IpAddr>(), get(&kv, "port")) {
            (Ok(ip), Some(p)) => format!("{}:{p}", bracket(ip)),
            _ => r.to_string(),
        }
    });
    HttpResult {
        url: http.arg.clone(),
        outcome,
        code: code.filter(|_| outcome == HttpOutcome::Answered),
        http_version: get(&kv, "version")
            .filter(|v| *v != "0" && outcome == HttpOutcome::Answered)
            .map(str::to_string),
        remote,
        total_ms: ms(&kv, "total"),
        connect_ms: ms(&kv, "connect"),
        tls_ms: ms(&kv, "tls"),
        tls_problem,
        insecure_code: insecure.as_deref().and_then(status),
        error: error.filter(|_| outcome != HttpOutcome::Answered),
        certificate: tls.and_then(|t| certificate(t, now)),
        rc: http.rc,
    }
}

/// Every request's result from a parsed probe log, in the order asked.
pub fn results(
    log: &super::parse::ProbeLog,
    asked: &[HttpRequest],
    now: jiff::Timestamp,
) -> Vec<HttpResult> {
    asked
        .iter()
        .map(|r| match log.section("http", &r.url) {
            Some(s) => parse_http(s, log.section("http-tls", &r.url), now),
            None => HttpResult {
                url: r.url.clone(),
                outcome: HttpOutcome::Unfinished,
                code: None,
                http_version: None,
                remote: None,
                total_ms: None,
                connect_ms: None,
                tls_ms: None,
                tls_problem: None,
                insecure_code: None,
                error: Some("the probe ended before this request was made".into()),
                certificate: None,
                rc: None,
            },
        })
        .collect()
}

impl HttpResult {
    /// One line for tables: `200 in 4.8 ms via 10.0.0.1:443, TLS ok (CN=..., 30 days left)`,
    /// `certificate refused (name-mismatch: ...), the server answers 200 behind it`, or
    /// `no answer: MESSAGE`.
    pub fn summary(&self) -> String {
        let via = self
            .remote
            .as_deref()
            .map(|r| format!(" via {r}"))
            .unwrap_or_default();
        let time = self
            .total_ms
            .map(|t| format!(" in {t} ms"))
            .unwrap_or_default();
        let cert = self
            .certificate
            .as_ref()
            .and_then(|c| c.days_left)
            .map(|d| format!(", certificate notAfter in {d} days"))
            .unwrap_or_default();
        match self.outcome {
            HttpOutcome::Answered => {
                let tls = if self.url.starts_with("https") {
                    ", TLS verified"
                } else {
                    ""
                };
                format!("HTTP {}{time}{via}{tls}{cert}", self.code.unwrap_or(0))
            }
            HttpOutcome::TlsRefused => format!(
                "certificate refused ({}: {}){}{via}{cert}",
                serde_json::to_value(self.tls_problem)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                self.error.as_deref().unwrap_or("no message"),
                self.insecure_code
                    .map(|c| format!("; the server answers {c} behind it"))
                    .unwrap_or_default()
            ),
            HttpOutcome::NoAnswer => format!(
                "no answer{time}{via}: {}",
                self.error.as_deref().unwrap_or("curl printed no error")
            ),
            HttpOutcome::ToolMissing => {
                "not asked: the probe image has no curl (use nicolaka/netshoot)".into()
            }
            HttpOutcome::Unfinished => format!(
                "not finished: {}",
                self.error
                    .as_deref()
                    .unwrap_or("the probe's deadline ended the request")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::parse::ProbeLog;

    // Captured 2026-12-03 from probe.sh with curl 7.88.1 / OpenSSL 3.0.19 against
    // `openssl s_server -www` (self-signed CN=web.example.test) and `python3 -m http.server`.
    const LOG: &str = "#podresolve begin v1
#podresolve section http http://web.example.test:18081/

#http code=200 version=1 remote=127.0.0.1 port=18081 connect=0.000130 tls=0.000000 total=0.004827 verify=0
#podresolve end rc=0
#podresolve section http https://other.example.test:18443/x
curl: (60) SSL: no alternative certificate subject name matches target host name 'other.example.test'
More details here: https://curl.se/docs/sslcerts.html

#http code=000 version=0 remote=127.0.0.1 port=18443 connect=0.000000 tls=0.000000 total=0.019921 verify=1

#http-insecure code=200 version=1 remote=127.0.0.1 port=18443 connect=0.000226 tls=0.006166 total=0.006412 verify=18
#podresolve end rc=60
#podresolve section http-tls https://other.example.test:18443/x
Verification error: hostname mismatch
Verify return code: 62 (hostname mismatch)
subject=CN = web.example.test
issuer=CN = web.example.test
notAfter=Dec  4 17:39:21 2026 GMT
X509v3 Subject Alternative Name: 
    DNS:web.example.test
#podresolve end rc=0
#podresolve section http https://web.example.test:18443/

#http code=200 version=1 remote=127.0.0.1 port=18443 connect=0.000214 tls=0.004792 total=0.005036 verify=0
#podresolve end rc=0
#podresolve section http-tls https://web.example.test:18443/
Verify return code: 0 (ok)
subject=CN = web.example.test
issuer=CN = web.example.test
notAfter=Dec  4 17:39:21 2026 GMT
X509v3 Subject Alternative Name: 
    DNS:web.example.test
#podresolve end rc=0
#podresolve section http http://127.0.0.1:1/
curl: (7) Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to server

#http code=000 version=0 remote= port=0 connect=0.000000 tls=0.000000 total=0.000135 verify=0
#podresolve end rc=7
#podresolve section http https://gone.example.test/
#podresolve done
";

    fn asked() -> Vec<HttpRequest> {
        [
            "http://web.example.test:18081/",
            "https://other.example.test:18443/x",
            "https://web.example.test:18443/",
            "http://127.0.0.1:1/",
            "https://gone.example.test/",
            "https://never.example.test/",
        ]
        .iter()
        .map(|u| HttpRequest::new(u, None).unwrap())
        .collect()
    }

    #[test]
    fn each_request_gets_its_outcome_status_tls_verdict_and_time() {
        let now: jiff::Timestamp = "2026-12-03T17:40:00Z".parse().unwrap();
        let r = results(&ProbeLog::parse(LOG), &asked(), now);
        assert_eq!(r[0].outcome, HttpOutcome::Answered);
        assert_eq!(r[0].code, Some(200));
        assert_eq!(r[0].total_ms, Some(4.8));
        assert_eq!(r[0].remote.as_deref(), Some("127.0.0.1:18081"));
        assert_eq!(r[0].tls_ms, None);
        assert_eq!(r[1].outcome, HttpOutcome::TlsRefused);
        assert_eq!(r[1].tls_problem, Some(TlsProblem::NameMismatch));
        assert_eq!(r[1].code, None);
        assert_eq!(r[1].insecure_code, Some(200));
        let c = r[1].certificate.as_ref().unwrap();
        assert_eq!(c.names, ["web.example.test"]);
        assert_eq!(c.not_after.as_deref(), Some("2026-12-04T17:39:21Z"));
        assert_eq!(c.days_left, Some(0));
        assert_eq!(c.verify_result.as_deref(), Some("hostname mismatch"));
        assert_eq!(r[2].outcome, HttpOutcome::Answered);
        assert_eq!(r[2].tls_ms, Some(4.8));
        assert!(
            r[2].summary().contains("TLS verified"),
            "{}",
            r[2].summary()
        );
        assert_eq!(r[3].outcome, HttpOutcome::NoAnswer);
        assert!(
            r[3].error
                .as_deref()
                .unwrap()
                .starts_with("Failed to connect")
        );
        assert_eq!(r[3].remote, None);
        assert_eq!(r[4].outcome, HttpOutcome::Unfinished);
        assert_eq!(r[5].outcome, HttpOutcome::Unfinished);
    }

    #[test]
    fn curl_messages_name_the_tls_problem() {
        let c = TlsProblem::classify;
        assert_eq!(
            c(60, "SSL certificate problem: certificate has expired"),
            Some(TlsProblem::Expired)
        );
        assert_eq!(
            c(60, "SSL certificate problem: self-signed certificate"),
            Some(TlsProblem::UntrustedChain)
        );
        assert_eq!(
            c(
                60,
                "SSL certificate problem: unable to get local issuer certificate"
            ),
            Some(TlsProblem::UntrustedChain)
        );
        assert_eq!(c(35, "OpenSSL/3.0 alert"), Some(TlsProblem::Handshake));
        assert_eq!(c(7, "Failed to connect"), None);
    }

    #[test]
    fn argv_sends_the_request_to_the_address_with_the_urls_host() {
        let ip: IpAddr = "192.168.240.10".parse().unwrap();
        let r = HttpRequest::new("https://app.example.dev/healthz", Some(ip)).unwrap();
        assert_eq!(
            r.argv(),
            [
                "--http",
                "https://app.example.dev/healthz",
                "::192.168.240.10:",
                "192.168.240.10:443",
                "app.example.dev"
            ]
        );
        let v6: IpAddr = "fd00::1".parse().unwrap();
        let r = HttpRequest::new("http://[fd00::2]:8080/", Some(v6)).unwrap();
        assert_eq!(r.argv()[2..], ["::[fd00::1]:", "-", "-"]);
        let r = HttpRequest::new("https://[fd00::2]:8443/", None).unwrap();
        assert_eq!(r.argv()[2..], ["-", "[fd00::2]:8443", "-"]);
        for bad in [
            "ftp://x/",
            "http://",
            "x",
            "http://h:0/",
            "http://h/ a",
            "http://h:99999/",
        ] {
            assert!(HttpRequest::new(bad, None).is_err(), "{bad}");
        }
    }
}
