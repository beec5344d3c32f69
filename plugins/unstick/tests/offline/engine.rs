//! Diagnosis and lever selection on JSON fixtures written from upstream shapes
//! (kustomize-controller v1.9 status, source-controller v1 GitRepository status, core/v1 Pod).

use serde_json::{Value, json};
use unstick::controller::{CancelMode, ControllerFacts};
use unstick::diagnose::{Class, Engine};
use unstick::lever::{self, Lever, Options, Step};
use unstick::snapshot::Snapshot;

use crate::support::{cond_mut, diag, fleet, ks_mut, named_mut, plan_with};

fn ks<'a>(snap: &'a Snapshot, name: &str) -> &'a Value {
    snap.kustomizations
        .iter()
        .find(|k| k["metadata"]["name"] == name)
        .unwrap()
}

fn with_controller(snap: &mut Snapshot, image: &str, gates: Option<&str>) {
    let c = snap.controller.as_mut().unwrap();
    c["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
    if let Some(g) = gates {
        c["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array_mut()
            .unwrap()
            .push(json!(format!("--feature-gates={g}")));
    }
}

fn plan_for(snap: &Snapshot, name: &str, opts: &Options) -> lever::Plan {
    plan_with(snap, name, "2026-11-30T07:30:00.5Z", opts)
}

#[test]
fn healthy() {
    let s = fleet();
    let d = diag(&s, "platform");
    assert_eq!(d.class, Class::Healthy);
    assert!(d.root_cause.is_none());
    assert!(d.blocking.is_empty());
}

#[test]
fn health_check_in_flight_with_deadline_blocking_pod_and_signature() {
    let s = fleet();
    let d = diag(&s, "apps-wave-0");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    let hc = d.health_check.as_ref().unwrap();
    assert_eq!(
        hc.revision,
        "main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    );
    assert_eq!(hc.timeout_secs, 900.0);
    assert_eq!(hc.deadline.unwrap().to_string(), "2026-11-30T07:35:00Z");
    assert_eq!(hc.time_left_secs, Some(300));
    assert!(d.summary.contains("5m0s left"), "{}", d.summary);
    // Only the not-Current object blocks; the Service and the ready web Deployment do not.
    assert_eq!(d.blocking.len(), 1, "{:#?}", d.blocking);
    let b = &d.blocking[0];
    assert_eq!(b.object, "Deployment/apps/podinfo");
    assert_eq!(b.kstatus, "InProgress");
    assert_eq!(b.pods.len(), 1);
    assert_eq!(b.pods[0].reason, "ImagePullBackOff");
    assert_eq!(b.pods[0].image.as_deref(), Some("0.1.1"));
    assert!(b.pods[0].message.contains("docker.io/library/0.1.1:latest"));
    assert_eq!(d.signatures.len(), 1);
    assert_eq!(d.signatures[0].id, "bare-tag-image");
    assert!(d.signatures[0].message.contains(
        "looks like an image-automation `:tag` marker on an `image:` field; run kubectl markercheck"
    ));
    let src = d.source.as_ref().unwrap();
    assert!(!src.newer_revision_available);
    assert_eq!(
        src.last_applied_revision.as_deref(),
        Some("main@sha1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    );
}

#[test]
fn image_without_registry_is_a_signature_when_the_fleet_uses_one() {
    let mut s = fleet();
    let d = named_mut(&mut s.objects, "podinfo");
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("podinfo:0.1.1");
    let p = named_mut(&mut s.pods, "podinfo-7d9c-x2x");
    p["spec"]["containers"][0]["image"] = json!("podinfo:0.1.1");
    let d = diag(&s, "apps-wave-0");
    assert_eq!(d.signatures.len(), 1, "{:#?}", d.signatures);
    assert_eq!(d.signatures[0].id, "image-without-registry");
    assert!(d.signatures[0].message.contains("`registry:5000`"));
}

#[test]
fn dependency_chain_walks_to_first_non_ready() {
    let s = fleet();
    let d = diag(&s, "apps-wave-2");
    assert_eq!(d.class, Class::WaitingOnDependencies);
    let rc = d.root_cause.as_ref().unwrap();
    assert_eq!(
        rc.chain,
        vec![
            "flux-system/apps-wave-2",
            "flux-system/apps-wave-1",
            "flux-system/apps-wave-0"
        ]
    );
    assert_eq!(rc.kustomization, "flux-system/apps-wave-0");
    assert_eq!(rc.kind, "not-ready");
    assert_eq!(
        rc.diagnosis.as_ref().unwrap().class,
        Class::HealthCheckInFlight
    );
    assert!(
        rc.message
            .contains("is the dependsOn ordering working, not a fault"),
        "{}",
        rc.message
    );
    assert!(rc.message.contains("flux-system/apps-wave-1"));
    // The root cause is said once: by its own line (the `--all` column's cell), not again
    // in the summary (found by the new-user trial).
    assert_eq!(
        d.summary,
        "waiting on dependencies: held until the first non-ready dependency's health check ends"
    );
    let text = unstick::report::diagnosis_text(&cluster_loop::output::Painter::new(false), &d, "");
    assert_eq!(
        text.to_lowercase().matches("root cause").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("dependsOn chain: flux-system/apps-wave-2 -> flux-system/apps-wave-1 -> flux-system/apps-wave-0"),
        "{text}"
    );
    assert!(
        text.contains("\n  root cause: flux-system/apps-wave-0 (health-check-in-flight: "),
        "{text}"
    );
}

/// `--all` and a read-only `ks/NAME` give the same exit code on the same snapshot: a
/// Kustomization held at dependsOn by a dependency that is only reconciling is not a finding
/// (exit 0, still shown as waiting-on-dependencies); one held by a dependency whose health
/// check is blocked by an image pull error is (exit 1).
#[test]
fn fleet_exit_agrees_with_single_object_on_a_depends_on_rollout() {
    use unstick::diagnose::is_finding;
    use unstick::report::fleet_report;
    let s = fleet();
    let waiting = diag(&s, "after-lagging");
    assert_eq!(waiting.class, Class::WaitingOnDependencies);
    assert!(!is_finding(&waiting));
    assert_eq!(
        waiting.summary,
        "waiting on dependencies: the dependency is progressing (the ordering working, not a fault)"
    );
    assert!(is_finding(&diag(&s, "apps-wave-2")));
    let (all, findings) = fleet_report(&s, vec![], &Options::default());
    for row in &all.items {
        let (_, name) = row.kustomization.split_once('/').unwrap();
        assert_eq!(
            is_finding(&row.diagnosis),
            is_finding(&diag(&s, name)),
            "{name}"
        );
    }
    assert_eq!(
        all.findings,
        all.items
            .iter()
            .filter(|i| is_finding(&i.diagnosis))
            .count()
    );
    assert!(findings);
    // Only the dependsOn rollout: `lagging` reconciling, `after-lagging` waiting on it.
    let mut rollout = fleet();
    rollout.kustomizations.retain(|k| {
        matches!(
            k["metadata"]["name"].as_str(),
            Some("lagging" | "after-lagging")
        )
    });
    let (r, findings) = fleet_report(&rollout, vec![], &Options::default());
    assert_eq!(
        (r.total, r.not_healthy, r.findings),
        (2, 2, 0),
        "{:#?}",
        r.items
    );
    assert!(!findings);
    let classes: Vec<Class> = r.items.iter().map(|i| i.class).collect();
    assert_eq!(classes, [Class::WaitingOnDependencies, Class::Reconciling]);
    // The summary says "none needs attention", so no row offers a lever to pull (the
    // trial: request-reconcile on a row the summary called fine).
    for i in &r.items {
        assert!(
            !i.lever.mutates(),
            "{}: lever {} on a row that needs no attention",
            i.kustomization,
            i.lever
        );
    }
    // Its dependency Ready now, `after-lagging` still carries the controller's last
    // DependencyNotReady: the summary never quotes that stale message as the state.
    let l = ks_mut(&mut rollout, "lagging");
    let b = "main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    l["status"]["lastAppliedRevision"] = json!(b);
    l["status"]["lastAttemptedRevision"] = json!(b);
    assert_eq!(diag(&rollout, "lagging").class, Class::Healthy);
    let after = diag(&rollout, "after-lagging");
    assert_eq!(after.class, Class::WaitingOnDependencies, "{after:#?}");
    assert!(after.root_cause.is_none(), "{after:#?}");
    assert!(!is_finding(&after));
    assert!(!after.summary.contains("is not ready"), "{}", after.summary);
    assert!(
        after.summary.contains("every dependency is Ready now"),
        "{}",
        after.summary
    );
    assert!(
        after
            .hints
            .iter()
            .any(|h| h.starts_with("as last written by kustomize-controller: dependency")),
        "{:#?}",
        after.hints
    );
    // One more wave behind it: its root cause is `after-lagging`, whose own dependencies are
    // Ready now; the root cause says so (trial 11: a bare "waiting-on-dependencies" root
    // cause read as if something further up were still not ready).
    let mut third = ks(&rollout, "after-lagging").clone();
    third["metadata"]["name"] = json!("after-after");
    third["spec"]["dependsOn"] = json!([{"name": "after-lagging"}]);
    rollout.kustomizations.push(third);
    let d = diag(&rollout, "after-after");
    assert_eq!(d.class, Class::WaitingOnDependencies, "{d:#?}");
    assert_eq!(
        unstick::report::root_cause_cell(&d),
        "flux-system/after-lagging (waiting-on-dependencies: its dependencies are Ready now; its next dependsOn check starts its run)"
    );
    assert!(!is_finding(&d));
}

#[test]
fn dependency_cycle_and_missing() {
    let s = fleet();
    let d = diag(&s, "cycle-a");
    let rc = d.root_cause.unwrap();
    assert_eq!(rc.kind, "cycle");
    assert!(
        rc.message
            .contains("flux-system/cycle-a -> flux-system/cycle-b -> flux-system/cycle-a"),
        "{}",
        rc.message
    );
    let d = diag(&s, "orphan");
    let rc = d.root_cause.unwrap();
    assert_eq!(rc.kind, "missing");
    assert_eq!(rc.kustomization, "flux-system/missing-one");
}

#[test]
fn dependency_revision_not_up_to_date() {
    let s = fleet();
    let d = diag(&s, "lagging");
    assert_eq!(d.class, Class::Reconciling);
    let d = diag(&s, "after-lagging");
    let rc = d.root_cause.unwrap();
    assert_eq!(rc.kind, "revision-not-up-to-date");
    assert_eq!(rc.kustomization, "flux-system/lagging");
}

#[test]
fn source_not_ready_with_token_rotation_hint() {
    let s = fleet();
    let d = diag(&s, "charts");
    assert_eq!(d.class, Class::SourceNotReady);
    let hint = d
        .hints
        .iter()
        .find(|h| h.contains("authentication required"))
        .unwrap();
    assert!(hint.contains("token rotation"));
    // The Secret's keys were not read: both keys named, the rotation as the fix.
    assert!(
        hint.contains("refused the credential in Secret flux-system/charts-token (its keys were not read: key `bearerToken` when it has one, else `password`)"),
        "{hint}"
    );
    assert!(hint.contains("mint a new, uniquely named token"), "{hint}");
    assert!(hint.contains("--with-source"));
}

#[test]
fn build_failed_substitution() {
    let s = fleet();
    let d = diag(&s, "build-broken");
    assert_eq!(d.class, Class::BuildFailed);
    assert!(d.hints.iter().any(|h| h.contains("substitution")));
}

#[test]
fn health_check_failed_reads_message_and_pod_crash() {
    let s = fleet();
    let d = diag(&s, "hc-failed");
    assert_eq!(d.class, Class::HealthCheckFailed);
    assert_eq!(d.blocking.len(), 1);
    let b = &d.blocking[0];
    assert_eq!(b.object, "Deployment/web/crashy");
    assert_eq!(b.kstatus, "Failed");
    assert!(b.message.contains("Progress deadline exceeded"));
    let p = &b.pods[0];
    assert_eq!(p.reason, "CrashLoopBackOff");
    assert_eq!(p.last_exit_code, Some(1));
    assert_eq!(p.last_exit_reason.as_deref(), Some("Error"));
    assert_eq!(p.restarts, Some(7));
    assert!(d.signatures.is_empty());
}

/// Catalogue row 5: the crashing container's last run logged the value the kubelet injects
/// as REDIS_PORT for Service web/redis: named on the pod with the Service, and the blocking
/// object's fix is enableServiceLinks: false. A log without an injected value names nothing.
#[test]
fn health_check_failed_names_a_service_link_collision_from_the_log() {
    let mut s = fleet();
    s.services
        .push(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "redis", "namespace": "web"},
        "spec": {"clusterIP": "10.96.0.57", "ports": [{"port": 6379, "protocol": "TCP"}]}}));
    s.workload_logs.insert(
        "web/crashy-5f7-abc/crashy".into(),
        vec![
            "Traceback (most recent call last):".into(),
            "ValueError: invalid literal for int() with base 10: 'tcp://10.96.0.57:6379'".into(),
        ],
    );
    let d = diag(&s, "hc-failed");
    let b = &d.blocking[0];
    let c = b.pods[0].service_link.as_ref().expect("service link named");
    assert_eq!(c.variable, "REDIS_PORT");
    assert_eq!(c.service, "web/redis");
    assert!(
        b.fix
            .as_deref()
            .is_some_and(|f| f.starts_with("set spec.enableServiceLinks: false")),
        "{b:?}"
    );
    s.workload_logs.insert(
        "web/crashy-5f7-abc/crashy".into(),
        vec!["panic: connection refused".into()],
    );
    let d = diag(&s, "hc-failed");
    assert_eq!(d.blocking[0].pods[0].service_link, None);
    assert_eq!(d.blocking[0].fix, None);
}

/// Trial 11: a failed health check with blocking objects gets a request, which only helps
/// once the source has the fix: the plan offers `--with-source` for a fix not fetched yet, and
/// not when it is already asked for.
#[test]
fn health_check_failed_request_offers_with_source_for_an_unfetched_fix() {
    let s = fleet();
    let p = plan_for(&s, "hc-failed", &Options::default());
    assert_eq!(p.lever, Lever::RequestReconcile, "{p:?}");
    assert!(
        p.alternatives
            .iter()
            .any(|a| a.contains("kubectl unstick ks/hc-failed -n flux-system --with-source")),
        "{:?}",
        p.alternatives
    );
    let p = plan_for(
        &s,
        "hc-failed",
        &Options {
            with_source: true,
            ..Options::default()
        },
    );
    assert!(
        !p.alternatives.iter().any(|a| a.contains("--with-source")),
        "{:?}",
        p.alternatives
    );
    // With --with-source the plan does not say the request "only helps once the source has
    // it" (trial 12): the flag is what fetches it.
    assert!(
        !p.why.iter().any(|w| w.contains("only helps once")),
        "{:?}",
        p.why
    );
    assert!(
        p.why
            .iter()
            .any(|w| w.contains("--with-source: the source fetches first")),
        "{:?}",
        p.why
    );
}

#[test]
fn health_check_canceled_stalled_busy() {
    let s = fleet();
    assert_eq!(diag(&s, "canceled").class, Class::HealthCheckCanceled);
    assert_eq!(diag(&s, "stalled").class, Class::Stalled);
    let d = diag(&s, "busy");
    assert_eq!(d.class, Class::Reconciling);
    assert_eq!(d.eta.unwrap().to_string(), "2026-11-30T07:30:02.5Z");
}

#[test]
fn suspended_by_us_vs_someone_else() {
    let s = fleet();
    let d = diag(&s, "left-by-us");
    assert_eq!(d.class, Class::Suspended);
    assert_eq!(
        d.suspended_by_unstick_at.as_deref(),
        Some("2026-11-30T07:10:00.5Z")
    );
    let d = diag(&s, "frozen");
    assert_eq!(d.class, Class::Suspended);
    assert!(d.suspended_by_unstick_at.is_none());
    let p = plan_for(&s, "frozen", &Options::default());
    assert_eq!(p.lever, Lever::None);
    assert!(p.steps.is_empty());
    let p = plan_for(
        &s,
        "frozen",
        &Options {
            force_resume: true,
            ..Default::default()
        },
    );
    assert_eq!(p.lever, Lever::Resume);
    let p = plan_for(&s, "left-by-us", &Options::default());
    assert_eq!(p.lever, Lever::Resume);
    let Step::Patch { patch, .. } = &p.steps[0] else {
        panic!()
    };
    assert_eq!(
        patch,
        &json!({"metadata": {"annotations": {"unstick.cluster-loop.dev/suspended-at": null},
                 "resourceVersion": "1000"}, "spec": {"suspend": null}})
    );
}

#[test]
fn request_pending() {
    let s = fleet();
    let d = diag(&s, "requested");
    assert_eq!(d.class, Class::RequestPending);
    let r = d.request.unwrap();
    assert!(r.pending);
    assert_eq!(r.age_secs, Some(299));
}

#[test]
fn missing_inventory_object_is_not_found() {
    let s = fleet();
    let d = diag(&s, "ghost-check");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    assert_eq!(d.blocking[0].kstatus, "NotFound");
    assert_eq!(d.health_check.unwrap().time_left_secs, Some(-60));
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("deadline passed 1m0s ago"))
    );
}

