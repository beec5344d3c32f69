//! `--verify-in-cluster`: contact the new remote from a pod in the source's namespace, the way
//! source-controller will, with the shared probe machinery ([`cluster_loop::probe`], the same
//! Job, script, lifecycle and parsers as `kubectl podresolve`).
//!
//! The probe Job (`cutover-<run id>`, labelled `app.kubernetes.io/managed-by=kubectl-cutover`,
//! deleted when done, on error and on Ctrl-C; activeDeadlineSeconds and a TTL cover SIGKILL)
//! resolves the new host with `getent ahosts` (the libc path: /etc/hosts, the pod's search
//! list and ndots, like source-controller's Go resolver) and runs `git ls-remote -- URL
//! refs/heads/BRANCH` with the credentials Flux will use. Those reach the container only as
//! `env[].valueFrom.secretKeyRef` of the Secret (the kubelet reads them): no secret value is in
//! the Job spec, argv, log or our output. TLS and authentication are judged from git's own
//! handshake and HTTP status, as source-controller's fetch would fail.

use std::net::IpAddr;
use std::time::Duration;

use cluster_loop::cli::Connection;
use cluster_loop::error::{Error, Result};
use cluster_loop::probe::lifecycle::{ProbeEnd, RequestCounter, run_probe};
use cluster_loop::probe::parse::{LookupStatus, ProbeLog, parse_getent, parse_git};
use cluster_loop::probe::{
    Carrier, GitSecret, ProbeOptions, ProbeOwner, is_own_machine, new_run_id,
};
use cluster_loop::signals::Signals;
use cluster_loop::wait::Progress;
use serde::Serialize;

use crate::git::RemoteFailure;

/// What to verify.
#[derive(Debug, Clone)]
pub struct Verify {
    /// The GitRepository's namespace: the probe runs there.
    pub namespace: String,
    /// The new URL.
    pub url: String,
    /// The branch whose head must equal `commit`.
    pub branch: String,
    /// The commit C the cluster runs.
    pub commit: String,
    /// The Secret Flux will use and the keys it has (only those are referenced).
    pub secret: Option<GitSecret>,
    /// Probe image (needs sh, getent, base64, mktemp and git).
    pub image: String,
    /// Deadline of the probe (also its activeDeadlineSeconds).
    pub timeout: Duration,
    /// The plugin the probe Job belongs to (its name, labels and field manager):
    /// [`ProbeOwner::CUTOVER`], or `kubectl gitops verify`'s owner when it runs this preflight.
    pub owner: ProbeOwner,
}

/// Outcome of one step seen from the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Passed.
    Ok,
    /// Failed (see the check message).
    Failed,
    /// Not reached because an earlier step failed.
    NotReached,
    /// Does not apply (http://, or no credentials to send).
    NotApplicable,
}

/// The in-cluster view of the new remote (`preflight.inCluster` in `-o json|yaml`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InCluster {
    /// `namespace/name` of the probe Job (deleted when done).
    pub probe: String,
    /// The pod that ran it.
    pub pod: Option<String>,
    /// The probe image.
    pub image: String,
    /// The new URL's host.
    pub host: String,
    /// `getent ahosts HOST` in the pod: resolved, not-found (NXDOMAIN), timeout, ...
    pub dns_status: LookupStatus,
    /// Addresses the pod got, in the order a client tries them.
    pub addresses: Vec<IpAddr>,
    /// Addresses this workstation gets for the host (getaddrinfo), empty when it cannot
    /// resolve it.
    pub workstation_addresses: Vec<IpAddr>,
    /// True when the pod and the workstation resolve the host to different address sets.
    pub dns_differs: bool,
    /// TLS verification of the server certificate: the probe image's system CA bundle plus
    /// the Secret's `ca.crt` when it has one (go-git v5 `configureTransport` adds the CA
    /// bundle to `x509.SystemCertPool()`, it does not replace it).
    pub tls: Step,
    /// What git trusted: `image+secret` (the image's CA bundle plus the Secret's ca.crt),
    /// `image` (the image's bundle; no ca.crt), `secret` (ca.crt alone: the image has no CA
    /// bundle), `unwritable` (no writable /tmp: the image's bundle only).
    pub ca_source: Option<String>,
    /// The credential: accepted, rejected (401/403), or not sent.
    pub auth: Step,
    /// `basic`, `bearer` or `none`: what the probe sent.
    pub auth_scheme: Option<String>,
    /// The branch head N seen from inside the cluster.
    pub head: Option<String>,
    /// N == C.
    pub matches_cluster: Option<bool>,
    /// git's exit status in the pod (127: no git in the image).
    pub git_exit_code: Option<i32>,
    /// API requests the probe made (POST, WATCH, GET log, DELETE).
    pub api_requests: u32,
    /// The bound on each tool inside the probe, seconds (a third of `--probe-timeout`, 2-20).
    pub step_timeout_secs: i64,
}

