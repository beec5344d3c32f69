//! realcluster: a real Kubernetes control plane and the real Flux controllers, for
//! cluster-loop's tests and demo.
//!
//! Real (built from Go modules by `build.sh`, versions in [`bins`]): etcd (embedded, our small
//! main), kube-apiserver and kube-controller-manager from `k8s.io/kubernetes`, source-controller
//! and kustomize-controller (the current release and v1.7.3), image-reflector-controller,
//! image-automation-controller and helm-controller (the releases the Go module proxy serves,
//! built but run only when [`ClusterOptions`] asks), and every Flux CRD as released in those
//! controllers' modules. Ours (nothing real can run here): the node agent
//! ([`node`]: kubelet and scheduler half; with [`kubelet`] it runs probe-image pods for real
//! through the twin's pod runtime and serves their logs), the Git server (`twin::git`,
//! git-http-backend behind our HTTP front),
//! the registry (a list of pullable references), and the forward proxy that serves the real OCI
//! registry under a fleet's registry names ([`oci_proxy`]).
//!
//! ```no_run
//! let cluster = realcluster::Cluster::shared().unwrap();   // a lease: up while leased
//! // kubectl --kubeconfig <cluster.kubeconfig()> get ks -n flux-system
//! ```
//!
//! Every process dies with the test process (see [`proc`]); the working directory
//! (`$TMPDIR/realcluster-<pid>-*`) is removed on drop, and stale ones of dead test processes are
//! removed at the next start.

pub mod bins;
mod cell;
pub mod gateway;
pub mod kubelet;
pub mod netns;
pub mod node;
pub mod oci;
pub mod oci_proxy;
pub mod pki;
pub mod proc;
pub mod proxy;
mod reads;
pub mod realnode;
mod start;
pub mod testkit;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub use cell::{ClusterCell, LINGER, Lease};
use proc::{Proc, Spec, free_port, listening};

/// Errors of the harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Building, writing or starting something failed.
    #[error("realcluster: {0}")]
    Setup(String),
    /// A control-plane process exited during start.
    #[error("realcluster: {name} exited ({status}); log tail:\n{log_tail}")]
    ProcessExited {
        /// Process name.
        name: String,
        /// Exit status.
        status: String,
        /// Last lines of its log.
        log_tail: String,
    },
    /// An API call failed.
    #[error("realcluster: {0}")]
    Kube(#[from] kube::Error),
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// kustomize-controller release to deploy ([`bins::KC_CURRENT`] or [`bins::KC_V17`]).
    pub kustomize_controller: String,
    /// Extra kustomize-controller args (e.g. `--feature-gates=CancelHealthCheckOnNewRevision=true`).
    pub kustomize_controller_args: Vec<String>,
    /// Run kustomize-controller with leader election on, as `flux install` does
    /// (`--enable-leader-election`): its process runs in a mount and UTS namespace of its
    /// own (`unshare`) with the pod's name as host name (controller-runtime's identity is
    /// `hostname_uuid`) and a service-account namespace file (`flux-system`) bind-mounted at
    /// `/var/run/secrets/kubernetes.io/serviceaccount` (controller-runtime puts its Lease in
    /// that namespace), so it takes, renews and releases its real Lease and reconciles only
    /// while it leads. Off by default: the controllers then run with
    /// `--enable-leader-election=false`, and their Deployments say so.
    pub kustomize_controller_leader_election: bool,
    /// Images the node can pull (see [`node::Registry`]).
    pub images: Vec<String>,
    /// Also run image-reflector-controller ([`bins::IRC_CURRENT`]) as a Deployment (off by
    /// default: each controller adds to every cluster's start and CPU; the CRDs are always
    /// installed). It reconciles ImageRepository and ImagePolicy (main shard, as the others),
    /// and the cluster serves a real OCI registry for it to scan ([`Cluster::oci`]).
    pub image_reflector_controller: bool,
    /// Also run image-automation-controller ([`bins::IAC_CURRENT`]): ImageUpdateAutomation,
    /// pushing to the cluster's Git server. Off by default.
    pub image_automation_controller: bool,
    /// Names (`host:port`) the real OCI registry is also served as, over HTTPS, as a fleet's
    /// ImageRepositories name their registry (e.g. `registry.example.local:5000`, with no
    /// `spec.insecure`): the harness's forward proxy ([`oci_proxy`]) serves them, and
    /// image-reflector-controller's Deployment gets its `HTTPS_PROXY`, `NO_PROXY` and
    /// `SSL_CERT_FILE` ([`oci_proxy::RegistryProxy::env`]). Empty by default; needs
    /// `image_reflector_controller`.
    pub registry_names: Vec<String>,
    /// Also run helm-controller ([`bins::HELM_CURRENT`]): HelmRelease. Off by default.
    pub helm_controller: bool,
    /// Install the Gateway API standard CRDs ([`gateway::GATEWAY_API_VERSION`]; implied by
    /// `envoy_gateway`). Off by default, like every part of [`gateway`] (built by
    /// `build.sh gateway` on first use).
    pub gateway_api_crds: bool,
    /// Run Envoy Gateway ([`gateway::ENVOY_GATEWAY_VERSION`]): its certgen Job and controller,
    /// for real; its Envoy data plane cannot run here (see [`gateway`]).
    pub envoy_gateway: bool,
    /// Run MetalLB's controller ([`gateway::METALLB_VERSION`]) and install its CRDs
    /// (IPAddressPool, ...): LoadBalancer Services get addresses from a pool a test makes.
    pub metallb: bool,
    /// A user of the cluster's Git server ([`GitUser`]), whose named tokens can be minted and
    /// revoked while the cluster runs (in process: [`twin::git::GitServer::mint_token`],
    /// [`twin::git::GitServer::revoke_named_token`]; from a shell: the server's Gitea-shaped
    /// token API, [`twin::git::GitServer::tokens_url`]), for fleets that require auth
    /// ([`Cluster::auth_fleet`]). `None` by default: no repository requires auth.
    pub git_user: Option<GitUser>,
    /// Run the containers of `python:*` images (Docker Hub's official image, any tag) for
    /// real from their own spec with the host's python3 ([`node::python_app_image`]): their
    /// `command`, `args`, `env` and the Service link variables the kubelet injects
    /// ([`node::pod_env`]), so an app that reads `REDIS_PORT` as a port number crashes as in a
    /// cluster (failure catalogue row 5). Off by default; the host needs `/usr/bin/python3`
    /// (the cluster fails to start without it).
    pub python_image: bool,
    /// Run the real kubelet ([`realnode::KUBELET_VERSION`]) on containerd
    /// ([`realnode::CONTAINERD_VERSION`]) and runc ([`realnode::RUNC_VERSION`]) as a second
    /// Node, [`realnode::REAL_NODE_NAME`], beside the node agent's ([`realnode`]): pods bound
    /// to it (`spec.nodeName`) run as real containers from images containerd pulls from the
    /// cluster's OCI registry ([`Cluster::real_node`]`.busybox_image()`). Off by default; the
    /// first cluster that asks builds `build.sh module:node` (kubelet, containerd, runc, CNI
    /// plugins; see the README for its time) and starts the OCI registry ([`Cluster::oci`]).
    pub real_kubelet: bool,
}

/// A user of the cluster's Git server ([`ClusterOptions::git_user`]).
#[derive(Debug, Clone)]
pub struct GitUser {
    /// User name (basic auth's username; the token API's `{user}`).
    pub name: String,
    /// Password: the token API's credential (and a Git credential, as on Gitea).
    pub password: String,
}

