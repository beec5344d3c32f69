//! Output: `-o table|json|yaml`, `--color auto|always|never`, tables and styling.
//!
//! Machine output (json/yaml) goes to stdout with a stable shape; progress and logs go to
//! stderr. Color is decided once per stream by [`Painter`]:
//! `--color=always` -> on; `--color=never` -> off; `auto` -> off when `NO_COLOR` is set and
//! non-empty (<https://no-color.org>), off when `TERM=dumb`, else on only if the stream is a
//! terminal (`std::io::IsTerminal`).

use crate::error::{Error, Result};
use clap::{Args, ValueEnum};
use comfy_table::{Attribute, Cell, Color, ContentArrangement, Table};
use owo_colors::OwoColorize;
use serde::Serialize;
use std::io::{IsTerminal, Write};

/// `-o/--output` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    /// Human table (default).
    #[default]
    Table,
    /// Pretty JSON, one document, trailing newline.
    Json,
    /// YAML (serde-saphyr).
    Yaml,
}

impl OutputFormat {
    /// True for json and yaml (machine output: no progress spinner, no color).
    pub fn is_machine(self) -> bool {
        !matches!(self, OutputFormat::Table)
    }
}

/// `--color` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorChoice {
    /// Color when the stream is a terminal and `NO_COLOR` is unset/empty.
    #[default]
    Auto,
    /// Always color (overrides `NO_COLOR`).
    Always,
    /// Never color.
    Never,
}

/// The output flags every plugin flattens in: `#[command(flatten)] output: OutputArgs`.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Output format: table (human), json or yaml (machine, stable shape, on stdout)
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputFormat::Table, value_name = "FORMAT")]
    pub output: OutputFormat,
    /// When to color output: auto (terminal and NO_COLOR unset), always, never
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

impl OutputArgs {
    /// A painter for stdout.
    pub fn stdout_painter(&self) -> Painter {
        Painter::for_stream(self.color, std::io::stdout().is_terminal())
    }

    /// A painter for stderr (progress, logs).
    pub fn stderr_painter(&self) -> Painter {
        Painter::for_stream(self.color, std::io::stderr().is_terminal())
    }
}

/// `n` and `noun`, the noun in the plural unless `n` is 1 (English regular plurals:
/// `count(1, "error")` is `1 error`, `count(3, "error")` is `3 errors`), for summaries.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Decide whether to color, from the choice, the environment and whether the stream is a
/// terminal. `no_color`: the value of `NO_COLOR` if set; `term`: the value of `TERM`.
pub fn decide_color(
    choice: ColorChoice,
    no_color: Option<&str>,
    term: Option<&str>,
    is_tty: bool,
) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            if no_color.is_some_and(|v| !v.is_empty()) {
                return false;
            }
            if term == Some("dumb") {
                return false;
            }
            is_tty
        }
    }
}

/// Styling decided once: every method returns plain text when color is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Painter {
    color: bool,
}

/// Semantic styles for [`Painter::paint`] and [`Painter::cell`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Success (green).
    Ok,
    /// Warning (yellow).
    Warn,
    /// Error / failure (red).
    Err,
    /// De-emphasised (dimmed).
    Dim,
    /// Emphasised (bold).
    Bold,
    /// No styling.
    Plain,
}

impl Painter {
    /// Decide from `choice`, the process environment (`NO_COLOR`, `TERM`) and `is_tty`.
    pub fn for_stream(choice: ColorChoice, is_tty: bool) -> Self {
        let no_color = std::env::var("NO_COLOR").ok();
        let term = std::env::var("TERM").ok();
        Painter {
            color: decide_color(choice, no_color.as_deref(), term.as_deref(), is_tty),
        }
    }

    /// A painter with color forced on or off (tests, machine output).
    pub const fn new(color: bool) -> Self {
        Painter { color }
    }

    /// True when styling is emitted.
    pub fn enabled(&self) -> bool {
        self.color
    }

    /// `text` in `style` (ANSI escapes only when enabled).
    pub fn paint(&self, style: Style, text: &str) -> String {
        if !self.color {
            return text.to_string();
        }
        match style {
            Style::Ok => text.green().to_string(),
            Style::Warn => text.yellow().to_string(),
            Style::Err => text.red().to_string(),
            Style::Dim => text.dimmed().to_string(),
            Style::Bold => text.bold().to_string(),
            Style::Plain => text.to_string(),
        }
    }

