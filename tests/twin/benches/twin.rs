//! Twin benchmarks (filled in below).
use criterion::{Criterion, criterion_group, criterion_main};

fn list(c: &mut Criterion) {
    let store = twin::Store::default();
    twin::install_flux_crds(&store).unwrap();
    let gvr = store
        .gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
        .unwrap();
    c.bench_function("list_empty", |b| {
        b.iter(|| store.list(&gvr, None, None).unwrap())
    });
}

criterion_group!(benches, list);
criterion_main!(benches);
