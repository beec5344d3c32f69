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
    // seed an untagged image in the app
    let d = std::fs::read_to_string(root.join("apps/app/deploy.yaml")).unwrap();
    f.write(
        "apps/app/deploy.yaml",
        &d.replace("ghcr.io/example/web:2.3.4", "ghcr.io/example/web:latest"),
    );
    let r = run(&mut base());
    assert_eq!(r.code, 1, "{}", r.stderr);
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
