//! The wait set and the blocking list, as kustomize-controller reads health (issue 15 items
//! 3, 7, 8) on snapshots written from upstream shapes:
//! - the wait set (kustomization_controller.go `checkHealth`): `spec.wait` -> the applied
//!   objects (the inventory); else `spec.healthChecks` with namespaces as given;
//! - a Job reads as fluxcd/pkg runtime/statusreaders `jobConditions`: InProgress until
//!   Complete (with its pod's pull error), Current when suspended (v1.8+);
//! - a missing CRD is `Unknown`, a Terminating object names its finalizers and the pods that
//!   hold a PVC, a wrong-namespace healthChecks entry is never "in the inventory", a
//!   suspended HelmRelease says so with the fix; `no matches for kind` on apply says the CRD is
//!   missing and sends no request; a dependsOn cycle is "break the cycle in Git" only; a
//!   source's failure is quoted verbatim.

use serde_json::{Value, json};
use unstick::diagnose::{Class, Engine, wait_set};
use unstick::lever::{self, Lever, Options};
use unstick::proof::{Expect, Verdict, judge};
use unstick::report::root_cause_cell;
use unstick::snapshot::Snapshot;

pub(crate) use crate::support::diag;
use crate::support::plan_with;

pub(crate) const REV: &str = "main@sha1:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
pub(crate) const OLD: &str = "main@sha1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

pub(crate) fn controller(tag: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "kustomize-controller", "namespace": "flux-system"},
        "spec": {"selector": {"matchLabels": {"app": "kustomize-controller"}},
            "template": {"spec": {"containers": [{"name": "manager",
                "image": format!("ghcr.io/fluxcd/kustomize-controller:{tag}"),
                "args": ["--concurrent=4"]}]}}},
        "status": {"readyReplicas": 1}})
}

pub(crate) fn gitrepo(rev: &str) -> Value {
    json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "flux-system", "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "1m"},
        "status": {"observedGeneration": 1, "artifact": {"revision": rev},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded",
                "message": format!("stored artifact for revision '{rev}'")}]}})
}

/// A Kustomization with its health check in flight at REV.
pub(crate) fn in_flight(name: &str, spec: Value, inventory: &[&str]) -> Value {
    let mut k = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "10m", "timeout": "5m", "path": "./apps",
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"observedGeneration": 1, "lastAttemptedRevision": REV,
            "lastAppliedRevision": OLD,
            "inventory": {"entries": inventory.iter().map(|i| json!({"id": i, "v": "v1"})).collect::<Vec<_>>()},
            "conditions": [
                {"type": "Reconciling", "status": "True", "reason": "Progressing",
                 "lastTransitionTime": "2026-11-30T07:20:00Z",
                 "message": format!("Running health checks for revision {REV} with a timeout of 5m0s")},
                {"type": "Ready", "status": "Unknown", "reason": "Progressing",
                 "message": "Reconciliation in progress"}]}});
    for (key, v) in spec.as_object().unwrap() {
        k["spec"][key] = v.clone();
    }
    k
}

pub(crate) fn snap(
    tag: &str,
    ks: Vec<Value>,
    objects: Vec<Value>,
    pods: Vec<Value>,
    listed: &[&str],
) -> Snapshot {
    Snapshot {
        now: "2026-11-30T07:21:00Z".parse().unwrap(),
        kustomizations: ks,
        sources: vec![gitrepo(REV)],
        controller: Some(controller(tag)),
        objects,
        pods,
        events: vec![],
        listed_kinds: listed.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// The plan for `flux-system/name` with the default options, as of the snapshots here.
pub(crate) fn plan(s: &Snapshot, name: &str) -> lever::Plan {
    plan_with(s, name, TOKEN, &Options::default())
}

/// The requestedAt the plans of these snapshots write (their `now` plus half a second).
pub(crate) const TOKEN: &str = "2026-11-30T07:21:00.5Z";

fn job(suspend: bool, started: bool) -> Value {
    let mut j = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "apps", "uid": "u-1"},
        "spec": {"backoffLimit": 6, "template": {"spec": {"containers": [{"name": "migrate", "image": "registry.example.local/db-migrate:1.2"}]}}},
        "status": {}});
    if suspend {
        j["spec"]["suspend"] = json!(true);
    }
    if started {
        j["status"] = json!({"startTime": "2026-11-30T07:20:05Z", "active": 1, "ready": 0});
    }
    j
}

