//! Link 6, Gateway: the `kubectl gatewaycheck` verdict (its engine as a library:
//! `gatewaycheck::run::check` over its snapshot, read once per round in [`super::net`]) for
//! each Gateway that serves a host. Its findings (a stale or missing observedGeneration, no
//! controller, no address, a VIP outside the pools, data-plane pods not ready, a listener not
//! programmed) make the Gateway `broken`, with the first finding's field and fix; a Gateway
//! whose status agrees with what is behind it is `ok` ("consistent": link 7 is the request
//! that proves it serves). A host served by an Ingress, or by nothing known, has no Gateway
//! member: the link is `not-applicable` when no host has one.

use cluster_loop::error::Result;
use futures::future::BoxFuture;
use std::sync::Arc;

use super::net::Shared;
use super::{Context, Link};
use crate::chain::{Evidence, LinkReport, Verdict};

/// Link 6.
pub struct GatewayLink(pub Arc<Shared>);

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
                    "kubectl gatewaycheck gateway/{} -n {} shows every finding",
                    o.name, o.namespace
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
            // Per Gateway: the hosts it serves and the Kustomizations applying what serves them.
            type Served = ((String, String), Vec<String>, Vec<String>);
            let mut gws: Vec<Served> = Vec::new();
            for t in &round.targets {
                if let Some(g) = &t.gateway {
                    let i = match gws.iter().position(|(k, _, _)| k == g) {
                        Some(i) => i,
                        None => {
                            gws.push((g.clone(), Vec::new(), Vec::new()));
                            gws.len() - 1
                        }
                    };
                    let (_, hosts, by) = &mut gws[i];
                    if !hosts.contains(&t.host) {
                        hosts.push(t.host.clone());
                    }
                    for k in t.applied_by(cx.facts) {
                        if !by.contains(&k) {
                            by.push(k);
                        }
                    }
                }
            }
            let mut members = Vec::new();
            if let Some(snap) = &round.gateways {
                for ((ns, name), hosts, by) in &gws {
                    let target = gatewaycheck::run::Target::Gateway(name.clone());
                    let object = format!("Gateway/{ns}/{name}");
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
