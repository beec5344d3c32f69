//! Issue 16: shapes found on real fleets, each as our own small fixture tree run through the
//! real binary (false positives, hangs, exactness, output paths).

mod common;
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};

const M: &str = r#"{"$imagepolicy": "flux-system:app"}"#;

fn img(comment: &str) -> String {
    deployment(&format!(
        "          image: ghcr.io/org/app:1.0.0 # {comment}"
    ))
}

/// Run the binary and fail (killing it) if it has not finished after 120 s: a hang is a
/// failure, never a stuck test run.
fn run_bounded(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-markercheck"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("kubectl-markercheck {args:?} hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success());
}

#[test]
fn fifo_in_tree_or_named_is_skipped_with_a_note() {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("apps/web.yaml", &img(M))]);
    mkfifo(&d.path().join("apps/pipe.yaml"));
    std::os::unix::fs::symlink("pipe.yaml", d.path().join("apps/link.yaml")).unwrap();
    let (code, out, err) = run_bounded(d.path(), &[".", "-o", "json", "--set", SET]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("apps/pipe.yaml: skipped, a FIFO (named pipe) is not a regular file"),
        "{err}"
    );
    assert!(err.contains("apps/link.yaml: skipped"), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["stats"]["markers"], 1, "{out}");
    // named on the command line
    let (code, _, err) = run_bounded(d.path(), &["apps/pipe.yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("note: apps/pipe.yaml: skipped, a FIFO"),
        "{err}"
    );
}

#[test]
fn mc010_namespace_from_the_including_kustomization() {
    // the ImagePolicy has no metadata.namespace: kustomize gives it `flux-system`
    let policy = "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: web\nspec:\n  imageRepositoryRef:\n    name: web\n";
    let files = [
        (
            "infra/kustomization.yaml",
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: team\nresources:\n  - images\n",
        ),
        (
            "infra/images/kustomization.yaml",
            "resources:\n  - policy.yaml\n",
        ),
        ("infra/images/policy.yaml", policy),
        ("apps/web.yaml", &img(r#"{"$imagepolicy": "team:web"}"#)),
    ];
    let o = lint(&files, &[]);
    assert!(!o.has("MC010"), "{:?}", o.findings());
    // without the kustomization the policy lands in --default-namespace (flux-system): a
    // real MC010 for team:web
    let o = lint(&[files[2], files[3]], &[]);
    assert!(o.at("MC010", "apps/web.yaml", 11), "{:?}", o.findings());
    // two builds giving two namespaces: unknown, said so, not an error
    let o = lint(
        &[
            (
                "a/kustomization.yaml",
                "namespace: flux-system\nresources:\n  - ../p/policy.yaml\n",
            ),
            (
                "b/kustomization.yaml",
                "namespace: team\nresources:\n  - ../p/policy.yaml\n",
            ),
            ("p/policy.yaml", policy),
            (
                "apps/web.yaml",
                &img(r#"{"$imagepolicy": "flux-system:web"}"#),
            ),
        ],
        &[],
    );
    let f = o.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "MC010")
        .cloned()
        .unwrap();
    assert_eq!(f["severity"], "info", "{f}");
    assert!(
        f["message"].as_str().unwrap().contains("flux-system, team"),
        "{f}"
    );
    assert_eq!(o.code, 0, "{:?}", o.findings());
}

fn job() -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: apps\nspec:\n  template:\n    spec:\n      containers:\n        - name: m\n          image: ghcr.io/org/app:1.0.0 # {M}\n"
    )
}

fn flux_ks(path: &str, force: bool) -> String {
    format!(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: {path}\n  prune: true\n  force: {force}\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
    )
}

fn mc040(o: &Out) -> serde_json::Value {
    o.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "MC040")
        .cloned()
        .unwrap_or_default()
}