/// The verdict for the preflight: `Ok(message)` passes, `Err(message)` refuses.
pub type Verdict = std::result::Result<String, String>;

/// Runs the probe and judges what it saw. `signals` interrupts it (the probe is deleted
/// first; returns `Ok(None)` then).
///
/// Errors: API errors creating or watching the probe (RBAC: exit 3 with the `kubectl auth
/// can-i create jobs` line), the probe deadline (exit 3).
pub async fn verify(
    conn: &Connection,
    v: &Verify,
    progress: &Progress,
    signals: &mut Signals,
) -> Result<Option<(InCluster, Verdict)>> {
    let parsed = url::Url::parse(&v.url)
        .map_err(|e| Error::usage(format!("--to {:?} is not a URL: {e}", v.url)))?;
    let host = parsed
        .host_str()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let opts = ProbeOptions {
        owner: v.owner,
        namespace: v.namespace.clone(),
        image: v.image.clone(),
        hosts: vec![host.clone()],
        tls_port: None,
        git_url: Some(v.url.clone()),
        git_ref: Some(format!("refs/heads/{}", v.branch)),
        git_secret: v.secret.clone(),
        deadline_secs: v.timeout.as_secs().max(5) as i64,
        node: None,
        run_id: new_run_id(),
        source: None,
        http: vec![],
    };
    let ws_host = host.clone();
    let ws = tokio::spawn(async move {
        tokio::net::lookup_host((ws_host.as_str(), port))
            .await
            .map(|it| {
                let mut out: Vec<IpAddr> = Vec::new();
                for a in it {
                    if !out.contains(&a.ip()) {
                        out.push(a.ip());
                    }
                }
                out
            })
            .unwrap_or_default()
    });
    let n = RequestCounter::default();
    let deadline = tokio::time::Instant::now() + v.timeout + Duration::from_secs(15);
    let hint = format!(
        "kubectl delete job -n {} -l app.kubernetes.io/managed-by={}",
        v.namespace,
        v.owner.managed_by()
    );
    progress.set_deadline(deadline);
    let end = run_probe(
        conn,
        &opts,
        Carrier::Job,
        deadline,
        &hint,
        progress,
        &n,
        signals.recv(),
    )
    .await;
    let workstation_addresses = ws.await.unwrap_or_default();
    let probe_name = format!("{}/{}", opts.target_namespace(), opts.name());
    let (finished, log) = match end {
        Ok(ProbeEnd::Finished { finished, log }) => (finished, log),
        Ok(ProbeEnd::Interrupted { signal, cleanup }) => {
            eprintln!(
                "interrupted by {signal}: {}; nothing was changed",
                match cleanup {
                    Ok(()) => format!("probe job {probe_name} deleted"),
                    Err(e) => format!("probe job {probe_name} NOT deleted ({e})"),
                }
            );
            return Ok(None);
        }
        // The container can never start (e.g. a key missing from the Secret, an image that
        // cannot be pulled): a refusal with the kubelet's reason, not a cluster error.
        Err(Error::Finding(m)) => {
            let ic = empty(&opts, &host, workstation_addresses, n.get());
            return Ok(Some((
                ic,
                Err(format!(
                    "the in-cluster probe {probe_name} could not run: {m} (it was deleted)"
                )),
            )));
        }
        Err(e) => return Err(e),
    };
    let log = ProbeLog::parse(&log);
    let mut ic = empty(&opts, &host, workstation_addresses, n.get());
    ic.pod = Some(finished.pod.clone());
    ic.auth_scheme = log.git_auth.clone();
    ic.ca_source = log.git_ca.clone();
    if log.version.is_none() {
        return Ok(Some((
            ic,
            Err(format!(
                "the in-cluster probe pod {} printed no probe output ({}): is {} \
                 an image with sh? pass --probe-image",
                finished.pod,
                finished.ended(),
                v.image
            )),
        )));
    }
    if let Some(g) = log.section("getent", &host) {
        let r = parse_getent(&g.body, g.rc);
        ic.dns_status = r.status;
        ic.addresses = r.addresses;
    }
    ic.dns_differs = ic.dns_status == LookupStatus::Resolved
        && !ic.workstation_addresses.is_empty()
        && sorted(&ic.addresses) != sorted(&ic.workstation_addresses);
    let section = log.section("git", &v.url);
    let git = section.map(|s| parse_git(&s.body, s.rc));
    ic.git_exit_code = git.as_ref().and_then(|g| g.rc);
    let verdict = judge(
        &mut ic,
        v,
        git.as_ref().zip(section.map(|s| s.body.as_str())),
        &parsed,
    );
    Ok(Some((ic, verdict)))
}

