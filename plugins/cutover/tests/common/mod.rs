//! Test world for kubectl-cutover: two real smart-HTTP Git servers (old and new, HTTPS with
//! their own CAs and basic auth), a twin API server holding the Flux objects, and the real
//! plugin binary run as a process.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};
use twin::git::{GitServer, GitServerOptions};
use twin::{PatchKind, Twin, TwinOptions};

pub const USER: &str = "flux";
pub const TOKEN: &str = "tok-3f9c2a71d5e8";
pub const NEW_TOKEN: &str = "tok-new-88a1b7c4e2";

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
        let twin = Twin::start(TwinOptions::default()).await.unwrap();
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

    pub fn secret(&self, name: &str, token: &str, ca: Option<&str>) {
        let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut data = json!({ "username": b(USER), "password": b(token) });
        if let Some(ca) = ca {
            data["ca.crt"] = json!(b(ca));
        }
        let store = self.twin.store();
        let gvr = store.gvr("", "v1", "secrets").unwrap();
        let _ = store.delete(&gvr, Some("flux-system"), name);
        store
            .create(
                &gvr,
                json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": name, "namespace": "flux-system"},
                       "type": "Opaque", "data": data}),
            )
            .unwrap();
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

    /// Runs the real binary with the twin's kubeconfig.
    pub async fn cutover(&self, args: &[&str]) -> Run {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-cutover"));
        cmd.args(args)
            .arg("--kubeconfig")
            .arg(self.twin.kubeconfig_path());
        run(cmd).await
    }

    /// Runs the real binary as a workstation whose resolver knows `hosts` (`(ip, name)`):
    /// in a private mount namespace (`unshare -m`, root) where a copy of /etc/hosts with those
    /// lines is bind-mounted over /etc/hosts, as a VPN or corporate DNS would answer. The
    /// binary and its git run unchanged (glibc getaddrinfo, `hosts: files dns`).
    pub async fn cutover_on_workstation(
        &self,
        hosts: &[(String, String)],
        kubeconfig: &Path,
        args: &[&str],
    ) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hosts");
        let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        for (ip, name) in hosts {
            text.push_str(&format!("{ip}\t{name}\n"));
        }
        std::fs::write(&file, text).unwrap();
        let mut cmd = tokio::process::Command::new("unshare");
        cmd.args(["-m", "--propagation", "private", "--", "sh", "-c"])
            .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
            .arg(&file)
            .arg(env!("CARGO_BIN_EXE_kubectl-cutover"))
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig);
        run(cmd).await
    }

    pub fn work(&self) -> PathBuf {
        self.work.path().to_path_buf()
    }
}

async fn run(mut cmd: tokio::process::Command) -> Run {
    let out = cmd
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
    /// Asserts no secret value appears anywhere in the output.
    pub fn assert_no_secrets(&self) {
        for s in [TOKEN, NEW_TOKEN] {
            assert!(
                !self.all().contains(s),
                "secret leaked in output:\n{}",
                self.all()
            );
        }
    }
}
