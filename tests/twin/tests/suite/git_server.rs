//! The twin's smart-HTTP Git server against the real `git` client: clone, ls-remote, fetch and
//! push over HTTP and HTTPS, basic and bearer auth, token revocation, a branch forced behind,
//! concurrent clones, gzip request bodies and protocol v2.
//!
//! The exact messages real git prints on 401 and on a TLS verification failure are asserted
//! here through `twin::git::messages`, which other tests reuse.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};

use twin::git::{Change, Fault, GitError, GitServer, GitServerOptions, messages};

/// Runs real `git` (bounded by coreutils `timeout`, generous for a loaded 2-core machine) with
/// no system/user config, no prompts, C locale and a fixed identity.
fn git(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let home = cwd.join(".test-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new("timeout");
    cmd.arg("300").arg("git").args(args).current_dir(cwd);
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &home)
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.local")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.local")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .env_remove("GIT_SSL_CAINFO")
        .env_remove("GIT_SSL_NO_VERIFY")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run git")
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "git failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failed(out: Output) -> String {
    assert!(
        !out.status.success(),
        "git unexpectedly succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn server() -> GitServer {
    GitServer::start(GitServerOptions::default()).expect("start git server")
}

/// A small source tree: two files and a nested one.
fn fixture_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("clusters/dev")).unwrap();
    std::fs::write(d.path().join("README.md"), "fleet\n").unwrap();
    std::fs::write(
        d.path().join("clusters/dev/kustomization.yaml"),
        "resources: []\n",
    )
    .unwrap();
    d
}

/// A started server with `org/fleet` created from [`fixture_dir`] on `main` (commit
/// `initial`); returns the server and that commit's SHA.
fn fleet_server() -> (GitServer, String) {
    let s = server();
    let src = fixture_dir();
    let head = s
        .create_repo_from_dir("org/fleet", src.path(), "main", "initial")
        .unwrap();
    (s, head)
}

/// `<sha>\trefs/heads/main` lines of `git ls-remote` as (ref, sha).
fn ls_remote(cwd: &Path, url: &str, env: &[(&str, &str)]) -> Vec<(String, String)> {
    ok(git(cwd, &["ls-remote", url], env))
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(sha, r)| (r.to_owned(), sha.to_owned()))
        .collect()
}

#[test]
fn server_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<GitServer>();
}

#[test]
fn helpers_build_reproducible_history() {
    let s = server();
    let src = fixture_dir();
    let first = s
        .create_repo_from_dir("org/fleet", src.path(), "main", "initial")
        .unwrap();
    assert_eq!(first.len(), 40);
    assert_eq!(s.head("org/fleet", "main").unwrap(), first);
    assert_eq!(s.default_branch("org/fleet").unwrap(), "main");
    assert_eq!(
        s.read_file("org/fleet", "main", "README.md").unwrap(),
        b"fleet\n"
    );

    let second = s
        .commit(
            "org/fleet",
            &[
                Change::write("apps/podinfo.yaml", "image: x\n"),
                Change::delete("README.md"),
            ],
            "add podinfo\n\nbody",
        )
        .unwrap();
    let log = s.log("org/fleet", "main").unwrap();
    assert_eq!(
        log.iter().map(|e| e.sha.as_str()).collect::<Vec<_>>(),
        [&second, &first]
    );
    assert_eq!(log[0].subject, "add podinfo");
    assert_eq!(
        log[1].time + 60,
        log[0].time,
        "each helper commit is 60s after the previous"
    );
    assert!(s.read_file("org/fleet", &second, "README.md").is_err());
    assert_eq!(
        s.read_file("org/fleet", &second, "apps/podinfo.yaml")
            .unwrap(),
        b"image: x\n"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), "a: 1\n").unwrap();
    s.commit(
        "org/fleet",
        &[Change::copy_dir(dir.path(), "clusters/prod")],
        "prod",
    )
    .unwrap();
    assert_eq!(
        s.read_file("org/fleet", "main", "clusters/prod/a.yaml")
            .unwrap(),
        b"a: 1\n"
    );

    // Same inputs, same options: same SHAs on a second server (fixed identity and dates).
    let s2 = server();
    let again = s2
        .create_repo_from_dir("org/fleet", src.path(), "main", "initial")
        .unwrap();
    assert_eq!(again, first, "helper commits are reproducible");

    assert!(matches!(
        s.create_repo("org/fleet", "main"),
        Err(GitError::RepoExists(_))
    ));
    assert!(matches!(
        s.create_repo("../x", "main"),
        Err(GitError::InvalidName(_))
    ));
    assert!(matches!(
        s.head("nope", "main"),
        Err(GitError::NoSuchRepo(_))
    ));
    assert!(matches!(
        s.head("org/fleet", "nope"),
        Err(GitError::NoSuchBranch { .. })
    ));
    assert!(matches!(
        s.set_branch("org/fleet", "main", "0123456"),
        Err(GitError::Invalid(_))
    ));
    assert!(matches!(
        s.commit("org/fleet", &[Change::delete("does/not/exist")], "x"),
        Err(GitError::Command { .. })
    ));
}

