//! `cluster-loop-demo`: the failure catalogue's incidents replayed on a real cluster
//! (tests/realcluster), with the real plugin binaries run through real `kubectl <plugin>`
//! dispatch.
//!
//! Steps (each prints the commands it runs, their output, and what it proves):
//! 1. markercheck: a `:tag` marker on an `image:` line in `clusters/`, caught offline, with the
//!    simulated automation commit (`image: 6.7.0`, the podinfo policy's tag) and the rendered
//!    result.
//! 2. fleetlint: clusters/dev lints clean and prod reports exactly its placeholders; a review
//!    drops apps-wave-2's `postBuild.substituteFrom`, fleetlint names every `${VAR}` that would
//!    ship literally, and the fix (restoring it) lints clean again. Offline.
//! 3. unstick (real cluster): clusters/dev reconciled by the real controllers from the cluster's
//!    Git server (its image objects by the real image-reflector- and image-automation-controller,
//!    tags pushed to the real OCI registry); the same change pushed there, and the real
//!    image-automation-controller commits the bare tag; the real kustomize-controller holds
//!    apps-wave-1's health check on ImagePullBackOff, apps-wave-2 waits on it; an operator's
//!    checkout behind that commit brings it home with `kubectl gitops pull` (a fast-forward,
//!    the automation's setter line named);
//!    `kubectl unstick ks/apps-wave-2` names the root cause; the fix is committed; unstick frees
//!    apps-wave-1 with the lever this controller supports and proves Ready at the new revision.
//! 4. podresolve (real cluster): the Git host resolved from a real probe pod (kubeadm's CoreDNS
//!    Corefile with a hosts pin to the gateway VIP) beside the workstation's answer, and from
//!    inside the real source-controller's pod.
//! 5. cutover (real cluster): a new Git server whose branch is behind is refused with the commit
//!    count; once level, the cutover happens at the same revision on the real source- and
//!    kustomize-controller, the authored-value change is shown and landed, and `--finish`
//!    verifies it.
//! 6. realcluster: a Job that cannot pull held by the real kustomize-controller, freed; it ends
//!    with `kubectl gitops verify` on that fleet: the workloads link named broken while the
//!    check is held, then the whole chain proven (`--wait`) once it is freed.
//! 7. gatewaycheck (real cluster): the real Envoy Gateway and MetalLB write the status of a
//!    Gateway `infra/eg` and an HTTPRoute `apps/podinfo`; every example of `kubectl
//!    gatewaycheck --help` runs as written and each verdict is checked against the cluster (the
//!    envoy pods cannot pull here: the data plane is named unavailable with the pod's reason,
//!    and `--probe` gets no answer).
//! 8. immutable (real cluster, catalogue row 7): a Job's changed template refused by the real
//!    API server on every run; `kubectl unstick` names it with its fix and plans no rerun,
//!    `kubectl gitops verify` says the same fix; the force annotation it names recreates it
//!    ([`verdicts`]).
//! 9. automation (real cluster, catalogue row 6): a commit template using the removed
//!    `.Updated`, refused by the real image-automation-controller; `kubectl gitops verify`
//!    names the automation on link 4 with the message and the fix, `kubectl markercheck` flags
//!    it offline, `.Changed` makes the real controller commit.
//! 10. auth-http (real cluster): the failure catalogue's row 1, basic auth over plain `http://`:
//!     the real source-controller sends it in clear text (it does not refuse), and `kubectl
//!     cutover --to http://...` refuses it as `flux bootstrap` does ([`gitauth`]).
//! 11. auth-token (real cluster): row 2, a token revoked (the Git server's token API) while Flux
//!     holds it: "authentication required"; `kubectl unstick` and `kubectl gitops verify` name
//!     the Secret, its key and the fix, and the fix as they say it recovers ([`gitauth`]).
//! 12. servicelinks (real cluster): failure catalogue row 5. A Python app reads `REDIS_PORT`
//!     as a port beside a Service `redis`; the kubelet's Service link variable
//!     (`REDIS_PORT=tcp://<ClusterIP>:6379`) crashes it (the real python3's `ValueError:
//!     invalid literal for int() with base 10: 'tcp://...'`, CrashLoopBackOff); `kubectl
//!     unstick` and `kubectl gitops verify` name the variable, the Service and
//!     `enableServiceLinks: false`; the fix is pushed and `gitops verify --wait` proves it.
//! 13. examples (real cluster): every example of every plugin's `--help` runs as written on the
//!     cluster the steps before it leave (tests/demo/src/examples.rs).
//!
//! The offline steps (1, 2) run first, while the real cluster's Go build (tests/realcluster
//! build.sh, started at once in the background: only the control plane, source-controller,
//! the current kustomize-controller and the image controllers with the OCI registry when
//! `CLUSTER_LOOP_BUILD_SET=demo`, as `./demo` sets) goes on. Steps 3 to 12 share ONE real cluster, started once; `--keep` leaves it running.
//!
//! Exit code 0 only when every step's outcome is the expected one. Its end-to-end test is the
//! `demo` group of the real-cluster test binary (tests/real/tests/real/long/demo.rs:
//! `cargo test --workspace --tests -- demo::`).
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

mod verdicts;

use clap::Parser;
use serde_json::{Value, json};
use twin::flux::cluster::s;
use twin::git::Change;

std::thread_local! {
    /// Where this thread's demo output goes: `None` prints each line at once; `Some` holds it
    /// for a step that runs beside another, printed whole, in step order, once it is done.
    static HELD: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// `println!` for the steps: prints, or appends to this thread's held output ([`HELD`]).
macro_rules! say {
    ($($t:tt)*) => {
        say(format!($($t)*))
    };
}

fn say(line: String) {
    HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(held) => {
            held.push_str(&line);
            held.push('\n');
        }
        None => println!("{line}"),
    })
}

mod examples;
mod gitauth;
mod servicelinks;

/// Replay the failure catalogue's incidents on the twin cluster with the real plugins.
#[derive(Parser, Debug)]
#[command(name = "cluster-loop-demo", version)]
struct Cli {
    /// Directory holding the kubectl-<plugin> binaries (default: next to this binary)
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Repository root holding clusters/ (default: the source tree this demo was built from)
    #[arg(long, value_name = "DIR")]
    repo_root: Option<PathBuf>,
    /// Run only these steps (markercheck, fleetlint, unstick, podresolve, cutover, realcluster,
    /// gatewaycheck, immutable, automation, auth-http, auth-token, servicelinks, examples); default all. An
    /// unknown step is a usage error (exit 2) listing the valid ones.
    #[arg(long, value_delimiter = ',', value_name = "STEP", value_parser = STEPS)]
    step: Vec<String>,
    /// After the steps, keep the real cluster (and the fleet twin) running and print the
    /// KUBECONFIG exports and commands that work on them (Ctrl-C ends)
    #[arg(long)]
    keep: bool,
}

/// The demo's steps, in the order they run (`--step` accepts only these): each step's number
/// in its title is its place here ([`Step::new`]).
const STEPS: [&str; 13] = [
    "markercheck",
    "fleetlint",
    "unstick",
    "podresolve",
    "cutover",
    "realcluster",
    "gatewaycheck",
    "immutable",
    "automation",
    "auth-http",
    "auth-token",
    "servicelinks",
    "examples",
];

/// Nominal time budget for waits inside the demo (real time).
const T: Duration = Duration::from_secs(120);

struct Ctx {
    /// A directory holding only links to the `kubectl-<name>` plugins (on PATH for
    /// kubectl's plugin dispatch, and printed by --keep).
    bin_dir: PathBuf,
    repo_root: PathBuf,
    work: tempfile::TempDir,
}

/// One step's verdict.
struct Step {
    /// `N. id: what it shows`, N its place in [`STEPS`].
    name: String,
    proved: Vec<String>,
    failed: Vec<String>,
}

/// A step's title as printed: `title` (`id: what it shows`, id one of [`STEPS`]) numbered by
/// the step's place in [`STEPS`], the order the steps run, so a step added anywhere renumbers
/// the others.
fn numbered(title: &str) -> String {
    let id = title.split(':').next().unwrap_or("");
    match STEPS.iter().position(|s| *s == id) {
        Some(i) => format!("{}. {title}", i + 1),
        None => title.to_string(),
    }
}

impl Step {
    fn new(title: &str) -> Self {
        let name = numbered(title);
        say!("\n=== {name} ===");
        Step {
            name,
            proved: vec![],
            failed: vec![],
        }
    }
    /// Records a check: `ok` proves `what`, else it fails with `what`.
    fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        let what = what.into();
        if ok {
            say!("  PROVES: {what}");
            self.proved.push(what);
        } else {
            say!("  FAILED: {what}");
            self.failed.push(what);
        }
        ok
    }
    fn ok(&self) -> bool {
        self.failed.is_empty() && !self.proved.is_empty()
    }
}

/// What a command ended with: its exit code and stdout (stderr is printed, not kept).
struct Out {
    code: i32,
    stdout: String,
}

impl Ctx {
    /// Runs `kubectl ARGS` with the plugins on PATH (real kubectl plugin dispatch), printing
    /// the command line and then the output, indented, as it arrives: stdout and stderr are
    /// read apart (the checks look at stdout) but printed in the order the plugin wrote them,
    /// so a progress line on stderr is not shown after the verdict on stdout.
    fn kubectl(&self, kubeconfig: Option<&Path>, args: &[&str]) -> Out {
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        say!("\n  $ kubectl {}", args.join(" "));
        let mut cmd = Command::new("kubectl");
        cmd.args(args).env("PATH", path).env("NO_COLOR", "1");
        match kubeconfig {
            Some(k) => cmd.env("KUBECONFIG", k),
            None => cmd.env_remove("KUBECONFIG"),
        };
        let spawned = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                say!("    cannot run kubectl: {e}");
                return Out {
                    code: -1,
                    stdout: String::new(),
                };
            }
        };
        // One reader thread per stream; lines meet on one channel in arrival order (the
        // plugins' stdout is line-buffered, so a line arrives when it is written).
        let (tx, rx) = std::sync::mpsc::channel::<(bool, String)>();
        let readers: Vec<_> = [
            child
                .stdout
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .zip([false, true])
        .filter_map(|(r, is_err)| r.map(|r| (r, is_err)))
        .map(|(r, is_err)| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(r).lines() {
                    let Ok(line) = line else { break };
                    if tx.send((is_err, line)).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
        drop(tx);
        let mut stdout = String::new();
        for (is_err, line) in rx {
            say!("    {line}");
            if !is_err {
                stdout.push_str(&line);
                stdout.push('\n');
            }
        }
        for r in readers {
            let _ = r.join();
        }
        let code = child.wait().ok().and_then(|st| st.code()).unwrap_or(-1);
        say!("    (exit {code})");
        Out { code, stdout }
    }

    /// A git repository at `dir` holding a copy of clusters/ under `clusters/`.
    fn fleet_copy(&self, name: &str) -> PathBuf {
        let dir = self.work.path().join(name);
        copy_dir(&self.repo_root.join("clusters"), &dir.join("clusters"));
        git(&dir, &["init", "-q", "-b", "main"]);
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "fleet"]);
        dir
    }
}

