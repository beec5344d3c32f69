//! The HTTP layer: request parsing (k8s.io/apiserver pkg/endpoints/request/requestinfo.go
//! rules), authentication, authorization, fault injection, discovery, and the REST verbs on top of
//! [`crate::Store`].

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use crate::auth::{self, Attributes, Tokens};
use crate::error::StatusError;
use crate::faults::{FaultAction, Faults, RequestLog, RequestRecord};
use crate::patch::PatchKind;
use crate::registry::{Registry, ResourceInfo};
use crate::store::{
    DeleteOptions, ListParams, Store, Subresource, WatchEvent, WatchEventType, WatchParams,
    WriteOptions,
};
use crate::table::{self, IncludeObject};

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// Shared state of one twin server.
pub(crate) struct Ctx {
    pub store: Store,
    pub tokens: Tokens,
    pub faults: Faults,
    pub log: RequestLog,
    pub server_addr: String,
    pub bookmark_interval: Duration,
}

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

fn json_resp(code: u16, v: &Value) -> Response<Body> {
    let mut r = Response::new(full(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn err_resp(e: &StatusError) -> Response<Body> {
    let mut r = json_resp(e.code, &e.to_status());
    if e.code == 429 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

/// Parsed resource request (apiserver RequestInfo).
#[derive(Clone, Debug, Default)]
pub(crate) struct ReqInfo {
    pub resource_request: bool,
    pub group: String,
    pub version: String,
    pub namespace: String,
    pub resource: String,
    pub name: String,
    pub subresource: String,
    pub verb: String,
}

fn parse_request(method: &Method, path: &str, q: &HashMap<String, String>) -> ReqInfo {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let mut ri = ReqInfo {
        verb: method.as_str().to_lowercase(),
        ..Default::default()
    };
    let rest: &[&str] = match parts.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => {
            ri.version = v.to_string();
            rest
        }
        ["apis", g, v, rest @ ..] if !rest.is_empty() => {
            ri.group = g.to_string();
            ri.version = v.to_string();
            rest
        }
        _ => return ri,
    };
    ri.resource_request = true;
    let mut cur: &[&str] = rest;
    if cur[0] == "namespaces" && cur.len() > 1 {
        ri.namespace = cur[1].to_string();
        if cur.len() > 2 && cur[2] != "status" && cur[2] != "finalize" {
            cur = &cur[2..];
        }
    }
    ri.resource = cur[0].to_string();
    if cur.len() > 1 {
        ri.name = cur[1].to_string();
    }
    if cur.len() > 2 {
        ri.subresource = cur[2].to_string();
    }
    if ri.resource == "namespaces" && ri.name.is_empty() {
        ri.namespace.clear();
    }
    let watch = matches!(q.get("watch").map(String::as_str), Some("true") | Some("1"));
    ri.verb = match *method {
        Method::GET | Method::HEAD if ri.name.is_empty() => {
            if watch {
                "watch"
            } else {
                "list"
            }
        }
        Method::GET | Method::HEAD => {
            if watch {
                "watch"
            } else {
                "get"
            }
        }
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if ri.name.is_empty() => "deletecollection",
        Method::DELETE => "delete",
        _ => "unknown",
    }
    .to_string();
    ri
}

fn query_map(q: Option<&str>) -> HashMap<String, String> {
    url::form_urlencoded::parse(q.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// Entry point for one HTTP request. An `Err` makes hyper close the connection.
pub(crate) async fn handle(
    ctx: Arc<Ctx>,
    req: Request<Incoming>,
) -> Result<Response<Body>, std::io::Error> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let q = query_map(Some(&query));
    let ri = parse_request(&method, &path, &q);
    let res_name = if ri.subresource.is_empty() {
        ri.resource.clone()
    } else {
        format!("{}/{}", ri.resource, ri.subresource)
    };
    let mut rec = RequestRecord {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        verb: ri.verb.clone(),
        resource: res_name.clone(),
        namespace: ri.namespace.clone(),
        name: ri.name.clone(),
        user: String::new(),
        status: 0,
    };
    let mut drop_watch = false;
    for a in ctx
        .faults
        .check(method.as_str(), &path, &ri.verb, &res_name)
    {
        match a {
            FaultAction::Latency(d) => tokio::time::sleep(d).await,
            FaultAction::CloseConnection => {
                ctx.log.push(rec);
                return Err(std::io::Error::other("fault: close connection"));
            }
            FaultAction::Status(code) => {
                rec.status = code;
                ctx.log.push(rec);
                return Ok(err_resp(&StatusError::for_code(code)));
            }
            FaultAction::DropWatch => drop_watch = true,
        }
    }
    let resp = match ctx.tokens.authenticate(
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok()),
    ) {
        Err(e) => err_resp(&e),
        Ok(id) => {
            rec.user = id.user.clone();
            if !ri.resource_request {
                let accept = req
                    .headers()
                    .get(header::ACCEPT)
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or("");
                if (path == "/api" || path == "/apis")
                    && accept.split(',').next().is_some_and(|a| {
                        a.contains("as=APIGroupDiscoveryList") && a.contains("v=v2;")
                    })
                {
                    aggregated_discovery(&ctx.store.registry(), path == "/api")
                } else {
                    non_resource(&ctx, &method, &path)
                }
            } else {
                let attrs = Attributes {
                    verb: ri.verb.clone(),
                    group: ri.group.clone(),
                    resource: ri.resource.clone(),
                    subresource: ri.subresource.clone(),
                    namespace: ri.namespace.clone(),
                    name: ri.name.clone(),
                };
                match auth::authorize(&id, &attrs) {
                    Err(e) => err_resp(&e),
                    Ok(())
                        if ri.group == "authorization.k8s.io"
                            && ri.resource == "selfsubjectaccessreviews"
                            && ri.verb == "create" =>
                    {
                        match self_subject_access_review(&id, req).await {
                            Ok(r) => r,
                            Err(e) => err_resp(&e),
                        }
                    }
                    Ok(()) => match resource(&ctx, &ri, &q, req, drop_watch).await {
                        Ok(r) => r,
                        Err(e) => err_resp(&e),
                    },
                }
            }
        }
    };
    rec.status = resp.status().as_u16();
    ctx.log.push(rec);
    Ok(resp)
}

const VERSION: &str = "v1.33.0";

fn non_resource(ctx: &Ctx, method: &Method, path: &str) -> Response<Body> {
    if *method != Method::GET && *method != Method::HEAD {
        return err_resp(&StatusError::method_not_allowed());
    }
    let reg = ctx.store.registry();
    let p = path.trim_end_matches('/');
    let parts: Vec<&str> = p.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["version"] => json_resp(
            200,
            &json!({
                "major": "1", "minor": "33", "gitVersion": VERSION,
                "gitCommit": "twin", "gitTreeState": "clean",
                "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2",
                "compiler": "gc", "platform": "linux/amd64",
            }),
        ),
        ["healthz"] | ["readyz"] | ["livez"] => {
            let mut r = Response::new(full("ok"));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r
        }
        ["api"] => json_resp(
            200,
            &json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ctx.server_addr}],
            }),
        ),
        ["api", "v1"] => json_resp(200, &resource_list(&reg, "", "v1")),
        ["openapi", "v3"] => json_resp(200, &openapi_root(&reg)),
        ["openapi", "v3", "api", v] => openapi_gv(&reg, "", v),
        ["openapi", "v3", "apis", g, v] => openapi_gv(&reg, g, v),
        ["apis"] => {
            let groups: Vec<Value> = reg
                .groups()
                .into_iter()
                .map(|(g, vs)| group_json(&g, &vs))
                .collect();
            json_resp(
                200,
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            )
        }
        ["apis", g] => match reg.groups().into_iter().find(|(x, _)| x == g) {
            Some((g, vs)) => {
                let mut j = group_json(&g, &vs);
                j["kind"] = json!("APIGroup");
                j["apiVersion"] = json!("v1");
                json_resp(200, &j)
            }
            None => err_resp(&StatusError::path_not_found()),
        },
        ["apis", g, v] => {
            if reg
                .infos
                .iter()
                .any(|i| i.group == *g && i.versions.iter().any(|x| x == v))
            {
                json_resp(200, &resource_list(&reg, g, v))
            } else {
                err_resp(&StatusError::path_not_found())
            }
        }
        _ => err_resp(&StatusError::path_not_found()),
    }
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList, k8s.io/api
/// apidiscovery/v2 types.go), served for `/api` and `/apis` when the client asks for it first in
/// its Accept header, as kubectl and client-go do since 1.30: one request instead of one per
/// group-version.
fn aggregated_discovery(reg: &Registry, core: bool) -> Response<Body> {
    let mut groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        reg.groups()
    };
    groups.retain(|(g, _)| core == g.is_empty());
    let items: Vec<Value> = groups
        .iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = reg
                        .infos
                        .iter()
                        .filter(|i| i.group == *g && i.versions.contains(v))
                        .map(|i| {
                            let gvk = json!({"group": g, "version": v, "kind": i.kind});
                            let subs: Vec<Value> = i
                                .subresources
                                .iter()
                                .map(|sr| {
                                    let (kind, verbs): (Value, &[&str]) = match sr.as_str() {
                                        "log" => (json!({"group": "", "version": "v1", "kind": "Pod"}), &["get"]),
                                        "scale" => (
                                            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
                                            &["get", "patch", "update"],
                                        ),
                                        _ => (gvk.clone(), &["get", "patch", "update"]),
                                    };
                                    json!({"subresource": sr, "responseKind": kind, "verbs": verbs})
                                })
                                .collect();
                            let mut r = json!({
                                "resource": i.resource,
                                "responseKind": gvk,
                                "scope": if i.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": i.singular,
                                "verbs": i.verbs,
                            });
                            if !i.short_names.is_empty() {
                                r["shortNames"] = json!(i.short_names);
                            }
                            if !i.categories.is_empty() {
                                r["categories"] = json!(i.categories);
                            }
                            if !subs.is_empty() {
                                r["subresources"] = Value::Array(subs);
                            }
                            r
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let meta = if g.is_empty() {
                json!({"creationTimestamp": null})
            } else {
                json!({"name": g, "creationTimestamp": null})
            };
            json!({"metadata": meta, "versions": versions})
        })
        .collect();
    let mut r = json_resp(
        200,
        &json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        }),
    );
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        ),
    );
    r
}