#[test]
fn clone_ls_remote_and_push_over_http() {
    let (s, first) = fleet_server();
    let work = tempfile::tempdir().unwrap();
    let url = s.url_http("org/fleet");

    let refs = ls_remote(work.path(), &url, &[]);
    assert!(
        refs.contains(&("refs/heads/main".into(), first.clone())),
        "{refs:?}"
    );
    assert!(refs.contains(&("HEAD".into(), first.clone())), "{refs:?}");

    ok(git(work.path(), &["clone", "--quiet", &url, "fleet"], &[]));
    let clone = work.path().join("fleet");
    assert_eq!(ok(git(&clone, &["rev-parse", "HEAD"], &[])).trim(), first);
    assert_eq!(
        std::fs::read_to_string(clone.join("README.md")).unwrap(),
        "fleet\n"
    );

    std::fs::write(clone.join("new.yaml"), "kind: ConfigMap\n").unwrap();
    ok(git(&clone, &["add", "new.yaml"], &[]));
    ok(git(
        &clone,
        &["commit", "--quiet", "-m", "push over http"],
        &[],
    ));
    let pushed = ok(git(&clone, &["rev-parse", "HEAD"], &[]))
        .trim()
        .to_owned();
    ok(git(&clone, &["push", "--quiet", "origin", "main"], &[]));
    assert_eq!(s.head("org/fleet", "main").unwrap(), pushed);
    assert_eq!(
        s.log("org/fleet", "main").unwrap()[0].subject,
        "push over http"
    );

    // The server saw smart-HTTP protocol v2 for the fetch side and a receive-pack POST.
    let reqs = s.requests();
    assert!(
        reqs.iter().any(|r| r.query == "service=git-upload-pack"
            && r.git_protocol.as_deref() == Some("version=2")),
        "{reqs:?}"
    );
    assert!(reqs.iter().any(|r| r.method == "POST"
        && r.path == "/org/fleet.git/git-receive-pack"
        && r.status == 200));

    // A repository that does not exist.
    let missing = s.url_http("org/missing");
    let err = failed(git(work.path(), &["ls-remote", &missing], &[]));
    assert!(
        err.contains(&format!("fatal: repository '{missing}/' not found")),
        "{err}"
    );
}

