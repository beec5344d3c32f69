//! Cluster connection flags and kubeconfig resolution, the way kubectl does it.
//!
//! kubectl passes no global flags to plugins, so every plugin flattens [`ClusterArgs`] in:
//!
//! ```no_run
//! use clap::Parser;
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     cluster: cluster_loop::cli::ClusterArgs,
//! }
//! # async fn run() -> cluster_loop::Result<()> {
//! let cli = Cli::parse();
//! let conn = cli.cluster.connect().await?;
//! println!("{} in {}", conn.server, conn.namespace);
//! # Ok(()) }
//! ```
//!
//! # Resolution (client-go `clientcmd` loading rules, as kubectl uses them)
//!
//! 1. `--kubeconfig PATH`: only that file; it must exist (else a config error, exit 3).
//! 2. else `KUBECONFIG` (a `:`-separated list, empty entries ignored): the files are merged,
//!    **the first file to set a value wins** (each cluster / user / context name, and
//!    `current-context`); files that do not exist are skipped, as client-go does; a file
//!    that cannot be read or parsed is an error naming it (exit 3).
//! 3. else `~/.kube/config` if it exists.
//! 4. if nothing was loaded (or the merged config has no contexts) and the process runs in a
//!    pod (`KUBERNETES_SERVICE_HOST`/`_PORT` set), the in-cluster service account.
//!
//! Then the context is `--context` or `current-context`; `--cluster` / `--user` replace the
//! context's cluster / user. Every kubeconfig problem is a config error, exit 3, whether the
//! file or name came from a flag or from the environment: a missing or unparsable file, a
//! `--context` / `--cluster` / `--user` that the file does not have, an unset or dangling
//! `current-context`. Exit 2 stays for a command line that is wrong on any machine (decided
//! without reading a file); whether a kubeconfig names a context is this machine's state. Exec credential plugins and
//! OIDC refresh work through kube's `AuthInfo` (features `client`, `oidc`).
//!
//! Namespace: `-n` if given, else the context's `namespace`, else `default` (in-cluster: the
//! service account's namespace). Flux objects default to `flux-system` instead, like the
//! flux CLI ([`ClusterArgs::flux_namespace`]).

use crate::duration::GoDuration;
use crate::error::{ApiContext, Error, Result};
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The CLI a plugin was started from, read from its executable name (argv\[0\]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// `kubectl <name>`: kubectl's plugin dispatch runs `kubectl-<name>` (also the default
    /// for any other file name, e.g. `cargo run`).
    Kubectl,
    /// `flux <name>`: Flux 2.9+ runs `flux-<name>` from `$FLUXCD_PLUGINS` or
    /// `~/.fluxcd/plugins` with argv\[0\] = its full path (flux2 internal/plugin/discovery.go
    /// `pluginPrefix = "flux-"`, exec_unix.go `syscall.Exec(path, append([]string{path}, ...))`).
    Flux,
}

impl Host {
    /// The host of an executable path: [`Host::Flux`] when its file name (without `.exe`)
    /// starts with `flux-`, else [`Host::Kubectl`].
    pub fn of_argv0(argv0: &std::ffi::OsStr) -> Host {
        let base = Path::new(argv0)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if base.starts_with("flux-") {
            Host::Flux
        } else {
            Host::Kubectl
        }
    }

    /// The host of this process (argv\[0\]).
    pub fn current() -> Host {
        std::env::args_os()
            .next()
            .map(|a| Host::of_argv0(&a))
            .unwrap_or(Host::Kubectl)
    }

    /// `kubectl` or `flux`.
    pub fn word(self) -> &'static str {
        match self {
            Host::Kubectl => "kubectl",
            Host::Flux => "flux",
        }
    }
}

/// How the plugin was invoked, read from its executable name (argv\[0\]): the host CLI and
/// the command words the user typed after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// `kubectl` or `flux`.
    pub host: Host,
    /// The words after the host: `unstick`; `gitops mcp` for `kubectl-gitops-mcp` on PATH;
    /// `gitops-mcp` for krew's link `kubectl-gitops_mcp`; `mcp` for `flux-mcp`.
    pub words: String,
}

