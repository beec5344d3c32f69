//! What Flux reads, from the cluster: the GitRepository's `spec.url`, the branch its
//! `spec.ref` follows and its `spec.secretRef` credentials (read with cutover's
//! [`cutover::preflight::read_credentials`], the keys source-controller reads), and the
//! ImageUpdateAutomations whose `spec.sourceRef` names it, with the ImagePolicies they apply.
//!
//! Defaults (image-automation-controller api/v1 `GitSpec`): `spec.git.checkout.ref` absent
//! means the GitRepository's own ref; `spec.git.push.branch` absent means the checkout branch;
//! `spec.sourceRef.namespace` absent means the automation's namespace.

use cluster_loop::cli::Connection;
use cluster_loop::error::{KubeResultExt, Result};
use cluster_loop::flux::{self, GitRepository};
use cutover::git::GitCredentials;
use kube::Api;
use kube::api::ListParams;

/// The GitRepository as pull reads it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.url`.
    pub url: String,
    /// The branch `spec.ref` follows ([`branch_of`]); `None` when it pins a tag, semver
    /// range or commit.
    pub branch: Option<String>,
    /// What `spec.ref` pins instead of a branch (`tag v1.2.0`), for the refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
    /// `spec.secretRef.name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// `status.artifact.revision`: what the cluster runs (`main@sha1:...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The credentials of `secret` (never serialized).
    #[serde(skip)]
    pub credentials: GitCredentials,
}

/// The branch a GitRepository follows: the shared rule ([`flux::git_branch`]: `spec.ref.branch`,
/// `master` when the ref names nothing), and `spec.ref.name` `refs/heads/BRANCH` (a full
/// reference name that is a branch). Else `Err` with what it pins (`tag v1.2.0`).
pub fn branch_of(repo: &GitRepository) -> std::result::Result<String, String> {
    let r = repo.spec.reference.clone().unwrap_or_default();
    let set = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    if set(&r.commit).is_none()
        && let Some(b) = set(&r.name).and_then(|n| n.strip_prefix("refs/heads/").map(String::from))
    {
        return Ok(b);
    }
    let v = serde_json::to_value(repo).unwrap_or_default();
    flux::git_branch(&v).ok_or_else(|| {
        [
            ("commit", &r.commit),
            ("name", &r.name),
            ("semver", &r.semver),
            ("tag", &r.tag),
        ]
        .into_iter()
        .find_map(|(k, v)| set(v).map(|v| format!("{k} {v}")))
        .unwrap_or_else(|| "no branch".into())
    })
}

/// Reads GitRepository `namespace/name` and its `secretRef` credentials.
///
/// Errors: API errors, exit 3 (a GitRepository that does not exist is named with the
/// namespace, context and the command that lists what exists; a Secret likewise).
pub async fn read_source(conn: &Connection, namespace: &str, name: &str) -> Result<Source> {
    let api: Api<GitRepository> = Api::namespaced(conn.client.clone(), namespace);
    let repo = api.get(name).await.api_context(|| {
        conn.ctx()
            .verb("get")
            .resource_of::<GitRepository>()
            .namespace(Some(namespace))
            .name(name)
    })?;
    let secret = repo
        .spec
        .secret_ref
        .as_ref()
        .map(|s| s.name.clone())
        .filter(|s| !s.is_empty());
    let credentials = match &secret {
        Some(s) => cutover::preflight::read_credentials(conn, namespace, s).await?,
        None => GitCredentials::default(),
    };
    let (branch, pinned) = match branch_of(&repo) {
        Ok(b) => (Some(b), None),
        Err(p) => (None, Some(p)),
    };
    Ok(Source {
        namespace: namespace.to_string(),
        name: name.to_string(),
        url: repo.spec.url.clone(),
        branch,
        pinned,
        secret,
        revision: repo
            .status
            .artifact
            .as_ref()
            .map(|a| a.revision.clone())
            .filter(|r| !r.is_empty()),
        credentials,
    })
}

