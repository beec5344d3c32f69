//! `cluster-loop-demo`: the failure catalogue's incidents replayed on the twin cluster, with the
//! real plugin binaries run through real `kubectl <plugin>` dispatch.
//!
//! Steps (each prints the commands it runs, their output, and what it proves):
//! 1. markercheck: a `:tag` marker on an `image:` line in `clusters/`, caught offline, with the
//!    simulated automation commit (`image: 0.1.1`) and the rendered result.
//! 2. unstick: the same change pushed to the twin's Git server that serves `clusters/`;
//!    apps-wave-1 holds its health check on ImagePullBackOff, apps-wave-2 waits on it;
//!    `kubectl unstick ks/apps-wave-2` names the root cause; the fix is committed; unstick frees
//!    apps-wave-1 with the lever this controller supports and proves Ready at the new revision.
//! 3. podresolve (real cluster): the Git host resolved from a real probe pod (kubeadm's CoreDNS
//!    Corefile with a hosts pin to the gateway VIP) beside the workstation's answer, and from
//!    inside the real source-controller's pod.
//! 4. cutover (real cluster): a new Git server whose branch is behind is refused with the commit
//!    count; once level, the cutover happens at the same revision on the real source- and
//!    kustomize-controller, the authored-value change is shown and landed, and `--finish`
//!    verifies it.
//! 5. fleetlint: clusters/dev lints clean and prod reports exactly its placeholders; a review
//!    drops apps-wave-2's `postBuild.substituteFrom`, fleetlint names every `${VAR}` that would
//!    ship literally, and the fix (restoring it) lints clean again. Offline.
//! 6. realcluster: a Job that cannot pull held by the real kustomize-controller, freed.
//!
//! Steps 3, 4 and 6 share ONE real cluster (tests/realcluster), started once; step 2 runs on
//! the fleet twin.
//!
//! Exit code 0 only when every step's outcome is the expected one.
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Parser;
use serde_json::{Value, json};
use twin::flux::cluster::{ObjKey, s};
use twin::git::Change;
use twin::scenario::{RunOptions, RunningScenario, Scenario};

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
    /// Run only these steps (markercheck, unstick, podresolve, cutover, fleetlint, realcluster);
    /// default all. An
    /// unknown step is a usage error (exit 2) listing the valid ones.
    #[arg(long, value_delimiter = ',', value_name = "STEP", value_parser = STEPS)]
    step: Vec<String>,
    /// After the steps, keep the real cluster (and the fleet twin) running and print the
    /// KUBECONFIG exports and commands that work on them (Ctrl-C ends)
    #[arg(long)]
    keep: bool,
    /// Real seconds per nominal second for the Flux models (intervals, timeouts)
    #[arg(long, default_value_t = 0.03)]
    time_scale: f64,
}

/// The demo's steps, in the order they run (`--step` accepts only these).
const STEPS: [&str; 6] = [
    "markercheck",
    "unstick",
    "podresolve",
    "cutover",
    "fleetlint",
    "realcluster",
];

/// Nominal time budget for waits inside the demo (real time).
const T: Duration = Duration::from_secs(120);

struct Ctx {
    /// A directory holding only links to the `kubectl-<name>` plugins (on PATH for
    /// kubectl's plugin dispatch, and printed by --keep).
    bin_dir: PathBuf,
    repo_root: PathBuf,
    time_scale: f64,
    work: tempfile::TempDir,
}

/// One step's verdict.
struct Step {
    name: &'static str,
    proved: Vec<String>,
    failed: Vec<String>,
}

