//! Link 2, the Kustomizations: every in-scope Kustomization is Ready at its source's
//! revision. The verdict source is unstick's engine over the round's snapshot
//! ([`unstick::diagnose::Engine::diagnose`], the same function as `kubectl unstick --all`),
//! never re-derived here:
//! - `ok`: class `healthy` and not a finding ([`unstick::diagnose::is_finding`]);
//! - otherwise unstick's [`unstick::diagnose::heading`]: `Moving` (a run in progress, a
//!   health check in flight, a dependsOn wait on a dependency that is itself moving, a failure
//!   the controller retries on the newer revision it already has) is `waiting`, with the
//!   health check's predicted end (fail-fast or its deadline), else the run's ETA, else now +
//!   its timeout; `Terminal` (failed at the current revision, stalled, suspended, a cycle, a
//!   controller that is not running) is `broken`, with `kubectl unstick` as the fix (it names
//!   the lever for this controller version and proves the result); an apply the API server
//!   refuses the same way on every run (unstick's `refused`: an immutable field, a validation
//!   error, an admission denial, RBAC) is `broken` with unstick's fix for its cause instead,
//!   as no rerun helps.
//!
//! The link is moving ([`crate::chain::LinkReport::moving`], scoped to those Kustomizations
//! by `moving_only`) while a Kustomization will apply a newer source revision by itself, or a
//! run that is not a health check is in progress: the workloads they apply are about to
//! change. A health check in flight for the source's own revision does not move anything.

use cluster_loop::error::Result;
use futures::future::BoxFuture;
use jiff::{SignedDuration, Timestamp};
use unstick::diagnose::{Class, Diagnosis, Heading, heading, is_finding, same_revision};

use super::{Context, Link};
use crate::chain::{Evidence, LinkReport, Verdict};

/// Link 2.
pub struct KustomizationsLink;

impl Link for KustomizationsLink {
    fn position(&self) -> u8 {
        2
    }

    fn id(&self) -> &'static str {
        "kustomizations"
    }

    fn check<'a>(&'a self, cx: &'a Context<'a>) -> BoxFuture<'a, Result<LinkReport>> {
        Box::pin(async move {
            let now = cx.facts.now;
            let members: Vec<Evidence> =
                cx.facts.diagnoses.iter().map(|d| member(d, now)).collect();
            let mut l = LinkReport::from_members(
                2,
                "kustomizations",
                members,
                "no Kustomization in scope (check -n, -A or --source)",
            );
            l.moving_only = cx
                .facts
                .diagnoses
                .iter()
                .filter(|d| moving(d))
                .map(|d| d.kustomization.clone())
                .collect();
            l.moving = !l.moving_only.is_empty();
            Ok(l)
        })
    }

    fn watches(&self) -> Vec<kube::api::ApiResource> {
        unstick::live::api_resource("kustomize.toolkit.fluxcd.io", "Kustomization")
            .into_iter()
            .collect()
    }
}

/// Whether a newer revision is on its way to `d`'s objects: a run (not its health check)
/// or a request in progress, a canceled health check the controller re-runs, or a source
/// revision newer than the last attempted one that the controller will apply by itself
/// (unstick's heading is `Moving`). A health check in flight for the source's own revision
/// is not: those objects are already applied, so a pull failure on them is final. A
/// Kustomization that is `Terminal` (failed, held by a failed dependency, stalled) moves
/// nothing until someone acts.
fn moving(d: &Diagnosis) -> bool {
    if matches!(heading(d), Heading::Terminal(_)) {
        return false;
    }
    if matches!(
        d.class,
        Class::Reconciling | Class::RequestPending | Class::HealthCheckCanceled
    ) {
        return true;
    }
    let Some(s) = d.source.as_ref().filter(|s| s.newer_revision_available) else {
        return false;
    };
    !d.health_check
        .as_ref()
        .is_some_and(|h| same_revision(Some(&h.revision), s.artifact_revision.as_deref()))
}

