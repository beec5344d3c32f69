//! The probe pod machinery shared by the plugins that look at the cluster from inside the pod
//! network (`kubectl podresolve`, `kubectl cutover --verify-in-cluster`): one fixed POSIX sh
//! script ([`SCRIPT`], `src/probe/probe.sh`, protocol v1), the Job/Pod/ephemeral-container
//! spec that carries it ([`ProbeOptions`]), its lifecycle ([`lifecycle`]: create, watch to the
//! end with a deadline, read the log, delete, also on Ctrl-C) and the parsers of its log
//! ([`parse`]).
//!
//! The script runs as `sh -c SCRIPT TOOL [--step-timeout S] [--tls PORT] [--git URL]
//! [--git-ref REF] -- HOST... [--http URL VIA TARGET SNI]...` ([`http`]: HTTP(S) requests with
//! curl, status, TLS verdict and time). User values are only ever argv elements after the script; the
//! script text never changes. Git credentials never appear in the spec, argv or log: they
//! reach the container only as `env[].valueFrom.secretKeyRef` of the source Secret
//! ([`GitSecret`]), and the script turns them into git's `http.extraHeader` and
//! `GIT_SSL_CAINFO` (a file in a memory-backed emptyDir at `/tmp`). That file is the image's
//! system CA bundle (`SSL_CERT_FILE`, else the first of Go crypto/x509 root_linux.go's files,
//! `/etc/ssl/certs/ca-certificates.crt` first) followed by the Secret's `ca.crt`: go-git v5
//! plumbing/transport/http/common.go `configureTransport` adds a CA bundle to
//! `x509.SystemCertPool()` (an empty pool when that fails), it does not replace it, and
//! source-controller passes `ca.crt` there through fluxcd/pkg/git/gogit.
//!
//! Three carriers, all labelled `app.kubernetes.io/managed-by=kubectl-<tool>`
//! ([`ProbeOwner`]):
//! - a Job (default): backoffLimit 0, activeDeadlineSeconds, ttlSecondsAfterFinished, so the
//!   cluster removes it even if this process is SIGKILLed;
//! - a bare Pod (`--kind pod`): activeDeadlineSeconds only (no TTL controller for pods);
//! - an ephemeral container in an existing pod (`--from pod/X|deploy/X`): same network
//!   namespace and resolv.conf as the target (Kubernetes 1.25 GA, subresource
//!   `pods/ephemeralcontainers`; body is a strategic merge patch of
//!   `spec.ephemeralContainers`, as `kubectl debug` sends it: kubernetes/kubectl
//!   pkg/cmd/debug/debug.go debugByEphemeralContainer).
//!
//! Default images: [`DEFAULT_IMAGE`] (DNS tools only), [`TOOLS_IMAGE`] (DNS tools, openssl,
//! git: podresolve `--tls`/`--git`), [`GIT_IMAGE`] (with git: cutover `--verify-in-cluster`).

pub mod http;
pub mod lifecycle;
pub mod parse;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, HostAlias, PodDNSConfig,
    PodSecurityContext, PodSpec, PodTemplateSpec, ResourceRequirements, SeccompProfile,
    SecretKeySelector, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// The probe script (protocol v1), a compile-time constant.
pub const SCRIPT: &str = include_str!("probe.sh");

/// Default probe image. Alpine's minirootfs ships BusyBox (its `nslookup` applet is the BusyBox
/// 1.29+ wire-query implementation) and musl-utils (`getent` with `ahosts`, Alpine
/// aports main/musl getent.c) and runs as any UID. It has no `openssl` CLI and no `git`:
/// pass `--image` with an image that has them for `--tls`/`--git` (the probe reports
/// `not found in image`, exit 127, otherwise).
pub const DEFAULT_IMAGE: &str = "alpine:3.22";

/// The probe image for the checks alpine cannot run, `kubectl podresolve --tls/--git`:
/// nicolaka/netshoot (built FROM alpine: musl `getent`, BusyBox `sh`) with `openssl`, `git`,
/// BIND's `nslookup`/`dig` and `curl`. One image that runs every check podresolve offers; it is
/// large (hundreds of MB), so DNS-only runs keep [`DEFAULT_IMAGE`]. Its `nslookup` is BIND's
/// (honours search and ndots), which the report recognises and explains.
pub const TOOLS_IMAGE: &str = "nicolaka/netshoot:v0.14";

