//! Twin API server benchmarks (`cargo bench -p twin`):
//!
//! - `load_10k_objects`: restore 10,000 objects (1,000 Kustomizations, 9,000 ConfigMaps in 30
//!   namespaces) into a fresh store.
//! - `list_all_kustomizations/store` and `/https_kube_rs`: list the 1,000 Kustomizations across
//!   all namespaces of a store holding 10,000 objects, in-process and through HTTPS with kube-rs.
//! - `watch_fanout_1000_events/store_10_watchers`: 1,000 writes delivered to 10 in-process
//!   watchers; `/https_kube_rs_1_watcher`: 1,000 writes delivered over an HTTPS watch.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use std::time::Duration;
use twin::{PatchKind, Store, Twin, TwinOptions};

fn objects() -> Vec<Value> {
    let mut v = Vec::with_capacity(10_030);
    for n in 0..30 {
        v.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("team-{n}")}}));
    }
    for i in 0..1_000 {
        v.push(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": format!("app-{i}"), "namespace": format!("team-{}", i % 30),
                         "labels": {"wave": (i % 3).to_string()}},
            "spec": {"interval": "10m", "path": format!("./apps/app-{i}"), "prune": true,
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}},
            "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True",
                "reason": "ReconciliationSucceeded", "message": "Applied revision: main@sha1:0123456789abcdef0123456789abcdef01234567",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }));
    }
    for i in 0..9_000 {
        v.push(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": format!("team-{}", i % 30),
                         "labels": {"kustomize.toolkit.fluxcd.io/name": format!("app-{}", i % 1000)}},
            "data": {"key": "value", "index": i.to_string()},
        }));
    }
    v
}

fn loaded_store(objs: &[Value]) -> Store {
    let s = Store::default();
    twin::install_flux_crds(&s).unwrap();
    for o in objs {
        s.restore(o.clone()).unwrap();
    }
    s
}

fn ks_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"),
        "kustomizations",
    )
}

async fn client(t: &Twin) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(t.kubeconfig_path()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

fn bench(c: &mut Criterion) {
    let objs = objects();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let mut g = c.benchmark_group("load_10k_objects");
    g.sample_size(10);
    g.bench_function("restore", |b| {
        b.iter_batched(
            || objs.clone(),
            |o| loaded_store(&o),
            BatchSize::PerIteration,
        )
    });
    g.finish();

    let store = loaded_store(&objs);
    let ks = store
        .gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
        .unwrap();
    let mut g = c.benchmark_group("list_all_kustomizations");
    g.sample_size(20);
    g.bench_function("store", |b| {
        b.iter(|| {
            let l = store.list(&ks, None, None).unwrap();
            assert_eq!(l.len(), 1_000);
        })
    });
    let twin = rt.block_on(async {
        let t = Twin::start(TwinOptions::default()).await.unwrap();
        for o in &objs {
            t.store().restore(o.clone()).unwrap();
        }
        t
    });
    let kc = rt.block_on(client(&twin));
    let api: Api<DynamicObject> = Api::all_with(kc.clone(), &ks_resource());
    g.bench_function("https_kube_rs", |b| {
        b.iter(|| {
            let l = rt.block_on(api.list(&ListParams::default())).unwrap();
            assert_eq!(l.items.len(), 1_000);
        })
    });
    g.finish();

    let mut g = c.benchmark_group("watch_fanout_1000_events");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("store_10_watchers", |b| {
        b.iter(|| {
            rt.block_on(async {
                let rv = store.resource_version().to_string();
                let mut handles = Vec::new();
                for _ in 0..10 {
                    let mut w = store.watch(&ks, None, Some(&rv)).unwrap();
                    handles.push(tokio::spawn(async move {
                        for _ in 0..1_000 {
                            w.next().await.unwrap();
                        }
                    }));
                }
                for i in 0..1_000 {
                    store
                        .patch(
                            &ks,
                            Some(&format!("team-{}", i % 30)),
                            &format!("app-{i}"),
                            PatchKind::Merge,
                            &json!({"metadata": {"annotations": {"bench": rv.clone()}}}),
                            "bench",
                        )
                        .unwrap();
                }
                for h in handles {
                    h.await.unwrap();
                }
            })
        })
    });
    let tstore = twin.store();
    g.bench_function("https_kube_rs_1_watcher", |b| {
        b.iter(|| {
            rt.block_on(async {
                let rv = tstore.resource_version().to_string();
                let mut w = api
                    .watch(
                        &WatchParams::default().timeout(300).disable_bookmarks(),
                        &rv,
                    )
                    .await
                    .unwrap()
                    .boxed();
                for i in 0..1_000 {
                    tstore
                        .patch(
                            &ks,
                            Some(&format!("team-{}", i % 30)),
                            &format!("app-{i}"),
                            PatchKind::Merge,
                            &json!({"metadata": {"annotations": {"bench": rv.clone()}}}),
                            "bench",
                        )
                        .unwrap();
                }
                let mut n = 0;
                while n < 1_000 {
                    match w.next().await.unwrap().unwrap() {
                        WatchEvent::Modified(_) => n += 1,
                        WatchEvent::Error(e) => panic!("{e:?}"),
                        _ => {}
                    }
                }
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
