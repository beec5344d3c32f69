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
        (HttpOutcome::Answered, Some(404)) => Evidence::new(object, Verdict::Broken, detail).fix(
            "no route answers this host and path: check the HTTPRoute's hostnames, path and status.parents (kubectl gatewaycheck httproute/NAME)",
        ),
        (HttpOutcome::Answered, _) => Evidence::new(object, Verdict::Broken, detail).fix(
            "the route answers but its backend does not: check the backendRefs Service, its endpoints and pods",
        ),
        (HttpOutcome::TlsRefused, _) => Evidence::new(object, Verdict::Broken, detail).fix(
            "serve a certificate for this host from a CA clients trust (the listener's or Ingress's TLS Secret; cert-manager's Certificate)",
        ),
        (HttpOutcome::NoAnswer, _) => Evidence::new(object, Verdict::Broken, detail).fix(
            "nothing answers at the address pods resolve: kubectl gatewaycheck --probe checks the Gateway, its Service and data plane",
        ),
        _ => Evidence::new(object, Verdict::Unknown, detail),
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
                .filter_map(|t| match &round.probe {
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