/// How a fleet's GitRepository authenticates to the cluster's Git server
/// ([`Cluster::auth_fleet`]): the Secret keys source-controller reads (fluxcd/pkg/git
/// `NewAuthOptions`), with the server's CA as `ca.crt` either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitAuth {
    /// `username` and `password` (the token): basic auth over HTTPS.
    Basic,
    /// `bearerToken`: `Authorization: Bearer` over HTTPS.
    Bearer,
}

/// A fleet whose repository requires auth ([`Cluster::auth_fleet`]).
#[derive(Debug, Clone)]
pub struct AuthFleet {
    /// The commit the fleet was created at (40 hex).
    pub sha: String,
    /// The name of the token Flux holds (the Git user's, minted for this fleet).
    pub token_name: String,
    /// The token itself.
    pub token: String,
    /// The Secret (in the fleet's namespace) the GitRepository's `spec.secretRef` names.
    pub secret: String,
    /// The repository's HTTPS URL (`spec.url`).
    pub url: String,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            kustomize_controller: bins::KC_CURRENT.to_owned(),
            kustomize_controller_args: Vec::new(),
            kustomize_controller_leader_election: false,
            images: Vec::new(),
            image_reflector_controller: false,
            image_automation_controller: false,
            registry_names: Vec::new(),
            helm_controller: false,
            gateway_api_crds: false,
            envoy_gateway: false,
            metallb: false,
            git_user: None,
            python_image: false,
            real_kubelet: false,
        }
    }
}

/// A running cluster. Dropping it stops every process and removes its directory.
pub struct Cluster {
    /// The real kubelet and containerd ([`ClusterOptions::real_kubelet`]), stopped first.
    real_node: Mutex<Option<realnode::RealNode>>,
    // Field order is drop order: the agent (and its host processes) first, then the probe
    // pod runtime and the log server, then the control plane, then the runtime, then the
    // directory.
    agent: Mutex<Option<node::NodeAgent>>,
    podexec: Mutex<Option<Arc<twin::podexec::PodExec>>>,
    /// Envoy Gateway's network namespace and API forwarder (dropped after the agent, which
    /// stops its processes).
    eg_net: Option<netns::PrivateNet>,
    log_server: Mutex<Option<kubelet::LogServer>>,
    procs: Mutex<Vec<Proc>>,
    oci_proxy: Option<oci_proxy::RegistryProxy>,
    oci: Option<oci::OciRegistry>,
    git: twin::git::GitServer,
    git_user: Option<GitUser>,
    registry: node::Registry,
    /// The in-process reader of [`Cluster::get_json`], made on its first use.
    reads: tokio::sync::OnceCell<reads::Reads>,
    /// [`Cluster::memo`]'s values, by type.
    memo: Mutex<HashMap<TypeId, Memo>>,
    rt: tokio::runtime::Runtime,
    kubeconfig: PathBuf,
    server: String,
    _lock: std::fs::File,
    dir: tempfile::TempDir,
}

/// One [`Cluster::memo`] value, made once (other callers wait for it).
type Memo = Arc<OnceLock<Arc<dyn Any + Send + Sync>>>;

/// Flux's namespace.
pub const FLUX_NS: &str = "flux-system";

/// The sharding label of Flux's sharding guide (fluxcd.io/flux/installation/configuration/
/// sharding: the main controllers run with `--watch-label-selector=!sharding.fluxcd.io/key`,
/// each shard's with `sharding.fluxcd.io/key=<shard>`). This cluster's source- and
/// kustomize-controller are the main shard and no other shard runs, so an object labelled with
/// this key is never reconciled here: a Kustomization's status is what a test writes as the
/// shard's controller would (a state held still, e.g. a run in progress or a request no worker
/// has taken yet); a GitRepository keeps its last artifact, still served, but nothing handles
/// a change of its spec. The selector filters each controller's own kinds only
/// (kustomize-controller v1.9.6 and v1.7.3 main.go: cache `ByObject` for `Kustomization`;
/// source-controller v1.9.6 main.go: for its source kinds), so a Kustomization still reads a
/// labelled source (but kustomize-controller does not see a labelled Kustomization, also not
/// as a dependency).
pub const HELD_SHARD_LABEL: &str = "sharding.fluxcd.io/key";

impl Cluster {
    /// A lease on this test binary's cluster of default options, started on first use and
    /// stopped [`LINGER`] after its last lease is dropped ([`ClusterCell`]).
    /// Errors: the start error (each later call returns it again).
    pub fn shared() -> Result<Lease, Error> {
        static SHARED: ClusterCell = ClusterCell::new();
        SHARED
            .lease(|| Cluster::start(ClusterOptions::default()))
            .map_err(Error::Setup)
    }

