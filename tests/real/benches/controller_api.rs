//! cluster-loop-controller against the real API server at fleet scale (issue 41 item 7):
//! `cargo bench --workspace --bench controller_api` (the bench profile's controller binary;
//! `CLUSTER_LOOP_BENCH_SIZES=300` for one size; default `300,3000`).
//!
//! For each size N, one real cluster (real kube-apiserver and etcd, the real source- and
//! kustomize-controller) holds N Kustomizations of one GitRepository, suspended (the real
//! kustomize-controller skips them; the cluster-loop controller watches and diagnoses every
//! one, class `suspended`). The controller runs as a process, as in the cluster, watching all
//! of them through the harness's request-logging proxy ([`realcluster::proxy::FaultProxy`]).
//!
//! Measured:
//! - **held check to Event** (criterion, `iter_custom`): a new Kustomization whose health check
//!   waits on a kind the cluster does not serve (the real kustomize-controller holds it to its
//!   5 s timeout); from the moment a watch on the API shows the real controller's
//!   `Reconciling` "Running health checks" to the moment a watch shows cluster-loop's
//!   `HealthCheckInFlight` Event on it. Both moments are seen by one client, so the figure is
//!   what an operator watching the API waits. Printed also as p50/p90/p99/max of every
//!   iteration.
//! - **start**: the first lists and diagnoses (until /diagnoses lists all N) with their
//!   requests, then the first Events (one per Kustomization first seen in a class other than
//!   healthy: here all N, suspended), until `cluster_loop_events_total` holds for 10 s.
//! - **steady state**, after that: the API requests it makes in 60 s (watches only: a number
//!   above the watch renewals is polling), its resident memory (VmRSS, and the peak VmHWM) and
//!   its CPU seconds in those 60 s (`/proc/<pid>/stat` utime + stime).
//!
//! Not timed tests: nothing here asserts a time; the figures go to docs/controller.md with
//! the command and the date.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, SamplingMode};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::runtime::watcher;
use realcluster::proxy::FaultProxy;
use realcluster::{Cluster, ClusterOptions, FLUX_NS};
use serde_json::{Value, json};

/// The controller binary: `CLUSTER_LOOP_BENCH_CONTROLLER`, else the one of this build's
/// profile (tests/real/build.rs: the profile directory; `cargo bench` builds the bench
/// profile's).
fn controller_bin() -> String {
    std::env::var("CLUSTER_LOOP_BENCH_CONTROLLER")
        .unwrap_or_else(|_| concat!(env!("REAL_BIN_DIR"), "/cluster-loop-controller").to_string())
}
/// The label on the held-check Kustomizations (the suspended ones carry another value).
const ROLE: &str = "cluster-loop.bench/role";

/// First-seen moments per Kustomization name: the real controller's "Running health checks",
/// and cluster-loop's HealthCheckInFlight Event.
#[derive(Default)]
struct Seen {
    held: HashMap<String, Instant>,
    event: HashMap<String, Instant>,
}

fn kustomizations() -> ApiResource {
    ApiResource {
        group: "kustomize.toolkit.fluxcd.io".into(),
        version: "v1".into(),
        api_version: "kustomize.toolkit.fluxcd.io/v1".into(),
        kind: "Kustomization".into(),
        plural: "kustomizations".into(),
    }
}

fn events() -> ApiResource {
    ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    }
}

/// Watches the held-check Kustomizations and cluster-loop's Events in flux-system, recording
/// when each is first seen.
fn watch(client: kube::Client, seen: Arc<Mutex<Seen>>) {
    let ks: Api<DynamicObject> = Api::namespaced_with(client.clone(), FLUX_NS, &kustomizations());
    let s = seen.clone();
    tokio::spawn(async move {
        let cfg = watcher::Config::default().labels(&format!("{ROLE}=held"));
        let mut w = watcher::watcher(ks, cfg).boxed();
        while let Some(Ok(ev)) = w.next().await {
            let objs = match ev {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => vec![o],
                _ => continue,
            };
            for o in objs {
                let v = serde_json::to_value(&o).unwrap_or_default();
                let running = v["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c["type"] == "Reconciling"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.starts_with("Running health checks"))
                    });
                if running && let Some(n) = o.metadata.name {
                    s.lock().unwrap().held.entry(n).or_insert_with(Instant::now);
                }
            }
        }
    });
    let evs: Api<DynamicObject> = Api::namespaced_with(client, FLUX_NS, &events());
    tokio::spawn(async move {
        let mut w = watcher::watcher(evs, watcher::Config::default()).boxed();
        while let Some(Ok(ev)) = w.next().await {
            let o = match ev {
                watcher::Event::Apply(o) | watcher::Event::InitApply(o) => o,
                _ => continue,
            };
            let v = serde_json::to_value(&o).unwrap_or_default();
            if v["reportingController"] == "cluster-loop"
                && v["reason"] == "HealthCheckInFlight"
                && let Some(n) = v["regarding"]["name"].as_str()
            {
                seen.lock()
                    .unwrap()
                    .event
                    .entry(n.to_string())
                    .or_insert_with(Instant::now);
            }
        }
    });
}

