//! kubectl cutover end to end on the twin's prod-cutover scenario: source-controller and
//! kustomize-controller models fetch with real git from two HTTPS Git servers.
use std::time::Duration;

use serde_json::{Value, json};
use twin::flux::cluster::ObjKey;
use twin::flux::cluster::s;
use twin::scenario::RunningScenario;
use twin::testkit::{
    FLUX_SYSTEM, PluginRun, basic_auth_secret, commit, cond_status, get, gitrepo, interrupt, ks,
    plugin_command, run_command, run_plugin, start_shipped, wait,
};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cutover");
/// Real-time bound on one plugin run (its own --timeout is at most 120s).
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// Real-time bound on waiting for the twin's controllers.
const T: Duration = Duration::from_secs(60);

/// The top-level keys of a pretty-printed JSON object, in the order printed (two-space indent).
fn top_level_keys(json: &str) -> Vec<String> {
    json.lines()
        .filter_map(|l| l.strip_prefix("  \""))
        .filter_map(|l| l.split_once('"').map(|(k, _)| k.to_string()))
        .collect()
}

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
async fn behind_is_refused_then_level_cuts_over_at_the_same_revision() {
    let (sc, head) = start().await;
    prod_secret(&sc, "prod-creds", "prod-token");
    let to = sc.git["prod"].url_https("org/fleet");
    let r = cutover(&sc, &args(&to, &[])).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("the new server's main is 1 commit behind what the cluster runs"),
        "{}",
        r.stdout
    );
    assert_eq!(
        live(&sc).await["spec"]["url"],
        json!(sc.git["laptop"].url_https("org/fleet")),
        "a refused cutover changes nothing"
    );

    level_prod(&sc, &head);
    let r = cutover(
        &sc,
        &args(&to, &["--hold-root", "--timeout", "60s", "-o", "json"]),
    )
    .await;
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        top_level_keys(&r.stdout)[..5],
        ["apiVersion", "kind", "mode", "preflight", "patch"],
        "declaration order, not alphabetical"
    );
    let v = r.json();
    assert_eq!(v["apiVersion"], "cutover.cluster-loop.dev/v1");
    assert_eq!(v["kind"], "CutoverReport");
    assert_eq!(v["mode"], "execute");
    assert_eq!(v["result"]["ending"], "cutOver");
    assert_eq!(v["result"]["revision"], json!(format!("main@sha1:{head}")));
    assert_eq!(v["preflight"]["relation"]["relation"], "identical");
    // The authored value is still the laptop URL: reported with the file and the change.
    assert_eq!(
        v["preflight"]["authored"]["locations"][0]["file"],
        "clusters/prod/flux-system.yaml"
    );
    assert!(
        v["preflight"]["authoredPatch"][0]["diff"]
            .as_str()
            .unwrap()
            .contains(&format!("+  url: {to}"))
    );
    // The source really fetched from prod with the new secret.
    let o = live(&sc).await;
    assert_eq!(o["spec"]["url"], json!(to));
    assert_eq!(o["spec"]["secretRef"]["name"], "prod-creds");
    let patches: Vec<_> = sc
        .twin
        .requests()
        .into_iter()
        .filter(|r| r.verb == "patch" && r.resource == "gitrepositories")
        .collect();
    // The cutover patch (with the in-flight mark), then the one that removes the mark once
    // the new URL is proven.
    assert_eq!(
        patches.len(),
        2,
        "the patch and the mark's removal: {patches:?}"
    );
    for p in &patches {
        assert!(p.query.contains("fieldManager=kubectl-cutover"), "{p:?}");
    }
    assert!(
        o["metadata"]["annotations"]
            .get("cutover.cluster-loop.dev/in-flight")
            .is_none(),
        "a proven cutover leaves no in-flight mark: {o}"
    );
    assert_eq!(
        o["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/reconcile"], "disabled",
        "--hold-root keeps the root Kustomization from reverting the window"
    );
    for s in ["prod-token", "laptop-token"] {
        assert!(
            !r.stdout.contains(s) && !r.stderr.contains(s),
            "secret leaked"
        );
    }

    // --finish before the authored change lands: not verified, the hold stays.
    let f = cutover(&sc, &["gitrepo/flux-system", "--finish"]).await;
    assert_eq!(f.code, 1, "{}\n{}", f.stdout, f.stderr);
    assert!(f.stdout.contains("not verified"), "{}", f.stdout);
    assert_eq!(
        live(&sc).await["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/reconcile"],
        "disabled"
    );

    // Land the authored change through the window (on the new server), as the plan said.
    let file = sc.git["prod"]
        .read_file("org/fleet", "main", "clusters/prod/flux-system.yaml")
        .unwrap();
    let text = String::from_utf8(file)
        .unwrap()
        .replace(&sc.git["laptop"].url_https("org/fleet"), &to)
        .replace(
            "secretRef:\n    name: flux-system",
            "secretRef:\n    name: prod-creds",
        );
    let landed = commit(
        &sc,
        "prod",
        "org/fleet",
        vec![twin::git::Change::write(
            "clusters/prod/flux-system.yaml",
            text,
        )],
        "flux-system: move the source to the prod Git server",
    )
    .await;
    let want = format!("main@sha1:{landed}");
    root_applied(&sc, &want).await;
    let f = cutover(&sc, &["gitrepo/flux-system", "--finish", "-o", "json"]).await;
    assert_eq!(f.code, 0, "{}\n{}", f.stdout, f.stderr);
    assert_eq!(
        top_level_keys(&f.stdout)[..3],
        ["apiVersion", "kind", "verified"]
    );
    let v = f.json();
    assert_eq!(v["apiVersion"], "cutover.cluster-loop.dev/v1");
    assert_eq!(v["kind"], "CutoverFinishReport");
    assert_eq!(v["verified"], true);
    assert_eq!(v["holdRemoved"], true);
    assert_eq!(v["rootRevision"], json!(want));
    assert_eq!(v["authoredUrl"], json!(to));
    assert_eq!(v["authoredAt"], "clusters/prod/flux-system.yaml:8");
    let l = live(&sc).await;
    assert!(
        l["metadata"]["annotations"]
            .get("kustomize.toolkit.fluxcd.io/reconcile")
            .is_none(),
        "hold removed: {l}"
    );
    assert_eq!(l["spec"]["url"], json!(to));
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

