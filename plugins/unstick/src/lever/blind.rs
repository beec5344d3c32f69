//! Plans for the controller's blind spots ([`crate::diagnose::BlindSpot`]): no write to the
//! Kustomization makes the controller run it, so the plan names what does, or fetches the
//! source when that is the fix.

use super::{Inputs, Lever, Options, Plan, plan as full_plan};
use crate::diagnose::{BlindSpot, Class, Diagnosis};

/// The plan for a blind spot of `d`, or `None` when `d` has none (the lever is chosen as for
/// any other state).
pub(super) fn plan(d: &Diagnosis, inp: &Inputs<'_>, opts: &Options) -> Option<Plan> {
    let b = d.blind_spot.as_ref()?;
    Some(match (b.kind.as_str(), d.class) {
        ("not-watched", Class::NotWatched) => not_watched(d, b),
        ("source-not-watched", Class::NotWatched) => source_not_watched(d, b),
        // A failed run of a source no controller watches: another run reads the same
        // artifact (trial4: a dead artifact URL nobody rewrites) and fails the same way; a
        // fix in Git is never fetched either. The source must be watched first.
        ("source-not-watched", Class::ReconcileFailed | Class::BuildFailed) => {
            source_not_watched(d, b)
        }
        ("source-event-dropped", Class::SourceEventDropped) if b.cycle.is_empty() => {
            source_event_dropped_once(d, b, inp, opts)
        }
        ("source-event-dropped", Class::SourceEventDropped) => {
            source_event_dropped_by_a_cycle(d, b)
        }
        ("config-not-watched", Class::ConfigNotWatched) => config_not_watched(d, b, inp, opts),
        ("source-suspended", Class::SourceSuspended) => source_suspended(d, b),
        ("spec-changed-in-flight", Class::HealthCheckInFlight)
            if !opts.restart_controller && !opts.with_source =>
        {
            spec_changed_in_flight(d, b, inp, opts)
        }
        ("path-not-fetched", Class::SourceNotReady) if !opts.with_source => {
            path_not_fetched(d, b, inp, opts)
        }
        _ => return None,
    })
}

/// No running kustomize-controller watches the Kustomization: start the shard's controller,
/// else label it in Git.
fn not_watched(d: &Diagnosis, b: &BlindSpot) -> Plan {
    match &b.command {
        Some(cmd) => no_write(
            d,
            Lever::StartController,
            vec![
                b.because.clone(),
                "a request, a suspend+resume or a restart of the main controller is never seen by a controller that does not watch it".into(),
            ],
            format!("start the shard's controller: {cmd}; it runs the object then"),
        ),
        None => no_write(
            d,
            Lever::FixInGit,
            vec![
                b.because.clone(),
                "a request, a suspend+resume or a restart is never seen by a controller that does not watch it, so nothing is written".into(),
            ],
            "label it (in Git) for a running kustomize-controller's --watch-label-selector, or run a kustomize-controller for its shard".into(),
        ),
    }
}

/// No running source-controller watches the source: start the shard's source-controller, else
/// label the source in Git.
fn source_not_watched(d: &Diagnosis, b: &BlindSpot) -> Plan {
    let src = d
        .source
        .as_ref()
        .map(|s| s.source.clone())
        .unwrap_or_else(|| "its source".to_string());
    let never = "a request, a refetch (--with-source) or a restart of the main source-controller is never seen by a source-controller that does not watch the source, so nothing is written".to_string();
    match &b.command {
        Some(cmd) => no_write(
            d,
            Lever::StartController,
            vec![b.because.clone(), never],
            format!(
                "start the shard's source-controller: {cmd}; it fetches {src} then, and the Kustomization's next run applies it"
            ),
        ),
        None => no_write(
            d,
            Lever::FixInGit,
            vec![b.because.clone(), never],
            format!(
                "label {src} (in Git) for a running source-controller's --watch-label-selector, or run a source-controller for its shard"
            ),
        ),
    }
}

/// The source's event was dropped and no cycle drops it now: one request runs it.
fn source_event_dropped_once(
    d: &Diagnosis,
    b: &BlindSpot,
    inp: &Inputs<'_>,
    opts: &Options,
) -> Plan {
    // No cycle now: the event was missed once, and a request queues the run it would
    // have queued (kustomize-controller reads reconcile.fluxcd.io/requestedAt through
    // its ReconcileRequestedPredicate); the proof waits for that run's token.
    let mut p = super::request_plan(d, inp, opts);
    p.why = vec![
        b.because.clone(),
        "nothing drops the source's events now, so one request runs it; the next revision arrives as an event again".into(),
    ];
    let rev = d
        .source
        .as_ref()
        .and_then(|s| s.artifact_revision.as_deref())
        .unwrap_or("the source's revision");
    p.effect = format!("a new run starts as soon as a worker is free and applies {rev}");
    p
}

