//! One verdict in every view: the class, the lever, the `--all` summary line, the exit code,
//! and the JSON and YAML documents say the same about the same snapshot (s6 final trial,
//! "Not fixed (left)"):
//! - with kustomize-controller and source-controller both at 0 replicas, both are named at
//!   once, each with its scale command (the trial saw source-controller only after starting
//!   kustomize-controller);
//! - a Kustomization whose controller is stopped is never classed `healthy` beside "need
//!   attention";
//! - `ks/apps-wave-1 --dry-run` on `./demo --keep`'s fleet with its dependency Ready does not
//!   show lever `request-reconcile` beside "nothing to unstick";
//! - the ETA of a run in progress is said once.

use cluster_loop::error::{EXIT_FINDING, EXIT_OK};
use cluster_loop::output::{ColorChoice, OutputFormat, Painter, to_machine_string};
use serde::Serialize;
use serde_json::{Value, json};
use unstick::diagnose::{Class, Engine, is_finding};
use unstick::lever::{Lever, Options, Plan};
use unstick::report::{self, FleetReport, Report, fleet_report};
use unstick::snapshot::Snapshot;

use crate::support::{cond_mut, demo_objects, diag, fleet, ks_mut, plan_with};
use crate::wait_set::{REV, TOKEN, controller, gitrepo};

const KC_SCALE: &str = "kubectl -n flux-system scale deployment/kustomize-controller --replicas=1";
const SC_SCALE: &str = "kubectl -n flux-system scale deployment/source-controller --replicas=1";

fn plain() -> Painter {
    Painter::for_stream(ColorChoice::Never, false)
}

/// `value` as `-o json` and as `-o yaml` print it, each read back: the two must be the same
/// document. Returns it.
fn machine(value: &impl Serialize) -> Value {
    let j: Value =
        serde_json::from_str(&to_machine_string(OutputFormat::Json, value).unwrap()).unwrap();
    let y: Value =
        serde_saphyr::from_str(&to_machine_string(OutputFormat::Yaml, value).unwrap()).unwrap();
    assert_eq!(j, y, "-o json and -o yaml differ");
    j
}

/// A flux-system Deployment of `name` with `replicas` and, when running, a ready pod.
fn flux_deployment(name: &str, replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": name, "namespace": "flux-system", "generation": 2},
    "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
        "template": {"spec": {"containers": [{"name": "manager",
            "image": format!("ghcr.io/fluxcd/{name}:v1.9.6"), "args": ["--concurrent=4"]}]}}},
    "status": if replicas == 0 { json!({"observedGeneration": 2}) } else {
        json!({"observedGeneration": 2, "replicas": replicas, "readyReplicas": replicas,
            "availableReplicas": replicas})
    }})
}

/// `./demo --keep`'s fleet: the Kustomizations of `kubectl kustomize clusters/dev` (real
/// kubectl) that the demo applies (all but the root `flux-system`), each Ready at the
/// source's revision as kustomize-controller v1.9.6 leaves them, the GitRepository serving
/// that revision, and both controllers running.
fn demo_fleet() -> Snapshot {
    static DEMO: std::sync::OnceLock<Snapshot> = std::sync::OnceLock::new();
    DEMO.get_or_init(read_demo_fleet).clone()
}

fn read_demo_fleet() -> Snapshot {
    let kustomizations: Vec<Value> = demo_objects()
        .into_iter()
        .filter(|d| d["kind"] == "Kustomization" && d["metadata"]["name"] != "flux-system")
        .map(|mut k| {
            k["metadata"]["generation"] = json!(1);
            k["status"] = json!({"observedGeneration": 1, "lastAppliedRevision": REV,
                "lastAttemptedRevision": REV,
                "conditions": [{"type": "Ready", "status": "True",
                    "reason": "ReconciliationSucceeded", "observedGeneration": 1,
                    "lastTransitionTime": "2026-11-30T07:15:00Z",
                    "message": format!("Applied revision: {REV}")}]});
            k
        })
        .collect();
    assert_eq!(kustomizations.len(), 5, "{kustomizations:#?}");
    Snapshot {
        now: "2026-11-30T07:21:00Z".parse().unwrap(),
        namespace: Some("flux-system".into()),
        kustomizations,
        sources: vec![gitrepo(REV)],
        controller: Some(controller("v1.9.6")),
        source_controller: Some(flux_deployment("source-controller", 1)),
        ..Default::default()
    }
}