/// `/openapi/v3`: the index of group-version documents.
fn openapi_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({"serverRelativeURL": "/openapi/v3/api/v1"}),
    );
    for (g, vs) in reg.groups() {
        for v in vs {
            paths.insert(
                format!("apis/{g}/{v}"),
                json!({"serverRelativeURL": format!("/openapi/v3/apis/{g}/{v}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// `/openapi/v3/apis/{g}/{v}`: a minimal OpenAPI document with, per kind, a PATCH operation
/// carrying `x-kubernetes-group-version-kind` and the `fieldValidation` query parameter (what
/// kubectl's cli-runtime query_param_verifier_v3.go looks for before `create -f`/`apply`), and
/// a permissive schema per kind (`x-kubernetes-preserve-unknown-fields`: the twin has no
/// structural schemas).
fn openapi_gv(reg: &Registry, group: &str, version: &str) -> Response<Body> {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut any = false;
    for i in reg
        .infos
        .iter()
        .filter(|i| i.group == group && i.versions.iter().any(|v| v == version))
    {
        any = true;
        let gvk = json!({"group": group, "version": version, "kind": i.kind});
        let path = if i.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", i.resource)
        } else {
            format!("{prefix}/{}/{{name}}", i.resource)
        };
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ]);
        paths.insert(
            path,
            json!({
                "patch": {
                    "operationId": format!("patch{}", i.kind),
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": params,
                    "responses": {"200": {"description": "OK"}},
                },
            }),
        );
        let schema_name = if group.is_empty() {
            format!("io.k8s.api.core.{version}.{}", i.kind)
        } else {
            let rev: Vec<&str> = group.split('.').rev().collect();
            format!("{}.{version}.{}", rev.join("."), i.kind)
        };
        schemas.insert(
            schema_name,
            json!({
                "type": "object",
                "x-kubernetes-group-version-kind": [gvk],
                "x-kubernetes-preserve-unknown-fields": true,
            }),
        );
    }
    if !any {
        return err_resp(&StatusError::path_not_found());
    }
    json_resp(
        200,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": VERSION},
            "paths": paths,
            "components": {"schemas": schemas},
        }),
    )
}

fn group_json(g: &str, vs: &[String]) -> Value {
    let versions: Vec<Value> = vs
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({
        "name": g,
        "versions": versions,
        "preferredVersion": {"groupVersion": format!("{g}/{}", vs[0]), "version": vs[0]},
    })
}

fn resource_list(reg: &Registry, group: &str, version: &str) -> Value {
    let mut res = Vec::new();
    for i in reg
        .infos
        .iter()
        .filter(|i| i.group == group && i.versions.iter().any(|v| v == version))
    {
        let mut r = json!({
            "name": i.resource,
            "singularName": i.singular,
            "namespaced": i.namespaced,
            "kind": i.kind,
            "verbs": i.verbs,
        });
        if !i.short_names.is_empty() {
            r["shortNames"] = json!(i.short_names);
        }
        if !i.categories.is_empty() {
            r["categories"] = json!(i.categories);
        }
        res.push(r);
        for s in &i.subresources {
            let verbs: &[&str] = match s.as_str() {
                "log" => &["get"],
                _ => &["get", "patch", "update"],
            };
            let mut r = json!({
                "name": format!("{}/{}", i.resource, s),
                "singularName": "",
                "namespaced": i.namespaced,
                "kind": i.kind,
                "verbs": verbs,
            });
            if s == "scale" {
                r["group"] = json!("autoscaling");
                r["version"] = json!("v1");
                r["kind"] = json!("Scale");
            }
            res.push(r);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res})
}

async fn read_body(req: Request<Incoming>) -> Result<(Value, String), StatusError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let bytes = req
        .into_body()
        .collect()
        .await
        .map_err(|e| StatusError::bad_request(format!("reading body: {e}")))?
        .to_bytes();
    if bytes.is_empty() {
        return Ok((Value::Null, ct));
    }
    if ct.starts_with("application/vnd.kubernetes.protobuf") {
        return Ok((crate::protobuf::decode(&bytes)?, ct));
    }
    let v = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => v,
        Err(je) => {
            let text = String::from_utf8_lossy(&bytes);
            serde_saphyr::from_str::<Value>(&text).map_err(|_| {
                StatusError::bad_request(format!("error decoding request body: {je}"))
            })?
        }
    };
    Ok((v, ct))
}

fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

fn include_object(q: &HashMap<String, String>) -> IncludeObject {
    match q.get("includeObject").map(String::as_str) {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    }
}

fn write_opts(q: &HashMap<String, String>) -> WriteOptions {
    WriteOptions {
        dry_run: q.get("dryRun").is_some_and(|d| d == "All"),
        field_manager: q.get("fieldManager").cloned(),
    }
}

/// POST authorization.k8s.io/v1 selfsubjectaccessreviews: evaluates the caller's own rules
/// (what `kubectl auth can-i` asks). Non-resource attributes are always allowed.
async fn self_subject_access_review(
    id: &auth::Identity,
    req: Request<Incoming>,
) -> Result<Response<Body>, StatusError> {
    let (body, _) = read_body(req).await?;
    let ra = body.pointer("/spec/resourceAttributes").cloned();
    let allowed = match &ra {
        None => true,
        Some(ra) => {
            let g = |k: &str| ra.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let attrs = Attributes {
                verb: g("verb"),
                group: g("group"),
                resource: g("resource"),
                subresource: g("subresource"),
                namespace: g("namespace"),
                name: g("name"),
            };
            auth::authorize(id, &attrs).is_ok()
        }
    };
    let mut out = body.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!("SelfSubjectAccessReview");
    if !out.get("metadata").is_some_and(Value::is_object) {
        out["metadata"] = json!({});
    }
    out["status"] = if allowed {
        json!({"allowed": true, "reason": "twin RBAC-lite: allowed by a rule of the token"})
    } else {
        json!({"allowed": false})
    };
    Ok(json_resp(201, &out))
}

