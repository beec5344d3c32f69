//! The twin's integration tests, one binary (one link): each module is one area.
mod clusters_render;
mod git_server;
mod podexec_runtime;
