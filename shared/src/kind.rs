//! The Kubernetes kinds the suite names and their API coordinates: one table ([`KINDS`]), the
//! [`Kind`] that indexes it, and the Flux API group suffix. It depends on nothing else of the
//! crate, so [`crate::refs`] (parsing `TYPE/NAME`) and [`crate::error`] (naming a missing
//! object) both read it without importing each other.

use std::fmt;

/// API groups served by Flux controllers (a 404 without object name on these means the CRD
/// is not installed or that version is not served).
pub const FLUX_GROUP_SUFFIX: &str = ".toolkit.fluxcd.io";

/// A Kubernetes kind the suite knows how to name, with its API coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// kustomize.toolkit.fluxcd.io/v1 Kustomization (short name `ks`).
    Kustomization,
    /// source.toolkit.fluxcd.io/v1 GitRepository (short name `gitrepo`).
    GitRepository,
    /// source.toolkit.fluxcd.io/v1 OCIRepository (short name `ocirepo`).
    OCIRepository,
    /// image.toolkit.fluxcd.io/v1 ImagePolicy (short names `imgpol`, `imagepol`).
    ImagePolicy,
    /// image.toolkit.fluxcd.io/v1 ImageRepository (short names `imgrepo`, `imagerepo`).
    ImageRepository,
    /// image.toolkit.fluxcd.io/v1 ImageUpdateAutomation (short names `iua`, `imgupd`, `imgauto`).
    ImageUpdateAutomation,
    /// v1 Pod (`po`).
    Pod,
    /// apps/v1 Deployment (`deploy`).
    Deployment,
    /// apps/v1 StatefulSet (`sts`).
    StatefulSet,
    /// apps/v1 DaemonSet (`ds`).
    DaemonSet,
    /// apps/v1 ReplicaSet (`rs`).
    ReplicaSet,
    /// batch/v1 Job.
    Job,
    /// v1 Service (`svc`).
    Service,
    /// v1 ConfigMap (`cm`).
    ConfigMap,
    /// v1 Secret.
    Secret,
    /// v1 Namespace (`ns`, cluster-scoped).
    Namespace,
}

/// The API coordinates and names of a [`Kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// `Kind` as in `kind:` (`Kustomization`).
    pub kind: &'static str,
    /// API group, `""` for core.
    pub group: &'static str,
    /// Preferred (typed) version, e.g. `v1`.
    pub version: &'static str,
    /// Other versions older servers may serve, newest first (e.g. `v1beta2`).
    pub older_versions: &'static [&'static str],
    /// Plural resource name (`kustomizations`).
    pub plural: &'static str,
    /// Singular resource name (`kustomization`).
    pub singular: &'static str,
    /// Short names (`ks`).
    pub short_names: &'static [&'static str],
    /// True for namespaced kinds.
    pub namespaced: bool,
}

