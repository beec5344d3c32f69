//! Shared helpers for kubectl-cutover's real-cluster tests: git and push against the test Git
//! servers (HTTPS with their own CAs and basic auth), the tokens, the real plugin binary run as
//! a process (with `twin::testkit`'s plugin runner), a workstation's /etc/hosts and CA bundle,
//! and the set-up both groups share: the two Git servers, the bootstrap layout
//! (`gotk-sync.yaml`), the source's Secret and the wait for the root to apply the head.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use realcluster::Cluster;
use realcluster::testkit::condition;
use serde_json::{Value, json};
use twin::git::{GitServer, GitServerOptions};
use twin::testkit::{PluginRun, wrapped_plugin_command};

pub const USER: &str = "flux";
pub const TOKEN: &str = "tok-3f9c2a71d5e8";
pub const NEW_TOKEN: &str = "tok-new-88a1b7c4e2";

/// The plugin binary under test.
pub const BIN: &str = crate::bin!("kubectl-cutover");

/// Real-time bound on one plugin run: generous for a loaded 2-core machine and for an
/// in-cluster probe (its own --probe-timeout is shorter).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// The cluster of [`super::execute`]'s tests (default options), leased (started on first use, stopped after its last lease): some of
/// them stop source-controller or scale kustomize-controller to 0, so no other group uses it.
pub fn execute_cluster() -> realcluster::Lease {
    static CLUSTER: realcluster::ClusterCell = realcluster::ClusterCell::new();
    crate::group_cluster(&CLUSTER)
}

pub fn git(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Operator")
        .env("GIT_AUTHOR_EMAIL", "op@example.com")
        .env("GIT_COMMITTER_NAME", "Operator")
        .env("GIT_COMMITTER_EMAIL", "op@example.com")
        .env("GIT_TERMINAL_PROMPT", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn basic(user: &str, token: &str) -> String {
    format!(
        "Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"))
    )
}

/// Push `sha` as `refs/heads/main` of `url` (force), with the server's CA and credentials.
pub fn push(work: &Path, server: &GitServer, url: &str, sha: &str, token: &str) {
    let header = basic(USER, token);
    let ca = server.ca_file().display().to_string();
    git(
        work,
        &[
            "-c",
            &format!("http.extraHeader={header}"),
            "push",
            "--force",
            "--quiet",
            url,
            &format!("{sha}:refs/heads/main"),
        ],
        &[("GIT_SSL_CAINFO", &ca)],
    );
}

/// `args` plus `--allow-loopback` when `--to` is one of the servers' `https://127.0.0.1:PORT`
/// / `http://127.0.0.1:PORT` URLs: the test Git servers listen on 127.0.0.1 and the real
/// cluster's controllers run as host processes on this machine, the case the flag exists for.
/// A test of the loopback refusal itself runs the binary without it.
pub fn loopback_allowed<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut v = args.to_vec();
    let to_loopback = args.windows(2).any(|w| {
        w[0] == "--to" && (w[1].starts_with("https://127.") || w[1].starts_with("http://127."))
    });
    if to_loopback {
        v.push("--allow-loopback");
    }
    v
}

/// A stand-in for a system CA bundle (what `SSL_CERT_FILE` names): the host's
/// `/etc/ssl/certs/ca-certificates.crt` (when present) followed by `extra_pem`, as a
/// workstation whose trust store includes a CA (e.g. a public one, or one the company
/// installed) would have. Keep the directory while the file is used.
pub fn system_bundle_with(extra_pem: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ca-certificates.crt");
    let mut text =
        std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(extra_pem);
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

/// The real binary as a workstation whose resolver knows `hosts` (`(ip, name)`): in a private
/// mount namespace (`unshare -m`, root) where a copy of /etc/hosts with those lines is
/// bind-mounted over /etc/hosts, as a VPN or corporate DNS would answer. The binary and its git
/// run unchanged (glibc getaddrinfo, `hosts: files dns`); the shell `exec`s the binary, so a
/// signal sent to the child reaches it. Keep the returned directory (the hosts file) until
/// the command has ended.
pub fn workstation_command(
    hosts: &[(String, String)],
    kubeconfig: &Path,
    args: &[&str],
) -> (tokio::process::Command, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts");
    let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    for (ip, name) in hosts {
        text.push_str(&format!("{ip}\t{name}\n"));
    }
    std::fs::write(&file, text).unwrap();
    let wrapper = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
    ]
    .map(OsStr::new);
    let mut wrapper = wrapper.to_vec();
    wrapper.push(file.as_os_str());
    let cmd = wrapped_plugin_command(&wrapper, BIN, kubeconfig, args);
    (cmd, dir)
}

/// Output checks every cutover test makes.
pub trait NoSecrets {
    /// Asserts that neither token ([`TOKEN`], [`NEW_TOKEN`]) appears anywhere in the output.
    fn assert_no_secrets(&self);
}

