//! Read-only preflight of a cutover: what the cluster runs, what the new remote serves, how
//! they relate, and where the URL is authored. Nothing here changes the cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cluster_loop::cli::Connection;
use cluster_loop::error::{ApiContext, Error, KubeResultExt, Result};
use cluster_loop::flux::{FluxObject, GitRepository, Kustomization};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::ListParams;
use serde::Serialize;

use crate::authored::{self, AuthoredUrl};
use crate::git::{GitCredentials, GitRunner, Relation, RemoteFailure, Scratch};
use crate::incluster::{InCluster, Verify, loopback_reason};
use cluster_loop::probe::GitSecret;
use cluster_loop::signals::{ExitOnSignal, Signals};
use cluster_loop::wait::Progress;

/// Label kustomize-controller puts on every object it applies: the owning Kustomization's name
/// (kustomize-controller internal/controller: `{group}/name` with group
/// `kustomize.toolkit.fluxcd.io`).
pub const OWNER_NAME_LABEL: &str = "kustomize.toolkit.fluxcd.io/name";
/// Label with the owning Kustomization's namespace.
pub const OWNER_NAMESPACE_LABEL: &str = "kustomize.toolkit.fluxcd.io/namespace";
/// Annotation that makes kustomize-controller skip an applied object (v1.1+):
/// `kustomize.toolkit.fluxcd.io/reconcile: disabled`.
pub const RECONCILE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/reconcile";

/// Annotation a cutover puts on the GitRepository in the same merge patch as the new
/// `spec.url`, and removes when the run ends (proven, or rolled back): while it is there a run
/// is in flight, and a run killed with SIGKILL (which cannot roll back) leaves it behind as the
/// record of what it changed. Value: JSON [`InFlight`].
pub const IN_FLIGHT_ANNOTATION: &str = "cutover.cluster-loop.dev/in-flight";

/// Annotation a proven cutover leaves on the GitRepository in place of the in-flight mark, and
/// `--finish` removes once it verified: the record of what the cutover set, so `--finish` can
/// tell a cutover the root Kustomization reverted (live spec.url back at `from`) from one that
/// landed. Written by [`crate::cluster::RECORD_FIELD_MANAGER`], a manager kustomize-controller's
/// apply cleanup does not strip, so the root's reverting run keeps it. Value: JSON
/// [`CutOverRecord`].
pub const CUT_OVER_ANNOTATION: &str = "cutover.cluster-loop.dev/cut-over";

/// The value of [`CUT_OVER_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CutOverRecord {
    /// `spec.url` before the cutover.
    pub from: String,
    /// `spec.url` the cutover set and proved.
    pub to: String,
    /// RFC 3339 time the cutover was proven.
    pub at: String,
}

impl CutOverRecord {
    /// The record on `repo`; `None` when there is none or it does not parse (then nothing is
    /// claimed from it).
    pub fn of(repo: &GitRepository) -> Option<CutOverRecord> {
        let v = repo
            .metadata
            .annotations
            .as_ref()?
            .get(CUT_OVER_ANNOTATION)?;
        serde_json::from_str(v).ok()
    }

    /// Whether `live_url` is the URL this cutover replaced: the cutover was undone (the root
    /// Kustomization applied the old committed URL again, or someone rolled it back). A third
    /// URL claims nothing (Git may have moved on since).
    pub fn reverted(&self, live_url: &str) -> bool {
        self.from == live_url && self.to != live_url
    }
}

/// The value of [`IN_FLIGHT_ANNOTATION`]: the URL before and after, when it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlight {
    /// `spec.url` before the run.
    pub from: String,
    /// `spec.url` the run patched in.
    pub to: String,
    /// `spec.secretRef.name` before the run, when the run changed it (`null`: there was none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_secret_ref: Option<Option<String>>,
    /// RFC 3339 time of the patch.
    pub started_at: String,
}

impl InFlight {
    /// The mark on `repo`, if any. An unparsable value is reported as a mark with empty URLs
    /// (never ignored: something interrupted a cutover).
    pub fn of(repo: &GitRepository) -> Option<InFlight> {
        let v = repo
            .metadata
            .annotations
            .as_ref()?
            .get(IN_FLIGHT_ANNOTATION)?;
        Some(serde_json::from_str(v).unwrap_or(InFlight {
            from: String::new(),
            to: String::new(),
            from_secret_ref: None,
            started_at: String::new(),
        }))
    }

    /// "an interrupted cutover left spec.url at X (was Y): finish or roll back", with the
    /// command for each.
    pub fn message(&self, namespace: &str, name: &str, live_url: &str) -> String {
        let obj = format!("gitrepository/{name} -n {namespace}");
        format!(
            "an interrupted cutover (started {}) left spec.url at {live_url} (was {}): finish \
             or roll back. Finish: kubectl cutover {obj} --to {} (proves Ready at the new URL, \
             rolls back to the old one on failure). Roll back: kubectl cutover {obj} --to {}. \
             Either removes the {IN_FLIGHT_ANNOTATION} annotation when done",
            if self.started_at.is_empty() {
                "at an unknown time"
            } else {
                &self.started_at
            },
            if self.from.is_empty() {
                "unknown"
            } else {
                &self.from
            },
            if self.to.is_empty() {
                live_url
            } else {
                &self.to
            },
            if self.from.is_empty() {
                "OLD-URL"
            } else {
                &self.from
            },
        )
    }
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    /// GitRepository namespace.
    pub namespace: String,
    /// GitRepository name.
    pub name: String,
    /// The new URL (`--to`).
    pub to: String,
    /// `--secret`: the Secret the source should use after the cutover.
    pub secret: Option<String>,
    /// `--repo`: a local clone with the history.
    pub repo: Option<PathBuf>,
    /// `--allow-forward`.
    pub allow_forward: bool,
    /// `--allow-insecure-http`.
    pub allow_insecure_http: bool,
    /// `--allow-loopback`: a loopback `--to` is a warning, not a refusal.
    pub allow_loopback: bool,
    /// `--verify-in-cluster`: the probe image and deadline.
    pub verify_in_cluster: Option<InClusterOptions>,
}

/// `--verify-in-cluster` settings.
#[derive(Debug, Clone)]
pub struct InClusterOptions {
    /// `--probe-image`.
    pub image: String,
    /// `--probe-timeout`.
    pub timeout: std::time::Duration,
}

/// The cluster's current state of the source.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Current {
    /// `spec.url`.
    pub url: String,
    /// The branch: `spec.ref.branch`, else the ref named in the artifact revision (the remote's
    /// default branch when spec.ref is empty), else `main`.
    pub branch: String,
    /// `spec.secretRef.name`.
    pub secret_ref: Option<String>,
    /// `status.artifact.revision`, e.g. `main@sha1:<40 hex>`.
    pub revision: String,
    /// The commit C of that revision.
    pub commit: String,
    /// Kustomizations whose sourceRef is this GitRepository: `ns/name` and lastAppliedRevision.
    pub consumers: Vec<Consumer>,
    /// The Kustomization that applies this GitRepository object: the self-reference. Found by
    /// the object's kustomize.toolkit.fluxcd.io/name and /namespace labels, else by a
    /// Kustomization whose `status.inventory` lists it (kustomize-controller records every
    /// applied object there, `<ns>_<name>_source.toolkit.fluxcd.io_GitRepository`).
    pub root: Option<Consumer>,
    /// How [`Current::root`] was found: `label`, `inventory`, or `path` (no label and in no
    /// inventory, but a Kustomization of this source whose `spec.path` at the commit the
    /// cluster runs defines this GitRepository: it has not applied it yet, typically because
    /// its runs fail, and reverts a live patch at its first successful apply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_found_by: Option<String>,
    /// The field manager that last wrote `spec.url` (metadata.managedFields), e.g.
    /// `kustomize-controller` (the root applied it), `kubectl-cutover` (an earlier cutover
    /// patched it), `kubectl-patch`/`kubectl-edit` (a hand patch). `None` when the server sent
    /// no managedFields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_manager: Option<String>,
    /// The GitRepository carries the hold `kustomize.toolkit.fluxcd.io/reconcile: disabled`
    /// (what `--hold-root` adds): kustomize-controller skips the object, so the root neither
    /// reverts nor applies its spec.url while it is there.
    pub held: bool,
    /// Who left the hold, read from the object ([`hold_origin`]); absent when not held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_origin: Option<HoldOrigin>,
}

/// A Kustomization that reads from the source.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Consumer {
    /// `namespace/name`.
    pub name: String,
    /// `spec.path`.
    pub path: String,
    /// `status.lastAppliedRevision`.
    pub last_applied_revision: Option<String>,
    /// True when it renders from this same GitRepository.
    pub same_source: bool,
    /// `spec.suspend`: kustomize-controller applies nothing while it is set (and so reverts
    /// nothing).
    pub suspended: bool,
    /// Its last run failed: `Reason: message` of its `Ready=False` condition (e.g.
    /// `BuildFailed: ...`, kustomize-controller api/v1 reasons). Such a Kustomization applies
    /// nothing (and so reverts nothing) until a run succeeds. `None` when Ready is True,
    /// Unknown or absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

/// A check of the preflight, shown in order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// Short id: `source`, `transport`, `remote`, `in-cluster`, `history`, `authored`.
    pub id: &'static str,
    /// `ok`, `warn` or `fail`.
    pub result: CheckResult,
    /// What was found, in one or two sentences.
    pub message: String,
}

/// Outcome of a [`Check`].
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CheckResult {
    /// Passed.
    Ok,
    /// Passed with something to act on.
    Warn,
    /// Refuses the cutover.
    Fail,
}