/// A probe image with `git` (and BusyBox `sh`, `getent`, `nslookup`, `base64`, `mktemp`):
/// the Alpine-based image of the alpine/git project (its entrypoint `git` is replaced by the
/// probe's command). It has no `openssl` CLI: TLS is judged from git's own handshake, which is
/// what source-controller's fetch does too.
pub const GIT_IMAGE: &str = "alpine/git:v2.49.1";

/// Checks an image reference against the grammar the container runtime parses it with
/// (distribution/reference `reference.go`/`regexp.go`, which containerd and the kubelet use):
///
/// ```text
/// reference   := name [ ":" tag ] [ "@" digest ]
/// name        := [ domain "/" ] path-component { "/" path-component }   (at most 255 chars)
/// domain      := host [ ":" port ]       host: DNS labels joined by ".", or "[IPv6]"
/// path-comp.  := [a-z0-9]+ { ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ }
/// tag         := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
/// digest      := algorithm ":" hex    algorithm: [A-Za-z][A-Za-z0-9]* { [+._-] ... }, hex >= 32
/// ```
///
/// The first `/`-separated part is a domain when it contains `.` or `:` or is `localhost`
/// (docker `splitDockerDomain`). Checked before any cluster is asked, so `--image 'x;id'` is a
/// usage error, not a pod stuck in ErrImagePull.
///
/// Errors: a message naming the part that is wrong.
pub fn validate_image(image: &str) -> Result<(), String> {
    if image.is_empty() {
        return Err("an image reference cannot be empty".into());
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let ok = d.split_once(':').is_some_and(|(alg, hex)| {
            let alg_ok = alg.split(['+', '.', '_', '-']).all(|c| {
                c.starts_with(|ch: char| ch.is_ascii_alphabetic())
                    && c.chars().all(|ch| ch.is_ascii_alphanumeric())
            });
            alg_ok && hex.len() >= 32 && hex.chars().all(|c| c.is_ascii_hexdigit())
        });
        if !ok {
            return Err(format!(
                "digest {d:?} is not ALGORITHM:HEX (e.g. sha256:<64 hex>)"
            ));
        }
    }
    // The tag follows the last ':' that comes after the last '/'.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag {
        let ok = !t.is_empty()
            && t.len() <= 128
            && t.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !ok {
            return Err(format!(
                "tag {t:?} is not a valid tag ([A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})"
            ));
        }
    }
    if name.is_empty() {
        return Err("the reference has no repository name".into());
    }
    if name.len() > 255 {
        return Err(format!(
            "repository name is {} characters (at most 255)",
            name.len()
        ));
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    if parts.len() > 1 && (parts[0].contains(['.', ':']) || parts[0] == "localhost") {
        let domain = parts.remove(0);
        let (host, port) = if let Some(h) = domain.strip_prefix('[') {
            match h.split_once(']') {
                Some((v6, "")) if v6.parse::<std::net::Ipv6Addr>().is_ok() => (None, None),
                Some((v6, p)) if v6.parse::<std::net::Ipv6Addr>().is_ok() && p.starts_with(':') => {
                    (None, Some(&p[1..]))
                }
                _ => return Err(format!("registry {domain:?} is not a valid [IPv6]:port")),
            }
        } else {
            match domain.split_once(':') {
                Some((h, p)) => (Some(h), Some(p)),
                None => (Some(domain), None),
            }
        };
        if let Some(host) = host {
            let label_ok = |l: &str| {
                !l.is_empty()
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            };
            if !host.split('.').all(label_ok) {
                return Err(format!("registry {domain:?} is not a valid host[:port]"));
            }
        }
        if let Some(p) = port
            && (p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
        {
            return Err(format!("registry {domain:?} has an invalid port"));
        }
    }
    for comp in &parts {
        if !path_component_ok(comp) {
            return Err(format!(
                "repository path component {comp:?} must be lowercase letters and digits, \
                 separated by '.', '_', '__' or dashes"
            ));
        }
    }
    Ok(())
}

fn path_component_ok(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() {
        return false;
    }
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator: ".", "_", "__" or one or more "-".
        let start = i;
        match b[i] {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if i < b.len() && b[i] == b'_' {
                    i += 1;
                }
            }
            b'-' => {
                while i < b.len() && b[i] == b'-' {
                    i += 1;
                }
            }
            _ => return false,
        }
        if i == start || i >= b.len() || !alnum(b[i]) {
            return false;
        }
    }
    true
}

