//! Wording: the hints and readings a human reads ([`Engine::source_hints`], a HelmRelease's
//! reading, a missing wait-set member), and the verdicts the views print from a diagnosis
//! ([`heading`], [`is_finding`]).

use crate::obj;
use regex::Regex;
use serde_json::Value;
use std::sync::LazyLock;

use crate::diagnose::*;

/// An operating-system error on a path inside kustomize-controller's own per-run temp dir:
/// each run extracts the artifact into `MkdirTempAbs("", TempDirPrefix)` (the OS temp dir,
/// `/tmp`, prefix `kustomization-`, kustomize-controller v1.x internal/controller/tmpdir.go
/// and kustomization_controller.go `reconcile`) and removes it when the run ends. Go's
/// `*PathError` text is `op path: errno`, e.g. `lstat /tmp/kustomization-2167172500: no such
/// file or directory`. Only the temp dir itself: a path below it (`lstat
/// /tmp/kustomization-1/apps/missing.yaml: no such file or directory`) is a file the
/// repository's kustomization.yaml names and the revision does not have.
static CONTROLLER_TMP_IO: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\S*/kustomization-\d+/?: (no such file or directory|permission denied|no space left on device|read-only file system|too many open files|input/output error)").unwrap()
});

impl<'a> Engine<'a> {
    /// Hints from the source: a missing secret, a refused or absent Git credential, a retry
    /// that still holds the last failure, a newer revision, a suspended source.
    pub(in crate::diagnose) fn source_hints(&self, ks: &Value, d: &mut Diagnosis) {
        // Source d.hints.
        if let Some(s) = &d.source {
            if let Some(c) = s.failure().or(s.ready.as_ref()) {
                let m = c.message().to_ascii_lowercase();
                let secret_ref = self
                    .source_obj(ks)
                    .and_then(|o| obj::s(o, &["spec", "secretRef", "name"]))
                    .map(|n| {
                        (
                            s.source.split('/').nth(1).unwrap_or("").to_string(),
                            n.to_string(),
                        )
                    });
                let secret = secret_ref
                    .as_ref()
                    .map(|(ns, n)| format!("secret {ns}/{n}"))
                    .unwrap_or_else(|| "its secret".into());
                // The Secret's key names, when read (never the values).
                let keys = secret_ref
                    .as_ref()
                    .filter(|_| s.source.starts_with("GitRepository/"))
                    .and_then(|(ns, n)| self.idx.snap.secret_keys.get(&format!("{ns}/{n}")));
                let rerun = format!(
                    "kubectl unstick ks/{} -n {} --with-source",
                    obj::name(ks),
                    obj::namespace(ks)
                );
                // Quote only what the object says: its reason and message, verbatim.
                if m.contains("secret") && m.contains("not found") {
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": the referenced {secret} does not exist; create it (in the source's namespace), then run `{rerun}`",
                        s.source, c.reason(), c.message(),
                    ));
                } else if s.source.starts_with("GitRepository/")
                    && cluster_loop::gitauth::is_auth_refused(c.message())
                {
                    // The Git server's 401: which Secret and key, and the rotation that
                    // fixes it (the one rule, shared with gitops verify's link 1).
                    let r = cluster_loop::gitauth::refused(
                        secret_ref.as_ref().map(|(ns, n)| (ns.as_str(), n.as_str())),
                        keys.map(Vec::as_slice),
                        &format!("run `{rerun}`"),
                    );
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": {}. Fix: {}",
                        s.source,
                        c.reason(),
                        c.message(),
                        r.why,
                        r.fix
                    ));
                } else if cluster_loop::gitauth::is_auth_refused(c.message()) {
                    // Another kind's server (a registry, a Helm repository) answered 401: the
                    // credential in the Secret was refused.
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": the server refused the credential in {secret} (a token rotation that revoked the token Flux holds does this). Mint a new, uniquely named token, put it in {secret}, then run `{rerun}`; never revoke the token in use before the secret has the new one",
                        s.source, c.reason(), c.message(),
                    ));
                } else if c.reason() == "AuthenticationFailed" {
                    // source-controller v1.9.6 sets this reason when it cannot build the
                    // credentials (the Secret unreadable, fluxcd/pkg/git NewAuthOptions
                    // refusing its keys, a proxy or provider credential): no token was refused.
                    let keys_rule = if s.source.starts_with("GitRepository/") {
                        " (a Git source's Secret holds bearerToken, or username and password; ca.crt for the CA)"
                    } else {
                        ""
                    };
                    d.hints.push(format!(
                        "{} reports {}: \"{}\": source-controller could not build the credentials it names; fix what the message says{keys_rule}, then run `{rerun}`",
                        s.source, c.reason(), c.message(),
                    ));
                }
            }
            if let (Some(f), Some(r)) = (&s.failing, &s.ready)
                && !r.is_false()
            {
                d.hints.push(format!(
                    "{} is retrying now (Ready {}: \"{}\"), and its {} condition still holds the last attempt's failure: \"{}\"; each attempt fails the same way until that is fixed",
                    s.source, r.status, r.message(), f.type_, f.message()
                ));
            }
            if s.newer_revision_available {
                d.hints.push(format!(
                    "source has {} but the Kustomization last attempted {}",
                    s.artifact_revision.as_deref().unwrap_or("?"),
                    s.last_attempted_revision.as_deref().unwrap_or("nothing")
                ));
            }
            if s.suspended {
                d.hints.push(format!("source {} is suspended", s.source));
            }
        }
    }
}

