//! The documentation cannot drift from the code (in the manner of stern's verify-readme): a
//! test over README.md and docs/*.md, offline and without a cluster, run by `cargo test
//! --workspace` (so in CI).
//!
//! - Every fenced block says what it holds (an info string: `console`, `sh`, `json`, `yaml`,
//!   `text`, ...).
//! - Every command line (a `$ ` line of a `console` block, every line of an `sh` block) is
//!   either in a block marked illustrative, with the line `<!-- illustrative: WHY -->` right
//!   before the fence, or runs as written on `./demo --keep` or in a clone. Those are checked
//!   here as far as a test without a cluster can: a plugin command's flags exist in that
//!   plugin's `--help`, and a cluster plugin given no usable kubeconfig exits 3, not 2 (usage
//!   is decided before any kubeconfig is read); `./demo`'s flags and steps are the ones its
//!   `--help` lists; a script named exists and is executable; `cargo -p NAME` names a package
//!   of the workspace; any other program is refused (mark the block illustrative). The
//!   `--help` examples themselves run on the demo's real cluster: tests/real `demo::`.
//! - Every flag of a plugin command in an inline code span (`kubectl unstick ks/NAME --yes`),
//!   and every bare flag span (`--yes`) on a plugin's own page, exists in that plugin's
//!   `--help`, unless the page lists it in [`FOREIGN_FLAGS`] as another program's flag.
//! - Every number quoted about tests or requests in prose comes from the code: it is listed in
//!   [`QUOTED`] with the file and text that give it. docs/measurements.md is exempt: each of its
//!   figures is a dated measurement with its command.
//!
//! The binaries are the workspace's own, from the profile directory `cargo test --workspace`
//! builds every binary into (build.rs); a binary older than its sources fails the test with the
//! command to run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A plugin as the documentation invokes it.
struct Plugin {
    /// The binary (`kubectl-<name>`).
    bin: &'static str,
    /// The word(s) after `kubectl` (cargo install's dispatch, then krew's link name).
    kubectl: &'static [&'static [&'static str]],
    /// The word after `flux` (the Flux CLI plugin's name).
    flux: &'static str,
    /// Its page under docs/.
    page: &'static str,
    /// Whether it reads a cluster by default: such a command, given no usable kubeconfig, must
    /// exit 3 (a usage error is 2, decided before any kubeconfig is read). markercheck and
    /// fleetlint are offline (they would run for real), gitops mcp serves until its client
    /// closes: those are checked by their flags only.
    cluster: bool,
}

const PLUGINS: &[Plugin] = &[
    Plugin {
        bin: "kubectl-unstick",
        kubectl: &[&["unstick"]],
        flux: "unstick",
        page: "docs/unstick.md",
        cluster: true,
    },
    Plugin {
        bin: "kubectl-podresolve",
        kubectl: &[&["podresolve"]],
        flux: "podresolve",
        page: "docs/podresolve.md",
        cluster: true,
    },
    Plugin {
        bin: "kubectl-markercheck",
        kubectl: &[&["markercheck"]],
        flux: "markercheck",
        page: "docs/markercheck.md",
        cluster: false,
    },
    Plugin {
        bin: "kubectl-cutover",
        kubectl: &[&["cutover"]],
        flux: "cutover",
        page: "docs/cutover.md",
        cluster: true,
    },
    Plugin {
        bin: "kubectl-fleetlint",
        kubectl: &[&["fleetlint"]],
        flux: "fleetlint",
        page: "docs/fleetlint.md",
        cluster: false,
    },
    Plugin {
        bin: "kubectl-gatewaycheck",
        kubectl: &[&["gatewaycheck"]],
        flux: "gatewaycheck",
        page: "docs/gatewaycheck.md",
        cluster: true,
    },
    Plugin {
        bin: "kubectl-gitops-verify",
        kubectl: &[&["gitops", "verify"], &["gitops-verify"]],
        flux: "verify",
        page: "docs/gitops-verify.md",
        cluster: true,
    },
    Plugin {
        bin: "kubectl-gitops-mcp",
        kubectl: &[&["gitops", "mcp"], &["gitops-mcp"]],
        flux: "mcp",
        page: "docs/gitops-mcp.md",
        cluster: false,
    },
];

/// Flags a plugin's page names that are another program's, not the plugin's: (page, flag,
/// whose). A bare flag span on a plugin page not listed here must exist in its `--help`.
const FOREIGN_FLAGS: &[(&str, &str, &str)] = &[
    (
        "docs/fleetlint.md",
        "--all",
        "cargo fleet-diff (tests/fleetdiff)",
    ),
    (
        "docs/fleetlint.md",
        "--controller",
        "cargo fleet-diff (tests/fleetdiff)",
    ),
    (
        "docs/fleetlint.md",
        "--timeout",
        "cargo fleet-diff (tests/fleetdiff)",
    ),
    ("docs/unstick.md", "--concurrent", "kustomize-controller"),
    (
        "docs/unstick.md",
        "--requeue-dependency",
        "kustomize-controller",
    ),
    (
        "docs/unstick.md",
        "--watch-label-selector",
        "the Flux controllers",
    ),
    ("docs/unstick.md", "--feature-gates", "kustomize-controller"),
    ("docs/unstick.md", "--force", "flux reconcile helmrelease"),
    ("docs/unstick.md", "--server-side", "kubectl apply"),
    ("docs/unstick.md", "--namespace", "kubectl"),
    (
        "docs/unstick.md",
        "--watch-all-namespaces",
        "kustomize-controller",
    ),
    (
        "docs/unstick.md",
        "--watch-configs-label-selector",
        "kustomize-controller",
    ),
    (
        "docs/unstick.md",
        "--interval-jitter-percentage",
        "kustomize-controller",
    ),
    (
        "docs/unstick.md",
        "--no-cross-namespace-refs",
        "kustomize-controller",
    ),
    (
        "docs/unstick.md",
        "--enable-leader-election",
        "the Flux controllers",
    ),
    ("docs/gitops-verify.md", "--all", "kubectl unstick"),
    ("docs/gitops-mcp.md", "--all", "kubectl unstick"),
    ("docs/gatewaycheck.md", "--keep", "./demo"),
    ("docs/cutover.md", "--force", "git push"),
    (
        "docs/gitops-verify.md",
        "--watch-label-selector",
        "the Flux controllers",
    ),
    (
        "docs/fleetlint.md",
        "--load-restrictor",
        "kubectl kustomize",
    ),
    ("docs/fleetlint.md", "--name-only", "git diff"),
    ("docs/fleetlint.md", "--path-orig", "flate"),
    ("docs/gatewaycheck.md", "--connect-to", "curl"),
    ("docs/podresolve.md", "--connect-to", "curl"),
];

/// The numbers the documentation quotes about tests or requests, each with where it comes from:
/// (page, the quoted text, a file of the repository, the text in that file that gives it).
const QUOTED: &[(&str, &str, &str, &str)] = &[
    (
        "docs/harness.md",
        "12 tests",
        ".cargo/config.toml",
        "RUST_TEST_THREADS = \"12\"",
    ),
    (
        "docs/gatewaycheck.md",
        "16 requests",
        "plugins/gatewaycheck/src/probe.rs",
        "pub const MAX_REQUESTS: usize = 16;",
    ),
    (
        "docs/gitops-verify.md",
        "12 requests",
        "tests/real/tests/real/short/gitops_verify.rs",
        "reqs.len() <= 12,",
    ),
    (
        "docs/unstick.md",
        "1 request",
        "tests/real/tests/real/long/unstick/e2e.rs",
        "assert_eq!(writes, 2, ",
    ),
    (
        "docs/unstick.md",
        "15 requests",
        "tests/real/tests/real/long/unstick/e2e.rs",
        "assert!(reqs.len() <= 15,",
    ),
];

/// Programs other than the plugins, `./demo`, the repository's scripts and cargo that a block
/// not marked illustrative may run: kubectl's and flux's own commands act on `./demo --keep`'s
/// cluster; `echo $?` shows an exit code.
const OTHER_PROGRAMS: &[&str] = &["kubectl", "flux", "echo"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// README.md and docs/*.md, as (path from the root, text).
fn documents() -> Vec<(String, String)> {
    let root = root();
    let mut paths = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(root.join(&p)).unwrap_or_else(|e| panic!("{p}: {e}"));
            (p, text)
        })
        .collect()
}

