//! `--wait`: check the chain, then re-check it on every watch event of the objects the links
//! depend on ([`crate::links::Link::watches`], kube-runtime watchers: no polling) until it
//! holds (exit 0), a link is broken (exit 1: `broken` is only ever certain, see
//! [`crate::chain`]), or the deadline passes (exit 4).
//!
//! The default deadline is the largest of the objects' own timeouts, plus `--margin`: each
//! in-scope Kustomization's `GetTimeout` and each waiting member's own deadline (a health
//! check's end, a source's next interval fetch, an automation's next run), measured from the
//! first round. stderr says which object set it. One stderr line per link whose verdict
//! changes, naming the watch event that triggered the round. Ctrl-C ends it at once; a probe
//! pod is deleted first ([`crate::run::exit_when_interrupted`]).

use std::time::Duration;

use cluster_loop::error::Result;
use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use tokio::sync::{RwLock, mpsc};
use unstick::live::Interrupt;

use crate::chain::{self, ChainReport, LinkReport, Verdict, WaitInfo};
use crate::facts::Facts;
use crate::links::Link;
use crate::run::{exit_when_interrupted, report, round};
use crate::session::Session;

/// The default deadline after `now`: the largest of each Kustomization's timeout and each
/// waiting member's time left, plus `margin`; with the object that set it, as
/// `largest own timeout: Kustomization/flux-system/apps timeout 5m0s, + margin 1m0s`.
pub fn default_deadline(
    facts: &Facts,
    links: &[LinkReport],
    now: Timestamp,
    margin: Duration,
) -> (Timestamp, String) {
    let mut best: (Duration, String) = (Duration::ZERO, "no object with a timeout".into());
    for d in &facts.diagnoses {
        let t = Duration::from_secs_f64(d.timeout_secs.max(0.0));
        if t > best.0 {
            best = (
                t,
                format!("Kustomization/{} timeout {}", d.kustomization, fmt(t)),
            );
        }
    }
    for e in links.iter().flat_map(|l| &l.evidence) {
        if let Some(dl) = e.deadline.filter(|_| e.verdict == Verdict::Waiting) {
            let left =
                Duration::from_secs(dl.as_second().saturating_sub(now.as_second()).max(0) as u64);
            if left > best.0 {
                best = (
                    left,
                    format!("{} deadline {dl} ({} left)", e.object, fmt(left)),
                );
            }
        }
    }
    let total = best.0 + margin;
    let at = now
        .checked_add(SignedDuration::try_from(total).unwrap_or_default())
        .unwrap_or(now);
    (
        at,
        format!("largest own timeout: {}, + margin {}", best.1, fmt(margin)),
    )
}

fn fmt(d: Duration) -> String {
    cluster_loop::duration::format_go_duration(d)
}

/// A watch event that may change a verdict: `Kind/namespace/name` (or `Kind (re-listed)`).
type Change = String;

/// Starts one watcher per resource the links watch, each forwarding its changes to the
/// returned channel; `watch_ns` for the links that watch outside the Flux namespace.
fn start_watches(
    s: &Session,
    chain: &[Box<dyn Link>],
    watch_ns: Option<String>,
) -> mpsc::UnboundedReceiver<Change> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut seen: Vec<(ApiResource, Option<String>)> = Vec::new();
    for l in chain {
        let ns = if s.namespace.is_none() {
            None
        } else if l.watch_all() {
            watch_ns.clone()
        } else {
            s.namespace.clone()
        };
        for ar in l.watches() {
            if seen
                .iter()
                .any(|(a, n)| a.kind == ar.kind && a.group == ar.group && *n == ns)
            {
                continue;
            }
            seen.push((ar.clone(), ns.clone()));
            // One list and one watch per resource at the start (re-lists after a watch
            // expires are counted as they come).
            s.count(2);
            let api: Api<DynamicObject> = match &ns {
                Some(n) => Api::namespaced_with(s.conn.client.clone(), n, &ar),
                None => Api::all_with(s.conn.client.clone(), &ar),
            };
            let tx = tx.clone();
            let kind = ar.kind.clone();
            tokio::spawn(async move {
                let mut w = watcher(api, watcher::Config::default()).boxed();
                while let Some(ev) = w.next().await {
                    let msg = match ev {
                        Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => format!(
                            "{kind}/{}/{}",
                            o.metadata.namespace.unwrap_or_default(),
                            o.metadata.name.unwrap_or_default()
                        ),
                        // The state at the (re)list may hold a change made before it.
                        Ok(watcher::Event::InitDone) => format!("{kind} (listed)"),
                        Ok(_) => continue,
                        // A 404 (the kind is not served) or a denied watch: this kind never
                        // signals; the other watches and the deadline still end the wait.
                        Err(_) => continue,
                    };
                    if tx.send(msg).is_err() {
                        return;
                    }
                }
            });
        }
    }
    rx
}

