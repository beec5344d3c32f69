//! Pod execution for "probe images": the kubelet half that runs the containers of pods (and
//! ephemeral containers) whose image is a small multi-tool image FOR REAL, with host tools
//! standing in for the image's, in private namespaces whose resolver setup is generated from
//! the pod spec exactly as the kubelet does ([`dns`]), against a real DNS server (dnsmasq)
//! configured from the CoreDNS ConfigMap, the Services and the upstream records set with [`PodExec::set_upstream`].
//!
//! A client of the API server through [`PodApi`] ([`api`]): in `tests/realcluster` the real
//! kube-apiserver through kube-rs ([`PodExec::start_with`]), where the node agent hands it the
//! probe-image pods and the real job controller, garbage collector and ttl-after-finished
//! controller do the rest. (Until session 6 the twin's in-memory store was a second client.)
//!
//! How a container runs (no shell string of ours anywhere; every step is an argv):
//! 1. A per-container mount+UTS namespace is created by a holder process
//!    `unshare -m -u --propagation private -- cat` (we write one byte and read it back: then the
//!    namespaces exist; we also check `/proc/PID/ns/mnt` differs from ours before mounting).
//! 2. `nsenter --mount=/proc/PID/ns/mnt mount --bind FILE /etc/resolv.conf` (and `/etc/hosts`,
//!    `/etc/nsswitch.conf` = `hosts: files dns`, what musl does implicitly), `nsenter
//!    --uts=... hostname POD`.
//! 3. The container's `command` + `args` run as given through `nsenter --net=TWIN_NETNS
//!    --mount=... --uts=... -S UID -G GID -- ARGV...` with `PATH` = the image's tool directory,
//!    its own process group, stdout/stderr appended to `pods/log` as they arrive.
//!    The pod's `activeDeadlineSeconds` and deleting the pod SIGKILL the
//!    process group. The namespaces (and their mounts) vanish with their last process: nothing
//!    is mounted in the host's namespace.
//!
//! Network: one private network namespace per [`PodExec`] (holder `unshare -n -- cat`), `lo`
//! up with the kube-dns ClusterIP (default `10.96.0.10`) and the node's upstream resolver
//! address (`172.18.0.1`) on it. Two dnsmasq processes listen there on port 53, never in the
//! host's namespace: "CoreDNS" on the ClusterIP (hosts pins + Service records from a
//! hosts-format file, `--local=/cluster.local/` so the cluster zone is authoritative, forwards
//! everything else to the upstream) and "upstream" on 172.18.0.1 (the records set with `set_upstream`,
//! `--local=/#/`: NXDOMAIN for anything else; there is no real upstream). Both run with
//! `--no-resolv --no-hosts --conf-file=/dev/null --bind-interfaces --cache-size=0`. Changes
//! to `kube-system/coredns` or any Service rewrite the file and SIGHUP dnsmasq; we wait for its
//! `read FILE` log line; [`PodExec::set_upstream`] changes an upstream record the same way.
//!
//! The outside world: a veth pair links the pod network to the host's network namespace, one
//! /30 per model out of `10.213.0.0/16` (picked under a host-wide file lock, so concurrent
//! models in threads or processes never collide): `twpx<N>` with `.1`
//! ([`PodExec::host_address`]) on the host, `eth0` with `.2` in the pod network, connected
//! routes only (no default route: pods reach that address and nothing else). A server a test
//! binds on the host address, e.g. `twin::git::GitServer` with `GitServerOptions::listen` and
//! port 443, is what an external Git host is to a cluster: pods reach it by the name the
//! upstream records give it (`set_upstream("gitea.prod.example.dev", [host_address])`) and
//! verify its certificate for that name; the host (the "workstation") reaches the same address
//! locally. The pair is deleted when the model drops (or fails to start); a process killed
//! with SIGKILL leaves its `twpx<N>` behind (`ip link del twpx<N>` removes it; new models skip
//! addresses and names in use).
//!
//! Pod spec support beyond argv: `env[].value`, `env[].valueFrom.secretKeyRef` (read from the
//! Secret at container start, with the kubelet's errors for a missing Secret or key and
//! `optional`), the Service link variables the kubelet injects (`REDIS_PORT=tcp://...`,
//! `enableServiceLinks`; [`cluster_loop::servicelinks`]), `securityContext` run-as user/group and `runAsNonRoot`, `emptyDir` volumes
//! (a private tmpfs per container, mode 1777, `sizeLimit`; the projected service-account
//! token volume a real apiserver adds is left unmounted), `activeDeadlineSeconds`,
//! `terminationMessagePolicy: FallbackToLogsOnError`, dnsPolicy/dnsConfig/hostAliases/hostname.
//! An image's own CA bundle ([`PodExec::set_image_ca_bundle`]): a file bind-mounted over
//! `/etc/ssl/certs/ca-certificates.crt` in the container's mount namespace.
//! The model's own files live under `/run` (not `/tmp`, which an emptyDir may cover).
//!
//! Service addresses ([`vips`], standing in for kube-proxy for the pods run here): the ClusterIP
//! of a Service whose selector matches a running pod of this runtime is put on `lo` of the pod
//! network, so a connection to CLUSTERIP:PORT reaches the server the pod listens with on PORT
//! (all pods share the namespace). Only Services whose every port has `targetPort` equal to
//! `port` (or unset): there is no address or port translation.
//!
//! Where this differs from a real cluster: every pod of a model shares one network namespace
//! and one source address (the reported `podIP` is a stable fake from the pod UID); there is
//! no CNI or kube-proxy (Service addresses only as [`vips`] says, only DNS answers for other
//! Services); no image root
//! filesystem (containers see the host's files, with private mounts of /etc/resolv.conf,
//! /etc/hosts, /etc/nsswitch.conf and emptyDirs, and an image's tools replaced by the host's);
//! an emptyDir is per container, not shared by the pod's containers, and its mountPath must
//! exist on the host; other volume types and `valueFrom` sources (configMapKeyRef, fieldRef)
//! are not modelled; no NetworkPolicy or egress firewall; CreateContainerConfigError is final
//! (the kubelet would retry it with back-off).
//!
//! Images ([`ImageKind`]): `alpine:*`, `busybox:*`, `alpine/git:*`, `nicolaka/netshoot:*`
//! (docker.io). Other images are not run here; the real cluster's node agent pulls them from
//! its registry list ([`crate::workload::Registry`]) or fails the pull.

pub mod api;
pub mod dns;
pub mod vips;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

use crate::flux::cluster::{ObjKey, now_rfc3339, s};

pub use api::{ApiEvent, PodApi};
pub use dns::NodeDns;

/// The system CA bundle path of the probe images (Alpine's and Debian's `ca-certificates`;
/// their libcurl's default CA file); see [`PodExec::set_image_ca_bundle`].
pub const IMAGE_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The default node name ([`PodExecOptions::node_name`]; the real cluster passes its own).
pub const NODE_NAME: &str = "twin-node";
/// Default kube-dns ClusterIP (kubeadm/kind default) when no `kube-system/kube-dns` Service
/// exists at start.
pub const DEFAULT_CLUSTER_DNS: &str = "10.96.0.10";
/// The node's upstream resolver inside the twin's network namespace (dnsPolicy Default and
/// CoreDNS `forward . /etc/resolv.conf` go there).
pub const NODE_RESOLVER: &str = "172.18.0.1";

/// Errors starting the model.
#[derive(Debug, thiserror::Error)]
pub enum PodExecError {
    /// A required host tool is missing or we are not root.
    #[error("podexec needs root and {0} (apt-get install -y dnsmasq busybox util-linux iproute2)")]
    Prerequisites(String),
    /// A setup step failed.
    #[error("podexec: {0}")]
    Setup(String),
}