fn copy_dir(src: &Path, dest: &Path) {
    for e in walkdir::WalkDir::new(src).sort_by_file_name() {
        let e = e.expect("read clusters/");
        let rel = e.path().strip_prefix(src).unwrap();
        let to = dest.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Demo")
        .env("GIT_AUTHOR_EMAIL", "demo@example.local")
        .env("GIT_COMMITTER_NAME", "Demo")
        .env("GIT_COMMITTER_EMAIL", "demo@example.local")
        .status()
        .expect("git");
    assert!(st.success(), "git {args:?} failed in {}", dir.display());
}

const BACKEND: &str = "clusters/apps/wave-1/podinfo-backend.yaml";
const GOOD_LINE: &str =
    r#"image: registry.example.local:5000/podinfo:6.7.0 # {"$imagepolicy": "flux-system:podinfo"}"#;
const TAG_MARKER_LINE: &str = r#"image: registry.example.local:5000/podinfo:6.7.0 # {"$imagepolicy": "flux-system:podinfo:tag"}"#;
/// What image-automation-controller writes on [`TAG_MARKER_LINE`]: the podinfo policy's tag
/// ([`PODINFO_SELECTED`]) as the whole value.
const AUTOMATION_LINE: &str = r#"image: 6.7.0 # {"$imagepolicy": "flux-system:podinfo:tag"}"#;
/// The tag the fleet's podinfo ImagePolicy (`>=6.7.0 <7.0.0`) selects from [`FLEET_TAGS`].
const PODINFO_SELECTED: &str = "6.7.0";

// ------------------------------------------------------------------ step 1

fn step_markercheck(ctx: &Ctx) -> Step {
    let mut st = Step::new("markercheck: the :tag marker on an image: line, caught offline");
    let fleet = ctx.fleet_copy("markercheck");
    let fleet_s = fleet.display().to_string();
    let clean = ctx.kubectl(None, &["markercheck", &fleet_s]);
    st.check(
        clean.code == 0,
        "clusters/ as committed lints clean (exit 0)",
    );
    let file = fleet.join(BACKEND);
    let text = std::fs::read_to_string(&file).unwrap();
    st.check(
        text.contains(GOOD_LINE),
        format!("{BACKEND} has the plain marker"),
    );
    std::fs::write(&file, text.replace(GOOD_LINE, TAG_MARKER_LINE)).unwrap();
    say!("\n  (the change under review: the marker on the image: line gets a :tag suffix)");
    let r = ctx.kubectl(
        None,
        &[
            "markercheck",
            &fleet_s,
            "--simulate",
            "--render",
            "--set",
            &format!("flux-system:podinfo={FLEET_REGISTRY}/podinfo:{PODINFO_SELECTED}"),
        ],
    );
    st.check(r.code == 1, "the change is an error finding (exit 1)");
    st.check(
        r.stdout.contains("MC003") && r.stdout.contains("tag-on-full-ref"),
        "rule MC003 tag-on-full-ref names the line",
    );
    st.check(
        r.stdout.contains(&format!("+          {AUTOMATION_LINE}")),
        format!("the simulated automation commit writes `image: {PODINFO_SELECTED}` (the tag the podinfo policy selects in step 3)"),
    );
    st.check(
        r.stdout.contains("MC082") && r.stdout.contains(&format!("-> {PODINFO_SELECTED},")),
        format!("kubectl kustomize of the simulated tree renders the Deployment with image {PODINFO_SELECTED}"),
    );
    st
}

// ------------------------------------------------------------------ step 3

/// podinfo-frontend's Ingress host on dev (clusters/apps/wave-2, CLUSTER_DOMAIN of dev).
const FRONTEND_HOST: &str = "podinfo.dev.example.local";
/// clusters/dev/cluster-vars.yaml GATEWAY_VIP.
const GATEWAY_VIP: &str = "172.18.255.200";

fn cond_is(o: &Value, t: &str, status: &str) -> bool {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|c| c["type"] == t && c["status"] == status))
}

// ------------------------------------------------------------------ step 4

/// The Git host of the catalogue's split-DNS case (failure catalogue 3): the cluster's CoreDNS
/// pins it to the gateway VIP [`PIN`], the upstream resolver answers [`UPSTREAM`].
const GIT_HOST: &str = "gitea.prod.example.dev";
/// The gateway VIP the cluster's CoreDNS `hosts` block pins [`GIT_HOST`] to.
const PIN: &str = "192.168.2.20";
/// What the node's upstream resolver answers for [`GIT_HOST`] (the public address).
const UPSTREAM: &str = "203.0.113.10";

/// The real cluster, or why it is not there (each cluster step fails with the reason).
type Real = Result<Arc<realcluster::Cluster>, String>;

/// The real cluster of a step, or a failed check naming why it is missing.
fn real_cluster<'a>(real: &'a Real, st: &mut Step) -> Option<&'a realcluster::Cluster> {
    match real {
        Ok(c) => Some(c),
        Err(e) => {
            st.check(false, format!("start the real cluster: {e}"));
            None
        }
    }
}

