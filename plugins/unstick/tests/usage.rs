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
}
