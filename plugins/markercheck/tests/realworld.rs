//! Real-world-shaped repositories: exact simulated output, --write, --render, bad input.

mod common;
use common::*;

const M: &str = r#"{"$imagepolicy": "flux-system:app"}"#;
const T: &str = r#"{"$imagepolicy": "flux-system:app:tag"}"#;

fn simulate(files: &[(&str, &str)], set: &str) -> (Out, tempfile::TempDir) {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("flux/images.yaml", IMAGES)]);
    write_tree(d.path(), files);
    let o = run_in(d.path(), &[".", "-o", "json", "--set", set, "--write"]);
    (o, d)
}

fn read(d: &tempfile::TempDir, p: &str) -> String {
    std::fs::read_to_string(d.path().join(p)).unwrap()
}

#[test]
fn multi_doc_crlf_blank_lines_and_utf8_comments() {
    let src = format!(
        "# Ünïcödé header — kept\r\n---\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: web   \r\n\r\n---\r\n# web app (日本語)\r\napiVersion: apps/v1\r\nkind: Deployment\r\nmetadata:\r\n  name: web\r\nspec:\r\n\r\n  template:\r\n    spec:\r\n      containers:\r\n      - name: web\r\n        image: ghcr.io/org/app:1.0.0   # {M}\r\n---\r\n"
    );
    let (o, d) = simulate(&[("apps/all.yaml", &src)], SET);
    assert_eq!(o.code, 0, "{:?}", o.findings());
    // comment-only first document dropped, CRLF -> LF, blank lines and trailing spaces gone,
    // one space before the line comment, empty last document dropped
    let want = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n---\n# web app (日本語)\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: ghcr.io/org/app:1.2.3 # {M}\n"
    );
    assert_eq!(read(&d, "apps/all.yaml"), want);
    assert!(o.has("MC070"));
}

#[test]
fn kustomization_images_wide_indent_and_quoting() {
    let k = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deploy.yaml\nimages:\n  - name: app\n    newName: ghcr.io/org/app\n    newTag: 1.0.0 # {T}\n  - name: quoted\n    newTag: '1.0.0' # {T}\n"
    );
    // a tag that would read as a number in YAML 1.1 gets double quotes; quoted stays quoted
    let (o, d) = simulate(
        &[("apps/kustomization.yaml", &k)],
        "flux-system:app=ghcr.io/org/app:1.10",
    );
    assert_eq!(o.code, 0, "{:?}", o.findings());
    let want = k
        .replace("newTag: 1.0.0 #", "newTag: \"1.10\" #")
        .replace("newTag: '1.0.0' #", "newTag: '1.10' #");
    assert_eq!(read(&d, "apps/kustomization.yaml"), want);
    assert_eq!(o.json["changes"][0]["exact"], true, "{}", o.stdout);
}

