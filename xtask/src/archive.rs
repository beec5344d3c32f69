//! Reproducible release archives (`.tar.gz`, `.zip`) and a krew-compatible extractor.
//!
//! Crates: `tar` + `flate2` + `zip` are the maintained Rust implementations of these formats
//! (tar is used by cargo itself, flate2 by cargo/rustup, zip by most Rust release tooling).
//! Shelling out to GNU tar/zip would tie reproducibility to the host's tool versions and flags
//! (GNU tar `--sort=name --mtime --owner` is not on macOS runners), while these crates let us set
//! every header field ourselves on every OS of the release matrix.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};

/// Fixed modification time of every archive entry when `SOURCE_DATE_EPOCH` is unset:
/// 1980-01-01T00:00:00Z, the earliest time a zip (MS-DOS) timestamp can hold.
pub const DEFAULT_EPOCH: u64 = 315_532_800;

/// One file to put in an archive. Entries are written in the given order, flat or with `/`
/// separated relative names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative path inside the archive, `/`-separated, e.g. `kubectl-unstick`.
    pub name: String,
    /// Unix permission bits, e.g. `0o755` for the binary, `0o644` for LICENSE.
    pub mode: u32,
    /// File content.
    pub data: Vec<u8>,
}

/// Errors of packing and unpacking archives.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// An I/O error on the named file.
    #[error("{path}: {source}")]
    Io {
        /// The file being read or written.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A zip format error on the named file.
    #[error("{path}: zip: {source}")]
    Zip {
        /// The archive.
        path: PathBuf,
        /// The underlying error.
        source: zip::result::ZipError,
    },
    /// The archive is neither gzip nor zip (krew detects the type by content).
    #[error("{0}: not a gzip or zip archive (krew detects the type from the first bytes)")]
    UnknownFormat(PathBuf),
    /// An entry krew refuses to unpack (krew internal/download/downloader.go `suspiciousPath`)
    /// or cannot handle (only regular files and directories).
    #[error("{path}: refusing to unpack entry {entry:?}: {why}")]
    BadEntry {
        /// The archive.
        path: PathBuf,
        /// The entry name.
        entry: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The archive timestamp: `SOURCE_DATE_EPOCH` (reproducible-builds.org convention) if set and
/// numeric, else [`DEFAULT_EPOCH`]. Seconds since the Unix epoch; clamped to >= 1980 for zip.
pub fn source_date_epoch() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|v| v.max(DEFAULT_EPOCH))
        .unwrap_or(DEFAULT_EPOCH)
}

/// Writes a gzip-compressed ustar archive of `entries`, byte-for-byte reproducible: entry order
/// as given, mtime `mtime`, uid/gid 0 with empty user/group names, mode from the entry, gzip
/// header mtime 0 and no file name, compression level 9.
///
/// Only regular-file entries are written: krew's tar extractor accepts regular files and
/// directories only (krew internal/download/downloader.go `extractTARGZ`).
pub fn write_tar_gz(path: &Path, entries: &[Entry], mtime: u64) -> Result<(), ArchiveError> {
    write_tar_gz_level(path, entries, mtime, Compression::best())
}

/// [`write_tar_gz`] at another gzip level: as reproducible (the bytes depend on the level, which
/// is fixed per build kind), much faster at [`Compression::fast`] for the ~190 MB debug
/// binaries the tests pack.
pub fn write_tar_gz_level(
    path: &Path,
    entries: &[Entry],
    mtime: u64,
    level: Compression,
) -> Result<(), ArchiveError> {
    let file = fs::File::create(path).map_err(io_err(path))?;
    // GzBuilder defaults: mtime 0, no name/comment, OS byte 255 ("unknown"): all fixed.
    let gz = flate2::GzBuilder::new().write(file, level);
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for e in entries {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(e.data.len() as u64);
        h.set_mode(e.mode);
        h.set_mtime(mtime);
        h.set_uid(0);
        h.set_gid(0);
        h.set_username("").map_err(io_err(path))?;
        h.set_groupname("").map_err(io_err(path))?;
        tar.append_data(&mut h, &e.name, e.data.as_slice())
            .map_err(io_err(path))?;
    }
    let gz = tar.into_inner().map_err(io_err(path))?;
    let mut file = gz.finish().map_err(io_err(path))?;
    file.flush().map_err(io_err(path))
}

/// Writes a deflate-compressed zip archive of `entries`, reproducible: entry order as given,
/// DOS timestamp from `mtime` (UTC), Unix mode from the entry, no extra fields.
pub fn write_zip(path: &Path, entries: &[Entry], mtime: u64) -> Result<(), ArchiveError> {
    write_zip_level(path, entries, mtime, 9)
}

/// [`write_zip`] at another deflate level (0-9).
pub fn write_zip_level(
    path: &Path,
    entries: &[Entry],
    mtime: u64,
    level: i64,
) -> Result<(), ArchiveError> {
    let zerr = |source| ArchiveError::Zip {
        path: path.to_owned(),
        source,
    };
    let file = fs::File::create(path).map_err(io_err(path))?;
    let mut zip = zip::ZipWriter::new(file);
    let (y, mo, d, h, mi, s) = civil_from_unix(mtime);
    let when = zip::DateTime::from_date_and_time(y, mo, d, h, mi, s).map_err(|_| {
        zerr(zip::result::ZipError::InvalidArchive(
            "timestamp out of range".into(),
        ))
    })?;
    for e in entries {
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .compression_level(Some(level))
            .last_modified_time(when)
            .unix_permissions(e.mode);
        zip.start_file(e.name.as_str(), opts).map_err(zerr)?;
        zip.write_all(&e.data).map_err(io_err(path))?;
    }
    zip.finish().map_err(zerr)?;
    Ok(())
}