/// What the probe's git trusted, in words ("with the image's CA bundle plus secret NS/NAME
/// ca.crt").
fn ca_words(ca_source: Option<&str>, secret: &str) -> String {
    match ca_source {
        Some("image+secret") => format!("with the image's CA bundle plus secret {secret} ca.crt"),
        Some("secret") => format!("with secret {secret} ca.crt only: the image has no CA bundle"),
        Some("unwritable") => {
            format!("with the image's CA bundle only: no writable /tmp for secret {secret} ca.crt")
        }
        _ => "with the image's CA bundle".into(),
    }
}

fn sorted(v: &[IpAddr]) -> Vec<IpAddr> {
    let mut v = v.to_vec();
    v.sort();
    v
}

fn empty(opts: &ProbeOptions, host: &str, ws: Vec<IpAddr>, requests: u32) -> InCluster {
    InCluster {
        probe: format!("{}/{}", opts.target_namespace(), opts.name()),
        pod: None,
        image: opts.image.clone(),
        host: host.to_string(),
        dns_status: LookupStatus::Error,
        addresses: vec![],
        workstation_addresses: ws,
        dns_differs: false,
        tls: Step::NotReached,
        ca_source: None,
        auth: Step::NotReached,
        auth_scheme: None,
        head: None,
        matches_cluster: None,
        git_exit_code: None,
        api_requests: requests,
        step_timeout_secs: opts.step_timeout_secs(),
    }
}

