//! Server-side `Table` conversion (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), which
//! `kubectl get` asks for.
//!
//! CRDs: columns `Name` plus the version's additionalPrinterColumns, cells as
//! apiextensions-apiserver pkg/registry/customresource/tableconvertor/tableconvertor.go
//! (`date` cells become a human duration, `integer`/`number`/`boolean` keep JSON values, strings
//! are printed; a missing value is `null`). Built-ins: the columns of
//! k8s.io/kubernetes pkg/printers/internalversion/printers.go for the kinds the twin serves
//! (a subset of cells, see README), everything else `Name` + `Age`.

use jsonpath_rust::JsonPath;
use serde_json::{Value, json};

use crate::registry::{PrinterColumn, ResourceInfo};

/// k8s.io/apimachinery pkg/util/duration HumanDuration, for `seconds` elapsed.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Age of an RFC 3339 timestamp as HumanDuration, `<unknown>` when absent/invalid.
pub fn age(ts: Option<&str>) -> String {
    let Some(ts) = ts else {
        return "<unknown>".into();
    };
    match ts.parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(jiff::Timestamp::now().as_second() - t.as_second()),
        Err(_) => "<invalid>".into(),
    }
}

/// Evaluates a printer-column JSONPath (kubectl style, no leading `$`) against `obj`; the first
/// result or `None`.
pub fn eval_path(obj: &Value, path: &str) -> Option<Value> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let full = if p.starts_with('$') {
        p.to_string()
    } else {
        format!("${p}")
    };
    obj.query(&full)
        .ok()
        .and_then(|v| v.first().map(|x| (*x).clone()))
}

fn col(name: &str, type_: &str, priority: i64) -> Value {
    let mut c =
        json!({"name": name, "type": type_, "format": "", "description": "", "priority": priority});
    if name == "Name" {
        c["format"] = json!("name");
        c["description"] = json!(
            "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
        );
    }
    c
}

fn s(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    }
}

fn none_if_empty(x: String) -> String {
    if x.is_empty() { "<none>".into() } else { x }
}

/// The EXTERNAL-IP cell of a Service, as kube-apiserver's table printer writes it
/// (pkg/printers/internalversion/printers.go getServiceExternalIP + loadBalancerStatusStringer,
/// server-side tables use `Wide: true`, so nothing is clipped):
/// - ClusterIP / NodePort (and no type): spec.externalIPs joined by `,`, else `<none>`;
/// - LoadBalancer: each status.loadBalancer.ingress entry's `ip`, else its `hostname`, as a
///   sorted set joined by `,`, then spec.externalIPs; neither: `<pending>`;
/// - ExternalName: spec.externalName; any other type: `<unknown>`.
fn service_external_ip(o: &Value) -> String {
    let list = |p: &str| -> Vec<String> {
        o.pointer(p)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|x| s(Some(x))).collect())
            .unwrap_or_default()
    };
    let external_ips = list("/spec/externalIPs");
    match o.pointer("/spec/type").and_then(Value::as_str) {
        None | Some("ClusterIP" | "NodePort") => none_if_empty(external_ips.join(",")),
        Some("LoadBalancer") => {
            let ingress: std::collections::BTreeSet<String> = o
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    [i.get("ip"), i.get("hostname")]
                        .into_iter()
                        .map(|v| s(v))
                        .find(|v| !v.is_empty())
                })
                .collect();
            let all: Vec<String> = ingress.into_iter().chain(external_ips).collect();
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        Some("ExternalName") => s(o.pointer("/spec/externalName")),
        Some(_) => "<unknown>".into(),
    }
}

