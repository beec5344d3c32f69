//! The proof judge: after our writes, is the Kustomization recovered, still moving toward a
//! verdict, or at a state that does not end by itself? Pure (one [`Engine`] over one
//! snapshot); [`crate::live::wait_proof`] calls it at every change until the deadline.
//!
//! The contract (docs/unstick.md "Waiting and proof", `--help`):
//!
//! **recovered** means, all at once:
//! - `Ready=True` and no run in progress;
//! - `status.observedGeneration == metadata.generation`;
//! - `status.lastAttemptedRevision == status.lastAppliedRevision ==` the source's
//!   `status.artifact.revision`;
//! - our request was handled: `status.lastHandledReconcileAt == <our requestedAt>` (or a later
//!   request that was handled, whose run started after ours), or after a resume the new
//!   generation was observed;
//! - nothing upstream is moving (below).
//!
//! **not recovered** ([`Verdict::Terminal`]) is said only when nothing upstream is still
//! moving and the state does not end by itself at the revision the source serves now:
//! - the source handled the request we made (its `lastHandledReconcileAt` equals our
//!   `requestedAt`) and has no other request pending;
//! - the source is not Reconciling (a fetch in progress: `Reconciling=True` with a reason
//!   other than `ProgressingWithRetry`, `Ready=Unknown`, or a generation not observed yet);
//! - the Kustomization has attempted the source's latest artifact revision
//!   (`lastAttemptedRevision`), and handled our request;
//! - every dependency on the blocking path is settled in the same sense.
//!
//! Anything else is [`Verdict::Moving`]: the wait goes on until the deadline, which ends in
//! `timed-out`, never in "not recovered".
//!
//! Anchor: flux-operator waits until `lastHandledReconcileAt` equals its request and Ready
//! matches the current generation; this goes further by also tracking revisions, the
//! source's own request, and the dependsOn chain.

use serde_json::Value;

use crate::diagnose::{
    self, Class, Diagnosis, Engine, Heading, REQUESTED_AT, run_in_progress, same_revision,
};
use crate::obj;

/// What our writes asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Expect<'a> {
    /// The `reconcile.fluxcd.io/requestedAt` value written on the Kustomization.
    pub token: Option<&'a str>,
    /// The Kustomization's generation after our resume (when no token was written).
    pub generation: Option<i64>,
    /// The `reconcile.fluxcd.io/requestedAt` value written on its source (`--with-source`).
    pub source_token: Option<&'a str>,
    /// When the plan waits for a fresh run after an in-flight one (`Plan::fresh_run_at`): the
    /// time our writes began. A negative verdict needs a run that started after it and
    /// ended ([`fresh_run_ended`]); until then the in-flight run's outcome is not the answer
    /// (its end can even look like ours: the controller's status patches refresh the object
    /// it holds, so the old run may record our generation or requestedAt).
    pub fresh_run_after: Option<jiff::Timestamp>,
}

/// The judgement of one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The recovered contract holds.
    Recovered,
    /// Not there yet, and something is still moving: the text says what it waits on.
    Moving(String),
    /// A state that does not end by itself at the revision the source serves now: the text
    /// says which, quoting only what the objects say.
    Terminal(String),
}

/// Why a source object is still moving, or `None` when it is settled. `our_token`: the
/// requestedAt we wrote on it (must be handled, or covered by a later handled request).
///
/// source-controller (internal/controller/gitrepository_controller.go, fluxcd/pkg
/// runtime/reconcile `ProgressiveStatus`): a run sets `Reconciling=True` reason `Progressing`
/// (and `Ready=Unknown` on a new upstream revision), success removes Reconciling, a failure
/// leaves it with reason `ProgressingWithRetry`; `lastHandledReconcileAt` is copied from the
/// annotation the run read.
pub fn source_moving(src: &Value, our_token: Option<&str>) -> Option<String> {
    let id = format!(
        "{}/{}/{}",
        obj::kind(src),
        obj::namespace(src),
        obj::name(src)
    );
    if obj::b(src, &["spec", "suspend"]) {
        return None;
    }
    if let Some(t) = our_token
        && !diagnose::token_state(src, t).covered()
    {
        return Some(format!(
            "source {id} has not handled our request {t} yet (lastHandledReconcileAt {})",
            obj::s(src, &["status", "lastHandledReconcileAt"]).unwrap_or("never")
        ));
    }
    if let Some(req) = obj::annotation(src, REQUESTED_AT)
        && obj::s(src, &["status", "lastHandledReconcileAt"]) != Some(req)
    {
        return Some(format!(
            "source {id} has a reconcile request pending ({req})"
        ));
    }
    if let Some(c) = run_in_progress(src) {
        return Some(format!("source {id} is reconciling: {}", c.message()));
    }
    if let Some(c) = obj::condition(src, "Ready")
        && c.status == "Unknown"
    {
        return Some(format!("source {id} is reconciling: {}", c.message()));
    }
    let generation = obj::i(src, &["metadata", "generation"]);
    let og = obj::i(src, &["status", "observedGeneration"]);
    if let (Some(g), Some(o)) = (generation, og)
        && g != o
    {
        return Some(format!(
            "source {id}: generation {g} not observed yet (observedGeneration {o})"
        ));
    }
    None
}

