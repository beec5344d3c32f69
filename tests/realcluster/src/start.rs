//! The API steps of [`crate::Cluster::start`], done with one kube client instead of a kubectl
//! process per step (each kubectl run starts a process and repeats discovery against a server
//! it has never seen, so its cache never hits), so that they can overlap: the Flux CRDs are
//! applied while kube-apiserver's post-start hooks still run, and the controllers' Deployments
//! roll out while the CRDs become Established.
//!
//! Every step polls at [`POLL`] (or watches) and is bounded by a deadline; a request that fails
//! with a transient error (no connection yet, 5xx, 429, a namespace not created yet) is retried
//! until then; a request the apiserver refuses as invalid (400, 422) fails at once.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;

use crate::Error;

/// The field manager of the harness's server-side applies.
pub const FIELD_MANAGER: &str = "realcluster";

/// How often a step asks again.
pub const POLL: Duration = Duration::from_millis(100);

/// True for an error worth asking again: anything but the apiserver refusing the request as
/// bad (400 BadRequest, 422 Invalid), which asking again does not change.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => !matches!(s.code, 400 | 422),
        _ => true,
    }
}

/// Runs `f` until it succeeds, every [`POLL`] while its error is transient, until `until`.
/// Errors: `what` with the last error.
async fn retry<T, F, Fut>(what: &str, until: Instant, mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if !transient(&e) || Instant::now() >= until => {
                return Err(Error::Setup(format!("{what}: {e}")));
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// `GET /readyz`: Ok once kube-apiserver answers 200 (every readyz check passed: etcd, the
/// post-start hooks such as rbac/bootstrap-roles, informer sync). Errors: the request's error
/// (a non-200 answer lists the failing checks).
pub async fn readyz(client: &kube::Client) -> Result<(), String> {
    let req = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request_text(req)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The documents of every manifest file in `dirs`, as `kubectl apply -f DIR` reads a directory
/// (k8s.io/cli-runtime resource builder: files ending `.json`, `.yaml` or `.yml`, not recursive,
/// in name order; empty documents skipped). Errors: a file that cannot be read or parsed,
/// named.
pub fn read_manifests(dirs: &[PathBuf]) -> Result<Vec<Value>, Error> {
    let mut docs = Vec::new();
    for dir in dirs {
        let rd = std::fs::read_dir(dir)
            .map_err(|e| Error::Setup(format!("read {}: {e}", dir.display())))?;
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "json" || x == "yaml" || x == "yml")
            })
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| Error::Setup(format!("read {}: {e}", f.display())))?;
            let parsed: Vec<Value> = serde_saphyr::from_multiple(&text)
                .map_err(|e| Error::Setup(format!("parse {}: {e}", f.display())))?;
            docs.extend(parsed.into_iter().filter(|d| !d.is_null()));
        }
    }
    Ok(docs)
}

fn name_of(doc: &Value) -> Result<String, Error> {
    doc["metadata"]["name"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::Setup(format!("a manifest without metadata.name: {doc:.200}")))
}

/// Server-side applies every CRD of `crds` at once, then waits until each is Established
/// (kube-runtime `conditions::is_crd_established`: the apiserver serves its kind), before
/// `until`. Errors: the CRD that was refused or not Established in time.
pub async fn apply_crds(
    client: kube::Client,
    crds: Vec<Value>,
    until: Instant,
) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut names = Vec::new();
    for crd in &crds {
        names.push(name_of(crd)?);
    }
    futures::future::try_join_all(crds.iter().zip(&names).map(|(crd, name)| {
        let (api, pp) = (&api, &pp);
        async move {
            let patch = Patch::Apply(crd);
            retry(&format!("apply CRD {name}"), until, || {
                api.patch(name, pp, &patch)
            })
            .await
        }
    }))
    .await?;
    futures::future::try_join_all(names.iter().map(|name| {
        let api = api.clone();
        async move {
            match tokio::time::timeout_at(
                until.into(),
                await_condition(api, name, conditions::is_crd_established()),
            )
            .await
            {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(Error::Setup(format!("CRD {name} Established: {e}"))),
                Err(_) => Err(Error::Setup(format!("CRD {name} not Established in time"))),
            }
        }
    }))
    .await?;
    Ok(())
}

/// Server-side applies the Namespace `name`. Errors: as [`retry`].
pub async fn apply_namespace(
    client: kube::Client,
    name: &str,
    until: Instant,
) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client);
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(&ns);
    retry(&format!("apply namespace {name}"), until, || {
        api.patch(name, &pp, &patch)
    })
    .await
    .map(|_| ())
}

