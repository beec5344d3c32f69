//! The Gateway API parts of a cluster, each opt-in ([`crate::ClusterOptions`]): the Gateway API
//! standard CRDs, Envoy Gateway (the controller, for real; its Envoy data plane cannot run
//! here) and MetalLB's controller (for real: it assigns LoadBalancer addresses from
//! IPAddressPools; no speaker, so nothing announces them).
//!
//! Built by `build.sh gateway` (modules `envoygateway/` and `metallb/`, their own cache keys),
//! only when a cluster asks for one of them ([`bin_dir`]). Their pods run as host processes of
//! the node agent, as the Flux controllers do:
//! - Envoy Gateway's `certgen` Job (`envoy-gateway certgen`, as the Helm chart's Job runs it)
//!   creates the control plane's Secrets; the `envoy-gateway` Deployment's pod runs
//!   `envoy-gateway server` with the Kubernetes provider. Envoy Gateway v1.9.1 reads its xDS and
//!   webhook certificates from the fixed path `/certs` (internal/xds/runner/runner.go
//!   `xdsTLSCertFilepath`, internal/provider/kubernetes/kubernetes.go `webhookTLSCertDir`),
//!   where the chart mounts the Secret `envoy-gateway`: the host process runs in a private
//!   mount namespace (`unshare --mount`) with the Secret's keys, read with kubectl as the
//!   kubelet projects a secret volume, bind-mounted on `/certs` (an empty directory the harness
//!   creates on the host once). Its ConfigMap `envoy-gateway-config` is written to the pod's
//!   directory and `--config-path` points there.
//! - The Envoy proxy Deployments Envoy Gateway creates use `docker.io/envoyproxy/envoy`, a C++
//!   binary: the node agent cannot pull it, so their pods stay in `ErrImagePull` /
//!   `ImagePullBackOff` and the proxy Deployment is unavailable. That is real state for
//!   `kubectl gatewaycheck` to explain, not a defect of the harness.
//! - MetalLB's `controller` Deployment (webhooks off: no webhook Service can be reached here).
//!
//! Envoy Gateway binds fixed ports (health 8081, xDS 18000, metrics 19001, admin 19000, webhook
//! 9443): its certgen Job and server run in a network namespace of the cluster's own
//! ([`crate::netns`], as a pod has one), where the API server is reachable at the same
//! address, so any number of clusters with Envoy Gateway run at once (a test group's and the
//! demo's).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::node::{HostImage, HostImages};
use crate::{ClusterOptions, Error, start};

/// Envoy Gateway release built by `envoygateway/` (`github.com/envoyproxy/gateway`).
pub const ENVOY_GATEWAY_VERSION: &str = "v1.9.1";
/// The Gateway API release whose standard-channel CRDs are installed (`sigs.k8s.io/gateway-api`,
/// `config/crd/standard`, as released: controller-gen output). Envoy Gateway v1.9.1 requires
/// v1.6.1; `envoygateway/go.mod` raises it to this patch release, so the controller is built
/// against the CRDs it serves.
pub const GATEWAY_API_VERSION: &str = "v1.6.3";
/// MetalLB release built by `metallb/` (`go.universe.tf/metallb`, its `controller`). Not v0.16.2,
/// the newest: it requires `github.com/metallb/frr-k8s` v0.0.27, whose zip the Go module proxy
/// refuses (403; the proxy lists frr-k8s v0.0.17, v0.0.18, v0.0.21 only), and with v0.0.21 it
/// does not compile (internal/bgp/frrk8s: `undefined: frrv1beta1.AsPathPrependPrefixes`).
/// v0.15.2 (the next release the proxy lists) requires frr-k8s v0.0.20, also not served;
/// `metallb/go.mod` requires v0.0.21, a later patch release of that line, with which it builds.
pub const METALLB_VERSION: &str = "v0.15.2";

/// Envoy Gateway's namespace (the Helm chart's default).
pub const ENVOY_GATEWAY_NS: &str = "envoy-gateway-system";
/// MetalLB's namespace (its manifests' default).
pub const METALLB_NS: &str = "metallb-system";
/// Envoy Gateway's default GatewayClass controllerName (api/v1alpha1
/// `GatewayControllerName`).
pub const ENVOY_GATEWAY_CONTROLLER: &str = "gateway.envoyproxy.io/gatewayclass-controller";
/// The image of Envoy Gateway's Deployment and certgen Job (the chart's `eg.image`).
pub const ENVOY_GATEWAY_IMAGE: &str = "docker.io/envoyproxy/gateway:v1.9.1";
/// The image of MetalLB's controller Deployment.
pub const METALLB_IMAGE: &str = "quay.io/metallb/controller:v0.15.2";

