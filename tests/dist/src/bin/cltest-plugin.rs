//! `kubectl cltest`: a test plugin wired to `cluster_loop::completion` the way every plugin of
//! the suite is: `handle` first thing in `main`, with the plugin's clap command and a closure
//! that says what each positional argument is.
use clap::{CommandFactory, Parser, ValueEnum};
use cluster_loop::completion::{self, ObjectKind, Want};

/// Output formats, as every plugin of the suite offers them.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Output {
    /// Human table.
    Table,
    /// JSON on stdout.
    Json,
    /// YAML on stdout.
    Yaml,
}

/// kubectl cltest: completion test plugin (KUSTOMIZATION then files).
#[derive(Parser, Debug)]
#[command(name = "kubectl-cltest", version)]
struct Cli {
    /// Kustomization to act on, as ks/NAME.
    target: Option<String>,
    /// Files to read.
    files: Vec<std::path::PathBuf>,
    /// Path to the kubeconfig file.
    #[arg(long, value_hint = clap::ValueHint::FilePath)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    context: Option<String>,
    /// Namespace of the target.
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: Output,
    /// Print what would change, change nothing.
    #[arg(long)]
    dry_run: bool,
}

fn main() {
    if let Some(code) = completion::handle("cltest", Cli::command(), |req| {
        match (req.flag.as_deref(), req.positionals.len()) {
            (None, 0) => Want::Refs(vec![ObjectKind::KUSTOMIZATION]),
            (None, _) => Want::Files,
            _ => Want::Default,
        }
    }) {
        std::process::exit(code);
    }
    let cli = Cli::parse();
    println!("{cli:?}");
}
