//! The real binary: usage errors exit 2 before any cluster access; hostile input refused.

use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kubectl-podresolve"));
    // A kubeconfig that must never be read: validation happens first.
    c.env("KUBECONFIG", "/nonexistent/podresolve-test-kubeconfig");
    c
}

#[test]
fn hostile_hosts_are_refused_with_exit_2() {
    for bad in [
        "gitea.example.dev;id",
        "$(reboot)",
        "a b",
        "x\ny",
        "`id`",
        "under_score.example",
        "10.1",
    ] {
        let out = bin().arg("--").arg(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error: host "), "{bad:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = bin().arg("--").arg("-oProxyCommand=x").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = bin().arg("--").arg("-flag").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("starts with '-'"));
    let long = format!("{}.example", "a".repeat(64));
    let out = bin().arg(&long).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// An image reference the runtime cannot parse is a usage error decided here (exit 2), not a
/// probe Job stuck in ErrImagePull (exit 1): `--image 'x;id'` used to create the Job.
#[test]
fn a_malformed_image_is_a_usage_error() {
    let out = bin()
        .args(["gitea.example.dev", "--image", "x;id"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: --image \"x;id\" is not an image reference: "),
        "{err}"
    );
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec!["gitea.example.dev", "--expect", "gitea"],
        vec!["gitea.example.dev", "--tls=70000"],
        vec!["gitea.example.dev", "--git", "--upload-pack=touch /tmp/x"],
        vec!["gitea.example.dev", "--git=ext::sh -c id"],
        vec!["gitea.example.dev", "--timeout", "1s"],
        vec!["gitea.example.dev", "--timeout", "soon"],
        vec!["gitea.example.dev", "--from", "svc/x"],
        vec!["gitea.example.dev", "--image", "alpine 3"],
        vec!["gitea.example.dev", "--image", "x;id"],
        vec!["gitea.example.dev", "--image", "Alpine:3.22"],
        vec!["gitea.example.dev", "--image", "alpine:"],
        vec![],
        // -A belongs to --cleanup; a namespace the cluster would refuse is refused here.
        vec!["gitea.example.dev", "-A"],
        vec!["gitea.example.dev", "-n", "Bad_NS"],
        vec!["--cleanup", "-n", "Bad_NS"],
    ] {
        let out = bin().args(&args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn git_url_credentials_are_refused_and_never_echoed() {
    let out = bin()
        .args([
            "gitea.example.dev",
            "--git",
            "http://user:S3cr3tPw@gitea.example.dev/x.git",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("S3cr3tPw"), "{err}");
    assert!(!err.contains("user:S"), "{err}");
    assert!(
        err.starts_with(
            "error: --git: the URL carries credentials (http://gitea.example.dev/x.git with its user:password part removed)"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "kubectl cutover gitrepo/NAME --to URL --secret SECRET --dry-run --verify-in-cluster"
        ),
        "{err}"
    );
}

/// Pasting an example must work: at 80 and 200 columns every Examples line is a comment, a
/// whole `kubectl` command, or a continuation after a line ending in ` \`.
#[test]
fn help_examples_never_wrap_mid_command() {
    for cols in ["80", "200"] {
        let out = bin().env("COLUMNS", cols).arg("--help").output().unwrap();
        let s = String::from_utf8_lossy(&out.stdout);
        let ex = s.split("Examples:\n").nth(1).unwrap();
        let ex = ex.split("\nExit codes:").next().unwrap();
        let mut prev = "";
        let mut commands = 0;
        for line in ex.lines() {
            if line.starts_with("      ") {
                assert!(
                    prev.ends_with(" \\"),
                    "{cols} cols: {line:?} after {prev:?}"
                );
            } else if line.starts_with("  kubectl ") {
                commands += 1;
            } else {
                assert!(
                    line.is_empty() || line.starts_with("  # "),
                    "{cols} cols: wrapped line {line:?}"
                );
            }
            prev = line;
        }
        assert_eq!(commands, 7, "{ex}");
        assert!(
            ex.contains("  kubectl podresolve gitea.prod.example.dev --tls \\\n      --git https://gitea.prod.example.dev/flux/fleet.git\n"),
            "{ex}"
        );
        assert!(
            ex.contains("  kubectl podresolve completion -n team\n"),
            "{ex}"
        );
    }
}

/// `completion` is a host unless followed by a completion subcommand (a Service may be named
/// `completion`); `completion script` is still the completion command.
#[test]
fn completion_is_a_host_unless_followed_by_a_subcommand() {
    for args in [
        vec!["completion", "--timeout", "1s"],
        vec!["--timeout", "1s", "--", "completion"],
        vec!["completion", "registry", "--timeout", "1s"],
    ] {
        let out = bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err,
            "error: --timeout 1s is too short: a probe pod needs at least 5s to be scheduled and run\n",
            "{args:?}: parsed as podresolve hosts"
        );
    }
    let out = bin().args(["completion", "script"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("exec kubectl-podresolve __complete \"$@\""),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn help_has_examples_and_exit_codes() {
    let out = bin().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("--expect 192.168.2.20"));
    assert!(s.contains("--from deploy/source-controller"));
    assert!(s.contains("Exit codes:"));
}

#[test]
fn unreachable_cluster_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("config");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: team\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let out = bin()
        .env("KUBECONFIG", &kc)
        .args(["gitea.example.dev", "--timeout", "10s"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