    /// The value of type `T` kept with this cluster, made by `init` on the first call for `T`
    /// (concurrent callers wait for it): what tests set up on a cluster once (objects every
    /// test of a group reads, a source's revision). A [`ClusterCell`]'s cluster started again
    /// is a new cluster with no values, so it is set up again. Key it by a type of the
    /// caller's own (a newtype) so two uses never share a value by accident.
    pub fn memo<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let slot = self
            .memo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(TypeId::of::<T>())
            .or_default()
            .clone();
        let value: Arc<dyn Any + Send + Sync> = slot.get_or_init(|| Arc::new(init())).clone();
        value
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("memo values are keyed by their type"))
    }

    /// Starts etcd, kube-apiserver, kube-controller-manager, the node agent, the Git server,
    /// the Flux CRDs and the source- and kustomize-controller Deployments, and waits until
    /// `/readyz` passes, the CRDs are Established and both controllers run.
    ///
    /// Independent steps overlap, with API calls made by one kube client instead of kubectl
    /// processes: the Git server starts and the CRD files are read while kube-apiserver
    /// starts; once `/readyz` passes, kube-controller-manager starts and, beside it, the CRDs
    /// and the Deployments are applied and the pod runtime starts; the node agent (which runs
    /// the controllers' pods) starts once the CRDs are Established, so a controller never
    /// starts before its kinds are served. Every wait polls at 100 ms.
    /// Errors: [`Error`] naming the step and, for a process, its log tail.
    pub fn start(opts: ClusterOptions) -> Result<Cluster, Error> {
        let started = std::time::Instant::now();
        // When each milestone was reached, for the "up in" line: where a start's time goes.
        let mut marks: Vec<(&str, Duration)> = Vec::new();
        let _slot = start_slot();
        marks.push(("start slot", started.elapsed()));
        let mut mark = |name: &'static str| marks.push((name, started.elapsed()));
        remove_stale_dirs();
        let mut dir = tempfile::Builder::new()
            .prefix(&format!("realcluster-{}-", std::process::id()))
            .tempdir()
            .map_err(|e| Error::Setup(format!("temp dir: {e}")))?;
        // REALCLUSTER_KEEP=1 keeps the directory (logs, kubeconfig) for a post-mortem, also
        // from the next start's remove_stale_dirs (KEEP_MARKER).
        if std::env::var_os("REALCLUSTER_KEEP").is_some() {
            dir.disable_cleanup(true);
            write(&dir.path().join(KEEP_MARKER), "REALCLUSTER_KEEP\n")?;
        }
        let d = dir.path();
        // Held (flock) for the cluster's life: remove_stale_dirs only removes directories
        // whose lock it can take, whatever PID namespace their owner runs in. Locked under
        // another name, then renamed (the lock stays with the open file): `.lock` is never
        // seen unlocked by a concurrent start's remove_stale_dirs (another test of this
        // process or another test process).
        let lock_err = |e: std::io::Error| Error::Setup(format!("lock file: {e}"));
        let lock = std::fs::File::create(d.join(".lock.new")).map_err(lock_err)?;
        lock.lock().map_err(lock_err)?;
        std::fs::rename(d.join(".lock.new"), d.join(".lock")).map_err(lock_err)?;
        let logs = d.join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| Error::Setup(e.to_string()))?;
        let pki = pki::generate(d)?;
        mark("pki");

        // Beside the control plane's start: the Git server (ours) and reading the CRD files
        // (released with the controllers build.sh builds; the ImageRepository, ImagePolicy,
        // ImageUpdateAutomation and HelmRelease CRDs are installed in every cluster so health
        // checks and plugins meet the real schema whether or not those controllers run).
        let git_thread = std::thread::Builder::new()
            .name("realcluster-git".into())
            .spawn(|| {
                twin::git::GitServer::start(twin::git::GitServerOptions::default())
                    .map_err(|e| Error::Setup(format!("git server: {e}")))
            })
            .map_err(|e| Error::Setup(format!("git server thread: {e}")))?;
        let crd_dirs = vec![
            bins::crd_dir("source-controller", bins::SC_CURRENT)?,
            bins::crd_dir("kustomize-controller", &opts.kustomize_controller)?,
            bins::crd_dir("image-reflector-controller", bins::IRC_CURRENT)?,
            bins::crd_dir("image-automation-controller", bins::IAC_CURRENT)?,
            bins::crd_dir("helm-controller", bins::HELM_CURRENT)?,
        ];
        // The Gateway parts' binaries and CRDs (`build.sh gateway`), only when asked for.
        let gateway_crds = if gateway::wanted(&opts) || opts.gateway_api_crds {
            gateway::crds(&opts)?
        } else {
            Vec::new()
        };
        let crd_thread = std::thread::Builder::new()
            .name("realcluster-crds".into())
            .spawn(move || {
                start::read_manifests(&crd_dirs).map(|mut d| {
                    d.extend(gateway_crds);
                    d
                })
            })
            .map_err(|e| Error::Setup(format!("CRD reader thread: {e}")))?;
        let mut procs = Vec::new();

        // etcd (retry on a port taken between free_port() and bind).
        let mut etcd_url = String::new();
        for attempt in 0..5 {
            let (cp, pp) = (free_port()?, free_port()?);
            let spec = Spec {
                name: format!("etcd-{attempt}"),
                program: bins::bin("etcd")?,
                args: vec![
                    "--data-dir".into(),
                    d.join("etcd").into(),
                    "--listen-client-url".into(),
                    format!("http://127.0.0.1:{cp}").into(),
                    "--listen-peer-url".into(),
                    format!("http://127.0.0.1:{pp}").into(),
                ],
                env: vec![],
            };
            let mut p = Proc::start(&spec, &logs)?;
            match p.wait_until(Duration::from_secs(30), |_| listening(cp)) {
                Ok(()) => {
                    etcd_url = format!("http://127.0.0.1:{cp}");
                    procs.push(p);
                    break;
                }
                Err(e) if attempt < 4 && p.log_tail(20).contains("address already in use") => {
                    let _ = e;
                }
                Err(e) => return Err(e),
            }
        }
        mark("etcd");

        // kube-apiserver.
        let mut server = String::new();
        for attempt in 0..5 {
            let port = free_port()?;
            let p = |x: &Path| x.as_os_str().to_owned();
            let spec = Spec {
                name: format!("kube-apiserver-{attempt}"),
                program: bins::bin("kube-apiserver")?,
                args: vec![
                    format!("--etcd-servers={etcd_url}").into(),
                    "--bind-address=127.0.0.1".into(),
                    "--advertise-address=127.0.0.1".into(),
                    format!("--secure-port={port}").into(),
                    "--endpoint-reconciler-type=none".into(),
                    // The node agent's Hostname address does not resolve here; reach the
                    // kubelet endpoint at its InternalIP (default order: Hostname,
                    // InternalDNS, InternalIP, ExternalDNS, ExternalIP, cmd/kube-apiserver
                    // app/options/options.go). No --kubelet-certificate-authority: the
                    // apiserver does not verify the kubelet's serving certificate.
                    "--kubelet-preferred-address-types=InternalIP".into(),
                    "--authorization-mode=RBAC".into(),
                    "--allow-privileged=true".into(),
                    "--service-cluster-ip-range=10.96.0.0/16".into(),
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                    concat("--service-account-key-file=", &p(&pki.sa_pub)),
                    concat("--service-account-signing-key-file=", &p(&pki.sa_key)),
                    concat("--client-ca-file=", &p(&pki.ca_cert)),
                    concat("--tls-cert-file=", &p(&pki.serving_cert)),
                    concat("--tls-private-key-file=", &p(&pki.serving_key)),
                    concat("--cert-dir=", &p(&d.join("apiserver-certs"))),
                    "--profiling=false".into(),
                    "--v=1".into(),
                ],
                env: vec![],
            };
            let mut proc = Proc::start(&spec, &logs)?;
            match proc.wait_until(Duration::from_secs(90), |_| listening(port)) {
                Ok(()) => {
                    server = format!("https://127.0.0.1:{port}");
                    procs.push(proc);
                    break;
                }
                Err(e) if attempt < 4 && proc.log_tail(40).contains("address already in use") => {
                    let _ = e;
                }
                Err(e) => return Err(e),
            }
        }
        mark("kube-apiserver listening");
        let kubeconfig = d.join("admin.kubeconfig");
        write(
            &kubeconfig,
            &pki::kubeconfig(&server, &pki.ca_cert, &pki.admin.0, &pki.admin.1, FLUX_NS),
        )?;
        let kcm_kubeconfig = d.join("kcm.kubeconfig");
        write(
            &kcm_kubeconfig,
            &pki::kubeconfig(
                &server,
                &pki.ca_cert,
                &pki.controller_manager.0,
                &pki.controller_manager.1,
                "kube-system",
            ),
        )?;

        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("realcluster-rt")
            .build()
            .map_err(|e| Error::Setup(format!("tokio runtime: {e}")))?;
        let client = rt.block_on(client_for(&kubeconfig))?;
        // Bounds for a loaded machine, not expected durations.
        let ready_until = std::time::Instant::now() + Duration::from_secs(90);

        let crds = crd_thread
            .join()
            .map_err(|_| Error::Setup("CRD reader panicked".into()))??;
        let mut last;
        loop {
            match rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(5), start::readyz(&client)).await
            }) {
                Ok(Ok(())) => break,
                Ok(Err(e)) => last = e,
                Err(_) => last = "no answer in 5s".into(),
            }
            if let Some(p) = procs.last_mut()
                && let Some(st) = p.exited()
            {
                return Err(Error::ProcessExited {
                    name: p.name().to_owned(),
                    status: st.to_string(),
                    log_tail: p.log_tail(30),
                });
            }
            if std::time::Instant::now() >= ready_until {
                let log = procs.last().map(|p| p.log_tail(20)).unwrap_or_default();
                return Err(Error::Setup(format!(
                    "kube-apiserver /readyz: not ready after 90s: {last}\nkube-apiserver log tail:\n{log}"
                )));
            }
            std::thread::sleep(start::POLL);
        }
        mark("kube-apiserver ready");

        // kube-controller-manager, kubeadm style: its own identity, one service account per
        // controller.
        let p = |x: &Path| x.as_os_str().to_owned();
        let kcm = Spec {
            name: "kube-controller-manager".into(),
            program: bins::bin("kube-controller-manager")?,
            args: vec![
                concat("--kubeconfig=", &p(&kcm_kubeconfig)),
                "--secure-port=0".into(),
                "--leader-elect=false".into(),
                "--use-service-account-credentials=true".into(),
                concat("--service-account-private-key-file=", &p(&pki.sa_key)),
                concat("--root-ca-file=", &p(&pki.ca_cert)),
                concat("--cluster-signing-cert-file=", &p(&pki.ca_cert)),
                concat("--cluster-signing-key-file=", &p(&pki.ca_key)),
                "--controllers=*".into(),
                "--concurrent-deployment-syncs=5".into(),
                "--v=1".into(),
            ],
            env: vec![],
        };
        // No wait here: the Flux Deployments' rollout below needs its deployment and
        // replicaset controllers, and that wait fails at once, with the log tail, if it exits.
        procs.push(Proc::start(&kcm, &logs)?);
        let api_until = std::time::Instant::now() + Duration::from_secs(90);

        // The CRDs, beside kube-controller-manager's start (the longest step from here: it
        // builds every controller before the deployment controller makes the Flux pods).
        // Not before /readyz: creating CRDs while kube-apiserver's post-start hooks run only
        // slows them down on a loaded machine (each CRD rebuilds the OpenAPI spec).
        let crd_task = {
            let client = client.clone();
            rt.spawn(async move {
                start::apply_namespace(client.clone(), FLUX_NS, api_until).await?;
                start::apply_crds(client, crds, api_until).await
            })
        };

        // The Flux Deployments (the deployment and replicaset controllers make their pods
        // while the CRDs become Established; no node runs them yet) and the cluster DNS as a
        // kubeadm cluster has it, which the pod runtime reads when it starts.
        let mut docs: Vec<serde_json::Value> = Vec::new();
        for yaml in [COREDNS_SERVICE.to_owned(), coredns_configmap("")] {
            docs.push(
                serde_saphyr::from_str(&yaml)
                    .map_err(|e| Error::Setup(format!("cluster DNS manifest: {e}")))?,
            );
        }
        // The later `--enable-leader-election` wins over main_shard_args' `=false` (Go flag).
        let mut kc_args = opts.kustomize_controller_args.clone();
        if opts.kustomize_controller_leader_election {
            kc_args.push("--enable-leader-election".to_owned());
        }
        let flux: serde_json::Value =
            serde_json::from_str(&flux_deployments(&opts.kustomize_controller, &kc_args))
                .map_err(|e| Error::Setup(format!("Flux Deployments: {e}")))?;
        docs.extend(flux["items"].as_array().cloned().unwrap_or_default());
        // A real OCI registry for image-reflector-controller to scan, and the proxy that
        // serves it under the fleet's registry names (its env goes into the Deployment).
        if !opts.registry_names.is_empty() && !opts.image_reflector_controller {
            return Err(Error::Setup(
                "ClusterOptions::registry_names needs image_reflector_controller".into(),
            ));
        }
        let oci = if opts.image_reflector_controller || opts.real_kubelet {
            Some(oci::OciRegistry::start(&logs)?)
        } else {
            None
        };
        let oci_proxy = match &oci {
            Some(reg) if !opts.registry_names.is_empty() => Some(rt.block_on(
                oci_proxy::RegistryProxy::start(&opts.registry_names, reg.host(), d),
            )?),
            _ => None,
        };
        let irc_env = oci_proxy
            .as_ref()
            .map(oci_proxy::RegistryProxy::env)
            .unwrap_or_default();
        docs.extend(extra_deployments(&opts, &irc_env));
        let apply_task = rt.spawn(start::apply_docs(client.clone(), docs, api_until));

        let registry = node::Registry::new(&opts.images);
        let mut hosts = node::HostImages::new();
        let env = vec![
            (
                "KUBECONFIG".to_owned(),
                kubeconfig.to_string_lossy().into_owned(),
            ),
            ("RUNTIME_NAMESPACE".to_owned(), FLUX_NS.to_owned()),
        ];
        let storage = d.join("source-controller-storage");
        std::fs::create_dir_all(&storage).map_err(|e| Error::Setup(format!("storage dir: {e}")))?;
        for (name, version) in [
            ("source-controller", bins::SC_CURRENT),
            ("kustomize-controller", bins::KC_CURRENT),
            ("kustomize-controller", bins::KC_V17),
            ("image-reflector-controller", bins::IRC_CURRENT),
            ("image-automation-controller", bins::IAC_CURRENT),
            ("helm-controller", bins::HELM_CURRENT),
        ] {
            let Ok(program) = bins::bin(&format!("{name}-{version}")) else {
                continue;
            };
            // source-controller's artifact storage and image-reflector-controller's image
            // database (badger, `--storage-path`, default /data) live in the cluster dir.
            let storage = match name {
                "source-controller" => Some(storage.clone()),
                "image-reflector-controller" => Some(d.join("image-reflector-controller-db")),
                _ => None,
            };
            let is_source = name == "source-controller";
            // The node agent runs a host process with its image's env, not the container's:
            // image-reflector-controller's proxy env is the same list its Deployment shows.
            let mut env = env.clone();
            if name == "image-reflector-controller" {
                env.extend(irc_env.iter().cloned());
            }
            let image = format!("ghcr.io/fluxcd/{name}:{version}");
            if name == "kustomize-controller" && opts.kustomize_controller_leader_election {
                hosts.insert(image, leader_election_host(d, program, env)?);
                continue;
            }
            hosts.insert(
                image,
                node::HostImage {
                    program,
                    env,
                    app: None,
                    rewrite: Arc::new(move |args: &[String]| {
                        host_args(args, is_source, storage.as_deref())
                    }),
                },
            );
        }
        // Envoy Gateway's own network namespace (its ports are fixed: see netns).
        let eg_net = if opts.envoy_gateway {
            let port = server
                .rsplit(':')
                .next()
                .and_then(|p| p.parse::<u16>().ok())
                .ok_or_else(|| Error::Setup(format!("no port in {server}")))?;
            Some(netns::PrivateNet::start(&rt, port)?)
        } else {
            None
        };
        hosts.extend(gateway::host_images(&opts, d, &env, eg_net.as_ref())?);
        if opts.python_image {
            let py = node::python_app_image().ok_or_else(|| {
                Error::Setup(
                    "ClusterOptions::python_image needs /usr/bin/python3 on this host (apt-get install -y python3)".into(),
                )
            })?;
            for repo in ["python", "docker.io/library/python"] {
                hosts.insert(format!("{repo}:*"), py.clone());
            }
        }
        // On a runtime worker thread, not this one: the pod runtime starts its processes with
        // PR_SET_PDEATHSIG, sent when the starting thread ends, and the workers live as long as
        // the cluster's runtime (Cluster::shared's caller thread ends after the start).
        let (kc, registry2, logs2) = (kubeconfig.clone(), registry.clone(), logs.clone());
        let (cert, key) = (pki.serving_cert.clone(), pki.serving_key.clone());
        let (agent, podexec, log_server) = rt
            .block_on(rt.spawn(async move {
                let (kubeconfig, registry, logs) = (kc, registry2, logs2);
                let client = client_for(&kubeconfig).await?;
                // The cluster DNS objects must exist before the pod runtime reads them.
                apply_task
                    .await
                    .map_err(|e| Error::Setup(format!("apply task: {e}")))??;
                let log_store = kubelet::LogStore::default();
                let log_server = kubelet::LogServer::start(log_store.clone(), &cert, &key).await?;
                // Probe-image pods run for real when this host can (root, unshare, dnsmasq, ...);
                // otherwise the agent treats them as any other image.
                let missing = twin::podexec::missing_prerequisites();
                let podexec = if missing.is_empty() {
                    let api = Arc::new(kubelet::KubeApi::new(client.clone(), log_store.clone()));
                    let opts = twin::podexec::PodExecOptions {
                        node_name: node::NODE_NAME.into(),
                        host_ip: "127.0.0.1".into(),
                        ..Default::default()
                    };
                    Some(Arc::new(
                        twin::podexec::PodExec::start_with(api, opts)
                            .await
                            .map_err(|e| Error::Setup(format!("pod runtime: {e}")))?,
                    ))
                } else {
                    eprintln!(
                        "realcluster: probe-image pods will not run (the pod runtime needs {})",
                        missing.join(", ")
                    );
                    None
                };
                // The controllers' pods run once their kinds are served.
                crd_task
                    .await
                    .map_err(|e| Error::Setup(format!("CRD task: {e}")))??;
                let agent = node::NodeAgent::start(
                    client,
                    registry.clone(),
                    hosts,
                    logs.clone(),
                    log_server.port(),
                    podexec.is_some(),
                    log_store,
                )
                .await
                .map_err(Error::from)?;
                Ok::<_, Error>((agent, podexec, log_server))
            }))
            .map_err(|e| Error::Setup(format!("node agent start: {e}")))??;
        mark("crds established, node agent");
        // The real kubelet's Node beside the agent's, once its RBAC can be applied.
        let real_node = match (&oci, opts.real_kubelet) {
            (Some(oci), true) => {
                let n = realnode::RealNode::start(d, &logs, &server, &pki, oci, &kubeconfig)?;
                mark("real kubelet registered");
                Some(n)
            }
            _ => None,
        };
        let git = git_thread
            .join()
            .map_err(|_| Error::Setup("git server start panicked".into()))??;
        if let Some(u) = &opts.git_user {
            git.add_user(&u.name, &u.password);
        }

        let mut names = vec!["source-controller", "kustomize-controller"];
        names.extend(
            [
                (
                    opts.image_reflector_controller,
                    "image-reflector-controller",
                ),
                (
                    opts.image_automation_controller,
                    "image-automation-controller",
                ),
                (opts.helm_controller, "helm-controller"),
            ]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name)),
        );
        let rollout_until = std::time::Instant::now() + Duration::from_secs(120);
        let mut waiting: Vec<&str> = names;
        let mut last = String::new();
        while !waiting.is_empty() {
            let mut still = Vec::new();
            for name in waiting {
                match rt
                    .block_on(start::get_deployment(client.clone(), FLUX_NS, name))
                    .and_then(|d| start::rolled_out(&d))
                {
                    Ok(true) => {}
                    Ok(false) => still.push(name),
                    Err(e) if e.contains("progress deadline") => {
                        return Err(Error::Setup(e));
                    }
                    Err(e) => {
                        last = e;
                        still.push(name);
                    }
                }
            }
            waiting = still;
            if waiting.is_empty() {
                break;
            }
            for p in procs.iter_mut() {
                if let Some(st) = p.exited() {
                    return Err(Error::ProcessExited {
                        name: p.name().to_owned(),
                        status: st.to_string(),
                        log_tail: p.log_tail(30),
                    });
                }
            }
            if std::time::Instant::now() >= rollout_until {
                return Err(Error::Setup(format!(
                    "deployment {} not rolled out after 120s{}",
                    waiting.join(", "),
                    if last.is_empty() {
                        String::new()
                    } else {
                        format!(": {last}")
                    }
                )));
            }
            std::thread::sleep(start::POLL);
        }
        mark("flux rollout");
        if gateway::wanted(&opts) {
            rt.block_on(gateway::apply_and_wait(
                client.clone(),
                &opts,
                std::time::Instant::now() + Duration::from_secs(120),
            ))?;
            mark("gateway rollout");
        }
        drop(client);

        let cluster = Cluster {
            real_node: Mutex::new(real_node),
            _lock: lock,
            agent: Mutex::new(Some(agent)),
            podexec: Mutex::new(podexec),
            eg_net,
            log_server: Mutex::new(Some(log_server)),
            procs: Mutex::new(procs),
            oci_proxy,
            oci,
            git,
            git_user: opts.git_user.clone(),
            registry,
            reads: tokio::sync::OnceCell::new(),
            memo: Mutex::new(HashMap::new()),
            rt,
            kubeconfig,
            server,
            dir,
        };
        let marks: Vec<String> = marks
            .iter()
            .map(|(n, d)| format!("{n} {:.1}s", d.as_secs_f64()))
            .collect();
        eprintln!(
            "realcluster: kube-apiserver {} and Flux up in {:.1}s (at: {}; {})",
            bins::KUBE_VERSION,
            started.elapsed().as_secs_f64(),
            marks.join(", "),
            cluster.dir().display()
        );
        Ok(cluster)
    }

    /// The admin kubeconfig (context `realcluster`, namespace flux-system).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The Git server.
    pub fn git(&self) -> &twin::git::GitServer {
        &self.git
    }

    /// The registry the node pulls from.
    pub fn registry(&self) -> &node::Registry {
        &self.registry
    }

    /// The real OCI registry (go-containerregistry's cmd/registry), started when
    /// [`ClusterOptions::image_reflector_controller`] or [`ClusterOptions::real_kubelet`] is on.
    pub fn oci(&self) -> Option<&oci::OciRegistry> {
        self.oci.as_ref()
    }

    /// The real kubelet's node ([`ClusterOptions::real_kubelet`]), while the cluster runs:
    /// call `f` with it (None without the option).
    pub fn real_node<R>(&self, f: impl FnOnce(Option<&realnode::RealNode>) -> R) -> R {
        f(self
            .real_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref())
    }

    /// Stops the real kubelet's node now (its containers, mounts, cgroups and bridge go;
    /// see [`realnode`]), as dropping the cluster does first. No-op without one.
    pub fn stop_real_node(&self) {
        drop(
            self.real_node
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }

    /// The proxy serving the OCI registry under [`ClusterOptions::registry_names`], when set.
    pub fn oci_proxy(&self) -> Option<&oci_proxy::RegistryProxy> {
        self.oci_proxy.as_ref()
    }

    /// The working directory (logs under `logs/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs real kubectl against the cluster; stdout on success.
    /// Errors: [`Error::Setup`] with kubectl's stderr.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, Error> {
        kubectl(&self.kubeconfig, args)
    }

    /// `kubectl ARGS` against this cluster with `stdin` on its standard input (e.g. `apply
    /// --dry-run=server -f -` of a rendered chart). Errors: kubectl's exit and stderr.
    pub fn kubectl_with_stdin(&self, args: &[&str], stdin: &str) -> Result<String, Error> {
        kubectl_stdin(&self.kubeconfig, args, stdin)
    }

    /// `kubectl apply --server-side -f -` of `yaml`.
    pub fn apply_yaml(&self, yaml: &str) -> Result<String, Error> {
        kubectl_stdin(
            &self.kubeconfig,
            &["apply", "--server-side", "--force-conflicts", "-f", "-"],
            yaml,
        )
    }

    /// A fleet repository `org/<name>` on the Git server holding `files` (path, text) on
    /// `main`, a GitRepository `<name>` (interval 1m) and a Kustomization `<name>` in
    /// flux-system whose spec is `sourceRef` plus `spec` (YAML lines at two-space indent, e.g.
    /// `"  path: ./\n  wait: true\n  timeout: 40s\n"`). Returns the commit SHA (40 hex).
    /// Errors: the Git server's or kubectl's.
    pub fn fleet(&self, name: &str, files: &[(&str, &str)], spec: &str) -> Result<String, Error> {
        let repo = format!("org/{name}");
        let git = |e: twin::git::GitError| Error::Setup(format!("git server: {e}"));
        self.git.create_repo(&repo, "main").map_err(git)?;
        let changes: Vec<twin::git::Change> = files
            .iter()
            .map(|(p, t)| twin::git::Change::write(*p, t.as_bytes().to_vec()))
            .collect();
        let sha = self.git.commit(&repo, &changes, "fleet").map_err(git)?;
        let url = self.git.url_http(&repo);
        self.apply_yaml(&format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec: {{interval: 1m, url: \"{url}\", ref: {{branch: main}}}}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {FLUX_NS}}}\nspec:\n  sourceRef: {{kind: GitRepository, name: {name}}}\n{spec}"
        ))?;
        Ok(sha)
    }

    /// Like [`Self::fleet`], in namespace `ns` (made if missing), but the repository requires
    /// auth as [`ClusterOptions::git_user`] (error without one) and the GitRepository reads it
    /// over HTTPS: a token named `<name>-1` is minted for the user, and the Secret
    /// `<name>-git-auth` in `ns` holds it as `auth` says (`username`/`password`, or
    /// `bearerToken`) with the server's CA as `ca.crt`, as Flux expects. Revoking that token
    /// ([`twin::git::GitServer::revoke_named_token`]) while Flux holds it is the failure
    /// catalogue's token rotation.
    pub fn auth_fleet(
        &self,
        ns: &str,
        name: &str,
        files: &[(&str, &str)],
        spec: &str,
        auth: GitAuth,
    ) -> Result<AuthFleet, Error> {
        let user = self.git_user.as_ref().ok_or_else(|| {
            Error::Setup(
                "auth_fleet needs ClusterOptions::git_user (a user of the Git server)".into(),
            )
        })?;
        let repo = format!("org/{name}");
        let git = |e: twin::git::GitError| Error::Setup(format!("git server: {e}"));
        self.git.create_repo(&repo, "main").map_err(git)?;
        // Auth with no per-repository token: the user's named tokens are the credentials.
        self.git.set_auth(&repo, &user.name, &[]).map_err(git)?;
        let changes: Vec<twin::git::Change> = files
            .iter()
            .map(|(p, t)| twin::git::Change::write(*p, t.as_bytes().to_vec()))
            .collect();
        let sha = self.git.commit(&repo, &changes, "fleet").map_err(git)?;
        let token_name = format!("{name}-1");
        let token = self.git.mint_token(&user.name, &token_name).map_err(git)?;
        let secret = format!("{name}-git-auth");
        let mut data = serde_json::Map::new();
        match auth {
            GitAuth::Basic => {
                data.insert("username".into(), user.name.clone().into());
                data.insert("password".into(), token.clone().into());
            }
            GitAuth::Bearer => {
                data.insert("bearerToken".into(), token.clone().into());
            }
        }
        data.insert("ca.crt".into(), self.git.ca_pem().into());
        let secret_json = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": secret, "namespace": ns}, "type": "Opaque",
            "stringData": data});
        self.apply_yaml(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
        ))?;
        self.apply_yaml(&secret_json.to_string())?;
        let url = self.git.url_https(&repo);
        self.apply_yaml(&format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{interval: 1m, url: \"{url}\", ref: {{branch: main}}, secretRef: {{name: {secret}}}}}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  sourceRef: {{kind: GitRepository, name: {name}}}\n{spec}"
        ))?;
        Ok(AuthFleet {
            sha,
            token_name,
            token,
            secret,
            url,
        })
    }

    /// Commits `files` on top of `org/<name>`'s main. Returns the new SHA.
    pub fn push(&self, name: &str, files: &[(&str, &str)], message: &str) -> Result<String, Error> {
        let changes: Vec<twin::git::Change> = files
            .iter()
            .map(|(p, t)| twin::git::Change::write(*p, t.as_bytes().to_vec()))
            .collect();
        self.git
            .commit(&format!("org/{name}"), &changes, message)
            .map_err(|e| Error::Setup(format!("git server: {e}")))
    }

    /// Host processes the node agent runs, by `namespace/pod`.
    pub fn host_processes(&self) -> Vec<(String, u32)> {
        self.agent
            .lock()
            .unwrap()
            .as_ref()
            .map(node::NodeAgent::host_processes)
            .unwrap_or_default()
    }

    /// The probe-image pod runtime (the twin's PodExec on this apiserver), when this host can
    /// run it ([`twin::podexec::missing_prerequisites`] empty).
    pub fn podexec(&self) -> Option<Arc<twin::podexec::PodExec>> {
        self.podexec.lock().unwrap().clone()
    }

    /// Sets what the node's upstream resolver answers for `name` (empty `ips`: NXDOMAIN), as
    /// [`twin::podexec::PodExec::set_upstream`], and waits until dnsmasq serves it. Callable
    /// from inside or outside a tokio runtime.
    /// Errors: no pod runtime here, or dnsmasq did not reload.
    pub fn set_upstream(&self, name: &str, ips: &[&str]) -> Result<(), Error> {
        let pe = self
            .podexec()
            .ok_or_else(|| Error::Setup("no pod runtime on this host".into()))?;
        let ips: Vec<String> = ips.iter().map(|s| s.to_string()).collect();
        std::thread::scope(|s| {
            s.spawn(|| self.rt.block_on(pe.set_upstream(name, &ips)))
                .join()
                .map_err(|_| Error::Setup("set_upstream panicked".into()))?
                .map(|_| ())
                .map_err(|e| Error::Setup(e.to_string()))
        })
    }

    /// Replaces the `kube-system/coredns` Corefile with kubeadm's plus `hosts_block` (lines
    /// of a CoreDNS `hosts` plugin block, e.g. `"192.168.2.20 gitea.prod.example.dev"`; empty:
    /// kubeadm's Corefile as is) and waits until the pod runtime's cluster DNS serves it.
    /// Errors: kubectl's, or the DNS reload's.
    pub fn set_corefile_hosts(&self, hosts_block: &str) -> Result<(), Error> {
        self.apply_yaml(&coredns_configmap(hosts_block))?;
        if let Some(pe) = self.podexec() {
            std::thread::scope(|s| {
                s.spawn(|| self.rt.block_on(pe.sync_dns()))
                    .join()
                    .map_err(|_| Error::Setup("sync_dns panicked".into()))?
                    .map(|_| ())
                    .map_err(|e| Error::Setup(e.to_string()))
            })?;
        }
        Ok(())
    }

    /// A kube client on the caller's runtime.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        client_for(&self.kubeconfig).await
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        drop(
            self.real_node
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let agent = self.agent.lock().unwrap().take();
        let _guard = self.rt.enter();
        drop(agent);
        drop(self.podexec.lock().unwrap().take());
        drop(self.eg_net.take());
        drop(self.log_server.lock().unwrap().take());
        for p in self.procs.lock().unwrap().iter_mut().rev() {
            p.kill();
        }
    }
}

