//! Facts about the running kustomize-controller, read from its Deployment: version (image
//! tag), feature gates and worker count. These decide which lever can cancel an in-flight
//! health check.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use cluster_loop::flux::PodTrouble;

use crate::obj;

/// Feature gate name, kustomize-controller internal/features/features.go
/// (`CancelHealthCheckOnNewRevision`, default false; added in v1.7.0).
pub const CANCEL_GATE: &str = "CancelHealthCheckOnNewRevision";

/// Default `--concurrent`, kustomize-controller main.go (`flag.IntVar(&concurrent,
/// "concurrent", 4, ...)`).
pub const DEFAULT_CONCURRENT: u32 = 4;

/// A `vMAJOR.MINOR.PATCH` controller version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Version {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
}

impl Version {
    /// Parse `v1.8.3`, `1.8.3`, `v1.8` (patch 0) with an optional `-suffix`.
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let core = s.split(['-', '+']).next()?;
        let mut it = core.split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        let patch = match it.next() {
            Some(p) => p.parse().ok()?,
            None => 0,
        };
        Some(Version {
            major,
            minor,
            patch,
        })
    }

    /// `major.minor.patch` as a triple, for comparisons.
    pub fn at_least(&self, major: u64, minor: u64, patch: u64) -> bool {
        (self.major, self.minor, self.patch) >= (major, minor, patch)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What the gate does on this controller version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CancelMode {
    /// v1.8.0+ with the gate: any re-queue event (requestedAt, generation, source revision,
    /// watched ConfigMap/Secret) cancels the running health check.
    AnyRequeue,
    /// v1.7.x with the gate: only a new source revision cancels.
    NewRevisionOnly,
    /// Gate off (or controller older than v1.7): nothing at the API cancels; the run holds
    /// its worker until the health check times out.
    Never,
    /// The gate is on but the version could not be read from the image tag.
    Unknown,
}

/// Facts read from the kustomize-controller Deployment.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerFacts {
    /// Deployment namespace.
    pub namespace: String,
    /// Deployment name.
    pub name: String,
    /// Image of the `manager` container (or the first container).
    pub image: String,
    /// Version from the image tag, when it is a semver tag.
    pub version: Option<Version>,
    /// `--feature-gates` as parsed (later flags win, like Go's flag package with
    /// cliflag.MapStringBool).
    pub feature_gates: BTreeMap<String, bool>,
    /// Whether `CancelHealthCheckOnNewRevision=true`.
    pub cancel_gate: bool,
    /// What cancels an in-flight health check on this controller.
    pub cancel_mode: CancelMode,
    /// `--concurrent` (default 4): the number of workers.
    pub concurrent: u32,
    /// `--requeue-dependency` as given (a Go duration such as `5s`), or `30s`, its default
    /// (kustomize-controller main.go `requeueDependency` flag): how often a Kustomization
    /// waiting on dependsOn is re-checked.
    pub requeue_dependency: String,
    /// The manager container's args, verbatim.
    pub args: Vec<String>,
    /// `spec.selector.matchLabels` of the Deployment (to find its pods).
    pub selector: BTreeMap<String, String>,
    /// Why the controller is not running, when it is not ([`not_running`]): `0 replicas`,
    /// or `no ready pod, 0 of N ready`. `None`: running, or not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_running: Option<String>,
    /// `spec.replicas` (1 when unset, the Deployment default).
    pub replicas: i64,
    /// The pod that says why it is not running ([`ControllerFacts::with_pods`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodTrouble>,
    /// `--watch-label-selector` as given (fluxcd/pkg runtime/controller `WatchOptions`,
    /// default empty: every Kustomization). kustomize-controller main.go puts it on its
    /// cache's `ByObject` for Kustomizations only, so a Kustomization it does not select is
    /// never read, never queued and never gets a status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watch_label_selector: Option<String>,
    /// `--watch-all-namespaces` (default true). When false, main.go restricts the cache to
    /// `RUNTIME_NAMESPACE` (`Cache.DefaultNamespaces`): the Deployment's namespace as
    /// `flux install` sets it.
    pub watch_all_namespaces: bool,
    /// `--watch-configs-label-selector` (fluxcd/pkg runtime/controller `WatchOptions`,
    /// default `reconcile.fluxcd.io/watch=Enabled`; empty: every ConfigMap and Secret). The
    /// ConfigMaps and Secrets a Kustomization references are watched only when they match it
    /// ([`ControllerFacts::config_unwatched`]).
    pub watch_configs_label_selector: String,
    /// Leader election as its args set it (`--enable-leader-election`, lease duration, retry
    /// period; the Lease's name from main.go's controller name and the watch selector):
    /// [`crate::leader`]. `None`: off (every ready pod reconciles).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<crate::leader::LeaderElection>,
    /// Why its running pod leads nothing, read from its Lease
    /// ([`ControllerFacts::read_leadership`]). `None`: it leads, leader election is off, or the
    /// Lease was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<cluster_loop::flux::LeaderTrouble>,
}