fn job_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "migrate-x7k2p", "namespace": "apps",
            "labels": {"batch.kubernetes.io/job-name": "migrate"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "migrate", "uid": "u-1", "controller": true}]},
        "spec": {"containers": [{"name": "migrate", "image": "registry.example.local/db-migrate:1.2"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "migrate", "ready": false, "restartCount": 0,
            "image": "registry.example.local/db-migrate:1.2",
            "state": {"waiting": {"reason": "ImagePullBackOff",
                "message": "Back-off pulling image \"registry.example.local/db-migrate:1.2\""}}}]}})
}

/// fluxcd/pkg runtime/statusreaders `jobConditions`: a started Job whose pod cannot pull is
/// InProgress (plain kstatus would call it Current and list nothing), with the pod's reason.
#[test]
fn job_in_progress_until_complete_names_its_pods_pull_error() {
    let s = snap(
        "v1.9.4",
        vec![in_flight(
            "db",
            json!({"wait": true}),
            &["apps_migrate_batch_Job"],
        )],
        vec![job(false, true)],
        vec![job_pod()],
        &["batch/Job"],
    );
    let d = diag(&s, "db");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    assert_eq!(d.blocking.len(), 1, "{:#?}", d.blocking);
    let b = &d.blocking[0];
    assert_eq!(b.object, "Job/apps/migrate");
    assert_eq!(b.kstatus, "InProgress");
    assert_eq!(b.origin, "inventory");
    assert_eq!(
        b.message,
        "Job in progress. success:0, active: 1, failed: 0"
    );
    assert_eq!(b.pods.len(), 1);
    assert_eq!(b.pods[0].reason, "ImagePullBackOff");
    assert_eq!(
        b.pods[0].image.as_deref(),
        Some("registry.example.local/db-migrate:1.2")
    );
    assert!(root_cause_cell(&d).contains("Job/apps/migrate ImagePullBackOff"));
}

#[test]
fn suspended_job_is_current_from_v1_8_and_in_progress_before() {
    for (tag, blocking) in [("v1.9.4", false), ("v1.8.0", false), ("v1.7.3", true)] {
        let s = snap(
            tag,
            vec![in_flight(
                "db",
                json!({"wait": true}),
                &["apps_migrate_batch_Job"],
            )],
            vec![job(true, false)],
            vec![],
            &["batch/Job"],
        );
        let d = diag(&s, "db");
        assert_eq!(!d.blocking.is_empty(), blocking, "{tag}: {:#?}", d.blocking);
    }
}

/// A CRD missing after an upgrade: the status poller reads the object as Unknown
/// (`timeout waiting for: [ExternalSecret/apps/db-creds status: 'Unknown']`).
#[test]
fn missing_crd_is_unknown_with_the_fix() {
    let mut s = snap(
        "v1.9.4",
        vec![in_flight(
            "db",
            json!({"wait": true}),
            &["apps_db-creds_external-secrets.io_ExternalSecret"],
        )],
        vec![],
        vec![],
        &[],
    );
    s.unserved_kinds
        .insert("external-secrets.io/ExternalSecret".into());
    let d = diag(&s, "db");
    assert_eq!(d.blocking.len(), 1, "{:#?}", d.blocking);
    let b = &d.blocking[0];
    assert_eq!(b.object, "ExternalSecret/apps/db-creds");
    assert_eq!(b.kstatus, "Unknown");
    assert!(
        b.message.contains("CustomResourceDefinition is missing"),
        "{}",
        b.message
    );
    assert!(b.fix.as_deref().unwrap().contains("install the CRD"));
}

