//! `--to`, `--probe-timeout` and a missing confirmation are usage questions, decided before
//! any kubeconfig is read: with `KUBECONFIG` naming a file that does not exist, they exit 2
//! (not 3 "no kubeconfig found"), as the README's exit-code table says.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cutover");

#[test]
fn bad_to_url_exits_2_without_a_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    for to in [
        "not a url",
        "ftp://host/repo.git",
        "https://user:pw@host/r.git",
    ] {
        let out = Command::new(BIN)
            .args(["gitrepository/flux-system", "--to", to, "--dry-run"])
            .env("KUBECONFIG", &missing)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--to {to:?}: {stderr}");
        assert!(stderr.contains("--to"), "--to {to:?}: {stderr}");
    }
}

/// A `--probe-timeout` under 5s, and a change without `--yes` from a stdin that is not a
/// terminal, are wrong on any cluster: exit 2 before the kubeconfig (both were decided after
/// the preflight had read the cluster).
#[test]
fn short_probe_timeout_and_no_confirmation_exit_2_without_a_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    let to = "https://git.example.dev/org/fleet.git";
    for (args, want) in [
        (
            &["--dry-run", "--verify-in-cluster", "--probe-timeout", "2s"][..],
            "--probe-timeout 2s is too short",
        ),
        (&[][..], "stdin is not a terminal; pass --yes"),
    ] {
        let out = Command::new(BIN)
            .args(["gitrepository/flux-system", "--to", to])
            .args(args)
            .env("KUBECONFIG", &missing)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `--dry-run --yes` asks for two opposite things (change nothing; change without asking):
/// refused as kubectl unstick refuses it, exit 2 before the kubeconfig, nothing on stdout
/// (session 6 trial: cutover accepted it and ran the dry run).
#[test]
fn dry_run_with_yes_exits_2_without_a_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    for yes in ["--yes", "-y"] {
        let out = Command::new(BIN)
            .args([
                "gitrepository/flux-system",
                "--to",
                "https://git.example.dev/org/fleet.git",
                "--dry-run",
                yes,
            ])
            .env("KUBECONFIG", &missing)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{yes}: {stderr}");
        assert!(
            stderr.contains("the argument '--dry-run' cannot be used with '--yes'")
                || stderr.contains("the argument '--yes' cannot be used with '--dry-run'"),
            "{yes}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{yes}");
    }
}

/// Names and paths the cluster or git would refuse are refused before the kubeconfig
/// (shared clap value parsers): `-n` an RFC 1123 label, `--secret` a DNS-1123 subdomain,
/// `--repo` a Git work tree (real git).
#[test]
fn bad_namespace_secret_and_repo_exit_2_without_a_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let plain = plain.to_str().unwrap().to_string();
    let to = "https://git.example.dev/org/fleet.git";
    for (args, want) in [
        (
            vec!["-n", "Bad_NS"],
            "\"Bad_NS\" is not a namespace name".to_string(),
        ),
        (
            vec!["--secret", "Bad_S"],
            "name \"Bad_S\" contains 'B'".to_string(),
        ),
        (
            vec!["--repo", plain.as_str()],
            format!("{plain}: not a Git repository"),
        ),
    ] {
        let out = Command::new(BIN)
            .args(["gitrepository/flux-system", "--to", to, "--dry-run"])
            .args(&args)
            .env("KUBECONFIG", &missing)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
        assert!(!stderr.contains("kubeconfig"), "{args:?}: {stderr}");
    }
}
