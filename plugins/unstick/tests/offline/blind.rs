//! The controller's blind spots, offline: states whose status suggests a run that
//! kustomize-controller will not make (issue 28). Each verdict is checked in `ks/NAME` (the
//! diagnosis and its plan) and in `--all` (the same row, the same finding):
//! - a dependsOn cycle drops the revision event of its whole source (`sortAndEnqueue`);
//! - an object no running kustomize-controller watches (`--watch-label-selector`), and a
//!   source no running source-controller watches;
//! - a suspended source holds back new commits;
//! - helm-controller not running while a health check waits on a HelmRelease;
//! - a `spec.path` missing from an artifact older than the Kustomization's spec;
//! - wording: a plan that writes nothing waits for nothing; a message's own newlines.

use serde_json::{Value, json};
use unstick::diagnose::{Class, Engine, Heading, heading, is_finding};
use unstick::lever::{Lever, Options};
use unstick::snapshot::Snapshot;

use crate::support::plan_with;
use crate::wait_set::{OLD, REV, TOKEN, controller, diag, gitrepo, in_flight, plan, snap};

/// A Kustomization of source flux-system, Ready at `applied` (and attempted it), with
/// `dependsOn` and its last run's end in `status.history`.
fn ready_at(name: &str, applied: &str, depends_on: &[&str]) -> Value {
    json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "10m", "path": format!("./{name}"),
            "dependsOn": depends_on.iter().map(|d| json!({"name": d})).collect::<Vec<_>>(),
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"observedGeneration": 1, "lastAppliedRevision": applied,
            "lastAttemptedRevision": applied,
            "history": [{"digest": "sha256:1", "firstReconciled": "2026-11-30T07:00:00Z",
                "lastReconciled": "2026-11-30T07:18:00Z", "lastReconciledDuration": "2s",
                "lastReconciledStatus": "ReconciliationSucceeded", "totalReconciliations": 3}],
            "conditions": [{"type": "Ready", "status": "True",
                "reason": "ReconciliationSucceeded",
                "message": format!("Applied revision: {applied}")}]}})
}

/// A member of a dependsOn cycle: held at its dependsOn check, never Ready.
fn in_cycle(name: &str, dep: &str) -> Value {
    let mut k = ready_at(name, OLD, &[dep]);
    k["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "reason": "DependencyNotReady",
        "message": format!("dependency 'flux-system/{dep}' is not ready")}]);
    k
}

/// The row of `--all` for `name`.
fn row(s: &Snapshot, name: &str) -> unstick::diagnose::Diagnosis {
    Engine::new(s)
        .diagnose_all()
        .into_iter()
        .find(|d| d.kustomization == format!("flux-system/{name}"))
        .unwrap()
}

/// kustomize-controller v1.9.6 `requestsForRevisionChangeOf`: a new revision of flux-system
/// is sorted by dependsOn over its Kustomizations not Ready at it; the cycle a <-> b fails the
/// sort and no request is made, so `apps` (no dependsOn of its own, Ready at the old
/// revision) does not run before its interval: 07:18 + 10m. A finding that names the cycle,
/// the time and the lever (break the cycle in Git, then request reconciles); the same row in
/// `--all`.
#[test]
fn a_dependson_cycle_drops_the_revision_event_of_its_whole_source() {
    let s = snap(
        "v1.9.6",
        vec![
            ready_at("apps", OLD, &[]),
            in_cycle("cycle-a", "cycle-b"),
            in_cycle("cycle-b", "cycle-a"),
        ],
        vec![],
        vec![],
        &[],
    );
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::SourceEventDropped, "{}", d.summary);
    assert!(is_finding(&d));
    assert!(
        d.summary
            .contains("flux-system/cycle-a -> flux-system/cycle-b -> flux-system/cycle-a")
            && d.summary.contains(REV)
            && d.summary.contains("interval run, about 07:28:00Z"),
        "{}",
        d.summary
    );
    assert!(
        !d.summary.contains("the next run applies it"),
        "{}",
        d.summary
    );
    let b = d.blind_spot.as_ref().unwrap();
    assert_eq!(
        b.next_run_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-30T07:28:00Z")
    );
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::FixInGit);
    assert!(p.steps.is_empty() && !p.wait_for_request_token && p.wait_secs == 0.0);
    assert!(
        p.effect.contains("break the cycle")
            && p.effect.contains("flux reconcile ks apps -n flux-system"),
        "{}",
        p.effect
    );
    let r = row(&s, "apps");
    assert_eq!(r.class, Class::SourceEventDropped);
    assert_eq!(r.summary, d.summary);
    // A cycle member keeps its own class and names the blast radius.
    let c = diag(&s, "cycle-a");
    assert_eq!(c.class, Class::WaitingOnDependencies);
    assert!(
        c.hints
            .iter()
            .any(|h| h.contains("also holds back flux-system/apps")),
        "{:#?}",
        c.hints
    );
}