#[test]
fn mc040_job_under_force_is_not_an_error() {
    let j = job();
    let forced = flux_ks("./apps", true);
    let o = lint(
        &[("apps/job.yaml", &j), ("clusters/apps.yaml", &forced)],
        &[],
    );
    let f = mc040(&o);
    assert_eq!(f["severity"], "info", "{f}");
    assert!(f["message"].as_str().unwrap().contains("spec.force: true"));
    assert_eq!(o.code, 0, "{:?}", o.findings());
    // applied without force: the apply fails
    let plain = flux_ks("./apps", false);
    let o = lint(
        &[("apps/job.yaml", &j), ("clusters/apps.yaml", &plain)],
        &[],
    );
    let f = mc040(&o);
    assert_eq!(f["severity"], "error", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("flux-system/apps applies it without spec.force"),
        "{f}"
    );
    // the kustomization.yaml of ./apps does not list the Job: that Kustomization does not apply it
    let o = lint(
        &[
            ("apps/job.yaml", &j),
            ("apps/kustomization.yaml", "resources:\n  - other.yaml\n"),
            ("clusters/apps.yaml", &plain),
        ],
        &[],
    );
    let f = mc040(&o);
    assert_eq!(f["severity"], "warning", "{f}");
    // no Kustomization in the tree: say so instead of claiming the apply fails
    let o = lint(&[("apps/job.yaml", &j)], &[]);
    let f = mc040(&o);
    assert_eq!(f["severity"], "warning", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("no Flux Kustomization in this tree applies this file"),
        "{f}"
    );
}

#[test]
fn mc022_only_for_a_file_named_explicitly() {
    let sed = format!("s|ghcr.io/org/app:.*|ghcr.io/org/app:1.2.3| # {M}\n");
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("flux/images.yaml", IMAGES),
            ("scripts/bump.txt", &sed),
            ("apps/web.yaml", &img(M)),
        ],
    );
    let o = run_in(d.path(), &[".", "-o", "json", "--set", SET]);
    assert!(!o.has("MC022"), "{:?}", o.findings());
    assert_eq!(o.code, 0);
    let o = run_in(d.path(), &["scripts/bump.txt", "-o", "json", "--set", SET]);
    assert!(o.at("MC022", "scripts/bump.txt", 1), "{:?}", o.findings());
}

#[test]
fn mc023_not_on_yaml_go_yaml_reads() {
    // go-yaml ends an alias name at `:` (scannerc.go yaml_parser_scan_anchor)
    let alias = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nx-names:\n  app: &app web\n  ref:\n    *app: used\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: ghcr.io/org/app:1.0.0 # {M}\n"
    );
    let o = lint(&[("apps/web.yaml", &alias)], &[]);
    assert!(!o.has("MC023"), "{:?}", o.findings());
    assert_eq!(
        o.json["changes"][0]["changes"][0]["line"], 15,
        "{}",
        o.stdout
    );
    // 300 levels of nesting (granit's default limit is 255, go-yaml's 10,000)
    let mut deep = String::from("spec:\n");
    for i in 0..300 {
        deep.push_str(&"  ".repeat(i + 1));
        deep.push_str("n:\n");
    }
    deep.push_str(&"  ".repeat(301));
    deep.push_str(&format!("image: ghcr.io/org/app:1.0.0 # {M}\n"));
    let o = lint(&[("apps/deep.yaml", &deep)], &[]);
    assert!(!o.has("MC023"), "{:?}", o.findings());
    assert_eq!(o.json["stats"]["markers"], 1);
    // 5,000 levels of flow nesting: read, no stack overflow
    let flow = format!(
        "a: {}x{}\nimage: ghcr.io/org/app:1.0.0 # {M}\n",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let o = lint(&[("apps/flow.yaml", &flow)], &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(!o.has("MC023"), "{:?}", o.findings());
    // past go-yaml's limit it is a problem file, as for Flux
    let flow = format!(
        "a: {}x{}\nimage: ghcr.io/org/app:1.0.0 # {M}\n",
        "[".repeat(10_050),
        "]".repeat(10_050)
    );
    let o = lint(&[("apps/flow.yaml", &flow)], &[]);
    assert!(o.has("MC023"), "{:?}", o.findings());
}

fn gotk(version: &str) -> String {
    format!(
        "# This manifest was generated by flux. DO NOT EDIT.\n# Flux Version: {version}\n# Components: source-controller,kustomize-controller\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: flux-system\n  labels:\n    app.kubernetes.io/version: {version}\n"
    )
}

fn finding(o: &Out, rule: &str) -> serde_json::Value {
    o.json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == rule)
        .cloned()
        .unwrap_or_default()
}

