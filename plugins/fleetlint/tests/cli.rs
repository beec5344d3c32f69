//! The binary: exit codes, output shapes, --explain, --changed-since on a real Git history.

mod common;
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kubectl-fleetlint"));
    c.env("NO_COLOR", "1").env_remove("KUBECONFIG");
    c
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(c: &mut Command) -> Out {
    let o = c.output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[test]
fn example_fleet_exit_codes_and_shapes() {
    let ws = common::workspace();
    let clusters = ws.join("clusters");
    let dev = run(bin()
        .arg(&clusters)
        .arg("--overlay")
        .arg(ws.join("clusters/dev"))
        .arg("--no-cache"));
    assert_eq!(dev.code, 0, "{}{}", dev.stdout, dev.stderr);
    assert_eq!(dev.stdout, "");
    let all = run(bin().arg(&clusters).arg("--no-cache").args(["-o", "json"]));
    assert_eq!(all.code, 1, "{}", all.stderr);
    let v: serde_json::Value = serde_json::from_str(&all.stdout).unwrap();
    assert_eq!(v["kind"], "FleetLintReport");
    assert_eq!(v["findings"].as_array().unwrap().len(), 1);
    assert_eq!(v["findings"][0]["rule"], "FL040");
    assert_eq!(v["findings"][0]["file"], "clusters/prod/cluster-vars.yaml");
    let y = run(bin().arg(&clusters).arg("--no-cache").args(["-o", "yaml"]));
    assert!(
        y.stdout
            .starts_with("apiVersion: fleetlint.cluster-loop.dev/v1\n"),
        "{}",
        y.stdout
    );
    let gh = run(bin()
        .arg(&clusters)
        .arg("--no-cache")
        .args(["--format", "github"]));
    assert!(
        gh.stdout.starts_with(
            "::error file=clusters/prod/cluster-vars.yaml,line=13,title=FL040 placeholder::"
        ),
        "{}",
        gh.stdout
    );
    let sarif = run(bin()
        .arg(&clusters)
        .arg("--no-cache")
        .args(["--format", "sarif"]));
    let s: serde_json::Value = serde_json::from_str(&sarif.stdout).unwrap();
    assert_eq!(s["runs"][0]["results"][0]["ruleId"], "FL040");
    let table = run(bin().arg(&clusters).arg("--no-cache").arg("--graph"));
    assert!(
        table.stdout.contains("flux-system/apps-wave-2") && table.stdout.contains("55m0s"),
        "{}",
        table.stdout
    );
    assert!(
        !table.stdout.contains('\u{1b}'),
        "no escape codes without colour"
    );
}

#[test]
fn usage_errors_exit_2() {
    let r = run(bin().arg("/nonexistent/fleet"));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("/nonexistent/fleet"), "{}", r.stderr);
    let r = run(bin().args(["--explain", "FL999"]));
    assert_eq!(r.code, 2);
    let r = run(bin()
        .arg(common::workspace().join("clusters"))
        .args(["--kubectl", "/nonexistent/kubectl"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--kubectl"), "{}", r.stderr);
    let r = run(bin()
        .args(["--overlay", "/nonexistent"])
        .arg(common::workspace().join("clusters")));
    assert_eq!(r.code, 2);
}

#[test]
fn explain_and_list_rules() {
    let r = run(bin().args(["--explain", "FL032"]));
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("$${VAR}") && r.stdout.contains("fluxcd/pkg envsubst"),
        "{}",
        r.stdout
    );
    let r = run(bin().arg("--list-rules"));
    assert!(r.stdout.contains("FL070") && r.stdout.contains("MC003"));
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let st = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&st.stderr)
    );
}