/// What a HelmRelease in the wait set says, read as helm-controller v1.4 writes it
/// ([`cluster_loop::helm`]): (message, fix, progressing). `kstatus_message`: the message of
/// its kstatus as kustomize-controller reads it (the generic reader: a HelmRelease has no custom status
/// reader in kustomize-controller v1.9, so `Reconciling=True` is InProgress, `Stalled=True`
/// is Failed, which ends the health check early, and Ready=False/Unknown is InProgress).
/// `pods`: the failing pods of its release ([`Engine::release_pods`]).
///
/// - An action running with no failure on record and no failing pod: in progress, not stuck
///   (`progressing`); it ends by its own timeout at the latest.
/// - A running action whose pods fail, a failed attempt being retried
///   (`ProgressingWithRetry`), or retries exhausted (`Stalled=True` `RetriesExceeded`): the
///   failure quoted, its pods, and the fix. A reconcile of the Kustomization re-applies the
///   same HelmRelease and does not move it (helm-controller reacts to a new generation or a
///   request annotation on the HelmRelease itself, and a stalled one returned a terminal
///   error); what does: a change of its spec or chart in Git (a new generation, chart version
///   or values digest clears the failure count, internal/action/reset.go
///   `MustResetFailures`), or, when the cause went away outside Git (the image exists now),
///   a force request (`flux reconcile helmrelease --force`).
pub(in crate::diagnose) fn helm_release_reading(
    hr: &Value,
    kstatus_message: &str,
    pods: &[PodReason],
) -> (String, Option<String>, bool) {
    use cluster_loop::helm::{self, Phase};
    let f = helm::facts(hr);
    let (name, ns) = (obj::name(hr), obj::namespace(hr));
    let action = f.last_action.clone().unwrap_or_else(|| "install".into());
    let pod_line = pods
        .iter()
        .map(|p| match &p.image {
            Some(i) => format!("pod {}/{} {} ({i})", f.release_namespace, p.pod, p.reason),
            None => format!("pod {}/{} {}", f.release_namespace, p.pod, p.reason),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let image_fix = pods.iter().find_map(|p| {
        p.image.as_ref().map(|i| {
            format!(
                "the release's pods cannot pull {i} ({}): make that image pullable, or ",
                p.reason
            )
        })
    });
    let retries_left = if f.retries < 0 {
        "unlimited retries (spec.{action}.remediation.retries: -1)".to_string()
    } else {
        format!(
            "{} of {} attempt(s) failed (spec.{action}.remediation.retries: {})",
            f.failures,
            f.retries + 1,
            f.retries
        )
    };
    let git_fix = format!(
        "{}fix the chart or its values in Git{}: a change to HelmRelease {ns}/{name}'s spec (values, chart version) gives it a new generation, which clears the failure count, and helm-controller tries again as soon as the Kustomization applies it (helm-controller v1.4 MustResetFailures; a chart read from a GitRepository needs a new Chart.yaml version, HelmChart reconcileStrategy ChartVersion). A reconcile of the Kustomization alone re-applies the same HelmRelease and changes nothing",
        image_fix.clone().unwrap_or_default(),
        if image_fix.is_some() {
            " to use one that is"
        } else {
            ""
        }
    );
    let force = format!(
        "if the cause went away without a Git change: {} runs one Helm release action (install, or upgrade of the failed release) despite the exhausted retries ({} with the same token as reconcile.fluxcd.io/requestedAt; `--reset` writes {} and clears the failure count instead)",
        helm::HelmReleaseFacts::force_commands(name, ns),
        helm::FORCE_AT,
        helm::RESET_AT
    );
    let failure = f
        .failure_message()
        .map(|m| format!(": {m}"))
        .unwrap_or_default();
    let pods_said = if pod_line.is_empty() {
        String::new()
    } else {
        format!("; {pod_line}")
    };
    match &f.phase {
        Phase::Running {
            action: a,
            timeout,
            since,
        } if !f.has_failed() && pods.is_empty() => {
            let ends = since
                .as_deref()
                .and_then(obj::parse_time)
                .zip(parse_go_duration(timeout).ok())
                .and_then(|(s, d)| s.checked_add(secs(d.as_secs_f64())).ok());
            let what = if a.is_empty() {
                "helm-controller is reconciling it".to_string()
            } else {
                format!("helm-controller is running '{a}' (timeout {timeout})")
            };
            (
                format!(
                    "{what}{}: in progress, no failure seen, not stuck{}",
                    since
                        .as_deref()
                        .map(|s| format!(" since {s}"))
                        .unwrap_or_default(),
                    ends.map(|e| format!(
                        "; it ends by {} at the latest, and the health check passes if it succeeds",
                        short_time(e)
                    ))
                    .unwrap_or_default()
                ),
                None,
                true,
            )
        }
        Phase::Running {
            action: a, timeout, ..
        } if f.has_failed() => (
            format!(
                "helm-controller is running '{a}' (timeout {timeout}) after a failed {action}: {retries_left}{failure}{pods_said}; each new attempt fails the same way until the cause is fixed, then it stalls (RetriesExceeded)"
            ),
            Some(git_fix),
            false,
        ),
        Phase::Running {
            action: a, timeout, ..
        } => (
            format!(
                "helm-controller is running '{a}' (timeout {timeout}), but the release's pods are failing{pods_said}: the {a} fails at its timeout unless that changes{}",
                if f.retries == 0 {
                    String::new()
                } else {
                    format!(
                        "; helm-controller then retries (spec.{action}.remediation.retries: {}) and stalls when the retries run out",
                        f.retries
                    )
                }
            ),
            Some(git_fix),
            false,
        ),
        Phase::Retrying => (
            format!(
                "{action} failed and helm-controller retries (Reconciling ProgressingWithRetry): {retries_left}{failure}{pods_said}; each attempt fails the same way until the cause is fixed, then it stalls (RetriesExceeded)"
            ),
            Some(git_fix),
            false,
        ),
        Phase::Stalled { reason } if reason == "RetriesExceeded" => (
            format!(
                "helm-controller gave up (Stalled RetriesExceeded: {}){failure}{pods_said}; it does not try again until the HelmRelease's spec, chart or values change or a force/reset request is made, and kustomize-controller reads it as Failed, ending every health check on it early",
                f.stalled.as_ref().map(|c| c.message()).unwrap_or_default()
            ),
            Some(format!("{git_fix}; {force}")),
            false,
        ),
        Phase::Stalled { reason } => (
            format!(
                "Stalled ({reason}): {}{pods_said}",
                f.stalled.as_ref().map(|c| c.message()).unwrap_or_default()
            ),
            Some(format!(
                "fix what it says in Git (HelmRelease {ns}/{name}); helm-controller does not retry a stalled HelmRelease until its spec changes"
            )),
            false,
        ),
        _ => (format!("{kstatus_message}{pods_said}"), None, false),
    }
}

/// The `flux resume` word for a Flux kind (flux2 cmd/flux resume_*.go).
pub(in crate::diagnose) fn flux_cli_kind(kind: &str) -> &'static str {
    match kind {
        "HelmRelease" => "helmrelease",
        "Kustomization" => "kustomization",
        "GitRepository" => "source git",
        "OCIRepository" => "source oci",
        "HelmRepository" => "source helm",
        "HelmChart" => "source chart",
        "Bucket" => "source bucket",
        "ImageRepository" => "image repository",
        "ImageUpdateAutomation" => "image update",
        "Receiver" => "receiver",
        "Alert" => "alert",
        _ => "<kind>",
    }
}

/// Where a Kustomization that is not yet Ready at its source's revision is heading, judged
/// from its diagnosis (with the dependsOn walk): the proof wait keeps waiting on
/// [`Heading::Moving`] and stops on [`Heading::Terminal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heading {
    /// Still moving toward Ready: a run in progress, a pending request, or
    /// `DependencyNotReady` while the blocking dependency is itself reconciling, ready at an
    /// older revision, or failed at an older revision than its source now has (kustomize-controller
    /// re-queues a dependent every `--requeue-dependency`, 30s by default, and re-runs a
    /// Kustomization when its source's artifact revision changes). The text says what it
    /// waits on.
    Moving(String),
    /// A state that does not end by itself: the target or a blocking dependency failed at
    /// the source's current revision, is stalled or suspended, is missing, or the dependsOn
    /// chain is a cycle. The text says which and why.
    Terminal(String),
}

