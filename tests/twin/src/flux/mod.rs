//! Object identity and JSON reads shared by the pod runtime ([`crate::podexec`]) and its API
//! clients ([`cluster::ObjKey`], [`cluster::s`]). The source- and kustomize-controller models
//! that lived here were retired in session 5 (the real controllers run in tests/realcluster),
//! the object API over the in-memory store in session 6.

pub mod cluster;
