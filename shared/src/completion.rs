//! Shell completion through kubectl's plugin-completion mechanism.
//!
//! How it works (kubectl 1.26+, kubernetes/kubectl pkg/cmd/plugin/plugin_completion.go
//! `pluginCompletion`, `lookupCompletionExec`, `getPluginCompletions`): when the user presses
//! TAB after `kubectl unstick ...`, kubectl's own `__complete` looks up an executable named
//! `kubectl_complete-unstick` on PATH (the typed words with `-` as `_`, joined by `-`, then
//! `_complete-` inserted after `kubectl`: `kubectl gitops mcp` looks up
//! `kubectl_complete-gitops-mcp`, `kubectl gitops-mcp` `kubectl_complete-gitops_mcp`), runs it with every word typed after the plugin name plus the word being
//! completed (`""` when starting a new word), and reads one candidate per line from its stdout,
//! an optional last line `:<directive>` carrying Cobra's `ShellCompDirective` bits. krew cannot
//! install that helper, so each plugin writes it itself: `kubectl unstick completion install`.
//!
//! The helper runs `kubectl-unstick __complete "$@"`; [`handle`] answers that in Cobra's
//! `__complete` format (spf13/cobra completions.go `initCompleteCmd`): each candidate on its own
//! line as `value` or `value\tdescription` (first line of the description only; none at all
//! for `__completeNoDesc`), then `:<directive>`. Diagnostics go to stderr, which the shell
//! scripts discard.
//!
//! What gets completed:
//! - flag names from the plugin's clap [`clap::Command`] when the word starts with `-`
//!   (directive [`NO_FILE_COMP`], as Cobra does);
//! - `--context`, `--cluster`, `--user` from the kubeconfig (`--kubeconfig` or `KUBECONFIG`
//!   or `~/.kube/config`, read by kube's `Kubeconfig::read`);
//! - `-n/--namespace` and Flux object names from the cluster through a [`Lister`] (default
//!   [`KubeLister`]: kube with the same kubeconfig flags, 5 s deadline);
//! - values of flags with clap possible values (`-o`, `--color`), file/dir value hints;
//! - positional arguments: whatever the plugin's closure asks for with a [`Want`].

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Cobra `ShellCompDirectiveError`: an error occurred, the shell ignores the candidates.
pub const ERROR: u32 = 1;
/// Cobra `ShellCompDirectiveNoSpace`: no space after the completed word.
pub const NO_SPACE: u32 = 2;
/// Cobra `ShellCompDirectiveNoFileComp`: no file completion when there is no candidate.
pub const NO_FILE_COMP: u32 = 4;
/// Cobra `ShellCompDirectiveFilterFileExt`: the candidates are file extensions to filter on.
pub const FILTER_FILE_EXT: u32 = 8;
/// Cobra `ShellCompDirectiveFilterDirs`: complete directory names only.
pub const FILTER_DIRS: u32 = 16;
/// Cobra `ShellCompDirectiveKeepOrder`: keep the candidates' order instead of sorting.
pub const KEEP_ORDER: u32 = 32;
/// Cobra `ShellCompDirectiveDefault`: the shell's default behaviour (file completion).
pub const DEFAULT: u32 = 0;

/// Deadline for one cluster lookup during completion; completion must feel instant and never
/// hang a shell on an unreachable API server.
pub const CLUSTER_DEADLINE: Duration = Duration::from_secs(5);

/// One completion candidate: the word, and an optional one-line description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The word the shell inserts.
    pub value: String,
    /// Shown next to it by zsh and fish (and bash with descriptions on).
    pub description: Option<String>,
}

impl Candidate {
    /// A candidate without description.
    pub fn new(value: impl Into<String>) -> Self {
        Candidate {
            value: value.into(),
            description: None,
        }
    }

    /// A candidate with a description.
    pub fn with_description(value: impl Into<String>, description: impl Into<String>) -> Self {
        Candidate {
            value: value.into(),
            description: Some(description.into()),
        }
    }
}

/// The answer to a completion request: candidates and Cobra directive bits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completions {
    /// Candidates, already filtered by the word being completed.
    pub candidates: Vec<Candidate>,
    /// Cobra `ShellCompDirective` bits ([`NO_FILE_COMP`], ...).
    pub directive: u32,
}

/// A Flux (or other) object kind whose names can be completed, as `PREFIX/NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectKind {
    /// `Kind` (`Kustomization`), used in descriptions.
    pub kind: &'static str,
    /// API group (`kustomize.toolkit.fluxcd.io`), `""` for core.
    pub group: &'static str,
    /// API version served (`v1`).
    pub version: &'static str,
    /// Plural resource name (`kustomizations`).
    pub plural: &'static str,
    /// Type prefixes a user may type before `/`, the first one offered (`ks`, `kustomization`).
    pub prefixes: &'static [&'static str],
    /// The namespace listed when the command line has no `-n`: the one the completed command
    /// itself defaults to. Flux objects: [`crate::cli::FLUX_DEFAULT_NAMESPACE`] (the plugins
    /// default them to `flux-system` like the flux CLI, [`crate::cli::Connection::flux_namespace`],
    /// whatever the context's namespace); `None`: the context's namespace.
    pub default_namespace: Option<&'static str>,
}