async fn resource(
    ctx: &Arc<Ctx>,
    ri: &ReqInfo,
    q: &HashMap<String, String>,
    req: Request<Incoming>,
    drop_watch: bool,
) -> Result<Response<Body>, StatusError> {
    let store = &ctx.store;
    let gvr = store.gvr(&ri.group, &ri.version, &ri.resource)?;
    let info = store.info(&gvr)?;
    let ns = if info.namespaced && !ri.namespace.is_empty() {
        Some(ri.namespace.as_str())
    } else {
        None
    };
    if !ri.subresource.is_empty() && !info.subresources.contains(&ri.subresource) {
        return Err(StatusError::path_not_found());
    }
    if info.namespaced && ns.is_none() && !matches!(ri.verb.as_str(), "list" | "watch") {
        return Err(StatusError::path_not_found());
    }
    if !info.namespaced && !ri.namespace.is_empty() && ri.resource != "namespaces" {
        return Err(StatusError::path_not_found());
    }
    // Verbs the resource does not serve, and item verbs on a collection path (and the
    // reverse), are 405 like the apiserver's route table (no route registered).
    let item_verb = matches!(ri.verb.as_str(), "get" | "update" | "patch" | "delete");
    let needs_name = matches!(ri.verb.as_str(), "update" | "patch" | "delete");
    let verb_served = match ri.subresource.as_str() {
        "" => info.verbs.contains(&ri.verb),
        "log" => ri.verb == "get",
        _ => matches!(ri.verb.as_str(), "get" | "update" | "patch"),
    };
    if !verb_served
        || (needs_name && ri.name.is_empty())
        || (ri.verb == "create" && !ri.name.is_empty())
        || (item_verb && ri.name.is_empty() && ri.verb != "get")
    {
        return Err(StatusError::method_not_allowed());
    }
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_string();
    let warning = info.deprecation_warnings.get(&ri.version).cloned();
    let sub = match ri.subresource.as_str() {
        "status" => Subresource::Status,
        "ephemeralcontainers" => Subresource::EphemeralContainers,
        _ => Subresource::Main,
    };
    let mut resp = match ri.verb.as_str() {
        _ if ri.subresource == "scale" => {
            let body = if ri.verb == "get" {
                Value::Null
            } else {
                read_body(req).await?.0
            };
            let ct = ri.verb.clone();
            json_resp(200, &scale(store, &gvr, ns, &ri.name, &ct, q, body)?)
        }
        "get" if ri.subresource == "log" => {
            return pod_log(ctx, ns.unwrap_or(""), &ri.name, q).await;
        }
        "get" => {
            let o = store.get(&gvr, ns, &ri.name)?;
            if wants_table(&accept) {
                let t = table::to_table(
                    &info,
                    &ri.version,
                    &[o],
                    json!({}),
                    include_object(q),
                    false,
                );
                json_resp(200, &t)
            } else {
                json_resp(200, &o)
            }
        }
        "list" => {
            let p = ListParams {
                label_selector: q.get("labelSelector").cloned(),
                field_selector: q.get("fieldSelector").cloned(),
                limit: q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0),
                continue_: q.get("continue").cloned(),
            };
            let l = store.list_with(&gvr, ns, &p)?;
            if wants_table(&accept) {
                let items = l["items"].as_array().cloned().unwrap_or_default();
                let t = table::to_table(
                    &info,
                    &ri.version,
                    &items,
                    l["metadata"].clone(),
                    include_object(q),
                    false,
                );
                json_resp(200, &t)
            } else {
                json_resp(200, &l)
            }
        }
        "watch" => watch(
            ctx,
            &info,
            &ri.version,
            ns,
            ri,
            q,
            wants_table(&accept),
            drop_watch,
        )?,
        "create" => {
            if !ri.name.is_empty() {
                return Err(StatusError::method_not_allowed());
            }
            let (body, _) = read_body(req).await?;
            let o = store.create_with(&gvr, ns, body, &write_opts(q))?;
            json_resp(201, &o)
        }
        "update" => {
            if ri.subresource == "log" {
                return Err(StatusError::method_not_allowed());
            }
            let (body, _) = read_body(req).await?;
            let o = store.update_with(&gvr, ns, &ri.name, body, sub, &write_opts(q))?;
            json_resp(200, &o)
        }
        "patch" => {
            if ri.subresource == "log" {
                return Err(StatusError::method_not_allowed());
            }
            let (body, ct) = read_body(req).await?;
            let kind = PatchKind::from_content_type(&ct).ok_or_else(|| {
                crate::patch::unsupported_media_type(&[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                    "application/strategic-merge-patch+json",
                ])
            })?;
            let o = store.patch_with(&gvr, ns, &ri.name, kind, &body, sub, &write_opts(q))?;
            json_resp(200, &o)
        }
        "delete" => {
            if !ri.subresource.is_empty() {
                return Err(StatusError::method_not_allowed());
            }
            let (body, _) = read_body(req).await?;
            let d = delete_opts(&body, q);
            let r = store.delete_with(&gvr, ns, &ri.name, &d)?;
            if r.gone && info.kind != "Pod" {
                json_resp(
                    200,
                    &json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": {
                            "name": ri.name, "group": info.group, "kind": info.resource,
                            "uid": r.object.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
                        },
                    }),
                )
            } else {
                json_resp(200, &r.object)
            }
        }
        "deletecollection" => {
            let (body, _) = read_body(req).await?;
            let d = delete_opts(&body, q);
            let p = ListParams {
                label_selector: q.get("labelSelector").cloned(),
                field_selector: q.get("fieldSelector").cloned(),
                ..Default::default()
            };
            let mut l = store.list_with(&gvr, ns, &p)?;
            let mut out = Vec::new();
            for o in l["items"].as_array().cloned().unwrap_or_default() {
                let name = o
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let ons = o.pointer("/metadata/namespace").and_then(Value::as_str);
                if let Ok(r) = store.delete_with(&gvr, ons, name, &d) {
                    out.push(r.object);
                }
            }
            l["items"] = Value::Array(out);
            json_resp(200, &l)
        }
        _ => return Err(StatusError::method_not_allowed()),
    };
    if let Some(w) = warning
        && let Ok(h) = HeaderValue::from_str(&format!("299 - {w:?}"))
    {
        resp.headers_mut().insert("Warning", h);
    }
    Ok(resp)
}

