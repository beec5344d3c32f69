//! Usage errors of `kubectl-gitops-pull`: exit 2, naming what is wrong, before any kubeconfig
//! is read (the kubeconfig given does not exist and is never opened).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-gitops-pull");

fn run(args: &[&str], dir: &std::path::Path) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(args)
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_repo_that_is_not_a_git_checkout_is_exit_2_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let (code, err) = run(&["--repo", &d.path().display().to_string()], d.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--repo {}: not a Git repository",
            d.path().display()
        )),
        "{err}"
    );
    assert!(!err.contains("kubeconfig"), "{err}");
    // the default --repo is the current directory
    let (code, err) = run(&[], d.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--repo .: not a Git repository"), "{err}");
    let (code, err) = run(&["--repo", "/nonexistent/fleet"], d.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/nonexistent/fleet: no such directory"),
        "{err}"
    );
}

#[test]
fn bad_references_and_remotes_are_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let (code, err) = run(&["kustomization/apps", "--repo", "."], d.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("Kustomization is not supported here"), "{err}");
    let (code, err) = run(&["--remote", "origin"], d.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("never rewrites origin"), "{err}");
}