#[test]
fn https_with_the_servers_ca() {
    let (s, first) = fleet_server();
    let work = tempfile::tempdir().unwrap();
    let ca = s.ca_file().to_str().unwrap().to_owned();
    let url = s.url_https("org/fleet");

    // GIT_SSL_CAINFO ...
    let refs = ls_remote(work.path(), &url, &[("GIT_SSL_CAINFO", &ca)]);
    assert!(refs.contains(&("refs/heads/main".into(), first.clone())));
    // ... or http.sslCAInfo, cloning by a DNS name on the certificate.
    let host_url = s.url_https_host("org/fleet", "gitea.example.local");
    let resolve = format!(
        "http.curloptResolve={}",
        s.curlopt_resolve("gitea.example.local")
    );
    let ca_cfg = format!("http.sslCAInfo={ca}");
    ok(git(
        work.path(),
        &[
            "-c", &ca_cfg, "-c", &resolve, "clone", "--quiet", &host_url, "fleet",
        ],
        &[],
    ));
    let clone = work.path().join("fleet");
    assert_eq!(ok(git(&clone, &["rev-parse", "HEAD"], &[])).trim(), first);
    // Push over https too.
    std::fs::write(clone.join("x.yaml"), "x: 1\n").unwrap();
    ok(git(&clone, &["add", "."], &[]));
    ok(git(&clone, &["commit", "--quiet", "-m", "over https"], &[]));
    ok(git(
        &clone,
        &[
            "-c", &ca_cfg, "-c", &resolve, "push", "--quiet", "origin", "main",
        ],
        &[],
    ));
    assert_eq!(s.log("org/fleet", "main").unwrap()[0].subject, "over https");
    assert!(s.requests().iter().all(|r| r.scheme == "https"));
    // libcurl negotiates HTTP/2 by ALPN; HTTP/1.1 over TLS works too.
    assert!(s.requests().iter().any(|r| r.version == "HTTP/2.0"));
    let v11 = ok(git(
        work.path(),
        &[
            "-c",
            &ca_cfg,
            "-c",
            "http.version=HTTP/1.1",
            "ls-remote",
            &url,
        ],
        &[],
    ));
    assert!(v11.contains("refs/heads/main"));
    assert!(
        s.requests()
            .iter()
            .any(|r| r.scheme == "https" && r.version == "HTTP/1.1")
    );
    assert!(s.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(
        s.server_cert_pem()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
}

/// Without the CA, libcurl refuses the certificate. The detail after the URL is libcurl's TLS
/// backend message (GnuTLS on this machine; OpenSSL builds word it differently).
#[test]
fn https_without_the_ca_fails_verification() {
    let (s, _) = fleet_server();
    let work = tempfile::tempdir().unwrap();
    let url = s.url_https("org/fleet");
    let err = failed(git(work.path(), &["ls-remote", &url], &[]));
    let prefix = messages::unable_to_access(&url);
    let line = err
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{err}"));
    let detail = &line[prefix.len()..];
    assert!(
        detail == messages::TLS_VERIFY_FAILED_GNUTLS
            || detail == messages::TLS_VERIFY_FAILED_OPENSSL,
        "unexpected TLS failure detail: {detail}"
    );
    eprintln!("recorded TLS verify failure: {line}");

    // A CA file that is not the server's: the same failure, naming that file.
    let other = GitServer::start(GitServerOptions::default()).unwrap();
    let wrong_ca = other.ca_file().to_str().unwrap().to_owned();
    let err = failed(git(
        work.path(),
        &["ls-remote", &url],
        &[("GIT_SSL_CAINFO", &wrong_ca)],
    ));
    let line = err
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("{err}"));
    eprintln!("recorded TLS verify failure with another CA: {line}");
    let detail = &line[prefix.len()..];
    assert!(
        detail
            == messages::TLS_VERIFY_FAILED_GNUTLS
                .replace("CAfile: none", &format!("CAfile: {wrong_ca}"))
            || detail == messages::TLS_VERIFY_FAILED_OPENSSL,
        "{detail}"
    );
    // libcurl-GnuTLS verifies the certificate after the TLS handshake completes, so the
    // server sees an ordinary close here, not a handshake error.

    // Plain http:// against the HTTPS port: the server's TLS accept fails on the plaintext
    // request and answers with an alert, which libcurl reads as a non-HTTP reply.
    let wrong_scheme = format!("http://{}/org/fleet.git", s.https_addr());
    let err = failed(git(work.path(), &["ls-remote", &wrong_scheme], &[]));
    let expected = format!(
        "{}{}",
        messages::unable_to_access(&wrong_scheme),
        messages::PLAIN_HTTP_TO_TLS_PORT
    );
    assert!(err.lines().any(|l| l == expected), "{err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while s.tls_errors().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let errors = s.tls_errors();
    assert!(
        errors.iter().any(|e| e.contains("InvalidContentType")),
        "{errors:?}"
    );
}

/// Sends one raw HTTP/1.1 GET and returns the response head (status line + headers).
fn raw_get(addr: std::net::SocketAddr, path: &str, auth: Option<&str>) -> String {
    let mut conn = TcpStream::connect(addr).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    let _ = conn.read_to_string(&mut resp);
    resp.split("\r\n\r\n").next().unwrap_or_default().to_owned()
}

#[test]
fn basic_and_bearer_auth_and_401_messages() {
    let (s, first) = fleet_server();
    s.set_auth("org/fleet", "flux", &["tok-1", "tok-2"])
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let url = s.url_http("org/fleet");
    let base = format!("http://{}", s.http_addr());

    // The 401 itself, as any client sees it.
    let head = raw_get(
        s.http_addr(),
        "/org/fleet.git/info/refs?service=git-upload-pack",
        None,
    );
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"gitea\""),
        "{head}"
    );

    // No credentials at all, non-interactive.
    let err = failed(git(work.path(), &["ls-remote", &url], &[]));
    assert!(err.contains(&messages::no_username(&base)), "{err}");
    eprintln!("recorded no-credentials 401: {}", err.trim());

    // Right user, right token.
    let good = format!("http://flux:tok-1@{}/org/fleet.git", s.http_addr());
    let refs = ls_remote(work.path(), &good, &[]);
    assert!(refs.contains(&("refs/heads/main".into(), first.clone())));
    assert!(
        s.requests()
            .iter()
            .any(|r| r.user.as_deref() == Some("flux") && r.status == 200)
    );

    // Wrong password, and a right token with the wrong user.
    for creds in ["flux:wrong", "someone:tok-1"] {
        let bad = format!("http://{creds}@{}/org/fleet.git", s.http_addr());
        let err = failed(git(work.path(), &["ls-remote", &bad], &[]));
        let shown = format!("http://{}/org/fleet.git", s.http_addr());
        assert!(
            err.contains(&messages::auth_failed(&shown)),
            "{creds}: {err}"
        );
        eprintln!("recorded wrong-credentials 401: {err:?}");
    }

    // Bearer token, as source-controller sends a secret's bearerToken.
    let bearer = ok(git(
        work.path(),
        &[
            "-c",
            "http.extraHeader=Authorization: Bearer tok-2",
            "ls-remote",
            &url,
        ],
        &[],
    ));
    assert!(bearer.contains(&first));
    assert!(
        s.requests()
            .iter()
            .any(|r| r.authorization.as_deref() == Some("Bearer")
                && r.user.as_deref() == Some("flux")
                && r.status == 200)
    );
    let err = failed(git(
        work.path(),
        &[
            "-c",
            "http.extraHeader=Authorization: Bearer nope",
            "ls-remote",
            &url,
        ],
        &[],
    ));
    assert!(err.contains("fatal: "), "{err}");
    let head = raw_get(
        s.http_addr(),
        "/org/fleet.git/info/refs?service=git-upload-pack",
        Some("Bearer nope"),
    );
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");

    // Push needs the same credentials; with them receive-pack runs as REMOTE_USER=flux.
    let clone = work.path().join("fleet");
    ok(git(work.path(), &["clone", "--quiet", &good, "fleet"], &[]));
    std::fs::write(clone.join("y.yaml"), "y: 1\n").unwrap();
    ok(git(&clone, &["add", "."], &[]));
    ok(git(
        &clone,
        &["commit", "--quiet", "-m", "authenticated push"],
        &[],
    ));
    let anon = failed(git(&clone, &["push", "--quiet", &url, "main"], &[]));
    assert!(anon.contains(&messages::no_username(&base)), "{anon}");
    ok(git(&clone, &["push", "--quiet", "origin", "main"], &[]));
    assert_eq!(
        s.log("org/fleet", "main").unwrap()[0].subject,
        "authenticated push"
    );
    assert!(
        s.requests()
            .iter()
            .any(|r| r.path.ends_with("/git-receive-pack")
                && r.method == "POST"
                && r.user.as_deref() == Some("flux")
                && r.status == 200)
    );
}

