//! One round of the chain, shared by a single run ([`crate::run`]) and `--wait`
//! ([`crate::wait`]): read the facts once, check every link, build the round's report; and
//! the interrupt that ends a round (its probe pods deleted first).

use cluster_loop::error::Result;
use jiff::Timestamp;
use tokio::sync::RwLock;
use unstick::live::Interrupt;

use crate::chain::{self, API_VERSION, ChainReport, KIND, LinkReport, Scope};
use crate::links::{self, Link};
use crate::session::Session;

/// Resolves once a signal arrived (SIGINT/SIGTERM, or the embedder's cancellation inside a
/// [`cluster_loop::embed::Embedding`]) and no probe pod exists any more (each link holding
/// one deletes it on the same signal first). The caller ends the run with
/// [`cluster_loop::signals::EXIT_INTERRUPTED`]; the process is never exited here, so an embedder (the MCP server)
/// keeps serving its other calls.
pub async fn interrupted(intr: &Interrupt, probes: &RwLock<()>) {
    intr.wait().await;
    let _all = probes.write().await;
    eprintln!("interrupted: nothing changed, no probe pod left behind");
}

/// One round: read the facts, check every link. Returns the links, the notes and when.
pub async fn round(
    s: &Session,
    chain: &[Box<dyn Link>],
    intr: &Interrupt,
    probes: &RwLock<()>,
) -> Result<(Vec<LinkReport>, Vec<String>, Timestamp, crate::facts::Facts)> {
    let facts = crate::facts::read(s).await?;
    let links = links::check_all(chain, s, &facts, intr, probes).await?;
    Ok((links, facts.notes.clone(), facts.now, facts))
}

/// The report of a round.
pub fn report(
    s: &Session,
    links: Vec<LinkReport>,
    notes: Vec<String>,
    now: Timestamp,
) -> ChainReport {
    let ns = s.namespace.clone().unwrap_or_else(|| "*".into());
    ChainReport {
        api_version: API_VERSION,
        kind: KIND,
        checked_at: now,
        scope: Scope {
            source: s.opts.source.as_ref().map(|(k, n)| format!("{k}/{ns}/{n}")),
            namespace: ns,
        },
        first_broken: chain::first_broken(&links),
        exit_code: chain::exit_code(&links),
        links,
        wait: None,
        notes,
        api_requests: s.requests(),
    }
}
