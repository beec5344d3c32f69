//! fleetlint's build verdicts against the real kustomize-controller (tests/fleetdiff), on a
//! fixture fleet of our own holding one Kustomization per class: each false result found on
//! public fleets (issue 39) and each true mistake fleetlint must keep finding. One cluster,
//! every Kustomization at once.
//!
//! The test asserts what the real controller did, not a list: every compared Kustomization
//! agrees with fleetlint, the true mistakes are build failures on the real controller (so the
//! fixture still exercises them), the false classes are builds that pass there, and the
//! unknowns (a remote resource, an input made at run time) are unknown on both sides.

use fleetdiff::{Agreement, FleetInput, Options, Outcome};
use realcluster::{ClusterCell, Lease};
use std::time::Duration;

fn cluster() -> Lease {
    static C: ClusterCell = ClusterCell::new();
    crate::group_cluster(&C)
}

/// A Flux Kustomization reading the fleet's root source.
fn ks(name: &str, path: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 10m\n  prune: true\n  path: {path}\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n{extra}"
    )
}

fn cm(name: &str, data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{data}")
}

/// The fixture fleet: (path, text). Kustomization names say their class.
pub fn fixture() -> Vec<(String, String)> {
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";
    let mut sync = String::from(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m\n  url: https://git.example.dev/fleet.git\n  ref:\n    branch: main\n",
    );
    sync.push_str(&ks("flux-system", "./clusters/test", ""));
    let kss = [
        // false class (issue 39): spec.components add an object the directory's own patches
        // target; the controller writes the components into the directory's kustomization
        ks(
            "components-patched",
            "./apps/web",
            "  components:\n    - ../../components/extra\n",
        ),
        // false class: a field kustomize does not know, dropped by the controller's
        // GenerateManifest round trip (kubectl kustomize refuses it)
        ks("unknown-field", "./apps/odd", ""),
        // false class: an empty kustomization.yaml (the controller adds buildMetadata)
        ks("empty-kustomization", "./apps/empty", ""),
        // a Grafana placeholder under postBuild with no variables: nothing substituted
        ks(
            "grafana-placeholder",
            "./apps/grafana",
            "  postBuild:\n    substitute: {}\n",
        ),
        // the fleet's own input
        ks(
            "from-fleet-input",
            "./apps/vars",
            "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-vars\n",
        ),
        ks("plain", "./apps/plain", ""),
        // true mistakes
        ks("missing-file", "./apps/missing", ""),
        ks("component-as-resource", "./apps/comp-res", ""),
        ks(
            "strict-unset",
            "./apps/strict",
            "  postBuild:\n    substitute:\n      DEFINED: x\n",
        ),
        ks("path-missing", "./apps/nowhere", ""),
        // unknown on both sides
        ks(
            "runtime-input",
            "./apps/vars",
            "  postBuild:\n    substituteFrom:\n      - kind: Secret\n        name: made-at-run-time\n",
        ),
        ks("remote-resource", "./apps/remote", ""),
    ];
    let files: Vec<(&str, String)> = vec![
        ("clusters/test/flux-system/gotk-sync.yaml", sync),
        ("clusters/test/apps.yaml", kss.concat()),
        (
            "clusters/test/vars.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-vars\n  namespace: flux-system\ndata:\n  GREETING: hello\n".to_string(),
        ),
        (
            "apps/web/kustomization.yaml",
            format!("{k}resources:\n  - cm.yaml\npatches:\n  - path: extra-patch.yaml\n"),
        ),
        ("apps/web/cm.yaml", cm("web", "  a: \"1\"\n")),
        (
            "apps/web/extra-patch.yaml",
            cm("extra", "  patched: \"yes\"\n"),
        ),
        (
            "components/extra/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources:\n  - cm.yaml\n"
                .to_string(),
        ),
        ("components/extra/cm.yaml", cm("extra", "  b: \"2\"\n")),
        (
            "apps/odd/kustomization.yaml",
            format!("{k}resources:\n  - cm.yaml\nlabelz:\n  team: a\n"),
        ),
        ("apps/odd/cm.yaml", cm("odd", "  a: \"1\"\n")),
        ("apps/empty/kustomization.yaml", String::new()),
        (
            "apps/grafana/dashboard.yaml",
            cm(
                "dashboard",
                "  dashboard.json: '{\"datasource\": \"${DS_PROMETHEUS}\"}'\n",
            ),
        ),
        ("apps/vars/cm.yaml", cm("vars", "  greeting: ${GREETING}\n")),
        ("apps/plain/cm.yaml", cm("plain", "  a: \"1\"\n")),
        (
            "apps/missing/kustomization.yaml",
            format!("{k}resources:\n  - cm.yaml\n  - gone.yaml\n"),
        ),
        ("apps/missing/cm.yaml", cm("missing", "  a: \"1\"\n")),
        (
            "apps/comp-res/kustomization.yaml",
            format!("{k}resources:\n  - ../../components/extra\n"),
        ),
        ("apps/strict/cm.yaml", cm("strict", "  a: ${UNSET_VAR}\n  b: ${DEFINED}\n")),
        (
            "apps/remote/kustomization.yaml",
            format!("{k}resources:\n  - https://github.com/example-org/example-repo//deploy?ref=v1.0.0\n"),
        ),
    ];
    files.into_iter().map(|(p, t)| (p.to_string(), t)).collect()
}