/// Whether our trigger on `ks` was handled: the token (or a later handled request), or the
/// generation observed after a resume (status.observedGeneration, set only on success, or the
/// Ready condition's observedGeneration, set on every outcome — what the flux2 `resume` wait
/// reads). `None` when handled, else what is awaited.
pub fn trigger_pending(ks: &Value, e: &Expect<'_>) -> Option<String> {
    if let Some(t) = e.token {
        let st = diagnose::token_state(ks, t);
        if !st.covered() {
            return Some(format!(
                "the controller has not handled requestedAt {t} yet (lastHandledReconcileAt {})",
                obj::s(ks, &["status", "lastHandledReconcileAt"]).unwrap_or("never")
            ));
        }
        return None;
    }
    if let Some(want) = e.generation {
        let og = obj::i(ks, &["status", "observedGeneration"]).unwrap_or(-1);
        let rog = obj::condition(ks, "Ready")
            .and_then(|c| c.observed_generation)
            .unwrap_or(-1);
        if og < want && rog < want {
            return Some(format!(
                "the controller has not observed generation {want} yet"
            ));
        }
    }
    None
}

/// The recovered contract on the Kustomization itself (see the module docs), given the
/// source's artifact revision: `Ok(())` or what is missing.
pub fn recovered_contract(ks: &Value, artifact: Option<&str>) -> Result<(), String> {
    let ready = obj::condition(ks, "Ready");
    if !ready.as_ref().is_some_and(|c| c.is_true()) {
        return Err("not Ready=True".into());
    }
    if let Some(c) = run_in_progress(ks) {
        return Err(format!("a run is in progress: {}", c.message()));
    }
    let g = obj::i(ks, &["metadata", "generation"]);
    let og = obj::i(ks, &["status", "observedGeneration"]);
    if g != og {
        return Err(format!(
            "observedGeneration {} != generation {}",
            og.unwrap_or(-1),
            g.unwrap_or(-1)
        ));
    }
    let attempted = obj::s(ks, &["status", "lastAttemptedRevision"]);
    let applied = obj::s(ks, &["status", "lastAppliedRevision"]);
    if let Some(a) = artifact {
        if !same_revision(Some(a), applied) {
            return Err(format!(
                "lastAppliedRevision {} is not the source's revision {a}",
                applied.unwrap_or("-")
            ));
        }
        if !same_revision(Some(a), attempted) {
            return Err(format!(
                "lastAttemptedRevision {} is not the source's revision {a}",
                attempted.unwrap_or("-")
            ));
        }
    } else if attempted.is_some() && !same_revision(attempted, applied) {
        return Err(format!(
            "lastAttemptedRevision {} != lastAppliedRevision {}",
            attempted.unwrap_or("-"),
            applied.unwrap_or("-")
        ));
    }
    Ok(())
}

/// Why `ks` (not recovered) is still moving upstream of its own state: its source, a revision
/// not attempted yet, or (for a dependency wait) the same for the blocking dependency.
fn upstream_moving(engine: &Engine<'_>, ks: &Value, source_token: Option<&str>) -> Option<String> {
    let src = engine.source_obj(ks);
    if let Some(src) = src
        && let Some(m) = source_moving(src, source_token)
    {
        return Some(m);
    }
    // Suspended or stalled objects are never run again by themselves.
    if obj::b(ks, &["spec", "suspend"])
        || obj::condition(ks, "Stalled").is_some_and(|c| c.is_true())
    {
        return None;
    }
    if let Some(a) = src.and_then(|s| obj::s(s, &["status", "artifact", "revision"]))
        && !same_revision(Some(a), obj::s(ks, &["status", "lastAttemptedRevision"]))
    {
        return Some(format!(
            "{} has not attempted the source's revision {a} yet (last attempted {})",
            diagnose::key_of(ks),
            obj::s(ks, &["status", "lastAttemptedRevision"]).unwrap_or("nothing")
        ));
    }
    None
}