#[test]
fn cronjob_compact_indent_and_helmrelease_values() {
    let cj = format!(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: report\nspec:\n  schedule: \"0 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: report\n            image: \"ghcr.io/org/app:1.0.0\" # {M}\n            args: [\"--once\"]\n"
    );
    let hr = format!(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\nspec:\n  chart:\n    spec:\n      chart: web\n      version: 1.x\n  values:\n    image:\n      repository: ghcr.io/org/app\n      tag: 1.0.0 # {T}\n"
    );
    let (o, d) = simulate(&[("apps/cj.yaml", &cj), ("apps/hr.yaml", &hr)], SET);
    assert_eq!(o.code, 0, "{:?}", o.findings());
    assert_eq!(
        read(&d, "apps/cj.yaml"),
        cj.replace("app:1.0.0\"", "app:1.2.3\"")
    );
    assert_eq!(
        read(&d, "apps/hr.yaml"),
        hr.replace("tag: 1.0.0", "tag: 1.2.3")
    );
    // a flow sequence as go-yaml writes it (`["--once"]`) is kept byte for byte: claimed
    // exact (the real image-automation-controller keeps it, markercheck's differential test)
    let cjc = o.json["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["file"] == "apps/cj.yaml")
        .unwrap();
    assert_eq!(cjc["exact"], true, "{}", cjc["caveats"]);
}

/// An unchanged plain value that is a YAML 1.1 non-string (`1.10`) is double-quoted when the
/// file is rewritten for another marker (kyaml's setter sets every marked field and
/// `FormatNonStringStyle` quotes it), and alone it changes nothing (the real
/// image-automation-controller v1.1.2, markercheck's differential test: `tag: yes` was `"yes"`).
#[test]
fn an_unchanged_non_string_value_is_quoted_when_the_file_is_rewritten() {
    let both = deployment(&format!(
        "          image: ghcr.io/org/app:1.0.0 # {M}\n          env:\n            - name: TAG\n              value: 1.10 # {T}"
    ));
    let alone = deployment(&format!(
        "          image: ghcr.io/org/app:1.10\n          env:\n            - name: TAG\n              value: 1.10 # {T}"
    ));
    let (o, d) = simulate(
        &[("apps/both.yaml", &both), ("apps/alone.yaml", &alone)],
        "flux-system:app=ghcr.io/org/app:1.10",
    );
    assert_eq!(o.code, 0, "{:?}", o.findings());
    assert_eq!(
        read(&d, "apps/both.yaml"),
        both.replace("app:1.0.0", "app:1.10")
            .replace("value: 1.10", "value: \"1.10\"")
    );
    let changes = o.json["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{}", o.stdout);
    assert_eq!(changes[0]["file"], "apps/both.yaml");
    assert_eq!(changes[0]["exact"], true, "{}", o.stdout);
    // the quoting is no value change of its own
    assert_eq!(changes[0]["changes"].as_array().unwrap().len(), 1);
    assert_eq!(read(&d, "apps/alone.yaml"), alone);
}

#[test]
fn unchanged_values_leave_files_alone() {
    let dep = deployment(&format!("          image: ghcr.io/org/app:1.2.3 # {M}"));
    let (o, d) = simulate(&[("apps/web.yaml", &dep)], SET);
    assert!(o.json["changes"].as_array().unwrap().is_empty());
    assert_eq!(read(&d, "apps/web.yaml"), dep);
}

#[test]
fn simulate_prints_unified_diff() {
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("flux/images.yaml", IMAGES),
            (
                "apps/web.yaml",
                &deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {M}")),
            ),
        ],
    );
    let o = run_in(d.path(), &[".", "--simulate", "--set", SET]);
    assert_eq!(o.code, 0);
    assert!(
        o.stdout
            .contains("--- a/apps/web.yaml\n+++ b/apps/web.yaml\n"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains(&format!("-          image: ghcr.io/org/app:1.0.0 # {M}\n+          image: ghcr.io/org/app:1.2.3 # {M}\n")));
    // --simulate alone never writes
    assert!(read(&d, "apps/web.yaml").contains("1.0.0"));
}

#[test]
fn write_refuses_when_an_error_concerns_a_changed_file() {
    let bad = deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {T}"));
    let good = deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {M}"));
    let (o, d) = simulate(&[("apps/bad.yaml", &bad), ("apps/good.yaml", &good)], SET);
    assert_eq!(o.code, 1, "{:?}", o.findings());
    assert!(o.at("MC003", "apps/bad.yaml", 11), "{:?}", o.findings());
    // nothing written, not even the good file
    assert_eq!(read(&d, "apps/bad.yaml"), bad);
    assert_eq!(read(&d, "apps/good.yaml"), good);
    assert!(
        o.stderr
            .contains("--write refused, nothing written: 1 error finding(s)"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("MC003 apps/bad.yaml:11"), "{}", o.stderr);
    assert!(!o.stderr.contains("wrote "), "{}", o.stderr);
    // the same for :digest on image: (MC007)
    let dg = format!("sha256:{}", "e".repeat(64));
    let bad_digest = deployment(
        r#"          image: ghcr.io/org/app:1.0.0 # {"$imagepolicy": "flux-system:app:digest"}"#,
    );
    let (o, d) = simulate(&[("apps/bad.yaml", &bad_digest)], &format!("{SET}@{dg}"));
    assert_eq!(o.code, 1);
    assert_eq!(read(&d, "apps/bad.yaml"), bad_digest);
    assert!(o.stderr.contains("MC007 apps/bad.yaml:11"), "{}", o.stderr);
    // an error in a file the write does not change does not block it
    let unknown = deployment(
        r#"          image: ghcr.io/org/other:1.0.0 # {"$imagepolicy": "flux-system:nope"}"#,
    );
    let (o, d) = simulate(
        &[("apps/good.yaml", &good), ("apps/unknown.yaml", &unknown)],
        SET,
    );
    assert_eq!(o.code, 1, "MC010 is still an error finding");
    assert!(o.has("MC010"));
    assert!(read(&d, "apps/good.yaml").contains("ghcr.io/org/app:1.2.3"));
    assert!(o.stderr.contains("wrote apps/good.yaml"), "{}", o.stderr);
}

#[test]
fn mc070_advice_does_not_send_users_to_write() {
    let crlf =
        deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {M}")).replace('\n', "\r\n");
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[("flux/images.yaml", IMAGES), ("apps/web.yaml", &crlf)],
    );
    let o = run_in(d.path(), &[".", "-o", "json", "--set", SET]);
    let f = o.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "MC070")
        .unwrap()
        .clone();
    let fix = f["fix"].as_str().unwrap();
    assert!(!fix.contains("--simulate --write"), "{fix}");
    assert!(fix.contains("--normalize --write"), "{fix}");
    assert!(fix.contains("also writes the new image values"), "{fix}");
}