/// The whole preflight: machine output of `--dry-run` and the header of a real run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preflight {
    /// `namespace/name` of the GitRepository.
    pub source: String,
    /// The new URL.
    pub to: String,
    /// Secret the source will use.
    pub secret: Option<String>,
    /// Current state.
    pub current: Current,
    /// The new remote's head for the branch (`None` when it could not be read).
    pub new_head: Option<String>,
    /// `--verify-in-cluster`: the new remote seen from a pod in the source's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_cluster: Option<InCluster>,
    /// How the new head relates to what the cluster runs.
    pub relation: Option<Relation>,
    /// Where spec.url is authored at the commit the cluster runs.
    pub authored: Option<AuthoredUrl>,
    /// The change that makes the authored value the new URL: `(file, unified diff)`.
    pub authored_patch: Vec<FilePatch>,
    /// Checks in order.
    pub checks: Vec<Check>,
    /// True when every check passed (no `fail`).
    pub go: bool,
    /// True when the GitRepository already has `spec.url` == `--to` (and the `--secret`, if
    /// given): there is nothing to do (exit 0), and no patch is planned.
    pub nothing_to_do: bool,
    /// The mark an interrupted earlier cutover left ([`IN_FLIGHT_ANNOTATION`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_run: Option<InFlight>,
    /// The in-cluster probe was interrupted by SIGINT/SIGTERM (it was deleted; nothing
    /// changed): the command exits 130.
    #[serde(skip)]
    pub interrupted: bool,
}

/// A file change in the repository.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FilePatch {
    /// Path relative to the repository root.
    pub file: String,
    /// Unified diff.
    pub diff: String,
    /// The new content (not serialized).
    #[serde(skip)]
    pub new_text: String,
}

impl FilePatch {
    /// The patches of [`authored::authored_change`]'s `(file, old text, new text)` changes,
    /// each with its unified diff.
    pub fn all(changes: Vec<(String, String, String)>) -> Vec<FilePatch> {
        changes
            .into_iter()
            .map(|(file, old, new)| FilePatch {
                diff: authored::unified_diff(&file, &old, &new),
                file,
                new_text: new,
            })
            .collect()
    }
}

/// Splits a Flux Git revision into `(ref, sha)`: `main@sha1:abc` -> (`main`, `abc`),
/// `refs/heads/x@sha1:abc` -> (`refs/heads/x`, `abc`), `sha1:abc` -> (``, `abc`)
/// (source-controller api/v1 `GitRepositoryStatus` revision format).
pub fn split_revision(revision: &str) -> (String, String) {
    let (r, digest) = match revision.rsplit_once('@') {
        Some((r, d)) => (r.to_string(), d),
        None => (String::new(), revision),
    };
    let sha = digest
        .strip_prefix("sha1:")
        .or_else(|| digest.strip_prefix("sha256:"))
        .unwrap_or(digest)
        .to_string();
    (r, sha)
}

/// Reads the Secret `name` in `namespace` into Flux-equivalent Git credentials.
///
/// Errors: API errors (403 names the missing `get secrets` permission; 404 names the Secret).
pub async fn read_credentials(
    conn: &Connection,
    namespace: &str,
    name: &str,
) -> Result<GitCredentials> {
    let api: Api<Secret> = Api::namespaced(conn.client.clone(), namespace);
    let secret = api.get(name).await.api_context(|| {
        conn.ctx()
            .verb("get")
            .resource("", "secrets")
            .namespace(Some(namespace))
            .name(name)
    })?;
    let data: BTreeMap<String, Vec<u8>> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .chain(
            secret
                .string_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes())),
        )
        .collect();
    Ok(GitCredentials::from_secret_data(&data))
}

fn ctx_for(conn: &Connection, verb: &str, ns: &str, name: Option<&str>) -> ApiContext {
    let c = conn
        .ctx()
        .verb(verb)
        .resource_of::<GitRepository>()
        .namespace(Some(ns));
    match name {
        Some(n) => c.name(n),
        None => c,
    }
}

/// The Kustomization whose `status.inventory` lists GitRepository `namespace/name`
/// (kustomize-controller records every applied object there as
/// `<ns>_<name>_source.toolkit.fluxcd.io_GitRepository`): the root when the object lacks the
/// owner labels. `None` when no Kustomization lists it.
pub fn root_by_inventory<'a>(
    all: &'a [Kustomization],
    namespace: &str,
    name: &str,
) -> Option<&'a Kustomization> {
    all.iter().find(|k| {
        k.inventory().into_iter().flatten().any(|o| {
            o.kind == "GitRepository"
                && o.group == "source.toolkit.fluxcd.io"
                && o.name == name
                && o.namespace == namespace
        })
    })
}

/// Reads the cluster side: the GitRepository, its consumers and its root Kustomization.
///
/// Errors: the GitRepository missing (404 with its name), RBAC, or a GitRepository without an
/// artifact (nothing to compare against: the source must be Ready first).
pub async fn read_current(
    conn: &Connection,
    namespace: &str,
    name: &str,
) -> Result<(GitRepository, Current)> {
    let api: Api<GitRepository> = Api::namespaced(conn.client.clone(), namespace);
    let repo = api
        .get(name)
        .await
        .api_context(|| ctx_for(conn, "get", namespace, Some(name)))?;
    let revision = repo
        .status
        .artifact
        .as_ref()
        .map(|a| a.revision.clone())
        .filter(|r| !r.is_empty())
        .ok_or_else(|| {
            Error::Finding(format!(
                "GitRepository {namespace}/{name} has no artifact yet (status.artifact is empty): \
                 the cutover compares against the commit the cluster runs, so the source must \
                 be Ready first (kubectl get gitrepository -n {namespace} {name})"
            ))
        })?;
    let (rev_ref, commit) = split_revision(&revision);
    let branch = repo
        .spec
        .reference
        .as_ref()
        .and_then(|r| r.branch.clone())
        .or_else(|| (!rev_ref.is_empty() && !rev_ref.starts_with("refs/")).then(|| rev_ref.clone()))
        .unwrap_or_else(|| "main".to_string());
    let ks_api: Api<Kustomization> = Api::all(conn.client.clone());
    let all = ks_api.list(&ListParams::default()).await.api_context(|| {
        conn.ctx()
            .verb("list")
            .resource_of::<Kustomization>()
            .namespace(None::<String>)
    })?;
    let is_ours = |k: &Kustomization| {
        let sr = &k.spec.source_ref;
        let ns = sr
            .namespace
            .clone()
            .or_else(|| k.metadata.namespace.clone())
            .unwrap_or_default();
        sr.kind == "GitRepository" && sr.name == name && ns == namespace
    };
    let as_consumer = |k: &Kustomization| Consumer {
        name: format!(
            "{}/{}",
            k.metadata.namespace.as_deref().unwrap_or(""),
            k.metadata.name.as_deref().unwrap_or("")
        ),
        path: k.spec.path.clone().unwrap_or_else(|| "./".into()),
        last_applied_revision: k.status.last_applied_revision.clone(),
        same_source: is_ours(k),
        suspended: k.suspended(),
        last_failure: k
            .ready()
            .filter(|c| c.is_false())
            .map(|c| format!("{}: {}", c.reason(), c.message())),
    };
    let consumers = all
        .items
        .iter()
        .filter(|k| is_ours(k))
        .map(as_consumer)
        .collect();
    let labels = repo.metadata.labels.clone().unwrap_or_default();
    let by_label = match (
        labels.get(OWNER_NAME_LABEL),
        labels.get(OWNER_NAMESPACE_LABEL),
    ) {
        (Some(n), Some(ns)) => all
            .items
            .iter()
            .find(|k| {
                k.metadata.name.as_deref() == Some(n.as_str())
                    && k.metadata.namespace.as_deref() == Some(ns.as_str())
            })
            .map(as_consumer),
        _ => None,
    };
    let by_inventory = || root_by_inventory(&all.items, namespace, name).map(as_consumer);
    let (root, root_found_by) = match by_label {
        Some(r) => (Some(r), Some("label".to_string())),
        None => match by_inventory() {
            Some(r) => (Some(r), Some("inventory".to_string())),
            None => (None, None),
        },
    };
    let current = Current {
        url: repo.spec.url.clone(),
        branch,
        secret_ref: repo.spec.secret_ref.as_ref().map(|s| s.name.clone()),
        revision,
        commit,
        consumers,
        root,
        root_found_by,
        held: is_held(&repo),
        hold_origin: hold_origin(&repo),
        url_manager: url_field_manager(&repo),
    };
    Ok((repo, current))
}

impl Preflight {
    /// The report before anything about the new remote is known: the source, `--to`, the
    /// secret in use, the live spec and the checks so far; no go, nothing to do, no
    /// interrupted run (callers set what they know).
    fn before_the_remote(
        req: &Request,
        secret_name: &Option<String>,
        current: &Current,
        checks: Vec<Check>,
    ) -> Preflight {
        Preflight {
            source: format!("{}/{}", req.namespace, req.name),
            to: req.to.clone(),
            secret: secret_name.clone(),
            current: current.clone(),
            new_head: None,
            in_cluster: None,
            relation: None,
            authored: None,
            authored_patch: vec![],
            checks,
            go: false,
            nothing_to_do: false,
            interrupted_run: None,
            interrupted: false,
        }
    }
}