/// A Kustomization of GitRepository `bench`: suspended, or (`held`) with a health check on a
/// kind the cluster does not serve and a 5 s timeout.
fn kustomization(name: &str, held: bool) -> Value {
    let mut spec = json!({"interval": "100h", "path": "./", "prune": false,
        "sourceRef": {"kind": "GitRepository", "name": "bench"}});
    if held {
        spec["timeout"] = json!("5s");
        spec["healthChecks"] = json!([{"apiVersion": "external-secrets.io/v1beta1",
            "kind": "ExternalSecret", "name": "db-creds", "namespace": "default"}]);
    } else {
        spec["suspend"] = json!(true);
    }
    json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
        "metadata": {"name": name, "namespace": FLUX_NS,
            "labels": {ROLE: if held { "held" } else { "member" }}},
        "spec": spec})
}

/// A running controller: its process and the metrics address from its JSON log line.
struct Controller {
    child: Child,
    metrics: String,
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_controller(kubeconfig: &std::path::Path) -> Controller {
    let bin = controller_bin();
    eprintln!("controller_api: controller {bin}");
    let mut child = Command::new(&bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{bin}: {e} (build it: cargo bench --workspace --bench controller_api)")
        });
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && let Some(m) = v["metrics"].as_str()
            {
                let _ = tx.send(m.to_string());
            }
        }
    });
    let metrics = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the controller printed no 'serving' line");
    Controller { child, metrics }
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out.split_once("\r\n\r\n")?.1.to_string())
}