/// The one namespace the workloads live in, else `None` (all).
fn workload_namespace(f: &Facts) -> Option<String> {
    let nss: std::collections::BTreeSet<&str> =
        f.workloads.iter().map(unstick::obj::namespace).collect();
    (nss.len() == 1).then(|| nss.into_iter().next().unwrap().to_string())
}

/// Prints one line per link whose verdict differs from `old`'s, naming `cause`.
fn announce(old: &[LinkReport], new: &[LinkReport], cause: &str) {
    for l in new {
        let before = old.iter().find(|o| o.id == l.id).map(|o| o.verdict);
        if before != Some(l.verdict) {
            eprintln!("{} [{cause}]", crate::render::change_line(before, l));
        }
    }
}

fn done(links: &[LinkReport]) -> bool {
    let code = chain::exit_code(links);
    code == 0 || links.iter().any(|l| l.verdict == Verdict::Broken)
}

/// Runs `--wait`. Returns the last round's report with its [`WaitInfo`]. Errors: API errors
/// of a round (exit 3).
pub async fn wait(
    s: &Session,
    chain: &[Box<dyn Link>],
    intr: &Interrupt,
    probes: &RwLock<()>,
) -> Result<ChainReport> {
    let (mut links, mut notes, mut now, facts) = tokio::select! {
        r = round(s, chain, intr, probes) => r?,
        _ = exit_when_interrupted(intr, probes) => unreachable!(),
    };
    announce(&[], &links, "first check");
    let (deadline, why) = match s.opts.timeout {
        Some(t) => (
            now.checked_add(SignedDuration::try_from(t).unwrap_or_default())
                .unwrap_or(now),
            format!("--timeout {}", fmt(t)),
        ),
        None => default_deadline(&facts, &links, now, s.opts.margin),
    };
    if !done(&links) {
        eprintln!("waiting until {deadline} ({why})");
    }
    let mut rx = start_watches(s, chain, workload_namespace(&facts));
    drop(facts);
    let until = tokio::time::Instant::now()
        + Duration::from_secs(deadline.as_second().saturating_sub(now.as_second()).max(0) as u64);
    let mut expired = false;
    while !done(&links) {
        let first = tokio::select! {
            c = rx.recv() => c,
            _ = tokio::time::sleep_until(until) => { expired = true; break; }
            _ = exit_when_interrupted(intr, probes) => unreachable!(),
        };
        let Some(mut cause) = first else {
            // Every watcher ended (none could start): only the deadline is left.
            tokio::select! {
                _ = tokio::time::sleep_until(until) => { expired = true; break; }
                _ = exit_when_interrupted(intr, probes) => unreachable!(),
            }
        };
        // Events that arrived together make one round.
        let mut n = 1;
        while let Ok(more) = rx.try_recv() {
            n += 1;
            cause = more;
        }
        if n > 1 {
            cause = format!("{cause} and {} more watch events", n - 1);
        } else {
            cause = format!("watch event {cause}");
        }
        let (l2, n2, t2, _) = tokio::select! {
            r = round(s, chain, intr, probes) => r?,
            _ = exit_when_interrupted(intr, probes) => unreachable!(),
        };
        announce(&links, &l2, &cause);
        (links, notes, now) = (l2, n2, t2);
    }
    let mut r = report(s, links, notes, now);
    r.wait = Some(WaitInfo {
        deadline,
        why,
        expired,
    });
    Ok(r)
}