impl Step {
    fn new(name: &'static str) -> Self {
        println!("\n=== {name} ===");
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
            println!("  PROVES: {what}");
            self.proved.push(what);
        } else {
            println!("  FAILED: {what}");
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
        println!("\n  $ kubectl {}", args.join(" "));
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
                println!("    cannot run kubectl: {e}");
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
            println!("    {line}");
            if !is_err {
                stdout.push_str(&line);
                stdout.push('\n');
            }
        }
        for r in readers {
            let _ = r.join();
        }
        let code = child.wait().ok().and_then(|st| st.code()).unwrap_or(-1);
        println!("    (exit {code})");
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
const AUTOMATION_LINE: &str = r#"image: 0.1.1 # {"$imagepolicy": "flux-system:podinfo:tag"}"#;

// ------------------------------------------------------------------ step 1

fn step_markercheck(ctx: &Ctx) -> Step {
    let mut st = Step::new("1. markercheck: the :tag marker on an image: line, caught offline");
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
    println!("\n  (the change under review: the marker on the image: line gets a :tag suffix)");
    let r = ctx.kubectl(
        None,
        &[
            "markercheck",
            &fleet_s,
            "--simulate",
            "--render",
            "--set",
            "flux-system:podinfo=registry.example.local:5000/podinfo:0.1.1",
        ],
    );
    st.check(r.code == 1, "the change is an error finding (exit 1)");
    st.check(
        r.stdout.contains("MC003") && r.stdout.contains("tag-on-full-ref"),
        "rule MC003 tag-on-full-ref names the line",
    );
    st.check(
        r.stdout.contains("+          image: 0.1.1 #"),
        "the simulated automation commit writes `image: 0.1.1`",
    );
    st.check(
        r.stdout.contains("MC082") && r.stdout.contains("-> 0.1.1"),
        "kubectl kustomize of the simulated tree renders the Deployment with image 0.1.1",
    );
    st
}

// ------------------------------------------------------------------ step 2

/// The fleet world: clusters/dev rendered as the cluster's objects (the root Kustomization is
/// left out: its URL is the production Git host), served by the twin's Git server.
/// Cluster DNS for the fleet twin when the twin can run probe pods (podexec: root, dnsmasq,
/// busybox, util-linux, iproute2): a kubeadm-style kube-dns Service and CoreDNS Corefile (no
/// pins), and upstream records for the names clusters/dev uses outside the cluster, on kind's
/// docker network (172.18.0.0/16): the registry the images come from and the Ingress host of
/// podinfo-frontend at the gateway VIP (clusters/dev/cluster-vars.yaml GATEWAY_VIP).
fn fleet_dns(objects: &mut Vec<Value>) -> Value {
    objects.push(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
    }));
    objects.push(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}},
        "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
            "selector": {"k8s-app": "kube-dns"},
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]},
    }));
    objects.push(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "coredns", "namespace": "kube-system"},
        "data": {"Corefile": ".:53 {\n    errors\n    health {\n       lameduck 5s\n    }\n    ready\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }\n    prometheus :9153\n    forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n    cache 30\n    loop\n    reload\n    loadbalance\n}\n"},
    }));
    json!({"upstream": {
        "registry.example.local": ["172.18.0.5"],
        FRONTEND_HOST: [GATEWAY_VIP],
    }})
}

/// podinfo-frontend's Ingress host on dev (clusters/apps/wave-2, CLUSTER_DOMAIN of dev).
const FRONTEND_HOST: &str = "podinfo.dev.example.local";
/// clusters/dev/cluster-vars.yaml GATEWAY_VIP.
const GATEWAY_VIP: &str = "172.18.255.200";

fn fleet_scenario(ctx: &Ctx, podexec: bool) -> Result<Scenario, String> {
    let fleet = ctx.fleet_copy("fleet-src");
    let rendered = Command::new("kubectl")
        .arg("kustomize")
        .arg(fleet.join("clusters/dev"))
        .output()
        .map_err(|e| format!("kubectl kustomize: {e}"))?;
    if !rendered.status.success() {
        return Err(format!(
            "kubectl kustomize clusters/dev: {}",
            String::from_utf8_lossy(&rendered.stderr)
        ));
    }
    let docs: Vec<Value> = serde_saphyr::from_multiple(&String::from_utf8_lossy(&rendered.stdout))
        .map_err(|e| format!("rendered clusters/dev: {e}"))?;
    let mut objects = vec![];
    for mut d in docs.into_iter().filter(|d| !d.is_null()) {
        let kind = s(&d, "/kind").to_string();
        let name = s(&d, "/metadata/name").to_string();
        if kind == "Kustomization" && name == "flux-system" {
            continue;
        }
        if kind == "GitRepository" {
            d["spec"]["url"] = json!("{{http:gitea/org/fleet}}");
            d["spec"].as_object_mut().map(|m| m.remove("secretRef"));
        }
        objects.push(d);
    }
    // The source-controller Deployment of a real flux-system (the twin's scenario has only
    // kustomize-controller's): `kubectl podresolve HOST --from deploy/source-controller -n
    // flux-system`, the README's example, resolves from its pod.
    objects.push(source_controller_deployment());
    let dns = if podexec {
        fleet_dns(&mut objects)
    } else {
        Value::Null
    };
    let mut sc = json!({
        "name": "demo-fleet",
        "description": "clusters/ served by the twin's Git server; kustomize-controller v1.9.4 with its default feature gates (CancelHealthCheckOnNewRevision off)",
        "timeScale": ctx.time_scale,
        "controller": {"version": "v1.9.4"},
        "registry": [
            "registry.example.local:5000/podinfo:*",
            "registry.example.local:5000/redis:*",
            "registry.example.local:5000/nginx-unprivileged:*"
        ],
        "gitServers": [{"name": "gitea", "repos": [{"name": "org/fleet", "branch": "main",
            "commits": [{"message": "fleet: base, dev and prod overlays", "dir": "fleet-src"}]}]}],
        "objects": objects,
    });
    if podexec {
        sc["dns"] = dns;
    }
    Scenario::from_yaml(&sc.to_string(), ctx.work.path(), "demo-fleet.yaml")
        .map_err(|e| e.to_string())
}