/// Runs the whole preflight. Never changes the cluster (with `--verify-in-cluster` it creates
/// one probe Job and always deletes it); `--repo` is read only (history is compared in a
/// scratch repository borrowing its objects). `signals` interrupts the in-cluster probe
/// (installed here when `None`).
///
/// Errors: API errors reading the cluster or creating the probe (RBAC: exit 3 with the
/// `kubectl auth can-i` line); remote failures and refusals are [`Check`]s.
pub async fn preflight(
    conn: &Connection,
    req: &Request,
    progress: &Progress,
    signals: Option<&mut Signals>,
) -> Result<(GitRepository, Preflight)> {
    // With the in-cluster probe the caller cannot wrap the whole preflight in
    // exit_on_signal (the probe must delete its Job first): the read-only stretches before and
    // after it exit 130 at once on SIGINT/SIGTERM, even while a request or git hangs.
    const NOTE: &str = "preflight stopped, nothing changed";
    let mut guard = req
        .verify_in_cluster
        .is_some()
        .then(|| ExitOnSignal::start(NOTE));
    let (repo, current) = read_current(conn, &req.namespace, &req.name).await?;
    let secret_name = req.secret.clone().or_else(|| current.secret_ref.clone());
    let mut checks = vec![source_check(req, &repo, &current)];
    // A stopped source-controller fetches nothing: no cutover can be proven, and a run would
    // only roll back at --timeout blaming nobody in particular (session 6 trial, D). Refused
    // before any write, with the lever. A stopped kustomize-controller reverts nothing and
    // applies nothing: said, not refused (--hold-root and the authored change still work).
    // --to the live URL (same secret, no interrupted run): nothing to patch, so nothing is
    // refused; what would refuse a move is said as a warning, with the same lever, and the
    // JSON says what the text says (warn, exit 0).
    let no_op = InFlight::of(&repo).is_none()
        && current.url == req.to
        && req
            .secret
            .as_ref()
            .is_none_or(|s| current.secret_ref.as_ref() == Some(s));
    checks.extend(state_checks(conn, req, &repo, &current, no_op).await);
    let in_flight = InFlight::of(&repo);
    if let Some(m) = &in_flight {
        // Finishing (--to the URL it patched in) or rolling back (--to the URL it replaced) is
        // what the message offers; anything else is refused until one of them is done.
        let offered = req.to == m.to || (!m.from.is_empty() && req.to == m.from);
        checks.push(Check {
            id: "interrupted",
            result: if offered {
                CheckResult::Warn
            } else {
                CheckResult::Fail
            },
            message: m.message(&req.namespace, &req.name, &current.url),
        });
        if !offered {
            let pre = Preflight {
                interrupted_run: in_flight,
                ..Preflight::before_the_remote(req, &secret_name, &current, checks)
            };
            return Ok((repo, finish(pre)));
        }
    } else if no_op {
        let pre = nothing_to_do(conn, req, &secret_name, &current, checks).await;
        return Ok((repo, pre));
    }

    let creds = match &secret_name {
        Some(s) => read_credentials(conn, &req.namespace, s).await?,
        None => GitCredentials::default(),
    };
    let secret_label = secret_name
        .as_ref()
        .map(|s| format!("{}/{}", req.namespace, s));

    let refused_early = address_checks(req, &creds, secret_label.as_deref(), &mut checks).await;

    let mut pre = Preflight {
        interrupted_run: in_flight,
        ..Preflight::before_the_remote(req, &secret_name, &current, checks)
    };
    if refused_early {
        // Refused before the new server is contacted; drift is about the cluster and the old
        // server, so it is still said first.
        say_drift_first(conn, req, &mut pre, &secret_name, &creds).await;
        return Ok((repo, finish(pre)));
    }

    let runner = GitRunner::new(creds)
        .map_err(|e| Error::Other(format!("cannot prepare a private git home: {e}")))?;
    let remote = runner.remote_head(&req.to, &current.branch);
    remote_check(&mut pre, req, &runner, &remote, secret_label.as_deref());
    if let Some(o) = &req.verify_in_cluster {
        let v = verify_request(req, o, &pre.current, secret_name.as_ref(), &runner);
        let mut own = None;
        let signals = match signals {
            Some(s) => s,
            None => own.insert(Signals::install()),
        };
        // The probe handles signals itself (deletes its Job, then reports `interrupted`).
        drop(guard.take());
        let probed = crate::incluster::verify(conn, &v, progress, signals).await?;
        guard.replace(ExitOnSignal::start(NOTE));
        match probed {
            None => {
                pre.interrupted = true;
                return Ok((repo, finish(pre)));
            }
            Some((ic, verdict)) => {
                let (result, message) = match verdict {
                    Ok(m) => (CheckResult::Ok, m),
                    Err(m) => (CheckResult::Fail, m),
                };
                pre.in_cluster = Some(ic);
                pre.checks.push(Check {
                    id: "in-cluster",
                    result,
                    message,
                });
            }
        }
    }
    let Ok(head) = remote else {
        // The new server cannot be read, but drift is about the cluster and the old server:
        // still say it first.
        let creds = runner.credentials().clone();
        say_drift_first(conn, req, &mut pre, &secret_name, &creds).await;
        return Ok((repo, finish(pre)));
    };

    let (scratch, relation) = history(
        conn,
        req,
        &runner,
        &current,
        &secret_name,
        secret_label.as_deref(),
        &head,
    )
    .await?;
    history_check(&mut pre, req, &head, relation);

    // Authored value at C.
    let authored = authored_check(&mut pre, &scratch, &runner, req);
    pre.checks.push(authored);
    Ok((repo, finish(pre)))
}

/// What `--verify-in-cluster` (`o`) probes from a pod in the source's namespace: `--to` at the
/// branch and commit the cluster runs, with the secret in use.
fn verify_request(
    req: &Request,
    o: &InClusterOptions,
    current: &Current,
    secret_name: Option<&String>,
    runner: &GitRunner,
) -> Verify {
    Verify {
        namespace: req.namespace.clone(),
        url: req.to.clone(),
        branch: current.branch.clone(),
        commit: current.commit.clone(),
        secret: secret_name.map(|name| GitSecret {
            name: name.clone(),
            keys: runner.credentials().keys.clone(),
        }),
        image: o.image.clone(),
        timeout: o.timeout,
        owner: cluster_loop::probe::ProbeOwner::CUTOVER,
    }
}

/// `source`: the GitRepository as it runs now (a warning when it is not Ready).
fn source_check(req: &Request, repo: &GitRepository, current: &Current) -> Check {
    Check {
        id: "source",
        result: if repo.ready().is_some_and(|c| c.is_true()) {
            CheckResult::Ok
        } else {
            CheckResult::Warn
        },
        message: format!(
            "{} runs {} from {}{}",
            req.name,
            current.revision,
            current.url,
            if repo.ready().is_some_and(|c| c.is_true()) {
                String::new()
            } else {
                " (the source is not Ready now: the cutover compares against its last artifact)"
                    .into()
            }
        ),
    }
}

/// The state of the source and of what applies it: a stopped controller (`controller`), a
/// suspended source or root (`source-suspended`, `root-suspended`), a URL the root holds
/// (`hold`). `no_op`: `--to` is the live URL, so what would refuse a move is only a warning.
async fn state_checks(
    conn: &Connection,
    req: &Request,
    repo: &GitRepository,
    current: &Current,
    no_op: bool,
) -> Vec<Check> {
    let mut checks = vec![];
    if let Some(why) = crate::cluster::controller_not_running(conn, "source-controller").await {
        checks.push(if no_op {
            Check {
                id: "controller",
                result: CheckResult::Warn,
                message: source_controller_stopped_no_op_message(&req.namespace, &req.name, &why),
            }
        } else {
            Check {
                id: "controller",
                result: CheckResult::Fail,
                message: source_controller_stopped_message(&req.namespace, &req.name, &why),
            }
        });
    }
    if let Some(why) = crate::cluster::controller_not_running(conn, "kustomize-controller").await {
        checks.push(Check {
            id: "controller",
            result: CheckResult::Warn,
            message: kustomize_controller_stopped_message(&why),
        });
    }
    if repo.suspended() {
        checks.push(Check {
            id: "source-suspended",
            result: if no_op {
                CheckResult::Warn
            } else {
                CheckResult::Fail
            },
            message: if no_op {
                format!(
                    "GitRepository {0}/{1} is suspended (spec.suspend: true): source-controller \
                     fetches nothing while it is; no patch is needed here, but resume it to \
                     fetch again (flux resume source git {1} -n {0})",
                    req.namespace, req.name
                )
            } else {
                suspended_source_message(&req.namespace, &req.name)
            },
        });
    }
    if let Some(root) = current.root.as_ref().filter(|r| r.suspended) {
        checks.push(Check {
            id: "root-suspended",
            result: CheckResult::Warn,
            message: suspended_root_message(&root.name),
        });
    }
    if let Some(origin) = &current.hold_origin {
        checks.push(Check {
            id: "hold",
            result: CheckResult::Warn,
            message: hold_message(&req.namespace, &req.name, origin),
        });
    }
    checks
}

/// `--to` the live URL (same secret, no interrupted run): nothing to patch, unless the live
/// URL is a patch the root reverts at its next apply (drift).
async fn nothing_to_do(
    conn: &Connection,
    req: &Request,
    secret_name: &Option<String>,
    current: &Current,
    mut checks: Vec<Check>,
) -> Preflight {
    checks.push(Check {
        id: "target",
        result: CheckResult::Ok,
        message: format!(
            "spec.url of {}/{} is already {}: it already points there; nothing to do",
            req.namespace, req.name, req.to
        ),
    });
    let mut pre = Preflight {
        go: true,
        nothing_to_do: true,
        ..Preflight::before_the_remote(req, secret_name, current, checks)
    };
    // The live URL may be a patch the root reverts at its next apply: nothing to patch,
    // but not "nothing to do" (best effort: an unreadable Secret or tree says nothing).
    let creds = match &secret_name {
        Some(s) => read_credentials(conn, &req.namespace, s)
            .await
            .unwrap_or_default(),
        None => GitCredentials::default(),
    };
    say_drift_first(conn, req, &mut pre, secret_name, &creds).await;
    if pre.checks.iter().any(|c| c.id == "drift")
        && let Some(t) = pre.checks.iter_mut().find(|c| c.id == "target")
    {
        t.result = CheckResult::Warn;
        t.message = format!(
            "spec.url of {}/{} is already {} live, but not in Git (the drift above): no \
             patch to make; the commit must change",
            req.namespace, req.name, req.to
        );
    }
    pre
}

/// `transport` and `loopback`: how `--to` is reached, checked before contacting it. True when
/// either refuses the cutover.
async fn address_checks(
    req: &Request,
    creds: &GitCredentials,
    secret_label: Option<&str>,
    checks: &mut Vec<Check>,
) -> bool {
    // Transport.
    let transport = transport_check(&req.to, creds, secret_label, req.allow_insecure_http);
    let mut refused_early = transport.result == CheckResult::Fail;
    checks.push(transport);
    // Loopback: refused before contacting the new server (a server on this workstation's
    // loopback would answer and prove nothing about the cluster). Checked whatever the
    // transport said: an http:// loopback URL is refused for both reasons, said together.
    let to = req.to.clone();
    let loopback = tokio::task::spawn_blocking(move || loopback_check(&to))
        .await
        .ok()
        .flatten();
    if let Some(mut c) = loopback {
        if req.allow_loopback {
            // A name only this workstation resolves to the loopback may be the real server
            // in the cluster's DNS; a loopback name or literal is the pod itself anywhere.
            let only_here = url::Url::parse(&req.to)
                .ok()
                .and_then(|u| u.host_str().map(|h| loopback_reason(h, &[]).is_none()))
                .unwrap_or(false);
            c.result = CheckResult::Warn;
            c.message = format!(
                "{} (allowed by --allow-loopback: right only when source-controller shares \
                 this machine's network{})",
                c.message.split(". Refused:").next().unwrap_or(&c.message),
                if only_here {
                    ", or when the cluster's DNS answers the name with the real server \
                     (--verify-in-cluster checks that)"
                } else {
                    ""
                }
            );
        } else {
            refused_early = true;
        }
        checks.push(c);
    }
    refused_early
}

