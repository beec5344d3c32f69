//! A generated fleet shaped like a real one, for the benchmarks (unstick's engine, the
//! in-cluster controller's diagnosis over its stores): 30 Kustomizations per namespace,
//! `wait: true`, 35 inventory objects each (5 Deployments with a pod each, Services,
//! ConfigMaps: 105,000 objects at 3,000), dependsOn chains within and across namespaces, and a
//! mix of in-flight and failed health checks with pods in ImagePullBackOff, Kustomizations
//! waiting on those, suspended ones and runs in progress. Not a fixture of any verdict.

use serde_json::json;

use crate::snapshot::Snapshot;

/// The source revision every generated Kustomization reads.
pub const REV: &str = "main@sha1:1111111111111111111111111111111111111111";
/// The revision the Kustomizations with a held or failed check last applied.
pub const OLD: &str = "main@sha1:0000000000000000000000000000000000000000";

/// A fleet of `n` Kustomizations shaped like a real one (see the module docs), as the
/// snapshot `gather` reads for `--all -A`: every Kustomization, the source, the controller,
/// the Deployments and Pods (listed because some health checks are running or failed), and
/// Warning events for the pods that cannot pull.
pub fn fleet(n: usize) -> Snapshot {
    let mut ks = Vec::with_capacity(n);
    let mut objects = Vec::new();
    let mut pods = Vec::new();
    let mut events = Vec::new();
    for i in 0..n {
        let ns = format!("team-{:03}", i / 30);
        let name = format!("app-{i:05}");
        let app_ns = format!("{name}-ns");
        // 1 in 20 has its health check in flight on a bad image, 1 in 25 failed it, 1 in 50
        // is suspended, 1 in 40 is mid-run; every 10th waits on the one before it (a chain),
        // and every 30th on one in another namespace.
        let in_flight = i % 20 == 3;
        let failed = i % 25 == 7;
        let suspended = i % 50 == 11;
        let running = i % 40 == 13;
        let mut entries = Vec::new();
        for d in 0..5 {
            let dn = format!("web-{d}");
            entries.push(json!({"id": format!("{app_ns}_{dn}_apps_Deployment"), "v": "v1"}));
            entries.push(json!({"id": format!("{app_ns}_{dn}__Service"), "v": "v1"}));
            let bad = (in_flight || failed) && d == 0;
            let image = if bad {
                "0.1.1".to_string()
            } else {
                format!("registry.example.local/{name}/web-{d}:1.0.{d}")
            };
            objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": dn, "namespace": app_ns, "generation": 2},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": dn}},
                    "template": {"metadata": {"labels": {"app": dn}},
                        "spec": {"containers": [{"name": "web", "image": image}]}}},
                "status": if bad {
                    json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
                        "unavailableReplicas": 1,
                        "conditions": [{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]})
                } else {
                    json!({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
                        "readyReplicas": 1, "availableReplicas": 1,
                        "conditions": [{"type": "Available", "status": "True"}]})
                }}));
            let pod = format!("{dn}-5d8f7c9b4-{i:05}");
            pods.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": app_ns, "labels": {"app": dn}},
                "spec": {"containers": [{"name": "web", "image": image}]},
                "status": if bad {
                    json!({"phase": "Pending", "containerStatuses": [{"name": "web", "ready": false,
                        "image": image, "restartCount": 0,
                        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"0.1.1\""}}}]})
                } else {
                    json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
                }}));
            if bad {
                events.push(json!({"apiVersion": "v1", "kind": "Event", "type": "Warning",
                    "reason": "Failed", "metadata": {"name": format!("{pod}.1"), "namespace": app_ns},
                    "involvedObject": {"kind": "Pod", "namespace": app_ns, "name": pod},
                    "lastTimestamp": "2026-11-30T07:20:00Z",
                    "message": "Failed to pull image \"0.1.1\": not found"}));
            }
        }
        for c in 0..25 {
            entries.push(json!({"id": format!("{app_ns}_cfg-{c}__ConfigMap"), "v": "v1"}));
        }
        let mut depends = Vec::new();
        if i % 10 != 0 {
            depends.push(json!({"name": format!("app-{:05}", i - 1)}));
        }
        if i % 30 == 29 && i >= 60 {
            depends.push(json!({"name": format!("app-{:05}", i - 45),
                "namespace": format!("team-{:03}", (i - 45) / 30)}));
        }
        let conditions = if in_flight {
            json!([{"type": "Reconciling", "status": "True", "reason": "Progressing",
                "lastTransitionTime": "2026-11-30T07:18:00Z",
                "message": format!("Running health checks for revision {REV} with a timeout of 5m0s")},
                {"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress"}])
        } else if failed {
            json!([{"type": "Reconciling", "status": "True", "reason": "ProgressingWithRetry",
                "message": format!("Running health checks for revision {REV} with a timeout of 5m0s")},
                {"type": "Ready", "status": "False", "reason": "HealthCheckFailed",
                "message": format!("health check failed after 5m0.01s: timeout waiting for: [Deployment/{app_ns}/web-0 status: 'InProgress']")}])
        } else if running {
            json!([{"type": "Reconciling", "status": "True", "reason": "Progressing",
                "lastTransitionTime": "2026-11-30T07:19:50Z", "message": "Building manifests"},
                {"type": "Ready", "status": "Unknown", "reason": "Progressing", "message": "Reconciliation in progress"}])
        } else {
            json!([{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                "message": format!("Applied revision: {REV}")}])
        };
        ks.push(json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": ns, "generation": 1},
            "spec": {"interval": "10m", "timeout": "5m", "path": format!("./apps/{name}"), "wait": true,
                "suspend": suspended, "dependsOn": depends,
                "sourceRef": {"kind": "GitRepository", "name": "fleet", "namespace": "flux-system"}},
            "status": {"observedGeneration": 1,
                "lastAttemptedRevision": REV,
                "lastAppliedRevision": if in_flight || failed { OLD } else { REV },
                "inventory": {"entries": entries},
                "conditions": conditions}}));
    }
    // Waiting on a failed or in-flight dependency: the controller's DependencyNotReady.
    let blocked: Vec<bool> = ks
        .iter()
        .map(|k| k["status"]["conditions"][0]["type"] == "Reconciling")
        .collect();
    for i in 0..n {
        if i % 10 != 0 && blocked[i - 1] && !blocked[i] {
            ks[i]["status"]["conditions"] = json!([{"type": "Ready", "status": "False",
                "reason": "DependencyNotReady",
                "message": format!("dependency 'team-{:03}/app-{:05}' is not ready", (i - 1) / 30, i - 1)}]);
        }
    }
    let mut listed = std::collections::BTreeSet::new();
    listed.insert("apps/Deployment".to_string());
    Snapshot {
        now: "2026-11-30T07:21:00Z".parse().unwrap(),
        kustomizations: ks,
        sources: vec![
            json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "fleet", "namespace": "flux-system", "generation": 1},
            "status": {"observedGeneration": 1, "artifact": {"revision": REV},
                "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "stored artifact"}]}}),
        ],
        controller: Some(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kustomize-controller", "namespace": "flux-system"},
            "spec": {"selector": {"matchLabels": {"app": "kustomize-controller"}},
                "template": {"spec": {"containers": [{"name": "manager",
                    "image": "ghcr.io/fluxcd/kustomize-controller:v1.9.4", "args": ["--concurrent=4"]}]}}},
            "status": {"readyReplicas": 1}})),
        objects,
        pods,
        events,
        listed_kinds: listed,
        ..Default::default()
    }
}
