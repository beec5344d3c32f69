//! One fixture per rule, positive and negative, through the real binary.

mod common;
use common::*;

const M: &str = r#"{"$imagepolicy": "flux-system:app"}"#;

fn img(comment: &str) -> String {
    deployment(&format!(
        "          image: ghcr.io/org/app:1.0.0 # {comment}"
    ))
}

fn kust(tag_comment: &str) -> String {
    format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\nimages:\n  - name: app\n    newName: ghcr.io/org/app\n    newTag: 1.0.0 # {tag_comment}\n"
    )
}

#[test]
fn clean_tree_exits_0() {
    let o = lint(&[("apps/web.yaml", &img(M))], &[]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert!(
        o.findings()
            .iter()
            .all(|f| f.0 == "MC070" || f.0 == "MC071"),
        "{:?}",
        o.findings()
    );
    assert_eq!(
        o.json["changes"][0]["changes"][0]["new"],
        "ghcr.io/org/app:1.2.3"
    );
}

#[test]
fn mc001_unparsable_marker() {
    for bad in [
        r#"{"$imagepolicy": "flux-system:app"} bump me"#,
        r#"{'$imagepolicy': 'flux-system:app'}"#,
        r#"{"$imagePolicy": "flux-system:app"}"#,
        r#"{"$imagepolicy": "flux-system:app",}"#,
        r#"{"$imagepolicy": "flux-system:app", "n": 1}"#,
    ] {
        let o = lint(&[("apps/web.yaml", &img(bad))], &[]);
        assert!(
            o.at("MC001", "apps/web.yaml", 11),
            "{bad}: {:?}",
            o.findings()
        );
        assert_eq!(o.code, 1);
        assert!(
            o.json["changes"].as_array().unwrap().is_empty(),
            "{bad}: no change"
        );
    }
    assert!(!lint(&[("apps/web.yaml", &img(M))], &[]).has("MC001"));
}

#[test]
fn mc002_bad_setter_name() {
    for bad in ["flux-system/app", "flux-system:app:version", "app"] {
        let c = format!(r#"{{"$imagepolicy": "{bad}"}}"#);
        let o = lint(&[("apps/web.yaml", &img(&c))], &[]);
        assert!(
            o.at("MC002", "apps/web.yaml", 11),
            "{bad}: {:?}",
            o.findings()
        );
    }
    let o = lint(
        &[(
            "apps/kustomization.yaml",
            &kust(r#"{"$imagepolicy": "flux-system:app:tag"}"#),
        )],
        &[],
    );
    assert!(!o.has("MC002"), "{:?}", o.findings());
}

#[test]
fn mc003_tag_on_full_reference() {
    let o = lint(
        &[(
            "apps/web.yaml",
            &img(r#"{"$imagepolicy": "flux-system:app:tag"}"#),
        )],
        &[],
    );
    assert!(o.at("MC003", "apps/web.yaml", 11), "{:?}", o.findings());
    let msg = o.json["findings"][0]["message"].as_str().unwrap();
    assert!(msg.contains("image: 1.2.3"), "{msg}");
    // the simulation shows the bare tag being written
    assert_eq!(o.json["changes"][0]["changes"][0]["new"], "1.2.3");
    let o = lint(
        &[(
            "apps/kustomization.yaml",
            &kust(r#"{"$imagepolicy": "flux-system:app:tag"}"#),
        )],
        &[],
    );
    assert!(!o.has("MC003"), "{:?}", o.findings());
}

#[test]
fn mc004_full_marker_on_tag_field() {
    let o = lint(&[("apps/kustomization.yaml", &kust(M))], &[]);
    assert!(
        o.at("MC004", "apps/kustomization.yaml", 7),
        "{:?}",
        o.findings()
    );
    let o = lint(&[("apps/web.yaml", &img(M))], &[]);
    assert!(!o.has("MC004"));
}

#[test]
fn mc005_name_on_tagged_value() {
    let o = lint(
        &[(
            "apps/web.yaml",
            &img(r#"{"$imagepolicy": "flux-system:app:name"}"#),
        )],
        &[],
    );
    assert!(o.at("MC005", "apps/web.yaml", 11), "{:?}", o.findings());
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n  - name: app\n    newName: ghcr.io/org/app # {\"$imagepolicy\": \"flux-system:app:name\"}\n";
    assert!(!lint(&[("apps/kustomization.yaml", k)], &[]).has("MC005"));
}

#[test]
fn mc006_digest_without_digest() {
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n  - name: app\n    digest: sha256:0000000000000000000000000000000000000000000000000000000000000000 # {\"$imagepolicy\": \"flux-system:app:digest\"}\n";
    let o = lint(&[("apps/kustomization.yaml", k)], &[]);
    assert!(
        o.at("MC006", "apps/kustomization.yaml", 5),
        "{:?}",
        o.findings()
    );
    // upstream writes the empty digest, quoted
    assert_eq!(o.json["changes"][0]["changes"][0]["new"], "");
    let with = format!("{SET}@sha256:{}", "a".repeat(64));
    let o = lint(&[("apps/kustomization.yaml", k)], &["--set", &with]);
    assert!(!o.has("MC006"), "{:?}", o.findings());
}

#[test]
fn mc007_digest_on_full_reference() {
    let digest = format!("sha256:{}", "b".repeat(64));
    let with = format!("{SET}@{digest}");
    let o = lint(
        &[(
            "apps/web.yaml",
            &img(r#"{"$imagepolicy": "flux-system:app:digest"}"#),
        )],
        &["--set", &with],
    );
    assert!(o.at("MC007", "apps/web.yaml", 11), "{:?}", o.findings());
    assert_eq!(o.code, 1);
    let f = o.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "MC007")
        .unwrap();
    let msg = f["message"].as_str().unwrap();
    assert!(msg.contains(&format!("writes `image: {digest}`")), "{msg}");
    assert!(
        msg.contains("full image reference \"ghcr.io/org/app:1.0.0\""),
        "{msg}"
    );
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.contains(r#"# {"$imagepolicy": "flux-system:app"}"#),
        "{fix}"
    );
    // the simulation shows the bare digest being written, as upstream's setter does
    assert_eq!(o.json["changes"][0]["changes"][0]["new"], digest.as_str());
    // negative: :digest on a kustomize digest field, and the plain marker on image:
    let k = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nimages:\n  - name: app\n    newName: ghcr.io/org/app\n    digest: sha256:0000000000000000000000000000000000000000000000000000000000000000 # {\"$imagepolicy\": \"flux-system:app:digest\"}\n";
    let o = lint(&[("apps/kustomization.yaml", k)], &["--set", &with]);
    assert!(!o.has("MC007"), "{:?}", o.findings());
    assert_eq!(o.code, 0, "{:?}", o.findings());
    // upstream's own fixture: a short fake digest on a newDigest field (no MC007)
    let k2 = k.replace(
        "digest: sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "newDigest: sha256:1234567890abcdef",
    );
    let o = lint(&[("apps/kustomization.yaml", &k2)], &["--set", &with]);
    assert!(!o.has("MC007"), "{:?}", o.findings());
    let o = lint(&[("apps/web.yaml", &img(M))], &["--set", &with]);
    assert!(!o.has("MC007"), "{:?}", o.findings());
    assert_eq!(
        o.json["changes"][0]["changes"][0]["new"],
        format!("ghcr.io/org/app:1.2.3@{digest}").as_str()
    );
}

#[test]
fn mc003_mc007_describe_the_value_they_see() {
    // after a bad --write the field holds a bare tag / digest: say so, not "full reference"
    let o = lint(
        &[(
            "apps/web.yaml",
            &deployment(r#"          image: 0.1.1 # {"$imagepolicy": "flux-system:app:tag"}"#),
        )],
        &[],
    );
    let msg = o.json["findings"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(o.json["findings"][0]["rule"], "MC003");
    assert!(msg.contains("holds the bare tag \"0.1.1\""), "{msg}");
    assert!(!msg.contains("full image reference"), "{msg}");
    let d = format!("sha256:{}", "c".repeat(64));
    let o = lint(
        &[(
            "apps/web.yaml",
            &deployment(&format!(
                r#"          image: {d} # {{"$imagepolicy": "flux-system:app:digest"}}"#
            )),
        )],
        &["--set", &format!("{SET}@{d}")],
    );
    assert_eq!(o.json["findings"][0]["rule"], "MC007", "{:?}", o.findings());
    let msg = o.json["findings"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("holds the bare digest {d:?}")),
        "{msg}"
    );
}

#[test]
fn mc010_policy_unknown() {
    let o = lint(
        &[(
            "apps/web.yaml",
            &img(r#"{"$imagepolicy": "flux-system:nope"}"#),
        )],
        &[],
    );
    assert!(o.at("MC010", "apps/web.yaml", 11), "{:?}", o.findings());
    // the message names the real flags
    let msg = o.json["findings"][0]["message"].as_str().unwrap();
    assert!(msg.contains("--from-cluster"), "{msg}");
    assert!(!msg.contains("--cluster,"), "{msg}");
    assert!(!lint(&[("apps/web.yaml", &img(M))], &[]).has("MC010"));
}

const IUA: &str = "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata:\n  name: auto\n  namespace: flux-system\nspec:\n  interval: 5m\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  git:\n    commit:\n      author:\n        name: bot\n        email: bot@example.com\n      messageTemplate: '{{range .Changed.Changes}}{{.OldValue}} -> {{.NewValue}}{{end}}'\n  update:\n    path: ./apps\n    strategy: Setters\n";

#[test]
fn mc011_policy_in_other_namespace() {
    let pol = "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  imageRepositoryRef:\n    name: app\n    namespace: flux-system\n";
    let o = lint(
        &[
            ("apps/web.yaml", &img(r#"{"$imagepolicy": "apps:web"}"#)),
            ("flux/auto.yaml", IUA),
            ("flux/web.yaml", pol),
        ],
        &["--set", "apps:web=ghcr.io/org/app:2.0.0"],
    );
    assert!(o.at("MC011", "apps/web.yaml", 11), "{:?}", o.findings());
    // and Flux would not change it
    assert!(o.json["changes"].as_array().unwrap().is_empty());
    let o = lint(&[("apps/web.yaml", &img(M)), ("flux/auto.yaml", IUA)], &[]);
    assert!(!o.has("MC011"), "{:?}", o.findings());
    assert_eq!(o.code, 0, "{:?}", o.findings());
}

#[test]
fn mc012_policy_excluded_by_selector() {
    let iua = IUA.replace(
        "  update:\n",
        "  policySelector:\n    matchLabels:\n      env: prod\n  update:\n",
    );
    let o = lint(&[("apps/web.yaml", &img(M)), ("flux/auto.yaml", &iua)], &[]);
    assert!(o.at("MC012", "apps/web.yaml", 11), "{:?}", o.findings());
    assert!(o.json["changes"].as_array().unwrap().is_empty());
    let labelled = IMAGES.replace("  name: app\n  namespace: flux-system\nspec:\n  imageRepositoryRef", "  name: app\n  namespace: flux-system\n  labels:\n    env: prod\nspec:\n  imageRepositoryRef");
    let o = lint(
        &[
            ("apps/web.yaml", &img(M)),
            ("flux/auto.yaml", &iua),
            ("flux/images.yaml", &labelled),
        ],
        &[],
    );
    assert!(!o.has("MC012"), "{:?}", o.findings());
}

#[test]
fn mc013_outside_update_path() {
    let o = lint(&[("other/web.yaml", &img(M)), ("flux/auto.yaml", IUA)], &[]);
    assert!(o.at("MC013", "other/web.yaml", 11), "{:?}", o.findings());
    let o = lint(&[("apps/web.yaml", &img(M)), ("flux/auto.yaml", IUA)], &[]);
    assert!(!o.has("MC013"));
}

#[test]
fn mc020_marker_not_attached() {
    let head = deployment(&format!(
        "          # {M}\n          image: ghcr.io/org/app:1.0.0"
    ));
    let o = lint(&[("apps/web.yaml", &head)], &[]);
    assert!(o.at("MC020", "apps/web.yaml", 11), "{:?}", o.findings());
    assert!(o.json["changes"].as_array().unwrap().is_empty());
    let onkey = deployment(&format!(
        "          image: # {M}\n            ghcr.io/org/app:1.0.0"
    ));
    assert!(lint(&[("apps/web.yaml", &onkey)], &[]).has("MC020"));
    // a scalar sequence item's head comment IS applied
    let item = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\nimages:\n  - a\n  # {M}\n  - ghcr.io/org/app:1.0.0\n"
    );
    let o = lint(&[("apps/c.yaml", &item)], &[]);
    assert!(!o.has("MC020"), "{:?}", o.findings());
    assert_eq!(o.json["changes"][0]["changes"][0]["line"], 8);
}

#[test]
fn mc021_marker_in_block_scalar() {
    let hr = format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  valuesFrom: []\n  values: |\n    image:\n      repository: ghcr.io/org/app\n      tag: 1.0.0 # {}\n",
        r#"{"$imagepolicy": "flux-system:app:tag"}"#
    );
    let o = lint(&[("apps/hr.yaml", &hr)], &[]);
    assert!(o.at("MC021", "apps/hr.yaml", 11), "{:?}", o.findings());
    let good = format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  values:\n    image:\n      repository: ghcr.io/org/app # {}\n      tag: 1.0.0 # {}\n",
        r#"{"$imagepolicy": "flux-system:app:name"}"#, r#"{"$imagepolicy": "flux-system:app:tag"}"#
    );
    let o = lint(&[("apps/hr.yaml", &good)], &[]);
    assert!(!o.has("MC021"), "{:?}", o.findings());
    assert_eq!(o.code, 0, "{:?}", o.findings());
    assert_eq!(o.json["changes"][0]["changes"][0]["new"], "1.2.3");
}

#[test]
fn mc022_wrong_file_type() {
    for name in ["apps/web.yaml.tmpl", "apps/web.YAML", "apps/values.json"] {
        // in a tree: Flux never reads it, and neither do we (no finding)
        let o = lint(&[(name, &img(M))], &[]);
        assert!(!o.has("MC022"), "{name}: {:?}", o.findings());
        // named explicitly: the marker in it is an error
        let d = tempfile::tempdir().unwrap();
        write_tree(d.path(), &[(name, &img(M))]);
        let o = run_in(d.path(), &[name, "-o", "json", "--set", SET]);
        assert!(o.at("MC022", name, 11), "{name}: {:?}", o.findings());
    }
    assert!(
        !lint(
            &[(
                "apps/Kustomization",
                &kust(r#"{"$imagepolicy": "flux-system:app:tag"}"#)
            )],
            &[]
        )
        .has("MC022")
    );
}

#[test]
fn mc023_problem_file() {
    let patch = format!(
        "- op: replace\n  path: /spec/template/spec/containers/0/image\n  value: ghcr.io/org/app:1.0.0 # {M}\n"
    );
    let o = lint(&[("apps/patch.yaml", &patch)], &[]);
    assert!(o.at("MC023", "apps/patch.yaml", 3), "{:?}", o.findings());
    let helm = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{{{ .Release.Name }}}}\nspec:\n  {{{{- if .Values.x }}}}\n  image: ghcr.io/org/app:1.0.0 # {M}\n  {{{{- end }}}}\n"
    );
    let o = lint(&[("chart/templates/d.yaml", &helm)], &[]);
    assert!(o.has("MC023"), "{:?}", o.findings());
    assert!(!lint(&[("apps/web.yaml", &img(M))], &[]).has("MC023"));
}

#[test]
fn mc024_marker_in_list() {
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: apps/v1\n    kind: Deployment\n    metadata:\n      name: web\n      namespace: apps\n    spec:\n      template:\n        spec:\n          containers:\n            - name: web\n              image: ghcr.io/org/app:1.0.0 # {M}\n"
    );
    let o = lint(&[("apps/list.yaml", &list)], &[]);
    assert!(o.at("MC024", "apps/list.yaml", 14), "{:?}", o.findings());
    assert_eq!(o.code, 1, "the List file is never updated: an error");
    let msg = o.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "MC024")
        .unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(msg.contains("apps/deployment_web.yaml"), "{msg}");
    assert!(msg.contains("never updates this file"), "{msg}");
    assert!(
        o.json["changes"].as_array().unwrap().is_empty(),
        "the List file itself is not changed by Flux"
    );
    assert!(!lint(&[("apps/web.yaml", &img(M))], &[]).has("MC024"));
}

#[test]
fn mc025_marker_in_value() {
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  note: 'image: x # {}'\n",
        r#"{"$imagepolicy": "flux-system:app"}"#.replace('\'', "''")
    );
    let o = lint(&[("apps/c.yaml", &cm)], &[]);
    assert!(o.at("MC025", "apps/c.yaml", 6), "{:?}", o.findings());
}

#[test]
fn mc030_host_rewrite() {
    let d = deployment(&format!("          image: registry:5000/app:1.0.0 # {M}"));
    let o = lint(&[("apps/web.yaml", &d)], &[]);
    assert!(o.at("MC030", "apps/web.yaml", 11), "{:?}", o.findings());
    assert_eq!(
        o.json["changes"][0]["changes"][0]["new"],
        "ghcr.io/org/app:1.2.3"
    );
    assert!(!lint(&[("apps/web.yaml", &img(M))], &[]).has("MC030"));
}

#[test]
fn mc031_imagerepository_with_tag() {
    assert!(!lint(&[], &[]).has("MC031"));
    let tagged = "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageRepository\nmetadata:\n  name: other\n  namespace: flux-system\nspec:\n  image: ghcr.io/org/other:1.0.0\n";
    let o = lint(&[("flux/other.yaml", tagged)], &[]);
    assert!(o.at("MC031", "flux/other.yaml", 7), "{:?}", o.findings());
}

#[test]
fn mc040_job_pod_template() {
    let job = format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  template:\n    spec:\n      containers:\n        - name: m\n          image: ghcr.io/org/app:1.0.0 # {M}\n"
    );
    let o = lint(&[("apps/job.yaml", &job)], &[]);
    assert!(o.at("MC040", "apps/job.yaml", 10), "{:?}", o.findings());
    let cj = format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: m\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n            - name: m\n              image: ghcr.io/org/app:1.0.0 # {M}\n"
    );
    let o = lint(&[("apps/cj.yaml", &cj)], &[]);
    assert!(!o.has("MC040"), "{:?}", o.findings());
}

#[test]
fn mc050_removed_template_fields() {
    let bad = IUA.replace(
        "{{range .Changed.Changes}}{{.OldValue}} -> {{.NewValue}}{{end}}",
        "{{range .Updated.Images}}{{.}}{{end}}",
    );
    let o = lint(&[("flux/auto.yaml", &bad)], &[]);
    assert!(o.at("MC050", "flux/auto.yaml", 16), "{:?}", o.findings());
    let bad2 = IUA.replace(
        "{{range .Changed.Changes}}",
        "{{range .Changed.ImageResult.Files}}",
    );
    assert!(lint(&[("flux/auto.yaml", &bad2)], &[]).has("MC050"));
    assert!(!lint(&[("flux/auto.yaml", IUA)], &[]).has("MC050"));
}

#[test]
fn mc051_removed_api_version() {
    let o = lint(
        &[(
            "flux/auto.yaml",
            &IUA.replace(
                "image.toolkit.fluxcd.io/v1",
                "image.toolkit.fluxcd.io/v1beta1",
            ),
        )],
        &[],
    );
    assert!(o.at("MC051", "flux/auto.yaml", 1), "{:?}", o.findings());
    assert!(!lint(&[("flux/auto.yaml", IUA)], &[]).has("MC051"));
}

#[test]
fn mc052_strategy() {
    let o = lint(
        &[(
            "flux/auto.yaml",
            &IUA.replace("strategy: Setters", "strategy: Other"),
        )],
        &[],
    );
    assert!(o.has("MC052"), "{:?}", o.findings());
}

#[test]
fn mc060_invalid_latest_ref() {
    // a latestRef read from the cluster or a --policies file (an invalid --set is exit 2)
    let d = tempfile::tempdir().unwrap();
    let pol = |name: &str| {
        format!(
            "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: app\n  namespace: flux-system\nspec:\n  imageRepositoryRef:\n    name: app\nstatus:\n  latestRef:\n    name: {name}\n    tag: \"1.0\"\n"
        )
    };
    write_tree(
        d.path(),
        &[
            ("apps/web.yaml", &img(M)),
            ("bad.yaml.txt", &pol("GHCR.io/Org/App")),
            ("good.yaml.txt", &pol("ghcr.io/org/app")),
        ],
    );
    let o = run_in(
        d.path(),
        &["apps", "-o", "json", "--policies", "bad.yaml.txt"],
    );
    assert!(o.has("MC060"), "{:?} {}", o.findings(), o.stderr);
    let o = run_in(
        d.path(),
        &["apps", "-o", "json", "--policies", "good.yaml.txt"],
    );
    assert!(!o.has("MC060"), "{:?} {}", o.findings(), o.stderr);
    assert_eq!(
        o.json["changes"][0]["changes"][0]["new"],
        "ghcr.io/org/app:1.0"
    );
}

#[test]
fn mc062_file_too_large() {
    let o = lint(&[("apps/web.yaml", &img(M))], &["--max-file-size", "100"]);
    assert!(o.has("MC062"), "{:?}", o.findings());
}

#[test]
fn mc070_rewrite_reformats() {
    let crlf = img(M).replace('\n', "\r\n");
    let o = lint(&[("apps/web.yaml", &crlf)], &[]);
    assert!(o.has("MC070"), "{:?}", o.findings());
    assert!(!lint(&[("apps/web.yaml", &img(M))], &[]).has("MC070"));
}

#[test]
fn mc071_simulation_approximate() {
    let four = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n    name: web\nspec:\n    template:\n        spec:\n            containers:\n                - name: web\n                  image: ghcr.io/org/app:1.0.0 # {M}\n"
    );
    let o = lint(&[("apps/web.yaml", &four)], &[]);
    assert!(o.has("MC071"), "{:?}", o.findings());
    assert_eq!(o.json["changes"][0]["exact"], false);
    assert!(!lint(&[("apps/web.yaml", &img(M))], &[]).has("MC071"));
}

