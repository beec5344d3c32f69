//! Typed Flux API objects for the fields the suite uses, tolerant of everything else.
//!
//! Every struct uses `#[serde(default)]` and ignores unknown fields, so objects from newer or
//! older controllers (and half-written test fixtures) still parse. Durations stay Go duration
//! strings (`10m`, `1h30m`); use the helpers (e.g. [`Kustomization::effective_timeout`]) or
//! [`crate::duration`] to read them.
//!
//! Each top-level type implements [`kube::Resource`] for its typed version, so
//! `kube::Api::<Kustomization>::namespaced(client, ns)` works.
//!
//! # Older served versions
//!
//! The typed `Resource` impls point at `v1` (Kustomization since kustomize-controller v1.0 /
//! Flux 2.0; GitRepository since source-controller v1.0; OCIRepository since Flux 2.6;
//! image.toolkit.fluxcd.io since image-reflector/automation v1.0 / Flux 2.7). On an older
//! cluster that only serves e.g. `kustomize.toolkit.fluxcd.io/v1beta2`, a typed request
//! answers 404, which [`crate::error::Error::from_kube`] turns into "Flux CRD not installed or
//! API version not served". To support such clusters, call [`served_version`] and, when it
//! returns an older version, use `Api<DynamicObject>` with
//! [`crate::refs::Kind::api_resource`] for that version and convert with [`from_dynamic`]:
//! the tolerant types read v1beta2 objects (the fields used here have the same names and
//! shapes there, except `dependsOn`, which is the same list of `{name, namespace}`).

use crate::conditions::{self, Condition};
use crate::duration::{GoDuration, ParseDurationError};
use crate::error::{ApiContext, Error, KubeResultExt, Result};
use crate::refs::Kind;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

pub use crate::duration::{format_go_duration, parse_go_duration};

/// API group of Kustomization.
pub const KUSTOMIZE_GROUP: &str = "kustomize.toolkit.fluxcd.io";
/// API group of GitRepository, OCIRepository, HelmRepository, Bucket.
pub const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";
/// API group of ImagePolicy, ImageRepository, ImageUpdateAutomation.
pub const IMAGE_GROUP: &str = "image.toolkit.fluxcd.io";
/// Annotation that asks a Flux controller to reconcile now (value: any new string; the flux
/// CLI writes RFC 3339 nano time). fluxcd/pkg apis/meta `ReconcileRequestAnnotation`.
pub const RECONCILE_REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";

/// Implements `kube::Resource` for a namespaced type with `metadata: ObjectMeta`.
macro_rules! flux_resource {
    ($ty:ty, $kind:literal, $group:expr, $version:literal, $plural:literal) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl FluxObject for $ty {
            fn conditions(&self) -> &[Condition] {
                &self.status.conditions
            }
            fn observed_generation(&self) -> Option<i64> {
                self.status.observed_generation
            }
            fn last_handled_reconcile_at(&self) -> Option<&str> {
                self.status.last_handled_reconcile_at.as_deref()
            }
            fn suspended(&self) -> bool {
                self.spec.suspend
            }
        }
    };
}

/// What every Flux object with the usual status shape offers.
pub trait FluxObject: kube::Resource<DynamicType = ()> {
    /// `.status.conditions` (empty when absent).
    fn conditions(&self) -> &[Condition];
    /// `.status.observedGeneration` (`None` when absent; the CRDs default it to -1).
    fn observed_generation(&self) -> Option<i64>;
    /// `.status.lastHandledReconcileAt`: the last `reconcile.fluxcd.io/requestedAt` value the
    /// controller handled (fluxcd/pkg apis/meta `ReconcileRequestStatus`).
    fn last_handled_reconcile_at(&self) -> Option<&str>;
    /// `.spec.suspend`.
    fn suspended(&self) -> bool;

    /// The `Ready` condition, if any.
    fn ready(&self) -> Option<&Condition> {
        conditions::find(self.conditions(), conditions::READY)
    }

    /// The condition of type `t`, if any.
    fn condition(&self, t: &str) -> Option<&Condition> {
        conditions::find(self.conditions(), t)
    }

    /// `.metadata.annotations["reconcile.fluxcd.io/requestedAt"]`.
    fn requested_at(&self) -> Option<&str> {
        self.meta()
            .annotations
            .as_ref()?
            .get(RECONCILE_REQUESTED_AT)
            .map(String::as_str)
    }

    /// True when the controller has seen the current spec: `status.observedGeneration ==
    /// metadata.generation` (kstatus rule; objects without a generation count as observed).
    fn generation_observed(&self) -> bool {
        match self.meta().generation {
            Some(g) => self.observed_generation() == Some(g),
            None => true,
        }
    }
}

/// A reference to a namespaced object by name (`{name, namespace}`); fluxcd/pkg apis/meta
/// `NamespacedObjectReference` and kustomize-controller api/v1 `DependencyReference`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NamespacedRef {
    /// Name.
    pub name: String,
    /// Namespace; `None` means the referring object's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A typed reference `{apiVersion?, kind, name, namespace?}` (sourceRef, healthChecks).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectKindRef {
    /// `apiVersion`, optional in sourceRef.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind, e.g. `GitRepository`, `Deployment`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace; `None` means the referring object's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `{name}` reference to an object in the same namespace (secretRef).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalRef {
    /// Name.
    pub name: String,
}

/// A source artifact (source-controller api/v1 `meta.Artifact`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Artifact {
    /// Revision, e.g. `main@sha1:<40 hex>`, `v1.2.3@sha1:...`, `sha1:...`.
    pub revision: String,
    /// Digest of the tarball, e.g. `sha256:<hex>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// RFC 3339 time the artifact was produced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<String>,
    /// In-cluster URL of the artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

