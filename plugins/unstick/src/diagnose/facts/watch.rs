//! Facts of the controllers' watch: which ConfigMaps and Secrets a Kustomization reads
//! ([`config_refs`]), whether a running source-controller watches a source
//! ([`source_not_watched`]), whether helm-controller runs for a health check that waits on a
//! HelmRelease, when a Kustomization's last run ended and its spec was written, and the
//! dependsOn cycle that drops a revision event ([`dependency_cycle`]). Read by the blind spots
//! (`diagnose/blind.rs`).

use std::collections::HashMap;

use jiff::Timestamp;
use serde_json::Value;

use crate::controller::ControllerFacts;
use crate::diagnose::*;
use crate::obj;
use crate::snapshot::Snapshot;

/// A ConfigMap or Secret a Kustomization reads, as kustomize-controller indexes it for its
/// config watch (kustomization_manager.go `indexConfigMap` / `indexSecret`, v1.7.3-v1.10.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRef {
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    /// The Kustomization's namespace (references are local).
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Where it is referenced: `postBuild.substituteFrom`, `decryption.secretRef`,
    /// `kubeConfig.secretRef` or `kubeConfig.configMapRef`.
    pub field: &'static str,
}

/// The ConfigMaps and Secrets `ks` reads, in the controller's index order: `kubeConfig`,
/// `postBuild.substituteFrom[]` (kind `ConfigMap` or `Secret`), `decryption.secretRef`.
pub fn config_refs(ks: &Value) -> Vec<ConfigRef> {
    let ns = obj::namespace(ks).to_string();
    let one = |kind: &str, name: &str, field: &'static str| ConfigRef {
        kind: kind.to_string(),
        namespace: ns.clone(),
        name: name.to_string(),
        field,
    };
    let mut out = Vec::new();
    if let Some(n) = obj::s(ks, &["spec", "kubeConfig", "configMapRef", "name"]) {
        out.push(one("ConfigMap", n, "kubeConfig.configMapRef"));
    }
    if let Some(n) = obj::s(ks, &["spec", "kubeConfig", "secretRef", "name"]) {
        out.push(one("Secret", n, "kubeConfig.secretRef"));
    }
    for r in obj::arr(ks, &["spec", "postBuild", "substituteFrom"]) {
        let (Some(kind), Some(n)) = (obj::s(r, &["kind"]), obj::s(r, &["name"])) else {
            continue;
        };
        if kind == "ConfigMap" || kind == "Secret" {
            out.push(one(kind, n, "postBuild.substituteFrom"));
        }
    }
    if let Some(n) = obj::s(ks, &["spec", "decryption", "secretRef", "name"]) {
        out.push(one("Secret", n, "decryption.secretRef"));
    }
    out
}

/// When `cfg` (metadata as read) was last written: the latest `metadata.managedFields[].time`
/// of any manager (second resolution), else `creationTimestamp`.
pub(in crate::diagnose) fn config_written_at(cfg: &Value) -> Option<Timestamp> {
    obj::arr(cfg, &["metadata", "managedFields"])
        .iter()
        .filter_map(|m| obj::s(m, &["time"]).and_then(obj::parse_time))
        .max()
        .or_else(|| obj::s(cfg, &["metadata", "creationTimestamp"]).and_then(obj::parse_time))
}

impl Engine<'_> {
    /// helm-controller, when a health check of `ks` waits on a HelmRelease (its wait set,
    /// [`crate::diagnose::wait_set`]) and helm-controller is not running: its Deployment (read as
    /// source- and kustomize-controller's, `cluster_loop::flux::deployment_not_running`) at 0
    /// replicas or with no ready pod, or absent from the controller's namespace. Nothing
    /// reconciles HelmReleases then, so no lever on the Kustomization frees the check.
    /// `None` when it runs, when no HelmRelease is waited on, or when it was not looked for.
    pub(super) fn helm_controller_stopped(
        &self,
        ks: &Value,
    ) -> Option<crate::diagnose::StoppedController> {
        let snap = self.idx.snap;
        if !snap.helm_controller_read
            || !crate::diagnose::wait_set(ks)
                .iter()
                .any(|m| m.kind == "HelmRelease" && m.group == "helm.toolkit.fluxcd.io")
        {
            return None;
        }
        let ns = self
            .controller
            .as_ref()
            .map_or("flux-system", |c| c.namespace.as_str());
        match snap.helm_controller.as_ref() {
            None => Some(crate::diagnose::StoppedController {
                controller: "helm-controller".into(),
                namespace: ns.into(),
                why: format!("not installed: no Deployment {ns}/helm-controller"),
                consequence: crate::diagnose::HELM_CONSEQUENCE.into(),
                command: "flux install (helm-controller is one of its default components)".into(),
                pod: None,
                leader: None,
            }),
            Some(hc) => {
                let (why, pod) = crate::controller::not_running_with_pods(
                    hc,
                    &snap.controller_pods,
                    &snap.controller_logs,
                )?;
                Some(crate::diagnose::StoppedController::new(
                    obj::name(hc),
                    obj::namespace(hc),
                    why,
                    crate::diagnose::HELM_CONSEQUENCE,
                    pod,
                ))
            }
        }
    }
}

