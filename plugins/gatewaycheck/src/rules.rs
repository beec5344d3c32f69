//! The rules: one function per rule, each reading one object and the [`Snapshot`] and
//! returning [`Finding`]s. A rule never says an object is served: only `--probe` can show
//! that ([`crate::run`]), and no rule passes a status the objects behind it contradict.

use crate::impls::{self, Implementation};
use crate::net;
use crate::snapshot::{Snapshot, controller_of, gateway_of_service};
use serde::Serialize;
use serde_json::Value;

/// How much a finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Checked and consistent.
    Ok,
    /// Context (who wrote the status, what could not be checked).
    Info,
    /// The status is wrong, stale or contradicted, or the object is not served: exit 1.
    Finding,
}

/// One verdict of one rule on one field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The rule: `observedGeneration`, `controller`, `parents`, `listeners`, `addresses`,
    /// `pool`, `dataPlane`, `programmed` (a Programmed=False no other rule explains); with
    /// `--probe` also `probe` (an HTTP(S) request from a pod) and `dns` (a hostname as a pod
    /// resolves it), see [`crate::probe`].
    pub rule: &'static str,
    /// The object: `gateway/NS/NAME`, `gatewayclass/NAME`, `httproute/NS/NAME`, `service/NS/NAME`.
    pub object: String,
    /// The field the verdict is about (e.g. `status.conditions[Programmed]`).
    pub field: String,
    /// Weight.
    pub level: Level,
    /// What is true, in the field's terms.
    pub message: String,
    /// What to do, when there is something to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// Where the rule comes from (spec section, upstream source, issue thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
}

impl Finding {
    pub(crate) fn new(
        rule: &'static str,
        object: &str,
        field: &str,
        level: Level,
        message: String,
    ) -> Self {
        Finding {
            rule,
            object: object.to_owned(),
            field: field.to_owned(),
            level,
            message,
            fix: None,
            source: None,
        }
    }
    pub(crate) fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
    pub(crate) fn source(mut self, s: &'static str) -> Self {
        self.source = Some(s);
        self
    }
}

/// The Gateway API's rule on observedGeneration (GEP-1364 and the implementers' guide:
/// implementations MUST set it on every condition).
pub const SRC_GENERATION: &str = "Gateway API spec: Condition.observedGeneration, implementers' guide (MUST be set); \
apache/apisix-ingress-controller#2767 (0 written); envoyproxy/gateway#8876 (route parents stale)";

/// `kind/NS/NAME` or `kind/NAME` of an object.
pub fn object_ref(kind: &str, obj: &Value) -> String {
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{}/{ns}/{name}", kind.to_lowercase()),
        None => format!("{}/{name}", kind.to_lowercase()),
    }
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_default()
}

/// The condition of `type_` in `conds`.
pub fn condition<'a>(conds: &'a Value, type_: &str) -> Option<&'a Value> {
    conds.as_array()?.iter().find(|c| c["type"] == type_)
}

/// Who last wrote an object's status: the `managedFields` entry of subresource `status`
/// (manager, time).
pub fn status_writer(obj: &Value) -> Option<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .filter(|m| m["subresource"] == "status")
        .max_by_key(|m| s(m, "time").to_owned())
        .map(|m| (s(m, "manager").to_owned(), s(m, "time").to_owned()))
}

/// Rule `observedGeneration`: each condition of `conds` (at `field`) against
/// `metadata.generation` of `obj`: current, stale (written for an older spec) or missing (0 or
/// absent: the implementation did not set it, so nothing says which spec it describes).
pub fn generation(object: &str, obj: &Value, conds: &Value, field: &str) -> Vec<Finding> {
    let gen_ = obj["metadata"]["generation"].as_i64().unwrap_or(0);
    let Some(list) = conds.as_array().filter(|l| !l.is_empty()) else {
        return vec![];
    };
    let writer = status_writer(obj)
        .map(|(m, t)| format!(" (status last written by {m} at {t})"))
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut current = Vec::new();
    for c in list {
        let t = s(c, "type");
        let og = c["observedGeneration"].as_i64().unwrap_or(0);
        let f = format!("{field}[{t}].observedGeneration");
        let shown = format!("{t}={} ({})", s(c, "status"), s(c, "reason"));
        if og == 0 {
            out.push(
                Finding::new("observedGeneration", object, &f, Level::Finding, format!(
                    "{shown} has observedGeneration {}: missing, so nothing says which spec it describes (metadata.generation is {gen_}){writer}",
                    if c.get("observedGeneration").is_some() { "0" } else { "absent" }
                ))
                .fix("the implementation must set observedGeneration on every condition; until it does, treat this condition as unknown")
                .source(SRC_GENERATION),
            );
        } else if og < gen_ {
            out.push(
                Finding::new("observedGeneration", object, &f, Level::Finding, format!(
                    "{shown} is stale: written for generation {og}, the spec is at generation {gen_}{writer}; no controller has processed the current spec"
                ))
                .fix("find why the controller has not reconciled it (rule controller); the condition describes an older spec")
                .source(SRC_GENERATION),
            );
        } else {
            current.push(t.to_owned());
        }
    }
    if !current.is_empty() && out.is_empty() {
        out.push(Finding::new(
            "observedGeneration",
            object,
            &format!("{field}[*].observedGeneration"),
            Level::Ok,
            format!("{} current (generation {gen_})", current.join(", ")),
        ));
    }
    out
}

/// The GatewayClass named by a Gateway.
pub fn class_of<'a>(snap: &'a Snapshot, gw: &Value) -> Option<&'a Value> {
    let name = s(&gw["spec"], "gatewayClassName");
    snap.classes.iter().find(|c| c["metadata"]["name"] == name)
}