#[test]
fn terminating_pvc_names_its_finalizer_and_the_pod_that_holds_it() {
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "apps",
            "deletionTimestamp": "2026-11-30T07:10:00Z",
            "finalizers": ["kubernetes.io/pvc-protection"]},
        "status": {"phase": "Bound"}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": "apps"},
        "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
        "status": {"phase": "Running"}});
    let s = snap(
        "v1.9.4",
        vec![in_flight(
            "db",
            json!({"wait": true}),
            &["apps_data__PersistentVolumeClaim"],
        )],
        vec![pvc],
        vec![pod],
        &["/PersistentVolumeClaim"],
    );
    let d = diag(&s, "db");
    let b = &d.blocking[0];
    assert_eq!(b.kstatus, "Terminating");
    assert!(
        b.message.contains("kubernetes.io/pvc-protection"),
        "{}",
        b.message
    );
    assert!(
        b.fix.as_deref().unwrap().contains("pod apps/db-0"),
        "{:?}",
        b.fix
    );
}

/// A healthChecks entry naming the wrong namespace is a healthChecks entry, never "in the
/// inventory"; the right namespace is named.
#[test]
fn wrong_namespace_health_check_is_named_as_such() {
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps", "generation": 1},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1,
            "conditions": [{"type": "Available", "status": "True"}]}});
    let s = snap(
        "v1.9.4",
        vec![in_flight(
            "web",
            json!({"healthChecks": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}]}),
            &["apps_web_apps_Deployment"],
        )],
        vec![dep],
        vec![],
        &["apps/Deployment"],
    );
    let ws = wait_set(&s.kustomizations[0]);
    assert_eq!(ws.len(), 1, "without wait the inventory is not waited on");
    let d = diag(&s, "web");
    assert_eq!(d.blocking.len(), 1, "{:#?}", d.blocking);
    let b = &d.blocking[0];
    assert_eq!(b.object, "Deployment/default/web");
    assert_eq!(b.origin, "healthChecks");
    assert_eq!(b.kstatus, "NotFound");
    assert!(!b.message.contains("inventory"), "{}", b.message);
    assert!(b.message.contains("spec.healthChecks"), "{}", b.message);
    assert!(
        b.message.contains("exists in namespace apps"),
        "{}",
        b.message
    );
    assert!(b.fix.as_deref().unwrap().contains("namespace: apps"));
}

/// With `spec.wait: true` the controller waits on the applied objects and ignores
/// spec.healthChecks (checkHealth: `if !obj.Spec.Wait { objects = healthChecks }`).
#[test]
fn wait_true_waits_on_the_inventory_only() {
    let k = in_flight(
        "web",
        json!({"wait": true, "healthChecks": [{"kind": "Deployment", "name": "other", "namespace": "x"}]}),
        &[
            "apps_web_apps_Deployment",
            "flux-system_web_kustomize.toolkit.fluxcd.io_Kustomization",
        ],
    );
    let ws = wait_set(&k);
    assert_eq!(ws.len(), 1, "{ws:?}");
    assert_eq!(ws[0].name, "web");
    assert_eq!(ws[0].kind, "Deployment");
}

/// A HelmRelease under wait that is itself suspended: InProgress, and the fix is to resume
/// it (kustomize-controller#1100, #709).
#[test]
fn suspended_helmrelease_says_suspended_and_resume() {
    let hr = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "redis", "namespace": "apps", "generation": 2},
        "spec": {"suspend": true},
        "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "False",
            "reason": "InstallFailed", "message": "install retries exhausted"}]}});
    let s = snap(
        "v1.9.4",
        vec![in_flight(
            "redis",
            json!({"wait": true}),
            &["apps_redis_helm.toolkit.fluxcd.io_HelmRelease"],
        )],
        vec![hr],
        vec![],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    let d = diag(&s, "redis");
    let b = &d.blocking[0];
    assert_eq!(b.kstatus, "InProgress");
    assert!(
        b.message.starts_with("suspended (spec.suspend: true)"),
        "{}",
        b.message
    );
    assert!(
        b.fix
            .as_deref()
            .unwrap()
            .contains("flux resume helmrelease redis -n apps"),
        "{:?}",
        b.fix
    );
}

