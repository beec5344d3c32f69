//! The rule table: stable IDs, names, severities, families, one-line summaries and the story
//! `--explain ID` prints, with its source.

pub use markercheck::check::Severity;

/// One rule.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable ID (`FL001`...; marker rules keep markercheck's `MC0xx`).
    pub id: &'static str,
    /// Short name.
    pub name: &'static str,
    /// Severity: `error` makes the run exit 1.
    pub severity: Severity,
    /// Family (render, dependsOn, substitution, overlay, addresses, service-links, images).
    pub family: &'static str,
    /// One line.
    pub summary: &'static str,
    /// What goes wrong, what to do, and the source of the rule.
    pub explain: &'static str,
}

const fn r(
    id: &'static str,
    name: &'static str,
    severity: Severity,
    family: &'static str,
    summary: &'static str,
    explain: &'static str,
) -> Rule {
    Rule {
        id,
        name,
        severity,
        family,
        summary,
        explain,
    }
}

use Severity::{Error, Info, Warning};

/// Every fleetlint rule (markercheck's MC rules are listed by `kubectl markercheck --list-rules`).
///
/// Severity follows certainty: `Error` only for a Kustomization the real kustomize-controller
/// fails to build or never runs (FL001, FL002, FL003, FL010, FL011, FL031, FL032 and FL034 when
/// substitution runs, FL035) or an applied object certainly wrong (FL005 two appliers, FL050 and
/// FL052 addresses, FL061 a service-link collision, FL040 a value its author marked
/// undecided). What ships exactly as the author wrote it is at most a `Warning` (FL013, FL030,
/// FL036, FL070).
pub const RULES: &[Rule] = &[
    r(
        "FL001",
        "render-error",
        Error,
        "render",
        "a directory a Flux Kustomization reaches does not render with kustomize",
        "kustomize-controller builds spec.path with the kustomize Go API (fluxcd/pkg kustomize \
       SecureBuild: LoadRestrictionsNone, plugins disabled); a build error stalls the \
       Kustomization with BuildFailed and nothing in it is applied. fleetlint runs the same \
       build with `kubectl kustomize --load-restrictor=LoadRestrictionsNone`, generating the \
       kustomization the controller generates for a directory without one \
       (findOrGenerateKustomization) and applying spec.targetNamespace.\n\
       Fix: run `kubectl kustomize --load-restrictor=LoadRestrictionsNone DIR` and fix what it names.",
    ),
    r(
        "FL002",
        "path-missing",
        Error,
        "render",
        "spec.path names a directory that does not exist in the repository",
        "kustomize-controller fails with \"kustomization path not found\" (securejoin of the \
       artifact root and spec.path) and the Kustomization never becomes Ready; every \
       Kustomization that dependsOn it waits until its own timeout.\n\
       Fix: point spec.path at an existing directory, relative to the repository root (./clusters/...).",
    ),
    r(
        "FL003",
        "source-missing",
        Error,
        "render",
        "sourceRef names a source the tree defines but the overlay never applies",
        "The controller reports \"Source 'GitRepository/ns/name' not found\" and retries at \
       retryInterval forever. Offline, fleetlint looks for the source among every object the \
       overlay applies (sourceRef.namespace defaults to the Kustomization's namespace). Only a \
       source that a document of this tree defines, and that this overlay does not apply, is \
       this error: a source the tree never defines is made elsewhere (FL004).\n\
       Fix: correct sourceRef (kind, name, namespace) or add the source object to the overlay.",
    ),
    r(
        "FL004",
        "source-external",
        Info,
        "render",
        "sourceRef names a source made outside the tree's renders (listed once, not checked)",
        "A source no document of the tree defines is made by something else: flux-operator's \
       FluxInstance spec.sync (named after its namespace, fluxoperator.dev docs 'Flux Cluster \
       Sync Configuration'), an ArtifactGenerator (one ExternalArtifact per spec.artifacts[]), \
       `flux bootstrap` (gotk-sync.yaml, GitRepository flux-system/flux-system), Terraform or a \
       hand-applied object. Offline its existence and revision cannot be checked; fleetlint \
       names the maker when it recognises it, and does not check the paths of Kustomizations \
       reading a source that is not this repository (their path is in another artifact).\n\
       Fix: nothing when the maker is known; map a checkout of another repository with \
       --source KIND/NAMESPACE/NAME=PATH to have its paths checked and rendered there.",
    ),
    r(
        "FL005",
        "applied-twice",
        Error,
        "render",
        "one object (kind, namespace, name) is applied by two Kustomizations",
        "Each Kustomization server-side applies its render with the field manager \
       kustomize-controller and records what it applied in its inventory \
       (status.inventory). Two of them applying the same object overwrite each other's version \
       on every reconcile (the last one wins until the other runs again), and when the object \
       leaves either one's render that one's garbage collection (prune) deletes it while the \
       other still declares it. When only one of them has postBuild, the two versions differ: \
       one ships the ${VAR} literals. The finding names both Kustomizations and which applies \
       it without substitution.\n\
       Fix: keep the object in one Kustomization's path; remove it from the other's \
       kustomization resources.",
    ),
    r(
        "FL010",
        "dependency-missing",
        Error,
        "dependsOn",
        "dependsOn names a Kustomization the overlay never applies",
        "kustomize-controller checks every dependsOn entry before building: a missing one gives \
       \"dependency 'ns/name' not found\" (DependencyNotReady) and the Kustomization never runs. \
       dependsOn.namespace defaults to the Kustomization's own namespace.\n\
       Fix: correct the name/namespace, or add the dependency to the overlay.",
    ),
    r(
        "FL011",
        "dependency-cycle",
        Error,
        "dependsOn",
        "the dependsOn graph has a cycle (printed)",
        "Every Kustomization on a cycle waits for another on it: all of them report \
       \"dependency ... is not ready\" forever.\nFix: remove one edge of the printed cycle.",
    ),
    r(
        "FL012",
        "dependency-cross-namespace",
        Warning,
        "dependsOn",
        "dependsOn points into another namespace",
        "Allowed by default, but a multi-tenant controller started with \
       --no-cross-namespace-refs=true rejects it (\"cannot access ... cross-namespace references \
       have been blocked\"), and tenants should not depend on each other's Kustomizations. \
       Reported only when the fleet turns the lockdown on: a --no-cross-namespace-refs flag in \
       the tree (bootstrap's kustomization.yaml patch) or a FluxInstance with \
       cluster.multitenant: true.\n\
       Fix: depend on a Kustomization in the same namespace, or accept the warning for a platform layer.",
    ),
    r(
        "FL013",
        "wave-order",
        Warning,
        "dependsOn",
        "a wave depends on a later wave",
        "Names or paths carrying a wave number (wave-0, wave-1...) state the order; a Kustomization \
       of wave N depending on one of a wave above N inverts it (and usually hides a cycle in \
       intent). From the failure catalogue's rule that waves apply in order. A warning: the \
       names are a convention, the controller runs the graph as written (a real cycle is FL011).\n\
       Fix: depend on the previous wave only.",
    ),
    r(
        "FL014",
        "dependency-without-wait",
        Warning,
        "dependsOn",
        "a Kustomization others dependsOn has neither wait: true nor healthChecks",
        "A dependency is ready for its dependents once its Ready condition is True at the \
       current source revision (kustomize-controller checkDependencies). Without spec.wait \
       or spec.healthChecks, Ready means \"applied\", not \"healthy\": dependents start while \
       the dependency's workloads are still rolling out or crash-looping. The message totals \
       the timeout chain: how long the last dependent can wait (GetTimeout: spec.timeout, else \
       interval - 30s, at least 30s).\n\
       Fix: set wait: true (health-checks what it applies) or list healthChecks.",
    ),
    r(
        "FL030",
        "substitution-not-enabled",
        Warning,
        "substitution",
        "${VAR} in a manifest whose Kustomization has no postBuild: the literal ships",
        "kustomize-controller substitutes only when spec.postBuild is set (kustomization_controller.go: \
       `if obj.Spec.PostBuild != nil`). Anywhere else the text `${VAR}` is applied as is: an \
       invalid value at best, a silent wrong one at worst. A warning: what ships is exactly what \
       the author wrote, and a config template's own placeholder (a Grafana dashboard's \
       ${DS_PROMETHEUS}, filled in by grafana-operator) may be meant; the message says when a \
       Kustomization of the overlay defines VAR (Flux was likely meant to substitute it). Not a \
       finding: `${...}` in a CustomResourceDefinition (schemas and descriptions document it, \
       as Flux's own CRDs in gotk-components.yaml do); in a shell script it is FL032 (a warning).\n\
       Fix: add postBuild.substituteFrom (or substitute) to the Kustomization that applies it, \
       or write the value; a meant literal needs nothing (`$${VAR}` is an escape only where \
       substitution runs: without postBuild it ships as written).",
    ),
    r(
        "FL031",
        "variable-undefined",
        Error,
        "substitution",
        "${VAR} without a default that no substitute/substituteFrom defines for this overlay",
        "fluxcd/pkg envsubst (a fork of drone/envsubst) runs on each object's YAML. With the \
       feature gate StrictPostBuildSubstitutions (on by default since kustomize-controller v1.9) \
       an unset variable read without a default operator fails the Kustomization: \
       `variable not set (strict mode): \"VAR\"`; without it the value silently becomes \"\". \
       Default operators (${VAR:=x}, ${VAR:-x}, ${VAR=x}) tolerate an unset variable. An exec-form \
       container command/args element (no shell: the process gets the text as written) is this \
       rule, not FL032: escaping it as $${VAR} would hand the process the literal `${VAR}`.\n\
       Fix: define VAR in the overlay's substituteFrom ConfigMap/Secret or postBuild.substitute, \
       or give it a default: ${VAR:=value}.",
    ),
    r(
        "FL032",
        "unescaped-shell-variable",
        Error,
        "substitution",
        "an undefined ${VAR} in text a shell reads (sh -c script, a script) inside a substituted path",
        "envsubst runs on the whole object, container commands and embedded scripts included. \
       A ${VAR} meant for the container's shell is an undefined Flux variable: strict mode fails \
       the Kustomization, non-strict mode replaces it with \"\". In fluxcd/pkg envsubst `$$` is an \
       escape for `$` (scanEscaped), so `$${VAR}` ships `${VAR}` to the container. A bare $VAR is \
       never substituted (only ${...} is an expression).\n\
       Where a shell reads the text: the script operand of a shell's -c (container argv = command \
       ++ args with argv[0] sh, bash, ash, dash, zsh, ksh or mksh: `sh -c SCRIPT`; the operands \
       after SCRIPT are $0, $1... and not parsed), a `script` field, a multi-line string starting \
       with #!, a ConfigMap/Secret data key ending in .sh/.bash/.zsh/.ksh. Anywhere else, exec-form \
       command/args included (the kubelet starts the process with the argv as written; Kubernetes \
       expands only $(VAR) there, from the container's env), no shell expands ${VAR}: escaping it \
       would hand the process the literal text, so the finding is FL031 (define the variable).\n\
       An error when the Kustomization has postBuild (strict mode fails it); a warning when it \
       has none (the shell gets the literal today; `$$` is an escape only where substitution \
       runs, so without postBuild `$${VAR}` would ship as written and the shell would read `$$`, \
       its process ID: escape only once postBuild is enabled).\n\
       Fix: write $${VAR} when the shell is meant to expand it, define VAR when Flux is, or \
       disable substitution on that object with the annotation \
       kustomize.toolkit.fluxcd.io/substitute: disabled.",
    ),
    r(
        "FL033",
        "substitute-from-missing",
        Warning,
        "substitution",
        "unknown offline: a postBuild.substituteFrom ConfigMap/Secret the overlay never applies",
        "LoadVariables reads each substituteFrom object from the Kustomization's namespace; a \
       missing one fails the build with \"substitute from 'ConfigMap/name' error: ... not found\" \
       unless the reference is optional: true. Offline the object may well exist (a Secret made \
       by bootstrap, Terraform, an ExternalSecret or a SealedSecret the overlay applies, which \
       the finding names): so this is one warning per missing input, saying how many objects' \
       substitution it leaves unchecked, and no substitution finding (FL031, FL032, FL036) \
       follows for that Kustomization: either the build fails or the variables are unknown.\n\
       Fix: nothing when the object exists in the cluster; otherwise add it to the overlay (in \
       the Kustomization's namespace) or mark the reference optional: true.",
    ),
    r(
        "FL034",
        "substitution-syntax",
        Error,
        "substitution",
        "an object's text is not valid for envsubst (the Kustomization fails)",
        "fluxcd/pkg envsubst parses every ${ in the object: `${` must be followed by a variable \
       name and a closing brace or a supported operator (:=, :-, :?, :+, =, casing, substring, \
       replace). Otherwise the build fails with `envsubst error: ... bad substitution` / \
       `missing closing brace` / `unable to parse variable name`.\n\
       Fix: escape a literal as $${...}, or correct the expression.",
    ),
    r(
        "FL035",
        "variable-name-invalid",
        Error,
        "substitution",
        "a substitution variable name outside ^[_[:alpha:]][_[:alpha:][:digit:]]*$",
        "fluxcd/pkg kustomize varSubstitution validates every variable name (varsubRegex) before \
       substituting: one ConfigMap key such as `my-var` fails the whole Kustomization (\"'my-var' \
       var name is invalid\").\nFix: rename the key (letters, digits, underscore).",
    ),
    r(
        "FL036",
        "substitution-skipped",
        Warning,
        "substitution",
        "postBuild present but no variables: nothing is substituted, ${...} ships",
        "SubstituteVariables runs only when at least one variable is loaded or \
       postBuild.substituteStrategy is Always (`if len(vars) > 0 || options.Always`). With an empty \
       substitute map and substituteFrom objects without data, even ${VAR:=default} ships literally \
       (and no envsubst error or strict-mode failure can happen). A warning, as FL030: what \
       ships is exactly what the author wrote, and a template's own placeholder (a Grafana \
       dashboard's ${DS_PROMETHEUS} under `postBuild: {substitute: {}}`) is often meant.\n\
       Fix: define a variable, or set postBuild.substituteStrategy: Always.",
    ),
    r(
        "FL040",
        "placeholder",
        Error,
        "overlay",
        "a placeholder value (default pattern TBD-*) reaches an overlay's rendered output",
        "Undecided values are written as placeholders that must never reach a cluster (failure \
       catalogue: \"Undecided prod values are TBD-PROD-* placeholders that must fail loudly\"). \
       fleetlint reports each placeholder once per overlay, at the line that writes it, naming \
       the objects it reaches after substitution.\n\
       Fix: decide the value and write it; never replace a placeholder with a guess.",
    ),
    r(
        "FL041",
        "overlay-inherits-base",
        Warning,
        "overlay",
        "an overlay does not set a variable whose base value looks environment-specific",
        "A base value such as a private LAN address or a .local host name belongs to one \
       environment; an overlay that does not set it deploys the base's value (\"prod inherits \
       dev's default\").\n\
       Fix: set the key in the overlay's own patch of the ConfigMap/Secret.",
    ),
    r(
        "FL050",
        "vip-outside-pool",
        Error,
        "addresses",
        "a load-balancer address lies outside the overlay's load-balancer pool",
        "Cilium LB-IPAM (CiliumLoadBalancerIPPool spec.blocks) and MetalLB (IPAddressPool \
       spec.addresses) assign only addresses of their pools. A requested VIP outside the pool \
       is never announced: hairpin and external traffic to it is blackholed while the Gateway \
       still looks healthy (failure catalogue, environment overlays).\n\
       Fix: pick the VIP inside the pool (in practice its first address).",
    ),
    r(
        "FL051",
        "vip-not-pool-start",
        Warning,
        "addresses",
        "a load-balancer address is inside the pool but not its first address",
        "The fleet's convention is that the gateway VIP is the pool's first address, so the VIP \
       is predictable per cluster and never collides with addresses handed to other Services.\n\
       Fix: use the pool's first address, or move the pool's start.",
    ),
    r(
        "FL052",
        "address-variable-invalid",
        Error,
        "addresses",
        "a substitution variable meant to hold an address holds something that is not one",
        "A variable named as an address (a name token IP, VIP, IPS, IPV4 or IPV6, e.g. \
       GATEWAY_VIP, NODE_IPS) whose value is written with address characters (digits, hex, . : / \
       , -), or any variable whose value is four dot-separated numbers, must hold IPv4/IPv6 \
       addresses, CIDRs or a-b ranges (Go net/netip ParseAddr/ParsePrefix: each IPv4 part 0-255). \
       Anything else is substituted as is and fails where it lands: the API server rejects a \
       Service spec.loadBalancerIP that is not an IP (\"must be a valid IP address\"), LB-IPAM \
       and MetalLB never assign it, a config file gets a typo. A value matching the placeholder \
       glob is FL040's.\n\
       Fix: write the address (e.g. 192.168.2.30, not 192.168.2.300).",
    ),
    r(
        "FL060",
        "envfrom-service-links",
        Warning,
        "service-links",
        "envFrom without enableServiceLinks: false",
        "The kubelet injects <SERVICE>_PORT=tcp://IP:PORT, <SERVICE>_SERVICE_HOST, ... for every \
       Service of the namespace (pkg/kubelet/envvars FromServices) unless the pod sets \
       enableServiceLinks: false. A workload configured through envFrom reads its settings from \
       the environment, where these names can shadow what it expects (failure catalogue: \
       `invalid literal for int(): 'tcp://10.96...'`).\n\
       Fix: set spec.enableServiceLinks: false in the pod template.",
    ),
    r(
        "FL061",
        "service-link-collision",
        Error,
        "service-links",
        "a same-namespace Service's injected variable collides with a key the workload reads",
        "For a Service named redis the kubelet injects REDIS_PORT=tcp://<ClusterIP>:<port>, \
       REDIS_SERVICE_HOST, REDIS_SERVICE_PORT, REDIS_PORT_<port>_TCP... A workload that reads \
       REDIS_* settings (declares REDIS_HOST through env/envFrom, references $(REDIS_PORT), or \
       declares an injected name from a source that can be missing) gets `tcp://10.96...` where \
       it expects a port number. Declared values win over injected ones (kubelet \
       makeEnvironmentVariables), injected ones fill every name the workload left open.\n\
       Fix: set spec.enableServiceLinks: false in the pod template (or rename the Service).",
    ),
    r(
        "FL070",
        "image-unpinned",
        Warning,
        "images",
        "a container image is untagged or :latest",
        "containers, initContainers and ephemeralContainers of Deployments, StatefulSets, \
       DaemonSets, Jobs, CronJobs and Pods, after kustomize's images transformer. An untagged \
       image means :latest: every node can run a different build and a rollback is impossible. \
       A warning: the image is pulled and runs as the author wrote it.\n\
       Fix: pin a tag (and a digest where possible); set it with the kustomization's images: newTag.",
    ),
    r(
        "FL071",
        "image-host-mismatch",
        Warning,
        "images",
        "an image's host differs from the one the overlay's ImageRepository scans for the same path",
        "Image automation rewrites tags, never hosts (failure catalogue): the ImageRepository's \
       spec.image is the registry name the scanner uses; a workload pulling the same repository \
       under another host name (the node's name for the registry) never receives the automation's \
       updates, and its plain setter marker would rewrite the host.\n\
       Fix: use one registry host name for scanner and nodes.",
    ),
];