/// A fenced block: its 1-based line, info string, body lines, and the reason of an
/// `<!-- illustrative: WHY -->` line right before it.
struct Block {
    line: usize,
    info: String,
    body: Vec<String>,
    illustrative: Option<String>,
}

/// The fenced blocks of `text`, and its prose: the text with every block's lines blanked (so
/// line numbers still count).
fn split(text: &str) -> (Vec<Block>, String) {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if let Some(info) = t.strip_prefix("```") {
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                body.push(lines[i].trim_start().to_owned());
                i += 1;
            }
            let illustrative = lines[..start]
                .last()
                .map(|l| l.trim())
                .and_then(|l| l.strip_prefix("<!-- illustrative:"))
                .and_then(|l| l.strip_suffix("-->"))
                .map(|why| why.trim().to_owned());
            blocks.push(Block {
                line: start + 1,
                info: info.trim().to_owned(),
                body,
                illustrative,
            });
            prose.extend(std::iter::repeat_n("", i.min(lines.len() - 1) + 1 - start));
            i += 1;
            continue;
        }
        prose.push(lines[i]);
        i += 1;
    }
    (blocks, prose.join("\n"))
}

/// The command lines of a block: `$ ` lines of a console block, every line of an sh block
/// (comments and blank lines aside), a trailing `\` joining the next line.
fn command_lines(block: &Block) -> Vec<String> {
    let shell = matches!(block.info.as_str(), "sh" | "bash" | "shell");
    let console = block.info == "console";
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for line in &block.body {
        if let Some(mut p) = pending.take() {
            p.push(' ');
            p.push_str(line.trim_end_matches('\\').trim());
            if line.trim_end().ends_with('\\') {
                pending = Some(p);
            } else {
                out.push(p);
            }
            continue;
        }
        let cmd = if console {
            line.strip_prefix("$ ").map(str::to_owned)
        } else if shell && !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            Some(line.clone())
        } else {
            None
        };
        if let Some(cmd) = cmd {
            if cmd.trim_end().ends_with('\\') {
                pending = Some(cmd.trim_end().trim_end_matches('\\').trim().to_owned());
            } else {
                out.push(cmd);
            }
        }
    }
    out.extend(pending);
    out
}

