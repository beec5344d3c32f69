//! Every cluster-facing test of cluster-loop, in ONE test binary on the real control plane and
//! the real Flux controllers (tests/realcluster).
//!
//! Why one binary: `cargo test` runs test binaries one after another, and these tests spend
//! their time waiting on real controllers (health checks held to their timeouts, dependsOn
//! requeues, reconcile intervals), not on the CPU. As eight binaries their waits added up
//! (unstick 256 s, cutover 196 s, the demo 152 s, the harness 91 s, podresolve 43 s, the
//! image-automation differential 32 s, ...); here they overlap.
//!
//! The groups keep the clusters they had as binaries of their own, so no group sees another's
//! changes (a stopped source-controller, a pinned Corefile, a held kustomize-controller worker).
//! A group's cluster is a `realcluster::ClusterCell`: its tests hold leases on it ([`group_cluster`],
//! [`cluster_with`]), and it stops shortly after the last one is dropped, so a group that is done
//! no longer spends the CPU the groups still running need (tests/realcluster/README.md "Tests
//! run at once").
//! They are under [`long`] (started first: libtest starts tests in name order) and [`short`]:
//!
//! - [`long::unstick`]: `kubectl-unstick` on several clusters (the lever matrix, e2e, race,
//!   moving fleet, stopped controllers, HelmRelease);
//! - [`long::demo`]: the `cluster-loop-demo` binary, every step on a real cluster of its own;
//! - [`long::markercheck`]: `--simulate` against the real image-automation-controller, and
//!   `--from-cluster`;
//! - [`short::cutover`]: `kubectl-cutover` execute, `--finish` and `--verify-in-cluster`;
//! - [`short::podresolve`]: `kubectl-podresolve` with probe pods the node agent runs for real;
//! - [`short::gatewaycheck`]: `kubectl-gatewaycheck` on the real Envoy Gateway and MetalLB;
//! - [`short::harness`] and [`short::probe_pods`]: the real-cluster harness itself;
//! - [`short::kubelet`]: the real kubelet on containerd and runc as a second Node (opt-in);
//! - [`short::shared`]: the shared library's waits, kstatus and errors on the real API server;
//! - [`short::completion`]: completion through `kubectl __complete` on a real cluster;
//! - [`short::gitops_pull`]: `kubectl-gitops-pull` on the real image-automation-controller's
//!   commits;
//! - [`short::gitops_mcp`]: `kubectl-gitops-mcp` driven by the official Python MCP client.
//!
//! The plugins' binaries are other packages' binaries, found in the profile directory
//! (`target/debug`, [`bin!`]), where `cargo test --workspace` builds every package's binaries
//! before it runs any test; [`binaries_are_built_from_the_current_sources`] fails when a binary
//! is older than its sources. So run a group or a test through the workspace, with a filter
//! (`--tests` leaves out the doc-tests): `cargo test --workspace --tests -- unstick::race`,
//! `-- cutover::`, `-- demo::`; every other test binary then runs no test.
mod long;
mod short;

use std::path::Path;
use std::sync::OnceLock;
use std::time::SystemTime;

use realcluster::{Cluster, ClusterCell, ClusterOptions, Lease};

/// The path (a `&'static str`) of a binary of this workspace in the profile directory that
/// `cargo test --workspace` builds into (tests/real/build.rs), e.g. `bin!("kubectl-unstick")`.
#[macro_export]
macro_rules! bin {
    ($name:literal) => {
        concat!(env!("REAL_BIN_DIR"), "/", $name)
    };
}

/// A real HTTP backend on the pod runtime: BusyBox httpd (`-v`: one `ADDR:PORT:
/// response:CODE` log line per request) in pod `httpd` labelled `app: APP`, serving `body` as
/// /index.html on `port`, behind Service `httpd` in namespace `ns` (made here). Returns once
/// the pod is Running. Panics when the apply fails or the pod does not run within 60 s.
pub fn httpd_behind_a_service(c: &Cluster, ns: &str, app: &str, port: u16, body: &str) {
    c.apply_yaml(&format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: httpd, namespace: {ns}, labels: {{app: {app}}}}}
