//! The failure catalogue's "Auth" rows live on the demo's real cluster, whose Git server has a
//! user ([`git_user`]: `realcluster::ClusterOptions::git_user`) with named tokens that its
//! Gitea-shaped token API mints and revokes while the cluster runs (`curl`, as an operator
//! rotates a token on Gitea). Namespace [`AUTH_NS`]: a fleet `private` (repository `org/private`) whose repository requires
//! auth, read over HTTPS with the server's CA as `ca.crt` in the Secret
//! `auth/private-git-auth` (basic auth: `username` and the token as `password`).
//!
//! - Row 1, basic auth over plain `http://`: a GitRepository `plain` on the server's plain
//!   listener with the same Secret; the real source-controller v1.9.6 does not refuse it, it
//!   sends the credential in clear text (the server records `Authorization: Basic` on `http`),
//!   and `kubectl cutover gitrepository/private -n auth --to http://...` refuses it as `flux
//!   bootstrap` does, naming the Secret and what source-controller would do.
//! - Row 2, a token revoked while Flux holds it: the token API revokes `private-1`; the real
//!   source-controller fails with "authentication required"; `kubectl unstick ks/private -n auth`
//!   and `kubectl gitops verify -n auth` name the Secret, its key (`password`) and the fix; the
//!   fix as they say it (a new token `private-2` in that key, then `kubectl unstick --with-source`)
//!   brings the real controllers back.

use std::process::Command;

use realcluster::GitAuth;

use super::{Ctx, Real, Step, T, kget, poll, real_cluster, request_reconcile, say};
use twin::flux::cluster::s;

/// The namespace of the auth steps' fleet.
pub(crate) const AUTH_NS: &str = "auth";
/// The fleet (GitRepository and Kustomization) that reads a repository requiring auth.
/// Not `fleet`: the demo's own fleet is `org/fleet` on the same Git server.
const FLEET: &str = "private";
/// The Git server user and the password of its token API.
const USER: &str = "flux";
const PASSWORD: &str = "demo-git-admin";

/// Row 1's step title.
pub(crate) const HTTP_STEP: &str =
    "auth-http: basic auth over plain http://, what Flux does with it (real cluster)";
/// Row 2's step title.
pub(crate) const TOKEN_STEP: &str =
    "auth-token: a token revoked while Flux holds it (real cluster)";

