//! `--check-remote`: the remote's branch head of the Kustomization's GitRepository, read with
//! `git ls-remote` from a probe pod in the source's namespace with the credentials Flux holds
//! (cutover's in-cluster preflight, [`cutover::incluster::verify`]: the shared probe Job,
//! labelled `app.kubernetes.io/managed-by=kubectl-unstick`, deleted when done and on Ctrl-C),
//! so a suspended or lagging source says which newer commit it holds back. Read-only for the
//! Flux objects; it creates one short-lived Job. A loopback `spec.url` (`localhost`,
//! `127.0.0.1`: in a pod, the pod itself) is read from this workstation instead, and the
//! record says so ([`workstation_head`]), as `kubectl gitops verify --probe-source` does.

use std::time::Duration;

use cluster_loop::cli::Connection;
use cluster_loop::error::Result;
use cluster_loop::probe::{GitSecret, ProbeOwner};
use serde_json::Value;

use crate::diagnose::{Diagnosis, RemoteHead};
use crate::obj;

/// Reads the head of the branch `source` (a GitRepository) follows and records it on `d`
/// ([`crate::diagnose::apply_remote_head`]). A source that is not a GitRepository, pins a
/// tag/semver/commit, or whose probe could not read the head gets a note (returned) instead.
///
/// Errors: API errors creating or watching the probe Job (exit 3); a Secret that cannot be
/// read is a note, not an error.
pub async fn check(
    conn: &Connection,
    source: Option<&Value>,
    d: &mut Diagnosis,
    image: &str,
    timeout: Duration,
    show_progress: bool,
) -> Result<Option<String>> {
    let Some(src) = source.filter(|s| obj::kind(s) == "GitRepository") else {
        return Ok(Some(
            "--check-remote: the source is not a GitRepository: no branch head to read".into(),
        ));
    };
    let Some(branch) = cluster_loop::flux::git_branch(src) else {
        return Ok(Some(
            "--check-remote: the GitRepository pins a tag, semver range or commit: no branch head to compare".into(),
        ));
    };
    let ns = obj::namespace(src).to_string();
    let creds = match obj::s(src, &["spec", "secretRef", "name"]) {
        None => None,
        Some(name) => match cutover::preflight::read_credentials(conn, &ns, name).await {
            Ok(c) => Some((name.to_string(), c)),
            Err(e) => {
                return Ok(Some(format!(
                    "--check-remote: secret {ns}/{name} could not be read, so the probe was not started: {e}"
                )));
            }
        },
    };
    let commit = d
        .source
        .as_ref()
        .and_then(|s| s.artifact_revision.as_deref())
        .map(|r| r.rsplit(':').next().unwrap_or(r).to_string())
        .unwrap_or_default();
    let url = obj::s(src, &["spec", "url"])
        .unwrap_or_default()
        .to_string();
    if let Some(fact) = cutover::incluster::url_loopback_fact(&url) {
        let creds = creds.map(|(_, c)| c).unwrap_or_default();
        return workstation_head(creds, &url, &branch, &commit, &fact, d).await;
    }
    let secret = creds.map(|(name, c)| GitSecret { name, keys: c.keys });
    let v = cutover::incluster::Verify {
        namespace: ns.clone(),
        url,
        branch: branch.clone(),
        commit: commit.clone(),
        secret,
        image: image.to_string(),
        timeout,
        owner: ProbeOwner::UNSTICK,
    };
    let progress = cluster_loop::wait::Progress::new(
        format!("reading {branch}'s head from a probe pod in {ns}"),
        show_progress,
    );
    let mut signals = cluster_loop::signals::Signals::install();
    let probed = cutover::incluster::verify(conn, &v, &progress, &mut signals).await?;
    progress.finish();
    let Some((ic, verdict)) = probed else {
        return Ok(Some(
            "--check-remote: interrupted; the probe Job was deleted".into(),
        ));
    };
    let from = format!(
        "seen from pod {} with git ls-remote",
        ic.pod.clone().unwrap_or(ic.probe.clone())
    );
    match (verdict, ic.head) {
        (Ok(_), Some(h)) => {
            crate::diagnose::apply_remote_head(d, RemoteHead::new(&branch, &h, &commit, &from));
            Ok(None)
        }
        (Err(_), Some(h)) if ic.matches_cluster == Some(false) => {
            crate::diagnose::apply_remote_head(d, RemoteHead::new(&branch, &h, &commit, &from));
            Ok(None)
        }
        (Ok(m) | Err(m), _) => Ok(Some(format!(
            "--check-remote: the remote head was not read from the pod plane: {m}"
        ))),
    }
}

/// A loopback `spec.url` (trial3: "from a pod, 127.0.0.1 resolves to 127.0.0.1, but git could
/// not fetch from it", and no head at all): in a pod the loopback is the pod itself, so no
/// probe runs; the head is read here with `git ls-remote` and the credentials Flux holds, and
/// the record says where it was seen and why. A head that cannot be read is a note.
async fn workstation_head(
    creds: cutover::git::GitCredentials,
    url: &str,
    branch: &str,
    commit: &str,
    fact: &str,
    d: &mut Diagnosis,
) -> Result<Option<String>> {
    match cutover::git::remote_head_here(creds, url, branch).await {
        Ok(h) => {
            let from = format!(
                "seen from this workstation with git ls-remote, not from a pod: {fact}, and in a pod the loopback is the pod itself"
            );
            crate::diagnose::apply_remote_head(d, RemoteHead::new(branch, &h, commit, &from));
            Ok(None)
        }
        Err(f) => Ok(Some(format!(
            "--check-remote: {fact} (in a pod the pod itself), and this workstation cannot read its head either: {}",
            f.explain(url, None)
        ))),
    }
}
