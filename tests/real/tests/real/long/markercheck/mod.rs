//! Differential test: `kubectl markercheck --simulate` against the real
//! image-automation-controller v1.2.0 (tests/realcluster, built from its Go module), on our
//! Git server, with ImagePolicy `status.latestRef` written through the status subresource as
//! image-reflector-controller writes it (that controller does not reconcile these policies:
//! they carry the held shard's label, see [`realcluster::HELD_SHARD_LABEL`]).
//!
//! One repository per automation, many files per repository, one automation run each: the
//! controller clones, runs its setters over `spec.update.path`, commits and pushes once. The
//! test then checks out the parent commit, runs markercheck `--from-cluster --simulate -o json`
//! on it, applies each file's diff with `git apply`, and compares the result with the
//! controller's commit byte for byte (`git diff <commit>`).
//!
//! Inputs: generated layouts ([`layouts`], a seeded generator of our own; `IACDIFF_SEED`
//! overrides the seed, `IACDIFF_FILES` the count), our own fixtures ([`fixtures`]) and Flux's
//! setter fixtures from ../shared/oracle when that folder is present (read at run time, never
//! committed). Each file records its layout classes; the run prints, per class, how many files
//! markercheck claims exact and how many equal the controller's commit (`--nocapture`), and
//! `IACDIFF_SHOW=CLASS` prints the differences of that class.
//!
//! [`from_cluster`]: `--from-cluster` on a default cluster of its own.

mod from_cluster;
mod layouts;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use realcluster::testkit::condition;
use realcluster::{Cluster, HELD_SHARD_LABEL};
use serde_json::Value;

const BIN: &str = crate::bin!("kubectl-markercheck");

/// The default seed of the generated layouts.
const SEED: u64 = 16_05;
/// The default number of generated files.
const FILES: usize = 240;

/// The layout classes the simulation claims byte-exact. A file whose classes all appear here
/// must be claimed exact by markercheck and match the controller's commit byte for byte.
/// Classes left out are reported (claimed exact or not, equal or not) and held to the rule
/// every class is held to: a file claimed exact matches.
const EXACT: &[&str] = &[
    "kind-deployment",
    "kind-kustomization-images",
    "kind-helmrelease-values",
    "setter-image",
    "setter-tag",
    "setter-name",
    "setter-digest",
    "plain-value",
    "single-quoted",
    "double-quoted",
    "seq-wide",
    "seq-compact",
    "comment-line",
    "comment-spacing",
    "comment-after-key",
    "blank-line",
    "head-comment",
    "literal-block",
    "quoted-key",
    "trailing-spaces",
    "plain-non-strings",
    "block-seq-of-scalars",
    "unchanged-value",
    "multi-document",
    "leading-separator",
    "crlf",
    "trailing-blank-lines",
    "no-final-newline",
    "anchor-merge",
    "flow-seq",
    "flow-map",
    "empty-flow",
];

/// The layout classes the simulation does not claim byte-exact (markercheck must say
/// `exact: false` or be right anyway).
const NOT_MODELLED: &[&str] = &[
    "block-at-eof-without-newline",
    "flow-noncanonical",
    "flow-long",
    "folded-block",
    "blank-after-comment",
    "blank-before-comment",
    "blank-after-block",
    "head-comment-blank",
    "foot-comment",
    "indent-4",
    "kind-list",
    "block-marker",
    "anchored-marker",
    "empty-new-value",
    "separator-comment",
];

