//! What links 5-7 (DNS, Gateway, HTTP(S)) share, read once per round ([`Shared::round`]): the
//! hosts to check, the Gateway API snapshot (`kubectl gatewaycheck`'s, as a library) and one
//! probe pod that resolves every host and sends every request
//! (`cluster_loop::probe::http`, podresolve's engine for the DNS explanation).
//!
//! Hosts ([`targets`]): the `HOST|URL` arguments; with none, the applied inventory's (the
//! in-scope Kustomizations' `status.inventory`): each concrete hostname of an HTTPRoute
//! (`spec.hostnames`), of a Gateway listener (`spec.listeners[].hostname`) and of an Ingress
//! rule (`spec.rules[].host`). Each host is tied to what should serve it: the Gateway an
//! HTTPRoute names in `spec.parentRefs` or whose listener has the hostname (its
//! `status.addresses` is the address the name must resolve to), else the Ingress (its
//! `status.loadBalancer.ingress`). The request is `https://HOST/PATH` when an HTTPS listener
//! or an Ingress `spec.tls` entry covers the host, else `http://`; PATH is the route's first
//! PathPrefix/Exact path (`/` otherwise); a URL argument is requested as given.
//!
//! The probe pod runs in the session's namespace (nicolaka/netshoot: getent, nslookup, curl,
//! openssl), once per round, and is deleted at the end (also on Ctrl-C: it holds
//! [`Context::probes`] and passes [`Context::interrupt`]). Its requests go as a client's do:
//! the name resolved by the pod's resolver, no address forced. Requests: the Gateway API
//! lists of gatewaycheck's snapshot (when the inventory or a host needs a Gateway), one list
//! of Ingresses (when the inventory holds one, or for HOST arguments), then the probe's POST,
//! WATCH, GET log and DELETE and 3-4 GETs of kube-system for the Corefile.

use std::net::IpAddr;
use std::sync::Arc;

use cluster_loop::error::{Error, Result};
use cluster_loop::probe::http::{HttpRequest, HttpResult};
use jiff::Timestamp;
use kube::api::ListParams;
use serde_json::Value;
use unstick::obj;

use super::Context;
use crate::session::Target;

/// One host to check and what should serve it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTarget {
    /// The host name (or IP address) as a client writes it.
    pub host: String,
    /// The request for the HTTP(S) link.
    pub url: String,
    /// Where the host came from: `argument`, `HTTPRoute/NS/NAME`, `Gateway/NS/NAME`,
    /// `Ingress/NS/NAME`.
    pub from: String,
    /// The Gateway that serves it, `(namespace, name)`.
    pub gateway: Option<(String, String)>,
    /// The Ingress that serves it, `(namespace, name)` (when no Gateway does).
    pub ingress: Option<(String, String)>,
    /// The addresses the name must resolve to (the Gateway's status.addresses or the
    /// Ingress's load balancer), empty when nothing known serves it.
    pub expected: Vec<IpAddr>,
    /// The objects that decide how the host is served, `(Kind, namespace, name)`: the
    /// HTTPRoute that names it (also when its Gateway was not read), its Gateway or the
    /// Ingress, and what their rules send to (a route's `backendRefs`, an Ingress's
    /// `backend.service`). Empty when nothing known serves it. [`HostTarget::applied_by`] ties the host's links to the
    /// Kustomizations that apply these.
    pub serving: Vec<(String, String, String)>,
}

impl HostTarget {
    /// Keys (`namespace/name`) of the in-scope Kustomizations whose inventory holds one of
    /// [`HostTarget::serving`]: while one of them applies a newer revision, a broken DNS,
    /// Gateway or HTTP(S) verdict about this host is about objects being replaced
    /// ([`crate::chain::settle`]). When nothing known serves the host (a HOST argument no
    /// route, listener or Ingress names yet), every in-scope Kustomization: one still applying
    /// a newer revision may be the one that brings its route.
    pub fn applied_by(&self, facts: &crate::facts::Facts) -> Vec<String> {
        if self.serving.is_empty() {
            return facts
                .kustomizations
                .iter()
                .map(unstick::diagnose::key_of)
                .collect();
        }
        self.appliers_of(facts, |_| true)
    }

