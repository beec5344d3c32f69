//! Flux image-automation objects read from manifests (or the cluster): ImagePolicy,
//! ImageRepository, ImageUpdateAutomation — only the fields the setters and the rules use.

use crate::api::IMAGE_GROUP;
use crate::scan::FileScan;
use crate::yamltree::Node;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `status.latestRef` of an ImagePolicy (image-reflector-controller api/v1 `ImageRef`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LatestRef {
    /// Image name (ImageRepository `spec.image`).
    pub name: String,
    /// Tag.
    pub tag: String,
    /// Digest (`sha256:...`) or empty.
    pub digest: String,
}

impl LatestRef {
    /// `ImageRef.String()`: `name[:tag][@digest]` — the value of the plain `ns:p` setter.
    pub fn full(&self) -> String {
        let mut s = self.name.clone();
        if !self.tag.is_empty() {
            s.push(':');
            s.push_str(&self.tag);
        }
        if !self.digest.is_empty() {
            s.push('@');
            s.push_str(&self.digest);
        }
        s
    }

    /// Parse `REF` as given to `--set` (`name:tag[@digest]`, `name@digest`).
    pub fn parse(r: &str) -> Option<LatestRef> {
        let (rest, digest) = match r.split_once('@') {
            Some((a, d)) => (a, d.to_string()),
            None => (r, String::new()),
        };
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (
                &rest[..last_slash + i],
                rest[last_slash + i + 1..].to_string(),
            ),
            None => (rest, String::new()),
        };
        if name.is_empty() || (tag.is_empty() && digest.is_empty()) {
            return None;
        }
        Some(LatestRef {
            name: name.to_string(),
            tag,
            digest,
        })
    }

    /// Rough go-containerregistry `name.ParseReference(.., WeakValidation)` check; upstream
    /// `UpdateWithSetters` fails the whole run ("encountered invalid image ref") otherwise.
    pub fn validate(&self) -> Result<(), String> {
        let repo_ok = self.name.split('/').enumerate().all(|(i, part)| {
            !part.is_empty()
                && if i == 0
                    && self.name.contains('/')
                    && (part.contains('.') || part.contains(':') || part == "localhost")
                {
                    part.chars()
                        .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
                } else {
                    part.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
                }
        });
        if !repo_ok {
            return Err(format!(
                "repository {:?} is not a valid image name",
                self.name
            ));
        }
        if !self.tag.is_empty()
            && (self.tag.len() > 128
                || !self
                    .tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                || self.tag.starts_with(['.', '-']))
        {
            return Err(format!("tag {:?} is not a valid tag", self.tag));
        }
        if !self.digest.is_empty() {
            let ok = self.digest.split_once(':').is_some_and(|(a, h)| {
                !a.is_empty() && h.len() >= 32 && h.chars().all(|c| c.is_ascii_hexdigit())
            });
            if !ok {
                return Err(format!("digest {:?} is not a valid digest", self.digest));
            }
        }
        Ok(())
    }
}

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// A manifest in the scanned tree: path and 1-based line of the document.
    File {
        /// Path relative to the scan root.
        path: PathBuf,
        /// Line.
        line: usize,
    },
    /// Read from the cluster.
    Cluster,
    /// `--set`.
    Flag,
}

/// An ImagePolicy.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImagePolicy {
    /// Namespace (empty in a manifest means the default namespace given on the command line).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.imageRepositoryRef` (namespace defaults to the policy's).
    pub repository: Option<(String, String)>,
    /// `status.latestRef`.
    pub latest: Option<LatestRef>,
    /// Where it was read.
    pub origin: Origin,
}

/// An ImageRepository.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImageRepository {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.image`.
    pub image: String,
    /// 1-based line of `spec.image` (manifests only).
    pub image_line: usize,
    /// Where it was read.
    pub origin: Origin,
}

/// A label selector (`metav1.LabelSelector`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions` as (key, operator, values).
    pub match_expressions: Vec<(String, String, Vec<String>)>,
}

impl LabelSelector {
    /// `metav1.LabelSelectorAsSelector(..).Matches(labels)`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .match_expressions
                .iter()
                .all(|(k, op, vals)| match op.as_str() {
                    "In" => labels.get(k).is_some_and(|v| vals.contains(v)),
                    "NotIn" => labels.get(k).is_none_or(|v| !vals.contains(v)),
                    "Exists" => labels.contains_key(k),
                    "DoesNotExist" => !labels.contains_key(k),
                    _ => false,
                })
    }
}