/// Where controller-runtime reads the namespace of its leader-election Lease in a pod
/// (controller-runtime pkg/leaderelection `inClusterNamespacePath`, a file `namespace` there).
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The wrapper of a controller run with leader election ([`leader_election_host`]): inside
/// its own mount and UTS namespaces, the pod's name as host name and the service-account
/// directory bind-mounted, then the controller itself (exec: the node agent's process is the
/// controller's).
const LEADER_ELECTION_WRAPPER: &str = r#"sa=$1; bin=$2; shift 2
hostname "$REALCLUSTER_POD_NAME" || exit 1
mount --bind "$sa" /var/run/secrets/kubernetes.io/serviceaccount || exit 1
exec "$bin" "$@"
"#;

/// kustomize-controller's host image with leader election on
/// ([`ClusterOptions::kustomize_controller_leader_election`]): `unshare --mount --uts`, then
/// [`LEADER_ELECTION_WRAPPER`] with a service-account directory of this cluster holding
/// `namespace` = `flux-system`, then the controller with its Deployment's args, leader
/// election as they say. The mount point [`SA_DIR`] is made on the host (empty: nothing on
/// the host reads an empty directory as in-cluster). Errors: the directories cannot be made.
fn leader_election_host(
    dir: &Path,
    program: PathBuf,
    env: Vec<(String, String)>,
) -> Result<node::HostImage, Error> {
    let setup = |what: &str, e: std::io::Error| Error::Setup(format!("{what}: {e}"));
    let sa = dir.join("kustomize-controller-serviceaccount");
    std::fs::create_dir_all(&sa).map_err(|e| setup("service-account dir", e))?;
    std::fs::write(sa.join("namespace"), FLUX_NS).map_err(|e| setup("namespace file", e))?;
    std::fs::create_dir_all(SA_DIR).map_err(|e| setup(SA_DIR, e))?;
    let (sa, bin) = (
        sa.to_string_lossy().into_owned(),
        program.to_string_lossy().into_owned(),
    );
    Ok(node::HostImage {
        program: PathBuf::from("unshare"),
        env,
        app: None,
        rewrite: Arc::new(move |args: &[String]| {
            let mut out: Vec<String> = ["--mount", "--uts", "--propagation", "private", "sh", "-c"]
                .map(String::from)
                .to_vec();
            out.push(LEADER_ELECTION_WRAPPER.to_owned());
            out.push("kustomize-controller".to_owned());
            out.push(sa.clone());
            out.push(bin.clone());
            out.extend(
                args.iter()
                    .filter(|a| !a.starts_with("--metrics-addr") && !a.starts_with("--health-addr"))
                    .map(|a| a.replace("$(RUNTIME_NAMESPACE)", FLUX_NS)),
            );
            out.push("--metrics-addr=0".into());
            out.push("--health-addr=0".into());
            out
        }),
    })
}