/// The images run for real, and what stands in for their tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// `alpine:*`: every BusyBox applet of Debian's `busybox` 1.35 (`sh`, `nslookup` = the
    /// wire-query implementation of BusyBox 1.29 and later, `timeout`, `cat`, ...) and
    /// `getent` = the HOST's glibc getent. Alpine's is musl-utils getent.c: the same
    /// `ahosts` output shape, but musl's resolver differs (it stops the search list on the
    /// first error other than NXDOMAIN, ignores `options attempts`/`rotate`, and has no
    /// nsswitch). No openssl, no git (the probe reports exit 127).
    Alpine,
    /// `busybox:*`: BusyBox applets only (no getent, openssl, git).
    Busybox,
    /// `alpine/git:*`: as Alpine plus host `git`.
    AlpineGit,
    /// `nicolaka/netshoot:*`: BusyBox applets, host getent, BIND `nslookup`/`dig`/`host`
    /// (Debian bind9-dnsutils), `openssl`, `git`, `curl` when the host has them.
    Netshoot,
}

fn split_repo(image: &str) -> String {
    let norm = crate::workload::normalize_image(image);
    let no_digest = norm.split('@').next().unwrap_or_default();
    match no_digest.rfind(':') {
        Some(i) if !no_digest[i..].contains('/') => no_digest[..i].to_string(),
        _ => no_digest.to_string(),
    }
}

/// The probe image kind of `image` (any tag or digest), if it is one.
pub fn image_kind(image: &str) -> Option<ImageKind> {
    match split_repo(image).as_str() {
        "docker.io/library/alpine" => Some(ImageKind::Alpine),
        "docker.io/library/busybox" => Some(ImageKind::Busybox),
        "docker.io/alpine/git" => Some(ImageKind::AlpineGit),
        "docker.io/nicolaka/netshoot" => Some(ImageKind::Netshoot),
        _ => None,
    }
}

fn all_probe_images(pod: &Value) -> bool {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            !cs.is_empty()
                && cs
                    .iter()
                    .all(|c| image_kind(c["image"].as_str().unwrap_or_default()).is_some())
        })
}

/// True when every container of `pod` uses a probe image ([`image_kind`]): the pods this
/// runtime runs (a node agent hands them over; ephemeral containers are run on any pod).
pub fn is_probe_pod(pod: &Value) -> bool {
    all_probe_images(pod)
}

/// Host tools that must exist (and root) for the model; empty when all are there.
pub fn missing_prerequisites() -> Vec<String> {
    let mut out: Vec<String> = [
        "unshare", "nsenter", "mount", "ip", "dnsmasq", "busybox", "getent", "kill", "hostname",
    ]
    .iter()
    .filter(|t| host_tool(t).is_none())
    .map(|t| t.to_string())
    .collect();
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| {
            st.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        out.push("root (effective uid 0)".into());
    }
    out
}

/// A host executable by name (searched in the usual system directories, not `$PATH`).
pub fn host_tool(name: &str) -> Option<PathBuf> {
    [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ]
    .iter()
    .map(|d| Path::new(d).join(name))
    .find(|p| p.is_file())
}

/// Options of the model.
#[derive(Debug, Clone)]
pub struct PodExecOptions {
    /// What the upstream resolver answers (`name -> IPs`); every other name is NXDOMAIN.
    pub upstream: BTreeMap<String, Vec<String>>,
    /// kubelet `clusterDomain` (default `cluster.local`).
    pub cluster_domain: String,
    /// kubelet `clusterDNS`; default: the `kube-system/kube-dns` Service ClusterIP at start,
    /// else [`DEFAULT_CLUSTER_DNS`].
    pub cluster_dns: Option<String>,
    /// The node's name (the hostNetwork pods' `/etc/hosts`); default [`NODE_NAME`].
    pub node_name: String,
    /// The node's InternalIP, written as the pods' `status.hostIP`; default `172.18.0.2`.
    pub host_ip: String,
}

impl Default for PodExecOptions {
    fn default() -> Self {
        PodExecOptions {
            upstream: BTreeMap::new(),
            cluster_domain: "cluster.local".into(),
            cluster_dns: None,
            node_name: NODE_NAME.into(),
            host_ip: "172.18.0.2".into(),
        }
    }
}

