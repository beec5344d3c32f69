//! `kubectl-gitops-pull` on the real control plane with the real image-automation-controller
//! (tests/realcluster, `ClusterOptions::image_automation_controller`), on the harness's Git
//! server: the automation's own commit is what the checkout brings home.
//!
//! As in markercheck's differential test (long::markercheck), the GitRepository and the
//! ImagePolicy carry the held shard's label ([`HELD_SHARD_LABEL`]): no source-controller or
//! image-reflector-controller of this cluster reconciles them, so `status.latestRef` is written
//! through the status subresource as image-reflector-controller writes it, and the real
//! image-automation-controller clones `spec.url` with the GitRepository's `secretRef`
//! credentials, runs its setters, commits as `spec.git.commit.author` and pushes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use realcluster::testkit::condition;
use realcluster::{Cluster, HELD_SHARD_LABEL};
use serde_json::Value;

const BIN: &str = crate::bin!("kubectl-gitops-pull");

fn cluster() -> realcluster::Lease {
    static C: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::cluster_with(&C, || realcluster::ClusterOptions {
        image_automation_controller: true,
        ..Default::default()
    })
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=operator",
            "-c",
            "user.email=operator@example.com",
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
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

const USER: &str = "fleet-reader";
const TOKEN: &str = "s3cr3t-pull-token";

fn web(tag: &str, ns: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: ghcr.io/org/web:{tag} # {{\"$imagepolicy\": \"{ns}:web\"}}\n"
    )
}

/// A fleet `org/<ns>` on the Git server's HTTPS listener behind basic auth (the
/// GitRepository's `secretRef` holds the credential and the server's CA as `ca.crt`), its
/// GitRepository and an ImagePolicy `web` whose latest is 1.2.3, in namespace
/// `ns`. Returns (spec.url, the first commit's SHA).
fn fleet(c: &Cluster, ns: &str) -> (String, String) {
    let repo = format!("org/{ns}");
    c.git().create_repo(&repo, "main").unwrap();
    let parent = c
        .git()
        .commit(
            &repo,
            &[
                twin::git::Change::write("apps/web.yaml", web("1.0.0", ns)),
                twin::git::Change::write("README.md", "fleet\n"),
            ],
            "fleet",
        )
        .unwrap();
    c.git().set_auth(&repo, USER, &[TOKEN]).unwrap();
    let url = c.git().url_https(&repo);
    c.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
    ))
    .unwrap();
    // The credential and the server's private CA, as source-controller reads them.
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "fleet-creds", "namespace": ns},
        "stringData": {"username": USER, "password": TOKEN, "ca.crt": c.git().ca_pem()}});
    c.apply_yaml(&secret.to_string()).unwrap();
    c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: fleet\n  namespace: {ns}\n  labels: {{{HELD_SHARD_LABEL}: pull}}\nspec: {{interval: 1h, url: \"{url}\", ref: {{branch: main}}, secretRef: {{name: fleet-creds}}}}\n---\napiVersion: image.toolkit.fluxcd.io/v1\nkind: ImagePolicy\nmetadata:\n  name: web\n  namespace: {ns}\n  labels: {{{HELD_SHARD_LABEL}: pull}}\nspec:\n  imageRepositoryRef: {{name: web}}\n  policy: {{semver: {{range: '>=1.0.0'}}}}\n"
    ))
    .unwrap();
    let status = serde_json::json!({"status": {"observedGeneration": 1,
        "latestImage": "ghcr.io/org/web:1.2.3",
        "latestRef": {"name": "ghcr.io/org/web", "tag": "1.2.3"}}});
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "imagepolicy",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ])
    .unwrap();
    (url, parent)
}

