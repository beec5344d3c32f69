//! Leader election on a coordination.k8s.io Lease with `kube-lease-manager` (server-side
//! apply on the Lease: two replicas cannot both hold it). Lease `cluster-loop-controller` in the
//! runtime namespace; the identity is the pod's name ($POD_NAME, else the host name) and the
//! process id. The holder renews it before its duration ends (its grace: 5 s, at most a third
//! of the duration); a replica that is not the holder takes it once it expires. Only the holder
//! writes Events and pulls levers; every replica watches, diagnoses and serves metrics (so a
//! takeover starts from the classes already seen, not with an Event per Kustomization).
//! Graceful shutdown releases the Lease ([`Leadership::release`]).
use std::time::Duration;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

/// The Lease's name.
pub const LEASE_NAME: &str = "cluster-loop-controller";

/// Whether this replica leads now, as a watch channel.
pub struct Leadership {
    /// `true` while this replica leads (always, without leader election).
    pub leads: watch::Receiver<bool>,
    task: Option<
        tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
    >,
    _always: Option<watch::Sender<bool>>,
}

/// This replica's identity: `$POD_NAME` (the Downward API), else the host name, with the
/// process id.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "cluster-loop-controller".into());
    format!("{host}_{}", std::process::id())
}

impl Leadership {
    /// Without leader election: always leads.
    pub fn always() -> Leadership {
        let (tx, rx) = watch::channel(true);
        Leadership {
            leads: rx,
            task: None,
            _always: Some(tx),
        }
    }

    /// Runs for the Lease in `namespace`, with `duration`. Errors: the Lease cannot be read or
    /// created (RBAC: get, create, patch on leases in that namespace).
    pub async fn elect(
        client: Client,
        namespace: &str,
        duration: Duration,
    ) -> Result<Leadership, String> {
        let secs = duration.as_secs().max(3);
        let grace = (secs / 3).clamp(1, 5);
        let m = LeaseManagerBuilder::new(client, LEASE_NAME)
            .with_namespace(namespace)
            .with_identity(identity())
            .with_duration(secs)
            .with_grace(grace)
            .with_field_manager("cluster-loop-controller")
            .build()
            .await
            .map_err(|e| format!("leader election on Lease {namespace}/{LEASE_NAME}: {e}"))?;
        let (leads, task) = m.watch().await;
        Ok(Leadership {
            leads,
            task: Some(task),
            _always: None,
        })
    }

    /// Releases the Lease (graceful shutdown): drops the channel, so the manager's task
    /// releases it and ends; waits up to 5 s for that.
    pub async fn release(self) {
        let Leadership { leads, task, .. } = self;
        drop(leads);
        if let Some(t) = task {
            match tokio::time::timeout(Duration::from_secs(5), t).await {
                Ok(Ok(Ok(_))) => tracing::info!("Lease released"),
                Ok(Ok(Err(e))) => tracing::warn!(error = %e, "Lease not released"),
                Ok(Err(e)) => tracing::warn!(error = %e, "leader election task failed"),
                Err(_) => tracing::warn!("Lease not released within 5s"),
            }
        }
    }
}