#[test]
fn revoked_token_fails_at_once_and_others_keep_working() {
    let (s, _) = fleet_server();
    s.set_auth("org/fleet", "flux", &["old-token"]).unwrap();
    s.add_token("org/fleet", "new-token").unwrap();
    let work = tempfile::tempdir().unwrap();
    let with = |tok: &str| format!("http://flux:{tok}@{}/org/fleet.git", s.http_addr());
    ok(git(
        work.path(),
        &["clone", "--quiet", &with("old-token"), "fleet"],
        &[],
    ));
    let clone = work.path().join("fleet");

    let newer = s
        .commit(
            "org/fleet",
            &[Change::write("z.yaml", "z: 1\n")],
            "after clone",
        )
        .unwrap();
    assert!(s.revoke_token("org/fleet", "old-token"));
    assert!(!s.revoke_token("org/fleet", "old-token"), "already revoked");

    // The clone still holds the revoked token in its remote URL: fetch fails like Flux's
    // source does after a rotation that revoked the credential in use.
    let err = failed(git(&clone, &["fetch", "--quiet", "origin"], &[]));
    let shown = format!("http://{}/org/fleet.git", s.http_addr());
    assert!(err.contains(&messages::auth_failed(&shown)), "{err}");
    // A uniquely named new token keeps working.
    ok(git(
        &clone,
        &["fetch", "--quiet", &with("new-token"), "main"],
        &[],
    ));
    assert_eq!(
        ok(git(&clone, &["rev-parse", "FETCH_HEAD"], &[])).trim(),
        newer
    );

    assert!(s.clear_auth("org/fleet"));
    ok(git(
        &clone,
        &["fetch", "--quiet", &s.url_http("org/fleet"), "main"],
        &[],
    ));
}

#[test]
fn branch_forced_behind_is_what_clients_see() {
    let (s, old) = fleet_server();
    let new = s
        .commit("org/fleet", &[Change::write("v2.yaml", "v: 2\n")], "v2")
        .unwrap();
    s.set_branch("org/fleet", "release", &new).unwrap();
    s.set_tag("org/fleet", "v2.0.0", &new).unwrap();
    // The server's main is behind: it points at the older commit.
    s.set_branch("org/fleet", "main", &old).unwrap();
    assert_eq!(s.head("org/fleet", "main").unwrap(), old);
    assert_eq!(s.log("org/fleet", "main").unwrap().len(), 1);
    let branches = s.branches("org/fleet").unwrap();
    assert_eq!(branches.get("main"), Some(&old));
    assert_eq!(branches.get("release"), Some(&new));

    let work = tempfile::tempdir().unwrap();
    let url = s.url_https("org/fleet");
    let ca = s.ca_file().to_str().unwrap().to_owned();
    let refs = ls_remote(work.path(), &url, &[("GIT_SSL_CAINFO", &ca)]);
    assert!(
        refs.contains(&("refs/heads/main".into(), old.clone())),
        "{refs:?}"
    );
    assert!(
        refs.contains(&("refs/heads/release".into(), new.clone())),
        "{refs:?}"
    );
    assert!(
        refs.contains(&("refs/tags/v2.0.0".into(), new.clone())),
        "{refs:?}"
    );
    ok(git(
        work.path(),
        &["clone", "--quiet", &url, "fleet"],
        &[("GIT_SSL_CAINFO", &ca)],
    ));
    let clone = work.path().join("fleet");
    assert_eq!(ok(git(&clone, &["rev-parse", "HEAD"], &[])).trim(), old);
    assert!(
        !clone.join("v2.yaml").exists(),
        "main behind: v2 content absent"
    );
    // The newer commit is still fetchable by SHA (protocol v2 allows any reachable object).
    ok(git(
        &clone,
        &["fetch", "--quiet", "origin", &new],
        &[("GIT_SSL_CAINFO", &ca)],
    ));
    ok(git(
        &clone,
        &["merge-base", "--is-ancestor", &old, &new],
        &[],
    ));

    s.delete_branch("org/fleet", "release").unwrap();
    assert!(!s.branches("org/fleet").unwrap().contains_key("release"));
}

