//! The mutating half of a cutover: patch, wait for proof, roll back on failure or Ctrl-C; and
//! `--finish`, which verifies that the authored value landed and removes the hold.
//!
//! Every exit path leaves the GitRepository either at its old spec or verified at the new one:
//! the only patches are JSON merge patches with field manager `kubectl-cutover` that touch
//! `spec.url`, `spec.secretRef` (when `--secret` is given), the
//! `reconcile.fluxcd.io/requestedAt` annotation, the in-flight mark
//! ([`IN_FLIGHT_ANNOTATION`], in the same patch as the URL, removed when the run ends, so a
//! run killed with SIGKILL leaves a record of what it changed) and, with `--hold-root`, the
//! `kustomize.toolkit.fluxcd.io/reconcile` annotation.

use std::time::Duration;

use cluster_loop::cli::Connection;
use cluster_loop::error::{Error, KubeResultExt, Result};
use cluster_loop::flux::{FluxObject, GitRepository, RECONCILE_REQUESTED_AT, StoppedController};
use cluster_loop::wait::{Outcome, Progress, wait_for};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde_json::{Value, json};

use crate::authored;
use crate::cluster::{FIELD_MANAGER, RECORD_FIELD_MANAGER, controller_not_running, start_command};
use crate::git::{GitRunner, Scratch};
use crate::preflight::{
    CUT_OVER_ANNOTATION, CutOverRecord, IN_FLIGHT_ANNOTATION, InFlight, OWNER_NAME_LABEL,
    OWNER_NAMESPACE_LABEL, Preflight, RECONCILE_ANNOTATION, read_credentials, split_revision,
};

/// How a cutover ended.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Ending {
    /// Verified at the new URL, same revision.
    CutOver,
    /// Failed or timed out; the previous spec was restored.
    RolledBack,
    /// Interrupted (Ctrl-C / SIGTERM); the previous spec was restored.
    Interrupted,
}

/// The result of [`execute`].
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecReport {
    /// How it ended.
    pub ending: Ending,
    /// The revision observed at the end (`branch@sha1:...`).
    pub revision: Option<String>,
    /// What was observed, one sentence.
    pub message: String,
    /// The merge patch that was applied (secret values never appear in it).
    pub patch: Value,
    /// The merge patch that restored the previous spec, when a rollback happened.
    pub rollback_patch: Option<Value>,
    /// Seconds from the patch to the end.
    pub elapsed_seconds: f64,
}

/// Options of [`execute`].
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// `--hold-root`: annotate the GitRepository `kustomize.toolkit.fluxcd.io/reconcile:
    /// disabled` so the root Kustomization cannot revert the window.
    pub hold_root: bool,
    /// How long to wait for proof.
    pub timeout: Duration,
}

/// The in-flight mark of a run: from the live URL (and secretRef, when this run changes it) to
/// `pre.to`; finishing an interrupted run (`--to` its target) keeps that run's `from`.
pub fn in_flight(pre: &Preflight, started_at: &str) -> InFlight {
    let changes_secret = pre
        .secret
        .as_ref()
        .is_some_and(|s| pre.current.secret_ref.as_ref() != Some(s));
    match &pre.interrupted_run {
        Some(m) if m.to == pre.to && !m.from.is_empty() => InFlight {
            started_at: started_at.to_string(),
            from_secret_ref: m
                .from_secret_ref
                .clone()
                .or_else(|| changes_secret.then(|| pre.current.secret_ref.clone())),
            ..m.clone()
        },
        _ => InFlight {
            from: pre.current.url.clone(),
            to: pre.to.clone(),
            from_secret_ref: changes_secret.then(|| pre.current.secret_ref.clone()),
            started_at: started_at.to_string(),
        },
    }
}

/// The forward merge patch: new URL (+ secretRef), a reconcile request, the in-flight mark,
/// the optional hold.
pub fn forward_patch(pre: &Preflight, hold_root: bool, requested_at: &str) -> Value {
    let mut spec = json!({ "url": pre.to });
    if let Some(s) = &pre.secret
        && pre.current.secret_ref.as_ref() != Some(s)
    {
        spec["secretRef"] = json!({ "name": s });
    }
    let mark = serde_json::to_string(&in_flight(pre, requested_at)).unwrap_or_default();
    let mut annotations =
        json!({ RECONCILE_REQUESTED_AT: requested_at, IN_FLIGHT_ANNOTATION: mark });
    if hold_root {
        annotations[RECONCILE_ANNOTATION] = json!("disabled");
    }
    json!({ "metadata": { "annotations": annotations }, "spec": spec })
}

/// The merge patch restoring `before`'s spec.url / spec.secretRef (and removing a hold this run
/// added, and the in-flight mark). `null` deletes a field in a JSON merge patch (RFC 7386).
pub fn rollback_patch(before: &GitRepository, forward: &Value) -> Value {
    let mut spec = json!({ "url": before.spec.url });
    if forward.pointer("/spec/secretRef").is_some() {
        spec["secretRef"] = match &before.spec.secret_ref {
            Some(s) => json!({ "name": s.name }),
            None => Value::Null,
        };
    }
    let mut patch =
        json!({ "spec": spec, "metadata": { "annotations": { IN_FLIGHT_ANNOTATION: null } } });
    let had_hold = before
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(RECONCILE_ANNOTATION));
    if forward
        .pointer(&format!(
            "/metadata/annotations/{}",
            RECONCILE_ANNOTATION.replace('/', "~1")
        ))
        .is_some()
        && !had_hold
    {
        patch["metadata"]["annotations"][RECONCILE_ANNOTATION] = Value::Null;
    }
    patch
}

/// The merge patch that ends a proven run: replaces the in-flight mark with the record of
/// what the run set ([`CUT_OVER_ANNOTATION`]).
pub fn done_patch(record: &CutOverRecord) -> Value {
    let record = serde_json::to_string(record).unwrap_or_default();
    json!({ "metadata": { "annotations": {
        IN_FLIGHT_ANNOTATION: null,
        CUT_OVER_ANNOTATION: record,
    } } })
}

/// What the watch decided about one version of the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Keep waiting (with the live status line).
    Waiting,
    /// observedGeneration == generation, Ready=True, artifact revision == the expected one
    /// (flux2 pkg/bootstrap wait rule).
    Proven,
    /// The controller handled the new spec and failed: the message.
    Failed(String),
}

/// Judges one observed version of the GitRepository against `expected_revision`.
///
/// Failure is declared only for the new generation (status.observedGeneration, or the Ready
/// condition's observedGeneration, == generation) with Ready=False and FetchFailed=True or
/// Stalled=True (source-controller api/v1 conditions);
/// a Ready=True at another revision is a failure too (it would roll the cluster).
///
/// The live `spec.url` must still be `to`: a root Kustomization that applies this object from
/// a commit that still authors the old URL puts it back (the self-reference trap), and a Ready
/// at the old URL proves nothing about the new server.
pub fn judge(obj: &GitRepository, to: &str, expected_revision: &str) -> Verdict {
    if obj.spec.url != to {
        let by = obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(OWNER_NAME_LABEL))
            .map(|n| format!("Kustomization {n} (the root that applies this object)"))
            .unwrap_or_else(|| "another writer".into());
        return Verdict::Failed(format!(
            "spec.url was changed back to {} by {by}: its committed value still names the old \
             server; use --hold-root, or land the authored change first",
            obj.spec.url
        ));
    }
    // A failed run leaves status.observedGeneration behind (source-controller only records it
    // on success) but stamps its conditions with the generation it handled.
    let generation = obj.metadata.generation;
    let failure_for_this_generation = obj.ready().is_some_and(|c| {
        c.is_false() && generation.is_some() && c.observed_generation == generation
    });
    if !obj.generation_observed() && !failure_for_this_generation {
        return Verdict::Waiting;
    }
    let revision = obj
        .status
        .artifact
        .as_ref()
        .map(|a| a.revision.as_str())
        .unwrap_or("");
    match obj.ready() {
        Some(c) if c.is_true() && revision == expected_revision => Verdict::Proven,
        Some(c) if c.is_true() && !revision.is_empty() => Verdict::Failed(format!(
            "the source became Ready at {revision}, not {expected_revision}"
        )),
        Some(c) if c.is_false() => {
            let fetch_failed = obj.condition("FetchFailed").is_some_and(|f| f.is_true());
            let stalled = obj.condition("Stalled").is_some_and(|f| f.is_true());
            if fetch_failed || stalled {
                Verdict::Failed(format!("{}: {}", c.reason(), c.message()))
            } else {
                Verdict::Waiting
            }
        }
        _ => Verdict::Waiting,
    }
}

