//! Shell completion end to end: `kubectl-cltest completion install` writes the
//! `kubectl_complete-cltest` helper, and real kubectl (1.26+ plugin completion) runs it and
//! relays the plugin's Cobra-format `__complete` answer.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PLUGIN: &str = env!("CARGO_BIN_EXE_cltest-plugin");

fn kubectl() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap();
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
        .expect("kubectl must be on PATH")
}

/// A user's machine: a bin dir on PATH holding `kubectl-cltest` (a symlink, as krew makes
/// it), a HOME, and a kubeconfig with two contexts pointing at a closed local port.
struct Machine {
    _tmp: tempfile::TempDir,
    bin: PathBuf,
    home: PathBuf,
    kubeconfig: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        let home = tmp.path().join("home");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(&home).unwrap();
        std::os::unix::fs::symlink(PLUGIN, bin.join("kubectl-cltest")).unwrap();
        // Port 1 on loopback: nothing listens, connections are refused at once.
        let kubeconfig = tmp.path().join("kubeconfig");
        fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\ncurrent-context: dev\n\
             clusters:\n- name: dev-cluster\n  cluster:\n    server: https://127.0.0.1:1\n\
             - name: prod-cluster\n  cluster:\n    server: https://127.0.0.1:1\n\
             users:\n- name: dev-user\n  user:\n    token: t\n\
             contexts:\n- name: dev\n  context:\n    cluster: dev-cluster\n    user: dev-user\n    namespace: flux-system\n\
             - name: prod\n  context:\n    cluster: prod-cluster\n    user: dev-user\n",
        )
        .unwrap();
        Machine {
            _tmp: tmp,
            bin,
            home,
            kubeconfig,
        }
    }

    fn cmd(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin.display()),
            )
            .env("HOME", &self.home)
            .env("KUBECONFIG", &self.kubeconfig);
        c
    }

    fn plugin(&self, args: &[&str]) -> Output {
        self.cmd(&self.bin.join("kubectl-cltest"))
            .args(args)
            .output()
            .unwrap()
    }

    /// What the shell asks kubectl when the user presses TAB after `kubectl cltest ARGS`.
    fn kubectl_complete(&self, args: &[&str]) -> (String, String) {
        let out = self
            .cmd(&kubectl())
            .arg("__complete")
            .arg("cltest")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    fn install_helper(&self) {
        let out = self.plugin(&["completion", "install"]);
        assert!(out.status.success(), "{out:?}");
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn install_writes_an_executable_helper_next_to_the_plugin_on_path() {
    let m = Machine::new();
    let out = m.plugin(&["completion", "install"]);
    assert!(out.status.success(), "{out:?}");
    let helper = m.bin.join("kubectl_complete-cltest");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("wrote {}", helper.display())),
        "{stdout}"
    );
    assert!(stdout.contains("is on PATH"), "{stdout}");
    let script = fs::read_to_string(&helper).unwrap();
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.ends_with("exec kubectl-cltest __complete \"$@\"\n"),
        "{script}"
    );
    assert_eq!(
        fs::metadata(&helper).unwrap().permissions().mode() & 0o777,
        0o755
    );

    // The helper itself answers like `kubectl-cltest __complete`.
    let direct = m.cmd(&helper).args(["--dry"]).output().unwrap();
    assert_eq!(
        text(&direct.stdout),
        "--dry-run\tPrint what would change, change nothing\n:4\n"
    );
}