/// --changed-since: an unrelated change reports nothing; a change in the app's directory
/// reports the app's finding; an unknown revision is a usage error.
#[test]
fn changed_since_limits_to_what_changed() {
    let f = common::clean_fleet();
    // a pre-existing mistake in another Kustomization, outside the change
    f.write("apps/other/kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cm.yaml\n");
    f.write("apps/other/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  namespace: default\ndata:\n  v: TBD-OTHER\n");
    let k = std::fs::read_to_string(f.root().join("clusters/test/app.yaml")).unwrap();
    f.write(
        "clusters/test/other.yaml",
        &k.replace("name: app\n", "name: other\n")
            .replace("./apps/app", "./apps/other"),
    );
    let kz = std::fs::read_to_string(f.root().join("clusters/test/kustomization.yaml")).unwrap();
    f.write(
        "clusters/test/kustomization.yaml",
        &format!("{kz}  - other.yaml\n"),
    );
    let root = f.root();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "base"]);
    let base = || {
        let mut c = bin();
        c.arg(root)
            .args(["--no-cache", "-o", "json", "--changed-since", "HEAD"]);
        c
    };
    let r = run(&mut base());
    assert_eq!(r.code, 0, "nothing changed: {}{}", r.stdout, r.stderr);
    // the summary counts what the change affects, not every Kustomization
    assert!(
        r.stderr.contains(
            "0 of 3 Kustomizations affected by the change (only their findings reported)"
        ),
        "{}",
        r.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (
            v["stats"]["affected"].as_u64(),
            v["stats"]["kustomizations"].as_u64()
        ),
        (Some(0), Some(3))
    );
    // seed an untagged image in the app
    let d = std::fs::read_to_string(root.join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("ghcr.io/example/web:2.3.4", "ghcr.io/example/web:latest"),
    );
    let r = run(&mut base());
    // FL070 is a warning (the image runs as written): exit 0
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("1 of 3 Kustomizations affected by the change"),
        "{}",
        r.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        ["FL070"],
        "the untouched Kustomization's placeholder is not reported"
    );
    assert_eq!(v["changedFiles"][0], "apps/app/deploy.yaml");
    // without --changed-since both show
    let r = run(bin().arg(root).args(["--no-cache", "-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["findings"].as_array().unwrap().len(), 2);
    let r = run(bin().arg(root).args(["--changed-since", "no-such-rev"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no-such-rev"), "{}", r.stderr);
}

/// Completion like the other plugins (cluster_loop::completion): flag names, directories for
/// PATH and --overlay, and the kubectl_complete-fleetlint helper script.
#[test]
fn completion() {
    let r = run(bin().args(["__complete", "--over"]));
    assert_eq!(r.code, 0);
    assert!(r.stdout.starts_with("--overlay"), "{}", r.stdout);
    let r = run(bin().args(["__complete", "--overlay", ""]));
    assert!(
        r.stdout.trim_end().ends_with(":16"),
        "directories only: {}",
        r.stdout
    );
    let r = run(bin().args(["completion", "script"]));
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("kubectl-fleetlint"), "{}", r.stdout);
}

/// SIGINT during the renders: exit 130, one line on stderr, no temporary kustomization
/// directory left. The kubectl is a stand-in that says it started and then hangs, so the signal
/// always arrives mid-render (no timing luck).
#[cfg(unix)]
#[test]
fn interrupted_run_exits_130_and_cleans_up() {
    use std::os::unix::fs::PermissionsExt;
    let f = common::clean_fleet();
    // the overlay without a kustomization file: its render goes through a generated one in a
    // temporary directory
    f.remove("clusters/test/kustomization.yaml");
    let tmp = tempfile::tempdir().unwrap();
    let marker = tmp.path().join("started");
    let fake = tmp.path().join("kubectl");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\ntouch {}\nexec sleep 30\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    // a private TMPDIR: the run's temporary directories are checked there
    let run_tmp = tmp.path().join("tmp");
    std::fs::create_dir_all(&run_tmp).unwrap();
    let child = bin()
        .arg(f.root())
        .args(["--no-cache", "--kubectl"])
        .arg(&fake)
        .env("TMPDIR", &run_tmp)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the render never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    assert!(out.stdout.is_empty());
    let left: Vec<_> = std::fs::read_dir(&run_tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A copy of the fleet outside any Git checkout (a CI export, a tarball), linted from its top
/// as `kubectl fleetlint clusters/`: the current directory is the repository root (as
/// markercheck takes it), said in a note, so the overlays are found and prod reports exactly
/// what it reports in the checkout; no false MC013 from a root taken too low.
#[test]
fn outside_a_git_checkout_the_current_directory_is_the_root() {
    let ws = common::workspace();
    let tmp = tempfile::tempdir().unwrap();
    let cp = std::process::Command::new("cp")
        .arg("-r")
        .arg(ws.join("clusters"))
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(cp.success());
    assert!(!tmp.path().join(".git").exists());
    let out = run(bin()
        .current_dir(tmp.path())
        .args(["clusters/", "--no-cache", "-o", "json"]));
    assert!(
        out.stderr.contains("note: no .git above clusters/"),
        "{}",
        out.stderr
    );
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["FL040"], "{}", out.stdout);
    assert_eq!(v["overlays"].as_array().unwrap().len(), 2, "{}", out.stdout);
    assert!(v["notes"][0].as_str().unwrap().contains("no .git above"));
}

/// --changed-since equals the full run restricted to what the change touches: the findings of
/// the affected Kustomizations (the one whose inputs changed and every Kustomization that
/// dependsOn it, transitively) and of the changed files, nothing else, and every one of them.
/// Four Kustomizations each carry a finding of their own; the change touches `app`'s input.
#[test]
fn changed_since_equals_the_full_run_restricted_to_the_affected_kustomizations() {
    let f = common::clean_fleet();
    let ks = std::fs::read_to_string(f.root().join("clusters/test/app.yaml")).unwrap();
    let mut kz =
        std::fs::read_to_string(f.root().join("clusters/test/kustomization.yaml")).unwrap();
    // dep dependsOn app, dep2 dependsOn dep (a dependent of a dependent), other stands alone
    for (name, depends) in [("dep", Some("app")), ("dep2", Some("dep")), ("other", None)] {
        let mut text = ks
            .replace("name: app\n", &format!("name: {name}\n"))
            .replace("./apps/app", &format!("./apps/{name}"));
        if let Some(d) = depends {
            text.push_str(&format!("  dependsOn:\n    - name: {d}\n"));
        }
        f.write(&format!("clusters/test/{name}.yaml"), &text);
        kz.push_str(&format!("  - {name}.yaml\n"));
        f.write(
            &format!("apps/{name}/kustomization.yaml"),
            &format!("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {name}\nresources:\n  - cm.yaml\n"),
        );
        // a placeholder (FL040) in each
        f.write(
            &format!("apps/{name}/cm.yaml"),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: TBD-{}\n",
                name.to_uppercase()
            ),
        );
    }
    f.write("clusters/test/kustomization.yaml", &kz);
    let root = f.root();
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "base"]);
    git(root, &["tag", "base"]);
    // the change: an untagged image in app
    let d = std::fs::read_to_string(root.join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("ghcr.io/example/web:2.3.4", "ghcr.io/example/web:latest"),
    );
    let full = f.lint();
    let changed = f.lint_with(|c| c.changed_since = Some("HEAD".into()));
    let affected: std::collections::BTreeSet<String> = changed.overlays[0]
        .kustomizations
        .iter()
        .filter(|k| k.affected)
        .map(|k| k.id.clone())
        .collect();
    assert_eq!(
        affected.iter().map(String::as_str).collect::<Vec<_>>(),
        ["flux-system/app", "flux-system/dep", "flux-system/dep2"],
        "the changed Kustomization and its dependents"
    );
    let files = changed.changed_files.clone().unwrap();
    assert_eq!(files, ["apps/app/deploy.yaml"]);
    let restricted: Vec<_> = full
        .findings
        .iter()
        .filter(|x| {
            x.kustomizations.iter().any(|k| affected.contains(k)) || files.contains(&x.file)
        })
        .cloned()
        .collect();
    assert_eq!(changed.findings, restricted, "{}", common::show(&changed));
    // and the restriction is not empty-handed: app's image, dep's and dep2's placeholders,
    // never other's
    assert_eq!(
        common::rules(&changed),
        ["FL040", "FL040", "FL070"],
        "{}",
        common::show(&changed)
    );
    assert_eq!(common::rules(&full), ["FL040", "FL040", "FL040", "FL070"]);
    assert!(
        !changed
            .findings
            .iter()
            .any(|x| x.message.contains("TBD-OTHER")),
        "{}",
        common::show(&changed)
    );
    assert_eq!(
        (changed.stats.affected, changed.stats.kustomizations),
        (3, 5)
    );
    assert_eq!((full.stats.affected, full.stats.kustomizations), (5, 5));

    // deletions (trial item 2): a file a render reads, a whole spec.path directory and a file
    // renamed away, each uncommitted (`--changed-since HEAD`) and committed (`HEAD~1`). Each
    // breaks dep's render; the changed run reports that error (it is what a CI gate must
    // stop), affects dep and its dependent dep2, and equals the full run restricted to them.
    type Change = (
        &'static str,
        &'static [&'static [&'static str]],
        &'static str,
    );
    let changes: [Change; 3] = [
        (
            "a deleted file",
            &[&["rm", "-q", "apps/dep/cm.yaml"]],
            "FL001",
        ),
        (
            "a deleted spec.path",
            &[&["rm", "-rq", "apps/dep"]],
            "FL002",
        ),
        (
            "a file renamed away",
            &[&["mv", "apps/dep/cm.yaml", "apps/dep/config.yaml"]],
            "FL001",
        ),
    ];
    for (what, cmds, rule) in changes {
        for committed in [false, true] {
            git(root, &["reset", "-q", "--hard", "base"]);
            git(root, &["clean", "-qfd"]);
            for c in cmds {
                git(root, c);
            }
            let rev = if committed {
                git(root, &["commit", "-qm", what]);
                "HEAD~1"
            } else {
                "HEAD"
            };
            let full = f.lint();
            let changed = f.lint_with(|c| c.changed_since = Some(rev.into()));
            let ctx = format!(
                "{what} (committed: {committed})\n{}",
                common::show(&changed)
            );
            let affected: std::collections::BTreeSet<String> = changed.overlays[0]
                .kustomizations
                .iter()
                .filter(|k| k.affected)
                .map(|k| k.id.clone())
                .collect();
            assert_eq!(
                affected.iter().map(String::as_str).collect::<Vec<_>>(),
                ["flux-system/dep", "flux-system/dep2"],
                "{ctx}"
            );
            assert_eq!(
                (changed.stats.affected, changed.stats.kustomizations),
                (2, 5)
            );
            let files = changed.changed_files.clone().unwrap();
            let restricted: Vec<_> = full
                .findings
                .iter()
                .filter(|x| {
                    x.kustomizations.iter().any(|k| affected.contains(k)) || files.contains(&x.file)
                })
                .cloned()
                .collect();
            // kubectl's log header (time, pid) differs between the two renders
            let key = |v: &[fleetlint::lint::Finding]| -> Vec<_> {
                v.iter()
                    .map(|x| {
                        let m = match x.message.find("\"command failed\"") {
                            Some(i) => x.message[i..].to_string(),
                            None => x.message.clone(),
                        };
                        (
                            x.file.clone(),
                            x.line,
                            x.rule.clone(),
                            x.kustomizations.clone(),
                            m,
                        )
                    })
                    .collect()
            };
            assert_eq!(key(&changed.findings), key(&restricted), "{ctx}");
            assert!(
                changed
                    .findings
                    .iter()
                    .any(|x| x.rule == rule && x.severity == fleetlint::rules::Severity::Error),
                "{ctx}"
            );
            assert!(changed.has_errors() && full.has_errors(), "{ctx}");
        }
    }
}

/// A Kustomization deleted from the tree of another one (infra applies infra/, which defined
/// db; app, applied by the root, dependsOn db): the change affects infra (its render read the
/// deleted file) and app (its dependsOn now names nothing: FL010), although app's own inputs
/// and its parent did not change; the changed run reports FL010 and equals the full run
/// restricted to the affected set.
#[test]
fn changed_since_a_deleted_kustomization_affects_its_dependents_elsewhere() {
    let f = common::clean_fleet();
    let root = f.root();
    let app = std::fs::read_to_string(root.join("clusters/test/app.yaml")).unwrap();
    let kz = std::fs::read_to_string(root.join("clusters/test/kustomization.yaml")).unwrap();
    let plain = |name: &str, path: &str| {
        app.replace("name: app\n", &format!("name: {name}\n"))
            .replace("./apps/app", path)
    };
    f.write("clusters/test/infra.yaml", &plain("infra", "./infra"));
    f.write(
        "clusters/test/kustomization.yaml",
        &format!("{kz}  - infra.yaml\n"),
    );
    f.write("infra/db.yaml", &plain("db", "./apps/db"));
    f.write(
        "infra/ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: db\n",
    );
    f.write(
        "apps/db/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - cm.yaml\n",
    );
    f.write(
        "apps/db/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: db\n  namespace: db\ndata:\n  v: x\n",
    );
    f.write(
        "clusters/test/app.yaml",
        &format!("{app}  dependsOn:\n    - name: db\n"),
    );
    git(root, &["init", "-q", "-b", "main"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "base"]);
    let before = f.lint();
    assert!(
        !common::rules(&before).contains(&"FL010".to_string()),
        "{}",
        common::show(&before)
    );
    git(root, &["rm", "-q", "infra/db.yaml"]);
    let full = f.lint();
    let changed = f.lint_with(|c| c.changed_since = Some("HEAD".into()));
    let affected: std::collections::BTreeSet<String> = changed.overlays[0]
        .kustomizations
        .iter()
        .filter(|k| k.affected)
        .map(|k| k.id.clone())
        .collect();
    assert_eq!(
        affected.iter().map(String::as_str).collect::<Vec<_>>(),
        ["flux-system/app", "flux-system/infra"],
        "{}",
        common::show(&changed)
    );
    let files = changed.changed_files.clone().unwrap();
    let restricted: Vec<_> = full
        .findings
        .iter()
        .filter(|x| {
            x.kustomizations.iter().any(|k| affected.contains(k)) || files.contains(&x.file)
        })
        .cloned()
        .collect();
    assert_eq!(changed.findings, restricted, "{}", common::show(&changed));
    assert!(
        common::rules(&changed).contains(&"FL010".to_string()),
        "{}",
        common::show(&changed)
    );
}

/// The on-disk cache serves exactly what a fresh run computes: a second run with the same
/// cache directory runs no `kubectl kustomize`, reads the renders and the substituted objects
/// back, and reports the same findings and the same graph as the first (and as a run without
/// a cache).
#[test]
fn a_warm_cache_gives_the_same_report_as_a_fresh_run() {
    let f = common::clean_fleet();
    // findings that depend on substituted values and on rendered objects
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("ghcr.io/example/web:2.3.4", "ghcr.io/example/web:latest")
            .replace("value: ${LOG_LEVEL:=info}", "value: ${LOG_LEVEL}"),
    );
    let cache = tempfile::tempdir().unwrap();
    let with_cache = || f.lint_with(|c| c.cache_dir = Some(cache.path().to_path_buf()));
    let fresh = f.lint();
    let first = with_cache();
    let second = with_cache();
    assert!(first.stats.renders_run > 0);
    assert_eq!(second.stats.renders_run, 0, "every render from the cache");
    assert!(!fresh.findings.is_empty());
    for r in [&first, &second] {
        assert_eq!(r.findings, fresh.findings, "{}", common::show(r));
        assert_eq!(
            serde_json::to_value(&r.overlays[0].kustomizations).unwrap(),
            serde_json::to_value(&fresh.overlays[0].kustomizations).unwrap()
        );
    }
}

/// The file-facts cache (each file's documents, kinds, names, lines and kustomization
/// references, kept under the file's content digest) and the run pack (the renders and parsed
/// batches the last run used, in one file) never serve a stale or damaged entry: after an edit
/// that moves lines, one that adds a kustomization resource (a changed reference list), and
/// after either file is cut short, overwritten with garbage, has a byte changed or is emptied,
/// the cached run reports exactly what a run without a cache reports, and the damaged file is
/// rewritten whole (its first line is the SHA-256 of the rest).
#[test]
fn the_file_facts_cache_never_serves_a_stale_or_damaged_entry() {
    use sha2::Digest as _;
    let f = common::clean_fleet();
    let cache = tempfile::tempdir().unwrap();
    let cached = || f.lint_with(|c| c.cache_dir = Some(cache.path().to_path_buf()));
    let same = |r: &fleetlint::Report, fresh: &fleetlint::Report| {
        assert_eq!(r.findings, fresh.findings, "{}", common::show(r));
        assert_eq!(
            serde_json::to_value(&r.overlays[0].kustomizations).unwrap(),
            serde_json::to_value(&fresh.overlays[0].kustomizations).unwrap()
        );
        assert_eq!(r.stats.files, fresh.stats.files);
        assert_eq!(r.stats.kustomize_dirs, fresh.stats.kustomize_dirs);
    };
    let cache_file = |prefix: &str| {
        let v: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_string_lossy();
                n.starts_with(prefix) && n.ends_with(".json")
            })
            .collect();
        assert_eq!(v.len(), 1, "one {prefix} file per tree: {v:?}");
        v[0].clone()
    };
    let whole = |p: &std::path::Path| {
        let s = std::fs::read_to_string(p).unwrap();
        let (sum, body) = s.split_once('\n').unwrap();
        let want: String = sha2::Sha256::digest(body.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sum, want, "checksum line of {}", p.display());
    };
    same(&cached(), &f.lint());
    let facts = cache_file("files-");
    let pack = cache_file("pack-");
    whole(&facts);
    whole(&pack);
    // an edit that moves every line of a document and adds a finding (FL070 at its new line)
    let d = std::fs::read_to_string(f.root().join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &format!(
            "# moved\n# down\n{}",
            d.replace("ghcr.io/example/web:2.3.4", "ghcr.io/example/web:latest")
        ),
    );
    let fresh = f.lint();
    assert_eq!(common::rules(&fresh), ["FL070"], "{}", common::show(&fresh));
    same(&cached(), &fresh);
    // a new resource in a kustomization file: the cached reference list must not be the old one
    let k = std::fs::read_to_string(f.root().join("apps/app/kustomization.yaml")).unwrap();
    assert!(k.contains("resources:\n"), "{k}");
    f.write(
        "apps/app/kustomization.yaml",
        &k.replace("resources:\n", "resources:\n  - extra.yaml\n"),
    );
    f.write(
        "apps/app/extra.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  v: TBD-EXTRA\n",
    );
    let fresh = f.lint();
    assert_eq!(
        common::rules(&fresh),
        ["FL040", "FL070"],
        "{}",
        common::show(&fresh)
    );
    same(&cached(), &fresh);
    // damaged cache files: ignored, the run is right, the file is rewritten whole
    for file in [&facts, &pack] {
        let good = std::fs::read(file).unwrap();
        let mut flipped = good.clone();
        let at = flipped.len() - 10;
        flipped[at] = if flipped[at] == b'1' { b'2' } else { b'1' };
        for damaged in [
            good[..good.len() / 2].to_vec(),
            b"not a cache\n{]".to_vec(),
            flipped,
            Vec::new(),
        ] {
            std::fs::write(file, &damaged).unwrap();
            same(&cached(), &fresh);
            assert_ne!(std::fs::read(file).unwrap(), damaged);
            whole(file);
        }
    }
}

