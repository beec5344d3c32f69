//! Rendering with real `kubectl kustomize`, in parallel, cached by the content of every file the
//! render reads.
//!
//! kustomize-controller builds with `LoadRestrictionsNone` and plugins disabled (fluxcd/pkg
//! `kustomize/kustomize_generator.go` `Build`), so every render here passes
//! `--load-restrictor=LoadRestrictionsNone`. A directory without a kustomization file gets the
//! kustomization the controller generates (`findOrGenerateKustomization`: every `.yaml`/`.yml`
//! file, sub-directories with a kustomization as one resource), and `spec.targetNamespace`
//! becomes the kustomization's `namespace:` (`GenerateManifest`).

use crate::kustomize_fields::KustomizeFields;
use crate::tree::Repo;
use cluster_loop::klog::strip_klog;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What to render: a repository-relative directory, optionally with a target namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unit {
    /// Repository-relative directory ("" for the root).
    pub dir: String,
    /// `spec.targetNamespace` of the Flux Kustomization.
    pub target_namespace: Option<String>,
    /// The Flux Kustomization's own kustomize fields ([`crate::kustomize_fields::KustomizeFields`]) as
    /// JSON, `None` when it sets none.
    pub kustomize: Option<String>,
}

/// One rendered object: its YAML text (what envsubst runs on) and its value.
#[derive(Debug, Clone)]
pub struct Doc {
    /// The document's YAML text as kustomize printed it.
    pub text: String,
    /// Parsed value (shared with the objects applied from it).
    pub value: Arc<serde_json::Value>,
}

/// The documents of one render, shared by every reader.
pub type Docs = Arc<[Arc<Doc>]>;

/// Result of one render.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// Objects in output order, or kustomize's error text (shared: a render is read by every
    /// overlay and level that reaches it, never copied).
    pub result: Result<Docs, String>,
    /// Served from the cache.
    pub cached: bool,
}

/// The bounds of one `kubectl kustomize` run (`--render-timeout`, `--render-memory`).
///
/// A render that never ends (a YAML alias bomb: nine levels of nine anchors grew `kubectl
/// kustomize` to 8 GB in 20 s) is stopped and reported as FL001 naming the directory and the
/// bound, and the rest of the fleet is linted. The defaults are far beyond any real fleet:
/// kustomize-controller's own Deployment is limited to 1Gi of memory for every build it runs,
/// and a real directory renders in well under a second.
///
/// - `timeout`: wall-clock time from the start of the child; past it the child's process group
///   (kubectl and anything it started, e.g. `git` for a remote base) is killed.
/// - `memory`: bytes of data segment (RLIMIT_DATA: heap and private anonymous mappings, what
///   the Go runtime allocates) set on the child with prlimit(2) as soon as it is spawned
///   (Linux only; RLIMIT_AS would also count the Go runtime's address-space reservations,
///   about 1 GB for kubectl before any work). The runtime then dies with `out of memory`.
///
/// A zero in either field is no bound. A render stopped by a bound is never cached: with
/// other bounds it may finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderBounds {
    /// Wall-clock time one render may take.
    pub timeout: std::time::Duration,
    /// Bytes of memory (data segment) one render may use.
    pub memory: u64,
}

impl Default for RenderBounds {
    fn default() -> Self {
        RenderBounds {
            timeout: std::time::Duration::from_secs(300),
            memory: 4 << 30,
        }
    }
}

/// How every message of a render stopped by a [`RenderBounds`] bound starts.
pub const BOUND_PASSED: &str = "stopped past a render bound: ";

/// Whether a render error is a bound passed ([`RenderBounds`]), not kustomize's own error.
pub fn bound_passed(message: &str) -> bool {
    message.starts_with(BOUND_PASSED)
}