impl Invocation {
    /// The invocation of the executable `argv0` of a plugin whose kubectl command words are
    /// `default_words` (`unstick`, `gitops mcp`). kubectl's dispatch (k8s.io/kubectl
    /// pkg/cmd/cmd.go `HandlePluginCommand`) runs `kubectl-A-B` for `kubectl A B` and looks a
    /// word's `-` up as `_`, so the file name says what was typed: `-` separates words and `_`
    /// reads `-` (krew links plugin `gitops-mcp` as `kubectl-gitops_mcp`, krew
    /// `pluginNameToBin`). flux runs `flux-NAME` for `flux NAME` (flux2
    /// internal/plugin/discovery.go). Any other file name (a renamed copy) reads as
    /// `kubectl <default_words>`.
    pub fn of_argv0(argv0: &std::ffi::OsStr, default_words: &str) -> Invocation {
        let file = Path::new(argv0)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let base = file.strip_suffix(".exe").unwrap_or(&file);
        if let Some(name) = base.strip_prefix("flux-").filter(|n| !n.is_empty()) {
            return Invocation {
                host: Host::Flux,
                words: name.to_string(),
            };
        }
        let words = match base.strip_prefix("kubectl-").filter(|n| !n.is_empty()) {
            Some(name) => name
                .split('-')
                .map(|w| w.replace('_', "-"))
                .collect::<Vec<_>>()
                .join(" "),
            None => default_words.to_string(),
        };
        Invocation {
            host: Host::Kubectl,
            words,
        }
    }

    /// The invocation of this process ([`Invocation::of_argv0`] of argv\[0\]).
    pub fn current(default_words: &str) -> Invocation {
        match std::env::args_os().next() {
            Some(a) => Invocation::of_argv0(&a, default_words),
            None => Invocation {
                host: Host::Kubectl,
                words: default_words.to_string(),
            },
        }
    }

    /// What the user typed: `kubectl gitops mcp`, `flux mcp`.
    pub fn command_line(&self) -> String {
        format!("{} {}", self.host.word(), self.words)
    }
}

/// The plugin's clap command as the user invoked it ([`Invocation`]): name
/// `<host>-<words joined by ->`, bin name `<host> <words>` (usage lines, errors), and every
/// `kubectl <default_words>` in the about, long about and after-help texts (the examples)
/// reading as typed (`flux mcp`, `kubectl gitops-mcp` after a krew install).
pub fn command_for(cmd: clap::Command, default_words: &str, how: &Invocation) -> clap::Command {
    // clap's `name` wants a `&'static str` (no "string" feature): one small leak per process.
    let name: &'static str =
        Box::leak(format!("{}-{}", how.host.word(), how.words.replace(' ', "-")).into_boxed_str());
    let mut cmd = cmd.name(name).bin_name(how.command_line());
    let from = format!("kubectl {default_words}");
    let to = how.command_line();
    if from != to {
        let fix = |s: &clap::builder::StyledStr| s.to_string().replace(&from, &to);
        if let Some(t) = cmd.get_about().map(fix) {
            cmd = cmd.about(t);
        }
        if let Some(t) = cmd.get_long_about().map(fix) {
            cmd = cmd.long_about(t);
        }
        if let Some(t) = cmd.get_after_help().map(fix) {
            cmd = cmd.after_help(t);
        }
        if let Some(t) = cmd.get_after_long_help().map(fix) {
            cmd = cmd.after_long_help(t);
        }
    }
    cmd
}

/// Parses the process arguments into `C` with [`command_for`] this process's [`Invocation`]
/// (`plugin`: the kubectl command words, `unstick` or `gitops mcp`): what every plugin's
/// `main` calls instead of `C::parse()`. Usage errors, `--help` and `--version` exit as clap
/// does (2 / 0).
pub fn parse<C: clap::Parser>(plugin: &str) -> C {
    let cmd = command_for(C::command(), plugin, &Invocation::current(plugin));
    let matches = cmd.clone().get_matches();
    C::from_arg_matches(&matches).unwrap_or_else(|e| e.with_cmd(&cmd).exit())
}

