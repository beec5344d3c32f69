//! Under a real pseudo-terminal (util-linux `script`), without colour (`NO_COLOR=1` or
//! `--color never`) the progress line writes no escape code at all: plain lines instead of the
//! spinner's erase-line redraws (`\e[2K`). With colour the spinner is drawn (the control: the
//! terminal really is one). The countdown shows `--timeout`, not `--timeout` + 15 s.
#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-podresolve");

/// An API server that accepts connections and never answers: the plugin sits in "waiting for
/// the API server" with its progress shown until SIGINT (sent by `timeout -s INT`).
fn hanging_api() -> (tempfile::TempDir, std::path::PathBuf) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::File::create(&kubeconfig)
        .unwrap()
        .write_all(
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: hang\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: hang\n  context: {{cluster: hang, user: u}}\ncurrent-context: hang\n"
            )
            .as_bytes(),
        )
        .unwrap();
    (dir, kubeconfig)
}

/// Everything the terminal received from `env ENV... kubectl-podresolve ARGS` under `script`,
/// interrupted after 3 s.
fn on_a_pty(env: &[&str], args: &[&str]) -> String {
    if Command::new("script").arg("--version").output().is_err() {
        panic!(
            "util-linux `script` is needed for the pty test (scripts/setup-machine installs it)"
        );
    }
    let (_dir, kubeconfig) = hanging_api();
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut cmd = String::from("env -u NO_COLOR TERM=xterm-256color COLUMNS=120 ");
    for e in env {
        cmd.push_str(&quote(e));
        cmd.push(' ');
    }
    cmd.push_str("timeout -s INT 3 ");
    cmd.push_str(&quote(BIN));
    cmd.push_str(" --kubeconfig ");
    cmd.push_str(&quote(&kubeconfig.display().to_string()));
    for a in args {
        cmd.push(' ');
        cmd.push_str(&quote(a));
    }
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.wait().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn no_colour_means_no_escape_codes_on_a_terminal() {
    for (env, args) in [
        (
            vec!["NO_COLOR=1"],
            vec!["gitea.example.dev", "--timeout", "10s"],
        ),
        (
            vec![],
            vec!["gitea.example.dev", "--timeout", "10s", "--color", "never"],
        ),
    ] {
        let out = on_a_pty(&env, &args);
        assert!(
            out.contains("waiting for the API server"),
            "{env:?} {args:?}: the progress is still shown:\n{out:?}"
        );
        assert!(
            !out.contains('\u{1b}'),
            "{env:?} {args:?}: escape codes without colour:\n{out:?}"
        );
        // The countdown is --timeout (10s), not --timeout + 15s ("24s left" before).
        assert!(
            out.contains("(10s left)") || out.contains("(9s left)"),
            "{out:?}"
        );
        assert!(out.contains("interrupted by SIGINT"), "{out:?}");
    }
    // Control: with colour the spinner redraws with escape codes, so the pty is a terminal.
    let out = on_a_pty(&[], &["gitea.example.dev", "--color", "always"]);
    assert!(out.contains("\u{1b}["), "{out:?}");
}
