//! Lever selection and the exact plan: which action frees this Kustomization on this
//! controller, why, when the fresh run happens, and the JSON merge patches we send.
//!
//! Facts used (see reference.md): kustomize-controller v1.7.0 added the
//! `CancelHealthCheckOnNewRevision` gate (cancel on a new source revision only); v1.8.0
//! cancels on any re-queue event (requestedAt, generation, source revision); without the gate
//! the controller-runtime work queue never runs one key twice at once, so every event during
//! a run only marks it dirty and the next run starts right after the current one ends.

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::{Value, json};

use crate::controller::{CancelMode, ControllerFacts};
use crate::diagnose::{Class, Diagnosis, REQUESTED_AT, SUSPEND_MARKER, short_time};
use crate::obj;

mod blind;

/// Field manager of every write (kustomize-controller takes back fields owned by `kubectl`
/// and `before-first-apply`, so we use our own name).
pub const FIELD_MANAGER: &str = "kubectl-unstick";

/// The action chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lever {
    /// Annotate `reconcile.fluxcd.io/requestedAt` on the Kustomization.
    RequestReconcile,
    /// Annotate requestedAt on the source first, then on the Kustomization (`--with-source`).
    ReconcileSource,
    /// `spec.suspend: true` then remove it, with our marker annotation in between.
    SuspendResume,
    /// Delete the kustomize-controller pod(s): cancels every in-flight run.
    RestartController,
    /// Resume a Kustomization we (or, with `--force-resume`, someone else) left suspended.
    Resume,
    /// Unstick the root cause of a dependsOn chain instead.
    FixDependency,
    /// Nothing at the API helps; the fix is in Git or in the source's credentials.
    FixInGit,
    /// No write to the Kustomization helps: every object the in-flight health check waits on
    /// needs a fix of its own (each [`crate::diagnose::BlockingObject::fix`]: resume a
    /// suspended Flux object, let a Terminating object go, install a missing CRD, correct a
    /// healthChecks namespace in Git). A fresh run (request, suspend+resume, restart) would
    /// wait on the same objects the same way.
    FixBlockers,
    /// No write makes it sooner: the controller already queued the run that helps (e.g. a
    /// new source revision arrived during an in-flight check with the cancel gate off). The
    /// plan says when it starts; the proof wait watches it without writing.
    Wait,
    /// No write to the Kustomization helps: the controller that must act is not running
    /// ([`crate::diagnose::Class::ControllerNotRunning`]); scale it up or fix its pod.
    StartController,
    /// No write to the Kustomization helps: its source is suspended (`spec.suspend: true`),
    /// so no new revision reaches it; the plan prints `flux resume source ...` and writes
    /// nothing (someone else's suspend).
    ResumeSource,
    /// Nothing to do: it is healthy or progressing normally.
    None,
}

impl Lever {
    /// Kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Lever::RequestReconcile => "request-reconcile",
            Lever::ReconcileSource => "reconcile-source",
            Lever::SuspendResume => "suspend-resume",
            Lever::RestartController => "restart-controller",
            Lever::Resume => "resume",
            Lever::FixDependency => "fix-dependency",
            Lever::FixInGit => "fix-in-git",
            Lever::FixBlockers => "fix-blockers",
            Lever::StartController => "start-controller",
            Lever::Wait => "wait",
            Lever::ResumeSource => "resume-source",
            Lever::None => "none",
        }
    }

    /// Whether the lever writes to the cluster.
    pub fn mutates(self) -> bool {
        matches!(
            self,
            Lever::RequestReconcile
                | Lever::ReconcileSource
                | Lever::SuspendResume
                | Lever::RestartController
                | Lever::Resume
        )
    }
}

impl std::fmt::Display for Lever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// User choices that change the plan.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--with-source`: also request a reconcile of the source.
    pub with_source: bool,
    /// `--restart-controller`: allow deleting the controller pod.
    pub restart_controller: bool,
    /// `--force-resume`: resume even when someone else suspended it.
    pub force_resume: bool,
    /// `--margin` seconds added to every deadline.
    pub margin_secs: f64,
}

/// One write.
#[derive(Debug, Clone, Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "action"
)]
pub enum Step {
    /// A JSON merge patch (`application/merge-patch+json`).
    Patch {
        /// `apiVersion` of the target (`kustomize.toolkit.fluxcd.io/v1`).
        api_version: String,
        /// Kind.
        kind: String,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The patch body. Contains `metadata.resourceVersion` when the write must fail with
        /// 409 if the object changed since we read it; the executor re-reads and re-checks
        /// then.
        patch: Value,
        /// Why.
        why: String,
    },
    /// Delete the pods of the controller Deployment (by its selector).
    DeleteControllerPods {
        /// Namespace.
        namespace: String,
        /// Label selector `k=v,...`.
        selector: String,
        /// Why.
        why: String,
    },
}

/// The plan for one Kustomization.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// `namespace/name`.
    pub kustomization: String,
    /// The lever.
    pub lever: Lever,
    /// Why this lever on this controller, sentence by sentence.
    pub why: Vec<String>,
    /// What happens after the writes.
    pub effect: String,
    /// When the fresh run is expected to start, if not now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fresh_run_at: Option<Timestamp>,
    /// Other in-flight Kustomizations a controller restart also cancels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_cancels: Vec<String>,
    /// The exact container arg that enables the cancel gate, when it is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recommend_gate_arg: Option<String>,
    /// Other levers the user may choose with a flag.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<String>,
    /// The writes, in order.
    pub steps: Vec<Step>,
    /// How long to wait for proof after the writes, in seconds (run time + margin).
    pub wait_secs: f64,
    /// Whether the executor should wait for our requestedAt token to be handled (true) or
    /// for the generation to be observed (false).
    pub wait_for_request_token: bool,
    /// The requestedAt value written, when the plan writes one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_token: Option<String>,
}

/// The `reconcile.fluxcd.io/requestedAt` merge patch, flux2 cmd/flux/reconcile.go
/// (`requestReconciliation`): annotation = `time.Now().Format(time.RFC3339Nano)`.
pub fn request_patch(token: &str) -> Value {
    json!({"metadata": {"annotations": {REQUESTED_AT: token}}})
}

