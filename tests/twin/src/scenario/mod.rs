//! Scenario files: a whole Flux world in one YAML file (Git servers and repositories with
//! commit histories, registry contents, the kustomize-controller version and gates, initial
//! objects, timed or conditional events) and the runner that starts it on a twin with the
//! Flux and workload models.
//!
//! Format (all keys optional unless noted; durations are Go durations, nominal time):
//! ```yaml
//! name: bare-tag-rollout              # required
//! description: text
//! timeScale: 0.01                     # real seconds per nominal second (default 0.01)
//! models: true                        # start source/kustomize/workload models (default true)
//! healthCheckInterval: 5s             # kstatus poll during health checks (default 5s)
//! controller:                         # the flux-system/kustomize-controller Deployment
//!   version: v1.8.3                   # image tag
//!   featureGates: {CancelHealthCheckOnNewRevision: true}
//!   concurrent: 4
//!   requeueDependency: 30s
//! registry: [localhost:5000/podinfo:6.5.0]   # pullable images (`repo:*` = any tag)
//! dns: {upstream: {git.example.com: [203.0.113.10]}}   # podexec: real DNS + probe images
//! gitServers:
//!   - name: gitea                     # required; used by placeholders below
//!     repos:
//!       - name: org/fleet             # required
//!         branch: main                # default main
//!         auth: {username: flux, tokens: [tok-1]}
//!         mirrorOf: {server: old, repo: org/fleet, ref: main~1}  # push another repo's commit
//!         commits:                    # applied in order on `branch`
//!           - message: initial
//!             dir: fleet/initial      # files copied to the repo root (relative to the file)
//!             files: {apps/x.yaml: "..."}  # files written (placeholders allowed)
//!             delete: [old.yaml]
//! objects: [ ...Kubernetes objects... ]   # created in order (stringData -> data)
//! fleet: {kustomizations: 300, objects: 10000, waves: 10}   # generated healthy fleet
//! events:
//!   - name: automation-commit         # required, unique
//!     at: 30s                         # not before this nominal time since start
//!     when:                           # and not before this holds (checked on every change)
//!       {apiVersion: ..., kind: ..., namespace: ..., name: ..., condition: Healthy,
//!        status: Unknown, reason: Progressing, messageContains: "..."}
//!     manual: true                    # only when the test calls `fire(name)`
//!     push: {server, repo, branch, message, files: {...}, delete: [...], dir: ...}
//!     revokeToken: {server, repo, token}
//!     addToken: {server, repo, token}
//!     setBranch: {server, repo, branch, ref: <rev on that repo>}
//!     patch: {apiVersion, kind, namespace, name, patch: {...}, status: false}
//!     apply: { ...object... }
//!     delete: {apiVersion, kind, namespace, name}
//!     deletePods: {namespace, labelSelector: app=kustomize-controller}
//!     requestReconcile: {apiVersion, kind, namespace, name}   # sets requestedAt = now
//! ```
//! Placeholders in object strings and pushed files: `{{https:SERVER/REPO}}`,
//! `{{http:SERVER/REPO}}` (clone URLs), `{{ca:SERVER}}` (CA PEM), `{{head:SERVER/REPO/BRANCH}}`
//! (current commit SHA).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::flux::cluster::{Cluster, ClusterRef, ObjKey, s};
use crate::flux::duration::parse_go_duration;
use crate::flux::{FluxModels, ModelOptions};
use crate::git::{Change, GitServer, GitServerOptions};
use crate::workload::{Registry, WorkloadController};
use crate::{Twin, TwinOptions};

/// A scenario failure: which file/event and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read or parsed.
    #[error("{file}: {message}")]
    Invalid {
        /// The scenario file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// Starting the twin, a Git server or loading objects failed.
    #[error("starting scenario '{scenario}': {message}")]
    Start {
        /// Scenario name.
        scenario: String,
        /// What failed.
        message: String,
    },
    /// A wait ran out of time.
    #[error("timed out after {after:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
        /// The last observed value (JSON), for the test failure message.
        last: String,
    },
}

/// Controller settings (`controller:`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerSpec {
    /// Image tag, e.g. `v1.8.3` (default `v1.9.4`).
    pub version: Option<String>,
    /// Feature gates.
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    /// `--concurrent`.
    pub concurrent: Option<u32>,
    /// `--requeue-dependency`.
    pub requeue_dependency: Option<String>,
}