    /// Keys of the in-scope Kustomizations whose inventory holds one of the
    /// [`HostTarget::serving`] objects whose kind `keep` takes, each once, in order.
    pub fn appliers_of(
        &self,
        facts: &crate::facts::Facts,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (kind, ns, name) in self.serving.iter().filter(|(k, _, _)| keep(k)) {
            for k in facts.appliers(kind, ns, name) {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        out
    }
}

/// The objects a route's rules send to (`spec.rules[].backendRefs[]`: kind Service by
/// default, or another kind such as Envoy Gateway's Backend, seen on public fleets; namespace
/// defaults to the route's), `(Kind, ns, name)`.
fn route_backends(r: &Value) -> Vec<(String, String, String)> {
    obj::arr(r, &["spec", "rules"])
        .iter()
        .flat_map(|rule| rule["backendRefs"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| {
            let ns = b["namespace"].as_str().unwrap_or(obj::namespace(r));
            let kind = b["kind"].as_str().unwrap_or("Service");
            Some((kind.into(), ns.to_string(), b["name"].as_str()?.to_string()))
        })
        .collect()
}

/// A route and what it sends to, `(Kind, ns, name)`: what serves a host the route names.
fn route_serving(r: &Value) -> Vec<(String, String, String)> {
    std::iter::once((
        "HTTPRoute".to_string(),
        obj::namespace(r).to_string(),
        obj::name(r).to_string(),
    ))
    .chain(route_backends(r))
    .collect()
}

/// The Services an Ingress sends to (`spec.rules[].http.paths[].backend.service`,
/// `spec.defaultBackend.service`), in its namespace, `(Kind, ns, name)`.
fn ingress_backends(ing: &Value) -> Vec<(String, String, String)> {
    let paths = obj::arr(ing, &["spec", "rules"])
        .iter()
        .flat_map(|r| r["http"]["paths"].as_array().cloned().unwrap_or_default())
        .map(|p| p["backend"]["service"]["name"].clone());
    paths
        .chain(std::iter::once(
            ing["spec"]["defaultBackend"]["service"]["name"].clone(),
        ))
        .filter_map(|n| n.as_str().map(str::to_string))
        .map(|n| ("Service".into(), obj::namespace(ing).to_string(), n))
        .collect()
}

/// What the probe pod saw.
#[derive(Debug, Clone)]
pub enum ProbeSeen {
    /// Nothing to probe.
    NotRun,
    /// The pod ran: per host its DNS report, per target its request's result (same order as
    /// [`Round::targets`]).
    Ran {
        /// podresolve's report of the hosts.
        dns: Box<podresolve::report::Report>,
        /// One result per target.
        http: Vec<HttpResult>,
    },
    /// The probe could not run (create refused, image not pulled, deadline): why.
    Failed(String),
}

/// One round's network reads.
#[derive(Debug)]
pub struct Round {
    /// The round's `Facts::now` (the key of the cache).
    pub at: Timestamp,
    /// The hosts, in argument or inventory order.
    pub targets: Vec<HostTarget>,
    /// gatewaycheck's snapshot, when the Gateway API is served and a host needs it.
    pub gateways: Option<gatewaycheck::snapshot::Snapshot>,
    /// The probe's result.
    pub probe: ProbeSeen,
    /// What was not read and why.
    pub notes: Vec<String>,
}

/// The round shared by links 5-7: the first of them to run reads it, the others reuse it.
#[derive(Default)]
pub struct Shared(tokio::sync::Mutex<Option<Arc<Round>>>);

impl Shared {
    /// This round's network reads (read on first use in a round, keyed by `Facts::now`).
    /// Errors: API errors of the lists (exit 3). A probe that cannot run is
    /// [`ProbeSeen::Failed`], judged `unknown` by the links.
    pub async fn round(&self, cx: &Context<'_>) -> Result<Arc<Round>> {
        let mut slot = self.0.lock().await;
        if let Some(r) = slot.as_ref().filter(|r| r.at == cx.facts.now) {
            return Ok(r.clone());
        }
        let r = Arc::new(read(cx).await?);
        *slot = Some(r.clone());
        Ok(r)
    }
}

/// The inventory entries of `group`/`kind` of the in-scope Kustomizations, `(ns, name)`.
fn inventory_of(cx: &Context<'_>, group: &str, kind: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for ks in &cx.facts.kustomizations {
        for e in obj::arr(ks, &["status", "inventory", "entries"]) {
            let Some((g, k, ns, name)) =
                obj::s(e, &["id"]).and_then(unstick::diagnose::parse_inventory_id)
            else {
                continue;
            };
            if g == group && k == kind && !out.contains(&(ns.clone(), name.clone())) {
                out.push((ns, name));
            }
        }
    }
    out
}

fn key(o: &Value) -> (String, String) {
    (obj::namespace(o).to_string(), obj::name(o).to_string())
}

fn concrete(h: &str) -> bool {
    !h.is_empty() && !h.contains('*')
}

/// True when listener `l` takes `host`: no hostname, the same name, or a wildcard matching it.
fn takes(l: &Value, host: &str) -> bool {
    l["hostname"]
        .as_str()
        .is_none_or(|p| gatewaycheck::probe::host_matches(p, host))
}

fn url_for(https: bool, host: &str, path: &str) -> String {
    let h = match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => host.to_string(),
    };
    format!("{}://{h}{path}", if https { "https" } else { "http" })
}

/// A target served by Gateway `gw`: `https://` when an HTTPS listener takes the host (and,
/// for a route, the route attaches to it: parentRef sectionName/port, hostnames), else
/// `http://`. A client that may use either is asked over HTTPS, where the certificate is
/// checked (seen on public fleets: listeners `http` and `https` without hostnames, routes on
/// both and an https-redirect on `http`; the first matching listener, `http`, was picked).
fn via_gateway(
    host: &str,
    path: &str,
    from: String,
    gw: &Value,
    route: Option<&Value>,
) -> HostTarget {
    let https = gw["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|l| {
            l["protocol"] == "HTTPS"
                && takes(l, host)
                && route.is_none_or(|r| {
                    gatewaycheck::probe::attaches(r, gw, l)
                        && gatewaycheck::probe::hostnames_intersect(r, l)
                })
        });
    let (ns, name) = key(gw);
    let mut serving = vec![("Gateway".to_string(), ns, name)];
    if let Some(r) = route {
        serving.extend(route_serving(r));
    }
    HostTarget {
        host: host.to_string(),
        url: url_for(https, host, path),
        from,
        gateway: Some(key(gw)),
        ingress: None,
        expected: gatewaycheck::probe::gateway_addresses(gw),
        serving,
    }
}

