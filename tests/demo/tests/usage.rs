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
            "[possible values: markercheck, fleetlint, unstick, podresolve, cutover, realcluster, gatewaycheck, immutable, automation, auth-http, auth-token, servicelinks, examples]"
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

/// `./demo` with no `--step` runs every step: the script's default `offline=(...)` and
/// `cluster=(...)` lists together hold exactly the binary's steps (its `--step` possible
/// values). A step missing there was silently skipped by `./demo` (servicelinks, found by a
/// fresh-user trial).
#[test]
fn the_scripts_default_steps_are_every_step_of_the_binary() {
    let script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../demo")).unwrap();
    let list = |var: &str| -> Vec<String> {
        let line = script
            .lines()
            .find(|l| l.starts_with(&format!("{var}=(")))
            .unwrap_or_else(|| panic!("./demo has no default {var}=(...) line"));
        line[var.len() + 2..line.rfind(')').unwrap()]
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let mut script_steps = list("offline");
    script_steps.extend(list("cluster"));
    script_steps.sort();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cluster-loop-demo"))
        .args(["--step", "nope"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let values = stderr
        .split("[possible values: ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap_or_else(|| panic!("{stderr}"));
    let mut binary_steps: Vec<String> = values.split(", ").map(str::to_owned).collect();
    binary_steps.sort();
    assert_eq!(script_steps, binary_steps);
}
