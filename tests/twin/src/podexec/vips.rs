//! Which Service ClusterIPs the pod runtime puts on `lo` of the pod network, standing in for
//! kube-proxy for the pods it runs (its pods share one network namespace, so a server a pod
//! listens with on PORT is reached at CLUSTERIP:PORT once the address is local).
//!
//! A Service qualifies when it has a selector (kube-proxy routes only to the endpoints the
//! EndpointSlice controller derives from it), an IPv4 ClusterIP, is not ExternalName, every
//! port's `targetPort` is unset or equals `port` (no translation here: kube-proxy's DNAT to a
//! different port cannot be stood in for without netfilter), and its selector matches the
//! labels of a running pod of this runtime in its namespace (kubernetes
//! pkg/controller/endpointslice: the Service's namespace and `spec.selector` as a label
//! selector). Every other Service address stays unreachable, as before.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A running pod of the runtime: its namespace and labels.
pub type PodLabels = (String, BTreeMap<String, String>);

/// The ClusterIPs to put on `lo`: the Services (every namespace) that qualify (module docs)
/// for `pods` (namespace, labels of each running pod of this runtime).
pub fn wanted(services: &[Value], pods: &[PodLabels]) -> BTreeSet<String> {
    services
        .iter()
        .filter(|svc| svc["spec"]["type"] != "ExternalName")
        .filter(|svc| {
            svc["spec"]["ports"].as_array().is_some_and(|ps| {
                ps.iter().all(|p| match &p["targetPort"] {
                    Value::Null => true,
                    Value::Number(n) => Some(n) == p["port"].as_number(),
                    Value::String(s) => s.parse::<u64>().ok() == p["port"].as_u64(),
                    _ => false,
                })
            })
        })
        .filter(|svc| {
            let Some(sel) = svc["spec"]["selector"]
                .as_object()
                .filter(|m| !m.is_empty())
            else {
                return false;
            };
            let ns = svc["metadata"]["namespace"].as_str().unwrap_or_default();
            pods.iter().any(|(pns, labels)| {
                pns == ns
                    && sel.iter().all(|(k, v)| {
                        v.as_str()
                            .is_some_and(|v| labels.get(k).map(String::as_str) == Some(v))
                    })
            })
        })
        .filter_map(|svc| {
            let ip = svc["spec"]["clusterIP"].as_str()?;
            ip.parse::<std::net::Ipv4Addr>()
                .ok()
                .map(|_| ip.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(name: &str, sel: Value, ports: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "web"},
            "spec": {"clusterIP": format!("10.96.1.{}", name.len()), "selector": sel, "ports": ports}})
    }

    #[test]
    fn only_services_selecting_a_running_pod_without_port_translation() {
        let pods = vec![(
            "web".to_string(),
            BTreeMap::from([("app".to_string(), "httpd".to_string())]),
        )];
        let services = vec![
            svc("a", json!({"app": "httpd"}), json!([{"port": 8080}])),
            svc(
                "bb",
                json!({"app": "httpd"}),
                json!([{"port": 80, "targetPort": 8080}]),
            ),
            svc("ccc", json!({"app": "other"}), json!([{"port": 8080}])),
            svc("dddd", json!({}), json!([{"port": 8080}])),
            svc(
                "eeeee",
                json!({"app": "httpd"}),
                json!([{"port": 8080, "targetPort": 8080}]),
            ),
        ];
        assert_eq!(
            wanted(&services, &pods).into_iter().collect::<Vec<_>>(),
            ["10.96.1.1", "10.96.1.5"]
        );
        let elsewhere = vec![("other".to_string(), pods[0].1.clone())];
        assert!(wanted(&services, &elsewhere).is_empty());
    }
}