#[test]
fn concurrent_clones_over_https() {
    let (s, head) = fleet_server();
    let work = tempfile::tempdir().unwrap();
    let url = s.url_https("org/fleet");
    let ca = s.ca_file().to_str().unwrap().to_owned();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (url, ca, dir) = (&url, &ca, work.path());
                scope.spawn(move || {
                    let name = format!("c{i}");
                    ok(git(
                        dir,
                        &["clone", "--quiet", url, &name],
                        &[("GIT_SSL_CAINFO", ca)],
                    ));
                    ok(git(&dir.join(&name), &["rev-parse", "HEAD"], &[]))
                        .trim()
                        .to_owned()
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), head);
        }
    });
    let uploads = s
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/git-upload-pack") && r.status == 200)
        .count();
    assert!(uploads >= 8, "each clone fetched: {uploads}");
}

/// git compresses upload-pack request bodies over 1 KiB (remote-curl.c); many distinct wants
/// make the clone's fetch request that large, and http-backend inflates it itself
/// (HTTP_CONTENT_ENCODING).
#[test]
fn gzip_request_bodies_reach_http_backend() {
    let (s, _) = fleet_server();
    for i in 0..40 {
        let sha = s
            .commit_on(
                "org/fleet",
                &format!("b{i}"),
                &[Change::write("f", format!("{i}\n"))],
                "b",
            )
            .unwrap();
        assert_eq!(s.head("org/fleet", &format!("b{i}")).unwrap(), sha);
    }
    let work = tempfile::tempdir().unwrap();
    ok(git(
        work.path(),
        &[
            "clone",
            "--quiet",
            "--no-single-branch",
            &s.url_http("org/fleet"),
            "c",
        ],
        &[],
    ));
    let out = ok(git(&work.path().join("c"), &["branch", "-r"], &[]));
    assert_eq!(out.lines().filter(|l| l.contains("origin/b")).count(), 40);
    let reqs = s.requests();
    assert!(
        reqs.iter().any(|r| r.method == "POST"
            && r.content_encoding.as_deref() == Some("gzip")
            && r.status == 200),
        "a gzip upload-pack request succeeded: {reqs:?}"
    );
}

#[test]
fn injected_faults_and_bad_requests_leave_the_server_serving() {
    let (s, head) = fleet_server();
    let work = tempfile::tempdir().unwrap();
    let url = s.url_http("org/fleet");

    s.set_fault("org/fleet", Some(Fault::Status(503))).unwrap();
    let err = failed(git(work.path(), &["ls-remote", &url], &[]));
    let expected = format!(
        "{}{}",
        messages::unable_to_access(&url),
        messages::http_error(503)
    );
    assert!(err.lines().any(|l| l == expected), "{err}");
    eprintln!("recorded 503: {err:?}");
    s.set_fault(
        "org/fleet",
        Some(Fault::Delay(std::time::Duration::from_millis(200))),
    )
    .unwrap();
    assert!(ok(git(work.path(), &["ls-remote", &url], &[])).contains(&head));
    s.set_fault("org/fleet", None).unwrap();
    assert!(matches!(
        s.set_fault("nope", None),
        Err(GitError::NoSuchRepo(_))
    ));

    // Bad input straight from a socket: a POST whose body stops short of its Content-Length,
    // one with a garbage body, and one with the wrong Content-Type (http-backend: 415).
    let post = |body: &[u8], declared: usize, ctype: &str| -> String {
        let mut conn = TcpStream::connect(s.http_addr()).unwrap();
        write!(
            conn,
            "POST /org/fleet.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n\
             Content-Length: {declared}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        conn.write_all(body).unwrap();
        if body.len() < declared {
            // Stop short: the client goes away mid-body.
            conn.shutdown(std::net::Shutdown::Write).unwrap();
        }
        let mut resp = String::new();
        let _ = conn.read_to_string(&mut resp);
        resp.lines().next().unwrap_or_default().to_owned()
    };
    let req_type = "application/x-git-upload-pack-request";
    let truncated = post(b"0032want ", 500, req_type);
    let garbage = post(b"this is not a pkt-line stream", 29, req_type);
    let wrong_type = post(b"0000", 4, "text/plain");
    assert!(wrong_type.starts_with("HTTP/1.1 415"), "{wrong_type}");
    eprintln!("truncated body -> {truncated:?}; garbage body -> {garbage:?}");
    // Whatever those got, the server still serves real clients.
    let refs = ls_remote(work.path(), &url, &[]);
    assert!(refs.contains(&("refs/heads/main".into(), head.clone())));
    ok(git(
        work.path(),
        &["clone", "--quiet", &url, "after-bad-input"],
        &[],
    ));
}

/// The inode of the socket LISTENing on 127.0.0.1/[::]:`port` in this network namespace
/// (/proc/net/tcp and tcp6: state 0A), if any.
fn listening_inode(port: u16) -> Option<u64> {
    sockets()
        .into_iter()
        .find_map(|(local_port, state, inode)| {
            (local_port == port && state == 0x0A).then_some(inode)
        })
}

/// `(local port, state, inode)` of every TCP socket in /proc/net/tcp and /proc/net/tcp6.
fn sockets() -> Vec<(u16, u8, u64)> {
    let mut out = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let w: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (w.get(1), w.get(3), w.get(9)) else {
                continue;
            };
            let port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            let state = u8::from_str_radix(state, 16).ok();
            let inode = inode.parse::<u64>().ok();
            if let (Some(p), Some(s), Some(i)) = (port, state, inode) {
                out.push((p, s, i));
            }
        }
    }
    out
}