fn builtin_row(kind: &str, o: &Value) -> (Vec<Value>, Vec<Value>) {
    let name = s(o.pointer("/metadata/name"));
    let age_c = age(o
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str));
    let len = |p: &str| {
        o.pointer(p)
            .map(|v| match v {
                Value::Object(m) => m.len(),
                Value::Array(a) => a.len(),
                _ => 0,
            })
            .unwrap_or(0)
    };
    let int = |p: &str| o.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    match kind {
        "Pod" => {
            let statuses = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let total = len("/spec/containers");
            let ready = statuses.iter().filter(|c| c["ready"] == true).count();
            let restarts: i64 = statuses
                .iter()
                .map(|c| c["restartCount"].as_i64().unwrap_or(0))
                .sum();
            let mut reason = s(o.pointer("/status/reason"));
            if reason.is_empty() {
                reason = s(o.pointer("/status/phase"));
            }
            for c in &statuses {
                if let Some(r) = c.pointer("/state/waiting/reason").and_then(Value::as_str) {
                    reason = r.to_string();
                } else if let Some(r) = c
                    .pointer("/state/terminated/reason")
                    .and_then(Value::as_str)
                {
                    reason = r.to_string();
                }
            }
            if o.pointer("/metadata/deletionTimestamp").is_some() {
                reason = "Terminating".into();
            }
            (
                vec![
                    col("Name", "string", 0),
                    col("Ready", "string", 0),
                    col("Status", "string", 0),
                    col("Restarts", "string", 0),
                    col("Age", "string", 0),
                    col("IP", "string", 1),
                    col("Node", "string", 1),
                ],
                vec![
                    json!(name),
                    json!(format!("{ready}/{total}")),
                    json!(reason),
                    json!(restarts.to_string()),
                    json!(age_c),
                    json!(none_if_empty(s(o.pointer("/status/podIP")))),
                    json!(none_if_empty(s(o.pointer("/spec/nodeName")))),
                ],
            )
        }
        "Deployment" | "StatefulSet" | "ReplicaSet" => {
            let images: Vec<String> = o
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|c| s(c.get("image"))).collect())
                .unwrap_or_default();
            let containers: Vec<String> = o
                .pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|c| s(c.get("name"))).collect())
                .unwrap_or_default();
            let desired = o
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let ready = int("/status/readyReplicas");
            let (mut cols, mut cells) = (vec![col("Name", "string", 0)], vec![json!(name)]);
            match kind {
                "Deployment" => {
                    cols.extend([
                        col("Ready", "string", 0),
                        col("Up-to-date", "integer", 0),
                        col("Available", "integer", 0),
                    ]);
                    cells.extend([
                        json!(format!("{ready}/{desired}")),
                        json!(int("/status/updatedReplicas")),
                        json!(int("/status/availableReplicas")),
                    ]);
                }
                "StatefulSet" => {
                    cols.push(col("Ready", "string", 0));
                    cells.push(json!(format!("{ready}/{desired}")));
                }
                _ => {
                    cols.extend([
                        col("Desired", "integer", 0),
                        col("Current", "integer", 0),
                        col("Ready", "integer", 0),
                    ]);
                    cells.extend([json!(desired), json!(int("/status/replicas")), json!(ready)]);
                }
            }
            cols.extend([
                col("Age", "string", 0),
                col("Containers", "string", 1),
                col("Images", "string", 1),
            ]);
            cells.extend([
                json!(age_c),
                json!(containers.join(",")),
                json!(images.join(",")),
            ]);
            (cols, cells)
        }
        "Service" => {
            let ports: Vec<String> = o
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|p| {
                            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                            match p.get("nodePort").and_then(Value::as_i64) {
                                Some(np) => format!("{}:{np}/{proto}", s(p.get("port"))),
                                None => format!("{}/{proto}", s(p.get("port"))),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            let ty = s(o.pointer("/spec/type"));
            (
                vec![
                    col("Name", "string", 0),
                    col("Type", "string", 0),
                    col("Cluster-IP", "string", 0),
                    col("External-IP", "string", 0),
                    col("Port(s)", "string", 0),
                    col("Age", "string", 0),
                ],
                vec![
                    json!(name),
                    json!(if ty.is_empty() {
                        "ClusterIP".to_string()
                    } else {
                        ty
                    }),
                    json!(none_if_empty(s(o.pointer("/spec/clusterIP")))),
                    json!(service_external_ip(o)),
                    json!(none_if_empty(ports.join(","))),
                    json!(age_c),
                ],
            )
        }
        "DaemonSet" => (
            vec![
                col("Name", "string", 0),
                col("Desired", "integer", 0),
                col("Current", "integer", 0),
                col("Ready", "integer", 0),
                col("Up-to-date", "integer", 0),
                col("Available", "integer", 0),
                col("Age", "string", 0),
            ],
            vec![
                json!(name),
                json!(int("/status/desiredNumberScheduled")),
                json!(int("/status/currentNumberScheduled")),
                json!(int("/status/numberReady")),
                json!(int("/status/updatedNumberScheduled")),
                json!(int("/status/numberAvailable")),
                json!(age_c),
            ],
        ),
        "CronJob" => (
            vec![
                col("Name", "string", 0),
                col("Schedule", "string", 0),
                col("Suspend", "boolean", 0),
                col("Active", "integer", 0),
                col("Last Schedule", "string", 0),
                col("Age", "string", 0),
            ],
            vec![
                json!(name),
                json!(s(o.pointer("/spec/schedule"))),
                json!(
                    o.pointer("/spec/suspend")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                json!(len("/status/active")),
                json!(
                    o.pointer("/status/lastScheduleTime")
                        .and_then(Value::as_str)
                        .map(|t| age(Some(t)))
                        .unwrap_or_else(|| "<none>".into())
                ),
                json!(age_c),
            ],
        ),
        "Namespace" => (
            vec![
                col("Name", "string", 0),
                col("Status", "string", 0),
                col("Age", "string", 0),
            ],
            vec![
                json!(name),
                json!(s(o.pointer("/status/phase"))),
                json!(age_c),
            ],
        ),
        "ConfigMap" => (
            vec![
                col("Name", "string", 0),
                col("Data", "integer", 0),
                col("Age", "string", 0),
            ],
            vec![
                json!(name),
                json!(len("/data") + len("/binaryData")),
                json!(age_c),
            ],
        ),
        "Secret" => (
            vec![
                col("Name", "string", 0),
                col("Type", "string", 0),
                col("Data", "integer", 0),
                col("Age", "string", 0),
            ],
            vec![
                json!(name),
                json!(s(o.pointer("/type"))),
                json!(len("/data")),
                json!(age_c),
            ],
        ),
        "Job" => (
            vec![
                col("Name", "string", 0),
                col("Completions", "string", 0),
                col("Age", "string", 0),
            ],
            vec![
                json!(name),
                json!(format!(
                    "{}/{}",
                    int("/status/succeeded"),
                    o.pointer("/spec/completions")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                )),
                json!(age_c),
            ],
        ),
        "Event" => (
            vec![
                col("Last Seen", "string", 0),
                col("Type", "string", 0),
                col("Reason", "string", 0),
                col("Object", "string", 0),
                col("Message", "string", 0),
            ],
            vec![
                json!(age(o
                    .get("lastTimestamp")
                    .and_then(Value::as_str)
                    .or(o.get("eventTime").and_then(Value::as_str)))),
                json!(s(o.get("type"))),
                json!(s(o.get("reason"))),
                json!(format!(
                    "{}/{}",
                    s(o.pointer("/involvedObject/kind")).to_lowercase(),
                    s(o.pointer("/involvedObject/name"))
                )),
                json!(s(o.get("message"))),
            ],
        ),
        _ => (
            vec![col("Name", "string", 0), col("Age", "string", 0)],
            vec![json!(name), json!(age_c)],
        ),
    }
}

fn crd_cell(c: &PrinterColumn, o: &Value) -> Value {
    let Some(v) = eval_path(o, &c.json_path) else {
        return Value::Null;
    };
    match c.type_.as_str() {
        "date" => match v.as_str() {
            Some(ts) => json!(age(Some(ts))),
            None => Value::Null,
        },
        "string" => json!(s(Some(&v))),
        _ => v,
    }
}

fn columns_and_cells(info: &ResourceInfo, version: &str, o: &Value) -> (Vec<Value>, Vec<Value>) {
    if info.builtin {
        return builtin_row(&info.kind, o);
    }
    let pcs = info
        .printer_columns
        .get(version)
        .cloned()
        .unwrap_or_default();
    let mut cols = vec![col("Name", "string", 0)];
    let mut cells = vec![json!(s(o.pointer("/metadata/name")))];
    for c in &pcs {
        let mut cd = col(&c.name, &c.type_, c.priority);
        cd["format"] = json!(c.format);
        cd["description"] = json!(c.description);
        cols.push(cd);
        cells.push(crd_cell(c, o));
    }
    (cols, cells)
}

/// `includeObject` query parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object in rows.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The full object.
    Object,
}

