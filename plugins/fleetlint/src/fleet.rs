//! Discovery: overlays, the Flux Kustomization graph each renders (root -> paths -> child
//! Kustomizations), sources, and the objects every Kustomization applies after post-build
//! substitution.

use crate::envsubst;
use crate::kustomize_fields::KustomizeFields;
use crate::render::{self, Doc, Renderer, Unit, unit_inputs};
use crate::tree::{self, Repo};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// `kustomize.toolkit.fluxcd.io`, the group of Flux Kustomizations.
pub const KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";
/// `source.toolkit.fluxcd.io`, the group of GitRepository/OCIRepository/Bucket.
pub const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
/// `kustomize.toolkit.fluxcd.io/substitute`: `disabled` on an object (label or annotation)
/// skips its substitution (fluxcd/pkg kustomize_varsub.go `substituteAnnotationKey`).
pub const SUBSTITUTE_ANNOTATION: &str = "kustomize.toolkit.fluxcd.io/substitute";

fn group(api_version: &str) -> &str {
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

/// True for a Flux Kustomization object (not a `kustomize.config.k8s.io` one).
pub fn is_flux_ks(v: &Value) -> bool {
    v["kind"] == "Kustomization" && group(v["apiVersion"].as_str().unwrap_or("")) == KUSTOMIZE_GROUP
}

/// True for a Flux source kind that a Kustomization can reference.
pub fn is_source(v: &Value) -> bool {
    group(v["apiVersion"].as_str().unwrap_or("")) == SOURCE_GROUP
        && matches!(
            v["kind"].as_str(),
            Some("GitRepository" | "OCIRepository" | "Bucket" | "ExternalArtifact")
        )
}

/// A `postBuild.substituteFrom` reference.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubstituteRef {
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    /// Name, in the Kustomization's namespace.
    pub name: String,
    /// `optional: true`: a missing object is skipped.
    pub optional: bool,
}

/// `spec.postBuild`.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostBuild {
    /// Inline `substitute` (overrides `substituteFrom`).
    pub substitute: BTreeMap<String, String>,
    /// `substituteFrom`, in order (later ones override earlier keys).
    pub substitute_from: Vec<SubstituteRef>,
    /// `substituteStrategy: Always`: run even with no variables (so defaults apply).
    pub always: bool,
}

/// A value a variable takes for one Kustomization, and where it is written.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VarValue {
    /// The value (newlines removed, as `LoadVariables` does).
    pub value: String,
    /// `file:line` where it is written (`None` when unknown).
    pub origin: Option<(String, usize)>,
}

/// One Flux Kustomization of an overlay.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FluxKs {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (the owner's namespace when empty).
    pub namespace: String,
    /// File defining it (repository-relative) and line of its document.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// `spec.path` as written (`None`: the source root).
    pub path: Option<String>,
    /// The directory `spec.path` names, repository-relative (`None`: climbs out of the
    /// repository).
    pub dir: Option<String>,
    /// `spec.sourceRef` as `Kind/namespace/name`.
    pub source: (String, String, String),
    /// `spec.dependsOn` as (namespace, name).
    pub depends_on: Vec<(String, String)>,
    /// `spec.wait`.
    pub wait: bool,
    /// `spec.healthChecks` or `spec.healthCheckExprs` present.
    pub health_checks: bool,
    /// `GetTimeout()`: spec.timeout, else interval - 30s, at least 30s
    /// (kustomize-controller api/v1 kustomization_types.go).
    #[serde(serialize_with = "ser_dur")]
    pub timeout: Duration,
    /// `spec.timeout` was written.
    pub timeout_explicit: bool,
    /// `spec.targetNamespace`.
    pub target_namespace: Option<String>,
    /// `spec.postBuild`.
    pub post_build: Option<PostBuild>,
    /// `spec.kubeConfig`: the cluster it applies to when not its own (`Secret/name` or
    /// `ConfigMap/name` of the reference), `None` for the cluster it runs in.
    pub kube_config: Option<String>,
    /// Its own kustomize fields (`spec.components`, `images`, `patches`, `namePrefix`,
    /// `nameSuffix`, `commonMetadata`), `None` when it sets none.
    pub kustomize: Option<KustomizeFields>,
    /// Rendered from the same repository (its path is followed); false for a Kustomization of
    /// another source (a tenant repository), whose path this tree cannot show.
    pub followed: bool,
    /// Index of the Kustomization whose render contains it (`None` for the overlay root).
    pub parent: Option<usize>,
    /// Variables for its post-build substitution (empty without postBuild).
    #[serde(skip)]
    pub vars: BTreeMap<String, VarValue>,
    /// `spec` as its parent applies it (after the parent's substitution; made from the
    /// FluxInstance or `gotk-sync.yaml` for a root made outside the tree): what the
    /// differential harness (tests/fleetdiff) creates on a real cluster.
    #[serde(skip)]
    pub spec: Arc<Value>,
}

fn ser_dur<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&cluster_loop::duration::format_go_duration(*d))
}

impl FluxKs {
    /// `namespace/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A source object of an overlay.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// Kind.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.url`.
    pub url: Option<String>,
}

/// An object one Kustomization applies.
#[derive(Debug, Clone)]
pub struct Applied {
    /// Index of the owning Kustomization in [`Overlay::ks`] (`None`: the overlay render
    /// without a root Kustomization).
    pub owner: Option<usize>,
    /// The rendered document (before substitution), shared with the render that made it.
    pub doc: Arc<Doc>,
    /// After substitution (the same as `doc.value` when none runs).
    pub value: Arc<Value>,
    /// Effective namespace (empty for cluster-scoped kinds).
    pub namespace: String,
}

impl Applied {
    /// `Kind namespace/name` for messages.
    pub fn describe(&self) -> String {
        let k = self.value["kind"].as_str().unwrap_or("?");
        let n = self.value["metadata"]["name"].as_str().unwrap_or("?");
        if self.namespace.is_empty() {
            format!("{k} {n}")
        } else {
            format!("{k} {}/{n}", self.namespace)
        }
    }
}

/// A render that failed.
#[derive(Debug, Clone)]
pub struct RenderError {
    /// The unit.
    pub unit: Unit,
    /// Kustomization that reaches it (`None`: the overlay itself).
    pub ks: Option<usize>,
    /// kustomize's message.
    pub message: String,
}

/// One overlay (a cluster directory) and everything it makes Flux apply.
#[derive(Debug, Default)]
pub struct Overlay {
    /// Repository-relative directory.
    pub dir: String,
    /// Index of the root Kustomization (the one whose path is this directory).
    pub root: Option<usize>,
    /// Kustomizations, root first, in discovery (breadth-first) order.
    pub ks: Vec<FluxKs>,
    /// Sources found in the overlay's renders.
    pub sources: Vec<Source>,
    /// Objects applied.
    pub objects: Vec<Applied>,
    /// Failed renders.
    pub render_errors: Vec<RenderError>,
    /// Failed renders of Kustomizations' paths in a `--source` checkout of the external
    /// source they read (the unit's `dir` is relative to that checkout); filled after the
    /// overlay is built (`render_checkouts` in lib.rs), reported as FL001.
    pub checkout_errors: Vec<RenderError>,
    /// Linted as an overlay only because its render failed during discovery
    /// ([`Discovery::unrendered`]): whether it is one is unknown.
    pub unconfirmed: bool,
    /// Envsubst problems found while substituting: (owner, object index, problem).
    pub subst_problems: Vec<SubstProblem>,
    /// Sources read by its Kustomizations that it does not apply ([`external_sources`]).
    pub external: Vec<ExternalSource>,
}

/// A source some Kustomization of an overlay reads and the overlay does not apply: made outside
/// the tree's renders (by flux-operator, an ArtifactGenerator, `flux bootstrap`, by hand).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSource {
    /// `Kind/namespace/name`.
    pub id: String,
    /// What makes it, when recognisable (`FluxInstance flux-system/flux spec.sync`, ...).
    pub maker: Option<String>,
    /// A document of the tree defines it (kind, namespace and name), in this file, though the
    /// overlay does not apply it.
    pub defined_in: Option<String>,
    /// The Kustomizations reading it (indices in [`Overlay::ks`]).
    #[serde(skip)]
    pub readers: Vec<usize>,
}

/// The group of flux-operator's kinds (FluxInstance, ResourceSet).
pub const OPERATOR_GROUP: &str = "fluxcd.controlplane.io";
/// The group of source-controller's ArtifactGenerator.
pub const SOURCE_EXTENSIONS_GROUP: &str = "source.extensions.fluxcd.io";