/// Shell words of `line`, split into simple commands at `|`, `||`, `&&` and `;`, with
/// redirections and a trailing `# comment` dropped. Quotes are removed; `$(...)` stays one word.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;

    let mut quote: Option<char> = None;
    let mut parens = 0usize;
    for c in line.chars() {
        match quote {
            Some(q) if c == q && parens == 0 => quote = None,
            Some(_) => {
                if c == '(' && cur.ends_with('$') {
                    parens += 1;
                } else if c == ')' && parens > 0 {
                    parens -= 1;
                }
                cur.push(c);
            }
            None if parens > 0 => {
                if c == '(' {
                    parens += 1;
                } else if c == ')' {
                    parens -= 1;
                }
                cur.push(c);
            }
            None => match c {
                '(' if cur.ends_with('$') => {
                    parens += 1;
                    cur.push(c);
                }
                '\'' | '"' => {
                    quote = Some(c);
                    in_word = true;
                }
                '#' if !in_word => break,
                c if c.is_whitespace() => {
                    if in_word {
                        words.push(std::mem::take(&mut cur));
                        in_word = false;
                    }
                }
                _ => {
                    cur.push(c);
                    in_word = true;
                }
            },
        }
    }
    if in_word {
        words.push(cur);
    }
    let mut out = vec![Vec::new()];
    let mut skip_next = false;
    for w in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        match w.as_str() {
            "|" | "||" | "&&" | ";" => out.push(Vec::new()),
            ">" | ">>" | "<" | "2>" => skip_next = true,
            w if w.starts_with('>') || w.starts_with("2>") => {}
            _ => out.last_mut().unwrap().push(w),
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// The plugin a command invokes and the index of its first argument: `kubectl <words>`,
/// `flux <name>`, or the binary itself.
fn plugin_of(words: &[String]) -> Option<(&'static Plugin, usize)> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    for p in PLUGINS {
        if w.first() == Some(&p.bin) {
            return Some((p, 1));
        }
        if w.first() == Some(&"flux") && w.get(1) == Some(&p.flux) {
            return Some((p, 2));
        }
        if w.first() == Some(&"kubectl") {
            for k in p.kubectl {
                if w.len() > k.len() && w[1..=k.len()] == **k {
                    return Some((p, 1 + k.len()));
                }
            }
        }
    }
    None
}

