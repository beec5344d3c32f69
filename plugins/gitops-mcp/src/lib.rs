//! `kubectl gitops mcp`: the suite's diagnoses and proofs as Model Context Protocol tools for
//! AI agents, built on the official Rust SDK (`rmcp`). It calls the plugins' own flows in
//! process; it never runs their binaries.
//!
//! Modules, in reading order:
//! - [`serve`]: the command line (`--allow-write`, `--allow-context-switch`, `--repo`, kubectl's
//!   cluster flags) and the stdio server's life (waits for flows in flight before it exits);
//! - [`http`]: the streamable HTTP transport (`--http ADDR`, loopback only by default);
//! - [`session`]: what is fixed at start (pinned context, repository root, permissions);
//! - [`context`]: pinning and checking kubeconfig contexts;
//! - [`tools`]: one method per MCP tool, each its plugin's argument vector;
//! - [`flow`]: running a plugin flow in process (captured `-o json`, progress, cancellation).
#![warn(missing_docs)]

pub mod context;
pub mod flow;
pub mod http;
pub mod serve;
pub mod session;
pub mod tools;