/// Step 3 on the real cluster: kubeadm's `kube-system/coredns` Corefile with a `hosts` pin
/// (what operators add for split-horizon names), the node's upstream answering the public
/// address; the probe pod really runs (the node agent's pod runtime: BusyBox in a network
/// namespace whose resolver is built from that ConfigMap and the real kube-dns Service).
fn step_podresolve(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(
        "podresolve: the Git host from the pod network, not the workstation (real cluster)",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let missing = twin::podexec::missing_prerequisites();
    if !missing.is_empty() {
        st.check(
            false,
            format!(
                "the real cluster's node runs probe pods (needs {}: scripts/setup-machine installs them; run as root)",
                missing.join(", ")
            ),
        );
        return st;
    }
    let dns = c
        .set_corefile_hosts(&format!("{PIN} {GIT_HOST}"))
        .and_then(|()| c.set_upstream(GIT_HOST, &[UPSTREAM]));
    if let Err(e) = dns {
        st.check(false, format!("set up the cluster DNS: {e}"));
        return st;
    }
    let kc = c.kubeconfig().to_path_buf();
    ctx.kubectl(
        Some(&kc),
        &[
            "get",
            "configmap",
            "coredns",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.data.Corefile}",
        ],
    );
    let r = ctx.kubectl(
        Some(&kc),
        &["podresolve", GIT_HOST, "--expect", PIN, "-n", "flux-system"],
    );
    st.check(
        r.code == 0,
        format!("the pod resolves the Git host to the gateway VIP {PIN} (--expect passed)"),
    );
    st.check(
        r.stdout.contains("hosts"),
        "the answer comes from the CoreDNS hosts pin (plugin named)",
    );
    st.check(
        r.stdout.to_lowercase().contains("workstation"),
        "the workstation's own answer is shown beside the pod's",
    );
    let j = ctx.kubectl(
        Some(&kc),
        &[
            "podresolve",
            GIT_HOST,
            "--expect",
            UPSTREAM,
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    );
    st.check(
        j.code == 1,
        format!("--expect {UPSTREAM} (the upstream's answer) is a failed check (exit 1)"),
    );
    let f = ctx.kubectl(
        Some(&kc),
        &[
            "podresolve",
            GIT_HOST,
            "--from",
            "deploy/source-controller",
            "-n",
            "flux-system",
            "--expect",
            PIN,
        ],
    );
    st.check(
        f.code == 0,
        format!(
            "from inside the real source-controller's pod (--from deploy/source-controller, an ephemeral container): {PIN}"
        ),
    );
    st
}

// ------------------------------------------------------------------ step 5

/// The namespace of the cutover step's prod fleet (its GitRepository and root Kustomization
/// are both `flux-system`, as after a bootstrap; the namespace keeps them apart from the
/// unstick step's fleet in flux-system).
const CUTOVER_NS: &str = "prod";

/// The podinfo image apps-wave-1 of the cutover fleet runs (tests/twin/scenarios/repos/fleet).
const CUTOVER_IMAGE: &str = "localhost:5000/podinfo:6.5.0";

/// `kubectl ARGS` quietly (setup and waits; `ARGS` end in `-o json`): what it prints, parsed,
/// `Null` on any error. The `get` forms are answered in process over the cluster's client
/// (`realcluster::Cluster::get_json`: the same JSON, no kubectl process per poll).
fn kget(c: &realcluster::Cluster, args: &[&str]) -> Value {
    let args = args.strip_suffix(&["-o", "json"]).unwrap_or(args);
    c.get_json(args)
}

/// `flux reconcile source git NAME`: the requestedAt annotation the source-controller acts on
/// at once (fluxcd/pkg apis/meta ReconcileRequestAnnotation), instead of its next interval.
fn request_reconcile(c: &realcluster::Cluster, ns: &str, kind: &str, name: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let _ = c.kubectl(&[
        "annotate",
        "--overwrite",
        "-n",
        ns,
        kind,
        name,
        &format!("reconcile.fluxcd.io/requestedAt={now}"),
    ]);
}

/// Step 4 on the real cluster (the twin's prod-cutover-start scenario, rebuilt): prod
/// reconciles from a Git server on an operator's laptop (HTTPS, its own CA, basic auth); prod's
/// own server holds the same repository one commit behind. The root Kustomization renders the
/// GitRepository itself. The real source- and kustomize-controller run as host processes, so
/// the servers listen on 127.0.0.1 and the cutover needs `--allow-loopback`.
/// The cutover step's title.
const CUTOVER_STEP: &str =
    "cutover: moving the Git source without rolling prod back (real cluster)";

fn step_cutover(ctx: &Ctx, real: &Real, keep: &mut Vec<twin::git::GitServer>) -> Step {
    let mut st = Step::new(CUTOVER_STEP);
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let servers = twin::git::GitServer::start(Default::default())
        .and_then(|l| Ok((l, twin::git::GitServer::start(Default::default())?)));
    let (laptop, prod) = match servers {
        Ok(s) => s,
        Err(e) => {
            st.check(false, format!("start the Git servers: {e}"));
            return st;
        }
    };
    const REPO: &str = "org/fleet";
    let laptop_url = laptop.url_https(REPO);
    let to = prod.url_https(REPO);
    let flux_system = format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: {CUTOVER_NS}\nspec:\n  interval: 1m\n  url: {laptop_url}\n  ref:\n    branch: main\n  secretRef:\n    name: flux-system\n"
    );
    let setup = (|| -> Result<String, String> {
        let e = |e: twin::git::GitError| e.to_string();
        for (srv, token) in [(&laptop, "laptop-token"), (&prod, "prod-token")] {
            srv.create_repo(REPO, "main").map_err(e)?;
            srv.set_auth(REPO, "flux", &[token]).map_err(e)?;
        }
        let first = laptop
            .commit(
                REPO,
                &[
                    twin::git::Change::copy_dir(
                        ctx.repo_root.join("tests/twin/scenarios/repos/fleet"),
                        "",
                    ),
                    twin::git::Change::write(
                        "clusters/prod/kustomization.yaml",
                        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - flux-system.yaml\n",
                    ),
                    twin::git::Change::write("clusters/prod/flux-system.yaml", flux_system.clone()),
                ],
                "initial fleet",
            )
            .map_err(e)?;
        // prod's server has the first commit only.
        let fetched = Command::new("git")
            .arg("--git-dir")
            .arg(prod.repo_path(REPO))
            .args(["fetch", "--quiet"])
            .arg(laptop.repo_path(REPO))
            .arg("refs/heads/main:refs/heads/laptop-main")
            .status()
            .is_ok_and(|s| s.success());
        if !fetched {
            return Err("git fetch into prod's server failed".into());
        }
        prod.set_branch(REPO, "main", &first).map_err(e)?;
        let head = laptop
            .commit(
                REPO,
                &[twin::git::Change::write(
                    "apps/wave-1/NOTES.md",
                    "prod rollout\n",
                )],
                "apps: podinfo 6.5.0 in prod",
            )
            .map_err(e)?;
        let secret = |name: &str, token: &str, ca: &str| {
            json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": name, "namespace": CUTOVER_NS},
                "type": "Opaque",
                "stringData": {"username": "flux", "password": token, "ca.crt": ca}})
            .to_string()
        };
        let objects = [
            format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {CUTOVER_NS}}}\n"),
            secret("flux-system", "laptop-token", laptop.ca_pem()),
            secret("prod-creds", "prod-token", prod.ca_pem()),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cluster-vars, namespace: {CUTOVER_NS}}}\ndata: {{cluster_name: prod}}\n"
            ),
            flux_system.clone(),
            format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: flux-system, namespace: {CUTOVER_NS}}}\nspec:\n  interval: 10m\n  path: ./clusters/prod\n  prune: true\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n"
            ),
            format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: apps-wave-1, namespace: {CUTOVER_NS}}}\nspec:\n  interval: 10m\n  timeout: 2m\n  path: ./apps/wave-1\n  prune: true\n  wait: true\n  dependsOn: [{{name: flux-system}}]\n  sourceRef: {{kind: GitRepository, name: flux-system}}\n  postBuild:\n    substituteFrom: [{{kind: ConfigMap, name: cluster-vars}}]\n"
            ),
        ];
        for o in &objects {
            c.apply_yaml(o).map_err(|e| e.to_string())?;
        }
        Ok(head)
    })();
    let head = match setup {
        Ok(h) => h,
        Err(e) => {
            st.check(false, format!("set up prod's fleet: {e}"));
            return st;
        }
    };
    let want = format!("main@sha1:{head}");
    let (laptop, prod) = {
        // Both servers live as long as the real cluster (--keep: its GitRepository keeps
        // fetching from prod's server).
        keep.push(laptop);
        keep.push(prod);
        (&keep[keep.len() - 2], &keep[keep.len() - 1])
    };
    let ks_at = |name: &str, rev: &str| {
        let k = kget(c, &["get", "ks", name, "-n", CUTOVER_NS, "-o", "json"]);
        cond_is(&k, "Ready", "True") && s(&k, "/status/lastAppliedRevision") == rev
    };
    let running = poll(T, || {
        ks_at("flux-system", &want) && ks_at("apps-wave-1", &want)
    });
    st.check(
        running,
        format!(
            "prod runs {} from the laptop's Git server (the real controllers applied it; apps-wave-1's podinfo is Ready)",
            &head[..7]
        ),
    );
    ctx.kubectl(Some(&kc), &["get", "gitrepository,ks", "-n", CUTOVER_NS]);
    let base = [
        "cutover",
        "gitrepository/flux-system",
        "-n",
        CUTOVER_NS,
        "--to",
        to.as_str(),
        "--secret",
        "prod-creds",
        "--allow-loopback",
    ];
    let mut args = base.to_vec();
    args.push("--dry-run");
    let r = ctx.kubectl(Some(&kc), &args);
    st.check(
        r.code == 1
            && r.stdout
                .contains("the new server's main is 1 commit behind what the cluster runs; cutting over would roll back to"),
        "a new server whose main is behind is refused, with the commit count and the rollback target",
    );
    // Bring the new server level (the operator's step 2).
    let level = Command::new("git")
        .arg("--git-dir")
        .arg(prod.repo_path(REPO))
        .args(["fetch", "--quiet"])
        .arg(laptop.repo_path(REPO))
        .arg("refs/heads/main:refs/heads/laptop-main")
        .status()
        .is_ok_and(|s| s.success())
        && prod.set_branch(REPO, "main", &head).is_ok();
    st.check(
        level,
        "the new server's main now points at the commit prod runs",
    );
    let mut args = base.to_vec();
    args.extend(["--yes", "--hold-root", "--timeout", "60s"]);
    let r = ctx.kubectl(Some(&kc), &args);
    st.check(
        r.code == 0
            && r.stdout
                .contains(&format!("cut over: Ready=True at {want}")),
        "cut over at the same revision: Ready=True, observedGeneration == generation",
    );
    st.check(
        r.stdout.contains("clusters/prod/flux-system.yaml:8")
            && r.stdout.contains(&format!("+  url: {to}")),
        "the authored value (clusters/prod/flux-system.yaml:8) and its exact change are shown",
    );
    // Land the authored change through the window.
    let text = String::from_utf8(
        prod.read_file(REPO, "main", "clusters/prod/flux-system.yaml")
            .unwrap_or_default(),
    )
    .unwrap_or_default()
    .replace(&laptop_url, &to)
    .replace(
        "secretRef:\n    name: flux-system",
        "secretRef:\n    name: prod-creds",
    );
    let landed = match prod.commit(
        REPO,
        &[twin::git::Change::write(
            "clusters/prod/flux-system.yaml",
            text,
        )],
        "flux-system: move the source to the prod Git server",
    ) {
        Ok(l) => l,
        Err(e) => {
            st.check(false, format!("commit the authored change: {e}"));
            return st;
        }
    };
    say!(
        "\n  landed the authored change {} on the new server; `flux reconcile source git flux-system` (the requestedAt annotation)",
        &landed[..7]
    );
    request_reconcile(c, CUTOVER_NS, "gitrepository", "flux-system");
    let lw = format!("main@sha1:{landed}");
    let root_applied = poll(T, || ks_at("flux-system", &lw));
    st.check(
        root_applied,
        "the root Kustomization applied the authored change",
    );
    let f = ctx.kubectl(
        Some(&kc),
        &[
            "cutover",
            "gitrepository/flux-system",
            "-n",
            CUTOVER_NS,
            "--finish",
        ],
    );
    st.check(
        f.code == 0 && f.stdout.contains("verified"),
        "--finish: the committed and live spec.url agree; the hold is removed",
    );
    let args = real_cutover_keep(prod);
    let args: Vec<&str> = args.split(' ').skip(1).collect();
    let d = ctx.kubectl(Some(&kc), &args);
    st.check(
        d.code == 0,
        "the cutover preflight `./demo --keep` prints (same server under another name) runs whole (exit 0)",
    );
    st
}

/// The cutover command `./demo --keep` prints for the real cluster: the preflight to prod's
/// server under another name (`localhost`, in its certificate), proved by the cutover step.
fn real_cutover_keep(prod: &twin::git::GitServer) -> String {
    format!(
        "kubectl cutover gitrepository/flux-system -n {CUTOVER_NS} --to {} --secret prod-creds --dry-run --allow-loopback",
        prod.url_https("org/fleet")
            .replacen("127.0.0.1", "localhost", 1)
    )
}

// ------------------------------------------------------------------ step 2

/// apps-wave-2's postBuild in clusters/base/apps.yaml (the last Kustomization of the file).
const WAVE2_POSTBUILD: &str =
    "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-vars\n";

fn step_fleetlint(ctx: &Ctx) -> Step {
    let mut st = Step::new("fleetlint: a ${VAR} in a path without substituteFrom, caught offline");
    let fleet = ctx.fleet_copy("fleetlint");
    let clusters = fleet.join("clusters");
    let c = clusters.display().to_string();
    let dev = clusters.join("dev").display().to_string();
    let prod = clusters.join("prod").display().to_string();
    let clean = ctx.kubectl(None, &["fleetlint", &c, "--overlay", &dev, "--no-cache"]);
    st.check(
        clean.code == 0 && clean.stdout.is_empty(),
        "clusters/dev as committed lints clean (exit 0, no findings)",
    );
    let p = ctx.kubectl(
        None,
        &[
            "fleetlint",
            &c,
            "--overlay",
            &prod,
            "--no-cache",
            "--format",
            "github",
        ],
    );
    let annotations: Vec<&str> = p.stdout.lines().collect();
    st.check(
        p.code == 1
            && annotations.len() == 1
            && annotations[0].starts_with(
                "::error file=clusters/prod/cluster-vars.yaml,line=13,title=FL040 placeholder::placeholder TBD-PROD-GATEWAY-VIP ",
            ),
        "clusters/prod reports exactly its TBD-PROD-GATEWAY-VIP placeholder (FL040, one annotation)",
    );
    let apps = fleet.join("clusters/base/apps.yaml");
    let text = std::fs::read_to_string(&apps).unwrap();
    let Some(at) = text.rfind(WAVE2_POSTBUILD) else {
        st.check(false, "clusters/base/apps.yaml has apps-wave-2's postBuild");
        return st;
    };
    let seeded = format!("{}{}", &text[..at], &text[at + WAVE2_POSTBUILD.len()..]);
    std::fs::write(&apps, &seeded).unwrap();
    say!(
        "\n  (the change under review: apps-wave-2 in clusters/base/apps.yaml loses its postBuild.substituteFrom)"
    );
    let r = ctx.kubectl(None, &["fleetlint", &c, "--overlay", &dev, "--no-cache"]);
    // the literal ships exactly as written: a warning (severity follows certainty), still
    // named where each ${VAR} is written
    st.check(
        r.code == 0 && r.stdout.contains("warning"),
        "the change is a warning finding (exit 0: what ships is what the author wrote)",
    );
    st.check(
        r.stdout.contains("FL030")
            && r.stdout
                .contains("clusters/apps/wave-2/podinfo-frontend.yaml")
            && [
                "${PODINFO_REPLICAS}",
                "${LOG_LEVEL}",
                "${CLUSTER_NAME}",
                "${CLUSTER_DOMAIN}",
            ]
            .iter()
            .all(|v| r.stdout.contains(v)),
        "FL030 names each ${VAR} of podinfo-frontend.yaml that would ship literally",
    );
    let e = ctx.kubectl(None, &["fleetlint", "--explain", "FL030"]);
    st.check(
        e.code == 0 && e.stdout.contains("Fix: add postBuild.substituteFrom"),
        "--explain FL030 gives the story and the fix",
    );
    std::fs::write(&apps, &text).unwrap();
    say!("\n  (the fix: postBuild.substituteFrom restored)");
    let fixed = ctx.kubectl(None, &["fleetlint", &c, "--overlay", &dev, "--no-cache"]);
    st.check(
        fixed.code == 0 && fixed.stdout.is_empty(),
        "with the fix clusters/dev lints clean again (exit 0)",
    );
    st
}