/// flux-system's source-controller Deployment (as `flux install` v2.6 renders it, trimmed to
/// what the twin's workload model runs): one replica of ghcr.io/fluxcd/source-controller.
fn source_controller_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "source-controller", "namespace": "flux-system",
            "labels": {"app.kubernetes.io/component": "source-controller",
                "app.kubernetes.io/instance": "flux-system", "app.kubernetes.io/part-of": "flux"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "source-controller"}},
            "template": {
                "metadata": {"labels": {"app": "source-controller"}},
                "spec": {"serviceAccountName": "source-controller", "containers": [{
                    "name": "manager",
                    "image": "ghcr.io/fluxcd/source-controller:v1.6.2",
                    "args": ["--watch-all-namespaces=true", "--storage-path=/data"],
                }]},
            },
        },
    })
}

/// The commands `./demo --keep` prints for trying the plugins by hand, each proved by the demo
/// before it is printed.
struct KeepCommands {
    /// Breaks apps-wave-1: the image-automation bare-tag commit, pushed to the demo's Git server.
    break_wave: String,
    /// Fixes it: the full image reference back, pushed the same way.
    fix_wave: String,
    /// `kubectl cutover ... --dry-run` to the same server under another name (the preflight end
    /// to end: remote, history, where the URL is authored).
    cutover: String,
}

fn keep_commands(run: &RunningScenario) -> KeepCommands {
    let url = run.git["gitea"].url_http("org/fleet");
    let push = |from: &str, to: &str, message: &str| {
        format!(
            "d=$(mktemp -d) && git clone -q {url} \"$d\" && sed -i 's|{from}|{to}|' \"$d/{BACKEND}\" \
             && git -C \"$d\" -c user.name=demo -c user.email=demo@example.invalid commit -qam '{message}' \
             && git -C \"$d\" push -q"
        )
    };
    let other_name = url.replacen("127.0.0.1", "localhost", 1);
    KeepCommands {
        break_wave: push(
            GOOD_LINE,
            AUTOMATION_LINE,
            "Update from image update automation",
        ),
        fix_wave: push(
            AUTOMATION_LINE,
            GOOD_LINE,
            "fix: full image reference for podinfo-backend",
        ),
        cutover: format!(
            "kubectl cutover gitrepository/flux-system --to {other_name} --dry-run --allow-loopback"
        ),
    }
}

/// Runs the --keep commands once, so what is printed is known to work: break (the source gets
/// the bare-tag commit), fix (the source gets the fix), the cutover dry-run (exit 0).
async fn prove_keep_commands(ctx: &Ctx, run: &RunningScenario, kc: &Path, st: &mut Step) {
    let cmds = keep_commands(run);
    let src = ObjKey::new(
        "source.toolkit.fluxcd.io/v1",
        "GitRepository",
        "flux-system",
        "flux-system",
    );
    for (what, cmd, line) in [
        ("break", &cmds.break_wave, "image: 0.1.1"),
        (
            "fix",
            &cmds.fix_wave,
            "image: registry.example.local:5000/podinfo:6.7.0",
        ),
    ] {
        println!("\n  $ {cmd}");
        let ok = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .status()
            .is_ok_and(|s| s.success());
        let head = run.git["gitea"]
            .head("org/fleet", "main")
            .unwrap_or_default();
        let pushed = String::from_utf8(
            run.git["gitea"]
                .read_file("org/fleet", "main", BACKEND)
                .unwrap_or_default(),
        )
        .unwrap_or_default()
        .contains(line);
        let want = format!("main@sha1:{head}");
        let fetched = ok
            && pushed
            && run
                .wait_for(&src, T, move |o| s(o, "/status/artifact/revision") == want)
                .await
                .is_ok();
        st.check(
            fetched,
            format!("the printed {what} command pushes to the demo's Git server and the source fetches it"),
        );
    }
    let args: Vec<&str> = cmds.cutover.split(' ').skip(1).collect();
    let c = ctx.kubectl(Some(kc), &args);
    st.check(
        c.code == 0,
        "the printed cutover dry-run runs the whole preflight (exit 0)",
    );
}

