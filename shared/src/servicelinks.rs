//! Service links: the environment variables the kubelet injects into every container for the
//! Services it can see, and the failure they cause (failure catalogue row 5,
//! `invalid literal for int(): 'tcp://10.96…'`).
//!
//! The rule, as k8s.io/kubernetes v1.36 writes it:
//! - pkg/kubelet/envvars/envvars.go `FromServices`: for each Service whose ClusterIP is set
//!   (neither `None` nor empty, `IsServiceIPSet`: a headless or ExternalName Service has none),
//!   with `NAME` its name upper-cased and `-` replaced by `_`: `NAME_SERVICE_HOST=<ClusterIP>`,
//!   `NAME_SERVICE_PORT=<first port>`, `NAME_SERVICE_PORT_<PORTNAME>=<port>` for each named
//!   port, then the Docker link variables: `NAME_PORT=<proto>://<ClusterIP>:<first port>` and
//!   for each port `NAME_PORT_<port>_<PROTO>=<proto>://<ClusterIP>:<port>`, `..._PROTO`,
//!   `..._PORT`, `..._ADDR` (protocol `TCP` when unset; lower case in values, upper case in
//!   names; an IPv6 address in brackets, Go `net.JoinHostPort`).
//! - pkg/kubelet/kubelet_pods.go `getServiceEnvVarMap`: the Services of the pod's namespace
//!   when `spec.enableServiceLinks` is true (the API server's default), and always the master
//!   Service `kubernetes` of namespace `default` (`enableServiceLinks: false` does not remove
//!   `KUBERNETES_*`).
//! - `makeEnvironmentVariables`: `envFrom`, then `env` (an `env` entry replaces an `envFrom`
//!   one; `$(VAR)` in an `env` value expands from the variables declared before it and the
//!   service variables), then every service variable whose name the container did not
//!   declare: declared values win, injected ones fill every name left open.
//!
//! One home for the rule: fleetlint's FL060/FL061 (offline, from Git), the plugins' live
//! diagnosis of a crashing container ([`log_collision`]) and the test cluster's node agent,
//! which injects them as the kubelet does.

use std::collections::BTreeMap;

use serde_json::Value;

/// The master Services of namespace `default` whose variables every pod gets
/// (kubelet_pods.go `masterServices`).
pub const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// The fix, as fleetlint's FL060/FL061 and the live diagnosis name it.
pub const FIX: &str = "set spec.enableServiceLinks: false in the pod template";

/// The fleetlint rule that flags the same collision offline, from Git.
pub const RULE: &str = "FL061";