/// Rule `controller` for a Gateway: its GatewayClass exists, is Accepted (by a controller
/// answering to its `controllerName`, for the class's current generation), and that
/// controller runs (its Deployment's available replicas, its pods' states, its Lease).
pub fn controller(gw: &Value, snap: &Snapshot) -> Vec<Finding> {
    let object = object_ref("Gateway", gw);
    let class_name = s(&gw["spec"], "gatewayClassName");
    let Some(class) = class_of(snap, gw) else {
        return vec![
            Finding::new("controller", &object, "spec.gatewayClassName", Level::Finding, format!(
                "GatewayClass {class_name:?} does not exist: no controller programs this Gateway; its status (if any) is left behind"
            ))
            .fix(format!("create GatewayClass {class_name} or set spec.gatewayClassName to an Accepted class (kubectl get gatewayclass)"))
            .source("Gateway API spec: GatewaySpec.gatewayClassName"),
        ];
    };
    let cref = object_ref("GatewayClass", class);
    let cname = s(&class["spec"], "controllerName");
    let mut out = generation(
        &cref,
        class,
        &class["status"]["conditions"],
        "status.conditions",
    );
    match condition(&class["status"]["conditions"], "Accepted") {
        Some(c) if c["status"] == "True" => out.push(Finding::new(
            "controller",
            &cref,
            "status.conditions[Accepted]",
            Level::Ok,
            format!("Accepted by a controller answering to controllerName {cname}"),
        )),
        c => {
            let how = c
                .map(|c| {
                    format!(
                        "Accepted={} ({}: {})",
                        s(c, "status"),
                        s(c, "reason"),
                        s(c, "message")
                    )
                })
                .unwrap_or_else(|| "no Accepted condition".into());
            out.push(
                Finding::new("controller", &object, "spec.gatewayClassName", Level::Finding, format!(
                    "its GatewayClass {class_name} (controllerName {cname}) is not accepted: {how}; no controller answers to {cname}, so nothing reconciles this Gateway and its status is left behind"
                ))
                .fix(format!("run the controller for {cname}, or set spec.gatewayClassName back to an Accepted class"))
                .source("Gateway API spec: GatewayClass Accepted condition (Pending: Waiting for controller)"),
            );
        }
    }
    out.extend(controller_running(&cref, cname, snap));
    out
}

/// Whether the controller answering to `cname` runs: a known implementation's Deployments
/// (by image) with available replicas, their pods' waiting reasons, and the Lease it holds.
pub fn controller_running(object: &str, cname: &str, snap: &Snapshot) -> Vec<Finding> {
    let Some(imp) = impls::by_controller(cname) else {
        return vec![Finding::new(
            "controller",
            object,
            "spec.controllerName",
            Level::Info,
            format!(
                "controllerName {cname} is not an implementation gatewaycheck knows (Envoy Gateway, Traefik, Cilium): whether its controller runs is not checked"
            ),
        )];
    };
    let deps: Vec<&Value> = snap
        .deployments
        .iter()
        .filter(|d| controller_of(d).is_some_and(|i| i.name == imp.name))
        .collect();
    if deps.is_empty() {
        return vec![
            Finding::new("controller", object, "spec.controllerName", Level::Finding, format!(
                "no Deployment runs the {} controller ({cname}; image {}) in any namespace you can list: nothing reconciles this class's Gateways and routes",
                imp.name, imp.images.join(", ")
            ))
            .fix(format!("install or restore {}", imp.name)),
        ];
    }
    let mut out = Vec::new();
    for d in deps {
        let dref = object_ref("Deployment", d);
        let avail = d["status"]["availableReplicas"].as_i64().unwrap_or(0);
        let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
        let lease = lease_of(d, snap);
        if avail > 0 {
            out.push(Finding::new(
                "controller",
                &dref,
                "status.availableReplicas",
                Level::Ok,
                format!(
                    "{} controller running: {avail}/{want} available{lease}",
                    imp.name
                ),
            ));
        } else {
            let pods = pod_states(&pods_of_deployment(d, snap));
            out.push(
                Finding::new("controller", &dref, "status.availableReplicas", Level::Finding, format!(
                    "{} controller not running: 0/{want} available{}{lease}; status it wrote is left behind",
                    imp.name,
                    if pods.is_empty() { String::new() } else { format!("; {pods}") }
                ))
                .fix(format!("kubectl -n {} describe deploy/{}", s(&d["metadata"], "namespace"), s(&d["metadata"], "name"))),
            );
        }
    }
    out
}

fn lease_of(d: &Value, snap: &Snapshot) -> String {
    let ns = s(&d["metadata"], "namespace");
    let pods: Vec<&str> = pods_of_deployment(d, snap)
        .iter()
        .map(|p| s(&p["metadata"], "name"))
        .collect();
    snap.leases
        .iter()
        .filter(|l| l["metadata"]["namespace"] == ns)
        .find(|l| {
            let h = s(&l["spec"], "holderIdentity");
            pods.iter().any(|p| !p.is_empty() && h.starts_with(p))
        })
        .map(|l| {
            format!(
                "; holds Lease {} (renewed {})",
                s(&l["metadata"], "name"),
                s(&l["spec"], "renewTime")
            )
        })
        .unwrap_or_default()
}

fn pods_of_deployment<'a>(d: &Value, snap: &'a Snapshot) -> Vec<&'a Value> {
    let ns = s(&d["metadata"], "namespace");
    let Some(sel) = d["spec"]["selector"]["matchLabels"].as_object() else {
        return vec![];
    };
    snap.pods
        .iter()
        .filter(|p| p["metadata"]["namespace"] == ns)
        .filter(|p| sel.iter().all(|(k, v)| p["metadata"]["labels"][k] == *v))
        .collect()
}

/// `pod NAME container C: REASON: MESSAGE` for each pod not ready, `;`-joined.
pub fn pod_states(pods: &[&Value]) -> String {
    let mut out = Vec::new();
    for p in pods {
        let name = s(&p["metadata"], "name");
        let statuses = p["status"]["containerStatuses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if statuses.is_empty() {
            out.push(format!(
                "pod {name}: {} (no container started)",
                s(&p["status"], "phase")
            ));
        }
        for c in statuses {
            if c["ready"] == true {
                continue;
            }
            let st = &c["state"];
            let what = if let Some(w) = st["waiting"].as_object() {
                format!(
                    "waiting {}: {}",
                    w.get("reason").and_then(Value::as_str).unwrap_or("?"),
                    w.get("message").and_then(Value::as_str).unwrap_or("")
                )
            } else if let Some(t) = st["terminated"].as_object() {
                format!(
                    "terminated {} (exit {})",
                    t.get("reason").and_then(Value::as_str).unwrap_or("?"),
                    t.get("exitCode").and_then(Value::as_i64).unwrap_or(-1)
                )
            } else {
                "running, not ready".into()
            };
            out.push(format!("pod {name} container {}: {what}", s(&c, "name")));
        }
    }
    out.join("; ")
}

