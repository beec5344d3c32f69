//! The setter lines a commit changed: two versions of one file read the way
//! image-automation-controller reads them ([`crate::scan::scan_bytes`]), their effective markers
//! paired, and every marked value that differs named as markercheck names a change
//! ([`crate::check::Change`]: line, setter, old, new). Used by `kubectl gitops pull` to show what
//! each incoming commit (the automation's, or anyone's) did to setter lines.
//!
//! Pairing: a marker is identified by the object it is in (apiVersion, kind, namespace, name),
//! the dotted path of the value (`.spec.template.spec.containers.image`), its setter name, and
//! its rank among the markers with that identity in document order (two containers of one
//! Deployment share a path). The automation only rewrites values (kyaml may also lay the file
//! out anew, which moves lines), so the same marker keeps its identity across its commit; a
//! marker only one side has (added, removed, renamed setter) is no value change and is not
//! listed.

use std::collections::HashMap;
use std::path::Path;

use crate::check::Change;
use crate::scan::{ObjectId, Site, scan_bytes};

/// The identity of an effective marker within one file version (see the module docs).
type Key = (ObjectId, String, String, usize);

fn keyed(sites: &[Site]) -> Vec<(Key, &Site)> {
    let mut seen: HashMap<(ObjectId, String, String), usize> = HashMap::new();
    sites
        .iter()
        .filter(|s| s.effective() && s.target.is_some())
        .filter_map(|s| {
            let setter = s.setter.clone()?;
            let path = s.target.as_ref()?.path.clone();
            let base = (s.object.clone(), path, setter);
            let rank = seen.entry(base.clone()).or_default();
            let key = (base.0, base.1, base.2, *rank);
            *rank += 1;
            Some((key, s))
        })
        .collect()
}

/// The marked values that differ between `old` and `new` (two versions of the file `rel`):
/// one [`Change`] per marker whose value changed, at its line in `new`, in `new`'s order.
/// Empty when either version has no marker Flux reads, is not a file Flux selects by name,
/// or is a "problem file" Flux skips (not UTF-8, a YAML error).
pub fn changed_setters(rel: &Path, old: &[u8], new: &[u8]) -> Vec<Change> {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if !crate::scan::flux_selects(name) {
        return Vec::new();
    }
    let scan = |b: &[u8]| scan_bytes(rel.to_path_buf(), rel.to_path_buf(), true, b.to_vec());
    let (Some(before), Some(after)) = (scan(old), scan(new)) else {
        return Vec::new();
    };
    if before.problem.is_some() || after.problem.is_some() {
        return Vec::new();
    }
    let old_values: HashMap<Key, String> = keyed(&before.sites)
        .into_iter()
        .filter_map(|(k, s)| Some((k, s.target.as_ref()?.value.clone())))
        .collect();
    keyed(&after.sites)
        .into_iter()
        .filter_map(|(k, s)| {
            let t = s.target.as_ref()?;
            let old = old_values.get(&k)?;
            (old != &t.value).then(|| Change {
                line: t.line,
                setter: k.2.clone(),
                old: old.clone(),
                new: t.value.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\nspec:\n  template:\n    spec:\n      containers:\n\n      - name: web\n        image: ghcr.io/org/web:1.0.0 # {\"$imagepolicy\": \"flux-system:web\"}\n      - name: side\n        image: ghcr.io/org/side:2.0.0 # {\"$imagepolicy\": \"flux-system:side:tag\"}\n";

    #[test]
    fn a_rewritten_value_is_named_at_its_new_line() {
        // kyaml drops the blank line (the marker moves up one line) and writes the new tag.
        let new = OLD
            .replace("containers:\n\n", "containers:\n")
            .replace("web:1.0.0", "web:1.2.3");
        let c = changed_setters(Path::new("apps/web.yaml"), OLD.as_bytes(), new.as_bytes());
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].line, 11);
        assert_eq!(c[0].setter, "flux-system:web");
        assert_eq!(c[0].old, "ghcr.io/org/web:1.0.0");
        assert_eq!(c[0].new, "ghcr.io/org/web:1.2.3");
    }

    #[test]
    fn two_markers_on_one_path_pair_in_order_and_added_markers_are_no_change() {
        let old = "kind: X\nmetadata: {name: a}\nspec:\n  images:\n  - i: a:1 # {\"$imagepolicy\": \"ns:p:tag\"}\n  - i: b:1 # {\"$imagepolicy\": \"ns:p:tag\"}\n";
        let new = "kind: X\nmetadata: {name: a}\nspec:\n  images:\n  - i: a:1 # {\"$imagepolicy\": \"ns:p:tag\"}\n  - i: b:2 # {\"$imagepolicy\": \"ns:p:tag\"}\n  - i: c:3 # {\"$imagepolicy\": \"ns:p:tag\"}\n";
        let c = changed_setters(Path::new("x.yaml"), old.as_bytes(), new.as_bytes());
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            (c[0].line, c[0].old.as_str(), c[0].new.as_str()),
            (6, "b:1", "b:2")
        );
        // not a file Flux reads, or a problem file: nothing
        assert!(changed_setters(Path::new("x.txt"), old.as_bytes(), new.as_bytes()).is_empty());
        assert!(changed_setters(Path::new("x.yaml"), b"a: [", new.as_bytes()).is_empty());
    }
}