/// How to silence rule `id` (the `--explain` text's last paragraph).
fn silence(id: &str) -> String {
    format!(
        "Silence (counted in the summary as suppressed, never dropped): `# fleetlint:ignore {id} REASON` \
on the finding's line or anywhere in the same YAML document; in .fleetlint.yaml at the \
repository root `rules: {{{id}: off}}` (or `warning`, `error`, `info` to change its severity; \
`on` for a rule that is off by default), or `ignorePaths: [DIR/]` for whole files."
    )
}

/// Rules that encode a convention of one fleet rather than what Flux does: off unless the
/// configuration turns them on.
pub const OFF_BY_DEFAULT: &[&str] = &["FL051"];

/// Looks a rule up by ID (case-insensitive).
pub fn find(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id.eq_ignore_ascii_case(id))
}

/// The `--explain` text of a fleetlint rule or a markercheck rule.
pub fn explain(id: &str) -> Option<String> {
    if let Some(r) = find(id) {
        return Some(format!(
            "{} {} ({}, {}{})\n{}\n\n{}\n\n{}\n",
            r.id,
            r.name,
            format!("{:?}", r.severity).to_lowercase(),
            r.family,
            if OFF_BY_DEFAULT.contains(&r.id) {
                ", off unless .fleetlint.yaml turns it on"
            } else {
                ""
            },
            r.summary,
            r.explain,
            silence(r.id)
        ));
    }
    markercheck::check::RULES
        .iter()
        .find(|m| m.0.eq_ignore_ascii_case(id))
        .map(|m| {
            format!(
                "{} {} ({}, markers)\n{}\n\nA markercheck rule, run by fleetlint through markercheck's library on the same tree; `kubectl markercheck --help` and docs/markercheck.md give its story.\n\n{}\n",
                m.0,
                m.1,
                format!("{:?}", m.2).to_lowercase(),
                m.3,
                silence(m.0)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_unique_and_explained() {
        let mut ids: Vec<_> = RULES.iter().map(|r| r.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
        for r in RULES {
            assert!(r.explain.contains("Fix:"), "{}", r.id);
        }
        assert!(explain("fl031").unwrap().contains("strict mode"));
        assert!(explain("MC003").unwrap().contains("markercheck"));
        assert!(explain("FL999").is_none());
    }
}