/// Whether `opts` asks for a part built by `build.sh gateway`.
pub fn wanted(opts: &ClusterOptions) -> bool {
    opts.envoy_gateway || opts.metallb
}

/// The bin dir after `build.sh gateway` (builds `envoygateway/` and `metallb/` on first use;
/// cold: see the README). Errors: [`Error::Setup`] when the build fails.
pub fn bin_dir() -> Result<&'static Path, Error> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(d) = std::env::var_os("CLUSTER_LOOP_REALCLUSTER_BIN") {
            return Ok(PathBuf::from(d));
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh");
        // ./demo's set holds these modules too and fewer others (the same output dir).
        let set = match std::env::var("CLUSTER_LOOP_BUILD_SET").as_deref() {
            Ok("demo") => "demo",
            _ => "gateway",
        };
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg(set)
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("run {} {set}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} {set} failed ({}); run it by hand to see why",
                script.display(),
                out.status
            ));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(|e| Error::Setup(e.clone()))
}

fn crd_dir(name: &str, version: &str) -> Result<PathBuf, Error> {
    let d = bin_dir()?
        .parent()
        .unwrap_or(Path::new("/"))
        .join("crds")
        .join(format!("{name}-{version}"));
    std::fs::canonicalize(&d).map_err(|e| Error::Setup(format!("{}: {e}", d.display())))
}

fn bin(name: &str) -> Result<PathBuf, Error> {
    let p = bin_dir()?.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(Error::Setup(format!(
            "{} is missing: rebuild with tests/realcluster/build.sh gateway",
            p.display()
        )))
    }
}

/// The CRDs `opts` asks for: the Gateway API standard channel (with Envoy Gateway or
/// [`ClusterOptions::gateway_api_crds`]), Envoy Gateway's own (EnvoyProxy, ...), MetalLB's
/// (IPAddressPool, L2Advertisement, ...). Only CustomResourceDefinitions: the Gateway API
/// release's ValidatingAdmissionPolicy (`vap_safeupgrades`) is left out. Errors: a missing or
/// unreadable dir.
pub fn crds(opts: &ClusterOptions) -> Result<Vec<Value>, Error> {
    let mut dirs = Vec::new();
    if opts.gateway_api_crds || opts.envoy_gateway {
        dirs.push(crd_dir("gateway-api", GATEWAY_API_VERSION)?);
    }
    if opts.envoy_gateway {
        dirs.push(crd_dir("envoy-gateway", ENVOY_GATEWAY_VERSION)?);
    }
    if opts.metallb {
        dirs.push(crd_dir("metallb-controller", METALLB_VERSION)?);
    }
    Ok(start::read_manifests(&dirs)?
        .into_iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect())
}

/// Envoy Gateway's configuration as the Helm chart renders it by default
/// (charts/gateway-helm templates/_helpers.tpl `eg.default-envoy-gateway-config`: the
/// Kubernetes provider, the default controllerName), with the topology injector off (its
/// MutatingWebhookConfiguration needs a reachable webhook Service).
pub const ENVOY_GATEWAY_CONFIG: &str = "apiVersion: gateway.envoyproxy.io/v1alpha1
kind: EnvoyGateway
gateway:
  controllerName: gateway.envoyproxy.io/gatewayclass-controller
logging:
  level:
    default: info
provider:
  type: Kubernetes
  kubernetes:
    proxyTopologyInjector:
      disabled: true
";

