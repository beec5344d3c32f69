//! The resource registry: built-in kinds and CustomResourceDefinitions, as served by discovery.
//!
//! Built-in names, shortNames, categories, verbs and subresources are those of kube-apiserver
//! v1.33 (`kubectl api-resources` on a real cluster; k8s.io/kubernetes pkg/registry/*/rest.go
//! `ShortNames()`/`Categories()`). CRDs are read from `apiextensions.k8s.io/v1`
//! CustomResourceDefinition objects (spec.group, spec.names, spec.scope, spec.versions[].served,
//! storage, subresources, additionalPrinterColumns, deprecationWarning).

use serde_json::Value;
use std::collections::BTreeMap;

use crate::error::StatusError;

/// One resource (plural) at one served version, with the registry metadata callers need:
/// `kind` and whether it is `namespaced`. Equality is by all fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Gvr {
    /// API group, `""` for core.
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Plural resource name, e.g. `kustomizations`.
    pub resource: String,
    /// Kind, e.g. `Kustomization`.
    pub kind: String,
    /// Namespaced (true) or cluster-scoped (false).
    pub namespaced: bool,
}

impl Gvr {
    /// `group/version`, or `version` for the core group (the objects' `apiVersion`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// `resource.group` (or `resource` for core), as used in error messages.
    pub fn qualified_resource(&self) -> String {
        crate::error::qualified(&self.group, &self.resource)
    }
}

/// One `additionalPrinterColumns` entry (or a built-in table column).
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Column header, e.g. `Ready`.
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean`, `date`.
    pub type_: String,
    /// OpenAPI format (e.g. `name`), may be empty.
    pub format: String,
    /// Description shown by `kubectl explain`-like tools.
    pub description: String,
    /// 0 = always shown, >0 = only with `-o wide`.
    pub priority: i64,
    /// Simple JSONPath relative to the object, e.g. `.status.conditions[?(@.type=="Ready")].status`.
    pub json_path: String,
}

/// Everything the twin knows about a resource type.
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    /// API group (`""` for core).
    pub group: String,
    /// Served versions, preferred first (kube-aware version priority).
    pub versions: Vec<String>,
    /// The storage version (objects are stored with this apiVersion).
    pub storage_version: String,
    /// Plural name.
    pub resource: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// List kind, e.g. `KustomizationList`.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names, e.g. `ks`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`, `fluxcd`.
    pub categories: Vec<String>,
    /// Verbs on the main resource.
    pub verbs: Vec<String>,
    /// Subresources served: `status`, `log`, `ephemeralcontainers`, `scale`.
    pub subresources: Vec<String>,
    /// Printer columns per version (CRDs; empty for built-ins, which use table.rs).
    pub printer_columns: BTreeMap<String, Vec<PrinterColumn>>,
    /// Deprecation warnings per version (sent as `Warning: 299` headers).
    pub deprecation_warnings: BTreeMap<String, String>,
    /// Built-in (true) or from a CRD (false).
    pub builtin: bool,
    /// `metadata.generation` is maintained (CRDs and workload kinds).
    pub tracks_generation: bool,
}

