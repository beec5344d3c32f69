//! Release platforms: Rust target triples and the krew `os`/`arch` labels they map to.

use std::fmt;

/// One release platform: a Rust target triple and krew's `os`/`arch` selector labels.
///
/// krew labels use Go's `GOOS`/`GOARCH` names (krew cmd/validate-krew-manifest `allPlatforms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Platform {
    /// krew/Go operating system label: `linux`, `darwin` or `windows`.
    pub os: &'static str,
    /// krew/Go architecture label: `amd64` or `arm64`.
    pub arch: &'static str,
    /// The Rust target triple the release workflow builds for this platform.
    pub triple: &'static str,
}

/// The five platforms every release ships, in manifest order.
pub const RELEASE_PLATFORMS: [Platform; 5] = [
    Platform {
        os: "linux",
        arch: "amd64",
        triple: "x86_64-unknown-linux-gnu",
    },
    Platform {
        os: "linux",
        arch: "arm64",
        triple: "aarch64-unknown-linux-gnu",
    },
    Platform {
        os: "darwin",
        arch: "amd64",
        triple: "x86_64-apple-darwin",
    },
    Platform {
        os: "darwin",
        arch: "arm64",
        triple: "aarch64-apple-darwin",
    },
    Platform {
        os: "windows",
        arch: "amd64",
        triple: "x86_64-pc-windows-msvc",
    },
];

/// Every `<os, arch>` pair krew supports (krew cmd/validate-krew-manifest/main.go `allPlatforms`).
pub const KREW_SUPPORTED: [(&str, &str); 11] = [
    ("windows", "386"),
    ("windows", "amd64"),
    ("windows", "arm64"),
    ("linux", "386"),
    ("linux", "amd64"),
    ("linux", "arm"),
    ("linux", "arm64"),
    ("linux", "ppc64le"),
    ("darwin", "386"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
];

impl Platform {
    /// The release platform for a Rust target triple. Any libc/ABI variant of a supported
    /// OS/CPU pair maps to it (e.g. `x86_64-unknown-linux-musl` is `linux/amd64`).
    ///
    /// Errors: `None` for a triple outside the five release platforms.
    pub fn from_triple(triple: &str) -> Option<Platform> {
        let arch = if triple.starts_with("x86_64-") {
            "amd64"
        } else if triple.starts_with("aarch64-") {
            "arm64"
        } else {
            return None;
        };
        let os = if triple.contains("-linux-") {
            "linux"
        } else if triple.contains("-apple-darwin") {
            "darwin"
        } else if triple.contains("-windows-") {
            "windows"
        } else {
            return None;
        };
        let base = RELEASE_PLATFORMS
            .iter()
            .find(|p| p.os == os && p.arch == arch)?;
        Some(Platform {
            triple: if triple == base.triple {
                base.triple
            } else {
                // Keep the caller's triple for cargo's --target; the labels are what matter.
                Box::leak(triple.to_owned().into_boxed_str())
            },
            ..*base
        })
    }

    /// The release platform for krew labels, e.g. `("linux", "amd64")`.
    pub fn from_labels(os: &str, arch: &str) -> Option<Platform> {
        RELEASE_PLATFORMS
            .iter()
            .copied()
            .find(|p| p.os == os && p.arch == arch)
    }

    /// `true` for Windows, whose binaries end in `.exe` and whose archives are `.zip`.
    pub fn is_windows(&self) -> bool {
        self.os == "windows"
    }

    /// The archive extension krew will detect by content: `zip` on Windows, else `tar.gz`.
    pub fn archive_ext(&self) -> &'static str {
        if self.is_windows() { "zip" } else { "tar.gz" }
    }

    /// The executable file name of a binary on this platform (`kubectl-unstick.exe` on Windows).
    pub fn exe_name(&self, bin: &str) -> String {
        if self.is_windows() {
            format!("{bin}.exe")
        } else {
            bin.to_owned()
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triples_map_to_krew_labels() {
        for p in RELEASE_PLATFORMS {
            assert_eq!(Platform::from_triple(p.triple), Some(p));
            assert!(KREW_SUPPORTED.contains(&(p.os, p.arch)), "{p}");
        }
        let musl = Platform::from_triple("x86_64-unknown-linux-musl").unwrap();
        assert_eq!((musl.os, musl.arch), ("linux", "amd64"));
        assert_eq!(musl.triple, "x86_64-unknown-linux-musl");
        assert_eq!(Platform::from_triple("riscv64gc-unknown-linux-gnu"), None);
    }
}