/// Which plugin owns a probe: names, labels and the field manager derive from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeOwner {
    /// The plugin's short name (`podresolve`, `cutover`).
    pub tool: &'static str,
}

impl ProbeOwner {
    /// `kubectl podresolve`.
    pub const PODRESOLVE: ProbeOwner = ProbeOwner { tool: "podresolve" };
    /// `kubectl cutover`.
    pub const CUTOVER: ProbeOwner = ProbeOwner { tool: "cutover" };
    /// `kubectl unstick --check-remote`.
    pub const UNSTICK: ProbeOwner = ProbeOwner { tool: "unstick" };
    /// `kubectl gitops verify`.
    pub const GITOPS_VERIFY: ProbeOwner = ProbeOwner {
        tool: "gitops-verify",
    };
    /// `kubectl gatewaycheck --probe`.
    pub const GATEWAYCHECK: ProbeOwner = ProbeOwner {
        tool: "gatewaycheck",
    };

    /// `app.kubernetes.io/managed-by` value on every object we create: `kubectl-<tool>`.
    pub fn managed_by(&self) -> String {
        format!("kubectl-{}", self.tool)
    }

    /// Field manager for every write (brief: mutations use the plugin's own manager name).
    pub fn field_manager(&self) -> String {
        self.managed_by()
    }

    /// Label key carrying the run id (one per invocation): `<tool>.cluster-loop.dev/run`.
    pub fn run_label(&self) -> String {
        format!("{}.cluster-loop.dev/run", self.tool)
    }
}

/// The Secret whose keys the probe's `git ls-remote` authenticates with, exactly as
/// source-controller reads a GitRepository's `spec.secretRef` (api/v1 docs: `username` +
/// `password` for HTTP basic auth, `bearerToken` for `Authorization: Bearer`, `ca.crt`
/// (legacy `caFile`) for the CA bundle). Only the keys listed here are referenced; each becomes
/// an `env[].valueFrom.secretKeyRef` (never a literal value), so the kubelet resolves it when
/// the container starts and a Secret that lost a key fails the pod with
/// CreateContainerConfigError instead of silently probing without it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitSecret {
    /// Secret name (in the probe's namespace).
    pub name: String,
    /// Keys of the Secret to pass (any of `username`, `password`, `bearerToken`, `ca.crt`,
    /// `caFile`); others are ignored.
    pub keys: Vec<String>,
}

/// Secret key -> the environment variable the probe script reads it from.
pub const GIT_SECRET_ENV: &[(&str, &str)] = &[
    ("username", "PROBE_GIT_USERNAME"),
    ("password", "PROBE_GIT_PASSWORD"),
    ("bearerToken", "PROBE_GIT_BEARER_TOKEN"),
    ("ca.crt", "PROBE_GIT_CA"),
    ("caFile", "PROBE_GIT_CA_FILE"),
];

/// Unprivileged UID/GID (`nobody`).
pub const PROBE_UID: i64 = 65534;

/// Which object carries the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Carrier {
    /// batch/v1 Job (TTL-cleaned even if we are killed).
    Job,
    /// Bare Pod (activeDeadlineSeconds only).
    Pod,
}

impl Carrier {
    /// `job` or `pod`: the word messages and `--cleanup -o json` use.
    pub fn kind(self) -> &'static str {
        match self {
            Carrier::Job => "job",
            Carrier::Pod => "pod",
        }
    }
}