/// The demo cluster's Git user (`ClusterOptions::git_user`).
pub(crate) fn git_user() -> realcluster::GitUser {
    realcluster::GitUser {
        name: USER.into(),
        password: PASSWORD.into(),
    }
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: auth-demo\n  namespace: auth\ndata: {fleet: auth}\n";

/// `curl` against the cluster's Git server's token API as the demo user, printed as run
/// (`$ curl ...`): the HTTP status and the body.
fn token_api(
    c: &realcluster::Cluster,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> (u16, String) {
    let url = format!("{}{path}", c.git().tokens_url(USER));
    let ca = c.git().ca_file().display().to_string();
    let user = format!("{USER}:{PASSWORD}");
    let mut args: Vec<String> = [
        "-sS",
        "--cacert",
        ca.as_str(),
        "-u",
        user.as_str(),
        "-X",
        method,
    ]
    .map(String::from)
    .to_vec();
    if let Some(b) = body {
        args.extend(["-H", "Content-Type: application/json", "-d", b].map(String::from));
    }
    args.extend(["-w", "\n%{http_code}", url.as_str()].map(String::from));
    say!(
        "\n  $ curl {}",
        args.join(" ").replace("\n%{http_code}", "%{http_code}")
    );
    let out = Command::new("curl").args(&args).output();
    let Ok(out) = out else {
        say!("    cannot run curl");
        return (0, String::new());
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    let code = code.trim().parse().unwrap_or(0);
    // A minted token is shown by its last eight characters only.
    let shown = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("sha1").and_then(|t| t.as_str()).filter(|t| !t.is_empty()).map(|_| {
                format!(
                    "{{\"id\": {}, \"name\": {}, \"sha1\": \"(the token, not shown)\", \"token_last_eight\": {}}}",
                    v["id"], v["name"], v["token_last_eight"]
                )
            })
        })
        .unwrap_or_else(|| body.to_owned());
    if !shown.is_empty() {
        say!("    {shown}");
    }
    say!("    (HTTP {code})");
    (code, body.to_owned())
}

/// The fleet that reads a repository requiring auth, Ready at its first commit (made once; the
/// two steps share it).
fn auth_fleet(c: &realcluster::Cluster, st: &mut Step) -> Option<realcluster::AuthFleet> {
    let existing = kget(c, &["get", "gitrepository", FLEET, "-n", AUTH_NS]);
    if !existing.is_null() && existing.get("spec").is_some() {
        return Some(realcluster::AuthFleet {
            sha: String::new(),
            token_name: format!("{FLEET}-1"),
            token: String::new(),
            secret: format!("{FLEET}-git-auth"),
            url: s(&existing, "/spec/url").to_string(),
        });
    }
    let f = match c.auth_fleet(
        AUTH_NS,
        FLEET,
        &[("cm.yaml", CM)],
        "  interval: 10m\n  path: ./\n  prune: true\n",
        GitAuth::Basic,
    ) {
        Ok(f) => f,
        Err(e) => {
            st.check(false, format!("set up the auth fleet: {e}"));
            return None;
        }
    };
    let want = format!("main@sha1:{}", f.sha);
    let ready = poll(T, || {
        let k = kget(c, &["get", "ks", FLEET, "-n", AUTH_NS]);
        super::cond_is(&k, "Ready", "True") && s(&k, "/status/lastAppliedRevision") == want
    });
    st.check(
        ready,
        format!(
            "the real controllers apply {AUTH_NS}/{FLEET} from a repository that requires auth: {} (HTTPS, the server's CA as ca.crt), basic auth with token {} from Secret {AUTH_NS}/{}",
            f.url, f.token_name, f.secret
        ),
    );
    Some(f)
}

/// Row 1 live.
pub(crate) fn step_http(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(HTTP_STEP);
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let Some(f) = auth_fleet(c, &mut st) else {
        return st;
    };
    let plain = c.git().url_http(&format!("org/{FLEET}"));
    // What the real source-controller does with basic auth over http://.
    let applied = c.apply_yaml(&format!(
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: plain, namespace: {AUTH_NS}}}\nspec: {{interval: 10m, url: \"{plain}\", ref: {{branch: main}}, secretRef: {{name: {}}}}}\n",
        f.secret
    ));
    if let Err(e) = applied {
        st.check(false, format!("apply GitRepository {AUTH_NS}/plain: {e}"));
        return st;
    }
    let fetched = poll(T, || {
        let g = kget(c, &["get", "gitrepository", "plain", "-n", AUTH_NS]);
        super::cond_is(&g, "Ready", "True")
    });
    ctx.kubectl(Some(&kc), &["get", "gitrepository", "plain", "-n", AUTH_NS]);
    let sent = c.git().requests().iter().any(|q| {
        q.scheme == "http"
            && q.authorization.as_deref() == Some("Basic")
            && q.repo.as_deref() == Some(&format!("org/{FLEET}")[..])
            && q.status == 200
    });
    st.check(
        fetched && sent,
        format!(
            "the real source-controller does not refuse basic auth over {plain}: GitRepository {AUTH_NS}/plain is Ready, and the Git server saw `Authorization: Basic` on its plain listener (the token in clear text)"
        ),
    );
    let r = ctx.kubectl(
        Some(&kc),
        &[
            "cutover",
            &format!("gitrepository/{FLEET}"),
            "-n",
            AUTH_NS,
            "--to",
            &plain,
            "--dry-run",
            "--allow-loopback",
        ],
    );
    st.check(
        r.code == 1
            && r.stdout.contains(&format!(
                "http:// with the credentials of secret {AUTH_NS}/{}: source-controller v1.9.6 does not refuse it: it sends the credential in clear text",
                f.secret
            ))
            && r.stdout.contains("scheme http is insecure, pass --allow-insecure-http=true to allow it"),
        "kubectl cutover's preflight refuses basic auth over http:// as flux bootstrap does, and says that source-controller would send it in clear text",
    );
    let _ = c.kubectl(&[
        "delete",
        "gitrepository",
        "plain",
        "-n",
        AUTH_NS,
        "--wait=false",
    ]);
    st
}

/// Row 2 live.
pub(crate) fn step_token(ctx: &Ctx, real: &Real) -> Step {
    let mut st = Step::new(TOKEN_STEP);
    let Some(c) = real_cluster(real, &mut st) else {
        return st;
    };
    let kc = c.kubeconfig().to_path_buf();
    let Some(f) = auth_fleet(c, &mut st) else {
        return st;
    };
    ctx.kubectl(Some(&kc), &["get", "gitrepository,ks", "-n", AUTH_NS]);
    say!("\n  # a token rotation that revokes the token Flux holds (the Git server's token API)");
    let (code, _) = token_api(c, "DELETE", &format!("/{}", f.token_name), None);
    st.check(
        code == 204,
        format!("token {} revoked while Flux holds it", f.token_name),
    );
    request_reconcile(c, AUTH_NS, "gitrepository", FLEET);
    let mut message = String::new();
    let refused = poll(T, || {
        let g = kget(c, &["get", "gitrepository", FLEET, "-n", AUTH_NS]);
        let ready = g["status"]["conditions"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["type"] == "Ready"))
            .cloned()
            .unwrap_or_default();
        message = s(&ready, "/message").to_string();
        ready["status"] == "False" && message.contains("authentication required")
    });
    st.check(
        refused,
        format!(
            "the real source-controller fails the fetch: \"{}\"",
            message.trim()
        ),
    );
    let secret_key = format!(
        "the Git server refused the token in Secret {AUTH_NS}/{} key `password`",
        f.secret
    );
    let r = ctx.kubectl(
        Some(&kc),
        &[
            "unstick",
            &format!("ks/{FLEET}"),
            "-n",
            AUTH_NS,
            "--dry-run",
        ],
    );
    st.check(
        r.code == 1
            && r.stdout.contains(&secret_key)
            && r.stdout.contains("mint a new, uniquely named token")
            && r.stdout.contains("do not revoke the one in use first"),
        format!("kubectl unstick names the Secret and key ({AUTH_NS}/{} `password`) and the fix: a new, uniquely named token in it, never revoking the one in use", f.secret),
    );
    let r = ctx.kubectl(Some(&kc), &["gitops", "verify", "-n", AUTH_NS]);
    st.check(
        r.code == 1 && r.stdout.contains(&secret_key),
        "kubectl gitops verify's link 1 is broken, naming the same Secret, key and fix",
    );
    // The fix as they say it.
    let n = c.git().token_names(USER).len() + 2;
    let new_name = format!("{FLEET}-{n}");
    let (code, body) = token_api(c, "POST", "", Some(&format!("{{\"name\":\"{new_name}\"}}")));
    let token = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["sha1"].as_str().map(str::to_owned))
        .unwrap_or_default();
    st.check(
        code == 201 && !token.is_empty(),
        format!("a new, uniquely named token {new_name} minted"),
    );
    say!(
        "\n  $ kubectl -n {AUTH_NS} patch secret {} --type merge -p '{{\"stringData\":{{\"password\":\"<the new token>\"}}}}'",
        f.secret
    );
    let patched = c.kubectl(&[
        "-n",
        AUTH_NS,
        "patch",
        "secret",
        &f.secret,
        "--type",
        "merge",
        "-p",
        &format!("{{\"stringData\":{{\"password\":\"{token}\"}}}}"),
    ]);
    st.check(
        patched.is_ok(),
        format!("Secret {AUTH_NS}/{} holds it in key password", f.secret),
    );
    let r = ctx.kubectl(
        Some(&kc),
        &[
            "unstick",
            &format!("ks/{FLEET}"),
            "-n",
            AUTH_NS,
            "--with-source",
            "--yes",
        ],
    );
    let g = kget(c, &["get", "gitrepository", FLEET, "-n", AUTH_NS]);
    st.check(
        r.code == 0 && super::cond_is(&g, "Ready", "True"),
        "the source fetches with the new token and the Kustomization runs: Ready (the real controllers)",
    );
    st
}