/// Expected by class: (Kustomization, what the real controller does, the agreement).
const CLASSES: &[(&str, Outcome, Agreement)] = &[
    ("components-patched", Outcome::Built, Agreement::Agree),
    ("unknown-field", Outcome::Built, Agreement::Agree),
    ("empty-kustomization", Outcome::Built, Agreement::Agree),
    ("grafana-placeholder", Outcome::Built, Agreement::Agree),
    ("from-fleet-input", Outcome::Built, Agreement::Agree),
    ("plain", Outcome::Built, Agreement::Agree),
    ("missing-file", Outcome::Failed, Agreement::Agree),
    ("component-as-resource", Outcome::Failed, Agreement::Agree),
    ("strict-unset", Outcome::Failed, Agreement::Agree),
    ("path-missing", Outcome::Failed, Agreement::Agree),
    ("runtime-input", Outcome::Unknown, Agreement::Unknown),
    ("remote-resource", Outcome::Unknown, Agreement::Unknown),
];

#[test]
fn fleetlint_agrees_with_the_real_kustomize_controller_on_every_fixture_class() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    for (p, t) in fixture() {
        let f = dir.path().join(&p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    }
    let opts = Options {
        prefix: "fdt-".into(),
        timeout: Duration::from_secs(240),
        cache_dir: None,
        ..Options::default()
    };
    let fleets = [FleetInput {
        name: "fixture".into(),
        path: dir.path().to_path_buf(),
    }];
    let expected: Vec<(String, Outcome, Agreement)> = CLASSES
        .iter()
        .map(|(n, o, a)| (format!("flux-system/{n}"), *o, *a))
        .collect();
    run_and_check(&c, &fleets, &opts, &expected);
}

/// fleet-diff of `fleets` on the real controller: the first fleet has no error, each expected
/// row (`namespace/name`, the real outcome, the agreement) is there, and nothing disagrees.
/// Returns the report and its table.
fn run_and_check(
    c: &realcluster::Cluster,
    fleets: &[FleetInput],
    opts: &Options,
    expected: &[(String, Outcome, Agreement)],
) -> (fleetdiff::DiffReport, String) {
    let report = fleetdiff::run(c, fleets, opts, &|l| eprintln!("fleetdiff: {l}")).unwrap();
    let text = fleetdiff::table(&report, true);
    eprintln!("{text}");
    let f = &report.fleets[0];
    assert_eq!(f.error, None, "{text}");
    for (name, outcome, agreement) in expected {
        let row = f
            .rows
            .iter()
            .find(|r| r.kustomization == *name)
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"));
        assert_eq!(
            (row.real.outcome, row.agreement),
            (*outcome, *agreement),
            "{name}:\n{text}"
        );
    }
    assert_eq!(f.summary.disagree, 0, "{text}");
    (report, text)
}

