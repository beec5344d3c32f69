//! source-controller model for `GitRepository` (source.toolkit.fluxcd.io/v1).
//!
//! Read from fluxcd/source-controller `internal/controller/gitrepository_controller.go`
//! (`reconcile`, `reconcileSource`, `gitCheckout`, `reconcileArtifact`, `notify`),
//! `internal/reconcile/reconcile.go` (`ComputeReconcileResult`), fluxcd/pkg `git/gogit/clone.go`
//! and `runtime/reconcile` (`ProgressiveStatus`). Behaviour:
//! - Fetches with the real `git` CLI from `spec.url`. `spec.secretRef` keys: `username` +
//!   `password` (basic auth header), `bearerToken` (`Authorization: Bearer`), `ca.crt`
//!   (written to a file and passed as `GIT_SSL_CAINFO`). A missing secret fails with reason
//!   `AuthenticationFailed`: `failed to get secret 'NS/NAME': secrets "NAME" not found`.
//! - `spec.ref` precedence commit > name > semver(not modelled) > tag > branch, default branch
//!   `master` (fluxcd/pkg git `DefaultBranch`). Revision `<branch|tag>@sha1:<40 hex>`,
//!   `<refs/...>@sha1:<hex>` for `name`, `sha1:<hex>` for a bare commit.
//! - Start of a run: Reconciling=True Progressing `processing object: new generation A -> B`
//!   (or `reconciliation in progress`), Ready=Unknown when Ready is absent/Unknown.
//! - New upstream revision: Reconciling and Ready=Unknown `building artifact: new upstream
//!   revision 'R'`, ArtifactOutdated=True NewRevision when an artifact exists.
//! - Success: ArtifactInStorage=True and Ready=True, reason Succeeded, message
//!   `stored artifact for revision 'R'`; Reconciling, FetchFailed, ArtifactOutdated removed;
//!   observedGeneration set; event Normal `NewArtifact` `stored artifact for commit '<subject>'`.
//! - Clone failure: FetchFailed=True and Ready=False, reason GitOperationFailed, message
//!   `failed to checkout and determine revision: unable to clone 'URL': authentication
//!   required` (go-git's error text for HTTP 401; `authorization failed` for 403;
//!   `couldn't find remote ref "refs/heads/x"` for a missing branch); Reconciling stays with
//!   reason ProgressingWithRetry; the old artifact stays; Warning event with the same reason.
//!   Retries back off like controller-runtime's rate limiter (Flux `--min-retry-delay` 750ms,
//!   doubling, `--max-retry-delay` 15m).
//! - Triggers: create, generation change, `reconcile.fluxcd.io/requestedAt` change (copied to
//!   `status.lastHandledReconcileAt`), `spec.interval` after success. `spec.suspend` skips.
//! - Each revision's tree is kept on disk for the kustomize model ([`checkout_dir`]).
//!
//! Left out: finalizers and artifact garbage collection, ssh transport, include, verify,
//! sparseCheckout, ignore rules, proxySecretRef, semver refs, the artifact HTTP server (the
//! artifact `url` is the in-cluster shape but nothing serves it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use super::ModelOptions;
use super::cluster::{ChangeType, ClusterRef, ObjKey, now_rfc3339, record_event, s};
use super::conditions::Conditions;
use super::duration::parse_go_duration;
use super::queue::WorkQueue;

/// `source.toolkit.fluxcd.io/v1`.
pub const SOURCE_API: &str = "source.toolkit.fluxcd.io/v1";
/// The requested-reconcile annotation (fluxcd/pkg apis/meta `ReconcileRequestAnnotation`).
pub const REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";
const COMPONENT: &str = "source-controller";

/// Where the tree of `sha` of GitRepository `ns/name` is kept.
pub fn checkout_dir(storage: &Path, ns: &str, name: &str, sha: &str) -> PathBuf {
    storage.join("gitrepository").join(ns).join(name).join(sha)
}

