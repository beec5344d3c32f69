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
    // The proof contract is in --help, as in docs/unstick.md.
    for part in [
        "observedGeneration == generation",
        "lastAttemptedRevision == lastAppliedRevision == the source's artifact revision",
        "lastHandledReconcileAt == our requestedAt",
        "once nothing upstream moves",
    ] {
        assert!(stdout.contains(part), "--help lacks {part:?}:\n{stdout}");
    }
    let readme = include_str!("../../../../docs/unstick.md");
    for part in [
        "`status.observedGeneration` == `metadata.generation`",
        "`status.lastHandledReconcileAt` == our `requestedAt`",
        "`--problems`",
    ] {
        assert!(readme.contains(part), "docs/unstick.md lacks {part:?}");
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
        // Names the cluster would refuse are refused here (shared clap value parsers).
        ("ks/apps -n Bad_NS", "\"Bad_NS\" is not a namespace name"),
        (
            "--all --namespace Bad_NS",
            "\"Bad_NS\" is not a namespace name",
        ),
        (
            "ks/apps --controller-name Bad_x",
            "name \"Bad_x\" contains 'B'",
        ),
        (
            "ks/apps --controller-namespace flux_system",
            "\"flux_system\" is not a namespace name",
        ),
        // -A and --problems belong to the fleet view: never silently ignored.
        (
            "ks/flux-system -A --dry-run",
            "-A/--all-namespaces only works with --all",
        ),
        ("ks/apps --problems", "--problems only works with --all"),
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

/// `-o json|yaml` keeps a document on stdout when the run ends in an error (exit 3): the
/// shared shape `{apiVersion, kind: UnstickError, exitCode, error}`, `error` being the
/// message printed on stderr. Usage errors (exit 2) print no document.
#[test]
fn an_error_run_prints_the_shared_error_document() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-kubeconfig");
    for (fmt, parse) in [
        (
            "json",
            (|s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap())
                as fn(&str) -> serde_json::Value,
        ),
        ("yaml", |s: &str| {
            serde_saphyr::from_str::<serde_json::Value>(s).unwrap()
        }),
    ] {
        let out = Command::new(BIN)
            .args(["ks/nosuch", "-o", fmt])
            .env("KUBECONFIG", &missing)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        let v = parse(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(v["apiVersion"], unstick::report::SCHEMA, "{v}");
        assert_eq!(v["kind"], "UnstickError", "{v}");
        assert_eq!(v["exitCode"], 3, "{v}");
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains("no kubeconfig found"), "{msg}");
        assert_eq!(stderr.trim_end(), format!("error: {msg}"));
    }
    let out = Command::new(BIN)
        .args(["ks/Bad_Name", "-o", "json"])
        .env("KUBECONFIG", &missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// Every `--help` example runs as written on `./demo --keep`: each Kustomization it names
/// (`ks/NAME`, no `-n`: flux-system) is one the demo applies, i.e. a Kustomization of
/// `kubectl kustomize clusters/dev` (real kubectl) other than the root `flux-system`, which
/// the demo leaves out (tests/demo step 2). The trial ran `ks/apps --with-source --yes`:
/// not found, exit 3.
#[test]
fn help_examples_name_kustomizations_of_the_demo_fleet() {
    let docs = crate::support::demo_objects();
    let demo: Vec<String> = docs
        .iter()
        .filter(|d| {
            d["kind"] == "Kustomization"
                && d["apiVersion"]
                    .as_str()
                    .is_some_and(|a| a.starts_with("kustomize.toolkit.fluxcd.io/"))
                && d["metadata"]["namespace"] == "flux-system"
                && d["metadata"]["name"] != "flux-system"
        })
        .filter_map(|d| d["metadata"]["name"].as_str().map(String::from))
        .collect();
    assert!(demo.contains(&"apps-wave-1".to_string()), "{demo:?}");
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let mut named = 0;
    for line in help.lines().map(str::trim) {
        let Some(args) = line.strip_prefix("kubectl unstick ") else {
            continue;
        };
        assert!(
            !args.split(' ').any(|a| a == "-n" || a == "--namespace"),
            "{line}"
        );
        for a in args.split(' ').filter_map(|a| a.strip_prefix("ks/")) {
            named += 1;
            assert!(
                demo.iter().any(|d| d == a),
                "--help example `{line}` names ks/{a}, which ./demo --keep does not have (it has {demo:?})"
            );
        }
    }
    assert!(named >= 5, "examples found: {named}\n{help}");
}
