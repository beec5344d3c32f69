//! Step 12: every example of every plugin's `--help` runs as written on the demo's cluster,
//! after the other steps (their fleets, Git servers and Gateway are what the examples name).
//!
//! Each example is run by `bash -c` exactly as `--help` prints it (quotes, `$(...)`, `>` and
//! `~` included), through kubectl's plugin dispatch, in a Git checkout of clusters/ (two
//! commits, so `HEAD~1` exists) with `HOME` set to a directory of the demo's own. What an
//! example names, the demo creates: `~/src/fleet` (a clone of that checkout), `policies.yaml`
//! (`kubectl get imagepolicies,imagerepositories,imageupdateautomations -A -o yaml`), a
//! kubeconfig context `kind-dev` (the demo's cluster under that name), namespace `team` with a
//! Service `completion`. An example passes when it exits with one of the codes its `--help`
//! documents, other than 2 (usage) and 3 (cluster/API error: an object it names is missing).
//!
//! Not run: `completion install` (it writes the completion helper next to the plugin, outside
//! the demo's directory), and gatewaycheck's examples, which step 7 runs with a check of each
//! verdict. `kubectl gitops mcp --http` serves until interrupted: it is run until it prints
//! the address it serves, then interrupted (SIGINT), and must exit 130. `kubectl gitops mcp`
//! on stdio is a server for a client on its stdin: it gets an MCP client's handshake
//! ([`MCP_HANDSHAKE`]: initialize, initialized, tools/list) and then end of input, and must
//! answer the initialize on stdout and exit 0.
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Ctx, Real, Step, copy_dir, git, real_cluster, say};

/// The plugins whose examples this step runs, as typed after `kubectl`.
const PLUGINS: [&str; 7] = [
    "unstick",
    "podresolve",
    "markercheck",
    "cutover",
    "fleetlint",
    "gitops verify",
    "gitops mcp",
];

/// What an MCP client sends first over stdio (JSON-RPC, one message per line): initialize,
/// the initialized notification, and a tools/list.
const MCP_HANDSHAKE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cluster-loop-demo","version":"0"}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    "\n",
);

/// How long one example may run (real time): `--check --timeout 2m` and a probe pod's
/// image pull are the longest waits.
const EXAMPLE_DEADLINE: Duration = Duration::from_secs(360);

/// The examples of a `--help` text: each line `kubectl ...` between `Examples:` and
/// `Exit codes:`, with the lines a trailing `\` continues.
pub(crate) fn help_examples(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for line in help
        .lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .take_while(|l| !l.starts_with("Exit codes:"))
    {
        let t = line.trim();
        if let Some(mut p) = pending.take() {
            p.push(' ');
            p.push_str(t.trim_end_matches('\\').trim_end());
            if t.ends_with('\\') {
                pending = Some(p);
            } else {
                out.push(p);
            }
        } else if t.starts_with("kubectl ") {
            if t.ends_with('\\') {
                pending = Some(t.trim_end_matches('\\').trim_end().to_owned());
            } else {
                out.push(t.to_owned());
            }
        }
    }
    out.extend(pending);
    out
}

/// The exit codes a `--help` documents: the codes of its `Exit codes:` section (`0`, `1`, `2`,
/// `3`, `4`, `130` where listed).
pub(crate) fn documented_codes(help: &str) -> Vec<i32> {
    let Some((_, section)) = help.split_once("Exit codes:") else {
        return vec![];
    };
    let section = section.split("\n\n").next().unwrap_or("");
    [0, 1, 2, 3, 4, 130]
        .into_iter()
        .filter(|c| {
            let c = c.to_string();
            section
                .split(|ch: char| ch.is_whitespace() || ch == ',')
                .any(|w| w == c)
        })
        .collect()
}

/// What the examples name, made on the cluster and in `dir`: returns (checkout, home,
/// kubeconfig) or why it could not be made.
fn prepare(
    ctx: &Ctx,
    c: &realcluster::Cluster,
    dir: &Path,
) -> Result<(std::path::PathBuf, std::path::PathBuf, std::path::PathBuf), String> {
    let repo = dir.join("repo");
    copy_dir(&ctx.repo_root.join("clusters"), &repo.join("clusters"));
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "fleet"]);
    std::fs::write(
        repo.join("NOTES.txt"),
        "a second commit, so HEAD~1 exists\n",
    )
    .map_err(|e| e.to_string())?;
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "notes"]);
    let policies = c
        .kubectl(&[
            "get",
            "imagepolicies,imagerepositories,imageupdateautomations",
            "-A",
            "-o",
            "yaml",
        ])
        .map_err(|e| format!("read the image objects: {e}"))?;
    std::fs::write(repo.join("policies.yaml"), policies).map_err(|e| e.to_string())?;
    let home = dir.join("home");
    std::fs::create_dir_all(home.join("src")).map_err(|e| e.to_string())?;
    let cloned = Command::new("git")
        .args(["clone", "-q"])
        .arg(&repo)
        .arg(home.join("src/fleet"))
        .status()
        .map_err(|e| e.to_string())?;
    if !cloned.success() {
        return Err("git clone of the checkout into ~/src/fleet failed".into());
    }
    // The demo's kubeconfig, with its context also under the name the examples use.
    let raw = c
        .kubectl(&["config", "view", "--raw", "--minify", "-o", "json"])
        .map_err(|e| format!("read the kubeconfig: {e}"))?;
    let mut kc: Value = serde_json::from_str(&raw).map_err(|e| e.to_string())?;
    let mut alias = kc["contexts"][0].clone();
    alias["name"] = "kind-dev".into();
    kc["contexts"]
        .as_array_mut()
        .ok_or("the kubeconfig has no contexts")?
        .push(alias);
    let kubeconfig = home.join("kubeconfig");
    std::fs::write(&kubeconfig, kc.to_string()).map_err(|e| e.to_string())?;
    c.apply_yaml(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: completion, namespace: team}\nspec:\n  ports: [{port: 80}]\n",
    )
    .map_err(|e| format!("namespace team, Service completion: {e}"))?;
    Ok((repo, home, kubeconfig))
}