async fn run_ok(prog: &str, args: &[&str]) -> Result<(), PodExecError> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| PodExecError::Setup(format!("{prog}: {e}")))?;
    if !out.status.success() {
        return Err(PodExecError::Setup(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// A command for `prog` that dies with the thread that starts it: `setpriv --pdeathsig KILL
/// -- prog` (util-linux; PR_SET_PDEATHSIG is sent when the creating thread ends), or `prog`
/// itself when the host has no setpriv. The runtime's long-lived processes (namespace holders,
/// dnsmasq, containers) are started this way from the runtime's threads, so a test process
/// that ends without dropping the runtime (a `static` cluster, a panic, SIGKILL) leaves none
/// behind; with their network namespace gone the kernel also deletes the veth pair. A
/// container whose user differs from ours loses the setting at its credential change
/// (prctl(2)); it still ends at its `activeDeadlineSeconds`.
fn guarded(prog: &str) -> Command {
    match host_tool("setpriv") {
        Some(setpriv) => {
            let mut c = Command::new(setpriv);
            c.args(["--pdeathsig", "KILL", "--", prog]);
            c
        }
        None => Command::new(prog),
    }
}

fn kill_pid(sig: &str, target: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, "--", target])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A namespace holder: `unshare FLAGS -- cat`, ready once it echoed our byte.
struct Holder {
    _child: Child,
    pid: u32,
}

impl Holder {
    async fn start(flags: &[&str], kinds: &[&str]) -> Result<Holder, PodExecError> {
        let mut child = guarded("unshare")
            .args(flags)
            .args(["--", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| PodExecError::Setup(format!("unshare: {e}")))?;
        let pid = child
            .id()
            .ok_or_else(|| PodExecError::Setup("unshare exited".into()))?;
        let mut b = [0u8; 1];
        let ok = async {
            child.stdin.as_mut()?.write_all(b"x").await.ok()?;
            child.stdin.as_mut()?.flush().await.ok()?;
            child.stdout.as_mut()?.read_exact(&mut b).await.ok()
        }
        .await;
        if ok.is_none() {
            return Err(PodExecError::Setup(format!(
                "unshare {} did not start (are we root?)",
                flags.join(" ")
            )));
        }
        for k in kinds {
            let mine = std::fs::read_link(format!("/proc/self/ns/{k}")).ok();
            let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{k}")).ok();
            if theirs.is_none() || mine == theirs {
                return Err(PodExecError::Setup(format!(
                    "unshare: {k} namespace of pid {pid} is not private; refusing to continue"
                )));
            }
        }
        // The Child is never waited on while the Holder lives, so even if `cat` died its pid
        // stays a zombie and cannot be reused: `/proc/PID/ns/*` never names another process.
        Ok(Holder { _child: child, pid })
    }

    fn ns(&self, kind: &str) -> String {
        format!("/proc/{}/ns/{kind}", self.pid)
    }
}

/// One dnsmasq process (in the twin network namespace).
struct Dnsmasq {
    _child: Child,
    pid: u32,
    hosts_file: PathBuf,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Dnsmasq {
    async fn start(
        netns: &str,
        listen: &str,
        hosts_file: &Path,
        extra: &[String],
    ) -> Result<Dnsmasq, PodExecError> {
        let mut args: Vec<String> = vec![
            format!("--net={netns}"),
            "dnsmasq".into(),
            "--keep-in-foreground".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            "--conf-file=/dev/null".into(),
            format!("--listen-address={listen}"),
            "--bind-interfaces".into(),
            "--port=53".into(),
            format!("--addn-hosts={}", hosts_file.display()),
            "--cache-size=0".into(),
            "--log-facility=-".into(),
            "--pid-file=".into(),
            "--user=root".into(),
            // Without it dnsmasq switches to group "dip" (its default, dnsmasq(8) --group),
            // and a changed egid clears PR_SET_PDEATHSIG (prctl(2)): it would outlive us.
            "--group=root".into(),
        ];
        args.extend(extra.iter().cloned());
        let mut child = guarded("nsenter")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| PodExecError::Setup(format!("dnsmasq: {e}")))?;
        let pid = child
            .id()
            .ok_or_else(|| PodExecError::Setup("dnsmasq exited".into()))?;
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        let stderr = child.stderr.take().expect("piped");
        tokio::spawn(async move {
            let mut r = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(l)) = r.next_line().await {
                if std::env::var_os("TWIN_DEBUG").is_some() {
                    eprintln!("[podexec] {l}");
                }
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut d = Dnsmasq {
            _child: child,
            pid,
            hosts_file: hosts_file.to_path_buf(),
            lines,
        };
        d.wait_read().await?;
        Ok(d)
    }

    /// Waits for `read HOSTS_FILE - N names` (logged after the sockets are bound at start,
    /// and after a SIGHUP re-read).
    async fn wait_read(&mut self) -> Result<(), PodExecError> {
        let want = format!("read {}", self.hosts_file.display());
        let mut seen = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(l) = self.lines.recv().await {
                if l.contains(&want) {
                    return true;
                }
                seen.push(l);
            }
            false
        })
        .await;
        match r {
            Ok(true) => Ok(()),
            _ => Err(PodExecError::Setup(format!(
                "dnsmasq did not load {}: {}",
                self.hosts_file.display(),
                seen.join(" | ")
            ))),
        }
    }

    async fn reload(&mut self) -> Result<(), PodExecError> {
        while self.lines.try_recv().is_ok() {}
        kill_pid("-HUP", &self.pid.to_string());
        self.wait_read().await
    }
}

struct DnsState {
    cluster: Dnsmasq,
    upstream: Dnsmasq,
    content: String,
    upstream_records: BTreeMap<String, Vec<String>>,
}

struct Running {
    pgid: Option<u32>,
    kill: Arc<Notify>,
}

struct Inner {
    api: Arc<dyn PodApi>,
    host_ip: String,
    dir: PathBuf,
    netns: String,
    node: NodeDns,
    bins: HashMap<ImageKind, PathBuf>,
    dns: tokio::sync::Mutex<DnsState>,
    running: Mutex<HashMap<String, Running>>,
    started: Mutex<HashSet<String>>,
    seq: AtomicU64,
    pids: Mutex<Vec<u32>>,
    idle: tokio::sync::watch::Sender<usize>,
    link: NodeLink,
    /// The images' system CA bundle, when set ([`PodExec::set_image_ca_bundle`]).
    image_ca: Mutex<Option<PathBuf>>,
    /// Running pods by UID: (namespace, labels), for the Service addresses ([`vips`]).
    serving: Mutex<HashMap<String, vips::PodLabels>>,
    /// The Service ClusterIPs on `lo` now.
    vips: tokio::sync::Mutex<std::collections::BTreeSet<String>>,
}

/// The running model. Dropping it stops every process it started (containers, dnsmasq, the
/// namespace holders) and removes its files and the Node annotation.
pub struct PodExec {
    inner: Arc<Inner>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _holder: Holder,
    _lock: std::fs::File,
    _dir: tempfile::TempDir,
}

/// First address of the range the pod-network links are carved from (one /30 per [`PodExec`]:
/// `.1` on the host side, `.2` in the pod network namespace).
pub const LINK_RANGE: [u8; 2] = [10, 213];

/// The veth pair between the host's network namespace and the twin's pod network.
#[derive(Debug, Clone)]
struct NodeLink {
    /// Host-side interface name (`twpx<N>`).
    host_if: String,
    /// Host-side address (what pods reach the "outside world" at).
    host_ip: std::net::Ipv4Addr,
    /// Pod-side address (`eth0` in the pod network namespace).
    pod_ip: std::net::Ipv4Addr,
}

impl NodeLink {
    /// Creates the pair under a host-wide lock (`/run/lock` or the temp dir) so concurrent
    /// [`PodExec`]s (threads or processes) never pick the same /30: reads the host's IPv4
    /// addresses, takes the first free `10.213.N.M/30`, creates `twpx<index>` with its peer
    /// `eth0` moved into `netns` (the holder's pid), addresses and raises both ends.
    async fn create(holder_pid: u32, netns: &str) -> Result<NodeLink, PodExecError> {
        let lock_dir = if Path::new("/run/lock").is_dir() {
            PathBuf::from("/run/lock")
        } else {
            std::env::temp_dir()
        };
        let lock_path = lock_dir.join("twin-podexec-links.lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| PodExecError::Setup(format!("{}: {e}", lock_path.display())))?;
        let lock = tokio::task::spawn_blocking(move || lock.lock().map(|_| lock))
            .await
            .map_err(|e| PodExecError::Setup(format!("link lock: {e}")))?
            .map_err(|e| PodExecError::Setup(format!("{}: {e}", lock_path.display())))?;
        let out = Command::new("ip")
            .args(["-o", "-4", "addr", "show"])
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| PodExecError::Setup(format!("ip addr show: {e}")))?;
        let used: HashSet<(u8, u8)> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|w| w.split('/').next()?.parse::<std::net::Ipv4Addr>().ok())
            .filter(|ip| ip.octets()[..2] == LINK_RANGE)
            .map(|ip| (ip.octets()[2], ip.octets()[3] & !3))
            .collect();
        let links = Command::new("ip")
            .args(["-o", "link", "show"])
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| PodExecError::Setup(format!("ip link show: {e}")))?;
        let links = String::from_utf8_lossy(&links.stdout).to_string();
        let free = (0u32..16384).find(|i| {
            let (c, d) = ((i / 64) as u8, ((i % 64) * 4) as u8);
            !used.contains(&(c, d))
                && !links.contains(&format!(" twpx{i}:"))
                && !links.contains(&format!(" twpx{i}@"))
        });
        let Some(i) = free else {
            return Err(PodExecError::Setup(
                "no free /30 left in 10.213.0.0/16 for the pod network link".into(),
            ));
        };
        let (c, d) = ((i / 64) as u8, ((i % 64) * 4) as u8);
        let link = NodeLink {
            host_if: format!("twpx{i}"),
            host_ip: std::net::Ipv4Addr::new(LINK_RANGE[0], LINK_RANGE[1], c, d + 1),
            pod_ip: std::net::Ipv4Addr::new(LINK_RANGE[0], LINK_RANGE[1], c, d + 2),
        };
        let pid = holder_pid.to_string();
        let host_cidr = format!("{}/30", link.host_ip);
        let pod_cidr = format!("{}/30", link.pod_ip);
        let net = format!("--net={netns}");
        let steps: Vec<(&str, Vec<&str>)> = vec![
            (
                "ip",
                vec![
                    "link",
                    "add",
                    &link.host_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    &pid,
                ],
            ),
            ("ip", vec!["addr", "add", &host_cidr, "dev", &link.host_if]),
            ("ip", vec!["link", "set", &link.host_if, "up"]),
            (
                "nsenter",
                vec![&net, "ip", "addr", "add", &pod_cidr, "dev", "eth0"],
            ),
            ("nsenter", vec![&net, "ip", "link", "set", "eth0", "up"]),
        ];
        for (prog, args) in steps {
            if let Err(e) = run_ok(prog, &args).await {
                link.delete();
                return Err(e);
            }
        }
        drop(lock);
        Ok(link)
    }

    /// Deletes the pair (synchronously; deleting one end removes both). Idempotent.
    fn delete(&self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.host_if])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

fn write_file(p: &Path, text: &str) -> Result<(), PodExecError> {
    std::fs::write(p, text).map_err(|e| PodExecError::Setup(format!("{}: {e}", p.display())))?;
    chmod(p, 0o644);
    Ok(())
}

fn build_bins(root: &Path) -> Result<HashMap<ImageKind, PathBuf>, PodExecError> {
    let busybox =
        host_tool("busybox").ok_or_else(|| PodExecError::Prerequisites("busybox".into()))?;
    let out = std::process::Command::new(&busybox)
        .arg("--list")
        .output()
        .map_err(|e| PodExecError::Setup(format!("busybox --list: {e}")))?;
    let applets: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|a| !a.is_empty() && !a.contains('/'))
        .collect();
    let mut bins = HashMap::new();
    for (kind, dir, host) in [
        (ImageKind::Alpine, "alpine", &["getent"][..]),
        (ImageKind::Busybox, "busybox", &[][..]),
        (ImageKind::AlpineGit, "alpine-git", &["getent", "git"][..]),
        (
            ImageKind::Netshoot,
            "netshoot",
            &[
                "getent", "nslookup", "dig", "host", "openssl", "git", "curl",
            ][..],
        ),
    ] {
        let d = root.join("images").join(dir);
        std::fs::create_dir_all(&d)
            .map_err(|e| PodExecError::Setup(format!("{}: {e}", d.display())))?;
        chmod(&root.join("images"), 0o755);
        chmod(&d, 0o755);
        for a in &applets {
            if host.contains(&a.as_str()) {
                continue;
            }
            let _ = std::os::unix::fs::symlink(&busybox, d.join(a));
        }
        for t in host {
            if let Some(p) = host_tool(t) {
                let _ = std::fs::remove_file(d.join(t));
                let _ = std::os::unix::fs::symlink(p, d.join(t));
            }
        }
        bins.insert(kind, d);
    }
    Ok(bins)
}