#[test]
fn holding_workers_lists_in_flight_runs() {
    let s = fleet();
    let e = Engine::new(&s);
    assert_eq!(
        e.holding_workers(),
        vec![
            "flux-system/apps-wave-0",
            "flux-system/busy",
            "flux-system/ghost-check"
        ]
    );
}

#[test]
fn gate_off_chooses_suspend_resume_and_recommends_gate() {
    let s = fleet();
    let e = Engine::new(&s);
    assert_eq!(
        e.controller.as_ref().unwrap().cancel_mode,
        CancelMode::Never
    );
    let p = plan_for(
        &s,
        "apps-wave-0",
        &Options {
            margin_secs: 30.0,
            ..Default::default()
        },
    );
    assert_eq!(p.lever, Lever::SuspendResume);
    assert_eq!(p.fresh_run_at.unwrap().to_string(), "2026-11-30T07:35:00Z");
    assert_eq!(
        p.recommend_gate_arg.as_deref(),
        Some("--feature-gates=CancelHealthCheckOnNewRevision=true")
    );
    assert_eq!(p.steps.len(), 2);
    let Step::Patch { patch, .. } = &p.steps[0] else {
        panic!()
    };
    assert_eq!(
        patch,
        &json!({"metadata": {"annotations": {"unstick.cluster-loop.dev/suspended-at": "2026-11-30T07:30:00.5Z"},
                 "resourceVersion": "1000"}, "spec": {"suspend": true}})
    );
    // 300s left + 900s timeout + 30s margin.
    assert_eq!(p.wait_secs, 1230.0);
    assert!(!p.wait_for_request_token);
    assert!(p.alternatives.iter().any(|a| a.contains("2 other")));
}