/// A FluxInstance's `spec.sync` from a raw document: a FluxInstance, or a HelmRelease of
/// flux-operator's `flux-instance` chart (`spec.values.instance.sync`: the chart renders the
/// FluxInstance in the release's namespace). Returns (the document, its sync).
///
/// The chart's values may come from a file: `spec.valuesFrom` ConfigMaps and Secrets (each
/// `valuesKey`, default `values.yaml`) that the tree defines, or that a kustomization's
/// `configMapGenerator`/`secretGenerator` makes from a file; merged as helm-controller does
/// (valuesFrom in order, then `spec.values` over them). An entry with `targetPath` is not read.
fn instance_sync(repo: &Repo, d: &tree::RawDoc) -> Option<(Value, Value)> {
    let operator = d.kind == "FluxInstance" && group(&d.api_version) == OPERATOR_GROUP;
    let chart = d.kind == "HelmRelease" && group(&d.api_version) == "helm.toolkit.fluxcd.io";
    if !operator && !chart {
        return None;
    }
    let v = d.value()?;
    let sync = if operator {
        v["spec"]["sync"].clone()
    } else {
        let mut sync = Value::Null;
        let flux_instance_chart = v["spec"]["chart"]["spec"]["chart"] == "flux-instance"
            || v["spec"]["chartRef"]["name"]
                .as_str()
                .is_some_and(|n| n.contains("flux-instance"));
        if flux_instance_chart && let Some(from) = v["spec"]["valuesFrom"].as_array() {
            for f in from.iter().filter(|f| f["targetPath"].is_null()) {
                let (Some(kind), Some(name)) = (f["kind"].as_str(), f["name"].as_str()) else {
                    continue;
                };
                let key = f["valuesKey"].as_str().unwrap_or("values.yaml");
                if let Some(values) = values_from(repo, kind, name, key) {
                    merge(&mut sync, &values["instance"]["sync"]);
                }
            }
        }
        merge(&mut sync, &v["spec"]["values"]["instance"]["sync"]);
        sync
    };
    sync.is_object().then_some((v, sync))
}

/// Deep-merges `over` into `base` (objects key by key, anything else replaced), as Helm merges
/// values; `null` in `over` changes nothing here.
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (_, Value::Null) => {}
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// The values a HelmRelease `valuesFrom` entry reads, when the tree holds them: a ConfigMap
/// (`data`) or Secret (`stringData`, `data` base64) named `name` with key `key`, or a
/// kustomization generator of that name whose `files` entry `key` (`KEY=PATH`, or `PATH`
/// keyed by its file name) is a file of the tree. `None` when none is found or it does not
/// parse.
fn values_from(repo: &Repo, kind: &str, name: &str, key: &str) -> Option<Value> {
    let text: Option<String> = repo
        .by_kind_name
        .get(&(kind.to_string(), name.to_string()))
        .into_iter()
        .flatten()
        .filter_map(|&i| repo.docs[i].value())
        .find_map(|o| {
            o["data"][key]
                .as_str()
                .map(str::to_string)
                .filter(|_| kind == "ConfigMap")
                .or_else(|| o["stringData"][key].as_str().map(str::to_string))
                .or_else(|| {
                    use base64::Engine as _;
                    let b = o["data"][key].as_str()?;
                    let raw = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
                    String::from_utf8(raw).ok()
                })
        })
        .or_else(|| {
            let field = if kind == "Secret" {
                "secretGenerator"
            } else {
                "configMapGenerator"
            };
            repo.kustomize_dirs.iter().find_map(|dir| {
                let kf = repo.kustomization_file(dir)?;
                let k = repo.docs[*repo.first_doc.get(&kf)?].value()?;
                k[field].as_array()?.iter().find_map(|g| {
                    if g["name"].as_str() != Some(name) {
                        return None;
                    }
                    g["files"].as_array()?.iter().find_map(|f| {
                        let f = f.as_str()?;
                        let (k, path) = match f.split_once('=') {
                            Some((k, p)) => (k.to_string(), p),
                            None => (f.rsplit('/').next().unwrap_or(f).to_string(), f),
                        };
                        if k != key {
                            return None;
                        }
                        let file = tree::join(dir, path)?;
                        repo.texts
                            .get(&file)
                            .map(|t| t.to_string())
                            .or_else(|| std::fs::read_to_string(repo.root.join(&file)).ok())
                    })
                })
            })
        });
    serde_saphyr::from_str::<Value>(&text?).ok()
}

/// The root Kustomizations made outside the tree: flux-operator's, and `flux bootstrap`'s for
/// a `CLUSTER/flux-system/gotk-sync.yaml` committed empty (only comments) for bootstrap to
/// write; for every FluxInstance of the tree with
/// `spec.sync.path`, (the path's directory, the Kustomization it makes: named `spec.sync.name`,
/// else after the FluxInstance's namespace, in that namespace, reading the source of the same
/// name and kind `spec.sync.kind`; fluxoperator.dev docs "Flux Cluster Sync Configuration").
/// Its file and line are the FluxInstance's.
pub fn instance_roots(repo: &Repo) -> Vec<(String, FluxKs)> {
    let mut out = Vec::new();
    for d in &repo.docs {
        let Some((v, sync)) = instance_sync(repo, d) else {
            continue;
        };
        let sync = &sync;
        let Some(dir) = sync["path"].as_str().and_then(tree::normalize) else {
            continue;
        };
        let ns = v["metadata"]["namespace"]
            .as_str()
            .unwrap_or("flux-system")
            .to_string();
        let name = sync["name"].as_str().unwrap_or(&ns).to_string();
        let ks = serde_json::json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "path": sync["path"],
                "interval": sync["interval"].as_str().unwrap_or("1m"),
                "sourceRef": {"kind": sync["kind"].as_str().unwrap_or("GitRepository"), "name": name},
            },
        });
        let mut k = read_ks(repo, &ks, &ns, None, None);
        k.file = d.file.clone();
        k.line = d.line;
        out.push((dir, k));
    }
    // `flux bootstrap` writes gotk-sync.yaml (GitRepository and Kustomization flux-system,
    // path the cluster directory) into CLUSTER/flux-system/; a fleet template commits it empty
    // for bootstrap to fill (fluxcd/flux2-kustomize-helm-example)
    for (f, text) in &repo.texts {
        let Some(cluster) = f.strip_suffix("/flux-system/gotk-sync.yaml") else {
            continue;
        };
        let defines = repo.first_doc.get(f).is_some_and(|&i| {
            repo.docs[i..]
                .iter()
                .take_while(|d| &d.file == f)
                .any(|d| d.kind == "Kustomization" && group(&d.api_version) == KUSTOMIZE_GROUP)
        });
        if defines
            || text
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        {
            continue;
        }
        out.push((cluster.to_string(), bootstrap_root(repo, cluster, f)));
    }
    out
}

/// The Kustomization `flux bootstrap --path DIR` writes (flux-system/flux-system, reading
/// GitRepository flux-system, path DIR), not in the tree yet; its file is `file`, line 1.
fn bootstrap_root(repo: &Repo, dir: &str, file: &str) -> FluxKs {
    let ks = serde_json::json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "flux-system", "namespace": "flux-system"},
        "spec": {
            "path": format!("./{dir}"),
            "interval": "10m",
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        },
    });
    let mut k = read_ks(repo, &ks, "flux-system", None, None);
    k.file = file.to_string();
    k.line = 1;
    k
}

/// The roots `flux bootstrap` applied itself: a `DIR/flux-system/gotk-sync.yaml` in the tree
/// whose Flux Kustomization has `spec.path` DIR, while DIR's own kustomization does not list
/// `flux-system/` (so DIR's render never holds its root; `flux bootstrap` applies gotk-sync.yaml
/// directly, and the root Kustomization then builds DIR as it is). Each (DIR, that
/// Kustomization as written).
pub fn bootstrap_sync_roots(repo: &Repo) -> Vec<(String, FluxKs)> {
    let mut out = Vec::new();
    for d in repo.docs.iter().filter(|d| {
        d.kind == "Kustomization"
            && group(&d.api_version) == KUSTOMIZE_GROUP
            && d.file.ends_with("/flux-system/gotk-sync.yaml")
    }) {
        let Some(dir) = d.spec_path.as_deref().and_then(tree::normalize) else {
            continue;
        };
        if d.file != format!("{dir}/flux-system/gotk-sync.yaml") {
            continue;
        }
        let Some(v) = d.value() else { continue };
        let ns = d.namespace.clone().unwrap_or_else(|| "flux-system".into());
        let mut k = read_ks(repo, &v, &ns, None, None);
        k.file = d.file.clone();
        k.line = d.line;
        out.push((dir, k));
    }
    out
}

/// `flux bootstrap --path` directories before bootstrap: a directory without a kustomization
/// file whose own files (not below it) hold Flux Kustomizations with a written `spec.path`,
/// none of those files listed by a kustomization, and that no Flux Kustomization of the tree
/// points at (the shape of the best-known Flux example repositories:
/// clusters/production/{apps.yaml,infrastructure.yaml}, flux-system written by bootstrap).
/// Each with the root Kustomization bootstrap will write ([`bootstrap_root`]), its file the
/// first of those files. An archived directory of old Kustomizations has the same shape, so
/// [`find_overlays`] reads these only when it finds no overlay otherwise.
pub fn bootstrap_paths(repo: &Repo) -> Vec<(String, FluxKs)> {
    let listed: BTreeSet<String> = repo
        .kustomize_dirs
        .iter()
        .flat_map(|k| repo.kustomization_refs(k).1)
        .collect();
    let flux =
        |d: &tree::RawDoc| d.kind == "Kustomization" && group(&d.api_version) == KUSTOMIZE_GROUP;
    let pointed: BTreeSet<String> = repo
        .docs
        .iter()
        .filter(|d| flux(d))
        .filter_map(|d| tree::normalize(d.spec_path.as_deref().unwrap_or("./")))
        .collect();
    let mut dirs: BTreeMap<String, String> = BTreeMap::new();
    for d in repo
        .docs
        .iter()
        .filter(|d| flux(d) && d.spec_path.is_some())
    {
        let dir = d.file.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
        if repo.kustomize_dirs.contains(dir) || pointed.contains(dir) || listed.contains(&d.file) {
            continue;
        }
        dirs.entry(dir.to_string())
            .or_insert_with(|| d.file.clone());
    }
    dirs.into_iter()
        .map(|(dir, file)| {
            let k = bootstrap_root(repo, &dir, &file);
            (dir, k)
        })
        .collect()
}