impl PodExec {
    /// Starts the runtime as a client of `api` (the real apiserver in tests/realcluster):
    /// checks prerequisites, creates the network namespace, starts both dnsmasq processes
    /// (waiting until they serve), then follows
    /// [`PodApi::watch`]: pods (run, kill) and the DNS sources (reload). Must run inside a
    /// multi-thread Tokio runtime.
    /// Errors: [`PodExecError`] for a missing prerequisite or a failed setup step.
    pub async fn start_with(
        api: Arc<dyn PodApi>,
        opts: PodExecOptions,
    ) -> Result<PodExec, PodExecError> {
        let missing = missing_prerequisites();
        if !missing.is_empty() {
            return Err(PodExecError::Prerequisites(missing.join(", ")));
        }
        // Not under /tmp: a pod's emptyDir mounted at /tmp must not hide the image tool
        // directories and per-container files that live here.
        let base = ["/run", "/var/tmp"]
            .iter()
            .map(PathBuf::from)
            .find(|d| d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        remove_stale_dirs(&base);
        let tmp = tempfile::Builder::new()
            .prefix("twin-podexec-")
            .tempdir_in(&base)
            .map_err(|e| PodExecError::Setup(format!("temp dir in {}: {e}", base.display())))?;
        let dir = tmp.path().to_path_buf();
        chmod(&dir, 0o755);
        // Held for the runtime's life: remove_stale_dirs only removes directories whose lock
        // is free (their runtime's process is gone, whatever PID namespace it ran in).
        let lock = std::fs::File::create(dir.join(".lock"))
            .and_then(|f| f.lock().map(|_| f))
            .map_err(|e| PodExecError::Setup(format!("lock file in {}: {e}", dir.display())))?;
        let bins = build_bins(&dir)?;
        let cluster_dns = match opts.cluster_dns.clone() {
            Some(ip) => ip,
            None => api
                .get(ObjKey::new("v1", "Service", "kube-system", "kube-dns"))
                .await
                .and_then(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
                .filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())
                .unwrap_or_else(|| DEFAULT_CLUSTER_DNS.to_string()),
        };
        let holder = Holder::start(&["-n"], &["net"]).await?;
        let netns = holder.ns("net");
        for args in [
            vec!["link", "set", "lo", "up"],
            vec!["addr", "add", &format!("{cluster_dns}/32"), "dev", "lo"],
            vec!["addr", "add", &format!("{NODE_RESOLVER}/32"), "dev", "lo"],
        ] {
            let mut a = vec![format!("--net={netns}"), "ip".into()];
            a.extend(args.iter().map(|s| s.to_string()));
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            run_ok("nsenter", &a).await?;
        }
        let link = NodeLink::create(holder.pid, &netns).await?;
        let up_file = dir.join("upstream.hosts");
        if let Err(e) = write_file(&up_file, &dns::upstream_hosts(&opts.upstream)) {
            link.delete();
            return Err(e);
        }
        // From here on a failure must not leave the link behind.
        let mut guard = LinkGuard(Some(link.clone()));
        let upstream =
            Dnsmasq::start(&netns, NODE_RESOLVER, &up_file, &["--local=/#/".into()]).await?;
        let node = NodeDns {
            cluster_dns: vec![cluster_dns.clone()],
            cluster_domain: opts.cluster_domain.clone(),
            host_nameservers: vec![NODE_RESOLVER.into()],
            host_searches: vec![],
            host_options: vec![],
            node_name: opts.node_name.clone(),
        };
        let cl_file = dir.join("cluster.hosts");
        let content = cluster_records(&*api, &node.cluster_domain).await;
        write_file(&cl_file, &content)?;
        let cluster_dnsmasq = Dnsmasq::start(
            &netns,
            &cluster_dns,
            &cl_file,
            &[
                format!("--local=/{}/", node.cluster_domain),
                format!("--server={NODE_RESOLVER}"),
            ],
        )
        .await?;
        let pids = vec![upstream.pid, cluster_dnsmasq.pid, holder.pid];
        let inner = Arc::new(Inner {
            api: api.clone(),
            host_ip: opts.host_ip.clone(),
            dir,
            netns,
            node,
            bins,
            dns: tokio::sync::Mutex::new(DnsState {
                cluster: cluster_dnsmasq,
                upstream,
                content,
                upstream_records: opts.upstream.clone(),
            }),
            running: Mutex::new(HashMap::new()),
            started: Mutex::new(HashSet::new()),
            seq: AtomicU64::new(0),
            pids: Mutex::new(pids),
            idle: tokio::sync::watch::channel(0).0,
            link,
            image_ca: Mutex::new(None),
            serving: Mutex::new(HashMap::new()),
            vips: tokio::sync::Mutex::new(Default::default()),
        });
        guard.0 = None;
        let mut rx = api.watch().await.map_err(PodExecError::Setup)?;
        let mut tasks = Vec::new();
        let i = inner.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                match ev {
                    ApiEvent::Pod(p) => i.consider(&p),
                    ApiEvent::PodDeleted(p) => i.kill_pod(s(&p, "/metadata/uid")),
                    ApiEvent::DnsSourceChanged => {
                        let i = i.clone();
                        tokio::spawn(async move {
                            let _ = i.sync_dns().await;
                            let _ = i.sync_vips().await;
                        });
                    }
                }
            }
        }));
        Ok(PodExec {
            inner,
            tasks,
            _holder: holder,
            _lock: lock,
            _dir: tmp,
        })
    }

    /// Regenerates the cluster DNS records from the API now (the `kube-system/coredns`
    /// ConfigMap and every Service) and, when they changed,
    /// reloads dnsmasq and waits until it re-read them. Returns the hosts-format records.
    pub async fn sync_dns(&self) -> Result<String, PodExecError> {
        self.inner.sync_dns().await
    }

    /// The records the cluster DNS serves (hosts format).
    pub async fn cluster_records(&self) -> String {
        self.inner.dns.lock().await.content.clone()
    }

    /// The kubelet's DNS view of the node (cluster DNS IP, domain, node resolver).
    pub fn node_dns(&self) -> &NodeDns {
        &self.inner.node
    }

    /// The network namespace path (`/proc/PID/ns/net`) the pods and dnsmasq share.
    pub fn netns(&self) -> &str {
        &self.inner.netns
    }

    /// The host-side address of the pod network's link: a server the test starts on this
    /// address (e.g. `GitServerOptions::listen`) is reachable from every pod, and from the
    /// host (the "workstation") as a local address. Stands in for a server outside the
    /// cluster; give it a name with [`PodExec::set_upstream`].
    pub fn host_address(&self) -> std::net::Ipv4Addr {
        self.inner.link.host_ip
    }

    /// The pods' source address on that link (every pod shares it here; see the module docs).
    pub fn pod_network_address(&self) -> std::net::Ipv4Addr {
        self.inner.link.pod_ip
    }

    /// The host-side interface name of the link (`twpx<N>`), removed when the model drops.
    pub fn link_interface(&self) -> &str {
        &self.inner.link.host_if
    }

    /// Sets what the upstream resolver answers for `name` (`ips` empty: NXDOMAIN again),
    /// reloads its dnsmasq and waits until it re-read the records. Returns all records.
    pub async fn set_upstream(
        &self,
        name: &str,
        ips: &[String],
    ) -> Result<BTreeMap<String, Vec<String>>, PodExecError> {
        let mut st = self.inner.dns.lock().await;
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if ips.is_empty() {
            st.upstream_records.remove(&name);
        } else {
            st.upstream_records.insert(name, ips.to_vec());
        }
        write_file(
            &self.inner.dir.join("upstream.hosts"),
            &dns::upstream_hosts(&st.upstream_records),
        )?;
        st.upstream.reload().await?;
        Ok(st.upstream_records.clone())
    }

    /// Sets the system CA bundle the probe images carry, as an image built with a private CA
    /// in its trust store would (e.g. a company base image): containers started from now on
    /// see `pem` at [`IMAGE_CA_BUNDLE`] (a bind mount of a root-owned 0644 copy in their
    /// private mount namespace; the host's file is untouched). `None`: they see the host's file again.
    ///
    /// Errors: the host has no file at [`IMAGE_CA_BUNDLE`] to mount over, or the copy cannot be
    /// written.
    pub fn set_image_ca_bundle(&self, pem: Option<&str>) -> Result<(), PodExecError> {
        let mut slot = self.inner.image_ca.lock().unwrap();
        let Some(pem) = pem else {
            *slot = None;
            return Ok(());
        };
        if !Path::new(IMAGE_CA_BUNDLE).is_file() {
            return Err(PodExecError::Setup(format!(
                "no {IMAGE_CA_BUNDLE} on this host to stand in for the image's CA bundle"
            )));
        }
        let n = self.inner.seq.fetch_add(1, Ordering::Relaxed);
        let file = self.inner.dir.join(format!("image-ca-{n}.crt"));
        write_file(&file, pem)?;
        *slot = Some(file);
        Ok(())
    }

    /// Number of containers running now.
    pub fn running(&self) -> usize {
        self.inner.running.lock().unwrap().len()
    }

    /// Waits (no polling) until no container runs; false after `timeout`.
    pub async fn wait_idle(&self, timeout: Duration) -> bool {
        let mut rx = self.inner.idle.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Process ids of the long-lived processes (both dnsmasq, the network namespace holder).
    pub fn pids(&self) -> Vec<u32> {
        self.inner.pids.lock().unwrap().clone()
    }
}

