//! Usage errors exit 2 before any kubeconfig is read. (Also makes `cargo test --workspace`
//! build the binary the real-cluster tests run: cargo builds a package's binaries for its own
//! integration tests, and tests/real fails every group when one is missing.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-gatewaycheck");

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_references_are_usage_errors_without_a_kubeconfig() {
    for (args, says) in [
        (&["gateway/"][..], "empty name"),
        (&["gateway/Bad_Name"][..], "names are lowercase"),
        (&["foo/bar"][..], "gateway/NAME or httproute/NAME"),
        (
            &["-A", "gateway/x"][..],
            "-A/--all-namespaces checks every object",
        ),
    ] {
        let (code, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn help_exits_0() {
    assert_eq!(run(&["--help"]).0, 0);
}
