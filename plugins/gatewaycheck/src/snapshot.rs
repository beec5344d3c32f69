//! Every object one run reads, fetched once: the session value the rules read.
//!
//! Reads (all `list`/`get`, nothing written): GatewayClasses, Gateways and HTTPRoutes
//! (gateway.networking.k8s.io/v1; all namespaces, else the namespace when listing them all is
//! forbidden), Deployments, Services, the data-plane pods of the known implementations (by their
//! Gateway labels), the pods and Leases of the controllers' Deployments, MetalLB IPAddressPools
//! (metallb.io/v1beta1) and Cilium CiliumLoadBalancerIPPools (cilium.io/v2alpha1), absent when
//! the cluster does not serve them, and the Warning Events of the Gateways' Services.

use crate::impls;
use cluster_loop::cli::Connection;
use cluster_loop::error::{Error, Result};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;

/// The Gateway API group.
pub const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// GatewayClass, Gateway, HTTPRoute (v1).
pub fn gateway_api(kind: &str) -> ApiResource {
    let plural = format!("{}es", kind.to_lowercase());
    let plural = if kind == "Gateway" || kind == "HTTPRoute" {
        format!("{}s", kind.to_lowercase())
    } else {
        plural
    };
    ar(GATEWAY_GROUP, "v1", kind, &plural)
}

/// Everything the rules read.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// GatewayClasses.
    pub classes: Vec<Value>,
    /// Gateways (all namespaces when allowed).
    pub gateways: Vec<Value>,
    /// HTTPRoutes (all namespaces when allowed).
    pub routes: Vec<Value>,
    /// Deployments (all namespaces when allowed).
    pub deployments: Vec<Value>,
    /// Services (all namespaces when allowed).
    pub services: Vec<Value>,
    /// Data-plane pods (known implementations' Gateway labels) and controller pods.
    pub pods: Vec<Value>,
    /// Leases in the controllers' namespaces.
    pub leases: Vec<Value>,
    /// MetalLB IPAddressPools; `None`: metallb.io/v1beta1 is not served (MetalLB absent).
    pub metallb_pools: Option<Vec<Value>>,
    /// Cilium LB-IPAM pools; `None`: not served.
    pub cilium_pools: Option<Vec<Value>>,
    /// Warning Events of the Services of the Gateways.
    pub events: Vec<Value>,
    /// When the snapshot was taken.
    pub now: Option<jiff::Timestamp>,
}

/// Lists `res` in all namespaces (or the cluster scope), else in `ns` when that is forbidden
/// (403). `Ok(None)`: the API is not served (404). Errors: any other API error (exit 3).
pub async fn list(
    conn: &Connection,
    res: &ApiResource,
    ns: Option<&str>,
    lp: &ListParams,
) -> Result<Option<Vec<Value>>> {
    let api: Api<DynamicObject> = match ns {
        Some(n) => Api::namespaced_with(conn.client.clone(), n, res),
        None => Api::all_with(conn.client.clone(), res),
    };
    let ctx = || {
        conn.ctx()
            .verb("list")
            .api_resource(res)
            .namespace(ns.map(str::to_owned))
    };
    match api.list(lp).await {
        Ok(l) => Ok(Some(
            l.items
                .into_iter()
                .map(|o| {
                    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
                    v["apiVersion"] = Value::String(res.api_version.clone());
                    v["kind"] = Value::String(res.kind.clone());
                    v
                })
                .collect(),
        )),
        Err(e) => {
            let err = Error::from_kube(e, ctx());
            match err.status_code() {
                Some(404) => Ok(None),
                _ => Err(err),
            }
        }
    }
}

/// [`list`] in all namespaces, falling back to `ns` on 403; a missing API is an empty list.
async fn list_wide(
    conn: &Connection,
    res: &ApiResource,
    ns: &str,
    lp: &ListParams,
) -> Result<Vec<Value>> {
    match list(conn, res, None, lp).await {
        Ok(v) => Ok(v.unwrap_or_default()),
        Err(e) if e.status_code() == Some(403) && !ns.is_empty() => {
            Ok(list(conn, res, Some(ns), lp).await?.unwrap_or_default())
        }
        Err(e) => Err(e),
    }
}

