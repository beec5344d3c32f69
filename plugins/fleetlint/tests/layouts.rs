//! The example fleet (clusters/) and the public Flux layouts (base + overlays,
//! multi-tenancy), recreated as small fixtures of our own: no false positive.

mod common;
use common::{Fleet, rules, show, workspace};
use std::collections::BTreeSet;

fn example(overlay: &str) -> fleetlint::Report {
    let ws = workspace();
    fleetlint::run(&fleetlint::Config {
        path: ws.join("clusters"),
        repo_root: Some(ws.clone()),
        overlays: vec![ws.join(overlay)],
        cache_dir: None,
        ..Default::default()
    })
    .expect("run")
}

#[test]
fn example_dev_lints_clean() {
    let r = example("clusters/dev");
    assert!(r.findings.is_empty(), "{}", show(&r));
    // the whole graph was found: root, platform layers and the app waves
    let ids: BTreeSet<&str> = r.overlays[0]
        .kustomizations
        .iter()
        .map(|k| k.id.as_str())
        .collect();
    for k in [
        "flux-system",
        "platform",
        "platform-config",
        "apps-wave-0",
        "apps-wave-1",
        "apps-wave-2",
    ] {
        assert!(ids.contains(format!("flux-system/{k}").as_str()), "{ids:?}");
    }
}

#[test]
fn example_prod_reports_exactly_its_placeholders() {
    let ws = workspace();
    // the placeholders prod writes, read from its files (not hard-coded)
    let re = regex::Regex::new(r"TBD-PROD-[A-Za-z0-9_-]+").unwrap();
    let mut written = BTreeSet::new();
    for e in std::fs::read_dir(ws.join("clusters/prod")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for l in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            for m in re.find_iter(l) {
                written.insert(m.as_str().to_string());
            }
        }
    }
    assert!(!written.is_empty());
    let r = example("clusters/prod");
    assert!(r.findings.iter().all(|f| f.rule == "FL040"), "{}", show(&r));
    let reported: BTreeSet<String> = r
        .findings
        .iter()
        .map(|f| re.find(&f.message).unwrap().as_str().to_string())
        .collect();
    assert_eq!(reported, written);
    assert_eq!(r.findings.len(), written.len(), "{}", show(&r));
    for f in &r.findings {
        assert!(f.file.starts_with("clusters/prod/"), "{}", show(&r));
    }
}

#[test]
fn example_overlays_are_found() {
    let ws = workspace();
    let r = fleetlint::run(&fleetlint::Config {
        path: ws.join("clusters"),
        repo_root: Some(ws.clone()),
        cache_dir: None,
        ..Default::default()
    })
    .unwrap();
    let dirs: Vec<&str> = r.overlays.iter().map(|o| o.dir.as_str()).collect();
    assert_eq!(dirs, ["clusters/dev", "clusters/prod"]);
    assert!(
        r.findings
            .iter()
            .all(|f| f.overlay.as_deref() == Some("clusters/prod"))
    );
}

const K: &str = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";

fn sync(cluster: &str) -> String {
    format!(
        r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  url: ssh://git@git.example.com/platform/fleet
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./clusters/{cluster}
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
"#
    )
}

fn flux_ks(name: &str, path: &str, extra: &str) -> String {
    format!(
        r#"---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {name}
  namespace: flux-system
spec:
  interval: 1h
  retryInterval: 1m
  timeout: 5m
  sourceRef:
    kind: GitRepository
    name: flux-system
  path: {path}
  prune: true
  wait: true
{extra}"#
    )
}