/// When a waiting Kustomization should be done by: its health check's predicted end, else
/// its run's ETA, else `now` + its timeout (`GetTimeout`).
fn deadline(d: &Diagnosis, now: Timestamp) -> Option<Timestamp> {
    d.health_check
        .as_ref()
        .and_then(|h| h.ends_at)
        .or(d.eta)
        .or_else(|| {
            now.checked_add(SignedDuration::from_secs_f64(d.timeout_secs))
                .ok()
        })
}

/// `kubectl unstick` as the fix; for a Kustomization someone suspended (not an interrupted
/// unstick run, which unstick resumes by itself) with `--force-resume`, as unstick leaves
/// another's suspend alone without it.
fn unstick_fix(class: Class, suspended_by_unstick: bool, ns: &str, name: &str) -> String {
    if class == Class::Suspended && !suspended_by_unstick {
        return format!(
            "if the suspend is no longer wanted: kubectl unstick ks/{name} -n {ns} --force-resume (resumes it and proves the run; flux resume ks {name} -n {ns} only resumes)"
        );
    }
    format!("kubectl unstick ks/{name} -n {ns} (the lever for this controller, and proof)")
}

fn member(d: &Diagnosis, now: Timestamp) -> Evidence {
    let object = format!("Kustomization/{}", d.kustomization);
    let (ns, name) = d
        .kustomization
        .split_once('/')
        .unwrap_or(("", &d.kustomization));
    if d.class == Class::Healthy && !is_finding(d) {
        let rev = d
            .source
            .as_ref()
            .and_then(|s| s.last_applied_revision.clone())
            .unwrap_or_default();
        return Evidence::new(object, Verdict::Ok, format!("Ready at {rev}"));
    }
    let blocking: Vec<String> = d
        .blocking
        .iter()
        .map(|b| format!("{} {}: {}", b.object, b.kstatus, b.message))
        .collect();
    let with_blocking = |t: String| {
        if blocking.is_empty() {
            t
        } else {
            format!("{t}; waits on {}", blocking.join("; "))
        }
    };
    match heading(d) {
        Heading::Moving(t) => Evidence::new(
            object,
            Verdict::Waiting,
            with_blocking(format!("{}: {t}", d.class)),
        )
        .until(deadline(d, now)),
        // An apply the API server refuses the same way on every run: unstick plans no rerun
        // (`fix-in-git`), so the fix is the one for the cause, said here as unstick says it,
        // never "run kubectl unstick" (issue 40: it offered the useless rerun).
        Heading::Terminal(t) if !d.refused.is_empty() => {
            let fix: Vec<&str> = d.refused.iter().map(|r| r.fix.as_str()).collect();
            Evidence::new(object, Verdict::Broken, t).fix(fix.join("; "))
        }
        Heading::Terminal(t) => {
            let mut fix = unstick_fix(d.class, d.suspended_by_unstick_at.is_some(), ns, name);
            if let Some(f) = d.blocking.iter().find_map(|b| b.fix.clone()) {
                fix = format!("{f}; then {fix}");
            }
            // A catalogue signature (a bare-tag image) fails every run the same way until Git
            // has a fix: the fix is in Git first (unstick's lever says the same).
            if let Some(sig) = d.signatures.first() {
                fix = format!(
                    "fix it in Git first: {}; then {fix}",
                    sig.message.trim_end_matches('.')
                );
            }
            Evidence::new(object, Verdict::Broken, with_blocking(t)).fix(fix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trial3: a Kustomization someone suspended got `kubectl unstick ks/NAME` as its fix,
    /// which leaves another's suspend alone: the fix says `--force-resume`. One that an
    /// interrupted unstick run left suspended is resumed by a plain run.
    #[test]
    fn a_suspend_someone_made_is_fixed_with_force_resume() {
        let theirs = unstick_fix(Class::Suspended, false, "flux-system", "apps");
        assert!(
            theirs.contains("kubectl unstick ks/apps -n flux-system --force-resume"),
            "{theirs}"
        );
        let ours = unstick_fix(Class::Suspended, true, "flux-system", "apps");
        assert!(!ours.contains("--force-resume"), "{ours}");
        let failed = unstick_fix(Class::BuildFailed, false, "flux-system", "apps");
        assert!(
            failed.starts_with("kubectl unstick ks/apps -n flux-system ("),
            "{failed}"
        );
    }
}
