//! The demo's usage errors, without a cluster (its end-to-end run is the `demo` group of
//! tests/real). Also what makes `cargo test --workspace` build the `cluster-loop-demo` binary
//! (cargo builds a package's binaries for its integration tests) that tests/real runs.

#[test]
fn an_unknown_step_is_a_usage_error_listing_the_valid_ones() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-loop-demo"))
        .args(["--step", "nope"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("invalid value 'nope' for '--step <STEP>'"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "[possible values: markercheck, unstick, podresolve, cutover, fleetlint, realcluster, gatewaycheck, immutable, automation, auth-http, auth-token, servicelinks, examples]"
        ),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no step ran");
    // A comma list is checked element by element.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-loop-demo"))
        .args(["--step", "markercheck,cutovr"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