spec:
  containers:
  - name: httpd
    image: busybox:1.36
    command: [sh, -c, 'echo {body} > /tmp/index.html && exec httpd -f -v -p {port} -h /tmp']
    volumeMounts: [{{name: www, mountPath: /tmp}}]
  volumes: [{{name: www, emptyDir: {{}}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: httpd, namespace: {ns}}}
spec:
  selector: {{app: {app}}}
  ports: [{{port: {port}}}]
"
    ))
    .unwrap();
    realcluster::testkit::eventually(std::time::Duration::from_secs(60), "httpd Running", || {
        (c.get_json(&["-n", ns, "get", "pod", "httpd"])["status"]["phase"] == "Running")
            .then_some(())
    });
}

/// `reconcile.fluxcd.io/requestedAt` (now) on GitRepository `name` in flux-system, as `flux
/// reconcile source git` writes it: source-controller fetches now.
pub fn fetch_source_now(c: &realcluster::Cluster, name: &str) {
    fetch_source_now_in(c, realcluster::FLUX_NS, name)
}

/// [`fetch_source_now`] for GitRepository `name` in namespace `ns`.
pub fn fetch_source_now_in(c: &realcluster::Cluster, ns: &str, name: &str) {
    c.kubectl(&[
        "-n",
        ns,
        "annotate",
        "--overwrite",
        "gitrepository",
        name,
        &format!("reconcile.fluxcd.io/requestedAt={}", jiff::Timestamp::now()),
    ])
    .unwrap();
}

/// Waits (up to 180 s) until Kustomization `name` in flux-system is Ready with a last applied
/// revision ending in `sha`; panics with the wait's message after that.
pub fn ready_at(c: &realcluster::Cluster, name: &str, sha: &str) {
    ready_at_in(c, realcluster::FLUX_NS, name, sha)
}

/// [`ready_at`] for Kustomization `name` in namespace `ns`.
pub fn ready_at_in(c: &realcluster::Cluster, ns: &str, name: &str, sha: &str) {
    realcluster::testkit::eventually(
        std::time::Duration::from_secs(180),
        &format!("Kustomization {ns}/{name} Ready at {sha}"),
        || {
            let k = c.get_json(&["-n", ns, "get", "kustomization", name]);
            (realcluster::testkit::condition(&k, "Ready")["status"] == "True"
                && k["status"]["lastAppliedRevision"]
                    .as_str()
                    .is_some_and(|r| r.ends_with(sha)))
            .then_some(())
        },
    );
}

/// The Git server user of the clusters whose fleets require auth
/// (`ClusterOptions::git_user`, `Cluster::auth_fleet`): basic auth's username, and the
/// password of its token API.
pub fn git_user() -> realcluster::GitUser {
    realcluster::GitUser {
        name: "flux".into(),
        password: "git-admin-9d41".into(),
    }
}

/// A lease on the cluster of default options (`ClusterOptions::default()`) kept in `cell`: one
/// group's cluster ([`cluster_with`]). Panics with the start error, each call.
pub fn group_cluster(cell: &'static ClusterCell) -> Lease {
    cluster_with(cell, ClusterOptions::default)
}