#[test]
fn mc050_mc051_worded_for_the_pinned_flux() {
    let beta2 = "apiVersion: image.toolkit.fluxcd.io/v1beta2\nkind: ImagePolicy\nmetadata:\n  name: old\n  namespace: flux-system\nspec:\n  imageRepositoryRef:\n    name: app\n";
    // Flux v2.6.3 still serves v1beta2: not an error, the upgrade is named
    let o = lint(
        &[
            (
                "clusters/prod/flux-system/gotk-components.yaml",
                &gotk("v2.6.3"),
            ),
            ("flux/old.yaml", beta2),
        ],
        &[],
    );
    let f = finding(&o, "MC051");
    assert_eq!(f["severity"], "info", "{f}");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("Flux v2.6.3 pinned in this repository serves"),
        "{m}"
    );
    assert!(
        m.contains("image-reflector-controller v1.2.0 (Flux v2.9.0)"),
        "{m}"
    );
    // Flux v2.9.0 no longer serves it
    let o = lint(
        &[
            (
                "clusters/prod/flux-system/gotk-components.yaml",
                &gotk("v2.9.0"),
            ),
            ("flux/old.yaml", beta2),
        ],
        &[],
    );
    let f = finding(&o, "MC051");
    assert_eq!(f["severity"], "error", "{f}");
    assert!(f["message"].as_str().unwrap().contains("pins Flux v2.9.0"));
    // no pinned version: "fails from Flux X"
    let o = lint(&[("flux/old.yaml", beta2)], &[]);
    let f = finding(&o, "MC051");
    assert_eq!(f["severity"], "warning", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("the apply fails from Flux v2.9.0"),
        "{f}"
    );
    // the automation controller for ImageUpdateAutomation, and MC050's template field
    let iua = "apiVersion: image.toolkit.fluxcd.io/v1beta1\nkind: ImageUpdateAutomation\nmetadata:\n  name: auto\n  namespace: flux-system\nspec:\n  git:\n    commit:\n      messageTemplate: '{{range .Updated.Images}}{{.}}{{end}}'\n  update:\n    path: ./\n    strategy: Setters\n";
    let o = lint(
        &[
            (
                "clusters/prod/flux-system/gotk-components.yaml",
                &gotk("v2.6.3"),
            ),
            ("flux/auto.yaml", iua),
        ],
        &[],
    );
    let f = finding(&o, "MC051");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("image-automation-controller v1.0.0 (Flux v2.7.0)"),
        "{f}"
    );
    let f = finding(&o, "MC050");
    assert_eq!(f["severity"], "info", "{f}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("works on the Flux v2.6.3")
    );
}

#[test]
fn mc013_outside_a_git_checkout_uses_the_tree_root() {
    let auto = "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata:\n  name: auto\n  namespace: flux-system\nspec:\n  update:\n    path: ./apps\n    strategy: Setters\n";
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("fleet/flux/images.yaml", IMAGES),
            ("fleet/flux/auto.yaml", auto),
            ("fleet/apps/web.yaml", &img(M)),
        ],
    );
    let fleet = d.path().join("fleet");
    let o = run_in(&fleet, &["apps", "flux", "-o", "json", "--set", SET]);
    assert!(!o.has("MC013"), "{:?}", o.findings());
    assert!(
        o.stderr.contains("no .git above apps, flux: spec.update.path and Kustomization spec.path are taken relative to ."),
        "{}",
        o.stderr
    );
    assert_eq!(o.json["changes"].as_array().unwrap().len(), 1);
}