/// Our own fixtures (shapes of tests/realworld.rs and the exactness points of issue 16):
/// (path, classes, text). Markers name policies of [`layouts::NS`].
fn fixtures() -> Vec<layouts::Layout> {
    let m = |p: &str| format!("{{\"$imagepolicy\": \"{}:{p}\"}}", layouts::NS);
    let f = |path: &str, classes: &[&'static str], text: String| layouts::Layout {
        path: path.into(),
        text,
        classes: classes.iter().copied().collect(),
    };
    vec![
        f(
            "fixtures/multi-doc-crlf.yaml",
            &[
                "fixture",
                "crlf",
                "multi-document",
                "head-comment",
                "blank-line",
                "trailing-spaces",
            ],
            format!(
                "# Ünïcödé header — kept\r\n---\r\napiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: web   \r\n\r\n---\r\n# web app (日本語)\r\napiVersion: apps/v1\r\nkind: Deployment\r\nmetadata:\r\n  name: web\r\nspec:\r\n\r\n  template:\r\n    spec:\r\n      containers:\r\n      - name: web\r\n        image: ghcr.io/org/app:1.0.0   # {}\r\n---\r\n",
                m("app")
            ),
        ),
        f(
            "fixtures/kustomization.yaml",
            &[
                "fixture",
                "kind-kustomization-images",
                "single-quoted",
                "seq-wide",
            ],
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - deploy.yaml\nimages:\n  - name: app\n    newName: ghcr.io/org/app\n    newTag: 1.0.0 # {}\n  - name: quoted\n    newTag: '1.0.0' # {}\n",
                m("api:tag"),
                m("api:tag")
            ),
        ),
        f(
            "fixtures/blank-after-comment.yaml",
            &["fixture", "blank-after-comment"],
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: c\nspec:\n  # the pod\n\n  template:\n    spec:\n      containers:\n      - name: c\n        image: ghcr.io/org/app:1.0.0 # {}\n",
                m("app")
            ),
        ),
        f(
            "fixtures/blank-after-literal.yaml",
            &["fixture", "literal-block", "blank-after-block"],
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  run.sh: |\n    echo hi\n\n  image: ghcr.io/org/app:1.0.0 # {}\n",
                m("app")
            ),
        ),
        f(
            "fixtures/merge-key.yaml",
            &["fixture", "anchor-merge"],
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: m\nx-base: &base\n  imagePullPolicy: Always\nspec:\n  template:\n    spec:\n      containers:\n      - <<: *base\n        name: m\n        image: ghcr.io/org/app:1.0.0 # {}\n",
                m("app")
            ),
        ),
        f(
            "fixtures/cronjob-flow.yaml",
            &["fixture", "flow-seq", "double-quoted"],
            format!(
                "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: report\nspec:\n  schedule: \"0 * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n          - name: report\n            image: \"ghcr.io/org/app:1.0.0\" # {}\n            args: [\"--once\"]\n",
                m("job")
            ),
        ),
        f(
            "fixtures/block-at-eof.yaml",
            &[
                "fixture",
                "literal-block",
                "no-final-newline",
                "block-at-eof-without-newline",
            ],
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  image: ghcr.io/org/app:1.0.0 # {}\n  run.sh: |\n    echo one\n    echo two",
                m("app")
            ),
        ),
        f(
            "fixtures/kustomization-foot-comment.yaml",
            &["fixture", "kind-kustomization-images", "foot-comment"],
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- deploy.yaml\nimages:\n- name: app\n  newTag: 1.0.0 # {}\n# - name: other\n",
                m("app:tag")
            ),
        ),
        f(
            "fixtures/helmrelease.yaml",
            &["fixture", "kind-helmrelease-values"],
            format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\nspec:\n  chart:\n    spec:\n      chart: web\n      version: 1.x\n  values:\n    image:\n      repository: ghcr.io/org/old # {}\n      tag: 1.0.0 # {}\n",
                m("svc:name"),
                m("svc:tag")
            ),
        ),
    ]
}

/// What one automation run gave: the controller's commit, markercheck's report on the parent,
/// and the comparison.
struct Run {
    /// Files pushed (path -> layout).
    layouts: BTreeMap<String, layouts::Layout>,
    /// `git diff --name-status parent commit` of the controller's commit: path -> A/M/D.
    iac_changed: BTreeMap<String, char>,
    /// markercheck `-o json` report.
    report: Value,
    /// Files whose markercheck result differs from the controller's commit (`git diff
    /// --name-only <commit>` after applying the simulated diffs).
    differs: BTreeSet<String>,
    /// Per differing file: `git diff <commit> -- file` (what markercheck would have to change
    /// to match).
    diff_text: BTreeMap<String, String>,
    /// Diffs `git apply` refused: path -> git's message.
    apply_failed: BTreeMap<String, String>,
    /// The controller's commit: author line and message.
    commit_meta: String,
}