/// `/proc/<pid>/status` field `key` in KiB.
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|r| r.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// utime + stime of `pid` in seconds (100 ticks per second).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(close) = stat.rfind(')') else {
        return 0.0;
    };
    let f: Vec<&str> = stat[close + 2..].split(' ').collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (n(11) + n(12)) / 100.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn bench_size(crit: &mut Criterion, n: usize) {
    eprintln!("controller_api: starting a real cluster for {n} Kustomizations");
    let c = Cluster::start(ClusterOptions::default()).expect("the real cluster starts");
    let rt = tokio::runtime::Runtime::new().unwrap();
    c.fleet(
        "bench",
        &[(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench\n  namespace: default\ndata:\n  v: \"1\"\n",
        )],
        "  interval: 100h\n  path: ./\n  prune: false\n",
    )
    .expect("the bench fleet");
    // N suspended Kustomizations, created in chunks (kubectl create: one POST each).
    let t = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let docs: Vec<String> = chunk
            .iter()
            .map(|i| kustomization(&format!("member-{i:05}"), false).to_string())
            .collect();
        c.kubectl_with_stdin(&["create", "-f", "-"], &docs.join("\n"))
            .expect("create the suspended Kustomizations");
    }
    eprintln!(
        "controller_api: {n} Kustomizations created in {:.1?}",
        t.elapsed()
    );

    let proxy = rt.block_on(FaultProxy::start(&c)).expect("the proxy");
    let started = Instant::now();
    let ctl = start_controller(proxy.kubeconfig());
    // Ready: /diagnoses lists every Kustomization (the first lists and diagnoses done).
    loop {
        let doc: Value = http_get(&ctl.metrics, "/diagnoses")
            .and_then(|b| serde_json::from_str(&b).ok())
            .unwrap_or_default();
        if doc["items"].as_array().map_or(0, Vec::len) > n {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the controller never listed {n} Kustomizations"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let first = started.elapsed();
    let first_requests = proxy.requests().len();
    // The Events of the first diagnosis: one per Kustomization first seen in a class other
    // than healthy (here every one: suspended), written at the Recorder's pace. Steady state
    // starts once their count holds for 10 s.
    let events_total = || -> u64 {
        http_get(&ctl.metrics, "/metrics")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("cluster_loop_events_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let (mut last, mut held_since) = (events_total(), Instant::now());
    while held_since.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(500));
        let now = events_total();
        if now != last {
            (last, held_since) = (now, Instant::now());
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "the first Events never ended ({last} so far)"
        );
    }
    let startup_events = last;
    let startup = started.elapsed();
    proxy.reset_requests();
    let pid = ctl.child.id();
    let cpu0 = cpu_secs(pid);
    let window = Duration::from_secs(60);
    std::thread::sleep(window);
    let cpu = cpu_secs(pid) - cpu0;
    let reqs = proxy.requests();
    let mut by_kind: HashMap<String, usize> = HashMap::new();
    for r in &reqs {
        let watch = r.path.contains("watch=true") || r.path.contains("watch=1");
        let path = r.path.split('?').next().unwrap_or("");
        *by_kind
            .entry(format!(
                "{} {path}{}",
                r.method,
                if watch { " (watch)" } else { "" }
            ))
            .or_default() += 1;
    }
    let (rss, hwm) = (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"));

    // Held checks: latency from the real controller's "Running health checks" to the Event.
    let client = rt.block_on(c.client()).expect("client");
    let seen: Arc<Mutex<Seen>> = Arc::default();
    {
        let _g = rt.enter();
        watch(client.clone(), seen.clone());
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client, FLUX_NS, &kustomizations());
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let mut next = 0usize;
    let mut group = crit.benchmark_group("controller_api");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(1));
    group.bench_with_input(BenchmarkId::new("held_check_to_event", n), &n, |b, _| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let name = format!("held-{next:04}");
                next += 1;
                let obj: DynamicObject =
                    serde_json::from_value(kustomization(&name, true)).unwrap();
                rt.block_on(api.create(&PostParams::default(), &obj))
                    .expect("create a held Kustomization");
                let until = Instant::now() + Duration::from_secs(120);
                let lat = loop {
                    {
                        let s = seen.lock().unwrap();
                        if let (Some(h), Some(e)) = (s.held.get(&name), s.event.get(&name)) {
                            break e.saturating_duration_since(*h);
                        }
                    }
                    assert!(
                        Instant::now() < until,
                        "{name}: no held check and HealthCheckInFlight Event within 120 s"
                    );
                    std::thread::sleep(Duration::from_millis(5));
                };
                let _ = rt.block_on(api.delete(&name, &DeleteParams::background()));
                latencies.lock().unwrap().push(lat);
                total += lat;
            }
            total
        })
    });
    group.finish();

    let mut l = latencies.lock().unwrap().clone();
    l.sort();
    println!(
        "\ncontroller_api N={n}: held check to Event over {} checks: p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        l.len(),
        percentile(&l, 0.50),
        percentile(&l, 0.90),
        percentile(&l, 0.99),
        l.last().copied().unwrap_or_default()
    );
    println!(
        "controller_api N={n}: first lists and diagnoses of all {n} in {first:.1?} ({first_requests} requests); {startup_events} first Events written by {startup:.1?}; then steady state over {}s: {} requests, {:.2} CPU-s ({:.1}% of one core), VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        window.as_secs(),
        reqs.len(),
        cpu,
        cpu / window.as_secs_f64() * 100.0,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    // The controller's own account: diagnoses run and their duration (whole fleet each).
    let metrics = http_get(&ctl.metrics, "/metrics").unwrap_or_default();
    for l in metrics
        .lines()
        .filter(|l| l.starts_with("cluster_loop_diagnos") && !l.contains("_bucket"))
    {
        println!("  {l}");
    }
    let mut kinds: Vec<_> = by_kind.into_iter().collect();
    kinds.sort();
    for (k, v) in kinds {
        println!("  {v:5}  {k}");
    }
    drop(ctl);
    drop(proxy);
}

fn main() {
    let sizes: Vec<usize> = std::env::var("CLUSTER_LOOP_BENCH_SIZES")
        .unwrap_or_else(|_| "300,3000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    // `cargo test --benches` runs benches once in test mode: the real cluster is what a
    // measurement needs, so test mode only checks that the bench builds.
    if std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench") {
        eprintln!(
            "controller_api: a measurement on a real cluster; run it with cargo bench --workspace --bench controller_api"
        );
        return;
    }
    let mut crit = Criterion::default().configure_from_args();
    for n in sizes {
        bench_size(&mut crit, n);
    }
    crit.final_summary();
}