/// The rollback reason when the deadline passed without proof: what was missing, never a
/// bare copy of the Ready condition (which, still describing the old URL's fetch, reads like
/// success). Missing is one of:
/// - no reconcile of the new spec ended (`status.observedGeneration` < `metadata.generation`;
///   source-controller records it only when a reconcile ends): with
///   `source_controller_stopped` (why its Deployment runs no controller, see
///   [`controller_not_running`]) nothing fetched at all, so the new server is never blamed
///   and the lever is the scale command; otherwise the fetch of the new URL did not end in
///   time or the controller never got to it, and the message says both (the status cannot
///   tell them apart);
/// - it handled the spec but reported neither success at the expected revision nor a failure
///   (Ready Unknown/False without FetchFailed or Stalled, source-controller api/v1
///   conditions).
pub fn no_proof_message(
    obj: Option<&GitRepository>,
    pre: &Preflight,
    timeout: std::time::Duration,
    source_controller_stopped: Option<&str>,
) -> String {
    let within = cluster_loop::duration::format_go_duration(timeout);
    let Some(o) = obj else {
        return format!("no proof within {within}: the GitRepository could not be read");
    };
    let ready = o
        .ready()
        .map(|c| format!("Ready={} {}: {}", c.status, c.reason(), c.message()))
        .unwrap_or_else(|| "no Ready condition".into());
    let artifact = o
        .status
        .artifact
        .as_ref()
        .map(|a| a.revision.clone())
        .unwrap_or_else(|| "none".into());
    if o.suspended() {
        // Suspended during the run (the preflight refuses a suspended source).
        format!(
            "no proof within {within}: the GitRepository was suspended during the run \
             (spec.suspend: true), so source-controller never fetched {} and the artifact \
             ({artifact}) is still from the old URL's fetch ({})",
            pre.to, pre.current.url
        )
    } else if !o.generation_observed() {
        let observed = format!(
            "status.observedGeneration {} < generation {}",
            o.status
                .observed_generation
                .map(|g| g.to_string())
                .unwrap_or_else(|| "unset".into()),
            o.metadata
                .generation
                .map(|g| g.to_string())
                .unwrap_or_else(|| "?".into()),
        );
        match source_controller_stopped {
            // Nothing fetched at all: the new server was never asked, so it is not blamed.
            Some(why) => format!(
                "no proof within {within}: source-controller in {} is not running ({why}), so \
                 nothing fetched: {} was never asked ({observed}) and the artifact ({artifact}) \
                 is still from the old URL's fetch ({}). Start it ({}), then run the cutover \
                 again",
                cluster_loop::cli::FLUX_DEFAULT_NAMESPACE,
                pre.to,
                pre.current.url,
                start_command("source-controller", why)
            ),
            // Its Deployment runs, but no fetch of the new spec ended: source-controller
            // records observedGeneration only when a reconcile ends, and a fetch still in
            // flight (a server that does not answer holds it until the GitRepository's
            // spec.timeout) looks the same as a controller that never got to it.
            None => format!(
                "no proof within {within}: no fetch of the new spec ended ({observed}): either \
                 {} did not answer in time, or source-controller never got to it (hung, or busy \
                 with other objects: kubectl -n {} logs deployment/source-controller); the \
                 artifact ({artifact}) is still from the old URL's fetch ({}), and the last \
                 condition, {ready}, describes that old fetch",
                pre.to,
                cluster_loop::cli::FLUX_DEFAULT_NAMESPACE,
                pre.current.url
            ),
        }
    } else {
        format!(
            "no proof within {within}: source-controller handled the new spec but reported \
             neither Ready=True at {} from {} nor a fetch failure (artifact {artifact}; {ready})",
            pre.current.revision, pre.to
        )
    }
}

/// Patches the GitRepository to the new URL and proves it, or restores it.
///
/// Deadline: `opts.timeout` from the patch. Ctrl-C and SIGTERM during the wait roll back.
///
/// Errors: API errors on the forward patch (nothing changed then). An API error on the rollback
/// patch is reported with the exact patch to apply by hand.
pub async fn execute(
    conn: &Connection,
    before: &GitRepository,
    pre: &Preflight,
    opts: &ExecOptions,
    progress: &Progress,
) -> Result<ExecReport> {
    let ns = before.metadata.namespace.clone().unwrap_or_default();
    let name = before.metadata.name.clone().unwrap_or_default();
    let api: Api<GitRepository> = Api::namespaced(conn.client.clone(), &ns);
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let requested_at = jiff::Timestamp::now().to_string();
    let forward = forward_patch(pre, opts.hold_root, &requested_at);
    let ctx = || {
        conn.ctx()
            .verb("patch")
            .resource_of::<GitRepository>()
            .namespace(Some(ns.clone()))
            .name(name.clone())
    };
    // Signal handlers are installed before the patch: a Ctrl-C at any moment from here on is
    // seen (and rolled back), never the default "terminate with the patch applied".
    let mut signals = Signals::install();
    let start = std::time::Instant::now();
    api.patch(&name, &pp, &Patch::Merge(&forward))
        .await
        .api_context(ctx)?;
    progress.println(format!(
        "patched spec.url of gitrepository {ns}/{name} (field manager {FIELD_MANAGER}); waiting \
         for Ready at {}",
        pre.current.revision
    ));

    let expected = pre.current.revision.clone();
    let deadline = tokio::time::Instant::now() + opts.timeout;
    let mut verdict = Verdict::Waiting;
    let wait = wait_for(
        &api,
        &name,
        |o: Option<&GitRepository>| {
            verdict = match o {
                Some(o) => judge(o, &pre.to, &expected),
                None => Verdict::Failed("the GitRepository was deleted".into()),
            };
            verdict != Verdict::Waiting
        },
        deadline,
        progress,
        conn.ctx()
            .resource_of::<GitRepository>()
            .namespace(Some(ns.clone())),
    );
    let interrupted = tokio::select! {
        r = wait => Some(r),
        _ = signals.recv() => None,
    };
    progress.finish();
    let (ending, message, revision) =
        ending_of(conn, interrupted, &verdict, &expected, pre, opts).await;
    if ending == Ending::CutOver {
        let mark = in_flight(pre, &requested_at);
        let record = CutOverRecord {
            from: mark.from,
            to: mark.to,
            at: jiff::Timestamp::now().to_string(),
        };
        let pp_record = PatchParams {
            field_manager: Some(RECORD_FIELD_MANAGER.into()),
            ..Default::default()
        };
        if let Err(e) = api
            .patch(&name, &pp_record, &Patch::Merge(&done_patch(&record)))
            .await
        {
            return Err(Error::Cluster(format!(
                "{message}; but removing the in-flight mark failed ({e}): remove it with kubectl \
                 annotate gitrepository -n {ns} {name} {IN_FLIGHT_ANNOTATION}-"
            )));
        }
        return Ok(ExecReport {
            ending,
            revision,
            message,
            patch: forward,
            rollback_patch: None,
            elapsed_seconds: start.elapsed().as_secs_f64(),
        });
    }
    let back = rollback_patch(before, &forward);
    if let Err(e) = api.patch(&name, &pp, &Patch::Merge(&back)).await {
        return Err(Error::Cluster(format!(
            "{message}; the rollback patch FAILED ({e}). Restore by hand: kubectl patch \
             gitrepository -n {ns} {name} --type merge -p '{back}'"
        )));
    }
    Ok(ExecReport {
        ending,
        revision,
        message,
        patch: forward,
        rollback_patch: Some(back),
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}

/// How a wait that was `interrupted` (`None`: a signal) or ended ended, with the message and
/// the artifact revision read last: cut over when `verdict` is proven, rolled back when the
/// source failed at the new URL, the watch was lost or nothing was proven within the timeout
/// ([`no_proof_message`], naming a stopped source-controller).
async fn ending_of(
    conn: &Connection,
    interrupted: Option<Result<Outcome<GitRepository>>>,
    verdict: &Verdict,
    expected: &str,
    pre: &Preflight,
    opts: &ExecOptions,
) -> (Ending, String, Option<String>) {
    match interrupted {
        None => (
            Ending::Interrupted,
            "interrupted: restoring the previous spec".to_string(),
            None,
        ),
        Some(Err(e)) => (
            Ending::RolledBack,
            format!("lost the watch ({e}): restoring the previous spec"),
            None,
        ),
        Some(Ok(out)) => {
            let rev = out
                .object
                .as_ref()
                .and_then(|o| o.status.artifact.as_ref().map(|a| a.revision.clone()));
            match (verdict, out.timed_out) {
                (Verdict::Proven, _) => (
                    Ending::CutOver,
                    format!(
                        "Ready=True at {} from {} (observedGeneration == generation)",
                        expected, pre.to
                    ),
                    rev,
                ),
                (Verdict::Failed(m), _) => (
                    Ending::RolledBack,
                    format!("the source failed at the new URL: {m}"),
                    rev,
                ),
                (Verdict::Waiting, _) => {
                    let stopped = controller_not_running(conn, "source-controller").await;
                    (
                        Ending::RolledBack,
                        no_proof_message(
                            out.object.as_ref(),
                            pre,
                            opts.timeout,
                            stopped.as_deref(),
                        ),
                        rev,
                    )
                }
            }
        }
    }
}

pub use cluster_loop::signals::Signals;

/// The result of `--finish`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishReport {
    /// True only when a root Kustomization applied a revision whose rendered spec.url is the
    /// live one (then the hold, if any, was removed). False when they differ, the root has
    /// not applied the source's revision yet, or no root Kustomization applies the
    /// GitRepository (nothing to compare with; `notes` say so).
    pub verified: bool,
    /// The live spec.url.
    pub live_url: String,
    /// The source revision the root applied.
    pub root_revision: Option<String>,
    /// The URL rendered from the root path at that revision.
    pub authored_url: Option<String>,
    /// Where it is authored.
    pub authored_at: Option<String>,
    /// True when this run removed the `kustomize.toolkit.fluxcd.io/reconcile: disabled` hold.
    pub hold_removed: bool,
    /// Set when the GitRepository or the root Kustomization was still mid-reconcile when
    /// `--timeout` passed: nothing was judged (`verified` is false, the hold stays). `null`
    /// otherwise.
    pub in_progress_at_deadline: Option<StillInProgress>,
    /// The Flux controllers found not running when `--finish` started
    /// ([`controller_not_running`]): then nothing was waited for, judged or changed
    /// (`verified` false, exit 1). Empty when both run.
    pub stopped_controllers: Vec<StoppedController>,
    /// What was found, one line per fact.
    pub notes: Vec<String>,
    /// The cutover that was undone: its record ([`CUT_OVER_ANNOTATION`]) says it set `to`,
    /// and the live spec.url is its `from` again (the root Kustomization applied the old
    /// committed URL, or someone rolled it back). Then `verified` is false (exit 1). Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverted_cutover: Option<CutOverRecord>,
}

/// An object `--finish` waited for that was still mid-reconcile at the deadline.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StillInProgress {
    /// `Kind namespace/name`, e.g. `Kustomization flux-system/flux-system`.
    pub object: String,
    /// Why it was still in progress: its last condition, e.g. `Ready=Unknown Progressing:
    /// Reconciliation in progress`, or the generation it has not observed yet.
    pub condition: String,
    /// The deadline (`--timeout`), as a Go duration (`2m0s`).
    pub timeout: String,
}