/// `remote`: the new server's head of the branch, as this workstation reads it with the
/// credentials Flux will use.
fn remote_check(
    pre: &mut Preflight,
    req: &Request,
    runner: &GitRunner,
    remote: &std::result::Result<String, RemoteFailure>,
    secret_label: Option<&str>,
) {
    let current = &pre.current;
    match &remote {
        Err(f) => pre.checks.push(Check {
            id: "remote",
            result: CheckResult::Fail,
            message: match f {
                RemoteFailure::Tls(_) => format!(
                    "{} (trusted here: {})",
                    f.explain(&req.to, secret_label),
                    runner.trust().describe()
                ),
                _ => f.explain_sent(&req.to, secret_label, runner.credentials().has_auth()),
            },
        }),
        Ok(head) => {
            pre.new_head = Some(head.clone());
            pre.checks.push(Check {
                id: "remote",
                result: CheckResult::Ok,
                message: format!(
                    "{} answers this workstation with the credentials Flux will use ({}): {} \
                     is at {}",
                    req.to,
                    secret_label.unwrap_or("no secret"),
                    current.branch,
                    &head[..head.len().min(12)]
                ),
            });
        }
    }
}

/// The history relation of the commit the cluster runs (C) to the new server's `head`, read in
/// a scratch repository holding the new branch (and C, fetched from the old server when only it
/// has it), which the authored check then reads.
async fn history(
    conn: &Connection,
    req: &Request,
    runner: &GitRunner,
    current: &Current,
    secret_name: &Option<String>,
    secret_label: Option<&str>,
    head: &str,
) -> Result<(Scratch, Relation)> {
    // History: a scratch repo with the new branch (and --repo's objects) to compare and to read
    // the tree at C.
    let scratch = Scratch::new(runner, req.repo.as_deref()).map_err(Error::Usage)?;
    let fetched_new = runner.fetch_branch(scratch.path(), &req.to, &current.branch, "new");
    if !scratch.has_commit(runner, &current.commit) && current.url != req.to {
        // C may only be on the old server: fetch it with the current credentials.
        let old_creds = match &current.secret_ref {
            Some(s) if Some(s) != secret_name.as_ref() => {
                read_credentials(conn, &req.namespace, s).await?
            }
            _ => runner.credentials().clone(),
        };
        if let Ok(old_runner) = GitRunner::new(old_creds) {
            let _ = old_runner.fetch_branch(scratch.path(), &current.url, &current.branch, "old");
        }
    }
    let have_c = scratch.has_commit(runner, &current.commit);
    let relation = if head == current.commit {
        Relation::Identical
    } else if have_c && scratch.has_commit(runner, head) {
        scratch.relation(runner, &current.commit, head)
    } else {
        Relation::Unknown {
            reason: match (&fetched_new, have_c) {
                (Err(f), _) => format!(
                    "fetching from the new server failed: {}",
                    f.explain_sent(&req.to, secret_label, runner.credentials().has_auth())
                ),
                (_, false) => format!(
                    "commit {} is neither on the new server nor reachable on the old one; pass \
                     --repo with a clone that has it",
                    &current.commit[..current.commit.len().min(12)]
                ),
                _ => "history unavailable".into(),
            },
        }
    };
    Ok((scratch, relation))
}

/// `history`: the relation, and whether it refuses the cutover (`--allow-forward` lets one
/// ahead through).
fn history_check(pre: &mut Preflight, req: &Request, head: &str, relation: Relation) {
    let current = &pre.current;
    let describe = relation.describe(&current.branch, head);
    let (result, message) = match &relation {
        Relation::Identical => (CheckResult::Ok, describe),
        Relation::Ahead { .. } if req.allow_forward => (
            CheckResult::Warn,
            format!("{describe} (allowed by --allow-forward)"),
        ),
        Relation::Ahead { .. } => (
            CheckResult::Fail,
            format!(
                "{describe}. Refused: make the new server's {} point at {} first, or pass \
                 --allow-forward to deploy them with the cutover",
                current.branch,
                &current.commit[..current.commit.len().min(12)]
            ),
        ),
        _ => (
            CheckResult::Fail,
            format!(
                "{describe}. Refused: push the commit the cluster runs to the new server and \
                 point its {} at {} (git push <new-remote> {}:refs/heads/{})",
                current.branch,
                &current.commit[..current.commit.len().min(12)],
                &current.commit[..current.commit.len().min(12)],
                current.branch
            ),
        ),
    };
    pre.relation = Some(relation);
    pre.checks.push(Check {
        id: "history",
        result,
        message,
    });
}

/// The field manager that owns `spec.url` of `repo`: the `metadata.managedFields` entry whose
/// `fieldsV1` lists `f:spec` / `f:url` (Kubernetes server-side field management: an update
/// moves ownership of the fields it changed to its manager), the latest by `time` when several
/// list it. `None` when no entry does.
pub fn url_field_manager(repo: &GitRepository) -> Option<String> {
    field_manager(repo, "/f:spec/f:url")
}

/// The field manager owning the field at `pointer` (a JSON pointer into `fieldsV1`, e.g.
/// `/f:spec/f:url`), by the rule of [`url_field_manager`].
fn field_manager(repo: &GitRepository, pointer: &str) -> Option<String> {
    repo.metadata
        .managed_fields
        .as_ref()?
        .iter()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .and_then(|f| f.0.pointer(pointer))
                .is_some()
        })
        .max_by_key(|m| m.time.as_ref().map(|t| t.0))
        .and_then(|m| m.manager.clone())
}

/// Who left the [`RECONCILE_ANNOTATION`] hold, read from what the object carries: the
/// annotation's field manager (metadata.managedFields, as [`url_field_manager`]) and the
/// in-flight mark ([`IN_FLIGHT_ANNOTATION`]: a run's forward patch writes the mark and the
/// hold together; a run that ends, proven or rolled back, removes the mark; a rollback also
/// removes a hold that run added).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum HoldOrigin {
    /// Field manager `kubectl-cutover` and the in-flight mark still there: the `--hold-root`
    /// run that added it was killed (SIGKILL) or lost its connection before it ended.
    InterruptedRun,
    /// Field manager `kubectl-cutover` and no in-flight mark: a `--hold-root` run added it and
    /// ended; the hold stays by design until `--finish` proves the root applies the committed
    /// spec.url.
    HoldRoot,
    /// Another field manager (`kubectl-annotate`, `kustomize-controller` applying it from
    /// Git, ...), or none listed (`manager: null`).
    #[serde(rename_all = "camelCase")]
    Other {
        /// The field manager, when the server listed one.
        manager: Option<String>,
    },
}

/// [`HoldOrigin`] of `repo`'s hold; `None` when it carries none ([`is_held`]).
pub fn hold_origin(repo: &GitRepository) -> Option<HoldOrigin> {
    if !is_held(repo) {
        return None;
    }
    let manager = field_manager(
        repo,
        &format!(
            "/f:metadata/f:annotations/f:{}",
            RECONCILE_ANNOTATION.replace('~', "~0").replace('/', "~1")
        ),
    );
    Some(match manager.as_deref() {
        Some(crate::cluster::FIELD_MANAGER) if InFlight::of(repo).is_some() => {
            HoldOrigin::InterruptedRun
        }
        Some(crate::cluster::FIELD_MANAGER) => HoldOrigin::HoldRoot,
        _ => HoldOrigin::Other { manager },
    })
}

/// True when `repo` carries `kustomize.toolkit.fluxcd.io/reconcile: disabled`, the value
/// kustomize-controller skips an object for (fluxcd/pkg/ssa `AnnotationReconcile` /
/// `DisabledValue`; kustomize-controller v1.1+ leaves such an object as it is in the cluster).
pub fn is_held(repo: &GitRepository) -> bool {
    repo.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECONCILE_ANNOTATION))
        .is_some_and(|v| v == "disabled")
}

/// The hold found on the GitRepository, who left it ([`HoldOrigin`]), what it does and how to
/// remove it: said by every run that finds it (nothing but `--finish` or a hand edit removes
/// it). Only a hold whose in-flight mark is still there is called left behind by an
/// interrupted run; a hold a `--hold-root` run kept when it ended is named as that.
pub fn hold_message(ns: &str, name: &str, origin: &HoldOrigin) -> String {
    let who = match origin {
        HoldOrigin::InterruptedRun => format!(
            ", left behind by an interrupted kubectl cutover --hold-root run (its \
             {IN_FLIGHT_ANNOTATION} mark is still there)"
        ),
        HoldOrigin::HoldRoot => format!(
            " that kubectl cutover --hold-root added and keeps until --finish (no cutover is in \
             flight: no {IN_FLIGHT_ANNOTATION} mark)"
        ),
        HoldOrigin::Other { manager: Some(m) } => format!(", set by {m}, not by kubectl cutover"),
        HoldOrigin::Other { manager: None } => ", set outside kubectl cutover".to_string(),
    };
    format!(
        "GitRepository {ns}/{name} carries the hold {RECONCILE_ANNOTATION}: disabled{who}: the \
         root Kustomization neither reverts nor applies its spec.url while it is there. Remove \
         it once the committed spec.url is the live one: kubectl cutover gitrepository/{name} \
         -n {ns} --finish (proves the root applies it, then removes the hold), or by hand: \
         kubectl annotate gitrepository -n {ns} {name} {RECONCILE_ANNOTATION}-"
    )
}

