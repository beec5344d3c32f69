//! The server's command line, decided before any kubeconfig is read or any MCP message is
//! exchanged. (Also makes `cargo test --workspace` build the binary the real-cluster tests
//! drive: cargo builds a package's binaries for its own integration tests.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-gitops-mcp");

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_names_every_tool_and_the_flags_that_add_write_tools() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for t in [
        "diagnose_kustomization",
        "fleet_report",
        "resolve_from_pod",
        "lint_markers",
        "simulate_automation",
        "lint_fleet",
        "preflight_source_move",
        "check_gateway",
        "--allow-write",
        "unstick and cutover",
        "--allow-context-switch",
        "mcpServers",
    ] {
        assert!(out.contains(t), "{t} missing from --help:\n{out}");
    }
}

#[test]
fn a_namespace_flag_and_a_missing_repo_are_usage_errors() {
    let (code, _, err) = run(&["-n", "flux-system"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("namespace argument"), "{err}");
    let (code, _, err) = run(&["--repo", "/nonexistent/fleet"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("/nonexistent/fleet: no such directory"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts:\n- name: dev\n  context: {cluster: c, user: u}\ncurrent-context: dev\n",
    )
    .unwrap();
    let (code, _, err) = run(&["--kubeconfig", kc.to_str().unwrap(), "--context", "nope"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--context \"nope\" is not in the kubeconfig (contexts: dev)"),
        "{err}"
    );
    let (code, _, err) = run(&["--no-such-flag"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn http_on_a_non_loopback_address_is_refused_unless_allowed_and_never_on_every_interface() {
    let (code, _, err) = run(&["--http", "192.0.2.10:8080"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a loopback address") && err.contains("--allow-non-loopback"),
        "{err}"
    );
    let (code, _, err) = run(&["--http", "0.0.0.0:8080", "--allow-non-loopback"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("(every interface) is never bound"), "{err}");
    let (code, _, err) = run(&["--http", "example.com:80"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("localhost:PORT"), "{err}");
    let (code, _, err) = run(&["--allow-non-loopback"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--http"), "{err}");
}