/// A dependsOn cycle drops every revision's event: break it in Git, then request the
/// reconciles.
fn source_event_dropped_by_a_cycle(d: &Diagnosis, b: &BlindSpot) -> Plan {
    let (ns, name) = d.kustomization.split_once('/').unwrap_or(("", ""));
    let requests: Vec<String> = std::iter::once(d.kustomization.clone())
        .chain(b.request_after_fix.iter().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|k| {
            let (kns, kn) = k.split_once('/').unwrap_or(("", k.as_str()));
            format!("flux reconcile ks {kn} -n {kns}")
        })
        .collect();
    let mut p = no_write(
        d,
        Lever::FixInGit,
        vec![
            b.because.clone(),
            "while the cycle is in the cluster, every new revision of the source is dropped the same way, the fix's own included".into(),
        ],
        format!(
            "break the cycle {} in Git, then request reconciles (the one that applies the cycle's dependsOn first): {}",
            b.cycle.join(" -> "),
            requests.join("; ")
        ),
    );
    p.alternatives.push(format!(
        "kubectl unstick ks/{name} -n {ns} is not needed to apply the current revision now: `flux reconcile ks {name} -n {ns}` does, but the next revision is dropped again until the cycle is broken"
    ));
    p
}

/// A ConfigMap or Secret it reads changed unseen: a request runs it now; a label makes later
/// changes start a run.
fn config_not_watched(d: &Diagnosis, b: &BlindSpot, inp: &Inputs<'_>, opts: &Options) -> Plan {
    // A request runs it now (ReconcileRequestedPredicate); the label makes later
    // changes start a run by themselves.
    let mut p = super::request_plan(d, inp, opts);
    p.why = vec![
        b.because.clone(),
        "a request runs it now with the ConfigMap/Secret as it is".into(),
    ];
    p.effect = "a new run starts as soon as a worker is free and applies the changed values".into();
    p.alternatives.push(
        "so that later changes start a run by themselves: label the object (in Git) reconcile.fluxcd.io/watch: Enabled, or whatever the controller's --watch-configs-label-selector selects".into(),
    );
    p
}

/// Someone suspended the source: resume it (it is not resumed for them).
fn source_suspended(d: &Diagnosis, b: &BlindSpot) -> Plan {
    no_write(
        d,
        Lever::ResumeSource,
        vec![
            b.because.clone(),
            "a request on the Kustomization re-applies the revision it already has; someone suspended the source, so it is not resumed for them".into(),
        ],
        format!(
            "resume the source: {}; it fetches then, and the new revision's event starts the Kustomization's run",
            b.command.as_deref().unwrap_or("flux resume source ...")
        ),
    )
}

/// The spec changed during an in-flight health check: the new generation's run is queued, so no
/// write, and the proof waits for its result.
fn spec_changed_in_flight(d: &Diagnosis, b: &BlindSpot, inp: &Inputs<'_>, opts: &Options) -> Plan {
    let now = inp.now;
    let start = b.next_run_at.filter(|t| *t > now).unwrap_or(now);
    let mut p = no_write(
        d,
        Lever::Wait,
        vec![
            b.because.clone(),
            "the controller already queued the run of the new generation: no write makes it sooner"
                .into(),
        ],
        if start > now {
            format!(
                "no write: the new generation's run starts at {} and the proof waits for its own result",
                super::short_time(start)
            )
        } else {
            "no write: the new generation's run starts as soon as the running check ends (now: its end has passed) and the proof waits for its own result".to_string()
        },
    );
    p.fresh_run_at = Some(start);
    p.wait_secs =
        start.duration_since(now).as_secs_f64().max(0.0) + d.timeout_secs + opts.margin_secs;
    let (ns, name) = d.kustomization.split_once('/').unwrap_or(("", ""));
    p.alternatives.push(format!(
        "kubectl unstick ks/{name} -n {ns} --restart-controller: cancels the running check now, and every other in-flight run"
    ));
    p
}

/// The path is not in the source's artifact yet (the branch head has it): fetching now is the fix
/// (the plan of --with-source).
fn path_not_fetched(d: &Diagnosis, b: &BlindSpot, inp: &Inputs<'_>, opts: &Options) -> Plan {
    let with = Options {
        with_source: true,
        ..opts.clone()
    };
    let mut p = full_plan(d, inp, &with);
    p.why.insert(
        0,
        format!("{}: fetching is the fix (as --with-source)", b.because),
    );
    p
}

/// A plan that writes nothing and waits for nothing.
fn no_write(d: &Diagnosis, lever: Lever, why: Vec<String>, effect: String) -> Plan {
    Plan {
        kustomization: d.kustomization.clone(),
        lever,
        why,
        effect,
        fresh_run_at: None,
        also_cancels: Vec::new(),
        recommend_gate_arg: None,
        alternatives: Vec::new(),
        steps: Vec::new(),
        wait_secs: 0.0,
        wait_for_request_token: false,
        request_token: None,
    }
}