/// A load-balancer controller stand-in (MetalLB's behaviour for `spec.loadBalancerIP`): every
/// `type: LoadBalancer` Service whose loadBalancerIP is a valid IP gets it as
/// `status.loadBalancer.ingress[0].ip`, so kstatus can report it Current. The twin, like kind,
/// has no load balancer of its own (failure catalogue: "No addresses have been assigned").
fn spawn_load_balancer(cluster: twin::flux::cluster::ClusterRef) {
    let assign = move |cluster: &dyn twin::flux::cluster::Cluster, o: &Value| {
        if s(o, "/spec/type") != "LoadBalancer"
            || o.pointer("/status/loadBalancer/ingress").is_some()
        {
            return;
        }
        let ip = s(o, "/spec/loadBalancerIP");
        if ip.parse::<std::net::IpAddr>().is_ok() {
            let _ = cluster.merge_patch_status(
                &ObjKey::of(o),
                json!({"status": {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]}}}),
                "metallb-controller",
            );
        }
    };
    on_each_service(cluster, assign);
}

/// A Service ClusterIP allocator stand-in (the kube-apiserver's job on create; the twin does
/// no defaulting): every Service without `spec.clusterIP` (and not ExternalName) gets the next
/// free address of 10.96.100.0/24, so the cluster DNS serves `<svc>.<ns>.svc.cluster.local`.
fn spawn_cluster_ip_allocator(cluster: twin::flux::cluster::ClusterRef) {
    let next = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(1));
    let assign = move |cluster: &dyn twin::flux::cluster::Cluster, o: &Value| {
        if !s(o, "/spec/clusterIP").is_empty() || s(o, "/spec/type") == "ExternalName" {
            return;
        }
        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n > 254 {
            return;
        }
        let ip = format!("10.96.100.{n}");
        let _ = cluster.merge_patch(
            &ObjKey::of(o),
            json!({"spec": {"clusterIP": ip, "clusterIPs": [ip]}}),
            "kube-apiserver",
        );
    };
    on_each_service(cluster, assign);
}

/// A controller loop over Services, as the stand-ins above need it: `reconcile` runs for every
/// Service that exists now, then (on a spawned task) for every watch event until the twin
/// stops. The watch is opened before the list, so no Service created in between is missed.
fn on_each_service(
    cluster: twin::flux::cluster::ClusterRef,
    reconcile: impl Fn(&dyn twin::flux::cluster::Cluster, &Value) + Send + 'static,
) {
    let mut rx = cluster.watch(&[("v1", "Service")]);
    if let Ok(list) = cluster.list("v1", "Service", None) {
        for o in &list {
            reconcile(&*cluster, o);
        }
    }
    tokio::spawn(async move {
        while let Some(ch) = rx.recv().await {
            reconcile(&*cluster, &ch.object);
        }
    });
}

fn ks(name: &str) -> ObjKey {
    ObjKey::new(
        "kustomize.toolkit.fluxcd.io/v1",
        "Kustomization",
        "flux-system",
        name,
    )
}

fn cond_is(o: &Value, t: &str, status: &str) -> bool {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|c| c["type"] == t && c["status"] == status))
}

