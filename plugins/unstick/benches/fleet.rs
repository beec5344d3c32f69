//! `kubectl unstick --all -A` on the 300-Kustomization / 10,000-object fleet scenario of the
//! twin: end to end (the real binary: connect, list calls, diagnose, JSON) and the engine
//! alone on the gathered snapshot. Before measuring, one run's API requests are counted with
//! the twin's request log and printed (budget: at most 15).

use std::process::Command;

use cluster_loop::cli::ClusterArgs;
use criterion::{Criterion, criterion_group, criterion_main};
use twin::testkit;
use unstick::lever::Options;
use unstick::live::{self, ControllerRef, Reader, Scope};
use unstick::report;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let run = rt.block_on(async {
        // 300 Kustomizations in 10 waves, 10,000 inventory objects, no models.
        let run = testkit::start_shipped("healthy-fleet-300").await;
        // One failed health check naming a Deployment, so the workload, pod and event
        // lists are part of the measured path.
        testkit::fail_health_check(&run, "wave-3-007", "Deployment/fleet-3/web");
        run
    });
    let kc = run.twin.kubeconfig_path().to_path_buf();
    let all = || {
        let o = Command::new(BIN)
            .arg("--kubeconfig")
            .arg(&kc)
            .args(["--all", "-A", "-o", "json"])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout.len()
    };
    run.twin.reset_requests();
    all();
    let reqs = run.twin.requests();
    eprintln!(
        "kubectl unstick --all -A on 300 Kustomizations / 10,000 objects: {} API requests ({})",
        reqs.len(),
        reqs.iter()
            .map(|r| format!("{} {}", r.verb, r.resource))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(reqs.len() <= 15);

    c.bench_function("unstick_all_300ks_end_to_end", |b| b.iter(all));

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
                namespace: "flux-system".into(),
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
    drop(run);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
