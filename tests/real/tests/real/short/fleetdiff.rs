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
    let report = fleetdiff::run(&c, &fleets, &opts, &|l| eprintln!("fleetdiff: {l}")).unwrap();
    let text = fleetdiff::table(&report, true);
    eprintln!("{text}");
    let f = &report.fleets[0];
    assert_eq!(f.error, None, "{text}");
    for (name, outcome, agreement) in CLASSES {
        let row = f
            .rows
            .iter()
            .find(|r| r.kustomization == format!("flux-system/{name}"))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"));
        assert_eq!(
            (row.real.outcome, row.agreement),
            (*outcome, *agreement),
            "{name}:\n{text}"
        );
    }
    assert_eq!(f.summary.disagree, 0, "{text}");
}
