//! The engine's input from a cache of watched objects (the in-cluster controller's reflector
//! stores, `cluster-loop-controller`) instead of [`crate::live::gather`]'s reads. Pure: the
//! caller passes every object its watches hold; the same selection rules as `gather` pick
//! what the engine reads (the kustomize-controller Deployment by name, source-controller and
//! helm-controller beside it, the shards by image, the Leases of [`crate::live::leases_wanted`]).
//!
//! What a cache of these watches does not hold is left "not read", never "missing": the
//! controller pods and their logs, Secrets' key names, and the health-checked workloads and
//! pods (so a held health
//! check is classed and timed from the Kustomization's own status, and its blocking objects
//! are named by `kubectl unstick ks/NAME`, not here).

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value;

use crate::controller::ControllerFacts;
use crate::live::ControllerRef;
use crate::obj;
use crate::snapshot::Snapshot;

/// Every object the watches hold, as API objects (`apiVersion`, `kind` set).
#[derive(Debug, Default)]
pub struct Watched {
    /// Kustomizations in scope.
    pub kustomizations: Vec<Value>,
    /// GitRepositories, OCIRepositories and Buckets in scope.
    pub sources: Vec<Value>,
    /// HelmReleases in scope (health-check members: their kstatus).
    pub helm_releases: Vec<Value>,
    /// Every Deployment of the controllers' namespace ([`ControllerRef::namespace`]).
    pub deployments: Vec<Value>,
    /// Every Lease of the controllers' namespace.
    pub leases: Vec<Value>,
    /// Metadata (never data) of the ConfigMaps and Secrets the Kustomizations reference
    /// ([`crate::diagnose::config_refs`]), by `Kind/namespace/name`, as [`Snapshot::configs`]
    /// holds them; empty when they are not watched (not judged, never "unchanged").
    pub configs: BTreeMap<String, Value>,
}

/// The [`Snapshot`] the engine reads at `now` from `w`. `namespace`: the one namespace
/// watched (`None`: all namespaces; only then is the HelmRelease list complete for any
/// health check, `listed_kinds` says so). `controller`: where kustomize-controller runs.
pub fn snapshot(
    now: Timestamp,
    namespace: Option<&str>,
    controller: &ControllerRef,
    w: Watched,
) -> Snapshot {
    let in_ns = |d: &&Value| obj::namespace(d) == controller.namespace;
    let named = |name: &str| {
        w.deployments
            .iter()
            .filter(in_ns)
            .find(|d| obj::name(d) == name)
            .cloned()
    };
    let kc = named(&controller.name);
    let sc = named("source-controller");
    let hc = named("helm-controller");
    let by_image = |what: &str| -> Vec<Value> {
        w.deployments
            .iter()
            .filter(in_ns)
            .filter(|d| ControllerFacts::from_deployment(d).image.contains(what))
            .cloned()
            .collect()
    };
    let kustomize_controllers = by_image("kustomize-controller");
    let source_controllers = by_image("source-controller");
    let leases: BTreeMap<String, Option<Value>> =
        crate::live::leases_wanted(kc.as_ref(), sc.as_ref(), &w.kustomizations)
            .into_iter()
            .map(|(ns, name, _)| {
                let l = w
                    .leases
                    .iter()
                    .find(|l| obj::namespace(l) == ns && obj::name(l) == name)
                    .cloned();
                (format!("{ns}/{name}"), l)
            })
            .collect();
    let mut listed_kinds = std::collections::BTreeSet::new();
    if namespace.is_none() {
        listed_kinds.insert("helm.toolkit.fluxcd.io/HelmRelease".to_string());
    }
    Snapshot {
        now,
        namespace: namespace.map(String::from),
        kustomizations: w.kustomizations,
        workers_elsewhere: None,
        sources: w.sources,
        controller: kc,
        source_controller: sc,
        kustomize_controllers,
        source_controllers,
        helm_controller: hc,
        helm_controller_read: true,
        leases,
        objects: w.helm_releases,
        configs: w.configs,
        listed_kinds,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dep(name: &str, image: &str, args: &[&str]) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "manager", "image": image, "args": args}]}}},
            "status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}})
    }

    #[test]
    fn the_controllers_and_leases_are_picked_as_gather_picks_them() {
        let ks = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "a", "namespace": "flux-system"},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": "a"}}});
        let w = Watched {
            kustomizations: vec![ks],
            deployments: vec![
                dep(
                    "kustomize-controller",
                    "ghcr.io/fluxcd/kustomize-controller:v1.7.3",
                    &["--enable-leader-election"],
                ),
                dep(
                    "kc-shard1",
                    "ghcr.io/fluxcd/kustomize-controller:v1.7.3",
                    &[],
                ),
                dep(
                    "source-controller",
                    "ghcr.io/fluxcd/source-controller:v1.7.3",
                    &[],
                ),
            ],
            ..Default::default()
        };
        let c = ControllerRef {
            namespace: "flux-system".into(),
            name: "kustomize-controller".into(),
        };
        let s = snapshot(Timestamp::now(), None, &c, w);
        assert_eq!(
            obj::name(s.controller.as_ref().unwrap()),
            "kustomize-controller"
        );
        assert_eq!(
            obj::name(s.source_controller.as_ref().unwrap()),
            "source-controller"
        );
        assert_eq!(s.kustomize_controllers.len(), 2);
        assert_eq!(s.source_controllers.len(), 1);
        assert!(s.helm_controller.is_none() && s.helm_controller_read);
        // kustomize-controller runs with leader election and its Lease is not in the cache:
        // it does not exist (the cache holds every Lease of the namespace).
        assert_eq!(s.leases.len(), 1, "{:?}", s.leases);
        assert!(s.leases.values().all(Option::is_none));
        assert!(
            s.listed_kinds
                .contains("helm.toolkit.fluxcd.io/HelmRelease")
        );
    }
}