/// What a suspended GitRepository means for a cutover: source-controller returns before any
/// fetch while `spec.suspend` is true (source-controller internal/controller
/// gitrepository_controller.go `Reconcile`: "reconciliation is suspended for this object"), so
/// nothing can prove the new URL and an execute would only roll back at `--timeout`.
pub fn suspended_source_message(ns: &str, name: &str) -> String {
    format!(
        "GitRepository {ns}/{name} is suspended (spec.suspend: true): source-controller fetches \
         nothing while it is, so no fetch can prove the new URL and the run would roll back at \
         --timeout. Refused: resume it first (flux resume source git {name} -n {ns})"
    )
}

/// The preflight's refusal when source-controller (Deployment `flux-system/source-controller`)
/// runs no controller (`why`: [`cluster_loop::flux::deployment_not_running`], e.g. `0
/// replicas`): nothing fetches GitRepository `ns/name`, so nothing can prove the new URL and
/// an execute would only roll back at `--timeout`.
pub fn source_controller_stopped_message(ns: &str, name: &str, why: &str) -> String {
    format!(
        "source-controller in {} is not running ({why}): nothing fetches GitRepository \
         {ns}/{name} while it is stopped, so no fetch can prove the new URL and the run would \
         roll back at --timeout. Refused: start it first ({})",
        cluster_loop::cli::FLUX_DEFAULT_NAMESPACE,
        crate::cluster::start_command("source-controller", why)
    )
}

/// [`source_controller_stopped_message`] when `--to` is already the live URL: nothing to
/// patch and nothing refused, but nothing fetches the source either (a warning, exit 0).
pub fn source_controller_stopped_no_op_message(ns: &str, name: &str, why: &str) -> String {
    format!(
        "source-controller in {} is not running ({why}): nothing fetches GitRepository \
         {ns}/{name} while it is stopped; no patch is needed here, but start it ({})",
        cluster_loop::cli::FLUX_DEFAULT_NAMESPACE,
        crate::cluster::start_command("source-controller", why)
    )
}

/// The preflight's warning when kustomize-controller runs no controller (`why` as in
/// [`source_controller_stopped_message`]): no Kustomization applies anything, so nothing
/// reverts a live patch now and `--finish` cannot verify until it runs.
pub fn kustomize_controller_stopped_message(why: &str) -> String {
    format!(
        "kustomize-controller in {} is not running ({why}): no root Kustomization reverts a \
         live patch or applies the committed spec.url until it runs, so --finish cannot verify \
         before then ({})",
        cluster_loop::cli::FLUX_DEFAULT_NAMESPACE,
        crate::cluster::start_command("kustomize-controller", why)
    )
}

/// What a suspended root Kustomization means for a cutover (kustomize-controller skips a
/// suspended Kustomization entirely: no apply, no prune, no revert).
pub fn suspended_root_message(root: &str) -> String {
    let (ns, name) = root.split_once('/').unwrap_or(("flux-system", root));
    format!(
        "root Kustomization {root} is suspended: nothing reverts a live patch of spec.url and \
         nothing applies the committed one, so --finish cannot succeed until it is resumed \
         (flux resume kustomization -n {ns} {name})"
    )
}

/// The `drift` warning: the URL Git holds (`committed`, authored at `at`) is not the live
/// one ([`drift_message`] with the preflight's state).
fn drift_check(at: &str, committed: &str, root: &Consumer, pre: &Preflight) -> Check {
    Check {
        id: "drift",
        result: CheckResult::Warn,
        message: drift_message(
            at,
            committed,
            &pre.current.url,
            root,
            pre.current.held,
            pre.interrupted_run.as_ref(),
            pre.current.url_manager.as_deref(),
        ),
    }
}

/// The drift found before the move: the committed spec.url (at `at`) differs from the live
/// one. `interrupted`: the mark an interrupted cutover left ([`IN_FLIGHT_ANNOTATION`]); when
/// it patched in the live URL the drift is that run's, not a hand patch. `url_manager`: the
/// field manager that last wrote spec.url ([`url_field_manager`]); when it is
/// [`crate::cluster::FIELD_MANAGER`] an earlier cutover patched the live URL in (a completed
/// `--hold-root` run leaves exactly that until `--finish`), not a hand patch. `held`: the
/// GitRepository carries the [`RECONCILE_ANNOTATION`] hold (the root reverts nothing while it
/// is there).
pub fn drift_message(
    at: &str,
    committed: &str,
    live: &str,
    root: &Consumer,
    held: bool,
    interrupted: Option<&InFlight>,
    url_manager: Option<&str>,
) -> String {
    let how = match interrupted {
        Some(m) if m.to == live || m.to.is_empty() => {
            "the live URL is the one an interrupted cutover patched in".to_string()
        }
        _ if url_manager == Some(crate::cluster::FIELD_MANAGER) => format!(
            "the live URL is the one an earlier cutover patched in (spec.url's field manager is \
             {})",
            crate::cluster::FIELD_MANAGER
        ),
        _ => "the cluster already runs a hand-patched URL".to_string(),
    };
    format!(
        "before this move, the committed spec.url ({at}) is {committed} but the live one is \
         {live}: {how}{}",
        if root.suspended {
            " (kept because the root Kustomization is suspended)".to_string()
        } else if held {
            format!(
                " (kept only by the {RECONCILE_ANNOTATION}: disabled hold: once it is removed \
                 the root Kustomization puts the committed value back at its next apply)"
            )
        } else if root.last_failure.is_some() {
            "; the root Kustomization's last run failed, so it puts the committed value back at \
             its first run that succeeds"
                .into()
        } else {
            "; the root Kustomization will put the committed value back at its next apply".into()
        }
    )
}

/// Puts the `drift` check first in a preflight that stops before the authored check (refused
/// before the new server was contacted, or the new server could not be read): the tree at C
/// comes from `--repo` or the live URL, fetched with the live secretRef's credentials (`creds`
/// when that is the secret the preflight already read). Nothing is added when the root is not
/// this source, or the tree (or the live secretRef's Secret) cannot be read: best effort, it
/// never turns the refusal or remote failure being reported into another error.
async fn say_drift_first(
    conn: &Connection,
    req: &Request,
    pre: &mut Preflight,
    secret_name: &Option<String>,
    creds: &GitCredentials,
) {
    let Some(root) = pre.current.root.clone().filter(|r| r.same_source) else {
        return;
    };
    let old_creds = match &pre.current.secret_ref {
        Some(s) if Some(s) != secret_name.as_ref() => {
            match read_credentials(conn, &req.namespace, s).await {
                Ok(c) => c,
                Err(_) => return,
            }
        }
        _ => creds.clone(),
    };
    if let Ok(old_runner) = GitRunner::new(old_creds)
        && let Ok(scratch) = Scratch::new(&old_runner, req.repo.as_deref())
    {
        if !scratch.has_commit(&old_runner, &pre.current.commit) {
            let _ = old_runner.fetch_branch(
                scratch.path(),
                &pre.current.url,
                &pre.current.branch,
                "old",
            );
        }
        if let Some(c) = drift_only(pre, &scratch, &old_runner, &root) {
            pre.checks.insert(0, c);
        }
    }
}

/// The `drift` check alone (the committed spec.url at C vs the live one), for a preflight
/// that stops before the authored check. `None` when they agree or the tree cannot be read.
fn drift_only(
    pre: &Preflight,
    scratch: &Scratch,
    runner: &GitRunner,
    root: &Consumer,
) -> Option<Check> {
    if !scratch.has_commit(runner, &pre.current.commit) {
        return None;
    }
    let tree = tempfile::Builder::new()
        .prefix("kubectl-cutover-tree-")
        .tempdir()
        .ok()?;
    scratch
        .export_tree(runner, &pre.current.commit, tree.path())
        .ok()?;
    let (ns, name) = pre.source.split_once('/').unwrap_or(("", &pre.source));
    let a = authored::find_authored_url(tree.path(), &root.path, ns, name).ok()?;
    (a.url != pre.current.url).then(|| {
        let at = a
            .locations
            .first()
            .map(|l| format!("{}:{}", l.file, l.line))
            .unwrap_or_default();
        drift_check(&at, &a.url, root, pre)
    })
}

/// The root found by its path: the first of `consumers` (Kustomizations of this same source)
/// whose `spec.path` in `tree` (the tree at the commit the cluster runs) defines GitRepository
/// `ns/name` ([`authored::find_authored_url`]). Used only when the object carries no owner
/// label and no Kustomization lists it in `status.inventory`: such a Kustomization has not
/// applied it yet (its runs fail, or it is new), and its first successful apply reverts a live
/// patch. `None` when no consumer's path defines it.
pub fn root_by_path(
    consumers: &[Consumer],
    tree: &std::path::Path,
    ns: &str,
    name: &str,
) -> Option<Consumer> {
    consumers
        .iter()
        .filter(|c| c.same_source)
        .find(
            |c| match authored::find_authored_url(tree, &c.path, ns, name) {
                Ok(_) => true,
                // Its build fails here too (trial 8, B: a listed file is missing): what it lists,
                // followed into other directories (`../base`), may still hold the manifest.
                Err(authored::AuthoredError::Render { .. }) => matches!(
                    authored::path_reaches(tree, &c.path, ns, name),
                    authored::PathReach::Defines { .. }
                ),
                Err(_) => false,
            },
        )
        .cloned()
}

/// What a consumer's state says about its runs, for a message: `its last run failed: F`,
/// `it has never applied anything`, or `None` when it applies normally.
fn not_applying(c: &Consumer) -> Option<String> {
    match (&c.last_failure, &c.last_applied_revision) {
        (Some(f), _) => Some(format!("its last run failed: {f}")),
        (None, None) => Some("it has never applied anything".into()),
        (None, Some(_)) => None,
    }
}