async fn step_unstick(ctx: &Ctx, keep: &mut Option<RunningScenario>) -> Step {
    let mut st = Step::new("2. unstick: the change pushed anyway, a stuck wave freed with proof");
    // The fleet twin can run probe pods (and so `kubectl podresolve` by hand after --keep)
    // when the host has what the twin's pod execution needs.
    let missing = twin::podexec::missing_prerequisites();
    let sc = match fleet_scenario(ctx, missing.is_empty()) {
        Ok(sc) => sc,
        Err(e) => {
            st.check(false, format!("build the fleet scenario: {e}"));
            return st;
        }
    };
    let run = match RunningScenario::start(sc, RunOptions::default()).await {
        Ok(r) => r,
        Err(e) => {
            st.check(false, format!("start the twin: {e}"));
            return st;
        }
    };
    spawn_load_balancer(run.cluster());
    if run.podexec.is_some() {
        spawn_cluster_ip_allocator(run.cluster());
    }
    let kc = run.twin.kubeconfig_path().to_path_buf();
    println!(
        "  twin up: {}; its Git server serves clusters/ as org/fleet; a MetalLB stand-in assigns \
         LoadBalancer IPs",
        run.twin.server_url()
    );
    let mut all_ready = true;
    for k in [
        "platform",
        "platform-config",
        "apps-wave-0",
        "apps-wave-1",
        "apps-wave-2",
    ] {
        let ok = run
            .wait_for(&ks(k), T, |o| cond_is(o, "Ready", "True"))
            .await
            .is_ok();
        all_ready &= ok;
    }
    st.check(
        all_ready,
        "the fleet from clusters/ reconciles: platform -> waves 0, 1, 2 Ready",
    );
    if !all_ready {
        ctx.kubectl(Some(&kc), &["get", "ks", "-n", "flux-system"]);
        return st;
    }
    let first = run
        .wait_for(&ks("apps-wave-1"), T, |_| true)
        .await
        .map(|o| s(&o, "/status/lastAppliedRevision").to_string())
        .unwrap_or_default();

    // The automation commit of the incident.
    let git = run.git["gitea"].clone();
    let text = String::from_utf8(git.read_file("org/fleet", "main", BACKEND).unwrap()).unwrap();
    let bad = git
        .commit(
            "org/fleet",
            &[Change::write(
                BACKEND,
                text.replace(GOOD_LINE, AUTOMATION_LINE),
            )],
            "Update from image update automation",
        )
        .unwrap();
    println!(
        "\n  pushed the automation commit {} (image: 0.1.1)",
        &bad[..7]
    );
    let bad_rev = format!("main@sha1:{bad}");
    let in_flight = run
        .wait_for(&ks("apps-wave-1"), T, |o| {
            o.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter().any(|c| {
                        c["type"] == "Reconciling"
                            && s(c, "/message").starts_with(&format!(
                                "Running health checks for revision {bad_rev}"
                            ))
                    })
                })
        })
        .await
        .is_ok();
    st.check(
        in_flight,
        "apps-wave-1 holds its health check on the new revision (ImagePullBackOff on 0.1.1)",
    );
    let waiting = run
        .wait_for(&ks("apps-wave-2"), T, |o| {
            o.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter()
                        .any(|c| c["type"] == "Ready" && c["reason"] == "DependencyNotReady")
                })
        })
        .await
        .is_ok();
    st.check(waiting, "apps-wave-2 waits on it (DependencyNotReady)");
    ctx.kubectl(Some(&kc), &["get", "ks", "-n", "flux-system"]);

    let d = ctx.kubectl(Some(&kc), &["unstick", "ks/apps-wave-2", "--dry-run"]);
    st.check(
        d.stdout.contains("apps-wave-1"),
        "unstick on apps-wave-2 walks dependsOn to the root cause apps-wave-1",
    );
    st.check(
        d.stdout.contains("0.1.1") && d.stdout.contains("markercheck"),
        "and names the bare-tag image 0.1.1 with the markercheck hint",
    );

    // The fix, committed while the health check is still in flight.
    let fixed = git
        .commit(
            "org/fleet",
            &[Change::write(BACKEND, text.clone())],
            "fix: full image reference for podinfo-backend",
        )
        .unwrap();
    println!("\n  pushed the fix {}", &fixed[..7]);
    let fix_rev = format!("main@sha1:{fixed}");
    let fr = fix_rev.clone();
    let src_ok = run
        .wait_for(
            &ObjKey::new(
                "source.toolkit.fluxcd.io/v1",
                "GitRepository",
                "flux-system",
                "flux-system",
            ),
            T,
            move |o| s(o, "/status/artifact/revision") == fr,
        )
        .await
        .is_ok();
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
    // The cluster state agrees (a later interval run may flap Ready to Unknown for a moment:
    // wait for the settled state rather than reading one snapshot).
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
        let fr = fix_rev.clone();
        let ok = run
            .wait_for(&ks(k), T, move |o| {
                cond_is(o, "Ready", "True") && s(o, "/status/lastAppliedRevision") == fr
            })
            .await
            .is_ok();
        st.check(ok, what);
    }
    st.check(
        !first.is_empty() && first != fix_rev,
        "the fleet moved forward, not back",
    );
    prove_keep_commands(ctx, &run, &kc, &mut st).await;
    if run.podexec.is_some() {
        fleet_podresolve(ctx, &run, &kc, &mut st).await;
    } else {
        println!(
            "\n  note: this fleet twin runs no probe pods (podexec needs {}), so `kubectl \
             podresolve` by hand against it would fail to pull its image",
            missing.join(", ")
        );
    }
    *keep = Some(run);
    st
}