// ---------------------------------------------------------------- Kustomization

/// kustomize.toolkit.fluxcd.io/v1 Kustomization (kustomize-controller api/v1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Kustomization {
    /// `apiVersion` as received (absent on objects built in code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: KustomizationSpec,
    /// Status (defaulted when absent).
    pub status: KustomizationStatus,
}
flux_resource!(
    Kustomization,
    "Kustomization",
    KUSTOMIZE_GROUP,
    "v1",
    "kustomizations"
);

/// Kustomization `.spec` (fields the suite reads).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KustomizationSpec {
    /// Reconcile interval, Go duration (`10m`). Required by the CRD.
    pub interval: String,
    /// Timeout for apply and health checks, Go duration; see [`Kustomization::effective_timeout`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Retry interval after a failure, Go duration; defaults to `interval`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<String>,
    /// Path in the source (defaults to the root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Garbage collection.
    pub prune: bool,
    /// Health-check every applied object (makes `healthChecks` ignored).
    pub wait: bool,
    /// Objects to health-check.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<ObjectKindRef>,
    /// Kustomizations that must be Ready first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<NamespacedRef>,
    /// The source (GitRepository, OCIRepository, Bucket).
    pub source_ref: ObjectKindRef,
    /// Suspended: the controller starts no new runs (a run in flight continues).
    pub suspend: bool,
    /// Post-build variable substitution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_build: Option<PostBuild>,
    /// Recreate objects whose immutable fields changed.
    pub force: bool,
    /// Namespace override for all objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_namespace: Option<String>,
    /// ServiceAccount to impersonate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// `.spec.postBuild`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PostBuild {
    /// Inline variables.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub substitute: BTreeMap<String, String>,
    /// ConfigMaps / Secrets with variables.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub substitute_from: Vec<SubstituteReference>,
}

/// `.spec.postBuild.substituteFrom[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubstituteReference {
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    /// Name, in the Kustomization's namespace.
    pub name: String,
    /// Tolerate absence.
    pub optional: bool,
}

/// Kustomization `.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KustomizationStatus {
    /// Last reconciled generation (CRD default -1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions: Ready, Reconciling, Healthy, Stalled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Last successfully applied source revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// Origin revision of the last applied artifact (e.g. OCI `org.opencontainers.image.revision`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_origin_revision: Option<String>,
    /// Revision of the last attempt (set after the fetch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// Last handled `reconcile.fluxcd.io/requestedAt` value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    /// Applied objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<Inventory>,
}

/// `.status.inventory`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Inventory {
    /// Entries.
    pub entries: Vec<InventoryEntry>,
}

/// `.status.inventory.entries[]`: `id` is `<namespace>_<name>_<group>_<Kind>`, `v` the version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct InventoryEntry {
    /// Object id, see [`ObjMetadata::parse`].
    pub id: String,
    /// API version (`v1`).
    pub v: String,
}

/// One object identity from an inventory id (cli-utils `object.ObjMetadata`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjMetadata {
    /// Namespace, `""` for cluster-scoped.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// API group, `""` for core.
    pub group: String,
    /// Kind.
    pub kind: String,
}

impl ObjMetadata {
    /// Parse `<namespace>_<name>_<group>_<Kind>` exactly like cli-utils
    /// `pkg/object/objmetadata.go` `ParseObjMetadata`: namespace up to the first `_`, kind
    /// after the last, group after the next-to-last; `__` in the name means `:` (RBAC names);
    /// a remaining `_` in the name is an error. Errors: [`Error::Cluster`] naming the id.
    pub fn parse(id: &str) -> Result<ObjMetadata> {
        let bad = |why: &str| Error::Cluster(format!("invalid inventory id {id:?}: {why}"));
        let (namespace, rest) = id.split_once('_').ok_or_else(|| bad("no '_'"))?;
        let (rest, kind) = rest.rsplit_once('_').ok_or_else(|| bad("missing kind"))?;
        let (name, group) = rest.rsplit_once('_').ok_or_else(|| bad("missing group"))?;
        let name = name.replace("__", ":");
        if name.contains('_') {
            return Err(bad("too many fields"));
        }
        if name.is_empty() || kind.is_empty() {
            return Err(bad("empty name or kind"));
        }
        Ok(ObjMetadata {
            namespace: namespace.to_string(),
            name,
            group: group.to_string(),
            kind: kind.to_string(),
        })
    }
}

impl std::fmt::Display for ObjMetadata {
    /// Flux's notation: `Deployment/apps/podinfo` (`Namespace/podinfo` when cluster-scoped).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

impl Kustomization {
    /// The timeout the controller uses for apply and health checks.
    ///
    /// kustomize-controller api/v1 `GetTimeout` (v1.0 through v1.9): `spec.timeout` if set,
    /// else `spec.interval - 30s`; either way at least 30s. So a 10m interval gives 9m30s,
    /// and `timeout: 10s` gives 30s. A missing interval counts as 0 (Go zero value).
    /// Errors: an unparsable `timeout` or `interval`.
    pub fn effective_timeout(
        &self,
    ) -> std::result::Result<std::time::Duration, ParseDurationError> {
        const FLOOR: GoDuration = GoDuration::from_secs(30);
        let d = match &self.spec.timeout {
            Some(t) => t.parse::<GoDuration>()?,
            None => {
                let interval = if self.spec.interval.is_empty() {
                    GoDuration::ZERO
                } else {
                    self.spec.interval.parse::<GoDuration>()?
                };
                GoDuration(interval.0.saturating_sub(FLOOR.0))
            }
        };
        Ok(d.max(FLOOR).to_std().unwrap_or_default())
    }