/// The SHA part of a revision (`main@sha1:<hex>` -> `<hex>`).
pub fn revision_sha(revision: &str) -> &str {
    revision.rsplit_once("sha1:").map(|(_, h)| h).unwrap_or("")
}

/// The reference to fetch and how the revision is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitRef {
    /// `spec.ref.branch` (or the default `master`).
    Branch(String),
    /// `spec.ref.tag`.
    Tag(String),
    /// `spec.ref.name` (a full ref like `refs/heads/main`).
    Name(String),
    /// `spec.ref.commit`, with the optional branch it is on.
    Commit(String, Option<String>),
}

impl GitRef {
    /// Reads `spec.ref` with upstream precedence (commit, name, tag, branch; default
    /// `master`).
    pub fn of(obj: &Value) -> GitRef {
        let r = |k: &str| {
            let v = s(obj, &format!("/spec/ref/{k}"));
            (!v.is_empty()).then(|| v.to_string())
        };
        if let Some(c) = r("commit") {
            GitRef::Commit(c, r("branch"))
        } else if let Some(n) = r("name") {
            GitRef::Name(n)
        } else if let Some(t) = r("tag") {
            GitRef::Tag(t)
        } else {
            GitRef::Branch(r("branch").unwrap_or_else(|| "master".into()))
        }
    }

    /// The revision string for a resolved commit (source-controller `commitReference`).
    pub fn revision(&self, sha: &str) -> String {
        match self {
            GitRef::Branch(b) => format!("{b}@sha1:{sha}"),
            GitRef::Tag(t) => format!("{t}@sha1:{sha}"),
            GitRef::Name(n) => format!("{n}@sha1:{sha}"),
            GitRef::Commit(_, Some(b)) => format!("{b}@sha1:{sha}"),
            GitRef::Commit(_, None) => format!("sha1:{sha}"),
        }
    }
}

/// Credentials from the secretRef.
#[derive(Default, Clone)]
struct Auth {
    header: Option<String>,
    ca_file: Option<PathBuf>,
}

/// The source-controller model; [`SourceController::start`] runs it.
pub struct SourceController {
    cluster: ClusterRef,
    opts: Arc<ModelOptions>,
    queue: WorkQueue<ObjKey>,
    failures: Mutex<HashMap<ObjKey, u32>>,
}

impl SourceController {
    /// Starts the watch and `workers` reconcilers. Returns the controller handle.
    pub fn start(cluster: ClusterRef, opts: Arc<ModelOptions>) -> Arc<SourceController> {
        let ctl = Arc::new(SourceController {
            cluster,
            opts,
            queue: WorkQueue::new(),
            failures: Mutex::new(HashMap::new()),
        });
        let mut rx = ctl.cluster.watch(&[(SOURCE_API, "GitRepository")]);
        if let Ok(list) = ctl.cluster.list(SOURCE_API, "GitRepository", None) {
            for o in list {
                ctl.queue.add(ObjKey::of(&o));
            }
        }
        let c2 = ctl.clone();
        let mut last: HashMap<ObjKey, (i64, String)> = HashMap::new();
        tokio::spawn(async move {
            while let Some(ch) = rx.recv().await {
                let key = ObjKey::of(&ch.object);
                let gen_ = ch.object["metadata"]["generation"].as_i64().unwrap_or(0);
                let req = s(
                    &ch.object,
                    &format!("/metadata/annotations/{}", REQUESTED_AT.replace('/', "~1")),
                )
                .to_string();
                match ch.event {
                    ChangeType::Deleted => {
                        last.remove(&key);
                    }
                    ChangeType::Added => {
                        last.insert(key.clone(), (gen_, req));
                        c2.queue.add(key);
                    }
                    ChangeType::Modified => {
                        let prev = last.insert(key.clone(), (gen_, req.clone()));
                        // GenerationChangedPredicate || ReconcileRequestedPredicate
                        if prev.is_none_or(|(g, r)| g != gen_ || r != req) {
                            c2.queue.add(key);
                        }
                    }
                }
            }
        });
        for _ in 0..2 {
            let c = ctl.clone();
            tokio::spawn(async move {
                while let Some(key) = c.queue.get().await {
                    let requeue = c.reconcile(&key).await;
                    c.queue.done(&key);
                    if let Some(d) = requeue {
                        c.queue.add_after(key, d);
                    }
                }
            });
        }
        ctl
    }