/// Sources made by objects of the overlay or of the tree, as (`Kind/namespace/name`, maker):
/// - a FluxInstance with `spec.sync` makes a `spec.sync.kind` source named `spec.sync.name`,
///   else after its namespace, in its namespace (flux-operator docs, "Flux Cluster Sync
///   Configuration": "created in the same namespace where the FluxInstance is deployed using the
///   namespace name as the Flux source and Kustomization name");
/// - an ArtifactGenerator makes one ExternalArtifact per `spec.artifacts[].name`, in its
///   namespace (source-controller ArtifactGenerator API).
pub fn source_makers(repo: &Repo, ov: &Overlay) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut add = |v: &Value, file: Option<&str>| {
        let api = v["apiVersion"].as_str().unwrap_or("");
        let kind = v["kind"].as_str().unwrap_or("");
        let name = v["metadata"]["name"].as_str().unwrap_or("");
        let ns = v["metadata"]["namespace"].as_str().unwrap_or("flux-system");
        let at = file.map(|f| format!(" in {f}")).unwrap_or_default();
        let sync = if kind == "FluxInstance" && group(api) == OPERATOR_GROUP {
            &v["spec"]["sync"]
        } else if kind == "HelmRelease" {
            &v["spec"]["values"]["instance"]["sync"]
        } else {
            &Value::Null
        };
        if sync.is_object() {
            let kind = if kind == "HelmRelease" {
                "HelmRelease (flux-instance chart)"
            } else {
                kind
            };
            let sk = sync["kind"].as_str().unwrap_or("GitRepository");
            let sn = sync["name"].as_str().unwrap_or(ns);
            out.push((
                format!("{sk}/{ns}/{sn}"),
                format!("{kind} {ns}/{name} spec.sync{at}"),
            ));
        }
        if kind == "ArtifactGenerator" && group(api) == SOURCE_EXTENSIONS_GROUP {
            for a in v["spec"]["artifacts"].as_array().into_iter().flatten() {
                if let Some(an) = a["name"].as_str() {
                    out.push((
                        format!("ExternalArtifact/{ns}/{an}"),
                        format!("ArtifactGenerator {ns}/{name}{at}"),
                    ));
                }
            }
        }
    };
    for o in &ov.objects {
        add(&o.value, None);
    }
    for d in &repo.docs {
        if d.kind == "ArtifactGenerator" && group(&d.api_version) == SOURCE_EXTENSIONS_GROUP {
            if let Some(v) = d.value() {
                add(&v, Some(&d.file));
            }
        } else if let Some((v, _)) = instance_sync(repo, d) {
            add(&v, Some(&d.file));
        }
    }
    out
}

/// The sources the overlay's Kustomizations read and the overlay does not apply, each once, with
/// its maker when [`source_makers`] knows it, or `flux bootstrap`'s sync source (GitRepository
/// or OCIRepository `flux-system/flux-system`, written by `flux bootstrap` as
/// `gotk-sync.yaml`, or made by flux-operator) when the tree does not define it.
pub fn external_sources(repo: &Repo, ov: &Overlay) -> Vec<ExternalSource> {
    let makers = source_makers(repo, ov);
    let mut out: Vec<ExternalSource> = Vec::new();
    for (i, k) in ov.ks.iter().enumerate() {
        let (kind, ns, name) = &k.source;
        if ov
            .sources
            .iter()
            .any(|s| &s.kind == kind && &s.namespace == ns && &s.name == name)
        {
            continue;
        }
        let id = format!("{kind}/{ns}/{name}");
        if let Some(e) = out.iter_mut().find(|e| e.id == id) {
            e.readers.push(i);
            continue;
        }
        let defined_in = repo
            .by_kind_name
            .get(&(kind.clone(), name.clone()))
            .into_iter()
            .flatten()
            .map(|&d| &repo.docs[d])
            .find(|d| {
                group(&d.api_version) == SOURCE_GROUP
                    && d.namespace.as_deref().unwrap_or(ns.as_str()) == ns
            })
            .map(|d| d.file.clone());
        let maker = makers
            .iter()
            .find(|(s, _)| *s == id)
            .map(|(_, m)| m.clone())
            .or_else(|| {
                (ns == "flux-system"
                    && name == "flux-system"
                    && matches!(kind.as_str(), "GitRepository" | "OCIRepository"))
                .then(|| {
                    "flux bootstrap (gotk-sync.yaml) or flux-operator, outside this tree"
                        .to_string()
                })
            });
        out.push(ExternalSource {
            id,
            maker,
            defined_in,
            readers: vec![i],
        });
    }
    out
}

/// Something post-build substitution would do wrong for one object.
#[derive(Debug, Clone)]
pub enum SubstProblem {
    /// `${...}` in an object of a Kustomization without postBuild: the literal ships.
    /// `shell`: a shell reads the text (the literal is what it wants); `meant`: a Kustomization
    /// of the overlay defines a variable of that name (Flux was meant to substitute it).
    NotEnabled {
        object: usize,
        expr: String,
        shell: bool,
        meant: bool,
    },
    /// postBuild present but no variables and no `substituteStrategy: Always`: nothing runs.
    NoVariables { object: usize, expr: String },
    /// Undefined without default. `shell`: a shell reads the text ([`ShellUse::Shell`] at one of
    /// its places); `exec_arg`: it sits in a container command/args element no shell reads.
    Undefined {
        object: usize,
        expr: String,
        name: String,
        shell: bool,
        exec_arg: bool,
    },
    /// The object's text does not parse (`envsubst error`).
    Syntax {
        object: usize,
        message: String,
        near: String,
    },
    /// A `substituteFrom` object not found in the overlay (and not optional): unknown offline.
    /// `maker`: what the overlay applies that makes it (an ExternalSecret, a SealedSecret...);
    /// `blocked`: the objects holding `${...}` whose substitution cannot be known.
    FromMissing {
        ks: usize,
        kind: String,
        name: String,
        maker: Option<String>,
        blocked: usize,
    },
    /// A variable name outside `varsubRegex`.
    BadName {
        ks: usize,
        name: String,
        origin: Option<(String, usize)>,
    },
}

fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn duration(v: &Value) -> Option<Duration> {
    cluster_loop::duration::from_json(v)
}

/// Reads a Flux Kustomization object.
pub fn read_ks(
    repo: &Repo,
    v: &Value,
    owner_ns: &str,
    inputs: Option<&BTreeSet<String>>,
    parent: Option<usize>,
) -> FluxKs {
    let name = s(&v["metadata"]["name"]).unwrap_or_default();
    let namespace = s(&v["metadata"]["namespace"])
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| owner_ns.to_string());
    let raw = repo.find("Kustomization", &name, Some(&namespace), inputs);
    let (file, line) = raw.map(|d| (d.file.clone(), d.line)).unwrap_or_default();
    let spec = &v["spec"];
    let path = s(&spec["path"]);
    let dir = tree::normalize(path.as_deref().unwrap_or("./"));
    let sr = &spec["sourceRef"];
    let source = (
        s(&sr["kind"]).unwrap_or_else(|| "GitRepository".into()),
        s(&sr["namespace"]).unwrap_or_else(|| namespace.clone()),
        s(&sr["name"]).unwrap_or_default(),
    );
    let depends_on = spec["dependsOn"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    (
                        s(&d["namespace"]).unwrap_or_else(|| namespace.clone()),
                        s(&d["name"]).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let interval = duration(&spec["interval"]).unwrap_or(Duration::from_secs(600));
    let explicit = duration(&spec["timeout"]);
    let timeout = explicit
        .unwrap_or_else(|| interval.saturating_sub(Duration::from_secs(30)))
        .max(Duration::from_secs(30));
    let post_build = spec
        .get("postBuild")
        .filter(|p| p.is_object())
        .map(|p| PostBuild {
            substitute: p["substitute"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let v = match v {
                                Value::String(s) => s.clone(),
                                o => o.to_string(),
                            };
                            (k.clone(), v.replace('\n', ""))
                        })
                        .collect()
                })
                .unwrap_or_default(),
            substitute_from: p["substituteFrom"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|r| SubstituteRef {
                            kind: s(&r["kind"]).unwrap_or_default(),
                            name: s(&r["name"]).unwrap_or_default(),
                            optional: r["optional"].as_bool().unwrap_or(false),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            always: p["substituteStrategy"] == "Always",
        });
    FluxKs {
        name,
        namespace,
        file,
        line,
        path,
        dir,
        source,
        depends_on,
        wait: spec["wait"].as_bool().unwrap_or(false),
        health_checks: spec["healthChecks"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
            || spec["healthCheckExprs"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
        timeout,
        timeout_explicit: explicit.is_some(),
        target_namespace: s(&spec["targetNamespace"]).filter(|t| !t.is_empty()),
        post_build,
        kustomize: KustomizeFields::read(spec),
        kube_config: spec["kubeConfig"]["secretRef"]["name"]
            .as_str()
            .map(|n| format!("Secret/{n}"))
            .or_else(|| {
                spec["kubeConfig"]["configMapRef"]["name"]
                    .as_str()
                    .map(|n| format!("ConfigMap/{n}"))
            }),
        followed: true,
        parent,
        vars: BTreeMap::new(),
        spec: Arc::new(spec.clone()),
    }
}

/// Every file the render of Kustomization `k` reads (its path's inputs and its components'),
/// empty when its path climbs out of the repository.
pub fn ks_inputs(repo: &Repo, k: &FluxKs) -> BTreeSet<String> {
    let Some(d) = &k.dir else {
        return BTreeSet::new();
    };
    let mut out = repo.closure(d);
    if let Some(f) = &k.kustomize {
        for c in f.component_dirs(d) {
            out.extend(repo.closure(&c));
        }
    }
    out
}

/// Kinds that are cluster-scoped (no namespace), enough for the kinds fleets hold.
pub fn cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "Namespace"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "CustomResourceDefinition"
            | "PersistentVolume"
            | "StorageClass"
            | "PriorityClass"
            | "IngressClass"
            | "GatewayClass"
            | "ValidatingWebhookConfiguration"
            | "MutatingWebhookConfiguration"
            | "APIService"
            | "CiliumLoadBalancerIPPool"
            | "ClusterIssuer"
            | "RuntimeClass"
            | "VolumeSnapshotClass"
            | "CSIDriver"
            | "Node"
    )
}

