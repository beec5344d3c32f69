//! The probe: the shared probe machinery ([`cluster_loop::probe`]: the fixed script, the
//! Job/Pod/ephemeral-container spec) with podresolve's names.

pub use cluster_loop::probe::{
    Carrier, DEFAULT_IMAGE, GIT_IMAGE, ProbeOptions, ProbeOwner, SCRIPT, SourcePod, TOOLS_IMAGE,
    TTL_AFTER_FINISHED_SECS, new_run_id,
};

/// podresolve owns its probes: `podresolve-<run id>`, labels and field manager below.
pub const OWNER: ProbeOwner = ProbeOwner::PODRESOLVE;
/// `app.kubernetes.io/managed-by` value on every object we create.
pub const MANAGED_BY: &str = "kubectl-podresolve";
/// Label key carrying the run id (one per invocation).
pub const RUN_LABEL: &str = "podresolve.cluster-loop.dev/run";
/// Field manager for every write (brief: mutations use the plugin's own manager name).
pub const FIELD_MANAGER: &str = "kubectl-podresolve";
/// Unprivileged UID/GID (`nobody`).
pub const PROBE_UID: i64 = cluster_loop::probe::PROBE_UID;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_owner() {
        assert_eq!(OWNER.managed_by(), MANAGED_BY);
        assert_eq!(OWNER.run_label(), RUN_LABEL);
        assert_eq!(OWNER.field_manager(), FIELD_MANAGER);
    }
}
