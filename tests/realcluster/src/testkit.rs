//! Helpers for tests on the real cluster: polling with a deadline and reading Flux objects the
//! way the assertions need them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Cluster, Error, FLUX_NS};

/// Polls `f` every 500 ms until it returns `Some`, and returns that.
/// Panics with `what` after `timeout` (a test helper: the panic is the test failure).
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < until,
            "timed out after {timeout:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The condition `type_` of `obj` (`status.conditions[]`), or `Value::Null`.
pub fn condition(obj: &Value, type_: &str) -> Value {
    obj["status"]["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == type_).cloned())
        .unwrap_or(Value::Null)
}

impl Cluster {
    /// `kubectl ARGS -o json`, parsed; `Value::Null` when kubectl fails or prints no JSON.
    /// The `get` forms the tests poll with are answered in process, over one kube client of
    /// this cluster (`crate::reads`: the same JSON, without a kubectl process per poll); any
    /// other form runs kubectl.
    pub fn get_json(&self, args: &[&str]) -> Value {
        if let Some(get) = crate::reads::GetArgs::parse(args) {
            let read = async {
                let reads = self
                    .reads
                    .get_or_try_init(|| async { self.client().await.map(crate::reads::Reads::new) })
                    .await
                    .map_err(|_| ())?;
                reads.get(&get, crate::FLUX_NS).await
            };
            // The cluster's own runtime drives the read (its client lives there); from inside
            // a caller's runtime (a #[tokio::test]) on a thread of its own, as tokio refuses
            // to block on one runtime inside another.
            let answer = if tokio::runtime::Handle::try_current().is_ok() {
                std::thread::scope(|s| s.spawn(|| self.rt.block_on(read)).join()).unwrap_or(Err(()))
            } else {
                self.rt.block_on(read)
            };
            if let Ok(v) = answer {
                return v;
            }
        }
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        self.kubectl(&a)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(Value::Null)
    }

    /// The Kustomization `name` in flux-system as JSON (`Value::Null` when absent).
    pub fn kustomization(&self, name: &str) -> Value {
        self.get_json(&["-n", FLUX_NS, "get", "kustomization", name])
    }

    /// Writes `<service_account>.kubeconfig` in the cluster's dir and returns its path: a
    /// kubeconfig that authenticates as ServiceAccount `namespace/service_account` with a real
    /// token from the TokenRequest API (`kubectl create token`, its default lifetime, 1 h),
    /// against this cluster's server and CA, its context's namespace `context_namespace` when
    /// given. The ServiceAccount and the RBAC it is meant to test must exist already.
    ///
    /// # Errors
    /// [`Error::Setup`] when the token request or the write fails.
    pub fn service_account_kubeconfig(
        &self,
        namespace: &str,
        service_account: &str,
        context_namespace: Option<&str>,
    ) -> Result<PathBuf, Error> {
        let token = self.kubectl(&["-n", namespace, "create", "token", service_account])?;
        let ns = context_namespace
            .map(|n| format!(", namespace: {n}"))
            .unwrap_or_default();
        let path = self.dir().join(format!("{service_account}.kubeconfig"));
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: {service_account}\n  user:\n    token: {}\ncontexts:\n- name: c\n  context: {{cluster: c, user: {service_account}{ns}}}\ncurrent-context: c\n",
            self.server(),
            self.dir().join("ca.crt").display(),
            token.trim()
        );
        std::fs::write(&path, yaml)
            .map_err(|e| Error::Setup(format!("writing {}: {e}", path.display())))?;
        Ok(path)
    }
}
