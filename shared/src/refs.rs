//! Resource references as operators type them: `ks/NAME`, `kustomization.kustomize.toolkit.fluxcd.io/NAME`,
//! `gitrepo/NAME`, `deploy/NAME`, or a bare `NAME` when the plugin has a default kind.
//!
//! # Grammar (kubectl's resource builder, k8s.io/cli-runtime `pkg/resource/builder.go`)
//!
//! - `TYPE/NAME`, exactly one slash (`splitResourceTypeName`: "arguments in resource/name form
//!   may not have more than one slash"). kubectl has **no** `TYPE/NAMESPACE/NAME` or
//!   `NAMESPACE/NAME` argument form: the namespace always comes from `-n/--namespace`. We
//!   follow it, so `ks/flux-system/apps` and `flux-system/apps` are rejected with a hint to use
//!   `-n`. [`ResourceRef::namespace`] is therefore always `None` after parsing; plugins fill it
//!   from the connection (see [`ResourceRef::in_namespace`]).
//! - `TYPE` is matched case-insensitively (the RESTMapper lowercases) against the kind
//!   (`Kustomization`), the singular (`kustomization`), the plural (`kustomizations`) and the
//!   short names from the CRD / built-in (`ks`, `gitrepo`, `ocirepo`, `imgpol`, `imagepol`,
//!   `imgrepo`, `imagerepo`, `iua`, `imgupd`, `imgauto`, `po`, `deploy`, `sts`, `ds`, `rs`, `svc`, `cm`, `ns`), optionally
//!   qualified as `TYPE.GROUP` or `TYPE.VERSION.GROUP` (`schema.ParseResourceArg`), e.g.
//!   `deployment.apps`, `kustomizations.v1.kustomize.toolkit.fluxcd.io`. For the core group
//!   (`pods`), `pod.v1.` style is not supported (kubectl rarely sees it).
//! - `NAME` alone (no slash) is accepted only when the plugin passes a default kind.
//! - `NAME` must be a DNS-1123 subdomain (lowercase alphanumerics, `-` and `.`, at most 253
//!   characters, starting and ending alphanumeric), which every kind listed here requires.
//!   kubectl would send anything and let the server answer 404; we fail fast instead.
//!
//! Errors are [`Error::Usage`] (exit 2) and list the forms the plugin accepts.
//!
//! The kinds and their names are [`crate::kind`]'s table, re-exported here as [`Kind`].

use crate::error::{Error, Result};
pub use crate::kind::{Kind, KindInfo};
use std::fmt;

/// A parsed reference to one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceRef {
    /// The kind.
    pub kind: Kind,
    /// Namespace; `None` straight out of [`ResourceRef::parse`] (kubectl takes it from `-n`).
    pub namespace: Option<String>,
    /// Object name.
    pub name: String,
}

impl ResourceRef {
    /// Parse `TYPE/NAME` where TYPE must resolve to one of `allowed`.
    ///
    /// Errors ([`Error::Usage`]): empty input, more than one slash, unknown or disallowed
    /// type, bare name (no default kind), invalid name. The message lists the accepted forms.
    pub fn parse(input: &str, allowed: &[Kind]) -> Result<ResourceRef> {
        Self::parse_with_default(input, allowed, None)
    }

    /// Like [`ResourceRef::parse`], but a bare `NAME` means `default` (which should be in
    /// `allowed`).
    pub fn parse_with_default(
        input: &str,
        allowed: &[Kind],
        default: Option<Kind>,
    ) -> Result<ResourceRef> {
        let fail = |why: String| -> Error {
            Error::Usage(format!(
                "invalid reference {input:?}: {why}\n  accepted forms: {}",
                accepted_forms_text(allowed, default)
            ))
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(fail("empty".into()));
        }
        let parts: Vec<&str> = s.split('/').collect();
        let (kind, name) = match parts.as_slice() {
            [name] => match default {
                Some(k) => (k, *name),
                None => return Err(fail("missing TYPE/ (e.g. ks/NAME)".into())),
            },
            [ty, name] => {
                if ty.is_empty() || name.is_empty() {
                    return Err(fail(
                        "arguments in resource/name form must have a single resource and name"
                            .into(),
                    ));
                }
                let kind = match Kind::from_type_token(ty) {
                    Some(k) => k,
                    None if default.is_some() && is_dns1123_label(ty) => {
                        return Err(fail(format!(
                            "{ty:?} is not a resource type; NAMESPACE/NAME is not a kubectl form: use -n {ty} {name}"
                        )));
                    }
                    None => return Err(fail(format!("unknown resource type {ty:?}"))),
                };
                if !allowed.contains(&kind) {
                    return Err(fail(format!("{} is not supported here", kind.as_str())));
                }
                (kind, *name)
            }
            [ty, ns, name, ..] => {
                let hint = if parts.len() == 3 && !ns.is_empty() && !name.is_empty() {
                    format!("; kubectl has no TYPE/NAMESPACE/NAME form: use -n {ns} {ty}/{name}")
                } else {
                    String::new()
                };
                return Err(fail(format!(
                    "arguments in resource/name form may not have more than one slash{hint}"
                )));
            }
            [] => return Err(fail("empty".into())),
        };
        validate_name(name).map_err(fail)?;
        Ok(ResourceRef {
            kind,
            namespace: None,
            name: name.to_string(),
        })
    }

