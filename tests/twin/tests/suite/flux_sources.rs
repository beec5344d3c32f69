//! source-controller model edge cases and scenario-file errors.

use std::time::Duration;

use serde_json::Value;
use twin::flux::cluster::s;
use twin::scenario::{Scenario, ScenarioError};
use twin::testkit::{cond, cond_is, gitrepo, start, wait};

const T: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn missing_branch_missing_secret_ref_name_and_default_branch() {
    let yaml = r#"
name: sources
timeScale: 0.01
gitServers:
  - name: gitea
    repos:
      - name: org/fleet
        branch: main
        commits:
          - {message: one, files: {a.yaml: "a: 1\n"}}
          - {message: two, files: {a.yaml: "a: 2\n"}}
      - name: org/legacy
        branch: master
        commits:
          - {message: legacy, files: {b.yaml: "b: 1\n"}}
objects:
  - apiVersion: source.toolkit.fluxcd.io/v1
    kind: GitRepository
    metadata: {name: nobranch, namespace: flux-system}
    spec: {interval: 1m, url: "{{http:gitea/org/fleet}}", ref: {branch: nope}}
  - apiVersion: source.toolkit.fluxcd.io/v1
    kind: GitRepository
    metadata: {name: nosecret, namespace: flux-system}
    spec: {interval: 1m, url: "{{https:gitea/org/fleet}}", ref: {branch: main}, secretRef: {name: absent}}
  - apiVersion: source.toolkit.fluxcd.io/v1
    kind: GitRepository
    metadata: {name: legacy, namespace: flux-system}
    spec: {interval: 1m, url: "{{http:gitea/org/legacy}}"}
  - apiVersion: source.toolkit.fluxcd.io/v1
    kind: GitRepository
    metadata: {name: pinned, namespace: flux-system}
    spec: {interval: 1m, url: "{{http:gitea/org/fleet}}", ref: {name: refs/heads/main}}
"#;
    let sc = Scenario::from_yaml(yaml, &Scenario::shipped_dir(), "inline").unwrap();
    let run = start(sc).await;
    let g = run.git["gitea"].clone();
    let is = |reason: &'static str, status: &'static str| {
        move |o: &Value| cond_is(o, "Ready", status, reason)
    };

    let o = wait(
        &run,
        &gitrepo("nobranch"),
        T,
        is("GitOperationFailed", "False"),
    )
    .await;
    assert_eq!(
        cond(&o, "Ready").unwrap()["message"],
        format!(
            "failed to checkout and determine revision: unable to clone '{}': couldn't find remote ref \"refs/heads/nope\"",
            g.url_http("org/fleet")
        )
        .as_str()
    );
    // first generation never succeeded: the reconciling message names it
    assert_eq!(
        cond(&o, "Reconciling").unwrap()["message"],
        "processing object: new generation -1 -> 1"
    );

    let o = wait(
        &run,
        &gitrepo("nosecret"),
        T,
        is("AuthenticationFailed", "False"),
    )
    .await;
    assert_eq!(
        cond(&o, "Ready").unwrap()["message"],
        "failed to get secret 'flux-system/absent': secrets \"absent\" not found"
    );

    // no spec.ref: the default branch is master (fluxcd/pkg git DefaultBranch)
    let o = wait(&run, &gitrepo("legacy"), T, is("Succeeded", "True")).await;
    let head = g.head("org/legacy", "master").unwrap();
    assert_eq!(
        s(&o, "/status/artifact/revision"),
        format!("master@sha1:{head}")
    );

    let o = wait(&run, &gitrepo("pinned"), T, is("Succeeded", "True")).await;
    let head = g.head("org/fleet", "main").unwrap();
    assert_eq!(
        s(&o, "/status/artifact/revision"),
        format!("refs/heads/main@sha1:{head}")
    );
    assert_eq!(o["status"]["observedGeneration"], 1);
}

#[test]
fn scenario_errors_name_the_file_and_problem() {
    let err = Scenario::from_yaml("name: x\nbogus: 1\n", std::path::Path::new("."), "bad.yaml")
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("bad.yaml: not a valid scenario:"), "{msg}");
    assert!(msg.contains("bogus"), "{msg}");
    let err = Scenario::from_yaml(
        "name: x\nevents:\n  - {name: a}\n  - {name: a}\n",
        std::path::Path::new("."),
        "dup.yaml",
    )
    .unwrap_err();
    assert!(matches!(err, ScenarioError::Invalid { .. }));
    assert_eq!(
        err.to_string(),
        "dup.yaml: event name 'a' is used twice; names must be unique"
    );
    let err = Scenario::from_file(std::path::Path::new("/nonexistent/s.yaml")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/s.yaml: cannot read:"),
        "{err}"
    );
    // every shipped scenario parses
    for e in std::fs::read_dir(Scenario::shipped_dir()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            Scenario::from_file(&p).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