#[test]
fn restart_controller_lists_other_in_flight_runs() {
    let s = fleet();
    let p = plan_for(
        &s,
        "apps-wave-0",
        &Options {
            restart_controller: true,
            ..Default::default()
        },
    );
    assert_eq!(p.lever, Lever::RestartController);
    assert_eq!(
        p.also_cancels,
        vec!["flux-system/busy", "flux-system/ghost-check"]
    );
    assert!(matches!(
        &p.steps[0],
        Step::DeleteControllerPods { selector, namespace, .. }
            if selector == "app=kustomize-controller" && namespace == "flux-system"
    ));
}

#[test]
fn gate_on_v18_annotates_requested_at() {
    let mut s = fleet();
    with_controller(
        &mut s,
        "ghcr.io/fluxcd/kustomize-controller:v1.8.3",
        Some("CancelHealthCheckOnNewRevision=true"),
    );
    let p = plan_for(&s, "apps-wave-0", &Options::default());
    assert_eq!(p.lever, Lever::RequestReconcile);
    assert!(p.recommend_gate_arg.is_none());
    assert_eq!(p.steps.len(), 1);
    let Step::Patch { patch, kind, .. } = &p.steps[0] else {
        panic!()
    };
    assert_eq!(kind, "Kustomization");
    assert_eq!(
        patch,
        &json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "2026-11-30T07:30:00.5Z"}}})
    );
    assert!(p.wait_for_request_token);
    assert_eq!(p.request_token.as_deref(), Some("2026-11-30T07:30:00.5Z"));
}

#[test]
fn gate_on_v17_without_new_revision_says_so() {
    let mut s = fleet();
    with_controller(
        &mut s,
        "ghcr.io/fluxcd/kustomize-controller:v1.7.1",
        Some("CancelHealthCheckOnNewRevision=true"),
    );
    let p = plan_for(&s, "apps-wave-0", &Options::default());
    assert_eq!(p.lever, Lever::SuspendResume);
    assert!(
        p.why
            .iter()
            .any(|w| w.contains("no newer revision than the one in flight"))
    );
    assert!(p.recommend_gate_arg.is_some());
    let p = plan_for(
        &s,
        "apps-wave-0",
        &Options {
            with_source: true,
            ..Default::default()
        },
    );
    assert_eq!(p.lever, Lever::ReconcileSource);
    let Step::Patch { kind, name, .. } = &p.steps[0] else {
        panic!()
    };
    assert_eq!(
        (kind.as_str(), name.as_str()),
        ("GitRepository", "flux-system")
    );
}

#[test]
fn gate_on_v17_with_newer_source_revision_reconciles_source() {
    let mut s = fleet();
    with_controller(
        &mut s,
        "kustomize-controller:v1.7.0",
        Some("CancelHealthCheckOnNewRevision=true"),
    );
    let src = named_mut(&mut s.sources, "flux-system");
    src["status"]["artifact"]["revision"] =
        json!("main@sha1:dddddddddddddddddddddddddddddddddddddddd");
    let p = plan_for(&s, "apps-wave-0", &Options::default());
    assert_eq!(p.lever, Lever::ReconcileSource);
}

#[test]
fn waiting_on_dependencies_points_at_root() {
    let s = fleet();
    let p = plan_for(&s, "apps-wave-2", &Options::default());
    assert_eq!(p.lever, Lever::FixDependency);
    assert!(p.steps.is_empty());
    assert!(p.effect.contains("flux-system/apps-wave-0"));
}