    /// Set the namespace (typically from [`crate::cli::Connection::namespace`]).
    pub fn in_namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }
}

impl fmt::Display for ResourceRef {
    /// Flux's object notation: `Kustomization/flux-system/apps`, or `Kustomization/apps`
    /// without namespace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

fn accepted_forms_text(allowed: &[Kind], default: Option<Kind>) -> String {
    let mut forms: Vec<String> = Vec::new();
    if default.is_some() {
        forms.push("NAME".to_string());
    }
    for k in allowed {
        forms.extend(k.accepted_forms());
    }
    format!(
        "{} (the namespace comes from -n/--namespace)",
        forms.join(", ")
    )
}

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Check a name is a DNS-1123 subdomain (k8s.io/apimachinery validation
/// `IsDNS1123Subdomain`): at most 253 characters of `[a-z0-9.-]`, each dot-separated part
/// starting and ending alphanumeric. Returns a human-readable reason on failure.
pub fn validate_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("empty name".into());
    }
    if name.len() > 253 {
        return Err(format!("name is {} characters, at most 253", name.len()));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        return Err(format!(
            "name {name:?} contains {c:?}: names are lowercase letters, digits, '-' and '.'"
        ));
    }
    for part in name.split('.') {
        let ok = part
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
            && part
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_alphanumeric());
        if !ok {
            return Err(format!(
                "name {name:?} must start and end with a letter or digit (also around each '.')"
            ));
        }
    }
    Ok(())
}

