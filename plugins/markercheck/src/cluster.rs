//! `--from-cluster`: ImagePolicies (with `status.latestRef`), ImageRepositories and
//! ImageUpdateAutomations read with the suite's kube client (`cluster_loop::cli::ClusterArgs`),
//! converted to this crate's [`Objects`].

use crate::objects::{
    ImagePolicy, ImageRepository, ImageUpdateAutomation, LabelSelector, LatestRef, Objects, Origin,
};
use cluster_loop::error::{ApiContext, Error, Result};
use cluster_loop::flux;
use kube::Api;
use kube::api::ListParams;
use std::collections::BTreeMap;

fn ns_name(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        m.namespace.clone().unwrap_or_default(),
        m.name.clone().unwrap_or_default(),
    )
}

/// Convert an ImagePolicy from the API.
pub fn policy_from_api(p: &flux::ImagePolicy) -> ImagePolicy {
    let (namespace, name) = ns_name(&p.metadata);
    let r = &p.spec.image_repository_ref;
    let rns = r
        .namespace
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or(namespace.clone());
    ImagePolicy {
        labels: p
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        repository: (!r.name.is_empty()).then(|| (rns, r.name.clone())),
        latest: p.status.latest_ref.as_ref().map(|l| LatestRef {
            name: l.name.clone(),
            tag: l.tag.clone(),
            digest: l.digest.clone().unwrap_or_default(),
        }),
        origin: Origin::Cluster,
        namespace,
        name,
    }
}

/// Convert an ImageRepository from the API.
pub fn repository_from_api(r: &flux::ImageRepository) -> ImageRepository {
    let (namespace, name) = ns_name(&r.metadata);
    ImageRepository {
        namespace,
        name,
        image: r.spec.image.clone(),
        image_line: 0,
        origin: Origin::Cluster,
    }
}

fn selector_from_json(v: &serde_json::Value) -> LabelSelector {
    let mut s = LabelSelector::default();
    if let Some(m) = v.get("matchLabels").and_then(|m| m.as_object()) {
        for (k, v) in m {
            if let Some(v) = v.as_str() {
                s.match_labels.insert(k.clone(), v.to_string());
            }
        }
    }
    if let Some(es) = v.get("matchExpressions").and_then(|m| m.as_array()) {
        for e in es {
            let g = |k: &str| {
                e.get(k)
                    .and_then(|x| x.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let vals = e
                .get("values")
                .and_then(|x| x.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            s.match_expressions.push((g("key"), g("operator"), vals));
        }
    }
    s
}

/// Convert an ImageUpdateAutomation from the API.
pub fn automation_from_api(a: &flux::ImageUpdateAutomation) -> ImageUpdateAutomation {
    let (namespace, name) = ns_name(&a.metadata);
    let upd = a.spec.update.clone().unwrap_or_default();
    ImageUpdateAutomation {
        api_version: a
            .api_version
            .clone()
            .unwrap_or_else(|| "image.toolkit.fluxcd.io/v1".into()),
        namespace,
        name,
        update_path: upd.path.unwrap_or_default(),
        strategy: upd.strategy.unwrap_or_default(),
        selector: a.spec.policy_selector.as_ref().map(selector_from_json),
        message_template: a
            .spec
            .git
            .as_ref()
            .and_then(|g| g.pointer("/commit/messageTemplate"))
            .and_then(|m| m.as_str())
            .map(|m| (m.to_string(), 0)),
        origin: Origin::Cluster,
    }
}

async fn list<K>(api: Api<K>, ctx: ApiContext) -> Result<Vec<K>>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| Error::from_kube(e, ctx.resource_of::<K>().verb("list")))
}

/// Read the image automation objects from the cluster: all namespaces, or only `namespace`.
/// Errors: API errors (exit 3), with the resource named.
pub async fn read(
    conn: &cluster_loop::cli::Connection,
    namespace: Option<&str>,
) -> Result<Objects> {
    let c = conn.client.clone();
    let (p, r, a) = match namespace {
        Some(ns) => (
            list(
                Api::<flux::ImagePolicy>::namespaced(c.clone(), ns),
                conn.ctx(),
            )
            .await?,
            list(
                Api::<flux::ImageRepository>::namespaced(c.clone(), ns),
                conn.ctx(),
            )
            .await?,
            list(
                Api::<flux::ImageUpdateAutomation>::namespaced(c, ns),
                conn.ctx(),
            )
            .await?,
        ),
        None => (
            list(Api::<flux::ImagePolicy>::all(c.clone()), conn.ctx()).await?,
            list(Api::<flux::ImageRepository>::all(c.clone()), conn.ctx()).await?,
            list(Api::<flux::ImageUpdateAutomation>::all(c), conn.ctx()).await?,
        ),
    };
    Ok(Objects {
        policies: p.iter().map(policy_from_api).collect(),
        repositories: r.iter().map(repository_from_api).collect(),
        automations: a.iter().map(automation_from_api).collect(),
        removed_api: Vec::new(),
    })
}

/// Labels as a sorted map (helper for tests).
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::merge_policies;

    #[test]
    fn cluster_status_fills_tree_policy() {
        let p: flux::ImagePolicy = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "app", "namespace": "flux-system", "labels": {"env": "prod"}},
            "spec": {"imageRepositoryRef": {"name": "app"}},
            "status": {"latestRef": {"name": "ghcr.io/x/app", "tag": "1.2.3"}}
        }))
        .unwrap();
        let cp = policy_from_api(&p);
        assert_eq!(cp.repository, Some(("flux-system".into(), "app".into())));
        assert_eq!(cp.labels, labels(&[("env", "prod")]));
        // tree first (no status), cluster merged over it: latestRef from the cluster
        let mut tree = vec![ImagePolicy {
            latest: None,
            labels: BTreeMap::new(),
            origin: Origin::Flag,
            ..cp.clone()
        }];
        merge_policies(&mut tree, vec![cp]);
        assert_eq!(
            tree[0].latest.as_ref().unwrap().full(),
            "ghcr.io/x/app:1.2.3"
        );
        assert_eq!(tree[0].origin, Origin::Cluster);
    }

    #[test]
    fn automation_fields() {
        let a: flux::ImageUpdateAutomation = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "flux-system"},
            "spec": {
                "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
                "interval": "5m",
                "git": {"commit": {"messageTemplate": "{{ .Updated }}"}},
                "update": {"path": "./clusters/prod", "strategy": "Setters"},
                "policySelector": {"matchLabels": {"env": "prod"}}
            }
        }))
        .unwrap();
        let c = automation_from_api(&a);
        assert_eq!(c.update_path, "./clusters/prod");
        assert_eq!(c.message_template.unwrap().0, "{{ .Updated }}");
        assert!(c.selector.unwrap().matches(&labels(&[("env", "prod")])));
    }
}