// ------------------------------------------------------------------ main

/// The suite's plugins (`kubectl-<name>`).
/// The real-cluster step's Kustomization (flux-system) and namespace.
const REAL_KS: &str = "payments";
/// The migration image the fleet pins first: the registry has no such tag.
const REAL_BAD: &str = "registry.example.local:5000/payments-migrate:1.4.0";
/// The tag that exists.
const REAL_GOOD: &str = "registry.example.local:5000/payments-migrate:1.4.1";

fn real_job(image: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  namespace: {REAL_KS}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: migrate\n        image: {image}\n"
    )
}

/// Step 6: the catalogue's Job case on a real cluster (tests/realcluster: real kube-apiserver,
/// kube-controller-manager, source- and kustomize-controller; our node agent). A Job whose
/// image tag does not exist holds kustomize-controller's health check (its Job reader:
/// InProgress until Complete); unstick names the Job and the pull error; after the fix is
/// pushed, the lever that works on this controller (gate off: restart it, source fetched
/// first) proves Ready at the fix revision. With --keep the cluster stays up.
fn step_realcluster(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(
        "realcluster: a Job that cannot pull, held by the real kustomize-controller, freed with proof",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let v = ctx.kubectl(Some(&kc), &["get", "--raw", "/version"]);
    st.check(
        v.stdout.contains(&format!(
            "\"gitVersion\": \"{}\"",
            realcluster::bins::KUBE_VERSION
        )),
        format!(
            "/version is the real release {}",
            realcluster::bins::KUBE_VERSION
        ),
    );
    let r = ctx.kubectl(Some(&kc), &["get", "--raw", "/readyz?verbose"]);
    st.check(r.stdout.contains("[+]etcd ok"), "/readyz checks etcd");
    let procs = c.host_processes();
    st.check(
        ["source-controller", "kustomize-controller"]
            .iter()
            .all(|n| procs.iter().any(|(k, _)| k.contains(n))),
        format!("the Flux controllers run as real processes: {procs:?}"),
    );
    let ns = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {REAL_KS}\n");
    if let Err(e) = c.fleet(
        REAL_KS,
        &[("ns.yaml", &ns), ("job.yaml", &real_job(REAL_BAD))],
        "  interval: 10m\n  path: ./\n  prune: true\n  force: true\n  wait: true\n  timeout: 5m\n",
    ) {
        st.check(false, format!("push the fleet: {e}"));
        return st;
    }
    let held = poll(T, || {
        let o = realcluster::kubectl(
            &kc,
            &["get", "ks", REAL_KS, "-n", "flux-system", "-o", "json"],
        )
        .unwrap_or_default();
        o.contains("Running health checks") && {
            let p = realcluster::kubectl(&kc, &["get", "pods", "-n", REAL_KS, "-o", "json"])
                .unwrap_or_default();
            p.contains("ErrImagePull") || p.contains("ImagePullBackOff")
        }
    });
    st.check(
        held,
        "kustomize-controller holds its health check on the Job whose pod cannot pull",
    );
    let d = ctx.kubectl(
        Some(&kc),
        &["unstick", &format!("ks/{REAL_KS}"), "--dry-run"],
    );
    st.check(
        d.stdout.contains(&format!("Job/{REAL_KS}/migrate"))
            && (d.stdout.contains("ErrImagePull") || d.stdout.contains("ImagePullBackOff")),
        "unstick names the Job and its pod's pull error",
    );
    let source = format!("gitrepository/{REAL_KS}");
    let v = ctx.kubectl(Some(&kc), &["gitops", "verify", "--source", &source]);
    st.check(
        v.code == 1
            && v.stdout.contains("workloads <- first broken")
            && (v.stdout.contains("ErrImagePull") || v.stdout.contains("ImagePullBackOff")),
        "gitops verify names the workloads link broken (the Job's pod cannot pull) while the held check waits, exit 1",
    );
    match c.push(
        REAL_KS,
        &[("job.yaml", &real_job(REAL_GOOD))],
        "payments: migrate 1.4.1",
    ) {
        Ok(sha) => {
            let u = ctx.kubectl(
                Some(&kc),
                &[
                    "unstick",
                    &format!("ks/{REAL_KS}"),
                    "--yes",
                    "--with-source",
                    "--restart-controller",
                ],
            );
            st.check(
                u.code == 0 && u.stdout.contains("recovered"),
                format!("after the fix (main@sha1:{}), restart-controller frees the held check and proves Ready at the fix", &sha[..12]),
            );
            // The demo ends with the whole loop proven from the cluster: source at the
            // remote's head, the Kustomization Ready at it, the Job Complete.
            check_chain_holds(ctx, &kc, &source, &sha, &mut st);
        }
        Err(e) => {
            st.check(false, format!("push the fix: {e}"));
        }
    }
    st
}

/// The demo's Gateway API objects (step 7): Envoy Gateway's class, a Gateway `eg` in `infra`
/// for the fleet's hostnames, and an HTTPRoute `podinfo` in `apps` to the fleet's
/// podinfo-frontend Service (clusters/apps/wave-2): the objects `kubectl gatewaycheck --help`'s
/// examples name. Applied here, not in clusters/: every cluster that runs the fleet would need
/// the Gateway API CRDs.
const GATEWAY_OBJECTS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: eg}
spec: {controllerName: gateway.envoyproxy.io/gatewayclass-controller}
---
apiVersion: v1
kind: Namespace
metadata: {name: infra}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: eg, namespace: infra}
spec:
  gatewayClassName: eg
  listeners:
  - name: http
    protocol: HTTP
    port: 80
    hostname: '*.dev.example.local'
    allowedRoutes: {namespaces: {from: All}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: podinfo, namespace: apps}
spec:
  parentRefs: [{name: eg, namespace: infra}]
  hostnames: [podinfo.dev.example.local]
  rules:
  - backendRefs: [{name: podinfo-frontend, port: 9898}]
";

