//! What a PATH argument is, for every plugin that reads one: a clear usage message naming the
//! path and the case. The repository root a path is read against is in
//! `markercheck::repo` (the offline engine every offline plugin shares).

use std::path::Path;

/// Why a PATH argument cannot be read as a directory: `None` when it is one. The message names
/// the path and the case: it does not exist, it is a file, or it cannot be read.
pub fn directory_problem(p: &Path) -> Option<String> {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(format!("{}: is a file, not a directory", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some(format!("{}: no such directory", p.display()))
        }
        Err(e) => Some(format!("{}: {e}", p.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_and_a_file_are_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(directory_problem(dir.path()), None);
        let missing = dir.path().join("nope");
        assert_eq!(
            directory_problem(&missing),
            Some(format!("{}: no such directory", missing.display()))
        );
        let file = dir.path().join("f.yaml");
        std::fs::write(&file, "a: 1\n").unwrap();
        assert_eq!(
            directory_problem(&file),
            Some(format!("{}: is a file, not a directory", file.display()))
        );
    }
}
