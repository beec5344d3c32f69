//! Conformance of the twin API server through kube-rs (the client our plugins use): get, list
//! with selectors and pagination, watch (resourceVersion semantics, 410 Gone, bookmarks),
//! patch, update conflicts (409), the status subresource and generation rules, delete with
//! finalizers, pod logs (follow), ephemeral containers, fault injection and request counters.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Config};
use serde_json::{Value, json};
use std::time::Duration;
use twin::{Fault, FaultAction, Trigger, Twin, TwinOptions};

const DEADLINE: Duration = Duration::from_secs(60);

async fn client(twin: &Twin) -> Client {
    let kc = kube::config::Kubeconfig::read_from(twin.kubeconfig_path()).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

fn ks_api(c: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"),
        "kustomizations",
    );
    Api::namespaced_with(c.clone(), "flux-system", &ar)
}

fn ks(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system", "labels": {"wave": "1"}},
        "spec": {"interval": "10m", "path": "./apps", "prune": true,
                 "sourceRef": {"kind": "GitRepository", "name": "flux-system"}},
        "status": {"ignored": "on create"},
    }))
    .unwrap()
}

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn next_event<S>(s: &mut S) -> WatchEvent<DynamicObject>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin,
{
    loop {
        let ev = tokio::time::timeout(DEADLINE, s.next())
            .await
            .expect("no watch event before the deadline")
            .expect("watch ended")
            .expect("watch error");
        if !matches!(ev, WatchEvent::Bookmark(_)) {
            return ev;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_generation_resource_version_and_conflict() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let api = ks_api(&c);
    let created = api
        .create(&PostParams::default(), &ks("apps"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert!(
        created.data.get("status").is_none(),
        "create drops status (status subresource)"
    );
    let rv1: u64 = created
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();

    // generateName
    let mut gen_obj = ks("");
    gen_obj.metadata.name = None;
    gen_obj.metadata.generate_name = Some("apps-".into());
    let g = api.create(&PostParams::default(), &gen_obj).await.unwrap();
    let gname = g.metadata.name.unwrap();
    assert!(gname.starts_with("apps-") && gname.len() == 10, "{gname}");

    // Spec change bumps generation; a label change does not.
    let p = api
        .patch(
            "apps",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    let p2 = api
        .patch(
            "apps",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p2.metadata.generation, Some(2));
    let rv3: u64 = p2
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv3 > rv1);

    // A no-op patch writes nothing.
    let same = api
        .patch(
            "apps",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(same.metadata.resource_version, p2.metadata.resource_version);

    // Update with a stale resourceVersion: 409 with the upstream message.
    let mut stale = created.clone();
    stale.data["spec"]["path"] = json!("./other");
    let e = api_err(
        api.replace("apps", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
    assert_eq!(e.reason, "Conflict");
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on kustomizations.kustomize.toolkit.fluxcd.io \"apps\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // With the current resourceVersion it succeeds.
    let mut fresh = api.get("apps").await.unwrap();
    fresh.data["spec"]["path"] = json!("./other");
    let upd = api
        .replace("apps", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_eq!(upd.metadata.generation, Some(3));

    // AlreadyExists and NotFound.
    let e = api_err(
        api.create(&PostParams::default(), &ks("apps"))
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    let e = api_err(api.get("nope").await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        e.message,
        "kustomizations.kustomize.toolkit.fluxcd.io \"nope\" not found"
    );
    // Missing name: 422 Invalid.
    let mut noname = ks("");
    noname.metadata.name = None;
    let e = api_err(
        api.create(&PostParams::default(), &noname)
            .await
            .unwrap_err(),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .contains("metadata.name: Required value: name or generateName is required"),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_subresource_separates_spec_and_status() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let api = ks_api(&c);
    api.create(&PostParams::default(), &ks("apps"))
        .await
        .unwrap();
    let st = api
        .patch_status(
            "apps",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"observedGeneration": 1}, "spec": {"path": "./ignored"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["observedGeneration"], 1);
    assert_eq!(
        st.data["spec"]["path"], "./apps",
        "status writes ignore spec"
    );
    assert_eq!(
        st.metadata.generation,
        Some(1),
        "status writes keep generation"
    );
    // Main-resource writes ignore status.
    let m = api
        .patch(
            "apps",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(m.data["status"]["observedGeneration"], 1);
    // replace_status with a stale resourceVersion: 409.
    let mut stale = st.clone();
    api.patch(
        "apps",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    stale.data["status"]["observedGeneration"] = json!(2);
    let e = api_err(
        api.replace_status("apps", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_selectors_and_pagination() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let api = ks_api(&c);
    for i in 0..7 {
        let mut o = ks(&format!("ks-{i}"));
        o.metadata.labels = Some([("wave".to_string(), (i % 2).to_string())].into());
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    let l = api
        .list(&ListParams::default().labels("wave=1"))
        .await
        .unwrap();
    let names: Vec<String> = l
        .items
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["ks-1", "ks-3", "ks-5"]);
    let l = api
        .list(&ListParams::default().fields("metadata.name=ks-4"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    let e = api_err(
        api.list(&ListParams::default().fields("spec.path=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 400);
    assert_eq!(e.message, "field label not supported: spec.path");

    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    loop {
        let page = api.list(&lp).await.unwrap();
        seen.extend(page.items.iter().map(|o| o.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => {
                if seen.len() == 3 {
                    assert_eq!(page.metadata.remaining_item_count, Some(4));
                }
                lp = lp.continue_token(&c)
            }
            _ => break,
        }
    }
    assert_eq!(seen.len(), 7);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_semantics_and_gone() {
    let twin = Twin::start(TwinOptions {
        history_window: 5,
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    })
    .await
    .unwrap();
    let c = client(&twin).await;
    let api = ks_api(&c);
    let first = api.create(&PostParams::default(), &ks("a")).await.unwrap();
    let rv_a = first.metadata.resource_version.clone().unwrap();

    // From "0": synthetic ADDED for existing objects, then changes.
    let mut w = api
        .watch(&WatchParams::default().timeout(120), "0")
        .await
        .unwrap()
        .boxed();
    match next_event(&mut w).await {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("a")),
        e => panic!("{e:?}"),
    }
    api.create(&PostParams::default(), &ks("b")).await.unwrap();
    match next_event(&mut w).await {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("b")),
        e => panic!("{e:?}"),
    }
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    match next_event(&mut w).await {
        WatchEvent::Modified(o) => assert_eq!(o.data["spec"]["suspend"], true),
        e => panic!("{e:?}"),
    }
    let del = api.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(del.is_right(), "deleted immediately: Status returned");
    let rv_before_delete = twin.store().resource_version();
    match next_event(&mut w).await {
        WatchEvent::Deleted(o) => {
            assert_eq!(o.metadata.name.as_deref(), Some("b"));
            assert_eq!(
                o.metadata.resource_version,
                Some(rv_before_delete.to_string()),
                "DELETED carries the deletion RV"
            );
        }
        e => panic!("{e:?}"),
    }

    // From a specific RV: replays later history.
    let mut w2 = api
        .watch(&WatchParams::default().timeout(120), &rv_a)
        .await
        .unwrap()
        .boxed();
    let mut kinds = Vec::new();
    for _ in 0..3 {
        kinds.push(match next_event(&mut w2).await {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            _ => "OTHER",
        });
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);

    // Bookmarks when allowed.
    let rv_now = twin.store().resource_version().to_string();
    let mut wb = api
        .watch(&WatchParams::default().timeout(120), &rv_now)
        .await
        .unwrap()
        .boxed();
    // kube-rs always asks for bookmarks (allowWatchBookmarks=true).
    match tokio::time::timeout(DEADLINE, wb.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv_now),
        e => panic!("{e:?}"),
    }

    // Compact the history: the old RV is gone (410 Expired, as an ERROR event).
    for i in 0..10 {
        api.create(&PostParams::default(), &ks(&format!("fill-{i}")))
            .await
            .unwrap();
    }
    let mut wg = api
        .watch(&WatchParams::default(), &rv_a)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(DEADLINE, wg.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
            assert!(
                s.message
                    .starts_with(&format!("too old resource version: {rv_a} (")),
                "{}",
                s.message
            );
        }
        e => panic!("{e:?}"),
    }

    // timeoutSeconds ends the stream.
    let mut wt = api
        .watch(
            &WatchParams::default().timeout(1),
            &twin.store().resource_version().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    let ended = tokio::time::timeout(DEADLINE, async {
        while let Some(ev) = wt.next().await {
            ev.unwrap();
        }
    })
    .await;
    assert!(ended.is_ok(), "watch did not end after timeoutSeconds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_delete_and_label_selector_watch() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let api = ks_api(&c);
    let mut o = ks("held");
    o.metadata.finalizers = Some(vec!["finalizers.fluxcd.io".into()]);
    api.create(&PostParams::default(), &o).await.unwrap();
    let rv = twin.store().resource_version().to_string();
    let mut w = api
        .watch(&WatchParams::default().labels("wave=1").timeout(120), &rv)
        .await
        .unwrap()
        .boxed();
    let d = api.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = d.left().expect("object returned while finalizers hold it");
    assert!(marked.metadata.deletion_timestamp.is_some());
    match next_event(&mut w).await {
        WatchEvent::Modified(o) => assert!(o.metadata.deletion_timestamp.is_some()),
        e => panic!("{e:?}"),
    }
    // Leaving the selection shows as DELETED to a selector watch.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"wave": "2"}}})),
    )
    .await
    .unwrap();
    match next_event(&mut w).await {
        WatchEvent::Deleted(o) => assert_eq!(o.metadata.labels.unwrap()["wave"], "2"),
        e => panic!("{e:?}"),
    }
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_err(api.get("held").await.unwrap_err()).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_logs_follow_and_ephemeral_containers() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "app", "image": "web:1"}]}}))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let store = twin.store();
    store.append_pod_log("default", "web", "app", b"hello\n");
    assert_eq!(
        pods.logs("web", &LogParams::default()).await.unwrap(),
        "hello\n"
    );

    // follow: bytes appended later arrive, the stream ends when the log is closed.
    let mut stream = pods
        .log_stream(
            "web",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let reader = tokio::spawn(async move {
        use futures::AsyncReadExt;
        let mut s = String::new();
        stream.read_to_string(&mut s).await.unwrap();
        s
    });
    // Wait until the follow request is being served before appending.
    tokio::time::timeout(DEADLINE, async {
        while twin.request_log().count("get", Some("pods/log")) < 2 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    store.append_pod_log("default", "web", "app", b"world\n");
    store.close_pod_log("default", "web", "app");
    let all = tokio::time::timeout(DEADLINE, reader)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(all, "hello\nworld\n");

    // Ephemeral containers: only via the subresource, and existing ones cannot change.
    let patch =
        json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox:1.36"}]}});
    let p = pods
        .patch_ephemeral_containers("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    assert_eq!(
        p.spec.unwrap().ephemeral_containers.unwrap()[0].name,
        "debugger"
    );
    let change =
        json!({"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox:1.37"}]}});
    let e = api_err(
        pods.patch_ephemeral_containers("web", &PatchParams::default(), &Patch::Strategic(change))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    // Main-resource writes cannot touch them.
    let p = pods
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"ephemeralContainers": null}})),
        )
        .await
        .unwrap();
    assert_eq!(p.spec.unwrap().ephemeral_containers.unwrap().len(), 1);
    // Multi-container pods need `container`.
    let two: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two"},
        "spec": {"containers": [{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &two).await.unwrap();
    let e = api_err(pods.logs("two", &LogParams::default()).await.unwrap_err());
    assert_eq!(e.code, 400);
    assert_eq!(
        e.message,
        "a container name must be specified for pod two, choose one of: [a b]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_and_request_counters() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    twin.reset_requests();
    let id = twin.faults().add(Fault::on_verb(
        "list",
        Some("configmaps"),
        Trigger::Nth(2),
        FaultAction::Status(429),
    ));
    cms.list(&ListParams::default()).await.unwrap();
    // kube-rs retries a 429 (Retry-After: 1), so the second call still succeeds; the log
    // shows the rejected attempt.
    cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(twin.faults().fired(id), 1);
    let statuses: Vec<u16> = twin
        .requests()
        .iter()
        .filter(|r| r.verb == "list")
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [200, 429, 200]);
    assert_eq!(twin.request_log().count("list", Some("configmaps")), 3);
    twin.faults().clear();

    // 500 on every get, then removal.
    let id = twin.faults().add(Fault::on_verb(
        "get",
        None,
        Trigger::Always,
        FaultAction::Status(500),
    ));
    let e = api_err(cms.get("x").await.unwrap_err());
    assert_eq!(e.code, 500);
    twin.faults().remove(id);
    assert_eq!(api_err(cms.get("x").await.unwrap_err()).code, 404);

    // Closed connection: a transport error, not an API status.
    twin.faults().add(Fault::on_verb(
        "get",
        None,
        Trigger::FirstN(1),
        FaultAction::CloseConnection,
    ));
    let err = cms.get("x").await.unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
    twin.faults().clear();

    // Dropped watch: the stream ends without events.
    twin.faults().add(Fault::on_verb(
        "watch",
        Some("configmaps"),
        Trigger::Always,
        FaultAction::DropWatch,
    ));
    let rv = twin.store().resource_version().to_string();
    let mut w = cms
        .watch(&WatchParams::default().timeout(300), &rv)
        .await
        .unwrap()
        .boxed();
    let end = tokio::time::timeout(DEADLINE, w.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none());
    twin.faults().clear();

    // Latency delays but serves.
    twin.faults().add(Fault::on_verb(
        "list",
        None,
        Trigger::FirstN(1),
        FaultAction::Latency(Duration::from_millis(50)),
    ));
    let start = std::time::Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(50));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_load_dump_reset_and_parallel_twins() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("objs.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: wave-1\n  namespace: flux-system\nspec:\n  interval: 5m\nstatus:\n  observedGeneration: 1\n  conditions:\n  - type: Ready\n    status: \"True\"\n    reason: ReconciliationSucceeded\n    message: \"Applied revision: main@sha1:abc\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: apps\ndata:\n  k: v\n",
    )
    .unwrap();
    let a = Twin::start(TwinOptions {
        state: vec![dir.path().to_path_buf()],
        ..Default::default()
    })
    .await
    .unwrap();
    let b = Twin::start(TwinOptions::default()).await.unwrap();
    assert_ne!(a.server_url(), b.server_url());
    let ca = client(&a).await;
    let got = ks_api(&ca).get("wave-1").await.unwrap();
    assert_eq!(
        got.data["status"]["conditions"][0]["reason"], "ReconciliationSucceeded",
        "loaded status kept"
    );
    assert_eq!(got.metadata.generation, Some(1));
    let cb = client(&b).await;
    assert_eq!(
        api_err(ks_api(&cb).get("wave-1").await.unwrap_err()).code,
        404
    );

    let dump = a.dump_yaml();
    assert!(dump.contains("name: wave-1") && dump.contains("name: cfg"));
    let json_dump = a.dump_json();
    assert!(
        json_dump["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["metadata"]["name"] == "cfg")
    );

    // A bad state file names the file and the object.
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: missing\n",
    )
    .unwrap();
    let err = a.load_path(&bad).unwrap_err().to_string();
    assert!(
        err.contains("bad.yaml") && err.contains("namespaces \"missing\" not found"),
        "{err}"
    );

    a.reset();
    assert_eq!(
        api_err(ks_api(&ca).get("wave-1").await.unwrap_err()).code,
        404
    );
    let ns: Value = serde_json::to_value(
        Api::<k8s_openapi::api::core::v1::Namespace>::all(ca.clone())
            .get("flux-system")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(ns["status"]["phase"], "Active");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_not_allowed_and_unknown_paths() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let base = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations";
    for (method, path) in [
        ("PUT", base.to_string()),
        ("POST", format!("{base}/apps")),
        ("DELETE", "/api/v1/namespaces".to_string()),
        ("POST", "/api/v1/namespaces/default/pods/x/log".to_string()),
    ] {
        let req = http::Request::builder()
            .method(method)
            .uri(&path)
            .header("Content-Type", "application/json")
            .body(b"{}".to_vec())
            .unwrap();
        let e = api_err(c.request_text(req).await.unwrap_err());
        assert_eq!(
            (e.code, e.reason.as_str()),
            (405, "MethodNotAllowed"),
            "{method} {path}"
        );
        assert_eq!(
            e.message,
            "the server does not allow this method on the requested resource"
        );
    }
    let req = http::Request::get("/apis/nope.example.com/v1/things")
        .body(Vec::new())
        .unwrap();
    let e = api_err(c.request_text(req).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        e.message,
        "the server could not find the requested resource"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_watcher_streaming_list_and_await_condition() {
    use kube::runtime::{WatchStreamExt, wait::await_condition, watcher};
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flag"}, "data": {"ready": "no"}}))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();

    // Watch-list (sendInitialEvents=true + initial-events-end bookmark), as client-go's
    // WatchListClient and kube-rs streaming_lists use it.
    let mut s = watcher(cms.clone(), watcher::Config::default().streaming_lists())
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(DEADLINE, s.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("flag"));

    let wait = tokio::spawn(await_condition(
        cms.clone(),
        "flag",
        |o: Option<&ConfigMap>| {
            o.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("ready"))
                .is_some_and(|v| v == "yes")
        },
    ));
    // Once the condition's watch is open, flip the flag in-process.
    tokio::time::timeout(DEADLINE, async {
        while twin.request_log().count("watch", Some("configmaps")) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    let gvr = twin.store().gvr("", "v1", "configmaps").unwrap();
    twin.store()
        .patch(
            &gvr,
            Some("default"),
            "flag",
            twin::PatchKind::Merge,
            &json!({"data": {"ready": "yes"}}),
            "test",
        )
        .unwrap();
    let done = tokio::time::timeout(DEADLINE, wait)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(done.unwrap().data.unwrap()["ready"], "yes");
    // The same change reaches the streaming watcher.
    let next = tokio::time::timeout(DEADLINE, s.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(next.data.unwrap()["ready"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_watches_ends_open_streams() {
    let twin = Twin::start(TwinOptions::default()).await.unwrap();
    let c = client(&twin).await;
    let api = ks_api(&c);
    let rv = twin.store().resource_version().to_string();
    let mut w = api
        .watch(
            &WatchParams::default().timeout(300).disable_bookmarks(),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &ks("one"))
        .await
        .unwrap();
    assert!(matches!(next_event(&mut w).await, WatchEvent::Added(_)));
    twin.drop_watches();
    let end = tokio::time::timeout(DEADLINE, w.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "stream ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twin_binary_serves_state_and_dumps_on_interrupt() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(
        state.join("ks.yaml"),
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: infra\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./infra\n",
    )
    .unwrap();
    let kc = dir.path().join("kubeconfig");
    let dump = dir.path().join("dump.yaml");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_twin"))
        .args(["serve", "--state"])
        .arg(&state)
        .arg("--kubeconfig-out")
        .arg(&kc)
        .arg("--dump-out")
        .arg(&dump)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ready = false;
    while let Some(l) = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
    {
        if l.starts_with("kubeconfig: ") {
            ready = true;
            break;
        }
    }
    assert!(ready);
    let out = tokio::process::Command::new("/usr/bin/kubectl")
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["get", "ks", "-n", "flux-system", "-o", "name"])
        .output()
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "kustomization.kustomize.toolkit.fluxcd.io/infra"
    );
    // SIGINT (Ctrl-C) to the child we started: it dumps the store and exits 0.
    let pid = child.id().unwrap().to_string();
    let st = tokio::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .await
        .unwrap();
    assert!(st.success());
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    let dumped = std::fs::read_to_string(&dump).unwrap();
    assert!(dumped.contains("name: infra") && dumped.contains("kind: Kustomization"));
}
