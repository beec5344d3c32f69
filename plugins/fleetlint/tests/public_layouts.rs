//! Public fleet layouts that fleetlint read differently from Flux (issue 27), recreated as
//! small fixtures of our own (never copied): each lints with no error (exit 0), and each seeded
//! mistake gives exactly its rule.

mod common;
use common::{Fleet, show};

const K: &str = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";

fn fleet() -> Fleet {
    Fleet {
        dir: tempfile::tempdir().unwrap(),
    }
}

/// `flux bootstrap`'s sync objects for `clusters/{cluster}`.
fn gotk_sync(cluster: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m0s\n  ref:\n    branch: main\n  url: ssh://git@git.example.com/platform/fleet\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m0s\n  path: ./clusters/{cluster}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
    )
}

/// A Flux Kustomization of `flux-system` reading `source` (`Kind/name`).
fn flux_ks(name: &str, source: &str, path: &str, extra: &str) -> String {
    let (kind, sname) = source.split_once('/').unwrap();
    format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 1h\n  timeout: 5m\n  sourceRef:\n    kind: {kind}\n    name: {sname}\n  path: {path}\n  prune: true\n  wait: true\n{extra}"
    )
}

/// A small excerpt of the CRD `flux bootstrap` writes into gotk-components.yaml: Flux's own
/// schema documents the envsubst operators as `${var:=default}` in a description.
const GOTK_COMPONENTS: &str = r#"---
apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kustomizations.kustomize.toolkit.fluxcd.io
spec:
  group: kustomize.toolkit.fluxcd.io
  names:
    kind: Kustomization
    plural: kustomizations
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                postBuild:
                  type: object
                  properties:
                    substitute:
                      type: object
                      additionalProperties:
                        type: string
                      description: |-
                        Substitute holds a map of key/value pairs.
                        Includes support for bash string replacement functions
                        e.g. ${var:=default}, ${var:position} and ${var/substring/replacement}.
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kustomize-controller
  namespace: flux-system
spec:
  selector:
    matchLabels: {app: kustomize-controller}
  template:
    metadata:
      labels: {app: kustomize-controller}
    spec:
      containers:
        - name: manager
          image: ghcr.io/fluxcd/kustomize-controller:v1.10.1
"#;

fn bootstrap(f: &Fleet, cluster: &str) {
    f.write(
        &format!("clusters/{cluster}/flux-system/gotk-sync.yaml"),
        &gotk_sync(cluster),
    );
    f.write(
        &format!("clusters/{cluster}/flux-system/gotk-components.yaml"),
        GOTK_COMPONENTS,
    );
    f.write(
        &format!("clusters/{cluster}/flux-system/kustomization.yaml"),
        &format!("{K}resources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\n"),
    );
}

fn errors(r: &fleetlint::Report) -> Vec<&fleetlint::lint::Finding> {
    r.findings
        .iter()
        .filter(|f| f.severity == fleetlint::rules::Severity::Error)
        .collect()
}

fn rules_of(r: &fleetlint::Report) -> Vec<&str> {
    let mut v: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.severity != fleetlint::rules::Severity::Info)
        .map(|f| f.rule.as_str())
        .collect();
    v.sort();
    v
}

#[test]
fn a_flux_bootstrap_cluster_with_its_gotk_components_lints_clean() {
    let f = fleet();
    bootstrap(&f, "my-cluster");
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(r.overlays.len(), 1);
    assert_eq!(r.overlays[0].dir, "clusters/my-cluster");
}