impl ControllerFacts {
    /// Read the facts from a Deployment object.
    pub fn from_deployment(d: &Value) -> ControllerFacts {
        let containers = obj::arr(d, &["spec", "template", "spec", "containers"]);
        let c = containers
            .iter()
            .find(|c| obj::s(c, &["name"]) == Some("manager"))
            .or_else(|| containers.first());
        let image = c
            .and_then(|c| obj::s(c, &["image"]))
            .unwrap_or("")
            .to_string();
        let mut args: Vec<String> = Vec::new();
        if let Some(c) = c {
            for k in ["command", "args"] {
                args.extend(
                    obj::arr(c, &[k])
                        .iter()
                        .filter_map(|a| a.as_str().map(String::from)),
                );
            }
        }
        let version = image_tag(&image).and_then(Version::parse);
        let mut feature_gates = BTreeMap::new();
        let mut concurrent = DEFAULT_CONCURRENT;
        let mut requeue_dependency = "30s".to_string();
        let mut watch_label_selector = None;
        let mut raw_selector = String::new();
        let mut watch_all_namespaces = true;
        let mut watch_configs_label_selector = DEFAULT_WATCH_CONFIGS_SELECTOR.to_string();
        for (flag, value) in flags(&args) {
            match flag.as_str() {
                "watch-label-selector" => {
                    raw_selector = value.clone();
                    watch_label_selector = Some(value.clone()).filter(|v| !v.trim().is_empty());
                }
                "watch-configs-label-selector" => {
                    watch_configs_label_selector = value.trim().to_string();
                }
                "watch-all-namespaces" => {
                    watch_all_namespaces = !value.eq_ignore_ascii_case("false");
                }
                "feature-gates" => {
                    for kv in value.split(',') {
                        if let Some((k, v)) = kv.split_once('=') {
                            feature_gates.insert(
                                k.trim().to_string(),
                                v.trim().eq_ignore_ascii_case("true"),
                            );
                        }
                    }
                }
                "concurrent" => {
                    if let Ok(n) = value.parse() {
                        concurrent = n;
                    }
                }
                "requeue-dependency" if !value.is_empty() => {
                    requeue_dependency = value.clone();
                }
                _ => {}
            }
        }
        let cancel_gate = feature_gates.get(CANCEL_GATE).copied().unwrap_or(false);
        let cancel_mode = match (cancel_gate, version) {
            (false, _) => CancelMode::Never,
            (true, Some(v)) if v.at_least(1, 8, 0) => CancelMode::AnyRequeue,
            (true, Some(v)) if v.at_least(1, 7, 0) => CancelMode::NewRevisionOnly,
            (true, Some(_)) => CancelMode::Never,
            (true, None) => CancelMode::Unknown,
        };
        let selector = obj::at(d, &["spec", "selector", "matchLabels"])
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let leader_election = crate::leader::LeaderElection::from_args(
            controller_name(&image, obj::name(d)),
            &args,
            &raw_selector,
        );
        ControllerFacts {
            namespace: obj::namespace(d).to_string(),
            name: obj::name(d).to_string(),
            image,
            version,
            feature_gates,
            cancel_gate,
            cancel_mode,
            concurrent,
            requeue_dependency,
            args,
            selector,
            not_running: not_running(d),
            replicas: obj::i(d, &["spec", "replicas"]).unwrap_or(1),
            pod: None,
            watch_label_selector,
            watch_all_namespaces,
            watch_configs_label_selector,
            leader_election,
            leader: None,
        }
    }