impl ResourceInfo {
    /// Has a `status` subresource (spec/status split on update).
    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }
    /// The Gvr at `version`.
    pub fn gvr(&self, version: &str) -> Gvr {
        Gvr {
            group: self.group.clone(),
            version: version.to_string(),
            resource: self.resource.clone(),
            kind: self.kind.clone(),
            namespaced: self.namespaced,
        }
    }
    /// The Gvr at the preferred version.
    pub fn preferred(&self) -> Gvr {
        self.gvr(&self.versions[0])
    }
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    resource: &str,
    singular: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    cats: &[&str],
    subs: &[&str],
    generation: bool,
) -> ResourceInfo {
    ResourceInfo {
        group: group.into(),
        versions: vec!["v1".into()],
        storage_version: "v1".into(),
        resource: resource.into(),
        singular: singular.into(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: s(short),
        categories: s(cats),
        verbs: s(ALL_VERBS),
        subresources: s(subs),
        printer_columns: BTreeMap::new(),
        deprecation_warnings: BTreeMap::new(),
        builtin: true,
        tracks_generation: generation,
    }
}

/// The built-in kinds the twin serves (all at v1).
pub fn builtins() -> Vec<ResourceInfo> {
    let mut v = vec![
        builtin(
            "",
            "namespaces",
            "namespace",
            "Namespace",
            false,
            &["ns"],
            &[],
            &["status"],
            false,
        ),
        builtin(
            "",
            "pods",
            "pod",
            "Pod",
            true,
            &["po"],
            &["all"],
            &["status", "log", "ephemeralcontainers"],
            false,
        ),
        builtin(
            "",
            "configmaps",
            "configmap",
            "ConfigMap",
            true,
            &["cm"],
            &[],
            &[],
            false,
        ),
        builtin(
            "",
            "secrets",
            "secret",
            "Secret",
            true,
            &[],
            &[],
            &[],
            false,
        ),
        builtin(
            "",
            "services",
            "service",
            "Service",
            true,
            &["svc"],
            &["all"],
            &["status"],
            false,
        ),
        builtin(
            "",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            &[],
            &[],
            false,
        ),
        builtin(
            "",
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            true,
            &["sa"],
            &[],
            &[],
            false,
        ),
        builtin(
            "",
            "nodes",
            "node",
            "Node",
            false,
            &["no"],
            &[],
            &["status"],
            false,
        ),
        builtin(
            "apps",
            "deployments",
            "deployment",
            "Deployment",
            true,
            &["deploy"],
            &["all"],
            &["status", "scale"],
            true,
        ),
        builtin(
            "apps",
            "replicasets",
            "replicaset",
            "ReplicaSet",
            true,
            &["rs"],
            &["all"],
            &["status", "scale"],
            true,
        ),
        builtin(
            "apps",
            "statefulsets",
            "statefulset",
            "StatefulSet",
            true,
            &["sts"],
            &["all"],
            &["status", "scale"],
            true,
        ),
        builtin(
            "apps",
            "daemonsets",
            "daemonset",
            "DaemonSet",
            true,
            &["ds"],
            &["all"],
            &["status"],
            true,
        ),
        builtin(
            "batch",
            "jobs",
            "job",
            "Job",
            true,
            &[],
            &["all"],
            &["status"],
            true,
        ),
        builtin(
            "batch",
            "cronjobs",
            "cronjob",
            "CronJob",
            true,
            &["cj"],
            &["all"],
            &["status"],
            true,
        ),
        builtin(
            "networking.k8s.io",
            "ingresses",
            "ingress",
            "Ingress",
            true,
            &["ing"],
            &[],
            &["status"],
            true,
        ),
        builtin(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            &["api-extensions"],
            &["status"],
            true,
        ),
    ];
    let mut ssar = builtin(
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
        &[],
        &[],
        &[],
        false,
    );
    ssar.verbs = vec!["create".into()];
    v.push(ssar);
    // Namespaces cannot be deletecollection'ed (pkg/registry/core/namespace/storage).
    v[0].verbs.retain(|x| x != "deletecollection");
    v
}

static KUBE_VERSION: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"^v(\d+)(?:(alpha|beta)(\d+))?$").unwrap());