/// fluxcd/flux2-kustomize-helm-example's shape: bootstrap clusters, an ArtifactGenerator that
/// packs infrastructure/ and apps/ into ExternalArtifacts the Kustomizations read, a
/// `.sourceignore` that excludes everything but the manifest directories, CI workflows and a
/// validation script.
#[test]
fn flux2_kustomize_helm_example_recreation_lints_clean() {
    let f = fleet();
    for env in ["staging", "production"] {
        bootstrap(&f, env);
        f.write(
            &format!("clusters/{env}/artifacts.yaml"),
            &format!("apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  sources:\n    - alias: monorepo\n      kind: GitRepository\n      name: flux-system\n  artifacts:\n    - name: infrastructure\n      copy:\n        - from: \"@monorepo/infrastructure/**\"\n          to: \"@artifact/\"\n    - name: apps\n      copy:\n        - from: \"@monorepo/apps/{env}/**\"\n          to: \"@artifact/{env}/\"\n"),
        );
        f.write(
            &format!("clusters/{env}/infrastructure.yaml"),
            &format!(
                "{}{}",
                flux_ks(
                    "infra-controllers",
                    "ExternalArtifact/infrastructure",
                    "./controllers",
                    ""
                ),
                flux_ks(
                    "infra-configs",
                    "ExternalArtifact/infrastructure",
                    "./configs",
                    "  dependsOn:\n    - name: infra-controllers\n"
                )
            ),
        );
        f.write(
            &format!("clusters/{env}/apps.yaml"),
            &flux_ks(
                "apps",
                "ExternalArtifact/apps",
                &format!("./{env}"),
                "  dependsOn:\n    - name: infra-configs\n",
            ),
        );
        f.write(
            &format!("apps/{env}/kustomization.yaml"),
            &format!("{K}resources:\n  - ../base/podinfo\n"),
        );
    }
    f.write(
        "apps/base/podinfo/kustomization.yaml",
        &format!("{K}resources:\n  - release.yaml\n"),
    );
    f.write(
        "apps/base/podinfo/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  interval: 50m\n  chartRef:\n    kind: OCIRepository\n    name: podinfo\n",
    );
    f.write(
        "infrastructure/controllers/kustomization.yaml",
        &format!("{K}resources:\n  - cert-manager.yaml\n"),
    );
    f.write(
        "infrastructure/controllers/cert-manager.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cert-manager\n",
    );
    f.write(
        "infrastructure/configs/kustomization.yaml",
        &format!("{K}resources:\n  - issuer.yaml\n"),
    );
    f.write(
        "infrastructure/configs/issuer.yaml",
        "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata:\n  name: letsencrypt\nspec:\n  acme:\n    server: https://acme-v02.api.letsencrypt.org/directory\n",
    );
    f.write(
        ".sourceignore",
        "# Exclude all\n/*\n\n# Include manifest directories\n!/apps/\n!/clusters/\n!/infrastructure/\n",
    );
    f.write(
        ".github/workflows/test.yaml",
        "name: test\non:\n  pull_request:\njobs:\n  manifests:\n    runs-on: ubuntu-latest\n    steps:\n      - run: ./scripts/validate.sh ${{ github.sha }}\n",
    );
    // at the root, where /* of the .sourceignore excludes it (a render would choke on it)
    f.write(".fluxschema.yml", "- not a manifest\n");
    let r = f.lint();
    assert!(errors(&r).is_empty(), "{}", show(&r));
    assert!(r.findings.iter().all(|x| x.rule == "FL004"), "{}", show(&r));
    let made: Vec<_> = r
        .external_sources
        .iter()
        .filter(|(_, e)| e.id == "ExternalArtifact/flux-system/apps")
        .collect();
    assert_eq!(made.len(), 2, "{:?}", r.external_sources);
    assert!(
        made[0]
            .1
            .maker
            .as_deref()
            .unwrap()
            .starts_with("ArtifactGenerator flux-system/flux-system"),
        "{:?}",
        made[0]
    );
    assert_eq!(
        r.stats.excluded_files, 2,
        "the workflow and .fluxschema.yml"
    );
    // the artifact is packed from this repository's apps/ (whole directories, one prefix
    // stripped): its path is followed there and linted
    let apps = r.overlays[0]
        .kustomizations
        .iter()
        .find(|k| k.id == "flux-system/apps")
        .unwrap();
    assert!(apps.followed);
    f.write(
        "apps/base/podinfo/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: podinfo\nspec:\n  interval: ${INTERVAL}\n  chartRef:\n    kind: OCIRepository\n    name: podinfo\n",
    );
    let r = f.lint();
    let fl030: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL030").collect();
    assert_eq!(fl030.len(), 2, "one per cluster: {}", show(&r));
    assert_eq!(fl030[0].file, "apps/base/podinfo/release.yaml");
}

/// controlplaneio-fluxcd/d1-fleet's shape: no `flux bootstrap` files; a FluxInstance whose
/// spec.sync makes the GitRepository and Kustomization `flux-system`, which applies the
/// cluster directory; tenants substituted from a runtime ConfigMap, each with its own source.
#[test]
fn d1_fleet_recreation_with_a_flux_instance_source_lints_clean() {
    let f = fleet();
    f.write(
        "clusters/staging/flux-system/flux-instance.yaml",
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  distribution:\n    version: 2.7.x\n    registry: ghcr.io/fluxcd\n  sync:\n    kind: GitRepository\n    url: https://git.example.com/platform/d1-fleet.git\n    ref: refs/heads/main\n    path: clusters/staging\n    pullSecret: flux-system\n",
    );
    f.write(
        "clusters/staging/runtime-info.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flux-runtime-info\n  namespace: flux-system\ndata:\n  ENVIRONMENT: staging\n  GIT_BRANCH: main\n",
    );
    f.write(
        "clusters/staging/infra-tenant.yaml",
        &flux_ks(
            "flux-infra-tenant",
            "GitRepository/flux-system",
            "./tenants/infra",
            "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: flux-runtime-info\n",
        ),
    );
    f.write(
        "tenants/infra/kustomization.yaml",
        &format!("{K}namespace: flux-system\nresources:\n  - source.yaml\n  - sync.yaml\n"),
    );
    f.write(
        "tenants/infra/source.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-infra\nspec:\n  interval: 1m\n  ref:\n    branch: ${GIT_BRANCH}\n  url: https://git.example.com/platform/d1-infra.git\n",
    );
    f.write(
        "tenants/infra/sync.yaml",
        &flux_ks(
            "flux-infra",
            "GitRepository/flux-infra",
            "./components/${ENVIRONMENT}",
            "",
        ),
    );
    let r = f.lint();
    assert!(r.findings.iter().all(|x| x.rule == "FL004"), "{}", show(&r));
    assert_eq!(r.overlays.len(), 1, "{:?}", r.overlays);
    let o = &r.overlays[0];
    assert_eq!(o.dir, "clusters/staging");
    assert_eq!(o.root.as_deref(), Some("flux-system/flux-system"));
    let ext = &r.external_sources[0].1;
    assert_eq!(ext.id, "GitRepository/flux-system/flux-system");
    assert!(
        ext.maker
            .as_deref()
            .unwrap()
            .starts_with("FluxInstance flux-system/flux spec.sync"),
        "{ext:?}"
    );
    // the tenant's own repository: listed, its (substituted) path not checked here
    let tenant = o
        .kustomizations
        .iter()
        .find(|k| k.id == "flux-system/flux-infra")
        .unwrap();
    assert!(!tenant.followed);
    assert_eq!(tenant.path.as_deref(), Some("./components/staging"));
}

