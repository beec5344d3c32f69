//! `--probe`: what a client in the pod network gets from each Gateway, whatever its status says.
//!
//! One probe pod (the shared probe machinery, `cluster_loop::probe`: a Job, deleted at the end,
//! also on Ctrl-C) resolves every listener and route hostname and sends one HTTP(S) request per
//! (listener, route hostname) to the Gateway's `status.addresses` ([`plan`]). Its log is judged
//! here ([`judge`]):
//! - **HTTP(S)** (rule `probe`, `cluster_loop::probe::http`): an answer from the data plane is
//!   what "serving" means. No answer, a certificate the client refuses, a 404 for a route's
//!   own host and path (the route is not in the data plane) or a 5xx (no healthy backend) are
//!   findings, and when the Gateway says Programmed=True the finding says the status is not
//!   what clients get (Gateway API spec GatewayConditionType Programmed: "the Gateway ... is
//!   expected to be ready to serve traffic").
//! - **DNS** (rule `dns`, podresolve's engine as a library, `podresolve::report::build`): each
//!   hostname as a pod resolves it, against the Gateway's addresses. A pod answer that points
//!   elsewhere is the split-horizon trap of the fleet README (CoreDNS answers `${GATEWAY_VIP}`
//!   while the pool gave the Gateway another address: hairpin traffic from pods goes nowhere),
//!   named with the CoreDNS plugin and Corefile line that answered. A name pods cannot resolve
//!   is context, not a finding (outside clients may use public DNS).
//!
//! What is not requested, and said so (Level Info, and the Gateway is then never "serving"):
//! listeners of other protocols than HTTP and HTTPS, wildcard hostnames with no concrete route
//! hostname, a Gateway without an IP address. At most [`MAX_REQUESTS`] requests per Gateway.

use crate::rules::{Finding, Level, condition, object_ref};
use cluster_loop::probe::http::{HttpOutcome, HttpRequest, HttpResult};
use serde::Serialize;
use serde_json::Value;
use std::net::IpAddr;

/// The most requests made for one Gateway (bounds the probe's time).
pub const MAX_REQUESTS: usize = 16;

/// One request of the plan: which listener and route it is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Planned {
    /// The listener's name.
    pub listener: String,
    /// `httproute/NS/NAME`, or None for a listener no HTTPRoute attaches to (any answer
    /// then shows the data plane answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The request.
    pub request: HttpRequest,
}

/// What `--probe` asks for one Gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayPlan {
    /// The Gateway's IP addresses (`status.addresses` of type IPAddress, or untyped).
    pub addresses: Vec<IpAddr>,
    /// The requests, sent to the first address.
    pub requests: Vec<Planned>,
    /// Concrete hostnames to resolve from the pod.
    pub hostnames: Vec<String>,
    /// What is not requested and why (Info findings).
    #[serde(skip)]
    pub skipped: Vec<Finding>,
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_default()
}

/// True when `host` matches the listener `hostname` (exact, or `*.suffix` matching one or more
/// labels: Gateway API spec Listener.hostname and HTTPRoute.hostnames).
pub fn host_matches(listener: &str, host: &str) -> bool {
    let (l, h) = (listener.to_ascii_lowercase(), host.to_ascii_lowercase());
    match l.strip_prefix("*.") {
        Some(suffix) => h.ends_with(&format!(".{suffix}")),
        None => l == h,
    }
}

/// True when `route`'s spec.parentRefs name `gw` and (when set) this listener by sectionName
/// or port (Gateway API spec ParentReference; kind defaults to Gateway, namespace to the
/// route's).
pub fn attaches(route: &Value, gw: &Value, listener: &Value) -> bool {
    let route_ns = s(&route["metadata"], "namespace");
    route["spec"]["parentRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| {
            let kind = p["kind"].as_str().unwrap_or("Gateway");
            let ns = p["namespace"].as_str().unwrap_or(route_ns);
            kind == "Gateway"
                && ns == s(&gw["metadata"], "namespace")
                && p["name"] == gw["metadata"]["name"]
                && p["sectionName"]
                    .as_str()
                    .is_none_or(|sn| sn == s(listener, "name"))
                && p["port"]
                    .as_i64()
                    .is_none_or(|port| Some(port) == listener["port"].as_i64())
        })
}

