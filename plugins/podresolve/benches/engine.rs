//! Engine throughput: probe-log parsing, Corefile parsing + explain, full report assembly.
//! Run: `cargo bench -p kubectl-podresolve --bench engine`.

use criterion::{Criterion, criterion_group, criterion_main};
use podresolve::corefile::Corefile;
use podresolve::parse::ProbeLog;
use podresolve::report::{ClusterDns, Inputs, ProbeInfo, build};
use podresolve::validate::parse_host;
use podresolve::workstation::WorkstationAnswer;
use std::hint::black_box;

const LOG: &str = include_str!("../tests/fixtures/probe-glibc-busybox.log");
const COREFILE: &str = ".:53 {\n errors\n health\n kubernetes cluster.local in-addr.arpa ip6.arpa {\n  pods insecure\n  fallthrough in-addr.arpa ip6.arpa\n }\n hosts {\n  192.168.2.20 gitea.example.dev\n  fallthrough\n }\n rewrite name suffix .legacy.example. .example.dev.\n forward . /etc/resolv.conf\n cache 30\n}\n";

fn bench(c: &mut Criterion) {
    c.bench_function("parse probe log (10 hosts, busybox)", |b| {
        b.iter(|| ProbeLog::parse(black_box(LOG)))
    });
    let cf = Corefile::parse(COREFILE).unwrap();
    c.bench_function("corefile parse", |b| {
        b.iter(|| Corefile::parse(black_box(COREFILE)))
    });
    c.bench_function("corefile explain", |b| {
        b.iter(|| cf.explain(black_box("gitea.example.dev.team.svc.cluster.local."), 53))
    });
    let log = ProbeLog::parse(LOG);
    let hosts: Vec<_> = ["gitea.example.dev", "registry", "nosuch.example.dev"]
        .iter()
        .map(|h| parse_host(h).unwrap())
        .collect();
    let cluster = ClusterDns {
        corefile: Some(Ok(cf.clone())),
        kube_dns_ips: vec!["127.0.0.77".into()],
        nodelocal_corefile: None,
        kube_system_services: None,
        nodelocal_daemonset: None,
    };
    c.bench_function("report build (3 hosts)", |b| {
        b.iter(|| {
            build(Inputs {
                log: &log,
                hosts: &hosts,
                cluster: &cluster,
                workstation: vec![
                    WorkstationAnswer {
                        addresses: vec![],
                        error: None,
                        from_hosts_file: None
                    };
                    3
                ],
                expect: None,
                probe: ProbeInfo::default(),
            })
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