/// `Type=Status Reason: message` of one condition (the shape of
/// [`cluster_loop::wait::status_line`]).
fn condition_line(c: &cluster_loop::conditions::Condition) -> String {
    let mut s = format!("{}={}", c.type_, c.status);
    if !c.reason().is_empty() {
        s.push(' ');
        s.push_str(c.reason());
    }
    if !c.message().is_empty() {
        s.push_str(": ");
        s.push_str(c.message());
    }
    s
}

/// Why a Flux object is mid-reconcile (its controller is running it, or has not handled its
/// current spec yet), or `None` when it has settled and can be judged.
///
/// Mid-reconcile, after fluxcd/pkg runtime conditions as source-controller and
/// kustomize-controller v1 write them (the kstatus InProgress rules, minus the settled
/// failures):
/// - `Reconciling=True`, unless `Ready=False` (a failed run leaves `Reconciling=True` with
///   reason `ProgressingWithRetry` next to `Ready=False`: finished, the retry comes later);
/// - `Ready=Unknown` (`Progressing: Reconciliation in progress` at the start of a run), or no
///   `Ready` condition yet;
/// - `status.observedGeneration != metadata.generation`, unless `Ready=False` was written for
///   the current generation (controllers record observedGeneration only on success, so a
///   failure of this generation leaves it behind) or carries no observedGeneration.
///
/// A suspended object is never mid-reconcile: no run will come.
pub fn mid_reconcile<K: FluxObject>(obj: &K) -> Option<String> {
    if obj.suspended() {
        return None;
    }
    let ready = obj.ready();
    let ready_false = ready.is_some_and(|c| c.is_false());
    if let Some(r) = obj.condition(cluster_loop::conditions::RECONCILING)
        && r.is_true()
        && !ready_false
    {
        return Some(match ready {
            Some(c) => format!("{}; {}", condition_line(c), condition_line(r)),
            None => condition_line(r),
        });
    }
    match ready {
        None => return Some("no Ready condition yet".into()),
        Some(c) if !c.is_true() && !c.is_false() => return Some(condition_line(c)),
        _ => {}
    }
    if !obj.generation_observed() {
        let generation = obj.meta().generation;
        let failed_for_this_generation = ready.is_some_and(|c| {
            c.is_false() && c.observed_generation.is_none_or(|g| Some(g) == generation)
        });
        if !failed_for_this_generation {
            return Some(format!(
                "generation {} not observed yet (observedGeneration {})",
                generation.unwrap_or_default(),
                obj.observed_generation()
                    .map(|g| g.to_string())
                    .unwrap_or_else(|| "unset".into())
            ));
        }
    }
    None
}

/// Why the root Kustomization is not ready to be judged against revision `source_rev` of the
/// GitRepository `source_ns/source_name`: [`mid_reconcile`], or, when its sourceRef is that
/// GitRepository, `Ready=True` at another `lastAppliedRevision` (the source's new revision
/// re-queues it: kustomize-controller `requestsForRevisionChangeOf`). `None` when it can be
/// judged.
pub fn root_unsettled(
    root: &cluster_loop::flux::Kustomization,
    source_ns: &str,
    source_name: &str,
    source_rev: &str,
) -> Option<String> {
    if let Some(m) = mid_reconcile(root) {
        return Some(m);
    }
    let r = &root.spec.source_ref;
    let from_this_source = r.kind == "GitRepository"
        && r.name == source_name
        && r.namespace
            .as_deref()
            .or(root.metadata.namespace.as_deref())
            == Some(source_ns);
    let applied = root.status.last_applied_revision.as_deref().unwrap_or("");
    if from_this_source
        && !root.spec.suspend
        && root.ready().is_some_and(|c| c.is_true())
        && !source_rev.is_empty()
        && applied != source_rev
    {
        return Some(format!(
            "Ready at {}; the source is at {source_rev}, not applied yet",
            if applied.is_empty() {
                "no revision"
            } else {
                applied
            }
        ));
    }
    None
}

/// Why `--finish` cannot compare a settled root Kustomization with GitRepository
/// `source_ns/source_name` at `source_rev` (its artifact revision), or `None` when it can
/// (it renders from that GitRepository, is Ready, and applied `source_rev`). In order:
/// - its sourceRef is another source: its lastAppliedRevision is that source's, and the
///   committed spec.url lives there (nothing to render from this GitRepository);
/// - not Ready (`Ready=False`, or no Ready): a failed run is not fixed by waiting
///   (kustomize-controller retries at `retryInterval` and fails the same way until the cause
///   is fixed), so the note gives the reason and says to fix it first;
/// - Ready at another revision (a settle cut short): run again.
pub fn root_not_judgeable(
    root: &cluster_loop::flux::Kustomization,
    source_ns: &str,
    source_name: &str,
    source_rev: &str,
) -> Option<String> {
    let what = format!(
        "root Kustomization {}/{}",
        root.metadata.namespace.as_deref().unwrap_or_default(),
        root.metadata.name.as_deref().unwrap_or_default()
    );
    let r = &root.spec.source_ref;
    let r_ns = r
        .namespace
        .as_deref()
        .or(root.metadata.namespace.as_deref())
        .unwrap_or_default();
    if !(r.kind == "GitRepository" && r.name == source_name && r_ns == source_ns) {
        return Some(format!(
            "{what} applies GitRepository {source_ns}/{source_name} from another source ({} \
             {r_ns}/{}): the committed spec.url is in that source, so --finish cannot render \
             it from this one; check that file (its spec.url must be the live one) by hand",
            r.kind, r.name
        ));
    }
    let applied = root.status.last_applied_revision.as_deref().unwrap_or("");
    let applied_words = if applied.is_empty() {
        "nothing".to_string()
    } else {
        applied.to_string()
    };
    if !root.ready().is_some_and(|c| c.is_true()) {
        let why = root
            .ready()
            .map(condition_line)
            .unwrap_or_else(|| "no Ready condition".into());
        return Some(if applied == source_rev {
            format!(
                "{what} is not Ready ({why}); it applied {applied}, the source's revision, but \
                 its run did not succeed: waiting does not fix that; fix what the condition says, \
                 then run --finish again"
            )
        } else {
            format!(
                "{what} is not Ready ({why}): it failed at the source's revision {source_rev} \
                 and still runs {applied_words}; waiting does not fix that (each retry fails the \
                 same way): fix what the condition says, then run --finish again"
            )
        });
    }
    if source_rev.is_empty() || applied != source_rev {
        let name = root.metadata.name.as_deref().unwrap_or_default();
        let ns = root.metadata.namespace.as_deref().unwrap_or_default();
        return Some(format!(
            "{what} has applied {applied_words} but the source is at {}: run --finish again \
             once it applies it (flux reconcile ks -n {ns} {name})",
            if source_rev.is_empty() {
                "no revision"
            } else {
                source_rev
            }
        ));
    }
    None
}

/// What every settle wait of one `--finish` shares.
struct SettleCtx<'a> {
    conn: &'a Connection,
    /// The deadline of the whole `--finish` wait.
    deadline: tokio::time::Instant,
    /// `--timeout`, for messages.
    timeout: Duration,
    progress: &'a Progress,
}

/// How one settle wait ended.
enum Settle<K> {
    /// The object settled (or was settled already): judge this version.
    Settled(K),
    /// Still mid-reconcile at the deadline: why.
    Deadline(String),
}

