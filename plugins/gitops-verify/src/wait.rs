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
//! pod is deleted first ([`crate::round::interrupted`]).

use std::time::Duration;

use cluster_loop::error::Result;
use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{RwLock, mpsc};
use unstick::live::Interrupt;

use crate::chain::{self, ChainReport, LinkReport, Verdict, WaitInfo};
use crate::facts::Facts;
use crate::links::Link;
use crate::round::{interrupted, report, round};
use crate::session::Session;
use cluster_loop::wait::Progress;

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

/// What a watcher tells the wait.
#[derive(Debug)]
enum Msg {
    /// Its first list is done (or it failed: a kind not served, a denied watch): from now on
    /// every change reaches the wait as a [`Msg::Change`].
    Settled,
    /// A watch event that may change a verdict: `Kind/namespace/name`, or `Kind (re-listed)`
    /// after a re-list (the state it read may hold a change made before it).
    Change(String),
}

/// Starts one watcher per resource the links watch, each forwarding its changes to the
/// returned channel, with their number; `watch_ns` for the links that watch outside the Flux
/// namespace. Watchers back off on errors (kube-runtime's default backoff).
/// Whether an object with these labels is a probe a cluster-loop plugin created (its run
/// label, `<tool>.cluster-loop.dev/run`, [`cluster_loop::probe::ProbeOwner::run_label`]).
fn is_probe(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels.is_some_and(|l| l.keys().any(|k| k.ends_with(".cluster-loop.dev/run")))
}

fn start_watches(
    s: &Session,
    chain: &[Box<dyn Link>],
    watch_ns: Option<String>,
) -> (mpsc::UnboundedReceiver<Msg>, usize) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut n = 0;
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
                let mut w = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                let mut settled = false;
                while let Some(ev) = w.next().await {
                    let msg = match ev {
                        // A probe Job or pod of ours (links 5-7 create one per round):
                        // its events are not a change of the chain, and reacting to them
                        // would create the next probe, and so on (the trial: ~2 Jobs/s).
                        Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o))
                            if is_probe(o.metadata.labels.as_ref()) =>
                        {
                            continue;
                        }
                        Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => {
                            Msg::Change(format!(
                                "{kind}/{}/{}",
                                o.metadata.namespace.unwrap_or_default(),
                                o.metadata.name.unwrap_or_default()
                            ))
                        }
                        Ok(watcher::Event::InitDone) if settled => {
                            Msg::Change(format!("{kind} (re-listed)"))
                        }
                        // A 404 (the kind is not served) or a denied watch: this kind never
                        // signals; the other watches and the deadline still end the wait.
                        Ok(watcher::Event::InitDone) | Err(_) if !settled => {
                            settled = true;
                            Msg::Settled
                        }
                        _ => continue,
                    };
                    if tx.send(msg).is_err() {
                        return;
                    }
                }
            });
            n += 1;
        }
    }
    (rx, n)
}

/// The next change (a late [`Msg::Settled`] is skipped); `None` when every watcher ended.
async fn recv_change(rx: &mut mpsc::UnboundedReceiver<Msg>) -> Option<String> {
    loop {
        match rx.recv().await? {
            Msg::Change(c) => return Some(c),
            Msg::Settled => continue,
        }
    }
}

/// The one namespace the workloads live in, else `None` (all).
fn workload_namespace(f: &Facts) -> Option<String> {
    let nss: std::collections::BTreeSet<&str> =
        f.workloads.iter().map(unstick::obj::namespace).collect();
    (nss.len() == 1).then(|| nss.into_iter().next().unwrap().to_string())
}

/// Prints one line per link whose verdict differs from `old`'s, naming `cause`.
/// One stderr line per link whose verdict changed (also a progress notification inside an
/// embedding, e.g. the MCP server's `verify_chain`).
fn announce(p: &Progress, old: &[LinkReport], new: &[LinkReport], cause: &str) {
    for l in new {
        let before = old.iter().find(|o| o.id == l.id).map(|o| o.verdict);
        if before != Some(l.verdict) {
            p.println(format!(
                "{} [{cause}]",
                crate::render::change_line(before, l)
            ));
        }
    }
}

fn done(links: &[LinkReport]) -> bool {
    let code = chain::exit_code(links);
    code == 0 || links.iter().any(|l| l.verdict == Verdict::Broken)
}