#[test]
fn mc072_no_policies() {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("apps/web.yaml", &img(M))]);
    let o = run_in(d.path(), &[".", "-o", "json"]);
    assert!(o.has("MC072"), "{:?}", o.findings());
    assert_eq!(o.code, 0);
}

#[test]
fn list_rules_and_usage_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    let o = run_in(d.path(), &["--list-rules"]);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("MC003"));
    assert_eq!(run_in(d.path(), &["--set", "nonsense"]).code, 2);
    assert_eq!(run_in(d.path(), &["does-not-exist"]).code, 2);
    assert_eq!(run_in(d.path(), &["--bogus-flag"]).code, 2);
    let h = run_in(d.path(), &["--help"]);
    assert!(h.stdout.contains("Examples:"));
}

#[test]
fn bad_set_values_are_usage_errors_naming_the_flag() {
    let d = tempfile::tempdir().unwrap();
    for (v, why) in [
        ("foo", "no '=' between the policy and the image reference"),
        ("flux-system:app=", "the image reference after '=' is empty"),
        ("flux-system=ghcr.io/org/app:1", "is not NAMESPACE:POLICY"),
        (":app=ghcr.io/org/app:1", "is not NAMESPACE:POLICY"),
        (
            "flux-system:app:tag=ghcr.io/org/app:1",
            "no :tag/:name/:digest suffix",
        ),
        ("flux-system:app=ghcr.io/org/app", "has no tag or digest"),
        (
            "flux-system:app=ghcr.io/Org/app:1",
            "is not a valid image reference",
        ),
        (
            "flux-system:app=ghcr.io/org/app:1@sha256:xyz",
            "is not a valid image reference",
        ),
    ] {
        // before any cluster is contacted: a missing kubeconfig would be another error
        let o = run_in(
            d.path(),
            &["--set", v, "--from-cluster", "--kubeconfig", "/nonexistent"],
        );
        assert_eq!(o.code, 2, "{v}: {}", o.stderr);
        assert!(
            o.stderr.contains(&format!("--set {v:?}: ")),
            "{v}: {}",
            o.stderr
        );
        assert!(o.stderr.contains(why), "{v}: {}", o.stderr);
        assert!(
            o.stderr
                .contains("expected --set NAMESPACE:POLICY=NAME:TAG[@DIGEST]"),
            "{}",
            o.stderr
        );
        assert!(!o.stderr.contains("kubeconfig"), "{}", o.stderr);
    }
}