/// Dropping the server closes its listening sockets. Checked by the sockets' identities (their
/// inodes in /proc/net/tcp), never by connecting to the freed ports: another test in this
/// process may bind a freed ephemeral port at once, and a connect would then succeed (the
/// flake "HTTP port closed after drop"). A forked child of a concurrent test may hold the fd until
/// its exec, so the check waits (bounded) for that window to pass.
#[test]
fn dropping_the_server_closes_its_ports_and_missing_backend_is_an_error() {
    let s = server();
    let (http, https) = (s.http_addr(), s.https_addr());
    assert!(TcpStream::connect(http).is_ok());
    let http_inode = listening_inode(http.port()).expect("HTTP listener in /proc/net/tcp");
    let https_inode = listening_inode(https.port()).expect("HTTPS listener in /proc/net/tcp");
    let root = s.repo_path("x");
    drop(s);
    // A child process another test is spawning at this moment holds a copy of every fd between
    // its fork and its exec (CLOEXEC closes them only at exec), so the socket can outlive the
    // drop by that window: wait for it to pass, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let alive = loop {
        let alive: Vec<u64> = sockets().into_iter().map(|(_, _, i)| i).collect();
        let open = alive.contains(&http_inode) || alive.contains(&https_inode);
        if !open || std::time::Instant::now() > deadline {
            break alive;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        !alive.contains(&http_inode),
        "HTTP listening socket (inode {http_inode}) still open after drop"
    );
    assert!(
        !alive.contains(&https_inode),
        "HTTPS listening socket (inode {https_inode}) still open after drop"
    );
    assert!(!root.parent().unwrap().exists(), "repositories removed");

    let err = GitServer::start(GitServerOptions {
        http_backend: Some("/nonexistent/git-http-backend".into()),
        ..GitServerOptions::default()
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("git http-backend not found at /nonexistent"),
        "{err}"
    );
}

/// The URL the example fleet authors (`https://gitea.example.local/org/fleet.git`, see
/// clusters/base/flux-system/gotk-sync.yaml) works verbatim with the server's host alias
/// config, with the certificate verified for that name.
#[test]
fn authored_urls_work_verbatim_through_host_alias_config() {
    let (s, head) = fleet_server();
    let work = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = Vec::new();
    for (k, v) in s.host_alias_config("gitea.example.local") {
        args.push("-c".into());
        args.push(format!("{k}={v}"));
    }
    args.push("-c".into());
    args.push(format!("http.sslCAInfo={}", s.ca_file().display()));
    let with = |extra: &[&str]| -> Vec<String> {
        let mut a = args.clone();
        a.extend(extra.iter().map(|x| (*x).to_owned()));
        a
    };
    let run = |a: Vec<String>| {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        git(work.path(), &refs, &[])
    };
    for url in [
        "https://gitea.example.local/org/fleet.git",
        "http://gitea.example.local/org/fleet.git",
    ] {
        let out = ok(run(with(&["ls-remote", url, "refs/heads/main"])));
        assert!(out.starts_with(&head), "{url}: {out}");
    }
    // A name that is not on the certificate fails verification even when routed here.
    let mut other = Vec::new();
    for (k, v) in s.host_alias_config("git.other.example") {
        other.push("-c".to_owned());
        other.push(format!("{k}={v}"));
    }
    other.extend([
        "-c".into(),
        format!("http.sslCAInfo={}", s.ca_file().display()),
    ]);
    other.extend([
        "ls-remote".into(),
        "https://git.other.example/org/fleet.git".into(),
    ]);
    let err = failed(run(other));
    // git names the rewritten URL (insteadOf is applied before the transport runs).
    let rewritten = format!(
        "https://git.other.example:{}/org/fleet.git",
        s.https_addr().port()
    );
    let expected = format!(
        "{}{}",
        messages::unable_to_access(&rewritten),
        messages::tls_name_mismatch("git.other.example")
    );
    assert!(err.lines().any(|l| l == expected), "{err}");
    eprintln!("recorded name mismatch: {}", err.trim());
    let versions: std::collections::BTreeSet<String> = s
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.scheme, r.version))
        .collect();
    eprintln!("HTTP versions negotiated: {versions:?}");
}