/// clap `value_parser` for a flag naming a local clone (cutover `--repo`): a directory inside
/// a Git work tree, as `git -C PATH rev-parse --is-inside-work-tree` answers `true` (real git;
/// a bare repository answers `false`). Decided before any kubeconfig is read: a path that
/// does not exist, is not a directory, or is not in a work tree is a usage error (exit 2)
/// naming the path and what to pass instead. Returns the path as given.
pub fn parse_git_work_tree(s: &str) -> std::result::Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if let Some(problem) = crate::repo::directory_problem(&p) {
        return Err(format!(
            "{problem} (pass a local clone of the Git repository)"
        ));
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&p)
        .args(["rev-parse", "--is-inside-work-tree"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{s}: cannot run git to check it is a Git work tree: {e}"))?;
    if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "true" {
        Ok(p)
    } else {
        Err(format!(
            "{s}: not a Git repository (git rev-parse --is-inside-work-tree: {}); pass a local clone of the repository (git clone URL DIR)",
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .trim_start_matches("fatal: ")
                .lines()
                .next()
                .filter(|l| !l.is_empty())
                .unwrap_or("false")
        ))
    }
}

/// The namespace Flux is installed in by default (flux CLI `--namespace` default).
pub const FLUX_DEFAULT_NAMESPACE: &str = "flux-system";

/// kubectl's cluster flags. Flatten into every plugin with `#[command(flatten)]`.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Cluster options")]
pub struct ClusterArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)
    #[arg(long, value_name = "PATH", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The name of the kubeconfig context to use
    #[arg(long, value_name = "NAME", global = true)]
    pub context: Option<String>,
    /// The name of the kubeconfig cluster to use
    #[arg(long, value_name = "NAME", global = true)]
    pub cluster: Option<String>,
    /// The name of the kubeconfig user to use
    #[arg(long, value_name = "NAME", global = true)]
    pub user: Option<String>,
    /// The namespace (default: the context's namespace, else "default"; Flux objects:
    /// "flux-system")
    #[arg(short = 'n', long, value_name = "NAMESPACE", global = true, value_parser = crate::refs::parse_namespace)]
    pub namespace: Option<String>,
    /// How long to wait for a single server request: 0 (no timeout), a number of seconds,
    /// or a duration like 30s, 1m
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = parse_request_timeout, global = true)]
    pub request_timeout: RequestTimeout,
}

/// `--request-timeout`: `None` means no timeout (`0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestTimeout(pub Option<Duration>);

/// Parse `--request-timeout` like client-go `DirectClientConfig.getTimeout`: a non-negative
/// integer is seconds, else a Go duration (`30s`, `1m`, `1m30s`); `0` means no timeout.
/// Errors: negative or unparsable, with kubectl's wording.
pub fn parse_request_timeout(s: &str) -> std::result::Result<RequestTimeout, String> {
    const MSG: &str = "Invalid timeout value. Timeout must be a single integer in seconds, or an integer followed by a corresponding time unit (e.g. 1s | 2m | 3h)";
    let s = s.trim();
    let d = if let Ok(secs) = s.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        match s.parse::<GoDuration>() {
            Ok(g) => g.to_std().ok_or_else(|| MSG.to_string())?,
            Err(_) => return Err(MSG.to_string()),
        }
    };
    Ok(RequestTimeout(if d.is_zero() { None } else { Some(d) }))
}

/// A connected client plus what the plugin needs to know about it.
#[derive(Clone)]
pub struct Connection {
    /// kube client (lazy: the first request connects and runs credential plugins).
    pub client: kube::Client,
    /// Effective namespace: `-n`, else the context's, else `default`.
    pub namespace: String,
    /// True when `-n/--namespace` was given.
    pub namespace_explicit: bool,
    /// Context used (`None` in-cluster).
    pub context: Option<String>,
    /// API server URL (from the kubeconfig cluster or in-cluster env).
    pub server: String,
    /// `--request-timeout` (`None`: none).
    pub request_timeout: Option<Duration>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("namespace", &self.namespace)
            .field("namespace_explicit", &self.namespace_explicit)
            .field("context", &self.context)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// An [`ApiContext`] naming this connection's server and context, to build API error
    /// context.
    pub fn ctx(&self) -> ApiContext {
        ApiContext::new(self.server.clone()).kube_context(self.context.clone())
    }