/// Base + overlays (the shape of a "kustomize + helm" example repository, helm left out):
/// clusters/<env>/ without a kustomization file (kustomize-controller generates one), an
/// infrastructure layer, apps/base plus apps/<env> overlays patching it.
#[test]
fn base_and_overlays_layout_is_clean() {
    let f = Fleet {
        dir: tempfile::tempdir().unwrap(),
    };
    for env in ["staging", "production"] {
        f.write(
            &format!("clusters/{env}/flux-system/gotk-sync.yaml"),
            &sync(env),
        );
        f.write(
            &format!("clusters/{env}/flux-system/kustomization.yaml"),
            &format!("{K}resources:\n  - gotk-sync.yaml\n"),
        );
        f.write(
            &format!("clusters/{env}/infrastructure.yaml"),
            &format!(
                "{}{}",
                flux_ks("infra-controllers", "./infrastructure/controllers", ""),
                flux_ks(
                    "infra-configs",
                    "./infrastructure/configs",
                    "  dependsOn:\n    - name: infra-controllers\n"
                )
            ),
        );
        f.write(
            &format!("clusters/{env}/apps.yaml"),
            &flux_ks(
                "apps",
                &format!("./apps/{env}"),
                "  dependsOn:\n    - name: infra-configs\n",
            ),
        );
        f.write(&format!("apps/{env}/kustomization.yaml"), &format!("{K}resources:\n  - ../base/podinfo\npatches:\n  - path: podinfo-values.yaml\n    target:\n      kind: Deployment\n      name: podinfo\n"));
        let replicas = if env == "production" { 3 } else { 1 };
        f.write(
            &format!("apps/{env}/podinfo-values.yaml"),
            &format!("- op: replace\n  path: /spec/replicas\n  value: {replicas}\n"),
        );
    }
    f.write(
        "infrastructure/controllers/kustomization.yaml",
        &format!("{K}resources:\n  - ingress-nginx.yaml\n"),
    );
    f.write(
        "infrastructure/controllers/ingress-nginx.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ingress-nginx\n",
    );
    f.write(
        "infrastructure/configs/kustomization.yaml",
        &format!("{K}resources:\n  - issuer.yaml\n"),
    );
    f.write(
        "infrastructure/configs/issuer.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-issuer\n  namespace: ingress-nginx\ndata:\n  email: ops@example.com\n",
    );
    f.write(
        "apps/base/podinfo/kustomization.yaml",
        &format!("{K}namespace: podinfo\nresources:\n  - namespace.yaml\n  - deployment.yaml\n"),
    );
    f.write(
        "apps/base/podinfo/namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: podinfo\n",
    );
    f.write(
        "apps/base/podinfo/deployment.yaml",
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
spec:
  replicas: 1
  selector:
    matchLabels: {app: podinfo}
  template:
    metadata:
      labels: {app: podinfo}
    spec:
      containers:
        - name: podinfod
          image: ghcr.io/stefanprodan/podinfo:6.7.1
          env:
            - name: PODINFO_UI_COLOR
              value: blue
---
apiVersion: v1
kind: Service
metadata:
  name: podinfo
spec:
  selector: {app: podinfo}
  ports:
    - name: http
      port: 9898
"#,
    );
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    let dirs: Vec<&str> = r.overlays.iter().map(|o| o.dir.as_str()).collect();
    assert_eq!(dirs, ["clusters/production", "clusters/staging"]);
    for o in &r.overlays {
        assert_eq!(o.kustomizations.len(), 4, "{:?}", o.kustomizations);
        let apps = o
            .kustomizations
            .iter()
            .find(|k| k.id == "flux-system/apps")
            .unwrap();
        assert_eq!(apps.timeout_chain, "15m0s");
    }
}

