//! The tests' polls (`kubectl get ... -o json`, [`crate::Cluster::get_json`]) answered in
//! process, over one kube client per cluster, instead of a kubectl process per poll.
//!
//! Why: a test polls every 500 ms ([`crate::testkit::eventually`]), and on this 2-core machine a
//! kubectl process (start-up, TLS handshake, cached discovery) was the largest single user of
//! CPU beside kube-apiserver while the real-cluster tests ran (`perf record -a`, 2026-12-02:
//! kubectl 27 %, kube-apiserver 34 % of all samples over 90 s of unstick's tests).
//!
//! The answer is kubectl's: the API server's JSON of the object (`GET .../NAME`), or for a list
//! kubectl's `{"apiVersion":"v1","kind":"List","items":[...],"metadata":{"resourceVersion":""}}`
//! with `apiVersion` and `kind` set on each item (kubectl's printer for `-o json` of a list).
//! One difference: `metadata.managedFields` is kept (kubectl >= 1.21 drops it unless
//! `--show-managed-fields`); no test reads it.
//! The resource name resolves as kubectl resolves it for the names the tests use: plural,
//! singular (the kind in lower case) or a short name of [`SHORT_NAMES`], at the group's
//! preferred version (`kube::Discovery`, `ApiGroup::recommended_resources`), the core group
//! first. The namespace is `-n`'s, else the admin kubeconfig's context namespace (flux-system);
//! `-A` lists every namespace's objects.
//! Anything else (other flags, `kind.group`, several resources, a name discovery does not know)
//! is not parsed here: [`GetArgs::parse`] returns `None` and the caller runs kubectl.
use std::sync::Mutex;

use kube::api::{GetParams, ListParams};
use kube::core::Request;
use kube::discovery::{ApiResource, Scope};
use serde_json::{Value, json};

/// kubectl's short names (the API server's `shortNames` of the built-in and Flux resources)
/// for the resources the tests read; any other short name falls back to kubectl.
pub const SHORT_NAMES: &[(&str, &str)] = &[
    ("crd", "customresourcedefinitions"),
    ("cm", "configmaps"),
    ("deploy", "deployments"),
    ("ds", "daemonsets"),
    ("ev", "events"),
    ("gitrepo", "gitrepositories"),
    ("hr", "helmreleases"),
    ("ks", "kustomizations"),
    ("no", "nodes"),
    ("ns", "namespaces"),
    ("po", "pods"),
    ("pvc", "persistentvolumeclaims"),
    ("rs", "replicasets"),
    ("sa", "serviceaccounts"),
    ("svc", "services"),
    ("sts", "statefulsets"),
];

/// `[-n NS | -A] get RESOURCE [NAME] [-l SELECTOR]`, flags in any order.
#[derive(Debug, PartialEq, Eq)]
pub struct GetArgs<'a> {
    /// `-n`/`--namespace`, if given.
    pub namespace: Option<&'a str>,
    /// `-A`/`--all-namespaces`: a list of every namespace's objects.
    pub all_namespaces: bool,
    /// The resource as written (`ks`, `kustomization`, `pods`).
    pub resource: &'a str,
    /// One object's name; `None` lists.
    pub name: Option<&'a str>,
    /// `-l`/`--selector`.
    pub selector: Option<&'a str>,
}

