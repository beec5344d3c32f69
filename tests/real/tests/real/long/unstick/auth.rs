//! The failure catalogue's row 2 on the real source-controller v1.9.6: a token revoked while
//! Flux holds it (the rotation trap). The fleet's repository requires auth on the cluster's
//! Git server (HTTPS, its CA as `ca.crt` in the Secret, `ClusterOptions::git_user`); the test
//! revokes the token the Secret holds, the real controller fails the fetch with go-git's
//! "authentication required", and `kubectl unstick` on the Kustomization reading that source
//! names the Secret, its key and the fix (a new, uniquely named token in that key; never
//! revoke the one in use). Then the fix as it says, and the real controllers recover.

use std::time::Duration;

use realcluster::GitAuth;
use realcluster::testkit::{condition, eventually};

use super::{quiet_cluster, unstick, unstick_json};

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unstick-revoked\n  namespace: default\ndata: {a: b}\n";

/// Row 2: the real message, the Secret and key named, the rotation as the fix (not a rerun),
/// and the fix proved on the real controllers.
#[test]
fn a_revoked_token_names_the_secret_key_and_the_rotation() {
    let c = &quiet_cluster();
    // Its own namespace: its failing source is read by no other test's run.
    let (ns, name) = ("unstick-revoked", "unstick-revoked");
    let user = crate::git_user().name;
    let f = c
        .auth_fleet(
            ns,
            name,
            &[("cm.yaml", CM)],
            "  interval: 10m\n  path: ./\n  prune: true\n",
            GitAuth::Basic,
        )
        .unwrap();
    crate::ready_at_in(c, ns, name, &f.sha);

    // The rotation trap: the token Flux holds is revoked; the next fetch is refused.
    assert!(c.git().revoke_named_token(&user, &f.token_name));
    crate::fetch_source_now_in(c, ns, name);
    let ready = eventually(
        Duration::from_secs(90),
        "the real source-controller refuses the revoked token",
        || {
            let g = c.get_json(&["-n", ns, "get", "gitrepository", name]);
            let r = condition(&g, "Ready");
            (r["status"] == "False"
                && r["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("authentication required")))
            .then_some(r)
        },
    );
    // source-controller v1.9.6's own words (go-git's ErrAuthenticationRequired with the
    // server's 401 body), asserted whole up to the body. The source has an artifact, so its
    // fetch lists the remote first (fluxcd/pkg/git gogit/clone.go): "unable to list remote
    // for", not the "unable to clone" of a first fetch.
    let message = ready["message"].as_str().unwrap().to_owned();
    let want = format!(
        "failed to checkout and determine revision: unable to list remote for '{}': authentication required",
        f.url
    );
    assert!(
        message.starts_with(&want),
        "{message:?}\nwant prefix {want:?}"
    );
    assert_eq!(ready["reason"], "GitOperationFailed", "{ready:#}");
    assert!(
        c.git()
            .requests()
            .iter()
            .any(|q| q.repo.as_deref() == Some(&format!("org/{name}")[..])
                && q.status == 401
                && q.authorization.as_deref() == Some("Basic")),
        "source-controller sent its basic auth and got 401"
    );

    let (code, v, err) = unstick_json(c, &[&format!("ks/{name}"), "-n", ns, "--dry-run"]);
    assert_eq!(code, 1, "{v:#}\n{err}");
    assert_eq!(v["diagnosis"]["class"], "source-not-ready", "{v:#}");
    // No rerun is offered as the way out: the fix is the credential.
    assert_eq!(v["plan"]["lever"], "fix-in-git", "{v:#}");
    let hints: Vec<String> = v["diagnosis"]["hints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap_or_default().to_owned())
        .collect();
    let hint = hints
        .iter()
        .find(|h| h.contains("authentication required"))
        .unwrap_or_else(|| panic!("no hint quotes the refusal: {v:#}"));
    assert!(
        hint.contains(&message),
        "the real message is quoted: {hint}"
    );
    assert!(
        hint.contains(&format!(
            "the Git server refused the token in Secret {ns}/{} key `password`",
            f.secret
        )),
        "{hint}"
    );
    assert!(hint.contains("mint a new, uniquely named token"), "{hint}");
    assert!(
        hint.contains("do not revoke the one in use first"),
        "{hint}"
    );
    assert!(
        hint.contains(&format!(
            "kubectl -n {ns} patch secret {} --type merge -p '{{\"stringData\":{{\"password\":\"<new token>\"}}}}'",
            f.secret
        )),
        "{hint}"
    );
    assert!(
        hint.contains(&format!("kubectl unstick ks/{name} -n {ns} --with-source")),
        "{hint}"
    );
    assert!(!v.to_string().contains(&f.token), "no token value is shown");

    // The fix as it says: a new, uniquely named token in that key; then the rerun.
    let new = c.git().mint_token(&user, &format!("{name}-2")).unwrap();
    c.kubectl(&[
        "-n",
        ns,
        "patch",
        "secret",
        &f.secret,
        "--type",
        "merge",
        "-p",
        &format!("{{\"stringData\":{{\"password\":\"{new}\"}}}}"),
    ])
    .unwrap();
    let (code, out, err) = unstick(
        c,
        &[&format!("ks/{name}"), "-n", ns, "--with-source", "--yes"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let g = c.get_json(&["-n", ns, "get", "gitrepository", name]);
    assert_eq!(condition(&g, "Ready")["status"], "True", "{g:#}");
}
