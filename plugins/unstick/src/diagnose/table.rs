//! The decision table: the one ordered list of rules that gives a Kustomization its
//! [`Class`], and [`Engine::decide`], the one function that assigns it.
//!
//! Read top down, the first row that decides gives the class:
//!
//! 1. a controller that is not running (`controller-not-running`): the conditions are what it
//!    last wrote and nothing moves until it runs; a suspended Kustomization stays suspended;
//! 2. the controller's blind spots (`blind.rs`), where the status promises a run that will
//!    not come: not watched, its source not watched, a spec changed during a check in flight,
//!    a source's revision event dropped or missed, a suspended source, a config change not
//!    watched, a path not in a stale artifact. A suspended Kustomization skips all but the
//!    first;
//! 3. the conditions, most specific first: suspended, stalled, a health check in flight, a
//!    run in progress, Ready not True, a pending request, no Ready yet, a generation not
//!    observed, a failing or missing source, a newer source revision; healthy last.
//!
//! The overrides (1 and 2) read the class the conditions give (3) and the facts it fills
//! (the health check, the blocking objects, the first summary that their wording quotes as
//! "as last written by ..."), so [`Engine::decide`] reads the conditions' rows first, then
//! walks the overrides in order; none deciding keeps the conditions' class. A rule returns
//! the class it takes (an override may keep the class as written while saying a fact first,
//! which still stops the walk) and never writes [`Diagnosis::class`] itself.

use serde_json::Value;

use crate::obj;
use cluster_loop::conditions::Condition;

use crate::diagnose::*;

