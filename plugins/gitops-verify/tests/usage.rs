//! Usage errors exit 2 before any kubeconfig is read. (Also makes `cargo test --workspace`
//! build the binary the real-cluster tests run: cargo builds a package's binaries for its own
//! integration tests.)

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-gitops-verify");

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
fn bad_arguments_are_usage_errors_without_a_kubeconfig() {
    for (args, says) in [
        (&["--source", "ks/apps"][..], "is not a Flux source"),
        (&["--source", "flux-system"][..], "expected KIND/NAME"),
        (&["--source", "gitrepository/Bad_Name"][..], "lowercase"),
        (&["-A", "--source", "gitrepository/x"][..], "drop -A"),
        (&["ftp://example.com"][..], "only http:// and https://"),
        (&["not_a_host"][..], "neither a DNS name"),
        (
            &["--format", "github", "-o", "json"][..],
            "without -o json|yaml",
        ),
        (&["--timeout", "5m"][..], "--wait"),
        (&["--margin", "soon"][..], "soon"),
    ] {
        let (code, out, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            out.is_empty(),
            "{args:?}: usage errors print no document: {out}"
        );
    }
}

#[test]
fn an_unreadable_kubeconfig_is_a_cluster_error_with_a_document() {
    let (code, out, _) = run(&["-o", "json"]);
    assert_eq!(code, 3);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "ChainError");
    assert_eq!(v["exitCode"], 3);
}

#[test]
fn help_names_the_exit_codes() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for c in [
        "0   every link holds",
        "4   a link is still waiting",
        "130 interrupted",
    ] {
        assert!(out.contains(c), "{out}");
    }
}