/// The source kinds source-controller's `--watch-label-selector` filters that a
/// Kustomization reads (source-controller v1.9.6 / v1.10.1 main.go, cache `ByObject`:
/// GitRepository, OCIRepository, Bucket, plus HelmRepository and HelmChart, which no
/// Kustomization reads).
pub const SOURCE_CONTROLLER_KINDS: &[&str] = &["GitRepository", "OCIRepository", "Bucket"];

/// Why no running source-controller watches the source `src` (a GitRepository,
/// OCIRepository or Bucket as read), or `None` when one does or it is not known: the
/// `source-controller` Deployment of the snapshot ([`Snapshot::source_controller`]) runs with
/// a `--watch-label-selector` that does not select `src`'s labels, or with
/// `--watch-all-namespaces=false` while `src` lives elsewhere
/// ([`ControllerFacts::excludes`]; source-controller main.go puts both on its cache for its
/// source kinds, v1.7.3-v1.10.1), and no other source-controller Deployment of its namespace
/// that selects it runs ([`Snapshot::source_controllers`], the shards: one that selects it
/// but is not running is named with its command). Such a source is never fetched: no
/// artifact, no status, no request handled. `blindSpot.kind: source-not-watched`. The one
/// rule for every view that judges a source (`kubectl unstick`, `kubectl gitops verify`'s
/// link 1).
pub fn source_not_watched(snap: &Snapshot, src: &Value) -> Option<BlindSpot> {
    if !SOURCE_CONTROLLER_KINDS.contains(&obj::kind(src)) {
        return None;
    }
    let sc = ControllerFacts::with_pods(
        snap.source_controller.as_ref()?,
        &snap.controller_pods,
        &snap.controller_logs,
    );
    unwatched(
        &sc,
        &snap.source_controllers,
        snap,
        src,
        "source-controller",
        "nothing fetches for its shard",
    )
    .map(|b| b.named("source-not-watched"))
}

/// The blind spot (kind to be named by the caller) when controller `main` excludes `o` and
/// no other Deployment of `others` (the same controller's shards) that selects it runs: a
/// running shard that selects it watches it (`None`); one that is not running is named, with
/// the command that starts it or shows why (`blindSpot.command`). `controller` is the
/// controller's name in the text, `consequence` what its stop means.
pub(in crate::diagnose) fn unwatched(
    main: &ControllerFacts,
    others: &[Value],
    snap: &Snapshot,
    o: &Value,
    controller: &str,
    consequence: &str,
) -> Option<BlindSpot> {
    let why = main.excludes(o)?;
    let shard = others
        .iter()
        .filter(|dep| !(obj::name(dep) == main.name && obj::namespace(dep) == main.namespace))
        .map(|dep| ControllerFacts::with_pods(dep, &snap.controller_pods, &snap.controller_logs))
        .find(|f| f.excludes(o).is_none());
    Some(match shard {
        Some(f) if f.not_running.is_none() => return None,
        Some(f) => {
            let stopped = crate::diagnose::StoppedController::new(
                &f.name,
                &f.namespace,
                f.not_running.clone().unwrap_or_default(),
                consequence,
                f.pod.clone(),
            );
            let mut b = BlindSpot::new(
                "",
                format!(
                    "{why}; {}/{} would watch it (--watch-label-selector={}) but {}",
                    f.namespace,
                    f.name,
                    f.watch_label_selector.as_deref().unwrap_or(""),
                    stopped.line()
                ),
            );
            b.command = Some(stopped.command);
            b
        }
        None if others.is_empty() => BlindSpot::new(
            "",
            format!("{why}; no other {controller} Deployment was read"),
        ),
        None => BlindSpot::new(
            "",
            format!(
                "{why}; no other {controller} Deployment in {} selects it",
                main.namespace
            ),
        ),
    })
}