/// One walk for both rule sets: with markercheck's rules on, the tree is read once by
/// markercheck's scan and its bytes are shared; with them off, fleetlint walks the tree
/// itself. Both read the same files (symlinks are not followed, a symlinked file and a
/// symlinked directory included here), so every fleetlint finding, the graph and the counts
/// are the same either way.
#[test]
fn the_shared_walk_reads_the_same_tree_as_fleetlints_own() {
    let f = common::clean_fleet();
    // a placeholder in a file, and the same file again through a symlink and a symlinked
    // directory (Flux's clone has them; neither walk follows them)
    f.write(
        "apps/app/extra/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  v: TBD-EXTRA\n",
    );
    let k = std::fs::read_to_string(f.root().join("apps/app/kustomization.yaml")).unwrap();
    f.write(
        "apps/app/kustomization.yaml",
        &k.replace("resources:\n", "resources:\n  - extra/cm.yaml\n"),
    );
    std::os::unix::fs::symlink("extra/cm.yaml", f.root().join("apps/app/link.yaml")).unwrap();
    std::os::unix::fs::symlink("app/extra", f.root().join("apps/linked")).unwrap();
    let shared = f.lint();
    let own = f.lint_with(|c| c.markers = false);
    let fleet_only = |r: &fleetlint::Report| -> Vec<fleetlint::lint::Finding> {
        r.findings
            .iter()
            .filter(|x| !x.rule.starts_with("MC"))
            .cloned()
            .collect()
    };
    assert_eq!(common::rules(&own), ["FL040"], "{}", common::show(&own));
    assert_eq!(
        fleet_only(&shared),
        own.findings,
        "{}",
        common::show(&shared)
    );
    assert_eq!(
        serde_json::to_value(&shared.overlays).unwrap(),
        serde_json::to_value(&own.overlays).unwrap()
    );
    assert_eq!(shared.stats.files, own.stats.files);
    assert_eq!(shared.stats.kustomize_dirs, own.stats.kustomize_dirs);
}