#[test]
fn waiting_on_a_reconciling_dependency_waits_with_no_write() {
    // after-lagging: DependencyNotReady "revision is not up to date"; lagging is Ready at an
    // older revision, i.e. reconciling towards the new one. Nothing to unstick: lever wait,
    // no write, and a wait covering the dependency's run and ours.
    let s = fleet();
    let d = diag(&s, "after-lagging");
    assert!(unstick::diagnose::dependency_progressing(&d));
    let p = plan_for(&s, "after-lagging", &Options::default());
    assert_eq!(p.lever, Lever::Wait, "{p:#?}");
    assert!(p.steps.is_empty(), "{p:#?}");
    // The re-check interval is the controller's own flag (default 30s), said once.
    let why = p.why.join("\n");
    assert!(
        why.contains("re-checked every 30s (--requeue-dependency)"),
        "{why}"
    );
    assert_eq!(why.matches("re-check").count(), 1, "{why}");
    let mut fast = fleet();
    fast.controller.as_mut().unwrap()["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("--requeue-dependency=5s"));
    let pf = plan_for(&fast, "after-lagging", &Options::default());
    assert!(
        pf.why
            .join("\n")
            .contains("re-checked every 5s (--requeue-dependency)"),
        "{:?}",
        pf.why
    );
    assert!(p.request_token.is_none(), "{p:#?}");
    assert!(!p.wait_for_request_token);
    // What the proof wait judges with no token (main.rs `expect` for a plan that writes
    // nothing): moving while the dependency moves, recovered once Ready at the revision.
    use unstick::proof::{Expect, Verdict, judge};
    assert!(
        matches!(
            judge(
                &Engine::new(&s),
                "flux-system",
                "after-lagging",
                &Expect::default()
            ),
            Verdict::Moving(_)
        ),
        "{p:#?}"
    );
    let mut done = fleet();
    let k = ks_mut(&mut done, "after-lagging");
    let b = "main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    k["status"]["lastAppliedRevision"] = json!(b);
    k["status"]["lastAttemptedRevision"] = json!(b);
    *cond_mut(k, "Ready") = json!({"type": "Ready", "status": "True",
        "reason": "ReconciliationSucceeded", "message": format!("Applied revision: {b}")});
    assert!(
        matches!(
            judge(
                &Engine::new(&done),
                "flux-system",
                "after-lagging",
                &Expect::default()
            ),
            Verdict::Recovered
        ),
        "{:#?}",
        done.kustomizations
    );
    let lagging = diag(&s, "lagging");
    assert!(
        p.wait_secs >= d.timeout_secs + lagging.timeout_secs,
        "{} < {} + {}",
        p.wait_secs,
        d.timeout_secs,
        lagging.timeout_secs
    );
    // --cascade, after the Kustomization it waits on recovered, starts it at once: a
    // request with a token to prove, waiting as long as the plan above.
    let c = crate::support::plan_by(
        lever::cascade_plan,
        &s,
        "after-lagging",
        "2026-11-30T07:30:00.5Z",
        &Options::default(),
    );
    assert_eq!(c.lever, Lever::RequestReconcile, "{c:#?}");
    assert_eq!(c.request_token.as_deref(), Some("2026-11-30T07:30:00.5Z"));
    assert!(c.wait_for_request_token);
    assert_eq!(c.wait_secs, p.wait_secs, "{c:#?}");
    // A dependency whose health check is in flight is the stuck case: fix-dependency.
    assert!(!unstick::diagnose::dependency_progressing(&diag(
        &s,
        "apps-wave-2"
    )));
}

#[test]
fn heading_moving_while_dependencies_move_terminal_when_they_fail() {
    use unstick::diagnose::{Heading, heading};
    let mut s = fleet();
    // Waiting on a dependency that is reconciling / has a check in flight: moving.
    for name in ["after-lagging", "apps-wave-2", "apps-wave-1"] {
        let h = heading(&diag(&s, name));
        assert!(matches!(h, Heading::Moving(_)), "{name}: {h:?}");
    }
    let Heading::Moving(m) = heading(&diag(&s, "after-lagging")) else {
        unreachable!()
    };
    assert!(m.contains("flux-system/lagging"), "{m}");
    // A run in progress on the target itself: moving.
    assert!(matches!(
        heading(&diag(&s, "apps-wave-0")),
        Heading::Moving(_)
    ));
    // Failed at the source's current revision: terminal, for the target...
    let h = heading(&diag(&s, "hc-failed"));
    assert!(
        matches!(&h, Heading::Terminal(m) if m.contains("health-check-failed")),
        "{h:?}"
    );
    // ...and for a dependent of it.
    let k = ks_mut(&mut s, "after-lagging");
    k["spec"]["dependsOn"] = json!([{"name": "hc-failed"}]);
    k["status"]["conditions"][0]["message"] =
        json!("dependency 'flux-system/hc-failed' is not ready");
    let h = heading(&diag(&s, "after-lagging"));
    assert!(
        matches!(&h, Heading::Terminal(m) if m.contains("dependency flux-system/hc-failed is health-check-failed")),
        "{h:?}"
    );
    // A missing dependency and a cycle never end by themselves.
    assert!(matches!(heading(&diag(&s, "orphan")), Heading::Terminal(_)));
    assert!(matches!(
        heading(&diag(&s, "cycle-a")),
        Heading::Terminal(_)
    ));
    // A failure at an older revision than the source now has: the controller runs the new
    // one next, so still moving.
    let k = ks_mut(&mut s, "hc-failed");
    k["status"]["lastAttemptedRevision"] =
        json!("main@sha1:0000000000000000000000000000000000000000");
    let d = diag(&s, "hc-failed");
    assert!(
        d.source.as_ref().unwrap().newer_revision_available,
        "{d:#?}"
    );
    assert!(matches!(heading(&d), Heading::Moving(_)));
    assert!(matches!(
        heading(&diag(&s, "after-lagging")),
        Heading::Moving(_)
    ));
}

#[test]
fn healthy_needs_nothing_and_source_problem_needs_git() {
    let s = fleet();
    assert_eq!(
        plan_for(&s, "platform", &Options::default()).lever,
        Lever::None
    );
    assert_eq!(
        plan_for(&s, "charts", &Options::default()).lever,
        Lever::FixInGit
    );
    let p = plan_for(
        &s,
        "charts",
        &Options {
            with_source: true,
            ..Default::default()
        },
    );
    assert_eq!(p.lever, Lever::ReconcileSource);
    assert_eq!(p.steps.len(), 2);
}

#[test]
fn diagnosis_json_schema_is_stable() {
    let s = fleet();
    let d = diag(&s, "apps-wave-0");
    let v = serde_json::to_value(&d).unwrap();
    for k in [
        "kustomization",
        "class",
        "summary",
        "ready",
        "timeoutSecs",
        "healthCheck",
        "blocking",
        "signatures",
        "source",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["class"], "health-check-in-flight");
    assert_eq!(v["healthCheck"]["timeLeftSecs"], 300);
}

#[test]
fn controller_facts_from_fixture() {
    let s = fleet();
    let f = ControllerFacts::from_deployment(s.controller.as_ref().unwrap());
    assert_eq!(f.version.unwrap().to_string(), "v1.9.4");
    assert!(!f.cancel_gate);
    assert_eq!(f.concurrent, 4);
}

#[test]
fn missing_path_is_the_kustomization_not_its_source() {
    // kustomize-controller: a spec.path absent from the artifact is Ready=False reason
    // ArtifactFailed "kustomization path not found: stat ...: no such file or directory";
    // the GitRepository is Ready, so this is not a source problem.
    let mut s = fleet();
    let k = ks_mut(&mut s, "build-broken");
    k["spec"]["path"] = json!("./does-not-exist");
    let c = cond_mut(k, "Ready");
    c["reason"] = json!("ArtifactFailed");
    c["message"] = json!(
        "kustomization path not found: stat /tmp/kustomization-1/does-not-exist: no such file or directory"
    );
    let d = diag(&s, "build-broken");
    assert_eq!(d.class, Class::BuildFailed);
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("spec.path ./does-not-exist does not exist")),
        "{:?}",
        d.hints
    );
}

#[test]
fn token_state_handled_pending_superseded_not_found() {
    use unstick::diagnose::{request_time, token_state};
    let ks = |ann: Option<&str>, handled: Option<&str>| {
        let mut k =
            json!({"metadata": {"name": "a", "namespace": "n", "annotations": {}}, "status": {}});
        if let Some(a) = ann {
            k["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"] = json!(a);
        }
        if let Some(h) = handled {
            k["status"]["lastHandledReconcileAt"] = json!(h);
        }
        k
    };
    let (t1, t2) = ("2026-11-30T07:30:00.5Z", "2026-11-30T07:31:00Z");
    assert_eq!(token_state(&ks(Some(t1), Some(t1)), t1).state, "handled");
    assert_eq!(token_state(&ks(Some(t1), None), t1).state, "pending");
    let st = token_state(&ks(Some(t2), Some(t2)), t1);
    assert_eq!(st.state, "superseded");
    assert_eq!(st.superseded_by.as_deref(), Some(t2));
    assert!(st.covered());
    let st = token_state(&ks(Some(t2), Some(t1)), t1);
    assert_eq!(
        st.state, "handled",
        "handled, and a later request is pending"
    );
    let st = token_state(&ks(Some(t2), None), t1);
    assert_eq!(st.superseded_by_handled, Some(false));
    assert!(!st.covered());
    assert!(
        st.describe().contains("which is not handled yet"),
        "{}",
        st.describe()
    );
    // An older annotation, or none: the token was never written here.
    assert_eq!(token_state(&ks(Some(t1), Some(t1)), t2).state, "not-found");
    assert_eq!(token_state(&ks(None, None), t1).state, "not-found");
    // Unix seconds (Flux docs' `$(date +%s)`) compare as times too.
    let st = token_state(&ks(Some("1900000000"), Some("1900000000")), "1800000000");
    assert_eq!(st.state, "superseded");
    assert!(request_time("1800000000").is_some());
    // `date +%s%N` (the demo's own break/fix commands), and ms/µs: the same instant.
    let secs = request_time("1796141853").unwrap();
    for v in ["1796141853000", "1796141853000000", "1796141853000000000"] {
        assert_eq!(request_time(v), Some(secs), "{v}");
    }
    assert_eq!(
        request_time("1796141853908987902").map(|t| t.as_second()),
        Some(1796141853)
    );
    assert!(request_time("2026-11-30T07:30:00.5Z").is_some());
    assert!(request_time("yesterday").is_none());
    assert!(request_time("").is_none());
}

/// A Ready=True Kustomization at the source's current revision whose dependency is only
/// reconciling: healthy, no root cause (JSON or human), an informational hint naming the
/// dependency.
#[test]
fn healthy_with_a_reconciling_dependency_has_no_root_cause() {
    let mut s = fleet();
    let k = ks_mut(&mut s, "platform-config");
    k["spec"]["dependsOn"] = json!([{"name": "busy"}]);
    assert_eq!(diag(&s, "busy").class, Class::Reconciling);
    let d = diag(&s, "platform-config");
    assert_eq!(d.class, Class::Healthy, "{}", d.summary);
    assert!(d.root_cause.is_none(), "{:?}", d.root_cause);
    let v = serde_json::to_value(&d).unwrap();
    assert!(v.get("rootCause").is_none(), "{v:#}");
    assert_eq!(
        d.hints
            .iter()
            .filter(|h| h.starts_with("dependency flux-system/busy is reconciling (informational"))
            .count(),
        1,
        "{:?}",
        d.hints
    );
    let text = unstick::report::diagnosis_text(&cluster_loop::output::Painter::new(false), &d, "");
    assert!(!text.to_lowercase().contains("root cause"), "{text}");
    assert!(!text.contains("dependsOn chain"), "{text}");
    assert!(text.contains("flux-system/busy is reconciling"), "{text}");
    // The fleet view leaves it out (healthy) and the root-cause cell is empty.
    assert_eq!(unstick::report::root_cause_cell(&d), "-");
}