/// Rewrites a controller's in-cluster args for a host process: no leader election, metrics and
/// health listeners off (several controllers share the host), `--storage-path` in `storage`
/// when given (source-controller's artifacts, image-reflector-controller's database), and for
/// source-controller its storage served on a loopback port (in a cluster `--storage-adv-addr`
/// names its Service).
fn host_args(args: &[String], is_source: bool, storage: Option<&Path>) -> Vec<String> {
    let mut out: Vec<String> = args
        .iter()
        .filter(|a| {
            !a.starts_with("--enable-leader-election")
                && !a.starts_with("--metrics-addr")
                && !a.starts_with("--health-addr")
                && !a.starts_with("--storage-")
        })
        .map(|a| a.replace("$(RUNTIME_NAMESPACE)", FLUX_NS))
        .collect();
    out.push("--enable-leader-election=false".into());
    out.push("--metrics-addr=0".into());
    out.push("--health-addr=0".into());
    if let Some(storage) = storage {
        out.push(format!("--storage-path={}", storage.display()));
    }
    if is_source {
        let port = free_port().unwrap_or(0);
        out.push(format!("--storage-addr=127.0.0.1:{port}"));
        out.push(format!("--storage-adv-addr=127.0.0.1:{port}"));
    }
    out
}

/// The main-shard args `flux install` gives every controller (flux2 manifests/bases and
/// install patches: `--watch-all-namespaces=true`, `--log-level=info`, `--log-encoding=json`,
/// `--enable-leader-election`: see below), with `--events-addr=` empty (no notification-controller here)
/// and the main shard's `--watch-label-selector=!sharding.fluxcd.io/key` ([`HELD_SHARD_LABEL`]).
///
/// Leader election: `flux install` sets `--enable-leader-election`, but here the controllers
/// run as host processes with it off, so their Deployments say `--enable-leader-election=false`:
/// what a plugin reads is what runs ([`ClusterOptions::kustomize_controller_leader_election`]
/// turns it on for kustomize-controller, for real).
fn main_shard_args() -> Vec<String> {
    vec![
        "--events-addr=".to_owned(),
        "--watch-all-namespaces=true".to_owned(),
        format!("--watch-label-selector=!{HELD_SHARD_LABEL}"),
        "--log-level=info".to_owned(),
        "--log-encoding=json".to_owned(),
        "--enable-leader-election=false".to_owned(),
    ]
}