/// Runs `--wait`. Returns the last round's report with its [`WaitInfo`], or `None` when
/// interrupted (probe pods deleted). Errors: API errors of a round (exit 3).
pub async fn wait(
    s: &Session,
    chain: &[Box<dyn Link>],
    intr: &Interrupt,
    probes: &RwLock<()>,
) -> Result<Option<ChainReport>> {
    // Created in the flow's own task, so an embedder sees the lines as progress.
    let progress = Progress::hidden();
    // A first read for the namespaces to watch; when it is already final, no watch at all.
    let (links0, notes0, now0, facts) = tokio::select! {
        r = round(s, chain, intr, probes) => r?,
        _ = interrupted(intr, probes) => return Ok(None),
    };
    if done(&links0) {
        announce(&progress, &[], &links0, "first check");
        let mut r = report(s, links0, notes0, now0);
        r.wait = Some(WaitInfo {
            deadline: now0,
            why: "nothing to wait for".into(),
            expired: false,
        });
        return Ok(Some(r));
    }
    let (mut rx, n) = start_watches(s, chain, workload_namespace(&facts));
    drop(facts);
    // Every watcher has listed (or failed) before the first check: a change after that read
    // reaches us as an event, never lost between the read and the watch.
    let mut settled = 0;
    while settled < n {
        tokio::select! {
            m = rx.recv() => match m {
                Some(Msg::Settled) => settled += 1,
                Some(Msg::Change(_)) => {}
                None => break,
            },
            _ = interrupted(intr, probes) => return Ok(None),
        }
    }
    let (mut links, mut notes, mut now, facts) = tokio::select! {
        r = round(s, chain, intr, probes) => r?,
        _ = interrupted(intr, probes) => return Ok(None),
    };
    announce(&progress, &[], &links, "first check");
    let (deadline, why) = match s.opts.timeout {
        Some(t) => (
            now.checked_add(SignedDuration::try_from(t).unwrap_or_default())
                .unwrap_or(now),
            format!("--timeout {}", fmt(t)),
        ),
        None => default_deadline(&facts, &links, now, s.opts.margin),
    };
    drop(facts);
    if !done(&links) {
        progress.println(format!("waiting until {deadline} ({why})"));
    }
    let until = tokio::time::Instant::now()
        + Duration::from_secs(deadline.as_second().saturating_sub(now.as_second()).max(0) as u64);
    let mut expired = false;
    while !done(&links) {
        let first = tokio::select! {
            c = recv_change(&mut rx) => c,
            _ = tokio::time::sleep_until(until) => { expired = true; break; }
            _ = interrupted(intr, probes) => return Ok(None),
        };
        let Some(mut cause) = first else {
            // Every watcher ended (none could start): only the deadline is left.
            tokio::select! {
                _ = tokio::time::sleep_until(until) => { expired = true; break; }
                _ = interrupted(intr, probes) => return Ok(None),
            }
        };
        // Events that arrived together make one round; the line names each object once.
        let mut batch = vec![cause];
        while let Ok(m) = rx.try_recv() {
            if let Msg::Change(more) = m
                && !batch.contains(&more)
            {
                batch.push(more);
            }
        }
        cause = match batch.len() {
            1 => format!("watch event {}", batch[0]),
            n if n <= 8 => format!("watch events {}", batch.join(", ")),
            n => format!("watch events {} (+{} more)", batch[..8].join(", "), n - 8),
        };
        let (l2, n2, t2, _) = tokio::select! {
            r = round(s, chain, intr, probes) => r?,
            _ = interrupted(intr, probes) => return Ok(None),
        };
        announce(&progress, &links, &l2, &cause);
        (links, notes, now) = (l2, n2, t2);
    }
    let mut r = report(s, links, notes, now);
    r.wait = Some(WaitInfo {
        deadline,
        why,
        expired,
    });
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probes_own_events_do_not_start_a_round() {
        let run = cluster_loop::probe::ProbeOwner::GITOPS_VERIFY.run_label();
        let probe = std::collections::BTreeMap::from([(run, "abc".to_string())]);
        assert!(is_probe(Some(&probe)));
        let app = std::collections::BTreeMap::from([("app".to_string(), "web".to_string())]);
        assert!(!is_probe(Some(&app)));
        assert!(!is_probe(None));
    }
}
