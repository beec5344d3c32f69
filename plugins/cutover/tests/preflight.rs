//! kubectl cutover preflight on the twin with real Git servers over HTTPS with basic auth.
mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_commit_passes_and_shows_the_authored_change() {
    let w = World::new(3).await;
    let to = w.new.url_https("org/fleet");
    let r = w
        .cutover(&["gitrepository/flux-system", "--to", &to, "--dry-run"])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout
            .contains("the new server's main is at exactly the commit the cluster runs"),
        "{}",
        r.stdout
    );
    // The committed URL is the old one: the self-reference is reported with the exact change.
    assert!(
        r.stdout
            .contains("clusters/prod/flux-system/gotk-sync.yaml:13"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("will revert the live patch"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(&format!("+  url: {to}")), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("preflight passed (--dry-run: nothing changed)")
    );
    r.assert_no_secrets();
    // Nothing changed.
    assert_eq!(
        w.git_repository()["spec"]["url"],
        serde_json::json!(w.old.url_https("org/fleet"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_branch_behind_is_refused_with_count_and_commit() {
    let w = World::new(15).await;
    push(
        &w.work(),
        &w.new,
        &w.new.url_https("org/fleet"),
        &w.commits[0],
        TOKEN,
    );
    let to = w.new.url_https("org/fleet");
    let r = w
        .cutover(&["gitrepo/flux-system", "--to", &to, "--dry-run", "--repo"])
        .await;
    assert_eq!(r.code, 2, "--repo needs a value: {}", r.all());
    let repo = w.work().display().to_string();
    for extra in [vec![], vec!["--repo", repo.as_str()]] {
        let mut args = vec!["gitrepo/flux-system", "--to", &to, "--dry-run"];
        args.extend(extra.iter().copied());
        let r = w.cutover(&args).await;
        assert_eq!(r.code, 1, "{}", r.all());
        let want = format!(
            "the new server's main is 14 commits behind what the cluster runs; cutting over would roll back to {} release 0",
            &w.commits[0][..7]
        );
        assert!(r.stdout.contains(&want), "want {want:?} in\n{}", r.all());
        assert!(r.stdout.contains("refused"), "{}", r.stdout);
        r.assert_no_secrets();
    }
    let j = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(j.code, 1);
    let v = j.json();
    assert_eq!(v["apiVersion"], "cutover.cluster-loop.dev/v1");
    assert_eq!(v["kind"], "CutoverReport");
    assert_eq!(v["mode"], "refused");
    assert!(
        v["preflight"].get("inCluster").is_none(),
        "only with --verify-in-cluster"
    );
    assert_eq!(v["preflight"]["relation"]["relation"], "behind");
    assert_eq!(v["preflight"]["relation"]["behind"], 14);
    assert_eq!(v["preflight"]["go"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_branch_ahead_is_refused_unless_allowed() {
    let w = World::new(5).await;
    // The cluster runs commit 2; both servers have 0..4.
    let c = w.commits[2].clone();
    let store = w.twin.store();
    let gr = store
        .gvr("source.toolkit.fluxcd.io", "v1", "gitrepositories")
        .unwrap();
    store
        .patch_status(
            &gr,
            Some("flux-system"),
            "flux-system",
            twin::PatchKind::Merge,
            &serde_json::json!({"status": {"artifact": {"revision": format!("main@sha1:{c}")}}}),
            "source-controller",
        )
        .unwrap();
    let to = w.new.url_https("org/fleet");
    let r = w
        .cutover(&["gitrepo/flux-system", "--to", &to, "--dry-run"])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout
            .contains("the new server's main is 2 commits ahead of what the cluster runs"),
        "{}",
        r.stdout
    );
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "--allow-forward",
        ])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout.contains("allowed by --allow-forward"),
        "{}",
        r.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_and_revoked_tokens_say_authentication_required() {
    let w = World::new(2).await;
    let to = w.new.url_https("org/fleet");
    w.secret("wrong", "not-the-token", Some(&w.both_cas()));
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "--secret",
            "wrong",
        ])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("authentication required"), "{}", r.stdout);
    assert!(r.stdout.contains("flux-system/wrong"), "{}", r.stdout);
    assert!(!r.all().contains("not-the-token"));

    // Revoke the token Flux holds on the new server: the rotation trap.
    assert!(w.new.revoke_token("org/fleet", TOKEN));
    let r = w
        .cutover(&["gitrepo/flux-system", "--to", &to, "--dry-run"])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("authentication required"), "{}", r.stdout);
    assert!(
        r.stdout.contains("never revoke the one Flux is using"),
        "{}",
        r.stdout
    );
    r.assert_no_secrets();
    // A freshly minted token in a new secret works.
    w.secret("rotated", NEW_TOKEN, Some(&w.both_cas()));
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "--secret",
            "rotated",
        ])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    r.assert_no_secrets();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_ca_names_the_secret_key() {
    let w = World::new(2).await;
    w.secret("no-ca", TOKEN, None);
    let to = w.new.url_https("org/fleet");
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "--secret",
            "no-ca",
        ])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("TLS verification failed"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("to secret flux-system/no-ca under the key `ca.crt`"),
        "{}",
        r.stdout
    );
}

