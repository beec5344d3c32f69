//! A private network namespace for one host process, as a pod has its own: `lo` only, and the
//! cluster's API server reachable there at the same `https://127.0.0.1:PORT` the kubeconfig
//! names, through a forwarder of ours.
//!
//! Why: Envoy Gateway v1.9.1 binds fixed ports (health 8081 and webhook 9443 are constants in
//! internal/provider/kubernetes/kubernetes.go, xDS 18000 in internal/xds/bootstrap, admin
//! 19000, metrics 19001). In the host's network namespace two clusters running it at once
//! (a test group's and the demo's, or two test processes) would clash; in a namespace of
//! their own each binds its ports there, as each controller pod does in a real cluster. Nothing
//! outside reaches those ports, and nothing needs to: the Envoy data plane that would dial the
//! xDS port cannot run here ([`crate::gateway`]).
//!
//! How: a holder process `unshare --net -- cat` makes the namespace and keeps it (it exits when
//! its stdin closes, i.e. when we drop it or die); `nsenter --net=... ip link set lo up`; a
//! short-lived thread of ours enters the namespace (setns(2) through rustix) only to bind the
//! forwarder's listening socket on `127.0.0.1:PORT` there (a socket stays in the namespace it
//! was made in), then ends; the forwarder's tasks run on the cluster's runtime in the host's
//! namespace and copy each connection to the API server's own `127.0.0.1:PORT`. TLS is end to
//! end (the forwarder sees bytes only), so the serving certificate is verified for the same
//! address as on the host. Processes join the namespace with `nsenter --net=PATH`
//! ([`PrivateNet::nsenter_args`]).
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};

use crate::Error;

/// The namespace, its holder and the API forwarder. Dropping it stops the forwarder and the
/// holder; the namespace goes with its last process.
pub struct PrivateNet {
    holder: Child,
    pid: u32,
    forward: tokio::task::JoinHandle<()>,
}

impl PrivateNet {
    /// Makes the namespace and starts the forwarder from its `127.0.0.1:api_port` to the host's
    /// `127.0.0.1:api_port`, on `rt`. Errors: [`Error::Setup`] naming the step (no `unshare`,
    /// not root, a namespace that is not private, the bind).
    pub fn start(rt: &tokio::runtime::Runtime, api_port: u16) -> Result<PrivateNet, Error> {
        let setup = |what: &str, e: &dyn std::fmt::Display| Error::Setup(format!("{what}: {e}"));
        let holder = Command::new("unshare")
            .args(["--net", "--", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| setup("unshare --net", &e))?;
        let pid = holder.id();
        let mut net = PrivateNet {
            holder,
            pid,
            forward: rt.spawn(async {}),
        };
        // The namespace exists once `cat` echoes a byte (unshare made it before exec).
        let mut b = [0u8; 1];
        let echoed = net
            .holder
            .stdin
            .as_mut()
            .map(|i| i.write_all(b"x").and_then(|()| i.flush()))
            .transpose()
            .and_then(|_| {
                net.holder
                    .stdout
                    .as_mut()
                    .map(|o| o.read_exact(&mut b))
                    .transpose()
            });
        if let Err(e) = echoed {
            return Err(setup("unshare --net did not start (are we root?)", &e));
        }
        let mine = std::fs::read_link("/proc/self/ns/net").ok();
        let theirs = std::fs::read_link(net.path()).ok();
        if theirs.is_none() || mine == theirs {
            return Err(Error::Setup(format!(
                "unshare --net: the network namespace of pid {pid} is not private"
            )));
        }
        let up = Command::new("nsenter")
            .arg(format!("--net={}", net.path()))
            .args(["ip", "link", "set", "lo", "up"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| setup("nsenter ip link set lo up", &e))?;
        if !up.status.success() {
            return Err(Error::Setup(format!(
                "nsenter --net={} ip link set lo up: {}",
                net.path(),
                String::from_utf8_lossy(&up.stderr).trim()
            )));
        }
        let path = net.path();
        let listener = std::thread::spawn(move || -> Result<std::net::TcpListener, String> {
            let ns = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .map_err(|e| format!("setns {path}: {e}"))?;
            let l = std::net::TcpListener::bind(("127.0.0.1", api_port))
                .map_err(|e| format!("bind 127.0.0.1:{api_port} in {path}: {e}"))?;
            l.set_nonblocking(true)
                .map_err(|e| format!("listener: {e}"))?;
            Ok(l)
            // The thread ends here, with it its membership of the namespace.
        })
        .join()
        .map_err(|_| Error::Setup("the namespace thread panicked".into()))?
        .map_err(Error::Setup)?;
        let listener = {
            let _enter = rt.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| setup("listener", &e))?
        };
        net.forward = rt.spawn(forward(listener, api_port));
        Ok(net)
    }

    /// `/proc/PID/ns/net` of the holder (stable while the holder lives: it is never waited on
    /// before drop, so its pid is not reused).
    pub fn path(&self) -> String {
        format!("/proc/{}/ns/net", self.pid)
    }

    /// `nsenter --net=PATH --`: prefix a command with these to run it in the namespace.
    pub fn nsenter_args(&self) -> Vec<String> {
        vec![format!("--net={}", self.path()), "--".into()]
    }
}

/// Accepts on `listener` (in the namespace) and copies each connection to the host's
/// `127.0.0.1:port`; a connection that cannot be made is closed, as a refused one would be.
async fn forward(listener: tokio::net::TcpListener, port: u16) {
    loop {
        let Ok((mut inside, _)) = listener.accept().await else {
            // e.g. out of file descriptors: not a busy loop.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        tokio::spawn(async move {
            if let Ok(mut outside) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
            }
        });
    }
}

impl Drop for PrivateNet {
    fn drop(&mut self) {
        self.forward.abort();
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}