/// `auth:` of a repository.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSpec {
    /// Basic-auth username.
    pub username: String,
    /// Accepted tokens (passwords or bearer tokens).
    pub tokens: Vec<String>,
}

/// One commit of a history.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CommitSpec {
    /// Commit message.
    pub message: String,
    /// Directory (relative to the scenario file) copied to the repo root.
    pub dir: Option<String>,
    /// Files to write.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Paths to delete.
    #[serde(default)]
    pub delete: Vec<String>,
}

/// `mirrorOf:` a commit of another server's repository.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorSpec {
    /// Source server name.
    pub server: String,
    /// Source repository.
    pub repo: String,
    /// A revision of the source repository (`main`, `main~1`, a SHA).
    #[serde(rename = "ref")]
    pub rev: String,
}

/// A repository.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepoSpec {
    /// `org/name`.
    pub name: String,
    /// Branch the commits go to (default `main`).
    pub branch: Option<String>,
    /// Access control.
    pub auth: Option<AuthSpec>,
    /// Start from another repository's commit.
    pub mirror_of: Option<MirrorSpec>,
    /// History.
    #[serde(default)]
    pub commits: Vec<CommitSpec>,
}

/// A Git server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitServerSpec {
    /// Name used in placeholders and events.
    pub name: String,
    /// Repositories.
    #[serde(default)]
    pub repos: Vec<RepoSpec>,
}

/// Generated fleet (`fleet:`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    /// Number of Kustomizations.
    pub kustomizations: usize,
    /// Total inventory objects (ConfigMaps) spread over them.
    pub objects: usize,
    /// Waves (each wave dependsOn the previous).
    pub waves: usize,
}

/// `when:` condition of an event.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WhenSpec {
    /// apiVersion.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Condition type.
    pub condition: String,
    /// Condition status.
    pub status: Option<String>,
    /// Condition reason.
    pub reason: Option<String>,
    /// Substring of the condition message.
    pub message_contains: Option<String>,
}

/// One event.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventSpec {
    /// Unique name.
    pub name: String,
    /// Earliest nominal time since start.
    pub at: Option<String>,
    /// Condition to wait for.
    pub when: Option<WhenSpec>,
    /// Fired only by [`RunningScenario::fire`].
    #[serde(default)]
    pub manual: bool,
    /// Push a commit.
    pub push: Option<Value>,
    /// Revoke a token.
    pub revoke_token: Option<Value>,
    /// Add a token.
    pub add_token: Option<Value>,
    /// Move a branch.
    pub set_branch: Option<Value>,
    /// Merge-patch an object.
    pub patch: Option<Value>,
    /// Create or merge an object.
    pub apply: Option<Value>,
    /// Delete an object.
    pub delete: Option<Value>,
    /// Delete pods by label.
    pub delete_pods: Option<Value>,
    /// Set `reconcile.fluxcd.io/requestedAt`.
    pub request_reconcile: Option<Value>,
}

/// A parsed scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// What it reproduces.
    #[serde(default)]
    pub description: String,
    /// Real seconds per nominal second.
    pub time_scale: Option<f64>,
    /// Start the models (default true).
    pub models: Option<bool>,
    /// Nominal health-check poll interval (kustomize-controller: 5s).
    pub health_check_interval: Option<String>,
    /// Controller Deployment settings.
    #[serde(default)]
    pub controller: ControllerSpec,
    /// Pullable images.
    #[serde(default)]
    pub registry: Vec<String>,
    /// Git servers.
    #[serde(default)]
    pub git_servers: Vec<GitServerSpec>,
    /// Initial objects.
    #[serde(default)]
    pub objects: Vec<Value>,
    /// Generated healthy fleet.
    pub fleet: Option<FleetSpec>,
    /// Events.
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// Hook (podexec): when set, probe-image pods run for real against a real cluster DNS
    /// ([`crate::podexec`]).
    pub dns: Option<crate::podexec::DnsSpec>,
    /// Directory relative paths resolve against.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