/// Server-side applies `docs` (Deployments, Services and ConfigMaps, each with its namespace),
/// all at once. Errors: the first refused, or an unsupported kind.
pub async fn apply_docs(
    client: kube::Client,
    docs: Vec<Value>,
    until: Instant,
) -> Result<(), Error> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    futures::future::try_join_all(docs.iter().map(|doc| {
        let (client, pp) = (client.clone(), &pp);
        async move {
            let name = name_of(doc)?;
            let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
            let kind = doc["kind"].as_str().unwrap_or_default();
            let what = format!("apply {kind} {ns}/{name}");
            let patch = Patch::Apply(doc);
            match kind {
                "Deployment" => {
                    let api: Api<Deployment> = Api::namespaced(client, ns);
                    retry(&what, until, || api.patch(&name, pp, &patch))
                        .await
                        .map(|_| ())
                }
                "Service" => {
                    let api: Api<Service> = Api::namespaced(client, ns);
                    retry(&what, until, || api.patch(&name, pp, &patch))
                        .await
                        .map(|_| ())
                }
                "Job" => {
                    let api: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client, ns);
                    retry(&what, until, || api.patch(&name, pp, &patch))
                        .await
                        .map(|_| ())
                }
                "ConfigMap" => {
                    let api: Api<ConfigMap> = Api::namespaced(client, ns);
                    retry(&what, until, || api.patch(&name, pp, &patch))
                        .await
                        .map(|_| ())
                }
                _ => Err(Error::Setup(format!("{what}: kind not supported here"))),
            }
        }
    }))
    .await
    .map(|_| ())
}

/// Whether a Deployment (as JSON) has rolled out, by `kubectl rollout status`'s rule
/// (k8s.io/kubectl pkg/polymorphichelpers/rollout_status.go `DeploymentStatusViewer.Status`):
/// once `status.observedGeneration` has reached `metadata.generation`, it is rolled out when
/// `updatedReplicas` has reached `spec.replicas` (default 1), no old replicas are left
/// (`replicas` not above `updatedReplicas`) and every updated replica is available. Errors:
/// its Progressing condition says ProgressDeadlineExceeded (kubectl: "exceeded its progress
/// deadline").
pub fn rolled_out(d: &Value) -> Result<bool, String> {
    let st = &d["status"];
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    if n(&d["metadata"]["generation"]) > n(&st["observedGeneration"]) {
        return Ok(false);
    }
    let timed_out = st["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded")
    });
    if timed_out {
        return Err(format!(
            "deployment {:?} exceeded its progress deadline",
            d["metadata"]["name"].as_str().unwrap_or_default()
        ));
    }
    let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let updated = n(&st["updatedReplicas"]);
    Ok(updated >= want && n(&st["replicas"]) <= updated && n(&st["availableReplicas"]) >= updated)
}

/// The Deployment `ns/name` as JSON. Errors: the API's.
pub async fn get_deployment(client: kube::Client, ns: &str, name: &str) -> Result<Value, String> {
    let api: Api<Deployment> = Api::namespaced(client, ns);
    let d = api.get(name).await.map_err(|e| e.to_string())?;
    serde_json::to_value(d).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::rolled_out;
    use serde_json::json;

    fn deploy(generation: i64, status: serde_json::Value) -> serde_json::Value {
        json!({"metadata": {"name": "source-controller", "generation": generation},
            "spec": {"replicas": 1}, "status": status})
    }

    #[test]
    fn rolled_out_follows_kubectl_rollout_status() {
        // Spec change not observed yet.
        let d = deploy(
            2,
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}),
        );
        assert_eq!(rolled_out(&d), Ok(false));
        // No pod yet.
        assert_eq!(
            rolled_out(&deploy(1, json!({"observedGeneration": 1}))),
            Ok(false)
        );
        // Updated but not available.
        let d = deploy(
            1,
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}),
        );
        assert_eq!(rolled_out(&d), Ok(false));
        // An old replica still there.
        let d = deploy(
            1,
            json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}),
        );
        assert_eq!(rolled_out(&d), Ok(false));
        // Done.
        let d = deploy(
            1,
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}),
        );
        assert_eq!(rolled_out(&d), Ok(true));
        // Past its progress deadline.
        let d = deploy(
            1,
            json!({"observedGeneration": 1, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
        );
        let e = rolled_out(&d).unwrap_err();
        assert!(e.contains("exceeded its progress deadline"), "{e}");
    }

    #[test]
    fn read_manifests_reads_a_directory_as_kubectl_does() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("b.yaml"),
            "---\nkind: B\nmetadata: {name: b}\n---\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("a.yml"),
            "kind: A\nmetadata: {name: a}\n---\nkind: A2\nmetadata: {name: a2}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("c.json"),
            "{\"kind\": \"C\", \"metadata\": {\"name\": \"c\"}}",
        )
        .unwrap();
        std::fs::write(dir.path().join("README.md"), "not a manifest").unwrap();
        let docs = super::read_manifests(&[dir.path().to_path_buf()]).unwrap();
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["A", "A2", "B", "C"]);
        std::fs::write(dir.path().join("d.yaml"), "kind: [unclosed\n").unwrap();
        let e = super::read_manifests(&[dir.path().to_path_buf()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("d.yaml"), "{e}");
    }
}
