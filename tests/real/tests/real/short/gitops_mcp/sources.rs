//! `kubectl gitops mcp` on GitRepositories with credentials: the fleet of cutover's tests
//! (`cutover::execute::Fleet`: two HTTPS Git servers with their own CAs and basic auth, a
//! GitRepository whose Secret holds `username`, `password` and `ca.crt`, and the root
//! Kustomization `flux bootstrap` writes, reconciled by the real source-controller and
//! kustomize-controller) on the MCP group's cluster.
//!
//! - No Secret value (password, bearerToken, the Authorization header made of them, ca.crt, in
//!   clear or base64 as the Secret's `data` holds them) reaches any tool result or anything
//!   else the client sees (the server's stderr), for every read tool that touches the Secret.
//! - The `cutover` write tool with `--allow-write` moves the source for real; without it the
//!   call is refused and the GitRepository is untouched.

use base64::Engine as _;
use serde_json::{Value, json};

use super::{client, client_log, mcp_cluster, text};
use crate::short::cutover::common::{NEW_TOKEN, TOKEN, USER, basic_auth_secret};
use crate::short::cutover::execute::{Fleet, held};

/// A token the new server does not accept.
const WRONG: &str = "tok-wrong-5d0e9b41c7";
/// A bearer token (the new server takes basic auth only, so it is refused).
const BEARER: &str = "bearer-7c1f0a93e6d2";
/// The Secret of the new server's token and CA (cutover's tests' name).
const NEW_SECRET: &str = "new-creds";

/// Every string that would betray a Secret of `f`: each token and password in clear and in
/// base64 (a Secret's `data`), the basic-auth header values made of them, and each CA
/// certificate's base64 lines and whole PEM in base64.
fn secret_strings(f: &Fleet) -> Vec<String> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut v = Vec::new();
    for t in [TOKEN, NEW_TOKEN, WRONG, BEARER] {
        v.push(t.to_string());
        v.push(b64(t));
        v.push(b64(&format!("{USER}:{t}")));
    }
    let both = format!("{}{}", f.old.ca_pem(), f.new.ca_pem());
    for pem in [f.old.ca_pem(), f.new.ca_pem(), both.as_str()] {
        v.push(b64(pem));
        v.extend(
            pem.lines()
                .filter(|l| !l.starts_with("-----") && l.len() >= 40)
                .map(str::to_owned),
        );
    }
    v
}

/// Panics naming the first secret string of `f` found in `seen`.
fn assert_no_secret(f: &Fleet, what: &str, seen: &str) {
    for s in secret_strings(f) {
        assert!(
            !seen.contains(&s),
            "a Secret value ({}...) reached {what}:\n{seen}",
            &s[..s.len().min(12)]
        );
    }
}

/// The preflight check `id` of a cutover document.
fn check<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["preflight"]["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no {id} check in {doc}"))
}

/// Every read-only tool that reads the GitRepository or its Secret, on a source whose Secret
/// holds a password and a ca.crt, plus Secrets with a rejected password and a bearerToken for
/// the preflight: the credentials are really used (the new server logs the basic-auth user
/// of the preflight), and no Secret value reaches a result or the client's stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_value_reaches_a_tool_result_or_the_log() {
    let c = mcp_cluster();
    let f = Fleet::start_on(&c, "mcp-secrets", 2, 1, 1, true).await;
    basic_auth_secret(&f.c, &f.ns, "wrong", WRONG, Some(f.new.ca_pem()));
    let bearer = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "bearer", "namespace": f.ns},
        "stringData": {"bearerToken": BEARER, "ca.crt": f.new.ca_pem()}});
    f.c.apply_yaml(&bearer.to_string()).unwrap();
    let ns = f.ns.as_str();
    let to = f.to();
    let pf = |extra: Value| {
        let mut a = json!({"name": ns, "namespace": ns, "to": to, "allow_loopback": true});
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        json!({"call": "preflight_source_move", "arguments": a})
    };
    let steps = json!([
        {"call": "diagnose_kustomization", "arguments": {"name": ns, "namespace": ns}},
        {"call": "fleet_report", "arguments": {"all_namespaces": true}},
        pf(json!({})),
        pf(json!({"secret": NEW_SECRET})),
        pf(json!({"secret": "wrong"})),
        pf(json!({"secret": "bearer"})),
        pf(json!({"secret": NEW_SECRET, "verify_in_cluster": true})),
    ]);
    // Control: the detector finds every value of the Secrets as the API serves them (clear
    // text in stringData became base64 in data), so a tool that returned a Secret would fail.
    let served =
        f.c.get_json(&["-n", ns, "get", "secrets", "-o", "json"])
            .to_string();
    for (value, what) in [
        (TOKEN, "the source's password"),
        (NEW_TOKEN, "new-creds' password"),
        (WRONG, "wrong's password"),
        (BEARER, "the bearerToken"),
    ] {
        let b64 = base64::engine::general_purpose::STANDARD.encode(value);
        assert!(served.contains(&b64), "{what} is not in the served Secrets");
    }
    let ca = base64::engine::general_purpose::STANDARD.encode(f.new.ca_pem());
    assert!(
        served.contains(&ca),
        "new-creds' ca.crt is not in the served Secrets"
    );
    let (r, log) = client_log(&f.c, &[], steps);
    assert_eq!(r.len(), 7, "{r:?}");
    for (i, res) in r.iter().enumerate() {
        assert_no_secret(&f, &format!("result {i}"), &res.to_string());
    }
    assert_no_secret(&f, "the client's stderr", &log);

    // The tools really read the source and its Secrets.
    assert_eq!(r[0]["isError"], false, "{}", r[0]);
    assert_eq!(r[0]["structured"]["kind"], "UnstickReport", "{}", r[0]);
    let row = r[1]["structured"]["items"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|i| i["kustomization"] == format!("{ns}/{ns}"))
        })
        .cloned();
    assert!(row.is_some(), "{}", r[1]);
    for (i, want) in [(2, "ok"), (3, "ok")] {
        assert_eq!(
            check(&r[i]["structured"], "remote")["result"],
            want,
            "{}",
            r[i]
        );
    }
    for i in [4, 5] {
        let remote = check(&r[i]["structured"], "remote");
        assert_eq!(remote["result"], "fail", "{}", r[i]);
        assert!(
            remote["message"]
                .as_str()
                .is_some_and(|m| m.contains("authentication")),
            "{remote}"
        );
    }
    assert!(
        f.new
            .requests()
            .iter()
            .any(|q| q.user.as_deref() == Some(USER)),
        "the preflight sent no credential: {:?}",
        f.new.requests()
    );
    assert!(
        !r[6]["structured"]["preflight"]["inCluster"].is_null(),
        "{}",
        r[6]
    );
    assert!(!text(&r[6]).is_empty());
}