impl Scenario {
    /// Reads a scenario file. Errors name the file and the problem.
    pub fn from_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::Invalid {
            file: path.display().to_string(),
            message: format!("cannot read: {e}"),
        })?;
        Self::from_yaml(
            &text,
            path.parent().unwrap_or(Path::new(".")),
            &path.display().to_string(),
        )
    }

    /// Parses scenario YAML; `base_dir` resolves `dir:` entries; `file` names it in errors.
    pub fn from_yaml(text: &str, base_dir: &Path, file: &str) -> Result<Scenario, ScenarioError> {
        let mut sc: Scenario =
            serde_saphyr::from_str(text).map_err(|e| ScenarioError::Invalid {
                file: file.to_string(),
                message: format!("not a valid scenario: {e}"),
            })?;
        sc.base_dir = base_dir.to_path_buf();
        let mut names = std::collections::HashSet::new();
        for e in &sc.events {
            if !names.insert(e.name.clone()) {
                return Err(ScenarioError::Invalid {
                    file: file.into(),
                    message: format!(
                        "event name '{}' is used twice; names must be unique",
                        e.name
                    ),
                });
            }
            if let Some(a) = &e.at {
                parse_go_duration(a).map_err(|m| ScenarioError::Invalid {
                    file: file.into(),
                    message: format!("event '{}': at: {m}", e.name),
                })?;
            }
        }
        Ok(sc)
    }

    /// The shipped scenario directory (`tests/twin/scenarios`).
    pub fn shipped_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
    }

    /// Loads a shipped scenario by file stem (e.g. `bare-tag-rollout`).
    pub fn shipped(name: &str) -> Result<Scenario, ScenarioError> {
        Self::from_file(&Self::shipped_dir().join(format!("{name}.yaml")))
    }
}

/// Options for [`RunningScenario::start`].
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Overrides the scenario's `timeScale`.
    pub time_scale: Option<f64>,
    /// Overrides the scenario's `models`.
    pub models: Option<bool>,
    /// Twin options (CRDs are always installed).
    pub twin: Option<TwinOptions>,
}

/// A started scenario: the twin, its Git servers, the models and the event runner.
pub struct RunningScenario {
    /// The twin API server.
    pub twin: Twin,
    /// Git servers by name.
    pub git: BTreeMap<String, Arc<GitServer>>,
    /// Flux models (when started).
    pub flux: Option<FluxModels>,
    /// Workload model (when started).
    pub workloads: Option<Arc<WorkloadController>>,
    /// The image registry the kubelet pulls from.
    pub registry: Registry,
    /// Hook (podexec): the probe-image runtime and cluster DNS (when the scenario has `dns:`).
    pub podexec: Option<crate::podexec::PodExec>,
    /// Model options (time scale, storage).
    pub options: Arc<ModelOptions>,
    /// Real start time.
    pub started: Instant,
    fired: Arc<Mutex<Vec<String>>>,
    fired_notify: Arc<Notify>,
    manual: Arc<Mutex<Vec<String>>>,
    manual_notify: Arc<Notify>,
    scenario: Scenario,
    _storage: tempfile::TempDir,
}

impl Drop for RunningScenario {
    fn drop(&mut self) {
        if let Some(f) = &self.flux {
            f.stop();
        }
        if let Some(w) = &self.workloads {
            w.stop();
        }
    }
}

fn start_err(sc: &Scenario, m: impl std::fmt::Display) -> ScenarioError {
    ScenarioError::Start {
        scenario: sc.name.clone(),
        message: m.to_string(),
    }
}

/// Replaces `{{https:S/R}}`, `{{http:S/R}}`, `{{ca:S}}`, `{{head:S/R/BRANCH}}`.
pub fn expand(text: &str, git: &BTreeMap<String, Arc<GitServer>>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find("}}") else {
            out.push_str(&rest[i..]);
            return out;
        };
        let inner = &rest[i + 2..i + j];
        let rep = (|| {
            let (kind, arg) = inner.split_once(':')?;
            let (server, repo) = arg.split_once('/').unwrap_or((arg, ""));
            let g = git.get(server)?;
            Some(match kind {
                "https" => g.url_https(repo),
                "http" => g.url_http(repo),
                "ca" => g.ca_pem().to_string(),
                "head" => {
                    let (r, b) = repo.rsplit_once('/')?;
                    g.head(r, b).ok()?
                }
                _ => return None,
            })
        })();
        match rep {
            Some(r) => out.push_str(&r),
            None => out.push_str(&rest[i..i + j + 2]),
        }
        rest = &rest[i + j + 2..];
    }
    out.push_str(rest);
    out
}