fn row_object(o: &Value, inc: IncludeObject) -> Option<Value> {
    match inc {
        IncludeObject::None => None,
        IncludeObject::Object => Some(o.clone()),
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
        })),
    }
}

/// Converts objects (a list's items, or one object) to a `meta.k8s.io/v1` Table.
/// `no_headers` omits columnDefinitions (watch events after the first).
pub fn to_table(
    info: &ResourceInfo,
    version: &str,
    objects: &[Value],
    list_meta: Value,
    inc: IncludeObject,
    no_headers: bool,
) -> Value {
    let mut columns = Vec::new();
    let mut rows = Vec::new();
    for o in objects {
        let (c, cells) = columns_and_cells(info, version, o);
        if columns.is_empty() {
            columns = c;
        }
        let mut row = json!({"cells": cells});
        if let Some(obj) = row_object(o, inc) {
            row["object"] = obj;
        }
        rows.push(row);
    }
    if columns.is_empty() {
        columns = columns_and_cells(info, version, &json!({"metadata": {}})).0;
    }
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "rows": rows,
    });
    if !no_headers {
        t["columnDefinitions"] = Value::Array(columns);
    } else {
        t["columnDefinitions"] = json!(null);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_external_ip_like_kube_apiserver() {
        let svc = |spec: Value, status: Value| json!({"spec": spec, "status": status});
        // LoadBalancer with an ingress IP: the IP (the fresh-user report showed <none>).
        let lb = svc(
            json!({"type": "LoadBalancer", "clusterIP": "10.96.0.10"}),
            json!({"loadBalancer": {"ingress": [{"ip": "192.168.2.20"}]}}),
        );
        assert_eq!(service_external_ip(&lb), "192.168.2.20");
        // ip wins over hostname in one entry; a hostname-only entry counts; sorted, deduped,
        // then spec.externalIPs.
        let lb = svc(
            json!({"type": "LoadBalancer", "externalIPs": ["198.51.100.7"]}),
            json!({"loadBalancer": {"ingress": [
                {"ip": "203.0.113.9", "hostname": "ignored.example"},
                {"hostname": "lb.example.com"},
                {"ip": "203.0.113.1"},
                {"ip": "203.0.113.9"}]}}),
        );
        assert_eq!(
            service_external_ip(&lb),
            "203.0.113.1,203.0.113.9,lb.example.com,198.51.100.7"
        );
        // LoadBalancer without ingress: <pending>; with only externalIPs: those.
        let pending = svc(json!({"type": "LoadBalancer"}), json!({"loadBalancer": {}}));
        assert_eq!(service_external_ip(&pending), "<pending>");
        let ext = svc(
            json!({"type": "LoadBalancer", "externalIPs": ["198.51.100.7"]}),
            json!({}),
        );
        assert_eq!(service_external_ip(&ext), "198.51.100.7");
        // ClusterIP / NodePort / no type: externalIPs or <none>; status is not looked at.
        let cip = svc(
            json!({"type": "ClusterIP"}),
            json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}),
        );
        assert_eq!(service_external_ip(&cip), "<none>");
        let np = svc(
            json!({"type": "NodePort", "externalIPs": ["a", "b"]}),
            json!({}),
        );
        assert_eq!(service_external_ip(&np), "a,b");
        assert_eq!(service_external_ip(&svc(json!({}), json!({}))), "<none>");
        let en = svc(
            json!({"type": "ExternalName", "externalName": "db.example.com"}),
            json!({}),
        );
        assert_eq!(service_external_ip(&en), "db.example.com");
        // Through the whole row, as `kubectl get svc` receives it.
        let mut o = lb.clone();
        o["metadata"] = json!({"name": "gw", "namespace": "x"});
        let (cols, cells) = builtin_row("Service", &o);
        let i = cols
            .iter()
            .position(|c| c["name"] == "External-IP")
            .unwrap();
        assert_eq!(
            cells[i],
            "203.0.113.1,203.0.113.9,lb.example.com,198.51.100.7"
        );
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(50 * 3600), "2d2h");
    }

    #[test]
    fn jsonpath_filter() {
        let o = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "message": "ok"}]}});
        assert_eq!(
            eval_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(eval_path(&o, ".spec.x"), None);
    }
}