/// Started, used and dropped inside a tokio runtime (as the scenario engine does): the server's
/// own runtime lives on its own thread, so neither start nor drop blocks or panics here.
#[tokio::test]
async fn works_from_async_code() {
    let s = std::sync::Arc::new(server());
    let src = fixture_dir();
    let s2 = s.clone();
    let path = src.path().to_owned();
    let head = tokio::task::spawn_blocking(move || {
        s2.create_repo_from_dir("org/fleet", &path, "main", "initial")
    })
    .await
    .unwrap()
    .unwrap();
    let out = tokio::process::Command::new("git")
        .args(["ls-remote", &s.url_http("org/fleet"), "refs/heads/main"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&head));
    drop(s);
}

/// A push larger than git's `http.postBuffer` (1 MiB) goes out with chunked transfer encoding
/// and no Content-Length, so http-backend reads the body to EOF; the clone of it streams a
/// multi-MiB response. Incompressible data keeps the pack that large.
#[test]
fn large_push_and_clone_stream_through() {
    let (s, _) = fleet_server();
    s.set_auth("org/fleet", "flux", &["tok"]).unwrap();
    let work = tempfile::tempdir().unwrap();
    let ca = s.ca_file().to_str().unwrap().to_owned();
    let url = format!("https://flux:tok@{}/org/fleet.git", s.https_addr());
    let env = [("GIT_SSL_CAINFO", ca.as_str())];
    ok(git(work.path(), &["clone", "--quiet", &url, "a"], &env));
    let a = work.path().join("a");
    // 6 MiB of xorshift output: incompressible, deterministic.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let blob: Vec<u8> = (0..6 * 1024 * 1024 / 8)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect();
    std::fs::write(a.join("big.bin"), &blob).unwrap();
    ok(git(&a, &["add", "big.bin"], &[]));
    ok(git(&a, &["commit", "--quiet", "-m", "big"], &[]));
    ok(git(
        &a,
        &[
            "-c",
            "http.version=HTTP/1.1",
            "push",
            "--quiet",
            "origin",
            "main",
        ],
        &env,
    ));
    let reqs = s.requests();
    let push = reqs
        .iter()
        .rfind(|r| r.method == "POST" && r.path.ends_with("/git-receive-pack"))
        .expect("receive-pack POST");
    assert_eq!((push.version.as_str(), push.status), ("HTTP/1.1", 200));
    assert_eq!(push.content_length, None, "chunked body: {push:?}");
    let pushed = ok(git(&a, &["rev-parse", "HEAD"], &[])).trim().to_owned();
    assert_eq!(s.head("org/fleet", "main").unwrap(), pushed);
    assert_eq!(s.read_file("org/fleet", "main", "big.bin").unwrap(), blob);

    ok(git(work.path(), &["clone", "--quiet", &url, "b"], &env));
    assert_eq!(std::fs::read(work.path().join("b/big.bin")).unwrap(), blob);
}

/// A read-only token fetches but cannot push: 403, which git reports as an HTTP error, not
/// as an authentication failure.
#[test]
fn read_only_token_fetches_but_push_is_forbidden() {
    let (s, _) = fleet_server();
    s.set_auth("org/fleet", "flux", &["rw"]).unwrap();
    s.add_read_only_token("org/fleet", "ro").unwrap();
    let work = tempfile::tempdir().unwrap();
    let ro = format!("http://flux:ro@{}/org/fleet.git", s.http_addr());
    ok(git(work.path(), &["clone", "--quiet", &ro, "c"], &[]));
    let c = work.path().join("c");
    std::fs::write(c.join("w.yaml"), "w: 1\n").unwrap();
    ok(git(&c, &["add", "."], &[]));
    ok(git(&c, &["commit", "--quiet", "-m", "w"], &[]));
    let err = failed(git(&c, &["push", "--quiet", "origin", "main"], &[]));
    let shown = s.url_http("org/fleet");
    let expected = format!(
        "{}{}",
        messages::unable_to_access(&shown),
        messages::http_error(403)
    );
    assert!(err.lines().any(|l| l == expected), "{err}");
    assert!(err.lines().any(|l| l == "remote: Forbidden"), "{err}");
    eprintln!("recorded read-only push: {err:?}");
    assert!(s.revoke_token("org/fleet", "ro"));
    let err = failed(git(&c, &["fetch", "--quiet", "origin"], &[]));
    assert!(err.contains(&messages::auth_failed(&shown)), "{err}");
    let rw = format!("http://flux:rw@{}/org/fleet.git", s.http_addr());
    ok(git(&c, &["push", "--quiet", &rw, "main"], &[]));
}