/// A flux-system Deployment as `flux install` makes it for controller `name` (image
/// `ghcr.io/fluxcd/<name>:<version>`, container `manager`, `RUNTIME_NAMESPACE` from the pod's
/// namespace, the given args).
fn flux_deployment(name: &str, version: &str, args: Vec<String>) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": FLUX_NS, "labels": {"app": name, "app.kubernetes.io/part-of": "flux"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 10, "containers": [{
                    "name": "manager", "image": format!("ghcr.io/fluxcd/{name}:{version}"),
                    "args": args,
                    "env": [{"name": "RUNTIME_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                }]}}}
    })
}

/// The Deployments `flux install` makes for source- and kustomize-controller (flux2
/// manifests/bases: image, args), at the versions this harness builds, both as the main shard
/// of a sharded install ([`HELD_SHARD_LABEL`]).
pub fn flux_deployments(kc_version: &str, kc_args: &[String]) -> String {
    let mut kc = main_shard_args();
    kc.extend(kc_args.iter().cloned());
    let mut sc = main_shard_args();
    sc.push("--storage-path=/data".to_owned());
    sc.push(
        "--storage-adv-addr=source-controller.$(RUNTIME_NAMESPACE).svc.cluster.local.".to_owned(),
    );
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        flux_deployment("source-controller", bins::SC_CURRENT, sc),
        flux_deployment("kustomize-controller", kc_version, kc),
    ]})
    .to_string()
}