/// Every blocker needs its own fix (here a suspended HelmRelease): no write to the
/// Kustomization is planned (a fresh run would wait on it the same way), the fix is in `why`;
/// `--restart-controller` still plans its lever when asked.
#[test]
fn blockers_that_need_their_own_fix_get_no_kustomization_lever() {
    let hr = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "redis", "namespace": "apps", "generation": 2},
        "spec": {"suspend": true},
        "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "Unknown",
            "reason": "Progressing", "message": "Running 'install' action with timeout of 5m0s"}]}});
    let s = snap(
        "v1.9.4",
        vec![in_flight(
            "redis",
            json!({"wait": true}),
            &["apps_redis_helm.toolkit.fluxcd.io_HelmRelease"],
        )],
        vec![hr],
        vec![],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    let p = plan(&s, "redis");
    assert_eq!(p.lever, Lever::FixBlockers);
    assert!(p.steps.is_empty(), "{:?}", p.steps);
    assert!(p.recommend_gate_arg.is_none(), "{:?}", p.recommend_gate_arg);
    assert!(
        p.why
            .iter()
            .any(|w| w.contains("flux resume helmrelease redis -n apps")),
        "{:?}",
        p.why
    );
    let restart = plan_with(
        &s,
        "redis",
        TOKEN,
        &Options {
            restart_controller: true,
            ..Options::default()
        },
    );
    assert_eq!(restart.lever, Lever::RestartController);
}

/// A kind with a `spec.healthCheckExprs` entry (kustomize-controller v1.5+) is read by the
/// controller with CEL, not kstatus: unstick does not evaluate CEL, so it never claims the
/// generic reading (here Current: no conditions) as the controller's; the member is Unknown with
/// the expressions quoted.
#[test]
fn health_check_exprs_members_are_unknown_never_a_generic_verdict() {
    let cr = json!({"apiVersion": "example.com/v1", "kind": "Database",
        "metadata": {"name": "db", "namespace": "apps", "generation": 1},
        "status": {"phase": "Provisioning"}});
    let s = snap(
        "v1.9.4",
        vec![in_flight(
            "db",
            json!({"wait": true, "healthCheckExprs": [{"apiVersion": "example.com/v1",
                "kind": "Database", "current": "status.phase == 'Ready'",
                "failed": "status.phase == 'Failed'"}]}),
            &["apps_db_example.com_Database"],
        )],
        vec![cr],
        vec![],
        &["example.com/Database"],
    );
    let d = diag(&s, "db");
    assert_eq!(d.blocking.len(), 1, "{:#?}", d.blocking);
    let b = &d.blocking[0];
    assert_eq!(b.object, "Database/apps/db");
    assert_eq!(b.kstatus, "Unknown");
    assert!(
        b.message
            .contains("current: `status.phase == 'Ready'`, failed: `status.phase == 'Failed'`"),
        "{}",
        b.message
    );
    assert!(b.message.contains("does not evaluate"), "{}", b.message);
    assert!(b.message.contains("would read Current"), "{}", b.message);
    assert!(b.fix.is_none());
    // Not a fix-blockers case: the lever logic stays the controller's.
    assert_ne!(plan(&s, "db").lever, Lever::FixBlockers);
}

/// `no matches for kind` on apply: the CRD is missing; no request (a rerun fails the same way).
#[test]
fn no_matches_for_kind_on_apply_says_crd_missing_and_sends_nothing() {
    let k = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "secrets", "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "10m", "path": "./s", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"lastAttemptedRevision": REV, "conditions": [
            {"type": "Ready", "status": "False", "reason": "ReconciliationFailed",
             "message": "ExternalSecret/apps/db-creds dry-run failed: no matches for kind \"ExternalSecret\" in version \"external-secrets.io/v1beta1\""}]}});
    let s = snap("v1.9.4", vec![k], vec![], vec![], &[]);
    let d = diag(&s, "secrets");
    assert_eq!(d.class, Class::ReconcileFailed);
    assert_eq!(
        d.missing_crds,
        vec!["ExternalSecret (external-secrets.io/v1beta1)".to_string()]
    );
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("CustomResourceDefinition is missing"))
    );
    let p = plan(&s, "secrets");
    assert_eq!(p.lever, Lever::FixInGit);
    assert!(p.steps.is_empty());
}

