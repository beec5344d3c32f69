//! Test world for kubectl-cutover: two real smart-HTTP Git servers (old and new, HTTPS with
//! their own CAs and basic auth), a twin API server holding the Flux objects, and the real
//! plugin binary run as a process (with `twin::testkit`'s plugin runner).
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use twin::git::{GitServer, GitServerOptions};
use twin::testkit::{PluginRun, basic_auth_secret, start_twin, wrapped_plugin_command};
use twin::{PatchKind, Twin};

pub const USER: &str = "flux";
pub const TOKEN: &str = "tok-3f9c2a71d5e8";
pub const NEW_TOKEN: &str = "tok-new-88a1b7c4e2";

/// The plugin binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cutover");

/// Real-time bound on one plugin run: generous for a loaded 2-core machine and for an
/// in-cluster probe (its own --probe-timeout is shorter).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(600);

pub struct World {
    pub twin: Twin,
    pub old: GitServer,
    pub new: GitServer,
    /// Local working clone with the history (commits[0..n]).
    pub work: tempfile::TempDir,
    pub commits: Vec<String>,
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

pub const GOTK_SYNC: &str = "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  secretRef:
    name: flux-system
  url: URL
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./clusters/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
";

impl World {
    /// `n` commits; gotk-sync.yaml authors the OLD server URL. Both servers get the full
    /// history with main at the last commit (tests move the new server's main).
    pub async fn new(n: usize) -> World {
        let twin = start_twin(&[]).await;
        let old = GitServer::start(GitServerOptions::default()).unwrap();
        let new = GitServer::start(GitServerOptions::default()).unwrap();
        World::build(twin, old, new, n)
    }

    /// As [`World::new`] with given servers (e.g. the new one on the twin's pod network).
    pub fn build(twin: Twin, old: GitServer, new: GitServer, n: usize) -> World {
        old.create_repo("org/fleet", "main").unwrap();
        new.create_repo("org/fleet", "main").unwrap();
        old.set_auth("org/fleet", USER, &[TOKEN]).unwrap();
        new.set_auth("org/fleet", USER, &[TOKEN, NEW_TOKEN])
            .unwrap();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        git(w, &["init", "-q", "-b", "main"], &[]);
        let sync = GOTK_SYNC.replace("URL", &old.url_https("org/fleet"));
        let mut commits = vec![];
        for i in 0..n {
            std::fs::create_dir_all(w.join("clusters/prod/flux-system")).unwrap();
            std::fs::write(w.join("clusters/prod/flux-system/gotk-sync.yaml"), &sync).unwrap();
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
            std::fs::write(
                w.join("clusters/prod/apps.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: release\n  namespace: flux-system\ndata:\n  n: \"{i}\"\n"
                ),
            )
            .unwrap();
            git(w, &["add", "-A"], &[]);
            git(w, &["commit", "-q", "-m", &format!("release {i}")], &[]);
            commits.push(git(w, &["rev-parse", "HEAD"], &[]));
        }
        let last = commits.last().unwrap().clone();
        push(w, &old, &old.url_https("org/fleet"), &last, TOKEN);
        push(w, &new, &new.url_https("org/fleet"), &last, TOKEN);
        let world = World {
            twin,
            old,
            new,
            work,
            commits,
        };
        world.seed_cluster(&last);
        world
    }

    pub fn head(&self) -> &str {
        self.commits.last().unwrap()
    }

    /// A basic-auth Secret `flux-system/<name>` for user [`USER`] with `token` and, when given,
    /// `ca` as `ca.crt` (replaces one of that name).
    pub fn secret(&self, name: &str, token: &str, ca: Option<&str>) {
        basic_auth_secret(&self.twin, "flux-system", name, USER, token, ca);
    }

    /// One CA bundle trusting both servers (each has its own CA).
    pub fn both_cas(&self) -> String {
        format!("{}{}", self.old.ca_pem(), self.new.ca_pem())
    }

    fn seed_cluster(&self, sha: &str) {
        self.secret("flux-system", TOKEN, Some(&self.both_cas()));
        let store = self.twin.store();
        let gr = store
            .gvr("source.toolkit.fluxcd.io", "v1", "gitrepositories")
            .unwrap();
        let ks = store
            .gvr("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
            .unwrap();
        let labels = json!({"kustomize.toolkit.fluxcd.io/name": "flux-system",
                            "kustomize.toolkit.fluxcd.io/namespace": "flux-system"});
        let repo = store
            .create(
                &gr,
                json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                   "metadata": {"name": "flux-system", "namespace": "flux-system", "labels": labels},
                   "spec": {"interval": "1m0s", "ref": {"branch": "main"},
                            "secretRef": {"name": "flux-system"},
                            "url": self.old.url_https("org/fleet")}}),
            )
            .unwrap();
        let generation = repo["metadata"]["generation"].clone();
        let revision = format!("main@sha1:{sha}");
        store
            .patch_status(
                &gr,
                Some("flux-system"),
                "flux-system",
                PatchKind::Merge,
                &json!({"status": {"observedGeneration": generation,
                    "artifact": {"revision": revision, "digest": "sha256:00"},
                    "conditions": [
                      {"type": "Ready", "status": "True", "reason": "Succeeded",
                       "message": format!("stored artifact for revision '{revision}'"),
                       "lastTransitionTime": "2026-11-30T00:00:00Z", "observedGeneration": generation}]}}),
                "source-controller",
            )
            .unwrap();
        let k = store
            .create(
                &ks,
                json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                   "metadata": {"name": "flux-system", "namespace": "flux-system"},
                   "spec": {"interval": "10m0s", "path": "./clusters/prod", "prune": true,
                            "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}),
            )
            .unwrap();
        store
            .patch_status(
                &ks,
                Some("flux-system"),
                "flux-system",
                PatchKind::Merge,
                &json!({"status": {"observedGeneration": k["metadata"]["generation"],
                    "lastAppliedRevision": revision, "lastAttemptedRevision": revision,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                        "message": format!("Applied revision: {revision}"),
                        "lastTransitionTime": "2026-11-30T00:00:00Z"}]}}),
                "kustomize-controller",
            )
            .unwrap();
    }

    pub fn git_repository(&self) -> Value {
        let store = self.twin.store();
        let gr = store
            .gvr("source.toolkit.fluxcd.io", "v1", "gitrepositories")
            .unwrap();
        store.get(&gr, Some("flux-system"), "flux-system").unwrap()
    }

    /// Runs the real binary with the twin's kubeconfig (see [`loopback_allowed`]).
    pub async fn cutover(&self, args: &[&str]) -> PluginRun {
        let args = loopback_allowed(args);
        twin::testkit::run_plugin(BIN, self.twin.kubeconfig_path(), &args, RUN_TIMEOUT).await
    }

    /// [`World::cutover`] with extra environment variables (e.g. `SSL_CERT_FILE`).
    pub async fn cutover_env(&self, env: &[(&str, &OsStr)], args: &[&str]) -> PluginRun {
        let args = loopback_allowed(args);
        let mut cmd = twin::testkit::plugin_command(BIN, self.twin.kubeconfig_path(), &args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        twin::testkit::run_command(cmd, RUN_TIMEOUT).await
    }

    pub fn work(&self) -> PathBuf {
        self.work.path().to_path_buf()
    }
}

/// `args` plus `--allow-loopback` when `--to` is one of the servers' `https://127.0.0.1:PORT`
/// / `http://127.0.0.1:PORT` URLs: the World's Git servers listen on 127.0.0.1 and "the
/// cluster" (the twin's models) runs on this machine, the case the flag exists for. A test of
/// the loopback refusal itself runs the binary directly.
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