/// Suspend patch: flux2 cmd/flux/suspend.go sets `spec.suspend: true` with a merge patch; we
/// add our marker annotation in the same write (so no moment exists where it is suspended
/// without the marker) and the resourceVersion we read (so a concurrent writer makes it fail
/// with 409 instead of being overwritten).
pub fn suspend_patch(at: &str, resource_version: Option<&str>) -> Value {
    let mut p = json!({
        "metadata": {"annotations": {SUSPEND_MARKER: at}},
        "spec": {"suspend": true}
    });
    if let Some(rv) = resource_version {
        p["metadata"]["resourceVersion"] = json!(rv);
    }
    p
}

/// Resume patch: flux2 cmd/flux/resume.go removes `spec.suspend` (merge patch from
/// `Suspend: false`, an omitempty field, i.e. `null`); we also remove our marker.
pub fn resume_patch(resource_version: Option<&str>) -> Value {
    let mut p = json!({
        "metadata": {"annotations": {SUSPEND_MARKER: null}},
        "spec": {"suspend": null}
    });
    if let Some(rv) = resource_version {
        p["metadata"]["resourceVersion"] = json!(rv);
    }
    p
}

/// What a plan is computed from, besides the diagnosis.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The Kustomization object as read (its resourceVersion guards the suspend).
    pub ks: &'a Value,
    /// Its source object (for `--with-source`).
    pub source: Option<&'a Value>,
    /// Controller facts, when its Deployment was read.
    pub controller: Option<&'a ControllerFacts>,
    /// Kustomizations holding a worker (`namespace/name`).
    pub holding: &'a [String],
    /// The time of the snapshot.
    pub now: Timestamp,
    /// The value written to requestedAt and to our suspend marker (RFC3339Nano).
    pub token: &'a str,
}

/// Choose the lever and build the plan for `d` (the target's diagnosis).
pub fn plan(d: &Diagnosis, inp: &Inputs<'_>, opts: &Options) -> Plan {
    if let Some(p) = blind::plan(d, inp, opts) {
        return p;
    }
    let mut dr = Draft {
        wait_for_token: true,
        ..Draft::default()
    };
    let opts = &effective_options(inp, opts, &mut dr.why);
    let ks = inp.ks;
    let cx = Ctx {
        d,
        inp: *inp,
        opts,
        ns: obj::namespace(ks).to_string(),
        name: obj::name(ks).to_string(),
        ks_api: obj::s(ks, &["apiVersion"])
            .unwrap_or("kustomize.toolkit.fluxcd.io/v1")
            .to_string(),
        rv: obj::s(ks, &["metadata", "resourceVersion"]),
    };
    let (lever, effect) = choose(&cx, &mut dr);
    finish(&cx, dr, lever, effect)
}

/// The plan being built: what each lever function fills in (see [`plan`]).
#[derive(Default)]
struct Draft {
    why: Vec<String>,
    alternatives: Vec<String>,
    steps: Vec<Step>,
    also_cancels: Vec<String>,
    recommend_gate_arg: Option<String>,
    fresh_run_at: Option<Timestamp>,
    wait_for_token: bool,
}

/// What every lever function reads: the diagnosis, the inputs, the effective options and the
/// Kustomization's identity (its resourceVersion guards a suspend).
struct Ctx<'a> {
    d: &'a Diagnosis,
    inp: Inputs<'a>,
    opts: &'a Options,
    ns: String,
    name: String,
    ks_api: String,
    rv: Option<&'a str>,
}

impl Ctx<'_> {
    /// A merge patch of the Kustomization.
    fn ks_patch(&self, patch: Value, why: String) -> Step {
        Step::Patch {
            api_version: self.ks_api.clone(),
            kind: "Kustomization".into(),
            namespace: self.ns.clone(),
            name: self.name.clone(),
            patch,
            why,
        }
    }

    /// A reconcile request on the source (`None` when it does not exist).
    fn source_step(&self, why: String) -> Option<Step> {
        let s = self.inp.source?;
        Some(Step::Patch {
            api_version: obj::s(s, &["apiVersion"]).unwrap_or("").to_string(),
            kind: obj::kind(s).to_string(),
            namespace: obj::namespace(s).to_string(),
            name: obj::name(s).to_string(),
            patch: request_patch(self.inp.token),
            why,
        })
    }

    /// The request lever: with --with-source the source is asked for its latest revision
    /// first, then the Kustomization gets reconcile.fluxcd.io/requestedAt (flux reconcile
    /// ks). Returns the lever and the outcome the plan promises.
    fn request_lever(&self, steps: &mut Vec<Step>, why: &str, outcome: &str) -> (Lever, String) {
        if self.opts.with_source
            && let Some(s) =
                self.source_step("--with-source: fetch the latest revision first".into())
        {
            steps.push(s);
        }
        steps.push(self.ks_patch(request_patch(self.inp.token), why.into()));
        let lever = if self.opts.with_source {
            Lever::ReconcileSource
        } else {
            Lever::RequestReconcile
        };
        (lever, outcome.into())
    }

    /// Suspend (guarded by the resourceVersion read) then resume: the generation bump queues
    /// a fresh run.
    fn suspend_resume(&self, steps: &mut Vec<Step>) {
        steps.push(self.ks_patch(
            suspend_patch(self.inp.token, self.rv),
            "spec.suspend = true with our marker (fails with 409 if the object changed since read)"
                .into(),
        ));
        steps.push(self.ks_patch(
            resume_patch(None),
            "remove spec.suspend and the marker: the generation bump queues a fresh run".into(),
        ));
    }
}

/// `opts`, except `--with-source` on a Kustomization whose source object does not exist:
/// there is nothing to refetch, so it plans as without it and says why in `why` (never a
/// "reconcile-source" lever that patches no source).
fn effective_options(inp: &Inputs<'_>, opts: &Options, why: &mut Vec<String>) -> Options {
    if !opts.with_source || inp.source.is_some() {
        return opts.clone();
    }
    let ks = inp.ks;
    let ns = obj::namespace(ks);
    let kind = obj::s(ks, &["spec", "sourceRef", "kind"]).unwrap_or("GitRepository");
    let sname = obj::s(ks, &["spec", "sourceRef", "name"]).unwrap_or("?");
    let sns = obj::s(ks, &["spec", "sourceRef", "namespace"]).unwrap_or(ns);
    why.push(format!(
        "--with-source: {kind} {sns}/{sname} (spec.sourceRef) does not exist, so there is nothing to refetch: fix spec.sourceRef or create the source"
    ));
    Options {
        with_source: false,
        ..opts.clone()
    }
}