/// Kube-aware version priority (apimachinery/pkg/version/helpers.go CompareKubeAwareVersionStrings):
/// GA > beta > alpha, higher major/minor first; non-kube-like versions last, alphabetical.
pub fn version_sort_key(v: &str) -> (u8, i64, i64, String) {
    if let Some(c) = KUBE_VERSION.captures(v) {
        let major: i64 = c[1].parse().unwrap_or(0);
        let (stage, minor) = match c.get(2).map(|m| m.as_str()) {
            None => (0u8, 0i64),
            Some("beta") => (1, c[3].parse().unwrap_or(0)),
            _ => (2, c[3].parse().unwrap_or(0)),
        };
        (stage, -major, -minor, String::new())
    } else {
        (3, 0, 0, v.to_string())
    }
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a CustomResourceDefinition object (apiextensions.k8s.io/v1) into a [`ResourceInfo`].
///
/// Errors (422 Invalid on `CustomResourceDefinition.apiextensions.k8s.io`) when the name is not
/// `<plural>.<group>`, names are missing, or no version is served/storage (the checks of
/// apiextensions-apiserver pkg/apis/apiextensions/validation/validation.go that matter here).
pub fn crd_to_info(crd: &Value) -> Result<ResourceInfo, StatusError> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let inv = |field: &str, msg: &str| {
        StatusError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            &[(field, "FieldValueInvalid", msg)],
        )
    };
    let spec = crd
        .get("spec")
        .ok_or_else(|| inv("spec", "Required value"))?;
    let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
    let names = spec.get("names").cloned().unwrap_or(Value::Null);
    let plural = names.get("plural").and_then(Value::as_str).unwrap_or("");
    let kind = names.get("kind").and_then(Value::as_str).unwrap_or("");
    if group.is_empty() {
        return Err(inv("spec.group", "Required value"));
    }
    if plural.is_empty() {
        return Err(inv("spec.names.plural", "Required value"));
    }
    if kind.is_empty() {
        return Err(inv("spec.names.kind", "Required value"));
    }
    if name != format!("{plural}.{group}") {
        return Err(inv(
            "metadata.name",
            &format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .unwrap_or("Namespaced");
    let mut versions = Vec::new();
    let mut storage = String::new();
    let mut cols = BTreeMap::new();
    let mut warnings = BTreeMap::new();
    let mut has_status = false;
    for v in spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        let vname = v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage = vname.clone();
        }
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        if v.pointer("/subresources/status").is_some() {
            has_status = true;
        }
        if let Some(w) = v.get("deprecationWarning").and_then(Value::as_str) {
            warnings.insert(vname.clone(), w.to_string());
        } else if v.get("deprecated").and_then(Value::as_bool) == Some(true) {
            // apiextensions-apiserver: default warning `<group>/<version> <Kind> is deprecated`
            warnings.insert(
                vname.clone(),
                format!("{group}/{vname} {kind} is deprecated"),
            );
        }
        let mut pcs: Vec<PrinterColumn> = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|c| PrinterColumn {
                        name: c
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        type_: c
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("string")
                            .to_string(),
                        format: c
                            .get("format")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        description: c
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: c
                            .get("jsonPath")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if pcs.is_empty() {
            // apiextensions defaulting: a version without columns gets Age.
            pcs.push(PrinterColumn {
                name: "Age".into(),
                type_: "date".into(),
                format: String::new(),
                description: String::new(),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
            });
        }
        cols.insert(vname.clone(), pcs);
        versions.push(vname);
    }
    if versions.is_empty() {
        return Err(inv(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
    }
    if storage.is_empty() {
        return Err(inv(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    }
    versions.sort_by_key(|v| version_sort_key(v));
    let mut subs = Vec::new();
    if has_status {
        subs.push("status".to_string());
    }
    Ok(ResourceInfo {
        group: group.into(),
        versions,
        storage_version: storage,
        resource: plural.into(),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase()),
        kind: kind.into(),
        list_kind: names
            .get("listKind")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{kind}List")),
        namespaced: scope == "Namespaced",
        short_names: str_list(names.get("shortNames").unwrap_or(&Value::Null)),
        categories: str_list(names.get("categories").unwrap_or(&Value::Null)),
        verbs: s(ALL_VERBS),
        subresources: subs,
        printer_columns: cols,
        deprecation_warnings: warnings,
        builtin: false,
        tracks_generation: true,
    })
}

/// The set of served resource types.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    /// All types, built-ins first, CRDs in registration order.
    pub infos: Vec<ResourceInfo>,
}

impl Registry {
    /// Built-ins only.
    pub fn new() -> Self {
        Registry { infos: builtins() }
    }
    /// Looks up by group and plural resource (any version).
    pub fn by_resource(&self, group: &str, resource: &str) -> Option<&ResourceInfo> {
        self.infos
            .iter()
            .find(|i| i.group == group && i.resource == resource)
    }
    /// Looks up by group, served version and plural resource.
    pub fn find(&self, group: &str, version: &str, resource: &str) -> Option<&ResourceInfo> {
        self.by_resource(group, resource)
            .filter(|i| i.versions.iter().any(|v| v == version))
    }
    /// Looks up by `apiVersion` and `kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Gvr> {
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        self.infos
            .iter()
            .find(|i| i.group == group && i.kind == kind && i.versions.iter().any(|v| v == version))
            .map(|i| i.gvr(version))
    }
    /// Adds or replaces (same group + resource) a type.
    pub fn upsert(&mut self, info: ResourceInfo) {
        if let Some(slot) = self
            .infos
            .iter_mut()
            .find(|i| i.group == info.group && i.resource == info.resource)
        {
            *slot = info;
        } else {
            self.infos.push(info);
        }
    }
    /// Removes a CRD-defined type.
    pub fn remove(&mut self, group: &str, resource: &str) {
        self.infos
            .retain(|i| i.builtin || !(i.group == group && i.resource == resource));
    }
    /// Groups in discovery order (core excluded), each with its versions, preferred first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for i in &self.infos {
            if i.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(g, _)| *g == i.group) {
                Some((_, vs)) => {
                    for v in &i.versions {
                        if !vs.contains(v) {
                            vs.push(v.clone());
                        }
                    }
                    vs.sort_by_key(|v| version_sort_key(v));
                }
                None => out.push((i.group.clone(), i.versions.clone())),
            }
        }
        out
    }
}