    /// Stops the workers.
    pub fn stop(&self) {
        self.queue.shut_down();
    }

    fn patch_status(&self, key: &ObjKey, obj: &Value, status: &Value) {
        let mut st = status.clone();
        if let (Some(old), Some(new)) = (obj["status"].as_object(), st.as_object_mut()) {
            for k in old.keys() {
                new.entry(k.clone()).or_insert(Value::Null);
            }
        }
        let _ = self
            .cluster
            .merge_patch_status(key, json!({"status": st}), COMPONENT);
    }

    fn backoff(&self, key: &ObjKey, failed: bool) -> Duration {
        let mut f = self.failures.lock().unwrap();
        if !failed {
            f.remove(key);
            return Duration::ZERO;
        }
        let n = f.entry(key.clone()).or_insert(0);
        let d = Duration::from_millis(750).saturating_mul(1u32 << (*n).min(20));
        *n += 1;
        d.min(Duration::from_secs(900))
    }

    async fn reconcile(&self, key: &ObjKey) -> Option<Duration> {
        let obj = self.cluster.get(key).ok().flatten()?;
        if obj.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
            return None;
        }
        let interval =
            parse_go_duration(s(&obj, "/spec/interval")).unwrap_or(Duration::from_secs(60));
        let requested = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(REQUESTED_AT))
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut status = obj.get("status").cloned().unwrap_or_else(|| json!({}));
        let mut conds = Conditions::of(&obj);
        let observed = status["observedGeneration"].as_i64().unwrap_or(-1);
        let progressing_msg = if observed != conds.generation {
            format!(
                "processing object: new generation {observed} -> {}",
                conds.generation
            )
        } else {
            "reconciliation in progress".to_string()
        };
        progressive(&mut conds, false, &progressing_msg);
        status["conditions"] = json!(conds.list);
        // Persist reconciling only if the generation differs or a reconcile was requested.
        if observed != conds.generation
            || requested.as_deref().unwrap_or_default() != s(&obj, "/status/lastHandledReconcileAt")
        {
            self.patch_status(key, &obj, &status);
        }

        let result = self.fetch(&obj, key, &mut conds, &mut status).await;
        if let Some(r) = &requested {
            status["lastHandledReconcileAt"] = json!(r);
        }
        match result {
            Ok(new_artifact) => {
                conds.delete("FetchFailed");
                conds.delete("ArtifactOutdated");
                conds.delete("Reconciling");
                let rev = s(&status, "/artifact/revision").to_string();
                let msg = format!("stored artifact for revision '{rev}'");
                conds.mark_true("ArtifactInStorage", "Succeeded", &msg);
                conds.mark_true("Ready", "Succeeded", &msg);
                status["observedGeneration"] = json!(conds.generation);
                status["conditions"] = json!(conds.list);
                self.patch_status(key, &obj, &status);
                if let Some(subject) = new_artifact {
                    record_event(
                        &*self.cluster,
                        &obj,
                        "Normal",
                        "NewArtifact",
                        &format!("stored artifact for commit '{subject}'"),
                        COMPONENT,
                        Some(json!({
                            "source.toolkit.fluxcd.io/revision": rev,
                            "source.toolkit.fluxcd.io/digest": s(&status, "/artifact/digest"),
                        })),
                    );
                }
                self.backoff(key, false);
                Some(self.opts.scaled(interval))
            }
            Err((reason, msg)) => {
                conds.mark_true("FetchFailed", &reason, &msg);
                conds.mark_false("Ready", &reason, &msg);
                conds.set_reason("Reconciling", "ProgressingWithRetry");
                status["conditions"] = json!(conds.list);
                self.patch_status(key, &obj, &status);
                record_event(
                    &*self.cluster,
                    &obj,
                    "Warning",
                    &reason,
                    &msg,
                    COMPONENT,
                    None,
                );
                Some(self.opts.scaled(self.backoff(key, true)))
            }
        }
    }

    async fn auth(&self, obj: &Value, tmp: &Path) -> Result<Auth, (String, String)> {
        let name = s(obj, "/spec/secretRef/name");
        if name.is_empty() {
            return Ok(Auth::default());
        }
        let ns = s(obj, "/metadata/namespace");
        let secret = self
            .cluster
            .get(&ObjKey::new("v1", "Secret", ns, name))
            .map_err(|e| {
                (
                    "AuthenticationFailed".to_string(),
                    format!("failed to get secret '{ns}/{name}': {}", e.message),
                )
            })?
            .ok_or_else(|| {
                (
                    "AuthenticationFailed".to_string(),
                    format!("failed to get secret '{ns}/{name}': secrets \"{name}\" not found"),
                )
            })?;
        let b64 = base64::engine::general_purpose::STANDARD;
        let field = |k: &str| -> Option<String> {
            let mut v = secret
                .pointer(&format!("/data/{}", k.replace('/', "~1")))
                .and_then(Value::as_str)
                .and_then(|d| b64.decode(d).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            if v.is_none() {
                v = secret
                    .pointer(&format!("/stringData/{k}"))
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            v
        };
        let mut auth = Auth::default();
        if let Some(t) = field("bearerToken") {
            auth.header = Some(format!("Authorization: Bearer {t}"));
        } else if let (Some(u), Some(p)) = (field("username"), field("password")) {
            auth.header = Some(format!(
                "Authorization: Basic {}",
                b64.encode(format!("{u}:{p}"))
            ));
        }
        if let Some(ca) = field("ca.crt").or_else(|| field("caFile")) {
            let f = tmp.join("ca.crt");
            std::fs::write(&f, ca)
                .map_err(|e| ("AuthenticationFailed".to_string(), e.to_string()))?;
            auth.ca_file = Some(f);
        }
        Ok(auth)
    }

    /// Resolves, fetches and stores. `Ok(Some(subject))` for a new artifact, `Ok(None)` when
    /// the revision is unchanged; `Err((reason, message))` otherwise.
    async fn fetch(
        &self,
        obj: &Value,
        key: &ObjKey,
        conds: &mut Conditions,
        status: &mut Value,
    ) -> Result<Option<String>, (String, String)> {
        let tmp =
            tempfile::tempdir().map_err(|e| ("DirCreationFailed".to_string(), e.to_string()))?;
        let auth = self.auth(obj, tmp.path()).await?;
        let url = s(obj, "/spec/url").to_string();
        let gref = GitRef::of(obj);
        let clone_err = |e: String| {
            (
                "GitOperationFailed".to_string(),
                format!("failed to checkout and determine revision: unable to clone '{url}': {e}"),
            )
        };
        let git = Git {
            auth: auth.clone(),
            env: self.opts.git_env.clone(),
        };
        let repo = tmp.path().join("repo");
        git.run(
            None,
            &["init", "-q", "--bare", repo.to_str().unwrap_or_default()],
        )
        .await
        .map_err(clone_err)?;
        let src = match &gref {
            GitRef::Branch(b) => format!("refs/heads/{b}"),
            GitRef::Tag(t) => format!("refs/tags/{t}"),
            GitRef::Name(n) => n.clone(),
            GitRef::Commit(c, _) => c.clone(),
        };
        // Resolve first (ls-remote), so an unchanged revision costs no fetch: upstream's
        // LastObservedCommit optimisation.
        let sha = if let GitRef::Commit(c, _) = &gref {
            c.clone()
        } else {
            let out = git
                .run(Some(&repo), &["ls-remote", &url, &src])
                .await
                .map_err(clone_err)?;
            let line = out
                .lines()
                .find(|l| l.ends_with(&format!("\t{src}")))
                .ok_or_else(|| clone_err(format!("couldn't find remote ref \"{src}\"")))?;
            // annotated tags: prefer the peeled commit
            let peeled = out
                .lines()
                .find(|l| l.ends_with(&format!("\t{src}^{{}}")))
                .unwrap_or(line);
            peeled.split('\t').next().unwrap_or_default().to_string()
        };
        let revision = gref.revision(&sha);
        let ns = &key.namespace;
        let dir = checkout_dir(&self.opts.storage_dir, ns, &key.name, &sha);
        if s(status, "/artifact/revision") == revision && dir.exists() {
            return Ok(None);
        }
        // New upstream revision.
        let msg = format!("building artifact: new upstream revision '{revision}'");
        if status.get("artifact").is_some_and(|a| !a.is_null()) {
            conds.mark_true(
                "ArtifactOutdated",
                "NewRevision",
                &format!("new upstream revision '{revision}'"),
            );
        }
        progressive(conds, true, &msg);
        status["conditions"] = json!(conds.list);
        self.patch_status(key, obj, status);

        let sha = if let GitRef::Commit(c, _) = &gref {
            git.run(
                Some(&repo),
                &["fetch", "-q", &url, "+refs/heads/*:refs/heads/*"],
            )
            .await
            .map_err(clone_err)?;
            git.run(Some(&repo), &["cat-file", "-e", &format!("{c}^{{commit}}")])
                .await
                .map_err(|_| {
                    clone_err(format!(
                        "unable to resolve commit object for '{c}': object not found"
                    ))
                })?;
            c.clone()
        } else {
            git.run(Some(&repo), &["fetch", "-q", "--depth", "1", &url, &src])
                .await
                .map_err(clone_err)?;
            git.run(Some(&repo), &["rev-parse", "FETCH_HEAD"])
                .await
                .map_err(clone_err)?
                .trim()
                .to_string()
        };
        let revision = gref.revision(&sha);
        let dir = checkout_dir(&self.opts.storage_dir, ns, &key.name, &sha);
        let subject = git
            .run(Some(&repo), &["log", "-1", "--format=%s", &sha])
            .await
            .map_err(clone_err)?
            .trim()
            .to_string();
        let tar = tmp.path().join("artifact.tar");
        git.run(
            Some(&repo),
            &[
                "archive",
                "--format=tar",
                "-o",
                tar.to_str().unwrap_or_default(),
                &sha,
            ],
        )
        .await
        .map_err(clone_err)?;
        let stage = dir.with_extension("tmp");
        let _ = std::fs::remove_dir_all(&stage);
        std::fs::create_dir_all(&stage)
            .map_err(|e| ("ArchiveOperationFailed".to_string(), e.to_string()))?;
        let untar = tokio::process::Command::new("tar")
            .arg("-xf")
            .arg(&tar)
            .arg("-C")
            .arg(&stage)
            .output()
            .await
            .map_err(|e| ("ArchiveOperationFailed".to_string(), e.to_string()))?;
        if !untar.status.success() {
            return Err((
                "ArchiveOperationFailed".to_string(),
                String::from_utf8_lossy(&untar.stderr).trim().to_string(),
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&stage, &dir)
            .map_err(|e| ("ArchiveOperationFailed".to_string(), e.to_string()))?;
        let sum = tokio::process::Command::new("sha256sum")
            .arg(&tar)
            .output()
            .await
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
            .unwrap_or_default();
        let size = std::fs::metadata(&tar).map(|m| m.len()).unwrap_or(0);
        let path = format!("gitrepository/{ns}/{}/{sha}.tar.gz", key.name);
        status["artifact"] = json!({
            "digest": format!("sha256:{sum}"),
            "lastUpdateTime": now_rfc3339(),
            "path": path,
            "revision": revision,
            "size": size,
            "url": format!("http://source-controller.flux-system.svc.cluster.local./{path}"),
        });
        Ok(Some(subject))
    }
}

/// fluxcd/pkg runtime/reconcile `ProgressiveStatus`.
fn progressive(conds: &mut Conditions, drift: bool, msg: &str) {
    conds.mark_true("Reconciling", "Progressing", msg);
    let ready_unknown = conds.get("Ready").is_none_or(|c| c["status"] == "Unknown");
    if drift || ready_unknown {
        conds.mark_unknown("Ready", "Progressing", msg);
    }
}

/// Runs the real git CLI with the credentials as an extra HTTP header (never in the URL).
struct Git {
    auth: Auth,
    env: Vec<(String, String)>,
}

impl Git {
    async fn run(&self, dir: Option<&Path>, args: &[&str]) -> Result<String, String> {
        let mut cmd = tokio::process::Command::new("git");
        if let Some(d) = dir {
            cmd.arg("--git-dir").arg(d);
        }
        if let Some(h) = &self.auth.header {
            cmd.arg("-c").arg(format!("http.extraHeader={h}"));
        }
        if let Some(ca) = &self.auth.ca_file {
            // The environment variable, not `-c http.sslCAInfo`: git lets GIT_SSL_CAINFO
            // override the config, and machines (this one included) export it for the system
            // bundle, which would silently drop the secret's CA.
            cmd.env("GIT_SSL_CAINFO", ca);
        }
        cmd.args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "/bin/false")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", std::env::temp_dir())
            .kill_on_drop(true);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let out = cmd.output().await.map_err(|e| format!("git: {e}"))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(go_git_error(&String::from_utf8_lossy(&out.stderr)))
    }
}

/// Maps git CLI failures to the go-git error texts source-controller surfaces
/// (plumbing/transport `ErrAuthenticationRequired` = "authentication required",
/// `ErrAuthorizationFailed` = "authorization failed", `ErrRepositoryNotFound` =
/// "repository not found").
pub fn go_git_error(stderr: &str) -> String {
    let l = stderr.to_lowercase();
    if l.contains("authentication failed")
        || l.contains("could not read username")
        || l.contains("401")
        || l.contains("terminal prompts disabled")
    {
        "authentication required".into()
    } else if l.contains("403") {
        "authorization failed".into()
    } else if l.contains("404") || l.contains("not found") && l.contains("repository") {
        "repository not found".into()
    } else {
        stderr
            .lines()
            .map(|x| x.trim_start_matches("fatal: ").trim())
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_revisions() {
        let o = json!({"spec": {"ref": {"branch": "main"}}});
        assert_eq!(GitRef::of(&o).revision("ab"), "main@sha1:ab");
        let o = json!({"spec": {}});
        assert_eq!(GitRef::of(&o), GitRef::Branch("master".into()));
        let o = json!({"spec": {"ref": {"branch": "main", "tag": "v1"}}});
        assert_eq!(GitRef::of(&o).revision("ab"), "v1@sha1:ab");
        let o = json!({"spec": {"ref": {"commit": "ab"}}});
        assert_eq!(GitRef::of(&o).revision("ab"), "sha1:ab");
        let o = json!({"spec": {"ref": {"name": "refs/heads/main"}}});
        assert_eq!(GitRef::of(&o).revision("ab"), "refs/heads/main@sha1:ab");
        assert_eq!(revision_sha("main@sha1:abc"), "abc");
    }

    #[test]
    fn git_errors_map_to_go_git_text() {
        assert_eq!(
            go_git_error("fatal: Authentication failed for 'https://h/r.git/'\n"),
            "authentication required"
        );
        assert_eq!(
            go_git_error(
                "fatal: could not read Username for 'https://h': terminal prompts disabled"
            ),
            "authentication required"
        );
    }
}