/// The lever for `cx.d`'s class: one function per class (and guard).
fn choose(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let (d, opts) = (cx.d, cx.opts);
    match d.class {
        Class::Healthy | Class::Reconciling if opts.with_source => healthy_with_source(cx, dr),
        Class::ControllerNotRunning => controller_not_running(cx, dr),
        Class::Reconciling if d.overdue_secs.is_some() => overdue_run(cx, dr),
        // Blind spots are planned by `blind::plan` above; these only keep the match whole.
        Class::NotWatched
        | Class::SourceEventDropped
        | Class::SourceSuspended
        | Class::ConfigNotWatched => blind_spot(cx, dr),
        Class::Healthy | Class::Reconciling => nothing_stuck(cx, dr),
        Class::Suspended => suspended(cx, dr),
        Class::WaitingOnDependencies
            if d.root_cause
                .as_ref()
                .is_some_and(|r| matches!(r.kind.as_str(), "cycle" | "missing")) =>
        {
            dependency_never_ready(cx, dr)
        }
        Class::WaitingOnDependencies if crate::diagnose::dependency_progressing(d) => {
            dependency_progressing(cx, dr)
        }
        Class::WaitingOnDependencies => fix_dependency_first(cx, dr),
        Class::ReconcileFailed if !d.missing_crds.is_empty() => missing_crds(cx, dr),
        Class::ReconcileFailed if !d.refused.is_empty() => apply_refused(cx, dr),
        Class::BuildFailed | Class::ReconcileFailed
            if crate::diagnose::controller_io_error(d).is_some() =>
        {
            controller_io_error(cx, dr)
        }
        Class::SourceNotReady | Class::BuildFailed | Class::Stalled => fails_until_fixed(cx, dr),
        // A failed check whose every blocking object needs a fix of its own (a HelmRelease
        // whose retries are exhausted, a suspended one, ...) and no newer revision that may
        // carry it: a new run re-applies the same objects and fails on them the same way
        // (helm-controller v1.4 does not act on a re-applied, unchanged HelmRelease).
        Class::HealthCheckFailed
            if !d.blocking.is_empty()
                && d.blocking.iter().all(|b| b.fix.is_some())
                && !d
                    .source
                    .as_ref()
                    .is_some_and(|s| s.newer_revision_available)
                && !opts.with_source
                && !opts.restart_controller =>
        {
            blockers_need_own_fix(cx, dr)
        }
        Class::HealthCheckFailed
        | Class::HealthCheckCanceled
        | Class::ReconcileFailed
        | Class::RequestPending => request_fresh_run(cx, dr),
        Class::HealthCheckInFlight => health_check_in_flight(cx, dr),
    }
}

/// `healthy`/`reconciling` with `--with-source`: refetch and a requested run that proves the newest revision.
fn healthy_with_source(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let token = cx.inp.token;
    // Nothing is stuck, but the user pushed to Git and asks for proof at the newest
    // revision: refetch the source and request a run we can prove.
    // The class, not the summary: the diagnosis above says it (with its ETA) once.
    dr.why.push(format!(
        "{}: nothing is stuck; --with-source: the source fetches now and a requested run proves the Kustomization reaches its newest revision",
        d.class
    ));
    if let Some(s) = cx.source_step("--with-source: fetch the latest revision".into()) {
        dr.steps.push(s);
    }
    dr.steps.push(cx.ks_patch(
        request_patch(token),
        "reconcile.fluxcd.io/requestedAt = now: a run against the refetched source".into(),
    ));
    (
        Lever::ReconcileSource,
        "the source is fetched again; any run in progress finishes, then the Kustomization runs at the source's newest revision".to_string(),
    )
}

/// `controller-not-running`: start the controller; nothing is written.
fn controller_not_running(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let ns = &cx.ns;
    let name = &cx.name;
    // A controller this Kustomization needs is not running (kustomize-controller:
    // nothing reconciles; source-controller: nothing fetches): whatever it last wrote
    // and whatever lever a flag asks for (--with-source, --restart-controller), a
    // request stays unhandled, a refetch never happens, a suspend+resume changes
    // nothing and a restart has no pod to delete. The lever is starting it, and
    // nothing is written. (A suspended Kustomization keeps its own class and lever:
    // healing our own suspend is still written, someone else's is left as it is.)
    // The diagnosis above says why each is down; this says what that means here.
    let names: Vec<&str> = d
        .stopped_controllers
        .iter()
        .map(|s| s.controller.as_str())
        .collect();
    dr.why.push(format!(
        "{} not running: no write to {ns}/{name} is made and nothing it asks for happens until {} (a request or a refetch would stay unhandled); {name} stays as last applied, and no change in Git reaches it",
        match names.as_slice() {
            [] => "the controller it needs is".to_string(),
            [one] => format!("{one} is"),
            many => format!("{} are", many.join(" and ")),
        },
        if names.len() > 1 { "they run" } else { "it runs" }
    ));
    dr.wait_for_token = false;
    // Only a pod about to take its Lease (the holder is gone or released it): a wait with its
    // time, nothing to start (not a finding: read-only exit 0).
    let lever = if d
        .stopped_controllers
        .iter()
        .all(cluster_loop::flux::StoppedController::leader_wait)
    {
        Lever::None
    } else {
        Lever::StartController
    };
    (
        lever,
        cluster_loop::flux::StoppedController::effect_of_all(&d.stopped_controllers),
    )
}

/// `reconciling` past its timeout: nothing to write; the log says what it waits on.
fn overdue_run(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let ns = &cx.ns;
    let name = &cx.name;
    dr.why.push(format!(
        "{}: no write reaches a run in progress; the controller's log says what it waits on",
        d.summary
    ));
    dr.alternatives.push(format!(
        "if the log shows it hung: kubectl unstick ks/{name} -n {ns} --restart-controller"
    ));
    (Lever::None, "nothing to write".to_string())
}

/// The blind spots, planned by `blind::plan`; kept so the match is whole.
/// Blind spots are planned by `blind::plan` above; these only keep the match whole.
fn blind_spot(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    dr.why.push(d.summary.clone());
    dr.wait_for_token = false;
    (Lever::None, "nothing to write".to_string())
}

/// `healthy`/`reconciling`: nothing is stuck.
fn nothing_stuck(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    // The class, not the summary: the diagnosis above says it (with its ETA) once.
    dr.why.push(format!("{}: nothing is stuck", d.class));
    (Lever::None, "nothing to do".to_string())
}

