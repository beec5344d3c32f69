//! Whether two Git remote URLs name the same repository: the local `origin` against the
//! GitRepository's `spec.url`.
//!
//! Each URL is reduced to a [`RepoKey`]: the host (lower case, without a trailing dot), the
//! port when the scheme's default is not used, and the path without a trailing `/` or
//! `.git` (Git hosts serve `org/repo` and `org/repo.git` as one repository). Userinfo
//! (`git@`, `user:token@`) never matters. scp-like URLs (`git@github.com:org/repo.git`,
//! git-clone(1) "GIT URLS") are read as `ssh://git@github.com/org/repo.git`. Two URLs of
//! different schemes (https and ssh, the same repository reached two ways) compare host and
//! path only; of the same scheme, the port too. A local path (`/srv/git/fleet.git`,
//! `file://`) names a repository on this machine, never the server Flux reads.

/// The parts of a Git URL that name a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoKey {
    /// `https`, `http`, `ssh`, `git` or `file`.
    pub scheme: String,
    /// Host, lower case; empty for `file`.
    pub host: String,
    /// The port, `None` for the scheme's default (https 443, http 80, ssh 22, git 9418).
    pub port: Option<u16>,
    /// Path without leading/trailing `/` and without a trailing `.git`.
    pub path: String,
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "https" => Some(443),
        "http" => Some(80),
        "ssh" => Some(22),
        "git" => Some(9418),
        _ => None,
    }
}

fn trim_path(p: &str) -> String {
    let p = p.trim_matches('/');
    let p = p.strip_suffix(".git").unwrap_or(p);
    p.trim_end_matches('/').to_string()
}

/// The [`RepoKey`] of `url`; `None` when it is no URL git accepts (empty, or a scheme-less
/// word that is neither scp-like nor a path).
pub fn repo_key(url: &str) -> Option<RepoKey> {
    let url = url.trim();
    if url.is_empty() {
        return None;
    }
    if !url.contains("://") {
        // git-clone(1): scp-like `[user@]host:path` when there is a colon before any slash.
        if let Some((host, path)) = url.split_once(':')
            && !host.contains('/')
            && !host.is_empty()
        {
            let host = host.rsplit('@').next().unwrap_or(host);
            return Some(RepoKey {
                scheme: "ssh".into(),
                host: host.trim_end_matches('.').to_ascii_lowercase(),
                port: None,
                path: trim_path(path),
            });
        }
        return Some(RepoKey {
            scheme: "file".into(),
            host: String::new(),
            port: None,
            path: trim_path(url),
        });
    }
    let u = url::Url::parse(url).ok()?;
    let scheme = u.scheme().to_ascii_lowercase();
    let scheme = scheme.strip_prefix("git+").unwrap_or(&scheme).to_string();
    let port = u.port().filter(|p| Some(*p) != default_port(&scheme));
    Some(RepoKey {
        host: u
            .host_str()
            .unwrap_or("")
            .trim_end_matches('.')
            .to_ascii_lowercase(),
        port,
        path: trim_path(u.path()),
        scheme,
    })
}

/// True when `a` and `b` name the same repository (see the module docs); false when either
/// does not parse or is a local path.
pub fn same_repository(a: &str, b: &str) -> bool {
    let (Some(a), Some(b)) = (repo_key(a), repo_key(b)) else {
        return false;
    };
    if a.scheme == "file" || b.scheme == "file" {
        return false;
    }
    a.host == b.host && a.path == b.path && (a.scheme != b.scheme || a.port == b.port)
}

/// `url` without userinfo (a token written into a remote URL never reaches the output).
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_repository_many_spellings() {
        let flux = "https://github.com/org/fleet";
        for same in [
            "https://github.com/org/fleet.git",
            "https://GitHub.com/org/fleet/",
            "https://x-access-token:abc@github.com/org/fleet.git",
            "https://github.com:443/org/fleet",
            "git@github.com:org/fleet.git",
            "ssh://git@github.com/org/fleet.git",
        ] {
            assert!(same_repository(flux, same), "{same}");
        }
        for other in [
            "https://github.com/org/fleet-old.git",
            "https://gitea.internal/org/fleet.git",
            "https://github.com:8443/org/fleet.git",
            "/srv/git/fleet.git",
            "file:///srv/git/org/fleet.git",
            "",
        ] {
            assert!(!same_repository(flux, other), "{other}");
        }
        // the same host on two ports is two servers (the demo's Git servers on 127.0.0.1)
        assert!(!same_repository(
            "http://127.0.0.1:41001/org/fleet.git",
            "http://127.0.0.1:41002/org/fleet.git"
        ));
    }

    #[test]
    fn redacted_drops_userinfo_only() {
        assert_eq!(
            redacted("https://u:tok@h.example/org/r.git"),
            "https://h.example/org/r.git"
        );
        assert_eq!(redacted("git@h:org/r.git"), "git@h:org/r.git");
    }
}