/// The options a `--help` text lists (`-n`, `--namespace`, ...).
fn help_flags(help: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(
        r"(?m)^\s+(?:(-[A-Za-z]), )?(--[A-Za-z0-9][A-Za-z0-9-]*)|^\s+(-[A-Za-z])\s",
    )
    .unwrap();
    let mut flags = BTreeSet::new();
    for c in re.captures_iter(help) {
        for i in 1..=3 {
            if let Some(m) = c.get(i) {
                flags.insert(m.as_str().to_owned());
            }
        }
    }
    flags
}

/// The workspace binary `name`, or a panic naming what to run when it is missing or older
/// than the sources of its package.
fn binary(name: &str) -> PathBuf {
    let path = Path::new(env!("DOCS_BIN_DIR")).join(name);
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}: run the test through the workspace, which builds every binary first: \
                 `cargo test --workspace --tests -- drift`",
                path.display()
            )
        });
    let dir = name.strip_prefix("kubectl-").unwrap();
    for src in [
        root().join("plugins").join(dir).join("src"),
        root().join("shared/src"),
    ] {
        if let Some((changed, file)) = newest(&src)
            && changed > built
        {
            panic!(
                "{name} is older than {}: run the test through the workspace, which builds \
                 every binary first: `cargo test --workspace --tests -- drift`",
                file.display()
            );
        }
    }
    path
}

/// The newest modification time under `dir` and its file.
fn newest(dir: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for e in std::fs::read_dir(dir).ok()? {
        let e = e.ok()?;
        let p = e.path();
        let cand = if p.is_dir() {
            newest(&p)
        } else {
            e.metadata().ok()?.modified().ok().map(|t| (t, p))
        };
        if let Some(c) = cand
            && best.as_ref().is_none_or(|b| c.0 > b.0)
        {
            best = Some(c);
        }
    }
    best
}

/// `BIN [sub] --help`'s options, once per binary and subcommand.
fn flags_of(p: &Plugin, sub: Option<&str>) -> BTreeSet<String> {
    static CACHE: OnceLock<std::sync::Mutex<BTreeMap<String, BTreeSet<String>>>> = OnceLock::new();
    let key = format!("{} {}", p.bin, sub.unwrap_or(""));
    let cache = CACHE.get_or_init(Default::default);
    if let Some(f) = cache.lock().unwrap().get(&key) {
        return f.clone();
    }
    let mut cmd = Command::new(binary(p.bin));
    cmd.args(sub).arg("--help");
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{key} --help: {out:?}");
    let flags = help_flags(&String::from_utf8_lossy(&out.stdout));
    assert!(flags.contains("--help"), "{key} --help lists no options?");
    cache.lock().unwrap().insert(key, flags.clone());
    flags
}

/// The flags of a plugin command's arguments that its `--help` does not list.
fn unknown_flags(p: &Plugin, args: &[String]) -> Vec<String> {
    let sub = (args.first().map(String::as_str) == Some("completion")
        && matches!(args.get(1).map(String::as_str), Some("install" | "script")))
    .then_some("completion");
    let mut known = flags_of(p, None);
    if let Some(s) = sub {
        known.extend(flags_of(p, Some(s)));
    }
    let mut unknown = Vec::new();
    for a in args {
        if a == "--" {
            break;
        }
        let flag = if a.starts_with("--") {
            a.split('=').next().unwrap().to_owned()
        } else if a.starts_with('-')
            && a.len() >= 2
            && a.chars().nth(1).unwrap().is_ascii_alphabetic()
        {
            a[..2].to_owned()
        } else {
            continue;
        };
        if !known.contains(&flag) {
            unknown.push(flag);
        }
    }
    unknown
}