/// kustomize-controller substitutes the parent's variables into the child Kustomization
/// objects it applies: `spec.path: ./apps/${ENV}` is `./apps/staging`, followed and linted.
#[test]
fn a_parent_substituting_env_into_a_child_path_is_followed() {
    let f = fleet();
    f.write(
        "clusters/staging/flux-system/gotk-sync.yaml",
        &gotk_sync("staging"),
    );
    f.write(
        "clusters/staging/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/staging/vars.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\ndata:\n  ENV: staging\n",
    );
    f.write(
        "clusters/staging/apps.yaml",
        &flux_ks(
            "apps-root",
            "GitRepository/flux-system",
            "./clusters/common",
            "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-vars\n",
        ),
    );
    f.write(
        "clusters/common/kustomization.yaml",
        &format!("{K}resources:\n  - apps.yaml\n"),
    );
    f.write(
        "clusters/common/apps.yaml",
        &flux_ks("apps", "GitRepository/flux-system", "./apps/${ENV}", ""),
    );
    f.write(
        "apps/staging/kustomization.yaml",
        &format!("{K}resources:\n  - web.yaml\n"),
    );
    let web = |image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: {image}\n"
        )
    };
    f.write("apps/staging/web.yaml", &web("ghcr.io/example/web:1.2.3"));
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    let apps = r.overlays[0]
        .kustomizations
        .iter()
        .find(|k| k.id == "flux-system/apps")
        .unwrap();
    assert_eq!(apps.path.as_deref(), Some("./apps/staging"));
    assert!(apps.followed);
    // the child's directory is linted: an unpinned image there is found
    f.write("apps/staging/web.yaml", &web("ghcr.io/example/web:latest"));
    let r = f.lint();
    assert_eq!(rules_of(&r), ["FL070"], "{}", show(&r));
    assert_eq!(r.findings[0].file, "apps/staging/web.yaml");
}

/// A Flux Kustomization's own spec.components, spec.images, spec.patches, namePrefix and
/// commonMetadata are applied before the rules run: a clean fleet, then each seeded mistake
/// gives exactly its rule.
#[test]
fn components_images_and_patches_of_a_flux_kustomization_are_applied() {
    let f = fleet();
    f.write("clusters/dev/flux-system/gotk-sync.yaml", &gotk_sync("dev"));
    f.write(
        "clusters/dev/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    let ks = |tag: &str| {
        flux_ks(
            "web",
            "GitRepository/flux-system",
            "./apps/web",
            &format!(
                "  targetNamespace: web\n  namePrefix: dev-\n  components:\n    - ../../components/monitoring\n  images:\n    - name: ghcr.io/example/web\n      newTag: \"{tag}\"\n  patches:\n    - patch: |\n        - op: replace\n          path: /spec/replicas\n          value: 2\n      target:\n        kind: Deployment\n  commonMetadata:\n    labels:\n      team: web\n  postBuild:\n    substitute:\n      SCRAPE_INTERVAL: 30s\n"
            ),
        )
    };
    f.write("clusters/dev/web.yaml", &ks("1.4.0"));
    f.write(
        "apps/web/kustomization.yaml",
        &format!("{K}resources:\n  - deployment.yaml\n"),
    );
    f.write(
        "apps/web/deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: ghcr.io/example/web\n",
    );
    f.write(
        "components/monitoring/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n  - podmonitor.yaml\n",
    );
    let monitor = |interval: &str| {
        format!(
            "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata:\n  name: web\nspec:\n  podMetricsEndpoints:\n    - port: http\n      interval: {interval}\n  selector:\n    matchLabels: {{app: web}}\n"
        )
    };
    f.write(
        "components/monitoring/podmonitor.yaml",
        &monitor("${SCRAPE_INTERVAL}"),
    );
    let r = f.lint();
    // the untagged image gets its tag from spec.images: no FL070
    assert!(r.findings.is_empty(), "{}", show(&r));
    // seeded: an undefined variable in the component
    f.write(
        "components/monitoring/podmonitor.yaml",
        &monitor("${SCRAPE_TIMEOUT}"),
    );
    let r = f.lint();
    assert_eq!(rules_of(&r), ["FL031"], "{}", show(&r));
    assert!(
        r.findings[0].message.contains("PodMonitor web/dev-web"),
        "namePrefix and targetNamespace applied: {}",
        show(&r)
    );
    assert_eq!(r.findings[0].file, "components/monitoring/podmonitor.yaml");
    f.write(
        "components/monitoring/podmonitor.yaml",
        &monitor("${SCRAPE_INTERVAL}"),
    );
    // seeded: spec.images sets the tag latest
    f.write("clusters/dev/web.yaml", &ks("latest"));
    let r = f.lint();
    assert_eq!(rules_of(&r), ["FL070"], "{}", show(&r));
}