/// The classes of a run that failed or will not run (the proof wait's terminal states).
fn failed_class(c: Class) -> bool {
    matches!(
        c,
        Class::HealthCheckFailed
            | Class::HealthCheckCanceled
            | Class::BuildFailed
            | Class::SourceNotReady
            | Class::ReconcileFailed
            | Class::Stalled
            | Class::Suspended
    )
}

/// A failure that the controller will retry by itself because the source moved on since the
/// failed attempt (not for stalled or suspended objects, which are never retried).
fn retried_on_new_revision(d: &Diagnosis) -> bool {
    !matches!(d.class, Class::Stalled | Class::Suspended)
        && d.source
            .as_ref()
            .is_some_and(|s| s.newer_revision_available)
}

/// A failed health check whose objects are all Current now: the check read a status they no
/// longer have, so the controller's next run (on a request, or by itself after
/// `spec.retryInterval`) passes. Seen on the real kube-controller-manager v1.36 and
/// kustomize-controller v1.9.6: a revert to an earlier Deployment template reuses the old
/// ReplicaSet, and the Deployment is written with its new `observedGeneration` and the old
/// `Progressing=False ProgressDeadlineExceeded` (deployment controller `syncRolloutStatus`:
/// `DeploymentTimedOut` keeps a timed-out condition while the old pods are scaled down), which
/// kstatus reads as Failed; the fail-fast health check (fluxcd/pkg ssa `WaitForSetWithContext`,
/// kustomize-controller v1.1+) ends at once with `failed early due to stalled resources`.
pub fn passes_on_retry(d: &Diagnosis) -> bool {
    d.class == Class::HealthCheckFailed && d.blocking.is_empty()
}