/// The trial of 2026-12-03 on the demo: a cycle closed among Kustomizations that were all
/// Ready at the old revision (apps-wave-0 -> apps-wave-2 -> apps-wave-1 -> apps-wave-0). The
/// controller logged "circular dependency detected" and ran none of them; unstick said
/// "reconciling ... the next run applies it", exit 0, for each member. A member whose status
/// still promises a run is a finding that names the cycle and says no run applies the
/// revision, not even the interval run; `--all` agrees.
#[test]
fn a_cycle_member_ready_at_the_old_revision_is_never_promised_a_run() {
    let s = snap(
        "v1.9.6",
        vec![
            ready_at("apps", OLD, &[]),
            ready_at("wave-0", OLD, &["wave-2"]),
            ready_at("wave-1", OLD, &["wave-0"]),
            ready_at("wave-2", OLD, &["wave-1"]),
        ],
        vec![],
        vec![],
        &[],
    );
    for name in ["wave-0", "wave-1", "wave-2"] {
        let d = diag(&s, name);
        assert_eq!(d.class, Class::SourceEventDropped, "{name}: {}", d.summary);
        assert!(is_finding(&d), "{name}");
        assert!(
            d.summary.contains("on the dependsOn cycle")
                && d.summary.contains("not even its interval run")
                && d.summary.contains("break the cycle in Git")
                && !d.summary.contains("the next run applies it"),
            "{name}: {}",
            d.summary
        );
        assert_eq!(row(&s, name).class, Class::SourceEventDropped, "{name}");
        assert_eq!(plan(&s, name).lever, Lever::FixInGit, "{name}");
    }
    // The Kustomization off the cycle keeps its own verdict (its interval run applies it).
    assert_eq!(diag(&s, "apps").class, Class::SourceEventDropped);
}

/// The sort sees only edges from the source's own Kustomizations: a cycle through a
/// Kustomization of another source does not fail it; nor does a cycle whose members are all
/// Ready at the revision (they are left out of the sort); without a cycle the old promise
/// holds (reconciling: the revision event queues it).
#[test]
fn no_dropped_event_without_a_cycle_in_the_sort() {
    let mut other = in_cycle("cycle-b", "cycle-a");
    other["spec"]["sourceRef"]["name"] = json!("elsewhere");
    let s = snap(
        "v1.9.6",
        vec![
            ready_at("apps", OLD, &[]),
            in_cycle("cycle-a", "cycle-b"),
            other,
        ],
        vec![],
        vec![],
        &[],
    );
    assert_eq!(diag(&s, "apps").class, Class::Reconciling);
    let s = snap(
        "v1.9.6",
        vec![
            ready_at("apps", OLD, &[]),
            ready_at("cycle-a", REV, &["cycle-b"]),
            ready_at("cycle-b", REV, &["cycle-a"]),
        ],
        vec![],
        vec![],
        &[],
    );
    assert_eq!(diag(&s, "apps").class, Class::Reconciling);
    let s = snap(
        "v1.9.6",
        vec![ready_at("apps", OLD, &[])],
        vec![],
        vec![],
        &[],
    );
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::Reconciling);
    assert!(!is_finding(&d));
}

/// Per version: v1.7.3 leaves only Ready ones out of the sort, v1.8.2+ also those
/// Reconciling at the revision. A cycle whose members are Reconciling at the new revision
/// (both just started, and held at dependsOn later) drops the event on v1.7.3 only.
#[test]
fn reconciling_members_count_in_the_sort_before_v1_8_2() {
    let reconciling = |name: &str, dep: &str| {
        let mut k = in_cycle(name, dep);
        k["status"]["lastAttemptedRevision"] = json!(REV);
        k["status"]["conditions"] = json!([
            {"type": "Reconciling", "status": "True", "reason": "Progressing",
             "message": format!("Fetching manifests for revision {REV} with a timeout of 9m30s")},
            {"type": "Ready", "status": "Unknown", "reason": "Progressing",
             "message": "Reconciliation in progress"}]);
        k
    };
    let ks = vec![
        ready_at("apps", OLD, &[]),
        reconciling("cycle-a", "cycle-b"),
        reconciling("cycle-b", "cycle-a"),
    ];
    let old = snap("v1.7.3", ks.clone(), vec![], vec![], &[]);
    assert_eq!(diag(&old, "apps").class, Class::SourceEventDropped);
    let new = snap("v1.9.6", ks, vec![], vec![], &[]);
    assert_eq!(diag(&new, "apps").class, Class::Reconciling);
}

/// A Kustomization of shard `shard1` while the only kustomize-controller runs the main shard
/// (`--watch-label-selector=!sharding.fluxcd.io/key`): never `request-pending` ("a new run
/// starts as soon as a worker is free"), but `not-watched`, naming the selector; no write.
/// With the shard's own Deployment at 0 replicas: that Deployment and the command that starts
/// it. With it running: watched, the old verdict.
#[test]
fn an_object_no_running_controller_watches_is_named_never_request_pending() {
    let mut k = ready_at("sharded", REV, &[]);
    k["metadata"]["labels"] = json!({"sharding.fluxcd.io/key": "shard1"});
    k["metadata"]["annotations"] =
        json!({"reconcile.fluxcd.io/requestedAt": "2026-11-30T07:20:00Z"});
    let mut s = snap("v1.9.6", vec![k], vec![], vec![], &[]);
    let main = s.controller.as_mut().unwrap();
    main["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--watch-label-selector=!sharding.fluxcd.io/key"]);
    let d = diag(&s, "sharded");
    assert_eq!(d.class, Class::NotWatched, "{}", d.summary);
    assert!(is_finding(&d));
    assert!(
        d.summary
            .contains("no running kustomize-controller watches this object")
            && d.summary
                .contains("--watch-label-selector=!sharding.fluxcd.io/key")
            && d.summary.contains("sharding.fluxcd.io/key=shard1"),
        "{}",
        d.summary
    );
    assert!(
        d.hints.iter().any(|h| h.contains("never handled")),
        "{:#?}",
        d.hints
    );
    let p = plan(&s, "sharded");
    assert_eq!(p.lever, Lever::FixInGit);
    assert!(p.steps.is_empty());
    assert_eq!(row(&s, "sharded").class, Class::NotWatched);
    // Handled, Ready at the source's revision: the state as last written stays, the fact
    // that nothing watches it comes first.
    let mut handled = s.clone();
    handled.kustomizations[0]["status"]["lastHandledReconcileAt"] = json!("2026-11-30T07:20:00Z");
    let d = diag(&handled, "sharded");
    assert_eq!(d.class, Class::Healthy);
    assert!(
        d.hints[0].starts_with("no running kustomize-controller watches this object"),
        "{:#?}",
        d.hints
    );

    let mut shard = controller("v1.9.6");
    shard["metadata"]["name"] = json!("kustomize-controller-shard1");
    shard["spec"]["replicas"] = json!(0);
    shard["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--watch-label-selector=sharding.fluxcd.io/key in (shard1)"]);
    shard["status"] = json!({"observedGeneration": 1});
    s.kustomize_controllers = vec![s.controller.clone().unwrap(), shard.clone()];
    let d = diag(&s, "sharded");
    assert_eq!(d.class, Class::NotWatched);
    assert!(
        d.summary
            .contains("flux-system/kustomize-controller-shard1 would watch it"),
        "{}",
        d.summary
    );
    let p = plan(&s, "sharded");
    assert_eq!(p.lever, Lever::StartController);
    assert!(
        p.effect.contains(
            "kubectl -n flux-system scale deployment/kustomize-controller-shard1 --replicas=1"
        ),
        "{}",
        p.effect
    );
    shard["spec"]["replicas"] = json!(1);
    shard["status"] = json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": 1});
    s.kustomize_controllers = vec![s.controller.clone().unwrap(), shard];
    assert_eq!(diag(&s, "sharded").class, Class::RequestPending);
}