/// The `cutover` write tool: refused without `--allow-write` (not listed, the call an unknown
/// tool, the GitRepository untouched); with it, the source moves to the new server at the
/// revision the cluster runs, proven by the real source-controller, with progress
/// notifications and the plugin's field manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cutover_tool_moves_the_source_only_with_allow_write() {
    let c = mcp_cluster();
    let f = Fleet::start_on(&c, "mcp-cutover", 2, 1, 1, true).await;
    let ns = f.ns.as_str();
    let call = json!({"call": "cutover", "progress": true, "arguments": {
        "name": ns, "namespace": ns, "to": f.to(), "secret": NEW_SECRET,
        "allow_loopback": true, "hold_root": true, "timeout": "150s"}});
    let before = f.live();
    let r = client(&f.c, &[], json!([{"list": true}, call.clone()]));
    assert!(
        !r[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "cutover"),
        "{}",
        r[0]
    );
    assert!(
        r[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("not found")),
        "{}",
        r[1]
    );
    let after = f.live();
    assert_eq!(
        after["spec"], before["spec"],
        "a refused call changed the spec"
    );
    assert_eq!(
        after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
        "a refused call wrote the GitRepository: {after}"
    );
    f.assert_restored();

    let (r, log) = client_log(&f.c, &["--allow-write"], json!([call]));
    let res = &r[0];
    assert_no_secret(&f, "the cutover result", &res.to_string());
    assert_no_secret(&f, "the client's stderr", &log);
    assert_eq!(res["isError"], false, "{res}\n{log}");
    let doc = &res["structured"];
    assert_eq!(doc["kind"], "CutoverReport", "{res}");
    assert_eq!(doc["mode"], "execute", "{res}");
    assert_eq!(doc["result"]["ending"], "cutOver", "{res}");
    assert_eq!(doc["result"]["revision"], json!(f.head_rev()), "{res}");
    assert!(text(res).contains("exit 0"), "{res}");
    assert!(
        res["progress"].as_array().is_some_and(|p| !p.is_empty()),
        "no progress notification: {res}"
    );
    // On the cluster itself: the real source-controller fetched the same revision from the new
    // URL with the new Secret, for the patched generation; the root is held as asked.
    let o = f.live();
    assert_eq!(o["spec"]["url"], json!(f.to()), "{o}");
    assert_eq!(o["spec"]["secretRef"]["name"], NEW_SECRET, "{o}");
    assert_eq!(o["status"]["artifact"]["revision"], json!(f.head_rev()));
    assert!(
        o["status"]["observedGeneration"].as_i64() >= o["metadata"]["generation"].as_i64(),
        "{o}"
    );
    assert!(held(&o), "{o}");
    let managers: Vec<&str> = o["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"kubectl-cutover"), "{managers:?}");
    assert_eq!(
        f.root()["status"]["lastAppliedRevision"],
        json!(f.head_rev()),
        "a cutover is not a rollback"
    );
}