/// `suspended`: resume our own (or `--force-resume`), else leave it.
fn suspended(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let opts = cx.opts;
    let rv = cx.rv;
    if d.suspended_by_unstick_at.is_some() || opts.force_resume {
        if d.suspended_by_unstick_at.is_some() {
            dr.why.push(format!(
                "an earlier kubectl unstick run suspended it at {} and was interrupted before resuming",
                d.suspended_by_unstick_at.as_deref().unwrap_or("?")
            ));
        } else {
            dr.why
                .push("--force-resume: resuming a Kustomization someone else suspended".into());
        }
        dr.steps.push(cx.ks_patch(
            resume_patch(rv),
            "remove spec.suspend (and our marker); the generation bump queues a run".into(),
        ));
        dr.wait_for_token = false;
        (
            Lever::Resume,
            "the controller runs it again with the latest spec".to_string(),
        )
    } else {
        dr.why.push("it was suspended by someone else (no kubectl unstick marker); resuming could undo a deliberate freeze".into());
        dr.alternatives
            .push("--force-resume: resume it anyway".into());
        (Lever::None, "left suspended".to_string())
    }
}

/// `waiting-on-dependencies` on a cycle or a missing dependency: only Git changes it.
fn dependency_never_ready(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    // A cycle or a missing dependency never ends by itself, and no request, cascade
    // or restart changes it: only Git does.
    let rc = d.root_cause.as_ref().unwrap();
    dr.why.push(rc.message.clone());
    (
        Lever::FixInGit,
        if rc.kind == "cycle" {
            "break the cycle in Git".to_string()
        } else {
            format!("create {} or fix spec.dependsOn in Git", rc.kustomization)
        },
    )
}

/// `waiting-on-dependencies` while the dependency moves: the wait ends by itself.
fn dependency_progressing(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let opts = cx.opts;
    let controller = cx.inp.controller;
    let ns = &cx.ns;
    let name = &cx.name;
    // Nothing is stuck: the blocking dependency is reconciling (or already ready),
    // and kustomize-controller re-checks dependsOn every --requeue-dependency
    // (kustomization_controller.go `checkDependencies`, `RequeueAfter:
    // r.requeueDependency`). The verdict is "nothing to unstick" (exit 0), so the
    // lever writes nothing: `wait`, as the `--all` row says; the proof wait watches
    // the dependency's run and then ours (dependency_wait below), and Ready=True at
    // the source's revision is the proof (it is Ready=False now). The trial: lever
    // request-reconcile beside "nothing to unstick".
    if let crate::diagnose::Heading::Moving(m) = crate::diagnose::heading(d) {
        dr.why.push(format!(
            "{m}: its dependsOn wait ends by itself ({}); nothing to unstick",
            requeue_text(controller)
        ));
    }
    if opts.with_source {
        // Asked for: the refetch, and a requested run to prove it reached the new
        // revision.
        cx.request_lever(
            &mut dr.steps,
            "reconcile.fluxcd.io/requestedAt = now: a run against the refetched source, once its dependencies are ready",
            "the source is fetched again; the Kustomization runs at its newest revision once its dependencies are ready",
        )
    } else {
        dr.wait_for_token = false;
        (
            Lever::Wait,
            format!(
                "no write: it runs by itself once its dependencies are ready; without --dry-run, kubectl unstick ks/{name} -n {ns} waits for that run with proof"
            ),
        )
    }
}

/// `waiting-on-dependencies` on a dependency that is stuck: unstick that one first.
fn fix_dependency_first(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let controller = cx.inp.controller;
    let root = d
        .root_cause
        .as_ref()
        .map(|r| r.kustomization.clone())
        .unwrap_or_default();
    dr.why.push(format!(
        "its dependsOn wait ends by itself once {root} is ready ({})",
        requeue_text(controller)
    ));
    // The root cause's own sentence ("X is the first non-ready dependency: ...") is
    // the diagnosis's `dependsOn chain:` line, printed just above the plan: said once.
    let (rns, rname) = root.split_once('/').unwrap_or(("", &root));
    dr.alternatives
        .push(format!("kubectl unstick ks/{rname} -n {rns} --cascade"));
    (
        Lever::FixDependency,
        format!("unstick {root} first; with --cascade its dependents follow"),
    )
}

/// `reconcile-failed` on a missing CRD: install it first; no request.
fn missing_crds(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    dr.why.push(format!(
        "the apply failed: the cluster does not serve {} (the CRD is missing); a new run fails the same way, so no request is sent",
        d.missing_crds.join(", ")
    ));
    (
        Lever::FixInGit,
        "install the CRD (or order this Kustomization after the one that installs it with spec.dependsOn), then the next run applies".to_string(),
    )
}

/// `reconcile-failed` on an apply the API server refuses the same way on every run
/// ([`crate::diagnose::refusals`]: an immutable field, a validation error, an admission
/// policy's denial, RBAC): no request, no suspend+resume, no restart: nothing a rerun does
/// changes the outcome. The fix for each refused object's cause; `--with-source` refetches
/// (a fix pushed to Git) and requests the run that applies it.
fn apply_refused(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    for r in &d.refused {
        dr.why.push(format!(
            "the API server refuses {} ({}){}: it answers every apply of it the same way, so nothing a rerun does (a request, suspend+resume, a controller restart) changes the outcome; no request is sent",
            r.object,
            r.kind.as_str(),
            if r.fields.is_empty() {
                String::new()
            } else {
                format!(" on {}", r.fields.join(", "))
            }
        ));
    }
    dr.wait_for_token = false;
    if cx.opts.with_source {
        dr.wait_for_token = true;
        if let Some(s) =
            cx.source_step("--with-source: fetch the revision that carries the fix".into())
        {
            dr.steps.push(s);
        }
        dr.steps.push(cx.ks_patch(
            request_patch(cx.inp.token),
            "request a run against the refetched source".into(),
        ));
        return (
            Lever::ReconcileSource,
            "the source is fetched again, then the Kustomization runs: it passes only if the fetched revision carries the fix".to_string(),
        );
    }
    dr.alternatives.push(format!(
        "after the fix is pushed to Git: kubectl unstick ks/{} -n {} --with-source (fetch and run now)",
        cx.name, cx.ns
    ));
    let fixes: Vec<&str> = d.refused.iter().map(|r| r.fix.as_str()).collect();
    (Lever::FixInGit, fixes.join("; "))
}