/// Whether raw document `d` is a Flux Kustomization pointing at directory `dir` of this
/// repository: its `spec.path` is written and names `dir`, and it reads a GitRepository (the
/// kind `flux bootstrap` and a FluxInstance sync make for a repository; the path of a
/// Kustomization reading an OCIRepository, a Bucket or an ExternalArtifact is in another
/// artifact, and one without spec.path is a base a cluster patches, or an archived copy).
fn points_at(repo: &Repo, d: &tree::RawDoc, dir: &str) -> bool {
    if d.kind != "Kustomization" || group(&d.api_version) != KUSTOMIZE_GROUP {
        return false;
    }
    let Some(p) = d.spec_path.as_deref() else {
        return false;
    };
    if tree::normalize(p).as_deref() != Some(dir) {
        return false;
    }
    let _ = repo;
    d.value().is_none_or(|v| {
        v["spec"]["sourceRef"]["kind"]
            .as_str()
            .is_none_or(|k| k == "GitRepository")
    })
}

/// What [`find_overlays`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Overlays: candidates whose render holds a Flux Kustomization whose `spec.path` is the
    /// candidate itself.
    pub overlays: Vec<String>,
    /// Candidates whose render failed (`kubectl kustomize` exited non-zero): whether they are
    /// overlays cannot be known without a render, so they are never dropped; [`crate::run`]
    /// lints each one no overlay reaches as an overlay, which reports the failure as FL001.
    pub unrendered: Vec<String>,
    /// Candidates rendered or tried.
    pub candidates: usize,
}

/// Finds the overlays of a repository: directories whose render holds a Flux Kustomization
/// whose `spec.path` is that same directory (the `flux-system` root `flux bootstrap` writes),
/// and that no other kustomization includes (a base such as `clusters/base` renders its own
/// root too, but `clusters/dev` includes it).
///
/// Candidates are the kustomize directories nothing includes and the directories named by a
/// Flux Kustomization's `spec.path` in the files; only those whose inputs hold a Flux
/// Kustomization, or read files outside the directory that was walked (`fleetlint
/// clusters/dev` with its base in `clusters/base`: those files are not parsed here), are
/// rendered. A candidate whose render fails is returned in [`Discovery::unrendered`], never
/// dropped: an overlay's own root Kustomization is often set by a patch (the example fleet's
/// `clusters/dev` patches `spec.path` of base's `flux-system`), so only a render tells.
pub fn find_overlays(repo: &Repo, renderer: &Renderer, jobs: usize) -> Discovery {
    let mut referenced = BTreeSet::new();
    for d in &repo.kustomize_dirs {
        for r in repo.kustomization_refs(d).0 {
            referenced.insert(r);
        }
    }
    // A file that does not parse yet names the Flux Kustomization API group may hold one (a
    // root gotk-sync.yaml broken by a bad edit): only a render tells, so it makes its
    // directories candidates too, and their failed render is FL001 naming the parse error.
    // Without it such a fleet was "nothing to lint" (exit 2), the mistake never named.
    let flux_files: BTreeSet<&str> = repo
        .docs
        .iter()
        .filter(|d| d.kind == "Kustomization" && group(&d.api_version) == KUSTOMIZE_GROUP)
        .map(|d| d.file.as_str())
        .chain(repo.bad.iter().map(|b| b.file.as_str()).filter(|f| {
            repo.texts
                .get(*f)
                .is_some_and(|t| t.contains(KUSTOMIZE_GROUP))
        }))
        .collect();
    let mut cands: BTreeSet<String> = repo
        .kustomize_dirs
        .iter()
        .filter(|d| !referenced.contains(*d))
        .cloned()
        .collect();
    for d in repo
        .docs
        .iter()
        .filter(|d| d.kind == "Kustomization" && group(&d.api_version) == KUSTOMIZE_GROUP)
    {
        let p = d.spec_path.as_deref().unwrap_or("./");
        if let Some(n) = tree::normalize(p)
            && repo.is_dir(&n)
            && !referenced.contains(&n)
        {
            cands.insert(n);
        }
    }
    let instance_dirs: BTreeSet<String> =
        instance_roots(repo).into_iter().map(|(d, _)| d).collect();
    let sync_dirs: BTreeSet<String> = bootstrap_sync_roots(repo)
        .into_iter()
        .map(|(d, _)| d)
        .collect();
    let cands: Vec<String> = cands
        .into_iter()
        .chain(instance_dirs.iter().cloned())
        .collect::<BTreeSet<String>>()
        .into_iter()
        // a FluxInstance's sync path is a root whatever it holds (its Kustomizations may all
        // sit in flux-operator ResourceSets: no Flux Kustomization document of its own)
        .filter(|c| {
            instance_dirs.contains(c)
                || repo
                    .closure(c)
                    .iter()
                    .any(|f| flux_files.contains(f.as_str()) || !repo.in_scope(f))
        })
        .collect();
    let units: Vec<Unit> = cands
        .iter()
        .map(|d| Unit {
            dir: d.clone(),
            target_namespace: None,
            kustomize: None,
        })
        .collect();
    let rendered = renderer.render_all(repo, &units, jobs);
    let mut out = Vec::new();
    let mut unrendered = Vec::new();
    for u in units {
        let docs = match rendered.get(&u).map(|r| r.result.as_ref()) {
            Some(Ok(docs)) => docs,
            Some(Err(_)) => {
                unrendered.push(u.dir);
                continue;
            }
            None => continue,
        };
        let self_root = instance_dirs.contains(&u.dir)
            || sync_dirs.contains(&u.dir)
            || docs.iter().any(|d| {
                is_flux_ks(&d.value)
                    && tree::normalize(d.value["spec"]["path"].as_str().unwrap_or("./")).as_deref()
                        == Some(u.dir.as_str())
            });
        if self_root {
            out.push(u.dir);
        }
    }
    // self-managed Kustomizations: a directory whose own Kustomization (a ks.yaml inside its
    // spec.path) is listed by a kustomization outside the directory's inputs is applied by
    // that one (its root), not an overlay of its own, even when the root cannot render here
    // (a remote resource offline gave each one a false FL010 or FL003)
    let refs: Vec<(String, Vec<String>)> = repo
        .kustomize_dirs
        .iter()
        .filter_map(|k| Some((repo.kustomization_file(k)?, repo.kustomization_refs(k).1)))
        .collect();
    let mut listers: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (kf, files) in &refs {
        for f in files {
            listers.entry(f.as_str()).or_default().push(kf.clone());
        }
    }
    out.retain(|d| {
        let own = repo.closure(d);
        !repo.docs.iter().any(|rd| {
            rd.kind == "Kustomization"
                && group(&rd.api_version) == KUSTOMIZE_GROUP
                && tree::normalize(rd.spec_path.as_deref().unwrap_or("./")).as_deref()
                    == Some(d.as_str())
                && own.contains(&rd.file)
                && listers
                    .get(rd.file.as_str())
                    .is_some_and(|ls| ls.iter().any(|kf| !own.contains(kf)))
        })
    });
    // nested overlays: a self-rooted directory inside another's inputs is not an overlay
    let closures: Vec<BTreeSet<String>> = out.iter().map(|d| repo.closure(d)).collect();
    let keep: Vec<String> = out
        .iter()
        .enumerate()
        .filter(|(i, d)| {
            let own = repo.closure(d);
            !closures
                .iter()
                .enumerate()
                .any(|(j, c)| j != *i && own.is_subset(c) && own.len() < c.len())
        })
        .map(|(_, d)| d.clone())
        .collect();
    // nothing found and nothing to report: the `flux bootstrap --path` directories of a fleet
    // not bootstrapped yet are its overlays
    if keep.is_empty() && unrendered.is_empty() {
        let boot: Vec<String> = bootstrap_paths(repo).into_iter().map(|(d, _)| d).collect();
        return Discovery {
            candidates: cands.len() + boot.len(),
            overlays: boot,
            unrendered,
        };
    }
    Discovery {
        overlays: keep,
        unrendered,
        candidates: cands.len(),
    }
}