/// Judge Kustomization `ns/name` in `engine`'s snapshot against what we wrote.
pub fn judge(engine: &Engine<'_>, ns: &str, name: &str, e: &Expect<'_>) -> Verdict {
    let Some(ks) = engine.idx.kustomization(ns, name) else {
        return Verdict::Terminal(format!("Kustomization {ns}/{name} was deleted"));
    };
    let artifact = engine
        .source_obj(ks)
        .and_then(|s| obj::s(s, &["status", "artifact", "revision"]));
    // 1. Our trigger first: nothing is judged on a run that did not read our request.
    if let Some(m) = trigger_pending(ks, e) {
        return Verdict::Moving(m);
    }
    if let Some(c) = run_in_progress(ks) {
        return Verdict::Moving(format!("a run is in progress: {}", c.message()));
    }
    // 2. Upstream of the Kustomization: the source (and our request on it).
    if let Some(m) = engine
        .source_obj(ks)
        .and_then(|s| source_moving(s, e.source_token))
    {
        return Verdict::Moving(m);
    }
    // 3. The contract.
    if recovered_contract(ks, artifact).is_ok() {
        return Verdict::Recovered;
    }
    // 4. Not recovered: terminal only when nothing upstream moves.
    if let Some(m) = upstream_moving(engine, ks, None) {
        return Verdict::Moving(m);
    }
    let Some(d) = engine.diagnose(ns, name) else {
        return Verdict::Terminal(format!("Kustomization {ns}/{name} was deleted"));
    };
    if let Some(m) = dependency_moving(engine, &d) {
        return Verdict::Moving(m);
    }
    if let Some(m) = generation_pending(ks, &d) {
        return Verdict::Moving(m);
    }
    match diagnose::heading(&d) {
        Heading::Moving(m) => Verdict::Moving(m),
        Heading::Terminal(m) => match e.fresh_run_after {
            Some(t) if !fresh_run_ended(ks, t) => Verdict::Moving(format!(
                "{m}; that is the outcome of the run that was in flight: waiting for the fresh run to start and end"
            )),
            _ => Verdict::Terminal(at_revision(&d, artifact, m)),
        },
    }
}

/// A generation the controller has not run yet while a watching controller will: the object
/// is at `metadata.generation` G above `status.observedGeneration` (a fix pushed while a check
/// of the older generation ran). kustomize-controller queued G on the change
/// (`GenerationChangedPredicate`) and runs it after the in-flight run, so a failure of the
/// older generation is not the answer (issue 28: "not recovered" one second before G's run
/// passed). Not for an object no controller watches, nor a suspended one; a Ready condition
/// that records G counts as observed.
fn generation_pending(ks: &Value, d: &Diagnosis) -> Option<String> {
    if matches!(d.class, Class::NotWatched | Class::Suspended) {
        return None;
    }
    let g = obj::i(ks, &["metadata", "generation"])?;
    // A Ready condition recorded at G counts as observed: the in-flight run's status patches
    // refresh the object it holds, so it can record G (then `fresh_run_after` guards).
    let o = obj::i(ks, &["status", "observedGeneration"])
        .unwrap_or(0)
        .max(
            obj::condition(ks, "Ready")
                .and_then(|c| c.observed_generation)
                .unwrap_or(0),
        );
    (g > o).then(|| {
        format!(
            "generation {g} is not run yet (observedGeneration {o}): the controller queued it and runs it after the run in flight; {}",
            d.summary
        )
    })
}

/// Whether a run that started at or after `after` has ended: an entry of `status.history`
/// (fluxcd/pkg apis/meta `History`, upserted by kustomize-controller v1.3+ at the end of every
/// run that got past the build, health-check failures included: kustomization_controller.go
/// `obj.Status.History.Upsert(checksum, time.Now(), time.Since(reconcileStart), ...)`) whose
/// `lastReconciled - lastReconciledDuration` (the run's start) is not before `after`. No
/// history (an older controller, or every run failing before its build): `false`, so the wait
/// ends at its deadline instead of on the in-flight run's outcome.
pub fn fresh_run_ended(ks: &Value, after: jiff::Timestamp) -> bool {
    obj::arr(ks, &["status", "history"]).iter().any(|h| {
        let Some(end) = obj::s(h, &["lastReconciled"]).and_then(obj::parse_time) else {
            return false;
        };
        let took = h
            .get("lastReconciledDuration")
            .and_then(cluster_loop::duration::from_json)
            .map_or(jiff::SignedDuration::ZERO, |d| {
                jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::ZERO)
            });
        end.checked_sub(took).is_ok_and(|start| start >= after)
    })
}

/// For a dependency wait: whether the blocking dependency (the root of the chain) is itself
/// still moving upstream (its source fetching, a revision it has not attempted yet).
fn dependency_moving(engine: &Engine<'_>, d: &Diagnosis) -> Option<String> {
    if d.class != Class::WaitingOnDependencies {
        return None;
    }
    let rc = d.root_cause.as_ref()?;
    let (rns, rname) = rc.kustomization.split_once('/')?;
    let dep = engine.idx.kustomization(rns, rname)?;
    if let Some(c) = run_in_progress(dep) {
        return Some(format!(
            "dependency {} is reconciling: {}",
            rc.kustomization,
            c.message()
        ));
    }
    upstream_moving(engine, dep, None).map(|m| format!("dependency {}: {m}", rc.kustomization))
}

fn at_revision(_d: &Diagnosis, artifact: Option<&str>, m: String) -> String {
    match artifact {
        Some(a) => format!("{m} (at {a}, the revision the source serves now)"),
        None => m,
    }
}