impl Run {
    /// markercheck's change entry for `path`.
    fn change(&self, path: &str) -> Option<&Value> {
        self.report["changes"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["file"] == path))
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.autocrlf=false",
            "-c",
            "advice.detachedHead=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The cluster of this group, with image-automation-controller running
/// ([`realcluster::ClusterOptions::image_automation_controller`]; image-reflector-controller
/// does not run).
fn cluster() -> realcluster::Lease {
    static C: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::cluster_with(&C, || realcluster::ClusterOptions {
        image_automation_controller: true,
        ..Default::default()
    })
}

/// ImagePolicies `policies` in `ns` with `status.latestRef` as image-reflector-controller
/// writes it (internal/controller/imagepolicy_controller.go: `LatestRef = &ImageRef{Name,
/// Tag, Digest}`), through the status subresource; labelled with the held shard's key so no
/// image-reflector-controller of this cluster reconciles them.
fn policies(c: &Cluster, ns: &str, policies: &[(&str, &str, &str, &str)]) {
    for (name, image, tag, digest) in policies {
        c.apply_yaml(&format!(
            "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: {name}\n  namespace: {ns}\n  labels: {{{HELD_SHARD_LABEL}: iacdiff}}\nspec:\n  imageRepositoryRef: {{name: {name}}}\n  policy: {{semver: {{range: '>=0.0.0'}}}}\n"
        ))
        .unwrap();
        let mut latest = serde_json::json!({"name": image, "tag": tag});
        if !digest.is_empty() {
            latest["digest"] = Value::from(*digest);
        }
        let full = if digest.is_empty() {
            format!("{image}:{tag}")
        } else {
            format!("{image}:{tag}@{digest}")
        };
        let status = serde_json::json!({"status": {
            "observedGeneration": 1, "latestImage": full, "latestRef": latest}});
        c.kubectl(&[
            "-n",
            ns,
            "patch",
            "imagepolicy",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ])
        .unwrap();
    }
}

/// Pushes `files` to `org/<repo>`, creates a GitRepository and an ImageUpdateAutomation
/// (`update.path: ./<path>`) in `ns`, waits for the controller's commit, and compares it with
/// markercheck's simulation of the parent commit.
fn automate(c: &Cluster, ns: &str, repo: &str, path: &str, files: Vec<layouts::Layout>) -> Run {
    let full = format!("org/{repo}");
    c.git().create_repo(&full, "main").unwrap();
    let changes: Vec<(&str, &str)> = files
        .iter()
        .map(|l| (l.path.as_str(), l.text.as_str()))
        .collect();
    let parent = c.push(repo, &changes, "layouts").unwrap();
    let url = c.git().url_http(&full);
    c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: {repo}\n  namespace: {ns}\n  labels: {{{HELD_SHARD_LABEL}: iacdiff}}\nspec: {{interval: 1h, url: \"{url}\", ref: {{branch: main}}}}\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata:\n  name: {repo}\n  namespace: {ns}\nspec:\n  interval: 1h\n  sourceRef: {{kind: GitRepository, name: {repo}}}\n  git:\n    commit:\n      author: {{name: fluxcdbot, email: fluxcdbot@users.noreply.github.com}}\n  update: {{path: ./{path}, strategy: Setters}}\n"
    ))
    .unwrap();
    // the controller's first run (a retry after a transient Git or API error is its own
    // business: the deadline's message carries its last Ready condition)
    let deadline = Instant::now() + Duration::from_secs(180);
    let commit = loop {
        let head = c.git().head(&full, "main").unwrap();
        if head != parent {
            break head;
        }
        if Instant::now() > deadline {
            let iua = c.get_json(&["-n", ns, "get", "imageupdateautomation", repo]);
            panic!(
                "no commit from image-automation-controller after 180 s; ImageUpdateAutomation {ns}/{repo} Ready: {}",
                condition(&iua, "Ready")
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    };

    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("clone");
    git(dir.path(), &["clone", "-q", &url, &clone.to_string_lossy()]);
    // the controller's first commit on top of the layouts (a second one would be a finding)
    let first = git(
        &clone,
        &[
            "rev-list",
            "--ancestry-path",
            &format!("{parent}..{commit}"),
        ],
    );
    let first: Vec<&str> = first.lines().collect();
    assert_eq!(
        first.len(),
        1,
        "the controller made {} commits on top of the layouts (not idempotent?)",
        first.len()
    );
    let commit = first[0].to_owned();
    let commit_meta = git(&clone, &["log", "-1", "--format=%an <%ae>%n%B", &commit]);
    let iac_changed = git(
        &clone,
        &["diff", "--no-renames", "--name-status", &parent, &commit],
    )
    .lines()
    .filter_map(|l| {
        let (st, p) = l.split_once('\t')?;
        Some((p.to_owned(), st.chars().next()?))
    })
    .collect();
    git(&clone, &["checkout", "-q", &parent]);

    let out = Command::new(BIN)
        .current_dir(&clone)
        .args([path, "--from-cluster", "--simulate", "-o", "json", "-n", ns])
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "markercheck -o json: {e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "markercheck exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );

    let mut apply_failed = BTreeMap::new();
    for ch in report["changes"].as_array().unwrap() {
        let file = ch["file"].as_str().unwrap();
        let patch = dir.path().join("change.patch");
        std::fs::write(&patch, ch["diff"].as_str().unwrap()).unwrap();
        let st = Command::new("git")
            .arg("-C")
            .arg(&clone)
            .args(["apply", "--whitespace=nowarn"])
            .arg(&patch)
            .output()
            .unwrap();
        if !st.status.success() {
            apply_failed.insert(
                file.to_owned(),
                String::from_utf8_lossy(&st.stderr).into_owned(),
            );
        }
    }
    let differs: BTreeSet<String> = git(&clone, &["diff", "--no-renames", "--name-only", &commit])
        .lines()
        .map(str::to_owned)
        .collect();
    let diff_text = differs
        .iter()
        .map(|f| {
            (
                f.clone(),
                git(&clone, &["diff", "--no-renames", &commit, "--", f]),
            )
        })
        .collect();
    Run {
        layouts: files.into_iter().map(|l| (l.path.clone(), l)).collect(),
        iac_changed,
        report,
        differs,
        diff_text,
        apply_failed,
        commit_meta,
    }
}

fn seed() -> u64 {
    std::env::var("IACDIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED)
}

/// The generated layouts and our fixtures, one automation run.
fn generated() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let c = &cluster();
        c.kubectl(&["create", "namespace", layouts::NS]).unwrap();
        let pols: Vec<(&str, &str, &str, &str)> = layouts::POLICIES
            .iter()
            .map(|p| (p.name, p.image, p.tag, p.digest))
            .collect();
        policies(c, layouts::NS, &pols);
        let n = std::env::var("IACDIFF_FILES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(FILES);
        let seed = seed();
        eprintln!("iac_real: {n} generated layouts, seed {seed}");
        let mut files = layouts::generate(seed, n, "fleet/layouts");
        for mut f in fixtures() {
            f.path = format!("fleet/{}", f.path);
            files.push(f);
        }
        automate(c, layouts::NS, "layouts", "fleet", files)
    })
}

/// Per class: (files, claimed exact, equal to the controller's commit).
fn class_table(run: &Run) -> BTreeMap<&'static str, (usize, usize, usize)> {
    let mut t: BTreeMap<&'static str, (usize, usize, usize)> = BTreeMap::new();
    for (path, l) in &run.layouts {
        let exact = run.change(path).is_none_or(|c| c["exact"] == true);
        let equal = !run.differs.contains(path);
        for c in &l.classes {
            let e = t.entry(c).or_default();
            e.0 += 1;
            e.1 += usize::from(exact);
            e.2 += usize::from(equal);
        }
    }
    t
}