/// `build-failed`/`reconcile-failed` on the controller's own temp dir: a fresh run.
fn controller_io_error(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let what = crate::diagnose::controller_io_error(d).unwrap_or_default();
    dr.why.push(format!(
        "{}: the error is on kustomize-controller's own temp dir for that run (`{what}`; each run extracts the artifact into a new /tmp/kustomization-* and removes it at the end), an I/O error of the controller, not of the repository: a new run starts from a new temp dir",
        d.summary
    ));
    cx.request_lever(
        &mut dr.steps,
        "reconcile.fluxcd.io/requestedAt = now (flux reconcile ks): a fresh run",
        "a new run starts as soon as a worker is free, in a new temp dir",
    )
}

/// `source-not-ready`/`build-failed`/`stalled`: fix the cause; `--with-source` refetches.
fn fails_until_fixed(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let opts = cx.opts;
    let token = cx.inp.token;
    let source = cx.inp.source;
    dr.why.push(format!(
        "{}: a new run fails the same way until the cause is fixed",
        d.summary
    ));
    if opts.with_source {
        if let Some(s) = cx.source_step(
            "--with-source: ask source-controller to fetch again (e.g. after rotating a token)"
                .into(),
        ) {
            dr.steps.push(s);
        }
        dr.steps.push(cx.ks_patch(
            request_patch(token),
            "request a run against the refetched source".into(),
        ));
        (
            Lever::ReconcileSource,
            "the source is fetched again, then the Kustomization runs".to_string(),
        )
    } else {
        if source.is_some() {
            dr.alternatives
                .push("--with-source: refetch the source after fixing credentials/Git".into());
        }
        (
            Lever::FixInGit,
            "fix the cause (Git content, credentials), then rerun with --with-source".to_string(),
        )
    }
}

/// `health-check-failed` whose every blocker needs a fix of its own: no write frees it.
/// A failed check whose every blocking object needs a fix of its own (a HelmRelease
/// whose retries are exhausted, a suspended one, ...) and no newer revision that may
/// carry it: a new run re-applies the same objects and fails on them the same way
/// (helm-controller v1.4 does not act on a re-applied, unchanged HelmRelease).
fn blockers_need_own_fix(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let ns = &cx.ns;
    let name = &cx.name;
    dr.why.extend(blocking_fixes(d));
    dr.why.push("no write to the Kustomization frees it: a new run applies the same objects and its health check fails on them the same way until they are fixed".into());
    dr.alternatives.push(format!(
        "after a fix pushed to Git: kubectl unstick ks/{name} -n {ns} --with-source (fetch and run now instead of spec.retryInterval after the failure)"
    ));
    dr.wait_for_token = false;
    (
        Lever::FixBlockers,
        "fix the blocking objects as each one says; the next run after the fix passes".to_string(),
    )
}

/// `health-check-failed`/`-canceled`, `reconcile-failed`, `request-pending`: a fresh run now.
fn request_fresh_run(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let opts = cx.opts;
    let ns = &cx.ns;
    let name = &cx.name;
    if d.class == Class::RequestPending {
        dr.why.push(
            "the request is queued; a new requestedAt replaces it with one we can track".into(),
        );
    } else {
        dr.why.push(format!(
            "{}: the run ended, so a request starts a fresh one now",
            d.class
        ));
        if !d.signatures.is_empty() || !d.blocking.is_empty() {
            if opts.with_source {
                dr.why.push("the blocking objects fail the same way until Git has a fix; --with-source: the source fetches first, so a fix pushed to Git is in this run".into());
            } else {
                dr.why.push("the blocking objects fail the same way until Git has a fix; this only helps once the source has it".into());
                dr.alternatives.push(format!(
                    "a fix pushed to Git that the source has not fetched yet: kubectl unstick ks/{name} -n {ns} --with-source (the source fetches first, then the run)"
                ));
            }
        }
    }
    cx.request_lever(
        &mut dr.steps,
        "reconcile.fluxcd.io/requestedAt = now (flux reconcile ks)",
        "a new run starts as soon as a worker is free",
    )
}

/// `health-check-in-flight`: the lever depends on the controller's cancel mode.
fn health_check_in_flight(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let opts = cx.opts;
    let controller = cx.inp.controller;
    let holding = cx.inp.holding;
    let now = cx.inp.now;
    let hc = d.health_check.as_ref();
    let rev_in_flight = hc.map(|h| h.revision.clone()).unwrap_or_default();
    let newer = d.source.as_ref().is_some_and(|s| {
        s.artifact_revision.is_some()
            && !crate::diagnose::same_revision(s.artifact_revision.as_deref(), Some(&rev_in_flight))
    });
    let mode = controller.map(|c| c.cancel_mode);
    let others: Vec<String> = holding
        .iter()
        .filter(|h| **h != d.kustomization)
        .cloned()
        .collect();
    let fresh_after = hc
        .and_then(|h| h.ends_at.or(h.deadline))
        .filter(|t| *t > now)
        .unwrap_or(now);
    if let Some(c) = controller
        && c.cancel_mode != CancelMode::AnyRequeue
    {
        dr.recommend_gate_arg = Some(c.gate_arg());
    }
    // Every blocker needs its own fix (a suspended HelmRelease, a PVC held by
    // pvc-protection, a missing CRD, a healthChecks entry in the wrong namespace), and
    // no newer revision may carry one: any fresh run waits on the same objects, so no
    // lever on the Kustomization is offered (kustomize-controller#1100: resuming the
    // Kustomization does not help a suspended HelmRelease).
    let all_need_own_fix = !d.blocking.is_empty() && d.blocking.iter().all(|b| b.fix.is_some());
    let f = InFlight {
        rev_in_flight,
        newer,
        mode,
        others,
        fresh_after,
    };
    if crate::diagnose::waits_on_progress_only(d) && !opts.restart_controller && !opts.with_source {
        in_flight_on_progress(cx, &f, dr)
    } else if all_need_own_fix && !f.newer && !opts.restart_controller && !opts.with_source {
        in_flight_blockers(cx, &f, dr)
    } else if opts.restart_controller {
        in_flight_restart(cx, &f, dr)
    } else {
        match f.mode {
            Some(CancelMode::AnyRequeue) => in_flight_any_requeue(cx, dr),
            Some(CancelMode::NewRevisionOnly) | Some(CancelMode::Unknown) => {
                in_flight_new_revision_only(cx, &f, dr)
            }
            Some(CancelMode::Never) | None if f.newer && !opts.with_source => {
                in_flight_queued(cx, &f, dr)
            }
            Some(CancelMode::Never) | None => in_flight_suspend_resume(cx, &f, dr),
        }
    }
}

