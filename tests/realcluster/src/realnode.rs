//! The real node, opt-in per cluster ([`crate::ClusterOptions::real_kubelet`]): the real
//! kubelet ([`KUBELET_VERSION`], `k8s.io/kubernetes/cmd/kubelet` of kube/'s go.mod) on
//! containerd ([`CONTAINERD_VERSION`]) and runc ([`RUNC_VERSION`], built with seccomp), with
//! the CNI plugins ([`CNI_PLUGINS_VERSION`]: bridge, host-local, loopback). All built by
//! `build.sh module:node` (its own cache key; the first cluster that asks builds it), never by
//! `demo` or `all`.
//!
//! The kubelet registers Node [`REAL_NODE_NAME`] with the cluster's kube-apiserver (its own
//! client certificate, `system:node:<name>` in `system:nodes`, bound to the `system:node`
//! ClusterRole), beside the node agent's Node; the agent never binds or runs a pod meant for
//! this node ([`crate::node::meant_for_another_node`]). containerd pulls the images from the
//! cluster's OCI registry ([`crate::oci`], plain HTTP through a `hosts.toml`): the sandbox
//! image is the release's `pause` built from `build/pause/linux/pause.c`, and
//! [`RealNode::busybox_image`] is the host's BusyBox with the libraries it links
//! (`sh`, `sleep`, ... as links), pushed at start.
//!
//! How it runs, and why (each found on this VM: kernel 6.18, cgroup v1, root without
//! CAP_SYS_RESOURCE):
//! - containerd and the kubelet run in a PID and mount namespace of their own (`unshare --pid
//!   --fork --kill-child --mount --mount-proc`, a bash as its PID 1 that starts both and ends
//!   when either ends). When PID 1 dies the kernel kills every process of the namespace: the
//!   shims and the containers too (they would otherwise outlive containerd, reparented to the
//!   host's init). The mounts (overlay root filesystems, `/dev/shm`, the network namespaces'
//!   bind mounts, the kubelet's volumes) exist only in that mount namespace and go with it.
//!   `setpriv --pdeathsig KILL` ([`crate::proc`]) ends the namespace's `unshare` with the test
//!   process, and `--kill-child` its PID 1.
//! - `/run/containerd` (where the shims' sockets go, a fixed path) is a tmpfs of that
//!   namespace; everything else is under the cluster directory (`node/`): containerd's root,
//!   state and socket, the kubelet's root dir and pod logs, the CNI config and IPAM data.
//! - The kubelet sets six kernel tunables when it starts (`vm.overcommit_memory=1`,
//!   `kernel.panic=10`, `kernel.panic_on_oops=1`, ...; pkg/kubelet/cm `setupKernelTunables`).
//!   This machine is shared, so in the namespace those `/proc/sys` files are bind mounts of
//!   files holding the kubelet's values: it reads what it wants and changes nothing of the
//!   host's kernel.
//! - containerd's CRI `restrict_oom_score_adj = true`: the kubelet gives the sandbox
//!   `oom_score_adj` -998, which root here may not set (runc: `nsexec: failed to update
//!   /proc/self/oom_score_adj: Permission denied`).
//! - The kubelet runs with `failCgroupV1: false` (v1.36 refuses cgroup v1 otherwise),
//!   `cgroupDriver: cgroupfs` and a `cgroupRoot` of this cluster's own
//!   (`/<cluster dir name>` in every v1 hierarchy), so several clusters never share
//!   `kubepods`.
//! - The CNI bridge is a link of this cluster (`rck-<suffix>`) on a `/24` of `10.250.0.0/16`
//!   no interface uses yet.
//!
//! Teardown ([`RealNode`]'s drop): kill the namespace, wait until the cgroups hold no process,
//! remove them (deepest first) and the bridge. After a crash the next start does the same for
//! the dead cluster's directory ([`sweep`], from `remove_stale_dirs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::Error;
use crate::oci::OciRegistry;
use crate::pki::Pki;
use crate::proc::{Proc, Spec, free_port};

/// The real kubelet's Node name (the node agent's is [`crate::node::NODE_NAME`]).
pub const REAL_NODE_NAME: &str = "realcluster-kubelet";
/// The kubelet's release (kube/'s go.mod: the control plane's).
pub const KUBELET_VERSION: &str = crate::bins::KUBE_VERSION;
/// containerd's release (node/go.mod).
pub const CONTAINERD_VERSION: &str = "v2.4.2";
/// runc's release (node/go.mod).
pub const RUNC_VERSION: &str = "v1.5.3";
/// The CNI plugins' release (node/go.mod).
pub const CNI_PLUGINS_VERSION: &str = "v1.9.1";