/// An ImageUpdateAutomation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImageUpdateAutomation {
    /// `apiVersion`.
    pub api_version: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.update.path` ("" = repository root).
    pub update_path: String,
    /// `spec.update.strategy`.
    pub strategy: String,
    /// `spec.policySelector`.
    pub selector: Option<LabelSelector>,
    /// `spec.git.commit.messageTemplate` and its 1-based line.
    pub message_template: Option<(String, usize)>,
    /// Where it was read.
    pub origin: Origin,
}

/// A Flux Kustomization (`kustomize.toolkit.fluxcd.io`): what it applies and how.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FluxKustomization {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.path`, relative to the source's root ("" = the root).
    pub path: String,
    /// `spec.force`: kustomize-controller deletes and recreates an object whose update fails
    /// on an immutable field (e.g. a Job's pod template) instead of failing the apply.
    pub force: bool,
    /// Where it was read.
    pub origin: Origin,
}

/// All objects known to a run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Objects {
    /// ImagePolicies.
    pub policies: Vec<ImagePolicy>,
    /// ImageRepositories.
    pub repositories: Vec<ImageRepository>,
    /// ImageUpdateAutomations.
    pub automations: Vec<ImageUpdateAutomation>,
    /// Documents using a removed API version: (file, line, apiVersion, kind).
    pub removed_api: Vec<(PathBuf, usize, String, String)>,
}

/// What a tree says beyond the image objects (kept out of [`Objects`] so that its shape
/// stays as it was for library users).
#[derive(Debug, Clone, Default)]
pub struct TreeFacts {
    /// Flux Kustomizations (`kustomize.toolkit.fluxcd.io`) found in the tree.
    pub kustomizations: Vec<FluxKustomization>,
    /// ImagePolicies whose namespace kustomize sets differently depending on the build that
    /// includes them: (namespace as assigned, name) -> the namespaces the builds give.
    pub unknown_namespaces: BTreeMap<(String, String), Vec<String>>,
}

fn s(n: Option<&Node>) -> String {
    n.and_then(Node::str).unwrap_or_default().to_string()
}

fn string_map(n: Option<&Node>) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Some(Node::Map { entries, .. }) = n {
        for (k, v) in entries {
            if let (Some(k), Some(v)) = (k.str(), v.str()) {
                m.insert(k.to_string(), v.to_string());
            }
        }
    }
    m
}

fn line_at(text: &str, off: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..off.min(text.len())]).count() + 1
}

impl Objects {
    /// Collect objects from the scanned files; empty namespaces become `default_ns`.
    ///
    /// The namespace of an object is the one kustomize gives it when a kustomization file of
    /// the tree with `namespace:` includes its file (the outermost wins, overriding
    /// `metadata.namespace`; [`crate::kustomize::Tree::namespace_of`]), else its own
    /// `metadata.namespace`, else `default_ns`. An ImagePolicy whose including builds disagree
    /// is listed in `unknown_namespaces`.
    pub fn from_files(files: &[FileScan], default_ns: &str) -> Objects {
        Objects::from_files_with_facts(files, default_ns).0
    }

    /// [`Objects::from_files`], plus the Flux Kustomizations and the ImagePolicies whose
    /// namespace is unknown.
    pub fn from_files_with_facts(files: &[FileScan], default_ns: &str) -> (Objects, TreeFacts) {
        Objects::from_files_in_tree(
            files,
            &crate::kustomize::Tree::from_files(files),
            default_ns,
        )
    }