/// What the in-flight lever functions read besides [`Ctx`].
struct InFlight {
    /// The revision under check.
    rev_in_flight: String,
    /// The source has a different (newer) artifact revision.
    newer: bool,
    /// The controller's cancel mode, when its Deployment was read.
    mode: Option<CancelMode>,
    /// Other Kustomizations holding a worker.
    others: Vec<String>,
    /// When the check ends by itself (its predicted end, else its deadline; now if past).
    fresh_after: Timestamp,
}

/// Every blocker is its own controller's action in progress: nothing is stuck, wait.
fn in_flight_on_progress(cx: &Ctx<'_>, f: &InFlight, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let now = cx.inp.now;
    let fresh_after = f.fresh_after;
    // Every blocker is its own controller's action in progress with no failure
    // seen (a HelmRelease installing): nothing is stuck; a cancel would only
    // start the same wait again.
    for b in &d.blocking {
        dr.why.push(format!("{}: {}", b.object, b.message));
    }
    if d.blocking.is_empty() {
        dr.why.push("every object the check waits on is Current now: the controller's next poll (every 5s) passes it".into());
    }
    dr.why.push("nothing is stuck: the check waits on work in progress, which ends by its own timeout at the latest".into());
    dr.alternatives.push(format!(
        "wait: the check itself ends at {} ({} from now) if it has not passed by then",
        short_time(fresh_after),
        obj::human_secs(fresh_after.duration_since(now).as_secs())
    ));
    dr.wait_for_token = false;
    dr.recommend_gate_arg = None;
    (
        Lever::Wait,
        "no write: the check passes when the work it waits on succeeds".to_string(),
    )
}

/// Every blocker needs its own fix and no newer revision may carry one: no lever on the Kustomization.
fn in_flight_blockers(cx: &Ctx<'_>, f: &InFlight, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let now = cx.inp.now;
    let ns = &cx.ns;
    let name = &cx.name;
    let fresh_after = f.fresh_after;
    dr.why.extend(blocking_fixes(d));
    dr.why.push("no write to the Kustomization frees this check: a fresh run (requestedAt, suspend+resume, --restart-controller) waits on the same objects the same way until they are fixed".into());
    dr.alternatives.push(format!(
        "wait: the check ends by itself at {} ({} from now), failing; the next run holds the same way until the objects are fixed",
        short_time(fresh_after),
        obj::human_secs(fresh_after.duration_since(now).as_secs())
    ));
    dr.alternatives.push(format!(
        "after the fix, if the check has ended by then: kubectl unstick ks/{name} -n {ns} (a fresh run now instead of spec.retryInterval after the failure)"
    ));
    dr.wait_for_token = false;
    // The gate would not help either: a canceled check's fresh run waits the same.
    dr.recommend_gate_arg = None;
    (
        Lever::FixBlockers,
        format!(
            "fix the blocking objects as each one says; the in-flight check passes if they are Current before it ends at {}, otherwise the next run after the fix does",
            short_time(fresh_after)
        ),
    )
}

/// `--restart-controller`: delete the controller pod, which cancels every in-flight run.
fn in_flight_restart(cx: &Ctx<'_>, f: &InFlight, dr: &mut Draft) -> (Lever, String) {
    let opts = cx.opts;
    let controller = cx.inp.controller;
    let token = cx.inp.token;
    let others = &f.others;
    let c = controller;
    dr.why.push(
        "--restart-controller: deleting the controller pod cancels every in-flight run at once"
            .into(),
    );
    if !others.is_empty() {
        dr.why.push(format!(
            "this also cancels the in-flight runs of: {}",
            others.join(", ")
        ));
    }
    dr.also_cancels = others.clone();
    // The restarted controller starts a fresh run at once, from the artifact the
    // source has then: with --with-source, fetch first (the executor waits until
    // the source handled the request before deleting the pod), or the fresh run
    // re-applies the old revision and holds the check again (seen on the real
    // kustomize-controller v1.9.6 with the gate off).
    if opts.with_source
        && let Some(s) = cx.source_step(
            "--with-source: fetch the latest revision before the restart, so the fresh run applies it".into(),
        )
    {
        dr.steps.push(s);
    }
    if let Some(c) = c {
        let sel: Vec<String> = c.selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        dr.steps.push(Step::DeleteControllerPods {
            namespace: c.namespace.clone(),
            selector: sel.join(","),
            why: "the Deployment replaces the pod; the new one starts every Kustomization afresh"
                .into(),
        });
    }
    dr.steps.push(cx.ks_patch(
        request_patch(token),
        "request a run so we can prove it was handled".into(),
    ));
    (
        Lever::RestartController,
        "the controller restarts (tens of seconds) and runs everything again".to_string(),
    )
}

/// CancelHealthCheckOnNewRevision on v1.8+: a requestedAt cancels the check now.
fn in_flight_any_requeue(cx: &Ctx<'_>, dr: &mut Draft) -> (Lever, String) {
    let controller = cx.inp.controller;
    dr.why.push(format!(
        "kustomize-controller {} has CancelHealthCheckOnNewRevision=true: any re-queue event, including a requestedAt annotation, cancels the running health check (Ready=False HealthCheckCanceled) and a fresh run starts now",
        controller
            .and_then(|c| c.version)
            .map(|v| v.to_string())
            .unwrap_or_default()
    ));
    cx.request_lever(
        &mut dr.steps,
        "reconcile.fluxcd.io/requestedAt = now: cancels the in-flight health check",
        "the in-flight health check is canceled now and a fresh run starts with the latest spec and revision",
    )
}