/// The variable-name form of a Service or port name (envvars.go `makeEnvVariableName`:
/// upper case, `-` to `_`).
pub fn env_name(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// Whether the Service has a ClusterIP (`IsServiceIPSet`: not `None`, not empty).
pub fn has_cluster_ip(svc: &Value) -> bool {
    svc["spec"]["clusterIP"]
        .as_str()
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
}

/// The variables the kubelet injects for one Service, in `FromServices` order, as
/// `(name, value)`; empty when it has no ClusterIP or no port. `cluster_ip` is the address
/// written into the values.
fn link_vars_at(svc: &Value, cluster_ip: &str) -> Vec<(String, String)> {
    let ports = svc["spec"]["ports"].as_array().cloned().unwrap_or_default();
    let Some(first) = ports.first() else {
        return Vec::new();
    };
    let prefix = env_name(svc["metadata"]["name"].as_str().unwrap_or_default());
    let port_of = |p: &Value| p["port"].as_u64().unwrap_or(0).to_string();
    let host_port = |p: &Value| {
        if cluster_ip.contains(':') {
            format!("[{cluster_ip}]:{}", port_of(p))
        } else {
            format!("{cluster_ip}:{}", port_of(p))
        }
    };
    let mut out = vec![
        (format!("{prefix}_SERVICE_HOST"), cluster_ip.to_string()),
        (format!("{prefix}_SERVICE_PORT"), port_of(first)),
    ];
    for p in &ports {
        if let Some(pn) = p["name"].as_str().filter(|n| !n.is_empty()) {
            out.push((
                format!("{prefix}_SERVICE_PORT_{}", env_name(pn)),
                port_of(p),
            ));
        }
    }
    for (i, p) in ports.iter().enumerate() {
        let proto = p["protocol"].as_str().unwrap_or("TCP");
        let (lower, upper) = (proto.to_ascii_lowercase(), proto.to_ascii_uppercase());
        let url = format!("{lower}://{}", host_port(p));
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let base = format!("{prefix}_PORT_{}_{upper}", port_of(p));
        out.push((base.clone(), url));
        out.push((format!("{base}_PROTO"), lower));
        out.push((format!("{base}_PORT"), port_of(p)));
        out.push((format!("{base}_ADDR"), cluster_ip.to_string()));
    }
    out
}

/// The variables the kubelet injects for one live Service (`FromServices`), `(name, value)`;
/// empty for a Service without a ClusterIP (headless, ExternalName).
pub fn link_vars(svc: &Value) -> Vec<(String, String)> {
    if !has_cluster_ip(svc) {
        return Vec::new();
    }
    let ip = svc["spec"]["clusterIP"].as_str().unwrap_or_default();
    link_vars_at(svc, ip)
}

/// The names the kubelet injects for a Service as written in Git, before the API server
/// allocates its ClusterIP: every Service but a headless (`clusterIP: None`) or ExternalName
/// one gets one.
pub fn link_var_names(svc: &Value) -> Vec<String> {
    let spec = &svc["spec"];
    if spec["type"] == "ExternalName" || spec["clusterIP"] == "None" {
        return Vec::new();
    }
    link_vars_at(svc, "<ClusterIP>")
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// The service variables of a pod in `namespace` (`getServiceEnvVarMap`): the Services of
/// that namespace when `enable_service_links`, and the master Services of `default` always
/// (a same-named Service of the pod's namespace never replaces a master one). `services`:
/// every Service the node sees (any namespace).
pub fn pod_link_vars(
    namespace: &str,
    enable_service_links: bool,
    services: &[Value],
) -> BTreeMap<String, String> {
    let mut chosen: BTreeMap<&str, &Value> = BTreeMap::new();
    for svc in services.iter().filter(|s| has_cluster_ip(s)) {
        let name = svc["metadata"]["name"].as_str().unwrap_or_default();
        let ns = svc["metadata"]["namespace"].as_str().unwrap_or_default();
        if ns == "default" && MASTER_SERVICES.contains(&name) {
            chosen.entry(name).or_insert(svc);
        } else if ns == namespace && enable_service_links {
            chosen.insert(name, svc);
        }
    }
    chosen.values().flat_map(|s| link_vars(s)).collect()
}

/// `spec.enableServiceLinks` of a pod spec (true when unset: the API server's default).
pub fn enabled(pod_spec: &Value) -> bool {
    pod_spec["enableServiceLinks"].as_bool().unwrap_or(true)
}

/// `$(VAR)` expansion of an `env` value (k8s.io/kubernetes third_party/forked/golang/expansion
/// `Expand`): `$(NAME)` becomes the value of NAME from `vars` (left as written when NAME is
/// unknown), `$$` is a literal `$`, any other `$` is kept.
pub fn expand(input: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if b[i + 1] == b'('
                && let Some(end) = input[i + 2..].find(')')
            {
                let name = &input[i + 2..i + 2 + end];
                match vars(name) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&input[i..i + 3 + end]),
                }
                i += 3 + end;
                continue;
            }
        }
        let ch = input[i..].chars().next().unwrap_or('$');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// A container's environment from its literal `env` values and the service variables, in the
/// kubelet's order (`makeEnvironmentVariables`): the `env` entries as declared (`value`,
/// `$(VAR)`-expanded from the entries before it and the service variables; entries with
/// `valueFrom` are resolved by `resolve`, `None` leaving them out), then each service variable
/// the container did not declare. `envFrom` is not read here.
pub fn container_env(
    container: &Value,
    service_vars: &BTreeMap<String, String>,
    resolve: &mut dyn FnMut(&Value) -> Option<String>,
) -> Vec<(String, String)> {
    let mut declared: Vec<(String, String)> = Vec::new();
    for e in container["env"].as_array().into_iter().flatten() {
        let Some(name) = e["name"].as_str() else {
            continue;
        };
        let value = match e["value"].as_str() {
            Some(v) if !v.is_empty() => {
                let lookup = |n: &str| {
                    declared
                        .iter()
                        .rev()
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| v.clone())
                        .or_else(|| service_vars.get(n).cloned())
                };
                Some(expand(v, &lookup))
            }
            _ if e.get("valueFrom").is_some() => resolve(e),
            _ => Some(String::new()),
        };
        if let Some(v) = value {
            declared.retain(|(k, _)| k != name);
            declared.push((name.to_string(), v));
        }
    }
    let mut out = declared;
    for (k, v) in service_vars {
        if !out.iter().any(|(n, _)| n == k) {
            out.push((k.clone(), v.clone()));
        }
    }
    out
}