/// Every `UnstickReport` variant the binary writes has the same key set, `proof` is one of
/// the documented values, and `cascade` is a list even when nothing cascaded.
#[test]
fn report_json_key_set_is_the_same_for_every_variant() {
    use unstick::report::{CascadeItem, PROOF_VALUES, REPORT_KEYS, Report};
    let s = fleet();
    let e = Engine::new(&s);
    let d = diag(&s, "apps-wave-0");
    let after = diag(&s, "apps-wave-1");
    let holding = e.holding_workers();
    let p = plan_for(&s, "apps-wave-0", &Options::default());
    let base = || Report::new(&d, e.controller.as_ref(), &holding, Some(&p), vec![]);
    let mut variants: Vec<(&str, Report<'_>)> = vec![];
    let mut r = Report::new(&d, None, &holding, None, vec!["note".into()]);
    r.action = "check".into();
    r.proof = "not-handled".into();
    variants.push(("check", r));
    for action in ["dry-run", "not-needed", "declined"] {
        let mut r = base();
        r.action = action.into();
        variants.push((action, r));
    }
    for proof in ["interrupted", "not-waited", "failed-again", "timed-out"] {
        let mut r = base();
        r.action = "executed".into();
        r.done = vec!["suspended".into()];
        r.proof = proof.into();
        if matches!(proof, "failed-again" | "timed-out") {
            r.after = Some(after.clone());
            r.last_seen = Some("still waiting".into());
        }
        variants.push((proof, r));
    }
    let mut r = base();
    r.action = "executed".into();
    r.proof = "recovered".into();
    r.cascade = vec![CascadeItem {
        wave: 1,
        kustomization: "flux-system/apps-wave-1".into(),
        proof: "recovered".into(),
        last_seen: None,
    }];
    variants.push(("recovered+cascade", r));

    let mut want: Vec<&str> = REPORT_KEYS.to_vec();
    want.sort();
    for (name, r) in &variants {
        let v = serde_json::to_value(r).unwrap();
        let mut got: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        got.sort();
        assert_eq!(got, want, "{name}");
        let proof = v["proof"].as_str().unwrap();
        assert!(PROOF_VALUES.contains(&proof), "{name}: proof {proof:?}");
        assert!(v["cascade"].is_array(), "{name}");
        assert!(v["done"].is_array() && v["notes"].is_array(), "{name}");
    }
    // What nothing-attempted reads as, and an empty cascade is `[]`, not a missing key.
    let v = serde_json::to_value(&variants[1].1).unwrap();
    assert_eq!(v["proof"], "not-attempted");
    assert_eq!(v["cascade"], json!([]));
    assert_eq!(v["after"], Value::Null);
}

/// `--with-source` on a Kustomization whose source object does not exist: no
/// "reconcile-source" lever that patches no source; the plan says the source is missing and
/// touches no source (found by a new user on the real cluster: `sourceRef` to a missing
/// GitRepository gave "the source is fetched again").
#[test]
fn with_source_and_a_missing_source_object_says_so_and_patches_no_source() {
    let mut s = fleet();
    s.sources.clear();
    for k in s
        .kustomizations
        .iter()
        .map(|k| k["metadata"]["name"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>()
    {
        let p = plan_for(
            &s,
            &k,
            &Options {
                with_source: true,
                ..Options::default()
            },
        );
        assert_ne!(p.lever, Lever::ReconcileSource, "{k}: {p:?}");
        assert!(
            !p.steps
                .iter()
                .any(|st| matches!(st, Step::Patch { kind, .. } if kind != "Kustomization")),
            "{k}: no source is patched: {p:?}"
        );
        assert!(
            p.why
                .iter()
                .any(|w| w.contains("does not exist, so there is nothing to refetch")),
            "{k}: {:?}",
            p.why
        );
    }
}

/// Trial3: a download that failed at the revision the source still has (source-controller
/// restarted on another storage address) is retried only at spec.retryInterval: no revision
/// change enqueues it. Not `reconciling: nothing is stuck`: a failed run, and a request frees
/// it now (seen: Ready within 8 s of a requestedAt).
#[test]
fn a_download_failed_at_the_revision_the_source_still_has_is_requested() {
    let mut s = fleet();
    let rev = named_mut(&mut s.sources, "flux-system")["status"]["artifact"]["revision"].clone();
    assert!(rev.is_string());
    let k = ks_mut(&mut s, "build-broken");
    k["status"]["lastAttemptedRevision"] = rev;
    let c = cond_mut(k, "Ready");
    c["reason"] = json!("ArtifactFailed");
    c["message"] = json!(
        "failed to download archive: GET http://127.0.0.1:38783/gitrepository/flux-system/flux-system/x.tar.gz: connection refused"
    );
    let d = diag(&s, "build-broken");
    assert_eq!(d.class, Class::ReconcileFailed, "{}", d.summary);
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("no revision change enqueues a run")),
        "{:?}",
        d.hints
    );
    let p = plan_for(&s, "build-broken", &Options::default());
    assert_eq!(p.lever, Lever::RequestReconcile, "{p:#?}");
}

/// kustomize-controller: a run that finds no artifact is Ready=False reason ArtifactFailed
/// "Source artifact not found, retrying in 30s" and requeues after spec.retryInterval (it is
/// also enqueued when the source's artifact revision changes). Seen on the real controller: a
/// Kustomization created with its GitRepository reads so for a few seconds. The verdict
/// follows the source as it is NOW: Ready with an artifact, or still fetching its first, is not
/// stuck (no "fix in Git"); a failed source is.
#[test]
fn artifact_not_found_follows_the_source_as_it_is_now() {
    let set = |s: &mut Snapshot, src_ready: Option<(&str, &str)>, artifact: bool| {
        let k = ks_mut(s, "build-broken");
        let c = cond_mut(k, "Ready");
        c["reason"] = json!("ArtifactFailed");
        c["message"] = json!("Source artifact not found, retrying in 30s");
        let g = named_mut(&mut s.sources, "flux-system");
        if !artifact {
            g["status"].as_object_mut().unwrap().remove("artifact");
        }
        let conds = g["status"]["conditions"].as_array_mut().unwrap();
        conds.retain(|c| c["type"] != "Ready");
        if let Some((status, msg)) = src_ready {
            conds.push(json!({"type": "Ready", "status": status, "reason": "x", "message": msg}));
        }
    };
    // The source has an artifact now.
    let mut s = fleet();
    set(
        &mut s,
        Some(("True", "stored artifact for revision 'main@sha1:bbbb'")),
        true,
    );
    let d = diag(&s, "build-broken");
    assert_eq!(d.class, Class::Reconciling, "{}", d.summary);
    assert!(
        d.hints.iter().any(|h| h.contains("has one now")),
        "{:?}",
        d.hints
    );
    let p = plan_for(&s, "build-broken", &Options::default());
    assert_eq!(p.lever, Lever::None);
    // The source is still fetching its first artifact.
    let mut s = fleet();
    set(&mut s, Some(("Unknown", "building artifact")), false);
    let d = diag(&s, "build-broken");
    assert_eq!(d.class, Class::Reconciling, "{}", d.summary);
    assert!(
        d.hints.iter().any(|h| h.contains("still fetching")),
        "{:?}",
        d.hints
    );
    // The source failed and is retrying: source-controller v1.9 marks a source without an
    // artifact Ready=Unknown "building artifact" at the start of every attempt and keeps
    // FetchFailed=True from the last one (seen on the real controller: a missing secretRef
    // read so for part of every retry). Not "still fetching": the failure is quoted.
    let mut s = fleet();
    set(&mut s, Some(("Unknown", "building artifact")), false);
    let msg = "failed to get secret 'flux-system/git-creds': secrets \"git-creds\" not found";
    named_mut(&mut s.sources, "flux-system")["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "FetchFailed", "status": "True", "reason": "AuthenticationFailed", "message": msg}));
    let d = diag(&s, "build-broken");
    assert_eq!(d.class, Class::SourceNotReady, "{}", d.summary);
    assert!(
        !d.hints.iter().any(|h| h.contains("still fetching")),
        "{:?}",
        d.hints
    );
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("is retrying now") && h.contains(msg)),
        "{:?}",
        d.hints
    );
    assert_eq!(d.source.as_ref().unwrap().failure().unwrap().message(), msg);
    let p = plan_for(&s, "build-broken", &Options::default());
    assert_eq!(p.lever, Lever::FixInGit);
    // The source failed: that is what keeps it failing.
    let mut s = fleet();
    set(
        &mut s,
        Some(("False", "failed to checkout: authentication required")),
        false,
    );
    let d = diag(&s, "build-broken");
    assert_eq!(d.class, Class::SourceNotReady, "{}", d.summary);
    let p = plan_for(&s, "build-broken", &Options::default());
    assert_eq!(p.lever, Lever::FixInGit);
}