/// What `./demo --keep` leaves for podresolve by hand, proved here: a Service of the fleet by
/// its short name from the apps namespace (search list + the cluster DNS), and the Ingress
/// host through CoreDNS's forward to the upstream resolver.
async fn fleet_podresolve(ctx: &Ctx, run: &RunningScenario, kc: &Path, st: &mut Step) {
    let svc = ObjKey::new("v1", "Service", "apps", "podinfo-frontend");
    let ip = run
        .wait_for(&svc, T, |o| !s(o, "/spec/clusterIP").is_empty())
        .await
        .map(|o| s(&o, "/spec/clusterIP").to_string())
        .unwrap_or_default();
    let r = ctx.kubectl(
        Some(kc),
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
        format!(
            "the fleet twin runs podresolve: podinfo-frontend from a pod in apps is its ClusterIP {ip}"
        ),
    );
    let r = ctx.kubectl(
        Some(kc),
        &["podresolve", FRONTEND_HOST, "--expect", GATEWAY_VIP],
    );
    st.check(
        r.code == 0,
        format!("and {FRONTEND_HOST} (the Ingress host) is the gateway VIP {GATEWAY_VIP}"),
    );
    let r = ctx.kubectl(
        Some(kc),
        &[
            "podresolve",
            FRONTEND_HOST,
            "--from",
            "deploy/source-controller",
            "-n",
            "flux-system",
        ],
    );
    st.check(
        r.code == 0,
        format!("and from inside source-controller's pod (--from deploy/source-controller): {FRONTEND_HOST}"),
    );
}

// ------------------------------------------------------------------ step 3

/// The Git host of the catalogue's split-DNS case (failure catalogue 3): the cluster's CoreDNS
/// pins it to the gateway VIP [`PIN`], the upstream resolver answers [`UPSTREAM`].
const GIT_HOST: &str = "gitea.prod.example.dev";
/// The gateway VIP the cluster's CoreDNS `hosts` block pins [`GIT_HOST`] to.
const PIN: &str = "192.168.2.20";
/// What the node's upstream resolver answers for [`GIT_HOST`] (the public address).
const UPSTREAM: &str = "203.0.113.10";

/// The real cluster, or why it is not there (each cluster step fails with the reason).
type Real = Result<realcluster::Cluster, String>;

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
        "3. podresolve: the Git host from the pod network, not the workstation (real cluster)",
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

// ------------------------------------------------------------------ step 4

/// The podinfo image apps-wave-1 of the cutover fleet runs (tests/twin/scenarios/repos/fleet).
const CUTOVER_IMAGE: &str = "localhost:5000/podinfo:6.5.0";

/// Runs `kubectl ARGS` quietly (setup and waits): its stdout as JSON, `Null` on any error.
fn kget(c: &realcluster::Cluster, args: &[&str]) -> Value {
    c.kubectl(args)
        .ok()
        .and_then(|o| serde_json::from_str(&o).ok())
        .unwrap_or(Value::Null)
}