/// Waits (watch, [`wait_for`]) until `unsettled(object)` is `None` or `deadline` passes.
/// Prints one line on `progress` when it has to wait (and one when it settled). Errors: API
/// errors; [`Error::Cluster`] when the object is deleted meanwhile.
async fn settle<K>(
    cx: &SettleCtx<'_>,
    api: &Api<K>,
    what: &str,
    obj: K,
    mut unsettled: impl FnMut(&K) -> Option<String>,
) -> Result<Settle<K>>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + Serialize
        + std::fmt::Debug
        + Send
        + 'static,
{
    let Some(why) = unsettled(&obj) else {
        return Ok(Settle::Settled(obj));
    };
    let SettleCtx {
        conn,
        deadline,
        timeout,
        progress,
    } = *cx;
    let name = obj.meta().name.clone().unwrap_or_default();
    progress.println(format!(
        "{what} is mid-reconcile ({why}): waiting up to {} (--timeout) for it to settle",
        cluster_loop::duration::format_go_duration(timeout)
    ));
    let mut last_why = why;
    let out = wait_for(
        api,
        &name,
        |o: Option<&K>| match o {
            Some(o) => match unsettled(o) {
                Some(w) => {
                    last_why = w;
                    false
                }
                None => true,
            },
            // Deleted meanwhile: stop waiting, the caller reports it.
            None => true,
        },
        deadline,
        progress,
        conn.ctx()
            .resource_of::<K>()
            .namespace(obj.meta().namespace.clone()),
    )
    .await?;
    if out.timed_out {
        return Ok(Settle::Deadline(last_why));
    }
    match out.object {
        Some(o) => {
            progress.println(format!("{what} settled"));
            Ok(Settle::Settled(o))
        }
        None => Err(Error::Cluster(format!(
            "{what} was deleted while --finish waited for it"
        ))),
    }
}

/// `--finish`: verifies that the root Kustomization applied a revision whose rendered URL is
/// the live one, then removes the hold.
///
/// A GitRepository or root Kustomization that is mid-reconcile ([`mid_reconcile`],
/// [`root_unsettled`]) is watched until it settles, at most `timeout` in all, with progress
/// on `progress` (stderr); only settled objects are judged. When the source fetched a new
/// revision meanwhile the wait starts over (same deadline). At the deadline nothing is judged:
/// `verified: false`, `in_progress_at_deadline` names the object and its last condition, and
/// the hold stays.
///
/// Errors: API errors; a failed verification is `verified: false` with notes (exit 1).
pub async fn finish(
    conn: &Connection,
    ns: &str,
    name: &str,
    timeout: Duration,
    progress: &Progress,
) -> Result<FinishReport> {
    // The controllers first: a stopped one makes any wait useless (nothing fetches, nothing
    // applies), so it is said at once, with the lever, and nothing is changed (session 6
    // trial: --finish waited its whole --timeout before saying so).
    let stopped = stopped_controller_list(conn).await;
    let mut report = if stopped.is_empty() {
        finish_inner(conn, ns, name, timeout, progress).await?
    } else {
        finish_refused(conn, ns, name, stopped).await?
    };
    if !report.verified && !report.hold_removed {
        // Every run names a hold it leaves in place, and who left it (an interrupted run, a
        // --hold-root run that ended, someone else).
        let api: Api<GitRepository> = Api::namespaced(conn.client.clone(), ns);
        if let Ok(repo) = api.get(name).await
            && let Some(origin) = crate::preflight::hold_origin(&repo)
        {
            report
                .notes
                .push(crate::preflight::hold_message(ns, name, &origin));
        }
    }
    if report.in_progress_at_deadline.is_some() {
        // Nothing settled: a stopped Flux controller is the likeliest reason, and waiting
        // longer cannot help until it runs.
        report.notes.extend(stopped_controllers(conn).await);
    }
    Ok(report)
}

/// What each of source-controller and kustomize-controller does for `--finish`: fetch the
/// GitRepository, apply the root Kustomization.
const FINISH_CONTROLLERS: [(&str, &str); 2] = [
    ("source-controller", "nothing fetches the GitRepository"),
    (
        "kustomize-controller",
        "nothing applies the root Kustomization",
    ),
];

/// source-controller and kustomize-controller (Deployments in `flux-system`) that run no
/// controller ([`controller_not_running`]), in that order. Unreadable Deployments count as
/// running (best effort: Flux installed elsewhere, no RBAC to read Deployments).
pub async fn stopped_controller_list(conn: &Connection) -> Vec<StoppedController> {
    let mut out = vec![];
    for (name, does) in FINISH_CONTROLLERS {
        if let Some(why) = controller_not_running(conn, name).await {
            out.push(StoppedController {
                controller: name.to_string(),
                namespace: cluster_loop::cli::FLUX_DEFAULT_NAMESPACE.to_string(),
                command: start_command(name, &why),
                why,
                consequence: does.to_string(),
                pod: None,
                leader: None,
            });
        }
    }
    out
}

/// The note of `--finish` for a controller found stopped before it started: what it does not
/// do, that nothing was waited for or changed, and the command that starts it.
pub fn finish_stopped_note(c: &StoppedController) -> String {
    format!(
        "{} in {} is not running ({}): {} until it runs, so --finish cannot verify and does \
         not wait; nothing changed. Start it ({}), then run --finish again",
        c.controller, c.namespace, c.why, c.consequence, c.command
    )
}

/// `--finish` with a Flux controller stopped ([`stopped_controller_list`]): reads the
/// GitRepository only (it must exist: exit 3 otherwise), judges nothing, writes nothing. The
/// notes name each stopped controller ([`finish_stopped_note`]) and an interrupted run's mark.
async fn finish_refused(
    conn: &Connection,
    ns: &str,
    name: &str,
    stopped: Vec<StoppedController>,
) -> Result<FinishReport> {
    let api: Api<GitRepository> = Api::namespaced(conn.client.clone(), ns);
    let repo = api.get(name).await.api_context(|| {
        conn.ctx()
            .verb("get")
            .resource_of::<GitRepository>()
            .namespace(Some(ns))
            .name(name)
    })?;
    let mut notes: Vec<String> = stopped.iter().map(finish_stopped_note).collect();
    if let Some(m) = InFlight::of(&repo) {
        notes.push(m.message(ns, name, &repo.spec.url));
    }
    Ok(FinishReport {
        verified: false,
        live_url: repo.spec.url.clone(),
        root_revision: None,
        authored_url: None,
        authored_at: None,
        hold_removed: false,
        in_progress_at_deadline: None,
        stopped_controllers: stopped,
        notes,
        reverted_cutover: None,
    })
}

/// Notes for each of source-controller and kustomize-controller (Deployments in
/// `flux-system`, the flux CLI's default) that runs no controller
/// ([`controller_not_running`]). Unreadable Deployments say nothing.
async fn stopped_controllers(conn: &Connection) -> Vec<String> {
    let mut notes = vec![];
    for (name, does) in FINISH_CONTROLLERS {
        if let Some(why) = controller_not_running(conn, name).await {
            let ns = cluster_loop::cli::FLUX_DEFAULT_NAMESPACE;
            notes.push(format!(
                "{name} in {ns} is not running ({why}): {does} until it runs, so waiting longer \
                 cannot help ({})",
                start_command(name, &why)
            ));
        }
    }
    notes
}

async fn finish_inner(
    conn: &Connection,
    ns: &str,
    name: &str,
    timeout: Duration,
    progress: &Progress,
) -> Result<FinishReport> {
    let deadline = tokio::time::Instant::now() + timeout;
    let f = Finishing {
        conn,
        api: Api::namespaced(conn.client.clone(), ns),
        ns,
        name,
    };
    let api = &f.api;
    let get_repo = || f.get();
    let repo = get_repo().await?;
    let live_url = repo.spec.url.clone();
    let mut report = FinishReport {
        verified: false,
        live_url: live_url.clone(),
        root_revision: None,
        authored_url: None,
        authored_at: None,
        hold_removed: false,
        in_progress_at_deadline: None,
        stopped_controllers: vec![],
        notes: vec![],
        reverted_cutover: None,
    };
    if let Some(m) = InFlight::of(&repo) {
        // A killed run's patch was never proven: nothing to verify until it is finished or
        // rolled back (the hold, if any, stays).
        report.notes.push(m.message(ns, name, &live_url));
        return Ok(report);
    }
    if let Some(r) = CutOverRecord::of(&repo).filter(|r| r.reverted(&live_url)) {
        // Trial3: committed == live == the old URL read "verified" after the root reverted
        // a cutover whose URL was never committed.
        report.notes.push(reverted_message(ns, name, &repo, &r));
        report.reverted_cutover = Some(r);
        return Ok(report);
    }
    let mut all: Option<Vec<cluster_loop::flux::Kustomization>> = None;
    let root_ref = f.root_of(&repo, &mut all).await?;
    let Some((root_name, root_ns)) = root_ref.as_ref() else {
        return f.no_root(&repo, all, report).await;
    };
    let ks_api: Api<cluster_loop::flux::Kustomization> =
        Api::namespaced(conn.client.clone(), root_ns);
    let repo_what = format!("GitRepository {ns}/{name}");
    let root_what = format!("root Kustomization {root_ns}/{root_name}");
    let held = crate::preflight::is_held(&repo);
    let at_deadline = |report: FinishReport, what: &str, object: String, why: String| {
        deadline_report(report, timeout, held, what, object, why)
    };
    let cx = SettleCtx {
        conn,
        deadline,
        timeout,
        progress,
    };
    // Not fetched yet is not "not committed": when the branch at the live URL is ahead of the
    // source's artifact (the authored change was just pushed), ask source-controller to fetch
    // now (reconcile.fluxcd.io/requestedAt, as `flux reconcile source git` does) and wait for
    // that commit within --timeout before judging.
    let branch = repo
        .spec
        .reference
        .as_ref()
        .and_then(|r| r.branch.clone())
        .unwrap_or_else(|| "main".into());
    let mut repo = match f.fetch_pushed(&cx, repo, &branch, &repo_what).await? {
        Ok(r) => r,
        Err(why) => return Ok(at_deadline(report, &repo_what, repo_what.clone(), why)),
    };
    let (repo, root) = loop {
        let settled = settle(&cx, api, &repo_what, repo, mid_reconcile).await?;
        let repo_now = match settled {
            Settle::Settled(r) => r,
            Settle::Deadline(why) => {
                return Ok(at_deadline(report, &repo_what, repo_what.clone(), why));
            }
        };
        let source_rev = artifact_revision(&repo_now);
        let root = ks_api.get(root_name).await.api_context(|| {
            conn.ctx()
                .verb("get")
                .resource_of::<cluster_loop::flux::Kustomization>()
                .namespace(Some(root_ns.clone()))
                .name(root_name.clone())
        })?;
        if root.suspended() {
            report
                .notes
                .push(crate::preflight::suspended_root_message(&format!(
                    "{root_ns}/{root_name}"
                )));
            return Ok(report);
        }
        let root = match settle(&cx, &ks_api, &root_what, root, |k| {
            root_unsettled(k, ns, name, &source_rev)
        })
        .await?
        {
            Settle::Settled(k) => k,
            Settle::Deadline(why) => {
                let object = format!("Kustomization {root_ns}/{root_name}");
                return Ok(at_deadline(report, &root_what, object, why));
            }
        };
        // Judge a consistent pair: if the source fetched another revision (or its spec
        // changed) while the root settled, settle again against that one.
        let again = get_repo().await?;
        if artifact_revision(&again) == source_rev
            && again.metadata.generation == repo_now.metadata.generation
        {
            break (again, root);
        }
        progress.println(format!(
            "{repo_what} moved to {} while waiting: checking again",
            artifact_revision(&again)
        ));
        repo = again;
    };
    f.judge(repo, root, (root_name, root_ns), &branch, report)
        .await
}