/// A source-controller Deployment with `args` and a ready pod.
fn source_controller(name: &str, args: Value) -> Value {
    let mut d = controller("v1.9.6");
    d["metadata"]["name"] = json!(name);
    d["spec"]["selector"]["matchLabels"] = json!({"app": name});
    d["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("ghcr.io/fluxcd/source-controller:v1.9.6");
    d["spec"]["template"]["spec"]["containers"][0]["args"] = args;
    d["status"] = json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": 1});
    d
}

/// A GitRepository of shard `shard1` while the only source-controller runs the main shard
/// (`--watch-label-selector=!sharding.fluxcd.io/key`, source-controller main.go cache
/// `ByObject`): it never gets an artifact, so its Kustomization (ArtifactFailed, "Source
/// artifact not found") is `not-watched` naming source-controller's selector, never "waiting
/// for the source"; the same row in `--all`; no write. A shard at 0 replicas that would watch
/// it is named with its command; a running one watches it (the old verdict). A source that
/// was fetched before it was excluded keeps its artifact: the Kustomization Ready at it is a
/// finding too (no new commit ever comes).
#[test]
fn a_source_no_running_source_controller_watches_is_named_never_waited_for() {
    let mut k = ready_at("apps", REV, &[]);
    k["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "reason": "ArtifactFailed", "message": "Source artifact not found, retrying in 30s"}]);
    let mut s = snap("v1.9.6", vec![k], vec![], vec![], &[]);
    s.sources[0]["metadata"]["labels"] = json!({"sharding.fluxcd.io/key": "shard1"});
    s.sources[0]["status"] = json!({});
    let main = source_controller(
        "source-controller",
        json!(["--watch-label-selector=!sharding.fluxcd.io/key"]),
    );
    // Watched by a main shard without a selector: a source not fetched yet, the fetch comes.
    s.source_controller = Some(source_controller("source-controller", json!([])));
    let before = diag(&s, "apps");
    assert_eq!(before.class, Class::Reconciling, "{}", before.summary);
    s.source_controller = Some(main.clone());
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::NotWatched, "{}", d.summary);
    assert!(is_finding(&d));
    assert!(
        d.summary.contains(
            "no running source-controller watches gitrepository/flux-system in flux-system"
        ) && d.summary.contains(
            "flux-system/source-controller runs with --watch-label-selector=!sharding.fluxcd.io/key"
        ) && d.summary.contains("sharding.fluxcd.io/key=shard1")
            && d.summary.contains("it has no artifact"),
        "{}",
        d.summary
    );
    assert!(!d.summary.contains("waiting"), "{}", d.summary);
    assert_eq!(d.blind_spot.as_ref().unwrap().kind, "source-not-watched");
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::FixInGit);
    assert!(p.steps.is_empty() && !p.wait_for_request_token);
    assert!(p.effect.contains("--watch-label-selector"), "{}", p.effect);
    let p = plan_with(
        &s,
        "apps",
        TOKEN,
        &Options {
            with_source: true,
            ..Options::default()
        },
    );
    assert_eq!(p.lever, Lever::FixInGit, "--with-source writes nothing");
    assert!(p.steps.is_empty());
    assert_eq!(row(&s, "apps").class, Class::NotWatched);
    assert_eq!(row(&s, "apps").summary, d.summary);

    // The shard that would watch it, scaled to 0: named, with the command that starts it.
    let mut shard = source_controller(
        "source-controller-shard1",
        json!(["--watch-label-selector=sharding.fluxcd.io/key in (shard1)"]),
    );
    shard["spec"]["replicas"] = json!(0);
    shard["status"] = json!({"observedGeneration": 1});
    s.source_controllers = vec![main.clone(), shard.clone()];
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::NotWatched);
    assert!(
        d.summary
            .contains("flux-system/source-controller-shard1 would watch it"),
        "{}",
        d.summary
    );
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::StartController);
    assert!(
        p.effect.contains(
            "kubectl -n flux-system scale deployment/source-controller-shard1 --replicas=1"
        ),
        "{}",
        p.effect
    );
    // Running: it watches the source, nothing blind.
    s.source_controllers = vec![
        main,
        source_controller(
            "source-controller-shard1",
            json!(["--watch-label-selector=sharding.fluxcd.io/key in (shard1)"]),
        ),
    ];
    assert_eq!(diag(&s, "apps").class, Class::Reconciling);

    // Excluded after it was fetched: the artifact stays, nothing new ever comes.
    let mut fetched = snap(
        "v1.9.6",
        vec![ready_at("apps", REV, &[])],
        vec![],
        vec![],
        &[],
    );
    fetched.sources[0]["metadata"]["labels"] = json!({"sharding.fluxcd.io/key": "shard1"});
    fetched.source_controller = Some(source_controller(
        "source-controller",
        json!(["--watch-label-selector=!sharding.fluxcd.io/key"]),
    ));
    let d = diag(&fetched, "apps");
    assert_eq!(d.class, Class::NotWatched, "{}", d.summary);
    assert!(
        d.summary
            .contains(&format!("its artifact {REV} is the last one fetched")),
        "{}",
        d.summary
    );
    assert_eq!(row(&fetched, "apps").class, Class::NotWatched);

    // Trial4: its last run failed to download the artifact (a URL nobody rewrites while the
    // source is unwatched). The class stays, but no request can help: another run reads the
    // same artifact. The plan writes nothing and says what lets a controller watch it.
    let mut failed = fetched.clone();
    failed.kustomizations[0]["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "reason": "ArtifactFailed", "lastTransitionTime": "2026-11-30T07:10:00Z",
        "message": "failed to download archive: GET http://127.0.0.1:34883/gitrepository/flux-system/flux-system/x.tar.gz: connection refused"}]);
    let d = diag(&failed, "apps");
    assert_eq!(
        d.blind_spot.as_ref().map(|b| b.kind.as_str()),
        Some("source-not-watched"),
        "{}",
        d.summary
    );
    let p = plan(&failed, "apps");
    assert_eq!(p.lever, Lever::FixInGit, "class {}: {}", d.class, p.effect);
    assert!(p.steps.is_empty() && !p.wait_for_request_token);
    let p = plan_with(
        &failed,
        "apps",
        TOKEN,
        &Options {
            with_source: true,
            ..Options::default()
        },
    );
    assert!(
        p.steps.is_empty(),
        "--with-source writes nothing: {:?}",
        p.steps
    );
}

