//! The watches: one kube-runtime watcher and reflector store per kind that `kubectl unstick
//! --all` reads, each change waking the diagnosis ([`Watches::changed`]); no polling.
//!
//! Kinds: Kustomizations, GitRepositories, OCIRepositories, Buckets and HelmReleases (all
//! namespaces, or the runtime namespace with `--watch-all-namespaces=false`; Kustomizations
//! and sources filtered by `--watch-label-selector`), and the Deployments and Leases of the
//! Flux controllers' namespace. A kind the cluster does not serve (a 404 on a first list of
//! one item, e.g. HelmRelease without helm-controller's CRDs) is not watched, and said so in
//! the log and in [`Watches::not_served`]. `metadata.managedFields` are dropped from every kind
//! but Kustomizations (unstick reads a Kustomization's managedFields for when its spec and
//! status were last written; nothing else's), to keep the stores small.
//!
//! ConfigMaps and Secrets in the Flux objects' scope are watched as metadata only
//! (`PartialObjectMetadata`: their data is never requested), so a change the real
//! kustomize-controller is not told about (`config-not-watched`: a `postBuild.substituteFrom`,
//! `decryption` or `kubeConfig` object not labelled for its `--watch-configs-label-selector`)
//! wakes a diagnosis as `kubectl unstick --all` would find it. Their managedFields keep each
//! manager's time (the rule reads the latest write), not the field sets. Without the RBAC to
//! list them, they are not watched and that rule is not judged ([`Watches::not_served`]).
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use tokio::sync::Notify;

use crate::metrics::Metrics;

/// One watched kind: its name in logs and metrics, its API resource, and its store.
#[derive(Clone)]
pub struct Watched {
    /// `Kustomization`, `GitRepository`, ...
    pub kind: &'static str,
    /// The API resource (group, version, plural).
    pub ar: ApiResource,
    /// The reflector's store: every object the watch holds now.
    pub store: Store<DynamicObject>,
}

impl Watched {
    /// Every object of the store as an API object (`apiVersion` and `kind` set from the
    /// resource: list items come without them).
    pub fn values(&self) -> Vec<Value> {
        self.store
            .state()
            .iter()
            .filter_map(|o| {
                let mut v = serde_json::to_value(&**o).ok()?;
                v["apiVersion"] = Value::String(self.ar.api_version.clone());
                v["kind"] = Value::String(self.ar.kind.clone());
                Some(v)
            })
            .collect()
    }
}

/// Every watch, and the signal they share.
pub struct Watches {
    /// Kustomizations.
    pub kustomizations: Watched,
    /// GitRepositories, OCIRepositories, Buckets (those served).
    pub sources: Vec<Watched>,
    /// HelmReleases (when served).
    pub helm_releases: Option<Watched>,
    /// Deployments of the Flux controllers' namespace.
    pub deployments: Watched,
    /// Leases of the Flux controllers' namespace.
    pub leases: Watched,
    /// ConfigMaps' metadata in the Flux objects' scope (`None`: not watched).
    pub config_maps: Option<Store<PartialObjectMeta<ConfigMap>>>,
    /// Secrets' metadata in the Flux objects' scope (`None`: not watched).
    pub secrets: Option<Store<PartialObjectMeta<Secret>>>,
    /// Notified on every change of any store (an applied or deleted object, a re-list done).
    pub changed: Arc<Notify>,
    /// Kinds not served by this cluster, not watched.
    pub not_served: Vec<String>,
    /// What else is not watched and what that leaves unjudged (a 403 on a first list), one
    /// sentence each, for the `/diagnoses` document's notes.
    pub notes: Vec<String>,
    ready: Arc<AtomicBool>,
}

impl Watches {
    /// Watches over stores filled elsewhere (a benchmark's writers): ready, nothing not served.
    pub fn from_stores(
        kustomizations: Watched,
        sources: Vec<Watched>,
        helm_releases: Option<Watched>,
        deployments: Watched,
        leases: Watched,
        changed: Arc<Notify>,
    ) -> Watches {
        Watches {
            kustomizations,
            sources,
            helm_releases,
            deployments,
            leases,
            config_maps: None,
            secrets: None,
            changed,
            not_served: Vec::new(),
            notes: Vec::new(),
            ready: Arc::new(AtomicBool::new(true)),
        }
    }

