//! The controller's blind spots: states where a Kustomization's status suggests a run that
//! kustomize-controller will not make. Each is one function, applied after the state the
//! conditions tell (the decision table, `table.rs`), and each replaces a promise ("the next run
//! applies it", "a new run starts as soon as a worker is free") by what the controller really
//! does, read from its source (kustomize-controller v1.7.3, v1.9.6, v1.10.1):
//!
//! - not watched: `--watch-label-selector` / `--watch-all-namespaces=false` keep the object
//!   out of the controller's cache (main.go `Cache.ByObject`, `DefaultNamespaces`); the same
//!   flags of source-controller keep a source out of its cache, so it is never fetched;
//! - a source's revision event dropped: `requestsForRevisionChangeOf` sorts the source's
//!   Kustomizations by dependsOn (`sortAndEnqueue`, fluxcd/pkg runtime/dependency `Sort`) and
//!   returns no request at all when the sort finds a cycle;
//! - a suspended source: source-controller fetches nothing for it;
//! - a `spec.path` not in an artifact older than the Kustomization's spec (or than another
//!   source on the same URL and ref): the fetch is the fix, not the build.

use std::collections::HashMap;

use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use super::{
    Class, Diagnosis, Engine, config_refs, config_written_at, dependency_cycle, key_of,
    last_run_end, next_interval_run, parse_go_duration, run_in_progress, same_revision, secs,
    short_time, source_not_watched, source_ref, spec_written_at, unwatched,
};
use crate::obj;

/// A blind spot found on a Kustomization. JSON (`diagnosis.blindSpot`):
/// `{"kind": "source-event-dropped", "because": "...", "cycle": ["ns/a", "ns/b", "ns/a"],
/// "requestAfterFix": ["ns/apps", ...], "nextRunAt": "...", "newerElsewhere": null,
/// "command": null}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlindSpot {
    /// `not-watched`, `source-not-watched`, `source-event-dropped`, `source-suspended`,
    /// `path-not-fetched`,
    /// `spec-changed-in-flight` or `config-not-watched`.
    pub kind: String,
    /// Why, in the controller's terms (the flag, the cycle, the suspend, the artifact).
    pub because: String,
    /// The dependsOn cycle (`namespace/name`, first repeated last) of `source-event-dropped`.
    pub cycle: Vec<String>,
    /// Kustomizations whose revision event is dropped (`namespace/name`), the one that applies
    /// the cycle's members first when known: each needs a request once the cycle is broken.
    pub request_after_fix: Vec<String>,
    /// When it runs by itself next: its interval run (the last run's end + `spec.interval`,
    /// kustomize-controller requeues a successful run after the interval with 5 % jitter by
    /// default, `--interval-jitter-percentage`).
    pub next_run_at: Option<Timestamp>,
    /// Another source on the same URL and ref that already has a newer revision:
    /// `GitRepository/ns/name at REV`.
    pub newer_elsewhere: Option<String>,
    /// The command that lifts it, when one does (`flux resume source git ...`, `kubectl scale`).
    pub command: Option<String>,
    /// `--check-remote`: the source's branch head on the remote, read from a pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_head: Option<RemoteHead>,
}

/// The remote's branch head as `--check-remote` read it. JSON (`blindSpot.remoteHead`):
/// `{"branch": "main", "commit": "<sha>", "artifactCommit": "<sha>", "newer": true,
/// "from": "seen from pod NS/NAME with git ls-remote"}`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteHead {
    /// The branch the GitRepository follows.
    pub branch: String,
    /// The head commit on the remote.
    pub commit: String,
    /// The commit of the source's artifact (empty when it has none).
    pub artifact_commit: String,
    /// Whether the head differs from the artifact's commit.
    pub newer: bool,
    /// Where it was read.
    pub from: String,
}

impl RemoteHead {
    /// A head `commit` of `branch` against the artifact's `artifact_commit`.
    pub fn new(branch: &str, commit: &str, artifact_commit: &str, from: &str) -> RemoteHead {
        RemoteHead {
            branch: branch.to_string(),
            commit: commit.to_string(),
            artifact_commit: artifact_commit.to_string(),
            newer: commit != artifact_commit,
            from: from.to_string(),
        }
    }
}

