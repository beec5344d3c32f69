//! twin: the parts of cluster-loop's test cluster that are ours, because nothing real can run
//! in their place on our machines. Everything else is real and lives in `tests/realcluster`
//! (kube-apiserver on embedded etcd, kube-controller-manager, the Flux controllers).
//!
//! - [`git`]: our Git server, the real `git http-backend` behind our HTTP/HTTPS front (auth,
//!   TLS with a generated CA, faults such as a delay): the fleets the real source-controller
//!   fetches, cutover's old and new servers, the demo.
//! - [`podexec`]: the pod runtime, the kubelet half that runs probe-image pods (alpine,
//!   busybox, alpine/git, nicolaka/netshoot) for real in network and mount namespaces, with
//!   dnsmasq as the cluster DNS (from the real `kube-system/coredns` ConfigMap and Services) and
//!   as the node's upstream resolver. A client of any API server through [`podexec::PodApi`];
//!   `tests/realcluster` implements it over kube-rs for its node agent.
//! - [`workload`]: the registry list (which images the node can pull) and the container
//!   runtime's image reference normalisation, for the node agent.
//! - [`flux::cluster`]: [`flux::cluster::ObjKey`] and small JSON helpers the runtime and its
//!   clients share.
//! - [`testkit`]: running a plugin binary as a process in tests (deadline, SIGINT, an API
//!   endpoint that never answers).
//!
//! The in-memory Kubernetes API server that stood in for kube-apiserver (store, discovery,
//! tables, protobuf, patch emulation, selectors, token rules, faults) was retired in session 6
//! once nothing used it; see `tests/twin/README.md`.

pub mod flux;
pub mod git;
pub mod podexec;
pub mod testkit;
pub mod workload;