/// Two Kustomizations apply one HelmRelease, one of them without substitution: FL005 names
/// both and which one does not substitute.
#[test]
fn a_helm_release_applied_by_two_kustomizations_is_reported_once() {
    let f = fleet();
    f.write("clusters/dev/flux-system/gotk-sync.yaml", &gotk_sync("dev"));
    f.write(
        "clusters/dev/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/dev/apps.yaml",
        &format!(
            "{}{}",
            flux_ks(
                "apps",
                "GitRepository/flux-system",
                "./apps/dev",
                "  postBuild:\n    substitute:\n      CLUSTER: dev\n"
            ),
            flux_ks(
                "redis",
                "GitRepository/flux-system",
                "./apps/base/redis",
                ""
            )
        ),
    );
    f.write(
        "apps/dev/kustomization.yaml",
        &format!("{K}resources:\n  - ../base/redis\n"),
    );
    f.write(
        "apps/base/redis/kustomization.yaml",
        &format!("{K}resources:\n  - release.yaml\n"),
    );
    f.write(
        "apps/base/redis/release.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: redis\n  namespace: db\nspec:\n  interval: 1h\n  chartRef:\n    kind: OCIRepository\n    name: redis\n",
    );
    let r = f.lint();
    assert_eq!(rules_of(&r), ["FL005"], "{}", show(&r));
    let m = &r.findings[0].message;
    assert!(
        m.contains("HelmRelease db/redis")
            && m.contains("flux-system/apps")
            && m.contains("flux-system/redis applies it without substitution"),
        "{m}"
    );
    assert_eq!(r.findings[0].file, "apps/base/redis/release.yaml");
}

/// A `flux bootstrap` cluster `dev` whose Kustomization `apps` applies `./apps`, holding one
/// ConfigMap (apps/cm.yaml).
fn dev_apps_fleet() -> Fleet {
    let f = fleet();
    f.write("clusters/dev/flux-system/gotk-sync.yaml", &gotk_sync("dev"));
    f.write(
        "clusters/dev/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/dev/apps.yaml",
        &flux_ks("apps", "GitRepository/flux-system", "./apps", ""),
    );
    f.write(
        "apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  a: \"1\"\n",
    );
    f
}

/// What source-controller never ships is never read: a SOPS configuration inside a directory
/// without a kustomization file (kustomize-controller generates one from the manifests it
/// ships) and a `.sourceignore`d scripts directory.
#[test]
fn sourceignore_and_default_exclusions_keep_unshipped_files_out() {
    let f = dev_apps_fleet();
    f.write(
        "apps/.sops.yaml",
        "creation_rules:\n  - path_regex: .*.yaml\n    age: age1example\n",
    );
    f.write("apps/tools/lint.yaml", "rules:\n  - not a manifest\n");
    f.write(
        ".github/workflows/ci.yaml",
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${HOME}\n",
    );
    f.write(".sourceignore", "apps/tools/\n");
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(r.stats.excluded_files, 3, "sops, tools, workflow");
    // the check can fail: without the .sourceignore the tools file ships and breaks the render
    f.remove(".sourceignore");
    let r = f.lint();
    assert_eq!(rules_of(&r), ["FL001"], "{}", show(&r));
}

