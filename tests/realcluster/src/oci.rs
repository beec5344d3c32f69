//! A real OCI registry for image-reflector-controller to scan: go-containerregistry's
//! `cmd/registry` (an in-memory registry of the OCI distribution API, the one Flux's own
//! image-reflector-controller tests serve through `pkg/registry`), and `crane` of the same
//! module to push images to it. Both are built by build.sh as Go tools of the `image/` module,
//! at the go-containerregistry version image-reflector-controller [`crate::bins::IRC_CURRENT`]
//! uses ([`crate::bins::GGCR_VERSION`]).
//!
//! The registry serves plain HTTP on a loopback port the kernel picks (`-port 0`; the port is
//! read from its log line `serving on port N`, so no port is guessed free). go-containerregistry
//! speaks plain HTTP to a loopback registry (`pkg/name` `Registry.Scheme`: `localhost:`,
//! `127.0.0.0/8`), and an ImageRepository may also say `spec.insecure: true`.
//!
//! ```no_run
//! let reg = realcluster::oci::OciRegistry::start(std::path::Path::new("/tmp/logs")).unwrap();
//! reg.push("app", &["1.0.0", "1.1.0"]).unwrap();
//! let image = format!("{}/app", reg.host()); // for an ImageRepository's spec.image
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use crate::proc::{Proc, Spec};
use crate::{Error, bins};

/// A running registry; dropping it stops the process (its content is in memory only).
pub struct OciRegistry {
    proc: Mutex<Proc>,
    host: String,
    crane: PathBuf,
    work: tempfile::TempDir,
}

