//! Kubeconfig errors exit 3 (cluster/config), whether the file or name came from a flag or
//! from KUBECONFIG, and the message names the file or context. Nothing is contacted.
use std::process::Command;

fn run(args: &[&str], kubeconfig_env: Option<&std::path::Path>) -> (Option<i32>, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kubectl-cutover"));
    c.args(["gitrepo/flux-system", "--finish"])
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent-home");
    if let Some(k) = kubeconfig_env {
        c.env("KUBECONFIG", k);
    }
    let out = c.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const GOOD: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"http://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: dev\n  context: {cluster: c, user: u}\ncurrent-context: dev\n";

#[test]
fn kubeconfig_errors_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    std::fs::write(&good, GOOD).unwrap();
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, "apiVersion: v1\nclusters: [\n  - {name: x\n").unwrap();
    let missing = dir.path().join("missing");

    let (code, err) = run(&["--kubeconfig", missing.to_str().unwrap()], None);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("file does not exist"), "{err}");

    let (code, err) = run(
        &["--kubeconfig", good.to_str().unwrap(), "--context", "nope"],
        None,
    );
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("--context \"nope\" not found"), "{err}");

    let (code, err) = run(&["--kubeconfig", garbage.to_str().unwrap()], None);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains(&format!(
            "error: cannot load kubeconfig file \"{}\"",
            garbage.display()
        )),
        "{err}"
    );
    assert_eq!(err.to_lowercase().matches("error").count(), 1, "{err}");

    // Session 6 trial: with -o json an exit-3 run prints the error document on stdout (it
    // printed nothing), the same message as stderr's `error: ` line.
    for format in ["json", "yaml"] {
        let out = Command::new(env!("CARGO_BIN_EXE_kubectl-cutover"))
            .args([
                "gitrepo/flux-system",
                "--finish",
                "-o",
                format,
                "--kubeconfig",
            ])
            .arg(&missing)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        let message = stderr
            .strip_prefix("error: ")
            .and_then(|m| m.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("{stderr}"));
        let doc: serde_json::Value = if format == "json" {
            serde_json::from_slice(&out.stdout).unwrap()
        } else {
            serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap()
        };
        assert_eq!(
            doc,
            serde_json::json!({"apiVersion": "cutover.cluster-loop.dev/v1",
                "kind": "CutoverError", "exitCode": 3, "error": message}),
            "{format}"
        );
    }

    // The same garbage file through KUBECONFIG: the same exit code.
    let (code, err) = run(&[], Some(&garbage));
    assert_eq!(code, Some(3), "{err}");

    // A usage error is still 2: a bad reference, decided before any kubeconfig is read.
    let mut c = Command::new(env!("CARGO_BIN_EXE_kubectl-cutover"));
    let out = c
        .args(["ks/flux-system", "--finish", "--kubeconfig"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