/// The candidates of [`Discovery::unrendered`] that nothing else reports, each to be linted
/// as an overlay (which reports its render error, FL001), given the overlays `built`:
/// - not the directory of a Kustomization an overlay applies (that overlay reports the
///   failure under the Kustomization, or the Kustomization belongs to another source);
/// - a candidate that is only a `spec.path` target (no kustomization file): only while a raw
///   Flux Kustomization pointing at it ([`points_at`]) sits in a file no overlay rendered and
///   inside the candidate's own inputs (self-rooted, as `flux bootstrap` writes it): a
///   directory no live Kustomization points at is never an overlay (a repository root holding
///   a Taskfile.yml and an archive whose old Kustomization has no spec.path got FL001); or
///   the `spec.sync.path` of a FluxInstance; when every one that names
///   it was rendered by an overlay, the overlay read it as applied (a patch may point it
///   elsewhere, as a tenant's base Kustomization without `spec.path` is patched per cluster;
///   and one of another source, the tenant's own repository, is never rendered here);
/// - of two such candidates where one's inputs are a strict subset of the other's (a
///   `flux-system` directory inside a cluster directory without a kustomization file), the
///   outer one only: its error holds the inner one's.
pub fn unrendered_to_report(repo: &Repo, unrendered: &[String], built: &[Overlay]) -> Vec<String> {
    let mut applied_dirs: BTreeSet<&str> = BTreeSet::new();
    let mut inputs: BTreeSet<String> = BTreeSet::new();
    for ov in built {
        inputs.extend(repo.closure(&ov.dir));
        for k in &ov.ks {
            if let Some(d) = &k.dir {
                applied_dirs.insert(d);
                if k.followed {
                    inputs.extend(repo.closure(d));
                }
            }
        }
    }
    let instance_dirs: BTreeSet<String> =
        instance_roots(repo).into_iter().map(|(d, _)| d).collect();
    let kept: Vec<&String> = unrendered
        .iter()
        .filter(|c| !applied_dirs.contains(c.as_str()))
        .filter(|c| {
            repo.kustomize_dirs.contains(*c)
                || instance_dirs.contains(*c)
                || repo.docs.iter().any(|d| {
                    points_at(repo, d, c)
                        && !inputs.contains(&d.file)
                        && repo.closure(c).contains(&d.file)
                })
        })
        .collect();
    let closures: Vec<BTreeSet<String>> = kept.iter().map(|d| repo.closure(d)).collect();
    kept.iter()
        .enumerate()
        .filter(|(i, _)| {
            !closures
                .iter()
                .enumerate()
                .any(|(j, c)| j != *i && closures[*i].is_subset(c) && closures[*i].len() < c.len())
        })
        .map(|(_, d)| (*d).clone())
        .collect()
}

/// What a level of an overlay renders from: the Kustomization that applies it (an index into
/// [`Overlay::ks`], `None` for the overlay's own directory without a root Kustomization), its
/// rendered documents and the repository files they were built from.
type Pending = (Option<usize>, render::Docs, BTreeSet<String>);

/// A Flux Kustomization document found at one level: the Kustomization that applies it, the
/// document, its namespace and the index of its applier's files in the level's inputs.
type LevelKs = (Option<usize>, Arc<Doc>, String, usize);

/// Builds one overlay: renders its directory, then every followed Kustomization's path, level
/// by level (each level in parallel), and applies post-build substitution.
pub fn build_overlay(repo: &Repo, renderer: &Renderer, dir: &str, jobs: usize) -> Overlay {
    let mut ov = Overlay {
        dir: dir.to_string(),
        ..Default::default()
    };
    let root_unit = Unit {
        dir: dir.to_string(),
        target_namespace: None,
        kustomize: None,
    };
    let r = renderer.render_all(repo, std::slice::from_ref(&root_unit), jobs);
    let docs = match r.get(&root_unit).map(|r| r.result.clone()) {
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            ov.render_errors.push(RenderError {
                unit: root_unit,
                ks: None,
                message: e,
            });
            return ov;
        }
        None => return ov,
    };
    let root_inputs = repo.closure(dir);
    let mut seen: BTreeSet<String> = BTreeSet::new();
    add_root_ks(repo, &mut ov, dir, &docs, &root_inputs, &mut seen);
    let mut pending: Vec<Pending> = vec![(ov.root, docs, root_inputs)];
    let root_source = ov.root.map(|r| ov.ks[r].source.clone());
    loop {
        let (level_ks, level_inputs) = record_level(&mut ov, std::mem::take(&mut pending));
        let mut next = read_level_ks(repo, &mut ov, level_ks, &level_inputs, &mut seen);
        if next.is_empty() {
            break;
        }
        let units = follow_level(repo, &mut ov, &root_source, &mut next);
        let rendered = renderer.render_all(repo, &units, jobs);
        pending = queue_rendered(repo, &mut ov, dir, next, &rendered);
        if pending.is_empty() {
            break;
        }
    }
    substitute(repo, renderer, &mut ov);
    ov.external = external_sources(repo, &ov);
    ov
}

/// Records the overlay's root Kustomization (index 0, [`Overlay::root`]): the Flux
/// Kustomization in the overlay's render whose `spec.path` is the overlay's directory, else
/// the sync Kustomization a FluxInstance makes for it. Nothing when there is neither.
fn add_root_ks(
    repo: &Repo,
    ov: &mut Overlay,
    dir: &str,
    docs: &render::Docs,
    root_inputs: &BTreeSet<String>,
    seen: &mut BTreeSet<String>,
) {
    // of several (a tenant's Kustomization of another repository may build the same path),
    // bootstrap's own: named flux-system or reading the flux-system source
    let root_doc = docs
        .iter()
        .filter(|d| {
            is_flux_ks(&d.value)
                && tree::normalize(d.value["spec"]["path"].as_str().unwrap_or("./")).as_deref()
                    == Some(dir)
        })
        .min_by_key(|d| {
            d.value["metadata"]["name"] != "flux-system"
                && d.value["spec"]["sourceRef"]["name"] != "flux-system"
        });
    if let Some(rd) = root_doc {
        let ns = rd.value["metadata"]["namespace"]
            .as_str()
            .unwrap_or("flux-system")
            .to_string();
        let k = read_ks(repo, &rd.value, &ns, Some(root_inputs), None);
        seen.insert(k.id());
        ov.ks.push(k);
        ov.root = Some(0);
    } else if let Some((_, k)) = instance_roots(repo)
        .into_iter()
        .chain(bootstrap_paths(repo))
        .chain(bootstrap_sync_roots(repo))
        .find(|(d, _)| d == dir)
    {
        // flux-operator's sync Kustomization (made by a FluxInstance), or the one `flux
        // bootstrap --path` writes: never in the tree
        seen.insert(k.id());
        ov.ks.push(k);
        ov.root = Some(0);
    }
}