impl<'a> GetArgs<'a> {
    /// The parsed arguments, or `None` for anything this reader does not answer as kubectl
    /// would (any other flag, `RESOURCE.GROUP`, `a,b`, `TYPE/NAME`, more than one name).
    pub fn parse(args: &[&'a str]) -> Option<GetArgs<'a>> {
        let mut namespace = None;
        let mut all_namespaces = false;
        let mut selector = None;
        let mut positional = Vec::new();
        let mut it = args.iter();
        while let Some(&a) = it.next() {
            match a {
                "-n" | "--namespace" => namespace = Some(*it.next()?),
                "-l" | "--selector" => selector = Some(*it.next()?),
                "-A" | "--all-namespaces" => all_namespaces = true,
                _ if a.starts_with('-') => return None,
                _ => positional.push(a),
            }
        }
        let [verb, resource, rest @ ..] = positional.as_slice() else {
            return None;
        };
        if *verb != "get" || resource.contains(['.', ',', '/']) || rest.len() > 1 {
            return None;
        }
        let name = rest.first().copied();
        // kubectl refuses a name with a selector, and a name across all namespaces.
        if name.is_some() && (selector.is_some() || all_namespaces) {
            return None;
        }
        Some(GetArgs {
            namespace,
            all_namespaces,
            resource,
            name,
            selector,
        })
    }
}

/// One cluster's client and what discovery found (resource, namespaced).
pub struct Reads {
    client: kube::Client,
    resources: Mutex<Vec<(ApiResource, bool)>>,
}

impl Reads {
    /// A reader over `client`; discovery runs on the first read.
    pub fn new(client: kube::Client) -> Reads {
        Reads {
            client,
            resources: Mutex::new(Vec::new()),
        }
    }

    async fn discover(&self) -> Result<(), kube::Error> {
        let d = kube::Discovery::new(self.client.clone()).run().await?;
        let mut found = Vec::new();
        for g in d.groups() {
            for (ar, caps) in g.recommended_resources() {
                found.push((ar, caps.scope == Scope::Namespaced));
            }
        }
        // kubectl prefers the core group when a name is served by several groups (events).
        found.sort_by_key(|(ar, _)| !ar.group.is_empty());
        *self.resources.lock().unwrap() = found;
        Ok(())
    }

    fn resolve(&self, resource: &str) -> Option<(ApiResource, bool)> {
        let r = resource.to_ascii_lowercase();
        let r = SHORT_NAMES
            .iter()
            .find(|(s, _)| *s == r)
            .map_or(r.clone(), |(_, plural)| (*plural).to_string());
        let all = self.resources.lock().unwrap();
        let mut hits = all
            .iter()
            .filter(|(ar, _)| ar.plural == r || ar.kind.to_ascii_lowercase() == r);
        let first = hits.next()?.clone();
        // Two groups (not the core group first) serving the name: kubectl's choice is its
        // own; leave it to kubectl.
        match hits.next() {
            Some(_) if !first.0.group.is_empty() => None,
            _ => Some(first),
        }
    }

    /// What `kubectl get ARGS -o json` prints, parsed; `Ok(Value::Null)` when kubectl would
    /// fail (not found, forbidden, an API error), `Err(())` when this reader cannot answer
    /// (the resource is unknown to discovery, even after it ran again).
    pub async fn get(&self, args: &GetArgs<'_>, context_namespace: &str) -> Result<Value, ()> {
        let mut resolved = self.resolve(args.resource);
        if resolved.is_none() {
            // First read, or a CRD established since the last discovery.
            if self.discover().await.is_err() {
                return Err(());
            }
            resolved = self.resolve(args.resource);
        }
        let (ar, namespaced) = resolved.ok_or(())?;
        let base = if ar.group.is_empty() {
            format!("/api/{}", ar.version)
        } else {
            format!("/apis/{}/{}", ar.group, ar.version)
        };
        let path = if namespaced && !args.all_namespaces {
            let ns = args.namespace.unwrap_or(context_namespace);
            format!("{base}/namespaces/{ns}/{}", ar.plural)
        } else {
            format!("{base}/{}", ar.plural)
        };
        let req = Request::new(path);
        let sent = match args.name {
            Some(name) => req.get(name, &GetParams::default()),
            None => {
                let mut lp = ListParams::default();
                if let Some(s) = args.selector {
                    lp = lp.labels(s);
                }
                req.list(&lp)
            }
        };
        let Ok(http) = sent else { return Err(()) };
        let Ok(mut v) = self.client.request::<Value>(http).await else {
            return Ok(Value::Null);
        };
        if args.name.is_none() {
            let mut items = v["items"].take();
            for item in items.as_array_mut().into_iter().flatten() {
                item["apiVersion"] = json!(ar.api_version);
                item["kind"] = json!(ar.kind);
            }
            v = json!({
                "apiVersion": "v1",
                "kind": "List",
                "items": if items.is_null() { json!([]) } else { items },
                "metadata": {"resourceVersion": ""},
            });
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::GetArgs;

    #[test]
    fn parses_the_get_forms_the_tests_poll_with() {
        assert_eq!(
            GetArgs::parse(&["-n", "a", "get", "ks", "web"]),
            Some(GetArgs {
                namespace: Some("a"),
                all_namespaces: false,
                resource: "ks",
                name: Some("web"),
                selector: None
            })
        );
        assert_eq!(
            GetArgs::parse(&["get", "pods", "-n", "a", "-l", "job-name=x"]),
            Some(GetArgs {
                namespace: Some("a"),
                all_namespaces: false,
                resource: "pods",
                name: None,
                selector: Some("job-name=x")
            })
        );
        assert_eq!(
            GetArgs::parse(&["get", "svc", "-A"]),
            Some(GetArgs {
                namespace: None,
                all_namespaces: true,
                resource: "svc",
                name: None,
                selector: None
            })
        );
        assert_eq!(GetArgs::parse(&["get", "svc", "x", "-A"]), None);
        assert_eq!(
            GetArgs::parse(&["get", "crd", "kustomizations.kustomize.toolkit.fluxcd.io"])
                .map(|g| g.name),
            Some(Some("kustomizations.kustomize.toolkit.fluxcd.io"))
        );
        // Left to kubectl.
        assert_eq!(GetArgs::parse(&["get", "deploy.apps", "x"]), None);
        assert_eq!(GetArgs::parse(&["get", "pods", "-w"]), None);
        assert_eq!(GetArgs::parse(&["get", "pods,jobs"]), None);
        assert_eq!(GetArgs::parse(&["get", "ks/web"]), None);
        assert_eq!(GetArgs::parse(&["get", "ks", "a", "b"]), None);
        assert_eq!(GetArgs::parse(&["describe", "ks", "a"]), None);
        assert_eq!(GetArgs::parse(&["-n"]), None);
    }
}