/// go-git v5 configureTransport ADDS the secret's ca.crt to the system pool: a server whose
/// CA is in the system bundle passes even when the secret's ca.crt is an unrelated CA (here
/// the old server's). The system bundle is named by SSL_CERT_FILE, as OpenSSL and Go take it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_ca_adds_to_the_system_bundle_not_replaces_it() {
    let w = World::new(2).await;
    w.secret("unrelated-ca", TOKEN, Some(w.old.ca_pem()));
    let to = w.new.url_https("org/fleet");
    let args = [
        "gitrepo/flux-system",
        "--to",
        &to,
        "--dry-run",
        "--secret",
        "unrelated-ca",
    ];
    let (_d, system) = system_bundle_with(w.new.ca_pem());
    let r = w
        .cutover_env(&[("SSL_CERT_FILE", system.as_os_str())], &args)
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout
            .contains("the system CA bundle plus the secret's ca.crt"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("ok   remote"), "{}", r.stdout);
    r.assert_no_secrets();

    // Control: the same secret against the host's own bundle (no twin CA in it) is refused,
    // and the message says what was trusted.
    let host = std::path::Path::new("/etc/ssl/certs/ca-certificates.crt");
    let r = w
        .cutover_env(&[("SSL_CERT_FILE", host.as_os_str())], &args)
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("TLS verification failed"), "{}", r.stdout);
    assert!(
        r.stdout.contains(
            "trusted here: the system CA bundle /etc/ssl/certs/ca-certificates.crt plus the \
             secret's ca.crt"
        ),
        "{}",
        r.stdout
    );

    // An inherited GIT_SSL_CAINFO is this user's git setting, which Flux never sees: it
    // does not widen trust, with or without a ca.crt in the secret.
    w.secret("no-ca", TOKEN, None);
    let ca_file = w.new.ca_file().as_os_str();
    for secret in ["no-ca", "unrelated-ca"] {
        let r = w
            .cutover_env(
                &[
                    ("GIT_SSL_CAINFO", ca_file),
                    ("SSL_CERT_FILE", host.as_os_str()),
                ],
                &[
                    "gitrepo/flux-system",
                    "--to",
                    &to,
                    "--dry-run",
                    "--secret",
                    secret,
                ],
            )
            .await;
        assert_eq!(r.code, 1, "{secret}: {}", r.all());
        assert!(
            r.stdout.contains("TLS verification failed"),
            "{secret}: {}",
            r.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_with_credentials_is_refused_unless_allowed() {
    let w = World::new(2).await;
    let to = w.new.url_http("org/fleet");
    let r = w
        .cutover(&["gitrepo/flux-system", "--to", &to, "--dry-run"])
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("scheme http is insecure"), "{}", r.stdout);
    // No remote contact was made: the refusal comes first.
    assert!(!r.stdout.contains("answers with the credentials"));
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "--allow-insecure-http",
        ])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("travel in clear text"), "{}", r.stdout);
    r.assert_no_secrets();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_patch_changes_only_the_authored_line_in_repo() {
    let w = World::new(2).await;
    let to = w.new.url_https("org/fleet");
    let repo = w.work().display().to_string();
    let file = w.work().join("clusters/prod/flux-system/gotk-sync.yaml");
    let before = std::fs::read_to_string(&file).unwrap();
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            &to,
            "--dry-run",
            "--repo",
            &repo,
            "--write-patch",
        ])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    let after = std::fs::read_to_string(&file).unwrap();
    let old_url = w.old.url_https("org/fleet");
    assert_eq!(after, before.replace(&old_url, &to));
    assert_ne!(after, before);
    let status = git(&w.work(), &["status", "--porcelain"], &[]);
    assert_eq!(status, "M clusters/prod/flux-system/gotk-sync.yaml");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_usage_error() {
    let w = World::new(1).await;
    let r = w
        .cutover(&["ks/flux-system", "--to", "https://x/y.git"])
        .await;
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("accepted forms"), "{}", r.stderr);
    let r = w
        .cutover(&["gitrepo/nope", "--to", "https://x/y.git", "--dry-run"])
        .await;
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
    // --to is validated before the cluster is contacted: not a URL, a scheme Flux does not
    // take, or credentials in the URL (they would land in spec.url and in every output).
    let before = w.twin.requests().len();
    for (to, want) in [
        ("git@host:org/fleet.git", "is not a URL"),
        (
            "ftp://host/org/fleet.git",
            "scheme ftp:// is not one source-controller accepts",
        ),
        (
            "https://user:hunter2@host/org/fleet.git",
            "the URL carries credentials",
        ),
    ] {
        let r = w
            .cutover(&["gitrepo/flux-system", "--to", to, "--dry-run"])
            .await;
        assert_eq!(r.code, 2, "{to}: {}", r.all());
        assert!(r.stderr.contains(want), "{to}: {}", r.stderr);
        assert!(
            !r.all().contains("hunter2"),
            "credentials echoed: {}",
            r.all()
        );
    }
    assert_eq!(
        w.twin.requests().len(),
        before,
        "no API request for a bad --to"
    );
    let r = w
        .cutover(&[
            "gitrepo/flux-system",
            "--to",
            "https://x/y.git",
            "--repo",
            "/nonexistent",
        ])
        .await;
    assert_eq!(r.code, 2, "{}", r.all());
    // Without --yes and without a terminal, nothing is changed.
    let to = w.new.url_https("org/fleet");
    let r = w.cutover(&["gitrepo/flux-system", "--to", &to]).await;
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("pass --yes"), "{}", r.stderr);
    assert_eq!(
        w.git_repository()["spec"]["url"],
        serde_json::json!(w.old.url_https("org/fleet"))
    );
}