/// clap `value_parser` for a namespace (`-n/--namespace`, `--controller-namespace`): an RFC
/// 1123 label, as the API server validates namespace names (k8s.io/apimachinery
/// validation `ValidateNamespaceName` = `IsDNS1123Label`: at most 63 characters of `[a-z0-9-]`,
/// starting and ending alphanumeric). A bad one is a usage error (exit 2) decided before any
/// kubeconfig is read, instead of a 404 or 422 from the cluster.
pub fn parse_namespace(s: &str) -> std::result::Result<String, String> {
    if is_dns1123_label(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a namespace name: an RFC 1123 label, at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}

/// clap `value_parser` for the name of an object the user names by flag (a Secret, a
/// Deployment): a DNS-1123 subdomain ([`validate_name`], k8s.io/apimachinery
/// `IsDNS1123Subdomain`, what `metadata.name` of Secrets and Deployments must be). A bad
/// one is a usage error (exit 2) decided before any kubeconfig is read.
pub fn parse_object_name(s: &str) -> std::result::Result<String, String> {
    validate_name(s).map(|()| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLUX: &[Kind] = &[
        Kind::Kustomization,
        Kind::GitRepository,
        Kind::OCIRepository,
    ];

    fn ok(input: &str, allowed: &[Kind]) -> ResourceRef {
        ResourceRef::parse(input, allowed).unwrap_or_else(|e| panic!("{input}: {e}"))
    }

    #[test]
    fn every_accepted_kustomization_form() {
        for input in [
            "ks/apps",
            "KS/apps",
            "kustomization/apps",
            "Kustomization/apps",
            "kustomizations/apps",
            "kustomization.kustomize.toolkit.fluxcd.io/apps",
            "kustomizations.kustomize.toolkit.fluxcd.io/apps",
            "Kustomization.kustomize.toolkit.fluxcd.io/apps",
            "kustomizations.v1.kustomize.toolkit.fluxcd.io/apps",
            "kustomizations.v1beta2.kustomize.toolkit.fluxcd.io/apps",
            "ks.kustomize.toolkit.fluxcd.io/apps",
        ] {
            let r = ok(input, FLUX);
            assert_eq!(r.kind, Kind::Kustomization, "{input}");
            assert_eq!(r.name, "apps");
            assert_eq!(r.namespace, None);
        }
    }

    #[test]
    fn sources_and_workloads() {
        for (input, kind) in [
            ("gitrepository/flux-system", Kind::GitRepository),
            ("gitrepo/flux-system", Kind::GitRepository),
            ("gitrepositories/flux-system", Kind::GitRepository),
            (
                "gitrepositories.source.toolkit.fluxcd.io/flux-system",
                Kind::GitRepository,
            ),
            ("ocirepository/flux-system", Kind::OCIRepository),
            ("ocirepo/flux-system", Kind::OCIRepository),
            ("pod/flux-system", Kind::Pod),
            ("po/flux-system", Kind::Pod),
            ("pods/flux-system", Kind::Pod),
            ("deploy/flux-system", Kind::Deployment),
            ("deployment/flux-system", Kind::Deployment),
            ("deployment.apps/flux-system", Kind::Deployment),
            ("deployments.v1.apps/flux-system", Kind::Deployment),
            ("imgpol/flux-system", Kind::ImagePolicy),
            ("imagerepo/flux-system", Kind::ImageRepository),
            (
                "imageupdateautomation/flux-system",
                Kind::ImageUpdateAutomation,
            ),
        ] {
            assert_eq!(ok(input, Kind::ALL).kind, kind, "{input}");
        }
    }

    #[test]
    fn bare_name_with_default() {
        let r = ResourceRef::parse_with_default("podinfo", &[Kind::Pod], Some(Kind::Pod)).unwrap();
        assert_eq!((r.kind, r.name.as_str()), (Kind::Pod, "podinfo"));
        let e = ResourceRef::parse("podinfo", FLUX).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("missing TYPE/"), "{e}");
        assert!(e.to_string().contains("ks/NAME"), "{e}");
    }

    #[test]
    fn rejections() {
        let cases = [
            ("", "empty"),
            ("ks/", "single resource and name"),
            ("/apps", "single resource and name"),
            ("ks/flux-system/apps", "use -n flux-system ks/apps"),
            ("a/b/c/d", "more than one slash"),
            ("foo/apps", "unknown resource type \"foo\""),
            ("deploy/apps", "Deployment is not supported here"),
            ("ks/Apps", "contains 'A'"),
            ("ks/-apps", "start and end"),
            ("ks/a..b", "start and end"),
            (
                "kustomization.source.toolkit.fluxcd.io/apps",
                "unknown resource type",
            ),
            (
                "kustomizations.v9.kustomize.toolkit.fluxcd.io/apps",
                "unknown resource type",
            ),
            ("pod.v1/apps", "unknown resource type"),
        ];
        for (input, want) in cases {
            let e = ResourceRef::parse(input, FLUX).unwrap_err();
            let m = e.to_string();
            assert!(m.contains(want), "{input:?}: {m}");
            assert!(
                m.contains("accepted forms: ks/NAME, kustomization/NAME"),
                "{m}"
            );
            assert_eq!(e.exit_code(), 2);
        }
        let long = format!("ks/{}", "a".repeat(254));
        assert!(ResourceRef::parse(&long, FLUX).is_err());
    }

    #[test]
    fn namespace_slash_name_hint_with_default() {
        let e =
            ResourceRef::parse_with_default("flux-system/apps", FLUX, Some(Kind::Kustomization))
                .unwrap_err();
        assert!(e.to_string().contains("use -n flux-system apps"), "{e}");
    }

    #[test]
    fn display_and_coordinates() {
        let r = ok("ks/apps", FLUX).in_namespace("flux-system");
        assert_eq!(r.to_string(), "Kustomization/flux-system/apps");
        assert_eq!(
            Kind::Kustomization.api_version(),
            "kustomize.toolkit.fluxcd.io/v1"
        );
        assert_eq!(Kind::Pod.api_version(), "v1");
        let ar = Kind::GitRepository.api_resource("v1beta2");
        assert_eq!(ar.api_version, "source.toolkit.fluxcd.io/v1beta2");
        assert_eq!(ar.plural, "gitrepositories");
        assert!(Kind::ImagePolicy.is_flux() && !Kind::Deployment.is_flux());
        assert_eq!(Kind::from_kind_str("Deployment"), Some(Kind::Deployment));
    }

    #[test]
    fn namespace_and_object_name_value_parsers() {
        for ok in ["flux-system", "a", "team-1", &"a".repeat(63)] {
            assert_eq!(parse_namespace(ok).as_deref(), Ok(ok));
        }
        for bad in ["Bad_NS", "", "-a", "a-", "a.b", "UPPER", &"a".repeat(64)] {
            let e = parse_namespace(bad).unwrap_err();
            assert!(e.contains("RFC 1123 label"), "{bad}: {e}");
        }
        assert_eq!(
            parse_object_name("git-creds.v2").as_deref(),
            Ok("git-creds.v2")
        );
        for bad in ["Bad_S", "", "a..b", "-x"] {
            assert!(parse_object_name(bad).is_err(), "{bad}");
        }
    }
}