/// A copy of the example fleet (clusters/ of this repository) in a new Git repository with one
/// commit, as a user's checkout.
fn fleet_checkout() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let cp = Command::new("cp")
        .arg("-r")
        .arg(common::workspace().join("clusters"))
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(cp.success());
    git(tmp.path(), &["init", "-q", "-b", "main"]);
    git(tmp.path(), &["add", "-A"]);
    git(tmp.path(), &["commit", "-q", "-m", "fleet"]);
    tmp
}

/// The trial's edit: the overlay's patch names a file that does not exist, so
/// `kubectl kustomize clusters/<overlay>` fails.
fn break_overlay(dir: &std::path::Path, overlay: &str) {
    let k = dir.join(format!("clusters/{overlay}/kustomization.yaml"));
    let text = std::fs::read_to_string(&k).unwrap();
    assert!(text.contains("- path: cluster-vars.yaml"));
    std::fs::write(
        &k,
        text.replace("- path: cluster-vars.yaml", "- path: cluster-varz.yaml"),
    )
    .unwrap();
}

fn json_of(o: &Out) -> serde_json::Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}{}", o.stdout, o.stderr))
}

/// (rule, file) of every finding.
fn rule_files(v: &serde_json::Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["file"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn overlay_dirs(v: &serde_json::Value) -> Vec<(String, bool)> {
    v["overlays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["dir"].as_str().unwrap().to_string(),
                o["rendered"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// klog's line header (`E1201 18:28:48.995418    2729 run.go:72] `): time and process of one
/// kubectl run.
fn has_klog_header(s: &str) -> bool {
    regex::Regex::new(r"(^|\n|\| )[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ ")
        .unwrap()
        .is_match(s)
}

/// An overlay whose directory does not render is a finding (FL001 naming the directory and
/// kubectl's own error), never dropped from discovery: both overlays broken, only dev broken
/// (prod still linted), with --changed-since HEAD, and with a kubectl whose kustomize always
/// fails. Before, each of these printed "0 overlay(s) (none found)" or lost dev, exit 0.
#[test]
fn an_overlay_that_does_not_render_is_a_finding_never_dropped() {
    let repo = fleet_checkout();
    let lint = |extra: &[&str]| {
        run(bin()
            .current_dir(repo.path())
            .args(["clusters", "--no-cache", "-o", "json"])
            .args(extra))
    };
    break_overlay(repo.path(), "dev");
    break_overlay(repo.path(), "prod");
    let both = lint(&[]);
    assert_eq!(both.code, 1, "{}", both.stderr);
    let v = json_of(&both);
    assert_eq!(
        overlay_dirs(&v),
        [
            ("clusters/dev".into(), false),
            ("clusters/prod".into(), false)
        ]
    );
    let fl001: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "FL001")
        .collect();
    assert_eq!(fl001.len(), 2, "{}", both.stdout);
    for (f, o) in fl001.iter().zip(["dev", "prod"]) {
        assert_eq!(f["file"], format!("clusters/{o}/kustomization.yaml"));
        let m = f["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("clusters/{o}"))
                && m.contains("cluster-varz.yaml")
                && m.contains("no such file or directory"),
            "{m}"
        );
        assert!(!has_klog_header(m), "{m}");
    }
    assert!(!both.stderr.contains("none found"), "{}", both.stderr);
    assert!(
        both.stderr.contains(
            "2 overlay(s) (clusters/dev: does not render, clusters/prod: does not render)"
        ),
        "{}",
        both.stderr
    );

    // only dev broken: dev reported, prod linted as before (its FL040)
    git(repo.path(), &["checkout", "-q", "clusters/prod"]);
    let dev = lint(&[]);
    assert_eq!(dev.code, 1, "{}", dev.stderr);
    let v = json_of(&dev);
    assert_eq!(
        overlay_dirs(&v),
        [
            ("clusters/dev".into(), false),
            ("clusters/prod".into(), true)
        ]
    );
    assert_eq!(
        rule_files(&v),
        [
            ("FL001".into(), "clusters/dev/kustomization.yaml".into()),
            ("FL040".into(), "clusters/prod/cluster-vars.yaml".into())
        ]
    );
    // the same error --overlay clusters/dev gives
    let one = lint(&["--overlay", "clusters/dev"]);
    assert_eq!(one.code, 1);
    let error = |v: &serde_json::Value| {
        let m = v["findings"][0]["message"].as_str().unwrap().to_string();
        m[m.find(" does not render: ").unwrap()..].to_string()
    };
    assert_eq!(error(&json_of(&one)), error(&v));
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("overlay candidate clusters/dev "),
        "{}",
        v["findings"][0]
    );

    // --changed-since HEAD (the uncommitted edit of dev): dev's failure is reported
    let changed = lint(&["--changed-since", "HEAD"]);
    assert_eq!(changed.code, 1, "{}", changed.stderr);
    assert!(
        rule_files(&json_of(&changed))
            .contains(&("FL001".into(), "clusters/dev/kustomization.yaml".into())),
        "{}",
        changed.stdout
    );
    // committed, then a change elsewhere: the overlay that does not render still fails the run
    git(repo.path(), &["commit", "-q", "-am", "break dev"]);
    let readme = repo.path().join("clusters/README.md");
    std::fs::write(&readme, "changed\n").unwrap();
    let elsewhere = lint(&["--changed-since", "HEAD"]);
    assert_eq!(elsewhere.code, 1, "{}", elsewhere.stderr);
    assert!(
        rule_files(&json_of(&elsewhere))
            .contains(&("FL001".into(), "clusters/dev/kustomization.yaml".into())),
        "{}",
        elsewhere.stdout
    );
    git(repo.path(), &["reset", "-q", "--hard", "HEAD~1"]);

    // a kubectl whose kustomize always fails: every candidate is a finding with its message
    let tools = tempfile::tempdir().unwrap();
    let fake = tools.path().join("kubectl");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'error: kustomize is not available in this kubectl' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let broken = lint(&["--kubectl", fake.to_str().unwrap()]);
    assert_eq!(broken.code, 1, "{}", broken.stderr);
    let v = json_of(&broken);
    assert!(!broken.stderr.contains("none found"), "{}", broken.stderr);
    let dirs: Vec<String> = overlay_dirs(&v).into_iter().map(|(d, _)| d).collect();
    assert!(
        dirs.contains(&"clusters/dev".to_string()) && dirs.contains(&"clusters/prod".to_string()),
        "{dirs:?}"
    );
    let findings = v["findings"].as_array().unwrap();
    assert!(!findings.is_empty());
    for f in findings.iter().filter(|f| f["rule"] == "FL001") {
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .contains("kustomize is not available in this kubectl"),
            "{f}"
        );
    }
    assert_eq!(
        findings.iter().filter(|f| f["rule"] == "FL001").count(),
        dirs.len(),
        "{}",
        broken.stdout
    );
}

/// A path that is itself an overlay is linted as that overlay (the same report as `clusters
/// --overlay DIR`); a path where no overlay is found is a usage error (exit 2) saying what to
/// pass, never "0 overlay(s) (none found) ... 0 errors" and exit 0.
#[test]
fn a_path_that_is_an_overlay_is_linted_as_one_and_nothing_to_lint_is_a_usage_error() {
    let repo = fleet_checkout();
    let lint = |args: &[&str]| {
        run(bin()
            .current_dir(repo.path())
            .args(["--no-cache", "-o", "json"])
            .args(args))
    };
    for (overlay, code) in [("dev", 0), ("prod", 1)] {
        let dir = format!("clusters/{overlay}");
        let alone = lint(&[&dir]);
        assert_eq!(alone.code, code, "{}", alone.stderr);
        let named = lint(&["clusters", "--overlay", &dir]);
        let (a, n) = (json_of(&alone), json_of(&named));
        assert_eq!(overlay_dirs(&a), [(dir.clone(), true)]);
        assert_eq!(
            a["overlays"][0]["kustomizations"],
            n["overlays"][0]["kustomizations"]
        );
        assert!(a["overlays"][0]["kustomizations"].as_array().unwrap().len() > 1);
        assert_eq!(rule_files(&a), rule_files(&n));
    }
    for path in ["clusters/apps", "clusters/apps/wave-0"] {
        let none = lint(&[path]);
        assert_eq!(none.code, 2, "{}{}", none.stdout, none.stderr);
        assert!(
            none.stderr
                .contains(&format!("nothing to lint under {path}"))
                && none.stderr.contains("kubectl fleetlint clusters")
                && none.stderr.contains("--overlay"),
            "{}",
            none.stderr
        );
        assert!(!none.stderr.contains("0 errors"), "{}", none.stderr);
    }
}

/// A render error replayed from the cache carries no kubectl log header of the run that
/// cached it (klog's `E1201 18:28:48.995418  2729 run.go:72]`), and reads the same as the
/// fresh run's.
#[test]
fn a_cached_render_error_carries_no_other_runs_klog_header() {
    let repo = fleet_checkout();
    let cache = tempfile::tempdir().unwrap();
    break_overlay(repo.path(), "dev");
    let lint = || {
        run(bin()
            .current_dir(repo.path())
            .args(["clusters/dev", "-o", "json", "--cache-dir"])
            .arg(cache.path()))
    };
    let first = lint();
    let second = lint();
    assert_eq!(first.code, 1, "{}", first.stderr);
    assert_eq!(second.code, 1, "{}", second.stderr);
    assert!(
        second.stderr.contains("0 kubectl kustomize run(s)"),
        "{}",
        second.stderr
    );
    let (a, b) = (json_of(&first), json_of(&second));
    let m = a["findings"][0]["message"].as_str().unwrap();
    assert!(m.contains("cluster-varz.yaml"), "{m}");
    assert!(!has_klog_header(m), "{m}");
    assert_eq!(a["findings"], b["findings"]);
}

/// Under a real pseudo-terminal (util-linux `script`) the progress line shows what the run is
/// doing: a spinner with colour, one plain line per change and no escape code at all with
/// `NO_COLOR`/`--color never`. The kubectl is a stand-in that waits for the test's STOP file
/// then fails, so the run is held in "finding overlays" as long as the test needs, with no
/// timing luck.
#[test]
fn progress_on_a_terminal_and_no_escape_codes_without_colour() {
    use std::io::Read as _;
    let repo = fleet_checkout();
    let shown =
        regex::Regex::new(r"fleetlint: finding overlays: 0 of \d+ renders done\r\n").unwrap();
    for (env, args, colour) in [
        (vec!["NO_COLOR=1"], vec![], false),
        (vec![], vec!["--color", "never"], false),
        (vec![], vec![], true),
    ] {
        let tools = tempfile::tempdir().unwrap();
        let stop = tools.path().join("STOP");
        let fake = tools.path().join("kubectl");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\nwhile [ ! -e '{}' ]; do sleep 0.05; done\necho 'error: stopped' >&2\nexit 1\n",
                stop.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
        let mut cmd = String::from("env -u NO_COLOR TERM=xterm-256color COLUMNS=120 ");
        for e in &env {
            cmd.push_str(&quote(e));
            cmd.push(' ');
        }
        cmd.push_str(&quote(env!("CARGO_BIN_EXE_kubectl-fleetlint")));
        for a in [
            "clusters",
            "--no-cache",
            "--kubectl",
            fake.to_str().unwrap(),
        ]
        .iter()
        .chain(args.iter())
        {
            cmd.push(' ');
            cmd.push_str(&quote(a));
        }
        let mut child = Command::new("script")
            .args(["-q", "-e", "-c", &cmd, "/dev/null"])
            .current_dir(repo.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("util-linux `script` is needed for the pty test");
        // whatever happens below (a failed assertion too), the stand-in kubectl is released,
        // so the run ends and leaves no process behind
        struct Release<'a>(&'a std::path::Path);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                let _ = std::fs::write(self.0, "");
            }
        }
        let release = Release(&stop);
        let mut stdout = child.stdout.take().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stdout.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        // wait (up to 120 s, a bound, not a timing assumption) for the progress line
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        // (the stand-in holds every render, so none is done until it is released)
        while !String::from_utf8_lossy(&seen.lock().unwrap()).contains("finding overlays: 0") {
            assert!(
                std::time::Instant::now() < deadline,
                "no progress line: {}",
                String::from_utf8_lossy(&seen.lock().unwrap())
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        drop(release);
        child.wait().unwrap();
        reader.join().unwrap();
        let out = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
        assert!(out.contains("FL001"), "{out}");
        if colour {
            assert!(
                out.contains("\u{1b}["),
                "the control: a spinner is drawn: {out:?}"
            );
        } else {
            assert!(!out.contains('\u{1b}'), "{env:?} {args:?}: {out:?}");
            assert!(shown.is_match(&out), "{out:?}");
        }
    }
}

/// `--color always` overrides NO_COLOR (as `--help` says) in the table too: comfy-table's
/// terminal backend (crossterm) dropped every color on its own under NO_COLOR and left empty
/// `ESC[m` codes in the cells (a fresh-user trial). Now the error cell is red.
#[test]
fn color_always_overrides_no_color_in_table_cells() {
    let tmp = fleet_checkout();
    break_overlay(tmp.path(), "prod");
    let o = run(bin() // sets NO_COLOR=1
        .current_dir(tmp.path())
        .args(["clusters", "--color", "always"]));
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        !o.stdout.contains("\u{1b}[m"),
        "empty escape codes:\n{:?}",
        o.stdout
    );
    assert!(
        o.stdout.contains("\u{1b}[38;5;9merror"),
        "the error cell is not red:\n{:?}",
        o.stdout
    );
    let plain = run(bin().current_dir(tmp.path()).args(["clusters"]));
    assert!(!plain.stdout.contains('\u{1b}'), "{:?}", plain.stdout);
}

/// The flux2 example layout (apps/ and clusters/ side by side): `kubectl fleetlint clusters`
/// (the first example of its --help) judges the Kustomization that clusters/staging applies,
/// whose `spec.path` (`./apps/staging`) is outside PATH, as `kubectl fleetlint .` does: its
/// substitution fails on an undefined variable (FL031), exit 1; with a kustomization.yaml
/// there and without one (the kustomization kustomize-controller generates). That directory
/// was rendered as empty, and the Kustomization passed unread (a fresh-user trial: exit 0).
#[test]
fn a_kustomization_whose_path_leaves_path_is_judged_as_from_the_root() {
    for with_kustomization in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let w = |p: &str, t: &str| {
            let f = d.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, t).unwrap();
        };
        w(
            "clusters/staging/apps.yaml",
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./apps/staging\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  postBuild:\n    substitute:\n      ENV: staging\n",
        );
        w(
            "clusters/staging/flux-system/gotk-sync.yaml",
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./clusters/staging\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
        );
        if with_kustomization {
            w(
                "apps/staging/kustomization.yaml",
                "resources:\n- web.yaml\n",
            );
        }
        w(
            "apps/staging/web.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: default\ndata:\n  env: ${ENV}\n  region: ${REGION}\n",
        );
        git(d.path(), &["init", "-q"]);
        let rules = |path: &str| -> (Vec<String>, i32) {
            let o = run(bin()
                .current_dir(d.path())
                .args([path, "--no-cache", "-o", "json"]));
            let v: serde_json::Value = serde_json::from_str(&o.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}\n{}", o.stdout, o.stderr));
            let r = v["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["rule"].as_str().unwrap().to_string())
                .collect();
            (r, o.code)
        };
        let whole = rules(".");
        assert!(whole.0.contains(&"FL031".to_string()), "{whole:?}");
        assert_eq!(whole.1, 1);
        assert_eq!(
            rules("clusters"),
            whole,
            "kustomization.yaml: {with_kustomization}"
        );
        assert_eq!(
            rules("clusters/staging"),
            whole,
            "kustomization.yaml: {with_kustomization}"
        );
    }
}