/// A dependsOn cycle never ends by itself: the only lever is "break the cycle in Git".
#[test]
fn dependson_cycle_is_break_the_cycle_in_git_only() {
    let mk = |name: &str, dep: &str| {
        json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "flux-system", "generation": 1},
            "spec": {"interval": "10m", "path": "./x", "dependsOn": [{"name": dep}],
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
            "status": {"conditions": [{"type": "Ready", "status": "False",
                "reason": "DependencyNotReady",
                "message": format!("dependency 'flux-system/{dep}' is not ready")}]}})
    };
    let s = snap(
        "v1.9.4",
        vec![mk("a", "b"), mk("b", "a")],
        vec![],
        vec![],
        &[],
    );
    let p = plan(&s, "a");
    assert_eq!(p.lever, Lever::FixInGit);
    assert_eq!(p.effect, "break the cycle in Git");
    assert!(p.alternatives.is_empty(), "{:?}", p.alternatives);
    assert!(
        p.why.iter().all(|w| !w.contains("ends by itself")),
        "{:?}",
        p.why
    );
}

/// Quote only what the object says: a missing secret is not "authentication required".
#[test]
fn source_failure_is_quoted_verbatim() {
    let mut s = snap(
        "v1.9.4",
        vec![in_flight("db", json!({}), &[])],
        vec![],
        vec![],
        &[],
    );
    s.sources[0]["spec"]["secretRef"] = json!({"name": "git-creds"});
    s.sources[0]["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "reason": "AuthenticationFailed",
        "message": "failed to get secret 'flux-system/git-creds': secrets \"git-creds\" not found"}]);
    let d = diag(&s, "db");
    let all = d.hints.join("\n");
    assert!(!all.contains("authentication required"), "{all}");
    assert!(
        all.contains(
            "failed to get secret 'flux-system/git-creds': secrets \"git-creds\" not found"
        ),
        "{all}"
    );
    assert!(all.contains("does not exist"), "{all}");
}

/// One diagnosis for `--all` and for one object: a Kustomization whose own health check is in
/// flight names its own blocker as root cause, even while its dependency is reconciling; the
/// dependency is a hint.
#[test]
fn own_health_check_is_the_root_cause_not_a_reconciling_dependency() {
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps", "generation": 2},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "web", "image": "0.1.1"}]}}},
        "status": {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": 0, "unavailableReplicas": 1}});
    let mut w0 = in_flight("wave-0", json!({}), &[]);
    w0["status"]["conditions"] = json!([{"type": "Reconciling", "status": "True",
        "reason": "Progressing", "message": "Building manifests for revision x",
        "lastTransitionTime": "2026-11-30T07:20:50Z"},
        {"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress"}]);
    let w1 = in_flight(
        "wave-1",
        json!({"wait": true, "dependsOn": [{"name": "wave-0"}]}),
        &["apps_web_apps_Deployment"],
    );
    let s = snap(
        "v1.9.4",
        vec![w0, w1],
        vec![dep],
        vec![],
        &["apps/Deployment"],
    );
    let d = diag(&s, "wave-1");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    assert!(d.root_cause.is_none(), "{:#?}", d.root_cause);
    assert!(
        root_cause_cell(&d).starts_with("Deployment/apps/web"),
        "{}",
        root_cause_cell(&d)
    );
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("dependency flux-system/wave-0 is reconciling"))
    );
    let (fleet, _) = unstick::report::fleet_report(&s, vec![], &Options::default());
    let row = fleet
        .items
        .iter()
        .find(|i| i.kustomization == "flux-system/wave-1")
        .unwrap();
    assert_eq!(
        row.root_cause.as_deref().unwrap_or("-"),
        root_cause_cell(&d)
    );
    assert_eq!(row.class, d.class);
}