/// Records `head` on `d`: a suspended source's finding says which commit it holds back (or
/// that the remote has nothing newer now), replacing "not known from the cluster"; any other
/// diagnosis gets a hint (a source behind its remote fetches at its next interval).
pub fn apply_remote_head(d: &mut Diagnosis, head: RemoteHead) {
    let short = |c: &str| c.chars().take(12).collect::<String>();
    let line = if head.newer {
        format!(
            "the remote's {} is at {} ({}), newer than the artifact's {}",
            head.branch,
            short(&head.commit),
            head.from,
            short(&head.artifact_commit)
        )
    } else {
        format!(
            "the remote's {} is at the artifact's commit {} ({}): nothing newer on the remote now",
            head.branch,
            short(&head.commit),
            head.from
        )
    };
    match d.blind_spot.as_mut() {
        Some(b) if d.class == Class::SourceSuspended => {
            d.summary = d.summary.replace(
                "; whether the remote has newer commits is not known from the cluster",
                "",
            );
            d.summary = format!("{}; {line}", d.summary);
            b.remote_head = Some(head);
        }
        _ => d.hints.push(format!("--check-remote: {line}")),
    }
}

impl BlindSpot {
    /// A blind spot of `kind` with `because`, nothing else known yet.
    pub(in crate::diagnose) fn new(kind: &str, because: String) -> BlindSpot {
        BlindSpot {
            kind: kind.to_string(),
            because,
            cycle: Vec::new(),
            request_after_fix: Vec::new(),
            next_run_at: None,
            newer_elsewhere: None,
            command: None,
            remote_head: None,
        }
    }

    /// The same blind spot with `kind` set.
    pub(in crate::diagnose) fn named(mut self, kind: &str) -> BlindSpot {
        self.kind = kind.to_string();
        self
    }
}

/// (Kind, namespace, name) of a source.
type SourceKey = (String, String, String);