fn expand_value(v: &Value, git: &BTreeMap<String, Arc<GitServer>>) -> Value {
    match v {
        Value::String(s) => Value::String(expand(s, git)),
        Value::Array(a) => Value::Array(a.iter().map(|x| expand_value(x, git)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), expand_value(x, git)))
                .collect(),
        ),
        o => o.clone(),
    }
}

/// Moves a Secret's `stringData` into base64 `data`, as the apiserver does on write.
pub fn fold_string_data(mut obj: Value) -> Value {
    if obj["kind"] == "Secret"
        && let Some(sd) = obj.get("stringData").and_then(Value::as_object).cloned()
    {
        let b64 = base64::engine::general_purpose::STANDARD;
        if !obj["data"].is_object() {
            obj["data"] = json!({});
        }
        for (k, v) in sd {
            obj["data"][&k] = json!(b64.encode(v.as_str().unwrap_or_default()));
        }
        obj.as_object_mut().map(|m| m.remove("stringData"));
    }
    obj
}

fn changes_of(c: &CommitSpec, base: &Path, git: &BTreeMap<String, Arc<GitServer>>) -> Vec<Change> {
    let mut ch = Vec::new();
    if let Some(d) = &c.dir {
        ch.push(Change::CopyDir {
            src: base.join(d),
            dest: String::new(),
        });
    }
    for p in &c.delete {
        ch.push(Change::delete(p.clone()));
    }
    for (p, body) in &c.files {
        ch.push(Change::write(p.clone(), expand(body, git).into_bytes()));
    }
    ch
}

/// Annotation on the twin's kustomize-controller Deployment: the models' time scale (real
/// seconds per nominal second). A real cluster has no such thing; it is the one place a client
/// can learn that a `with a timeout of 15m0s` check here ends after 15m × scale of wall time
/// (kubectl-unstick reads it to print true deadlines). Not upstream.
pub const TIME_SCALE_ANNOTATION: &str = "twin.cluster-loop.dev/time-scale";

/// The kustomize-controller Deployment for `controller:` (image tag and args as flux install
/// writes them, plus the gates), annotated with the models' `time_scale`
/// ([`TIME_SCALE_ANNOTATION`]).
pub fn controller_deployment(c: &ControllerSpec, time_scale: f64) -> Value {
    let version = c.version.clone().unwrap_or_else(|| "v1.9.4".into());
    let mut args = vec![
        "--events-addr=http://notification-controller.flux-system.svc.cluster.local./".to_string(),
        "--watch-all-namespaces=true".into(),
        "--log-level=info".into(),
        "--log-encoding=json".into(),
        "--enable-leader-election".into(),
    ];
    if let Some(n) = c.concurrent {
        args.push(format!("--concurrent={n}"));
    }
    if let Some(r) = &c.requeue_dependency {
        args.push(format!("--requeue-dependency={r}"));
    }
    if !c.feature_gates.is_empty() {
        let g: Vec<String> = c
            .feature_gates
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        args.push(format!("--feature-gates={}", g.join(",")));
    }
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "kustomize-controller", "namespace": "flux-system",
            "annotations": {TIME_SCALE_ANNOTATION: time_scale.to_string()},
            "labels": {"app.kubernetes.io/component": "kustomize-controller",
                "app.kubernetes.io/instance": "flux-system", "app.kubernetes.io/part-of": "flux"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "kustomize-controller"}},
            "template": {
                "metadata": {"labels": {"app": "kustomize-controller"}},
                "spec": {"serviceAccountName": "kustomize-controller", "containers": [{
                    "name": "manager",
                    "image": format!("ghcr.io/fluxcd/kustomize-controller:{version}"),
                    "args": args,
                }]},
            },
        },
    })
}