impl Kind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [Kind] = &[
        Kind::Kustomization,
        Kind::GitRepository,
        Kind::OCIRepository,
        Kind::ImagePolicy,
        Kind::ImageRepository,
        Kind::ImageUpdateAutomation,
        Kind::Pod,
        Kind::Deployment,
        Kind::StatefulSet,
        Kind::DaemonSet,
        Kind::ReplicaSet,
        Kind::Job,
        Kind::Service,
        Kind::ConfigMap,
        Kind::Secret,
        Kind::Namespace,
    ];

    /// The kind's coordinates: its row of [`KINDS`].
    pub const fn info(self) -> KindInfo {
        KINDS[self as usize]
    }

    /// The `Kind` string (`Kustomization`).
    pub fn as_str(self) -> &'static str {
        self.info().kind
    }

    /// True for the Flux kinds (group ends in `.toolkit.fluxcd.io`).
    pub fn is_flux(self) -> bool {
        self.info().group.ends_with(FLUX_GROUP_SUFFIX)
    }

    /// `apiVersion` of the typed version (`kustomize.toolkit.fluxcd.io/v1`, `v1`).
    pub fn api_version(self) -> String {
        let i = self.info();
        if i.group.is_empty() {
            i.version.to_string()
        } else {
            format!("{}/{}", i.group, i.version)
        }
    }

    /// kube's [`kube::api::ApiResource`] for `version` (use `self.info().version` for the typed one).
    pub fn api_resource(self, version: &str) -> kube::api::ApiResource {
        let i = self.info();
        kube::api::ApiResource {
            group: i.group.to_string(),
            version: version.to_string(),
            api_version: if i.group.is_empty() {
                version.to_string()
            } else {
                format!("{}/{version}", i.group)
            },
            kind: i.kind.to_string(),
            plural: i.plural.to_string(),
        }
    }

    /// Look a kind up by its `Kind` string (exact, e.g. from an inventory id or `sourceRef.kind`).
    pub fn from_kind_str(kind: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.as_str() == kind)
    }

    /// Match a kubectl TYPE token (case-insensitive; see module docs), `None` if unknown.
    pub fn from_type_token(token: &str) -> Option<Kind> {
        let t = token.to_ascii_lowercase();
        let (head, qualifier) = match t.split_once('.') {
            Some((h, q)) => (h.to_string(), Some(q.to_string())),
            None => (t.clone(), None),
        };
        Kind::ALL.iter().copied().find(|k| {
            let i = k.info();
            let name_ok = head == i.singular
                || head == i.plural
                || head == i.kind.to_ascii_lowercase()
                || i.short_names.contains(&head.as_str());
            if !name_ok {
                return false;
            }
            match &qualifier {
                None => true,
                Some(q) => {
                    if i.group.is_empty() {
                        return false;
                    }
                    if q == i.group {
                        return true;
                    }
                    match q.split_once('.') {
                        Some((ver, grp)) => {
                            grp == i.group && (ver == i.version || i.older_versions.contains(&ver))
                        }
                        None => false,
                    }
                }
            }
        })
    }

    /// The forms users may type for this kind, shortest first (for help and errors):
    /// `ks/NAME, kustomization/NAME, kustomizations/NAME, kustomization.kustomize.toolkit.fluxcd.io/NAME, ...`.
    pub fn accepted_forms(self) -> Vec<String> {
        let i = self.info();
        let mut v: Vec<String> = i.short_names.iter().map(|s| format!("{s}/NAME")).collect();
        v.push(format!("{}/NAME", i.singular));
        v.push(format!("{}/NAME", i.plural));
        if !i.group.is_empty() {
            v.push(format!("{}.{}/NAME", i.singular, i.group));
            v.push(format!("{}.{}/NAME", i.plural, i.group));
        }
        v
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The coordinates of every [`Kind`], one row per kind in declaration order
/// ([`Kind::info`] indexes it by the kind's discriminant). Flux short names are from the CRDs'
/// `+kubebuilder:resource` markers (kustomize-controller api/v1, source-controller api/v1,
/// image-reflector-controller api/v1, image-automation-controller api/v1
/// `imageupdateautomation_types.go`); built-in ones from `kubectl api-resources`.
pub const KINDS: [KindInfo; 16] = [
    KindInfo {
        kind: "Kustomization",
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        older_versions: &["v1beta2"],
        plural: "kustomizations",
        singular: "kustomization",
        short_names: &["ks"],
        namespaced: true,
    },
    KindInfo {
        kind: "GitRepository",
        group: "source.toolkit.fluxcd.io",
        version: "v1",
        older_versions: &["v1beta2"],
        plural: "gitrepositories",
        singular: "gitrepository",
        short_names: &["gitrepo"],
        namespaced: true,
    },
    KindInfo {
        kind: "OCIRepository",
        group: "source.toolkit.fluxcd.io",
        version: "v1",
        older_versions: &["v1beta2"],
        plural: "ocirepositories",
        singular: "ocirepository",
        short_names: &["ocirepo"],
        namespaced: true,
    },
    KindInfo {
        kind: "ImagePolicy",
        group: "image.toolkit.fluxcd.io",
        version: "v1",
        older_versions: &["v1beta2"],
        plural: "imagepolicies",
        singular: "imagepolicy",
        short_names: &["imgpol", "imagepol"],
        namespaced: true,
    },
    KindInfo {
        kind: "ImageRepository",
        group: "image.toolkit.fluxcd.io",
        version: "v1",
        older_versions: &["v1beta2"],
        plural: "imagerepositories",
        singular: "imagerepository",
        short_names: &["imgrepo", "imagerepo"],
        namespaced: true,
    },
    KindInfo {
        kind: "ImageUpdateAutomation",
        group: "image.toolkit.fluxcd.io",
        version: "v1",
        older_versions: &["v1beta2"],
        plural: "imageupdateautomations",
        singular: "imageupdateautomation",
        short_names: &["iua", "imgupd", "imgauto"],
        namespaced: true,
    },
    KindInfo {
        kind: "Pod",
        group: "",
        version: "v1",
        older_versions: &[],
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        namespaced: true,
    },
    KindInfo {
        kind: "Deployment",
        group: "apps",
        version: "v1",
        older_versions: &[],
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        namespaced: true,
    },
    KindInfo {
        kind: "StatefulSet",
        group: "apps",
        version: "v1",
        older_versions: &[],
        plural: "statefulsets",
        singular: "statefulset",
        short_names: &["sts"],
        namespaced: true,
    },
    KindInfo {
        kind: "DaemonSet",
        group: "apps",
        version: "v1",
        older_versions: &[],
        plural: "daemonsets",
        singular: "daemonset",
        short_names: &["ds"],
        namespaced: true,
    },
    KindInfo {
        kind: "ReplicaSet",
        group: "apps",
        version: "v1",
        older_versions: &[],
        plural: "replicasets",
        singular: "replicaset",
        short_names: &["rs"],
        namespaced: true,
    },
    KindInfo {
        kind: "Job",
        group: "batch",
        version: "v1",
        older_versions: &[],
        plural: "jobs",
        singular: "job",
        short_names: &[],
        namespaced: true,
    },
    KindInfo {
        kind: "Service",
        group: "",
        version: "v1",
        older_versions: &[],
        plural: "services",
        singular: "service",
        short_names: &["svc"],
        namespaced: true,
    },
    KindInfo {
        kind: "ConfigMap",
        group: "",
        version: "v1",
        older_versions: &[],
        plural: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        namespaced: true,
    },
    KindInfo {
        kind: "Secret",
        group: "",
        version: "v1",
        older_versions: &[],
        plural: "secrets",
        singular: "secret",
        short_names: &[],
        namespaced: true,
    },
    KindInfo {
        kind: "Namespace",
        group: "",
        version: "v1",
        older_versions: &[],
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        namespaced: false,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_its_own_row() {
        assert_eq!(Kind::ALL.len(), KINDS.len());
        for k in Kind::ALL {
            assert_eq!(format!("{k:?}"), k.info().kind);
        }
    }
}