impl Engine<'_> {
    /// `not-watched`: no running kustomize-controller watches `ks` ([`Engine::not_watched`]).
    /// A state that promises a run takes [`Class::NotWatched`]; any other keeps its class as
    /// last written, with the fact said first. Either way no later blind spot is read.
    pub(in crate::diagnose) fn not_watched_rule(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        let b = self.not_watched(ks)?;
        if promises_a_run(ks, d) {
            return Some(apply_not_watched(d, b));
        }
        // A state as last written (Ready, failed, a run recorded in progress): kept, with the
        // fact that nothing runs it now said first.
        d.hints.insert(
            0,
            format!(
                "no running kustomize-controller watches this object: {}; its conditions are what a controller last wrote, and no change reaches it",
                b.because
            ),
        );
        d.blind_spot = Some(b);
        Some(d.class)
    }

    /// A health check in flight for generation N (the Reconciling condition's
    /// `observedGeneration`) while the object is at generation N+1 (a fix pushed during the
    /// check): the running check keeps the spec it started with, so the objects read from the
    /// new spec say nothing about it (never "the next poll passes it"). Gate off (or v1.7.x):
    /// it runs to its end with the old spec and generation N+1 runs right after (the
    /// generation change is queued); gate on, v1.8+ (`CancelHealthCheckOnNewRevision`, any
    /// requeue event): the generation change cancels it now. `blindSpot.kind:
    /// spec-changed-in-flight`, `nextRunAt` when generation N+1 starts.
    pub(in crate::diagnose) fn spec_changed_in_flight(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A suspended Kustomization keeps its class: no blind spot after `not-watched`.
        if d.class == Class::Suspended {
            return None;
        }
        if d.class != Class::HealthCheckInFlight {
            return None;
        }
        let running = obj::condition(ks, "Reconciling").and_then(|c| c.observed_generation);
        let current = obj::i(ks, &["metadata", "generation"]);
        let (Some(n), Some(g)) = (running, current) else {
            return None;
        };
        if g <= n {
            return None;
        }
        let cancels = self
            .controller
            .as_ref()
            .is_some_and(|c| c.cancel_mode == crate::controller::CancelMode::AnyRequeue);
        let hc = d.health_check.as_mut()?;
        // What was read comes from generation g's spec: not what the running check waits on.
        hc.wait_set_read = false;
        let now = self.now();
        let end = hc.ends_at.or(hc.deadline);
        // A predicted end already past: the controller ends the check at its next 5s poll.
        let next = if cancels {
            Some(now)
        } else {
            end.map(|e| e.max(now))
        };
        let because = if cancels {
            format!(
                "generation {g} (a spec change) arrived while the check for generation {n} runs: with CancelHealthCheckOnNewRevision on v1.8+, the generation change cancels that check (HealthCheckCanceled) and generation {g} runs right away"
            )
        } else {
            let end_text = match end {
                Some(e) if e > now => {
                    format!("runs to its end at {} with it", short_time(e))
                }
                Some(e) => format!(
                    "its end, {}, passed {} ago: the controller ends it at its next 5s poll",
                    short_time(e),
                    crate::obj::human_secs(e.duration_since(now).as_secs().abs())
                ),
                None => "runs to its end with it".to_string(),
            };
            format!(
                "generation {g} (a spec change) arrived while the check for generation {n} runs: that check keeps the spec it started with (nothing at the API cancels it with the gate off) and {end_text}; generation {g} runs right after it"
            )
        };
        if !d.blocking.is_empty() || !cancels {
            d.hints.push(format!(
                "the objects listed are read from generation {g}'s spec: what its own check will wait on, not what the running check waits on"
            ));
        }
        d.summary = format!("{}; {because}", d.summary);
        let mut b = BlindSpot::new("spec-changed-in-flight", because);
        b.next_run_at = next;
        d.blind_spot = Some(b);
        Some(Class::HealthCheckInFlight)
    }

    /// The blind spot when no running kustomize-controller watches `ks`: the controller read
    /// excludes it ([`crate::controller::ControllerFacts::excludes`]) and no other kustomize-controller
    /// Deployment that selects it is running (the shards of a sharded install, read when one
    /// is excluded: [`crate::snapshot::Snapshot::kustomize_controllers`]).
    fn not_watched(&self, ks: &Value) -> Option<BlindSpot> {
        let c = self.controller.as_ref()?;
        let snap = self.idx.snap;
        unwatched(
            c,
            &snap.kustomize_controllers,
            snap,
            ks,
            "kustomize-controller",
            "nothing reconciles its shard",
        )
        .map(|b| b.named("not-watched"))
    }

    /// A Kustomization whose source (GitRepository, OCIRepository, Bucket) no running
    /// source-controller watches ([`source_not_watched`]): the source never gets an artifact
    /// (or keeps the last one fetched before it was excluded), so "waiting for the source" and
    /// "the next run applies it" are promises nobody keeps. Class [`Class::NotWatched`] with
    /// `blindSpot.kind: source-not-watched` when the state as written waits on the source or
    /// says nothing is wrong (healthy, reconciling with no run in progress, source-not-ready,
    /// source-suspended, a dropped revision, or any state promising a run while the source has
    /// no artifact); any other state (a failed build or check, a run in progress) keeps its
    /// class with the fact as its first hint.
    pub(in crate::diagnose) fn source_unwatched(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A suspended Kustomization keeps its class: no blind spot after `not-watched`.
        if d.class == Class::Suspended {
            return None;
        }
        let src = self.source_obj(ks)?;
        let b = source_not_watched(self.idx.snap, src)?;
        let artifact = obj::s(src, &["status", "artifact", "revision"]).map(String::from);
        let takes_class = matches!(
            d.class,
            Class::Healthy
                | Class::SourceNotReady
                | Class::SourceSuspended
                | Class::SourceEventDropped
        ) || (d.class == Class::Reconciling && run_in_progress(ks).is_none())
            || (artifact.is_none() && promises_a_run(ks, d));
        let src_ref = format!(
            "{}/{} in {}",
            obj::kind(src).to_ascii_lowercase(),
            obj::name(src),
            obj::namespace(src)
        );
        let head = format!(
            "no running source-controller watches {src_ref}: {}",
            b.because
        );
        if !takes_class {
            d.hints
                .insert(0, format!("{head}; no new revision of it is ever fetched"));
            d.blind_spot = Some(b);
            return Some(d.class);
        }
        let last = d.summary.clone();
        d.summary = match &artifact {
            None => format!(
                "{head}; it has no artifact, so this Kustomization never gets anything to apply"
            ),
            Some(rev) => format!(
                "{head}; its artifact {rev} is the last one fetched before that, and no new commit ever reaches this Kustomization"
            ),
        };
        not_watched_state(
            d,
            vec![format!("as last written by the controllers: {last}")],
            b,
        );
        Some(Class::NotWatched)
    }

    /// Whether `ks` lost its source's new revision to a dependsOn cycle
    /// ([`Engine::dropped_cycles`]): Ready=True at an older revision, no run, request or new
    /// generation that would start one, so it applies the revision only at its interval
    /// run. A member of the cycle keeps its own class (its dependsOn wait) with a hint naming
    /// the blast radius.
    pub(in crate::diagnose) fn revision_event_dropped(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A suspended Kustomization keeps its class: no blind spot after `not-watched`.
        if d.class == Class::Suspended {
            return None;
        }
        let src = source_ref(ks);
        let cycle = self.dropped_cycles().get(&src)?;
        let src_name = format!("{}/{}/{}", src.0, src.1, src.2);
        let rev = d
            .source
            .as_ref()
            .and_then(|s| s.artifact_revision.clone())
            .unwrap_or_default();
        let affected = self.dropped_event_kustomizations(&src, cycle);
        let because = format!(
            "the dependsOn cycle {} among the Kustomizations of {src_name} fails kustomize-controller's dependency sort of the revision event (requestsForRevisionChangeOf -> sortAndEnqueue: circular dependency detected), so no Kustomization of {src_name} is queued for {rev}",
            cycle.join(" -> ")
        );
        if cycle.contains(&key_of(ks)) {
            d.hints.push(format!(
                "{because}: the cycle also holds back {} (they apply {rev} only at their interval runs)",
                if affected.is_empty() {
                    "no other Kustomization now".to_string()
                } else {
                    affected.join(", ")
                }
            ));
            return cycle_member_promised_a_run(d, cycle, &because, &rev, affected);
        }
        let ready_true = d.ready.as_ref().is_some_and(|r| r.is_true());
        let pending = d.request.as_ref().is_some_and(|r| r.pending)
            || obj::i(ks, &["metadata", "generation"])
                != obj::i(ks, &["status", "observedGeneration"]);
        let newer = d
            .source
            .as_ref()
            .is_some_and(|s| s.newer_revision_available);
        if !ready_true || pending || !newer || run_in_progress(ks).is_some() {
            return None;
        }
        let next = next_interval_run(ks);
        let when = when_next(next, self.now());
        let applied = d
            .source
            .as_ref()
            .and_then(|s| s.last_applied_revision.clone());
        let hint = format!("as last written by kustomize-controller: {}", d.summary);
        d.summary = format!(
            "Ready at {}, but {src_name}'s new revision {rev} was dropped: {because}; it applies {rev} {when}",
            applied.as_deref().unwrap_or("?")
        );
        d.hints.retain(|h| !h.starts_with("source has "));
        d.hints.insert(0, hint);
        let mut b = BlindSpot::new("source-event-dropped", because);
        b.cycle = cycle.clone();
        b.request_after_fix = affected;
        b.next_run_at = next;
        d.blind_spot = Some(b);
        Some(Class::SourceEventDropped)
    }

    /// Whether every one of kustomize-controller's `--concurrent` workers is held by another
    /// Kustomization's run (in any namespace: [`Engine::worker_holders`]). The one test of
    /// worker starvation, for its hint and for the missed-event rule (the end of some run may
    /// be unknown: [`Diagnosis::worker_free_at`] stays unset then, the wait does not).
    pub(crate) fn all_workers_held_by_others(&self, ks: &Value) -> bool {
        let Some(c) = &self.controller else {
            return false;
        };
        let key = key_of(ks);
        let holders = self.worker_holders();
        holders.len() as u32 >= c.concurrent && !holders.iter().any(|(k, _)| *k == key)
    }

    /// Whether `ks` missed its source's current revision event although nothing drops it now
    /// (no cycle among the source's Kustomizations today: one was broken since, or the object
    /// was out of the controller's watch when the revision came): Ready=True at an older
    /// revision, no run in progress, no request or new generation pending, no worker wait
    /// ([`Diagnosis::worker_free_at`]), and no status write by kustomize-controller since the
    /// artifact changed (`status.artifact.lastUpdateTime`), for more than
    /// [`EVENT_GRACE_SECS`]. A delivered revision event starts a run at once when a worker is
    /// free, and that run writes its Reconciling condition first (kustomize-controller
    /// `Reconcile`: "Fetching manifests for revision ..."), so no write since means no run was
    /// queued: it applies the revision only at its interval run, never "the next run applies
    /// it". Found by the fresh-user trial of 2026-12-03 (a cycle broken after a dropped
    /// revision: the sibling was "reconciling", exit 0, for the rest of its interval).
    pub(in crate::diagnose) fn revision_event_missed(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A suspended Kustomization keeps its class: no blind spot after `not-watched`.
        if d.class == Class::Suspended {
            return None;
        }
        let ready_true = d.ready.as_ref().is_some_and(|r| r.is_true());
        let pending = d.request.as_ref().is_some_and(|r| r.pending)
            || obj::i(ks, &["metadata", "generation"])
                != obj::i(ks, &["status", "observedGeneration"]);
        let sf = d.source.as_ref().filter(|s| s.newer_revision_available)?;
        // Who holds the workers must be known: runs of other namespaces hold them too, and a
        // queue behind them is not a dropped event (trial4).
        if d.class != Class::Reconciling
            || !ready_true
            || pending
            || d.worker_free_at.is_some()
            || run_in_progress(ks).is_some()
            || !self.idx.snap.holders_known()
            || self.all_workers_held_by_others(ks)
        {
            return None;
        }
        let made = self
            .source_obj(ks)
            .and_then(|s| obj::s(s, &["status", "artifact", "lastUpdateTime"]))
            .and_then(obj::parse_time)?;
        let now = self.now();
        let since = now.duration_since(made).as_secs();
        // Without a recorded last run there is no evidence either way: the old reading stays.
        if since < EVENT_GRACE_SECS || last_run_end(ks).is_none_or(|t| t >= made) {
            return None;
        }
        let rev = sf.artifact_revision.clone().unwrap_or_default();
        let applied = sf.last_applied_revision.clone();
        let next = next_interval_run(ks);
        let because = format!(
            "{}'s revision {rev} has been its artifact since {} ({} ago), and kustomize-controller has not run {} since: a delivered revision event starts a run within seconds while a worker is free, so this one was never queued (a dependsOn cycle among the source's Kustomizations when the revision arrived drops the event for all of them, and nothing queues it again once the cycle is gone)",
            sf.source,
            short_time(made),
            obj::human_secs(since),
            obj::name(ks)
        );
        let hint = format!("as last written by kustomize-controller: {}", d.summary);
        d.summary = format!(
            "Ready at {}, but {because}; it applies {rev} {}",
            applied.as_deref().unwrap_or("?"),
            when_next(next, now)
        );
        d.hints.retain(|h| !h.starts_with("source has "));
        d.hints.insert(0, hint);
        let mut b = BlindSpot::new("source-event-dropped", because);
        b.next_run_at = next;
        d.blind_spot = Some(b);
        Some(Class::SourceEventDropped)
    }

    /// The Kustomizations of `src` whose revision event the cycle drops (not at the source's
    /// revision, not on the cycle), the one whose inventory holds a member of the cycle (it
    /// applies their dependsOn) first.
    fn dropped_event_kustomizations(&self, src: &SourceKey, cycle: &[String]) -> Vec<String> {
        let Some(rev) = self
            .idx
            .sources
            .get(src)
            .and_then(|s| obj::s(s, &["status", "artifact", "revision"]))
        else {
            return Vec::new();
        };
        let mut v: Vec<(bool, String)> = self
            .idx
            .snap
            .kustomizations
            .iter()
            .filter(|k| source_ref(k) == *src && !cycle.contains(&key_of(k)))
            .filter(|k| !same_revision(Some(rev), obj::s(k, &["status", "lastAttemptedRevision"])))
            .map(|k| {
                let applies_cycle = obj::arr(k, &["status", "inventory", "entries"])
                    .iter()
                    .filter_map(|e| obj::s(e, &["id"]))
                    .any(|id| {
                        cycle.iter().any(|c| {
                            let (ns, n) = c.split_once('/').unwrap_or(("", c.as_str()));
                            id == format!("{ns}_{n}_kustomize.toolkit.fluxcd.io_Kustomization")
                        })
                    });
                (!applies_cycle, key_of(k))
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, k)| k).collect()
    }

    /// For each source, the dependsOn cycle that makes kustomize-controller drop its revision
    /// event, as `requestsForRevisionChangeOf` builds it: the source's Kustomizations in the
    /// controller's cache (those its watch selector selects) except those Ready (v1.8.2+: or
    /// Reconciling) whose `lastAttemptedRevision` is the artifact's, sorted by dependsOn
    /// with edges only from those in the list (fluxcd/pkg runtime/dependency `Sort`, a
    /// depth-first search). Computed once per snapshot.
    fn dropped_cycles(&self) -> &HashMap<SourceKey, Vec<String>> {
        self.dropped.get_or_init(|| {
            let reconciling_skipped = self
                .controller
                .as_ref()
                .and_then(|c| c.version)
                .is_none_or(|v| v.at_least(1, 8, 2));
            let mut by_source: HashMap<SourceKey, Vec<&Value>> = HashMap::new();
            for k in &self.idx.snap.kustomizations {
                if self
                    .controller
                    .as_ref()
                    .is_some_and(|c| c.excludes(k).is_some())
                {
                    continue;
                }
                by_source.entry(source_ref(k)).or_default().push(k);
            }
            let mut out = HashMap::new();
            for (src, list) in by_source {
                let Some(rev) = self
                    .idx
                    .sources
                    .get(&src)
                    .and_then(|s| obj::s(s, &["status", "artifact", "revision"]))
                else {
                    continue;
                };
                let queued: Vec<&Value> = list
                    .into_iter()
                    .filter(|k| {
                        let at_rev = same_revision(
                            Some(rev),
                            obj::s(k, &["status", "lastAttemptedRevision"]),
                        );
                        let ready = obj::condition(k, "Ready").is_some_and(|c| c.is_true());
                        let reconciling = reconciling_skipped
                            && obj::condition(k, "Reconciling").is_some_and(|c| c.is_true());
                        !((ready || reconciling) && at_rev)
                    })
                    .collect();
                if let Some(c) = dependency_cycle(&queued) {
                    out.insert(src, c);
                }
            }
            out
        })
    }

    /// Whether `ks`, Ready at its source's revision with nothing pending, reads a ConfigMap or
    /// Secret ([`config_refs`], metadata in [`crate::snapshot::Snapshot::configs`]) written
    /// after its last run ended ([`last_run_end`]) that kustomize-controller is not told about
    /// ([`crate::controller::ControllerFacts::config_unwatched`]): the run that applies the change is its
    /// interval run, never "Ready: nothing is stuck" (folklore: "I changed cluster-vars and
    /// nothing happened"; also a parent that applies the ConfigMap after the child already ran
    /// on the same revision event). No last run recorded, or the object not read: no claim.
    pub(in crate::diagnose) fn config_change_unseen(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A suspended Kustomization keeps its class: no blind spot after `not-watched`.
        if d.class == Class::Suspended {
            return None;
        }
        if d.class != Class::Healthy || run_in_progress(ks).is_some() {
            return None;
        }
        let c = self.controller.as_ref()?;
        let last = last_run_end(ks)?;
        let snap = self.idx.snap;
        let found = config_refs(ks).into_iter().find_map(|r| {
            let cfg = snap
                .configs
                .get(&format!("{}/{}/{}", r.kind, r.namespace, r.name))?;
            let written = config_written_at(cfg).filter(|t| *t > last)?;
            let why = c.config_unwatched(cfg)?;
            Some((r, written, why))
        });
        let (r, written, why) = found?;
        let now = self.now();
        let next = next_interval_run(ks);
        let because = format!(
            "{} {}/{} ({}) was written at {}, after its last run ended at {}, and kustomize-controller is not told: {why}",
            r.kind,
            r.namespace,
            r.name,
            r.field,
            short_time(written),
            short_time(last)
        );
        let hint = format!("as last written by kustomize-controller: {}", d.summary);
        d.summary = format!(
            "Ready at {}, but {because}; the change applies {}",
            d.source
                .as_ref()
                .and_then(|s| s.last_applied_revision.as_deref())
                .unwrap_or("?"),
            when_next(next, now)
        );
        d.hints.insert(0, hint);
        let mut b = BlindSpot::new("config-not-watched", because);
        b.next_run_at = next;
        d.blind_spot = Some(b);
        Some(Class::ConfigNotWatched)
    }

    /// Whether `ks`, Ready at its source's current revision, reads a suspended source: a
    /// finding ([`Class::SourceSuspended`]) with what it holds back, and another source on the
    /// same URL and ref that already has a newer revision when the snapshot has one.
    pub(in crate::diagnose) fn source_suspended(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A suspended Kustomization keeps its class: no blind spot after `not-watched`.
        if d.class == Class::Suspended {
            return None;
        }
        let sf = d.source.as_ref().filter(|s| s.suspended)?;
        if d.class != Class::Healthy {
            return None;
        }
        let src = self.source_obj(ks);
        let newer = src.and_then(|s| self.newer_elsewhere(s));
        let rev = sf.artifact_revision.clone().unwrap_or_default();
        let (kind, sns, sname) = source_ref(ks);
        let cli = match kind.as_str() {
            "GitRepository" => "git",
            "OCIRepository" => "oci",
            "Bucket" => "bucket",
            _ => "git",
        };
        let because = format!(
            "{} is suspended (spec.suspend: true): source-controller fetches nothing for it, so no commit pushed after {rev} reaches {}",
            sf.source,
            obj::name(ks)
        );
        let held = match &newer {
            Some(n) => format!("; {n} on the same URL and ref already has a newer revision"),
            None => "; whether the remote has newer commits is not known from the cluster".into(),
        };
        d.summary = format!("Ready at {rev}, but {because}{held}");
        d.hints
            .retain(|h| !h.starts_with("source ") || !h.ends_with("is suspended"));
        let mut b = BlindSpot::new("source-suspended", because);
        b.newer_elsewhere = newer;
        b.command = Some(format!("flux resume source {cli} {sname} -n {sns}"));
        d.blind_spot = Some(b);
        Some(Class::SourceSuspended)
    }

    /// Another source of the same kind on the same `spec.url` and `spec.ref` whose artifact
    /// has another revision, made after `src`'s: `GitRepository/ns/name at REV`.
    fn newer_elsewhere(&self, src: &Value) -> Option<String> {
        let url = obj::s(src, &["spec", "url"])?;
        let r#ref = obj::at(src, &["spec", "ref"]);
        let rev = obj::s(src, &["status", "artifact", "revision"]);
        let made = obj::s(src, &["status", "artifact", "lastUpdateTime"]).and_then(obj::parse_time);
        self.idx
            .snap
            .sources
            .iter()
            .filter(|o| obj::kind(o) == obj::kind(src) && key_of(o) != key_of(src))
            .filter(|o| {
                obj::s(o, &["spec", "url"]) == Some(url) && obj::at(o, &["spec", "ref"]) == r#ref
            })
            .filter_map(|o| {
                let orev = obj::s(o, &["status", "artifact", "revision"])?;
                let omade =
                    obj::s(o, &["status", "artifact", "lastUpdateTime"]).and_then(obj::parse_time);
                (!same_revision(Some(orev), rev)
                    && made.is_none_or(|m| omade.is_some_and(|o| o > m)))
                .then(|| format!("{}/{} at {orev}", obj::kind(o), key_of(o)))
            })
            .next()
    }

    /// Whether a `kustomization path not found` (reason ArtifactFailed) comes from an artifact
    /// older than what the Kustomization expects: its spec was written after the artifact was
    /// made, or another source on the same URL and ref has a newer revision. Then the path
    /// was most likely pushed after the last fetch, and the fix is to fetch (`--with-source`):
    /// [`Class::SourceNotReady`], never `build-failed`.
    pub(in crate::diagnose) fn path_not_fetched(
        &self,
        ks: &Value,
        d: &mut Diagnosis,
    ) -> Option<Class> {
        // A suspended Kustomization keeps its class: no blind spot after `not-watched`.
        if d.class == Class::Suspended {
            return None;
        }
        let r = d.ready.as_ref()?;
        if d.class != Class::BuildFailed
            || r.reason() != "ArtifactFailed"
            || !r.message().contains("kustomization path not found")
        {
            return None;
        }
        let src = self.source_obj(ks)?;
        let rev = obj::s(src, &["status", "artifact", "revision"]).unwrap_or("?");
        let made = obj::s(src, &["status", "artifact", "lastUpdateTime"]).and_then(obj::parse_time);
        let spec_at = spec_written_at(ks);
        let newer = self.newer_elsewhere(src);
        let evidence = match (&newer, made, spec_at) {
            (Some(n), _, _) => format!("{n} on the same URL and ref has a newer one"),
            (None, Some(m), Some(s)) if s > m => format!(
                "this Kustomization's spec, written at {} after that fetch",
                short_time(s)
            ),
            _ => return None,
        };
        let path = obj::s(ks, &["spec", "path"]).unwrap_or("./");
        let (kind, sns, sname) = source_ref(ks);
        let next_fetch = made.and_then(|m| {
            let i = parse_go_duration(obj::s(src, &["spec", "interval"])?).ok()?;
            m.checked_add(secs(i.as_secs_f64())).ok()
        });
        let because = format!(
            "spec.path {path} is not in {kind}/{sns}/{sname}'s artifact {rev}{}, which is older than {evidence}: the path was most likely pushed after that fetch",
            made.map(|m| format!(" (fetched {})", short_time(m)))
                .unwrap_or_default()
        );
        d.summary = format!(
            "{because}; --with-source fetches the branch head now{}",
            next_fetch
                .map(|t| format!(
                    " (source-controller's next fetch by itself: {})",
                    short_time(t)
                ))
                .unwrap_or_default()
        );
        d.hints
            .retain(|h| !h.contains("does not exist in the source's artifact"));
        d.hints.insert(
            0,
            format!(
                "as last written by kustomize-controller: Ready=False ArtifactFailed: {}",
                r.message()
            ),
        );
        let mut b = BlindSpot::new("path-not-fetched", because);
        b.newer_elsewhere = newer;
        b.next_run_at = next_fetch;
        d.blind_spot = Some(b);
        Some(Class::SourceNotReady)
    }
}