impl RunningScenario {
    /// Starts everything: the twin, Git servers with their histories, the registry, the
    /// controller Deployment, the initial objects (or the generated fleet), the models, and
    /// the event runner. Must run on a multi-thread tokio runtime.
    pub async fn start(
        scenario: Scenario,
        run: RunOptions,
    ) -> Result<RunningScenario, ScenarioError> {
        let sc = scenario;
        let twin = Twin::start(run.twin.clone().unwrap_or_default())
            .await
            .map_err(|e| start_err(&sc, e))?;
        let store = twin.store();
        // Git servers
        let mut git: BTreeMap<String, Arc<GitServer>> = BTreeMap::new();
        for gs in &sc.git_servers {
            let srv = tokio::task::spawn_blocking(|| GitServer::start(GitServerOptions::default()))
                .await
                .map_err(|e| start_err(&sc, e))?
                .map_err(|e| start_err(&sc, format!("git server '{}': {e}", gs.name)))?;
            git.insert(gs.name.clone(), Arc::new(srv));
        }
        for gs in &sc.git_servers {
            for r in &gs.repos {
                let g = git[&gs.name].clone();
                let branch = r.branch.clone().unwrap_or_else(|| "main".into());
                let r2 = r.clone();
                let base = sc.base_dir.clone();
                let all = git.clone();
                let name = sc.name.clone();
                tokio::task::spawn_blocking(move || -> Result<(), String> {
                    g.create_repo(&r2.name, &branch)
                        .map_err(|e| e.to_string())?;
                    if let Some(m) = &r2.mirror_of {
                        let src = all
                            .get(&m.server)
                            .ok_or_else(|| format!("mirrorOf: no git server '{}'", m.server))?;
                        let out = std::process::Command::new("git")
                            .arg("--git-dir")
                            .arg(src.repo_path(&m.repo))
                            .args(["push", "-q"])
                            .arg(g.repo_path(&r2.name))
                            .arg(format!("{}:refs/heads/{branch}", m.rev))
                            .env("GIT_CONFIG_NOSYSTEM", "1")
                            .output()
                            .map_err(|e| e.to_string())?;
                        if !out.status.success() {
                            return Err(format!(
                                "mirrorOf {}: {}",
                                m.rev,
                                String::from_utf8_lossy(&out.stderr)
                            ));
                        }
                    }
                    for c in &r2.commits {
                        g.commit_on(&r2.name, &branch, &changes_of(c, &base, &all), &c.message)
                            .map_err(|e| {
                                format!("{name}: repo {}: commit '{}': {e}", r2.name, c.message)
                            })?;
                    }
                    if let Some(a) = &r2.auth {
                        let toks: Vec<&str> = a.tokens.iter().map(String::as_str).collect();
                        g.set_auth(&r2.name, &a.username, &toks)
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
                .await
                .map_err(|e| start_err(&sc, e))?
                .map_err(|e| start_err(&sc, e))?;
            }
        }
        // registry + controller
        let registry = Registry::new(&sc.registry);
        registry.add("ghcr.io/fluxcd/kustomize-controller:*");
        registry.add("ghcr.io/fluxcd/source-controller:*");
        let time_scale = run.time_scale.or(sc.time_scale).unwrap_or(0.01);
        let mut initial = vec![controller_deployment(&sc.controller, time_scale)];
        for o in &sc.objects {
            initial.push(fold_string_data(expand_value(o, &git)));
        }
        let cluster: ClusterRef = Arc::new(store.clone());
        for o in &initial {
            if s(o, "/kind") == "Namespace" || s(o, "/metadata/namespace").is_empty() {
                continue;
            }
            store.ensure_namespace(s(o, "/metadata/namespace"));
        }
        for o in initial {
            let status = o.get("status").cloned();
            let created = cluster.create(o.clone()).map_err(|e| {
                start_err(
                    &sc,
                    format!("object {}: {}", ObjKey::of(&o).name, e.message),
                )
            })?;
            if let Some(st) = status {
                let _ = cluster.merge_patch_status(
                    &ObjKey::of(&created),
                    json!({"status": st}),
                    "scenario",
                );
            }
        }
        if let Some(f) = &sc.fleet {
            seed_fleet(&*cluster, f).map_err(|e| start_err(&sc, e))?;
        }
        let storage = tempfile::Builder::new()
            .prefix("twin-flux-storage-")
            .tempdir()
            .map_err(|e| start_err(&sc, e))?;
        let mut opts = ModelOptions::new(time_scale, storage.path().to_path_buf());
        opts.git_env = Vec::new();
        if let Some(h) = &sc.health_check_interval {
            opts.health_poll = parse_go_duration(h)
                .map_err(|e| start_err(&sc, format!("healthCheckInterval: {e}")))?;
        }
        let opts = Arc::new(opts);
        // Hook (podexec): before the models, so the workload kubelet leaves probe pods to it.
        let podexec = match &sc.dns {
            Some(d) => Some(
                crate::podexec::PodExec::start(store.clone(), d.options())
                    .await
                    .map_err(|e| start_err(&sc, e))?,
            ),
            None => None,
        };
        let models = run.models.or(sc.models).unwrap_or(true);
        let (flux, workloads) = if models {
            let w = WorkloadController::start(cluster.clone(), opts.clone(), registry.clone());
            let f = FluxModels::start(cluster.clone(), (*opts).clone());
            (Some(f), Some(w))
        } else {
            (None, None)
        };
        let rs = RunningScenario {
            twin,
            git,
            flux,
            workloads,
            registry,
            podexec,
            options: opts,
            started: Instant::now(),
            fired: Arc::new(Mutex::new(Vec::new())),
            fired_notify: Arc::new(Notify::new()),
            manual: Arc::new(Mutex::new(Vec::new())),
            manual_notify: Arc::new(Notify::new()),
            scenario: sc,
            _storage: storage,
        };
        rs.spawn_events();
        Ok(rs)
    }

    /// The scenario being run.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The twin's store as a model [`Cluster`].
    pub fn cluster(&self) -> ClusterRef {
        Arc::new(self.twin.store())
    }

    /// Names of the events fired so far, in order.
    pub fn fired(&self) -> Vec<String> {
        self.fired.lock().unwrap().clone()
    }

    /// Fires a `manual: true` event (its `when`/`at` still apply).
    pub fn fire(&self, name: &str) {
        self.manual.lock().unwrap().push(name.to_string());
        self.manual_notify.notify_waiters();
    }

    /// Waits (watch-driven) until event `name` has fired.
    pub async fn wait_fired(&self, name: &str, timeout: Duration) -> Result<(), ScenarioError> {
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.fired_notify.notified();
            if self.fired.lock().unwrap().iter().any(|f| f == name) {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline.into(), n).await.is_err() {
                return Err(ScenarioError::Timeout {
                    what: format!("event '{name}'"),
                    after: timeout,
                    last: format!("{:?}", self.fired()),
                });
            }
        }
    }

    /// Waits until the object satisfies `pred`, re-checking on every watch event of its kind
    /// (no polling). Returns the object.
    pub async fn wait_for(
        &self,
        key: &ObjKey,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<Value, ScenarioError> {
        wait_for(&*self.cluster(), key, timeout, pred).await
    }

    fn spawn_events(&self) {
        let events = self.scenario.events.clone();
        let cluster = self.cluster();
        let git = self.git.clone();
        let fired = self.fired.clone();
        let fired_notify = self.fired_notify.clone();
        let manual = self.manual.clone();
        let manual_notify = self.manual_notify.clone();
        let opts = self.options.clone();
        let start = self.started;
        tokio::spawn(async move {
            for ev in events {
                if ev.manual {
                    loop {
                        let n = manual_notify.notified();
                        if manual.lock().unwrap().contains(&ev.name) {
                            break;
                        }
                        n.await;
                    }
                }
                if let Some(a) = &ev.at {
                    let at = start + opts.scaled(parse_go_duration(a).unwrap_or_default());
                    tokio::time::sleep_until(at.into()).await;
                }
                if let Some(w) = &ev.when {
                    let key = ObjKey::new(&w.api_version, &w.kind, &w.namespace, &w.name);
                    let mut w2 = w.clone();
                    w2.message_contains = w2.message_contains.map(|m| expand(&m, &git));
                    let _ = wait_for(&*cluster, &key, Duration::from_secs(3600), move |o| {
                        when_holds(&w2, o)
                    })
                    .await;
                }
                let r = run_action(&*cluster, &git, &ev).await;
                if let Err(e) = r {
                    eprintln!("scenario event '{}' failed: {e}", ev.name);
                }
                fired.lock().unwrap().push(ev.name.clone());
                fired_notify.notify_waiters();
            }
        });
    }
}

fn when_holds(w: &WhenSpec, o: &Value) -> bool {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter().any(|c| {
                c["type"] == w.condition.as_str()
                    && w.status.as_ref().is_none_or(|x| c["status"] == x.as_str())
                    && w.reason.as_ref().is_none_or(|x| c["reason"] == x.as_str())
                    && w.message_contains
                        .as_ref()
                        .is_none_or(|x| s(c, "/message").contains(x.as_str()))
            })
        })
}

/// Waits until `pred` holds for the object `key` (absent objects read as `Value::Null`),
/// driven by watch events of its kind; the deadline is real time.
pub async fn wait_for(
    cluster: &dyn Cluster,
    key: &ObjKey,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Result<Value, ScenarioError> {
    let mut rx = cluster.watch(&[(&key.api_version, &key.kind)]);
    let deadline = Instant::now() + timeout;
    let cur = cluster.get(key).ok().flatten().unwrap_or(Value::Null);
    if pred(&cur) {
        return Ok(cur);
    }
    loop {
        match tokio::time::timeout_at(deadline.into(), rx.recv()).await {
            Ok(Some(ch)) => {
                // every intermediate state counts, not only the latest one
                if ObjKey::of(&ch.object) == *key && pred(&ch.object) {
                    return Ok(ch.object);
                }
                continue;
            }
            Ok(None) | Err(_) => {
                let cur = cluster.get(key).ok().flatten().unwrap_or(Value::Null);
                if pred(&cur) {
                    return Ok(cur);
                }
                return Err(ScenarioError::Timeout {
                    what: format!("{}/{}/{}", key.kind, key.namespace, key.name),
                    after: timeout,
                    last: serde_json::to_string(&cur.get("status")).unwrap_or_default(),
                });
            }
        }
    }
}

fn key_of(v: &Value) -> ObjKey {
    ObjKey::new(
        s(v, "/apiVersion"),
        s(v, "/kind"),
        s(v, "/namespace"),
        s(v, "/name"),
    )
}

async fn run_action(
    cluster: &dyn Cluster,
    git: &BTreeMap<String, Arc<GitServer>>,
    ev: &EventSpec,
) -> Result<(), String> {
    let server = |v: &Value| -> Result<Arc<GitServer>, String> {
        git.get(s(v, "/server"))
            .cloned()
            .ok_or_else(|| format!("no git server '{}'", s(v, "/server")))
    };
    if let Some(p) = &ev.push {
        let g = server(p)?;
        let c = CommitSpec {
            message: s(p, "/message").to_string(),
            dir: p.get("dir").and_then(Value::as_str).map(str::to_string),
            files: p
                .get("files")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            delete: p
                .get("delete")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let repo = s(p, "/repo").to_string();
        let branch = match s(p, "/branch") {
            "" => "main".to_string(),
            b => b.to_string(),
        };
        let changes = changes_of(&c, Path::new("."), git);
        tokio::task::spawn_blocking(move || g.commit_on(&repo, &branch, &changes, &c.message))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
    }
    if let Some(v) = &ev.revoke_token {
        server(v)?.revoke_token(s(v, "/repo"), s(v, "/token"));
    }
    if let Some(v) = &ev.add_token {
        server(v)?
            .add_token(s(v, "/repo"), s(v, "/token"))
            .map_err(|e| e.to_string())?;
    }
    if let Some(v) = &ev.set_branch {
        let g = server(v)?;
        let repo = s(v, "/repo").to_string();
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(g.repo_path(&repo))
            .args([
                "rev-parse",
                "--verify",
                &format!("{}^{{commit}}", s(v, "/ref")),
            ])
            .output()
            .map_err(|e| e.to_string())?;
        let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
        g.set_branch(&repo, s(v, "/branch"), &sha)
            .map_err(|e| e.to_string())?;
    }
    if let Some(v) = &ev.patch {
        let k = key_of(v);
        let body = expand_value(&v["patch"], git);
        if v["status"] == true {
            cluster
                .merge_patch_status(&k, body, "scenario")
                .map_err(|e| e.message)?;
        } else {
            cluster
                .merge_patch(&k, body, "scenario")
                .map_err(|e| e.message)?;
        }
    }
    if let Some(v) = &ev.apply {
        crate::flux::cluster::apply(cluster, &fold_string_data(expand_value(v, git)), "scenario")
            .map_err(|e| e.message)?;
    }
    if let Some(v) = &ev.delete {
        cluster.delete(&key_of(v)).map_err(|e| e.message)?;
    }
    if let Some(v) = &ev.delete_pods {
        let (lk, lv) = s(v, "/labelSelector").split_once('=').unwrap_or(("", ""));
        for p in cluster
            .list("v1", "Pod", Some(s(v, "/namespace")))
            .map_err(|e| e.message)?
        {
            if s(&p, &format!("/metadata/labels/{}", lk.replace('/', "~1"))) == lv {
                let _ = cluster.delete(&ObjKey::of(&p));
            }
        }
    }
    if let Some(v) = &ev.request_reconcile {
        let now = jiff::Timestamp::now().to_string();
        cluster
            .merge_patch(
                &key_of(v),
                json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}}),
                "scenario",
            )
            .map_err(|e| e.message)?;
    }
    Ok(())
}