/// A clone of `url` (with the credential in its origin URL, as an operator's token-in-URL
/// clone has it) checked out at `at`, on `main`.
fn clone_at(c: &Cluster, url: &str, at: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let authed = url.replacen("https://", &format!("https://{USER}:{TOKEN}@"), 1);
    // GIT_SSL_CAINFO, not http.sslCAInfo: an inherited GIT_SSL_CAINFO (these machines set it
    // to the system bundle) overrides the config, and the clone must trust the server's CA.
    let out = Command::new("git")
        .arg("-C")
        .arg(d.path())
        .args(["clone", "-q", &authed, "fleet"])
        .env("GIT_SSL_CAINFO", c.git().ca_file())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git clone {authed}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    git(&d.path().join("fleet"), &["reset", "-q", "--hard", at]);
    d
}

/// The ImageUpdateAutomation `fleet` in `ns` (author fluxcdbot), then the real controller's
/// commit on top of `parent`: its SHA.
fn automate(c: &Cluster, ns: &str, parent: &str) -> String {
    c.apply_yaml(&format!(
        "apiVersion: image.toolkit.fluxcd.io/v1\nkind: ImageUpdateAutomation\nmetadata: {{name: fleet, namespace: {ns}}}\nspec:\n  interval: 1h\n  sourceRef: {{kind: GitRepository, name: fleet}}\n  git:\n    commit:\n      author: {{name: fluxcdbot, email: fluxcdbot@users.noreply.github.com}}\n  update: {{path: ./apps, strategy: Setters}}\n"
    ))
    .unwrap();
    let repo = format!("org/{ns}");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let head = c.git().head(&repo, "main").unwrap();
        if head != parent {
            return head;
        }
        if Instant::now() > deadline {
            let iua = c.get_json(&["-n", ns, "get", "imageupdateautomation", "fleet"]);
            panic!(
                "no commit from image-automation-controller after 180 s; Ready: {}",
                condition(&iua, "Ready")
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn pull(c: &Cluster, dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--repo")
        .arg(dir)
        .arg("--kubeconfig")
        .arg(c.kubeconfig())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "-o json: {e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every file of the work tree (not .git) with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_name() == ".git" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// The "done when": the real automation's commit comes home by a fast-forward, marked
/// as the ImageUpdateAutomation's (its author and status.lastPushCommit), with the setter line
/// it changed named as markercheck names it; `--dry-run` first changes nothing. Fetched with
/// the GitRepository's secretRef credentials (the server refuses anonymous reads), which
/// never appear in the output.
#[test]
fn a_fast_forward_brings_the_automations_commit_home_with_its_setter_lines() {
    let c = &cluster();
    let ns = "pull-ff";
    let (url, parent) = fleet(c, ns);
    let commit = automate(c, ns, &parent);
    let d = clone_at(c, &url, &parent);
    let dir = d.path().join("fleet");
    let before = files(&dir);

    let plan = pull(
        c,
        &dir,
        &["gitrepository/fleet", "-n", ns, "--dry-run", "-o", "json"],
    );
    let p = json(&plan);
    assert_eq!(plan.status.code(), Some(0), "{p:#}");
    assert_eq!(p["decision"]["action"], "fast-forward", "{p:#}");
    assert_eq!(p["result"]["changed"], false);
    assert_eq!(git(&dir, &["rev-parse", "HEAD"]), parent);
    assert_eq!(files(&dir), before, "--dry-run changed the work tree");
    assert!(
        git(&dir, &["remote"]).lines().all(|r| r != "flux"),
        "--dry-run added a remote"
    );

    let out = pull(c, &dir, &["gitrepository/fleet", "-n", ns, "-o", "json"]);
    let r = json(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{r:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(TOKEN), "the credential leaked: {text}");
    assert_eq!(r["source"]["secret"], "fleet-creds");
    assert_eq!(r["checkout"]["originSameRepository"], true);
    let commits = r["commits"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{r:#}");
    let cm = &commits[0];
    assert_eq!(cm["sha"], commit.as_str());
    assert_eq!(cm["author"], "fluxcdbot");
    assert_eq!(cm["madeBy"]["automation"], format!("{ns}/fleet"));
    assert_eq!(cm["madeBy"]["pushBranch"], "main");
    let evidence: Vec<&str> = cm["madeBy"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(evidence.contains(&"author"), "{evidence:?}");
    // the line number in the controller's commit, read from the commit itself
    let committed = git(&dir, &["show", &format!("{commit}:apps/web.yaml")]);
    let line = committed
        .lines()
        .position(|l| l.contains("ghcr.io/org/web:"))
        .unwrap()
        + 1;
    assert_eq!(
        cm["setterLines"],
        serde_json::json!([{"file": "apps/web.yaml", "line": line, "setter": format!("{ns}:web"),
            "old": "ghcr.io/org/web:1.0.0", "new": "ghcr.io/org/web:1.2.3"}]),
        "{r:#}"
    );
    assert_eq!(r["decision"]["action"], "fast-forward");
    assert_eq!(r["result"]["changed"], true);
    assert_eq!(r["warnings"], serde_json::json!([]), "{r:#}");
    // what git says now: the branch at the automation's commit, the remote of its own
    assert_eq!(git(&dir, &["rev-parse", "HEAD"]), commit);
    assert_eq!(git(&dir, &["rev-parse", "flux/main"]), commit);
    assert_eq!(git(&dir, &["remote", "get-url", "flux"]), url);
    assert_eq!(git(&dir, &["status", "--porcelain"]), "");
    assert!(
        std::fs::read_to_string(dir.join("apps/web.yaml"))
            .unwrap()
            .contains("ghcr.io/org/web:1.2.3")
    );

    // the table names the setter line the same way; a second run is up to date, exit 0
    let again = pull(c, &dir, &["gitrepository/fleet", "-n", ns]);
    let t = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(0), "{t}");
    assert!(t.contains("up to date"), "{t}");
}

/// A checkout with a commit of its own on the same file the automation changed: refused
/// (exit 1), naming that file and the rebase command; HEAD, every branch and every file of
/// the work tree byte-identical afterwards (only flux/main is stored, for the rebase).
#[test]
fn a_diverged_checkout_is_refused_and_left_unchanged() {
    let c = &cluster();
    let ns = "pull-diverged";
    let (url, parent) = fleet(c, ns);
    let commit = automate(c, ns, &parent);
    let d = clone_at(c, &url, &parent);
    let dir = d.path().join("fleet");
    std::fs::write(dir.join("apps/web.yaml"), web("1.1.0", ns)).unwrap();
    std::fs::write(dir.join("README.md"), "fleet, by hand\n").unwrap();
    git(&dir, &["commit", "-qam", "web 1.1.0 by hand"]);
    std::fs::write(dir.join("notes.txt"), "untracked\n").unwrap();
    let head = git(&dir, &["rev-parse", "HEAD"]);
    let branches = git(&dir, &["for-each-ref", "refs/heads"]);
    let before = files(&dir);

    let out = pull(c, &dir, &["gitrepository/fleet", "-n", ns, "-o", "json"]);
    let r = json(&out);
    assert_eq!(out.status.code(), Some(1), "{r:#}");
    assert_eq!(r["decision"]["action"], "refused");
    assert_eq!(r["decision"]["rule"], "diverged");
    assert_eq!(r["decision"]["files"], serde_json::json!(["apps/web.yaml"]));
    assert_eq!(r["decision"]["command"], "git rebase flux/main");
    assert_eq!(r["localOnly"], 1);
    assert_eq!(
        r["commits"][0]["madeBy"]["automation"],
        format!("{ns}/fleet")
    );
    assert_eq!(r["result"]["changed"], false);
    // the hand-set tag is a line the automation will rewrite (markercheck's simulation with
    // the live ImagePolicy): warned before it is pushed
    let rewrite = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "setter-will-be-rewritten")
        .unwrap_or_else(|| panic!("{r:#}"));
    assert_eq!(
        rewrite["message"]
            .as_str()
            .unwrap()
            .split(" (the")
            .next()
            .unwrap(),
        format!(
            "apps/web.yaml:11 {ns}:web: ImageUpdateAutomation {ns}/fleet will rewrite ghcr.io/org/web:1.1.0 -> ghcr.io/org/web:1.2.3"
        )
    );
    assert_eq!(git(&dir, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&dir, &["for-each-ref", "refs/heads"]), branches);
    assert_eq!(
        files(&dir),
        before,
        "the refused pull changed the work tree"
    );
    // the rebase command works on what was stored
    assert_eq!(git(&dir, &["rev-parse", "flux/main"]), commit);

    // the table says the same, and a dirty tree on top is refused as well (still diverged)
    std::fs::write(dir.join("README.md"), "dirty\n").unwrap();
    let t = pull(c, &dir, &["gitrepository/fleet", "-n", ns]);
    let s = String::from_utf8_lossy(&t.stdout);
    assert_eq!(t.status.code(), Some(1), "{s}");
    assert!(s.contains("refused, nothing changed"), "{s}");
    assert!(s.contains("git rebase flux/main"), "{s}");
    assert_eq!(git(&dir, &["rev-parse", "HEAD"]), head);
}

/// A source moved by a cutover: spec.url on the cluster's Git server, the checkout's origin
/// still on the old server (another Git server with the same history). The pull reads the
/// server Flux reads and warns that a push to origin goes astray (exit 1).
#[test]
fn a_cutover_moved_source_is_warned_about_origin() {
    let c = &cluster();
    let ns = "pull-moved";
    let (url, parent) = fleet(c, ns);
    let old = twin::git::GitServer::start(twin::git::GitServerOptions::default()).unwrap();
    old.create_repo("org/fleet", "main").unwrap();
    let d = clone_at(c, &url, &parent);
    let dir = d.path().join("fleet");
    let old_url = old.url_http("org/fleet");
    git(&dir, &["push", "-q", &old_url, "main"]);
    git(&dir, &["remote", "set-url", "origin", &old_url]);

    let out = pull(c, &dir, &["gitrepository/fleet", "-n", ns, "-o", "json"]);
    let r = json(&out);
    assert_eq!(out.status.code(), Some(1), "{r:#}");
    assert_eq!(r["decision"]["action"], "up-to-date", "{r:#}");
    assert_eq!(r["checkout"]["originSameRepository"], false);
    let w = r["warnings"].as_array().unwrap();
    assert_eq!(w.len(), 1, "{r:#}");
    assert_eq!(w[0]["kind"], "origin-not-flux-server");
    let msg = w[0]["message"].as_str().unwrap();
    assert!(msg.contains(&old_url) && msg.contains(&url), "{msg}");
    assert!(
        w[0]["fix"].as_str().unwrap().contains("git push flux main"),
        "{w:?}"
    );
    assert_eq!(git(&dir, &["remote", "get-url", "flux"]), url);
}

/// Bad input: a GitRepository that does not exist is exit 3 naming it (and its namespace),
/// with the PullError document under -o json; a --repo that is not a Git checkout is exit 2
/// naming the path, before any kubeconfig is read (a kubeconfig that does not exist is never
/// opened).
#[test]
fn bad_input_names_the_object_or_the_path() {
    let c = &cluster();
    let ns = "pull-bad";
    c.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
    ))
    .unwrap();
    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q", "-b", "main"]);
    let out = pull(c, d.path(), &["gitrepository/nope", "-n", ns, "-o", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "GitRepository \"nope\" not found in namespace \"{ns}\""
        )),
        "{stderr}"
    );
    let doc = json(&out);
    assert_eq!(doc["kind"], "PullError");
    assert_eq!(doc["exitCode"], 3);

    let plain = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["--repo"])
        .arg(plain.path())
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&plain.path().display().to_string())
            && stderr.contains("not a Git repository"),
        "{stderr}"
    );
    assert!(!stderr.contains("kubeconfig"), "{stderr}");
}