/// A failed check whose objects are all Current now (a revert on the real
/// kube-controller-manager: the Deployment read for a moment with its new observedGeneration
/// and the old ProgressDeadlineExceeded, then Available): the next run passes, so the proof
/// wait must not call it a state that "will not get there by itself", for the target or for a
/// dependent waiting on it.
#[test]
fn failed_check_whose_objects_are_current_now_passes_on_retry_and_is_not_terminal() {
    use unstick::diagnose::{Heading, heading, passes_on_retry};
    let mut s = fleet();
    let before = diag(&s, "hc-failed");
    assert!(!passes_on_retry(&before), "{before:#?}");
    assert!(matches!(heading(&before), Heading::Terminal(_)));
    let dep = s
        .objects
        .iter_mut()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "crashy")
        .unwrap();
    let generation = dep["metadata"]["generation"].clone();
    dep["status"] = json!({
        "observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
        "readyReplicas": 1, "availableReplicas": 1,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
        ]
    });
    let d = diag(&s, "hc-failed");
    assert_eq!(d.class, Class::HealthCheckFailed);
    assert!(d.blocking.is_empty(), "{:#?}", d.blocking);
    assert!(passes_on_retry(&d));
    let h = heading(&d);
    assert!(
        matches!(&h, Heading::Moving(m) if m.contains("every object the check waits on is Current now") && m.contains("spec.retryInterval")),
        "{h:?}"
    );
    // A dependent of it: moving too (the dependency's next run passes).
    let k = ks_mut(&mut s, "after-lagging");
    k["spec"]["dependsOn"] = json!([{"name": "hc-failed"}]);
    k["status"]["conditions"][0]["message"] =
        json!("dependency 'flux-system/hc-failed' is not ready");
    let h = heading(&diag(&s, "after-lagging"));
    assert!(matches!(&h, Heading::Moving(_)), "{h:?}");
}

/// Fresh-user trial item 3: a dependsOn rollout two levels deep. `platform` is Ready at the
/// source's revision; `platform-config` still carries the DependencyNotReady its last check
/// wrote (re-checked every --requeue-dependency); `apps` waits on `platform-config`. Nothing
/// is stuck at any level: no finding (exit 0) in `--all` and in `ks/NAME`, and the plan
/// waits (request-reconcile) instead of fix-dependency.
#[test]
fn a_stale_dependency_not_ready_one_level_down_is_still_a_rollout() {
    use unstick::diagnose::{Heading, heading, is_finding};
    use unstick::report::fleet_report;
    let mut s = fleet();
    let base = ks(&s, "after-lagging").clone();
    let mut platform = ks(&s, "lagging").clone();
    platform["metadata"]["name"] = json!("platform");
    platform["status"]["lastAppliedRevision"] =
        json!("main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    platform["status"]["lastAttemptedRevision"] =
        json!("main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
    let waiting_on = |name: &str, dep: &str| {
        let mut k = base.clone();
        k["metadata"]["name"] = json!(name);
        k["spec"]["dependsOn"] = json!([{"name": dep}]);
        k["status"]["conditions"][0]["message"] =
            json!(format!("dependency 'flux-system/{dep}' is not ready"));
        k
    };
    s.kustomizations = vec![
        platform,
        waiting_on("platform-config", "platform"),
        waiting_on("apps-wave-0", "platform-config"),
        waiting_on("apps-wave-1", "platform-config"),
    ];
    assert_eq!(diag(&s, "platform").class, Class::Healthy);
    for name in ["platform-config", "apps-wave-0", "apps-wave-1"] {
        let d = diag(&s, name);
        assert_eq!(d.class, Class::WaitingOnDependencies, "{name}");
        assert!(!is_finding(&d), "{name}: {d:#?}");
        assert!(matches!(heading(&d), Heading::Moving(_)), "{name}");
    }
    let d = diag(&s, "apps-wave-0");
    assert_eq!(
        d.root_cause.as_ref().unwrap().kustomization,
        "flux-system/platform-config"
    );
    assert_eq!(
        d.summary,
        "waiting on dependencies: the dependency is progressing (the ordering working, not a fault)"
    );
    let (r, findings) = fleet_report(&s, vec![], &Options::default());
    assert_eq!((r.total, r.findings), (4, 0), "{:#?}", r.items);
    assert!(!findings);
    let p = plan_for(&s, "apps-wave-0", &Options::default());
    assert_eq!(p.lever, Lever::Wait, "{p:#?}");
    // One level further down something is really stuck: the finding stays.
    let mut stuck = s.clone();
    stuck.kustomizations[0]["status"]["conditions"][0] = json!({"type": "Ready",
        "status": "False", "reason": "BuildFailed", "message": "kustomize build failed",
        "lastTransitionTime": "2026-11-30T07:00:00Z", "observedGeneration": 1});
    for name in ["platform-config", "apps-wave-0"] {
        assert!(is_finding(&diag(&stuck, name)), "{name}");
    }
}

/// Fresh-user trial item 1, offline: kustomize-controller at 0 replicas makes every
/// Kustomization that is not suspended `controller-not-running` (a finding, lever
/// start-controller, no ETA), Ready ones too, with what they last read as a note (s6 final
/// trial: `healthy` rows beside "need attention"). Its replicas back with a ready pod: the
/// old verdicts.
#[test]
fn a_controller_at_zero_replicas_is_the_root_cause() {
    use unstick::diagnose::is_finding;
    let mut s = fleet();
    let before = diag(&s, "lagging");
    assert_eq!(before.class, Class::Reconciling);
    s.controller.as_mut().unwrap()["spec"]["replicas"] = json!(0);
    s.controller.as_mut().unwrap()["status"] = json!({"observedGeneration": 2});
    let d = diag(&s, "lagging");
    assert_eq!(d.class, Class::ControllerNotRunning, "{d:#?}");
    assert_eq!(
        d.summary,
        "kustomize-controller is not running (0 replicas): nothing reconciles"
    );
    assert!(is_finding(&d));
    assert!(d.eta.is_none());
    let p = plan_for(&s, "lagging", &Options::default());
    assert_eq!(p.lever, Lever::StartController);
    assert!(p.steps.is_empty());
    assert!(
        p.effect
            .contains("kubectl -n flux-system scale deployment/kustomize-controller --replicas=1"),
        "{}",
        p.effect
    );
    let text = unstick::report::controller_text(Engine::new(&s).controller.as_ref(), &[]);
    assert!(
        text.starts_with("Controller flux-system/kustomize-controller: NOT RUNNING (0 replicas)"),
        "{text}"
    );
    // One Ready as last written is not healthy (with a note): a finding with lever
    // start-controller (the trial: `--all` said "all healthy", exit 0, under a NOT RUNNING
    // line), and no lever writes while nothing reconciles: `--with-source --yes` (the trial
    // waited 2m30s on an unhandled request) and `--restart-controller` plan
    // start-controller, no steps.
    let h = diag(&s, "platform");
    assert_eq!(h.class, Class::ControllerNotRunning);
    assert!(is_finding(&h), "{h:#?}");
    assert_eq!(
        h.stopped_controllers
            .iter()
            .map(|c| c.command.as_str())
            .collect::<Vec<_>>(),
        ["kubectl -n flux-system scale deployment/kustomize-controller --replicas=1"]
    );
    assert_eq!(
        plan_for(&s, "platform", &Options::default()).lever,
        Lever::StartController
    );
    let (r, findings) = unstick::report::fleet_report(&s, vec![], &Options::default());
    assert!(findings);
    assert_eq!(
        r.findings, r.total,
        "every row needs the controller: {r:#?}"
    );
    assert_eq!(r.stopped_controllers.len(), 1, "{r:#?}");
    assert_eq!(r.stopped_controllers[0].controller, "kustomize-controller");
    assert_eq!(
        h.summary,
        "kustomize-controller is not running (0 replicas): nothing reconciles"
    );
    assert!(
        h.hints
            .iter()
            .any(|x| x.starts_with("as last written by the controllers: Ready: ")),
        "{:#?}",
        h.hints
    );
    for opts in [
        Options {
            with_source: true,
            ..Options::default()
        },
        Options {
            restart_controller: true,
            ..Options::default()
        },
    ] {
        for name in ["platform", "lagging", "apps-wave-0"] {
            let p = plan_for(&s, name, &opts);
            assert_eq!(p.lever, Lever::StartController, "{name}: {p:#?}");
            assert!(p.steps.is_empty(), "{name}: {p:#?}");
            assert!(!p.wait_for_request_token, "{name}");
        }
    }
    // A source-controller Deployment with no ready pod: Kustomizations reading a
    // GitRepository wait on it.
    let mut s = fleet();
    s.source_controller = Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "source-controller", "namespace": "flux-system", "generation": 1},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "replicas": 1, "unavailableReplicas": 1}}));
    let d = diag(&s, "lagging");
    assert_eq!(d.class, Class::ControllerNotRunning);
    assert_eq!(
        d.summary,
        "source-controller is not running (no ready pod, 0 of 1 ready): nothing fetches"
    );
    // Running again: the old verdict.
    s.source_controller.as_mut().unwrap()["status"]["readyReplicas"] = json!(1);
    assert_eq!(diag(&s, "lagging").class, Class::Reconciling);
    assert!(!is_finding(&diag(&s, "platform")));

    // source-controller at 0 replicas, every Kustomization Ready as last written (the trial:
    // `--all` said "all 6 healthy", exit 0, never naming it; `--with-source --dry-run`
    // planned the refetch and said "the source fetches now").
    s.source_controller.as_mut().unwrap()["spec"]["replicas"] = json!(0);
    let h = diag(&s, "platform");
    assert_eq!(h.class, Class::ControllerNotRunning);
    assert!(is_finding(&h), "{h:#?}");
    let [sc] = h.stopped_controllers.as_slice() else {
        panic!("source-controller named, alone: {h:#?}")
    };
    assert_eq!(
        sc.line(),
        "source-controller is not running (0 replicas): nothing fetches"
    );
    assert_eq!(
        sc.command,
        "kubectl -n flux-system scale deployment/source-controller --replicas=1"
    );
    let p = plan_for(
        &s,
        "platform",
        &Options {
            with_source: true,
            ..Options::default()
        },
    );
    assert_eq!(p.lever, Lever::StartController, "{p:#?}");
    assert!(p.steps.is_empty(), "{p:#?}");
    assert!(
        p.why.iter().all(|w| !w.contains("fetches now")),
        "nothing fetches while source-controller is down: {:#?}",
        p.why
    );
    assert!(
        p.effect.contains("scale deployment/source-controller"),
        "{}",
        p.effect
    );
    let (r, findings) = unstick::report::fleet_report(&s, vec![], &Options::default());
    assert!(findings, "{r:#?}");
    assert_eq!(
        r.stopped_controllers
            .iter()
            .map(|c| c.controller.as_str())
            .collect::<Vec<_>>(),
        ["source-controller"]
    );
    let row = r
        .items
        .iter()
        .find(|i| i.kustomization == "flux-system/platform")
        .unwrap();
    assert_eq!(row.lever, Lever::StartController);
    let text = unstick::report::stopped_text(
        &cluster_loop::output::Painter::for_stream(cluster_loop::output::ColorChoice::Never, false),
        &r.stopped_controllers,
    );
    assert_eq!(
        text,
        "source-controller is not running (0 replicas): nothing fetches; lever start-controller: kubectl -n flux-system scale deployment/source-controller --replicas=1\n"
    );
}