/// The kernel tunables the kubelet sets at start (v1.36 pkg/kubelet/cm/container_manager_linux.go
/// `setupKernelTunables`), as `/proc/sys` paths and the values it wants.
const KUBELET_SYSCTLS: [(&str, &str); 6] = [
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
];

/// PID 1 of the node's namespaces: the sysctl shields and `/run/containerd`, then containerd
/// and, once its socket is there, the kubelet; ends (and with it the namespace) when either
/// ends, saying which.
const NODE_INIT: &str = r#"set -u
n=$1; logs=$2; shift 2
mount -t tmpfs -o mode=0711 tmpfs /run/containerd || exit 1
while read -r path value; do
  f="$n/sysctl/${path//\//_}"
  printf '%s\n' "$value" >"$f" || exit 1
  mount --bind "$f" "/proc/sys/$path" || exit 1
done <"$n/sysctls"
export PATH="$n/bin:$PATH"
containerd --config "$n/containerd.toml" >"$logs/containerd.log" 2>&1 &
containerd=$!
for _ in $(seq 1 600); do
  [ -S "$n/containerd.sock" ] && break
  kill -0 "$containerd" 2>/dev/null || { echo "containerd exited; see $logs/containerd.log"; exit 1; }
  sleep 0.1
done
kubelet "$@" >"$logs/kubelet.log" 2>&1 &
kubelet=$!
wait -n "$containerd" "$kubelet"
st=$?
if kill -0 "$containerd" 2>/dev/null; then echo "kubelet exited ($st); see $logs/kubelet.log"; else echo "containerd exited ($st); see $logs/containerd.log"; fi
exit 1
"#;

/// A running real node. Dropping it ends its namespaces (containers, mounts) and removes its
/// cgroups and bridge.
pub struct RealNode {
    proc: Proc,
    node_dir: PathBuf,
    cgroup_name: String,
    bridge: String,
    busybox: String,
}

/// What the host lacks to run the real node (empty: nothing).
pub fn missing_prerequisites() -> Vec<String> {
    let mut out: Vec<String> = ["unshare", "mount", "ip", "bash", "busybox", "tar"]
        .iter()
        .filter(|t| which(t).is_none())
        .map(|t| (*t).to_owned())
        .collect();
    if !rustix::process::geteuid().is_root() {
        out.push("root (effective uid 0)".into());
    }
    if cgroup_v1_mounts().is_empty() {
        out.push("cgroup v1 hierarchies under /sys/fs/cgroup".into());
    }
    out
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|f| f.is_file())
    })
}

/// The bin dir of `build.sh module:node` (built on first use: kubelet, containerd, runc, the
/// CNI plugins, pause). Errors: [`Error::Setup`] when the build fails.
pub fn bin_dir() -> Result<&'static Path, Error> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("CLUSTER_LOOP_REALCLUSTER_NODE_BIN") {
            return Ok(PathBuf::from(d));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("module:node")
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("run {} module:node: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} module:node failed ({}); run it by hand to see why (it needs Go 1.26, the \
                 Go module proxy, gcc and libseccomp-dev)",
                script.display(),
                out.status
            ));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin"))
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(|e| Error::Setup(e.clone()))
}

fn node_bin(name: &str) -> Result<PathBuf, Error> {
    let p = bin_dir()?.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(Error::Setup(format!(
            "{} is missing: rebuild with tests/realcluster/build.sh module:node",
            p.display()
        )))
    }
}

/// The mount points of the cgroup v1 hierarchies (`/sys/fs/cgroup/cpu`, ...).
fn cgroup_v1_mounts() -> Vec<PathBuf> {
    cgroup_mounts(&["cgroup"])
}

/// The mount points of the filesystems of types `types` (`cgroup`, `cgroup2`).
fn cgroup_mounts(types: &[&str]) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let fs = post.split_whitespace().next()?;
            types
                .contains(&fs)
                .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .collect()
}

fn setup(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Setup(format!("real node: {what}: {e}"))
}

fn write(p: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(p, text).map_err(|e| setup(&format!("write {}", p.display()), e))
}

fn symlink(target: &Path, link: &Path) -> Result<(), Error> {
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| setup(&format!("link {}", link.display()), e))
}

/// A `/24` of `10.250.0.0/16` that no address of this host is in, from `seed` on.
fn free_subnet(seed: u32) -> Result<u8, Error> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr"])
        .output()
        .map_err(|e| setup("ip -4 -o addr", e))?;
    let used = String::from_utf8_lossy(&out.stdout).into_owned();
    (0..250u32)
        .map(|i| ((seed + i) % 250 + 1) as u8)
        .find(|x| !used.contains(&format!(" 10.250.{x}.")))
        .ok_or_else(|| setup("subnet", "every 10.250.X.0/24 is in use"))
}