/// The gate on v1.7 (or an unknown version): only a new source revision cancels the check.
fn in_flight_new_revision_only(cx: &Ctx<'_>, f: &InFlight, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let opts = cx.opts;
    let controller = cx.inp.controller;
    let now = cx.inp.now;
    let token = cx.inp.token;
    let rev_in_flight = &f.rev_in_flight;
    let newer = f.newer;
    let mode = f.mode;
    let fresh_after = f.fresh_after;
    if mode == Some(CancelMode::Unknown) {
        dr.why.push("the gate is on but the controller version could not be read from its image tag; assuming v1.7 behaviour (cancel only on a new source revision)".into());
    } else {
        dr.why.push(format!(
            "kustomize-controller {} has the gate, but v1.7 cancels only on a new source revision; a requestedAt annotation waits behind the in-flight run",
            controller
                .and_then(|c| c.version)
                .map(|v| v.to_string())
                .unwrap_or_default()
        ));
    }
    if newer {
        dr.why.push(format!(
            "the source already has {} (in flight: {rev_in_flight}); the controller should have canceled on its arrival, a new source event re-triggers it",
            d.source.as_ref().and_then(|s| s.artifact_revision.clone()).unwrap_or_default()
        ));
    }
    if opts.with_source || newer {
        if let Some(s) = cx.source_step(
            "reconcile the source: a new artifact revision cancels the in-flight health check"
                .into(),
        ) {
            dr.steps.push(s);
        }
        dr.steps.push(cx.ks_patch(
            request_patch(token),
            "request a run so we can prove it was handled".into(),
        ));
        dr.fresh_run_at = Some(now);
        (
            Lever::ReconcileSource,
            "if the source fetches a new revision, the in-flight check is canceled now; if upstream has no new commit, nothing is canceled and the fresh run starts at the deadline".to_string(),
        )
    } else {
        dr.why.push("the source has no newer revision than the one in flight, so nothing cancels it now: push the fix to Git, then run with --with-source; meanwhile suspend+resume queues a fresh run at the deadline".into());
        dr.alternatives
            .push("--with-source after pushing a fix: a new revision cancels the check".into());
        dr.alternatives
            .push("--restart-controller: cancels now, and every other in-flight run too".into());
        cx.suspend_resume(&mut dr.steps);
        dr.fresh_run_at = Some(fresh_after);
        dr.wait_for_token = false;
        (
            Lever::SuspendResume,
            format!(
                "the in-flight check keeps its worker until {}; the fresh run with the latest spec starts right after",
                short_time(fresh_after)
            ),
        )
    }
}

/// No gate, and the source already has a newer revision: its run is queued; no write makes it sooner.
fn in_flight_queued(cx: &Ctx<'_>, f: &InFlight, dr: &mut Draft) -> (Lever, String) {
    let d = cx.d;
    let now = cx.inp.now;
    let rev_in_flight = &f.rev_in_flight;
    let others = &f.others;
    let fresh_after = f.fresh_after;
    // The new revision's event already marked the Kustomization dirty: its
    // fresh run starts right after the in-flight check ends, whatever we
    // write. A suspend+resume or a request would change nothing sooner.
    dr.why.push(format!(
        "CancelHealthCheckOnNewRevision is off on this controller: nothing at the API cancels the running health check of {rev_in_flight}"
    ));
    dr.why.push(format!(
        "the source already has {}: its arrival queued a fresh run, which starts right after the in-flight check ends at {} ({} from now); no write (suspend+resume, requestedAt) makes it sooner",
        d.source.as_ref().and_then(|s| s.artifact_revision.clone()).unwrap_or_default(),
        short_time(fresh_after),
        obj::human_secs(fresh_after.duration_since(now).as_secs())
    ));
    dr.alternatives.push(format!(
        "--restart-controller: the fresh run starts now (tens of seconds for the new pod), at the cost of canceling the in-flight runs of {} other Kustomization(s), which start again from scratch",
        others.len()
    ));
    dr.fresh_run_at = Some(fresh_after);
    dr.wait_for_token = false;
    (
        Lever::Wait,
        format!(
            "no write: the queued run at the new revision starts at {} ({} from now); waiting costs that time, then one run",
            short_time(fresh_after),
            obj::human_secs(fresh_after.duration_since(now).as_secs())
        ),
    )
}

/// No gate: suspend+resume queues a fresh run right after the check ends.
fn in_flight_suspend_resume(cx: &Ctx<'_>, f: &InFlight, dr: &mut Draft) -> (Lever, String) {
    let opts = cx.opts;
    let controller = cx.inp.controller;
    let now = cx.inp.now;
    let others = &f.others;
    let fresh_after = f.fresh_after;
    if controller.is_none() {
        dr.why.push("the kustomize-controller Deployment could not be read (use --controller-namespace/--controller-name); assuming the gate is off".into());
    } else {
        dr.why.push("CancelHealthCheckOnNewRevision is off on this controller: nothing at the API cancels a running health check; the work queue never runs one Kustomization twice at once".into());
    }
    dr.why.push(format!(
        "suspend + resume queues a fresh run with the latest spec right after the in-flight one ends at {} (without it, the next run comes spec.retryInterval after the failure); that run fails the same way unless Git or the cluster changed: push the fix first, then run with --with-source",
        short_time(fresh_after)
    ));
    dr.alternatives.push(format!(
        "--restart-controller: cancels now (tens of seconds for the new pod), at the cost of canceling the in-flight runs of {} other Kustomization(s), which start again from scratch",
        others.len()
    ));
    dr.alternatives.push(format!(
        "wait: the check ends by itself at {} ({} from now)",
        short_time(fresh_after),
        obj::human_secs(fresh_after.duration_since(now).as_secs())
    ));
    if opts.with_source
        && let Some(s) = cx
            .source_step("--with-source: fetch the latest revision, so the fresh run has it".into())
    {
        dr.steps.push(s);
    }
    cx.suspend_resume(&mut dr.steps);
    dr.fresh_run_at = Some(fresh_after);
    dr.wait_for_token = false;
    (
        Lever::SuspendResume,
        format!(
            "the in-flight check keeps its worker until {} ({} from now); the fresh run starts right after",
            short_time(fresh_after),
            obj::human_secs(fresh_after.duration_since(now).as_secs())
        ),
    )
}