/// The objects of the parts `opts` asks for, beside the CRDs: namespaces, Envoy Gateway's
/// ConfigMap, certgen Job, Deployment and Service (the chart's, trimmed to what runs here),
/// MetalLB's controller Deployment.
pub fn docs(opts: &ClusterOptions) -> Vec<Value> {
    let mut docs = Vec::new();
    if opts.envoy_gateway {
        let labels = json!({"app.kubernetes.io/name": "gateway-helm", "app.kubernetes.io/instance": "eg", "control-plane": "envoy-gateway"});
        let env = json!([{"name": "ENVOY_GATEWAY_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "KUBERNETES_CLUSTER_DOMAIN", "value": "cluster.local"}]);
        docs.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "envoy-gateway-config", "namespace": ENVOY_GATEWAY_NS},
            "data": {"envoy-gateway.yaml": ENVOY_GATEWAY_CONFIG}}));
        docs.push(json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "eg-gateway-helm-certgen", "namespace": ENVOY_GATEWAY_NS},
            "spec": {"backoffLimit": 1, "ttlSecondsAfterFinished": 30, "template": {
                "metadata": {"labels": {"app": "certgen"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "envoy-gateway-certgen",
                    "image": ENVOY_GATEWAY_IMAGE, "args": ["certgen", "--disable-topology-injector"],
                    "env": env}]}}}}));
        docs.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "envoy-gateway", "namespace": ENVOY_GATEWAY_NS, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"control-plane": "envoy-gateway"}},
                "template": {"metadata": {"labels": labels},
                    "spec": {"terminationGracePeriodSeconds": 10, "containers": [{"name": "envoy-gateway",
                        "image": ENVOY_GATEWAY_IMAGE,
                        "args": ["server", "--config-path=/config/envoy-gateway.yaml"],
                        "env": env,
                        "ports": [{"containerPort": 18000, "name": "grpc"}, {"containerPort": 18001, "name": "ratelimit"},
                            {"containerPort": 18002, "name": "wasm"}, {"containerPort": 19001, "name": "metrics"},
                            {"containerPort": 9443, "name": "webhook"}]}]}}}}));
        docs.push(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "envoy-gateway", "namespace": ENVOY_GATEWAY_NS, "labels": labels},
            "spec": {"selector": {"control-plane": "envoy-gateway"},
                "ports": [{"name": "grpc", "port": 18000, "targetPort": 18000},
                    {"name": "ratelimit", "port": 18001, "targetPort": 18001},
                    {"name": "wasm", "port": 18002, "targetPort": 18002},
                    {"name": "metrics", "port": 19001, "targetPort": 19001},
                    {"name": "webhook", "port": 9443, "targetPort": 9443}]}}));
    }
    if opts.metallb {
        let labels = json!({"app": "metallb", "component": "controller"});
        docs.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "controller", "namespace": METALLB_NS, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels},
                    "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "controller",
                        "image": METALLB_IMAGE,
                        "args": ["--port=7472", "--log-level=info", "--tls-min-version=VersionTLS12"],
                        "env": [{"name": "METALLB_ML_SECRET_NAME", "value": "memberlist"},
                            {"name": "METALLB_DEPLOYMENT", "value": "controller"}]}]}}}}));
    }
    docs
}

/// The namespaces of the parts `opts` asks for.
pub fn namespaces(opts: &ClusterOptions) -> Vec<&'static str> {
    let mut ns = Vec::new();
    if opts.envoy_gateway {
        ns.push(ENVOY_GATEWAY_NS);
    }
    if opts.metallb {
        ns.push(METALLB_NS);
    }
    ns
}

/// Envoy Gateway's wrapper: the pod's `certs` secret volume (Secret `envoy-gateway`, made by
/// the certgen Job) read with kubectl as the kubelet projects it (waiting for it, as the
/// kubelet retries a missing Secret's mount), bind-mounted on `/certs` in the process's own
/// mount namespace; then the server. `$1` the pod's cert dir, `$2` the binary, then its args.
const EG_WRAPPER: &str = r#"certs=$1; bin=$2; shift 2
ns=$ENVOY_GATEWAY_NAMESPACE
i=0
until kubectl get secret -n "$ns" envoy-gateway >/dev/null 2>&1; do
  i=$((i+1)); [ "$i" -ge 600 ] && { echo "MountVolume.SetUp failed: secret \"envoy-gateway\" not found" >&2; exit 1; }
  sleep 0.2
done
for k in tls.crt tls.key ca.crt; do
  kubectl get secret -n "$ns" envoy-gateway -o "jsonpath={.data.${k%.*}\.${k#*.}}" | base64 -d > "$certs/$k" || exit 1
done
mount --bind "$certs" /certs || exit 1
exec "$bin" "$@"
"#;