impl RealNode {
    /// Starts containerd and the kubelet for the cluster in `dir` (logs in `logs`), whose
    /// apiserver is `server` with `pki`, pulling from `oci`; `admin_kubeconfig` binds the
    /// `system:node` role first. Returns once containerd serves its socket and the kubelet
    /// runs; the Node's readiness is the caller's to wait for. Errors: a missing prerequisite
    /// or binary, a failed image push, or a process that exited (with its log's tail).
    pub fn start(
        dir: &Path,
        logs: &Path,
        server: &str,
        pki: &Pki,
        oci: &OciRegistry,
        admin_kubeconfig: &Path,
    ) -> Result<RealNode, Error> {
        let missing = missing_prerequisites();
        if !missing.is_empty() {
            return Err(Error::Setup(format!(
                "real node: this host lacks {}",
                missing.join(", ")
            )));
        }
        let kubelet = node_bin(&format!("kubelet-{KUBELET_VERSION}"))?;
        let n = dir.join("node");
        for sub in [
            "bin",
            "cni-bin",
            "cni-conf",
            "sysctl",
            "kubelet",
            "pod-logs",
            "ipam",
            "rootfs-pause",
            "rootfs-busybox",
        ] {
            std::fs::create_dir_all(n.join(sub)).map_err(|e| setup(sub, e))?;
        }
        // Fixed names where containerd (the shim, runc) and the CNI plugins are looked up.
        symlink(&kubelet, &n.join("bin/kubelet"))?;
        for (name, version) in [
            ("containerd", CONTAINERD_VERSION),
            ("containerd-shim-runc-v2", CONTAINERD_VERSION),
            ("runc", RUNC_VERSION),
        ] {
            symlink(
                &node_bin(&format!("{name}-{version}"))?,
                &n.join("bin").join(name),
            )?;
        }
        for name in ["bridge", "host-local", "loopback"] {
            symlink(
                &node_bin(&format!("{name}-{CNI_PLUGINS_VERSION}"))?,
                &n.join("cni-bin").join(name),
            )?;
        }

        // The images, pushed to the cluster's registry for containerd to pull.
        let pause_bin = node_bin(&format!("pause-{KUBELET_VERSION}"))?;
        std::fs::copy(&pause_bin, n.join("rootfs-pause/pause")).map_err(|e| setup("pause", e))?;
        let pause = oci.push_rootfs(
            "realnode/pause",
            "3.10",
            &n.join("rootfs-pause"),
            &["/pause"],
        )?;
        busybox_rootfs(&n.join("rootfs-busybox"))?;
        let busybox = oci.push_rootfs(
            "realnode/busybox",
            "host",
            &n.join("rootfs-busybox"),
            &["/bin/sh"],
        )?;

        // This cluster's names: the cgroup root and the bridge, recorded for `sweep`.
        let dir_name = dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .ok_or_else(|| setup("cluster dir", "no name"))?;
        let suffix: String = dir_name
            .rsplit('-')
            .next()
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(8)
            .collect();
        let bridge = format!("rck-{suffix}");
        let cgroup_name = dir_name.clone();
        write(&n.join("bridge"), &bridge)?;
        write(&n.join("cgroup"), &cgroup_name)?;
        for h in cgroup_v1_mounts() {
            let c = h.join(&cgroup_name);
            std::fs::create_dir_all(&c).map_err(|e| setup(&format!("{}", c.display()), e))?;
            // A new cpuset cgroup starts with no CPUs or memory nodes: its parent's.
            for f in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(v) = std::fs::read_to_string(h.join(f)) {
                    write(&c.join(f), v.trim())?;
                }
            }
        }
        let seed = suffix.bytes().fold(std::process::id(), |a, b| {
            a.wrapping_mul(31).wrapping_add(u32::from(b))
        });
        let x = free_subnet(seed)?;
        let cni = serde_json::json!({
            "cniVersion": "1.0.0",
            "name": "realcluster",
            "plugins": [{
                "type": "bridge", "bridge": bridge, "isGateway": true, "ipMasq": false,
                "hairpinMode": true,
                "ipam": {"type": "host-local", "dataDir": n.join("ipam"),
                         "ranges": [[{"subnet": format!("10.250.{x}.0/24")}]],
                         "routes": [{"dst": "0.0.0.0/0"}]}
            }]
        });
        write(
            &n.join("cni-conf/10-realcluster.conflist"),
            &cni.to_string(),
        )?;

