//! The twin's integration tests, one binary (one link, and wait-bound tests of different
//! areas overlap): each module is one area.
mod api_kube;
mod api_kubectl;
mod clusters_render;
mod git_server;
mod podexec_model;
mod service_table;