/// The proof judge: a failed check at the revision the source still serves, while the source
/// is fetching (our --with-source request not handled), is Moving, never Terminal; once the
/// source handled it at the same revision, Terminal; a canceled check is Moving.
#[test]
fn proof_judge_waits_while_the_source_moves() {
    let mut k = in_flight("w", json!({}), &[]);
    k["metadata"]["annotations"] = json!({"reconcile.fluxcd.io/requestedAt": "T1"});
    k["status"]["lastHandledReconcileAt"] = json!("T1");
    k["status"]["conditions"] = json!([
        {"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry", "message": "x"},
        {"type": "Ready", "status": "False", "reason": "HealthCheckFailed",
         "message": "health check failed after 1s: failed early due to stalled resources: [Deployment/apps/web status: 'Failed']"}]);
    let mut s = snap("v1.9.4", vec![k], vec![], vec![], &[]);
    s.sources[0]["metadata"]["annotations"] = json!({"reconcile.fluxcd.io/requestedAt": "T1"});
    s.sources[0]["status"]["lastHandledReconcileAt"] = json!("T0");
    s.sources[0]["status"]["conditions"] = json!([
        {"type": "Reconciling", "status": "True", "reason": "Progressing", "message": "building artifact: new upstream revision 'main@sha1:cc'"},
        {"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "building artifact"}]);
    let e = Expect {
        token: Some("T1"),
        generation: None,
        source_token: Some("T1"),
        fresh_run_after: None,
    };
    let v = judge(&Engine::new(&s), "flux-system", "w", &e);
    assert!(
        matches!(&v, Verdict::Moving(m) if m.contains("has not handled our request")),
        "{v:?}"
    );
    // The source handled it and serves the same revision: the failure is terminal.
    s.sources[0]["status"]["lastHandledReconcileAt"] = json!("T1");
    s.sources[0]["status"]["conditions"] = gitrepo(REV)["status"]["conditions"].clone();
    let v = judge(&Engine::new(&s), "flux-system", "w", &e);
    assert!(
        matches!(&v, Verdict::Terminal(m) if m.contains(REV)),
        "{v:?}"
    );
    // A newer revision arrived that the Kustomization has not attempted: moving again.
    s.sources[0]["status"]["artifact"]["revision"] =
        json!("main@sha1:cccccccccccccccccccccccccccccccccccccccc");
    let v = judge(&Engine::new(&s), "flux-system", "w", &e);
    assert!(
        matches!(&v, Verdict::Moving(m) if m.contains("has not attempted")),
        "{v:?}"
    );
    // Recovered: the contract at the source's revision.
    let k = &mut s.kustomizations[0];
    k["status"]["lastAttemptedRevision"] =
        json!("main@sha1:cccccccccccccccccccccccccccccccccccccccc");
    k["status"]["lastAppliedRevision"] =
        json!("main@sha1:cccccccccccccccccccccccccccccccccccccccc");
    k["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "Applied revision"}]);
    assert_eq!(
        judge(&Engine::new(&s), "flux-system", "w", &e),
        Verdict::Recovered
    );
    // ... but not before our request was handled.
    s.kustomizations[0]["status"]["lastHandledReconcileAt"] = json!("T0");
    assert!(matches!(
        judge(&Engine::new(&s), "flux-system", "w", &e),
        Verdict::Moving(_)
    ));
}

#[test]
fn health_check_canceled_is_moving() {
    let mut k = in_flight("w", json!({}), &[]);
    k["status"]["lastAttemptedRevision"] = json!(REV);
    k["status"]["conditions"] = json!([
        {"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry", "message": "x"},
        {"type": "Ready", "status": "False", "reason": "HealthCheckCanceled",
         "message": "New reconciliation triggered by Kustomization/flux-system/w"}]);
    let s = snap("v1.9.4", vec![k], vec![], vec![], &[]);
    let v = judge(&Engine::new(&s), "flux-system", "w", &Expect::default());
    assert!(
        matches!(&v, Verdict::Moving(m) if m.contains("starts right away")),
        "{v:?}"
    );
}

/// The deadline predicts fail-fast (kustomize-controller v1.1+): with a 1h timeout, a
/// Deployment that stopped progressing turns Failed at lastUpdateTime + progressDeadlineSeconds
/// and the controller ends the check then ("failed early due to stalled resources"), not at
/// the 1h deadline; the plan's fresh run is at that time. With DisableFailFastBehavior, the
/// deadline.
#[test]
fn deadline_predicts_fail_fast_at_progress_deadline() {
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps", "generation": 2},
        "spec": {"replicas": 1, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "web", "image": "registry.example.local/web:2"}]}}},
        "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1, "unavailableReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
                "lastUpdateTime": "2026-11-30T07:19:30Z", "lastTransitionTime": "2026-11-30T07:19:30Z"}]}});
    let k = in_flight(
        "web",
        json!({"wait": true, "timeout": "1h"}),
        &["apps_web_apps_Deployment"],
    );
    let mut k1h = k.clone();
    k1h["status"]["conditions"][0]["message"] = json!(format!(
        "Running health checks for revision {REV} with a timeout of 1h0m0s"
    ));
    let s = snap(
        "v1.9.4",
        vec![k1h.clone()],
        vec![dep.clone()],
        vec![],
        &["apps/Deployment"],
    );
    let d = diag(&s, "web");
    let hc = d.health_check.as_ref().unwrap();
    assert_eq!(hc.deadline.unwrap().to_string(), "2026-11-30T08:20:00Z");
    assert_eq!(hc.fail_fast_at.unwrap().to_string(), "2026-11-30T07:29:30Z");
    assert_eq!(hc.ends_at, hc.fail_fast_at);
    assert_eq!(hc.ends_in_secs, Some(510));
    assert!(
        hc.fail_fast_because
            .as_deref()
            .unwrap()
            .contains("Deployment/apps/web passes its progressDeadlineSeconds (600s)"),
        "{:?}",
        hc.fail_fast_because
    );
    assert!(
        d.summary.contains("ends earlier, at 07:29:30Z"),
        "{}",
        d.summary
    );
    let p = plan(&s, "web");
    assert_eq!(
        p.fresh_run_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-30T07:29:30Z"),
        "{p:#?}"
    );
    // Fail-fast off: the deadline.
    let mut s2 = snap("v1.9.4", vec![k1h], vec![dep], vec![], &["apps/Deployment"]);
    s2.controller.as_mut().unwrap()["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--feature-gates=DisableFailFastBehavior=true"]);
    let d = diag(&s2, "web");
    let hc = d.health_check.as_ref().unwrap();
    assert!(hc.fail_fast_at.is_none());
    assert_eq!(hc.ends_at, hc.deadline);
    let _ = k;
}