/// A target served by Ingress `ing` (`spec.tls[].hosts` decides the scheme).
fn via_ingress(host: &str, ing: &Value) -> HostTarget {
    let https = ing["spec"]["tls"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["hosts"].as_array().cloned().unwrap_or_default())
        .any(|h| h == host);
    let path = ing["spec"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["host"] == host)
        .flat_map(|r| r["http"]["paths"].as_array().cloned().unwrap_or_default())
        .find(|p| matches!(p["pathType"].as_str(), Some("Prefix" | "Exact")))
        .and_then(|p| p["path"].as_str().map(str::to_string))
        .unwrap_or_else(|| "/".into());
    HostTarget {
        host: host.to_string(),
        url: url_for(https, host, &path),
        from: format!("Ingress/{}/{}", obj::namespace(ing), obj::name(ing)),
        gateway: None,
        ingress: Some(key(ing)),
        expected: obj::arr(ing, &["status", "loadBalancer", "ingress"])
            .iter()
            .filter_map(|i| i["ip"].as_str()?.parse().ok())
            .collect(),
        serving: std::iter::once((
            "Ingress".to_string(),
            obj::namespace(ing).to_string(),
            obj::name(ing).to_string(),
        ))
        .chain(ingress_backends(ing))
        .collect(),
    }
}