    /// Reads whether its running pod leads ([`crate::leader::leader_trouble`]) from `leases`
    /// (`namespace/name` -> the Lease, `None` when it does not exist; a Lease not in the map
    /// was not read: not judged) and `pods` (its pods when read), at `now`, for the Deployment
    /// `d` these facts were read from. Nothing when it is not running or leader election is
    /// off.
    pub fn read_leadership(
        &mut self,
        d: &Value,
        leases: &BTreeMap<String, Option<Value>>,
        pods: &[Value],
        now: jiff::Timestamp,
    ) {
        if self.not_running.is_some() {
            return;
        }
        let Some(le) = &self.leader_election else {
            return;
        };
        let Some(lease) = leases.get(&format!("{}/{}", self.namespace, le.lease)) else {
            return;
        };
        self.leader = crate::leader::leader_trouble(
            controller_name(&self.image, &self.name),
            d,
            le,
            lease.as_ref(),
            pods,
            now,
        );
    }

    /// The facts of Deployment `d` with the pod that says why it is not running, from
    /// `pods` (the Deployment's pods, read when it has no ready one) and `logs` (last log
    /// lines of ended runs by `namespace/pod/container`): [`not_running_with_pods`].
    pub fn with_pods(
        d: &Value,
        pods: &[Value],
        logs: &BTreeMap<String, Vec<String>>,
    ) -> ControllerFacts {
        let mut f = ControllerFacts::from_deployment(d);
        if let Some((why, pod)) = not_running_with_pods(d, pods, logs) {
            f.not_running = Some(why);
            f.pod = pod;
        }
        f
    }

    /// Whether the health check fails fast when a member turns Failed: kustomize-controller
    /// v1.1.0+ (Flux 2.1) unless `--feature-gates=DisableFailFastBehavior=true`
    /// (internal/features/features.go, main.go `failFast`). Unknown version: assumed on.
    pub fn fail_fast(&self) -> bool {
        self.version.is_none_or(|v| (v.major, v.minor) >= (1, 1))
            && !self
                .feature_gates
                .get("DisableFailFastBehavior")
                .copied()
                .unwrap_or(false)
    }

    /// The container arg that turns the gate on while keeping the other gates as they are,
    /// e.g. `--feature-gates=CancelHealthCheckOnNewRevision=true` (fluxcd/pkg
    /// runtime/features: flag `--feature-gates`, `name=bool` pairs separated by commas).
    pub fn gate_arg(&self) -> String {
        let mut gates = self.feature_gates.clone();
        gates.insert(CANCEL_GATE.to_string(), true);
        let list: Vec<String> = gates.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("--feature-gates={}", list.join(","))
    }
}

impl ControllerFacts {
    /// Why a change of the ConfigMap or Secret `cfg` (its metadata as read: kind, namespace,
    /// name, labels) starts no run of the Kustomizations that reference it, or `None` when
    /// this controller is told about it. kustomize-controller indexes the references
    /// (`postBuild.substituteFrom`, `decryption.secretRef`, `kubeConfig.secretRef` /
    /// `configMapRef`: kustomization_manager.go `indexConfigMap` / `indexSecret`) and, since
    /// v1.7.0 (#1486), watches the metadata of ConfigMaps and Secrets that match
    /// `--watch-configs-label-selector` (`requestsForConfigDependency`), unless
    /// `--feature-gates=DisableConfigWatchers=true` (v1.7.3+). Before v1.7.0 no change of
    /// them starts a run. A selector that does not parse is not judged.
    pub fn config_unwatched(&self, cfg: &Value) -> Option<String> {
        let who = format!("{}/{}", self.namespace, self.name);
        if let Some(v) = self.version.filter(|v| !v.at_least(1, 7, 0)) {
            return Some(format!(
                "{who} is kustomize-controller {v}, which watches no ConfigMap or Secret (watching them came in v1.7.0)"
            ));
        }
        if self
            .feature_gates
            .get("DisableConfigWatchers")
            .copied()
            .unwrap_or(false)
        {
            return Some(format!(
                "{who} runs with --feature-gates=DisableConfigWatchers=true: it watches no ConfigMap or Secret"
            ));
        }
        let sel = self.watch_configs_label_selector.as_str();
        if sel.is_empty() {
            return None;
        }
        let parsed = parse_label_selector(sel)?;
        let labels = labels_of(cfg);
        (!kube::core::SelectorExt::matches(&parsed, &labels)).then(|| {
            format!(
                "{} {}/{} does not match {who}'s --watch-configs-label-selector={sel}{}",
                obj::kind(cfg),
                obj::namespace(cfg),
                obj::name(cfg),
                if sel == DEFAULT_WATCH_CONFIGS_SELECTOR {
                    " (the default: label it reconcile.fluxcd.io/watch: Enabled)"
                } else {
                    ""
                }
            )
        })
    }
}