/// The report of a `--finish` that found `what` (`object`) still mid-reconcile at the
/// `timeout` deadline, `why`: nothing judged (and a hold, `held`, stays).
fn deadline_report(
    mut report: FinishReport,
    timeout: Duration,
    held: bool,
    what: &str,
    object: String,
    why: String,
) -> FinishReport {
    let t = cluster_loop::duration::format_go_duration(timeout);
    report.notes.push(format!(
        "{what} was still mid-reconcile at the {t} deadline (--timeout): {why}; nothing \
         was judged{}: run --finish again once it is Ready (or with a longer --timeout)",
        if held { " and the hold stays" } else { "" }
    ));
    report.in_progress_at_deadline = Some(StillInProgress {
        object,
        condition: why,
        timeout: t,
    });
    report
}

/// The GitRepository `--finish` works on: `ns/name`, its API and the connection.
struct Finishing<'a> {
    conn: &'a Connection,
    api: Api<GitRepository>,
    ns: &'a str,
    name: &'a str,
}

impl Finishing<'_> {
    /// GET the GitRepository.
    async fn get(&self) -> Result<GitRepository> {
        let (conn, api, ns, name) = (self.conn, &self.api, self.ns, self.name);
        api.get(name).await.api_context(|| {
            conn.ctx()
                .verb("get")
                .resource_of::<GitRepository>()
                .namespace(Some(ns))
                .name(name)
        })
    }

    /// The root as the preflight finds it: by the owner labels, else by a Kustomization whose
    /// inventory lists this object (the labels can be missing while a root still applies
    /// it): `(name, namespace)`. Every Kustomization is listed into `all` once, and only
    /// when the labels do not name the root.
    async fn root_of(
        &self,
        repo: &GitRepository,
        all: &mut Option<Vec<cluster_loop::flux::Kustomization>>,
    ) -> Result<Option<(String, String)>> {
        let (ns, name) = (self.ns, self.name);
        let labels = repo.metadata.labels.clone().unwrap_or_default();
        let by_label = match (
            labels.get(OWNER_NAME_LABEL),
            labels.get(OWNER_NAMESPACE_LABEL),
        ) {
            (Some(n), Some(r)) => Some((n.clone(), r.clone())),
            _ => None,
        };
        Ok(match by_label {
            Some(r) => Some(r),
            None => {
                let items = all.insert(self.list_all().await?);
                crate::preflight::root_by_inventory(items, ns, name).map(|k| {
                    (
                        k.metadata.name.clone().unwrap_or_default(),
                        k.metadata.namespace.clone().unwrap_or_default(),
                    )
                })
            }
        })
    }

    /// Every Kustomization.
    async fn list_all(&self) -> Result<Vec<cluster_loop::flux::Kustomization>> {
        let conn = self.conn;
        let all_ks: Api<cluster_loop::flux::Kustomization> = Api::all(conn.client.clone());
        all_ks
            .list(&kube::api::ListParams::default())
            .await
            .map(|l| l.items)
            .api_context(|| {
                conn.ctx()
                    .verb("list")
                    .resource_of::<cluster_loop::flux::Kustomization>()
                    .namespace(None::<String>)
            })
    }

    /// No root Kustomization applies the GitRepository: one of its source that applies
    /// nothing yet may be the root (not verified, the hold stays); else nothing reverts the
    /// live spec.url, nothing can be verified, and the hold is removed.
    async fn no_root(
        &self,
        repo: &GitRepository,
        mut all: Option<Vec<cluster_loop::flux::Kustomization>>,
        mut report: FinishReport,
    ) -> Result<FinishReport> {
        let (conn, api, ns, name) = (self.conn, &self.api, self.ns, self.name);
        let live_url = &report.live_url.clone();
        let items = match all.take() {
            Some(items) => items,
            None => self.list_all().await?,
        };
        let failing = unapplied_consumers(&items, ns, name);
        if !failing.is_empty() {
            report.notes.push(format!(
                "no Kustomization has applied GitRepository {ns}/{name} (no {OWNER_NAME_LABEL} \
             label, in no status.inventory), but {} of this source {} not applying now: if \
             its path defines this GitRepository (the preflight then names it as the root), \
             its first successful run applies the committed spec.url over the live one \
             ({live_url}). Not verified{}: fix that Kustomization, then run --finish again",
                failing.join("; "),
                if failing.len() == 1 { "is" } else { "are" },
                if crate::preflight::is_held(repo) {
                    "; the hold stays"
                } else {
                    ""
                }
            ));
            return Ok(report);
        }
        // Nothing to compare the live URL with: no committed spec.url is applied, so this is
        // not verified (exit 1). The hold only stops a root Kustomization; without one it
        // protects nothing, so it is removed.
        report.notes.push(format!(
            "GitRepository {ns}/{name} has no {OWNER_NAME_LABEL} label and no Kustomization \
         lists it in status.inventory: no root Kustomization applies it, so nothing in the \
         cluster reverts the live spec.url ({live_url})"
        ));
        report.notes.push(
            "cannot verify the committed spec.url: no Kustomization applies this object, so \
         there is no applied revision to render; if it is authored in Git, check that file \
         by hand (if it was created with kubectl or flux create, the live object is all \
         there is)"
                .to_string(),
        );
        report.hold_removed = remove_hold(conn, api, repo).await?;
        Ok(report)
    }

    /// Not fetched yet is not "not committed": when the branch at the live URL is ahead of
    /// the source's artifact (the authored change was just pushed), ask source-controller to
    /// fetch now (reconcile.fluxcd.io/requestedAt, as `flux reconcile source git` does) and
    /// wait for that commit within --timeout before judging. The GitRepository to judge, or
    /// why it is still mid-reconcile at the deadline.
    async fn fetch_pushed(
        &self,
        cx: &SettleCtx<'_>,
        repo: GitRepository,
        branch: &str,
        repo_what: &str,
    ) -> Result<std::result::Result<GitRepository, String>> {
        let (conn, api, ns, name) = (self.conn, &self.api, self.ns, self.name);
        let (timeout, deadline, progress) = (cx.timeout, cx.deadline, cx.progress);
        let live_url = repo.spec.url.clone();
        // Best effort: an unreadable Secret is reported where the tree is fetched below.
        let creds = match &repo.spec.secret_ref {
            Some(s) => read_credentials(conn, ns, &s.name).await.ok(),
            None => Some(Default::default()),
        };
        let head_now = creds
            .and_then(|c| GitRunner::new(c).ok())
            .and_then(|r| r.remote_head(&live_url, branch).ok());
        let mut repo = repo;
        if let Some(head) = head_now {
            let (_, sha) = split_revision(&artifact_revision(&repo));
            if head != sha {
                let short = |c: &str| c[..c.len().min(12)].to_string();
                progress.println(format!(
                    "{repo_what} is at {} but {branch} at {live_url} is at {}: requesting a source \
                 reconcile and waiting up to {} (--timeout) for it to fetch that commit",
                    short(&sha),
                    short(&head),
                    cluster_loop::duration::format_go_duration(timeout)
                ));
                let pp = PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                };
                let now = jiff::Timestamp::now().to_string();
                let patch =
                    json!({ "metadata": { "annotations": { RECONCILE_REQUESTED_AT: now } } });
                api.patch(name, &pp, &Patch::Merge(&patch))
                    .await
                    .api_context(|| {
                        conn.ctx()
                            .verb("patch")
                            .resource_of::<GitRepository>()
                            .namespace(Some(ns))
                            .name(name)
                    })?;
                let out = wait_for(
                    api,
                    name,
                    |o: Option<&GitRepository>| {
                        o.is_none_or(|o| split_revision(&artifact_revision(o)).1 == head)
                    },
                    deadline,
                    progress,
                    conn.ctx()
                        .resource_of::<GitRepository>()
                        .namespace(Some(ns)),
                )
                .await?;
                let last = out.object.clone();
                if out.timed_out {
                    let why = format!(
                        "it has not fetched {} ({branch} at {live_url}) yet; its Ready condition: {}",
                        short(&head),
                        last.as_ref()
                            .and_then(|o| o.ready())
                            .map(|c| format!("{} {}", c.status, c.message.as_deref().unwrap_or("")))
                            .unwrap_or_else(|| "none".into())
                    );
                    return Ok(Err(why));
                }
                repo = last.ok_or_else(|| {
                    Error::Cluster(format!(
                        "{repo_what} was deleted while --finish waited for it"
                    ))
                })?;
            }
        }
        Ok(Ok(repo))
    }

    /// Judges the settled pair: the root applied the source's revision, whose rendered
    /// spec.url (from the live URL) is the live one; then the hold is removed.
    async fn judge(
        &self,
        repo: GitRepository,
        root: cluster_loop::flux::Kustomization,
        (root_name, root_ns): (&str, &str),
        branch: &str,
        mut report: FinishReport,
    ) -> Result<FinishReport> {
        let (conn, api, ns, name) = (self.conn, &self.api, self.ns, self.name);
        let live_url = repo.spec.url.clone();
        report.live_url = live_url.clone();
        let source_rev = artifact_revision(&repo);
        let applied = root.status.last_applied_revision.clone();
        report.root_revision = applied.clone();
        if let Some(note) = root_not_judgeable(&root, ns, name, &source_rev) {
            report.notes.push(note);
            return Ok(report);
        }
        // Render the root path at the applied revision, from the live (new) URL.
        let (_, sha) = split_revision(&source_rev);
        let creds = match &repo.spec.secret_ref {
            Some(s) => read_credentials(conn, ns, &s.name).await?,
            None => Default::default(),
        };
        let runner = GitRunner::new(creds)
            .map_err(|e| Error::Other(format!("cannot prepare a private git home: {e}")))?;
        let scratch = Scratch::new(&runner, None).map_err(Error::Other)?;
        if let Err(f) = runner.fetch_branch(scratch.path(), &live_url, branch, "live") {
            let label = repo
                .spec
                .secret_ref
                .as_ref()
                .map(|s| format!("{ns}/{}", s.name));
            report.notes.push(f.explain_sent(
                &live_url,
                label.as_deref(),
                runner.credentials().has_auth(),
            ));
            return Ok(report);
        }
        let tree = tempfile::tempdir().map_err(|e| Error::Other(e.to_string()))?;
        if let Err(e) = scratch.export_tree(&runner, &sha, tree.path()) {
            report
                .notes
                .push(format!("cannot read the tree at {sha}: {e}"));
            return Ok(report);
        }
        let path = root.spec.path.clone().unwrap_or_else(|| "./".into());
        match authored::find_authored_url(tree.path(), &path, ns, name) {
            Ok(a) => {
                report.authored_at = a
                    .locations
                    .first()
                    .map(|l| format!("{}:{}", l.file, l.line));
                report.authored_url = Some(a.url.clone());
                if a.url != live_url {
                    report.notes.push(format!(
                        "the committed spec.url at {} is {} but the live one is {}: the root \
                 Kustomization would revert it; land the authored change first",
                        report.authored_at.as_deref().unwrap_or("?"),
                        a.url,
                        live_url
                    ));
                    return Ok(report);
                }
            }
            Err(e) => {
                report.notes.push(e.to_string());
                return Ok(report);
            }
        }
        report.notes.push(format!(
    "root Kustomization {root_ns}/{root_name} applied {source_rev}, whose rendered spec.url \
     is the live {live_url}"
));
        report.hold_removed = remove_hold(conn, api, &repo).await?;
        report.verified = true;
        Ok(report)
    }
}