/// `--watch-all-namespaces=false`: only the controller's own namespace is watched.
#[test]
fn a_namespace_outside_a_single_namespace_controller_is_not_watched() {
    let mut k = ready_at("team", REV, &[]);
    k["metadata"]["namespace"] = json!("team-a");
    k["metadata"]["annotations"] =
        json!({"reconcile.fluxcd.io/requestedAt": "2026-11-30T07:20:00Z"});
    k["spec"]["sourceRef"]["namespace"] = json!("flux-system");
    let mut s = snap("v1.9.6", vec![k], vec![], vec![], &[]);
    s.controller.as_mut().unwrap()["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--watch-all-namespaces=false"]);
    let d = Engine::new(&s).diagnose("team-a", "team").unwrap();
    assert_eq!(d.class, Class::NotWatched);
    assert!(
        d.summary.contains("watches only namespace flux-system"),
        "{}",
        d.summary
    );
}

/// A suspended GitRepository: the Kustomization Ready at its artifact is not healthy (no new
/// commit reaches it), a finding in both views, and a GitRepository on the same URL and ref
/// with a newer artifact is named. The lever writes nothing and gives the resume command.
#[test]
fn a_suspended_source_is_a_finding_naming_a_newer_revision_elsewhere() {
    let mut s = snap(
        "v1.9.6",
        vec![ready_at("apps", REV, &[])],
        vec![],
        vec![],
        &[],
    );
    let url = "http://git.example.local/org/fleet.git";
    let src = &mut s.sources[0];
    src["spec"]["suspend"] = json!(true);
    src["spec"]["url"] = json!(url);
    src["spec"]["ref"] = json!({"branch": "main"});
    src["status"]["artifact"]["lastUpdateTime"] = json!("2026-11-30T07:00:00Z");
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::SourceSuspended, "{}", d.summary);
    assert!(is_finding(&d));
    assert!(
        d.summary.contains("not known from the cluster"),
        "{}",
        d.summary
    );
    let new = "main@sha1:dddddddddddddddddddddddddddddddddddddddd";
    let mut mirror = gitrepo(new);
    mirror["metadata"]["name"] = json!("fleet-mirror");
    mirror["spec"]["url"] = json!(url);
    mirror["spec"]["ref"] = json!({"branch": "main"});
    mirror["status"]["artifact"]["lastUpdateTime"] = json!("2026-11-30T07:15:00Z");
    s.sources.push(mirror);
    let d = diag(&s, "apps");
    assert!(
        d.summary
            .contains(&format!("GitRepository/flux-system/fleet-mirror at {new}")),
        "{}",
        d.summary
    );
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::ResumeSource);
    assert!(p.steps.is_empty());
    assert!(
        p.effect
            .contains("flux resume source git flux-system -n flux-system"),
        "{}",
        p.effect
    );
    assert_eq!(row(&s, "apps").class, Class::SourceSuspended);
}

