//! `kubectl cutover` end to end on the real cluster (tests/realcluster): execute, `--finish`,
//! the preflight's verdicts and explanations, a GitRepository that does not exist. It runs
//! the REAL binary against the real kube-apiserver (through the harness's fault proxy, whose
//! request log shows every PATCH and watch the binary sent), a GitRepository and a root
//! Kustomization reconciled by the real source-controller and kustomize-controller, two Git
//! servers (old and new: HTTPS with their own CAs and basic auth). The controllers run as host
//! processes on this machine, so the new URL is `https://127.0.0.1:PORT/...` and every run
//! but the loopback tests' passes `--allow-loopback` (the case the flag exists for, see
//! [`common::loopback_allowed`]).
//!
//! Each test has its own namespace (GitRepository and root Kustomization of that name, applied
//! by itself from `clusters/prod/flux-system/gotk-sync.yaml` as after `flux bootstrap`), its
//! own Git servers and its own proxy, so tests run in parallel on the binary's one cluster.
//! The tests that need "source-controller has not handled the patch yet" stop the real
//! source-controller process (SIGSTOP, SIGCONT when done, also on panic): deterministic, no
//! timing. They hold [`SOURCE`] exclusively while a controller is stopped (their fleet starts
//! under the shared hold first); every other test holds it shared.

use std::time::Duration;

use super::common::*;
use realcluster::Cluster;
use realcluster::proxy::FaultProxy;
use realcluster::testkit::{condition, eventually};
use serde_json::{Value, json};
use twin::git::{GitServer, GitServerOptions};
use twin::testkit::{PluginRun, interrupt, plugin_command, run_command, run_plugin};

/// Held shared by every test (for its whole run), exclusively by the tests that stop
/// source-controller or kustomize-controller (only while it is stopped).
static SOURCE: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Real-time bound on waiting for the real controllers (a loaded 2-core machine).
const T: Duration = Duration::from_secs(180);

/// The Secret the cutover moves the source to: the new server's token and CA.
const NEW_SECRET: &str = "new-creds";

/// One test's fleet: GitRepository + root Kustomization `ns` in namespace `ns`. Also the
/// fleet of `kubectl gitops mcp`'s source tests ([`Fleet::start_on`] their own cluster).
pub(crate) struct Fleet {
    pub(crate) c: realcluster::Lease,
    pub(crate) ns: String,
    pub(crate) old: GitServer,
    pub(crate) new: GitServer,
    work: tempfile::TempDir,
    /// `release 0..n`.
    commits: Vec<String>,
    /// The commit the cluster runs (the old server's main).
    pub(crate) head: String,
    proxy: FaultProxy,
}

/// The namespace goes with the test (its Git servers stop with it): a GitRepository left
/// polling a stopped server would take one of source-controller's two workers for its fetch
/// each interval and slow every later test's fleet.
impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self
            .c
            .kubectl(&["delete", "namespace", &self.ns, "--wait=false"]);
    }
}

impl Fleet {
    /// Starts the fleet and waits until the real controllers run the head. `new_level`: the
    /// new server's main is the head (else one commit behind it).
    async fn start(ns: &str, new_level: bool) -> Fleet {
        let new_main = if new_level { 1 } else { 0 };
        Fleet::start_with(ns, 2, 1, new_main, true).await
    }

    /// `n` commits (`release 0..n`); the old server's main (what the cluster runs) is commit
    /// `old_main`, the new server's `new_main` (both servers hold commits `0..n`).
    /// `self_applied: false`: the root Kustomization applies only `clusters/prod/apps` (the
    /// GitRepository and the root exist only because the test applied gotk-sync.yaml: no
    /// owner label, in no inventory).
    async fn start_with(
        ns: &str,
        n: usize,
        old_main: usize,
        new_main: usize,
        self_applied: bool,
    ) -> Fleet {
        Fleet::start_on(&execute_cluster(), ns, n, old_main, new_main, self_applied).await
    }

    /// [`Fleet::start_with`] on the cluster `c` (a group of tests other than this module's).
    pub(crate) async fn start_on(
        c: &realcluster::Lease,
        ns: &str,
        n: usize,
        old_main: usize,
        new_main: usize,
        self_applied: bool,
    ) -> Fleet {
        let (old, new) = fleet_servers(GitServerOptions::default());
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        git(w, &["init", "-q", "-b", "main"], &[]);
        // The GitRepository polls every 5 s (real time), so a commit landed on the new
        // server is fetched within seconds; the root runs every 10 minutes, i.e. only when
        // its source's artifact changes or its spec does. A failed root run is retried after
        // 5 s (retryInterval; the default is the interval): seen once under load, a build of
        // a complete artifact failed on a missing directory of the controller's temp copy
        // and would otherwise have waited 10 minutes.
        let sync = Sync {
            name: ns,
            url: &old.url_https("org/fleet"),
            source_interval: "5s",
            root_path: if self_applied {
                "./clusters/prod"
            } else {
                "./clusters/prod/apps"
            },
            retry_interval: Some("5s"),
        }
        .yaml();
        write_bootstrap_layout(w, &sync);
        let mut commits = Vec::new();
        for i in 0..n {
            std::fs::write(
                w.join("clusters/prod/apps.yaml"),
                format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: release\n  namespace: {ns}\ndata:\n  n: \"{i}\"\n"),
            )
            .unwrap();
            std::fs::write(
                w.join("clusters/prod/apps/app.yaml"),
                format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\ndata:\n  n: \"{i}\"\n"),
            )
            .unwrap();
            git(w, &["add", "-A"], &[]);
            git(w, &["commit", "-q", "-m", &format!("release {i}")], &[]);
            commits.push(git(w, &["rev-parse", "HEAD"], &[]));
        }
        let last = commits[n - 1].clone();
        push(w, &old, &old.url_https("org/fleet"), &last, TOKEN);
        push(w, &new, &new.url_https("org/fleet"), &last, NEW_TOKEN);
        old.set_branch("org/fleet", "main", &commits[old_main])
            .unwrap();
        new.set_branch("org/fleet", "main", &commits[new_main])
            .unwrap();
        let head = commits[old_main].clone();
        let proxy = FaultProxy::start(c).await.unwrap();
        let f = Fleet {
            c: c.clone(),
            ns: ns.into(),
            old,
            new,
            work,
            commits,
            head,
            proxy,
        };
        let _ = c.kubectl(&["create", "namespace", ns]);
        let both = format!("{}{}", f.old.ca_pem(), f.new.ca_pem());
        f.secret(ns, TOKEN, &both);
        f.secret(NEW_SECRET, NEW_TOKEN, f.new.ca_pem());
        c.apply_yaml(&sync).unwrap();
        f.root_applied(&f.head_rev());
        f
    }

    fn secret(&self, name: &str, token: &str, ca: &str) {
        basic_auth_secret(&self.c, &self.ns, name, token, Some(ca));
    }

    pub(crate) fn head_rev(&self) -> String {
        format!("main@sha1:{}", self.head)
    }

    pub(crate) fn old_url(&self) -> String {
        self.old.url_https("org/fleet")
    }

    pub(crate) fn to(&self) -> String {
        self.new.url_https("org/fleet")
    }

    /// Waits until the root Kustomization is Ready with `revision` applied; panics after [`T`]
    /// with both objects' status.
    fn root_applied(&self, revision: &str) -> Value {
        wait_root_applied(&self.c, &self.ns, revision, T)
    }

    pub(crate) fn root(&self) -> Value {
        self.c
            .get_json(&["-n", &self.ns, "get", "kustomization", &self.ns])
    }

    /// The GitRepository as it is now.
    pub(crate) fn live(&self) -> Value {
        self.c
            .get_json(&["-n", &self.ns, "get", "gitrepository", &self.ns])
    }

    fn target(&self) -> String {
        format!("gitrepo/{}", self.ns)
    }

    /// `gitrepo/NS -n NS --to NEW --secret new-creds --yes` followed by `extra`.
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            self.target().as_str(),
            "-n",
            &self.ns,
            "--to",
            &self.to(),
            "--secret",
            NEW_SECRET,
            "--yes",
        ]
        .map(String::from)
        .to_vec();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    /// [`Fleet::args`] for a preflight only: `--dry-run` instead of `--yes` (the two
    /// conflict), followed by `extra`.
    fn dry_args(&self, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = self
            .args(&["--dry-run"])
            .into_iter()
            .filter(|a| a != "--yes")
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    /// `reconcile.fluxcd.io/requestedAt` on the root Kustomization, as `flux reconcile ks`
    /// writes it: its run comes now, as it would at its interval.
    fn request_root_reconcile(&self) {
        let requested = jiff::Timestamp::now().to_string();
        self.c
            .kubectl(&[
                "-n",
                &self.ns,
                "annotate",
                "--overwrite",
                "kustomization",
                &self.ns,
                &format!("reconcile.fluxcd.io/requestedAt={requested}"),
            ])
            .unwrap();
    }

    /// `--finish` for this fleet followed by `extra`.
    fn finish_args(&self, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [self.target().as_str(), "-n", &self.ns, "--finish"]
            .map(String::from)
            .to_vec();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }

    /// Runs the real binary through the proxy (with `--allow-loopback` for the new URL).
    async fn run(&self, args: &[String]) -> PluginRun {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = run_plugin(
            BIN,
            self.proxy.kubeconfig(),
            &loopback_allowed(&args),
            RUN_TIMEOUT,
        )
        .await;
        if std::env::var_os("CUTOVER_SHOW").is_some() {
            eprintln!("$ kubectl cutover {args:?}\n{}", r.all());
        }
        r.assert_no_secrets();
        r
    }

    /// Runs the real binary through the proxy with exactly `args` (no `--allow-loopback`).
    async fn run_raw(&self, args: &[&str]) -> PluginRun {
        let r = run_plugin(BIN, self.proxy.kubeconfig(), args, RUN_TIMEOUT).await;
        r.assert_no_secrets();
        r
    }

    /// [`Fleet::run`] with extra environment variables (e.g. `SSL_CERT_FILE`).
    async fn run_env(&self, env: &[(&str, &std::ffi::OsStr)], args: &[&str]) -> PluginRun {
        let mut cmd = plugin_command(BIN, self.proxy.kubeconfig(), &loopback_allowed(args));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let r = run_command(cmd, RUN_TIMEOUT).await;
        r.assert_no_secrets();
        r
    }

    /// The binary's command through the proxy, to spawn.
    fn command(&self, args: &[String]) -> tokio::process::Command {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        plugin_command(BIN, self.proxy.kubeconfig(), &loopback_allowed(&args))
    }

    /// PATCH requests the binary sent for this fleet's GitRepository.
    fn gitrepo_patches(&self) -> Vec<String> {
        let path = format!("/namespaces/{}/gitrepositories/{}", self.ns, self.ns);
        self.proxy
            .requests()
            .into_iter()
            .filter(|r| r.method == "PATCH" && r.path.contains(&path))
            .map(|r| r.path)
            .collect()
    }

    /// Waits until the live GitRepository carries the cutover's patch (secretRef new-creds).
    fn patched(&self) {
        eventually(T, "the cutover patched the GitRepository", || {
            (self.live()["spec"]["secretRef"]["name"] == NEW_SECRET).then_some(())
        });
    }

    /// The live spec is the one before the cutover.
    pub(crate) fn assert_restored(&self) {
        let l = self.live();
        assert_eq!(l["spec"]["url"], json!(self.old_url()), "{l}");
        assert_eq!(l["spec"]["secretRef"]["name"], json!(self.ns), "{l}");
    }
}