/// Records one level's objects (and sources) as applied by their Kustomization, in the
/// namespace it gives them, and returns the level's Flux Kustomization documents with the
/// files each applier's render read.
fn record_level(ov: &mut Overlay, pending: Vec<Pending>) -> (Vec<LevelKs>, Vec<BTreeSet<String>>) {
    let mut level_ks = Vec::new();
    let mut level_inputs: Vec<BTreeSet<String>> = Vec::new();
    for (owner, docs, inputs) in pending {
        let owner_ns = owner
            .map(|o| {
                ov.ks[o]
                    .target_namespace
                    .clone()
                    .unwrap_or_else(|| ov.ks[o].namespace.clone())
            })
            .unwrap_or_else(|| "flux-system".into());
        for d in docs.iter() {
            let kind = d.value["kind"].as_str().unwrap_or("").to_string();
            let namespace = if cluster_scoped(&kind) {
                String::new()
            } else {
                d.value["metadata"]["namespace"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .unwrap_or_else(|| owner_ns.clone())
            };
            if is_source(&d.value) {
                ov.sources.push(Source {
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    name: s(&d.value["metadata"]["name"]).unwrap_or_default(),
                    url: s(&d.value["spec"]["url"]),
                });
            }
            if is_flux_ks(&d.value) {
                level_ks.push((owner, d.clone(), namespace.clone(), level_inputs.len()));
            }
            ov.objects.push(Applied {
                owner,
                value: d.value.clone(),
                doc: d.clone(),
                namespace,
            });
        }
        level_inputs.push(inputs);
    }
    (level_ks, level_inputs)
}

/// Reads the level's Kustomizations as their parents apply them (substituted) and adds the
/// ones not seen before to the overlay: their indexes, each with a unit still to be chosen
/// ([`follow_level`]).
fn read_level_ks(
    repo: &Repo,
    ov: &mut Overlay,
    level_ks: Vec<LevelKs>,
    level_inputs: &[BTreeSet<String>],
    seen: &mut BTreeSet<String>,
) -> Vec<(usize, Unit)> {
    let mut next: Vec<(usize, Unit)> = Vec::new();
    let mut memo = BTreeMap::new();
    for (owner, d, namespace, inputs) in level_ks {
        let v = as_applied(repo, ov, owner, &d, &mut memo);
        let k = read_ks(repo, &v, &namespace, level_inputs.get(inputs), owner);
        if seen.insert(k.id()) {
            let i = ov.ks.len();
            ov.ks.push(k);
            next.push((
                i,
                Unit {
                    dir: String::new(),
                    target_namespace: None,
                    kustomize: None,
                },
            ));
        }
    }
    next
}

/// Decides which of the level's new Kustomizations are followed (they read this repository:
/// the root's source, a source with the same URL, or an ExternalArtifact packed from its
/// directories) and sets the unit each renders; returns the units to render. A Kustomization
/// not followed, or whose path is not a directory here, gets the unit dir `"\0"`.
fn follow_level(
    repo: &Repo,
    ov: &mut Overlay,
    root_source: &Option<(String, String, String)>,
    next: &mut [(usize, Unit)],
) -> Vec<Unit> {
    let mut units = Vec::new();
    let made = instance_sources(repo);
    let url_of = |r: &(String, String, String)| -> Option<String> {
        source_url(&ov.sources, r)
            .or_else(|| source_url(&made, r))
            .map(str::to_string)
    };
    let root_url = root_source.as_ref().and_then(&url_of);
    for (i, u) in next.iter_mut() {
        let same_source = {
            let k = &ov.ks[*i];
            match root_source {
                Some(rs) => {
                    &k.source == rs
                        || url_of(&k.source)
                            .is_some_and(|u| root_url.as_deref().is_some_and(|r| same_url(r, &u)))
                }
                // no root Kustomization (an --overlay picked by hand): only bootstrap's
                // conventional source is taken for this repository
                None => k.source.0 == "GitRepository" && k.source.2 == "flux-system",
            }
        };
        // an ExternalArtifact an ArtifactGenerator packs from this repository's directories
        let packed = match (root_source, same_source) {
            (Some(rs), false) => {
                let k = &ov.ks[*i];
                artifact_dir(ov, rs, &k.source, k.path.as_deref().unwrap_or("./"))
            }
            _ => None,
        };
        let same_source = same_source || packed.is_some();
        let k = &mut ov.ks[*i];
        if packed.is_some() {
            k.dir = packed;
        }
        k.followed = same_source;
        match (&k.dir, same_source) {
            (Some(d), true) if repo.is_dir(d) => {
                *u = Unit {
                    dir: d.clone(),
                    target_namespace: k.target_namespace.clone(),
                    kustomize: k.kustomize.as_ref().map(KustomizeFields::to_json),
                };
                units.push(u.clone());
            }
            _ => u.dir = "\u{0}".into(),
        }
    }
    units
}

/// The next level: the render of each followed Kustomization of `next` with the files it
/// read; a failed render is recorded in [`Overlay::render_errors`]. The root's own directory
/// is not rendered twice.
fn queue_rendered(
    repo: &Repo,
    ov: &mut Overlay,
    dir: &str,
    next: Vec<(usize, Unit)>,
    rendered: &BTreeMap<Unit, render::Rendered>,
) -> Vec<Pending> {
    let mut pending = Vec::new();
    for (i, u) in next {
        if u.dir == "\u{0}" {
            continue;
        }
        // the root's own directory is already recorded
        if Some(i) != ov.root && u.dir == dir && u.target_namespace.is_none() {
            continue;
        }
        match rendered.get(&u).map(|r| r.result.clone()) {
            Some(Ok(docs)) => {
                let inputs = unit_inputs(repo, &u);
                pending.push((Some(i), docs, inputs));
            }
            Some(Err(e)) => ov.render_errors.push(RenderError {
                unit: u,
                ks: Some(i),
                message: e,
            }),
            None => {}
        }
    }
    pending
}

/// The directory of this repository that the `path` of an ExternalArtifact `source` names,
/// when an ArtifactGenerator of the overlay makes the artifact by copying whole directories of
/// the root source `root` (`copy: [{from: "@alias/DIR/**", to: "@artifact/SUB/"}]`, the alias
/// one of `spec.sources` naming the root source) and every copy of the artifact strips the
/// same leading directories, so the artifact's layout is the repository's below them (relative
/// references between its directories resolve the same). `None` otherwise (other globs,
/// another source, excludes): the path is listed, not followed.
fn artifact_dir(
    ov: &Overlay,
    root: &(String, String, String),
    source: &(String, String, String),
    path: &str,
) -> Option<String> {
    if source.0 != "ExternalArtifact" {
        return None;
    }
    let generator = ov.objects.iter().find(|o| {
        o.value["kind"] == "ArtifactGenerator"
            && group(o.value["apiVersion"].as_str().unwrap_or("")) == SOURCE_EXTENSIONS_GROUP
            && o.namespace == source.1
            && o.value["spec"]["artifacts"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["name"] == source.2.as_str()))
    })?;
    let spec = &generator.value["spec"];
    let aliases: Vec<&str> = spec["sources"]
        .as_array()?
        .iter()
        .filter(|x| {
            x["kind"] == root.0.as_str()
                && x["name"] == root.2.as_str()
                && x["namespace"].as_str().unwrap_or(&generator.namespace) == root.1
        })
        .filter_map(|x| x["alias"].as_str())
        .collect();
    let artifact = spec["artifacts"]
        .as_array()?
        .iter()
        .find(|x| x["name"] == source.2.as_str())?;
    let mut base: Option<String> = None;
    for c in artifact["copy"].as_array()? {
        if c.get("exclude").is_some() {
            return None;
        }
        let from = c["from"].as_str()?.strip_prefix('@')?;
        let (alias, rest) = from.split_once('/').unwrap_or((from, ""));
        if !aliases.contains(&alias) {
            return None;
        }
        let from_dir = rest
            .strip_suffix("**")
            .unwrap_or(rest)
            .trim_end_matches('/');
        if from_dir.contains('*') {
            return None;
        }
        let to = c["to"].as_str()?.strip_prefix("@artifact")?;
        let to_dir = to.trim_matches('/');
        let b = if to_dir.is_empty() {
            from_dir
        } else {
            from_dir
                .strip_suffix(to_dir)?
                .strip_suffix('/')
                .or_else(|| from_dir.strip_suffix(to_dir).filter(|b| b.is_empty()))?
        };
        match &base {
            Some(x) if x != b => return None,
            _ => base = Some(b.to_string()),
        }
    }
    tree::join(&base?, path)
}

fn source_url<'a>(sources: &'a [Source], r: &(String, String, String)) -> Option<&'a str> {
    sources
        .iter()
        .find(|s| s.kind == r.0 && s.namespace == r.1 && s.name == r.2)
        .and_then(|s| s.url.as_deref())
}

/// A source URL as compared for "the same repository": without a trailing `/` or `.git`, and
/// case-insensitive (`https://github.com/o/r.git` and `https://github.com/o/r` are one
/// repository; source-controller clones either).
fn same_url(a: &str, b: &str) -> bool {
    let n = |u: &str| {
        let u = u.trim().trim_end_matches('/');
        u.strip_suffix(".git").unwrap_or(u).to_ascii_lowercase()
    };
    n(a) == n(b)
}

/// The sources FluxInstances of the tree make (`spec.sync`, named after the instance's
/// namespace unless `spec.sync.name`), with their `spec.sync.url`: a Kustomization of the
/// overlay may read one while the overlay's root reads a GitRepository of its own with the
/// same URL (a FluxInstance applied by hand next to a fleet-defined root).
fn instance_sources(repo: &Repo) -> Vec<Source> {
    repo.docs
        .iter()
        .filter_map(|d| instance_sync(repo, d))
        .map(|(v, sync)| {
            let ns = v["metadata"]["namespace"]
                .as_str()
                .unwrap_or("flux-system")
                .to_string();
            Source {
                kind: sync["kind"].as_str().unwrap_or("GitRepository").to_string(),
                name: sync["name"].as_str().unwrap_or(&ns).to_string(),
                namespace: ns,
                url: s(&sync["url"]),
            }
        })
        .collect()
}

fn b64(s: &str) -> Option<String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
}

/// Where a ConfigMap/Secret key of an overlay is written: the raw document that sets it,
/// preferring one in the overlay's own directory (a patch) over a base.
pub fn key_origin(
    repo: &Repo,
    overlay_dir: &str,
    kind: &str,
    name: &str,
    key: &str,
) -> Option<(String, usize)> {
    let cands = repo
        .by_kind_name
        .get(&(kind.to_string(), name.to_string()))?;
    let prefix = format!("{overlay_dir}/");
    let mut best: Option<(bool, String, usize)> = None;
    for &i in cands {
        let d = &repo.docs[i];
        for field in ["data", "stringData"] {
            if d.root().path(&[field, key]).is_some() {
                let own = d.file.starts_with(&prefix) || overlay_dir.is_empty();
                let line = d.line_of(&[field, key]);
                if best.as_ref().is_none_or(|b| own && !b.0) {
                    best = Some((own, d.file.clone(), line));
                }
            }
        }
    }
    best.map(|(_, f, l)| (f, l))
}