#[test]
fn normalize_changes_only_the_layout_once() {
    let crlf = format!(
        "apiVersion: apps/v1\r\nkind: Deployment\r\nmetadata:\r\n  name: web   \r\n\r\nspec:\r\n  template:\r\n    spec:\r\n      containers:\r\n      - name: web\r\n        image: ghcr.io/org/app:1.0.0    # {M}\r\n"
    );
    let want = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: ghcr.io/org/app:1.0.0 # {M}\n"
    );
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[("flux/images.yaml", IMAGES), ("apps/web.yaml", &crlf)],
    );
    // --normalize alone shows, never writes, and changes no value
    let o = run_in(d.path(), &[".", "-o", "json", "--normalize"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.json["changes"].as_array().unwrap().len(), 1);
    assert_eq!(o.json["changes"][0]["changes"].as_array().unwrap().len(), 0);
    assert_eq!(read(&d, "apps/web.yaml"), crlf);
    let o = run_in(d.path(), &[".", "-o", "json", "--normalize", "--write"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(read(&d, "apps/web.yaml"), want);
    // then: nothing left to normalize, and the automation's commit touches only the value
    let o = run_in(d.path(), &[".", "-o", "json", "--normalize"]);
    assert!(
        o.json["changes"].as_array().unwrap().is_empty(),
        "{}",
        o.stdout
    );
    let o = run_in(d.path(), &[".", "-o", "json", "--set", SET, "--write"]);
    assert!(!o.has("MC070"), "{:?}", o.findings());
    assert_eq!(read(&d, "apps/web.yaml"), want.replace("1.0.0", "1.2.3"));
    // --normalize with --set is a usage error (it changes no value)
    let o = run_in(d.path(), &[".", "--normalize", "--set", SET]);
    assert_eq!(o.code, 2, "{}", o.stderr);
}

#[test]
fn render_flags_a_bare_digest_and_not_a_plain_digest_ref() {
    if std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: kubectl not installed");
        return;
    }
    let kust = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - web.yaml\n";
    let digest = format!("sha256:{}", "d".repeat(64));
    let set = format!("{SET}@{digest}");
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("flux/images.yaml", IMAGES),
            ("bad/kustomization.yaml", kust),
            (
                "bad/web.yaml",
                &deployment(
                    r#"          image: ghcr.io/org/app:1.0.0 # {"$imagepolicy": "flux-system:app:digest"}"#,
                ),
            ),
            ("good/kustomization.yaml", kust),
            (
                "good/web.yaml",
                &deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {M}")),
            ),
        ],
    );
    let o = run_in(d.path(), &[".", "-o", "json", "--set", &set, "--render"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    let f = o.json["findings"].as_array().unwrap();
    let bad: Vec<_> = f.iter().filter(|x| x["file"] == "bad").collect();
    assert_eq!(bad.len(), 1, "{f:?}");
    assert_eq!(bad[0]["rule"], "MC082");
    assert_eq!(bad[0]["severity"], "error");
    let msg = bad[0]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("-> {digest}, a bare digest")),
        "{msg}"
    );
    assert!(!bad[0]["fix"].as_str().unwrap().contains("none needed"));
    let good: Vec<_> = f.iter().filter(|x| x["file"] == "good").collect();
    assert_eq!(good.len(), 1, "{f:?}");
    assert_eq!(good[0]["rule"], "MC081");
    assert!(
        good[0]["message"]
            .as_str()
            .unwrap()
            .ends_with(&format!("-> ghcr.io/org/app:1.2.3@{digest}")),
        "{:?}",
        good[0]
    );
}