/// `flux reconcile source git NAME`: the requestedAt annotation the source-controller acts on
/// at once (fluxcd/pkg apis/meta ReconcileRequestAnnotation), instead of its next interval.
fn request_reconcile(c: &realcluster::Cluster, kind: &str, name: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let _ = c.kubectl(&[
        "annotate",
        "--overwrite",
        "-n",
        "flux-system",
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
fn step_cutover(ctx: &Ctx, real: &Real, keep: &mut Vec<twin::git::GitServer>) -> Step {
    let mut st =
        Step::new("4. cutover: moving the Git source without rolling prod back (real cluster)");
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
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m\n  url: {laptop_url}\n  ref:\n    branch: main\n  secretRef:\n    name: flux-system\n"
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
                "metadata": {"name": name, "namespace": "flux-system"},
                "type": "Opaque",
                "stringData": {"username": "flux", "password": token, "ca.crt": ca}})
            .to_string()
        };
        let objects = [
            secret("flux-system", "laptop-token", laptop.ca_pem()),
            secret("prod-creds", "prod-token", prod.ca_pem()),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cluster-vars, namespace: flux-system}\ndata: {cluster_name: prod}\n".to_string(),
            flux_system.clone(),
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: flux-system, namespace: flux-system}\nspec:\n  interval: 10m\n  path: ./clusters/prod\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n".to_string(),
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps-wave-1, namespace: flux-system}\nspec:\n  interval: 10m\n  timeout: 2m\n  path: ./apps/wave-1\n  prune: true\n  wait: true\n  dependsOn: [{name: flux-system}]\n  sourceRef: {kind: GitRepository, name: flux-system}\n  postBuild:\n    substituteFrom: [{kind: ConfigMap, name: cluster-vars}]\n".to_string(),
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
        let k = kget(c, &["get", "ks", name, "-n", "flux-system", "-o", "json"]);
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
    ctx.kubectl(Some(&kc), &["get", "gitrepository,ks", "-n", "flux-system"]);
    let base = [
        "cutover",
        "gitrepository/flux-system",
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
    println!(
        "\n  landed the authored change {} on the new server; `flux reconcile source git flux-system` (the requestedAt annotation)",
        &landed[..7]
    );
    request_reconcile(c, "gitrepository", "flux-system");
    let lw = format!("main@sha1:{landed}");
    let root_applied = poll(T, || ks_at("flux-system", &lw));
    st.check(
        root_applied,
        "the root Kustomization applied the authored change",
    );
    let f = ctx.kubectl(
        Some(&kc),
        &["cutover", "gitrepository/flux-system", "--finish"],
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
        "kubectl cutover gitrepository/flux-system --to {} --secret prod-creds --dry-run --allow-loopback",
        prod.url_https("org/fleet")
            .replacen("127.0.0.1", "localhost", 1)
    )
}

// ------------------------------------------------------------------ step 5

/// apps-wave-2's postBuild in clusters/base/apps.yaml (the last Kustomization of the file).
const WAVE2_POSTBUILD: &str =
    "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-vars\n";

fn step_fleetlint(ctx: &Ctx) -> Step {
    let mut st =
        Step::new("5. fleetlint: a ${VAR} in a path without substituteFrom, caught offline");
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
    println!(
        "\n  (the change under review: apps-wave-2 in clusters/base/apps.yaml loses its postBuild.substituteFrom)"
    );
    let r = ctx.kubectl(None, &["fleetlint", &c, "--overlay", &dev, "--no-cache"]);
    st.check(r.code == 1, "the change is an error finding (exit 1)");
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
    println!("\n  (the fix: postBuild.substituteFrom restored)");
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
        "6. realcluster: a Job that cannot pull, held by the real kustomize-controller, freed with proof",
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
        }
        Err(e) => {
            st.check(false, format!("push the fix: {e}"));
        }
    }
    st
}

