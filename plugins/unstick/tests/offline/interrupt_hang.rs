//! SIGINT/SIGTERM while the API server hangs: an endpoint that accepts connections and never
//! answers, with no `--request-timeout`. The read-only phases (the first diagnosis, --all) must end at
//! once with exit 130 and one stderr line, not wait for a client timeout and exit 3.

/// The plugin under SIGINT/SIGTERM while its API server hangs ([`twin::testkit::signal_while_api_hangs`]).
async fn signal_while_hanging(args: &[&str], signal: &str) -> (Option<i32>, String) {
    twin::testkit::signal_while_api_hangs(env!("CARGO_BIN_EXE_kubectl-unstick"), args, signal).await
}

#[tokio::test]
async fn sigint_during_hanging_diagnosis_exits_130() {
    let (code, err) = signal_while_hanging(&["ks/apps", "--yes"], "-INT").await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGINT: nothing changed"),
        "stderr: {err}"
    );
}

#[tokio::test]
async fn sigterm_during_hanging_fleet_view_exits_130() {
    let (code, err) = signal_while_hanging(&["--all", "-A"], "-TERM").await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGTERM: nothing changed"),
        "stderr: {err}"
    );
}