#[test]
fn help_examples_paste_into_a_shell() {
    let d = tempfile::tempdir().unwrap();
    let h = std::process::Command::new(env!("CARGO_BIN_EXE_kubectl-markercheck"))
        .arg("--help")
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let help = String::from_utf8(h.stdout).unwrap();
    // the marker reads as JSON, without Rust escapes
    assert!(help.contains(r#"# {"$imagepolicy":"#), "{help}");
    assert!(!help.contains(r#"\""#), "{help}");
    let ex = &help[help.find("Examples:").expect("examples")..];
    assert!(ex.lines().all(|l| l.len() < 80), "{ex}");
    // every command, with its `\` continuations joined, runs as pasted
    let mut cmds = Vec::new();
    let mut cur = String::new();
    for l in ex.lines().map(str::trim) {
        if cur.is_empty() && !l.starts_with("kubectl markercheck") {
            continue;
        }
        match l.strip_suffix('\\') {
            Some(head) => cur.push_str(head),
            None => {
                cur.push_str(l);
                cmds.push(std::mem::take(&mut cur));
            }
        }
    }
    assert_eq!(cmds.len(), 6, "{cmds:?}");
    let sim = cmds
        .iter()
        .find(|c| c.contains("--simulate --set"))
        .expect("the --set example");
    assert_eq!(
        sim,
        "kubectl markercheck ./clusters --simulate --set flux-system:podinfo=ghcr.io/stefanprodan/podinfo:6.7.1"
    );
    std::fs::create_dir(d.path().join("clusters")).unwrap();
    let bin = env!("CARGO_BIN_EXE_kubectl-markercheck");
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(sim.replacen("kubectl markercheck", bin, 1))
        .current_dir(d.path())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn github_and_sarif_formats() {
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("flux/images.yaml", IMAGES),
            (
                "apps/web.yaml",
                &img(r#"{"$imagepolicy": "flux-system:app:tag"}"#),
            ),
        ],
    );
    let o = run_in(d.path(), &[".", "--format", "github", "--set", SET]);
    assert_eq!(o.code, 1);
    assert!(
        o.stdout
            .starts_with("::error file=apps/web.yaml,line=11,col="),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("title=MC003 tag-on-full-ref::"));
    let o = run_in(d.path(), &[".", "--format", "sarif", "--set", SET]);
    assert_eq!(o.code, 1);
    let r = &o.json["runs"][0]["results"][0];
    assert_eq!(r["ruleId"], "MC003");
    assert_eq!(r["level"], "error");
    assert_eq!(
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "apps/web.yaml"
    );
    assert_eq!(
        r["locations"][0]["physicalLocation"]["region"]["startLine"],
        11
    );
    // table output groups by file and prints the fix
    let o = run_in(d.path(), &[".", "--set", SET, "--color", "never"]);
    assert!(o.stdout.starts_with("apps/web.yaml\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains("fix: use the plain marker"),
        "{}",
        o.stdout
    );
    assert!(!o.stdout.contains('\u{1b}'));
}

#[test]
fn json_report_shape_matches_the_other_plugins() {
    let o = lint(&[("apps/web.yaml", &img(M))], &[]);
    assert_eq!(o.json["apiVersion"], "markercheck.cluster-loop.dev/v1");
    assert_eq!(o.json["kind"], "MarkerCheckReport");
    assert_eq!(o.json["paths"][0], ".");
    // two files read (flux/images.yaml, apps/web.yaml), both selected, one with the token
    assert_eq!(o.json["stats"]["filesScanned"], 2);
    assert_eq!(o.json["stats"]["filesSelected"], 2);
    assert_eq!(o.json["stats"]["filesWithToken"], 1);
    assert_eq!(o.json["stats"]["markers"], 1);
    // camelCase everywhere: no snake_case key anywhere in the document
    fn keys(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    out.push(k.clone());
                    keys(x, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    keys(&o.json, &mut all);
    assert!(all.iter().all(|k| !k.contains('_')), "{all:?}");
    assert!(all.contains(&"changes".to_string()));
    // the same document as YAML
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("apps/web.yaml", &img(M))]);
    let y = run_in(d.path(), &[".", "-o", "yaml"]);
    assert!(
        y.stdout
            .contains("apiVersion: markercheck.cluster-loop.dev/v1"),
        "{}",
        y.stdout
    );
    assert!(y.stdout.contains("kind: MarkerCheckReport"));
    assert!(y.stdout.contains("filesScanned: 1"), "{}", y.stdout);
}

#[test]
fn empty_tree_says_it_scanned_nothing() {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("docs/README.md", "# nothing\n")]);
    let o = run_in(d.path(), &[".", "-o", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.json["stats"]["filesScanned"], 0);
    assert!(o.stderr.contains("scanned 0 files under ."), "{}", o.stderr);
    let t = run_in(d.path(), &["docs"]);
    assert_eq!(t.code, 0);
    assert!(
        t.stderr.contains("scanned 0 files under docs"),
        "{}",
        t.stderr
    );
}

#[test]
fn missing_path_is_a_usage_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let o = run_in(d.path(), &["apps/nope.yaml"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("apps/nope.yaml"), "{}", o.stderr);
    assert!(
        o.stderr.contains("no such file or directory"),
        "{}",
        o.stderr
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn explicit_file_flux_never_reads() {
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("flux/images.yaml", IMAGES),
            (
                "values.conf",
                &format!("image: ghcr.io/org/app:1.0.0 # {M}\n"),
            ),
            ("README.md", "image: ghcr.io/org/app:1.0.0\n"),
        ],
    );
    // a marker in it: MC022 error, and the note on stderr
    let o = run_in(
        d.path(),
        &["values.conf", "flux", "-o", "json", "--set", SET],
    );
    assert_eq!(o.code, 1);
    assert!(o.at("MC022", "values.conf", 1), "{:?}", o.findings());
    assert!(
        o.stderr.contains("values.conf: Flux never reads this file"),
        "{}",
        o.stderr
    );
    // no marker (e.g. CI passing every changed file): a note, exit 0
    let o = run_in(d.path(), &["README.md", "-o", "json", "--set", SET]);
    assert_eq!(o.code, 0, "{:?}", o.findings());
    assert_eq!(o.json["stats"]["filesScanned"], 1);
    assert!(o.stderr.contains("README.md: Flux never reads this file"));
}

#[test]
fn marker_on_a_block_scalar_is_simulated() {
    // the marker is the block scalar's line comment (on its header): Flux sets the value and
    // go-yaml writes `|-` (the new value has no final newline), even for the same image
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: apps\ndata:\n  image: | # {M}\n    ghcr.io/org/app:1.0.0\n  other: |\n    keep\n"
    );
    let o = lint(&[("apps/c.yaml", &cm)], &["--simulate"]);
    let c = &o.json["changes"][0];
    assert_eq!(c["exact"], true, "{}", o.stdout);
    assert_eq!(c["changes"][0]["new"], "ghcr.io/org/app:1.2.3");
    assert!(
        c["diff"]
            .as_str()
            .unwrap()
            .contains(&format!("+  image: |- # {M}\n+    ghcr.io/org/app:1.2.3\n")),
        "{}",
        c["diff"]
    );
    assert!(o.has("MC070"));
    // same image: still rewritten once (the old value ends in a newline)
    let same = cm.replace("1.0.0", "1.2.3");
    let o = lint(&[("apps/c.yaml", &same)], &[]);
    assert_eq!(o.json["changes"].as_array().unwrap().len(), 1);
}
