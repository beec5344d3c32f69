//! `kubectl unstick --all -A` end to end (the release binary: connect, list calls, diagnose,
//! JSON) on the real kube-apiserver (tests/realcluster) holding a generated fleet of 300 and of
//! 3,000 Kustomizations, and the engine alone on the gathered snapshot. Before measuring, one
//! run's API requests are counted with the fault proxy's request log and printed (budget: at
//! most 15).
//!
//! The generated fleet ([`seed`]): a GitRepository `flux-system` and `n` Kustomizations
//! `wave-W-NNN` in flux-system, in waves (each dependsOn the previous wave's first member), Ready
//! at the source's revision with `status.inventory` entries (10,000 at 300, 105,000 at 3,000;
//! ConfigMaps, which unstick never reads, so they are not created), healthy but for one failed
//! health check naming a Deployment, so the workload, pod and event lists are part of the
//! measured path. They belong to a Flux shard no controller runs here
//! ([`realcluster::HELD_SHARD_LABEL`]): their status is what this bench writes, as the
//! controllers would.
//!
//! Then the engine (`report::fleet_report`: every diagnosis, root cause and plan) on generated
//! fleets of 300 and 3,000 Kustomizations shaped like a real one ([`unstick::synthetic::fleet`]): 30
//! Kustomizations per namespace, `wait: true`, 35 inventory objects each (5 Deployments with
//! a pod each, Services, ConfigMaps: 105,000 objects at 3,000), dependsOn chains within and
//! across namespaces, and a mix of in-flight and failed health checks with pods in
//! ImagePullBackOff, Kustomizations waiting on those, suspended ones and runs in progress.

use std::path::Path;
use std::process::Command;

use cluster_loop::cli::ClusterArgs;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use realcluster::proxy::FaultProxy;
use realcluster::{Cluster, ClusterOptions, FLUX_NS, HELD_SHARD_LABEL};
use serde_json::{Value, json};
use unstick::lever::Options;
use unstick::live::{self, ControllerRef, Reader, Scope};
use unstick::report;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");

/// The generated fleet's source revision.
const SEED_SHA: &str = "4f1c0c9d2b7e8a6f5d3c1b0a9e8d7c6b5a4f3e2d";

fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::namespaced_with(client.clone(), FLUX_NS, &ar)
}

/// Creates `obj` and merge-patches `status` onto it.
async fn create_with_status(api: &Api<DynamicObject>, obj: Value, status: Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
    let o: DynamicObject = serde_json::from_value(obj).unwrap();
    api.create(&PostParams::default(), &o)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "status": status })),
    )
    .await
    .unwrap_or_else(|e| panic!("status of {name}: {e}"));
}

/// The generated fleet (module docs) of `n` Kustomizations in `waves` waves with `objects`
/// inventory entries, on cluster `c`.
async fn seed(c: &Cluster, n: usize, objects: usize, waves: usize) {
    let client = c.client().await.unwrap();
    let rev = format!("main@sha1:{SEED_SHA}");
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let held = json!({ HELD_SHARD_LABEL: "bench" });
    create_with_status(
        &api(&client, "source.toolkit.fluxcd.io", "v1", "GitRepository", "gitrepositories"),
        json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": "flux-system", "namespace": FLUX_NS, "labels": held},
            "spec": {"interval": "1m", "url": "https://gitea.example.local/org/fleet.git", "ref": {"branch": "main"}}}),
        json!({"observedGeneration": 1,
            "artifact": {"revision": rev, "digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000",
                "path": format!("gitrepository/flux-system/flux-system/{SEED_SHA}.tar.gz"), "size": 1024, "lastUpdateTime": now,
                "url": format!("http://source-controller.flux-system.svc.cluster.local./gitrepository/flux-system/flux-system/{SEED_SHA}.tar.gz")},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
                "message": format!("stored artifact for revision '{rev}'"), "lastTransitionTime": now}]}),
    )
    .await;
    let ks = api(
        &client,
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "Kustomization",
        "kustomizations",
    );
    let per_wave = n.div_ceil(waves.max(1));
    let items: Vec<(Value, Value)> = (0..n)
        .map(|i| {
            let wave = i / per_wave;
            let name = format!("wave-{wave}-{:03}", i % per_wave);
            let ns = format!("fleet-{wave}");
            let count = objects / n + usize::from(i < objects % n);
            let entries: Vec<Value> = (0..count)
                .map(|j| json!({"id": format!("{ns}_{name}-cm-{j:03}__ConfigMap"), "v": "v1"}))
                .collect();
            let mut spec = json!({"interval": "10m", "path": format!("./apps/wave-{wave}/{name}"), "prune": true,
                "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": FLUX_NS},
                "targetNamespace": ns});
            if wave > 0 {
                spec["dependsOn"] = json!([{"name": format!("wave-{}-000", wave - 1)}]);
            }
            // One failed health check naming a Deployment (the rest are healthy).
            let conditions = if name == "wave-3-007" {
                json!([{"type": "Ready", "status": "False", "reason": "HealthCheckFailed",
                    "observedGeneration": 1, "lastTransitionTime": now,
                    "message": "health check failed after 5m0.01s: timeout waiting for: [Deployment/fleet-3/web status: 'InProgress']"}])
            } else {
                json!([{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                    "observedGeneration": 1, "lastTransitionTime": now,
                    "message": format!("Applied revision: {rev}")}])
            };
            (
                json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                    "metadata": {"name": name, "namespace": FLUX_NS, "labels": held}, "spec": spec}),
                json!({"observedGeneration": 1, "lastAppliedRevision": rev, "lastAttemptedRevision": rev,
                    "conditions": conditions, "inventory": {"entries": entries}}),
            )
        })
        .collect();
    futures::stream::iter(items)
        .for_each_concurrent(16, |(o, st)| {
            let ks = ks.clone();
            async move { create_with_status(&ks, o, st).await }
        })
        .await;
}