/// The hold line every run prints for GitRepository `ns/ns`, `who` being what it says about who
/// left the hold (preflight::hold_message).
fn hold_text(ns: &str, who: &str) -> String {
    format!(
        "GitRepository {ns}/{ns} carries the hold kustomize.toolkit.fluxcd.io/reconcile: \
         disabled{who}: the root Kustomization neither reverts nor applies its spec.url while it \
         is there. Remove it once the committed spec.url is the live one: kubectl cutover \
         gitrepository/{ns} -n {ns} --finish (proves the root applies it, then removes the \
         hold), or by hand: kubectl annotate gitrepository -n {ns} {ns} \
         kustomize.toolkit.fluxcd.io/reconcile-"
    )
}

/// [`hold_text`]'s `who` for a hold a `--hold-root` run added and kept when it ended.
const KEPT_BY_HOLD_ROOT: &str = " that kubectl cutover --hold-root added and keeps until \
    --finish (no cutover is in flight: no cutover.cluster-loop.dev/in-flight mark)";

/// [`hold_text`]'s `who` for a hold whose run was interrupted (its in-flight mark is there).
const LEFT_BY_INTERRUPTED_RUN: &str = ", left behind by an interrupted kubectl cutover \
    --hold-root run (its cutover.cluster-loop.dev/in-flight mark is still there)";

/// The root Kustomization is held (`kustomize.toolkit.fluxcd.io/reconcile: disabled` on `o`).
pub(crate) fn held(o: &Value) -> bool {
    o["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/reconcile"] == "disabled"
}

/// The top-level keys of a pretty-printed JSON object, in the order printed (two-space indent).
fn top_level_keys(json: &str) -> Vec<String> {
    json.lines()
        .filter_map(|l| l.strip_prefix("  \""))
        .filter_map(|l| l.split_once('"').map(|(k, _)| k.to_string()))
        .collect()
}

/// The real source-controller process, stopped (SIGSTOP) until this is dropped (SIGCONT):
/// nothing handles a GitRepository change meanwhile. Hold [`SOURCE`] exclusively.
struct SourceStopped(u32);

impl SourceStopped {
    fn new(c: &Cluster) -> SourceStopped {
        let (_, pid) = c
            .host_processes()
            .into_iter()
            .find(|(pod, _)| pod.starts_with("flux-system/source-controller"))
            .expect("source-controller runs as a host process");
        signal(pid, "-STOP");
        // Stopped once the kernel says so (state T in /proc/PID/stat).
        eventually(Duration::from_secs(10), "source-controller stopped", || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next());
            (state == Some(Some('T'))).then_some(())
        });
        SourceStopped(pid)
    }
}

impl Drop for SourceStopped {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill {sig} {pid}");
}

