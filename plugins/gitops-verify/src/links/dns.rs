//! Link 5, DNS: each host as a pod resolves it (podresolve's engine over the round's probe
//! pod, [`super::net`]), against the address of what serves it (the Gateway's
//! `status.addresses`, the Ingress's load balancer).
//!
//! - resolves to one of those addresses: `ok`; resolves, and nothing known serves the host
//!   (a HOST argument no Gateway or Ingress names): `ok`, saying the address was not checked;
//!   resolves, but the Gateway or Ingress that serves it has no address yet: `unknown` (not
//!   proven either way), with what gives it one;
//! - resolves elsewhere: `broken` (the split-horizon trap of the fleet README: CoreDNS answers
//!   another address than the pool gave the Gateway), naming the CoreDNS plugin and Corefile
//!   line that answered;
//! - NXDOMAIN or no address record: `broken` (certain: the name does not exist for pods);
//! - a timeout, SERVFAIL or REFUSED, or a probe that could not run: `unknown`.

use cluster_loop::error::Result;
use cluster_loop::probe::parse::LookupStatus;
use futures::future::BoxFuture;
use std::net::IpAddr;
use std::sync::Arc;

use super::net::{HostTarget, ProbeSeen, Shared};
use super::{Context, Link};
use crate::chain::{Evidence, LinkReport, Verdict};

/// Link 5.
pub struct DnsLink(pub Arc<Shared>);

fn list(v: &[IpAddr]) -> String {
    v.iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn served_by(t: &HostTarget) -> String {
    match (&t.gateway, &t.ingress) {
        (Some((ns, n)), _) => format!("Gateway {ns}/{n}"),
        (_, Some((ns, n))) => format!("Ingress {ns}/{n}"),
        _ => "nothing known".into(),
    }
}

/// The verdict of one host from podresolve's report of it.
pub fn judge(t: &HostTarget, h: &podresolve::report::HostReport) -> Evidence {
    let object = format!("host {}", t.host);
    let pod = &h.pod.addresses;
    let by = h
        .coredns
        .iter()
        .find(|c| c.answered)
        .and_then(|c| {
            let e = &c.explanation;
            e.answered_by.as_ref().map(|p| {
                format!(
                    " (CoreDNS {p}{})",
                    e.line
                        .map(|l| format!(", Corefile line {l}"))
                        .unwrap_or_default()
                )
            })
        })
        .unwrap_or_default();
    if !pod.is_empty() {
        if t.expected.is_empty() && (t.gateway.is_some() || t.ingress.is_some()) {
            // Nothing to compare with: not proven either way (trial3: this read `ok`).
            return Evidence::new(
                object,
                Verdict::Unknown,
                format!(
                    "resolves from a pod to {}{by}, but {} has no address (status) to compare it with: whether pods reach what serves the host is not proven",
                    list(pod),
                    served_by(t)
                ),
            )
            .fix(format!(
                "give {} an address (its controller writes status.addresses / status.loadBalancer: a load-balancer pool, or kubectl gatewaycheck for a Gateway)",
                served_by(t)
            ));
        }
        if t.expected.is_empty() {
            return Evidence::new(
                object,
                Verdict::Ok,
                format!(
                    "resolves from a pod to {}{by}; no Gateway or Ingress serves it, so the address is not checked",
                    list(pod)
                ),
            );
        }
        if pod.iter().any(|a| t.expected.contains(a)) {
            return Evidence::new(
                object,
                Verdict::Ok,
                format!(
                    "resolves from a pod to {}{by}, the address of {}",
                    list(pod),
                    served_by(t)
                ),
            );
        }
        return Evidence::new(
            object,
            Verdict::Broken,
            format!(
                "resolves from a pod to {}{by}, but {}'s address is {}: traffic from pods goes elsewhere (split horizon)",
                list(pod),
                served_by(t),
                list(&t.expected)
            ),
        )
        .fix(format!(
            "make the cluster's answer for {} the address of {} (the CoreDNS hosts/template entry, the repository's GATEWAY_VIP), or pin the address the pool gives",
            t.host,
            served_by(t)
        ));
    }
    let status = h.pod.libc.as_ref().map(|l| l.status);
    match status {
        Some(LookupStatus::NotFound | LookupStatus::NoData) => Evidence::new(
            object,
            Verdict::Broken,
            format!("does not resolve from a pod ({}){by}", if status == Some(LookupStatus::NoData) { "no address record" } else { "NXDOMAIN" }),
        )
        .fix(format!(
            "give {} a record the cluster's DNS answers (a CoreDNS hosts entry, the zone's record) with the address of {}",
            t.host,
            served_by(t)
        )),
        other => Evidence::new(
            object,
            Verdict::Unknown,
            format!(
                "no answer from a pod: {}",
                other
                    .and_then(|s| serde_json::to_value(s).ok())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| "the lookup did not run".into())
            ),
        )
        .fix("kubectl podresolve HOST explains the pod's resolver and CoreDNS's path"),
    }
}

impl Link for DnsLink {
    fn position(&self) -> u8 {
        5
    }

    fn id(&self) -> &'static str {
        "dns"
    }

    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            let round = self.0.round(cx).await?;
            let hosts: Vec<&HostTarget> = round
                .targets
                .iter()
                .filter(|t| t.host.parse::<IpAddr>().is_err())
                .collect();
            let mut members = Vec::new();
            let mut seen = Vec::new();
            for t in hosts {
                if seen.contains(&&t.host) {
                    continue;
                }
                seen.push(&t.host);
                let e = match &round.probe {
                    ProbeSeen::Ran { dns, .. } => match dns.hosts.iter().find(|h| h.host == t.host)
                    {
                        Some(h) => judge(t, h),
                        None => Evidence::new(
                            format!("host {}", t.host),
                            Verdict::Unknown,
                            "the probe did not look it up",
                        ),
                    },
                    ProbeSeen::Failed(why) => Evidence::new(
                        format!("host {}", t.host),
                        Verdict::Unknown,
                        format!("the probe pod could not run: {why}"),
                    ),
                    ProbeSeen::NotRun => continue,
                };
                members.push(e.applied_by(t.applied_by(cx.facts)));
            }
            Ok(LinkReport::from_members(
                5,
                "dns",
                members,
                "no host to resolve: no HOST argument, and no HTTPRoute, Gateway listener or Ingress with a hostname in the applied inventory",
            ))
        })
    }
}