impl Drop for PodExec {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for (_, r) in self.inner.running.lock().unwrap().drain() {
            if let Some(g) = r.pgid {
                kill_pid("-KILL", &format!("-{g}"));
            }
            r.kill.notify_one();
        }
        for p in self.inner.pids.lock().unwrap().drain(..) {
            kill_pid("-KILL", &p.to_string());
        }
        self.inner.link.delete();
    }
}

/// Removes `base/twin-podexec-*` directories left by runtimes whose process ended without
/// dropping them (their `.lock` is free); directories without a lock file are left alone.
fn remove_stale_dirs(base: &Path) {
    let Ok(rd) = std::fs::read_dir(base) else {
        return;
    };
    for e in rd.flatten() {
        if !e.file_name().to_string_lossy().starts_with("twin-podexec-") {
            continue;
        }
        let free = std::fs::File::open(e.path().join(".lock"))
            .ok()
            .is_some_and(|f| f.try_lock().is_ok());
        if free {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Deletes the link if start fails after creating it.
struct LinkGuard(Option<NodeLink>);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        if let Some(l) = self.0.take() {
            l.delete();
        }
    }
}

async fn cluster_records(api: &dyn PodApi, domain: &str) -> String {
    let corefile = api
        .get(ObjKey::new("v1", "ConfigMap", "kube-system", "coredns"))
        .await
        .and_then(|c| c["data"]["Corefile"].as_str().map(str::to_string));
    let services = api.services().await;
    dns::cluster_hosts(corefile.as_deref(), &services, domain)
}

fn pod_ip(uid: &str) -> String {
    let n = uid.bytes().fold(2166136261u32, |a, b| {
        (a ^ u32::from(b)).wrapping_mul(16777619)
    });
    format!("10.244.{}.{}", (n >> 8) % 250, n % 250 + 2)
}

/// What ended a container.
#[derive(Clone, Copy, PartialEq, Debug)]
enum End {
    Exited,
    Deadline,
    Deleted,
}

struct Outcome {
    name: String,
    image: String,
    exit: i32,
    reason: String,
    message: Option<String>,
    started: String,
    finished: String,
    container_id: String,
    end: End,
}

impl Outcome {
    fn status(&self, ephemeral: bool) -> Value {
        let mut term = json!({"exitCode": self.exit, "reason": self.reason,
            "startedAt": self.started, "finishedAt": self.finished, "containerID": self.container_id});
        if let Some(m) = &self.message {
            term["message"] = json!(m);
        }
        let mut st = json!({"name": self.name, "image": self.image, "imageID": image_id(&self.image),
            "containerID": self.container_id, "ready": false, "started": false, "restartCount": 0,
            "state": {"terminated": term}});
        if ephemeral {
            st.as_object_mut().map(|o| o.remove("started"));
        }
        st
    }
}

fn image_id(image: &str) -> String {
    let hex: String = crate::workload::template_hash(&json!(image))
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}@sha256:{hex:0>64}", split_repo(image))
}