/// An override of the class the conditions give: reads that class (`d.class`) and the facts,
/// fills what it says (summary, hints, blind spot) and returns the class it takes, or `None`
/// when it does not apply.
pub(in crate::diagnose) type Override = fn(&Engine<'_>, &Value, &mut Diagnosis) -> Option<Class>;

/// A reading of the conditions: the class and summary they give, or `None` when the row does
/// not apply. Fills the facts its case reads (health check, ETA, blocking objects, hints).
pub(in crate::diagnose) type Written =
    fn(&Engine<'_>, &Value, &mut Diagnosis) -> Option<(Class, String)>;

/// How a row of [`RULES`] decides.
#[derive(Clone, Copy)]
pub(in crate::diagnose) enum Decides {
    /// Overrides the class the conditions give.
    Override(Override),
    /// Reads the class from the conditions.
    Written(Written),
}

/// One row of the decision table.
#[derive(Clone, Copy)]
pub(in crate::diagnose) struct Rule {
    /// The row's name (a class or a `blindSpot.kind`), as the order test pins it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub name: &'static str,
    /// How the row decides.
    pub decides: Decides,
}

const fn over(name: &'static str, f: Override) -> Rule {
    Rule {
        name,
        decides: Decides::Override(f),
    }
}

const fn written(name: &'static str, f: Written) -> Rule {
    Rule {
        name,
        decides: Decides::Written(f),
    }
}

/// The decision table, in order: the first row that decides gives the class (see the module
/// doc). Every override comes before every reading of the conditions.
pub(in crate::diagnose) const RULES: &[Rule] = &[
    over("controller-not-running", |e, ks, d| {
        e.controller_not_running(ks, d)
    }),
    over("not-watched", |e, ks, d| e.not_watched_rule(ks, d)),
    over("source-not-watched", |e, ks, d| e.source_unwatched(ks, d)),
    over("spec-changed-in-flight", |e, ks, d| {
        e.spec_changed_in_flight(ks, d)
    }),
    over("source-event-dropped", |e, ks, d| {
        e.revision_event_dropped(ks, d)
    }),
    over("source-event-missed", |e, ks, d| {
        e.revision_event_missed(ks, d)
    }),
    over("source-suspended", |e, ks, d| e.source_suspended(ks, d)),
    over("config-not-watched", |e, ks, d| {
        e.config_change_unseen(ks, d)
    }),
    over("path-not-fetched", |e, ks, d| e.path_not_fetched(ks, d)),
    written("suspended", |_, ks, d| {
        obj::b(ks, &["spec", "suspend"]).then(|| Engine::suspended_class(ks, d))
    }),
    written("stalled", |_, ks, _| {
        let c = obj::condition(ks, "Stalled").filter(Condition::is_true)?;
        Some((
            Class::Stalled,
            format!("stalled ({}): {}", c.reason(), c.message()),
        ))
    }),
    written("health-check-in-flight", |e, ks, d| {
        let c = run_in_progress(ks)?;
        let step = RunStep::parse(c.message()).filter(RunStep::is_health_check)?;
        Some(e.in_flight_class(ks, &c, &step, d))
    }),
    written("run-in-progress", |e, ks, d| {
        let c = run_in_progress(ks)?;
        Some(e.run_class(ks, &c, d))
    }),
    written("not-ready", |e, ks, d| {
        let r = d.ready.clone().filter(|r| !r.is_true())?;
        Some(e.not_ready_class(ks, &r, d))
    }),
    written("request-pending", |_, _, d| {
        let r = d.request.as_ref().filter(|r| r.pending)?;
        Some(request_pending(r))
    }),
    written("no-ready-yet", |_, _, d| {
        d.ready.is_none().then(|| {
            (
                Class::Reconciling,
                "not reconciled yet (no Ready condition)".to_string(),
            )
        })
    }),
    written("generation-not-observed", |_, ks, _| {
        let generation = obj::i(ks, &["metadata", "generation"])?;
        let observed = obj::i(ks, &["status", "observedGeneration"])?;
        (generation != observed).then(|| {
            (
                Class::Reconciling,
                format!("generation {generation} not observed yet (observedGeneration {observed})"),
            )
        })
    }),
    written("source-failing", |_, _, d| {
        let s = d
            .source
            .as_ref()
            .filter(|s| s.failure().is_some() || !s.found)?;
        Some(source_failing(s))
    }),
    written("newer-revision", |_, _, d| {
        let s = d.source.as_ref().filter(|s| {
            s.artifact_revision.is_some()
                && !same_revision(
                    s.artifact_revision.as_deref(),
                    s.last_applied_revision.as_deref(),
                )
        })?;
        Some((
            Class::Reconciling,
            format!(
                "Ready at {}; source has {}, the next run applies it",
                s.last_applied_revision.as_deref().unwrap_or("?"),
                s.artifact_revision.as_deref().unwrap_or("?")
            ),
        ))
    }),
    written("healthy", |_, _, d| {
        Some((
            Class::Healthy,
            format!(
                "Ready: {}",
                d.ready.as_ref().map(|r| r.message()).unwrap_or("")
            ),
        ))
    }),
];

impl Engine<'_> {
    /// The one place [`Diagnosis::class`] is assigned: the class and summary of the first
    /// reading of the conditions in [`RULES`] that decides, the facts read after it
    /// ([`Engine::facts_of_written`]), then the first override in [`RULES`] that decides, if
    /// any.
    pub(in crate::diagnose) fn decide(&self, ks: &Value, d: &mut Diagnosis) {
        let (class, summary) = RULES
            .iter()
            .find_map(|r| match r.decides {
                Decides::Written(f) => f(self, ks, d),
                Decides::Override(_) => None,
            })
            .expect("the last row, healthy, always decides");
        d.class = class;
        d.summary = summary;
        self.facts_of_written(ks, d);
        if let Some(class) = RULES.iter().find_map(|r| match r.decides {
            Decides::Override(f) => f(self, ks, d),
            Decides::Written(_) => None,
        }) {
            d.class = class;
        }
    }
}

/// `request-pending`: a reconcile request not handled yet, with its age.
fn request_pending(r: &RequestFacts) -> (Class, String) {
    let age = r
        .age_secs
        .map(|a| format!(" {} ago", obj::human_secs(a)))
        .unwrap_or_default();
    (
        Class::RequestPending,
        format!(
            "reconcile requested{age} ({}) but not handled yet (lastHandledReconcileAt {})",
            r.requested_at,
            r.last_handled_reconcile_at.as_deref().unwrap_or("never")
        ),
    )
}

/// `source-not-ready` while Ready: the source failing, or missing.
fn source_failing(s: &SourceFacts) -> (Class, String) {
    (
        Class::SourceNotReady,
        format!(
            "Ready at {} but source {} is {}",
            s.last_applied_revision.as_deref().unwrap_or("?"),
            s.source,
            if s.found {
                format!(
                    "not ready: {}",
                    s.failure().map(|c| c.message()).unwrap_or("")
                )
            } else {
                "missing".to_string()
            }
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order of the decision table, pinned: a change of order is a change of behaviour
    /// and must change this test.
    #[test]
    fn the_decision_table_order_is_pinned() {
        let names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "controller-not-running",
                "not-watched",
                "source-not-watched",
                "spec-changed-in-flight",
                "source-event-dropped",
                "source-event-missed",
                "source-suspended",
                "config-not-watched",
                "path-not-fetched",
                "suspended",
                "stalled",
                "health-check-in-flight",
                "run-in-progress",
                "not-ready",
                "request-pending",
                "no-ready-yet",
                "generation-not-observed",
                "source-failing",
                "newer-revision",
                "healthy",
            ]
        );
        // Every override before every reading of the conditions: [`Engine::decide`] reads
        // them in that order.
        let first_written = RULES
            .iter()
            .position(|r| matches!(r.decides, Decides::Written(_)))
            .unwrap();
        assert!(
            RULES[first_written..]
                .iter()
                .all(|r| matches!(r.decides, Decides::Written(_)))
        );
    }
}