/// A HelmRelease under a `wait: true` Kustomization while no helm-controller Deployment
/// exists: helm-controller is named as not running before any lever (never `suspend-resume`),
/// the same in `--all`; with a running one, the lever logic is the usual one.
#[test]
fn a_helmrelease_check_with_no_helm_controller_names_it_first() {
    let k = in_flight(
        "web",
        json!({"wait": true}),
        &["apps_web_helm.toolkit.fluxcd.io_HelmRelease"],
    );
    let hr = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "web", "namespace": "apps", "generation": 1}, "spec": {}});
    let mut s = snap(
        "v1.9.6",
        vec![k],
        vec![hr],
        vec![],
        &["helm.toolkit.fluxcd.io/HelmRelease"],
    );
    s.helm_controller_read = true;
    let d = diag(&s, "web");
    assert_eq!(d.class, Class::ControllerNotRunning, "{}", d.summary);
    assert!(
        d.summary.contains("helm-controller is not running (not installed: no Deployment flux-system/helm-controller): nothing reconciles HelmReleases"),
        "{}",
        d.summary
    );
    let p = plan(&s, "web");
    assert_eq!(p.lever, Lever::StartController);
    assert!(p.steps.is_empty());
    assert_eq!(row(&s, "web").class, Class::ControllerNotRunning);
    let mut hc = controller("v1.4.3");
    hc["metadata"]["name"] = json!("helm-controller");
    hc["spec"]["replicas"] = json!(0);
    hc["status"] = json!({"observedGeneration": 1});
    s.helm_controller = Some(hc.clone());
    assert!(
        plan(&s, "web")
            .effect
            .contains("kubectl -n flux-system scale deployment/helm-controller --replicas=1")
    );
    hc["spec"]["replicas"] = json!(1);
    hc["status"] = json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": 1});
    s.helm_controller = Some(hc);
    assert_eq!(diag(&s, "web").class, Class::HealthCheckInFlight);
}

/// `kustomization path not found` (ArtifactFailed) from an artifact made before the
/// Kustomization's spec was written: the path was pushed after the last fetch, so it is
/// `source-not-ready` and the plan fetches (as `--with-source`), never `build-failed`. An
/// artifact newer than the spec keeps `build-failed` (the path is not at that revision).
#[test]
fn a_path_missing_from_an_older_artifact_is_source_not_ready_with_a_fetch() {
    let mut k = ready_at("new-app", REV, &[]);
    k["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Apply",
        "time": "2026-11-30T07:10:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:path": {}}}}]);
    k["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
        "reason": "ArtifactFailed",
        "message": "kustomization path not found: stat /tmp/kustomization-1/new-app: no such file or directory"}]);
    let mut s = snap("v1.9.6", vec![k], vec![], vec![], &[]);
    s.sources[0]["status"]["artifact"]["lastUpdateTime"] = json!("2026-11-30T07:00:00Z");
    s.sources[0]["metadata"]["name"] = json!("flux-system");
    let d = diag(&s, "new-app");
    assert_eq!(d.class, Class::SourceNotReady, "{}", d.summary);
    assert!(d.summary.contains("--with-source"), "{}", d.summary);
    let p = plan(&s, "new-app");
    assert_eq!(p.lever, Lever::ReconcileSource);
    assert_eq!(p.steps.len(), 2, "{:#?}", p.steps);
    assert_eq!(row(&s, "new-app").class, Class::SourceNotReady);
    s.sources[0]["status"]["artifact"]["lastUpdateTime"] = json!("2026-11-30T07:15:00Z");
    assert_eq!(diag(&s, "new-app").class, Class::BuildFailed);
}

/// Wording: a plan that writes nothing waits for nothing (the missing-CRD plan once said
/// `waitForRequestToken: true, waitSecs: 150` with no steps); the worker-starvation hint in a
/// finding never says "nothing here is stuck"; a message's own newline never cuts a text line.
#[test]
fn wording_no_wait_without_writes_and_one_line_quotes() {
    let k = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": "secrets", "namespace": "flux-system", "generation": 1},
        "spec": {"interval": "10m", "path": "./s", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"lastAttemptedRevision": REV, "conditions": [
            {"type": "Ready", "status": "False", "reason": "ReconciliationFailed",
             "message": "ExternalSecret/apps/db-creds dry-run failed: no matches for kind \"ExternalSecret\" in version \"external-secrets.io/v1beta1\""}]}});
    let s = snap("v1.9.6", vec![k], vec![], vec![], &[]);
    let p = plan(&s, "secrets");
    assert!(p.steps.is_empty());
    assert!(!p.wait_for_request_token, "{p:#?}");
    assert_eq!(p.wait_secs, 0.0);
    let p = plan_with(&s, "secrets", TOKEN, &Options::default());
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["waitForRequestToken"], false);
    assert_eq!(
        unstick::report::one_line("kustomize build failed:\n  accumulating resources\n"),
        "kustomize build failed: accumulating resources"
    );
}

