//! Helpers for tests: running a plugin binary as a process (with a deadline, SIGINT, and an API
//! endpoint that never answers) and skipping a test the pod runtime cannot run on this host.
//! The scenario helpers that drove the twin's Flux models were retired with them in session 5;
//! the Flux object keys and condition checks, the bare API server and the Secret helper over
//! its store with the in-memory API server in session 6 (the real-cluster tests read objects
//! with `realcluster::testkit`).
//!
//! Shared by this crate's tests and the plugins' tests (a dev-dependency on `twin` is enough;
//! no feature). Every helper panics on failure, as a test should. Product code must not use
//! them.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// For tests that need the podexec model (probe images run for real in private namespaces):
/// `true`, after printing `SKIPPED: ...` on stderr with what is missing and how to install it,
/// when [`crate::podexec::missing_prerequisites`] names a host tool or root; the test then
/// returns early.
pub fn skip_without_podexec() -> bool {
    let m = crate::podexec::missing_prerequisites();
    if m.is_empty() {
        return false;
    }
    eprintln!(
        "SKIPPED: the twin's podexec needs {} (apt-get install -y dnsmasq busybox util-linux iproute2 bind9-dnsutils; run as root)",
        m.join(", ")
    );
    true
}

/// What a plugin binary run left: its exit code (`-1` when a signal ended it) and its stdout
/// and stderr (lossy UTF-8).
#[derive(Debug, Clone)]
pub struct PluginRun {
    /// Exit code, `-1` when killed by a signal.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl PluginRun {
    /// Stdout parsed as JSON (for `-o json`). Panics with stdout and stderr when it is not
    /// JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    /// Stdout, a newline, then stderr: for assertion messages and for checking that a string
    /// appears nowhere in the output.
    pub fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

impl From<std::process::Output> for PluginRun {
    fn from(o: std::process::Output) -> PluginRun {
        PluginRun {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into(),
            stderr: String::from_utf8_lossy(&o.stderr).into(),
        }
    }
}

/// The command line `<bin> --kubeconfig <kubeconfig> <args>` for a plugin binary (e.g.
/// `env!("CARGO_BIN_EXE_kubectl-unstick")`), with `NO_COLOR=1`, stdin closed, stdout and
/// stderr piped, killed when dropped. Spawn it, or run it with [`run_plugin`].
pub fn plugin_command(bin: &str, kubeconfig: &Path, args: &[&str]) -> tokio::process::Command {
    wrapped_plugin_command(&[], bin, kubeconfig, args)
}

/// [`plugin_command`] run through `wrapper` (a program and its arguments, e.g. `unshare -m --
/// sh -c SCRIPT` to give the plugin a private /etc/hosts): the command line is
/// `<wrapper...> <bin> --kubeconfig <kubeconfig> <args>`, with the same environment and
/// pipes. An empty `wrapper` runs `bin` itself. A SIGINT sent to the child reaches the
/// plugin only when the wrapper `exec`s it.
pub fn wrapped_plugin_command(
    wrapper: &[&OsStr],
    bin: &str,
    kubeconfig: &Path,
    args: &[&str],
) -> tokio::process::Command {
    let mut c = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = tokio::process::Command::new(program);
            c.args(rest).arg(bin);
            c
        }
        None => tokio::process::Command::new(bin),
    };
    c.arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Runs [`plugin_command`] to its end and returns what it left. Panics when it cannot start
/// or has not finished after `timeout` (real time; it is killed then).
pub async fn run_plugin(
    bin: &str,
    kubeconfig: &Path,
    args: &[&str],
    timeout: Duration,
) -> PluginRun {
    run_command(plugin_command(bin, kubeconfig, args), timeout).await
}