/// A lease on the cluster of `options` kept in `cell`: started through [`start_cluster`] when
/// none runs, stopped `realcluster::LINGER` after the group's last lease is dropped (a group's
/// tests start one after another, in name order), so a group done with its cluster stops
/// spending CPU on it while the other groups run. Panics with the start error, each call.
pub fn cluster_with(
    cell: &'static ClusterCell,
    options: impl FnOnce() -> ClusterOptions + Send + 'static,
) -> Lease {
    cell.lease(|| start_cluster(options()))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The binaries these tests run, each with the source folders it is built from (paths from the
/// workspace root).
const BINARIES: &[(&str, &[&str])] = &[
    ("kubectl-unstick", &["plugins/unstick", "shared"]),
    (
        "cluster-loop-controller",
        &["controller", "plugins/unstick", "plugins/cutover", "shared"],
    ),
    ("kubectl-cutover", &["plugins/cutover", "shared"]),
    ("kubectl-podresolve", &["plugins/podresolve", "shared"]),
    ("kubectl-gatewaycheck", &["plugins/gatewaycheck", "shared"]),
    ("kubectl-markercheck", &["plugins/markercheck", "shared"]),
    (
        "kubectl-fleetlint",
        &["plugins/fleetlint", "plugins/markercheck", "shared"],
    ),
    (
        "cluster-loop-demo",
        &["tests/demo", "tests/realcluster", "tests/twin"],
    ),
    ("cltest-plugin", &["tests/dist", "shared"]),
    (
        "kubectl-gitops-verify",
        &[
            "plugins/gitops-verify",
            "plugins/unstick",
            "plugins/markercheck",
            "plugins/cutover",
            "shared",
        ],
    ),
    (
        "kubectl-gitops-pull",
        &[
            "plugins/gitops-pull",
            "plugins/markercheck",
            "plugins/cutover",
            "shared",
        ],
    ),
    (
        "kubectl-gitops-mcp",
        &[
            "plugins/gitops-mcp",
            "plugins/unstick",
            "plugins/podresolve",
            "plugins/markercheck",
            "plugins/cutover",
            "plugins/fleetlint",
            "plugins/gatewaycheck",
            "shared",
        ],
    ),
];

/// The newest modification time of a file under `dir` (a package's `src`) and that file, or
/// `None` for an empty or missing folder.
fn newest(dir: &Path) -> Option<(SystemTime, std::path::PathBuf)> {
    let mut best: Option<(SystemTime, std::path::PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(p);
            } else if let Ok(m) = meta.modified()
                && best.as_ref().is_none_or(|(t, _)| m > *t)
            {
                best = Some((m, p));
            }
        }
    }
    best
}

/// Every binary of [`BINARIES`] not older than its `src/`, or a message naming each stale one,
/// the newer file and what to run. Cargo rebuilds a binary when a file its crates read changed;
/// but a run of this package alone (`cargo test -p real-tests`) builds no other package's
/// binaries, so a stale binary would test old code.
fn stale_binaries() -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut stale = Vec::new();
    for (name, dirs) in BINARIES {
        let path = Path::new(env!("REAL_BIN_DIR")).join(name);
        let built = match std::fs::metadata(&path).and_then(|m| m.modified()) {
            Ok(t) => t,
            Err(e) => {
                stale.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        for dir in *dirs {
            // Only `src`: cargo rebuilds a binary for the files rustc read (its dep-info), so a
            // Cargo.toml edit of dev-dependencies leaves the binary as it was.
            if let Some((changed, file)) = newest(&root.join(dir).join("src"))
                && changed > built
            {
                stale.push(format!("{name} is older than {}", file.display()));
            }
        }
    }
    if stale.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}: run the tests through the workspace, which builds every binary first: `cargo test \
         --workspace --tests -- FILTER` (e.g. `-- unstick::race`)",
        stale.join("; ")
    ))
}

/// Panics with [`stale_binaries`]'s message when a binary the tests run is missing or older
/// than its sources; checked once per run. The demo's test and the harness group call it, and
/// every cluster start here ([`start_cluster`]) fails with it, so a filtered run says so too.
pub fn assert_fresh() {
    if let Err(e) = fresh() {
        panic!("{e}");
    }
}

/// [`stale_binaries`], computed once per run.
fn fresh() -> Result<(), String> {
    static FRESH: OnceLock<Result<(), String>> = OnceLock::new();
    FRESH.get_or_init(stale_binaries).clone()
}

/// [`Cluster::start`] unless a binary is stale: the cluster start of every group here (often on
/// a thread of its own, so the stale binaries are its error rather than a panic there).
/// Errors: `Error::Setup` with [`stale_binaries`]'s message, or the start error.
pub fn start_cluster(options: ClusterOptions) -> Result<Cluster, realcluster::Error> {
    fresh().map_err(realcluster::Error::Setup)?;
    Cluster::start(options)
}

#[test]
fn binaries_are_built_from_the_current_sources() {
    assert_fresh();
}