    /// Whether namespace `ns` is known to exist (one GET): `Ok(true)`; `Ok(false)` when GET
    /// namespaces is forbidden (we cannot tell). Errors: a 404 names the namespace, the
    /// context and `kubectl get ns` (exit 3), like any object the user named that the
    /// cluster lacks; other API errors (exit 3).
    pub async fn namespace_exists(&self, ns: &str) -> crate::error::Result<bool> {
        use k8s_openapi::api::core::v1::Namespace;
        let api: kube::Api<Namespace> = kube::Api::all(self.client.clone());
        let ctx = self.ctx().verb("get").resource_of::<Namespace>().name(ns);
        match api.get_opt(ns).await {
            Ok(Some(_)) => Ok(true),
            Ok(None) => Err(crate::error::Error::not_found(ctx)),
            Err(e) => {
                let err = crate::error::Error::from_kube(e, ctx);
                if err.status_code() == Some(403) {
                    Ok(false)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Namespace for Flux objects: `-n` if given, else `flux-system` (flux CLI behaviour,
    /// which ignores the context's namespace).
    pub fn flux_namespace(&self) -> String {
        if self.namespace_explicit {
            self.namespace.clone()
        } else {
            FLUX_DEFAULT_NAMESPACE.to_string()
        }
    }
}

/// The process environment that kubeconfig resolution reads, injectable for tests.
#[derive(Debug, Clone, Default)]
pub struct KubeconfigEnv {
    /// Value of `KUBECONFIG`, if set.
    pub kubeconfig: Option<OsString>,
    /// Home directory (for `~/.kube/config`).
    pub home: Option<PathBuf>,
    /// True when `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` are set.
    pub in_cluster: bool,
}

impl KubeconfigEnv {
    /// Read `KUBECONFIG`, `HOME` (`USERPROFILE` on Windows) and the in-cluster variables.
    pub fn from_process() -> Self {
        let home = std::env::var_os("HOME")
            .or_else(|| std::env::var_os("USERPROFILE"))
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        KubeconfigEnv {
            kubeconfig: std::env::var_os("KUBECONFIG"),
            home,
            in_cluster: std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
                && std::env::var_os("KUBERNETES_SERVICE_PORT").is_some(),
        }
    }
}

/// A resolved, not yet connected, configuration.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// kube client configuration (timeouts applied).
    pub config: kube::Config,
    /// Context used; `None` in-cluster.
    pub context: Option<String>,
    /// Effective namespace.
    pub namespace: String,
    /// True when `-n` was given.
    pub namespace_explicit: bool,
    /// Server URL.
    pub server: String,
    /// Kubeconfig files that were loaded, in precedence order (empty in-cluster).
    pub sources: Vec<PathBuf>,
}

fn config_err(message: String, from_flags: bool) -> Error {
    Error::Config {
        message,
        from_flags,
    }
}

fn files_text(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Load one kubeconfig file; errors name the file: `cannot load kubeconfig file "F": WHY: fix
/// the file or ...`. The parser's own `error: ` words are dropped from WHY, so the printed line
/// (`error: cannot load ...`) says "error" once.
fn load_file(path: &Path, from_flags: bool) -> Result<Kubeconfig> {
    Kubeconfig::read_from(path).map_err(|e| {
        let why = match &e {
            KubeconfigError::ReadConfig(io, _) => io.to_string(),
            other => other.to_string(),
        };
        config_err(
            format!(
                "cannot load kubeconfig file \"{}\": {}: fix the file or point --kubeconfig / KUBECONFIG elsewhere",
                path.display(),
                without_error_words(&why)
            ),
            from_flags,
        )
    })
}

/// `why` without the words "error:"/"Error:" that nested parser messages repeat
/// (`failed to parse kubeconfig YAML: error: line 1 ...` -> `failed to parse kubeconfig YAML:
/// line 1 ...`).
fn without_error_words(why: &str) -> String {
    let mut out = why.to_string();
    for w in ["error: ", "Error: ", "ERROR: "] {
        out = out.replace(w, "");
    }
    out.trim().to_string()
}

/// Which files to load and the merged kubeconfig; `None` when nothing was found.
fn load_kubeconfig(
    args: &ClusterArgs,
    env: &KubeconfigEnv,
) -> Result<(Option<Kubeconfig>, Vec<PathBuf>, String)> {
    if let Some(p) = &args.kubeconfig {
        if !p.exists() {
            return Err(config_err(
                format!("--kubeconfig {}: file does not exist", p.display()),
                true,
            ));
        }
        let kc = load_file(p, true)?;
        return Ok((
            Some(kc),
            vec![p.clone()],
            format!("--kubeconfig {}", p.display()),
        ));
    }
    let env_paths: Vec<PathBuf> = env
        .kubeconfig
        .as_ref()
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !env_paths.is_empty() {
        let mut merged: Option<Kubeconfig> = None;
        let mut loaded = Vec::new();
        for p in &env_paths {
            if !p.exists() {
                continue; // client-go skips missing files in KUBECONFIG
            }
            let kc = load_file(p, false)?;
            merged = Some(match merged {
                None => kc,
                Some(m) => m.merge(kc).map_err(|e| {
                    config_err(
                        format!("cannot merge kubeconfig \"{}\": {e}", p.display()),
                        false,
                    )
                })?,
            });
            loaded.push(p.clone());
        }
        let what = format!("KUBECONFIG={}", files_text(&env_paths));
        return Ok((merged, loaded, what));
    }
    if let Some(home) = &env.home {
        let p = home.join(".kube").join("config");
        if p.exists() {
            let kc = load_file(&p, false)?;
            return Ok((Some(kc), vec![p.clone()], p.display().to_string()));
        }
        return Ok((None, Vec::new(), p.display().to_string()));
    }
    Ok((
        None,
        Vec::new(),
        "~/.kube/config (no home directory)".into(),
    ))
}

fn names<T>(items: &[T], f: impl Fn(&T) -> &str) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items.iter().map(f).collect::<Vec<_>>().join(", ")
}

impl ClusterArgs {
    /// Namespace for Flux objects: `-n` if given, else `flux-system` (flux CLI behaviour).
    pub fn flux_namespace(&self) -> String {
        self.namespace
            .clone()
            .unwrap_or_else(|| FLUX_DEFAULT_NAMESPACE.to_string())
    }

    /// Resolve the configuration from the process environment and connect (lazily: no
    /// request is sent). Errors: [`Error::Config`] (exit 3).
    pub async fn connect(&self) -> Result<Connection> {
        let r = self.resolve_with(&KubeconfigEnv::from_process()).await?;
        // Building the client runs exec credential plugins: their failures are credential
        // errors naming the server (exit 3), not config errors.
        let client = kube::Client::try_from(r.config)
            .map_err(|e| Error::from_kube(e, ApiContext::new(r.server.clone())))?;
        Ok(Connection {
            client,
            namespace: r.namespace,
            namespace_explicit: r.namespace_explicit,
            context: r.context,
            server: r.server,
            request_timeout: self.request_timeout.0,
        })
    }

    /// Resolve kubeconfig, context, cluster, user and namespace against `env` (see the module
    /// docs for the rules). Sends no request.
    pub async fn resolve_with(&self, env: &KubeconfigEnv) -> Result<Resolved> {
        let (kc, sources, what) = load_kubeconfig(self, env)?;
        let usable = kc
            .as_ref()
            .is_some_and(|k| !k.contexts.is_empty() || self.context.is_some());
        let (mut config, context, sources) = if usable {
            let kc = kc.unwrap_or_default();
            let (config, ctx) = self.load_context(kc, &sources).await?;
            (config, Some(ctx), sources)
        } else if env.in_cluster
            && self.context.is_none()
            && self.cluster.is_none()
            && self.user.is_none()
        {
            let config = kube::Config::incluster().map_err(|e| {
                config_err(
                    format!(
                        "no kubeconfig found ({what}) and the in-cluster configuration failed: {e}"
                    ),
                    false,
                )
            })?;
            (config, None, Vec::new())
        } else {
            let found = if sources.is_empty() {
                format!("no kubeconfig found ({what})")
            } else {
                format!("kubeconfig {} has no contexts", files_text(&sources))
            };
            let from_flags = self.kubeconfig.is_some();
            return Err(config_err(
                format!(
                    "{found}: pass --kubeconfig PATH, set KUBECONFIG, or create ~/.kube/config (e.g. kind/k3d/your cloud CLI writes it)"
                ),
                from_flags,
            ));
        };
        if let Some(t) = self.request_timeout.0 {
            config.read_timeout = Some(t);
            config.write_timeout = Some(t);
            config.connect_timeout = Some(config.connect_timeout.map_or(t, |c| c.min(t)));
        }
        let (namespace, namespace_explicit) = match &self.namespace {
            Some(ns) => {
                crate::refs::validate_name(ns)
                    .map_err(|why| Error::Usage(format!("-n/--namespace {ns:?}: {why}")))?;
                (ns.clone(), true)
            }
            None => (config.default_namespace.clone(), false),
        };
        let server = config.cluster_url.to_string();
        Ok(Resolved {
            config,
            context,
            namespace,
            namespace_explicit,
            server,
            sources,
        })
    }

    async fn load_context(
        &self,
        kc: Kubeconfig,
        sources: &[PathBuf],
    ) -> Result<(kube::Config, String)> {
        let files = files_text(sources);
        let ctx_name = match (&self.context, &kc.current_context) {
            (Some(c), _) => c.clone(),
            (None, Some(c)) if !c.is_empty() => c.clone(),
            _ => {
                return Err(config_err(
                    format!(
                        "current-context is not set in {files}: pass --context NAME or run `kubectl config use-context NAME` (contexts: {})",
                        names(&kc.contexts, |c| c.name.as_str())
                    ),
                    false,
                ));
            }
        };
        let Some(ctx) = kc
            .contexts
            .iter()
            .find(|c| c.name == ctx_name)
            .and_then(|c| c.context.clone())
        else {
            let (from_flags, which) = if self.context.is_some() {
                (true, "--context")
            } else {
                (false, "current-context")
            };
            return Err(config_err(
                format!(
                    "{which} \"{ctx_name}\" not found in {files} (contexts: {}): pick one with --context or `kubectl config use-context`",
                    names(&kc.contexts, |c| c.name.as_str())
                ),
                from_flags,
            ));
        };
        let cluster_name = self.cluster.clone().unwrap_or_else(|| ctx.cluster.clone());
        if !kc.clusters.iter().any(|c| c.name == cluster_name) {
            let (from_flags, which) = if self.cluster.is_some() {
                (true, "--cluster".to_string())
            } else {
                (false, format!("cluster of context \"{ctx_name}\""))
            };
            return Err(config_err(
                format!(
                    "{which} \"{cluster_name}\" not found in {files} (clusters: {})",
                    names(&kc.clusters, |c| c.name.as_str())
                ),
                from_flags,
            ));
        }
        if let Some(u) = &self.user
            && !kc.auth_infos.iter().any(|a| &a.name == u)
        {
            return Err(config_err(
                format!(
                    "--user \"{u}\" not found in {files} (users: {})",
                    names(&kc.auth_infos, |a| a.name.as_str())
                ),
                true,
            ));
        }
        let opts = KubeConfigOptions {
            context: Some(ctx_name.clone()),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        };
        let config = kube::Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|e| {
                config_err(
                    format!("context \"{ctx_name}\" in {files} is unusable: {e}"),
                    false,
                )
            })?;
        Ok((config, ctx_name))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_invocation_is_what_the_user_typed() {
        use super::{Host, Invocation};
        use std::ffi::OsStr;
        let of = |a: &str, d: &str| Invocation::of_argv0(OsStr::new(a), d).command_line();
        assert_eq!(
            of("/usr/local/bin/kubectl-unstick", "unstick"),
            "kubectl unstick"
        );
        assert_eq!(of("kubectl-gitops-mcp", "gitops mcp"), "kubectl gitops mcp");
        assert_eq!(
            of("/krew/bin/kubectl-gitops_mcp", "gitops mcp"),
            "kubectl gitops-mcp"
        );
        assert_eq!(
            of("/home/me/.fluxcd/plugins/flux-mcp", "gitops mcp"),
            "flux mcp"
        );
        assert_eq!(of("flux-unstick.exe", "unstick"), "flux unstick");
        assert_eq!(of("my-copy", "gitops mcp"), "kubectl gitops mcp");
        let how = Invocation::of_argv0(OsStr::new("kubectl-gitops_mcp"), "gitops mcp");
        assert_eq!(how.host, Host::Kubectl);
        let cmd = super::command_for(
            clap::Command::new("x").after_help("  kubectl gitops mcp --repo DIR"),
            "gitops mcp",
            &how,
        );
        assert_eq!(cmd.get_bin_name(), Some("kubectl gitops-mcp"));
        assert_eq!(
            cmd.get_after_help().map(|s| s.to_string()).as_deref(),
            Some("  kubectl gitops-mcp --repo DIR")
        );
    }

    use super::*;
    use clap::Parser;
    use std::fs;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        cluster: ClusterArgs,
    }

    fn args(a: &[&str]) -> ClusterArgs {
        let mut v = vec!["kubectl-x"];
        v.extend_from_slice(a);
        Cli::try_parse_from(v).unwrap().cluster
    }

    const A: &str = r#"apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster: {server: "https://dev.example:6443"}
- name: shared
  cluster: {server: "https://shared-from-a.example"}
contexts:
- name: dev
  context: {cluster: dev, user: alice, namespace: apps}
- name: shared
  context: {cluster: shared, user: alice}
users:
- name: alice
  user: {token: abc}
"#;

    const B: &str = r#"apiVersion: v1
kind: Config
current-context: prod
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443"}
- name: shared
  cluster: {server: "https://shared-from-b.example"}
contexts:
- name: prod
  context: {cluster: prod, user: bob}
- name: dangling
  context: {cluster: nowhere, user: bob}
users:
- name: bob
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/echo
      interactiveMode: Never
"#;

    struct Fx {
        dir: tempfile::TempDir,
    }

    impl Fx {
        fn new() -> Self {
            Fx {
                dir: tempfile::tempdir().unwrap(),
            }
        }
        fn file(&self, name: &str, text: &str) -> PathBuf {
            let p = self.dir.path().join(name);
            fs::write(&p, text).unwrap();
            p
        }
        fn env(&self, kubeconfig: &[&Path]) -> KubeconfigEnv {
            KubeconfigEnv {
                kubeconfig: if kubeconfig.is_empty() {
                    None
                } else {
                    Some(std::env::join_paths(kubeconfig).unwrap())
                },
                home: Some(self.dir.path().join("home")),
                in_cluster: false,
            }
        }
    }

    #[tokio::test]
    async fn multi_file_kubeconfig_first_wins() {
        let fx = Fx::new();
        let a = fx.file("a", A);
        let b = fx.file("b", B);
        let missing = fx.dir.path().join("missing");
        let env = fx.env(&[&missing, &a, &b]);
        let r = args(&[]).resolve_with(&env).await.unwrap();
        // current-context from the first file that sets it (a), namespace from the context
        assert_eq!(r.context.as_deref(), Some("dev"));
        assert_eq!(r.server, "https://dev.example:6443/");
        assert_eq!(r.namespace, "apps");
        assert!(!r.namespace_explicit);
        assert_eq!(r.sources, vec![a.clone(), b.clone()]);
        // a context only in the second file
        let r = args(&["--context", "prod"])
            .resolve_with(&env)
            .await
            .unwrap();
        assert_eq!(r.server, "https://prod.example:6443/");
        assert_eq!(r.namespace, "default");
        // cluster "shared" is defined in both: first file wins
        let r = args(&["--context", "shared"])
            .resolve_with(&env)
            .await
            .unwrap();
        assert_eq!(r.server, "https://shared-from-a.example/");
        // order reversed: b's current-context wins
        let env = fx.env(&[&b, &a]);
        let r = args(&[]).resolve_with(&env).await.unwrap();
        assert_eq!(r.context.as_deref(), Some("prod"));
        let r = args(&["--context", "shared"])
            .resolve_with(&env)
            .await
            .unwrap();
        assert_eq!(r.server, "https://shared-from-b.example/");
    }

    #[tokio::test]
    async fn flags_override() {
        let fx = Fx::new();
        let a = fx.file("a", A);
        let b = fx.file("b", B);
        let env = fx.env(&[&a, &b]);
        let r = args(&["--cluster", "prod", "-n", "flux-system", "--user", "bob"])
            .resolve_with(&env)
            .await
            .unwrap();
        assert_eq!(r.context.as_deref(), Some("dev"));
        assert_eq!(r.server, "https://prod.example:6443/");
        assert_eq!(r.namespace, "flux-system");
        assert!(r.namespace_explicit);
        assert!(r.config.auth_info.exec.is_some(), "user bob's exec plugin");
        // --kubeconfig beats KUBECONFIG
        let r = args(&["--kubeconfig", b.to_str().unwrap()])
            .resolve_with(&env)
            .await
            .unwrap();
        assert_eq!(r.context.as_deref(), Some("prod"));
        assert_eq!(r.sources, vec![b]);
        // request timeout is applied
        let r = args(&["--request-timeout", "5s"])
            .resolve_with(&env)
            .await
            .unwrap();
        assert_eq!(r.config.read_timeout, Some(Duration::from_secs(5)));
    }

    #[tokio::test]
    async fn home_kubeconfig_when_no_env() {
        let fx = Fx::new();
        fs::create_dir_all(fx.dir.path().join("home/.kube")).unwrap();
        fs::write(fx.dir.path().join("home/.kube/config"), A).unwrap();
        let r = args(&[]).resolve_with(&fx.env(&[])).await.unwrap();
        assert_eq!(r.context.as_deref(), Some("dev"));
        // KUBECONFIG set (even to missing files) replaces ~/.kube/config, like client-go
        let missing = fx.dir.path().join("nope");
        let e = args(&[])
            .resolve_with(&fx.env(&[&missing]))
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string().contains("no kubeconfig found (KUBECONFIG="),
            "{e}"
        );
    }

    #[tokio::test]
    async fn errors_are_clear() {
        let fx = Fx::new();
        let a = fx.file("a", A);
        let b = fx.file("b", B);
        let env = fx.env(&[&a, &b]);
        // missing --kubeconfig: config error, exit 3 (like a missing KUBECONFIG file)
        let e = args(&["--kubeconfig", "/nonexistent/kc"])
            .resolve_with(&env)
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string()
                .contains("--kubeconfig /nonexistent/kc: file does not exist"),
            "{e}"
        );
        // unknown --context: config error (exit 3), lists contexts
        let e = args(&["--context", "nope"])
            .resolve_with(&env)
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let m = e.to_string();
        assert!(m.contains("--context \"nope\" not found in"), "{m}");
        assert!(m.contains("contexts: dev, shared, prod, dangling"), "{m}");
        // unknown --cluster / --user: config error (exit 3)
        let e = args(&["--cluster", "nope"])
            .resolve_with(&env)
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        let e = args(&["--user", "nope"])
            .resolve_with(&env)
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("users: alice, bob"), "{e}");
        // dangling cluster in the kubeconfig: config error, exit 3
        let e = args(&["--context", "dangling"])
            .resolve_with(&env)
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string()
                .contains("cluster of context \"dangling\" \"nowhere\" not found"),
            "{e}"
        );
        // bad YAML: error names the file, no panic
        let bad = fx.file("bad", "apiVersion: v1\nclusters: [\n  - {name: x\n");
        let e = args(&[])
            .resolve_with(&fx.env(&[&bad, &a]))
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.to_string().contains(&format!(
                "cannot load kubeconfig file \"{}\"",
                bad.display()
            )),
            "{e}"
        );
        // Printed as `error: {e}`: the word "error" once (was `error: error loading config
        // file "F": failed to parse kubeconfig YAML: error: line 1 ...`).
        let printed = format!("error: {e}").to_lowercase();
        assert_eq!(printed.matches("error").count(), 1, "{printed}");
        let e = args(&["--kubeconfig", bad.to_str().unwrap()])
            .resolve_with(&env)
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        // wrong shape (a list where a map belongs)
        let shape = fx.file("shape", "contexts: {a: b}\n");
        assert!(args(&[]).resolve_with(&fx.env(&[&shape])).await.is_err());
        // current-context unset
        let nocur = fx.file("nocur", &A.replace("current-context: dev\n", ""));
        let e = args(&[])
            .resolve_with(&fx.env(&[&nocur]))
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.to_string().contains("current-context is not set"), "{e}");
        // current-context dangling
        let dang = fx.file(
            "dang",
            &A.replace("current-context: dev", "current-context: gone"),
        );
        let e = args(&[]).resolve_with(&fx.env(&[&dang])).await.unwrap_err();
        assert!(
            e.to_string().contains("current-context \"gone\" not found"),
            "{e}"
        );
        // empty file: no contexts
        let empty = fx.file("empty", "");
        let e = args(&[])
            .resolve_with(&fx.env(&[&empty]))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("has no contexts"), "{e}");
        // bad -n: refused by clap's value parser (exit 2 before any kubeconfig is read),
        // and by resolve for ClusterArgs built in code.
        let e = Cli::try_parse_from(["kubectl-x", "-n", "Bad_NS"])
            .err()
            .unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
        assert_eq!(e.exit_code(), 2);
        let e = ClusterArgs {
            namespace: Some("Bad_NS".into()),
            ..args(&[])
        }
        .resolve_with(&env)
        .await
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[tokio::test]
    async fn in_cluster_fallback_is_tried_and_reported() {
        // No kubeconfig anywhere, but "running in a pod": kube's in-cluster loader is used.
        // This test process has no service-account token, so it must fail with a message that
        // says both what was looked for and that in-cluster failed.
        let fx = Fx::new();
        let mut env = fx.env(&[]);
        env.in_cluster = true;
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            return; // really in a pod: the fallback may succeed; nothing to assert here
        }
        let e = args(&[]).resolve_with(&env).await.unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("no kubeconfig found ("), "{m}");
        assert!(m.contains("in-cluster configuration failed"), "{m}");
        assert_eq!(e.exit_code(), 3);
        // An explicit --context never silently becomes in-cluster.
        let e = args(&["--context", "x"])
            .resolve_with(&env)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no kubeconfig found"), "{e}");
    }

    #[test]
    fn request_timeout_syntax() {
        assert_eq!(parse_request_timeout("0").unwrap(), RequestTimeout(None));
        assert_eq!(parse_request_timeout("0s").unwrap(), RequestTimeout(None));
        assert_eq!(
            parse_request_timeout("30").unwrap(),
            RequestTimeout(Some(Duration::from_secs(30)))
        );
        assert_eq!(
            parse_request_timeout("1m").unwrap(),
            RequestTimeout(Some(Duration::from_secs(60)))
        );
        assert_eq!(
            parse_request_timeout("1m30s").unwrap(),
            RequestTimeout(Some(Duration::from_secs(90)))
        );
        for bad in ["-1s", "abc", "5x", ""] {
            assert!(parse_request_timeout(bad).is_err(), "{bad}");
        }
        let e = Cli::try_parse_from(["x", "--request-timeout", "soon"]).unwrap_err();
        assert!(e.to_string().contains("Invalid timeout value"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn flux_namespace_default() {
        assert_eq!(args(&[]).flux_namespace(), "flux-system");
        assert_eq!(args(&["-n", "x"]).flux_namespace(), "x");
    }

    #[test]
    fn git_work_tree_parser_runs_real_git() {
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("plain");
        std::fs::create_dir(&plain).unwrap();
        let e = parse_git_work_tree(plain.to_str().unwrap()).unwrap_err();
        assert!(e.contains("not a Git repository"), "{e}");
        let missing = d.path().join("missing");
        let e = parse_git_work_tree(missing.to_str().unwrap()).unwrap_err();
        assert!(
            e.ends_with("missing: no such directory (pass a local clone of the Git repository)"),
            "{e}"
        );
        let repo = d.path().join("repo");
        let st = std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(&repo)
            .status()
            .unwrap();
        assert!(st.success());
        std::fs::create_dir(repo.join("sub")).unwrap();
        for p in [repo.clone(), repo.join("sub")] {
            assert_eq!(parse_git_work_tree(p.to_str().unwrap()), Ok(p.clone()));
        }
    }
}