/// Parses a memory size: bytes, or a number with a Kubernetes quantity suffix (`Ki`, `Mi`,
/// `Gi`, `Ti`; `k`/`K`, `M`, `G`, `T` in powers of 1000), e.g. `4Gi`, `512Mi`; `0` is no bound.
/// Errors: anything else, quoting the input.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "{s:?}: not a memory size (e.g. 4Gi, 512Mi, 0 for no bound)"
            ));
        }
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{s:?}: not a memory size (e.g. 4Gi, 512Mi, 0 for no bound)"))
}

/// A memory size as written back to the user: the largest binary unit that divides it
/// (`4Gi`, `256Mi`), else bytes.
pub fn format_memory(b: u64) -> String {
    for (unit, m) in [
        ("Ti", 1u64 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{unit}", b / m);
        }
    }
    b.to_string()
}

/// Process groups of the `kubectl kustomize` runs under way (each child leads its own group,
/// so a bound kills what it started too); [`cleanup_interrupted`] kills them on Ctrl-C, since
/// the terminal's SIGINT no longer reaches them.
static LIVE_GROUPS: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn kill_group(pid: u32) {
    if let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
    }
}

/// What one bounded run of a child left: its exit status, stdout, stderr, and the bound it
/// passed (a message starting with [`BOUND_PASSED`]).
struct BoundedOutput {
    status: std::process::ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    passed: Option<String>,
}

/// Runs `cmd` (stdin closed) as the leader of its own process group under `bounds`
/// ([`RenderBounds`]): its output is read on this thread and one more, a watchdog thread
/// kills the group when the time bound passes (woken early when the child ends), and a
/// memory bound is applied with prlimit(2) right after spawn. Errors: the child cannot start.
fn run_bounded(
    mut cmd: std::process::Command,
    bounds: RenderBounds,
) -> std::io::Result<BoundedOutput> {
    use std::io::Read as _;
    use std::os::unix::process::CommandExt as _;
    use std::process::Stdio;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn()?;
    let pid = child.id();
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.insert(pid);
    }
    #[cfg(target_os = "linux")]
    if bounds.memory > 0 {
        let limit = rustix::process::Rlimit {
            current: Some(bounds.memory),
            maximum: Some(bounds.memory),
        };
        let _ = rustix::process::prlimit(
            Some(rustix::process::Pid::from_child(&child)),
            rustix::process::Resource::Data,
            limit,
        );
    }
    let timed_out = std::sync::atomic::AtomicBool::new(false);
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let child_pid = rustix::process::Pid::from_child(&child);
    let (out, err) = std::thread::scope(|s| {
        let watchdog = (!bounds.timeout.is_zero()).then(|| {
            let timed_out = &timed_out;
            s.spawn(move || {
                if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    ended.recv_timeout(bounds.timeout)
                {
                    timed_out.store(true, std::sync::atomic::Ordering::SeqCst);
                    kill_group(pid);
                }
            })
        });
        let err = s.spawn(move || {
            let mut b = Vec::new();
            let _ = stderr.read_to_end(&mut b);
            b
        });
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        let err = err.join().unwrap_or_default();
        // wait for the child's exit without reaping it: until it is reaped its id (the
        // group's) cannot be reused, so no kill below can reach another process
        loop {
            match rustix::process::waitid(
                rustix::process::WaitId::Pid(child_pid),
                rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOWAIT,
            ) {
                Err(e) if e == rustix::io::Errno::INTR => continue,
                _ => break,
            }
        }
        drop(done);
        if let Some(w) = watchdog {
            let _ = w.join();
        }
        (out, err)
    });
    // what the child started and left behind (a `git` of a remote base) ends with it
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.remove(&pid);
    }
    kill_group(pid);
    let status = child.wait();
    let status = status?;
    let passed = if timed_out.load(std::sync::atomic::Ordering::SeqCst) {
        Some(format!(
            "{BOUND_PASSED}kubectl kustomize ran past the time bound {} (--render-timeout) and was killed",
            cluster_loop::duration::format_go_duration(bounds.timeout)
        ))
    } else if bounds.memory > 0 && !status.success() && {
        let e = String::from_utf8_lossy(&err);
        e.contains("fatal error")
            && (e.contains("out of memory") || e.contains("cannot allocate memory"))
    } {
        Some(format!(
            "{BOUND_PASSED}kubectl kustomize needed more than the memory bound {} (--render-memory) and died",
            format_memory(bounds.memory)
        ))
    } else {
        None
    };
    Ok(BoundedOutput {
        status,
        stdout: out,
        stderr: err,
        passed,
    })
}