/// What serves `host` among the read objects: a route naming it (its first Gateway
/// parentRef), a Gateway listener with it, an Ingress rule with it.
fn serve(
    host: &str,
    path: Option<&str>,
    from: String,
    gws: &[Value],
    routes: &[Value],
    ings: &[Value],
) -> HostTarget {
    let find_gw = |ns: &str, name: &str| {
        gws.iter()
            .find(|g| obj::namespace(g) == ns && obj::name(g) == name)
    };
    // A route that names the host although its Gateway is not among the read objects (a
    // Gateway made by a Helm chart's values, in a namespace not read): it still serves the
    // host (public fleets: 11 of 67 hosts).
    let mut naming_route = None;
    for r in routes {
        let named = r["spec"]["hostnames"]
            .as_array()
            .is_some_and(|hs| hs.iter().any(|h| h == host));
        if named && naming_route.is_none() {
            naming_route = Some(r);
        }
        let parent = r["spec"]["parentRefs"].as_array().and_then(|ps| {
            ps.iter().find_map(|p| {
                let ns = p["namespace"].as_str().unwrap_or(obj::namespace(r));
                find_gw(ns, p["name"].as_str()?)
            })
        });
        if let (true, Some(gw)) = (named, parent) {
            let p = path
                .map(str::to_string)
                .unwrap_or_else(|| gatewaycheck::probe::route_path(r));
            return via_gateway(host, &p, from, gw, Some(r));
        }
    }
    if let Some(gw) = gws.iter().find(|g| {
        g["spec"]["listeners"]
            .as_array()
            .is_some_and(|ls| ls.iter().any(|l| l["hostname"] == host))
    }) {
        return via_gateway(host, path.unwrap_or("/"), from, gw, None);
    }
    if let Some(ing) = ings.iter().find(|i| {
        obj::arr(i, &["spec", "rules"])
            .iter()
            .any(|r| r["host"] == host)
    }) {
        let mut t = via_ingress(host, ing);
        if from == "argument" {
            t.from = from;
        }
        return t;
    }
    HostTarget {
        host: host.to_string(),
        url: url_for(false, host, path.unwrap_or("/")),
        from,
        gateway: None,
        ingress: None,
        expected: Vec::new(),
        serving: naming_route.map(route_serving).unwrap_or_default(),
    }
}

/// The hosts of the round: the arguments, else the inventory's (module docs). Pure over the
/// read objects.
pub fn targets(
    args: &[Target],
    inventory_routes: &[Value],
    inventory_gateways: &[Value],
    inventory_ingresses: &[Value],
    gws: &[Value],
    routes: &[Value],
    ings: &[Value],
) -> Vec<HostTarget> {
    let mut out: Vec<HostTarget> = Vec::new();
    fn push(out: &mut Vec<HostTarget>, t: HostTarget) {
        if !out.iter().any(|o| o.url == t.url) {
            out.push(t);
        }
    }
    if !args.is_empty() {
        for a in args {
            let mut t = match a {
                Target::Host(h) => serve(h, None, "argument".into(), gws, routes, ings),
                Target::Url(u) => serve(
                    a.host(),
                    Some(u.path()),
                    "argument".into(),
                    gws,
                    routes,
                    ings,
                ),
            };
            if let Target::Url(u) = a {
                t.url = u.to_string();
            }
            push(&mut out, t);
        }
        return out;
    }
    for r in inventory_routes {
        let from = format!("HTTPRoute/{}/{}", obj::namespace(r), obj::name(r));
        for h in r["spec"]["hostnames"].as_array().into_iter().flatten() {
            if let Some(h) = h.as_str().filter(|h| concrete(h)) {
                push(
                    &mut out,
                    serve(h, None, from.clone(), gws, std::slice::from_ref(r), &[]),
                );
            }
        }
    }
    for g in inventory_gateways {
        let from = format!("Gateway/{}/{}", obj::namespace(g), obj::name(g));
        for l in g["spec"]["listeners"].as_array().into_iter().flatten() {
            if let Some(h) = l["hostname"].as_str().filter(|h| concrete(h))
                && !out.iter().any(|o| o.host == h)
            {
                push(&mut out, via_gateway(h, "/", from.clone(), g, None));
            }
        }
    }
    // An Ingress host is served by whatever serves it when named (a route or listener that
    // claims it comes first, as for a HOST argument): the same host gets the same verdict
    // with or without naming it.
    for i in inventory_ingresses {
        let from = format!("Ingress/{}/{}", obj::namespace(i), obj::name(i));
        for r in obj::arr(i, &["spec", "rules"]) {
            if let Some(h) = r["host"].as_str().filter(|h| concrete(h))
                && !out.iter().any(|o| o.host == h)
            {
                // `ings` holds `i` (the inventory's are picked from it), so `serve` finds
                // at least this Ingress.
                push(&mut out, serve(h, None, from.clone(), gws, routes, ings));
            }
        }
    }
    out
}

