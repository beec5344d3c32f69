//! Flux controller models: source-controller ([`source`]) and kustomize-controller
//! ([`kustomize`]), with the pieces they share: Go durations, post-build substitution,
//! the twin's own kstatus, conditions, events and a controller-runtime style work queue.
//!
//! Every nominal duration (spec.interval, timeouts, the 5s health-check poll, the 30s
//! dependency requeue, retry back-off) is multiplied by [`ModelOptions::time_scale`] before
//! the models wait on it, while conditions and events still print the nominal values
//! (`with a timeout of 9m30s`). Elapsed times that upstream prints (`health check failed
//! after 9m30.004s`) are real elapsed time divided by the scale.

pub mod cluster;
pub mod conditions;
pub mod duration;
pub mod kstatus;
pub mod kustomize;
pub mod queue;
pub mod source;
pub mod subst;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cluster::ClusterRef;

/// Settings shared by the models.
#[derive(Debug, Clone)]
pub struct ModelOptions {
    /// Real time per nominal time: `0.01` runs a 10m interval in 6s. Must be > 0.
    pub time_scale: f64,
    /// Where source-controller keeps one checkout per revision.
    pub storage_dir: PathBuf,
    /// Extra environment for every `git` the source model runs.
    pub git_env: Vec<(String, String)>,
    /// Nominal health-check poll interval (kustomize-controller: 5s).
    pub health_poll: Duration,
}

impl ModelOptions {
    /// Options with `time_scale` and a storage directory.
    pub fn new(time_scale: f64, storage_dir: PathBuf) -> Self {
        ModelOptions {
            time_scale,
            storage_dir,
            git_env: Vec::new(),
            health_poll: Duration::from_secs(5),
        }
    }

    /// Nominal -> real duration.
    pub fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.time_scale.max(1e-6))
    }

    /// Real -> nominal duration (for printed elapsed times).
    pub fn unscaled(&self, d: Duration) -> Duration {
        d.div_f64(self.time_scale.max(1e-6))
    }
}

/// The running Flux models.
pub struct FluxModels {
    /// source-controller.
    pub source: Arc<source::SourceController>,
    /// kustomize-controller.
    pub kustomize: Arc<kustomize::KustomizeController>,
}

impl FluxModels {
    /// Starts both models against `cluster` (call inside a tokio runtime).
    pub fn start(cluster: ClusterRef, opts: ModelOptions) -> FluxModels {
        let opts = Arc::new(opts);
        FluxModels {
            source: source::SourceController::start(cluster.clone(), opts.clone()),
            kustomize: kustomize::KustomizeController::start(cluster, opts),
        }
    }

    /// Stops both models (in-flight runs are abandoned without further writes).
    pub fn stop(&self) {
        self.source.stop();
        self.kustomize.stop();
    }
}