/// `kubectl-unstick --kubeconfig KC --all -A -o json` (exit 1: the one failed check); the
/// size of its JSON.
fn all(kc: &Path) -> usize {
    let o = Command::new(BIN)
        .arg("--kubeconfig")
        .arg(kc)
        .args(["--all", "-A", "-o", "json"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["notHealthy"], 1,
        "one failed health check: {}",
        v["items"]
    );
    o.stdout.len()
}

/// A cluster of its own holding the generated fleet; prints the API requests of one
/// `--all -A` run (counted by the fault proxy) and asserts the budget (<= 15).
fn fleet_cluster(rt: &tokio::runtime::Runtime, n: usize, objects: usize, waves: usize) -> Cluster {
    let c = Cluster::start(ClusterOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let t = std::time::Instant::now();
    rt.block_on(seed(&c, n, objects, waves));
    let proxy = rt.block_on(FaultProxy::start(&c)).unwrap();
    let bytes = all(proxy.kubeconfig());
    let reqs = proxy.requests();
    eprintln!(
        "kubectl unstick --all -A on {n} Kustomizations / {objects} inventory entries (seeded in {:?}): {} API requests, {bytes} bytes of JSON ({})",
        t.elapsed(),
        reqs.len(),
        reqs.iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(reqs.len() <= 15);
    c
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // 300 Kustomizations in 10 waves, 10,000 inventory entries.
    let cluster = fleet_cluster(&rt, 300, 10_000, 10);
    let kc = cluster.kubeconfig().to_path_buf();
    c.bench_function("unstick_all_300ks_end_to_end", |b| b.iter(|| all(&kc)));

    let snap = rt.block_on(async {
        let conn = ClusterArgs {
            kubeconfig: Some(kc.clone()),
            ..Default::default()
        }
        .connect()
        .await
        .unwrap();
        let scope = Scope {
            namespace: None,
            controller: ControllerRef {
                namespace: FLUX_NS.into(),
                name: "kustomize-controller".into(),
            },
        };
        live::gather(&conn, &scope, &Reader::default())
            .await
            .unwrap()
            .0
    });
    c.bench_function("unstick_fleet_report_300ks_engine_only", |b| {
        b.iter(|| {
            report::fleet_report(&snap, vec![], &Options::default())
                .0
                .items
                .len()
        })
    });
    drop(cluster);

    // The release binary end to end at 3,000 Kustomizations / 105,000 inventory entries (100
    // waves). Issue 15's goal: < 1 s.
    let cluster = fleet_cluster(&rt, 3000, 105_000, 100);
    let kc = cluster.kubeconfig().to_path_buf();
    let mut g = c.benchmark_group("unstick_all_3000ks_end_to_end");
    g.sample_size(10);
    g.bench_function("all", |b| b.iter(|| all(&kc)));
    g.finish();
    drop(cluster);

    let mut g = c.benchmark_group("unstick_fleet_report_engine_synthetic");
    for n in [300usize, 3000] {
        let snap = unstick::synthetic::fleet(n);
        let (r, _) = report::fleet_report(&snap, vec![], &Options::default());
        eprintln!(
            "synthetic fleet {n}: {} Kustomizations, {} objects listed, {} pods, {} not healthy",
            r.total,
            snap.objects.len(),
            snap.pods.len(),
            r.not_healthy
        );
        g.bench_with_input(BenchmarkId::from_parameter(n), &snap, |b, snap| {
            b.iter(|| {
                report::fleet_report(snap, vec![], &Options::default())
                    .0
                    .items
                    .len()
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