/// Trial4, on the real kustomize-controller: a `.sourceignore`d file that a kustomization
/// lists ("kustomize build failed: accumulating resources from 'cm.yaml': open ...: no such
/// file"). The working tree renders, the artifact does not: FL001 on the kustomization that
/// lists it. The same in a `--source` checkout.
#[test]
fn a_listed_file_the_artifact_leaves_out_fails_the_build() {
    let f = dev_apps_fleet();
    f.write(
        "apps/kustomization.yaml",
        &format!("{K}resources:\n  - cm.yaml\n"),
    );
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    f.write(".sourceignore", "/apps/cm.yaml\n");
    let r = f.lint();
    let fl001: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL001").collect();
    assert_eq!(fl001.len(), 1, "{}", show(&r));
    assert_eq!(fl001[0].file, "apps/kustomization.yaml");
    assert!(
        fl001[0].message.contains("lists apps/cm.yaml")
            && fl001[0].message.contains(".sourceignore"),
        "{}",
        fl001[0].message
    );

    // A --source checkout with the same trap.
    let g = fleet();
    g.write(
        "clusters/prod/flux-system/gotk-sync.yaml",
        &gotk_sync("prod"),
    );
    g.write(
        "clusters/prod/tenant.yaml",
        &flux_ks("tenant", "GitRepository/tenant-src", "./deploy", ""),
    );
    let co = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(co.path().join("deploy")).unwrap();
    std::fs::write(
        co.path().join("deploy/kustomization.yaml"),
        format!("{K}resources:\n  - cm.yaml\n"),
    )
    .unwrap();
    std::fs::write(
        co.path().join("deploy/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )
    .unwrap();
    std::fs::write(co.path().join(".sourceignore"), "/deploy/cm.yaml\n").unwrap();
    let path = co.path().to_path_buf();
    let r = g.lint_with(move |c| c.options.sources = vec![("tenant-src".into(), path)]);
    let fl001: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL001").collect();
    assert_eq!(fl001.len(), 1, "{}", show(&r));
    assert!(
        fl001[0].message.contains("lists deploy/cm.yaml"),
        "{}",
        fl001[0].message
    );
}

fn web_fleet(f: &Fleet, image: &str) {
    f.write("clusters/dev/flux-system/gotk-sync.yaml", &gotk_sync("dev"));
    f.write(
        "clusters/dev/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/dev/apps.yaml",
        &flux_ks("apps", "GitRepository/flux-system", "./apps", ""),
    );
    f.write(
        "apps/web.yaml",
        &format!("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: {image}\n"),
    );
}

/// `.fleetlint.yaml` turns a rule off or changes its severity, `ignorePaths` and an inline
/// `# fleetlint:ignore` suppress; every suppressed finding is counted and listed, never dropped
/// silently.
#[test]
fn configuration_and_inline_comments_suppress_and_count() {
    let f = fleet();
    web_fleet(&f, "ghcr.io/example/web:latest");
    let r = f.lint();
    assert_eq!(rules_of(&r), ["FL070"], "{}", show(&r));
    assert_eq!(r.stats.suppressed, 0);
    assert!(!r.has_errors(), "a warning by default: {}", show(&r));

    f.write(".fleetlint.yaml", "rules:\n  FL070: error\n");
    let r = f.lint();
    assert_eq!(rules_of(&r), ["FL070"]);
    assert!(r.has_errors(), "an error now: {}", show(&r));

    f.write(".fleetlint.yaml", "rules:\n  FL070: off\n");
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(r.stats.suppressed, 1);
    assert_eq!(r.suppressed[0].finding.rule, "FL070");
    assert!(
        r.suppressed[0].by.contains("FL070: off"),
        "{:?}",
        r.suppressed
    );

    f.write(".fleetlint.yaml", "ignorePaths:\n  - apps/\n");
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(r.stats.suppressed, 1);

    f.remove(".fleetlint.yaml");
    let text = std::fs::read_to_string(f.root().join("apps/web.yaml")).unwrap();
    f.write(
        "apps/web.yaml",
        &text.replace(
            "image: ghcr.io/example/web:latest",
            "image: ghcr.io/example/web:latest # fleetlint:ignore FL070 the dev cluster tracks latest on purpose",
        ),
    );
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
    assert_eq!(r.stats.suppressed, 1);
    assert!(
        r.suppressed[0].by.contains("tracks latest on purpose"),
        "{:?}",
        r.suppressed
    );

    f.write(".fleetlint.yaml", "rules:\n  FL999: off\n");
    let e = fleetlint::run(&fleetlint::Config {
        path: f.root().to_path_buf(),
        repo_root: Some(f.root().to_path_buf()),
        cache_dir: None,
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        matches!(&e, fleetlint::RunError::Usage(m) if m.contains(".fleetlint.yaml") && m.contains("FL999")),
        "{e:?}"
    );
}

/// A dependsOn cycle is reported on every file holding one of its edges.
#[test]
fn a_dependency_cycle_is_reported_on_every_edge() {
    let f = fleet();
    web_fleet(&f, "ghcr.io/example/web:1.0.0");
    f.write(
        "clusters/dev/a.yaml",
        &flux_ks(
            "a",
            "GitRepository/flux-system",
            "./apps",
            "  dependsOn:\n    - name: b\n",
        ),
    );
    f.write(
        "clusters/dev/b.yaml",
        &flux_ks(
            "b",
            "GitRepository/flux-system",
            "./apps",
            "  dependsOn:\n    - name: a\n",
        ),
    );
    let r = f.lint();
    let cyc: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL011").collect();
    let files: Vec<&str> = cyc.iter().map(|x| x.file.as_str()).collect();
    assert_eq!(
        files,
        ["clusters/dev/a.yaml", "clusters/dev/b.yaml"],
        "{}",
        show(&r)
    );
    assert!(cyc.iter().all(|x| x.line > 0));
}

/// A parent without postBuild ships `${CLUSTER}` inside a child Kustomization's spec.patches on
/// purpose: the child (which has postBuild) writes the patch into its own render and
/// substitutes it there. Not FL030.
#[test]
fn a_variable_in_a_childs_patches_is_substituted_by_the_child() {
    let f = fleet();
    web_fleet(&f, "ghcr.io/example/web:1.0.0");
    f.write(
        "clusters/dev/vars.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-info\n  namespace: flux-system\ndata:\n  CLUSTER: dev\n",
    );
    f.write(
        "clusters/dev/apps.yaml",
        &flux_ks(
            "apps",
            "GitRepository/flux-system",
            "./apps",
            "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-info\n  patches:\n    - patch: |-\n        apiVersion: apps/v1\n        kind: Deployment\n        metadata:\n          name: web\n          labels:\n            cluster: ${CLUSTER}\n      target:\n        kind: Deployment\n",
        ),
    );
    let r = f.lint();
    assert!(r.findings.is_empty(), "{}", show(&r));
}

/// `--source NAME=PATH` (issue 27): a Kustomization reading a source made outside the tree
/// (here a tenant's GitRepository applied by hand) has its `spec.path` checked in the local
/// checkout the user maps to it; without the mapping the path is listed, not checked (only
/// FL004). (A first version of this fixture wrote `./deploy/${ENV}` with the tenant's own
/// substituteFrom: fleetlint's FL030 was right, a Kustomization's own postBuild does not
/// substitute its own spec.) A path missing from the checkout is FL002 naming
/// the checkout and the source.
#[test]
fn a_mapped_source_checkout_has_its_paths_checked() {
    let f = fleet();
    f.write(
        "clusters/prod/flux-system/gotk-sync.yaml",
        &gotk_sync("prod"),
    );
    f.write(
        "clusters/prod/tenant.yaml",
        &flux_ks("tenant", "GitRepository/tenant-src", "./deploy/prod", ""),
    );
    let r = f.lint();
    assert!(r.findings.iter().all(|x| x.rule == "FL004"), "{}", show(&r));
    let checkout = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(checkout.path().join("deploy/prod")).unwrap();
    let mapped = |co: &std::path::Path| {
        let co = co.to_path_buf();
        f.lint_with(move |c| c.options.sources = vec![("tenant-src".into(), co)])
    };
    let r = mapped(checkout.path());
    assert!(
        !r.findings.iter().any(|x| x.rule == "FL002"),
        "{}",
        show(&r)
    );
    std::fs::remove_dir(checkout.path().join("deploy/prod")).unwrap();
    let r = mapped(checkout.path());
    let fl002: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL002").collect();
    assert_eq!(fl002.len(), 1, "{}", show(&r));
    assert!(
        fl002[0].message.contains("\"./deploy/prod\"")
            && fl002[0]
                .message
                .contains("GitRepository/flux-system/tenant-src")
            && fl002[0]
                .message
                .contains(&checkout.path().display().to_string()),
        "{}",
        fl002[0].message
    );
    assert_eq!(fl002[0].file, "clusters/prod/tenant.yaml");
}

/// `--source NAME=PATH` renders the mapped checkout (issue 27: it checked paths only): the
/// tenant's `deploy/prod` is built as kustomize-controller builds it from that source's
/// artifact. A kustomization.yaml naming a file the checkout lacks is FL001 on the reading
/// Kustomization, naming the checkout; the same checkout fixed gives no finding but FL004.
#[test]
fn a_mapped_source_checkout_is_rendered() {
    let f = fleet();
    f.write(
        "clusters/prod/flux-system/gotk-sync.yaml",
        &gotk_sync("prod"),
    );
    f.write(
        "clusters/prod/tenant.yaml",
        &flux_ks("tenant", "GitRepository/tenant-src", "./deploy/prod", ""),
    );
    let checkout = tempfile::tempdir().unwrap();
    let prod = checkout.path().join("deploy/prod");
    std::fs::create_dir_all(&prod).unwrap();
    std::fs::write(
        prod.join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [app.yaml]\n",
    )
    .unwrap();
    let co = checkout.path().to_path_buf();
    let lint = || {
        let co = co.clone();
        f.lint_with(move |c| c.options.sources = vec![("tenant-src".into(), co)])
    };
    let r = lint();
    let fl001: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL001").collect();
    assert_eq!(fl001.len(), 1, "{}", show(&r));
    assert_eq!(fl001[0].file, "clusters/prod/tenant.yaml");
    assert!(
        fl001[0].message.contains("in the --source checkout")
            && fl001[0]
                .message
                .contains("GitRepository/flux-system/tenant-src")
            && fl001[0].message.contains("app.yaml"),
        "{}",
        fl001[0].message
    );
    assert!(
        fl001[0].fix.contains(&prod.display().to_string()),
        "{}",
        fl001[0].fix
    );
    std::fs::write(
        prod.join("app.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: b}\n",
    )
    .unwrap();
    let r = lint();
    assert!(r.findings.iter().all(|x| x.rule == "FL004"), "{}", show(&r));

    // Trial4: a directory without kustomization.yaml (the controller generates one) whose
    // file does not parse: FL001 with the checkout's own relative path, never a wrapper's
    // ('../..deploy'); the render counts in the summary's runs.
    std::fs::remove_file(prod.join("kustomization.yaml")).unwrap();
    std::fs::write(
        prod.join("app.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n",
    )
    .unwrap();
    let r = lint();
    let fl001: Vec<_> = r.findings.iter().filter(|x| x.rule == "FL001").collect();
    assert_eq!(fl001.len(), 1, "{}", show(&r));
    assert!(!fl001[0].message.contains("../"), "{}", fl001[0].message);
    assert!(r.stats.renders_run >= 1, "{:?}", r.stats.renders_run);

    // A --source that names no source read from outside the tree (a typo, a wrong kind, a
    // source the tree defines) is a usage error, never silently ignored with "0 errors".
    for wrong in ["tenant-srx", "ocirepository/flux-system/tenant-src"] {
        let cfg = fleetlint::Config {
            path: f.root().to_path_buf(),
            repo_root: Some(f.root().to_path_buf()),
            cache_dir: None,
            options: fleetlint::lint::Options {
                sources: vec![(wrong.into(), co.clone())],
                ..Default::default()
            },
            ..Default::default()
        };
        let Err(fleetlint::RunError::Usage(m)) = fleetlint::run(&cfg) else {
            panic!("{wrong}: not a usage error");
        };
        assert!(
            m.contains(&format!("--source {wrong}="))
                && m.contains("GitRepository/flux-system/tenant-src"),
            "{m}"
        );
    }
    // The kind in kubectl's lower case matches.
    let r = f.lint_with(|c| {
        c.options.sources = vec![("gitrepository/flux-system/tenant-src".into(), co.clone())]
    });
    assert!(r.findings.iter().any(|x| x.rule == "FL001"), "{}", show(&r));
}

/// A bootstrap root whose cluster kustomization does not list `flux-system/` (issue 39, found
/// on a public fleet; recreated, not copied): `flux bootstrap` applies gotk-sync.yaml itself,
/// and its Kustomization builds the cluster directory as written, so the directory's render
/// never holds its root. Before: "nothing to lint" (exit 2).
#[test]
fn a_bootstrap_root_its_cluster_kustomization_does_not_list_is_an_overlay() {
    let f = fleet();
    f.write("clusters/lab/flux-system/gotk-sync.yaml", &gotk_sync("lab"));
    f.write(
        "clusters/lab/flux-system/kustomization.yaml",
        &format!("{K}resources:\n  - gotk-sync.yaml\n"),
    );
    f.write(
        "clusters/lab/kustomization.yaml",
        &format!("{K}resources:\n  - apps.yaml\n  - broken.yaml\n"),
    );
    f.write(
        "clusters/lab/apps.yaml",
        &flux_ks("apps", "GitRepository/flux-system", "./apps", ""),
    );
    f.write(
        "clusters/lab/broken.yaml",
        &flux_ks("broken", "GitRepository/flux-system", "./broken", ""),
    );
    f.write(
        "apps/kustomization.yaml",
        &format!("{K}resources:\n  - cm.yaml\n"),
    );
    f.write(
        "apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\ndata:\n  a: \"1\"\n",
    );
    // the seeded mistake: a listed file that does not exist
    f.write(
        "broken/kustomization.yaml",
        &format!("{K}resources:\n  - gone.yaml\n"),
    );
    let r = f.lint();
    assert_eq!(r.overlays.len(), 1, "{}", show(&r));
    let o = &r.overlays[0];
    assert_eq!(o.dir, "clusters/lab");
    assert_eq!(o.root.as_deref(), Some("flux-system/flux-system"));
    let verdict = |id: &str| {
        let k = o.kustomizations.iter().find(|k| k.id == id).unwrap();
        (k.followed, k.build.verdict)
    };
    use fleetlint::verdict::Build;
    assert_eq!(
        verdict("flux-system/apps"),
        (true, Build::Pass),
        "{}",
        show(&r)
    );
    assert_eq!(
        verdict("flux-system/broken"),
        (true, Build::Fail),
        "{}",
        show(&r)
    );
    assert_eq!(
        errors(&r)
            .iter()
            .map(|e| e.rule.as_str())
            .collect::<Vec<_>>(),
        ["FL001"],
        "{}",
        show(&r)
    );
}

/// A root GitRepository defined in the fleet and a FluxInstance (applied by hand, listed by no
/// kustomization) whose sync source has the same URL spelled with `.git` (issue 39, found on a
/// public fleet; recreated, not copied): a Kustomization reading the FluxInstance's source reads
/// this repository and is followed. Before: `notBuilt` ("not this repository"), and everything
/// under it went unread.
#[test]
fn a_kustomization_reading_a_flux_instance_source_of_the_same_repository_is_followed() {
    let f = fleet();
    f.write(
        "bootstrap/flux-instance.yaml",
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  distribution:\n    version: 2.x\n    registry: ghcr.io/fluxcd\n  sync:\n    kind: GitRepository\n    url: https://git.example.com/Home/Fleet.git\n    ref: refs/heads/main\n    path: clusters/home\n",
    );
    f.write(
        "clusters/home/root.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: home-fleet\n  namespace: flux-system\nspec:\n  interval: 10m\n  url: https://git.example.com/home/fleet/\n  ref:\n    branch: main\n{}",
            flux_ks("cluster", "GitRepository/home-fleet", "./clusters/home", "")
        ),
    );
    f.write(
        "clusters/home/apps.yaml",
        &flux_ks("cluster-apps", "GitRepository/flux-system", "./apps", ""),
    );
    f.write(
        "apps/kustomization.yaml",
        &format!("{K}resources:\n  - cm.yaml\n  - gone.yaml\n"),
    );
    f.write(
        "apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\ndata:\n  a: \"1\"\n",
    );
    let r = f.lint();
    assert_eq!(r.overlays.len(), 1, "{}", show(&r));
    let o = &r.overlays[0];
    assert_eq!(o.dir, "clusters/home");
    assert_eq!(o.root.as_deref(), Some("flux-system/cluster"));
    let k = o
        .kustomizations
        .iter()
        .find(|k| k.id == "flux-system/cluster-apps")
        .unwrap();
    assert!(k.followed, "{}", show(&r));
    // followed and built: the seeded missing file fails it
    assert_eq!(
        k.build.verdict,
        fleetlint::verdict::Build::Fail,
        "{}",
        show(&r)
    );
}

/// A Kustomization whose `postBuild.substituteFrom` Secret the fleet keeps SOPS-encrypted
/// (issue 39: SOPS inputs are unknown on both sides; found on a public fleet where 30 such
/// Kustomizations said `pass` while the harness could not know): its build is `unknown`,
/// since the cluster substitutes the decrypted values.
#[test]
fn a_sops_encrypted_substitution_input_leaves_the_build_unknown() {
    let f = fleet();
    bootstrap(&f, "home");
    f.write(
        "clusters/home/vars.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cluster-secrets\n  namespace: flux-system\nstringData:\n  DOMAIN: ENC[AES256_GCM,data:abc=,iv:def=,tag:ghi=,type:str]\nsops:\n  mac: ENC[AES256_GCM,data:jkl=,iv:mno=,tag:pqr=,type:str]\n  lastmodified: \"2026-01-01T00:00:00Z\"\n  version: 3.9.0\n",
    );
    f.write(
        "clusters/home/apps.yaml",
        &flux_ks(
            "apps",
            "GitRepository/flux-system",
            "./apps",
            "  postBuild:\n    substituteFrom:\n      - kind: Secret\n        name: cluster-secrets\n",
        ),
    );
    f.write(
        "apps/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\ndata:\n  host: web.${DOMAIN}\n",
    );
    let r = f.lint();
    let o = &r.overlays[0];
    let k = o
        .kustomizations
        .iter()
        .find(|k| k.id == "flux-system/apps")
        .unwrap();
    assert_eq!(
        k.build.verdict,
        fleetlint::verdict::Build::Unknown,
        "{}",
        show(&r)
    );
    assert!(
        k.build
            .reason
            .as_deref()
            .unwrap()
            .contains("cluster-secrets"),
        "{:?}",
        k.build
    );
}

/// A FluxInstance whose sync path holds only flux-operator ResourceSets (their Flux
/// Kustomizations are in `spec.resources`, no Kustomization document of the directory's own;
/// issue 39, found on a public fleet, recreated): the sync path is an overlay with the
/// instance's root Kustomization. Before: "nothing to lint" (exit 2).
#[test]
fn a_flux_instance_sync_path_of_resource_sets_only_is_an_overlay() {
    let f = fleet();
    f.write(
        "platform/clusters/dev/instance.yaml",
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: flux-system\nspec:\n  distribution:\n    version: 2.x\n    registry: ghcr.io/fluxcd\n  sync:\n    kind: GitRepository\n    url: https://git.example.com/platform.git\n    ref: refs/heads/main\n    path: platform/clusters/dev\n",
    );
    f.write(
        "platform/clusters/dev/infra.yaml",
        "apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata:\n  name: infra\n  namespace: flux-system\nspec:\n  resources:\n    - apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: infra\n        namespace: flux-system\n      spec:\n        interval: 1h\n        path: platform/infra\n        prune: true\n        sourceRef:\n          kind: GitRepository\n          name: flux-system\n",
    );
    f.write(
        "platform/infra/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: infra\n  namespace: default\ndata:\n  a: \"1\"\n",
    );
    let r = f.lint();
    assert_eq!(r.overlays.len(), 1, "{}", show(&r));
    let o = &r.overlays[0];
    assert_eq!(o.dir, "platform/clusters/dev");
    assert_eq!(o.root.as_deref(), Some("flux-system/flux-system"));
    assert!(errors(&r).is_empty(), "{}", show(&r));
}

/// A cluster directory that bootstrap's flux-system Kustomization builds, and that a tenant's
/// Kustomization of another repository (patched per cluster onto the same `spec.path`) also
/// names (issue 39, found on a public fleet, recreated): the root is bootstrap's, so the
/// tenant is not followed and flux-system is. Before: the tenant was the root, built from
/// this repository, and flux-system was "not this repository".
#[test]
fn bootstraps_root_wins_over_a_tenant_kustomization_of_the_same_path() {
    let f = fleet();
    bootstrap(&f, "prod");
    f.write(
        "clusters/prod/kustomization.yaml",
        &format!("{K}resources:\n  - tenant.yaml\n  - flux-system\n"),
    );
    f.write(
        "clusters/prod/tenant.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: a-team\n  namespace: a-team\nspec:\n  interval: 1m\n  ref:\n    branch: main\n  url: https://git.example.com/a-team/releases\n{}",
            flux_ks("a-team", "GitRepository/a-team", "./clusters/prod", "")
                .replace("namespace: flux-system\nspec", "namespace: a-team\nspec")
        ),
    );
    let r = f.lint();
    assert_eq!(r.overlays.len(), 1, "{}", show(&r));
    let o = &r.overlays[0];
    assert_eq!(
        o.root.as_deref(),
        Some("flux-system/flux-system"),
        "{}",
        show(&r)
    );
    let followed = |id: &str| {
        o.kustomizations
            .iter()
            .find(|k| k.id == id)
            .unwrap()
            .followed
    };
    assert!(followed("flux-system/flux-system"));
    assert!(!followed("a-team/a-team"));
}
