//! The images the node can pull, and the container runtime's names for them: used by the real
//! cluster's node agent (tests/realcluster/src/node.rs: ErrImagePull / ImagePullBackOff for an
//! image the registry list lacks) and the pod runtime. The workload controllers that stood in
//! for kube-controller-manager here were retired in session 5 (the real one runs in
//! tests/realcluster).
//!
//! Reference normalisation follows the docker reference grammar as the container runtime
//! reports it (`0.1.1` -> `docker.io/library/0.1.1:latest`); the pod-template hash follows
//! kubernetes `pkg/controller` `ComputeHash` (FNV-32a) with k8s.io/apimachinery
//! `rand.SafeEncodeString`.

use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Images the nodes can pull. Entries are full references (`host/path:tag`,
/// `host/path@sha256:...`), a repository with `:*` for any tag, or a bare name as written.
#[derive(Clone, Default)]
pub struct Registry {
    images: Arc<Mutex<Vec<String>>>,
}

impl Registry {
    /// A registry with these references.
    pub fn new(images: &[String]) -> Self {
        Registry {
            images: Arc::new(Mutex::new(images.to_vec())),
        }
    }
    /// Adds a pullable reference.
    pub fn add(&self, image: &str) {
        self.images.lock().unwrap().push(image.to_string());
    }
    /// True when `image` (as written in a pod spec) can be pulled.
    pub fn can_pull(&self, image: &str) -> bool {
        let norm = normalize_image(image);
        self.images.lock().unwrap().iter().any(|e| {
            if let Some(repo) = e.strip_suffix(":*") {
                let (r, _) = split_ref(&norm);
                return r == normalize_repo(repo);
            }
            *e == image || normalize_image(e) == norm
        })
    }
}

fn split_ref(r: &str) -> (String, String) {
    if let Some((repo, d)) = r.split_once('@') {
        return (repo.to_string(), format!("@{d}"));
    }
    match r.rfind(':') {
        Some(i) if !r[i..].contains('/') => (r[..i].to_string(), r[i..].to_string()),
        _ => (r.to_string(), String::new()),
    }
}

fn normalize_repo(repo: &str) -> String {
    let first = repo.split('/').next().unwrap_or_default();
    let has_host =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_host {
        repo.to_string()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    }
}

/// Docker reference normalisation (`0.1.1` -> `docker.io/library/0.1.1:latest`), as the
/// container runtime reports it.
pub fn normalize_image(image: &str) -> String {
    let (repo, tag) = split_ref(image);
    let tag = if tag.is_empty() {
        ":latest".to_string()
    } else {
        tag
    };
    format!("{}{tag}", normalize_repo(&repo))
}

/// k8s.io/apimachinery `rand.SafeEncodeString` alphabet.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Pod-template hash: FNV-32a of the template's JSON, `SafeEncodeString` of its decimal.
pub fn template_hash(template: &Value) -> String {
    let mut h: u32 = 0x811c9dc5;
    for b in template.to_string().bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x01000193);
    }
    h.to_string()
        .bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn image_normalisation_and_registry() {
        assert_eq!(normalize_image("0.1.1"), "docker.io/library/0.1.1:latest");
        assert_eq!(
            normalize_image("nginx:1.25"),
            "docker.io/library/nginx:1.25"
        );
        assert_eq!(
            normalize_image("localhost:5000/app:0.1.1"),
            "localhost:5000/app:0.1.1"
        );
        assert_eq!(normalize_image("ghcr.io/x/y"), "ghcr.io/x/y:latest");
        let r = Registry::new(&[
            "localhost:5000/app:0.1.1".into(),
            "ghcr.io/fluxcd/kustomize-controller:*".into(),
        ]);
        assert!(r.can_pull("localhost:5000/app:0.1.1"));
        assert!(!r.can_pull("0.1.1"));
        assert!(!r.can_pull("localhost:5000/app:0.1.2"));
        assert!(r.can_pull("ghcr.io/fluxcd/kustomize-controller:v1.8.0"));
    }

    #[test]
    fn hash_is_stable_and_safe() {
        let h = template_hash(&json!({"spec": {"containers": [{"image": "a"}]}}));
        assert_eq!(
            h,
            template_hash(&json!({"spec": {"containers": [{"image": "a"}]}}))
        );
        assert!(h.bytes().all(|b| ALPHANUMS.contains(&b)));
    }
}
