//! The OCI image of cluster-loop-controller: one statically linked binary (the musl target),
//! no shell, no package manager, run as a non-root user, pushed with the real `crane`
//! (github.com/google/go-containerregistry/cmd/crane).
//!
//! The image is built from nothing (`crane append --oci-empty-base`) with one layer holding
//! `/cluster-loop-controller` (mode 0755, owner 0:0, mtime `SOURCE_DATE_EPOCH` or 0, so the
//! layer is byte-identical for the same binary), then given its config with `crane mutate`:
//! entrypoint `/cluster-loop-controller`, user [`USER`], platform `linux/amd64` (or
//! `linux/arm64` for an aarch64 musl target) and the OCI labels
//! `org.opencontainers.image.{source,version,licenses}`.
//!
//! The binary must be static: an image without a C library runs only a binary that needs
//! none. [`interpreter`] reads its ELF program headers (a dynamically linked executable names
//! its loader in `PT_INTERP`), and the build is refused if it has one.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};

/// The controller's package and binary name.
pub const BINARY: &str = "cluster-loop-controller";

/// The default target: x86_64 Linux with musl, statically linked by Rust's default for that
/// target (`crt-static`).
pub const DEFAULT_TARGET: &str = "x86_64-unknown-linux-musl";

/// The user the image runs as (`uid:gid`): numeric, as there is no /etc/passwd to resolve a
/// name, and the `runAsUser: 65534` (nobody) of the Deployment in controller/deploy, so the
/// image and its manifests agree; Kubernetes `runAsNonRoot` accepts it (numeric, not 0).
pub const USER: &str = "65534:65534";

/// What to build and where to push it.
#[derive(Debug, Clone)]
pub struct ImageOptions {
    /// Workspace root.
    pub root: PathBuf,
    /// Image version label (`org.opencontainers.image.version`), v-prefixed semver.
    pub version: String,
    /// Cargo profile (`release` for a real image, `dev` for a fast test build).
    pub profile: String,
    /// Rust target triple, a `*-linux-musl` one.
    pub target: String,
    /// Where to push: `REGISTRY/REPOSITORY:TAG`.
    pub reference: String,
    /// The crane binary.
    pub crane: PathBuf,
    /// A directory for the layer tarball.
    pub work_dir: PathBuf,
    /// A binary built already (for `target`), instead of running cargo build.
    pub prebuilt: Option<PathBuf>,
}

/// What was pushed.
#[derive(Debug, Clone)]
pub struct ImageReport {
    /// `REGISTRY/REPOSITORY@sha256:...`: the pushed image by digest.
    pub digest_reference: String,
    /// The binary in the image.
    pub binary: PathBuf,
    /// Its size in bytes.
    pub size: u64,
}

/// The OCI platform of a musl target: `linux/amd64` or `linux/arm64`.
/// Errors: any other target (the image holds a static Linux binary only).
pub fn platform(target: &str) -> Result<&'static str, String> {
    match target {
        "x86_64-unknown-linux-musl" => Ok("linux/amd64"),
        "aarch64-unknown-linux-musl" => Ok("linux/arm64"),
        t => Err(format!(
            "target {t} cannot make a static image: use x86_64-unknown-linux-musl or aarch64-unknown-linux-musl (rustup target add ...; musl-tools for the C parts)"
        )),
    }
}

/// The program interpreter (dynamic loader) a 64-bit little-endian ELF executable names in
/// its `PT_INTERP` program header, or `None` for a statically linked one.
/// Errors: not such an ELF file.
pub fn interpreter(data: &[u8]) -> Result<Option<String>, String> {
    let header = elf::FileHeader64::<object::LittleEndian>::parse(data)
        .map_err(|e| format!("not a 64-bit little-endian ELF file: {e}"))?;
    let endian = header.endian().map_err(|e| format!("ELF header: {e}"))?;
    let headers = header
        .program_headers(endian, data)
        .map_err(|e| format!("ELF program headers: {e}"))?;
    for ph in headers {
        if ph.p_type(endian) == elf::PT_INTERP {
            let raw = ph
                .data(endian, data)
                .map_err(|_| "PT_INTERP points outside the file".to_string())?;
            let path = raw.split(|b| *b == 0).next().unwrap_or(raw);
            return Ok(Some(String::from_utf8_lossy(path).into_owned()));
        }
    }
    Ok(None)
}