/// Starts the ONE real cluster the cluster steps share (tests/realcluster: etcd,
/// kube-apiserver, kube-controller-manager, our node agent with its probe-pod runtime,
/// source- and kustomize-controller); the node's registry holds the images the steps' fleets
/// pull successfully.
fn start_real() -> Real {
    println!(
        "\n  starting the real cluster: etcd, kube-apiserver {}, kube-controller-manager, source- and kustomize-controller {} (first run builds them: tests/realcluster/build.sh)",
        realcluster::bins::KUBE_VERSION,
        realcluster::bins::KC_CURRENT,
    );
    let started = std::time::Instant::now();
    // On a thread of its own: the cluster runs a tokio runtime of its own.
    let c = std::thread::spawn(|| {
        realcluster::Cluster::start(realcluster::ClusterOptions {
            images: vec![REAL_GOOD.to_owned(), CUTOVER_IMAGE.to_owned()],
            ..realcluster::ClusterOptions::default()
        })
    })
    .join();
    match c {
        Ok(Ok(c)) => {
            println!("  up in {:.1}s", started.elapsed().as_secs_f64());
            Ok(c)
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the start thread panicked".into()),
    }
}

/// Polls `f` every 500 ms until true or `timeout` passes.
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

const PLUGINS: [&str; 5] = [
    "unstick",
    "podresolve",
    "markercheck",
    "cutover",
    "fleetlint",
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
    let mut missing = vec![];
    for p in PLUGINS {
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
        for p in PLUGINS {
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
        time_scale: cli.time_scale,
        work,
    };
    let want = |s: &str| cli.step.is_empty() || cli.step.iter().any(|x| x == s);
    let mut steps = vec![];
    let mut fleet: Option<RunningScenario> = None;
    if want("markercheck") {
        steps.push(step_markercheck(&ctx));
    }
    if want("unstick") {
        steps.push(step_unstick(&ctx, &mut fleet).await);
    }
    // One real cluster for every step that needs one, started once.
    let real: Option<Real> = ["podresolve", "cutover", "realcluster"]
        .iter()
        .any(|s| want(s))
        .then(start_real);
    let mut git_servers = vec![];
    if let Some(real) = &real {
        if want("podresolve") {
            steps.push(step_podresolve(&ctx, real));
        }
        if want("cutover") {
            steps.push(step_cutover(&ctx, real, &mut git_servers));
        }
    }
    if want("fleetlint") {
        steps.push(step_fleetlint(&ctx));
    }
    if let Some(real) = &real
        && want("realcluster")
    {
        steps.push(step_realcluster(&ctx, real));
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
    if cli.keep
        && let Some(Ok(c)) = &real
    {
        let mut extra = String::new();
        if want("podresolve") {
            extra.push_str(&format!(
                "  kubectl podresolve {GIT_HOST} --expect {PIN} -n flux-system    # CoreDNS hosts pin vs the upstream's {UPSTREAM}\n  kubectl podresolve {GIT_HOST} --from deploy/source-controller -n flux-system\n"
            ));
        }
        if let Some(prod) = git_servers.get(1) {
            extra.push_str(&format!(
                "  kubectl get gitrepository,ks -n flux-system       # the cutover step's prod fleet, on prod's Git server\n  {}\n",
                real_cutover_keep(prod)
            ));
        }
        if want("realcluster") {
            extra.push_str(&format!("  kubectl unstick ks/{REAL_KS} --dry-run\n"));
        }
        println!(
            "\nThe real cluster (kube-apiserver {}, source-/kustomize-controller {}) is still running. In another shell:\n  export KUBECONFIG={}\n  export PATH={}:$PATH\n  kubectl get --raw /version\n  kubectl get --raw '/readyz?verbose'\n  kubectl get deploy,pods -n flux-system\n  kubectl unstick --all\n{extra}",
            realcluster::bins::KUBE_VERSION,
            realcluster::bins::KC_CURRENT,
            c.kubeconfig().display(),
            ctx.bin_dir.display(),
        );
        if fleet.is_none() {
            println!("Ctrl-C stops it.");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    if cli.keep {
        if let Some(run) = &fleet {
            let podresolve = if run.podexec.is_some() {
                format!(
                    "  kubectl podresolve podinfo-frontend -n apps      # a fleet Service, from a pod\n  kubectl podresolve {FRONTEND_HOST} --expect {GATEWAY_VIP}\n  kubectl podresolve {FRONTEND_HOST} --from deploy/source-controller -n flux-system\n"
                )
            } else {
                format!(
                    "  (no podresolve: this twin runs no probe pods; needs {})\n",
                    twin::podexec::missing_prerequisites().join(", ")
                )
            };
            let cmds = keep_commands(run);
            println!(
                "\nThe fleet twin is still running (healthy, at the fix revision). In another shell:\n  export KUBECONFIG={}\n  export PATH={}:$PATH\n  kubectl get ks -n flux-system\n  kubectl unstick --all\n\n  # break apps-wave-1: the image-automation bare-tag commit (image: 0.1.1), pushed to the demo's Git server\n  {}\n  kubectl unstick ks/apps-wave-2 --dry-run        # walks dependsOn to apps-wave-1, names 0.1.1\n  kubectl unstick ks/apps-wave-1 --dry-run\n  # fix it (the full image reference back), then free the wave\n  {}\n  kubectl unstick ks/apps-wave-1 --yes --cascade\n\n{podresolve}  kubectl markercheck {}/clusters\n  kubectl fleetlint {}/clusters --graph\n  {}   # the cutover preflight, same server under another name\nCtrl-C stops it.",
                run.twin.kubeconfig_path().display(),
                ctx.bin_dir.display(),
                cmds.break_wave,
                cmds.fix_wave,
                ctx.repo_root.display(),
                ctx.repo_root.display(),
                cmds.cutover,
            );
            let _ = tokio::signal::ctrl_c().await;
        } else if real.is_none() {
            println!("\n--keep: the fleet twin was not started (run the unstick step)");
        }
    }
    // process::exit runs no destructors: stop the twin (Git servers, models, temp dirs) first.
    // The real cluster owns a tokio runtime: drop it off this runtime's threads.
    drop(git_servers);
    if let Some(c) = real {
        let _ = std::thread::spawn(move || drop(c)).join();
    }
    drop(fleet);
    drop(ctx);
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
