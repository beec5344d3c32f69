//! What every link reads, read once per round with list calls (never one get per object):
//! unstick's snapshot and its diagnoses (Kustomizations, sources, controllers), and the
//! workloads of the in-scope Kustomizations' inventories with their pods.
//!
//! Requests: unstick's [`unstick::live::gather`] budget (Kustomizations 1, each source kind
//! 1, kustomize-controller 1, source-controller 1, plus what its health checks name), then one
//! list per workload kind present in the inventories (Deployment, StatefulSet, DaemonSet,
//! Job: at most 4) and one list of Pods, each in the one namespace they share or across
//! namespaces.

use cluster_loop::cli::FLUX_DEFAULT_NAMESPACE;
use std::collections::{BTreeMap, BTreeSet};

use cluster_loop::error::Result;
use jiff::Timestamp;
use kube::api::ListParams;
use serde_json::Value;
use unstick::diagnose::{Diagnosis, Engine, key_of, source_ref};
use unstick::live::{ControllerRef, Scope};
use unstick::obj;
use unstick::snapshot::Snapshot;

use crate::session::Session;

/// The workload kinds the workloads link checks: (group, Kind) as inventory ids spell them.
pub const WORKLOAD_KINDS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
];

/// One round's reads.
pub struct Facts {
    /// When the round was read.
    pub now: Timestamp,
    /// unstick's snapshot (Kustomizations in scope and their dependencies, their sources,
    /// the controllers).
    pub snap: Snapshot,
    /// unstick's diagnosis of each in-scope Kustomization, by `namespace/name`.
    pub diagnoses: Vec<Diagnosis>,
    /// The in-scope Kustomizations (the namespace, or all; only those reading `--source`).
    pub kustomizations: Vec<Value>,
    /// The sources they read (or `--source`), as read; `(Kind, namespace, name, object)`,
    /// the object `None` when it does not exist.
    pub sources: Vec<(String, String, String, Option<Value>)>,
    /// Deployments, StatefulSets, DaemonSets and Jobs of the kinds their inventories list,
    /// in the namespaces they list.
    pub workloads: Vec<Value>,
    /// Pods in those namespaces.
    pub pods: Vec<Value>,
    /// What was not read and why.
    pub notes: Vec<String>,
    /// For each object `(Kind, namespace, name)` in an inventory, the keys (`namespace/name`)
    /// of the in-scope Kustomizations that hold it, built once per round ([`Facts::appliers`]).
    appliers: BTreeMap<(String, String, String), Vec<String>>,
}