impl ObjectKind {
    /// kustomize.toolkit.fluxcd.io/v1 Kustomization, offered as `ks/NAME` (short name from the
    /// CRD's `+kubebuilder:resource:shortName=ks`).
    pub const KUSTOMIZATION: ObjectKind = ObjectKind {
        kind: "Kustomization",
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        plural: "kustomizations",
        prefixes: &["ks", "kustomization", "kustomizations"],
        default_namespace: Some(crate::cli::FLUX_DEFAULT_NAMESPACE),
    };
    /// source.toolkit.fluxcd.io/v1 GitRepository, offered as `gitrepository/NAME` (short name
    /// `gitrepo` accepted).
    pub const GIT_REPOSITORY: ObjectKind = ObjectKind {
        kind: "GitRepository",
        group: "source.toolkit.fluxcd.io",
        version: "v1",
        plural: "gitrepositories",
        prefixes: &["gitrepository", "gitrepo", "gitrepositories"],
        default_namespace: Some(crate::cli::FLUX_DEFAULT_NAMESPACE),
    };
}

/// What the plugin wants completed for the current word (returned by its closure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// Let [`handle`] decide: built-in flag values, else Cobra's default (file completion).
    Default,
    /// Nothing to offer, and no file completion either.
    Nothing,
    /// File names (directive [`DEFAULT`]).
    Files,
    /// Directory names only (directive [`FILTER_DIRS`]).
    Dirs,
    /// Files with these extensions, without dot (directive [`FILTER_FILE_EXT`]).
    FileExt(Vec<String>),
    /// These fixed candidates.
    Fixed(Vec<Candidate>),
    /// Namespace names from the cluster.
    Namespaces,
    /// Object names as `PREFIX/NAME` for these kinds, from the cluster.
    Refs(Vec<ObjectKind>),
    /// Bare object names of one kind, from the cluster.
    Names(ObjectKind),
}

/// One completion request, parsed from the words after `__complete`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CompletionRequest {
    /// krew plugin name (`unstick`).
    pub plugin: String,
    /// The words before the one being completed.
    pub args: Vec<String>,
    /// The word being completed (the part after `=` for `--flag=value`).
    pub to_complete: String,
    /// Long name (or id) of the flag whose value is being completed, if any.
    pub flag: Option<String>,
    /// Positional arguments already typed (flags and their values removed).
    pub positionals: Vec<String>,
    /// `--kubeconfig` from the command line.
    pub kubeconfig: Option<String>,
    /// `--context` from the command line.
    pub context: Option<String>,
    /// `--cluster` from the command line.
    pub cluster: Option<String>,
    /// `--user` from the command line.
    pub user: Option<String>,
    /// `-n/--namespace` from the command line.
    pub namespace: Option<String>,
    /// Flags already present (long names or ids).
    pub present: BTreeSet<String>,
}

fn takes_value(arg: &clap::Arg) -> bool {
    arg.get_action().takes_values()
}

fn arg_key(arg: &clap::Arg) -> String {
    arg.get_long()
        .map(str::to_owned)
        .unwrap_or_else(|| arg.get_id().to_string())
}

fn find_long<'a>(cmd: &'a clap::Command, name: &str) -> Option<&'a clap::Arg> {
    cmd.get_arguments().find(|a| {
        a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name))
    })
}

fn find_short(cmd: &clap::Command, c: char) -> Option<&clap::Arg> {
    cmd.get_arguments().find(|a| {
        a.get_short() == Some(c) || a.get_all_short_aliases().is_some_and(|al| al.contains(&c))
    })
}

impl CompletionRequest {
    /// Parses the words after `__complete` (the last one being completed) against `cmd`.
    /// Mirrors Cobra `checkIfFlagCompletion`: `--flag=partial` and `-f=partial` complete the
    /// flag's value; a previous word `--flag`/`-f` that takes a value makes this word its value;
    /// after `--` everything is positional.
    pub fn parse(plugin: &str, cmd: &clap::Command, words: &[String]) -> CompletionRequest {
        let (to_complete, args) = match words.split_last() {
            Some((last, rest)) => (last.clone(), rest.to_vec()),
            None => (String::new(), Vec::new()),
        };
        let mut req = CompletionRequest {
            plugin: plugin.to_owned(),
            args: args.clone(),
            to_complete,
            ..Default::default()
        };
        let mut i = 0;
        let mut only_positionals = false;
        let mut pending: Option<String> = None;
        let record = |req: &mut CompletionRequest, key: &str, value: &str| match key {
            "kubeconfig" => req.kubeconfig = Some(value.to_owned()),
            "context" => req.context = Some(value.to_owned()),
            "cluster" => req.cluster = Some(value.to_owned()),
            "user" => req.user = Some(value.to_owned()),
            "namespace" => req.namespace = Some(value.to_owned()),
            _ => {}
        };
        while i < args.len() {
            let w = &args[i];
            i += 1;
            if let Some(key) = pending.take() {
                record(&mut req, &key, w);
                continue;
            }
            if only_positionals || w == "-" || !w.starts_with('-') {
                req.positionals.push(w.clone());
                continue;
            }
            if w == "--" {
                only_positionals = true;
                continue;
            }
            if let Some(long) = w.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                let Some(arg) = find_long(cmd, name) else {
                    continue;
                };
                let key = arg_key(arg);
                req.present.insert(key.clone());
                match value {
                    Some(v) => record(&mut req, &key, v),
                    None if takes_value(arg) => pending = Some(key),
                    None => {}
                }
            } else {
                // Short flags, possibly clustered: -vn ns, -nns, -n=ns.
                let body = &w[1..];
                for (pos, c) in body.char_indices() {
                    let Some(arg) = find_short(cmd, c) else {
                        break;
                    };
                    let key = arg_key(arg);
                    req.present.insert(key.clone());
                    if takes_value(arg) {
                        let rest = &body[pos + c.len_utf8()..];
                        let rest = rest.strip_prefix('=').unwrap_or(rest);
                        if rest.is_empty() {
                            pending = Some(key);
                        } else {
                            record(&mut req, &key, rest);
                        }
                        break;
                    }
                }
            }
        }
        if let Some(key) = pending {
            // The previous word is a flag waiting for its value: complete that value.
            req.flag = Some(key);
        } else if !only_positionals && req.to_complete.starts_with('-') {
            let tc = req.to_complete.clone();
            if let Some(long) = tc.strip_prefix("--")
                && let Some((name, value)) = long.split_once('=')
            {
                if let Some(arg) = find_long(cmd, name) {
                    req.flag = Some(arg_key(arg));
                    req.to_complete = value.to_owned();
                }
            } else if !tc.starts_with("--")
                && let Some(eq) = tc.find('=')
                && eq >= 2
            {
                let c = tc[..eq].chars().last().unwrap_or('-');
                if let Some(arg) = find_short(cmd, c) {
                    req.flag = Some(arg_key(arg));
                    req.to_complete = tc[eq + 1..].to_owned();
                }
            }
        }
        req
    }

    /// `true` when the word being completed is a flag name (starts with `-`, no value yet).
    pub fn is_flag_name(&self) -> bool {
        self.flag.is_none() && self.to_complete.starts_with('-') && !self.to_complete.contains('=')
    }
}