fn ips(v: &[IpAddr]) -> String {
    v.iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The verdict from the pod's DNS answer and git's result. Fills the TLS/auth/head fields.
fn judge(
    ic: &mut InCluster,
    v: &Verify,
    git: Option<(&cluster_loop::probe::parse::GitResult, &str)>,
    url: &url::Url,
) -> Verdict {
    let ns = &v.namespace;
    let secret = v
        .secret
        .as_ref()
        .map(|s| format!("{ns}/{}", s.name))
        .unwrap_or_else(|| "<none>".into());
    let https = url.scheme() == "https";
    let has_auth = ic.auth_scheme.as_deref().is_some_and(|s| s != "none");
    if ic.dns_status != LookupStatus::Resolved {
        return Err(unresolved(ic, ns));
    }
    let dns_note = if ic.dns_differs {
        format!(
            " (this workstation gets {}: the cluster reaches a different address)",
            ips(&ic.workstation_addresses)
        )
    } else {
        String::new()
    };
    let Some((git, git_body)) = git else {
        return Err(format!(
            "the in-cluster probe printed no git result for {} (killed by its deadline?)",
            v.url
        ));
    };
    if git.rc == Some(127) {
        return Err(format!(
            "the probe image {} has no git: pass --probe-image with an image that has sh and git",
            v.image
        ));
    }
    if !git.reachable {
        let from = format!(
            "from a pod in {ns}, {}{dns_note}",
            resolved(&ic.host, &ic.addresses)
        );
        return Err(unreachable(
            ic, v, git, git_body, https, has_auth, &secret, &from,
        ));
    }
    ic.tls = if https { Step::Ok } else { Step::NotApplicable };
    ic.auth = if has_auth {
        Step::Ok
    } else {
        Step::NotApplicable
    };
    let refname = format!("refs/heads/{}", v.branch);
    let Some(head) = git
        .refs
        .iter()
        .find(|(_, r)| *r == refname)
        .map(|(s, _)| s.clone())
    else {
        return Err(format!(
            "from a pod in {ns}, {} answers but has no branch {} (git ls-remote printed no \
             {refname})",
            v.url, v.branch
        ));
    };
    let same = head == v.commit;
    ic.matches_cluster = Some(same);
    ic.head = Some(head.clone());
    let short = |s: &str| s[..s.len().min(12)].to_string();
    if !same {
        return Err(format!(
            "from a pod in {ns}, the new server's {} is at {}, not at {} which the cluster \
             runs: cutting over from the cluster's point of view would change the revision",
            v.branch,
            short(&head),
            short(&v.commit)
        ));
    }
    Ok(format!(
        "from a pod in {ns}: {}{dns_note}; {}; {}; {} is at {} == the commit \
         the cluster runs",
        resolved(&ic.host, &ic.addresses),
        if https {
            format!(
                "TLS verified ({})",
                ca_words(ic.ca_source.as_deref(), &secret)
            )
        } else {
            "plain http".into()
        },
        match ic.auth_scheme.as_deref() {
            Some("basic") => format!("basic auth from secret {secret} accepted"),
            Some("bearer") => format!("bearer token from secret {secret} accepted"),
            _ => "no credentials sent".into(),
        },
        v.branch,
        short(&head)
    ))
}

/// Why the pod could not resolve the host (NXDOMAIN, no answer in time, no getent), and
/// whether this workstation can (split DNS).
fn unresolved(ic: &InCluster, ns: &str) -> String {
    let what = match ic.dns_status {
        LookupStatus::NotFound => "NXDOMAIN",
        LookupStatus::Timeout => "no DNS answer in time",
        LookupStatus::ToolMissing => "no getent in the probe image",
        _ => "no address",
    };
    if ic.workstation_addresses.is_empty() {
        format!(
            "{} does not resolve from a pod in {ns} ({what}), nor on this workstation: \
             source-controller will fail with \"Could not resolve host\"",
            ic.host
        )
    } else {
        format!(
            "split DNS: {} resolves on this workstation ({}) but not from a pod in {ns} \
             ({what}): source-controller would fail with \"Could not resolve host\". Make \
             the cluster's DNS answer it (a CoreDNS hosts entry or a forward for its zone), \
             then see kubectl podresolve {} -n {ns}",
            ic.host,
            ips(&ic.workstation_addresses),
            ic.host
        )
    }
}

/// Why git could not read the remote from the pod (`from`: where the pod resolved it), with
/// the TLS and auth steps filled as far as the failure shows them.
#[allow(clippy::too_many_arguments)]
fn unreachable(
    ic: &mut InCluster,
    v: &Verify,
    git: &cluster_loop::probe::parse::GitResult,
    git_body: &str,
    https: bool,
    has_auth: bool,
    secret: &str,
    from: &str,
) -> String {
    let f = RemoteFailure::classify(git_body);
    // A loopback target is the pod itself: say that, never "check firewalls".
    if let Some(lo) = loopback_reason(&ic.host, &ic.addresses) {
        return format!(
            "{from}, but git could not fetch from it: {}",
            lo.replace("on this workstation", "in the pod")
        );
    }
    if matches!(git.rc, Some(124 | 143)) {
        return format!(
            "{from}, but git ls-remote did not finish within the probe's step timeout \
             ({}s): the server, or the path from the cluster to it, is too slow or drops \
             packets (egress firewall?)",
            ic.step_timeout_secs
        );
    }
    match &f {
        RemoteFailure::Authentication | RemoteFailure::Forbidden => {
            ic.tls = if https { Step::Ok } else { Step::NotApplicable };
            ic.auth = Step::Failed;
        }
        RemoteFailure::Tls(_) => ic.tls = Step::Failed,
        RemoteFailure::NotFound | RemoteFailure::NoSuchBranch(_) => {
            ic.tls = if https { Step::Ok } else { Step::NotApplicable };
            ic.auth = if has_auth {
                Step::Ok
            } else {
                Step::NotApplicable
            };
        }
        _ => {}
    }
    let why = failure_why(ic, v, &f, secret);
    format!("{from}, but {why}")
}

/// What a git failure seen from the pod means, and what to do.
fn failure_why(ic: &InCluster, v: &Verify, f: &RemoteFailure, secret: &str) -> String {
    match f {
        RemoteFailure::Tls(detail) if v.secret.is_none() => format!(
            "TLS verification failed in the cluster ({detail}): the GitRepository has no \
             secretRef, so only the image's CA bundle was trusted. If the server uses a \
             private CA, put the CA certificate (PEM) in a Secret under the key `ca.crt` and \
             pass it with --secret: source-controller verifies with it"
        ),
        RemoteFailure::Tls(detail) => format!(
            "TLS verification failed in the cluster ({detail}){}. Add the CA certificate \
             (PEM) to secret {secret} under the key `ca.crt`: source-controller verifies \
             with it",
            match ic.ca_source.as_deref() {
                Some("image+secret") => {
                    ": neither the image's CA bundle nor the secret's ca.crt verifies \
                     this server"
                }
                Some("secret") => {
                    ": the secret's ca.crt does not verify this server (the probe image \
                     has no system CA bundle)"
                }
                Some("unwritable") => {
                    ": the probe could not write the secret's ca.crt (no writable /tmp), so \
                     only the image's CA bundle was trusted"
                }
                _ => ": the secret has no ca.crt, so only public CAs are trusted",
            }
        ),
        RemoteFailure::Authentication if v.secret.is_none() => "the server requires \
             credentials and the GitRepository has no secretRef; pass --secret with a \
             Secret holding username/password (or bearerToken) that may read this repository"
            .to_string(),
        RemoteFailure::Forbidden if v.secret.is_none() => "403 forbidden without \
             credentials: the server does not allow anonymous reads and the GitRepository \
             has no secretRef; pass --secret"
            .to_string(),
        // What the probe sent (probe.sh `git-auth`): `none` when the Secret holds no
        // username/password/bearerToken, as source-controller then sends none either.
        RemoteFailure::Authentication | RemoteFailure::Forbidden
            if ic.auth_scheme.as_deref() == Some("none") =>
        {
            format!(
                "the server requires credentials, but secret {secret} has no \
                 username/password or bearerToken, so the probe (like source-controller) \
                 sent none; add them to that Secret, or pass --secret with one that has them"
            )
        }
        RemoteFailure::Authentication | RemoteFailure::Forbidden
            if ic.auth_scheme.as_deref() == Some("basic-unavailable-no-base64") =>
        {
            format!(
                "the server requires credentials, and the probe image {} has no base64 to \
                 encode the basic auth of secret {secret}, so the probe sent none (this says \
                 nothing about the credential): pass --probe-image with an image that has \
                 sh, git and base64",
                v.image
            )
        }
        RemoteFailure::Authentication => format!(
            "authentication required: the credential in secret {secret} was rejected \
             (wrong, expired or revoked). If a token was rotated, mint a new uniquely named \
             token, put it in the secret, and never revoke the one Flux is using"
        ),
        RemoteFailure::Forbidden => format!(
            "403 forbidden: the credential in secret {secret} is valid but may not read \
             this repository; grant it read access on the new server"
        ),
        RemoteFailure::Unreachable(detail) => format!(
            "cannot connect from the cluster ({detail}): check egress NetworkPolicies, \
             firewalls and proxies between the cluster and {}",
            ic.host
        ),
        other => other.explain(&v.url, Some(secret)),
    }
}

/// `"HOST resolves to A, B"`, or `"HOST (an address: nothing to resolve)"` for an IP literal
/// (trial3: "127.0.0.1 resolves to 127.0.0.1").
fn resolved(host: &str, addrs: &[std::net::IpAddr]) -> String {
    if host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .is_ok()
    {
        format!("{host} (an address: nothing to resolve)")
    } else {
        format!("{host} resolves to {}", ips(addrs))
    }
}

/// Why `host` with the addresses it resolves to is the pod itself inside the cluster:
/// `localhost`/`*.localhost` (RFC 6761 6.3), a loopback or unspecified literal (see
/// [`is_own_machine`]: 127.0.0.0/8, ::1, ::ffff:127.0.0.1, 0.0.0.0, ::), or a name whose every
/// address is one of those. `None` otherwise (or when `addrs` is empty and the name is not a
/// loopback name).
pub fn loopback_reason(host: &str, addrs: &[std::net::IpAddr]) -> Option<String> {
    let what = loopback_fact(host, addrs)?;
    Some(format!(
        "{what}: in a pod, localhost is the pod itself, so source-controller would connect to \
         its own pod, not to this workstation or the Git server. Refused: use a URL the cluster \
         can reach (the server's real name, or a Service's cluster DNS name)"
    ))
}

/// The fact of [`loopback_reason`] alone, without the refusal: `"127.0.0.1 is a loopback
/// address"`, `"localhost is the loopback name"`, `"git.local resolves on this workstation to
/// the loopback (127.0.0.1)"`; `None` when `host` is not the loopback.
pub fn loopback_fact(host: &str, addrs: &[std::net::IpAddr]) -> Option<String> {
    loopback_fact_of(host, addrs)
}

/// [`loopback_fact`] of a URL's host without a DNS answer (`localhost`, a loopback or
/// unspecified literal): a Git URL a pod cannot reach as source-controller on the host does.
/// `None` for another host or a URL that does not parse.
pub fn url_loopback_fact(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    loopback_fact_of(u.host_str()?, &[])
}

fn loopback_fact_of(host: &str, addrs: &[std::net::IpAddr]) -> Option<String> {
    let h = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let literal = h.parse::<std::net::IpAddr>().ok();
    let what = if h == "localhost" || h.ends_with(".localhost") {
        format!("{host} is the loopback name")
    } else if let Some(ip) = literal.filter(|ip| is_own_machine(*ip)) {
        let canonical = ip.to_canonical();
        if canonical.is_unspecified() {
            format!(
                "{host} is the unspecified address, which a connection on Linux reaches as the \
                 loopback"
            )
        } else if canonical != ip {
            format!("{host} is a loopback address (IPv4-mapped {canonical})")
        } else {
            format!("{host} is a loopback address")
        }
    } else if literal.is_none() && !addrs.is_empty() && addrs.iter().all(|a| is_own_machine(*a)) {
        format!(
            "{host} resolves on this workstation to the loopback ({})",
            addrs
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        return None;
    };
    Some(what)
}