/// Rule `listeners`: each listener of `spec.listeners` has a status entry, and its Accepted,
/// What to do for a route parent's `Accepted`/`ResolvedRefs` condition that is not True, by
/// its reason (Gateway API spec, RouteConditionReason); `None` for a reason with no one fix
/// (trial4: a missing backend Service had no fix, and gitops verify pointed back here).
fn parent_condition_fix(condition: &str, reason: &str) -> Option<&'static str> {
    Some(match (condition, reason) {
        ("ResolvedRefs", "BackendNotFound") => {
            "create the backend its spec.rules[].backendRefs name (kubectl get svc -n NAMESPACE), or point backendRefs at one that exists; when Flux applies it, the Kustomization's next run re-creates it (flux reconcile ks NAME)"
        }
        ("ResolvedRefs", "RefNotPermitted") => {
            "a backendRef in another namespace needs a ReferenceGrant there that allows this HTTPRoute"
        }
        ("ResolvedRefs", "InvalidKind") => {
            "a backendRef kind this implementation does not support: use a Service (or a kind its docs list)"
        }
        ("Accepted", "NotAllowedByListeners") => {
            "the Gateway's listener allowedRoutes (namespaces, kinds) must admit this route's namespace and kind"
        }
        ("Accepted", "NoMatchingListenerHostname") => {
            "make spec.hostnames intersect a listener's hostname (or drop the listener hostname)"
        }
        ("Accepted", "NoMatchingParent") => {
            "the parentRef's sectionName or port matches no listener of that Gateway"
        }
        _ => return None,
    })
}

/// ResolvedRefs and Programmed conditions are True and Conflicted is not True, with reasons.
pub fn listeners(gw: &Value) -> Vec<Finding> {
    let object = object_ref("Gateway", gw);
    let status = gw["status"]["listeners"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut fine = Vec::new();
    for (i, l) in gw["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = s(l, "name");
        let field = format!("status.listeners[{name}]");
        let Some(st) = status.iter().find(|x| x["name"] == name) else {
            out.push(
                Finding::new("listeners", &object, &format!("spec.listeners[{i}]"), Level::Finding, format!(
                    "listener {name} ({} port {}) has no status: no controller has processed it",
                    s(l, "protocol"), l["port"]
                ))
                .source("Gateway API spec: GatewayStatus.listeners"),
            );
            continue;
        };
        let mut bad = Vec::new();
        for t in ["Accepted", "ResolvedRefs", "Programmed"] {
            match condition(&st["conditions"], t) {
                Some(c) if c["status"] == "True" => {}
                Some(c) => bad.push(format!(
                    "{t}={} ({}: {})",
                    s(c, "status"),
                    s(c, "reason"),
                    s(c, "message")
                )),
                None => bad.push(format!("no {t} condition")),
            }
        }
        if let Some(c) =
            condition(&st["conditions"], "Conflicted").filter(|c| c["status"] == "True")
        {
            bad.push(format!(
                "Conflicted=True ({}: {})",
                s(c, "reason"),
                s(c, "message")
            ));
        }
        if bad.is_empty() {
            fine.push(format!("{name} (attachedRoutes {})", st["attachedRoutes"]));
        } else {
            out.push(
                Finding::new(
                    "listeners",
                    &object,
                    &field,
                    Level::Finding,
                    format!(
                        "listener {name} ({} port {}): {}",
                        s(l, "protocol"),
                        l["port"],
                        bad.join("; ")
                    ),
                )
                .source("Gateway API spec: ListenerConditionType"),
            );
        }
    }
    if !fine.is_empty() {
        out.push(Finding::new(
            "listeners",
            &object,
            "status.listeners",
            Level::Ok,
            format!("Accepted, ResolvedRefs, Programmed: {}", fine.join(", ")),
        ));
    }
    out
}

/// The Services a Gateway's implementation made for it (by the known implementations' labels or
/// `gateway.networking.k8s.io/gateway-name`).
pub fn services_of<'a>(gw: &Value, snap: &'a Snapshot) -> Vec<&'a Value> {
    let key = (
        s(&gw["metadata"], "namespace").to_owned(),
        s(&gw["metadata"], "name").to_owned(),
    );
    snap.services
        .iter()
        .filter(|svc| gateway_of_service(svc).as_ref() == Some(&key))
        .collect()
}

/// The addresses a Service holds for clients of its type: `status.loadBalancer.ingress` for
/// LoadBalancer, `spec.clusterIPs` for ClusterIP, and `spec.externalIPs` for any type; `None` for
/// NodePort (reached on node addresses the Service does not list).
fn held_addresses(svc: &Value) -> Option<Vec<String>> {
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x.as_str().filter(|x| *x != "None").map(str::to_owned))
            .collect()
    };
    let mut out = match svc["spec"]["type"].as_str().unwrap_or("ClusterIP") {
        "LoadBalancer" => ingress_ips(svc),
        "ClusterIP" => list(&svc["spec"]["clusterIPs"]),
        _ => return None,
    };
    out.extend(list(&svc["spec"]["externalIPs"]));
    Some(out)
}