/// The plan from the chosen lever: the gate advice, the wait (time until the fresh run can
/// start, plus a full run, plus margin) and whether it waits for our request token.
fn finish(cx: &Ctx<'_>, dr: Draft, lever: Lever, effect: String) -> Plan {
    let (d, opts, now, token) = (cx.d, cx.opts, cx.inp.now, cx.inp.token);
    let Draft {
        mut why,
        alternatives,
        steps,
        also_cancels,
        recommend_gate_arg,
        fresh_run_at,
        wait_for_token,
    } = dr;
    // A full run lasts up to the timeout.
    let timeout = d.timeout_secs;
    let margin = opts.margin_secs;
    // Time until the in-flight check ends: its predicted earliest end (fail-fast), else
    // its deadline.
    let left = d
        .health_check
        .as_ref()
        .and_then(|h| h.ends_in_secs.or(h.time_left_secs))
        .unwrap_or(0)
        .max(0) as f64;
    if let Some(arg) = &recommend_gate_arg {
        why.push(format!(
            "to make requestedAt cancel a stuck health check next time, run kustomize-controller v1.8.3+ with `{arg}`"
        ));
    }
    // Wait: time until the fresh run can start, plus a full run, plus margin.
    let start_delay = fresh_run_at
        .map(|t| t.duration_since(now).as_secs_f64().max(0.0))
        .unwrap_or(0.0);
    let dependency_wait = dependency_wait(d);
    // A refetch of the source (--with-source) may bring the fix only after the run we
    // trigger has started at the old revision: that run can hold its worker for a full
    // timeout before the new revision's run (gate off), so one more timeout is allowed.
    let source_refetch = steps.iter().any(|s| {
        matches!(s, Step::Patch { kind, patch, .. } if kind != "Kustomization"
            && patch.pointer("/metadata/annotations/reconcile.fluxcd.io~1requestedAt").is_some())
    });
    // All workers held by other runs: nothing starts before one frees.
    let queue_wait = d
        .worker_free_at
        .map(|t| t.duration_since(now).as_secs_f64().max(0.0))
        .unwrap_or(0.0);
    let wait_secs = dependency_wait
        + queue_wait
        + if source_refetch { timeout } else { 0.0 }
        + if matches!(lever, Lever::SuspendResume | Lever::Wait) {
            left.max(start_delay) + timeout + margin
        } else {
            start_delay + timeout + margin
        };
    // A plan that writes nothing waits for nothing, unless its lever is the wait itself
    // (a missing CRD's fix-in-git once said `waitForRequestToken: true, waitSecs: 150` with
    // no steps).
    let waits = !steps.is_empty() || lever == Lever::Wait;
    Plan {
        kustomization: d.kustomization.clone(),
        lever,
        why,
        effect,
        fresh_run_at,
        also_cancels,
        recommend_gate_arg,
        alternatives,
        request_token: steps
            .iter()
            .any(|s| matches!(s, Step::Patch { patch, .. } if patch.pointer("/metadata/annotations/reconcile.fluxcd.io~1requestedAt").is_some()))
            .then(|| token.to_string()),
        steps,
        wait_secs: if waits { wait_secs } else { 0.0 },
        wait_for_request_token: wait_for_token && waits,
    }
}

impl Plan {
    /// The requestedAt value the plan writes on the Kustomization's source (`--with-source`,
    /// or the v1.7 source lever), if it writes one.
    pub fn source_request(&self) -> Option<&str> {
        self.steps.iter().find_map(|s| match s {
            Step::Patch { kind, patch, .. } if kind != "Kustomization" => patch
                .pointer("/metadata/annotations/reconcile.fluxcd.io~1requestedAt")
                .and_then(Value::as_str),
            _ => None,
        })
    }
}

/// Seconds a dependsOn wait adds before `d`'s own run: while a dependency is still moving,
/// its run comes first, so its timeout (the blocking dependency's, [`Diagnosis::root_cause`]);
/// 0 otherwise.
fn dependency_wait(d: &Diagnosis) -> f64 {
    match (&d.root_cause, d.class) {
        (Some(rc), Class::WaitingOnDependencies) => {
            rc.diagnosis.as_ref().map_or(0.0, |rd| rd.timeout_secs)
        }
        _ => 0.0,
    }
}

/// `now + secs` for display.
pub fn after(now: Timestamp, secs: f64) -> Timestamp {
    now.checked_add(SignedDuration::from_secs_f64(secs))
        .unwrap_or(now)
}

/// A plain reconcile request for a dependent during `--cascade`, whose dependencies are
/// ready now: the controller would retry it within `--requeue-dependency` (30s) anyway; the
/// request starts it at once and gives us a token to prove it.
pub fn request_plan(d: &Diagnosis, inp: &Inputs<'_>, opts: &Options) -> Plan {
    let ks = inp.ks;
    Plan {
        kustomization: d.kustomization.clone(),
        lever: Lever::RequestReconcile,
        why: vec!["its dependencies are ready now; a request starts its run without waiting for the dependency requeue (30s)".into()],
        effect: "a new run starts as soon as a worker is free".into(),
        fresh_run_at: None,
        also_cancels: Vec::new(),
        recommend_gate_arg: None,
        alternatives: Vec::new(),
        steps: vec![Step::Patch {
            api_version: obj::s(ks, &["apiVersion"])
                .unwrap_or("kustomize.toolkit.fluxcd.io/v1")
                .to_string(),
            kind: "Kustomization".into(),
            namespace: obj::namespace(ks).to_string(),
            name: obj::name(ks).to_string(),
            patch: request_patch(inp.token),
            why: "reconcile.fluxcd.io/requestedAt = now".into(),
        }],
        // Its own run, after the dependency's when it waits on one that is still moving.
        wait_secs: dependency_wait(d) + d.timeout_secs + opts.margin_secs,
        wait_for_request_token: true,
        request_token: Some(inp.token.to_string()),
    }
}

/// The plan `--cascade` runs for a dependent of a Kustomization that just recovered: a
/// [`request_plan`] when it only waits (its dependsOn wait on a dependency that is
/// progressing or ready now, [`crate::diagnose::dependency_progressing`]; a run in progress;
/// a request pending), so the cascade starts it at once and proves that run by its token;
/// else the lever [`plan`] chooses (a dependent stuck on its own is unstuck as `ks/NAME`
/// would).
pub fn cascade_plan(d: &Diagnosis, inp: &Inputs<'_>, opts: &Options) -> Plan {
    if crate::diagnose::dependency_progressing(d)
        || matches!(d.class, Class::Reconciling | Class::RequestPending)
    {
        request_plan(d, inp, opts)
    } else {
        plan(d, inp, opts)
    }
}

/// How often kustomize-controller re-checks a dependsOn wait, from its Deployment's
/// `--requeue-dependency` (default 30s), e.g. `re-checked every 5s (--requeue-dependency)`.
fn requeue_text(controller: Option<&crate::controller::ControllerFacts>) -> String {
    match controller {
        Some(c) => format!(
            "re-checked every {} (--requeue-dependency)",
            c.requeue_dependency
        ),
        None => "re-checked every --requeue-dependency, 30s by default".to_string(),
    }
}

/// One line per object the health check waits on: `Kind/ns/name is <kstatus>: <its own fix>`
/// (the `why` of the levers whose blockers each need their own fix).
fn blocking_fixes(d: &Diagnosis) -> impl Iterator<Item = String> + '_ {
    d.blocking.iter().map(|b| {
        format!(
            "{} is {}: {}",
            b.object,
            b.kstatus,
            b.fix.as_deref().unwrap_or_default()
        )
    })
}