#[test]
fn render_shows_the_bare_tag_offline() {
    if std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: kubectl not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("flux/images.yaml", IMAGES),
            (
                "apps/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - web.yaml\n",
            ),
            (
                "apps/web.yaml",
                &deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {T}")),
            ),
            (
                "good/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - web.yaml\n",
            ),
            (
                "good/web.yaml",
                &deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {M}")),
            ),
            (
                "broken/kustomization.yaml",
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - web.yaml\n  - missing.yaml\n",
            ),
            (
                "broken/web.yaml",
                &deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {M}")),
            ),
        ],
    );
    let o = run_in(d.path(), &[".", "-o", "json", "--set", SET, "--render"]);
    assert_eq!(o.code, 1);
    let r = &o.json["rendered"];
    let apps = r
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["dir"].as_str().unwrap().ends_with("apps"))
        .unwrap();
    assert_eq!(apps["images"][0]["before"], "ghcr.io/org/app:1.0.0");
    assert_eq!(apps["images"][0]["after"], "1.2.3");
    assert!(o.has("MC082"), "{:?}", o.findings());
    let good = r
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["dir"].as_str().unwrap().ends_with("good"))
        .unwrap();
    assert_eq!(good["images"][0]["after"], "ghcr.io/org/app:1.2.3");
    assert!(o.has("MC081"));
    assert!(o.has("MC080"), "{:?}", o.findings());
}

#[test]
fn bad_input_is_a_finding_never_a_crash() {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("flux/images.yaml", IMAGES)]);
    let mut bin = vec![0u8, 159, 146, 150, 0xff, 0xfe];
    bin.extend_from_slice(format!("image: x # {M}\n").as_bytes());
    std::fs::write(d.path().join("bin.yaml"), &bin).unwrap();
    std::fs::write(d.path().join("random.png"), [0u8, 1, 2, 0xff]).unwrap();
    // symlink loop and a dangling symlink
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(d.path(), d.path().join("loop")).unwrap();
        std::os::unix::fs::symlink(d.path().join("nope.yaml"), d.path().join("dangling.yaml"))
            .unwrap();
        std::os::unix::fs::symlink(d.path().join("flux"), d.path().join("dir.yaml")).unwrap();
    }
    // a huge file (8 MiB) with one marker at the end
    let mut huge = deployment("          image: ghcr.io/org/app:1.0.0").into_bytes();
    let filler = "# padding padding padding padding padding padding padding padding\n";
    while huge.len() < 8 << 20 {
        huge.extend_from_slice(filler.as_bytes());
    }
    huge.extend_from_slice(format!("x: ghcr.io/org/app:1.0.0 # {M}\n").as_bytes());
    std::fs::write(d.path().join("huge.yaml"), &huge).unwrap();
    let o = run_in(d.path(), &[".", "-o", "json", "--set", SET]);
    assert!(
        o.at("MC023", "bin.yaml", 1),
        "{:?} {}",
        o.findings(),
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    let huge_change = o.json["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["file"] == "huge.yaml");
    assert!(huge_change, "{}", o.stdout);
}

#[test]
fn repository_clusters_tree() {
    // /work/main/clusters: the project's example Flux repository must lint clean.
    let clusters = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clusters");
    if !clusters.is_dir() {
        eprintln!("SKIPPED: {} absent", clusters.display());
        return;
    }
    let o = run_in(&clusters, &[".", "-o", "json"]);
    let errors: Vec<_> = o.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn from_cluster_errors_have_exit_codes() {
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[(
            "apps/web.yaml",
            &deployment(&format!("          image: ghcr.io/org/app:1.0.0 # {M}")),
        )],
    );
    // a kubeconfig the user named that does not exist: a kubeconfig error, exit 3 (shared rule)
    let o = run_in(
        d.path(),
        &[
            ".",
            "--from-cluster",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ],
    );
    assert_eq!(o.code, 3, "{}", o.stderr);
    // a cluster that refuses connections: API error, exit 3, no partial output
    let kc = d.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let o = run_in(
        d.path(),
        &[
            ".",
            "--from-cluster",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--request-timeout",
            "10s",
        ],
    );
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(o.stderr.contains("error:"), "{}", o.stderr);
    assert!(o.stdout.is_empty());
}