/// Converts Unix seconds to a UTC civil date and time `(year, month, day, hour, min, sec)`
/// (Howard Hinnant's days-from-civil inverse; proleptic Gregorian calendar).
fn civil_from_unix(secs: u64) -> (u16, u8, u8, u8, u8, u8) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y as u16,
        m as u8,
        d as u8,
        (rem / 3600) as u8,
        (rem % 3600 / 60) as u8,
        (rem % 60) as u8,
    )
}

/// Extracts `archive` into `dst` the way krew does (internal/download/downloader.go): the
/// type is detected from the content (gzip magic `1f 8b` or zip `PK\x03\x04`), entries containing
/// `..` or starting with `/` or `\` are refused, only regular files and directories are
/// accepted, modes come from the archive.
///
/// Returns the relative paths of the regular files written, in archive order.
pub fn extract_like_krew(archive: &Path, dst: &Path) -> Result<Vec<String>, ArchiveError> {
    let bytes = fs::read(archive).map_err(io_err(archive))?;
    let bad = |entry: &str, why| ArchiveError::BadEntry {
        path: archive.to_owned(),
        entry: entry.to_owned(),
        why,
    };
    let suspicious = |name: &str| -> Result<(), ArchiveError> {
        if name.contains("..") {
            return Err(bad(name, "path contains \"..\""));
        }
        if name.starts_with('/') || name.starts_with('\\') {
            return Err(bad(name, "absolute path"));
        }
        Ok(())
    };
    let mut files = Vec::new();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut tar = tar::Archive::new(GzDecoder::new(bytes.as_slice()));
        for entry in tar.entries().map_err(io_err(archive))? {
            let mut entry = entry.map_err(io_err(archive))?;
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            if name == "pax_global_header" {
                continue;
            }
            suspicious(&name)?;
            let out = safe_join(dst, &name).ok_or_else(|| bad(&name, "not a relative path"))?;
            let mode = entry.header().mode().map_err(io_err(archive))?;
            match entry.header().entry_type() {
                tar::EntryType::Directory => {
                    fs::create_dir_all(&out).map_err(io_err(&out))?;
                }
                tar::EntryType::Regular => {
                    if let Some(parent) = out.parent() {
                        fs::create_dir_all(parent).map_err(io_err(parent))?;
                    }
                    let mut data = Vec::new();
                    entry.read_to_end(&mut data).map_err(io_err(archive))?;
                    write_file(&out, &data, mode)?;
                    files.push(name);
                }
                _ => return Err(bad(&name, "not a regular file or directory")),
            }
        }
    } else if bytes.starts_with(b"PK\x03\x04") {
        let zerr = |source| ArchiveError::Zip {
            path: archive.to_owned(),
            source,
        };
        let mut zip = zip::ZipArchive::new(io::Cursor::new(bytes.as_slice())).map_err(zerr)?;
        for i in 0..zip.len() {
            let mut f = zip.by_index(i).map_err(zerr)?;
            let name = f.name().to_owned();
            suspicious(&name)?;
            let out = safe_join(dst, &name).ok_or_else(|| bad(&name, "not a relative path"))?;
            if f.is_dir() {
                fs::create_dir_all(&out).map_err(io_err(&out))?;
                continue;
            }
            if let Some(parent) = out.parent() {
                fs::create_dir_all(parent).map_err(io_err(parent))?;
            }
            let mode = f.unix_mode().unwrap_or(0o644);
            let mut data = Vec::new();
            f.read_to_end(&mut data).map_err(io_err(archive))?;
            write_file(&out, &data, mode)?;
            files.push(name);
        }
    } else {
        return Err(ArchiveError::UnknownFormat(archive.to_owned()));
    }
    Ok(files)
}

/// Lists the regular files of an archive (tar.gz or zip), in archive order, without extracting.
pub fn list(archive: &Path) -> Result<Vec<String>, ArchiveError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = std::env::temp_dir().join(format!(
        "xtask-list-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let res = extract_like_krew(archive, &tmp);
    let _ = fs::remove_dir_all(&tmp);
    res
}

fn safe_join(dst: &Path, name: &str) -> Option<PathBuf> {
    let rel = Path::new(name);
    if rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        Some(dst.join(rel))
    } else {
        None
    }
}

fn write_file(out: &Path, data: &[u8], mode: u32) -> Result<(), ArchiveError> {
    fs::write(out, data).map_err(io_err(out))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(out, fs::Permissions::from_mode(mode & 0o7777)).map_err(io_err(out))?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    Ok(())
}

/// Lowercase hex sha256 of a file (what krew's `sha256` and flux's `checksum: sha256:` name).
///
/// Errors: the file cannot be read (the message names it).
pub fn sha256_file(path: &Path) -> Result<String, String> {
    let data = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Sha256::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_unix(DEFAULT_EPOCH), (1980, 1, 1, 0, 0, 0));
        assert_eq!(civil_from_unix(1_700_000_000), (2023, 11, 14, 22, 13, 20));
        assert_eq!(civil_from_unix(951_782_400), (2000, 2, 29, 0, 0, 0));
    }
}
