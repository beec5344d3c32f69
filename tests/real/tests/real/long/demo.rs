//! The demo as an end-to-end test: the real `cluster-loop-demo` binary replays every step with
//! the real plugin binaries (built by `cargo test --workspace`, which builds every package's
//! binaries into the same target directory): unstick, podresolve, cutover and realcluster on
//! ONE real cluster (tests/realcluster), markercheck and fleetlint offline.
use std::path::PathBuf;

fn bin_dir() -> PathBuf {
    // target/debug/deps/demo-<hash> -> target/debug
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

#[test]
fn every_step_of_the_demo_proves_its_outcome() {
    crate::assert_fresh();
    let dir = bin_dir();
    for p in [
        "unstick",
        "podresolve",
        "markercheck",
        "cutover",
        "fleetlint",
    ] {
        assert!(
            dir.join(format!("kubectl-{p}")).is_file(),
            "kubectl-{p} is not built in {}: run `cargo test --workspace` (or `cargo build --workspace --bins` first)",
            dir.display()
        );
    }
    let out = std::process::Command::new(crate::bin!("cluster-loop-demo"))
        .arg("--bin-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{stderr}");
    let steps = [
        "1. markercheck",
        "2. fleetlint",
        "3. unstick",
        "4. podresolve",
        "5. cutover",
        "6. realcluster",
        "7. gatewaycheck",
        "8. immutable",
        "9. automation",
        "10. auth-http",
        "11. auth-token",
        "12. servicelinks",
        "13. examples",
    ];
    for step in steps {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with("PASS") && l.contains(step)),
            "step {step} did not pass:\n{stdout}"
        );
    }
    let summary = format!("demo: {} passed, 0 failed", steps.len());
    assert!(stdout.contains(&summary), "{stdout}");
    // The cluster steps share one real cluster, started once.
    assert_eq!(
        stdout.matches("starting the real cluster").count(),
        1,
        "{stdout}"
    );
    // Their numbers are the ones of `steps` above (one list to keep in step with the demo).
    for id in [
        "unstick",
        "podresolve",
        "cutover",
        "gatewaycheck",
        "auth-http",
        "auth-token",
        "examples",
    ] {
        let step = steps
            .iter()
            .find(|s| s.ends_with(&format!(". {id}")))
            .unwrap_or_else(|| panic!("{id} is not a step of the demo"));
        assert!(
            stdout
                .lines()
                .any(|l| l.contains("PASS") && l.contains(step) && l.contains("(real cluster)")),
            "step {step} did not pass on the real cluster:\n{stdout}"
        );
    }
    // The fleet that --keep leaves runs podresolve by hand whenever the host can run probe
    // pods (the same condition the demo checks).
    if twin::podexec::missing_prerequisites().is_empty() {
        assert!(
            stdout.contains("PROVES: podresolve: podinfo-frontend from a pod in apps"),
            "{stdout}"
        );
    }
    assert!(!stdout.contains("FAILED:"), "{stdout}");
}
