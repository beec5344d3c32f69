//! Bearer-token authentication and RBAC-lite authorization.
//!
//! Unknown tokens get 401 `Unauthorized`. A token either has full access (the admin token) or a
//! rule list; a request is allowed when one rule matches its verb, API group, resource (with
//! `resource/subresource` for subresources), namespace and name. The 403 message is
//! k8s.io/apiserver pkg/endpoints/handlers/responsewriters/errors.go forbiddenMessage wrapped by
//! errors.NewForbidden, e.g. `kustomizations.kustomize.toolkit.fluxcd.io "x" is forbidden: User
//! "system:serviceaccount:flux-system:ro" cannot patch resource "kustomizations" in API group
//! "kustomize.toolkit.fluxcd.io" in the namespace "flux-system"`. Non-resource paths (discovery,
//! /version, /openapi) are allowed for every authenticated user (system:discovery).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::StatusError;

/// One permission rule, like a PolicyRule. `"*"` matches anything. Empty `namespaces` = every
/// namespace and cluster scope (a ClusterRoleBinding); otherwise only namespaced requests in those
/// namespaces (RoleBindings). Empty `names` = all names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rule {
    /// Verbs: get, list, watch, create, update, patch, delete, deletecollection.
    pub verbs: Vec<String>,
    /// API groups (`""` = core).
    pub groups: Vec<String>,
    /// Resources, `pods/log` style for subresources.
    pub resources: Vec<String>,
    /// Namespaces the rule applies in (empty = all + cluster scope).
    pub namespaces: Vec<String>,
    /// resourceNames (empty = all).
    pub names: Vec<String>,
}

impl Rule {
    /// A rule from string slices (namespaces/names empty).
    pub fn new(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Self {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: v(verbs),
            groups: v(groups),
            resources: v(resources),
            namespaces: Vec::new(),
            names: Vec::new(),
        }
    }
    /// Restricts the rule to `namespaces`.
    pub fn in_namespaces(mut self, namespaces: &[&str]) -> Self {
        self.namespaces = namespaces.iter().map(|s| s.to_string()).collect();
        self
    }
}

/// The authorization attributes of a resource request.
#[derive(Clone, Debug, Default)]
pub struct Attributes {
    /// Verb (get, list, watch, create, update, patch, delete, deletecollection).
    pub verb: String,
    /// API group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource or empty.
    pub subresource: String,
    /// Namespace or empty.
    pub namespace: String,
    /// Name or empty.
    pub name: String,
}

fn m(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == "*" || x == v)
}

impl Rule {
    fn allows(&self, a: &Attributes) -> bool {
        let res = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        m(&self.verbs, &a.verb)
            && m(&self.groups, &a.group)
            && (m(&self.resources, &res)
                || (!a.subresource.is_empty()
                    && self
                        .resources
                        .iter()
                        .any(|r| r == &format!("*/{}", a.subresource))))
            && (self.namespaces.is_empty()
                || (!a.namespace.is_empty() && m(&self.namespaces, &a.namespace)))
            && (self.names.is_empty() || m(&self.names, &a.name))
    }
}

/// An authenticated user: name and rules (`None` = unrestricted).
#[derive(Clone, Debug)]
pub struct Identity {
    /// User name, e.g. `system:serviceaccount:flux-system:ro`.
    pub user: String,
    /// Rules, or `None` for full access.
    pub rules: Option<Vec<Rule>>,
}

/// Token table.
#[derive(Clone, Default)]
pub struct Tokens {
    inner: Arc<Mutex<HashMap<String, Identity>>>,
}

fn random_token() -> String {
    (0..32)
        .map(|_| {
            let c = fastrand::u8(0..36);
            (if c < 10 { b'0' + c } else { b'a' + c - 10 }) as char
        })
        .collect()
}

impl Tokens {
    /// Adds a token for `user` with `rules` (`None` = admin); returns the token.
    pub fn add(&self, user: &str, rules: Option<Vec<Rule>>) -> String {
        let t = random_token();
        self.inner.lock().unwrap().insert(
            t.clone(),
            Identity {
                user: user.to_string(),
                rules,
            },
        );
        t
    }
    /// Revokes a token (later requests get 401).
    pub fn revoke(&self, token: &str) {
        self.inner.lock().unwrap().remove(token);
    }
    /// The identity of `Authorization: Bearer <token>`, or 401.
    pub fn authenticate(&self, header: Option<&str>) -> Result<Identity, StatusError> {
        let tok = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(StatusError::unauthorized)?;
        self.inner
            .lock()
            .unwrap()
            .get(tok)
            .cloned()
            .ok_or_else(StatusError::unauthorized)
    }
}

/// Checks `a` for `id`; 403 with the upstream message when no rule allows it.
pub fn authorize(id: &Identity, a: &Attributes) -> Result<(), StatusError> {
    let Some(rules) = &id.rules else {
        return Ok(());
    };
    // system:basic-user (bound to system:authenticated) lets everyone review their own access.
    if a.group == "authorization.k8s.io"
        && a.verb == "create"
        && matches!(
            a.resource.as_str(),
            "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
        )
    {
        return Ok(());
    }
    if rules.iter().any(|r| r.allows(a)) {
        return Ok(());
    }
    let res = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let why = if a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            id.user, a.verb, res, a.group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            id.user, a.verb, res, a.group, a.namespace
        )
    };
    Err(StatusError::forbidden(&a.group, &a.resource, &a.name, &why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_message_shape() {
        let id = Identity {
            user: "system:serviceaccount:flux-system:ro".into(),
            rules: Some(vec![Rule::new(
                &["get", "list"],
                &["kustomize.toolkit.fluxcd.io"],
                &["kustomizations"],
            )]),
        };
        let mut a = Attributes {
            verb: "get".into(),
            group: "kustomize.toolkit.fluxcd.io".into(),
            resource: "kustomizations".into(),
            namespace: "flux-system".into(),
            name: "x".into(),
            ..Default::default()
        };
        assert!(authorize(&id, &a).is_ok());
        a.verb = "patch".into();
        let e = authorize(&id, &a).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "kustomizations.kustomize.toolkit.fluxcd.io \"x\" is forbidden: User \"system:serviceaccount:flux-system:ro\" cannot patch resource \"kustomizations\" in API group \"kustomize.toolkit.fluxcd.io\" in the namespace \"flux-system\""
        );
        let log = Attributes {
            verb: "get".into(),
            resource: "pods".into(),
            subresource: "log".into(),
            namespace: "default".into(),
            name: "p".into(),
            ..Default::default()
        };
        let e = authorize(&id, &log).unwrap_err();
        assert!(
            e.message
                .contains("cannot get resource \"pods/log\" in API group \"\""),
            "{}",
            e.message
        );
    }
}