/// Key/value data of a ConfigMap or Secret value (Secret `data` base64-decoded).
pub fn object_data(v: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let secret = v["kind"] == "Secret";
    if let Some(m) = v["data"].as_object() {
        for (k, x) in m {
            let raw = match x {
                Value::String(s) => s.clone(),
                o => o.to_string(),
            };
            let val = if secret {
                b64(&raw).unwrap_or(raw)
            } else {
                raw
            };
            out.insert(k.clone(), val);
        }
    }
    if let Some(m) = v["stringData"].as_object() {
        for (k, x) in m {
            out.insert(
                k.clone(),
                match x {
                    Value::String(s) => s.clone(),
                    o => o.to_string(),
                },
            );
        }
    }
    out
}

/// String leaves of a value whose text contains `needle`, with their key path.
pub fn leaves_containing<'a>(
    v: &'a Value,
    needle: &str,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, &'a str)>,
) {
    match v {
        Value::String(s) if s.contains(needle) => out.push((path.clone(), s)),
        Value::Object(m) => {
            for (k, x) in m {
                path.push(k.clone());
                leaves_containing(x, needle, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(i.to_string());
                leaves_containing(x, needle, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The variables of Kustomization `i` for its post-build substitution (`LoadVariables`:
/// `substituteFrom` in order, then `substitute` overrides), from the objects the overlay applies
/// so far, and the non-optional `substituteFrom` objects it does not apply (`None` without
/// postBuild).
pub fn load_vars(
    repo: &Repo,
    ov: &Overlay,
    i: usize,
) -> Option<(BTreeMap<String, VarValue>, Vec<SubstituteRef>)> {
    let pb = ov.ks[i].post_build.as_ref()?;
    let ns = &ov.ks[i].namespace;
    let mut vars = BTreeMap::new();
    let mut missing = Vec::new();
    for r in &pb.substitute_from {
        let found = ov.objects.iter().find(|o| {
            o.value["kind"] == r.kind.as_str()
                && o.value["metadata"]["name"] == r.name.as_str()
                && &o.namespace == ns
        });
        match found {
            Some(o) => {
                for (k, v) in object_data(&o.doc.value) {
                    let origin = key_origin(repo, &ov.dir, &r.kind, &r.name, &k);
                    vars.insert(
                        k,
                        VarValue {
                            value: v.replace('\n', ""),
                            origin,
                        },
                    );
                }
            }
            None if r.optional => {}
            None => missing.push(r.clone()),
        }
    }
    for (k, v) in &pb.substitute {
        let f = &ov.ks[i].file;
        let origin = repo
            .docs
            .iter()
            .find(|d| d.file == *f && d.kind == "Kustomization" && d.name == ov.ks[i].name)
            .map(|d| {
                (
                    d.file.clone(),
                    d.line_of(&["spec", "postBuild", "substitute", k]),
                )
            });
        vars.insert(
            k.clone(),
            VarValue {
                value: v.clone(),
                origin,
            },
        );
    }
    Some((vars, missing))
}

/// A Flux Kustomization object as its parent applies it: kustomize-controller substitutes the
/// parent's post-build variables into everything the parent applies, child Kustomizations
/// included, so `spec.path: ./apps/${ENV}` names a real directory once substituted. Returns the
/// substituted value (the rendered one when the parent has no postBuild, loads no variable
/// without `substituteStrategy: Always`, the object opts out, or its text does not parse).
fn as_applied(
    repo: &Repo,
    ov: &Overlay,
    owner: Option<usize>,
    d: &Doc,
    memo: &mut BTreeMap<usize, Option<BTreeMap<String, String>>>,
) -> Arc<Value> {
    let Some(o) = owner else {
        return d.value.clone();
    };
    let disabled = d.value["metadata"]["annotations"][SUBSTITUTE_ANNOTATION] == "disabled"
        || d.value["metadata"]["labels"][SUBSTITUTE_ANNOTATION] == "disabled";
    if disabled || !d.text.contains("${") {
        return d.value.clone();
    }
    // the owner's variables, once per level (values only: where each is written is looked up
    // by the final pass, for findings)
    let vars = memo.entry(o).or_insert_with(|| {
        let pb = ov.ks[o].post_build.as_ref()?;
        let mut vars = BTreeMap::new();
        for r in &pb.substitute_from {
            if let Some(x) = ov.objects.iter().find(|x| {
                x.value["kind"] == r.kind.as_str()
                    && x.value["metadata"]["name"] == r.name.as_str()
                    && x.namespace == ov.ks[o].namespace
            }) {
                for (k, v) in object_data(&x.doc.value) {
                    vars.insert(k, v.replace('\n', ""));
                }
            }
        }
        vars.extend(pb.substitute.clone());
        (!vars.is_empty() || pb.always).then_some(vars)
    });
    let Some(vars) = vars else {
        return d.value.clone();
    };
    let _ = repo;
    envsubst::parse(&d.text)
        .ok()
        .and_then(|t| t.eval(vars, false).ok())
        .and_then(|t| serde_saphyr::from_str::<Value>(&t).ok())
        .map(Arc::new)
        .unwrap_or_else(|| d.value.clone())
}

fn substitute(repo: &Repo, renderer: &Renderer, ov: &mut Overlay) {
    load_all_vars(repo, ov);
    // substitute every object; the substituted texts are parsed per Kustomization at the end
    let mut outs: BTreeMap<usize, Vec<(usize, String)>> = BTreeMap::new();
    let mut blocked: BTreeMap<usize, usize> = ov
        .subst_problems
        .iter()
        .filter_map(|p| match p {
            SubstProblem::FromMissing { ks, .. } => Some((*ks, 0)),
            _ => None,
        })
        .collect();
    let known_names: BTreeSet<String> = ov.ks.iter().flat_map(|k| k.vars.keys().cloned()).collect();
    let known_vars: BTreeSet<&str> = known_names.iter().map(String::as_str).collect();
    for oi in 0..ov.objects.len() {
        let Some(owner) = ov.objects[oi].owner else {
            continue;
        };
        let o = &ov.objects[oi];
        let disabled = o.value["metadata"]["annotations"][SUBSTITUTE_ANNOTATION] == "disabled"
            || o.value["metadata"]["labels"][SUBSTITUTE_ANNOTATION] == "disabled";
        if disabled || !o.doc.text.contains("${") {
            continue;
        }
        // a missing substituteFrom input: what substitution gives is unknown offline (one
        // finding, FL033, counts what it blocks; nothing here assumes the input empty)
        if let Some(n) = blocked.get_mut(&owner) {
            *n += 1;
            continue;
        }
        if let Some(out) = substitute_object(ov, oi, owner, &known_vars) {
            outs.entry(owner).or_default().push((oi, out));
        }
    }
    for p in ov.subst_problems.iter_mut() {
        if let SubstProblem::FromMissing { ks, blocked: b, .. } = p {
            *b = blocked.get(ks).copied().unwrap_or(0);
        }
    }
    for batch in outs.into_values() {
        let texts: Vec<&str> = batch.iter().map(|(_, t)| t.as_str()).collect();
        for ((oi, _), v) in batch.iter().zip(renderer.parse_yaml_cached(repo, &texts)) {
            if let Some(v) = v {
                ov.objects[*oi].value = v;
            }
        }
    }
}

/// The variables of every Kustomization of the overlay (LoadVariables, then inline
/// `substitute` overrides) into [`FluxKs::vars`], with a problem per missing `substituteFrom`
/// input and per variable name envsubst rejects.
fn load_all_vars(repo: &Repo, ov: &mut Overlay) {
    for i in 0..ov.ks.len() {
        let Some((vars, missing)) = load_vars(repo, ov, i) else {
            continue;
        };
        for r in missing {
            let maker = secret_maker(ov, &r.kind, &r.name, &ov.ks[i].namespace);
            ov.subst_problems.push(SubstProblem::FromMissing {
                ks: i,
                kind: r.kind,
                name: r.name,
                maker,
                blocked: 0,
            });
        }
        for (k, v) in &vars {
            if !envsubst::valid_var_name(k) {
                ov.subst_problems.push(SubstProblem::BadName {
                    ks: i,
                    name: k.clone(),
                    origin: v.origin.clone(),
                });
            }
        }
        ov.ks[i].vars = vars;
    }
}

/// Substitutes object `oi` (it holds `${`) as its Kustomization `owner` would, recording
/// what goes wrong in [`Overlay::subst_problems`]; the substituted text, or `None` when the
/// controller would not substitute it (no postBuild, no variables) or it does not parse.
fn substitute_object(
    ov: &mut Overlay,
    oi: usize,
    owner: usize,
    known_vars: &BTreeSet<&str>,
) -> Option<String> {
    let o = &ov.objects[oi];
    let k = &ov.ks[owner];
    // a CRD's schema and descriptions document `${...}` (Flux's own do): documentation
    let crd = o.value["kind"] == "CustomResourceDefinition";
    let tpl = envsubst::parse(&o.doc.text);
    let Some(pb) = &k.post_build else {
        // no postBuild: the controller never substitutes; every expression ships as is
        if let Ok(t) = &tpl
            && !crd
        {
            not_enabled(&mut ov.subst_problems, o, oi, t, known_vars);
        }
        return None;
    };
    // no variables and no substituteStrategy: Always: envsubst never runs on the object
    // (`if len(vars) > 0 || options.Always`), so no syntax error or strict-mode failure can
    // happen; what ships is the text as written
    if k.vars.is_empty() && !pb.always {
        if let Ok(t) = &tpl {
            for e in &t.exprs {
                ov.subst_problems.push(SubstProblem::NoVariables {
                    object: oi,
                    expr: e.text.clone(),
                });
            }
        }
        return None;
    }
    let t = match tpl {
        Ok(t) => t,
        Err(e) => {
            let near: String = o.doc.text[e.at..].chars().take(40).collect();
            ov.subst_problems.push(SubstProblem::Syntax {
                object: oi,
                message: e.message.to_string(),
                near: near.lines().next().unwrap_or("").to_string(),
            });
            return None;
        }
    };
    let vars: BTreeMap<String, String> = k
        .vars
        .iter()
        .map(|(k, v)| (k.clone(), v.value.clone()))
        .collect();
    undefined(&mut ov.subst_problems, o, oi, &t, &vars);
    t.eval(&vars, false).ok()
}

/// A `${...}` of object `oi` whose Kustomization has no postBuild ships as is: one
/// [`SubstProblem::NotEnabled`] per expression, unless a Flux Kustomization substitutes it
/// downstream ([`substituted_downstream`]).
fn not_enabled(
    problems: &mut Vec<SubstProblem>,
    o: &Applied,
    oi: usize,
    t: &envsubst::Template,
    known_vars: &BTreeSet<&str>,
) {
    for e in &t.exprs {
        let mut hits = Vec::new();
        leaves_containing(&o.doc.value, &e.text, &mut Vec::new(), &mut hits);
        if substituted_downstream(&o.doc.value, &hits) {
            continue;
        }
        let shell = hits
            .iter()
            .any(|(p, s)| shell_use(&o.doc.value, p, s) == ShellUse::Shell);
        problems.push(SubstProblem::NotEnabled {
            object: oi,
            expr: e.text.clone(),
            shell,
            meant: known_vars.contains(e.name.as_str()),
        });
    }
}

/// One [`SubstProblem::Undefined`] per expression of object `oi` (nested ones included)
/// without a default whose variable is not in `vars`.
fn undefined(
    problems: &mut Vec<SubstProblem>,
    o: &Applied,
    oi: usize,
    t: &envsubst::Template,
    vars: &BTreeMap<String, String>,
) {
    let mut all = Vec::new();
    fn flat(e: &envsubst::Expr, out: &mut Vec<envsubst::Expr>) {
        out.push(e.clone());
        for n in &e.nested {
            flat(n, out);
        }
    }
    for e in &t.exprs {
        flat(e, &mut all);
    }
    for e in &all {
        if !e.has_default() && !vars.contains_key(&e.name) {
            let mut hits = Vec::new();
            leaves_containing(&o.doc.value, &e.text, &mut Vec::new(), &mut hits);
            let uses: Vec<ShellUse> = hits
                .iter()
                .map(|(p, s)| shell_use(&o.doc.value, p, s))
                .collect();
            problems.push(SubstProblem::Undefined {
                object: oi,
                expr: e.text.clone(),
                name: e.name.clone(),
                shell: uses.contains(&ShellUse::Shell),
                exec_arg: uses.contains(&ShellUse::ExecArg),
            });
        }
    }
}

/// True when every place of a `${...}` (`hits`: key paths) is a kustomize field of a Flux
/// Kustomization object that has postBuild itself (`spec.patches`, `spec.images`,
/// `spec.commonMetadata`, `spec.namePrefix`, `spec.nameSuffix`): that Kustomization writes the
/// text into its own render, which its own substitution then reads, so the literal is meant to
/// ship one level up (a parent patching `postBuild.substitute: {CLUSTER: ${CLUSTER}}` into its
/// children).
fn substituted_downstream(obj: &Value, hits: &[(Vec<String>, &str)]) -> bool {
    is_flux_ks(obj)
        && obj["spec"]["postBuild"].is_object()
        && !hits.is_empty()
        && hits.iter().all(|(p, _)| {
            p.len() >= 2
                && p[0] == "spec"
                && matches!(
                    p[1].as_str(),
                    "patches" | "images" | "commonMetadata" | "namePrefix" | "nameSuffix"
                )
        })
}

/// What the overlay applies that makes the Secret or ConfigMap `kind` `namespace/name` at run
/// time, when it does not apply the object itself: an ExternalSecret (external-secrets.io,
/// `spec.target.name`, else its own name), a SealedSecret (bitnami.com, its name), a
/// OnePasswordItem or an InfisicalSecret of that name.
pub fn secret_maker(ov: &Overlay, kind: &str, name: &str, namespace: &str) -> Option<String> {
    if kind != "Secret" {
        return None;
    }
    ov.objects.iter().find_map(|o| {
        let k = o.value["kind"].as_str().unwrap_or("");
        let own = o.value["metadata"]["name"].as_str().unwrap_or("");
        let made = match k {
            "ExternalSecret" => o.value["spec"]["target"]["name"].as_str().unwrap_or(own),
            "SealedSecret" | "OnePasswordItem" | "InfisicalSecret" => own,
            _ => return None,
        };
        (made == name && o.namespace == namespace).then(|| o.describe())
    })
}

/// Who reads a string of an object after substitution (see [`shell_use`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellUse {
    /// A shell parses it as a script: `${VAR}` there is the shell's own expansion, so the text
    /// must reach the container as `${VAR}` (escaped `$${VAR}` for Flux).
    Shell,
    /// A container command/args element passed to the process as is (exec form): no shell
    /// expands it, and Kubernetes expands only `$(VAR)` there (Container.args docs: "Variable
    /// references $(VAR_NAME) are expanded using the container's environment").
    ExecArg,
    /// Any other field.
    Other,
}

/// Shell names whose `-c` argument is a script (basename of argv\[0\]).
const SHELLS: &[&str] = &["sh", "bash", "ash", "dash", "zsh", "ksh", "mksh"];

/// Who reads the string `s` at `path` (object keys and array indices) of `obj`:
/// - a container `command`/`args` element ([`ShellUse::Shell`] when it is the script of a
///   shell's `-c`: argv = command ++ args, or args alone without command, argv\[0\]'s basename a
///   shell of [`SHELLS`], an option group holding `c` before it, and it the first operand after
///   that group (POSIX sh: `sh -c command_string [command_name [argument...]]`, the later operands
///   are $0, $1... and never parsed); otherwise [`ShellUse::ExecArg`]: the kubelet starts the
///   process with the argv as written, no shell);
/// - a `script` field (Tekton Step.script, Argo ScriptTemplate.source is `source`): a script;
/// - a multi-line string starting with `#!`, or a ConfigMap/Secret `data` entry whose key ends in
///   `.sh`/`.bash`/`.zsh`/`.ksh` (a script mounted and run): [`ShellUse::Shell`];
/// - anything else: [`ShellUse::Other`].
pub fn shell_use(obj: &Value, path: &[String], s: &str) -> ShellUse {
    let n = path.len();
    if n >= 2
        && (path[n - 2] == "command" || path[n - 2] == "args")
        && let Ok(idx) = path[n - 1].parse::<usize>()
    {
        let mut c = obj;
        for k in &path[..n - 2] {
            c = match c {
                Value::Object(m) => m.get(k).unwrap_or(&Value::Null),
                Value::Array(a) => k
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| a.get(i))
                    .unwrap_or(&Value::Null),
                _ => &Value::Null,
            };
        }
        let strings = |k: &str| -> Vec<&str> {
            c[k].as_array()
                .map(|a| a.iter().map(|x| x.as_str().unwrap_or("")).collect())
                .unwrap_or_default()
        };
        let (command, args) = (strings("command"), strings("args"));
        let pos = if path[n - 2] == "command" {
            idx
        } else if c.get("command").is_some() {
            command.len() + idx
        } else {
            idx
        };
        let argv: Vec<&str> = if c.get("command").is_some() {
            command.into_iter().chain(args).collect()
        } else {
            args
        };
        let shell = argv
            .first()
            .map(|a0| a0.rsplit('/').next().unwrap_or(a0))
            .is_some_and(|b| SHELLS.contains(&b));
        if shell {
            // the option groups after argv[0]; the script is the first operand after the
            // group that holds `c`
            let mut saw_c = false;
            for (i, a) in argv.iter().enumerate().skip(1) {
                if a.starts_with('-') && !a.starts_with("--") && a.len() > 1 {
                    saw_c |= a[1..].contains('c');
                    continue;
                }
                if a.starts_with("--") {
                    continue;
                }
                // the first operand: the script when -c came before it
                return if saw_c && i == pos {
                    ShellUse::Shell
                } else {
                    ShellUse::ExecArg
                };
            }
        }
        return ShellUse::ExecArg;
    }
    if path.last().is_some_and(|k| k == "script") {
        return ShellUse::Shell;
    }
    if s.contains('\n') && s.trim_start().starts_with("#!") {
        return ShellUse::Shell;
    }
    let kind = obj["kind"].as_str().unwrap_or("");
    if (kind == "ConfigMap" || kind == "Secret")
        && n == 2
        && (path[0] == "data" || path[0] == "stringData")
        && [".sh", ".bash", ".zsh", ".ksh"]
            .iter()
            .any(|x| path[1].ends_with(x))
    {
        return ShellUse::Shell;
    }
    ShellUse::Other
}

/// Repository-relative directory of a unit for messages.
pub fn unit_dir(u: &Unit) -> String {
    render::display_dir(&u.dir)
}