/// Judge `d` (a diagnosis from [`Engine::diagnose`]) for the proof wait. The caller checks
/// "Ready at the source's revision" first; this only tells moving from terminal.
pub fn heading(d: &Diagnosis) -> Heading {
    match d.class {
        Class::Healthy
        | Class::Reconciling
        | Class::RequestPending
        | Class::HealthCheckInFlight => Heading::Moving(d.summary.clone()),
        // kustomize-controller v1.8+ (CancelHealthCheckOnNewRevision): a canceled check is
        // requeued at once for the reconciliation that canceled it (kustomization_controller.go,
        // HealthCheckCanceled branch: `ctrl.Result{Requeue: true}`), so it never ends here.
        Class::HealthCheckCanceled => Heading::Moving(format!(
            "{}; the run that canceled it starts right away",
            d.summary
        )),
        // A controller scaled to 0 stays so until someone scales it up; one with replicas but
        // no ready pod yet (a restart, `--restart-controller`'s own) may come back by itself;
        // a pod whose process exits (CrashLoopBackOff) or whose image does not pull does not.
        // Moving only while every stopped one may come back. A ready pod that does not lead
        // comes back only when its Lease wait has an end (the holder is gone); another holder
        // that keeps renewing holds it for good (trial4: verify read it as a 5-minute wait).
        Class::ControllerNotRunning
            if d.stopped_controllers.iter().all(|s| match &s.leader {
                Some(_) => s.leader_wait(),
                None => {
                    !s.scaled_to_zero()
                        && s.pod
                            .as_ref()
                            .is_none_or(cluster_loop::flux::PodTrouble::may_come_back)
                }
            }) =>
        {
            Heading::Moving(format!("{}; waiting for it to be back", d.summary))
        }
        Class::WaitingOnDependencies => match &d.root_cause {
            None => {
                Heading::Moving("DependencyNotReady, but its dependencies are ready now".into())
            }
            Some(rc) => match rc.diagnosis.as_deref() {
                None => Heading::Terminal(rc.message.clone()),
                Some(dd)
                    if failed_class(dd.class)
                        && !retried_on_new_revision(dd)
                        && !passes_on_retry(dd) =>
                {
                    Heading::Terminal(format!(
                        "dependency {} is {}: {}",
                        rc.kustomization, dd.class, dd.summary
                    ))
                }
                Some(dd) => Heading::Moving(format!(
                    "waiting-on-dependencies: {} is {} ({})",
                    rc.kustomization, dd.class, dd.summary
                )),
            },
        },
        _ if passes_on_retry(d) => Heading::Moving(format!(
            "{}; every object the check waits on is Current now (it read a status they no longer have), so the next run passes: on a request, or by itself after spec.retryInterval",
            d.summary
        )),
        c if failed_class(c) && retried_on_new_revision(d) => Heading::Moving(format!(
            "{}; the source has a newer revision, which the controller runs next",
            d.summary
        )),
        _ => Heading::Terminal(format!("{}: {}", d.class, d.summary)),
    }
}