/// The end of `ks`'s last run plus `spec.interval`: when a Ready Kustomization runs again by
/// itself (kustomize-controller `RequeueAfter: jitter.JitteredIntervalDuration(interval)`).
/// The last run's end is the latest of `status.history[].lastReconciled` (upserted at the end
/// of every run past its build) and the time of the controller's last status write
/// (`metadata.managedFields` of manager `kustomize-controller`, subresource `status`).
pub(in crate::diagnose) fn next_interval_run(ks: &Value) -> Option<Timestamp> {
    let interval = parse_go_duration(obj::s(ks, &["spec", "interval"])?).ok()?;
    let last = last_run_end(ks)?;
    last.checked_add(secs(interval.as_secs_f64())).ok()
}

/// The end of `ks`'s last run as the API shows it: the latest of `status.history[]
/// .lastReconciled` (upserted at the end of every run past its build) and the time of the
/// controller's last status write (`metadata.managedFields` of manager `kustomize-controller`,
/// subresource `status`, which every run writes at its start and end).
pub(in crate::diagnose) fn last_run_end(ks: &Value) -> Option<Timestamp> {
    let history = obj::arr(ks, &["status", "history"])
        .iter()
        .filter_map(|h| obj::s(h, &["lastReconciled"]).and_then(obj::parse_time));
    let writes = obj::arr(ks, &["metadata", "managedFields"])
        .iter()
        .filter(|m| {
            obj::s(m, &["manager"]) == Some("kustomize-controller")
                && obj::s(m, &["subresource"]) == Some("status")
        })
        .filter_map(|m| obj::s(m, &["time"]).and_then(obj::parse_time));
    history.chain(writes).max()
}

/// When `ks`'s spec was last written: the latest `metadata.managedFields` entry that owns
/// `f:spec` (any manager but the controller's status writes), else `creationTimestamp`.
pub(in crate::diagnose) fn spec_written_at(ks: &Value) -> Option<Timestamp> {
    obj::arr(ks, &["metadata", "managedFields"])
        .iter()
        .filter(|m| obj::s(m, &["subresource"]).is_none())
        .filter(|m| obj::at(m, &["fieldsV1", "f:spec"]).is_some())
        .filter_map(|m| obj::s(m, &["time"]).and_then(obj::parse_time))
        .max()
        .or_else(|| obj::s(ks, &["metadata", "creationTimestamp"]).and_then(obj::parse_time))
}

/// The first dependsOn cycle among `list` (`namespace/name`, the first repeated last), as
/// fluxcd/pkg runtime/dependency `Sort` finds it: a depth-first search over the list in
/// order, with edges only from the objects in the list (a dependency outside it has none).
pub fn dependency_cycle(list: &[&Value]) -> Option<Vec<String>> {
    let mut edges: HashMap<String, Vec<String>> = HashMap::new();
    for k in list {
        let ns = obj::namespace(k);
        let deps = obj::arr(k, &["spec", "dependsOn"])
            .iter()
            .map(|d| {
                let dns = obj::s(d, &["namespace"])
                    .filter(|n| !n.is_empty())
                    .unwrap_or(ns);
                format!("{dns}/{}", obj::s(d, &["name"]).unwrap_or(""))
            })
            .collect();
        edges.insert(key_of(k), deps);
    }
    // 1: on the current path, 2: done.
    let mut mark: HashMap<String, u8> = HashMap::new();
    for start in list.iter().map(|k| key_of(k)) {
        if mark.contains_key(&start) {
            continue;
        }
        // Iterative depth-first search: (node, next edge index); `path` mirrors the stack.
        let mut stack: Vec<(String, usize)> = vec![(start.clone(), 0)];
        mark.insert(start, 1);
        while let Some((u, i)) = stack.last().cloned() {
            let next = edges.get(&u).and_then(|e| e.get(i)).cloned();
            let Some(v) = next else {
                mark.insert(u, 2);
                stack.pop();
                continue;
            };
            stack.last_mut().unwrap().1 += 1;
            match mark.get(&v) {
                Some(2) => {}
                Some(_) => {
                    let pos = stack.iter().position(|(n, _)| *n == v).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        stack[pos..].iter().map(|(n, _)| n.clone()).collect();
                    cycle.push(v);
                    return Some(cycle);
                }
                None => {
                    mark.insert(v.clone(), 1);
                    stack.push((v, 0));
                }
            }
        }
    }
    None
}
