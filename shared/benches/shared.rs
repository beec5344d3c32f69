//! Benchmarks for the per-object work plugins do in loops: kstatus over inventories,
//! inventory id parsing, reference parsing, Go duration parse/format.

use cluster_loop::duration::GoDuration;
use cluster_loop::flux::ObjMetadata;
use cluster_loop::kstatus;
use cluster_loop::refs::{Kind, ResourceRef};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::hint::black_box;

fn benches(c: &mut Criterion) {
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "podinfo", "namespace": "apps", "generation": 3},
        "spec": {"replicas": 2, "progressDeadlineSeconds": 600},
        "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2,
                   "availableReplicas": 2, "conditions": [
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}]}});
    let ks = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"generation": 5}, "status": {"observedGeneration": 5, "conditions": [
            {"type": "Ready", "status": "False", "reason": "HealthCheckFailed", "message": "x"}]}});
    c.bench_function("kstatus_deployment_current", |b| {
        b.iter(|| kstatus::compute(black_box(&deploy)))
    });
    c.bench_function("kstatus_kustomization_ready_false", |b| {
        b.iter(|| kstatus::compute(black_box(&ks)))
    });
    let ids: Vec<String> = (0..1000)
        .map(|i| format!("apps_podinfo-{i}_apps_Deployment"))
        .collect();
    c.bench_function("inventory_parse_1000_ids", |b| {
        b.iter(|| {
            for id in &ids {
                black_box(ObjMetadata::parse(id).unwrap());
            }
        })
    });
    c.bench_function("ref_parse_qualified", |b| {
        b.iter(|| {
            ResourceRef::parse(
                black_box("kustomizations.kustomize.toolkit.fluxcd.io/apps-wave-2"),
                Kind::ALL,
            )
            .unwrap()
        })
    });
    c.bench_function("go_duration_parse_format", |b| {
        b.iter(|| {
            let d: GoDuration = black_box("1h2m3.5s").parse().unwrap();
            d.to_string()
        })
    });
}

criterion_group!(shared, benches);
criterion_main!(shared);