/// Whether `d` (class [`Class::WaitingOnDependencies`]) waits on a dependency that is merely
/// reconciling normally, has a reconcile request pending, or is ready but has not applied
/// the source's current revision yet (or on none any more): nothing to unstick, the wait ends
/// by itself. A dependency whose health check is in flight is not "merely reconciling": that
/// is the stuck case this tool exists for, and the plan names it (`fix-dependency`).
pub fn dependency_progressing(d: &Diagnosis) -> bool {
    d.class == Class::WaitingOnDependencies
        && match &d.root_cause {
            None => true,
            Some(rc) => rc.diagnosis.as_deref().is_some_and(dependency_moving),
        }
}

/// Whether a root cause's own diagnosis (the end of [`Engine::diagnose`]'s dependsOn walk)
/// is on its way to Ready by itself: reconciling, a request pending, ready at an older
/// revision, or itself still marked `DependencyNotReady` although its own dependencies are
/// ready now (the walk stops at the first Kustomization whose dependsOn is satisfied, so a
/// root in that class carries a stale verdict: kustomize-controller re-checks it every
/// `--requeue-dependency`, 30s by default, kustomization_controller.go `checkDependencies`
/// with `RequeueAfter: r.requeueDependency`). This makes the rule transitive: a chain
/// `apps -> platform-config -> platform` with platform Ready at the new revision is a
/// rollout in progress at every level.
fn dependency_moving(dd: &Diagnosis) -> bool {
    matches!(
        dd.class,
        Class::Healthy | Class::Reconciling | Class::RequestPending | Class::WaitingOnDependencies
    ) || waits_on_progress_only(dd)
}