/// Consumers of this source that are not applying (never applied, or their last run failed)
/// and whose path cannot be ruled out as defining GitRepository `ns/name` in `tree`: the path
/// does not build here, and what it lists cannot all be read ([`authored::path_reaches`]), or
/// it is not in the tree at all. Shape: `(consumer, why it is unknown)`. Such a Kustomization
/// may be the root: its first successful run would apply the committed spec.url.
pub fn unknown_roots(
    consumers: &[Consumer],
    tree: &std::path::Path,
    ns: &str,
    name: &str,
) -> Vec<(Consumer, String)> {
    consumers
        .iter()
        .filter(|c| c.same_source && not_applying(c).is_some())
        .filter_map(|c| {
            let why = match authored::find_authored_url(tree, &c.path, ns, name) {
                Ok(_) | Err(authored::AuthoredError::NotRendered { .. }) => return None,
                Err(authored::AuthoredError::NotLiteral(_)) => return None,
                Err(e @ authored::AuthoredError::Render { .. }) => {
                    match authored::path_reaches(tree, &c.path, ns, name) {
                        authored::PathReach::DoesNot => return None,
                        authored::PathReach::Defines { file } => {
                            format!("{e}; what it lists reaches {file}, which defines it")
                        }
                        authored::PathReach::Unknown { why } => {
                            format!("{e}; what it lists cannot all be read: {why}")
                        }
                    }
                }
                Err(e) => e.to_string(),
            };
            Some((c.clone(), why))
        })
        .collect()
}

/// ` (path P defines this GitRepository, but it has not applied it yet: no owner label, in no
/// inventory)` for a root found by its path, else empty.
fn not_applied_yet(found_by: Option<&str>, path: &str) -> String {
    if found_by == Some("path") {
        format!(
            " (its path {path} defines this GitRepository, but it has not applied it yet: no \
             {OWNER_NAME_LABEL} label, in no inventory)"
        )
    } else {
        String::new()
    }
}

/// The authored check when no Kustomization applies the GitRepository (no owner labels, in no
/// inventory): nothing reverts a live patch, but a file in the tree at C may still define the
/// object (applied by hand, by `flux bootstrap` before a root existed, or by a tool outside
/// Flux). Such a file is shown with the change that keeps it true; without one, the check says
/// plainly that nothing was compared.
fn unapplied_authored_check(
    pre: &mut Preflight,
    tree: &std::path::Path,
    req: &Request,
    ns: &str,
    name: &str,
) -> Check {
    let nobody = format!(
        "no Kustomization applies GitRepository {} (no {OWNER_NAME_LABEL} label, and no \
         Kustomization lists it in status.inventory), so nothing reverts a live patch",
        pre.source
    );
    match authored::find_authored_url(tree, "./", ns, name) {
        Ok(a) => {
            let where_ = a
                .locations
                .first()
                .map(|l| format!("{}:{}", l.file, l.line))
                .unwrap_or_default();
            let agrees = a.url == req.to;
            if !agrees {
                let base = req.repo.clone().unwrap_or_else(|| tree.to_path_buf());
                if let Ok(changes) = authored::authored_change(&base, &a, &req.to) {
                    pre.authored_patch = FilePatch::all(changes);
                }
            }
            let message = if agrees {
                format!(
                    "{nobody}; the repository defines it at {where_} with spec.url already {}",
                    req.to
                )
            } else {
                format!(
                    "{nobody}; but the repository defines it at {where_} with spec.url {}: \
                     change that file too (below), or the next `kubectl apply` of it moves the \
                     source back",
                    a.url
                )
            };
            pre.authored = Some(a);
            Check {
                id: "authored",
                result: CheckResult::Warn,
                message,
            }
        }
        Err(_) => Check {
            id: "authored",
            result: CheckResult::Warn,
            message: format!(
                "{nobody}; no file in the repository at {} defines it either: no committed \
                 spec.url was compared (if it is authored elsewhere, change it there)",
                &pre.current.commit[..pre.current.commit.len().min(12)]
            ),
        },
    }
}

fn finish(mut pre: Preflight) -> Preflight {
    pre.go = pre.checks.iter().all(|c| c.result != CheckResult::Fail);
    pre
}

pub use cluster_loop::probe::is_own_machine;

/// The `loopback` check of the default preflight (see [`loopback_reason`]); resolves the
/// URL's host with this workstation's resolver (blocking). `None` when the URL has no host
/// or the host is not the loopback.
pub fn loopback_check(url: &str) -> Option<Check> {
    let parsed = url::Url::parse(url).ok()?;
    let host = parsed.host_str()?.to_string();
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let addrs: Vec<std::net::IpAddr> = if bare.parse::<std::net::IpAddr>().is_ok() {
        Vec::new()
    } else {
        use std::net::ToSocketAddrs;
        (bare.as_str(), 0u16)
            .to_socket_addrs()
            .map(|it| it.map(|sa| sa.ip()).collect())
            .unwrap_or_default()
    };
    workstation_loopback_reason(&host, &addrs).map(|message| Check {
        id: "loopback",
        result: CheckResult::Fail,
        message,
    })
}

