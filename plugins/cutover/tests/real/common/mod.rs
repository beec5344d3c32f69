//! Shared helpers for kubectl-cutover's real-cluster tests: git and push against the test Git
//! servers (HTTPS with their own CAs and basic auth), the tokens, the real plugin binary run as
//! a process (with `twin::testkit`'s plugin runner), a workstation's /etc/hosts and CA bundle.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use twin::git::GitServer;
use twin::testkit::{PluginRun, wrapped_plugin_command};

pub const USER: &str = "flux";
pub const TOKEN: &str = "tok-3f9c2a71d5e8";
pub const NEW_TOKEN: &str = "tok-new-88a1b7c4e2";

/// The plugin binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_kubectl-cutover");

/// Real-time bound on one plugin run: generous for a loaded 2-core machine and for an
/// in-cluster probe (its own --probe-timeout is shorter).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(600);

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