/// Whether a failed run's message (`Ready` condition) is an I/O error of
/// kustomize-controller on its own per-run temp dir ([`CONTROLLER_TMP_IO`]), not a problem
/// of the repository's content: the next run makes a new temp dir, so a reconcile request,
/// not a Git fix, is what helps (seen on the fresh-user trial: `BuildFailed ... lstat
/// /tmp/kustomization-2167172500: no such file or directory`, Ready 12 s after a request).
pub fn controller_io_error(d: &Diagnosis) -> Option<String> {
    let m = d.ready.as_ref()?.message();
    CONTROLLER_TMP_IO.find(m).map(|x| x.as_str().to_string())
}

/// Whether `d` is a finding: a state a read-only `kubectl unstick ks/NAME` and `kubectl
/// unstick --all` report with exit 1. Not a finding (exit 0): healthy, reconciling, or held
/// at dependsOn by a dependency that is only progressing ([`dependency_progressing`]): the
/// failure catalogue (section 1) calls `dependency 'ns/x' is not ready` mid-rollout "the
/// dependsOn ordering working, not a fault". One rule for both views, so `--all` and
/// `ks/NAME` never disagree on the same snapshot. A Flux controller it needs that is not
/// running ([`Diagnosis::stopped_controllers`]) is a finding whatever the class
/// ([`Class::ControllerNotRunning`], or `suspended`): what it last applied stays, no change
/// in Git reaches it, and no lever works until the controller runs (`--help`: exit 1 when
/// kustomize- or source-controller is not running).
pub fn is_finding(d: &Diagnosis) -> bool {
    if !d.stopped_controllers.is_empty()
        && d.stopped_controllers
            .iter()
            .all(StoppedController::leader_wait)
    {
        // A pod that takes its Lease by a known time: a wait, not a finding.
        return false;
    }
    !d.stopped_controllers.is_empty()
        || d.overdue_secs.is_some()
        || !(matches!(d.class, Class::Healthy | Class::Reconciling)
            || dependency_progressing(d)
            || waits_on_progress_only(d))
}

/// Whether `d` is a health check in flight whose every blocking object is
/// [`BlockingObject::progressing`]: its own controller reports an action running within its
/// own timeout and no failure is visible (a HelmRelease installing: helm-controller v1.4
/// `Running 'install' action with timeout of 5m0s`; a Deployment rolling out), or with no
/// blocking object at all while every member of its wait set was read
/// ([`HealthCheck::wait_set_read`]): all Current, so the controller's next poll (every 5s,
/// fluxcd/pkg ssa `WaitForSetWithContext`) passes it. Waiting, not stuck: not a finding, and
/// the plan writes nothing ([`crate::lever::Lever::Wait`]).
pub fn waits_on_progress_only(d: &Diagnosis) -> bool {
    d.class == Class::HealthCheckInFlight
        && d.blocking.iter().all(|b| b.progressing)
        && (!d.blocking.is_empty() || d.health_check.as_ref().is_some_and(|h| h.wait_set_read))
}

/// A wait-set object that does not exist, its kind listed: (message, fix). A
/// `spec.healthChecks` entry names where an object of that name exists (`elsewhere`); an
/// inventory entry was deleted out of band.
pub(in crate::diagnose) fn not_found_reading(
    origin: Origin,
    kind: &str,
    ns: &str,
    name: &str,
    elsewhere: &[&str],
) -> (String, Option<String>) {
    match origin {
        Origin::HealthChecks => (
            format!(
                "spec.healthChecks names {kind} {}/{name}, which does not exist{}; kustomize-controller reads it as NotFound and the check holds until its timeout",
                if ns.is_empty() { "(no namespace)" } else { ns },
                if elsewhere.is_empty() {
                    String::new()
                } else {
                    format!(" (a {kind} {name} exists in namespace {})", elsewhere.join(", "))
                }
            ),
            Some(if elsewhere.is_empty() {
                "fix the entry in spec.healthChecks (Git), or create the object".to_string()
            } else {
                format!(
                    "set namespace: {} on this spec.healthChecks entry (Git)",
                    elsewhere[0]
                )
            }),
        ),
        _ => (
            format!(
                "{kind} {ns}/{name} is in the inventory but does not exist (deleted out of band?); the health check never ends for a missing object"
            ),
            Some("the next run applies it again: request a reconcile once the in-flight check has ended".to_string()),
        ),
    }
}