#[test]
fn install_into_an_explicit_dir_and_warn_when_not_on_path() {
    let m = Machine::new();
    let dir = m.home.join("somewhere");
    let out = m.plugin(&["completion", "install", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    assert!(dir.join("kubectl_complete-cltest").is_file());
    assert!(text(&out.stderr).contains("is not on PATH"), "{out:?}");

    // An unusable --dir (a regular file) is an error naming it, exit 1, nothing written.
    let file = m.home.join("plain-file");
    fs::write(&file, "x").unwrap();
    let out = m.plugin(&["completion", "install", "--dir", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        text(&out.stderr).contains(&file.display().to_string()),
        "{out:?}"
    );

    // `completion script` prints the same helper.
    let out = m.plugin(&["completion", "script"]);
    assert_eq!(
        text(&out.stdout),
        fs::read_to_string(dir.join("kubectl_complete-cltest")).unwrap()
    );
}

#[test]
fn kubectl_without_helper_falls_back_to_files() {
    // kubectl pluginCompletion: no kubectl_complete-<plugin> on PATH -> directive 0, no
    // candidates. This is what users get before `completion install`.
    let m = Machine::new();
    let (stdout, _) = m.kubectl_complete(&["--dr"]);
    assert_eq!(stdout, ":0\n");
}

#[test]
fn kubectl_relays_flag_names_and_values() {
    let m = Machine::new();
    m.install_helper();
    let (stdout, stderr) = m.kubectl_complete(&["--dr"]);
    assert_eq!(
        stdout, "--dry-run\tPrint what would change, change nothing\n:4\n",
        "{stderr}"
    );
    assert!(stderr.contains("ShellCompDirectiveNoFileComp"), "{stderr}");

    let (stdout, _) = m.kubectl_complete(&["-o", ""]);
    assert_eq!(
        stdout,
        "table\tHuman table\njson\tJSON on stdout\nyaml\tYAML on stdout\n:4\n"
    );

    let (stdout, _) = m.kubectl_complete(&["--output=y"]);
    assert_eq!(stdout, "yaml\tYAML on stdout\n:4\n");

    // Every flag, short and long, when the word is just "-".
    let (stdout, _) = m.kubectl_complete(&["-"]);
    for want in [
        "--kubeconfig\t",
        "--context\t",
        "--namespace\t",
        "-n\t",
        "-o\t",
        "--help\t",
    ] {
        assert!(stdout.contains(want), "{want:?} missing:\n{stdout}");
    }
    assert!(stdout.ends_with(":4\n"), "{stdout}");
}

#[test]
fn kubectl_relays_contexts_from_the_kubeconfig() {
    let m = Machine::new();
    m.install_helper();
    let (stdout, _) = m.kubectl_complete(&["--context", ""]);
    assert_eq!(
        stdout,
        "dev\tcluster dev-cluster, namespace flux-system\nprod\tcluster prod-cluster, namespace default\n:4\n"
    );
    let (stdout, _) = m.kubectl_complete(&["--context=pr"]);
    assert_eq!(
        stdout,
        "prod\tcluster prod-cluster, namespace default\n:4\n"
    );
    // --kubeconfig on the command line wins over KUBECONFIG.
    let other = m.home.join("other-kubeconfig");
    fs::write(
        &other,
        "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n",
    )
    .unwrap();
    let (stdout, _) =
        m.kubectl_complete(&["--kubeconfig", other.to_str().unwrap(), "--context", ""]);
    assert_eq!(stdout, "lab\tcluster lab, namespace default\n:4\n");
}

#[test]
fn kubectl_relays_files_for_file_arguments() {
    let m = Machine::new();
    m.install_helper();
    // Second positional is a file: directive 0 (Cobra ShellCompDirectiveDefault) lets the shell
    // complete file names.
    let (stdout, _) = m.kubectl_complete(&["ks/apps", ""]);
    assert_eq!(stdout, ":0\n");
    let (stdout, _) = m.kubectl_complete(&["--kubeconfig", ""]);
    assert_eq!(stdout, ":0\n");
}

#[test]
fn unreachable_cluster_is_an_error_directive_not_a_hang() {
    let m = Machine::new();
    m.install_helper();
    let out = m.plugin(&["__complete", "-n", ""]);
    let stdout = text(&out.stdout);
    assert_eq!(stdout, ":1\n", "{out:?}");
    assert!(
        text(&out.stderr).contains("completion: list namespaces"),
        "{out:?}"
    );
    let (stdout, _) = m.kubectl_complete(&["ks/"]);
    assert_eq!(stdout, ":1\n");
}

#[test]
fn the_built_test_plugin_is_not_a_kubectl_plugin_until_linked() {
    // Users put target/debug on PATH to try the suite: the test plugin must not show up in
    // their `kubectl plugin list`. The binary cargo builds, under its own name, is not a
    // plugin to kubectl; the `kubectl-cltest` link each test makes is.
    let m = Machine::new();
    let built = Path::new(PLUGIN).file_name().unwrap();
    let plain = m.home.join("plain-bin");
    fs::create_dir_all(&plain).unwrap();
    std::os::unix::fs::symlink(PLUGIN, plain.join(built)).unwrap();
    let list = |dir: &Path| {
        let out = m
            .cmd(&kubectl())
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display()),
            )
            .args(["plugin", "list", "--name-only"])
            .output()
            .unwrap();
        format!("{}{}", text(&out.stdout), text(&out.stderr))
    };
    let listed = list(&plain);
    assert!(!listed.contains("cltest"), "{built:?} listed: {listed}");
    let listed = list(&m.bin);
    assert!(listed.contains("kubectl-cltest"), "{listed}");
}

/// A plugin file with two words, as a cargo install of gitops-mcp puts `kubectl-gitops-mcp`
/// on PATH (typed `kubectl gitops mcp`): kubectl completes `kubectl cltest deep ...` with
/// `kubectl_complete-cltest-deep` (kubectl pluginCompletion: the command path's words, `-` as
/// `_`, joined by `-`), so `completion install` run as `kubectl-cltest-deep` must write that
/// helper, running `kubectl-cltest-deep`, not krew's one-word `kubectl_complete-cltest`.
#[test]
fn a_two_word_plugin_file_gets_the_helper_kubectl_looks_up_for_its_words() {
    let m = Machine::new();
    let deep = m.bin.join("kubectl-cltest-deep");
    std::os::unix::fs::symlink(PLUGIN, &deep).unwrap();
    let complete = || {
        let out = m
            .cmd(&kubectl())
            .args(["__complete", "cltest", "deep", "--dr"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        text(&out.stdout)
    };
    // Control: no helper yet, kubectl offers no flag of ours.
    assert!(!complete().contains("--dry-run"), "{}", complete());
    let out = m
        .cmd(&deep)
        .args(["completion", "install"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let helper = m.bin.join("kubectl_complete-cltest-deep");
    assert!(
        text(&out.stdout).contains(&format!("wrote {}", helper.display())),
        "{out:?}"
    );
    assert!(!m.bin.join("kubectl_complete-cltest").exists());
    let script = fs::read_to_string(&helper).unwrap();
    assert!(
        script.ends_with("exec kubectl-cltest-deep __complete \"$@\"\n"),
        "{script}"
    );
    assert!(
        text(&out.stdout).contains("`kubectl cltest deep <TAB>` now completes"),
        "{out:?}"
    );
    let stdout = complete();
    assert!(
        stdout.contains("--dry-run\tPrint what would change, change nothing"),
        "{stdout}"
    );
}