/// Renders units with `kubectl kustomize`, memoised in memory and (unless disabled) on disk.
pub struct Renderer {
    kubectl: String,
    bounds: RenderBounds,
    kubectl_id: String,
    cache_dir: Option<PathBuf>,
    memo: Mutex<BTreeMap<Unit, Rendered>>,
    /// The run pack of the repository (see [`Renderer::save_pack`]), read on first use.
    pack: std::sync::OnceLock<Mutex<PackState>>,
    /// Number of `kubectl kustomize` processes run.
    pub runs: std::sync::atomic::AtomicUsize,
    /// Where renders asked and done are counted for the progress line.
    progress: Option<std::sync::Arc<crate::RunProgress>>,
}

/// What the last run of a repository read from the cache, as one file: every render and every
/// parsed batch of substituted objects it used, under the same keys as their own cache files.
/// A run reads it with one open instead of one per directory and batch; an entry it lacks is
/// read from its own file (or made) as before. Format and damage rules as the file-facts
/// cache ([`crate::tree::Repo::load_cached`]): a first line with the SHA-256 of the rest, and
/// a pack that is unreadable, fails its checksum or has another format is ignored.
#[derive(Default, serde::Deserialize)]
struct Pack {
    format: String,
    renders: BTreeMap<String, PackRender>,
    values: BTreeMap<String, Vec<Option<serde_json::Value>>>,
}

#[derive(serde::Deserialize)]
enum PackRender {
    Docs(Vec<(String, serde_json::Value)>),
    Error(String),
}

#[derive(serde::Serialize)]
struct PackOut<'a> {
    format: &'a str,
    renders: BTreeMap<&'a str, PackRenderOut<'a>>,
    values: BTreeMap<&'a str, Vec<Option<&'a serde_json::Value>>>,
}

#[derive(serde::Serialize)]
enum PackRenderOut<'a> {
    Docs(Vec<(&'a str, &'a serde_json::Value)>),
    Error(&'a str),
}

/// How a unit is rendered, in every render's cache key: a change of the recipe (here: the
/// kustomization written in place as kustomize-controller writes it, no longer a wrapper)
/// never serves a render of the old one.
const RENDER_RECIPE: &str = "in-place-1\0";

/// Version of the pack format.
const PACK_FORMAT: &str = concat!("fleetlint-pack/1/", env!("CARGO_PKG_VERSION"));

/// The pack as read, and what this run used.
#[derive(Default)]
struct PackState {
    file: Option<PathBuf>,
    pack: Pack,
    /// Keys the pack held when read.
    held: std::collections::BTreeSet<String>,
    renders: BTreeMap<String, Result<Docs, String>>,
    values: BTreeMap<String, Vec<Option<Arc<serde_json::Value>>>>,
}

fn hex_sha256(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The default on-disk cache: `$XDG_CACHE_HOME/cluster-loop/fleetlint` or
/// `~/.cache/cluster-loop/fleetlint`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("cluster-loop").join("fleetlint"))
}

fn which(cmd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        return Some(PathBuf::from(cmd));
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(cmd))
            .find(|c| c.is_file())
    })
}

impl Renderer {
    /// A renderer using `kubectl` (a command name or path) and an optional cache directory.
    /// The cache key includes the kubectl binary's path, size and modification time, so a
    /// different kustomize never serves a stale render.
    pub fn new(kubectl: &str, cache_dir: Option<PathBuf>) -> Renderer {
        let kubectl_id = which(kubectl)
            .and_then(|p| {
                let m = std::fs::metadata(&p).ok()?;
                let mt = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                Some(format!("{}:{}:{}", p.display(), m.len(), mt))
            })
            .unwrap_or_else(|| kubectl.to_string());
        Renderer {
            kubectl: kubectl.to_string(),
            bounds: RenderBounds::default(),
            kubectl_id,
            cache_dir,
            memo: Mutex::new(BTreeMap::new()),
            pack: std::sync::OnceLock::new(),
            runs: Default::default(),
            progress: None,
        }
    }