/// The Deployments of the controllers `opts` opts into (image-reflector-controller,
/// image-automation-controller, helm-controller), with the same main-shard args: each of them
/// takes `--watch-label-selector` (fluxcd/pkg runtime `helper.WatchOptions`) and filters only
/// its own kinds by it (main.go cache `ByObject`: image-reflector-controller v1.2.0
/// ImageRepository and ImagePolicy; image-automation-controller v1.2.0 ImageUpdateAutomation;
/// helm-controller v1.6.4 HelmRelease). image-reflector-controller keeps its default
/// `--storage-path=/data` (rewritten for the host process) and gets `irc_env` (name, value)
/// in its container's env after `RUNTIME_NAMESPACE` (the registry proxy's, or none).
pub fn extra_deployments(
    opts: &ClusterOptions,
    irc_env: &[(String, String)],
) -> Vec<serde_json::Value> {
    [
        (
            opts.image_reflector_controller,
            "image-reflector-controller",
            bins::IRC_CURRENT,
        ),
        (
            opts.image_automation_controller,
            "image-automation-controller",
            bins::IAC_CURRENT,
        ),
        (opts.helm_controller, "helm-controller", bins::HELM_CURRENT),
    ]
    .into_iter()
    .filter(|(on, _, _)| *on)
    .map(|(_, name, version)| {
        let mut d = flux_deployment(name, version, main_shard_args());
        if name == "image-reflector-controller"
            && let Some(env) = d
                .pointer_mut("/spec/template/spec/containers/0/env")
                .and_then(serde_json::Value::as_array_mut)
        {
            env.extend(
                irc_env
                    .iter()
                    .map(|(k, v)| serde_json::json!({"name": k, "value": v})),
            );
        }
        d
    })
    .collect()
}

