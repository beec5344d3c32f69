//! The controller's diagnosis over its reflector stores at 300 and 3,000 Kustomizations
//! (the generated fleet of [`unstick::synthetic::fleet`], fleet-shaped): every Kustomization,
//! the source, and the Flux controllers' Deployments in kube-runtime stores (filled through
//! their writers, as the watches fill them), then one diagnosis as the controller runs it on a
//! change: the stores read into a snapshot ([`cluster_loop_controller::diagnosis::snapshot`]
//! over [`unstick::cache::snapshot`]) and diagnosed ([`cluster_loop_controller::diagnosis::diagnose`]),
//! plus the /diagnoses document and the metric rows.
//!
//! Not measured here: the time from a held check's start to its Event on the real API
//! server, memory and API requests per minute (docs/controller.md says what was measured).
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::Value;
use tokio::sync::Notify;
use unstick::live::ControllerRef;

use cluster_loop_controller::watch::{Watched, Watches};

fn store(kind: &'static str, ar: ApiResource, objs: &[Value]) -> Watched {
    let mut w = Writer::<DynamicObject>::new(ar.clone());
    w.apply_watcher_event(&Event::Init);
    for o in objs {
        let d: DynamicObject = serde_json::from_value(o.clone()).unwrap();
        w.apply_watcher_event(&Event::InitApply(d));
    }
    w.apply_watcher_event(&Event::InitDone);
    Watched {
        kind,
        ar,
        store: w.as_reader(),
    }
}

fn flux(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn watches(n: usize) -> Watches {
    let snap = unstick::synthetic::fleet(n);
    let deployments: Vec<Value> = snap.controller.iter().cloned().collect();
    Watches::from_stores(
        store(
            "Kustomization",
            flux(
                "kustomize.toolkit.fluxcd.io",
                "Kustomization",
                "kustomizations",
            ),
            &snap.kustomizations,
        ),
        vec![store(
            "GitRepository",
            flux(
                "source.toolkit.fluxcd.io",
                "GitRepository",
                "gitrepositories",
            ),
            &snap.sources,
        )],
        None,
        store(
            "Deployment",
            ApiResource::erase::<Deployment>(&()),
            &deployments,
        ),
        store("Lease", ApiResource::erase::<Lease>(&()), &[]),
        Arc::new(Notify::new()),
    )
}

fn bench(c: &mut Criterion) {
    let ctrl = ControllerRef {
        namespace: "flux-system".into(),
        name: "kustomize-controller".into(),
    };
    let mut g = c.benchmark_group("controller_diagnosis_over_stores");
    for n in [300, 3000] {
        let w = watches(n);
        let d = cluster_loop_controller::diagnosis::run(&w, None, &ctrl);
        eprintln!(
            "stores of {n}: {} Kustomizations diagnosed, {} not healthy, one diagnosis {:.1} ms",
            d.report.items.len(),
            d.report.not_healthy,
            d.secs * 1000.0
        );
        g.bench_with_input(BenchmarkId::from_parameter(n), &w, |b, w| {
            b.iter(|| {
                let d = cluster_loop_controller::diagnosis::run(w, None, &ctrl);
                let doc = serde_json::to_vec(&d.report).unwrap();
                let rows = cluster_loop_controller::metrics::rows(&d.report, d.at);
                (doc.len(), rows.len())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
