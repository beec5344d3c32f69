//! fleet-diff: fleetlint's build verdicts against the real kustomize-controller, for any fleet
//! checkout (see the `fleetdiff` library and docs/fleetlint.md "Agreement with the real
//! controller"). Starts a real cluster of its own (tests/realcluster).
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

/// Build every Flux Kustomization fleetlint finds in the fleet checkouts with the real
/// kustomize-controller on a real cluster started for this run, and compare each outcome with
/// fleetlint's build verdict. Nothing of the fleets is applied: the Kustomizations apply as a
/// ServiceAccount with no rights.
///
/// Examples:
///   cargo fleet-diff ~/src/home-ops
///   cargo fleet-diff fleets/* -o json > diff.json
///   cargo fleet-diff --controller v1.7.3 ~/src/home-ops
///
/// Exit codes: 0 every compared Kustomization agrees, 1 a disagreement, 2 usage, 3 the cluster
/// or its Git server failed.
#[derive(Parser, Debug)]
#[command(name = "fleet-diff", verbatim_doc_comment)]
struct Cli {
    /// Fleet checkouts (directories of Git repositories).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Output: table or json (stdout).
    #[arg(short = 'o', long, default_value = "table", value_parser = ["table", "json"])]
    output: String,
    /// kustomize-controller release to build with.
    #[arg(long, default_value = realcluster::bins::KC_CURRENT, value_parser = [realcluster::bins::KC_CURRENT, realcluster::bins::KC_V17])]
    controller: String,
    /// How long to wait for every outcome (seconds).
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Table: every row, also plain agreements that the build passes.
    #[arg(long)]
    all: bool,
}

fn main() {
    let cli = Cli::parse();
    let mut fleets = Vec::new();
    for p in &cli.paths {
        if let Some(problem) = cluster_loop::repo::directory_problem(p) {
            eprintln!("fleet-diff: {problem} (give fleet checkouts)");
            std::process::exit(2);
        }
        let name = std::fs::canonicalize(p)
            .ok()
            .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| p.display().to_string());
        fleets.push(fleetdiff::FleetInput {
            name,
            path: p.clone(),
        });
    }
    let opts = fleetdiff::Options {
        timeout: Duration::from_secs(cli.timeout),
        controller: cli.controller.clone(),
        ..Default::default()
    };
    eprintln!(
        "fleet-diff: starting a real cluster (kustomize-controller {})",
        cli.controller
    );
    let cluster = match realcluster::Cluster::start(realcluster::ClusterOptions {
        kustomize_controller: cli.controller.clone(),
        ..Default::default()
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fleet-diff: {e}");
            std::process::exit(3);
        }
    };
    let report = match fleetdiff::run(&cluster, &fleets, &opts, &|l| eprintln!("fleet-diff: {l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fleet-diff: {e}");
            std::process::exit(3);
        }
    };
    match cli.output.as_str() {
        "json" => println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
        _ => print!("{}", fleetdiff::table(&report, cli.all)),
    }
    std::process::exit(i32::from(report.summary.disagree > 0));
}