/// A member of the dependsOn cycle whose own status still promises a run (Ready at an older
/// revision, "the next run applies it"; a request not handled yet): no run applies the new
/// revision, not even its interval run, where each member's dependsOn check waits for the next
/// member to apply it (kustomize-controller `checkDependencies`: a dependency on the same
/// source must be Ready at the source's revision). A member already held at its dependsOn
/// check keeps that class (it says "a dependsOn cycle never ends by itself"). Found by the
/// trial of 2026-12-03: the members were "reconciling: nothing is stuck", exit 0.
fn cycle_member_promised_a_run(
    d: &mut Diagnosis,
    cycle: &[String],
    because: &str,
    rev: &str,
    affected: Vec<String>,
) -> Option<Class> {
    if !matches!(
        d.class,
        Class::Reconciling | Class::Healthy | Class::RequestPending
    ) {
        return None;
    }
    let hint = format!("as last written by kustomize-controller: {}", d.summary);
    d.summary = format!(
        "on the dependsOn cycle {}: {because}; no run applies {rev}, not even its interval run (each member's dependsOn check waits for the next member to apply {rev} first): break the cycle in Git",
        cycle.join(" -> ")
    );
    d.hints.retain(|h| !h.starts_with("source has "));
    d.hints.insert(0, hint);
    let mut b = BlindSpot::new("source-event-dropped", because.to_string());
    b.cycle = cycle.to_vec();
    b.request_after_fix = affected;
    d.blind_spot = Some(b);
    Some(Class::SourceEventDropped)
}