/// What we copy from a `--from` pod when ephemeral containers are not allowed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourcePod {
    /// Pod name (for messages).
    pub name: String,
    /// Its namespace: the probe runs there (same search list `NS.svc.cluster.local`).
    pub namespace: String,
    /// spec.nodeName (same node: same NodeLocal DNSCache instance).
    pub node_name: Option<String>,
    /// spec.dnsPolicy.
    pub dns_policy: Option<String>,
    /// spec.dnsConfig.
    pub dns_config: Option<PodDNSConfig>,
    /// spec.hostAliases (end up in /etc/hosts: the libc path sees them).
    pub host_aliases: Option<Vec<HostAlias>>,
    /// spec.hostNetwork (not copied: needs privileges; see [`ProbeOptions::pod_spec`]).
    pub host_network: bool,
    /// spec.tolerations (so the copy can land on the same tainted node).
    pub tolerations: Option<Vec<Toleration>>,
}

impl SourcePod {
    /// Extract the fields from a live pod.
    pub fn from_pod(pod: &k8s_openapi::api::core::v1::Pod) -> SourcePod {
        let spec = pod.spec.clone().unwrap_or_default();
        SourcePod {
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            node_name: spec.node_name,
            dns_policy: spec.dns_policy,
            dns_config: spec.dns_config,
            host_aliases: spec.host_aliases,
            host_network: spec.host_network.unwrap_or(false),
            tolerations: spec.tolerations,
        }
    }
}

/// Everything needed to build a probe.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Which plugin runs the probe (names, labels, field manager).
    pub owner: ProbeOwner,
    /// Namespace of the probe (ignored for the copy: the source pod's namespace wins).
    pub namespace: String,
    /// Container image.
    pub image: String,
    /// Validated hosts, as argv elements (absolute names keep their trailing dot).
    pub hosts: Vec<String>,
    /// `--tls PORT`.
    pub tls_port: Option<u16>,
    /// `--git URL` (validated).
    pub git_url: Option<String>,
    /// The ref `git ls-remote` asks for (default `HEAD`), e.g. `refs/heads/main`.
    pub git_ref: Option<String>,
    /// Credentials for the git step, from a Secret in the probe's namespace.
    pub git_secret: Option<GitSecret>,
    /// Deadline in seconds (activeDeadlineSeconds), >= 1.
    pub deadline_secs: i64,
    /// `--node NODE`.
    pub node: Option<String>,
    /// Run id (lower-case hex), used in names and the run label.
    pub run_id: String,
    /// Copy of a `--from` pod's resolver setup (fallback path).
    pub source: Option<SourcePod>,
    /// HTTP(S) requests made after the hosts' lookups ([`http`]; the image needs `curl`,
    /// e.g. [`TOOLS_IMAGE`]).
    pub http: Vec<http::HttpRequest>,
}

/// Seconds a finished Job is kept before the TTL controller deletes it.
pub const TTL_AFTER_FINISHED_SECS: i32 = 300;

/// A fresh run id: 10 hex digits from the std SipHash keyed randomly per process, mixed
/// with the time and pid (collisions only matter within one namespace and are detected by
/// the API as 409 AlreadyExists).
pub fn new_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{:010x}", h.finish() & 0xff_ffff_ffff)
}

impl ProbeOptions {
    /// Object / container name: `<tool>-<run id>`.
    pub fn name(&self) -> String {
        format!("{}-{}", self.owner.tool, self.run_id)
    }