/// Lists cluster objects for completion. Implementations must return quickly (see
/// [`CLUSTER_DEADLINE`]).
pub trait Lister {
    /// Namespace names.
    ///
    /// Errors: a one-line message (printed on stderr; the shell gets directive [`ERROR`]).
    fn namespaces(&self, req: &CompletionRequest) -> Result<Vec<String>, String>;
    /// Names of objects of `kind` in the request's namespace: `-n`, else
    /// [`ObjectKind::default_namespace`], else the context's.
    ///
    /// Errors: a one-line message.
    fn names(&self, req: &CompletionRequest, kind: &ObjectKind) -> Result<Vec<String>, String>;
}

/// The default [`Lister`]: connects with [`crate::cli::ClusterArgs::connect`] from the request's
/// `--kubeconfig`, `--context`, `--cluster`, `--user` and `-n` (or uses the given client), lists
/// with metadata-only LIST calls, and gives up after [`CLUSTER_DEADLINE`].
#[derive(Clone, Default)]
pub struct KubeLister {
    client: Option<(kube::Client, String)>,
}

impl std::fmt::Debug for KubeLister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeLister")
            .field("client", &self.client.as_ref().map(|(_, ns)| ns))
            .finish()
    }
}

impl KubeLister {
    /// A lister that connects from the kubeconfig flags of each request.
    pub fn from_kubeconfig() -> Self {
        KubeLister { client: None }
    }

    /// A lister using an existing client; `default_namespace` stands for the context's
    /// namespace: it applies when the request has no `-n` and the kind has no
    /// [`ObjectKind::default_namespace`].
    pub fn with_client(client: kube::Client, default_namespace: impl Into<String>) -> Self {
        KubeLister {
            client: Some((client, default_namespace.into())),
        }
    }

    async fn connect(&self, req: &CompletionRequest) -> Result<(kube::Client, String), String> {
        if let Some((c, ns)) = &self.client {
            return Ok((c.clone(), ns.clone()));
        }
        // The same kubeconfig resolution as the plugin itself (kubectl's rules).
        let args = crate::cli::ClusterArgs {
            kubeconfig: req.kubeconfig.clone().map(PathBuf::from),
            context: req.context.clone(),
            cluster: req.cluster.clone(),
            user: req.user.clone(),
            namespace: req.namespace.clone(),
            ..Default::default()
        };
        let conn = args.connect().await.map_err(|e| e.to_string())?;
        let (client, ns) = (conn.client, conn.namespace);
        Ok((client, ns))
    }

    async fn list_namespaces(&self, req: &CompletionRequest) -> Result<Vec<String>, String> {
        use k8s_openapi::api::core::v1::Namespace;
        let (client, _) = self.connect(req).await?;
        let api: kube::Api<Namespace> = kube::Api::all(client);
        let list = api
            .list_metadata(&Default::default())
            .await
            .map_err(|e| format!("list namespaces: {e}"))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect())
    }

    async fn list_names(
        &self,
        req: &CompletionRequest,
        kind: &ObjectKind,
    ) -> Result<Vec<String>, String> {
        use kube::api::{ApiResource, DynamicObject};
        let (client, context_ns) = self.connect(req).await?;
        let ns = req
            .namespace
            .clone()
            .or_else(|| kind.default_namespace.map(str::to_owned))
            .unwrap_or(context_ns);
        let ar = ApiResource {
            group: kind.group.to_owned(),
            version: kind.version.to_owned(),
            api_version: if kind.group.is_empty() {
                kind.version.to_owned()
            } else {
                format!("{}/{}", kind.group, kind.version)
            },
            kind: kind.kind.to_owned(),
            plural: kind.plural.to_owned(),
        };
        let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client, &ns, &ar);
        let list = api
            .list_metadata(&Default::default())
            .await
            .map_err(|e| format!("list {} in namespace {ns}: {e}", kind.plural))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect())
    }
}

