//! Link 7, HTTP(S): a request from the round's probe pod ([`super::net`],
//! `cluster_loop::probe::http`) to each host's URL, as a client in the cluster sends it: the
//! name resolved by the pod's resolver, the image's CA bundle judging the certificate (chain,
//! name, dates), no redirect followed.
//!
//! - an answer below 400, or 401/403 (the route answers, it asks for credentials): `ok`, with
//!   the status, the time and the certificate's days left;
//! - no answer, a refused certificate, 404 (no route for this host and path) or a 5xx (no
//!   healthy backend): `broken`, with what the server answers behind a refused certificate;
//! - a probe image without curl, a probe that could not run or did not finish: `unknown`.

use cluster_loop::error::Result;
use cluster_loop::probe::http::{HttpOutcome, HttpResult};
use futures::future::BoxFuture;
use std::sync::Arc;

use super::net::{HostTarget, ProbeSeen, Shared};
use super::{Context, Link};
use crate::chain::{Evidence, LinkReport, Verdict};

/// Link 7.
pub struct HttpLink(pub Arc<Shared>);

/// The verdict of one request.
pub fn judge(t: &HostTarget, r: &HttpResult) -> Evidence {
    let object = format!("GET {}", t.url);
    let detail = r.summary();
    match (r.outcome, r.code) {
        (HttpOutcome::Answered, Some(c)) if c < 400 || c == 401 || c == 403 => {
            Evidence::new(object, Verdict::Ok, detail)
        }
        (HttpOutcome::Answered, Some(404)) => {
            Evidence::new(object, Verdict::Broken, detail).fix(no_route_fix(t))
        }
        (HttpOutcome::Answered, _) => Evidence::new(object, Verdict::Broken, detail).fix(
            "the route answers but its backend does not: check the backendRefs Service, its endpoints and pods",
        ),
        (HttpOutcome::TlsRefused, _) => Evidence::new(object, Verdict::Broken, detail).fix(
            "serve a certificate for this host from a CA clients trust (the listener's or Ingress's TLS Secret; cert-manager's Certificate)",
        ),
        (HttpOutcome::NoAnswer, _) => {
            Evidence::new(object, Verdict::Broken, detail).fix(no_answer_fix(t))
        }
        _ => Evidence::new(object, Verdict::Unknown, detail),
    }
}

/// The fix for a 404, by what serves the host: the HTTPRoute (gatewaycheck), the Ingress's
/// rules, or nothing that names the host.
fn no_route_fix(t: &HostTarget) -> String {
    let route = t.serving.iter().find(|(k, _, _)| k == "HTTPRoute");
    match (route, &t.gateway, &t.ingress) {
        (Some((_, ns, name)), _, _) => format!(
            "no route answers this host and path: check HTTPRoute {ns}/{name}'s hostnames, path and status.parents (kubectl gatewaycheck httproute/{name} -n {ns})"
        ),
        (None, Some((ns, name)), _) => format!(
            "no route answers this host and path: no HTTPRoute attached to Gateway {ns}/{name} names it (kubectl gatewaycheck gateway/{name} -n {ns} lists its routes)"
        ),
        (None, None, Some((ns, name))) => format!(
            "no rule answers this host and path: check Ingress {ns}/{name}'s rules and its IngressClass's controller (kubectl -n {ns} describe ingress {name})"
        ),
        (None, None, None) => "no route answers this host and path, and no HTTPRoute, Gateway listener or Ingress in the cluster names the host: add the route, or check the name (kubectl podresolve HOST)".into(),
    }
}

/// The fix for no answer, by what serves the host: the Gateway (gatewaycheck --probe), the
/// Ingress's controller, or the address the name resolves to.
fn no_answer_fix(t: &HostTarget) -> String {
    match (&t.gateway, &t.ingress) {
        (Some((ns, name)), _) => format!(
            "nothing answers at the address pods resolve: kubectl gatewaycheck gateway/{name} -n {ns} --probe checks the Gateway, its Service and data plane"
        ),
        (None, Some((ns, name))) => format!(
            "nothing answers at the address pods resolve: check Ingress {ns}/{name}'s status.loadBalancer and its controller's Service and pods"
        ),
        (None, None) => format!(
            "nothing answers at the address pods resolve, and no Gateway or Ingress names {}: kubectl podresolve {} shows where the name leads",
            t.host, t.host
        ),
    }
}

impl Link for HttpLink {
    fn position(&self) -> u8 {
        7
    }

    fn id(&self) -> &'static str {
        "http"
    }

    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            let round = self.0.round(cx).await?;
            let members = round
                .targets
                .iter()
                .filter_map(|t| {
                    match &round.probe {
                        ProbeSeen::Ran { http, .. } => {
                            Some(match http.iter().find(|r| r.url == t.url) {
                                Some(r) => judge(t, r),
                                None => Evidence::new(
                                    format!("GET {}", t.url),
                                    Verdict::Unknown,
                                    "not requested",
                                ),
                            })
                        }
                        ProbeSeen::Failed(why) => Some(Evidence::new(
                            format!("GET {}", t.url),
                            Verdict::Unknown,
                            format!("the probe pod could not run: {why}"),
                        )),
                        ProbeSeen::NotRun => None,
                    }
                    .map(|e| e.applied_by(t.applied_by(cx.facts)))
                })
                .collect();
            Ok(LinkReport::from_members(
                7,
                "http",
                members,
                "no URL to request: no HOST|URL argument, and no hostname in the applied inventory",
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(gateway: bool, ingress: bool, route: bool) -> HostTarget {
        let mut serving = Vec::new();
        if gateway {
            serving.push(("Gateway".into(), "infra".into(), "web".into()));
        }
        if route {
            serving.push(("HTTPRoute".into(), "apps".into(), "app".into()));
        }
        if ingress {
            serving.push(("Ingress".into(), "apps".into(), "legacy".into()));
        }
        HostTarget {
            host: "app.example.dev".into(),
            url: "http://app.example.dev/".into(),
            from: "argument".into(),
            gateway: gateway.then(|| ("infra".into(), "web".into())),
            ingress: ingress.then(|| ("apps".into(), "legacy".into())),
            expected: Vec::new(),
            serving,
        }
    }

    /// Trial3: link 7's fix named gatewaycheck for every host. It now names what serves the
    /// host: the route or Gateway (gatewaycheck, with the object), the Ingress, or nothing
    /// (podresolve for where the name leads).
    #[test]
    fn the_fix_names_what_serves_the_host() {
        assert!(
            no_route_fix(&target(true, false, true))
                .contains("kubectl gatewaycheck httproute/app -n apps")
        );
        assert!(no_route_fix(&target(true, false, false)).contains("gateway/web -n infra"));
        let ing = no_route_fix(&target(false, true, false));
        assert!(
            ing.contains("Ingress apps/legacy") && !ing.contains("gatewaycheck"),
            "{ing}"
        );
        assert!(
            no_answer_fix(&target(true, false, true))
                .contains("kubectl gatewaycheck gateway/web -n infra --probe")
        );
        let ing = no_answer_fix(&target(false, true, false));
        assert!(
            ing.contains("Ingress apps/legacy") && !ing.contains("gatewaycheck"),
            "{ing}"
        );
        let none = no_answer_fix(&target(false, false, false));
        assert!(
            none.contains("kubectl podresolve app.example.dev") && !none.contains("gatewaycheck"),
            "{none}"
        );
    }
}