fn ingress_ips(svc: &Value) -> Vec<String> {
    svc["status"]["loadBalancer"]["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i["ip"]
                .as_str()
                .or(i["hostname"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

fn is_lb(svc: &Value) -> bool {
    svc["spec"]["type"] == "LoadBalancer"
}

/// The pools present, as `name: ranges`, for messages.
fn pools_text(snap: &Snapshot) -> String {
    let mut parts = Vec::new();
    match &snap.metallb_pools {
        None => parts.push(
            "MetalLB is not installed (metallb.io/v1beta1 IPAddressPool not served)".to_owned(),
        ),
        Some(p) if p.is_empty() => {
            parts.push("MetalLB is installed but has no IPAddressPool".to_owned())
        }
        Some(p) => parts.push(format!(
            "MetalLB IPAddressPools: {}",
            p.iter()
                .map(|x| format!(
                    "{} [{}]",
                    s(&x["metadata"], "name"),
                    pool_ranges(x)
                        .iter()
                        .map(|r| r.text.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )),
    }
    match &snap.cilium_pools {
        None => parts.push("Cilium LB-IPAM is not installed".to_owned()),
        Some(p) if p.is_empty() => {
            parts.push("Cilium LB-IPAM has no CiliumLoadBalancerIPPool".to_owned())
        }
        Some(p) => parts.push(format!(
            "Cilium pools: {}",
            p.iter()
                .map(|x| s(&x["metadata"], "name").to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
    parts.join("; ")
}

/// The address ranges of a MetalLB IPAddressPool (`spec.addresses`) or a Cilium pool
/// (`spec.blocks[]` `{cidr}` / `{start, stop}`); unparsable entries are skipped.
pub fn pool_ranges(pool: &Value) -> Vec<net::Range> {
    let mut out = Vec::new();
    for a in pool["spec"]["addresses"].as_array().into_iter().flatten() {
        if let Some(r) = a.as_str().and_then(|t| net::parse_range(t).ok()) {
            out.push(r);
        }
    }
    for b in pool["spec"]["blocks"].as_array().into_iter().flatten() {
        let t = match (b["cidr"].as_str(), b["start"].as_str(), b["stop"].as_str()) {
            (Some(c), _, _) => c.to_owned(),
            (None, Some(a), Some(z)) => format!("{a}-{z}"),
            (None, Some(a), None) => a.to_owned(),
            _ => continue,
        };
        if let Ok(r) = net::parse_range(&t) {
            out.push(r);
        }
    }
    out
}

fn warning_events(svc: &Value, snap: &Snapshot) -> Vec<String> {
    let (ns, name) = (
        s(&svc["metadata"], "namespace"),
        s(&svc["metadata"], "name"),
    );
    let mut ev: Vec<&Value> = snap
        .events
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name && e["metadata"]["namespace"] == ns)
        .collect();
    ev.sort_by_key(|e| s(e, "lastTimestamp").to_owned());
    ev.iter()
        .rev()
        .take(2)
        .map(|e| {
            format!(
                "{} {}: {}",
                s(e, "reason"),
                s(&e["source"], "component"),
                s(e, "message").trim()
            )
        })
        .collect()
}

/// Rule `addresses`: `status.addresses` against the implementation's Service
/// (`status.loadBalancer.ingress`), and `Programmed=False AddressNotAssigned` explained: the
/// pending LoadBalancer Services, the pools present or absent, the way out for the
/// implementation.
pub fn addresses(gw: &Value, snap: &Snapshot) -> Vec<Finding> {
    let object = object_ref("Gateway", gw);
    let imp: Option<&Implementation> =
        class_of(snap, gw).and_then(|c| impls::by_controller(s(&c["spec"], "controllerName")));
    let svcs = services_of(gw, snap);
    let status_addrs: Vec<String> = gw["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["value"].as_str().map(str::to_owned))
        .collect();
    let held: Vec<(String, Vec<String>)> = svcs
        .iter()
        .map(|svc| (object_ref("Service", svc), ingress_ips(svc)))
        .collect();
    // What the Services hold for their type (LoadBalancer ingress, ClusterIPs, externalIPs);
    // a NodePort Service lists no address to compare with.
    let comparable: Option<Vec<(String, Vec<String>)>> = svcs
        .iter()
        .map(|svc| held_addresses(svc).map(|a| (object_ref("Service", svc), a)))
        .collect();
    let held_ips: Vec<String> = held.iter().flat_map(|(_, i)| i.clone()).collect();
    let programmed = condition(&gw["status"]["conditions"], "Programmed");
    let not_assigned =
        programmed.is_some_and(|c| c["status"] == "False" && c["reason"] == "AddressNotAssigned");
    let mut out = Vec::new();
    if not_assigned {
        if !held_ips.is_empty() {
            out.push(
                Finding::new("addresses", &object, "status.conditions[Programmed]", Level::Finding, format!(
                    "Programmed=False AddressNotAssigned is stale: {} already holds {} (status.loadBalancer.ingress); the controller has not seen the Service's address",
                    held.iter().filter(|(_, i)| !i.is_empty()).map(|(n, _)| n.clone()).collect::<Vec<_>>().join(", "),
                    held_ips.join(", ")
                ))
                .fix("make the controller reconcile the Service again: touch it (kubectl annotate service ... gatewaycheck/touch=$(date +%s)) or restart the controller's pod")
                .source("envoyproxy/gateway#8953"),
            );
            return out;
        }
        if let Some(np) = svcs.iter().find(|x| x["spec"]["type"] == "NodePort") {
            out.push(
                Finding::new("addresses", &object, "status.conditions[Programmed]", Level::Finding, format!(
                    "Programmed=False AddressNotAssigned with a NodePort Service ({}): the implementation reports the nodes' addresses for it (Envoy Gateway: each Node's ExternalIP, else InternalIP) and has none for this Gateway",
                    object_ref("Service", np)
                ))
                .fix("check the Nodes' status.addresses (kubectl get nodes -o wide) and the controller's log; a NodePort Gateway is reached on a node address and the node port")
                .source("Envoy Gateway internal/provider/kubernetes/store.go addNode, status.go nodeAddressesForGateway"),
            );
            return out;
        }
        let pending: Vec<String> = snap
            .services
            .iter()
            .filter(|x| is_lb(x) && ingress_ips(x).is_empty())
            .map(|x| object_ref("Service", x))
            .collect();
        let mine: Vec<String> = svcs
            .iter()
            .filter(|x| is_lb(x))
            .map(|x| object_ref("Service", x))
            .collect();
        let events: Vec<String> = svcs.iter().flat_map(|x| warning_events(x, snap)).collect();
        let way_out = imp.map(|i| i.no_lb_way_out).unwrap_or(
            "install a load balancer with a pool (MetalLB IPAddressPool: metallb.io/configuration; Cilium LB-IPAM: docs.cilium.io network/lb-ipam) or expose the data plane as NodePort",
        );
        let no_pool = snap.metallb_pools.as_ref().is_none_or(|p| p.is_empty())
            && snap.cilium_pools.as_ref().is_none_or(|p| p.is_empty());
        out.push(
            Finding::new("addresses", &object, "status.conditions[Programmed]", Level::Finding, format!(
                "Programmed=False AddressNotAssigned: no load balancer has assigned an address to {}; {} LoadBalancer Service{} pending in the cluster ({}); {}{}",
                if mine.is_empty() { "its Service (none of type LoadBalancer found)".to_owned() } else { mine.join(", ") },
                pending.len(),
                if pending.len() == 1 { "" } else { "s" },
                pending.join(", "),
                pools_text(snap),
                if events.is_empty() { String::new() } else { format!("; Service events: {}", events.join(" | ")) }
            ))
            .fix(if no_pool { format!("no pool serves this cluster: {way_out}") } else { format!("a pool exists but gave no address: see the Service events and rule pool; {way_out}") })
            .source("Envoy Gateway internal/gatewayapi/status/gateway.go updateGatewayProgrammedCondition; metallb.io/configuration"),
        );
        return out;
    }
    let Some(held) = comparable else {
        out.push(Finding::new(
            "addresses", &object, "status.addresses", Level::Info,
            format!("[{}] not compared: a NodePort Service is reached on node addresses it does not list", status_addrs.join(", ")),
        ));
        return out;
    };
    let held_ips: Vec<String> = held.iter().flat_map(|(_, i)| i.clone()).collect();
    if held_ips.is_empty() && status_addrs.is_empty() {
        return out;
    }
    let mut only_status: Vec<&String> = status_addrs
        .iter()
        .filter(|a| !held_ips.contains(a))
        .collect();
    let only_svc: Vec<&String> = held_ips
        .iter()
        .filter(|a| !status_addrs.contains(a))
        .collect();
    if svcs.is_empty() {
        only_status.clear();
    }
    if only_status.is_empty() && only_svc.is_empty() {
        if !status_addrs.is_empty() {
            out.push(Finding::new(
                "addresses",
                &object,
                "status.addresses",
                Level::Ok,
                format!(
                    "{} held by {}",
                    status_addrs.join(", "),
                    held.iter()
                        .map(|(n, _)| n.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    } else {
        out.push(
            Finding::new("addresses", &object, "status.addresses", Level::Finding, format!(
                "status.addresses [{}] disagrees with the Service{} [{}]: {}",
                status_addrs.join(", "),
                if held.len() == 1 { format!(" {}", held[0].0) } else { "s".into() },
                held_ips.join(", "),
                if !only_svc.is_empty() {
                    "the Gateway's status is stale (the Service's address is what clients reach)"
                } else {
                    "the Service no longer holds the address the Gateway reports (the load balancer released it)"
                }
            ))
            .fix("make the controller reconcile again (touch the Service or restart the controller); if the Service lost its address, see rule pool")
            .source("envoyproxy/gateway#8953"),
        );
    }
    out
}

/// The addresses asked for a Gateway's Service: Gateway `spec.addresses` (IPAddress), the
/// Service's `spec.loadBalancerIP` and the MetalLB / Cilium annotations, and `extra` (--vip).
pub fn requested_vips(gw: &Value, svcs: &[&Value], extra: Option<&str>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for a in gw["spec"]["addresses"].as_array().into_iter().flatten() {
        if a["type"].as_str().is_none_or(|t| t == "IPAddress")
            && let Some(v) = a["value"].as_str()
        {
            out.push((v.to_owned(), "Gateway spec.addresses".to_owned()));
        }
    }
    for svc in svcs {
        let sref = object_ref("Service", svc);
        if let Some(ip) = svc["spec"]["loadBalancerIP"]
            .as_str()
            .filter(|x| !x.is_empty())
        {
            out.push((ip.to_owned(), format!("{sref} spec.loadBalancerIP")));
        }
        for key in [
            "metallb.io/loadBalancerIPs",
            "metallb.universe.tf/loadBalancerIPs",
            "lbipam.cilium.io/ips",
            "io.cilium/lb-ipam-ips",
        ] {
            if let Some(v) = svc["metadata"]["annotations"][key].as_str() {
                for ip in v.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                    out.push((ip.to_owned(), format!("{sref} annotation {key}")));
                }
            }
        }
    }
    if let Some(v) = extra {
        out.push((v.to_owned(), "--vip".to_owned()));
    }
    out
}

/// Rule `pool`: every address asked for (see [`requested_vips`]) and every address assigned lies
/// inside a MetalLB or Cilium pool; an address outside every pool is never assigned (the Service
/// stays pending) or was not given by the pool.
pub fn pool(gw: &Value, snap: &Snapshot, vip: Option<&str>) -> Vec<Finding> {
    let object = object_ref("Gateway", gw);
    let svcs = services_of(gw, snap);
    let pools: Vec<(String, Vec<net::Range>)> = snap
        .metallb_pools
        .iter()
        .flatten()
        .chain(snap.cilium_pools.iter().flatten())
        .map(|p| {
            (
                format!("{}/{}", s(p, "kind"), s(&p["metadata"], "name")),
                pool_ranges(p),
            )
        })
        .collect();
    let mut out = Vec::new();
    if pools.is_empty() {
        return out;
    }
    let mut asked = requested_vips(gw, &svcs, vip);
    for svc in &svcs {
        for ip in ingress_ips(svc) {
            asked.push((
                ip,
                format!("{} status.loadBalancer.ingress", object_ref("Service", svc)),
            ));
        }
    }
    for (ip, from) in asked {
        let Ok(addr) = ip.parse::<std::net::IpAddr>() else {
            continue;
        };
        match pools
            .iter()
            .find(|(_, rs)| rs.iter().any(|r| r.contains(addr)))
        {
            Some((p, _)) => out.push(Finding::new(
                "pool",
                &object,
                &from,
                Level::Ok,
                format!("{ip} lies in {p}"),
            )),
            None => {
                let events: Vec<String> =
                    svcs.iter().flat_map(|x| warning_events(x, snap)).collect();
                let first = pools.iter().find_map(|(p, rs)| {
                    rs.first()
                        .map(|r| format!("{p} (first address {})", r.start))
                });
                out.push(
                    Finding::new("pool", &object, &from, Level::Finding, format!(
                        "VIP {ip} ({from}) lies outside every pool ({}): the load balancer will not assign it{}",
                        pools.iter().map(|(p, rs)| format!("{p} [{}]", rs.iter().map(|r| r.text.clone()).collect::<Vec<_>>().join(", "))).collect::<Vec<_>>().join("; "),
                        if events.is_empty() { String::new() } else { format!("; Service events: {}", events.join(" | ")) }
                    ))
                    .fix(format!("ask for an address inside a pool{} or add {ip} to a pool", first.map(|f| format!(", e.g. {f},")).unwrap_or_default()))
                    .source("metallb.io/usage (requesting specific IPs); failure catalogue: a gateway VIP must lie inside the load-balancer pool"),
                );
            }
        }
    }
    out
}

/// Rule `dataPlane`: the implementation's proxy pods for the Gateway, with the kubelet's
/// reason for each one not ready; `Programmed=True` with no ready proxy is contradicted.
pub fn data_plane(gw: &Value, snap: &Snapshot) -> Vec<Finding> {
    let object = object_ref("Gateway", gw);
    let key = (
        s(&gw["metadata"], "namespace").to_owned(),
        s(&gw["metadata"], "name").to_owned(),
    );
    let pods: Vec<&Value> = snap
        .pods
        .iter()
        .filter(|p| gateway_of_service(p).as_ref() == Some(&key))
        .collect();
    let programmed_true =
        condition(&gw["status"]["conditions"], "Programmed").is_some_and(|c| c["status"] == "True");
    let imp =
        class_of(snap, gw).and_then(|c| impls::by_controller(s(&c["spec"], "controllerName")));
    let mut out = Vec::new();
    if pods.is_empty() {
        if imp.is_some_and(|i| i.gateway_labels.is_some()) {
            out.push(Finding::new(
                "dataPlane",
                &object,
                "pods",
                if programmed_true {
                    Level::Finding
                } else {
                    Level::Info
                },
                format!(
                    "no data-plane pod labelled for this Gateway{}",
                    if programmed_true {
                        " while Programmed=True: nothing serves it"
                    } else {
                        ""
                    }
                ),
            ));
        }
        return out;
    }
    let ready: Vec<&&Value> = pods
        .iter()
        .filter(|p| {
            condition(&p["status"]["conditions"], "Ready").is_some_and(|c| c["status"] == "True")
        })
        .collect();
    let not_ready: Vec<&Value> = pods
        .iter()
        .copied()
        .filter(|p| {
            !ready
                .iter()
                .any(|r| r["metadata"]["name"] == p["metadata"]["name"])
        })
        .collect();
    if not_ready.is_empty() {
        out.push(Finding::new(
            "dataPlane",
            &object,
            "pods",
            Level::Ok,
            format!("{}/{} data-plane pods ready", ready.len(), pods.len()),
        ));
        return out;
    }
    out.push(
        Finding::new("dataPlane", &object, "pods", Level::Finding, format!(
            "{}/{} data-plane pods ready{}: {}",
            ready.len(),
            pods.len(),
            if ready.is_empty() && programmed_true { " while Programmed=True" } else if ready.is_empty() { " (the proxy replicas are unavailable)" } else { "" },
            pod_states(&not_ready)
        ))
        .fix(format!("kubectl -n {} describe pod {}", s(&not_ready[0]["metadata"], "namespace"), s(&not_ready[0]["metadata"], "name")))
        .source("Envoy Gateway updateGatewayProgrammedCondition: NoResources \"Envoy replicas unavailable\""),
    );
    out
}

/// Rule `parents` for an HTTPRoute: `status.parents` against `spec.parentRefs` (a parent in
/// status and no longer in spec is left behind; a parent in spec with no status has not been
/// processed), each parent's conditions and their observedGeneration.
pub fn route_parents(route: &Value, snap: &Snapshot) -> Vec<Finding> {
    let object = object_ref("HTTPRoute", route);
    let rns = s(&route["metadata"], "namespace");
    let key = |p: &Value| {
        format!(
            "{}/{}/{}{}",
            p["kind"].as_str().unwrap_or("Gateway"),
            p["namespace"].as_str().unwrap_or(rns),
            s(p, "name"),
            p["sectionName"]
                .as_str()
                .map(|x| format!("#{x}"))
                .unwrap_or_default()
        )
    };
    let spec: Vec<&Value> = route["spec"]["parentRefs"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let status: Vec<&Value> = route["status"]["parents"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let mut out = Vec::new();
    for (i, st) in status.iter().enumerate() {
        let k = key(&st["parentRef"]);
        let field = format!("status.parents[{i}]");
        if !spec.iter().any(|p| key(p) == k) {
            out.push(
                Finding::new("parents", &object, &field, Level::Finding, format!(
                    "parent {k} is in status (written by {}) but no longer in spec.parentRefs: left behind, the route is not attached there",
                    s(st, "controllerName")
                ))
                .fix("the controller of that parent removes it when it next reconciles; if it does not run any more, the entry stays: ignore it")
                .source("Gateway API spec: RouteStatus.parents (a controller removes its entry when the parentRef goes)"),
            );
            continue;
        }
        out.extend(generation(
            &object,
            route,
            &st["conditions"],
            &format!("{field}.conditions"),
        ));
        // The controller that wrote this entry must still run, or the entry is left behind
        // (trial3: a route read 'consistent' with Envoy Gateway at 0 replicas).
        let cname = s(st, "controllerName");
        if !cname.is_empty() {
            for f in controller_running(&object, cname, snap) {
                if f.level == Level::Finding && !out.iter().any(|o| o.message == f.message) {
                    out.push(f);
                }
            }
        }
        for t in ["Accepted", "ResolvedRefs"] {
            if let Some(c) = condition(&st["conditions"], t).filter(|c| c["status"] != "True") {
                let f = Finding::new(
                    "parents",
                    &object,
                    &format!("{field}.conditions[{t}]"),
                    Level::Finding,
                    format!(
                        "parent {k}: {t}={} ({}: {})",
                        s(c, "status"),
                        s(c, "reason"),
                        s(c, "message")
                    ),
                );
                let f = match parent_condition_fix(t, s(c, "reason")) {
                    Some(fix) => f.fix(fix),
                    None => f,
                };
                out.push(f.source("Gateway API spec: RouteConditionType, RouteConditionReason"));
            }
        }
    }
    for (i, p) in spec.iter().enumerate() {
        let k = key(p);
        if status.iter().any(|st| key(&st["parentRef"]) == k) {
            continue;
        }
        let gw = snap.gateways.iter().find(|g| {
            g["metadata"]["name"] == s(p, "name")
                && g["metadata"]["namespace"] == p["namespace"].as_str().unwrap_or(rns)
        });
        let why = match gw {
            None if p["kind"].as_str().is_none_or(|k| k == "Gateway") => {
                "that Gateway does not exist".to_owned()
            }
            None => "the parent is not a Gateway gatewaycheck can read".to_owned(),
            Some(g) => match class_of(snap, g) {
                None => format!(
                    "its Gateway's class {} does not exist",
                    s(&g["spec"], "gatewayClassName")
                ),
                Some(c) => format!(
                    "no controller answering to {} has processed it",
                    s(&c["spec"], "controllerName")
                ),
            },
        };
        out.push(
            Finding::new("parents", &object, &format!("spec.parentRefs[{i}]"), Level::Finding, format!(
                "parent {k} has no entry in status.parents: {why}; the route is not attached there"
            ))
            .source("Gateway API spec: RouteStatus.parents"),
        );
    }
    if out.iter().all(|f| f.level != Level::Finding) && !status.is_empty() {
        out.push(Finding::new(
            "parents",
            &object,
            "status.parents",
            Level::Ok,
            format!(
                "{} parent{} Accepted and ResolvedRefs",
                status.len(),
                if status.len() == 1 { "" } else { "s" }
            ),
        ));
    }
    out
}

/// Rule `vip`: the address the Gateway should have (`--vip`, e.g. the repository's
/// GATEWAY_VIP that split-horizon DNS answers for its hostnames) against the addresses it has
/// (`status.addresses`). A VIP that is not one of them is the fleet README's hairpin trap: the
/// pool gave the Gateway another address, so clients sent to the VIP never reach it. No
/// finding while the Gateway has no address yet (rule `addresses` says why).
pub fn vip(gw: &Value, vip: Option<&str>) -> Vec<Finding> {
    let Some(v) = vip else { return vec![] };
    let object = object_ref("Gateway", gw);
    let has: Vec<&str> = gw["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["value"].as_str())
        .collect();
    let same = |a: &str| match (a.parse::<std::net::IpAddr>(), v.parse::<std::net::IpAddr>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == v,
    };
    if has.is_empty() {
        vec![]
    } else if has.iter().any(|a| same(a)) {
        vec![Finding::new(
            "vip",
            &object,
            "status.addresses",
            Level::Ok,
            format!("--vip {v} is the Gateway's address"),
        )]
    } else {
        vec![
            Finding::new(
                "vip",
                &object,
                "status.addresses",
                Level::Finding,
                format!(
                    "--vip {v} is not the Gateway's address ({}): whatever answers {v} for its hostnames (split-horizon DNS, a client's config) sends requests elsewhere",
                    has.join(", ")
                ),
            )
            .fix(format!(
                "set the repository's VIP to {} (what the load balancer gave this Gateway), or ask for {v}: Gateway spec.addresses or the implementation's Service annotation (MetalLB metallb.io/loadBalancerIPs)",
                has[0]
            ))
            .source("clusters/ README split-horizon CoreDNS (${GATEWAY_VIP}); Gateway API GatewayStatus.addresses"),
        ]
    }
}

/// Every rule for a Gateway.
pub fn gateway(gw: &Value, snap: &Snapshot, vip: Option<&str>) -> Vec<Finding> {
    let object = object_ref("Gateway", gw);
    let mut out = generation(
        &object,
        gw,
        &gw["status"]["conditions"],
        "status.conditions",
    );
    out.extend(controller(gw, snap));
    out.extend(listeners(gw));
    out.extend(addresses(gw, snap));
    out.extend(pool(gw, snap, vip));
    out.extend(self::vip(gw, vip));
    out.extend(data_plane(gw, snap));
    if let Some(c) = condition(&gw["status"]["conditions"], "Programmed")
        .filter(|c| c["status"] != "True" && c["reason"] != "AddressNotAssigned")
    {
        out.push(Finding::new(
            "programmed",
            &object,
            "status.conditions[Programmed]",
            Level::Finding,
            format!(
                "Programmed={} ({}: {})",
                s(c, "status"),
                s(c, "reason"),
                s(c, "message")
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The fleet README's hairpin trap: the repository's GATEWAY_VIP is not the address the
    /// pool gave the Gateway.
    #[test]
    fn a_vip_that_is_not_the_gateways_address_is_a_finding() {
        let gw = json!({"metadata": {"name": "eg", "namespace": "infra"},
            "status": {"addresses": [{"type": "IPAddress", "value": "172.18.255.201"}]}});
        let f = vip(&gw, Some("172.18.255.200"));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].level, Level::Finding);
        assert!(
            f[0].message
                .starts_with("--vip 172.18.255.200 is not the Gateway's address (172.18.255.201)"),
            "{}",
            f[0].message
        );
        assert!(
            f[0].fix
                .as_deref()
                .unwrap()
                .starts_with("set the repository's VIP to 172.18.255.201")
        );
        let f = vip(&gw, Some("172.18.255.201"));
        assert_eq!(f[0].level, Level::Ok);
        // No address yet: rule `addresses` speaks; nothing to compare.
        assert!(vip(&json!({"metadata": {"name": "eg"}}), Some("172.18.255.200")).is_empty());
        assert!(vip(&gw, None).is_empty());
    }

    fn eg_service(ingress: serde_json::Value) -> Value {
        json!({"metadata": {"name": "envoy-infra-eg", "namespace": "envoy-gateway-system",
                "labels": {"gateway.envoyproxy.io/owning-gateway-name": "eg", "gateway.envoyproxy.io/owning-gateway-namespace": "infra"}},
            "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.50"]},
            "status": {"loadBalancer": {"ingress": ingress}}})
    }

    /// The state of envoyproxy/gateway#8953: the LoadBalancer Service has its address back, the
    /// Gateway still says Programmed=False AddressNotAssigned (until the Service is touched).
    #[test]
    fn address_not_assigned_while_the_service_holds_an_address_is_stale() {
        let gw = json!({"metadata": {"name": "eg", "namespace": "infra", "generation": 3},
            "spec": {"gatewayClassName": "eg"},
            "status": {"conditions": [{"type": "Programmed", "status": "False", "reason": "AddressNotAssigned",
                "message": "No addresses have been assigned to the Gateway", "observedGeneration": 3}]}});
        let snap = Snapshot {
            services: vec![eg_service(json!([{"ip": "172.18.255.200"}]))],
            ..Snapshot::default()
        };
        let f = addresses(&gw, &snap);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].level, Level::Finding);
        assert!(f[0].message.starts_with("Programmed=False AddressNotAssigned is stale: service/envoy-gateway-system/envoy-infra-eg already holds 172.18.255.200"), "{}", f[0].message);
        assert_eq!(f[0].source, Some("envoyproxy/gateway#8953"));
    }

    /// The state of apache/apisix-ingress-controller#2767: route parent conditions written with
    /// observedGeneration 0 (the implementers' guide says MUST be set).
    #[test]
    fn observed_generation_zero_is_missing_not_current() {
        let route = json!({"metadata": {"name": "web", "namespace": "apps", "generation": 2},
            "spec": {"parentRefs": [{"name": "apisix"}]},
            "status": {"parents": [{"parentRef": {"name": "apisix"}, "controllerName": "apisix.apache.org/apisix-ingress-controller",
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 0},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs"}]}]}});
        let f = route_parents(&route, &Snapshot::default());
        let missing: Vec<&Finding> = f
            .iter()
            .filter(|f| f.rule == "observedGeneration")
            .collect();
        assert_eq!(missing.len(), 2, "{f:#?}");
        assert!(
            missing[0].message.contains("observedGeneration 0: missing"),
            "{}",
            missing[0].message
        );
        assert!(
            missing[1]
                .message
                .contains("observedGeneration absent: missing"),
            "{}",
            missing[1].message
        );
        assert!(f.iter().all(|f| f.level != Level::Ok), "{f:#?}");
    }

    /// Trial3: a route whose parent entry Envoy Gateway wrote, with Envoy Gateway at 0
    /// replicas, read 'consistent'. The writer must run, or the entry is left behind.
    #[test]
    fn a_route_whose_backend_is_missing_says_what_to_do() {
        let route = json!({"metadata": {"name": "podinfo", "namespace": "apps", "generation": 1},
            "spec": {"parentRefs": [{"name": "eg", "namespace": "infra"}]},
            "status": {"parents": [{"parentRef": {"name": "eg", "namespace": "infra"},
                "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 1},
                    {"type": "ResolvedRefs", "status": "False", "reason": "BackendNotFound",
                     "message": "Failed to process route rule 0 backendRef 0: service apps/podinfo-frontend not found.", "observedGeneration": 1}]}]}});
        let f = route_parents(&route, &Snapshot::default());
        let missing = f
            .iter()
            .find(|f| f.field.ends_with("conditions[ResolvedRefs]"))
            .unwrap_or_else(|| panic!("{f:#?}"));
        assert_eq!(missing.level, Level::Finding);
        assert!(
            missing
                .fix
                .as_deref()
                .is_some_and(|x| x.starts_with("create the backend")),
            "{missing:#?}"
        );
    }

    #[test]
    fn a_route_whose_controller_stopped_is_left_behind() {
        let route = json!({"metadata": {"name": "podinfo", "namespace": "apps", "generation": 1},
            "spec": {"parentRefs": [{"name": "eg", "namespace": "infra"}]},
            "status": {"parents": [{"parentRef": {"name": "eg", "namespace": "infra"},
                "controllerName": "gateway.envoyproxy.io/gatewayclass-controller",
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": 1},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "observedGeneration": 1}]}]}});
        let eg = |available: i64| {
            json!({"metadata": {"name": "envoy-gateway", "namespace": "envoy-gateway-system"},
                "spec": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "envoy-gateway", "image": "docker.io/envoyproxy/gateway:v1.9.1"}]}}},
                "status": {"availableReplicas": available}})
        };
        let stopped = Snapshot {
            deployments: vec![eg(0)],
            ..Snapshot::default()
        };
        let f = route_parents(&route, &stopped);
        assert!(
            f.iter().any(|f| f.level == Level::Finding
                && f.message.contains("controller not running")
                && f.message.contains("left behind")),
            "{f:#?}"
        );
        assert!(
            !f.iter()
                .any(|f| f.rule == "parents" && f.level == Level::Ok),
            "no 'Accepted and ResolvedRefs' ok row beside it: {f:#?}"
        );
        let running = Snapshot {
            deployments: vec![eg(1)],
            ..Snapshot::default()
        };
        let f = route_parents(&route, &running);
        assert!(f.iter().all(|f| f.level != Level::Finding), "{f:#?}");
    }

    /// Found on the real Envoy Gateway (an EnvoyProxy with envoyService.type ClusterIP): the
    /// Gateway's address is the Service's ClusterIP, which is not in status.loadBalancer.ingress;
    /// comparing with the ingress alone said the load balancer had released it (false).
    #[test]
    fn a_cluster_ip_service_holds_its_cluster_ip() {
        let gw = json!({"metadata": {"name": "web", "namespace": "gc-dp", "generation": 1},
            "spec": {"gatewayClassName": "eg"},
            "status": {"addresses": [{"type": "IPAddress", "value": "10.96.171.104"}],
                "conditions": [{"type": "Programmed", "status": "False", "reason": "NoResources", "observedGeneration": 1}]}});
        let svc = json!({"metadata": {"name": "envoy-gc-dp-web", "namespace": "envoy-gateway-system",
                "labels": {"gateway.envoyproxy.io/owning-gateway-name": "web", "gateway.envoyproxy.io/owning-gateway-namespace": "gc-dp"}},
            "spec": {"type": "ClusterIP", "clusterIPs": ["10.96.171.104"]}, "status": {"loadBalancer": {}}});
        let snap = Snapshot {
            services: vec![svc.clone()],
            ..Snapshot::default()
        };
        let f = addresses(&gw, &snap);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].level, Level::Ok, "{f:#?}");
        // The same address gone from the Service is a finding.
        let mut moved = svc;
        moved["spec"]["clusterIPs"] = json!(["10.96.0.99"]);
        let snap = Snapshot {
            services: vec![moved],
            ..Snapshot::default()
        };
        assert_eq!(addresses(&gw, &snap)[0].level, Level::Finding);
    }
}
