//! The links of the chain, one module each, and the extension point for new ones.
//!
//! # Adding a link
//! A link is a value implementing [`Link`]; [`chain`] lists them in chain order. To add one
//! (the DNS, Gateway and HTTP(S) links: `dns.rs`, `gateway.rs`, `http.rs`):
//! 1. write `src/links/<id>.rs` with a unit struct implementing [`Link`]: `position()` (its
//!    place, 1-7), `id()` (the stable id of `links[].id` in the ChainReport), `check()` (an
//!    async read and judgement over [`Context`], returning a [`LinkReport`], usually
//!    [`LinkReport::from_members`] over one [`crate::chain::Evidence`] per object or host),
//!    and `watches()` (the API resources whose changes can change its verdict: `--wait`
//!    watches them and re-checks on each event);
//! 2. add `pub mod <id>;` below and replace its [`unchecked::Unchecked`] entry in [`chain`].
//!
//! Nothing else changes: the table, `--format github`, the exit code, `--wait` and the
//! ChainReport are built from the list. Rules for a link:
//! - with nothing to check it is `not-applicable` and says why, never `ok`;
//! - `broken` only when certain (a failed check at the newest revision, NXDOMAIN), with a
//!   `fix`; moving toward holding by itself is `waiting` with a deadline;
//! - its reads go through [`Context::session`] (`session.reader` counts requests for the
//!   budget in docs/gitops-verify.md; a probe pod's requests are added with `Session::count`) and what every
//!   link shares is in [`Context::facts`], read once per round;
//! - a probe pod is created, awaited and deleted with `cluster_loop::probe::lifecycle`,
//!   holding a read guard of [`Context::probes`] while it exists and passing
//!   [`Context::interrupt`] as its interrupt: on Ctrl-C it deletes the pod, and the run exits
//!   130 only once every guard is dropped (nothing left behind).

pub mod automation;
pub mod dns;
pub mod gateway;
pub mod http;
pub mod images;
pub mod kustomizations;
pub mod net;
pub mod source;
pub mod unchecked;
pub mod workloads;

use cluster_loop::error::Result;
use futures::future::BoxFuture;
use kube::api::ApiResource;
use tokio::sync::RwLock;
use unstick::live::Interrupt;

use crate::chain::LinkReport;
use crate::facts::Facts;
use crate::session::Session;

/// What a link's check reads: the session (connection, options, request counter), the
/// round's shared reads, and the links already checked this round (earlier positions).
pub struct Context<'a> {
    /// The session.
    pub session: &'a Session,
    /// The round's shared reads.
    pub facts: &'a Facts,
    /// The reports of the links before this one, in order.
    pub upstream: &'a [LinkReport],
    /// Set by SIGINT/SIGTERM: a link that creates a probe pod passes `interrupt.wait()` to
    /// `cluster_loop::probe::lifecycle::run_probe`, which deletes the pod on it.
    pub interrupt: &'a Interrupt,
    /// Read-held by a link while its probe pod exists; the run takes the write side before
    /// it exits on Ctrl-C.
    pub probes: &'a RwLock<()>,
}

/// One link of the chain.
pub trait Link: Send + Sync {
    /// Place in the chain, 1-7.
    fn position(&self) -> u8;
    /// Stable id (`source`, `kustomizations`, `workloads`, `images`, `dns`, `gateway`,
    /// `http`).
    fn id(&self) -> &'static str;
    /// Reads what it needs beyond [`Context::facts`] and judges the link. Errors: API errors
    /// that end the run (exit 3); a denied optional read is an `unknown` member instead.
    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>>;
    /// The API resources whose changes can change this link's verdict (`--wait` watches
    /// each, in the session's namespace or all with `-A`, or where [`Link::watch_all`]).
    fn watches(&self) -> Vec<ApiResource> {
        Vec::new()
    }
    /// Whether [`Link::watches`] must be watched in every namespace (workloads live outside
    /// the Flux namespace).
    fn watch_all(&self) -> bool {
        false
    }
}

/// The chain, in order: source, Kustomizations, workloads, images, then DNS, Gateway and
/// HTTP(S), which share one round of network reads ([`net::Shared`]: the hosts, the Gateway
/// API snapshot and one probe pod).
pub fn chain() -> Vec<Box<dyn Link>> {
    let net = std::sync::Arc::new(net::Shared::default());
    vec![
        Box::new(source::SourceLink),
        Box::new(kustomizations::KustomizationsLink),
        Box::new(workloads::WorkloadsLink),
        Box::new(images::ImagesLink),
        Box::new(dns::DnsLink(net.clone())),
        Box::new(gateway::GatewayLink(net.clone())),
        Box::new(http::HttpLink(net)),
    ]
}

/// Checks every link of `links` in order over one round's `facts`, then applies
/// [`crate::chain::settle`].
pub async fn check_all(
    links: &[Box<dyn Link>],
    session: &Session,
    facts: &Facts,
    interrupt: &Interrupt,
    probes: &RwLock<()>,
) -> Result<Vec<LinkReport>> {
    let mut done: Vec<LinkReport> = Vec::new();
    for l in links {
        let cx = Context {
            session,
            facts,
            upstream: &done,
            interrupt,
            probes,
        };
        let r = l.check(&cx).await?;
        done.push(r);
    }
    crate::chain::settle(&mut done);
    Ok(done)
}