/// kubeadm's kube-dns Service (cmd/kubeadm/app/phases/addons/dns/manifests.go
/// `CoreDNSService`, v1.36), with the ClusterIP kubeadm picks: the 10th address of the
/// service range 10.96.0.0/16.
pub const COREDNS_SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/cluster-service: \"true\", kubernetes.io/name: CoreDNS}
spec:
  clusterIP: 10.96.0.10
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
  - {name: metrics, port: 9153, protocol: TCP, targetPort: 9153}
";

/// kubeadm's `kube-system/coredns` ConfigMap (same file, `CoreDNSConfigMap`, cluster domain
/// cluster.local), with a `hosts` block of `hosts_block` lines before `prometheus` when
/// non-empty (where operators pin split-horizon names).
pub fn coredns_configmap(hosts_block: &str) -> String {
    let hosts = if hosts_block.trim().is_empty() {
        String::new()
    } else {
        let lines: String = hosts_block
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| format!("           {}\n", l.trim()))
            .collect();
        format!("        hosts {{\n{lines}           fallthrough\n        }}\n")
    };
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {{
        errors
        health {{
           lameduck 5s
        }}
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {{
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
           ttl 30
        }}
{hosts}        prometheus :9153
        forward . /etc/resolv.conf {{
           max_concurrent 1000
        }}
        cache 30 {{
           disable success cluster.local
           disable denial cluster.local
        }}
        loop
        reload
        loadbalance
    }}
"
    )
}

fn concat(flag: &str, path: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut s = std::ffi::OsString::from(flag);
    s.push(path);
    s
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| Error::Setup(format!("write {}: {e}", path.display())))
}

/// Runs real kubectl with `kubeconfig`; stdout on success.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String, Error> {
    kubectl_stdin(kubeconfig, args, "")
}

fn kubectl_stdin(kubeconfig: &Path, args: &[&str], stdin: &str) -> Result<String, Error> {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Error::Setup(format!("kubectl: {e}")))?;
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Setup(format!("kubectl: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Setup(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

async fn client_for(kubeconfig: &Path) -> Result<kube::Client, Error> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| Error::Setup(format!("kubeconfig: {e}")))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Setup(format!("kubeconfig: {e}")))?;
    Ok(kube::Client::try_from(cfg)?)
}

/// How many clusters one test process starts at once ([`Cluster::start`] waits for a slot).
/// A start is CPU-bound (kube-apiserver's post-start hooks and OpenAPI for the CRDs, the
/// controllers filling their caches): on a 2-core machine starting more at once makes every
/// one of them slower (8 at once in unstick's real binary: 38-58 s each at load 27-67, where
/// one alone takes 10-15 s), and a test on a running cluster waits behind all of them.
pub const STARTS_AT_ONCE: usize = 2;

/// A start slot, held for the whole start; freed on drop (also when the start fails).
fn start_slot() -> impl Drop {
    struct Slot;
    static STARTING: (Mutex<usize>, std::sync::Condvar) =
        (Mutex::new(0), std::sync::Condvar::new());
    impl Drop for Slot {
        fn drop(&mut self) {
            let mut n = STARTING.0.lock().unwrap_or_else(|e| e.into_inner());
            *n -= 1;
            STARTING.1.notify_one();
        }
    }
    let mut n = STARTING.0.lock().unwrap_or_else(|e| e.into_inner());
    while *n >= STARTS_AT_ONCE {
        n = STARTING.1.wait(n).unwrap_or_else(|e| e.into_inner());
    }
    *n += 1;
    Slot
}

/// A file in a cluster directory kept with `REALCLUSTER_KEEP`: [`remove_stale_dirs`] leaves
/// that directory alone (the user removes it), so a kept post-mortem survives the next start
/// of any test process on the machine.
const KEEP_MARKER: &str = ".keep";

/// Removes `$TMPDIR/realcluster-<pid>-*` directories no running cluster holds (never one kept
/// with `REALCLUSTER_KEEP`, see [`KEEP_MARKER`]): their `.lock`
/// can be locked (the owner died: the kernel dropped its flock) or is absent (a start that
/// died before taking it, and the directory is older than a minute).
fn remove_stale_dirs() {
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("realcluster-") else {
            continue;
        };
        if rest
            .split('-')
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none()
        {
            continue;
        }
        if e.path().join(KEEP_MARKER).exists() {
            continue;
        }
        let stale = match std::fs::File::open(e.path().join(".lock")) {
            Ok(f) => f.try_lock().is_ok(),
            Err(_) => e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Duration::from_secs(60)),
        };
        if stale {
            // A real node's cgroups and bridge (its processes and mounts died with it).
            realnode::sweep(&e.path());
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stale_dirs_go_and_held_ones_stay() {
        let tmp = std::env::temp_dir();
        let held = tempfile::Builder::new()
            .prefix("realcluster-1-held")
            .tempdir_in(&tmp)
            .unwrap();
        let lock = std::fs::File::create(held.path().join(".lock")).unwrap();
        lock.lock().unwrap();
        let stale = tempfile::Builder::new()
            .prefix("realcluster-1-stale")
            .tempdir_in(&tmp)
            .unwrap()
            .keep();
        std::fs::File::create(stale.join(".lock")).unwrap();
        let kept = tempfile::Builder::new()
            .prefix("realcluster-1-kept")
            .tempdir_in(&tmp)
            .unwrap()
            .keep();
        // The marker first: a directory without `.lock` is not removed before it is a minute
        // old, so a concurrent start elsewhere cannot take it in between.
        std::fs::write(kept.join(super::KEEP_MARKER), "").unwrap();
        std::fs::File::create(kept.join(".lock")).unwrap();
        super::remove_stale_dirs();
        assert!(held.path().exists(), "a directory whose lock is held stays");
        assert!(!stale.exists(), "a directory whose lock is free goes");
        assert!(
            kept.exists(),
            "a directory kept with REALCLUSTER_KEEP stays"
        );
        std::fs::remove_dir_all(&kept).unwrap();
        drop(lock);
    }
}
