//! The twin's integration tests, one binary (one link, and wait-bound tests of different
//! areas overlap): each module is one area.
mod api_kube;
mod api_kubectl;
mod clusters_render;
mod flux_models;
mod flux_sources;
mod git_server;
mod podexec_model;
mod podexec_scenario;
mod scenario_bare_tag;
mod scenario_cancel_gate;
mod scenario_fleet;
mod scenario_sources;
mod service_table;
mod workload_models;