/// An ImageUpdateAutomation that updates the source, as pull needs it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Automation {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.git.commit.author.name`.
    pub author_name: String,
    /// `spec.git.commit.author.email`.
    pub author_email: String,
    /// The branch it checks out (`spec.git.checkout.ref.branch`, else the source's).
    pub checkout_branch: Option<String>,
    /// The branch it pushes to (`spec.git.push.branch`, else the checkout branch).
    pub push_branch: Option<String>,
    /// `spec.git.push.refspec`, when set (pushed in addition to the branch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push_refspec: Option<String>,
    /// `spec.suspend`.
    pub suspended: bool,
    /// `status.lastPushCommit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_push_commit: Option<String>,
    /// The automation as markercheck's simulation reads it (update path, policy selector).
    #[serde(skip)]
    pub setters: markercheck::objects::ImageUpdateAutomation,
}

impl Automation {
    /// `namespace/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether a commit by `name <email>` is this automation's (its commit author).
    pub fn authored(&self, name: &str, email: &str) -> bool {
        !self.author_email.is_empty()
            && email.eq_ignore_ascii_case(&self.author_email)
            && (self.author_name.is_empty() || name == self.author_name)
    }
}

fn text(v: Option<&serde_json::Value>) -> Option<String> {
    v.and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

/// The automation `a` as pull reads it, for a source following `source_branch`.
pub fn automation_of(a: &flux::ImageUpdateAutomation, source_branch: Option<&str>) -> Automation {
    let git = a.spec.git.clone().unwrap_or_default();
    let checkout_branch =
        text(git.pointer("/checkout/ref/branch")).or_else(|| source_branch.map(String::from));
    let push_branch = text(git.pointer("/push/branch")).or_else(|| checkout_branch.clone());
    Automation {
        namespace: a.metadata.namespace.clone().unwrap_or_default(),
        name: a.metadata.name.clone().unwrap_or_default(),
        author_name: text(git.pointer("/commit/author/name")).unwrap_or_default(),
        author_email: text(git.pointer("/commit/author/email")).unwrap_or_default(),
        checkout_branch,
        push_branch,
        push_refspec: text(git.pointer("/push/refspec")),
        suspended: a.spec.suspend,
        last_push_commit: a.status.last_push_commit.clone().filter(|s| !s.is_empty()),
        setters: markercheck::cluster::automation_from_api(a),
    }
}

/// The ImageUpdateAutomations whose `spec.sourceRef` names `source`, read across namespaces
/// (a sourceRef may cross namespaces), or in the source's namespace only when listing across
/// namespaces is denied (a note says so). With the ImagePolicies of their namespaces
/// (markercheck's reading, [`markercheck::cluster::policy_from_api`]).
///
/// Errors: API errors other than a denied cross-namespace list (exit 3). The image automation
/// API not served (no image-automation-controller installed) is no automation, with a note.
pub async fn automations(
    conn: &Connection,
    source: &Source,
) -> Result<(
    Vec<Automation>,
    Vec<markercheck::objects::ImagePolicy>,
    Vec<String>,
)> {
    let mut notes = Vec::new();
    let lp = ListParams::default();
    let ctx = || {
        conn.ctx()
            .verb("list")
            .resource_of::<flux::ImageUpdateAutomation>()
    };
    let all = Api::<flux::ImageUpdateAutomation>::all(conn.client.clone())
        .list(&lp)
        .await
        .api_context(|| ctx().namespace(None::<String>));
    let items = match all {
        Ok(l) => l.items,
        Err(e) if e.status_code() == Some(403) => {
            notes.push(format!(
                "ImageUpdateAutomations were read in namespace {} only: listing them across \
                 namespaces is denied ({e})",
                source.namespace
            ));
            Api::<flux::ImageUpdateAutomation>::namespaced(conn.client.clone(), &source.namespace)
                .list(&lp)
                .await
                .api_context(|| ctx().namespace(Some(&source.namespace)))?
                .items
        }
        Err(e) if e.status_code() == Some(404) => {
            notes.push(
                "the cluster serves no image.toolkit.fluxcd.io/v1 ImageUpdateAutomation: no \
                 automation commits to mark"
                    .into(),
            );
            return Ok((Vec::new(), Vec::new(), notes));
        }
        Err(e) => return Err(e),
    };
    let ours: Vec<Automation> = items
        .iter()
        .filter(|a| {
            let r = &a.spec.source_ref;
            let ns = r
                .namespace
                .clone()
                .filter(|s| !s.is_empty())
                .or_else(|| a.metadata.namespace.clone())
                .unwrap_or_default();
            (r.kind.is_empty() || r.kind == "GitRepository")
                && r.name == source.name
                && ns == source.namespace
        })
        .map(|a| automation_of(a, source.branch.as_deref()))
        .collect();
    let mut namespaces: Vec<&str> = ours.iter().map(|a| a.namespace.as_str()).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut policies = Vec::new();
    for ns in namespaces {
        let list = Api::<flux::ImagePolicy>::namespaced(conn.client.clone(), ns)
            .list(&lp)
            .await
            .api_context(|| {
                conn.ctx()
                    .verb("list")
                    .resource_of::<flux::ImagePolicy>()
                    .namespace(Some(ns))
            });
        match list {
            Ok(l) => policies.extend(l.items.iter().map(markercheck::cluster::policy_from_api)),
            Err(e) => notes.push(format!(
                "ImagePolicies in {ns} could not be read, so the setter lines the automation \
                 will rewrite are not known: {e}"
            )),
        }
    }
    Ok((ours, policies, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(r: serde_json::Value) -> GitRepository {
        serde_json::from_value(serde_json::json!({"spec": {"url": "https://h/r", "ref": r}}))
            .unwrap()
    }

    #[test]
    fn branch_follows_source_controller() {
        assert_eq!(
            branch_of(&repo(serde_json::json!({"branch": "main"}))),
            Ok("main".into())
        );
        assert_eq!(branch_of(&repo(serde_json::json!({}))), Ok("master".into()));
        assert_eq!(
            branch_of(&repo(serde_json::json!({"name": "refs/heads/prod"}))),
            Ok("prod".into())
        );
        assert_eq!(
            branch_of(&repo(
                serde_json::json!({"branch": "main", "tag": "v1.2.0"})
            )),
            Err("tag v1.2.0".into())
        );
        assert_eq!(
            branch_of(&repo(serde_json::json!({"name": "refs/tags/v1"}))),
            Err("name refs/tags/v1".into())
        );
    }

    #[test]
    fn automation_defaults() {
        let a: flux::ImageUpdateAutomation = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "fleet", "namespace": "flux-system"},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                     "interval": "1m",
                     "git": {"commit": {"author": {"name": "fluxcdbot", "email": "bot@example.com"}}}},
            "status": {"lastPushCommit": "abc"}
        }))
        .unwrap();
        let x = automation_of(&a, Some("main"));
        assert_eq!(x.checkout_branch.as_deref(), Some("main"));
        assert_eq!(x.push_branch.as_deref(), Some("main"));
        assert!(x.authored("fluxcdbot", "Bot@example.com"));
        assert!(!x.authored("someone", "bot@example.com"));
        let mut v = serde_json::to_value(&a).unwrap();
        v["spec"]["git"]["push"] = serde_json::json!({"branch": "image-updates"});
        v["spec"]["git"]["checkout"] = serde_json::json!({"ref": {"branch": "dev"}});
        let x = automation_of(&serde_json::from_value(v).unwrap(), Some("main"));
        assert_eq!(x.checkout_branch.as_deref(), Some("dev"));
        assert_eq!(x.push_branch.as_deref(), Some("image-updates"));
    }
}