    /// The metadata of ConfigMap or Secret (`kind`) `namespace/name` as `kubectl unstick`
    /// reads it (`{apiVersion: v1, kind, metadata}`); `None` when it is not held (not watched,
    /// or no such object).
    pub fn config_metadata(&self, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let metadata = match kind {
            "ConfigMap" => self
                .config_maps
                .as_ref()?
                .get(&ObjectRef::new(name).within(namespace))
                .map(|o| serde_json::to_value(&o.metadata)),
            "Secret" => self
                .secrets
                .as_ref()?
                .get(&ObjectRef::new(name).within(namespace))
                .map(|o| serde_json::to_value(&o.metadata)),
            _ => None,
        }?
        .ok()?;
        Some(serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": metadata}))
    }

    /// Whether every store has had its first complete list (readiness).
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// A clone of the readiness flag, for /readyz.
    pub fn ready_flag(&self) -> Arc<AtomicBool> {
        self.ready.clone()
    }

    /// Every store.
    pub fn all(&self) -> Vec<&Watched> {
        let mut v = vec![&self.kustomizations];
        v.extend(self.sources.iter());
        v.extend(self.helm_releases.iter());
        v.push(&self.deployments);
        v.push(&self.leases);
        v
    }
}

fn flux(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// What to watch.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Namespace of Flux objects (`None`: all namespaces).
    pub namespace: Option<String>,
    /// `--watch-label-selector` (Kustomizations and sources).
    pub label_selector: Option<String>,
    /// Namespace of the Flux controllers' Deployments and Leases.
    pub controller_namespace: String,
}

/// Starts every watch on `client` (each a task that runs until the process ends, retrying
/// with kube-runtime's default backoff). Errors: a first list that fails other than 404 (no
/// permission, unreachable), naming the kind.
pub async fn start(client: &Client, scope: &Scope, metrics: &Metrics) -> Result<Watches, String> {
    let changed = Arc::new(Notify::new());
    let mut not_served = Vec::new();
    let mut notes = Vec::new();
    let mut handles = Vec::new();
    let kinds = [
        flux(
            "kustomize.toolkit.fluxcd.io",
            "v1",
            "Kustomization",
            "kustomizations",
        ),
        flux(
            "source.toolkit.fluxcd.io",
            "v1",
            "GitRepository",
            "gitrepositories",
        ),
        flux(
            "source.toolkit.fluxcd.io",
            "v1",
            "OCIRepository",
            "ocirepositories",
        ),
        flux("source.toolkit.fluxcd.io", "v1", "Bucket", "buckets"),
        flux(
            "helm.toolkit.fluxcd.io",
            "v2",
            "HelmRelease",
            "helmreleases",
        ),
    ];
    let mut flux_stores = Vec::new();
    for ar in kinds {
        let api: Api<DynamicObject> = match &scope.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let selected = ar.kind != "HelmRelease";
        let mut lp = ListParams::default().limit(1);
        if let Some(s) = scope.label_selector.as_deref().filter(|_| selected) {
            lp = lp.labels(s);
        }
        match api.list_metadata(&lp).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::warn!(kind = %ar.kind, "not served by this cluster: not watched");
                not_served.push(ar.kind.clone());
                continue;
            }
            Err(e) => return Err(format!("cannot list {}: {e}", ar.plural)),
        }
        let mut cfg = watcher::Config::default();
        if let Some(s) = scope.label_selector.as_deref().filter(|_| selected) {
            cfg = cfg.labels(s);
        }
        let keep_managed = ar.kind == "Kustomization";
        let (w, h) = spawn(api, ar, cfg, keep_managed, &changed, metrics);
        handles.push(h);
        flux_stores.push(w);
    }
    let cns = scope.controller_namespace.as_str();
    let dep_ar = ApiResource::erase::<Deployment>(&());
    let lease_ar = ApiResource::erase::<Lease>(&());
    for ar in [&dep_ar, &lease_ar] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), cns, ar);
        if let Err(e) = api.list_metadata(&ListParams::default().limit(1)).await {
            return Err(format!("cannot list {} in {cns}: {e}", ar.plural));
        }
    }
    let (deployments, h1) = spawn(
        Api::namespaced_with(client.clone(), cns, &dep_ar),
        dep_ar,
        watcher::Config::default(),
        false,
        &changed,
        metrics,
    );
    let (leases, h2) = spawn(
        Api::namespaced_with(client.clone(), cns, &lease_ar),
        lease_ar,
        watcher::Config::default(),
        false,
        &changed,
        metrics,
    );
    handles.push(h1);
    handles.push(h2);
    let mut it = flux_stores.into_iter();
    let kustomizations = it
        .next()
        .filter(|w| w.kind == "Kustomization")
        .ok_or("Kustomizations are not served by this cluster (is Flux installed?)")?;
    let mut sources = Vec::new();
    let mut helm_releases = None;
    for w in it {
        if w.kind == "HelmRelease" {
            helm_releases = Some(w);
        } else {
            sources.push(w);
        }
    }
    let config_maps = spawn_meta::<ConfigMap>(client, scope, &changed, metrics, &mut notes).await?;
    let secrets = spawn_meta::<Secret>(client, scope, &changed, metrics, &mut notes).await?;
    let ready = Arc::new(AtomicBool::new(false));
    let w = Watches {
        kustomizations,
        sources,
        helm_releases,
        deployments,
        leases,
        config_maps: config_maps.clone(),
        secrets: secrets.clone(),
        changed: changed.clone(),
        not_served,
        notes,
        ready: ready.clone(),
    };
    let stores: Vec<Store<DynamicObject>> = w.all().iter().map(|x| x.store.clone()).collect();
    tokio::spawn(async move {
        for s in stores {
            let _ = s.wait_until_ready().await;
        }
        if let Some(s) = config_maps {
            let _ = s.wait_until_ready().await;
        }
        if let Some(s) = secrets {
            let _ = s.wait_until_ready().await;
        }
        ready.store(true, Ordering::Relaxed);
        tracing::info!("every watch has its first list: ready");
        changed.notify_one();
    });
    Ok(w)
}