/// kustomize-controller's default `--watch-configs-label-selector` (fluxcd/pkg
/// runtime/controller watch.go: `meta.LabelKeyWatch + "=" + meta.LabelValueWatchEnabled`).
pub const DEFAULT_WATCH_CONFIGS_SELECTOR: &str = "reconcile.fluxcd.io/watch=Enabled";

impl ControllerFacts {
    /// Why this controller never reads the Kustomization `ks` (labels and namespace as
    /// read), or `None` when it watches it: its `--watch-label-selector` does not select the
    /// object's labels (Flux sharding: the main shard runs with
    /// `!sharding.fluxcd.io/key`, each shard with `sharding.fluxcd.io/key=<shard>`), or
    /// `--watch-all-namespaces=false` and `ks` lives outside the controller's namespace.
    /// kustomize-controller main.go (v1.7.3, v1.9.6, v1.10.1) applies both to its cache, so
    /// such an object gets no run, no status and no request handled, ever. A selector that
    /// does not parse is not judged (`None`): the controller would not have started with it.
    pub fn excludes(&self, ks: &Value) -> Option<String> {
        let ns = obj::namespace(ks);
        if !self.watch_all_namespaces && ns != self.namespace {
            return Some(format!(
                "{}/{} runs with --watch-all-namespaces=false: it watches only namespace {}",
                self.namespace, self.name, self.namespace
            ));
        }
        let sel = self.watch_label_selector.as_deref()?;
        let parsed = parse_label_selector(sel)?;
        let labels = labels_of(ks);
        (!kube::core::SelectorExt::matches(&parsed, &labels)).then(|| {
            let shown: Vec<String> = labels
                .iter()
                .filter(|(k, _)| sel.contains(k.as_str()))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!(
                "{}/{} runs with --watch-label-selector={sel}, which does not select its labels ({})",
                self.namespace,
                self.name,
                if shown.is_empty() {
                    "none of the selector's keys".to_string()
                } else {
                    shown.join(", ")
                }
            )
        })
    }
}

/// `metadata.labels` as a map.
pub fn labels_of(v: &Value) -> BTreeMap<String, String> {
    obj::at(v, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A label selector in the syntax of `kubectl -l` and `--watch-label-selector`
/// (k8s.io/apimachinery labels.Parse): comma-separated requirements, each `key`, `!key`,
/// `key=value`, `key==value`, `key!=value`, `key in (a,b)` or `key notin (a,b)`, all of
/// which must hold. `None` when it does not parse.
pub fn parse_label_selector(s: &str) -> Option<kube::core::Selector> {
    use kube::core::{Expression, Selector};
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for ch in s.chars() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                terms.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    terms.push(cur);
    let set = |v: &str| -> Option<std::collections::BTreeSet<String>> {
        let inner = v.trim().strip_prefix('(')?.strip_suffix(')')?;
        Some(inner.split(',').map(|x| x.trim().to_string()).collect())
    };
    let mut exprs = Vec::new();
    for t in terms.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
        let e = if let Some(k) = t.strip_prefix('!') {
            Expression::DoesNotExist(k.trim().to_string())
        } else if let Some((k, v)) = t.split_once("!=") {
            Expression::NotEqual(k.trim().to_string(), v.trim().to_string())
        } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
            Expression::Equal(k.trim().to_string(), v.trim().to_string())
        } else if let Some((k, v)) = t.split_once(" notin ") {
            Expression::NotIn(k.trim().to_string(), set(v)?)
        } else if let Some((k, v)) = t.split_once(" in ") {
            Expression::In(k.trim().to_string(), set(v)?)
        } else if t.contains([' ', '(', ')']) {
            return None;
        } else {
            Expression::Exists(t.to_string())
        };
        exprs.push(e);
    }
    Some(exprs.into_iter().collect::<Selector>())
}