/// Fresh-user trial item 5: `BuildFailed` on kustomize-controller's own temp dir (`lstat
/// /tmp/kustomization-NNN: no such file or directory`) is an I/O error of the controller: the
/// lever is a plain reconcile request (with the reason), not fix-in-git. A build error of
/// the repository's content stays fix-in-git.
#[test]
fn a_build_failure_on_the_controllers_temp_dir_gets_a_request() {
    let mut s = fleet();
    let set = |s: &mut Snapshot, msg: &str| {
        let k = ks_mut(s, "lagging");
        k["status"]["lastAttemptedRevision"] =
            json!("main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
        k["status"]["conditions"][0] = json!({"type": "Ready", "status": "False",
            "reason": "BuildFailed", "message": msg,
            "lastTransitionTime": "2026-11-30T07:20:00Z", "observedGeneration": 1});
    };
    set(
        &mut s,
        "kustomize build failed: lstat /tmp/kustomization-2167172500: no such file or directory",
    );
    assert_eq!(diag(&s, "lagging").class, Class::BuildFailed);
    let p = plan_for(&s, "lagging", &Options::default());
    assert_eq!(p.lever, Lever::RequestReconcile, "{p:#?}");
    assert_eq!(p.steps.len(), 1, "{p:#?}");
    let why = p.why.join("\n");
    assert!(
        why.contains("kustomize-controller's own temp dir")
            && why.contains("`/tmp/kustomization-2167172500: no such file or directory`")
            && !why.contains("fails the same way"),
        "{why}"
    );
    // A file the repository does not have (a path below the temp dir): the content's fault.
    set(
        &mut s,
        "kustomize build failed: accumulating resources: accumulation err='accumulating resources from 'missing.yaml': evalsymlink failure on '/tmp/kustomization-1/apps/missing.yaml' : lstat /tmp/kustomization-1/apps/missing.yaml: no such file or directory'",
    );
    assert_eq!(
        plan_for(&s, "lagging", &Options::default()).lever,
        Lever::FixInGit
    );
    set(
        &mut s,
        "kustomize build failed: map[string]interface {}(nil): yaml: unmarshal errors:\n  line 3: mapping key \"image\" already defined",
    );
    assert_eq!(
        plan_for(&s, "lagging", &Options::default()).lever,
        Lever::FixInGit
    );
}

/// Fresh-user trial item 6: the credential advice names the Kustomization's namespace in the
/// command it prints (`-n prod`: without it the command acts on flux-system's namesake), and
/// a Secret that holds no credential at all (only `ca.crt`) is said to hold none instead of
/// "the Git server refused the credential ... token rotation".
#[test]
fn credential_advice_names_the_namespace_and_a_secret_without_a_credential() {
    let mut s = fleet();
    for k in s.kustomizations.iter_mut() {
        if k["metadata"]["name"] == "charts" {
            k["metadata"]["namespace"] = json!("prod");
            k["spec"]["sourceRef"]["namespace"] = json!("flux-system");
        }
    }
    let d = Engine::new(&s).diagnose("prod", "charts").unwrap();
    let hint = d
        .hints
        .iter()
        .find(|h| h.contains("authentication required"))
        .unwrap();
    assert!(
        hint.contains("`kubectl unstick ks/charts -n prod --with-source`"),
        "{hint}"
    );
    assert!(hint.contains("token rotation"), "{hint}");
    // The Secret read: only a CA bundle.
    s.secret_keys.insert(
        "flux-system/charts-token".into(),
        vec!["ca.crt".to_string()],
    );
    let d = Engine::new(&s).diagnose("prod", "charts").unwrap();
    let hint = d
        .hints
        .iter()
        .find(|h| h.contains("authentication required"))
        .unwrap();
    assert!(
        hint.contains("Secret flux-system/charts-token holds none (its keys: ca.crt;"),
        "{hint}"
    );
    assert!(
        !hint.contains("refused") && !hint.contains("token rotation"),
        "{hint}"
    );
    assert!(hint.contains("-n prod --with-source"), "{hint}");
    // With a credential in it: refused, the rotation advice.
    s.secret_keys.insert(
        "flux-system/charts-token".into(),
        vec!["password".to_string(), "username".to_string()],
    );
    let d = Engine::new(&s).diagnose("prod", "charts").unwrap();
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("refused the token in Secret flux-system/charts-token key `password` (sent as basic auth")),
        "{:#?}",
        d.hints
    );
}

/// Fresh-user trial item 14: `ks/apps-wave-2` (diagnosis, then plan) says the "...is the first
/// non-ready dependency..." sentence once.
#[test]
fn the_first_non_ready_dependency_sentence_is_said_once() {
    let s = fleet();
    let p = cluster_loop::output::Painter::new(false);
    let text = unstick::report::diagnosis_text(&p, &diag(&s, "apps-wave-2"), "")
        + &unstick::report::plan_text(&p, &plan_for(&s, "apps-wave-2", &Options::default()));
    assert_eq!(
        text.matches("is the first non-ready dependency").count(),
        1,
        "{text}"
    );
}