/// Whether the diagnosis of `ks` from its conditions promises a run that only a watching
/// controller makes: a request pending, no status yet, a generation not observed, or a newer
/// source revision "the next run applies" (reconciling with no run in progress).
fn promises_a_run(ks: &Value, d: &Diagnosis) -> bool {
    d.class == Class::RequestPending
        || d.request.as_ref().is_some_and(|r| r.pending)
        || d.ready.is_none()
        || obj::i(ks, &["metadata", "generation"]) != obj::i(ks, &["status", "observedGeneration"])
        || (d.class == Class::Reconciling && run_in_progress(ks).is_none())
}

/// What [`Class::NotWatched`] says of `d`: its conditions are what some controller last wrote
/// (or none), nothing runs it and no request is ever handled.
fn apply_not_watched(d: &mut Diagnosis, b: BlindSpot) -> Class {
    let last = d.summary.clone();
    d.summary = format!(
        "no running kustomize-controller watches this object: {}",
        b.because
    );
    let mut hints = vec![if d.ready.is_some() {
        format!("its conditions are what a controller last wrote, not now: {last}")
    } else {
        "it has no status: no kustomize-controller has ever reconciled it".to_string()
    }];
    if let Some(r) = d.request.as_ref().filter(|r| r.pending) {
        hints.push(format!(
            "reconcile request {} is never handled while no controller watches it",
            r.requested_at
        ));
    }
    not_watched_state(d, hints, b);
    Class::NotWatched
}