/// Worker starvation (fluxcd/flux2#5622): a new Kustomization waits for a worker while all
/// `--concurrent` workers are held by health checks: the holders are named with their ends,
/// the first free worker is estimated, and the proof wait is sized from it.
#[test]
fn worker_starvation_names_holders_and_sizes_the_wait() {
    let mut a = in_flight("hold-a", json!({}), &[]);
    a["status"]["conditions"][0]["lastTransitionTime"] = json!("2026-11-30T07:18:00Z");
    let b = in_flight("hold-b", json!({}), &[]);
    let new = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "new", "namespace": "flux-system", "generation": 1,
            "annotations": {"reconcile.fluxcd.io/requestedAt": "2026-11-30T07:20:30Z"}},
        "spec": {"interval": "10m", "timeout": "2m", "path": "./new",
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {}});
    let mut s = snap("v1.9.4", vec![a, b, new], vec![], vec![], &[]);
    s.controller.as_mut().unwrap()["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--concurrent=2"]);
    let d = diag(&s, "new");
    assert_eq!(
        d.worker_free_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-30T07:23:00Z")
    );
    let h = d
        .hints
        .iter()
        .find(|h| h.contains("waiting for a free kustomize-controller worker"))
        .unwrap_or_else(|| panic!("{:#?}", d.hints));
    assert!(h.contains("flux-system/hold-a (until 07:23:00Z)"), "{h}");
    // The same hint stands in findings (exit 1): it never says "nothing here is stuck".
    assert!(!h.to_lowercase().contains("nothing here is stuck"), "{h}");
    assert!(h.contains("flux-system/hold-b (until 07:25:00Z)"), "{h}");
    assert!(
        d.summary.contains("the first frees at 07:23:00Z"),
        "{}",
        d.summary
    );
    let p = plan(&s, "new");
    // 2m of queue (07:21 -> 07:23) + the 2m timeout (+ 0 margin).
    assert!(p.wait_secs >= 240.0, "{}", p.wait_secs);
}