/// What `./demo --keep` prints for the auth rows: the token API commands and the plugins.
pub(crate) fn keep_commands(c: &realcluster::Cluster) -> String {
    let api = c.git().tokens_url(USER);
    let ca = c.git().ca_file().display();
    let plain = c.git().url_http(&format!("org/{FLEET}"));
    format!(
        "\n  # the Auth rows (namespace {AUTH_NS}; the Git server's token API as user {USER}, password {PASSWORD})\n  curl -sS --cacert {ca} -u {USER}:{PASSWORD} {api}          # the tokens\n  kubectl cutover gitrepository/{FLEET} -n {AUTH_NS} --to {plain} --dry-run --allow-loopback   # row 1: refused\n  # row 2: revoke the token the Secret holds, then ask for a fetch\n  curl -sS --cacert {ca} -u {USER}:{PASSWORD} -X DELETE {api}/NAME\n  kubectl annotate --overwrite gitrepository/{FLEET} -n {AUTH_NS} reconcile.fluxcd.io/requestedAt=\"$(date +%s%N)\"\n  kubectl unstick ks/{FLEET} -n {AUTH_NS} --dry-run\n  kubectl gitops verify -n {AUTH_NS}\n  # the fix: a new, uniquely named token in the Secret's key, then the rerun\n  t=$(curl -sS --cacert {ca} -u {USER}:{PASSWORD} -H 'Content-Type: application/json' -d '{{\"name\":\"{FLEET}-'$(date +%s)'\"}}' {api} | sed -n 's/.*\"sha1\":\"\\([0-9a-f]*\\)\".*/\\1/p')\n  kubectl -n {AUTH_NS} patch secret {FLEET}-git-auth --type merge -p '{{\"stringData\":{{\"password\":\"'$t'\"}}}}'\n  kubectl unstick ks/{FLEET} -n {AUTH_NS} --with-source --yes\n"
    )
}
