//! Link 6, Gateway: the `kubectl gatewaycheck` verdict (its engine as a library:
//! `gatewaycheck::run::check` over its snapshot, read once per round in [`super::net`]) for
//! each Gateway that serves a host, and for each HTTPRoute that does (trial3: a route whose
//! backend Service is missing, ResolvedRefs=False BackendNotFound, was named nowhere in the
//! chain). Their findings (a stale or missing observedGeneration, no controller, no address, a
//! VIP outside the pools, data-plane pods not ready, a listener not programmed; a route
//! parent not Accepted, refs not resolved, a parent left behind) make the object `broken`,
//! with the first finding's field and fix; one whose status agrees with what is behind it is
//! `ok` ("consistent": link 7 is the request that proves it serves). A host served by an
//! Ingress, or by nothing known, has no member here: the link is `not-applicable` when no host
//! has one.

use cluster_loop::error::Result;
use futures::future::BoxFuture;
use std::sync::Arc;

use super::net::Shared;
use super::{Context, Link};
use crate::chain::{Evidence, LinkReport, Verdict};

/// Link 6.
pub struct GatewayLink(pub Arc<Shared>);

/// A Gateway or HTTPRoute that serves hosts: `((Kind, (namespace, name)), hosts, the
/// Kustomizations applying what serves them)`.
type Served = ((&'static str, (String, String)), Vec<String>, Vec<String>);

/// Adds `host` and `by` to `object`'s entry of `served`, in first-seen order.
fn add(
    served: &mut Vec<Served>,
    object: (&'static str, (String, String)),
    host: &str,
    by: &[String],
) {
    let i = match served.iter().position(|(o, _, _)| *o == object) {
        Some(i) => i,
        None => {
            served.push((object, Vec::new(), Vec::new()));
            served.len() - 1
        }
    };
    let (_, hosts, keys) = &mut served[i];
    if !hosts.iter().any(|h| h == host) {
        hosts.push(host.to_string());
    }
    for k in by {
        if !keys.contains(k) {
            keys.push(k.clone());
        }
    }
}

/// The verdict of one Gateway from gatewaycheck's report of it.
pub fn judge(object: String, o: &gatewaycheck::report::ObjectReport, hosts: &[String]) -> Evidence {
    use gatewaycheck::rules::Level;
    let serves = format!("serves {}", hosts.join(", "));
    match o.findings.iter().find(|f| f.level == Level::Finding) {
        Some(f) => {
            let n = o
                .findings
                .iter()
                .filter(|f| f.level == Level::Finding)
                .count();
            let e = Evidence::new(
                object,
                Verdict::Broken,
                format!(
                    "{serves}; gatewaycheck: {n} finding(s), first {} {}: {}",
                    f.object, f.field, f.message
                ),
            );
            match &f.fix {
                Some(x) => e.fix(x.clone()),
                None => e.fix(format!(
                    "kubectl gatewaycheck {}/{} -n {} shows every finding",
                    o.kind.to_lowercase(),
                    o.name,
                    o.namespace
                )),
            }
        }
        None => Evidence::new(
            object,
            Verdict::Ok,
            format!(
                "{serves}; gatewaycheck: {} (the HTTP(S) link sends the request)",
                o.verdict
            ),
        ),
    }
}

impl Link for GatewayLink {
    fn position(&self) -> u8 {
        6
    }

    fn id(&self) -> &'static str {
        "gateway"
    }

    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            let round = self.0.round(cx).await?;
            // Per Gateway and per HTTPRoute that serves a host: the hosts and the
            // Kustomizations applying what serves them.
            let mut served: Vec<Served> = Vec::new();
            // A member is held only by what applies it (trial4: a Gateway no Kustomization
            // applies, with its data plane in ImagePullBackOff, read "not final" because the
            // host's Ingress was being re-applied): the Gateway by its own appliers, a route by
            // the route's and its backends'.
            for t in &round.targets {
                let Some(g) = &t.gateway else { continue };
                add(
                    &mut served,
                    ("Gateway", g.clone()),
                    &t.host,
                    &t.appliers_of(cx.facts, |k| k == "Gateway"),
                );
                let route_by = t.appliers_of(cx.facts, |k| k != "Gateway");
                for (_, ns, name) in t.serving.iter().filter(|(k, _, _)| k == "HTTPRoute") {
                    add(
                        &mut served,
                        ("HTTPRoute", (ns.clone(), name.clone())),
                        &t.host,
                        &route_by,
                    );
                }
            }
            let mut members = Vec::new();
            if let Some(snap) = &round.gateways {
                for ((kind, (ns, name)), hosts, by) in &served {
                    let target = match *kind {
                        "Gateway" => gatewaycheck::run::Target::Gateway(name.clone()),
                        _ => gatewaycheck::run::Target::HttpRoute(name.clone()),
                    };
                    let object = format!("{kind}/{ns}/{name}");
                    let r = gatewaycheck::run::check(
                        snap,
                        &target,
                        Some(ns),
                        None,
                        &Default::default(),
                    )?;
                    if let Some(o) = r.objects.first() {
                        members.push(judge(object, o, hosts).applied_by(by.clone()));
                    }
                }
            }
            Ok(LinkReport::from_members(
                6,
                "gateway",
                members,
                "no host is served by a Gateway (none given, or served by an Ingress or by nothing known)",
            ))
        })
    }

    fn watches(&self) -> Vec<kube::api::ApiResource> {
        vec![
            gatewaycheck::snapshot::gateway_api("Gateway"),
            gatewaycheck::snapshot::gateway_api("HTTPRoute"),
        ]
    }

    fn watch_all(&self) -> bool {
        true
    }
}