/// Runs a future to completion on a fresh current-thread runtime in a scoped thread, so it works
/// whether the caller is inside a tokio runtime (`#[tokio::main]`) or not; gives up after
/// [`CLUSTER_DEADLINE`].
fn block_on<T: Send>(
    fut: impl std::future::Future<Output = Result<T, String>> + Send,
) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("tokio runtime: {e}"))?;
            rt.block_on(async {
                tokio::time::timeout(CLUSTER_DEADLINE, fut)
                    .await
                    .map_err(|_| format!("no answer within {}s", CLUSTER_DEADLINE.as_secs()))?
            })
        })
        .join()
        .map_err(|_| "completion lookup panicked".to_owned())?
    })
}

impl Lister for KubeLister {
    fn namespaces(&self, req: &CompletionRequest) -> Result<Vec<String>, String> {
        block_on(self.list_namespaces(req))
    }

    fn names(&self, req: &CompletionRequest, kind: &ObjectKind) -> Result<Vec<String>, String> {
        block_on(self.list_names(req, kind))
    }
}

/// Reads the kubeconfig the request names (`--kubeconfig`, else `KUBECONFIG` merged, else
/// `~/.kube/config`) with kube's loader.
fn kubeconfig(req: &CompletionRequest) -> Result<kube::config::Kubeconfig, String> {
    match &req.kubeconfig {
        Some(p) => {
            kube::config::Kubeconfig::read_from(p).map_err(|e| format!("kubeconfig {p}: {e}"))
        }
        None => kube::config::Kubeconfig::read().map_err(|e| format!("kubeconfig: {e}")),
    }
}

fn filtered(cands: Vec<Candidate>, prefix: &str) -> Vec<Candidate> {
    cands
        .into_iter()
        .filter(|c| c.value.starts_with(prefix))
        .collect()
}

fn flag_names(cmd: &clap::Command, req: &CompletionRequest) -> Vec<Candidate> {
    let mut out = Vec::new();
    for a in cmd.get_arguments() {
        if a.is_positional() || a.is_hide_set() {
            continue;
        }
        let repeatable = matches!(
            a.get_action(),
            clap::ArgAction::Append | clap::ArgAction::Count
        );
        if req.present.contains(&arg_key(a)) && !repeatable {
            continue;
        }
        let help = a.get_help().map(|h| h.to_string());
        let mk = |v: String| match &help {
            Some(h) => Candidate::with_description(v, h.clone()),
            None => Candidate::new(v),
        };
        if let Some(l) = a.get_long() {
            out.push(mk(format!("--{l}")));
        }
        if let Some(s) = a.get_short() {
            out.push(mk(format!("-{s}")));
        }
    }
    filtered(out, &req.to_complete)
}

fn names_result(
    res: Result<Vec<String>, String>,
    f: impl Fn(String) -> Candidate,
    prefix: &str,
    err: &mut dyn Write,
) -> Completions {
    match res {
        Ok(names) => Completions {
            candidates: filtered(names.into_iter().map(f).collect(), prefix),
            directive: NO_FILE_COMP,
        },
        Err(e) => {
            let _ = writeln!(err, "completion: {e}");
            Completions {
                candidates: Vec::new(),
                directive: ERROR,
            }
        }
    }
}

fn resolve_want(
    want: Want,
    req: &CompletionRequest,
    lister: &dyn Lister,
    err: &mut dyn Write,
) -> Completions {
    let tc = req.to_complete.as_str();
    match want {
        Want::Default => Completions::default(),
        Want::Nothing => Completions {
            candidates: Vec::new(),
            directive: NO_FILE_COMP,
        },
        Want::Files => Completions::default(),
        Want::Dirs => Completions {
            candidates: Vec::new(),
            directive: FILTER_DIRS,
        },
        Want::FileExt(exts) => Completions {
            candidates: exts.into_iter().map(Candidate::new).collect(),
            directive: FILTER_FILE_EXT,
        },
        Want::Fixed(c) => Completions {
            candidates: filtered(c, tc),
            directive: NO_FILE_COMP,
        },
        Want::Namespaces => names_result(lister.namespaces(req), Candidate::new, tc, err),
        Want::Names(kind) => names_result(
            lister.names(req, &kind),
            |n| Candidate::with_description(n, kind.kind),
            tc,
            err,
        ),
        Want::Refs(kinds) => {
            // `ks/<TAB>` or `kustomization/ap<TAB>` keeps the typed prefix; a bare word gets
            // every kind's first prefix.
            let typed = tc.split_once('/').map(|(p, _)| p);
            let mut out = Completions {
                candidates: Vec::new(),
                directive: NO_FILE_COMP,
            };
            for kind in kinds {
                let prefix = match typed {
                    Some(p) if kind.prefixes.iter().any(|k| k.eq_ignore_ascii_case(p)) => p,
                    Some(_) => continue,
                    None => kind.prefixes[0],
                };
                let c = names_result(
                    lister.names(req, &kind),
                    |n| Candidate::with_description(format!("{prefix}/{n}"), kind.kind),
                    tc,
                    err,
                );
                out.directive |= c.directive & ERROR;
                out.candidates.extend(c.candidates);
            }
            if out.directive & ERROR != 0 {
                out.directive = ERROR;
                out.candidates.clear();
            }
            out
        }
    }
}