/// What `kubectl unstick ks/NAME --dry-run` prints for `flux-system/name` on `s`: its text, its
/// `-o json|yaml` document (read back), its exit code, and the plan.
fn single(s: &Snapshot, name: &str) -> (String, Value, i32, Plan) {
    let e = Engine::new(s);
    let d = diag(s, name);
    let plan = plan_with(s, name, TOKEN, &Options::default());
    let holding = e.holding_workers();
    let text = report::single_text(&plain(), &d, e.controller.as_ref(), &holding, &[], &plan);
    let mut rep = Report::new(&d, e.controller.as_ref(), &holding, Some(&plan), vec![]);
    rep.action = "dry-run".into();
    let doc = machine(&rep);
    (text, doc, report::read_only_exit(&d, &plan), plan)
}

/// What `kubectl unstick --all` prints on `s`: its text (table, stopped controllers, summary
/// line), its document, its exit code, and the report.
fn all(s: &Snapshot) -> (String, Value, i32, FleetReport) {
    let (r, findings) = fleet_report(s, vec![], &Options::default());
    let p = plain();
    let text = format!(
        "{}{}{}",
        report::fleet_table(&p, &r.items),
        report::stopped_text(&p, &r.stopped_controllers),
        report::fleet_summary(&r)
    );
    let doc = machine(&r);
    (text, doc, if findings { EXIT_FINDING } else { EXIT_OK }, r)
}

/// Every row and the whole say the same in every view of `--all` and of `ks/NAME`: a row
/// classed `healthy` is no finding; the counts, the summary line and the exit code follow the
/// rows; each row's class and lever are the single view's, in text, JSON and YAML.
fn agree(s: &Snapshot) {
    let (text, doc, code, r) = all(s);
    let items = doc["items"].as_array().unwrap();
    assert_eq!(items.len(), r.total, "{doc:#}");
    let not_healthy = items.iter().filter(|i| i["class"] != "healthy").count();
    let findings = r.items.iter().filter(|i| is_finding(&i.diagnosis)).count();
    assert_eq!(
        (doc["notHealthy"].as_u64(), doc["findings"].as_u64()),
        (Some(not_healthy as u64), Some(findings as u64)),
        "{doc:#}"
    );
    assert_eq!(
        code,
        if findings > 0 { EXIT_FINDING } else { EXIT_OK },
        "{text}"
    );
    let summary = text.lines().last().unwrap();
    if not_healthy == 0 {
        assert_eq!(
            summary,
            format!("all {} Kustomizations are healthy", r.total),
            "{text}"
        );
    } else {
        assert!(
            summary.starts_with(&format!(
                "{not_healthy} of {} Kustomizations not healthy; ",
                r.total
            )),
            "{text}"
        );
    }
    for (row, i) in r.items.iter().zip(items) {
        let name = row.kustomization.split_once('/').unwrap().1;
        assert!(
            !(row.class == Class::Healthy && is_finding(&row.diagnosis)),
            "{name}: classed healthy, yet a finding: {:#?}",
            row.diagnosis
        );
        let (stext, sdoc, scode, plan) = single(s, name);
        assert_eq!(i["class"], sdoc["diagnosis"]["class"], "{name}");
        assert_eq!(
            (i["lever"].as_str(), sdoc["plan"]["lever"].as_str()),
            (Some(plan.lever.as_str()), Some(plan.lever.as_str())),
            "{name}: the fleet row's lever is the single view's"
        );
        assert!(
            stext.contains(&format!(
                "Kustomization {}: {}\n",
                row.kustomization,
                row.class.as_str()
            )),
            "{stext}"
        );
        assert!(
            stext.contains(&format!("Lever: {}\n", plan.lever)),
            "{stext}"
        );
        assert_eq!(
            scode,
            if is_finding(&row.diagnosis) {
                EXIT_FINDING
            } else {
                EXIT_OK
            },
            "{name}: {stext}"
        );
        // "Nothing to unstick" is said beside a lever that writes nothing.
        if stext.contains("nothing to unstick") || stext.contains("nothing is stuck") {
            assert!(
                !plan.lever.mutates() && plan.steps.is_empty(),
                "{name}: {stext}"
            );
        }
    }
}