/// kubelet `verifyRunAsNonRoot` (pkg/kubelet/kuberuntime/security_context_others.go): with
/// `runAsNonRoot: true` a UID 0 (explicit, or the image default: every probe image runs as
/// root) is refused before the container is created.
fn non_root_violation(pod: &Value, c: &Value) -> Option<String> {
    let get = |k: &str| {
        c.pointer(&format!("/securityContext/{k}"))
            .filter(|v| !v.is_null())
            .or(pod.pointer(&format!("/spec/securityContext/{k}")))
            .cloned()
    };
    if get("runAsNonRoot").and_then(|v| v.as_bool()) != Some(true) {
        return None;
    }
    let pod_ref = format!(
        "{}_{}({})",
        s(pod, "/metadata/name"),
        s(pod, "/metadata/namespace"),
        s(pod, "/metadata/uid")
    );
    let cname = s(c, "/name");
    match get("runAsUser").and_then(|v| v.as_i64()) {
        Some(0) => Some(format!(
            "container's runAsUser breaks non-root policy (pod: \"{pod_ref}\", container: {cname})"
        )),
        Some(_) => None,
        None => Some(format!(
            "container has runAsNonRoot and image will run as root (pod: \"{pod_ref}\", container: {cname})"
        )),
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Inner {
    /// The container's `env` as the kubelet resolves it (pkg/kubelet/kubelet_pods.go
    /// `makeEnvironmentVariables`): literal `value`s, and `valueFrom.secretKeyRef` read from
    /// the Secret in the pod's namespace at start. A missing Secret or key fails the container
    /// with the kubelet's message (`secret "NAME" not found`, `couldn't find key KEY in Secret
    /// NS/NAME`), unless `optional: true` (then the variable is left out). Other `valueFrom`
    /// sources (configMapKeyRef, fieldRef, resourceFieldRef) and `$(VAR)` expansion are not
    /// modelled (the variable is left out). Then the Service link variables the container
    /// did not declare ([`cluster_loop::servicelinks::pod_link_vars`]).
    async fn container_env(&self, pod: &Value, c: &Value) -> Result<Vec<(String, String)>, String> {
        use base64::Engine as _;
        let ns = s(pod, "/metadata/namespace");
        let mut out = Vec::new();
        for e in c["env"].as_array().into_iter().flatten() {
            let Some(k) = e["name"].as_str() else {
                continue;
            };
            if let Some(v) = e["value"].as_str() {
                out.push((k.to_string(), v.to_string()));
                continue;
            }
            let Some(r) = e.pointer("/valueFrom/secretKeyRef") else {
                continue;
            };
            let (name, key) = (s(r, "/name"), s(r, "/key"));
            let optional = r["optional"].as_bool().unwrap_or(false);
            let secret = self.api.get(ObjKey::new("v1", "Secret", ns, name)).await;
            let Some(secret) = secret else {
                if optional {
                    continue;
                }
                return Err(format!("secret \"{name}\" not found"));
            };
            let value = secret
                .pointer("/data")
                .and_then(|d| d.get(key))
                .and_then(Value::as_str)
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .or_else(|| {
                    secret
                        .pointer("/stringData")
                        .and_then(|d| d.get(key))
                        .and_then(Value::as_str)
                        .map(|v| v.as_bytes().to_vec())
                });
            match value {
                Some(v) => out.push((k.to_string(), String::from_utf8_lossy(&v).into_owned())),
                None if optional => {}
                None => return Err(format!("couldn't find key {key} in Secret {ns}/{name}")),
            }
        }
        // Then the Service link variables the container did not declare
        // (cluster_loop::servicelinks: the pod's namespace's Services unless
        // enableServiceLinks: false, and the master Service default/kubernetes).
        let services = self.api.services().await;
        let spec = pod.get("spec").cloned().unwrap_or_default();
        let links = cluster_loop::servicelinks::pod_link_vars(
            ns,
            cluster_loop::servicelinks::enabled(&spec),
            &services,
        );
        for (k, v) in links {
            if !out.iter().any(|(n, _)| *n == k) {
                out.push((k, v));
            }
        }
        Ok(out)
    }

    /// `(mountPath, tmpfs size)` of the container's mounts of `emptyDir` volumes. Each is a
    /// private tmpfs (mode 1777, `sizeLimit` or 64m) mounted over a directory that must exist
    /// on the host (the twin has no image root filesystem to create a mount point in).
    /// Other volume types are not modelled and fail the container.
    fn empty_dir_mounts(
        &self,
        pod: &Value,
        c: &Value,
    ) -> Result<Vec<(String, String)>, PodExecError> {
        let volumes = pod
            .pointer("/spec/volumes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::new();
        for m in c["volumeMounts"].as_array().into_iter().flatten() {
            let (name, path) = (s(m, "/name"), s(m, "/mountPath"));
            let vol = volumes.iter().find(|v| v["name"] == json!(name));
            // The service-account token volume a real apiserver's ServiceAccount admission
            // adds (`kube-api-access-*`: projected serviceAccountToken + kube-root-ca.crt +
            // namespace) is not mounted: the probes never call the API, and a container that
            // reads it finds no file (never a made-up token).
            if vol
                .and_then(|v| v.pointer("/projected/sources"))
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(|x| x.get("serviceAccountToken").is_some()))
            {
                continue;
            }
            let Some(ed) = vol.and_then(|v| v.get("emptyDir")) else {
                return Err(PodExecError::Setup(format!(
                    "twin podexec: volume {name:?} is not an emptyDir; only emptyDir volumes are modelled"
                )));
            };
            if !Path::new(path).is_dir() || !path.starts_with('/') {
                return Err(PodExecError::Setup(format!(
                    "twin podexec: mountPath {path} must be an existing directory on this host (there is no image root filesystem to create it in)"
                )));
            }
            let size = ed["sizeLimit"]
                .as_str()
                .map(|q| q.replace("Mi", "m").replace("Gi", "g").replace("Ki", "k"))
                .unwrap_or_else(|| "64m".into());
            out.push((path.to_string(), size));
        }
        Ok(out)
    }

    async fn sync_dns(&self) -> Result<String, PodExecError> {
        let mut st = self.dns.lock().await;
        let content = cluster_records(&*self.api, &self.node.cluster_domain).await;
        if content != st.content {
            write_file(&self.dir.join("cluster.hosts"), &content)?;
            st.cluster.reload().await?;
            st.content = content.clone();
        }
        Ok(content)
    }

    /// Records that pod `pod` runs (`up`) or ended, and brings the Service addresses on `lo`
    /// in line ([`vips::wanted`]).
    async fn serve(&self, pod: &Value, up: bool) {
        let uid = s(pod, "/metadata/uid").to_string();
        {
            let mut m = self.serving.lock().unwrap();
            if up {
                let labels = pod["metadata"]["labels"]
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                m.insert(uid, (s(pod, "/metadata/namespace").to_string(), labels));
            } else {
                m.remove(&uid);
            }
        }
        let _ = self.sync_vips().await;
    }

    /// Puts on `lo` of the pod network the ClusterIP of every Service [`vips::wanted`] names,
    /// and removes the others it put there.
    async fn sync_vips(&self) -> Result<(), PodExecError> {
        let mut on = self.vips.lock().await;
        let services = self.api.services().await;
        let pods: Vec<vips::PodLabels> = self.serving.lock().unwrap().values().cloned().collect();
        let want = vips::wanted(&services, &pods);
        for (verb, ip) in want
            .difference(&on)
            .map(|ip| ("add", ip))
            .chain(on.difference(&want).map(|ip| ("del", ip)))
        {
            let net = format!("--net={}", self.netns);
            let cidr = format!("{ip}/32");
            run_ok("nsenter", &[&net, "ip", "addr", verb, &cidr, "dev", "lo"]).await?;
        }
        *on = want;
        Ok(())
    }

    fn untrack(&self, key: &str) {
        let mut r = self.running.lock().unwrap();
        r.remove(key);
        self.idle.send_replace(r.len());
    }

    fn kill_pod(&self, uid: &str) {
        let prefix = format!("{uid}/");
        for (k, r) in self.running.lock().unwrap().iter() {
            if k.starts_with(&prefix) {
                if let Some(g) = r.pgid {
                    kill_pid("-KILL", &format!("-{g}"));
                }
                r.kill.notify_one();
            }
        }
    }

    fn consider(self: &Arc<Self>, pod: &Value) {
        let uid = s(pod, "/metadata/uid").to_string();
        if uid.is_empty() {
            return;
        }
        if !s(pod, "/metadata/deletionTimestamp").is_empty() {
            self.kill_pod(&uid);
            return;
        }
        let phase = s(pod, "/status/phase");
        if phase == "Succeeded" || phase == "Failed" {
            return;
        }
        // A pod bound to another node (e.g. a real kubelet's beside this one) is not ours.
        let bound = s(pod, "/spec/nodeName");
        if !bound.is_empty() && bound != self.node.node_name {
            return;
        }
        if all_probe_images(pod) && self.started.lock().unwrap().insert(uid.clone()) {
            let i = self.clone();
            let p = pod.clone();
            tokio::spawn(async move { i.run_pod(p).await });
        }
        let done: Vec<String> = pod
            .pointer("/status/ephemeralContainerStatuses")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| c["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        for ec in pod
            .pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            let name = ec["name"].as_str().unwrap_or_default().to_string();
            if done.contains(&name) || !self.started.lock().unwrap().insert(format!("{uid}/{name}"))
            {
                continue;
            }
            let i = self.clone();
            let p = pod.clone();
            tokio::spawn(async move { i.run_ephemeral(p, ec).await });
        }
    }

    fn key(pod: &Value) -> ObjKey {
        ObjKey::new(
            "v1",
            "Pod",
            s(pod, "/metadata/namespace"),
            s(pod, "/metadata/name"),
        )
    }

    async fn event(&self, pod: &Value, t: &'static str, reason: &'static str, msg: &str) {
        let mut involved = pod.clone();
        if involved.get("apiVersion").is_none() {
            involved["apiVersion"] = json!("v1");
            involved["kind"] = json!("Pod");
        }
        self.api.event(involved, t, reason, msg.to_string()).await;
    }

    fn pod_status(
        &self,
        pod: &Value,
        phase: &str,
        statuses: Vec<Value>,
        ready: bool,
        start: &str,
    ) -> Value {
        let tf = |b: bool| if b { "True" } else { "False" };
        let now = now_rfc3339();
        let mut conds = vec![
            json!({"type": "PodReadyToStartContainers", "status": tf(phase == "Running"), "lastTransitionTime": start}),
            json!({"type": "Initialized", "status": "True", "lastTransitionTime": start}),
            json!({"type": "Ready", "status": tf(ready), "lastTransitionTime": now}),
            json!({"type": "ContainersReady", "status": tf(ready), "lastTransitionTime": now}),
            json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": start}),
        ];
        if !ready {
            let reason = if phase == "Running" {
                "ContainersNotReady"
            } else {
                "PodCompleted"
            };
            for c in conds
                .iter_mut()
                .filter(|c| c["type"] == "Ready" || c["type"] == "ContainersReady")
            {
                c["reason"] = json!(reason);
            }
        }
        let resources = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.pointer("/resources/requests").is_some()
                        || c.pointer("/resources/limits").is_some()
                })
            });
        let ip = pod_ip(s(pod, "/metadata/uid"));
        json!({
            "phase": phase, "conditions": conds, "containerStatuses": statuses,
            "hostIP": self.host_ip, "hostIPs": [{"ip": self.host_ip}],
            "podIP": ip, "podIPs": [{"ip": ip}],
            // A real apiserver sets it at create and refuses a change; the twin may not.
            "qosClass": pod.pointer("/status/qosClass").and_then(Value::as_str)
                .unwrap_or(if resources { "Burstable" } else { "BestEffort" }),
            "startTime": start,
        })
    }

    async fn run_pod(self: Arc<Self>, pod: Value) {
        let key = Self::key(&pod);
        let start = now_rfc3339();
        let mut refused: Vec<(Value, String)> = Vec::new();
        for c in pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let m = match non_root_violation(&pod, c) {
                Some(m) => Some(m),
                None => self.container_env(&pod, c).await.err(),
            };
            if let Some(m) = m {
                refused.push((c.clone(), m));
            }
        }
        if !refused.is_empty() {
            let mut statuses: Vec<Value> = Vec::new();
            for (c, m) in &refused {
                self.event(&pod, "Warning", "Failed", &format!("Error: {m}"))
                    .await;
                statuses.push(
                    json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": false,
                    "started": false, "restartCount": 0,
                    "state": {"waiting": {"reason": "CreateContainerConfigError", "message": m}}}),
                );
            }
            self.api
                .patch_status(
                    key,
                    json!({"status": self.pod_status(&pod, "Pending", statuses, false, &start)}),
                )
                .await;
            return;
        }
        let t0 = Instant::now();
        // The pod's own deadline only, as a kubelet (k8s.io/kubernetes pkg/kubelet
        // active_deadline.go `pastActiveDeadline` reads `pod.Spec.ActiveDeadlineSeconds`). A
        // Job's `spec.activeDeadlineSeconds` is the job controller's: it fails the Job
        // (`DeadlineExceeded`) and deletes the active pods, and a deletion kills the container.
        let deadline = pod
            .pointer("/spec/activeDeadlineSeconds")
            .and_then(Value::as_i64)
            .map(|d| Duration::from_secs(d.max(1) as u64));
        let containers: Vec<Value> = pod
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let ids: Vec<String> = containers
            .iter()
            .map(|_| {
                format!(
                    "containerd://{:064x}",
                    self.seq.fetch_add(1, Ordering::Relaxed) as u128 * 0x9e37_79b9_7f4a_7c15
                        + t0.elapsed().as_nanos()
                )
            })
            .collect();
        let running: Vec<Value> = containers
            .iter()
            .zip(&ids)
            .map(|(c, id)| {
                let image = c["image"].as_str().unwrap_or_default();
                json!({"name": c["name"], "image": image, "imageID": image_id(image), "containerID": id,
                    "ready": true, "started": true, "restartCount": 0, "state": {"running": {"startedAt": start}}})
            })
            .collect();
        for c in &containers {
            let image = c["image"].as_str().unwrap_or_default();
            self.event(
                &pod,
                "Normal",
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
            )
            .await;
            self.event(
                &pod,
                "Normal",
                "Created",
                &format!("Created container {}", s(c, "/name")),
            )
            .await;
            self.event(
                &pod,
                "Normal",
                "Started",
                &format!("Started container {}", s(c, "/name")),
            )
            .await;
        }
        // Each container's log exists (empty) before the pod is reported Running: a kubelet
        // streams `kubectl logs [-f]` of a running container that has not printed yet, it
        // does not answer "waiting to start".
        let (ns, pname) = (s(&pod, "/metadata/namespace"), s(&pod, "/metadata/name"));
        for c in &containers {
            self.api.append_log(ns, pname, s(c, "/name"), b"");
        }
        self.api
            .patch_status(
                key.clone(),
                json!({"status": self.pod_status(&pod, "Running", running, true, &start)}),
            )
            .await;
        self.serve(&pod, true).await;
        let kill = Arc::new(Notify::new());
        let mut futs = Vec::new();
        for (c, id) in containers.iter().zip(&ids) {
            futs.push(self.clone().run_container(
                pod.clone(),
                c.clone(),
                id.clone(),
                deadline.map(|d| t0 + d),
                kill.clone(),
                false,
            ));
        }
        let outcomes = futures::future::join_all(futs).await;
        self.serve(&pod, false).await;
        if outcomes.iter().any(|o| o.end == End::Deleted) {
            return;
        }
        let deadline_hit = outcomes.iter().any(|o| o.end == End::Deadline);
        let ok = outcomes.iter().all(|o| o.exit == 0) && !deadline_hit;
        // A failed Job pod: kube-controller-manager's job controller sets the Job's Failed
        // condition from this pod status, as on any cluster (nothing for a kubelet to write).
        let statuses: Vec<Value> = outcomes.iter().map(|o| o.status(false)).collect();
        let mut st = self.pod_status(
            &pod,
            if ok { "Succeeded" } else { "Failed" },
            statuses,
            false,
            &start,
        );
        if deadline_hit {
            st["reason"] = json!("DeadlineExceeded");
            st["message"] = json!("Pod was active on the node longer than the specified deadline");
            self.event(
                &pod,
                "Normal",
                "DeadlineExceeded",
                "Pod was active on the node longer than the specified deadline",
            )
            .await;
        }
        self.api.patch_status(key, json!({"status": st})).await;
    }

    /// Writes one ephemeral container's status into the pod's current list (read first: a
    /// merge patch replaces the whole list).
    async fn set_ephemeral_status(&self, key: &ObjKey, pod: &Value, name: &str, st: Value) {
        let cur = self.api.get(key.clone()).await.unwrap_or(pod.clone());
        let mut list: Vec<Value> = cur
            .pointer("/status/ephemeralContainerStatuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        list.retain(|x| x["name"] != json!(name));
        list.push(st);
        self.api
            .patch_status(
                key.clone(),
                json!({"status": {"ephemeralContainerStatuses": list}}),
            )
            .await;
    }

    async fn run_ephemeral(self: Arc<Self>, pod: Value, ec: Value) {
        let key = Self::key(&pod);
        let name = s(&ec, "/name").to_string();
        let image = s(&ec, "/image").to_string();
        if image_kind(&image).is_none() {
            let full = crate::workload::normalize_image(&image);
            let msg = format!(
                "rpc error: code = NotFound desc = failed to pull and unpack image \"{full}\": failed to resolve reference \"{full}\": {full}: not found"
            );
            self.event(
                &pod,
                "Warning",
                "Failed",
                &format!("Failed to pull image \"{image}\": {msg}"),
            )
            .await;
            self.set_ephemeral_status(&key, &pod, &name,
                json!({"name": name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ErrImagePull", "message": msg}}}),
            ).await;
            return;
        }
        if let Some(m) = non_root_violation(&pod, &ec) {
            self.event(&pod, "Warning", "Failed", &format!("Error: {m}"))
                .await;
            self.set_ephemeral_status(&key, &pod, &name,
                json!({"name": name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "CreateContainerConfigError", "message": m}}}),
            ).await;
            return;
        }
        let id = format!(
            "containerd://{:064x}",
            self.seq.fetch_add(1, Ordering::Relaxed) + 0xec00
        );
        let start = now_rfc3339();
        self.event(
            &pod,
            "Normal",
            "Started",
            &format!("Started container {name}"),
        )
        .await;
        self.api.append_log(
            s(&pod, "/metadata/namespace"),
            s(&pod, "/metadata/name"),
            &name,
            b"",
        );
        self.set_ephemeral_status(
            &key,
            &pod,
            &name,
            json!({"name": name, "image": image, "imageID": image_id(&image), "containerID": id,
            "ready": false, "restartCount": 0, "state": {"running": {"startedAt": start}}}),
        )
        .await;
        let kill = Arc::new(Notify::new());
        let o = self
            .clone()
            .run_container(pod.clone(), ec.clone(), id, None, kill, true)
            .await;
        if o.end != End::Deleted {
            self.set_ephemeral_status(&key, &pod, &name, o.status(true))
                .await;
        }
    }

    /// Runs one container to its end. Never panics; setup failures become a StartError.
    async fn run_container(
        self: Arc<Self>,
        pod: Value,
        c: Value,
        container_id: String,
        deadline: Option<Instant>,
        kill: Arc<Notify>,
        ephemeral: bool,
    ) -> Outcome {
        let ns = s(&pod, "/metadata/namespace").to_string();
        let pname = s(&pod, "/metadata/name").to_string();
        let uid = s(&pod, "/metadata/uid").to_string();
        let cname = s(&c, "/name").to_string();
        let image = s(&c, "/image").to_string();
        let started = now_rfc3339();
        let mut out = Outcome {
            name: cname.clone(),
            image: image.clone(),
            exit: 128,
            reason: "StartError".into(),
            message: None,
            started: started.clone(),
            finished: started.clone(),
            container_id,
            end: End::Exited,
        };
        let kind = image_kind(&image).unwrap_or(ImageKind::Busybox);
        let bin = self.bins[&kind].clone();
        let mut argv = strs(&c["command"]);
        argv.extend(strs(&c["args"]));
        if argv.is_empty() {
            argv.push("sh".into());
        }
        let base = argv[0].rsplit('/').next().unwrap_or_default().to_string();
        let exe = bin.join(&base);
        if base.is_empty() || !exe.exists() {
            out.message = Some(format!(
                "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"{}\": executable file not found in $PATH: unknown",
                argv[0]
            ));
            self.api.close_log(&ns, &pname, &cname);
            return out;
        }
        let key = format!("{uid}/{cname}");
        let r = self.spawn(&pod, &c, &exe, &argv, &key, kill.clone()).await;
        let (mut child, holder, cdir) = match r {
            Ok(x) => x,
            Err(e) => {
                out.message = Some(e.to_string());
                self.untrack(&key);
                self.api.close_log(&ns, &pname, &cname);
                return out;
            }
        };
        let pgid = child.id();
        let tail = Arc::new(Mutex::new(Vec::<u8>::new()));
        let mut readers = Vec::new();
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            let api = self.api.clone();
            let (ns, pname, cname, tail) = (ns.clone(), pname.clone(), cname.clone(), tail.clone());
            readers.push(tokio::spawn(async move {
                let mut p = pipe;
                let mut buf = vec![0u8; 8192];
                while let Ok(n) = p.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    api.append_log(&ns, &pname, &cname, &buf[..n]);
                    let mut t = tail.lock().unwrap();
                    t.extend_from_slice(&buf[..n]);
                    let len = t.len();
                    if len > 4096 {
                        t.drain(..len - 4096);
                    }
                }
            }));
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let status = tokio::select! {
            st = child.wait() => st.ok(),
            _ = sleep => { out.end = End::Deadline; None }
            _ = kill.notified() => { out.end = End::Deleted; None }
        };
        let status = match status {
            Some(st) => Some(st),
            None => {
                if let Some(g) = pgid {
                    kill_pid("-KILL", &format!("-{g}"));
                }
                let _ = child.start_kill();
                child.wait().await.ok()
            }
        };
        // killed because the pod was deleted, but the exit won the race: still a deletion
        if out.end == End::Exited && futures::FutureExt::now_or_never(kill.notified()).is_some() {
            out.end = End::Deleted;
        }
        for r in readers {
            let _ = tokio::time::timeout(Duration::from_secs(10), r).await;
        }
        self.api.close_log(&ns, &pname, &cname);
        self.untrack(&key);
        drop(holder);
        let _ = std::fs::remove_dir_all(&cdir);
        out.exit = status
            .map(|st| st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(9)))
            .unwrap_or(137);
        out.finished = now_rfc3339();
        out.reason = if out.exit == 0 { "Completed" } else { "Error" }.into();
        if out.exit != 0 && s(&c, "/terminationMessagePolicy") == "FallbackToLogsOnError" {
            // kubelet: the last 80 lines, at most 2048 bytes, of the log
            let t = tail.lock().unwrap().clone();
            let text = String::from_utf8_lossy(&t).to_string();
            let lines: Vec<&str> = text.lines().collect();
            let mut m = lines[lines.len().saturating_sub(80)..].join("\n");
            if m.len() > 2048 {
                let cut = m.len() - 2048;
                let cut = (cut..m.len())
                    .find(|i| m.is_char_boundary(*i))
                    .unwrap_or(m.len());
                m = m[cut..].to_string();
            }
            if !m.is_empty() {
                out.message = Some(m);
            }
        }
        let _ = ephemeral;
        out
    }

    /// Namespaces, files and the process. Registers the process group under `key`.
    async fn spawn(
        &self,
        pod: &Value,
        c: &Value,
        exe: &Path,
        argv: &[String],
        key: &str,
        kill: Arc<Notify>,
    ) -> Result<(Child, Holder, PathBuf), PodExecError> {
        {
            let mut r = self.running.lock().unwrap();
            r.insert(key.to_string(), Running { pgid: None, kill });
            self.idle.send_replace(r.len());
        }
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let cdir = self.dir.join(format!("c{n}"));
        std::fs::create_dir_all(&cdir).map_err(|e| PodExecError::Setup(e.to_string()))?;
        chmod(&cdir, 0o755);
        let ip = pod_ip(s(pod, "/metadata/uid"));
        write_file(
            &cdir.join("resolv.conf"),
            &dns::pod_resolv_conf(pod, &self.node),
        )?;
        write_file(
            &cdir.join("hosts"),
            &dns::pod_hosts_file(pod, &ip, &self.node),
        )?;
        write_file(&cdir.join("nsswitch.conf"), "hosts: files dns\n")?;
        let holder =
            Holder::start(&["-m", "-u", "--propagation", "private"], &["mnt", "uts"]).await?;
        let mnt = format!("--mount={}", holder.ns("mnt"));
        let uts = format!("--uts={}", holder.ns("uts"));
        for f in ["resolv.conf", "hosts", "nsswitch.conf"] {
            let src = cdir.join(f).display().to_string();
            let dst = format!("/etc/{f}");
            run_ok("nsenter", &[&mnt, "mount", "--bind", &src, &dst]).await?;
        }
        let image_ca = self.image_ca.lock().unwrap().clone();
        if let Some(src) = image_ca {
            let src = src.display().to_string();
            run_ok("nsenter", &[&mnt, "mount", "--bind", &src, IMAGE_CA_BUNDLE]).await?;
        }
        run_ok("nsenter", &[&uts, "hostname", &dns::pod_hostname(pod)]).await?;
        for (path, size) in self.empty_dir_mounts(pod, c)? {
            let opts = format!("mode=1777,size={size}");
            run_ok(
                "nsenter",
                &[&mnt, "mount", "-t", "tmpfs", "-o", &opts, "tmpfs", &path],
            )
            .await?;
        }
        let sc = |k: &str| {
            c.pointer(&format!("/securityContext/{k}"))
                .and_then(Value::as_i64)
                .or(pod
                    .pointer(&format!("/spec/securityContext/{k}"))
                    .and_then(Value::as_i64))
                .unwrap_or(0)
        };
        let (uid, gid) = (sc("runAsUser"), sc("runAsGroup"));
        let mut env: Vec<(String, String)> = vec![
            (
                "PATH".into(),
                exe.parent().unwrap_or(Path::new("/")).display().to_string(),
            ),
            ("HOSTNAME".into(), dns::pod_hostname(pod)),
            (
                "HOME".into(),
                if uid == 0 { "/root".into() } else { "/".into() },
            ),
        ];
        for (k, v) in self
            .container_env(pod, c)
            .await
            .map_err(PodExecError::Setup)?
        {
            env.retain(|(n, _)| *n != k);
            env.push((k, v));
        }
        let mut cmd = guarded("nsenter");
        cmd.arg(format!("--net={}", self.netns))
            .arg(&mnt)
            .arg(&uts)
            .args(["-S", &uid.to_string(), "-G", &gid.to_string(), "--"])
            .arg(exe)
            .args(&argv[1..])
            .env_clear()
            .envs(env)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd
            .spawn()
            .map_err(|e| PodExecError::Setup(format!("nsenter: {e}")))?;
        if let Some(r) = self.running.lock().unwrap().get_mut(key) {
            r.pgid = child.id();
        }
        Ok((child, holder, cdir))
    }
}