/// Built-in completion of a flag's value: kubeconfig names, namespaces, clap possible values,
/// file/dir hints. `None` when nothing built-in applies.
fn flag_value(
    cmd: &clap::Command,
    req: &CompletionRequest,
    flag: &str,
    lister: &dyn Lister,
    err: &mut dyn Write,
) -> Completions {
    let tc = req.to_complete.as_str();
    let kc_names = |pick: &dyn Fn(&kube::config::Kubeconfig) -> Vec<Candidate>,
                    err: &mut dyn Write| {
        match kubeconfig(req) {
            Ok(kc) => Completions {
                candidates: filtered(pick(&kc), tc),
                directive: NO_FILE_COMP,
            },
            Err(e) => {
                let _ = writeln!(err, "completion: {e}");
                Completions {
                    candidates: Vec::new(),
                    directive: ERROR,
                }
            }
        }
    };
    match flag {
        "context" => kc_names(
            &|kc| {
                kc.contexts
                    .iter()
                    .map(|c| {
                        let desc = c
                            .context
                            .as_ref()
                            .map(|x| {
                                format!(
                                    "cluster {}, namespace {}",
                                    x.cluster,
                                    x.namespace.as_deref().unwrap_or("default")
                                )
                            })
                            .unwrap_or_default();
                        Candidate::with_description(c.name.clone(), desc)
                    })
                    .collect()
            },
            err,
        ),
        "cluster" => kc_names(
            &|kc| {
                kc.clusters
                    .iter()
                    .map(|c| Candidate::new(c.name.clone()))
                    .collect()
            },
            err,
        ),
        "user" => kc_names(
            &|kc| {
                kc.auth_infos
                    .iter()
                    .map(|c| Candidate::new(c.name.clone()))
                    .collect()
            },
            err,
        ),
        "namespace" => resolve_want(Want::Namespaces, req, lister, err),
        "kubeconfig" => Completions::default(),
        _ => {
            let Some(arg) = find_long(cmd, flag)
                .or_else(|| cmd.get_arguments().find(|a| a.get_id().as_str() == flag))
            else {
                return Completions::default();
            };
            let pvs = arg.get_possible_values();
            if !pvs.is_empty() {
                let c = pvs
                    .iter()
                    .filter(|p| !p.is_hide_set())
                    .map(|p| match p.get_help() {
                        Some(h) => Candidate::with_description(p.get_name(), h.to_string()),
                        None => Candidate::new(p.get_name()),
                    })
                    .collect();
                return Completions {
                    candidates: filtered(c, tc),
                    directive: NO_FILE_COMP,
                };
            }
            match arg.get_value_hint() {
                clap::ValueHint::DirPath => Completions {
                    candidates: Vec::new(),
                    directive: FILTER_DIRS,
                },
                clap::ValueHint::FilePath | clap::ValueHint::AnyPath | clap::ValueHint::Unknown => {
                    Completions::default()
                }
                _ => Completions {
                    candidates: Vec::new(),
                    directive: NO_FILE_COMP,
                },
            }
        }
    }
}

/// Computes the completions of one request: flag names, built-in flag values, subcommand names,
/// then whatever `positional` asks for ([`Want::Default`] falls back to the built-ins).
pub fn complete(
    cmd: &clap::Command,
    req: &CompletionRequest,
    positional: &dyn Fn(&CompletionRequest) -> Want,
    lister: &dyn Lister,
    err: &mut dyn Write,
) -> Completions {
    if req.is_flag_name() {
        return Completions {
            candidates: flag_names(cmd, req),
            directive: NO_FILE_COMP,
        };
    }
    let want = positional(req);
    if want != Want::Default {
        return resolve_want(want, req, lister, err);
    }
    if let Some(flag) = &req.flag {
        return flag_value(cmd, req, flag, lister, err);
    }
    let subs: Vec<Candidate> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| match s.get_about() {
            Some(a) => Candidate::with_description(s.get_name(), a.to_string()),
            None => Candidate::new(s.get_name()),
        })
        .collect();
    if req.positionals.is_empty() && !subs.is_empty() {
        return Completions {
            candidates: filtered(subs, &req.to_complete),
            directive: NO_FILE_COMP,
        };
    }
    Completions::default()
}

/// Writes completions in Cobra's `__complete` format: `value[\tdescription]` per line (the
/// first line of a description, trimmed; no description when `with_descriptions` is false),
/// then `:<directive>`.
pub fn write_cobra(
    out: &mut dyn Write,
    c: &Completions,
    with_descriptions: bool,
) -> io::Result<()> {
    for cand in &c.candidates {
        let value = cand.value.lines().next().unwrap_or("").trim();
        match cand.description.as_deref().and_then(|d| d.lines().next()) {
            Some(d) if with_descriptions && !d.trim().is_empty() => {
                writeln!(out, "{value}\t{}", d.trim())?
            }
            _ => writeln!(out, "{value}")?,
        }
    }
    writeln!(out, ":{}", c.directive)
}