        // containerd: everything under node/, the registry over plain HTTP.
        let hosts = n.join("certs.d").join(oci.host());
        std::fs::create_dir_all(&hosts).map_err(|e| setup("certs.d", e))?;
        write(
            &hosts.join("hosts.toml"),
            &format!(
                "server = \"http://{h}\"\n\n[host.\"http://{h}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
                h = oci.host()
            ),
        )?;
        let p = |s: &str| n.join(s).to_string_lossy().into_owned();
        let stream_port = free_port()?;
        write(
            &n.join("containerd.toml"),
            &format!(
                r#"version = 3
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{ttrpc}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false

[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  BinaryName = "{runc}"
  Root = "{runc_root}"
  SystemdCgroup = false

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["{cni_bin}"]
  conf_dir = "{cni_conf}"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{pause}"

[plugins."io.containerd.cri.v1.images".registry]
  config_path = "{certs}"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "{stream_port}"
"#,
                root = p("containerd/root"),
                state = p("containerd/state"),
                sock = p("containerd.sock"),
                ttrpc = p("containerd.ttrpc.sock"),
                opt = p("containerd/opt"),
                runc = p("bin/runc"),
                runc_root = p("containerd/runc"),
                cni_bin = p("cni-bin"),
                cni_conf = p("cni-conf"),
                certs = p("certs.d"),
            ),
        )?;

        // The kubelet: its own identity; loopback only, webhook authn/authz as kubeadm sets.
        let kubeconfig = n.join("kubelet.kubeconfig");
        write(
            &kubeconfig,
            &crate::pki::kubeconfig(
                server,
                &pki.ca_cert,
                &pki.kubelet.0,
                &pki.kubelet.1,
                "default",
            ),
        )?;
        let kubelet_port = free_port()?;
        write(
            &n.join("kubelet.yaml"),
            &format!(
                r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: {kubelet_port}
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: "{ca}"}}
authorization: {{mode: Webhook}}
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup_name}
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://{sock}
podLogsDir: "{pod_logs}"
clusterDomain: cluster.local
clusterDNS: [10.96.0.10]
resolvConf: /etc/resolv.conf
serializeImagePulls: false
protectKernelDefaults: false
evictionHard: {{memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#,
                ca = pki.ca_cert.display(),
                sock = p("containerd.sock"),
                pod_logs = p("pod-logs"),
            ),
        )?;
        let sysctls: String = KUBELET_SYSCTLS
            .iter()
            .map(|(k, v)| format!("{k} {v}\n"))
            .collect();
        write(&n.join("sysctls"), &sysctls)?;
        // The shims' socket dir (a tmpfs of the node's mount namespace over it).
        std::fs::create_dir_all("/run/containerd").map_err(|e| setup("/run/containerd", e))?;

        // The node's identity may do what a kubelet does (kubeadm binds the same role).
        crate::kubectl_stdin(
            admin_kubeconfig,
            &["apply", "--server-side", "-f", "-"],
            r#"{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "realcluster:nodes"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}"#,
        )?;

        let spec = Spec {
            name: "real-node".into(),
            program: which("unshare").unwrap_or_else(|| "unshare".into()),
            args: [
                "--pid",
                "--fork",
                "--kill-child",
                "--mount",
                "--propagation",
                "private",
                "--mount-proc",
                "--",
                "bash",
                "-c",
                NODE_INIT,
                "real-node",
            ]
            .iter()
            .map(Into::into)
            .chain([n.clone().into_os_string(), logs.to_owned().into_os_string()])
            .chain(
                [
                    format!("--config={}", p("kubelet.yaml")),
                    format!("--kubeconfig={}", kubeconfig.display()),
                    format!("--root-dir={}", p("kubelet")),
                    format!("--cert-dir={}", p("kubelet/pki")),
                    format!("--hostname-override={REAL_NODE_NAME}"),
                    "--v=2".into(),
                ]
                .into_iter()
                .map(Into::into),
            )
            .collect(),
            env: vec![],
        };
        let mut proc = Proc::start(&spec, logs)?;
        let kubelet_log = logs.join("kubelet.log");
        let started = proc.wait_until(Duration::from_secs(90), |_| {
            std::fs::read_to_string(&kubelet_log).is_ok_and(|l| {
                l.contains("Successfully registered node")
                    || l.contains("Node was previously registered")
            })
        });
        let node = RealNode {
            proc,
            node_dir: n,
            cgroup_name,
            bridge,
            busybox,
        };
        if let Err(e) = started {
            let tail = |f: &str| {
                let t = std::fs::read_to_string(logs.join(f)).unwrap_or_default();
                let lines: Vec<&str> = t.lines().collect();
                lines[lines.len().saturating_sub(15)..].join("\n")
            };
            return Err(Error::Setup(format!(
                "real node did not register: {e}\ncontainerd.log tail:\n{}\nkubelet.log tail:\n{}",
                tail("containerd.log"),
                tail("kubelet.log")
            )));
        }
        Ok(node)
    }

    /// The BusyBox image containerd pulls (`<registry>/realnode/busybox:host`): the host's
    /// `busybox` with the libraries it links, `/bin/sh`, `sleep`, ... as links to it.
    pub fn busybox_image(&self) -> &str {
        &self.busybox
    }

    /// The cgroup root of this node's pods (`/<name>` in each v1 hierarchy).
    pub fn cgroup_name(&self) -> &str {
        &self.cgroup_name
    }

    /// The CNI bridge's link name.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// PID (host view) of the namespaces' `unshare`, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }

    /// The node's directory (`<cluster dir>/node`).
    pub fn dir(&self) -> &Path {
        &self.node_dir
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.proc.kill();
        remove_cgroups_and_bridge(&self.cgroup_name, &self.bridge);
    }
}