/// The line (1-based) of `spec.url` of the GitRepository in `text` (the first `  url: `).
fn url_line(text: &str) -> usize {
    text.lines().position(|l| l.starts_with("  url: ")).unwrap() + 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_is_refused_then_level_cuts_over_at_the_same_revision() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-behind", false).await;
    let r = f.run(&f.args(&[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout
            .contains("the new server's main is 1 commit behind what the cluster runs"),
        "{}",
        r.stdout
    );
    assert!(
        f.gitrepo_patches().is_empty(),
        "a refused cutover patches nothing"
    );
    f.assert_restored();

    // Level: the new server's main is the head the cluster runs.
    push(f.work.path(), &f.new, &f.to(), &f.head, NEW_TOKEN);
    let r = f
        .run(&f.args(&["--hold-root", "--timeout", "120s", "-o", "json"]))
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(
        top_level_keys(&r.stdout)[..5],
        ["apiVersion", "kind", "mode", "preflight", "patch"],
        "declaration order, not alphabetical"
    );
    let v = r.json();
    assert_eq!(v["apiVersion"], "cutover.cluster-loop.dev/v1");
    assert_eq!(v["kind"], "CutoverReport");
    assert_eq!(v["mode"], "execute");
    assert_eq!(v["result"]["ending"], "cutOver", "{v}");
    assert_eq!(v["result"]["revision"], json!(f.head_rev()));
    assert_eq!(v["preflight"]["relation"]["relation"], "identical");
    // The authored value is still the old URL: reported with the file and the change.
    assert_eq!(
        v["preflight"]["authored"]["locations"][0]["file"],
        SYNC_FILE
    );
    assert!(
        v["preflight"]["authoredPatch"][0]["diff"]
            .as_str()
            .unwrap()
            .contains(&format!("+  url: {}", f.to())),
        "{v}"
    );
    // The real source-controller fetched from the new URL with the new Secret: Ready at the
    // same revision, for the patched generation.
    let o = f.live();
    assert_eq!(o["spec"]["url"], json!(f.to()));
    assert_eq!(o["spec"]["secretRef"]["name"], NEW_SECRET);
    assert_eq!(o["status"]["artifact"]["revision"], json!(f.head_rev()));
    assert_eq!(condition(&o, "Ready")["status"], "True", "{o}");
    assert!(
        o["status"]["observedGeneration"].as_i64() >= o["metadata"]["generation"].as_i64(),
        "{o}"
    );
    // The cutover patch (with the in-flight mark), then the one that removes the mark once
    // the new URL is proven and writes the record.
    let patches = f.gitrepo_patches();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert!(
        patches[0].contains("fieldManager=kubectl-cutover"),
        "{patches:?}"
    );
    // The end of a proven run (the record) has a manager kustomize-controller's apply
    // cleanup does not strip (it strips Update managers named kubectl*).
    assert!(
        patches[1].contains("fieldManager=cluster-loop.dev%2Fcutover")
            || patches[1].contains("fieldManager=cluster-loop.dev/cutover"),
        "{patches:?}"
    );
    assert!(
        o["metadata"]["annotations"]
            .get("cutover.cluster-loop.dev/in-flight")
            .is_none(),
        "a proven cutover leaves no in-flight mark: {o}"
    );
    assert!(held(&o), "--hold-root keeps the root from reverting: {o}");
    // The record of what the cutover set, for --finish.
    let record: Value = serde_json::from_str(
        o["metadata"]["annotations"]["cutover.cluster-loop.dev/cut-over"]
            .as_str()
            .unwrap_or_else(|| panic!("no cut-over record: {o}")),
    )
    .unwrap();
    assert_eq!(record["from"], json!(f.old_url()), "{record}");
    assert_eq!(record["to"], json!(f.to()), "{record}");
    // The root keeps its applied revision (a cutover is not a rollback).
    assert_eq!(
        f.root()["status"]["lastAppliedRevision"],
        json!(f.head_rev())
    );

    // --finish before the authored change lands: not verified, the hold stays and is named as
    // the one this --hold-root run kept when it ended, not as one a killed run left behind
    // (session 6 trial).
    let r = f.run(&f.finish_args(&[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("not verified"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&hold_text(&f.ns, KEPT_BY_HOLD_ROOT)),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("left behind"), "{}", r.stdout);
    assert!(!r.stdout.contains("killed"), "{}", r.stdout);
    assert!(held(&f.live()));

    // Session 6 trial: the URL this completed --hold-root run left live is the earlier
    // cutover's (spec.url's field manager says so), not "hand-patched".
    let r = f.run(&dry(&f, &f.to(), &["--secret", NEW_SECRET])).await;
    assert_eq!(r.code, 1, "drift is a finding: {}", r.all());
    assert!(
        r.stdout.contains(&format!(
            "the live one is {}: the live URL is the one an earlier cutover patched in \
             (spec.url's field manager is kubectl-cutover) (kept only by the \
             kustomize.toolkit.fluxcd.io/reconcile: disabled hold",
            f.to()
        )),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("hand-patched"), "{}", r.stdout);

    // Trial item 9: the source must not fetch the pushed commit by itself (interval 10m, a
    // spec change the root leaves alone while held), so --finish meets "pushed, not fetched
    // yet" for certain.
    patch_live(
        &f,
        "gitrepository",
        "merge",
        &json!({"spec": {"interval": "10m"}}),
    );
    eventually(T, "the source handled the 10m interval", || {
        let o = f.live();
        (o["status"]["observedGeneration"] == o["metadata"]["generation"]).then_some(())
    });
    // Land the authored change through the new server, as the plan said.
    let w = f.work.path();
    let text = std::fs::read_to_string(w.join(SYNC_FILE))
        .unwrap()
        .replace(&f.old_url(), &f.to())
        .replace(
            &format!("secretRef:\n    name: {}", f.ns),
            &format!("secretRef:\n    name: {NEW_SECRET}"),
        );
    std::fs::write(w.join(SYNC_FILE), &text).unwrap();
    git(
        w,
        &[
            "commit",
            "-q",
            "-am",
            "move the source to the new Git server",
        ],
        &[],
    );
    let landed = git(w, &["rev-parse", "HEAD"], &[]);
    push(w, &f.new, &f.to(), &landed, NEW_TOKEN);
    let want = format!("main@sha1:{landed}");
    assert_ne!(
        f.live()["status"]["artifact"]["revision"],
        json!(want),
        "not fetched yet"
    );
    // --finish right after the push: not "land the authored change first" but a source
    // reconcile request, the fetch, the root's apply, verified.
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stderr.contains(&format!(
            "is at {} but main at {} is at {}: requesting a source reconcile",
            &f.head[..12],
            f.to(),
            &landed[..12]
        )),
        "{}",
        r.stderr
    );
    assert_eq!(
        top_level_keys(&r.stdout)[..3],
        ["apiVersion", "kind", "verified"]
    );
    let v = r.json();
    assert_eq!(v["kind"], "CutoverFinishReport");
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["holdRemoved"], true);
    assert_eq!(v["rootRevision"], json!(want));
    assert_eq!(v["authoredUrl"], json!(f.to()));
    assert_eq!(
        v["authoredAt"],
        json!(format!("{SYNC_FILE}:{}", url_line(&text)))
    );
    let l = f.live();
    assert!(!held(&l), "hold removed: {l}");
    assert_eq!(l["spec"]["url"], json!(f.to()));
    assert!(
        l["metadata"]["annotations"]
            .get("cutover.cluster-loop.dev/cut-over")
            .is_none(),
        "a verified --finish removes the record: {l}"
    );
}

/// Trial3 #10: a cutover proven without --hold-root whose URL was never committed; the root
/// Kustomization's next run (requested here, as its interval would) applies the committed old
/// URL again. `--finish` then found the committed and live URLs equal (both the old one) and
/// said "verified". The cutover's record says what it set: `--finish` says it was reverted,
/// naming kustomize-controller as spec.url's writer, exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_after_the_root_reverted_a_proven_cutover_says_reverted() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-reverted", true).await;
    let r = f.run(&f.args(&["--timeout", "120s"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(f.live()["spec"]["url"], json!(f.to()));
    f.request_root_reconcile();
    let old = f.old_url();
    eventually(T, "the real root Kustomization reverts spec.url", || {
        (f.live()["spec"]["url"] == json!(old)).then_some(())
    });
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false, "{v}");
    assert_eq!(v["revertedCutover"]["to"], json!(f.to()), "{v}");
    assert_eq!(v["revertedCutover"]["from"], json!(old), "{v}");
    let r = f.run(&f.finish_args(&[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout
            .contains(&format!("the cutover to {} (proven at", f.to()))
            && r.stdout.contains(&format!(
                "was reverted: spec.url is {old} again, written by kustomize-controller"
            )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("not verified: the cutover was reverted"),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("verified: the committed"),
        "{}",
        r.stdout
    );
}

/// Source-controller stopped, so the binary is mid-wait: SIGINT restores the spec, exit 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_wait_rolls_back() {
    // The fleet starts under the shared hold (its reconcile needs source-controller), so
    // only the window with a controller stopped is exclusive.
    let f = {
        let _shared = SOURCE.read().await;
        Fleet::start("cutover-sigint", true).await
    };
    let _only = SOURCE.write().await;
    let stopped = SourceStopped::new(&f.c);
    let child = f
        .command(&f.args(&["--hold-root", "--timeout", "300s"]))
        .spawn()
        .unwrap();
    f.patched();
    let out = interrupt(child, T).await;
    drop(stopped);
    assert_eq!(out.code, 130, "{}", out.all());
    assert!(out.stdout.contains("interrupted"), "{}", out.stdout);
    out.assert_no_secrets();
    f.assert_restored();
    let l = f.live();
    assert!(!held(&l), "the hold this run added is removed: {l}");
    assert!(
        l["metadata"]["annotations"]
            .get("cutover.cluster-loop.dev/in-flight")
            .is_none(),
        "{l}"
    );
    // The restored source is served by the real source-controller again, from the old URL.
    eventually(T, "Ready from the old URL", || {
        let o = f.live();
        (condition(&o, "Ready")["status"] == "True"
            && o["status"]["observedGeneration"] == o["metadata"]["generation"])
            .then_some(())
    });
}

/// Source-controller stopped for the whole run: no proof before --timeout, rolled back, and
/// the message says what was missing (the real observedGeneration < generation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_proof_before_the_deadline_is_rolled_back() {
    // The fleet starts under the shared hold (its reconcile needs source-controller), so
    // only the window with a controller stopped is exclusive.
    let f = {
        let _shared = SOURCE.read().await;
        Fleet::start("cutover-noproof", true).await
    };
    let _only = SOURCE.write().await;
    let before = f.live();
    let stopped = SourceStopped::new(&f.c);
    let r = f.run(&f.args(&["--hold-root", "--timeout", "3s"])).await;
    drop(stopped);
    assert_eq!(r.code, 1, "{}", r.all());
    let observed = before["status"]["observedGeneration"].as_i64().unwrap();
    let patched = before["metadata"]["generation"].as_i64().unwrap() + 1;
    // The controller's Deployment still reads as running (SIGSTOP): the message says both
    // causes the status cannot tell apart, and does not claim the new URL never answered.
    assert!(
        r.stdout.contains(&format!(
            "no proof within 3s: no fetch of the new spec ended (status.observedGeneration \
             {observed} < generation {patched}): either {} did not answer in time, or \
             source-controller never got to it",
            f.to()
        )),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("never answered"), "{}", r.stdout);
    assert!(
        r.stdout.contains("is still from the old URL's fetch"),
        "{}",
        r.stdout
    );
    f.assert_restored();
    assert!(!held(&f.live()));
}

/// Preflight passes with new-creds; the token is revoked while source-controller is stopped
/// (after the patch, before its fetch). Started again, the real source-controller fails at
/// the new URL and the binary restores the old spec, quoting the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_failing_after_the_patch_is_rolled_back() {
    // The fleet starts under the shared hold (its reconcile needs source-controller), so
    // only the window with a controller stopped is exclusive.
    let f = {
        let _shared = SOURCE.read().await;
        Fleet::start("cutover-revoked", true).await
    };
    let _only = SOURCE.write().await;
    let stopped = SourceStopped::new(&f.c);
    let child = tokio::spawn(run_command(
        f.command(&f.args(&["--hold-root", "--timeout", "120s"])),
        RUN_TIMEOUT,
    ));
    f.patched();
    assert!(f.new.revoke_token("org/fleet", NEW_TOKEN));
    drop(stopped);
    let r = child.await.unwrap();
    assert_eq!(r.code, 1, "{}\nlive: {}", r.all(), f.live());
    r.assert_no_secrets();
    assert!(r.stdout.contains("rolled back:"), "{}", r.stdout);
    assert!(
        r.stdout.contains("the source failed at the new URL:"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("authentication required"), "{}", r.stdout);
    f.assert_restored();
    assert!(!held(&f.live()), "the hold this run added is removed");
}

/// A HelmRelease `gate` in the fleet's namespace that the root health-checks; no
/// helm-controller runs, so its status is what [`set_gate`] writes (the status subresource,
/// as helm-controller would). `ready`: the release is installed (kstatus Current).
fn set_gate(f: &Fleet, ready: bool) {
    // Mid-run, helm-controller writes Ready=Unknown and Reconciling=True (kstatus
    // InProgress either way); done, Ready=True and no Reconciling (a merge patch replaces
    // the whole list).
    let conditions = if ready {
        json!([{"type": "Ready", "status": "True", "reason": "InstallSucceeded",
            "message": "gate", "lastTransitionTime": "2026-12-01T00:00:00Z"}])
    } else {
        json!([{"type": "Ready", "status": "Unknown", "reason": "Progressing",
            "message": "gate", "lastTransitionTime": "2026-12-01T00:00:00Z"},
            {"type": "Reconciling", "status": "True", "reason": "Progressing",
            "message": "gate", "lastTransitionTime": "2026-12-01T00:00:00Z"}])
    };
    let p = json!({"status": {"observedGeneration": 1, "conditions": conditions}});
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "patch",
        "helmrelease",
        "gate",
        "--subresource=status",
        "--type=merge",
        "-p",
        &p.to_string(),
    ])
    .unwrap();
}

/// `--finish` while the real root Kustomization is mid-run: held in a health check on a
/// HelmRelease kept InProgress (timeout 100h). With a short --timeout it says the run was
/// still in progress at the deadline, judges nothing and keeps the hold; started again, it
/// watches the root and ends verified once the test lets the run complete. No timing: the
/// run ends only when the gate turns Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_waits_for_a_root_run_in_progress_then_verifies() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-finish", true).await;
    let want = f.head_rev();
    let hr = json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "gate", "namespace": f.ns},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "gate",
            "sourceRef": {"kind": "HelmRepository", "name": "gate"}}}}});
    f.c.apply_yaml(&hr.to_string()).unwrap();
    set_gate(&f, false);
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "annotate",
        "gitrepository",
        &f.ns,
        "kustomize.toolkit.fluxcd.io/reconcile=disabled",
    ])
    .unwrap();
    let hc = json!({"spec": {"timeout": "100h", "healthChecks": [{"apiVersion":
        "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "name": "gate",
        "namespace": f.ns}]}});
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "patch",
        "kustomization",
        &f.ns,
        "--type=merge",
        "-p",
        &hc.to_string(),
    ])
    .unwrap();
    let mid = eventually(T, "the root runs its health checks", || {
        let k = f.root();
        let r = condition(&k, "Reconciling");
        (r["status"] == "True"
            && r["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Running health checks")))
        .then_some(k)
    });
    assert_eq!(mid["status"]["lastAppliedRevision"], json!(want));

    // Deadline first: the run cannot finish, so this is exactly "still in progress".
    let r = f
        .run(&f.finish_args(&["--timeout", "2s", "-o", "json"]))
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["holdRemoved"], false);
    let p = &v["inProgressAtDeadline"];
    assert_eq!(
        p["object"],
        json!(format!("Kustomization {0}/{0}", f.ns)),
        "{v}"
    );
    assert_eq!(p["timeout"], "2s");
    let condition_text = p["condition"].as_str().unwrap();
    assert!(
        condition_text.starts_with(
            "Ready=Unknown Progressing: Reconciliation in progress; Reconciling=True \
             Progressing: Running health checks for revision"
        ),
        "{condition_text}"
    );
    assert!(
        !r.stdout.contains("not verified") && !r.stdout.contains("is not Ready"),
        "a deadline is not a failed check: {}",
        r.stdout
    );
    assert!(held(&f.live()), "the hold stays when nothing was judged");
    let r = f.run(&f.finish_args(&["--timeout", "1s"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout
            .contains("not judged: still mid-reconcile at the --timeout deadline (see above)"),
        "{}",
        r.stdout
    );

    // Now --finish starts while the run is in progress and must wait for it.
    let watches = |f: &Fleet| {
        f.proxy
            .requests()
            .iter()
            .filter(|q| {
                q.method == "GET"
                    && q.path
                        .contains(&format!("/namespaces/{}/kustomizations", f.ns))
                    && q.path.contains("watch=")
            })
            .count()
    };
    let before = watches(&f);
    let child = tokio::spawn(run_command(
        f.command(&f.finish_args(&["--timeout", "5m", "-o", "json"])),
        RUN_TIMEOUT,
    ));
    // It is watching the root (the run still blocked): only then let the run complete.
    eventually(T, "--finish watches the root Kustomization", || {
        assert!(
            !child.is_finished(),
            "--finish ended before the run completed"
        );
        (watches(&f) > before).then_some(())
    });
    assert_eq!(condition(&f.root(), "Reconciling")["status"], "True");
    set_gate(&f, true);
    let r = child.await.unwrap();
    assert_eq!(r.code, 0, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["rootRevision"], json!(want));
    assert_eq!(v["holdRemoved"], true);
    assert!(v["inProgressAtDeadline"].is_null());
    assert!(
        r.stderr.contains(&format!(
            "root Kustomization {0}/{0} is mid-reconcile (Ready=Unknown Progressing: \
             Reconciliation in progress; Reconciling=True Progressing: Running health checks",
            f.ns
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains(&format!("root Kustomization {0}/{0} settled", f.ns)),
        "{}",
        r.stderr
    );
    // The run really completed before the verdict: only a successful run records the new
    // generation as observed.
    let root = f.root();
    assert_ne!(
        mid["status"]["observedGeneration"], mid["metadata"]["generation"],
        "{mid}"
    );
    assert_eq!(
        root["status"]["observedGeneration"], mid["metadata"]["generation"],
        "{root}"
    );
    assert!(!held(&f.live()));
}

/// `--to` the URL the source already has: nothing to do, exit 0, nothing patched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn to_the_current_url_is_nothing_to_do() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-noop", true).await;
    let url = f.old_url();
    let target = f.target();
    let args = |extra: &[&str]| -> Vec<String> {
        [target.as_str(), "-n", &f.ns, "--to", &url, "--yes"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let r = f.run(&args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout.contains("already points there") && r.stdout.contains("nothing to do"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("plan:"), "{}", r.stdout);
    let r = f.run(&args(&["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert_eq!(r.json()["mode"], "nothing-to-do");
    assert!(f.gitrepo_patches().is_empty(), "nothing was patched");
}

/// A GitRepository no Kustomization applies (no owner label, in no inventory): the tree at
/// the revision the cluster runs defines it, and the authoring file is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_applied_by_a_kustomization_the_authoring_file_is_still_found() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start_with("cutover-unowned", 2, 1, 1, false).await;
    let live = f.live();
    assert!(
        live["metadata"]["labels"]
            .get("kustomize.toolkit.fluxcd.io/name")
            .is_none(),
        "{live}"
    );
    let r = f.run(&f.dry_args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout.contains(&format!(
            "no Kustomization applies GitRepository {0}/{0}",
            f.ns
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains(&format!("the repository defines it at {SYNC_FILE}")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!("+  url: {}", f.to())),
        "{}",
        r.stdout
    );
}

/// The real kustomize-controller labelled the GitRepository and lists it in the root's
/// inventory; with the labels removed by hand the root is still found, through the inventory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_owner_label_the_root_is_found_by_its_inventory() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-nolabel", true).await;
    let live = f.live();
    assert_eq!(
        live["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"],
        json!(f.ns),
        "the real controller labels what it applies: {live}"
    );
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "label",
        "gitrepository",
        &f.ns,
        "kustomize.toolkit.fluxcd.io/name-",
        "kustomize.toolkit.fluxcd.io/namespace-",
    ])
    .unwrap();
    let r = f.run(&f.dry_args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout
            .contains(&format!("applied by root Kustomization {0}/{0}", f.ns)),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains(&format!("root Kustomization {0}/{0} will revert", f.ns)),
        "{}",
        r.stdout
    );
    let r = f.run(&f.dry_args(&["-o", "json"])).await;
    assert_eq!(r.json()["preflight"]["current"]["rootFoundBy"], "inventory");
    // --finish finds the same root (it said "no root Kustomization applies it" and removed
    // the hold): the root applied the source's revision, whose committed spec.url is the live
    // one, so it is verified.
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], true, "{}", r.stdout);
    assert_eq!(v["rootRevision"], json!(f.head_rev()), "{}", r.stdout);
    assert_eq!(v["authoredUrl"], json!(f.old_url()), "{}", r.stdout);
    assert!(!r.stdout.contains("no root Kustomization"), "{}", r.stdout);
}

/// A cutover killed with SIGKILL after its live patch leaves the in-flight mark; the next run
/// and `--finish` say what it left and how to finish or roll back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_patch_leaves_a_mark_the_next_run_reads() {
    // The fleet starts under the shared hold (its reconcile needs source-controller), so
    // only the window with a controller stopped is exclusive.
    let f = {
        let _shared = SOURCE.read().await;
        Fleet::start("cutover-sigkill", true).await
    };
    let _only = SOURCE.write().await;
    let (old, to) = (f.old_url(), f.to());
    let stopped = SourceStopped::new(&f.c);
    let mut child = f.command(&f.args(&["--timeout", "5m"])).spawn().unwrap();
    f.patched();
    child.start_kill().unwrap();
    let _ = child.wait().await;
    drop(stopped);
    let live = f.live();
    let mark = live["metadata"]["annotations"]["cutover.cluster-loop.dev/in-flight"]
        .as_str()
        .unwrap_or_else(|| panic!("no in-flight mark: {live}"));
    let mark: Value = serde_json::from_str(mark).unwrap();
    assert_eq!(mark["from"], json!(old));
    assert_eq!(mark["to"], json!(to));
    assert_eq!(mark["fromSecretRef"], json!(f.ns));

    let want = "an interrupted cutover".to_string();
    let left = format!("left spec.url at {to} (was {old}): finish or roll back");
    let finish = format!("kubectl cutover gitrepository/{0} -n {0} --to {to}", f.ns);
    let back = format!("kubectl cutover gitrepository/{0} -n {0} --to {old}", f.ns);
    // Another target is refused until the interrupted run is finished or rolled back.
    let third = "https://git.example.test/org/fleet.git";
    let target = f.target();
    let r = f
        .run(&[target.as_str(), "-n", &f.ns, "--to", third, "--dry-run"].map(String::from))
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    for s in [&want, &left, &finish, &back] {
        assert!(r.stdout.contains(s.as_str()), "{s:?} not in:\n{}", r.stdout);
    }
    let r = f.run(&f.finish_args(&[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    for s in [&want, &left, &finish, &back] {
        assert!(r.stdout.contains(s.as_str()), "{s:?} not in:\n{}", r.stdout);
    }
    // Finishing (--to the URL it patched in) is offered: the preflight runs, warns, passes.
    let r = f.run(&f.dry_args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains(&left), "{}", r.stdout);
    assert!(!r.stdout.contains("nothing to do"), "{}", r.stdout);
}

/// `gitrepo/NS -n NS --to TO --dry-run` followed by `extra`, as owned strings.
fn dry(f: &Fleet, to: &str, extra: &[&str]) -> Vec<String> {
    let target = f.target();
    [target.as_str(), "-n", &f.ns, "--to", to, "--dry-run"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_commit_passes_and_shows_the_authored_change() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start_with("cutover-pf-identical", 3, 2, 2, true).await;
    let to = f.to();
    let r = f.run(&dry(&f, &to, &[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout
            .contains("the new server's main is at exactly the commit the cluster runs"),
        "{}",
        r.stdout
    );
    // The committed URL is the old one: the self-reference is reported with the exact change.
    let text = std::fs::read_to_string(f.work.path().join(SYNC_FILE)).unwrap();
    let at = format!("{SYNC_FILE}:{}", url_line(&text));
    assert!(r.stdout.contains(&at), "{at} in {}", r.stdout);
    assert!(
        r.stdout.contains("will revert the live patch"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains(&format!("+  url: {to}")), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("preflight passed (--dry-run: nothing changed)")
    );
    assert!(f.gitrepo_patches().is_empty());
    f.assert_restored();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_branch_behind_is_refused_with_count_and_commit() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start_with("cutover-pf-behind", 15, 14, 0, true).await;
    let to = f.to();
    let r = f.run(&dry(&f, &to, &["--repo"])).await;
    assert_eq!(r.code, 2, "--repo needs a value: {}", r.all());
    let repo = f.work.path().display().to_string();
    for extra in [vec![], vec!["--repo", repo.as_str()]] {
        let r = f.run(&dry(&f, &to, &extra)).await;
        assert_eq!(r.code, 1, "{}", r.all());
        let want = format!(
            "the new server's main is 14 commits behind what the cluster runs; cutting over would roll back to {} release 0",
            &f.commits[0][..7]
        );
        assert!(r.stdout.contains(&want), "want {want:?} in\n{}", r.all());
        assert!(r.stdout.contains("refused"), "{}", r.stdout);
    }
    let j = f.run(&dry(&f, &to, &["-o", "json"])).await;
    assert_eq!(j.code, 1);
    let v = j.json();
    assert_eq!(v["apiVersion"], "cutover.cluster-loop.dev/v1");
    assert_eq!(v["kind"], "CutoverReport");
    assert_eq!(v["mode"], "refused");
    assert!(
        v["preflight"].get("inCluster").is_none(),
        "only with --verify-in-cluster"
    );
    assert_eq!(v["preflight"]["relation"]["relation"], "behind");
    assert_eq!(v["preflight"]["relation"]["behind"], 14);
    assert_eq!(v["preflight"]["go"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_branch_ahead_is_refused_unless_allowed() {
    let _shared = SOURCE.read().await;
    // The cluster runs commit 2 (the real source-controller fetched it); the new server's
    // main is commit 4.
    let f = Fleet::start_with("cutover-pf-ahead", 5, 2, 4, true).await;
    let to = f.to();
    let r = f.run(&dry(&f, &to, &[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout
            .contains("the new server's main is 2 commits ahead of what the cluster runs"),
        "{}",
        r.stdout
    );
    let r = f.run(&dry(&f, &to, &["--allow-forward"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout.contains("allowed by --allow-forward"),
        "{}",
        r.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_and_revoked_tokens_say_authentication_required() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-pf-tokens", true).await;
    let to = f.to();
    let both = format!("{}{}", f.old.ca_pem(), f.new.ca_pem());
    f.secret("wrong", "not-the-token", &both);
    let r = f.run(&dry(&f, &to, &["--secret", "wrong"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("authentication required"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!("{}/wrong", f.ns)),
        "{}",
        r.stdout
    );
    assert!(!r.all().contains("not-the-token"));

    // Revoke the token Flux holds on the new server: the rotation trap.
    assert!(f.new.revoke_token("org/fleet", TOKEN));
    let r = f.run(&dry(&f, &to, &[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("authentication required"), "{}", r.stdout);
    assert!(
        r.stdout.contains("never revoke the one Flux is using"),
        "{}",
        r.stdout
    );
    // A freshly minted token in a new secret works.
    let r = f.run(&dry(&f, &to, &["--secret", NEW_SECRET])).await;
    assert_eq!(r.code, 0, "{}", r.all());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_ca_names_the_secret_key() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-pf-noca", true).await;
    let s = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "no-ca", "namespace": f.ns},
        "stringData": {"username": USER, "password": TOKEN}});
    f.c.apply_yaml(&s.to_string()).unwrap();
    let r = f.run(&dry(&f, &f.to(), &["--secret", "no-ca"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("TLS verification failed"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains(&format!("to secret {}/no-ca under the key `ca.crt`", f.ns)),
        "{}",
        r.stdout
    );
}

/// go-git v5 configureTransport ADDS the secret's ca.crt to the system pool: a server whose
/// CA is in the system bundle passes even when the secret's ca.crt is an unrelated CA (here
/// the old server's). The system bundle is named by SSL_CERT_FILE, as OpenSSL and Go take it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_ca_adds_to_the_system_bundle_not_replaces_it() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-pf-sysca", true).await;
    f.secret("unrelated-ca", TOKEN, f.old.ca_pem());
    let to = f.to();
    let args = dry(&f, &to, &["--secret", "unrelated-ca"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_d, system) = system_bundle_with(f.new.ca_pem());
    let r = f
        .run_env(&[("SSL_CERT_FILE", system.as_os_str())], &args)
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout
            .contains("the system CA bundle plus the secret's ca.crt"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("ok   remote"), "{}", r.stdout);

    // Control: the same secret against the host's own bundle (no test CA in it) is refused,
    // and the message says what was trusted.
    let host = std::path::Path::new("/etc/ssl/certs/ca-certificates.crt");
    let r = f
        .run_env(&[("SSL_CERT_FILE", host.as_os_str())], &args)
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("TLS verification failed"), "{}", r.stdout);
    assert!(
        r.stdout.contains(
            "trusted here: the system CA bundle /etc/ssl/certs/ca-certificates.crt plus the \
             secret's ca.crt"
        ),
        "{}",
        r.stdout
    );

    // An inherited GIT_SSL_CAINFO is this user's git setting, which Flux never sees: it
    // does not widen trust, with or without a ca.crt in the secret.
    let s = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "no-ca", "namespace": f.ns},
        "stringData": {"username": USER, "password": TOKEN}});
    f.c.apply_yaml(&s.to_string()).unwrap();
    let ca_file = f.new.ca_file().as_os_str();
    for secret in ["no-ca", "unrelated-ca"] {
        let a = dry(&f, &to, &["--secret", secret]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = f
            .run_env(
                &[
                    ("GIT_SSL_CAINFO", ca_file),
                    ("SSL_CERT_FILE", host.as_os_str()),
                ],
                &a,
            )
            .await;
        assert_eq!(r.code, 1, "{secret}: {}", r.all());
        assert!(
            r.stdout.contains("TLS verification failed"),
            "{secret}: {}",
            r.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_with_credentials_is_refused_unless_allowed() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-pf-http", true).await;
    let to = f.new.url_http("org/fleet");
    let r = f.run(&dry(&f, &to, &[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains("scheme http is insecure"), "{}", r.stdout);
    // No remote contact was made: the refusal comes first.
    assert!(!r.stdout.contains("answers with the credentials"));
    let r = f.run(&dry(&f, &to, &["--allow-insecure-http"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("travel in clear text"), "{}", r.stdout);
}

/// The failure catalogue's row 1, basic auth over plain `http://`, checked against what the
/// real source-controller v1.9.6 does with it: it does not refuse, it sends the credential in
/// clear text (a GitRepository on the new server's plain listener with the new-creds Secret
/// gets Ready, and the server saw `Authorization: Basic` on `http`). cutover's preflight
/// refuses it as `flux bootstrap git` does, naming the Secret, and says what source-controller
/// would do (the old wording named only bootstrap's refusal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_over_http_is_refused_as_bootstrap_does() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-pf-http-basic", true).await;
    let to = f.new.url_http("org/fleet");
    // What the real controller does with it.
    f.c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: plain, namespace: {}}}\nspec: {{interval: 10m, url: \"{to}\", ref: {{branch: main}}, secretRef: {{name: {NEW_SECRET}}}}}\n",
        f.ns
    ))
    .unwrap();
    let c = f.c.clone();
    let ns = f.ns.clone();
    let ready = tokio::task::spawn_blocking(move || {
        eventually(T, "the real source-controller fetches over http://", || {
            let g = c.get_json(&["-n", &ns, "get", "gitrepository", "plain"]);
            let r = condition(&g, "Ready");
            (r["status"] != "Unknown" && !r.is_null()).then_some(r)
        })
    })
    .await
    .unwrap();
    assert_eq!(
        ready["status"], "True",
        "source-controller refused: {ready:#}"
    );
    assert!(
        f.new.requests().iter().any(|q| q.scheme == "http"
            && q.authorization.as_deref() == Some("Basic")
            && q.user.as_deref() == Some(USER)
            && q.status == 200),
        "source-controller sent basic auth on the plain listener: {:?}",
        f.new.requests()
    );

    let r = f
        .run(&dry(&f, &to, &["--secret", NEW_SECRET, "-o", "json"]))
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let t = v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "transport")
        .unwrap_or_else(|| panic!("no transport check: {v:#}"));
    assert_eq!(t["result"], "fail", "{t:#}");
    let m = t["message"].as_str().unwrap();
    assert!(
        m.contains(&format!(
            "http:// with the credentials of secret {}/{NEW_SECRET}: source-controller v1.9.6 does not refuse it: it sends the credential in clear text",
            f.ns
        )),
        "{m}"
    );
    assert!(
        m.contains("flux bootstrap refuses such a URL (\"scheme http is insecure, pass --allow-insecure-http=true to allow it\")"),
        "{m}"
    );
    assert!(
        m.contains("put the server's CA in the secret as ca.crt"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_patch_changes_only_the_authored_line_in_repo() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-pf-write", true).await;
    let to = f.to();
    let repo = f.work.path().display().to_string();
    let file = f.work.path().join(SYNC_FILE);
    let before = std::fs::read_to_string(&file).unwrap();
    let r = f
        .run(&dry(&f, &to, &["--repo", &repo, "--write-patch"]))
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    let after = std::fs::read_to_string(&file).unwrap();
    assert_eq!(after, before.replace(&f.old_url(), &to));
    assert_ne!(after, before);
    let status = git(f.work.path(), &["status", "--porcelain"], &[]);
    assert_eq!(status, format!("M {SYNC_FILE}"));
    assert!(
        f.gitrepo_patches().is_empty(),
        "--write-patch edits files only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_usage_error() {
    let _shared = SOURCE.read().await;
    let fleet = Fleet::start("cutover-pf-bad", true).await;
    let f = &fleet;
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        async move { f.run(&args).await }
    };
    let r = run(&["ks/x", "-n", &f.ns, "--to", "https://x/y.git"]).await;
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("accepted forms"), "{}", r.stderr);
    let r = run(&[
        "gitrepo/nope",
        "-n",
        &f.ns,
        "--to",
        "https://x/y.git",
        "--dry-run",
    ])
    .await;
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(r.stderr.contains("nope"), "{}", r.stderr);
    // --to is validated before the cluster is contacted: not a URL, a scheme Flux does not
    // take, or credentials in the URL (they would land in spec.url and in every output).
    let before = f.proxy.requests().len();
    for (to, want) in [
        ("git@host:org/fleet.git", "is not a URL"),
        (
            "ftp://host/org/fleet.git",
            "scheme ftp:// is not one source-controller accepts",
        ),
        (
            "https://user:hunter2@host/org/fleet.git",
            "the URL carries credentials",
        ),
    ] {
        let r = f.run(&dry(f, to, &[])).await;
        assert_eq!(r.code, 2, "{to}: {}", r.all());
        assert!(r.stderr.contains(want), "{to}: {}", r.stderr);
        assert!(
            !r.all().contains("hunter2"),
            "credentials echoed: {}",
            r.all()
        );
    }
    assert_eq!(
        f.proxy.requests().len(),
        before,
        "no API request for a bad --to"
    );
    let target = f.target();
    let r = run(&[
        &target,
        "-n",
        &f.ns,
        "--to",
        "https://x/y.git",
        "--repo",
        "/nonexistent",
    ])
    .await;
    assert_eq!(r.code, 2, "{}", r.all());
    // Without --yes and without a terminal, nothing is changed.
    let to = f.to();
    let r = run(&[&target, "-n", &f.ns, "--to", &to]).await;
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(r.stderr.contains("pass --yes"), "{}", r.stderr);
    assert!(f.gitrepo_patches().is_empty());
    f.assert_restored();
}

/// `--finish` on a GitRepository no root Kustomization applies (the real source-controller
/// serves it; the only Kustomization applies `clusters/prod/apps`): there is no committed
/// spec.url to compare the live one with, so it must not claim that verification. It says
/// what it can and cannot verify, removes the hold (it protects nothing without a root) and
/// exits 1 (not verified).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_without_root_is_not_verified() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start_with("cutover-noroot", 2, 1, 1, false).await;
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "annotate",
        "gitrepository",
        &f.ns,
        "kustomize.toolkit.fluxcd.io/reconcile=disabled",
    ])
    .unwrap();
    let r = f.run(&f.finish_args(&[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.contains("no root Kustomization applies it"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("cannot verify the committed spec.url: no Kustomization applies this object"),
        "{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("verified: the committed"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("not verified: see above"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("removed the kustomize.toolkit.fluxcd.io/reconcile hold"),
        "{}",
        r.stdout
    );
    assert!(!held(&f.live()));

    // JSON says the same; a second run has no hold left to remove.
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["holdRemoved"], false);
    assert_eq!(v["liveUrl"], json!(f.old_url()));
    assert!(v["authoredUrl"].is_null());
    assert!(v["rootRevision"].is_null());
}

/// The GitRepository `<ns>/<ns>`, as `kubectl patch --type=<kind> -p <body>`.
fn patch_live(f: &Fleet, resource: &str, kind: &str, body: &Value) {
    patch_live_as(f, "kubectl-patch", resource, kind, body);
}

/// [`patch_live`] with field manager `manager` (kubectl's own is `kubectl-patch`), e.g.
/// `kubectl-cutover` to write exactly what a cutover run writes.
fn patch_live_as(f: &Fleet, manager: &str, resource: &str, kind: &str, body: &Value) {
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "patch",
        resource,
        &f.ns,
        &format!("--type={kind}"),
        &format!("--field-manager={manager}"),
        "-p",
        &body.to_string(),
    ])
    .unwrap();
}

/// Issue 19 item 6: `localhost`, 127.0.0.0/8 and `::1` are refused by the default preflight
/// before any contact (the servers really answer on 127.0.0.1, which proves nothing for a
/// pod), with the reason; `--allow-loopback` turns the refusal into a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_to_is_refused_in_the_default_preflight() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-loopback", true).await;
    let port = f.new.https_addr().port();
    let target = f.target();
    for to in [
        format!("https://127.0.0.1:{port}/org/fleet.git"),
        format!("https://127.3.2.1:{port}/org/fleet.git"),
        format!("https://localhost:{port}/org/fleet.git"),
        format!("https://[::1]:{port}/org/fleet.git"),
        // The IPv4-mapped form of 127.0.0.1 and the unspecified addresses: Linux connects
        // all of them to this machine.
        format!("https://[::ffff:127.0.0.1]:{port}/org/fleet.git"),
        format!("https://0.0.0.0:{port}/org/fleet.git"),
        format!("https://[::]:{port}/org/fleet.git"),
        // http:// with the source's credentials: refused for clear text AND said to be the pod.
        format!("http://localhost:{port}/org/fleet.git"),
    ] {
        let before = f.new.requests().len();
        let r = f
            .run_raw(&[&target, "-n", &f.ns, "--to", &to, "--dry-run"])
            .await;
        assert_eq!(r.code, 1, "{to}: {}", r.all());
        assert!(r.stdout.contains("FAIL loopback"), "{to}: {}", r.stdout);
        assert!(
            r.stdout
                .contains("in a pod, localhost is the pod itself, so source-controller would connect to its own pod"),
            "{to}: {}",
            r.stdout
        );
        assert!(!r.stdout.contains("ok   remote"), "{to}: {}", r.stdout);
        if to.starts_with("http://") {
            assert!(
                r.stdout
                    .contains("FAIL transport http:// with the credentials of secret"),
                "{to}: {}",
                r.stdout
            );
        }
        assert_eq!(
            f.new.requests().len(),
            before,
            "{to}: the server was contacted"
        );
    }
    let to = f.to();
    let r = f
        .run_raw(&[
            &target,
            "-n",
            &f.ns,
            "--to",
            &to,
            "--dry-run",
            "--allow-loopback",
        ])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("warn loopback"), "{}", r.stdout);
    assert!(
        r.stdout.contains("allowed by --allow-loopback"),
        "{}",
        r.stdout
    );
    f.assert_restored();
}

/// Drift is said first on a refusal or a remote failure only as far as it can be read: when
/// the live secretRef's Secret is gone, the refusal (exit 1) is still what is reported, never
/// an error about that Secret (exit 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_live_secret_does_not_turn_a_refusal_into_an_error() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-nooldsecret", true).await;
    f.c.kubectl(&["-n", &f.ns, "delete", "secret", &f.ns])
        .unwrap();
    let port = f.new.https_addr().port();
    for (to, failed) in [
        (
            format!("https://localhost:{port}/org/fleet.git"),
            "loopback",
        ),
        (
            "https://git.example.test/org/fleet.git".to_string(),
            "remote",
        ),
    ] {
        let args = dry(&f, &to, &["--secret", NEW_SECRET, "-o", "json"]);
        let r = f.run(&args).await;
        assert_eq!(r.code, 1, "{to}: {}", r.all());
        let v = r.json();
        assert_eq!(v["mode"], "refused", "{to}: {}", r.stdout);
        assert!(
            v["preflight"]["checks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["id"] == failed && c["result"] == "fail"),
            "{to}: {}",
            r.stdout
        );
    }
}

/// Issue 19 item 6: a name this workstation resolves to the loopback (here through
/// /etc/hosts, in a private mount namespace) is refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_resolving_to_loopback_here_is_refused() {
    if twin::testkit::skip_without_podexec() {
        return;
    }
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-loopname", true).await;
    let to = f.new.url_https_host("org/fleet", "gitea.lab.example");
    let target = f.target();
    let (cmd, _hosts) = workstation_command(
        &[("127.0.0.1".into(), "gitea.lab.example".into())],
        f.proxy.kubeconfig(),
        &[&target, "-n", &f.ns, "--to", &to, "--dry-run"],
    );
    let r = run_command(cmd, RUN_TIMEOUT).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.contains(
            "gitea.lab.example resolves on this workstation to the loopback (127.0.0.1): that answer proves nothing about the Git server, and a pod that gets it connects to itself (in a pod, localhost is the pod itself). Refused:"
        ),
        "{}",
        r.stdout
    );
}

/// Issue 19 item 8: no secretRef and no --secret, and the server requires credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_ref_and_credentials_required_says_pass_secret() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-nosecret", true).await;
    patch_live(
        &f,
        "gitrepository",
        "json",
        &json!([{"op": "remove", "path": "/spec/secretRef"}]),
    );
    assert!(f.live()["spec"].get("secretRef").is_none());
    // Trust the new server's CA as a system CA would, so the 401 is what stops it.
    let (_dir, bundle) = system_bundle_with(f.new.ca_pem());
    let to = f.to();
    let args = dry(&f, &to, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = f
        .run_env(&[("SSL_CERT_FILE", bundle.as_os_str())], &args)
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.contains(
            "the server requires credentials and the GitRepository has no secretRef; pass --secret"
        ),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("<none>"), "{}", r.stdout);
    assert!(!r.stdout.contains("was rejected"), "{}", r.stdout);
}

/// Issue 19 item 7 (terraform-provider-flux#499): before the move the live spec.url was
/// already hand-patched away from the committed one (the real source-controller now fetches
/// from it): said first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_before_the_move_is_said_first() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-drift", true).await;
    let (old, new) = (f.old_url(), f.to());
    patch_live(&f, "gitrepository", "merge", &json!({"spec": {"url": new}}));
    // The hand patch is live and served: Ready from the new URL at the same revision.
    eventually(T, "the source fetched the hand-patched URL", || {
        let o = f.live();
        (o["status"]["observedGeneration"] == o["metadata"]["generation"]
            && condition(&o, "Ready")["status"] == "True")
            .then_some(())
    });
    let text = std::fs::read_to_string(f.work.path().join(SYNC_FILE)).unwrap();
    // --to the live URL (trial item 4): not "nothing to do" (the root reverts it): the drift
    // first, what to commit, exit 1, mode `drift`, nothing patched.
    let r = f.run(&dry(&f, &new, &["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["mode"], "drift", "{}", r.stdout);
    assert_eq!(v["preflight"]["checks"][0]["id"], "drift", "{}", r.stdout);
    assert_eq!(
        v["preflight"]["checks"][0]["message"],
        format!(
            "before this move, the committed spec.url ({SYNC_FILE}:{}) is {old} but the live one is {new}: the cluster already runs a hand-patched URL; the root Kustomization will put the committed value back at its next apply",
            url_line(&text)
        )
    );
    let r = f.run(&dry(&f, &new, &[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(!r.stdout.contains("nothing to do"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "gitrepository {0}/{0} already runs {new} live, but Git does not: the root \
             Kustomization reverts it at its next apply unless the commit changes. Commit \
             spec.url {new} in the file named above and push it, then run kubectl cutover \
             gitrepository/{0} -n {0} --finish",
            f.ns
        )),
        "{}",
        r.stdout
    );
    assert!(f.gitrepo_patches().is_empty(), "nothing was patched");
    // Move back to what Git says: the drift is the first thing reported.
    let r = f.run(&dry(&f, &old, &["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let v = r.json();
    let first = &v["preflight"]["checks"][0];
    assert_eq!(first["id"], "drift", "{}", r.stdout);
    assert_eq!(first["result"], "warn");
    assert_eq!(
        first["message"],
        format!(
            "before this move, the committed spec.url ({SYNC_FILE}:{}) is {old} but the live one is {new}: the cluster already runs a hand-patched URL; the root Kustomization will put the committed value back at its next apply",
            url_line(&text)
        )
    );
    let r = f.run(&dry(&f, &old, &[])).await;
    let first_check = r
        .stdout
        .lines()
        .find(|l| l.starts_with("ok ") || l.starts_with("warn ") || l.starts_with("FAIL "))
        .unwrap_or_default();
    assert!(first_check.starts_with("warn drift"), "{}", r.stdout);
    // Said first even when the new server cannot be read at all (the tree at C comes from the
    // live URL).
    let r = f
        .run(&dry(
            &f,
            "https://git.example.test/org/fleet.git",
            &["-o", "json"],
        ))
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["preflight"]["checks"][0]["id"], "drift", "{}", r.stdout);
    assert!(
        v["preflight"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "remote" && c["result"] == "fail"),
        "{}",
        r.stdout
    );
    // And when the move is refused before --to is contacted (a loopback --to; the tree at C
    // comes from the live URL, which here is the hand-patched one).
    let port = f.new.https_addr().port();
    let r = f
        .run(&dry(
            &f,
            &format!("https://localhost:{port}/org/fleet.git"),
            &["-o", "json"],
        ))
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    let ids: Vec<&str> = v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["drift", "source", "transport", "loopback"],
        "{}",
        r.stdout
    );
    assert_eq!(v["preflight"]["checks"][3]["result"], "fail");
}

/// Moving a hand-patched source back to the committed URL with `--hold-root`: nothing is left to
/// commit, but the hold stays on the GitRepository until `--finish` proves the root applies the
/// committed value; the run says so and names the command (it said "nothing more to do", found
/// by a new-user trial).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_the_committed_url_with_hold_root_names_finish() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-backhold", true).await;
    let (old, new) = (f.old_url(), f.to());
    patch_live(&f, "gitrepository", "merge", &json!({"spec": {"url": new}}));
    eventually(T, "the source fetched the hand-patched URL", || {
        let o = f.live();
        (o["status"]["observedGeneration"] == o["metadata"]["generation"]
            && condition(&o, "Ready")["status"] == "True")
            .then_some(())
    });
    let target = f.target();
    let r = f
        .run_raw(&[
            target.as_str(),
            "-n",
            &f.ns,
            "--to",
            &old,
            "--allow-loopback",
            "--hold-root",
            "--yes",
        ])
        .await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("cut over:"), "{}", r.stdout);
    assert!(!r.stdout.contains("nothing more to do"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "the committed spec.url already agrees; the root is still held \
             (kustomize.toolkit.fluxcd.io/reconcile: disabled): run kubectl cutover \
             gitrepository/{0} -n {0} --finish to prove the root applies it and remove the hold",
            f.ns
        )),
        "{}",
        r.stdout
    );
    let live = f.live();
    assert!(held(&live), "the hold stays until --finish: {live}");
    assert_eq!(live["spec"]["url"], json!(old), "{live}");
}

/// Issue 19 item 7: a suspended root Kustomization is named in the preflight, and `--finish`
/// says it cannot succeed until it is resumed instead of advising to wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_root_is_named_and_finish_does_not_advise_waiting() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-suspended", true).await;
    patch_live(
        &f,
        "kustomization",
        "merge",
        &json!({"spec": {"suspend": true}}),
    );
    let r = f.run(&dry(&f, &f.to(), &[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let want = format!(
        "root Kustomization {0}/{0} is suspended: nothing reverts a live patch of spec.url and \
         nothing applies the committed one, so --finish cannot succeed until it is resumed \
         (flux resume kustomization -n {0} {0})",
        f.ns
    );
    assert!(r.stdout.contains(&want), "{}", r.stdout);
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["notes"], json!([want]), "{}", r.stdout);
    assert!(!r.stdout.contains("wait for it"), "{}", r.stdout);
    // The authored check does not contradict it: nothing reverts now, the first apply after
    // the resume does.
    let r = f.run(&dry(&f, &f.to(), &["-o", "json"])).await;
    let v = r.json();
    let authored = v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "authored")
        .unwrap_or_else(|| panic!("{}", r.stdout))["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        authored.contains(&format!(
            "root Kustomization {0}/{0} is suspended, so nothing reverts the live patch now, but \
             its first apply after it is resumed puts {1} back unless that file changes; commit \
             the change below before resuming it",
            f.ns,
            f.old_url()
        )),
        "{authored}"
    );
    assert!(!authored.contains("within its interval"), "{authored}");
    // The move itself: the real source-controller proves the new URL, the suspended root
    // reverts nothing, and the run says --finish must wait for the resume.
    let r = f.run(&f.args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(r.stdout.contains("cut over:"), "{}", r.stdout);
    let after = r.stdout.split("cut over:").nth(1).unwrap_or_default();
    assert!(after.contains(&want), "{}", r.stdout);
    let live = f.live();
    assert_eq!(live["spec"]["url"], json!(f.to()), "{live}");
    assert_eq!(
        live["spec"]["secretRef"]["name"],
        json!(NEW_SECRET),
        "{live}"
    );
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["liveUrl"], json!(f.to()));
    assert_eq!(v["notes"], json!([want]), "{}", r.stdout);
}

/// A suspended GitRepository: the real source-controller fetches nothing while it is, so no
/// run can prove the new URL. The preflight refuses it with the reason (it would only roll
/// back at --timeout, "the new URL never answered"), and nothing is patched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_source_is_refused_with_the_reason() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-src-suspended", true).await;
    patch_live(
        &f,
        "gitrepository",
        "merge",
        &json!({"spec": {"suspend": true}}),
    );
    let want = format!(
        "GitRepository {0}/{0} is suspended (spec.suspend: true): source-controller fetches \
         nothing while it is, so no fetch can prove the new URL and the run would roll back at \
         --timeout. Refused: resume it first (flux resume source git {0} -n {0})",
        f.ns
    );
    let r = f.run(&dry(&f, &f.to(), &["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["mode"], "refused", "{}", r.stdout);
    let c = v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "source-suspended")
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert_eq!(c["result"], "fail");
    assert_eq!(c["message"], json!(want));
    let r = f.run(&f.args(&[])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.contains("refused: see the failed checks above"),
        "{}",
        r.stdout
    );
    assert!(f.gitrepo_patches().is_empty(), "{:?}", f.gitrepo_patches());
    f.assert_restored();
}

/// `--finish` with a root Kustomization that the real kustomize-controller failed to build at
/// the source's revision (a commit listing a missing file): the reason, and never "wait for
/// it" (each retry fails the same way; it said "has applied X but the source is at Y: wait").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_with_a_root_failing_at_the_source_revision_says_fix_not_wait() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-rootfail", true).await;
    let w = f.work.path();
    std::fs::write(
        w.join("clusters/prod/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- flux-system\n- apps.yaml\n- missing.yaml\n",
    )
    .unwrap();
    git(w, &["commit", "-q", "-am", "list a missing file"], &[]);
    let broken = git(w, &["rev-parse", "HEAD"], &[]);
    push(w, &f.old, &f.old_url(), &broken, TOKEN);
    let rev = format!("main@sha1:{broken}");
    eventually(T, "the root failed at the broken revision", || {
        let k = f.root();
        (f.live()["status"]["artifact"]["revision"] == json!(rev)
            && condition(&k, "Ready")["status"] == "False"
            && k["status"]["lastAttemptedRevision"] == json!(rev))
        .then_some(())
    });
    let r = f
        .run(&f.finish_args(&["--timeout", "60s", "-o", "json"]))
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false);
    assert_eq!(v["inProgressAtDeadline"], Value::Null, "{}", r.stdout);
    let note = v["notes"][0].as_str().unwrap_or_default();
    assert!(
        note.starts_with(&format!(
            "root Kustomization {0}/{0} is not Ready (Ready=False ",
            f.ns
        )),
        "{}",
        r.stdout
    );
    assert!(note.contains("missing.yaml"), "{note}");
    assert!(
        note.contains(&format!(
            "it failed at the source's revision {rev} and still runs {}; waiting does not fix \
             that",
            f.head_rev()
        )),
        "{note}"
    );
    assert!(!r.stdout.contains("wait for it"), "{}", r.stdout);
}

/// A GitRepository the user named that the cluster does not have: exit 3 (the cluster's
/// answer, not a usage error) with a message naming the kind, namespace, name, the context
/// and server asked, and the command that lists what exists (`cluster_loop::error`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_gitrepository_exits_3_naming_it_and_the_context() {
    let _shared = SOURCE.read().await;
    let c = &execute_cluster();
    let proxy = FaultProxy::start(c).await.unwrap();
    // The proxy's kubeconfig: context `proxy`, namespace flux-system.
    let want = format!(
        "error: GitRepository \"fleet\" not found in namespace \"flux-system\" (context \"proxy\", \
         {}); list what exists with: kubectl get gitrepo -A --context proxy\n",
        proxy.server()
    );
    for args in [
        &[
            "gitrepository/fleet",
            "--to",
            "https://git.example.dev/org/fleet.git",
            "--dry-run",
        ][..],
        &["gitrepo/fleet", "--finish"][..],
    ] {
        let out = run_plugin(BIN, proxy.kubeconfig(), args, RUN_TIMEOUT).await;
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr, want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        // Session 6 trial: with -o json the same error is a document on stdout (it printed
        // nothing), its message the stderr line's.
        let json_args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
        let out = run_plugin(BIN, proxy.kubeconfig(), &json_args, RUN_TIMEOUT).await;
        assert_eq!(out.code, 3, "{args:?}: {}", out.stderr);
        assert_eq!(out.stderr, want, "{args:?}");
        assert_eq!(
            out.json(),
            json!({"apiVersion": "cutover.cluster-loop.dev/v1", "kind": "CutoverError",
                "exitCode": 3,
                "error": want.strip_prefix("error: ").unwrap().strip_suffix('\n').unwrap()}),
            "{args:?}"
        );
    }
}

/// Without `--hold-root`, the root Kustomization re-applies the committed URL while the new one
/// is not proven yet (the self-reference trap): the binary sees the live spec change back,
/// rolls back and names the root. "Not proven yet" is held still without stopping
/// source-controller (the root's run downloads the artifact from its storage server): the
/// GitRepository is moved to a shard no source-controller runs here
/// ([`realcluster::HELD_SHARD_LABEL`]), so nothing handles its new spec while its last artifact
/// is still served; the root runs when asked, as at its next interval. This was the last
/// cutover test on the twin's models.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hold_the_root_kustomization_reverts_the_live_patch() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-revert", true).await;
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "label",
        "gitrepository",
        &f.ns,
        &format!("{}=held", realcluster::HELD_SHARD_LABEL),
    ])
    .unwrap();
    let child = tokio::spawn(run_command(
        f.command(&f.args(&["--timeout", "120s"])),
        RUN_TIMEOUT,
    ));
    f.patched();
    f.request_root_reconcile();
    let r = child.await.unwrap();
    assert_eq!(r.code, 1, "{}\nlive: {}", r.all(), f.live());
    r.assert_no_secrets();
    assert!(
        r.stdout.contains(&format!(
            "spec.url was changed back to {} by Kustomization {} (the root that applies this object)",
            f.old_url(),
            f.ns
        )),
        "{}",
        r.stdout
    );
    f.assert_restored();
    assert!(!held(&f.live()));
    // Back to the main shard, so source-controller handles the namespace's deletion (its
    // finalizer) when the fleet is dropped.
    f.c.kubectl(&[
        "-n",
        &f.ns,
        "label",
        "gitrepository",
        &f.ns,
        &format!("{}-", realcluster::HELD_SHARD_LABEL),
    ])
    .unwrap();
}

/// Trial items 4 and 14: the hold a SIGKILLed `--hold-root` run leaves behind
/// (`kustomize.toolkit.fluxcd.io/reconcile: disabled`, with its in-flight mark) is named by
/// every run with how to remove it; the preflight no longer says the root "will revert the
/// live patch within its interval" (it cannot while held); and the drift is called the
/// interrupted cutover's, not a hand patch. After the rollback (the mark gone, the hold kept:
/// it was there before that run) the no-op run still names the hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_hold_is_named_by_every_run() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start("cutover-lefthold", true).await;
    let (old, new) = (f.old_url(), f.to());
    let mark = json!({"from": old, "to": new, "startedAt": "2026-12-01T18:00:00Z"}).to_string();
    // Exactly what a --hold-root run's forward patch writes (its field manager too), left
    // behind by SIGKILL.
    patch_live_as(
        &f,
        "kubectl-cutover",
        "gitrepository",
        "merge",
        &json!({"metadata": {"annotations": {
            "kustomize.toolkit.fluxcd.io/reconcile": "disabled",
            "cutover.cluster-loop.dev/in-flight": mark,
        }}, "spec": {"url": new}}),
    );
    let hold = hold_text(&f.ns, LEFT_BY_INTERRUPTED_RUN);
    let checks = |v: &Value| -> Vec<(String, String)> {
        v["preflight"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_string(),
                    c["message"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // Rolling back (--to the URL before the killed run).
    let r = f.run(&dry(&f, &old, &["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let c = checks(&r.json());
    assert!(c.contains(&("hold".into(), hold.clone())), "{}", r.stdout);
    let drift = &c.iter().find(|(id, _)| id == "drift").expect("drift").1;
    assert!(
        drift.ends_with(&format!(
            "the live one is {new}: the live URL is the one an interrupted cutover patched in \
             (kept only by the kustomize.toolkit.fluxcd.io/reconcile: disabled hold: once it is \
             removed the root Kustomization puts the committed value back at its next apply)"
        )),
        "{drift}"
    );
    assert!(!r.stdout.contains("hand-patched"), "{}", r.stdout);
    // Finishing the killed run (--to the URL it patched in): the authored change, and no
    // "will revert the live patch within its interval" while the hold is there.
    let r = f.run(&dry(&f, &new, &["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let c = checks(&r.json());
    assert!(c.contains(&("hold".into(), hold.clone())), "{}", r.stdout);
    let authored = &c
        .iter()
        .find(|(id, _)| id == "authored")
        .expect("authored")
        .1;
    assert!(!authored.contains("within its interval"), "{authored}");
    assert!(
        authored.contains("keeps root Kustomization") && authored.contains("then run --finish"),
        "{authored}"
    );
    // --finish names the interrupted run (finish or roll back) and its hold as left behind by
    // it; nothing is verified or removed.
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false, "{v}");
    assert_eq!(v["holdRemoved"], false, "{v}");
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .starts_with("an interrupted cutover (started 2026-12-01T18:00:00Z) left spec.url at"),
        "{v}"
    );
    assert!(notes.contains(&json!(hold)), "{v}");
    // The rollback as it ends (the mark removed, the hold kept, the old URL live; by
    // kubectl-cutover, as the rollback patch): no cutover is in flight, so the hold is named
    // as one --hold-root keeps until --finish, with how to remove it.
    let hold = hold_text(&f.ns, KEPT_BY_HOLD_ROOT);
    patch_live_as(
        &f,
        "kubectl-cutover",
        "gitrepository",
        "json",
        &json!([
            {"op": "remove", "path": "/metadata/annotations/cutover.cluster-loop.dev~1in-flight"},
            {"op": "replace", "path": "/spec/url", "value": old},
        ]),
    );
    let r = f.run(&dry(&f, &old, &[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout.contains(&format!("warn hold      {hold}")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("nothing to do but remove the hold (see above)"),
        "{}",
        r.stdout
    );
    let r = f.run(&dry(&f, &old, &["-o", "json"])).await;
    let v = r.json();
    assert_eq!(v["mode"], "nothing-to-do", "{}", r.stdout);
    assert_eq!(v["preflight"]["current"]["held"], true, "{}", r.stdout);
    assert!(checks(&v).contains(&("hold".into(), hold)), "{}", r.stdout);
}

/// kustomize-controller scaled to 0 for the life of this value; scaled back to 1 (and waited
/// for Ready) when dropped, also when an assertion fails. Hold [`SOURCE`] exclusively.
/// A Flux controller Deployment in flux-system scaled to 0 (the node agent stops its host
/// process), scaled back to 1 when dropped (also on panic), waiting until it runs again.
struct ControllerScaledDown(realcluster::Lease, &'static str);

impl ControllerScaledDown {
    fn new(c: realcluster::Lease, name: &'static str) -> ControllerScaledDown {
        c.kubectl(&[
            "-n",
            "flux-system",
            "scale",
            "deployment",
            name,
            "--replicas=0",
        ])
        .unwrap();
        ControllerScaledDown(c, name)
    }
}

impl Drop for ControllerScaledDown {
    fn drop(&mut self) {
        let _ = self.0.kubectl(&[
            "-n",
            "flux-system",
            "scale",
            "deployment",
            self.1,
            "--replicas=1",
        ]);
        eventually(T, &format!("{} runs again", self.1), || {
            let d = self
                .0
                .get_json(&["-n", "flux-system", "get", "deployment", self.1]);
            (d["status"]["readyReplicas"] == 1 && d["status"]["replicas"] == 1).then_some(())
        });
    }
}

/// Trial item 9 and session 6 trial: `--finish` while kustomize-controller is scaled to 0 and
/// the source moved to a new commit (the root can never settle) waited its whole --timeout
/// before naming the stopped controller. Now it reads the controllers first and says it at
/// once, with the command that starts it: exit 1, nothing waited for, nothing patched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_with_a_stopped_kustomize_controller_says_so_at_once() {
    // The fleet starts under the shared hold (its reconcile needs source-controller), so
    // only the window with a controller stopped is exclusive.
    let f = {
        let _shared = SOURCE.read().await;
        Fleet::start("cutover-kcstop", true).await
    };
    let _only = SOURCE.write().await;
    let before = f.live();
    let _stopped = ControllerScaledDown::new(f.c.clone(), "kustomize-controller");
    let w = f.work.path();
    git(
        w,
        &["commit", "-q", "--allow-empty", "-m", "a new revision"],
        &[],
    );
    let next = git(w, &["rev-parse", "HEAD"], &[]);
    push(w, &f.old, &f.old_url(), &next, TOKEN);
    // A --timeout the old behaviour would have spent in full, ending in inProgressAtDeadline.
    let r = f
        .run(&f.finish_args(&["--timeout", "30s", "-o", "json"]))
        .await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false, "{v}");
    assert_eq!(v["inProgressAtDeadline"], Value::Null, "{v}");
    assert_eq!(
        v["stoppedControllers"],
        json!([{"controller": "kustomize-controller", "namespace": "flux-system",
            "why": "0 replicas", "consequence": "nothing applies the root Kustomization",
            "command": "kubectl -n flux-system scale deployment/kustomize-controller --replicas=1"}]),
        "{v}"
    );
    assert_eq!(
        v["notes"],
        json!([
            "kustomize-controller in flux-system is not running (0 replicas): nothing applies \
             the root Kustomization until it runs, so --finish cannot verify and does not wait; \
             nothing changed. Start it (kubectl -n flux-system scale \
             deployment/kustomize-controller --replicas=1), then run --finish again"
        ]),
        "no hold here, none named: {v}"
    );
    assert!(!r.stderr.contains("waiting up to"), "{}", r.stderr);
    let r = f.run(&f.finish_args(&["--timeout", "30s"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stdout.ends_with(
            "not judged: a Flux controller is not running (see above); nothing changed\n"
        ),
        "{}",
        r.stdout
    );
    assert!(f.gitrepo_patches().is_empty(), "nothing was patched");
    let after = f.live();
    assert_eq!(after["spec"], before["spec"], "{after}");
    assert_eq!(
        after["metadata"]["annotations"], before["metadata"]["annotations"],
        "{after}"
    );
}

/// Session 6 trial (D): with source-controller scaled to 0 the preflight said only ok/warn,
/// patched, and rolled back at the deadline blaming the new URL ("the new URL never
/// answered"). Now the preflight reads the controller's Deployment (the rule unstick and
/// --finish use) and refuses before any write, naming the controller and the lever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_source_controller_is_refused_before_any_write() {
    // The fleet starts under the shared hold (its reconcile needs source-controller), so
    // only the window with a controller stopped is exclusive.
    let f = {
        let _shared = SOURCE.read().await;
        Fleet::start("cutover-scstop", true).await
    };
    let _only = SOURCE.write().await;
    let before = f.live();
    let stopped = ControllerScaledDown::new(f.c.clone(), "source-controller");
    let r = f.run(&f.args(&["--hold-root", "--timeout", "15s"])).await;
    let refusal = format!(
        "FAIL controller source-controller in flux-system is not running (0 replicas): nothing \
         fetches GitRepository {0}/{0} while it is stopped, so no fetch can prove the new URL \
         and the run would roll back at --timeout. Refused: start it first (kubectl -n \
         flux-system scale deployment/source-controller --replicas=1)",
        f.ns
    );
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(r.stdout.contains(&refusal), "{}", r.stdout);
    assert!(
        r.stdout.contains("refused: see the failed checks above"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("never answered"), "{}", r.stdout);
    assert!(f.gitrepo_patches().is_empty(), "nothing was patched");
    let after = f.live();
    assert_eq!(after["spec"], before["spec"], "{after}");
    assert_eq!(
        after["metadata"]["annotations"], before["metadata"]["annotations"],
        "{after}"
    );
    let r = f.run(&f.dry_args(&["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["mode"], "refused", "{v}");
    let check = v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "controller")
        .cloned()
        .unwrap_or_default();
    assert_eq!(check["result"], "fail", "{v}");
    assert!(
        check["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("source-controller in flux-system is not running (0 replicas)"),
        "{v}"
    );
    // --to the live URL: nothing to patch, so nothing is refused; the stopped controller is a
    // warning in the text and in the JSON alike, exit 0 (cofix2 left: the text said warn, the
    // JSON fail).
    let noop = format!(
        "source-controller in flux-system is not running (0 replicas): nothing fetches \
         GitRepository {0}/{0} while it is stopped; no patch is needed here, but start it \
         (kubectl -n flux-system scale deployment/source-controller --replicas=1)",
        f.ns
    );
    let r = f.run(&dry(&f, &f.old_url(), &[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        r.stdout.contains(&format!("warn controller {noop}")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("already points there"), "{}", r.stdout);
    let r = f.run(&dry(&f, &f.old_url(), &["-o", "json"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    let v = r.json();
    assert_eq!(v["mode"], "nothing-to-do", "{v}");
    assert_eq!(v["preflight"]["go"], true, "{v}");
    let results: Vec<(&str, &str)> = v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["result"].as_str().unwrap()))
        .collect();
    assert!(results.contains(&("controller", "warn")), "{v}");
    assert!(!results.iter().any(|(_, r)| *r == "fail"), "{v}");
    let msg = v["preflight"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "controller")
        .map(|c| c["message"].clone());
    assert_eq!(msg, Some(json!(noop)), "{v}");
    assert!(f.gitrepo_patches().is_empty(), "nothing was patched");
    drop(stopped);
    // Running again, the same cutover passes the preflight (the refusal was the controller).
    let r = f.run(&f.dry_args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.stdout.contains("FAIL"), "{}", r.stdout);
}

/// Session 6 trial (E): the root Kustomization exists and its path defines the GitRepository,
/// but it has never applied it (its runs fail: no owner label, in no inventory). The preflight
/// said "no Kustomization applies GitRepository ..., so nothing reverts a live patch". Now it
/// finds the root by its path, says its last run failed and that its first successful run
/// puts the committed URL back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_whose_runs_fail_is_found_by_its_path_and_reverts_once_it_builds() {
    let _shared = SOURCE.read().await;
    // The root applies only clusters/prod/apps: the GitRepository gets no owner label and is
    // in no inventory. Then the root is pointed at clusters/prod (which defines the
    // GitRepository) with a substitution from a ConfigMap that does not exist: every run fails
    // before anything is applied.
    // Its own namespace (finish_with_a_root_failing_at_the_source_revision_says_fix_not_wait
    // has cutover-rootfail; a shared one is deleted under the other test).
    let f = Fleet::start_with("cutover-rootpath", 2, 1, 1, false).await;
    patch_live(
        &f,
        "kustomization",
        "merge",
        // retryInterval 1h: after its first failure the root stays failed (Ready=False) for
        // the rest of the test instead of cycling through runs in progress every 5 s.
        &json!({"spec": {"path": "./clusters/prod", "retryInterval": "1h",
            "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "no-such-vars"}]}}}),
    );
    let failure = eventually(T, "the root's run fails at its new path", || {
        let k = f.root();
        let ready = condition(&k, "Ready");
        // kustomize-controller records status.observedGeneration only on success; the Ready
        // condition carries the generation it judged.
        (ready["observedGeneration"] == k["metadata"]["generation"] && ready["status"] == "False")
            .then(|| {
                format!(
                    "{}: {}",
                    ready["reason"].as_str().unwrap_or_default(),
                    ready["message"].as_str().unwrap_or_default()
                )
            })
    });
    let live = f.live();
    assert!(
        live["metadata"]["labels"]
            .get("kustomize.toolkit.fluxcd.io/name")
            .is_none(),
        "never applied by the root: {live}"
    );
    let text = std::fs::read_to_string(f.work.path().join(SYNC_FILE)).unwrap();
    let at = format!("{SYNC_FILE}:{}", url_line(&text));
    let r = f.run(&f.dry_args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(
        !r.stdout.contains("no Kustomization applies"),
        "the root exists: {}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "defined (not applied yet) in the path of root Kustomization {0}/{0} (path \
             ./clusters/prod): the self-reference; its last run failed: {failure}",
            f.ns
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "the committed spec.url at {at} is still {1}: root Kustomization {0}/{0} (its path \
             ./clusters/prod defines this GitRepository, but it has not applied it yet: no \
             kustomize.toolkit.fluxcd.io/name label, in no inventory) failed its last run \
             ({failure}), so it reverts nothing now, but the first run that succeeds puts {1} \
             back over the live patch unless that file changes",
            f.ns,
            f.old_url()
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!("+  url: {}", f.to())),
        "{}",
        r.stdout
    );
    let r = f.run(&f.dry_args(&["-o", "json"])).await;
    let v = r.json();
    assert_eq!(v["preflight"]["current"]["rootFoundBy"], "path", "{v}");
    assert_eq!(
        v["preflight"]["current"]["root"]["lastFailure"],
        json!(failure),
        "{v}"
    );
    // The cutover with --hold-root, then --finish: the failing root has applied nothing, so
    // it is not verified and the hold stays (it was removed as "protecting nothing").
    let r = f.run(&f.args(&["--hold-root", "--timeout", "120s"])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(held(&f.live()));
    let r = f.run(&f.finish_args(&["-o", "json"])).await;
    assert_eq!(r.code, 1, "{}", r.all());
    let v = r.json();
    assert_eq!(v["verified"], false, "{v}");
    assert_eq!(v["holdRemoved"], false, "{v}");
    let note = format!(
        "no Kustomization has applied GitRepository {0}/{0} (no kustomize.toolkit.fluxcd.io/name \
         label, in no status.inventory), but Kustomization {0}/{0} (its last run failed: \
         {failure}) of this source is not applying now: if its path defines this GitRepository \
         (the preflight then names it as the root), its first successful run applies the \
         committed spec.url over the live one ({1}). Not verified; the hold stays: fix that \
         Kustomization, then run --finish again",
        f.ns,
        f.to()
    );
    assert_eq!(v["notes"][0], json!(note), "{v}");
    // The hold it leaves in place is named with how to remove it, as by every run.
    assert!(
        v["notes"][1]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!(
                "GitRepository {0}/{0} carries the hold kustomize.toolkit.fluxcd.io/reconcile: \
                 disabled",
                f.ns
            )),
        "{v}"
    );
    assert!(held(&f.live()), "the hold stays");
}

/// Trial 8 (B): the root's path reaches the GitRepository only through another directory
/// (as `./clusters/prod` reaches `../base`), and its build fails on a missing file, here
/// too. The preflight said "no Kustomization applies GitRepository ..., so nothing reverts a
/// live patch"; the first good build then put the committed URL back. Now the root is found
/// through what its path lists, with its build error and the lever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_whose_path_reaches_the_source_through_a_base_and_does_not_build_is_found() {
    let _shared = SOURCE.read().await;
    let f = Fleet::start_with("cutover-rootbase", 2, 1, 1, false).await;
    let w = f.work.path();
    std::fs::create_dir_all(w.join("clusters/broken")).unwrap();
    std::fs::write(
        w.join("clusters/broken/kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- \
         ../prod/flux-system\n- missing.yaml\n",
    )
    .unwrap();
    git(w, &["add", "-A"], &[]);
    git(
        w,
        &["commit", "-q", "-m", "an overlay that does not build"],
        &[],
    );
    let head = git(w, &["rev-parse", "HEAD"], &[]);
    push(w, &f.old, &f.old_url(), &head, TOKEN);
    push(w, &f.new, &f.to(), &head, NEW_TOKEN);
    f.root_applied(&format!("main@sha1:{head}"));
    patch_live(
        &f,
        "kustomization",
        "merge",
        &json!({"spec": {"path": "./clusters/broken", "retryInterval": "1h"}}),
    );
    let failure = eventually(T, "the root's run fails at its new path", || {
        let k = f.root();
        let ready = condition(&k, "Ready");
        (ready["observedGeneration"] == k["metadata"]["generation"] && ready["status"] == "False")
            .then(|| {
                format!(
                    "{}: {}",
                    ready["reason"].as_str().unwrap_or_default(),
                    ready["message"].as_str().unwrap_or_default()
                )
            })
    });
    let r = f.run(&f.dry_args(&[])).await;
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.stdout.contains("nothing reverts"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "defined (not applied yet) in the path of root Kustomization {0}/{0} (path \
             ./clusters/broken): the self-reference; its last run failed: {failure}",
            f.ns
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "its path does not build here either (kubectl kustomize ./clusters/broken failed: \
             accumulating resources: "
        ),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "what it lists reaches {SYNC_FILE}, which defines this GitRepository. It reverts \
             nothing while its runs fail, but the first run that succeeds puts the committed \
             spec.url back over the live patch: fix its build first"
        )),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("run.go:"), "klog header: {}", r.stdout);
    let v = f.run(&f.dry_args(&["-o", "json"])).await.json();
    assert_eq!(v["preflight"]["current"]["rootFoundBy"], "path", "{v}");
}