/// The `autoscaling/v1` Scale view of a workload (k8s.io/kubernetes
/// pkg/registry/apps/deployment/storage ScaleREST): spec.replicas, status.replicas and the
/// selector as a string.
fn scale_of(o: &Value) -> Value {
    let selector: Vec<String> = o
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    let meta = o.get("metadata").cloned().unwrap_or(json!({}));
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": o.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": o.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector.join(","),
        },
    })
}

/// GET/PUT/PATCH `<workload>/scale`: writes go to the workload's `spec.replicas` (a Scale
/// `metadata.resourceVersion` acts as a precondition, 409 when stale).
fn scale(
    store: &Store,
    gvr: &crate::registry::Gvr,
    ns: Option<&str>,
    name: &str,
    verb: &str,
    q: &HashMap<String, String>,
    body: Value,
) -> Result<Value, StatusError> {
    let cur = store.get(gvr, ns, name)?;
    let current = scale_of(&cur);
    let wanted = match verb {
        "get" => return Ok(current),
        "update" => body,
        _ => {
            let kind = if body.is_array() {
                PatchKind::Json
            } else {
                PatchKind::Merge
            };
            crate::patch::apply(&current, kind, &body)?
        }
    };
    let replicas = wanted
        .pointer("/spec/replicas")
        .cloned()
        .unwrap_or(json!(1));
    let mut p = json!({"spec": {"replicas": replicas}});
    if let Some(rv) = wanted
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        p["metadata"] = json!({"resourceVersion": rv});
    }
    let out = store.patch_with(
        gvr,
        ns,
        name,
        PatchKind::Merge,
        &p,
        Subresource::Main,
        &write_opts(q),
    )?;
    Ok(scale_of(&out))
}

