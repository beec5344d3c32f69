//! Supervised child processes of the test control plane.
//!
//! Every process is started through util-linux `setpriv --pdeathsig KILL` from one long-lived
//! spawner thread, so the kernel kills it when the test process ends for any reason (normal
//! exit, panic, Ctrl-C, SIGKILL): `PR_SET_PDEATHSIG` fires when the thread that forked the child
//! exits, and the spawner thread lives as long as the process. Each child also gets its own
//! process group, and [`Proc`]'s `Drop` kills it. Output goes to `<log dir>/<name>.log`.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::Error;

/// What to start: program, arguments, extra environment.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Short name (log file `<name>.log`, error messages).
    pub name: String,
    /// Executable path.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<OsString>,
    /// Environment added to the test process's own.
    pub env: Vec<(OsString, OsString)>,
}

type Request = (Spec, PathBuf, mpsc::Sender<std::io::Result<Child>>);

fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("realcluster-spawner".into())
            .spawn(move || {
                for (spec, log, reply) in rx {
                    let _ = reply.send(spawn_here(&spec, &log));
                }
                // The sender lives in a static: this loop only ends with the process, and
                // with it every child (PDEATHSIG).
                loop {
                    std::thread::park();
                }
            })
            .expect("spawn realcluster-spawner thread");
        Mutex::new(tx)
    })
}

fn spawn_here(spec: &Spec, log: &Path) -> std::io::Result<Child> {
    let out = File::create(log)?;
    let err = out.try_clone()?;
    let mut cmd = Command::new("setpriv");
    cmd.arg("--pdeathsig")
        .arg("KILL")
        .arg("--")
        .arg(&spec.program)
        .args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // Every Go process here (etcd, kube-apiserver, kube-controller-manager, the controllers)
    // runs with GOGC=200 (default 100: a collection each time the heap doubles): fewer
    // collections, more memory. Up to twenty clusters run at once in the real-cluster tests,
    // which are CPU-bound on this 2-core machine; memory is not short (a cluster is about
    // 0.7 GB). A GOGC in the environment or the spec wins. (GOMAXPROCS=1 was tried too: less CPU
    // for unstick's tests alone, 324 -> 245 busy CPU-s, but the whole real-cluster binary ran
    // longer with it, over 12 minutes against 10, so it is not set.)
    if std::env::var_os("GOGC").is_none() && !spec.env.iter().any(|(k, _)| k == "GOGC") {
        cmd.env("GOGC", "200");
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.spawn()
}

/// A running child process; killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    /// Starts `spec`, writing its output to `log_dir/<name>.log`.
    /// Errors: [`Error::Setup`] when setpriv or the program cannot be started.
    pub fn start(spec: &Spec, log_dir: &Path) -> Result<Proc, Error> {
        let log = log_dir.join(format!("{}.log", spec.name));
        let (tx, rx) = mpsc::channel();
        spawner()
            .lock()
            .map_err(|_| Error::Setup("spawner lock poisoned".into()))?
            .send((spec.clone(), log.clone(), tx))
            .map_err(|_| Error::Setup("spawner thread is gone".into()))?;
        let child = rx
            .recv()
            .map_err(|_| Error::Setup("spawner thread is gone".into()))?
            .map_err(|e| {
                Error::Setup(format!(
                    "start {} ({}): {e} (setpriv is in util-linux: scripts/setup-machine installs it)",
                    spec.name,
                    spec.program.display()
                ))
            })?;
        Ok(Proc {
            name: spec.name.clone(),
            child: Some(child),
            log,
        })
    }

    /// Name given at start.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of the log (for error messages).
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Kills (SIGKILL) and reaps the process; idempotent.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Polls `ready` every 100 ms until it is true, the process exits (error with the log
    /// tail) or `timeout` passes (error).
    pub fn wait_until(
        &mut self,
        timeout: Duration,
        mut ready: impl FnMut(&Proc) -> bool,
    ) -> Result<(), Error> {
        let until = Instant::now() + timeout;
        loop {
            if ready(self) {
                return Ok(());
            }
            if let Some(st) = self.exited() {
                return Err(Error::ProcessExited {
                    name: self.name.clone(),
                    status: st.to_string(),
                    log_tail: self.log_tail(30),
                });
            }
            if Instant::now() >= until {
                return Err(Error::Setup(format!(
                    "{} not ready after {timeout:?}; log tail:\n{}",
                    self.name,
                    self.log_tail(30)
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback TCP port that was free a moment ago. Callers must retry on "address already in
/// use" (see [`crate::Cluster::start`]): another process may take it first.
pub fn free_port() -> Result<u16, Error> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::Setup(format!("no free loopback port: {e}")))
}

/// True when something accepts TCP connections on `127.0.0.1:port`.
pub fn listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}
