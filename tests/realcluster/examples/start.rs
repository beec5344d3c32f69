//! Starts a cluster N times, one after another, and prints how long each start took (the
//! harness's "up in" line gives the steps): `cargo run -p realcluster --example start -- [N]
//! [--all] [--logs DIR]` (`--all`: also image-reflector-, image-automation- and helm-controller;
//! `--logs`: copy each cluster's logs to `DIR/start-<i>`). Measures the
//! control-plane start (issue 14: goal <= 15 s on a 2-core machine); note the load beside it.

fn main() {
    let mut n = 3usize;
    let mut all = false;
    let mut keep: Option<std::path::PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--all" => all = true,
            "--logs" => keep = args.next().map(Into::into),
            s => match s.parse() {
                Ok(v) => n = v,
                Err(_) => {
                    eprintln!("usage: start [N] [--all] [--logs DIR]");
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