/// Issue 28 item 3: the healthChecks namespace fixed in Git while the check of generation 1
/// runs (the object is at generation 2; the Reconciling condition says generation 1). The
/// objects read from generation 2's spec are Current, but the running check keeps its own
/// spec: never "the next poll passes it". Gate off: the check runs to 07:25 (start + 5m) and
/// generation 2 runs after it; the lever is `wait` with the fresh run at 07:25. Gate on
/// (v1.9.6): the generation change cancels it. The proof never says "not recovered" on the
/// old generation's failure while generation 2 is pending.
#[test]
fn a_fix_during_an_in_flight_check_waits_for_the_new_generation() {
    use unstick::proof::{Expect, Verdict, judge};
    let mut k = in_flight(
        "hc",
        json!({"healthChecks": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "apps"}]}),
        &[],
    );
    k["metadata"]["generation"] = json!(2);
    k["status"]["conditions"][0]["observedGeneration"] = json!(1);
    let web = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps", "generation": 1},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
            "readyReplicas": 1, "availableReplicas": 1,
            "conditions": [{"type": "Available", "status": "True"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}});
    let s = snap(
        "v1.9.6",
        vec![k.clone()],
        vec![web],
        vec![],
        &["apps/Deployment"],
    );
    let d = diag(&s, "hc");
    assert_eq!(d.class, Class::HealthCheckInFlight);
    assert!(
        d.summary.contains("runs to its end at 07:25:00Z")
            && d.summary.contains("generation 2 runs right after"),
        "{}",
        d.summary
    );
    let p = plan(&s, "hc");
    assert_eq!(p.lever, Lever::Wait, "{p:#?}");
    assert!(p.steps.is_empty());
    assert_eq!(
        p.fresh_run_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-30T07:25:00Z")
    );
    assert!(
        !p.why.iter().any(|w| w.contains("next poll")),
        "{:#?}",
        p.why
    );
    // Read after that end (trial: "runs to its end at 19:26:29Z" at 19:29): the past end is
    // said as past, and the run of generation 2 starts now, not at a time already gone.
    let mut late = s.clone();
    late.now = "2026-11-30T07:27:00Z".parse().unwrap();
    let d = diag(&late, "hc");
    assert!(
        d.summary.contains("its end, 07:25:00Z, passed 2m0s ago: the controller ends it at its next 5s poll; generation 2 runs right after")
            && !d.summary.contains("runs to its end at"),
        "{}",
        d.summary
    );
    let p = plan(&late, "hc");
    assert_eq!(p.lever, Lever::Wait, "{p:#?}");
    assert!(
        p.effect
            .contains("starts as soon as the running check ends (now"),
        "{}",
        p.effect
    );
    assert_eq!(p.fresh_run_at, Some(late.now));
    // Gate on, v1.9.6: the generation change cancels the check.
    let mut on = s.clone();
    on.controller.as_mut().unwrap()["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--feature-gates=CancelHealthCheckOnNewRevision=true"]);
    let d = diag(&on, "hc");
    assert!(d.summary.contains("cancels that check"), "{}", d.summary);
    // The old check failed at its deadline; generation 2 is queued: moving, not terminal.
    let mut failed = k;
    failed["status"]["observedGeneration"] = json!(1);
    failed["status"]["conditions"] = json!([
        {"type": "Ready", "status": "False", "reason": "HealthCheckFailed", "observedGeneration": 1,
         "message": "health check failed after 5m0s: timeout waiting for: [Deployment/default/web status: 'NotFound']"}]);
    let s = snap("v1.9.6", vec![failed], vec![], vec![], &[]);
    let e = Expect {
        token: None,
        generation: None,
        source_token: None,
        fresh_run_after: None,
    };
    let v = judge(&Engine::new(&s), "flux-system", "hc", &e);
    assert!(
        matches!(&v, Verdict::Moving(m) if m.contains("generation 2 is not run yet")),
        "{v:?}"
    );
}

/// `snap` with the source's artifact stored at `made` (`status.artifact.lastUpdateTime`).
fn snap_with_artifact_at(ks: Vec<Value>, made: &str) -> Snapshot {
    let mut s = snap("v1.9.6", ks, vec![], vec![], &[]);
    s.sources[0]["status"]["artifact"]["lastUpdateTime"] = json!(made);
    s
}

/// The fresh-user trial of 2026-12-03: a cycle broken after it dropped a revision. Nothing
/// drops the source's events now, but `apps` (Ready at the old revision, last run 07:18)
/// has not run since the artifact changed at 07:19, two minutes before `now`: the event
/// never queued it, and it applies the revision only at its interval run (07:28). A finding
/// with no cycle, and the lever is the request that queues the run the event would have
/// (its token proves the run); `--all` agrees. Never "the next run applies it".
#[test]
fn a_revision_event_missed_before_the_cycle_was_broken_is_requested_not_promised() {
    let s = snap_with_artifact_at(vec![ready_at("apps", OLD, &[])], "2026-11-30T07:19:00Z");
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::SourceEventDropped, "{}", d.summary);
    assert!(is_finding(&d));
    assert!(
        d.summary.contains(REV)
            && d.summary.contains("since 07:19:00Z (2m0s ago)")
            && d.summary.contains("interval run, about 07:28:00Z")
            && !d.summary.contains("the next run applies it"),
        "{}",
        d.summary
    );
    let b = d.blind_spot.as_ref().unwrap();
    assert!(b.cycle.is_empty());
    assert_eq!(
        b.next_run_at.map(|t| t.to_string()).as_deref(),
        Some("2026-11-30T07:28:00Z")
    );
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::RequestReconcile, "{p:#?}");
    assert_eq!(p.steps.len(), 1);
    assert!(p.wait_for_request_token);
    assert_eq!(p.request_token.as_deref(), Some(TOKEN));
    assert!(p.effect.contains(REV), "{}", p.effect);
    let r = row(&s, "apps");
    assert_eq!(r.class, Class::SourceEventDropped);
    assert_eq!(r.summary, d.summary);
}