/// True when `route`'s `spec.hostnames` intersect the listener's `hostname` (either unset, or a
/// name one of them matches): only then does the route attach to that listener (Gateway API
/// spec HTTPRoute.hostnames: a route whose hostnames match no listener is not accepted,
/// NoMatchingListenerHostname). Seen on a public fleet: a Gateway with listeners `example.com`
/// and `*.example.com`; routes for `app.example.com` attach to the wildcard listener only.
pub fn hostnames_intersect(route: &Value, listener: &Value) -> bool {
    let Some(l) = listener["hostname"].as_str() else {
        return true;
    };
    let hosts: Vec<&str> = route["spec"]["hostnames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    hosts.is_empty()
        || hosts
            .iter()
            .any(|h| host_matches(l, h) || host_matches(h, l))
}

/// The path a request for `route` uses: the first rule's first match with a PathPrefix or
/// Exact path (the default match is PathPrefix `/`, Gateway API spec HTTPRouteMatch).
pub fn route_path(route: &Value) -> String {
    route["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["matches"].as_array().cloned().unwrap_or_default())
        .find_map(|m| {
            let p = &m["path"];
            let t = p["type"].as_str().unwrap_or("PathPrefix");
            matches!(t, "PathPrefix" | "Exact")
                .then(|| p["value"].as_str().unwrap_or("/").to_string())
        })
        .unwrap_or_else(|| "/".into())
}

/// The Gateway's IP addresses from status.addresses (type IPAddress or none).
pub fn gateway_addresses(gw: &Value) -> Vec<IpAddr> {
    gw["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["type"].as_str().is_none_or(|t| t == "IPAddress"))
        .filter_map(|a| a["value"].as_str()?.parse().ok())
        .collect()
}

fn url(scheme: &str, host: &str, port: i64, path: &str) -> String {
    let default = (scheme == "http" && port == 80) || (scheme == "https" && port == 443);
    let host = match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => host.to_string(),
    };
    if default {
        format!("{scheme}://{host}{path}")
    } else {
        format!("{scheme}://{host}:{port}{path}")
    }
}

/// The hosts one (listener, route) pair is requested with: the route's concrete hostnames the
/// listener accepts, else the listener's concrete hostname, else (neither sets one) the address.
fn hosts_for(listener: &Value, route: Option<&Value>, address: IpAddr) -> Vec<String> {
    let lh = listener["hostname"].as_str();
    let route_hosts: Vec<&str> = route
        .map(|r| {
            r["spec"]["hostnames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect()
        })
        .unwrap_or_default();
    if !route_hosts.is_empty() {
        return route_hosts
            .into_iter()
            .filter(|h| !h.starts_with('*') && lh.is_none_or(|l| host_matches(l, h)))
            .map(str::to_string)
            .collect();
    }
    match lh {
        Some(l) if l.starts_with('*') => vec![],
        Some(l) => vec![l.to_string()],
        None => vec![address.to_string()],
    }
}

/// Plans the requests and lookups for `gw` from its spec, status and the HTTPRoutes that
/// attach to it. Pure.
pub fn plan(gw: &Value, routes: &[Value]) -> GatewayPlan {
    let object = object_ref("Gateway", gw);
    let info = |field: &str, msg: String| Finding::new("probe", &object, field, Level::Info, msg);
    let mut p = GatewayPlan {
        addresses: gateway_addresses(gw),
        ..Default::default()
    };
    let Some(&address) = p.addresses.first() else {
        p.skipped.push(info(
            "status.addresses",
            "not probed: the Gateway has no IP address in status.addresses".into(),
        ));
        return p;
    };
    for l in gw["spec"]["listeners"].as_array().into_iter().flatten() {
        let name = s(l, "name");
        let scheme = match s(l, "protocol") {
            "HTTP" => "http",
            "HTTPS" => "https",
            other => {
                p.skipped.push(info(
                    &format!("spec.listeners[{name}]"),
                    format!(
                        "listener {name}: protocol {other} is not requested (HTTP and HTTPS only)"
                    ),
                ));
                continue;
            }
        };
        let port = l["port"].as_i64().unwrap_or(0);
        let attached: Vec<&Value> = routes
            .iter()
            .filter(|r| attaches(r, gw, l) && hostnames_intersect(r, l))
            .collect();
        let pairs: Vec<Option<&Value>> = if attached.is_empty() {
            vec![None]
        } else {
            attached.into_iter().map(Some).collect()
        };
        for route in pairs {
            let hosts = hosts_for(l, route, address);
            if hosts.is_empty() {
                p.skipped.push(info(
                    &format!("spec.listeners[{name}].hostname"),
                    format!(
                        "listener {name}{}: only wildcard hostnames, no concrete name to request",
                        route
                            .map(|r| format!(", {}", object_ref("HTTPRoute", r)))
                            .unwrap_or_default()
                    ),
                ));
            }
            let path = route.map(route_path).unwrap_or_else(|| "/".into());
            for h in hosts {
                if h.parse::<IpAddr>().is_err() && !p.hostnames.contains(&h) {
                    p.hostnames.push(h.clone());
                }
                let Ok(request) = HttpRequest::new(&url(scheme, &h, port, &path), Some(address))
                else {
                    continue;
                };
                if p.requests.len() < MAX_REQUESTS
                    && !p.requests.iter().any(|q| q.request == request)
                {
                    p.requests.push(Planned {
                        listener: name.to_string(),
                        route: route.map(|r| object_ref("HTTPRoute", r)),
                        request,
                    });
                }
            }
        }
    }
    p
}

/// One hostname as a pod resolves it, against the Gateway's addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsCheck {
    /// The hostname.
    pub host: String,
    /// What the pod's libc resolved it to (getaddrinfo order).
    pub pod_addresses: Vec<IpAddr>,
    /// True when one of them is a Gateway address.
    pub matches: bool,
    /// The CoreDNS plugin that answered and its detail (podresolve's Corefile explanation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

/// The `--probe` results by Gateway (`gateway/NS/NAME`); empty without `--probe`.
pub type Probes = std::collections::BTreeMap<String, GatewayProbe>;

/// What `--probe` found for one Gateway (in the machine output).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayProbe {
    /// The plan.
    pub plan: GatewayPlan,
    /// One result per planned request, in order.
    pub results: Vec<HttpResult>,
    /// One per hostname.
    pub dns: Vec<DnsCheck>,
}

/// True when a result shows the route (or, without one, the data plane) serving.
fn answered_well(p: &Planned, r: &HttpResult) -> bool {
    // A listener with no hostname and no route is requested at the address itself: over HTTPS
    // no certificate names an IP address, so a name mismatch is what any client would get by
    // IP, not a defect; the data plane answered if the retry with -k did (an HTTPS listener
    // without hostname on public fleets: onedr0p/home-ops envoy-internal).
    let by_address = cluster_loop::probe::http::url_parts(&p.request.url)
        .is_ok_and(|u| u.host.parse::<IpAddr>().is_ok());
    match (r.outcome, r.code) {
        (HttpOutcome::TlsRefused, _)
            if by_address
                && p.route.is_none()
                && r.tls_problem == Some(cluster_loop::probe::http::TlsProblem::NameMismatch) =>
        {
            r.insecure_code.is_some_and(|c| c < 500)
        }
        (HttpOutcome::Answered, Some(c)) if c >= 500 => false,
        (HttpOutcome::Answered, Some(404)) => p.route.is_none(),
        (HttpOutcome::Answered, Some(_)) => true,
        _ => false,
    }
}

fn programmed_true(gw: &Value) -> Option<String> {
    condition(&gw["status"]["conditions"], "Programmed")
        .filter(|c| c["status"] == "True")
        .map(|c| {
            format!(
                "the Gateway says Programmed=True (observedGeneration {}, reason {})",
                c["observedGeneration"],
                s(c, "reason")
            )
        })
}

/// The `probe` findings of one request.
fn request_finding(gw: &Value, p: &Planned, r: &HttpResult) -> Finding {
    let object = object_ref("Gateway", gw);
    let field = format!("spec.listeners[{}]", p.listener);
    let what = format!(
        "{}{}: {}",
        r.url,
        p.route
            .as_deref()
            .map(|x| format!(" ({x})"))
            .unwrap_or_default(),
        r.summary()
    );
    if answered_well(p, r) {
        return Finding::new("probe", &object, &field, Level::Ok, what);
    }
    if matches!(
        r.outcome,
        HttpOutcome::ToolMissing | HttpOutcome::Unfinished
    ) {
        return Finding::new(
            "probe",
            &object,
            &field,
            Level::Info,
            format!("not probed: {what}"),
        );
    }
    let claim = programmed_true(gw)
        .map(|c| format!("{c}, but a request from a pod fails: "))
        .unwrap_or_default();
    let fix = match (r.outcome, r.code) {
        (HttpOutcome::TlsRefused, _) => {
            "serve a certificate for this hostname from a CA clients trust (the listener's \
             tls.certificateRefs Secret)"
        }
        (HttpOutcome::Answered, Some(404)) => {
            "the route is not in the data plane: check the route's status.parents (Accepted, \
             ResolvedRefs) and its hostnames and path against the listener"
        }
        (HttpOutcome::Answered, _) => {
            "the data plane answers but the backend does not: check the route's backendRefs \
             Service and its endpoints"
        }
        _ => {
            "nothing answers at the Gateway's address: check the data-plane pods, the Service \
             that holds the address and the controller (a status left behind by a stopped \
             controller looks exactly like this)"
        }
    };
    Finding::new(
        "probe",
        &object,
        &field,
        Level::Finding,
        format!("{claim}{what}"),
    )
    .fix(fix)
    .source("Gateway API spec: GatewayConditionType Programmed (ready to serve traffic)")
}

/// The `dns` finding of one hostname.
fn dns_finding(gw: &Value, plan: &GatewayPlan, d: &DnsCheck) -> Finding {
    let object = object_ref("Gateway", gw);
    let field = "spec.listeners[].hostname";
    let list = |v: &[IpAddr]| {
        v.iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let by = d
        .answered_by
        .as_deref()
        .map(|a| format!(" (answered by CoreDNS {a})"))
        .unwrap_or_default();
    if d.pod_addresses.is_empty() {
        return Finding::new(
            "dns",
            &object,
            field,
            Level::Info,
            format!(
                "{} does not resolve from a pod: clients in the cluster cannot use it",
                d.host
            ),
        );
    }
    if d.matches {
        return Finding::new(
            "dns",
            &object,
            field,
            Level::Ok,
            format!(
                "{} resolves from a pod to {}{by}",
                d.host,
                list(&d.pod_addresses)
            ),
        );
    }
    Finding::new(
        "dns",
        &object,
        field,
        Level::Finding,
        format!(
            "{} resolves from a pod to {}{by}, but the Gateway's address is {}: traffic from pods \
             goes elsewhere (split horizon)",
            d.host,
            list(&d.pod_addresses),
            list(&plan.addresses)
        ),
    )
    .fix(
        "make the cluster's answer the Gateway's address: the CoreDNS hosts/template entry (or \
         the repository's GATEWAY_VIP) must equal status.addresses, or pin the address the pool \
         gives (metallb.io/loadBalancerIPs)",
    )
    .source("clusters/ README split-horizon CoreDNS; kubectl podresolve's Corefile explanation")
}

/// Judges one Gateway's probe: its request and DNS findings, and whether it was served (every
/// planned request answered well, at least one request, nothing skipped). Pure.
pub fn judge(gw: &Value, probe: &GatewayProbe) -> (Vec<Finding>, bool) {
    let mut out = probe.plan.skipped.clone();
    let mut served = !probe.plan.requests.is_empty() && probe.plan.skipped.is_empty();
    for (p, r) in probe.plan.requests.iter().zip(&probe.results) {
        let f = request_finding(gw, p, r);
        served &= f.level == Level::Ok;
        out.push(f);
    }
    for d in &probe.dns {
        let f = dns_finding(gw, &probe.plan, d);
        served &= f.level != Level::Finding;
        out.push(f);
    }
    (out, served)
}

/// The DNS checks of `hosts` from podresolve's report of the same probe log.
pub fn dns_checks(report: &podresolve::report::Report, plan: &GatewayPlan) -> Vec<DnsCheck> {
    plan.hostnames
        .iter()
        .filter_map(|h| report.hosts.iter().find(|r| &r.host == h))
        .map(|h| DnsCheck {
            host: h.host.clone(),
            pod_addresses: h.pod.addresses.clone(),
            matches: h.pod.addresses.iter().any(|a| plan.addresses.contains(a)),
            answered_by: h.coredns.iter().find(|c| c.answered).and_then(|c| {
                let e = &c.explanation;
                e.answered_by.as_ref().map(|p| {
                    format!(
                        "{p}{}: {}",
                        e.line
                            .map(|l| format!(" at Corefile line {l}"))
                            .unwrap_or_default(),
                        e.detail
                    )
                })
            }),
        })
        .collect()
}

/// Runs the probe for `gws`: one Job in the connection's namespace with every hostname and
/// request, reads CoreDNS's configuration for the explanation (podresolve's
/// `read_cluster_dns`), and returns each Gateway's [`GatewayProbe`] by `gateway/NS/NAME`.
/// `Ok(None)`: interrupted (SIGINT/SIGTERM); the probe was deleted and the line printed.
/// Requests: POST, WATCH, GET log, DELETE of the probe, 3-4 GETs of kube-system.
///
/// Errors: the probe's create, watch or log read (exit 3), a probe container that cannot
/// start (exit 1, the kubelet's reason), the deadline (exit 3).
pub async fn run(
    conn: &cluster_loop::cli::Connection,
    gws: &[&Value],
    snap: &crate::snapshot::Snapshot,
    image: &str,
    timeout: std::time::Duration,
    output: &cluster_loop::output::OutputArgs,
) -> cluster_loop::error::Result<Option<Probes>> {
    use cluster_loop::probe::lifecycle::{ProbeEnd, RequestCounter, run_probe};
    use cluster_loop::probe::{Carrier, ProbeOptions, ProbeOwner, new_run_id};
    let plans: Vec<(String, GatewayPlan)> = gws
        .iter()
        .map(|g| (object_ref("Gateway", g), plan(g, &snap.routes)))
        .collect();
    let mut hosts: Vec<String> = Vec::new();
    let mut http: Vec<HttpRequest> = Vec::new();
    for (_, p) in &plans {
        hosts.extend(
            p.hostnames
                .iter()
                .filter(|h| !hosts.contains(h))
                .cloned()
                .collect::<Vec<_>>(),
        );
        http.extend(
            p.requests
                .iter()
                .map(|r| r.request.clone())
                .filter(|r| !http.contains(r))
                .collect::<Vec<_>>(),
        );
    }
    let mut out = Probes::new();
    if hosts.is_empty() && http.is_empty() {
        for (k, p) in plans {
            out.insert(
                k,
                GatewayProbe {
                    plan: p,
                    results: vec![],
                    dns: vec![],
                },
            );
        }
        return Ok(Some(out));
    }
    let progress = cluster_loop::wait::Progress::for_output("gatewaycheck", output);
    let n = RequestCounter::default();
    let opts = ProbeOptions {
        owner: ProbeOwner::GATEWAYCHECK,
        namespace: conn.namespace.clone(),
        image: image.to_string(),
        hosts: hosts.clone(),
        tls_port: None,
        git_url: None,
        git_ref: None,
        git_secret: None,
        deadline_secs: timeout.as_secs() as i64,
        node: None,
        run_id: new_run_id(),
        source: None,
        http,
    };
    let (answered, _) = tokio::sync::watch::channel(false);
    let cluster_dns = podresolve::cluster::read_cluster_dns(conn, &n, &answered);
    let hint = format!(
        "kubectl delete jobs -n {} -l app.kubernetes.io/managed-by=kubectl-gatewaycheck",
        opts.target_namespace()
    );
    let mut signals = cluster_loop::signals::Signals::install();
    let deadline = tokio::time::Instant::now() + timeout + std::time::Duration::from_secs(15);
    let probe = run_probe(
        conn,
        &opts,
        Carrier::Job,
        deadline,
        &hint,
        &progress,
        &n,
        signals.recv(),
    );
    let ws_hosts = hosts.clone();
    let ws = tokio::task::spawn_blocking(move || {
        ws_hosts
            .iter()
            .map(|h| podresolve::workstation::resolve(h))
            .collect::<Vec<_>>()
    });
    let (end, cluster_dns) = tokio::join!(probe, cluster_dns);
    progress.finish();
    let log = match end? {
        ProbeEnd::Finished { log, .. } => log,
        ProbeEnd::Interrupted { signal, cleanup } => {
            eprintln!(
                "interrupted by {signal}: {}; nothing else was changed",
                match cleanup {
                    Ok(()) => format!("probe job {} deleted", opts.name()),
                    Err(e) => format!("probe job {} NOT deleted ({e})", opts.name()),
                }
            );
            return Ok(None);
        }
    };
    let parsed = cluster_loop::probe::parse::ProbeLog::parse(&log);
    let now = jiff::Timestamp::now();
    let parsed_hosts: Vec<podresolve::validate::Host> = hosts
        .iter()
        .filter_map(|h| podresolve::validate::parse_host(h).ok())
        .collect();
    let report = podresolve::report::build(podresolve::report::Inputs {
        log: &parsed,
        hosts: &parsed_hosts,
        cluster: &cluster_dns,
        workstation: ws.await.unwrap_or_default(),
        expect: None,
        probe: podresolve::report::ProbeInfo {
            carrier: "job".into(),
            namespace: opts.target_namespace().into(),
            name: opts.name(),
            image: image.into(),
            api_requests: n.get(),
            ..Default::default()
        },
    });
    for (k, p) in plans {
        let asked: Vec<HttpRequest> = p.requests.iter().map(|r| r.request.clone()).collect();
        let results = cluster_loop::probe::http::results(&parsed, &asked, now);
        let dns = dns_checks(&report, &p);
        out.insert(
            k,
            GatewayProbe {
                plan: p,
                results,
                dns,
            },
        );
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gw() -> Value {
        json!({"metadata": {"name": "eg", "namespace": "infra", "generation": 1},
          "spec": {"listeners": [
            {"name": "http", "protocol": "HTTP", "port": 80},
            {"name": "https", "protocol": "HTTPS", "port": 443, "hostname": "*.apps.example.dev"},
            {"name": "tcp", "protocol": "TCP", "port": 5432}]},
          "status": {"addresses": [{"type": "IPAddress", "value": "192.168.240.10"}],
            "conditions": [{"type": "Programmed", "status": "True", "reason": "Programmed",
              "observedGeneration": 1}]}})
    }

    fn route(name: &str, hosts: Value, section: Option<&str>) -> Value {
        json!({"metadata": {"name": name, "namespace": "apps"},
          "spec": {"hostnames": hosts,
            "parentRefs": [{"name": "eg", "namespace": "infra", "sectionName": section}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}]}]}})
    }

    #[test]
    fn the_plan_requests_each_listener_and_route_hostname_at_the_address() {
        let routes = vec![
            route(
                "web",
                json!(["web.apps.example.dev", "*.apps.example.dev"]),
                Some("https"),
            ),
            route("other", json!(["web.elsewhere.dev"]), Some("https")),
        ];
        let p = plan(&gw(), &routes);
        let urls: Vec<&str> = p.requests.iter().map(|r| r.request.url.as_str()).collect();
        assert_eq!(
            urls,
            ["http://192.168.240.10/", "https://web.apps.example.dev/api"]
        );
        assert!(
            p.requests
                .iter()
                .all(|r| r.request.connect == Some("192.168.240.10".parse().unwrap()))
        );
        assert_eq!(p.hostnames, ["web.apps.example.dev"]);
        // other's hostname intersects no listener's: it does not attach (no request, nothing
        // skipped); the TCP listener is said not requested.
        assert_eq!(p.skipped.len(), 1, "{:?}", p.skipped);
        assert!(p.skipped[0].message.contains("protocol TCP"));
        let none = plan(
            &json!({"metadata": {"name": "x", "namespace": "n"}, "spec": {}}),
            &[],
        );
        assert!(none.requests.is_empty() && none.skipped[0].message.contains("no IP address"));
    }

    /// A public fleet's shape (sulibot/home-ops gateway-internal): an exact listener for the
    /// apex and a wildcard one, routes without sectionName for sub-domains. Each route attaches
    /// to the wildcard listener only; the apex listener is requested on its own name. Before,
    /// every route was also paired with the apex listener and skipped as "only wildcard
    /// hostnames", so the Gateway could never be `serving`.
    #[test]
    fn a_route_attaches_only_to_listeners_whose_hostname_it_intersects() {
        let g = json!({"metadata": {"name": "gw", "namespace": "network"},
          "spec": {"listeners": [
            {"name": "apex", "protocol": "HTTPS", "port": 443, "hostname": "example.com"},
            {"name": "wild", "protocol": "HTTPS", "port": 443, "hostname": "*.example.com"}]},
          "status": {"addresses": [{"type": "IPAddress", "value": "192.0.2.1"}]}});
        let r = json!({"metadata": {"name": "grafana", "namespace": "default"},
          "spec": {"hostnames": ["grafana.example.com"],
            "parentRefs": [{"name": "gw", "namespace": "network"}]}});
        let p = plan(&g, &[r]);
        let got: Vec<(&str, Option<&str>, &str)> = p
            .requests
            .iter()
            .map(|q| {
                (
                    q.listener.as_str(),
                    q.route.as_deref(),
                    q.request.url.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("apex", None, "https://example.com/"),
                (
                    "wild",
                    Some("httproute/default/grafana"),
                    "https://grafana.example.com/"
                )
            ]
        );
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let l = |h: &str| json!({"hostname": h});
        let rt = |h: Value| json!({"spec": {"hostnames": h}});
        assert!(hostnames_intersect(
            &rt(json!(["*.example.com"])),
            &l("a.example.com")
        ));
        assert!(hostnames_intersect(
            &rt(json!(["*.example.com"])),
            &l("*.a.example.com")
        ));
        assert!(hostnames_intersect(&rt(json!([])), &l("example.com")));
        assert!(hostnames_intersect(
            &rt(json!(["a.example.com"])),
            &json!({})
        ));
        assert!(!hostnames_intersect(
            &rt(json!(["a.example.org"])),
            &l("*.example.com")
        ));
    }

    fn result(url: &str, outcome: HttpOutcome, code: Option<u16>) -> HttpResult {
        HttpResult {
            url: url.into(),
            outcome,
            code,
            http_version: None,
            remote: None,
            total_ms: Some(3.0),
            connect_ms: None,
            tls_ms: None,
            tls_problem: None,
            insecure_code: None,
            error: (outcome != HttpOutcome::Answered).then(|| "Failed to connect".into()),
            certificate: None,
            rc: Some(if outcome == HttpOutcome::Answered {
                0
            } else {
                7
            }),
        }
    }

    /// An HTTPS listener without hostname and no route (onedr0p/home-ops envoy-internal's
    /// shape) is requested at the address: the certificate cannot name it, so a name mismatch
    /// with an answer behind it (-k) is the data plane answering, not a finding. With a route
    /// (a name a client uses) the same mismatch stays a finding.
    #[test]
    fn a_name_mismatch_at_the_bare_address_is_not_a_finding() {
        let planned = |route: Option<&str>, url: &str| Planned {
            listener: "https".into(),
            route: route.map(str::to_string),
            request: HttpRequest::new(url, Some("192.0.2.1".parse().unwrap())).unwrap(),
        };
        let mut r = result("https://192.0.2.1/", HttpOutcome::TlsRefused, None);
        r.tls_problem = Some(cluster_loop::probe::http::TlsProblem::NameMismatch);
        r.insecure_code = Some(404);
        assert!(answered_well(&planned(None, "https://192.0.2.1/"), &r));
        r.insecure_code = None;
        assert!(!answered_well(&planned(None, "https://192.0.2.1/"), &r));
        r.insecure_code = Some(200);
        assert!(!answered_well(
            &planned(Some("httproute/a/b"), "https://web.example.dev/"),
            &r
        ));
        r.tls_problem = Some(cluster_loop::probe::http::TlsProblem::Expired);
        assert!(!answered_well(&planned(None, "https://192.0.2.1/"), &r));
    }

    #[test]
    fn programmed_while_requests_fail_is_the_finding_and_never_serving() {
        let g = gw();
        let routes = vec![route("web", json!(["web.apps.example.dev"]), Some("https"))];
        let p = plan(&g, &routes);
        let failing = GatewayProbe {
            results: p
                .requests
                .iter()
                .map(|r| result(&r.request.url, HttpOutcome::NoAnswer, None))
                .collect(),
            dns: vec![],
            plan: p.clone(),
        };
        let (f, served) = judge(&g, &failing);
        assert!(!served);
        let bad: Vec<&Finding> = f.iter().filter(|f| f.level == Level::Finding).collect();
        assert_eq!(bad.len(), 2);
        assert!(
            bad[0]
                .message
                .starts_with("the Gateway says Programmed=True"),
            "{}",
            bad[0].message
        );
        // A 404 for the route's own host and path is a finding; for the bare listener it is an
        // answer of the data plane.
        let mixed = GatewayProbe {
            results: vec![
                result("http://192.168.240.10/", HttpOutcome::Answered, Some(404)),
                result(
                    "https://web.apps.example.dev/api",
                    HttpOutcome::Answered,
                    Some(404),
                ),
            ],
            dns: vec![DnsCheck {
                host: "web.apps.example.dev".into(),
                pod_addresses: vec!["192.168.2.20".parse().unwrap()],
                matches: false,
                answered_by: Some("hosts at Corefile line 4: 192.168.2.20".into()),
            }],
            plan: p,
        };
        let (f, served) = judge(&g, &mixed);
        assert!(!served);
        let levels: Vec<(&str, Level)> = f.iter().map(|f| (f.rule, f.level)).collect();
        assert!(levels.contains(&("probe", Level::Ok)));
        assert!(levels.contains(&("probe", Level::Finding)));
        let dns = f.iter().find(|f| f.rule == "dns").unwrap();
        assert_eq!(dns.level, Level::Finding);
        assert!(dns.message.contains("split horizon") && dns.message.contains("192.168.240.10"));
    }
}