/// The host's BusyBox and the shared libraries `ldd` names for it, at their paths, with
/// `/bin/sh`, `/bin/sleep`, ... linking to `/bin/busybox`.
fn busybox_rootfs(root: &Path) -> Result<(), Error> {
    let bb = which("busybox").ok_or_else(|| setup("busybox", "not on PATH"))?;
    let copy = |from: &Path, to: &Path| -> Result<(), Error> {
        if let Some(d) = to.parent() {
            std::fs::create_dir_all(d).map_err(|e| setup("rootfs", e))?;
        }
        std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| setup(&format!("copy {}", from.display()), e))
    };
    copy(&bb, &root.join("bin/busybox"))?;
    let ldd = Command::new("ldd")
        .arg(&bb)
        .output()
        .map_err(|e| setup("ldd", e))?;
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` or `/lib64/ld-linux-x86-64.so.2 (0x...)`.
        let path = line
            .split("=>")
            .last()
            .and_then(|r| r.split_whitespace().next())
            .filter(|p| p.starts_with('/'));
        if let Some(path) = path {
            let src = std::fs::canonicalize(path).map_err(|e| setup(path, e))?;
            copy(&src, &root.join(path.trim_start_matches('/')))?;
        }
    }
    for applet in ["sh", "sleep", "cat", "echo", "ls", "true", "false"] {
        symlink(Path::new("busybox"), &root.join("bin").join(applet))?;
    }
    std::fs::create_dir_all(root.join("tmp")).map_err(|e| setup("rootfs tmp", e))?;
    Ok(())
}

/// Waits until no process is left in the cgroups under `/<name>` of every cgroup hierarchy, v1
/// and v2 (the namespace's processes die with its PID 1), then removes them deepest first,
/// and deletes the bridge `bridge`.
fn remove_cgroups_and_bridge(name: &str, bridge: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    // Never a hierarchy's root itself.
    // The v1 hierarchies made at start, and the unified (v2) one of this hybrid layout, where
    // the kubelet (libcontainer) makes the same tree.
    let hierarchies = if name.is_empty() || name.contains('/') || name.starts_with('.') {
        Vec::new()
    } else {
        cgroup_mounts(&["cgroup", "cgroup2"])
    };
    for h in hierarchies {
        let root = h.join(name);
        if !root.is_dir() {
            continue;
        }
        loop {
            let mut dirs = Vec::new();
            collect_dirs(&root, &mut dirs);
            // Deepest first.
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            let mut left = false;
            for d in &dirs {
                if std::fs::remove_dir(d).is_err() && d.exists() {
                    left = true;
                }
            }
            if !left || Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    if !bridge.is_empty() {
        let _ = Command::new("ip")
            .args(["link", "del", bridge])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

fn collect_dirs(d: &Path, out: &mut Vec<PathBuf>) {
    out.push(d.to_owned());
    if let Ok(rd) = std::fs::read_dir(d) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&e.path(), out);
            }
        }
    }
}

/// After a crash: the cgroups and bridge a dead cluster's real node left (its processes and
/// mounts died with its namespaces), read from its directory. Called before the directory is
/// removed.
pub(crate) fn sweep(cluster_dir: &Path) {
    let n = cluster_dir.join("node");
    let read = |f: &str| {
        std::fs::read_to_string(n.join(f))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let (cgroup, bridge) = (read("cgroup"), read("bridge"));
    if !cgroup.is_empty() || !bridge.is_empty() {
        remove_cgroups_and_bridge(&cgroup, &bridge);
    }
}