/// The trial: both controllers at 0 replicas, `--all` named only kustomize-controller (and
/// source-controller once kustomize-controller was started). Every stopped controller a
/// Kustomization needs is named at once, with its scale command, in every view.
#[test]
fn both_stopped_controllers_are_named_at_once() {
    let mut s = demo_fleet();
    s.controller = Some(flux_deployment("kustomize-controller", 0));
    s.source_controller = Some(flux_deployment("source-controller", 0));
    let both = ["kustomize-controller", "source-controller"];
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap_or_else(|| panic!("not a list: {v:#}"))
            .iter()
            .map(|c| c["controller"].as_str().unwrap().to_string())
            .collect()
    };
    let (text, doc, code, _) = all(&s);
    assert_eq!(code, EXIT_FINDING);
    assert_eq!(names(&doc["stoppedControllers"]), both, "{doc:#}");
    for i in doc["items"].as_array().unwrap() {
        assert_eq!(names(&i["diagnosis"]["stoppedControllers"]), both, "{i:#}");
    }
    assert!(
        text.contains(&format!(
            "kustomize-controller is not running (0 replicas): nothing reconciles; lever start-controller: {KC_SCALE}\n"
        )) && text.contains(&format!(
            "source-controller is not running (0 replicas): nothing fetches; lever start-controller: {SC_SCALE}\n"
        )),
        "{text}"
    );
    // ks/NAME: both named, the plan's effect starts both.
    let (text, doc, code, plan) = single(&s, "apps-wave-1");
    assert_eq!(code, EXIT_FINDING);
    assert_eq!(plan.lever, Lever::StartController);
    assert!(plan.steps.is_empty(), "{plan:#?}");
    assert!(
        plan.effect.contains(KC_SCALE) && plan.effect.contains(SC_SCALE),
        "{}",
        plan.effect
    );
    assert_eq!(
        names(&doc["diagnosis"]["stoppedControllers"]),
        both,
        "{doc:#}"
    );
    assert!(
        text.contains("Controller flux-system/kustomize-controller: NOT RUNNING (0 replicas)")
            && text.contains(&format!(
                "source-controller is not running (0 replicas): nothing fetches; lever start-controller: {SC_SCALE}\n"
            )),
        "{text}"
    );
    agree(&s);
    // kustomize-controller started, source-controller still at 0: only source-controller.
    s.controller = Some(flux_deployment("kustomize-controller", 1));
    let (_, doc, code, _) = all(&s);
    assert_eq!(code, EXIT_FINDING);
    assert_eq!(
        names(&doc["stoppedControllers"]),
        ["source-controller"],
        "{doc:#}"
    );
    agree(&s);
}

/// The trial: `--all` rows read class `healthy` beside "6 of 6 Kustomizations need
/// attention" with kustomize-controller down. A Kustomization that cannot be reconciled
/// because a controller it needs is stopped is `controller-not-running` (a finding, lever
/// start-controller) in every view, whatever it last read; the summary line counts it as not
/// healthy; exit 1. Started again: healthy, exit 0.
#[test]
fn no_row_is_healthy_while_its_controller_is_stopped() {
    for stopped in ["kustomize-controller", "source-controller"] {
        let mut s = demo_fleet();
        let (_, _, code, r) = all(&s);
        assert_eq!((code, r.not_healthy), (EXIT_OK, 0), "{:#?}", r.items);
        agree(&s);
        let d = flux_deployment(stopped, 0);
        if stopped == "kustomize-controller" {
            s.controller = Some(d);
        } else {
            s.source_controller = Some(d);
        }
        let (text, doc, code, r) = all(&s);
        assert_eq!(code, EXIT_FINDING, "{stopped}: {text}");
        for i in doc["items"].as_array().unwrap() {
            assert_eq!(i["class"], "controller-not-running", "{stopped}: {i:#}");
            assert_eq!(i["lever"], "start-controller", "{stopped}: {i:#}");
        }
        assert!(
            !text.contains("healthy  ") && !text.contains("| healthy"),
            "{stopped}: {text}"
        );
        assert_eq!(
            text.lines().last().unwrap(),
            format!(
                "{n} of {n} Kustomizations not healthy; {n} need attention",
                n = r.total
            ),
            "{stopped}: {text}"
        );
        let (text, doc, code, _) = single(&s, "platform");
        assert_eq!(code, EXIT_FINDING, "{text}");
        assert_eq!(doc["diagnosis"]["class"], "controller-not-running");
        assert!(
            text.starts_with("Kustomization flux-system/platform: controller-not-running\n"),
            "{text}"
        );
        // What it last read is said, as such.
        assert!(
            text.contains("as last written by the controllers: Ready: Applied revision"),
            "{text}"
        );
        agree(&s);
    }
}