/// [`loopback_reason`] as this workstation sees `host` (`addrs`: its resolver's answer). A
/// loopback name or literal is the pod itself anywhere. A name that only this workstation
/// resolves to the loopback (a hosts entry for a `kubectl port-forward`, a local proxy) is
/// refused too, but the cluster's DNS may answer it differently: the message says so, and
/// that `--verify-in-cluster --allow-loopback` checks the pod's own answer.
pub fn workstation_loopback_reason(host: &str, addrs: &[std::net::IpAddr]) -> Option<String> {
    if let Some(m) = loopback_reason(host, &[]) {
        return Some(m);
    }
    if addrs.is_empty() || !addrs.iter().all(|a| is_own_machine(*a)) {
        return None;
    }
    Some(format!(
        "{host} resolves on this workstation to the loopback ({}): that answer proves nothing \
         about the Git server, and a pod that gets it connects to itself (in a pod, localhost \
         is the pod itself). Refused: use a URL the cluster can reach; if the cluster's DNS \
         answers {host} with the real server (this workstation's answer is a port-forward or a \
         hosts entry), check that with --verify-in-cluster --allow-loopback",
        addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The transport rule: `http://` with credentials is refused unless explicitly allowed, as
/// `flux bootstrap git` refuses an `http://` URL ([`cluster_loop::gitauth::BOOTSTRAP_HTTP_REFUSAL`],
/// flux2 v2.9.5 cmd/flux/bootstrap_git.go `getAuthOpts`). source-controller v1.9.6 itself does
/// not refuse: it sends the credential in clear text (it makes its Git client with
/// `WithInsecureCredentialsOverHTTP` for every `http://` URL, gitrepository_controller.go, so
/// fluxcd/pkg/git's "basic auth cannot be sent over HTTP" is never reached; the real-cluster
/// test `cutover::execute::basic_auth_over_http_is_refused_as_bootstrap_does` watches it send
/// `Authorization: Basic` on the plain listener). `ssh://` is out of scope, anything else is not a Git URL
/// source-controller accepts (api/v1 GitRepositorySpec.URL pattern `^(http|https|ssh)://.*$`).
/// `secret` names the Secret the credentials came from (`NS/NAME`), `None` when the source has
/// no `secretRef` (then there is no `ca.crt` to speak of).
pub fn transport_check(
    url: &str,
    creds: &GitCredentials,
    secret: Option<&str>,
    allow_insecure_http: bool,
) -> Check {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("https") => Check {
            id: "transport",
            result: CheckResult::Ok,
            message: format!(
                "HTTPS: the server certificate will be verified against {}",
                match (creds.ca_pem.is_some(), secret) {
                    (true, _) =>
                        "the system CA bundle plus the secret's ca.crt (source-controller's \
                                  go-git adds ca.crt to the system pool)"
                            .to_string(),
                    (false, Some(s)) => format!("the system CA bundle (secret {s} has no ca.crt)"),
                    (false, None) => {
                        "the system CA bundle (no secretRef, so no private CA)".to_string()
                    }
                }
            ),
        },
        Some("http") if creds.has_auth() && !allow_insecure_http => Check {
            id: "transport",
            result: CheckResult::Fail,
            message: format!(
                "http:// with the credentials of {}: {}; flux bootstrap refuses such a URL \
                 (\"{}\"). Use an https:// URL and put the server's CA in the secret as ca.crt, \
                 or pass --allow-insecure-http",
                secret.map_or("--secret".to_string(), |s| format!("secret {s}")),
                cluster_loop::gitauth::SOURCE_CONTROLLER_SENDS_OVER_HTTP,
                cluster_loop::gitauth::BOOTSTRAP_HTTP_REFUSAL,
            ),
        },
        Some("http") => Check {
            id: "transport",
            result: CheckResult::Warn,
            message: if creds.has_auth() {
                "http:// with credentials (allowed by --allow-insecure-http): they travel in \
                 clear text"
                    .into()
            } else {
                "http:// without credentials: content is not protected in transit".into()
            },
        },
        Some("ssh") => Check {
            id: "transport",
            result: CheckResult::Fail,
            message: "ssh:// URLs are not supported by kubectl cutover yet: use https://".into(),
        },
        _ => Check {
            id: "transport",
            result: CheckResult::Fail,
            message: format!(
                "{url} is not a URL source-controller accepts (must match ^(http|https|ssh)://)"
            ),
        },
    }
}

fn authored_check(
    pre: &mut Preflight,
    scratch: &Scratch,
    runner: &GitRunner,
    req: &Request,
) -> Check {
    // Where to look: the root Kustomization's path when one applies this object from this
    // source; with no root at all, the whole tree at C (a file may still author the object,
    // applied by hand or by something outside Flux).
    let root = pre.current.root.clone();
    if let Some(root) = &root
        && !root.same_source
    {
        return Check {
            id: "authored",
            result: CheckResult::Warn,
            message: format!(
                "Kustomization {} applies this GitRepository from another source: change spec.url \
                 there ({}), or the live patch will be reverted within its interval; nothing in \
                 this repository was compared",
                root.name, root.path
            ),
        };
    }
    let tree = match tree_at_c(pre, scratch, runner) {
        Ok(t) => t,
        Err(check) => return check,
    };
    let source = pre.source.clone();
    let (ns, name) = source.split_once('/').unwrap_or(("", &source));
    // No label and in no inventory: a Kustomization of this source may still render this
    // object from its path and simply never have applied it (its runs fail: session 6 trial,
    // E). It is the root all the same: its first successful apply reverts a live patch.
    let root = root.or_else(|| {
        let by_path = root_by_path(&pre.current.consumers, tree.path(), ns, name)?;
        pre.current.root = Some(by_path.clone());
        pre.current.root_found_by = Some("path".into());
        Some(by_path)
    });
    let Some(root) = root else {
        // A consumer that is not applying, whose path neither builds here nor can be read
        // through, may be the root all the same: never "nothing reverts" then (trial 8, B).
        let unknown = unknown_roots(&pre.current.consumers, tree.path(), ns, name);
        if !unknown.is_empty() {
            return unknown_root_check(pre, &unknown);
        }
        return unapplied_authored_check(pre, tree.path(), req, ns, name);
    };
    match authored::find_authored_url(tree.path(), &root.path, ns, name) {
        Ok(a) => authored_found(pre, req, &root, tree.path(), a),
        Err(e @ authored::AuthoredError::Render { .. }) => {
            unbuildable_root_check(pre, &root, tree.path(), (ns, name), &e)
        }
        Err(e) => Check {
            id: "authored",
            result: CheckResult::Warn,
            message: e.to_string(),
        },
    }
}

/// The tree at C: from --repo's working tree when it is at C, else exported from history into
/// a temporary directory; a warning when it cannot be read.
fn tree_at_c(
    pre: &Preflight,
    scratch: &Scratch,
    runner: &GitRunner,
) -> std::result::Result<tempfile::TempDir, Check> {
    let tree = match tempfile::Builder::new()
        .prefix("kubectl-cutover-tree-")
        .tempdir()
    {
        Ok(t) => t,
        Err(e) => {
            return Err(Check {
                id: "authored",
                result: CheckResult::Warn,
                message: format!("cannot create a temp dir: {e}"),
            });
        }
    };
    if !scratch.has_commit(runner, &pre.current.commit) {
        return Err(Check {
            id: "authored",
            result: CheckResult::Warn,
            message: format!(
                "cannot read the tree at {}: pass --repo to find the authored spec.url",
                pre.current.commit
            ),
        });
    }
    if let Err(e) = scratch.export_tree(runner, &pre.current.commit, tree.path()) {
        return Err(Check {
            id: "authored",
            result: CheckResult::Warn,
            message: format!("cannot read the tree at {}: {e}", pre.current.commit),
        });
    }
    Ok(tree)
}

/// `authored` when no Kustomization has applied the GitRepository but one of its source that
/// applies nothing (`unknown`, with why its path cannot be read) may still be its root.
fn unknown_root_check(pre: &Preflight, unknown: &[(Consumer, String)]) -> Check {
    let each = unknown
        .iter()
        .map(|(c, why)| {
            format!(
                "Kustomization {} (path {}; {}): {why}",
                c.name,
                c.path,
                not_applying(c).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Check {
        id: "authored",
        result: CheckResult::Warn,
        message: format!(
            "no Kustomization has applied GitRepository {} (no {OWNER_NAME_LABEL} \
             label, in no status.inventory), but whether one will is unknown: {each}. \
             If that path defines this GitRepository, its first successful run puts \
             the committed spec.url back over a live patch. Fix its build first and \
             run the preflight again, or use --hold-root (the hold keeps every \
             Kustomization off this GitRepository until --finish)",
            pre.source
        ),
    }
}

/// `authored` with the root's committed spec.url `a` found in the tree at C: agrees with
/// `--to`, or the exact change to commit (in `pre.authored_patch`); drift is said first.
fn authored_found(
    pre: &mut Preflight,
    req: &Request,
    root: &Consumer,
    tree: &std::path::Path,
    a: authored::AuthoredUrl,
) -> Check {
    let agrees = a.url == req.to;
    let where_ = a
        .locations
        .first()
        .map(|l| format!("{}:{}", l.file, l.line))
        .unwrap_or_default();
    if a.url != pre.current.url {
        // Said first: everything else is read against a live URL Git does not hold.
        pre.checks
            .insert(0, drift_check(&where_, &a.url, root, pre));
    }
    let check = if agrees {
        Check {
            id: "authored",
            result: CheckResult::Ok,
            message: format!(
                "the committed spec.url ({where_}) is already {}: the root \
                 Kustomization {} keeps the new value",
                req.to, root.name
            ),
        }
    } else {
        // Prepare the exact change (against --repo when given, so --write-patch applies).
        let base = req.repo.clone().unwrap_or_else(|| tree.to_path_buf());
        match authored::authored_change(&base, &a, &req.to) {
            Ok(changes) => {
                pre.authored_patch = FilePatch::all(changes);
            }
            Err(e) => {
                pre.authored_patch.clear();
                return Check {
                    id: "authored",
                    result: CheckResult::Warn,
                    message: format!("cannot prepare the authored change: {e}"),
                };
            }
        }
        let secret_too = match (&req.secret, &pre.current.secret_ref) {
            (Some(new), old) if Some(new) != old.as_ref() => format!(
                " In the same file set spec.secretRef.name to {new}, or the root \
                 Kustomization puts the old secret back too."
            ),
            _ => String::new(),
        };
        Check {
            id: "authored",
            result: CheckResult::Warn,
            message: if root.suspended {
                // kustomize-controller skips a suspended Kustomization: no revert now,
                // but its first run after `flux resume` applies the committed value.
                format!(
                    "the committed spec.url at {where_} is still {}: root Kustomization \
                     {} is suspended, so nothing reverts the live patch now, but its \
                     first apply after it is resumed puts {} back unless that file \
                     changes; commit the change below before resuming it.{secret_too}",
                    a.url, root.name, a.url
                )
            } else if pre.current.held {
                // kustomize-controller skips the held object: no revert while the hold
                // stays, and --finish removes it only once the committed value agrees.
                format!(
                    "the committed spec.url at {where_} is still {}: the hold \
                     ({RECONCILE_ANNOTATION}: disabled) keeps root Kustomization {} \
                     from reverting the live patch while it stays; commit the change \
                     below, then run --finish, which removes the hold once the root \
                     applies it.{secret_too}",
                    a.url, root.name
                )
            } else if let Some(failure) = &root.last_failure {
                // kustomize-controller applies nothing while its runs fail: no revert
                // now, but the first run that succeeds applies the committed value.
                format!(
                    "the committed spec.url at {where_} is still {}: root Kustomization \
                     {}{} failed its last run ({failure}), so it reverts nothing now, \
                     but the first run that succeeds puts {} back over the live patch \
                     unless that file changes; commit the change below before its build \
                     is fixed (or use --hold-root until it lands).{secret_too}",
                    a.url,
                    root.name,
                    not_applied_yet(pre.current.root_found_by.as_deref(), &root.path),
                    a.url
                )
            } else {
                format!(
                    "the committed spec.url at {where_} is still {}: root Kustomization \
                     {}{} will revert the live patch within its interval unless that \
                     file changes; commit the change below through the window (or use \
                     --hold-root until it lands).{secret_too}",
                    a.url,
                    root.name,
                    not_applied_yet(pre.current.root_found_by.as_deref(), &root.path)
                )
            },
        }
    };
    pre.authored = Some(a);
    check
}

/// `authored` when the root's path does not build here either (trial 8, B): the spec.url it
/// would apply cannot be read, but it is still the root.
fn unbuildable_root_check(
    pre: &Preflight,
    root: &Consumer,
    tree: &std::path::Path,
    (ns, name): (&str, &str),
    e: &authored::AuthoredError,
) -> Check {
    let reach = match authored::path_reaches(tree, &root.path, ns, name) {
        authored::PathReach::Defines { file } => {
            format!("what it lists reaches {file}, which defines this GitRepository")
        }
        authored::PathReach::DoesNot => "what it lists does not define this \
                                         GitRepository now"
            .into(),
        authored::PathReach::Unknown { why } => {
            format!("what it lists cannot all be read: {why}")
        }
    };
    let state = not_applying(root)
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    Check {
        id: "authored",
        result: CheckResult::Warn,
        message: format!(
            "root Kustomization {}{}{state}: its path does not build here either ({e}), \
             so the committed spec.url it applies cannot be read; {reach}. It reverts \
             nothing while its runs fail, but the first run that succeeds puts the \
             committed spec.url back over the live patch: fix its build first and run \
             the preflight again (it then shows the authored change), or use \
             --hold-root until that change lands",
            root.name,
            not_applied_yet(pre.current.root_found_by.as_deref(), &root.path),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consumer_not_applying_whose_path_cannot_be_read_through_is_unknown() {
        // Trial 8, B: never "nothing reverts" while a failing consumer may be the root.
        let t = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = t.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(
            "clusters/prod/kustomization.yaml",
            "resources:\n- missing.yaml\n",
        );
        write("apps/kustomization.yaml", "resources:\n- missing.yaml\n");
        let consumer = |name: &str, path: &str, failure: Option<&str>| Consumer {
            name: name.into(),
            path: path.into(),
            last_applied_revision: Some("main@sha1:abc".into()),
            same_source: true,
            suspended: false,
            last_failure: failure.map(str::to_string),
        };
        let consumers = [
            consumer("fs/root", "./clusters/prod", Some("BuildFailed: x")),
            // Applying normally: it applied at its last run and lists nothing like it.
            consumer("fs/apps", "./apps", None),
        ];
        let unknown = unknown_roots(&consumers, t.path(), "fs", "fs");
        assert_eq!(unknown.len(), 1, "{unknown:?}");
        assert_eq!(unknown[0].0.name, "fs/root");
        assert!(
            unknown[0]
                .1
                .starts_with("kubectl kustomize ./clusters/prod failed: "),
            "{}",
            unknown[0].1
        );
        assert!(
            unknown[0].1.ends_with(
                "what it lists cannot all be read: clusters/prod/kustomization.yaml lists \
                 missing.yaml, which is not in the tree"
            ),
            "{}",
            unknown[0].1
        );
        assert!(root_by_path(&consumers, t.path(), "fs", "fs").is_none());
    }

    #[test]
    fn revisions_split_like_source_controller() {
        assert_eq!(
            split_revision("main@sha1:0123456789abcdef0123456789abcdef01234567"),
            (
                "main".to_string(),
                "0123456789abcdef0123456789abcdef01234567".to_string()
            )
        );
        assert_eq!(
            split_revision("refs/heads/x@sha1:abc"),
            ("refs/heads/x".to_string(), "abc".to_string())
        );
        assert_eq!(
            split_revision("sha1:abc"),
            (String::new(), "abc".to_string())
        );
    }

    #[test]
    fn transport_rules() {
        let mut creds = GitCredentials::default();
        assert_eq!(
            transport_check("https://h/x.git", &creds, None, false).result,
            CheckResult::Ok
        );
        assert_eq!(
            transport_check("http://h/x.git", &creds, None, false).result,
            CheckResult::Warn
        );
        creds.password = Some("p".into());
        let c = transport_check("http://h/x.git", &creds, Some("ns/s"), false);
        assert_eq!(c.result, CheckResult::Fail);
        assert!(
            c.message.contains(
                "flux bootstrap refuses such a URL (\"scheme http is insecure, pass --allow-insecure-http=true to allow it\")"
            ),
            "{}",
            c.message
        );
        // What source-controller really does with it: it sends it, it does not refuse.
        assert!(
            c.message.contains("http:// with the credentials of secret ns/s: source-controller v1.9.6 does not refuse it: it sends the credential in clear text"),
            "{}",
            c.message
        );
        assert_eq!(
            transport_check("http://h/x.git", &creds, Some("ns/s"), true).result,
            CheckResult::Warn
        );
        assert_eq!(
            transport_check("git@h:x.git", &creds, Some("ns/s"), true).result,
            CheckResult::Fail
        );
    }

    /// Issue 19 item 6: every form of "this machine" is refused, literal or resolved; a real
    /// address, or a name with any non-loopback address, is not.
    #[test]
    fn loopback_literals_names_and_resolved_names() {
        use std::net::IpAddr;
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let url_host = |u: &str| url::Url::parse(u).unwrap().host_str().unwrap().to_string();
        for (url, what) in [
            (
                "https://localhost:8443/x.git",
                "localhost is the loopback name",
            ),
            (
                "https://LocalHost./x.git",
                "localhost. is the loopback name",
            ),
            (
                "https://git.localhost/x.git",
                "git.localhost is the loopback name",
            ),
            ("https://127.0.0.1/x.git", "127.0.0.1 is a loopback address"),
            ("https://127.3.2.1/x.git", "127.3.2.1 is a loopback address"),
            // WHATWG IPv4 forms are normalised by the URL parser, as git/curl read them.
            ("https://127.1/x.git", "127.0.0.1 is a loopback address"),
            (
                "https://2130706433/x.git",
                "127.0.0.1 is a loopback address",
            ),
            ("https://[::1]/x.git", "[::1] is a loopback address"),
            (
                "https://[::ffff:127.0.0.1]/x.git",
                "[::ffff:7f00:1] is a loopback address (IPv4-mapped 127.0.0.1)",
            ),
            (
                "https://0.0.0.0/x.git",
                "0.0.0.0 is the unspecified address, which a connection on Linux reaches as \
                 the loopback",
            ),
            (
                "https://[::]/x.git",
                "[::] is the unspecified address, which a connection on Linux reaches as the \
                 loopback",
            ),
        ] {
            let host = url_host(url);
            let m = loopback_reason(&host, &[]).unwrap_or_else(|| panic!("{url} not refused"));
            assert!(
                m.starts_with(&format!(
                    "{what}: in a pod, localhost is the pod itself, so source-controller would \
                     connect to its own pod"
                )),
                "{url}: {m}"
            );
            assert!(m.contains("Refused:"), "{m}");
            assert!(!m.contains("firewall"), "{m}");
        }
        let m = loopback_reason("gitea.lab", &[ip("127.0.1.1"), ip("::1")]).unwrap();
        assert!(
            m.starts_with(
                "gitea.lab resolves on this workstation to the loopback (127.0.1.1, ::1)"
            ),
            "{m}"
        );
        // Hosts files that block a name map it to 0.0.0.0: a connection reaches this machine.
        assert!(loopback_reason("blocked.example", &[ip("0.0.0.0")]).is_some());
        // The workstation's view of a name: refused, naming the way to check the pod's answer.
        let m = workstation_loopback_reason("gitea.lab", &[ip("127.0.0.1")]).unwrap();
        assert!(
            m.starts_with(
                "gitea.lab resolves on this workstation to the loopback (127.0.0.1): that answer \
                 proves nothing about the Git server, and a pod that gets it connects to itself"
            ),
            "{m}"
        );
        assert!(m.contains("Refused:"), "{m}");
        assert!(
            m.ends_with("check that with --verify-in-cluster --allow-loopback"),
            "{m}"
        );
        assert_eq!(
            workstation_loopback_reason("localhost", &[ip("127.0.0.1")]),
            loopback_reason("localhost", &[])
        );
        assert_eq!(
            workstation_loopback_reason("gitea.lab", &[ip("127.0.0.1"), ip("10.0.0.5")]),
            None
        );
        for (host, addrs) in [
            ("gitea.lab", vec![ip("10.0.0.5")]),
            ("gitea.lab", vec![ip("127.0.0.1"), ip("10.0.0.5")]),
            ("gitea.lab", vec![]),
            ("10.0.0.5", vec![ip("10.0.0.5")]),
            ("[::ffff:10.0.0.5]", vec![]),
            ("localhost.example.com", vec![ip("10.0.0.5")]),
        ] {
            assert_eq!(loopback_reason(host, &addrs), None, "{host} {addrs:?}");
        }
    }

    #[test]
    fn no_secret_ref_is_not_a_secret_without_ca_crt() {
        let none = GitCredentials::default();
        let c = transport_check("https://h/x.git", &none, None, false);
        assert!(!c.message.contains("has no ca.crt"), "{}", c.message);
        assert!(c.message.contains("no secretRef"), "{}", c.message);
        let c = transport_check("https://h/x.git", &none, Some("flux-system/creds"), false);
        assert!(
            c.message.contains("secret flux-system/creds has no ca.crt"),
            "{}",
            c.message
        );
    }

    /// A GitRepository with `annotations` whose hold annotation (if any) was written by
    /// `manager` (managedFields as the apiserver records an Update).
    fn held_repo(annotations: serde_json::Value, manager: Option<&str>) -> GitRepository {
        let mut fields = serde_json::json!({"f:metadata": {"f:annotations": {}}});
        for k in annotations.as_object().unwrap().keys() {
            fields["f:metadata"]["f:annotations"][format!("f:{k}")] = serde_json::json!({});
        }
        let managed = match manager {
            Some(m) => serde_json::json!([{"manager": m, "operation": "Update",
                "apiVersion": "source.toolkit.fluxcd.io/v1", "fieldsType": "FieldsV1",
                "fieldsV1": fields, "time": "2026-12-01T23:00:00Z"}]),
            None => serde_json::json!([]),
        };
        serde_json::from_value(serde_json::json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "flux-system", "namespace": "flux-system",
                "annotations": annotations, "managedFields": managed},
            "spec": {"url": "https://new/x.git", "interval": "1m"}
        }))
        .unwrap()
    }

    #[test]
    fn the_hold_is_named_by_what_the_object_carries() {
        let mark = r#"{"from":"https://old/x.git","to":"https://new/x.git","startedAt":"2026-12-01T23:00:00Z"}"#;
        let hold_and_mark =
            serde_json::json!({RECONCILE_ANNOTATION: "disabled", IN_FLIGHT_ANNOTATION: mark});
        let hold = serde_json::json!({RECONCILE_ANNOTATION: "disabled"});
        // A --hold-root run's forward patch, never ended (SIGKILL): mark and hold.
        let r = held_repo(hold_and_mark.clone(), Some("kubectl-cutover"));
        assert_eq!(hold_origin(&r), Some(HoldOrigin::InterruptedRun));
        // A --hold-root run that ended: its done patch removed the mark, the hold stays.
        let r = held_repo(hold.clone(), Some("kubectl-cutover"));
        assert_eq!(hold_origin(&r), Some(HoldOrigin::HoldRoot));
        // Someone else's hold, with or without a cutover in flight.
        for a in [hold.clone(), hold_and_mark] {
            let r = held_repo(a, Some("kubectl-annotate"));
            assert_eq!(
                hold_origin(&r),
                Some(HoldOrigin::Other {
                    manager: Some("kubectl-annotate".into())
                })
            );
        }
        let r = held_repo(hold, None);
        assert_eq!(hold_origin(&r), Some(HoldOrigin::Other { manager: None }));
        // No hold: no origin (an in-flight mark alone is not a hold).
        let r = held_repo(
            serde_json::json!({IN_FLIGHT_ANNOTATION: mark}),
            Some("kubectl-cutover"),
        );
        assert_eq!(hold_origin(&r), None);

        let m = |o| hold_message("ns", "gr", &o);
        let ended = m(HoldOrigin::HoldRoot);
        assert!(
            ended.contains(
                "disabled that kubectl cutover --hold-root added and keeps until --finish (no \
                 cutover is in flight: no cutover.cluster-loop.dev/in-flight mark)"
            ),
            "{ended}"
        );
        assert!(!ended.contains("left behind"), "{ended}");
        assert!(!ended.contains("interrupted"), "{ended}");
        let killed = m(HoldOrigin::InterruptedRun);
        assert!(
            killed.contains(
                "disabled, left behind by an interrupted kubectl cutover --hold-root run (its \
                 cutover.cluster-loop.dev/in-flight mark is still there)"
            ),
            "{killed}"
        );
        let other = m(HoldOrigin::Other {
            manager: Some("kubectl-annotate".into()),
        });
        assert!(
            other.contains("disabled, set by kubectl-annotate, not by kubectl cutover: the root"),
            "{other}"
        );
        // Every one says how to remove it.
        for t in [ended, killed, other] {
            assert!(
                t.ends_with(
                    "kubectl annotate gitrepository -n ns gr kustomize.toolkit.fluxcd.io/reconcile-"
                ),
                "{t}"
            );
        }
        // The JSON of the origin (preflight.current.holdOrigin).
        assert_eq!(
            serde_json::to_value(HoldOrigin::HoldRoot).unwrap(),
            serde_json::json!({"by": "holdRoot"})
        );
        assert_eq!(
            serde_json::to_value(HoldOrigin::Other {
                manager: Some("x".into())
            })
            .unwrap(),
            serde_json::json!({"by": "other", "manager": "x"})
        );
    }
}
