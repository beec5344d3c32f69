//! Facts about the running kustomize-controller, read from its Deployment: version (image
//! tag), feature gates and worker count. These decide which lever can cancel an in-flight
//! health check.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

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
        for (flag, value) in flags(&args) {
            match flag.as_str() {
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
        }
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

    #[test]
    fn image_tags() {
        assert_eq!(image_tag("localhost:5000/kc:v1.8.0"), Some("v1.8.0"));
        assert_eq!(image_tag("localhost:5000/kc"), None);
        assert_eq!(image_tag("kc@sha256:00"), None);
    }
}