fn print_table(run: &Run) {
    eprintln!(
        "{:<28} {:>5} {:>13} {:>14}",
        "class", "files", "claimed exact", "equal to IAC"
    );
    for (c, (n, x, e)) in class_table(run) {
        eprintln!("{c:<28} {n:>5} {x:>13} {e:>14}");
    }
    // (a file markercheck does not rewrite counts as claimed exact above)
    let rewritten: Vec<&Value> = run.report["changes"].as_array().unwrap().iter().collect();
    eprintln!(
        "{} files, {} rewritten by markercheck: {} claimed exact, {} equal to the controller's commit; the controller modified {} and added {} (List items)",
        run.layouts.len(),
        rewritten.len(),
        rewritten.iter().filter(|c| c["exact"] == true).count(),
        rewritten
            .iter()
            .filter(|c| !run.differs.contains(c["file"].as_str().unwrap_or("")))
            .count(),
        run.iac_changed.values().filter(|s| **s == 'M').count(),
        run.iac_changed.values().filter(|s| **s == 'A').count()
    );
}

/// Every file markercheck claims exact is byte for byte what the controller committed, and
/// every file whose classes are all in [`EXACT`] is claimed exact.
#[test]
fn exact_claims_match_the_controllers_commit_byte_for_byte() {
    let run = generated();
    print_table(run);
    // IACDIFF_SHOW=CLASS prints how markercheck's result differs from the commit for every
    // differing file of that class (`--nocapture`), to study a class not modelled yet
    if let Ok(show) = std::env::var("IACDIFF_SHOW") {
        for (path, l) in &run.layouts {
            if l.classes.contains(show.as_str()) && run.differs.contains(path) {
                eprintln!("{path} {:?}\n{}", l.classes, run.diff_text[path]);
            }
        }
    }
    let mut wrong = Vec::new();
    for (path, l) in &run.layouts {
        let ch = run.change(path);
        let claimed_exact = ch.is_none_or(|c| c["exact"] == true);
        let equal = !run.differs.contains(path);
        if claimed_exact && !equal {
            wrong.push(format!(
                "{path} {:?}: claimed exact, differs from the controller's commit:\n{}{}",
                l.classes,
                run.diff_text.get(path).map(String::as_str).unwrap_or(""),
                run.apply_failed.get(path).map(String::as_str).unwrap_or("")
            ));
        }
        let modelled = l
            .classes
            .iter()
            .all(|c| EXACT.contains(c) || *c == "fixture");
        if modelled && !claimed_exact {
            wrong.push(format!(
                "{path} {:?}: every class is one the model claims, but not claimed exact: {}",
                l.classes,
                ch.map(|c| c["caveats"].to_string()).unwrap_or_default()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} files:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// markercheck's verdict "would rewrite" names exactly the files the controller changed
/// (items of a `kind: List` aside: see the next test).
#[test]
fn the_files_markercheck_would_rewrite_are_the_files_the_controller_changed() {
    let run = generated();
    let mc: BTreeSet<&str> = run.report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["file"].as_str().unwrap())
        .collect();
    let iac: BTreeSet<&str> = run
        .iac_changed
        .iter()
        .filter(|(_, st)| **st == 'M')
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(mc, iac, "{}", run.commit_meta);
}

/// Items of a `kind: List` with a changed marker: the controller writes every item of every
/// List under `spec.update.path` to a file of its own, `<update.path>/<kind>_<name>.yaml`,
/// which markercheck names in MC024 ("this item: ..."), and leaves the List files as they were.
#[test]
fn list_items_go_to_the_paths_mc024_names() {
    let run = generated();
    let added: BTreeSet<String> = run
        .iac_changed
        .iter()
        .filter(|(_, st)| **st == 'A')
        .map(|(p, _)| p.clone())
        .collect();
    let named: BTreeSet<String> = run.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "MC024")
        .filter_map(|f| {
            let m = f["message"].as_str()?;
            let item = m.split("(this item: ").nth(1)?.split(')').next()?;
            Some(format!("fleet/{item}"))
        })
        .collect();
    assert!(!added.is_empty(), "no List item was written");
    assert_eq!(added, named);
    for (p, l) in &run.layouts {
        if l.classes.contains("kind-list") {
            assert!(
                !run.iac_changed.contains_key(p),
                "{p}: a List file changed in place"
            );
        }
    }
}

/// The controller's commit: author from the ImageUpdateAutomation, the default message.
#[test]
fn the_commit_is_the_controllers() {
    let run = generated();
    assert_eq!(
        run.commit_meta.trim_end(),
        "fluxcdbot <fluxcdbot@users.noreply.github.com>\nUpdate from image update automation"
    );
}

fn oracle() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/oracle/image-automation-controller-setters");
    p.is_dir().then_some(p)
}

/// Flux's own setter fixtures (internal/update/testdata/setters), read from ../shared/oracle:
/// the real controller's commit equals markercheck's simulation.
#[test]
fn flux_setter_fixtures_match() {
    let Some(o) = oracle() else {
        eprintln!("SKIPPED: ../shared/oracle is absent");
        return;
    };
    let c = &cluster();
    let ns = "automation-ns";
    c.kubectl(&["create", "namespace", ns]).unwrap();
    let pols = std::fs::read_to_string(o.join("policies.yaml")).unwrap();
    let mut ps = Vec::new();
    for doc in pols.split("\n---\n") {
        let field = |k: &str| {
            doc.lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{k}: ")))
                .unwrap_or("")
                .to_owned()
        };
        ps.push((field("name"), field("tag"), field("digest"), {
            // latestRef.name is the second `name:` (the first is metadata.name)
            doc.lines()
                .filter_map(|l| l.trim().strip_prefix("name: "))
                .nth(1)
                .unwrap_or("")
                .to_owned()
        }));
    }
    let refs: Vec<(&str, &str, &str, &str)> = ps
        .iter()
        .map(|(n, t, d, i)| (n.as_str(), i.as_str(), t.as_str(), d.as_str()))
        .collect();
    policies(c, ns, &refs);
    let files: Vec<layouts::Layout> = std::fs::read_dir(o.join("original"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            layouts::Layout {
                path: format!("oracle/{}", e.file_name().to_string_lossy()),
                text: std::fs::read_to_string(e.path()).unwrap(),
                classes: ["oracle"].into_iter().collect(),
            }
        })
        .collect();
    let run = automate(c, ns, "oracle", "oracle", files);
    assert!(run.apply_failed.is_empty(), "{:?}", run.apply_failed);
    assert!(run.differs.is_empty(), "{:?}", run.diff_text);
    assert_eq!(run.iac_changed.len(), 3, "{:?}", run.iac_changed);
}

/// Every layout class (listed or not in [`EXACT`]) occurs in at least three generated files
/// for the default seed or in a fixture, and the same seed gives the same bytes. `IACDIFF_DUMP=DIR` writes the
/// layouts there (to run markercheck on them by hand).
#[test]
fn the_generator_is_deterministic_and_covers_every_class() {
    let a = layouts::generate(seed(), FILES, "fleet/layouts");
    let b = layouts::generate(seed(), FILES, "fleet/layouts");
    assert!(
        a.iter()
            .zip(&b)
            .all(|(x, y)| x.text == y.text && x.path == y.path)
    );
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    let fixtures = fixtures();
    for l in a.iter().chain(&fixtures) {
        for c in &l.classes {
            *count.entry(c).or_default() += 1;
        }
    }
    for c in EXACT.iter().chain(NOT_MODELLED) {
        // a class the generator rarely composes has a fixture of its own
        assert!(
            count.get(c).is_some_and(|n| *n >= 3) || fixtures.iter().any(|f| f.classes.contains(c)),
            "class {c}: {count:?}"
        );
    }
    for c in count.keys() {
        assert!(
            EXACT.contains(c) || NOT_MODELLED.contains(c) || *c == "fixture",
            "class {c} is in no list"
        );
    }
    if let Some(d) = std::env::var_os("IACDIFF_DUMP") {
        for l in &a {
            let p = Path::new(&d).join(&l.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, &l.text).unwrap();
        }
    }
}