/// The plugin's file name after `kubectl-` as kubectl ran it (`argv0`), which is what kubectl
/// completes: `gitops-mcp` for `kubectl-gitops-mcp` (typed `kubectl gitops mcp`, a cargo
/// install), `gitops_mcp` for krew's link `kubectl-gitops_mcp` (typed `kubectl gitops-mcp`,
/// krew `pluginNameToBin`). Any other program name (`flux-mcp`, a renamed copy) gives
/// `plugin` with `-` as `_`, the krew link's stem. `.exe` is dropped.
pub fn file_stem(plugin: &str, argv0: &std::ffi::OsStr) -> String {
    let file = Path::new(argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = file.strip_suffix(".exe").unwrap_or(&file);
    match base.strip_prefix("kubectl-").filter(|n| !n.is_empty()) {
        Some(stem) => stem.to_string(),
        None => plugin.replace('-', "_"),
    }
}

/// The words the user typed after `kubectl` for the file stem `stem` (kubectl's dispatch:
/// `-` separates words, `_` reads `-`): `gitops mcp` for `gitops-mcp`, `gitops-mcp` for
/// `gitops_mcp`.
fn typed_words(stem: &str) -> String {
    stem.split('-')
        .map(|w| w.replace('_', "-"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// File name of the helper kubectl looks up for the plugin file `kubectl-<stem>` (kubectl
/// `pluginCompletion` rebuilds `kubectl-<words, - as _, joined by ->` from the command path,
/// then `lookupCompletionExec` inserts `_complete` before the first `-`):
/// `kubectl_complete-<stem>` (plus `.cmd` on Windows). `stem` comes from [`file_stem`]:
/// `kubectl_complete-gitops-mcp` completes `kubectl gitops mcp`, `kubectl_complete-gitops_mcp`
/// completes `kubectl gitops-mcp`.
pub fn helper_name(stem: &str) -> String {
    let base = format!("kubectl_complete-{stem}");
    if cfg!(windows) {
        format!("{base}.cmd")
    } else {
        base
    }
}

/// The helper script: runs `kubectl-<stem> __complete` with every argument kubectl passes.
/// The binary is found by name on PATH so the helper survives `kubectl krew upgrade`.
pub fn helper_script(stem: &str) -> String {
    let bin = format!("kubectl-{stem}");
    let plugin = typed_words(stem);
    if cfg!(windows) {
        format!("@echo off\r\n{bin}.exe __complete %*\r\n")
    } else {
        format!(
            "#!/bin/sh\n\
             # Shell completion helper for the {bin} kubectl plugin, written by\n\
             # `kubectl {plugin} completion install`. kubectl 1.26+ runs kubectl_complete-<plugin>\n\
             # from PATH with the words after `kubectl {plugin}` and reads Cobra-format candidates.\n\
             exec {bin} __complete \"$@\"\n"
        )
    }
}

fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default()
}

/// Where `completion install` writes the helper without `--dir`, in order of preference:
/// the directory of the `kubectl-<stem>` that PATH resolves to (what kubectl runs; for krew
/// `~/.krew/bin`, where the symlink lives), the directory of the running binary, then
/// `~/.local/bin`. Each candidate is tried in turn until one is writable.
pub fn default_dirs(stem: &str) -> Vec<PathBuf> {
    let bin = format!("kubectl-{stem}");
    let mut dirs = Vec::new();
    if let Some(d) = path_dirs()
        .into_iter()
        .find(|d| d.join(&bin).is_file() || d.join(format!("{bin}.exe")).is_file())
    {
        dirs.push(d);
    }
    if let Some(d) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        && !dirs.contains(&d)
    {
        dirs.push(d);
    }
    if let Some(home) = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")) {
        dirs.push(PathBuf::from(home).join(".local").join("bin"));
    }
    dirs
}

/// Writes the helper of the plugin file `kubectl-<stem>` into `dir` (created if missing) with
/// mode 0755.
///
/// Errors: the I/O error, naming the file.
pub fn install_helper(stem: &str, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(helper_name(stem));
    std::fs::write(&path, helper_script(stem)).map_err(|e| format!("{}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(path)
}

fn completion_command(stem: &str) -> clap::Command {
    let plugin = typed_words(stem);
    clap::Command::new("completion")
        .bin_name(format!("kubectl {plugin} completion"))
        .about(format!(
            "Shell completion for `kubectl {plugin}` through kubectl's plugin completion (kubectl 1.26+)"
        ))
        .subcommand_required(true)
        .subcommand(
            clap::Command::new("install")
                .about(format!(
                    "Write the {} helper that kubectl runs to complete this plugin",
                    helper_name(stem)
                ))
                .long_about(format!(
                    "Write the {} helper that kubectl runs to complete this plugin.\n\n\
                     Without --dir it goes next to the kubectl-{} that PATH resolves to (krew's \
                     bin directory for krew installs), else next to the running binary, else into \
                     ~/.local/bin.",
                    helper_name(stem),
                    stem
                ))
                .arg(
                    clap::Arg::new("dir")
                        .long("dir")
                        .value_name("DIR")
                        .value_parser(clap::value_parser!(PathBuf))
                        .value_hint(clap::ValueHint::DirPath)
                        .help("Directory to write the helper into (should be on PATH)"),
                ),
        )
        .subcommand(
            clap::Command::new("script")
                .about("Print the helper script to stdout, to place it yourself"),
        )
}

/// `completion install|script` of the plugin file `kubectl-<stem>` ([`file_stem`]); `argv`
/// starts at `completion`.
fn run_completion_cmd(
    stem: &str,
    argv: &[OsString],
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let plugin = typed_words(stem);
    let m = match completion_command(stem).try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                write!(err, "{text}")
            } else {
                write!(out, "{text}")
            };
            return code;
        }
    };
    match m.subcommand() {
        Some(("script", _)) => {
            let _ = write!(out, "{}", helper_script(stem));
            0
        }
        Some(("install", sub)) => {
            let explicit = sub.get_one::<PathBuf>("dir").cloned();
            let dirs = match &explicit {
                Some(d) => vec![d.clone()],
                None => default_dirs(stem),
            };
            let mut last_err = String::from("no candidate directory");
            for dir in dirs {
                match install_helper(stem, &dir) {
                    Ok(path) => {
                        let on_path = path_dirs().iter().any(|d| {
                            d == &dir
                                || (d.canonicalize().ok().is_some()
                                    && d.canonicalize().ok() == dir.canonicalize().ok())
                        });
                        let _ = writeln!(
                            out,
                            "wrote {} (runs kubectl-{stem} __complete)",
                            path.display(),
                        );
                        if on_path {
                            let _ = writeln!(
                                out,
                                "{} is on PATH: `kubectl {plugin} <TAB>` now completes (with kubectl completion enabled in your shell)",
                                dir.display()
                            );
                        } else {
                            let _ = writeln!(
                                err,
                                "warning: {} is not on PATH; add it, or kubectl will not find {}",
                                dir.display(),
                                helper_name(stem)
                            );
                        }
                        return 0;
                    }
                    Err(e) => {
                        if explicit.is_some() {
                            let _ = writeln!(err, "error: cannot write the completion helper: {e}");
                            return 1;
                        }
                        last_err = e;
                    }
                }
            }
            let _ = writeln!(
                err,
                "error: cannot write the completion helper anywhere ({last_err}); use --dir DIR with a directory on PATH"
            );
            1
        }
        _ => 2,
    }
}

/// The testable core of [`handle`]: `argv` is the full argument vector (program name first).
/// Returns `None` when `argv` is not a completion request, else the exit code after writing
/// the answer to `out`/`err`.
pub fn handle_args(
    plugin: &str,
    mut cmd: clap::Command,
    argv: &[OsString],
    positional: &dyn Fn(&CompletionRequest) -> Want,
    lister: &dyn Lister,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Option<i32> {
    let first = argv.get(1)?.to_str()?;
    match first {
        "__complete" | "__completeNoDesc" => {
            cmd.build();
            let words: Vec<String> = argv[2..]
                .iter()
                .map(|w| w.to_string_lossy().into_owned())
                .collect();
            let req = CompletionRequest::parse(plugin, &cmd, &words);
            let c = complete(&cmd, &req, positional, lister, err);
            let with_desc = first == "__complete";
            Some(match write_cobra(out, &c, with_desc) {
                Ok(()) => 0,
                Err(_) => 1,
            })
        }
        "completion" => Some(run_completion_cmd(
            &file_stem(plugin, &argv[0]),
            &argv[1..],
            out,
            err,
        )),
        _ => None,
    }
}

/// Answers completion requests; call it first thing in `main`:
///
/// ```no_run
/// use clap::{CommandFactory, Parser};
/// use cluster_loop::completion::{self, ObjectKind, Want};
///
/// #[derive(Parser)]
/// #[command(name = "kubectl-unstick")]
/// struct Cli { target: Option<String> }
///
/// if let Some(code) = completion::handle("unstick", Cli::command(), |req| {
///     match (req.flag.as_deref(), req.positionals.len()) {
///         (None, 0) => Want::Refs(vec![ObjectKind::KUSTOMIZATION]),
///         (None, _) => Want::Nothing,
///         _ => Want::Default,
///     }
/// }) {
///     std::process::exit(code);
/// }
/// let cli = Cli::parse();
/// ```
///
/// - `kubectl-<plugin> __complete WORDS...` (and `__completeNoDesc`): prints Cobra-format
///   candidates for the last word and returns `Some(0)`;
/// - `kubectl-<plugin> completion install [--dir DIR]`: writes `kubectl_complete-<plugin>`
///   ([`default_dirs`] without `--dir`), says where, returns `Some(0)` (`Some(1)` when nothing
///   is writable); `completion script` prints the helper;
/// - anything else: `None`, parse the command line as usual.
///
/// Cluster lookups use [`KubeLister::from_kubeconfig`]; use [`handle_args`] for another
/// [`Lister`].
pub fn handle(
    plugin: &str,
    cmd: clap::Command,
    positional: impl Fn(&CompletionRequest) -> Want,
) -> Option<i32> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let stdout = io::stdout();
    let stderr = io::stderr();
    handle_args(
        plugin,
        cmd,
        &argv,
        &positional,
        &KubeLister::from_kubeconfig(),
        &mut stdout.lock(),
        &mut stderr.lock(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    struct FakeCluster;
    impl Lister for FakeCluster {
        fn namespaces(&self, _: &CompletionRequest) -> Result<Vec<String>, String> {
            Ok(vec!["default".into(), "flux-system".into()])
        }
        fn names(&self, req: &CompletionRequest, kind: &ObjectKind) -> Result<Vec<String>, String> {
            let ns = req.namespace.as_deref().unwrap_or("flux-system");
            Ok(match (kind.kind, ns) {
                ("Kustomization", "flux-system") => vec!["apps".into(), "infra".into()],
                ("GitRepository", "flux-system") => vec!["flux-system".into()],
                _ => vec![],
            })
        }
    }

    fn cmd() -> Command {
        let mut c = Command::new("kubectl-demo")
            .arg(Arg::new("target"))
            .arg(
                Arg::new("namespace")
                    .short('n')
                    .long("namespace")
                    .help("Namespace"),
            )
            .arg(
                Arg::new("context")
                    .long("context")
                    .help("Kubeconfig context"),
            )
            .arg(
                Arg::new("output")
                    .short('o')
                    .long("output")
                    .value_parser(["table", "json", "yaml"])
                    .help("Output format"),
            )
            .arg(
                Arg::new("dry-run")
                    .long("dry-run")
                    .action(ArgAction::SetTrue)
                    .help("Only print\nsecond line"),
            );
        c.build();
        c
    }

    fn run(words: &[&str]) -> String {
        let mut argv: Vec<OsString> = vec!["kubectl-demo".into(), "__complete".into()];
        argv.extend(words.iter().map(OsString::from));
        let mut out = Vec::new();
        let mut err = Vec::new();
        let code = handle_args(
            "demo",
            cmd(),
            &argv,
            &|req: &CompletionRequest| match (req.flag.as_deref(), req.positionals.len()) {
                (None, 0) => {
                    Want::Refs(vec![ObjectKind::KUSTOMIZATION, ObjectKind::GIT_REPOSITORY])
                }
                (None, _) => Want::Files,
                _ => Want::Default,
            },
            &FakeCluster,
            &mut out,
            &mut err,
        );
        assert_eq!(code, Some(0));
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn flag_names_with_descriptions() {
        assert_eq!(run(&["--d"]), "--dry-run\tOnly print\n:4\n");
        let all = run(&["-"]);
        assert!(
            all.contains("--namespace\tNamespace\n-n\tNamespace\n"),
            "{all}"
        );
        assert!(all.contains("--help"), "{all}");
        // Already given, not repeatable: not offered again.
        assert!(!run(&["--dry-run", "--"]).contains("--dry-run"));
    }

    #[test]
    fn flag_values() {
        assert_eq!(run(&["-o", "j"]), "json\n:4\n");
        assert_eq!(run(&["--output=y"]), "yaml\n:4\n");
        assert_eq!(run(&["-n", "fl"]), "flux-system\n:4\n");
        assert_eq!(run(&["--namespace="]), "default\nflux-system\n:4\n");
    }

    #[test]
    fn refs_and_files() {
        assert_eq!(
            run(&[""]),
            "ks/apps\tKustomization\nks/infra\tKustomization\ngitrepository/flux-system\tGitRepository\n:4\n"
        );
        assert_eq!(
            run(&["kustomization/a"]),
            "kustomization/apps\tKustomization\n:4\n"
        );
        assert_eq!(run(&["-n", "default", "ks/"]), ":4\n");
        assert_eq!(run(&["ks/apps", "fi"]), ":0\n");
    }

    #[test]
    fn no_desc_and_not_ours() {
        let argv: Vec<OsString> = vec![
            "kubectl-demo".into(),
            "__completeNoDesc".into(),
            "--o".into(),
        ];
        let mut out = Vec::new();
        let code = handle_args(
            "demo",
            cmd(),
            &argv,
            &|_: &CompletionRequest| Want::Default,
            &FakeCluster,
            &mut out,
            &mut Vec::new(),
        );
        assert_eq!(code, Some(0));
        assert_eq!(String::from_utf8(out).unwrap(), "--output\n:4\n");
        let argv: Vec<OsString> = vec!["kubectl-demo".into(), "ks/x".into()];
        assert_eq!(
            handle_args(
                "demo",
                cmd(),
                &argv,
                &|_: &CompletionRequest| Want::Default,
                &FakeCluster,
                &mut Vec::new(),
                &mut Vec::new()
            ),
            None
        );
    }

    #[test]
    fn helper_names_follow_kubectl() {
        if !cfg!(windows) {
            assert_eq!(helper_name("unstick"), "kubectl_complete-unstick");
            assert_eq!(helper_name("get_all"), "kubectl_complete-get_all");
            assert!(helper_script("unstick").contains("exec kubectl-unstick __complete \"$@\"\n"));
            // kubectl completes `kubectl gitops mcp` with kubectl_complete-gitops-mcp (a cargo
            // install's kubectl-gitops-mcp) and `kubectl gitops-mcp` with
            // kubectl_complete-gitops_mcp (krew's link kubectl-gitops_mcp).
            assert_eq!(helper_name("gitops-mcp"), "kubectl_complete-gitops-mcp");
            let script = helper_script("gitops-mcp");
            assert!(
                script.contains("exec kubectl-gitops-mcp __complete"),
                "{script}"
            );
            assert!(
                script.contains("`kubectl gitops mcp completion install`"),
                "{script}"
            );
        }
    }

    #[test]
    fn the_file_stem_is_the_file_kubectl_ran() {
        let stem = |argv0: &str| file_stem("gitops-mcp", std::ffi::OsStr::new(argv0));
        assert_eq!(stem("/home/me/.cargo/bin/kubectl-gitops-mcp"), "gitops-mcp");
        assert_eq!(stem("/home/me/.krew/bin/kubectl-gitops_mcp"), "gitops_mcp");
        assert_eq!(stem("kubectl-gitops-mcp.exe"), "gitops-mcp");
        assert_eq!(stem("/home/me/.fluxcd/plugins/flux-mcp"), "gitops_mcp");
        assert_eq!(stem("cltest-plugin"), "gitops_mcp");
        assert_eq!(stem("kubectl-"), "gitops_mcp");
        assert_eq!(typed_words("gitops-mcp"), "gitops mcp");
        assert_eq!(typed_words("gitops_mcp"), "gitops-mcp");
    }
}