/// The example commands of `kubectl gatewaycheck --help` (lines `  kubectl gatewaycheck ...`
/// after `Examples:`), as argv after `kubectl`.
fn help_examples(help: &str) -> Vec<Vec<String>> {
    help.lines()
        .skip_while(|l| !l.starts_with("Examples:"))
        .take_while(|l| !l.starts_with("Exit codes:"))
        .filter_map(|l| l.trim().strip_prefix("kubectl "))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Step 7 on the real cluster: the real Envoy Gateway v1.9.1 (its controller; the Envoy data
/// plane, a C++ binary, cannot run here, so its pods stay in ImagePullBackOff) and the real
/// MetalLB write every status; `kubectl gatewaycheck --help`'s examples run as written, and each
/// verdict is checked against what the cluster holds.
fn step_gatewaycheck(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(
        "gatewaycheck: is the Gateway really serving? Envoy Gateway's status against what is behind it (real cluster)",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    if kget(c, &["get", "namespace", "apps"]).is_null() {
        let _ = c.kubectl(&["create", "namespace", "apps"]);
    }
    if let Err(e) = metallb_pool(c).and_then(|()| {
        c.apply_yaml(GATEWAY_OBJECTS)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }) {
        st.check(false, format!("apply the Gateway API objects: {e}"));
        return st;
    }
    say!(
        "  applied GatewayClass eg (Envoy Gateway's controllerName), Gateway infra/eg (HTTP *.dev.example.local) and HTTPRoute apps/podinfo -> podinfo-frontend:9898"
    );
    let gw = || kget(c, &["get", "gateway", "eg", "-n", "infra"]);
    let accepted = poll(T, || cond_is(&gw(), "Accepted", "True"));
    st.check(
        accepted,
        "the real Envoy Gateway accepts Gateway infra/eg (status written by it)",
    );
    let addressed = poll(T, || {
        let g = gw();
        g.pointer("/status/addresses/0/value").is_some()
            && g.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter()
                        .any(|x| x["type"] == "Programmed" && x["reason"] == "NoResources")
                })
    });
    let g = gw();
    let address = s(&g, "/status/addresses/0/value").to_string();
    st.check(
        addressed,
        format!(
            "the real MetalLB gave Envoy Gateway's LoadBalancer Service {address} from the demo pool, and Envoy Gateway says Programmed=False NoResources (its envoy pods cannot pull here)"
        ),
    );
    if !addressed {
        ctx.kubectl(Some(&kc), &["get", "gateway,svc,pods", "-A"]);
        return st;
    }
    ctx.kubectl(Some(&kc), &["get", "gateway", "-A"]);
    // Every example of --help, as written (completion install writes to the user's shell
    // setup: not run here).
    let help = ctx.kubectl(Some(&kc), &["gatewaycheck", "--help"]);
    let examples: Vec<Vec<String>> = help_examples(&help.stdout)
        .into_iter()
        .filter(|a| !a.iter().any(|w| w == "completion"))
        .collect();
    st.check(
        examples.len() >= 6,
        format!(
            "kubectl gatewaycheck --help lists {} examples to run against this cluster",
            examples.len()
        ),
    );
    // A true pull reason names the envoy image (the real state of the data plane here).
    let pull = |t: &str| t.contains("ErrImagePull") || t.contains("ImagePullBackOff");
    for argv in &examples {
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        let o = ctx.kubectl(Some(&kc), &args);
        let line = args.join(" ");
        st.check(
            o.code == 0 || o.code == 1,
            format!(
                "`kubectl {line}` runs as written (exit {}: 0 ok, 1 findings)",
                o.code
            ),
        );
        let has = |w: &str| argv.iter().any(|a| a == w);
        if has("-o") {
            let doc: Value = serde_json::from_str(&o.stdout).unwrap_or(Value::Null);
            let objs = doc["objects"].as_array().cloned().unwrap_or_default();
            let find = |kind: &str, ns: &str, name: &str| {
                objs.iter()
                    .find(|x| x["kind"] == kind && x["namespace"] == ns && x["name"] == name)
                    .cloned()
                    .unwrap_or(Value::Null)
            };
            let gw_rep = find("Gateway", "infra", "eg");
            let rules = |o: &Value, level: &str| -> Vec<String> {
                o["findings"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|f| f["level"] == level)
                    .map(|f| format!("{} {}", s(f, "/rule"), s(f, "/message")))
                    .collect()
            };
            let gw_findings = rules(&gw_rep, "finding");
            st.check(
                doc["kind"] == "GatewayCheckReport"
                    && o.code == 1
                    && gw_rep["verdict"] == "findings"
                    && gw_findings
                        .iter()
                        .any(|f| f.starts_with("dataPlane 0/1 data-plane pods ready") && pull(f) && f.contains("envoyproxy/envoy"))
                    && gw_findings.iter().any(|f| f.starts_with("programmed Programmed=False (NoResources")),
                format!(
                    "-o json: GatewayCheckReport; Gateway infra/eg has findings: the data plane 0/1 ready with the pod's pull reason naming the envoy image, Programmed=False NoResources ({} findings), exit 1",
                    gw_findings.len()
                ),
            );
            let pooled = rules(&gw_rep, "ok")
                .iter()
                .any(|f| f.starts_with(&format!("pool {address} lies in IPAddressPool/demo")));
            st.check(
                pooled,
                format!("and its address {address} lies in the MetalLB pool (ok)"),
            );
            let svc_exists =
                !kget(c, &["get", "service", "podinfo-frontend", "-n", "apps"]).is_null();
            let route = find("HTTPRoute", "apps", "podinfo");
            let backend_finding = rules(&route, "finding")
                .iter()
                .any(|f| f.contains("BackendNotFound"));
            st.check(
                !route.is_null() && backend_finding != svc_exists,
                format!(
                    "HTTPRoute apps/podinfo: {} (podinfo-frontend {})",
                    if backend_finding {
                        "its backend is not found"
                    } else {
                        "Envoy Gateway resolved its backend"
                    },
                    if svc_exists {
                        "exists"
                    } else {
                        "does not exist: run the unstick step first"
                    }
                ),
            );
        } else if has("--vip") {
            let vip = argv
                .iter()
                .skip_while(|a| *a != "--vip")
                .nth(1)
                .cloned()
                .unwrap_or_default();
            let differs = vip != address;
            st.check(
                o.code == 1
                    && (o
                        .stdout
                        .contains(&format!("--vip {vip} is not the Gateway's"))
                        == differs),
                format!(
                    "--vip {vip}: {} the Gateway's address {address}",
                    if differs {
                        "a finding, it is not"
                    } else {
                        "ok, it is"
                    }
                ),
            );
        } else if has("--probe") {
            st.check(
                o.code == 1 && o.stdout.contains("no answer") && o.stdout.contains("FINDING"),
                format!(
                    "--probe: a request from a probe pod to {address} gets no answer (no envoy runs, no speaker announces the address): a finding, never `serving`"
                ),
            );
            // After step 3 the upstream answers the host with GATEWAY_VIP (the nginx gateway's
            // Service holds it): pods resolve it elsewhere than this Gateway's address.
            let upstream_set = !kget(
                c,
                &["get", "gitrepository", "flux-system", "-n", "flux-system"],
            )
            .is_null();
            if upstream_set {
                let dns_finding = o
                    .stdout
                    .lines()
                    .any(|l| l.contains("FINDING") && l.contains(" dns "));
                st.check(
                    dns_finding == (address != GATEWAY_VIP),
                    format!(
                        "--probe dns: {FRONTEND_HOST} resolves from a pod to {GATEWAY_VIP}, the Gateway holds {address}: {}",
                        if dns_finding { "the split-horizon finding" } else { "ok" }
                    ),
                );
            }
            let jobs = kget(c, &["get", "jobs", "-n", "infra"]);
            st.check(
                jobs["items"].as_array().is_none_or(Vec::is_empty),
                "and the probe Job is gone",
            );
        } else if has("httproute/podinfo") {
            st.check(
                o.stdout.contains("HTTPRoute apps/podinfo:"),
                "httproute/podinfo: the route's status.parents against its parentRefs",
            );
        } else {
            st.check(
                o.code == 1
                    && o.stdout.contains("Gateway infra/eg: findings")
                    && o.stdout.contains("dataPlane"),
                format!("`kubectl {line}`: Gateway infra/eg has findings (dataPlane), exit 1"),
            );
        }
    }
    // Links 5-7 of `kubectl gitops verify` on the fleet of step 3 (when it ran), for the route's
    // host: DNS from a pod against this Gateway's address, gatewaycheck's verdict, a request.
    let fleet = !kget(
        c,
        &["get", "gitrepository", "flux-system", "-n", "flux-system"],
    )
    .is_null();
    if fleet && twin::podexec::missing_prerequisites().is_empty() {
        let v = ctx.kubectl(
            Some(&kc),
            &[
                "gitops",
                "verify",
                FRONTEND_HOST,
                "--source",
                "gitrepository/flux-system",
                "-o",
                "json",
            ],
        );
        let doc: Value = serde_json::from_str(&v.stdout).unwrap_or(Value::Null);
        let verdict = |id: &str| {
            doc["links"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|l| l["id"] == id)
                .map(|l| s(l, "/verdict").to_string())
                .unwrap_or_default()
        };
        // Step 3 made the upstream answer GATEWAY_VIP for the host (the nginx gateway's
        // Service holds it); MetalLB gave Envoy Gateway's Service the next free address.
        let dns_broken = address != GATEWAY_VIP;
        st.check(
            v.code == 1
                && (verdict("dns") == "broken") == dns_broken
                && verdict("gateway") == "broken"
                && verdict("http") == "broken"
                && doc["firstBroken"].as_str().is_some(),
            format!(
                "gitops verify {FRONTEND_HOST}: dns {} ({FRONTEND_HOST} resolves to {GATEWAY_VIP} from pods, the Gateway holds {address}), gateway broken (no envoy ready), http broken (no answer), first broken: {}, exit 1",
                verdict("dns"),
                s(&doc, "/firstBroken")
            ),
        );
    }
    st
}

/// What the fleet repository of the unstick step is called on the real cluster's Git server.
const FLEET_REPO: &str = "org/fleet";

/// The ready break/fix commands `./demo --keep` prints for the real fleet, each a clone of
/// the fleet from the real cluster's Git server, a commit and a push. Break: the `:tag` marker
/// on podinfo-backend's image: line, then `flux reconcile image update fleet` (the requestedAt
/// annotation), a wait (60 s at most) until the real image-automation-controller has pushed its
/// commit (the branch head moves), then `flux reconcile source git flux-system`'s annotation
/// (else the source fetches at its next 1m interval). Fix: the plain marker and the full image
/// reference back, then the source's annotation.
fn real_keep_commands(url: &str) -> (String, String) {
    let annotate = |kind: &str| {
        format!(
            "kubectl annotate --overwrite {kind} -n flux-system reconcile.fluxcd.io/requestedAt=\"$(date +%s%N)\""
        )
    };
    let push = |from: &str, to: &str, message: &str| {
        format!(
            "d=$(mktemp -d) && git clone -q {url} \"$d\" && sed -i 's|{from}|{to}|' \"$d/{BACKEND}\" \
             && git -C \"$d\" -c user.name=demo -c user.email=demo@example.invalid commit -qam '{message}' \
             && git -C \"$d\" push -q"
        )
    };
    let source = annotate("gitrepository/flux-system");
    (
        format!(
            "{} && h=$(git -C \"$d\" rev-parse HEAD) && {} \
             && for i in $(seq 60); do [ \"$(git ls-remote {url} refs/heads/main | cut -f1)\" != \"$h\" ] && break; sleep 1; done \
             && [ \"$(git ls-remote {url} refs/heads/main | cut -f1)\" != \"$h\" ] && {source}",
            push(
                GOOD_LINE,
                TAG_MARKER_LINE,
                "podinfo-backend: track the policy tag (:tag marker)"
            ),
            annotate("imageupdateautomation/fleet"),
        ),
        format!(
            "{} && {source}",
            push(
                AUTOMATION_LINE,
                GOOD_LINE,
                "fix: full image reference for podinfo-backend",
            )
        ),
    )
}

/// The real MetalLB controller (v0.15.2, `ClusterOptions::metallb`) assigns the gateway's
/// LoadBalancer Service its `spec.loadBalancerIP` (GATEWAY_VIP) from this pool, as on a kind or
/// bare-metal cluster with MetalLB (metallb.io "IPAddressPool"; the failure catalogue: the VIP
/// must lie inside the pool). The range is the one kind's MetalLB guide uses on its docker
/// network, which clusters/dev's GATEWAY_VIP lies in. No speaker runs: nothing announces it.
fn metallb_pool(c: &realcluster::Cluster) -> Result<(), String> {
    c.apply_yaml(&format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {{name: demo, namespace: {}}}\nspec:\n  addresses: [172.18.255.200-172.18.255.250]\n",
        realcluster::gateway::METALLB_NS
    ))
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// The tags the demo's registry holds for the fleet's ImagePolicies
/// (clusters/platform/image-automation): per repository, the tags pushed, and the one the
/// policy's range selects, which is the one the fleet already runs (podinfo `>=6.7.0 <7.0.0`:
/// 6.7.0, the Deployment's and the images transformer's tag; redis `~7.4`: 7.4.1), so the real
/// image-automation-controller finds nothing to commit until a marker changes. 7.0.0 and 8.0.2
/// are above the ranges, 6.6.3 and 7.2.8 below: the choice is the policy's, not the only tag.
const FLEET_TAGS: [(&str, &[&str], &str); 2] = [
    ("podinfo", &["6.6.3", "6.7.0", "7.0.0"], PODINFO_SELECTED),
    ("redis", &["7.2.8", "7.4.1", "8.0.2"], "7.4.1"),
];

/// The fleet's registry (clusters/platform/image-automation/image-repositories.yaml), served by
/// the harness's proxy in front of the real OCI registry ([`realcluster::oci_proxy`]).
const FLEET_REGISTRY: &str = "registry.example.local:5000";

/// Pushes [`FLEET_TAGS`] to the real cluster's OCI registry (`crane`), which the real
/// image-reflector-controller scans as [`FLEET_REGISTRY`] through the harness's proxy.
fn push_fleet_tags(c: &realcluster::Cluster) -> Result<(), String> {
    let oci = c
        .oci()
        .ok_or("the cluster runs no OCI registry (image_reflector_controller is off)")?;
    for (repo, tags, _) in FLEET_TAGS {
        oci.push(repo, tags).map_err(|e| e.to_string())?;
    }
    say!(
        "  pushed {} to the OCI registry the real image-reflector-controller scans as {FLEET_REGISTRY} (through the harness's HTTPS proxy)",
        FLEET_TAGS
            .iter()
            .map(|(r, t, _)| format!("{r}:{}", t.join(",")))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(())
}

/// Waits (up to [`T`]) for the real image-automation-controller's commit on top of `marked`
/// after `flux reconcile image update fleet` (the requestedAt annotation): the branch head
/// moves, the commit's subject is the fleet's message template, the automation's
/// `status.lastPushCommit` is that head, and the file holds [`AUTOMATION_LINE`], the line
/// markercheck simulated in step 1. Records the checks; the commit's SHA when it came.
fn real_automation_commit(c: &realcluster::Cluster, marked: &str, st: &mut Step) -> Option<String> {
    let git = c.git();
    request_reconcile(c, "flux-system", "imageupdateautomation", "fleet");
    let head = poll(T, || {
        git.head(FLEET_REPO, "main").is_ok_and(|h| h != marked)
    })
    .then(|| git.log(FLEET_REPO, "main").ok())
    .flatten()
    .and_then(|log| log.into_iter().next());
    let Some(head) = head else {
        st.check(
            false,
            "image-automation-controller commits the marker's value (no new commit on main)",
        );
        let _ = c
            .kubectl(&[
                "get",
                "imageupdateautomation",
                "fleet",
                "-n",
                "flux-system",
                "-o",
                "yaml",
            ])
            .map(|y| say!("{y}"));
        return None;
    };
    let file = String::from_utf8(
        git.read_file(FLEET_REPO, &head.sha, BACKEND)
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    let pushed = poll(T, || {
        let a = fleet_automation(c);
        s(&a, "/status/lastPushCommit") == head.sha
    });
    st.check(
        head.subject == "Automated image update by flux-system/fleet"
            && pushed
            && file.contains(AUTOMATION_LINE),
        format!(
            "the real image-automation-controller committed `{AUTOMATION_LINE}` ({}, \"{}\", its status.lastPushCommit): the line markercheck simulated in step 1",
            &head.sha[..7],
            head.subject
        ),
    );
    Some(head.sha)
}

/// `kubectl gitops pull` on the real image-automation-controller's commit `bad`: an
/// operator's checkout of the fleet at `marked` (the reviewed change, the commit the
/// automation built on), cloned from the server the GitRepository reads. `--dry-run` plans the
/// fast-forward and changes nothing; the pull then brings `bad` home by a fast-forward, marked
/// as ImageUpdateAutomation flux-system/fleet's, with the setter line it changed named as
/// markercheck names it (file:line, setter, old -> new), exit 0 (no warning: origin is the
/// server Flux reads, the tree holds what the policy selects, the push branch is main).
fn pull_home(
    ctx: &Ctx,
    c: &realcluster::Cluster,
    kc: &Path,
    marked: &str,
    bad: &str,
    st: &mut Step,
) {
    let dir = ctx.work.path().join("pull-checkout");
    let url = c.git().url_http(FLEET_REPO);
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(ctx.work.path())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let d = dir.to_string_lossy().into_owned();
    let cloned = git(&["clone", "-q", &url, &d]).is_some()
        && git(&["-C", &d, "reset", "-q", "--hard", marked]).is_some();
    say!(
        "\n  an operator's checkout of the fleet at {} (the reviewed change), behind the automation's commit",
        &marked[..7]
    );
    if !st.check(cloned, format!("clone {url} at {}", &marked[..7])) {
        return;
    }
    let head = || git(&["-C", &d, "rev-parse", "HEAD"]).unwrap_or_default();
    let plan = ctx.kubectl(Some(kc), &["gitops", "pull", "--repo", &d, "--dry-run"]);
    st.check(
        plan.code == 0
            && plan
                .stdout
                .contains("plan (--dry-run, nothing changed): fast-forward main")
            && head() == marked,
        "gitops pull --dry-run plans the fast-forward and changes nothing, exit 0",
    );
    let out = ctx.kubectl(
        Some(kc),
        &[
            "gitops",
            "pull",
            "gitrepository/flux-system",
            "-n",
            "flux-system",
            "--repo",
            &d,
        ],
    );
    let committed = String::from_utf8(
        c.git()
            .read_file(FLEET_REPO, bad, BACKEND)
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    let line = committed
        .lines()
        .position(|l| l.contains(AUTOMATION_LINE))
        .map_or(0, |i| i + 1);
    let named = format!(
        "{BACKEND}:{line} flux-system:podinfo:tag registry.example.local:5000/podinfo:{PODINFO_SELECTED} -> {PODINFO_SELECTED}"
    );
    st.check(
        out.code == 0
            && head() == bad
            && out.stdout.contains("flux-system/fleet")
            && out.stdout.contains(&named)
            && out.stdout.contains("pulled: fast-forward main"),
        format!(
            "gitops pull brings the automation's commit {} home (a fast-forward), marked as flux-system/fleet's, naming `{named}`, exit 0",
            &bad[..7]
        ),
    );
}

/// clusters/platform's ImageUpdateAutomation `flux-system/fleet`, as the cluster has it.
fn fleet_automation(c: &realcluster::Cluster) -> Value {
    kget(
        c,
        &[
            "get",
            "imageupdateautomation",
            "fleet",
            "-n",
            "flux-system",
            "-o",
            "json",
        ],
    )
}

/// The image objects of clusters/dev as the real controllers wrote them: each ImagePolicy's
/// `status.latestRef` is the tag of [`FLEET_TAGS`] its range selects, on the fleet's registry
/// name, written by image-reflector-controller (its field manager on the status); the
/// ImageUpdateAutomation is Ready, written by image-automation-controller after it cloned the
/// fleet from the cluster's Git server and found nothing to change.
fn check_real_image_status(ctx: &Ctx, c: &realcluster::Cluster, st: &mut Step) {
    let kc = c.kubeconfig().to_path_buf();
    ctx.kubectl(
        Some(&kc),
        &[
            "get",
            "imagerepositories,imagepolicies,imageupdateautomations",
            "-n",
            "flux-system",
        ],
    );
    let status_by = |o: &Value, manager: &str| {
        o.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .is_some_and(|m| {
                m.iter()
                    .any(|f| f["manager"] == manager && f["subresource"] == "status")
            })
    };
    for (repo, _, want) in FLEET_TAGS {
        let p = kget(
            c,
            &[
                "get",
                "imagepolicy",
                repo,
                "-n",
                "flux-system",
                "-o",
                "json",
            ],
        );
        let name = s(&p, "/status/latestRef/name");
        let tag = s(&p, "/status/latestRef/tag");
        st.check(
            name == format!("{FLEET_REGISTRY}/{repo}")
                && tag == want
                && status_by(&p, "image-reflector-controller"),
            format!(
                "ImagePolicy {repo}: the real image-reflector-controller scanned {FLEET_REGISTRY}/{repo} and wrote latestRef {name}:{tag} (want tag {want})"
            ),
        );
    }
    let a = fleet_automation(c);
    st.check(
        cond_is(&a, "Ready", "True") && status_by(&a, "image-automation-controller"),
        format!(
            "ImageUpdateAutomation fleet: Ready, written by the real image-automation-controller ({})",
            a.pointer("/status/conditions/0/message")
                .and_then(Value::as_str)
                .unwrap_or("no condition")
        ),
    );
}

/// Step 2 on the real cluster: clusters/dev (rendered with `kubectl kustomize`, the root
/// Kustomization left out: its URL is the production Git host) served by the real cluster's
/// Git server and reconciled by the real source- and kustomize-controller v1.9.6 (default
/// feature gates: CancelHealthCheckOnNewRevision off). The waves' `timeout: 15m0s` is 40s in
/// the demo's copy, so the held check ends in real time within the demo. 40s, not less: after
/// the check is seen in flight, `kubectl get`, `unstick --dry-run`, the fix's push and the
/// source's fetch of it must all happen before `unstick --yes` reads the check still running
/// (2 s at load 25 in session 6); 40s leaves room for a machine many times busier.
fn step_unstick_real(ctx: &Ctx, real: &Real, keep: &mut Option<(String, String)>) -> Step {
    let mut st = Step::new(
        "unstick: the change pushed anyway, a stuck wave freed with proof (real cluster)",
    );
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let fleet = ctx.fleet_copy("fleet-src");
    let apps = fleet.join("clusters/base/apps.yaml");
    let text = std::fs::read_to_string(&apps).unwrap_or_default();
    std::fs::write(&apps, text.replace("timeout: 15m0s", "timeout: 40s")).unwrap();
    let rendered = Command::new("kubectl")
        .arg("kustomize")
        .arg(fleet.join("clusters/dev"))
        .output();
    let docs: Vec<Value> = match rendered {
        Ok(o) if o.status.success() => {
            serde_saphyr::from_multiple(&String::from_utf8_lossy(&o.stdout)).unwrap_or_default()
        }
        _ => vec![],
    };
    if docs.is_empty() {
        st.check(false, "kubectl kustomize clusters/dev renders the fleet");
        return st;
    }
    let url = c.git().url_http(FLEET_REPO);
    let pushed = c.git().create_repo(FLEET_REPO, "main").and_then(|()| {
        c.git().commit(
            FLEET_REPO,
            &[Change::copy_dir(fleet.join("clusters"), "clusters")],
            "fleet: base, dev and prod overlays (wave timeouts 40s for the demo)",
        )
    });
    if let Err(e) = pushed {
        st.check(false, format!("push clusters/ to the Git server: {e}"));
        return st;
    }
    if let Err(e) = metallb_pool(c) {
        st.check(false, format!("MetalLB IPAddressPool: {e}"));
        return st;
    }
    if let Err(e) = push_fleet_tags(c) {
        st.check(
            false,
            format!("push the fleet's image tags to the OCI registry: {e}"),
        );
        return st;
    }
    for mut d in docs.into_iter().filter(|d| !d.is_null()) {
        let kind = s(&d, "/kind").to_string();
        let name = s(&d, "/metadata/name").to_string();
        if kind == "Kustomization" && name == "flux-system" {
            continue;
        }
        if kind == "GitRepository" {
            d["spec"]["url"] = json!(url);
            d["spec"].as_object_mut().map(|m| m.remove("secretRef"));
        }
        if let Err(e) = c.apply_yaml(&d.to_string()) {
            st.check(false, format!("apply {kind}/{name}: {e}"));
            return st;
        }
    }
    say!(
        "  clusters/dev applied to the real cluster; its GitRepository flux-system fetches {url}; the real MetalLB assigns LoadBalancer IPs from its pool"
    );
    let ks_json = |name: &str| kget(c, &["get", "ks", name, "-n", "flux-system", "-o", "json"]);
    let mut all_ready = true;
    for k in [
        "platform",
        "platform-config",
        "apps-wave-0",
        "apps-wave-1",
        "apps-wave-2",
    ] {
        all_ready = all_ready && poll(T, || cond_is(&ks_json(k), "Ready", "True"));
    }
    st.check(
        all_ready,
        "the fleet from clusters/ reconciles on the real controllers: platform -> waves 0, 1, 2 Ready",
    );
    if !all_ready {
        ctx.kubectl(Some(&kc), &["get", "ks", "-n", "flux-system"]);
        ctx.kubectl(
            Some(&kc),
            &[
                "get",
                "imagerepositories,imagepolicies,imageupdateautomations",
                "-n",
                "flux-system",
            ],
        );
        return st;
    }
    check_real_image_status(ctx, c, &mut st);
    let first = s(&ks_json("apps-wave-1"), "/status/lastAppliedRevision").to_string();
    let git = c.git();
    let text = String::from_utf8(
        git.read_file(FLEET_REPO, "main", BACKEND)
            .unwrap_or_default(),
    )
    .unwrap_or_default();
    // The change under review (step 1's), merged: the `:tag` marker on the image: line. The
    // real image-automation-controller then does what the catalogue says it does: it writes
    // the policy's tag over the whole image reference and pushes that commit.
    let marked = match git.commit(
        FLEET_REPO,
        &[Change::write(
            BACKEND,
            text.replace(GOOD_LINE, TAG_MARKER_LINE),
        )],
        "podinfo-backend: track the policy's tag (:tag marker)",
    ) {
        Ok(m) => m,
        Err(e) => {
            st.check(false, format!("push the marker change: {e}"));
            return st;
        }
    };
    say!(
        "\n  pushed the reviewed change {} (the :tag marker on podinfo-backend's image: line); `flux reconcile image update fleet`",
        &marked[..7]
    );
    let Some(bad) = real_automation_commit(c, &marked, &mut st) else {
        return st;
    };
    pull_home(ctx, c, &kc, &marked, &bad, &mut st);
    say!(
        "  image-automation-controller pushed {} (image: {PODINFO_SELECTED}); `flux reconcile source git flux-system`",
        &bad[..7]
    );
    request_reconcile(c, "flux-system", "gitrepository", "flux-system");
    let bad_rev = format!("main@sha1:{bad}");
    let in_flight = poll(T, || {
        let k = ks_json("apps-wave-1");
        k.pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|a| {
                a.iter().any(|c| {
                    c["type"] == "Reconciling"
                        && s(c, "/message")
                            .starts_with(&format!("Running health checks for revision {bad_rev}"))
                })
            })
    });
    st.check(
        in_flight,
        format!("apps-wave-1 holds its health check on the automation's revision (ImagePullBackOff on {PODINFO_SELECTED})"),
    );
    let waiting = poll(T, || {
        ks_json("apps-wave-2")
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|a| {
                a.iter()
                    .any(|c| c["type"] == "Ready" && c["reason"] == "DependencyNotReady")
            })
    });
    st.check(waiting, "apps-wave-2 waits on it (DependencyNotReady)");
    ctx.kubectl(Some(&kc), &["get", "ks", "-n", "flux-system"]);
    let d = ctx.kubectl(Some(&kc), &["unstick", "ks/apps-wave-2", "--dry-run"]);
    st.check(
        d.stdout.contains("apps-wave-1"),
        "unstick on apps-wave-2 walks dependsOn to the root cause apps-wave-1",
    );
    st.check(
        d.stdout.contains(&format!(
            "image reference `{PODINFO_SELECTED}` is a bare tag"
        )) && d.stdout.contains("markercheck"),
        format!("and names the bare-tag image {PODINFO_SELECTED} with the markercheck hint"),
    );
    // The fix, committed while the health check is still in flight.
    let fixed = match git.commit(
        FLEET_REPO,
        &[Change::write(BACKEND, text.clone())],
        "fix: full image reference for podinfo-backend",
    ) {
        Ok(f) => f,
        Err(e) => {
            st.check(false, format!("push the fix: {e}"));
            return st;
        }
    };
    say!(
        "\n  pushed the fix {}; `flux reconcile source git flux-system`",
        &fixed[..7]
    );
    request_reconcile(c, "flux-system", "gitrepository", "flux-system");
    let fix_rev = format!("main@sha1:{fixed}");
    let src = || {
        kget(
            c,
            &[
                "get",
                "gitrepository",
                "flux-system",
                "-n",
                "flux-system",
                "-o",
                "json",
            ],
        )
    };
    let src_ok = poll(T, || s(&src(), "/status/artifact/revision") == fix_rev);
    st.check(src_ok, "the source has the fix revision");
    let u = ctx.kubectl(
        Some(&kc),
        &["unstick", "ks/apps-wave-1", "--yes", "--cascade"],
    );
    st.check(
        u.stdout.contains("Lever: wait")
            && u.stdout
                .contains("--feature-gates=CancelHealthCheckOnNewRevision=true"),
        "on v1.9 without the gate nothing at the API cancels the run: unstick says so, waits \
         for the run the fix already queued (no write makes it sooner) and recommends the gate",
    );
    st.check(
        u.code == 0,
        "unstick pulled the lever and observed recovery (exit 0)",
    );
    for (k, what) in [
        (
            "apps-wave-1",
            format!("apps-wave-1 is Ready at the fix revision {}", &fixed[..7]),
        ),
        (
            "apps-wave-2",
            "apps-wave-2 followed (--cascade)".to_string(),
        ),
    ] {
        let ok = poll(T, || {
            let o = ks_json(k);
            cond_is(&o, "Ready", "True") && s(&o, "/status/lastAppliedRevision") == fix_rev
        });
        st.check(ok, what);
    }
    st.check(
        !first.is_empty() && first != fix_rev,
        "the fleet moved forward, not back",
    );
    // The --keep commands, run once so what is printed is known to work.
    let (break_wave, fix_wave) = real_keep_commands(&url);
    let path = format!(
        "{}:{}",
        ctx.bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (what, cmd, line) in [
        ("break", &break_wave, AUTOMATION_LINE),
        (
            "fix",
            &fix_wave,
            "image: registry.example.local:5000/podinfo:6.7.0",
        ),
    ] {
        say!("\n  $ {cmd}");
        let ok = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("KUBECONFIG", &kc)
            .env("PATH", &path)
            .status()
            .is_ok_and(|s| s.success());
        let head = git.head(FLEET_REPO, "main").unwrap_or_default();
        let pushed = String::from_utf8(
            git.read_file(FLEET_REPO, "main", BACKEND)
                .unwrap_or_default(),
        )
        .unwrap_or_default()
        .contains(line);
        let want = format!("main@sha1:{head}");
        let fetched = ok && pushed && poll(T, || s(&src(), "/status/artifact/revision") == want);
        st.check(
            fetched,
            format!("the printed {what} command pushes to the cluster's Git server and the source fetches it"),
        );
    }
    // After the fix command the fleet settles healthy again at its revision (the break's
    // health check, 1m at most, ends first on this controller).
    let last = format!(
        "main@sha1:{}",
        git.head(FLEET_REPO, "main").unwrap_or_default()
    );
    let healthy = poll(T, || {
        ["apps-wave-1", "apps-wave-2"].iter().all(|k| {
            let o = ks_json(k);
            cond_is(&o, "Ready", "True") && s(&o, "/status/lastAppliedRevision") == last
        })
    });
    st.check(
        healthy,
        "and the fleet is left healthy at the fix command's revision for --keep",
    );
    // Names the fleet's pods resolve: a fleet Service by its short name, the Ingress host.
    if twin::podexec::missing_prerequisites().is_empty() {
        let ip = s(
            &kget(
                c,
                &["get", "svc", "podinfo-frontend", "-n", "apps", "-o", "json"],
            ),
            "/spec/clusterIP",
        )
        .to_string();
        let up = c.set_upstream(FRONTEND_HOST, &[GATEWAY_VIP]);
        let r = ctx.kubectl(
            Some(&kc),
            &[
                "podresolve",
                "podinfo-frontend",
                "-n",
                "apps",
                "--expect",
                &ip,
            ],
        );
        st.check(
            !ip.is_empty() && r.code == 0,
            format!("podresolve: podinfo-frontend from a pod in apps is its ClusterIP {ip} (the real apiserver allocated it)"),
        );
        let r = ctx.kubectl(
            Some(&kc),
            &["podresolve", FRONTEND_HOST, "--expect", GATEWAY_VIP],
        );
        st.check(
            up.is_ok() && r.code == 0,
            format!("and {FRONTEND_HOST} (the Ingress host, from the upstream through CoreDNS's forward) is the gateway VIP {GATEWAY_VIP}"),
        );
    }
    *keep = Some((break_wave, fix_wave));
    st
}

/// Starts the ONE real cluster the cluster steps share (tests/realcluster: etcd,
/// kube-apiserver, kube-controller-manager, our node agent with its probe-pod runtime,
/// source- and kustomize-controller, image-reflector- and image-automation-controller with the
/// real OCI registry served as the fleet's [`FLEET_REGISTRY`]); the node's registry holds the
/// images the steps' fleets pull successfully.
fn start_real() -> Real {
    say!(
        "\n  starting the real cluster: etcd, kube-apiserver {}, kube-controller-manager, source- and kustomize-controller {}, image-reflector-controller {} and image-automation-controller {} (first run builds them: tests/realcluster/build.sh)",
        realcluster::bins::KUBE_VERSION,
        realcluster::bins::KC_CURRENT,
        realcluster::bins::IRC_CURRENT,
        realcluster::bins::IAC_CURRENT,
    );
    let started = std::time::Instant::now();
    // On a thread of its own: the cluster runs a tokio runtime of its own.
    let c = std::thread::spawn(|| {
        realcluster::Cluster::start(realcluster::ClusterOptions {
            images: [
                REAL_GOOD,
                CUTOVER_IMAGE,
                "registry.example.local:5000/podinfo:*",
                "registry.example.local:5000/redis:*",
                "registry.example.local:5000/nginx-unprivileged:*",
            ]
            .map(str::to_owned)
            .to_vec(),
            // kustomize-controller's flag (main.go `requeue-dependency`, default 30s): how
            // soon a Kustomization whose dependsOn is not Ready looks again; 5s keeps the
            // four-level fleet's waves seconds apart.
            kustomize_controller_args: vec!["--requeue-dependency=5s".to_owned()],
            // clusters/platform's ImageRepositories, ImagePolicies and ImageUpdateAutomation,
            // reconciled for real: the fleet's registry name served by the harness's proxy.
            image_reflector_controller: true,
            image_automation_controller: true,
            registry_names: vec![FLEET_REGISTRY.to_owned()],
            // The real MetalLB controller gives the gateway's LoadBalancer Service its address
            // (no stand-in writes a status a real controller should).
            metallb: true,
            // The real Envoy Gateway for step 7 (gatewaycheck): it writes the Gateway API
            // status; it runs in a network namespace of its own (realcluster::netns), so its
            // fixed ports never clash with another cluster's.
            envoy_gateway: true,
            // A Git user whose tokens the auth steps (10, 11) mint and revoke through the Git
            // server's token API, as on Gitea.
            git_user: Some(gitauth::git_user()),
            // Step 12 (servicelinks): `python:*` containers run from their own spec with the
            // host's python3 and the Service link variables the kubelet injects.
            python_image: true,
            ..realcluster::ClusterOptions::default()
        })
    })
    .join();
    match c {
        Ok(Ok(c)) => {
            say!("  up in {:.1}s", started.elapsed().as_secs_f64());
            Ok(Arc::new(c))
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the start thread panicked".into()),
    }
}

/// Polls `f` every 500 ms until true or `timeout` passes.
/// `kubectl gitops verify --source SOURCE --wait` on the cluster of `kc` proves the whole
/// chain holds at commit `sha` (exit 0, "the chain holds", the revision shown): a step's last
/// check after its fix is pushed.
fn check_chain_holds(ctx: &Ctx, kc: &Path, source: &str, sha: &str, st: &mut Step) {
    let v = ctx.kubectl(
        Some(kc),
        &["gitops", "verify", "--source", source, "--wait"],
    );
    st.check(
        v.code == 0 && v.stdout.contains("the chain holds") && v.stdout.contains(sha),
        format!(
            "after the fix, gitops verify --wait: the chain holds at main@sha1:{}, exit 0",
            &sha[..12]
        ),
    );
}

fn poll(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

/// The steps that need no cluster, each running the plugin of its name only.
const OFFLINE_STEPS: [&str; 2] = ["markercheck", "fleetlint"];

/// Every plugin binary of the suite, linked into the plugin directory `--keep` puts on PATH
/// (`kubectl NAME` for each; `gitops-mcp` is `kubectl gitops mcp`).
const PLUGINS: [&str; 9] = [
    "unstick",
    "podresolve",
    "markercheck",
    "cutover",
    "fleetlint",
    "gatewaycheck",
    "gitops-mcp",
    "gitops-verify",
    "gitops-pull",
];

fn default_bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let cli = Cli::parse();
    // Absolute, so the printed `export PATH=...` keeps working after a `cd`.
    let bin_dir = cli.bin_dir.clone().unwrap_or_else(default_bin_dir);
    let bin_dir = std::fs::canonicalize(&bin_dir).unwrap_or(bin_dir);
    let repo_root = cli
        .repo_root
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let repo_root = std::fs::canonicalize(&repo_root).unwrap_or(repo_root);
    // The offline steps run only their own plugins: `./demo` runs them on those two binaries
    // while the rest of the suite is still to be built.
    let offline_only =
        !cli.step.is_empty() && cli.step.iter().all(|s| OFFLINE_STEPS.contains(&s.as_str()));
    let needed: &[&str] = if offline_only {
        &OFFLINE_STEPS
    } else {
        &PLUGINS
    };
    let mut missing = vec![];
    for p in needed {
        if !bin_dir.join(format!("kubectl-{p}")).is_file() {
            missing.push(format!("kubectl-{p}"));
        }
    }
    if !missing.is_empty() {
        eprintln!(
            "error: {} not found in {}: build them first (cargo build --workspace --bins) or pass --bin-dir",
            missing.join(", "),
            bin_dir.display()
        );
        std::process::exit(2);
    }
    if !repo_root.join("clusters").is_dir() {
        eprintln!(
            "error: {}/clusters not found: pass --repo-root (the repository root)",
            repo_root.display()
        );
        std::process::exit(2);
    }
    let work = match tempfile::Builder::new()
        .prefix("cluster-loop-demo-")
        .tempdir()
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: cannot create a temp dir: {e}");
            std::process::exit(3);
        }
    };
    // kubectl sees exactly the suite's plugins: a directory of links, not the build directory
    // (whose cargo `kubectl-<name>.d` dep-info files `kubectl plugin list` warns about).
    let plugin_dir = work.path().join("plugins");
    let linked = std::fs::create_dir_all(&plugin_dir).and_then(|()| {
        for p in needed {
            let name = format!("kubectl-{p}");
            std::os::unix::fs::symlink(bin_dir.join(&name), plugin_dir.join(&name))?;
        }
        Ok(())
    });
    if let Err(e) = linked {
        eprintln!(
            "error: cannot link the plugins into {}: {e}",
            plugin_dir.display()
        );
        std::process::exit(3);
    }
    let ctx = Ctx {
        bin_dir: plugin_dir,
        repo_root,
        work,
    };
    let want = |s: &str| cli.step.is_empty() || cli.step.iter().any(|x| x == s);
    let mut steps = vec![];
    // The real cluster's Go build (cold: tens of minutes) goes on while the offline steps run;
    // the cluster start below waits for it (bins::bin_dir builds once per process).
    let cluster_steps = [
        "unstick",
        "podresolve",
        "cutover",
        "realcluster",
        "gatewaycheck",
        "immutable",
        "automation",
        "auth-http",
        "auth-token",
        "servicelinks",
        "examples",
    ];
    if cluster_steps.iter().any(|s| want(s)) {
        std::thread::spawn(|| {
            let _ = realcluster::bins::bin_dir();
        });
    }
    if want("markercheck") {
        steps.push(step_markercheck(&ctx));
    }
    if want("fleetlint") {
        steps.push(step_fleetlint(&ctx));
    }
    // One real cluster for every step that needs one, started once.
    let real: Option<Real> = cluster_steps.iter().any(|s| want(s)).then(start_real);
    let mut fleet_keep = None;
    let mut git_servers = vec![];
    std::thread::scope(|scope| {
        // The cutover step runs beside the unstick step, whose held health check is 40 s of
        // real waiting: it has its own namespace, Git servers and Kustomizations, changes
        // no DNS and restarts no controller. Its output is held and printed in step order.
        let cutover = real.as_ref().filter(|_| want("cutover")).map(|real| {
            scope.spawn(|| {
                HELD.set(Some(String::new()));
                let mut servers = vec![];
                let st = step_cutover(&ctx, real, &mut servers);
                (st, servers, HELD.take().unwrap_or_default())
            })
        });
        if let Some(real) = &real
            && want("unstick")
        {
            steps.push(step_unstick_real(&ctx, real, &mut fleet_keep));
        }
        if let Some(real) = &real
            && want("podresolve")
        {
            steps.push(step_podresolve(&ctx, real));
        }
        if let Some(cutover) = cutover {
            match cutover.join() {
                Ok((st, servers, held)) => {
                    print!("{held}");
                    steps.push(st);
                    git_servers = servers;
                }
                Err(_) => {
                    let mut st = Step::new(CUTOVER_STEP);
                    st.check(false, "the cutover step panicked (its output is lost)");
                    steps.push(st);
                }
            }
        }
    });
    if let Some(real) = &real
        && want("realcluster")
    {
        steps.push(step_realcluster(&ctx, real));
    }
    if let Some(real) = &real
        && want("gatewaycheck")
    {
        steps.push(step_gatewaycheck(&ctx, real));
    }
    if let Some(real) = &real
        && want("immutable")
    {
        steps.push(verdicts::step_immutable(&ctx, real));
    }
    if let Some(real) = &real
        && want("automation")
    {
        steps.push(verdicts::step_automation(&ctx, real));
    }
    if let Some(real) = &real
        && want("auth-http")
    {
        steps.push(gitauth::step_http(&ctx, real));
    }
    if let Some(real) = &real
        && want("auth-token")
    {
        steps.push(gitauth::step_token(&ctx, real));
    }
    if let Some(real) = &real
        && want("servicelinks")
    {
        steps.push(servicelinks::step(&ctx, real));
    }
    if let Some(real) = &real
        && want("examples")
    {
        steps.push(examples::step_examples(&ctx, real));
    }
    println!("\n=== summary ===");
    let mut passed = 0;
    for s in &steps {
        println!(
            "  {} {} ({} proved, {} failed)",
            if s.ok() { "PASS" } else { "FAIL" },
            s.name,
            s.proved.len(),
            s.failed.len()
        );
        passed += usize::from(s.ok());
    }
    let failed = steps.len() - passed;
    println!("demo: {passed} passed, {failed} failed");
    if cli.keep {
        let Some(Ok(c)) = &real else {
            println!(
                "\n--keep: no real cluster is running (none of its steps ran, or it did not start)"
            );
            std::process::exit(if failed == 0 { 0 } else { 1 });
        };
        let mut extra = String::new();
        if let Some((break_wave, fix_wave)) = &fleet_keep {
            extra.push_str(&format!(
                "\n  # clusters/dev (flux-system): healthy at the fix revision; waves' health-check timeout 40s\n  kubectl get ks -n flux-system\n  # break apps-wave-1: push the :tag marker; the real image-automation-controller commits the bare tag (image: {PODINFO_SELECTED}) to the cluster's Git server\n  {break_wave}\n  kubectl unstick ks/apps-wave-2 --dry-run        # walks dependsOn to apps-wave-1, names {PODINFO_SELECTED}\n  kubectl unstick ks/apps-wave-1 --dry-run\n  # fix it (the full image reference back), then free the wave\n  {fix_wave}\n  kubectl unstick ks/apps-wave-1 --yes --cascade\n"
            ));
            if twin::podexec::missing_prerequisites().is_empty() {
                extra.push_str(&format!(
                    "  kubectl podresolve podinfo-frontend -n apps      # a fleet Service, from a pod\n  kubectl podresolve {FRONTEND_HOST} --expect {GATEWAY_VIP}\n"
                ));
            }
        }
        if want("podresolve") {
            extra.push_str(&format!(
                "\n  kubectl podresolve {GIT_HOST} --expect {PIN} -n flux-system    # CoreDNS hosts pin vs the upstream's {UPSTREAM}\n  kubectl podresolve {GIT_HOST} --from deploy/source-controller -n flux-system\n"
            ));
        }
        if let Some(prod) = git_servers.get(1) {
            extra.push_str(&format!(
                "\n  kubectl get gitrepository,ks -n {CUTOVER_NS}       # the cutover step's prod fleet, on prod's Git server\n  {}\n",
                real_cutover_keep(prod)
            ));
        }
        if fleet_keep.is_some() {
            extra.push_str("\n  # kubectl gitops pull (its --help examples): a checkout of the fleet Flux reads, behind the automation's commit\n  git clone -q \"$(kubectl get gitrepository/flux-system -n flux-system -o jsonpath='{.spec.url}')\" fleet && git -C fleet reset -q --hard HEAD~2\n  kubectl gitops pull --repo fleet --dry-run\n  kubectl gitops pull gitrepository/flux-system -n flux-system --repo fleet\n");
        }
        if want("realcluster") {
            extra.push_str(&format!("\n  kubectl unstick ks/{REAL_KS} --dry-run\n"));
        }
        if want("gatewaycheck") {
            extra.push_str("\n  # Envoy Gateway (real controller; its envoy pods cannot pull here) and MetalLB\n  kubectl get gatewayclass,gateway,httproute -A\n  kubectl gatewaycheck -A\n  kubectl gatewaycheck gateway/eg -n infra --vip 172.18.255.200\n  kubectl gatewaycheck gateway/eg -n infra --probe\n");
        }
        if want("auth-http") || want("auth-token") {
            extra.push_str(&gitauth::keep_commands(c));
        }
        println!(
            "\nThe real cluster (kube-apiserver {}, source-/kustomize-controller {}) is still running. In another shell:\n  export KUBECONFIG={}\n  export PATH={}:$PATH\n  kubectl get --raw /version\n  kubectl get --raw '/readyz?verbose'\n  kubectl get deploy,pods -n flux-system\n  kubectl unstick --all\n{extra}\n  kubectl markercheck {}/clusters\n  kubectl fleetlint {}/clusters --graph\nCtrl-C (or SIGTERM) stops it and removes what it made.",
            realcluster::bins::KUBE_VERSION,
            realcluster::bins::KC_CURRENT,
            c.kubeconfig().display(),
            ctx.bin_dir.display(),
            ctx.repo_root.display(),
            ctx.repo_root.display(),
        );
        // Ctrl-C, or SIGTERM (`kill PID`, a process supervisor): either way the cleanup below
        // runs, so neither the cluster nor the demo's temp dir is left behind.
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    // process::exit runs no destructors: stop the twin (Git servers, models, temp dirs) first.
    // The real cluster owns a tokio runtime: drop it off this runtime's threads.
    drop(git_servers);
    if let Some(c) = real {
        let _ = std::thread::spawn(move || drop(c)).join();
    }
    drop(ctx);
    std::process::exit(if failed == 0 { 0 } else { 1 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_numbered_by_its_place_in_the_run_order() {
        assert_eq!(numbered("markercheck: m"), "1. markercheck: m");
        assert_eq!(numbered("fleetlint: f"), "2. fleetlint: f");
        assert_eq!(numbered("servicelinks: s"), "12. servicelinks: s");
        assert_eq!(
            numbered("examples: e"),
            format!("{}. examples: e", STEPS.len())
        );
    }
}