/// `status.artifact.revision` (`branch@sha1:...`), or `""` when there is no artifact.
fn artifact_revision(repo: &GitRepository) -> String {
    repo.status
        .artifact
        .as_ref()
        .map(|a| a.revision.clone())
        .unwrap_or_default()
}

/// Kustomizations whose sourceRef is GitRepository `ns/name` and that are not known to apply
/// it now: applied nothing yet (no `status.lastAppliedRevision`), last run failed
/// (`Ready=False`), or mid-run (`Ready=Unknown`: kustomize-controller v1 marks a run in
/// progress so, and a failing Kustomization retried every `retryInterval` is often caught
/// there), as `Kustomization NS/NAME (why)`. A root that has not applied its own source
/// object yet is among them: kustomize-controller applies nothing from a failed run.
pub fn unapplied_consumers(
    all: &[cluster_loop::flux::Kustomization],
    ns: &str,
    name: &str,
) -> Vec<String> {
    all.iter()
        .filter(|k| {
            let r = &k.spec.source_ref;
            r.kind == "GitRepository"
                && r.name == name
                && r.namespace.as_deref().or(k.metadata.namespace.as_deref()) == Some(ns)
        })
        .filter_map(|k| {
            let ready = k.ready();
            // One that has applied a revision, and whose inventory does not list this object
            // (the caller found no root by inventory), does not apply it; while it waits on
            // its dependsOn (DependencyNotReady: the ordering, not a failure) or is mid-run
            // it applies the same path again (s7 trial D: waves waiting on a dependency were
            // told to be fixed). A failed run may be of a new revision whose path now defines
            // it: still listed.
            let applied = k.status.last_applied_revision.is_some();
            let why = match ready {
                Some(c) if c.is_true() && applied => {
                    return None;
                }
                Some(c) if c.is_false() && c.reason() == "DependencyNotReady" && applied => {
                    return None;
                }
                Some(c) if c.is_false() => {
                    format!("its last run failed: {}: {}", c.reason(), c.message())
                }
                _ if k.status.last_applied_revision.is_none() => {
                    "it has applied no revision yet".to_string()
                }
                // Mid-run (Ready=Unknown while kustomize-controller works on it; a failing
                // one retried every retryInterval spends part of its time here).
                Some(_) if applied => return None,
                Some(c) => format!(
                    "a run is in progress: Ready={} {}: {}",
                    c.status,
                    c.reason(),
                    c.message()
                ),
                None => "it has no Ready condition yet".to_string(),
            };
            Some(format!(
                "Kustomization {}/{} ({why})",
                k.metadata.namespace.as_deref().unwrap_or_default(),
                k.metadata.name.as_deref().unwrap_or_default(),
            ))
        })
        .collect()
}

/// "the cutover to TO (proven at AT) was reverted: spec.url is FROM again, written by M":
/// what undid it and how to land it for good.
fn reverted_message(ns: &str, name: &str, repo: &GitRepository, r: &CutOverRecord) -> String {
    let by = crate::preflight::url_field_manager(repo)
        .map(|m| format!(", written by {m}"))
        .unwrap_or_default();
    format!(
        "the cutover to {} (proven at {}) was reverted: spec.url is {} again{by} (the root \
         Kustomization applies the committed URL, or someone rolled it back). Commit {} where \
         the root renders spec.url, then cut over again: kubectl cutover gitrepository/{name} \
         -n {ns} --to {} (--hold-root keeps the root from reverting it until --finish)",
        r.to, r.at, r.from, r.to, r.to
    )
}