/// A run in progress past its own timeout (kustomize-controller v1.9 Reconciling message
/// "Fetching manifests for revision R with a timeout of T"; seen on the real controllers: a
/// restarted kustomize-controller retrying the artifact download from a source-controller it
/// could not reach) is not "reconciling normally ... nothing is stuck", and an ETA already in
/// the past is never printed (s6 trial N1: "ETA 23:03:03Z" = the run's start, 90 s earlier).
#[test]
fn a_run_past_its_timeout_is_a_finding_and_a_past_eta_is_not_shown() {
    use unstick::diagnose::is_finding;
    let set = |s: &mut Snapshot, started: &str| {
        let k = ks_mut(s, "busy");
        for c in k["status"]["conditions"].as_array_mut().unwrap() {
            c["lastTransitionTime"] = json!(started);
            if c["type"] == "Reconciling" {
                c["message"] = json!(
                    "Fetching manifests for revision main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb with a timeout of 1m0s"
                );
            }
        }
        // The last run took 0.5 s: start + 0.5 s is long past.
        k["status"]["history"][0]["lastReconciledDuration"] = json!("0.5s");
    };
    // Started 10 s before `now` (07:30:00): within its 1m timeout, not a finding.
    let mut s = fleet();
    set(&mut s, "2026-11-30T07:29:50Z");
    let d = diag(&s, "busy");
    assert_eq!(d.class, Class::Reconciling, "{}", d.summary);
    assert!(
        d.summary.starts_with("reconciling normally"),
        "{}",
        d.summary
    );
    assert!(d.overdue_secs.is_none());
    assert!(d.eta.is_none(), "an ETA in the past is no ETA: {:?}", d.eta);
    assert!(!d.summary.contains("ETA"), "{}", d.summary);
    assert!(!is_finding(&d));
    // Started 90 s before `now`: 30 s past its timeout.
    let mut s = fleet();
    set(&mut s, "2026-11-30T07:28:30Z");
    let d = diag(&s, "busy");
    assert_eq!(d.overdue_secs, Some(30), "{}", d.summary);
    assert!(
        d.summary.contains("past its timeout (by 30s)"),
        "{}",
        d.summary
    );
    assert!(!d.summary.contains("normally"), "{}", d.summary);
    assert!(d.eta.is_none());
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("logs deploy/kustomize-controller")),
        "{:?}",
        d.hints
    );
    assert!(is_finding(&d), "a run past its timeout is a finding");
    let p = plan_for(&s, "busy", &Options::default());
    assert_eq!(p.lever, Lever::None);
    assert!(p.steps.is_empty(), "{:?}", p.steps);
    assert!(
        !p.why.iter().any(|w| w.contains("nothing is stuck")),
        "{:?}",
        p.why
    );
    // A retry after failed runs: Reconciling kept its lastTransitionTime from the first
    // failure (07:00), Ready went Unknown when this run started (07:29:50): not overdue.
    let mut s = fleet();
    set(&mut s, "2026-11-30T07:29:50Z");
    let k = ks_mut(&mut s, "busy");
    cond_mut(k, "Reconciling")["lastTransitionTime"] = json!("2026-11-30T07:00:00Z");
    let d = diag(&s, "busy");
    assert!(d.overdue_secs.is_none(), "{}", d.summary);
    assert!(!is_finding(&d));
}

/// s7 fresh-user trial, wrong verdict A: a health check in flight over a Deployment that is
/// only rolling out (its pod Running and ready, waiting out `minReadySeconds`; or every
/// object Current already, right after a fix was pushed) read "health-check-in-flight",
/// lever suspend-resume, exit 1. It is waiting, not stuck: no finding, lever `wait`, no
/// write. A pod reason, a ReplicaSet that cannot create pods (`ReplicaFailure`), or a pod
/// the kubelet reports Unhealthy (readiness probe failing) keep it a finding.
#[test]
fn a_rollout_in_progress_under_a_health_check_is_waiting_not_stuck() {
    use unstick::diagnose::{is_finding, waits_on_progress_only};
    let stuck = fleet();
    assert!(is_finding(&diag(&stuck, "apps-wave-0")));

    // The pod pulled its (registry-qualified) image and is ready; the Deployment is not
    // available yet (minReadySeconds).
    let mut rolling = fleet();
    named_mut(&mut rolling.objects, "podinfo")["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("ghcr.io/stefanprodan/podinfo:6.7.0");
    named_mut(&mut rolling.objects, "podinfo")["spec"]["minReadySeconds"] = json!(45);
    {
        let p = named_mut(&mut rolling.pods, "podinfo-7d9c-x2x");
        p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready",
            "status": "True", "lastTransitionTime": "2026-11-30T07:29:40Z"}],
            "containerStatuses": [{"name": "podinfo", "image": "ghcr.io/stefanprodan/podinfo:6.7.0",
            "ready": true, "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": "2026-11-30T07:29:35Z"}}}]});
    }
    rolling.events.clear();
    let d = diag(&rolling, "apps-wave-0");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    assert_eq!(d.blocking.len(), 1, "{:#?}", d.blocking);
    assert!(d.blocking[0].progressing, "{:#?}", d.blocking);
    assert!(waits_on_progress_only(&d));
    assert!(!is_finding(&d), "{d:#?}");
    let p = plan_for(&rolling, "apps-wave-0", &Options::default());
    assert_eq!(p.lever, Lever::Wait, "{p:#?}");

    // A ReplicaSet that cannot create its pods is held, not moving.
    let mut quota = rolling.clone();
    named_mut(&mut quota.objects, "podinfo")["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(
            json!({"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
            "message": "pods \"podinfo-7d9c-abcde\" is forbidden: exceeded quota: compute"}),
        );
    let d = diag(&quota, "apps-wave-0");
    assert!(!d.blocking[0].progressing);
    assert!(is_finding(&d), "{d:#?}");

    // A pod running but failing its readiness probe (kubelet `Unhealthy` Warning).
    let mut unready = rolling.clone();
    {
        let p = named_mut(&mut unready.pods, "podinfo-7d9c-x2x");
        p["status"]["containerStatuses"][0]["ready"] = json!(false);
    }
    unready
        .events
        .push(json!({"type": "Warning", "reason": "Unhealthy",
        "message": "Readiness probe failed: HTTP probe failed with statuscode: 503",
        "involvedObject": {"kind": "Pod", "namespace": "apps", "name": "podinfo-7d9c-x2x"},
        "lastTimestamp": "2026-11-30T07:29:50Z"}));
    let d = diag(&unready, "apps-wave-0");
    assert!(!d.blocking[0].progressing);
    assert!(is_finding(&d), "{d:#?}");

    // Every object Current already (the fix applied, the controller's next poll passes it):
    // no blocking object, and every kind of the wait set was read.
    let mut current = rolling.clone();
    named_mut(&mut current.objects, "podinfo")["status"] =
        named_mut(&mut current.objects, "web")["status"].clone();
    let d = diag(&current, "apps-wave-0");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    assert!(d.blocking.is_empty(), "{:#?}", d.blocking);
    assert!(!is_finding(&d), "{d:#?}");
    assert_eq!(
        plan_for(&current, "apps-wave-0", &Options::default()).lever,
        Lever::Wait
    );
    // A built-in kind whose kstatus is trivially Current (the Service) is never listed by
    // the live reader: still read enough (s7 trial9 A3: suspend-resume, exit 1 the seconds
    // after a rollout finished).
    let mut no_service = current.clone();
    no_service.listed_kinds.retain(|k| k != "/Service");
    assert!(!is_finding(&diag(&no_service, "apps-wave-0")));
    // A Kustomization waiting on it (dependsOn) waits too (s7 trial9 A2: fix-dependency).
    let dependents: Vec<String> = rolling
        .kustomizations
        .iter()
        .filter(|k| {
            k["spec"]["dependsOn"]
                .as_array()
                .is_some_and(|d| d.iter().any(|x| x["name"] == "apps-wave-0"))
        })
        .map(|k| k["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(!dependents.is_empty());
    for name in &dependents {
        let d = diag(&rolling, name);
        if d.class == Class::WaitingOnDependencies {
            assert!(!is_finding(&d), "{name}: {d:#?}");
        }
    }
    // ... but not when a kind of the wait set was not read: empty then means unknown.
    let mut unread = current.clone();
    unread.listed_kinds.retain(|k| k != "apps/Deployment");
    let d = diag(&unread, "apps-wave-0");
    assert!(d.blocking.is_empty());
    assert!(is_finding(&d), "{d:#?}");
}

/// s7 trial (minor D): the fleet view's JSON/YAML wrote `rootCause: '-'`, the table's empty
/// cell, for a row with no root cause; it is `null` there, a string where there is one.
#[test]
fn a_fleet_row_without_a_root_cause_has_null_not_a_dash() {
    use unstick::report::fleet_report;
    let s = fleet();
    let (r, _) = fleet_report(&s, vec![], &Options::default());
    let v = serde_json::to_value(&r).unwrap();
    let rows = v["items"].as_array().unwrap();
    let row = |k: &str| {
        rows.iter()
            .find(|i| i["kustomization"] == k)
            .unwrap_or_else(|| panic!("{k}: {v:#}"))
    };
    assert_eq!(row("flux-system/platform")["class"], "healthy");
    assert!(row("flux-system/platform")["rootCause"].is_null(), "{v:#}");
    assert!(rows.iter().all(|i| i["rootCause"] != "-"), "{v:#}");
    assert!(rows.iter().any(|i| i["rootCause"].is_string()), "{v:#}");
}
