//! twin::git benchmarks (`cargo bench -p twin --bench git_server`): what one real `git`
//! client operation costs against the twin's Git server, end to end (process start, TLS,
//! smart-HTTP round trips, `git http-backend` CGI per request).
//!
//! - `ls_remote/http`, `ls_remote/https`: `git ls-remote` of a one-commit repository.
//! - `ls_remote/https_basic_auth`: the same with basic auth checked on every request.
//! - `clone/https_small`: `git clone` of a repository of 20 small files.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use twin::git::{Change, GitServer, GitServerOptions};

fn git(cwd: &Path, args: &[&str], ca: &Path) {
    let out = Command::new("git")
        .args(args)
        .current_dir(cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", cwd)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_SSL_CAINFO", ca)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn bench(c: &mut Criterion) {
    let server = GitServer::start(GitServerOptions::default()).expect("start");
    server.create_repo("org/fleet", "main").unwrap();
    let files: Vec<Change> = (0..20)
        .map(|i| {
            Change::write(
                format!("apps/app-{i}.yaml"),
                format!("kind: ConfigMap # {i}\n"),
            )
        })
        .collect();
    server
        .commit_on("org/fleet", "main", &files, "fleet")
        .unwrap();
    server.create_repo("org/private", "main").unwrap();
    server
        .commit_on("org/private", "main", &files, "fleet")
        .unwrap();
    server.set_auth("org/private", "flux", &["tok"]).unwrap();
    let work = tempfile::tempdir().unwrap();
    let ca = server.ca_file().to_owned();
    let private = format!("https://flux:tok@{}/org/private.git", server.https_addr());

    let mut g = c.benchmark_group("ls_remote");
    g.sample_size(20).measurement_time(Duration::from_secs(5));
    g.bench_function("http", |b| {
        b.iter(|| {
            git(
                work.path(),
                &["ls-remote", &server.url_http("org/fleet")],
                &ca,
            )
        })
    });
    g.bench_function("https", |b| {
        b.iter(|| {
            git(
                work.path(),
                &["ls-remote", &server.url_https("org/fleet")],
                &ca,
            )
        })
    });
    g.bench_function("https_basic_auth", |b| {
        b.iter(|| git(work.path(), &["ls-remote", &private], &ca))
    });
    g.finish();

    let mut g = c.benchmark_group("clone");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    let mut n = 0u64;
    g.bench_function("https_small", |b| {
        b.iter(|| {
            n += 1;
            let dest = format!("c{n}");
            git(
                work.path(),
                &["clone", "--quiet", &server.url_https("org/fleet"), &dest],
                &ca,
            );
            std::fs::remove_dir_all(work.path().join(&dest)).unwrap();
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