/// Run from a parent directory without `.git` (`markercheck DIR`), the repository root is DIR
/// itself, never the current directory (issue 27: a thousand MC013 "outside every
/// spec.update.path" from the parent), and the summary says which root and why.
#[test]
fn without_git_the_root_is_path_itself_not_the_current_directory() {
    let auto = "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata:\n  name: auto\n  namespace: flux-system\nspec:\n  update:\n    path: ./apps\n    strategy: Setters\n";
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("fleet/flux/images.yaml", IMAGES),
            ("fleet/flux/auto.yaml", auto),
            ("fleet/apps/web.yaml", &img(M)),
        ],
    );
    let o = run_in(d.path(), &["fleet", "-o", "json", "--set", SET]);
    assert!(!o.has("MC013"), "{:?}", o.findings());
    assert_eq!(o.json["changes"].as_array().unwrap().len(), 1);
    let o = run_in(d.path(), &["fleet", "--set", SET]);
    assert!(
        o.stderr
            .contains("repository root fleet (PATH itself: no .git above it)"),
        "{}",
        o.stderr
    );
    // Run at the git root with no PATH (trial3: "repository root . (git root of )").
    std::fs::create_dir(d.path().join("fleet/.git")).unwrap();
    let o = run_in(&d.path().join("fleet"), &["--set", SET]);
    assert!(
        o.stderr.contains("repository root . (git root of .)"),
        "{}",
        o.stderr
    );
}

#[test]
fn empty_and_binary_files_are_not_yaml() {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("e.yaml", ""), ("apps/web.yaml", &img(M))]);
    std::fs::write(d.path().join("apps/bin.yaml"), b"\x00\x01\x02").unwrap();
    let o = run_in(d.path(), &["e.yaml", "-o", "json"]);
    assert!(o.at("MC026", "e.yaml", 0), "{:?}", o.findings());
    assert_eq!(finding(&o, "MC026")["severity"], "info");
    let o = run_in(d.path(), &[".", "-o", "json"]);
    assert!(o.at("MC026", "apps/bin.yaml", 0), "{:?}", o.findings());
    // an empty .yaml in a tree is common (placeholders) and not reported
    assert!(!o.findings().iter().any(|f| f.1 == "e.yaml"));
}

#[test]
fn single_file_argument_path_is_not_doubled() {
    let d = tempfile::tempdir().unwrap();
    write_tree(d.path(), &[("dir/x.yaml", &img(M))]);
    let o = run_in(
        d.path(),
        &["dir/x.yaml", "-o", "json", "--max-file-size", "10"],
    );
    let files: Vec<String> = o.findings().into_iter().map(|f| f.1).collect();
    assert!(files.contains(&"dir/x.yaml".to_string()), "{files:?}");
    assert!(files.iter().all(|f| !f.contains("x.yaml/")), "{files:?}");
}

/// The `--simulate` diff of a file at `rel` (under `d`) applies with `git apply` and with
/// `patch -p1` from `from`.
fn diff_applies(d: &Path, run_dir: &Path, from: &Path, arg: &str) {
    let o = run_in(run_dir, &[arg, "-o", "json", "--set", SET]);
    let diff = o.json["changes"][0]["diff"].as_str().unwrap().to_string();
    let want = o.json["changes"][0]["changes"][0]["new"]
        .as_str()
        .unwrap()
        .to_string();
    let target = if Path::new(arg).is_absolute() {
        Path::new(arg).to_path_buf()
    } else {
        d.join(arg)
    };
    let before = std::fs::read_to_string(&target).unwrap();
    for tool in [
        &["git", "apply", "--unsafe-paths", "-p1", "-"][..],
        &["patch", "-p1"][..],
    ] {
        std::fs::write(&target, &before).unwrap();
        let mut c = Command::new(tool[0])
            .args(&tool[1..])
            .current_dir(from)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin.take().unwrap().write_all(diff.as_bytes()).unwrap();
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{tool:?} from {}: {}\n{diff}",
            from.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let after = std::fs::read_to_string(&target).unwrap();
        assert!(after.contains(&want), "{tool:?}: {after}");
    }
    std::fs::write(&target, &before).unwrap();
}