/// Writes the image's one layer: `name` at the root, mode 0755, owner 0:0, mtime `mtime`.
/// Errors: reading `binary` or writing `out`.
pub fn write_layer(binary: &Path, name: &str, mtime: u64, out: &Path) -> Result<(), String> {
    let data = std::fs::read(binary).map_err(|e| format!("{}: {e}", binary.display()))?;
    let file = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut tar = tar::Builder::new(file);
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o755);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(mtime);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, name, &data[..])
        .and_then(|()| tar.finish())
        .map_err(|e| format!("{}: {e}", out.display()))
}

fn run(cmd: &mut Command) -> Result<String, String> {
    eprintln!("xtask: {cmd:?}");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} failed ({}): {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Builds the static binary (unless `prebuilt`), checks it has no interpreter, pushes the
/// image with crane and returns its digest reference.
///
/// Errors: a message naming the failed step (a target that is not musl, cargo build, a
/// dynamically linked binary, crane append/mutate/digest with crane's own message).
pub fn image(opts: &ImageOptions) -> Result<ImageReport, String> {
    let platform = platform(&opts.target)?;
    let binary = match &opts.prebuilt {
        Some(b) => b.clone(),
        None => {
            let (target_dir, _) = crate::dist::metadata(&opts.root)?;
            run(crate::dist::cargo().current_dir(&opts.root).args([
                "build",
                "--locked",
                "--profile",
                &opts.profile,
                "--target",
                &opts.target,
                "-p",
                BINARY,
                "--bin",
                BINARY,
            ]))?;
            target_dir
                .join(&opts.target)
                .join(crate::dist::profile_dir(&opts.profile))
                .join(BINARY)
        }
    };
    let data = std::fs::read(&binary).map_err(|e| format!("{}: {e}", binary.display()))?;
    if let Some(loader) = interpreter(&data)? {
        return Err(format!(
            "{} is dynamically linked (interpreter {loader}): an image with no C library cannot run it; build it for a musl target",
            binary.display()
        ));
    }
    std::fs::create_dir_all(&opts.work_dir)
        .map_err(|e| format!("{}: {e}", opts.work_dir.display()))?;
    let layer = opts.work_dir.join(format!("{BINARY}-layer.tar"));
    let mtime = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    write_layer(&binary, BINARY, mtime, &layer)?;
    run(Command::new(&opts.crane)
        .args(["append", "--oci-empty-base", "--platform", platform, "-f"])
        .arg(&layer)
        .args(["-t", &opts.reference]))?;
    let repository = opts
        .reference
        .rsplit_once(':')
        .filter(|(r, tag)| !tag.contains('/') && !r.is_empty())
        .map_or(opts.reference.as_str(), |(r, _)| r);
    run(Command::new(&opts.crane).args([
        "mutate",
        &opts.reference,
        "--entrypoint",
        &format!("/{BINARY}"),
        "--user",
        USER,
        "--set-platform",
        platform,
        "--label",
        "org.opencontainers.image.source=https://github.com/cluster-loop/cluster-loop",
        "--label",
        &format!("org.opencontainers.image.version={}", opts.version),
        "--label",
        "org.opencontainers.image.licenses=Apache-2.0",
        "-t",
        &opts.reference,
    ]))?;
    let digest = run(Command::new(&opts.crane).args(["digest", &opts.reference]))?;
    Ok(ImageReport {
        digest_reference: format!("{repository}@{digest}"),
        binary,
        size: data.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_machines_own_executable_names_its_loader() {
        // This test binary is built for the host (glibc, dynamically linked).
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let loader = interpreter(&me).unwrap();
        assert!(
            loader.as_deref().is_some_and(|l| l.contains("ld-linux")),
            "{loader:?}"
        );
        assert!(interpreter(b"#!/bin/sh\n").is_err());
    }

    #[test]
    fn only_musl_targets_make_an_image() {
        assert_eq!(platform("x86_64-unknown-linux-musl"), Ok("linux/amd64"));
        assert_eq!(platform("aarch64-unknown-linux-musl"), Ok("linux/arm64"));
        assert!(platform("x86_64-unknown-linux-gnu").is_err());
    }

    #[test]
    fn the_layer_is_one_executable_owned_by_root_and_reproducible() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("b");
        std::fs::write(&bin, b"\x7fELF not really").unwrap();
        let (a, b) = (dir.path().join("a.tar"), dir.path().join("b.tar"));
        write_layer(&bin, BINARY, 0, &a).unwrap();
        write_layer(&bin, BINARY, 0, &b).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let mut ar = tar::Archive::new(std::fs::File::open(&a).unwrap());
        let entries: Vec<_> = ar
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().display().to_string(),
                    h.mode().unwrap(),
                    h.uid().unwrap(),
                    h.mtime().unwrap(),
                )
            })
            .collect();
        assert_eq!(entries, vec![(BINARY.to_string(), 0o755, 0, 0)]);
    }
}