/// A Flux Kustomization `ns/name` on `path` reading GitRepository `src` of `ns`.
fn ks_in(ns: &str, name: &str, path: &str, src: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  interval: 10m\n  prune: true\n  path: {path}\n  sourceRef:\n    kind: GitRepository\n    name: {src}\n{extra}"
    )
}

fn git_repository(ns: &str, name: &str, url: &str) -> String {
    format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  interval: 10m\n  url: {url}\n  ref:\n    branch: main\n"
    )
}

fn flux_instance(ns: &str, url: &str, path: &str) -> String {
    format!(
        "apiVersion: fluxcd.controlplane.io/v1\nkind: FluxInstance\nmetadata:\n  name: flux\n  namespace: {ns}\nspec:\n  distribution:\n    version: 2.x\n    registry: ghcr.io/fluxcd\n  sync:\n    kind: GitRepository\n    url: {url}\n    ref: refs/heads/main\n    path: {path}\n"
    )
}

/// The second fixture fleet: one overlay per discovery shape that made public fleets "nothing
/// to lint" or left their Kustomizations unread (issue 39, this round's fleet-diff trial on 14
/// public fleets), and a SOPS-encrypted substitution input.
pub fn discovery_fixture() -> Vec<(String, String)> {
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";
    let fs = "flux-system";
    let files: Vec<(&str, String)> = vec![
        (
            "clusters/test/flux-system/gotk-sync.yaml",
            git_repository(fs, fs, "https://git.example.dev/fleet.git")
                + &ks_in(fs, fs, "./clusters/test", fs, ""),
        ),
        (
            "clusters/test/apps.yaml",
            ks_in(fs, "plain", "./apps/plain", fs, "")
                // a substituteFrom Secret kept SOPS-encrypted: unknown on both sides
                + &ks_in(
                    fs,
                    "sops-input",
                    "./apps/vars",
                    fs,
                    "  postBuild:\n    substituteFrom:\n      - kind: Secret\n        name: sops-vars\n",
                ),
        ),
        (
            "clusters/test/sops-vars.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sops-vars\n  namespace: flux-system\nstringData:\n  GREETING: ENC[AES256_GCM,data:aGk=,iv:aXY=,tag:dGFn,type:str]\nsops:\n  mac: ENC[AES256_GCM,data:bWFj,iv:aXY=,tag:dGFn,type:str]\n  lastmodified: \"2026-01-01T00:00:00Z\"\n  version: 3.9.0\n".to_owned(),
        ),
        ("apps/plain/cm.yaml", cm("plain", "  a: \"1\"\n")),
        ("apps/vars/cm.yaml", cm("vars", "  greeting: ${GREETING}\n")),
        // the root in DIR/flux-system/gotk-sync.yaml, which DIR's kustomization does not list
        (
            "clusters/lab/flux-system/gotk-sync.yaml",
            ks_in(fs, "unlisted-root", "./clusters/lab", fs, ""),
        ),
        (
            "clusters/lab/flux-system/kustomization.yaml",
            format!("{k}resources:\n  - gotk-sync.yaml\n"),
        ),
        (
            "clusters/lab/kustomization.yaml",
            format!("{k}resources:\n  - apps.yaml\n"),
        ),
        (
            "clusters/lab/apps.yaml",
            ks_in(fs, "unlisted-root-child", "./apps/plain", fs, ""),
        ),
        // a FluxInstance (listed by nothing) whose sync URL is the root source's, spelled
        // otherwise (.git, case, trailing slash): its flux-system source is this repository
        (
            "bootstrap/flux-instance.yaml",
            flux_instance(fs, "https://git.example.dev/Home.git", "clusters/home"),
        ),
        (
            "clusters/home/root.yaml",
            git_repository(fs, "home-fleet", "https://git.example.dev/home/")
                + &ks_in(fs, "home-root", "./clusters/home", "home-fleet", ""),
        ),
        (
            "clusters/home/apps.yaml",
            ks_in(fs, "instance-source", "./apps/plain", fs, ""),
        ),
        // a tenant's Kustomization (another repository) on the cluster directory's path,
        // listed before flux-system/: bootstrap's is the root
        (
            "clusters/prod/flux-system/gotk-sync.yaml",
            ks_in(fs, "prod-root", "./clusters/prod", fs, ""),
        ),
        (
            "clusters/prod/flux-system/kustomization.yaml",
            format!("{k}resources:\n  - gotk-sync.yaml\n"),
        ),
        (
            "clusters/prod/kustomization.yaml",
            format!("{k}resources:\n  - tenant.yaml\n  - flux-system\n  - apps.yaml\n"),
        ),
        (
            "clusters/prod/tenant.yaml",
            git_repository("a-tenant", "a-tenant", "https://git.example.dev/a-tenant/releases")
                + &ks_in("a-tenant", "a-tenant", "./clusters/prod", "a-tenant", ""),
        ),
        (
            "clusters/prod/apps.yaml",
            ks_in(fs, "prod-child", "./apps/plain", fs, ""),
        ),
        // a FluxInstance whose sync path holds only a ResourceSet
        (
            "bootstrap/platform-instance.yaml",
            flux_instance("platform", "https://git.example.dev/fleet.git", "clusters/rs"),
        ),
        (
            "clusters/rs/infra.yaml",
            "apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata:\n  name: infra\n  namespace: platform\nspec:\n  resources:\n    - apiVersion: kustomize.toolkit.fluxcd.io/v1\n      kind: Kustomization\n      metadata:\n        name: infra\n        namespace: platform\n      spec:\n        interval: 1h\n        path: apps/plain\n        prune: true\n        sourceRef:\n          kind: GitRepository\n          name: platform\n".to_owned(),
        ),
    ];
    files.into_iter().map(|(p, t)| (p.to_string(), t)).collect()
}

