//! clap's usage line names the command as the user types it, `kubectl unstick` (kubectl
//! runs the `kubectl-unstick` binary), and a usage error exits 2.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-unstick");

#[test]
fn usage_line_reads_kubectl_unstick() {
    let out = Command::new(BIN).arg("--bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("Usage: kubectl unstick [OPTIONS] [KS]"),
        "{stderr}"
    );
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("Usage: kubectl unstick [OPTIONS] [KS]"),
        "{stdout}"
    );
    assert!(!stdout.contains("Usage: kubectl-unstick"), "{stdout}");
    // The proof contract is in --help, as in the README.
    for part in [
        "observedGeneration == generation",
        "lastAttemptedRevision == lastAppliedRevision == the source's artifact revision",
        "lastHandledReconcileAt == our requestedAt",
        "once nothing upstream moves",
    ] {
        assert!(stdout.contains(part), "--help lacks {part:?}:\n{stdout}");
    }
    let readme = include_str!("../../README.md");
    for part in [
        "`status.observedGeneration` == `metadata.generation`",
        "`status.lastHandledReconcileAt` == our `requestedAt`",
        "`--problems`",
    ] {
        assert!(readme.contains(part), "README lacks {part:?}");
    }
}

/// Usage errors are decided before any kubeconfig is read: with `KUBECONFIG` naming a file
/// that does not exist (and no in-cluster service account), a bad reference exits 2 with a
/// message naming the argument, never 3 "no kubeconfig found".
#[test]
fn usage_errors_exit_2_without_a_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    for (arg, says) in [
        ("ks/", "\"ks/\""),
        ("foo/bar/baz", "more than one slash"),
        ("deploy/foo", "not supported"),
        ("ks/Bad_Name", "\"ks/Bad_Name\""),
        // Contradictory flags: --dry-run changes nothing, --yes confirms a change.
        ("ks/apps --dry-run --yes", "cannot be used with"),
    ] {
        let out = Command::new(BIN)
            .args(arg.split(' '))
            .env("KUBECONFIG", &missing)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {stderr}");
        assert!(stderr.contains(says), "{arg}: {stderr}");
        assert!(!stderr.contains("kubeconfig"), "{arg}: {stderr}");
    }
    // The same KUBECONFIG with a valid reference reaches the cluster step and fails there
    // (exit 3), so the 2s above are the arguments' doing.
    let out = Command::new(BIN)
        .arg("ks/apps")
        .env("KUBECONFIG", &missing)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