/// Runs `cmd` (from [`plugin_command`] or [`wrapped_plugin_command`]) to its end and returns
/// what it left. Panics when it cannot start or has not finished after `timeout` (real time;
/// it is killed then, as the command is `kill_on_drop`).
pub async fn run_command(mut cmd: tokio::process::Command, timeout: Duration) -> PluginRun {
    let what = format!("{:?}", cmd.as_std());
    tokio::time::timeout(timeout, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in {timeout:?}"))
        .unwrap_or_else(|e| panic!("running {what}: {e}"))
        .into()
}

/// Sends SIGINT to a spawned plugin (`kill -INT <pid>`, as Ctrl-C in a terminal would) and
/// waits until it exits; returns what it left (a plugin that exits on the signal without
/// handling it reads `code: -1`). Panics when the child has already been reaped, when `kill`
/// fails, or when it has not exited `timeout` (real time) after the signal.
pub async fn interrupt(child: tokio::process::Child, timeout: Duration) -> PluginRun {
    let pid = child.id().expect("the plugin has not been reaped yet");
    let st = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("running kill: {e}"));
    assert!(st.success(), "kill -INT {pid}: {st}");
    tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("pid {pid} did not exit within {timeout:?} of SIGINT"))
        .unwrap_or_else(|e| panic!("waiting for pid {pid}: {e}"))
        .into()
}

/// Runs plugin binary `bin` with `args` against an API server that accepts connections and
/// never answers a byte (no `--request-timeout`), waits until the plugin has connected (so it
/// is inside its first request, past installing its signal listeners), sends `signal` (`kill`
/// syntax: `"-INT"`, `"-TERM"`) and returns (exit code, stderr).
///
/// Panics if the plugin never connects within 60 s or is still running 10 s after the
/// signal: the property under test is that a hung API server cannot hold off Ctrl-C.
pub async fn signal_while_api_hangs(
    bin: &str,
    args: &[&str],
    signal: &str,
) -> (Option<i32>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
            let _ = tx.send(());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hang\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: hang\n  context: {{cluster: hang, user: u}}\ncurrent-context: hang\n"
        ),
    )
    .unwrap();
    let child = plugin_command(bin, &kubeconfig, args).spawn().unwrap();
    tokio::time::timeout(Duration::from_secs(60), accepted.recv())
        .await
        .expect("the plugin never connected to the API server")
        .unwrap();
    let pid = child.id().unwrap();
    let sent = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{bin} {args:?} ignored {signal} for 10s"))
        .unwrap();
    server.abort();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wrapped_command_order_and_output() {
        let script = OsStr::new("echo \"$0 $*\"; echo \"err $NO_COLOR\" >&2; exit 3");
        let wrapper = [OsStr::new("sh"), OsStr::new("-c"), script];
        let cmd = wrapped_plugin_command(&wrapper, "plug", Path::new("/k"), &["ks/a", "-o"]);
        let r = run_command(cmd, Duration::from_secs(60)).await;
        assert_eq!(r.code, 3);
        assert_eq!(r.stdout, "plug --kubeconfig /k ks/a -o\n");
        assert_eq!(r.stderr, "err 1\n");
        assert_eq!(r.all(), "plug --kubeconfig /k ks/a -o\n\nerr 1\n");
    }

    #[tokio::test]
    async fn interrupt_ends_a_running_plugin() {
        // SIGINT's default action for the stand-in plugin even when this test runs with SIGINT
        // ignored: a background job of a non-interactive shell (`cmd &` in a CI script)
        // inherits SIG_IGN, exec keeps it, and a plain `sleep` would then never end. A real
        // plugin installs its own handler, so it does not depend on the inherited disposition.
        let script = OsStr::new("exec env --default-signal=INT sleep 600");
        let child = wrapped_plugin_command(
            &[OsStr::new("sh"), OsStr::new("-c"), script],
            "x",
            Path::new("/k"),
            &[],
        )
        .spawn()
        .unwrap();
        // Signal only once `env` has reset SIGINT and exec'd sleep: with SIGINT ignored on
        // entry, a signal that reaches `sh` before that is discarded, and sleep runs on.
        let pid = child.id().unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim() != "sleep")
            .unwrap_or(true)
        {
            assert!(
                std::time::Instant::now() < until,
                "pid {pid} never became sleep"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let r = interrupt(child, Duration::from_secs(60)).await;
        assert_eq!(r.code, -1, "ended by the signal: {r:?}");
    }
}