/// The trial on `./demo --keep`: apps-wave-1 still carries the DependencyNotReady the
/// controller wrote while apps-wave-0 was rolling out, and apps-wave-0 is Ready now.
/// `ks/apps-wave-1 --dry-run` said "nothing to unstick" (exit 0) beside lever
/// `request-reconcile`, while `--all` showed `wait`: the lever is `wait` (no write) in every
/// view, and running it without --dry-run waits for the run with proof.
#[test]
fn a_wave_whose_dependency_is_ready_again_shows_the_lever_of_its_verdict() {
    let mut s = demo_fleet();
    let k = ks_mut(&mut s, "apps-wave-1");
    let c = cond_mut(k, "Ready");
    c["status"] = json!("False");
    c["reason"] = json!("DependencyNotReady");
    c["message"] = json!("dependency 'flux-system/apps-wave-0' is not ready");
    c["lastTransitionTime"] = json!("2026-11-30T07:20:40Z");
    let d = diag(&s, "apps-wave-1");
    assert_eq!(d.class, Class::WaitingOnDependencies);
    assert!(d.root_cause.is_none(), "{d:#?}");
    assert!(!is_finding(&d));
    let (text, doc, code, plan) = single(&s, "apps-wave-1");
    assert_eq!(code, EXIT_OK, "{text}");
    assert_eq!(plan.lever, Lever::Wait, "{text}");
    assert!(plan.steps.is_empty(), "{plan:#?}");
    assert!(plan.request_token.is_none(), "{plan:#?}");
    assert_eq!(doc["plan"]["lever"], "wait", "{doc:#}");
    assert!(text.contains("Lever: wait\n"), "{text}");
    assert!(text.contains("nothing to unstick"), "{text}");
    // The wait covers the dependency check's requeue and one full run, plus the margin.
    assert!(plan.wait_secs >= d.timeout_secs, "{plan:#?}");
    let (_, fdoc, fcode, _) = all(&s);
    assert_eq!(fcode, EXIT_OK);
    let row = fdoc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kustomization"] == "flux-system/apps-wave-1")
        .unwrap();
    assert_eq!(row["lever"], "wait", "{row:#}");
    agree(&s);
    // --with-source asks for a write: the refetch and a run to prove, said as such.
    let p = plan_with(
        &s,
        "apps-wave-1",
        TOKEN,
        &Options {
            with_source: true,
            ..Options::default()
        },
    );
    assert_eq!(p.lever, Lever::ReconcileSource, "{p:#?}");
    assert_eq!(p.steps.len(), 2, "{p:#?}");
    // The unit fixture's dependsOn rollout (a dependency reconciling) agrees the same way.
    agree(&fleet());
}

/// The trial: a run in progress with an ETA in the future printed its ETA twice (in the
/// summary and on a line of its own). Once, in the single view's text.
#[test]
fn the_eta_of_a_run_in_progress_is_said_once() {
    let mut s = demo_fleet();
    let k = ks_mut(&mut s, "apps-wave-0");
    k["status"]["history"] = json!([{"digest": "sha256:1", "firstReconciled": "2026-11-30T07:00:00Z",
        "lastReconciled": "2026-11-30T07:15:00Z", "lastReconciledDuration": "2m0s",
        "lastReconciledStatus": "ReconciliationSucceeded", "totalReconciliations": 2}]);
    let c = cond_mut(k, "Ready");
    c["status"] = json!("Unknown");
    c["reason"] = json!("Progressing");
    c["message"] = json!("Reconciliation in progress");
    c["lastTransitionTime"] = json!("2026-11-30T07:20:30Z");
    k["status"]["conditions"].as_array_mut().unwrap().push(
        json!({"type": "Reconciling", "status": "True", "reason": "Progressing",
            "lastTransitionTime": "2026-11-30T07:20:30Z",
            "message": format!("Building manifests for revision {REV} with a timeout of 15m0s")}),
    );
    let d = diag(&s, "apps-wave-0");
    assert_eq!(d.class, Class::Reconciling, "{}", d.summary);
    let eta = d
        .eta
        .expect("an ETA 2m after the run's start, in the future");
    assert_eq!(eta.to_string(), "2026-11-30T07:22:30Z");
    let (text, doc, code, _) = single(&s, "apps-wave-0");
    assert_eq!(code, EXIT_OK);
    assert_eq!(text.matches("ETA").count(), 1, "{text}");
    assert_eq!(text.matches("07:22:30").count(), 1, "{text}");
    assert_eq!(doc["diagnosis"]["eta"], "2026-11-30T07:22:30Z", "{doc:#}");
    agree(&s);
}