/// Levers say what they change on this controller: with the gate off, a fix the source
/// already has queued the fresh run behind the in-flight check, so no write is offered (the
/// `wait` lever, with restart-controller and its cost as the alternative); without a newer
/// revision, suspend+resume says its run fails the same way unless Git or the cluster changed.
#[test]
fn gate_off_levers_never_offer_nothing_sooner() {
    let mut k = in_flight("web", json!({"wait": true}), &[]);
    k["status"]["lastAttemptedRevision"] = json!(OLD);
    k["status"]["conditions"][0]["message"] = json!(format!(
        "Running health checks for revision {OLD} with a timeout of 5m0s"
    ));
    let s = snap("v1.9.4", vec![k.clone()], vec![], vec![], &[]);
    let p = plan(&s, "web");
    assert_eq!(p.lever, Lever::Wait, "{p:#?}");
    assert!(p.steps.is_empty());
    assert_eq!(
        p.fresh_run_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-30T07:25:00Z")
    );
    assert!(p.why.iter().any(|w| w.contains("no write")), "{:?}", p.why);
    assert!(
        p.alternatives[0].starts_with("--restart-controller"),
        "{:?}",
        p.alternatives
    );
    assert!(p.alternatives[0].contains("cost"), "{:?}", p.alternatives);
    // No newer revision: suspend+resume, with what its run can and cannot do.
    let s = snap(
        "v1.9.4",
        vec![in_flight("web", json!({"wait": true}), &[])],
        vec![],
        vec![],
        &[],
    );
    let p = plan(&s, "web");
    assert_eq!(p.lever, Lever::SuspendResume);
    assert!(
        p.why
            .iter()
            .any(|w| w.contains("fails the same way unless Git or the cluster changed")),
        "{:?}",
        p.why
    );
    assert!(
        p.alternatives
            .iter()
            .any(|a| a.starts_with("wait: the check ends by itself"))
    );
}

/// Fresh-user trial item 8: the plan waits for a fresh run after the in-flight one
/// (`fresh run expected at ...`); the in-flight run then ends failed and, its status patches
/// having refreshed the object it holds, records our generation. That is not the fresh run's
/// outcome: Moving until `status.history` shows a run that started after our writes and
/// ended; Terminal then.
#[test]
fn proof_judge_never_judges_the_old_in_flight_run() {
    let mut k = in_flight("w", json!({}), &[]);
    k["metadata"]["generation"] = json!(4);
    k["status"]["conditions"] = json!([
        {"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry", "message": "x"},
        {"type": "Ready", "status": "False", "reason": "HealthCheckFailed", "observedGeneration": 4,
         "lastTransitionTime": "2026-11-30T07:22:41Z",
         "message": "health check failed after 5m0s: timeout waiting for: [Deployment/apps/web status: 'InProgress']"}]);
    // The in-flight run: started 07:17:41, ended 07:22:41.
    k["status"]["history"] = json!([{"digest": "sha256:aa", "firstReconciled": "2026-11-30T07:00:00Z",
        "lastReconciled": "2026-11-30T07:22:41Z", "lastReconciledDuration": "5m0.2s",
        "lastReconciledStatus": "HealthCheckFailed", "totalReconciliations": 3}]);
    let mut s = snap("v1.9.4", vec![k], vec![], vec![], &[]);
    let wrote: jiff::Timestamp = "2026-11-30T07:21:00Z".parse().unwrap();
    let e = Expect {
        token: None,
        generation: Some(4),
        source_token: None,
        fresh_run_after: Some(wrote),
    };
    let v = judge(&Engine::new(&s), "flux-system", "w", &e);
    assert!(
        matches!(&v, Verdict::Moving(m) if m.contains("waiting for the fresh run to start and end")),
        "{v:?}"
    );
    // Without the fresh-run bound (a plan whose run starts now), the same state is terminal.
    let now = Expect {
        fresh_run_after: None,
        ..e
    };
    assert!(matches!(
        judge(&Engine::new(&s), "flux-system", "w", &now),
        Verdict::Terminal(_)
    ));
    // The fresh run (started 07:22:42, after our writes) ended failed: terminal.
    s.kustomizations[0]["status"]["history"][0]["lastReconciled"] = json!("2026-11-30T07:27:43Z");
    s.kustomizations[0]["status"]["history"][0]["lastReconciledDuration"] = json!("5m1s");
    let v = judge(&Engine::new(&s), "flux-system", "w", &e);
    assert!(matches!(&v, Verdict::Terminal(_)), "{v:?}");
}
