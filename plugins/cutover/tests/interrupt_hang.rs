//! SIGINT/SIGTERM while the API server hangs: an endpoint that accepts connections and never
//! answers, with no `--request-timeout`. The read-only phases (preflight, --finish) must end at
//! once with exit 130 and one stderr line, not wait for a client timeout and exit 3.

/// The plugin under SIGINT/SIGTERM while its API server hangs ([`twin::testkit::signal_while_api_hangs`]).
async fn signal_while_hanging(args: &[&str], signal: &str) -> (Option<i32>, String) {
    twin::testkit::signal_while_api_hangs(env!("CARGO_BIN_EXE_kubectl-cutover"), args, signal).await
}

#[tokio::test]
async fn sigint_during_hanging_preflight_exits_130() {
    let (code, err) = signal_while_hanging(
        &[
            "gitrepo/flux-system",
            "--to",
            "https://git.example.test/org/fleet.git",
            "--dry-run",
        ],
        "-INT",
    )
    .await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGINT: preflight stopped, nothing changed"),
        "stderr: {err}"
    );
}

#[tokio::test]
async fn sigterm_during_hanging_preflight_exits_130() {
    let (code, err) = signal_while_hanging(
        &[
            "gitrepo/flux-system",
            "--to",
            "https://git.example.test/org/fleet.git",
            "--yes",
        ],
        "-TERM",
    )
    .await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(err.contains("interrupted by SIGTERM"), "stderr: {err}");
}

#[tokio::test]
async fn sigint_during_hanging_finish_exits_130() {
    let (code, err) = signal_while_hanging(&["gitrepo/flux-system", "--finish"], "-INT").await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGINT: --finish stopped"),
        "stderr: {err}"
    );
}

#[tokio::test]
async fn sigint_during_hanging_reads_before_the_in_cluster_probe_exits_130() {
    let (code, err) = signal_while_hanging(
        &[
            "gitrepo/flux-system",
            "--to",
            "https://git.example.test/org/fleet.git",
            "--dry-run",
            "--verify-in-cluster",
        ],
        "-INT",
    )
    .await;
    assert_eq!(code, Some(130), "stderr: {err}");
    assert!(
        err.contains("interrupted by SIGINT: preflight stopped, nothing changed"),
        "stderr: {err}"
    );
}