/// Multi-tenancy: the platform repository creates a tenant namespace, its service account and
/// a GitRepository + Kustomization pointing at the tenant's own repository (not followed:
/// another source), patched per cluster.
#[test]
fn multi_tenancy_layout_is_clean() {
    let f = Fleet {
        dir: tempfile::tempdir().unwrap(),
    };
    f.write(
        "clusters/staging/flux-system/gotk-sync.yaml",
        &sync("staging"),
    );
    f.write(
        "clusters/staging/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/staging/infrastructure.yaml",
        &flux_ks("infrastructure", "./infrastructure", ""),
    );
    f.write(
        "clusters/staging/tenants.yaml",
        &flux_ks(
            "tenants",
            "./tenants/staging",
            "  dependsOn:\n    - name: infrastructure\n",
        ),
    );
    f.write(
        "infrastructure/kustomization.yaml",
        &format!("{K}resources:\n  - policies.yaml\n"),
    );
    f.write(
        "infrastructure/policies.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tenant-policies\n  namespace: flux-system\ndata:\n  serviceAccount: required\n",
    );
    f.write(
        "tenants/base/dev-team/kustomization.yaml",
        &format!("{K}namespace: apps\nresources:\n  - rbac.yaml\n  - sync.yaml\n"),
    );
    f.write(
        "tenants/base/dev-team/rbac.yaml",
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: apps
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: dev-team
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: dev-team-reconciler
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: dev-team
    namespace: apps
"#,
    );
    f.write(
        "tenants/base/dev-team/sync.yaml",
        r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: dev-team
spec:
  interval: 5m
  url: https://git.example.com/dev-team/apps
  ref:
    branch: main
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: dev-team
spec:
  serviceAccountName: dev-team
  interval: 5m
  sourceRef:
    kind: GitRepository
    name: dev-team
  prune: true
  wait: true
  timeout: 3m
"#,
    );
    f.write(
        "tenants/staging/kustomization.yaml",
        &format!("{K}resources:\n  - ../base/dev-team\npatches:\n  - path: dev-team-patch.yaml\n"),
    );
    f.write(
        "tenants/staging/dev-team-patch.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: dev-team\n  namespace: apps\nspec:\n  path: ./deploy/staging\n",
    );
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(rules(&r).len(), 0);
    let o = &r.overlays[0];
    let tenant = o
        .kustomizations
        .iter()
        .find(|k| k.id == "apps/dev-team")
        .expect("tenant found");
    assert!(
        !tenant.followed,
        "the tenant's path is in the tenant's repository"
    );
    assert_eq!(tenant.source_ref, "GitRepository/apps/dev-team");
}

/// The layout `flux bootstrap` writes (clusters/test holds no kustomization file, only
/// flux-system/ and plain manifests, rendered as kustomize-controller generates it): when the
/// cluster directory does not render (two files define the same ConfigMap), it is reported once
/// as FL001 naming it and kustomize's error, not dropped (before: no overlay, no finding); when
/// its flux-system/ does not render either, the one finding is the cluster directory's, whose
/// error holds flux-system's.
#[test]
fn a_bootstrap_cluster_directory_that_does_not_render_is_reported_once() {
    let f = Fleet {
        dir: tempfile::tempdir().unwrap(),
    };
    f.write(
        "clusters/test/flux-system/gotk-sync.yaml",
        common::GOTK_SYNC,
    );
    f.write(
        "clusters/test/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-sync.yaml\n",
    );
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: flux-system\ndata:\n  a: \"1\"\n";
    f.write("clusters/test/settings.yaml", cm);
    let clean = f.lint();
    assert!(clean.findings.is_empty(), "{}", show(&clean));
    assert_eq!(clean.overlays.len(), 1);
    assert_eq!(clean.overlays[0].dir, "clusters/test");
    assert!(clean.overlays[0].rendered);

    f.write("clusters/test/settings-copy.yaml", cm);
    let broken = f.lint();
    let fl001: Vec<_> = broken
        .findings
        .iter()
        .filter(|x| x.rule == "FL001")
        .collect();
    assert_eq!(fl001.len(), 1, "{}", show(&broken));
    assert!(
        fl001[0].message.contains("clusters/test")
            && fl001[0].message.contains("already registered id"),
        "{}",
        fl001[0].message
    );
    assert_eq!(broken.overlays.len(), 1);
    assert_eq!(broken.overlays[0].dir, "clusters/test");
    assert!(!broken.overlays[0].rendered);
    assert!(broken.has_errors());

    f.write(
        "clusters/test/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-sync.yaml\n  - gotk-components.yaml\n",
    );
    let both = f.lint();
    let fl001: Vec<_> = both.findings.iter().filter(|x| x.rule == "FL001").collect();
    assert_eq!(fl001.len(), 1, "{}", show(&both));
    assert!(
        fl001[0]
            .message
            .contains("overlay candidate clusters/test ")
            && fl001[0].message.contains("gotk-components.yaml"),
        "{}",
        fl001[0].message
    );
}

fn empty_fleet() -> Fleet {
    Fleet {
        dir: tempfile::tempdir().unwrap(),
    }
}

fn app_dir(f: &Fleet, dir: &str, name: &str) {
    f.write(
        &format!("{dir}/kustomization.yaml"),
        &format!("{K}resources:\n  - cm.yaml\n"),
    );
    f.write(
        &format!("{dir}/cm.yaml"),
        &format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  a: \"1\"\n"),
    );
}