impl NoSecrets for PluginRun {
    fn assert_no_secrets(&self) {
        for s in [TOKEN, NEW_TOKEN] {
            assert!(
                !self.all().contains(s),
                "secret leaked in output:\n{}",
                self.all()
            );
        }
    }
}

/// The old and new Git servers of one test, each holding an empty `org/fleet` (branch `main`)
/// with basic auth: the old one takes [`TOKEN`] (what Flux holds), the new one [`TOKEN`] and
/// [`NEW_TOKEN`] (a rotation keeps both valid). `new`: the new server's options (its DNS names
/// and listen address).
pub fn fleet_servers(new: GitServerOptions) -> (GitServer, GitServer) {
    let old = GitServer::start(GitServerOptions::default()).unwrap();
    let new = GitServer::start(new).unwrap();
    for s in [&old, &new] {
        s.create_repo("org/fleet", "main").unwrap();
    }
    old.set_auth("org/fleet", USER, &[TOKEN]).unwrap();
    new.set_auth("org/fleet", USER, &[TOKEN, NEW_TOKEN])
        .unwrap();
    (old, new)
}

/// The authoring file of the GitRepository and root Kustomization, as bootstrap writes it.
pub const SYNC_FILE: &str = "clusters/prod/flux-system/gotk-sync.yaml";

/// What differs between the tests' `gotk-sync.yaml` files.
pub struct Sync<'a> {
    /// Name and namespace of both the GitRepository and the root Kustomization.
    pub name: &'a str,
    /// The GitRepository's spec.url (the old server's).
    pub url: &'a str,
    /// The GitRepository's spec.interval (Go duration).
    pub source_interval: &'a str,
    /// The root Kustomization's spec.path.
    pub root_path: &'a str,
    /// The root Kustomization's spec.retryInterval (default: its interval).
    pub retry_interval: Option<&'a str>,
}

impl Sync<'_> {
    /// `gotk-sync.yaml` as `flux bootstrap` writes it: GitRepository (branch main, secretRef
    /// `name`) and root Kustomization (interval 10m, prune) of that source.
    pub fn yaml(&self) -> String {
        let Sync {
            name,
            url,
            source_interval,
            root_path,
            retry_interval,
        } = self;
        let retry = retry_interval
            .map(|r| format!("  retryInterval: {r}\n"))
            .unwrap_or_default();
        format!(
            "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: {name}
  namespace: {name}
spec:
  interval: {source_interval}
  ref:
    branch: main
  secretRef:
    name: {name}
  url: {url}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {name}
  namespace: {name}
spec:
  interval: 10m0s
{retry}  path: {root_path}
  prune: true
  sourceRef:
    kind: GitRepository
    name: {name}
"
        )
    }
}

/// Writes the bootstrap layout into the work tree `w`: [`SYNC_FILE`] (`sync`) with its
/// `kustomization.yaml`, `clusters/prod/kustomization.yaml` (resources `flux-system` and
/// `apps.yaml`, which the caller writes) and an empty `clusters/prod/apps`.
pub fn write_bootstrap_layout(w: &Path, sync: &str) {
    std::fs::create_dir_all(w.join("clusters/prod/flux-system")).unwrap();
    std::fs::create_dir_all(w.join("clusters/prod/apps")).unwrap();
    std::fs::write(w.join(SYNC_FILE), sync).unwrap();
    std::fs::write(
        w.join("clusters/prod/flux-system/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- gotk-sync.yaml\n",
    )
    .unwrap();
    std::fs::write(
        w.join("clusters/prod/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- flux-system\n- apps.yaml\n",
    )
    .unwrap();
}

/// A basic-auth Secret `ns/name` ([`USER`], `token`) with `ca` as `ca.crt` (none: no such
/// key), replacing any Secret of that name (apply alone would keep a removed key).
pub fn basic_auth_secret(c: &Cluster, ns: &str, name: &str, token: &str, ca: Option<&str>) {
    let mut data = json!({"username": USER, "password": token});
    if let Some(ca) = ca {
        data["ca.crt"] = json!(ca);
    }
    let _ = c.kubectl(&["-n", ns, "delete", "secret", name, "--ignore-not-found"]);
    let s = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": data});
    c.apply_yaml(&s.to_string()).unwrap();
}

/// Waits until Kustomization `ns/ns` (the root) is Ready=True with `revision`
/// (`main@sha1:...`) as its lastAppliedRevision and returns it; panics after `within` with
/// its status and the GitRepository's.
pub fn wait_root_applied(c: &Cluster, ns: &str, revision: &str, within: Duration) -> Value {
    let until = std::time::Instant::now() + within;
    loop {
        let k = c.get_json(&["-n", ns, "get", "kustomization", ns]);
        if condition(&k, "Ready")["status"] == "True"
            && k["status"]["lastAppliedRevision"] == json!(revision)
        {
            return k;
        }
        assert!(
            std::time::Instant::now() < until,
            "root {ns}/{ns} did not apply {revision} within {within:?}:\nKustomization status: \
             {}\nGitRepository status: {}",
            k["status"],
            c.get_json(&["-n", ns, "get", "gitrepository", ns])["status"]
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
