//! fleetlint on a generated fleet shaped like a real one: one cluster overlay whose root
//! renders 500 Flux Kustomizations (10 waves of 50, each wave dependsOn the previous one's
//! first Kustomization, postBuild substitution from a cluster-vars ConfigMap), each pointing at
//! its own app directory (kustomization.yaml + Deployment + Service + ConfigMap). 501 kustomize
//! directories in all.
//!
//! - `full_warm`: a whole run with the render cache warm (the CI case after the first run).
//! - `changed_since_one_file`: `--changed-since HEAD` after a one-file change in one app
//!   (the same change every run: every cache warm).
//! - `changed_since_new_change_each_run`: the same, but the file alternates between two edits,
//!   so every run meets a content the file-facts cache and the run pack do not hold (the
//!   change's render is in the cache: kustomize runs are not timed) and rewrites both.
//! - `full_cold` (one run, printed): every directory rendered by `kubectl kustomize`.
//!
//! `cargo bench -p kubectl-fleetlint --bench lint`. The fleet is written to a temporary
//! directory; `FLEETLINT_BENCH_KEEP=DIR` writes it to DIR instead and keeps it (e.g. to time
//! another tool on the same tree).

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::Path;
use std::process::Command;

const APPS: usize = 500;
const WAVE: usize = 50;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn generate(root: &Path) {
    write(
        root,
        "clusters/prod/flux-system/gotk-sync.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m\n  url: https://git.example.com/fleet.git\n  ref:\n    branch: main\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./clusters/prod\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    );
    write(
        root,
        "clusters/prod/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-sync.yaml\n",
    );
    write(
        root,
        "clusters/prod/cluster-vars.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\ndata:\n  CLUSTER_NAME: prod\n  REPLICAS: \"2\"\n",
    );
    let mut apps = String::new();
    for i in 0..APPS {
        let wave = i / WAVE;
        let dep = if wave == 0 {
            String::new()
        } else {
            format!("  dependsOn:\n    - name: app-{}\n", (wave - 1) * WAVE)
        };
        apps.push_str(&format!(
            "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app-{i}\n  namespace: flux-system\nspec:\n  interval: 10m\n  timeout: 5m\n  wait: true\n  prune: true\n  path: ./apps/wave-{wave}/app-{i}\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n{dep}  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-vars\n"
        ));
        let dir = format!("apps/wave-{wave}/app-{i}");
        write(
            root,
            &format!("{dir}/kustomization.yaml"),
            &format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: app-{i}\nresources:\n  - app.yaml\nimages:\n  - name: ghcr.io/example/app\n    newTag: 1.{i}.0\n"
            ),
        );
        write(
            root,
            &format!("{dir}/app.yaml"),
            &format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\nspec:\n  replicas: ${{REPLICAS}}\n  selector:\n    matchLabels: {{app: app-{i}}}\n  template:\n    metadata:\n      labels: {{app: app-{i}}}\n    spec:\n      enableServiceLinks: false\n      containers:\n        - name: app\n          image: ghcr.io/example/app\n          envFrom:\n            - configMapRef:\n                name: app-{i}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app-{i}\nspec:\n  selector: {{app: app-{i}}}\n  ports:\n    - name: http\n      port: 8080\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-{i}\ndata:\n  CLUSTER: ${{CLUSTER_NAME}}\n"
            ),
        );
    }
    write(root, "clusters/prod/apps.yaml", &apps);
    write(
        root,
        "clusters/prod/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - flux-system\n  - cluster-vars.yaml\n  - apps.yaml\n",
    );
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@example.com",
            "commit",
            "-qm",
            "fleet",
        ],
    ] {
        let ok = Command::new("git")
            .current_dir(root)
            .args(args)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
}

fn config(root: &Path, cache: &Path) -> fleetlint::Config {
    fleetlint::Config {
        path: root.to_path_buf(),
        repo_root: Some(root.to_path_buf()),
        cache_dir: Some(cache.to_path_buf()),
        markers: true,
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let root = match std::env::var_os("FLEETLINT_BENCH_KEEP") {
        Some(d) => std::path::PathBuf::from(d),
        None => tmp.path().join("fleet"),
    };
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    generate(&root);
    let cache = tmp.path().join("cache");
    let cfg = config(&root, &cache);

    let t = std::time::Instant::now();
    let r = fleetlint::run(&cfg).unwrap();
    eprintln!(
        "full_cold: {:.2}s, {} kubectl kustomize runs, {} Kustomizations, {} findings",
        t.elapsed().as_secs_f64(),
        r.stats.renders_run,
        r.stats.kustomizations,
        r.findings.len()
    );
    assert_eq!(r.stats.kustomizations, APPS + 1);
    assert!(r.findings.is_empty(), "the generated fleet lints clean");

    let mut g = c.benchmark_group("fleet_500");
    g.sample_size(10);
    g.bench_function("full_warm", |b| {
        b.iter(|| {
            let r = fleetlint::run(&cfg).unwrap();
            assert_eq!(r.stats.renders_run, 0);
        })
    });
    // a one-file change: one app's Deployment
    let f = root.join("apps/wave-3/app-170/app.yaml");
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, text.replace("replicas: ${REPLICAS}", "replicas: 3")).unwrap();
    let mut changed = cfg.clone();
    changed.changed_since = Some("HEAD".into());
    // the changed directory renders once; then every iteration is warm
    fleetlint::run(&changed).unwrap();
    g.bench_function("changed_since_one_file", |b| {
        b.iter(|| {
            let r = fleetlint::run(&changed).unwrap();
            assert_eq!(r.changed_files.as_ref().map(Vec::len), Some(1));
        })
    });
    // a different change every run: the file alternates between two edits (each rendered
    // once before), so every run meets a file content and a render the run pack does not
    // hold, and rewrites the pack and the file-facts cache
    let edits = [
        text.replace("replicas: ${REPLICAS}", "replicas: 3"),
        text.replace("replicas: ${REPLICAS}", "replicas: 4"),
    ];
    for e in &edits {
        std::fs::write(&f, e).unwrap();
        fleetlint::run(&changed).unwrap();
    }
    let mut n = 0usize;
    g.bench_function("changed_since_new_change_each_run", |b| {
        b.iter(|| {
            n += 1;
            std::fs::write(&f, &edits[n % 2]).unwrap();
            let r = fleetlint::run(&changed).unwrap();
            assert_eq!(r.stats.renders_run, 0, "both edits were rendered before");
            assert_eq!(r.changed_files.as_ref().map(Vec::len), Some(1));
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