/// Generates a healthy fleet straight into the store (benchmark seed, no build): GitRepository
/// `flux-system/flux-system` with an artifact, `f.kustomizations` Kustomizations
/// `wave-W-NNN` in `f.waves` waves (each dependsOn the previous wave's first member) with
/// Ready=True status and inventories, and `f.objects` ConfigMaps labelled with their owner.
pub fn seed_fleet(cluster: &dyn Cluster, f: &FleetSpec) -> Result<(), String> {
    let sha = "4f1c0c9d2b7e8a6f5d3c1b0a9e8d7c6b5a4f3e2d";
    let rev = format!("main@sha1:{sha}");
    let now = crate::flux::cluster::now_rfc3339();
    let ready = |msg: &str, gen_: i64| {
        json!([{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
        "message": msg, "observedGeneration": gen_, "lastTransitionTime": now}])
    };
    let repo = cluster
        .create(json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "flux-system", "namespace": "flux-system"},
            "spec": {"interval": "1m", "url": "https://gitea.example.local/org/fleet.git", "ref": {"branch": "main"}}}))
        .map_err(|e| e.message)?;
    cluster
        .merge_patch_status(&ObjKey::of(&repo), json!({"status": {
            "observedGeneration": 1,
            "artifact": {"revision": rev, "digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                "path": format!("gitrepository/flux-system/flux-system/{sha}.tar.gz"), "size": 1024, "lastUpdateTime": now,
                "url": format!("http://source-controller.flux-system.svc.cluster.local./gitrepository/flux-system/flux-system/{sha}.tar.gz")},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
                "message": format!("stored artifact for revision '{rev}'"), "lastTransitionTime": now}]}}), "scenario")
        .map_err(|e| e.message)?;
    let waves = f.waves.max(1);
    let per_wave = f.kustomizations.div_ceil(waves);
    let mut made = 0usize;
    for i in 0..f.kustomizations {
        let wave = i / per_wave;
        let name = format!("wave-{wave}-{:03}", i % per_wave);
        let ns = format!("fleet-{wave}");
        let count = f.objects / f.kustomizations + usize::from(i < f.objects % f.kustomizations);
        let mut entries = Vec::new();
        for j in 0..count {
            let cm = format!("{name}-cm-{j:03}");
            entries.push(json!({"id": format!("{ns}_{cm}__ConfigMap"), "v": "v1"}));
        }
        let mut spec = json!({"interval": "10m", "path": format!("./apps/wave-{wave}/{name}"), "prune": true,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"},
            "targetNamespace": ns});
        if wave > 0 {
            spec["dependsOn"] = json!([{"name": format!("wave-{}-000", wave - 1)}]);
        }
        let ks = cluster
            .create(
                json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": name, "namespace": "flux-system"}, "spec": spec}),
            )
            .map_err(|e| e.message)?;
        cluster
            .merge_patch_status(
                &ObjKey::of(&ks),
                json!({"status": {
                "observedGeneration": 1, "lastAppliedRevision": rev, "lastAttemptedRevision": rev,
                "conditions": ready(&format!("Applied revision: {rev}"), 1),
                "inventory": {"entries": entries}}}),
                "scenario",
            )
            .map_err(|e| e.message)?;
        if i % per_wave == 0 {
            let _ = cluster
                .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        }
        for j in 0..count {
            cluster
                .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("{name}-cm-{j:03}"), "namespace": ns,
                        "labels": {"kustomize.toolkit.fluxcd.io/name": name, "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
                    "data": {"index": j.to_string()}}))
                .map_err(|e| e.message)?;
            made += 1;
        }
    }
    if made != f.objects {
        return Err(format!(
            "fleet generated {made} objects, expected {}",
            f.objects
        ));
    }
    Ok(())
}