/// Takes the snapshot. `ns` is the namespace to fall back to when listing everything is
/// forbidden. Errors: the Gateway API is not served (exit 3, naming the CRDs), any API error.
pub async fn take(conn: &Connection, ns: &str) -> Result<Snapshot> {
    let lp = ListParams::default();
    let classes = match list(conn, &gateway_api("GatewayClass"), None, &lp).await? {
        Some(c) => c,
        None => {
            return Err(Error::Cluster(format!(
                "the cluster does not serve {GATEWAY_GROUP}/v1 GatewayClass: the Gateway API CRDs are \
                 not installed on {} (install the standard channel: github.com/kubernetes-sigs/gateway-api/releases)",
                conn.server
            )));
        }
    };
    let core = |k: &str, p: &str| ar("", "v1", k, p);
    let (gw_r, route_r) = (gateway_api("Gateway"), gateway_api("HTTPRoute"));
    let (dep_r, svc_r) = (
        ar("apps", "v1", "Deployment", "deployments"),
        core("Service", "services"),
    );
    let (gateways, routes, deployments, services) = futures::try_join!(
        list_wide(conn, &gw_r, ns, &lp),
        list_wide(conn, &route_r, ns, &lp),
        list_wide(conn, &dep_r, ns, &lp),
        list_wide(conn, &svc_r, ns, &lp),
    )?;
    let metallb_r = ar("metallb.io", "v1beta1", "IPAddressPool", "ipaddresspools");
    let cilium_r = ar(
        "cilium.io",
        "v2alpha1",
        "CiliumLoadBalancerIPPool",
        "ciliumloadbalancerippools",
    );
    let (metallb_pools, cilium_pools) = futures::try_join!(
        list(conn, &metallb_r, None, &lp),
        list(conn, &cilium_r, None, &lp),
    )?;
    let mut snap = Snapshot {
        classes,
        gateways,
        routes,
        deployments,
        services,
        metallb_pools,
        cilium_pools,
        now: Some(jiff::Timestamp::now()),
        ..Snapshot::default()
    };
    // Data-plane pods by each known implementation's Gateway label.
    for imp in impls::KNOWN {
        if let Some((name_label, _)) = imp.gateway_labels {
            let lp = ListParams::default().labels(name_label);
            snap.pods
                .extend(list_wide(conn, &core("Pod", "pods"), ns, &lp).await?);
        }
    }
    // The controllers' pods and the Leases of their namespaces.
    let mut lease_ns: Vec<String> = Vec::new();
    for d in snap.deployments.clone() {
        if controller_of(&d).is_none() {
            continue;
        }
        let dns = d["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let selector = d["spec"]["selector"]["matchLabels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        if selector.is_empty() {
            continue;
        }
        let lp = ListParams::default().labels(&selector);
        if let Some(p) = list(conn, &core("Pod", "pods"), Some(&dns), &lp)
            .await
            .ok()
            .flatten()
        {
            snap.pods.extend(p);
        }
        if !lease_ns.contains(&dns) {
            let leases = ar("coordination.k8s.io", "v1", "Lease", "leases");
            if let Some(l) = list(conn, &leases, Some(&dns), &ListParams::default())
                .await
                .ok()
                .flatten()
            {
                snap.leases.extend(l);
            }
            lease_ns.push(dns);
        }
    }
    // Warning Events of the Services that belong to a Gateway.
    let gw_services: Vec<(String, String)> = snap
        .services
        .iter()
        .filter(|s| gateway_of_service(s).is_some())
        .map(|s| {
            (
                s["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                s["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    for (sns, sname) in gw_services {
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Service,involvedObject.name={sname},type=Warning"
        ));
        if let Some(e) = list(conn, &core("Event", "events"), Some(&sns), &lp)
            .await
            .ok()
            .flatten()
        {
            snap.events.extend(e);
        }
    }
    Ok(snap)
}

/// The known implementation whose controller a Deployment runs (by container image).
pub fn controller_of(d: &Value) -> Option<&'static impls::Implementation> {
    let containers = d["spec"]["template"]["spec"]["containers"].as_array()?;
    impls::KNOWN.iter().find(|imp| {
        containers
            .iter()
            .any(|c| impls::is_controller_image(imp, c["image"].as_str().unwrap_or_default()))
    })
}

/// The Gateway (namespace, name) a Service or pod was made for, from a known
/// implementation's labels or the Gateway API's `gateway.networking.k8s.io/gateway-name`.
pub fn gateway_of_service(obj: &Value) -> Option<(String, String)> {
    let labels = &obj["metadata"]["labels"];
    let own_ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    for imp in impls::KNOWN {
        if let Some((nl, nsl)) = imp.gateway_labels
            && let Some(n) = labels[nl].as_str()
        {
            let ns = if nsl.is_empty() {
                own_ns
            } else {
                labels[nsl].as_str().unwrap_or(own_ns)
            };
            return Some((ns.to_owned(), n.to_owned()));
        }
    }
    labels["gateway.networking.k8s.io/gateway-name"]
        .as_str()
        .map(|n| (own_ns.to_owned(), n.to_owned()))
}