    /// [`Objects::from_files_with_facts`] with the kustomize structure of `files` already
    /// read ([`crate::kustomize::Tree::from_files`] of the same files): one copy of it alive.
    pub fn from_files_in_tree(
        files: &[FileScan],
        tree: &crate::kustomize::Tree,
        default_ns: &str,
    ) -> (Objects, TreeFacts) {
        let mut o = Objects::default();
        let mut facts = TreeFacts::default();
        for f in files {
            if !f.selected {
                continue;
            }
            let ns_override = tree.namespace_of(&f.rel);
            for d in &f.docs {
                let Some(root) = &d.tree.root else { continue };
                let docs: Vec<&Node> = match root.get("items") {
                    Some(Node::Seq { items, .. }) if f.list => items.iter().collect(),
                    _ => vec![root],
                };
                for r in docs {
                    o.add(
                        r,
                        &f.text,
                        d.offset,
                        &f.rel,
                        default_ns,
                        &ns_override,
                        &mut facts,
                    );
                }
            }
        }
        (o, facts)
    }

    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        r: &Node,
        text: &str,
        off: usize,
        path: &std::path::Path,
        default_ns: &str,
        ns_override: &crate::kustomize::Namespace,
        facts: &mut TreeFacts,
    ) {
        use crate::kustomize::Namespace;
        let api = s(r.get("apiVersion"));
        let Some((group, version)) = api.split_once('/') else {
            return;
        };
        let own_ns = || {
            let ns = s(r.path(&["metadata", "namespace"]));
            if ns.is_empty() {
                default_ns.to_string()
            } else {
                ns
            }
        };
        let ns_of = || match ns_override {
            Namespace::Set(ns) => ns.clone(),
            _ => own_ns(),
        };
        if group == "kustomize.toolkit.fluxcd.io" {
            if s(r.get("kind")) == "Kustomization" {
                let force = matches!(r.path(&["spec", "force"]).and_then(Node::str), Some("true"));
                facts.kustomizations.push(FluxKustomization {
                    namespace: ns_of(),
                    name: s(r.path(&["metadata", "name"])),
                    path: s(r.path(&["spec", "path"])),
                    force,
                    origin: Origin::File {
                        path: path.to_path_buf(),
                        line: line_at(text, off + r.start()),
                    },
                });
            }
            return;
        }
        if group != IMAGE_GROUP {
            return;
        }
        let kind = s(r.get("kind"));
        let line = line_at(text, off + r.start());
        let origin = Origin::File {
            path: path.to_path_buf(),
            line,
        };
        let removed = match kind.as_str() {
            // image-automation-controller v1.0.0 removed v1beta1 (IUA); v1.2.0 removed v1beta2.
            "ImageUpdateAutomation" | "ImagePolicy" | "ImageRepository" => {
                matches!(version, "v1alpha1" | "v1alpha2" | "v1beta1" | "v1beta2")
            }
            _ => false,
        };
        if removed {
            self.removed_api
                .push((path.to_path_buf(), line, api.clone(), kind.clone()));
        }
        let ns = ns_of();
        let name = s(r.path(&["metadata", "name"]));
        if let (Namespace::Unknown(c), "ImagePolicy") = (ns_override, kind.as_str()) {
            facts
                .unknown_namespaces
                .insert((ns.clone(), name.clone()), c.clone());
        }
        match kind.as_str() {
            "ImagePolicy" => {
                let latest = r.path(&["status", "latestRef"]).map(|l| LatestRef {
                    name: s(l.get("name")),
                    tag: s(l.get("tag")),
                    digest: s(l.get("digest")),
                });
                let repository = r.path(&["spec", "imageRepositoryRef"]).map(|rr| {
                    let mut rns = s(rr.get("namespace"));
                    if rns.is_empty() {
                        rns = ns.clone();
                    }
                    (rns, s(rr.get("name")))
                });
                self.policies.push(ImagePolicy {
                    namespace: ns,
                    name,
                    labels: string_map(r.path(&["metadata", "labels"])),
                    repository,
                    latest,
                    origin,
                });
            }
            "ImageRepository" => {
                let img = r.path(&["spec", "image"]);
                self.repositories.push(ImageRepository {
                    namespace: ns,
                    name,
                    image: s(img),
                    image_line: img.map(|n| line_at(text, off + n.start())).unwrap_or(line),
                    origin,
                });
            }
            "ImageUpdateAutomation" => {
                let sel = r.path(&["spec", "policySelector"]).map(|sn| LabelSelector {
                    match_labels: string_map(sn.get("matchLabels")),
                    match_expressions: match sn.get("matchExpressions") {
                        Some(Node::Seq { items, .. }) => items
                            .iter()
                            .map(|e| {
                                let vals = match e.get("values") {
                                    Some(Node::Seq { items, .. }) => items
                                        .iter()
                                        .filter_map(|v| v.str().map(String::from))
                                        .collect(),
                                    _ => vec![],
                                };
                                (s(e.get("key")), s(e.get("operator")), vals)
                            })
                            .collect(),
                        _ => vec![],
                    },
                });
                let mt = r
                    .path(&["spec", "git", "commit", "messageTemplate"])
                    .and_then(|n| {
                        n.str()
                            .map(|v| (v.to_string(), line_at(text, off + n.start())))
                    });
                self.automations.push(ImageUpdateAutomation {
                    api_version: api,
                    namespace: ns,
                    name,
                    update_path: s(r.path(&["spec", "update", "path"])),
                    strategy: s(r.path(&["spec", "update", "strategy"])),
                    selector: sel,
                    message_template: mt,
                    origin,
                });
            }
            _ => {}
        }
    }
}