    /// [`Kustomization::effective_timeout`] of a raw Kustomization object (a
    /// `serde_json::Value` from a dynamic list, a watch event or a fixture), read in place
    /// without a copy. `None` when the object does not read as a Kustomization (a field of the
    /// wrong JSON type, e.g. a numeric `spec.interval`) or its `spec.timeout` or
    /// `spec.interval` is not a Go duration.
    pub fn effective_timeout_of(ks: &serde_json::Value) -> Option<std::time::Duration> {
        Kustomization::deserialize(ks)
            .ok()?
            .effective_timeout()
            .ok()
    }

    /// `spec.interval` parsed. Errors: invalid Go duration (or empty).
    pub fn interval(&self) -> std::result::Result<std::time::Duration, ParseDurationError> {
        parse_go_duration(&self.spec.interval)
    }

    /// Inventory entries parsed; invalid ids are returned as errors in place.
    pub fn inventory(&self) -> Vec<Result<ObjMetadata>> {
        self.status
            .inventory
            .as_ref()
            .map(|inv| {
                inv.entries
                    .iter()
                    .map(|e| ObjMetadata::parse(&e.id))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `dependsOn` entries as `(namespace, name)`, the namespace defaulting to this object's
    /// (kustomize-controller: an empty dependency namespace means the Kustomization's own).
    pub fn dependencies(&self) -> Vec<(String, String)> {
        let own = self.metadata.namespace.clone().unwrap_or_default();
        self.spec
            .depends_on
            .iter()
            .map(|d| {
                (
                    d.namespace.clone().unwrap_or_else(|| own.clone()),
                    d.name.clone(),
                )
            })
            .collect()
    }

    /// True when health checks run: `spec.wait` or non-empty `spec.healthChecks`.
    pub fn runs_health_checks(&self) -> bool {
        self.spec.wait || !self.spec.health_checks.is_empty()
    }
}

// ---------------------------------------------------------------- sources

/// source.toolkit.fluxcd.io/v1 GitRepository (source-controller api/v1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GitRepository {
    /// `apiVersion` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: GitRepositorySpec,
    /// Status.
    pub status: SourceStatus,
}
flux_resource!(
    GitRepository,
    "GitRepository",
    SOURCE_GROUP,
    "v1",
    "gitrepositories"
);

/// GitRepository `.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GitRepositorySpec {
    /// Repository URL (`http(s)://` or `ssh://`).
    pub url: String,
    /// What to check out; see [`GitRef`].
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<GitRef>,
    /// Secret with credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalRef>,
    /// Fetch interval, Go duration.
    pub interval: String,
    /// Git operation timeout, Go duration (CRD default `60s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Suspended.
    pub suspend: bool,
    /// Auth provider (`generic`, `azure`, `github`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// GitRepository `.spec.ref`; precedence (source-controller api/v1): commit > name > semver >
/// tag > branch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GitRef {
    /// Branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// SemVer range over tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// Full reference name (`refs/heads/main`, `refs/pull/1/head`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Commit SHA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// `.status` of GitRepository and OCIRepository.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SourceStatus {
    /// Last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions: Ready, Reconciling, ArtifactInStorage, FetchFailed, Stalled...
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Current artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// Last handled `reconcile.fluxcd.io/requestedAt` value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
}

/// source.toolkit.fluxcd.io/v1 OCIRepository.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OCIRepository {
    /// `apiVersion` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: OCIRepositorySpec,
    /// Status.
    pub status: SourceStatus,
}
flux_resource!(
    OCIRepository,
    "OCIRepository",
    SOURCE_GROUP,
    "v1",
    "ocirepositories"
);

/// OCIRepository `.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OCIRepositorySpec {
    /// `oci://` URL.
    pub url: String,
    /// Tag / semver / digest selection.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<OCIRef>,
    /// Pull secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalRef>,
    /// Interval, Go duration.
    pub interval: String,
    /// Timeout, Go duration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Suspended.
    pub suspend: bool,
    /// Plain HTTP registry.
    pub insecure: bool,
}

/// OCIRepository `.spec.ref`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OCIRef {
    /// Digest (`sha256:...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// SemVer range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// Tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

// ---------------------------------------------------------------- image automation

/// `.status` common to the image automation objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageStatus {
    /// Last reconciled generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Last handled `reconcile.fluxcd.io/requestedAt` value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    /// ImagePolicy: the selected image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest_ref: Option<ImageRef>,
    /// ImagePolicy: the previously selected image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_previous_ref: Option<ImageRef>,
    /// ImageRepository: image name after normalisation (`docker.io/library/nginx`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical_image_name: Option<String>,
    /// ImageRepository: last scan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_scan_result: Option<serde_json::Value>,
    /// ImageUpdateAutomation: RFC 3339 time of the last run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_automation_run_time: Option<String>,
    /// ImageUpdateAutomation: last pushed commit SHA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_push_commit: Option<String>,
    /// ImageUpdateAutomation: RFC 3339 time of the last push.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_push_time: Option<String>,
    /// ImageUpdateAutomation: `policy name -> ImageRef` observed in the last run.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub observed_policies: BTreeMap<String, ImageRef>,
}

/// An image reference as image-reflector-controller v1 stores it: `name` (ImageRepository
/// `spec.image`, verbatim), `tag`, optional `digest`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImageRef {
    /// Image name without tag (`registry:5000/app`).
    pub name: String,
    /// Tag.
    pub tag: String,
    /// Digest (`sha256:...`) when the policy has `digestReflectionPolicy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