impl OciRegistry {
    /// Starts `registry-<GGCR_VERSION> -port 0` with its log in `log_dir/oci-registry-<n>.log`
    /// and waits (up to 30 s) until it says which port it serves. Errors: [`Error::Setup`]
    /// when a binary is missing or the port line never comes; [`Error::ProcessExited`] with
    /// its log tail when it exits.
    pub fn start(log_dir: &Path) -> Result<OciRegistry, Error> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let program = bins::bin(&format!("registry-{}", bins::GGCR_VERSION))?;
        let crane = bins::bin(&format!("crane-{}", bins::GGCR_VERSION))?;
        let spec = Spec {
            name: format!("oci-registry-{}", N.fetch_add(1, Ordering::Relaxed)),
            program,
            args: vec!["-port".into(), "0".into()],
            env: vec![],
        };
        let mut proc = Proc::start(&spec, log_dir)?;
        let mut port = None;
        proc.wait_until(Duration::from_secs(30), |p| {
            port = serving_port(&std::fs::read_to_string(p.log_path()).unwrap_or_default());
            port.is_some()
        })?;
        let port = port.expect("wait_until returned Ok only with a port");
        // In the cluster's directory (the parent of its log dir), not $TMPDIR: a cluster held
        // in a static is never dropped, and its directory, unlike a `realcluster-oci-*` of
        // its own, is removed by the next start once the test process is gone.
        let work = tempfile::Builder::new()
            .prefix("oci-")
            .tempdir_in(log_dir.parent().unwrap_or(log_dir))
            .map_err(|e| Error::Setup(format!("temp dir: {e}")))?;
        Ok(OciRegistry {
            proc: Mutex::new(proc),
            // cmd/registry listens on "localhost:<port>"; named so, go-containerregistry and
            // the controllers resolve it as the registry did.
            host: format!("localhost:{port}"),
            crane,
            work,
        })
    }

    /// `localhost:<port>`: the registry part of an image reference.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Pushes one image per tag to `<host>/<repository>:<tag>` with `crane append` (an empty
    /// base and one layer holding a file `tag` with the tag's name, so every tag has its own
    /// digest). Errors: [`Error::Setup`] with crane's output when a push fails.
    pub fn push(&self, repository: &str, tags: &[&str]) -> Result<(), Error> {
        for tag in tags {
            let dir = self
                .work
                .path()
                .join(format!("{repository}-{tag}").replace('/', "_"));
            std::fs::create_dir_all(&dir).map_err(|e| Error::Setup(e.to_string()))?;
            std::fs::write(dir.join("tag"), tag).map_err(|e| Error::Setup(e.to_string()))?;
            let layer = dir.with_extension("tar");
            run(Command::new("tar")
                .arg("-cf")
                .arg(&layer)
                .arg("-C")
                .arg(&dir)
                .arg("tag"))?;
            self.append_layer(&layer, &format!("{}/{repository}:{tag}", self.host))?;
        }
        Ok(())
    }

    /// Pushes `rootfs` (a directory) as a one-layer linux/amd64 image
    /// `<host>/<repository>:<tag>` with `entrypoint` and the usual `PATH` (`crane append
    /// --oci-empty-base`, then `crane mutate --entrypoint --env --set-platform`), for containerd to pull
    /// ([`crate::realnode`]). Returns the reference. Errors: tar's or crane's.
    pub fn push_rootfs(
        &self,
        repository: &str,
        tag: &str,
        rootfs: &Path,
        entrypoint: &[&str],
    ) -> Result<String, Error> {
        let reference = format!("{}/{repository}:{tag}", self.host);
        let layer = self
            .work
            .path()
            .join(format!("{repository}-{tag}.rootfs.tar").replace('/', "_"));
        run(Command::new("tar")
            .arg("--numeric-owner")
            .arg("--owner=0")
            .arg("--group=0")
            .arg("-cf")
            .arg(&layer)
            .arg("-C")
            .arg(rootfs)
            .arg("."))?;
        self.append_layer(&layer, &reference)?;
        run(Command::new(&self.crane)
            .arg("mutate")
            .arg(&reference)
            .arg("--entrypoint")
            .arg(entrypoint.join(","))
            .arg("--env")
            .arg("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            .arg("--set-platform")
            .arg("linux/amd64")
            .arg("-t")
            .arg(&reference))?;
        Ok(reference)
    }

    /// Pushes `layer` (a tarball) as the one layer of a new image `reference` on an empty OCI
    /// base (`crane append --oci-empty-base`). Errors: [`Error::Setup`] with crane's output.
    fn append_layer(&self, layer: &Path, reference: &str) -> Result<(), Error> {
        run(Command::new(&self.crane)
            .arg("append")
            .arg("--oci-empty-base")
            .arg("-f")
            .arg(layer)
            .arg("-t")
            .arg(reference))
        .map(|_| ())
    }

    /// The tags the registry lists for `repository` (`crane ls`, the registry's
    /// `/v2/<repository>/tags/list`). Errors: [`Error::Setup`] with crane's output.
    pub fn tags(&self, repository: &str) -> Result<Vec<String>, Error> {
        let out = run(Command::new(&self.crane)
            .arg("ls")
            .arg(format!("{}/{repository}", self.host)))?;
        Ok(out.lines().map(str::to_owned).collect())
    }

    /// The registry's log so far (one line per request it served).
    pub fn log(&self) -> String {
        let p = self.proc.lock().unwrap();
        std::fs::read_to_string(p.log_path()).unwrap_or_default()
    }
}

/// The port of cmd/registry's `serving on port N` log line (Go `log.Printf`, after its date
/// and time), if it has been written.
fn serving_port(log: &str) -> Option<u16> {
    log.lines()
        .find_map(|l| l.split("serving on port ").nth(1))
        .and_then(|p| p.trim().parse().ok())
}

fn run(cmd: &mut Command) -> Result<String, Error> {
    let out = cmd
        .output()
        .map_err(|e| Error::Setup(format!("{cmd:?}: {e}")))?;
    if !out.status.success() {
        return Err(Error::Setup(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn serving_port_is_read_from_the_log_line() {
        assert_eq!(
            super::serving_port("2026/12/01 21:00:00 serving on port 40123\n"),
            Some(40123)
        );
        assert_eq!(super::serving_port("2026/12/01 21:00:00 starting\n"), None);
        assert_eq!(super::serving_port(""), None);
    }
}