fn spawn(
    api: Api<DynamicObject>,
    ar: ApiResource,
    cfg: watcher::Config,
    keep_managed: bool,
    changed: &Arc<Notify>,
    metrics: &Metrics,
) -> (Watched, tokio::task::JoinHandle<()>) {
    let writer = reflector::store::Writer::new(ar.clone());
    let store = writer.as_reader();
    let kind: &'static str = Box::leak(ar.kind.clone().into_boxed_str());
    let changed = changed.clone();
    let metrics = metrics.clone();
    let stream = watcher(api, cfg)
        .modify(move |o: &mut DynamicObject| {
            if !keep_managed {
                o.managed_fields_mut().clear();
            }
        })
        .default_backoff()
        .reflect(writer);
    let h = drive(stream, kind, changed, metrics);
    (Watched { kind, ar, store }, h)
}

/// Watches the metadata of every `K` (ConfigMap or Secret) in the Flux objects' scope into a
/// store. A first list refused (403: the RBAC grants no list) leaves it not watched, said in
/// the log and in `notes`; any other error fails the start.
async fn spawn_meta<K>(
    client: &Client,
    scope: &Scope,
    changed: &Arc<Notify>,
    metrics: &Metrics,
    notes: &mut Vec<String>,
) -> Result<Option<Store<PartialObjectMeta<K>>>, String>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let kind: &'static str = Box::leak(K::kind(&()).to_string().into_boxed_str());
    let api: Api<PartialObjectMeta<K>> = match &scope.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::warn!(kind, error = %e.message, "not watched: a change kustomize-controller is not told about (config-not-watched) is not judged");
            notes.push(format!(
                "{kind}s are not watched (list refused: {}): a change kustomize-controller is not told about (config-not-watched) is not judged",
                e.message
            ));
            return Ok(None);
        }
        Err(e) => return Err(format!("cannot list {kind}s' metadata: {e}")),
    }
    let writer = reflector::store::Writer::<PartialObjectMeta<K>>::default();
    let store = writer.as_reader();
    let changed = changed.clone();
    let metrics = metrics.clone();
    let stream = watcher(api, watcher::Config::default())
        .modify(|o: &mut PartialObjectMeta<K>| {
            // Each manager's time is what unstick reads; the field sets are the bulk.
            for m in o.metadata.managed_fields.iter_mut().flatten() {
                m.fields_v1 = None;
            }
        })
        .default_backoff()
        .reflect(writer);
    drive(stream, kind, changed, metrics);
    Ok(Some(store))
}

/// Runs one reflector's stream until the process ends: counts each event and error
/// (`metrics`), and wakes the diagnosis on a change or a completed (re-)list.
fn drive<K: Send + 'static>(
    stream: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    kind: &'static str,
    changed: Arc<Notify>,
    metrics: Metrics,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(e) => {
                    let (what, wake) = match e {
                        watcher::Event::Apply(_) => ("apply", true),
                        watcher::Event::Delete(_) => ("delete", true),
                        watcher::Event::Init => ("init", false),
                        watcher::Event::InitApply(_) => ("init-apply", false),
                        watcher::Event::InitDone => ("init-done", true),
                    };
                    metrics.watch_event(kind, what);
                    if wake {
                        changed.notify_one();
                    }
                }
                Err(e) => {
                    metrics.watch_error(kind);
                    tracing::warn!(kind, error = %e, "watch error (retrying with backoff)");
                }
            }
        }
    })
}