/// Merge policies: later sources override earlier ones by `ns/name`; a later policy without
/// `latestRef` keeps the earlier latestRef (a manifest rarely carries status; the cluster or
/// `--set` supply it).
pub fn merge_policies(base: &mut Vec<ImagePolicy>, overlay: Vec<ImagePolicy>) {
    // an index by (namespace, name): linear in policies, not base x overlay
    let mut at: std::collections::HashMap<(String, String), usize> = base
        .iter()
        .enumerate()
        .map(|(i, e)| ((e.namespace.clone(), e.name.clone()), i))
        .collect();
    for p in overlay {
        let key = (p.namespace.clone(), p.name.clone());
        if let Some(e) = at.get(&key).map(|&i| &mut base[i]) {
            let keep = e.latest.clone();
            let labels = if p.labels.is_empty() {
                e.labels.clone()
            } else {
                p.labels.clone()
            };
            let repo = p.repository.clone().or_else(|| e.repository.clone());
            *e = p;
            e.labels = labels;
            e.repository = repo;
            if e.latest.is_none() {
                e.latest = keep;
            }
        } else {
            at.entry(key).or_insert(base.len());
            base.push(p);
        }
    }
}

/// Does `file` (relative to the repository root) fall under an automation's
/// `spec.update.path` (`securejoin.SecureJoin(workDir, path)`; "" = whole repository)?
pub fn path_covers(update_path: &str, file: &std::path::Path) -> bool {
    let p = update_path.trim_start_matches("./").trim_matches('/');
    if p.is_empty() || p == "." {
        return true;
    }
    let mut comps: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                comps.pop();
            }
            c => comps.push(c),
        }
    }
    let want = std::path::PathBuf::from_iter(comps);
    file.starts_with(&want)
}

/// Read ImagePolicies / ImageRepositories / ImageUpdateAutomations from one YAML file
/// (`--policies FILE`, e.g. `kubectl get imagepolicies -A -o yaml` output or manifests with
/// `status.latestRef`). Errors name the file.
pub fn from_yaml_file(path: &std::path::Path, default_ns: &str) -> Result<Objects, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // make sure the object pre-check passes even for `kind: List` output
    let f = crate::scan::scan_bytes(path.to_path_buf(), path.to_path_buf(), true, bytes)
        .ok_or_else(|| format!("{}: no image.toolkit.fluxcd.io objects", path.display()))?;
    if let Some(p) = &f.problem {
        return Err(format!("{}: {p}", path.display()));
    }
    let mut o = Objects::from_files(std::slice::from_ref(&f), default_ns);
    for p in &mut o.policies {
        p.origin = Origin::Flag;
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_ref_string() {
        let r = LatestRef::parse("ghcr.io/a/b:1.2@sha256:abcd").unwrap();
        assert_eq!((r.name.as_str(), r.tag.as_str()), ("ghcr.io/a/b", "1.2"));
        assert_eq!(r.full(), "ghcr.io/a/b:1.2@sha256:abcd");
        let r = LatestRef::parse("localhost:5000/app:v1").unwrap();
        assert_eq!(
            (r.name.as_str(), r.tag.as_str()),
            ("localhost:5000/app", "v1")
        );
        assert!(LatestRef::parse("localhost:5000/app").is_none());
        assert!(
            LatestRef::parse("Upper/case:v1")
                .unwrap()
                .validate()
                .is_err()
        );
    }

    #[test]
    fn merge_keeps_latest_from_earlier_source() {
        let mk = |latest: Option<&str>, origin| ImagePolicy {
            namespace: "ns".into(),
            name: "p".into(),
            labels: BTreeMap::new(),
            repository: None,
            latest: latest.and_then(LatestRef::parse),
            origin,
        };
        let mut base = vec![mk(Some("a:1"), Origin::Cluster)];
        merge_policies(
            &mut base,
            vec![mk(
                None,
                Origin::File {
                    path: "x".into(),
                    line: 1,
                },
            )],
        );
        assert_eq!(base[0].latest.as_ref().unwrap().tag, "1");
        merge_policies(&mut base, vec![mk(Some("a:2"), Origin::Flag)]);
        assert_eq!(base.len(), 1);
        assert_eq!(base[0].latest.as_ref().unwrap().tag, "2");
    }

    #[test]
    fn update_path() {
        assert!(path_covers("", "a/b.yaml".as_ref()));
        assert!(path_covers(
            "./clusters/prod",
            "clusters/prod/app.yaml".as_ref()
        ));
        assert!(!path_covers(
            "./clusters/prod",
            "clusters/dev/app.yaml".as_ref()
        ));
        assert!(!path_covers(
            "clusters/prod",
            "clusters/production/app.yaml".as_ref()
        ));
    }

    #[test]
    fn selector() {
        let mut l = BTreeMap::new();
        l.insert("env".to_string(), "prod".to_string());
        let s = LabelSelector {
            match_labels: l.clone(),
            match_expressions: vec![],
        };
        assert!(s.matches(&l));
        assert!(!s.matches(&BTreeMap::new()));
    }
}