/// A `flux bootstrap --path` directory before bootstrap: Flux Kustomizations and no
/// flux-system yet, no kustomization file (the shape of the best-known Flux example
/// repositories: clusters/production/{apps.yaml,infrastructure.yaml}). It is the overlay:
/// bootstrap adds the Kustomization flux-system whose path it is. Never "nothing to lint".
#[test]
fn a_bootstrap_path_without_flux_system_is_an_overlay() {
    let f = empty_fleet();
    f.write(
        "clusters/production/infrastructure.yaml",
        &flux_ks("infra-controllers", "./infrastructure/controllers", ""),
    );
    f.write(
        "clusters/production/apps.yaml",
        &flux_ks(
            "apps",
            "./apps/production",
            "  dependsOn:\n    - name: infra-controllers\n",
        ),
    );
    app_dir(&f, "infrastructure/controllers", "controllers");
    app_dir(&f, "apps/production", "podinfo");
    let r = f.lint();
    assert_eq!(r.overlays.len(), 1, "{}", show(&r));
    assert_eq!(r.overlays[0].dir, "clusters/production");
    let ids: BTreeSet<&str> = r.overlays[0]
        .kustomizations
        .iter()
        .map(|k| k.id.as_str())
        .collect();
    assert!(
        ids.contains("flux-system/apps") && ids.contains("flux-system/infra-controllers"),
        "{ids:?}"
    );
    assert!(!r.has_errors(), "{}", show(&r));
    // the sync source bootstrap writes is named, not an error
    assert!(rules(&r).iter().all(|x| x == "FL004"), "{}", show(&r));
}

/// A FluxInstance made by flux-operator's flux-instance chart whose values come from a file:
/// the HelmRelease reads `valuesFrom` a ConfigMap that a configMapGenerator makes from
/// values.yaml. Its `instance.sync.path` is the overlay.
#[test]
fn a_flux_instance_chart_with_values_from_a_generated_configmap_is_found() {
    let f = empty_fleet();
    f.write(
        "bootstrap/kustomization.yaml",
        &format!(
            "{K}namespace: flux-system\nresources:\n  - release.yaml\nconfigMapGenerator:\n  - name: flux-instance-values\n    files:\n      - values.yaml=instance-values.yaml\ngeneratorOptions:\n  disableNameSuffixHash: true\n"
        ),
    );
    f.write(
        "bootstrap/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: flux-instance\n  namespace: flux-system\nspec:\n  interval: 1h\n  chart:\n    spec:\n      chart: flux-instance\n      sourceRef:\n        kind: HelmRepository\n        name: controlplaneio\n  valuesFrom:\n    - kind: ConfigMap\n      name: flux-instance-values\n",
    );
    f.write(
        "bootstrap/instance-values.yaml",
        "instance:\n  distribution:\n    version: 2.x\n  sync:\n    kind: GitRepository\n    url: https://git.example.com/fleet.git\n    ref: refs/heads/main\n    path: clusters/main\n",
    );
    f.write(
        "clusters/main/apps.yaml",
        &flux_ks("apps", "./apps/main", ""),
    );
    app_dir(&f, "apps/main", "main");
    let r = f.lint();
    let dirs: Vec<&str> = r.overlays.iter().map(|o| o.dir.as_str()).collect();
    assert!(dirs.contains(&"clusters/main"), "{dirs:?}\n{}", show(&r));
    let main = r
        .overlays
        .iter()
        .find(|o| o.dir == "clusters/main")
        .unwrap();
    assert!(
        main.kustomizations
            .iter()
            .any(|k| k.id == "flux-system/apps"),
        "{:?}",
        main.kustomizations
    );
    assert!(!r.has_errors(), "{}", show(&r));
}