/// Why a controller Deployment runs no controller, or `None` when it does (or its status is
/// not known yet). Kubernetes omits zero counts from a Deployment's status (apps/v1
/// DeploymentStatus fields are `omitempty`), so an absent `status.readyReplicas` is 0 once the
/// deployment controller has written the status (`status.observedGeneration` present):
/// - `spec.replicas: 0` (`kubectl scale --replicas=0`, a freeze by hand or by a script):
///   `0 replicas`;
/// - replicas wanted but none Ready (`status.readyReplicas` 0 or absent in an observed
///   status: crash loop, image pull failure, pod deleted and not back yet):
///   `no ready pod, 0 of N ready`.
///
/// A Deployment with no status yet (just created, or a hand-written fixture) is not judged.
/// The rule lives in `cluster_loop::flux::deployment_not_running` (shared with cutover).
pub fn not_running(d: &Value) -> Option<String> {
    cluster_loop::flux::deployment_not_running(d)
}

/// The pod of `deployment` (its namespace and `spec.selector.matchLabels`) among `pods` that
/// says best why it is not running: not being deleted, a container not ready, the one with a
/// waiting reason or an exit first, then the newest. `None` when no pod matches or all are
/// ready. `logs` holds the last log lines of ended runs by `namespace/pod/container`.
pub fn pod_trouble(
    deployment: &Value,
    pods: &[Value],
    logs: &BTreeMap<String, Vec<String>>,
) -> Option<PodTrouble> {
    let ns = obj::namespace(deployment);
    let selector = obj::at(deployment, &["spec", "selector", "matchLabels"])?.as_object()?;
    if selector.is_empty() {
        return None;
    }
    let mut best: Option<(u8, &str, PodTrouble)> = None;
    for p in pods {
        if obj::namespace(p) != ns
            || obj::at(p, &["metadata", "deletionTimestamp"]).is_some()
            || !selector
                .iter()
                .all(|(k, v)| obj::at(p, &["metadata", "labels", k]) == Some(v))
        {
            continue;
        }
        for cs in obj::arr(p, &["status", "containerStatuses"]) {
            if obj::b(cs, &["ready"]) {
                continue;
            }
            let waiting = obj::at(cs, &["state", "waiting"]);
            let term_now = obj::at(cs, &["state", "terminated"]);
            let last = term_now.or_else(|| obj::at(cs, &["lastState", "terminated"]));
            let reason = match (waiting, term_now) {
                (Some(w), _) => obj::s(w, &["reason"]).unwrap_or("Waiting").to_string(),
                (None, Some(_)) => "Terminated".to_string(),
                (None, None) => "NotReady".to_string(),
            };
            let container = obj::s(cs, &["name"]).unwrap_or("").to_string();
            let pod = obj::name(p).to_string();
            let t = PodTrouble {
                last_log_lines: logs
                    .get(&format!("{ns}/{pod}/{container}"))
                    .cloned()
                    .unwrap_or_default(),
                pod,
                container,
                reason,
                message: waiting
                    .and_then(|w| obj::s(w, &["message"]))
                    .map(String::from),
                restarts: obj::i(cs, &["restartCount"]).unwrap_or(0),
                last_exit_code: last.and_then(|t| obj::i(t, &["exitCode"])),
                last_exit_reason: last.and_then(|t| obj::s(t, &["reason"])).map(String::from),
                last_finished_at: last
                    .and_then(|t| obj::s(t, &["finishedAt"]))
                    .map(String::from),
            };
            let rank = u8::from(waiting.is_some() || last.is_some());
            let created = obj::s(p, &["metadata", "creationTimestamp"]).unwrap_or("");
            if best
                .as_ref()
                .is_none_or(|(r, c, _)| (rank, created) > (*r, *c))
            {
                best = Some((rank, created, t));
            }
        }
    }
    best.map(|(_, _, t)| t)
}

/// Why a controller Deployment runs no controller ([`not_running`]) with the pod that says
/// why ([`pod_trouble`]): `no ready pod, 0 of 1 ready; pod kustomize-controller-7d9c5-x2b4q
/// CrashLoopBackOff, 2 restarts, last exit code 1 Error`. `None` when it runs.
pub fn not_running_with_pods(
    deployment: &Value,
    pods: &[Value],
    logs: &BTreeMap<String, Vec<String>>,
) -> Option<(String, Option<PodTrouble>)> {
    let why = not_running(deployment)?;
    if why == "0 replicas" {
        return Some((why, None));
    }
    match pod_trouble(deployment, pods, logs) {
        Some(t) => Some((format!("{why}; {}", t.describe()), Some(t))),
        None => Some((why, None)),
    }
}