    /// Green.
    pub fn ok(&self, text: &str) -> String {
        self.paint(Style::Ok, text)
    }
    /// Yellow.
    pub fn warn(&self, text: &str) -> String {
        self.paint(Style::Warn, text)
    }
    /// Red.
    pub fn err(&self, text: &str) -> String {
        self.paint(Style::Err, text)
    }
    /// Dimmed.
    pub fn dim(&self, text: &str) -> String {
        self.paint(Style::Dim, text)
    }
    /// Bold.
    pub fn bold(&self, text: &str) -> String {
        self.paint(Style::Bold, text)
    }

    /// A table cell in `style`, colored through comfy-table so column widths stay right
    /// (do not put [`Painter::paint`] output in tables: escapes would count as width).
    pub fn cell(&self, style: Style, text: impl ToString) -> Cell {
        let c = Cell::new(text.to_string());
        if !self.color {
            return c;
        }
        match style {
            Style::Ok => c.fg(Color::Green),
            Style::Warn => c.fg(Color::Yellow),
            Style::Err => c.fg(Color::Red),
            Style::Dim => c.add_attribute(Attribute::Dim),
            Style::Bold => c.add_attribute(Attribute::Bold),
            Style::Plain => c,
        }
    }

    /// A kubectl-style table (see [`table`]) whose cell styles are emitted iff this painter
    /// is enabled.
    pub fn table<S: ToString>(&self, headers: &[S]) -> Table {
        let mut t = table(headers);
        if self.color {
            // comfy-table styles cells through crossterm, which drops every color on its own
            // when NO_COLOR is set (leaving empty `ESC[m` codes); the choice was made here
            // already (`--color always` overrides NO_COLOR), so crossterm follows it.
            crossterm::style::force_color_output(true);
            t.enforce_styling();
        } else {
            t.force_no_tty();
        }
        t
    }
}

/// A table shaped like `kubectl get`: no borders, upper-case headers, columns separated by
/// three spaces, no wrapping (long cells stay on one line, as kubectl does).
pub fn table<S: ToString>(headers: &[S]) -> Table {
    let mut t = Table::new();
    t.load_style(comfy_table::presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .force_no_tty()
        .set_header(
            headers
                .iter()
                .map(|h| Cell::new(h.to_string().to_uppercase())),
        );
    for col in t.column_iter_mut() {
        col.set_padding((0, 3));
    }
    t
}

/// Render a table to a string with trailing spaces trimmed from every line and a trailing
/// newline (comfy-table pads the last column).
pub fn render_table(t: &Table) -> String {
    let mut out = String::new();
    for line in t.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Serialize `value` as the machine format: pretty JSON with a trailing newline, or YAML
/// (serde-saphyr). Errors: [`Error::Other`] on serialization failure; `Table` is a usage
/// error (callers print tables themselves).
pub fn to_machine_string(format: OutputFormat, value: &impl Serialize) -> Result<String> {
    match format {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(value)
                .map_err(|e| Error::Other(format!("cannot serialize output as JSON: {e}")))?;
            s.push('\n');
            Ok(s)
        }
        OutputFormat::Yaml => serde_saphyr::to_string(value)
            .map_err(|e| Error::Other(format!("cannot serialize output as YAML: {e}"))),
        OutputFormat::Table => Err(Error::Other(
            "internal: print_machine called with table format".into(),
        )),
    }
}

/// Write [`to_machine_string`] to stdout. A closed pipe (`| head`) is not an error.
pub fn print_machine(format: OutputFormat, value: &impl Serialize) -> Result<()> {
    let s = to_machine_string(format, value)?;
    write_stdout(&s)
}

/// The `-o json|yaml` document of a run that ends without its report (exit 1 when a check
/// cannot even start, exit 3 on a cluster/API error): one shape for every plugin, so a
/// script reading stdout always gets a document:
///
/// ```json
/// {"apiVersion": "unstick.cluster-loop.dev/v1", "kind": "UnstickError", "exitCode": 3,
///  "error": "kustomizations.kustomize.toolkit.fluxcd.io \"nosuch\" not found ..."}
/// ```
///
/// `kind` is `<Plugin>Error` (`UnstickError`, `CutoverError`, `PodResolveError`), `apiVersion`
/// the plugin's report schema, `error` the message also printed on stderr after `error: `.
/// Usage errors (exit 2) print no document: clap reports them before any output format
/// applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorDocument {
    /// The plugin's schema, e.g. `unstick.cluster-loop.dev/v1`.
    pub api_version: &'static str,
    /// `<Plugin>Error`.
    pub kind: &'static str,
    /// The process exit status (1 or 3; never 0 or 2).
    pub exit_code: i32,
    /// What went wrong and what to do: the error's message, without the `error: ` prefix.
    pub error: String,
}