fn delete_opts(body: &Value, q: &HashMap<String, String>) -> DeleteOptions {
    DeleteOptions {
        propagation_policy: body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| q.get("propagationPolicy").cloned()),
        precondition_uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        dry_run: q.get("dryRun").is_some_and(|d| d == "All")
            || body
                .get("dryRun")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x == "All")),
    }
}

fn streaming(rx: tokio::sync::mpsc::Receiver<Bytes>, content_type: &'static str) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut r = Response::new(StreamBody::new(stream).boxed());
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[allow(clippy::too_many_arguments)]
fn watch(
    ctx: &Arc<Ctx>,
    info: &ResourceInfo,
    version: &str,
    ns: Option<&str>,
    ri: &ReqInfo,
    q: &HashMap<String, String>,
    as_table: bool,
    drop_watch: bool,
) -> Result<Response<Body>, StatusError> {
    let mut field_selector = q.get("fieldSelector").cloned();
    if !ri.name.is_empty() {
        let f = format!("metadata.name={}", ri.name);
        field_selector = Some(match field_selector {
            Some(s) if !s.is_empty() => format!("{s},{f}"),
            _ => f,
        });
    }
    let p = WatchParams {
        resource_version: q.get("resourceVersion").cloned(),
        label_selector: q.get("labelSelector").cloned(),
        field_selector,
        send_initial_events: q.get("sendInitialEvents").is_some_and(|x| x == "true"),
    };
    let gvr = info.gvr(version);
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(1800);
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|x| x == "true") && !as_table;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let line = |e: &WatchEvent| {
        let mut b = serde_json::to_vec(&e.to_json()).unwrap_or_default();
        b.push(b'\n');
        Bytes::from(b)
    };
    match ctx.store.watch_with(&gvr, ns, &p) {
        Err(e) => {
            // Upstream sends a too-old resourceVersion as an ERROR event in a 200 stream.
            if e.code == 410 {
                let ev = WatchEvent {
                    type_: WatchEventType::Error,
                    object: e.to_status(),
                };
                let _ = tx.try_send(line(&ev));
                drop(tx);
                return Ok(streaming(rx, "application/json"));
            }
            return Err(e);
        }
        Ok(mut w) => {
            let info = info.clone();
            let version = version.to_string();
            let interval = ctx.bookmark_interval;
            let inc = include_object(q);
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
                let mut tick =
                    tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
                let mut first = true;
                if drop_watch {
                    // Deliver what is already queued, then end the stream.
                    w.queue_bookmark();
                    while let Some(ev) = w.next().await {
                        if ev.type_ == WatchEventType::Bookmark {
                            break;
                        }
                        let ev = to_table_event(&info, &version, ev, as_table, &mut first, inc);
                        if tx.send(line(&ev)).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
                loop {
                    tokio::select! {
                        ev = w.next() => {
                            let Some(ev) = ev else { return };
                            if ev.type_ == WatchEventType::Bookmark && !bookmarks && !p.send_initial_events {
                                continue;
                            }
                            let ev = to_table_event(&info, &version, ev, as_table, &mut first, inc);
                            if tx.send(line(&ev)).await.is_err() {
                                return;
                            }
                        }
                        _ = tick.tick(), if bookmarks => {
                            w.queue_bookmark();
                        }
                        _ = tokio::time::sleep_until(deadline) => return,
                        _ = tx.closed() => return,
                    }
                }
            });
        }
    }
    Ok(streaming(rx, "application/json"))
}