    /// Namespace the probe object is created in.
    pub fn target_namespace(&self) -> &str {
        self.source
            .as_ref()
            .map(|s| s.namespace.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or(&self.namespace)
    }

    /// Labels on the probe object and its pod.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "app.kubernetes.io/managed-by".into(),
                self.owner.managed_by(),
            ),
            ("app.kubernetes.io/name".into(), self.owner.tool.into()),
            (self.owner.run_label(), self.run_id.clone()),
        ])
    }

    /// Per-tool bound inside the probe: 20 s, or less when the deadline is short (at least 2).
    pub fn step_timeout_secs(&self) -> i64 {
        (self.deadline_secs / 3).clamp(2, 20)
    }

    /// Label selector for this run's objects.
    pub fn run_selector(&self) -> String {
        format!("{}={}", self.owner.run_label(), self.run_id)
    }

    /// The container argv: `["sh", "-c", SCRIPT, TOOL, ...options, "--", hosts..., (--http URL VIA
    /// TARGET SNI)...]`.
    /// `$0` is the owner's tool name; hosts are separate elements, never concatenated into the
    /// script.
    pub fn command(&self) -> Vec<String> {
        let mut argv = vec![
            "sh".to_string(),
            "-c".to_string(),
            SCRIPT.to_string(),
            self.owner.tool.to_string(),
        ];
        argv.push("--step-timeout".into());
        argv.push(self.step_timeout_secs().to_string());
        if let Some(p) = self.tls_port {
            argv.push("--tls".into());
            argv.push(p.to_string());
        }
        if let Some(u) = &self.git_url {
            argv.push("--git".into());
            argv.push(u.clone());
            if let Some(r) = &self.git_ref {
                argv.push("--git-ref".into());
                argv.push(r.clone());
            }
        }
        argv.push("--".into());
        argv.extend(self.hosts.iter().cloned());
        for r in &self.http {
            argv.extend(r.argv());
        }
        argv
    }

    fn security_context() -> SecurityContext {
        SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(PROBE_UID),
            run_as_group: Some(PROBE_UID),
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            privileged: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            ..Default::default()
        }
    }

    /// The container's environment: `HOME=/tmp`, `GIT_TERMINAL_PROMPT=0`, and one
    /// `secretKeyRef` per [`GitSecret`] key ([`GIT_SECRET_ENV`]); never a secret value.
    pub fn env(&self) -> Vec<EnvVar> {
        let mut env = vec![
            EnvVar {
                name: "HOME".into(),
                value: Some("/tmp".into()),
                value_from: None,
            },
            EnvVar {
                name: "GIT_TERMINAL_PROMPT".into(),
                value: Some("0".into()),
                value_from: None,
            },
        ];
        if let Some(gs) = &self.git_secret {
            for (key, var) in GIT_SECRET_ENV {
                if gs.keys.iter().any(|k| k == key) {
                    env.push(EnvVar {
                        name: (*var).into(),
                        value: None,
                        value_from: Some(EnvVarSource {
                            secret_key_ref: Some(SecretKeySelector {
                                name: gs.name.clone(),
                                key: (*key).into(),
                                optional: Some(false),
                            }),
                            ..Default::default()
                        }),
                    });
                }
            }
        }
        env
    }

    /// True when the probe needs a writable `/tmp` (a memory-backed emptyDir, the root
    /// filesystem is read-only): the git step writes the image's CA bundle plus the Secret's
    /// CA there for `GIT_SSL_CAINFO` (about 220 KiB for Alpine's or Debian's bundle, under
    /// the 1Mi sizeLimit; the script falls back to the Secret's CA alone when it cannot).
    fn needs_tmp(&self) -> bool {
        self.git_secret.is_some()
    }

    /// The probe container: argv only, non-root, read-only root, no capabilities, small
    /// resources (requests 10m CPU / 16Mi, limits 200m / 64Mi).
    pub fn container(&self) -> Container {
        let q = |s: &str| Quantity(s.to_string());
        Container {
            name: "probe".into(),
            image: Some(self.image.clone()),
            image_pull_policy: Some("IfNotPresent".into()),
            command: Some(self.command()),
            env: Some(self.env()),
            volume_mounts: self.needs_tmp().then(|| {
                vec![VolumeMount {
                    name: "tmp".into(),
                    mount_path: "/tmp".into(),
                    ..Default::default()
                }]
            }),
            security_context: Some(Self::security_context()),
            resources: Some(ResourceRequirements {
                requests: Some(BTreeMap::from([
                    ("cpu".into(), q("10m")),
                    ("memory".into(), q("16Mi")),
                ])),
                limits: Some(BTreeMap::from([
                    ("cpu".into(), q("200m")),
                    ("memory".into(), q("64Mi")),
                ])),
                claims: None,
            }),
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..Default::default()
        }
    }

    /// The pod spec (Job template or bare Pod). With a `source`, copies its node, dnsPolicy,
    /// dnsConfig, hostAliases and tolerations; a hostNetwork source with dnsPolicy
    /// ClusterFirst really uses the node's resolver (Kubernetes falls back to Default for
    /// hostNetwork pods unless ClusterFirstWithHostNet), so the copy gets `Default` then.
    pub fn pod_spec(&self) -> PodSpec {
        let mut spec = PodSpec {
            containers: vec![self.container()],
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            active_deadline_seconds: Some(self.deadline_secs.max(1)),
            termination_grace_period_seconds: Some(1),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(PROBE_UID),
                run_as_group: Some(PROBE_UID),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            node_name: self.node.clone(),
            volumes: self.needs_tmp().then(|| {
                vec![Volume {
                    name: "tmp".into(),
                    empty_dir: Some(EmptyDirVolumeSource {
                        medium: Some("Memory".into()),
                        size_limit: Some(Quantity("1Mi".into())),
                    }),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        };
        if self.node.is_some() {
            // nodeName bypasses the scheduler; tolerate NoExecute taints so the kubelet
            // does not evict the probe from a tainted (e.g. control-plane) node.
            spec.tolerations = Some(vec![Toleration {
                operator: Some("Exists".into()),
                ..Default::default()
            }]);
        }
        if let Some(src) = &self.source {
            if self.node.is_none() {
                spec.node_name = src.node_name.clone();
                spec.tolerations = src.tolerations.clone();
            }
            spec.dns_policy = src.dns_policy.clone();
            if src.host_network && matches!(src.dns_policy.as_deref(), None | Some("ClusterFirst"))
            {
                spec.dns_policy = Some("Default".into());
            }
            if src.host_network && src.dns_policy.as_deref() == Some("ClusterFirstWithHostNet") {
                spec.dns_policy = Some("ClusterFirst".into());
            }
            spec.dns_config = src.dns_config.clone();
            spec.host_aliases = src.host_aliases.clone();
        }
        spec
    }

    fn meta(&self) -> ObjectMeta {
        let mut annotations = BTreeMap::new();
        annotations.insert(
            format!("{}.cluster-loop.dev/hosts", self.owner.tool),
            self.hosts.join(","),
        );
        if let Some(src) = &self.source {
            annotations.insert(
                format!("{}.cluster-loop.dev/copied-from", self.owner.tool),
                format!("pod/{}", src.name),
            );
        }
        ObjectMeta {
            name: Some(self.name()),
            namespace: Some(self.target_namespace().to_string()),
            labels: Some(self.labels()),
            annotations: Some(annotations),
            ..Default::default()
        }
    }

    /// The Job: backoffLimit 0 (one try), activeDeadlineSeconds = deadline,
    /// ttlSecondsAfterFinished = [`TTL_AFTER_FINISHED_SECS`].
    pub fn job(&self) -> Job {
        Job {
            metadata: self.meta(),
            spec: Some(JobSpec {
                backoff_limit: Some(0),
                active_deadline_seconds: Some(self.deadline_secs.max(1)),
                ttl_seconds_after_finished: Some(TTL_AFTER_FINISHED_SECS),
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(self.labels()),
                        ..Default::default()
                    }),
                    spec: Some(self.pod_spec()),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    /// The bare Pod.
    pub fn pod(&self) -> k8s_openapi::api::core::v1::Pod {
        k8s_openapi::api::core::v1::Pod {
            metadata: self.meta(),
            spec: Some(self.pod_spec()),
            status: None,
        }
    }

    /// Strategic-merge-patch body for `pods/ephemeralcontainers` adding the probe as an
    /// ephemeral container named [`ProbeOptions::name`]. Ephemeral containers may not set
    /// resources, ports or probes (apiserver validation), so only argv, env and
    /// securityContext are sent. Kubernetes never removes an ephemeral container: it stays
    /// in the pod spec, terminated, until the pod is deleted.
    pub fn ephemeral_patch(&self) -> serde_json::Value {
        let c = self.container();
        serde_json::json!({
            "spec": {
                "ephemeralContainers": [{
                    "name": self.name(),
                    "image": c.image,
                    "imagePullPolicy": c.image_pull_policy,
                    "command": c.command,
                    "env": c.env,
                    "securityContext": c.security_context,
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "stdin": false,
                    "tty": false,
                }]
            }
        })
    }
}

/// True when a connection to `ip` never leaves the machine (or pod) that makes it: a loopback
/// address (127.0.0.0/8, ::1, and their IPv4-mapped forms `::ffff:127.x.y.z`, which Linux
/// routes as IPv4) or the unspecified address (0.0.0.0, ::), which Linux connects to the
/// loopback (net/ipv4/route.c `ip_route_output_key_hash_rcu`: no destination -> 127.0.0.1;
/// net/ipv6/tcp_ipv6.c `tcp_v6_connect`: `::` -> `::1`). The one rule of `kubectl cutover`
/// (refuses such a `--to`) and `kubectl podresolve` (calls such an answer the pod itself).
pub fn is_own_machine(ip: std::net::IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_follow_the_distribution_grammar() {
        for ok in [
            "alpine:3.22",
            "alpine",
            "alpine/git:v2.49.1",
            "nicolaka/netshoot:v0.14",
            "docker.io/library/busybox:1.36-musl",
            "registry.example.com:5000/tools/git:2.49",
            "localhost/x",
            "localhost:5000/a/b__c/d-e.f:tag_1",
            "[::1]:5000/x:1",
            "x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "x:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(validate_image(ok), Ok(()), "{ok}");
        }
        for bad in [
            "x;id",
            "",
            "Alpine:3",
            "alpine:",
            "alpine:-x",
            "a//b",
            "a/b/",
            "a--",
            "a..b",
            "x y",
            "$(id)",
            "x@sha256:zz",
            "reg.example.com:port/x",
            "-x",
        ] {
            assert!(validate_image(bad).is_err(), "{bad:?} accepted");
        }
    }

    fn opts() -> ProbeOptions {
        ProbeOptions {
            owner: ProbeOwner::PODRESOLVE,
            namespace: "team".into(),
            image: DEFAULT_IMAGE.into(),
            hosts: vec!["gitea.prod.example.dev".into(), "registry.".into()],
            tls_port: Some(443),
            git_url: Some("https://gitea.prod.example.dev/flux/fleet.git".into()),
            git_ref: None,
            git_secret: None,
            deadline_secs: 60,
            node: None,
            run_id: "0123abcdef".into(),
            source: None,
            http: vec![],
        }
    }

    #[test]
    fn argv_carries_values_after_fixed_script() {
        let o = opts();
        let argv = o.command();
        assert_eq!(&argv[..2], &["sh", "-c"]);
        assert_eq!(argv[2], SCRIPT);
        assert!(!SCRIPT.contains("gitea"), "script is a constant");
        assert_eq!(
            &argv[3..],
            &[
                "podresolve",
                "--step-timeout",
                "20",
                "--tls",
                "443",
                "--git",
                "https://gitea.prod.example.dev/flux/fleet.git",
                "--",
                "gitea.prod.example.dev",
                "registry."
            ]
        );
    }

    #[test]
    fn job_shape() {
        let o = opts();
        let job = o.job();
        let v = serde_json::to_value(&job).unwrap();
        assert_eq!(v["metadata"]["name"], "podresolve-0123abcdef");
        assert_eq!(v["metadata"]["namespace"], "team");
        assert_eq!(
            v["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "kubectl-podresolve"
        );
        assert_eq!(v["spec"]["backoffLimit"], 0);
        assert_eq!(v["spec"]["activeDeadlineSeconds"], 60);
        assert_eq!(v["spec"]["ttlSecondsAfterFinished"], 300);
        let t = &v["spec"]["template"];
        assert_eq!(
            t["metadata"]["labels"]["podresolve.cluster-loop.dev/run"],
            "0123abcdef"
        );
        let s = &t["spec"];
        assert_eq!(s["restartPolicy"], "Never");
        assert_eq!(s["automountServiceAccountToken"], false);
        assert_eq!(s["securityContext"]["runAsNonRoot"], true);
        let c = &s["containers"][0];
        assert_eq!(c["securityContext"]["runAsUser"], 65534);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
        assert_eq!(c["resources"]["requests"]["cpu"], "10m");
        assert_eq!(c["resources"]["limits"]["memory"], "64Mi");
        assert_eq!(c["image"], "alpine:3.22");
        assert!(s.get("nodeName").is_none());
        assert!(c.get("args").is_none());
    }

    #[test]
    fn node_and_source_copy() {
        let mut o = opts();
        o.node = Some("worker-2".into());
        let s = o.pod_spec();
        assert_eq!(s.node_name.as_deref(), Some("worker-2"));
        assert_eq!(
            s.tolerations.unwrap()[0].operator.as_deref(),
            Some("Exists")
        );

        let mut o = opts();
        o.source = Some(SourcePod {
            name: "source-controller-abc".into(),
            namespace: "flux-system".into(),
            node_name: Some("worker-1".into()),
            dns_policy: Some("None".into()),
            dns_config: Some(PodDNSConfig {
                nameservers: Some(vec!["10.0.0.53".into()]),
                searches: Some(vec!["corp.example".into()]),
                options: None,
            }),
            host_aliases: Some(vec![HostAlias {
                ip: "192.168.2.20".into(),
                hostnames: Some(vec!["gitea.prod.example.dev".into()]),
            }]),
            host_network: false,
            tolerations: None,
        });
        let pod = o.pod();
        assert_eq!(pod.metadata.namespace.as_deref(), Some("flux-system"));
        let s = pod.spec.unwrap();
        assert_eq!(s.node_name.as_deref(), Some("worker-1"));
        assert_eq!(s.dns_policy.as_deref(), Some("None"));
        assert_eq!(
            s.dns_config.unwrap().nameservers.unwrap(),
            vec!["10.0.0.53"]
        );
        assert_eq!(s.host_aliases.unwrap()[0].ip, "192.168.2.20");
        assert_eq!(s.active_deadline_seconds, Some(60));

        let mut o = opts();
        o.source = Some(SourcePod {
            namespace: "kube-system".into(),
            host_network: true,
            dns_policy: Some("ClusterFirst".into()),
            ..Default::default()
        });
        assert_eq!(o.pod_spec().dns_policy.as_deref(), Some("Default"));
    }

    #[test]
    fn ephemeral_patch_body() {
        let o = opts();
        let p = o.ephemeral_patch();
        let ec = &p["spec"]["ephemeralContainers"][0];
        assert_eq!(ec["name"], "podresolve-0123abcdef");
        assert_eq!(ec["command"][0], "sh");
        assert_eq!(ec["command"][2], SCRIPT);
        assert!(
            ec.get("resources").is_none(),
            "forbidden for ephemeral containers"
        );
        assert_eq!(ec["securityContext"]["runAsNonRoot"], true);
    }

    #[test]
    fn git_secret_is_referenced_never_copied() {
        let mut o = opts();
        o.owner = ProbeOwner::CUTOVER;
        o.git_ref = Some("refs/heads/main".into());
        o.git_secret = Some(GitSecret {
            name: "flux-system".into(),
            keys: vec!["password".into(), "ca.crt".into(), "other".into()],
        });
        let v = serde_json::to_value(o.job()).unwrap();
        assert_eq!(v["metadata"]["name"], "cutover-0123abcdef");
        assert_eq!(
            v["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "kubectl-cutover"
        );
        let s = &v["spec"]["template"]["spec"];
        let env = s["containers"][0]["env"].as_array().unwrap();
        let refs: Vec<(&str, &str)> = env
            .iter()
            .filter_map(|e| {
                Some((
                    e["name"].as_str()?,
                    e.pointer("/valueFrom/secretKeyRef/key")?.as_str()?,
                ))
            })
            .collect();
        assert_eq!(
            refs,
            [
                ("PROBE_GIT_PASSWORD", "password"),
                ("PROBE_GIT_CA", "ca.crt")
            ]
        );
        assert!(
            env.iter()
                .all(|e| e["name"].as_str().unwrap().starts_with("PROBE_GIT_")
                    != e.get("value").is_some_and(|v| !v.is_null()))
        );
        assert_eq!(s["volumes"][0]["emptyDir"]["medium"], "Memory");
        assert_eq!(s["containers"][0]["volumeMounts"][0]["mountPath"], "/tmp");
        let argv = o.command();
        assert_eq!(argv[3], "cutover");
        let i = argv.iter().position(|a| a == "--git-ref").unwrap();
        assert_eq!(argv[i + 1], "refs/heads/main");
        // Without a secret: no volume, no secret env (podresolve's spec is unchanged).
        let v = serde_json::to_value(opts().job()).unwrap();
        assert!(v["spec"]["template"]["spec"].get("volumes").is_none());
    }

    #[test]
    fn run_ids_are_hex_and_distinct() {
        let a = new_run_id();
        let b = new_run_id();
        assert_eq!(a.len(), 10);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