/// Trial4: `unstick ks/NAME` reads one namespace, but kustomize-controller's workers serve
/// every namespace. Four runs in `prod` held all of them while `apps` (flux-system) waited in
/// the queue, and the missed-event rule called it a dropped revision event (verify: broken),
/// with a request that changes nothing. The holders elsewhere (read in the same one list) make
/// it a worker wait; when they could not be read, nothing is claimed; with none, the rule
/// stands.
#[test]
fn a_queue_behind_runs_of_other_namespaces_is_not_a_missed_event() {
    let mut s = snap_with_artifact_at(vec![ready_at("apps", OLD, &[])], "2026-11-30T07:19:00Z");
    s.namespace = Some("flux-system".into());
    s.workers_elsewhere = Some(
        ["prod/slow-1", "prod/slow-2", "prod/slow-3", "prod/slow-4"]
            .map(String::from)
            .to_vec(),
    );
    let d = diag(&s, "apps");
    assert_ne!(d.class, Class::SourceEventDropped, "{}", d.summary);
    assert!(!is_finding(&d), "{}", d.summary);
    assert!(d.summary.contains("worker"), "{}", d.summary);
    assert_ne!(row(&s, "apps").class, Class::SourceEventDropped);
    s.workers_elsewhere = None;
    let d = diag(&s, "apps");
    assert_ne!(
        d.class,
        Class::SourceEventDropped,
        "not known: {}",
        d.summary
    );
    s.workers_elsewhere = Some(vec![]);
    assert_eq!(diag(&s, "apps").class, Class::SourceEventDropped);
}

/// The other side of [`a_revision_event_missed_before_the_cycle_was_broken_is_requested_not_promised`]:
/// an artifact stored 15 s ago (within the grace a delivered event needs to start a run), or a
/// run recorded after the artifact changed, or no recorded run at all keeps the old reading
/// (reconciling, not a finding): no claim without evidence.
#[test]
fn a_revision_event_is_not_called_missed_within_the_grace_or_without_evidence() {
    let s = snap_with_artifact_at(vec![ready_at("apps", OLD, &[])], "2026-11-30T07:20:45Z");
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::Reconciling, "{}", d.summary);
    assert!(!is_finding(&d));
    let mut ran_since = ready_at("apps", OLD, &[]);
    ran_since["status"]["history"][0]["lastReconciled"] = json!("2026-11-30T07:19:30Z");
    let s = snap_with_artifact_at(vec![ran_since], "2026-11-30T07:19:00Z");
    assert_eq!(diag(&s, "apps").class, Class::Reconciling);
    let mut no_record = ready_at("apps", OLD, &[]);
    no_record["status"]
        .as_object_mut()
        .unwrap()
        .remove("history");
    let s = snap_with_artifact_at(vec![no_record], "2026-11-30T07:19:00Z");
    assert_eq!(diag(&s, "apps").class, Class::Reconciling);
}

/// `apps` (Ready at the source's revision, last run 07:18) reads `cluster-vars` through
/// `postBuild.substituteFrom`; the ConfigMap's metadata as read, written at `written`.
fn with_cluster_vars(tag: &str, written: &str, labels: Value) -> Snapshot {
    let mut k = ready_at("apps", REV, &[]);
    k["spec"]["postBuild"] =
        json!({"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]});
    let mut s = snap(tag, vec![k], vec![], vec![], &[]);
    s.configs.insert(
        "ConfigMap/flux-system/cluster-vars".into(),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cluster-vars", "namespace": "flux-system", "labels": labels,
                "creationTimestamp": "2026-11-29T07:00:00Z",
                "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update",
                    "time": written, "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {"f:CLUSTER": {}}}}]}}),
    );
    s
}

/// Sweep of issue 28 (kustomize-controller v1.7.0+ `requestsForConfigDependency`, watched only
/// through `--watch-configs-label-selector`, default `reconcile.fluxcd.io/watch=Enabled`): a
/// substituteFrom ConfigMap changed after the last run, without the label, starts no run. A
/// finding (never "Ready: nothing is stuck") naming the object, the field, the selector and
/// the interval run; the lever is a request, with the label as the lasting fix; `--all`
/// agrees. Labelled, or written before the last run: healthy. On v1.6.x (no config watch at
/// all) even a labelled one is not seen.
#[test]
fn a_substitute_from_configmap_changed_without_the_watch_label_is_not_seen() {
    let s = with_cluster_vars("v1.9.6", "2026-11-30T07:19:30Z", json!({}));
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::ConfigNotWatched, "{}", d.summary);
    assert!(is_finding(&d));
    assert!(
        d.summary
            .contains("ConfigMap flux-system/cluster-vars (postBuild.substituteFrom)")
            && d.summary
                .contains("written at 07:19:30Z, after its last run ended at 07:18:00Z")
            && d.summary
                .contains("--watch-configs-label-selector=reconcile.fluxcd.io/watch=Enabled")
            && d.summary.contains("interval run, about 07:28:00Z"),
        "{}",
        d.summary
    );
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::RequestReconcile, "{p:#?}");
    assert!(p.wait_for_request_token && p.steps.len() == 1);
    assert!(
        p.alternatives
            .iter()
            .any(|a| a.contains("reconcile.fluxcd.io/watch: Enabled")),
        "{:#?}",
        p.alternatives
    );
    assert_eq!(row(&s, "apps").class, Class::ConfigNotWatched);

    let labelled = json!({"reconcile.fluxcd.io/watch": "Enabled"});
    let s = with_cluster_vars("v1.9.6", "2026-11-30T07:19:30Z", labelled.clone());
    assert_eq!(diag(&s, "apps").class, Class::Healthy);
    let s = with_cluster_vars("v1.9.6", "2026-11-30T07:17:00Z", json!({}));
    assert_eq!(diag(&s, "apps").class, Class::Healthy);
    let s = with_cluster_vars("v1.6.1", "2026-11-30T07:19:30Z", labelled);
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::ConfigNotWatched, "{}", d.summary);
    assert!(
        d.summary.contains("watching them came in v1.7.0"),
        "{}",
        d.summary
    );
}

