//! `--to` is a usage question, decided before any kubeconfig is read: with `KUBECONFIG`
//! naming a file that does not exist, a bad URL exits 2 (not 3 "no kubeconfig found").

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