#[test]
fn diff_headers_apply_with_git_apply_and_patch() {
    let d = tempfile::tempdir().unwrap();
    write_tree(
        d.path(),
        &[
            ("flux/images.yaml", IMAGES),
            ("my apps/web app.yaml", &img(M)),
        ],
    );
    // a path with blanks, relative
    diff_applies(d.path(), d.path(), d.path(), "my apps/web app.yaml");
    // an absolute path (outside the current directory): the diff names it relative to /
    let elsewhere = tempfile::tempdir().unwrap();
    let abs = d.path().join("my apps/web app.yaml");
    let o = run_in(
        elsewhere.path(),
        &[abs.to_str().unwrap(), "-o", "json", "--set", SET],
    );
    let diff = o.json["changes"][0]["diff"].as_str().unwrap();
    assert!(
        diff.starts_with("--- a/") && !diff.contains("a//"),
        "{diff}"
    );
    diff_applies(
        d.path(),
        elsewhere.path(),
        Path::new("/"),
        abs.to_str().unwrap(),
    );
}

/// The `--simulate` diff of a CRLF file applies to the file as it is (every line, CRLF -> LF)
/// with `git apply` and `patch -p1`, and gives exactly the bytes `--write` writes (it was a
/// diff of the LF text that applied to nothing: the differential test, layout class crlf).
#[test]
fn a_crlf_files_diff_applies_and_gives_the_written_bytes() {
    let d = tempfile::tempdir().unwrap();
    let crlf = img(M).replace('\n', "\r\n");
    write_tree(
        d.path(),
        &[("flux/images.yaml", IMAGES), ("apps/web.yaml", &crlf)],
    );
    let o = run_in(d.path(), &["apps/web.yaml", "-o", "json", "--set", SET]);
    let diff = o.json["changes"][0]["diff"].as_str().unwrap().to_string();
    let w = run_in(d.path(), &["apps/web.yaml", "--write", "--set", SET]);
    assert_eq!(w.code, 0, "{}", w.stderr);
    let written = std::fs::read(d.path().join("apps/web.yaml")).unwrap();
    assert!(!written.contains(&b'\r'));
    for tool in [&["git", "apply", "-"][..], &["patch", "-p1"][..]] {
        std::fs::write(d.path().join("apps/web.yaml"), &crlf).unwrap();
        let mut c = Command::new(tool[0])
            .args(&tool[1..])
            .current_dir(d.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin.take().unwrap().write_all(diff.as_bytes()).unwrap();
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{tool:?}: {}\n{diff}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read(d.path().join("apps/web.yaml")).unwrap(),
            written,
            "{tool:?}"
        );
    }
}

/// A closed stderr (`kubectl markercheck 2>&1 | head -0`) is not a crash: the verdict's exit
/// code stays 0/1, never Rust's panic code 101 (notes go to stderr and ignore EPIPE).
#[test]
fn a_closed_stderr_is_not_a_panic() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clusters");
    let (r, w) = std::io::pipe().unwrap();
    drop(r);
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-markercheck"))
        .arg(&repo)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(w)
        .status()
        .unwrap();
    assert!(
        matches!(out.code(), Some(0 | 1)),
        "exit {:?} with a closed stderr",
        out.code()
    );
}
