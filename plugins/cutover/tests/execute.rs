//! kubectl cutover on the twin's prod-cutover scenario (source-controller and
//! kustomize-controller models fetching with real git from two HTTPS Git servers): only what
//! the real cluster cannot show deterministically. Every other execute/--finish scenario runs
//! on the real controllers in `real_execute.rs`.
//!
//! Kept here: the root Kustomization reverting the live patch without --hold-root. On the
//! real cluster the revert needs kustomize-controller to run while source-controller has not
//! yet proven the new URL. The only deterministic way to keep source-controller from proving
//! it is to stop its process, but kustomize-controller downloads the artifact from that same
//! process (its storage server), so the root cannot run either; with source-controller
//! running, it proves the new URL within seconds and which comes first is timing.
use std::time::Duration;

use serde_json::Value;
use twin::flux::cluster::s;
use twin::scenario::RunningScenario;
use twin::testkit::{
    FLUX_SYSTEM, PluginRun, basic_auth_secret, cond_status, get, gitrepo, ks, run_plugin,
    start_shipped, wait,
};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cutover");
/// Real-time bound on one plugin run (its own --timeout is at most 120s).
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// Real-time bound on waiting for the twin's controllers.
const T: Duration = Duration::from_secs(60);

async fn cutover(sc: &RunningScenario, args: &[&str]) -> PluginRun {
    run_plugin(BIN, sc.twin.kubeconfig_path(), args, RUN_TIMEOUT).await
}

/// Waits until the root Kustomization `flux-system` has applied `revision`.
async fn root_applied(sc: &RunningScenario, revision: &str) {
    wait(sc, &ks(FLUX_SYSTEM), T, |o| {
        s(o, "/status/lastAppliedRevision") == revision
    })
    .await;
}

/// Starts the scenario and waits until prod runs the laptop's head.
async fn start() -> (RunningScenario, String) {
    let sc = start_shipped("prod-cutover-start").await;
    let head = sc.git["laptop"].head("org/fleet", "main").unwrap();
    let want = format!("main@sha1:{head}");
    wait(&sc, &gitrepo(FLUX_SYSTEM), T, |o| {
        cond_status(o, "Ready", "True") && s(o, "/status/artifact/revision") == want
    })
    .await;
    root_applied(&sc, &want).await;
    (sc, head)
}

/// A Secret for the prod server: its token and its CA.
fn prod_secret(sc: &RunningScenario, name: &str, token: &str) {
    let ca = sc.git["prod"].ca_pem();
    basic_auth_secret(&sc.twin, FLUX_SYSTEM, name, "flux", token, Some(ca));
}

/// The world after the operator's step 2: prod's main is level with what the cluster runs and
/// a `prod-creds` Secret holds prod's token and CA. Returns the scenario and the new URL.
async fn leveled() -> (RunningScenario, String) {
    let (sc, head) = start().await;
    level_prod(&sc, &head);
    prod_secret(&sc, "prod-creds", "prod-token");
    let to = sc.git["prod"].url_https("org/fleet");
    (sc, to)
}

/// `gitrepo/flux-system --to TO --secret prod-creds --yes --allow-loopback` followed by
/// `extra`. The twin's Git servers listen on 127.0.0.1 and its source-controller model runs
/// on this machine, so the loopback URL is reachable from "the cluster" here: the case
/// --allow-loopback exists for (hostNetwork on a cluster running on this machine).
fn args<'a>(to: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "gitrepo/flux-system",
        "--to",
        to,
        "--secret",
        "prod-creds",
        "--yes",
        "--allow-loopback",
    ];
    v.extend_from_slice(extra);
    v
}

/// Brings prod's main level with the laptop's (the operator's step 2).
fn level_prod(sc: &RunningScenario, head: &str) {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(sc.git["prod"].repo_path("org/fleet"))
        .arg("fetch")
        .arg("--quiet")
        .arg(sc.git["laptop"].repo_path("org/fleet"))
        .arg("refs/heads/main:refs/heads/laptop-main")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    sc.git["prod"]
        .set_branch("org/fleet", "main", head)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hold_the_root_kustomization_reverts_the_live_patch() {
    let (sc, to) = leveled().await;
    // The source model is held, so only the root Kustomization acts on the patched object:
    // it re-applies the committed (old) URL, and the plugin rolls back and says why.
    stop_source(&sc);
    let r = cutover(&sc, &args(&to, &["--timeout", "60s"])).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "spec.url was changed back to {} by Kustomization flux-system",
            sc.git["laptop"].url_https("org/fleet")
        )),
        "{}",
        r.stdout
    );
    assert_eq!(live(&sc).await["spec"]["secretRef"]["name"], "flux-system");
}

/// Stops the source-controller model, so that the patch is never handled: makes "what happens
/// after the patch" deterministic.
fn stop_source(sc: &RunningScenario) {
    sc.flux.as_ref().unwrap().source.stop();
}

/// The GitRepository `flux-system` as it is now.
async fn live(sc: &RunningScenario) -> Value {
    get(sc, &gitrepo(FLUX_SYSTEM)).await
}
