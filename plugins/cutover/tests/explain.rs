//! Issue 19: a cutover explanation is never wrong. On the twin with the World's real HTTPS Git
//! servers: loopback URLs refused in the default preflight (in a pod, localhost is the pod),
//! drift before the move said first, a suspended root Kustomization named (and `--finish`
//! refusing to wait for it), and a 401 without any secret saying "pass --secret".
mod common;

use common::*;
use serde_json::json;
use twin::PatchKind;
use twin::testkit::run_plugin;

fn patch(w: &World, resource: (&str, &str, &str), body: serde_json::Value) {
    let store = w.twin.store();
    let gvr = store.gvr(resource.0, resource.1, resource.2).unwrap();
    store
        .patch(
            &gvr,
            Some("flux-system"),
            "flux-system",
            PatchKind::Merge,
            &body,
            "test",
        )
        .unwrap();
}

const GITREPO: (&str, &str, &str) = ("source.toolkit.fluxcd.io", "v1", "gitrepositories");
const KS: (&str, &str, &str) = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations");

/// Item 6: `localhost`, 127.0.0.0/8 and `::1` are refused by the default preflight before any
/// contact (the servers really answer on 127.0.0.1, which proves nothing for a pod), with the
/// reason; `--allow-loopback` turns the refusal into a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_to_is_refused_in_the_default_preflight() {
    let w = World::new(2).await;
    let port = w
        .new
        .url_https("org/fleet")
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    for to in [
        format!("https://127.0.0.1:{port}/org/fleet.git"),
        format!("https://127.3.2.1:{port}/org/fleet.git"),
        format!("https://localhost:{port}/org/fleet.git"),
        format!("https://[::1]:{port}/org/fleet.git"),
    ] {
        let before = w.new.requests().len();
        let r = run_plugin(
            BIN,
            w.twin.kubeconfig_path(),
            &["gitrepo/flux-system", "--to", &to, "--dry-run"],
            RUN_TIMEOUT,
        )
        .await;
        assert_eq!(r.code, 1, "{to}: {}", r.all());
        assert!(r.stdout.contains("FAIL loopback"), "{to}: {}", r.stdout);
        assert!(
            r.stdout
                .contains("in a pod, localhost is the pod itself, so source-controller would connect to its own pod"),
            "{to}: {}",
            r.stdout
        );
        assert!(!r.stdout.contains("ok   remote"), "{to}: {}", r.stdout);
        assert_eq!(
            w.new.requests().len(),
            before,
            "{to}: the server was contacted"
        );
    }
    let to = w.new.url_https("org/fleet");
    let r = run_plugin(
        BIN,
        w.twin.kubeconfig_path(),
        &[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "--allow-loopback",
        ],
        RUN_TIMEOUT,
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("warn loopback"), "{}", r.stdout);
    assert!(
        r.stdout.contains("allowed by --allow-loopback"),
        "{}",
        r.stdout
    );
    assert_eq!(
        w.git_repository()["spec"]["url"],
        json!(w.old.url_https("org/fleet"))
    );
}

/// Item 6: a name this workstation resolves to the loopback (here through /etc/hosts, in a
/// private mount namespace) is refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_to_loopback_here_is_refused() {
    if twin::testkit::skip_without_podexec() {
        return;
    }
    let w = World::new(2).await;
    let to = w.new.url_https_host("org/fleet", "gitea.lab.example");
    let (cmd, _hosts) = workstation_command(
        &[("127.0.0.1".into(), "gitea.lab.example".into())],
        w.twin.kubeconfig_path(),
        &["gitrepo/flux-system", "--to", &to, "--dry-run"],
    );
    let r = twin::testkit::run_command(cmd, RUN_TIMEOUT).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.contains(
            "gitea.lab.example resolves on this workstation to the loopback (127.0.0.1): in a pod, localhost is the pod itself"
        ),
        "{}",
        r.stdout
    );
}

/// Item 8: no secretRef and no --secret, and the server requires credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_ref_and_credentials_required_says_pass_secret() {
    let w = World::new(2).await;
    patch(&w, GITREPO, json!({"spec": {"secretRef": null}}));
    assert!(w.git_repository()["spec"].get("secretRef").is_none());
    // Trust the new server's CA as a system CA would, so the 401 is what stops it.
    let (_dir, bundle) = system_bundle_with(w.new.ca_pem());
    let to = w.new.url_https("org/fleet");
    let r = w
        .cutover_env(
            &[("SSL_CERT_FILE", bundle.as_os_str())],
            &["gitrepo/flux-system", "--to", &to, "--dry-run"],
        )
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.contains(
            "the server requires credentials and the GitRepository has no secretRef; pass --secret"
        ),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("<none>"), "{}", r.stdout);
    assert!(!r.stdout.contains("was rejected"), "{}", r.stdout);
}

/// Item 7 (terraform-provider-flux#499): before the move the live spec.url was already
/// hand-patched away from the committed one: said first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_before_the_move_is_said_first() {
    let w = World::new(2).await;
    let old = w.old.url_https("org/fleet");
    let new = w.new.url_https("org/fleet");
    patch(&w, GITREPO, json!({"spec": {"url": new}}));
    // Move back to what Git says: the drift is the first thing reported.
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &old,
            "--dry-run",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    let v = r.json();
    let first = &v["preflight"]["checks"][0];
    assert_eq!(first["id"], "drift", "{}", r.stdout);
    assert_eq!(first["result"], "warn");
    assert_eq!(
        first["message"],
        format!(
            "before this move, the committed spec.url (clusters/prod/flux-system/gotk-sync.yaml:13) is {old} but the live one is {new}: the cluster already runs a hand-patched URL; the root Kustomization will put the committed value back at its next apply"
        )
    );
    let r = w
        .cutover(&["gitrepo/flux-system", "--to", &old, "--dry-run"])
        .await;
    let first_check = r
        .stdout
        .lines()
        .find(|l| l.starts_with("ok ") || l.starts_with("warn ") || l.starts_with("FAIL "))
        .unwrap_or_default();
    assert!(first_check.starts_with("warn drift"), "{}", r.stdout);
    // Said first even when the new server cannot be read at all (the tree at C comes from the
    // live URL).
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            "https://git.example.test/org/fleet.git",
            "--dry-run",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["preflight"]["checks"][0]["id"], "drift", "{}", r.stdout);
    assert!(
        v["preflight"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "remote" && c["result"] == "fail"),
        "{}",
        r.stdout
    );
}

/// Item 7: a suspended root Kustomization is named in the preflight, and `--finish` says it
/// cannot succeed until it is resumed instead of advising to wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_root_is_named_and_finish_does_not_advise_waiting() {
    let w = World::new(2).await;
    patch(&w, KS, json!({"spec": {"suspend": true}}));
    let to = w.new.url_https("org/fleet");
    let r = w
        .cutover(&["gitrepo/flux-system", "--to", &to, "--dry-run"])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    let want = "root Kustomization flux-system/flux-system is suspended: nothing reverts a live patch of spec.url and nothing applies the committed one, so --finish cannot succeed until it is resumed (flux resume kustomization -n flux-system flux-system)";
    assert!(r.stdout.contains(want), "{}", r.stdout);
    let r = w
        .cutover(&["gitrepo/flux-system", "--finish", "-o", "json"])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["notes"], json!([want]), "{}", r.stdout);
    assert!(!r.stdout.contains("wait for it"), "{}", r.stdout);
}