impl Facts {
    /// The in-scope Kustomizations that read `(kind, ns, name)`.
    pub fn readers_of<'a>(&'a self, kind: &str, ns: &str, name: &str) -> Vec<&'a Value> {
        self.kustomizations
            .iter()
            .filter(|k| source_ref(k) == (kind.to_string(), ns.to_string(), name.to_string()))
            .collect()
    }

    /// unstick's diagnosis of `ks`.
    pub fn diagnosis(&self, ks: &Value) -> Option<&Diagnosis> {
        let key = key_of(ks);
        self.diagnoses.iter().find(|d| d.kustomization == key)
    }

    /// Keys (`namespace/name`) of the in-scope Kustomizations whose inventory holds the
    /// object `kind/ns/name` (kustomize-controller's `status.inventory`; the API group is not
    /// compared: a workload, HTTPRoute, Gateway, Ingress or Service).
    pub fn appliers(&self, kind: &str, ns: &str, name: &str) -> Vec<String> {
        self.appliers
            .get(&(kind.to_string(), ns.to_string(), name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// The workload `(group, kind, ns, name)` when read.
    pub fn workload(&self, kind: &str, ns: &str, name: &str) -> Option<&Value> {
        self.workloads
            .iter()
            .find(|w| obj::kind(w) == kind && obj::namespace(w) == ns && obj::name(w) == name)
    }
}

/// Whether `ks` is in scope: in the session's namespace (any with `-A`), and reading
/// `--source` when given.
fn in_scope(s: &Session, ks: &Value) -> bool {
    if s.namespace
        .as_deref()
        .is_some_and(|n| obj::namespace(ks) != n)
    {
        return false;
    }
    match &s.opts.source {
        None => true,
        Some((kind, name)) => {
            let (k, ns, n) = source_ref(ks);
            &k == kind && &n == name && s.namespace.as_deref().is_none_or(|x| x == ns)
        }
    }
}

/// Reads one round. Errors: API errors on the Kustomizations, sources or workloads (exit 3);
/// 403 on the optional reads are notes.
pub async fn read(s: &Session) -> Result<Facts> {
    let scope = Scope {
        namespace: s.namespace.clone(),
        // The controllers run where Flux is installed (flux-system, as `flux install` and
        // unstick's --controller-namespace default), whatever namespace `-n` reads objects
        // from (trial3: `-n prod` looked for kustomize-controller in prod, found none, and
        // judged nothing while the real one was stopped).
        controller: ControllerRef {
            namespace: FLUX_DEFAULT_NAMESPACE.into(),
            name: "kustomize-controller".into(),
        },
    };
    let (snap, mut notes) = unstick::live::gather(&s.conn, &scope, &s.reader).await?;
    nothing_to_verify(s, &snap)?;
    let kustomizations: Vec<Value> = snap
        .kustomizations
        .iter()
        .filter(|k| in_scope(s, k))
        .cloned()
        .collect();
    let diagnoses = {
        let engine = Engine::new(&snap);
        kustomizations
            .iter()
            .filter_map(|k| engine.diagnose(obj::namespace(k), obj::name(k)))
            .collect()
    };
    let sources = sources_of(s, &snap, &kustomizations);
    named_source_exists(s, &sources)?;
    let (workloads, pods) = read_workloads(s, &kustomizations, &mut notes).await?;
    let appliers = appliers_of(&kustomizations);
    Ok(Facts {
        now: snap.now,
        snap,
        diagnoses,
        kustomizations,
        sources,
        workloads,
        pods,
        notes,
        appliers,
    })
}

/// Each inventory object's Kustomizations, from one pass over the inventories.
fn appliers_of(kustomizations: &[Value]) -> BTreeMap<(String, String, String), Vec<String>> {
    let mut out: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for ks in kustomizations {
        let entries = obj::arr(ks, &["status", "inventory", "entries"])
            .iter()
            .filter_map(|e| obj::s(e, &["id"]))
            .filter_map(unstick::diagnose::parse_inventory_id)
            .collect::<Vec<_>>();
        for (_, kind, ns, name) in entries {
            let keys = out.entry((kind, ns, name)).or_default();
            let k = key_of(ks);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    out
}

/// A run with no Kustomization in scope, no `--source` and no HOST|URL checks nothing: not a
/// pass (exit 0 would let a CI gate on a mistyped `-n` pass every time). Errors: exit 3,
/// naming the namespace and the command that lists where Kustomizations are.
fn nothing_to_verify(s: &Session, snap: &Snapshot) -> Result<()> {
    if !snap.kustomizations.is_empty() || s.opts.source.is_some() || !s.opts.targets.is_empty() {
        return Ok(());
    }
    let place = s
        .namespace
        .as_deref()
        .map(|n| format!("namespace {n:?}"))
        .unwrap_or_else(|| "any namespace".into());
    Err(cluster_loop::Error::Cluster(format!(
        "no Kustomization in {place} ({}): nothing to verify; list where they are with: kubectl get kustomizations -A",
        s.conn.server
    )))
}

/// `--source` names an object the cluster has. Errors: it does not (exit 3, as every plugin
/// treats a named object that is missing), with the command that lists what exists.
fn named_source_exists(
    s: &Session,
    sources: &[(String, String, String, Option<Value>)],
) -> Result<()> {
    let Some((kind, name)) = &s.opts.source else {
        return Ok(());
    };
    let Some((_, ns, _, _)) = sources
        .iter()
        .find(|(k, _, n, o)| k == kind && n == name && o.is_none())
    else {
        return Ok(());
    };
    let mut ctx = s
        .conn
        .ctx()
        .verb("get")
        .namespace(Some(ns.as_str()))
        .name(name.as_str());
    if let Some(ar) = unstick::live::api_resource("source.toolkit.fluxcd.io", kind) {
        ctx = ctx.api_resource(&ar);
    }
    Err(cluster_loop::Error::not_found(ctx))
}

/// The sources in scope: `--source` (looked for in the session's namespace), else every
/// source an in-scope Kustomization reads; each with its object when the snapshot has it.
fn sources_of(
    s: &Session,
    snap: &Snapshot,
    kustomizations: &[Value],
) -> Vec<(String, String, String, Option<Value>)> {
    let mut keys: BTreeSet<(String, String, String)> =
        kustomizations.iter().map(source_ref).collect();
    if let Some((kind, name)) = &s.opts.source {
        let ns = s
            .namespace
            .clone()
            .unwrap_or_else(|| s.conn.flux_namespace());
        keys.insert((kind.clone(), ns, name.clone()));
    }
    keys.into_iter()
        .map(|(k, ns, n)| {
            let o = snap
                .sources
                .iter()
                .find(|o| obj::kind(o) == k && obj::namespace(o) == ns && obj::name(o) == n)
                .cloned();
            (k, ns, n, o)
        })
        .collect()
}

/// The (group, Kind, namespace, name) of the workload entries of `ks`'s inventory.
pub fn inventory_workloads(ks: &Value) -> Vec<(String, String, String, String)> {
    obj::arr(ks, &["status", "inventory", "entries"])
        .iter()
        .filter_map(|e| obj::s(e, &["id"]))
        .filter_map(unstick::diagnose::parse_inventory_id)
        .filter(|(g, k, _, _)| WORKLOAD_KINDS.iter().any(|(wg, wk)| wg == g && wk == k))
        .collect()
}

/// One list per workload kind the inventories hold and one of Pods, each in the one
/// namespace they share, else across namespaces.
async fn read_workloads(
    s: &Session,
    kustomizations: &[Value],
    notes: &mut Vec<String>,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let entries: Vec<_> = kustomizations
        .iter()
        .flat_map(inventory_workloads)
        .collect();
    if entries.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let nss: BTreeSet<&str> = entries.iter().map(|(_, _, ns, _)| ns.as_str()).collect();
    let one = (nss.len() == 1).then(|| *nss.iter().next().unwrap());
    let mut workloads = Vec::new();
    for (g, k) in WORKLOAD_KINDS {
        if !entries.iter().any(|(eg, ek, _, _)| eg == g && ek == k) {
            continue;
        }
        let Some(ar) = unstick::live::api_resource(g, k) else {
            continue;
        };
        let v = s
            .reader
            .list(&s.conn, &ar, one, &ListParams::default())
            .await?;
        workloads.extend(v.into_iter().filter(|w| nss.contains(obj::namespace(w))));
    }
    let pod_ar = unstick::live::api_resource("", "Pod").expect("Pod is a known kind");
    let pods = match s
        .reader
        .list(&s.conn, &pod_ar, one, &ListParams::default())
        .await
    {
        Ok(v) => v
            .into_iter()
            .filter(|p| nss.contains(obj::namespace(p)))
            .collect(),
        Err(e) if e.status_code() == Some(403) => {
            notes.push(format!("pods not read (no pod reasons): {e}"));
            Vec::new()
        }
        Err(e) => return Err(e),
    };
    Ok((workloads, pods))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every inventory entry has its Kustomizations, not only workloads: links 5-7 look up
    /// the HTTPRoute, Gateway, Ingress and Services that serve a host.
    #[test]
    fn every_inventory_object_has_its_kustomizations() {
        let ks = |name: &str, ids: &[&str]| {
            json!({"metadata": {"name": name, "namespace": "flux-system"},
              "status": {"inventory": {"entries": ids.iter().map(|i| json!({"id": i, "v": "v1"})).collect::<Vec<_>>()}}})
        };
        let m = appliers_of(&[
            ks("apps", &["apps_web_apps_Deployment", "apps_app__Service"]),
            ks(
                "net",
                &[
                    "apps_app_gateway.networking.k8s.io_HTTPRoute",
                    "apps_app__Service",
                ],
            ),
        ]);
        let get = |k: &str, ns: &str, n: &str| {
            m.get(&(k.to_string(), ns.to_string(), n.to_string()))
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(get("Deployment", "apps", "web"), ["flux-system/apps"]);
        assert_eq!(get("HTTPRoute", "apps", "app"), ["flux-system/net"]);
        assert_eq!(
            get("Service", "apps", "app"),
            ["flux-system/apps", "flux-system/net"]
        );
    }
}