/// Expected on [`discovery_fixture`]: (Kustomization, what the real controller does, the
/// agreement). Before this round fleetlint found none of lab, home, prod's root or rs, and
/// said `pass` for the SOPS input.
const DISCOVERY: &[(&str, Outcome, Agreement)] = &[
    ("flux-system/plain", Outcome::Built, Agreement::Agree),
    (
        "flux-system/unlisted-root",
        Outcome::Built,
        Agreement::Agree,
    ),
    (
        "flux-system/unlisted-root-child",
        Outcome::Built,
        Agreement::Agree,
    ),
    (
        "flux-system/instance-source",
        Outcome::Built,
        Agreement::Agree,
    ),
    ("flux-system/prod-root", Outcome::Built, Agreement::Agree),
    ("flux-system/prod-child", Outcome::Built, Agreement::Agree),
    ("platform/platform", Outcome::Built, Agreement::Agree),
    (
        "flux-system/sops-input",
        Outcome::Unknown,
        Agreement::Unknown,
    ),
];

/// The discovery shapes of this round's public-fleet trial, on the real controller: every
/// Kustomization of each shape is found, built, and agrees; the SOPS input is unknown on both
/// sides; and a fleet with nothing to lint is its own error in the report, not a cluster error
/// (fleet-diff exited 3 on three public fleets).
#[test]
fn discovery_shapes_of_public_fleets_are_found_and_agree_with_the_real_controller() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    for (p, t) in discovery_fixture() {
        let f = dir.path().join(&p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    }
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(
        empty.path().join("cm.yaml"),
        cm("not-a-fleet", "  a: \"1\"\n"),
    )
    .unwrap();
    let opts = Options {
        prefix: "fdd-".into(),
        timeout: Duration::from_secs(240),
        cache_dir: None,
        ..Options::default()
    };
    let fleets = [
        FleetInput {
            name: "discovery".into(),
            path: dir.path().to_path_buf(),
        },
        FleetInput {
            name: "nothing".into(),
            path: empty.path().to_path_buf(),
        },
    ];
    let expected: Vec<(String, Outcome, Agreement)> = DISCOVERY
        .iter()
        .map(|(n, o, a)| ((*n).to_owned(), *o, *a))
        .collect();
    let (report, text) = run_and_check(&c, &fleets, &opts, &expected);
    assert!(
        report.fleets[1]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("nothing to lint")),
        "{text}"
    );
}
