//! A work queue with controller-runtime (client-go `workqueue`) semantics: a key is never
//! processed by two workers at once; adding a key that is being processed only marks it dirty
//! and it is queued again when its run is `done`; adding a key already waiting is a no-op;
//! `add_after` queues it after a delay (the `RequeueAfter` of a reconcile result).
//! Source: k8s.io/client-go util/workqueue queue.go (`Add`, `Get`, `Done`, dirty/processing sets).

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    shut_down: bool,
}

/// The queue; clone handles share it.
pub struct WorkQueue<K> {
    state: Arc<Mutex<State<K>>>,
    notify: Arc<Notify>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            state: self.state.clone(),
            notify: self.notify.clone(),
        }
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// An empty queue.
    pub fn new() -> Self {
        WorkQueue {
            state: Arc::new(Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                shut_down: false,
            })),
            notify: Arc::new(Notify::new()),
        }
    }

    /// Queues `key` (workqueue `Add`).
    pub fn add(&self, key: K) {
        let mut st = self.state.lock().unwrap();
        if st.shut_down || st.dirty.contains(&key) {
            return;
        }
        st.dirty.insert(key.clone());
        if st.processing.contains(&key) {
            return;
        }
        st.queue.push_back(key);
        drop(st);
        self.notify.notify_one();
    }

    /// Queues `key` after `delay` (`AddAfter`).
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let q = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            q.add(key);
        });
    }

    /// True while `key` is being processed.
    pub fn is_processing(&self, key: &K) -> bool {
        self.state.lock().unwrap().processing.contains(key)
    }

    /// Waits for the next key (`Get`); `None` after [`WorkQueue::shut_down`].
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            {
                let mut st = self.state.lock().unwrap();
                if st.shut_down {
                    return None;
                }
                if let Some(k) = st.queue.pop_front() {
                    st.dirty.remove(&k);
                    st.processing.insert(k.clone());
                    if !st.queue.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some(k);
                }
            }
            notified.await;
        }
    }

    /// Marks the run of `key` finished (`Done`): re-queues it when it was added meanwhile.
    pub fn done(&self, key: &K) {
        let mut st = self.state.lock().unwrap();
        st.processing.remove(key);
        if st.dirty.contains(key) && !st.shut_down {
            st.queue.push_back(key.clone());
            drop(st);
            self.notify.notify_one();
        }
    }

    /// Stops the queue: `get` returns `None`, adds are dropped.
    pub fn shut_down(&self) {
        self.state.lock().unwrap().shut_down = true;
        self.notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dedup_and_dirty_requeue() {
        let q: WorkQueue<&str> = WorkQueue::new();
        q.add("a");
        q.add("a");
        let k = q.get().await.unwrap();
        assert_eq!(k, "a");
        assert!(q.is_processing(&"a"));
        // while processing: marked dirty only, not handed to another worker
        q.add("a");
        q.add("b");
        assert_eq!(q.get().await.unwrap(), "b");
        q.done(&"b");
        q.done(&"a");
        assert_eq!(q.get().await.unwrap(), "a");
        q.shut_down();
        assert!(q.get().await.is_none());
    }
}