    /// The same renderer, each `kubectl kustomize` run under `bounds` ([`RenderBounds`]).
    pub fn with_bounds(mut self, bounds: RenderBounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// The same renderer, counting its renders in `progress` ([`crate::RunProgress`]).
    pub fn with_progress(mut self, progress: Option<std::sync::Arc<crate::RunProgress>>) -> Self {
        self.progress = progress;
        self
    }

    /// Renders every unit not yet rendered, up to `jobs` at once, and returns them all.
    pub fn render_all(&self, repo: &Repo, units: &[Unit], jobs: usize) -> BTreeMap<Unit, Rendered> {
        let todo: Vec<&Unit> = {
            let memo = self.memo.lock().expect("memo");
            units.iter().filter(|u| !memo.contains_key(*u)).collect()
        };
        let next = std::sync::atomic::AtomicUsize::new(0);
        if let Some(p) = &self.progress {
            p.renders_asked
                .fetch_add(todo.len(), std::sync::atomic::Ordering::Relaxed);
        }
        std::thread::scope(|s| {
            for _ in 0..jobs.max(1).min(todo.len().max(1)) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(u) = todo.get(i) else { break };
                        let r = self.render_one(repo, u);
                        self.memo.lock().expect("memo").insert((*u).clone(), r);
                        if let Some(p) = &self.progress {
                            p.renders_done
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let memo = self.memo.lock().expect("memo");
        units
            .iter()
            .filter_map(|u| memo.get(u).map(|r| (u.clone(), r.clone())))
            .collect()
    }

    fn pack(&self, repo: &Repo) -> &Mutex<PackState> {
        self.pack.get_or_init(|| {
            let Some(dir) = &self.cache_dir else {
                return Mutex::new(PackState::default());
            };
            let id = hex_sha256(format!("{}\0{}", repo.root.display(), repo.scope).as_bytes());
            let file = dir.join(format!("pack-{}.json", &id[..32]));
            let pack = std::fs::read_to_string(&file)
                .ok()
                .and_then(|s| {
                    let (sum, body) = s.split_once('\n')?;
                    (hex_sha256(body.as_bytes()) == sum).then_some(())?;
                    let p: Pack = serde_json::from_str(body).ok()?;
                    (p.format == PACK_FORMAT).then_some(p)
                })
                .unwrap_or_default();
            let held = pack
                .renders
                .keys()
                .chain(pack.values.keys())
                .cloned()
                .collect();
            Mutex::new(PackState {
                file: Some(file),
                pack,
                held,
                ..Default::default()
            })
        })
    }

    /// Writes the renders and parsed batches this run used as the run pack, unless the pack
    /// read differs from them by at most an eighth of its entries
    /// ([`crate::tree::rewrite_needed`]: after a one-file change the next run reads that
    /// directory's render from its own cache file). Call once at the end of a run.
    pub fn save_pack(&self) {
        let Some(state) = self.pack.get() else { return };
        let Ok(st) = state.lock() else { return };
        let Some(file) = &st.file else { return };
        let used = st.renders.len() + st.values.len();
        let missed = st
            .renders
            .keys()
            .chain(st.values.keys())
            .filter(|k| !st.held.contains(*k))
            .count();
        let unused = st.held.len() + missed - used;
        if !crate::tree::rewrite_needed(missed + unused, st.held.len()) {
            return;
        }
        let out = PackOut {
            format: PACK_FORMAT,
            renders: st
                .renders
                .iter()
                .map(|(k, r)| {
                    let r = match r {
                        Ok(docs) => PackRenderOut::Docs(
                            docs.iter().map(|d| (d.text.as_str(), &*d.value)).collect(),
                        ),
                        Err(e) => PackRenderOut::Error(e),
                    };
                    (k.as_str(), r)
                })
                .collect(),
            values: st
                .values
                .iter()
                .map(|(k, v)| (k.as_str(), v.iter().map(|x| x.as_deref()).collect()))
                .collect(),
        };
        let Ok(body) = serde_json::to_string(&out) else {
            return;
        };
        if let Some(d) = file.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, format!("{}\n{body}", hex_sha256(body.as_bytes()))).is_ok() {
            let _ = std::fs::rename(&tmp, file);
        }
    }

    fn key(&self, repo: &Repo, u: &Unit) -> String {
        let mut h = Sha256::new();
        h.update(RENDER_RECIPE.as_bytes());
        h.update(self.kubectl_id.as_bytes());
        h.update(b"\0");
        h.update(u.dir.as_bytes());
        h.update(b"\0");
        h.update(u.target_namespace.as_deref().unwrap_or("\u{1}").as_bytes());
        h.update(b"\0");
        h.update(u.kustomize.as_deref().unwrap_or("\u{1}").as_bytes());
        for f in unit_inputs(repo, u) {
            h.update(b"\0");
            h.update(f.as_bytes());
            h.update(b"\0");
            // the digest of the text already read (CRLF normalised, as kustomize's YAML reader
            // sees it); other inputs (a generator's env file, a file outside PATH) from disk
            match repo.hashes.get(&f) {
                Some(d) => {
                    h.update(b"sha256:");
                    h.update(d.as_bytes())
                }
                None => match std::fs::read(repo.root.join(&f)) {
                    Ok(b) => h.update(&b),
                    Err(_) => h.update(b"\x01missing"),
                },
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses YAML documents (each text one document) into values, `None` where one does not
    /// parse: the results of one call are kept in the cache directory under the digest of all
    /// the texts, so an unchanged batch (one Kustomization's substituted objects) is read back
    /// as JSON instead of parsed again (from the run pack when it holds the batch). A cache
    /// entry is a pure function of its key.
    pub fn parse_yaml_cached(
        &self,
        repo: &Repo,
        texts: &[&str],
    ) -> Vec<Option<Arc<serde_json::Value>>> {
        let parse = || -> Vec<Option<serde_json::Value>> {
            texts
                .iter()
                .map(|t| serde_saphyr::from_str::<serde_json::Value>(t).ok())
                .collect()
        };
        let arcs =
            |v: Vec<Option<serde_json::Value>>| v.into_iter().map(|x| x.map(Arc::new)).collect();
        let Some(dir) = &self.cache_dir else {
            return arcs(parse());
        };
        let mut h = Sha256::new();
        h.update(b"yaml-values\0");
        for t in texts {
            h.update((t.len() as u64).to_le_bytes());
            h.update(t.as_bytes());
        }
        let key: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let pack = self.pack(repo);
        let packed = pack
            .lock()
            .ok()
            .and_then(|mut p| p.pack.values.remove(&key))
            .filter(|v| v.len() == texts.len());
        let v: Vec<Option<Arc<serde_json::Value>>> = match packed {
            Some(v) => arcs(v),
            None => {
                let file = dir.join(format!("{key}.values"));
                match std::fs::read_to_string(&file)
                    .ok()
                    .and_then(|s| serde_json::from_str::<Vec<Option<serde_json::Value>>>(&s).ok())
                    .filter(|v| v.len() == texts.len())
                {
                    Some(v) => arcs(v),
                    None => {
                        let v = parse();
                        if let Ok(body) = serde_json::to_string(&v) {
                            let _ = std::fs::create_dir_all(dir);
                            let tmp = file.with_extension(format!("tmp{}", std::process::id()));
                            if std::fs::write(&tmp, body).is_ok() {
                                let _ = std::fs::rename(&tmp, &file);
                            }
                        }
                        arcs(v)
                    }
                }
            }
        };
        if let Ok(mut p) = pack.lock() {
            p.values.insert(key, v.clone());
        }
        v
    }

    fn render_one(&self, repo: &Repo, u: &Unit) -> Rendered {
        let key = self.key(repo, u);
        let r = self.render_keyed(repo, u, &key);
        // a render stopped by a bound is not kustomize's answer: never kept for another run
        let bounded = matches!(&r.result, Err(e) if bound_passed(e));
        if self.cache_dir.is_some()
            && !bounded
            && let Ok(mut p) = self.pack(repo).lock()
        {
            p.renders.insert(key, r.result.clone());
        }
        r
    }

    fn render_keyed(&self, repo: &Repo, u: &Unit, key: &str) -> Rendered {
        let packed = self
            .cache_dir
            .as_ref()
            .and_then(|_| self.pack(repo).lock().ok())
            .and_then(|mut p| p.pack.renders.remove(key));
        if let Some(p) = packed {
            let result = match p {
                PackRender::Docs(v) => Ok(v
                    .into_iter()
                    .map(|(text, value)| {
                        Arc::new(Doc {
                            text,
                            value: Arc::new(value),
                        })
                    })
                    .collect()),
                PackRender::Error(e) => Err(strip_klog(&e)),
            };
            return Rendered {
                result,
                cached: true,
            };
        }
        let cache_file = self
            .cache_dir
            .as_ref()
            .map(|d| d.join(format!("{key}.out")));
        if let Some(cf) = &cache_file
            && let Ok(s) = std::fs::read_to_string(cf)
        {
            // `okj`: the documents already parsed, as JSON (serde_json reads it several times
            // faster than the YAML parser reads kustomize's text); `ok`: kustomize's text
            // (written by earlier versions); `error`: kustomize's message
            let result = if let Some(j) = s.strip_prefix("okj\n") {
                serde_json::from_str::<Vec<(String, serde_json::Value)>>(j)
                    .ok()
                    .map(|v| {
                        Ok(v.into_iter()
                            .map(|(text, value)| {
                                Arc::new(Doc {
                                    text,
                                    value: Arc::new(value),
                                })
                            })
                            .collect())
                    })
            } else if let Some(out) = s.strip_prefix("ok\n") {
                Some(Ok(shared(parse_output(out))))
            } else {
                Some(Err(strip_klog(s.strip_prefix("error\n").unwrap_or(&s))))
            };
            // an unreadable entry (cut short by a full disk) is rendered again
            if let Some(result) = result {
                return Rendered {
                    result,
                    cached: true,
                };
            }
        }
        self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let result = self.run_kubectl(repo, u).map(|o| shared(parse_output(&o)));
        let bounded = matches!(&result, Err(e) if bound_passed(e));
        if let Some(cf) = cache_file.as_ref().filter(|_| !bounded) {
            let body = match &result {
                Ok(docs) => {
                    let pairs: Vec<(&str, &serde_json::Value)> =
                        docs.iter().map(|d| (d.text.as_str(), &*d.value)).collect();
                    serde_json::to_string(&pairs)
                        .map(|j| format!("okj\n{j}"))
                        .ok()
                }
                Err(e) => Some(format!("error\n{e}")),
            };
            if let Some(body) = body {
                if let Some(d) = cf.parent() {
                    let _ = std::fs::create_dir_all(d);
                }
                let tmp = cf.with_extension(format!("tmp{}", std::process::id()));
                if std::fs::write(&tmp, body).is_ok() {
                    let _ = std::fs::rename(&tmp, cf);
                }
            }
        }
        Rendered {
            result,
            cached: false,
        }
    }

    fn run_kubectl(&self, repo: &Repo, u: &Unit) -> Result<String, String> {
        let abs = repo.root.join(&u.dir);
        if !abs.is_dir() {
            return Err(format!("{}: no such directory", display_dir(&u.dir)));
        }
        let kfile = repo.kustomization_file(&u.dir);
        let has_k = kfile.is_some();
        // the kustomization kustomize-controller writes in place before it builds
        // (GenerateManifest), built in a mirror of the repository made of links
        let in_place = match kfile
            .as_ref()
            .and_then(|f| repo.texts.get(f).map(|t| (f, t)))
        {
            Some((f, text)) => crate::kustomize_fields::in_place(
                text,
                u.target_namespace.as_deref(),
                u.kustomize.as_deref(),
                &abs,
            )
            .map(|k| k.map(|k| (f.clone(), k)))?,
            None => None,
        };
        let tmp;
        let mirror;
        let mirror_dir;
        let mut mirror_root = None;
        let target: &Path = if let Some((f, text)) = in_place {
            mirror = tempdir()
                .and_then(|t| link_mirror(&repo.root, &t.0, &f, &text).map(|()| t))
                .map_err(|e| format!("cannot build a mirror of the repository: {e}"))?;
            mirror_dir = mirror.0.join(&u.dir);
            mirror_root = Some(mirror.0.clone());
            &mirror_dir
        } else if has_k {
            &abs
        } else {
            tmp = tempdir().map_err(|e| format!("cannot create a temporary directory: {e}"))?;
            // kustomize refuses absolute directory resources ("new root cannot be absolute"):
            // reach them from the temporary directory by a relative path
            let up = "../".repeat(tmp.0.components().count().saturating_sub(1));
            let relative =
                |p: &Path| format!("{up}{}", p.display().to_string().trim_start_matches('/'));
            let resources: Vec<String> = if has_k {
                vec![relative(&abs)]
            } else {
                repo.generated_resources(&u.dir)
                    .iter()
                    .map(|r| relative(&repo.root.join(r)))
                    .collect()
            };
            if resources.is_empty() {
                return Ok(String::new());
            }
            let mut k = String::from(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
            );
            for r in resources {
                k.push_str(&format!("  - {}\n", serde_json::Value::String(r)));
            }
            if let Some(ns) = &u.target_namespace {
                k.push_str(&format!(
                    "namespace: {}\n",
                    serde_json::Value::String(ns.clone())
                ));
            }
            if let Some(j) = &u.kustomize {
                k.push_str(&KustomizeFields::wrapper_lines(j, &abs, &relative));
            }
            std::fs::write(tmp.0.join("kustomization.yaml"), k)
                .map_err(|e| format!("cannot write a temporary kustomization: {e}"))?;
            &tmp.0
        };
        let mut cmd = std::process::Command::new(&self.kubectl);
        cmd.arg("kustomize")
            .arg("--load-restrictor=LoadRestrictionsNone")
            .arg(target);
        let out = run_bounded(cmd, self.bounds)
            .map_err(|e| format!("cannot run {} kustomize: {e}", self.kubectl))?;
        if let Some(passed) = out.passed {
            return Err(passed);
        }
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let err = strip_klog(String::from_utf8_lossy(&out.stderr).trim());
            // temporary paths mean nothing to the reader: show repository-relative ones
            let root = format!("{}/", repo.root.display());
            let rel_root = format!(
                "{}/",
                repo.root.display().to_string().trim_start_matches('/')
            );
            // the relative forms first: the absolute root is a substring of each of them
            // (trial4: '../../tmp/co/deploy' became '../..deploy')
            let mut err = err;
            for n in (1..=32).rev() {
                err = err.replace(&format!("{}{rel_root}", "../".repeat(n)), "");
            }
            let mut err = err.replace(&root, "");
            if let Some(m) = &mirror_root {
                err = err.replace(&format!("{}/", m.display()), "");
            }
            Err(err.trim().to_string())
        }
    }
}

/// A directory for messages ("." for the repository root).
pub fn display_dir(d: &str) -> String {
    if d.is_empty() {
        ".".into()
    } else {
        d.to_string()
    }
}

/// Ends what an interrupted run of this process leaves: its `kubectl kustomize` runs (each
/// in a process group of its own, see [`RenderBounds`]), its temporary kustomization
/// directories and half-written cache files (renders already in the cache are complete: each is
/// written to a temporary name and renamed).
pub fn cleanup_interrupted(cache_dir: Option<&Path>) {
    if let Ok(groups) = LIVE_GROUPS.lock() {
        groups.iter().for_each(|&g| kill_group(g));
    }
    let pid = std::process::id();
    let tmp_prefix = format!("fleetlint-{pid}-");
    if let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(&tmp_prefix) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    if let Some(d) = cache_dir
        && let Ok(rd) = std::fs::read_dir(d)
    {
        let suffix = format!(".tmp{pid}");
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(&suffix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> std::io::Result<TempDir> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("fleetlint-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&p)?;
    Ok(TempDir(std::fs::canonicalize(&p)?))
}

/// Makes `dst` a mirror of the repository at `root` that kustomize reads as the repository
/// itself: the directories from the root down to the directory of `kfile` (a
/// repository-relative kustomization file) are real directories holding links to every other
/// entry of the original, and `kfile` is a file holding `text` (what kustomize-controller writes
/// there in place before it builds). Relative references from that directory (`../base`,
/// components, patches) reach the original files through the links; kustomize resolves a
/// linked directory to the original (`ConfirmDir`), whose own references are the original's.
fn link_mirror(root: &Path, dst: &Path, kfile: &str, text: &str) -> std::io::Result<()> {
    let (dir, name) = kfile.rsplit_once('/').unwrap_or(("", kfile));
    let chain: Vec<&str> = dir.split('/').filter(|c| !c.is_empty()).collect();
    let (mut src, mut out) = (root.to_path_buf(), dst.to_path_buf());
    for depth in 0..=chain.len() {
        let keep = chain.get(depth).copied().unwrap_or(name);
        for e in std::fs::read_dir(&src)? {
            let e = e?;
            let n = e.file_name();
            if n.to_str() == Some(keep) || n == ".git" {
                continue;
            }
            #[cfg(unix)]
            std::os::unix::fs::symlink(e.path(), out.join(&n))?;
        }
        if let Some(c) = chain.get(depth) {
            src = src.join(c);
            out = out.join(c);
            std::fs::create_dir(&out)?;
        }
    }
    std::fs::write(out.join(name), text)
}

fn shared(docs: Vec<Doc>) -> Docs {
    docs.into_iter().map(Arc::new).collect()
}

/// Splits `kubectl kustomize` output into documents and parses each.
pub fn parse_output(out: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut flush = |cur: &mut String| {
        if !cur.trim().is_empty()
            && let Ok(v) = serde_saphyr::from_str::<serde_json::Value>(cur)
            && v.is_object()
        {
            docs.push(Doc {
                text: std::mem::take(cur),
                value: Arc::new(v),
            });
        }
        cur.clear();
    };
    for line in out.split_inclusive('\n') {
        if line.trim_end() == "---" {
            flush(&mut cur);
        } else {
            cur.push_str(line);
        }
    }
    flush(&mut cur);
    docs
}

/// Every file a render of `u` reads: its directory's inputs and those of the components its
/// Flux Kustomization adds.
pub fn unit_inputs(repo: &Repo, u: &Unit) -> BTreeSet<String> {
    let mut out = repo.closure(&u.dir);
    if let Some(f) = u
        .kustomize
        .as_deref()
        .and_then(|j| serde_json::from_str::<KustomizeFields>(j).ok())
    {
        for c in f.component_dirs(&u.dir) {
            out.extend(repo.closure(&c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_and_print_as_written() {
        assert_eq!(parse_memory("4Gi"), Ok(4 << 30));
        assert_eq!(parse_memory("512Mi"), Ok(512 << 20));
        assert_eq!(parse_memory("1G"), Ok(1_000_000_000));
        assert_eq!(parse_memory("0"), Ok(0));
        assert!(
            parse_memory("4GB")
                .unwrap_err()
                .contains("not a memory size")
        );
        assert!(parse_memory("").is_err());
        assert!(parse_memory("99999999999Ti").is_err());
        assert_eq!(format_memory(4 << 30), "4Gi");
        assert_eq!(format_memory(256 << 20), "256Mi");
        assert_eq!(format_memory(1000), "1000");
    }
}
