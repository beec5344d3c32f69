//! Cluster access helpers shared by the pod runtime and the API server: the [`cluster::Cluster`]
//! trait over the in-memory store, [`cluster::ObjKey`], JSON pointer reads and Events. The
//! source- and kustomize-controller models that lived here were retired in session 5: the real
//! controllers run in tests/realcluster.

pub mod cluster;