impl ImageRef {
    /// What the plain setter `ns:policy` writes: `name:tag`, plus `@digest` when present
    /// (image-automation-controller internal/policy setters).
    pub fn full(&self) -> String {
        match &self.digest {
            Some(d) if !d.is_empty() => format!("{}:{}@{}", self.name, self.tag, d),
            _ => format!("{}:{}", self.name, self.tag),
        }
    }
}

/// image.toolkit.fluxcd.io/v1 ImagePolicy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImagePolicy {
    /// `apiVersion` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: ImagePolicySpec,
    /// Status (`latestRef`).
    pub status: ImageStatus,
}
flux_resource!(
    ImagePolicy,
    "ImagePolicy",
    IMAGE_GROUP,
    "v1",
    "imagepolicies"
);

/// ImagePolicy `.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImagePolicySpec {
    /// The ImageRepository to select from.
    pub image_repository_ref: NamespacedRef,
    /// Policy (`semver`, `alphabetical`, `numerical`), kept raw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<serde_json::Value>,
    /// Tag filter, kept raw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_tags: Option<serde_json::Value>,
    /// ImagePolicy has no `spec.suspend`; always false (present for [`FluxObject`]).
    #[serde(skip)]
    pub suspend: bool,
}

/// image.toolkit.fluxcd.io/v1 ImageRepository.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageRepository {
    /// `apiVersion` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: ImageRepositorySpec,
    /// Status.
    pub status: ImageStatus,
}
flux_resource!(
    ImageRepository,
    "ImageRepository",
    IMAGE_GROUP,
    "v1",
    "imagerepositories"
);

/// ImageRepository `.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageRepositorySpec {
    /// Image name without tag (rejected with a tag since image-reflector-controller v0.35).
    pub image: String,
    /// Scan interval, Go duration.
    pub interval: String,
    /// Pull secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalRef>,
    /// Suspended.
    pub suspend: bool,
    /// Tag exclusion regexes (default `^.*\.sig$`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exclusion_list: Vec<String>,
}

/// image.toolkit.fluxcd.io/v1 ImageUpdateAutomation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageUpdateAutomation {
    /// `apiVersion` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `kind` as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: ImageUpdateAutomationSpec,
    /// Status.
    pub status: ImageStatus,
}
flux_resource!(
    ImageUpdateAutomation,
    "ImageUpdateAutomation",
    IMAGE_GROUP,
    "v1",
    "imageupdateautomations"
);

/// ImageUpdateAutomation `.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageUpdateAutomationSpec {
    /// The GitRepository to update.
    pub source_ref: ObjectKindRef,
    /// Git checkout/commit/push settings, kept raw (`checkout.ref`, `commit.messageTemplate`,
    /// `push.branch`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<serde_json::Value>,
    /// Run interval, Go duration.
    pub interval: String,
    /// Which files to update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateStrategy>,
    /// Label selector on ImagePolicies (in the automation's namespace), kept raw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_selector: Option<serde_json::Value>,
    /// Suspended.
    pub suspend: bool,
}

/// ImageUpdateAutomation `.spec.update`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UpdateStrategy {
    /// Path in the repository to walk (default: the root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Strategy; only `Setters` exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
}

/// Convert a [`kube::api::DynamicObject`] (e.g. read at an older served version) into a
/// typed Flux object through JSON. Errors: [`Error::Cluster`] naming the object when the
/// shape is incompatible.
pub fn from_dynamic<K: serde::de::DeserializeOwned>(obj: &kube::api::DynamicObject) -> Result<K> {
    let v = serde_json::to_value(obj).map_err(|e| Error::Other(e.to_string()))?;
    serde_json::from_value(v).map_err(|e| {
        Error::Cluster(format!(
            "cannot read {}/{}: {e}",
            obj.metadata.namespace.as_deref().unwrap_or(""),
            obj.metadata.name.as_deref().unwrap_or("")
        ))
    })
}

/// Which version of `kind` the server serves: the typed version if served, else the newest
/// served of [`crate::refs::KindInfo::older_versions`]; `None` when none is served (CRD not
/// installed). Uses the discovery endpoint `/apis` (one request).
pub async fn served_version(
    client: &kube::Client,
    server: &str,
    kind: Kind,
) -> Result<Option<String>> {
    let info = kind.info();
    if info.group.is_empty() {
        return Ok(Some(info.version.to_string()));
    }
    let groups = client.list_api_groups().await.api_context(|| {
        ApiContext::new(server)
            .verb("get")
            .resource("", "apis (discovery)")
    })?;
    let Some(g) = groups.groups.iter().find(|g| g.name == info.group) else {
        return Ok(None);
    };
    let served: Vec<&str> = g.versions.iter().map(|v| v.version.as_str()).collect();
    Ok(std::iter::once(info.version)
        .chain(info.older_versions.iter().copied())
        .find(|v| served.contains(v))
        .map(str::to_string))
}

/// Why a controller Deployment (apps/v1, as JSON) runs no controller, or `None` when it does
/// (or its status is not known yet). Kubernetes omits zero counts from a Deployment's status
/// (apps/v1 DeploymentStatus fields are `omitempty`), so an absent `status.readyReplicas` is 0
/// once the deployment controller has written the status (`status.observedGeneration`
/// present):
/// - `spec.replicas: 0` (`kubectl scale --replicas=0`, a freeze by hand or by a script):
///   `0 replicas`;
/// - replicas wanted but none Ready (`status.readyReplicas` 0 or absent in an observed
///   status: crash loop, image pull failure, pod deleted and not back yet):
///   `no ready pod, 0 of N ready`.
///
/// A Deployment with no status yet (just created, or a hand-written fixture) is not judged.
/// Shared by `kubectl unstick` (a stopped controller is a root cause) and `kubectl cutover`
/// (`--finish` names it when nothing settles).
pub fn deployment_not_running(d: &serde_json::Value) -> Option<String> {
    let int = |path: &str| d.pointer(path).and_then(serde_json::Value::as_i64);
    let replicas = int("/spec/replicas").unwrap_or(1);
    if replicas == 0 {
        return Some("0 replicas".into());
    }
    int("/status/observedGeneration")?;
    let ready = int("/status/readyReplicas").unwrap_or(0);
    (ready == 0).then(|| format!("no ready pod, 0 of {replicas} ready"))
}