fn to_table_event(
    info: &ResourceInfo,
    version: &str,
    ev: WatchEvent,
    as_table: bool,
    first: &mut bool,
    inc: IncludeObject,
) -> WatchEvent {
    if !as_table || matches!(ev.type_, WatchEventType::Error | WatchEventType::Bookmark) {
        return ev;
    }
    let meta = json!({"resourceVersion": ev.object.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)});
    let t = table::to_table(
        info,
        version,
        std::slice::from_ref(&ev.object),
        meta,
        inc,
        !*first,
    );
    *first = false;
    WatchEvent {
        type_: ev.type_,
        object: t,
    }
}

/// GET pods/{name}/log: `container` (required when the pod has several), `follow`, `tailLines`.
/// Messages from k8s.io/kubernetes pkg/registry/core/pod/strategy.go validateContainer.
async fn pod_log(
    ctx: &Arc<Ctx>,
    ns: &str,
    name: &str,
    q: &HashMap<String, String>,
) -> Result<Response<Body>, StatusError> {
    let gvr = ctx.store.gvr("", "v1", "pods")?;
    let pod = ctx.store.get(&gvr, Some(ns), name)?;
    let names = |p: &str| -> Vec<String> {
        pod.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let containers = names("/spec/containers");
    let init = names("/spec/initContainers");
    let eph = names("/spec/ephemeralContainers");
    let container = match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) => {
            if !containers.contains(c) && !init.contains(c) && !eph.contains(c) {
                return Err(StatusError::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )));
            }
            c.clone()
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            let mut msg = format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            );
            if !init.is_empty() {
                msg.push_str(&format!(
                    " or one of the init containers: [{}]",
                    init.join(" ")
                ));
            }
            if !eph.is_empty() {
                msg.push_str(&format!(
                    " or one of the ephemeral containers: [{}]",
                    eph.join(" ")
                ));
            }
            return Err(StatusError::bad_request(msg));
        }
    };
    let follow = q.get("follow").is_some_and(|f| f == "true" || f == "1");
    let tail: Option<usize> = q.get("tailLines").and_then(|t| t.parse().ok());
    let (data, _) = ctx.store.read_pod_log(ns, name, &container, 0);
    let mut offset = data.len();
    let first = match tail {
        Some(n) => {
            let text = &data[..];
            let mut idx = text.len();
            let mut count = 0;
            let trimmed = if text.ends_with(b"\n") {
                text.len() - 1
            } else {
                text.len()
            };
            for i in (0..trimmed).rev() {
                if text[i] == b'\n' {
                    count += 1;
                    if count == n {
                        idx = i + 1;
                        break;
                    }
                }
            }
            if count < n {
                idx = 0;
            }
            if n == 0 {
                idx = text.len();
            }
            data[idx..].to_vec()
        }
        None => data,
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let _ = tx.try_send(Bytes::from(first));
    if follow {
        let store = ctx.store.clone();
        let ns = ns.to_string();
        let pod = name.to_string();
        tokio::spawn(async move {
            loop {
                let notified = store.log_notify().notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let (more, closed) = store.read_pod_log(&ns, &pod, &container, offset);
                if !more.is_empty() {
                    offset += more.len();
                    if tx.send(Bytes::from(more)).await.is_err() {
                        return;
                    }
                    continue;
                }
                if closed {
                    return;
                }
                tokio::select! {
                    _ = &mut notified => {}
                    _ = tx.closed() => return,
                    // Pod deletion does not notify; re-check periodically.
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                }
            }
        });
    } else {
        drop(tx);
    }
    Ok(streaming(rx, "text/plain"))
}