fn pick(all: &[Value], keys: &[(String, String)]) -> Vec<Value> {
    all.iter()
        .filter(|o| keys.contains(&key(o)))
        .cloned()
        .collect()
}

/// Reads the round (see the module docs).
async fn read(cx: &Context<'_>) -> Result<Round> {
    let s = cx.session;
    let args = &s.opts.targets;
    let inv_routes = inventory_of(cx, gatewaycheck::snapshot::GATEWAY_GROUP, "HTTPRoute");
    let inv_gws = inventory_of(cx, gatewaycheck::snapshot::GATEWAY_GROUP, "Gateway");
    let inv_ings = inventory_of(cx, "networking.k8s.io", "Ingress");
    let mut notes = Vec::new();
    let gateways = if !args.is_empty()
        || !inv_routes.is_empty()
        || !inv_gws.is_empty()
        || !inv_ings.is_empty()
    {
        let ns = s
            .namespace
            .clone()
            .unwrap_or_else(|| s.conn.namespace.clone());
        match gatewaycheck::snapshot::take(&s.conn, &ns).await {
            Ok(g) => Some(g),
            // The inventory holds Gateway API objects: the API must be there to judge them.
            Err(e)
                if e.exit_code() == cluster_loop::error::EXIT_CLUSTER
                    && args.is_empty()
                    && (!inv_routes.is_empty() || !inv_gws.is_empty()) =>
            {
                return Err(e);
            }
            Err(e) => {
                notes.push(format!("Gateway API not read: {e}"));
                None
            }
        }
    } else {
        None
    };
    let ings = if !args.is_empty() || !inv_ings.is_empty() {
        let api: kube::Api<k8s_openapi::api::networking::v1::Ingress> =
            kube::Api::all(s.conn.client.clone());
        s.count(1);
        match api.list(&ListParams::default()).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter_map(|i| serde_json::to_value(i).ok())
                .collect(),
            Err(e) => {
                notes.push(format!("Ingresses not read: {e}"));
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let (gws, routes) = gateways
        .as_ref()
        .map(|g| (g.gateways.clone(), g.routes.clone()))
        .unwrap_or_default();
    let targets = targets(
        args,
        &pick(&routes, &inv_routes),
        &pick(&gws, &inv_gws),
        &pick(&ings, &inv_ings),
        &gws,
        &routes,
        &ings,
    );
    let probe = if targets.is_empty() {
        ProbeSeen::NotRun
    } else {
        probe(cx, &targets).await?
    };
    Ok(Round {
        at: cx.facts.now,
        targets,
        gateways,
        probe,
        notes,
    })
}

/// Runs the one probe pod of the round: every host's lookups and every target's request.
async fn probe(cx: &Context<'_>, targets: &[HostTarget]) -> Result<ProbeSeen> {
    use cluster_loop::probe::lifecycle::{ProbeEnd, RequestCounter, run_probe};
    use cluster_loop::probe::{Carrier, ProbeOptions, ProbeOwner, TOOLS_IMAGE, new_run_id};
    let s = cx.session;
    let mut hosts: Vec<String> = Vec::new();
    for t in targets {
        if t.host.parse::<IpAddr>().is_err() && !hosts.contains(&t.host) {
            hosts.push(t.host.clone());
        }
    }
    let http: Vec<HttpRequest> = targets
        .iter()
        .filter_map(|t| HttpRequest::new(&t.url, None).ok())
        .collect();
    let ns = s
        .namespace
        .clone()
        .unwrap_or_else(|| s.conn.namespace.clone());
    let opts = ProbeOptions {
        owner: ProbeOwner::GITOPS_VERIFY,
        namespace: ns.clone(),
        image: TOOLS_IMAGE.into(),
        hosts: hosts.clone(),
        tls_port: None,
        git_url: None,
        git_ref: None,
        git_secret: None,
        deadline_secs: s.opts.probe_timeout.as_secs().max(5) as i64,
        node: None,
        run_id: new_run_id(),
        source: None,
        http: http.clone(),
    };
    let n = RequestCounter::default();
    let (answered, _) = tokio::sync::watch::channel(false);
    let hint = format!(
        "kubectl delete jobs -n {ns} -l app.kubernetes.io/managed-by={}",
        opts.owner.managed_by()
    );
    let progress = cluster_loop::wait::Progress::hidden();
    let deadline =
        tokio::time::Instant::now() + s.opts.probe_timeout + std::time::Duration::from_secs(15);
    let guard = cx.probes.read().await;
    let interrupt = async {
        cx.interrupt.wait().await;
        "SIGINT"
    };
    let (end, cluster_dns) = tokio::join!(
        run_probe(
            &s.conn,
            &opts,
            Carrier::Job,
            deadline,
            &hint,
            &progress,
            &n,
            interrupt
        ),
        podresolve::cluster::read_cluster_dns(&s.conn, &n, &answered)
    );
    drop(guard);
    s.count(n.get() as usize);
    let log = match end {
        Ok(ProbeEnd::Finished { log, .. }) => log,
        Ok(ProbeEnd::Interrupted { signal, .. }) => {
            return Ok(ProbeSeen::Failed(format!("interrupted by {signal}")));
        }
        Err(Error::Finding(m)) => return Ok(ProbeSeen::Failed(m)),
        Err(e)
            if e.exit_code() == cluster_loop::error::EXIT_CLUSTER && e.status_code().is_none() =>
        {
            return Ok(ProbeSeen::Failed(e.to_string()));
        }
        Err(e) => return Err(e),
    };
    let parsed = cluster_loop::probe::parse::ProbeLog::parse(&log);
    let parsed_hosts: Vec<podresolve::validate::Host> = hosts
        .iter()
        .filter_map(|h| podresolve::validate::parse_host(h).ok())
        .collect();
    let no_ws = podresolve::workstation::WorkstationAnswer {
        addresses: Vec::new(),
        error: Some("not asked: gitops verify judges the pod plane only".into()),
        from_hosts_file: None,
    };
    let dns = podresolve::report::build(podresolve::report::Inputs {
        log: &parsed,
        hosts: &parsed_hosts,
        cluster: &cluster_dns,
        workstation: vec![no_ws; parsed_hosts.len()],
        expect: None,
        probe: podresolve::report::ProbeInfo {
            carrier: "job".into(),
            namespace: ns,
            name: opts.name(),
            image: TOOLS_IMAGE.into(),
            api_requests: n.get(),
            ..Default::default()
        },
    });
    let results = cluster_loop::probe::http::results(&parsed, &http, Timestamp::now());
    Ok(ProbeSeen::Ran {
        dns: Box::new(dns),
        http: results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Public fleets' shapes (onedr0p/home-ops, bjw-s-labs/home-ops: listeners `http` and
    /// `https` without hostnames, routes without sectionName; rcdailey/home-ops: wildcard
    /// listeners, routes with `sectionName: https`): the host is requested over HTTPS, where
    /// the certificate a client gets is checked. A route bound to the HTTP listener only stays
    /// `http://`.
    #[test]
    fn a_host_an_https_listener_takes_for_its_route_is_requested_over_https() {
        let gw = json!({"metadata": {"name": "envoy-external", "namespace": "network"},
          "spec": {"listeners": [
            {"name": "http", "protocol": "HTTP", "port": 80},
            {"name": "https", "protocol": "HTTPS", "port": 443}]}});
        let route = |name: &str, section: Option<&str>| {
            json!({
          "metadata": {"name": name, "namespace": "default"},
          "spec": {"hostnames": [format!("{name}.example.dev")],
            "parentRefs": [{"name": "envoy-external", "namespace": "network", "sectionName": section}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/hook/"}}]}]}})
        };
        let routes = vec![
            route("webhook", None),
            route("plain", Some("http")),
            route("tls", Some("https")),
        ];
        let t = targets(
            &[],
            &routes,
            &[],
            &[],
            std::slice::from_ref(&gw),
            &routes,
            &[],
        );
        let urls: Vec<&str> = t.iter().map(|x| x.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "https://webhook.example.dev/hook/",
                "http://plain.example.dev/hook/",
                "https://tls.example.dev/hook/"
            ]
        );
        assert!(
            t.iter()
                .all(|x| x.gateway == Some(("network".into(), "envoy-external".into())))
        );
    }
    /// Links 5-7 are tied to the Kustomizations that apply what serves a host: the route, its
    /// Gateway and what its `backendRefs` name (a Service by default, or another kind such as
    /// Envoy Gateway's Backend; namespace defaulting to the route's), or the Ingress and its
    /// backend Services; the naming route even when its Gateway was not read; nothing for a
    /// host nothing known serves (then every in-scope Kustomization holds it,
    /// `HostTarget::applied_by`).
    #[test]
    fn a_host_is_tied_to_its_route_gateway_ingress_and_backend_services() {
        let gw = json!({"metadata": {"name": "web", "namespace": "infra"},
          "spec": {"listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}});
        let route = json!({"metadata": {"name": "app", "namespace": "apps"},
          "spec": {"hostnames": ["app.example.dev"],
            "parentRefs": [{"name": "web", "namespace": "infra"}],
            "rules": [{"backendRefs": [
                {"name": "app", "port": 8080},
                {"name": "shared", "namespace": "other", "port": 80},
                {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": "ext"}]}]}});
        let ing = json!({"metadata": {"name": "legacy", "namespace": "apps"},
          "spec": {"rules": [{"host": "legacy.example.dev", "http": {"paths": [
              {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "legacy", "port": {"number": 80}}}}]}}],
            "defaultBackend": {"service": {"name": "fallback", "port": {"number": 80}}}}});
        let gws = [gw];
        let routes = [route];
        let ings = [ing];
        let t = targets(&[], &routes, &[], &ings, &gws, &routes, &ings);
        let serving = |h: &str| -> Vec<String> {
            t.iter()
                .find(|x| x.host == h)
                .unwrap()
                .serving
                .iter()
                .map(|(k, ns, n)| format!("{k}/{ns}/{n}"))
                .collect()
        };
        assert_eq!(
            serving("app.example.dev"),
            [
                "Gateway/infra/web",
                "HTTPRoute/apps/app",
                "Service/apps/app",
                "Service/other/shared",
                "Backend/apps/ext"
            ]
        );
        assert_eq!(
            serving("legacy.example.dev"),
            [
                "Ingress/apps/legacy",
                "Service/apps/legacy",
                "Service/apps/fallback"
            ]
        );
        let none = targets(
            &[Target::Host("new.example.dev".into())],
            &[],
            &[],
            &[],
            &gws,
            &routes,
            &ings,
        );
        assert!(none[0].serving.is_empty());
        // A route naming the host whose Gateway was not read still serves it.
        let orphan = targets(
            &[Target::Host("app.example.dev".into())],
            &[],
            &[],
            &[],
            &[],
            &routes,
            &[],
        );
        assert_eq!(orphan[0].gateway, None);
        assert_eq!(orphan[0].serving.len(), 4, "{:?}", orphan[0].serving);
        assert_eq!(orphan[0].serving[0].0, "HTTPRoute");
    }

    /// Trial3: an Ingress in the inventory and an HTTPRoute (applied outside Flux) claim the
    /// same host: with no HOST argument the host is served by the route's Gateway, as when
    /// the host is named, so links 5-6 give the same verdict either way.
    #[test]
    fn an_inventory_ingress_host_a_route_claims_is_the_routes_gateway() {
        let gw = json!({"metadata": {"name": "eg", "namespace": "infra"},
          "spec": {"listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]}});
        let route = json!({"metadata": {"name": "podinfo", "namespace": "apps"},
          "spec": {"hostnames": ["podinfo.dev.example.local"],
            "parentRefs": [{"name": "eg", "namespace": "infra"}]}});
        let ing = json!({"metadata": {"name": "podinfo", "namespace": "apps"},
          "spec": {"rules": [{"host": "podinfo.dev.example.local"}]}});
        let gws = [gw];
        let routes = [route];
        let ings = [ing];
        let none = targets(&[], &[], &[], &ings, &gws, &routes, &ings);
        let host = "podinfo.dev.example.local";
        let named = targets(
            &[Target::Host(host.into())],
            &[],
            &[],
            &[],
            &gws,
            &routes,
            &ings,
        );
        assert_eq!(none.len(), 1);
        assert_eq!(none[0].gateway, Some(("infra".into(), "eg".into())));
        assert_eq!(none[0].gateway, named[0].gateway);
        assert_eq!(none[0].url, named[0].url);
        // No route claims it: the Ingress serves it.
        let alone = targets(&[], &[], &[], &ings, &gws, &[], &ings);
        assert_eq!(alone[0].ingress, Some(("apps".into(), "podinfo".into())));
    }
}
