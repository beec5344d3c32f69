//! Benchmark: a generated tree of 10,000 manifests (100 directories, each with a
//! kustomization.yaml) of which 1,000 carry a setter marker, scanned and checked end to end;
//! compared with `grep -rl '"$imagepolicy"'` over the same tree.
//!
//! `cargo bench -p kubectl-markercheck`. The tree is left in
//! `$TMPDIR/markercheck-bench-tree` so peak memory can be measured with
//! `/usr/bin/time -v target/release/kubectl-markercheck $TMPDIR/markercheck-bench-tree`.

use criterion::{Criterion, criterion_group, criterion_main};
use markercheck::check::{Config, run};
use markercheck::objects::{ImagePolicy, LatestRef, Origin};
use std::path::{Path, PathBuf};

fn deployment(i: usize, marker: bool) -> String {
    let m = if marker {
        r#" # {"$imagepolicy": "flux-system:app"}"#
    } else {
        ""
    };
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: apps\n  labels:\n    app.kubernetes.io/name: app-{i}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: app-{i}\n  template:\n    metadata:\n      labels:\n        app: app-{i}\n    spec:\n      containers:\n        - name: app\n          image: ghcr.io/org/app:1.0.0{m}\n          ports:\n            - containerPort: 8080\n          resources:\n            requests:\n              cpu: 10m\n              memory: 32Mi\n"
    )
}

/// Build (once) and return the tree.
pub fn tree() -> PathBuf {
    let root = std::env::temp_dir().join("markercheck-bench-tree");
    let stamp = root.join(".complete");
    if stamp.exists() {
        return root;
    }
    let _ = std::fs::remove_dir_all(&root);
    for d in 0..100 {
        let dir = root.join(format!("apps/team-{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut res = String::new();
        for j in 0..100 {
            let i = d * 100 + j;
            let name = format!("app-{j:03}.yaml");
            std::fs::write(dir.join(&name), deployment(i, i % 10 == 0)).unwrap();
            res.push_str(&format!("  - {name}\n"));
        }
        std::fs::write(
            dir.join("kustomization.yaml"),
            format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{res}"),
        )
        .unwrap();
    }
    std::fs::write(&stamp, "").unwrap();
    root
}

fn config(root: &Path) -> Config {
    Config {
        paths: vec![root.to_path_buf()],
        default_namespace: "flux-system".into(),
        sets: vec![ImagePolicy {
            namespace: "flux-system".into(),
            name: "app".into(),
            labels: Default::default(),
            repository: None,
            latest: LatestRef::parse("ghcr.io/org/app:1.2.3"),
            origin: Origin::Flag,
        }],
        max_file_size: markercheck::scan::DEFAULT_MAX_FILE_SIZE,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let root = tree();
    let cfg = config(&root);
    // sanity: the run sees the 1,000 markers and would rewrite 1,000 files
    let r = run(&cfg);
    assert_eq!(r.stats.markers, 1000);
    assert_eq!(r.changes.len(), 1000);
    let mut g = c.benchmark_group("tree-10k-manifests-1k-markers");
    g.sample_size(10);
    g.bench_function("markercheck check+simulate", |b| b.iter(|| run(&cfg)));
    g.bench_function("markercheck scan only", |b| {
        b.iter(|| markercheck::scan::scan_root(&root, markercheck::scan::DEFAULT_MAX_FILE_SIZE))
    });
    g.bench_function("grep -rl '\"$imagepolicy\"'", |b| {
        b.iter(|| {
            let o = std::process::Command::new("grep")
                .args(["-rl", "\"$imagepolicy\""])
                .arg(&root)
                .output()
                .unwrap();
            assert!(o.status.success());
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