/// `curl` against the server's HTTPS listener (its CA), as a person at a shell: (HTTP status,
/// body).
fn curl(s: &GitServer, args: &[&str]) -> (u16, String) {
    let ca = s.ca_file().display().to_string();
    let out = Command::new("curl")
        .args(["-sS", "--cacert", &ca, "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.trim().parse().unwrap(), body.to_owned())
}

/// The token API (Gitea's shape) mints and revokes a user's named tokens while the server
/// runs; a minted token is a Git credential (basic with the username, or bearer) for a
/// repository whose auth names the user, and a revoked one gets 401 at once. Names are unique
/// per user; the API needs the user's password, as that user.
#[test]
fn token_api_mints_and_revokes_named_tokens_while_the_server_runs() {
    let (s, first) = fleet_server();
    s.add_user("flux", "admin-pass");
    s.add_user("other", "other-pass");
    s.set_auth("org/fleet", "flux", &[]).unwrap();
    let api = s.tokens_url("flux");
    let work = tempfile::tempdir().unwrap();
    let ca = s.ca_file().display().to_string();
    let env = [("GIT_SSL_CAINFO", ca.as_str())];

    let (code, body) = curl(
        &s,
        &[
            "-u",
            "flux:admin-pass",
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"name":"flux-1","scopes":["read:repository"]}"#,
            &api,
        ],
    );
    assert_eq!(code, 201, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["name"], "flux-1");
    let token = v["sha1"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 40, "{body}");
    assert_eq!(v["token_last_eight"], token[32..]);
    // Unique per user.
    let (code, body) = curl(
        &s,
        &["-u", "flux:admin-pass", "-d", r#"{"name":"flux-1"}"#, &api],
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("access token name has been used already"),
        "{body}"
    );
    // The password is the API's credential, as that user only.
    let (code, _) = curl(&s, &["-u", &format!("flux:{token}"), &api]);
    assert_eq!(code, 401);
    let (code, _) = curl(&s, &["-u", "other:other-pass", &api]);
    assert_eq!(code, 403);
    let (code, body) = curl(&s, &["-u", "flux:admin-pass", &api]);
    assert_eq!(code, 200);
    assert!(
        body.contains(r#""name":"flux-1""#) && !body.contains(&token),
        "{body}"
    );

    // The token is a Git credential: basic (as flux) and bearer; not as another user.
    let url = s.url_https("org/fleet");
    let basic = url.replacen("https://", &format!("https://flux:{token}@"), 1);
    assert!(ok(git(work.path(), &["ls-remote", &basic], &env)).contains(&first));
    let bearer = format!("http.extraHeader=Authorization: Bearer {token}");
    assert!(ok(git(work.path(), &["-c", &bearer, "ls-remote", &url], &env)).contains(&first));
    let wrong_user = url.replacen("https://", &format!("https://other:{token}@"), 1);
    failed(git(work.path(), &["ls-remote", &wrong_user], &env));

    // Revoked over the API while the server runs: 401 at once; a second delete is 404.
    let (code, _) = curl(
        &s,
        &[
            "-u",
            "flux:admin-pass",
            "-X",
            "DELETE",
            &format!("{api}/flux-1"),
        ],
    );
    assert_eq!(code, 204);
    let err = failed(git(work.path(), &["-c", &bearer, "ls-remote", &url], &env));
    assert!(err.contains("fatal: "), "{err}");
    let err = failed(git(work.path(), &["ls-remote", &basic], &env));
    assert!(err.contains(&messages::auth_failed(&url)), "{err}");
    let (code, _) = curl(
        &s,
        &[
            "-u",
            "flux:admin-pass",
            "-X",
            "DELETE",
            &format!("{api}/flux-1"),
        ],
    );
    assert_eq!(code, 404);
    // The Rust API: the same store.
    let t2 = s.mint_token("flux", "flux-2").unwrap();
    assert_eq!(s.token_names("flux"), ["flux-2"]);
    assert!(matches!(
        s.mint_token("flux", "flux-2"),
        Err(GitError::Invalid(_))
    ));
    assert!(
        ok(git(
            work.path(),
            &["ls-remote", &basic.replace(&token, &t2)],
            &env
        ))
        .contains(&first)
    );
    assert!(s.revoke_named_token("flux", "flux-2"));
    assert!(!s.revoke_named_token("flux", "flux-2"));
}