/// A crashing container's cause, read live: a service variable whose value shows in its log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkCollision {
    /// The injected variable (e.g. `REDIS_PORT`).
    pub variable: String,
    /// Its value (e.g. `tcp://10.96.12.7:6379`).
    pub value: String,
    /// `namespace/name` of the Service it comes from.
    pub service: String,
    /// The log line that shows the value.
    pub log_line: String,
    /// Whether `enableServiceLinks: false` removes it (false for the master Service
    /// `default/kubernetes`, whose variables every pod gets).
    pub removable: bool,
}

impl LinkCollision {
    /// One sentence: what the container read and where it came from.
    pub fn describe(&self) -> String {
        format!(
            "service link collision: {} = {} is injected by the kubelet for Service {} and the container's log shows it: {}",
            self.variable, self.value, self.service, self.log_line
        )
    }

    /// The fix.
    pub fn fix(&self) -> String {
        if self.removable {
            format!(
                "{FIX} (the kubelet then stops injecting {}; fleetlint {RULE} flags this offline), or rename Service {}",
                self.variable, self.service
            )
        } else {
            format!(
                "rename the variable the app reads: {} comes from the master Service {}, which the kubelet injects even with enableServiceLinks: false",
                self.variable, self.service
            )
        }
    }
}

/// Reads a crashing container's log for a service variable (catalogue row 5): among the
/// variables the kubelet injected into `container` of `pod` (the pod's namespace's Services
/// from `services` unless `enableServiceLinks: false`, and the master Service) that the
/// container does not declare in `env`, one whose URL value (`tcp://IP:PORT`, what an app
/// expecting a port number cannot parse) appears in a line of `log`. When several do, the
/// variable named on that line wins, then the Service's `<NAME>_PORT`. A line where the value
/// only follows `=` (an environment listing such as `REDIS_PORT=tcp://...`) is not evidence:
/// the app printed its environment, which says nothing about reading it. `None`: no such line
/// (the log does not show an injected value; nothing is guessed).
pub fn log_collision(
    pod: &Value,
    container: &str,
    services: &[Value],
    log: &[String],
) -> Option<LinkCollision> {
    let spec = &pod["spec"];
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let c = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(spec["initContainers"].as_array().into_iter().flatten())
        .find(|c| c["name"] == container)?;
    let declared: Vec<&str> = c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["name"].as_str())
        .collect();
    let enable = enabled(spec);
    let mut best: Option<(u8, LinkCollision)> = None;
    for svc in services.iter().filter(|s| has_cluster_ip(s)) {
        let name = svc["metadata"]["name"].as_str().unwrap_or_default();
        let sns = svc["metadata"]["namespace"].as_str().unwrap_or_default();
        let master = sns == "default" && MASTER_SERVICES.contains(&name);
        // Injected: the master Service always, another only from the pod's own namespace with
        // service links on.
        let injected = master || (sns == ns && enable);
        if !injected {
            continue;
        }
        let first_port = format!("{}_PORT", env_name(name));
        for (var, value) in link_vars(svc) {
            if !value.contains("://") || declared.contains(&var.as_str()) {
                continue;
            }
            // A line that only lists the environment (`NAME=value`, an env dump at start)
            // shows the value without the app having read it: not evidence.
            let listed = |l: &str| l.match_indices(&value).all(|(i, _)| l[..i].ends_with('='));
            let Some(line) = log
                .iter()
                .rev()
                .find(|l| l.contains(&value) && !listed(l.as_str()))
            else {
                continue;
            };
            let rank = if line.contains(&var) {
                3
            } else if var == first_port {
                2
            } else {
                1
            };
            if best.as_ref().is_none_or(|(r, _)| rank > *r) {
                best = Some((
                    rank,
                    LinkCollision {
                        variable: var,
                        value,
                        service: format!("{sns}/{name}"),
                        log_line: line.trim().to_string(),
                        removable: !master,
                    },
                ));
            }
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(ns: &str, name: &str, ip: &str, ports: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": ns}, "spec": {"clusterIP": ip, "ports": ports}})
    }

    /// `FromServices` for a Service with one unnamed TCP port, in its order (written from
    /// envvars.go, not copied from its test).
    #[test]
    fn from_services_values() {
        let s = svc(
            "ns",
            "foo-bar",
            "1.2.3.4",
            json!([{"port": 8080, "protocol": "TCP"}]),
        );
        let v = link_vars(&s);
        let want = [
            ("FOO_BAR_SERVICE_HOST", "1.2.3.4"),
            ("FOO_BAR_SERVICE_PORT", "8080"),
            ("FOO_BAR_PORT", "tcp://1.2.3.4:8080"),
            ("FOO_BAR_PORT_8080_TCP", "tcp://1.2.3.4:8080"),
            ("FOO_BAR_PORT_8080_TCP_PROTO", "tcp"),
            ("FOO_BAR_PORT_8080_TCP_PORT", "8080"),
            ("FOO_BAR_PORT_8080_TCP_ADDR", "1.2.3.4"),
        ];
        let got: Vec<(&str, &str)> = v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn named_ports_udp_ipv6_and_headless() {
        let s = svc(
            "ns",
            "dns",
            "fd00::a",
            json!([{"name": "dns-udp", "port": 53, "protocol": "UDP"}, {"name": "metrics", "port": 9153}]),
        );
        let v: BTreeMap<String, String> = link_vars(&s).into_iter().collect();
        assert_eq!(v["DNS_SERVICE_PORT"], "53");
        assert_eq!(v["DNS_SERVICE_PORT_DNS_UDP"], "53");
        assert_eq!(v["DNS_SERVICE_PORT_METRICS"], "9153");
        assert_eq!(v["DNS_PORT"], "udp://[fd00::a]:53");
        assert_eq!(v["DNS_PORT_9153_TCP"], "tcp://[fd00::a]:9153");
        assert!(link_vars(&svc("ns", "h", "None", json!([{"port": 1}]))).is_empty());
        assert!(link_vars(&svc("ns", "e", "", json!([{"port": 1}]))).is_empty());
    }

    #[test]
    fn pod_vars_namespace_master_and_switch() {
        let all = [
            svc(
                "default",
                "kubernetes",
                "10.96.0.1",
                json!([{"name": "https", "port": 443}]),
            ),
            svc("apps", "redis", "10.96.0.50", json!([{"port": 6379}])),
            svc("other", "db", "10.96.0.60", json!([{"port": 5432}])),
        ];
        let on = pod_link_vars("apps", true, &all);
        assert_eq!(on["REDIS_PORT"], "tcp://10.96.0.50:6379");
        assert_eq!(on["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert!(!on.contains_key("DB_PORT"));
        let off = pod_link_vars("apps", false, &all);
        assert!(!off.contains_key("REDIS_PORT"));
        assert_eq!(off["KUBERNETES_PORT"], "tcp://10.96.0.1:443");
    }

    #[test]
    fn declared_wins_and_expands() {
        let sv = pod_link_vars(
            "apps",
            true,
            &[svc("apps", "redis", "10.96.0.50", json!([{"port": 6379}]))],
        );
        let c = json!({"env": [
            {"name": "REDIS_HOST", "value": "redis"},
            {"name": "URL", "value": "redis://$(REDIS_HOST):$(REDIS_SERVICE_PORT)/$(NOPE)$$x"},
            {"name": "REDIS_SERVICE_PORT", "value": "1"},
        ]});
        let env: BTreeMap<String, String> =
            container_env(&c, &sv, &mut |_| None).into_iter().collect();
        assert_eq!(env["URL"], "redis://redis:6379/$(NOPE)$x");
        assert_eq!(env["REDIS_SERVICE_PORT"], "1");
        assert_eq!(env["REDIS_PORT"], "tcp://10.96.0.50:6379");
    }

    #[test]
    fn log_names_the_variable_and_service() {
        let all = [svc("apps", "redis", "10.96.0.50", json!([{"port": 6379}]))];
        let pod = json!({"metadata": {"namespace": "apps"},
            "spec": {"containers": [{"name": "app", "env": [{"name": "REDIS_HOST", "value": "redis"}]}]}});
        let log = vec![
            "Traceback (most recent call last):".to_string(),
            "ValueError: invalid literal for int() with base 10: 'tcp://10.96.0.50:6379'"
                .to_string(),
        ];
        let c = log_collision(&pod, "app", &all, &log).expect("collision");
        assert_eq!(c.variable, "REDIS_PORT");
        assert_eq!(c.service, "apps/redis");
        assert!(c.removable);
        assert!(c.fix().contains("enableServiceLinks: false"));
        // Declared by the container: not injected, so not the cause.
        let declared = json!({"metadata": {"namespace": "apps"},
            "spec": {"containers": [{"name": "app", "env": [{"name": "REDIS_PORT", "value": "6379"}, {"name": "REDIS_PORT_6379_TCP", "value": "x"}]}]}});
        assert_eq!(log_collision(&declared, "app", &all, &log), None);
        // enableServiceLinks: false: not injected.
        let off = json!({"metadata": {"namespace": "apps"},
            "spec": {"enableServiceLinks": false, "containers": [{"name": "app"}]}});
        assert_eq!(log_collision(&off, "app", &all, &log), None);
        // An env dump shows the value without the app reading it: nothing named.
        let dump = vec![
            "REDIS_PORT=tcp://10.96.0.50:6379".to_string(),
            "boom".to_string(),
        ];
        assert_eq!(log_collision(&pod, "app", &all, &dump), None);
        // A log without the value: nothing guessed.
        assert_eq!(
            log_collision(&pod, "app", &all, &["boom".to_string()]),
            None
        );
    }

    /// The Services of [`kubelet_golden`]: unnamed port without protocol, IPv6 with UDP and
    /// named ports, SCTP and a dashed port name, headless, ExternalName.
    const GOLDEN_SERVICES: &str = r#"[{"metadata":{"name":"foo-bar","namespace":"a"},"spec":{"clusterIP":"1.2.3.4","ports":[{"port":8080}]}},
 {"metadata":{"name":"dns","namespace":"a"},"spec":{"clusterIP":"fd00::a","ports":[{"name":"dns-udp","port":53,"protocol":"UDP"},{"name":"metrics","port":9153}]}},
 {"metadata":{"name":"multi","namespace":"a"},"spec":{"clusterIP":"10.0.0.5","ports":[{"name":"http","port":80,"protocol":"TCP"},{"name":"grpc-web","port":8443,"protocol":"SCTP"}]}},
 {"metadata":{"name":"headless","namespace":"a"},"spec":{"clusterIP":"None","ports":[{"port":1}]}},
 {"metadata":{"name":"ext","namespace":"a"},"spec":{"type":"ExternalName","externalName":"x.example","clusterIP":""}}]"#;

    /// What the kubelet's own code prints for [`GOLDEN_SERVICES`]: k8s.io/kubernetes v1.36.3
    /// `envvars.FromServices`, run on them 2026-12-07 (a Go main in a copy of
    /// tests/realcluster/kube's module printing `NAME=VALUE` per variable; not committed).
    const KUBELET_GOLDEN: &str = "FOO_BAR_SERVICE_HOST=1.2.3.4\n\
FOO_BAR_SERVICE_PORT=8080\n\
FOO_BAR_PORT=tcp://1.2.3.4:8080\n\
FOO_BAR_PORT_8080_TCP=tcp://1.2.3.4:8080\n\
FOO_BAR_PORT_8080_TCP_PROTO=tcp\n\
FOO_BAR_PORT_8080_TCP_PORT=8080\n\
FOO_BAR_PORT_8080_TCP_ADDR=1.2.3.4\n\
DNS_SERVICE_HOST=fd00::a\n\
DNS_SERVICE_PORT=53\n\
DNS_SERVICE_PORT_DNS_UDP=53\n\
DNS_SERVICE_PORT_METRICS=9153\n\
DNS_PORT=udp://[fd00::a]:53\n\
DNS_PORT_53_UDP=udp://[fd00::a]:53\n\
DNS_PORT_53_UDP_PROTO=udp\n\
DNS_PORT_53_UDP_PORT=53\n\
DNS_PORT_53_UDP_ADDR=fd00::a\n\
DNS_PORT_9153_TCP=tcp://[fd00::a]:9153\n\
DNS_PORT_9153_TCP_PROTO=tcp\n\
DNS_PORT_9153_TCP_PORT=9153\n\
DNS_PORT_9153_TCP_ADDR=fd00::a\n\
MULTI_SERVICE_HOST=10.0.0.5\n\
MULTI_SERVICE_PORT=80\n\
MULTI_SERVICE_PORT_HTTP=80\n\
MULTI_SERVICE_PORT_GRPC_WEB=8443\n\
MULTI_PORT=tcp://10.0.0.5:80\n\
MULTI_PORT_80_TCP=tcp://10.0.0.5:80\n\
MULTI_PORT_80_TCP_PROTO=tcp\n\
MULTI_PORT_80_TCP_PORT=80\n\
MULTI_PORT_80_TCP_ADDR=10.0.0.5\n\
MULTI_PORT_8443_SCTP=sctp://10.0.0.5:8443\n\
MULTI_PORT_8443_SCTP_PROTO=sctp\n\
MULTI_PORT_8443_SCTP_PORT=8443\n\
MULTI_PORT_8443_SCTP_ADDR=10.0.0.5\n\
";

    /// The rule against the kubelet's own output ([`KUBELET_GOLDEN`]), in its order.
    #[test]
    fn kubelet_golden() {
        let v: Vec<Value> = serde_json::from_str(GOLDEN_SERVICES).unwrap();
        let mut out = String::new();
        for s in &v {
            for (k, x) in link_vars(s) {
                out.push_str(&format!("{k}={x}\n"));
            }
        }
        assert_eq!(out, KUBELET_GOLDEN);
    }
}
