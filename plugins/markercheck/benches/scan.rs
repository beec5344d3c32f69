//! Benchmark on fleet-shaped trees, one ImagePolicy per marked image (the way real fleets are
//! laid out: each app has its ImageRepository + ImagePolicy next to its manifests), with the
//! policies' `status.latestRef` in the tree and one ImageUpdateAutomation at the root:
//!
//! - `fleet-10k`: 10,000 files in 100 kustomization directories, 1,000 markers, 1,000
//!   ImagePolicies (each directory: 90 Deployments, 9 without a marker for each one with,
//!   and 10 `image-*.yaml` files with the ImageRepository and ImagePolicy of one app);
//! - `fleet-100k`: the same layout with 1,000 directories: 100,000 files, 10,000 markers,
//!   10,000 ImagePolicies;
//! - `mapping-16mb` / `mapping-50mb`: one file holding a mapping of that size plus a marker.
//!
//! Each is run end to end (lint + simulation of every marker) and compared with
//! `grep -rl '"$imagepolicy"'` over the same tree. `cargo bench -p kubectl-markercheck`; the
//! trees stay in `$TMPDIR/markercheck-bench/<name>` for `benches/compare.sh` (release binary,
//! hyperfine, peak RSS).

use criterion::{Criterion, criterion_group, criterion_main};
use markercheck::check::{Config, run};
use std::path::{Path, PathBuf};

fn deployment(i: usize, marker: bool) -> String {
    let m = if marker {
        format!(r#" # {{"$imagepolicy": "flux-system:app-{i}"}}"#)
    } else {
        String::new()
    };
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: apps\n  labels:\n    app.kubernetes.io/name: app-{i}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: app-{i}\n  template:\n    metadata:\n      labels:\n        app: app-{i}\n    spec:\n      containers:\n        - name: app\n          image: ghcr.io/org/app-{i}:1.0.0{m}\n          ports:\n            - containerPort: 8080\n          resources:\n            requests:\n              cpu: 10m\n              memory: 32Mi\n"
    )
}

fn image_objects(i: usize) -> String {
    format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata:\n  name: app-{i}\n  namespace: flux-system\nspec:\n  image: ghcr.io/org/app-{i}\n  interval: 5m\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: app-{i}\n  namespace: flux-system\nspec:\n  imageRepositoryRef:\n    name: app-{i}\n  policy:\n    semver:\n      range: 1.x\nstatus:\n  latestRef:\n    name: ghcr.io/org/app-{i}\n    tag: 1.2.3\n"
    )
}

const AUTOMATION: &str = "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata:\n  name: fleet\n  namespace: flux-system\nspec:\n  interval: 10m\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  git:\n    commit:\n      author:\n        name: fluxcdbot\n        email: fluxcdbot@users.noreply.github.com\n  update:\n    path: ./\n    strategy: Setters\n";

/// Build (once) and return a fleet tree of `dirs` directories of 100 files each: 100 x `dirs`
/// files, `dirs` x 10 markers and as many ImagePolicies.
pub fn fleet(name: &str, dirs: usize) -> PathBuf {
    let root = std::env::temp_dir().join("markercheck-bench").join(name);
    let stamp = root.join(".complete");
    if stamp.exists() {
        return root;
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("clusters")).unwrap();
    std::fs::write(root.join("clusters/automation.yaml"), AUTOMATION).unwrap();
    for d in 0..dirs {
        let dir = root.join(format!("apps/team-{d:04}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut res = String::new();
        for j in 0..90 {
            // every 9th Deployment carries a marker: 10 per directory
            let i = d * 90 + j;
            let name = format!("app-{j:03}.yaml");
            std::fs::write(dir.join(&name), deployment(i, j % 9 == 0)).unwrap();
            res.push_str(&format!("  - {name}\n"));
        }
        for j in 0..10 {
            let i = d * 90 + j * 9;
            let name = format!("image-{j:02}.yaml");
            std::fs::write(dir.join(&name), image_objects(i)).unwrap();
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

/// Build (once) a tree with one file of about `mb` MB: a ConfigMap whose `data` mapping has
/// one key per 40 bytes, and a Deployment-like marker at its end.
pub fn big_mapping(name: &str, mb: usize) -> PathBuf {
    let root = std::env::temp_dir().join("markercheck-bench").join(name);
    let stamp = root.join(".complete");
    if stamp.exists() {
        return root;
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let mut s = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: apps\ndata:\n",
    );
    let mut i = 0;
    while s.len() < mb << 20 {
        s.push_str(&format!("  key-{i:09}: value-{i:09}-abcdefgh\n"));
        i += 1;
    }
    s.push_str("image: ghcr.io/org/app-0:1.0.0 # {\"$imagepolicy\": \"flux-system:app-0\"}\n");
    std::fs::write(root.join("big.yaml"), s).unwrap();
    std::fs::write(root.join("image.yaml"), image_objects(0)).unwrap();
    std::fs::write(&stamp, "").unwrap();
    root
}

fn config(root: &Path) -> Config {
    Config {
        paths: vec![root.to_path_buf()],
        default_namespace: "flux-system".into(),
        max_file_size: markercheck::scan::DEFAULT_MAX_FILE_SIZE,
        repo_root: Some(root.to_path_buf()),
        ..Default::default()
    }
}

fn grep(root: &Path) {
    let o = std::process::Command::new("grep")
        .args(["-rl", "\"$imagepolicy\""])
        .arg(root)
        .output()
        .unwrap();
    assert!(o.status.success());
}

fn bench_tree(c: &mut Criterion, group: &str, root: &Path, markers: usize, samples: usize) {
    let cfg = config(root);
    // sanity: every marker is read and simulated, one rewrite per marked file
    let r = run(&cfg);
    assert_eq!(r.stats.markers, markers, "{group}");
    assert_eq!(r.changes.len(), markers, "{group}");
    assert!(
        r.findings
            .iter()
            .all(|f| f.severity != markercheck::check::Severity::Error),
        "{group}: {:?}",
        r.findings.iter().take(3).collect::<Vec<_>>()
    );
    let mut g = c.benchmark_group(group);
    g.sample_size(samples);
    g.bench_function("markercheck check+simulate", |b| b.iter(|| run(&cfg)));
    g.bench_function("grep -rl '\"$imagepolicy\"'", |b| b.iter(|| grep(root)));
    g.finish();
}

fn bench(c: &mut Criterion) {
    let which = std::env::var("MARKERCHECK_BENCH").unwrap_or_default();
    let on = |n: &str| which.is_empty() || which.split(',').any(|w| w == n);
    if on("fleet-10k") {
        let t = fleet("fleet-10k", 100);
        bench_tree(c, "fleet-10k-files-1k-markers-1k-policies", &t, 1000, 10);
    }
    if on("fleet-100k") {
        let t = fleet("fleet-100k", 1000);
        bench_tree(
            c,
            "fleet-100k-files-10k-markers-10k-policies",
            &t,
            10_000,
            10,
        );
    }
    if on("mapping-16mb") {
        let t = big_mapping("mapping-16mb", 16);
        bench_tree(c, "one-16mb-mapping", &t, 1, 10);
    }
    if on("mapping-50mb") {
        let t = big_mapping("mapping-50mb", 50);
        bench_tree(c, "one-50mb-mapping", &t, 1, 10);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