/// The snapshot of a Kustomization with a pending request while kustomize-controller runs
/// with leader election and its Lease is `lease` (`None`: read, not found), its pod
/// `kustomize-controller-6b8f9c-abcde` ready.
fn with_lease(lease: Option<Value>) -> Snapshot {
    let mut k = ready_at("apps", REV, &[]);
    k["metadata"]["annotations"] =
        json!({"reconcile.fluxcd.io/requestedAt": "2026-11-30T07:20:00Z"});
    let mut s = snap("v1.9.6", vec![k], vec![], vec![], &[]);
    let c = s.controller.as_mut().unwrap();
    c["spec"]["template"]["spec"]["containers"][0]["args"] =
        json!(["--enable-leader-election", "--watch-label-selector="]);
    c["status"] = json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": 1});
    s.leases.insert(
        "flux-system/kustomize-controller-leader-election".into(),
        lease,
    );
    s.controller_pods = vec![
        json!({"metadata": {"name": "kustomize-controller-6b8f9c-abcde",
            "namespace": "flux-system", "labels": {"app": "kustomize-controller"}},
        "status": {"containerStatuses": [{"name": "manager", "ready": true}]}}),
    ];
    s
}

/// A ready kustomize-controller pod that is not the leader reconciles nothing
/// (controller-runtime starts no controller before it is elected): another identity that
/// keeps renewing the Lease is a finding naming the pod, the Lease and the holder, never
/// "request-pending ... as soon as a worker is free"; a holder gone is a wait with the time
/// the pod takes the Lease (not a finding); the same rows in `--all`. Also for
/// source-controller (`nothing fetches`) when the Kustomization's source needs it.
#[test]
fn a_ready_pod_that_is_not_the_leader_is_named_never_promised_a_run() {
    let lease = |holder: &str, renewed: &str| json!({"spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 35}});
    // Leading: the old verdict.
    let s = with_lease(Some(lease(
        "kustomize-controller-6b8f9c-abcde_1f",
        "2026-11-30T07:20:58Z",
    )));
    assert_eq!(diag(&s, "apps").class, Class::RequestPending);

    let s = with_lease(Some(lease("other-5d8f-q2x7z_9a", "2026-11-30T07:20:57Z")));
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::ControllerNotRunning, "{}", d.summary);
    assert!(is_finding(&d));
    assert!(
        d.summary.starts_with("kustomize-controller's pod kustomize-controller-6b8f9c-abcde is not the leader: Lease flux-system/kustomize-controller-leader-election is held by other-5d8f-q2x7z_9a")
            && d.summary.contains("keeps renewing")
            && d.summary.ends_with("; nothing reconciles"),
        "{}",
        d.summary
    );
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::StartController);
    assert!(p.steps.is_empty() && !p.wait_for_request_token);
    assert!(
        p.effect.contains(
            "kubectl -n flux-system get lease kustomize-controller-leader-election -o yaml"
        ),
        "{}",
        p.effect
    );
    assert!(!format!("{p:?}").contains("as soon as a worker is free"));
    let r = row(&s, "apps");
    assert_eq!((r.class, r.summary.clone()), (d.class, d.summary.clone()));
    // Trial4: the proof wait and gitops verify read this as moving ("waiting ... in 5m0s"):
    // a holder that keeps renewing holds it for good.
    assert!(
        matches!(heading(&d), Heading::Terminal(_)),
        "{:?}",
        heading(&d)
    );

    // The holder stopped renewing at 07:20:40: it expires at 07:21:15, and the pod takes the
    // Lease by 07:21:37 (two jittered retry periods of at most 11s later).
    let s = with_lease(Some(lease("other-5d8f-q2x7z_9a", "2026-11-30T07:20:40Z")));
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::ControllerNotRunning);
    assert!(!is_finding(&d), "a wait: {}", d.summary);
    assert!(
        d.summary.contains("is not the leader yet")
            && d.summary.contains("between then and 07:21:37Z"),
        "{}",
        d.summary
    );
    assert!(!is_finding(&row(&s, "apps")));
    assert!(
        matches!(heading(&d), Heading::Moving(_)),
        "{:?}",
        heading(&d)
    );
    let p = plan(&s, "apps");
    assert_eq!(p.lever, Lever::None, "nothing to start: {}", p.effect);
    assert!(
        p.steps.is_empty()
            && p.effect
                .starts_with("nothing to do: its pod takes the Lease by 07:21:37Z"),
        "{}",
        p.effect
    );

    // No Lease at all: a finding.
    let d = diag(&with_lease(None), "apps");
    assert!(
        is_finding(&d) && d.summary.contains("no Lease"),
        "{}",
        d.summary
    );

    // source-controller not leading: `nothing fetches`, for a Kustomization of a GitRepository.
    let mut s = with_lease(Some(lease(
        "kustomize-controller-6b8f9c-abcde_1f",
        "2026-11-30T07:20:58Z",
    )));
    let mut sc = controller("v1.9.6");
    sc["metadata"]["name"] = json!("source-controller");
    sc["spec"]["selector"]["matchLabels"] = json!({"app": "source-controller"});
    sc["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!("ghcr.io/fluxcd/source-controller:v1.9.6");
    sc["spec"]["template"]["spec"]["containers"][0]["args"] = json!(["--enable-leader-election"]);
    sc["status"] = json!({"observedGeneration": 1, "replicas": 1, "readyReplicas": 1});
    s.source_controller = Some(sc);
    s.leases
        .insert("flux-system/source-controller-leader-election".into(), None);
    let d = diag(&s, "apps");
    assert_eq!(d.class, Class::ControllerNotRunning, "{}", d.summary);
    assert!(
        d.summary.contains("source-controller's ready pod is not the leader: no Lease flux-system/source-controller-leader-election exists")
            && d.summary.ends_with("; nothing fetches"),
        "{}",
        d.summary
    );
}