/// The consequence of a stopped helm-controller.
pub const HELM_CONSEQUENCE: &str = "nothing reconciles HelmReleases";

/// A Flux controller Deployment that is not running
/// ([`deployment_not_running`]: `spec.replicas` 0, or observed status with
/// no ready pod). JSON: `{"controller": "source-controller", "namespace": "flux-system",
/// "why": "0 replicas", "consequence": "nothing fetches", "command": "kubectl -n flux-system
/// scale deployment/source-controller --replicas=1"}`. The one shape of `stoppedControllers`
/// in unstick's diagnosis, cutover's `--finish` report (its `command` is cutover's start
/// command, `pod` and `leader` unset) and gitops verify's image links.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoppedController {
    /// The Deployment's name (`kustomize-controller`, `source-controller`).
    pub controller: String,
    /// The Deployment's namespace.
    pub namespace: String,
    /// `0 replicas` or `no ready pod, 0 of N ready`.
    pub why: String,
    /// `nothing reconciles` (kustomize-controller) or `nothing fetches` (source-controller).
    pub consequence: String,
    /// The lever, as a command to run: `kubectl -n NS scale deployment/NAME --replicas=1` at
    /// 0 replicas; for a pod that is not ready the command that shows why
    /// ([`PodTrouble::command`]: the ended run's log, `kubectl -n NS logs
    /// POD -c manager --previous`, for a crash loop); else `kubectl -n NS describe
    /// deployment/NAME`.
    pub command: String,
    /// The pod that says why it is not running, when its pods were read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodTrouble>,
    /// Its pod runs but does not lead ([`LeaderTrouble`]): `why` says so and
    /// `until`, when set, is a wait (the pod takes the Lease by then), not a finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderTrouble>,
}

impl StoppedController {
    /// A stopped controller `namespace/name` (a Deployment), `why` it is not running, what
    /// that stops (`consequence`) and the pod that says why, with the command of its lever.
    pub fn new(
        name: &str,
        namespace: &str,
        why: String,
        consequence: &str,
        pod: Option<PodTrouble>,
    ) -> StoppedController {
        let command = match &pod {
            _ if why == "0 replicas" => {
                format!("kubectl -n {namespace} scale deployment/{name} --replicas=1")
            }
            Some(p) => p.command(namespace),
            None => format!("kubectl -n {namespace} describe deployment/{name}"),
        };
        StoppedController {
            controller: name.to_string(),
            namespace: namespace.to_string(),
            why,
            consequence: consequence.to_string(),
            command,
            pod,
            leader: None,
        }
    }

    /// A controller Deployment `namespace/name` whose running pod does not lead
    /// (unstick's `leader::leader_trouble`): `why` is the trouble's sentence, the command
    /// shows the Lease (another holder) or the controller's log (no process takes it).
    pub fn not_leading(
        name: &str,
        namespace: &str,
        consequence: &str,
        t: LeaderTrouble,
    ) -> StoppedController {
        StoppedController {
            controller: name.to_string(),
            namespace: namespace.to_string(),
            why: t.why.clone(),
            consequence: consequence.to_string(),
            command: t.command(namespace, name),
            pod: None,
            leader: Some(t),
        }
    }

    /// Whether it only waits for its pod to take the Lease by a known time (the holder is
    /// gone or released it): not a finding.
    pub fn leader_wait(&self) -> bool {
        self.leader.as_ref().is_some_and(|l| l.until.is_some())
    }

    /// `source-controller is not running (0 replicas): nothing fetches`; for a pod that does
    /// not lead, its sentence (`kustomize-controller's pod P is not the leader: ...`) and the
    /// consequence.
    pub fn line(&self) -> String {
        match &self.leader {
            Some(l) if l.until.is_some() => {
                format!("{}; {} before then", self.why, self.consequence)
            }
            Some(_) => format!("{}; {}", self.why, self.consequence),
            None => format!(
                "{} is not running ({}): {}",
                self.controller, self.why, self.consequence
            ),
        }
    }

    /// What to do, as the plan's effect: `scale it up: kubectl ...; then ...`.
    pub fn effect(&self) -> String {
        if let Some(l) = &self.leader {
            return match l.until {
                Some(t) => format!(
                    "nothing to do: its pod takes the Lease by {} and its runs resume by themselves (the Lease: {})",
                    crate::duration::short_time(t),
                    self.command
                ),
                None if l.keeps_renewing => format!(
                    "find the other holder of Lease {}: {}; stop it (or give it another --watch-label-selector): this pod takes the Lease within a retry period after it stops renewing",
                    l.lease, self.command
                ),
                None => format!(
                    "read why its pod does not take Lease {}: {}",
                    l.lease, self.command
                ),
            };
        }
        if self.not_installed() {
            format!("install it: {}; then it reconciles them", self.command)
        } else if self.why == "0 replicas" {
            format!(
                "scale it up: {}; then its runs resume by themselves",
                self.command
            )
        } else if self
            .pod
            .as_ref()
            .is_some_and(|p| p.last_exit_code.is_some())
        {
            format!(
                "read why its process exits: {}; fix its Deployment (args, image, resources) and its runs resume once its pod is ready",
                self.command
            )
        } else {
            format!(
                "find why its pod is not ready: {}; its runs resume once it is",
                self.command
            )
        }
    }