/// The controller's own name (main.go `controllerName`, the base of its Lease name) from its
/// image: `kustomize-controller`, `source-controller`, `helm-controller`, else the
/// Deployment's name.
pub fn controller_name<'a>(image: &str, deployment: &'a str) -> &'a str {
    for c in [
        "kustomize-controller",
        "source-controller",
        "helm-controller",
        "image-reflector-controller",
        "image-automation-controller",
        "notification-controller",
    ] {
        let repo = image.split('@').next().unwrap_or(image);
        let last = repo.rsplit('/').next().unwrap_or(repo);
        if last.split(':').next() == Some(c) {
            return c;
        }
    }
    deployment
}

/// The tag of an image reference (`ghcr.io/fluxcd/kustomize-controller:v1.8.3@sha256:..`
/// -> `v1.8.3`), `None` for digest-only or untagged references.
pub fn image_tag(image: &str) -> Option<&str> {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split_once(':').map(|(_, t)| t)
}

/// `--name=value` and `--name value` pairs from an argument list (Go flag syntax, one or two
/// dashes).
fn flags(args: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        let Some(body) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            continue;
        };
        if let Some((k, v)) = body.split_once('=') {
            out.push((k.to_string(), v.to_string()));
        } else if let Some(next) = it.peek()
            && !next.starts_with('-')
        {
            out.push((body.to_string(), (*next).clone()));
            it.next();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn watch_label_selectors_select_as_the_apiserver_does() {
        let ks = |labels: Value| json!({"metadata": {"name": "a", "namespace": "apps", "labels": labels}});
        let d = |args: &[&str]| {
            ControllerFacts::from_deployment(&deploy(
                "ghcr.io/fluxcd/kustomize-controller:v1.9.6",
                args,
            ))
        };
        let main = d(&["--watch-label-selector=!sharding.fluxcd.io/key"]);
        assert!(main.excludes(&ks(json!({}))).is_none());
        let why = main
            .excludes(&ks(json!({"sharding.fluxcd.io/key": "shard1"})))
            .unwrap();
        assert!(
            why.contains("--watch-label-selector=!sharding.fluxcd.io/key"),
            "{why}"
        );
        assert!(why.contains("sharding.fluxcd.io/key=shard1"), "{why}");
        let shard = d(&[
            "--watch-label-selector",
            "sharding.fluxcd.io/key in (shard1, shard2)",
        ]);
        assert!(
            shard
                .excludes(&ks(json!({"sharding.fluxcd.io/key": "shard2"})))
                .is_none()
        );
        assert!(shard.excludes(&ks(json!({}))).is_some());
        let ne = d(&["--watch-label-selector=team!=b,env"]);
        assert!(ne.excludes(&ks(json!({"env": "x"}))).is_none());
        assert!(ne.excludes(&ks(json!({"env": "x", "team": "b"}))).is_some());
        let one_ns = d(&["--watch-all-namespaces=false"]);
        assert!(
            one_ns
                .excludes(&ks(json!({})))
                .unwrap()
                .contains("only namespace flux-system")
        );
        assert!(
            d(&[])
                .excludes(&ks(json!({"sharding.fluxcd.io/key": "x"})))
                .is_none()
        );
        assert!(parse_label_selector("a in (b").is_none());
    }

    fn deploy(image: &str, args: &[&str]) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kustomize-controller", "namespace": "flux-system"},
            "spec": {"selector": {"matchLabels": {"app": "kustomize-controller"}},
              "template": {"spec": {"containers": [
                {"name": "manager", "image": image, "args": args}]}}}})
    }

    #[test]
    fn reads_version_gates_and_concurrency() {
        let f = ControllerFacts::from_deployment(&deploy(
            "ghcr.io/fluxcd/kustomize-controller:v1.8.3@sha256:abcd",
            &[
                "--events-addr=http://notification-controller.flux-system.svc.cluster.local./",
                "--watch-all-namespaces=true",
                "--concurrent",
                "10",
                "--feature-gates=CancelHealthCheckOnNewRevision=true,GroupChangeLog=false",
            ],
        ));
        assert_eq!(f.version, Version::parse("1.8.3"));
        assert!(f.cancel_gate);
        assert_eq!(f.cancel_mode, CancelMode::AnyRequeue);
        assert_eq!(f.concurrent, 10);
        assert_eq!(
            f.gate_arg(),
            "--feature-gates=CancelHealthCheckOnNewRevision=true,GroupChangeLog=false"
        );
    }

    #[test]
    fn v17_cancels_only_on_new_revision_and_gate_off_never() {
        let f = ControllerFacts::from_deployment(&deploy(
            "fluxcd/kustomize-controller:v1.7.2",
            &["--feature-gates=CancelHealthCheckOnNewRevision=true"],
        ));
        assert_eq!(f.cancel_mode, CancelMode::NewRevisionOnly);
        let f =
            ControllerFacts::from_deployment(&deploy("fluxcd/kustomize-controller:v1.9.4", &[]));
        assert_eq!(f.cancel_mode, CancelMode::Never);
        assert_eq!(f.concurrent, 4);
        assert_eq!(
            f.gate_arg(),
            "--feature-gates=CancelHealthCheckOnNewRevision=true"
        );
        let f = ControllerFacts::from_deployment(&deploy(
            "registry:5000/kc@sha256:0123",
            &["--feature-gates=CancelHealthCheckOnNewRevision=true"],
        ));
        assert_eq!(f.cancel_mode, CancelMode::Unknown);
    }

    #[test]
    fn later_gate_flag_wins() {
        let f = ControllerFacts::from_deployment(&deploy(
            "kc:v1.9.0",
            &[
                "--feature-gates=CancelHealthCheckOnNewRevision=true",
                "--feature-gates=CancelHealthCheckOnNewRevision=false",
            ],
        ));
        assert!(!f.cancel_gate);
    }

    #[test]
    fn not_running_reads_spec_and_observed_status() {
        let mut d = deploy("kc:v1.9.0", &[]);
        // No status yet: not judged.
        assert_eq!(not_running(&d), None);
        d["status"] = json!({"observedGeneration": 2, "replicas": 1, "readyReplicas": 1,
            "availableReplicas": 1});
        assert_eq!(not_running(&d), None);
        // Zero counts are omitted from the status (omitempty).
        d["status"] = json!({"observedGeneration": 2, "replicas": 1, "unavailableReplicas": 1});
        assert_eq!(
            not_running(&d).as_deref(),
            Some("no ready pod, 0 of 1 ready")
        );
        d["spec"]["replicas"] = json!(0);
        d["status"] = json!({"observedGeneration": 3});
        assert_eq!(not_running(&d).as_deref(), Some("0 replicas"));
        assert_eq!(
            ControllerFacts::from_deployment(&d).not_running.as_deref(),
            Some("0 replicas")
        );
    }

    /// A kustomize-controller pod as the kubelet writes it while its process crash-loops
    /// (kubelet_pods.go convertToAPIContainerStatuses, kuberuntime_manager.go doBackOff).
    fn crashing_pod(name: &str, created: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "flux-system", "creationTimestamp": created,
                "labels": {"app": "kustomize-controller", "pod-template-hash": "7d9c5"}},
            "status": {"phase": "Running", "containerStatuses": [{"name": "manager", "ready": false,
                "started": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff",
                    "message": "back-off 40s restarting failed container=manager pod=x_flux-system(u)"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                    "startedAt": "2026-12-02T00:15:56Z", "finishedAt": "2026-12-02T00:15:57Z"}}}]}})
    }

    #[test]
    fn a_crash_looping_pod_is_named_with_its_reason_restarts_exit_and_previous_log() {
        let mut d = deploy("kc:v1.9.6", &[]);
        d["metadata"]["namespace"] = json!("flux-system");
        d["status"] = json!({"observedGeneration": 2, "replicas": 1, "unavailableReplicas": 1});
        let ready = json!({"metadata": {"name": "kustomize-controller-old", "namespace": "flux-system",
                "creationTimestamp": "2026-12-02T00:20:00Z", "labels": {"app": "kustomize-controller"}},
            "status": {"containerStatuses": [{"name": "manager", "ready": true, "restartCount": 0,
                "state": {"running": {}}}]}});
        let other_app = json!({"metadata": {"name": "source-controller-1", "namespace": "flux-system",
                "labels": {"app": "source-controller"}},
            "status": {"containerStatuses": [{"name": "manager", "ready": false, "restartCount": 9,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let pods = vec![
            ready,
            other_app,
            crashing_pod("kustomize-controller-7d9c5-x2b4q", "2026-12-02T00:10:00Z"),
        ];
        let mut logs = BTreeMap::new();
        logs.insert(
            "flux-system/kustomize-controller-7d9c5-x2b4q/manager".to_string(),
            vec![r#"{"level":"error","msg":"unable to load feature gates"}"#.to_string()],
        );
        let (why, pod) = not_running_with_pods(&d, &pods, &logs).unwrap();
        assert_eq!(
            why,
            "no ready pod, 0 of 1 ready; pod kustomize-controller-7d9c5-x2b4q CrashLoopBackOff, 3 restarts, last exit code 1 Error"
        );
        let pod = pod.unwrap();
        assert_eq!(pod.restarts, 3);
        assert_eq!(
            pod.command("flux-system"),
            "kubectl -n flux-system logs kustomize-controller-7d9c5-x2b4q -c manager --previous"
        );
        assert_eq!(
            pod.log_text(),
            "  last log lines of pod/kustomize-controller-7d9c5-x2b4q container manager (exit code 1):\n    {\"level\":\"error\",\"msg\":\"unable to load feature gates\"}\n"
        );
        // Restarted, running until it exits again: not ready, the exit as lastState.
        let mut between = pods[2].clone();
        between["status"]["containerStatuses"][0]["state"] =
            json!({"running": {"startedAt": "2026-12-02T00:16:07Z"}});
        between["status"]["containerStatuses"][0]["started"] = json!(true);
        let t = pod_trouble(&d, &[between], &logs).unwrap();
        assert_eq!(
            t.describe(),
            "pod kustomize-controller-7d9c5-x2b4q NotReady, 3 restarts, last exit code 1 Error"
        );
        assert!(t.command("flux-system").ends_with("--previous"));
        assert!(!t.may_come_back());
        let f = ControllerFacts::with_pods(&d, &pods, &logs);
        assert_eq!(f.not_running.as_deref(), Some(why.as_str()));
        // No pod read (RBAC): the Deployment's own reason, nothing invented.
        assert_eq!(
            not_running_with_pods(&d, &[], &logs),
            Some(("no ready pod, 0 of 1 ready".to_string(), None))
        );
        // Scaled to 0: the pods are not asked.
        d["spec"]["replicas"] = json!(0);
        assert_eq!(
            not_running_with_pods(&d, &pods, &logs),
            Some(("0 replicas".to_string(), None))
        );
    }

    #[test]
    fn a_pod_that_cannot_pull_points_at_describe_and_one_not_restarted_at_its_log() {
        let mut d = deploy("kc:v1.9.6", &[]);
        d["metadata"]["namespace"] = json!("flux-system");
        d["status"] = json!({"observedGeneration": 1, "replicas": 1});
        let pull = json!({"metadata": {"name": "kc-1", "namespace": "flux-system",
                "labels": {"app": "kustomize-controller"}},
            "status": {"containerStatuses": [{"name": "manager", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff",
                    "message": "Back-off pulling image \"kc:v1.9.6\""}}}]}});
        let (why, pod) = not_running_with_pods(&d, &[pull], &BTreeMap::new()).unwrap();
        assert_eq!(why, "no ready pod, 0 of 1 ready; pod kc-1 ImagePullBackOff");
        assert_eq!(
            pod.unwrap().command("flux-system"),
            "kubectl -n flux-system describe pod/kc-1"
        );
        let mut done = crashing_pod("kc-2", "2026-12-02T00:10:00Z");
        done["metadata"]["labels"] = json!({"app": "kustomize-controller"});
        done["status"]["containerStatuses"][0]["state"] =
            json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        done["status"]["containerStatuses"][0]["restartCount"] = json!(0);
        let pod = pod_trouble(&d, &[done], &BTreeMap::new()).unwrap();
        assert_eq!(
            pod.describe(),
            "pod kc-2 Terminated, last exit code 0 Completed"
        );
        assert_eq!(
            pod.command("flux-system"),
            "kubectl -n flux-system logs kc-2 -c manager"
        );
    }

    #[test]
    fn image_tags() {
        assert_eq!(image_tag("localhost:5000/kc:v1.8.0"), Some("v1.8.0"));
        assert_eq!(image_tag("localhost:5000/kc"), None);
        assert_eq!(image_tag("kc@sha256:00"), None);
    }
}