async fn remove_hold(
    conn: &Connection,
    api: &Api<GitRepository>,
    repo: &GitRepository,
) -> Result<bool> {
    let held = repo
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECONCILE_ANNOTATION))
        .is_some_and(|v| v == "disabled");
    let recorded = CutOverRecord::of(repo).is_some();
    if !held && !recorded {
        return Ok(false);
    }
    let name = repo.metadata.name.clone().unwrap_or_default();
    // The cutover record goes with the hold: verified, it has done its job (a later URL
    // change in Git must not read as a revert of it).
    let mut annotations = serde_json::Map::new();
    if held {
        annotations.insert(RECONCILE_ANNOTATION.into(), Value::Null);
    }
    if recorded {
        annotations.insert(CUT_OVER_ANNOTATION.into(), Value::Null);
    }
    let patch = json!({ "metadata": { "annotations": annotations } });
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    api.patch(&name, &pp, &Patch::Merge(&patch))
        .await
        .api_context(|| {
            conn.ctx()
                .verb("patch")
                .resource_of::<GitRepository>()
                .namespace(repo.metadata.namespace.clone())
                .name(name.clone())
        })?;
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::{Current, Preflight};

    /// s7 trial D: `--finish` with no root told the user to fix waves that were only waiting
    /// on a dependency or mid-run. Those that have applied a revision are not listed; one
    /// that never applied, or whose last run failed, is.
    #[test]
    fn unapplied_consumers_leave_out_waves_that_applied_and_only_wait_or_run() {
        let ks = |name: &str, ready: serde_json::Value, applied: bool| {
            let mut status = serde_json::json!({"conditions": [ready]});
            if applied {
                status["lastAppliedRevision"] = serde_json::json!("main@sha1:abc");
            }
            serde_json::from_value::<cluster_loop::flux::Kustomization>(serde_json::json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": name, "namespace": "flux-system"},
                "spec": {"interval": "10m", "path": "./", "prune": true,
                    "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
                "status": status}))
            .unwrap()
        };
        let cond = |status: &str, reason: &str| {
            serde_json::json!({"type": "Ready", "status": status, "reason": reason,
                "message": "m", "lastTransitionTime": "2026-12-02T01:00:00Z"})
        };
        let all = vec![
            ks("waiting", cond("False", "DependencyNotReady"), true),
            ks("running", cond("Unknown", "Progressing"), true),
            ks("ready", cond("True", "ReconciliationSucceeded"), true),
            ks("failed", cond("False", "BuildFailed"), true),
            ks("never", cond("False", "DependencyNotReady"), false),
            ks("first-run", cond("Unknown", "Progressing"), false),
        ];
        let got = unapplied_consumers(&all, "flux-system", "flux-system");
        let names: Vec<&str> = got
            .iter()
            .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
            .collect();
        assert_eq!(
            names,
            [
                "flux-system/failed",
                "flux-system/never",
                "flux-system/first-run"
            ],
            "{got:#?}"
        );
    }

    fn pre(secret: Option<&str>) -> Preflight {
        Preflight {
            source: "flux-system/flux-system".into(),
            to: "https://new/x.git".into(),
            secret: secret.map(str::to_string),
            current: Current {
                url: "https://old/x.git".into(),
                branch: "main".into(),
                secret_ref: Some("flux-system".into()),
                revision: "main@sha1:abc".into(),
                commit: "abc".into(),
                consumers: vec![],
                root: None,
                root_found_by: None,
                held: false,
                hold_origin: None,
                url_manager: None,
            },
            new_head: None,
            in_cluster: None,
            relation: None,
            authored: None,
            authored_patch: vec![],
            checks: vec![],
            go: true,
            nothing_to_do: false,
            interrupted_run: None,
            interrupted: false,
        }
    }

    fn repo(v: Value) -> GitRepository {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn forward_and_rollback_touch_only_their_fields() {
        let f = forward_patch(&pre(Some("new-creds")), true, "2026-01-01T00:00:00Z");
        assert_eq!(
            f,
            json!({"metadata": {"annotations": {
                "reconcile.fluxcd.io/requestedAt": "2026-01-01T00:00:00Z",
                "cutover.cluster-loop.dev/in-flight": "{\"from\":\"https://old/x.git\",\"to\":\"https://new/x.git\",\"fromSecretRef\":\"flux-system\",\"startedAt\":\"2026-01-01T00:00:00Z\"}",
                "kustomize.toolkit.fluxcd.io/reconcile": "disabled"}},
                "spec": {"url": "https://new/x.git", "secretRef": {"name": "new-creds"}}})
        );
        let before = repo(
            json!({"metadata": {"name": "flux-system", "namespace": "flux-system"},
            "spec": {"url": "https://old/x.git", "secretRef": {"name": "flux-system"}}}),
        );
        assert_eq!(
            rollback_patch(&before, &f),
            json!({"spec": {"url": "https://old/x.git", "secretRef": {"name": "flux-system"}},
                   "metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/reconcile": null,
                       "cutover.cluster-loop.dev/in-flight": null}}})
        );
        let f2 = forward_patch(&pre(Some("flux-system")), false, "t");
        assert!(f2.pointer("/spec/secretRef").is_none());
        assert_eq!(
            rollback_patch(&before, &f2),
            json!({"spec": {"url": "https://old/x.git"},
                   "metadata": {"annotations": {"cutover.cluster-loop.dev/in-flight": null}}})
        );
    }

    /// Issue 19 item 8: a rollback for lack of proof says what was missing, and never reads
    /// like success (the old fetch's Ready=True is named as the old fetch's).
    #[test]
    fn a_stopped_controller_gets_the_lever_its_reason_calls_for() {
        assert_eq!(
            start_command("kustomize-controller", "0 replicas"),
            "kubectl -n flux-system scale deployment/kustomize-controller --replicas=1"
        );
        // Replicas wanted but no ready pod: scaling to 1 changes nothing.
        assert_eq!(
            start_command("source-controller", "no ready pod, 0 of 1 ready"),
            "kubectl -n flux-system describe deployment/source-controller"
        );
        let c = StoppedController {
            controller: "kustomize-controller".into(),
            namespace: "flux-system".into(),
            why: "no ready pod, 0 of 1 ready".into(),
            consequence: "nothing applies the root Kustomization".into(),
            command: start_command("kustomize-controller", "no ready pod, 0 of 1 ready"),
            pod: None,
            leader: None,
        };
        assert_eq!(
            finish_stopped_note(&c),
            "kustomize-controller in flux-system is not running (no ready pod, 0 of 1 ready): \
             nothing applies the root Kustomization until it runs, so --finish cannot verify and \
             does not wait; nothing changed. Start it (kubectl -n flux-system describe \
             deployment/kustomize-controller), then run --finish again"
        );
    }

    #[test]
    fn no_proof_says_what_was_missing() {
        let ready = json!([{"type": "Ready", "status": "True", "reason": "Succeeded",
            "message": "stored artifact for revision 'main@sha1:abc'",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        let obj = |generation: i64, observed: i64, suspend: bool, conditions: &Value| {
            repo(
                json!({"metadata": {"name": "flux-system", "generation": generation},
                "spec": {"url": "https://new/x.git", "suspend": suspend},
                "status": {"observedGeneration": observed,
                    "artifact": {"revision": "main@sha1:abc"}, "conditions": conditions}}),
            )
        };
        let t = Duration::from_secs(8);
        let m = no_proof_message(Some(&obj(2, 1, false, &ready)), &pre(None), t, None);
        assert_eq!(
            m,
            "no proof within 8s: no fetch of the new spec ended (status.observedGeneration 1 < \
             generation 2): either https://new/x.git did not answer in time, or \
             source-controller never got to it (hung, or busy with other objects: kubectl -n \
             flux-system logs deployment/source-controller); the artifact (main@sha1:abc) is \
             still from the old URL's fetch (https://old/x.git), and the last condition, \
             Ready=True Succeeded: stored artifact for revision 'main@sha1:abc', describes that \
             old fetch"
        );
        // Session 6 trial (D): with source-controller scaled to 0 nothing fetched, so the new
        // URL is not blamed; the stopped controller and its lever are named.
        let m = no_proof_message(
            Some(&obj(9, 6, false, &ready)),
            &pre(None),
            t,
            Some("0 replicas"),
        );
        assert_eq!(
            m,
            "no proof within 8s: source-controller in flux-system is not running (0 replicas), \
             so nothing fetched: https://new/x.git was never asked (status.observedGeneration 6 \
             < generation 9) and the artifact (main@sha1:abc) is still from the old URL's fetch \
             (https://old/x.git). Start it (kubectl -n flux-system scale \
             deployment/source-controller --replicas=1), then run the cutover again"
        );
        assert!(!m.contains("never answered"), "{m}");
        let m = no_proof_message(Some(&obj(2, 1, true, &ready)), &pre(None), t, None);
        assert!(
            m.starts_with(
                "no proof within 8s: the GitRepository was suspended during the run \
                 (spec.suspend: true), so source-controller never fetched https://new/x.git"
            ),
            "{m}"
        );
        let progressing = json!([{"type": "Ready", "status": "Unknown", "reason": "Progressing",
            "message": "building artifact", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
        let m = no_proof_message(Some(&obj(2, 2, false, &progressing)), &pre(None), t, None);
        assert!(
            m.starts_with(
                "no proof within 8s: source-controller handled the new spec but reported \
                 neither Ready=True at main@sha1:abc from https://new/x.git nor a fetch failure"
            ),
            "{m}"
        );
        assert!(
            m.contains("Ready=Unknown Progressing: building artifact"),
            "{m}"
        );
        assert_eq!(
            no_proof_message(None, &pre(None), t, None),
            "no proof within 8s: the GitRepository could not be read"
        );
    }

    /// A settled root that cannot be compared says why, and never "wait" for a failure.
    #[test]
    fn a_failed_or_foreign_root_is_not_judged_and_not_waited_for() {
        let root = |source: Value, ready: &str, applied: &str| {
            ks(
                json!({"metadata": {"name": "flux-system", "namespace": "flux-system",
                    "generation": 1},
                "spec": {"interval": "10m", "path": "./clusters/prod", "prune": true,
                    "sourceRef": source},
                "status": {"observedGeneration": 1, "lastAppliedRevision": applied,
                    "conditions": [cond("Ready", ready, if ready == "True" {
                        "ReconciliationSucceeded" } else { "BuildFailed" },
                        "kustomize build failed: missing.yaml: no such file", Some(1))]}}),
            )
        };
        let ours = json!({"kind": "GitRepository", "name": "flux-system"});
        let (old, new) = ("main@sha1:aaa", "main@sha1:bbb");
        let m = root_not_judgeable(
            &root(ours.clone(), "False", old),
            "flux-system",
            "flux-system",
            new,
        )
        .unwrap();
        assert_eq!(
            m,
            "root Kustomization flux-system/flux-system is not Ready (Ready=False BuildFailed: \
             kustomize build failed: missing.yaml: no such file): it failed at the source's \
             revision main@sha1:bbb and still runs main@sha1:aaa; waiting does not fix that \
             (each retry fails the same way): fix what the condition says, then run --finish \
             again"
        );
        let m = root_not_judgeable(
            &root(ours.clone(), "False", new),
            "flux-system",
            "flux-system",
            new,
        )
        .unwrap();
        assert!(
            m.contains(
                "it applied main@sha1:bbb, the source's revision, but its run did \
            not succeed"
            ),
            "{m}"
        );
        let other = json!({"kind": "GitRepository", "name": "platform", "namespace": "infra"});
        let m = root_not_judgeable(
            &root(other, "True", "main@sha1:ccc"),
            "flux-system",
            "flux-system",
            new,
        )
        .unwrap();
        assert!(
            m.starts_with(
                "root Kustomization flux-system/flux-system applies \
            GitRepository flux-system/flux-system from another source (GitRepository \
            infra/platform)"
            ),
            "{m}"
        );
        assert_eq!(
            root_not_judgeable(
                &root(ours.clone(), "True", new),
                "flux-system",
                "flux-system",
                new
            ),
            None
        );
        let m = root_not_judgeable(&root(ours, "True", old), "flux-system", "flux-system", new)
            .unwrap();
        assert!(
            m.contains("has applied main@sha1:aaa but the source is at main@sha1:bbb"),
            "{m}"
        );
    }

    fn judge_new(o: &GitRepository, rev: &str) -> Verdict {
        judge(o, "https://new/x.git", rev)
    }

    #[test]
    fn judge_fails_when_the_url_was_reverted() {
        let o = repo(json!({"metadata": {"name": "a", "generation": 3,
                "labels": {"kustomize.toolkit.fluxcd.io/name": "flux-system"}},
            "spec": {"url": "https://old/x.git"},
            "status": {"observedGeneration": 3, "artifact": {"revision": "main@sha1:abc"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded",
                    "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}));
        assert!(matches!(judge(&o, "https://new/x.git", "main@sha1:abc"),
            Verdict::Failed(m) if m.contains("changed back to https://old/x.git by Kustomization flux-system")));
    }

    #[test]
    fn judge_follows_bootstrap_wait_rule() {
        let base = |generation: i64,
                    obs: i64,
                    ready: &str,
                    rev: &str,
                    fetch_failed: bool|
         -> GitRepository {
            let mut conds = vec![json!({"type": "Ready", "status": ready, "reason": "X",
                "message": "authentication required", "lastTransitionTime": "2026-01-01T00:00:00Z"})];
            if fetch_failed {
                conds.push(json!({"type": "FetchFailed", "status": "True", "reason": "AuthenticationFailed",
                    "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
            }
            repo(json!({"metadata": {"name": "a", "generation": generation},
                "spec": {"url": "https://new/x.git"},
                "status": {"observedGeneration": obs, "conditions": conds,
                    "artifact": {"revision": rev}}}))
        };
        assert_eq!(
            judge_new(&base(2, 1, "True", "main@sha1:abc", false), "main@sha1:abc"),
            Verdict::Waiting
        );
        assert_eq!(
            judge_new(&base(2, 2, "True", "main@sha1:abc", false), "main@sha1:abc"),
            Verdict::Proven
        );
        assert!(matches!(
            judge_new(&base(2, 2, "True", "main@sha1:def", false), "main@sha1:abc"),
            Verdict::Failed(_)
        ));
        assert!(
            matches!(judge_new(&base(2, 2, "False", "main@sha1:abc", true), "main@sha1:abc"), Verdict::Failed(m) if m.contains("authentication required"))
        );
        assert_eq!(
            judge_new(
                &base(2, 2, "False", "main@sha1:abc", false),
                "main@sha1:abc"
            ),
            Verdict::Waiting
        );
    }

    fn ks(v: Value) -> cluster_loop::flux::Kustomization {
        serde_json::from_value(v).unwrap()
    }

    fn cond(t: &str, status: &str, reason: &str, message: &str, og: Option<i64>) -> Value {
        let mut c = json!({"type": t, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z"});
        if let Some(g) = og {
            c["observedGeneration"] = json!(g);
        }
        c
    }

    fn root(generation: i64, observed: i64, applied: &str, conds: Vec<Value>) -> Value {
        json!({"metadata": {"name": "flux-system", "namespace": "flux-system",
                "generation": generation},
            "spec": {"interval": "10m", "path": "./clusters/prod",
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
            "status": {"observedGeneration": observed, "lastAppliedRevision": applied,
                "conditions": conds}})
    }

    #[test]
    fn a_run_in_progress_is_mid_reconcile() {
        // kustomize-controller v1 at the start of a run: Ready=Unknown Progressing and
        // Reconciling=True, observedGeneration unchanged.
        let k = ks(root(
            1,
            1,
            "main@sha1:abc",
            vec![
                cond(
                    "Ready",
                    "Unknown",
                    "Progressing",
                    "Reconciliation in progress",
                    Some(1),
                ),
                cond(
                    "Reconciling",
                    "True",
                    "Progressing",
                    "Fetching manifests",
                    Some(1),
                ),
            ],
        ));
        assert_eq!(
            mid_reconcile(&k).as_deref(),
            Some(
                "Ready=Unknown Progressing: Reconciliation in progress; Reconciling=True \
                 Progressing: Fetching manifests"
            )
        );
        assert!(root_unsettled(&k, "flux-system", "flux-system", "main@sha1:abc").is_some());
        // Ready=Unknown alone (no Reconciling) is still a run in progress.
        let k = ks(root(
            1,
            1,
            "main@sha1:abc",
            vec![cond(
                "Ready",
                "Unknown",
                "Progressing",
                "Reconciliation in progress",
                None,
            )],
        ));
        assert_eq!(
            mid_reconcile(&k).as_deref(),
            Some("Ready=Unknown Progressing: Reconciliation in progress")
        );
        // No Ready condition: the controller has not run it yet.
        let k = ks(root(1, 0, "", vec![]));
        assert_eq!(mid_reconcile(&k).as_deref(), Some("no Ready condition yet"));
    }

    #[test]
    fn settled_objects_are_not_mid_reconcile() {
        let ready = cond(
            "Ready",
            "True",
            "ReconciliationSucceeded",
            "Applied revision",
            Some(2),
        );
        let k = ks(root(2, 2, "main@sha1:abc", vec![ready.clone()]));
        assert_eq!(mid_reconcile(&k), None);
        assert_eq!(
            root_unsettled(&k, "flux-system", "flux-system", "main@sha1:abc"),
            None
        );
        // A failed run: Ready=False for this generation, Reconciling=True ProgressingWithRetry,
        // observedGeneration left behind (finalizeStatus records it only on success).
        let k = ks(root(
            3,
            2,
            "main@sha1:abc",
            vec![
                cond("Ready", "False", "HealthCheckFailed", "timeout", Some(3)),
                cond(
                    "Reconciling",
                    "True",
                    "ProgressingWithRetry",
                    "retrying",
                    Some(3),
                ),
            ],
        ));
        assert_eq!(mid_reconcile(&k), None);
        assert_eq!(
            root_unsettled(&k, "flux-system", "flux-system", "main@sha1:abc"),
            None
        );
        // Suspended: no run will come, judge it as it is.
        let mut v = root(
            1,
            1,
            "main@sha1:abc",
            vec![cond("Reconciling", "True", "Progressing", "x", Some(1))],
        );
        v["spec"]["suspend"] = json!(true);
        assert_eq!(mid_reconcile(&ks(v)), None);
    }

    #[test]
    fn an_unobserved_generation_is_mid_reconcile() {
        let k = ks(root(
            3,
            2,
            "main@sha1:abc",
            vec![cond(
                "Ready",
                "True",
                "ReconciliationSucceeded",
                "m",
                Some(2),
            )],
        ));
        assert_eq!(
            mid_reconcile(&k).as_deref(),
            Some("generation 3 not observed yet (observedGeneration 2)")
        );
        // A failure written for an older generation says nothing about the current spec.
        let k = ks(root(
            3,
            2,
            "main@sha1:abc",
            vec![cond("Ready", "False", "BuildFailed", "m", Some(2))],
        ));
        assert!(mid_reconcile(&k).is_some());
        // GitRepository: same rules through FluxObject.
        let o = repo(json!({"metadata": {"name": "a", "generation": 2},
            "spec": {"url": "https://new/x.git"},
            "status": {"observedGeneration": 1, "conditions": [
                cond("Ready", "True", "Succeeded", "stored artifact", Some(1))]}}));
        assert_eq!(
            mid_reconcile(&o).as_deref(),
            Some("generation 2 not observed yet (observedGeneration 1)")
        );
    }

    #[test]
    fn a_root_behind_the_source_is_unsettled_until_it_applies_it() {
        let ready = cond("Ready", "True", "ReconciliationSucceeded", "m", Some(1));
        let k = ks(root(1, 1, "main@sha1:abc", vec![ready]));
        assert_eq!(
            root_unsettled(&k, "flux-system", "flux-system", "main@sha1:def").as_deref(),
            Some("Ready at main@sha1:abc; the source is at main@sha1:def, not applied yet")
        );
        assert_eq!(
            root_unsettled(&k, "flux-system", "flux-system", "main@sha1:abc"),
            None
        );
        // A root that applies this GitRepository from another source: its revision is not
        // this source's, nothing to wait for.
        assert_eq!(
            root_unsettled(&k, "flux-system", "fleet", "main@sha1:def"),
            None
        );
        // A failed root is judged as it is (not verified), not waited for.
        let k = ks(root(
            1,
            1,
            "main@sha1:abc",
            vec![cond("Ready", "False", "BuildFailed", "m", Some(1))],
        ));
        assert_eq!(
            root_unsettled(&k, "flux-system", "flux-system", "main@sha1:def"),
            None
        );
    }
}