/// The host images of the parts `opts` asks for, with `env` (KUBECONFIG) and the cluster dir
/// `dir` (Envoy Gateway's config and certificates). Errors: a missing binary, or the `/certs`
/// mount point that cannot be made.
pub fn host_images(
    opts: &ClusterOptions,
    dir: &Path,
    env: &[(String, String)],
    net: Option<&crate::netns::PrivateNet>,
) -> Result<HostImages, Error> {
    let mut hosts = HostImages::new();
    let setup = |what: &str, e: std::io::Error| Error::Setup(format!("{what}: {e}"));
    if opts.envoy_gateway {
        let program = bin(&format!("envoy-gateway-{ENVOY_GATEWAY_VERSION}"))?;
        let eg_dir = dir.join("envoy-gateway");
        let certs = eg_dir.join("certs");
        std::fs::create_dir_all(&certs).map_err(|e| setup("envoy-gateway dir", e))?;
        let config = eg_dir.join("envoy-gateway.yaml");
        std::fs::write(&config, ENVOY_GATEWAY_CONFIG).map_err(|e| setup("config", e))?;
        std::fs::create_dir_all("/certs").map_err(|e| setup("mount point /certs", e))?;
        let mut env = env.to_vec();
        env.push(("ENVOY_GATEWAY_NAMESPACE".into(), ENVOY_GATEWAY_NS.into()));
        env.push(("KUBERNETES_CLUSTER_DOMAIN".into(), "cluster.local".into()));
        let bin_s = program.to_string_lossy().into_owned();
        let (certs_s, config_s) = (
            certs.to_string_lossy().into_owned(),
            config.to_string_lossy().into_owned(),
        );
        // In its own network namespace when given (see crate::netns): nsenter, then unshare.
        let nsenter = net.map(crate::netns::PrivateNet::nsenter_args);
        hosts.insert(
            ENVOY_GATEWAY_IMAGE.to_owned(),
            HostImage {
                program: PathBuf::from(if nsenter.is_some() {
                    "nsenter"
                } else {
                    "unshare"
                }),
                env,
                app: None,
                rewrite: Arc::new(move |args: &[String]| {
                    let server = args.first().is_some_and(|a| a == "server");
                    let args: Vec<String> = args
                        .iter()
                        .map(|a| match a.strip_prefix("--config-path=") {
                            Some(_) => format!("--config-path={config_s}"),
                            None => a.clone(),
                        })
                        .collect();
                    let mut out: Vec<String> = Vec::new();
                    if let Some(pre) = &nsenter {
                        out.extend(pre.iter().cloned());
                        out.push("unshare".into());
                    }
                    out.extend(["--mount", "--propagation", "private"].map(String::from));
                    if server {
                        out.extend(["sh", "-c", EG_WRAPPER, "envoy-gateway"].map(String::from));
                        out.push(certs_s.clone());
                    }
                    out.push(bin_s.clone());
                    out.extend(args);
                    out
                }),
            },
        );
    }
    if opts.metallb {
        let program = bin(&format!("metallb-controller-{METALLB_VERSION}"))?;
        let mut env = env.to_vec();
        env.push(("METALLB_NAMESPACE".into(), METALLB_NS.into()));
        hosts.insert(
            METALLB_IMAGE.to_owned(),
            HostImage {
                program,
                env,
                // Webhooks off (no webhook Service reaches a host process), no metrics listener
                // (clusters share the host).
                app: None,
                rewrite: Arc::new(|args: &[String]| {
                    let mut out: Vec<String> = args
                        .iter()
                        .filter(|a| !a.starts_with("--port="))
                        .cloned()
                        .collect();
                    out.extend(
                        [
                            "--port=0",
                            "--webhook-mode=disabled",
                            "--disable-cert-rotation=true",
                        ]
                        .map(String::from),
                    );
                    out
                }),
            },
        );
    }
    Ok(hosts)
}

/// Applies [`namespaces`] and [`docs`], then waits until each Deployment has rolled out
/// (`kubectl rollout status`'s rule), before `until`. Errors: the step that failed.
pub async fn apply_and_wait(
    client: kube::Client,
    opts: &ClusterOptions,
    until: Instant,
) -> Result<(), Error> {
    for ns in namespaces(opts) {
        start::apply_namespace(client.clone(), ns, until).await?;
    }
    start::apply_docs(client.clone(), docs(opts), until).await?;
    let mut want = Vec::new();
    if opts.envoy_gateway {
        want.push((ENVOY_GATEWAY_NS, "envoy-gateway"));
    }
    if opts.metallb {
        want.push((METALLB_NS, "controller"));
    }
    let mut last = String::new();
    while !want.is_empty() {
        let mut still = Vec::new();
        for (ns, name) in want {
            match start::get_deployment(client.clone(), ns, name)
                .await
                .and_then(|d| start::rolled_out(&d))
            {
                Ok(true) => {}
                Ok(false) => still.push((ns, name)),
                Err(e) => {
                    last = e;
                    still.push((ns, name));
                }
            }
        }
        want = still;
        if want.is_empty() {
            break;
        }
        if Instant::now() >= until {
            return Err(Error::Setup(format!(
                "deployment {} not rolled out in time{}",
                want.iter()
                    .map(|(ns, n)| format!("{ns}/{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if last.is_empty() {
                    String::new()
                } else {
                    format!(": {last}")
                }
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}
