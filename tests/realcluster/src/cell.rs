//! A cluster shared by the tests that use it at the same time ([`ClusterCell`]): started by the
//! first [`Lease`], stopped [`LINGER`] after the last lease is dropped, started again (the same
//! way) by a later lease.
//!
//! Why not a `static OnceLock<Cluster>`: a test binary's statics are never dropped, so every
//! cluster a group of tests started stayed up, idle, until the binary ended. In the one test
//! binary of every cluster-facing test (tests/real) that was up to 14 clusters idling for minutes
//! after their tests were done, on a 2-core machine where the suite is CPU-bound (an idle cluster
//! costs 4.4 % of a core: `cargo run -p realcluster --example start -- 1 --idle 60`).
//!
//! What a test sets up on a cluster once (objects every test of the group reads, a source's
//! revision) belongs to that cluster, not to a static: [`Cluster::memo`] keeps it with the
//! cluster, so a cluster started again is set up again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Cluster, Error};

/// How long a cluster stays up after its last lease is dropped, for a test of the same group
/// that starts right after (libtest starts tests in name order, as slots free up). A start
/// costs about 6 CPU-seconds and 7 to 15 s of wall time; an idle cluster 0.044 CPU-s/s.
pub const LINGER: Duration = Duration::from_secs(20);

/// The cluster of a group of tests, e.g. `static CLUSTER: ClusterCell = ClusterCell::new();`.
/// See the module docs. `T` is the cluster's type (another only in this module's tests).
pub struct ClusterCell<T: Send + Sync + 'static = Cluster> {
    state: Mutex<State<T>>,
    linger: Duration,
}

struct State<T> {
    /// The running cluster, while leased or lingering.
    live: Option<Arc<T>>,
    /// Leases out now.
    leases: usize,
    /// Bumped on each release to zero leases: a linger timer stops the cluster only if no
    /// lease was taken (and released) since it was armed.
    generation: u64,
    /// The start error, returned to every later lease (a start is not retried).
    failed: Option<String>,
}

impl ClusterCell<Cluster> {
    /// An empty cell (usable in a `static`) whose cluster stops [`LINGER`] after its last
    /// lease.
    pub const fn new() -> ClusterCell<Cluster> {
        ClusterCell::with_linger(LINGER)
    }
}

impl<T: Send + Sync + 'static> ClusterCell<T> {
    /// An empty cell whose cluster stops `linger` after its last lease.
    pub const fn with_linger(linger: Duration) -> ClusterCell<T> {
        ClusterCell {
            state: Mutex::new(State {
                live: None,
                leases: 0,
                generation: 0,
                failed: None,
            }),
            linger,
        }
    }

    /// A lease on the cell's cluster, made by `start` when none runs. `start` runs on a thread
    /// of its own, as [`Cluster::start`] runs a runtime of its own, which tokio refuses inside
    /// a caller's runtime (a `#[tokio::test]`); other callers wait for it. Errors: the start
    /// error's text (a panicking `start`: "cluster start panicked"), the same on every later
    /// call.
    pub fn lease(
        &'static self,
        start: impl FnOnce() -> Result<T, Error> + Send + 'static,
    ) -> Result<Lease<T>, String> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = &st.failed {
            return Err(e.clone());
        }
        let cluster = match &st.live {
            Some(c) => c.clone(),
            None => {
                let started = std::thread::spawn(start)
                    .join()
                    .unwrap_or_else(|_| Err(Error::Setup("cluster start panicked".into())));
                match started {
                    Ok(c) => {
                        let c = Arc::new(c);
                        st.live = Some(c.clone());
                        c
                    }
                    Err(e) => {
                        let e = e.to_string();
                        st.failed = Some(e.clone());
                        return Err(e);
                    }
                }
            }
        };
        st.leases += 1;
        Ok(Lease {
            cluster,
            cell: self,
        })
    }

    fn release(&'static self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.leases -= 1;
        if st.leases > 0 {
            return;
        }
        st.generation += 1;
        let armed = st.generation;
        drop(st);
        let linger = self.linger;
        std::thread::spawn(move || {
            std::thread::sleep(linger);
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.leases == 0 && st.generation == armed {
                let stopped = st.live.take();
                drop(st);
                // Outside the lock: stopping takes a moment, and a new lease may start the
                // next cluster meanwhile.
                drop(stopped);
            }
        });
    }
}