/// Runs a cluster plugin's arguments with no usable kubeconfig: usage is decided first (exit 2),
/// else the kubeconfig error (exit 3). Returns a problem, or None when it exited 3.
fn usage_problem(p: &Plugin, args: &[String]) -> Option<String> {
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(binary(p.bin))
        .args(args)
        .current_dir(root())
        .env("KUBECONFIG", home.path().join("no-such-kubeconfig"))
        .env("HOME", home.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Some("still running after 30 s with no kubeconfig".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(3) => None,
        // cutover refuses to change a cluster without confirmation when stdin is not a
        // terminal: a usage error here, not on the terminal the documentation is typed on.
        Some(2) if p.bin == "kubectl-cutover" && stderr.contains("stdin is not a terminal") => None,
        code => Some(format!(
            "exit {code:?} with no kubeconfig (3 expected): {}",
            stderr.trim()
        )),
    }
}

/// The workspace's package names.
fn packages() -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap();
    members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(|m| {
            let toml = std::fs::read_to_string(root().join(m).join("Cargo.toml")).unwrap();
            toml.lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|n| n.strip_suffix('"'))
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// `./demo --help`'s options and steps.
fn demo_usage() -> (BTreeSet<String>, BTreeSet<String>) {
    let out = Command::new("bash")
        .arg(root().join("demo"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "./demo --help: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let flags = regex::Regex::new(r"--[a-z][a-z-]*")
        .unwrap()
        .find_iter(&text)
        .map(|m| m.as_str().to_owned())
        .collect();
    // `--step a,b,...,z.` (the list may wrap).
    let steps = text
        .split("--step ")
        .nth(1)
        .and_then(|s| s.split('.').next())
        .unwrap()
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    (flags, steps)
}

/// The problems of one command of a block (an empty list when it checks out).
fn check_command(words: &[String], illustrative: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let mut w = words;
    while w
        .first()
        .is_some_and(|x| x.contains('=') && !x.starts_with('-'))
    {
        w = &w[1..];
    }
    let Some(program) = w.first() else {
        return problems;
    };
    if let Some((p, at)) = plugin_of(w) {
        let args = &w[at..];
        for f in unknown_flags(p, args) {
            problems.push(format!("{f} is not in `{} --help`", p.bin));
        }
        // `completion install` writes a helper next to the binary: checked by its flags only.
        let completion = args.first().map(String::as_str) == Some("completion")
            && matches!(args.get(1).map(String::as_str), Some("install" | "script"));
        if !illustrative && p.cluster && !completion && problems.is_empty() {
            problems.extend(usage_problem(p, args));
        }
        return problems;
    }
    if illustrative {
        return problems;
    }
    let program = program.as_str();
    if program == "./demo" {
        let (flags, steps) = demo_usage();
        let mut it = w[1..].iter();
        while let Some(a) = it.next() {
            let name = a.split('=').next().unwrap();
            if !flags.contains(name) {
                problems.push(format!("./demo has no {name} (./demo --help)"));
            }
            if name == "--step" {
                let v = a
                    .split_once('=')
                    .map(|(_, v)| v.to_owned())
                    .or_else(|| it.next().cloned());
                for s in v.unwrap_or_default().split(',') {
                    if !steps.contains(s) {
                        problems.push(format!("./demo has no step {s:?} (./demo --help)"));
                    }
                }
            }
        }
    } else if program.contains('/') {
        let path = root().join(program);
        let executable = std::fs::metadata(&path)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
            .unwrap_or(false);
        if !executable {
            problems.push(format!("{program} is not an executable of the repository"));
        }
    } else if program == "cargo" {
        let packages = packages();
        for pair in w.windows(2) {
            if pair[0] == "-p" && !packages.contains(&pair[1]) {
                problems.push(format!(
                    "cargo -p {}: no such package in the workspace",
                    pair[1]
                ));
            }
        }
    } else if !OTHER_PROGRAMS.contains(&program) {
        problems.push(format!(
            "{program} is not checked here: mark the block <!-- illustrative: WHY --> or make it a command that runs on ./demo --keep"
        ));
    }
    problems
}

/// The 1-based line of byte `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

#[test]
fn every_fenced_block_says_what_it_holds() {
    let mut problems = Vec::new();
    for (path, text) in documents() {
        for b in split(&text).0 {
            if b.info.is_empty() {
                problems.push(format!(
                    "{path}:{}: a fenced block with no info string (console, sh, json, yaml, text, ...)",
                    b.line
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_command_line_is_illustrative_or_runs_as_written() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (path, text) in documents() {
        for b in split(&text).0 {
            for line in command_lines(&b) {
                for words in commands(&line) {
                    checked += 1;
                    for p in check_command(&words, b.illustrative.is_some()) {
                        problems.push(format!("{path}:{}: `{line}`: {p}", b.line));
                    }
                }
            }
        }
    }
    assert!(checked > 0, "no command line found: is the parser broken?");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_plugin_flag_in_the_prose_exists_in_its_help() {
    let span = regex::Regex::new(r"`([^`]+)`").unwrap();
    let mut problems = Vec::new();
    for (path, text) in documents() {
        let prose = split(&text).1;
        let page_plugin = PLUGINS.iter().find(|p| p.page == path);
        for m in span.captures_iter(&prose) {
            let code = m.get(1).unwrap();
            let line = line_of(&prose, code.start());
            let code = code.as_str().replace('\n', " ");
            for words in commands(&code) {
                if let Some((p, at)) = plugin_of(&words) {
                    for f in unknown_flags(p, &words[at..]) {
                        problems.push(format!(
                            "{path}:{line}: `{code}`: {f} is not in `{} --help`",
                            p.bin
                        ));
                    }
                } else if let Some(p) = page_plugin
                    && words[0].starts_with("--")
                    && words[0][2..].starts_with(|c: char| c.is_ascii_alphabetic())
                {
                    let flag = words[0].split('=').next().unwrap();
                    let foreign = FOREIGN_FLAGS
                        .iter()
                        .any(|(page, f, _)| *page == path && *f == flag);
                    if !foreign && !flags_of(p, None).contains(flag) {
                        problems.push(format!(
                            "{path}:{line}: `{code}`: {flag} is not in `{} --help` (another program's? list it in FOREIGN_FLAGS)",
                            p.bin
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_number_quoted_about_tests_or_requests_comes_from_the_code() {
    let re = regex::Regex::new(
        r"\b(\d[\d,]*)\s+(?:(?:API|real-cluster|cluster-facing|offline|unit)\s+)?(tests?|requests?)\b",
    )
    .unwrap();
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (path, text) in documents() {
        if path == "docs/measurements.md" {
            continue;
        }
        let prose = split(&text).1.replace('\n', " ");
        for c in re.captures_iter(&prose) {
            let quoted = format!("{} {}", &c[1], &c[2]);
            let at = line_of(&split(&text).1, c.get(0).unwrap().start());
            match QUOTED
                .iter()
                .position(|(page, q, _, _)| *page == path && *q == quoted)
            {
                Some(i) => {
                    used.insert(i);
                }
                None => problems.push(format!(
                    "{path}:{at}: \"{}\": a number about tests or requests with no source: \
                     list it in QUOTED with the file that gives it, or remove it",
                    &c[0]
                )),
            }
        }
    }
    for (i, (page, quoted, file, needle)) in QUOTED.iter().enumerate() {
        let source = std::fs::read_to_string(root().join(file)).unwrap_or_default();
        if !source.contains(needle) {
            problems.push(format!(
                "{page}: \"{quoted}\" comes from {file}, which no longer says {needle:?}"
            ));
        }
        if !used.contains(&i) {
            problems.push(format!(
                "{page} no longer quotes \"{quoted}\": remove it from QUOTED"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_readme_keeps_cis_test_command() {
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let command = ci
        .lines()
        .rfind(|l| l.contains("cargo test --workspace"))
        .expect(".ci/run runs cargo test --workspace");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.lines().any(|l| l == command),
        "README.md does not show CI's test command as .ci/run runs it: {command:?}"
    );
}

#[test]
fn the_parsers_see_what_a_reader_sees() {
    let (blocks, prose) = split(
        "a\n<!-- illustrative: elsewhere -->\n```console\n$ kubectl unstick ks/a \\\n    --yes # c\nout\n```\n`--x`\n",
    );
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].illustrative.as_deref(), Some("elsewhere"));
    assert_eq!(
        command_lines(&blocks[0]),
        ["kubectl unstick ks/a --yes # c"]
    );
    assert_eq!(
        commands("kubectl unstick ks/a --yes # c"),
        [["kubectl", "unstick", "ks/a", "--yes"]]
    );
    assert_eq!(prose.lines().nth(7), Some("`--x`"));
    assert_eq!(
        commands(
            r#"A=b kubectl x --to "$(kubectl get g -o jsonpath='{.a}' | sed 's/1/2/')" | tee f > g"#
        ),
        [
            vec![
                "A=b",
                "kubectl",
                "x",
                "--to",
                "$(kubectl get g -o jsonpath='{.a}' | sed 's/1/2/')"
            ],
            vec!["tee", "f"]
        ]
    );
    assert_eq!(
        commands("kubectl markercheck $(git diff --name-only) -o json"),
        [[
            "kubectl",
            "markercheck",
            "$(git diff --name-only)",
            "-o",
            "json"
        ]]
    );
    assert_eq!(
        help_flags("Options:\n  -n, --namespace <NS>  x\n      --yes  y\n  -A  all\n"),
        ["--namespace", "--yes", "-A", "-n"]
            .map(String::from)
            .into()
    );
}