    /// What to do about every controller of `stopped` (kustomize-controller first), as one
    /// effect: `scale kustomize-controller up: kubectl ...; scale source-controller up: kubectl
    /// ...; then its runs resume by themselves`; a single one reads as
    /// [`StoppedController::effect`].
    pub fn effect_of_all(stopped: &[StoppedController]) -> String {
        match stopped {
            [] => "start the controller named above".to_string(),
            [one] => one.effect(),
            all => format!(
                "{}; {}",
                all.iter()
                    .map(|s| {
                        if s.leader.is_some() {
                            s.effect()
                        } else if s.scaled_to_zero() {
                            format!("scale {} up: {}", s.controller, s.command)
                        } else if s.pod.as_ref().is_some_and(|p| p.last_exit_code.is_some()) {
                            format!("read why {}'s process exits: {}", s.controller, s.command)
                        } else {
                            format!(
                                "find why {}'s pod is not ready: {}",
                                s.controller, s.command
                            )
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
                if all.iter().all(StoppedController::scaled_to_zero) {
                    "then its runs resume by themselves"
                } else {
                    "its runs resume once they all run"
                }
            ),
        }
    }

    /// Whether it stays stopped until someone acts: scaled to 0 replicas (one with replicas
    /// but no ready pod yet, a restart, may come back by itself).
    pub fn scaled_to_zero(&self) -> bool {
        self.why == "0 replicas" || self.not_installed()
    }

    /// Whether it is helm-controller ([`HELM_CONSEQUENCE`]): kustomize-controller still runs
    /// and ends the health check at its deadline.
    pub fn only_helm(&self) -> bool {
        self.consequence == HELM_CONSEQUENCE
    }

    /// Whether its Deployment does not exist at all (`not installed (no Deployment NS/NAME)`).
    pub fn not_installed(&self) -> bool {
        self.why.starts_with("not installed")
    }
}

/// Why a controller's pod is not running, read from the pod status the kubelet writes
/// (k8s.io/kubernetes pkg/kubelet/kubelet_pods.go `convertToAPIContainerStatuses`): the
/// container's waiting reason (`CrashLoopBackOff`: the process exited and the kubelet holds
/// its restart in a back-off of 10 s doubling to 5 min, kuberuntime_manager.go `doBackOff`;
/// `ImagePullBackOff`, `ErrImagePull`, `CreateContainerConfigError`, ...), its restart count
/// and its last exit (`lastState.terminated`, or `state.terminated` when it is not restarted).
/// JSON: `{"pod": "kustomize-controller-7d9c5-x2b4q", "container": "manager", "reason":
/// "CrashLoopBackOff", "message": "back-off 20s restarting failed container=manager pod=...",
/// "restarts": 2, "lastExitCode": 1, "lastExitReason": "Error", "lastLogLines": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTrouble {
    /// The pod's name (in the Deployment's namespace).
    pub pod: String,
    /// The container that is not ready (`manager` in a Flux install).
    pub container: String,
    /// `state.waiting.reason`, `Terminated` (not restarted), or `NotReady` (running but not
    /// ready: its readiness probe fails).
    pub reason: String,
    /// `state.waiting.message`, when the kubelet wrote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `restartCount`.
    pub restarts: i64,
    /// Exit code of the last run that ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_code: Option<i64>,
    /// The runtime's reason for that exit (`Error`, `Completed`, `OOMKilled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit_reason: Option<String>,
    /// When that run ended (RFC 3339, as the kubelet wrote it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_finished_at: Option<String>,
    /// The last lines of that run's log (`pods/log?previous=true`), when they could be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub last_log_lines: Vec<String>,
}

impl PodTrouble {
    /// `pod kustomize-controller-7d9c5-x2b4q CrashLoopBackOff, 2 restarts, last exit code 1
    /// Error`: the part of the not-running reason that names the pod.
    pub fn describe(&self) -> String {
        let mut o = format!("pod {} {}", self.pod, self.reason);
        if self.restarts > 0 {
            let s = if self.restarts == 1 { "" } else { "s" };
            o.push_str(&format!(", {} restart{s}", self.restarts));
        }
        if let Some(code) = self.last_exit_code {
            o.push_str(&format!(", last exit code {code}"));
            if let Some(r) = &self.last_exit_reason {
                o.push_str(&format!(" {r}"));
            }
        }
        o
    }

    /// The ended run's last log lines, indented under a header naming the pod, or empty:
    /// `  last log lines of pod/POD container manager (exit code 1):\n    {...}\n`.
    pub fn log_text(&self) -> String {
        if self.last_log_lines.is_empty() {
            return String::new();
        }
        let mut o = format!(
            "  last log lines of pod/{} container {}{}:\n",
            self.pod,
            self.container,
            self.last_exit_code
                .map(|c| format!(" (exit code {c})"))
                .unwrap_or_default()
        );
        for l in &self.last_log_lines {
            o.push_str(&format!("    {l}\n"));
        }
        o
    }

    /// Whether the pod may become ready by itself: a container being created or started
    /// that has never exited (`ContainerCreating`, `PodInitializing`, running but not ready
    /// yet). A process that exited (CrashLoopBackOff, Error), an image that does not pull or a
    /// container config error stays so until someone changes something.
    pub fn may_come_back(&self) -> bool {
        self.last_exit_code.is_none()
            && matches!(
                self.reason.as_str(),
                "ContainerCreating" | "PodInitializing" | "NotReady"
            )
    }

    /// What to run to see why: the ended run's log when there is one (`kubectl -n NS logs
    /// POD -c CONTAINER --previous` while the container is restarting; without `--previous`
    /// when it was not restarted), else `kubectl -n NS describe pod/POD` (its Events say why
    /// a pull or a start fails).
    pub fn command(&self, namespace: &str) -> String {
        match (self.last_exit_code, self.reason.as_str()) {
            (Some(_), "Terminated") => format!(
                "kubectl -n {namespace} logs {} -c {}",
                self.pod, self.container
            ),
            (Some(_), _) => format!(
                "kubectl -n {namespace} logs {} -c {} --previous",
                self.pod, self.container
            ),
            (None, _) => format!("kubectl -n {namespace} describe pod/{}", self.pod),
        }
    }
}

/// Why a running controller Deployment leads nothing, read from its Lease. JSON
/// (`stoppedControllers[].leader`): `{"lease": "flux-system/kustomize-controller-leader-election-3a0b8c1d",
/// "holder": "other-7d9c5-x2b4q_0f3c...", "renewedAt": "...", "expiresAt": "...",
/// "pod": "kustomize-controller-6b8f-abcde", "keepsRenewing": true, "until": null}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderTrouble {
    /// `namespace/name` of the Lease.
    pub lease: String,
    /// `spec.holderIdentity` (`hostname_uuid`), `None` when empty or no Lease.
    pub holder: Option<String>,
    /// `spec.renewTime` (or `acquireTime`).
    pub renewed_at: Option<jiff::Timestamp>,
    /// `renewedAt + leaseDurationSeconds`: when a candidate may take it.
    pub expires_at: Option<jiff::Timestamp>,
    /// The Deployment's ready pod that does not lead (`None` when its pods were not read).
    pub pod: Option<String>,
    /// The holder renewed within the last three retry periods: it runs and keeps the Lease.
    pub keeps_renewing: bool,
    /// A wait: by when the ready pod takes the Lease (the holder stopped renewing: the expiry
    /// plus two jittered retry periods; released: the release plus one). `None`: a finding.
    pub until: Option<jiff::Timestamp>,
    /// The sentence that says it, naming the pod, the Lease, the holder and the times.
    pub why: String,
}

impl LeaderTrouble {
    /// What to run to see it: the Lease (`kubectl -n NS get lease NAME -o yaml`) when another
    /// holder keeps it, else the controller's log.
    pub fn command(&self, deployment_ns: &str, deployment: &str) -> String {
        let (ns, name) = self.lease.split_once('/').unwrap_or(("", &self.lease));
        if self.keeps_renewing || self.until.is_some() {
            format!("kubectl -n {ns} get lease {name} -o yaml")
        } else {
            format!("kubectl -n {deployment_ns} logs deployment/{deployment} -c manager")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ks(spec: serde_json::Value) -> Kustomization {
        serde_json::from_value(
            json!({"metadata": {"name": "apps", "namespace": "flux-system"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn effective_timeout_rules() {
        let s = |d: &Kustomization| format_go_duration(d.effective_timeout().unwrap());
        assert_eq!(s(&ks(json!({"interval": "10m"}))), "9m30s");
        assert_eq!(
            s(&ks(json!({"interval": "10m", "timeout": "15m"}))),
            "15m0s"
        );
        assert_eq!(s(&ks(json!({"interval": "45s"}))), "30s");
        assert_eq!(s(&ks(json!({"interval": "1m"}))), "30s");
        assert_eq!(s(&ks(json!({"interval": "10m", "timeout": "10s"}))), "30s");
        assert_eq!(s(&ks(json!({}))), "30s");
        assert_eq!(s(&ks(json!({"interval": "1h"}))), "59m30s");
        assert!(ks(json!({"interval": "10x"})).effective_timeout().is_err());
    }

    #[test]
    fn effective_timeout_of_raw_objects() {
        let of = |spec: serde_json::Value| {
            Kustomization::effective_timeout_of(&json!({
                "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "x"}, "spec": spec}))
            .map(|d| d.as_secs_f64())
        };
        assert_eq!(of(json!({"interval": "10m"})), Some(570.0));
        assert_eq!(
            of(json!({"interval": "10m", "timeout": "15m"})),
            Some(900.0)
        );
        assert_eq!(of(json!({"interval": "45s"})), Some(30.0));
        assert_eq!(of(json!({"interval": "1m", "timeout": "5s"})), Some(30.0));
        // not a Go duration, not a Kustomization shape, not an object
        assert_eq!(of(json!({"interval": "10x"})), None);
        assert_eq!(of(json!({"interval": 600})), None);
        assert_eq!(Kustomization::effective_timeout_of(&json!("ks")), None);
    }

    #[test]
    fn tolerant_kustomization() {
        let k: Kustomization = serde_json::from_value(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system", "generation": 4,
                         "annotations": {"reconcile.fluxcd.io/requestedAt": "2026-01-01T00:00:00.1Z"}},
            "spec": {"interval": "10m", "path": "./apps", "prune": true, "wait": true,
                     "dependsOn": [{"name": "platform"}, {"name": "infra", "namespace": "other"}],
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                     "postBuild": {"substituteFrom": [{"kind": "ConfigMap", "name": "cluster-vars"}]},
                     "unknownField": {"x": 1}},
            "status": {"observedGeneration": 4, "lastAppliedRevision": "main@sha1:abc",
                       "lastHandledReconcileAt": "2026-01-01T00:00:00.1Z",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded"}],
                       "inventory": {"entries": [{"id": "apps_podinfo_apps_Deployment", "v": "v1"},
                                                 {"id": "_apps__Namespace", "v": "v1"}]},
                       "history": [{"whatever": true}]}
        }))
        .unwrap();
        assert!(k.ready().unwrap().is_true());
        assert!(k.generation_observed());
        assert!(k.runs_health_checks());
        assert_eq!(k.requested_at(), k.last_handled_reconcile_at());
        assert_eq!(
            k.dependencies(),
            vec![
                ("flux-system".to_string(), "platform".to_string()),
                ("other".to_string(), "infra".to_string())
            ]
        );
        let inv: Vec<_> = k
            .inventory()
            .into_iter()
            .map(|r| r.unwrap().to_string())
            .collect();
        assert_eq!(inv, vec!["Deployment/apps/podinfo", "Namespace/apps"]);
        assert_eq!(
            k.spec.post_build.as_ref().unwrap().substitute_from[0].name,
            "cluster-vars"
        );
        // Empty objects parse too.
        let _: Kustomization = serde_json::from_value(json!({})).unwrap();
        let _: GitRepository = serde_json::from_value(json!({"spec": null})).unwrap_or_default();
    }

    #[test]
    fn inventory_ids_like_cli_utils() {
        let m = ObjMetadata::parse("flux-system_podinfo_apps_Deployment").unwrap();
        assert_eq!(
            (
                m.namespace.as_str(),
                m.name.as_str(),
                m.group.as_str(),
                m.kind.as_str()
            ),
            ("flux-system", "podinfo", "apps", "Deployment")
        );
        let m = ObjMetadata::parse("_system__controller__x_rbac.authorization.k8s.io_ClusterRole")
            .unwrap();
        assert_eq!(m.name, "system:controller:x");
        assert_eq!(m.namespace, "");
        let m = ObjMetadata::parse("apps_my.app_source.toolkit.fluxcd.io_GitRepository").unwrap();
        assert_eq!(m.name, "my.app");
        assert!(ObjMetadata::parse("nounderscore").is_err());
        assert!(ObjMetadata::parse("a_b").is_err());
        assert!(ObjMetadata::parse("ns_a_b_c_apps_Deployment").is_err());
    }

    #[test]
    fn sources_and_images() {
        let g: GitRepository = serde_json::from_value(json!({
            "spec": {"url": "https://git.example/x.git", "ref": {"branch": "main"}, "interval": "1m",
                     "secretRef": {"name": "creds"}},
            "status": {"artifact": {"revision": "main@sha1:0123", "digest": "sha256:ab",
                                    "lastUpdateTime": "2026-01-01T00:00:00Z"}}
        }))
        .unwrap();
        assert_eq!(g.spec.reference.unwrap().branch.as_deref(), Some("main"));
        assert_eq!(g.status.artifact.unwrap().revision, "main@sha1:0123");
        let p: ImagePolicy = serde_json::from_value(json!({
            "spec": {"imageRepositoryRef": {"name": "app"}, "policy": {"semver": {"range": ">=1.0.0"}}},
            "status": {"latestRef": {"name": "registry:5000/app", "tag": "1.2.3"}}
        }))
        .unwrap();
        let r = p.status.latest_ref.unwrap();
        assert_eq!(r.full(), "registry:5000/app:1.2.3");
        let r = ImageRef {
            digest: Some("sha256:aa".into()),
            ..r
        };
        assert_eq!(r.full(), "registry:5000/app:1.2.3@sha256:aa");
        use kube::Resource;
        assert_eq!(ImagePolicy::plural(&()), "imagepolicies");
        assert_eq!(
            Kustomization::api_version(&()),
            "kustomize.toolkit.fluxcd.io/v1"
        );
        assert_eq!(OCIRepository::kind(&()), "OCIRepository");
    }

    #[test]
    fn dynamic_roundtrip() {
        let ar = Kind::Kustomization.api_resource("v1beta2");
        let d = kube::api::DynamicObject::new("apps", &ar)
            .within("flux-system")
            .data(json!({"spec": {"interval": "5m", "timeout": "2m"}}));
        let k: Kustomization = from_dynamic(&d).unwrap();
        assert_eq!(k.spec.interval, "5m");
        assert_eq!(
            k.api_version.as_deref(),
            Some("kustomize.toolkit.fluxcd.io/v1beta2")
        );
        assert_eq!(format_go_duration(k.effective_timeout().unwrap()), "2m0s");
    }
}

/// The branch a GitRepository (`src`, any JSON shape of the object) follows: `spec.ref.branch`,
/// or `master` when `spec.ref` names nothing (source-controller api/v1 `GitRepositoryRef`:
/// "defaults to master"; fluxcd/pkg git `DefaultBranch`); `None` when it pins a tag, semver
/// range, name or commit (no branch head to compare).
pub fn git_branch(src: &serde_json::Value) -> Option<String> {
    let r = src.get("spec").and_then(|s| s.get("ref"));
    let field = |k: &str| {
        r.and_then(|r| r.get(k))
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
    };
    if ["tag", "semver", "name", "commit"]
        .iter()
        .any(|k| field(k).is_some())
    {
        return None;
    }
    Some(field("branch").unwrap_or("master").to_string())
}

#[cfg(test)]
mod git_branch_tests {
    use super::git_branch;
    use serde_json::json;

    #[test]
    fn git_branch_follows_source_controller_defaults() {
        assert_eq!(
            git_branch(&json!({"spec": {"ref": {"branch": "main"}}})).as_deref(),
            Some("main")
        );
        assert_eq!(git_branch(&json!({"spec": {}})).as_deref(), Some("master"));
        for pinned in ["tag", "semver", "name", "commit"] {
            assert_eq!(
                git_branch(&json!({"spec": {"ref": {"branch": "main", pinned: "x"}}})),
                None,
                "{pinned}"
            );
        }
    }
}