impl Default for ClusterCell<Cluster> {
    fn default() -> Self {
        ClusterCell::new()
    }
}

/// A test's hold on a [`ClusterCell`]'s cluster (dereferences to [`Cluster`]); the cluster
/// stays up while any lease is held. Clone it to hand the cluster to a thread.
pub struct Lease<T: Send + Sync + 'static = Cluster> {
    cluster: Arc<T>,
    cell: &'static ClusterCell<T>,
}

impl<T: Send + Sync + 'static> std::ops::Deref for Lease<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.cluster
    }
}

impl<T: Send + Sync + 'static> Clone for Lease<T> {
    fn clone(&self) -> Lease<T> {
        self.cell
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leases += 1;
        Lease {
            cluster: self.cluster.clone(),
            cell: self.cell,
        }
    }
}

impl<T: Send + Sync + 'static> Drop for Lease<T> {
    fn drop(&mut self) {
        self.cell.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A stand-in cluster that counts its starts and stops.
    struct Counted(&'static AtomicUsize);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    const SHORT: Duration = Duration::from_millis(200);

    /// Polls `f` every 10 ms for up to 10 s (the linger thread runs on its own schedule).
    fn within(f: impl Fn() -> bool) -> bool {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < until {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn leases_share_one_cluster_which_stops_after_the_last_and_starts_again() {
        static CELL: ClusterCell<Counted> = ClusterCell::with_linger(SHORT);
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        static STOPS: AtomicUsize = AtomicUsize::new(0);
        let start = || {
            STARTS.fetch_add(1, Ordering::SeqCst);
            Ok(Counted(&STOPS))
        };
        let a = CELL.lease(start).unwrap();
        let b = CELL.lease(start).unwrap();
        let c = b.clone();
        assert!(Arc::ptr_eq(&a.cluster, &b.cluster) && Arc::ptr_eq(&b.cluster, &c.cluster));
        assert_eq!(STARTS.load(Ordering::SeqCst), 1);
        drop((a, b));
        // Still held by the clone: never stopped, however long it is held.
        std::thread::sleep(SHORT * 3);
        assert_eq!(STOPS.load(Ordering::SeqCst), 0);
        drop(c);
        assert!(
            within(|| STOPS.load(Ordering::SeqCst) == 1),
            "stopped after the linger"
        );
        let d = CELL.lease(start).unwrap();
        assert_eq!(
            STARTS.load(Ordering::SeqCst),
            2,
            "a later lease starts it again"
        );
        drop(d);
        assert!(within(|| STOPS.load(Ordering::SeqCst) == 2));
    }

    #[test]
    fn a_lease_within_the_linger_keeps_the_running_cluster() {
        static CELL: ClusterCell<Counted> = ClusterCell::with_linger(Duration::from_secs(2));
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        static STOPS: AtomicUsize = AtomicUsize::new(0);
        let start = || {
            STARTS.fetch_add(1, Ordering::SeqCst);
            Ok(Counted(&STOPS))
        };
        drop(CELL.lease(start).unwrap());
        let again = CELL.lease(start).unwrap();
        // The first release's linger timer ends while `again` is held: it must not stop it.
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(
            (STARTS.load(Ordering::SeqCst), STOPS.load(Ordering::SeqCst)),
            (1, 0)
        );
        drop(again);
    }

    #[test]
    fn a_failed_start_is_returned_to_every_later_lease_without_a_retry() {
        static CELL: ClusterCell<Counted> = ClusterCell::with_linger(SHORT);
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        let failing = || {
            STARTS.fetch_add(1, Ordering::SeqCst);
            Err(Error::Setup("no etcd".into()))
        };
        assert_eq!(CELL.lease(failing).err().unwrap(), "realcluster: no etcd");
        assert_eq!(CELL.lease(failing).err().unwrap(), "realcluster: no etcd");
        let panicking = || -> Result<Counted, Error> { panic!("boom") };
        static CELL2: ClusterCell<Counted> = ClusterCell::with_linger(SHORT);
        assert_eq!(
            CELL2.lease(panicking).err().unwrap(),
            "realcluster: cluster start panicked"
        );
        assert_eq!(STARTS.load(Ordering::SeqCst), 1);
    }
}