/// What a `not-watched` diagnosis keeps of the state as last written: only `hints`. No check,
/// ETA, overdue run, worker wait or blocker is promised while no controller watches it (or its
/// source); `b` says why.
fn not_watched_state(d: &mut Diagnosis, hints: Vec<String>, b: BlindSpot) {
    d.hints = hints;
    d.health_check = None;
    d.eta = None;
    d.overdue_secs = None;
    d.worker_free_at = None;
    d.blocking.clear();
    d.blind_spot = Some(b);
}

/// Seconds after a source's artifact changed within which a Kustomization of that source with
/// a free worker has started its run (and written its Reconciling condition) if the revision
/// event was delivered: kustomize-controller queues on the watch event and a free worker takes
/// it at once; 30 s leaves room for a loaded API server and a slow status write.
pub const EVENT_GRACE_SECS: i64 = 30;

/// "at its next interval run, about T (D from now, ...)" for `next` seen at `now`.
fn when_next(next: Option<Timestamp>, now: Timestamp) -> String {
    match next {
        Some(t) if t > now => format!(
            "at its next interval run, about {} ({} from now, spec.interval after its last run)",
            short_time(t),
            obj::human_secs(t.duration_since(now).as_secs())
        ),
        Some(t) => format!(
            "at its next interval run, due since {} (spec.interval after its last run)",
            short_time(t)
        ),
        None => "only at its next interval run (spec.interval after its last run)".to_string(),
    }
}
