//! Starts a cluster N times, one after another, and prints how long each start took (the
//! harness's "up in" line gives the steps): `cargo run -p realcluster --example start -- [N]
//! [--all] [--logs DIR]` (`--all`: also image-reflector-, image-automation- and helm-controller;
//! `--logs`: copy each cluster's logs to `DIR/start-<i>`; `--idle SECS`: after each start and
//! 15 s to settle, the CPU seconds each process of the cluster spends in SECS of idling, by
//! command name, from `/proc/<pid>/stat`). Measures the control-plane start (issue 14: goal <=
//! 15 s on a 2-core machine) and what an idle cluster costs; note the load beside it.

use std::collections::HashMap;

/// CPU seconds (utime + stime, at 100 ticks/s) of every descendant of this process, summed by
/// command name (`/proc/<pid>/stat` fields 2, 4, 14 and 15).
fn cpu_by_command() -> HashMap<String, f64> {
    let mut procs: Vec<(u32, u32, String, f64)> = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_owned();
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        procs.push((pid, num(1) as u32, comm, (num(11) + num(12)) / 100.0));
    }
    let parent: HashMap<u32, u32> = procs.iter().map(|p| (p.0, p.1)).collect();
    let me = std::process::id();
    let mut out = HashMap::new();
    for (pid, _, comm, secs) in &procs {
        let mut p = *pid;
        while p > 1 && p != me {
            p = parent.get(&p).copied().unwrap_or(0);
        }
        if p == me {
            *out.entry(comm.clone()).or_insert(0.0) += secs;
        }
    }
    out
}

fn main() {
    let mut n = 3usize;
    let mut all = false;
    let mut keep: Option<std::path::PathBuf> = None;
    let mut idle: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--all" => all = true,
            "--logs" => keep = args.next().map(Into::into),
            "--idle" => idle = args.next().and_then(|v| v.parse().ok()),
            s => match s.parse() {
                Ok(v) => n = v,
                Err(_) => {
                    eprintln!("usage: start [N] [--all] [--logs DIR] [--idle SECS]");
                    std::process::exit(2);
                }
            },
        }
    }
    let opts = realcluster::ClusterOptions {
        image_reflector_controller: all,
        image_automation_controller: all,
        helm_controller: all,
        ..realcluster::ClusterOptions::default()
    };
    for i in 1..=n {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let t = std::time::Instant::now();
        match realcluster::Cluster::start(opts.clone()) {
            Ok(c) => {
                println!(
                    "start {i}/{n}: {:.1}s (load before: {})",
                    t.elapsed().as_secs_f64(),
                    load.split_whitespace()
                        .take(3)
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                if let Some(secs) = idle {
                    std::thread::sleep(std::time::Duration::from_secs(15));
                    let before = cpu_by_command();
                    std::thread::sleep(std::time::Duration::from_secs(secs));
                    let after = cpu_by_command();
                    let mut used: Vec<(String, f64)> = after
                        .iter()
                        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
                        .collect();
                    used.sort_by(|a, b| b.1.total_cmp(&a.1));
                    let total: f64 = used.iter().map(|u| u.1).sum();
                    println!(
                        "idle {secs}s: {total:.2} CPU-s ({:.1} % of a core)",
                        total * 100.0 / secs as f64
                    );
                    for (comm, v) in used.iter().filter(|u| u.1 > 0.0) {
                        println!("  {comm:<24} {v:>6.2} CPU-s");
                    }
                }
                if let Some(k) = &keep {
                    // The cluster's logs, copied before the drop removes them.
                    let to = k.join(format!("start-{i}"));
                    let st = std::process::Command::new("cp")
                        .arg("-a")
                        .arg(c.dir().join("logs"))
                        .arg(&to)
                        .status();
                    if !st.is_ok_and(|s| s.success()) {
                        eprintln!("could not copy the logs to {}", to.display());
                    }
                }
                drop(c);
            }
            Err(e) => {
                eprintln!("start {i}/{n} failed: {e}");
                std::process::exit(1);
            }
        }
    }
}