/// Stops the source-controller model, so that the next patch is not handled until
/// [`restart_source`]: makes "what happens after the patch" deterministic.
fn stop_source(sc: &RunningScenario) {
    sc.flux.as_ref().unwrap().source.stop();
}

fn restart_source(sc: &RunningScenario) -> std::sync::Arc<twin::flux::source::SourceController> {
    twin::flux::source::SourceController::start(sc.cluster(), sc.options.clone())
}

/// The GitRepository `flux-system` as it is now.
async fn live(sc: &RunningScenario) -> Value {
    get(sc, &gitrepo(FLUX_SYSTEM)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_failing_after_the_patch_is_rolled_back() {
    let (sc, to) = leveled().await;
    // Preflight passes with prod-creds; the token is revoked between the patch and the
    // controller's fetch (the source model is held until then): source-controller fails with
    // "authentication required" and the plugin restores the old spec.
    stop_source(&sc);
    let child = tokio::spawn({
        let kubeconfig = sc.twin.kubeconfig_path().to_path_buf();
        let args: Vec<String> = args(&to, &["--hold-root", "--timeout", "60s"])
            .into_iter()
            .map(String::from)
            .collect();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_plugin(BIN, &kubeconfig, &args, RUN_TIMEOUT).await
        }
    });
    wait(&sc, &gitrepo(FLUX_SYSTEM), T, |o| {
        o["spec"]["secretRef"]["name"] == "prod-creds"
    })
    .await;
    assert!(sc.git["prod"].revoke_token("org/fleet", "prod-token"));
    let _source = restart_source(&sc);
    let r = child.await.unwrap();
    let (stdout, stderr) = (&r.stdout, &r.stderr);
    assert_eq!(r.code, 1, "{stdout}\n{stderr}\nlive: {}", live(&sc).await);
    assert!(stdout.contains("rolled back:"), "{stdout}");
    assert!(stdout.contains("authentication required"), "{stdout}");
    let l = live(&sc).await;
    assert_eq!(
        l["spec"]["url"],
        json!(sc.git["laptop"].url_https("org/fleet"))
    );
    assert_eq!(l["spec"]["secretRef"]["name"], "flux-system");
    assert!(
        l["metadata"]["annotations"]
            .get("kustomize.toolkit.fluxcd.io/reconcile")
            .is_none(),
        "the hold this run added is removed by the rollback: {l}"
    );
    assert!(!stdout.contains("prod-token") && !stderr.contains("prod-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_wait_rolls_back() {
    let (sc, to) = leveled().await;
    // No controller handles the patch, so the plugin is mid-wait when SIGINT arrives.
    stop_source(&sc);
    let child = plugin_command(
        BIN,
        sc.twin.kubeconfig_path(),
        &args(&to, &["--hold-root", "--timeout", "120s"]),
    )
    .spawn()
    .unwrap();
    wait(&sc, &gitrepo(FLUX_SYSTEM), T, |o| {
        o["spec"]["secretRef"]["name"] == "prod-creds"
    })
    .await;
    let out = interrupt(child, T).await;
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    // Interrupted and rolled back: 130, like every interrupted run.
    assert_eq!(out.code, 130, "{stdout}\n{stderr}");
    assert!(stdout.contains("interrupted"), "{stdout}");
    let l = live(&sc).await;
    assert_eq!(
        l["spec"]["url"],
        json!(sc.git["laptop"].url_https("org/fleet"))
    );
    assert_eq!(l["spec"]["secretRef"]["name"], "flux-system");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_proof_before_the_deadline_is_rolled_back() {
    let (sc, to) = leveled().await;
    stop_source(&sc);
    let r = cutover(&sc, &args(&to, &["--hold-root", "--timeout", "2s"])).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    // Issue 19: the rollback says what was missing, never reads like success.
    assert!(
        r.stdout.contains(
            "no proof within 2s: the new URL never answered: source-controller did not handle \
             the new spec (status.observedGeneration "
        ) && r.stdout.contains(&format!("), so {to} was never fetched")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("is still from the old URL's fetch"),
        "{}",
        r.stdout
    );
    assert_eq!(
        live(&sc).await["spec"]["url"],
        json!(sc.git["laptop"].url_https("org/fleet"))
    );
}

/// The HelmRelease `flux-system/gate` the root Kustomization health-checks in
/// [`root_blocked_in_health_checks`]. No helm-controller runs in the twin, so its status is
/// what the test writes.
fn gate() -> ObjKey {
    ObjKey::new(
        "helm.toolkit.fluxcd.io/v2",
        "HelmRelease",
        FLUX_SYSTEM,
        "gate",
    )
}

/// Sets the gate's Ready condition (`Unknown`: kstatus InProgress; `True`: Current).
fn set_gate(sc: &RunningScenario, status: &str) {
    let c = json!({"status": {"conditions": [{"type": "Ready", "status": status,
        "reason": if status == "True" { "InstallSucceeded" } else { "Progressing" },
        "message": "gate", "lastTransitionTime": "2026-12-01T00:00:00Z"}]}});
    sc.cluster()
        .merge_patch_status(&gate(), c, "helm-controller")
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Puts the root Kustomization mid-run, deterministically, with the real kustomize-controller
/// model: it gets a health check on the HelmRelease `gate` (kept InProgress) and a 100h
/// timeout, so its run stays at `Ready=Unknown Progressing: Reconciliation in progress`,
/// `Reconciling=True Running health checks for revision R ...` until [`set_gate`] `True`.
/// Returns the root as seen mid-run.
async fn root_blocked_in_health_checks(sc: &RunningScenario) -> Value {
    sc.cluster()
        .create(
            json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "gate", "namespace": FLUX_SYSTEM},
            "spec": {"interval": "10m", "chart": {"spec": {"chart": "gate",
                "sourceRef": {"kind": "HelmRepository", "name": "gate"}}}}}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    set_gate(sc, "Unknown");
    sc.cluster()
        .merge_patch(
            &ks(FLUX_SYSTEM),
            json!({"spec": {"timeout": "100h", "healthChecks": [{"apiVersion":
                "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "name": "gate",
                "namespace": FLUX_SYSTEM}]}}),
            "kubectl",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    wait(sc, &ks(FLUX_SYSTEM), T, |o| {
        cond_status(o, "Reconciling", "True")
            && twin::testkit::cond(o, "Reconciling")
                .is_some_and(|c| s(c, "/message").starts_with("Running health checks"))
    })
    .await
}

/// The annotation --hold-root sets (kustomize.toolkit.fluxcd.io/reconcile: disabled).
fn hold(sc: &RunningScenario) {
    sc.cluster()
        .merge_patch(
            &gitrepo(FLUX_SYSTEM),
            json!({"metadata": {"annotations": {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}}}),
            "kubectl-cutover",
        )
        .unwrap_or_else(|e| panic!("{e}"));
}

fn held(o: &Value) -> bool {
    o["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/reconcile"] == "disabled"
}

/// `--finish` while the root Kustomization is mid-run: with a short --timeout it says the run
/// was still in progress at the deadline (with the last condition), judges nothing and keeps
/// the hold; started again, it waits (progress on stderr) and ends verified once the run
/// completes, at the same revision. No timing: the run ends only when the test lets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_waits_for_a_root_run_in_progress_then_verifies() {
    let (sc, head) = start().await;
    let want = format!("main@sha1:{head}");
    hold(&sc);
    let mid = root_blocked_in_health_checks(&sc).await;
    assert_eq!(s(&mid, "/status/lastAppliedRevision"), want);

    // Deadline first: the run cannot finish, so this is exactly "still in progress".
    let f = cutover(
        &sc,
        &[
            "gitrepo/flux-system",
            "--finish",
            "--timeout",
            "2s",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(f.code, 1, "{}\n{}", f.stdout, f.stderr);
    let v = f.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["holdRemoved"], false);
    let p = &v["inProgressAtDeadline"];
    assert_eq!(p["object"], "Kustomization flux-system/flux-system", "{v}");
    assert_eq!(p["timeout"], "2s");
    let condition = p["condition"].as_str().unwrap();
    assert!(
        condition.starts_with("Ready=Unknown Progressing: Reconciliation in progress; Reconciling=True Progressing: Running health checks for revision"),
        "{condition}"
    );
    assert!(
        v["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("root Kustomization flux-system/flux-system was still mid-reconcile at the 2s deadline (--timeout): Ready=Unknown Progressing"),
        "{v}"
    );
    assert!(
        !f.stdout.contains("not verified") && !f.stdout.contains("is not Ready"),
        "a deadline is not a failed check: {}",
        f.stdout
    );
    assert!(
        f.stderr.contains(
            "root Kustomization flux-system/flux-system is mid-reconcile (Ready=Unknown Progressing"
        ),
        "progress on stderr: {}",
        f.stderr
    );
    assert!(
        held(&live(&sc).await),
        "the hold stays when nothing was judged"
    );
    // The table says the same in words.
    let f = cutover(&sc, &["gitrepo/flux-system", "--finish", "--timeout", "1s"]).await;
    assert_eq!(f.code, 1, "{}\n{}", f.stdout, f.stderr);
    assert!(
        f.stdout
            .contains("not judged: still mid-reconcile at the --timeout deadline (see above)"),
        "{}",
        f.stdout
    );

    // Now --finish starts while the run is in progress and must wait for it.
    let watches = |sc: &RunningScenario| {
        sc.twin
            .requests()
            .iter()
            .filter(|r| r.verb == "watch" && r.resource == "kustomizations")
            .count()
    };
    let before = watches(&sc);
    let child = tokio::spawn(run_command(
        plugin_command(
            BIN,
            sc.twin.kubeconfig_path(),
            &[
                "gitrepo/flux-system",
                "--finish",
                "--timeout",
                "5m",
                "-o",
                "json",
            ],
        ),
        RUN_TIMEOUT,
    ));
    // It is watching the root (the run still blocked): only then let the run complete.
    let since = std::time::Instant::now();
    while watches(&sc) == before {
        assert!(
            since.elapsed() < T,
            "--finish never watched the root Kustomization"
        );
        assert!(
            !child.is_finished(),
            "--finish ended before the run completed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cond_status(
        &get(&sc, &ks(FLUX_SYSTEM)).await,
        "Reconciling",
        "True"
    ));
    set_gate(&sc, "True");
    let f = child.await.unwrap();
    assert_eq!(f.code, 0, "{}\n{}", f.stdout, f.stderr);
    let v = f.json();
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["rootRevision"], json!(want));
    assert_eq!(v["holdRemoved"], true);
    assert!(v["inProgressAtDeadline"].is_null());
    assert!(
        f.stderr
            .contains("root Kustomization flux-system/flux-system is mid-reconcile (Ready=Unknown Progressing: Reconciliation in progress; Reconciling=True Progressing: Running health checks"),
        "{}",
        f.stderr
    );
    assert!(
        f.stderr
            .contains("root Kustomization flux-system/flux-system settled"),
        "{}",
        f.stderr
    );
    // The run really completed before the verdict: it is the only run that could record the
    // new generation (observedGeneration is written on success only). Its Ready condition is
    // not read here: the next periodic run (10m: 6 real seconds on the ×0.01 clock) may
    // already have started.
    let root = get(&sc, &ks(FLUX_SYSTEM)).await;
    assert_ne!(
        mid["status"]["observedGeneration"], mid["metadata"]["generation"],
        "{mid}"
    );
    assert_eq!(
        root["status"]["observedGeneration"], mid["metadata"]["generation"],
        "{root}"
    );
    assert!(!held(&live(&sc).await));
}