impl ErrorDocument {
    /// The document of `err` for the plugin with schema `api_version` and kind `kind`.
    pub fn of(api_version: &'static str, kind: &'static str, err: &Error) -> Self {
        ErrorDocument {
            api_version,
            kind,
            exit_code: err.exit_code(),
            error: err.to_string(),
        }
    }
}

/// What every plugin's `main` does with an error that ends the run: with `-o json|yaml`
/// and an exit code other than 2 (usage), print the [`ErrorDocument`] on stdout; then
/// `error: MESSAGE` on stderr and exit with the error's code ([`crate::error::exit_with`]).
pub fn exit_with_document(
    format: OutputFormat,
    api_version: &'static str,
    kind: &'static str,
    err: &Error,
) -> ! {
    if format.is_machine() && err.exit_code() != crate::error::EXIT_USAGE {
        let _ = print_machine(format, &ErrorDocument::of(api_version, kind, err));
    }
    crate::error::exit_with(err)
}

/// Write text to stdout, treating a broken pipe as success.
pub fn write_stdout(s: &str) -> Result<()> {
    if let Some(e) = crate::embed::current() {
        e.write(s);
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::io("<stdout>", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        out: OutputArgs,
    }

    #[test]
    fn color_decision() {
        use ColorChoice::*;
        assert!(decide_color(Always, Some("1"), Some("dumb"), false));
        assert!(!decide_color(Never, None, None, true));
        assert!(decide_color(Auto, None, Some("xterm"), true));
        assert!(!decide_color(Auto, None, None, false));
        assert!(!decide_color(Auto, Some("1"), None, true));
        assert!(
            decide_color(Auto, Some(""), None, true),
            "empty NO_COLOR is ignored"
        );
        assert!(!decide_color(Auto, None, Some("dumb"), true));
    }

    #[test]
    fn painter_plain_when_off() {
        let p = Painter::new(false);
        assert_eq!(p.err("x"), "x");
        let p = Painter::new(true);
        assert!(p.err("x").contains("\u{1b}["));
        assert!(p.ok("x").ends_with("x\u{1b}[39m"));
    }

    #[test]
    fn flags_parse() {
        let c = Cli::try_parse_from(["x", "-o", "json", "--color", "never"]).unwrap();
        assert_eq!(c.out.output, OutputFormat::Json);
        assert_eq!(c.out.color, ColorChoice::Never);
        let c = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(c.out.output, OutputFormat::Table);
        assert!(Cli::try_parse_from(["x", "-o", "wide"]).is_err());
    }

    #[test]
    fn kubectl_like_table() {
        let mut t = table(&["name", "ready", "message"]);
        t.add_row(vec!["apps", "False", "health check failed"]);
        t.add_row(vec![
            "infrastructure",
            "True",
            "Applied revision: main@sha1:abc",
        ]);
        let s = render_table(&t);
        assert_eq!(
            s,
            "NAME             READY   MESSAGE\n\
             apps             False   health check failed\n\
             infrastructure   True    Applied revision: main@sha1:abc\n"
        );
        let p = Painter::new(false);
        let mut t = p.table(&["a"]);
        t.add_row(vec![p.cell(Style::Err, "x")]);
        assert_eq!(render_table(&t), "A\nx\n");
    }

    #[test]
    fn machine_formats() {
        #[derive(Serialize)]
        struct R {
            name: &'static str,
            ready: bool,
        }
        let r = R {
            name: "apps",
            ready: true,
        };
        assert_eq!(
            to_machine_string(OutputFormat::Json, &r).unwrap(),
            "{\n  \"name\": \"apps\",\n  \"ready\": true\n}\n"
        );
        assert_eq!(
            to_machine_string(OutputFormat::Yaml, &r).unwrap(),
            "name: apps\nready: true\n"
        );
        assert!(to_machine_string(OutputFormat::Table, &r).is_err());
    }

    #[test]
    fn error_document_has_one_shape_with_the_errors_code_and_message() {
        let e = Error::Other("the cluster said no".into());
        let d = ErrorDocument::of("unstick.cluster-loop.dev/v1", "UnstickError", &e);
        assert_eq!(d.exit_code, e.exit_code());
        assert_eq!(
            to_machine_string(OutputFormat::Json, &d).unwrap(),
            format!(
                "{{\n  \"apiVersion\": \"unstick.cluster-loop.dev/v1\",\n  \"kind\": \"UnstickError\",\n  \"exitCode\": {},\n  \"error\": \"the cluster said no\"\n}}\n",
                e.exit_code()
            )
        );
    }

    #[test]
    fn count_uses_the_singular_for_one_only() {
        assert_eq!(super::count(0u64, "error"), "0 errors");
        assert_eq!(super::count(1u64, "error"), "1 error");
        assert_eq!(super::count(2u64, "warning"), "2 warnings");
    }
}