/// A repository root that no Kustomization points at (no kustomization file; tool YAML such
/// as a Taskfile.yml, an archive directory holding an old Kustomization without spec.path) is
/// never an overlay: no FL001 for it, the cluster directory is linted.
#[test]
fn a_root_no_kustomization_points_at_is_not_an_overlay() {
    let f = empty_fleet();
    f.write(
        "Taskfile.yml",
        "version: \"3\"\ntasks:\n  lint:\n    cmds:\n      - kubectl fleetlint\n",
    );
    f.write(
        "archive/old-app.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: old-app\n  namespace: flux-system\nspec:\n  interval: 1h\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    );
    f.write("clusters/main/flux-system/gotk-sync.yaml", &sync("main"));
    f.write(
        "clusters/main/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/main/apps.yaml",
        &flux_ks("apps", "./apps/main", ""),
    );
    app_dir(&f, "apps/main", "main");
    let r = f.lint();
    let dirs: Vec<&str> = r.overlays.iter().map(|o| o.dir.as_str()).collect();
    assert_eq!(dirs, ["clusters/main"], "{}", show(&r));
    assert!(r.findings.is_empty(), "{}", show(&r));
}

/// Self-managed Kustomizations: each ks.yaml sits inside its own spec.path (the directory has
/// no kustomization file, so the generated one applies ks.yaml too), listed by a cluster root
/// that cannot render offline (one remote resource). They are read under that root, never
/// each as an overlay of its own (which gave a false FL010 for a sibling dependency and a
/// false FL003 for the root's source).
#[test]
fn self_managed_kustomizations_are_read_under_their_root() {
    let f = empty_fleet();
    f.write("clusters/main/flux-system/gotk-sync.yaml", &sync("main"));
    f.write(
        "clusters/main/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/main/kustomization.yaml",
        &format!(
            "{K}resources:\n  - flux-system\n  - https://git.example.invalid/platform/shared//deploy?ref=v1.0.0\n  - ../../apps/web/ks.yaml\n  - ../../apps/db/ks.yaml\n"
        ),
    );
    f.write(
        "apps/web/ks.yaml",
        &flux_ks("web", "./apps/web", "  dependsOn:\n    - name: db\n"),
    );
    f.write(
        "apps/web/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\ndata:\n  a: \"1\"\n",
    );
    f.write("apps/db/ks.yaml", &flux_ks("db", "./apps/db", ""));
    f.write(
        "apps/db/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  namespace: default\ndata:\n  a: \"1\"\n",
    );
    let r = f.lint();
    let dirs: Vec<&str> = r.overlays.iter().map(|o| o.dir.as_str()).collect();
    assert_eq!(dirs, ["clusters/main"], "{}", show(&r));
    assert!(
        !rules(&r).iter().any(|x| x == "FL010" || x == "FL003"),
        "{}",
        show(&r)
    );
}

/// The root Flux Kustomization's file broken by a bad edit (a tab, an unclosed flow mapping):
/// it does not parse, so no Flux Kustomization is read from it. The real kustomize-controller
/// fails that build (BuildFailed, the YAML error); fleetlint says so as FL001 naming the file's
/// parse error (exit 1), never "nothing to lint" (exit 2), which blamed the path given. Found
/// by a fresh-user trial.
#[test]
fn a_root_kustomization_that_is_not_yaml_is_a_render_error_not_nothing_to_lint() {
    let f = Fleet {
        dir: tempfile::tempdir().unwrap(),
    };
    let broken = common::GOTK_SYNC.replace("  prune: true\n", "  prune: {true\n");
    f.write("clusters/test/flux-system/gotk-sync.yaml", &broken);
    f.write(
        "clusters/test/flux-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-sync.yaml\n",
    );
    f.write(
        "clusters/test/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - flux-system\n",
    );
    let r = f.lint();
    let fl001: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL001").collect();
    assert_eq!(fl001.len(), 1, "{}", show(&r));
    assert!(
        fl001[0].message.contains("clusters/test") && fl001[0].message.contains("gotk-sync.yaml"),
        "{}",
        fl001[0].message
    );
    assert!(r.has_errors());
    assert_eq!(r.overlays.len(), 1, "{}", show(&r));
}

/// The same broken file in a directory of plain YAML that names no Flux API: still "nothing
/// to lint" (a Helm chart's templates are not YAML either, and are not a fleet).
#[test]
fn a_broken_file_that_names_no_flux_kustomization_does_not_make_an_overlay() {
    let f = Fleet {
        dir: tempfile::tempdir().unwrap(),
    };
    f.write(
        "chart/templates/deploy.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
    );
    let r = f.lint();
    assert!(r.overlays.is_empty(), "{}", show(&r));
}