/// Runs `example` with bash as written, `input` on its stdin (else none); returns its exit
/// code (130 when `interrupt_on` was seen on stderr and the run was interrupted), its stderr
/// and its stdout, or an error when it outlived [`EXAMPLE_DEADLINE`].
fn run(
    ctx: &Ctx,
    example: &str,
    cwd: &Path,
    home: &Path,
    kubeconfig: &Path,
    interrupt_on: Option<&str>,
    input: Option<&str>,
) -> Result<(i32, String, String), String> {
    let path = format!(
        "{}:{}",
        ctx.bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    say!("\n  $ {example}");
    // `exec`: kubectl then execs the plugin, so the plugin is this process (an interrupt
    // reaches it).
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(format!("exec {example}"))
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", home)
        .env("KUBECONFIG", kubeconfig)
        .env("NO_COLOR", "1")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write;
        // Written whole, then closed (dropped): the end of the client's input.
        let _ = stdin.write_all(text.as_bytes());
    }
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                break;
            }
        }
    });
    let mut stdout = child.stdout.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let mut err = String::new();
    let mut interrupted = false;
    let status = loop {
        while let Ok(chunk) = rx.try_recv() {
            err.push_str(&chunk);
        }
        if let Some(needle) = interrupt_on
            && !interrupted
            && err.contains(needle)
        {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            interrupted = true;
        }
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if start.elapsed() > EXAMPLE_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "still running after {} s",
                EXAMPLE_DEADLINE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = reader.join();
    while let Ok(chunk) = rx.try_recv() {
        err.push_str(&chunk);
    }
    let out = out_reader.join().unwrap_or_default();
    for l in out.lines().take(12) {
        say!("    {l}");
    }
    if out.lines().count() > 12 {
        say!("    ... ({} lines)", out.lines().count());
    }
    for l in err
        .lines()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        say!("    {l}");
    }
    let code = status.code().unwrap_or(-1);
    say!("    (exit {code})");
    Ok((code, err, out))
}

/// Step 12 (see the module docs).
pub(crate) fn step_examples(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(
        "examples: every example of every plugin's --help runs as written on this cluster (real cluster)",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let dir = ctx.work.path().join("examples");
    let (repo, home, kubeconfig) = match prepare(ctx, c, &dir) {
        Ok(p) => p,
        Err(e) => {
            st.check(false, format!("make what the examples name: {e}"));
            return st;
        }
    };
    say!(
        "  made: a checkout of clusters/ (two commits) with policies.yaml, ~/src/fleet, context kind-dev, namespace team with Service completion"
    );
    for plugin in PLUGINS {
        let words: Vec<&str> = plugin.split(' ').collect();
        let help = ctx.kubectl(Some(&kubeconfig), &[words.as_slice(), &["--help"]].concat());
        let examples = help_examples(&help.stdout);
        let codes = documented_codes(&help.stdout);
        if !st.check(
            help.code == 0 && !examples.is_empty() && !codes.is_empty(),
            format!(
                "kubectl {plugin} --help lists {} examples and the exit codes {codes:?}",
                examples.len()
            ),
        ) {
            continue;
        }
        for example in examples {
            if example.contains(" completion install") {
                say!("\n  (not run: `{example}` writes the completion helper next to the plugin)");
                continue;
            }
            let interrupt_on = example.contains("--http").then_some("serving MCP");
            let stdio_mcp = plugin == "gitops mcp" && interrupt_on.is_none();
            let input = stdio_mcp.then_some(MCP_HANDSHAKE);
            match run(
                ctx,
                &example,
                &repo,
                &home,
                &kubeconfig,
                interrupt_on,
                input,
            ) {
                Ok((code, _, out)) => {
                    let expected = if interrupt_on.is_some() {
                        code == 130
                    } else if stdio_mcp {
                        code == 0 && out.contains(r#""id":1"#) && out.contains("serverInfo")
                    } else {
                        codes.contains(&code) && code != 2 && code != 3
                    };
                    st.check(
                        expected,
                        format!(
                            "`{example}` runs as written (exit {code}; documented {codes:?}, neither 2 usage nor 3 cluster/API{})",
                            if interrupt_on.is_some() {
                                "; interrupted once serving: 130"
                            } else {
                                ""
                            }
                        ),
                    );
                }
                Err(e) => {
                    st.check(false, format!("`{example}`: {e}"));
                }
            }
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_and_exit_codes_are_read_from_help() {
        let help = "Usage: x\n\nExamples:\n  # one\n  kubectl x a \\\n      --b \"$(c)\"\n\n  kubectl x d > f\n\nExit codes:\n  0  ok\n  1  finding, 2 of them\n  130 interrupted\n\nMore: 3 things\n";
        assert_eq!(
            help_examples(help),
            ["kubectl x a --b \"$(c)\"", "kubectl x d > f"]
        );
        assert_eq!(documented_codes(help), [0, 1, 2, 130]);
        assert_eq!(
            documented_codes(
                "Exit codes: 0 no error findings, 1 error findings, 2 usage, 3 cluster/API error.\nRules: x"
            ),
            [0, 1, 2, 3]
        );
    }
}
